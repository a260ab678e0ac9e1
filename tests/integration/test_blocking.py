# SPDX-License-Identifier: MIT
"""The blocking pool, against a real voltd with the test module
tests/modules/pool.c loaded from [module.pool] (the blocking kind `block`),
on both backends:

- with every blocking thread busy for seconds (one runtime worker), light
  requests are answered before any blocking one ends, and the blocking
  jobs run on pool threads (thread_index past the workers');
- the pool's queue pushes back as stages.on_full says: shed (503 with
  Retry-After, blocking_shed), wait (the connection waits its turn; the
  queue's send_waits), codel (refusals once its wait stands);
- a drain with blocking jobs running and queued answers or counts every
  one (requests == responses + dropped, checked by every stop here).
No timing is asserted: the blocking jobs last seconds so that what must
happen meanwhile has room to, and the ordering of events is checked."""
import os
import re
import threading
import time

from conftest import BUILDDIR
from ctlutil import ctl
from httputil import backend, request, stop, voltd  # noqa: F401

MODDIR = os.path.join(BUILDDIR, "tests", "modules")
BLOCK_MS = 4000


def conf(tmp_path, modules="", sections="[module.pool]\n"):
    """A configuration loading the test modules; `modules` goes into
    [modules]."""
    p = tmp_path / "voltd.conf"
    p.write_text("[modules]\ndir = %s\n%s\n%s" % (MODDIR, modules, sections))
    return p


def stats(d, section=None):
    return ctl(d, "stats" + (" " + section if section else ""))


