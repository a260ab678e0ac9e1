# SPDX-License-Identifier: MIT
"""The heavy lane against a real voltd, once per I/O backend
(doc/server.md, the lane row; src/server/lane.c): a job that outlasts its
first slice leaves its executor for the lane, whose runners (one per
worker) take its jobs first come first served, one at a time each; light
requests are answered meanwhile. Behaviour only: the order in which
responses arrive, the lane's counters and what each worker runs; the
heavy jobs differ in length by ten times, so the orders below hold on any
machine, however slow."""
import subprocess
import threading
import time

from ctlutil import ctl
from httputil import Reader, backend, connect, req_bytes, voltd  # noqa: F401

LONG = "/v1/spin?n=300000000"    # about half a second of CPU
SHORT = "/v1/spin?n=30000000"     # a tenth of that
LIGHT = "/v1/spin?n=1000"


def server(d):
    r = ctl(d, "stats")
    assert r["ok"], r
    return r["server"]


def until(what, fn, timeout=30):
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        assert time.monotonic() < end, "timed out waiting for " + what
        time.sleep(0.01)


class Order:
    """The order responses arrive in, by name."""

    def __init__(self):
        self.mu = threading.Lock()
        self.seq = []

    def done(self, name):
        with self.mu:
            self.seq.append(name)


def request_on(s, path, name, order, close=False):
    """Send one GET on connection s; a thread reads the response (status
    200), records its arrival and, with `close`, closes s."""
    s.sendall(req_bytes("GET", path, close=close))

    def read():
        r = Reader(s).response()
        if close:
            s.close()
        assert r.status == 200, (name, r.status)
        order.done(name)

    t = threading.Thread(target=read)
    t.start()
    return t


def request(d, path, name, order):
    """request_on a connection of its own, closed after the response."""
    return request_on(connect(d.port, timeout=60), path, name, order, close=True)


def long_then_short(d, lane):
    """LONG, then SHORT once LONG has entered the lane (or, with the lane
    off, is running), then a light request: the order their responses
    arrive in, and how many jobs entered the lane."""
    order = Order()
    jobs0 = server(d)["lane_jobs"]
    ts = [request(d, LONG, "long", order)]
    if lane:
        until("the long job in the lane", lambda: server(d)["lane_jobs"] > jobs0)
    else:
        until("the long job running", lambda: server(d)["in_flight"]["exec"] >= 1)
    ts.append(request(d, SHORT, "short", order))
    until("both heavy jobs in flight", lambda: server(d)["in_flight"]["exec"] >= 2)
    ts.append(request(d, LIGHT, "light", order))
    for t in ts:
        t.join(120)
        assert not t.is_alive()
    return order.seq, server(d)["lane_jobs"] - jobs0


def long_and_one_waiting(d, name):
    """LONG, then SHORT (`name`) once LONG has entered the lane: SHORT
    outlasts its first slice too and waits in the lane behind it (the
    gauge and the counter are two reads: a snapshot may fall between a
    job's entry and its count). The order so far and the readers."""
    order = Order()
    ts = [request(d, LONG, "long", order)]
    until("the long job in the lane", lambda: server(d)["lane_jobs"] >= 1)
    ts.append(request(d, SHORT, name, order))
    until(name + " waiting in the lane",
          lambda: (lambda s: s["lane_waiting"] == 1 and s["lane_jobs"] == 2)(server(d)))
    return order, ts


def test_heavy_jobs_first_come_first_served(voltd):
    # One worker, one runner: the short job waits for the long one that
    # came first (round-robin would finish it first); the light request
    # is answered while both are in flight.
    d = voltd("-s", "scheduler.workers=1", "-s", "stages.heavy_wait_ms=0")
    order, lane_jobs = long_then_short(d, True)
    assert order == ["light", "long", "short"], order
    assert lane_jobs == 2
    st = server(d)
    assert st["lane_waiting"] == 0 and st["lane_wait_ns"] > 0, st


