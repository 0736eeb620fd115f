#!/usr/bin/env bash
# Description: cwsim fails a disk of tools/scenarios/fail.scn (two hdd7200
# disks holding every block twice, a spare) at 10 s while streams
# admitted to survive the loss of a disk play: none of their requests is
# late, the spare takes the disk over and its copies are rebuilt in slack
# within a time the disk model bounds (no faster than the disk transfers
# them, no slower than the rebuild's reserve guarantees), and at the end
# no copy is out of sync.  The same scenario with survive = 0 admits more
# streams, which keep their deadlines without a failure and miss some
# after it; without a spare the partition stays degraded.  -o DIR draws
# the timeline; bad failures are refused with a clear error.
. "${top_srcdir:-.}/tests/integration/lib.sh"
requires jq

cwsim=${top_builddir:-.}/tools/cwsim
scn=${top_srcdir:-.}/tools/scenarios/fail.scn
t=$cw_tmp
export TMPDIR=$t

check "streams that survive" bash -c "'$cwsim' run --json '$scn' >'$t/surv.json'"
jq -c '.fail | del(.streams)' "$t/surv.json"
check "streams admitted, every one to survive" \
	jq -e '.streams > 2 and (.fail.streams | length) == .streams and
	       all(.fail.streams[]; .survive and .requests > 0)' "$t/surv.json"
check "no request of theirs late, failure or not" \
	jq -e '.fail.survive_misses == 0 and .rt_misses == 0 and
	       all(.fail.streams[]; .misses == 0 and .worst_ms < 0)' "$t/surv.json"
check "the spare took the disk over and the rebuild ended while they played" \
	jq -e '.fail.spare == 2 and .fail.rebuild_start_s == 10 and .fail.rebuild_end_s != null and
	       .fail.rebuild_end_s < 120 and .fail.rebuild_done == .fail.rebuild_blocks and
	       .fail.rebuild_blocks > 0 and .fail.degraded_s == .fail.rebuild_s' "$t/surv.json"
check "no copy out of sync at the end" jq -e '.fail.stale_at_end == 0' "$t/surv.json"

# The bounds from the disk model: the rebuild moves each block at most as
# fast as the fastest zone transfers it, and at least as fast as the
# rebuild's reserve on the survivor promises (a 256 KiB piece at its worst
# case - longest seek, a turn, the slowest zone, the overhead - every
# period that makes a tenth of the disk, CW_ADMIT_REBUILD_SHARE_PPM).
model=$("$cwsim" model hdd7200)
fastest=$(sed -n 's/.* zones=[0-9]*:\([0-9]*\),.*/\1/p' <<<"$model")
slowest=$(sed -n 's/.* zones=.*:\([0-9]*\)$/\1/p' <<<"$model")
rot=$(sed -n 's/.* rot=\([0-9]*\) .*/\1/p' <<<"$model")
ovh=$(sed -n 's/.* ovh=\([0-9]*\) .*/\1/p' <<<"$model")
seek=$(sed -n 's/.* seek=[^ ]*:\([0-9]*\) .*/\1/p' <<<"$model")
blocks=$(jq .fail.rebuild_blocks "$t/surv.json")
secs=$(jq .fail.rebuild_s "$t/surv.json")
read -r lo hi < <(awk -v b="$blocks" -v f="$fastest" -v s="$slowest" -v r="$rot" -v o="$ovh" \
	-v k="$seek" 'BEGIN { m = 1048576; p = 262144
		piece = (k + r + o) / 1e9 + p / s
		printf "%.3f %.3f\n", b * m / f, b * (m / p) * piece / 0.1 }')
echo "# rebuild of $blocks MiB: $secs s; the model's bounds: $lo s to $hi s"
check "rebuild time within the model's bounds" \
	awk -v x="$secs" -v lo="$lo" -v hi="$hi" 'BEGIN { exit !(x >= lo && x <= hi) }'

# Not admitted to survive: more streams fit, and the failure costs them.
check "streams that do not survive" \
	bash -c "'$cwsim' run --json '$scn' --set survive=0 >'$t/plain.json'"
check "... the same scenario without the failure" \
	bash -c "'$cwsim' run --json '$scn' --set survive=0 --set fail=none >'$t/nofail.json'"
echo "# streams: $(jq .streams "$t/surv.json") surviving, $(jq .streams "$t/plain.json") not;" \
	"misses after the failure: $(jq .fail.other_misses "$t/plain.json")"
check "more streams are admitted when they need not survive" \
	test "$(jq .streams "$t/plain.json")" -gt "$(jq .streams "$t/surv.json")"
check "they keep their deadlines while no disk fails" jq -e '.rt_misses == 0' "$t/nofail.json"
check "and miss some after the failure" \
	jq -e '.fail.other_misses > 0 and .fail.survive_misses == 0 and
	       any(.fail.streams[]; .misses > 0 and (.survive | not))' "$t/plain.json"

# No spare: the survivors serve to the end, degraded.
check "no spare" bash -c "'$cwsim' run --json '$scn' --set spare=none >'$t/nospare.json'"
check "... nothing rebuilt, copies out of sync at the end, no stream late" \
	jq -e '.fail.spare == null and .fail.rebuild_end_s == null and .fail.degraded_s == null and
	       .fail.stale_at_end > 0 and .fail.survive_misses == 0' "$t/nospare.json"

check "the text report says it" bash -c "'$cwsim' run '$scn' >'$t/surv.txt' &&
	grep -q '^  disk 0 failed at 10.0 s: spare 2 rebuilt ' '$t/surv.txt' &&
	grep -q '0 late of those admitted to survive' '$t/surv.txt'"
check "-o DIR writes the timeline" bash -c "'$cwsim' run '$scn' -o '$t/fig' >/dev/null 2>&1 &&
	head -1 '$t/fig/fail.csv' | grep -q '^t_s,busy0,rebuild0,busy1,rebuild1,busy2,rebuild2,' &&
	test \$(wc -l <'$t/fig/fail.csv') -gt 200"
if command -v gnuplot >/dev/null; then
	check "... and its figure" test -s "$t/fig/fail.png" -a -s "$t/fig/fail.svg"
fi

expect_fail "fail without copies refused" bash -c \
	"'$cwsim' run '$scn' --set copies=1 2>'$t/e1'"
check "... saying why" grep -q 'copies = 2 or 3' "$t/e1"
expect_fail "failing the spare refused" bash -c "'$cwsim' run '$scn' --set 'fail=2 at 5' 2>'$t/e2'"
check "... saying why" grep -q 'is the spare' "$t/e2"
expect_fail "a disk the scenario lacks refused" bash -c \
	"'$cwsim' run '$scn' --set 'fail=7 at 5' 2>'$t/e3'"
check "... saying why" grep -q 'disks 0 to 2' "$t/e3"
expect_fail "fail = garbage refused" bash -c "'$cwsim' run '$scn' --set 'fail=soon' 2>'$t/e4'"
check "... saying why" grep -q 'expected DISK at SECONDS' "$t/e4"
