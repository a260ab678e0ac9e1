# SPDX-License-Identifier: MIT
"""The adversarial suite (issue 12): clients that try to pin the executors,
hold memory, starve other connections or exhaust descriptors. Each case
starts its own voltd (both I/O backends), is bounded in time, and ends with
the accounting check (requests == responses + dropped) done by stop()."""
import os
import resource
import socket
import time

import pytest

from httputil import Reader, connect, req_bytes, reset, stop, voltd, backend  # noqa: F401


def timed_request(port, target, timeout=30):
    t = time.monotonic()
    s = connect(port, timeout)
    try:
        s.sendall(req_bytes("GET", target, close=True))
        r = Reader(s).response()
    finally:
        s.close()
    return r, time.monotonic() - t


# ------------------------------------------------------------ sleepers

def test_sleeper_flood_leaves_executors_free(voltd):
    """8 connections x 64 pipelined 6 s sleeps (max_pipeline each, 8 exec
    tasks with 2 workers): a light spin on a fresh connection is answered
    at once, not after the sleeps (it waited ~5 s when an exec task held
    at most 64 sleepers and then stopped taking jobs)."""
    d = voltd()
    conns = []
    for _ in range(8):
        s = connect(d.port)
        s.sendall(b"".join(req_bytes("GET", "/v1/sleep?ms=6000") for _ in range(64)))
        conns.append(s)
    time.sleep(0.5)  # every sleep parsed and parked
    r, dt = timed_request(d.port, "/v1/spin?n=1000")
    assert r.status == 200, r
    print("light request under the sleeper flood: %.1f ms" % (dt * 1000))
    assert dt < 2.5, "spin waited %.2f s behind the sleepers" % dt
    for s in conns:
        reset(s)
    st = stop(d)
    assert st["requests"] >= 8 * 64 + 1, st


# ---------------------------------------------------------- send timeout

