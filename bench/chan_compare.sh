#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/chan_compare.sh: voltd's bench/chan_bench against the crossbeam-channel
# peer (shared/peers/micro, src/bin/chan_bench.rs) in one sitting, alternately:
# every round runs both programs unpinned, then both with --pin, the program
# that goes first swapping from round to round (A B / B A ...), each run in a
# fresh process after the peer's calib probes. Then prints, per placement and
# workload, the median of the round medians of each side, their ratio
# (voltd / crossbeam: below 1 = voltd better; every row is a time) with the
# range of the per-round ratios, and the issue-14 target where there is one.
#
# Usage: bench/chan_compare.sh [-b] [-n ROUNDS] [-r REPS] [-o FILE] [-s FILE...]
#   -b         only build both programs (no timing), then exit
#   -n ROUNDS  rounds (default 5; SPEC.md asks for at least 5)
#   -r REPS    timed repetitions per run (default 10)
#   -o FILE    raw output (default bench/results/chan-compare-<UTC time>.txt)
#   -s FILE..  only summarize earlier raw outputs (no runs)
# Env: PEER_SRC (default: shared/peers/micro beside the checkout, i.e.
#   <top>/../shared or, from a worktree in wt/, <top>/../../shared), PEER_DIR (a writable
#   copy, default /tmp/micro-chan; built once with cargo --offline),
#   VOLTD_BENCH (default <top>/build/bench/chan_bench, built with make),
#   VOLTD_ARGS (extra chan_bench options, e.g. "--spin-pauses 512"; they go
#   into the raw file's header, so label the output with -o).
# Needs: the crate sources of librust-crossbeam-channel-dev (and the peer's
# other librust-* crates, scripts/packages-bench.txt) and cargo/rustc.
# Takes about 90 s per round on the 2-CPU machine. Run it on a quiet machine.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
rounds=5 reps=10 out= summarize_only=0 build_only=0
while getopts "bn:r:o:s" o; do
	case $o in
	b) build_only=1 ;;
	n) rounds=$OPTARG ;;
	r) reps=$OPTARG ;;
	o) out=$OPTARG ;;
	s) summarize_only=1 ;;
	*) sed -n '2,27p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))

summarize() {
	python3 - "$@" <<'EOF'
import sys
from collections import OrderedDict

TARGET = {  # issue 14: voltd / crossbeam at most
    "chan_pingpong": 1.0, "chan_pingpong_cpu": 1.0,
    "chan_paced_p99": 1.0, "chan_paced_consumer_cpu": 1.0,
    "chan_mpmc_2p2c": 0.83, "chan_spsc_1p1c": 0.83, "chan_seq_1t": 0.83,
    "chan_mpmc_2p2c_cpu": 1.0, "chan_spsc_1p1c_cpu": 1.0, "chan_seq_1t_cpu": 1.0,
}

def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2

def fmt(ns):
    ns = float(ns)
    for lim, div, unit in ((1e9, 1e9, "s"), (1e6, 1e6, "ms"), (1e3, 1e3, "us")):
        if ns >= lim:
            return "%.3g %s" % (ns / div, unit)
    return "%.3g ns" % ns

# (placement, workload) -> side -> {round: median ns per unit}
data = OrderedDict()
rnd, place = 0, "?"
for path in sys.argv[1:]:
    for line in open(path):
        if line.startswith("## round "):
            f = line.split()
            rnd, place = (path, int(f[2])), f[3]
        elif line.startswith("#csv,"):
            p = line.strip().split(",")
            tag, name, med, units = p[1], p[2], float(p[4]), float(p[8])
            side = {"voltd-chan": "voltd", "crossbeam-channel": "crossbeam"}.get(tag)
            if side:
                data.setdefault((place, name), {}).setdefault(side, {})[rnd] = med / units

print("| placement | workload | rounds | crossbeam (median of round medians, per unit) | voltd | voltd / crossbeam | per-round ratio range | target | met |")
print("|---|---|---|---|---|---|---|---|---|")
for (place, name), sides in data.items():
    v, c = sides.get("voltd", {}), sides.get("crossbeam", {})
    if not v or not c:
        if v:
            print("| %s | %s | %d | - | %s | | | | |" % (place, name, len(v), fmt(median(list(v.values())))))
        continue
    both = sorted(set(v) & set(c))
    if not both:
        continue
    mv, mc = median([v[r] for r in both]), median([c[r] for r in both])
    ratios = [v[r] / c[r] for r in both if c[r] > 0]
    ratio = mv / mc if mc > 0 else float("inf")
    t = TARGET.get(name)
    print("| %s | %s | %d | %s | %s | %.2f | %.2f..%.2f | %s | %s |" % (
        place, name, len(both), fmt(mc), fmt(mv), ratio, min(ratios), max(ratios),
        "<= %.2f" % t if t else "", ("yes" if ratio <= t else "NO") if t else ""))
EOF
}

