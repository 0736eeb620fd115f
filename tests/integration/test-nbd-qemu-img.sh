#!/usr/bin/env bash
# Description: qemu-img converts an image into an export and back out to
# qcow2; qemu-img compare finds the three identical.
. "$(dirname "$0")/lib.sh"
requires qemu-img
. "$(dirname "$0")/nbd-lib.sh"

size=$((32 << 20))
# Random data with holes, so zero detection and sparse writes are used.
truncate -s $size "$cw_tmp/src.img"
for off in 0 5 9 17 30; do
	head -c $((1 << 20)) /dev/urandom | dd of="$cw_tmp/src.img" bs=1M seek=$off conv=notrunc status=none
done
head -c $size /dev/urandom >"$cw_tmp/disk.img"	# stale data the copy must overwrite
nbd_start_server -b 512 -e disk="$cw_tmp/disk.img"
uri=$(nbd_uri disk)

check "convert into the export" qemu-img convert -n -f raw -O raw "$cw_tmp/src.img" "$uri"
check "convert out of the export to qcow2" qemu-img convert -f raw -O qcow2 "$uri" "$cw_tmp/out.qcow2"
check "qcow2 copy equals the source" qemu-img compare -f raw -F qcow2 "$cw_tmp/src.img" "$cw_tmp/out.qcow2"
check "export equals the source" qemu-img compare -f raw -F raw "$cw_tmp/src.img" "$uri"
check "server stops cleanly" nbd_stop_server
check "backing file equals the source" cmp "$cw_tmp/src.img" "$cw_tmp/disk.img"
