#!/usr/bin/env bash
# Description: reads that cost no disk time cannot make an admitted
# stream miss.  A stream of 4 MB/s in 256 KiB blocks plays its
# reservation's export (cwstream, with the reservation) on two disks that
# keep an HDD's time, while fio clients read holes as fast as they can
# (4 MiB reads, 8 in flight each): first on another, unreserved export,
# then on the stream's own export.  A hole is read without a disk access,
# so each such read is CPU (zeros made, copied onto the socket and out of
# it) that no disk's test books.  Only the connection that holds the
# reservation runs at real-time priority, within what it was admitted
# for; the others are best effort, whose CPU the daemon bounds to what
# admission leaves free.  The stream is to miss nothing, in either
# phase, and while it plays only its connection's two threads run at
# real-time priority, the player's (it claims its reservation).  A miss
# during a stall of the host (the kernel or the hypervisor held every
# thread off a CPU, as the daemon's stall probes saw) is said as the
# host's, not failed: see the end of storm.
# The player runs at real-time priority 10, as a media player
# would (and as tests/bench/guarantee's do), where the system allows it:
# a host busy with other work delays a player at normal priority by
# itself.  (On 5ff71f3, where every connection of the stream's export ran
# at real-time priority, all ten of its threads did.)  A failure prints
# the daemon's miss lines and the real-time threads of other processes
# seen while the stream played (other daemons' streams, say): a cause
# that admission here does not book.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires fio jq qemu-io
fio --enghelp 2>/dev/null | grep -qw nbd || skip "fio lacks the nbd engine"
CWSTREAM=$top_builddir/tools/cwstream
d=$cw_tmp
SECS=${CW_HOLE_STORM_SECS:-12}
# Under a sanitizer, where the storm is CPU for the whole check and
# misses are only reported, half as long.
[ -z "${CW_SANITIZED:-}" ] || SECS=${CW_HOLE_STORM_SECS:-6}
BLOCK=256K
rt_opt=() assert=1
if chrt -f 10 true 2>/dev/null; then
	rt_opt=(--rt-priority 10)
else
	echo "(no real-time priority here: misses are reported, not asserted)"
	assert=
fi
[ -z "${CW_SANITIZED:-}" ] || { echo "(sanitizer build: misses are reported, not asserted)"; assert=; }

CTL_RT_LOCK=-x	# its stream beside no other daemon of the suite (ctl_start)
# (but for a sanitizer build, where its misses are only reported)
[ -z "${CW_SANITIZED:-}" ] || CTL_RT_LOCK=-s
ctl_start "$d" --no-export-all --emulate hdd7200
check "write hdd0 and hdd1 out (no holes)" ctl_write_disks "$d"
# media: 96 MiB recorded, the rest holes; other: holes only.
check "part create media" cwctl part create media --size 128M --tier hdd
check "record 96 MiB of media" ctl_fill media 96M
check "part create other" cwctl part create other --size 64M --tier hdd

rate=4000000
rid=$(cwctl --json resv create media --rate "$rate" --block $BLOCK | jq -e .id)
check "a stream of $rate B/s admitted on media" test -n "$rid"
check "export media bound to it" cwctl export add media --name s0 --resv "$rid"
check "export other" cwctl export add other

misses() { cwctl --json stats | jq '[.disks[].rt_misses] | add'; }
resv_misses() { cwctl --json stats | jq "[.reservations[] | select(.id == $rid) | .misses] | add"; }
# What the daemon does not book: real-time threads of other processes
# (but the kernel's and the player's own), "pid class priority name".
others_rt() {
	ps -eLo pid=,cls=,rtprio=,comm= | awk -v p="$CTL_PID" '($2 == "FF" || $2 == "RR") &&
		$1 != p && $4 != "cwstream" && $4 !~ /^(migration|watchdog|irq|ksoftirq|rcu)/'
}
miss_lines() {
	grep -E 'missed a deadline|more misses not logged' "$CTL_LOG" | tail -n 40
	echo "real-time threads of other processes while it played: $(wc -l <"$d/others-$1")" \
		$(sort "$d/others-$1" | uniq -c | head -n 20)
}

