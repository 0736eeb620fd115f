# Sourced by the scripts tests/vm/guest runs (tests/vm/nbd-kernel.sh,
# tests/vm/ublk-kernel.sh,
# tests/vm/anchors.sh), after tests/integration/lib.sh and ctl-lib.sh:
#   nbd_up DEV EXPORT   the kernel's NBD client (nbd-client -unix) on an
#                       export of the daemon ctl_start started, its size
#                       seen by the kernel
#   nbd_down DEV        disconnects it
# The guest is one test's alone, and the build directory (where the
# suite's real-time lock lives) is read-only there: cw_rt_lock takes no lock.
cw_rt_lock() { [ -n "${cw_rt_fd:-}" ] || exec {cw_rt_fd}>/dev/null; }
# The guest's CPU is emulated, several times slower than the host's (and
# slower again on a busy host): waits for the daemon take four times
# the host's (cw_budget).
export CW_BUDGET_SCALE=4

nbd_up() {
	nbd-client -unix "$CTL_NBD" -N "$2" "$1" >"$cw_tmp/nbd-client.log" 2>&1 ||
		{ cat "$cw_tmp/nbd-client.log"; return 1; }
	# the size is set once the kernel has the socket
	wait_for "$1 to have a size" 10 test "$(blockdev --getsize64 "$1" 2>/dev/null || echo 0)" -gt 0
}
nbd_down() { nbd-client -d "$1" >/dev/null 2>&1; }

# written: the bytes the daemon's disks wrote (a ublk device's own
# diskstats lag); wrote_since W0 BYTES: waits (2 minutes at most) until
# they are BYTES past W0, looking once a second (a loop that forks 20
# times a second took the guest's one emulated CPU: fio wrote 3 MiB in
# 60 s).
written() { cwctl --json stats | jq '[.disks[].written_bytes] | add'; }
wrote_since() {
	local i
	for ((i = 0; i < 120; i++)); do
		[ "$(($(written) - $1))" -gt "$2" ] && return 0
		sleep 1
	done
	return 1
}

# A stream's figure from the daemon's stats: stream_stat RID FIELD.
stream_stat() { cwctl --json stats | jq --argjson id "$1" ".reservations[] | select(.id == \$id) | .$2"; }

#   stream_play DEV LOADDEV RID RATE BLOCK
# The stream of reservation RID read from block device DEV at RATE
# bytes/s in BLOCK-byte blocks (tests/vm/blkplay, O_DIRECT, one block at
# a time, each due a period after it is asked: the reservation is
# --due stream) for CW_VM_STREAM_SECS (8) seconds while fio reads
# LOADDEV (another export) at random, 8 in flight: the player reads
# every block, each request a whole block, and no block is late to the
# player or the daemon (or each late one came with the host's stall the
# daemon logged, ctl_misses_hosts).
blkplay=$top_srcdir/tests/vm/blkplay
stream_play() {
	local dev=$1 load_dev=$2 rid=$3 rate=$4 block=$5 secs=${CW_VM_STREAM_SECS:-8}
	local short log_at before load rc missed name=${1##*/}
	short=$(stream_stat "$rid" short_requests)
	log_at=$(wc -l <"$CTL_LOG")
	before=$(stream_stat "$rid" misses)
	fio --name=load --filename="$load_dev" --direct=1 --ioengine=libaio --iodepth=8 --rw=randread \
		--bsrange=4k-128k --time_based --runtime=60 --eta=never --output="$cw_tmp/fio-load-$name.log" &
	load=$!
	cleanup_add "kill $load 2>/dev/null"
	# the load under way before the stream starts
	reads_done() { [ "$(awk '{ print $1 }' "/sys/block/${1##*/}/stat")" -gt "$2" ]; }
	check "fio's load reaches the daemon" wait_for "fio's reads through $load_dev" 20 reads_done "$load_dev" 100
	# the player at a real-time priority, as cwstream --rt-priority: on the
	# guest's one CPU, fio and the daemon's best-effort threads would
	# otherwise delay its wake-ups
	chrt -f 10 "$blkplay" "$dev" --rate "$rate" --block "$block" --duration "$secs" \
		>"$cw_tmp/play-$name.json"
	rc=$?
	kill "$load" 2>/dev/null; wait "$load" 2>/dev/null
	missed=$(($(stream_stat "$rid" misses) - before))
	echo "blkplay: $(cat "$cw_tmp/play-$name.json")"
	echo "the daemon: $missed missed; fio's load: $(grep -m1 -E 'read: IOPS' "$cw_tmp/fio-load-$name.log")"
	check "the player read every block" \
		test "$(jq .blocks "$cw_tmp/play-$name.json")" -ge $((secs * rate / block - 1))
	check "every request of the play was a whole block" \
		test "$(stream_stat "$rid" short_requests)" -eq "$short"
	if [ "$rc" -eq 0 ] && [ "$missed" -eq 0 ]; then
		check "the player missed no block through $dev, the daemon no deadline" true
	else
		# a miss is the daemon's unless each came with the host's stall
		check "the player's and the daemon's misses are the host's (player exit $rc)" \
			ctl_misses_hosts "$(cat "$cw_tmp/play-$name.json")" "$missed" "$log_at"
	fi
	check "the daemon served the stream as real-time" test "$(stream_stat "$rid" requests)" -gt 0
}