def test_the_second_waits_its_turn(voltd):
    d = voltd("-s", "scheduler.workers=1", "-s", "stages.heavy_wait_ms=0")
    order, ts = long_and_one_waiting(d, "short")
    for t in ts:
        t.join(120)
    assert order.seq == ["long", "short"], order.seq


def test_lane_off_is_round_robin_and_live(voltd):
    d = voltd("-s", "scheduler.workers=1", "-s", "stages.heavy_lane=off", "-s", "stages.heavy_wait_ms=0")
    order, lane_jobs = long_then_short(d, False)
    assert order == ["light", "short", "long"], order
    assert lane_jobs == 0
    r = ctl(d, "set stages.heavy_lane on")
    assert r["ok"], r
    order, lane_jobs = long_then_short(d, True)
    assert order == ["light", "long", "short"], order
    assert lane_jobs == 2


def two_on_worker_0(d):
    """Two connections opened while the daemon is idle: the gather rule
    puts both on worker 0, and with stealing off their jobs enter the lane
    from there, whatever the rule says once a long job keeps worker 0
    busy (connections opened then may go to worker 1)."""
    return connect(d.port, timeout=60), connect(d.port, timeout=60)


def heavy_pair(d, conns, first, second):
    """`first` on one connection, then `second` on the other once `first`
    is in the lane: the order their responses arrive in, and how many
    lane jobs spread to another worker's runner."""
    st = server(d)
    jobs0, spreads0 = st["lane_jobs"], st["lane_spreads"]
    order = Order()
    ts = [request_on(conns[0], first, "first", order)]
    until("the first job in the lane", lambda: server(d)["lane_jobs"] >= jobs0 + 1)
    ts.append(request_on(conns[1], second, "second", order))
    for t in ts:
        t.join(120)
        assert not t.is_alive()
    return order.seq, server(d)["lane_spreads"] - spreads0


def both_running(d):
    """Each worker is in a runner's poll now."""
    r = ctl(d, "stats workers")
    assert r["ok"], r
    tasks = [w["task"] for w in r["workers"]]
    return tasks if tasks == ["lane", "lane"] else None


def test_a_second_heavy_job_runs_on_the_idle_worker(voltd):
    # Two workers, stealing off, both connections on worker 0: the second
    # heavy job waits for worker 0's runner stages.heavy_spread_us (1 ms),
    # then worker 1's runner takes it, woken there through its mailbox, so
    # both run at once, one per worker, and none waits in the lane.
    d = voltd("-s", "scheduler.stealing=off")
    conns = two_on_worker_0(d)
    order = Order()
    ts = [request_on(conns[0], LONG, "a", order)]
    until("the first job in the lane", lambda: server(d)["lane_jobs"] >= 1)
    ts.append(request_on(conns[1], LONG, "b", order))
    until("the second job in the lane", lambda: server(d)["lane_jobs"] >= 2)
    until("a runner on each worker at once", lambda: both_running(d))
    st = server(d)
    assert st["lane_waiting"] == 0 and st["lane_spreads"] == 1, st
    for t in ts:
        t.join(120)
    assert sorted(order.seq) == ["a", "b"]


def mix_until(d, tmp_path, done):
    """h2load sends the 1 %-heavy mix (a closed loop that keeps both CPUs
    busy) over 64 connections, rounds of 20,000 requests, until
    done(stats) holds (at most 10 rounds); every request is answered 200.
    The last stats."""
    uris = tmp_path / "uris"
    base = "http://127.0.0.1:%d/v1/spin?n=" % d.port
    uris.write_text("".join(base + "1000\n" for _ in range(99)) + base + "2000000\n")
    for _ in range(10):
        out = subprocess.run(["h2load", "--h1", "-n", "20000", "-c", "64", "-m", "1", "-i", str(uris)],
                             capture_output=True, text=True, timeout=120).stdout
        assert "status codes: 20000 2xx, 0 3xx, 0 4xx, 0 5xx" in out, out
        st = ctl(d, "stats")
        assert st["ok"], st
        if done(st):
            break
    return st


