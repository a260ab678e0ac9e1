# SPDX-License-Identifier: MIT
# tests/system/lib.sh: what a system-test case may use (tests/system/run
# sources it before each case, in a fresh bash with -euo pipefail). A case
# talks to the booted container through `ct` (a command inside it, as root,
# in every namespace of its PID 1) and reads the root's files on the host
# under $SYSTEST_ROOT. Environment the driver exports:
#   SYSTEST_ROOT    the container's root directory, seen from the host
#   SYSTEST_LEADER  host PID of the container's PID 1 (systemd)
#   SYSTEST_STATE   a host scratch directory, for this run only
#   SYSTEST_BUILD   the host build tree that was installed (make install)
#   SYSTEST_SRC     the source tree
#   VOLTD_CONF      the configuration file path inside the container
#   CT_TOOLS        where the test's own files are inside (load.py, voltd-test)
# Output: print what you see (the transcript is the test's evidence); fail
# with `fail MSG` (exit 1), skip with `skip REASON` (exit 77).

CT_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# ct CMD...: run CMD inside the container (its stdout/stderr are ours).
ct() {
	nsenter -t "$SYSTEST_LEADER" -a env -i PATH="$CT_PATH" HOME=/root TERM=dumb \
		LANG=C.UTF-8 SYSTEMD_COLORS=0 SYSTEMD_PAGER=cat SYSTEMD_LESS= "$@"
}

# show CMD...: print "$ CMD", then its output indented; returns its status
# and prints it when non-zero.
show() {
	local out rc=0
	printf '  $ %s\n' "$*"
	out=$(ct "$@" 2>&1) || rc=$?
	[ -z "$out" ] || printf '%s\n' "$out" | sed 's/^/    /'
	[ "$rc" -eq 0 ] || printf '    (exit %d)\n' "$rc"
	return "$rc"
}

# show_fails CMD...: show CMD, which must fail (exit non-zero).
show_fails() {
	local rc=0
	show "$@" || rc=$?
	[ "$rc" -ne 0 ] || fail "$* exited 0"
	note "exit $rc, as it must"
}

note() { printf '  %s\n' "$*"; }
fail() { printf '  FAILED: %s\n' "$*"; exit 1; }
skip() { printf '  SKIPPED: %s\n' "$*"; exit 77; }

# expect_eq WHAT GOT WANT
expect_eq() {
	[ "$2" = "$3" ] || fail "$1: got '$2', expected '$3'"
	note "$1: $2 (as expected)"
}

# wait_for SECONDS CMD...: poll CMD (on the host; use `ct ...` for inside)
# every 0.2 s until it succeeds; returns 1 at the deadline.
wait_for() {
	local end=$(( $(date +%s%N) / 1000000 + ${1%.*} * 1000 ))
	shift
	until "$@" >/dev/null 2>&1; do
		[ $(( $(date +%s%N) / 1000000 )) -lt "$end" ] || return 1
		sleep 0.2
	done
}

# prop UNIT PROPERTY: one property's value (systemctl show).
prop() { ct systemctl show -p "$2" --value "$1"; }

# http [CURL-ARGS...] PATH: curl inside the container against voltd's
# socket unit (127.0.0.1:8080 on the container's own loopback); prints
# the body, then a line "http=STATUS time=SECONDS".
http() {
	local path=${*: -1}
	ct curl -sS --max-time 30 -w '\nhttp=%{http_code} time=%{time_total}s\n' \
		"${@:1:$#-1}" "http://127.0.0.1:8080$path"
}

# http_status PATH: the status code only ("000" when nothing answered).
http_status() {
	ct curl -s -o /dev/null --max-time 30 -w '%{http_code}' "http://127.0.0.1:8080$1" || true
}

