#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checks the Debian packages scripts/deb built, voltd and voltd-dev: their
# contents, voltd's conffiles, the maintainer scripts' order and which units
# an upgrade restarts, the dependencies shlibs computed, what voltd provides
# (voltd-abi-MAJOR, the header's major) and the module directory it makes,
# the packaged programs themselves (run from the extracted .debs), lintian
# clean (no error, no warning, no unused override), and debian/control's
# Build-Depends against scripts/packages.txt.
# Prints one "PASS: name" or "FAIL: name" line per check (what differs
# follows a FAIL); exits 1 when a check failed, 99 when there is no package.
# Usage: test_deb.sh [DIR] (default build-deb/, where scripts/deb builds).
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/scripts/lib.sh"
dir=${1:-$top/build-deb}
version=$(dpkg-parsechangelog -l "$top/debian/changelog" -SVersion)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
deb=$dir/voltd_${version}_${arch}.deb
dev=$dir/voltd-dev_${version}_${arch}.deb
changes=$dir/voltd_${version}_${arch}.changes
[ -f "$deb" ] && [ -f "$dev" ] && [ -f "$changes" ] ||
	{ echo "no $deb, $dev or $changes: run scripts/deb first" >&2; exit 99; }

tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
failed=0
check() { # NAME: PASS when $tmp/diag is empty, else FAIL and show it
	if [ -s "$tmp/diag" ]; then
		echo "FAIL: $1"; sed 's/^/  /' "$tmp/diag"; failed=1
	else
		echo "PASS: $1"
	fi
	: >"$tmp/diag"
}
: >"$tmp/diag"

# 1. Contents: exactly these files (directories aside), so a file that goes
# missing or a build-only program that slips in is seen.
# dh_compress gzips a document over 4 KiB: the map's documents are named
# without .gz here, whatever their size.
docs() { sed 's|^\(\./usr/share/doc/voltd/[a-z]*\.md\)\.gz$|\1|' | LC_ALL=C sort; }
docs >"$tmp/want" <<'EOF'
./etc/voltd/voltd.conf
./lib/systemd/system/voltd-control.socket
./lib/systemd/system/voltd.service
./lib/systemd/system/voltd.socket
./usr/bin/voltctl
./usr/lib/sysusers.d/voltd.conf
./usr/lib/tmpfiles.d/voltd.conf
./usr/sbin/voltd
./usr/share/doc/voltd/ARCHITECTURE.md.gz
./usr/share/doc/voltd/README.md.gz
./usr/share/doc/voltd/changelog.gz
./usr/share/doc/voltd/channel.md
./usr/share/doc/voltd/config.md
./usr/share/doc/voltd/control.md
./usr/share/doc/voltd/conventions.md
./usr/share/doc/voltd/copyright
./usr/share/doc/voltd/daemon.md
./usr/share/doc/voltd/examples/haproxy/voltd.cfg
./usr/share/doc/voltd/examples/voltd.conf
./usr/share/doc/voltd/io.md
./usr/share/doc/voltd/layers.txt
./usr/share/doc/voltd/metrics.md
./usr/share/doc/voltd/ordering.md
./usr/share/doc/voltd/runtime.md
./usr/share/doc/voltd/scaling.md
./usr/share/doc/voltd/server.md
./usr/share/doc/voltd/testing.md
./usr/share/lintian/overrides/voltd
./usr/share/man/man1/voltctl.1.gz
./usr/share/man/man5/voltd.conf.5.gz
./usr/share/man/man8/voltd.8.gz
EOF
dpkg-deb --fsys-tarfile "$deb" | tar -tvf - | awk '$1 !~ /^d/ { print $6 }' | docs >"$tmp/have"
diff "$tmp/want" "$tmp/have" >"$tmp/diag"
check "contents: the files voltd ships"

