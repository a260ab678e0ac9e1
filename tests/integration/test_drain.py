# SPDX-License-Identifier: MIT
"""The drain sequence, on both I/O backends: an upload still arriving at
SIGTERM gets its response; during server.shutdown_delay_ms /readyz answers
503 while requests still succeed (with Connection: close); idle keep-alive
connections are closed; voltctl-style drain/undrain through the agent
port; /livez is distinct from /readyz; the accounting holds."""
import signal
import socket
import threading
import time

from httputil import Reader, backend, connect, parse_stats, req_bytes, request, stop, voltd  # noqa: F401
from conftest import free_port


def test_upload_arriving_at_sigterm_is_answered(voltd):
    d = voltd("-s", "server.drain_timeout_ms=10000")
    body = b"x" * 200000
    s = connect(d.port)
    head = ("POST /v1/echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body)).encode()
    s.sendall(head + body[:1000])
    time.sleep(0.3)
    d.proc.send_signal(15)
    time.sleep(0.5)        # the drain has begun: the listener is closed
    s.sendall(body[1000:])
    r = Reader(s).response()
    assert r.status == 200 and r.body == body, r
    assert r.header("connection") == "close", r
    st = stop(d)
    assert st["requests"] == 1 and st["responses_2xx"] == 1 and st["requests_dropped"] == 0, st


def test_upload_cut_by_the_drain_bound_is_counted(voltd):
    d = voltd("-s", "server.drain_timeout_ms=500")
    s = connect(d.port)
    s.sendall(b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100)
    time.sleep(0.3)
    st = stop(d)           # never sends the rest: cut after 500 ms
    assert st["requests"] == 1 and st["requests_dropped"] == 1, st
    s.close()


def test_shutdown_delay_not_ready_but_serving(voltd):
    d = voltd("-s", "server.shutdown_delay_ms=1500")
    idle = connect(d.port)
    idle.sendall(req_bytes("GET", "/healthz"))
    assert Reader(idle).response().status == 200          # now idle, keep-alive
    assert request(d.port, "GET", "/readyz").status == 200
    d.proc.send_signal(15)
    time.sleep(0.3)
    r = request(d.port, "GET", "/readyz", close=False)
    assert r.status == 503, r
    s = connect(d.port)
    s.sendall(req_bytes("GET", "/healthz"))
    r = Reader(s).response()
    assert r.status == 200 and r.header("connection") == "close", r
    assert request(d.port, "GET", "/livez").status == 200   # alive, not ready
    # after the delay: listener closed, idle keep-alive connection closed
    assert Reader(idle).at_eof(timeout=10)
    st = stop(d)
    assert st["responses_5xx"] == 1 and st["requests_dropped"] == 0, st


def agent(port):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        out = b""
        while True:
            b = s.recv(100)
            if not b:
                return out.decode()
            out += b


def test_agent_check_port(voltd):
    ap = free_port()
    d = voltd("-s", "server.agent_listen=127.0.0.1:%d" % ap, "-s", "server.shutdown_delay_ms=1000")
    assert agent(ap) == "up ready\n"
    d.proc.send_signal(15)
    time.sleep(0.3)
    assert agent(ap) == "drain\n"
    assert request(d.port, "GET", "/healthz").status == 200
    stop(d)


def test_livez_and_readyz_when_healthy(voltd):
    d = voltd()
    assert request(d.port, "GET", "/livez").status == 200
    assert request(d.port, "HEAD", "/livez").status == 200
    assert request(d.port, "GET", "/readyz").status == 200
    stop(d)


def test_control_drain_and_undrain(voltd):
    from ctlutil import ctl
    ap = free_port()
    d = voltd("-s", "server.agent_listen=127.0.0.1:%d" % ap)
    r = ctl(d, "drain")
    assert r["ok"] is True and r["draining"] is True, r
    assert request(d.port, "GET", "/readyz").status == 503
    assert agent(ap) == "drain\n"
    s = connect(d.port)
    s.sendall(req_bytes("GET", "/healthz"))          # still served, then closed
    r = Reader(s).response()
    assert r.status == 200 and r.header("connection") == "close", r
    assert Reader(s).at_eof()
    assert ctl(d, "undrain")["ok"] is True
    assert request(d.port, "GET", "/readyz").status == 200
    assert agent(ap) == "up ready\n"
    s = connect(d.port)
    s.sendall(req_bytes("GET", "/healthz"))
    assert Reader(s).response().header("connection") is None   # keep-alive again
    s.close()
    stop(d)


def test_undrain_while_stopping_says_why(voltd):
    """D16: once SIGTERM began the stop, undrain is refused with a sentence,
    not a bare strerror."""
    from ctlutil import ctl
    d = voltd("-s", "server.shutdown_delay_ms=3000")
    d.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    while request(d.port, "GET", "/readyz").status != 503:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    r = ctl(d, "undrain")
    assert r["ok"] is False and r["code"] == "failed" and "stopping" in r["error"], r
    assert "Device or resource busy" not in r["error"], r
    d.proc.wait(timeout=20)  # the stop SIGTERM began ends by itself
    stop(d)
