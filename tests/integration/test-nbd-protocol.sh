#!/usr/bin/env bash
# Description: a raw-socket client sends malformed handshakes, unknown
# options and commands, out-of-range, misaligned and oversized requests;
# each gets the protocol's error reply or a clean disconnect, and the
# server keeps serving everyone else throughout.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd-lib.sh"

truncate -s 1M "$cw_tmp/disk.img"
truncate -s 64K "$cw_tmp/ro.img"
# Once with requests completed on the reader thread, once completed by
# other threads in random order (replies out of order).
nbd_start_server -b 512 -M 65536 -A 3 -e disk="$cw_tmp/disk.img" -E ro="$cw_tmp/ro.img"
for s in $("$nbd_client_bin" "$nbd_sock" list); do
	check "protocol, async back end: $s" "$nbd_client_bin" "$nbd_sock" "$s"
done
check "async server stops cleanly" nbd_stop_server

nbd_start_server -b 512 -M 65536 -e disk="$cw_tmp/disk.img" -E ro="$cw_tmp/ro.img"
for s in $("$nbd_client_bin" "$nbd_sock" list); do
	check "protocol: $s" "$nbd_client_bin" "$nbd_sock" "$s"
done
# After every abuse above the server is alive and serves a new client.
check "server still serves after bad clients" "$nbd_client_bin" "$nbd_sock" bad-requests-structured
check "server still running" kill -0 "$nbd_pid"

# Stopping the server closes connections still in transmission cleanly.
"$nbd_client_bin" "$nbd_sock" held-until-stop >"$cw_tmp/held.out" &
held=$!
cleanup_add "kill $held 2>/dev/null"
check "a client is in transmission" wait_for "the held client" 20 grep -q ready "$cw_tmp/held.out"
check "server stops cleanly on SIGTERM" nbd_stop_server
check "the held client saw a clean close" wait "$held"
