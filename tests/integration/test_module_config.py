# SPDX-License-Identifier: MIT
"""Modules in voltd.conf: [modules] dir and [module.NAME] through voltd -t,
voltd -T, a start, voltctl config / set and reloads, with the test module
tests/modules/cfgmod.c (a key of each type, live and restart-only, and
GET /v1/cfgmod answering their values). Each refusal names the config file
and line, the module's file, and what was expected against what was found,
and exits 78 at -t and at start; a reload that would need a module loaded,
unloaded or replaced, or a restart-only module key changed, is refused."""
import os
import re
import signal
import subprocess

import pytest

from conftest import BUILDDIR, VOLTD, free_port, run_voltd
from ctlutil import ctl
from httputil import backend, request, stop, voltd  # noqa: F401 (fixtures)

EX_CONFIG = 78
MODDIR = os.path.join(BUILDDIR, "tests", "modules")
CFGMOD = os.path.join(MODDIR, "cfgmod.so")
VOLTCTL = os.path.join(BUILDDIR, "voltctl")


def conf(tmp_path, body, name="voltd.conf"):
    """A configuration whose [modules] dir is the build's test modules."""
    p = tmp_path / name
    p.write_text("[modules]\ndir = %s\n%s" % (MODDIR, body))
    return p


def get(port, target):
    r = request(port, "GET", target)
    assert r.status == 200, r
    return r.body.decode()


def check(path, *args):
    return run_voltd("-t", "-c", str(path), *args)


