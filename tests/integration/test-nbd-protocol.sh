#!/usr/bin/env bash
# Description: a raw-socket client sends malformed handshakes, unknown
# options and commands, out-of-range, misaligned and oversized requests;
# each gets the protocol's error reply or a clean disconnect, and the
# server keeps serving everyone else throughout.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd-lib.sh"

truncate -s 1M "$cw_tmp/disk.img"
truncate -s 64K "$cw_tmp/ro.img"
nbd_start_server -b 512 -M 65536 -e disk="$cw_tmp/disk.img" -E ro="$cw_tmp/ro.img"

for s in $("$nbd_client_bin" "$nbd_sock" list); do
	check "protocol: $s" "$nbd_client_bin" "$nbd_sock" "$s"
done
# After every abuse above the server is alive and serves a new client.
check "server still serves after bad clients" "$nbd_client_bin" "$nbd_sock" bad-requests-structured
check "server still running" kill -0 "$nbd_pid"
check "server stops cleanly on SIGTERM" nbd_stop_server
