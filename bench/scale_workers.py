#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/scale_workers.py [--workers 2,4,8,16] [--workloads B,C,E] [--rounds N]
[--duration S] [--tree TREE] [--out DIR] [--no-wait]: voltd's routed workloads
at several worker counts, one table.

Runs the routed workloads of scripts/bench (the same definitions: its
measure() does each run) against one voltd per worker count (TREE/build/voltd,
default this tree; scheduler.workers = W, the stages' tasks auto: 4 executors
and 2 writers per worker), in ROUNDS interleaved rounds (every worker count
once per round, the order rotated):

  B  the 1 %-heavy spin mix, closed loop, 64 connections (bench/mixload);
     rows B, B-light, B-heavy
  C  light n=1000 latency (wrk c64) while a wrk c4 keeps n=2000000 in flight
  E  the open-loop mix: light n=1000 at --light-rate, heavy n=2000000 at
     --heavy-rate, over --e-conns connections; rows E-light, E-heavy

and prints a table of medians over the rounds per workload and worker
count: rps, p50 and p99 latency, server CPU per request, and from voltd's
own counters over the run, per request: the jobs and replies that crossed
workers (the channels' stolen + spilled + cross_wakes: channel lines written
off their own worker) and, in a --enable-line-audit build, the writes to
shared cache lines (the line_writes family), whose sum does not depend on
how many cores run them.

