#!/bin/bash
# Description: who may connect to clockwised's NBD socket and use which
# export.  The socket gets the configured mode and group whatever the
# umask; users and groups in read_write may write, those in read_only see
# the export read-only, everyone else neither sees nor opens it; a second
# daemon does not take over a live socket.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires nbdinfo qemu-io setpriv jq
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root to act as other users"; exit 77; }

# Clients run as users with no name: uids and gids of their own.
writer_gid=4242
reader_uid=4243
stranger_uid=4244
as() { local uid=$1 gid=$2; shift 2; setpriv --reuid="$uid" --regid="$gid" --clear-groups "$@"; }
chmod 0711 "$cw_tmp"

check "pool" cwd_pool 32M a
check "partition shared" cwd_part shared 4M
check "partition private" cwd_part private 4M
cat >"$cwd_cfg" <<EOC
pool = "$cwd_db";
listen = { unix = [ "$cwd_sock" ]; unix_mode = "0666"; unix_group = "$writer_gid"; };
control_socket = "$cw_tmp/control";
log_level = "debug";
exports = { all = true; };
access = {
  read_write = [ "@$writer_gid" ];
  read_only = [ "$reader_uid" ];
  exports = ( { name = "private"; read_write = [ "@$writer_gid" ]; } );
};
EOC
umask 000
cwd_start
umask 022
check "the socket has the configured mode under umask 000" \
	test "$(stat -c %a "$cwd_sock")" = 666
check "and the configured group" test "$(stat -c %g "$cwd_sock")" = "$writer_gid"

uri_shared=$(cwd_uri shared)
uri_private=$(cwd_uri private)
list_as() { as "$1" "$2" nbdinfo --list --json "nbd+unix:///?socket=$cwd_sock" |
	jq -r '[.exports[]."export-name"] | sort | join(",")'; }
check "a writer lists both exports" test "$(list_as 5000 $writer_gid)" = "private,shared"
check "a reader lists only the one it may read" test "$(list_as $reader_uid 5000)" = "shared"
check "a stranger lists nothing" test "$(list_as $stranger_uid 5000)" = ""

check "a writer writes" as 5000 $writer_gid qemu-io -f raw "$uri_shared" \
	-c 'write -P 0x5a 0 64k' -c 'read -P 0x5a 0 64k'
check "a reader reads what was written" as $reader_uid 5000 qemu-io -r -f raw "$uri_shared" \
	-c 'read -P 0x5a 0 64k'
check "a reader is told the export is read-only" bash -c \
	"setpriv --reuid=$reader_uid --regid=5000 --clear-groups nbdinfo --json '$uri_shared' |
	 jq -e '.exports[0].is_read_only == true'"
expect_fail "a reader cannot write" as $reader_uid 5000 qemu-io -f raw "$uri_shared" \
	-c 'write -P 0x11 0 4k'
check "and nothing of it landed" qemu-io -r -f raw "$uri_shared" -c 'read -P 0x5a 0 64k'
expect_fail "a reader cannot open an export not granted to it" \
	as $reader_uid 5000 nbdinfo --size "$uri_private"
check "the refusal says why" bash -c \
	"setpriv --reuid=$reader_uid --regid=5000 --clear-groups nbdinfo --size '$uri_private' 2>&1 |
	 grep -qi 'policy'"
expect_fail "a stranger cannot open any" as $stranger_uid 5000 nbdinfo --size "$uri_shared"
check "a supplementary group counts" setpriv --reuid=5000 --regid=5000 \
	--groups=$writer_gid nbdinfo --size "$uri_private"
check "root may use every export" nbdinfo --size "$uri_private"

# A second daemon (a pool and control socket of its own) on the same NBD
# socket refuses to start and leaves the first one serving.
check "a second pool" "$cwpool" create "$cw_tmp/second.db"
cat >"$cw_tmp/second.conf" <<EOC
pool = "$cw_tmp/second.db";
listen = { unix = [ "$cwd_sock" ]; };
control_socket = "$cw_tmp/second.control";
EOC
expect_fail "a second daemon does not start on a live socket" \
	"$cwd_bin" -f -c "$cw_tmp/second.conf"
check "it says the socket is in use" bash -c \
	"'$cwd_bin' -f -c '$cw_tmp/second.conf' 2>&1 | grep -q 'in use'"
check "the first one still serves" nbdinfo --size "$uri_shared"
check "clean stop" cwd_stop

# A socket left by a daemon that is gone is replaced.
cwd_start
cwd_kill9
check "the dead daemon's socket file is still there" test -S "$cwd_sock"
cwd_start
check "a new daemon replaced it" nbdinfo --size "$uri_shared"
check "clean stop" cwd_stop
