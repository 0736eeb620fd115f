#!/usr/bin/env bash
# Description: cwsim admit --pool tests a stream over a pool's partition
# with libclockwise's admission, as cwctl resv create --dry-run does: on
# a partition cwsim laid out with 2 copies (copies = 2) a stream that
# must survive the loss of a disk is smaller than one that need not; a
# rate between the two is refused with --survive 1 (the default there)
# naming the failed disk, and admitted with --survive 0; --survive 1 on
# a partition of one copy is refused, saying why; bad options exit 2.
. "$(dirname "$0")/lib.sh"
requires jq truncate

cwsim=$top_builddir/tools/cwsim
d=$cw_tmp
cat >"$d/s.scn" <<EOS
model = atlas2
disks = 2
placement = rotation
policy = delta-l
duration_s = 5
video = mix
clip_blocks = 12
be_partitions = 1
be_rate = 10
EOS
# (cwsim setup makes a partition per stream clip, s0 the first)
mkdir -p "$d/one" && sim_pool "$d/one/one.db" atlas2 2 || exit 1
mkdir -p "$d/two" && sim_pool "$d/two/two.db" atlas2 2 || exit 1
check "partitions of 1 and 2 copies" sh -c "'$cwsim' setup '$d/s.scn' --set 'pool=$d/two/two.db' \
	--set copies=2 -o '$d/t2.csv' >/dev/null && '$cwsim' setup '$d/s.scn' \
	--set 'pool=$d/one/one.db' -o '$d/t1.csv' >/dev/null"

out=$("$cwsim" admit --pool "$d/two/two.db" s0 --block 1M)
echo "# $out"
plain=$(jq .max_rate <<<"$out") surv=$(jq .max_rate_survive <<<"$out")
check "surviving a disk: a smaller stream" test "$surv" -gt 0 -a "$surv" -lt "$plain"
mid=$(((plain + surv) / 2))
out=$("$cwsim" admit --pool "$d/two/two.db" s0 --block 1M --rate "$mid")
echo "# $out"
check "between the two: refused, naming the failed disk" jq -e '.admitted == false and
	(.reason | test("^with disk d[01] failed, refused on disk d[01]: "))' <<<"$out"
check "... admitted with --survive 0" jq -e '.admitted' <<<"$("$cwsim" admit --pool \
	"$d/two/two.db" s0 --block 1M --rate "$mid" --survive 0)"
check "as cwsim plan's pool is left: nothing booked" test "$("$cwsim" plan --pool "$d/two/two.db" --json |
	jq '[.[].tasks] | add')" = 0
out=$("$cwsim" admit --pool "$d/one/one.db" s0 --block 1M)
check "one copy: no survivable rate" jq -e 'has("max_rate_survive") | not' <<<"$out"
check "one copy with --survive 1: refused, saying why" bash -c \
	'grep -q "keeps one copy of each block" <<<"$("$0" admit --pool "$1" s0 --block 1M \
	--survive 1 2>&1)"' "$cwsim" "$d/one/one.db"
check "--survive 2: exit 2" test "$("$cwsim" admit --pool "$d/two/two.db" s0 --block 1M \
	--survive 2 >/dev/null 2>&1; echo $?)" -eq 2
