#!/bin/bash
# Description: the README's walk-through ("Serving partitions") run as a
# new user would type it, line by line, on an empty scratch directory
# that stands for /var/tmp, with the programs just built first on PATH:
# each line must succeed and print what it should.  With
# CW_WALKTHROUGH_OUT=FILE the session is written there as a transcript
# (the one in docs/walkthrough.txt was made so), with the scratch
# directory shown as /var/tmp.
. "$(dirname "$0")/lib.sh"
requires nbdinfo nbdcopy
readme=$top_srcdir/README.md
scratch=$cw_tmp/var-tmp
mkdir -p "$scratch"
export PATH=$top_builddir/daemon:$top_builddir/tools:$PATH
out=${CW_WALKTHROUGH_OUT:-$cw_tmp/transcript}
bg_pids=()
# only the background steps still running (not reaped: no pid reused)
cleanup_add 'for p in $(jobs -p); do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done'

# The first sh block after the heading, as the README has it.
awk '/^## Serving partitions/ { s = 1 } s && /^```sh$/ { b = 1; next }
     b && /^```$/ { exit } b' "$readme" >"$cw_tmp/block"
check "the README has the walk-through" test -s "$cw_tmp/block"

# What each step must print (an extended regex over its output), by the
# start of its line; a step not listed must only succeed.
expect() {
	case $1 in
	"clockwised "*) echo 'ready: 0 exports' ;;
	"cwctl disk add"*) echo '^added disk hdd[01] \(id [12], hdd, ' ;;
	"cwctl disk calibrate"*) echo '^calibrated hdd[01]: worst case ' ;;
	"cwctl part create"*) echo '^partition media: 512M, policy rotation' ;;
	"cwctl disk headroom"*) echo 'hdd0.*hdd1|media' ;;
	*"--dry-run"*) echo '^would admit 4MB/s in 1M blocks on media \(nothing booked\)' ;;
	"cwctl resv create"*) echo '^admitted reservation 1 on media' ;;
	"cwctl export add"*) echo '^exported media as media' ;;
	"nbdinfo --list"*) echo 'export="media"' ;;
	"cwctl stats --watch"*) echo '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}[-+][0-9]{4}  \(1s\)$' ;;
	"cwctl status"*) echo '^pool [0-9a-f-]{36}: ' ;;
	"cwctl disk plan"*) echo '^hdd1 +2 +1 ' ;;
	esac
}

shopt -s expand_aliases
n=0
cat >"$out" <<EOH
# The README's walk-through ("Serving partitions: clockwised and cwctl"),
# typed line by line on an empty machine with Clockwise just built, by
# tests/integration/test-readme-walkthrough.sh; /var/tmp was an empty
# directory.  The numbers are this machine's (a virtual machine whose
# disk is a file on its host: hence the calibration warnings, if any).
EOH
show() { sed "s|$scratch|/var/tmp|g"; }
run_step() {
	local cmd=$1 shown=$2 want rc=0
	n=$((n + 1))
	printf '$ %s\n' "$shown" >>"$out"
	if [[ $cmd =~ \&[[:space:]]*(#.*)?$ ]]; then
		# In the background, as typed; its output joins the transcript
		# when it ends (clockwised's when the step after it runs).
		eval "${cmd%%&*} >'$cw_tmp/bg.$n' 2>&1 &"
		bg_pids+=($!)
		if [[ $cmd == clockwised* ]]; then
			# what "logs ready" means: wait for that line, as a user
			# watching the terminal would
			wait_for "clockwised's ready line" 20 grep -q 'ready: ' "$cw_tmp/bg.$n" ||
				echo "FAIL: clockwised did not start"
			grep -E 'ready: ' "$cw_tmp/bg.$n" | show >>"$out"
			want=$(expect "$cmd")
			check "step $n: $shown" grep -Eq "$want" "$cw_tmp/bg.$n"
			daemon_step=$n
		else
			echo "$n ${bg_pids[-1]}" >>"$cw_tmp/bg.list"
		fi
		return
	fi
	if [[ $cmd == "kill %1"* ]] && [ -f "$scratch/movie.ts" ]; then
		# before the daemon goes: what the copy wrote is there
		check "the copy reads back" nbdcopy "nbd+unix:///media?socket=$scratch/cw.sock" \
			"$cw_tmp/back"
		check "... as it was" cmp -n "$(stat -c %s "$scratch/movie.ts")" \
			"$scratch/movie.ts" "$cw_tmp/back"
	fi
	eval "$cmd" >"$cw_tmp/step.$n" 2>&1 || rc=$?
	show <"$cw_tmp/step.$n" >>"$out"
	check "step $n: $shown (exit 0)" test $rc -eq 0 || cat "$cw_tmp/step.$n"
	want=$(expect "$cmd")
	[ -z "$want" ] || check "step $n: prints /$want/" grep -Eq "$want" "$cw_tmp/step.$n"
}

# Lines run one at a time; a here-document, or a loop over several
# lines, is one step.
cmd=
heredoc=
while IFS= read -r line; do
	if [ -n "$cmd" ]; then
		cmd+=$'\n'$line
	else
		cmd=$line
		[[ $line =~ \<\<([A-Za-z_]+) ]] && heredoc=${BASH_REMATCH[1]}
	fi
	if [ -n "$heredoc" ]; then
		[ "$line" = "$heredoc" ] || continue
		heredoc=
	fi
	bash -n <<<"$cmd" 2>/dev/null || continue
	shown=$cmd
	run_step "${cmd//\/var\/tmp/$scratch}" "$shown"
	cmd=
done <"$cw_tmp/block"

# clockwised stopped as asked (kill %1) and cleanly; the other background
# steps ended well.
if [ -n "${daemon_step:-}" ]; then
	rc=0
	wait "${bg_pids[0]}" || rc=$?
	grep -E 'stopping' "$cw_tmp/bg.$daemon_step" | show >>"$out"
	check "clockwised stopped, exit 0" test $rc -eq 0
fi
while read -r k pid; do
	rc=0
	wait "$pid" || rc=$?
	printf '# (step %s, in the background, ended with exit %s)\n' "$k" "$rc" >>"$out"
	show <"$cw_tmp/bg.$k" >>"$out"
	check "background step $k ended well" test $rc -eq 0
done < <(cat "$cw_tmp/bg.list" 2>/dev/null)
echo "transcript: $n steps in $out"
