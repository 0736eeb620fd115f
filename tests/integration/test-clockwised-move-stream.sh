#!/usr/bin/env bash
# Description: rule 2 of moving data, carried out.  A stream plays a
# reserved partition through its export (cwstream, at its rate) on two
# disks that keep an HDD's time, while `cwctl part move` takes the whole
# partition to the other disk.  The move runs at once (not postponed):
# the reservation is booked on both disks while it copies, the stream is
# served as real-time on whichever disk holds each block, keeps its rate
# and the daemon counts no missed deadline; once the move is done the
# reservation is booked on the new disk alone.  Moved back, the daemon is
# killed (-9) in the middle: after the restart the move resumes and the
# reservation is booked on both disks while it runs, on the destination
# alone once it is done.  A reservation made while a move takes the
# range to the other disk is booked on both at once (one that does not fit
# on both is refused, naming the move), plays without a miss while the
# move runs, and settles on the destination.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq qemu-io
CWSTREAM=$top_builddir/tools/cwstream
d=$cw_tmp
MB=${CW_MOVE_STREAM_MB:-96}
BLOCK=256K

CTL_RT_LOCK=-x	# its stream beside no other daemon of the suite (ctl_start)
ctl_start "$d" --no-export-all --emulate hdd7200
check "write hdd0 and hdd1 out (no holes)" ctl_write_disks "$d"
check "part create media on hdd0" cwctl part create media --size "${MB}M" --policy single --disk hdd0
check "record media" ctl_fill media "${MB}M"

# A quarter of the largest stream admitted on one disk (at most 4 MB/s),
# so that it fits on both disks at once.
lo=$(ctl_largest media $BLOCK 100)	# within a factor of two
hi=$((lo * 2))
rate=$((lo / 4))
[ $rate -le 4000000 ] || rate=4000000
rid=$(cwctl --json resv create media --rate "$rate" --block $BLOCK | jq -e .id)
check "a stream of $rate B/s admitted on media" test -n "$rid"
check "export it bound to the reservation" cwctl export add media --name s0 --resv "$rid"

disks_of() { cwctl --json resv show "$rid" | jq -c '[.per_disk[].disk] | sort'; }
state_of() { cwctl --json move list | jq -r ".[] | select(.id == $1) | .state"; }
rt_on() { cwctl --json stats | jq "[.disks[] | select(.disk == \"$1\") | .rt_requests] | add // 0"; }
misses() { cwctl --json stats | jq '[.disks[].rt_misses] | add'; }
# play_ok DESC URI DURATION: a stream played to its end.  Exit 0: no
# block missed.  Exit 4 (blocks missed) passes here only when the daemon
# counted misses of its own meanwhile, which ctl_no_miss then judges
# (the host's, or a failure), or when a miss the player saw and the
# daemon did not came with a stall of the host at least as long
# (ctl_misses_hosts); any other such miss is the player's own lateness,
# and fails.
play_ok() {
	local desc=$1 uri=$2 dur=$3 before rc after log_at summary
	before=$(misses)
	log_at=$(wc -l <"$CTL_LOG")
	"$CWSTREAM" play "$uri" --rate "$rate" --block $BLOCK --duration "$dur" --json --quiet \
		>"$d/play.json"; rc=$?
	after=$(misses)
	summary=$(tail -n1 "$d/play.json" | jq -c .summary)
	if [ "$rc" -eq 4 ] && [ "$after" -gt "$before" ]; then
		echo "$desc: cwstream $summary;" \
			"the daemon missed $((after - before)) meanwhile (judged below)"
		check "$desc (its misses are the daemon's, judged below)" true
	elif [ "$rc" -eq 4 ] && ctl_misses_hosts "$summary" 0 "$log_at"; then
		check "$desc (its misses are the host's)" true
	else
		[ "$rc" -eq 0 ] || echo "cwstream $(tail -n1 "$d/play.json" | jq -c .summary)"
		check "$desc" test "$rc" -eq 0
	fi
}

check "booked on hdd0 alone" test "$(disks_of)" = '["hdd0"]'
secs=30
"$CWSTREAM" play "nbd+unix:///s0?socket=$CTL_NBD" --rate "$rate" --block $BLOCK \
	--duration "${secs}s" --json --quiet >"$d/s0.json" 2>"$d/s0.err" &
play=$!
cleanup_add "kill $play 2>/dev/null"
t0=$(date +%s.%N)
check "the stream plays on hdd0" wait_for "real-time requests on hdd0" 20 \
	bash -c '[ "$("$0" --socket "$1" --json stats | jq "[.disks[] | select(.disk == \"hdd0\") | .rt_requests] | add")" -ge 4 ]' \
	"$CWCTL" "$CTL_SOCK"

out=$(cwctl --json part move media --disks hdd1 --policy single)
mid=$(jq -e .id <<<"$out")
check "the move runs at once, not postponed" jq -e '.state == "running" or .state == "done"' <<<"$out"
both=$(disks_of)
state=$(state_of "$mid")
echo "while moving ($state): reservation $rid on $both"
if [ "$state" = running ]; then
	check "while it runs the reservation is on both disks" test "$both" = '["hdd0","hdd1"]'
