#!/usr/bin/env bash
# Description: fio's nbd engine writes random blocks at queue depth 32
# with crc32c checksums and verifies every one on read-back, over the
# export's unix socket, with requests completed on the connection's
# thread and, again, from other threads in random order.
. "$(dirname "$0")/lib.sh"
requires fio
. "$(dirname "$0")/nbd-lib.sh"
fio --enghelp=nbd >/dev/null 2>&1 || { echo "SKIP: fio has no nbd engine"; exit 77; }

truncate -s 64M "$cw_tmp/disk.img"

# fio drops verify state files in its working directory: keep them in the
# temp dir.
cd "$cw_tmp" || exit 99
runfio() {
	fio --verify_state_save=0 --output="$cw_tmp/fio.out" --name=verify --ioengine=nbd \
		--uri="nbd+unix:///disk?socket=$nbd_sock" --size=64M --iodepth=32 \
		--verify=crc32c --verify_fatal=1 --do_verify=1 "$@"
}
# Completions on the reader thread, then from other threads out of order.
for mode in sync async; do
	if [ $mode = async ]; then nbd_start_server -b 512 -A 4 -e disk="$cw_tmp/disk.img"
	else nbd_start_server -b 512 -e disk="$cw_tmp/disk.img"; fi
	check "$mode: random 4k writes verified" runfio --rw=randwrite --bs=4k --io_size=16M
	check "$mode: fio saw no errors" grep -q 'err= 0' "$cw_tmp/fio.out"
	check "$mode: mixed block sizes verified" runfio --rw=randwrite --bsrange=4k-256k \
		--io_size=32M
	check "$mode: sequential 1M writes verified" runfio --rw=write --bs=1M
	check "$mode: server stops cleanly" nbd_stop_server
done
