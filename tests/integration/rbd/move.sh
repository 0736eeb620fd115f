#!/bin/bash
# Description: a partition moves onto RBD images and back while it is
# served, a local disk is evacuated onto images, and a kill -9 in the
# middle of a move to the cluster loses nothing.  A writer overwrites
# random MiB regions with a pattern per write the whole time (batches of
# qemu-io writes, each batch's plan and qemu-io's acknowledgements kept);
# after each step every region reads the last pattern acknowledged for it
# (or, after the kill, the one in flight then).
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
. "$top_srcdir/tests/integration/ceph-lib.sh"
requires qemu-io jq
ceph_setup
cwctl() { "$top_builddir/tools/cwctl" -s "$cw_tmp/control" "$@"; }

d=$cw_tmp
REGIONS=48	# MiB regions of the partition, each written and checked,
STRIDE=4	# one at the start of every 4 MiB: the writes land all along
PART=$((REGIONS * STRIDE))	# MiB: the moves take a few seconds
MB=1048576
BATCH=30	# writes per qemu-io run

check "images" ceph_image r0 256M
check "image r1" ceph_image r1 256M
check "a pool of two local disks" cwd_pool 256M l0 l1
check "a partition over them" cwd_part vol "${PART}M" rotation
check "image r0 joins the pool" "$cwpool" add-disk "$cwd_db" "$(ceph_spec r0)" rbd r0
check "image r1 joins the pool" "$cwpool" add-disk "$cwd_db" "$(ceph_spec r1)" rbd r1
cwd_conf
cwd_start
uri=$(cwd_uri vol)

# What each region holds: acked[r] for sure, maybe[r] too when a write was
# in flight at a kill.
declare -a acked maybe
for r in $(seq 0 $((REGIONS - 1))); do acked[r]=1; maybe[r]=; done
check "the first pattern" qemu-io -f raw -c "write -P 1 0 ${PART}M" "$uri"

batch=0
writer() {
	local k=$1 i r p args
	while ! test -e "$d/stop"; do
		args=()
		: >"$d/plan.$k"
		for i in $(seq 1 $BATCH); do
			r=$((RANDOM % REGIONS)); p=$(((k * BATCH + i) % 250 + 2))
			echo "$r $p" >>"$d/plan.$k"
			args+=(-c "write -P $p $((r * STRIDE * MB)) 1M")
		done
		qemu-io -f raw "${args[@]}" "$uri" >"$d/out.$k" 2>&1
		k=$((k + 1))
	done
}
start_writer() {
	rm -f "$d/stop"
	writer "$batch" &
	WRITER=$!
	cleanup_add "touch $d/stop; wait $WRITER 2>/dev/null"
}
# Folds the batches' acknowledgements into acked/maybe, in order: qemu-io
# runs its writes one after the other, so the first n of a batch's plan are
# the n it acknowledged, and the next one was in flight if it stopped.
stop_writer() {
	local n r p i
	touch "$d/stop"
	wait "$WRITER" 2>/dev/null
	while [ -e "$d/plan.$batch" ]; do
		n=$(grep -c '^wrote ' "$d/out.$batch")
		i=0
		while read -r r p; do
			i=$((i + 1))
			if [ "$i" -le "$n" ]; then
				acked[r]=$p; maybe[r]=
			elif [ "$i" -eq $((n + 1)) ]; then
				maybe[r]=$p
			fi
		done <"$d/plan.$batch"
		writes=$((writes + n))
		batch=$((batch + 1))
	done
}
reads() { qemu-io -f raw -c "read -P $1 $(($2 * STRIDE * MB)) 1M" "$uri" 2>&1 | grep -q '^read '; }
# What region $1 holds, as runs of one byte value (pattern n is byte n).
holds() {
	qemu-io -f raw -c "read -v $(($1 * STRIDE * MB)) 1M" "$uri" 2>&1 | awk '
	BEGIN { for (i = 0; i < 256; i++) h[sprintf("%02x", i)] = i }
	/^[0-9a-f]+:  / { n = split(substr($0, index($0, ":") + 3, 48), b, " ")
		for (i = 1; i <= n; i++) { v = h[b[i]]
			if (at == 0 || v != cur) { if (at) printf "%d..%d: %d; ", from, at - 1, cur
				cur = v; from = at }
			at++ } }
	END { if (at) printf "%d..%d: %d\n", from, at - 1, cur; else print "nothing read" }'
}
# The writes planned for region $1, oldest first: batch:pattern, with
# what qemu-io said of it (ok: acknowledged, -: in flight or not reached).
history() {
	local k n i r p out=""
	for ((k = 0; k <= batch; k++)); do
		[ -e "$d/plan.$k" ] || continue
		n=$(grep -c '^wrote ' "$d/out.$k" 2>/dev/null)
		i=0
		while read -r r p; do
			i=$((i + 1))
			[ "$r" = "$1" ] || continue
			out+="$k:$p$([ "$i" -le "${n:-0}" ] && echo ok || echo -) "
		done <"$d/plan.$k"
	done
	echo "${out% }"
}
verify() {
	local r bad=0 args=()
	for r in $(seq 0 $((REGIONS - 1))); do args+=(-c "read -P ${acked[r]} $((r * STRIDE * MB)) 1M"); done
	qemu-io -f raw "${args[@]}" "$uri" >"$d/verify" 2>&1
	for r in $(seq 0 $((REGIONS - 1))); do
		grep -q "^Pattern verification failed at offset $((r * STRIDE * MB))," "$d/verify" || continue
		if [ -n "${maybe[r]}" ] && reads "${maybe[r]}" "$r"; then
			acked[r]=${maybe[r]}
		else
			echo "region $r: not pattern ${acked[r]} (acknowledged) nor '${maybe[r]}';" \
			     "it holds (bytes: pattern) $(holds "$r"); its writes: $(history "$r")" >&2
			bad=1
		fi
	done
	for r in $(seq 0 $((REGIONS - 1))); do maybe[r]=; done
	[ "$(grep -c '^read ' "$d/verify")" -eq "$REGIONS" ] || { cat "$d/verify" >&2; bad=1; }
	return $bad
}
disks_of() { cwctl --json part show vol | jq -r '[.per_disk[] | select(.blocks > 0) | .disk] | sort | join(",")'; }
last_move() { cwctl --json move list | jq -c '.[-1] | [.state, .done == .blocks, .failed]'; }
writes=0

