#!/bin/sh
# SPDX-License-Identifier: MIT
# A module built from an installed voltd alone: `make install DESTDIR=D`,
# then the installed example count copied out of D's docdir and built by its
# Makefile with pkg-config pointed into D only (PKG_CONFIG_LIBDIR, with
# PKG_CONFIG_SYSROOT_DIR=D), no voltd source on any path, and tested with
# the installed voltd-modtest. Checks voltd.pc: the -I of the installed
# header, Version voltd's, the variables moduledir (configure's) and
# module_abi_major/minor (the header's).
# Usage: test_install.sh (VOLTD_BUILDDIR, VOLTD_SRCDIR: the build and source trees).
set -u
b=${VOLTD_BUILDDIR:?}
s=${VOLTD_SRCDIR:?}
command -v pkg-config >/dev/null || { echo "SKIP: no pkg-config: install the Debian package pkg-config"; exit 77; }
work=$(mktemp -d) || exit 99
trap 'rm -rf "$work"' EXIT
fails=0
fail() {
	echo "FAIL $*"
	fails=$((fails + 1))
}
var() { # NAME: a make variable of the build tree, expanded
	# A make of its own: under make check, MAKEFLAGS carries the w of the
	# outer make -C (scripts/test), which --no-print-directory does not
	# undo, and "Entering directory" would be in the value.
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$b" -f Makefile -f - print-var VAR="$1" <<'MK'
print-var:
	@echo '$($(VAR))'
MK
}

if ! make -s -C "$b" install DESTDIR="$work/root" >"$work/install.log" 2>&1; then
	tail -20 "$work/install.log"
	echo "test_install: make install DESTDIR=... failed"
	exit 1
fi
root=$work/root
libdir=$(var libdir) includedir=$(var includedir) bindir=$(var bindir) docdir=$(var docdir)
moduledir=$(var moduledir) version=$(var PACKAGE_VERSION)
major=$(sed -n 's/^#define VOLTD_MODULE_ABI_MAJOR \([0-9]*\)$/\1/p' "$s/include/voltd/module.h")
minor=$(sed -n 's/^#define VOLTD_MODULE_ABI_MINOR \([0-9]*\)$/\1/p' "$s/include/voltd/module.h")
for f in "$libdir/pkgconfig/voltd.pc" "$includedir/voltd/module.h" "$bindir/voltd-modtest" \
	"$docdir/examples/modules/count/Makefile"; do
	[ -e "$root$f" ] || fail "make install did not install $f"
done
[ -d "$root$moduledir" ] || fail "make install did not make the module directory $moduledir"

# pkg-config sees the installed voltd.pc only.
PKG_CONFIG_LIBDIR=$root$libdir/pkgconfig
PKG_CONFIG_SYSROOT_DIR=$root
PKG_CONFIG_PATH=
export PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_PATH
got=$(pkg-config --cflags voltd)
got=${got%% }
[ "$got" = "-I$root$includedir" ] || fail "pkg-config --cflags voltd: '$got', expected '-I$root$includedir'"
got=$(pkg-config --modversion voltd)
[ "$got" = "$version" ] || fail "pkg-config --modversion voltd: '$got', expected '$version'"
for v in moduledir:$moduledir module_abi_major:$major module_abi_minor:$minor; do
	got=$(pkg-config --variable="${v%%:*}" voltd)
	case $got in
	"${v#*:}" | "$root${v#*:}") ;;
	*) fail "pkg-config --variable=${v%%:*} voltd: '$got', expected '${v#*:}'" ;;
	esac
done

# count, out of the tree: a copy of the installed example, its Makefile, no
# other include path than pkg-config's.
# The compiler is a wrapper that records its arguments.
cp -R "$root$docdir/examples/modules/count" "$work/count"
printf '#!/bin/sh\necho "$*" >>"%s"\nexec %s "$@"\n' "$work/cc.args" "${CC:-cc}" >"$work/cc"
chmod +x "$work/cc"
if (cd "$work/count" && env -u CPATH -u C_INCLUDE_PATH make CC="$work/cc" \
	MODTEST="$root$bindir/voltd-modtest" CFLAGS='-O2 -Wall -Wextra -Werror' count.so check) \
	>"$work/count.log" 2>&1; then
	args=$(cat "$work/cc.args")
	case " $args " in
	*" -I$root$includedir "*) ;;
	*) fail "the example's compiler did not get pkg-config's -I$root$includedir: $args" ;;
	esac
	case " $args " in
	*"$s"*) fail "the example's compiler was given the source tree: $args" ;;
	esac
else
	fail "the installed example count (make, make check)"
	sed 's/^/    /' "$work/count.log"
fi
# make install puts it in the module directory, under DESTDIR.
(cd "$work/count" && make DESTDIR="$work/dest" install) >"$work/count-install.log" 2>&1 &&
	{ [ -f "$work/dest$moduledir/count.so" ] || [ -f "$work/dest$root$moduledir/count.so" ]; } ||
	fail "the example's make install did not put count.so in DESTDIR$moduledir: $(cat "$work/count-install.log")"

if [ $fails -ne 0 ]; then
	echo "test_install: $fails failure(s)"
	exit 1
fi
echo "test_install: the installed example count built with pkg-config alone (-I$root$includedir), checked with the installed voltd-modtest"
