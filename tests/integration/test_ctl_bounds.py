# SPDX-License-Identifier: MIT
"""The control socket as a protocol under abuse: pipelined commands (several
in one write, thousands in a stream, a half-closed stream as `socat` sends)
each answered once and in order; control bytes in a line (NUL) refused with
a JSON error instead of cutting the line."""
import json
import socket
import threading

from conftest import free_port
from ctlutil import Ctl


def replies(sock, n, timeout=60):
    """Read n reply lines from sock (or fewer if it closes)."""
    sock.settimeout(timeout)
    buf, out = b"", []
    while len(out) < n:
        data = sock.recv(1 << 20)
        if not data:
            break
        buf += data
        *lines, buf = buf.split(b"\n")
        out += [json.loads(x) for x in lines]
    return out


def test_commands_in_one_write_get_one_reply_each_in_order(daemon):
    d = daemon("-s", "scheduler.workers=1")
    with Ctl(d.control) as c:
        c.sock.sendall(b"ping\nversion\nhelp\r\nstats server\n")
        got = replies(c.sock, 4, timeout=10)
        assert [r["schema"] for r in got] == ["voltd.pong.v1", "voltd.version.v1", "voltd.help.v1",
                                              "voltd.stats.v1"], got
        assert all(r["ok"] for r in got), got
        assert c.cmd("ping")["ok"]  # the connection is still in step


def test_ten_thousand_pipelined_pings_all_answered(daemon):
    d = daemon("-s", "scheduler.workers=1")
    n = 10000
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(d.control))
    err = []

    def send():
        try:
            s.sendall(b"ping\n" * n)
        except OSError as e:
            err.append(e)
    t = threading.Thread(target=send)
    t.start()
    got = replies(s, n, timeout=60)
    t.join(60)
    s.close()
    assert not err, err
    assert len(got) == n, len(got)
    assert all(r["schema"] == "voltd.pong.v1" and r["ok"] for r in got)
    assert Ctl(d.control).cmd("stats control")["control"]["idle_closed"] == 0


def test_half_closed_stream_is_answered_before_close(daemon):
    """printf 'ping\\nversion\\n' | socat - UNIX-CONNECT:...: the writer
    shuts its side after the last line; every line is still answered, a
    last line without a newline too, then voltd closes."""
    d = daemon()
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(d.control))
    s.sendall(b"ping\nversion\nstats control")
    s.shutdown(socket.SHUT_WR)
    got = replies(s, 10, timeout=10)  # stops at EOF
    s.close()
    assert [r["schema"] for r in got] == ["voltd.pong.v1", "voltd.version.v1", "voltd.stats.v1"], got


def test_nul_and_control_bytes_are_an_error_not_a_truncation(daemon):
    d = daemon()
    with Ctl(d.control) as c:
        for line in [b"ping\0garbage", b"stats\0server", b"stats server\x01", b"\0"]:
            c.sock.sendall(line + b"\n")
            r = json.loads(c.line())
            assert r["ok"] is False and r["code"] == "invalid" and r["schema"] == "voltd.error.v1", (line, r)
            assert "control character" in r["error"], r
        # tab separates words; a trailing CR is part of the line ending
        c.sock.sendall(b"stats\tserver\r\n")
        r = json.loads(c.line())
        assert r["ok"] and set(r) == {"schema", "ok", "cleared", "server"}, r


def test_metrics_listen_answers_a_head_ended_by_bare_lf(daemon):
    mport = free_port()
    daemon("-s", "control.metrics_listen=127.0.0.1:%d" % mport)
    with socket.create_connection(("127.0.0.1", mport), timeout=10) as s:
        s.sendall(b"GET /metrics HTTP/1.0\nHost: x\n\n")
        data = b""
        while True:
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    assert data.startswith(b"HTTP/1.1 200 OK\r\n") and b"\nvoltd_build_info{" in data, data[:200]
