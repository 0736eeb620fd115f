#!/usr/bin/env bash
# Description: when a striped stream's blocks are due, against clockwised
# on a real pool.  By default (--due disk) a disk serving every third
# block has three periods for each, and the reservation's lead says how
# far ahead a client asks; --due stream makes every block due one period
# after it is asked for: each disk's task keeps its period with a shorter
# deadline, a stream that fits only with the longer one is refused with
# the demand condition in words and JSON, the rule survives a restart,
# and cwstream plays with the reservation's lead on its own.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq
CWSTREAM=$top_builddir/tools/cwstream
d=$cw_tmp

ctl_start "$d"
cwctl part create media --size 192M >/dev/null
cwctl export add media >/dev/null

# --- the default: due a disk period after release
id=$(cwctl --json resv create media --rate 2MB/s --block 1M | jq .id)
show=$(cwctl --json resv show "$id")
per=$(jq .period_ns <<<"$show")
check "default: due disk" test "$(jq -r .due <<<"$show")" = disk
check "three disks, each every third block" test "$(jq -c '[.per_disk[].stride]' <<<"$show")" = "[3,3,3]"
check "each part due its own period" \
	test "$(jq '[.per_disk[] | .deadline_ns == .period_ns and .period_ns == 3 * '"$per"'] | all' <<<"$show")" = true
check "the lead is the longest part deadline" test "$(jq .lead_ns <<<"$show")" -eq $((3 * per))
check "resv show names the lead" grep -q "each block is due .* after it is asked for (due disk)" \
	<(cwctl resv show "$id")

# --- due stream: the same periods, one stream period to serve each block
sid=$(cwctl --json resv create media --rate 2MB/s --block 1M --due stream | jq .id)
show=$(cwctl --json resv show "$sid")
check "due stream" test "$(jq -r .due <<<"$show")" = stream
check "each part keeps its period, due one stream period after release" \
	test "$(jq '[.per_disk[] | .deadline_ns == '"$per"' and .period_ns == 3 * '"$per"'] | all' <<<"$show")" = true
check "its lead is one period" test "$(jq .lead_ns <<<"$show")" -eq "$per"
check "the table shows the deadline" grep -q "^DISK *PERIOD *DEADLINE *SERVICE" <(cwctl resv show "$sid")
cwctl resv release "$id" >/dev/null
cwctl resv release "$sid" >/dev/null

# A 1M block takes the HDD model about 31ms: at 40MB/s (a period of
# 26ms) it fits in three periods, not in one.
check "at 40MB/s due disk is admitted" cwctl resv create media --rate 40MB/s --block 1M --dry-run
err=$(cwctl --json resv create media --rate 40MB/s --block 1M --due stream 2>&1 >/dev/null)
check "due stream is refused: demand" test "$(jq -r .code <<<"$err")" = refused
check "the details say demand, with the deadline" test "$(jq -c '.details | [.stream, .condition,
	.deadline_ns < .period_ns, .max_rate < 40000000]' <<<"$err")" = '["new","demand",true,true]'
msg=$(cwctl resv create media --rate 40MB/s --block 1M --due stream 2>&1)
check "and the sentence says why" grep -q "longer than the .* within which it is due" <<<"$msg"
max=$(jq .details.max_rate <<<"$err")
check "the largest rate it names is admitted due stream" \
	cwctl resv create media --rate "$max" --block 1M --due stream --dry-run
expect_fail "one byte per second more is not" \
	cwctl resv create media --rate $((max + 1)) --block 1M --due stream --dry-run

# Streams that all may come within one period: due stream admits fewer.
fill() {	# DUE: streams of 4MB/s admitted until one is refused
	local n=0 ids=() out
	while out=$(cwctl --json resv create media --rate 4MB/s --block 1M --due "$1" 2>/dev/null) &&
	      [ "$n" -lt 100 ]; do
		ids+=("$(jq .id <<<"$out")"); n=$((n + 1))
	done
	for id in "${ids[@]}"; do cwctl resv release "$id" >/dev/null; done
	echo "$n"
}
nd=$(fill disk)
ns=$(fill stream)
echo "# streams of 4MB/s: $nd due disk, $ns due stream"
check "due stream admits some" test "$ns" -ge 1
check "due disk admits more" test "$nd" -gt "$ns"

# --- bad input
check "--due frob: usage error" test "$(cwctl resv create media --rate 1M --block 1M \
	--due frob >/dev/null 2>&1; echo $?)" -eq 2
printf '{"cmd":"resv.create","args":{"part":"media","rate":1000000,"block":1048576,"due":"soon"}}\n' |
	"$CTL_RAW" "$CTL_SOCK" > "$d/raw"
check "a bad due on the socket: bad-request" test "$(jq -r .error.code "$d/raw")" = bad-request

# --- the rule is stored with the reservation
sid=$(cwctl --json resv create media --rate 2MB/s --block 1M --due stream | jq .id)
check "the server stops cleanly" ctl_stop
ctl_start "$d"
show=$(cwctl --json resv show "$sid")
check "after a restart: still due stream" test "$(jq -r .due <<<"$show")" = stream
check "after a restart: the same deadlines" \
	test "$(jq '[.per_disk[] | .deadline_ns == '"$per"'] | all' <<<"$show")" = true
cwctl resv release "$sid" >/dev/null

# --- cwstream takes the reservation's lead
id=$(cwctl --json resv create media --rate 2MB/s --block 1M | jq .id)
"$CWSTREAM" play "nbd+unix:///media?socket=$CTL_NBD" --rate 2MB/s --block 1M --duration 2s \
	--resv "$id" --socket "$CTL_SOCK" --json > "$d/play.json"; rc=$?
check "cwstream plays on time" test "$rc" -eq 0
check "with the reservation's lead" test "$(tail -n1 "$d/play.json" | jq .summary.lead_ns)" -eq $((3 * per))
"$CWSTREAM" play "nbd+unix:///media?socket=$CTL_NBD" --rate 2MB/s --block 1M --duration 1s \
	--reserve --due stream --socket "$CTL_SOCK" --json > "$d/rs.json"; rc=$?
check "--reserve --due stream plays on time" test "$rc" -eq 0
check "with a lead of one period" test "$(tail -n1 "$d/rs.json" | jq .summary.lead_ns)" -eq "$per"
"$CWSTREAM" play "nbd+unix:///media?socket=$CTL_NBD" --rate 2MB/s --block 1M --duration 1s \
	--resv "$id" --lead 100ms --socket "$CTL_SOCK" --json > "$d/short.json" 2> "$d/short.err"
check "a lead shorter than the reservation's: warned" grep -q "shorter than the reservation's lead" "$d/short.err"
check "--lead sets the deadline" test "$(tail -n1 "$d/short.json" | jq .summary.lead_ns)" -eq 100000000
check "--due without --reserve: usage" test "$("$CWSTREAM" play "nbd+unix:///media?socket=$CTL_NBD" \
	--rate 1M --block 1M --due stream >/dev/null 2>&1; echo $?)" -eq 2
check "the server stops cleanly" ctl_stop
