#!/usr/bin/env bash
# Description: every man page in man/ renders without a groff warning
# (groff -ww -z -man: all warnings on, output discarded), and
# libclockwise(3) names every installed header with a line on what it is.
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
# JSON in a page keeps its quotes (a .B line would eat them).
check "cwctl(8) shows a reply as sent" bash -c 'groff -man -Tutf8 "$0" 2>/dev/null |
	sed "s/\x1b\[[0-9;]*m//g; s/.\x08//g" | grep -qF "{\"ok\": true, \"result\": ...}"' \
	"$top_srcdir/man/cwctl.8"
# Every header of libclockwise/include/clockwise/ is installed (Makefile.am
# and the modules' local.am); libclockwise(3) includes each in its
# SYNOPSIS and gives it a paragraph of its own (a ".I clockwise/NAME" tag).
lib3=$top_srcdir/man/libclockwise.3
nh=0
for h in "$top_srcdir"/libclockwise/include/clockwise/*.h; do
	nh=$((nh + 1))
	name=clockwise/${h##*/}
	check "libclockwise(3) includes <$name>" grep -qxF ".B #include <$name>" "$lib3"
	check "libclockwise(3) says what $name is" grep -qxF ".I $name" "$lib3"
done
check "public headers found" test "$nh" -gt 0
