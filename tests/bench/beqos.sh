#!/usr/bin/env bash
# Best effort with guarantees between clients, in cwsim: the scenario
# tools/scenarios/shares.scn (clients weighted 1:2:4, one with 30% of the
# best-effort capacity reserved, one limited to 10% of it, one stream) run
# with the FIFO queue (the baseline, in the same script) and with RBFQ.
# For each order, each client's share of the disks' charged time; then,
# over the weighted three, the largest distance between a client's part of
# their service and its weight's part (share_error_max), the reserved
# client's share over its reservation (resv_met), how far the limited
# client went over its limit (limit_over) and the deadline misses.
#   usage: beqos.sh [--quick] [--set KEY=VALUE]...
set -eu
cwsim=${top_builddir:-.}/tools/cwsim
scn=${top_srcdir:-.}/tools/scenarios/shares.scn
args=()
while [ $# -gt 0 ]; do
	case $1 in
	--quick) args+=(--set duration_s=60) ;;
	--set) args+=(--set "$2"); shift ;;
	*) echo "usage: $0 [--quick] [--set KEY=VALUE]..." >&2; exit 2 ;;
	esac
	shift
done
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/beqos.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

if ! "$cwsim" run --json --set be_order=fifo,rbfq "${args[@]}" "$scn" >"$tmp/out.json" \
	2>"$tmp/err"; then
	cat "$tmp/err" >&2
	exit 1
fi
python3 - "$tmp/out.json" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
res = {}
for r in runs:
    cl = r["clients"]
    weighted = [c for c in cl if c["resv_share"] == 0 and c["limit_share"] == 0]
    tot_w = sum(c["weight"] for c in weighted)
    tot_s = sum(c["share"] for c in weighted)
    res[r["be_order"]] = (r["share_error_max"], r["resv_met"], r["limit_over"], r["rt_misses"])
    print("%s (best effort has %.1f%% of each disk; shares of the disks' charged time)"
          % (r["be_order"], 100 * r["be_capacity"]))
    print("  %-8s %6s %9s %9s %8s %9s %9s" % ("client", "weight", "share", "ideal", "MB/s",
                                              "resv", "limit"))
    for c in cl:
        ideal = "%.4f" % (c["weight"] / tot_w * tot_s) if c in weighted else ""
        print("  %-8s %6d %9.4f %9s %8.2f %9s %9s" % (
            c["name"], c["weight"], c["share"], ideal, c["mb_s"],
            "%.4f" % c["resv_share"] if c["resv_share"] else "-",
            "%.4f" % c["limit_share"] if c["limit_share"] else "-"))
    print("  share_error_max=%.4f resv_met=%.3f limit_over=%.3f rt_misses=%d" % res[r["be_order"]])
f, q = res["fifo"], res["rbfq"]
print("rbfq against fifo: share error %.4f vs %.4f (%.1fx smaller), reservation met %.3f vs %.3f,"
      " over the limit %.3f vs %.3f"
      % (q[0], f[0], f[0] / q[0] if q[0] else float("inf"), q[1], f[1], q[2], f[2]))
print("share_error_max=%.4f resv_met=%.3f limit_over=%.3f rt_misses=%d" % q)
PY
