#!/bin/bash
# Description: the Debian packages as built (clockwise, libclockwise0,
# libclockwise-dev) install with dpkg -i, and the installed files alone
# serve an export: the packaged, unchanged clockwised.service, run by a
# systemd user manager of the test's own (tests/integration/sd-namespace.sh:
# as root, in a private mount namespace where /etc, /usr and /var are
# overlays and /run is empty, so neither the files nor the dpkg database
# of the machine change), starts /usr/sbin/clockwised with the packaged
# /etc/clockwise/clockwised.conf; /usr/sbin/cwctl adds a disk, a partition
# and its export; qemu-io writes and reads it back through the NBD
# socket.  Checked on the way: the maintainer scripts made the groups
# (sysusers) and /run/clockwise (tmpfiles) and enabled the unit; dpkg
# --verify finds every installed file as shipped; a program that
# includes every header of libclockwise-dev builds with its .pc and runs;
# purge removes the conffile.  Afterwards, outside: dpkg knows no
# clockwise, no file of the packages exists, and the machine's dpkg
# database, /etc/group and cgroups are as they were.  Not part of make
# check (it needs the built packages):
#   tests/package/test-deb.sh DIR    or    CW_DEBS=DIR tests/package/test-deb.sh
# scripts/package builds the packages and runs it.  Skipped (77) without
# root, systemd, overlayfs, qemu-io, a compiler or a writable cgroup
# hierarchy, or when clockwise is installed on the machine.
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/../integration/sd-namespace.sh"

debs=${1:-${CW_DEBS:-}}
deb_files() {
	local p
	for p in libclockwise0 libclockwise-dev clockwise; do
		ls "$debs/${p}_"*.deb 2>/dev/null | sort -V | tail -n 1
	done
}

# ---- inside the mount namespace ----
# build_against_dev PROG: a program that includes every installed header
# and calls the library, built with what libclockwise.pc says.
build_against_dev() {
	local h
	{
		for h in /usr/include/clockwise/*.h; do echo "#include <clockwise/${h##*/}>"; done
		echo 'int main(void) { uint64_t b = 0;'
		echo '  return cw_units_parse_size("64M", &b) == 0 && b == 64 << 20 ? 0 : 1; }'
	} >"$1.c"
	# shellcheck disable=SC2046
	cc -Wall -Werror -o "$1" "$1.c" $(pkg-config --cflags --libs libclockwise) &&
		ldd "$1" | grep -q 'libclockwise\.so\.0 => /'
}

inner() {
	local unit
	cwctl() { /usr/sbin/cwctl "$@"; }
	sdns_mounts etc usr var
	# /run/systemd/system does not exist yet: the maintainer scripts
	# enable the unit but start nothing (deb-systemd-invoke, like
	# invoke-rc.d, starts units only under a running system manager).
	# shellcheck disable=SC2046
	check "dpkg -i the three packages" dpkg -i $(deb_files)
	check "dpkg knows clockwise" dpkg -s clockwise
	check "dpkg --verify: every installed file as shipped" \
		dpkg --verify clockwise libclockwise0 libclockwise-dev
	check "postinst (sysusers): group clockwise" getent group clockwise
	check "postinst (sysusers): group clockwise-admin" getent group clockwise-admin
	check "postinst (tmpfiles): /run/clockwise for the clockwise group" \
		test "$(stat -c %G /run/clockwise 2>/dev/null)" = clockwise
	check "postinst: the unit enabled for multi-user.target" \
		test -L /etc/systemd/system/multi-user.target.wants/clockwised.service
	check "the conffile /etc/clockwise/clockwised.conf" \
		grep -qx /etc/clockwise/clockwised.conf /var/lib/dpkg/info/clockwise.conffiles
	unit=$(dpkg -L clockwise | grep '/systemd/system/clockwised\.service$')
	check "the unit from the package: $unit" test -f "$unit"
	check "libclockwise-dev: every header, the .pc and the .so build a program" \
		build_against_dev "$cw_tmp/prog"
	check "... that runs with libclockwise.so.0" "$cw_tmp/prog"

	# The installed unit as it is, linked into the user manager's path.
	# A user manager puts StateDirectory= below $XDG_CONFIG_HOME (systemd
	# 252): /var/lib/clockwise is made here, as the system manager would.
	mkdir -p /var/lib/clockwise
	sdns_manager_start
	ln -s "$unit" /run/systemd/user/clockwised.service
	sdctl daemon-reload
	check "start: returns once READY=1 came" sdctl start clockwised.service
	check "the daemon is /usr/sbin/clockwised" \
		test "$(readlink "/proc/$(sdprop clockwised.service MainPID)/exe")" = /usr/sbin/clockwised
	check "STATUS" test "$(sdprop clockwised.service StatusText)" = "Serving 0 exports"
	check "--init created the pool of the packaged clockwised.conf" \
		test -s /var/lib/clockwise/pool.db
	check "cwctl status" cwctl status
	sdns_serve_export
	check "read back through NBD" qemu-io -f raw -c "read -P 0x3c 0 1M" \
		"nbd+unix:///vol?socket=/run/clockwise/nbd.sock"
	check "stop" sdctl stop clockwised.service
	check "stopped cleanly (exit 0)" \
		test "$(sdprop clockwised.service Result)/$(sdprop clockwised.service ExecMainStatus)" = success/0
	rm /run/systemd/user/clockwised.service
	sdns_manager_stop

	check "dpkg --purge the three packages" \
		dpkg --purge clockwise libclockwise-dev libclockwise0
	check "purge removed the conffile" test ! -e /etc/clockwise/clockwised.conf
}
if sdns_inner; then
	inner
	exit
fi

# ---- outside ----
[ -n "$debs" ] || { echo "usage: $0 DIR (the directory of the built .debs), or CW_DEBS=DIR" >&2; exit 2; }
[ "$(deb_files | wc -w)" -eq 3 ] || { echo "$0: not the three packages in $debs" >&2; exit 2; }
requires dpkg dpkg-deb qemu-io cc pkg-config
dpkg -s clockwise >/dev/null 2>&1 && skip "clockwise is installed on this machine"
sdns_prepare
dpkg_before=$(md5sum </var/lib/dpkg/status)
# the files (not directories) the packages hold
shipped=$(for d in $(deb_files); do dpkg-deb -c "$d"; done | awk '$1 !~ /^d/ { sub(/^\./, "", $6); print $6 }')
sdns_enter CW_DEBS="$(cd "$debs" && pwd)"
expect_fail "outside: dpkg -s clockwise" dpkg -s clockwise
check "outside: the dpkg database is as it was" test "$(md5sum </var/lib/dpkg/status)" = "$dpkg_before"
none_installed() {
	local f
	for f in $shipped; do
		{ [ -e "$f" ] || [ -L "$f" ]; } && { echo "left on the machine: $f"; return 1; }
	done
	return 0
}
check "outside: no file of the packages on the machine" none_installed
