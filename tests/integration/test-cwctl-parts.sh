#!/usr/bin/env bash
# Description: partition sizes as an LVM user types them, against
# clockwised: --size +SIZE and -SIZE, a shrink (which discards the end)
# only with --force, size 0 refused on create and resize with a sentence,
# and a refusal changes nothing.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq

ctl_start "$cw_tmp"
size() { cwctl --json part list | jq ".[] | select(.name == \"$1\") | .size"; }
cwctl part create media --size 100M >/dev/null
check "--size +50M grows by 50M" test "$(cwctl part resize media --size +50M)" = \
	"partition media: 150M, policy rotation, tier none, zone any"
check "a shrink without --force: the sentence" test "$(cwctl part resize media --size -50M 2>&1)" = \
	"cwctl part resize: shrinking media from 150M to 100M discards its last 50M: say so with force (cwctl part resize --force) (bad-request)"
check "a refused shrink changed nothing" test "$(size media)" -eq $((150 << 20))
check "an absolute shrink needs --force too" test "$(ctl_code cwctl part resize media --size 120M)" = bad-request
check "--size -50M --force shrinks by 50M" test "$(cwctl --json part resize media --size -50M --force |
	jq .size)" -eq $((100 << 20))
check "--force may come first" test "$(cwctl --json part resize media --force --size 90M | jq .size)" -eq $((90 << 20))
check "growing needs no --force" test "$(cwctl --json part resize media --size 95M | jq .size)" -eq $((95 << 20))
check "size 0: refused" test "$(cwctl part resize media --size 0 --force 2>&1)" = \
	"cwctl part resize: a partition of 0 bytes holds nothing: delete media instead (bad-request)"
check "shrinking by all of it: refused" test "$(cwctl part resize media --size -95M --force 2>&1)" = \
	"cwctl part resize: shrinking media (95M) by 95M would leave nothing: delete it instead (bad-request)"
check "create with size 0: refused" test "$(ctl_code cwctl part create empty --size 0)" = bad-request
check "nothing was created" test "$(cwctl --json part list | jq length)" -eq 1
check "--size twice: usage" bash -c '"$0" --socket "$1" part resize media --size +1M --size 2M 2>/dev/null; test $? -eq 2' \
	"$CWCTL" "$CTL_SOCK"
check "still 95M" test "$(size media)" -eq $((95 << 20))
# A size no unit shows exactly prints in bytes, not rounded.
cwctl resv create media --rate 64KB/s --block 4K --range 0:1000001 >/dev/null
check "an odd size prints exactly" test "$(cwctl resv list | awk 'NR == 2 { print $5 }')" = \
	"0B:1000001B"
check "the server stops cleanly" ctl_stop
