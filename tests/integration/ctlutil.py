# SPDX-License-Identifier: MIT
"""Helpers of the control-socket tests: a line client for the control socket
(one command per line, one JSON reply per line), the reply schemas from the
`schema` command, and running a client as another user (setpriv)."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest


class Ctl:
    """A connection to voltd's control socket."""

    def __init__(self, path, timeout=10):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.buf = b""

    def line(self):
        while b"\n" not in self.buf:
            data = self.sock.recv(1 << 20)
            if not data:
                raise EOFError("control connection closed; unread %r" % self.buf[:200])
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def cmd(self, text):
        self.sock.sendall(text.encode() + b"\n")
        return json.loads(self.line())

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def ctl(d, text):
    """One command on a fresh connection to daemon d."""
    with Ctl(d.control) as c:
        return c.cmd(text)


def shared_dir():
    """A temporary directory other users can enter (pytest's tmp_path is
    0700): for a control socket that a test reaches as uid 65534."""
    d = tempfile.mkdtemp(prefix="voltd-ctl-")
    os.chmod(d, 0o755)
    return d


@pytest.fixture
def shared():
    """A shared_dir() for the test, removed afterwards."""
    d = shared_dir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


# Runs as another user: reads commands from argv, prints one JSON reply per line.
CLIENT = r'''
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])
f = s.makefile("rwb")
for c in sys.argv[2:]:
    f.write(c.encode() + b"\n"); f.flush()
    sys.stdout.write(f.readline().decode())
'''


def ctl_as(uid, gid, path, *cmds):
    """Run commands on the control socket as uid/gid (no supplementary
    groups) with setpriv; returns the replies."""
    if not shutil.which("setpriv"):
        pytest.skip("setpriv not found: install the Debian package util-linux")
    r = subprocess.run(["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid, "--clear-groups",
                        sys.executable, "-c", CLIENT, str(path), *cmds],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def validator(d):
    """A function checking a reply against the schema its `schema` names."""
    try:
        import jsonschema
    except ImportError:
        pytest.skip("jsonschema not found: install the Debian package python3-jsonschema")
    schemas = ctl(d, "schema")["schemas"]

    def check(reply):
        name = reply.get("schema")
        assert name in schemas, "reply schema %r has no JSON Schema: %r" % (name, reply)
        jsonschema.validate(reply, schemas[name])
        return reply
    check.schemas = schemas
    return check