def small_rcvbuf_conn(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(30)
    s.connect(("127.0.0.1", port))
    return s


MIB = 1 << 20


def test_send_timeout_cuts_a_reader_that_stopped(voltd):
    """Replies nobody reads: cut after server.send_timeout_ms without
    progress (counted), though the idle timeout is a minute."""
    d = voltd("-s", "server.send_timeout_ms=1000", "-s", "server.idle_timeout_ms=60000")
    s = small_rcvbuf_conn(d.port)
    body = b"x" * MIB
    t = time.monotonic()
    for _ in range(8):  # 8 MiB of replies: more than the socket buffers hold
        s.sendall(req_bytes("POST", "/v1/echo", body))
    # never read: the server must give up and close
    s.settimeout(15)
    time.sleep(0.5)
    got = 0
    while True:
        try:
            chunk = s.recv(1 << 20)
        except ConnectionResetError:
            break
        if not chunk:
            break
        got += len(chunk)
        if got == len(chunk):  # first read: wait for the cut before draining
            time.sleep(4)
    dt = time.monotonic() - t
    s.close()
    st = stop(d)
    assert st["timeouts_send"] == 1, st
    assert got < 8 * MIB, got
    assert dt < 15, dt


def test_send_timeout_spares_a_slow_steady_reader(voltd):
    """A reader that takes its reply slowly but steadily (longer in all than
    send_timeout_ms) gets all of it."""
    d = voltd("-s", "server.send_timeout_ms=1000")
    s = small_rcvbuf_conn(d.port)
    s.sendall(req_bytes("POST", "/v1/echo", b"y" * MIB, close=True))
    got = b""
    t = time.monotonic()
    while time.monotonic() - t < 3.0:  # ~80 KiB/s for 3 s: not done yet
        got += s.recv(4096)
        time.sleep(0.05)
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        got += chunk
    s.close()
    assert got.endswith(b"y" * 1000) and len(got) > MIB, len(got)
    st = stop(d)
    assert st["timeouts_send"] == 0, st


# ------------------------------------------------------ idle connections

def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def raise_nofile(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(max(soft, n), hard) if hard != resource.RLIM_INFINITY else max(soft, n)
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return want


IDLE_CONNS = int(os.environ.get("VOLTD_IDLE_CONNS", "5000"))


def test_idle_keepalive_connections_hold_no_buffers(voltd):
    """Keep-alive connections idle after one request each: the parser,
    slots and batch go back when idle; RSS growth per connection <= 2 KB
    (13.7 KB before)."""
    n = IDLE_CONNS
    if raise_nofile(n + 200) < n + 200:
        pytest.skip("RLIMIT_NOFILE hard limit below %d" % (n + 200))
    d = voltd("-s", "server.max_connections=%d" % (n + 100))
    # warm up: every worker's buffers and caches touched once
    warm = [connect(d.port) for _ in range(500)]
    for s in warm:
        s.sendall(req_bytes("GET", "/v1/spin?n=10"))
    for s in warm:
        assert Reader(s).response().status == 200
    for s in warm:
        s.close()
    time.sleep(2.0)
    base = rss_kb(d.proc.pid)
    conns = []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", d.port), timeout=30)
        s.sendall(req_bytes("GET", "/v1/spin?n=10" if i % 2 else "/healthz"))
        conns.append(s)
    for s in conns:
        assert Reader(s).response().status == 200
    time.sleep(2.0)  # quiet sends collected, buffers given back, trimmed
    grown = rss_kb(d.proc.pid) - base
    per = grown * 1024 / n
    print("idle keep-alive: %d connections, RSS +%d KB, %.0f B per connection" % (n, grown, per))
    assert per <= 2048, per
    for s in conns:
        s.close()
    st = stop(d)
    assert st["conns_accepted"] >= n, st


# ---------------------------------------------------------- slow readers

def test_slow_readers_memory_bounded_and_returned(voltd):
    """200 clients POST 1 MiB to /v1/echo and never read: the in-flight
    budget bounds what the server holds (it stops reading), the waits are
    counted, and after the clients reset RSS is back within 20 % (+3 MiB)
    of its baseline within 5 s (it was 380 MB, then 146 MB kept)."""
    budget = 64 * MIB
    d = voltd("-s", "server.max_inflight_bytes=%d" % budget, "-s", "server.send_timeout_ms=60000")
    # baseline after traffic of the same kind, 100 clients at once (the
    # per-worker caches of parsers, slots and batches fill: they are
    # bounded and stay), then a few 1 MiB echoes
    warm = [connect(d.port) for _ in range(100)]
    req = req_bytes("POST", "/v1/echo", b"w" * 65536, close=True)
    for s in warm:  # every one holds a parser at once
        s.sendall(req[:32768])
    time.sleep(0.5)
    for s in warm:
        s.sendall(req[32768:])
    for s in warm:
        assert Reader(s).response().status == 200
        s.close()
    for _ in range(4):
        s = connect(d.port)
        s.sendall(req_bytes("POST", "/v1/echo", b"w" * MIB, close=True))
        r = Reader(s).response()
        assert r.status == 200 and len(r.body) == MIB
        s.close()
    time.sleep(1.5)
    base = rss_kb(d.proc.pid)
    body = b"s" * MIB
    conns, peak = [], base
    t0 = time.monotonic()
    for _ in range(200):
        s = small_rcvbuf_conn(d.port)
        s.setblocking(False)
        conns.append([s, req_bytes("POST", "/v1/echo", body)])
    # push the requests without blocking on any one client; bounded in time
    while time.monotonic() - t0 < 20:
        pending = 0
        for c in conns:
            if c[1]:
                try:
                    n = c[0].send(c[1][:262144])
                    c[1] = c[1][n:]
                except BlockingIOError:
                    pass
                pending += 1 if c[1] else 0
        peak = max(peak, rss_kb(d.proc.pid))
        if not pending:
            break
        time.sleep(0.01)
    for _ in range(20):
        peak = max(peak, rss_kb(d.proc.pid))
        time.sleep(0.05)
    for c in conns:
        reset(c[0])
    t1 = time.monotonic()
    # 20 % of the baseline, plus 3 MiB for what stays by design: the
    # io_uring provided buffers the burst touched (fixed per worker) and
    # the allocator's residue between live objects
    bound = base * 1.2 + 3072
    settled = rss_kb(d.proc.pid)
    while time.monotonic() - t1 < 5 and settled > bound:
        time.sleep(0.25)
        settled = rss_kb(d.proc.pid)
    took = time.monotonic() - t1
    print("slow readers: baseline %d KB, peak %d KB, settled %d KB after %.1f s"
          % (base, peak, settled, took))
    # still serving
    s = connect(d.port)
    s.sendall(req_bytes("GET", "/v1/spin?n=1000", close=True))
    assert Reader(s).response().status == 200
    s.close()
    st = stop(d)
    assert settled <= bound, (base, settled)
    # the budget held: what is held for requests and replies stays near it
    # (plus the fixed cost of 200 connections and the parsers in the caches)
    assert peak - base < (budget + 48 * MIB) // 1024, (base, peak)
    assert st["budget_waits"] > 0, st


def test_budget_sheds_in_shed_mode(voltd):
    """on_full = shed: over max_inflight_bytes a request with a body is
    answered 503 at once (counted), the others are served. A body under
    way counts with its whole Content-Length."""
    d = voltd("-s", "server.max_inflight_bytes=%d" % MIB, "-s", "stages.on_full=shed")
    holder = connect(d.port)
    holder.sendall(req_bytes("POST", "/v1/echo", b"h" * MIB)[:MIB // 2])
    time.sleep(0.5)
    s = connect(d.port)
    s.sendall(req_bytes("POST", "/v1/echo", b"x" * 65536, close=True))
    r = Reader(s).response()
    s.close()
    assert r.status == 503 and r.header("retry-after") == "1", r
    r, _ = timed_request(d.port, "/v1/spin?n=1000")
    assert r.status == 200
    reset(holder)
    time.sleep(0.3)
    s = connect(d.port)  # the budget is free again
    s.sendall(req_bytes("POST", "/v1/echo", b"y" * 65536, close=True))
    r = Reader(s).response()
    s.close()
    assert r.status == 200 and len(r.body) == 65536, r
    st = stop(d)
    assert st["budget_shed"] == 1 and st["shed"] >= 1, st


# ------------------------------------------------- receive-buffer squeeze

def latencies(port, target, n):
    s = connect(port)
    rd = Reader(s)
    out = []
    try:
        for _ in range(n):
            t = time.monotonic()
            s.sendall(req_bytes("GET", target))
            assert rd.response().status == 200
            out.append(time.monotonic() - t)
    finally:
        s.close()
    out = sorted(out[20:])  # the first ones on a new connection: warm-up
    return out[int(len(out) * 0.99) - 1]


def bufs_out(d):
    from ctlutil import ctl
    st = ctl(d, "stats io")
    assert st.get("ok", True), st
    return [w["bufs_out"] for w in st["io"]["workers"]]


def test_receive_buffer_squeeze(voltd):
    """100 connections that send pipelined requests and never read: the
    worker's provided receive buffers are not cornered (a connection whose
    task is not reading keeps its bytes in its own memory), and other
    clients keep their latency: healthz and spin p99 within 2x (+10 ms)
    of an unloaded run. Before: 256 of 256 buffers held per worker."""
    d = voltd()
    base_h = latencies(d.port, "/healthz", 200)
    base_s = latencies(d.port, "/v1/spin?n=1000", 200)
    evil = []
    chunk = b"".join(req_bytes("GET", "/healthz") for _ in range(256))
    for _ in range(100):
        s = small_rcvbuf_conn(d.port)  # they stop taking answers at once
        s.setblocking(False)
        evil.append([s, 0])
    t0 = time.monotonic()
    peak = [0]
    while time.monotonic() - t0 < 3:  # up to 256 KiB of requests each
        for e in evil:
            if e[1] < 262144:
                try:
                    e[1] += e[0].send(chunk)
                except (BlockingIOError, ConnectionError):
                    pass
        if d.backend == "uring":
            peak = [max(a, b) for a, b in zip(peak * 8, bufs_out(d))]
        time.sleep(0.02)
    time.sleep(1.0)  # what the server could answer is answered
    # the best of three runs: a machine shared with other work stalls now
    # and then; a connection starved of buffers is slow in every run
    load_h = min(latencies(d.port, "/healthz", 200) for _ in range(3))
    load_s = min(latencies(d.port, "/v1/spin?n=1000", 200) for _ in range(3))
    if d.backend == "uring":
        peak = [max(a, b) for a, b in zip(peak, bufs_out(d))]
    print("squeeze: healthz p99 %.2f -> %.2f ms, spin p99 %.2f -> %.2f ms, bufs_out peak %s of 256"
          % (base_h * 1e3, load_h * 1e3, base_s * 1e3, load_s * 1e3, peak))
    for e in evil:
        reset(e[0])
    stop(d)
    assert load_h <= 2 * base_h + 0.010, (base_h, load_h)
    assert load_s <= 2 * base_s + 0.010, (base_s, load_s)
    if d.backend == "uring":
        assert max(peak) <= 192, peak  # never cornered (256 per worker)
