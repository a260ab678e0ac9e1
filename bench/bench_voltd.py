# SPDX-License-Identifier: MIT
"""bench/bench_voltd.py: what bench/top_cost.py, bench/line_audit.py and
bench/scale_workers.py share: start one voltd (2 workers, 127.0.0.1:PORT, a
control socket in a fresh temporary directory, warnings only) and wait for
its control socket; one control command's JSON reply."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time


def start(voltd, port, who):
    """(process, control socket path); exits naming `who` if it never comes up."""
    sock = tempfile.mkdtemp() + "/c.sock"
    v = subprocess.Popen([voltd, "-f", "-s", "scheduler.workers=2", "-s", "server.listen=127.0.0.1:%d" % port,
                          "-s", "control.socket=" + sock, "-s", "log.level=warning"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(50):
        if os.path.exists(sock):
            return v, sock
        time.sleep(0.1)
    v.terminate()
    v.wait()
    sys.exit("%s: voltd did not start (no control socket %s)" % (who, sock))


def ctl(sock, cmd):
    """The JSON reply to one control command on socket `sock`."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sock)
    s.sendall(cmd.encode() + b"\n")
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        buf += chunk
    s.close()
    return json.loads(buf)
