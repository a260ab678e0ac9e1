# SPDX-License-Identifier: MIT
# systemctl reload with a good file: exit 0, the same main process, the
# live key changed in the file is applied (voltctl config shows it and
# where it came from), the journal says the configuration was re-read.
# timeout: 60
pid=$(main_pid)
mark=$(journal_mark)
conf_append '[jobs]
sleep_max_ms = 30000'
show systemctl reload voltd.service || {
	show_journal "$mark" -u voltd.service -o cat
	fail "systemctl reload with a good file failed"
}
expect_eq "main PID after the reload" "$(main_pid)" "$pid"
show voltctl config jobs.sleep_max_ms
ct voltctl config jobs.sleep_max_ms | grep -Eq '^ *jobs\.sleep_max_ms +30000 ' ||
	fail "jobs.sleep_max_ms is not 30000 after the reload"
expect_eq "GET /v1/sleep?ms=30001 (above the new maximum)" "$(http_status '/v1/sleep?ms=30001')" 400
show_journal "$mark" -u voltd.service -o cat
journal_since "$mark" -u voltd.service -o cat | grep -q 'reload: configuration re-read' ||
	fail "no 'reload: configuration re-read' in the journal"
note "StatusText: $(prop voltd.service StatusText)"
