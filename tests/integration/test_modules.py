# SPDX-License-Identifier: MIT
"""Job modules in a running voltd, once per I/O backend: modules loaded
from voltd.conf's [module.NAME] sections (tests/modules/*.so, built at
check time against <voltd/module.h>) serve their kinds as the built-in
kinds are served: spin's loop through a module kind, bit for bit; a
prefix route; HEAD answered with the kind's head and no body; a kind's
header fields after voltd's own, in the head's buffer or, up to
VOLTD_HEADERS_MAX, as a piece of their own (and one field more is the
kind's failure: 500); the server's per-kind rows, however many kinds the
modules declare (40 more here, where 16 was the cap), in stats and
Prometheus; and a live module key changed with voltctl set."""
import os
import time

from conftest import BUILDDIR
from ctlutil import ctl
from httputil import Reader, backend, connect, req_bytes, request, spin_ref, voltd  # noqa: F401 (fixtures)

MODULES = os.path.join(BUILDDIR, "tests", "modules")
HEADERS_MAX = 4096


def with_modules(voltd, tmp_path, *names, extra=""):
    conf = tmp_path / "modules.conf"
    conf.write_text("".join("[module.%s]\npath = %s\n" % (n, os.path.join(MODULES, n + ".so")) for n in names)
                    + extra)
    return voltd("-c", str(conf))


def test_module_kinds_are_served(voltd, tmp_path):
    d = with_modules(voltd, tmp_path, "good")
    for n in (0, 1, 1000, 100000):
        r = request(d.port, "GET", "/good/spin?n=%d" % n)
        assert r.status == 200, r
        assert r.body == b"%d\n" % spin_ref(n)
        assert r.header("content-type") == "text/plain"
    assert request(d.port, "GET", "/good/spin").status == 400
    assert request(d.port, "POST", "/good/spin?n=1").status == 405
    # a prefix route: the longest prefix that matches; its path back
    r = request(d.port, "GET", "/good/files/a/b.png?x=1")
    assert (r.status, r.body) == (200, b"/good/files/a/b.png")
    assert request(d.port, "GET", "/good/files").status == 404
    # the built-in kinds are still there, beside the module's
    assert request(d.port, "GET", "/v1/spin?n=1000").body == b"%d\n" % spin_ref(1000)


def test_head_and_header_fields(voltd, tmp_path):
    d = with_modules(voltd, tmp_path, "good")
    # a few fields: in the head's buffer with voltd's own
    r = request(d.port, "GET", "/good/hdrs?n=2&len=5")
    assert (r.status, r.body) == (200, b"headers\n")
    assert r.header("x-good-000") == "vvvvv" and r.header("x-good-001") == "vvvvv"
    assert r.header("content-length") == "8" and r.header("server") == "voltd"
    # HEAD: the same head, no body
    s = connect(d.port)
    s.sendall(req_bytes("HEAD", "/good/hdrs?n=1&len=3") + req_bytes("GET", "/good/hdrs?n=1&len=3", close=True))
    rd = Reader(s)
    h = rd.response(head_only=True)
    assert h.status == 200 and h.header("content-length") == "8" and h.header("x-good-000") == "vvv"
    g = rd.response()  # the next response follows the head at once: no body was sent
    assert (g.status, g.body) == (200, b"headers\n")
    s.close()
    # exactly VOLTD_HEADERS_MAX of the kind's fields (10 of "X-Good-NNN: "
    # + 393 + CRLF, and Content-Type: text/plain): sent after voltd's own
    r = request(d.port, "GET", "/good/hdrs?n=10&len=393")
    assert r.status == 200 and r.body == b"headers\n"
    assert sum(len(k) + 2 + len(v) + 2 for k, v in r.headers
               if k.startswith("x-good-") or k == "content-type") == HEADERS_MAX
    assert len([k for k, _ in r.headers if k.startswith("x-good-")]) == 10
    assert r.header("content-length") == "8"
    # pipelined after a large head, the next answer is whole
    s = connect(d.port)
    s.sendall(req_bytes("GET", "/good/hdrs?n=10&len=393") + req_bytes("GET", "/healthz", close=True))
    rd = Reader(s)
    assert rd.response().status == 200
    assert rd.response().body == b"ok\n"
    s.close()
    # one byte more: set_header refuses it (-E2BIG), the kind fails its job
    r = request(d.port, "GET", "/good/hdrs?n=10&len=394")
    assert (r.status, r.body) == (500, b"internal error\n")
    assert r.header("x-good-000") is None


def test_kinds_without_a_cap(voltd, tmp_path):
    d = with_modules(voltd, tmp_path, "good", "many")
    for n in (0, 17, 39):
        r = request(d.port, "GET", "/many/%d" % n)
        assert (r.status, r.body) == (200, b"%d\n" % n)
    assert request(d.port, "GET", "/many/40").status == 404
    # the latency is recorded just after the response is sent
    deadline = time.monotonic() + 10
    kinds = ctl(d, "stats kinds")["kinds"]
    while kinds["many_39"]["kind_responses"] < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
        kinds = ctl(d, "stats kinds")["kinds"]
    # the server's routes, the built-in kinds, good's 3 and many's 40, other
    assert len(kinds) >= 3 + 5 + 3 + 40 + 1, sorted(kinds)
    assert kinds["many_17"]["kind_responses"] == 1
    assert kinds["many_39"]["kind_responses"] == 1
    assert kinds["good_spin"]["kind_responses"] == 0
    assert "healthz" in kinds and "other" in kinds
    text = ctl(d, "metrics")["text"]
    assert '\nvoltd_server_request_duration_seconds_count{module="many",kind="many_39"} 1\n' in text
    assert '{module="good",kind="good_files"}' in text


def test_live_module_key(voltd, tmp_path):
    d = with_modules(voltd, tmp_path, "good", extra="max_n = 100\n")
    assert request(d.port, "GET", "/good/spin?n=100").status == 200
    assert request(d.port, "GET", "/good/spin?n=101").status == 400
    r = ctl(d, "set module.good.max_n 1000")
    assert r.get("ok", True), r
    assert request(d.port, "GET", "/good/spin?n=101").status == 200
