#!/usr/bin/env bash
# Description: the paper's findings on BE latency hold over its 20 minutes
# of trace, for several seeds: at light RT load delta-l is within 10% of
# LST; at the highest load admission allows with rotation, delta-l beats
# both LST (whose interleaved seeks between the RT and BE zones overload
# the disks) and EDF; no policy misses a deadline with 4 KB BE requests.
# Dynamic slack is within 5% of LST at light load and below delta-l at
# the highest.
. "${top_srcdir:-.}/tests/integration/lib.sh"

cwsim=${top_builddir:-.}/tools/cwsim
t=$cw_tmp

mean() {	# FILE POLICY PLACEMENT -> be_mean_ms
	awk -v p="\"policy\": \"$2\", \"placement\": \"$3\"" 'index($0, p) {
		match($0, /"be_mean_ms": [0-9.]+/); print substr($0, RSTART + 14, RLENGTH - 14) }' "$1"
}
run_to() {	# FILE ARGS...
	local f=$1
	shift
	"$cwsim" run --json --preset paper "$@" >"$f" 2>/dev/null
}

for seed in 1 2 3; do
	check "seed $seed: light load runs" run_to "$t/light$seed" --set seed=$seed --set streams=12
	for pl in rotation random; do
		dl=$(mean "$t/light$seed" delta-l $pl)
		lst=$(mean "$t/light$seed" lst $pl)
		dyn=$(mean "$t/light$seed" dynamic $pl)
		check "seed $seed, $pl, ~5 MB/s: delta-l ($dl ms) within 10% of LST ($lst ms)" \
			awk -v a="$dl" -v b="$lst" 'BEGIN { exit !(a > 0 && b > 0 && a <= 1.1 * b) }'
		check "seed $seed, $pl, ~5 MB/s: dynamic ($dyn ms) within 5% of LST ($lst ms)" \
			awk -v a="$dyn" -v b="$lst" 'BEGIN { exit !(a > 0 && b > 0 && a <= 1.05 * b) }'
	done
	check "seed $seed: highest load runs" run_to "$t/high$seed" --set seed=$seed \
		--set placement=rotation
	dl=$(mean "$t/high$seed" delta-l rotation)
	lst=$(mean "$t/high$seed" lst rotation)
	edf=$(mean "$t/high$seed" edf rotation)
	check "seed $seed, highest rotation load: delta-l ($dl ms) below LST ($lst ms) and EDF ($edf ms)" \
		awk -v a="$dl" -v b="$lst" -v c="$edf" 'BEGIN { exit !(a > 0 && a < b && a < c) }'
	dyn=$(mean "$t/high$seed" dynamic rotation)
	check "seed $seed, highest rotation load: dynamic ($dyn ms) below delta-l ($dl ms)" \
		awk -v a="$dyn" -v b="$dl" 'BEGIN { exit !(a > 0 && a < b) }'
	check "seed $seed: no deadline missed" \
		awk '!/"rt_misses": 0,/ { bad = 1 } END { exit bad || NR != 12 }' "$t/light$seed" "$t/high$seed"
done
