# SPDX-License-Identifier: MIT
"""The control socket as a protocol under abuse: pipelined commands (several
in one write, thousands in a stream, a half-closed stream as `socat` sends)
each answered once and in order; control bytes in a line (NUL) refused with
a JSON error instead of cutting the line; separate client limits for the
metrics port and the control socket, slots kept for admin peers, and a
deadline for a whole command line (D1)."""
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import BUILDDIR, free_port
from ctlutil import Ctl, shared  # noqa: F401 (fixture)

VOLTCTL = os.path.join(BUILDDIR, "voltctl")


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
        assert r["ok"] and set(r) == {"schema", "ok", "cleared", "time", "server"}, r


def test_metrics_listen_answers_a_head_ended_by_bare_lf(daemon):
    mport = free_port()
    d = daemon("-s", "control.metrics_listen=127.0.0.1:%d" % mport)
    with socket.create_connection(("127.0.0.1", mport), timeout=10) as s:
        s.sendall(b"GET /metrics HTTP/1.0\nHost: x\n\n")
        data = b""
        while True:
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    assert data.startswith(b"HTTP/1.1 200 OK\r\n") and b"\nvoltd_build_info{" in data, data[:200]
    # D16: the start-up log names the metrics listener, as it does the others
    assert "control: metrics on http://127.0.0.1:%d/metrics" % mport in d.log(), d.log()


def test_metrics_listen_counts_the_requests_it_refuses(daemon):
    """Another path gets 404, another method 405, and both are counted
    (stats control metrics_errors, voltd_control_metrics_errors_total): a
    scraper pointed at the wrong path shows."""
    mport = free_port()
    d = daemon("-s", "control.metrics_listen=127.0.0.1:%d" % mport)

    def ask(head):
        with socket.create_connection(("127.0.0.1", mport), timeout=10) as s:
            s.sendall(head)
            data = b""
            while True:
                chunk = s.recv(1 << 16)
                if not chunk:
                    return data
                data += chunk

    assert ask(b"GET /metric HTTP/1.1\r\nHost: x\r\n\r\n").startswith(b"HTTP/1.1 404 ")
    assert ask(b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n").startswith(b"HTTP/1.1 405 ")
    data = ask(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 200 ") and b"\nvoltd_control_metrics_errors_total 2\n" in data, data[-3000:]
    with Ctl(d.control) as c:
        st = c.cmd("stats control")["control"]
    assert st["metrics_requests"] == 3 and st["metrics_errors"] == 2, st


# Runs as uid 65534: opens N control connections, says so, holds them until
# its standard input closes.
HOLDER = r'''
import socket, sys
ss = []
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); ss.append(s)
print("held", flush=True)
sys.stdin.read()
'''


def test_metrics_port_clients_cannot_lock_root_out(daemon):
    """D1: the metrics port has its own client limit; filling it (idle
    clients sending a byte now and then) leaves the control socket free."""
    mport = free_port()
    d = daemon("-s", "control.metrics_listen=127.0.0.1:%d" % mport, "-s", "control.max_clients=4",
               "-s", "control.metrics_max_clients=8")
    held = []
    try:
        for _ in range(40):
            s = socket.create_connection(("127.0.0.1", mport), timeout=10)
            s.sendall(b"G")
            held.append(s)
        r = subprocess.run([VOLTCTL, "-s", str(d.control), "ping"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r
        st = Ctl(d.control).cmd("stats control")["control"]
        assert st["metrics_clients"] == 8 and st["metrics_refused_busy"] >= 32 and st["refused_busy"] == 0, st
    finally:
        for s in held:
            s.close()


def test_a_slot_is_kept_for_root_when_users_fill_the_socket(daemon, shared):
    """D1: uid 65534 fills control.max_clients; root (admin) still gets in,
    another user does not."""
    if not shutil.which("setpriv"):
        pytest.skip("setpriv not found: install the Debian package util-linux")
    sock = os.path.join(shared, "control.sock")
    d = daemon("-s", "control.socket=" + sock, "-s", "control.mode=0666", "-s", "control.max_clients=4")
    d.control = sock
    holder = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                               sys.executable, "-c", HOLDER, sock, "4"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        deadline = time.monotonic() + 10
        while Ctl(sock).cmd("stats control")["control"]["clients"] < 5:  # 4 held + this one
            assert time.monotonic() < deadline, "the holder's connections were not accepted"
            time.sleep(0.05)
        r = subprocess.run([VOLTCTL, "-s", sock, "ping"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", VOLTCTL, "-s", sock,
                            "ping"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 75 and "busy" in r.stderr, r
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)


def test_a_trickling_client_is_cut_at_the_line_deadline(daemon):
    """D1: a byte now and then does not keep a connection: the whole line
    must arrive within control.client_timeout_ms."""
    d = daemon("-s", "control.client_timeout_ms=1000")
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(d.control))
    s.settimeout(0.3)
    closed = False
    for _ in range(100):  # 30 s at most: far past the 1 s deadline
        try:
            s.send(b"p")
            if s.recv(100) == b"":
                closed = True
                break
        except socket.timeout:
            continue
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
    s.close()
    assert closed, "a client sending a byte every 0.3 s was kept past a 1 s line deadline"
    assert Ctl(d.control).cmd("stats control")["control"]["idle_closed"] == 1
