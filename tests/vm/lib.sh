# Sourced by the scripts tests/vm/guest runs (tests/vm/nbd-kernel.sh,
# tests/vm/anchors.sh), after tests/integration/lib.sh and ctl-lib.sh:
#   nbd_up DEV EXPORT   the kernel's NBD client (nbd-client -unix) on an
#                       export of the daemon ctl_start started, its size
#                       seen by the kernel
#   nbd_down DEV        disconnects it
# The guest is one test's alone, and the build directory (where the
# suite's real-time lock lives) is read-only there: cw_rt_lock takes no lock.
cw_rt_lock() { [ -n "${cw_rt_fd:-}" ] || exec {cw_rt_fd}>/dev/null; }
# The guest's CPU is emulated, several times slower than the host's (and
# slower again on a busy host): waits for the daemon take four times
# the host's (cw_budget).
export CW_BUDGET_SCALE=4

nbd_up() {
	nbd-client -unix "$CTL_NBD" -N "$2" "$1" >"$cw_tmp/nbd-client.log" 2>&1 ||
		{ cat "$cw_tmp/nbd-client.log"; return 1; }
	# the size is set once the kernel has the socket
	wait_for "$1 to have a size" 10 test "$(blockdev --getsize64 "$1" 2>/dev/null || echo 0)" -gt 0
}
nbd_down() { nbd-client -d "$1" >/dev/null 2>&1; }
