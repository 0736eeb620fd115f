#!/usr/bin/env bash
# Description: clockwised's metrics endpoint (metrics.listen): GET
# /metrics on a loopback TCP address and on a unix socket, in Prometheus
# text that promtool finds no problem with, or OpenMetrics when asked;
# its counters are the stats command's; the unix socket keeps the control
# socket's read rule (a user outside the read group is refused); other
# paths are 404 and other methods 405; and a real Prometheus scraping the
# daemon reads the written bytes back through its query API.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
	echo "SKIP: prometheus and promtool are not installed (Debian package prometheus)"
	rm -rf "$cw_tmp"; trap - EXIT; exit 77
fi
requires curl jq qemu-io setpriv getent python3
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root to switch users"; trap - EXIT; rm -rf "$cw_tmp"; exit 77; }
getent group users >/dev/null && getent passwd nobody >/dev/null && getent group nogroup >/dev/null ||
	{ echo "SKIP: no users, nobody or nogroup"; trap - EXIT; rm -rf "$cw_tmp"; exit 77; }

d=$cw_tmp
chmod 755 "$d"	# the sockets' directory: reachable by the unprivileged user
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
jqe() { jq -e "$@" >/dev/null; }
mport=$(free_port)
msock=$d/metrics.sock
url=http://127.0.0.1:$mport/metrics
read_gid=$(getent group users | cut -d: -f3)

ctl_start "$d" --read-group users \
	--conf "metrics = { listen = [ \"127.0.0.1:$mport\", \"$msock\", \"[::1]:$mport\" ]; };"
cwctl part create media --size 32M >/dev/null
ctl_fill media 8M
# A reservation and an export bound to it, read through once (a
# real-time read): their families have samples too.
id=$(cwctl --json resv create media --rate 1MB/s --block 64K | jq -e .id)
cwctl export add media --resv "$id" >/dev/null
qemu-io -f raw -c "read 0 1M" "nbd+unix:///media?socket=$CTL_NBD" >/dev/null
# A partition with an SSD cache, read through once.
cwctl part create cached --size 16M --policy single --disk hdd1 >/dev/null
ctl_fill cached 2M
cwctl part cache cached --size 4M >/dev/null
cwctl export add cached >/dev/null
qemu-io -f raw -c "read 0 2M" "nbd+unix:///cached?socket=$CTL_NBD" >/dev/null

# The sum of one family's samples.
metric_sum() {
	awk -v m="$1" '$1 == m || index($1, m "{") == 1 { s += $NF } END { printf "%.0f\n", s }' "$2"
}
# The disks' counters; the daemon is idle once they stay for a second
# (the cache's worker, for one, writes after the commands return).
counters() { cwctl --json stats | jq -c '[.disks[] | .read_bytes, .written_bytes, .be_requests, .rt_requests]'; }
idle() {
	local a
	a=$(counters)
	sleep 1
	[ "$a" = "$(counters)" ]
}
check "the daemon goes idle" wait_for "an idle daemon" 60 idle
# Counters and metrics agree when nothing moved between two stats.
fetch_stable() {
	cwctl --json stats >"$d/stats.json" &&
	curl -sf -D "$d/headers" -o "$d/metrics.txt" "$url" &&
	[ "$(jq -c '.disks' "$d/stats.json")" = "$(cwctl --json stats | jq -c .disks)" ]
}
check "GET /metrics on TCP, between two equal stats" wait_for "quiet counters" 20 fetch_stable
written=$(jq '[.disks[].written_bytes] | add' "$d/stats.json")
check "the disks were written" test "$written" -ge $((8 << 20))
check "the Prometheus text type" grep -qi '^content-type: text/plain; version=0.0.4' "$d/headers"
check "written bytes: as stats says" test "$(metric_sum clockwise_disk_written_bytes_total "$d/metrics.txt")" = "$written"
be=$(jq '[.disks[].be_requests] | add' "$d/stats.json")
check "best-effort requests: as stats says" \
	test "$(awk '$1 ~ /^clockwise_disk_requests_total\{.*class="be"/ { s += $2 } END { print s }' "$d/metrics.txt")" = "$be"
check "... and per lane" \
	test "$(awk '$1 ~ /^clockwise_lane_requests_total\{.*class="be"/ { s += $2 } END { print s }' "$d/metrics.txt")" = "$be"
check "the latency histogram counts them all" \
	test "$(metric_sum clockwise_disk_be_latency_seconds_count "$d/metrics.txt")" = "$be"
check "its +Inf bucket too" \
	test "$(awk '$1 ~ /^clockwise_disk_be_latency_seconds_bucket\{.*le="\+Inf"/ { s += $2 } END { print s }' "$d/metrics.txt")" = "$be"
