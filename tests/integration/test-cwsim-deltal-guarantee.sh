#!/usr/bin/env bash
# Description: a quick sweep of the paper's set-up (three Atlas-II disks,
# video and audio streams added until admission refuses, the CELLO-like BE
# load) finishes in under 30 s; delta-l misses no deadline at any admitted
# load, its mean BE latency is at most EDF's at every load, no request
# takes longer than the model admitted; the JSON objects carry the issue's
# fields, and CSV (and plots, with gnuplot) are written.
. "${top_srcdir:-.}/tests/integration/lib.sh"

cwsim=${top_builddir:-.}/tools/cwsim
out=$cw_tmp/sweep

start=$SECONDS
rc=0
"$cwsim" sweep --preset paper --quick --json -o "$out" >"$cw_tmp/json" 2>"$cw_tmp/err" || rc=$?
check "quick sweep runs" test "$rc" -eq 0
check "quick sweep under 30 s" test $((SECONDS - start)) -lt 30
check "events per second are printed" grep -Eq 'events in [0-9.]+ s: [0-9]+ events/s' "$cw_tmp/err"
check "fig2.csv and fig3.csv written" test -s "$out/fig2.csv" -a -s "$out/fig3.csv"

# fig3.csv: placement,policy,streams,rt_load_mb_s,delta_l_ms,rt_requests,
# rt_misses,rt_overruns,be_done,be_refused,be_mean_ms,...
rows=$(awk -F, 'NR > 1' "$out/fig3.csv" | wc -l)
check "both placements and three policies swept" test "$rows" -ge 30
check "RT streams were admitted and simulated" \
	awk -F, 'NR > 1 && $3 > 10 && $6 > 100 { ok = 1 } END { exit !ok }' "$out/fig3.csv"
check "delta-l: no deadline miss at any load" \
	awk -F, 'NR > 1 && $2 == "delta-l" { n++; if ($7 != 0) bad = 1 } END { exit bad || !n }' "$out/fig3.csv"
check "no request ran over its admitted C" \
	awk -F, 'NR > 1 && $8 != 0 { bad = 1 } END { exit bad }' "$out/fig3.csv"
check "delta-l BE latency <= EDF's at every load" \
	awk -F, 'NR > 1 { k = $1 "," $3; m[k "," $2] = $11; keys[k] = 1 }
		 END { n = 0; for (k in keys) { n++; if (m[k ",delta-l"] > m[k ",edf"] + 1e-9) bad = 1 }
		       exit bad || n < 10 }' "$out/fig3.csv"
check "delta-l beats EDF clearly at the highest rotation load" \
	awk -F, 'NR > 1 && $1 == "rotation" { if ($3 >= max) { max = $3 }; m[$3 "," $2] = $11 }
		 END { exit !(m[max ",delta-l"] < m[max ",edf"] * 0.8) }' "$out/fig3.csv"
check "rotation admits more RT bandwidth than random" \
	awk -F, 'NR > 1 { if ($4 > max[$1]) max[$1] = $4 } END { exit !(max["rotation"] > max["random"]) }' \
	"$out/fig3.csv"
for f in policy placement rt_load_mb_s streams delta_l_ms rt_misses be_mean_ms be_p99_ms; do
	check "JSON field $f in every object" \
		awk -v f="\"$f\": " 'index($0, f) == 0 { bad = 1 } END { exit bad || NR < 30 }' "$cw_tmp/json"
done
check "one JSON object per CSV row" test "$(wc -l <"$cw_tmp/json")" -eq "$rows"
if command -v gnuplot >/dev/null 2>&1; then
	for f in fig2.png fig2.svg fig3.png fig3.svg; do
		check "plot $f written" test -s "$out/$f"
	done
	check "PNG is a PNG" grep -q PNG <(head -c 8 "$out/fig3.png")
fi
