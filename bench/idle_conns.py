#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/idle_conns.py: memory per idle keep-alive connection, voltd against nginx.

    bench/idle_conns.py [-b BUILD] [--conns N] [--backends uring,libev] [--no-nginx]

For each server in turn (voltd on each I/O backend, then nginx configured like
the HTTP peers: 2 workers), opens N keep-alive connections (default 100,000)
that each send one `GET` and read its answer, then stay idle. The client binds
them to several loopback source addresses (127.0.0.2, 127.0.0.3, ...: about
28,000 ephemeral ports each), so no system setting has to change. At every
quarter of N it reads the server's resident memory (VmRSS of every process of
it, summed) and prints, per server:

    growth from empty = (RSS(N) - RSS(0)) / N
    slope at the margin = (RSS(N) - RSS(N/2)) / (N/2)

in bytes per connection. Resident memory does not depend on the machine's
load, so this runs anywhere; it needs root (or a hard RLIMIT_NOFILE above N)
for the descriptors of both ends.
"""
import argparse
import os
import resource
import selectors
import socket
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
PORTS_PER_SOURCE = 25000  # below the default ephemeral range (32768-60999)
REQ = b"GET / HTTP/1.1\r\nHost: idle\r\n\r\n"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def raise_nofile(need):
    """Raise RLIMIT_NOFILE to need; returns the limit obtained (a machine
    whose hard limit cannot be raised gives less: the caller scales down)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < need:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (need, need))
            return need
        except (ValueError, OSError):
            pass
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, need), hard), hard))
    return min(need, hard)


def rss_bytes(pids):
    total = 0
    for pid in pids:
        try:
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def settled_rss(pids_fn):
    """RSS once the server has settled after a burst of connections (its
    spare pools and the allocator's trimming run on a timer): the least of
    the samples over 4 s, taken every 0.25 s."""
    least = None
    for _ in range(16):
        time.sleep(0.25)
        r = rss_bytes(pids_fn())
        least = r if least is None else min(least, r)
    return least


