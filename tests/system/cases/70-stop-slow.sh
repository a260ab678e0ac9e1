# SPDX-License-Identifier: MIT
# systemctl stop during a slow request (GET /v1/sleep?ms=3000): the stop
# waits for the drain, the request gets its 200 and body, and the service
# ends with result success (exit 0).
# timeout: 60
ct curl -sS --max-time 30 -w '\nhttp=%{http_code} time=%{time_total}s\n' \
	'http://127.0.0.1:8080/v1/sleep?ms=3000' >"$SYSTEST_STATE/slow.out" 2>&1 &
slow=$!
# The request is in the exec stage (its sleep) before the stop.
in_flight() { ct voltctl stats server | awk '/^ *in_flight$/ { f = 1 } f && $1 == "exec" { n = $2; exit } END { exit !(n >= 1) }'; }
wait_for 10 in_flight || fail "the slow request never reached voltd"
mark=$(journal_mark)
s=$(date +%s%N)
show systemctl stop voltd.service || fail "systemctl stop exited non-zero"
note "systemctl stop returned after $(( ($(date +%s%N) - s) / 1000000 )) ms"
wait "$slow" || true
note "the slow request got: $(tr '\n' ' ' <"$SYSTEST_STATE/slow.out")"
grep -q '^slept 3000 ms$' "$SYSTEST_STATE/slow.out" && grep -q '^http=200 ' "$SYSTEST_STATE/slow.out" ||
	fail "the slow request did not finish with 200 'slept 3000 ms'"
expect_eq "Result" "$(prop voltd.service Result)" success
expect_eq "ExecMainStatus" "$(prop voltd.service ExecMainStatus)" 0
show_journal "$mark" -u voltd.service -o cat
