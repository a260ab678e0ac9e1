# SPDX-License-Identifier: MIT
"""The systemd notification protocol, seen from a stand-in notify socket:
READY once serving, STATUS refreshed every few seconds, WATCHDOG=1 at half
of WATCHDOG_USEC, RELOADING=1 (with MONOTONIC_USEC) then READY=1 around a
SIGHUP reload, STOPPING=1 at SIGTERM. Also run against the
--without-systemd build (scripts/test, build-nosd), where voltd speaks the
datagram protocol itself."""
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import VOLTD
from httputil import bound, parse_stats, check_accounting, request, voltd, backend  # noqa: F401
from notifyutil import NotifyListener


def test_notify_sequence(daemon, tmp_path):
    n = NotifyListener(tmp_path / "notify.sock")
    try:
        d = daemon("-c", "/dev/null", "-s", "scheduler.workers=2",
                   env={"NOTIFY_SOCKET": n.path, "WATCHDOG_USEC": "1000000"})
        n.wait("READY", "1")
        # READY comes once the listener serves
        assert request(d.port, "GET", "/healthz").status == 200
        t0 = time.monotonic()
        time.sleep(3.2)
        pings = n.count("WATCHDOG", "1", since=t0)
        # half of 1 s: ~6 in 3.2 s. Repeated, and never more often than
        # half the interval (load can only make them fewer); the count is
        # a figure.
        assert 2 <= pings <= 9, "%d watchdog pings in 3.2 s: %r" % (pings, n.snapshot())
        bound("test_notify", "watchdog_pings_in_3.2s", pings, ">=", 5)
        statuses = [kv["STATUS"] for _, kv, _ in n.snapshot() if "STATUS" in kv]
        assert len(statuses) >= 2, statuses          # refreshed, not written once
        assert any("ready" in s and "workers" in s and "req/s" in s and "connections" in s
                   for s in statuses), statuses
        d.proc.send_signal(signal.SIGHUP)
        n.wait("READY", "1", n=2)
        reloading = [kv for _, kv, _ in n.snapshot() if "RELOADING" in kv]
        assert reloading and int(reloading[0]["MONOTONIC_USEC"]) > 0, reloading
        assert d.stop() == 0
        assert n.keys() == ["READY=1", "RELOADING=1", "READY=1", "STOPPING=1"], n.keys()
        check_accounting(parse_stats(d.log()))
        with open(tmp_path / "notify-sequence.txt", "w") as f:
            for t, _, text in n.snapshot():
                f.write("%.3f %s\n" % (t - n.snapshot()[0][0], text.replace("\n", " | ")))
    finally:
        n.close()


@pytest.mark.parametrize("wd_env", [{}, {"WATCHDOG_USEC": "200000", "WATCHDOG_PID": "1"}],
                         ids=["no_watchdog_usec", "watchdog_for_another_pid"])
def test_no_watchdog_pings_when_not_asked(daemon, tmp_path, wd_env):
    n = NotifyListener(tmp_path / "notify.sock")
    try:
        d = daemon("-c", "/dev/null", env={"NOTIFY_SOCKET": n.path, **wd_env})
        n.wait("READY", "1")
        time.sleep(0.6)
        assert n.count("WATCHDOG") == 0
        assert d.stop() == 0
    finally:
        n.close()


def test_version_names_the_notify_implementation():
    out = subprocess.run([VOLTD, "-V"], capture_output=True, text=True, timeout=10).stdout
    assert "systemd (" in out, out


def test_stalled_worker_stops_the_watchdog_and_fails_livez(voltd, tmp_path):  # noqa: F811
    """A worker busy-looping past control.stall_fail_ms (voltd-test's
    /v1/stall): WATCHDOG=trigger, no more pings, /livez 503 from the other
    worker; pings and /livez come back when the stall ends."""
    import threading
    from conftest import VOLTD_TEST
    if not os.path.exists(VOLTD_TEST):
        import pytest
        pytest.skip("voltd-test not built here")
    n = NotifyListener(tmp_path / "notify.sock")
    try:
        d = voltd("-s", "control.stall_warn_ms=100", "-s", "control.stall_fail_ms=400",
                  env={"NOTIFY_SOCKET": n.path, "WATCHDOG_USEC": "600000"}, binary=VOLTD_TEST)
        n.wait("WATCHDOG", "1", n=2)
        ended = {}

        def stall():
            request(d.port, "GET", "/v1/stall?ms=2500")
            ended["t"] = time.monotonic()

        # On a loaded machine the monitor may not see a spinning thread
        # that gets no CPU as stalled (its rule): a second stall then.
        for attempt in range(2):
            th = threading.Thread(target=stall)
            th.start()
            try:
                n.wait("WATCHDOG", "trigger", timeout=5)
                break
            except AssertionError:
                th.join(10)
                if attempt == 1:
                    raise
        t_trig = n.times("WATCHDOG", "trigger")[0]
        livez = None
        for _ in range(20):        # a connection the other worker serves
            r = request(d.port, "GET", "/livez")
            if r.status == 503:
                livez = r
                break
            time.sleep(0.05)
        assert livez is not None and livez.body == b"stalled\n", livez
        th.join(10)
        # The pings stop between the trigger and the end of the stall (at
        # 300 ms they would be 5 or more). One is tolerated: on a loaded
        # machine the monitor may lose sight of a spinning thread that gets
        # no CPU for a moment (not a stall by its rules; see
        # control.stall_warn_ms), and the fail threshold then counts again.
        pings_during = [t for t in n.times("WATCHDOG", "1") if t_trig < t < ended["t"] - 0.1]
        assert ended["t"] - t_trig > 1.0, "the stall ended too soon after the trigger to tell"
        assert len(pings_during) <= 1, (pings_during, t_trig, ended["t"])
        n.wait("WATCHDOG", "1", n=len(n.times("WATCHDOG", "1")) + 1, timeout=5)
        assert request(d.port, "GET", "/livez").status == 200
        # The line names what the worker ran: the kind, its module, version.
        assert re.search(r"stalled for \d+ ms in task exec \(stall, module voltd [^ )]+\)", d.log()), d.log()
    finally:
        n.close()


