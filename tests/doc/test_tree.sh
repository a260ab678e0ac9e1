#!/bin/sh
# SPDX-License-Identifier: MIT
# The tree holds sources only (issue 21):
# - no tracked file is a build output: objects, archives, executables (by
#   their first bytes: ELF, ar), logs, test results, autotools outputs,
#   the build's generated files, packages (the example modules' own
#   Makefiles are sources);
# - .gitignore is complete: every file the build tree this test runs in
#   ($VOLTD_BUILDDIR, else the current directory when it holds
#   config.status) made would be ignored at the same place in the source
#   tree (an in-tree build), and no untracked file that looks like a build
#   output escapes .gitignore;
# - no source, test or map file points outside the repository (a sibling
#   checkout's shared/, a review, a machine's absolute path); bench/README.md,
#   the sittings under bench/sittings/ and bench/chan_compare.sh, which say
#   where the benchmark peers live, and this file, which names the patterns,
#   are the exceptions.
# Usage: test_tree.sh [SRCDIR] (default $VOLTD_SRCDIR, else the checkout).
# Skips (77) when SRCDIR is not a git checkout (a release tarball holds
# what make dist put there, nothing to tell apart).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=${1:-${VOLTD_SRCDIR:-$here/../..}}
top=$(cd "$top" && pwd) || exit 99
if [ ! -e "$top/.git" ]; then
	echo "SKIP: $top is not a git checkout (a release tarball, a package build): nothing to tell apart"
	exit 77
fi
command -v git >/dev/null || { echo "SKIP: install the Debian package git"; exit 77; }
[ "$(git -C "$top" rev-parse --show-toplevel 2>/dev/null)" = "$top" ] ||
	{ echo "test_tree: $top/.git is not a git checkout's" >&2; exit 99; }
errs=$(mktemp) || exit 99
list=$(mktemp) || exit 99
trap 'rm -f "$errs" "$list"' EXIT

# A path that names a build output (one per line on stdin, printed if so).
outputs() {
	grep -E '(^|/)(.*\.(o|lo|a|la|so|gcda|gcno|trs|log|out|deb|ddeb|changes|buildinfo|dsc|tar\.[a-z0-9]+)|core(\.[0-9]+)?|vgcore\.[0-9]+|a\.out|Makefile|Makefile\.in|configure|config\.status|config\.h|config\.h\.in|stamp-h[0-9]*|aclocal\.m4|libtool|\.dirstamp|ctl-schemas\.inc|voltd-defaults\.h|crash-[0-9a-f]+|leak-[0-9a-f]+|timeout-[0-9a-f]+)$|(^|/)(\.deps|autom4te\.cache|build-aux|__pycache__|\.pytest_cache)/'
}

# The example modules' Makefiles are sources: each example is built out of
# the tree by its own.
sources() { grep -v '^examples/modules/[^/]*/Makefile$'; }

# 1. Tracked files: by name, then by content.
git -C "$top" ls-files | sources | outputs | sed 's/$/: a build output is tracked (git rm --cached it; .gitignore it)/' >>"$errs"
git -C "$top" ls-files -z | (cd "$top" && xargs -0 -r sh -c '
	for f; do
		[ -f "$f" ] && [ ! -L "$f" ] || continue
		case $(head -c 4 "$f" | od -An -c | tr -d " ") in
		177ELF) echo "$f: an executable or object (ELF) is tracked" ;;
		"!<ar") echo "$f: an archive is tracked" ;;
		esac
	done' sh) >>"$errs"

# 2. .gitignore: the build tree's files, at the same place in the source tree.
b=${VOLTD_BUILDDIR:-$PWD}
if [ -f "$b/config.status" ] && [ "$(cd "$b" && pwd)" != "$top" ]; then
	b=$(cd "$b" && pwd)
	(cd "$b" && find . -type f ! -name '*.tmp' | sed 's|^\./||') | sort >"$list"
	n=$(wc -l <"$list")
	git -C "$top" check-ignore --no-index --stdin <"$list" | sort |
		comm -23 "$list" - | sed 's|$|: made by the build, not ignored by .gitignore (an in-tree build would leave it untracked)|' >>"$errs"
	echo "test_tree: the $n files of the build tree $b would all be ignored in the source tree" >"$list.msg"
else
	echo "test_tree: no build tree here (no config.status in ${VOLTD_BUILDDIR:-$PWD}): only untracked files checked for .gitignore" >"$list.msg"
fi
git -C "$top" ls-files --others --exclude-standard | sources | outputs |
	sed 's/$/: looks like a build output, untracked and not in .gitignore/' >>"$errs"

# 3. Nothing points outside the repository.
git -C "$top" ls-files src tests bench doc man conf |
	grep -v -e '^bench/README\.md$' -e '^bench/sittings/[^/]*\.md$' -e '^bench/chan_compare\.sh$' -e '^tests/doc/test_tree\.sh$' |
	(cd "$top" && xargs -r grep -nIE '\.\./shared|shared/peers|shared/reviews|reviews/review|/work/|/home/[a-z]') |
	sed 's/$/   <- points outside the repository/' >>"$errs"

if [ -s "$errs" ]; then
	cat "$errs"
	echo "test_tree: $(wc -l <"$errs") problem(s)"
	rm -f "$list.msg"
	exit 1
fi
cat "$list.msg"
rm -f "$list.msg"
echo "test_tree: no build output tracked, .gitignore covers the build, no file points outside the repository"
