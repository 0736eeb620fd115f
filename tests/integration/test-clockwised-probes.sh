#!/bin/bash
# Description: the stall probes sleep while no reservation exists.  A
# probe wakes every stall_probe_us on each CPU (a wake-up costs some
# 100 us of CPU on a virtual machine), and only a deadline's miss needs
# what it records: with no reservation the probes' threads do not run;
# a reservation arms them (they run about once a period); its release
# disarms them; a daemon started with a stored reservation arms them
# at once.  Counted from each probe thread's schedstat (its timeslices).
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires jq

ctl() { "$top_builddir/tools/cwctl" --socket "$cw_tmp/control" "$@"; }
check "pool" cwd_pool 64M a
check "partition" cwd_part vol 32M >/dev/null
cwd_conf "stall_probe_us = 1000;"
cwd_start

probe_tids() {
	local t
	for t in /proc/"$cwd_pid"/task/*; do
		case $(cat "$t/comm" 2>/dev/null) in cw-probe/*) echo "${t##*/}" ;; esac
	done
}
# the probes' timeslices, summed
slices() {
	local t n=0
	for t in $(probe_tids); do
		n=$((n + $(awk '{print $3}' "/proc/$cwd_pid/task/$t/schedstat")))
	done
	echo "$n"
}
runs_in_a_second() {
	local a b
	a=$(slices)
	sleep 1
	b=$(slices)
	echo $((b - a))
}

if [ -z "$(probe_tids)" ]; then
	grep 'no stall probes' "$(cwd_log)" || true
	echo "no stall probes here (the daemon may not use real-time priority)"
	cwd_stop
	exit 77
fi
n_probes=$(probe_tids | wc -l)
sleep 0.5	# past start-up
n=$(runs_in_a_second)
check "no reservation: $n_probes probes asleep ($n runs in a second)" test "$n" -le 4
id=$(ctl --json resv create vol --rate 1M --block 64K | jq -e .id)
check "a reservation" test -n "$id"
n=$(runs_in_a_second)
check "armed: they wake about once a millisecond ($n runs of $n_probes probes in a second)" \
	test "$n" -ge $((n_probes * 300))
check "released" ctl resv release "$id"
sleep 0.1
n=$(runs_in_a_second)
check "disarmed: asleep again ($n runs in a second)" test "$n" -le 4

# a stored reservation arms them when the daemon starts
id=$(ctl --json resv create vol --rate 1M --block 64K | jq -e .id)
check "a second reservation" test -n "$id"
check "stop" cwd_stop
cwd_start
n=$(runs_in_a_second)
check "started with reservation $id stored: armed ($n runs in a second)" \
	test "$n" -ge $((n_probes * 300))
check "stop" cwd_stop
