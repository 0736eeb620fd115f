#!/usr/bin/env bash
# Description: who may do what on the control socket, decided from the
# peer's credentials (SO_PEERCRED): an unprivileged user outside the
# groups gets permission-denied for reading and changing; a member of the
# read group may read but not change; a member of the admin group may
# change; root may do all.  Refusals change nothing.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires setpriv jq truncate getent
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root to switch users"; trap - EXIT; rm -rf "$cw_tmp"; exit 77; }
getent passwd nobody >/dev/null && getent group nogroup >/dev/null ||
	{ echo "SKIP: no nobody/nogroup"; trap - EXIT; rm -rf "$cw_tmp"; exit 77; }

d=$cw_tmp
chmod 755 "$d"	# the socket's directory: reachable by the unprivileged user
getent group users >/dev/null || { echo "SKIP: no group users"; trap - EXIT; rm -rf "$cw_tmp"; exit 77; }
nogroup=$(getent group nogroup | cut -d: -f3)
admin_gid=$(getent group users | cut -d: -f3)

as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$CWCTL" --socket "$CTL_SOCK" "$@"; }
as_admin() { setpriv --reuid=nobody --regid=nogroup --groups="$admin_gid" "$CWCTL" --socket "$CTL_SOCK" "$@"; }

# 1. Root only (the configured groups do not exist): the socket is opened
#    to everyone (0666) so the credentials, not the file mode, decide.
ctl_start "$d"
check "the missing groups are logged" grep -q 'no group "cw-test-no-group"' "$CTL_LOG"
chmod 0666 "$CTL_SOCK"
check "disks" ctl_disks "$d"
check "root may change" cwctl part create media --size 16M
check "nobody may not read" test "$(ctl_code as_nobody status)" = permission-denied
check "nobody may not list" test "$(ctl_code as_nobody part list)" = permission-denied
check "nobody may not create" test "$(ctl_code as_nobody part create x --size 1M)" = permission-denied
check "nobody may not delete" test "$(ctl_code as_nobody part delete media)" = permission-denied
check "nobody may not reserve" test "$(ctl_code as_nobody resv create media --rate 1MB/s --block 1M)" = permission-denied
as_nobody status >/dev/null 2>&1; rc=$?
check "a permission error exits 1" test "$rc" -eq 1
check "nothing changed" test "$(cwctl --json part list | jq -r '[.[].name] | join(",")')" = media
check "no reservation was made" test "$(cwctl --json resv list | jq length)" -eq 0
ctl_stop
d=$cw_tmp/second	# a new pool on new disks
mkdir -m 755 "$d"

# 2. A read group (nogroup) and an admin group (users), by name in the
#    configuration.
ctl_start "$d" --read-group nogroup --admin-group users
check "the socket file is group $nogroup, mode 0660" test "$(stat -c %g:%a "$CTL_SOCK")" = "$nogroup:660"
check "disks" ctl_disks "$d"
check "the read group may read status" as_nobody status
check "the read group may list disks" test "$(as_nobody --json disk list | jq length)" -eq 3
check "the read group may not create" test "$(ctl_code as_nobody part create x --size 1M)" = permission-denied
check "the read group may not calibrate" test "$(ctl_code as_nobody disk calibrate ssd0 --quick)" = permission-denied
check "the admin group may create" as_admin part create adm --size 8M
check "the admin group may reserve" as_admin resv create adm --rate 1MB/s --block 64K
check "the admin group may release" as_admin resv release 1
check "root still may" cwctl part delete adm
check "the server stops cleanly" ctl_stop
