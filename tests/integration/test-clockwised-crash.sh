#!/bin/bash
# Description: data acknowledged after a flush (or with FUA) survives
# kill -9 of the daemon and a restart.
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
