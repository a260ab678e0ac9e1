# SPDX-License-Identifier: MIT
"""voltd's runtime and I/O rungs: the backend it picks and says it picks,
a clean stop with the runtime running, the error when io_uring is
demanded but cannot be had, and io.fixed_files (registered files) used or
not as configured."""
import os
import re
import signal
import subprocess

import pytest

from conftest import BUILDDIR, VOLTD, free_port
from ctlutil import ctl
from httputil import Reader, connect, req_bytes

NO_URING = os.path.join(BUILDDIR, "tests", "helpers", "no_uring")


def uring_available():
    """io_uring can be set up here unless the kernel or a filter forbids it."""
    try:
        with open("/proc/sys/kernel/io_uring_disabled") as f:
            if f.read().strip() != "0":
                return False
    except OSError:
        pass
    return True


def test_libev_backend_when_configured(daemon, tmp_path):
    d = daemon("-c", "/dev/null", "-s", "io.backend=libev", "-s", "scheduler.workers=2")
    assert re.search(r"io: backend=libev \(.+\)", d.log()), d.log()
    assert "runtime: 2 workers, stealing on" in d.log()
    assert d.stop() == 0


@pytest.mark.skipif(not uring_available(), reason="io_uring disabled on this machine")
def test_uring_backend_when_configured(daemon):
    d = daemon("-c", "/dev/null", "-s", "io.backend=uring", "-s", "scheduler.workers=3",
               "-s", "scheduler.stealing=off")
    assert re.search(r"io: backend=uring \(.+\)", d.log()), d.log()
    assert "runtime: 3 workers, stealing off" in d.log()
    assert d.stop(signal.SIGINT) == 0


@pytest.mark.skipif(not uring_available(), reason="io_uring disabled on this machine")
def test_auto_prefers_uring(daemon):
    d = daemon("-c", "/dev/null")
    assert "io: backend=uring" in d.log()


def test_auto_falls_back_to_libev_under_seccomp(tmp_path):
    assert os.path.exists(NO_URING), "the build makes tests/helpers/no_uring"
    port = free_port()
    p = subprocess.Popen([NO_URING, VOLTD, "-f", "-c", "/dev/null", "-s", "server.listen=127.0.0.1:%d" % port,
                          "-s", "control.socket=%s" % (tmp_path / "control.sock")],
                         stderr=subprocess.PIPE, text=True)
    try:
        out = ""
        for line in p.stderr:
            out += line
            if " ready" in line or "voltd stopped" in line:
                break
        assert re.search(r"io: backend=libev \(.*(not permitted|EPERM).*\)", out, re.I), out
    finally:
        p.send_signal(signal.SIGTERM)
        rest = p.communicate(timeout=15)[1]
    assert p.returncode == 0, out + rest


def test_uring_demanded_but_forbidden_is_an_error(tmp_path):
    assert os.path.exists(NO_URING), "the build makes tests/helpers/no_uring"
    r = subprocess.run([NO_URING, VOLTD, "-f", "-c", "/dev/null", "-s", "io.backend=uring",
                        "-s", "control.socket=%s" % (tmp_path / "control.sock")],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 69, r.stderr
    assert "io: cannot start the uring backend" in r.stderr


@pytest.mark.skipif(not uring_available(), reason="io_uring disabled on this machine")
@pytest.mark.parametrize("fixed", ["on", "off"])
def test_fixed_files_as_configured(daemon, fixed):
    """io.fixed_files=on: the backend's reason says "fixed files", each
    connection's descriptor is installed once in a worker's registered-file
    table and its receives and sends there use it (stats io: fixed_ops);
    off: the reason says off and nothing uses a table. Either way every
    keep-alive request is answered and the connection the server closes is
    seen closed by its client (its table slot is cleared before the
    close: a slot left set would hold the socket open)."""
    d = daemon("-c", "/dev/null", "-s", "io.backend=uring", "-s", "scheduler.workers=2",
               "-s", "io.fixed_files=" + fixed)
    line = re.search(r"io: backend=uring \((.+)\)", d.log()).group(1)
    if fixed == "on" and "no fixed files (kernel lacks" in line:
        pytest.skip("this kernel has no sparse registered-file tables: " + line)
    assert line.endswith("; fixed files" if fixed == "on" else "; fixed files off"), line
    conns = 4
    for _ in range(conns):
        s = connect(d.port)
        rd = Reader(s)
        for i in range(5):
            s.sendall(req_bytes("GET", "/healthz", close=(i == 4)))
            assert rd.response().status == 200
        assert rd.at_eof(), "the server closed the connection: the client sees EOF"
        s.close()
    workers = ctl(d, "stats io")["io"]["workers"]
    installs = sum(w["fixed_installs"] for w in workers)
    ops = sum(w["fixed_ops"] for w in workers)
    assert sum(w["fixed_update_errors"] for w in workers) == 0, workers
    if fixed == "on":
        assert installs == conns, workers
        # At least each connection's first receive (submitted where it was
        # installed); its sends too unless its task ran elsewhere.
        assert ops >= conns, workers
    else:
        assert installs == 0 and ops == 0, workers
