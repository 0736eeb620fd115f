#!/bin/bash
# Description: a file system on an export, mounted as a user would:
# qemu-storage-daemon imports the export over NBD and re-exports it as a
# FUSE file, losetup turns it into a block device, ext4 on it takes files,
# e2fsck finds it clean, and after a restart of clockwised the same files
# read back the same.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires qemu-storage-daemon losetup mkfs.ext4 e2fsck mount umount
if [ "$(id -u)" -ne 0 ] || [ ! -c /dev/fuse ] || [ ! -e /dev/loop-control ]; then
	echo "SKIP: needs root, /dev/fuse and loop devices"
	exit 77
fi

check "pool" cwd_pool 64M a b
check "partition" cwd_part fs 96M rotation
cwd_conf
fuse=$cw_tmp/fs.img
mnt=$cw_tmp/mnt
mkdir -p "$mnt"
qsd_pid=
loop=

fuse_ready() { [ "$(stat -c %s "$fuse" 2>/dev/null || echo 0)" -gt 0 ]; }

attach() {
	: >"$fuse"
	qemu-storage-daemon \
		--blockdev "driver=nbd,node-name=n0,server.type=unix,server.path=$cwd_sock,export=fs" \
		--export "type=fuse,id=e0,node-name=n0,mountpoint=$fuse,writable=on" \
		2>>"$cw_tmp/qsd.log" &
	qsd_pid=$!
	cleanup_add "kill $qsd_pid 2>/dev/null"
	wait_for "the FUSE export" 30 fuse_ready || return 1
	loop=$(losetup -f --show "$fuse") || return 1
	cleanup_add "umount '$mnt' 2>/dev/null; losetup -d $loop 2>/dev/null"
}

detach() {
	losetup -d "$loop" && kill "$qsd_pid" && wait "$qsd_pid"
}

cwd_start
check "import and re-export as FUSE, loop device" attach
check "mkfs.ext4" mkfs.ext4 -q "$loop"
check "mount" mount "$loop" "$mnt"
head -c 5M /dev/urandom >"$cw_tmp/big"
check "write files" bash -c "cp '$cw_tmp/big' '$mnt/big' && mkdir '$mnt/d' &&
	for i in \$(seq 50); do echo \"file \$i\" >'$mnt/d/f'\$i; done"
sum_before=$(cd "$mnt" && find . -type f | sort | xargs sha256sum | sha256sum)
check "umount" umount "$mnt"
check "e2fsck -fn is clean" e2fsck -fn "$loop"
check "detach" detach
check "stop clockwised" cwd_stop

cwd_start
check "attach again" attach
check "mount again" mount "$loop" "$mnt"
sum_after=$(cd "$mnt" && find . -type f | sort | xargs sha256sum | sha256sum)
check "the same files" test "$sum_before" = "$sum_after"
check "the big file intact" cmp "$cw_tmp/big" "$mnt/big"
check "umount" umount "$mnt"
check "detach" detach
check "stop" cwd_stop
