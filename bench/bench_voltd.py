# SPDX-License-Identifier: MIT
"""bench/bench_voltd.py: what bench/top_cost.py and bench/line_audit.py share:
start one voltd (2 workers, 127.0.0.1:PORT, a control socket in a fresh
temporary directory, warnings only) and wait for its control socket."""
import os
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
