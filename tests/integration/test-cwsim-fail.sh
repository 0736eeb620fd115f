#!/usr/bin/env bash
# Description: cwsim fails a disk of tools/scenarios/fail.scn (two hdd7200
# disks holding every block twice, a spare) at 10 s while streams
# admitted to survive the loss of a disk play: none of their requests is
# late, the spare takes the disk over and its copies are rebuilt in slack
# within a time the disk model bounds (no faster than the disk transfers
# them, no slower than the rebuild's reserve guarantees), and at the end
# no copy is out of sync.  The same scenario with survive = 0 admits more
# streams, which keep their deadlines without a failure and miss some
# after it; without a spare the partition stays degraded.  The spare is
# chosen as clockwised chooses it (cw_admit_state_takeover): one too slow
# for the streams booked on the failed disk (an atlas2, or a disk like the
# others but for more streams than its slowest zone carries) is refused,
# the partition stays degraded to the end and the report says why; with
# a second spare that carries them, that one takes the disk over.  -o DIR
# draws the timeline; bad failures are refused with a clear error.
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
	bash -c "'$cwsim' run --json '$scn' --set survive=0 --set streams=0 >'$t/plain.json'"
check "... the same scenario without the failure" bash -c \
	"'$cwsim' run --json '$scn' --set survive=0 --set streams=0 --set fail=none >'$t/nofail.json'"
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
	       .fail.stale_at_end > 0 and .fail.survive_misses == 0 and
	       (.fail.why | test("^no spare with room for its [0-9]+ blocks$"))' "$t/nospare.json"

# The spare checked against the streams, as clockwised checks it: the
# streams admitted until refused fill the disks' outer zones, and with
# their blocks in the spare's slowest zone a failure case does not fit.
check "streams admitted until refused" \
	bash -c "'$cwsim' run --json '$scn' --set streams=0 >'$t/full.json'"
jq -c '[.streams, .fail.spare, .fail.why]' "$t/full.json"
check "... more than the scenario's" test "$(jq .streams "$t/full.json")" -gt "$(jq .streams "$t/surv.json")"
check "... the spare cannot carry them: no replacement, the reason, degraded to the end" \
	jq -e '.fail.spare == null and .fail.spares_refused == 1 and .fail.rebuild_blocks == 0 and
	       .fail.degraded_s == null and .fail.stale_at_end > 0 and .fail.survive_misses == 0 and
	       (.fail.why | test("^spare [^:]*: with disk [^ ]* in place of disk [^ ]*, .* refused on disk "))' \
	"$t/full.json"

# A spare slower than the data disks (an atlas2, as large as they are):
# alone it is refused; beside a second, fit spare, that one takes over.
cap=$("$cwsim" model hdd7200 | sed -n 's/.* cap=\([0-9]*\) .*/\1/p')
mkpool() { # DB MODEL...: disks d0... of hdd7200's size, each emulating its MODEL
	local db=$1 i=0 m
	shift
	mkdir -p "$(dirname "$db")" && "$top_builddir/tools/cwpool" create "$db" >/dev/null || return 1
	for m in "$@"; do
		truncate -s "$((cap / 4096 * 4096))" "$(dirname "$db")/d$i.img" &&
		"$top_builddir/tools/cwpool" add-disk "$db" "$(dirname "$db")/d$i.img" hdd "d$i" "$m" \
			>/dev/null || return 1
		i=$((i + 1))
	done
}
check "a pool whose spare is an atlas2" mkpool "$t/slow/p.db" hdd7200 hdd7200 atlas2
check "... the failure" bash -c "'$cwsim' run --json '$scn' --set 'pool=$t/slow/p.db' \
	>'$t/slow.json'"
jq -c '[.streams, .fail.spare, .fail.why]' "$t/slow.json"
check "... no spare replaces the disk, the atlas2 refused, named, with the disk it breaks" \
	jq -e '.fail.spare == null and .fail.spares_refused == 1 and .fail.rebuild_blocks == 0 and
	       .fail.rebuild_end_s == null and .fail.degraded_s == null and .fail.stale_at_end > 0 and
	       (.fail.why | test("^spare d2: with disk d2 in place of disk d0, .* would be refused on disk d2 with disk d1 failed: "))' \
	"$t/slow.json"
check "... its streams still in time on the survivor" \
	jq -e '.streams > 2 and .fail.survive_misses == 0 and .rt_misses == 0' "$t/slow.json"
check "... the text report says so" bash -c "'$cwsim' run '$scn' --set 'pool=$t/slow/p.db' |
	grep -q '^  disk 0 failed at 10.0 s: no spare replaces it (spare d2: with disk d2 in place of disk d0, .*); degraded to the end\$'"
check "a pool with the atlas2 and an hdd7200 as spares" \
	mkpool "$t/two/p.db" hdd7200 hdd7200 atlas2 hdd7200
check "... the failure" bash -c "'$cwsim' run --json '$scn' --set 'pool=$t/two/p.db' \
	--set spare=2,3 >'$t/two.json'"
jq -c '[.streams, .fail.spare, .fail.rebuild_s, .fail.why]' "$t/two.json"
check "... the atlas2 tried first (as much room, the lower id) and refused, d3 takes over" \
	jq -e '.fail.spare == 3 and .fail.spares_refused == 1 and
	       (.fail.why | test("^spare d2: with disk d2 in place of disk d0, .* would be refused on disk d2 with disk d1 failed: ")) and
	       .fail.rebuild_blocks > 0 and .fail.rebuild_done == .fail.rebuild_blocks and
	       .fail.rebuild_end_s < 120 and .fail.stale_at_end == 0 and .fail.survive_misses == 0' \
	"$t/two.json"
check "... the text report names the spare passed over" bash -c "'$cwsim' run '$scn' \
	--set 'pool=$t/two/p.db' --set spare=2,3 | grep -q \
	'^  not by the spares that would not carry the streams: spare d2: with disk d2 in place of disk d0, '"

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
check "... saying why" grep -q 'is a spare' "$t/e2"
expect_fail "a disk the scenario lacks refused" bash -c \
	"'$cwsim' run '$scn' --set 'fail=7 at 5' 2>'$t/e3'"
check "... saying why" grep -q 'disks 0 to 2' "$t/e3"
expect_fail "spare = garbage refused" bash -c "'$cwsim' run '$scn' --set 'spare=2,x' 2>'$t/e5'"
check "... saying why" grep -q 'expected DISK\[,DISK...\]' "$t/e5"
expect_fail "fail = garbage refused" bash -c "'$cwsim' run '$scn' --set 'fail=soon' 2>'$t/e4'"
check "... saying why" grep -q 'expected DISK at SECONDS' "$t/e4"
