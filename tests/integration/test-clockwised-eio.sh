#!/bin/bash
# Description: a disk that fails under the daemon (its file truncated, so
# reads past the new end fail) gives EIO to the requests that touch it,
# is logged with disk and offset, and everything else keeps being served.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires qemu-io

check "pool" cwd_pool 64M a b
check "partition on disk 1" cwd_part good 16M single 1
check "partition on disk 2" cwd_part bad 16M single 2
cwd_conf
cwd_start
check "write good" qemu-io -f raw -c 'write -P 0x61 0 4M' -c flush "$(cwd_uri good)"
check "write bad" qemu-io -f raw -c 'write -P 0x62 0 4M' -c flush "$(cwd_uri bad)"
# Keep the label block, drop the data.
truncate -s 1M "$cw_tmp/b.disk"
qemu-io -f raw -c 'read -P 0x62 0 64k' "$(cwd_uri bad)" >"$cw_tmp/bad.out" 2>&1
check "the failing disk's read gets EIO" grep -q 'Input/output error' "$cw_tmp/bad.out"
check "logged with disk and offset" grep -q 'disk b .*read of .* bytes at offset [0-9]* failed' "$(cwd_log)"
check "the other disk still serves" qemu-io -f raw -c 'read -P 0x61 0 4M' "$(cwd_uri good)"
check "and takes writes" qemu-io -f raw -c 'write -P 0x63 4M 1M' -c 'read -P 0x63 4M 1M' "$(cwd_uri good)"
check "the daemon is alive" kill -0 "$cwd_pid"
check "clean stop" cwd_stop
