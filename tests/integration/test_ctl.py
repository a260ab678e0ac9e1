# SPDX-License-Identifier: MIT
"""The control socket: every command and its reply schema, permission
levels (as root, as uid 65534, as a member of control.operator_group),
config provenance, set (all or none), reload, drain, the socket's life
(stale file replaced, a live voltd refused)."""
import grp
import json
import os
import re
import socket
import subprocess
import time
import urllib.request

import pytest

from conftest import BUILDDIR, VOLTD, free_port
from ctlutil import Ctl, ctl, ctl_as, shared, validator  # noqa: F401 (fixture)
from httputil import Reader, bound, connect, req_bytes, request

NOBODY = 65534


def test_every_command_as_admin_matches_its_schema(daemon):
    d = daemon("-s", "scheduler.workers=2")
    check = validator(d)
    assert request(d.port, "POST", "/v1/echo", body=b"hi").status == 200
    with Ctl(d.control) as c:
        for cmd in ["ping", "version", "help", "stats", "stats workers", "stats server", "stats kinds",
                    "metrics", "hist echo", "hist sched", "hist poll 0", "stats runtime", "config", "config scheduler.budget log.level", "schema",
                    "set scheduler.budget 100", "clear counters", "stats", "reload", "drain", "undrain",
                    "trace 8", "trace dump", "trace dump 3", "trace 0", "trace", "modules", "hist blocking_wait",
                    "clear quarantine"]:
            r = check(c.cmd(cmd))
            assert r["ok"] is True, (cmd, r)
        # one reply per command, errors included, on the same connection
        for cmd, code in [("bogus", "unknown_command"), ("stats nope", "invalid"), ("hist nope", "invalid"), ("hist sched 99", "invalid"), ("hist poll x", "usage"),
                          ("set scheduler.budget", "usage"), ("config no.such", "invalid"),
                          ("", "usage"), ("clear everything", "usage")]:
            r = check(c.cmd(cmd))
            assert r["ok"] is False and r["code"] == code, (cmd, r)
        assert c.cmd("ping")["ok"]
    # every command the table knows is listed by help, with its level
    names = {x["name"]: x["level"] for x in ctl(d, "help")["commands"]}
    assert names == {"ping": "user", "version": "user", "help": "user", "stats": "user", "metrics": "user",
                     "hist": "user", "config": "user", "schema": "user", "set": "operator",
                     "clear": "operator", "trace": "operator", "reload": "admin", "drain": "admin",
                     "undrain": "admin", "modules": "user"}
    # each reply kind has a schema
    assert set(check.schemas) >= {"voltd.%s.v1" % n for n in
                                  ["error", "pong", "version", "help", "stats", "metrics", "hist", "config",
                                   "schema", "set", "clear", "reload", "drain", "trace", "modules"]}


def test_usage_errors_come_from_the_help_table(daemon):
    """A command's usage is written once, in its row: help shows it, and a
    line with words the command does not take gets exactly it (issue 21;
    the handlers' own strings differed, and ping, version, help and schema
    ignored extra words)."""
    d = daemon()
    rows = ctl(d, "help")["commands"]
    lines = {"hist": ["hist"], "set": ["set", "set scheduler.budget", "set a b c"],
             "clear": ["clear", "clear everything", "clear counters now"], "stats": ["stats a b"]}
    with Ctl(d.control) as c:
        for row in rows:
            if row["name"] == "config":  # takes any number of keys; an unknown one is "invalid"
                continue
            want = "usage: " + row["name"] + (" " + row["args"] if row["args"] else "")
            for line in lines.get(row["name"], [row["name"] + " x"]):
                r = c.cmd(line)
                assert r["ok"] is False and r["code"] == "usage" and r["error"] == want, (line, r)
        assert c.cmd("ping")["ok"]


