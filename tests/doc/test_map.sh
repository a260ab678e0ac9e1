#!/bin/sh
# SPDX-License-Identifier: MIT
# The map stays a map:
# - doc/ARCHITECTURE.md has at most 250 lines;
# - every relative link of a document under doc/ (and of README.md) names a
#   file of the checkout, and a link's #anchor names a heading of its target
#   (GitHub's spelling: lower case, punctuation dropped, spaces as "-");
# - the map reaches every folder under src/ (as `src/DIR/`) and links every
#   file under doc/;
# - every file under src/ over 800 lines is named on a line of the map that
#   says "over 800 lines" (and why it stays whole);
# - nothing points at a numbered section of the map ("ARCHITECTURE.md §2",
#   "section 8"): the sections became documents, named for their subject.
# Usage: test_map.sh [SRCDIR] (default $VOLTD_SRCDIR, else the checkout).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=${1:-${VOLTD_SRCDIR:-$here/../..}}
top=$(cd "$top" && pwd) || exit 99
map=$top/doc/ARCHITECTURE.md
[ -r "$map" ] || { echo "test_map: $map not found" >&2; exit 99; }
errs=$(mktemp) || exit 99
trap 'rm -f "$errs"' EXIT

n=$(wc -l <"$map")
[ "$n" -le 250 ] || echo "doc/ARCHITECTURE.md: $n lines, more than 250: move the detail to the document of its subject" >>"$errs"

# Files over 800 lines: one mechanism that reads better whole, said so in the map.
find "$top/src" -name '*.[ch]' | while read -r f; do
	[ "$(wc -l <"$f")" -gt 800 ] || continue
	rel=${f#"$top"/src/}
	grep 'over 800 lines' "$map" | grep -q "$rel\|$(basename "$rel")\b" ||
		echo "src/$rel: $(wc -l <"$f") lines, and the map does not say why it stays whole (\"over 800 lines\" beside its name)" >>"$errs"
done

# The anchors of a markdown file, one per line.
anchors() {
	awk '/^```/ { code = !code; next } !code && /^#+ / {
		sub(/^#+ +/, ""); s = tolower($0)
		gsub(/[^a-z0-9 _-]/, "", s); gsub(/ /, "-", s); print s }' "$1"
}

# Links: "](target)" outside code, target neither a URL nor an e-mail.
for f in "$top"/doc/*.md "$top/README.md"; do
	[ -e "$f" ] || continue
	rel=${f#"$top"/}
	dir=$(dirname "$f")
	awk '/^```/ { code = !code; next } !code {
		s = $0
		while (match(s, /\]\([^)]+\)/)) {
			print NR, substr(s, RSTART + 2, RLENGTH - 3)
			s = substr(s, RSTART + RLENGTH)
		}
	}' "$f" |
	while read -r line target; do
		case $target in
		http://* | https://* | mailto:*) continue ;;
		esac
		path=${target%%#*}
		anchor=
		case $target in *'#'*) anchor=${target#*#} ;; esac
		if [ -n "$path" ]; then
			dest=$dir/$path
		else
			dest=$f
		fi
		if [ ! -e "$dest" ]; then
			echo "$rel:$line: link to $target: no such file" >>"$errs"
			continue
		fi
		if [ -n "$anchor" ]; then
			case $dest in
			*.md) anchors "$dest" | grep -qxF -- "$anchor" ||
				echo "$rel:$line: link to $target: no heading with that anchor in ${dest#"$top"/}" >>"$errs" ;;
			esac
		fi
	done
done

# The map reaches every folder and every document.
for d in "$top"/src/*/; do
	d=$(basename "$d")
	grep -qF "src/$d/" "$map" || echo "doc/ARCHITECTURE.md: src/$d/ is not on the map (its layer row names it)" >>"$errs"
done
for f in "$top"/doc/*; do
	b=$(basename "$f")
	[ "$b" = ARCHITECTURE.md ] && continue
	grep -qF "]($b)" "$map" || grep -qF "]($b#" "$map" ||
		echo "doc/ARCHITECTURE.md: doc/$b is not linked from the map" >>"$errs"
done

# No pointer to a numbered section of the map.
(cd "$top" && grep -rnIE 'ARCHITECTURE(\.md)?,? *(§|section [0-9])|map §[0-9]' \
	src tests man README.md bench/README.md doc Makefile.am 2>/dev/null |
	grep -v '^tests/doc/test_map\.sh:') |
	sed 's/$/   <- a numbered section of the map: name the document (doc\/NAME.md)/' >>"$errs"

if [ -s "$errs" ]; then
	cat "$errs"
	echo "test_map: $(wc -l <"$errs") problem(s)"
	exit 1
fi
echo "test_map: doc/ARCHITECTURE.md is $n lines, its links and the documents' resolve, it reaches every src/ folder and doc/ file"
