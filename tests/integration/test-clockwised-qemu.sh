#!/bin/bash
# Description: qemu-io patterns (write, read, zero, FUA, flush) and
# qemu-img convert into and out of a clockwised export.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires qemu-io qemu-img

check "pool" cwd_pool 64M a b
check "partition" cwd_part vol 48M rotation
cwd_conf
cwd_start
uri=$(cwd_uri vol)
qio() { qemu-io -f raw "$@" "$uri" >"$cw_tmp/qio.out" 2>&1 && ! grep -q 'Pattern verification failed\|error' "$cw_tmp/qio.out"; }
check "write a pattern across a block boundary" qio -c 'write -P 0x5c 1020k 8k'
check "read it back" qio -c 'read -P 0x5c 1020k 8k'
check "neighbours untouched" qio -c 'read -P 0 1016k 4k' -c 'read -P 0 1028k 4k'
check "FUA write" qio -c 'write -f -P 0x11 4M 64k' -c 'read -P 0x11 4M 64k'
check "write zeroes over 3 blocks" qio -c 'write -P 0x77 10M 3M' -c 'write -z 10M 3M' -c 'read -P 0 10M 3M'
check "flush" qio -c 'write -P 0x22 20M 1M' -c 'flush' -c 'read -P 0x22 20M 1M'
expect_fail "a read past the end is refused" qio -c 'read 48M 4k'
check "the daemon still serves" qio -c 'read -P 0x22 20M 1M'

# qemu-img convert: a qcow2 image in, the export out to raw.
qemu-img create -q -f qcow2 "$cw_tmp/src.qcow2" 48M
qemu-io -f qcow2 -c 'write -P 0x3a 0 5M' -c 'write -P 0x4b 30M 7M' "$cw_tmp/src.qcow2" >/dev/null
check "convert qcow2 into the export" qemu-img convert -n -f qcow2 -O raw "$cw_tmp/src.qcow2" "$uri"
check "convert the export out to raw" qemu-img convert -f raw -O raw "$uri" "$cw_tmp/out.raw"
check "the contents match" qemu-img compare -f qcow2 -F raw "$cw_tmp/src.qcow2" "$cw_tmp/out.raw"
check "clean stop" cwd_stop
