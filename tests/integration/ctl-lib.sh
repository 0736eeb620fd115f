# Sourced by the control-plane tests after lib.sh.
#
#   ctl_start DIR [ARGS...]  start a control server over a new pool in DIR,
#                            socket DIR/control; sets CTL_SOCK and CTL_PID
#   cwctl ARGS...            the real cwctl on that socket
#   ctl_code CMD...          run CMD, print the error code cwctl reported
#   ctl_disks DIR            three sparse file-backed disks: hdd0 hdd1 ssd0
#
# The server is tests/integration/ctl-test-server: daemon/control.c on a
# real pool, without the data path.  Once clockwised serves the same
# socket, ctl_start is the one place to change: write a config naming the
# pool and control_socket, start clockwised on it, and wait for the socket.
CTL_SERVER=${CTL_SERVER:-$top_builddir/tests/integration/ctl-test-server}
CWCTL=$top_builddir/tools/cwctl
CTL_RAW=$top_builddir/tests/integration/ctl-raw

ctl_start() {
	local dir=$1; shift
	CTL_SOCK=$dir/control
	"$CTL_SERVER" --pool "$dir/pool.db" --socket "$CTL_SOCK" "$@" &
	CTL_PID=$!
	cleanup_add "kill $CTL_PID 2>/dev/null; wait $CTL_PID 2>/dev/null"
	wait_for "the control socket" 20 test -S "$CTL_SOCK"
}

# Stops the server and checks it ended cleanly (it removes its socket).
ctl_stop() {
	kill "$CTL_PID" && wait "$CTL_PID" && ! test -e "$CTL_SOCK"
}

cwctl() { "$CWCTL" --socket "$CTL_SOCK" "$@"; }

# The code in parentheses at the end of cwctl's error line.
ctl_code() {
	"$@" 2>&1 >/dev/null | sed -n 's/.*(\([a-z-]*\))$/\1/p' | tail -n1
}

ctl_disks() {
	local dir=$1
	truncate -s 256M "$dir/hdd0.img" "$dir/hdd1.img" && truncate -s 128M "$dir/ssd0.img" &&
		cwctl disk add "$dir/hdd0.img" --name hdd0 >/dev/null &&
		cwctl disk add "$dir/hdd1.img" --name hdd1 >/dev/null &&
		cwctl disk add "$dir/ssd0.img" --name ssd0 --tier ssd >/dev/null
}
