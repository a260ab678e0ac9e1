#!/bin/sh
# SPDX-License-Identifier: MIT
# Comments under src/ give reasons, not provenance: no issue number
# ("issue 17", "issues 19 and 20", "#12"), no review or its labels ("review
# N2", "(D16)", "D16: ...", "item 4", "defect 5", "finding 4"). Which issue
# or review asked for a change belongs in its commit message, where git
# keeps it; the comment keeps the why. Ordering labels ([W4], [CR3]) are
# square-bracketed and not matched.
# Usage: test_comments.sh [SRCDIR] (default $VOLTD_SRCDIR, else the checkout).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=${1:-${VOLTD_SRCDIR:-$here/../..}}
top=$(cd "$top" && pwd) || exit 99
[ -d "$top/src" ] || { echo "test_comments: $top/src not found" >&2; exit 99; }
errs=$(mktemp) || exit 99
trap 'rm -f "$errs"' EXIT

(cd "$top" && find src -type f \( -name '*.c' -o -name '*.h' -o -name '*.inc' -o -name '*.mk' \) | sort |
	xargs grep -nHIE -i '\bissues? #?[0-9]+|\breview(s|ed|er)?\b|\bitem [0-9]+\b|\bdefect [0-9]+\b|\bfinding [0-9]+\b') |
	sed 's/$/   <- provenance in a comment: keep the reason, name the issue or review in the commit message/' >>"$errs"
(cd "$top" && find src -type f \( -name '*.c' -o -name '*.h' -o -name '*.inc' -o -name '*.mk' \) | sort |
	xargs grep -nHE '\([A-Z]{1,2}[0-9]+[),:;]|(^|[ (])[A-Z]{1,2}[0-9]+: ') |
	sed 's/$/   <- a review label ("(D16)", "N2: ..."): say what it stands for/' >>"$errs"

if [ -s "$errs" ]; then
	cat "$errs"
	echo "test_comments: $(wc -l <"$errs") comment(s) carry history"
	exit 1
fi
echo "test_comments: no issue number, review or review label in a comment under src/"