# voltd-dev: what a module is built and tested with; the examples are not
# compressed (dh_compress leaves examples/ alone), so their Makefiles run.
LC_ALL=C sort >"$tmp/want" <<EOF2
./usr/bin/voltd-modtest
./usr/include/voltd/module.h
./usr/lib/$multiarch/pkgconfig/voltd.pc
./usr/share/doc/voltd-dev/changelog.gz
./usr/share/doc/voltd-dev/copyright
./usr/share/doc/voltd-dev/examples/modules/README.md
./usr/share/doc/voltd-dev/examples/modules/count/Makefile
./usr/share/doc/voltd-dev/examples/modules/count/README.md
./usr/share/doc/voltd-dev/examples/modules/count/count.c
./usr/share/doc/voltd-dev/examples/modules/delay/Makefile
./usr/share/doc/voltd-dev/examples/modules/delay/README.md
./usr/share/doc/voltd-dev/examples/modules/delay/delay.c
./usr/share/doc/voltd-dev/examples/modules/hello/Makefile
./usr/share/doc/voltd-dev/examples/modules/hello/README.md
./usr/share/doc/voltd-dev/examples/modules/hello/hello.c
./usr/share/doc/voltd-dev/examples/modules/journal/Makefile
./usr/share/doc/voltd-dev/examples/modules/journal/README.md
./usr/share/doc/voltd-dev/examples/modules/journal/journal.c
./usr/share/man/man1/voltd-modtest.1.gz
./usr/share/man/man7/voltd-module.7.gz
EOF2
dpkg-deb --fsys-tarfile "$dev" | tar -tvf - | awk '$1 !~ /^d/ { print $6 }' | LC_ALL=C sort >"$tmp/have"
diff "$tmp/want" "$tmp/have" >"$tmp/diag"
check "contents: the files voltd-dev ships"

for d in "$deb" "$dev"; do
	dpkg-deb --fsys-tarfile "$d" | tar -tvf - | awk '$1 !~ /^d/ && $2 != "root/root" { print }' >>"$tmp/diag"
done
check "contents: every file owned by root"

# voltd makes the module directory, empty: voltd.conf's [modules] dir.
dpkg-deb --fsys-tarfile "$deb" | tar -tvf - | awk '{ print $1, $2, $6 }' |
	grep -x "drwxr-xr-x root/root ./usr/lib/$multiarch/voltd/modules/" >/dev/null ||
	echo "no directory ./usr/lib/$multiarch/voltd/modules/ (root, 0755) in voltd" >>"$tmp/diag"
dpkg-deb --fsys-tarfile "$deb" | tar -tf - | grep "^\./usr/lib/$multiarch/voltd/modules/." >>"$tmp/diag"
check "voltd: the module directory, empty"

# 2. Conffiles: the configuration, nothing else (an edited voltd.conf is
# kept by dpkg across upgrades).
dpkg-deb -e "$deb" "$tmp/ctl"
echo /etc/voltd/voltd.conf | diff - "$tmp/ctl/conffiles" >"$tmp/diag"
check "conffiles: /etc/voltd/voltd.conf"

# 3. Maintainer scripts. postinst: the user first (systemd-sysusers), then
# /run/voltd (systemd-tmpfiles, which chowns it to voltd), then the units.
# An upgrade restarts voltd.service only: the sockets, which hold the
# listeners, are started (a no-op when running), never restarted or stopped.
p=$tmp/ctl/postinst
line_of() { grep -n -m1 -e "$1" "$p" | cut -d: -f1; }
l_users=$(line_of 'systemd-sysusers .* voltd.conf') l_tmp=$(line_of 'systemd-tmpfiles .*--create voltd.conf')
l_units=$(line_of 'deb-systemd-invoke')
if [ -z "$l_users" ] || [ -z "$l_tmp" ] || [ -z "$l_units" ]; then
	echo "postinst lacks systemd-sysusers ($l_users), systemd-tmpfiles ($l_tmp) or deb-systemd-invoke ($l_units)" >>"$tmp/diag"
elif ! [ "$l_users" -lt "$l_tmp" ] || ! [ "$l_tmp" -lt "$l_units" ]; then
	echo "postinst order: sysusers line $l_users, tmpfiles line $l_tmp, units line $l_units" >>"$tmp/diag"
fi
check "postinst: the user, then /run/voltd, then the units"

