# SPDX-License-Identifier: MIT
# A stalled worker restarts the service: voltd-test (voltd plus the test
# route GET /v1/stall, which busy-loops without yielding) runs as the unit's
# ExecStart with control.stall_fail_ms = 500; a 10 s stall makes voltd send
# WATCHDOG=trigger, systemd kills it (result 'watchdog') and Restart=
# on-failure starts a new process that serves again.
# timeout: 90
dropin voltd.service "[Service]
ExecStart=
ExecStart=$CT_TOOLS/voltd-test -f -c $VOLTD_CONF -s control.stall_warn_ms=100 -s control.stall_fail_ms=500"
show systemctl restart voltd.service || fail "restart with voltd-test"
wait_active 20
pid=$(main_pid) restarts=$(prop voltd.service NRestarts)
note "voltd-test running as PID $pid, NRestarts=$restarts"
mark=$(journal_mark)
ct curl -sS --max-time 30 -w '\nhttp=%{http_code}\n' 'http://127.0.0.1:8080/v1/stall?ms=10000' \
	>"$SYSTEST_STATE/stall.out" 2>&1 &
stall=$!
restarted() { [ "$(prop voltd.service NRestarts)" -gt "$restarts" ] && is_active voltd.service; }
wait_for 40 restarted || { show systemctl status --no-pager voltd.service || true; fail "no restart after a 10 s stall"; }
wait "$stall" || true
note "the stalled request got: $(tr '\n' ' ' <"$SYSTEST_STATE/stall.out")"
show_journal "$mark" -o short-monotonic -g 'stall|[Ww]atchdog|Scheduled restart|Started'
journal_since "$mark" -o cat -u voltd.service | grep -q "Failed with result 'watchdog'" ||
	fail "systemd did not fail the service with result 'watchdog'"
[ "$(main_pid)" != "$pid" ] || fail "the main PID did not change"
note "new main PID $(main_pid), NRestarts $(prop voltd.service NRestarts)"
expect_eq "GET /healthz after the restart" "$(http_status /healthz)" 200
