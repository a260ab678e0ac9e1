#!/bin/sh
# SPDX-License-Identifier: MIT
# voltd-modtest, the harness module authors test with, on the probe module
# (tests/modules/modtest_probe.c):
# - the request reaches the kind as voltd gives it (method, path, query,
#   header fields in order and by name, the body) and the response comes
#   back (status line, the kind's header fields, Content-Length, body);
# - routing as voltd's: a prefix route, 405 and 404 are exit 2;
# - a HEAD request gets the head with the body's Content-Length, no body; a
#   204 neither;
# - a kind that fails (-EIO) is voltd's 500 and exit 1; a step of 30 ms
#   against --max-step-us 1000 is exit 1 (over budget), and without the
#   option exit 0;
# - refusals are exit 78 with voltd's words: not a shared object, a module
#   whose name is not its file's, an unknown key, a bad value; --check;
# - like voltd, it exports no symbol of its own for a module to bind to.
# Usage: test_modtest.sh (VOLTD_BUILDDIR, VOLTD_SRCDIR: the build and source trees).
set -u
b=${VOLTD_BUILDDIR:?}
s=${VOLTD_SRCDIR:?}
modtest=$b/voltd-modtest
[ -x "$modtest" ] || { echo "test_modtest: $modtest not built" >&2; exit 99; }
cc=${CC:-cc}
work=$(mktemp -d) || exit 99
trap 'rm -rf "$work"' EXIT
fails=0
fail() {
	echo "FAIL $*"
	fails=$((fails + 1))
}
so() { # SRC NAME: build SRC as $work/NAME.so
	"$cc" -I"$s/include" -O2 -Wall -Wextra -Werror -fPIC -fvisibility=hidden -shared \
		-o "$work/$2.so" "$1" || { echo "test_modtest: cannot build $1" >&2; exit 99; }
}
so "$s/tests/modules/modtest_probe.c" probe
run() { # EXPECTED-EXIT ARGS...: run voltd-modtest; out, err in $work
	want=$1
	shift
	"$modtest" "$@" >"$work/out" 2>"$work/err"
	rc=$?
	[ $rc -eq "$want" ] || fail "voltd-modtest $*: exit $rc, expected $want: $(cat "$work/out" "$work/err")"
}
has() { # FILE LINE: FILE has LINE, whole
	grep -qxF -- "$2" "$work/$1" || fail "no line '$2' in the $1 of voltd-modtest: $(cat "$work/$1")"
}

# The request through, the response back.
printf 'a body' >"$work/body"
run 0 "$work/probe.so" probe_echo --method PUT --query 'a=1&b=%20' --header 'X-One:  first  ' \
	--header 'x-two: second' --header 'X-One: again' --body "$work/body"
has out 'HTTP/1.1 200 OK'
has out 'Content-Type: text/plain'
has out 'X-Probe: yes'
has out 'method PUT'
has out 'path /t/echo'
has out 'query a=1&b=%20'
has out 'x-one first'
has out 'header 0 X-One=first'
has out 'header 1 x-two=second'
has out 'header 2 X-One=again'
has out 'body 6 a body'
has err 'request: PUT /t/echo?a=1&b=%20, kind probe_echo'
has err 'slices: 1'
grep -q '^job: in a reused job block (a state of up to [0-9]* bytes fits: no allocation)$' "$work/err" ||
	fail "the job's block: $(cat "$work/err")"
printf 'from stdin' | "$modtest" "$work/probe.so" probe_echo --body - >"$work/out" 2>/dev/null
has out 'method POST'
has out 'body 10 from stdin'
run 0 "$work/probe.so" probe_echo --out "$work/body.out"
grep -qx 'body 0 ' "$work/body.out" || fail "--out: $(cat "$work/body.out")"
grep -q '^body' "$work/out" && fail "--out: the body went to stdout too"

# Routing.
run 0 "$work/probe.so" probe_prefix --path /t/p/some/thing
has out 'under the prefix: /t/p/some/thing'
run 2 "$work/probe.so" probe_echo --method GET
grep -q 'voltd answers 405, Allow: POST, PUT' "$work/err" || fail "405: $(cat "$work/err")"
run 2 "$work/probe.so" probe_prefix --path /t/q
grep -q 'voltd answers 404' "$work/err" || fail "404: $(cat "$work/err")"
run 2 "$work/probe.so" probe_nothing
run 2 "$work/probe.so" probe_echo --header 'no colon'

# HEAD, and a status without a body.
run 0 "$work/probe.so" probe_status --method HEAD
has out 'HTTP/1.1 200 OK'
has out 'Content-Length: 11'
grep -q '^status' "$work/out" && fail "HEAD: a body: $(cat "$work/out")"
run 0 "$work/probe.so" probe_status --query s=204
has out 'HTTP/1.1 204 No Content'
grep -q '^Content-Length\|^status' "$work/out" && fail "204: a Content-Length or a body: $(cat "$work/out")"

# Failures and budgets.
run 1 "$work/probe.so" probe_fail
has out 'HTTP/1.1 500 Internal Server Error'
grep -q '^failed: kind probe_fail returned -5 ' "$work/err" || fail "the failure is not named: $(cat "$work/err")"
run 1 "$work/probe.so" probe_slow --max-step-us 1000
grep -q '^over budget: step 1 ran [0-9.]* ms, above --max-step-us 1000$' "$work/err" ||
	fail "the step over budget is not named: $(cat "$work/err")"
run 0 "$work/probe.so" probe_slow
has out 'slow'

# Refusals, in voltd's words.
echo 'not a module' >"$work/text.so"
run 78 "$work/text.so" x
grep -q 'text.so: not an ELF shared object' "$work/err" || fail "text: $(cat "$work/err")"
cp "$work/probe.so" "$work/other.so"
run 78 "$work/other.so" probe_prefix
grep -q 'module name "probe", expected "other"' "$work/err" || fail "name: $(cat "$work/err")"
run 0 --name probe "$work/other.so" probe_prefix --path /t/p/x
has out 'under the prefix: /t/p/x'
run 78 "$work/probe.so" probe_fail --set limt=5
grep -q '^voltd-modtest: module.probe.limt: unknown key (the module declares limit, fail_init)$' "$work/err" ||
	fail "key: $(cat "$work/err")"
run 78 "$work/probe.so" probe_fail --set limit=x
grep -q "^voltd-modtest: module.probe.limit: 'x' is not a whole number" "$work/err" || fail "value: $(cat "$work/err")"
run 78 "$work/probe.so" probe_fail --set limit=101
run 78 "$work/probe.so" probe_fail --set fail_init=on
grep -q '^voltd-modtest: module.probe: .*probe.so: init failed: fail_init is on$' "$work/err" ||
	fail "init: $(cat "$work/err")"
run 0 --check "$work/probe.so" --set limit=5
has err 'module OK'

# No symbol of its own in the dynamic table.
if command -v nm >/dev/null; then
	nm -D --defined-only "$modtest" | awk '{ sub(/@.*/, "", $NF); print $NF }' | sort -u >"$work/exported"
	nm -g --defined-only "$b/libvolt.a" "$b/src/modtest/main.o" 2>/dev/null | awk 'NF == 3 { print $3 }' |
		sort -u >"$work/own"
	leaked=$(comm -12 "$work/exported" "$work/own")
	[ -z "$leaked" ] || fail "voltd-modtest exports its own symbols: $leaked"
fi

if [ $fails -ne 0 ]; then
	echo "test_modtest: $fails failure(s)"
	exit 1
fi
echo "test_modtest: requests through, responses back, routing, failures, budgets and refusals as voltd's"
