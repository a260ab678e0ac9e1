# SPDX-License-Identifier: MIT
"""Answers voltd sends before it has read the whole request (413, 400, 431,
408, and the shed 503 for comparison) reach a client that writes its whole
request before it reads anything, as h2load does, once per I/O backend: the
close lingers (RFC 9112 section 9.6): the write side is shut after the
answer, and what the client still sends is read and dropped, within bounds
of bytes and time, so the client's writes never meet a reset."""
import re
import select
import shutil
import subprocess
import time

import pytest

from httputil import Reader, backend, connect, reset, stop, voltd  # noqa: F401

MIB = 1024 * 1024
# Several times what the linger used to read (1 MiB) before it closed on a
# client still sending: the kernel's buffers then cannot hide the reset.
BODY = 8 * MIB
CHUNK = 64 * 1024


def write_all(s, data):
    """Send data whole; the OSError a reset makes (EPIPE, ECONNRESET) fails
    the test: a client that writes first never reads the answer then."""
    view = memoryview(data)
    for off in range(0, len(view), CHUNK):
        try:
            s.sendall(view[off:off + CHUNK])
        except OSError as e:
            pytest.fail("the server reset the connection while the client was still writing "
                        "(%d of %d bytes written): %r" % (off, len(view), e))


def wait_answered(s, timeout=10):
    """Wait until the answer is there without reading it (a hang guard)."""
    r, _, _ = select.select([s], [], [], timeout)
    assert r, "no answer within %d s" % timeout


def read_answer(s, status):
    """The one answer, then the server's close."""
    rd = Reader(s)
    r = rd.response()
    assert r.status == status, r
    assert r.header("connection") == "close", r
    assert rd.at_eof(), "server sent more or did not close"
    return r


def lingered(d, n):
    st = stop(d)
    assert st["lingers"] == n, st
    assert st["linger_drained"] > 0 and st["linger_cut"] == 0, st
    return st


def test_413_reaches_a_client_that_writes_first(voltd):
    d = voltd()
    s = connect(d.port)
    write_all(s, b"POST /v1/hash HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % BODY + b"x" * BODY)
    read_answer(s, 413)
    s.close()
    lingered(d, 1)


def test_400_reaches_a_client_that_writes_first(voltd):
    d = voltd()
    s = connect(d.port)
    write_all(s, b"POST /v1/hash HTTP/1.1\r\nHost: t\r\nBad Header: x\r\nContent-Length: %d\r\n\r\n" % BODY +
              b"x" * BODY)
    read_answer(s, 400)
    s.close()
    lingered(d, 1)


def test_431_reaches_a_client_that_writes_first(voltd):
    d = voltd("-s", "server.max_header_bytes=1024")
    s = connect(d.port)
    write_all(s, b"POST /v1/hash HTTP/1.1\r\nHost: t\r\nX-Big: " + b"b" * 2000 +
              b"\r\nContent-Length: %d\r\n\r\n" % BODY + b"x" * BODY)
    read_answer(s, 431)
    s.close()
    lingered(d, 1)


@pytest.mark.parametrize("phase", ["header", "body"])
def test_408_reaches_a_client_that_writes_first(voltd, phase):
    # The client stalls past the deadline, then writes the rest of its
    # request (it looks at nothing before it has written everything), then
    # reads.
    d = voltd("-s", "server.header_timeout_ms=200", "-s", "server.body_timeout_ms=200",
              "-s", "server.max_body_bytes=%d" % (2 * BODY))
    req = b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % BODY + b"x" * BODY
    cut = 20 if phase == "header" else req.index(b"\r\n\r\n") + 4 + 1000
    s = connect(d.port)
    write_all(s, req[:cut])
    wait_answered(s)
    write_all(s, req[cut:])
    read_answer(s, 408)
    s.close()
    st = lingered(d, 1)
    assert st["timeouts_" + phase] == 1, st


def test_linger_ends_at_its_bound(voltd):
    # A client that goes on sending after the 413 and never closes: the
    # linger's time bound ends it (the close resets the connection), and it
    # is counted as cut.
    d = voltd()
    s = connect(d.port)
    s.sendall(b"POST /v1/hash HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % (1 << 40))
    wait_answered(s)
    deadline = time.monotonic() + 20  # a hang guard: the bound is 2 s
    cut = None
    while time.monotonic() < deadline and cut is None:
        try:
            s.sendall(b"x" * 4096)
        except OSError as e:
            cut = e
        time.sleep(0.02)
    assert cut is not None, "the linger never ended"
    s.close()
    st = stop(d)
    assert st["lingers"] == 1 and st["linger_cut"] == 1, st


def test_shed_503_reaches_a_client_that_writes_first(voltd):
    # The shed 503 is decided once the body is read (a started body always
    # completes), so nothing is left to linger for; a client that writes
    # first still reads it, and the connection stays open for the next.
    d = voltd("-s", "server.max_inflight_bytes=%d" % MIB, "-s", "stages.on_full=shed")
    holder = connect(d.port)
    holder.sendall(b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % MIB + b"h" * (MIB // 2))
    time.sleep(0.3)
    s = connect(d.port)
    body = b"x" * (512 * 1024)
    req = b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    write_all(s, req + req)
    rd = Reader(s)
    for _ in range(2):
        r = rd.response()
        assert r.status == 503 and r.header("retry-after") == "1", r
    s.close()
    reset(holder)
    st = stop(d)
    assert st["budget_shed"] == 2 and st["lingers"] == 0, st


def test_h2load_413_on_every_request(voltd, tmp_path):
    """h2load writes its whole body before it reads: 8 requests with 3 MiB
    bodies (max_body_bytes is 1 MiB) on one connection at a time get 8 413s."""
    if not shutil.which("h2load"):
        pytest.skip("h2load not found: install the Debian package nghttp2-client")
    d = voltd()
    f = tmp_path / "body"
    f.write_bytes(b"z" * (3 * MIB))
    out = subprocess.run(["h2load", "--h1", "-n", "8", "-c", "1", "-m", "1", "-d", str(f),
                          "http://127.0.0.1:%d/v1/hash" % d.port],
                         capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done", out)
    assert m and m.group(3) == "8", out + d.log()[-3000:]
    assert re.search(r"status codes: 0 2xx, 0 3xx, 8 4xx, 0 5xx", out), out
    st = stop(d)
    assert st["responses_4xx"] == 8 and st["lingers"] == 8 and st["linger_cut"] == 0, st