# journal_mark: a cursor for journal_since: a line "mark N" logged now
# (tag systest). journal_since reads from it with --cursor, because
# journalctl 252's --after-cursor skips the first entry that matches when
# filters (-u, -p) are given.
journal_mark() {
	local id=$RANDOM$RANDOM out
	ct systemd-cat -t systest echo "mark $id"
	logged() { out=$(ct journalctl -q -t systest -n 1 --show-cursor -o cat) && grep -qx "mark $id" <<<"$out"; }
	wait_for 10 logged || fail "journald did not log the mark"
	sed -n 's/^-- cursor: //p' <<<"$out"
}

# journal_since CURSOR [JOURNALCTL-ARGS...]: the entries from the mark on
# (the mark itself shows when no filter excludes it).
journal_since() {
	local c=$1; shift
	ct journalctl -q --no-pager --cursor="$c" "$@"
}

# show_journal CURSOR [JOURNALCTL-ARGS...]: show the entries after CURSOR
# (the transcript names the mark instead of the cursor's text).
show_journal() {
	local c=$1 out; shift
	printf '  $ journalctl %s (since the mark)\n' "$*"
	out=$(journal_since "$c" "$@" 2>&1) || true
	[ -z "$out" ] || printf '%s\n' "$out" | sed 's/^/    /'
}

# dropin UNIT TEXT: a drop-in /etc/systemd/system/UNIT.d/systest.conf
# (removed by the driver after the case), then daemon-reload.
dropin() {
	mkdir -p "$SYSTEST_ROOT/etc/systemd/system/$1.d"
	printf '%s\n' "$2" >"$SYSTEST_ROOT/etc/systemd/system/$1.d/systest.conf"
	ct systemctl daemon-reload
}

# conf_append TEXT: append ini text to voltd's configuration file (the
# driver puts the installed file back after the case).
conf_append() {
	printf '\n%s\n' "$1" >>"$SYSTEST_ROOT$VOLTD_CONF"
}

# main_pid: voltd.service's MainPID inside the container (0 when not running).
main_pid() { prop voltd.service MainPID; }

# is_active UNIT: UNIT's ActiveState is "active".
is_active() { [ "$(ct systemctl is-active "$1")" = active ]; }

# wait_active [SECONDS]: until voltd.service is active.
wait_active() {
	wait_for "${1:-20}" is_active voltd.service ||
		{ show systemctl status --no-pager -l voltd.service || true; fail "voltd.service did not become active"; }
}

# load_start NAME ARGS...: the bounded load client (load.py) inside the
# container in the background; load_wait NAME prints its report and sets
# LOAD_REFUSED, LOAD_ERRORS, LOAD_OK from it.
load_start() {
	local name=$1; shift
	ct python3 "$CT_TOOLS/load.py" "$@" >"$SYSTEST_STATE/load-$name.out" 2>&1 &
	echo $! >"$SYSTEST_STATE/load-$name.pid"
}
load_wait() {
	local name=$1 pid
	pid=$(cat "$SYSTEST_STATE/load-$name.pid")
	wait "$pid" || fail "the load client exited with $? ($(tail -3 "$SYSTEST_STATE/load-$name.out"))"
	sed 's/^/    load: /' "$SYSTEST_STATE/load-$name.out"
	LOAD_OK=$(sed -n 's/^ok=\([0-9]*\) .*/\1/p' "$SYSTEST_STATE/load-$name.out")
	LOAD_REFUSED=$(sed -n 's/.* refused=\([0-9]*\).*/\1/p' "$SYSTEST_STATE/load-$name.out")
	LOAD_ERRORS=$(sed -n 's/.* errors=\([0-9]*\).*/\1/p' "$SYSTEST_STATE/load-$name.out")
	[ -n "$LOAD_OK" ] && [ -n "$LOAD_REFUSED" ] && [ -n "$LOAD_ERRORS" ] ||
		fail "no summary line from the load client"
}

