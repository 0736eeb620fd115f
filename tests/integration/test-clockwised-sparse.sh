#!/bin/bash
# Description: a partition's blocks are holes until written.  On a 4 GiB
# export of a fresh partition nbdinfo --map and qemu-img map see holes
# only where nothing was written, a hole and the bytes around a small
# write into one read as zeros even where the disk holds stale bytes,
# nbdcopy's sparse copy reads only the written part (counted by the
# daemon's read_bytes), TRIM and WRITE_ZEROES deallocate unless told
# NO_HOLE, and the map survives kill -9.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires nbdinfo nbdcopy qemu-io qemu-img jq

cwctl() { "$top_builddir/tools/cwctl" --socket "$cw_tmp/control" "$@"; }
read_bytes() { cwctl --json stats | jq '[.disks[].read_bytes] | add'; }
# Bytes nbdinfo --map --totals calls data.
data_bytes() { nbdinfo --map --totals "$uri" | awk '$NF == "data" {print $1} END {print 0}' | head -1; }
qio() { qemu-io -f raw "$@" "$uri" >"$cw_tmp/qio.out" 2>&1 && ! grep -q 'failed' "$cw_tmp/qio.out"; }

# Stale bytes (a partition deleted long ago, say) under the blocks the
# partition will get.
check "pool" "$cwpool" create "$cwd_db"
truncate -s 5G "$cw_tmp/a.disk"
dd if=/dev/zero bs=1M count=64 status=none | tr '\0' '\252' |
	dd of="$cw_tmp/a.disk" bs=1M seek=1 conv=notrunc status=none
check "disk" "$cwpool" add-disk "$cwd_db" "$cw_tmp/a.disk" hdd a
check "4 GiB partition" cwd_part big 4G
cwd_conf
cwd_start
uri=$(cwd_uri big)

nbdinfo --json "$uri" >"$cw_tmp/info.json"
check "base:allocation offered" grep -q '"base:allocation"' "$cw_tmp/info.json"
check "fast zero offered" grep -q '"can_fast_zero": true' "$cw_tmp/info.json"
check "cache offered" grep -q '"can_cache": true' "$cw_tmp/info.json"
check "a fresh partition is one hole" test "$(nbdinfo --map --totals "$uri" |
	awk '$NF == "hole,zero" {print $1}')" = 4294967296
check "holes read as zeros over stale bytes" qio -c 'read -P 0 0 64M'

# 1 MiB, a 4 KiB write inside a block with stale bytes, and 2 MiB.
check "writes" qio -c 'write -P 0x11 0 1M' -c 'write -P 0x22 10244k 4k' \
	-c 'write -P 0x33 3G 2M'
check "map: 4 MiB of data" test "$(data_bytes)" = 4194304
nbdinfo --map "$uri" >"$cw_tmp/map"
cat "$cw_tmp/map"
check "map: the block of the small write" grep -Eq '^ *10485760 +1048576 +0 +data$' "$cw_tmp/map"
check "around a small write into a hole: zeros" \
	qio -c 'read -P 0 10M 4k' -c 'read -P 0x22 10244k 4k' -c 'read -P 0 10248k 1016k'
qemu-img map --output=json -f raw "$uri" >"$cw_tmp/qmap"
check "qemu-img map: 4 MiB of data" \
	test "$(jq '[.[] | select(.data) | .length] | add' "$cw_tmp/qmap")" = 4194304
check "qemu-img map: the rest reads as zero" \
	test "$(jq '[.[] | select(.data | not) | select(.zero) | .length] | add' "$cw_tmp/qmap")" \
	= $((4294967296 - 4194304))

# The sparse copy: what the daemon read from its disks for it.
before=$(read_bytes)
truncate -s 4G "$cw_tmp/copy.img"
check "nbdcopy" nbdcopy "$uri" "$cw_tmp/copy.img"
after=$(read_bytes)
copied=$((after - before))
echo "nbdcopy of a 4 GiB export with 4 MiB written: the daemon read $copied bytes"
check "the copy read only the written part" test "$copied" -ge 4194304 -a "$copied" -le 8388608
check "the copy is sparse" test $(($(stat -c %b "$cw_tmp/copy.img") * 512)) -le $((16 << 20))
check "the copy is the export" qemu-img compare -q -f raw -F raw "$cw_tmp/copy.img" "$uri"
rm -f "$cw_tmp/copy.img"
echo "sparse-copy read_bytes=$copied export_bytes=4294967296 ratio=$(awk \
	"BEGIN {printf \"%.6f\", $copied / 4294967296}")"

# TRIM and zeros.
check "discard the first block" qio -c 'discard 0 1M'
check "map: 3 MiB of data" test "$(data_bytes)" = 3145728
check "a discarded block reads zeros" qio -c 'read -P 0 0 1M'
check "zero with NO_HOLE" qio -c 'write -z 3G 1M'
check "map: NO_HOLE keeps it" test "$(data_bytes)" = 3145728
check "zero that may unmap" qio -c 'write -z -u 3073M 1M'
check "map: 2 MiB of data" test "$(data_bytes)" = 2097152
check "zero inside a block" qio -c 'write -z -u 10244k 4k'
check "zeros read back" qio -c 'read -P 0 3G 2M' -c 'read -P 0 10M 1M'
check "raw block status, cache, fast zero" env NBD_EXPORT=big \
	"$top_builddir/tests/integration/nbd-proto-client" "$cwd_sock" block-status

# The map after kill -9 is the map before.
check "write again" qio -c 'write -P 0x44 2G 1M'
nbdinfo --map "$uri" >"$cw_tmp/map.before"
check "kill -9" cwd_kill9
cwd_start
nbdinfo --map "$uri" >"$cw_tmp/map.after"
check "the map survives kill -9" cmp "$cw_tmp/map.before" "$cw_tmp/map.after"
check "the data survives kill -9" qio -c 'read -P 0x44 2G 1M' -c 'read -P 0 0 1M'
check "clean stop" cwd_stop
