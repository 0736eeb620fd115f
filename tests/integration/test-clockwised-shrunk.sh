#!/bin/bash
# Description: a disk file truncated under clockwised is never written
# past its end: the next request on it (a write into data, a write to a
# hole, which zeros the rest of its block first, a read) fails with EIO
# and the log says why, once, while the other disk goes on serving; the
# file keeps the size it was cut to.  At the next start the disk is
# found shrunk (sizes in the log, "shrunk" in cwctl disk list) and its
# partition is not served, until the file is whole again.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires qemu-io nbdinfo jq truncate stat
cwctl() { "$top_builddir/tools/cwctl" --socket "$cw_tmp/control" "$@"; }
size() { stat -c %s "$cw_tmp/a.disk"; }

check "pool" cwd_pool 64M a b
check "partition on a" cwd_part here 16M single 1
check "partition on b" cwd_part there 16M single 2
cwd_conf
cwd_start
check "4M written to here" qemu-io -f raw -c 'write -P 0x33 0 4M' -c flush "$(cwd_uri here)"
check "cut a.disk to 8M" truncate -s 8M "$cw_tmp/a.disk"
expect_fail "a write into its data fails" qemu-io -f raw -c 'write -P 0x44 0 64k' "$(cwd_uri here)"
expect_fail "a write to a hole past the cut fails" qemu-io -f raw -c 'write -P 0x44 12M 64k' "$(cwd_uri here)"
expect_fail "WRITE_ZEROES fails" qemu-io -f raw -c 'write -z 10M 1M' "$(cwd_uri here)"
expect_fail "a read of what is left fails too" qemu-io -r -f raw -c 'read 0 64k' "$(cwd_uri here)"
check "the file was not written past its end" test "$(size)" -eq $((8 << 20))
check "the log says why, once" test "$(grep -c 'disk a (.*) shrank under the daemon: it is 8388608 bytes, its blocks need 67108864' "$(cwd_log)")" -eq 1
check "the other disk still serves" qemu-io -f raw -c 'write -P 0x55 0 1M' -c 'read -P 0x55 0 1M' "$(cwd_uri there)"
check "stop" cwd_stop

cwd_start
check "at start: shrunk, with the sizes" grep -q 'disk a (.*) shrank: it is 8388608 bytes, its blocks need 67108864' "$(cwd_log)"
check "cwctl disk list: shrunk" test "$(cwctl --json disk list | jq -r '.[] | select(.name == "a") | .state')" = shrunk
check "here is not served" bash -c '! nbdinfo --size "$0" 2>/dev/null' "$(cwd_uri here)"
check "there is" qemu-io -f raw -r -c 'read -P 0x55 0 1M' "$(cwd_uri there)"
check "still 8M" test "$(size)" -eq $((8 << 20))
check "stop" cwd_stop
check "made whole again (the cut data is gone: zeros)" truncate -s 64M "$cw_tmp/a.disk"
cwd_start
check "here is served again" qemu-io -f raw -r -c 'read -P 0x33 0 4M' "$(cwd_uri here)"
check "stop" cwd_stop
