#!/bin/sh
# SPDX-License-Identifier: MIT
# Layers enforced. Reads doc/layers.txt and fails when
# - a file under src/<dir>/ (at any depth), or under a folder of the table
#   outside src/ (include/voltd, the public module header), includes a
#   header of a layer its line does not list, however the path is spelled:
#   every #include is resolved as the compiler does (tests/doc/includes.awk),
#   so "../server/server.h", "rt/../server/server.h" and <server/server.h>
#   name src/server/server.h; a project header must be spelled the one way,
#   "dir/name.h" (the public header: <voltd/module.h>, as a module spells
#   it), and an #include of a macro is refused;
# - it includes another layer's internal.h, or a file outside src/ and include/;
# - an external header is included outside the places the table names;
# - a directory under src/ is missing from the table;
# - the table allows an edge no file uses (the table is the edges used: a new
#   one is a decision written there), or a layer uses one listed after it
#   (the table is listed bottom up, so it has no cycle);
# - the table in the Layers section of doc/ARCHITECTURE.md says otherwise
#   (folder or "may include" of a layer, or a layer one of them lacks).
# Usage: test_layers.sh [SRCDIR] (default $VOLTD_SRCDIR, else the checkout).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=${1:-${VOLTD_SRCDIR:-$here/../..}}
top=$(cd "$top" && pwd) || exit 99
. "$here/layers.sh"
doc=$top/doc/ARCHITECTURE.md
[ -r "$doc" ] || { echo "test_layers: $doc not found" >&2; exit 99; }

layer_of() { # DIR -> layer name, or nothing
	echo "$layers" | awk -v d="$1" '$1 == d { print $2 }'
}
folder_of() { # DIR -> its folder as written in messages
	case $1 in */*) echo "$1/" ;; *) echo "src/$1/" ;; esac
}
deps_of() { # DIR -> the layers it may use, space-separated
	echo "$layers" | awk -v d="$1" '$1 == d { s = ""; for (i = 3; i <= NF; i++) s = s " " $i; print substr(s, 2) }'
}

errs=$(mktemp) || exit 99
used=$(mktemp) || exit 99
trap 'rm -f "$errs" "$used"' EXIT

# The folders of the table outside src/ (include/voltd), then src/*/.
for dirpath in $(echo "$layers" | awk '$1 ~ /\// { print $1 }' | sed "s|^|$top/|; s|\$|/|") "$top"/src/*/; do
	[ -d "$dirpath" ] || continue
	dir=${dirpath#"$top"/}
	dir=${dir%/}
	dir=${dir#src/}
	layer=$(layer_of "$dir")
	if [ -z "$layer" ]; then
		echo "src/$dir/: not in doc/layers.txt (add its line: layer, directory, what it may include)" >>"$errs"
		continue
	fi
	allowed=" $layer $(deps_of "$dir") "
	find "$dirpath" -type f \( -name '*.c' -o -name '*.h' -o -name '*.inc' \) | sort |
	while read -r f; do
		rel=${f#"$top"/}
		awk -v top="$top" -v rel="$rel" -f "$here/includes.awk" "$f" |
		while read -r line form raw res; do
			at="$rel:$line"
			if [ "$form" = m ]; then
				echo "$at: #include of a macro: name the header (the layer test must see it)" >>"$errs"
				continue
			fi
			case $res in
			-)
				# Not ours: an external header is kept to its place.
				echo "$externals" | while read -r ext places; do
					[ -n "$ext" ] || continue
					case "/$raw" in */"$ext"*) ;; *) continue ;; esac
					ok=
					for place in $places; do
						case $place in
						*/) case $rel in "$place"*) ok=1 ;; esac ;;
						*) [ "$rel" = "$place" ] && ok=1 ;;
						esac
					done
					[ -n "$ok" ] && continue
					echo "$at: includes <$raw>: only $(echo $places | sed 's/ /, /g') may (doc/layers.txt)" >>"$errs"
				done
				continue ;;
			src/*)
				canon=${res#src/}
				hdir=${canon%%/*}
				want=q ;;
			include/*)
				canon=${res#include/}
				hdir=include/${canon%%/*}
				want=a ;;
			*)
				echo "$at: includes $res: a file outside src/ and include/" >>"$errs"
				continue ;;
			esac
			if [ "$form" != $want ] || [ "$raw" != "$canon" ]; then
				echo "$at: includes $res as $([ "$form" = q ] && echo "\"$raw\"" || echo "<$raw>"): spell it $([ $want = q ] && echo "\"$canon\"" || echo "<$canon>")" >>"$errs"
			fi
			hlayer=$(layer_of "$hdir")
			case $allowed in
			*" $hlayer "*) ;;
			*)
				echo "$at: includes $canon: $layer may not use $hlayer (doc/layers.txt: $layer may use: $(deps_of "$dir"))" >>"$errs"
				continue ;;
			esac
			[ "$hlayer" = "$layer" ] || echo "$layer $hlayer" >>"$used"
			if [ "$hdir" != "$dir" ] && [ "${canon##*/}" = internal.h ]; then
				echo "$at: includes $canon: internal.h is private to src/$hdir/" >>"$errs"
			fi
		done
	done
