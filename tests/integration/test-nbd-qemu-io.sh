#!/usr/bin/env bash
# Description: qemu-io writes patterns (plain, FUA, zeroes, discard),
# reads them back through the export, and the backing file holds exactly
# what was written once the server is gone.
. "$(dirname "$0")/lib.sh"
requires qemu-io cmp
. "$(dirname "$0")/nbd-lib.sh"

truncate -s 16M "$cw_tmp/disk.img"
nbd_start_server -b 512 -e disk="$cw_tmp/disk.img"
uri=$(nbd_uri disk)
qio() { qemu-io -f raw "$uri" "$@" >"$cw_tmp/qio.out" 2>&1 && ! grep -q -E 'fail|error|mismatch' "$cw_tmp/qio.out"; }

check "write 0xab, read it back" qio -c 'write -P 0xab 0 1M' -c 'read -P 0xab 0 1M'
check "FUA write 0xcd at 3M" qio -c 'write -f -P 0xcd 3M 512k' -c 'read -P 0xcd 3M 512k'
check "write zeroes" qio -c 'write -P 0x11 8M 1M' -c 'write -z 8M 64k' -c 'read -P 0 8M 64k' \
	-c 'read -P 0x11 8454144 960k'
check "discard then rewrite" qio -c 'discard 12M 1M' -c 'write -P 0x22 12M 4k' \
	-c 'read -P 0x22 12M 4k'
check "flush" qio -c 'write -P 0x33 15M 4k' -c 'flush'
check "unaligned read is done by the client" qio -c 'read -P 0xab 100 1000'
expect_fail "read pattern mismatch is detected" qio -c 'read -P 0xee 0 4k'
expect_fail "read past the end fails" qio -c 'read 16M 4k'
check "a new connection sees earlier data" qio -c 'read -P 0xab 0 1M' -c 'read -P 0xcd 3M 512k'
check "server stops cleanly" nbd_stop_server

# The backing file, read directly, holds the same bytes.
pat() { head -c "$2" /dev/zero | tr '\0' "\\$(printf '%03o' "$1")"; }
check "0xab on disk" cmp -n $((1 << 20)) <(pat 0xab $((1 << 20))) "$cw_tmp/disk.img"
check "0xcd on disk" cmp -i 0:$((3 << 20)) -n $((512 << 10)) <(pat 0xcd $((512 << 10))) "$cw_tmp/disk.img"
check "zeroes on disk" cmp -i 0:$((8 << 20)) -n 65536 /dev/zero "$cw_tmp/disk.img"
check "0x33 on disk" cmp -i 0:$((15 << 20)) -n 4096 <(pat 0x33 4096) "$cw_tmp/disk.img"
