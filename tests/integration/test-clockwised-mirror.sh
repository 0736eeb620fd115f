#!/usr/bin/env bash
# Description: a partition with two copies on two file-backed disks
# (cwctl part create --copies 2): nbdcopy writes random data through NBD,
# and each disk's file holds the same bytes at every block's place as
# cwctl part show --json tells it, copy by copy; reading back gives what
# was written; part list and show say the copies and that both are in
# sync; three copies on two disks, and a domain that would put both
# copies together, are refused with the reason.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq nbdcopy

ctl_start "$cw_tmp"
check "a partition of 2 copies on the HDDs" test \
	"$(cwctl part create mir --size 24M --tier hdd --copies 2)" = \
	"partition mir: 24M, policy rotation, tier hdd, zone any, 2 copies"
check "3 copies on 2 HDDs: refused, saying why" bash -c \
	'grep -q "needs disks in 3 failure domains" <<<"$0"' \
	"$(cwctl part create three --size 4M --tier hdd --copies 3 2>&1)"
check "--copies 4: a usage error" test "$(cwctl part create four --size 4M --copies 4 >/dev/null 2>&1;
	echo $?)" -eq 2
check "part list says 2 copies" bash -c 'grep -q "^mir .* 2 *yes$" <<<"$0"' "$(cwctl part list)"
check "JSON too" test "$(cwctl --json part list | jq '.[] | select(.name == "mir") | .copies')" -eq 2
cwctl export add mir >/dev/null

head -c 24M /dev/urandom >"$cw_tmp/in"
check "nbdcopy in" nbdcopy "$cw_tmp/in" "nbd+unix:///mir?socket=$CTL_NBD"
check "nbdcopy out" nbdcopy "nbd+unix:///mir?socket=$CTL_NBD" "$cw_tmp/out"
check "read back as written" cmp "$cw_tmp/in" "$cw_tmp/out"

show=$(cwctl --json part show mir --all)
bs=$(jq .block_size <<<"$show")
check "both copies of every block listed, in sync" test "$(jq '[.copy_runs[] |
	select(.in_sync) | .blocks] | add' <<<"$show")" -eq 48
check "nothing out of sync" test "$(jq .stale_copies <<<"$show")" -eq 0
# Each run of each copy: the disk's file at its offset holds the data.
same=0 runs=0
while read -r copy first blocks disk offset; do
	runs=$((runs + 1))
	cmp -s <(tail -c +$((first * bs + 1)) "$cw_tmp/in" | head -c $((blocks * bs))) \
		<(tail -c +$((offset + 1)) "$cw_tmp/$disk.img" | head -c $((blocks * bs))) &&
		same=$((same + 1))
	echo "copy $copy blocks $first+$blocks on $disk at $offset" >>"$cw_tmp/runs"
done < <(jq -r '.copy_runs[] | "\(.copy) \(.first_block) \(.blocks) \(.disk) \(.offset)"' <<<"$show")
check "every run of every copy holds the data on its disk ($same of $runs)" test "$same" -eq "$runs" -a "$runs" -gt 0
check "no block has both copies on one disk" test "$(jq '[.copy_runs[] | {b: .first_block, d: .disk}] |
	group_by(.b) | map(select((map(.d) | unique | length) != length)) | length' <<<"$show")" -eq 0
check "both disks carry copies" test "$(jq '[.copy_runs[].disk] | unique | length' <<<"$show")" -eq 2
check "in words" bash -c 'grep -q "^2 copies, 0 out of sync$" <<<"$0"' "$(cwctl part show mir)"

check "one domain for both disks: refused" bash -c 'grep -q "cannot join domain" <<<"$0"' \
	"$(cwctl disk set hdd0 --domain shelf >/dev/null && cwctl disk set hdd1 --domain shelf 2>&1)"
check "the domain shows" test "$(cwctl --json disk list | jq -r '.[] | select(.name == "hdd0") |
	.domain')" = shelf
check "back to its own" test "$(cwctl disk set hdd0 --domain '')" = "disk hdd0: failure domain hdd0"
