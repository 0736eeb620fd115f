#!/usr/bin/env bash
# Description: a move with nothing to copy.  Moving a partition to where
# its blocks already lie (its own disk, the same policy) is journalled as
# done with 0 blocks, and the command says so and succeeds: it used to be
# refused ("Operation already in progress", the resume of a finished move)
# while the finished record stayed in the move list.  The next real move
# of that partition is not refused either.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq qemu-io

ctl_start "$cw_tmp" --no-export-all
check "part create vol on hdd0" cwctl part create vol --size 8M --policy single --disk hdd0
check "write it" ctl_fill vol 8M
out=$(cwctl --json part move vol --disks hdd0 --policy single 2>&1)
rc=$?
echo "$out"
check "a move onto its own disk succeeds" test "$rc" -eq 0
check "it is done with nothing copied" \
	jq -e '.state == "done" and .blocks == 0' <<<"$out"
check "the list shows that one move, done" \
	test "$(cwctl --json move list | jq -c '[.[] | .state]')" = '["done"]'
check "a real move then runs" cwctl part move vol --disks hdd1 --policy single
check "and ends with 8 blocks on hdd1" wait_for "the move" 30 bash -c \
	"cwctl --json move list | jq -e '.[-1] | .state == \"done\" and .blocks == 8'"
check "the server stops" ctl_stop
