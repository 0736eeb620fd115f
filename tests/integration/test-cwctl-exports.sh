#!/usr/bin/env bash
# Description: the export set is what was exported, against clockwised
# with the default exports.all (false): exports made with cwctl are
# served again after a restart, under their names, and a partition never
# exported is not; one removed stays removed; the ready line counts them
# as export list does.  export list shows the clients connected (uid and
# pid of a real qemu-io), and export remove refuses while one is
# connected, naming it, until --force, which disconnects it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq qemu-io nbdinfo

names() { cwctl --json export list | jq -r '[.[].name] | join(",")'; }
served() { nbdinfo --list --json "nbd+unix:///?socket=$CTL_NBD" | jq -r '[.exports[]."export-name"] | sort | join(",")'; }
ready() { grep -o 'ready: [^,]*' "$CTL_LOG" | tail -n1; }
restart() { ctl_stop && ctl_start "$cw_tmp" --no-export-all; }

ctl_start "$cw_tmp" --no-export-all
for p in a b c; do cwctl part create "$p" --size 8M >/dev/null; done
check "nothing exported at first" test "$(ready)" = "ready: 0 exports"
check "export add a" cwctl export add a
check "export add b as bee, read-only" cwctl export add b --name bee --readonly
check "restart" restart
check "the same exports after it" test "$(names)" = "a,bee"
check "and served, c not" test "$(served)" = "a,bee"
check "bee is still read-only" test "$(cwctl --json export list | jq '.[] | select(.name == "bee") | .readonly')" = true
check "the ready line counts them as export list" test "$(ready)" = "ready: 2 exports"
check "export remove bee" cwctl export remove bee
check "restart again" restart
check "a removed export stays removed" test "$(names)" = a
check "ready: 1 export" test "$(ready)" = "ready: 1 export"

# A client connected: listed, and a removal needs --force.
fifo=$cw_tmp/qemu-in
mkfifo "$fifo"
qemu-io -f raw "nbd+unix:///a?socket=$CTL_NBD" <"$fifo" >"$cw_tmp/qemu-out" 2>&1 &
qpid=$!
exec 3>"$fifo"		# qemu-io's standard input stays open: it stays connected
cleanup_add "exec 3>&-; kill $qpid 2>/dev/null"
connected() { test "$(cwctl --json export list | jq '.[0].connections')" = "$1"; }
check "the client shows in export list" wait_for "qemu-io to connect" 20 connected 1
check "... by uid and pid" test "$(cwctl --json export list | jq -c '.[0].clients[0] | [.uid, .pid]')" = "[0,$qpid]"
check "... and in the table" bash -c 'grep -q "^a .* uid 0 pid $1$" <<<"$0"' "$(cwctl export list)" "$qpid"
out=$(cwctl export remove a 2>&1)
check "remove without --force: refused, naming it" test "$out" = \
	"cwctl export remove: export a has 1 client connected: removing it disconnects it; say so with force (cwctl export remove --force) (busy)"
check "--json: the client in the details" test "$(cwctl --json export remove a 2>&1 >/dev/null |
	jq '.details.clients[0].pid')" = "$qpid"
check "the refusal kept the export" test "$(served)" = a
check "remove --force disconnects it" cwctl export remove a --force
check "gone" test "$(names)" = ""
echo "read 0 4k" >&3
echo quit >&3
exec 3>&-
wait "$qpid" 2>/dev/null
check "the client was cut off: its next read fails" grep -qiE "fail|error" "$cw_tmp/qemu-out"
check "removing one nobody uses needs no --force" bash -c \
	'"$0" --socket "$1" export add c >/dev/null && "$0" --socket "$1" export remove c >/dev/null' "$CWCTL" "$CTL_SOCK"
check "the server stops cleanly" ctl_stop
