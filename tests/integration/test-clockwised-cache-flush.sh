#!/bin/bash
# Description: a FLUSH syncs the cache SSD of a partition whose export was
# made while a move runs.  Writes to a block cached write-back go to the
# SSD only; an export made at a start that resumes a move (the mover takes
# the caches' disks only when it is idle) must still list the SSD, or an
# acknowledged FLUSH leaves the write unsynced there.  The fault engine's
# power cut right after the FLUSH shows it: after the restart the write
# reads back.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires qemu-io jq

ctl() { "$top_builddir/tools/cwctl" --socket "$cw_tmp/control" "$@"; }
client=$top_builddir/tests/integration/nbd-durable
check "pool" cwd_pool 96M hdd0 hdd1 ssd0:ssd
check "partition on hdd0" cwd_part media 48M single 1
# Emulated HDDs and one block copied at a time: the move lasts seconds.
conf_with() {
	local d text="mover_depth = 1;
disks = ("
	for d in hdd0 hdd1; do
		text+="{ name = \"$d\"; path = \"$cw_tmp/$d.disk\"; emulate = \"hdd7200\"; fault = \"$1\"; },"
	done
	text+="{ name = \"ssd0\"; path = \"$cw_tmp/ssd0.disk\"; tier = \"ssd\"; fault = \"$1\"; } );"
	cwd_conf "$text"
}
conf_with ""
cwd_start
uri=$(cwd_uri media)
check "written" qemu-io -f raw -c 'write -P 1 0 48M' "$uri"
check "a write-back cache on ssd0" ctl part cache media --size 16M --mode write-back
promotions() { ctl --json stats | jq -r '.caches[] | select(.part == "media") | .promotions'; }
heat() {
	qemu-io -f raw -c 'read 0 1M' -c 'read 1M 1M' -c 'read 0 1M' -c 'read 1M 1M' \
		-c 'read 0 1M' -c 'read 1M 1M' "$uri" >/dev/null && [ "$(promotions)" -ge 2 ]
}
check "the first blocks promoted" wait_for "promotions" 60 heat
check "a move of media to hdd1" ctl part move media --disks hdd1 --policy single
check "stop" cwd_stop

moving() { ctl --json move list | jq -e 'map(select(.state == "running")) | length > 0' >/dev/null; }
conf_with "cut-file=$cw_tmp/cut"
cwd_start
check "the move runs again" moving
"$client" "$uri" ops w0+64k f >"$cw_tmp/ops.out" 2>&1
cat "$cw_tmp/ops.out"
check "the write to the cached block and its FLUSH were acknowledged" \
	test "$(cat "$cw_tmp/ops.out")" = "w0+64k ok
f ok"
check "while the move still ran" moving
touch "$cw_tmp/cut"
check "the power fails" wait_for "the daemon to die" 30 bash -c "! kill -0 $cwd_pid"
cwd_pid=
rm -f "$cw_tmp/cut"
conf_with ""
cwd_start
check "the flushed write reads back" test "$("$client" "$uri" ops r0+64k)" = "r0+64k ok"
check "clean stop" cwd_stop