def test_extend_timeout_while_a_drain_makes_progress(daemon, tmp_path):
    """STOPPING=1 carries EXTEND_TIMEOUT_USEC for the shutdown delay; while an
    upload still arrives during the drain, EXTEND_TIMEOUT_USEC is renewed."""
    from httputil import Reader, connect
    n = NotifyListener(tmp_path / "notify.sock")
    try:
        d = daemon("-c", "/dev/null", "-s", "server.shutdown_delay_ms=300", env={"NOTIFY_SOCKET": n.path})
        n.wait("READY", "1")
        body = b"z" * 40000
        s = connect(d.port)
        s.sendall(("POST /v1/echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body)).encode())
        d.proc.send_signal(signal.SIGTERM)
        n.wait("STOPPING", "1")
        stopping = [kv for _, kv, _ in n.snapshot() if "STOPPING" in kv][0]
        assert int(stopping["EXTEND_TIMEOUT_USEC"]) >= 300000, stopping
        t_stop = n.times("STOPPING", "1")[0]
        for i in range(0, len(body), 4000):      # ~1.5 s of upload during the drain
            s.sendall(body[i:i + 4000])
            time.sleep(0.15)
        r = Reader(s).response()
        assert r.status == 200 and r.body == body
        assert d.stop() == 0
        extends = [t for t in n.times("EXTEND_TIMEOUT_USEC") if t > t_stop + 0.01]
        assert len(extends) >= 2, n.snapshot()
        assert any("connection(s) left" in kv.get("STATUS", "") for _, kv, _ in n.snapshot())
    finally:
        n.close()


def test_a_refused_reload_is_visible(daemon, tmp_path):
    """The reload contract (issue 18, F3/D6/F4): a reload whose file is
    refused keeps the running configuration and says so everywhere an
    operator looks: `voltctl reload` (the unit's ExecReload=) exits 1,
    STATUS= names the refusal until a reload is accepted, the reason is
    logged at priority err, and stats / metrics count reloads by result."""
    from conftest import BUILDDIR
    from ctlutil import ctl
    voltctl = os.path.join(BUILDDIR, "voltctl")
    conf = tmp_path / "voltd.conf"
    conf.write_text("[log]\nlevel = info\n")
    n = NotifyListener(tmp_path / "notify.sock")
    try:
        # JOURNAL_STREAM: log lines carry the sd-daemon <N> priority prefix.
        d = daemon("-c", str(conf), "-s", "scheduler.workers=2",
                   env={"NOTIFY_SOCKET": n.path, "JOURNAL_STREAM": "8:1"})
        n.wait("READY", "1")
        conf.write_text("[log]\nlevel = verbose\n")
        d.proc.send_signal(signal.SIGHUP)
        n.wait("READY", "1", n=2)
        why = "%s:2: log.level: 'verbose' is not one of" % conf
        d.wait_log("<3>reload: " + why)
        statuses = [kv["STATUS"] for _, kv, _ in n.snapshot() if "STATUS" in kv]
        assert "last reload refused: " + why in statuses[-1], statuses

        r = subprocess.run([voltctl, "-s", str(d.control), "reload"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
        assert why in r.stderr, r.stderr
        n.wait("STATUS", None, n=len(statuses) + 1)
        assert any("reload refused: " + why in kv.get("STATUS", "") for _, kv, _ in n.snapshot()[-3:])
        cfg = ctl(d, "stats config")["config"]
        assert cfg["reloads"] == {"ok": 0, "refused": 2}, cfg
        assert cfg["last_reload_refused"] == 1 and why in cfg["last_reload_error"], cfg
        metrics = ctl(d, "metrics")["text"]
        assert 'voltd_config_reloads_total{result="refused"} 2\n' in metrics, metrics[:400]
        assert "voltd_config_last_reload_refused 1\n" in metrics
        assert ctl(d, "config log.level")["keys"][0]["value"] == "info"

        conf.write_text("[log]\nlevel = notice\n")
        r = subprocess.run([voltctl, "-s", str(d.control), "reload"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
        cfg = ctl(d, "stats config")["config"]
        assert cfg["reloads"] == {"ok": 1, "refused": 2} and cfg["last_reload_refused"] == 0, cfg
        assert cfg["last_reload_error"] is None, cfg
        t0 = time.monotonic()
        n.wait("STATUS", None, n=len([m for m in n.snapshot() if "STATUS" in m[1]]) + 2)
        later = [kv["STATUS"] for t, kv, _ in n.snapshot() if t > t0 and "STATUS" in kv]
        assert later and "refused" not in later[-1], later
        assert d.stop() == 0
    finally:
        n.close()
