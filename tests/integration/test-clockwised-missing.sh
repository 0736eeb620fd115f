#!/bin/bash
# Description: a disk missing at start leaves its partitions unexported
# and says so, once each; the partitions on the other disks are served;
# the ready line counts the exports as cwctl export list does and says how
# many are not served; export list, part list and disk list report the
# missing disk and what it takes with it.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires nbdinfo qemu-io jq
cwctl() { "$top_builddir/tools/cwctl" --socket "$cw_tmp/control" "$@"; }

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
check "each is said once" test "$(grep -c 'partition \(gone\|both\) is not exported' "$(cwd_log)")" -eq 2
check "the ready line counts what export list lists" \
	grep -q 'ready: 3 exports (2 not served: a disk is missing)' "$(cwd_log)"
check "export list: the two are listed, not served" test "$(cwctl --json export list |
	jq -c '[.[] | [.name, .served]]')" = '[["both",false],["gone",false],["here",true]]'
check "... and in words" bash -c 'grep -q "^gone .*unavailable$" <<<"$0"' "$(cwctl export list)"
check "part list: unavailable ones" test "$(cwctl --json part list |
	jq -r '[.[] | select(.available | not) | .name] | join(",")')" = "gone,both"
check "disk list: b is missing" bash -c 'grep -q "^b .*missing" <<<"$0"' "$(cwctl disk list)"
check "stop" cwd_stop
mv "$cw_tmp/b.away" "$cw_tmp/b.disk"
cwd_start
check "back: every partition exported" bash -c \
	"nbdinfo --list '$(echo "nbd+unix:///?socket=$cwd_sock")' | grep -c '^export=' | grep -qx 3"
check "stop" cwd_stop
