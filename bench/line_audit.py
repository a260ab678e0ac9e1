#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/line_audit.py [--build] [--seconds S] [--conns C,...] [--port P] [VOLTD]:
writes to cache lines shared between workers, per request, under workloads A
and B (src/base/lineaudit.h).

VOLTD (default build-audit/voltd) must be built with --enable-line-audit
(`voltctl version` lists the feature `line-audit`); --build configures and
makes build-audit/ first (nice -n 5, -j2). Starts that voltd (2 workers,
127.0.0.1:PORT, default 18991, a throw-away control socket) and, for each
connection count (default 64,256), runs S-second (default 5) wrk -t1 runs of
  A  GET /healthz, keep-alive;
  B  the 1 %-heavy spin mix of scripts/bench (bench/wrk/mixed.lua:
     GET /v1/spin?n=1000, every 100th n=2000000),
reading `voltctl stats server` and `stats channels` before and after each
run. It prints, per run, the shared-line writes per request by site (the
`line_writes` family's delta / the `requests` delta), their sum, and the
jobs and replies that crossed workers per request (the channels' stolen +
spilled + cross_wakes: a channel's lines count as shared only when written
off their own worker, so these are where the chan sites come from). The
sum is a count
that does not depend on how many cores run the requests: on 2 cores it
shows what the next shared write would cost on 64 (each such write is a
cache-line transfer with probability about 1 - 1/N on N busy cores).
Loopback only; every run is
bounded by wrk's -d. Run it on a quiet machine (it is a benchmark), though
the counts move little with load (the idle word's writes fall as the
workers stop parking).
"""
import argparse
import json
import os
import socket
import subprocess
import sys

import bench_voltd

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ap = argparse.ArgumentParser(description=__doc__.split("\n")[1],
                             formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("voltd", nargs="?", default=os.path.join(TOP, "build-audit", "voltd"))
ap.add_argument("--build", action="store_true", help="configure and make build-audit/ first")
ap.add_argument("--seconds", type=int, default=5)
ap.add_argument("--conns", default="64,256")
ap.add_argument("--port", type=int, default=18991)
args = ap.parse_args()

if args.build:
    b = os.path.join(TOP, "build-audit")
    os.makedirs(b, exist_ok=True)
    if not os.path.exists(os.path.join(b, "Makefile")):
        subprocess.run([os.path.join(TOP, "configure"), "-q", "--enable-line-audit"], cwd=b, check=True)
    subprocess.run(["nice", "-n", "5", "make", "-s", "-j2", "voltd"], cwd=b, check=True)

def ctl(cmd):
    return bench_voltd.ctl(sock, cmd)


def snapshot():
    r = ctl("stats server")["server"]
    ch = ctl("stats channels")["channels"]
    crossed = sum(ch[c].get(k, 0) for c in ("jobs", "replies") for k in ("stolen", "spilled", "cross_wakes"))
    return r.get("line_writes", {}), r["requests"], crossed


v, sock = bench_voltd.start(args.voltd, args.port, "line_audit")
try:
    if "line-audit" not in ctl("version")["features"].split():
        sys.exit("line_audit: %s is not built with --enable-line-audit (try --build)" % args.voltd)
    base = "http://127.0.0.1:%d" % args.port
    runs = [("A", base + "/healthz", []),
            ("B", base + "/v1/spin", ["-s", os.path.join(TOP, "bench", "wrk", "mixed.lua")])]
    print("# line_audit: %s, 2 workers, wrk -t1 -d%ds; shared-line writes per request, by site" % (
        args.voltd, args.seconds))
    print("| wl | conns | requests | total | by site | crossings |")
    print("|---|---|---|---|---|---|")
    for wl, url, extra in runs:
        for c in [int(x) for x in args.conns.split(",")]:
            w0, n0, x0 = snapshot()
            subprocess.run(["wrk", "-t1", "-c%d" % c, "-d%ds" % args.seconds, "--timeout", "10s"] + extra + [url],
                           capture_output=True, text=True, timeout=args.seconds + 120,
                           env=dict(os.environ, WORK_PATH="/v1/spin"))
            w1, n1, x1 = snapshot()
            n = n1 - n0
            if n <= 0:
                sys.exit("line_audit: no request counted in %s c%d" % (wl, c))
            per = {k: (w1[k] - w0.get(k, 0)) / n for k in w1}
            print("| %s | %d | %d | %.2f | %s | %.2f |" % (
                wl, c, n, sum(per.values()),
                " ".join("%s=%.2f" % (k, x) for k, x in sorted(per.items()) if x), (x1 - x0) / n))
finally:
    v.terminate()
    v.wait()
