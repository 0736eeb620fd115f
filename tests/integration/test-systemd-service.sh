#!/bin/bash
# Description: the shipped clockwised.service, sysusers and tmpfiles
# snippets and clockwised.conf, run by a systemd user manager of the
# test's own (sd-namespace.sh: as root, in a private mount namespace where
# /etc and /var/lib are overlays and /run is empty, so nothing written
# reaches the machine's).  Only ExecStart's path changes, to a copy of the
# daemon just built outside the build tree (which PrivateTmp or
# ProtectHome may hide: a tree under /tmp or /home), with an Environment=
# line for its library (and /var/lib/clockwise is made beforehand: a user
# manager puts StateDirectory elsewhere).  Checked: start
# waits for READY=1 and the pool is created (--init) in StateDirectory;
# STATUS; the bounding set, no-new-privileges, the seccomp filter, locked
# memory (CAP_IPC_LOCK), a read-only / and a private /tmp; the control
# socket's group from the sysusers snippet; data through the NBD socket;
# WATCHDOG=1 pings; a clean stop (STOPPING, exit 0) that removes
# RuntimeDirectory; and a second start that finds the pool as left.  The
# manager sits in a cgroup of its own, removed at the end, so the
# machine's cgroups are left as they were.  Skipped (77) without root,
# systemd, overlayfs or a writable cgroup hierarchy.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sd-namespace.sh"

