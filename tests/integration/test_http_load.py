# SPDX-License-Identifier: MIT
"""Load, overload and misbehaving clients, once per I/O backend: floods in
shed mode (503 + Retry-After, the daemon stays healthy) and in wait mode
(nothing lost), clients that reset mid-request, mid-job and mid-response,
1,000 concurrent connections, the max_connections pause, real clients
(curl, Python's http.client, a short wrk run), the drain on SIGTERM, and
the accounting invariant: requests received = responses sent + requests
dropped with their connection (checked after every test by the fixture)."""
import concurrent.futures
import http.client
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from httputil import (Reader, backend, bound, connect, req_bytes, request, reset,  # noqa: F401
                      responses_total, stop, voltd)

SPIN_2M = b"112293701011261965\n"
SPIN_1K = b"6248290529083013365\n"


def pipelined(port, reqs, timeout=60):
    """Send reqs (bytes each) in one write on one connection; return the
    responses in order."""
    s = connect(port, timeout)
    try:
        s.sendall(b"".join(reqs))
        rd = Reader(s)
        return [rd.response(head_only=r.startswith(b"HEAD ")) for r in reqs]
    finally:
        s.close()


# ---------------------------------------------------------------- floods

def test_shed_flood_gets_503_and_daemon_stays_healthy(voltd):
    d = voltd("-s", "stages.on_full=shed", "-s", "stages.jobs_capacity=2",
              "-s", "stages.exec_tasks=1", "-s", "stages.retry_after_s=3")
    reqs = [req_bytes("GET", "/v1/spin?n=2000000")] * 8
    with concurrent.futures.ThreadPoolExecutor(32) as ex:
        results = [r for rs in ex.map(lambda _: pipelined(d.port, reqs), range(32)) for r in rs]
    codes = [r.status for r in results]
    assert set(codes) <= {200, 503}, set(codes)
    shed = [r for r in results if r.status == 503]
    assert shed, "a flood at capacity 2 must shed"
    assert all(r.header("retry-after") == "3" for r in shed)
    assert all(r.body == SPIN_2M for r in results if r.status == 200)
    assert codes.count(200) > 0
    assert request(d.port, "GET", "/healthz").body == b"ok\n"
    assert request(d.port, "GET", "/v1/spin?n=1000").body == SPIN_1K
    st = stop(d)
    assert st["shed"] == len(shed) and st["responses_5xx"] == len(shed)
    assert st["requests_dropped"] == 0


def test_wait_flood_loses_nothing(voltd):
    d = voltd("-s", "stages.on_full=wait", "-s", "stages.jobs_capacity=2",
              "-s", "stages.replies_capacity=2", "-s", "stages.exec_tasks=1",
              "-s", "stages.write_tasks=1")
    plan = [(req_bytes("GET", "/v1/spin?n=1000"), SPIN_1K),
            (req_bytes("POST", "/v1/echo", body=b"e" * 3000), b"e" * 3000),
            (req_bytes("GET", "/healthz"), b"ok\n"),
            (req_bytes("GET", "/v1/sleep?ms=1"), b"slept 1 ms\n")] * 10

    def one(i):
        return pipelined(d.port, [r for r, _ in plan])

    with concurrent.futures.ThreadPoolExecutor(40) as ex:
        for rs in ex.map(one, range(40)):
            assert [r.body for r in rs] == [w for _, w in plan]
    st = stop(d)
    n = 40 * len(plan)
    assert st["requests"] == n and st["responses_2xx"] == n and st["shed"] == 0
    assert st["requests_dropped"] == 0 and st["results_dropped"] == 0
    # the channels were full and senders waited (back pressure, not loss)
    assert st["jobs_full_events"] > 0 and st["jobs_send_waits"] > 0, st


def test_thousand_concurrent_connections(voltd):
    d = voltd()
    n = 1000
    socks = [connect(d.port, timeout=30) for _ in range(n)]
    # Every connection has a job in flight at the same time.
    for s in socks:
        s.sendall(req_bytes("GET", "/v1/sleep?ms=300"))
    for s in socks:
        r = Reader(s).response()
        assert r.status == 200 and r.body == b"slept 300 ms\n"
    # ... and is still open and usable.
    for s in socks:
        s.sendall(req_bytes("GET", "/healthz", close=True))
    for s in socks:
        assert Reader(s).response().body == b"ok\n"
        s.close()
    st = stop(d)
    assert st["conns_accepted"] == n and st["requests"] == 2 * n and st["responses_2xx"] == 2 * n


def test_max_connections_pauses_accepting(voltd):
    d = voltd("-s", "server.max_connections=3")
    held = [connect(d.port) for _ in range(3)]
    for s in held:
        s.sendall(req_bytes("GET", "/healthz"))
        assert Reader(s).response().status == 200
    extra = connect(d.port)  # the kernel completes the handshake
    extra.sendall(req_bytes("GET", "/healthz", close=True))
    extra.settimeout(0.5)
    with pytest.raises(socket.timeout):
        extra.recv(1)
    held.pop().close()  # room for one
    extra.settimeout(10)
    assert Reader(extra).response().status == 200
    extra.close()
    for s in held:
        s.close()
    st = stop(d)
    assert st["accept_pauses"] >= 1 and st["conns_accepted"] == 4


