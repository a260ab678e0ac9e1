# SPDX-License-Identifier: MIT
"""Socket activation and restarts that refuse nobody, on both I/O backends.

- Through Debian's real systemd-socket-activate: an HTTP socket named
  `http` and a UNIX socket named `control` are passed to voltd, which serves
  HTTP on the first (every worker accepting from the one socket) and the
  control protocol on the second.
- Restart under load: a stand-in for systemd's socket units (this test)
  holds the listening socket and passes it to each new voltd
  (LISTEN_FDS/LISTEN_PID/LISTEN_FDNAMES); clients keep connecting while
  voltd is stopped with SIGTERM and started again, three times. No
  connection is refused, every request gets its response, and each voltd's
  own accounting holds."""
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import VOLTD, free_port
from httputil import backend, bound, check_accounting, parse_stats  # noqa: F401

ACTIVATE = shutil.which("systemd-socket-activate")


def http_get(port, path="/healthz", timeout=10):
    """One request on a new connection: (status, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(("GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n" % path).encode())
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    head, _, body = data.partition(b"\r\n\r\n")
    if not head:
        raise ConnectionError("connection closed without a response")
    return int(head.split(b" ", 2)[1]), body


def test_systemd_socket_activate(tmp_path, backend):  # noqa: F811
    if not ACTIVATE:
        pytest.skip("systemd-socket-activate not found: install the Debian package systemd")
    port = free_port()
    ctl_path = str(tmp_path / "ctl.sock")
    log = open(tmp_path / "voltd.log", "w")
    p = subprocess.Popen([ACTIVATE, "-l", "127.0.0.1:%d" % port, "-l", ctl_path, "--fdname=http:control",
                          VOLTD, "-f", "-c", "/dev/null", "-s", "scheduler.workers=2",
                          "-s", "io.backend=%s" % backend, "-s", "server.listen=127.0.0.1:1",
                          "-s", "control.socket=%s" % (tmp_path / "unused.sock")],
                         stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(ctl_path) and time.monotonic() < deadline:
            time.sleep(0.02)
        # the first connection starts voltd (systemd-socket-activate waits for one)
        results = [http_get(port) for _ in range(20)]
        assert all(r == (200, b"ok\n") for r in results), results
        text = (tmp_path / "voltd.log").read_text()
        assert "socket activation: 1 HTTP listener(s) and the control socket inherited" in text, text
        # the log and `config` name the sockets really used, not the
        # configured ones that activation replaced (D11)
        assert "server: listening on 127.0.0.1:%d (inherited)" % port in text, text
        assert "control: listening on %s (inherited)" % ctl_path in text, text
        own = text.split(" starting (config", 1)[1]  # voltd's lines, not the activator's
        assert "unused.sock" not in own and "127.0.0.1:1 " not in own, text
        assert not os.path.exists(tmp_path / "unused.sock")   # the inherited one is used
        with socket.socket(socket.AF_UNIX) as c:
            c.settimeout(10)
            c.connect(ctl_path)
            c.sendall(b"ping\nconfig server.listen control.socket\n")
            buf = b""
            while buf.count(b"\n") < 2:
                buf += c.recv(65536)
            pong, config = [json.loads(x) for x in buf.splitlines()]
            assert pong["ok"] is True, buf
            keys = {k["key"]: k for k in config["keys"]}
            assert keys["server.listen"]["value"] == "127.0.0.1:%d" % port, keys
            assert keys["control.socket"]["value"] == ctl_path, keys
            assert keys["server.listen"]["source"] == keys["control.socket"]["source"] == "socket activation", keys
    finally:
        p.send_signal(signal.SIGTERM)   # exec'd: this is voltd itself
        rc = p.wait(20)
        log.close()
    text = (tmp_path / "voltd.log").read_text()
    assert rc == 0, text
    st = parse_stats(text)
    check_accounting(st)
    assert st["responses_2xx"] > 0, st
    bound("test_activation", "responses_2xx", st["responses_2xx"], ">=", 20)


def test_unknown_socket_name_is_an_error(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    fd = s.fileno()

    def child_fds():  # fd 3 in the child only: the test process's fd 3 is pytest's
        os.dup2(fd, 3)
        os.set_inheritable(3, True)

    try:
        env = dict(os.environ, LISTEN_FDS="1", LISTEN_FDNAMES="metrics")
        r = subprocess.run(["sh", "-c", 'LISTEN_PID=$$ exec "$@"', "sh", VOLTD, "-f", "-c", "/dev/null",
                            "-s", "control.socket=%s" % (tmp_path / "c.sock")],
                           preexec_fn=child_fds, close_fds=False, env=env, capture_output=True,
                           text=True, timeout=20)
    finally:
        s.close()
    assert r.returncode == 78, r.stderr
    assert "named 'metrics'" in r.stderr, r.stderr


class Holder:
    """Holds the listening socket like a socket unit and runs one voltd
    after another on it."""

    def __init__(self, tmp_path, backend, extra=()):
        self.tmp = tmp_path
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4096)
        self.port = self.sock.getsockname()[1]
        self.backend = backend
        self.extra = list(extra)
        self.gen = 0
        self.logs = []
        self.proc = None

    def start(self):
        self.gen += 1
        path = self.tmp / ("voltd-%d.log" % self.gen)
        self.logs.append(path)
        logf = open(path, "w")
        env = dict(os.environ, LISTEN_FDS="1", LISTEN_FDNAMES="http")
        fd = self.sock.fileno()

        def child_fds():
            os.dup2(fd, 3)
            os.set_inheritable(3, True)

        self.proc = subprocess.Popen(
            ["sh", "-c", 'LISTEN_PID=$$ exec "$@"', "sh", VOLTD, "-f", "-c", "/dev/null",
             "-s", "scheduler.workers=2", "-s", "io.backend=%s" % self.backend,
             "-s", "control.socket=%s" % (self.tmp / ("c%d.sock" % self.gen)), *self.extra],
            stdout=logf, stderr=subprocess.STDOUT, env=env, preexec_fn=child_fds, close_fds=False)
        logf.close()
        deadline = time.monotonic() + 15
        while "ready" not in path.read_text():
            assert self.proc.poll() is None and time.monotonic() < deadline, path.read_text()
            time.sleep(0.01)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(30)
        text = self.logs[-1].read_text()
        assert rc == 0, text
        st = parse_stats(text)
        check_accounting(st)
        return st


def test_restart_under_load_refuses_nobody(tmp_path, backend):  # noqa: F811
    h = Holder(tmp_path, backend)
    counts = {"ok": 0, "refused": 0, "failed": 0}
    errors = []
    lock = threading.Lock()
    stop = threading.Event()

    def client():
        n = 0
        while not stop.is_set() and n < 20000:     # bounded in count and time
            n += 1
            try:
                st, body = http_get(h.port)
                key = "ok" if (st, body) == (200, b"ok\n") else "failed"
            except ConnectionRefusedError:
                key = "refused"
            except (OSError, ConnectionError, ValueError, IndexError) as e:
                key = "failed"
                errors.append(repr(e))
            with lock:
                counts[key] += 1

    h.start()
    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    served = []
    try:
        for _ in range(3):
            time.sleep(0.5)
            served.append(h.stop())
            h.start()          # like systemctl restart: stop, then start
        time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        served.append(h.stop())
        h.sock.close()
    answered = sum(s["responses_2xx"] for s in served)
    print("restart under load (%s): %d requests, %d refused, %d failed, 4 restarts, "
          "%d answered by the voltds" % (backend, counts["ok"] + counts["failed"] + counts["refused"],
                                        counts["refused"], counts["failed"], answered))
    assert counts["refused"] == 0 and counts["failed"] == 0, (counts, errors[:5])
    assert counts["ok"] > 0, counts
    bound("test_activation", "restart_under_load_ok_%s" % backend, counts["ok"], ">=", 100)
    assert answered == counts["ok"], (answered, counts)
    assert sum(s["requests_dropped"] for s in served) == 0, served
