#!/usr/bin/env bash
# Description: the shared library exports its public API and nothing else:
# every symbol libclockwise.so exports is declared in an installed header
# (libclockwise/include/clockwise/*.h), and every name
# libclockwise/libclockwise.sym lists is exported.  Skipped in a build
# without the shared library.
. "$(dirname "$0")/lib.sh"
requires nm cc

so=$top_builddir/libclockwise/.libs/libclockwise.so
if [ ! -e "$so" ]; then
	echo "SKIP: no shared library in this build"
	rm -rf "$cw_tmp"
	trap - EXIT
	exit 77
fi

# The installed headers, comments gone (a name in a comment is no declaration).
for h in "$top_srcdir"/libclockwise/include/clockwise/*.h; do
	echo "#include <clockwise/$(basename "$h")>"
done >"$cw_tmp/all.c"
check "the installed headers preprocess" \
	cc -E -P -I"$top_srcdir/libclockwise/include" -o "$cw_tmp/all.i" "$cw_tmp/all.c"

# Defined symbols, without the version node's own name.
nm -D --defined-only "$so" | awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' | sort -u \
	>"$cw_tmp/exported"
check "the library exports symbols" test -s "$cw_tmp/exported"
undeclared=
while read -r s; do
	# a function, or an object declared extern
	grep -Eq "(^|[^A-Za-z0-9_])$s[[:space:]]*\(|^extern .*[^A-Za-z0-9_]$s[[:space:]]*(;|\[)" \
		"$cw_tmp/all.i" || undeclared="$undeclared $s"
done <"$cw_tmp/exported"
[ -z "$undeclared" ] || echo "exported, declared in no installed header:$undeclared"
check "every exported symbol is declared in an installed header" test -z "$undeclared"

sed -n '/global:/,/local:/p' "$top_srcdir/libclockwise/libclockwise.sym" |
	sed -n 's/^[[:space:]]*\([A-Za-z_][A-Za-z0-9_]*\);.*/\1/p' | sort -u >"$cw_tmp/listed"
check "libclockwise.sym lists names" test -s "$cw_tmp/listed"
unexported=$(comm -23 "$cw_tmp/listed" "$cw_tmp/exported" | tr '\n' ' ')
[ -z "$unexported" ] || echo "listed in libclockwise.sym, not exported: $unexported"
check "every name libclockwise.sym lists is exported" test -z "$unexported"
echo "$(wc -l <"$cw_tmp/exported") symbols exported"