# ---------------------------------------------------------------- resets

def test_reset_mid_request(voltd):
    d = voltd()
    for data in (b"GET /heal", b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nabc"):
        s = connect(d.port)
        s.sendall(data)
        time.sleep(0.05)
        reset(s)
    s = connect(d.port)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n")
    s.close()  # a clean close mid-head: nobody to answer either
    time.sleep(0.1)
    assert request(d.port, "GET", "/healthz").status == 200
    st = stop(d)
    assert st["requests"] == 1 and st["client_resets"] >= 2


def test_reset_while_job_runs(voltd):
    # The client goes away while its job sleeps: the result is dropped,
    # everything is freed (ASan builds check), the request is counted.
    d = voltd()
    s = connect(d.port)
    s.sendall(req_bytes("GET", "/v1/sleep?ms=300") + req_bytes("GET", "/v1/spin?n=1000"))
    time.sleep(0.1)
    reset(s)
    time.sleep(0.5)
    assert request(d.port, "GET", "/healthz").status == 200
    st = stop(d)
    assert st["requests_dropped"] == 2 and st["requests"] == 3, st


def test_reset_mid_response(voltd):
    # A large answer the client starts reading, then resets.
    d = voltd("-s", "server.max_body_bytes=16777216")
    body = b"r" * (8 << 20)
    s = connect(d.port, timeout=30)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
    s.sendall(req_bytes("POST", "/v1/echo", body=body))
    got = s.recv(4096)
    assert got.startswith(b"HTTP/1.1 200 OK")
    reset(s)
    time.sleep(0.3)
    assert request(d.port, "GET", "/healthz").status == 200
    st = stop(d)
    assert st["requests_dropped"] == 1 and st["client_resets"] >= 1, st


def test_many_clients_vanishing(voltd):
    # Mixed resets and clean closes under load; the daemon stays healthy.
    d = voltd()

    def one(i):
        s = connect(d.port)
        s.sendall(req_bytes("GET", "/v1/sleep?ms=%d" % (i % 50)) + req_bytes("GET", "/v1/spin?n=100000"))
        if i % 3 == 0:
            reset(s)
        elif i % 3 == 1:
            s.close()
        else:
            rd = Reader(s)
            assert rd.response().status == 200 and rd.response().status == 200
            s.close()

    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(one, range(200)))
    time.sleep(0.2)
    assert request(d.port, "GET", "/healthz").status == 200
    stop(d)  # the invariant, leak checks


# ---------------------------------------------------------- real clients

def test_curl_keepalive(voltd):
    d = voltd()
    base = "http://127.0.0.1:%d" % d.port
    p = subprocess.run(["curl", "-sS", "-v", base + "/healthz", base + "/v1/spin?n=1000",
                        "--data-binary", "hello", "-X", "POST", base + "/v1/echo"],
                       capture_output=True, text=True, timeout=30)
    # (curl applies -X/--data to every URL: check the three answers.)
    assert p.returncode == 0, p.stderr
    assert "Re-using existing connection" in p.stderr or "Reusing existing connection" in p.stderr
    p = subprocess.run(["curl", "-sS", "-o", "-", "-w", "%{http_code}", base + "/v1/spin?n=2000000"],
                       capture_output=True, text=True, timeout=30)
    assert p.stdout == "112293701011261965\n200"
    p = subprocess.run(["curl", "-sS", "-H", "Expect: 100-continue", "--data-binary", "@-",
                        base + "/v1/echo"], input="x" * 5000, capture_output=True, text=True, timeout=30)
    assert p.stdout == "x" * 5000
    p = subprocess.run(["curl", "-sS", "-I", base + "/healthz"], capture_output=True, text=True, timeout=30)
    assert p.stdout.startswith("HTTP/1.1 200 OK") and "Content-Length: 3" in p.stdout


def test_python_http_client(voltd):
    d = voltd()
    c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
    for _ in range(3):
        c.request("GET", "/healthz")
        r = c.getresponse()
        assert r.status == 200 and r.read() == b"ok\n"
    c.request("POST", "/v1/echo", body=b"abc" * 1000)
    r = c.getresponse()
    assert r.read() == b"abc" * 1000
    c.request("POST", "/v1/echo", body=iter([b"chunk1", b"chunk2"]),
              headers={"Transfer-Encoding": "chunked"}, encode_chunked=True)
    assert c.getresponse().read() == b"chunk1chunk2"
    c.request("GET", "/missing")
    r = c.getresponse()
    assert r.status == 404 and r.read() == b"404 Not Found\n"
    c.close()
    st = stop(d)
    assert st["conns_accepted"] == 1 and st["requests"] == 6


