# SPDX-License-Identifier: MIT
"""Every route of issue 6 and its errors, once per I/O backend: /healthz
(GET, HEAD), /readyz (ready and not), /v1/echo, /v1/spin, /v1/sleep,
/v1/hash, /v1/gzip, 404 for unknown paths, 405 with Allow."""
import concurrent.futures
import hashlib
import re
import time
import zlib

import pytest

from ctlutil import ctl
from httputil import (Reader, backend, bound, connect, req_bytes, request, spin_ref,  # noqa: F401
                      stop, voltd)

DATE_RE = re.compile(r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
                     r"\d{4} \d\d:\d\d:\d\d GMT$")


def test_healthz_get(voltd):
    d = voltd()
    r = request(d.port, "GET", "/healthz")
    assert (r.version, r.status, r.body) == ("HTTP/1.1", 200, b"ok\n")
    assert r.header("content-type") == "text/plain"
    assert r.header("content-length") == "3"
    assert r.header("server") == "voltd"
    assert DATE_RE.match(r.header("date")), r.header("date")
    assert stop(d)["responses_2xx"] == 1


def test_healthz_head(voltd):
    d = voltd()
    s = connect(d.port)
    rd = Reader(s)
    # HEAD then GET on one connection: HEAD sends the length, no body bytes.
    s.sendall(req_bytes("HEAD", "/healthz") + req_bytes("GET", "/healthz", close=True))
    r = rd.response(head_only=True)
    assert r.status == 200 and r.header("content-length") == "3"
    r2 = rd.response()
    assert r2.status == 200 and r2.body == b"ok\n"
    assert rd.at_eof()
    s.close()


def test_readyz_ready(voltd):
    d = voltd()
    r = request(d.port, "GET", "/readyz")
    assert (r.status, r.body) == (200, b"ready\n")


def test_readyz_not_ready_when_jobs_full(voltd):
    # One executor, `jobs` holds 10: one spin job runs, 9 wait = 90 %
    # (the heavy lane off: with it the executor hands each job on after
    # its first slice and `jobs` never fills).
    d = voltd("-s", "stages.exec_tasks=1", "-s", "stages.jobs_capacity=10",
              "-s", "stages.on_full=wait", "-s", "stages.heavy_lane=off")
    socks = []
    for _ in range(10):
        s = connect(d.port, timeout=60)
        s.sendall(req_bytes("GET", "/v1/spin?n=30000000", close=True))
        socks.append(s)
    seen = []
    for _ in range(20):
        r = request(d.port, "GET", "/readyz")
        seen.append(r.status)
        if r.status == 503:
            assert r.body == b"not ready\n"
            break
        time.sleep(0.01)
    assert 503 in seen, seen
    bodies = set()
    for s in socks:
        r = Reader(s).response()
        assert r.status == 200
        bodies.add(r.body)
        s.close()
    assert len(bodies) == 1
    assert request(d.port, "GET", "/readyz").status == 200


def test_echo(voltd):
    d = voltd()
    for body in (b"hello", b"", bytes(range(256)) * 40, b"x" * 300_000):
        r = request(d.port, "POST", "/v1/echo", body=body)
        assert r.status == 200 and r.body == body, (len(body), r)
        assert r.header("content-length") == str(len(body))


def test_echo_wrong_method(voltd):
    d = voltd()
    r = request(d.port, "GET", "/v1/echo")
    assert r.status == 405 and r.header("allow") == "POST"


@pytest.mark.parametrize("n,want", [(1000, 6248290529083013365), (2000000, 112293701011261965),
                                    (0, 0x9E3779B97F4A7C15), (1, None), (12345, None)])
def test_spin_values(voltd, n, want):
    d = voltd()
    if want is None:
        want = spin_ref(n)
    r = request(d.port, "GET", "/v1/spin?n=%d" % n)
    assert r.status == 200 and r.body == b"%d\n" % want
    assert r.header("content-type") == "text/plain"


def test_spin_bad_requests(voltd):
    d = voltd("-s", "jobs.spin_max_n=5000")
    for q in ("", "?m=3", "?n=", "?n=abc", "?n=-1", "?n=+5", "?n=1e3", "?n=5001",
              "?n=99999999999999999999999", "?n=1&n=2"):
        r = request(d.port, "GET", "/v1/spin" + q)
        assert r.status == 400, (q, r)
    assert request(d.port, "GET", "/v1/spin?n=5000").status == 200


def test_spin_wrong_method(voltd):
    d = voltd()
    r = request(d.port, "POST", "/v1/spin?n=1", body=b"")
    assert r.status == 405 and "GET" in r.header("allow")


