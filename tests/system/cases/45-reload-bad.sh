# SPDX-License-Identifier: MIT
# systemctl reload with a bad file (an unknown key): systemctl reload FAILS
# (non-zero exit), the journal has the reason at priority err naming file,
# line and key, STATUS= names the refusal, the running configuration and
# process stay, and HTTP is still served.
# timeout: 60
pid=$(main_pid)
mark=$(journal_mark)
conf_append '[scheduler]
workrs = 3'
show_fails systemctl reload voltd.service
show_journal "$mark" -u voltd.service -o cat
show_journal "$mark" -u voltd.service -o cat -p err
journal_since "$mark" -u voltd.service -p err -o cat | grep -q "$VOLTD_CONF:[0-9]*: scheduler.workrs: unknown key" ||
	fail "no err-priority journal line naming $VOLTD_CONF, the line and scheduler.workrs"
expect_eq "main PID after the refused reload" "$(main_pid)" "$pid"
expect_eq "voltd.service" "$(ct systemctl is-active voltd.service)" active
expect_eq "GET /healthz" "$(http_status /healthz)" 200
status=$(prop voltd.service StatusText)
note "StatusText: $status"
grep -q 'last reload refused: .*scheduler.workrs' <<<"$status" || fail "STATUS= does not name the refused reload"
show systemctl status --no-pager -n 5 voltd.service || true
