# SPDX-License-Identifier: MIT
"""The gather rule against a real voltd, once per I/O backend
(doc/runtime.md, "Searching and parking"; doc/server.md, the accept row):
new connections go to the workers that are busy, one more while the rule
spreads, at least one, by a classic BPF program on the listeners'
SO_REUSEPORT group. An idle daemon (nothing saturated) takes every new
connection on worker 0; with scheduler.gather=off the kernel spreads them
over both workers, as before; the setting is live (the daemon's tick
applies it to the listeners, within a second)."""
import http.client
import time

from ctlutil import ctl
from httputil import backend, voltd  # noqa: F401

CONNS = 40


def accepts(d):
    r = ctl(d, "stats io")
    assert r["ok"], r
    return [w["accepts"] for w in r["io"]["workers"]]


def runtime(d):
    r = ctl(d, "stats")
    assert r["ok"], r
    return r["runtime"]


def connect_n(d, n):
    """n new connections, one request each, one after another."""
    for _ in range(n):
        c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
        c.request("GET", "/healthz")
        r = c.getresponse()
        assert r.status == 200
        r.read()
        c.close()


def until(what, fn, timeout=15):
    """fn() until it is true, bounded: the daemon's tick applies a change
    to the listeners within a second."""
    end = time.monotonic() + timeout
    while not fn():
        assert time.monotonic() < end, "timed out waiting for " + what
        time.sleep(0.05)


def test_idle_daemon_takes_connections_on_one_worker(voltd):
    d = voltd()
    a0 = accepts(d)
    connect_n(d, CONNS)
    a1 = accepts(d)
    rt = runtime(d)
    print("accepts per worker: %s; runtime %s" % ([x - y for x, y in zip(a1, a0)],
                                                  {k: v for k, v in rt.items() if "spread" in k}))
    assert a1[0] - a0[0] == CONNS
    assert a1[1] == a0[1]
    assert rt["spread_width"] == 1 and rt["spreading"] == 0


def test_gather_off_spreads_connections(voltd):
    d = voltd("-s", "scheduler.gather=off")
    connect_n(d, CONNS)
    a = accepts(d)
    print("accepts per worker: %s" % a)
    # The kernel's hash over 40 connections: all on one worker has a
    # chance of 2 in 2^40.
    assert a[0] > 0 and a[1] > 0
    assert runtime(d)["spread_width"] == 2


def test_gather_is_live(voltd):
    d = voltd()
    r = ctl(d, "set scheduler.gather off")
    assert r["ok"], r

    def spread():
        connect_n(d, 4)
        return accepts(d)[1] > 0

    until("connections on worker 1 with gather off", spread)
    r = ctl(d, "set scheduler.gather on")
    assert r["ok"], r

    def gathered():
        a0 = accepts(d)
        connect_n(d, 20)
        return accepts(d)[1] == a0[1]

    until("20 connections in a row on worker 0 with gather on again", gathered)