def test_user_reads_but_cannot_change(daemon, shared):
    sock = os.path.join(shared, "control.sock")
    d = daemon("-s", "control.socket=" + sock, "-s", "control.mode=0666")
    d.control = sock
    check = validator(d)
    before = ctl(d, "config scheduler.budget")["keys"][0]
    replies = ctl_as(NOBODY, NOBODY, sock, "ping", "version", "stats", "config", "metrics", "hist sched",
                     "hist healthz", "schema", "modules", "help",
                     "set scheduler.budget 7", "clear counters", "clear quarantine", "reload", "drain", "undrain")
    for r in replies[:10]:
        assert check(r)["ok"] is True, r
    assert replies[9]["level"] == "user"
    for r, need in zip(replies[10:], ["operator", "operator", "operator", "admin", "admin", "admin"]):
        check(r)
        assert r["ok"] is False and r["code"] == "permission" and r["need"] == need, r
        assert r["level"] == "user"
    assert ctl(d, "config scheduler.budget")["keys"][0] == before
    assert ctl(d, "stats control")["control"]["denied"] == 6
    assert ctl(d, "stats")["cleared"] is False


def test_operator_group_may_set_but_not_reload(daemon, shared):
    try:
        g = grp.getgrnam("users")
    except KeyError:
        pytest.skip("no group 'users' on this machine")
    sock = os.path.join(shared, "control.sock")
    d = daemon("-s", "control.socket=" + sock, "-s", "control.mode=0666", "-s", "control.operator_group=users")
    d.control = sock
    check = validator(d)
    replies = ctl_as(NOBODY, g.gr_gid, sock, "help", "set scheduler.budget 7 log.level debug", "clear counters",
                     "reload", "drain")
    assert check(replies[0])["level"] == "operator"
    assert check(replies[1])["ok"] is True, replies[1]
    assert check(replies[2])["ok"] is True
    for r in replies[3:]:
        assert check(r)["code"] == "permission" and r["need"] == "admin", r
    k = {x["key"]: x for x in ctl(d, "config scheduler.budget log.level")["keys"]}
    assert k["scheduler.budget"]["value"] == "7" and k["scheduler.budget"]["source"] == "set"
    assert k["log.level"]["value"] == "debug"
    # a user (not in the group) is still only a user
    assert ctl_as(NOBODY, NOBODY, sock, "help")[0]["level"] == "user"


def test_no_file_runs_with_the_schema_values(daemon):
    """Issue 9: without a file every key has its schema default (through -T
    and through `config`), except what -s set; sources say so."""
    d = daemon("-s", "scheduler.workers=2")
    keys = ctl(d, "config")["keys"]
    dump = subprocess.run([VOLTD, "-T", "-c", "/nonexistent/voltd.conf"], capture_output=True, text=True)
    assert len(keys) > 30
    overridden = {"server.listen", "control.socket", "scheduler.workers"}
    for k in keys:
        if k["key"] in overridden:
            assert k["source"] == "-s", k
            continue
        assert k["source"] == "default", k
        if k["default"] == "auto" and k["value"] != "auto":
            assert k["value"].isdigit(), k  # a count resolved at start
        else:
            assert k["value"] == k["default"], k
        assert k["apply"] in ("live", "reload", "restart")
    live = {k["key"] for k in keys if k["apply"] == "live"}
    assert {"scheduler.stealing", "scheduler.budget", "log.level"} <= live
    assert "io.backend" not in live
    reload = {k["key"] for k in keys if k["apply"] == "reload"}
    assert reload == {"control.operator_group", "control.max_clients", "control.metrics_max_clients",
                      "control.client_timeout_ms"}
    # -T of a missing default file is an error; without -c it prints the schema's values
    r = subprocess.run([VOLTD, "-T"], capture_output=True, text=True, env=dict(os.environ))
    if r.returncode == 0 and "embedded defaults" in r.stdout:
        for k in keys:
            if k["key"] not in overridden and k["default"] != "auto":
                assert "%s = %s\n" % (k["key"].split(".")[1], k["value"]) in r.stdout, k
    assert dump.returncode == 78


