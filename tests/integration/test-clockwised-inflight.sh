#!/bin/bash
# Description: writes of a daemon killed with -9 that are still in the
# kernel land after the process is gone, and a restarted daemon serves
# the disk only once they have.  The disk is a loop device whose writes
# the daemon's block-I/O cgroup throttles (512 KiB/s), so a write of 8 MiB
# is still in flight when the daemon is killed: the device changes after
# the process was reaped, the restart waits for the disk's lock (held by
# those writes: disk_fence), and what it serves then does not change any
# more.  Without the wait, a block read at the restart and copied by the
# mover could hold data that is overwritten behind the daemon's back
# (what rbd/move.sh's kill case once showed).  Needs root, losetup and a
# block-I/O throttle (cgroup v1 blkio or v2 io); skips otherwise.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires qemu-io qemu-img losetup sha256sum

skip() {
	echo "SKIP: $*"
	rm -rf "$cw_tmp"
	trap - EXIT
	exit 77
}
[ "$(id -u)" = 0 ] || skip "not root: no loop device or cgroup"
# 8 MiB at 512 KiB/s: 16 s in flight, which the kill, the read of the
# device and the restart must take less than (at 1 MiB/s a busy host's
# restart alone took 8.7 s, and found every write landed)
BPS=524288

truncate -s 64M "$cw_tmp/backing" || exit 1
loop=$(losetup -f --show "$cw_tmp/backing" 2>/dev/null) || skip "no loop device"
cleanup_add "losetup -d $loop"
majmin=$(cat "/sys/class/block/${loop#/dev/}/dev")

# The throttle: a cgroup whose writes to the loop device go at BPS.
cg=
if [ -e /sys/fs/cgroup/blkio/blkio.throttle.write_bps_device ]; then
	cg=/sys/fs/cgroup/blkio/cwtest.$$
	mkdir "$cg" && echo "$majmin $BPS" >"$cg/blkio.throttle.write_bps_device" || skip "cannot set a blkio throttle"
	cg_join=$cg/tasks cg_leave=/sys/fs/cgroup/blkio/tasks
elif grep -qw io /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
	echo +io >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
	cg=/sys/fs/cgroup/cwtest.$$
	mkdir "$cg" && echo "$majmin wbps=$BPS" >"$cg/io.max" || skip "cannot set io.max"
	cg_join=$cg/cgroup.procs cg_leave=/sys/fs/cgroup/cgroup.procs
else
	skip "no block-I/O throttle (cgroup v1 blkio or v2 io)"
fi
cleanup_add "rmdir $cg"

"$cwpool" create "$cwd_db" || exit 1
add_disk() { "$cwpool" add-disk "$cwd_db" "$loop" hdd slow >/dev/null; }
check "the loop device is a disk" add_disk
check "a partition on it" cwd_part vol 16M single
cwd_conf
# Only the first daemon is throttled: the test's shell joins the cgroup
# for the start, and leaves it.
echo $$ >"$cg_join"
cwd_start
echo $$ >"$cg_leave"
uri=$(cwd_uri vol)
echo "# $(grep "disk slow: $loop," "$(cwd_log)")"

# 8 MiB in flight at BPS, and the kill once the first of it reached
# the loop device (a fixed second was, on a busy host, before qemu-io
# had written anything: then nothing was in flight at the kill).
sectors() { awk '{ print $7 }' "/sys/block/${loop#/dev/}/stat"; }
before=$(sectors)
qemu-io -f raw -c 'write -P 0x5a 0 8M' "$uri" >"$cw_tmp/write.out" 2>&1 &
writer=$!
check "the write reaches the disk" \
	wait_for "the first writes" "$(cw_budget 20)" bash -c '[ "$(awk "{ print \$7 }" "$0")" -gt "$1" ]' \
	"/sys/block/${loop#/dev/}/stat" "$before"
check "kill -9 while the write runs" cwd_kill9
wait "$writer"
dev() { dd if="$loop" bs=1M iflag=direct status=none | sha256sum | cut -d' ' -f1; }
at_reap=$(dev)

t0=$(date +%s%N)
cwd_start
echo "the restart took $((($(date +%s%N) - t0) / 1000000)) ms"
check "it found the disk locked by the killed daemon's writes" \
	grep -q "$loop is locked by another process" "$(cwd_log)"
check "and says when the lock came" grep -Eq "disk slow: the lock on $loop came after [0-9]+ ms" "$(cwd_log)"
served() { qemu-img convert -f raw -O raw "$uri" "$cw_tmp/$1" && sha256sum <"$cw_tmp/$1" | cut -d' ' -f1; }
first=$(served first)
after_start=$(dev)
check "the killed daemon's writes landed after it was reaped" test "$at_reap" != "$after_start"
sleep 3
check "nothing changes the disk behind the new daemon" test "$(dev)" = "$after_start"
check "what it serves is what it served at once" test "$(served later)" = "$first"
check "the partition holds the write's bytes or none (nothing else)" \
	bash -c "od -An -tx1 -v '$cw_tmp/later' | tr ' ' '\n' | grep -v '^$' | sort -u | grep -vxq -e 00 -e 5a; test \$? = 1"
check "clean stop" cwd_stop
