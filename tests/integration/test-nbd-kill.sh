#!/usr/bin/env bash
# Description: data acknowledged by the server (plain, FUA, and before a
# flush) is in the backing file after kill -9; a restarted server serves
# it.  Requests complete from other threads, as the daemon's will.
. "$(dirname "$0")/lib.sh"
requires qemu-io
. "$(dirname "$0")/nbd-lib.sh"

truncate -s 8M "$cw_tmp/disk.img"
nbd_start_server -A 2 -e disk="$cw_tmp/disk.img"
uri=$(nbd_uri disk)
qio() { qemu-io -f raw "$uri" "$@" >"$cw_tmp/qio.out" 2>&1 && ! grep -q -E 'fail|error|mismatch' "$cw_tmp/qio.out"; }

check "write, FUA write, flush" qio -c 'write -P 0x61 0 1M' -c 'write -f -P 0x62 2M 64k' \
	-c 'write -P 0x63 4M 256k' -c 'flush'
kill -9 "$nbd_pid"
wait "$nbd_pid" 2>/dev/null
check "killed server is gone" sh -c "! kill -0 $nbd_pid 2>/dev/null"

nbd_start_server -A 2 -e disk="$cw_tmp/disk.img"
check "restarted server serves the data" qio -c 'read -P 0x61 0 1M' -c 'read -P 0x62 2M 64k' \
	-c 'read -P 0x63 4M 256k' -c 'read -P 0 1M 1M'
check "server stops cleanly" nbd_stop_server
