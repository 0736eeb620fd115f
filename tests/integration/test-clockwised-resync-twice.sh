#!/bin/bash
# Description: two crashes (kill -9) while a 2-copy partition is being
# moved, and the resync the first one left owed.  A pool of 64 KiB blocks
# (a region of the write-intent record is 64 blocks, 4 MiB); a move of the
# partition off disk a onto b and c (c's requests held a second each by
# the fault engine, so the move is still at its first blocks) is paused; a
# verified write load (nbd-durable) runs and the daemon is killed under
# it, leaving dirty regions in the record.  The restart marks those
# regions' second copies out of sync, but their resync must wait for the
# move: the daemon keeps it owed in the pool (copy_resync).  Killed again
# before the move is resumed, and with one out-of-sync copy's bytes
# scribbled over on its disk file meanwhile, the second restart still owes
# the same resync; once the move is resumed and done, the resync follows
# by itself: nothing out of sync, nothing owed, every acknowledged write
# reads back and both copies hold the same bytes on the disk files.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires jq nbdcopy sqlite3

ctl() { "$top_builddir/tools/cwctl" --socket "$cw_tmp/control" "$@"; }
client=$top_builddir/tests/integration/nbd-durable
log=$cw_tmp/records.log
check "pool of 64 KiB blocks" "$cwpool" create "$cwd_db" 65536
for d in a b c; do
	truncate -s 32M "$cw_tmp/$d.disk"
	check "disk $d" "$cwpool" add-disk "$cwd_db" "$cw_tmp/$d.disk" hdd "$d"
done
# conf_with C_FAULTS
conf_with() {
	cwd_conf "disks = ( { name = \"a\"; path = \"$cw_tmp/a.disk\"; },
	{ name = \"b\"; path = \"$cw_tmp/b.disk\"; },
	{ name = \"c\"; path = \"$cw_tmp/c.disk\"; fault = \"$1\"; } );"
}
owed() { sqlite3 "$cwd_db" 'SELECT count(*) FROM copy_resync'; }
stale() { ctl --json part show mir | jq .stale_copies; }
rebuilds() { sqlite3 "$cwd_db" 'SELECT count(*) FROM move WHERE kind = 4'; }

conf_with "delay-us=1000000"
cwd_start
check "a 2-copy partition" ctl part create mir --size 16M --copies 2
check "exported" ctl export add mir
uri=$(cwd_uri mir)
head -c 16M /dev/zero >"$cw_tmp/in"
check "filled with zeros" nbdcopy "$cw_tmp/in" "$uri"
check "a move onto b and c" ctl part move mir --disks b,c
id=$(ctl --json move list | jq '.[-1].id')
check "paused" ctl move pause "$id"
state() { ctl --json move list | jq -r ".[] | select(.id == $id) | .$1"; }
check "the move stays unfinished" wait_for "the pause" 20 eval '[ "$(state state)" = paused ]'
echo "move $id paused at $(state done) of $(state blocks) blocks"

# -- crash 1: under a verified write load
touch "$log"
"$client" "$uri" write "$log" 1000 256 64k 8 1000000 >"$cw_tmp/write.out" 2>&1 &
writer=$!
check "writes acknowledged" wait_for "40 writes" 60 eval '[ "$(grep -c "^d " "$log")" -ge 40 ]'
cwd_kill9
wait "$writer"
dirty=$(sqlite3 "$cwd_db" 'SELECT count(*) FROM copy_intent')
check "killed -9 under writes: $dirty dirty regions in the record" test "$dirty" -ge 1

# -- restart 1: the recovery marks, the resync waits for the move, owed
cwd_start
check "the record is empty" test "$(sqlite3 "$cwd_db" 'SELECT count(*) FROM copy_intent')" -eq 0
check "the dirty regions' second copies out of sync" test "$(stale)" -ge 64
check "their resync owed in the pool: one row per dirty region" test "$(owed)" -eq "$dirty"
check "no rebuild while the move is unfinished" test "$(rebuilds)" -eq 0
check "the move still paused" test "$(state state)" = paused
stale1=$(stale)
show=$(ctl --json part show mir --all)

# -- crash 2, before the move resumes; copy 1 of a block of the first
# dirty region scribbled over on its disk file meanwhile
cwd_kill9
region=$(sqlite3 "$cwd_db" 'SELECT min(region) FROM copy_resync')
block=$((region * 64 + 5))
read -r disk off sync < <(jq -r --argjson b "$block" '.copy_runs[] | select(.copy == 1 and
	.first_block <= $b and $b < .first_block + .blocks) |
	"\(.disk) \(.offset + ($b - .first_block) * 65536) \(.in_sync)"' <<<"$show")
check "copy 1 of block $block lies on disk $disk at $off, out of sync" test -n "$disk" -a \
	-n "$off" -a "$sync" = false
check "scribbled over" dd if=/dev/urandom of="$cw_tmp/$disk.disk" bs=64k count=1 \
	seek=$((off / 65536)) conv=notrunc status=none

# -- restart 2 (c at full speed): still owed; the move resumes and the
# resync follows it
conf_with ""
cwd_start
check "after the second crash the same copies out of sync" test "$(stale)" -eq "$stale1"
check "and their resync still owed" test "$(owed)" -eq "$dirty"
check "no rebuild yet" test "$(rebuilds)" -eq 0
check "resume the move" ctl move resume "$id"
check "the move ends" wait_for "the move" 120 eval '[ "$(state state)" = done ]'
check "the resync follows it" wait_for "the resync" 120 eval '[ "$(stale)" -eq 0 ]'
check "one rebuild, done" test "$(sqlite3 "$cwd_db" \
	'SELECT count(*) || ":" || min(state) FROM move WHERE kind = 4')" = 1:2
check "nothing owed any more" test "$(owed)" -eq 0

out=$("$client" "$uri" verify "$log" 256 64k)
echo "$out"
check "every acknowledged write reads back ($out)" grep -q 'checked=[1-9][0-9]* lost=0 foreign=0' <<<"$out"
show=$(ctl --json part show mir --all)
check "not degraded" test "$(jq .degraded <<<"$show")" = false
check "the copies on b and c" test "$(jq -c '[.copy_runs[].disk] | unique' <<<"$show")" = '["b","c"]'
check "both copies hold the same bytes on the disk files" \
	cmp <(cwd_copy_image "$show" 0) <(cwd_copy_image "$show" 1)
check "16 MiB of each" test "$(cwd_copy_image "$show" 1 | wc -c)" -eq 16777216
check "stop" cwd_stop