def wait_for(fn, timeout=15, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


def in_thread(port, target, out, key):
    """GET target in a thread: out[key] = (response, when), or (the
    error, when) for a connection the drain cut."""
    def run():
        try:
            out[key] = (request(port, "GET", target), time.monotonic())
        except (EOFError, OSError) as e:
            out[key] = (e, time.monotonic())
    th = threading.Thread(target=run)
    th.start()
    return th


def test_light_answered_while_every_blocking_thread_busy(voltd, tmp_path):  # noqa: F811
    d = voltd("-c", str(conf(tmp_path, "blocking_threads = 2\n")), "-s", "scheduler.workers=1")
    out = {}
    blocks = [in_thread(d.port, "/block?ms=%d&id=%d" % (BLOCK_MS, i), out, i) for i in range(2)]
    wait_for(lambda: stats(d, "server")["server"]["blocking_busy"] == 2, what="both pool threads busy")
    # A third waits in the pool's queue: no thread takes it meanwhile.
    third = in_thread(d.port, "/block?ms=1&id=2", out, 2)
    wait_for(lambda: stats(d, "channels")["channels"]["blocking"]["len"] == 1, what="a queued blocking job")
    lights = []
    for i in range(20):
        r = request(d.port, "GET", "/v1/spin?n=%d" % (10 if i % 2 else 1000))
        lights.append((r.status, time.monotonic()))
    for th in blocks + [third]:
        th.join(30)
    ends = [out[i][1] for i in range(3)]
    assert all(s == 200 for s, _ in lights), lights
    # Every light request was answered while the blocking ones still ran.
    assert max(t for _, t in lights) < min(ends), (lights, ends)
    for i in range(3):
        r = out[i][0]
        assert r.status == 200, r
        m = re.match(rb"block %d on thread (\d+)\n" % i, r.body)
        # Pool threads' indexes follow the one worker's (0): 1 and 2.
        assert m and int(m.group(1)) in (1, 2), r.body
    # The queued one was taken only when a thread came free.
    assert ends[2] >= min(ends[0], ends[1])
    # (a thread counts itself idle just after it handed its answer over)
    st = wait_for(lambda: (lambda s: s if s["blocking_busy"] == 0 else None)(stats(d, "server")["server"]),
                  what="the pool idle")
    assert st["blocking_threads"] == 2 and st["blocking_jobs"] == 3, st
    st = stop(d)
    assert st["blocking_jobs"] == 3


def test_queue_full_shed_answers_503(voltd, tmp_path):  # noqa: F811
    d = voltd("-c", str(conf(tmp_path, "blocking_threads = 1\nblocking_queue = 1\n")),
              "-s", "stages.on_full=shed", "-s", "stages.retry_after_s=3")
    out = {}
    busy = in_thread(d.port, "/block?ms=%d&id=0" % BLOCK_MS, out, 0)
    wait_for(lambda: stats(d, "server")["server"]["blocking_busy"] == 1, what="the pool thread busy")
    queued = in_thread(d.port, "/block?ms=1&id=1", out, 1)
    wait_for(lambda: stats(d, "channels")["channels"]["blocking"]["len"] == 1, what="a queued job")
    r = request(d.port, "GET", "/block?ms=1&id=2")
    assert r.status == 503 and r.header("Retry-After") == "3", r
    # Light requests are not refused: only the pool's queue is full.
    assert request(d.port, "GET", "/v1/spin?n=10").status == 200
    busy.join(30)
    queued.join(30)
    assert out[0][0].status == 200 and out[1][0].status == 200, out
    st = stop(d)
    assert st["blocking_shed"] == 1 and st["shed"] == 1 and st["blocking_full_events"] >= 1, st


def test_queue_full_wait_stops_reading_until_room(voltd, tmp_path):  # noqa: F811
    d = voltd("-c", str(conf(tmp_path, "blocking_threads = 1\nblocking_queue = 1\n")), "-s", "stages.on_full=wait")
    out = {}
    busy = in_thread(d.port, "/block?ms=%d&id=0" % BLOCK_MS, out, 0)
    wait_for(lambda: stats(d, "server")["server"]["blocking_busy"] == 1, what="the pool thread busy")
    queued = in_thread(d.port, "/block?ms=1&id=1", out, 1)
    wait_for(lambda: stats(d, "channels")["channels"]["blocking"]["len"] == 1, what="a queued job")
    waiting = in_thread(d.port, "/block?ms=1&id=2", out, 2)
    # Its connection waits for room in the queue (a waiter registered).
    wait_for(lambda: stats(d, "channels")["channels"]["blocking"]["send_waits"] >= 1, what="a send waiting")
    assert 0 not in out and 2 not in out
    for th in (busy, queued, waiting):
        th.join(30)
    assert [out[i][0].status for i in range(3)] == [200, 200, 200], out
    assert out[2][1] >= out[0][1], out
    st = stop(d)
    assert st["shed"] == 0 and st["blocking_jobs"] == 3, st


def test_codel_refuses_a_standing_pool_queue(voltd, tmp_path):  # noqa: F811
    d = voltd("-c", str(conf(tmp_path, "blocking_threads = 1\nblocking_queue = 64\n")), "-s", "stages.on_full=codel",
              "-s", "stages.codel_target_ms=5", "-s", "stages.codel_interval_ms=50")
    out = {}
    ths = [in_thread(d.port, "/block?ms=60&id=%d" % i, out, i) for i in range(30)]
    for th in ths:
        th.join(60)
    codes = sorted(out[i][0].status for i in range(30))
    assert set(codes) <= {200, 503} and 503 in codes and 200 in codes, codes
    st = stop(d)
    assert st["delay_shed"] >= 1 and st["blocking_shed"] == codes.count(503), st


def test_drain_answers_or_counts_every_blocking_job(voltd, tmp_path):  # noqa: F811
    d = voltd("-c", str(conf(tmp_path, "blocking_threads = 1\n")), "-s", "server.drain_timeout_ms=500",
              "-s", "server.shutdown_delay_ms=0")
    out = {}
    # One running past the drain's timeout (its connection is cut), one
    # sleeping (SLEEP on the pool thread) queued behind it, one queued.
    ths = [in_thread(d.port, "/block?ms=1500&id=0", out, 0)]
    wait_for(lambda: stats(d, "server")["server"]["blocking_busy"] == 1, what="the pool thread busy")
    ths.append(in_thread(d.port, "/block?ms=1&sleep=2000&id=1", out, 1))
    ths.append(in_thread(d.port, "/block?ms=1&more=3&id=2", out, 2))
    wait_for(lambda: stats(d, "channels")["channels"]["blocking"]["len"] == 2, what="two queued jobs")
    st = stop(d)  # requests == responses + dropped, nothing in flight
    for th in ths:
        th.join(30)
    assert st["requests"] == 3 and st["requests_dropped"] + st["responses_2xx"] == 3, st
    assert st["requests_dropped"] >= 1, st