@pytest.mark.skipif(not shutil.which("wrk"), reason="wrk not found: install the Debian package wrk")
def test_wrk_short_run(voltd):
    d = voltd()
    url = "http://127.0.0.1:%d" % d.port
    p = subprocess.run(["wrk", "-t1", "-c32", "-d2s", url + "/healthz"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    m = re.search(r"(\d+) requests in", out)
    assert m and int(m.group(1)) > 0, out
    bound("test_http_load", "wrk_healthz_requests_2s", int(m.group(1)), ">", 1000)
    assert "Non-2xx" not in out and "Socket errors" not in out, out
    p = subprocess.run(["wrk", "-t1", "-c16", "-d1s", url + "/v1/spin?n=10000"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "Non-2xx" not in p.stdout and "Socket errors" not in p.stdout, p.stdout
    assert request(d.port, "GET", "/healthz").status == 200
    st = stop(d)
    assert st["responses_2xx"] >= int(m.group(1))
    assert st["responses_4xx"] == st["responses_5xx"] == 0


# ----------------------------------------------------- drain, accounting

def test_drain_answers_in_flight_then_exits(voltd):
    d = voltd()
    s = connect(d.port)
    s.sendall(req_bytes("GET", "/v1/sleep?ms=600"))
    idle = connect(d.port)
    idle.sendall(req_bytes("GET", "/healthz"))
    assert Reader(idle).response().status == 200
    time.sleep(0.1)
    d.proc.send_signal(signal.SIGTERM)
    rd = Reader(s)
    r = rd.response()
    assert r.status == 200 and r.header("connection") == "close"
    assert rd.at_eof()
    assert Reader(idle).at_eof()  # idle keep-alive connections close at once
    s.close()
    idle.close()
    st = stop(d)
    assert st["requests"] == 2 and st["requests_dropped"] == 0


def test_drain_cuts_what_outlives_the_bound(voltd):
    # A job longer than the drain bound (server.drain_timeout_ms) is cut: the
    # connection closes, the request is counted as dropped, voltd exits 0,
    # no leak.
    d = voltd("-s", "server.drain_timeout_ms=1500")
    s = connect(d.port, timeout=30)
    s.sendall(req_bytes("GET", "/v1/sleep?ms=30000"))
    time.sleep(0.1)
    t = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    assert Reader(s).at_eof(timeout=20)
    s.close()
    st = stop(d)
    took = time.monotonic() - t
    assert took >= 1.4, took  # not cut before the drain bound
    bound("test_http_load", "drain_cut_s", took, "<", 6)
    assert st["requests"] == 1 and st["requests_dropped"] == 1
    assert "cutting them" in d.log()


def test_counters_balance_after_mixed_traffic(voltd):
    d = voltd("-s", "server.max_header_bytes=1024", "-s", "server.max_body_bytes=4096")
    bad = [b"GET /x HTTP/9.9\r\nHost: t\r\n\r\n", b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n",
           b"GET /" + b"u" * 1100 + b" HTTP/1.1\r\nHost: t\r\n\r\n", b"BREW /pot HTTP/1.1\r\nHost: t\r\n\r\n"]

    def good(i):
        return pipelined(d.port, [req_bytes("GET", "/healthz"), req_bytes("GET", "/v1/spin?n=%d" % i),
                                  req_bytes("GET", "/nope"), req_bytes("DELETE", "/v1/echo"),
                                  req_bytes("HEAD", "/readyz")])

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        rs = list(ex.map(good, range(100)))
    for data in bad:
        s = connect(d.port)
        s.sendall(data)
        Reader(s).response()
        s.close()
    st = stop(d)
    n_good = 5 * len(rs)
    assert st["requests"] == n_good + len(bad)
    assert responses_total(st) == st["requests"] and st["requests_dropped"] == 0
    assert st["responses_2xx"] == 3 * len(rs)
    # bad: 505, 413, 414, 400 (unknown method)
    assert st["responses_4xx"] == 2 * len(rs) + 3 and st["responses_5xx"] == 1
    # per kind: count and latency quantiles
    kinds = dict(re.findall(r"server kind (\w+): count=(\d+) p50_us=\d+ p90_us=\d+ p99_us=\d+ p999_us=\d+",
                            d.log()))
    assert kinds["healthz"] == str(len(rs)) and kinds["spin"] == str(len(rs))
    assert kinds["readyz"] == str(len(rs))
    assert kinds["echo"] == str(len(rs))  # the 405s
    # 404s and the parse errors (decided before routing)
    assert kinds["other"] == str(len(rs) + len(bad))


def test_several_listeners(voltd):
    from conftest import free_port
    other = free_port()
    d = voltd("-s", "server.listen=127.0.0.1:%d 127.0.0.1:%d" % (0, other), wait_for="ready")
    ports = [int(p) for p in re.findall(r"server: listening on \S+ \(port (\d+)\)", d.log())]
    assert len(ports) == 2 and other in ports, d.log()
    for p in ports:
        assert request(p, "GET", "/healthz").body == b"ok\n"

