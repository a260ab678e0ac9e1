# SPDX-License-Identifier: MIT
"""The shared-line audit (src/base/lineaudit.h, a --enable-line-audit build)
against a real voltd, once per I/O backend: writes to cache lines that
several workers write, per request, on one sequential keep-alive
connection (issue 20 item 6). Counts, not timing.

  - GET /healthz: no write to a channel, the body budget, the connection
    count, the registry, the pool or /readyz's read of the jobs channel
    (each exactly 0); what is left is the runtime's idle word, written
    when a worker parks between two sequential requests: at most IDLE_MAX
    per park cycle (the searcher's CAS, leaving searching, the park's RMW,
    the unmark; measured 4.00), and the other sites at most OTHER_SLACK
    per request in all (measured 0).
  - GET /readyz: exactly one read of the jobs channel's length per request
    (srv_ready_read), which GET /healthz and the routed jobs no longer do.
  - POST /v1/echo (a routed job: jobs and replies channels): at least the
    two claims per channel (chan_tail, chan_head: 2 each per request), at
    most ECHO_MAX writes per request outside the idle word (measured 18 on
    both backends) and the idle word as above.

How many park cycles a request costs depends on the client's pace, not on
voltd: a client slower than the quiet send's 1 ms wait makes the worker
park twice per request on io_uring (4 idle-word writes per request become
8), so the idle word is bounded per park, read from the workers' own
`parks`, never per request.

The figures are in bench/README.md ("Shared cache lines per request"), with
bench/line_audit.py, which reports them under workloads A and B. In a build
without the audit the daemon says so (no "line-audit" in its features) and
the cases would skip, so the build registers this test only with
--enable-line-audit (scripts/test's ASan tree is configured with it).
"""
import pytest

from ctlutil import ctl
from httputil import Reader, backend, connect, req_bytes, stop, voltd  # noqa: F401

REQUESTS = 2000
IDLE_MAX = 4        # idle-word writes per park cycle
OTHER_SLACK = 0.05  # per request, healthz's sites besides the idle word
ECHO_MAX = 24.0     # per request, echo's sites besides the idle word
ZERO_FOR_HEALTHZ = ("chan_tail", "chan_head", "chan_slot", "chan_waiters", "chan_waitq_lock",
                    "chan_wake", "chan_stats", "srv_inflight", "srv_conns", "srv_paused",
                    "srv_registry", "srv_pool", "srv_ready_read")


def audited(d):
    r = ctl(d, "version")
    assert r["ok"], r
    if "line-audit" not in r["features"].split():
        pytest.skip("voltd built without --enable-line-audit (a build option; scripts/test's ASan tree has it)")


def line_writes(d):
    r = ctl(d, "stats server")
    assert r["ok"], r
    w = ctl(d, "stats workers")
    assert w["ok"], w
    return dict(r["server"]["line_writes"]), r["server"]["requests"], sum(x["parks"] for x in w["workers"])


def sequential(port, n, method, path, body=None, want=200):
    s = connect(port)
    try:
        rd = Reader(s)
        for _ in range(n):
            s.sendall(req_bytes(method, path, body))
            r = rd.response()
            assert r.status == want, r
    finally:
        s.close()


def window(d, method, path, body=None):
    """Per-site writes per request over REQUESTS sequential requests on one
    connection that is already open and warm (its accept and its first
    parks are outside the window), and the parks per request of every
    worker meanwhile."""
    s = connect(d.port)
    try:
        rd = Reader(s)
        for _ in range(50):
            s.sendall(req_bytes(method, path, body))
            assert rd.response().status == 200
        w0, n0, p0 = line_writes(d)
        for _ in range(REQUESTS):
            s.sendall(req_bytes(method, path, body))
            assert rd.response().status == 200
        w1, n1, p1 = line_writes(d)
    finally:
        s.close()
    assert n1 - n0 == REQUESTS, (n0, n1)
    per = {k: (w1[k] - w0[k]) / REQUESTS for k in w1}
    parks = (p1 - p0) / REQUESTS
    print("%s %s %s: %.2f shared-line writes per request (%.2f parks): %s" % (
        d.backend, method, path, sum(per.values()), parks,
        " ".join("%s=%.2f" % (k, v) for k, v in sorted(per.items()) if v)))
    return per, parks


def idle_word_per_park(per, parks):
    """The idle word: at most IDLE_MAX writes per park cycle, whatever the
    client's pace (a few more in the whole window: OTHER_SLACK)."""
    assert per["rt_idle"] <= IDLE_MAX * parks + OTHER_SLACK, (parks, per)


def besides_idle(per):
    return sum(v for k, v in per.items() if k != "rt_idle")


def test_healthz_writes_no_shared_line_but_the_idle_word(voltd):
    d = voltd()
    audited(d)
    per, parks = window(d, "GET", "/healthz")
    for k in ZERO_FOR_HEALTHZ:
        assert per[k] == 0, (k, per)
    idle_word_per_park(per, parks)
    assert besides_idle(per) <= OTHER_SLACK, per
    stop(d)


def test_readyz_alone_reads_the_jobs_channel(voltd):
    d = voltd()
    audited(d)
    per, _ = window(d, "GET", "/readyz")
    assert per["srv_ready_read"] == 1, per
    per, _ = window(d, "POST", "/v1/echo", b"ping")
    assert per["srv_ready_read"] == 0, per
    stop(d)


def test_routed_job_claims_both_channels(voltd):
    d = voltd()
    audited(d)
    per, parks = window(d, "POST", "/v1/echo", b"ping")
    assert per["chan_tail"] >= 2 and per["chan_head"] >= 2, per
    assert per["chan_slot"] >= 4, per
    assert besides_idle(per) <= ECHO_MAX, per
    idle_word_per_park(per, parks)
    stop(d)
