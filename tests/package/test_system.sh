#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The package under a real systemd: builds a newer version of the package
# scripts/deb built (this tree again, with a changelog entry VERSION+systest1,
# into DIR/next), then runs the system test's package cases on both and the
# newer voltd-dev (tests/system/run --deb OLD --deb NEW --deb NEW-DEV:
# install, upgrade under load, purge; a module built from voltd-dev and
# served; in a Debian 12 root booted with systemd-nspawn). Its output and
# exit status are tests/system/run's (0 pass, 1 fail, 77 the machine cannot).
# Usage: test_system.sh [DIR] (default build-deb/, where scripts/deb builds).
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/scripts/lib.sh"
dir=${1:-$top/build-deb}
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
v=$(dpkg-parsechangelog -l "$top/debian/changelog" -SVersion)
old=$dir/voltd_${v}_${arch}.deb
new=$dir/next/voltd_${v}+systest1_${arch}.deb
newdev=$dir/next/voltd-dev_${v}+systest1_${arch}.deb
if [ ! -f "$old" ]; then
	VOLTD_DEB_OUT=$dir "$top/scripts/deb" >"$dir/deb.out" 2>&1 ||
		{ tail -20 "$dir/deb.out"; echo "FAIL: package (scripts/deb failed)"; exit 1; }
fi
mkdir -p "$dir/next"
say "building $(basename "$new") (log: $dir/next/deb.out)"
# The same tree again: its tests ran in the first build.
DEB_BUILD_OPTIONS="nocheck parallel=$jobs" \
VOLTD_DEB_OUT=$dir/next VOLTD_DEB_VERSION=$v+systest1 "$top/scripts/deb" >"$dir/next/deb.out" 2>&1 ||
	{ tail -20 "$dir/next/deb.out"; echo "FAIL: package (scripts/deb VOLTD_DEB_VERSION=$v+systest1 failed)"; exit 1; }
exec "$top/tests/system/run" --deb "$old" --deb "$new" --deb "$newdev"
