#!/usr/bin/env bash
# Description: an in-tree build leaves git status clean: every program the
# build makes (installed, test, benchmark) is in .gitignore, so that a
# contributor sees only their own change.  Skipped outside a git work tree
# (a release tarball).
. "$(dirname "$0")/lib.sh"
requires git

if ! git -C "$top_srcdir" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	echo "SKIP: not a git work tree"
	rm -rf "$cw_tmp"
	trap - EXIT
	exit 77
fi
# (not the make check it runs under: its flags would print directories)
progs=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory -C "$top_builddir" \
	print-programs | grep -v '^make')
check "the build names its programs" test -n "$progs"
n=0
for p in $progs; do
	n=$((n + 1))
	check "$p is ignored" git -C "$top_srcdir" check-ignore -q --no-index "$p"
done
# and what a check run leaves beside them
for f in tests/integration/rt-hog.lock tests/integration/test-x.log \
	tests/integration/test-x.trs tests/integration/test-x.daemon.log tests/vm/cache/vmlinux-x; do
	check "$f is ignored" git -C "$top_srcdir" check-ignore -q --no-index "$f"
done
echo "$n programs"
