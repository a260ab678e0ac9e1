# SPDX-License-Identifier: MIT
"""The systemd notification protocol, seen from a stand-in notify socket:
READY once serving, STATUS refreshed every few seconds, WATCHDOG=1 at half
of WATCHDOG_USEC, RELOADING=1 (with MONOTONIC_USEC) then READY=1 around a
SIGHUP reload, STOPPING=1 at SIGTERM. Also run against the
--without-systemd build (scripts/test, build-nosd), where voltd speaks the
datagram protocol itself."""
import os
import signal
import subprocess
import time

from conftest import VOLTD
from httputil import parse_stats, check_accounting, request
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
        # half of 1 s: ~6 in 3.2 s; generous bounds for a loaded machine
        assert 4 <= pings <= 9, "%d watchdog pings in 3.2 s: %r" % (pings, n.snapshot())
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


def test_no_watchdog_without_watchdog_usec(daemon, tmp_path):
    n = NotifyListener(tmp_path / "notify.sock")
    try:
        d = daemon("-c", "/dev/null", env={"NOTIFY_SOCKET": n.path})
        n.wait("READY", "1")
        time.sleep(0.6)
        assert n.count("WATCHDOG") == 0
        assert d.stop() == 0
    finally:
        n.close()


def test_watchdog_for_another_pid_is_ignored(daemon, tmp_path):
    n = NotifyListener(tmp_path / "notify.sock")
    try:
        d = daemon("-c", "/dev/null", env={"NOTIFY_SOCKET": n.path, "WATCHDOG_USEC": "200000",
                                           "WATCHDOG_PID": "1"})
        n.wait("READY", "1")
        time.sleep(0.6)
        assert n.count("WATCHDOG") == 0
        assert d.stop() == 0
    finally:
        n.close()


def test_version_names_the_notify_implementation():
    out = subprocess.run([VOLTD, "-V"], capture_output=True, text=True, timeout=10).stdout
    assert "systemd (" in out, out
