#!/bin/sh
# SPDX-License-Identifier: MIT
# The files that repeat the schema's facts (src/voltd/cfg_schema.c) are exactly what
# voltd-schema renders from it: the key sections of man/voltd.conf.5 (prose
# in man/voltd.conf.5.in), conf/voltd.conf (prose in conf/voltd.conf.in) and
# tests/helpers/test_config.h. On a difference it prints the diff: run
# `make regen` after changing the schema or a template, and commit the result.
# Usage: test_schema_docs.sh (VOLTD_SRCDIR and VOLTD_BUILDDIR from make check).
set -u
src=${VOLTD_SRCDIR:?}
gen=${VOLTD_BUILDDIR:?}/voltd-schema
[ -x "$gen" ] || { echo "test_schema_docs: $gen not built" >&2; exit 99; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # FILE GENERATOR-ARGS...
	file=$1; shift
	"$gen" "$@" >"$tmp/out" || { echo "test_schema_docs: voltd-schema $* failed" >&2; exit 99; }
	if ! diff -u "$src/$file" "$tmp/out" >"$tmp/diff"; then
		echo "$file differs from what the schema renders (run make regen):"
		cat "$tmp/diff"
		fail=1
	fi
}
check man/voltd.conf.5 man "$src/man/voltd.conf.5.in"
check conf/voltd.conf conf "$src/conf/voltd.conf.in"
check tests/helpers/test_config.h test-config
exit $fail
