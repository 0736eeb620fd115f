#!/usr/bin/env bash
# Description: best-effort load read from a CSV trace and from blkparse
# output (the shipped examples, paths relative to the scenario) is replayed
# request for request: every data request in the file is served, flushes,
# other actions and the summary are skipped.
. "${top_srcdir:-.}/tests/integration/lib.sh"

cwsim=${top_builddir:-.}/tools/cwsim
scn=${top_srcdir:-.}/tools/scenarios

field() {	# name -> its values, one per line
	grep -o "\"$1\": [0-9]*" "$cw_tmp/out" | awk '{ print $2 }'
}
run_json() {	# ARGS...: cwsim run --json ARGS into $cw_tmp/out
	"$cwsim" run --json "$@" >"$cw_tmp/out" 2>/dev/null
}

check "CSV trace runs" run_json "$scn/trace-csv.scn"
want=$(awk -F, 'NR > 1 && $1 < 30' "$scn/sample-trace.csv" | wc -l)
check "CSV: one object per policy" test "$(wc -l <"$cw_tmp/out")" -eq 3
check "CSV: all $want requests seen" test "$(field be_requests | sort -u)" = "$want"
check "CSV: all $want requests done" test "$(field be_done | sort -u)" = "$want"

check "blkparse trace runs" run_json "$scn/trace-blkparse.scn"
want=$(awk '$6 == "Q" && $7 ~ /[RW]/ && $8 ~ /^[0-9]+$/' "$scn/sample-trace.blkparse" | wc -l)
check "blkparse: the sample has data requests" test "$want" -ge 5
check "blkparse: all $want requests done" test "$(field be_done | sort -u)" = "$want"

# a trace out of order (blkparse merges CPUs loosely) is sorted by time
printf '2.0,0,0,4096,W\n1.0,1,4096,4096,R\n0.5,2,8192,4096,read\n' >"$cw_tmp/t.csv"
check "unsorted CSV runs" run_json --preset quick --set "be=csv:$cw_tmp/t.csv" \
	--set placement=rotation --set policy=edf --set streams=2
check "unsorted CSV: 3 done" test "$(field be_done)" = 3
