# SPDX-License-Identifier: MIT
# What an operator sees on stop with socket activation. `systemctl stop
# voltd.service` alone: systemd warns that the sockets can still activate
# it, the sockets keep listening, and the next connection starts voltd again
# (answered 200). Stopping the sockets too really stops it: curl is refused
# (exit 7) and voltctl cannot connect (exit 69). Starting the sockets again
# brings voltd back on the first connection.
# timeout: 60
out=$(ct systemctl stop voltd.service 2>&1) || fail "systemctl stop voltd.service: $out"
note "systemctl stop voltd.service said: ${out:-(nothing)}"
grep -q 'can still be activated by' <<<"$out" || fail "no 'can still be activated by' warning"
expect_eq "voltd.service after stop" "$(ct systemctl is-active voltd.service || true)" inactive
expect_eq "voltd.socket after stop" "$(ct systemctl is-active voltd.socket)" active
show systemctl list-sockets --no-pager
expect_eq "GET /healthz (activates it again)" "$(http_status /healthz)" 200
expect_eq "voltd.service after that request" "$(ct systemctl is-active voltd.service)" active

show systemctl stop voltd.socket voltd-control.socket voltd.service || fail "stopping all three"
rc=0; ct curl -sS --max-time 5 -o /dev/null http://127.0.0.1:8080/healthz 2>/dev/null || rc=$?
expect_eq "curl exit with everything stopped (7 = refused)" "$rc" 7
rc=0; ct voltctl ping >/dev/null 2>&1 || rc=$?
expect_eq "voltctl ping exit with everything stopped (69 = unreachable)" "$rc" 69
expect_eq "voltd.service" "$(ct systemctl is-active voltd.service || true)" inactive

show systemctl start voltd.socket voltd-control.socket || fail "starting the sockets"
expect_eq "voltd.service with only the sockets started" "$(ct systemctl is-active voltd.service || true)" inactive
show voltctl ping || fail "voltctl ping through the control socket unit"
expect_eq "voltd.service after voltctl connected" "$(ct systemctl is-active voltd.service)" active
