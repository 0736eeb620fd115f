#!/usr/bin/env bash
# Run inside the guest by tests/integration/test-vm-nbd.sh (tests/vm/guest):
# the kernel's own NBD client on clockwised's exports.  clockwised (this
# build's) serves a pool of sparse disks on the guest's tmpfs over a unix
# socket; nbd-client hands the connection to the kernel, and:
#   1. ext4 and xfs on /dev/nbd0: mkfs, mount, fio writes files and
#      verifies them, umount, fsck finds each clean;
#   2. clockwised stops and starts again: nbd-client connects anew, the
#      file systems mount and hold the same files, fsck clean again;
#   3. the disks keep an HDD's time (clockwised's emulation): a reserved
#      stream read through /dev/nbd1 at its rate with O_DIRECT
#      (tests/vm/blkplay) while fio loads another export through
#      /dev/nbd2: no block late in the player, no deadline missed in the
#      daemon;
#   4. sub-block writes: nbd-client advertises no block size, so the
#      kernel's 512-byte sectors reach the daemon as such: each lands
#      where it was aimed, the bytes around it unchanged, as libnbd reads
#      them back past the kernel.
# PASS/FAIL lines and the cw-counts line of tests/integration/lib.sh.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/ctl-lib.sh"
. "$top_srcdir/tests/vm/lib.sh"
d=$cw_tmp

t_start=$SECONDS
step() { echo "-- [$((SECONDS - t_start))s] $*"; }

check "modprobe nbd" modprobe nbd nbds_max=4
check "/dev/nbd0 exists" test -b /dev/nbd0

# Larger disks than ctl_start makes: xfs wants 300 MB at least.
"$top_builddir/tools/cwpool" create "$d/pool.db" >/dev/null &&
	truncate -s 768M "$d/hdd0.img" "$d/hdd1.img" && truncate -s 128M "$d/ssd0.img" &&
	"$top_builddir/tools/cwpool" add-disk "$d/pool.db" "$d/hdd0.img" hdd hdd0 >/dev/null &&
	"$top_builddir/tools/cwpool" add-disk "$d/pool.db" "$d/hdd1.img" hdd hdd1 >/dev/null &&
	"$top_builddir/tools/cwpool" add-disk "$d/pool.db" "$d/ssd0.img" ssd ssd0 >/dev/null
check "a pool of two HDDs and an SSD" test $? -eq 0
step "clockwised"
check "clockwised starts" ctl_start "$d" --no-export-all
for fs in ext4 xfs; do
	size=96M
	[ $fs = ext4 ] || size=320M
	check "part create $fs ($size)" cwctl part create "$fs" --size $size
	check "export add $fs" cwctl export add "$fs"
done

for n in 0 1 2; do cleanup_add "nbd_down /dev/nbd$n"; done
mnt=$d/mnt
mkdir -p "$mnt"
cleanup_add "umount $mnt 2>/dev/null"
fsck_clean() {
	case $1 in
	ext4) e2fsck -fn "$2" ;;
	xfs) xfs_repair -n "$2" ;;
	esac >"$d/fsck.log" 2>&1 || { cat "$d/fsck.log"; return 1; }
}
sums() { (cd "$mnt" && find . -type f | LC_ALL=C sort | xargs sha256sum) | sha256sum; }

declare -A sum
for fs in ext4 xfs; do
	step "$fs"
	check "nbd-client -unix -N $fs /dev/nbd0" nbd_up /dev/nbd0 $fs
	check "mkfs.$fs on /dev/nbd0" "mkfs.$fs" -q "$([ $fs = xfs ] && echo -f || echo -F)" /dev/nbd0
	check "mount $fs" mount /dev/nbd0 "$mnt"
	# fio writes its files in random 4 KiB blocks, each with a checksum
	# header, fsyncs, and reads every block back to verify it
	check "fio writes files on $fs and verifies them" \
		fio --name=verify --directory="$mnt" --nrfiles=4 --size=8M --rw=randwrite --bs=4k \
			--ioengine=psync --eta=never --fsync_on_close=1 --verify=crc32c --do_verify=1 \
			--verify_fatal=1 --verify_state_save=0 --output="$d/fio-$fs.log"
	sum[$fs]=$(sums)
	check "umount $fs" umount "$mnt"
	check "fsck of $fs is clean" fsck_clean $fs /dev/nbd0
	check "disconnect" nbd_down /dev/nbd0
done

step "restart"
check "clockwised stops" ctl_stop
check "clockwised starts again" ctl_start "$d" --no-export-all
for fs in ext4 xfs; do
	check "nbd-client connects again to $fs" nbd_up /dev/nbd0 $fs
	check "$fs mounts again" mount /dev/nbd0 "$mnt"
	check "$fs holds the same files" test "$(sums)" = "${sum[$fs]}"
	check "umount $fs" umount "$mnt"
	check "fsck of $fs is clean after the restart" fsck_clean $fs /dev/nbd0
	check "disconnect" nbd_down /dev/nbd0
done

