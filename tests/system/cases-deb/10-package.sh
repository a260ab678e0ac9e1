# SPDX-License-Identifier: MIT
# The Debian package as an operator uses it (tests/system/run --deb OLD
# --deb NEW; tests/package/test_system.sh builds NEW from this tree with a
# newer changelog entry). apt install OLD: the three units enabled and
# active, voltd answering as the user voltd. voltd.conf edited, then apt
# install NEW under a bounded load (a connection per request): 0 requests
# refused or failed, voltd.service restarted (new main PID and invocation),
# both sockets not (same invocation), the edit kept and read by the new
# process. apt purge: no unit, process, listener, voltd-owned file,
# /etc/voltd or /run/voltd left (the user voltd stays, as Debian's do).
# timeout: 240
read -r old new _ <<<"$SYSTEST_DEBS"
[ -n "${new:-}" ] || fail "needs two packages: tests/system/run --deb OLD --deb NEW"
v_old=$(ct dpkg-deb -f "$old" Version) v_new=$(ct dpkg-deb -f "$new" Version)
ct dpkg --compare-versions "$v_new" gt "$v_old" || fail "$v_new is not newer than $v_old"
note "packages: $v_old, then $v_new"
apt_get() { ct env DEBIAN_FRONTEND=noninteractive apt-get -q -y --no-install-recommends "$@"; }

# --- install ---
printf '  $ apt-get install %s\n' "$old"
apt_get install "$old" 2>&1 | grep -Ev '^(Reading|Building|\(Reading)' | sed 's/^/    /' ||
	true
expect_eq "voltd installed" "$(ct dpkg-query -W -f='${Status} ${Version}' voltd)" "install ok installed $v_old"
wait_active 20
for u in voltd.socket voltd-control.socket voltd.service; do
	expect_eq "$u enabled" "$(ct systemctl is-enabled "$u")" enabled
	expect_eq "$u active" "$(ct systemctl is-active "$u")" active
done
expect_eq "GET /healthz" "$(http_status /healthz)" 200
show voltctl ping || fail "voltctl ping"
uid=$(ct awk '/^Uid:/ { print $2 }' "/proc/$(main_pid)/status")
expect_eq "main process uid" "$uid" "$(ct id -u voltd)"
expect_eq "/run/voltd owner" "$(ct stat -c %U:%G /run/voltd)" voltd:voltd
show dpkg-query -W -f='${Conffiles}\n' voltd

# --- upgrade under load, with an edited configuration ---
ct sed -i -e 's/^#workers = auto$/workers = 3/' -e '$a # edited by the operator' "$VOLTD_CONF"
ct grep -qx 'workers = 3' "$VOLTD_CONF" || fail "could not edit $VOLTD_CONF"
note "edited $VOLTD_CONF: workers = 3, and a comment at the end"
pid1=$(main_pid) inv1=$(prop voltd.service InvocationID)
sock1=$(prop voltd.socket InvocationID) csock1=$(prop voltd-control.socket InvocationID)
mark=$(journal_mark)
# Bounded: 4 threads, at most 60 s or 200000 requests; stopped 2 s after apt.
load_start upgrade --threads 4 --duration 60 --requests 200000 --stop-file /run/systest-load.stop
sleep 2
printf '  $ apt-get install %s   (under load)\n' "$new"
apt_get install "$new" 2>&1 | grep -Ev '^(Reading|Building|\(Reading)' | sed 's/^/    /' ||
	true
