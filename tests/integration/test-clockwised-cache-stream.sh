#!/usr/bin/env bash
# Description: rule 2 for an SSD cache.  On disks that keep an HDD's and
# an SSD's time, a partition on hdd0 with an SSD cache gets a reservation:
# admission books it on ssd0 too (a cached block is read there and written
# to both), so the cache takes its blocks.  cwstream plays it, wrapping
# round the partition: its blocks are promoted while it plays, later passes
# read them from the SSD as real-time, and neither the daemon nor cwstream
# counts a missed deadline.  The booking survives a restart, and goes when
# the cache does.  On a pool whose SSD is as slow as an HDD, a stream the
# HDDs share does not fit on the SSD: its range stays out of the cache,
# and resv show, part cache, stats and the log (once) say why.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq qemu-io
CWSTREAM=$top_builddir/tools/cwstream
d=$cw_tmp
BLOCK=256K

CTL_RT_LOCK=-x	# its stream beside no other daemon of the suite (ctl_start)
ctl_cached_media "$d" ssd --policy single --disk hdd0

max=$(ctl_max_rate media $BLOCK)
rate=$((max / 4))
[ $rate -le 4000000 ] || rate=4000000
rid=$(cwctl --json resv create media --rate "$rate" --block $BLOCK | jq -e .id)
check "a stream of $rate B/s admitted on media" test -n "$rid"
disks_of() { cwctl --json resv show "$1" | jq -c '[.per_disk[].disk] | sort'; }
cache_of() { cwctl --json stats | jq -c ".caches[] | select(.part == \"$1\")"; }
rt_on() { cwctl --json stats | jq "[.disks[] | select(.disk == \"$1\") | .rt_requests] | add // 0"; }
check "booked on hdd0 and on the cache's disk" test "$(disks_of "$rid")" = '["hdd0","ssd0"]'
check "for its cache copies" \
	jq -e '.cache == "booked" and ([.per_disk[] | select(.cache) | .disk] == ["ssd0"])' \
	<<<"$(cwctl --json resv show "$rid")"
check "resv show says so" grep -q "ssd0 (cache)" <<<"$(cwctl resv show "$rid")"
check "nothing of it is pinned" jq -e '.pinned == []' <<<"$(cache_of media)"
check "export it bound to the reservation" cwctl export add media --name s0 --resv "$rid"

secs=16
"$CWSTREAM" play "nbd+unix:///s0?socket=$CTL_NBD" --rate "$rate" --block $BLOCK \
	--duration "${secs}s" --json --quiet >"$d/s0.json" 2>"$d/s0.err"
rc=$?
summary=$(tail -n1 "$d/s0.json" | jq -c .summary)
cache=$(cache_of media)
missed=$(cwctl --json stats | jq '[.disks[].rt_misses] | add')
resv_missed=$(cwctl --json stats | jq "[.reservations[] | select(.id == $rid) | .misses] | add")
echo "stream of $rate B/s for ${secs}s over 16 MiB, all of it reserved: cache" \
	"$(jq -c '{promotions, hits, misses, hit_ratio, refused_reserved}' <<<"$cache");" \
	"real-time requests hdd0 $(rt_on hdd0), ssd0 $(rt_on ssd0); missed $missed" \
	"(reservation: $resv_missed); cwstream: $summary"
check "cwstream saw every block on time (exit 0)" test "$rc" -eq 0
check "cwstream counts no miss" jq -e '.misses == 0' <<<"$summary"
check "the reserved blocks were promoted" jq -e '.promotions > 0' <<<"$cache"
check "and read from the cache" jq -e '.hits > 0' <<<"$cache"
check "none was refused" jq -e '.refused_reserved == 0' <<<"$cache"
check "the SSD served the stream as real-time" test "$(rt_on ssd0)" -gt 0
ctl_no_miss "the daemon missed no deadline" "$missed"
ctl_no_miss "nor the reservation" "$resv_missed"

check "a restart" ctl_stop
check "the daemon restarts" ctl_start "$d" --no-export-all --emulate hdd7200 --emulate-ssd ssd
check "the reservation is still booked on the SSD" test "$(disks_of "$rid")" = '["hdd0","ssd0"]'
check "and not refused" jq -e '.cache == "booked"' <<<"$(cwctl --json resv show "$rid")"
check "the cache goes" cwctl part cache media --off
check "and with it the booking on ssd0, once its blocks are demoted" \
	wait_for "the booking to leave ssd0" 20 \
	bash -c '[ "$("$0" --socket "$1" --json resv show "$2" | jq -c "[.per_disk[].disk]")" = "[\"hdd0\"]" ]' \
	"$CWCTL" "$CTL_SOCK" "$rid"
check "the server stops" ctl_stop

# ---- an SSD that cannot take the stream ----
s=$d/slow
mkdir -p "$s"
ctl_cached_media "$s" hdd7200 --policy rotation --tier hdd
# In 1 MiB blocks: the SSD, serving every one (each HDD every other),
# holds about a third of what the HDDs do.
BLOCK=1M
max=$(ctl_max_rate media $BLOCK)
rate=$((max / 2))
rid=$(cwctl --json resv create media --rate "$rate" --block $BLOCK | jq -e .id)
check "a stream of $rate B/s admitted on hdd0 and hdd1" test "$(disks_of "$rid")" = '["hdd0","hdd1"]'
show=$(cwctl --json resv show "$rid")
echo "slow SSD: $(jq -r .cache_refused <<<"$show")"
check "its cache booking is refused" jq -e '.cache == "refused"' <<<"$show"
check "with admission's reason, naming the SSD" \
	jq -e '.cache_refused | test("with its blocks cached on disk ssd0, reservation [0-9]+ would be refused on disk ssd0: ")' \
	<<<"$show"
check "its range is pinned, and says why" \
	jq -e --argjson id "$rid" '.pinned | length == 1 and .[0].resv == $id and (.[0].why | test("ssd0"))' \
	<<<"$(cache_of media)"
check "part cache says it too" grep -q "reservation $rid (bytes 0..16777216 of media) stays off the SSD: with its blocks cached" \
	<<<"$(cwctl part cache media --mode write-through)"
check "the log says it once" test "$(grep -c "reservation $rid on media stay off the SSD" "$CTL_LOG")" -eq 1
check "export it bound to the reservation" cwctl export add media --name s0 --resv "$rid"
before=$(cwctl --json stats | jq '[.disks[].rt_misses] | add')
log_at=$(wc -l <"$CTL_LOG")
"$CWSTREAM" play "nbd+unix:///s0?socket=$CTL_NBD" --rate "$rate" --block $BLOCK --duration 6s \
	--json --quiet >"$s/play.json"; rc=$?
summary=$(tail -n1 "$s/play.json" | jq -c .summary)
missed=$(($(cwctl --json stats | jq '[.disks[].rt_misses] | add') - before))
echo "slow SSD: cwstream (exit $rc): $summary"
if [ "$rc" -eq 4 ] && ctl_misses_hosts "$summary" "$missed" "$log_at"; then
	check "it plays on the HDDs (its misses are the host's)" true
else
	check "it plays on the HDDs" test "$rc" -eq 0
fi
cache=$(cache_of media)
echo "slow SSD, pinned: cache $(jq -c '{promotions, hits, refused_reserved}' <<<"$cache")"
check "nothing of it was promoted" jq -e '.promotions == 0 and .hits == 0' <<<"$cache"
check "its blocks were refused" jq -e '.refused_reserved > 0' <<<"$cache"
ctl_no_miss "no deadline missed" "$(cwctl --json stats | jq '[.disks[].rt_misses] | add')"
check "the server stops" ctl_stop
