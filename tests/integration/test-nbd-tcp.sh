#!/usr/bin/env bash
# Description: the server listens on TCP, bound to loopback when no host
# is given, and serves the same exports there as on its unix socket.
. "$(dirname "$0")/lib.sh"
requires nbdinfo qemu-io
. "$(dirname "$0")/nbd-lib.sh"

truncate -s 4M "$cw_tmp/disk.img"
# A free port: try a few random ones, the server refuses a busy one.
for try in 1 2 3 4 5 6 7 8; do
	port=$((20000 + RANDOM % 40000))
	"$nbd_server_bin" -u "$cw_tmp/probe.sock" -t $port -e disk="$cw_tmp/disk.img" \
		2>"$cw_tmp/probe.log" &
	pid=$!
	if wait_for "the TCP server" 10 nbdinfo --size "nbd://127.0.0.1:$port/disk"; then
		break
	fi
	kill $pid 2>/dev/null; wait $pid 2>/dev/null
	pid=
done
[ -n "$pid" ] || { echo "no free port found"; cat "$cw_tmp/probe.log"; exit 1; }
nbd_pid=$pid
cleanup_add "kill $pid 2>/dev/null"

check "size over TCP" test "$(nbdinfo --size "nbd://127.0.0.1:$port/disk")" = 4194304
check "write and read over TCP" qemu-io -f raw "nbd://127.0.0.1:$port/disk" \
	-c 'write -P 0x5a 0 64k' -c 'read -P 0x5a 0 64k'
# Listening sockets on the port, from /proc: every one must be loopback.
listeners() {
	local hex
	hex=$(printf '%04X' $port)
	awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { print $2 }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null
}
check "listening on 127.0.0.1" sh -c "echo '$(listeners)' | grep -q '^0100007F:'"
check "not listening on any other address" sh -c \
	"! echo '$(listeners)' | grep -v -E '^(0100007F|00000000000000000000000001000000):'"
check "server stops cleanly" nbd_stop_server
