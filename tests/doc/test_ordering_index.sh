#!/bin/sh
# SPDX-License-Identifier: MIT
# The index of ordering labels in doc/ordering.md stays true:
# every label like [Q1] used in a file under src/<dir>/ has a row for that
# file's layer or for a layer it may use (doc/layers.txt), every row's file
# lies in its layer's folder and contains the label, and no label has two
# rows: a label names one edge in the whole repository (rt's [T1] and io's
# [IT1], not two [T1]s), so a citation cannot mean the wrong one.
# Usage: test_ordering_index.sh [SRCDIR] (default $VOLTD_SRCDIR, else the checkout).
set -u
top=${1:-${VOLTD_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}}
doc=$top/doc/ordering.md
[ -r "$doc" ] || { echo "test_ordering_index: $doc not found" >&2; exit 99; }
. "$(dirname "$0")/layers.sh"

# "label layer file" per index row.
rows=$(sed -n 's/^| `\[\([A-Z]*[0-9]*\)\]` | \([a-z]*\) | `\([^`]*\)` |.*/\1 \2 \3/p' "$doc")
[ -n "$rows" ] || { echo "test_ordering_index: no index rows in doc/ordering.md" >&2; exit 99; }

errs=$(mktemp) || exit 99
trap 'rm -f "$errs"' EXIT

# Labels: one row each.
echo "$rows" | awk '{ n[$1]++; l[$1] = l[$1] " " $2 } END { for (k in n) if (n[k] > 1) printf "doc/ordering.md: [%s] has %d rows (layers%s): a label names one edge; give one a name of its own\n", k, n[k], l[k] }' >>"$errs"

# Rows: the file exists, is in the layer's folder, and defines the label.
echo "$rows" | while read -r label layer file; do
	dir=$(echo "$layers" | awk -v l="$layer" '$2 == l { print $1 }')
	case $file in
	"src/$dir/"*) ;;
	*) echo "doc/ordering.md: [$label] ($layer): $file is not under src/$dir/" >>"$errs"; continue ;;
	esac
	if ! grep -qF "[$label]" "$top/$file" 2>/dev/null; then
		echo "doc/ordering.md: [$label] ($layer): $file does not contain it" >>"$errs"
	fi
done

# Uses: each (file, label) has a row for the file's layer or one below it.
for f in "$top"/src/*/*.c "$top"/src/*/*.h; do
	[ -e "$f" ] || continue
	rel=${f#"$top"/}
	dir=${rel#src/}
	dir=${dir%%/*}
	usable=$(echo "$layers" | awk -v d="$dir" '$1 == d { for (i = 2; i <= NF; i++) print $i }')
	[ -n "$usable" ] || continue # test_layers.sh reports unknown folders
	for label in $(grep -oE '\[[A-Z]{1,3}[0-9]+\]' "$f" | tr -d '[]' | sort -u); do
		found=
		for l in $usable; do
			if echo "$rows" | grep -q "^$label $l "; then
				found=$l
				break
			fi
		done
		[ -n "$found" ] || echo "$rel: [$label] has no row in doc/ordering.md (for layer $(echo "$usable" | head -1) or one it may use)" >>"$errs"
	done
done

if [ -s "$errs" ]; then
	cat "$errs"
	echo "test_ordering_index: $(wc -l <"$errs") problem(s)"
	exit 1
fi
echo "test_ordering_index: $(echo "$rows" | wc -l) labels indexed, every use under src/ has its row"
