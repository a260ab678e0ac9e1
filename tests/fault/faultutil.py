# SPDX-License-Identifier: MIT
"""Helpers of the fault suite (tests/fault): random jobs whose every byte is
checked (echo compared, sha256 recomputed, gzip unpacked), verifying client
threads, and the books every case closes with (`Books`): once the clients
are gone the server's counters balance (requests == responses + dropped),
no descriptor leaked, every provided buffer is back, RSS is back near its
baseline. Builds on tests/integration (conftest.py, httputil.py,
ctlutil.py); netclient.py runs the same clients inside a network namespace."""
import hashlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))

import pytest  # noqa: E402

from conftest import VOLTD, Daemon  # noqa: E402
from ctlutil import ctl  # noqa: E402
from httputil import (ASAN, Reader, backend, bound, connect, fd_count, req_bytes, reset,  # noqa: E402,F401
                      rss_kb, stop)

MIB = 1 << 20
MAX_BODY = 4 * MIB
# Every daemon of the suite takes bodies up to 4 MiB (the default is 1 MiB).
BIG = ("-s", "server.max_body_bytes=%d" % MAX_BODY)
KINDS = ("echo", "hash", "gzip")


def seed():
    """The case's seed: VOLTD_TEST_SEED or the clock; printed by the caller."""
    s = os.environ.get("VOLTD_TEST_SEED")
    return int(s, 0) if s else time.time_ns() % (1 << 32)


# ---------------------------------------------------------------- jobs

def random_size(rng, max_size):
    r = rng.random()
    if r < 0.3:
        return rng.randint(0, min(4096, max_size))
    if r < 0.6:
        return rng.randint(0, min(256 * 1024, max_size))
    return rng.randint(0, max_size)


