#!/usr/bin/env bash
# Description: cwsim irregularity reproduces the shape of the SFC paper's
# Figure 8: with any window, Always Expand (AE) behaves like the
# non-preemptive scheduler and orders worse than Expand and Reset (ER);
# SRP orders better than SR; the Diagonal curve orders best at a small
# window; a larger window lowers the waiting time's spread; the CSV has
# every point; bad options are refused.
. "${top_srcdir:-.}/tests/integration/lib.sh"

cwsim=${top_builddir:-.}/tools/cwsim
t=$cw_tmp

check "runs (60 s simulated)" bash -c "'$cwsim' irregularity --seconds 60 -o '$t/f' >'$t/out' 2>'$t/err'"
check "CSV: 5 curves x 4 policies x 11 windows" \
	test "$(awk -F, 'NR > 1' "$t/f/fig8.csv" | wc -l)" = 220
# val CURVE POLICY W: the irregularity ratio
val() { awk -F, -v c="$1" -v p="$2" -v w="$3" '$1 == c && $2 == p && $3 == w { print $4 }' \
	"$t/f/fig8.csv"; }
sd() { awk -F, -v c="$1" -v p="$2" -v w="$3" '$1 == c && $2 == p && $3 == w { print $5 }' \
	"$t/f/fig8.csv"; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
for c in sweep diagonal; do
	check "$c: SR+AE above SR+ER at w = 20%" lt "$(val $c SR+ER 20)" "$(val $c SR+AE 20)"
	check "$c: SRP+ER below SR+ER at w = 30%" lt "$(val $c SRP+ER 30)" "$(val $c SR+ER 30)"
	check "$c: waiting spread falls from w = 10% to 90% (SRP+ER)" \
		lt "$(sd $c SRP+ER 90)" "$(sd $c SRP+ER 10)"
done
check "diagonal below hilbert and gray at w = 10% (SRP+ER)" \
	bash -c "awk -v a=$(val diagonal SRP+ER 10) -v b=$(val hilbert SRP+ER 10) \
		-v c=$(val gray SRP+ER 10) 'BEGIN { exit !(a < b && a < c) }'"
expect_fail "--seconds 0 is refused" "$cwsim" irregularity --seconds 0
expect_fail "an extra argument is refused" "$cwsim" irregularity extra
