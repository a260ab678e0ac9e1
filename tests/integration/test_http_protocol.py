# SPDX-License-Identifier: MIT
"""HTTP/1.1 rules of issue 6 on a real voltd, once per I/O backend:
keep-alive, Connection: close, HTTP/1.0, pipelining answered in request
order, chunked bodies with trailers, 100-continue, and every protocol error
(400 cases, 413 from Content-Length, 414, 431, 417, 501, 505), each answered
once and followed by a close."""
import socket
import time

import pytest

from httputil import (Reader, backend, connect, raw_exchange, req_bytes, request,  # noqa: F401
                      spin_ref, stop, voltd)


def error_case(port, data):
    """Send a bad request: exactly one answer, then the server closes."""
    s = connect(port)
    s.sendall(data)
    rd = Reader(s)
    r = rd.response()
    assert r.header("connection") == "close", r
    assert rd.at_eof(), "server sent more or did not close"
    s.close()
    return r


# ------------------------------------------------------------- keep-alive

def test_keepalive_is_default_in_11(voltd):
    d = voltd()
    s = connect(d.port)
    rd = Reader(s)
    for i in range(5):
        s.sendall(req_bytes("GET", "/healthz"))
        r = rd.response()
        assert r.status == 200 and r.header("connection") is None
    s.close()
    st = stop(d)
    assert st["conns_accepted"] == 1 and st["requests"] == 5


def test_connection_close_is_honoured(voltd):
    d = voltd()
    s = connect(d.port)
    s.sendall(req_bytes("GET", "/healthz", close=True))
    rd = Reader(s)
    r = rd.response()
    assert r.status == 200 and r.header("connection") == "close"
    assert rd.at_eof()
    s.close()


def test_http10_closes_by_default(voltd):
    d = voltd()
    s = connect(d.port)
    s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
    rd = Reader(s)
    r = rd.response()
    assert r.version == "HTTP/1.1" and r.status == 200
    assert r.header("connection") in (None, "close")
    assert rd.at_eof()
    s.close()


