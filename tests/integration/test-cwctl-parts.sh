#!/usr/bin/env bash
# Description: partition sizes as an LVM user types them, against
# clockwised: --size +SIZE and -SIZE; a shrink or a delete that would lose
# data written there (the holes say which blocks hold data) refused with
# how much, done with --force, which loses the blocks asked for and no
# others; blocks never written go without --force; size 0 refused on
# create and resize with a sentence, and a refusal changes nothing; part
# show names disks and lists every run with --all, in text and JSON.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq qemu-io

ctl_start "$cw_tmp"
size() { cwctl --json part list | jq ".[] | select(.name == \"$1\") | .size"; }
cwctl part create media --size 100M >/dev/null
check "--size +50M grows by 50M" test "$(cwctl part resize media --size +50M)" = \
	"partition media: 150M, policy rotation, tier none, zone any"
# 120M of data, the last 30M of it in the 50M a shrink to 100M discards.
check "120M written" ctl_fill media 120M
check "a shrink losing data without --force: the sentence" test "$(cwctl part resize media --size -50M 2>&1)" = \
	"cwctl part resize: shrinking media from 150M to 100M (its last 50M) loses 20M of data written there: say so with force (cwctl part resize --force) (bad-request)"
check "a refused shrink changed nothing" test "$(size media)" -eq $((150 << 20))
check "an absolute shrink needs --force too" test "$(ctl_code cwctl part resize media --size 110M)" = bad-request
check "a shrink of blocks never written needs no --force" test \
	"$(cwctl --json part resize media --size 120M | jq .size)" -eq $((120 << 20))
check "a shrink into the data needs --force again" test \
	"$(ctl_code cwctl part resize media --size 119M)" = bad-request
check "--size +30M grows again" test "$(cwctl --json part resize media --size +30M | jq .size)" -eq $((150 << 20))
check "--size -50M --force shrinks by 50M" test "$(cwctl --json part resize media --size -50M --force |
	jq .size)" -eq $((100 << 20))
# The data kept is the data written: the first 100M still read 0x5a.
check "the kept blocks keep their data" bash -c '
	"$0" --socket "$1" export add media --name check >/dev/null &&
	qemu-io -f raw -c "read -P 0x5a 0 100M" "nbd+unix:///check?socket=$2" >/dev/null &&
	"$0" --socket "$1" export remove check >/dev/null' "$CWCTL" "$CTL_SOCK" "$CTL_NBD"
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

# Delete: a partition holding data only with --force; an empty one as is.
cwctl part create scratch --size 8M >/dev/null
check "4M written to scratch" ctl_fill scratch 4M
check "deleting data without --force: the sentence" test "$(cwctl part delete scratch 2>&1)" = \
	"cwctl part delete: deleting scratch loses 4M of data written there: say so with force (cwctl part delete --force) (bad-request)"
check "the refused delete kept it" test "$(size scratch)" -eq $((8 << 20))
check "--force deletes it" cwctl part delete scratch --force
check "scratch is gone" test -z "$(size scratch)"
cwctl part create blank --size 8M >/dev/null
check "a partition never written goes without --force" cwctl part delete blank
check "media is untouched" test "$(size media)" -eq $((95 << 20))

# part show: disks by name; 300 one-block runs over three disks.
cwctl part create wide --size 300M >/dev/null
show=$(cwctl part show wide)
runs() { awk '/^FIRST-BLOCK/ { t = 1; next } t && /^[0-9]/ { n++ } END { print n + 0 }'; }
check "part show: per disk by name" bash -c \
	'test "$(awk "/^(hdd0|hdd1|ssd0) / { s += \$2 } END { print s }" <<<"$0")" -eq 300' "$show"
check "part show: runs name their disk" test "$(awk '$1 == "FIRST-BLOCK" { getline; print $3 }' <<<"$show")" = hdd0
check "part show: 16 runs" test "$(runs <<<"$show")" -eq 16
check "part show: and the count" grep -qx "(300 runs in all; --all lists them)" <<<"$show"
check "part show --all: every run" test "$(cwctl part show wide --all | runs)" -eq 300
check "--json: a page and where the rest start" test \
	"$(cwctl --json part show wide | jq -c '[(.runs | length), .next_block, .runs_total]')" = "[256,256,300]"
check "--json --all: every run, once, in order" test "$(cwctl --json part show wide --all |
	jq -c '[(.runs | length), ([.runs[].blocks] | add), ([.runs[].first_block] == [range(300)]), has("next_block")]')" = \
	"[300,300,true,false]"
check "--json --all: runs by disk name" test "$(cwctl --json part show wide --all |
	jq -r '[.runs[].disk] | unique | join(",")')" = "hdd0,hdd1,ssd0"
check "a page past the end: refused" test "$(echo '{"cmd":"part.show","args":{"name":"wide","from_block":300}}' |
	"$CTL_RAW" "$CTL_SOCK" | jq -r .error.code)" = bad-request
check "the server stops cleanly" ctl_stop
