#!/bin/bash
# Description: a disk of a 2-copy partition fails and is replaced, the
# lost copies rebuilt in the slack by the mover, through a kill -9.  Disk
# b fails every request under the fault engine while a verified write
# load (nbd-durable: records, FUA and FLUSH) runs: every write is
# acknowledged from a alone and b's copies go out of sync.  A disk c
# (emulating a 7200 rpm disk, so the rebuild takes seconds) is added and
# `cwctl disk replace b c` rebuilds b's copies onto c from a; the daemon
# is killed -9 half-way, and at the restart the replacement resumes where
# it was and completes while the verified writer writes again.  Then b leaves the pool, every acknowledged write
# reads back, nothing is out of sync or degraded, the copies lie on a and
# c, and both copies hold the same bytes on the disk files (the regions
# the kill left dirty in the write-intent record are resynced once the
# replacement is done).  The
# rebuild's rate is printed (bytes copied over the time it took).
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires jq nbdcopy sqlite3

ctl() { "$top_builddir/tools/cwctl" --socket "$cw_tmp/control" "$@"; }
client=$top_builddir/tests/integration/nbd-durable
log=$cw_tmp/records.log
check "pool of 64 KiB blocks" "$cwpool" create "$cwd_db" 65536
for d in a b; do
	truncate -s 64M "$cw_tmp/$d.disk"
	check "disk $d" "$cwpool" add-disk "$cwd_db" "$cw_tmp/$d.disk" hdd "$d"
done
# conf_with B_FAULTS
conf_with() {
	cwd_conf "disks = ( { name = \"a\"; path = \"$cw_tmp/a.disk\"; },
	{ name = \"b\"; path = \"$cw_tmp/b.disk\"; fault = \"$1\"; } );"
}
conf_with ""
cwd_start
check "a 2-copy partition" ctl part create mir --size 32M --copies 2
check "exported" ctl export add mir
uri=$(cwd_uri mir)
head -c 32M /dev/zero >"$cw_tmp/in"
check "filled with zeros" nbdcopy "$cw_tmp/in" "$uri"
check "stop" cwd_stop

# -- b fails every request during a verified write load
conf_with "fail-range=0+64M"
cwd_start
touch "$log"
"$client" "$uri" write "$log" 1000 512 64k 8 300 >"$cw_tmp/write.out" 2>&1
check "300 writes issued" test "$(grep -c '^i ' "$log")" -eq 300
check "every write acknowledged" test "$(grep -c '^d ' "$log")" -gt 250
show=$(ctl --json part show mir --all)
check "degraded" test "$(jq .degraded <<<"$show")" = true
check "b taken for gone: every copy on it out of sync" test \
	"$(jq '[.copy_runs[] | select(.disk == "b") | select(.in_sync) | .blocks] | add // 0' \
	<<<"$show")" -eq 0
check "none lost" test "$(jq .lost_blocks <<<"$show")" -eq 0

# -- replaced by c, killed half-way, resumed
truncate -s 64M "$cw_tmp/c.disk"
check "disk c added" ctl disk add "$cw_tmp/c.disk" --name c --emulate hdd7200
expect_fail "a disk does not replace itself" ctl disk replace b b
expect_fail "nor is replaced by a disk not in the pool" ctl disk replace b nosuch
rep=$(ctl --json disk replace b c)
check "disk replace b c: one move, kind replace, of b's 512 copies" test \
	"$(jq -c '[.moves[] | [.kind, .blocks, .disk_id]]' <<<"$rep")" = '[["replace",512,2]]'
id=$(jq '.moves[0].id' <<<"$rep")
done_at() { ctl --json move list | jq ".[] | select(.id == $id) | .$1"; }
check "the rebuild copies" wait_for "64 blocks rebuilt" 60 eval '[ "$(done_at done)" -ge 64 ]'
cwd_kill9
killed_at=$(sqlite3 "$cwd_db" "SELECT done FROM move WHERE id = $id")
check "killed half-way ($killed_at of 512 done)" test "$killed_at" -ge 64 -a "$killed_at" -lt 512
cwd_start
check "the replacement resumed, running" test "$(done_at state)" = '"running"'
check "from where it was" test "$(done_at done)" -ge "$killed_at"
# Writes while it rebuilds: each reaches a, and the copy on c being
# rebuilt or already rebuilt.
"$client" "$uri" write "$log" 5000 512 64k 8 150 >"$cw_tmp/write2.out" 2>&1 &
writer=$!
check "and completes" wait_for "the replacement" 120 eval '[ "$(done_at state)" = "\"done\"" ]'
check "the writes during the rebuild end" wait "$writer"
check "150 more writes issued" test "$(grep -c '^i ' "$log")" -eq 450
check "with no block failed" test "$(done_at failed)" -eq 0
mv=$(ctl --json move list | jq ".[] | select(.id == $id)")
echo "rebuild: $(jq -r '"\(.bytes_copied) bytes in \(.elapsed_s) s: \(.mb_s) MB/s"' <<<"$mv")"
check "b, empty, leaves the pool" ctl disk remove b
# The kill left the write load's regions dirty in the write-intent record:
# their resync, a rebuild of its own, follows the replacement.
stale() { ctl --json part show mir | jq .stale_copies; }
check "the dirty regions resynced after it" wait_for "the resync" 120 eval '[ "$(stale)" -eq 0 ]'

# -- every acknowledged write is there, on both copies alike
out=$("$client" "$uri" verify "$log" 512 64k)
echo "$out"
check "every acknowledged write reads back ($out)" grep -q 'checked=[1-9][0-9]* lost=0 foreign=0' <<<"$out"
show=$(ctl --json part show mir --all)
check "nothing out of sync" test "$(jq .stale_copies <<<"$show")" -eq 0
check "not degraded" test "$(jq .degraded <<<"$show")" = false
check "the copies on a and c" test "$(jq -c '[.copy_runs[].disk] | unique' <<<"$show")" = '["a","c"]'
check "no block with both copies on one disk" test "$(jq '[.copy_runs[] | {b: .first_block,
	d: .disk}] | group_by(.b) | map(select((map(.d) | unique | length) != 2)) | length' \
	<<<"$show")" -eq 0
check "both copies hold the same bytes on the disk files" \
	cmp <(cwd_copy_image "$show" 0) <(cwd_copy_image "$show" 1)
check "32 MiB of each" test "$(cwd_copy_image "$show" 1 | wc -c)" -eq 33554432
check "stop" cwd_stop
