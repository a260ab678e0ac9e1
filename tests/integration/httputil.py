# SPDX-License-Identifier: MIT
"""Helpers of the HTTP integration tests (test_http_*.py): a voltd per I/O
backend, raw-socket clients with a strict little response reader, and the
server statistics voltd logs at shutdown (the control socket comes later).

Every daemon started through the `voltd` fixture is stopped at the end of
its test and must exit 0 (ASan builds also fail here on leaks) and satisfy
the accounting invariant: every request received got one response or was
counted as dropped with its connection."""
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from conftest import VOLTD, free_port

BACKENDS = ("uring", "libev")
_uring_ok = None


def uring_available():
    """Can voltd run its io_uring backend here? Asked once per session by
    starting it with io.backend=uring (a container may forbid io_uring)."""
    global _uring_ok
    if _uring_ok is None:
        port = free_port()
        tmp = tempfile.mkdtemp(prefix="voltd-uring-")
        p = subprocess.Popen([VOLTD, "-f", "-s", "io.backend=uring", "-s",
                              "server.listen=127.0.0.1:%d" % port, "-s",
                              "scheduler.workers=1", "-s", "control.socket=%s/control.sock" % tmp],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out = ""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and p.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        out = p.communicate(timeout=15)[0]
        shutil.rmtree(tmp, ignore_errors=True)
        _uring_ok = "backend=uring" in out
    return _uring_ok


@pytest.fixture(params=BACKENDS)
def backend(request):
    """Each case once per backend; VOLTD_IO_BACKEND=uring|libev (set by
    scripts/stress) runs only that one."""
    only = os.environ.get("VOLTD_IO_BACKEND")
    if only in BACKENDS and only != request.param:
        pytest.skip("VOLTD_IO_BACKEND=%s: this run tests that backend only" % only)
    if request.param == "uring" and not uring_available():
        pytest.skip("io_uring cannot be used here")
    return request.param


STATS_RE = re.compile(r"server stats: (.*)$", re.M)


def parse_stats(log):
    m = STATS_RE.findall(log)
    assert m, "no 'server stats' line in the log:\n" + log
    return {k: int(v) for k, v in (kv.split("=") for kv in m[-1].split())}


def responses_total(st):
    return sum(st["responses_%dxx" % c] for c in range(1, 6))


def check_accounting(st):
    """Every request received was answered once, or dropped with its
    connection (and counted)."""
    assert st["requests"] == responses_total(st) + st["requests_dropped"], st
    assert st["conns_accepted"] == st["conns_closed"], st
    # after the drain nothing is in any stage
    assert st["in_flight_parse"] == st["in_flight_exec"] == st["in_flight_write"] == st["in_flight_send"] == 0, st


def stop(d, timeout=20):
    """SIGTERM, exit status 0, the stats line, the invariant. Returns the stats."""
    rc = d.stop(timeout=timeout)
    log = d.log()
    assert rc == 0, "voltd exited %d:\n%s" % (rc, log)
    assert "ERROR: AddressSanitizer" not in log and "runtime error:" not in log, log
    st = parse_stats(log)
    check_accounting(st)
    return st


@pytest.fixture
def voltd(daemon, backend):
    """Factory: voltd(*args) -> Daemon on the test's backend, 2 workers.
    Stopped (and checked) at the end of the test unless stopped before."""
    started = []

    def make(*args, **kw):
        d = daemon("-s", "io.backend=%s" % backend, "-s", "scheduler.workers=2",
                   "-s", "log.level=info", *args, **kw)
        d.backend = backend
        started.append(d)
        return d

    yield make
    for d in started:
        if d.proc.poll() is None:
            stop(d)


# ------------------------------------------------- the daemon as a process

# In the ASan build RSS measures ASan's allocator (its quarantine keeps
# freed memory, it ignores mallopt and malloc_trim): the memory cases run
# there for the memory errors they may find, and assert RSS figures only in
# the other builds.
ASAN = "asan" in os.path.basename(os.path.normpath(os.environ.get("VOLTD_BUILDDIR", "")))


def bound(test, name, value, op, target):
    """A time, rate or byte figure: printed against its target, never
    asserted (tests assert behaviour; load moves these). bench/bounds runs
    the tests that print them and reports each line."""
    print("bound: %s %s %s %s %s" % (test, name, ("%.4g" % value) if isinstance(value, float) else value,
                                       op, target))


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def raise_nofile(n):
    """This process's RLIMIT_NOFILE raised to n (or the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(max(soft, n), hard) if hard != resource.RLIM_INFINITY else max(soft, n)
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return want


# ------------------------------------------------------------ raw clients

def connect(port, timeout=10, host="127.0.0.1"):
    s = socket.create_connection((host, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def reset(sock):
    """Close with a TCP reset (SO_LINGER 0)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    sock.close()


class Response:
    def __init__(self, version, status, reason, headers, body):
        self.version, self.status, self.reason = version, status, reason
        self.headers = headers  # list of (lower-case name, value)
        self.body = body

    def header(self, name, default=None):
        vals = [v for k, v in self.headers if k == name.lower()]
        assert len(vals) <= 1, "header %s repeated: %r" % (name, self.headers)
        return vals[0] if vals else default

    def __repr__(self):
        return "<Response %d %r %r>" % (self.status, self.headers, self.body[:80])


class Reader:
    """Reads responses off a socket, strictly: a status line, header fields,
    a body framed by Content-Length (voltd always sends one)."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError("connection closed; %d bytes unread: %r" % (len(self.buf), self.buf[:200]))
        self.buf += data

    def response(self, head_only=False):
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        version, status, reason = lines[0].split(" ", 2)
        headers = []
        for line in lines[1:]:
            name, value = line.split(":", 1)
            assert name == name.strip(), line
            headers.append((name.lower(), value.strip()))
        status = int(status)
        r = Response(version, status, reason, headers, b"")
        if status < 200:
            return r
        n = int(r.header("content-length"))
        if head_only:
            return r
        while len(self.buf) < n:
            self._fill()
        r.body, self.buf = self.buf[:n], self.buf[n:]
        return r

    def at_eof(self, timeout=5):
        """True when the peer closes with nothing more sent."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            return True
        self.buf += data
        return data == b"" and self.buf == b""


def request(port, method, target, body=None, headers=(), version="1.1", close=True):
    """One request on a new connection; returns the Response."""
    s = connect(port)
    try:
        s.sendall(req_bytes(method, target, body, headers, version, close))
        return Reader(s).response(head_only=(method == "HEAD"))
    finally:
        s.close()


def req_bytes(method, target, body=None, headers=(), version="1.1", close=False):
    lines = ["%s %s HTTP/%s" % (method, target, version), "Host: t"]
    if body is not None:
        lines.append("Content-Length: %d" % len(body))
    if close:
        lines.append("Connection: close")
    lines.extend(headers)
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


def raw_exchange(port, data, timeout=10):
    """Send bytes, half-close, read until the server closes."""
    s = connect(port, timeout)
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk
    finally:
        s.close()


def spin_ref(n):
    """The reference loop of /v1/spin (issue 6), bit for bit."""
    x = 0x9E3779B97F4A7C15
    m = (1 << 64) - 1
    for _ in range(n):
        x ^= (x << 13) & m
        x ^= x >> 7
        x ^= (x << 17) & m
    return x