def test_sleep(voltd):
    d = voltd()
    t = time.monotonic()
    r = request(d.port, "GET", "/v1/sleep?ms=200")
    took = time.monotonic() - t
    assert r.status == 200 and took >= 0.2, (r, took)


def test_sleep_bad(voltd):
    d = voltd("-s", "jobs.sleep_max_ms=300")
    for q in ("", "?ms=", "?ms=x", "?ms=301", "?ms=-1"):
        assert request(d.port, "GET", "/v1/sleep" + q).status == 400, q
    assert request(d.port, "GET", "/v1/sleep?ms=300").status == 200


def test_sleep_blocks_no_worker(voltd):
    # 40 sleeps of 2 s on 2 executors and 2 workers all sleep at once, and
    # /healthz answers meanwhile: the waits are timers, not threads. (How
    # soon healthz answers and the sleeps end are figures.)
    d = voltd("-s", "stages.exec_tasks=2")
    t = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(40) as ex:
        futs = [ex.submit(request, d.port, "GET", "/v1/sleep?ms=2000") for _ in range(40)]
        deadline = time.monotonic() + 30  # a hang guard
        while ctl(d, "stats server")["server"]["requests"] < 40:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        h = time.monotonic()
        assert request(d.port, "GET", "/healthz").status == 200
        bound("test_http_routes", "healthz_during_sleeps_s", time.monotonic() - h, "<", 0.2)
        srv = ctl(d, "stats server")["server"]
        # every sleep in flight at once on 2 executors, none answered yet
        assert srv["in_flight"]["exec"] == 40 and srv["responses"]["2xx"] <= 1, srv
        assert all(f.result().status == 200 for f in futs)
    bound("test_http_routes", "sleeps_2s_x40_done_s", time.monotonic() - t, "<", 3.1)


@pytest.mark.parametrize("alg", ["sha256", "sha512"])
def test_hash(voltd, alg):
    d = voltd()
    for body in (b"", b"abc", bytes(range(256)) * 1000):
        r = request(d.port, "POST", "/v1/hash?alg=" + alg, body=body)
        assert r.status == 200
        assert r.body.strip() == hashlib.new(alg, body).hexdigest().encode()


def test_hash_bad(voltd):
    d = voltd()
    for q in ("?alg=md5", "?alg=", "?alg=SHA256", "?alg=sha256&alg=sha512"):
        assert request(d.port, "POST", "/v1/hash" + q, body=b"x").status == 400, q
    # alg defaults to sha256 (documented by the kind)
    r = request(d.port, "POST", "/v1/hash", body=b"x")
    assert r.body.strip() == hashlib.sha256(b"x").hexdigest().encode()
    assert request(d.port, "GET", "/v1/hash?alg=sha256").status == 405


def test_gzip(voltd):
    d = voltd()
    body = b"voltd gzip test " * 20000
    for level in range(1, 10):
        r = request(d.port, "POST", "/v1/gzip?level=%d" % level, body=body)
        assert r.status == 200 and r.header("content-type") == "application/gzip"
        assert zlib.decompress(r.body, 16 + zlib.MAX_WBITS) == body
    r = request(d.port, "POST", "/v1/gzip?level=6", body=b"")
    assert r.status == 200 and zlib.decompress(r.body, 16 + zlib.MAX_WBITS) == b""


def test_gzip_bad(voltd):
    d = voltd()
    for q in ("?level=0", "?level=10", "?level=x", "?level=", "?level=1&level=2"):
        assert request(d.port, "POST", "/v1/gzip" + q, body=b"x").status == 400, q
    # level has a default (the kind's)
    r = request(d.port, "POST", "/v1/gzip", body=b"x")
    assert r.status == 200 and zlib.decompress(r.body, 16 + zlib.MAX_WBITS) == b"x"


def test_not_found(voltd):
    d = voltd()
    for target in ("/", "/nope", "/healthz/", "/v1/spin/1", "/V1/ECHO", "/healthzz", "*"):
        method = "OPTIONS" if target == "*" else "GET"
        r = request(d.port, method, target)
        assert r.status == 404, (target, r)
        assert r.header("content-type") == "text/plain"


def test_method_not_allowed_has_allow(voltd):
    d = voltd()
    for method, target, allow in (("POST", "/healthz", "GET, HEAD"), ("DELETE", "/readyz", "GET, HEAD"),
                                  ("PUT", "/v1/echo", "POST"), ("GET", "/v1/gzip?level=1", "POST"),
                                  ("HEAD", "/v1/sleep?ms=1", "GET")):
        r = request(d.port, method, target, body=b"" if method in ("POST", "PUT") else None)
        assert r.status == 405, (method, target, r)
        assert r.header("allow") == allow, (method, target, r)