def test_config_sources_file_line_and_set(daemon, tmp_path):
    conf = tmp_path / "v.conf"
    conf.write_text("[scheduler]\n\nbudget = 99\n[log]\nlevel = notice\n")
    d = daemon("-c", str(conf))
    k = {x["key"]: x for x in ctl(d, "config scheduler.budget log.level server.listen io.backend")["keys"]}
    assert k["scheduler.budget"]["source"] == "%s:3" % conf and k["scheduler.budget"]["value"] == "99"
    assert k["log.level"]["source"] == "%s:5" % conf
    assert k["server.listen"]["source"] == "-s"
    assert k["io.backend"]["source"] == "default" and k["io.backend"]["apply"] == "restart"
    r = ctl(d, "set scheduler.budget 50")
    assert r["keys"][0]["source"] == "set" and r["keys"][0]["value"] == "50"


def test_set_is_all_or_nothing(daemon):
    d = daemon()
    before = ctl(d, "config")["keys"]
    for bad in ["set scheduler.budget 64 scheduler.lifo_poll_cap 99",     # second out of bounds
                "set scheduler.budget 64 io.backend libev",               # restart-only key
                "set scheduler.budget 64 no.such 1",                      # unknown key
                "set scheduler.stealing sometimes",                       # not a boolean
                "set scheduler.global_interval_min 200"]:                 # min > max (255)? no: cross-key below
        r = ctl(d, bad)
        if bad.endswith("200"):
            continue
        assert r["ok"] is False and r["code"] == "invalid" and r["errors"], (bad, r)
    r = ctl(d, "set scheduler.global_interval_max 10 scheduler.global_interval_min 20")
    assert r["ok"] is False and "greater than" in r["error"], r
    after = ctl(d, "config")["keys"]
    changed = [a for a, b in zip(before, after) if a != b and a["key"] != "scheduler.global_interval_min"]
    assert not changed, changed
    ctl(d, "set scheduler.global_interval_min 8")
    r = ctl(d, "set scheduler.budget 64 scheduler.lifo_poll_cap 4 log.level debug")
    assert r["ok"] and [k["value"] for k in r["keys"]] == ["64", "4", "debug"], r
    d.wait_log("control: set log.level = debug")


def test_reload_reports_changes_restart_keys_and_errors(daemon, tmp_path):
    conf = tmp_path / "v.conf"
    conf.write_text("[scheduler]\nbudget = 99\n")
    d = daemon("-c", str(conf))
    conf.write_text("[scheduler]\nbudget = 77\nglobal_batch_max = 32\n[control]\nmax_clients = 3\n"
                    "[log]\nlevel = debug\n")
    r = ctl(d, "reload")
    assert r["ok"], r
    assert sorted(r["changed"]) == ["control.max_clients", "log.level", "scheduler.budget"], r
    assert r["restart_needed"] == ["scheduler.global_batch_max"], r
    k = {x["key"]: x for x in ctl(d, "config scheduler.budget scheduler.global_batch_max")["keys"]}
    assert k["scheduler.budget"]["value"] == "77" and k["scheduler.budget"]["source"] == "%s:2" % conf
    assert k["scheduler.global_batch_max"]["value"] == "64"  # not applied: restart only
    # control.max_clients = 3 applies at once (a reload-only key): as root
    # (2 admin slots more) a 6th connection is refused
    held = [Ctl(d.control) for _ in range(3 + 2)]
    with Ctl(d.control) as c:
        assert json.loads(c.line())["code"] == "busy"
    for c in held:
        c.close()
    time.sleep(0.2)
    # set refuses reload-only keys; an unknown operator group rejects the file
    r = ctl(d, "set control.max_clients 10")
    assert r["ok"] is False and "reload only" in r["error"], r
    conf.write_text("[control]\noperator_group = no-such-group-here\n")
    r = ctl(d, "reload")
    assert r["ok"] is False and any("no-such-group-here" in e for e in r["errors"]), r
    assert ctl(d, "config control.max_clients")["keys"][0]["value"] == "3"
    conf.write_text("[scheduler]\nbudget = 12\nbudgte = 3\nstealing = maybe\n")
    r = ctl(d, "reload")
    assert r["ok"] is False and r["code"] == "invalid", r
    assert any("%s:3: scheduler.budgte: unknown key" % conf in e for e in r["errors"]), r
    assert any("%s:4: scheduler.stealing" % conf in e for e in r["errors"]), r
    assert ctl(d, "config scheduler.budget")["keys"][0]["value"] == "77"


