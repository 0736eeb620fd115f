#!/usr/bin/env bash
# Description: every miss attributed.  Each cause of a missed deadline is
# provoked on purpose and found counted in its class, for the disk and
# the reservation, and logged with its timeline:
#  - model: a disk that emulates a 1990s drive (atlas2) while admission
#    believes it a modern one (hdd7200): every request takes longer than
#    its C;
#  - delivery: the data is read in time but the client does not read its
#    replies for a second, so they leave late.
#  - cpu: the real-time threads are kept on CPU 0 (rt_cpus) and a
#    higher-priority spinner takes that CPU for 150 ms at a time (longer at a lower rate) while
#    best effort keeps the disk busy: the stream's requests wait on their
#    connection (the reader cannot run), or are started or reaped late
#    (the dispatcher cannot).
#  - overrun: an emulated SSD whose writes cost 50 reads while admission
#    charges a write as the preset's two reads: best-effort writes overrun
#    their charge and the stream's reads wait behind them.
#  - emulator: an emulated disk whose backing file answers late (the
#    fault engine's delay): the emulated disk keeps its time, the host
#    does not.
# A disk and a stream that keep time count nothing.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires jq nbdcopy

cwctl=$top_builddir/tools/cwctl
cwstream=$top_builddir/tools/cwstream
client=$top_builddir/tests/integration/nbd-proto-client
ctl() { "$cwctl" --socket "$cw_tmp/control" "$@"; }

check "pool" cwd_pool 256M hdd0
check "partition" cwd_part media 32M
# The streams read what was written: holes are read without the disk.
cwd_conf "exports = { all = true; };"
cwd_start
head -c 32M /dev/urandom >"$cw_tmp/data"
check "media written" nbdcopy "$cw_tmp/data" "$(cwd_uri media)"
check "stop" cwd_stop

# conf DISK-SETTINGS [MORE]: one disk hdd0 with these settings
conf() {
	cwd_conf "disks = ( { path = \"$cw_tmp/hdd0.disk\"; name = \"hdd0\"; $1 } );
${2:-}"
}
# bind NAME RATE: export NAME of media bound to a new reservation of RATE
# in $block blocks (sets $id)
block=256K
bind() {
	id=$(ctl --json resv create media --rate "$2" --block "$block" 2>/dev/null | jq -e .id) ||
		return 1
	ctl export add media --name "$1" --resv "$id" >/dev/null
}
# unbind NAME: the export and its reservation go
unbind() { ctl export remove "$1" >/dev/null && ctl resv release "$id" >/dev/null; }
# stream NAME RATE SECONDS [ARGS]: a stream of $block blocks on export
# NAME; prints cwstream's summary
stream() {
	local name=$1 rate=$2 secs=$3
	shift 3
	bind "$name" "$rate" || return 1
	"$@" "$cwstream" play "$(cwd_uri "$name")" --rate "$rate" --block "$block" \
		--duration "$secs" --resv "$id" --socket "$cw_tmp/control" "${stream_opts[@]}" \
		--json --quiet | tail -n1
}
# fastest NAME: binds NAME at the fastest of a few rates the disk admits
fastest() {
	for rate in 16MB/s 12MB/s 8MB/s 4MB/s; do
		if bind probe "$rate"; then unbind probe; return 0; fi
	done
	return 1
}
stream_opts=()	# more options of cwstream play
classes() { ctl --json stats | jq -c '.disks[] | select(.disk == "hdd0") | .rt_miss_classes'; }
resv_classes() { ctl --json stats | jq -c '[.reservations[].miss_classes]'; }

# ---- a disk that keeps time: nothing
conf "model = \"hdd7200\"; emulate = \"hdd7200\";"
cwd_start
stream ok 2MB/s 2 >"$cw_tmp/ok.json"
unbind ok
check "a stream on a disk that keeps time misses nothing" jq -e '.summary.misses == 0' "$cw_tmp/ok.json"
check "and no class counts anything" test "$(classes)" = \
	'{"model":0,"overrun":0,"cpu":0,"delivery":0,"sched":0,"emulator":0}'
