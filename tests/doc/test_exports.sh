#!/bin/sh
# SPDX-License-Identifier: MIT
# voltd exports nothing of its own: it is linked without -rdynamic, so a
# module (which imports no voltd symbol: every call goes through the host
# table of <voltd/module.h>) cannot bind to voltd's internals, by design or
# by accident. Every symbol voltd's dynamic table defines must be a
# library's (a copy relocation of a variable such as stdout), never one
# that libvolt.a or main.o defines.
# Usage: test_exports.sh (in the build tree, or with $VOLTD_BUILDDIR set).
set -u
b=${VOLTD_BUILDDIR:-.}
command -v nm >/dev/null || { echo "SKIP: no nm: install the Debian package binutils"; exit 77; }
for f in voltd libvolt.a; do
	[ -f "$b/$f" ] || { echo "test_exports: $b/$f not built" >&2; exit 99; }
done
main=$b/src/voltd/main.o
[ -f "$main" ] || { echo "test_exports: $main not built" >&2; exit 99; }
work=$(mktemp -d) || exit 99
trap 'rm -rf "$work"' EXIT

nm -D --defined-only "$b/voltd" | awk '{ sub(/@.*/, "", $NF); print $NF }' | sort -u >"$work/exported"
nm -g --defined-only "$b/libvolt.a" "$main" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u >"$work/own"
[ -s "$work/own" ] || { echo "test_exports: no symbol found in libvolt.a" >&2; exit 99; }
leaked=$(comm -12 "$work/exported" "$work/own")
if [ -n "$leaked" ]; then
	echo "voltd exports symbols of its own (linked with -rdynamic or --export-dynamic?):"
	echo "$leaked" | sed 's/^/    /'
	exit 1
fi
echo "test_exports: voltd's dynamic table defines $(wc -l <"$work/exported") symbol(s), none of its own ($(wc -l <"$work/own") in libvolt.a and main.o)"