def random_job(rng, max_size=MAX_BODY, min_size=0):
    """(kind, target, body): half the bodies random bytes, half a repeated
    random pattern (gzip then has something to compress)."""
    kind = rng.choice(KINDS)
    n = rng.randint(min_size, max_size) if min_size else random_size(rng, max_size)
    if rng.random() < 0.5:
        body = rng.randbytes(n)
    else:
        unit = rng.randbytes(rng.randint(1, 200))
        body = (unit * (n // len(unit) + 1))[:n]
    target = {"echo": "/v1/echo", "hash": "/v1/hash?alg=sha256",
              "gzip": "/v1/gzip?level=%d" % rng.randint(1, 9)}[kind]
    return kind, target, body


def first_difference(a, b):
    n = min(len(a), len(b))
    lo = 0
    step = 65536
    while lo < n and a[lo:lo + step] == b[lo:lo + step]:
        lo += step
    while lo < n and a[lo] == b[lo]:
        lo += 1
    return lo


def check_reply(kind, body, r):
    """None when the reply carries every byte of body; else what was lost."""
    what = "%s of %d bytes" % (kind, len(body))
    if r.status != 200:
        return "%s: status %d %r" % (what, r.status, r.body[:200])
    if kind == "hash":
        want = hashlib.sha256(body).hexdigest()
        got = r.body.strip().decode("latin-1")
        return None if got == want else "%s: sha256 %s, want %s" % (what, got, want)
    got = r.body
    if kind == "gzip":
        try:
            got = zlib.decompress(r.body, 16 + zlib.MAX_WBITS)
        except zlib.error as e:
            return "%s: the %d-byte reply does not gunzip: %s" % (what, len(r.body), e)
    if got == body:
        return None
    return "%s: %d bytes came back, first difference at byte %d" % (what, len(got), first_difference(got, body))


def exchange(sock, reader, target, body, close=False):
    """POST body to target on sock and read the response; a big request is
    sent by a thread while the reply is read (the server may answer, or
    stop reading, before the body is all in)."""
    data = req_bytes("POST", target, body, close=close)
    if len(data) <= 65536:
        sock.sendall(data)
        return reader.response()
    err = []

    def send():
        try:
            sock.sendall(data)
        except OSError as e:
            err.append(e)
    t = threading.Thread(target=send, daemon=True)
    t.start()
    r = reader.response()
    t.join(60)
    if err and r.header("connection") != "close":
        raise err[0]
    return r


class Clients:
    """`threads` keep-alive clients, each running `jobs` random jobs and
    checking every reply; bounded by count and by `limit_s` (no job starts
    after it). After join(): ok, nbytes and errors (empty: every byte came
    back). loop: run until stop() (or limit_s); shed_ok: a 503 (the
    server shed the job) is counted in `shed`, not an error."""

    def __init__(self, port, seed, threads=4, jobs=8, max_size=MAX_BODY, min_size=0, limit_s=60,
                 host="127.0.0.1", loop=False, shed_ok=False):
        self.port, self.host, self.seed = port, host, seed
        self.jobs, self.max_size, self.min_size, self.limit_s, self.loop = jobs, max_size, min_size, limit_s, loop
        self.shed_ok = shed_ok
        self.stopping = threading.Event()
        self.ok, self.nbytes, self.reconnects, self.shed, self.errors = 0, 0, 0, 0, []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True) for i in range(threads)]

    def run(self, i):
        rng = random.Random(self.seed * 1009 + i)
        t0 = time.monotonic()
        s = rd = None
        j = 0
        while (j < self.jobs or self.loop) and not self.stopping.is_set() and time.monotonic() - t0 < self.limit_s:
            kind, target, body = random_job(rng, self.max_size, self.min_size)
            where = "client %d job %d (%s, %d bytes)" % (i, j, target, len(body))
            j += 1
            try:
                if s is None:
                    s = connect(self.port, timeout=60, host=self.host)
                    rd = Reader(s)
                r = exchange(s, rd, target, body)
            except (OSError, EOFError) as e:
                with self.lock:
                    self.errors.append("%s: %r" % (where, e))
                if s is not None:
                    s.close()
                s = None
                continue
            err = check_reply(kind, body, r)
            with self.lock:
                if err and self.shed_ok and r.status == 503:
                    self.shed += 1
                elif err:
                    self.errors.append("%s: %s" % (where, err))
                else:
                    self.ok += 1
                    self.nbytes += len(body)
            if r.header("connection") == "close":
                s.close()
                s = None
                with self.lock:
                    self.reconnects += 1
        if s is not None:
            s.close()

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def join(self):
        for t in self.threads:
            t.join(self.limit_s + 120)
        assert not any(t.is_alive() for t in self.threads), "a client thread is stuck"
        return self

    def stop(self):
        self.stopping.set()
        return self.join()


# ----------------------------------------------------------- the books

def server_stats(d):
    st = ctl(d, "stats server")
    assert st.get("ok"), st
    return st["server"]


def io_bufs_out(d):
    st = ctl(d, "stats io")
    assert st.get("ok"), st
    return sum(w["bufs_out"] for w in st["io"]["workers"])


def settle(d, timeout=30):
    """Wait until no connection is open and nothing is in flight; the
    server's stats then."""
    deadline = time.monotonic() + timeout
    while True:
        st = server_stats(d)
        # conns_accepted == conns_closed too: a snapshot sums the counters
        # before it reads conns_open, so a connection that ended between the
        # two reads shows as 0 open and one not closed (CI, fd-limit case:
        # a client from the backlog accepted late)
        idle = (st["conns_open"] == 0 and st["conns_accepted"] == st["conns_closed"] and
                not any(st["in_flight"].values()) and st["inflight_bytes"] == 0)
        if idle:
            return st
        assert time.monotonic() < deadline, "not idle %d s after the clients left: %s" % (timeout, st)
        time.sleep(0.1)


def wait_for(what, get, ok, timeout):
    """Poll get() until ok(value) or the timeout; returns the last value."""
    deadline = time.monotonic() + timeout
    v = get()
    while not ok(v) and time.monotonic() < deadline:
        time.sleep(0.1)
        v = get()
    return v


