# SPDX-License-Identifier: MIT
"""Request tracing (voltctl trace, doc/server.md "Tracing"): off by default;
`trace N` samples one request in N; a record has a stamp at each hand-over
a request passed, in the order it passed them, the client's own send time
from its trace_t0 parameter, the workers that handled it and its slices;
`trace dump` moves the records out; `trace 0` stops sampling. Both
backends (the driver stamps the send's hand-over and completion)."""
import time

from ctlutil import ctl, validator
from httputil import backend, connect, req_bytes, Reader, request, voltd  # noqa: F401 (fixtures)

# "reap" comes before "run" with io_uring (the completion is reaped, then the
# task runs); with libev a receive that finds the bytes at once is made in
# the task's poll, so only "reap" <= "parsed" holds on both.
JOB_PATH = ["run", "parsed", "queued", "exec", "slice1", "done", "writer", "deposit", "collect",
            "send", "enter", "sent", "end"]
OWN_PATH = ["run", "parsed", "collect", "send", "enter", "sent", "end"]


def dump(d, want, timeout=10):
    """Records until `want` have come (a record is finished when its send is
    collected: a keep-alive connection's quiet send at the next request or
    its timer)."""
    recs, deadline = [], time.monotonic() + timeout
    check = validator(d)
    while True:
        r = check(ctl(d, "trace dump"))
        recs += r["records"]
        if len(recs) >= want or time.monotonic() > deadline:
            return r, recs
        time.sleep(0.05)


def stamps(r, points):
    return {p: r["t"][points.index(p)] for p in points}


def test_off_by_default(voltd):
    d = voltd()
    assert request(d.port, "GET", "/healthz").status == 200
    r = ctl(d, "trace")
    assert r["every"] == 0 and r["sampled"] == 0 and r["pending"] == 0, r


def test_every_request_traced_in_order(voltd):
    d = voltd("-s", "scheduler.workers=2")
    assert ctl(d, "trace 1")["every"] == 1
    t0 = time.monotonic_ns()
    assert request(d.port, "GET", "/v1/spin?n=3000000&trace_t0=%d" % t0).status == 200
    assert request(d.port, "GET", "/healthz").status == 200
    r, recs = dump(d, 2)
    points = r["points"]
    assert points[0] == "client" and len(points) == len(recs[0]["t"])
    assert len(recs) == 2, recs
    spin = [x for x in recs if x["kind"] == "spin"][0]
    own = [x for x in recs if x["kind"] == "healthz"][0]
    assert spin["status"] == 200 and own["status"] == 200
    s = stamps(spin, points)
    # the client's time as it sent it, before voltd's own stamps
    assert s["client"] == t0
    seq = [s[p] for p in JOB_PATH]
    assert all(x > 0 for x in seq) and seq == sorted(seq), list(zip(JOB_PATH, seq))
    assert t0 <= s["reap"] <= s["parsed"]
    assert spin["slices"] >= 1 and 0 < spin["run_ns"] <= s["done"] - s["slice1"], spin
    assert all(0 <= w < 2 for w in spin["workers"]), spin
    # answered by the connection: no job stamps, no client time
    o = stamps(own, points)
    assert own["t"][0] == 0 and o["queued"] == 0 and o["exec"] == 0 and own["slices"] == 0, own
    seq = [o[p] for p in OWN_PATH]
    assert all(x > 0 for x in seq) and seq == sorted(seq), list(zip(OWN_PATH, seq))
    assert 0 < o["reap"] <= o["parsed"], own
    assert own["workers"][1] == -1 and own["workers"][2] == -1, own
    st = ctl(d, "trace")
    assert st["sampled"] == 2 and st["finished"] == 2 and st["pending"] == 0 and st["lost"] == 0, st


def test_one_in_n_and_off(voltd):
    d = voltd("-s", "scheduler.workers=1")
    ctl(d, "trace 4")
    s = connect(d.port)
    rd = Reader(s)
    for _ in range(40):
        s.sendall(req_bytes("GET", "/healthz"))
        assert rd.response().status == 200
    s.close()
    _, recs = dump(d, 10)
    # one worker parses them all: exactly one in four
    assert len(recs) == 10 and ctl(d, "trace")["sampled"] == 10, recs
    ctl(d, "trace 0")
    for _ in range(8):
        assert request(d.port, "GET", "/healthz").status == 200
    st = ctl(d, "trace")
    assert st["every"] == 0 and st["sampled"] == 10 and st["pending"] == 0, st


def test_bad_arguments(voltd):
    d = voltd()
    for line in ["trace x", "trace -1", "trace 1000001", "trace dump 0", "trace dump x", "trace 4 4"]:
        r = ctl(d, line)
        assert r["ok"] is False and r["code"] == "usage", (line, r)
