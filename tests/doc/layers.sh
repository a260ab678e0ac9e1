# SPDX-License-Identifier: MIT
# Sourced by tests/doc/test_*.sh: reads doc/layers.txt of the checkout $top.
# Sets $layers, one "dir layer may-use..." line per layer (dir without src/),
# and $externals, one "header place..." line per external row (a header
# may have several places: files, or directories ending in /).
table=$top/doc/layers.txt
[ -r "$table" ] || { echo "$0: $table not found" >&2; exit 99; }
layers=$(sed -e 's/#.*//' "$table" | awk 'NF >= 3 && $1 != "external" { sub("^src/", "", $2); d = ""; for (i = 3; i <= NF; i++) if ($i != "-") d = d " " $i; print $2, $1 d }')
externals=$(sed -e 's/#.*//' "$table" | awk '$1 == "external" && NF >= 3 { s = $3; for (i = 4; i <= NF; i++) s = s " " $i; print $2, s }')
