#!/bin/sh
# SPDX-License-Identifier: MIT
# The module author's documents say what the tree does:
# - the complete example of voltd-module(7) is examples/modules/hello/hello.c
#   (less its SPDX line), character for character once roff's escapes are
#   undone, so the page's example builds and is tested (test_examples.sh);
# - voltd-module(7) is named by voltd(8), voltd.conf(5) and README.md, and
#   voltd-modtest(1) by voltd-module(7);
# - every example folder has its Makefile and README.md, and the page's
#   FILES names each example.
# Usage: test_module_docs.sh [SRCDIR] (default $VOLTD_SRCDIR, else the checkout).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=${1:-${VOLTD_SRCDIR:-$here/../..}}
top=$(cd "$top" && pwd) || exit 99
page=$top/man/voltd-module.7
[ -r "$page" ] || { echo "test_module_docs: $page not found" >&2; exit 99; }
work=$(mktemp -d) || exit 99
trap 'rm -rf "$work"' EXIT
fails=0
fail() {
	echo "FAIL $*"
	fails=$((fails + 1))
}

sed -n '/^\.\\" BEGIN hello\.c/,/^\.\\" END hello\.c/p' "$page" | sed '1d;$d' |
	sed -e 's/\\-/-/g' -e 's/\\e/\\/g' -e 's/^\\&//' >"$work/page.c"
tail -n +2 "$top/examples/modules/hello/hello.c" >"$work/hello.c"
[ -s "$work/page.c" ] || fail "voltd-module(7) has no BEGIN hello.c ... END hello.c block"
diff -u "$work/hello.c" "$work/page.c" >"$work/diff" ||
	{ fail "voltd-module(7)'s example differs from examples/modules/hello/hello.c:"; cat "$work/diff"; }

for f in man/voltd.8 man/voltd.conf.5.in README.md; do
	grep -q 'voltd-module\|voltd\\-module' "$top/$f" || fail "$f does not name voltd-module(7)"
done
grep -q 'voltd\\-modtest (1)' "$page" || fail "voltd-module(7) does not name voltd-modtest(1)"

for d in "$top"/examples/modules/*/; do
	n=$(basename "$d")
	[ -f "$d/Makefile" ] && [ -f "$d/README.md" ] && [ -f "$d/$n.c" ] ||
		fail "examples/modules/$n lacks its Makefile, README.md or $n.c"
	sed -n '/^\.SH FILES/,/^\.SH SEE ALSO/p' "$page" | grep -q "$n" ||
		fail "voltd-module(7) FILES does not name the example $n"
done

if [ $fails -ne 0 ]; then
	echo "test_module_docs: $fails problem(s)"
	exit 1
fi
echo "test_module_docs: voltd-module(7)'s example is hello.c, the pages name each other, each example is whole"
