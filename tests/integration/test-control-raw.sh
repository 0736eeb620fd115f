#!/usr/bin/env bash
# Description: raw lines on the control socket: malformed JSON, unknown
# commands, wrong types, a member named twice, NUL bytes and a line over the size limit each get
# an error reply with their stable code, in order, on the same connection,
# which goes on serving; progress lines precede the calibration's reply;
# a flood is rate-limited; and the server survives all of it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq truncate head

d=$cw_tmp
ctl_start_standin "$d" --rate-burst 30 --rate 1
check "disks" ctl_disks "$d"

{
	echo '{"cmd":"status"'
	echo 'not json at all'
	echo '{"cmd":"frobnicate"}'
	echo '{"cmd":"part.create","args":{"name":"a","size":"1G"}}'
	echo '{"cmd":"part.create","args":{"name":"a","size":1,"colour":"red"}}'
	echo '[1,2,3]'
	echo '{"cmd":"disk.list","args":{},"cmd":"disk.remove"}'
	printf '{"cmd":"status"}\0\n'
	printf '{"cmd":"disk.add","args":{"path":"/%s"}}\n' "$(head -c 70000 /dev/zero | tr '\0' a)"
	echo '{"cmd":"disk.list"}'
} > "$d/lines"
"$CTL_RAW" "$CTL_SOCK" < "$d/lines" > "$d/replies"
check "one reply per line" test "$(wc -l < "$d/replies")" -eq 10
codes=$(jq -r 'if .ok then "ok" else .error.code end' "$d/replies" | paste -sd, -)
check "codes in order ($codes)" test "$codes" = \
	"bad-request,bad-request,unknown-command,bad-request,bad-request,bad-request,bad-request,bad-request,too-large,ok"
check "a member named twice: refused, named" test "$(sed -n 7p "$d/replies" | jq -r .error.message)" = \
	'member "cmd" appears twice in one object: give each name once'
check "every error has a message" test "$(jq -s '[.[] | select(.ok == false) | .error.message | length > 0] | all' "$d/replies")" = true
check "the connection went on: disk.list answered" test "$(tail -n1 "$d/replies" | jq '.result | length')" -eq 3

# Progress lines, then the reply.
echo '{"cmd":"disk.calibrate","args":{"name":"ssd0","quick":true}}' |
	"$CTL_RAW" "$CTL_SOCK" > "$d/cal"
check "calibration streams progress" test "$(jq -r 'select(.progress) | .progress.phase' "$d/cal" | wc -l)" -gt 1
check "the final line is the reply" test "$(tail -n1 "$d/cal" | jq .ok)" = true
check "progress counts up to its total" test "$(jq -s '[.[] | select(.progress) | .progress.done <= .progress.total] | all' "$d/cal")" = true

# A flood: after the burst, rate-limited replies, and still one reply per line.
for i in $(seq 60); do echo '{"cmd":"status"}'; done | "$CTL_RAW" "$CTL_SOCK" > "$d/flood"
check "a reply for every flooded line" test "$(wc -l < "$d/flood")" -eq 60
check "the flood was rate-limited" test "$(jq -r 'select(.ok == false) | .error.code' "$d/flood" | sort -u)" = rate-limited
check "the burst was served" test "$(jq -r 'select(.ok) | 1' "$d/flood" | wc -l)" -ge 25

# An abrupt client does not take the server down.
printf '{"cmd":"sta' | "$CTL_RAW" "$CTL_SOCK" > "$d/cut"
check "a cut line gets its error" test "$(jq -r .error.code "$d/cut")" = bad-request
check "the server still answers" test "$(echo '{"cmd":"disk.list"}' | "$CTL_RAW" "$CTL_SOCK" | jq .ok)" = true
check "the server stops cleanly" ctl_stop
