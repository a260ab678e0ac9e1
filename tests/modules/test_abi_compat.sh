#!/bin/sh
# SPDX-License-Identifier: MIT
# Modules built against other minors of the module ABI, loaded by this
# voltd's loader (voltd-modtest), as the header's "Versions" promises:
# - against ABI 1.0 as published (tests/modules/abi-1.0/, a copy of the 1.0
#   header kept as it was): loads and serves on this voltd, whatever minor
#   it speaks now (a module never needs a rebuild within a major);
# - against a newer minor (this header with VOLTD_MODULE_ABI_MINOR one
#   above this voltd's) saying VOLTD_MODULE_HEAD_RUNS_ON(0): loads and
#   serves (it tests newer calls with VOLTD_HAS);
# - the same with VOLTD_MODULE_HEAD (it needs the newer minor): refused,
#   exit 78, with the minor it needs and the one this voltd speaks;
# - against a header of the next major (its entry voltd_module_v2): refused,
#   saying which major it was built for.
# Each is examples/modules/count, built -fPIC -fvisibility=hidden -shared.
# Usage: test_abi_compat.sh (VOLTD_BUILDDIR, VOLTD_SRCDIR: the build and source trees).
set -u
b=${VOLTD_BUILDDIR:?}
s=${VOLTD_SRCDIR:?}
modtest=$b/voltd-modtest
[ -x "$modtest" ] || { echo "test_abi_compat: $modtest not built" >&2; exit 99; }
cc=${CC:-cc}
work=$(mktemp -d) || exit 99
trap 'rm -rf "$work"' EXIT
fails=0
fail() {
	echo "FAIL $*"
	fails=$((fails + 1))
}
h=$s/include/voltd/module.h
major=$(sed -n 's/^#define VOLTD_MODULE_ABI_MAJOR \([0-9]*\)$/\1/p' "$h")
minor=$(sed -n 's/^#define VOLTD_MODULE_ABI_MINOR \([0-9]*\)$/\1/p' "$h")
[ "$major" = 1 ] || { echo "test_abi_compat: written for major 1, the header is $major: write it anew" >&2; exit 99; }
next=$((minor + 1))

build() { # NAME INCLUDE-DIR [SED-EXPR]: count.c (edited by SED-EXPR) as NAME/count.so
	mkdir -p "$work/$1"
	sed -e "${3:-}" "$s/examples/modules/count/count.c" >"$work/$1/count.c"
	"$cc" -I"$2" -O2 -Wall -Wextra -Werror -fPIC -fvisibility=hidden -shared \
		-o "$work/$1/count.so" "$work/$1/count.c" 2>"$work/$1/cc.err" ||
		{ fail "$1: build: $(cat "$work/$1/cc.err")"; return 1; }
}
serves() { # NAME: count.so loads and answers n=1000
	out=$("$modtest" "$work/$1/count.so" count --query n=1000 2>"$work/$1/err")
	rc=$?
	[ $rc -eq 0 ] && printf '%s\n' "$out" | grep -qx 6248290529083013365 ||
		{ fail "$1: exit $rc, not served: $out $(cat "$work/$1/err")"; return 1; }
	echo "$1: loads and serves ($(grep '^module:' "$work/$1/err"))"
}
refused() { # NAME PATTERN: count.so refused (exit 78) with a line matching PATTERN
	"$modtest" "$work/$1/count.so" count --query n=1000 >/dev/null 2>"$work/$1/err"
	rc=$?
	[ $rc -eq 78 ] && grep -q "$2" "$work/$1/err" ||
		{ fail "$1: exit $rc, expected 78 and '$2': $(cat "$work/$1/err")"; return 1; }
	echo "$1: refused: $(cat "$work/$1/err")"
}

# 1.0 as published.
grep -q '^#define VOLTD_MODULE_ABI_MINOR 0$' "$s/tests/modules/abi-1.0/voltd/module.h" ||
	fail "tests/modules/abi-1.0/voltd/module.h is not the 1.0 header"
build abi-1.0 "$s/tests/modules/abi-1.0" && serves abi-1.0

# A newer minor than this voltd's.
mkdir -p "$work/newer/voltd"
sed "s/^#define VOLTD_MODULE_ABI_MINOR $minor\$/#define VOLTD_MODULE_ABI_MINOR $next/" "$h" >"$work/newer/voltd/module.h"
grep -q "^#define VOLTD_MODULE_ABI_MINOR $next\$" "$work/newer/voltd/module.h" || fail "could not bump the minor"
build runs-on-0 "$work/newer" 's/^\tVOLTD_MODULE_HEAD,$/\tVOLTD_MODULE_HEAD_RUNS_ON(0),/' &&
	grep -q 'VOLTD_MODULE_HEAD_RUNS_ON(0)' "$work/runs-on-0/count.c" && serves runs-on-0
build needs-newer "$work/newer" && refused needs-newer "needs module ABI 1\.$next or later"

# The next major: its entry is voltd_module_v2.
mkdir -p "$work/major2/voltd"
sed -e 's/^#define VOLTD_MODULE_ABI_MAJOR 1$/#define VOLTD_MODULE_ABI_MAJOR 2/' \
	-e 's/voltd_module_v1/voltd_module_v2/g' "$h" >"$work/major2/voltd/module.h"
build major-2 "$work/major2" && refused major-2 "built for module ABI 2"

if [ $fails -ne 0 ]; then
	echo "test_abi_compat: $fails failure(s)"
	exit 1
fi
echo "test_abi_compat: 1.0 and 1.$next with RUNS_ON(0) load on this voltd ($major.$minor); 1.$next needing it and 2.x are refused"