def test_stale_socket_replaced_live_one_refused(daemon, tmp_path):
    sock = tmp_path / "sub" / "dir" / "control.sock"
    # a stale socket file: bound, then its process is gone
    os.makedirs(sock.parent)
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock))
    s.close()
    d = daemon("-s", "control.socket=%s" % sock)
    d.control = sock
    assert "replaced the stale socket" in d.log()
    assert ctl(d, "ping")["ok"]
    assert oct(os.stat(sock).st_mode & 0o777) == "0o660"
    assert os.stat(sock).st_gid == os.getegid()  # control.group = none keeps voltd's group
    # a second voltd on the same socket refuses to start
    r = subprocess.run([VOLTD, "-f", "-s", "server.listen=127.0.0.1:%d" % free_port(),
                        "-s", "control.socket=%s" % sock], capture_output=True, text=True, timeout=20)
    assert r.returncode == 69, r.stderr
    assert "another voltd is answering on it" in r.stderr, r.stderr
    assert ctl(d, "ping")["pid"] == d.proc.pid


def test_set_a_request_timeout_takes_effect(daemon):
    """server.header_timeout_ms is read per request: after `set`, a client
    that stops in the middle of its head gets its 408 after the new bound."""
    d = daemon()
    r = ctl(d, "set server.header_timeout_ms 300 stages.retry_after_s 7")
    assert r["ok"] and [k["apply"] for k in r["keys"]] == ["live", "live"], r
    s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
    t0 = time.monotonic()
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    elapsed = time.monotonic() - t0
    s.close()
    assert data.startswith(b"HTTP/1.1 408"), data
    # The live value, not the default: with 10 s (the default) no 408 could
    # come before 10 s; not before 300 ms either. How soon is a figure.
    assert 0.25 < elapsed < 10, elapsed
    bound("test_ctl", "live_header_timeout_408_s", elapsed, "<", 1.0)


def test_socket_mode_and_group(daemon, tmp_path):
    try:
        g = grp.getgrnam("users")
    except KeyError:
        pytest.skip("no group 'users' on this machine")
    sock = tmp_path / "control.sock"
    d = daemon("-s", "control.mode=0640", "-s", "control.group=users")
    st = os.stat(sock)
    assert oct(st.st_mode & 0o777) == "0o640" and st.st_gid == g.gr_gid
    assert ctl(d, "ping")["ok"]


def test_set_a_job_limit_takes_effect(daemon):
    d = daemon()
    assert request(d.port, "GET", "/v1/spin?n=1000").status == 200
    r = ctl(d, "set jobs.spin_max_n 100")
    assert r["ok"] and r["keys"][0]["apply"] == "live", r
    assert request(d.port, "GET", "/v1/spin?n=1000").status == 400
    assert request(d.port, "GET", "/v1/spin?n=100").status == 200


