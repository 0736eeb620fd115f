#!/usr/bin/env bash
# Description: the front end negotiates base:allocation and answers
# BLOCK_STATUS with what its back end reports (here a sparse file's own
# holes), so nbdinfo --map and qemu-img map see the holes; it advertises
# CACHE and FAST_ZERO, and a fast zero the back end cannot do fails with
# ENOTSUP rather than being slow.
. "$(dirname "$0")/lib.sh"
requires nbdinfo
. "$(dirname "$0")/nbd-lib.sh"

# 8 MiB, data at 1 MiB and 5-6 MiB, holes elsewhere (tmpfs and every
# usual file system keep them).
truncate -s 8M "$cw_tmp/a.img"
dd if=/dev/urandom of="$cw_tmp/a.img" bs=1M seek=1 count=1 conv=notrunc status=none
dd if=/dev/urandom of="$cw_tmp/a.img" bs=1M seek=5 count=1 conv=notrunc status=none
if [ "$(stat -c %b "$cw_tmp/a.img")" -gt 8192 ]; then
	echo "SKIP: ${TMPDIR:-/tmp} is on a file system without holes"
	rm -rf "$cw_tmp"
	trap - EXIT
	exit 77
fi
nbd_start_server -b 512 -e alpha="$cw_tmp/a.img"

nbdinfo --json "$(nbd_uri alpha)" >"$cw_tmp/info.json"
check "can cache" grep -q '"can_cache": true' "$cw_tmp/info.json"
check "can fast zero" grep -q '"can_fast_zero": true' "$cw_tmp/info.json"
check "lists base:allocation" grep -q '"base:allocation"' "$cw_tmp/info.json"

nbdinfo --map --totals "$(nbd_uri alpha)" >"$cw_tmp/totals"
cat "$cw_tmp/totals"
check "map: 2 MiB of data" grep -Eq '^ *2097152 +25\.0% +0 +data$' "$cw_tmp/totals"
check "map: 6 MiB of holes" grep -Eq '^ *6291456 +75\.0% +3 +hole,zero$' "$cw_tmp/totals"
nbdinfo --map "$(nbd_uri alpha)" >"$cw_tmp/map"
cat "$cw_tmp/map"
check "map: the data at 1 MiB" grep -Eq '^ *1048576 +1048576 +0 +data$' "$cw_tmp/map"
check "map: the data at 5 MiB" grep -Eq '^ *5242880 +1048576 +0 +data$' "$cw_tmp/map"

if command -v qemu-img >/dev/null; then
	qemu-img map --output=json -f raw "$(nbd_uri alpha)" >"$cw_tmp/qmap"
	cat "$cw_tmp/qmap"
	check "qemu-img map: data at 1 MiB" \
		grep -q '"start": 1048576, "length": 1048576, "depth": 0, "present": true, "zero": false, "data": true' "$cw_tmp/qmap"
	check "qemu-img map: a hole at 2 MiB" \
		grep -q '"start": 2097152, "length": 3145728, "depth": 0, "present": true, "zero": true, "data": false' "$cw_tmp/qmap"
fi

# Raw commands: the framing of BLOCK_STATUS, REQ_ONE, CACHE, FAST_ZERO.
check "raw block status, cache, fast zero" env NBD_EXPORT=alpha "$nbd_client_bin" "$nbd_sock" block-status
if command -v qemu-io >/dev/null; then
	# A zero that may punch and a discard make holes the map then shows.
	check "qemu-io zero and discard" qemu-io -f raw -c 'write -z -u 1M 1M' \
		-c 'discard 5M 1M' "$(nbd_uri alpha)"
	check "map after zero and discard: all hole" test "$(nbdinfo --map --totals \
		"$(nbd_uri alpha)" | awk '$4 == "hole,zero" {print $1}')" = 8388608
fi
check "server stops cleanly" nbd_stop_server
