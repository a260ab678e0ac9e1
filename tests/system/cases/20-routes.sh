# SPDX-License-Identifier: MIT
# Every route of the README (curl inside the container, through the socket
# unit on the container's own 127.0.0.1:8080), with the answers the README
# and voltd(8) give.
# timeout: 60
body() { http "$@" | sed '$d'; }
code() { http "$@" | sed -n '$s/^http=\([0-9]*\) .*/\1/p'; }
readme=$CT_TOOLS/README.md

expect_eq "GET /healthz" "$(body /healthz) $(code /healthz)" "ok 200"
expect_eq "HEAD /healthz" "$(code -I /healthz)" 200
expect_eq "GET /readyz" "$(code /readyz)" 200
expect_eq "GET /livez" "$(code /livez)" 200
expect_eq "GET /v1/spin?n=1000" "$(body '/v1/spin?n=1000')" 6248290529083013365
want=$(ct sha256sum "$readme" | cut -d' ' -f1)
got=$(body --data-binary "@$readme" '/v1/hash?alg=sha256')
expect_eq "POST /v1/hash?alg=sha256 (README.md) = sha256sum" "$got" "$want"
want=$(ct sha512sum "$readme" | cut -d' ' -f1)
got=$(body --data-binary "@$readme" '/v1/hash?alg=sha512')
expect_eq "POST /v1/hash?alg=sha512 (README.md) = sha512sum" "$got" "$want"
ct sh -c "curl -sS --max-time 30 --data-binary @$readme 'http://127.0.0.1:8080/v1/gzip?level=6' | gunzip | cmp - $readme" ||
	fail "POST /v1/gzip?level=6 | gunzip differs from README.md"
note "POST /v1/gzip?level=6 (README.md) | gunzip: identical to README.md"
show curl -sS --max-time 30 -w '\nhttp=%{http_code} time=%{time_total}s\n' 'http://127.0.0.1:8080/v1/sleep?ms=250'
expect_eq "GET /v1/sleep?ms=250" "$(code '/v1/sleep?ms=250')" 200
expect_eq "POST /v1/echo" "$(body --data-binary 'hello voltd' /v1/echo)" "hello voltd"
expect_eq "GET /nope" "$(code /nope)" 404
expect_eq "POST /v1/spin" "$(code -X POST '/v1/spin?n=1')" 405
show curl -sS -i --max-time 30 -X POST 'http://127.0.0.1:8080/v1/spin?n=1'
