# SPDX-License-Identifier: MIT
# A job module from the packages alone (tests/system/run --deb OLD --deb NEW
# --deb DEV; DEV is voltd-dev of NEW's build): apt install NEW and DEV, then
# what a module author does with them (module_case in lib.sh): the example
# count from /usr/share/doc/voltd-dev/examples, built with pkg-config and
# make, tested with voltd-modtest, installed, loaded from voltd.conf, served
# by the restarted service; a broken module refused at restart with the file
# and the reason in the journal. apt purge both at the end.
# timeout: 240
read -r _ new dev _ <<<"$SYSTEST_DEBS"
[ -n "${dev:-}" ] || fail "needs voltd-dev: tests/system/run --deb OLD --deb NEW --deb DEV"
apt_get() { ct env DEBIAN_FRONTEND=noninteractive apt-get -q -y --no-install-recommends "$@"; }

printf '  $ apt-get install %s %s\n' "$new" "$dev"
apt_get install "$new" "$dev" 2>&1 | grep -Ev '^(Reading|Building|\(Reading)' | sed 's/^/    /' || true
for p in voltd voltd-dev; do
	expect_eq "$p installed" "$(ct dpkg-query -W -f='${Status}' "$p")" "install ok installed"
done
show dpkg-query -W -f='${Provides}\n' voltd
wait_active 20
module_case /usr/share/doc/voltd-dev/examples/modules

printf '  $ apt-get purge voltd voltd-dev\n'
apt_get purge voltd voltd-dev 2>&1 | grep -Ev '^(Reading|Building|\(Reading)' | sed 's/^/    /' || true
expect_eq "voltd-dev after purge" "$(ct dpkg-query -W -f='${Status}' voltd-dev 2>/dev/null || true)" ""
