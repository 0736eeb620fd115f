#!/bin/bash
# Description: cwctl part scrub finds a byte changed behind the daemon's
# back in one disk file of a 2-copy partition, and --repair rewrites it
# from copy 0.  Random data goes in through nbdcopy; one byte of copy 1 of
# one block is changed in its disk file; a scrub (best effort, journalled
# like a move) reports that block and only it, and changes nothing; a
# scrub with --repair rewrites it; then both copies are byte-equal on the
# disk files, the data reads back as written, and a last scrub finds
# nothing.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires jq nbdcopy

ctl() { "$top_builddir/tools/cwctl" --socket "$cw_tmp/control" "$@"; }
check "pool of 64 KiB blocks" "$cwpool" create "$cwd_db" 65536
for d in a b; do
	truncate -s 32M "$cw_tmp/$d.disk"
	check "disk $d" "$cwpool" add-disk "$cwd_db" "$cw_tmp/$d.disk" hdd "$d"
done
cwd_conf "disks = ( { name = \"a\"; path = \"$cw_tmp/a.disk\"; },
	{ name = \"b\"; path = \"$cw_tmp/b.disk\"; } );"
cwd_start
check "a 2-copy partition" ctl part create mir --size 16M --copies 2
check "exported" ctl export add mir
uri=$(cwd_uri mir)
head -c 16M /dev/urandom >"$cw_tmp/in"
check "written" nbdcopy "$cw_tmp/in" "$uri"
expect_fail "a single copy is not scrubbed" bash -c \
	"'$top_builddir/tools/cwctl' --socket '$cw_tmp/control' part create one --size 1M >/dev/null &&
	 '$top_builddir/tools/cwctl' --socket '$cw_tmp/control' part scrub one"

# -- one byte of copy 1 of block 37 changed in its disk file
show=$(ctl --json part show mir --all)
read -r disk offset < <(jq -r '.copy_runs[] | select(.copy == 1 and .first_block <= 37 and
	.first_block + .blocks > 37) | "\(.disk) \(.offset + (37 - .first_block) * 65536)"' <<<"$show")
check "copy 1 of block 37 found ($disk at $offset)" test -n "$disk" -a -n "$offset"
printf '\x5a' | cmp -s - <(dd if="$cw_tmp/$disk.disk" bs=1 skip=$((offset + 1000)) count=1 \
	status=none) && b=$'\xa5' || b=$'\x5a'
printf '%s' "$b" | dd of="$cw_tmp/$disk.disk" bs=1 seek=$((offset + 1000)) conv=notrunc status=none
expect_fail "the copies now differ on the files" \
	cmp -s <(cwd_copy_image "$show" 0) <(cwd_copy_image "$show" 1)

out=$(ctl --json part scrub mir --watch | tail -1)
echo "$out"
check "the scrub finds block 37 and only it" test \
	"$(jq -c '[.kind, .state, .differ, .differing_blocks]' <<<"$out")" = '["scrub","done",1,[37]]'
check "it compared every block" test "$(jq '.done + .differ' <<<"$out")" -eq 256
expect_fail "and changed nothing" \
	cmp -s <(cwd_copy_image "$show" 0) <(cwd_copy_image "$show" 1)
check "the log names the block" grep -q 'copy 1 of block 37 .* differs' "$(cwd_log)"
expect_fail "cwctl part scrub --watch exits non-zero when copies differ" \
	ctl part scrub mir --watch

out=$(ctl --json part scrub mir --repair --watch | tail -1)
check "--repair: block 37 rewritten" test \
	"$(jq -c '[.kind, .state, .differ, .differing_blocks]' <<<"$out")" = '["repair","done",1,[37]]'
check "both copies hold the same bytes on the disk files" \
	cmp <(cwd_copy_image "$show" 0) <(cwd_copy_image "$show" 1)
check "copy 0 is the data written" cmp <(cwd_copy_image "$show" 0) "$cw_tmp/in"
check "read back as written" nbdcopy "$uri" "$cw_tmp/out"
check "the same" cmp "$cw_tmp/in" "$cw_tmp/out"
check "a last scrub finds nothing" ctl part scrub mir --watch
out=$(ctl --json move list | jq '.[-1]')
check "with 0 differing" test "$(jq -c '[.kind, .differ, .done]' <<<"$out")" = '["scrub",0,256]'
check "nothing out of sync" test "$(ctl --json part show mir | jq .stale_copies)" -eq 0
check "stop" cwd_stop