grep -n 'deb-systemd-invoke' "$p" >"$tmp/invokes"
# The service: restart on upgrade ($_dh_action), start on install.
grep -q "deb-systemd-invoke \$_dh_action 'voltd.service' " "$tmp/invokes" && grep -q '_dh_action=restart' "$p" ||
	echo "postinst does not restart voltd.service on upgrade" >>"$tmp/diag"
grep -E "\\\$_dh_action.*socket" "$tmp/invokes" >>"$tmp/diag"
grep -q "deb-systemd-invoke start 'voltd-control.socket' 'voltd.socket' " "$tmp/invokes" ||
	echo "postinst does not start the two sockets" >>"$tmp/diag"
check "postinst: an upgrade restarts voltd.service, only starts the sockets"

for u in voltd.service voltd.socket voltd-control.socket; do
	grep -q "deb-systemd-helper enable '$u'" "$p" || echo "postinst does not enable $u" >>"$tmp/diag"
	grep -q "deb-systemd-helper purge .*'$u'" "$tmp/ctl/postrm" || echo "postrm purge does not purge $u's state" >>"$tmp/diag"
done
check "postinst enables, postrm purges all three units"

# prerm stops the units on remove only; nothing stops them before an upgrade.
[ ! -e "$tmp/ctl/preinst" ] || ! grep -q 'deb-systemd-invoke stop' "$tmp/ctl/preinst" ||
	echo "preinst stops a unit before an upgrade" >>"$tmp/diag"
awk '/deb-systemd-invoke stop/ && prev !~ /"\$1" = remove/ { print "prerm stops outside remove: " $0 } { prev = $0 }' \
	"$tmp/ctl/prerm" >>"$tmp/diag"
for u in voltd.service voltd.socket voltd-control.socket; do
	grep -q "deb-systemd-invoke stop .*'$u'" "$tmp/ctl/prerm" || echo "prerm does not stop $u on remove" >>"$tmp/diag"
done
check "prerm: stops the units on remove, not on upgrade"

grep -q 'rm -rf "${DPKG_ROOT:-}/run/voltd"' "$tmp/ctl/postrm" || echo "postrm leaves /run/voltd" >>"$tmp/diag"
check "postrm: removes /run/voltd"

# 4. Dependencies: computed by shlibs (debian/control names none by hand).
ctl_depends=$(sed -n '/^Package: voltd$/,/^$/p' "$top/debian/control" |
	awk '/^Depends:/ { on = 1; sub(/^Depends:/, "") } on && /^[A-Z]/ && !/^Depends:/ { on = 0 } on' | tr -d ' \n')
[ "$ctl_depends" = '${misc:Depends},${shlibs:Depends},' ] ||
	echo "debian/control Depends is '$ctl_depends', not \${misc:Depends}, \${shlibs:Depends}" >>"$tmp/diag"
deps=$(dpkg-deb -f "$deb" Depends)
for lib in libc6 liburing2 libev4 libinih1 libjansson4 libssl3 libsystemd0 zlib1g libncursesw6; do
	case ", $deps" in *", $lib "*) ;; *) echo "Depends lacks $lib: $deps" >>"$tmp/diag" ;; esac
done
check "Depends: from shlibs (liburing2, libev4, ...)"

# What voltd provides: voltd-abi-MAJOR, MAJOR the header's; voltd-dev's
# dependencies are computed too, voltd only suggested (a module builds
# without the daemon).
major=$(sed -n 's/^#define VOLTD_MODULE_ABI_MAJOR \([0-9]*\)$/\1/p' "$top/include/voltd/module.h")
[ "$(dpkg-deb -f "$deb" Provides)" = "voltd-abi-$major" ] ||
	echo "voltd Provides '$(dpkg-deb -f "$deb" Provides)', not voltd-abi-$major" >>"$tmp/diag"
case ", $(dpkg-deb -f "$dev" Depends)" in *", libc6 "*) ;; *) echo "voltd-dev Depends lacks libc6: $(dpkg-deb -f "$dev" Depends)" >>"$tmp/diag" ;; esac
[ "$(dpkg-deb -f "$dev" Suggests)" = "voltd (= $version)" ] ||
	echo "voltd-dev Suggests '$(dpkg-deb -f "$dev" Suggests)', not voltd (= $version)" >>"$tmp/diag"
