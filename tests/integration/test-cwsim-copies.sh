#!/usr/bin/env bash
# Description: cwsim's copies = 2 lays its partitions out with the pool's
# placement (cw_part_create --copies, one core): on a pool, every
# partition it makes keeps two copies; the same run of best-effort
# writes beside the same streams gives the disks more work than with one
# copy (every write reaches both copies), does every write, and the
# streams miss nothing.
# Refused with a clear error: copies = 4, and 3 copies on 2 disks.
. "$(dirname "$0")/lib.sh"
requires jq truncate

cwsim=$top_builddir/tools/cwsim
cwpool=$top_builddir/tools/cwpool
d=$cw_tmp
cat >"$d/s.scn" <<EOS
model = atlas2
disks = 2
placement = rotation
policy = delta-l
duration_s = 10
video = mix
clip_blocks = 12
be_partitions = 2
be_rate = 40
be_write_pct = 100
EOS

sim_pool "$d/one.db" atlas2 2 || exit 1
mkdir "$d/two" && sim_pool "$d/two/two.db" atlas2 2 || exit 1
check "cwsim setup with copies = 2" sh -c "'$cwsim' setup '$d/s.scn' --set 'pool=$d/two/two.db' \
	--set copies=2 -o '$d/trace.csv' >'$d/setup.json'"
check "its partitions keep two copies" sh -c "'$cwpool' list '$d/two/two.db' | grep '^part be1 ' |
	grep -q ' 2 copies'"
n=$(jq '.streams | length' "$d/setup.json")
check "runs with 1 copy and with 2" sh -c "'$cwsim' run '$d/s.scn' --json --set 'pool=$d/one.db' \
	--set streams=$n --set 'be=csv:$d/trace.csv' >'$d/one.json' &&
	'$cwsim' run '$d/s.scn' --json --set 'pool=$d/two/two.db' --set copies=2 \
	--set streams=$n --set 'be=csv:$d/trace.csv' >'$d/two.json'"
check "streams miss nothing with copies" jq -e '.rt_misses == 0 and .be_done > 0' "$d/two.json"
check "every write done, as with one copy" test "$(jq -n --slurpfile a "$d/one.json" \
	--slurpfile b "$d/two.json" '$a[0].be_done == $b[0].be_done')" = true
# (the streams' reads are most of the disks' time: the writes' second
# copies add a tenth of it and more)
check "every write reaches both copies: more disk time" test "$(jq -n \
	--slurpfile a "$d/one.json" --slurpfile b "$d/two.json" \
	'($b[0].utilisation | add) > ($a[0].utilisation | add) + 0.1')" = true
check "copies = 4 refused" sh -c "! '$cwsim' run '$d/s.scn' --set copies=4 2>'$d/err4' &&
	grep -q 'copies' '$d/err4'"
check "3 copies on 2 disks refused" sh -c "! '$cwsim' run '$d/s.scn' --set copies=3 2>'$d/err3' &&
	grep -q '3 copies need 3 disks' '$d/err3'"