# ---- onto the cluster and back, online ----
check "vol starts on the local disks" test "$(disks_of)" = l0,l1
start_writer
check "part move vol --disks r0,r1" cwctl part move vol --disks r0,r1
check "the move ends" cwctl move list --watch --interval 0.2
stop_writer
echo "writes acknowledged during the move to the cluster: $writes"
check "writes went on during it" test "$writes" -gt 0
check "every block moved, none failed" test "$(last_move)" = '["done",true,0]'
check "vol is on the images alone" test "$(disks_of)" = r0,r1
check "every acknowledged write reads back" verify

writes=0
start_writer
check "part move vol --disks l0,l1" cwctl part move vol --disks l0,l1
check "the move back ends" cwctl move list --watch --interval 0.2
stop_writer
echo "writes acknowledged during the move back: $writes"
check "every block moved back, none failed" test "$(last_move)" = '["done",true,0]'
check "vol is on the local disks again" test "$(disks_of)" = l0,l1
check "every acknowledged write reads back after the move back" verify

# ---- kill -9 in the middle of a move to the cluster ----
# A paced mover (a fifth of the disks' time beside the writer, 4 blocks a
# batch), so that on a loaded host the kill still lands mid-move: at full
# speed the move could end between the poll below and the kill.
check "stop" cwd_stop
cwd_conf "mover_share = 20; mover_depth = 4;"
cwd_start
start_writer
check "a move to the cluster again" cwctl part move vol --disks r0,r1
id=$(cwctl --json move list | jq '.[-1].id')
wait_for "a few blocks moved" 60 bash -c "'$top_builddir/tools/cwctl' -s '$cw_tmp/control' --json move list |
	jq -e '.[] | select(.id == $id) | .done >= 20 or .state != \"running\"'"
done_at_kill=$(cwctl --json move list | jq ".[] | select(.id == $id) | .done")
check "kill -9 in the middle of the move" cwd_kill9
stop_writer
echo "blocks moved at the kill: $done_at_kill of $PART"
check "the kill came before the move's end" test "$done_at_kill" -lt "$PART"
cwd_conf	# the resumed move at full speed
cwd_start
# Writes of the killed daemon still in flight on a local disk: the restart
# waits for them (disk_fence) rather than let them land later.
grep -h 'lock on .* came after' "$(cwd_log)" || true
check "after the restart every acknowledged write reads back" verify
check "the move resumes by itself and ends" cwctl move list --watch --interval 0.2
check "it is done, with every block moved and none failed" \
	test "$(cwctl --json move list | jq -c ".[] | select(.id == $id) | [.state, .done == .blocks, .failed]")" = '["done",true,0]'
check "vol is on the images" test "$(disks_of)" = r0,r1
check "every acknowledged write reads back after the move" verify

# ---- evacuating a local disk onto the images ----
check "vol back onto l0 alone" cwctl part move vol --disks l0 --policy single --watch --interval 0.2
check "vol is on l0" test "$(disks_of)" = l0
free=$(cwctl --json disk list | jq '.[] | select(.name == "l1") | .free_blocks')
check "a filler takes what l1 has free" cwctl part create filler --size "${free}M" --policy single --disk l1
writes=0
start_writer
check "disk evacuate l0" cwctl disk evacuate l0 --watch --interval 0.2
stop_writer
echo "writes acknowledged during the evacuation: $writes"
check "the evacuation moved every block, none failed" test "$(last_move)" = '["done",true,0]'
check "vol went onto the images" bash -c '[[ "$0" =~ ^r[01](,r[01])?$ ]]' "$(disks_of)"
check "l0 holds nothing" test "$(cwctl --json disk list | jq '.[] | select(.name == "l0") | .blocks == .free_blocks')" = true
check "every acknowledged write reads back after the evacuation" verify
check "stop" cwd_stop
