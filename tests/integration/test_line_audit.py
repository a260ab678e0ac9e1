# SPDX-License-Identifier: MIT
"""The shared-line audit (src/base/lineaudit.h, a --enable-line-audit build)
against a real voltd, once per I/O backend: writes to cache lines that
several workers write, per request, on one sequential keep-alive
connection. Counts, not timing: which sites a request may touch, not a
total that the client's pace moves.

  - GET /healthz: no write to a channel, the body budget, the connection
    count, the registry, the pool or /readyz's read of the jobs channels
    (each exactly 0); what is left is the runtime's idle word, written
    when a worker searches and parks between two sequential requests: at
    most 2 per search (becoming a searcher, or a notifier waking it as
    one; leaving searching) and 2 per park (the park's RMW, the unmark)
    (measured 4.00 with 1.00 search and 1.00 park per request), and the
    other sites at most OTHER_SLACK per request in all (measured 0).
  - GET /readyz: exactly one read of the jobs channels' length per request
    (srv_ready_read), which GET /healthz and the routed jobs never do.
  - POST /v1/echo (a routed job, through the jobs and replies channel
    sets, one channel per worker): no write to a channel's statistics
    (chan_stats: each worker's are its own) nor to the server's shared
    lines; the channels' lines are written off their own worker only when
    a job crosses workers (a steal, a spill, a receiver woken on another
    worker's channel: the channels' own counters), at most CROSSING_MAX
    writes per crossing, so a job that stays on its worker writes none
    (with one worker: none at all). The idle word is healthz's case.

How many searches and parks a request costs depends on the client's pace
and the machine, not on voltd alone: a client slower than the quiet send's
1 ms wait makes the worker park twice per request on io_uring (4 idle-word
writes per request become 8), and on libev a routed request's worker often
finds the next request while it still searches, without parking (3.4-3.5
writes per request with 0.70-0.77 parks), so the idle word is bounded per
search and per park, read from the workers' own `searching_transitions`
and `parks`, never per request (nor per park alone).

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
IDLE_PER = 2        # idle-word writes per search and per park
OTHER_SLACK = 0.05  # per request, healthz's sites besides the idle word
# A job that crosses workers writes the other worker's channel lines: a
# steal its head and a slot (and the help mask when it finds the channel
# empty); a wake across the help mask, the other channel's waiter word or
# list and the waiter; a spill the tail, a slot and the wake of that
# channel's receiver.
CROSSING_MAX = 8.0
CHAN_SITES = ("chan_tail", "chan_head", "chan_slot", "chan_waiters", "chan_waitq_lock",
              "chan_wake", "chan_help")
SRV_SITES = ("srv_inflight", "srv_conns", "srv_paused", "srv_registry", "srv_pool")
ZERO_FOR_HEALTHZ = CHAN_SITES + ("chan_stats", "srv_ready_read") + SRV_SITES
CROSSINGS = ("stolen", "spilled", "cross_wakes")


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
    cycles = sum(x["parks"] + x["searching_transitions"] for x in w["workers"])
    return dict(r["server"]["line_writes"]), r["server"]["requests"], cycles


def crossings(d):
    """Jobs and replies that crossed workers so far (both channel sets)."""
    r = ctl(d, "stats channels")
    assert r["ok"], r
    return sum(r["channels"][ch][k] for ch in ("jobs", "replies") for k in CROSSINGS)


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
    parks are outside the window), the searches and parks per request of
    every worker meanwhile and the jobs and replies that crossed workers."""
    s = connect(d.port)
    try:
        rd = Reader(s)
        for _ in range(50):
            s.sendall(req_bytes(method, path, body))
            assert rd.response().status == 200
        w0, n0, p0 = line_writes(d)
        x0 = crossings(d)
        for _ in range(REQUESTS):
            s.sendall(req_bytes(method, path, body))
            assert rd.response().status == 200
        w1, n1, p1 = line_writes(d)
        x1 = crossings(d)
    finally:
        s.close()
    assert n1 - n0 == REQUESTS, (n0, n1)
    per = {k: (w1[k] - w0[k]) / REQUESTS for k in w1}
    cycles = (p1 - p0) / REQUESTS
    print("%s %s %s: %.2f shared-line writes per request (%.2f searches and parks): %s; %d crossings" % (
        d.backend, method, path, sum(per.values()), cycles,
        " ".join("%s=%.2f" % (k, v) for k, v in sorted(per.items()) if v), x1 - x0))
    return per, cycles, x1 - x0


def idle_word_per_cycle(per, cycles):
    """The idle word: at most IDLE_PER writes per search and per park,
    whatever the client's pace (a few more in the whole window, a CAS
    retried: OTHER_SLACK)."""
    assert per["rt_idle"] <= IDLE_PER * cycles + OTHER_SLACK, (cycles, per)


def besides_idle(per):
    return sum(v for k, v in per.items() if k != "rt_idle")


def test_healthz_writes_no_shared_line_but_the_idle_word(voltd):
    d = voltd()
    audited(d)
    per, cycles, _ = window(d, "GET", "/healthz")
    for k in ZERO_FOR_HEALTHZ:
        assert per[k] == 0, (k, per)
    idle_word_per_cycle(per, cycles)
    assert besides_idle(per) <= OTHER_SLACK, per
    stop(d)


def test_readyz_alone_reads_the_jobs_channels(voltd):
    d = voltd()
    audited(d)
    per, _, _ = window(d, "GET", "/readyz")
    assert per["srv_ready_read"] == 1, per
    per, _, _ = window(d, "POST", "/v1/echo", b"ping")
    assert per["srv_ready_read"] == 0, per
    stop(d)


def test_routed_job_writes_other_workers_lines_only_when_it_crosses(voltd):
    d = voltd()
    audited(d)
    per, cycles, crossed = window(d, "POST", "/v1/echo", b"ping")
    assert per["chan_stats"] == 0, per
    for k in SRV_SITES + ("srv_ready_read",):
        assert per[k] == 0, (k, per)
    chan = round(sum(per[k] for k in CHAN_SITES) * REQUESTS)
    assert chan <= CROSSING_MAX * crossed, (chan, crossed, per)
    idle_word_per_cycle(per, cycles)
    stop(d)


def test_routed_job_on_one_worker_writes_no_channel_line(voltd):
    # One worker: every channel set has one member, written by its own
    # worker only; nothing crosses.
    d = voltd("-s", "scheduler.workers=1")
    audited(d)
    per, cycles, crossed = window(d, "POST", "/v1/echo", b"ping")
    assert crossed == 0
    for k in CHAN_SITES + ("chan_stats",) + SRV_SITES:
        assert per[k] == 0, (k, per)
    stop(d)
