#!/bin/sh
# SPDX-License-Identifier: MIT
# Layers enforced: reads doc/layers.txt and fails when a file under
# src/<dir>/ includes a header of a layer it may not use, another layer's
# internal.h, or an external header outside the place the table names; and
# when a directory under src/ is missing from the table.
# Usage: test_layers.sh [SRCDIR] (default $VOLTD_SRCDIR, else the checkout).
set -u
top=${1:-${VOLTD_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}}
. "$(dirname "$0")/layers.sh"

layer_of() { # DIR -> layer name, or nothing
	echo "$layers" | awk -v d="$1" '$1 == d { print $2 }'
}
deps_of() { # DIR -> the layers it may use
	echo "$layers" | awk -v d="$1" '$1 == d { for (i = 3; i <= NF; i++) print $i }'
}

errs=$(mktemp) || exit 99
trap 'rm -f "$errs"' EXIT
for dirpath in "$top"/src/*/; do
	dir=$(basename "$dirpath")
	layer=$(layer_of "$dir")
	if [ -z "$layer" ]; then
		echo "src/$dir/: not in doc/layers.txt (add its line: layer, directory, what it may include)" >>"$errs"
		continue
	fi
	allowed=" $layer $(deps_of "$dir" | tr '\n' ' ')"
	for f in "$dirpath"*.c "$dirpath"*.h; do
		[ -e "$f" ] || continue
		rel=${f#"$top"/}
		# Project headers: #include "dir/name.h"
		grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[a-z_]*/[^"]*"' "$f" |
		sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1 \2/' |
		while read -r line hdr; do
			hdir=${hdr%%/*}
			hlayer=$(layer_of "$hdir")
			[ -n "$hlayer" ] || continue # not a layer (e.g. llhttp/)
			case $allowed in
			*" $hlayer "*) ;;
			*)
				echo "$rel:$line: includes $hdr: $layer may not use $hlayer (doc/layers.txt: $layer may use:$(deps_of "$dir" | tr '\n' ' ' | sed 's/^/ /; s/ $//'))" >>"$errs"
				continue ;;
			esac
			if [ "$hdir" != "$dir" ] && [ "${hdr#*/}" = internal.h ]; then
				echo "$rel:$line: includes $hdr: internal.h is private to src/$hdir/" >>"$errs"
			fi
		done
		# External headers: #include <name> limited to their place.
		echo "$externals" | while read -r ext place; do
			[ -n "$ext" ] || continue
			case $place in
			*/) case $rel in "$place"*) continue ;; esac ;;
			*) [ "$rel" = "$place" ] && continue ;;
			esac
			grep -n "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"]$ext" "$f" | cut -d: -f1 |
			while read -r line; do
				echo "$rel:$line: includes <$ext...>: only $place may (doc/layers.txt)" >>"$errs"
			done
		done
	done
done
if [ -s "$errs" ]; then
	cat "$errs"
	echo "test_layers: $(wc -l <"$errs") problem(s); the layer table is doc/layers.txt (see doc/ARCHITECTURE.md)"
	exit 1
fi
echo "test_layers: every include under src/ follows doc/layers.txt"