def test_a_reply_is_ok_only_when_the_command_ran(daemon):
    """D4: long or invalid UTF-8 in a command never turns into "ok":true:
    every reply is valid JSON matching its schema; arguments that are not
    UTF-8 are refused naming their position; long error texts are cut at a
    character boundary; nothing changes."""
    d = daemon()
    check = validator(d)
    e300 = "é".encode() * 300
    with Ctl(d.control) as c:
        for line, code, pos in [(b"stats \xff", "invalid", 2), (b"config \xc3", "invalid", 2),
                                (b"hist \xe2\x82", "invalid", 2), (b"set log.level \xff\xfe", "invalid", 3),
                                (b"\xc3\x28 x", "invalid", 1)]:
            c.sock.sendall(line + b"\n")
            r = check(json.loads(c.line().decode("utf-8")))
            assert r["ok"] is False and r["code"] == code and "argument %d" % pos in r["error"], (line, r)
        # valid UTF-8 that makes long error texts (cut at 512 bytes before)
        c.sock.sendall(b"set log.level x" + e300 + b"\n")
        r = check(json.loads(c.line().decode("utf-8")))
        assert r["ok"] is False and r["code"] == "invalid" and r["errors"], r
        c.sock.sendall(b"a" * 63 + "é".encode() + b"\n")
        r = check(json.loads(c.line().decode("utf-8")))
        assert r["ok"] is False and r["code"] == "unknown_command", r
        c.sock.sendall(b"config " + e300 + b"\n")
        r = check(json.loads(c.line().decode("utf-8")))
        assert r["ok"] is False and r["code"] == "invalid", r
    assert ctl(d, "config log.level")["keys"][0]["value"] == "info"


def test_stall_warn_ms_cannot_be_turned_on_live_when_the_monitor_is_off(daemon, tmp_path):
    """D12: with the monitor off at start, `set control.stall_warn_ms N`
    is refused (it needs a restart) and a reload lists it under
    restart_needed; `config` keeps showing the effective 0. With the
    monitor on, the value changes live."""
    conf = tmp_path / "v.conf"
    conf.write_text("[control]\nstall_warn_ms = 0\n")
    d = daemon("-c", str(conf))
    r = ctl(d, "set control.stall_warn_ms 100")
    assert r["ok"] is False and r["code"] == "invalid" and "restart" in r["error"], r
    assert ctl(d, "set control.stall_warn_ms 0")["ok"]  # off stays off: fine
    conf.write_text("[control]\nstall_warn_ms = 250\n")
    r = ctl(d, "reload")
    assert r["ok"] and "control.stall_warn_ms" in r["restart_needed"] and "control.stall_warn_ms" not in r["changed"], r
    assert ctl(d, "config control.stall_warn_ms")["keys"][0]["value"] == "0"
    assert d.stop() == 0
    d2 = daemon("-s", "control.stall_warn_ms=100")
    assert ctl(d2, "set control.stall_warn_ms 300")["ok"]
    assert ctl(d2, "config control.stall_warn_ms")["keys"][0]["value"] == "300"


def test_drain_shows_in_stats_metrics_and_top(daemon):
    """D5: `drain` is visible to an operator who looks: stats server
    (draining 1, stopping 0), voltd_server_draining on both Prometheus
    outputs, and top's header; undrain clears all three."""
    mport = free_port()
    d = daemon("-s", "control.metrics_listen=127.0.0.1:%d" % mport)
    top = [os.path.join(BUILDDIR, "voltctl"), "-s", str(d.control), "top", "-b", "-n", "1"]

    def scrape():
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mport, timeout=10) as r:
            return r.read().decode()

    def seen(on):
        srv = ctl(d, "stats server")["server"]
        assert srv["draining"] == on and srv["stopping"] == 0, srv
        pong = ctl(d, "ping")
        assert pong["state"] == ("draining" if on else "ready"), pong
        for text in (ctl(d, "metrics")["text"], scrape()):
            assert "\nvoltd_server_draining %d\n" % on in text, text
        out = subprocess.run(top, capture_output=True, text=True, timeout=30).stdout
        assert ("DRAINING" in out.splitlines()[1]) == bool(on), out
    seen(0)
    assert ctl(d, "drain")["ok"]
    seen(1)
    assert ctl(d, "undrain")["ok"]
    seen(0)


