#!/bin/bash
# Description: a spare takes a failed disk's place only if it carries the
# streams booked there.  Disks a and b hold a 2-copy partition with a
# stream admitted to survive a disk, at 80% of the largest such rate;
# spares s1 (an atlas2, far slower: the first tried, as it has as much
# room as s2) and s2 (a 7200 rpm disk like a and b).  b goes missing:
# at the restart s1 is checked and refused (admission with s1 in b's
# place, naming the reservation and the disk), s2 takes b's copies, they
# are rebuilt there and the stream is booked on a and s2.  Then s2 goes
# missing with only s1 left: no spare replaces it, the log, cwctl status
# and part show say why, s1 stays a spare, and the partition is served
# degraded from a; cwctl disk replace s2 s1 is refused the same way.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires jq nbdcopy

ctl() { "$top_builddir/tools/cwctl" --socket "$cw_tmp/control" "$@"; }
check "pool of 64 KiB blocks" "$cwpool" create "$cwd_db" 65536
for d in a b s1 s2; do
	truncate -s 32M "$cw_tmp/$d.disk"
	check "disk $d" "$cwpool" add-disk "$cwd_db" "$cw_tmp/$d.disk" hdd "$d"
done
cwd_conf "disks = ( { name = \"s1\"; path = \"$cw_tmp/s1.disk\"; model = \"atlas2\"; } );"
cwd_start
check "s1 and s2 made spares" ctl disk set s1 --spare
check "s2" ctl disk set s2 --spare
check "a 2-copy partition" ctl part create mir --size 16M --copies 2
check "exported" ctl export add mir
uri=$(cwd_uri mir)
head -c 16M /dev/urandom >"$cw_tmp/in"
check "filled" nbdcopy "$cw_tmp/in" "$uri"
max=$(ctl --json resv create mir --rate 1000 --block 64K --dry-run | jq -e .max_rate)
rate=$((max * 8 / 10))
id=$(ctl --json resv create mir --rate "$rate" --block 64K | jq -e .id)
check "a stream surviving a disk at $rate B/s (of $max)" test -n "$id"
check "stop" cwd_stop

# -- b missing: s1 refused, s2 takes its place
mv "$cw_tmp/b.disk" "$cw_tmp/b.gone"
cwd_start
check "s2 replaces b" wait_for "the takeover" 30 grep -q 'disk b is gone: spare s2 replaces it' \
	"$(cwd_log)"
line=$(grep 'disk b is gone: spare s2 replaces it' "$(cwd_log)")
echo "$line"
check "not s1, which would break reservation $id on s1" grep -q \
	"not by spare s1: with disk s1 in place of disk b, reservation $id would be .*refused on disk s1" \
	<<<"$line"
moves() { ctl --json move list; }
# s1's replacement was journalled, refused and cancelled before s2's,
# and says why
check "one replacement cancelled, one onto s2" test "$(moves | jq -c '[.[] | [.kind, .disk_id,
	.state]] | .[0][2] |= (. == "cancelled") | .[1][2] |= (. != "cancelled")')" = \
	'[["replace",2,true],["replace",2,true]]'
check "the cancelled one says why" test "$(moves | jq -r '.[0].error' |
	grep -c "^refused: with disk s1 in place of disk b, reservation $id would be refused on disk s1")" -eq 1
check "move list shows it" grep -q "cancelled, .*: refused: with disk s1 in place of disk b" \
	<<<"$(ctl move list)"
check "rebuilt" wait_for "the rebuild onto s2" 60 eval '[ "$(moves | jq -r ".[1].state")" = done ]'
show=$(ctl --json part show mir --all)
check "nothing out of sync" test "$(jq .stale_copies <<<"$show")" -eq 0
check "the copies on a and s2" test "$(jq -c '[.copy_runs[].disk] | unique' <<<"$show")" = '["a","s2"]'
check "both copies hold the same bytes" cmp <(cwd_copy_image "$show" 0) <(cwd_copy_image "$show" 1)
check "and the data written" cmp <(cwd_copy_image "$show" 1) "$cw_tmp/in"
resv_disks() { ctl --json resv show "$id" | jq -c '[.per_disk[].disk] | sort'; }
ctl --json resv show "$id"
check "the stream booked on a and s2 once the replacement is done" wait_for "the booking" 10 \
	eval '[ "$(resv_disks)" = "[\"a\",\"s2\"]" ]'
check "s1 still a spare" test "$(ctl --json disk list | jq -c '[.[] | select(.spare) | .name]')" = '["s1"]'
check "b, empty, leaves the pool" ctl disk remove b
check "stop" cwd_stop

# -- s2 missing, only s1 left: no spare replaces it, and cwctl says why
mv "$cw_tmp/s2.disk" "$cw_tmp/s2.gone"
cwd_start
check "no spare replaces s2" wait_for "the takeover's refusal" 30 grep -q \
	'disk s2 is gone and no spare replaces it' "$(cwd_log)"
grep 'disk s2 is gone and no spare replaces it' "$(cwd_log)"
check "the log names the reservation and the disk" grep -q \
	"spare s1: with disk s1 in place of disk s2, reservation $id would be .*refused on disk s1" \
	"$(cwd_log)"
check "no move runs" test "$(moves | jq '[.[] | select(.state == "running" or
	.state == "paused")] | length')" -eq 0
check "s1 still a spare, empty" test "$(ctl --json disk list | jq -c '.[] | select(.name == "s1") |
	[.spare, .free_blocks == .blocks]')" = '[true,true]'
check "disk list says why s2 is not replaced" test "$(ctl --json disk list |
	jq -r '.[] | select(.name == "s2") | .unreplaced' | grep -c "reservation $id")" -eq 1
st=$(ctl status)
check "cwctl status says so" grep -q "DEGRADED: disk s2 failed and no spare replaces it: spare s1: " \
	<<<"$st"
show=$(ctl --json part show mir)
check "part show: degraded" test "$(jq .degraded <<<"$show")" = true
check "part show: because s2 is not replaced" test "$(jq -r '.degraded_because[0]' <<<"$show" |
	grep -c "^disk s2 is not replaced: spare s1: with disk s1 in place of disk s2")" -eq 1
check "in words too" grep -q "^disk s2 is not replaced: " <<<"$(ctl part show mir)"
check "served degraded from a" cmp <(nbdcopy "$uri" - ) "$cw_tmp/in"
out=$(ctl disk replace s2 s1 2>&1)
echo "$out"
check "disk replace s2 s1 refused with the reason" grep -q \
	"with disk s1 in place of disk s2, reservation $id would be refused on disk s1" <<<"$out"
check "s1 still a spare after it" test "$(ctl --json disk list | jq -c '[.[] | select(.spare) | .name]')" = '["s1"]'
check "and status still says why" grep -q "DEGRADED: disk s2 failed and no spare replaces it" \
	<<<"$(ctl status)"
check "stop" cwd_stop