done

# The table: bottom up (every allowance names a layer listed before), and
# nothing allowed that no file uses.
echo "$layers" | awk '
	{ for (i = 3; i <= NF; i++) if (!($i in seen)) printf "doc/layers.txt: %s may use %s, which is not listed before it (the table is bottom up: no cycles)\n", $2, $i
	  seen[$2] = 1 }' >>"$errs"
echo "$layers" | while read -r dir layer deps; do
	for d in $deps; do
		grep -qx "$layer $d" "$used" ||
			echo "doc/layers.txt: $layer may use $d, but no file under $(folder_of "$dir") includes a header of $d (remove it from the line)" >>"$errs"
	done
done

# doc/ARCHITECTURE.md, section Layers: "| layer | `src/dir/` | what | may include |".
# A remark in parentheses is dropped; "libc only" is "-"; otherwise a
# comma-separated list of layers.
arch=$(awk '/^## Layers$/ { on = 1; next } /^## / { on = 0 }
	on && /^\| [a-z]+ \| `(src|include)\// {
		n = split($0, c, "|")
		l = c[2]; f = c[3]; m = c[n - 1]
		gsub(/[ `]/, "", l); gsub(/[ `]/, "", f); sub(/^src\//, "", f); sub(/\/$/, "", f)
		gsub(/,/, " ", m); gsub(/`/, "", m)
		sub(/\(.*\)/, "", m)
		if (m ~ /libc only/) m = ""
		k = split(m, w, " "); s = ""
		for (i = 1; i <= k; i++) s = s " " w[i]
		print f, l s
	}' "$doc")
[ -n "$arch" ] || { echo "test_layers: no layer table in doc/ARCHITECTURE.md (section Layers)" >&2; exit 99; }
sorted() { tr ' ' '\n' | sed '/^$/d' | sort | tr '\n' ' '; }
echo "$layers" | while read -r dir layer deps; do
	row=$(echo "$arch" | awk -v l="$layer" '$2 == l')
	if [ -z "$row" ]; then
		echo "doc/ARCHITECTURE.md (Layers): no row for layer $layer (doc/layers.txt has it)" >>"$errs"
		continue
	fi
	set -- $row
	[ "$1" = "$dir" ] || echo "doc/ARCHITECTURE.md (Layers): $layer is in $(folder_of "$1"), doc/layers.txt says $(folder_of "$dir")" >>"$errs"
	shift 2
	a=$(echo "$*" | sorted)
	b=$(echo "$deps" | sorted)
	[ "$a" = "$b" ] || echo "doc/ARCHITECTURE.md (Layers): $layer may include '${a% }', doc/layers.txt says '${b% }'" >>"$errs"
done
echo "$arch" | while read -r dir layer deps; do
	[ -n "$(layer_of "$dir")" ] || echo "doc/ARCHITECTURE.md (Layers): row $layer ($(folder_of "$dir")) is not in doc/layers.txt" >>"$errs"
done

if [ -s "$errs" ]; then
	cat "$errs"
	echo "test_layers: $(wc -l <"$errs") problem(s); the layer table is doc/layers.txt (see doc/ARCHITECTURE.md)"
	exit 1
fi
echo "test_layers: every include under src/ and include/ follows doc/layers.txt, which is the table of doc/ARCHITECTURE.md (Layers)"