if [ "$summarize_only" = 1 ]; then
	summarize "$@"
	exit 0
fi

peer_src=${PEER_SRC:-}
for d in "$top/../shared/peers/micro" "$top/../../shared/peers/micro"; do
	[ -n "$peer_src" ] || ! [ -d "$d" ] || peer_src=$(cd "$d" && pwd)
done
[ -n "$peer_src" ] || { echo "chan_compare: shared/peers/micro not found; set PEER_SRC" >&2; exit 1; }
peer_dir=${PEER_DIR:-/tmp/micro-chan}
voltd=${VOLTD_BENCH:-$top/build/bench/chan_bench}
if ! [ -x "$peer_dir/target/release/chan_bench" ]; then
	if ! ls -d /usr/share/cargo/registry/crossbeam-channel-0.5.* >/dev/null 2>&1; then
		echo "chan_compare: the peer needs Debian's crate sources: apt-get install $(sed -e 's/#.*//' "$top/scripts/packages-bench.txt" | grep -E 'librust|cargo|rustc' | tr '\n' ' ')" >&2
		exit 1
	fi
	rm -rf "$peer_dir"
	cp -r "$peer_src" "$peer_dir"
	chmod -R u+w "$peer_dir"
	(cd "$peer_dir" && cargo build --release --offline)
fi
make -C "$top/build" -j2 bench/chan_bench >/dev/null
if [ "$build_only" = 1 ]; then
	echo "built: $voltd and $peer_dir/target/release/chan_bench"
	exit 0
fi
[ -n "$out" ] || { mkdir -p "$top/bench/results"; out=$top/bench/results/chan-compare-$(date -u +%Y%m%dT%H%M%SZ).txt; }

{
	echo "# chan_compare: $(date -u +%Y-%m-%dT%H:%M:%SZ); $(uname -srm); $(nproc) CPUs; rounds=$rounds reps=$reps"
	echo "# voltd: $(git -C "$top" describe --always --dirty 2>/dev/null || echo '?') ${VOLTD_ARGS:-}; peer: $(rustc -V 2>/dev/null)"
	for r in $(seq 1 "$rounds"); do
		for place in unpinned pinned; do
			pin=; [ "$place" = pinned ] && pin=--pin
			echo "## round $r $place (load: $(cut -d' ' -f1-3 /proc/loadavg))"
			"$peer_dir/target/release/calib" --reps 3 --csv | grep '^#csv' || true
			if [ $((r % 2)) = 1 ]; then
				"$voltd" --reps "$reps" --csv $pin ${VOLTD_ARGS:-}
				"$peer_dir/target/release/chan_bench" --reps "$reps" --csv $pin
			else
				"$peer_dir/target/release/chan_bench" --reps "$reps" --csv $pin
				"$voltd" --reps "$reps" --csv $pin ${VOLTD_ARGS:-}
			fi
		done
	done
} 2>&1 | tee "$out"
echo "# raw output: $out"
summarize "$out"
