#!/usr/bin/env bash
# Description: cwctl as people type it: --json and --socket after the
# command, errors as JSON with --json (the daemon's and cwctl's own),
# unknown or incomplete options named, and a missing or dead socket
# explained: which socket was tried and whether clockwised runs.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq python3

# --- no daemon on the socket (before one starts: none of ours runs)
out=$("$CWCTL" --socket "$cw_tmp/none" status 2>&1); rc=$?
check "a missing socket exits 3" test $rc -eq 3
check "a missing socket: which one, and what to do" grep -q \
	"^cwctl status: cannot connect to $cw_tmp/none: no such socket; clockwised is" <<<"$out"
# A socket nobody listens on: what a daemon that died leaves behind.
python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$cw_tmp/dead"
out=$("$CWCTL" --socket "$cw_tmp/dead" status 2>&1)
check "a dead socket: nothing listens there" grep -q \
	"cannot connect to $cw_tmp/dead: nothing listens there" <<<"$out"
out=$("$CWCTL" status --json --socket "$cw_tmp/none" 2>&1); rc=$?
check "no server, --json: a JSON error" test "$(jq -r .code <<<"$out")" = no-server
check "no server, --json: still exit 3" test $rc -eq 3

ctl_start "$cw_tmp"
check "with clockwised up, a wrong socket says it runs" bash -c \
	'"$0" --socket "$1" status 2>&1 | grep -q "clockwised is running (pid [0-9]*) but not on this socket"' \
	"$CWCTL" "$cw_tmp/none"

# --- options after the command
check "--json after the command" test "$("$CWCTL" disk list --json --socket "$CTL_SOCK" |
	jq length)" -eq 3
check "--socket=PATH after the command" test "$("$CWCTL" disk list --json \
	--socket="$CTL_SOCK" | jq length)" -eq 3
check "the same as before it" test "$("$CWCTL" --json --socket "$CTL_SOCK" part list)" = \
	"$("$CWCTL" part list --socket "$CTL_SOCK" --json)"
check "after --, --json is an argument" test "$(ctl_code cwctl part show -- --json)" = not-found

# --- errors with --json: the daemon's, and cwctl's own
err=$(cwctl part show nope --json 2>&1 >/dev/null)
check "a refusal as JSON" test "$(jq -c '[.code, .message]' <<<"$err")" = \
	'["not-found","no partition \"nope\""]'
err=$(cwctl part list --bogus --json 2>&1); rc=$?
check "an unknown option as JSON, exit 2" test "$rc $(jq -c . <<<"$err")" = \
	'2 {"code":"bad-usage","message":"unknown option --bogus"}'
check "an unknown option named" test "$(cwctl part list --bogus 2>&1 | head -n1)" = \
	"cwctl part list: unknown option --bogus"
check "a missing value named" test "$(cwctl part create x --size 2>&1 | head -n1)" = \
	"cwctl part create: option --size needs a value"
check "a short option named" test "$(cwctl part create x -s 2>&1 | head -n1)" = \
	"cwctl part create: option -s needs a value"
check "the server stops cleanly" ctl_stop