def start_fails(tmp_path, path):
    """voltd -f on path: exits 78 before it is ready. Returns its output."""
    port = free_port()
    r = subprocess.run([VOLTD, "-f", "-c", str(path), "-s", "server.listen=127.0.0.1:%d" % port,
                        "-s", "control.socket=%s" % (tmp_path / "c.sock")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == EX_CONFIG, (r.returncode, r.stdout, r.stderr)
    assert not re.search(r": ready$", r.stdout + r.stderr, re.M)
    return r.stdout + r.stderr


def refused(tmp_path, body, *want):
    """voltd -t and a start both exit 78, naming each of want (the file's
    name is %(f)s in them)."""
    path = conf(tmp_path, body)
    r = check(path)
    assert r.returncode == EX_CONFIG, (r.stdout, r.stderr)
    assert "configuration OK" not in r.stdout
    out = start_fails(tmp_path, path)
    for w in want:
        w = w % {"f": path, "dir": MODDIR}
        assert w in r.stderr, (w, r.stderr)
        assert w in out, (w, out)
    return r.stderr


def test_check_opens_the_module_and_runs_its_init_as_a_check(tmp_path):
    path = conf(tmp_path, "[module.cfgmod]\nlimit = 20\n")
    r = check(path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "configuration OK: %s\n" % path
    assert "cfgmod: init (check): limit 20" in r.stdout + r.stderr


def test_dump_prints_the_module_keys_under_its_section(tmp_path):
    path = conf(tmp_path, "[module.cfgmod]\nlimit = 20\ngreeting = hi there\noffset = -7\n")
    r = run_voltd("-T", "-c", str(path), "-s", "module.cfgmod.verbose=on")
    assert r.returncode == 0, r.stderr
    want = ("[module.cfgmod]\n# The module cfgmod 1.0 (%s): its file, and the keys it declares.\n"
            "path = cfgmod.so\nlimit = 20 ; %s:4\nverbose = on ; -s\ngreeting = hi there ; %s:5\n"
            "offset = -7 ; %s:6\nfail_init = off\n" % (CFGMOD, path, path, path))
    assert want in r.stdout, r.stdout
    assert "[modules]\ndir = %s\n" % MODDIR in r.stdout
    # the built-in module's keys are [jobs]'s, as before
    assert "[jobs]\nspin_max_n = 1000000000\nsleep_max_ms = 60000\n" in r.stdout


def test_an_empty_section_loads_the_module_and_path_may_be_absolute(tmp_path):
    path = tmp_path / "v.conf"
    path.write_text("[module.cfgmod]\npath = %s\n" % CFGMOD)
    r = run_voltd("-T", "-c", str(path))
    assert r.returncode == 0, r.stderr
    assert "path = %s ; %s:2\nlimit = 10\n" % (CFGMOD, path) in r.stdout
    path.write_text("[modules]\ndir = %s\n[module.cfgmod]\n" % MODDIR)
    assert check(path).returncode == 0


# ---------------------------------------------------------------- refusals

def test_missing_file(tmp_path):
    refused(tmp_path, "\n[module.nosuch]\n", "%(f)s:4: module.nosuch: %(dir)s/nosuch.so")


def test_not_a_shared_object(tmp_path):
    junk = tmp_path / "junk.so"
    junk.write_text("not an ELF file\n")
    refused(tmp_path, "[module.junk]\npath = %s\n" % junk, "%(f)s:3: module.junk: " + str(junk))


# The loader's refusals (tests/modules/bad.c, whose module is named "bad"):
# each names the section's line, the file, and expected against found.
REFUSED = [
    ("good_reloc.so", "not an ELF shared object: an object file (.o); link the module with -shared"),
    ("bad_nosym.so", "not a voltd module: no symbol voltd_module_v1"),
    ("bad_v2.so", "built for module ABI 2.x (it has voltd_module_v2, not voltd_module_v1), this voltd"),
    ("bad_major.so", "built for module ABI 2.0, this voltd"),
    ("bad_minor.so", "needs module ABI 1.5 or later (built against 1.5), this voltd"),
    ("bad_small.so", "descriptor too small: 40 bytes, module ABI 1.0's is 64"),
    ("bad_dupkind.so", 'kind "spin": the name is taken by kind "spin" of module voltd'),
    ("bad_route.so", 'kind "bad_hash": route "/v1/hash" is served already by kind "hash" of module voltd'),
    ("bad_server_route.so", 'kind "bad_livez": route "/livez" is voltd\'s own'),
    ("bad_key_bounds.so", 'key "limit": default: 100 is out of bounds [1, 10]'),
    ("bad_name.so", 'module name "Bad-Name": not 1..32 of [a-z0-9_]'),
    ("bad_init.so", "init failed: no database at db.example:5432"),
]


@pytest.mark.parametrize("so,why", REFUSED, ids=[so for so, _ in REFUSED])
def test_a_module_voltd_cannot_use_is_refused(tmp_path, so, why):
    refused(tmp_path, "[module.bad]\npath = %s\n" % so, "%(f)s:3: module.bad: %(dir)s/" + so + ": " + why)


def test_a_kind_name_two_modules_claim(tmp_path):
    refused(tmp_path, "[module.good]\n[module.bad]\npath = bad_good_clash.so\n",
            "%(f)s:4: module.bad: %(dir)s/bad_good_clash.so: kind \"good_spin\": the name is taken by kind "
            "\"good_spin\" of module good")


def test_unknown_key_names_the_nearest_of_the_modules_keys(tmp_path):
    refused(tmp_path, "[module.cfgmod]\nlimt = 3\n",
            "%(f)s:4: module.cfgmod.limt: unknown key (did you mean module.cfgmod.limit?)")


def test_bad_type_and_out_of_bounds_values(tmp_path):
    err = refused(tmp_path, "[module.cfgmod]\nlimit = 1001\nverbose = maybe\noffset = -101\n",
                  "%(f)s:4: module.cfgmod.limit: 1001 is out of bounds [0, 1000]",
                  "%(f)s:5: module.cfgmod.verbose: 'maybe' is not a boolean (use on or off)",
                  "%(f)s:6: module.cfgmod.offset: -101 is out of bounds [-100, 100]")
    assert "init" not in err  # checked before the module's init runs


def test_duplicate_module_key(tmp_path):
    refused(tmp_path, "[module.cfgmod]\nlimit = 1\nlimit = 2\n",
            "%(f)s:5: module.cfgmod.limit: duplicate key (first set on line 4)")


def test_init_that_fails_gives_its_reason(tmp_path):
    refused(tmp_path, "[module.cfgmod]\ngreeting = hi\nfail_init = on\n",
            "%(f)s:3: module.cfgmod: " + CFGMOD + ": init failed: fail_init is on (greeting hi)")


def test_bad_module_names(tmp_path):
    refused(tmp_path, "[module.Geo-2]\n", "%(f)s:3: module.Geo-2: not a module name")
    refused(tmp_path, "[module.voltd]\n", "%(f)s:3: module.voltd: the built-in module: its keys are set in [jobs]")


def test_an_override_for_a_module_without_a_section(tmp_path):
    path = conf(tmp_path, "")
    r = check(path, "-s", "module.cfgmod.limit=3")
    assert r.returncode == EX_CONFIG
    assert "-s: module.cfgmod.limit: no [module.cfgmod] section in the file" in r.stderr, r.stderr


# ------------------------------------------------------- the running daemon

def test_config_shows_module_keys_and_set_reaches_the_module(voltd, tmp_path):
    path = conf(tmp_path, "[module.cfgmod]\nlimit = 20\n")
    d = voltd("-c", str(path))
    k = {x["key"]: x for x in ctl(d, "config")["keys"]}
    assert k["module.cfgmod.limit"] == {"key": "module.cfgmod.limit", "value": "20", "default": "10",
                                        "source": "%s:4" % path, "apply": "live",
                                        "doc": "a live number /v1/cfgmod answers"}
    assert k["module.cfgmod.greeting"]["apply"] == "restart"
    assert k["module.cfgmod.path"]["value"] == "cfgmod.so" and k["module.cfgmod.path"]["source"] == "default"
    assert k["jobs.spin_max_n"]["apply"] == "live"
    assert "limit=20 verbose=0 greeting=hello offset=0\n" == get(d.port, "/v1/cfgmod")
    r = ctl(d, "set module.cfgmod.limit 30 module.cfgmod.verbose on")
    assert r["ok"], r
    assert "limit=30 verbose=1 greeting=hello offset=0\n" == get(d.port, "/v1/cfgmod")
    assert ctl(d, "config module.cfgmod.limit")["keys"][0]["source"] == "set"
    r = ctl(d, "set module.cfgmod.greeting bye")
    assert r["ok"] is False and "module.cfgmod.greeting: cannot change while running (restart-only)" in r["error"], r
    r = ctl(d, "set module.cfgmod.limit 5000")
    assert r["ok"] is False and "module.cfgmod.limit: 5000 is out of bounds [0, 1000]" in r["error"], r
    assert "limit=30 " in get(d.port, "/v1/cfgmod")


def reload(d):
    return subprocess.run([VOLTCTL, "-s", str(d.control), "reload"], capture_output=True, text=True, timeout=30)


def test_reload_applies_live_module_keys_and_refuses_what_needs_a_restart(voltd, tmp_path):
    path = conf(tmp_path, "[module.cfgmod]\nlimit = 20\ngreeting = hi\n")
    d = voltd("-c", str(path))
    # a live key: applied
    conf(tmp_path, "[module.cfgmod]\nlimit = 40\ngreeting = hi\n")
    r = reload(d)
    assert r.returncode == 0, r.stderr
    assert "limit=40 " in get(d.port, "/v1/cfgmod")
    cases = [
        ("[module.cfgmod]\nlimit = 50\ngreeting = bye\n",
         "%s:5: module.cfgmod.greeting: hi -> bye: a module's restart-only key changes only at a restart"),
        ("[module.cfgmod]\nlimit = 50\n",
         "%s: module.cfgmod.greeting: hi -> hello: a module's restart-only key changes only at a restart"),
        ("[module.cfgmod]\nlimit = 50\ngreeting = hi\n[module.other]\n",
         "%s:6: module.other: a module is loaded at start only: restart voltd to load it"),
        ("[jobs]\nspin_max_n = 5\n",
         "%s: module.cfgmod: its section is gone, but a loaded module is never unloaded"),
        ("[module.cfgmod]\npath = /elsewhere/cfgmod.so\nlimit = 50\ngreeting = hi\n",
         "%s:4: module.cfgmod.path: /elsewhere/cfgmod.so is not the file module cfgmod was loaded from"),
    ]
    for body, why in cases:
        conf(tmp_path, body)
        r = reload(d)
        assert r.returncode == 1, (body, r.returncode, r.stdout, r.stderr)
        assert why % path in r.stderr, (why % path, r.stderr)
        # nothing of the refused file applies, live keys included
        assert "limit=40 greeting=hi" in get(d.port, "/v1/cfgmod").replace(" verbose=0", "")
    # SIGHUP: the same refusal, logged
    d.proc.send_signal(signal.SIGHUP)
    d.wait_log("reload: %s" % (cases[-1][1] % path))
    conf(tmp_path, "[module.cfgmod]\npath = cfgmod.so\nlimit = 60\ngreeting = hi\n")
    assert reload(d).returncode == 0
    assert "limit=60 " in get(d.port, "/v1/cfgmod")


def test_shutdown_runs_once_after_the_drain(voltd, tmp_path):
    path = conf(tmp_path, "[module.cfgmod]\n")
    d = voltd("-c", str(path))
    assert "cfgmod: init: limit 10" in d.log()
    stop(d)
    log = d.log()
    assert log.count("cfgmod: shutdown") == 1, log
    assert log.index("server stats:") < log.index("cfgmod: shutdown"), log