sleep 2
ct touch /run/systest-load.stop
load_wait upgrade
expect_eq "voltd installed" "$(ct dpkg-query -W -f='${Status} ${Version}' voltd)" "install ok installed $v_new"
expect_eq "requests refused during the upgrade" "$LOAD_REFUSED" 0
expect_eq "requests failed otherwise during the upgrade" "$LOAD_ERRORS" 0
[ "$LOAD_OK" -gt 0 ] || fail "no request answered during the upgrade"
note "answered during the upgrade: $LOAD_OK"
show_journal "$mark" -o short -u voltd.service -u voltd.socket -u voltd-control.socket -g 'Stopp|Start|Listening|Closed'
wait_active 20
pid2=$(main_pid) inv2=$(prop voltd.service InvocationID)
[ "$pid2" != "$pid1" ] && [ "$inv2" != "$inv1" ] ||
	fail "voltd.service was not restarted: main PID $pid1 -> $pid2, invocation $inv1 -> $inv2"
note "voltd.service restarted: main PID $pid1 -> $pid2"
expect_eq "voltd.socket invocation (not restarted)" "$(prop voltd.socket InvocationID)" "$sock1"
expect_eq "voltd-control.socket invocation (not restarted)" "$(prop voltd-control.socket InvocationID)" "$csock1"
show systemctl status --no-pager -n 0 voltd.service || true # the text is what counts
ct grep -qx 'workers = 3' "$VOLTD_CONF" || fail "the edit (workers = 3) is gone from $VOLTD_CONF"
ct grep -qx '# edited by the operator' "$VOLTD_CONF" || fail "the appended comment is gone from $VOLTD_CONF"
show ls /etc/voltd
[ -z "$(ct find /etc/voltd -name 'voltd.conf.dpkg-*')" ] || fail "dpkg left voltd.conf.dpkg-* files"
show voltctl config scheduler.workers || fail "voltctl config scheduler.workers"
ct voltctl --json config scheduler.workers | grep -q '"value":"3","default":"auto","source":"'"$VOLTD_CONF"':' ||
	fail "the restarted voltd does not run with workers = 3 from $VOLTD_CONF"

# --- purge ---
printf '  $ apt-get purge voltd\n'
apt_get purge voltd 2>&1 | grep -Ev '^(Reading|Building|\(Reading)' | sed 's/^/    /' || true
expect_eq "voltd after purge" "$(ct dpkg-query -W -f='${Status}' voltd 2>/dev/null || true)" ""
left=
leftover() { # CMD...: add CMD's output (what it found) to $left
	local o
	o=$("$@" 2>/dev/null || true)
	[ -z "$o" ] || left+="$o"$'\n'
}
leftover ct python3 -c '
import os, pwd
uid = pwd.getpwnam("voltd").pw_uid
for p in filter(str.isdigit, os.listdir("/proc")):
    try:
        comm = open("/proc/%s/comm" % p).read().strip()
        if os.stat("/proc/" + p).st_uid == uid or comm == "voltd":
            print("process %s %s" % (p, comm))
    except OSError:
        pass
for line in open("/proc/net/tcp").readlines()[1:] + open("/proc/net/tcp6").readlines()[1:]:
    f = line.split()
    if f[1].endswith(":1F90") and f[3] == "0A":
        print("listener on port 8080: " + f[1])
'
leftover ct systemctl list-unit-files --no-legend 'voltd*'
leftover ct sh -c 'ls -d /etc/voltd /run/voltd /etc/systemd/system/*/voltd* \
	/var/lib/systemd/deb-systemd-helper-enabled/*voltd* \
	/var/lib/systemd/deb-systemd-helper-enabled/*/voltd*'
leftover ct find / \( -path /proc -o -path /sys \) -prune -o -user voltd -print
# A unit whose file is gone may stay in systemd's memory as "not-found
# inactive dead" until collected: no file, no process, so not a leftover.
units=$(ct systemctl list-units --all --no-legend --plain 'voltd*' || true)
[ -z "$units" ] || note "in systemd's memory after the purge: $units"
leftover grep -v 'not-found inactive dead' <<<"$units"
[ -z "$left" ] || fail "left after apt purge voltd: $left"
note "after apt purge voltd: no unit file, unit, process, listener, voltd-owned file, /etc/voltd or /run/voltd"
show getent passwd voltd || true
