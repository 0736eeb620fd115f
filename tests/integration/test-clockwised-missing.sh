#!/bin/bash
# Description: a disk missing at start leaves its partitions unexported
# and says so; the partitions on the other disks are served.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires nbdinfo qemu-io

check "pool" cwd_pool 64M a b
check "partition on disk 1" cwd_part here 16M single 1
check "partition on disk 2" cwd_part gone 16M single 2
check "striped partition" cwd_part both 8M rotation
cwd_conf
cwd_start
check "write" qemu-io -f raw -c 'write -P 0x71 0 2M' -c flush "$(cwd_uri here)"
check "stop" cwd_stop
mv "$cw_tmp/b.disk" "$cw_tmp/b.away"
cwd_start
check "the missing disk is named" grep -q 'disk b .* missing' "$(cwd_log)"
check "its partition is named" grep -q 'partition gone is not exported' "$(cwd_log)"
check "a striped partition over it too" grep -q 'partition both is not exported' "$(cwd_log)"
nbdinfo --list "nbd+unix:///?socket=$cwd_sock" >"$cw_tmp/list" 2>&1
check "the other partition is listed" grep -q 'export="here"' "$cw_tmp/list"
expect_fail "the missing ones are not" grep -q 'export="gone"\|export="both"' "$cw_tmp/list"
check "and serves its data" qemu-io -f raw -c 'read -P 0x71 0 2M' "$(cwd_uri here)"
check "stop" cwd_stop
mv "$cw_tmp/b.away" "$cw_tmp/b.disk"
cwd_start
check "back: every partition exported" bash -c \
	"nbdinfo --list '$(echo "nbd+unix:///?socket=$cwd_sock")' | grep -c '^export=' | grep -qx 3"
check "stop" cwd_stop
