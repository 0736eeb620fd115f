# Sourced, after lib.sh, by the tests that run clockwised.service under a
# systemd of their own that they tear down again:
# tests/integration/test-systemd-service.sh (the unit as built) and
# tests/package/test-deb.sh (the unit as the package installs it).
#
# Such a test runs twice.  Outside, as root, it makes a cgroup for a
# systemd user manager (sdns_prepare) and runs itself again (sdns_enter)
# in a private mount namespace (unshare -m), where sdns_inner is true.
# There it mounts an empty /run and overlays over the directories it
# writes (sdns_mounts), so nothing reaches the machine's, and starts the
# manager as root, so that the unit's sandboxing and capabilities apply
# (sdns_manager_start).  With XDG_CONFIG_HOME=/etc, XDG_STATE_HOME=/var/lib
# and XDG_RUNTIME_DIR=/run the unit's directories are the system ones.
# The inner run's counts are added to the outer's; the manager's log is
# shown when anything failed.  On a machine booted with systemd the
# manager would otherwise find the real one.
#
#   skip REASON          outside: exit 77, saying why
#   sdns_prepare         outside: skip without root, systemd, unshare or a
#                        writable cgroup hierarchy; make the manager's cgroup
#   sdns_enter [VAR=VALUE...]  outside: run "$0" in the namespace, with the
#                        VARs in its environment; then check that the
#                        machine's cgroups and /etc/group are as they were
#   sdns_inner           true inside the namespace
#   sdns_tmp             inside: the outer run's temporary directory
#   sdns_mounts DIR...   inside: a tmpfs on /run, an overlay over each /DIR
#                        (a skip when one cannot be mounted)
#   sdns_manager_start, sdns_manager_stop   inside: the user manager
#   sdctl ARGS...        inside: systemctl --user for that manager
#   sdprop UNIT PROP     inside: a property of UNIT
#   sdns_serve_export    inside: with the caller's cwctl function, a disk
#                        (a file in /var/lib/clockwise), a partition "vol",
#                        its export, and 1 MiB written to it through NBD

skip() { echo "SKIP: $*"; rm -rf "$cw_tmp"; trap - EXIT; exit 77; }

sdns_inner() { [ -n "${CW_SDNS_INNER:-}" ]; }

