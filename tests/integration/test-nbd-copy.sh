#!/usr/bin/env bash
# Description: nbdcopy round-trips 128 MiB of random data through an
# export (over several connections: the export offers multi-conn) and
# the checksums match, on the way in, on the backing file, and out again.
. "$(dirname "$0")/lib.sh"
requires nbdcopy sha256sum
. "$(dirname "$0")/nbd-lib.sh"

size=$((128 << 20))
head -c $size /dev/urandom >"$cw_tmp/src.img"
truncate -s $size "$cw_tmp/disk.img"
# Requests complete from other threads, in random order.
nbd_start_server -A 4 -e disk="$cw_tmp/disk.img"

sum() { sha256sum <"$1" | cut -d' ' -f1; }
want=$(sum "$cw_tmp/src.img")
check "nbdcopy into the export" nbdcopy --flush "$cw_tmp/src.img" "$(nbd_uri disk)"
check "nbdcopy out of the export" nbdcopy "$(nbd_uri disk)" "$cw_tmp/out.img"
check "data out matches data in" test "$(sum "$cw_tmp/out.img")" = "$want"
check "backing file holds the data" test "$(sum "$cw_tmp/disk.img")" = "$want"
# One connection, many requests in flight, small requests.
rm -f "$cw_tmp/out.img"
check "nbdcopy out over one connection" nbdcopy --connections=1 --requests=64 \
	--request-size=65536 "$(nbd_uri disk)" "$cw_tmp/out.img"
check "single-connection copy matches" test "$(sum "$cw_tmp/out.img")" = "$want"
check "server stops cleanly" nbd_stop_server
