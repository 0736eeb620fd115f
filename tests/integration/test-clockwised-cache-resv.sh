#!/usr/bin/env bash
# Description: rule 2 for an SSD cache takes one path, the admission
# state's: a stream given at start with `clockwised -r` is treated as one
# made with `cwctl resv create`.  On a partition with an SSD cache, the
# -r stream is booked on the cache's disk when it is admitted (the
# start-up log names ssd0, as resv create's reply does), and resv list
# shows both alike; on an SSD too slow to carry it, its range is pinned
# out of the cache and the log says why once, as for resv create.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq qemu-io
d=$cw_tmp

# The start-up stream and the stored ones, as resv list shows them.
static_of() { cwctl --json resv list | jq -c '.[] | select(.static) | {disks, cache}'; }
stored_of() { cwctl --json resv list | jq -c ".[] | select(.id == $1) | {disks, cache}"; }
cache_of() { cwctl --json stats | jq -c ".caches[] | select(.part == \"$1\")"; }

ctl_cached_media "$d" ssd --policy single --disk hdd0
max=$(ctl_max_rate media 256K)
rate=$((max / 4))
[ $rate -le 4000000 ] || rate=4000000
show=$(cwctl --json resv create media --rate "$rate" --block 256K)
rid=$(jq -e .id <<<"$show")
check "resv create books hdd0 and ssd0 at once" \
	jq -e '[.per_disk[].disk] | sort == ["hdd0","ssd0"]' <<<"$show"
want=$(stored_of "$rid")
echo "resv create: $want"
check "resv release" cwctl resv release "$rid"
check "stop" ctl_stop

check "start with the same stream given by -r" \
	ctl_start "$d" --no-export-all --emulate hdd7200 --emulate-ssd ssd \
	--reserve "media:$rate:256K"
grep 'reservation media: ' "$CTL_LOG"
check "-r books ssd0 when it is admitted, as resv create does" \
	grep -q 'reservation media: disk ssd0 T=' "$CTL_LOG"
check "and hdd0" grep -q 'reservation media: disk hdd0 T=' "$CTL_LOG"
got=$(static_of)
echo "-r: $got"
check "resv list shows it as it showed the one resv create made" test "$got" = "$want"
check "nothing of it is pinned" jq -e '.pinned == []' <<<"$(cache_of media)"
check "stop" ctl_stop

# ---- an SSD that cannot carry the stream ----
s=$d/slow
mkdir -p "$s"
ctl_cached_media "$s" hdd7200 --policy rotation --tier hdd
max=$(ctl_max_rate media 1M)
rate=$((max / 2))
show=$(cwctl --json resv create media --rate "$rate" --block 1M)
rid=$(jq -e .id <<<"$show")
check "resv create: booked on the HDDs, the cache refused" \
	jq -e '.cache == "refused" and ([.per_disk[].disk] | sort == ["hdd0","hdd1"])' <<<"$show"
check "its range pinned" jq -e '.pinned | length == 1' <<<"$(cache_of media)"
want=$(stored_of "$rid")
check "resv release" cwctl resv release "$rid"
check "nothing pinned after release" jq -e '.pinned == []' <<<"$(cache_of media)"
check "stop" ctl_stop

check "start with the same stream given by -r" \
	ctl_start "$s" --no-export-all --emulate hdd7200 --emulate-ssd hdd7200 \
	--reserve "media:$rate:1M"
grep 'reservation media\|stay off the SSD' "$CTL_LOG"
check "-r is refused on ssd0 when it is admitted" \
	grep -q 'reservation media: its blocks stay off the SSD: with its blocks cached on disk ssd0' \
	"$CTL_LOG"
check "and booked on the HDDs alone" bash -c "! grep -q 'reservation media: disk ssd0' '$CTL_LOG'"
check "the log says so once" test "$(grep -c 'stay off the SSD' "$CTL_LOG")" -eq 1
got=$(static_of)
echo "-r: $got (resv create: $want)"
check "resv list shows it as it showed the one resv create made" test "$got" = "$want"
check "its range is pinned, and says why" \
	jq -e '.pinned | length == 1 and .[0].export == "media" and (.[0].why | test("ssd0"))' \
	<<<"$(cache_of media)"
check "stop" ctl_stop
