#!/usr/bin/env bash
# Run inside the guest by tests/integration/test-vm-ublk.sh (tests/vm/guest
# --kernel bpo: bookworm-backports' 6.12, which has ublk_drv): clockwised's
# exports as the kernel's own block devices, /dev/ublkbN.
#   1. cwctl export add --ublk makes /dev/ublkb0 with the partition's
#      size; export list names it;
#   2. ext4 on it: mkfs, mount, fio writes files and verifies them,
#      umount, fsck clean; O_DIRECT reads of what was written through the
#      device match what NBD (libnbd, through the same daemon) reads of the
#      same partition;
#   3. kill -9 under fio's verified writes on a second device: the device
#      stays, a new clockwised takes both back (user recovery), fio ends
#      with every block verified, ext4 still clean;
#   4. a device's node takes its owner, group and mode from the export's
#      access rules;
#   5. growing the partition under it is refused with the reason, and
#      export remove takes the device away;
#   6. without root: with /dev/ublk-control open to all and each new
#      device's nodes given to its owner (what ublksrv's udev rule does),
#      clockwised running as nobody makes an unprivileged device, which
#      nobody writes and reads and another user cannot open, and makes
#      again after kill -9 (the kernel gives such devices no recovery);
#   7. the disks keep an HDD's time (--emulate hdd7200): a stream read
#      through a device bound to its reservation at its rate, fio loading
#      another device, misses nothing (tests/vm/lib.sh's stream_play, as
#      nbd-kernel.sh does through /dev/nbd1).
# PASS/FAIL lines and the cw-counts line of tests/integration/lib.sh.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/ctl-lib.sh"
. "$top_srcdir/tests/vm/lib.sh"
d=$cw_tmp
t_start=$SECONDS
step() { echo "-- [$((SECONDS - t_start))s] $*"; }

check "modprobe ublk_drv" modprobe ublk_drv
check "/dev/ublk-control exists" test -c /dev/ublk-control

"$top_builddir/tools/cwpool" create "$d/pool.db" >/dev/null &&
	truncate -s 384M "$d/hdd0.img" "$d/hdd1.img" &&
	"$top_builddir/tools/cwpool" add-disk "$d/pool.db" "$d/hdd0.img" hdd hdd0 >/dev/null &&
	"$top_builddir/tools/cwpool" add-disk "$d/pool.db" "$d/hdd1.img" hdd hdd1 >/dev/null
check "a pool of two HDDs" test $? -eq 0
step "clockwised"
# export acc's access rules: nobody and the group disk read and write,
# anyone reads
acc='access = { exports = ( { name = "acc"; read_write = [ "nobody", "@disk" ]; read_only = [ "*" ]; } ); };'
check "clockwised starts" ctl_start "$d" --no-export-all --conf "$acc"
check "part create fs (128M)" cwctl part create fs --size 128M
check "export add fs --ublk" cwctl export add fs --ublk --queue-depth 32
cwctl export list
dev=$(cwctl --json export list | jq -r '.[] | select(.name == "fs") | .device')
check "export list names the device ($dev)" test "$dev" = /dev/ublkb0
check "$dev is a block device" test -b "$dev"
check "$dev has the partition's size" test "$(blockdev --getsize64 "$dev")" -eq $((128 << 20))

step "ext4"
mnt=$d/mnt
mkdir -p "$mnt"
cleanup_add "umount $mnt 2>/dev/null"
check "mkfs.ext4 on $dev" mkfs.ext4 -q -F "$dev"
check "mount" mount "$dev" "$mnt"
expect_fail "export remove fs is refused while ext4 is mounted on it" cwctl export remove fs
cwctl export remove fs 2>&1 | sed 's/^/  /'
check "fio writes files on ext4 and verifies them" \
	fio --name=verify --directory="$mnt" --nrfiles=4 --size=16M --rw=randwrite --bs=4k \
		--ioengine=psync --eta=never --fsync_on_close=1 --verify=crc32c --do_verify=1 \
		--verify_fatal=1 --verify_state_save=0 --output="$d/fio.log"
check "fio with O_DIRECT and 32 in flight verifies" \
	fio --name=direct --filename="$mnt/direct" --size=16M --rw=randwrite --bs=16k \
		--ioengine=io_uring --iodepth=32 --direct=1 --eta=never --verify=crc32c \
		--do_verify=1 --verify_fatal=1 --verify_state_save=0 --output="$d/fio-direct.log"
check "umount" umount "$mnt"
check "fsck of ext4 is clean" bash -c "e2fsck -fn '$dev' >'$d/fsck.log' 2>&1 || { cat '$d/fsck.log'; false; }"
same_as_nbd() {
	cwctl export add fs --name fs-nbd --readonly >/dev/null || return 1
	dd if="$dev" bs=1M count=8 iflag=direct status=none | sha256sum >"$d/a"
	nbdcopy "nbd+unix:///fs-nbd?socket=$CTL_NBD" - | head -c 8388608 | sha256sum >"$d/b"
	cwctl export remove fs-nbd >/dev/null && cmp "$d/a" "$d/b"
}
check "the device and NBD read the same bytes" same_as_nbd
zeros_at() { test "$(dd if="$dev" bs=1M skip="$1" count=1 iflag=direct status=none | tr -d '\0' | wc -c)" -eq 0; }
check "write-zeroes (blkdiscard -z) reads back as zeros" \
	blkdiscard -f -z -o $((4 << 20)) -l $((1 << 20)) "$dev"
