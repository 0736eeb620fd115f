#!/usr/bin/env bash
# Description: a disk model stored as a cwmodel1 line (as calibration saves
# it) drives the simulator exactly as the preset it was printed from; a
# slower model in a file admits less RT bandwidth.
. "${top_srcdir:-.}/tests/integration/lib.sh"

cwsim=${top_builddir:-.}/tools/cwsim
t=$cw_tmp

run_to() {	# FILE ARGS...: cwsim run --json ARGS into FILE
	local f=$1
	shift
	"$cwsim" run --json --preset quick --set placement=rotation --set duration_s=20 "$@" \
		>"$f" 2>/dev/null
}
load() {	# FILE -> rt_load_mb_s of its first object
	grep -o '"rt_load_mb_s": [0-9.]*' "$1" | head -1 | awk '{ print $2 }'
}

rc=0
"$cwsim" model atlas2 >"$t/atlas2.model" || rc=$?
check "cwsim model prints the preset" test "$rc" -eq 0
check "it is a cwmodel1 line" grep -q '^cwmodel1 name=atlas2 ' "$t/atlas2.model"
check "preset run" run_to "$t/preset"
check "file run" run_to "$t/file" --set "model=file:$t/atlas2.model"
check "same results from the file" cmp -s "$t/preset" "$t/file"

# every zone at half its rate: a slower disk
{
	echo '# half-speed Atlas-II'
	awk '{ for (i = 1; i <= NF; i++) {
		if ($i ~ /^zones=/) {
			n = split(substr($i, 7), z, ","); s = "zones="
			for (k = 1; k <= n; k++) { split(z[k], p, ":"); s = s (k > 1 ? "," : "") p[1] ":" int(p[2] / 2) }
			$i = s
		} else if ($i == "name=atlas2")
			$i = "name=slow"
	} print }' "$t/atlas2.model"
} >"$t/slow.model"
check "slow model run" run_to "$t/slow" --set "model=file:$t/slow.model"
a=$(load "$t/preset")
b=$(load "$t/slow")
echo "admitted: atlas2 $a MB/s, half-speed $b MB/s"
check "the slower disk admits less" awk -v a="$a" -v b="$b" 'BEGIN { exit !(b > 0 && b < a * 0.75) }'

# a bus slower than the media: the model no longer bounds the service
# times, and the simulator says so instead of hiding it
"$cwsim" run --json --preset quick --set placement=rotation --set duration_s=20 \
	--set bus_mb_s=8 --set policy=edf >"$t/bus" 2>"$t/bus.err"
check "slow bus: warned" grep -q "slower than the disk's fastest zone" "$t/bus.err"
check "slow bus: overruns counted" grep -Eq '"rt_overruns": [1-9]' "$t/bus"
check "fast bus: no overrun" grep -q '"rt_overruns": 0,' "$t/preset"
