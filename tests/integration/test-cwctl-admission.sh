#!/usr/bin/env bash
# Description: admission an operator can plan with, against clockwised on
# a real pool: `disk headroom` (exact table; each rate it shows is
# admitted, one byte per second more is not), `resv create --dry-run`
# (books nothing), and refusals in words and units that name the stream
# whose deadline would be missed the same way in the text and in --json,
# with the largest rate that fits.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq truncate

ctl_start "$cw_tmp"
cwctl part create media --size 200M >/dev/null
cwctl part create solo --size 64M --policy single --disk hdd1 >/dev/null

# --- headroom of an empty pool: the preset models of the file disks
cat >"$cw_tmp/want" <<'EOT'
largest stream rates that would be admitted now, in 1M blocks

DISK  TIER  STATE    STREAMS  UTIL  DELTA-L  BE-BUDGET  MAX-RATE
hdd0  hdd   present  0        0%    none     none       16.1MB/s
hdd1  hdd   present  0        0%    none     none       16.1MB/s
ssd0  ssd   present  0        0%    none     none       119.3MB/s

PART   SIZE  DISKS           MAX-RATE  LIMITED-BY
media  200M  hdd0,hdd1,ssd0  52.4MB/s  hdd0
solo   64M   hdd1            17.4MB/s  hdd1
EOT
check "disk headroom: the table" diff -u "$cw_tmp/want" <(cwctl disk headroom)
cat >"$cw_tmp/want" <<'EOT'
largest stream rates that would be admitted now, in 64K blocks

DISK  TIER  STATE    STREAMS  UTIL  DELTA-L  BE-BUDGET  MAX-RATE
ssd0  ssd   present  0        0%    none     none       13.4MB/s

PART   SIZE  DISKS           MAX-RATE  LIMITED-BY
media  200M  hdd0,hdd1,ssd0  1.1MB/s   hdd0
EOT
check "disk headroom ssd0 --block 64K: one disk, its partitions" \
	diff -u "$cw_tmp/want" <(cwctl disk headroom ssd0 --block 64K)
check "an unknown disk: not-found" test "$(ctl_code cwctl disk headroom nope)" = not-found
check "a zero block: bad-request" test "$(ctl_code cwctl disk headroom --block 0)" = bad-request

# Each rate shown is a boundary: admitted as it stands, not one more.
for p in media solo; do
	max=$(cwctl --json disk headroom | jq -r ".partitions[] | select(.part == \"$p\") | .max_rate")
	check "$p: the headroom is admitted" cwctl resv create "$p" --rate "$max" --block 1M --dry-run
	expect_fail "$p: one byte per second more is not" \
		cwctl resv create "$p" --rate $((max + 1)) --block 1M --dry-run
done
max=$(cwctl --json disk headroom | jq '.disks[] | select(.disk == "hdd1") | .max_rate')
check "the rate shown for a disk is rounded down" test "$(cwctl --json resv create solo \
	--rate 16.1MB/s --block 1M --dry-run | jq .admitted)" = true
check "a disk alone carries no more than the partition on it" test "$max" -le \
	"$(cwctl --json disk headroom | jq '.partitions[] | select(.part == "solo") | .max_rate')"

# --- dry run: says admitted, books nothing
cat >"$cw_tmp/want" <<'EOT'
would admit 8MiB/s in 1M blocks on media (nothing booked); the largest rate that fits now is 52.4MB/s
EOT
check "resv create --dry-run: what it would do" \
	diff -u "$cw_tmp/want" <(cwctl resv create media --rate 8M --block 1M --dry-run)
check "--dry-run --json" test "$(cwctl --json resv create media --rate 8M --block 1M --dry-run |
	jq -c '[.dry_run, .admitted, .rate, .max_rate > .rate]')" = '[true,true,8388608,true]'
check "a dry run booked nothing" test "$(cwctl --json resv list | jq length)" -eq 0
check "a refused dry run: refused" test "$(ctl_code cwctl resv create media --rate 2GB/s \
	--block 1M --dry-run)" = refused

# --- refusals in words and units, with the largest rate that fits
msg=$(cwctl resv create media --rate 2GB/s --block 1M 2>&1)
check "C > T in words" test "$msg" = "cwctl resv create: refused on disk hdd0: one 1M request \
of the new stream takes 31.2ms, longer than the 1.57ms between its requests on this disk at \
2GB/s (condition (1): C > T); the largest rate that fits with 1M blocks is 52.4MB/s (refused)"
err=$(cwctl --json resv create media --rate 2GB/s --block 1M 2>&1 >/dev/null)
check "--json: the same facts" test "$(jq -c '.details | [.stream, .condition, .period_ns,
	.service_ns, .max_rate]' <<<"$err")" = '["new","utilization",1572864,31199587,52414779]'
check "a block larger than the partition says so" test "$(cwctl resv create media --rate 1M \
	--block 300M 2>&1)" = "cwctl resv create: a block of 300M is larger than the partition \
(200M) (bad-request)"

# A stream of long requests, then a short-period one it would make late:
# the refusal names that reservation, as text and as JSON alike.
id=$(cwctl --json resv create media --rate 4096 --block 4M | jq .id)
err=$(cwctl --json resv create media --rate 64KB/s --block 4K 2>&1 >/dev/null)
check "blocking: the stream named in the details" test "$(jq -c '.details |
	[.stream, .resv, .condition]' <<<"$err")" = "[\"resv\",$id,\"blocking\"]"
check "blocking: the same stream in the sentence" \
	grep -q "a request of reservation $id takes up to 62.4ms; started just before" <<<"$err"
check "no inner task numbers" bash -c '! grep -q "task [0-9]" <<<"$0"' "$err"
check "the refusal booked nothing" test "$(cwctl --json resv list | jq length)" -eq 1
check "headroom counts the stream" test "$(cwctl --json disk headroom hdd0 |
	jq '.disks[0].streams')" -eq 1
check "the server stops cleanly" ctl_stop
