#!/bin/bash
# Description: data acknowledged after a flush (or with FUA) survives
# kill -9 of the daemon and a restart; and a restart takes a disk only once
# the lock a daemon before it holds on the disk file is gone (what writes
# of a killed daemon still in flight keep: disk_fence).
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires qemu-io

check "pool" cwd_pool 64M a b
check "partition" cwd_part vol 32M rotation
cwd_conf
cwd_start
uri=$(cwd_uri vol)
check "write and flush" qemu-io -f raw -c 'write -P 0xa1 0 3M' -c 'write -P 0xb2 9M 1M' -c flush "$uri"
check "FUA write" qemu-io -f raw -c 'write -f -P 0xc3 20M 64k' "$uri"
check "kill -9" cwd_kill9
cwd_start
qio_ok() { qemu-io -f raw "$@" "$uri" 2>&1 | tee -a "$cw_tmp/qio.out" | grep -q 'read' &&
	! grep -q 'Pattern verification failed' "$cw_tmp/qio.out"; }
check "flushed data intact" qio_ok -c 'read -P 0xa1 0 3M' -c 'read -P 0xb2 9M 1M'
check "FUA data intact" qio_ok -c 'read -P 0xc3 20M 64k'
check "clean stop" cwd_stop
# Another process holds a disk's lock, as the open file of a killed
# daemon does while its last writes end: until the next daemon says it
# waits for it, and a second more.  (A lock held for a fixed 2 s was gone
# before the daemon, started slowly on a busy host, first tried it.)
f=$cw_tmp/a.disk
next_log=$cw_tmp/clockwised.$((cwd_run + 1)).log
timeout "$(cw_budget 30)" flock "$f" bash -c \
	'until grep -q "is locked by another process" "$0" 2>/dev/null; do sleep 0.05; done; sleep 1' \
	"$next_log" &
holder=$!
check "the disk's lock is held" wait_for "the lock" 10 bash -c "! flock -n '$f' true"
t0=$(date +%s%N)
cwd_start
waited_ms=$((($(date +%s%N) - t0) / 1000000))
echo "the start took $waited_ms ms"
check "the start waited for the lock" grep -q "a.disk is locked by another process" "$(cwd_log)"
check "and says when it came" grep -Eq "disk a: the lock on .* came after [0-9]+ ms" "$(cwd_log)"
check "the holder's time, at least" test "$waited_ms" -ge 1000
check "then serves the data" qio_ok -c 'read -P 0xa1 0 3M'
wait "$holder"
check "clean stop" cwd_stop