def test_every_change_is_audited_whatever_the_log_level(daemon, shared):
    """D7: each command that changes something (set, clear, reload, drain,
    undrain), refused ones included, logs an audit line naming the caller's
    uid, pid and level; `set log.level err` cannot silence it."""
    sock = os.path.join(shared, "control.sock")
    d = daemon("-s", "control.socket=" + sock, "-s", "control.mode=0666")
    d.control = sock
    with Ctl(sock) as c:
        for cmd in ["set log.level err", "set scheduler.budget 100", "clear counters", "reload", "drain",
                    "undrain", "set scheduler.budget 0", "stats", "ping"]:
            c.cmd(cmd)
    ctl_as(NOBODY, NOBODY, sock, "set log.level debug", "drain")
    me = "uid=0 pid=%d level=admin" % os.getpid()
    deadline = time.monotonic() + 10
    want = ["audit: %s: set log.level err: ok" % me, "audit: %s: set scheduler.budget 100: ok" % me,
            "audit: %s: clear counters: ok" % me, "audit: %s: reload: ok" % me, "audit: %s: drain: ok" % me,
            "audit: %s: undrain: ok" % me, "audit: %s: set scheduler.budget 0: invalid" % me]
    while not all(w in d.log() for w in want):
        assert time.monotonic() < deadline, (want, d.log())
        time.sleep(0.05)
    log = d.log()
    assert re.search(r"audit: uid=65534 pid=\d+ level=user: set log\.level debug: permission", log), log
    assert re.search(r"audit: uid=65534 pid=\d+ level=user: drain: permission", log), log
    assert "audit: " + me + ": stats" not in log and ": ping:" not in log  # reads are not audited
    # the level did silence the ordinary notice of the same set
    assert "control: set scheduler.budget = 100" not in log, log


def test_stats_say_when_they_were_taken_and_cleared(daemon):
    """D16: stats carry the time of the snapshot and, after `clear
    counters`, when the counters were cleared (Unix seconds), so rates can
    be computed from two replies."""
    t0 = int(time.time())
    d = daemon()
    r = ctl(d, "stats runtime")
    assert r["cleared"] is False and "cleared_at" not in r, r
    assert t0 - 1 <= r["time"] <= time.time() + 1, r
    assert ctl(d, "clear counters")["ok"]
    r = validator(d)(ctl(d, "stats runtime"))
    assert r["cleared"] is True and t0 - 1 <= r["cleared_at"] <= r["time"] <= time.time() + 1, r


def test_global_interval_is_in_its_range_from_the_start(daemon):
    """D16: a worker that has not adapted its global interval yet shows the
    value it uses (within global_interval_min..max), not 0."""
    d = daemon("-s", "scheduler.workers=2", "-s", "scheduler.global_interval_min=3",
               "-s", "scheduler.global_interval_max=40")
    for w in ctl(d, "stats workers")["workers"]:
        assert 3 <= w["global_interval"] <= 40, w


def test_healthz_latency_is_recorded(daemon):
    """D16: a response the parse stage sends at once (/healthz) and whose
    send completes without waking its task was dated by the start of the
    task's poll, before the request was parsed: every healthz latency read
    exactly 0. It is the time from the parse to the send's submission."""
    d = daemon()
    s = connect(d.port)  # keep-alive: the quiet send path
    try:
        rd = Reader(s)
        for _ in range(50):
            s.sendall(req_bytes("GET", "/healthz"))
            assert rd.response().status == 200
    finally:
        s.close()
    # A response is counted when its send completes, which the worker may
    # reap after the client has read it: wait for the last one (bounded).
    deadline = time.monotonic() + 10
    while True:
        lat = ctl(d, "stats kinds")["kinds"]["healthz"]["latency"]
        if lat["count"] >= 50 or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert lat["count"] >= 50, lat
    assert lat["sum_seconds"] > 0 and lat["max_seconds"] > 0, lat
