#!/usr/bin/env bash
# Description: bash completion for cwctl, cwsim and cwstream
# (etc/bash-completion/cwctl): command groups and their commands, each
# command's options from its own --help, choices of an option, and names
# (partitions, disks) from a running daemon through the socket the line
# names; a line with no such daemon completes nothing and says nothing.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq
PATH=$top_builddir/tools:$PATH
. "$top_srcdir/etc/bash-completion/cwctl"

# comp FUNCTION WORD...: the completions of the line WORD... (the last
# word the one being completed), one per line, sorted.
comp() {
	local f=$1
	shift
	COMP_WORDS=("$@")
	COMP_CWORD=$(($# - 1))
	COMPREPLY=()
	"$f" 2>"$cw_tmp/comp.err"
	printf '%s\n' "${COMPREPLY[@]}" | sort
}
has() { grep -qx -- "$1"; }

check "cwctl: the command groups" bash -c '[ "$(echo $0)" = "disk export move part resv stats status" ]' \
	"$(comp _cwctl cwctl '')"
check "cwctl: a group's commands" has resize <<<"$(comp _cwctl cwctl part '')"
check "cwctl: only that group's" bash -c '! grep -qx calibrate <<<"$0"' "$(comp _cwctl cwctl part '')"
check "cwctl: a prefix" test "$(comp _cwctl cwctl part cr)" = create
check "cwctl: a command's options, from its --help" has --size <<<"$(comp _cwctl cwctl part create media --)"
check "cwctl: and every one of them" test "$(comp _cwctl cwctl part create media -- | wc -l)" -eq \
	"$(command cwctl part create --help | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u | wc -l)"
check "cwctl: an option's choices" test "$(comp _cwctl cwctl part create m --policy '' | tr '\n' ' ')" = \
	"random rotation single "
check "cwctl: the global options" has --socket <<<"$(comp _cwctl cwctl --)"
# No daemon behind the socket: no names, no noise on the terminal.
check "cwctl: no daemon, no names" test -z "$(comp _cwctl cwctl --socket "$cw_tmp/none" part show '')"
check "cwctl: and nothing printed" test ! -s "$cw_tmp/comp.err"

check "clockwised starts" ctl_start "$cw_tmp"
check "part create media" cwctl part create media --size 16M
check "part create menu" cwctl part create menu --size 16M
check "cwctl: partition names from the daemon" test \
	"$(comp _cwctl cwctl --socket "$CTL_SOCK" part show me | tr '\n' ' ')" = "media menu "
check "cwctl: for a reservation, too" has media <<<"$(comp _cwctl cwctl -s "$CTL_SOCK" resv create '')"
check "cwctl: disk names after --disk" test \
	"$(comp _cwctl cwctl -s "$CTL_SOCK" part create x --disk '' | tr '\n' ' ')" = "hdd0 hdd1 ssd0 "
check "cwctl: one name per command: nothing after it" \
	test -z "$(comp _cwctl cwctl -s "$CTL_SOCK" part show media '')"
check "stop" ctl_stop

check "cwsim: its commands" bash -c 'grep -qx run <<<"$0" && grep -qx plan <<<"$0"' "$(comp _cwsim cwsim '')"
check "cwsim: the model presets" has atlas2 <<<"$(comp _cwsim cwsim model '')"
check "cwstream: play and record" test "$(comp _cwstream cwstream p)" = play
check "cwstream: its options" bash -c 'grep -qx -- --rate <<<"$0" && grep -qx -- --ahead <<<"$0"' \
	"$(comp _cwstream cwstream play u --)"
check "cwstream: --due's choices" test "$(comp _cwstream cwstream play u --due '' | tr '\n' ' ')" = \
	"disk stream "
