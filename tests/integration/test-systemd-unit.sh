#!/usr/bin/env bash
# Description: systemd-analyze verify accepts etc/clockwised.service (as
# built, with ExecStart pointing at the clockwised just built) without a
# single complaint; the same check flags a unit with a bad setting, so it
# can fail.  systemd-analyze verify exits 0 on settings it ignores, so
# what counts is that it says nothing.
. "$(dirname "$0")/lib.sh"
requires systemd-analyze
unit=$top_builddir/etc/clockwised.service
[ -f "$unit" ] || make -C "$top_builddir" etc/clockwised.service >/dev/null
bin=$(cd "$top_builddir/daemon" && pwd)/clockwised

# verify UNIT-FILE: 0 if systemd-analyze accepts it and says nothing.
verify() {
	local out
	out=$(systemd-analyze verify --man=no "$1" 2>&1) || { echo "$out"; return 1; }
	[ -z "$out" ] || { echo "$out"; return 1; }
}

sed "s|^ExecStart=[^ ]*|ExecStart=$bin|" "$unit" >"$cw_tmp/clockwised.service"
check "ExecStart names the built daemon, creating a missing pool" \
	grep -q "^ExecStart=$bin --foreground --init$" "$cw_tmp/clockwised.service"
check "the unit is Type=notify with a watchdog" bash -c 'grep -q "^Type=notify$" "$0" && grep -q "^WatchdogSec=" "$0"' "$cw_tmp/clockwised.service"
check "systemd-analyze verify: clean" verify "$cw_tmp/clockwised.service"
mkdir "$cw_tmp/bad"
sed 's/^NoNewPrivileges=yes/NoNewPrivileges=perhaps/' "$cw_tmp/clockwised.service" >"$cw_tmp/bad/clockwised.service"
expect_fail "a bad setting is flagged" verify "$cw_tmp/bad/clockwised.service"