check "  the MiB is zeros" zeros_at 4
check "discard (blkdiscard) is served" blkdiscard -f -o $((6 << 20)) -l $((1 << 20)) "$dev"

step "kill -9"
# A second device under fio's verified random writes (O_DIRECT, 16 in
# flight); the daemon is killed mid-way and started again: the device
# stays, its queued requests resume in the new daemon, and fio's
# verification of every block it wrote finds each as written.  (At most
# 4 MB/s, so that the kill comes in the write phase, not the reads after
# it, on a fast host too.)
check "part create raw (64M)" cwctl part create raw --size 64M
check "export add raw --ublk" cwctl export add raw --ublk
raw=$(cwctl --json export list | jq -r '.[] | select(.name == "raw") | .device')
check "raw is $raw" test "$raw" = /dev/ublkb1
fio --name=crash --filename="$raw" --size=32M --rw=randwrite --bs=4k --ioengine=io_uring --rate=4m \
	--iodepth=16 --direct=1 --eta=never --verify=crc32c --do_verify=1 --verify_fatal=1 \
	--verify_state_save=0 --output="$d/fio-crash.log" &
fio_pid=$!
cleanup_add "kill $fio_pid 2>/dev/null"
w0=$(written)
check "fio is writing" wrote_since "$w0" $((4 << 20))
check "fio is still writing when the daemon is killed" kill -0 "$fio_pid"
w1=$(written)
check "kill -9 clockwised" kill -9 "$CTL_PID"
wait "$CTL_PID" 2>/dev/null
echo "  killed after fio wrote about $(( (w1 - w0) >> 20 )) MiB of 32; fio waits"
check "$raw stays while no daemon runs" test -b "$raw"
check "clockwised starts again" ctl_start "$d" --no-export-all --conf "$acc"
grep 'ublkb' "$CTL_LOG" | sed 's/^/  /'
check "it took $raw back" grep -q "export raw: /dev/ublkb1, taken back" "$CTL_LOG"
check "it took $dev back" grep -q "export fs: /dev/ublkb0, taken back" "$CTL_LOG"
wait "$fio_pid"
fio_rc=$?
check "fio's writes went on and every block verifies (fio exit $fio_rc)" test "$fio_rc" -eq 0
check "export list still names both devices" test \
	"$(cwctl --json export list | jq -r '[.[] | .device] | sort | join(" ")')" = "/dev/ublkb0 /dev/ublkb1"
check "ext4 on $dev is still clean" bash -c "e2fsck -fn '$dev' >'$d/fsck2.log' 2>&1 || { cat '$d/fsck2.log'; false; }"
check "export remove raw" cwctl export remove raw

step "access"
check "part create acc (16M)" cwctl part create acc --size 16M
check "export add acc --ublk" cwctl export add acc --ublk
accdev=$(cwctl --json export list | jq -r '.[] | select(.name == "acc") | .device')
check "$accdev: owner nobody, group disk, mode 664 (its access rules)" \
	test "$(stat -c '%u %g %a' "$accdev")" = "$(id -u nobody) $(getent group disk | cut -d: -f3) 664"
check "$dev (the default rules, whose groups do not exist here): root's, 600" \
	test "$(stat -c '%u %g %a' "$dev")" = "0 0 600"
check "export remove acc" cwctl export remove acc

step "grow and remove"
expect_fail "growing the partition under the device is refused" cwctl part resize fs --size 160M
cwctl part resize fs --size 160M 2>&1 | sed 's/^/  /'
check "export remove fs" cwctl export remove fs
check "$dev is gone" wait_for "$dev to go" 10 test ! -e "$dev"
check "clockwised stops cleanly" ctl_stop