# 3. The disks keep an HDD's time from here on: a stream through
#    /dev/nbd1 with fio loading /dev/nbd2, both partitions on the
#    emulated HDDs (--tier hdd: the SSD here is a file on tmpfs, whose
#    best-effort copies its dispatcher makes at real-time priority; in
#    the guest's one emulated CPU they took 10-20% of it, above the
#    player).  The reservation is due one period after each request
#    (--due stream): the player asks for one block at a time, each due a
#    period later, so the daemon's deadline is the player's.  The stall
#    probes wake every 10 ms, not 1: a wake-up costs ~130 us of the
#    emulated CPU, 13% of it at 1 kHz.  CW_VM_STREAM=0 leaves it out.
if [ "${CW_VM_STREAM:-1}" = 1 ]; then
	step "stream"
	check "clockwised stops" ctl_stop
	check "clockwised starts with hdd0 and hdd1 emulating hdd7200" \
		ctl_start "$d" --no-export-all --emulate hdd7200 --conf "stall_probe_us = 10000;"
	MB=8
	check "part create media" cwctl part create media --size ${MB}M --tier hdd
	check "record media" ctl_fill media ${MB}M
	check "part create load" cwctl part create load --size 16M --tier hdd
	check "record load" ctl_fill load 16M
	BLOCK=262144
	rate=${CW_VM_STREAM_RATE:-2000000}
	rid=$(cwctl --json resv create media --rate "$rate" --block $BLOCK --due stream | jq -e .id)
	check "a stream of $rate B/s in 256 KiB blocks admitted on media" test -n "$rid"
	check "export media bound to it" cwctl export add media --resv "$rid"
	check "export load" cwctl export add load
	check "/dev/nbd1 on media" nbd_up /dev/nbd1 media
	check "/dev/nbd2 on load" nbd_up /dev/nbd2 load
	resv_stat() { stream_stat "$rid" "$1"; }
	# The kernel cuts a 256 KiB read in two at max_sectors_kb (128):
	# each half is one of the stream's blocks to the daemon, released a
	# period apart, so the stream gets half its rate.  The daemon counts
	# and says it; the player's device then passes whole blocks.
	q=/sys/block/nbd1/queue
	check "the kernel sends at most 128 KiB per request" test "$(cat $q/max_sectors_kb)" -le 128
	"$blkplay" /dev/nbd1 --rate "$rate" --block $BLOCK --duration 1 >/dev/null
	check "the daemon counts the requests smaller than the block" test "$(resv_stat short_requests)" -gt 0
	check "and says why the stream falls behind" wait_for "the short-request warning" 10 \
		grep -q "requests smaller than the block give the stream less than its rate" "$CTL_LOG"
	echo $((BLOCK / 1024)) >$q/max_sectors_kb
	check "max_sectors_kb raised to the block" test "$(cat $q/max_sectors_kb)" -eq $((BLOCK / 1024))
	step "play"
	stream_play /dev/nbd1 /dev/nbd2 "$rid" "$rate" $BLOCK
	check "disconnect /dev/nbd1" nbd_down /dev/nbd1
	check "disconnect /dev/nbd2" nbd_down /dev/nbd2

else
	echo "-- the stream through /dev/nbd1: left out (CW_VM_STREAM=0)"
	check "part create load" cwctl part create load --size 16M
	check "record load" ctl_fill load 16M
	check "export load" cwctl export add load
fi

# 4. Sub-block writes through the kernel's client.
step "sub-block writes"
check "/dev/nbd0 on load" nbd_up /dev/nbd0 load
check "the kernel's sectors are 512 bytes" test "$(blockdev --getss /dev/nbd0)" -eq 512
# before: what libnbd reads of the first 64 KiB
nbdcopy "nbd+unix:///load?socket=$CTL_NBD" - | head -c 65536 >"$d/before"
head -c 512 /dev/urandom >"$d/s1"
head -c 1536 /dev/urandom >"$d/s2"
check "a 512-byte O_DIRECT write at 1536" \
	dd if="$d/s1" of=/dev/nbd0 bs=512 seek=3 oflag=direct status=none
check "a 1536-byte O_DIRECT write at 5120" \
	dd if="$d/s2" of=/dev/nbd0 bs=512 seek=10 count=3 oflag=direct status=none
check "a 512-byte buffered write at 9216 and fsync" \
	dd if="$d/s1" of=/dev/nbd0 bs=512 seek=18 conv=fsync status=none
cp "$d/before" "$d/expect"
dd if="$d/s1" of="$d/expect" bs=512 seek=3 conv=notrunc status=none
dd if="$d/s2" of="$d/expect" bs=512 seek=10 conv=notrunc status=none
dd if="$d/s1" of="$d/expect" bs=512 seek=18 conv=notrunc status=none
check "the kernel reads back what was written (O_DIRECT)" bash -c \
	"dd if=/dev/nbd0 bs=64k count=1 iflag=direct status=none | cmp - '$d/expect'"
check "disconnect" nbd_down /dev/nbd0
check "libnbd reads the same past the kernel" bash -c \
	"nbdcopy 'nbd+unix:///load?socket=$CTL_NBD' - | head -c 65536 | cmp - '$d/expect'"
check "clockwised stops cleanly" ctl_stop
step "done"
