#!/usr/bin/env bash
# Description: the overrun watch in simulation, as in clockwised (one
# library call for both).  Disks behind a bus slower than their model
# take longer than the model admits: at a load that leaves room, the
# watch raises the model's margin and the disks' streams are planned again
# with the larger C; at the most the admission test takes, no larger
# margin fits and the disks give best effort no more slack.  Either way no
# deadline is missed.  A disk whose model holds is left alone.
. "${top_srcdir:-.}/tests/integration/lib.sh"
requires jq

cwsim=${top_builddir:-.}/tools/cwsim
scn=$cw_tmp/slow-bus.scn
cat >"$scn" <<EOC
model = hdd7200
disks = 2
placement = rotation
policy = delta-l
duration_s = 60
buffer_scale = 4
bus_mb_s = 60
loads = 2
EOC

run() { # OUT ARGS...: cwsim run's JSON into OUT
	local out=$1
	shift
	"$cwsim" run --json "$@" >"$out" 2>"$cw_tmp/err"
}
check "room left: runs" run "$cw_tmp/room.json" --set streams=60 "$scn"
check "room left: requests overran the model" jq -e '.rt_overruns > 0' "$cw_tmp/room.json"
check "room left: the margin was raised" jq -e '.margin_raises > 0 and .margin_max_pct > 0' "$cw_tmp/room.json"
check "room left: best effort kept its slack" jq -e '.slack_stopped == 0 and .be_done > 0' "$cw_tmp/room.json"
check "room left: no deadline missed" jq -e '.rt_misses == 0' "$cw_tmp/room.json"
check "the text report says it" sh -c "'$cwsim' run --set streams=60 '$scn' 2>/dev/null |
	grep -q 'overrun watch: margin raised [1-9][0-9]* times'"

check "full: runs" run "$cw_tmp/full.json" "$scn"
check "full: no larger margin fits: best effort loses its slack" \
	jq -e '.slack_stopped > 0' "$cw_tmp/full.json"
check "full: no deadline missed" jq -e '.rt_misses == 0' "$cw_tmp/full.json"

check "a model that holds: runs" run "$cw_tmp/fast.json" --set bus_mb_s=600 --set streams=60 "$scn"
check "a model that holds: nothing raised or stopped" \
	jq -e '.rt_overruns == 0 and .margin_raises == 0 and .slack_stopped == 0' "$cw_tmp/fast.json"