# 6. Without root (UBLK_F_UNPRIVILEGED_DEV): the kernel lets any user
#    whom /dev/ublk-control is open to make a device that only that user
#    may open.  ublksrv's udev rule opens the control node to all and
#    gives each new device's nodes to their owner; with no udev here, a
#    loop does the same.
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
if getent passwd nobody >/dev/null && getent group nogroup >/dev/null; then
	step "unprivileged"
	np=$(mktemp -d /tmp/cw-np.XXXXXX)
	cleanup_add "rm -rf $np"
	"$top_builddir/tools/cwpool" create "$np/pool.db" >/dev/null &&
		truncate -s 64M "$np/hdd0.img" "$np/hdd1.img" &&
		"$top_builddir/tools/cwpool" add-disk "$np/pool.db" "$np/hdd0.img" hdd hdd0 >/dev/null &&
		"$top_builddir/tools/cwpool" add-disk "$np/pool.db" "$np/hdd1.img" hdd hdd1 >/dev/null &&
		chown -R nobody:nogroup "$np"
	check "a pool nobody owns" test $? -eq 0
	chmod 666 /dev/ublk-control
	( while :; do
		for n in /dev/ublkc* /dev/ublkb*; do
			[ -e "$n" ] && [ "$(stat -c %u "$n")" = 0 ] && chown nobody:nogroup "$n"
		done
		sleep 0.05
	done ) &
	udev=$!
	cleanup_add "kill $udev 2>/dev/null"
	root_daemon=$CTL_DAEMON
	printf '#!/bin/sh\nexec setpriv --reuid=nobody --regid=nogroup --clear-groups %s "$@"\n' \
		"$root_daemon" >"$np/as-nobody"
	chmod 755 "$np/as-nobody"
	CTL_DAEMON=$np/as-nobody
	check "clockwised starts as nobody" ctl_start "$np" --no-export-all
	check "  and runs as nobody" test "$(stat -c %U "/proc/$CTL_PID")" = nobody
	check "part create u (32M)" cwctl part create u --size 32M
	check "export add u --ublk, without root" cwctl export add u --ublk
	udv=$(cwctl --json export list | jq -r '.[] | select(.name == "u") | .device')
	check "$udv is a block device" test -b "$udv"
	check "the log says it is unprivileged" grep -q "export u: .*unprivileged" "$CTL_LOG"
	as_nobody dd if=/dev/urandom of="$np/x" bs=1M count=4 status=none
	check "nobody (the owner) writes the device" \
		as_nobody dd if="$np/x" of="$udv" bs=1M oflag=direct status=none
	check "  and reads it back" \
		as_nobody bash -c "dd if='$udv' bs=1M count=4 iflag=direct status=none | cmp - '$np/x'"
	chmod 666 "$udv"
	expect_fail "another user (daemon) cannot open it, whatever the node's mode" \
		setpriv --reuid=daemon --regid=daemon --clear-groups dd if="$udv" of=/dev/null bs=4k count=1 \
		status=none
	check "kill -9 clockwised" kill -9 "$CTL_PID"
	wait "$CTL_PID" 2>/dev/null
	check "clockwised (nobody) starts again" ctl_start "$np" --no-export-all
	# The kernel gives unprivileged devices no user recovery (ublk_drv
	# clears the flags: a server it cannot trust could hang the device's
	# error handling): the device went with the daemon, its requests in
	# flight failed, and the new daemon makes it again.
	udv=$(cwctl --json export list | jq -r '.[] | select(.name == "u") | .device')
	check "it made the device again ($udv)" grep -q "export u: $udv, [0-9]* bytes" "$CTL_LOG"
	check "  with the same bytes" \
		as_nobody bash -c "dd if='$udv' bs=1M count=4 iflag=direct status=none | cmp - '$np/x'"
	check "export remove u" cwctl export remove u
	check "$udv is gone" wait_for "$udv to go" 10 test ! -e "$udv"
	check "clockwised (nobody) stops cleanly" ctl_stop
	CTL_DAEMON=$root_daemon
	kill "$udev" 2>/dev/null
	chmod 600 /dev/ublk-control
else
	echo "-- no user nobody or group nogroup here: the unprivileged device is left out"
fi

# 7. The disks keep an HDD's time from here on: a stream through a
#    device bound to its reservation (--due stream: each block due a
#    period after the player asks for it), fio loading another device.
#    The stall probes wake every 10 ms, as in nbd-kernel.sh.
#    CW_VM_STREAM=0 leaves it out.
if [ "${CW_VM_STREAM:-1}" = 1 ]; then
	step "stream"
	check "clockwised starts with hdd0 and hdd1 emulating hdd7200" \
		ctl_start "$d" --no-export-all --emulate hdd7200 --conf "stall_probe_us = 10000;"
	check "part create media" cwctl part create media --size 8M
	check "record media" ctl_fill media 8M
	check "part create load" cwctl part create load --size 16M
	check "record load" ctl_fill load 16M
	BLOCK=262144
	rate=${CW_VM_STREAM_RATE:-2000000}
	rid=$(cwctl --json resv create media --rate "$rate" --block $BLOCK --due stream | jq -e .id)
	check "a stream of $rate B/s in 256 KiB blocks admitted on media" test -n "$rid"
	check "export add media --ublk bound to it" cwctl export add media --ublk --resv "$rid"
	check "export add load --ublk" cwctl export add load --ublk
	media=$(cwctl --json export list | jq -r '.[] | select(.name == "media") | .device')
	load=$(cwctl --json export list | jq -r '.[] | select(.name == "load") | .device')
	check "media is a block device ($media)" test -b "$media"
	check "load is a block device ($load)" test -b "$load"
	# the device's largest request (512 KiB by default) passes whole blocks
	check "$media takes a whole block per request" \
		test "$(cat /sys/block/${media##*/}/queue/max_sectors_kb)" -ge $((BLOCK / 1024))
	step "play"
	stream_play "$media" "$load" "$rid" "$rate" $BLOCK
	check "export remove media" cwctl export remove media
	check "export remove load" cwctl export remove load
	check "clockwised stops cleanly" ctl_stop
else
	echo "-- the stream through a ublk device: left out (CW_VM_STREAM=0)"
fi
step "done"
