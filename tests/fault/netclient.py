# SPDX-License-Identifier: MIT
"""faultutil.Clients as a program, for a client inside a network namespace
(test_network_faults.py runs it with `ip netns exec`): runs the jobs
against HOST:PORT and prints one JSON line: ok, bytes, errors."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from faultutil import Clients  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--jobs", type=int, default=6)
    p.add_argument("--limit-s", type=float, default=60)
    a = p.parse_args()
    c = Clients(a.port, a.seed, threads=a.threads, jobs=a.jobs, limit_s=a.limit_s, host=a.host).start().join()
    print(json.dumps({"ok": c.ok, "bytes": c.nbytes, "errors": c.errors}))


if __name__ == "__main__":
    main()
