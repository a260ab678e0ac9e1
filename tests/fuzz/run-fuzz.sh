#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/fuzz/run-fuzz.sh: build the libFuzzer harness tests/fuzz/fuzz_http.c
# with clang (-fsanitize=fuzzer,address,undefined) from the sources of
# src/http, src/jobs and llhttp, then fuzz for FUZZ_SECONDS (default 20)
# starting from the seed corpus tests/fuzz/corpus/.
#
#   run-fuzz.sh               build and run (what `make check` does)
#   run-fuzz.sh --build-only  build only
#
# Exit: 0 no finding, 1 a crash or failed check (the input is kept as
# $builddir/tests/fuzz/crash-*), 77 clang or its fuzzer runtime missing
# (Debian: clang, libclang-rt-14-dev), 99 the harness does not build.
# New inputs found go to a scratch corpus, never into the source tree.
set -u

srcdir=${VOLTD_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${VOLTD_BUILDDIR:-$(pwd)}
seconds=${FUZZ_SECONDS:-20}

# Settings configure found, when run from a build tree.
mkvar() {
	[ -f "$builddir/Makefile" ] && sed -n "s/^$1 = //p" "$builddir/Makefile" | head -n 1
}
CLANG=${CLANG:-$(mkvar CLANG)}
CLANG=${CLANG:-clang}
LLHTTP_SRC=${LLHTTP_SRC:-$(mkvar LLHTTP_SRC)}
LLHTTP_SRC=${LLHTTP_SRC:-/usr/share/llhttp}
LLHTTP_INC=${LLHTTP_INC:-$(mkvar LLHTTP_INC)}
LLHTTP_INC=${LLHTTP_INC:-/usr/share/include/llhttp}

if ! command -v "$CLANG" >/dev/null 2>&1; then
	echo "SKIP: $CLANG not found (install the Debian packages clang and libclang-rt-14-dev)"
	exit 77
fi

out=$builddir/tests/fuzz
mkdir -p "$out" || exit 99
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT

printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n);\nint LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$tmp/probe.c"
if ! "$CLANG" -fsanitize=fuzzer,address,undefined "$tmp/probe.c" -o "$tmp/probe" >/dev/null 2>&1; then
	echo "SKIP: $CLANG cannot link -fsanitize=fuzzer (install the Debian package libclang-rt-14-dev)"
	exit 77
fi

bin=$out/fuzz_http
srcs="$srcdir/tests/fuzz/fuzz_http.c $srcdir/src/http/*.c $srcdir/src/jobs/*.c $srcdir/src/base/log.c $srcdir/src/base/query.c"
newer=no
[ -x "$bin" ] || newer=yes
for f in $srcs "$srcdir"/src/http/*.h "$srcdir"/src/jobs/*.h "$srcdir"/src/base/*.h; do
	[ "$f" -nt "$bin" ] && newer=yes
done
if [ $newer = yes ]; then
	echo "building $bin"
	objs=
	for f in api http llhttp; do
		# llhttp itself: strict mode, no UBSan noise from generated code
		"$CLANG" -c -g -O1 -w -DLLHTTP_STRICT_MODE=1 -fsanitize=fuzzer-no-link,address \
			-I"$LLHTTP_INC" "$LLHTTP_SRC/$f.c" -o "$tmp/ll_$f.o" || exit 99
		objs="$objs $tmp/ll_$f.o"
	done
	# shellcheck disable=SC2086
	"$CLANG" -std=gnu11 -g -O1 -Wall -Wextra -Wno-unused-parameter \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		-D_GNU_SOURCE -I"$srcdir/src" -I"$builddir" -I"$LLHTTP_INC" \
		$srcs $objs -lcrypto -lz -pthread -o "$bin" || exit 99
fi
[ "${1:-}" = --build-only ] && exit 0

mkdir -p "$tmp/corpus"
echo "fuzzing for ${seconds}s from $srcdir/tests/fuzz/corpus"
"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	-artifact_prefix="$out/" "$tmp/corpus" "$srcdir/tests/fuzz/corpus"
rc=$?
if [ $rc -ne 0 ]; then
	echo "FAIL: fuzz_http exited $rc; reproduce with: $bin $out/crash-*"
	exit 1
fi
exit 0
