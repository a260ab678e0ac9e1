# SPDX-License-Identifier: MIT
# The operator level under the shipped unit: with control.operator_group =
# voltops, a member of voltops (alice) is an operator (set works, drain and
# reload stay admin-only: exit 77) and carol (group voltd only) stays at
# level user; voltd sees their real uids (voltd(8), Permission levels).
# timeout: 60
level_of() { ct runuser -u "$1" -- voltctl help | sed -n 's/^level *//p' | head -1; }
rc_of() { local rc=0; ct "$@" >/dev/null 2>&1 || rc=$?; echo "$rc"; }
ct sh -c 'getent group voltops >/dev/null || groupadd voltops
	id alice >/dev/null 2>&1 || useradd -M -s /bin/sh -G voltd,voltops alice
	id carol >/dev/null 2>&1 || useradd -M -s /bin/sh -G voltd carol'
show id alice
conf_append '[control]
operator_group = voltops'
show systemctl restart voltd.service || fail "restart with operator_group = voltops"
wait_active 20
show voltctl config control.operator_group

expect_eq "alice's level" "$(level_of alice)" operator
show runuser -u alice -- voltctl set scheduler.stealing off || fail "set as alice (operator)"
show voltctl config scheduler.stealing
expect_eq "alice: drain exits" "$(rc_of runuser -u alice -- voltctl drain)" 77
expect_eq "alice: reload exits" "$(rc_of runuser -u alice -- voltctl reload)" 77
out=$(ct runuser -u carol -- voltctl set scheduler.stealing on 2>&1) || true
note "carol's set: $out"
grep -q "(uid $(ct id -u carol))" <<<"$out" || fail "the refusal does not name carol's real uid"
expect_eq "carol's level" "$(level_of carol)" user
expect_eq "carol: set exits" "$(rc_of runuser -u carol -- voltctl set scheduler.stealing on)" 77
