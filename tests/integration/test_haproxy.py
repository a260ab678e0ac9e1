# SPDX-License-Identifier: MIT
"""Rolling restart behind Debian's real haproxy, on loopback: three voltd
instances, contrib/haproxy/voltd.cfg with haproxy's retries OFF (its
"backstop" lines removed, `retries 0`), a bounded keep-alive client load
through haproxy, each instance stopped (SIGTERM) and started again in turn.

With server.shutdown_delay_ms above the health checks' detection time the
client sees no non-2xx response and no connection error: voltd's own drain
is enough. The same run with shutdown_delay_ms = 0 must show failures,
which proves the test can fail. Both runs' figures are printed."""
import http.client
import os
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest

from conftest import SRCDIR, VOLTD, free_port
from httputil import bound, check_accounting, parse_stats

HAPROXY = shutil.which("haproxy") or ("/usr/sbin/haproxy" if os.path.exists("/usr/sbin/haproxy") else None)
CLIENTS = 4
MAX_REQUESTS = 300000  # per run, all clients together (a bound; the run ends first)


def haproxy_cfg(front, ports, stats_sock):
    text = open(os.path.join(SRCDIR, "contrib", "haproxy", "voltd.cfg")).read()
    lines = [l for l in text.splitlines() if "# backstop" not in l]
    text = "\n".join(lines) + "\n"
    text = text.replace("defaults\n", "defaults\n    retries 0\n", 1)
    text = text.replace("bind 127.0.0.1:8080", "bind 127.0.0.1:%d" % front)
    text = text.replace("global\n", "global\n    stats socket %s level admin\n" % stats_sock, 1)
    for i, p in enumerate(ports, 1):
        text = text.replace("127.0.0.1:808%d" % i, "127.0.0.1:%d" % p)
    assert "retry-on" not in text and "redispatch" not in text
    return text


class Instance:
    def __init__(self, tmp, i, port, delay_ms):
        self.tmp, self.i, self.port, self.delay_ms = tmp, i, port, delay_ms
        self.gen = 0
        self.proc = None
        self.stats = []

    def start(self):
        self.gen += 1
        self.log = self.tmp / ("voltd%d-%d.log" % (self.i, self.gen))
        f = open(self.log, "w")
        self.proc = subprocess.Popen([VOLTD, "-f", "-c", "/dev/null", "-s", "scheduler.workers=1",
                                      "-s", "server.listen=127.0.0.1:%d" % self.port,
                                      "-s", "server.shutdown_delay_ms=%d" % self.delay_ms,
                                      "-s", "control.socket=%s" % (self.tmp / ("c%d.sock" % self.i))],
                                     stdout=f, stderr=subprocess.STDOUT)
        f.close()
        deadline = time.monotonic() + 15
        while " ready" not in self.log.read_text():
            assert self.proc.poll() is None and time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.01)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(30)
        text = self.log.read_text()
        assert rc == 0, text
        st = parse_stats(text)
        check_accounting(st)
        self.stats.append(st)


def server_states(stats_sock):
    """haproxy's view of the backend, through its stats socket."""
    import socket as s_
    with s_.socket(s_.AF_UNIX) as c:
        c.settimeout(5)
        c.connect(stats_sock)
        c.sendall(b"show servers state voltd\n")
        data = b""
        while True:
            b = c.recv(65536)
            if not b:
                break
            data += b
    states = {}
    for line in data.decode().splitlines():
        f = line.split()
        if len(f) > 6 and f[1] == "voltd" and f[3].startswith("voltd"):
            states[f[3]] = int(f[5])  # srv_op_state: 2 = running
    return states


def rolling_restart(tmp, delay_ms):
    ports = [free_port() for _ in range(3)]
    front = free_port()
    stats_sock = str(tmp / "haproxy.sock")
    cfg = tmp / "haproxy.cfg"
    cfg.write_text(haproxy_cfg(front, ports, stats_sock))
    inst = [Instance(tmp, i + 1, p, delay_ms) for i, p in enumerate(ports)]
    for x in inst:
        x.start()
    hlog = open(tmp / "haproxy.log", "w")
    hp = subprocess.Popen([HAPROXY, "-db", "-f", str(cfg)], stdout=hlog, stderr=subprocess.STDOUT)
    counts = {"ok": 0, "non2xx": 0, "errors": 0}
    samples = []
    lock = threading.Lock()
    stop = threading.Event()

    def wait_all_up(timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                st = server_states(stats_sock)
                if len(st) == 3 and all(v == 2 for v in st.values()):
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError("haproxy did not see all three up: %r" % (server_states(stats_sock),))

    def client():
        conn = None
        while not stop.is_set():
            with lock:
                if sum(counts.values()) >= MAX_REQUESTS:
                    return
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", front, timeout=10)
                conn.request("GET", "/healthz")
                r = conn.getresponse()
                r.read()
                key = "ok" if 200 <= r.status < 300 else "non2xx"
                if key != "ok":
                    samples.append(r.status)
                if r.getheader("connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as e:
                key = "errors"
                samples.append(repr(e))
                if conn:
                    conn.close()
                conn = None
            with lock:
                counts[key] += 1

    try:
        wait_all_up()
        threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        for x in inst:
            x.stop()
            x.start()
            wait_all_up()          # haproxy sees the new instance before the next goes
            time.sleep(0.3)
        stop.set()
        for t in threads:
            t.join(30)
    finally:
        stop.set()
        hp.send_signal(signal.SIGTERM)
        hp.wait(15)
        hlog.close()
        for x in inst:
            if x.proc.poll() is None:
                x.stop()
    total = sum(counts.values())
    return total, counts, samples[:10]


@pytest.fixture
def need_haproxy():
    if not HAPROXY:
        pytest.skip("haproxy not found: install the Debian package haproxy")


def test_rolling_restart_behind_haproxy_loses_nothing(tmp_path, need_haproxy):
    total, counts, samples = rolling_restart(tmp_path, 1500)
    print("rolling restart, shutdown_delay_ms=1500, haproxy retries off: %d requests, "
          "%d non-2xx, %d connection errors" % (total, counts["non2xx"], counts["errors"]))
    with open(tmp_path / "figures.txt", "w") as f:
        f.write("%d %d %d\n" % (total, counts["non2xx"], counts["errors"]))
    assert counts["non2xx"] == 0 and counts["errors"] == 0, (counts, samples)
    assert counts["ok"] > 0, counts
    bound("test_haproxy", "rolling_restart_ok", counts["ok"], ">=", 200)


def test_rolling_restart_without_delay_fails(tmp_path, need_haproxy):
    """The control run: no shutdown delay, no retries: haproxy still sends
    to an instance that has closed its listener."""
    total, counts, samples = rolling_restart(tmp_path, 0)
    print("rolling restart, shutdown_delay_ms=0, haproxy retries off: %d requests, "
          "%d non-2xx, %d connection errors (samples %r)" % (total, counts["non2xx"], counts["errors"], samples))
    assert counts["non2xx"] + counts["errors"] > 0, counts
