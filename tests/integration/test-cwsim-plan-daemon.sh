#!/usr/bin/env bash
# Description: cwsim runs each disk under clockwised's plan unless the
# scenario says plan = paper.  For the same admitted streams both plans
# see the same delta-L, but the daemon's leaves best effort the budget
# delta-L - max(2 ms, delta-L / 4) (the guard) where the paper's leaves
# all of delta-L, so BE work waits longer; admission under the daemon's
# plan keeps the best-effort reserve and so stops earlier; no stream
# misses a deadline under either.  `cwsim plan` prints the same plans the
# runs use, and an explicit server takes the place of the reserve.
. "${top_srcdir:-.}/tests/integration/lib.sh"
requires jq

cwsim=${top_builddir:-.}/tools/cwsim
t=$cw_tmp
jqe() { jq -e "$@" >/dev/null; }
run_to() {	# FILE ARGS...: cwsim run --json --preset quick ARGS into FILE
	local f=$1
	shift
	"$cwsim" run --json --preset quick --set policy=delta-l "$@" >"$f" 2>/dev/null
}

check "paper plan, 30 streams" run_to "$t/paper30" --set streams=30
check "daemon plan, 30 streams" run_to "$t/daemon30" --set streams=30 --set plan=daemon
check "the paper's output has no plan keys" jqe -s 'map(has("plan") | not) | all' "$t/paper30"
check "the daemon's says its plan" jqe -s 'map(.plan == "daemon") | all' "$t/daemon30"
jq -s -c 'map({placement, streams, delta_l_ms})' "$t/paper30" >"$t/a"
jq -s -c 'map({placement, streams, delta_l_ms})' "$t/daemon30" >"$t/b"
check "same streams, same delta-L" cmp -s "$t/a" "$t/b"
check "the guard: BE budget below delta-L on every disk" jqe -s \
	'map([.be_budget_ms_per_disk, .delta_l_ms_per_disk] | transpose | map(.[0] < .[1]) | all) | all' \
	"$t/daemon30"
check "the guard keeps max(2 ms, a quarter)" jqe -s \
	'map([.be_budget_ms_per_disk, .delta_l_ms_per_disk] | transpose |
	     map((.[1] - ([2, .[1] / 4] | max) - .[0]) | fabs < 0.002) | all) | all' "$t/daemon30"
mean() { jq -s -r --arg pl "$2" '.[] | select(.placement == $pl) | .be_mean_ms' "$1"; }
for pl in rotation random; do
	p=$(mean "$t/paper30" $pl) d=$(mean "$t/daemon30" $pl)
	check "$pl: BE waits longer with less slack ($d ms against $p ms)" \
		awk -v a="$d" -v b="$p" 'BEGIN { exit !(a > b) }'
done
check "no miss under the daemon's plan" jqe -s 'map(.rt_misses == 0) | all' "$t/daemon30"

check "paper plan, until refused" run_to "$t/paper" --set streams=0
check "daemon plan, until refused" run_to "$t/daemon" --set streams=0 --set plan=daemon
for pl in rotation random; do
	p=$(jq -s --arg pl $pl '.[] | select(.placement == $pl) | .streams' "$t/paper")
	d=$(jq -s --arg pl $pl '.[] | select(.placement == $pl) | .streams' "$t/daemon")
	check "$pl: the reserve admits fewer streams ($d against $p)" test "$d" -lt "$p"
done
check "no miss at the highest load under the daemon's plan" \
	jqe -s 'map(.rt_misses == 0) | all' "$t/daemon"

# cwsim plan: the plan of the first placement, the one run uses.
plan_to() {	# FILE ARGS...
	local f=$1
	shift
	"$cwsim" plan --json --preset quick --set placement=rotation "$@" >"$f" 2>/dev/null
}
check "plan, paper" plan_to "$t/p.json" --set streams=30
check "plan, daemon" plan_to "$t/d.json" --set streams=30 --set plan=daemon
check "the paper's plan gives best effort all of delta-L" \
	jqe 'map(.be_budget_ns == .delta_l_ns and .be_reserve_service_ns == 0) | all' "$t/p.json"
check "the daemon's: delta-L less max(2 ms, a quarter), and a reserve" jqe \
	'map(.be_budget_ns == .delta_l_ns - ([2000000, ((.delta_l_ns / 4) | floor)] | max) and
	     .be_reserve_service_ns > 0) | all' "$t/d.json"
check "run reports the plan's delta-L" test \
	"$(jq '.[0].delta_l_ns / 1e6 * 1000 | round' "$t/d.json")" = \
	"$(jq -s '.[] | select(.placement == "rotation") | .delta_l_ms * 1000 | round' "$t/daemon30")"
check "plan, daemon, an explicit server" plan_to "$t/s.json" --set streams=30 --set plan=daemon \
	--set server_period_ms=1000 --set server_slice_ms=100
check "the explicit server is the plan's, and no reserve is kept" jqe \
	'map(.server_slice_ns == 100000000 and .server_period_ns == 1000000000 and
	     .be_reserve_service_ns == 0 and .tasks > 0) | all' "$t/s.json"
check "a readable table by default" sh -c "'$cwsim' plan --preset quick | grep -q '^DISK .*BE-BUDGET'"
rc=0
"$cwsim" run --preset quick --set plan=sometimes >/dev/null 2>"$t/err" || rc=$?
check "an unknown plan: exit 2" test "$rc" = 2
check "and says what is expected" grep -q "plan: expected daemon or paper" "$t/err"
