#!/bin/sh
# SPDX-License-Identifier: MIT
# <voltd/module.h>, the only surface a module sees, stands on its own:
# - it includes libc headers only (of those C11 and C++ both have);
# - it compiles alone as C11 and as C++17 with -Wall -Wextra -Werror
#   -pedantic, and a module written with its macros (VOLTD_MODULE_HEAD,
#   VOLTD_MODULE, VOLTD_HAS) compiles as C11 and as C++20 (whose
#   designated initialisers the macros use) the same way;
# - such a module, built -fPIC -shared -fvisibility=hidden, exports exactly
#   one symbol, the entry voltd looks up.
# Its layout is pinned by src/jobs/abi.c (the build fails on a break).
# Usage: test_module_header.sh [SRCDIR] (default $VOLTD_SRCDIR, else the checkout).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=${1:-${VOLTD_SRCDIR:-$here/../..}}
top=$(cd "$top" && pwd) || exit 99
h=$top/include/voltd/module.h
[ -r "$h" ] || { echo "test_module_header: $h not found" >&2; exit 99; }
cc=${CC:-cc}
cxx=${CXX:-c++}
command -v "$cxx" >/dev/null 2>&1 || { echo "SKIP: no C++ compiler ($cxx): install the Debian package g++"; exit 77; }
work=$(mktemp -d) || exit 99
trap 'rm -rf "$work"' EXIT
fails=0
fail() {
	echo "FAIL $*"
	fails=$((fails + 1))
}

# 1. Its includes: libc headers both languages have, nothing else.
incs=$(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*//p' "$h")
for i in $incs; do
	case $i in
	'<stddef.h>' | '<stdint.h>') ;;
	*) fail "module.h includes $i: only <stddef.h> and <stdint.h> (libc, in C and C++)" ;;
	esac
done

# 2. Alone.
strict="-Wall -Wextra -Werror -pedantic -I$top/include"
printf '#include <voltd/module.h>\n' >"$work/alone.c"
cp "$work/alone.c" "$work/alone.cc"
$cc -std=c11 $strict -c "$work/alone.c" -o "$work/alone.o" 2>"$work/err" ||
	fail "alone as C11: $(cat "$work/err")"
$cxx -std=c++17 $strict -c "$work/alone.cc" -o "$work/alone.o" 2>"$work/err" ||
	fail "alone as C++17: $(cat "$work/err")"

# 3. A module written with its macros.
cat >"$work/mod.c" <<'MOD'
#include <voltd/module.h>

static int step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	(void)state;
	(void)deadline_ns;
	if (VOLTD_HAS(respond))
		return voltd->respond(job, 200, "text/plain", "hi\n", 3, VOLTD_BODY_STATIC);
	return -1;
}

static const struct voltd_kind kinds[] = {
	{ .name = "hello", .route = "/hello", .methods = "GET", .step = step },
	{ .name = 0 },
};

static const struct voltd_module hello = {
	VOLTD_MODULE_HEAD,
	.name = "hello",
	.version = "1",
	.kinds = kinds,
};

VOLTD_MODULE(hello)
MOD
cp "$work/mod.c" "$work/mod.cc"
$cc -std=c11 $strict -fPIC -fvisibility=hidden -shared "$work/mod.c" -o "$work/mod.so" 2>"$work/err" ||
	fail "a module as C11: $(cat "$work/err")"
# g++ 12's -Wextra counts a member a C++ designated initialiser leaves out
# as missing (C does not, nor does g++ 13): the module's style, not the header.
$cxx -std=c++20 $strict -Wno-missing-field-initializers -fPIC -fvisibility=hidden -shared "$work/mod.cc" -o "$work/modxx.so" 2>"$work/err" ||
	fail "a module as C++20: $(cat "$work/err")"

# 4. It exports the entry alone.
if [ -f "$work/mod.so" ] && command -v nm >/dev/null; then
	exported=$(nm -D --defined-only "$work/mod.so" | awk '{ print $NF }' | sort | tr '\n' ' ')
	[ "$exported" = "voltd_module_v1 " ] ||
		fail "a module exports '$exported', not only voltd_module_v1"
fi

if [ $fails -ne 0 ]; then
	echo "test_module_header: $fails problem(s) with include/voltd/module.h"
	exit 1
fi
echo "test_module_header: <voltd/module.h> includes libc only, compiles alone (C11, C++17) and as a module (C11, C++20), which exports its entry alone"
