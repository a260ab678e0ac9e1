#!/bin/sh
# SPDX-License-Identifier: MIT
# The layer test cannot be walked around: on a copy of src/ and doc/, each
# case below plants one defect and tests/doc/test_layers.sh must fail naming
# it; the untouched copy must pass. The spellings are those that passed the
# old test (issue 21): "../server/server.h", "rt/../server/server.h",
# <server/server.h> in src/chan/.
# Usage: test_layers_selftest.sh [SRCDIR] (default $VOLTD_SRCDIR, else the checkout).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=${1:-${VOLTD_SRCDIR:-$here/../..}}
top=$(cd "$top" && pwd) || exit 99
work=$(mktemp -d) || exit 99
trap 'rm -rf "$work"' EXIT
fails=0

fresh() { # a clean copy of what test_layers.sh reads
	rm -rf "$work/t" && mkdir "$work/t" &&
	cp -R "$top/src" "$top/include" "$top/doc" "$work/t/" || exit 99
}
# expect NAME PATTERN: test_layers.sh on the copy fails and prints PATTERN.
expect() {
	out=$(sh "$here/test_layers.sh" "$work/t" 2>&1)
	rc=$?
	if [ $rc -ne 1 ] || ! printf '%s\n' "$out" | grep -qF -- "$2"; then
		echo "FAIL $1: exit $rc, wanted 1 and '$2'; it said:"
		printf '%s\n' "$out" | sed 's/^/    /'
		fails=$((fails + 1))
	else
		echo "ok   $1: $(printf '%s\n' "$out" | grep -F -- "$2" | head -1)"
	fi
}
plant() { # FILE LINE: append LINE to FILE in the copy
	mkdir -p "$(dirname "$work/t/$1")" && printf '%s\n' "$2" >>"$work/t/$1"
}

fresh
if out=$(sh "$here/test_layers.sh" "$work/t" 2>&1); then
	echo "ok   untouched copy passes"
else
	echo "FAIL untouched copy: $out"
	fails=$((fails + 1))
fi

for inc in '"../server/server.h"' '"rt/../server/server.h"' '<server/server.h>' \
	'/* a comment */ "server/server.h"' '"./../server/server.h"' "\"$work/t/src/server/server.h\""; do
	fresh
	plant src/chan/waitq.c "#include $inc"
	expect "chan includes $inc" "src/chan/waitq.c:"
	expect "chan includes $inc (layer)" "chan may not use server"
done

fresh
plant src/chan/waitq.c '#  include \
    "server/server.h"'
expect "continued line" "chan may not use server"

fresh
plant src/chan/deep/x.c '#include "server/server.h"'
expect "a file in a subfolder" "src/chan/deep/x.c:1: includes server/server.h: chan may not use server"

fresh
plant src/chan/waitq.c '#include "../rt/rt.h"'
expect "an allowed layer, spelled another way" 'spell it "rt/rt.h"'

fresh
plant src/chan/waitq.c '#define H "server/server.h"
#include H'
expect "an include of a macro" "#include of a macro"

fresh
plant src/chan/waitq.c '#include "rt/internal.h"'
expect "another layer's internal.h" "internal.h is private to src/rt/"

fresh
plant src/chan/waitq.c '#include <liburing.h>'
expect "an external header out of its place" "includes <liburing.h>: only src/io/uring"

fresh
sed -i 's|^\(external[[:space:]]*ev\.h[[:space:]].*\)$|\1 src/chan/waitq.c|' "$work/t/doc/layers.txt"
plant src/chan/waitq.c '#include <ev.h>'
if out=$(sh "$here/test_layers.sh" "$work/t" 2>&1); then
	echo "ok   an external header in the second of its places passes"
else
	echo "FAIL an external header in the second of its places: $out"
	fails=$((fails + 1))
fi
plant src/rt/task.c '#include <ev.h>'
expect "an external header out of all its places" "src/rt/task.c:"
expect "an external header out of all its places (names them)" "only src/io/evloop.c, src/chan/waitq.c may"

fresh
mkdir "$work/t/src/extra"
expect "a folder the table lacks" "src/extra/: not in doc/layers.txt"

fresh
sed -i 's/^\(chan[[:space:]].*\)$/\1 http/' "$work/t/doc/layers.txt"
expect "an allowance nobody uses" "chan may use http, but no file"

fresh
sed -i 's/^\(base[[:space:]]*src\/base[[:space:]]*\)-$/\1 rt/' "$work/t/doc/layers.txt"
expect "a cycle" "base may use rt, which is not listed before it"

fresh
sed -i 's/^\(| chan | `src\/chan\/` | .*\) | base, rt |$/\1 | base |/' "$work/t/doc/ARCHITECTURE.md"
expect "the map disagrees" "(Layers): chan may include 'base', doc/layers.txt says 'base rt'"

fresh
plant src/jobs/abi.c '#include "voltd/module.h"'
expect "the public header, spelled as a project header" 'spell it <voltd/module.h>'

fresh
plant src/rt/task.c '#include <voltd/module.h>'
expect "the public header where the table does not allow it" "rt may not use api"

fresh
plant include/voltd/module.h '#include "base/compiler.h"'
expect "the public header includes voltd's own" "include/voltd/module.h:"
expect "the public header includes voltd's own (layer)" "api may not use base"

if [ $fails -ne 0 ]; then
	echo "test_layers_selftest: $fails case(s) walked around tests/doc/test_layers.sh"
	exit 1
fi
echo "test_layers_selftest: test_layers.sh caught every planted defect"