def test_a_runner_taken_by_stealing_goes_home(voltd, tmp_path):
    # One runner per worker: a runner the scheduler's stealing moved to the
    # other worker (with gather off, an idle worker takes its sibling's
    # queued tasks, a runner among them, now and then) goes back to its own
    # (lane_homes) rather than take turns there with that worker's runner.
    d = voltd("-s", "scheduler.gather=off")
    st = mix_until(d, tmp_path, lambda st: st["server"]["lane_homes"] >= 1)
    assert st["server"]["lane_homes"] >= 1, st["server"]


def test_short_runs_need_saturation_and_a_sibling(voltd, tmp_path):
    # Two workers, the gather rule on: under the 1 %-heavy mix the monitor
    # finds the CPUs saturated, and a runner with nothing waiting in the
    # lane takes short runs of slices (lane_run_slices). With stealing off
    # (live) the light work queued behind a run would have no sibling to
    # take it: no short run, though the monitor finds the CPUs saturated
    # again (spreads).
    d = voltd("-s", "scheduler.workers=2")
    st = mix_until(d, tmp_path, lambda st: st["server"]["lane_run_slices"] >= 1)
    assert st["server"]["lane_run_slices"] >= 1, (st["server"], st["runtime"])
    r = ctl(d, "set scheduler.stealing off")
    assert r["ok"], r
    # Idle again: the next saturation is a new spread.
    until("the verdict back to gather", lambda: ctl(d, "stats")["runtime"]["spreading"] == 0)
    st = ctl(d, "stats")
    runs0, spreads0 = st["server"]["lane_run_slices"], st["runtime"]["spreads"]
    st = mix_until(d, tmp_path, lambda st: st["runtime"]["spreads"] > spreads0)
    assert st["runtime"]["spreads"] > spreads0, st["runtime"]
    assert st["server"]["lane_run_slices"] == runs0, st["server"]


def test_a_second_heavy_job_waits_for_its_own_runner_first(voltd):
    # heavy_spread_us at its bound (60 s): the short job that comes while
    # the long one runs on worker 0 waits in the lane for worker 0's
    # runner, worker 1's idle: it ends second. Set to 0 (live), the same
    # pair spreads at once: the short job runs on worker 1 beside the long
    # one and ends first.
    d = voltd("-s", "scheduler.stealing=off", "-s", "stages.heavy_spread_us=60000000")
    conns = two_on_worker_0(d)
    order, spreads = heavy_pair(d, conns, LONG, SHORT)
    assert order == ["first", "second"] and spreads == 0, (order, spreads)
    r = ctl(d, "set stages.heavy_spread_us 0")
    assert r["ok"], r
    order, spreads = heavy_pair(d, conns, LONG, SHORT)
    assert order == ["second", "first"] and spreads == 1, (order, spreads)


def test_a_job_behind_a_long_wait_stays_with_its_executor(voltd):
    # One runner; heavy_wait_ms 1: once the lane's first waiting job has
    # waited 1 ms, the next heavy job stays with its executor, taking
    # turns with the runner's job, so it ends first; the one waiting in
    # the lane still waits for the long job before it.
    d = voltd("-s", "scheduler.workers=1", "-s", "stages.heavy_wait_ms=1")
    order, ts = long_and_one_waiting(d, "short1")
    # However fast the machine, short1 has now waited more than 1 ms
    # when short2's first slice ends.
    time.sleep(0.05)
    ts.append(request(d, SHORT, "short2", order))
    for t in ts:
        t.join(120)
    st = server(d)
    assert st["lane_jobs"] == 2, (order.seq, st)
    assert order.seq == ["short2", "long", "short1"], order.seq
