# SPDX-License-Identifier: MIT
"""The adversarial suite (issue 12): clients that try to pin the executors,
hold memory, starve other connections or exhaust descriptors. Each case
starts its own voltd (both I/O backends), is bounded in time, and ends with
the accounting check (requests == responses + dropped) done by stop().
Environment: VOLTD_SOAK_S (soak length, 30 s; 15 s in the ASan build),
VOLTD_IDLE_CONNS (idle keep-alive connections, 5,000). Each case prints
its figure (run pytest with -s to see them)."""
import os
import resource
import socket
import time

import pytest

from ctlutil import ctl
from httputil import (ASAN, Reader, bound, connect, fd_count, raise_nofile, raw_exchange, req_bytes,  # noqa: F401
                      reset, rss_kb, stop, voltd, backend)


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
    before any sleep ends, not after them (it waited ~5 s when an exec
    task held at most 64 sleepers and then stopped taking jobs); how soon
    is a bench figure."""
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
    bound("test_adversarial", "sleeper_flood_light_ms", dt * 1000, "<", 2500)
    srv = ctl(d, "stats server")["server"]
    # Every sleeper still asleep (6 s) and in flight: the light one did not
    # wait behind them.
    assert srv["responses"]["2xx"] <= 1 and srv["in_flight"]["exec"] == 8 * 64, srv
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

IDLE_CONNS = int(os.environ.get("VOLTD_IDLE_CONNS", "5000"))


def test_idle_keepalive_connections_hold_no_buffers(voltd):
    """Keep-alive connections idle after one request each: the parser,
    slots and batch go back when idle. RSS growth per connection is a
    bench figure (target 2 KB; 13.7 KB before), not asserted: it is
    measured as the slope between n/2 and n idle
    connections, so that what is fixed (provided buffers, the per-worker
    caches filled by the first burst, malloc's arenas) does not count as
    a per-connection cost: with the growth from an empty server the figure
    swung between 1.0 and 2.2 KB with the machine's load."""
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

    def open_idle(count):
        batch = []
        for i in range(count):
            s = socket.create_connection(("127.0.0.1", d.port), timeout=30)
            s.sendall(req_bytes("GET", "/v1/spin?n=10" if i % 2 else "/healthz"))
            batch.append(s)
        for s in batch:
            assert Reader(s).response().status == 200
        conns.extend(batch)

    def settled_rss(prev):
        # quiet sends collected (500 ms), buffers given back, arenas
        # trimmed (once a second): wait until RSS stops falling, 8 s at most
        t, last = time.monotonic(), None
        while True:
            time.sleep(1.0)
            r = rss_kb(d.proc.pid)
            if (last is not None and r >= last) or ASAN or time.monotonic() - t > 8:
                return r
            last = r

    half = n // 2
    open_idle(half)
    r1 = settled_rss(base)
    open_idle(n - half)
    r2 = settled_rss(r1)
    per = (r2 - r1) * 1024 / (n - half)
    print("idle keep-alive: %d connections, RSS +%d KB from the warm server (%.0f B per connection); "
          "between %d and %d connections +%d KB: %.0f B per connection"
          % (n, r2 - base, (r2 - base) * 1024 / n, half, n, r2 - r1, per))
    if not ASAN:
        bound("test_adversarial", "idle_conn_rss_bytes", per, "<=", 2048)
    for s in conns:
        s.close()
    st = stop(d)
    assert st["conns_accepted"] >= n, st


# ---------------------------------------------------------- slow readers

def test_slow_readers_memory_bounded_and_returned(voltd):
    """200 clients POST 1 MiB to /v1/echo and never read: the in-flight
    budget bounds what the server holds (it stops reading), the waits are
    counted, and the server still serves. RSS (peak within the budget plus
    48 MiB, back within 20 % or 2 MiB of its baseline within 5 s after the
    clients reset; it was 380 MB, then 146 MB kept) is a bench figure."""
    budget = 64 * MIB
    d = voltd("-s", "server.max_inflight_bytes=%d" % budget, "-s", "server.send_timeout_ms=60000")
    # baseline after traffic of the same kind, 100 clients at once (the
    # per-worker caches of parsers, busy blocks and batches fill: they are
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
    for _ in range(16):  # also runs every provided buffer of both rings
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
    # push the requests without blocking on any one client until the server
    # is seen to stop reading for the budget, and one more second for the
    # peak: how much a loaded machine moves in a fixed time must not decide
    # whether the budget is reached (120 s bounds a hang)
    waited_at = None
    while time.monotonic() - t0 < 120:
        if waited_at is None and ctl(d, "stats server")["server"]["budget_waits"] > 0:
            waited_at = time.monotonic()
        if waited_at is not None and time.monotonic() - waited_at > 1.0:
            break
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
    # 20 % of the baseline, or 2 MiB when that is more (libev's baseline is
    # ~5.5 MB: 20 % is 1.1 MB, and ~1.5 MB of allocator residue between
    # live objects stays in the workers' arenas)
    target = max(base * 1.2, base + 2048)
    settled = rss_kb(d.proc.pid)
    while time.monotonic() - t1 < 5 and settled > target:
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
    assert st["budget_waits"] > 0, st
    if not ASAN:
        bound("test_adversarial", "slow_readers_settled_kb", settled, "<=", int(target))
        # the budget held: what is held for requests and replies stays near
        # it (plus the fixed cost of 200 connections and the caches)
        bound("test_adversarial", "slow_readers_peak_over_base_kb", peak - base, "<", (budget + 48 * MIB) // 1024)


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


def io_total(d, name):
    st = ctl(d, "stats io")
    assert st.get("ok", True), st
    return sum(w[name] for w in st["io"]["workers"])


@pytest.mark.parametrize("on_full", ["wait", "shed"])
def test_copies_leave_bodies_their_share(voltd, on_full):
    """60 connections each send a 30 s sleep and then 64 KiB that nobody
    parses (max_pipeline 1): past half the provided buffers those bytes
    become heap copies (io_uring), charged to max_inflight_bytes. Copies
    have a share of their own, so a new client's 16 KiB echo is answered
    200 in both modes, neither waited out (wait) nor refused 503 (shed).
    Before: the copies held the whole 1 MiB budget and the echo got no
    answer until the sleeps ended (wait) or a 503 (shed)."""
    d = voltd("-s", "scheduler.workers=1", "-s", "io.recv_buffers=64", "-s", "server.max_pipeline=1",
              "-s", "server.max_inflight_bytes=%d" % MIB, "-s", "stages.on_full=%s" % on_full)
    junk = []
    # whole receive buffers (16 KiB): the copies fill the budget to the byte
    head = req_bytes("GET", "/v1/sleep?ms=30000")
    for _ in range(60):
        s = connect(d.port)
        s.sendall(head + b"j" * (65536 - len(head)))
        junk.append(s)
    if d.backend == "uring":
        # the copies reached what they may hold: the next one was refused
        deadline = time.monotonic() + 20  # a hang guard
        while io_total(d, "rx_copy_refused") == 0:
            assert time.monotonic() < deadline, ctl(d, "stats io")
            time.sleep(0.05)
    s = connect(d.port, timeout=10)  # a hang guard: the sleeps last 30 s
    body = b"e" * 16384
    s.sendall(req_bytes("POST", "/v1/echo", body, close=True))
    r = Reader(s).response()
    s.close()
    assert r.status == 200 and r.body == body, r
    srv = ctl(d, "stats server")["server"]
    assert srv["inflight_bytes"] <= MIB, srv
    copies = io_total(d, "rx_copies")
    for j in junk:
        reset(j)
    st = stop(d)
    if d.backend == "uring":
        assert copies > 0, copies
    assert st["budget_shed"] == 0, st


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
    st = ctl(d, "stats io")
    assert st.get("ok", True), st
    return [w["bufs_out"] for w in st["io"]["workers"]]


def test_receive_buffer_squeeze(voltd):
    """100 connections that send pipelined requests and never read: the
    worker's provided receive buffers are not cornered (a connection whose
    task is not reading keeps its bytes in its own memory), and other
    clients are served; their latency (healthz and spin p99 within 2x +10
    ms of an unloaded run) is a bench figure. Before: 256 of 256 buffers
    held per worker."""
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
    bound("test_adversarial", "squeeze_healthz_p99_ms", load_h * 1e3, "<=", "%.2f" % ((2 * base_h + 0.010) * 1e3))
    bound("test_adversarial", "squeeze_spin_p99_ms", load_s * 1e3, "<=", "%.2f" % ((2 * base_s + 0.010) * 1e3))
    if d.backend == "uring":
        assert max(peak) <= 192, peak  # never cornered (256 per worker)


# ------------------------------------------------------------ load helpers

class Load:
    """Background keep-alive clients running a request mix until stopped
    (bounded by `limit_s`); counts good responses and errors. After stop(),
    `failed` lists what went wrong (empty: zero errors)."""

    MIX = [("GET", "/healthz", None), ("GET", "/v1/spin?n=1000", None),
           ("POST", "/v1/echo", b"e" * 4096), ("GET", "/v1/sleep?ms=5", None),
           ("POST", "/v1/hash?alg=sha256", b"h" * 1024)]

    def __init__(self, port, n=6, limit_s=120, tolerate_close=False):
        import threading
        self.port, self.limit_s, self.tolerate_close = port, limit_s, tolerate_close
        self.stopping = threading.Event()
        self.ok, self.failed = 0, []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True) for i in range(n)]

    def run(self, k):
        t0 = time.monotonic()
        i = k
        while not self.stopping.is_set() and time.monotonic() - t0 < self.limit_s:
            try:
                s = connect(self.port, timeout=20)
            except OSError as e:
                if self.tolerate_close:
                    time.sleep(0.05)
                    continue
                with self.lock:
                    self.failed.append("connect: %r" % e)
                return
            rd = Reader(s)
            try:
                for _ in range(20):
                    if self.stopping.is_set():
                        break
                    method, target, body = self.MIX[i % len(self.MIX)]
                    i += 1
                    s.sendall(req_bytes(method, target, body))
                    r = rd.response()
                    good = r.status == 200 and (target != "/v1/echo" or r.body == body)
                    with self.lock:
                        if good:
                            self.ok += 1
                        else:
                            self.failed.append("%s %s -> %r" % (method, target, r))
                    if r.header("connection") == "close":
                        break
            except (OSError, EOFError) as e:
                if not self.tolerate_close:
                    with self.lock:
                        self.failed.append("%r" % e)
            finally:
                s.close()

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(30)
        return self


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


