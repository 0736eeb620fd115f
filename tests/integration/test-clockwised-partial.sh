#!/bin/bash
# Description: a partition striped over two disks loses one of them.
# With activation_mode "complete" (the default) it is offline: not
# exported, export add refuses it and says how to serve the rest.  With
# "partial" it is served: reads and writes of blocks on the present disk
# work and return what was written before, a request touching a block on
# the missing disk fails with EIO (and only such requests), BLOCK_STATUS
# calls those blocks neither data nor zeros, the log says so once, and
# part list, part show and status name the missing disk.  When the disk
# comes back, nothing is lost, the writes made meanwhile included.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires qemu-io nbdinfo jq
cwctl() { "$top_builddir/tools/cwctl" --socket "$cw_tmp/control" "$@"; }
M=$((1024 * 1024))
# qemu-io reads block k (1 MiB) and checks it holds pattern 0x40+k.
read_block() { qemu-io -f raw -c "read -P $((0x40 + $1)) $(($1 * M)) $M" "$(cwd_uri media)" 2>&1; }
block_reads() { read_block "$1" | grep -q '^read 1048576/1048576 bytes'; }
block_eio() { read_block "$1" | grep -q 'read failed: Input/output error'; }

check "pool of two disks" cwd_pool 32M a b
# rotation: blocks 0 2 4 6 on a, 1 3 5 7 on b
check "striped partition" cwd_part media 8M rotation
check "partition on a alone" cwd_part solo 2M single 1
cwd_conf
cwd_start
for k in 0 1 2 3 4 5 6 7; do
	qemu-io -f raw -c "write -P $((0x40 + k)) $((k * M)) $M" "$(cwd_uri media)" >/dev/null ||
		echo "FAIL: writing block $k"
done
check "write solo" qemu-io -f raw -c "write -P 0x5a 0 2M" "$(cwd_uri solo)"
check "stop" cwd_stop
mv "$cw_tmp/b.disk" "$cw_tmp/b.away"

# complete (the default): offline
cwd_start
check "offline: said once" test "$(grep -c 'partition media is not exported: its disk b is missing' \
	"$(cwd_log)")" -eq 1
check "offline: not listed" bash -c "! nbdinfo --list '$(cwd_uri '')' | grep -q 'export=\"media\"'"
check "offline: the rest is served" qemu-io -f raw -c "read -P 0x5a 0 2M" "$(cwd_uri solo)"
check "offline: part list says so" test "$(cwctl --json part list |
	jq -c '.[] | select(.name == "media") | [.state, .missing_blocks, .missing_disks]')" = \
	'["offline",4,["b"]]'
check "offline: in words" bash -c 'grep -q "^media .*offline: b missing$" <<<"$0"' \
	"$(cwctl part list)"
cwctl export remove media >/dev/null
out=$(cwctl export add media 2>&1)
check "offline: export add refused" test $? -ne 0
check "... saying how to serve the rest" grep -q \
	'partition media is offline: 4 of its blocks are on a missing disk (activation_mode = "partial"' \
	<<<"$out"
check "stop" cwd_stop

# partial
cwd_conf 'exports = { all = true; activation_mode = "partial"; };'
cwd_start
check "partial: said once" test "$(grep -c 'partition media is served partially (activation_mode "partial"): 4 of its 8 blocks are on missing disk b and fail with EIO' \
	"$(cwd_log)")" -eq 1
check "partial: not the offline line" bash -c "! grep -q 'media is not exported' '$(cwd_log)'"
check "partial: listed" bash -c "nbdinfo --list '$(cwd_uri '')' | grep -q 'export=\"media\"'"
for k in 0 2 4 6; do
	check "partial: block $k (disk a) reads what was written" block_reads $k
done
for k in 1 3 5 7; do
	check "partial: block $k (disk b) gets EIO" block_eio $k
done
check "partial: a read across a missing block fails whole" bash -c \
	"qemu-io -f raw -c 'read 0 2M' '$(cwd_uri media)' 2>&1 | grep -q 'Input/output error'"
check "partial: a write to a present block works" \
	qemu-io -f raw -c "write -P 0x66 $((2 * M)) $M" "$(cwd_uri media)"
check "... and reads back" qemu-io -f raw -c "read -P 0x66 $((2 * M)) $M" "$(cwd_uri media)"
check "partial: a write to a missing block gets EIO" bash -c \
	"qemu-io -f raw -c 'write -P 0x77 $((3 * M)) 4096' '$(cwd_uri media)' 2>&1 |
	 grep -q 'write failed: Input/output error'"
check "partial: a zero of a missing block gets EIO" bash -c \
	"qemu-io -f raw -c 'write -z $((5 * M)) $M' '$(cwd_uri media)' 2>&1 |
	 grep -q 'write failed: Input/output error'"
check "partial: the other export untouched" qemu-io -f raw -c "read -P 0x5a 0 2M" "$(cwd_uri solo)"
# BLOCK_STATUS: blocks on a are data (type 0), on b a hole not known to
# be zeros (type 1), never "data" nor "zero".
nbdinfo --map "$(cwd_uri media)" >"$cw_tmp/map" 2>&1
check "partial: map has 8 extents" test "$(wc -l <"$cw_tmp/map")" -eq 8
check "partial: data where the disk is" test "$(awk '$3 == 0 { print $1 / 1048576 }' "$cw_tmp/map" |
	tr '\n' ' ')" = "0 2 4 6 "
check "partial: a hole of unknown contents where it is not" \
	test "$(awk '$3 == 1 { print $1 / 1048576 }' "$cw_tmp/map" | tr '\n' ' ')" = "1 3 5 7 "
check "partial: part list" test "$(cwctl --json part list |
	jq -c '.[] | select(.name == "media") | [.state, .missing_blocks, .missing_disks]')" = \
	'["partial",4,["b"]]'
cwctl part show media >"$cw_tmp/show"
check "partial: part show says which blocks" grep -q \
	'^8 blocks of 1M, 4 blocks on missing disks: partial: b missing (they fail with EIO, the rest is served)$' \
	"$cw_tmp/show"
check "partial: part show names the missing disk" grep -q '^b (missing) *4 *4M$' "$cw_tmp/show"
check "partial: status" bash -c 'grep -q "^media .*partial: b missing$" <<<"$0"' "$(cwctl status)"
check "partial: export list: served" test "$(cwctl --json export list |
	jq -c '.[] | select(.name == "media") | .served')" = true
check "stop" cwd_stop

# the disk comes back: everything is there
mv "$cw_tmp/b.away" "$cw_tmp/b.disk"
cwd_conf
cwd_start
for k in 0 1 3 4 5 6 7; do
	check "back: block $k as written before" block_reads $k
done
check "back: the write made while partial" \
	qemu-io -f raw -c "read -P 0x66 $((2 * M)) $M" "$(cwd_uri media)"
check "back: complete" test "$(cwctl --json part list |
	jq -r '.[] | select(.name == "media") | .state')" = complete
check "back: map is all data" test "$(awk '$3 != 0' <(nbdinfo --map "$(cwd_uri media)") | wc -l)" -eq 0
check "stop" cwd_stop
