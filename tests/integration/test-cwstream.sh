#!/usr/bin/env bash
# Description: cwstream against real NBD servers (nbdkit, clockwised): at a rate the
# server easily sustains every block is on time; behind nbdkit's delay
# filter, with a delay longer than the period, every block is late and
# the run says so (exit 4), unless the player asks ahead (--ahead) by
# more than the delay exceeds the period; recording writes what it says it wrote;
# --reserve books the stream through the control socket for the export's
# partition and releases it at the end.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires nbdkit jq nbdcopy cmp
CWSTREAM=$top_builddir/tools/cwstream
d=$cw_tmp

start_nbdkit() {	# SOCKET NBDKIT-ARGS...
	local sock=$1; shift
	nbdkit -f -U "$sock" -P "$sock.pid" "$@" &
	cleanup_add "kill $! 2>/dev/null; wait $! 2>/dev/null"
	wait_for "nbdkit on $sock" 20 test -S "$sock"
}

# 1. Feasible: 1 MB/s in 256K blocks from memory.  A period of 262ms:
#    only a stall of a quarter second on a busy machine makes a miss.
start_nbdkit "$d/mem" memory 64M
"$CWSTREAM" play "nbd+unix:///?socket=$d/mem" --rate 1MB/s --block 256K --duration 1.5s --json \
	> "$d/play.json"; rc=$?
check "a feasible stream exits 0" test "$rc" -eq 0
check "5 blocks played" test "$(tail -n1 "$d/play.json" | jq .summary.blocks)" -eq 5
check "no misses" test "$(tail -n1 "$d/play.json" | jq .summary.misses)" -eq 0
check "a line per block, all on time" test "$(jq -r 'select(.block != null) | .on_time' "$d/play.json" | sort -u)" = true
check "worst lateness is negative (early)" test "$(tail -n1 "$d/play.json" | jq '.summary.worst_late_ns < 0')" = true
check "jitter reported" test "$(tail -n1 "$d/play.json" | jq '.summary.jitter_ns >= 0')" = true

# 2. Recording writes the blocks: read them back and compare the stamps.
# A period of 256ms: room for a loaded machine or a sanitizer build.
"$CWSTREAM" record "nbd+unix:///?socket=$d/mem" --rate 256KB/s --block 64K --duration 1.1s -q \
	> "$d/rec.txt"; rc=$?
check "recording exits 0" test "$rc" -eq 0
check "the human summary" grep -q "^record: 4 blocks of 64K every 256ms (256KB/s), each due 256ms after its request, 0 missed" "$d/rec.txt"
nbdcopy "nbd+unix:///?socket=$d/mem" "$d/back.img"
check "block 3 carries its stamp" test "$(od -An -tu8 -j $((3 * 65536)) -N8 "$d/back.img" | tr -d ' ')" = 3
check "block 0 carries its stamp" test "$(od -An -tu8 -j 0 -N8 "$d/back.img" | tr -d ' ')" = 0

# 3. Infeasible: every read delayed 300ms, a period of 65.5ms.
start_nbdkit "$d/slow" --filter=delay memory 64M rdelay=300ms
"$CWSTREAM" play "nbd+unix:///?socket=$d/slow" --rate 4MB/s --block 256K --duration 0.5s --json \
	> "$d/slow.json"; rc=$?
check "a missed stream exits 4" test "$rc" -eq 4
blocks=$(tail -n1 "$d/slow.json" | jq .summary.blocks)
check "every block missed" test "$(tail -n1 "$d/slow.json" | jq .summary.misses)" -eq "$blocks"
check "worst lateness over 200ms" test "$(tail -n1 "$d/slow.json" | jq '.summary.worst_late_ns > 200000000')" = true
check "late blocks say so" test "$(jq -r 'select(.block != null) | .on_time' "$d/slow.json" | sort -u)" = false

# 3b. --depth: each block is requested at its release while earlier ones
#     are on their way (reads take 300ms, a period of 65.5ms: 8 blocks in
#     0.5s, so a depth of 8 keeps every one of them from waiting; at the
#     default depth of 4 the fifth would wait 300 - 4 x 65.5 = 38ms for the
#     first), so blocks are late by their round trip and none waits for the
#     one before it; --depth 1 waits, and its blocks start late.
"$CWSTREAM" play "nbd+unix:///?socket=$d/slow" --rate 4MB/s --block 256K --duration 0.5s \
	--depth 8 --json > "$d/deep.json"
check "at depth 8 every block is late by its round trip" \
	test "$(tail -n1 "$d/deep.json" | jq '.summary.miss_causes.round_trip == .summary.misses and .summary.misses > 0')" = true
check "and was requested at its release" \
	test "$(tail -n1 "$d/deep.json" | jq '.summary.worst_start_late_ns < 50000000')" = true
check "each block line has its start and round trip" \
	test "$(jq -r 'select(.block != null) | (.start_late_ns != null and .round_trip_ns >= 150000000 and .cause == "round_trip")' "$d/deep.json" | sort -u)" = true
"$CWSTREAM" play "nbd+unix:///?socket=$d/slow" --rate 4MB/s --block 256K --duration 0.5s \
	--depth 1 --json > "$d/sync.json"
check "at depth 1 blocks wait for the one before" \
	test "$(tail -n1 "$d/sync.json" | jq '.summary.worst_start_late_ns > 100000000')" = true
"$CWSTREAM" play "nbd+unix:///?socket=$d/slow" --rate 4MB/s --block 256K --depth 0 2>"$d/depth.err"; rc=$?
check "--depth 0 is bad usage" test "$rc" -eq 2
check "and says what it expects" grep -q "expected 1 to 64" "$d/depth.err"

