# SPDX-License-Identifier: MIT
# A restart with a bad file: systemctl restart fails (ExecStartPre=voltd -t),
# the reason is in the journal at priority err, and the socket units stay
# active through the failed start, its retries and the connections that
# arrive meanwhile; with the file fixed, a restart serves again.
# timeout: 90
mark=$(journal_mark)
conf_append '[scheduler]
workrs = 3'
show_fails systemctl restart voltd.service
# Connections meanwhile re-trigger the start (socket activation).
for _ in 1 2 3 4 5 6; do
	note "GET /healthz while the file is bad: $(ct curl -s -o /dev/null --max-time 1 -w '%{http_code}' http://127.0.0.1:8080/healthz || true)"
done
sleep 2
show systemctl --no-pager list-units 'voltd*'
show_journal "$mark" -p err -o cat
journal_since "$mark" -p err -o cat | grep -q "scheduler.workrs: unknown key" ||
	fail "the reason (scheduler.workrs: unknown key) is not in the journal at priority err"
for u in voltd.socket voltd-control.socket; do
	expect_eq "$u" "$(ct systemctl is-active "$u")" active
done
cp "$SYSTEST_STATE/voltd.conf.installed" "$SYSTEST_ROOT$VOLTD_CONF"
show systemctl restart voltd.service || fail "restart with the file fixed"
wait_active 20
expect_eq "GET /healthz with the file fixed" "$(http_status /healthz)" 200
