#!/usr/bin/env bash
# Description: the same scenario and seed give byte-identical output (run
# and sweep, text and JSON); another seed gives another result.
. "${top_srcdir:-.}/tests/integration/lib.sh"

cwsim=${top_builddir:-.}/tools/cwsim
t=$cw_tmp

# run_to FILE ARGS...: cwsim ARGS with stdout to FILE; its exit status
run_to() {
	local f=$1
	shift
	"$cwsim" "$@" >"$f" 2>/dev/null
}

check "run, seed 7" run_to "$t/a" run --preset quick --set seed=7 --set duration_s=30
check "run, seed 7 again" run_to "$t/b" run --preset quick --set seed=7 --set duration_s=30
check "run, seed 8" run_to "$t/c" run --preset quick --set seed=8 --set duration_s=30
check "same seed, same output" cmp -s "$t/a" "$t/b"
expect_fail "another seed, another output" cmp -s "$t/a" "$t/c"
check "output has results" grep -q "deadline misses" "$t/a"

check "sweep twice" run_to "$t/j1" sweep --preset quick --set loads=4 --json -o "$t/s1"
check "sweep again" run_to "$t/j2" sweep --preset quick --set loads=4 --json -o "$t/s2"
check "sweep JSON identical" cmp -s "$t/j1" "$t/j2"
check "sweep CSV identical" cmp -s "$t/s1/fig3.csv" "$t/s2/fig3.csv"
check "figure 2 CSV identical" cmp -s "$t/s1/fig2.csv" "$t/s2/fig2.csv"

# one load point per placement: the highest admission allows
check "a one-load sweep" run_to "$t/one" sweep --preset quick --set loads=1 --set policy=edf \
	--json -o "$t/s3"
check "one-load sweep: one object per placement, at the highest load" \
	awk '!/"streams": [1-9]/ { bad = 1 } END { exit bad || NR != 2 }' "$t/one"
