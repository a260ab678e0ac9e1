# SPDX-License-Identifier: MIT
"""The runtime <-> I/O driver seam against a real voltd, once per I/O
backend (issue 13): futile wakeups (unparks after which a worker found no
task and parked again, `futile_wakeups` in `stats workers`): none at all
while the daemon is idle, after traffic. Per request, on one sequential
keep-alive connection and on one pipelined connection (depth 16), they are
a figure, not an assertion: whether a wake-up is worth it depends on the
measured poll time, so the count moves with the machine's load (0-0.02
measured on an idle-ish machine); each case prints it against its target
(0.01 sequential: one task at a time is never worth a wake-up; 0.1
pipelined) for bench/bounds."""
import time

import pytest

from ctlutil import ctl
from httputil import Reader, backend, connect, req_bytes, stop, voltd  # noqa: F401

REQUESTS = 2000
DEPTH = 16


def futile(d):
    r = ctl(d, "stats workers")
    assert r["ok"], r
    return sum(w["futile_wakeups"] for w in r["workers"]), sum(w["unparks"] for w in r["workers"])


def sequential(port, n):
    s = connect(port)
    try:
        rd = Reader(s)
        for _ in range(n):
            s.sendall(req_bytes("POST", "/v1/echo", b"ping"))
            r = rd.response()
            assert r.status == 200 and r.body == b"ping", r
    finally:
        s.close()


