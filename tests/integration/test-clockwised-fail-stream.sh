#!/usr/bin/env bash
# Description: a disk fails in the middle of the streams that were
# admitted to survive it.  Three disks that keep an HDD's time: hdd0 and
# hdd1 hold a 2-copy partition of media, hdd2 is a spare; hdd1 goes
# through the fault engine, which fails every request of the disk once a
# file exists (fail-file).  Two streams with --survive 1, at 80% of the
# largest such stream between them, play the media through their exports
# (cwstream, at their rate); fio reads another 2-copy partition at random
# (best effort) and a verified writer overwrites 1 MiB regions of a third
# (records of what was acknowledged).  Then hdd1 fails: its requests
# return EIO, the partitions are degraded (the log says so), after a few
# failures the disk is taken for gone and the spare takes its place, and
# the mover rebuilds every lost copy there in the slack.  Checked: the
# streams kept their rate and neither they nor the daemon missed a
# deadline (ctl_no_miss judges any miss line), the rebuild finished and
# no partition is degraded, every acknowledged write reads back, and a
# scrub of each partition finds both copies byte-equal.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires fio jq qemu-io
CWSTREAM=$top_builddir/tools/cwstream
d=$cw_tmp
MB=${CW_FAIL_STREAM_MB:-32}
BLOCK=262144
NSTREAM=2
PLAY=25

pool=$d/pool
mkdir -p "$pool"
check "a pool" "$top_builddir/tools/cwpool" create "$pool/pool.db"
# written out: a write into a hole of a sparse file makes its fdatasync
# commit the file system's journal, a stall no model knows
for i in hdd0 hdd1 hdd2; do
	check "disk $i" dd if=/dev/zero of="$pool/$i.img" bs=1M count=$((MB * 3 + 64)) oflag=direct \
		status=none
	check "in the pool" "$top_builddir/tools/cwpool" add-disk "$pool/pool.db" "$pool/$i.img" hdd "$i"
done
disk() { echo "{ path = \"$pool/$1.img\"; name = \"$1\"; emulate = \"hdd7200\";${2:+ fault = \"$2\";} }"; }
CTL_RT_LOCK=-x	# its streams beside no other daemon of the suite (ctl_start)
ctl_start "$pool" --no-export-all \
	--conf "disks = ( $(disk hdd0), $(disk hdd1 "fail-file=$pool/hdd1.dead"), $(disk hdd2) );"
check "hdd2 is a spare" cwctl disk set hdd2 --spare
check "media in 2 copies" cwctl part create media --size "${MB}M" --copies 2
check "scratch in 2 copies" cwctl part create scratch --size 16M --copies 2
check "rec in 2 copies" cwctl part create rec --size 8M --copies 2
check "record media" ctl_fill media "${MB}M"
check "fill scratch" ctl_fill scratch 16M
check "fill rec" ctl_fill rec 8M
check "export scratch" cwctl export add scratch
check "export rec" cwctl export add rec

lo=$(ctl_largest media $BLOCK 2 --survive 1)
check "a surviving stream is admitted" test "$lo" -gt 0
rate=$((lo * 8 / 10 / NSTREAM))
ids=()
for i in $(seq 0 $((NSTREAM - 1))); do
	id=$(cwctl --json resv create media --rate "$rate" --block $BLOCK --survive 1 | jq -e .id)
	check "stream $i of $rate B/s admitted with --survive 1" test -n "$id"
	ids+=("$id")
	check "exported as s$i" cwctl export add media --name "s$i" --resv "$id"
done
echo "the largest surviving stream: $lo B/s; $NSTREAM of $rate B/s play"

misses() { cwctl --json stats | jq '[.disks[].rt_misses] | add'; }
resv_misses() { cwctl --json stats | jq "[.reservations[] | select(.id == $1) | .misses] | add // 0"; }
pids=()
for i in "${!ids[@]}"; do
	"$CWSTREAM" play "nbd+unix:///s$i?socket=$CTL_NBD" --rate "$rate" --block $BLOCK \
		--offset $(((MB << 20) / NSTREAM * i / BLOCK * BLOCK)) --duration "${PLAY}s" \
		--json --quiet >"$d/s$i.json" 2>"$d/s$i.err" &
	pids+=($!)
	cleanup_add "kill ${pids[$i]} 2>/dev/null"
