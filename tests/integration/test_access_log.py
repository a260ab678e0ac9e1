# SPDX-License-Identifier: MIT
"""The access log (log.access, issue 18 item 7): off by default; when on,
one line per response through the log sink, in request order, naming
method, path, status, bytes sent, duration and the worker that sent it;
parse errors (no method or path) are logged with '-'; `set log.access`
turns it on and off live."""
import re
import time

from ctlutil import ctl
from httputil import Reader, backend, connect, req_bytes, request, voltd  # noqa: F401 (fixtures)

LINE = re.compile(r"access: (\S+) (\S+) (\d{3}) (\d+) bytes ([0-9.]+) ms worker (\d+)$", re.M)


def access_lines(d, n, timeout=10):
    deadline = time.monotonic() + timeout
    while True:
        got = LINE.findall(d.log())
        if len(got) >= n or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def test_off_by_default(voltd):
    d = voltd()
    assert request(d.port, "GET", "/healthz").status == 200
    assert ctl(d, "config log.access")["keys"][0]["value"] == "off"
    time.sleep(0.2)
    assert "access:" not in d.log()


def test_one_line_per_response_in_order(voltd):
    d = voltd("-s", "log.access=on", "-s", "scheduler.workers=2")
    assert request(d.port, "GET", "/healthz").status == 200
    assert request(d.port, "POST", "/v1/echo?x=1", body=b"0123456789").status == 200
    assert request(d.port, "GET", "/nope").status == 404
    assert len(access_lines(d, 3)) == 3
    # pipelined on one connection: answered, and logged, in order
    s = connect(d.port)
    s.sendall(req_bytes("GET", "/healthz") + req_bytes("HEAD", "/readyz") + b"BOGUS\r\n\r\n")
    r = Reader(s)
    assert [r.response().status, r.response(head_only=True).status, r.response().status] == [200, 200, 400]
    s.close()
    got = access_lines(d, 6)
    short = [(m, p, st) for m, p, st, _, _, _ in got]
    # a line is written once its response went out: across connections in
    # any order, on one connection in request order
    assert sorted(short[:3]) == sorted([("GET", "/healthz", "200"), ("POST", "/v1/echo?x=1", "200"),
                                        ("GET", "/nope", "404")]), got
    assert short[3:] == [("GET", "/healthz", "200"), ("HEAD", "/readyz", "200"), ("-", "-", "400")], got
    for m, p, st, nbytes, ms, worker in got:
        assert int(nbytes) > 0 and float(ms) >= 0 and int(worker) in (0, 1), (m, p, nbytes, ms, worker)
    echo = [x for x in got if x[0] == "POST"][0]
    assert int(echo[3]) > 10  # head + the 10 echoed bytes


def test_set_turns_it_on_and_off_live(voltd):
    d = voltd()
    assert ctl(d, "set log.access on")["ok"]
    assert request(d.port, "GET", "/healthz").status == 200
    assert len(access_lines(d, 1)) == 1
    assert ctl(d, "set log.access off")["ok"]
    assert request(d.port, "GET", "/healthz").status == 200
    time.sleep(0.3)
    assert len(LINE.findall(d.log())) == 1
