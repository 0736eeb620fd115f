#!/usr/bin/env bash
# Run inside a guest of two vCPUs by tests/integration/test-vm-ublk.sh
# (tests/vm/guest --kernel bpo --smp 2): a ublk device has a queue per CPU
# (exports.ublk_queues' default), each served by a thread of the daemon's
# pinned to that queue's CPUs.
#   1. the device has two hardware queues, the daemon two cw-ublk threads,
#      and the log says so;
#   2. fio's verified random writes, a job on each CPU, wake both threads
#      (blk-mq sends a CPU's requests to its own queue);
#   3. kill -9 under that load: the new daemon takes the two-queue device
#      back and fio verifies every block.
# PASS/FAIL lines and the cw-counts line of tests/integration/lib.sh.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/ctl-lib.sh"
. "$top_srcdir/tests/vm/lib.sh"
d=$cw_tmp

check "modprobe ublk_drv" modprobe ublk_drv
ncpu=$(nproc)
check "the guest has two CPUs" test "$ncpu" -eq 2
check "clockwised starts" ctl_start "$d" --no-export-all
check "part create q (64M)" cwctl part create q --size 64M
check "export add q --ublk" cwctl export add q --ublk
dev=$(cwctl --json export list | jq -r '.[] | select(.name == "q") | .device')
check "$dev is a block device" test -b "$dev"
check "$dev has a queue per CPU" test "$(ls "/sys/block/${dev##*/}/mq" | wc -l)" -eq "$ncpu"
check "the log says so" grep -q "export q: $dev, .* $ncpu queues" "$CTL_LOG"

# how often each of the daemon's queue threads (cw-ublk) has run
# (schedstat's third figure): a queue that serves requests wakes for them
ublk_runs() {
	local t
	for t in /proc/"$CTL_PID"/task/*; do
		[ "$(cat "$t/comm")" = cw-ublk ] && echo "${t##*/} $(cut -d' ' -f3 "$t/schedstat")"
	done
	return 0
}
ublk_runs >"$d/runs0"
check "the daemon has a thread per queue" test "$(wc -l <"$d/runs0")" -eq "$ncpu"
# a job per CPU, each on its own half of the device, verified
jobs() {
	fio --name=q --filename="$dev" --size=16M --offset_increment=32M --rw=randwrite --bs=16k \
		--numjobs="$ncpu" --cpus_allowed="0-$((ncpu - 1))" --cpus_allowed_policy=split \
		--ioengine=io_uring --iodepth=16 --direct=1 --eta=never --verify=crc32c --do_verify=1 \
		--verify_fatal=1 --verify_state_save=0 "$@"
}
check "fio, a job on each CPU, verifies" jobs --output="$d/fio.log"
ublk_runs >"$d/runs1"
while read -r tid n0; do
	n1=$(awk -v t="$tid" '$1 == t { print $2 }' "$d/runs1")
	check "  queue thread $tid served requests (woke $((n1 - n0)) times)" test "$((n1 - n0))" -gt 100
done <"$d/runs0"

# kill -9 in the middle of the writes (at most 2 MB/s a job, so that the
# kill comes before the reads)
jobs --rate=2m --output="$d/fio-crash.log" &
fio_pid=$!
cleanup_add "kill $fio_pid 2>/dev/null"
w0=$(written)
check "fio is writing" wrote_since "$w0" $((4 << 20))
check "kill -9 clockwised" kill -9 "$CTL_PID"
wait "$CTL_PID" 2>/dev/null
check "clockwised starts again" ctl_start "$d" --no-export-all
check "it took $dev back with its two queues" \
	grep -q "export q: $dev, taken back with its queued requests, .* $ncpu queues" "$CTL_LOG"
wait "$fio_pid"
rc=$?
check "fio's jobs went on and every block verifies (fio exit $rc)" test "$rc" -eq 0
check "export remove q" cwctl export remove q
check "clockwised stops cleanly" ctl_stop