On a machine with fewer cores than workers (the 2-core project VM: the
workers share 2 cores) the table shows what more workers cost, not a
speed-up; on a machine with at least 16 cores for voltd (pin the client
elsewhere, e.g. taskset) it draws the scaling curve. Loopback only; every
run is bounded by its duration; every voltd started here is stopped at the
end. Results go to bench/results/scale-<time>/ (runs.tsv, table.md, logs).
"""
import argparse
import importlib.machinery
import importlib.util
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

import bench_voltd

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_bench():
    """scripts/bench as a module (its measure(), servers and parsers)."""
    path = os.path.join(TOP, "scripts", "bench")
    loader = importlib.machinery.SourceFileLoader("voltd_bench", path)
    spec = importlib.util.spec_from_loader("voltd_bench", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod




def counters(sock):
    """(requests, crossings, shared-line writes or None) so far."""
    srv = bench_voltd.ctl(sock, "stats server")["server"]
    ch = bench_voltd.ctl(sock, "stats channels")["channels"]
    crossed = sum(ch[c].get(k, 0) for c in ("jobs", "replies") for k in ("stolen", "spilled", "cross_wakes"))
    lw = srv.get("line_writes")
    return srv["requests"], crossed, sum(lw.values()) if lw is not None else None


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def fmt(v, f="%.3f"):
    return "-" if v is None else f % v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", default="2,4,8,16")
    ap.add_argument("--workloads", default="B,C,E")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=8, help="seconds per measured run")
    ap.add_argument("--light-rate", type=float, default=20000, help="E: light requests per second")
    ap.add_argument("--heavy-rate", type=float, default=200, help="E: heavy requests per second")
    ap.add_argument("--e-conns", type=int, default=128)
    ap.add_argument("--tree", default=TOP, help="the source tree whose build/voltd runs (built)")
    ap.add_argument("--out")
    ap.add_argument("--no-wait", action="store_true",
                    help="do not wait for a quiet machine before each run (to check the script)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sb = load_bench()
    workers = [int(w) for w in args.workers.split(",")]
    wls = [w.strip().upper() for w in args.workloads.split(",") if w.strip()]
    for w in wls:
        if w not in ("B", "C", "E"):
            sys.exit("scale_workers: the routed workloads are B, C and E (not %s)" % w)
    tree = os.path.abspath(args.tree)
    for f in (os.path.join(tree, "build", "voltd"), os.path.join(TOP, "build", "bench", "mixload")):
        if not os.access(f, os.X_OK):
            sys.exit("scale_workers: %s is not built (make -C build voltd bench/mixload)" % f)
    # What scripts/bench's measure() reads from its arguments.
    args.rate = 4000
    args.f_heavy_rate = 0
    out = args.out or os.path.join(TOP, "bench", "results", "scale-" + time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out, exist_ok=True)
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (65536, 65536))
    except (ValueError, OSError):
        pass

    servers, rows = {}, []
    try:
        for w in workers:
            servers[w] = sb.start_voltd("voltd-w%d" % w, out, True, tree,
                                        extra=("-s", "scheduler.workers=%d" % w))
            got = bench_voltd.ctl(servers[w].control, "stats runtime")["runtime"]["workers"]
            if got != w:
                sys.exit("scale_workers: voltd-w%d runs %d workers" % (w, got))
            assert sb.get(servers[w].url + "/v1/spin?n=1000") == sb.SPIN_1000
            subprocess.run(["timeout", "30", "wrk", "-t1", "-c256", "-d2s", servers[w].url + "/healthz"],
                           capture_output=True)
        conns = {"B": 64, "C": 64, "E": args.e_conns}
        for rnd in range(args.rounds):
            order = workers[rnd % len(workers):] + workers[:rnd % len(workers)]
            for wl in wls:
                for w in order:
                    s = servers[w]
                    n0, x0, l0 = counters(s.control)
                    got = []
                    sb.measure(s, wl, conns[wl], rnd, args, out, got)
                    n1, x1, l1 = counters(s.control)
                    n = max(1, n1 - n0)
                    for r in got:
                        r["workers"] = w
                        r["crossings"] = (x1 - x0) / n
                        r["shared"] = (l1 - l0) / n if l0 is not None else None
                    rows += got
    finally:
        for s in servers.values():
            s.stop()

    keys = ["wl", "workers", "round", "rps", "p50", "p99", "p99_9", "us_req", "crossings", "shared", "errors"]
    with open(os.path.join(out, "runs.tsv"), "w") as f:
        f.write("\t".join(keys) + "\n")
        for r in rows:
            f.write("\t".join(str(r.get(k, "")) for k in keys) + "\n")
    lines = ["| wl | workers | rps | rps x w%d | p50 ms | p99 ms | CPU us/req | crossings/req | "
             "shared writes/req | errors | rounds |" % workers[0],
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    wl_rows = []
    for wl in wls:
        wl_rows += {"B": ["B", "B-light", "B-heavy"], "C": ["C"], "E": ["E-light", "E-heavy"]}[wl]
    for wl in wl_rows:
        base = None
        for w in workers:
            rs = [r for r in rows if r["wl"] == wl and r["workers"] == w]
            if not rs:
                continue
            rps = med([r["rps"] for r in rs])
            base = rps if base is None else base
            lines.append("| %s | %d | %.0f | %s | %.3f | %.3f | %.1f | %s | %s | %d | %d |" % (
                wl, w, rps, fmt(rps / base if base else None, "%.2f"), med([r["p50"] for r in rs]),
                med([r["p99"] for r in rs]), med([r["us_req"] for r in rs]),
                fmt(med([r["crossings"] for r in rs]), "%.2f"), fmt(med([r["shared"] for r in rs]), "%.2f"),
                sum(r["errors"] for r in rs), len(rs)))
    nproc = os.cpu_count()
    text = ("# scale_workers: %s, workers %s, %d round(s) of %d s, %d CPU(s) online\n\n"
            "B = 1 %%-heavy spin mix, closed loop, c64 (B-light / B-heavy its classes); C = light n=1000 c64 "
            "while a c4 wrk keeps n=2000000 in flight; E = open-loop mix, light %g/s and heavy %g/s over %d "
            "connections. rps x w%d = rps / the %d-worker row's; crossings/req = jobs and replies that "
            "crossed workers (stolen + spilled + cross_wakes) per request; shared writes/req = the line "
            "audit's sum per request (--enable-line-audit builds); medians over rounds.%s\n\n%s\n" % (
                os.path.join(tree, "build", "voltd"), args.workers, args.rounds, args.duration, nproc,
                args.light_rate, args.heavy_rate, args.e_conns, workers[0], workers[0],
                " With more workers than CPUs the rows show overheads, not speed-up." if nproc and
                max(workers) > nproc else "", "\n".join(lines)))
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(text)
    print(text)
    print("results: %s" % out)


if __name__ == "__main__":
    main()