# What may stay in RSS after a case beyond the warm baseline: per-worker
# caches a bigger burst filled further (bounded) and allocator residue
# between live objects. Bodies are malloc'd above the 64 KiB mmap threshold
# (src/server/pool.c) and go back when freed, so one leaked 4 MiB body per
# 4 cases' faults would already show. A figure for bench/bounds, not
# asserted: tests assert behaviour, and RSS moves with the allocator and the
# machine.
RSS_POOL_KB = 16 * 1024


class Books:
    """The daemon's idle state after a warm-up of the same kind of traffic
    (every provided buffer and cache used once): descriptors and RSS. check()
    after the case compares against it (RSS is reported, not asserted)."""

    def __init__(self, d, warm=None):
        self.d = d
        if warm:
            warm()
        else:
            c = Clients(d.port, 1, threads=4, jobs=4, shed_ok=True).start().join()
            assert not c.errors, c.errors[:5]
        settle(d)
        time.sleep(1.5)  # the once-a-second trim of freed memory
        self.fds = fd_count(d.proc.pid)
        self.rss = rss_kb(d.proc.pid)

    def check(self):
        d = self.d
        st = settle(d)
        responses = sum(st["responses"].values())
        assert st["requests"] == responses + st["requests_dropped"], st
        assert st["conns_accepted"] == st["conns_closed"], st
        fds = wait_for("fds", lambda: fd_count(d.proc.pid), lambda n: n <= self.fds, 10)
        bufs = wait_for("bufs_out", lambda: io_bufs_out(d), lambda n: n == 0, 10)
        rss = wait_for("rss", lambda: rss_kb(d.proc.pid), lambda n: n <= self.rss + RSS_POOL_KB, 5)
        print("books: requests %d = responses %d + dropped %d; fds %d -> %d; bufs_out %d; RSS %d -> %d KB%s"
              % (st["requests"], responses, st["requests_dropped"], self.fds, fds, bufs, self.rss, rss,
                 " (ASan)" if ASAN else ""))
        assert fds == self.fds, "descriptors leaked: %d before, %d after" % (self.fds, fds)
        assert bufs == 0, "provided buffers not returned: bufs_out %d" % bufs
        if not ASAN:
            bound("fault_books", "rss_over_baseline_kb", rss - self.rss, "<=", RSS_POOL_KB)
        return st


def start_daemon(tmp_path, backend, args, prefix=(), preexec_fn=None, host=None):
    """voltd -f on `backend` with 2 workers, run as prefix + voltd (e.g.
    inside a network namespace) with preexec_fn (e.g. a low RLIMIT_NOFILE),
    listening on host (loopback by default). The caller stops it with
    httputil.stop()."""
    d = Daemon(tmp_path, ["-s", "io.backend=%s" % backend, "-s", "scheduler.workers=2",
                          "-s", "log.level=info", *BIG, *args])
    if host:
        d.args += ["-s", "server.listen=%s:%d" % (host, d.port)]  # the last -s wins
    d.backend = backend
    d.logf = open(d.log_path, "w")
    d.proc = subprocess.Popen([*prefix, VOLTD, *d.args], stdout=d.logf, stderr=subprocess.STDOUT, cwd=d.tmp,
                              env=d.env, preexec_fn=preexec_fn)
    return d


@pytest.fixture
def fault_daemon(tmp_path, backend):
    """Factory: fault_daemon(args, prefix=(), preexec_fn=None, host=None) ->
    a started Daemon (start_daemon); stopped and checked (httputil.stop) at
    the end."""
    started = []

    def make(args=(), prefix=(), preexec_fn=None, host=None):
        d = start_daemon(tmp_path, backend, args, prefix, preexec_fn, host)
        started.append(d)
        d.wait_log("ready")
        return d

    yield make
    for d in started:
        if d.proc.poll() is None:
            stop(d)


def sighup(d, expect="reload: configuration re-read", timeout=15):
    n = d.log().count(expect)
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + timeout
    while d.log().count(expect) == n:
        assert time.monotonic() < deadline, "no %r after SIGHUP:\n%s" % (expect, d.log()[-2000:])
        time.sleep(0.05)
