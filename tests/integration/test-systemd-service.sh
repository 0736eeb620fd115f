#!/bin/bash
# Description: the shipped clockwised.service, sysusers and tmpfiles
# snippets and clockwised.conf, run by a systemd of the test's own that
# it tears down again: a user manager (as root, so the unit's sandboxing
# and capabilities apply) in a private mount namespace where /etc and
# /var/lib are overlays (nothing written reaches the machine's) and /run is
# empty.  With XDG_CONFIG_HOME=/etc, XDG_STATE_HOME=/var/lib and
# XDG_RUNTIME_DIR=/run the unit's directories are the system ones.  Only
# ExecStart's path changes, to a copy of the daemon just built outside the
# build tree (which PrivateTmp or ProtectHome may hide: a tree under /tmp
# or /home), with an Environment= line for its library (and
# /var/lib/clockwise is made beforehand: a user manager puts
# StateDirectory elsewhere).  Checked: start
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
skip() { echo "SKIP: $*"; rm -rf "$cw_tmp"; trap - EXIT; exit 77; }

# ---- inside the mount namespace ----
inner() {
	local sd pid u=/run/systemd/user bin=/var/lib/cwtest-unit
	t=$CW_UNIT_TMP
	sdctl() { XDG_RUNTIME_DIR=/run systemctl --user "$@"; }
	prop() { sdctl show -P "$2" "$1"; }
	cwctl() { "$top_builddir/tools/cwctl" --socket /run/clockwise/control "$@"; }
	# the manager (and with it the unit) ends with the test, whatever happens
	trap 'echo "$cw_passed $cw_failed" >"$t/counts"; rm -rf "$cw_tmp"
	      [ -s "$t/manager.pid" ] && kill "$(cat "$t/manager.pid")" 2>/dev/null' EXIT

	mount -t tmpfs -o mode=0755 tmpfs /run || { echo "cannot mount /run" >"$t/skip"; exit 77; }
	for d in etc var/lib; do
		mkdir -p "$t/up/$d" "$t/work/$d"
		mount -t overlay overlay -o "lowerdir=/$d,upperdir=$t/up/$d,workdir=$t/work/$d" \
			"/$d" || { echo "no overlayfs over /$d" >"$t/skip"; exit 77; }
	done
	# A user manager puts StateDirectory= below $XDG_CONFIG_HOME (systemd
	# 252), not $XDG_STATE_HOME: /var/lib/clockwise is made here, as the
	# system manager would.
	mkdir -p /run/systemd/system "$u" /etc/clockwise /var/lib/clockwise
	# as make install puts them; the daemon and its library are copied
	# out of the build tree, which the unit may not see (PrivateTmp hides
	# a tree under /tmp, ProtectHome one under /home or /root): to
	# /var/lib/cwtest-unit, on the overlay, the library found through
	# LD_LIBRARY_PATH as an installed one would be through ld.so's path
	if ! copy_daemon "$bin"; then
		echo "cannot copy the daemon and libclockwise out of $top_builddir" >"$t/skip"
		exit 77
	fi
	cp "$top_srcdir/etc/clockwised.conf" /etc/clockwise/
	sed -e "s|^ExecStart=[^ ]*|ExecStart=$bin/clockwised|" \
		-e "s|^\\[Service\\]\$|&\\nEnvironment=LD_LIBRARY_PATH=$bin|" \
		"$top_builddir/etc/clockwised.service" >"$u/clockwised.service"
	printf '[Unit]\nDescription=nothing but the manager\n' >"$u/cwtest.target"
	check "sysusers snippet" systemd-sysusers "$top_srcdir/etc/clockwise.sysusers.conf"
	check "tmpfiles snippet" systemd-tmpfiles --create "$top_srcdir/etc/clockwise.tmpfiles.conf"
	check "... /run/clockwise for the clockwise group" \
		test "$(stat -c %G /run/clockwise)" = clockwise

	sd=$(command -v systemd || echo /lib/systemd/systemd)
	(
		for c in $CW_UNIT_CGROUPS; do echo "$BASHPID" >"$c/cgroup.procs" || exit 1; done
		exec env XDG_RUNTIME_DIR=/run XDG_CONFIG_HOME=/etc XDG_STATE_HOME=/var/lib \
			HOME="$t" "$sd" --user --unit=cwtest.target --log-target=console
	) >"$t/manager.log" 2>&1 &
	echo $! >"$t/manager.pid"
	check "the manager answers" wait_for "systemd --user" 20 sdctl is-active cwtest.target

	check "start: returns once READY=1 came" sdctl start clockwised.service
	check "active" test "$(prop clockwised.service ActiveState)" = active
	check "STATUS" test "$(prop clockwised.service StatusText)" = "Serving 0 exports"
	check "--init created the pool in StateDirectory" test -s /var/lib/clockwise/pool.db
	pid=$(prop clockwised.service MainPID)
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
	truncate -s 64M /var/lib/clockwise/d0.img
	check "disk add" cwctl disk add /var/lib/clockwise/d0.img --name d0
	check "part create" cwctl part create vol --size 8M
	check "export add" cwctl export add vol
	check "write through NBD" qemu-io -f raw -c "write -P 0x3c 0 1M" \
		"nbd+unix:///vol?socket=/run/clockwise/nbd.sock"

	# WATCHDOG=1: with a 1 s watchdog the manager's ping time moves
	mkdir -p "$u/clockwised.service.d"
	printf '[Service]\nWatchdogSec=1s\n' >"$u/clockwised.service.d/watchdog.conf"
	sdctl daemon-reload
	check "restart with a 1 s watchdog" sdctl restart clockwised.service
	pinged_since() { test "$(prop clockwised.service WatchdogTimestampMonotonic)" != "$1"; }
	local w0
	w0=$(prop clockwised.service WatchdogTimestampMonotonic)
	check "it pings" wait_for "a watchdog ping" 5 pinged_since "$w0"
	w0=$(prop clockwised.service WatchdogTimestampMonotonic)
	check "and again" wait_for "a second ping" 5 pinged_since "$w0"
	check "still active" test "$(prop clockwised.service ActiveState)" = active
	rm -r "$u/clockwised.service.d"
	sdctl daemon-reload

	check "stop" sdctl stop clockwised.service
	check "stopped cleanly (exit 0, no timeout or signal)" \
		test "$(prop clockwised.service Result)/$(prop clockwised.service ExecMainStatus)" = success/0
	check "RuntimeDirectory removed" test ! -e /run/clockwise/control
	check "start again" sdctl start clockwised.service
	check "the pool as left" qemu-io -f raw -c "read -P 0x3c 0 1M" \
		"nbd+unix:///vol?socket=/run/clockwise/nbd.sock"
	check "stop again" sdctl stop clockwised.service
	sdctl exit
	wait "$(cat "$t/manager.pid")"
	: >"$t/manager.pid"
	umount /var/lib /etc /run 2>/dev/null
	:
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
if [ "${CW_UNIT_INNER:-}" ]; then
	inner
	exit
fi

# ---- outside: checks, the cgroup, the namespace ----
[ "$(id -u)" = 0 ] || skip "a user manager that applies the unit's sandboxing needs root"
requires unshare systemctl systemd-sysusers systemd-tmpfiles qemu-io
sd=$(command -v systemd || true)
[ -x "${sd:-/lib/systemd/systemd}" ] || skip "systemd is not installed"
[ -f "$top_builddir/etc/clockwised.service" ] ||
	make -C "$top_builddir" etc/clockwised.service >/dev/null
# The manager's own cgroup: in the named systemd hierarchy and the unified
# one (a hybrid machine), or the unified one alone.
cg=cwtest-unit.$$
cgroups=
if [ -d /sys/fs/cgroup/systemd ]; then
	cgroups="/sys/fs/cgroup/systemd/$cg"
	[ -d /sys/fs/cgroup/unified ] && cgroups="$cgroups /sys/fs/cgroup/unified/$cg"
elif [ -f /sys/fs/cgroup/cgroup.procs ]; then
	cgroups="/sys/fs/cgroup/$cg"
fi
[ -n "$cgroups" ] || skip "no cgroup hierarchy for a manager"
cgroups_now() { ls /sys/fs/cgroup/*/ /sys/fs/cgroup/ 2>/dev/null | grep -v '^cwtest-unit\.'; }
before=$(cgroups_now)
groups_before=$(md5sum </etc/group)
# shellcheck disable=SC2086
mkdir $cgroups 2>/dev/null || skip "cannot make a cgroup for the manager"
remove_cgroups() {
	local c
	for c in $cgroups; do
		[ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	return 0
}
cleanup_add remove_cgroups
# On a machine booted with systemd, the manager would find the real one.
CW_UNIT_INNER=1 CW_UNIT_TMP=$cw_tmp CW_UNIT_CGROUPS=$cgroups top_builddir=$top_builddir \
	top_srcdir=$top_srcdir unshare -m --propagation private bash "$0"
rc=$?
[ $rc -eq 77 ] && { remove_cgroups; skip "$(cat "$cw_tmp/skip" 2>/dev/null)"; }
read -r p f <"$cw_tmp/counts" || { p=0; f=1; }
cw_passed=$((cw_passed + p))
cw_failed=$((cw_failed + f))
[ $f -eq 0 ] || { echo "the manager's log:"; cat "$cw_tmp/manager.log"; }
remove_cgroups
check "the machine's cgroups are as they were" test "$(cgroups_now)" = "$before"
check "the machine's /etc/group is as it was" test "$(md5sum </etc/group)" = "$groups_before"
