# SPDX-License-Identifier: MIT
"""voltd's command line and lifecycle: -V/--version, -h/--help (voltctl's
too), -t/-T on good and bad files,
-s overrides, and a foreground daemon stopped by signals."""
import os
import re
import signal
import subprocess

import pytest

from conftest import BUILDDIR, SRCDIR, run_voltd

EX_CONFIG = 78


def write(tmp_path, text, name="voltd.conf"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("opt", ["-V", "--version"])
def test_version_lists_features(opt):
    r = run_voltd(opt)
    assert r.returncode == 0 and r.stderr == ""
    assert re.match(r"voltd \d+\.\d+\.\d+\n", r.stdout)
    assert "io_uring" in r.stdout and "libev" in r.stdout and "systemd" in r.stdout


@pytest.mark.parametrize("opt", ["-h", "--help"])
def test_help(opt):
    r = run_voltd(opt)
    assert r.returncode == 0 and r.stderr == "" and r.stdout.startswith("usage: voltd")
    assert "--help" in r.stdout and "--version" in r.stdout


@pytest.mark.parametrize("opt", ["-h", "--help", "-V", "--version"])
def test_voltctl_help_and_version(opt):
    r = subprocess.run([os.path.join(BUILDDIR, "voltctl"), opt], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0 and r.stderr == "", r
    if opt in ("-h", "--help"):
        assert r.stdout.startswith("usage: voltctl") and "--version" in r.stdout
    else:
        assert re.fullmatch(r"voltctl \d+\.\d+\.\d+\n", r.stdout), r.stdout


def test_bad_option():
    r = run_voltd("-x")
    assert r.returncode == 64 and "usage: voltd" in r.stderr
    r = run_voltd("stray")
    assert r.returncode == 64 and "unexpected argument 'stray'" in r.stderr


def test_shipped_config_is_valid():
    r = run_voltd("-t", "-c", os.path.join(SRCDIR, "conf", "voltd.conf"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("configuration OK")


def test_good_file(tmp_path):
    path = write(tmp_path, "[scheduler]\nworkers = 2\n[server]\nlisten = 127.0.0.1:9999\n")
    r = run_voltd("-t", "-c", path)
    assert r.returncode == 0
    assert r.stdout == "configuration OK: %s\n" % path


def test_dump_shows_effective_values(tmp_path):
    path = write(tmp_path, "[scheduler]\nworkers = 2\n")
    r = run_voltd("-T", "-c", path, "-s", "scheduler.budget=99")
    assert r.returncode == 0, r.stderr
    assert "[scheduler]\nworkers = 2\n" in r.stdout
    assert "budget = 99\n" in r.stdout
    assert "listen = 127.0.0.1:8080\n" in r.stdout


def check_bad(tmp_path, text, expected):
    path = write(tmp_path, text)
    r = run_voltd("-t", "-c", path)
    assert r.returncode == EX_CONFIG, (r.stdout, r.stderr)
    assert expected % {"f": path} in r.stderr, r.stderr
    assert "configuration OK" not in r.stdout


def test_unknown_key(tmp_path):
    check_bad(tmp_path, "[scheduler]\nworkrs = 2\n",
              "%(f)s:2: scheduler.workrs: unknown key (did you mean scheduler.workers?)")


def test_unknown_section(tmp_path):
    check_bad(tmp_path, "[sever]\nbacklog = 2\n", "%(f)s:2: sever.backlog: unknown section [sever] (did you mean [server]?)")


def test_duplicate_key(tmp_path):
    check_bad(tmp_path, "[io]\nbackend = uring\nbackend = libev\n",
              "%(f)s:3: io.backend: duplicate key (first set on line 2)")


def test_bad_type(tmp_path):
    check_bad(tmp_path, "[scheduler]\nstealing = sometimes\n",
              "%(f)s:2: scheduler.stealing: 'sometimes' is not a boolean (use on or off)")


def test_out_of_bounds(tmp_path):
    check_bad(tmp_path, "[scheduler]\nbudget = 5000\n",
              "%(f)s:2: scheduler.budget: 5000 is out of bounds [1, 4096]")


def test_cross_key_rule(tmp_path):
    check_bad(tmp_path, "[scheduler]\nglobal_interval_min = 9\nglobal_interval_max = 8\n",
              "%(f)s: scheduler.global_interval_min: 9 is greater than scheduler.global_interval_max (8)")


def test_every_error_is_reported(tmp_path):
    path = write(tmp_path, "[scheduler]\nworkers = 0\nbudget = x\n[nope]\nk = 1\n")
    r = run_voltd("-t", "-c", path)
    assert r.returncode == EX_CONFIG
    lines = r.stderr.strip().split("\n")
    assert [l.split(": ")[0] for l in lines] == ["%s:2" % path, "%s:3" % path, "%s:5" % path]


def test_missing_explicit_file(tmp_path):
    r = run_voltd("-t", "-c", str(tmp_path / "absent.conf"))
    assert r.returncode == EX_CONFIG
    assert "absent.conf: cannot open: No such file or directory" in r.stderr


def test_override_error(tmp_path):
    path = write(tmp_path, "")
    r = run_voltd("-t", "-c", path, "-s", "scheduler.budget=0")
    assert r.returncode == EX_CONFIG
    assert "-s: scheduler.budget: 0 is out of bounds [1, 4096]" in r.stderr
    r = run_voltd("-t", "-c", path, "-s", "scheduler.global_interval_min=200", "-s", "scheduler.global_interval_max=100")
    assert r.returncode == EX_CONFIG
    assert "scheduler.global_interval_min: 200 is greater than" in r.stderr


def test_bad_config_does_not_start(tmp_path):
    path = write(tmp_path, "[server]\nlisten = nowhere\n")
    r = run_voltd("-f", "-c", path, timeout=10)
    assert r.returncode == EX_CONFIG
    assert "server.listen: 'nowhere' is not an address:port" in r.stderr


@pytest.mark.parametrize("mode", ["-t", "-f"])
def test_config_errors_reach_the_journal_at_err(tmp_path, mode):
    """Under systemd (JOURNAL_STREAM set: stderr is the journal) the errors
    of ExecStartPre=voltd -t and of ExecStart= carry the <3> prefix, so
    `journalctl -p err` shows why the service failed; on a terminal they
    stay plain file:line: key: problem lines."""
    path = write(tmp_path, "[scheduler]\nworkrs = 3\n[log]\nlevel = verbose\n")
    r = run_voltd(mode, "-c", path, env=dict(os.environ, JOURNAL_STREAM="8:1"), timeout=10)
    assert r.returncode == EX_CONFIG, (r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and all(line.startswith("<3>%s:" % path) for line in lines), lines
    env = {k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}
    r = run_voltd(mode, "-c", path, env=env, timeout=10)
    assert r.returncode == EX_CONFIG and r.stderr.startswith(path + ":2: scheduler.workrs"), r.stderr


def test_foreground_stops_on_sigterm(daemon, tmp_path):
    d = daemon("-c", write(tmp_path, ""))
    assert d.proc.poll() is None
    assert d.stop(signal.SIGTERM) == 0
    assert "Terminated received, stopping" in d.log()
    assert "voltd stopped" in d.log()


def test_foreground_stops_on_sigint(daemon, tmp_path):
    d = daemon("-c", write(tmp_path, ""))
    assert d.stop(signal.SIGINT) == 0
    assert "Interrupt received, stopping" in d.log()


def test_debug_logs_effective_config(daemon, tmp_path):
    d = daemon("-c", write(tmp_path, "[log]\nlevel = debug\n"), "-s", "scheduler.workers=2")
    log = d.log()
    assert "effective configuration:" in log
    assert "workers = 2" in log
    assert "level = debug" in log


def test_sighup_keeps_running_config_on_error(daemon, tmp_path):
    path = write(tmp_path, "[log]\nlevel = info\n")
    d = daemon("-c", path)
    write(tmp_path, "[log]\nlevel = shouting\n")
    d.proc.send_signal(signal.SIGHUP)
    d.wait_log("keeping the running configuration")
    assert "log.level: 'shouting' is not one of" in d.log()
    write(tmp_path, "[log]\nlevel = debug\n")
    d.proc.send_signal(signal.SIGHUP)
    d.wait_log("reload: configuration re-read")
    assert d.proc.poll() is None
    assert d.stop() == 0


def test_no_file_runs_with_the_schema_defaults():
    """With no configuration file, -T prints exactly the schema's defaults
    (src/voltd/cfg_schema.c), read here from conf/voltd.conf, which voltd-schema
    renders from the schema (tests/doc/test_schema_docs.sh fails on any
    drift): every key commented out with its default, in schema order. The
    layers' config structs are embedded in struct vcfg and handed to
    vrt_new / vio_new / vsrv_new as they are, so these are the values the
    daemon runs with."""
    r = run_voltd("-T")
    if "(embedded defaults)" not in r.stdout:
        pytest.skip("a default configuration file exists on this machine: %s" % r.stdout.splitlines()[-1:])
    assert r.returncode == 0, r.stderr
    want = []
    with open(os.path.join(SRCDIR, "conf", "voltd.conf")) as f:
        for line in f:
            m = re.match(r"^\[(\w+)\]$|^#(\w+) = (.*)$", line.rstrip("\n"))
            if m and m.group(1):
                want += ([""] if want else []) + ["[%s]" % m.group(1)]
            elif m:
                want.append("%s = %s" % (m.group(2), m.group(3)))
    assert len(want) > 30, "keys not found in conf/voltd.conf"
    want.append("configuration OK (embedded defaults)")
    got = r.stdout.splitlines()
    # A default the build chooses (modules.dir: configure's moduledir) is
    # written as its variable in the sample: -T gives the path.
    for i, w in enumerate(want):
        if "$(" in w and i < len(got) and got[i].startswith(w.split("$(")[0] + "/"):
            want[i] = got[i]
    assert got == want


def test_check_resolves_groups_and_rejects_clashing_addresses(tmp_path):
    """D14: -t (the unit's ExecStartPre=) fails on what would stop the
    start: a group that does not exist, two listeners on one address."""
    check_bad(tmp_path, "[control]\ngroup = nosuchgroup-voltd\n",
              "%(f)s:2: control.group: no group 'nosuchgroup-voltd' on this machine")
    check_bad(tmp_path, "[control]\noperator_group = nosuchgroup-voltd\n",
              "%(f)s:2: control.operator_group: no group 'nosuchgroup-voltd' on this machine")
    check_bad(tmp_path, "[server]\nlisten = 127.0.0.1:19041\n[control]\nmetrics_listen = 127.0.0.1:19041\n",
              "%(f)s:4: control.metrics_listen: 127.0.0.1:19041 overlaps server.listen = 127.0.0.1:19041 "
              "(%(f)s:2): both cannot listen")
    check_bad(tmp_path, "[server]\nlisten = 0.0.0.0:19041\nagent_listen = [::]:19041\n",
              "%(f)s:3: server.agent_listen: [::]:19041 overlaps server.listen = 0.0.0.0:19041")
    ok = write(tmp_path, "[server]\nlisten = 127.0.0.1:19041\nagent_listen = 127.0.0.2:19041\n"
                         "[control]\nmetrics_listen = 127.0.0.1:19042\n", name="ok.conf")
    r = run_voltd("-t", "-c", ok)
    assert r.returncode == 0, r.stderr


def test_a_second_voltd_on_the_same_port_is_refused(daemon, tmp_path):
    """D13: voltd's per-worker SO_REUSEPORT listeners would let a second
    voltd of the same user share the port silently; it must refuse to
    start instead, naming the address."""
    a = daemon("-s", "scheduler.workers=2")
    r = run_voltd("-f", "-c", "/dev/null", "-s", "scheduler.workers=2", "-s", "server.listen=127.0.0.1:%d" % a.port,
                  "-s", "control.socket=%s" % (tmp_path / "second.sock"), cwd=tmp_path, timeout=20)
    assert r.returncode == 69, (r.returncode, r.stderr)
    assert "server.listen: 127.0.0.1:%d: another socket listens there already" % a.port in r.stderr, r.stderr
    assert a.proc.poll() is None


@pytest.mark.parametrize("sig", [signal.SIGUSR1, signal.SIGUSR2], ids=["usr1", "usr2"])
def test_usr1_and_usr2_do_not_stop_voltd(daemon, sig):
    """D10: SIGUSR1/SIGUSR2 mean something to HAProxy and nginx users but
    nothing to voltd: logged and ignored, never a stop without a drain."""
    from httputil import request
    d = daemon("-s", "scheduler.workers=2")
    d.proc.send_signal(sig)
    d.wait_log("%s from pid %d ignored" % (signal.strsignal(sig), os.getpid()))
    assert d.proc.poll() is None
    assert request(d.port, "GET", "/healthz").status == 200
    assert d.stop() == 0


def test_low_nofile_limit_is_raised_or_reported(daemon):
    """D9: server.max_connections needs that many descriptors and more: a
    soft RLIMIT_NOFILE below it is raised up to the hard limit; a hard limit
    below it is reported at start."""
    import resource

    def limit(soft, hard):
        return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 2000:
        pytest.skip("RLIMIT_NOFILE hard limit below 2000 here")
    d = daemon("-s", "scheduler.workers=2", "-s", "server.max_connections=1000", preexec=limit(256, 2000))
    d.wait_log("RLIMIT_NOFILE: soft limit raised from 256 to")
    soft = [ln for ln in open("/proc/%d/limits" % d.proc.pid) if ln.startswith("Max open files")][0].split()[3]
    assert 1000 < int(soft) <= 2000, soft
    assert d.stop() == 0
    d = daemon("-s", "scheduler.workers=2", "-s", "server.max_connections=1000", preexec=limit(256, 256))
    d.wait_log("RLIMIT_NOFILE is 256 (hard limit 256): server.max_connections = 1000 needs about")
