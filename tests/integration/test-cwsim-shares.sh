#!/usr/bin/env bash
# Description: cwsim's best-effort clients under each BE order: with RBFQ
# the weighted clients get their weights' parts (within 5%), the reserved
# one at least 98% of its reservation, the limited one no more than 2%
# over its limit, and no stream misses; with FIFO the weights make no
# difference.  Bad client settings are refused with a clear message, a
# reservation that does not fit with what would.
. "${top_srcdir:-.}/tests/integration/lib.sh"
requires python3

cwsim=${top_builddir:-.}/tools/cwsim
scn=${top_srcdir:-.}/tools/scenarios/shares.scn
t=$cw_tmp

check "the benchmark runs (60 s simulated)" \
	bash -c "top_builddir='${top_builddir:-.}' top_srcdir='${top_srcdir:-.}' \
		bash '${top_srcdir:-.}/tests/bench/beqos.sh' --quick >'$t/bench'"
last=$(tail -n 1 "$t/bench")
echo "$last"
# key=value fields of a line, as shell assignments
eval "$(echo "$last" | tr ' ' '\n' | grep -E '^[a-z_]+=[0-9.]+$')"
check "rbfq: shares follow the weights (error <= 0.05)" \
	awk -v x="${share_error_max:-9}" 'BEGIN { exit !(x <= 0.05) }'
check "rbfq: the reservation is met (>= 0.98)" \
	awk -v x="${resv_met:-0}" 'BEGIN { exit !(x >= 0.98) }'
check "rbfq: the limit holds (<= 0.02 over)" \
	awk -v x="${limit_over:-9}" 'BEGIN { exit !(x <= 0.02) }'
check "no deadline misses" test "${rt_misses:-1}" = 0
fifo=$(grep -A 8 '^fifo' "$t/bench" | grep 'share_error_max=' | head -n 1)
check "fifo: the weights make no difference (error > 0.1)" \
	awk -v l="$fifo" 'BEGIN { split(l, a, /[= ]+/); exit !(a[3] > 0.1) }'

# each order runs and reports its clients
check "sfc runs" bash -c "'$cwsim' run --json --set be_order=sfc --set duration_s=10 '$scn' \
	>'$t/sfc' 2>/dev/null && grep -q '\"be_order\": \"sfc\"' '$t/sfc'"

# run_err DESC PATTERN ARGS...: cwsim ARGS must fail (2 for bad input) saying PATTERN
run_err() {
	local desc=$1 pat=$2
	shift 2
	"$cwsim" run --set duration_s=5 "$@" "$scn" >/dev/null 2>"$t/err"
	local rc=$?
	check "$desc: refused" test "$rc" -ne 0
	check "$desc: says why" grep -q -- "$pat" "$t/err"
}
run_err "a reservation that does not fit" "at most 69.41% is free" \
	--set "client=big weight=1 resv=75%be"
run_err "weight 0" "weight=1..1000000" --set "client=z weight=0"
run_err "a limit below the reservation" "limit is below the reservation" \
	--set "client=z resv=20% limit=10%"
run_err "an unknown order" "expected fifo, rbfq, sfc" --set be_order=lifo
run_err "an unknown curve" "expected sweep, c-scan" --set sfc_curve=peano
