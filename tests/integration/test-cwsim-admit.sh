#!/usr/bin/env bash
# Description: cwsim admit reads a task set from a file or stdin and prints
# the verdict and the slack as JSON; a malformed line is named, exit 2.
. "${top_srcdir:-.}/tests/integration/lib.sh"

cwsim=${top_builddir:-.}/tools/cwsim
tmp=$cw_tmp

cat >"$tmp/set" <<'SET'
# the paper's Definition 1 says 2 here; the slack is 1
10 5
15 3   # two tasks with the same period

15 4
SET
out=$("$cwsim" admit "$tmp/set")
check "file: schedulable with slack 1" \
	test "$out" = '{"schedulable": true, "utilization": 0.966666667, "delta_l_ns": 1, "delta_l_m_ns": 1, "delta_l_q_ns": 2, "reason": "ok: U=0.966667 dL=1 ns"}'

out=$(printf '10000000 1000000\n1000000000 20000000\n' | "$cwsim" admit)
check "stdin: long C beside a short period is refused" \
	grep -q '"schedulable": false, "utilization": 0.12, "delta_l_ns": null, "delta_l_m_ns": null, "delta_l_q_ns": null, "reason": "condition (2): task 1' <<<"$out"

out=$(printf '4 2\n6 3\n5 1\n' | "$cwsim" admit -)
check "U > 1 is refused by condition (1)" grep -q '"reason": "condition (1): U = ' <<<"$out"

out=$(printf '200000000 120000000\n' | "$cwsim" admit)
check "one task: no delta_l_q" grep -q '"delta_l_ns": 80000000, "delta_l_m_ns": 80000000, "delta_l_q_ns": null' <<<"$out"

printf '10 5\n\n15 x\n' >"$tmp/bad"
expect_fail "a malformed line fails" "$cwsim" admit "$tmp/bad" 2>/dev/null
"$cwsim" admit "$tmp/bad" 2>"$tmp/err" >/dev/null; rc=$?
check "exit status 2" test "$rc" -eq 2
check "the message names the line" grep -q "bad:3:" "$tmp/err"
for bad in '0 1' '10 -1' '10' '10 1 1' '99999999999999999999 1'; do
	printf '%s\n' "$bad" | "$cwsim" admit >/dev/null 2>&1; rc=$?
	check "refused: '$bad'" test "$rc" -eq 2
done
"$cwsim" admit "$tmp/none" 2>/dev/null; rc=$?
check "a missing file exits 2" test "$rc" -eq 2
