#!/usr/bin/env bash
# Description: cwsim runs the SSD cache with clockwised's policy: a Zipf
# client beside a stream reads with a lower mean latency when 1/8 of its
# blocks may be cached than without, the cache hits more than the share it
# holds, promotions run, and the stream misses nothing either way; a bad
# cache setting is refused.
. "${top_srcdir:-.}/tests/integration/lib.sh"
requires jq

cwsim=${top_builddir:-.}/tools/cwsim
scn=${top_srcdir:-.}/tools/scenarios/cache.scn
t=$cw_tmp

check "with the cache" bash -c "'$cwsim' run --json --set duration_s=120 '$scn' >'$t/on.json'"
check "without" bash -c "'$cwsim' run --json --set duration_s=120 --set cache_pct=0 '$scn' >'$t/off.json'"
on=$(jq '.clients[0].mean_ms' "$t/on.json"); off=$(jq '.clients[0].mean_ms' "$t/off.json")
echo "mean latency: $on ms with the cache, $off ms without"
check "the cache makes reads faster" awk -v a="$on" -v b="$off" 'BEGIN { exit !(a < b) }'
check "it hits more than its share (1/8)" \
	jq -e '.cache_hits / (.cache_hits + .cache_misses) > 0.125' "$t/on.json"
check "promotions ran" jq -e '.cache_promotions > 0' "$t/on.json"
check "no cache counters without it" jq -e '.cache_hits == 0 and .cache_promotions == 0' "$t/off.json"
check "no stream misses with it" jq -e '.rt_misses == 0' "$t/on.json"
check "nor without" jq -e '.rt_misses == 0' "$t/off.json"
check "the text report says the hit ratio" bash -c "'$cwsim' run --set duration_s=30 '$scn' | grep -q 'cache (12% of the BE blocks): hit ratio'"
expect_fail "cache_pct above 100 is refused" "$cwsim" run --set cache_pct=101 "$scn"
check "with a clear message" bash -c "'$cwsim' run --set cache_pct=101 '$scn' 2>&1 | grep -q 'cache_pct: expected 0..100'"
expect_fail "a zipf skew below 0 is refused" "$cwsim" run --set "client=z zipf=-1" "$scn"