check "bucket edges in seconds, exact" grep -q '^clockwise_disk_be_latency_seconds_bucket{disk="hdd0",le="0.0025"} ' "$d/metrics.txt"
# the daemon's finer buckets agree with the exposition's: the count at or
# below 10 s is every request (none of these took longer)
check "the 10 s bucket counts them all" \
	test "$(awk '$1 ~ /^clockwise_disk_be_latency_seconds_bucket\{.*le="10"/ { s += $2 } END { print s }' "$d/metrics.txt")" = "$be"
check "per disk and cause" grep -q '^clockwise_disk_deadline_misses_by_cause_total{disk="hdd0",cause="overrun"} ' "$d/metrics.txt"
check "per reservation: its read" grep -qx "clockwise_reservation_read_bytes_total{reservation=\"$id\"} 1048576" "$d/metrics.txt"
check "per export and disk" grep -q '^clockwise_export_bytes_total{export="media",disk="[a-z0-9]*"} ' "$d/metrics.txt"
misses=$(jq '.caches[] | select(.part == "cached") | .misses' "$d/stats.json")
check "cache misses: as stats says" grep -qx "clockwise_cache_misses_total{part=\"cached\"} $misses" "$d/metrics.txt"
check "admitted bandwidth" test "$(metric_sum clockwise_disk_admitted_bytes_per_second "$d/metrics.txt")" -gt 0
check "admission per disk" grep -q '^clockwise_disk_headroom_bytes_per_second{disk="hdd1"} [1-9]' "$d/metrics.txt"
promtool check metrics <"$d/metrics.txt" >"$d/promtool.out" 2>&1
rc=$?
check "promtool check metrics: no problem" test "$rc" -eq 0 -a ! -s "$d/promtool.out"
[ -s "$d/promtool.out" ] && cat "$d/promtool.out"

curl -sf -D "$d/om.headers" -o "$d/om.txt" -H 'Accept: application/openmetrics-text; version=1.0.0' "$url"
check "OpenMetrics when asked" grep -qi '^content-type: application/openmetrics-text; version=1.0.0' "$d/om.headers"
check "... ending in # EOF" test "$(tail -n 1 "$d/om.txt")" = "# EOF"
check "... counters typed without _total" grep -qx '# TYPE clockwise_disk_written_bytes counter' "$d/om.txt"

code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
check "on IPv6 loopback too" test "$(code -g "http://[::1]:$mport/metrics")" = 200
check "another path: 404" test "$(code "http://127.0.0.1:$mport/")" = 404
check "another method: 405" test "$(code -X POST "$url")" = 405

# The unix socket: the control socket's mode and group, and its rule.
check "the socket file is group users, mode 0660" test "$(stat -c %g:%a "$msock")" = "$read_gid:660"
check "root reads on the unix socket" test "$(code --unix-socket "$msock" http://localhost/metrics)" = 200
chmod 0666 "$msock"	# the credentials decide, not the file mode
as() { setpriv --reuid=nobody --regid=nogroup "$@"; }
check "outside the read group: refused" \
	test "$(as --clear-groups curl -s -o /dev/null -w '%{http_code}' --unix-socket "$msock" http://localhost/metrics)" = 403
check "a member of the read group reads" \
	test "$(as --groups="$read_gid" curl -s -o /dev/null -w '%{http_code}' --unix-socket "$msock" http://localhost/metrics)" = 200

# A real Prometheus scraping the daemon every second.
pport=$(free_port)
cat >"$d/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: clockwise
    static_configs:
      - targets: [ "127.0.0.1:$mport" ]
EOF
prometheus --config.file="$d/prometheus.yml" --storage.tsdb.path="$d/tsdb" \
	--web.listen-address="127.0.0.1:$pport" >"$d/prometheus.log" 2>&1 &
prom=$!
cleanup_add "kill $prom 2>/dev/null; wait $prom 2>/dev/null"
query() {
	curl -sf "http://127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$1" |
		jq -r '.data.result[0].value[1]'
}
scraped() { [ "$(query "$1")" = "$2" ]; }
check "Prometheus scrapes the daemon (up is 1)" wait_for "a scrape" 60 scraped 'up{job="clockwise"}' 1
check "... and reads the written bytes back" wait_for "the series" 30 \
	scraped 'sum(clockwise_disk_written_bytes_total{job="clockwise"})' "$written"
check "... and the histogram's count" \
	scraped 'sum(clockwise_disk_be_latency_seconds_count{job="clockwise"})' "$be"
if [ "$cw_failed" -gt 0 ]; then
	tail -n 20 "$d/prometheus.log"
	curl -s "http://127.0.0.1:$pport/api/v1/targets" | jq '.data.activeTargets[] | {health, lastError}'
fi

check "the server stops cleanly" ctl_stop
check "the metrics socket is gone" test ! -e "$msock"
cw_finish