# module_case EXAMPLES: a job module as its author brings it to the running
# service, with only the installed voltd, its development files (EXAMPLES:
# the installed examples' folder; voltd.pc found by pkg-config), gcc and
# make: the example count copied out and built by its own Makefile, tested
# (make check: voltd-modtest), installed (make install: into pkg-config's
# moduledir), loaded from a [module.count] section added to voltd.conf,
# served after a restart (the same answers as /v1/spin; its key, from the
# file and changed live by voltctl set; voltctl modules lists it; its
# counter in the metrics). Then a broken module (a file that is not a
# shared object) in its own section: the restart fails, the journal says
# which file and why at priority err, the sockets stay; without the section
# the service serves again.
module_case() {
	local ex=$1 dir mark
	show pkg-config --modversion voltd || fail "pkg-config does not find voltd.pc"
	dir=$(ct pkg-config --variable=moduledir voltd)
	[ -n "$dir" ] || fail "voltd.pc has no moduledir"
	show ls -ld "$dir" || fail "the module directory $dir is missing"
	ct rm -rf /root/count
	ct cp -R "$ex/count" /root/count
	show make -C /root/count || fail "make (the example count)"
	show make -C /root/count check || fail "make check (the example count)"
	show make -C /root/count install || fail "make install (the example count)"
	show ls -l "$dir/count.so" || fail "make install did not put count.so in $dir"

	conf_append '[module.count]
max_n = 5000000'
	show voltd -t -c "$VOLTD_CONF" || fail "voltd -t with [module.count]"
	show systemctl restart voltd.service || fail "systemctl restart with [module.count]"
	wait_active 20
	expect_eq "GET /v1/count?n=1000" "$(http '/v1/count?n=1000' | sed '$d')" 6248290529083013365
	expect_eq "GET /v1/spin?n=1000" "$(http '/v1/spin?n=1000' | sed '$d')" 6248290529083013365
	expect_eq "GET /v1/count?n=2000000" "$(http '/v1/count?n=2000000' | sed '$d')" 112293701011261965
	expect_eq "GET /v1/count?n=5000001 (above max_n)" "$(http_status '/v1/count?n=5000001')" 400
	show curl -sS 'http://127.0.0.1:8080/v1/count?n=5000001'
	show voltctl set module.count.max_n 10 || fail "voltctl set module.count.max_n 10 (a live key)"
	expect_eq "GET /v1/count?n=11 after the set" "$(http '/v1/count?n=11' | sed '$d')" "n: above max_n (10)"
	show voltctl modules || fail "voltctl modules"
	ct voltctl modules | grep -q "$dir/count.so" || fail "voltctl modules does not list $dir/count.so"
	# The kind's declared counter: n=1000 and n=2000000 ran, the 400s none.
	expect_eq "voltd_module_counter_total of count's rounds" \
		"$(ct voltctl metrics | sed -n 's/^voltd_module_counter_total{module="count",kind="count",counter="rounds"} //p')" \
		2001000

	ct sh -c "echo 'not a module' >'$dir/broken.so'"
	conf_append '[module.broken]'
	mark=$(journal_mark)
	show_fails systemctl restart voltd.service
	sleep 1
	show_journal "$mark" -p err -o cat
	journal_since "$mark" -p err -o cat | grep -F "$dir/broken.so" | grep -q 'not an ELF shared object' ||
		fail "the journal does not say, at priority err, that $dir/broken.so is not an ELF shared object"
	for u in voltd.socket voltd-control.socket; do
		expect_eq "$u" "$(ct systemctl is-active "$u")" active
	done
	ct rm -f "$dir/broken.so"
	ct sed -i '/^\[module\.broken\]$/d' "$VOLTD_CONF"
	show systemctl restart voltd.service || fail "restart without [module.broken]"
	wait_active 20
	expect_eq "GET /v1/count?n=1000 again" "$(http '/v1/count?n=1000' | sed '$d')" 6248290529083013365
	ct rm -f "$dir/count.so"
}
