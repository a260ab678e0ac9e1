#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/top_cost.py [VOLTD [ROUNDS]]: what `voltctl top -b` polling costs.

Starts one voltd (2 workers, 127.0.0.1:18990, a throw-away control socket)
and runs ROUNDS (default 4) pairs of 5 s `wrk -t1 -c64` runs against
GET /healthz, one with `voltctl top -b` polling every second and one
without, the order alternating pair by pair, and prints the server CPU per
request (all threads' /proc schedstat run time / requests) of each run, the
ratio of the medians, and the CPU of the threads outside the workers during
the polled runs. Issue 10's target: ratio <= 1.02. Loopback only; every run
is bounded by wrk's -d; the voltd started here is stopped at the end. Run it
on a quiet machine (it is a benchmark).
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
voltd = sys.argv[1] if len(sys.argv) > 1 else os.path.join(TOP, "build", "voltd")
voltctl = os.path.join(os.path.dirname(voltd), "voltctl")
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 4
d = tempfile.mkdtemp()
sock = d + "/c.sock"
v = subprocess.Popen([voltd, "-f", "-s", "scheduler.workers=2", "-s", "server.listen=127.0.0.1:18990",
                      "-s", "control.socket=" + sock, "-s", "log.level=warning"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def threads():
    out = {}
    for t in os.listdir("/proc/%d/task" % v.pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (v.pid, t)) as f:
                out[t] = int(f.read().split()[0])
        except OSError:
            pass
    return out


def run(top):
    tp = None
    if top:
        tp = subprocess.Popen([voltctl, "-s", sock, "top", "-b", "-n", "100", "-d", "1"], stdout=subprocess.DEVNULL)
        time.sleep(0.2)
    a = threads()
    w = subprocess.run(["wrk", "-t1", "-c64", "-d5s", "--timeout", "5s", "http://127.0.0.1:18990/healthz"],
                       capture_output=True, text=True, timeout=60).stdout
    b = threads()
    if tp:
        tp.kill()
        tp.wait()
    n = int(re.search(r"(\d+) requests in", w).group(1))
    per = sorted(b[t] - a.get(t, 0) for t in b)
    return n, sum(per) / n / 1000.0, per


try:
    for _ in range(50):
        if os.path.exists(sock):
            break
        time.sleep(0.1)
    res = {False: [], True: []}
    others = []
    for r in range(rounds):
        for top in ((False, True) if r % 2 == 0 else (True, False)):
            n, us, per = run(top)
            res[top].append(us)
            print("pair %d %-9s %8d requests  %.2f us CPU/req" % (r + 1, "top" if top else "no top", n, us))
            if top:
                others.append(sum(per[:-2]) / 5e6)  # all but the two busiest (the workers), ms/s
    plain, polled = statistics.median(res[False]), statistics.median(res[True])
    print("median CPU/req: no top %.2f us, top %.2f us, ratio %.3f (target <= 1.02)" % (plain, polled, polled / plain))
    print("threads outside the workers while polled: %s ms/s" % ", ".join("%.2f" % x for x in others))
finally:
    v.terminate()
    v.wait()
