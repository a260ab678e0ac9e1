# SPDX-License-Identifier: MIT
"""Shared fixtures of the integration tests: a real voltd built in
$VOLTD_BUILDDIR, run in a temporary directory, on loopback ports."""
import os
import signal
import socket
import subprocess
import time

import pytest

BUILDDIR = os.environ.get("VOLTD_BUILDDIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
SRCDIR = os.environ.get("VOLTD_SRCDIR", os.path.join(os.path.dirname(__file__), "..", ".."))
VOLTD = os.path.join(BUILDDIR, "voltd")
# The same daemon with test-only job kinds (GET /v1/stall); never installed.
VOLTD_TEST = os.path.join(BUILDDIR, "voltd-test")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_voltd(*args, timeout=20, **kw):
    """Run voltd to completion; returns the CompletedProcess (text mode)."""
    return subprocess.run([VOLTD, *args], capture_output=True, text=True, timeout=timeout, **kw)


class Daemon:
    """A voltd -f process; its stderr is collected in a file."""

    def __init__(self, tmp_path, args, env=None, binary=None, preexec=None):
        self.binary = binary or VOLTD
        self.tmp = tmp_path
        self.port = free_port()
        self.log_path = tmp_path / "voltd.log"
        self.control = tmp_path / "control.sock"
        self.args = ["-f", "-s", "server.listen=127.0.0.1:%d" % self.port,
                     "-s", "control.socket=%s" % self.control, *args]
        self.env = dict(os.environ, **(env or {}))
        self.preexec = preexec  # run in the child before exec (e.g. setrlimit)
        self.proc = None

    def start(self, wait_for="ready", timeout=15):
        self.logf = open(self.log_path, "w")
        self.proc = subprocess.Popen([self.binary, *self.args], stdout=self.logf, stderr=subprocess.STDOUT,
                                     cwd=self.tmp, env=self.env, preexec_fn=self.preexec)
        if wait_for:
            self.wait_log(wait_for, timeout)
        return self

    def log(self):
        return self.log_path.read_text()

    def wait_log(self, text, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log():
                return
            if self.proc.poll() is not None:
                raise AssertionError("voltd exited (%d) before logging %r:\n%s" % (self.proc.returncode, text, self.log()))
            time.sleep(0.02)
        raise AssertionError("voltd did not log %r within %ss:\n%s" % (text, timeout, self.log()))

    def stop(self, sig=signal.SIGTERM, timeout=15):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("voltd did not stop within %ss after %s:\n%s" % (timeout, sig, self.log()))
        self.logf.close()
        return rc


@pytest.fixture
def daemon(tmp_path):
    """Factory: daemon(*args) starts voltd -f; every one still running at
    the end of the test is stopped, and must exit 0."""
    started = []

    def make(*args, env=None, wait_for="ready", binary=None, preexec=None):
        d = Daemon(tmp_path, list(args), env, binary, preexec).start(wait_for)
        started.append(d)
        return d

    yield make
    for d in started:
        if d.proc.poll() is None:
            rc = d.stop()
            assert rc == 0, "voltd exited %d:\n%s" % (rc, d.log())
