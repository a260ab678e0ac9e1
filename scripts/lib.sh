# SPDX-License-Identifier: MIT
# Shared by scripts/run, scripts/test and scripts/bench: install what is
# missing (Debian packages listed in scripts/packages.txt) and build out of
# tree, incrementally.

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)

say() { printf '==> %s\n' "$*" >&2; }

# ensure_packages [LIST...]: apt-get install the packages of the lists
# (default scripts/packages.txt) that are not installed yet.
ensure_packages() {
	local lists=("$@") missing=() p
	[ ${#lists[@]} -gt 0 ] || lists=("$top/scripts/packages.txt")
	for p in $(sed -e 's/#.*//' "${lists[@]}"); do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	say "installing: ${missing[*]}"
	local sudo=
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null || { echo "need root to install: ${missing[*]}" >&2; return 1; }
		sudo=sudo
	fi
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# package_section NAME [LIST]: the packages of the "# [NAME]" part of LIST
# (default scripts/packages.txt), one a line.
package_section() {
	sed -n -e "/^# \[$1\]/,/^# \[/{" -e '/^# \[/d' -e 's/#.*//' -e '/[^[:space:]]/p' -e '}' \
		"${2:-$top/scripts/packages.txt}"
}

# ensure_build DIR [CONFIGURE-ARGS...]: autoreconf when needed, configure DIR
# when its arguments changed, then make. Prints nothing on a no-op rebuild.
ensure_build() {
	local dir=$top/$1; shift
	local args="$*"
	if [ ! -x "$top/configure" ] || [ "$top/configure.ac" -nt "$top/configure" ]; then
		say "autoreconf"
		(cd "$top" && autoreconf -fi >/dev/null 2>&1) || (cd "$top" && autoreconf -fi) || return 1
	fi
	mkdir -p "$dir"
	if [ ! -f "$dir/Makefile" ] || [ "$(cat "$dir/.configure-args" 2>/dev/null)" != "$args" ] ||
	   [ "$top/configure" -nt "$dir/config.status" ]; then
		say "configure ${dir#$top/} $args"
		(cd "$dir" && "$top/configure" -q $args >/dev/null) || return 1
		printf '%s' "$args" > "$dir/.configure-args"
	fi
	make -s -C "$dir" -j"$jobs" >/dev/null || make -C "$dir" -j1
}
