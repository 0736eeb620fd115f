#!/usr/bin/env bash
# Description: nbdinfo lists every export with its size, description,
# read-only flag and block size constraints.
. "$(dirname "$0")/lib.sh"
requires nbdinfo
. "$(dirname "$0")/nbd-lib.sh"

truncate -s 3M "$cw_tmp/a.img"
truncate -s 128K "$cw_tmp/b.img"
nbd_start_server -b 512 -B 4096 -M 1048576 -d "first disk" -e alpha="$cw_tmp/a.img" \
	-b 4096 -B 65536 -M 2097152 -E beta="$cw_tmp/b.img"

nbdinfo --list --json "nbd+unix:///?socket=$nbd_sock" >"$cw_tmp/list.json"
check "list names both exports" grep -q '"export-name": "beta"' "$cw_tmp/list.json"
check "list shows the description" grep -q '"description": "first disk"' "$cw_tmp/list.json"
nbdinfo --json "$(nbd_uri alpha)" >"$cw_tmp/alpha.json"
check "alpha size" grep -q '"export-size": 3145728' "$cw_tmp/alpha.json"
check "alpha minimum block" grep -q '"block_size_minimum": 512' "$cw_tmp/alpha.json"
check "alpha preferred block" grep -q '"block_size_preferred": 4096' "$cw_tmp/alpha.json"
check "alpha maximum block" grep -q '"block_size_maximum": 1048576' "$cw_tmp/alpha.json"
check "alpha writable" grep -q '"is_read_only": false' "$cw_tmp/alpha.json"
check "alpha can flush and fua" grep -q '"can_fua": true' "$cw_tmp/alpha.json"
check "alpha multi-conn" grep -q '"can_multi_conn": true' "$cw_tmp/alpha.json"
nbdinfo --json "$(nbd_uri beta)" >"$cw_tmp/beta.json"
check "beta size" grep -q '"export-size": 131072' "$cw_tmp/beta.json"
check "beta read-only" grep -q '"is_read_only": true' "$cw_tmp/beta.json"
check "beta minimum block" grep -q '"block_size_minimum": 4096' "$cw_tmp/beta.json"
check "beta maximum block" grep -q '"block_size_maximum": 2097152' "$cw_tmp/beta.json"
check "size via nbdinfo --size" test "$(nbdinfo --size "$(nbd_uri alpha)")" = 3145728
# An empty name picks the default export, the first one.
check "default export" test "$(nbdinfo --size "nbd+unix:///?socket=$nbd_sock")" = 3145728
expect_fail "unknown export is refused" nbdinfo --size "$(nbd_uri nosuch)"
check "server stops cleanly" nbd_stop_server
