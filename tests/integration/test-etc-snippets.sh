#!/usr/bin/env bash
# Description: the sysusers.d and tmpfiles.d snippets do what the control
# socket needs, applied to an empty root: the clockwise and
# clockwise-admin groups exist, and /run/clockwise is a directory of
# root and the clockwise group, mode 0750.
. "$(dirname "$0")/lib.sh"
requires systemd-sysusers systemd-tmpfiles
root=$cw_tmp/root
mkdir -p "$root/etc"
check "systemd-sysusers applies the snippet" \
	systemd-sysusers --root="$root" "$top_srcdir/etc/clockwise.sysusers.conf"
check "group clockwise" grep -q '^clockwise:' "$root/etc/group"
check "group clockwise-admin" grep -q '^clockwise-admin:' "$root/etc/group"
gid=$(sed -n 's/^clockwise:x:\([0-9]*\):.*/\1/p' "$root/etc/group")
check "systemd-tmpfiles applies the snippet" \
	systemd-tmpfiles --root="$root" --create "$top_srcdir/etc/clockwise.tmpfiles.conf"
check "/run/clockwise is root:clockwise 0750" test "$(stat -c %u:%g:%a "$root/run/clockwise")" = "0:$gid:750"
