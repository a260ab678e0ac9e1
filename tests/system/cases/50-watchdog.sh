# SPDX-License-Identifier: MIT
# The watchdog: the shipped unit asks for WatchdogSec=30s; with a drop-in
# WatchdogSec=4s (so the case is short) a healthy voltd pings it for 10 s,
# at least two watchdog periods: the timestamp moves and systemd neither
# kills nor restarts the service.
# timeout: 60
expect_eq "shipped WatchdogUSec" "$(prop voltd.service WatchdogUSec)" 30s
dropin voltd.service '[Service]
WatchdogSec=4s'
show systemctl restart voltd.service || fail "restart with WatchdogSec=4s"
wait_active 20
expect_eq "WatchdogUSec with the drop-in" "$(prop voltd.service WatchdogUSec)" 4s
pid=$(main_pid) restarts=$(prop voltd.service NRestarts)
declare -A seen=()
for _ in $(seq 1 20); do
	ts=$(prop voltd.service WatchdogTimestampMonotonic)
	seen[$ts]=1
	sleep 0.5
done
note "distinct WatchdogTimestamp values over 10 s: ${#seen[@]}"
[ "${#seen[@]}" -ge 3 ] || fail "the watchdog timestamp moved $(( ${#seen[@]} - 1 )) times in 10 s"
expect_eq "main PID after 10 s" "$(main_pid)" "$pid"
expect_eq "NRestarts after 10 s" "$(prop voltd.service NRestarts)" "$restarts"
expect_eq "voltd.service" "$(ct systemctl is-active voltd.service)" active
show systemctl show -p WatchdogUSec,WatchdogTimestamp,NRestarts,Result voltd.service
