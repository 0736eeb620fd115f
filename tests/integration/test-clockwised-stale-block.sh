#!/bin/bash
# Description: a block a new partition gets from a deleted one never shows
# the deleted partition's bytes, when the write that fills it fails (the
# fault engine fails it with EIO, and tears another) or when the power
# fails after the write was taken but before any flush covered it (the
# fault engine's cut): the block reads as zeros or as what its own
# partition wrote.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires qemu-io nbdcopy python3

ctl() { "$top_builddir/tools/cwctl" --socket "$cw_tmp/control" "$@"; }
# The disk holds one 24M partition and little more: the new one gets the
# blocks the old one had.
check "pool" cwd_pool 26M a
check "old partition" cwd_part old 24M single 1
cwd_conf
cwd_start
check "the old partition is filled with its pattern" \
	qemu-io -f raw -c 'write -P 0xee 0 24M' -c flush "$(cwd_uri old)"
check "unexported" ctl export remove old
check "deleted" ctl part delete old --force
check "the new partition" ctl part create new --size 24M
check "stop" cwd_stop

with_fault() {
	cwd_conf "disks = ( { name = \"a\"; path = \"$cw_tmp/a.disk\"; fault = \"$1\"; } );"
}

# How many 64K pieces of the export hold the old partition's bytes (0xee) at
# all: none may.
foreign() {
	rm -f "$cw_tmp/new.img"
	nbdcopy "$(cwd_uri new)" "$cw_tmp/new.img" || return 1
	python3 -c 'import sys
d = open(sys.argv[1], "rb").read()
print(sum(1 for i in range(0, len(d), 65536) if 0xee in d[i:i + 65536]))' "$cw_tmp/new.img"
}
no_foreign() {
	local n
	n=$(foreign)
	echo "blocks with the old partition's bytes: $n"
	[ "$n" = 0 ]
}

# 1. The first write of the disk fails, the second is torn.
with_fault "fail-write=1,tear-write=5"
cwd_start
eio() { qemu-io -f raw -c "$1" "$(cwd_uri new)" 2>&1 | grep -q 'Input/output error'; }
check "the failed write gets EIO" eio 'write -P 0x11 0 1M'
check "the torn write gets EIO" eio 'write -P 0x12 4M 1M'
check "a failed write leaves no foreign bytes" no_foreign
check "the fault engine was used" grep -q 'fault-injecting engine' "$(cwd_log)"
cwd_kill9

# 2. The power fails at the third write: the first two were taken, none
# was flushed.
with_fault "cut-write=3"
cwd_start
qemu-io -f raw -c 'write -P 0x21 8M 1M' -c 'write -P 0x22 12M 1M' -c 'write -P 0x23 16M 1M' \
	"$(cwd_uri new)" >/dev/null 2>&1
check "the daemon died at the cut" wait_for "the daemon to die" 20 bash -c "! kill -0 $cwd_pid"
cwd_pid=
cwd_conf
cwd_start
check "after the power cut no foreign bytes" no_foreign
check "written and flushed: it stays" qemu-io -f raw -c 'write -P 0x31 20M 1M' -c flush \
	-c 'read -P 0x31 20M 1M' "$(cwd_uri new)"
check "clean stop" cwd_stop