# hole_storm NAME URI OFFSET SIZE: four clients reading holes there, for
# the stream's time and a second more, while the stream plays.
storm() {
	local name=$1 uri=$2 off=$3 size=$4 before before_r summary missed rm rc
	before=$(misses); before_r=$(resv_misses)
	local log_at
	log_at=$(wc -l <"$CTL_LOG")
	fio --name=holes --ioengine=nbd --uri="$uri" --rw=read --bs=4M --iodepth=8 \
		--numjobs=4 --offset="$off" --size="$size" --runtime=$((SECS + 1)) --time_based \
		--group_reporting --output-format=json --output="$d/fio-$name.json" \
		>"$d/fio-$name.out" 2>&1 &
	local fio_pid=$!
	cleanup_add "kill $fio_pid 2>/dev/null"
	sleep 0.5	# the clients at full speed before the stream starts
	"$CWSTREAM" play "nbd+unix:///s0?socket=$CTL_NBD" --resv "$rid" --socket "$CTL_SOCK" \
		--rate "$rate" --block $BLOCK --duration "${SECS}s" "${rt_opt[@]}" --json --quiet \
		>"$d/s0-$name.json" 2>"$d/s0-$name.err" &
	local play_pid=$!
	sleep $((SECS / 2))
	# While it plays: the stream's connection's reader and writer run at
	# real-time priority, the clients' connections do not.
	ps -L -o cls=,comm= -p "$CTL_PID" | grep ' cw-[rw]:' | sort | uniq -c >"$d/threads-$name"
	others_rt | awk '{ print $1, $2, $3, $4 }' >"$d/others-$name"
	echo "threads of the daemon's connections while it plays (count, class, name):" \
		$(cat "$d/threads-$name")
	if [ -n "${rt_opt[*]}" ]; then
		check "holes read on $name: two connection threads at real-time priority" \
			test "$(awk '$2 == "FF" { n += $1 } END { print n + 0 }' "$d/threads-$name")" -eq 2
	fi
	# ... and they are the player's: it claimed its reservation (on
	# the stream's own export the clients connected first, and the
	# first of them held the priority until the claim)
	local holders
	holders=$(cwctl --json export list | jq -c '[.[] | select(.name == "s0") |
		.clients[] | select(.realtime) | .pid]')
	echo "clients of s0 at real-time priority (pids): $holders; the player: $play_pid"
	check "holes read on $name: only the player's connection holds the priority" \
		test "$holders" = "[$play_pid]"
	local claimed
	claimed=$(cwctl --json resv show "$rid" | jq .claimed_by)
	if [ -n "${CW_SANITIZED:-}" ] && [ "$claimed" != "$play_pid" ]; then
		# Open (issue 31): in 3 of 5 sanitizer runs' first phase (none of
		# the plain ones) the claim was not there while the player's
		# connection held the priority; cause not found yet.  Shown with
		# what it takes to find it, not failed, under a sanitizer.
		echo "OPEN: holes read on $name: resv show says claimed_by $claimed, the player is" \
			"$play_pid; cwstream said: $(cat "$d/s0-$name.err");" \
			"the daemon's claim lines: $(grep -E 'claim' "$CTL_LOG" | tail -n 5)"
	else
		check "holes read on $name: the reservation is claimed by the player" \
			test "$claimed" = "$play_pid"
	fi
	wait "$play_pid"
	rc=$?
	wait "$fio_pid"
	sleep 1.5	# the daemon counts and logs a late reply at its next tick
	check "fio read holes on $name" \
		test "$(jq '.jobs[0].read.io_bytes' "$d/fio-$name.json")" -gt 0
	summary=$(tail -n1 "$d/s0-$name.json" | jq -c .summary)
	missed=$(($(misses) - before))
	rm=$(($(resv_misses) - before_r))
	echo "holes read on $name: $(jq '.jobs[0].read.bw_bytes / 1048576 | floor' \
		"$d/fio-$name.json") MiB/s; daemon missed $missed (reservation $rm);" \
		"cwstream (exit $rc): $summary"
	check "cwstream played beside holes read on $name (exit 0 or 4)" test "$rc" -eq 0 -o "$rc" -eq 4
	check "the stream kept its rate" \
		test "$(jq .blocks <<<"$summary")" -ge $((rate * SECS * 9 / 10 / 262144))
	if [ -z "$assert" ]; then
		miss_lines "$name"
		return
	fi
	# the daemon's miss lines of this phase, and the player's count
	local lines played_missed
	lines=$(tail -n "+$((log_at + 1))" "$CTL_LOG" | grep -E 'missed a deadline|misses not logged')
	played_missed=$(jq .misses <<<"$summary")
	if [ "$played_missed" -ne 0 ] || [ "$missed" -ne 0 ] || [ "$rm" -ne 0 ]; then
		echo "the daemon's miss lines:"; miss_lines "$name"
		# As ctl_no_miss: misses while real-time threads of other
		# processes held the CPUs (every daemon miss line names them,
		# and some ran while the stream played) are the host's, which
		# admission does not book: said, not failed.
		if [ -s "$d/others-$name" ] && { [ "$missed" -eq 0 ] || { [ -n "$lines" ] &&
			! grep -qv 'real-time threads of other processes' <<<"$lines"; }; }; then
			check "holes read on $name: the misses are the host's, not the daemon's" true
			return
		fi
	fi
	# The host's stalls (the daemon's stall probes, above all of its
	# threads, woke late: the kernel, the hypervisor or another process
	# held every thread off a CPU): a miss during one is the host's, said
	# and not failed (ctl_misses_hosts); any other miss fails.
	if [ "$rm" -le "$missed" ] && ctl_misses_hosts "$summary" "$missed" "$log_at"; then
		check "holes read on $name: the misses came with the host's stalls" true
		return
	fi
	check "holes read on $name: cwstream missed no block" test "$played_missed" -eq 0
	check "holes read on $name: the daemon missed no deadline" test "$missed" -eq 0 -a "$rm" -eq 0
}

storm other "nbd+unix:///other?socket=$CTL_NBD" 0 64M
storm own "nbd+unix:///s0?socket=$CTL_NBD" 96M 32M

check "the server stops" ctl_stop