# ---- inside the mount namespace ----
inner() {
	local pid u=/run/systemd/user bin=/var/lib/cwtest-unit
	cwctl() { "$top_builddir/tools/cwctl" --socket /run/clockwise/control "$@"; }
	sdns_mounts etc var/lib
	# A user manager puts StateDirectory= below $XDG_CONFIG_HOME (systemd
	# 252), not $XDG_STATE_HOME: /var/lib/clockwise is made here, as the
	# system manager would.
	mkdir -p "$u" /etc/clockwise /var/lib/clockwise
	# as make install puts them; the daemon and its library are copied
	# out of the build tree, which the unit may not see (PrivateTmp hides
	# a tree under /tmp, ProtectHome one under /home or /root): to
	# /var/lib/cwtest-unit, on the overlay, the library found through
	# LD_LIBRARY_PATH as an installed one would be through ld.so's path
	if ! copy_daemon "$bin"; then
		echo "cannot copy the daemon and libclockwise out of $top_builddir" >"$sdns_tmp/skip"
		exit 77
	fi
	cp "$top_srcdir/etc/clockwised.conf" /etc/clockwise/
	sed -e "s|^ExecStart=[^ ]*|ExecStart=$bin/clockwised|" \
		-e "s|^\\[Service\\]\$|&\\nEnvironment=LD_LIBRARY_PATH=$bin|" \
		"$top_builddir/etc/clockwised.service" >"$u/clockwised.service"
	check "sysusers snippet" systemd-sysusers "$top_srcdir/etc/clockwise.sysusers.conf"
	check "tmpfiles snippet" systemd-tmpfiles --create "$top_srcdir/etc/clockwise.tmpfiles.conf"
	check "... /run/clockwise for the clockwise group" \
		test "$(stat -c %G /run/clockwise)" = clockwise

	sdns_manager_start

	check "start: returns once READY=1 came" sdctl start clockwised.service
	check "active" test "$(sdprop clockwised.service ActiveState)" = active
	check "STATUS" test "$(sdprop clockwised.service StatusText)" = "Serving 0 exports"
	check "--init created the pool in StateDirectory" test -s /var/lib/clockwise/pool.db
	pid=$(sdprop clockwised.service MainPID)
	check "CapabilityBoundingSet: chown dac_override net_bind_service ipc_lock sys_nice" \
		grep -q '^CapBnd:[[:space:]]*0000000000804403$' "/proc/$pid/status"
	check "NoNewPrivileges" grep -q '^NoNewPrivs:[[:space:]]*1$' "/proc/$pid/status"
	check "a seccomp filter (SystemCallArchitectures, MemoryDenyWriteExecute)" \
		grep -q '^Seccomp:[[:space:]]*2$' "/proc/$pid/status"
	caps_in_effect() {
		local eff
		eff=$(awk '/^CapEff:/ { print $2 }' "/proc/$1/status")
		(( (0x$eff & $2) == $2 ))
	}
	check "CAP_IPC_LOCK and CAP_SYS_NICE in effect" caps_in_effect "$pid" 0x804000
	# A sanitizer's shadow memory (terabytes reserved) cannot be locked:
	# the daemon says so and goes on; any other build locks its memory.
	if ldd "$bin/clockwised" 2>/dev/null | grep -q 'lib[at]san'; then
		echo "memory not locked: a sanitizer build"
	else
		check "memory locked (lock_memory)" \
			awk '/^VmLck:/ { exit !($2 > 0) }' "/proc/$pid/status"
	fi
	check "ProtectSystem=strict: / is read-only" \
		awk '$5 == "/" { split($6, o, ","); ro = o[1] == "ro" } END { exit !ro }' \
		"/proc/$pid/mountinfo"
	touch /tmp/cwtest-unit-marker.$$
	cleanup_add "rm -f /tmp/cwtest-unit-marker.$$"
	check "PrivateTmp" test ! -e "/proc/$pid/root/tmp/cwtest-unit-marker.$$"
	check "control socket for the clockwise group" \
		test "$(stat -c %G /run/clockwise/control)" = clockwise
	check "cwctl status" cwctl status
	sdns_serve_export

	# WATCHDOG=1: with a 1 s watchdog the manager's ping time moves
	mkdir -p "$u/clockwised.service.d"
	printf '[Service]\nWatchdogSec=1s\n' >"$u/clockwised.service.d/watchdog.conf"
	sdctl daemon-reload
	check "restart with a 1 s watchdog" sdctl restart clockwised.service
	pinged_since() { test "$(sdprop clockwised.service WatchdogTimestampMonotonic)" != "$1"; }
	local w0
	w0=$(sdprop clockwised.service WatchdogTimestampMonotonic)
	check "it pings" wait_for "a watchdog ping" 5 pinged_since "$w0"
	w0=$(sdprop clockwised.service WatchdogTimestampMonotonic)
	check "and again" wait_for "a second ping" 5 pinged_since "$w0"
	check "still active" test "$(sdprop clockwised.service ActiveState)" = active
	rm -r "$u/clockwised.service.d"
	sdctl daemon-reload

	check "stop" sdctl stop clockwised.service
	check "stopped cleanly (exit 0, no timeout or signal)" \
		test "$(sdprop clockwised.service Result)/$(sdprop clockwised.service ExecMainStatus)" = success/0
	check "RuntimeDirectory removed" test ! -e /run/clockwise/control
	check "start again" sdctl start clockwised.service
	check "the pool as left" qemu-io -f raw -c "read -P 0x3c 0 1M" \
		"nbd+unix:///vol?socket=/run/clockwise/nbd.sock"
	check "stop again" sdctl stop clockwised.service
	sdns_manager_stop
}
# copy_daemon DIR: the daemon just built (the program behind libtool's
# wrapper) and the libclockwise it runs with, into DIR.
copy_daemon() {
	local real lib
	real=$("$top_builddir/libtool" --mode=execute echo "$top_builddir/daemon/clockwised") &&
		[ -x "$real" ] || return 1
	mkdir -p "$1" && cp "$real" "$1/clockwised" || return 1
	lib=$(LD_LIBRARY_PATH=$top_builddir/libclockwise/.libs ldd "$real" |
		awk '$1 ~ /^libclockwise\.so/ { print $3 }')
	[ -n "$lib" ] && cp -L "$lib" "$1/" || return 1
	LD_LIBRARY_PATH=$1 ldd "$1/clockwised" | grep -q "libclockwise.* => $1/"
}
if sdns_inner; then
	inner
	exit
fi

# ---- outside ----
requires systemd-sysusers systemd-tmpfiles qemu-io
sdns_prepare
[ -f "$top_builddir/etc/clockwised.service" ] ||
	make -C "$top_builddir" etc/clockwised.service >/dev/null
sdns_enter