def test_http10_keepalive_when_asked(voltd):
    d = voltd()
    s = connect(d.port)
    rd = Reader(s)
    for _ in range(3):
        s.sendall(b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        r = rd.response()
        assert r.status == 200 and r.header("connection").lower() == "keep-alive"
    s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
    assert rd.response().status == 200
    assert rd.at_eof()
    s.close()


def test_half_closed_client_gets_every_answer(voltd):
    d = voltd()
    out = raw_exchange(d.port, req_bytes("GET", "/healthz") * 3 + req_bytes("GET", "/v1/sleep?ms=50"))
    assert out.count(b"HTTP/1.1 200 OK") == 4


# ------------------------------------------------------------ pipelining

def test_pipelined_heavy_and_light_in_order(voltd):
    # A heavy spin first, light requests behind it, a sleep in the middle:
    # the light ones finish first but are answered in request order.
    d = voltd()
    plan = [("/v1/spin?n=20000000", None), ("/healthz", b"ok\n"), ("/v1/spin?n=1000", b"6248290529083013365\n"),
            ("/v1/sleep?ms=100", None), ("/nope", None), ("/healthz", b"ok\n"),
            ("/v1/spin?n=2000000", b"112293701011261965\n"), ("/readyz", b"ready\n")]
    s = connect(d.port, timeout=30)
    s.sendall(b"".join(req_bytes("GET", t) for t, _ in plan) + req_bytes("GET", "/healthz", close=True))
    rd = Reader(s)
    got = [rd.response() for _ in plan]
    assert [r.status for r in got] == [200, 200, 200, 200, 404, 200, 200, 200]
    for (target, want), r in zip(plan, got):
        if want is not None:
            assert r.body == want, (target, r)
    assert got[3].body.startswith(b"slept")
    assert rd.response().status == 200
    assert rd.at_eof()
    s.close()
    assert stop(d)["requests"] == len(plan) + 1


def test_pipeline_limit_bounds_requests_in_flight(voltd):
    # max_pipeline=2: 20 pipelined sleeps of 50 ms run at most 2 at a time.
    d = voltd("-s", "server.max_pipeline=2")
    s = connect(d.port, timeout=30)
    t = time.monotonic()
    s.sendall(req_bytes("GET", "/v1/sleep?ms=50") * 20)
    rd = Reader(s)
    for _ in range(20):
        assert rd.response().status == 200
    assert time.monotonic() - t >= 0.5
    s.close()


def test_pipelined_flood_in_one_write(voltd):
    d = voltd()
    n = 500
    s = connect(d.port, timeout=30)
    s.sendall(req_bytes("GET", "/healthz") * n + req_bytes("GET", "/v1/spin?n=1000") * n)
    rd = Reader(s)
    for i in range(2 * n):
        r = rd.response()
        assert r.body == (b"ok\n" if i < n else b"6248290529083013365\n"), i
    s.close()


# --------------------------------------------------------------- bodies

def test_chunked_body_with_trailers(voltd):
    d = voltd()
    body = (b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n1;ext=1\r\n \r\n6\r\nworld!\r\n0\r\nX-Trailer: yes\r\nX-Other: 2\r\n\r\n")
    s = connect(d.port)
    s.sendall(body + req_bytes("GET", "/healthz", close=True))
    rd = Reader(s)
    r = rd.response()
    assert r.status == 200 and r.body == b"hello world!"
    assert rd.response().body == b"ok\n"
    s.close()


def test_chunked_byte_by_byte(voltd):
    d = voltd()
    data = (b"POST /v1/hash?alg=sha256 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
    s = connect(d.port)
    for i in range(len(data)):
        s.send(data[i:i + 1])
        time.sleep(0.001)
    r = Reader(s).response()
    assert r.status == 200
    assert r.body.strip() == b"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    s.close()


def test_100_continue(voltd):
    d = voltd()
    s = connect(d.port)
    s.sendall(b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 7\r\nExpect: 100-continue\r\n\r\n")
    rd = Reader(s)
    r = rd.response()
    assert r.status == 100 and r.headers == []
    s.sendall(b"payload")
    r = rd.response()
    assert r.status == 200 and r.body == b"payload"
    s.close()
    assert stop(d)["continues"] == 1


def test_100_continue_after_pipelined_answers(voltd):
    # The interim answer may not overtake the final answers before it.
    d = voltd()
    s = connect(d.port)
    s.sendall(req_bytes("GET", "/v1/sleep?ms=100") +
              b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
    rd = Reader(s)
    r = rd.response()
    assert r.status == 200 and r.body.startswith(b"slept")
    assert rd.response().status == 100
    s.sendall(b"ok")
    assert rd.response().body == b"ok"
    s.close()


def test_expect_other_is_417(voltd):
    d = voltd()
    r = error_case(d.port, b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nExpect: magic\r\n\r\nhi")
    assert r.status == 417


def test_413_decided_from_content_length(voltd):
    d = voltd("-s", "server.max_body_bytes=1000")
    # No body byte is sent: the answer comes from the head alone.
    r = error_case(d.port, b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1001\r\n\r\n")
    assert r.status == 413
    assert request(d.port, "POST", "/v1/echo", body=b"x" * 1000).status == 200


def test_413_when_no_body_is_allowed(voltd):
    d = voltd("-s", "server.max_body_bytes=0")
    r = error_case(d.port, b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nx")
    assert r.status == 413
    assert request(d.port, "GET", "/v1/spin?n=1000").status == 200


def test_413_chunked_over_limit(voltd):
    d = voltd("-s", "server.max_body_bytes=1000")
    r = error_case(d.port, b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                           b"3e9\r\n" + b"x" * 1001 + b"\r\n0\r\n\r\n")
    assert r.status == 413


def test_413_with_body_still_arriving_is_read(voltd):
    # The client keeps sending the body it announced: the server lingers,
    # so the client reads the 413 instead of a reset.
    d = voltd("-s", "server.max_body_bytes=1000")
    s = connect(d.port)
    s.sendall(b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 200000\r\n\r\n")
    try:
        s.sendall(b"x" * 200000)
    except OSError:
        pass
    r = Reader(s).response()
    assert r.status == 413
    s.close()


def test_414_uri_too_long(voltd):
    d = voltd("-s", "server.max_header_bytes=1024")
    r = error_case(d.port, b"GET /" + b"a" * 2000 + b" HTTP/1.1\r\nHost: t\r\n\r\n")
    assert r.status == 414


def test_431_head_too_large(voltd):
    d = voltd("-s", "server.max_header_bytes=1024")
    r = error_case(d.port, b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: " + b"b" * 1100 + b"\r\n\r\n")
    assert r.status == 431
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(200))
    r = error_case(d.port, b"GET /healthz HTTP/1.1\r\nHost: t\r\n" + many + b"\r\n")
    assert r.status == 431
    # Just under the limit is fine.
    ok = b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Fill: "
    ok += b"f" * (1024 - len(ok) - 4) + b"\r\n\r\n"
    assert len(ok) == 1024
    s = connect(d.port)
    s.sendall(ok)
    assert Reader(s).response().status == 200
    s.close()


def test_501_unknown_transfer_coding(voltd):
    d = voltd()
    r = error_case(d.port, b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n")
    assert r.status == 501


def test_505_unknown_version(voltd):
    d = voltd()
    for v in (b"HTTP/2.0", b"HTTP/1.2", b"HTTP/3.0"):
        r = error_case(d.port, b"GET /healthz " + v + b"\r\nHost: t\r\n\r\n")
        assert r.status == 505, v


@pytest.mark.parametrize("data", [
    # obs-fold
    b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-A: 1\r\n  folded\r\n\r\n",
    # duplicate, differing Content-Length
    b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
    # Transfer-Encoding together with Content-Length
    b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    # bad chunk framing
    b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
    b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n",
    # malformed request line, missing Host in 1.1, bad header name
    b"GET\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: t\r\nBad Header: x\r\n\r\n",
    b"\x00\x01\x02garbage\r\n\r\n",
], ids=["obs-fold", "dup-content-length", "te-and-cl", "chunk-size", "chunk-data", "request-line",
        "no-host", "header-name", "binary"])
def test_400_bad_requests(voltd, data):
    d = voltd()
    r = error_case(d.port, data)
    assert r.status == 400
    st = stop(d)
    assert st["requests"] == 1 and st["responses_4xx"] == 1


def test_error_after_good_pipelined_requests(voltd):
    # Good requests before a bad one are answered first, in order.
    d = voltd()
    s = connect(d.port)
    s.sendall(req_bytes("GET", "/v1/sleep?ms=50") + req_bytes("GET", "/healthz") + b"BAD\r\n\r\n")
    rd = Reader(s)
    assert rd.response().body.startswith(b"slept")
    assert rd.response().body == b"ok\n"
    r = rd.response()
    assert r.status == 400 and r.header("connection") == "close"
    assert rd.at_eof()
    s.close()
