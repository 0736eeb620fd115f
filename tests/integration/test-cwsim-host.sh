#!/usr/bin/env bash
# Description: a cwsim scenario with a host model admits streams as
# clockwised does: without one the disks alone decide; with one (1 ms of
# CPU a request, 1% of one CPU) admission stops at the host, the refusal
# says "host:" with the CPUs, fewer streams are admitted, and they need no
# more than the share; a bad host value names its line and exits 2.
. "${top_srcdir:-.}/tests/integration/lib.sh"
requires jq
cwsim=${top_builddir:-.}/tools/cwsim
t=$cw_tmp

sed -e 's/^duration_s.*/duration_s = 1/' -e 's/^placement.*/placement = rotation/' \
	-e 's/^policy.*/policy = delta-l/' "$top_srcdir/tools/scenarios/paper.scn" >"$t/disks.scn"
disks=$("$cwsim" setup "$t/disks.scn")
check "without a host model the disks refuse" jq -e '.refusal | test("disk [0-9]+: ")' <<<"$disks"
cp "$t/disks.scn" "$t/host.scn"
printf 'host_request_us = 1000\nhost_cpus = 1\nhost_share_pct = 1\n' >>"$t/host.scn"
host=$("$cwsim" setup "$t/host.scn")
check "with one the host refuses" jq -e '.refusal | test("host: the streams would need .* CPUs of real-time work")' <<<"$host"
nd=$(jq '.streams | length' <<<"$disks")
nh=$(jq '.streams | length' <<<"$host")
check "fewer streams are admitted ($nh of $nd)" test "$nh" -ge 1 -a "$nh" -lt "$nd"
# each stream needs rate/block requests a second at 1 ms each: at most
# 10 ms a second in all
check "the streams admitted fit in 1% of a CPU" \
	jq -e '[.streams[] | .rate * 1000000 / .block] | add <= 10000000' <<<"$host"
check "the next one does not" \
	jq -e '([.streams[] | .rate * 1000000 / .block] | add) + .next.rate * 1000000000 / .next.block > 10000000' <<<"$host"
printf 'host_share_pct = 101\n' >>"$t/host.scn"
"$cwsim" setup "$t/host.scn" >/dev/null 2>"$t/err"; rc=$?
check "a bad share exits 2" test "$rc" -eq 2
check "naming its line" grep -q "host.scn:$(wc -l <"$t/host.scn"): host_share_pct" "$t/err"
