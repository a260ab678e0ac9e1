# SPDX-License-Identifier: MIT
# The README's steps, as root: systemd-sysusers; systemd-tmpfiles --create;
# systemctl enable --now voltd.socket voltd-control.socket voltd.service.
# The three units are enabled and active, voltd runs as the user voltd,
# systemctl status shows the STATUS= line ("ready: ...").
# timeout: 60
show systemd-sysusers
show systemd-tmpfiles --create
show systemctl daemon-reload
show systemctl enable --now voltd.socket voltd-control.socket voltd.service ||
	fail "systemctl enable --now failed"
wait_active 20
for u in voltd.socket voltd-control.socket voltd.service; do
	expect_eq "$u enabled" "$(ct systemctl is-enabled "$u")" enabled
	expect_eq "$u active" "$(ct systemctl is-active "$u")" active
done
# STATUS= is sent once the workers run; wait for it rather than race it.
status_ready() { prop voltd.service StatusText | grep -q "^ready: "; }
wait_for 10 status_ready ||
	fail "no STATUS=ready: ... line: '$(prop voltd.service StatusText)'"
show systemctl status --no-pager -l -n 12 voltd.service || true # 0 for a running unit; the text is what counts
note "StatusText: $(prop voltd.service StatusText)"
pid=$(main_pid)
uid=$(ct awk '/^Uid:/ { print $2 }' "/proc/$pid/status")
expect_eq "main process uid" "$uid" "$(ct id -u voltd)"
show ls -l /run/voltd
show journalctl -u voltd.service -b --no-pager -o cat -g 'io: backend|ready|listening'