SOAK_S = float(os.environ.get("VOLTD_SOAK_S", "15" if ASAN else "30"))


# ----------------------------------------------------------------- cases

def test_mixed_soak_rss_flat(voltd):
    """A mixed load for VOLTD_SOAK_S seconds (30; 15 in the ASan build):
    zero errors, and RSS sampled every 0.5 s drifts under 5 % over the
    second half."""
    d = voltd()
    load = Load(d.port, n=6).start()
    samples = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < SOAK_S:
        # now and then a client that vanishes mid-request
        s = connect(d.port)
        s.sendall(req_bytes("POST", "/v1/echo", b"v" * 8192)[:100])
        reset(s)
        time.sleep(0.5)
        samples.append(rss_kb(d.proc.pid))
    load.stop()
    second = samples[len(samples) // 2:]
    q = max(1, len(second) // 5)
    start, end = sum(second[:q]) / q, sum(second[-q:]) / q
    drift = (end - start) / start
    print("soak %.0f s: %d responses, RSS second half %.0f -> %.0f KB (%.1f %%), min %d max %d"
          % (SOAK_S, load.ok, start, end, 100 * drift, min(second), max(second)))
    st = stop(d)
    assert not load.failed, load.failed[:5]
    assert load.ok > 0, load.ok
    bound("test_adversarial", "soak_responses", load.ok, ">", 100)
    if not ASAN:
        bound("test_adversarial", "soak_rss_drift", drift, "<", 0.05)
    assert st["requests"] >= load.ok


def test_drain_under_load(voltd):
    """SIGTERM while clients keep sending: voltd exits 0 within the drain
    bound, every response that came was whole and right, and the books
    balance (requests == responses + dropped)."""
    d = voltd()
    load = Load(d.port, n=6, tolerate_close=True).start()
    time.sleep(2.0)
    t = time.monotonic()
    st = stop(d, timeout=30)
    took = time.monotonic() - t
    load.stop()
    print("drain under load: %d responses, stopped in %.2f s, dropped %d"
          % (load.ok, took, st["requests_dropped"]))
    assert not load.failed, load.failed[:5]
    assert load.ok > 0 and took < 15  # took: a hang guard
    bound("test_adversarial", "drain_under_load_responses", load.ok, ">", 20)


def test_reload_good_bad_good_under_load(voltd, tmp_path):
    """SIGHUP with a good, a bad and a good configuration while clients run:
    the bad one is refused (the running one kept), and no client sees an
    error."""
    import signal
    conf = tmp_path / "voltd.conf"
    conf.write_text("[server]\nheader_timeout_ms = 10000\n")
    d = voltd("-c", str(conf))
    load = Load(d.port, n=6).start()
    time.sleep(1.0)
    for text, expect in (("[server]\nheader_timeout_ms = 9000\n", "reload: configuration re-read"),
                         ("[server]\nheader_timeout_ms = banana\n", "keeping the running configuration"),
                         ("[server]\nheader_timeout_ms = 8000\n", "reload: configuration re-read")):
        n = d.log().count(expect)
        conf.write_text(text)
        d.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 15
        while d.log().count(expect) == n:
            assert time.monotonic() < deadline, "no %r after SIGHUP:\n%s" % (expect, d.log()[-2000:])
            time.sleep(0.05)
        time.sleep(0.5)
    load.stop()
    st = stop(d)
    print("reload under load: %d responses, 0 errors" % load.ok)
    assert not load.failed, load.failed[:5]
    assert load.ok > 0
    bound("test_adversarial", "reload_under_load_responses", load.ok, ">", 20)
    assert st["requests"] >= load.ok


def test_fd_limit_256_with_600_clients(tmp_path, backend):
    """RLIMIT_NOFILE 256 and 600 clients at once: accepting pauses and
    resumes, every client is answered, nothing leaks."""
    import select
    from conftest import Daemon, VOLTD
    import subprocess
    d = Daemon(tmp_path, ["-s", "io.backend=%s" % backend, "-s", "scheduler.workers=2",
                          "-s", "log.level=info", "-s", "server.backlog=1024"])
    d.logf = open(d.log_path, "w")
    d.proc = subprocess.Popen([VOLTD, *d.args], stdout=d.logf, stderr=subprocess.STDOUT, cwd=d.tmp,
                              env=d.env, preexec_fn=lambda: resource.setrlimit(
                                  resource.RLIMIT_NOFILE, (256, 256)))
    try:
        d.wait_log("ready")
        raise_nofile(2000)
        socks = []
        for _ in range(600):
            s = socket.create_connection(("127.0.0.1", d.port), timeout=30)
            s.sendall(req_bytes("GET", "/v1/spin?n=1000", close=True))
            socks.append(s)
        got, bufs = 0, {s: b"" for s in socks}
        deadline = time.monotonic() + 60
        open_ = set(socks)
        while open_ and time.monotonic() < deadline:
            r, _, _ = select.select(list(open_), [], [], 1.0)
            for s in r:
                data = s.recv(65536)
                bufs[s] += data
                if not data:
                    open_.discard(s)
        for s in socks:
            got += bufs[s].startswith(b"HTTP/1.1 200 ")
            s.close()
        print("fd limit 256: %d of 600 clients answered" % got)
        assert got == 600, got
    finally:
        st = stop(d)
    assert st["conns_accepted"] == 600, st


def test_20000_short_connections_no_fd_leak(voltd):
    """20,000 connections of one request each: the daemon's descriptors
    come back to what they were."""
    import threading
    d = voltd()
    before = fd_count(d.proc.pid)
    errors = []

    def run(n):
        for _ in range(n):
            try:
                data = raw_exchange(d.port, req_bytes("GET", "/healthz", close=True), timeout=20)
                if not data.startswith(b"HTTP/1.1 200 "):
                    errors.append(data[:80])
            except OSError as e:
                errors.append(repr(e))
    ts = [threading.Thread(target=run, args=(5000,)) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    time.sleep(0.5)
    after = fd_count(d.proc.pid)
    print("20000 short connections: fds %d -> %d" % (before, after))
    st = stop(d)
    assert not errors, errors[:5]
    assert after <= before + 2, (before, after)
    assert st["conns_accepted"] >= 20000


def test_pipeline_of_1000_answered_in_order(voltd):
    """1,000 pipelined requests in one write (max_pipeline 64 in flight):
    every answer comes, in order."""
    d = voltd()
    reqs, want = [], []
    for i in range(1000):
        if i % 3 == 0:
            reqs.append(req_bytes("GET", "/healthz"))
            want.append(None)
        else:
            body = ("%d" % i).encode()
            reqs.append(req_bytes("POST", "/v1/echo", body))
            want.append(body)
    s = connect(d.port, timeout=60)
    s.sendall(b"".join(reqs))
    rd = Reader(s)
    for i, w in enumerate(want):
        r = rd.response()
        assert r.status == 200, (i, r)
        if w is not None:
            assert r.body == w, (i, r.body, w)
    s.close()
    st = stop(d)
    assert st["requests"] == 1000, st


@pytest.mark.parametrize("per_conn", [4, 64])
def test_heavy_jobs_abandoned_by_resets_stop_burning_cpu(voltd, per_conn):
    """Heavy spins whose clients reset: their jobs are dropped at the next
    slice, and the daemon goes quiet: no job left in any stage (the CPU it
    burns over 2 s after the resets, well under the ~4 s two busy workers
    would burn, is a bench figure). With 64 pipelined
    (max_pipeline) the connection reads nothing more, and sees the reset by
    probing the socket's state once a second."""
    d = voltd()
    socks = []
    for _ in range(8):
        s = connect(d.port)
        s.sendall(b"".join(req_bytes("GET", "/v1/spin?n=1000000000") for _ in range(per_conn)))
        socks.append(s)
    time.sleep(1.0)
    for s in socks:
        reset(s)
    # Each spin runs for minutes: only the drop empties the stages.
    deadline = time.monotonic() + 30  # a hang guard
    while True:
        srv = ctl(d, "stats server")["server"]
        if not any(srv["in_flight"].values()) and srv["conns_open"] == 0:
            break
        assert time.monotonic() < deadline, srv
        time.sleep(0.1)
    c0 = cpu_s(d.proc.pid)
    time.sleep(2.0)
    used = cpu_s(d.proc.pid) - c0
    print("heavy jobs reset: %.2f s of CPU over 2 s after the jobs were dropped" % used)
    bound("test_adversarial", "reset_heavy_jobs_cpu_s_per_2s_%d" % per_conn, used, "<", 0.3)
    st = stop(d)
    assert st["requests_dropped"] >= 8 * per_conn, st
