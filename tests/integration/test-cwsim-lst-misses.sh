#!/usr/bin/env bash
# Description: with 1 MB best-effort requests under the highest admitted RT
# load, and every request taking its worst case, LST starts BE work that
# later releases cannot absorb and misses deadlines, while delta-l, run on
# the same streams and trace, misses none (the paper's footnote 9).
. "${top_srcdir:-.}/tests/integration/lib.sh"

cwsim=${top_builddir:-.}/tools/cwsim

cat >"$cw_tmp/large-be" <<'SCN'
# the paper's disks and streams, large BE requests, worst-case service,
# the paper's plan (clockwised's cuts BE requests into 256 KiB pieces)
plan = paper
model = atlas2
placement = rotation, random
policy = delta-l, lst
duration_s = 60
seed = 1
service = worst
be = cello
be_size_kb = 1024
be_pblock_kb = 1024
be_rate = 2
be_peak = 10
SCN
rc=0
"$cwsim" run --json "$cw_tmp/large-be" >"$cw_tmp/out" 2>"$cw_tmp/err" || rc=$?
check "runs" test "$rc" -eq 0
misses() {	# policy -> total RT misses over placements
	awk -v p="\"policy\": \"$1\"" 'index($0, p) {
		match($0, /"rt_misses": [0-9]+/); s += substr($0, RSTART + 13, RLENGTH - 13); n++ }
		END { if (!n) exit 1; print s }' "$cw_tmp/out"
}
dl=$(misses delta-l) || dl=x
lst=$(misses lst) || lst=x
echo "misses: delta-l $dl, lst $lst"
check "delta-l misses no deadline" test "$dl" = 0
check "LST misses deadlines" test "$lst" != x -a "$lst" != 0
check "RT requests ran" grep -Eq '"rt_requests": [1-9][0-9]{2,}' "$cw_tmp/out"
check "1 MB BE requests were served" grep -Eq '"be_done": [1-9][0-9]+' "$cw_tmp/out"
