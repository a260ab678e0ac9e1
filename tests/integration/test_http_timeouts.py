# SPDX-License-Identifier: MIT
"""Header, body, idle and send deadlines with small configured timeouts,
once per I/O backend: 408 and close for a head or body that does not arrive
in time, a silent close of idle connections, no idle close while the
client waits for a job."""
import socket
import time

from httputil import Reader, backend, bound, connect, req_bytes, stop, voltd  # noqa: F401

TIMEOUTS = ("-s", "server.header_timeout_ms=300", "-s", "server.body_timeout_ms=400",
            "-s", "server.idle_timeout_ms=500")


def expect_408(s, min_s, t0):
    rd = Reader(s)
    r = rd.response()
    took = time.monotonic() - t0
    assert r.status == 408 and r.header("connection") == "close", r
    assert took >= min_s, took  # not before the deadline; how soon after is a figure
    bound("test_http_timeouts", "408_after_deadline_s", took - min_s, "<", 2)
    assert rd.at_eof()


def test_408_header_timeout(voltd):
    d = voltd(*TIMEOUTS)
    s = connect(d.port)
    t0 = time.monotonic()
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n")
    expect_408(s, 0.3, t0)
    s.close()
    st = stop(d)
    assert st["timeouts_header"] == 1 and st["responses_4xx"] == 1


def test_header_timeout_bounds_the_whole_head(voltd):
    # A head trickling in a byte at a time is still cut at the deadline.
    d = voltd(*TIMEOUTS)
    s = connect(d.port)
    t0 = time.monotonic()
    s.sendall(b"G")
    for c in b"ET /healthz HTTP/1.1\r\nX-Slow: " + b"s" * 100:
        if time.monotonic() - t0 > 0.6:
            break
        try:
            s.send(bytes([c]))
        except OSError:
            break
        time.sleep(0.02)
    expect_408(s, 0.3, t0)
    s.close()


def test_408_body_timeout(voltd):
    d = voltd(*TIMEOUTS)
    s = connect(d.port)
    s.sendall(b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc")
    t0 = time.monotonic()
    expect_408(s, 0.4, t0 - 0.05)
    s.close()
    st = stop(d)
    assert st["timeouts_body"] == 1 and st["responses_4xx"] == 1


def test_408_chunked_body_timeout(voltd):
    d = voltd(*TIMEOUTS)
    s = connect(d.port)
    s.sendall(b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
    t0 = time.monotonic()
    expect_408(s, 0.4, t0 - 0.05)
    s.close()


def test_idle_keepalive_connection_closed_silently(voltd):
    d = voltd(*TIMEOUTS)
    s = connect(d.port)
    rd = Reader(s)
    s.sendall(req_bytes("GET", "/healthz"))
    assert rd.response().status == 200
    t0 = time.monotonic()
    assert rd.at_eof(timeout=5)
    took = time.monotonic() - t0
    assert took >= 0.45, took  # not before the idle timeout; how soon after is a figure
    bound("test_http_timeouts", "idle_close_s", took, "<", 2.5)
    s.close()
    st = stop(d)
    assert st["timeouts_idle"] == 1 and st["requests"] == 1


def test_silent_connection_closed_after_header_timeout(voltd):
    d = voltd(*TIMEOUTS)
    s = connect(d.port)
    t0 = time.monotonic()
    assert Reader(s).at_eof(timeout=5)
    took = time.monotonic() - t0
    assert took >= 0.25, took  # not before the header timeout; how soon after is a figure
    bound("test_http_timeouts", "header_close_s", took, "<", 2.5)
    s.close()
    st = stop(d)
    assert st["requests"] == 0 and st["timeouts_idle"] == 1


def test_no_idle_close_while_a_job_runs(voltd):
    # The idle deadline (500 ms) does not run while the client waits.
    d = voltd(*TIMEOUTS)
    s = connect(d.port)
    rd = Reader(s)
    s.sendall(req_bytes("GET", "/v1/sleep?ms=900"))
    r = rd.response()
    assert r.status == 200 and r.body.startswith(b"slept")
    s.sendall(req_bytes("GET", "/healthz", close=True))
    assert rd.response().status == 200
    s.close()


def test_keepalive_survives_many_short_gaps(voltd):
    # Gaps shorter than the idle timeout, adding up to more, keep it open.
    d = voltd(*TIMEOUTS)
    s = connect(d.port)
    rd = Reader(s)
    for _ in range(6):
        s.sendall(req_bytes("GET", "/healthz"))
        assert rd.response().status == 200
        time.sleep(0.2)
    s.close()
    assert stop(d)["timeouts_idle"] == 0


def test_send_timeout_on_a_client_that_never_reads(voltd):
    # A 4 MiB answer to a client that reads nothing: the send cannot
    # finish; within two send timeouts without progress the connection is
    # cut and counted.
    # (a body timeout of its own: 4 MiB may take more than 400 ms to arrive
    # on a loaded machine)
    d = voltd(*TIMEOUTS, "-s", "server.max_body_bytes=8388608", "-s", "server.send_timeout_ms=500",
              "-s", "server.body_timeout_ms=10000")
    s = connect(d.port)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    body = b"z" * (4 << 20)
    s.sendall(req_bytes("POST", "/v1/echo", body=body))
    time.sleep(2.5)
    s.close()
    st = stop(d)
    assert st["timeouts_send"] == 1 and st["requests_dropped"] == 1, st