done
fio --name=be --ioengine=nbd --uri="nbd+unix:///scratch?socket=$CTL_NBD" --rw=randread \
	--bs=64k --iodepth=4 --runtime=3600 --time_based >/dev/null 2>&1 &
load=$!
cleanup_add "kill $load 2>/dev/null"
mkdir -p "$d/w"
ctl_writer "$d/w" "nbd+unix:///rec?socket=$CTL_NBD" 8 &
writer=$!
cleanup_add "touch $d/w/stop; kill $writer 2>/dev/null"
check "the streams play" wait_for "real-time requests" 20 \
	bash -c '[ "$("$0" --socket "$1" --json stats | jq "[.disks[].rt_requests] | add")" -ge 8 ]' \
	"$CWCTL" "$CTL_SOCK"
sleep 3

log_at=$(wc -l <"$CTL_LOG")
id1=$(cwctl --json disk list | jq -r '.[] | select(.name == "hdd1") | .id')
t0=$(date +%s.%N)
touch "$pool/hdd1.dead"
check "hdd1 is taken for gone and the spare replaces it" wait_for "the spare" 60 bash -c \
	"tail -n +$((log_at + 1)) '$CTL_LOG' | grep -q 'disk hdd1 is gone: spare hdd2 replaces it'"
check "the log says the partitions are degraded" \
	bash -c "tail -n +$((log_at + 1)) '$CTL_LOG' | grep -q 'partition .* degraded'"
check "the rebuild finishes" cwctl move list --watch --interval 0.5
t1=$(date +%s.%N)
moves=$(cwctl --json move list)
check "every copy of hdd1 was rebuilt" jq -e --argjson id "$id1" \
	'[.[] | select(.kind == "replace" and .disk_id == $id)] | length > 0 and all(.state == "done")' \
	<<<"$moves"
echo "hdd1 failed; rebuilt on hdd2 in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s:" \
	"$(jq -c --argjson id "$id1" '[.[] | select(.disk_id == $id) | {part, bytes_copied, elapsed_s}]' \
		<<<"$moves")"
for p in media scratch rec; do
	check "$p is no longer degraded" \
		test "$(cwctl --json part show "$p" --all | jq .degraded)" = false
done
check "the streams still play" kill -0 "${pids[@]}"

for i in "${!pids[@]}"; do
	wait "${pids[$i]}"; rc=$?
	summary=$(tail -n1 "$d/s$i.json" | jq -c .summary)
	echo "s$i: cwstream exit $rc: $summary"
	if [ "$rc" -eq 4 ] && [ "$(resv_misses "${ids[$i]}")" -eq 0 ] &&
		ctl_misses_hosts "$summary" 0 "$log_at"; then
		check "s$i played to its end (its misses are the host's)" true
	else
		check "s$i played to its end without a miss" test "$rc" -eq 0
	fi
	blocks=$(jq .blocks <<<"$summary")
	want=$(awk -v r="$rate" -v s="$PLAY" -v b=$BLOCK 'BEGIN { printf "%d", 0.9 * r * s / b }')
	check "s$i kept its rate: $blocks blocks, $want at least" test "$blocks" -ge "$want"
	ctl_no_miss "the daemon missed none of s$i's deadlines" "$(resv_misses "${ids[$i]}")"
done
ctl_no_miss "the daemon missed no deadline" "$(misses)"
kill -INT "$load" 2>/dev/null
wait "$load"
touch "$d/w/stop"
wait "$writer"
check "every acknowledged write reads back" ctl_verify "$d/w" "nbd+unix:///rec?socket=$CTL_NBD" 8
for p in media scratch rec; do
	out=$(cwctl --json part scrub "$p" --watch | tail -n1)
	check "a scrub of $p finds both copies equal" jq -e '.state == "done" and .differ == 0' <<<"$out"
done
check "hdd1 holds no copy any more" test "$(cwctl --json part show media --all |
	jq '[.per_disk[] | select(.disk == "hdd1")] | length')" -eq 0
check "the server stops" ctl_stop
