# SPDX-License-Identifier: MIT
# voltctl against the socket unit's control socket (/run/voltd/control.sock,
# voltd:voltd 0660) at the levels of voltd(8): root is admin (ping, stats,
# set, drain/undrain work); a user in the group voltd connects at level
# user (stats yes, set and drain refused: exit 77); a user outside it
# cannot connect (exit 77, permission denied).
# timeout: 60
level_of() { ct runuser -u "$1" -- voltctl help | sed -n 's/^level *//p' | head -1; }
rc_of() { local rc=0; ct "$@" >/dev/null 2>&1 || rc=$?; echo "$rc"; }
ct id bob >/dev/null 2>&1 || ct useradd -M -s /bin/sh bob      # plain user
ct sh -c 'id carol >/dev/null 2>&1 || useradd -M -s /bin/sh -G voltd carol' # may open the socket
show id bob
show id carol

note "as root:"
show voltctl ping || fail "voltctl ping as root"
expect_eq "root's level" "$(ct voltctl help | sed -n 's/^level *//p' | head -1)" admin
show voltctl stats server || fail "voltctl stats server as root"
show voltctl set scheduler.stealing off || fail "set as root"
show voltctl set scheduler.stealing on || fail "set as root"
show voltctl drain || fail "drain as root"
expect_eq "/readyz while drained" "$(http_status /readyz)" 503
show voltctl undrain || fail "undrain as root"
expect_eq "/readyz after undrain" "$(http_status /readyz)" 200
expect_eq "voltd's own user's level" "$(level_of voltd)" admin

note "as carol (group voltd, not an operator):"
expect_eq "carol's level" "$(level_of carol)" user
ct runuser -u carol -- voltctl stats server >/dev/null || fail "voltctl stats as carol"
show runuser -u carol -- voltctl set scheduler.stealing off || true
expect_eq "carol: set exits" "$(rc_of runuser -u carol -- voltctl set scheduler.stealing off)" 77
expect_eq "carol: drain exits" "$(rc_of runuser -u carol -- voltctl drain)" 77
expect_eq "/readyz (carol's drain refused)" "$(http_status /readyz)" 200

note "as bob (not in group voltd):"
show runuser -u bob -- voltctl ping || true
expect_eq "bob: ping exits" "$(rc_of runuser -u bob -- voltctl ping)" 77
