# SPDX-License-Identifier: MIT
"""A stand-in for systemd's notification socket: an AF_UNIX datagram socket
passed to voltd as NOTIFY_SOCKET, recording every message with the time it
arrived (a real socket, read by a thread)."""
import socket
import threading
import time


class NotifyListener:
    def __init__(self, path):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.2)
        self.msgs = []  # (monotonic time, {key: value}, raw text)
        self.lock = threading.Lock()
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while self.running:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            text = data.decode()
            kv = dict(line.split("=", 1) for line in text.split("\n") if "=" in line)
            with self.lock:
                self.msgs.append((time.monotonic(), kv, text))

    def close(self):
        self.running = False
        self.thread.join(2)
        self.sock.close()

    def snapshot(self):
        with self.lock:
            return list(self.msgs)

    def keys(self):
        """The sequence of notable keys, in order (STATUS and WATCHDOG left out)."""
        out = []
        for _, kv, _ in self.snapshot():
            for k in ("READY", "RELOADING", "STOPPING"):
                if k in kv:
                    out.append("%s=%s" % (k, kv[k]))
        return out

    def count(self, key, value=None, since=0.0):
        return sum(1 for t, kv, _ in self.snapshot()
                   if t >= since and key in kv and (value is None or kv[key] == value))

    def times(self, key, value=None):
        return [t for t, kv, _ in self.snapshot() if key in kv and (value is None or kv[key] == value)]

    def wait(self, key, value=None, n=1, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.count(key, value) >= n:
                return
            time.sleep(0.02)
        raise AssertionError("no %d x %s=%s within %ss; got %r" % (n, key, value, timeout,
                                                                   [m[2] for m in self.snapshot()]))
