# Sourced by tests/integration/test-nbd-*.sh after lib.sh.
#
#   nbd_start_server ARGS...  start nbd-file-server on a unix socket in the
#                             test's temp dir with ARGS (exports etc.),
#                             wait until it greets; sets nbd_sock, nbd_pid
#   nbd_stop_server           SIGTERM it by PID; fails unless it exits 0
#   nbd_uri NAME              nbd+unix URI of export NAME
nbd_server_bin=$top_builddir/tests/unit/daemon/nbd-file-server
nbd_client_bin=$top_builddir/tests/integration/nbd-proto-client
nbd_sock=$cw_tmp/nbd.sock
nbd_pid=

nbd_start_server() {
	"$nbd_server_bin" -u "$nbd_sock" "$@" 2>"$cw_tmp/server.log" &
	nbd_pid=$!
	cleanup_add "kill $nbd_pid 2>/dev/null; cat '$cw_tmp/server.log' >&2"
	if ! wait_for "the NBD server to greet" 20 "$nbd_client_bin" "$nbd_sock" greeting; then
		cat "$cw_tmp/server.log"
		exit 1
	fi
}

nbd_stop_server() {
	local rc=0
	kill -TERM "$nbd_pid" && wait "$nbd_pid" || rc=$?
	nbd_pid=
	return $rc
}

nbd_uri() { echo "nbd+unix:///$1?socket=$nbd_sock"; }