check "stop" cwd_stop

# ---- model: slower than admitted
conf "model = \"hdd7200\"; emulate = \"atlas2\";"
cwd_start
# A stream of 1 MiB blocks near what hdd7200 admits: its blocks come
# faster than atlas2 serves them, so the daemon's own deadlines pass.
block=1M
fastest
stream model "$rate" 2 >"$cw_tmp/model.json"
check "the stream saw misses" jq -e '.summary.misses > 0' "$cw_tmp/model.json"
echo "model: $(classes)"
check "the disk counts them as the model's" sh -c "test \"\$(echo '$(classes)' | jq '.model')\" -gt 0"
# (a request of the stream held up by the host's CPU, on a busy host, is
# the CPU's: nearly all, not all)
check "nearly only as the model's ($(classes))" \
	test "$(classes | jq '.model > 10 * (.overrun + .cpu + .sched + .emulator)')" = true
check "so does the reservation" test "$(resv_classes | jq '[.[].model] | add')" -gt 0
check "and its worst lateness" test "$(ctl --json stats | jq '[.reservations[].worst_late_ns] | max')" -gt 0
unbind model
block=256K
sleep 1.5	# the log is written once a second
check "each miss is logged with its timeline" \
	grep -Eq 'disk hdd0: stream [0-9]+ \(reservation [0-9]+\) missed a deadline by [0-9]+ us \(model\): released at 0, arrived at -?[0-9]+, booked at -?[0-9]+, taken at -?[0-9]+, due at [0-9]+, started at [0-9]+, done at [0-9]+ us' \
	"$(cwd_log)"
check "stop" cwd_stop

# ---- delivery: read in time, sent late
conf "model = \"hdd7200\";"
cwd_start
check "an export bound to a reservation" bind late 2MB/s
check "a client that does not read its replies for a second" \
	env NBD_EXPORT=late "$client" "$cwd_sock" slow-reader
echo "delivery: $(classes)"
check "its late replies count as delivery misses" test "$(classes | jq '.delivery')" -gt 0
check "and nothing else" test "$(classes | jq '.model + .overrun + .cpu + .sched')" -eq 0
check "so does the reservation" test "$(resv_classes | jq '[.[].delivery] | add')" -gt 0
check "and its worst lateness: the late reply's" \
	test "$(ctl --json stats | jq '[.reservations[].worst_late_ns] | max')" -gt 0
sleep 1.5	# the log is written once a second
check "each late reply is logged with its times" \
	grep -Eq 'disk hdd0: stream [0-9]+ \(reservation [0-9]+\) missed a deadline by [0-9]+ us \(delivery\): its data was ready [0-9]+ us before the deadline, only its reply was late: its send began [0-9]+ us after the data was ready and took [0-9]+ us; (its writer waited [0-9]+ us for a CPU since it last slept|a dispatcher sent it)' \
	"$(cwd_log)"
# the client read nothing for a second: the time went to the full socket
took=$(sed -nE 's/.*\(delivery\):.* and took ([0-9]+) us.*/\1/p' "$(cwd_log)" | sort -n | tail -n 1)
echo "delivery: the longest send took ${took:-?} us"
check "  and says the send waited on the client's socket (100 ms or more)" \
	test "${took:-0}" -ge 100000
check "stop" cwd_stop

# ---- overrun: best effort that takes longer than it is charged
# An SSD whose writes cost 50 reads (write=50) while admission charges a
# write as the preset's two reads: each best-effort write overruns its charge by far
# more than the slack the plan keeps, and the stream's reads, each within
# its own C, wait behind it.
conf "model = \"ssd\"; emulate = \"ssd write=50\";"
cwd_start
fastest
( while :; do qemu-io -f raw -c "write -P 0x33 0 8M" "$(cwd_uri media)" >/dev/null || exit; done ) &
be=$!
stream overrun "$rate" 3 >"$cw_tmp/overrun.json"
kill "$be" 2>/dev/null; wait "$be" 2>/dev/null
echo "overrun: $(classes)"
check "the stream saw misses" jq -e '.summary.misses > 0' "$cw_tmp/overrun.json"
check "the disk counts them as overruns" test "$(classes | jq '.overrun')" -gt 0
# A read of this SSD takes half its C (C covers a write of two reads), so
# only an emulator woken late on a loaded host makes an odd one the
# model's: nearly all must be overruns.
check "nearly none as the model's" test "$(classes | jq '.overrun > 10 * (.model + .sched)')" = true
check "so does the reservation" test "$(resv_classes | jq '[.[].overrun] | add')" -gt 0
check "best-effort overruns are counted" \
	test "$(ctl --json stats | jq '[.disks[] | select(.disk == "hdd0") | .be_overruns] | add')" -gt 0
