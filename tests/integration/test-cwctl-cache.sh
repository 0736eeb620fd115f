#!/usr/bin/env bash
# Description: an SSD cache on a live daemon.  A partition on hdd0 gets
# 16 MiB of ssd0 as its cache (refused with the free space when it does
# not fit, and for a partition on SSDs); regions read often are promoted
# and then served from the SSD; every region reads its pattern with the
# cache on and off.  Write-through keeps the HDD up to date; write-back
# writes cached regions to the SSD only, and a kill -9 under a verified
# write load loses nothing: after the restart every acknowledged write
# reads back and the armed blocks are written back.  --off demotes and
# gives the space back; cwctl stats shows the cache.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq truncate qemu-io

d=$cw_tmp
REGIONS=32	# MiB regions written and checked
HOT=6		# the first HOT regions are read often
ctl_start "$d" --no-export-all
uri="nbd+unix:///media?socket=$CTL_NBD"

check "part create media on hdd0" cwctl part create media --size 64M --policy single --disk hdd0
check "export media" cwctl export add media
for r in $(seq 0 $((REGIONS - 1))); do
	echo 1 >"$d/acked.$r"; echo 1 >"$d/flying.$r"
done
check "write the first patterns" qemu-io -f raw -c "write -P 1 0 ${REGIONS}M" "$uri"

verify() { ctl_verify "$d" "$uri" "$REGIONS"; }
# Reads the hot regions a few times each, in one qemu-io.
heat() {
	local cmds=() r k
	for k in 1 2 3 4; do
		for r in $(seq 0 $((HOT - 1))); do cmds+=(-c "read $((r * 1048576)) 1M"); done
	done
	qemu-io -f raw "${cmds[@]}" "$uri" >/dev/null
}
cache_field() { cwctl --json stats | jq -r ".caches[] | select(.part == \"media\") | .$1"; }
promoted() { heat; [ "$(cache_field promotions)" -ge "$1" ]; }
writer() { ctl_writer "$d" "$uri" $((HOT + 2)); }

# ---- refusals ----
check "a partition on the SSD" cwctl part create fast --size 8M --tier ssd
check "a cache for it is refused" test "$(ctl_code cwctl part cache fast --size 4M)" = bad-request
check "delete fast" cwctl part delete fast
check "more than ssd0 holds is refused: no space" test "$(ctl_code cwctl part cache media --size 1G)" = no-space
refusal=$(cwctl --json part cache media --size 1G 2>&1 >/dev/null)
check "the refusal has the numbers" bash -c 'echo "$0" | jq -e ".details.available_bytes > 0 and .details.available_bytes < 1073741824"' "$refusal"
check "a bad mode is a usage error" bash -c '! "$0" --socket "$1" part cache media --size 4M --mode sideways 2>/dev/null' "$CWCTL" "$CTL_SOCK"

# ---- write-through ----
out=$(cwctl --json part cache media --size 16M)
check "part cache --json says the size and mode" bash -c 'echo "$0" | jq -e ".size == 16777216 and .mode == \"write-through\""' "$out"
check "the text form says so too" bash -c '"$0" --socket "$1" part cache media --size 16M | grep -q "SSD cache 16M, write-through"' "$CWCTL" "$CTL_SOCK"
check "hot regions promoted" wait_for "hot regions promoted" 60 promoted "$HOT"
heat
check "reads of them hit the cache" test "$(cache_field hits)" -ge $((HOT * 4))
check "stats shows the cache" bash -c '"$0" --socket "$1" stats | grep -q "^media  *write-through"' "$CWCTL" "$CTL_SOCK"
check "every region reads its pattern with the cache on" verify
check "a write to a cached region" qemu-io -f raw -c "write -P 7 0 1M" "$uri"
echo 7 >"$d/acked.0"; echo 7 >"$d/flying.0"
check "reads back" verify

# ---- write-back, kill -9 under writes ----
check "switch to write-back" cwctl part cache media --mode write-back
armed() { heat; [ "$(cache_field armed)" -gt 0 ]; }
check "the new cache promotes and arms blocks" wait_for "the new cache promotes and arms blocks" 60 armed
rm -f "$d/stop"; writer & WRITER=$!; cleanup_add "touch $d/stop; wait $WRITER 2>/dev/null"
dirty() { [ "$(cache_field dirty)" -gt 0 ]; }
check "dirty blocks" wait_for "dirty blocks" 30 dirty
kill -9 "$CTL_PID"; wait "$CTL_PID" 2>/dev/null
touch "$d/stop"; wait "$WRITER" 2>/dev/null
ctl_start "$d" --no-export-all
check "after kill -9 every acknowledged write reads back" verify
written_back() { [ "$(cache_field writebacks)" -gt 0 ]; }
check "the armed blocks written back" wait_for "the armed blocks written back" 60 written_back
check "the data is intact after the write-back" verify

# ---- off ----
check "cache off" cwctl part cache media --off
gone() { [ "$(cwctl --json stats | jq '.caches | length')" = 0 ]; }
check "the cache gone" wait_for "the cache gone" 60 gone
check "every region reads its pattern with the cache off" verify
check "the server stops cleanly" ctl_stop