# 3c. --ahead: a block is asked for up to the allowance before its
#     release, still due a lead after the release.  Reads take 205ms, a
#     period (and lead) of 200ms: asked at the release every block is
#     5ms late; asked ahead by the default (a quarter period, here 50ms,
#     its cap) only the first is, which cannot be asked before the stream
#     starts: the others have 45ms to spare, for a busy host's wake-ups.
start_nbdkit "$d/late" --filter=delay memory 64M rdelay=205ms
"$CWSTREAM" play "nbd+unix:///?socket=$d/late" --rate 1310720 --block 256K --duration 1.6s \
	--ahead 0 --json > "$d/at-release.json"
check "asked at its release, every block is late" \
	test "$(tail -n1 "$d/at-release.json" | jq '.summary.misses == .summary.blocks and .summary.ahead_ns == 0')" = true
"$CWSTREAM" play "nbd+unix:///?socket=$d/late" --rate 1310720 --block 256K --duration 1.6s \
	--json > "$d/ahead.json"
check "asked ahead, only the first block is late" \
	test "$(tail -n1 "$d/ahead.json" | jq '.summary.misses == 1 and .summary.blocks > 5')" = true
check "the default allowance is a quarter period" \
	test "$(tail -n1 "$d/ahead.json" | jq '.summary.ahead_ns == (.summary.period_ns / 4 | floor)')" = true
check "blocks after the first were asked for before their release" \
	test "$(jq -r 'select(.block != null and .block > 0) | .start_late_ns < 0' "$d/ahead.json" | sort -u)" = true
"$CWSTREAM" play "nbd+unix:///?socket=$d/late" --rate 2MB/s --block 256K --ahead -1ms \
	2>"$d/ahead.err"; rc=$?
check "a negative --ahead is bad usage" test "$rc" -eq 2
check "and says what it expects" grep -q "0 or more" "$d/ahead.err"

# 3b. --start-at: two players started apart begin at one instant, and
#     one told a past instant does not start.
at=$(date -d '+1.5 sec' +%s.%N)
t0=$(date +%s%N)
"$CWSTREAM" play "nbd+unix:///?socket=$d/mem" --rate 1MB/s --block 256K --duration 0.6s \
	--start-at "$at" --json >"$d/at1.json" &
p1=$!
sleep 0.5
"$CWSTREAM" play "nbd+unix:///?socket=$d/mem" --rate 1MB/s --block 256K --duration 0.6s \
	--start-at "$at" --json >"$d/at2.json"; rc=$?
wait $p1; rc1=$?
t1=$(date +%s%N)
check "both players ran" test "$rc1$rc" = 00
check "they waited for the instant (took $(((t1 - t0) / 1000000)) ms)" \
	test $(((t1 - t0) / 1000000)) -ge 1500
check "each played its blocks" \
	test "$(tail -qn1 "$d/at1.json" "$d/at2.json" | jq -s 'map(.summary.blocks) == [2, 2]')" = true
"$CWSTREAM" play "nbd+unix:///?socket=$d/mem" --rate 1MB/s --block 256K --duration 0.6s \
	--start-at "$(date -d '-2 sec' +%s.%N)" 2>"$d/past.err" >/dev/null; rc=$?
check "a past --start-at is refused" test "$rc" -eq 1
check "and says so" grep -q "in the past" "$d/past.err"
"$CWSTREAM" play "nbd+unix:///?socket=$d/mem" --rate 1MB/s --block 256K --start-at soon \
	2>"$d/at.err"; rc=$?
check "a --start-at that is no time is bad usage" test "$rc" -eq 2
check "and says what it expects" grep -q "seconds since 1970" "$d/at.err"

# 4. --reserve: the stream books its reservation on the control socket
#    for the export's partition and releases it when done.
ctl_start "$d"
check "disks" ctl_disks "$d"
check "partition" cwctl part create media --size 64M
check "export" cwctl export add media
"$CWSTREAM" play "nbd+unix:///media?socket=$CTL_NBD" --rate 1MB/s --block 256K --duration 0.6s \
	--reserve --socket "$CTL_SOCK" --json > "$d/resv.json"; rc=$?
check "a reserved stream exits 0" test "$rc" -eq 0
check "it ran under reservation 1" test "$(tail -n1 "$d/resv.json" | jq .summary.resv)" -eq 1
check "the reservation was released" test "$(cwctl --json resv list | jq length)" -eq 0
"$CWSTREAM" play "nbd+unix:///media?socket=$CTL_NBD" --rate 4GB/s --block 256K --duration 0.3s \
	--reserve --socket "$CTL_SOCK" 2> "$d/refused.err"; rc=$?
check "an inadmissible stream does not start" test "$rc" -eq 1
check "and says why" grep -q "(refused)" "$d/refused.err"
"$CWSTREAM" play "nbd+unix:///nope?socket=$d/mem" --rate 1MB/s --block 64K --reserve \
	--socket "$CTL_SOCK" 2>/dev/null; rc=$?
check "an export unknown to the server: error" test "$rc" -eq 1
"$CWSTREAM" play "nbd+unix:///?socket=$d/mem" --rate 1MB/s --block 64K --resv 7 \
	--socket "$CTL_SOCK" 2>/dev/null; rc=$?
check "an unknown --resv: error" test "$rc" -eq 1
"$CWSTREAM" play "nbd+unix:///?socket=$d/mem" --rate fast --block 64K 2>/dev/null; rc=$?
check "bad usage exits 2" test "$rc" -eq 2
