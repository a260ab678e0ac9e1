# SPDX-License-Identifier: MIT
# systemctl restart x10 in a row under load: a client inside the container
# (4 threads, a new connection per request to the socket unit's port) runs
# through ten back-to-back restarts; every restart exits 0, ten new main
# processes, 0 refused connections, 0 other errors, and the socket units
# stay active (systemd's start limit must not fail them).
# timeout: 120
rm -f "$SYSTEST_ROOT$CT_TOOLS/load-stop"
load_start restart --threads 4 --duration 60 --requests 1000000 --stop-file "$CT_TOOLS/load-stop"
sleep 1
pids=("$(main_pid)") failed=
for i in $(seq 1 10); do
	out=$(ct systemctl restart voltd.service 2>&1) || { failed="restart $i: $out"; break; }
	pids+=("$(main_pid)")
done
note "main PIDs: ${pids[*]}"
sleep 1
touch "$SYSTEST_ROOT$CT_TOOLS/load-stop"
load_wait restart
show systemctl --no-pager list-units 'voltd*'
[ -z "$failed" ] || fail "$failed"
expect_eq "distinct main PIDs" "$(printf '%s\n' "${pids[@]}" | sort -u | wc -l)" 11
for u in voltd.socket voltd-control.socket voltd.service; do
	expect_eq "$u after the restarts" "$(ct systemctl is-active "$u")" active
done
[ "$LOAD_OK" -gt 0 ] || fail "no request answered"
expect_eq "refused connections" "$LOAD_REFUSED" 0
expect_eq "other errors" "$LOAD_ERRORS" 0