# ---- outside ----
sdns_prepare() {
	[ "$(id -u)" = 0 ] || skip "a user manager that applies the unit's sandboxing needs root"
	requires unshare systemctl
	local sd
	sd=$(command -v systemd || true)
	[ -x "${sd:-/lib/systemd/systemd}" ] || skip "systemd is not installed"
	# The manager's own cgroup: in the named systemd hierarchy and the
	# unified one (a hybrid machine), or the unified one alone.
	local cg=cwtest-unit.$$
	sdns_cgroups=
	if [ -d /sys/fs/cgroup/systemd ]; then
		sdns_cgroups="/sys/fs/cgroup/systemd/$cg"
		[ -d /sys/fs/cgroup/unified ] && sdns_cgroups="$sdns_cgroups /sys/fs/cgroup/unified/$cg"
	elif [ -f /sys/fs/cgroup/cgroup.procs ]; then
		sdns_cgroups="/sys/fs/cgroup/$cg"
	fi
	[ -n "$sdns_cgroups" ] || skip "no cgroup hierarchy for a manager"
	sdns_cgroups_before=$(sdns_cgroups_now)
	sdns_groups_before=$(md5sum </etc/group)
	# shellcheck disable=SC2086
	mkdir $sdns_cgroups 2>/dev/null || skip "cannot make a cgroup for the manager"
	cleanup_add sdns_remove_cgroups
}
sdns_cgroups_now() { ls /sys/fs/cgroup/*/ /sys/fs/cgroup/ 2>/dev/null | grep -v '^cwtest-unit\.'; }
sdns_remove_cgroups() {
	local c
	for c in $sdns_cgroups; do
		[ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	return 0
}

sdns_enter() {
	local rc p f
	env "$@" CW_SDNS_INNER=1 CW_SDNS_TMP="$cw_tmp" CW_SDNS_CGROUPS="$sdns_cgroups" \
		top_builddir="$top_builddir" top_srcdir="$top_srcdir" \
		unshare -m --propagation private bash "$0"
	rc=$?
	[ $rc -eq 77 ] && { sdns_remove_cgroups; skip "$(cat "$cw_tmp/skip" 2>/dev/null)"; }
	read -r p f <"$cw_tmp/counts" || { p=0; f=1; }
	cw_passed=$((cw_passed + p))
	cw_failed=$((cw_failed + f))
	[ "$f" -eq 0 ] || { echo "the manager's log:"; cat "$cw_tmp/manager.log"; }
	sdns_remove_cgroups
	check "the machine's cgroups are as they were" test "$(sdns_cgroups_now)" = "$sdns_cgroups_before"
	check "the machine's /etc/group is as it was" test "$(md5sum </etc/group)" = "$sdns_groups_before"
}

# ---- inside ----
sdns_tmp=${CW_SDNS_TMP:-}
sdctl() { XDG_RUNTIME_DIR=/run systemctl --user "$@"; }
sdprop() { sdctl show -P "$2" "$1"; }

# The counts go to the outer run, the cleanups run, and the manager (and
# with it the unit) ends with the test, whatever happens.
sdns_finish() {
	local c
	for c in "${cw_cleanups[@]}"; do eval "$c" || true; done
	echo "$cw_passed $cw_failed" >"$sdns_tmp/counts"
	rm -rf "$cw_tmp"
	[ -s "$sdns_tmp/manager.pid" ] && kill "$(cat "$sdns_tmp/manager.pid")" 2>/dev/null
	return 0
}
sdns_inner && trap sdns_finish EXIT

sdns_mounts() {
	local d
	mount -t tmpfs -o mode=0755 tmpfs /run || { echo "cannot mount /run" >"$sdns_tmp/skip"; exit 77; }
	for d in "$@"; do
		mkdir -p "$sdns_tmp/up/$d" "$sdns_tmp/work/$d"
		mount -t overlay overlay -o "lowerdir=/$d,upperdir=$sdns_tmp/up/$d,workdir=$sdns_tmp/work/$d" \
			"/$d" || { echo "no overlayfs over /$d" >"$sdns_tmp/skip"; exit 77; }
	done
}

sdns_manager_start() {
	local sd
	mkdir -p /run/systemd/system /run/systemd/user
	printf '[Unit]\nDescription=nothing but the manager\n' >/run/systemd/user/cwtest.target
	sd=$(command -v systemd || echo /lib/systemd/systemd)
	(
		for c in $CW_SDNS_CGROUPS; do echo "$BASHPID" >"$c/cgroup.procs" || exit 1; done
		exec env XDG_RUNTIME_DIR=/run XDG_CONFIG_HOME=/etc XDG_STATE_HOME=/var/lib \
			HOME="$sdns_tmp" "$sd" --user --unit=cwtest.target --log-target=console
	) >"$sdns_tmp/manager.log" 2>&1 &
	echo $! >"$sdns_tmp/manager.pid"
	check "the manager answers" wait_for "systemd --user" 20 sdctl is-active cwtest.target
}

# The mounts stay: they end with the namespace, and what runs after this
# must not reach the machine's directories.
sdns_manager_stop() {
	sdctl exit
	wait "$(cat "$sdns_tmp/manager.pid")"
	: >"$sdns_tmp/manager.pid"
}

sdns_serve_export() {
	truncate -s 64M /var/lib/clockwise/d0.img
	check "disk add" cwctl disk add /var/lib/clockwise/d0.img --name d0
	check "part create" cwctl part create vol --size 8M
	check "export add" cwctl export add vol
	check "write through NBD" qemu-io -f raw -c "write -P 0x3c 0 1M" \
		"nbd+unix:///vol?socket=/run/clockwise/nbd.sock"
}