unbind overrun
sleep 1.5
check "the log names the best-effort request that overran" \
	grep -Eq 'missed a deadline by [0-9]+ us \(overrun\):.*a best-effort (read|write) of [0-9]+ bytes ending [0-9]+ us after the release overran its charge of [0-9]+ us by [0-9]+ us' \
	"$(cwd_log)"
# The dispatcher waited for that request's end within one round: the
# line says how long the round was, and that it was not the lock.
check "and the dispatcher's long round it waited in" \
	grep -Eq 'missed a deadline by [0-9]+ us \(overrun\):.*one round of the dispatcher took [0-9]+ us from -?[0-9]+ us, [0-9]+ us of it waiting for the dispatch lock' \
	"$(cwd_log)"
check "stop" cwd_stop

# ---- emulator: the emulated disk keeps its time, its backing store not
# An emulated hdd7200 whose backing file answers each request 200 ms after
# it was asked (the fault engine's delay-us, standing for a busy host's
# disk): the emulated disk is done in its C, the request comes back late.
# The host's, not the model's: class emulator, the line says by how much.
conf "model = \"hdd7200\"; emulate = \"hdd7200\"; fault = \"delay-us=200000\";"
cwd_start
stream emulator 2MB/s 2 >"$cw_tmp/emulator.json"
echo "emulator: $(classes)"
check "the stream saw misses" jq -e '.summary.misses > 0' "$cw_tmp/emulator.json"
check "the disk counts them as the emulator's ($(classes))" test "$(classes | jq '.emulator')" -gt 0
check "none as the model's, an overrun or the schedule's" \
	test "$(classes | jq '.model + .overrun + .sched')" -eq 0
check "so does the reservation" test "$(resv_classes | jq '[.[].emulator] | add')" -gt 0
unbind emulator
sleep 1.5
check "the log says how long after the emulated disk's time it came back" \
	grep -Eq 'missed a deadline by [0-9]+ us \(emulator\):.*came back [0-9]{6} us after the emulated disk had done it' \
	"$(cwd_log)"
check "stop" cwd_stop

