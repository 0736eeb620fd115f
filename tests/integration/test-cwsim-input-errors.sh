#!/usr/bin/env bash
# Description: a bad scenario line, a bad trace line (CSV or blkparse), an
# unknown preset or model, or bad usage is refused with exit 2 and a
# message naming the file and line; nothing is written.
. "${top_srcdir:-.}/tests/integration/lib.sh"

cwsim=${top_builddir:-.}/tools/cwsim
t=$cw_tmp

# expect2 DESC PATTERN CMD...: CMD exits 2 and its stderr matches PATTERN
expect2() {
	local desc=$1 pat=$2 rc=0
	shift 2
	"$@" >"$t/out" 2>"$t/err" || rc=$?
	check "$desc: exit 2" test "$rc" -eq 2
	check "$desc: says '$pat'" grep -q -- "$pat" "$t/err"
}

printf 'model = atlas2\n# fine so far\n\ndisks = 3\nplacment = rotation\n' >"$t/typo.scn"
expect2 "unknown key" "typo.scn:5: placment: unknown key" "$cwsim" run "$t/typo.scn"
printf 'disks = 0\n' >"$t/zero.scn"
expect2 "out of range" "zero.scn:1: disks" "$cwsim" sweep -o "$t/never" "$t/zero.scn"
check "nothing written on bad input" test ! -e "$t/never"
printf 'policy = delta-l, fifo\n' >"$t/pol.scn"
expect2 "unknown policy" "pol.scn:1: policy" "$cwsim" run "$t/pol.scn"
printf 'duration_s 60\n' >"$t/noeq.scn"
expect2 "no equals sign" "noeq.scn:1: .*key = value" "$cwsim" run "$t/noeq.scn"
printf 'model = nosuchdisk\n' >"$t/model.scn"
expect2 "unknown model" "model: \"nosuchdisk\" is not a known model" "$cwsim" run "$t/model.scn"
printf 'model = ssd channels=0\n' >"$t/mech.scn"
expect2 "a bad setting of the model's mechanics" "model: channels=0: expected 1 to 64" \
	"$cwsim" run "$t/mech.scn"
printf 'model = file:nothere.model\n' >"$t/mfile.scn"
expect2 "missing model file" "nothere.model" "$cwsim" run "$t/mfile.scn"
printf 'cwmodel1 name=x garbage\n' >"$t/bad.model"
printf 'model = file:bad.model\n' >"$t/mbad.scn"
expect2 "malformed model file" "not a valid" "$cwsim" run "$t/mbad.scn"
printf 'rt_area_pct = 60\nbe_area_pct = 60\n' >"$t/area.scn"
expect2 "areas overlap" "at most 100" "$cwsim" run "$t/area.scn"

printf 'time,disk,offset,size,rw\n0.5,0,4096,4096,R\n1.0,1,8192,4096,X\n' >"$t/bad.csv"
printf 'be = csv:bad.csv\nduration_s = 5\n' >"$t/csv.scn"
expect2 "bad CSV trace line" "bad.csv:3:" "$cwsim" run "$t/csv.scn"
printf '0.5,0,4096,0,R\n' >"$t/zero.csv"
printf 'be = csv:zero.csv\nduration_s = 5\n' >"$t/zcsv.scn"
expect2 "zero-size CSV request" "zero.csv:1:" "$cwsim" run "$t/zcsv.scn"
printf '  8,0  1  1  0.1  7  Q  R 100 + 8 [a]\n  8,0  1  2  zz  7  Q  R 100 + 8 [a]\n' >"$t/bad.blk"
printf 'be = blkparse:bad.blk\nduration_s = 5\n' >"$t/blk.scn"
expect2 "bad blkparse line" "bad.blk:2:" "$cwsim" run "$t/blk.scn"
printf 'be = csv:missing.csv\n' >"$t/miss.scn"
expect2 "missing trace" "missing.csv" "$cwsim" run "$t/miss.scn"

expect2 "unknown preset" "unknown preset" "$cwsim" sweep --preset nosuch
expect2 "no scenario" "usage" "$cwsim" run
expect2 "scenario and preset" "usage" "$cwsim" run --preset quick "$t/typo.scn"
expect2 "bad --set" "--set: seed" "$cwsim" run --preset quick --set seed=-1
expect2 "--set without =" "KEY=VALUE" "$cwsim" run --preset quick --set seed
expect2 "missing scenario file" "nothere.scn" "$cwsim" run "$t/nothere.scn"

# garbage (random bytes) as a scenario or a trace: refused, never a crash
head -c 4096 /dev/urandom >"$t/garbage"
expect2 "random bytes as a scenario" "garbage:" "$cwsim" run "$t/garbage"
printf 'be = csv:garbage\nduration_s = 5\n' >"$t/gcsv.scn"
expect2 "random bytes as a CSV trace" "garbage:" "$cwsim" run "$t/gcsv.scn"
printf '1,0,18446744073709551616,4096,R\n' >"$t/big.csv"
printf 'be = csv:big.csv\nduration_s = 5\n' >"$t/bigcsv.scn"
expect2 "offset past 2^64" "big.csv:1:" "$cwsim" run "$t/bigcsv.scn"
printf 'be = blkparse:garbage\nduration_s = 5\nstreams = 1\n' >"$t/gblk.scn"
rc=0
"$cwsim" run "$t/gblk.scn" >/dev/null 2>"$t/err" || rc=$?
check "random bytes as blkparse: refused (2) or skipped (0), no crash" \
	test "$rc" -eq 0 -o "$rc" -eq 2
