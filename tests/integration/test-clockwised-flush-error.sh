#!/bin/bash
# Description: an fdatasync error fails every flush that covered the lost
# write, not just the first one to see it.  The kernel reports a
# writeback error once (to the next fdatasync of the file); the fault
# engine does the same with fail-fsync=N (what a disk without O_DIRECT
# gets from the kernel; tmpfs here may take O_DIRECT, so the engine stands
# in for it).  After a write whose flush failed, a second flush (and a FUA
# write) must fail too, and the daemon says why.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires qemu-io

check "pool" cwd_pool 16M a
check "partition" cwd_part vol 8M
# fsync 1: the keeper's, making the first block written; fsync 2: the
# client's first FLUSH.
cwd_conf "disks = ( { name = \"a\"; path = \"$cw_tmp/a.disk\"; fault = \"fail-fsync=2\"; } );"
cwd_start
uri=$(cwd_uri vol)
client=$top_builddir/tests/integration/nbd-durable
"$client" "$uri" ops w0+1M w0+64k f f W64k+64k >"$cw_tmp/ops.out" 2>&1
cat "$cw_tmp/ops.out"
check "the writes were taken" grep -qx 'w0+64k ok' "$cw_tmp/ops.out"
check "the flush that met the error fails" test "$(sed -n 3p "$cw_tmp/ops.out")" = \
	"f error: Input/output error"
check "so does the next flush over the same write" test "$(sed -n 4p "$cw_tmp/ops.out")" = \
	"f error: Input/output error"
check "and a FUA write" grep -qx 'W64k+64k error: Input/output error' "$cw_tmp/ops.out"
check "the daemon says why" grep -q 'disk a .*an fdatasync failed.*every later flush of this disk fails' \
	"$(cwd_log)"
check "reads are still served" qemu-io -f raw -c 'read 0 64k' "$uri"
check "clean stop" cwd_stop