def children(pid):
    out = []
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            out = [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def wait_listening(port, proc, what):
    for _ in range(400):
        if proc.poll() is not None:
            sys.exit("idle_conns: %s exited with %d" % (what, proc.returncode))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit("idle_conns: %s does not listen on %d" % (what, port))


def open_idle(port, n, start_index, socks):
    """Open n more connections (each: connect, one request, its whole
    answer), appended to socks; in batches, non-blocking."""
    sel = selectors.DefaultSelector()
    batch = 2000
    done = 0
    while done < n:
        k = min(batch, n - done)
        pending = {}
        for i in range(k):
            idx = start_index + done + i
            src = "127.0.0.%d" % (2 + idx // PORTS_PER_SOURCE)
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_IP, 24, 1)  # IP_BIND_ADDRESS_NO_PORT: the port at connect
            s.bind((src, 0))
            s.setblocking(False)
            try:
                s.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
            pending[s.fileno()] = [s, b"", False]
            sel.register(s, selectors.EVENT_WRITE)
        deadline = time.monotonic() + 60
        while pending:
            if time.monotonic() > deadline:
                sys.exit("idle_conns: %d connections not answered within 60 s" % len(pending))
            for key, ev in sel.select(timeout=1):
                st = pending[key.fd]
                s = st[0]
                if not st[2]:
                    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        sys.exit("idle_conns: connect: %s" % os.strerror(err))
                    s.send(REQ)
                    st[2] = True
                    sel.modify(s, selectors.EVENT_READ)
                    continue
                data = s.recv(4096)
                if not data:
                    sys.exit("idle_conns: the server closed a connection")
                st[1] += data
                head, sep, body = st[1].partition(b"\r\n\r\n")
                if not sep:
                    continue
                clen = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, val = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        clen = int(val)
                if len(body) >= clen:
                    sel.unregister(s)
                    del pending[key.fd]
                    socks.append(s)
        done += k
    sel.close()


def measure(name, port, pids_fn, n):
    socks = []
    # One connection first, so that what a server sets up lazily on its
    # first request is not counted as per-connection growth.
    open_idle(port, 1, 0, socks)
    points = [(0, settled_rss(pids_fn))]
    step = n // 4
    opened = 0
    for q in range(4):
        k = step if q < 3 else n - opened
        open_idle(port, k, 1 + opened, socks)
        opened += k
        points.append((opened, settled_rss(pids_fn)))
    r0, rn = points[0][1], points[-1][1]
    rh = points[2][1]
    growth = (rn - r0) / n
    slope = (rn - rh) / (n - points[2][0])
    print("%-14s conns %7d  RSS %s MB  growth from empty %6.0f B/conn  slope at the margin %6.0f B/conn"
          % (name, n, " ".join("%.1f" % (p[1] / 1e6) for p in points), growth, slope), flush=True)
    for s in socks:
        s.close()
    return growth, slope


def run_voltd(build, backend, n, tmp):
    port = free_port()
    sock = os.path.join(tmp, "ctl-%s.sock" % backend)
    args = [os.path.join(build, "voltd"), "-f",
            "-s", "server.listen=127.0.0.1:%d" % port,
            "-s", "scheduler.workers=2",
            "-s", "io.backend=%s" % backend,
            "-s", "control.socket=%s" % sock,
            "-s", "server.max_connections=%d" % (n + 1024),
            "-s", "server.idle_timeout_ms=600000",
            "-s", "log.level=warning"]
    log = open(os.path.join(tmp, "voltd-%s.log" % backend), "w")
    p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_listening(port, p, "voltd")
        return measure("voltd " + backend, port, lambda: [p.pid], n)
    finally:
        p.terminate()
        p.wait(timeout=60)


def run_nginx(n, tmp):
    port = free_port()
    rundir = os.path.join(tmp, "nginx")
    os.makedirs(rundir, exist_ok=True)
    with open(os.path.join(BENCH, "nginx.conf.in")) as f:
        conf = f.read().replace("@RUNDIR@", rundir).replace("@PORT@", str(port))
    # As the peers' nginx, with room for every connection in either worker.
    conf = conf.replace("worker_connections 4096;", "worker_connections %d;" % (n + 4096))
    conf = conf.replace("worker_processes 2;", "worker_processes 2;\nworker_rlimit_nofile %d;" % (n + 8192))
    with open(os.path.join(rundir, "nginx.conf"), "w") as f:
        f.write(conf)
    log = open(os.path.join(tmp, "nginx.log"), "w")
    p = subprocess.Popen(["nginx", "-p", rundir + "/", "-e", rundir + "/error.log", "-c",
                          os.path.join(rundir, "nginx.conf")], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_listening(port, p, "nginx")
        return measure("nginx", port, lambda: [p.pid] + children(p.pid), n)
    finally:
        p.terminate()
        p.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-b", "--build", default=os.path.join(BENCH, "..", "build"))
    ap.add_argument("--conns", type=int, default=100000)
    ap.add_argument("--backends", default="uring,libev")
    ap.add_argument("--no-nginx", action="store_true")
    args = ap.parse_args()
    n = args.conns
    if n < 4:
        sys.exit("idle_conns: --conns must be at least 4")
    got = raise_nofile(n + 4096)
    if got < n + 4096:
        # Both ends need a descriptor per connection, and the servers
        # inherit this limit: the machine decides the largest N.
        n = got - 4096
        print("idle_conns: RLIMIT_NOFILE cannot go above %d here (no CAP_SYS_RESOURCE): %d connections, not %d"
              % (got, n, args.conns), flush=True)
    tmp = tempfile.mkdtemp(prefix="voltd-idle-conns-")
    print("idle_conns: %d idle keep-alive connections per server (load %s)"
          % (n, " ".join(open("/proc/loadavg").read().split()[:3])), flush=True)
    res = {}
    for b in args.backends.split(","):
        res["voltd " + b] = run_voltd(args.build, b, n, tmp)
    if not args.no_nginx:
        res["nginx"] = run_nginx(n, tmp)
        for name, (g, s) in res.items():
            if name != "nginx":
                print("%-14s / nginx: growth %.2fx, slope %.2fx" % (name, g / res["nginx"][0], s / res["nginx"][1]))


if __name__ == "__main__":
    main()
