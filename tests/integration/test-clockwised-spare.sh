#!/bin/bash
# Description: a spare disk takes a failed disk's place with no command.
# Disk s is made a spare (cwctl disk set s --spare): a 2-copy partition is
# placed on a and b only.  Then b fails every request under the fault
# engine during a verified write load (nbd-durable): b is taken for gone,
# the daemon journals its replacement by s at once and the mover rebuilds
# b's copies there from a.  Then every acknowledged write reads back,
# nothing is out of sync, the copies lie on a and s and are byte-equal on
# the disk files, s is a data disk, and b, empty, leaves the pool.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires jq

ctl() { "$top_builddir/tools/cwctl" --socket "$cw_tmp/control" "$@"; }
client=$top_builddir/tests/integration/nbd-durable
log=$cw_tmp/records.log
check "pool of 64 KiB blocks" "$cwpool" create "$cwd_db" 65536
for d in a b s; do
	truncate -s 32M "$cw_tmp/$d.disk"
	check "disk $d" "$cwpool" add-disk "$cwd_db" "$cw_tmp/$d.disk" hdd "$d"
done
# conf_with B_FAULTS
conf_with() {
	cwd_conf "disks = ( { name = \"a\"; path = \"$cw_tmp/a.disk\"; },
	{ name = \"b\"; path = \"$cw_tmp/b.disk\"; fault = \"$1\"; },
	{ name = \"s\"; path = \"$cw_tmp/s.disk\"; } );"
}
conf_with ""
cwd_start
check "s made a spare" ctl disk set s --spare
check "disk list says so" test "$(ctl --json disk list | jq -c '[.[] | select(.spare) | .name]')" = '["s"]'
check "a 2-copy partition" ctl part create mir --size 16M --copies 2
check "exported" ctl export add mir
show=$(ctl --json part show mir --all)
check "placed on a and b, not on the spare" test \
	"$(jq -c '[.copy_runs[].disk] | unique' <<<"$show")" = '["a","b"]'
expect_fail "a disk with blocks is no spare" ctl disk set a --spare
check "stop" cwd_stop

conf_with "fail-range=0+32M"
cwd_start
uri=$(cwd_uri mir)
touch "$log"
"$client" "$uri" write "$log" 1000 256 64k 8 200 >"$cw_tmp/write.out" 2>&1
check "every write acknowledged" test "$(grep -c '^d ' "$log")" -gt 150
check "b taken for gone, s replaces it" wait_for "the takeover" 30 grep -q \
	'disk b is gone: spare s replaces it' "$(cwd_log)"
moves() { ctl --json move list; }
check "a replacement journalled by itself" test \
	"$(moves | jq -c '[.[] | [.kind, .disk_id]]')" = '[["replace",2]]'
check "and done" wait_for "the rebuild onto s" 60 eval \
	'[ "$(moves | jq -r ".[0].state")" = done ]'
check "with no block failed" test "$(moves | jq '.[0].failed')" -eq 0
out=$("$client" "$uri" verify "$log" 256 64k)
check "every acknowledged write reads back ($out)" grep -q 'checked=[1-9][0-9]* lost=0 foreign=0' <<<"$out"
show=$(ctl --json part show mir --all)
check "nothing out of sync" test "$(jq .stale_copies <<<"$show")" -eq 0
check "not degraded" test "$(jq .degraded <<<"$show")" = false
check "the copies on a and s" test "$(jq -c '[.copy_runs[].disk] | unique' <<<"$show")" = '["a","s"]'
check "both copies hold the same bytes on the disk files" \
	cmp <(cwd_copy_image "$show" 0) <(cwd_copy_image "$show" 1)
check "s is a data disk now" test "$(ctl --json disk list | jq '[.[] | select(.spare)] | length')" -eq 0
check "b, empty, leaves the pool" ctl disk remove b
check "stop" cwd_stop