def pipelined(port, n, depth):
    s = connect(port)
    try:
        rd = Reader(s)
        batch = req_bytes("POST", "/v1/echo", b"ping") * depth
        for _ in range(n // depth):
            s.sendall(batch)
            for _ in range(depth):
                r = rd.response()
                assert r.status == 200 and r.body == b"ping", r
    finally:
        s.close()


@pytest.mark.parametrize("mode", ["sequential", "pipelined"])
def test_futile_wakeups_per_request(voltd, mode):
    d = voltd()
    sequential(d.port, 50)  # warm up: accept, buffers, first parks
    f0, u0 = futile(d)
    if mode == "sequential":
        sequential(d.port, REQUESTS)
    else:
        pipelined(d.port, REQUESTS, DEPTH)
    f1, u1 = futile(d)
    print("%s %s: %d futile wakeups, %d unparks in %d requests" % (d.backend, mode, f1 - f0, u1 - u0, REQUESTS))
    target = 0.01 if mode == "sequential" else 0.1
    print("bound: test_seam futile_per_request_%s_%s %.4f <= %s" % (mode, d.backend, (f1 - f0) / REQUESTS, target))
    st = stop(d)
    assert st["requests"] >= REQUESTS


def slices(d):
    r = ctl(d, "stats workers")
    assert r["ok"], r
    return {k: sum(w[k] for w in r["workers"]) for k in ("futile_wakeups", "yields", "resumes")}


def test_sliced_job_alone_runs_on(voltd):
    """One /v1/spin of ~100 ms on an idle daemon (issue 19, the slice rule):
    with nothing else waiting its slices run back to back on one worker,
    none is queued behind other work (yields) and none wakes the idle worker
    (futile wake-ups: 949 with io_uring, 325 with libev before, one per
    slice; review N2). A request's own start may cost a wake-up or a
    yield, hence the 2."""
    d = voltd()
    sequential(d.port, 50)  # warm up: accept, buffers, first parks
    a = slices(d)
    s = connect(d.port)
    try:
        s.sendall(req_bytes("GET", "/v1/spin?n=50000000"))
        r = Reader(s).response()
        assert r.status == 200, r
    finally:
        s.close()
    b = slices(d)
    n = {k: b[k] - a[k] for k in a}
    print("%s: one spin of 5e7: %s" % (d.backend, n))
    assert n["resumes"] >= 100, n  # it was sliced, and the slices ran on
    assert n["yields"] <= 2, n
    assert n["futile_wakeups"] <= 2, n


def test_no_futile_wakeup_when_idle(voltd):
    """After traffic, an idle daemon wakes no worker for nothing: the park
    rule (no timeout with nothing queued) and the wake rule leave no
    unpark to find an empty queue."""
    d = voltd()
    sequential(d.port, 200)
    pipelined(d.port, 320, DEPTH)
    time.sleep(1.0)  # the quiet-send collection (500 ms) and closes are done
    f0, u0 = futile(d)
    time.sleep(2.0)
    f1, u1 = futile(d)
    print("%s idle 2 s: %d futile wakeups, %d unparks" % (d.backend, f1 - f0, u1 - u0))
    assert f1 == f0, (f0, f1, u0, u1)
    stop(d)


def enters(d):
    r = ctl(d, "stats")
    assert r["ok"], r
    io = r["io"]
    n = {k: sum(w[k] for w in io["workers"])
         for k in ("enters", "quiet_wait_short", "flushes", "parks", "park_wakeups_io")}
    return n, io["reason"]


def healthz(s, rd, n):
    for _ in range(n):
        s.sendall(req_bytes("GET", "/healthz"))
        r = rd.response()
        assert r.status == 200, r


def test_enters_per_request(voltd):
    """Workload A's request on one keep-alive connection: at most one
    io_uring_enter per request (issue 20 item 1). The park's poll leaves
    the response's send queued and the park's wait submits it in the enter
    that sleeps; the wait asks for one completion more than the quiet
    sends it submits (the kernel's min-timeout wait, 6.12), so the send's
    own completion does not end it. Enters the io counters explain (a
    client slower than that wait's 1 ms bound, a preempted worker's flush,
    a park no I/O ended) are one each and not counted against the bound:
    the figures are printed. libev makes no io_uring_enter at all."""
    d = voltd()
    s = connect(d.port)
    try:
        rd = Reader(s)
        healthz(s, rd, 50)  # warm up
        n0, reason = enters(d)
        healthz(s, rd, REQUESTS)
        n1, _ = enters(d)
    finally:
        s.close()
    n = {k: n1[k] - n0[k] for k in n0}
    print("%s: %d io_uring_enter in %d requests (%.3f per request); %s; %s"
          % (d.backend, n["enters"], REQUESTS, n["enters"] / REQUESTS, n, reason))
    if d.backend == "libev":
        assert n1["enters"] == 0
        return
    if "min-timeout" not in reason:
        pytest.skip("kernel lacks IORING_FEAT_MIN_TIMEOUT (6.12): two enters per request")
    # At most one enter per request, besides those the counters explain,
    # each one enter more whatever the machine's load: a park wait the
    # client let run out (quiet_wait_short), a flush (a send queued 200 us
    # before its park: the worker was preempted), a park that no I/O ended
    # (the sibling's park_timeout while this worker ran, a timer).
    # How many of them there are is the client's pace (every request of a
    # client slower than 1 ms has its quiet_wait_short), so nothing is
    # asserted about it. The old two enters per request still fail: there
    # the send's own completion ended the park's wait (park_wakeups_io, no
    # quiet_wait_short), so the second enter of each request is unexplained.
    extra = n["quiet_wait_short"] + n["flushes"] + (n["parks"] - n["park_wakeups_io"])
    assert n["enters"] - extra <= REQUESTS, (n, REQUESTS)


def hist_count(d, name):
    r = ctl(d, "hist %s" % name)
    assert r["ok"], r
    return sum(b["count"] for b in r["buckets"]), r["summary"]


def test_io_histograms(voltd):
    """The driver's rx_tx histogram (request bytes reaped to the response's
    send submitted) gets one value per keep-alive request, and sq_wait one
    per submitting io_uring_enter; cq_lag (completions found waiting by a
    running worker) answers; libev records none. Counts only: the times
    are printed."""
    d = voltd()
    s = connect(d.port)
    try:
        rd = Reader(s)
        healthz(s, rd, 50)
        r0, _ = hist_count(d, "rx_tx")
        q0, _ = hist_count(d, "sq_wait")
        healthz(s, rd, 500)
        r1, rs = hist_count(d, "rx_tx")
        q1, qs = hist_count(d, "sq_wait")
    finally:
        s.close()
    print("%s: rx_tx %d values %s; sq_wait %d values %s" % (d.backend, r1 - r0, rs, q1 - q0, qs))
    if d.backend == "libev":
        assert r1 == 0 and q1 == 0
        return
    assert r1 - r0 == 500, (r0, r1)
    assert q1 - q0 >= 500, (q0, q1)
    r = ctl(d, "hist rx_tx 1")
    assert r["ok"] and r["worker"] == 1, r
    r = ctl(d, "hist cq_lag")
    assert r["ok"] and r["name"] == "cq_lag", r
    r = ctl(d, "hist sq_wait 7")
    assert not r["ok"], r
