#!/bin/bash
# Description: clockwised speaks systemd's notify protocol (READY=1 once the
# exports listen, STATUS=, WATCHDOG=1 at half the watchdog interval,
# STOPPING=1), and without --foreground it detaches only once it serves.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires python3 nbdinfo

check "pool" cwd_pool 16M a
check "partition" cwd_part vol 4M
cwd_conf

# A notify socket like systemd's: every datagram goes to a file.
notify=$cw_tmp/notify.sock
check "notify socket" cwd_notify_listen "$notify" "$cw_tmp/notify.log"

NOTIFY_SOCKET=$notify WATCHDOG_USEC=200000 cwd_start
check "READY=1" wait_for "READY=1" 20 grep -q '^READY=1' "$cw_tmp/notify.log"
check "STATUS says what it serves" grep -q '^STATUS=Serving 1 export' "$cw_tmp/notify.log"
check "the exports listen at READY" nbdinfo --size "$(cwd_uri vol)"
check "WATCHDOG=1 pings" wait_for "two watchdog pings" 20 \
	bash -c "[ \$(grep -c '^WATCHDOG=1' '$cw_tmp/notify.log') -ge 2 ]"
check "stop" cwd_stop
check "STOPPING=1" grep -q '^STOPPING=1' "$cw_tmp/notify.log"

# Detached: the parent exits 0 once the child serves.
check "detaches when ready" "$cwd_bin" -c "$cwd_cfg"
check "and serves" nbdinfo --size "$(cwd_uri vol)"
# (the binary may be a libtool wrapper: match the unique config path)
pid=$(pgrep -f -- "clockwised -c $cwd_cfg$")
check "one detached daemon" test -n "$pid"
cleanup_add "kill -9 $pid 2>/dev/null"
check "it stops on SIGTERM" bash -c "kill $pid && while kill -0 $pid 2>/dev/null; do sleep 0.05; done"
