#!/usr/bin/env bash
# Description: every program the build installs answers --help and -h
# with its usage on stdout and exit 0, and --version and -V with
# "NAME VERSION" (this build's version) and exit 0; each has a man page;
# and cwsim(1)'s synopsis names every command `cwsim help` lists.
. "$(dirname "$0")/lib.sh"

version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$top_builddir/config.h")
check "the build's version is known" test -n "$version"
progs=$(sed -n 's/^s\{0,1\}bin_PROGRAMS += \(.*\)$/\1/p' "$top_srcdir"/*/local.am)
check "installed programs found" test "$(echo "$progs" | wc -w)" -ge 5

# answers PROG OPT: exit 0, something on stdout, nothing on stderr.
answers() {
	"$top_builddir/$1" "$2" >"$cw_tmp/out" 2>"$cw_tmp/err" </dev/null &&
		test -s "$cw_tmp/out" && ! test -s "$cw_tmp/err"
}

for p in $progs; do
	name=${p##*/}
	for o in --help -h; do
		check "$name $o: usage on stdout, exit 0" bash -c \
			'"$0" "$1" 2>/dev/null </dev/null | grep -qi "^usage: '"$name"'"' \
			"$top_builddir/$p" "$o"
		check "$name $o: nothing on stderr" answers "$p" "$o"
	done
	for o in --version -V; do
		check "$name $o: \"$name $version\"" bash -c \
			'"$0" "$1" 2>/dev/null </dev/null | grep -q "^$2 $3\( \|$\)"' \
			"$top_builddir/$p" "$o" "$name" "$version"
		check "$name $o: nothing on stderr" answers "$p" "$o"
	done
	check "$name has a man page" bash -c 'ls "$0"/man/"$1".[1-8] >/dev/null 2>&1' \
		"$top_srcdir" "$name"
done

# cwsim(1): the synopsis as rendered (up to DESCRIPTION) names each
# command, as "cwsim CMD" or among "cwsim run|sweep|plan".
if command -v groff >/dev/null; then
	synopsis=$(groff -man -Tutf8 "$top_srcdir/man/cwsim.1" 2>/dev/null |
		sed 's/\x1b\[[0-9;]*m//g; s/.\x08//g' | sed -n '/^SYNOPSIS/,/^DESCRIPTION/p')
	for cmd in $("$top_builddir/tools/cwsim" help | sed -n 's/^  \([a-z]*\) .*/\1/p'); do
		check "cwsim(1) synopsis names cwsim $cmd" bash -c \
			'grep -Eq "cwsim ([a-z]+\|)*$1([ |]|$)" <<<"$0"' "$synopsis" "$cmd"
	done
fi
