#!/bin/bash
# Description: power cuts during writes to a 2-copy partition, and the
# write-intent record.  A pool of 64 KiB blocks (a region of the record
# is 64 blocks, 4 MiB); a client writes verifiable records (FUA and
# FLUSH among them) to the first MiB of a 16 MiB mirrored partition until
# the fault engine cuts the power (every write no completed flush covers
# undone or torn, on both disks).  After each restart: no flushed write
# is lost and no byte is foreign; the one region written is resynced on
# copy 1 (a rebuild of its 64 blocks and nothing else, copy 0 winning,
# started by the daemon itself); then no copy is out of sync, the
# partition is not degraded and both copies hold the same bytes on the
# disk files; the record is empty.  Without a cut, the daemon sweeps the record once the
# writes stop, and a clean restart marks nothing.  part show pages the
# runs of a mirrored partition with a run per block and copy.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires jq sqlite3

ctl() { "$top_builddir/tools/cwctl" --socket "$cw_tmp/control" "$@"; }
client=$top_builddir/tests/integration/nbd-durable
log=$cw_tmp/records.log
check "pool of 64 KiB blocks" "$cwpool" create "$cwd_db" 65536
for d in a b; do
	truncate -s 32M "$cw_tmp/$d.disk"
	check "disk $d" "$cwpool" add-disk "$cwd_db" "$cw_tmp/$d.disk" hdd "$d"
done
conf_with() {
	cwd_conf "disks = ( { name = \"a\"; path = \"$cw_tmp/a.disk\"; fault = \"${1%|*}\"; },
	{ name = \"b\"; path = \"$cw_tmp/b.disk\"; fault = \"${1#*|}\"; } );"
}
intent() { sqlite3 "$cwd_db" 'SELECT count(*) FROM copy_intent'; }
vol() { ctl --json part list | jq -c ".[] | select(.name == \"vol\") | .$1"; }
stale() { vol stale_per_copy; }
intent_empty() { test "$(intent)" -eq 0; }
uri=$(cwd_uri vol)

conf_with "|"
cwd_start
check "a 2-copy partition" ctl part create vol --size 16M --copies 2
check "exported" ctl export add vol
# 256 blocks striped, each copy a run per block: part show pages them.
show=$(ctl --json part show vol)
check "part show answers with a page" test "$(jq '.next_block > 0' <<<"$show")" = true
show=$(ctl --json part show vol --all)
check "--all: every block of copy 0" test "$(jq '[.runs[].blocks] | add' <<<"$show")" -eq 256
check "--all: every block of both copies" test "$(jq '[.copy_runs[].blocks] | add' <<<"$show")" -eq 512
check "--all: each (copy, block) once" test "$(jq '[.copy_runs[] | "\(.copy) \(.first_block)"] |
	unique | length' <<<"$show")" -eq 512
check "in words" bash -c 'grep -q "^2 copies, 0 out of sync$" <<<"$0"' "$(ctl part show vol --all)"
touch "$log"
check "writes without a cut" "$client" "$uri" write "$log" 1000 16 64k 8 60
check "the daemon sweeps the record once they stop" wait_for "the sweep" 30 intent_empty
check "nothing out of sync" test "$(stale)" = '[0,0]'
check "stop" cwd_stop
cwd_start
check "a clean restart marks nothing" test "$(stale)" = '[0,0]'
check "stop" cwd_stop

cuts=0 gen=2000 moves=0
for spec in "cut-write=40|" "|cut-write=70,cut=tear,seed=1" "cut-write=25,cut=tear,seed=2|"; do
	conf_with "$spec"
	cwd_start
	"$client" "$uri" write "$log" $gen 16 64k 8 3000 >/dev/null 2>&1
	cwd_wait_cut "$spec" && cuts=$((cuts + 1))
	gen=$((gen + 1000000))
	conf_with "|"
	cwd_start
	out=$("$client" "$uri" verify "$log" 16 64k)
	echo "after $spec: $out"
	check "after $spec: no flushed write lost, nothing foreign" grep -q \
		'checked=[1-9][0-9]* lost=0 foreign=0' <<<"$out"
	check "after $spec: the record is empty" test "$(intent)" -eq 0
	moves=$((moves + 1))
	check "after $spec: one rebuild more, of the written region, nothing else" test \
		"$(sqlite3 "$cwd_db" 'SELECT count(*) || " " || max(id) FROM move')" = "$moves $moves" -a \
		"$(sqlite3 "$cwd_db" 'SELECT kind || ":" || blocks FROM move ORDER BY id DESC LIMIT 1')" = 4:64
	check "after $spec: the rebuild ends" wait_for "the rebuild" 60 eval \
		'[ "$(ctl --json move list | jq -r ".[-1].state")" = done ]'
	check "after $spec: nothing out of sync ($(stale))" test "$(stale)" = '[0,0]'
	check "after $spec: not degraded" test "$(vol degraded)" = false
	show=$(ctl --json part show vol --all)
	check "after $spec: both copies hold the same bytes on the disk files" \
		cmp <(cwd_copy_image "$show" 0) <(cwd_copy_image "$show" 1)
	check "after $spec: 16 MiB of each" test "$(cwd_copy_image "$show" 1 | wc -c)" -eq 16777216
	check "after $spec: read back the same after the resync" grep -q \
		'checked=[1-9][0-9]* lost=0 foreign=0' <<<"$("$client" "$uri" verify "$log" 16 64k)"
	check "stop" cwd_stop
done
check "3 power cuts" test "$cuts" -eq 3
