#!/usr/bin/env bash
# The paper's full sweep (40 loads x 3 policies x 2 placements over 20
# simulated minutes of the CELLO-like trace, plus Figure 2's admission
# curves), timed against the 2-minute target; baseline in the same script:
# the same sweep with EDF alone, whose dispatch does the least work, so the
# ratio of events per second says what the ΔL and LST decisions cost.
set -eu
cwsim=${top_builddir:-.}/tools/cwsim
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cwsim-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# sweep NAME ARGS...: runs it, leaves "seconds events events_per_s" in $tmp/NAME.txt
sweep() {
	local name=$1 start end
	shift
	start=$(date +%s.%N)
	"$cwsim" sweep --preset paper -o "$tmp/$name" "$@" >/dev/null 2>"$tmp/$name.err"
	end=$(date +%s.%N)
	awk -v s="$start" -v e="$end" '/events\/s/ { print e - s, $4, $(NF - 1) }' \
		"$tmp/$name.err" >"$tmp/$name.txt"
}

sweep edf --set policy=edf
sweep full
read -r base_s base_ev base_rate <"$tmp/edf.txt"
read -r full_s full_ev full_rate <"$tmp/full.txt"
runs=$(awk -F, 'NR > 1' "$tmp/full/fig3.csv" | wc -l)
echo "full sweep: $runs runs, $full_ev events in ${full_s} s (${full_rate} events/s); target 120 s"
echo "EDF-only sweep (baseline): $base_ev events in ${base_s} s (${base_rate} events/s)"
ratio=$(awk -v a="$full_rate" -v b="$base_rate" 'BEGIN { printf "%.3f", a / b }')
budget=$(awk -v s="$full_s" 'BEGIN { printf "%.3f", s / 120 }')
echo "events/s full vs EDF only: $ratio; share of the 2-minute budget used: $budget"
echo "cwsim_sweep_s=$full_s runs=$runs events_per_s=$full_rate vs_edf_only=$ratio budget_used=$budget"
