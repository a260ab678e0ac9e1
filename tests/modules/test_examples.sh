#!/bin/sh
# SPDX-License-Identifier: MIT
# The example modules (examples/modules/*/) built and tested as a module
# author does it: each by its own Makefile, make then make check (through
# voltd-modtest), with pkg-config finding this tree's header through the
# build's voltd-uninstalled.pc, so the flags are the Makefile's (pkg-config's
# -I, -fPIC -fvisibility=hidden -shared), with warnings as errors. Each
# exports its entry alone. Then the example count against voltd's built-in
# spin: the same answer for the same n (the benchmark compares the two).
# Usage: test_examples.sh (VOLTD_BUILDDIR, VOLTD_SRCDIR: the build and source trees).
set -u
b=${VOLTD_BUILDDIR:?}
s=${VOLTD_SRCDIR:?}
modtest=$b/voltd-modtest
[ -x "$modtest" ] || { echo "test_examples: $modtest not built" >&2; exit 99; }
[ -f "$b/voltd-uninstalled.pc" ] || { echo "test_examples: $b/voltd-uninstalled.pc not made" >&2; exit 99; }
command -v pkg-config >/dev/null || { echo "SKIP: no pkg-config: install the Debian package pkg-config"; exit 77; }
work=$b/tests/modules/examples
rm -rf "$work"
mkdir -p "$work" || exit 99
fails=0
fail() {
	echo "FAIL $*"
	fails=$((fails + 1))
}
ex() { # DIR ARGS...: the example's own Makefile, in DIR
	d=$1
	shift
	PKG_CONFIG_PATH=$b make -s -f "$s/examples/modules/$d/Makefile" -C "$work/$d" \
		MODTEST="$modtest" CFLAGS='-O2 -g -Wall -Wextra -Werror' "$@"
}

n=0
for dir in "$s"/examples/modules/*/; do
	d=$(basename "$dir")
	[ -f "$dir/Makefile" ] || continue
	n=$((n + 1))
	mkdir -p "$work/$d"
	if ! ex "$d" >"$work/$d.log" 2>&1; then
		fail "$d: make"
		sed 's/^/    /' "$work/$d.log"
		continue
	fi
	so=$work/$d/$d.so
	exported=$(nm -D --defined-only "$so" | awk '{ print $NF }' | tr '\n' ' ')
	[ "$exported" = "voltd_module_v1 " ] || fail "$d: $d.so exports '$exported', not voltd_module_v1 alone"
	if ex "$d" check >"$work/$d.log" 2>&1; then
		echo "$d: built, make check passed"
	else
		fail "$d: make check"
		sed 's/^/    /' "$work/$d.log"
	fi
done
[ "$n" -ge 3 ] || fail "only $n examples under $s/examples/modules"

# count and spin: one answer per n (the edges of the loop's 4096-round chunks too).
if [ -f "$work/count/count.so" ]; then
	for q in 0 1 7 1000 4095 4096 4097 65536 2000000; do
		a=$("$modtest" "$work/count/count.so" count --query "n=$q" 2>/dev/null | tail -1)
		want=$("$modtest" "$work/count/count.so" spin --query "n=$q" 2>/dev/null | tail -1)
		[ -n "$want" ] && [ "$a" = "$want" ] || fail "count n=$q answered '$a', spin '$want'"
	done
	echo "count: the answers of the built-in spin for n = 0 1 7 1000 4095 4096 4097 65536 2000000"
fi

if [ $fails -ne 0 ]; then
	echo "test_examples: $fails failure(s)"
	exit 1
fi
rm -rf "$work"
echo "test_examples: $n examples built with pkg-config and checked"
