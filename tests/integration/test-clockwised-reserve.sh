#!/bin/bash
# Description: an export bound to a reservation sends its requests inside
# the reserved range and time span as real-time, all others as
# best-effort, and the stream meets its deadlines.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires qemu-io

check "pool" cwd_pool 64M a b
check "partition" cwd_part vol 32M rotation
cwd_conf

# The value of KEY in the newest "stats WHAT" line after a SIGUSR1.
stats_n=0
stat_of() {
	local what=$1 key=$2
	stats_n=$((stats_n + 1))
	kill -USR1 "$cwd_pid"
	wait_for "stats round $stats_n" 20 bash -c \
		"[ \$(grep -c 'stats $what:' '$(cwd_log)') -ge $stats_n ]" || return 1
	grep "stats $what:" "$(cwd_log)" | tail -1 | sed -n "s/.* $key=\([0-9]*\).*/\1/p"
}
reads() { # OFFSET: eight 64 KiB reads from there
	local c=() i
	for i in 0 1 2 3 4 5 6 7; do c+=(-c "read $(( $1 + i * 65536 )) 64k"); done
	qemu-io -f raw "${c[@]}" "$(cwd_uri vol)" >/dev/null
}

# Recorded first: a block never written is a hole, read without a disk
# access, and a stream plays what was recorded.
cwd_start
check "record" qemu-io -f raw -c 'write -P 0x5a 0 32M' "$(cwd_uri vol)"
check "stop" cwd_stop

# The range as cwctl --range takes it: START:END.
cwd_start -r vol:1M:64k,range=8M:16M
check "admitted" grep -q 'reservation vol: disk a T=' "$(cwd_log)"
check "reads inside the range" reads $((8 << 20))
check "are real-time" test "$(stat_of 'reservation vol' rt_done)" -eq 8
check "reads after the range" reads $((16 << 20))
check "are not" test "$(stat_of 'reservation vol' rt_done)" -eq 8
check "reads before the range" reads 0
check "are not either" test "$(stat_of 'reservation vol' rt_done)" -eq 8
check "a read across the range's end is best-effort" \
	qemu-io -f raw -c "read $(( (16 << 20) - 65536 )) 128k" "$(cwd_uri vol)"
check "still 8" test "$(stat_of 'reservation vol' rt_done)" -eq 8
check "no deadline missed" test "$(stat_of 'reservation vol' rt_missed)" -eq 0
check "stop" cwd_stop
stats_n=0

# The older OFFSET:LENGTH form would now name other bytes: refused, with
# the same reservation written the new way.
expect_fail "-r EXPORT:RATE:BLOCK:OFFSET:LENGTH is refused" \
	"$cwd_bin" -f -c "$cwd_cfg" -r vol:1M:64k:8M:8M
check "the refusal gives the new form" bash -c \
	"'$cwd_bin' -f -c '$cwd_cfg' -r vol:1M:64k:8M:8M 2>&1 | grep -q 'here vol:1M:64k,range=8M+8M$'"

# A span that starts in an hour: nothing is real-time yet (the range as
# START+LENGTH).
cwd_start -r vol:1M:64k,range=8M+8M,span=3600:7200
check "reads inside the range before the span" reads $((8 << 20))
check "are best-effort" test "$(stat_of 'reservation vol' rt_done)" -eq 0
check "stop" cwd_stop
