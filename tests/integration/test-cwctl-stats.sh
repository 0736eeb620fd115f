#!/usr/bin/env bash
# Description: cwctl stats --watch against clockwised with real NBD
# clients: each interval has its time, per disk IOPS, bytes per second,
# misses, best-effort p50/p99 and slack used, and per reservation its
# rates; --json writes one object per line; best effort beside a stream
# shows as slack used (it stayed 0 before).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq nbdcopy

jqe() { jq -e "$@" >/dev/null; }
ctl_start "$cw_tmp"
cwctl part create media --size 64M >/dev/null
cwctl part create scratch --size 64M >/dev/null
id=$(cwctl --json resv create media --rate 8M --block 1M | jq .id)
cwctl export add media --resv "$id" >/dev/null
cwctl export add scratch >/dev/null
head -c $((64 << 20)) /dev/urandom >"$cw_tmp/data"

# Streams on every disk, best effort beside them, while stats watch.
load() {
	while [ ! -e "$cw_tmp/stop" ]; do
		nbdcopy "nbd+unix:///media?socket=$CTL_NBD" null: || return 1
		nbdcopy "$cw_tmp/data" "nbd+unix:///scratch?socket=$CTL_NBD" || return 1
	done
}
load & loader=$!
cleanup_add "touch '$cw_tmp/stop'; wait $loader 2>/dev/null"
wait_for "the first requests" 20 bash -c \
	'"$0" --socket "$1" --json stats | jq -e "[.disks[].be_requests] | add > 0"' "$CWCTL" "$CTL_SOCK"
cwctl --json stats --watch 0.4 --count 3 >"$cw_tmp/json"
cwctl stats --watch 0.2 --count 2 >"$cw_tmp/text"
touch "$cw_tmp/stop"
check "the load ran cleanly" wait $loader

check "--json --watch: one object per line" test "$(jq -c . "$cw_tmp/json" | wc -l)" -eq 3 -a \
	"$(wc -l <"$cw_tmp/json")" -eq 3
check "each with its time and interval" jqe '(.time | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}[+-][0-9]{4}$"))
	and .interval_ns > 300000000 and (.disks | length == 3)' "$cw_tmp/json"
check "per disk: every field" jqe '.disks[] | has("iops") and has("read_bps") and
	has("written_bps") and has("rt_misses") and has("be_p50_ns") and has("be_p99_ns") and
	has("slack_used_ns") and has("slack_used")' "$cw_tmp/json"
check "per reservation: its rates" jqe ".reservations[] | select(.id == $id) |
	has(\"iops\") and has(\"read_bps\") and has(\"misses\")" "$cw_tmp/json"
check "reads and writes were counted" test "$(jq -s '[.[].disks[] | .read_bps + .written_bps] |
	add > 0' "$cw_tmp/json")" = true
check "best effort beside the streams used slack" test "$(jq -s '[.[].disks[].slack_used_ns] |
	add > 0' "$cw_tmp/json")" = true
check "slack used is a share of the interval" jqe '.disks[] | .slack_used >= 0 and
	.slack_used <= 1.05' "$cw_tmp/json"
check "p50 <= p99" jqe '.disks[] | .be_p50_ns <= .be_p99_ns' "$cw_tmp/json"

check "text: two intervals, each with its time" test "$(grep -cE \
	'^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}[+-][0-9]{4}  \([0-9.]+ms\)$' "$cw_tmp/text")" -eq 2
check "text: the disk table's header" test "$(grep -cE \
	'^DISK +IOPS +READ +WRITTEN +RT-MISSES +BE-P50 +BE-P99 +SLACK-USED$' "$cw_tmp/text")" -eq 2
check "text: the reservation's row" test "$(grep -cE "^$id +[0-9]+ " "$cw_tmp/text")" -eq 2
check "text: a disk's row" grep -qE '^hdd0 +[0-9]+ +[0-9.]+[KMG]?B/s +[0-9.]+[KMG]?B/s +[0-9]+ ' \
	"$cw_tmp/text"
check "the server stops cleanly" ctl_stop
