# SPDX-License-Identifier: MIT
"""The adversarial suite (issue 12): clients that try to pin the executors,
hold memory, starve other connections or exhaust descriptors. Each case
starts its own voltd (both I/O backends), is bounded in time, and ends with
the accounting check (requests == responses + dropped) done by stop()."""
import os
import socket
import time

from httputil import Reader, connect, req_bytes, reset, stop, voltd, backend  # noqa: F401


def timed_request(port, target, timeout=30):
    t = time.monotonic()
    s = connect(port, timeout)
    try:
        s.sendall(req_bytes("GET", target, close=True))
        r = Reader(s).response()
    finally:
        s.close()
    return r, time.monotonic() - t


# ------------------------------------------------------------ sleepers

def test_sleeper_flood_leaves_executors_free(voltd):
    """8 connections x 64 pipelined 6 s sleeps (max_pipeline each, 8 exec
    tasks with 2 workers): a light spin on a fresh connection is answered
    at once, not after the sleeps (it waited ~5 s when an exec task held
    at most 64 sleepers and then stopped taking jobs)."""
    d = voltd()
    conns = []
    for _ in range(8):
        s = connect(d.port)
        s.sendall(b"".join(req_bytes("GET", "/v1/sleep?ms=6000") for _ in range(64)))
        conns.append(s)
    time.sleep(0.5)  # every sleep parsed and parked
    r, dt = timed_request(d.port, "/v1/spin?n=1000")
    assert r.status == 200, r
    print("light request under the sleeper flood: %.1f ms" % (dt * 1000))
    assert dt < 2.5, "spin waited %.2f s behind the sleepers" % dt
    for s in conns:
        reset(s)
    st = stop(d)
    assert st["requests"] >= 8 * 64 + 1, st
