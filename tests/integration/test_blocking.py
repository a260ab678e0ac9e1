# SPDX-License-Identifier: MIT
"""The blocking pool and the job kinds' statistics and safety, against a
real voltd with the test module tests/modules/pool.c loaded from
[module.pool] (the blocking kind `block`, the overrunning kind `hog`) and
tests/modules/crash.c (a step that dies of a signal), on both backends:

- with every blocking thread busy for seconds (one runtime worker), light
  requests are answered before any blocking one ends, and the blocking
  jobs run on pool threads (thread_index past the workers');
- the pool's queue pushes back as stages.on_full says: shed (503 with
  Retry-After, blocking_shed), wait (the connection waits its turn; the
  queue's send_waits), codel (refusals once its wait stands);
- a drain with blocking jobs running and queued answers or counts every
  one (requests == responses + dropped, checked by every stop here) and
  runs fini for every job whose start ran;
- every callback timed per kind (jobs, slices, the longest; overruns for
  hog), with the module's counters, in stats kinds, JSON (schema
  validated), Prometheus (labels module, kind) and `hist blocking_wait`;
  the longest step restarts at `clear counters`;
- the quarantine: overruns within the window answer 503 with Retry-After
  until `clear quarantine` or a reload;
- a fatal signal in a module's step logs the signal, kind, module, version
  and file, then voltd dies by that signal;
- `voltctl modules` (table and --json): name, version, file, ABI, build
  id, kinds with routes, methods and flags, and the file changed on disk
  after a rename-install over it.
No timing is asserted: the blocking jobs last seconds so that what must
happen meanwhile has room to, and the ordering of events is checked."""
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest

from conftest import BUILDDIR
from ctlutil import ctl, validator
from httputil import ASAN, backend, request, stop, voltd  # noqa: F401

MODDIR = os.path.join(BUILDDIR, "tests", "modules")
VOLTCTL = os.path.join(BUILDDIR, "voltctl")
BLOCK_MS = 4000


def conf(tmp_path, modules="", sections="[module.pool]\n"):
    """A configuration loading the test modules; `modules` goes into
    [modules]."""
    p = tmp_path / "voltd.conf"
    p.write_text("[modules]\ndir = %s\n%s\n%s" % (MODDIR, modules, sections))
    return p


def stats(d, section=None):
    return ctl(d, "stats" + (" " + section if section else ""))


