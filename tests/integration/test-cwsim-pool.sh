#!/usr/bin/env bash
# Description: a scenario on a pool (pool = FILE) lays its streams and
# best-effort partitions out in the pool as clockwised does (whole pool
# blocks: four 256 KiB audio blocks in a row on one disk) and admits with
# the pool's admission state, best-effort reserve included, booking each
# disk as the Atlas-II it emulates (cwpool add-disk ... atlas2): cwsim setup
# makes partitions s0... and be0... in the pool, a second setup reuses them
# and prints the same, cwsim run simulates the admitted streams there
# with the ΔL the state's tasks give, and since a stream's pool blocks
# hold several of its blocks, the pool admits other streams than cwsim's
# own layout of one block per disk in turn.  Bad input: a pool that does
# not exist, one set up for another scenario (a partition of another
# size), two placements, and sweep on a pool are refused with a clear
# error and leave the pool as it was; so is a model to emulate that
# cwpool add-disk cannot parse.  (The daemon admitting the very
# streams cwsim setup admits is tests/bench/live-vs-sim's first check.)
. "$(dirname "$0")/lib.sh"
requires jq truncate sha256sum

cwsim=$top_builddir/tools/cwsim
cwpool=$top_builddir/tools/cwpool
d=$cw_tmp
sim_pool "$d/pool.db" atlas2 3 || exit 1
cat >"$d/s.scn" <<EOF
model = atlas2
placement = rotation
policy = delta-l
duration_s = 20
video = mix
clip_blocks = 12
be_partitions = 2
be_rate = 20
EOF

check "cwsim setup on the pool" sh -c "'$cwsim' setup '$d/s.scn' --set 'pool=$d/pool.db' \
	-o '$d/trace.csv' >'$d/setup1.json'"
n=$(jq '.streams | length' "$d/setup1.json")
check "it admits streams ($n) and says why not one more" \
	jq -e '(.streams | length) > 2 and (.refusal | test("refused on disk"))' "$d/setup1.json"
"$cwpool" list "$d/pool.db" >"$d/list"
check "the streams' partitions are in the pool" grep -q "^part s$((n - 1)) " "$d/list"
check "the best-effort partitions are in the pool" grep -q '^part be1 ' "$d/list"
check "a second setup reuses them and admits the same" sh -c "'$cwsim' setup '$d/s.scn' \
	--set 'pool=$d/pool.db' >'$d/setup2.json' && cmp '$d/setup1.json' '$d/setup2.json'"
check "no partition more" sh -c "'$cwpool' list '$d/pool.db' | cmp - '$d/list'"

check "cwsim run on the pool" sh -c "'$cwsim' run '$d/s.scn' --json --set 'pool=$d/pool.db' \
	--set streams=$n --set 'be=csv:$d/trace.csv' >'$d/run.json'"
check "it runs the admitted streams, and delta-l misses nothing" \
	jq -e --argjson n "$n" '.streams == $n and .rt_misses == 0 and .be_done > 0' "$d/run.json"
check "with the same ΔL on every disk of the rotation" \
	jq -e '.delta_l_ms_per_disk | (max - min) < (max / 5)' "$d/run.json"
"$cwsim" setup "$d/s.scn" >"$d/own.json"
check "cwsim's own layout admits otherwise ($(jq '.streams | length' "$d/own.json") vs $n)" \
	jq -e --argjson n "$n" '(.streams | length) != $n' "$d/own.json"

# Bad input: a clear error, nothing changed.
"$cwpool" create "$d/p2.db" >/dev/null
truncate -s 64M "$d/x.img"
rc=0
"$cwpool" add-disk "$d/p2.db" "$d/x.img" hdd x nosuchmodel >/dev/null 2>"$d/err" || rc=$?
check "cwpool: a model to emulate that does not parse: exit 2" test "$rc" = 2
check "cwpool: says which" grep -q "emulate: \"nosuchmodel\" is not a known model" "$d/err"
check "cwpool: and adds no disk" sh -c "! '$cwpool' list '$d/p2.db' | grep -q '^disk'"
sum=$(sha256sum <"$d/pool.db")
rc=0
"$cwsim" setup "$d/s.scn" --set "pool=$d/nothere.db" >/dev/null 2>"$d/err" || rc=$?
check "a missing pool: exit 2" test "$rc" = 2
check "a missing pool: says which" grep -q "nothere.db" "$d/err"
rc=0
"$cwsim" run "$d/s.scn" --set "pool=$d/pool.db" --set placement=rotation,random >/dev/null \
	2>"$d/err" || rc=$?
check "two placements: exit 2" test "$rc" = 2
check "two placements: says one" grep -q "one placement" "$d/err"
rc=0
"$cwsim" sweep "$d/s.scn" --set "pool=$d/pool.db" -o "$d/sw" >/dev/null 2>"$d/err" || rc=$?
check "sweep on a pool: exit 2" test "$rc" = 2
check "sweep on a pool: says what a pool is for" grep -q "run, setup and plan" "$d/err"
rc=0
"$cwsim" setup "$d/s.scn" --set "pool=$d/pool.db" --set clip_blocks=30 >/dev/null \
	2>"$d/err" || rc=$?
check "a pool set up for another scenario: exit 1" test "$rc" = 1
check "a pool set up for another scenario: says which partition" \
	grep -q "partition s0 holds .* another scenario" "$d/err"
check "the pool is as it was" test "$(sha256sum <"$d/pool.db")" = "$sum"
