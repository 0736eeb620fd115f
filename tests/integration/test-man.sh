#!/usr/bin/env bash
# Description: every man page in man/ renders without a groff warning
# (groff -ww -z -man: all warnings on, output discarded).
. "$(dirname "$0")/lib.sh"
requires groff

n=0
for page in "$top_srcdir"/man/*.[1-8]; do
	[ -e "$page" ] || continue
	n=$((n + 1))
	out=$(groff -ww -z -man "$page" 2>&1)
	check "$(basename "$page") renders cleanly${out:+: $out}" test -z "$out"
done
check "man pages found" test "$n" -gt 0
