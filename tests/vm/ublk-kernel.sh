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
#   6. the guest has two vCPUs (tests/integration/test-vm-ublk.sh boots it
#      with --smp 2): each device has a queue per CPU (ublk_queues' default),
#      and fio's jobs on both CPUs reach both queues;
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
# A queue per CPU: blk-mq sends a CPU's requests to its own queue, served
# by a thread of the daemon's pinned to that CPU.
ncpu=$(nproc)
check "$dev has a queue per CPU ($ncpu)" test "$(ls /sys/block/${dev##*/}/mq | wc -l)" -eq "$ncpu"
check "the log says so" grep -q "export fs: /dev/ublkb0, .* $ncpu queue" "$CTL_LOG"
# how often each of the daemon's queue threads (cw-ublk) has run
# (schedstat's third figure): a queue that serves requests wakes for them
ublk_runs() {
	local t
	for t in /proc/"$CTL_PID"/task/*; do
		[ "$(cat "$t/comm")" = cw-ublk ] && echo "${t##*/} $(cut -d' ' -f3 "$t/schedstat")"
	done
}
ublk_runs >"$d/runs0"
check "the daemon has a thread per queue" test "$(wc -l <"$d/runs0")" -eq "$ncpu"
check "fio with O_DIRECT, a job per CPU and 32 in flight each verifies" \
	fio --name=direct --directory="$mnt" --size=16M --rw=randwrite --bs=16k --numjobs="$ncpu" \
		--cpus_allowed="0-$((ncpu - 1))" --cpus_allowed_policy=split \
		--ioengine=io_uring --iodepth=32 --direct=1 --eta=never --verify=crc32c \
		--do_verify=1 --verify_fatal=1 --verify_state_save=0 --output="$d/fio-direct.log"
ublk_runs >"$d/runs1"
while read -r tid n0; do
	n1=$(awk -v t="$tid" '$1 == t { print $2 }' "$d/runs1")
	check "  queue thread $tid served fio's requests (woke $((n1 - n0)) times)" \
		test "$((n1 - n0))" -gt 100
done <"$d/runs0"
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
# what the daemon's disks wrote (the device's own diskstats lag)
written() { cwctl --json stats | jq '[.disks[].written_bytes] | add'; }
w0=$(written)
# (looked at once a second: a loop that forks 20 times a second took
# the guest's one emulated CPU, and fio wrote 3 MiB in 60 s)
wrote_some() {
	local i
	for ((i = 0; i < 120; i++)); do
		[ "$(($(written) - w0))" -gt $((4 << 20)) ] && return 0
		sleep 1
	done
	return 1
}
check "fio is writing" wrote_some
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