def wait_for(fn, timeout=15, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


def in_thread(port, target, out, key):
    """GET target in a thread: out[key] = (response, when), or (the
    error, when) for a connection the drain cut."""
    def run():
        try:
            out[key] = (request(port, "GET", target), time.monotonic())
        except (EOFError, OSError) as e:
            out[key] = (e, time.monotonic())
    th = threading.Thread(target=run)
    th.start()
    return th


def kind_line(log, kind):
    m = re.search(r"server kind %s: (.*)$" % kind, log, re.M)
    assert m, log
    return {k: v for k, v in (kv.split("=") for kv in m.group(1).split())}


def test_light_answered_while_every_blocking_thread_busy(voltd, tmp_path):  # noqa: F811
    d = voltd("-c", str(conf(tmp_path, "blocking_threads = 2\n")), "-s", "scheduler.workers=1")
    out = {}
    t0 = time.monotonic()
    blocks = [in_thread(d.port, "/block?ms=%d&id=%d" % (BLOCK_MS, i), out, i) for i in range(2)]
    wait_for(lambda: stats(d, "server")["server"]["blocking_busy"] == 2, what="both pool threads busy")
    # A third waits in the pool's queue: no thread takes it meanwhile.
    third = in_thread(d.port, "/block?ms=1&id=2", out, 2)
    wait_for(lambda: stats(d, "channels")["channels"]["blocking"]["len"] == 1, what="a queued blocking job")
    lights = []
    for i in range(20):
        r = request(d.port, "GET", "/v1/spin?n=%d" % (10 if i % 2 else 1000))
        lights.append((r.status, time.monotonic()))
    for th in blocks + [third]:
        th.join(30)
    ends = [out[i][1] for i in range(3)]
    assert all(s == 200 for s, _ in lights), lights
    # Every light request was answered while the blocking ones still ran.
    assert max(t for _, t in lights) < min(ends), (lights, ends)
    for i in range(3):
        r = out[i][0]
        assert r.status == 200, r
        m = re.match(rb"block %d on thread (\d+)\n" % i, r.body)
        # Pool threads' indexes follow the one worker's (0): 1 and 2.
        assert m and int(m.group(1)) in (1, 2), r.body
    # The queued one was taken only when a thread came free: after one of
    # the first two, sent after t0, had blocked its BLOCK_MS (the order in
    # which this process's threads read their answers is the scheduler's).
    assert ends[2] >= t0 + BLOCK_MS / 1000.0, (t0, ends)
    # (a thread counts itself idle just after it handed its answer over)
    st = wait_for(lambda: (lambda s: s if s["blocking_busy"] == 0 else None)(stats(d, "server")["server"]),
                  what="the pool idle")
    assert st["blocking_threads"] == 2 and st["blocking_jobs"] == 3, st
    st = stop(d)
    assert st["blocking_jobs"] == 3


def test_queue_full_shed_answers_503(voltd, tmp_path):  # noqa: F811
    d = voltd("-c", str(conf(tmp_path, "blocking_threads = 1\nblocking_queue = 1\n")),
              "-s", "stages.on_full=shed", "-s", "stages.retry_after_s=3")
    out = {}
    busy = in_thread(d.port, "/block?ms=%d&id=0" % BLOCK_MS, out, 0)
    wait_for(lambda: stats(d, "server")["server"]["blocking_busy"] == 1, what="the pool thread busy")
    queued = in_thread(d.port, "/block?ms=1&id=1", out, 1)
    wait_for(lambda: stats(d, "channels")["channels"]["blocking"]["len"] == 1, what="a queued job")
    r = request(d.port, "GET", "/block?ms=1&id=2")
    assert r.status == 503 and r.header("Retry-After") == "3", r
    # Light requests are not refused: only the pool's queue is full.
    assert request(d.port, "GET", "/v1/spin?n=10").status == 200
    busy.join(30)
    queued.join(30)
    assert out[0][0].status == 200 and out[1][0].status == 200, out
    st = stop(d)
    assert st["blocking_shed"] == 1 and st["shed"] == 1 and st["blocking_full_events"] >= 1, st


def test_queue_full_wait_stops_reading_until_room(voltd, tmp_path):  # noqa: F811
    d = voltd("-c", str(conf(tmp_path, "blocking_threads = 1\nblocking_queue = 1\n")), "-s", "stages.on_full=wait")
    out = {}
    busy = in_thread(d.port, "/block?ms=%d&id=0" % BLOCK_MS, out, 0)
    wait_for(lambda: stats(d, "server")["server"]["blocking_busy"] == 1, what="the pool thread busy")
    queued = in_thread(d.port, "/block?ms=1&id=1", out, 1)
    wait_for(lambda: stats(d, "channels")["channels"]["blocking"]["len"] == 1, what="a queued job")
    waiting = in_thread(d.port, "/block?ms=1&id=2", out, 2)
    # Its connection waits for room in the queue (a waiter registered).
    wait_for(lambda: stats(d, "channels")["channels"]["blocking"]["send_waits"] >= 1, what="a send waiting")
    assert 0 not in out and 2 not in out
    for th in (busy, queued, waiting):
        th.join(30)
    assert [out[i][0].status for i in range(3)] == [200, 200, 200], out
    assert out[2][1] >= out[0][1], out
    st = stop(d)
    assert st["shed"] == 0 and st["blocking_jobs"] == 3, st


def test_codel_refuses_a_standing_pool_queue(voltd, tmp_path):  # noqa: F811
    d = voltd("-c", str(conf(tmp_path, "blocking_threads = 1\nblocking_queue = 64\n")), "-s", "stages.on_full=codel",
              "-s", "stages.codel_target_ms=5", "-s", "stages.codel_interval_ms=50")
    out = {}
    ths = [in_thread(d.port, "/block?ms=60&id=%d" % i, out, i) for i in range(30)]
    for th in ths:
        th.join(60)
    codes = sorted(out[i][0].status for i in range(30))
    assert set(codes) <= {200, 503} and 503 in codes and 200 in codes, codes
    st = stop(d)
    assert st["delay_shed"] >= 1 and st["blocking_shed"] == codes.count(503), st


def test_drain_answers_or_counts_every_blocking_job(voltd, tmp_path):  # noqa: F811
    d = voltd("-c", str(conf(tmp_path, "blocking_threads = 1\n")), "-s", "server.drain_timeout_ms=500",
              "-s", "server.shutdown_delay_ms=0")
    out = {}
    # One running past the drain's timeout (its connection is cut), one
    # sleeping (SLEEP on the pool thread) queued behind it, one queued.
    ths = [in_thread(d.port, "/block?ms=1500&id=0", out, 0)]
    wait_for(lambda: stats(d, "server")["server"]["blocking_busy"] == 1, what="the pool thread busy")
    ths.append(in_thread(d.port, "/block?ms=1&sleep=2000&id=1", out, 1))
    ths.append(in_thread(d.port, "/block?ms=1&more=3&id=2", out, 2))
    wait_for(lambda: stats(d, "channels")["channels"]["blocking"]["len"] == 2, what="two queued jobs")
    st = stop(d)  # requests == responses + dropped, nothing in flight
    for th in ths:
        th.join(30)
    assert st["requests"] == 3 and st["requests_dropped"] + st["responses_2xx"] == 3, st
    assert st["requests_dropped"] >= 1, st
    k = kind_line(d.log(), "block")
    # Every job whose start ran had its fini, on the pool thread.
    assert k["starts"] == k["finis"], k


def test_kind_statistics_and_module_counters(voltd, tmp_path):  # noqa: F811
    d = voltd("-c", str(conf(tmp_path, "overrun_factor = 20\n")))
    check = validator(d)
    for i in range(3):
        assert request(d.port, "GET", "/block?ms=1&more=2&id=%d" % i).status == 200
    assert request(d.port, "GET", "/hog?us=20000").status == 200   # 20 ms: over 20 x 50 us
    assert request(d.port, "GET", "/v1/spin?n=1000").status == 200
    s = check(stats(d, "kinds"))["kinds"]
    b, h, sp = s["block"], s["hog"], s["spin"]
    assert b["module"] == "pool" and h["module"] == "pool" and sp["module"] == "voltd", s
    # block: start + 2 MORE + the last step each, no overrun (blocking)
    assert b["kind_jobs"] == 3 and b["kind_slices"] == 12 and b["kind_slice_overruns"] == 0, b
    assert b["counters"] == {"starts": 3, "finis": 3, "more_steps": 6}, b
    assert h["kind_jobs"] == 1 and h["kind_slices"] == 1 and h["kind_slice_overruns"] == 1, h
    assert h["kind_slice_max_ns"] >= 20000000 and h["counters"] == {"spins": 1}, h
    assert sp["kind_jobs"] == 1 and sp["kind_slices"] >= 2 and "counters" not in sp, sp
    assert s["healthz"]["module"] == "voltd" and s["healthz"]["kind_slices"] == 0, s
    assert re.search(r"a step of kind hog, module pool 1\.0 ran \d+ us, over overrun_factor x slice_us \(1000 us\)",
                     d.log()), d.log()
    # Prometheus: labels module and kind; the module's counters.
    text = ctl(d, "metrics")["text"]
    assert 'voltd_server_kind_jobs_total{module="pool",kind="block"} 3\n' in text, text
    assert 'voltd_server_kind_slice_overruns_total{module="pool",kind="hog"} 1\n' in text
    assert 'voltd_server_request_duration_seconds_count{module="pool",kind="block"} 3\n' in text
    assert 'voltd_module_counter_total{module="pool",kind="block",counter="finis"} 3\n' in text
    assert "# TYPE voltd_server_blocking_queue_wait_seconds histogram\n" in text
    h = check(ctl(d, "hist blocking_wait"))
    assert h["summary"]["count"] == 3, h
    # clear counters: the counters count from 0, the longest step too.
    assert check(ctl(d, "clear counters"))["cleared"] == "counters"
    s = check(stats(d, "kinds"))["kinds"]
    assert s["hog"]["kind_slice_max_ns"] == 0 and s["block"]["counters"]["starts"] == 0, s
    assert request(d.port, "GET", "/block?ms=1&id=9").status == 200
    s = check(stats(d, "kinds"))["kinds"]
    assert s["block"]["counters"] == {"starts": 1, "finis": 1, "more_steps": 0}, s
    # voltctl's table shows them by kind.
    r = subprocess.run([VOLTCTL, "-s", str(d.control), "stats", "kinds"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and re.search(r"^  counters\.starts\s", r.stdout, re.M), r.stdout
    stop(d)


def test_quarantine_until_cleared_or_reloaded(voltd, tmp_path):  # noqa: F811
    path = conf(tmp_path, "quarantine_overruns = 2\nquarantine_window_ms = 60000\n")
    d = voltd("-c", str(path), "-s", "stages.retry_after_s=7")
    check = validator(d)

    def quarantine():
        for _ in range(2):
            assert request(d.port, "GET", "/hog?us=20000").status == 200
        r = request(d.port, "GET", "/hog?us=1")
        assert r.status == 503 and r.header("Retry-After") == "7", r
        # only that kind
        assert request(d.port, "GET", "/block?ms=1").status == 200

    quarantine()
    k = check(stats(d, "kinds"))["kinds"]["hog"]
    assert k["kind_quarantined"] == 1 and k["kind_quarantine_refused"] == 1 and k["kind_slice_overruns"] == 2, k
    assert "kind hog, module pool 1.0 quarantined: 2 steps over overrun_factor x slice_us within 60000 ms" in d.log()
    r = check(ctl(d, "clear quarantine"))
    assert r["cleared"] == "quarantine" and r["released"] == 1, r
    assert request(d.port, "GET", "/hog?us=1").status == 200
    assert check(stats(d, "kinds"))["kinds"]["hog"]["kind_quarantined"] == 0
    # A reload serves it again too.
    quarantine()
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "kind hog, module pool 1.0 serves again" in d.log().split("quarantined")[-1],
             what="the reload's release")
    assert request(d.port, "GET", "/hog?us=1").status == 200
    # Off by default: live, `set` turns it off.
    assert ctl(d, "set modules.quarantine_overruns 0")["ok"]
    for _ in range(3):
        assert request(d.port, "GET", "/hog?us=20000").status == 200
    stop(d)


@pytest.mark.parametrize("sig", ["segv", "abrt"])
def test_fatal_signal_in_a_step_names_the_module(voltd, tmp_path, sig):  # noqa: F811
    d = voltd("-c", str(conf(tmp_path, sections="[module.crash]\n")))
    with pytest.raises(Exception):
        request(d.port, "GET", "/crash?sig=%s" % sig)
    rc = d.proc.wait(20)
    name = {"segv": "SIGSEGV", "abrt": "SIGABRT"}[sig]
    want = "fatal signal %s in kind crash of module crash 1.0 (%s/crash.so)" % (name, MODDIR)
    assert want in d.log(), d.log()
    # Then the signal's own action: death by it (ASan's handler takes
    # SIGSEGV over after the line and exits instead).
    num = {"segv": signal.SIGSEGV, "abrt": signal.SIGABRT}[sig]
    if not (ASAN and sig == "segv"):
        assert rc == -num, (rc, d.log())
    else:
        assert rc != 0, d.log()


def test_modules_listed_and_changed_on_disk(voltd, tmp_path):  # noqa: F811
    mine = tmp_path / "mods"
    mine.mkdir()
    shutil.copy(os.path.join(MODDIR, "pool.so"), mine / "pool.so")
    path = tmp_path / "voltd.conf"
    path.write_text("[modules]\ndir = %s\n[module.pool]\n" % mine)
    d = voltd("-c", str(path))
    check = validator(d)
    r = check(ctl(d, "modules"))
    assert r["abi"] == "1.0"
    mods = {m["name"]: m for m in r["modules"]}
    assert list(mods) == ["voltd", "pool"], r
    v, p = mods["voltd"], mods["pool"]
    assert v["builtin"] and v["file"] == "(built in)" and v["build_id"] is None, v
    assert [k["name"] for k in v["kinds"]][:2] == ["echo", "spin"], v
    assert not p["builtin"] and p["file"] == str(mine / "pool.so") and p["version"] == "1.0", p
    assert p["abi"] == "1.0" and p["abi_oldest"] == "1.0" and re.match(r"^[0-9a-f]{16,}$", p["build_id"]), p
    # the build id is the file's NT_GNU_BUILD_ID note, as readelf shows it
    if shutil.which("readelf"):
        n = subprocess.run(["readelf", "-n", str(mine / "pool.so")], capture_output=True, text=True).stdout
        assert p["build_id"] in n, n
    assert p["kinds"] == [
        {"name": "block", "route": "/block", "methods": "GET", "flags": ["blocking"],
         "counters": [{"name": "starts", "help": "jobs whose start ran"},
                      {"name": "finis", "help": "jobs whose fini ran"},
                      {"name": "more_steps", "help": "steps that returned MORE"}]},
        {"name": "hog", "route": "/hog", "methods": "GET", "flags": [],
         "counters": [{"name": "spins", "help": "hog steps run"}]},
        {"name": "slices", "route": "/slices", "methods": "GET", "flags": [], "counters": []}], p["kinds"]
    assert p["changed_on_disk"] is False
    t = subprocess.run([VOLTCTL, "-s", str(d.control), "modules"], capture_output=True, text=True, timeout=30)
    assert t.returncode == 0 and re.search(r"^      block\s+/block\s+GET\s+blocking\s+starts, finis, more_steps$",
                                            t.stdout, re.M), t.stdout
    # An install by rename puts another file at the path: changed on disk.
    shutil.copy(os.path.join(MODDIR, "good.so"), mine / "pool.so.new")
    os.rename(mine / "pool.so.new", mine / "pool.so")
    r = check(ctl(d, "modules"))
    assert [m["changed_on_disk"] for m in r["modules"]] == [False, True], r
    j = subprocess.run([VOLTCTL, "-s", str(d.control), "--json", "modules"], capture_output=True, text=True,
                       timeout=30)
    assert j.returncode == 0 and json.loads(j.stdout)["schema"] == "voltd.modules.v1"
    # The blocking pool still serves from the mapping it loaded.
    assert request(d.port, "GET", "/block?ms=1").status == 200
    stop(d)