check "Provides: voltd-abi-$major; voltd-dev's dependencies"

# 5. The packaged programs and units, extracted: voltd runs and accepts the
# shipped configuration; the service names the installed paths.
dpkg-deb -x "$deb" "$tmp/root"
"$tmp/root/usr/sbin/voltd" -V >"$tmp/out" 2>&1 && grep -q "^voltd $version" "$tmp/out" ||
	{ echo "voltd -V:"; cat "$tmp/out"; } >>"$tmp/diag"
"$tmp/root/usr/sbin/voltd" -t -c "$tmp/root/etc/voltd/voltd.conf" >"$tmp/out" 2>&1 && grep -q 'configuration OK' "$tmp/out" ||
	{ echo "voltd -t -c etc/voltd/voltd.conf:"; cat "$tmp/out"; } >>"$tmp/diag"
"$tmp/root/usr/bin/voltctl" --help >"$tmp/out" 2>&1 || { echo "voltctl --help:"; cat "$tmp/out"; } >>"$tmp/diag"
grep -qx 'ExecStart=/usr/sbin/voltd -f -c /etc/voltd/voltd.conf' "$tmp/root/lib/systemd/system/voltd.service" ||
	echo "voltd.service: ExecStart is not /usr/sbin/voltd -f -c /etc/voltd/voltd.conf" >>"$tmp/diag"
check "the packaged voltd, voltctl and voltd.service"

# voltd-dev, extracted: voltd-modtest runs, voltd.pc names the packaged
# header and the module directory voltd makes.
dpkg-deb -x "$dev" "$tmp/dev"
"$tmp/dev/usr/bin/voltd-modtest" --version >"$tmp/out" 2>&1 && grep -q "^voltd-modtest $version " "$tmp/out" ||
	{ echo "voltd-modtest --version:"; cat "$tmp/out"; } >>"$tmp/diag"
pc=$tmp/dev/usr/lib/$multiarch/pkgconfig/voltd.pc
grep -qx 'includedir=/usr/include' "$pc" && grep -qx "moduledir=/usr/lib/$multiarch/voltd/modules" "$pc" &&
	grep -qx "Version: $version" "$pc" || { echo "voltd.pc:"; cat "$pc"; } >>"$tmp/diag"
check "the packaged voltd-modtest and voltd.pc"

# 6. lintian, both packages: no error or warning (an overridden tag shows
# as O:), and every override in debian/*.lintian-overrides still matches a
# tag.
lintian --pedantic --display-info --show-overrides "$changes" >"$tmp/lint" 2>&1
grep -E '^[EW]: |unused-override|mismatched-override' "$tmp/lint" >"$tmp/diag"
grep -q '^O: voltd: package-supports-alternative-init-but-no-init.d-script' "$tmp/lint" ||
	echo "the init.d override did not apply" >>"$tmp/diag"
check "lintian: no error, no warning, no unused override"

# 7. Build-Depends: packages.txt's [build] part (less build-essential, and
# autoconf, automake and libtool, which debhelper's dh-autoreconf brings) and
# its [test] part as <!nocheck>.
bd=$(sed -n '/^Build-Depends:/,/^[A-Z]/p' "$top/debian/control" | sed '1s/^Build-Depends://; /^[A-Z]/d' | tr ',' '\n' |
	sed 's/^[[:space:]]*//; s/[[:space:]]*$//' | grep -v '^$')
echo "$bd" | grep -v '<!nocheck>' | sed 's/ .*//' | grep -Ev '^(debhelper-compat|dh-sequence-.*)$' | sort >"$tmp/bd-build"
package_section build | grep -Evx 'build-essential|autoconf|automake|libtool' | sort >"$tmp/pk-build"
diff "$tmp/pk-build" "$tmp/bd-build" | sed 's/^/build: /' >"$tmp/diag"
echo "$bd" | grep '<!nocheck>' | sed 's/ .*//' | sort >"$tmp/bd-test"
package_section test | sort >"$tmp/pk-test"
diff "$tmp/pk-test" "$tmp/bd-test" | sed 's/^/test: /' >>"$tmp/diag"
check "Build-Depends: scripts/packages.txt's [build] and [test] parts"

exit $failed