fi
check "the move finishes" cwctl move list --watch --interval 0.2
check "it is done" test "$(state_of "$mid")" = done
t1=$(date +%s.%N)
check "the stream still plays after the move" kill -0 "$play"
check "the reservation is on hdd1 alone" test "$(disks_of)" = '["hdd1"]'
check "media is on hdd1 alone" \
	test "$(cwctl --json part show media | jq -c '[.per_disk[].disk]')" = '["hdd1"]'
rt1=$(rt_on hdd1)
check "hdd1 serves the stream as real-time" wait_for "real-time requests on hdd1" 20 \
	bash -c '[ "$("$0" --socket "$1" --json stats | jq "[.disks[] | select(.disk == \"hdd1\") | .rt_requests] | add")" -ge $(("$2" + 4)) ]' \
	"$CWCTL" "$CTL_SOCK" "$rt1"
wait "$play"; rc=$?
summary=$(tail -n1 "$d/s0.json" | jq -c .summary)
rt=$(cwctl --json stats | jq '[.disks[].rt_requests] | add')
missed=$(misses)
resv_missed=$(cwctl --json stats | jq "[.reservations[] | select(.id == $rid) | .misses] | add")
echo "move of ${MB} MiB in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s" \
	"beside the stream; real-time requests $rt (hdd0 $(rt_on hdd0), hdd1 $(rt_on hdd1))," \
	"missed $missed (reservation: $resv_missed); cwstream: $summary"
check "cwstream played (exit 0 or 4)" test "$rc" -eq 0 -o "$rc" -eq 4
blocks=$(jq .blocks <<<"$summary")
want=$(awk -v r="$rate" -v s="$secs" 'BEGIN { printf "%d", 0.9 * r * s / 262144 }')
check "the stream kept its rate: $blocks blocks, $want at least" test "$blocks" -ge "$want"
ctl_no_miss "the daemon missed no deadline" "$missed"
ctl_no_miss "nor the reservation" "$resv_missed"

# ---- kill -9 in the middle of a move of the reserved range ----
out=$(cwctl --json part move media --disks hdd0 --policy single)
mid=$(jq -e .id <<<"$out")
check "the move back runs" jq -e '.state == "running"' <<<"$out"
kill -9 "$CTL_PID"; wait "$CTL_PID" 2>/dev/null
check "the daemon restarts" ctl_start "$d" --no-export-all --emulate hdd7200
both=$(disks_of)
state=$(state_of "$mid")
echo "after kill -9: move $mid $state, reservation $rid on $both"
check "the move is unfinished or done after the restart" \
	bash -c '[ "$0" = running ] || [ "$0" = done ]' "$state"
if [ "$state" = running ]; then
	check "and the reservation is still on both disks" test "$both" = '["hdd0","hdd1"]'
fi
check "the move finishes" cwctl move list --watch --interval 0.2
check "it is done" test "$(state_of "$mid")" = done
check "the reservation is on hdd0 alone" test "$(disks_of)" = '["hdd0"]'
play_ok "the stream plays again after the restart" "nbd+unix:///s0?socket=$CTL_NBD" 2s
ctl_no_miss "without a missed deadline" "$(misses)"

# ---- a reservation made while a move takes its range elsewhere ----
out=$(cwctl --json part move media --disks hdd1 --policy single)
mid=$(jq -e .id <<<"$out")
check "a move to hdd1 runs" jq -e '.state == "running"' <<<"$out"
rid2=$(cwctl --json resv create media --rate "$rate" --block $BLOCK | jq -e .id)
check "a reservation over the range it takes is admitted at once" test -n "$rid2"
# The reservation first, then the move's state: a move still running
# after the reservation was read was running when it was read (read the
# other way round, a move that ended in between looked unfinished).
shown=$(cwctl --json resv show "$rid2")
state=$(state_of "$mid")
disks2=$(jq -c '[.per_disk[].disk] | sort' <<<"$shown")
echo "made while move $mid ran ($state): reservation $rid2 on $disks2"
if [ "$state" = running ]; then
	check "booked on both disks" test "$disks2" = '["hdd0","hdd1"]'
	check "for that move" test "$(jq .move <<<"$shown")" = "$mid"
fi
# Twice the most one disk admitted alone: not on both sides either.
out=$(cwctl --json resv create media --rate "$hi" --block $BLOCK 2>&1)
echo "a stream of $hi B/s: $(jq -r .message <<<"$out")"
if [ "$(state_of "$mid")" = running ]; then
	check "one that does not fit on both sides is refused" jq -e '.code == "refused"' <<<"$out"
	check "naming the move" \
		jq -e --arg m "$mid" '.message | test("with its blocks on both sides of move " + $m)' \
		<<<"$out"
fi
check "export it bound to the new reservation" cwctl export add media --name s1 --resv "$rid2"
play_ok "it plays while the move runs, without a miss" "nbd+unix:///s1?socket=$CTL_NBD" 6s
check "the move finishes" cwctl move list --watch --interval 0.2
check "it is done" test "$(state_of "$mid")" = done
check "the new reservation is on hdd1 alone" \
	wait_for "its booking to settle" 10 \
	bash -c '[ "$("$0" --socket "$1" --json resv show "$2" | jq -c "[.per_disk[].disk]")" = "[\"hdd1\"]" ]' \
	"$CWCTL" "$CTL_SOCK" "$rid2"
ctl_no_miss "and no deadline was missed" "$(misses)"
check "the server stops" ctl_stop