# ---- cpu: the dispatcher held off its CPU
if [ "$(nproc)" -ge 2 ] && chrt -f 50 true 2>/dev/null; then
	conf "model = \"hdd7200\"; emulate = \"hdd7200\";" "rt_cpus = [ 0 ];"
	cwd_start
	block=1M
	check "a rate the disk admits" fastest
	# The player on CPU 1; on CPU 0, five bursts of a spinner above
	# every daemon thread, each stopped from CPU 1 (a spinner cannot be
	# stopped by a timer that shares its CPU and priority).  No other
	# test's stream plays meanwhile (cw_rt_lock).
	# Each burst outlasts one and a half periods of the stream at the
	# rate admitted (the host's model may admit less than 16 MB/s), so
	# that a request waits past its deadline: 150 ms at 16 MB/s.
	burst=$(awk -v r="${rate%MB/s}" 'BEGIN { b = 1.5 * 1048576 / (r * 1e6);
		printf "%.2f", b < 0.15 ? 0.15 : b }')
	cw_rt_lock -x
	# The bursts begin once the stream's connection holds its real-time
	# priority (it plays), so that all five fall within its 5 s; each
	# burst notes when it began spinning (its proof that it ran).
	: >"$cw_tmp/bursts"
	(
		for _ in $(seq 100); do
			x=$(ctl --json export list 2>/dev/null | jq -c '.[] | select(.name == "cpu")')
			if [ -n "$x" ] && echo "$x" | jq -e '.clients[]? | select(.realtime)' >/dev/null 2>&1; then
				echo "$x $(ctl --json resv show "$(echo "$x" | jq -r .resv)" |
					jq -c '{claimed_by}')" >"$cw_tmp/playing"
				break
			fi
			sleep 0.05
		done
		sleep 0.3
		for _ in 1 2 3 4 5; do
			taskset -c 1 timeout -s KILL "$burst" chrt -f 50 taskset -c 0 \
				sh -c "echo \$(date +%s.%N) >>'$cw_tmp/bursts'; while :; do :; done" || true
			sleep 0.35
		done
	) &
	hog=$!
	# Best effort keeps the disk busy, so that a burst finds a stream's
	# request waiting or in service rather than an idle disk.
	( while :; do taskset -c 1 nbdcopy "$(cwd_uri media)" /dev/null || exit; done ) &
	be=$!
	# Asked at its release (--ahead 0), a block's request meets the
	# spinner in the dispatcher's window; asked ahead, the dispatcher has
	# served it before the burst, and only its reply can be late.
	stream_opts=(--ahead 0)
	stream cpu "$rate" 5 taskset -c 1 >"$cw_tmp/cpu.json"
	stream_opts=()
	wait "$hog"
	cw_rt_lock -u
	kill "$be" 2>/dev/null; wait "$be" 2>/dev/null
	# what a failure has to say: the daemon's classes, the stream's own
	# causes, the claim and how many bursts spun
	seen="$rate, bursts of $burst s, disk $(classes), stream $(jq -c '.summary | {misses, miss_causes}' "$cw_tmp/cpu.json"),"
	seen+=" playing: $(cat "$cw_tmp/playing" 2>/dev/null || echo never seen),"
	seen+=" $(wc -l <"$cw_tmp/bursts") bursts"
	echo "cpu: $seen"
	check "five bursts spun on CPU 0" test "$(wc -l <"$cw_tmp/bursts")" -eq 5
	check "the stream's player claimed its reservation and played at real-time priority ($seen)" \
		grep -q '"claimed_by":[0-9]' "$cw_tmp/playing"
	check "the stream saw misses ($seen)" jq -e '.summary.misses > 0' "$cw_tmp/cpu.json"
	check "the disk counts misses as the CPU's ($seen)" test "$(classes | jq '.cpu')" -gt 0
	check "nearly none as the model's, an overrun or the schedule's ($seen)" \
		test "$(classes | jq '.cpu > 10 * (.model + .overrun + .sched)')" = true
	check "so does the reservation ($seen)" test "$(resv_classes | jq '[.[].cpu] | add')" -gt 0
	unbind cpu
	sleep 1.5
	check "the log says how long the dispatcher waited for a CPU" \
		grep -Eq 'missed a deadline by [0-9]+ us \(cpu\):.*the dispatcher waited [1-9][0-9]* us for a CPU' \
		"$(cwd_log)"
	# the spinner is another process's real-time thread: named, as the
	# cause outside what admission books (daemon/path/rt-neighbours.h)
	check "and names the other process's real-time thread that held it" \
		grep -Eq '\(cpu\):.*; real-time threads of other processes on this host: .*sh\[[0-9]+\] FIFO 50' \
		"$(cwd_log)"
	# and the stall probe on CPU 0 (above every daemon thread, below the
	# spinner) saw CPU 0 held for the burst: 150 ms, give or take
	check "and says the host held CPU 0 off every daemon thread meanwhile" \
		grep -Eq '\(cpu\):.*; the host held every thread below real-time priority [0-9]+ off cpu 0 for [0-9]{5,6} us' \
		"$(cwd_log)"
	check "the log says the longest stall of its second" \
		grep -Eq 'host: CPU 0 ran no thread below real-time priority [0-9]+ for [0-9]{5,6} us' "$(cwd_log)"
	check "stop" cwd_stop
	block=256K
else
	echo "cpu: skipped (needs two CPUs and real-time priority)"
fi
