#!/bin/bash
# Description: a 2-copy partition keeps serving while one of its disks
# fails.  Under the fault engine, disk b returns EIO on one write in the
# middle of a verified write load (nbd-durable: records, FUA and FLUSH):
# every write is acknowledged, every acknowledged write reads back, part
# show says degraded with the stale blocks of copy on b, and every block
# whose copies are both in sync holds the same bytes on both disk files.
# Then b fails every read and write: nbdcopy's writes and reads of a
# second partition still succeed, every block's copy on b is stale and no
# block is lost; after 8 failures b is taken for gone and every copy on
# it (the first partition's too) is marked at once, so reads go to a.
# Then b is missing at start: a third partition (all in sync before, its
# blocks never written: the keeper of holes zeroes them) is exported all
# the same, written and read from a; with b back, reads still come from a
# (b's stale copies hold older bytes and are never read).  Last, a fails
# too: a write that no copy takes fails with EIO and its block is lost.
# cwctl status, the unit's STATUS and the log say degraded, the log once
# per disk.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires jq nbdcopy python3

ctl() { "$top_builddir/tools/cwctl" --socket "$cw_tmp/control" "$@"; }
client=$top_builddir/tests/integration/nbd-durable
log=$cw_tmp/records.log
check "pool" cwd_pool 48M a b
# conf_with B_FAULTS [A_FAULTS]
conf_with() {
	cwd_conf "disks = ( { name = \"a\"; path = \"$cw_tmp/a.disk\"; fault = \"${2:-}\"; },
	{ name = \"b\"; path = \"$cw_tmp/b.disk\"; fault = \"$1\"; } );"
}
notify=$cw_tmp/notify.sock
check "notify socket" cwd_notify_listen "$notify" "$cw_tmp/notify.log"
conf_with ""
cwd_start
check "a 2-copy partition" ctl part create mir --size 16M --copies 2
check "another" ctl part create mir2 --size 8M --copies 2
check "exported" ctl export add mir
check "exported too" ctl export add mir2
check "restart" cwd_stop

# -- one write fails on b in the middle of the load
conf_with "fail-write=40"
NOTIFY_SOCKET=$notify cwd_start
check "the unit's STATUS: nothing degraded" grep -qx 'STATUS=Serving 2 exports' "$cw_tmp/notify.log"
touch "$log"
"$client" "$(cwd_uri mir)" write "$log" 1000 16 1M 8 120 >"$cw_tmp/write.out" 2>&1
check "120 writes issued" test "$(grep -c '^i ' "$log")" -eq 120
check "every write acknowledged" test "$(grep -c '^d ' "$log")" -gt 100
check "the failed write was logged" grep -q 'disk b .*write of .* failed' "$(cwd_log)"
out=$("$client" "$(cwd_uri mir)" verify "$log" 16 1M)
echo "$out"
check "every acknowledged write reads back ($out)" grep -q 'checked=[1-9][0-9]* lost=0 foreign=0' <<<"$out"
show=$(ctl --json part show mir --all)
stale=$(jq '.stale_per_copy | add' <<<"$show")
check "part show: degraded" test "$(jq .degraded <<<"$show")" = true
check "1 or 2 blocks stale on the copies on b ($stale)" test "$stale" -ge 1 -a "$stale" -le 2
check "none lost" test "$(jq .lost_blocks <<<"$show")" -eq 0
check "the stale copies are b's" test "$(jq '[.copy_runs[] | select(.in_sync | not) | .disk] |
	unique' -c <<<"$show")" = '["b"]'
check "in words" bash -c 'grep -q "degraded: copy [01] stale [12]" <<<"$0"' "$(ctl part show mir)"
check "cwctl status too" bash -c 'grep -q "^mir .*degraded: copy" <<<"$0"' "$(ctl status)"
check "the unit's STATUS names it" wait_for "STATUS degraded" 20 \
	grep -qx 'STATUS=Serving 2 exports; degraded: mir' "$cw_tmp/notify.log"
# Each block with both copies in sync: the same bytes on both files.
bs=$(jq .block_size <<<"$show")
jq -r --argjson bs "$bs" '.copy_runs[] | . as $r | range(0; .blocks) |
	"\($r.first_block + .) \($r.disk) \($r.offset + . * $bs) \($r.in_sync)"' <<<"$show" |
	sort -n >"$cw_tmp/blocks"
same=0 both=0
while read -r b1 d1 o1 s1 && read -r b2 d2 o2 s2; do
	[ "$b1" = "$b2" ] || { echo "block list out of step: $b1 $b2"; break; }
	[ "$s1" = true ] && [ "$s2" = true ] || continue
	both=$((both + 1))
	cmp -s <(tail -c +$((o1 + 1)) "$cw_tmp/$d1.disk" | head -c "$bs") \
		<(tail -c +$((o2 + 1)) "$cw_tmp/$d2.disk" | head -c "$bs") && same=$((same + 1))
done <"$cw_tmp/blocks"
check "both copies in sync hold the same bytes ($same of $both)" test "$same" -eq "$both" -a \
	"$both" -eq $((16 - stale))
check "stop" cwd_stop

# -- b fails every request (a dying disk): mir2 is served from a
conf_with "fail-range=0+48M"
cwd_start
head -c 8M /dev/urandom >"$cw_tmp/in2"
check "nbdcopy writes mir2" nbdcopy "$cw_tmp/in2" "$(cwd_uri mir2)"
check "nbdcopy reads it back" nbdcopy "$(cwd_uri mir2)" "$cw_tmp/out2"
check "as written" cmp "$cw_tmp/in2" "$cw_tmp/out2"
show=$(ctl --json part show mir2)
check "mir2 degraded: each of its 8 blocks has its copy on b stale" test \
	"$(jq '.stale_per_copy | add' <<<"$show")" -eq 8
check "none lost" test "$(jq .lost_blocks <<<"$show")" -eq 0
check "b taken for gone after 8 failures" grep -q \
	'disk b .*8 requests failed within a second: taken for gone' "$(cwd_log)"
check "so mir's copies on b are all stale too, unread and unwritten" test \
	"$(ctl --json part show mir | jq '.stale_per_copy | add')" -eq 16
# reads of mir go to a at once.
out=$("$client" "$(cwd_uri mir)" verify "$log" 16 1M)
check "mir's records still read back, from a ($out)" grep -q 'checked=[1-9][0-9]* lost=0 foreign=0' <<<"$out"
check "stop" cwd_stop

# -- b missing at start (a third partition, made with b whole again,
# has its copies there in sync)
conf_with ""
cwd_start
check "a third 2-copy partition" ctl part create mir3 --size 8M --copies 2
check "exported" ctl export add mir3
check "stop" cwd_stop
mv "$cw_tmp/b.disk" "$cw_tmp/b.away"
NOTIFY_SOCKET=$notify cwd_start
check "the log says b's copies are out of sync" grep -q \
	'disk b is not open: 8 copies of blocks of mirrored partitions on it are marked' "$(cwd_log)"
head -c 8M /dev/urandom >"$cw_tmp/in"
check "mir3 is exported and written without b" nbdcopy "$cw_tmp/in" "$(cwd_uri mir3)"
check "and read back" nbdcopy "$(cwd_uri mir3)" "$cw_tmp/out"
check "as written" cmp "$cw_tmp/in" "$cw_tmp/out"
check "every block's copy on b stale" test \
	"$(ctl --json part show mir3 | jq '.stale_per_copy | add')" -eq 8
check "the unit's STATUS names all three" wait_for "STATUS" 20 grep -qx \
	'STATUS=Serving 3 exports; degraded: mir, mir2, mir3' "$cw_tmp/notify.log"
check "stop" cwd_stop
mv "$cw_tmp/b.away" "$cw_tmp/b.disk"
cwd_start
check "b back: mir3 still reads what was written while it was away" \
	nbdcopy "$(cwd_uri mir3)" "$cw_tmp/out3"
check "as written" cmp "$cw_tmp/in" "$cw_tmp/out3"
check "still degraded until a resync" test "$(ctl --json part show mir3 | jq .degraded)" = true
check "stop" cwd_stop
# -- a fails too: a write no copy takes fails, and its block is lost
conf_with "" "fail-range=0+48M"
cwd_start
"$client" "$(cwd_uri mir3)" ops w0+64k r1M+64k >"$cw_tmp/ops.out" 2>&1
cat "$cw_tmp/ops.out"
check "a write no copy has fails with EIO" grep -qx 'w0+64k error: Input/output error' \
	"$cw_tmp/ops.out"
show=$(ctl --json part show mir3)
check "its block is lost" test "$(jq .lost_blocks <<<"$show")" -ge 1
check "part show says so" bash -c 'grep -q "blocks have none and fail with EIO\|offline\|partial" <<<"$0"' \
	"$(ctl part show mir3)"
check "stop" cwd_stop
for r in 1 2 3 4 5 6; do
	n=$(grep -c 'disk b (.*copies of mirrored partitions are marked out of sync' \
		"$cw_tmp/clockwised.$r.log")
	[ "$n" -le 1 ] || echo "run $r said it $n times"
	[ "$n" -le 1 ] || cw_failed=$((cw_failed + 1))
done
