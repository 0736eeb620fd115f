#!/bin/bash
# Description: scripts/quickstart, the main job on emulated disks, run on
# the programs just built (CW_BUILD) in a scratch state directory: it
# must end well and its cwctl stats must show the job done: real-time
# requests on every disk (the stream plays what the quick start
# recorded, not holes), requests under the reservation, and an emulated
# SSD whose service time at its tail percentile stays within its charge
# (TAIL/C at most 1).
. "$(dirname "$0")/lib.sh"
requires fio nbdcopy jq
out=$cw_tmp/quickstart.out

rc=0
CW_BUILD=$top_builddir CW_STATE=$cw_tmp/state \
	bash "$top_srcdir/scripts/quickstart" >"$out" 2>&1 || rc=$?
check "the quick start ends well" test "$rc" -eq 0 || tail -n 40 "$out"

# The tables after "== cwctl stats": the disks' (DISK RT-REQS ... TAIL/C
# OVER-C) and the reservations' (RESV REQUESTS ...).
sed -n '/== cwctl stats/,/== Connecting/p' "$out" >"$cw_tmp/stats"
sed -n '/^DISK  *RT-REQS/,/^$/p' "$cw_tmp/stats" | sed '1d;/^$/d' >"$cw_tmp/disks"
sed -n '/^RESV  *REQUESTS/,/^$/p' "$cw_tmp/stats" | sed '1d;/^$/d' >"$cw_tmp/resvs"
cat "$cw_tmp/disks" "$cw_tmp/resvs"

# column NAME FIELD FILE: field FIELD of the row that starts with NAME.
column() { awk -v n="$1" -v f="$2" '$1 == n { print $f }' "$3"; }
for d in hdd0 hdd1 ssd0; do
	rt=$(column "$d" 2 "$cw_tmp/disks")
	check "$d served real-time requests (RT-REQS ${rt:-none})" test "${rt:-0}" -gt 0
done
req=$(awk 'NR == 1 { print $2 }' "$cw_tmp/resvs")
check "the stream's reservation served requests (REQUESTS ${req:-none})" test "${req:-0}" -gt 0
# TAIL/C is "RATIO@pPERCENTILE"
tail_c=$(column ssd0 10 "$cw_tmp/disks")
check "the SSD's tail stays within its charge (TAIL/C ${tail_c:-none})" \
	awk -v t="${tail_c%%@*}" 'BEGIN { exit !(t != "" && t + 0 <= 1) }'
