# SPDX-License-Identifier: MIT
"""Network faults (issue 17): voltd in a network namespace of its own,
behind a veth pair whose other end is in a second namespace where the
clients run (tests/fault/netclient.py). Both ends drop 1-5 % of the packets
they receive at random (nftables: numgen random mod 100 < N drop) and send
through a rate-limited, queueing token bucket (tc tbf; this kernel has no
netem). The clients stream echo, sha256 hash and gzip jobs of random sizes
up to 4 MiB and check every byte. Only the two namespaces made here are
touched (10.201.0.1 and .2 exist only inside them); where they cannot be
made (not root, no network namespaces, no nf_tables or tbf in the kernel)
the case skips with the reason. Seeded (VOLTD_TEST_SEED=N repeats the
loss, rate and jobs); closes the books (faultutil.Books)."""
import itertools
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

import pytest

from faultutil import Books, backend, fault_daemon, seed, stop  # noqa: F401

NETCLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netclient.py")
SERVER_IP, CLIENT_IP = "10.201.0.1", "10.201.0.2"
_count = itertools.count()


def run(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


class NetPair:
    """Two namespaces joined by a veth pair; loss and rate on both ends."""

    def __init__(self, rng):
        tag = "voltd-fault-%d-%d" % (os.getpid(), next(_count))
        self.server_ns, self.client_ns = tag + "-s", tag + "-c"
        self.loss = rng.randint(1, 5)             # % of packets dropped on receipt, each end
        self.rate = rng.choice((50, 100, 200))    # Mbit/s, each direction
        self.latency = rng.choice((20, 50, 100))  # ms a packet may queue in the bucket
        self.made = []

    def step(self, what, *cmd, machine=False):
        r = run(*cmd)
        if r.returncode != 0:
            msg = "%s: `%s` failed: %s" % (what, " ".join(cmd), r.stderr.strip())
            if machine:
                pytest.skip("this machine cannot run the network case: " + msg)
            pytest.fail(msg)
        return r.stdout

    def setup(self):
        s, c = self.server_ns, self.client_ns
        for ns in (s, c):
            self.step("a network namespace", "ip", "netns", "add", ns, machine=True)
            self.made.append(ns)
        self.step("a veth pair", "ip", "link", "add", "vs", "netns", s, "type", "veth", "peer", "name", "vc",
                  "netns", c, machine=True)
        for ns, dev, ip in ((s, "vs", SERVER_IP), (c, "vc", CLIENT_IP)):
            self.step("an address", "ip", "-n", ns, "addr", "add", ip + "/24", "dev", dev)
            self.step("link up", "ip", "-n", ns, "link", "set", dev, "up")
            self.step("loopback up", "ip", "-n", ns, "link", "set", "lo", "up")
            rules = ("table inet voltd_fault {\n chain input {\n  type filter hook input priority 0; policy accept;\n"
                     "  iifname \"%s\" numgen random mod 100 < %d counter drop\n }\n}\n" % (dev, self.loss))
            path = "/tmp/%s.nft" % ns
            with open(path, "w") as f:
                f.write(rules)
            try:
                self.step("packet loss (nftables)", "ip", "netns", "exec", ns, "nft", "-f", path, machine=True)
            finally:
                os.unlink(path)
            self.step("a rate-limited queue (tc tbf)", "tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf",
                      "rate", "%dmbit" % self.rate, "burst", "32kb", "latency", "%dms" % self.latency, machine=True)

    def dropped(self):
        """Packets the loss rules dropped, both ends."""
        n = 0
        for ns in (self.server_ns, self.client_ns):
            out = self.step("nft counters", "ip", "netns", "exec", ns, "nft", "list", "table", "inet", "voltd_fault")
            n += sum(int(x) for x in re.findall(r"counter packets (\d+)", out))
        return n

    def teardown(self):
        for ns in self.made:
            run("ip", "netns", "del", ns)


@pytest.fixture
def netpair():
    sd = seed()
    print("seed %d" % sd)
    if os.geteuid() != 0:
        pytest.skip("this machine cannot run the network case: network namespaces need root "
                    "(CAP_SYS_ADMIN, CAP_NET_ADMIN); running as uid %d" % os.geteuid())
    for tool, pkg in (("ip", "iproute2"), ("tc", "iproute2"), ("nft", "nftables")):
        if not shutil.which(tool):
            pytest.fail("%s not found: install the Debian package %s (scripts/packages.txt)" % (tool, pkg))
    np = NetPair(random.Random(sd))
    np.seed = sd
    try:
        np.setup()
        yield np
    finally:
        np.teardown()


def netclients(np, port, sd, threads, jobs, limit_s=90):
    """faultutil.Clients run by netclient.py in the client namespace."""
    r = subprocess.run(["ip", "netns", "exec", np.client_ns, sys.executable, NETCLIENT, "--host", SERVER_IP,
                        "--port", str(port), "--seed", str(sd), "--threads", str(threads), "--jobs", str(jobs),
                        "--limit-s", str(limit_s)], capture_output=True, text=True, timeout=limit_s + 240)
    assert r.returncode == 0, "netclient.py exited %d:\n%s" % (r.returncode, r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_lossy_rate_limited_link(netpair, fault_daemon):
    """4 clients x 8 jobs (echo, sha256, gzip; up to 4 MiB) through the
    lossy, rate-limited link: every byte comes back, the books close."""
    np = netpair
    d = fault_daemon(prefix=("ip", "netns", "exec", np.server_ns), host=SERVER_IP)

    def warm():
        w = netclients(np, d.port, np.seed + 1, threads=4, jobs=2)
        assert not w["errors"], w["errors"][:5]
    books = Books(d, warm=warm)
    t0 = time.monotonic()
    c = netclients(np, d.port, np.seed, threads=4, jobs=8)
    took = time.monotonic() - t0
    drops = np.dropped()
    print("lossy link (%s, seed %d): loss %d %% each way, tbf %d Mbit/s queueing <= %d ms: %d jobs whole, "
          "%.1f MiB sent in %.1f s, %d packets dropped"
          % (d.backend, np.seed, np.loss, np.rate, np.latency, c["ok"], c["bytes"] / (1 << 20), took, drops))
    assert not c["errors"], "backend %s, seed %d, loss %d %%: %s" % (d.backend, np.seed, np.loss, c["errors"][:5])
    assert c["ok"] > 0 and drops > 0, (c, drops)
    books.check()
    stop(d)
