#!/usr/bin/env bash
# Description: cwsim runs a move with clockwised's mover: evacuating disk 2
# of tools/scenarios/move.scn moves every block of the best-effort
# partition there to disks 0 and 1 (the move is done, the blocks are on
# the other disks, writes during it made some copies be done again), no
# stream misses a deadline, and best effort waits longer while the mover
# copies than before it and than without a move; a move re-laying the
# partition onto named disks lands there; a scenario's pool stays as it
# was (the run moves a copy); bad moves are refused with a clear error.
. "${top_srcdir:-.}/tests/integration/lib.sh"
requires jq sha256sum truncate

cwsim=${top_builddir:-.}/tools/cwsim
scn=${top_srcdir:-.}/tools/scenarios/move.scn
t=$cw_tmp
export TMPDIR=$t

check "with the move" bash -c "'$cwsim' run --json '$scn' >'$t/on.json'"
check "without" bash -c "'$cwsim' run --json --set evacuate=none '$scn' >'$t/off.json'"
jq -c .move "$t/on.json"
check "the move is done, every planned block moved" \
	jq -e '.move.blocks > 0 and .move.done == .move.blocks and .move.failed == 0 and
	       .move.end_s != null and .move.end_s > .move.start_s' "$t/on.json"
check "the blocks left disk 2 for disks 0 and 1, none lost" \
	jq -e '.move.be_blocks_per_disk[2] == 0 and
	       (.move.be_blocks_per_disk | add) == .move.blocks * 3' "$t/on.json"
check "writes during the copy made copies be done again" \
	jq -e '.move.copies > .move.done' "$t/on.json"
check "no stream misses with the move" jq -e '.rt_misses == 0 and .rt_requests > 0' "$t/on.json"
check "nor without" jq -e '.rt_misses == 0' "$t/off.json"
during=$(jq .move.be_during.mean_ms "$t/on.json")
before=$(jq .move.be_before.mean_ms "$t/on.json")
without=$(jq .be_all_mean_ms "$t/off.json")
echo "best effort's mean latency: $during ms during the move, $before ms before, $without ms without a move"
check "best effort waits longer during the move than before it" \
	awk -v a="$during" -v b="$before" 'BEGIN { exit !(a > b) }'
check "and than without a move" awk -v a="$during" -v b="$without" 'BEGIN { exit !(a > b) }'
check "no move section without a move" jq -e '.move == null' "$t/off.json"
check "the text report says it" bash -c "'$cwsim' run '$scn' | grep -q 'of 260 blocks moved, 0 failed'"

check "a re-lay onto disk 0" bash -c "'$cwsim' run --json --set 'move=be0 to 0 at 30' '$scn' >'$t/to0.json'"
check "puts every block there" \
	jq -e '.move.done == .move.blocks and .move.be_blocks_per_disk[1] == 0 and
	       .move.be_blocks_per_disk[2] == 0 and .move.be_blocks_per_disk[0] > 0' "$t/to0.json"

# On a pool: the run moves a copy; the pool stays as it was.
sim_pool "$t/pool.db" atlas2 3 || exit 1
check "cwsim setup on the pool" bash -c "'$cwsim' setup '$scn' --set 'pool=$t/pool.db' >/dev/null"
# The database's bytes, and of each disk image (sparse, gigabytes: read
# whole, it took minutes) its size, allocated blocks and change times.
pool_state() { sha256sum "$t/pool.db"; stat -c '%n %s %b %y %z' "$t"/d*.img; }
sum=$(pool_state)
check "the move on the pool" bash -c "'$cwsim' run --json --set 'pool=$t/pool.db' '$scn' >'$t/pool.json'"
check "is done" jq -e '.move.done == .move.blocks and .move.be_blocks_per_disk[2] == 0' "$t/pool.json"
check "and leaves the pool as it was" test "$(pool_state)" = "$sum"
check "no scratch left behind" bash -c "! ls -d '$t'/cwsim-* 2>/dev/null"

# Bad input: exit 2 and why.
bad() {
	local what=$1 msg=$2 rc=0
	shift 2
	"$cwsim" run "$scn" "$@" >/dev/null 2>"$t/err" || rc=$?
	check "$what: exit 2" test "$rc" = 2
	check "$what: says why" grep -q -- "$msg" "$t/err"
}
bad "a disk the scenario lacks" "the scenario has disks 0 to 2" --set "move=be to 0,5 at 10"
bad "a partition it lacks" "best-effort partitions be0 to be0" --set "move=be3 to 0 at 10"
bad "a move after the run" "starts after the run ends" --set "evacuate=1 at 1h"
bad "no time" "expected DISK at SECONDS" --set "evacuate=1"
bad "no target" "expected PART to DISK" --set "move=be at 10"
bad "a depth beyond the mover's" "mover_depth: expected 1..64" --set mover_depth=65
bad "two placements" "move: one placement" --set placement=rotation,random
