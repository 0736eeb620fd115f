#!/usr/bin/env bash
# Description: the host's CPUs are a resource of admission, against
# clockwised on a pool of files in tmpfs (whose disks admit far more than
# the CPUs move).  Measured at start by default and shown by cwctl status;
# with host costs set in clockwised.conf, streams that every disk admits
# are refused for the host once they would need more CPU than the share
# given to streams (condition "host" in words and JSON, with what they
# need, what is given and the largest rate that fits), the largest rate
# named is admitted and one byte a second more is not, disk headroom says
# the host limits it, the same streams are admitted with the host test
# off, a restart keeps the setting, and a bad setting is refused with
# FILE:LINE.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq
# the disks' files in tmpfs where there is one: their service is a copy
if test -d /dev/shm && test -w /dev/shm; then
	d=$(mktemp -d /dev/shm/cwtest-host.XXXXXX)
	cleanup_add "rm -rf '$d'"
else
	d=$cw_tmp
fi

# --- measured at start
ctl_start "$d" --no-export-all
host=$(cwctl --json status | jq -c .host)
check "status shows a measured host" \
	jq -e '.request_ns > 0 and .byte_ps > 0 and .share == 0.5 and .cpus >= 1 and .cpu_need == 0' <<<"$host"
check "half the CPUs are given" jq -e '.cpu_given == .cpus * 0.5' <<<"$host"
check "the text says it" grep -q "^host: 50% of .* CPUs for streams" <(cwctl status)
check "the log says it was measured" grep -q "host: 50.0% of .* measured" "$CTL_LOG"
check "the server stops" ctl_stop

# --- set: 1 ms a request, 1 GB/s of copies, 1% of the CPUs
conf='host = { share = "1%"; request_cost = "1ms"; copy_rate = "1000MB/s"; };'
ctl_start "$d" --no-export-all --conf "$conf"
cpus=$(cwctl --json status | jq .host.cpus)
check "status shows the setting" test "$(cwctl --json status | jq -c '.host | [.share, .request_ns, .byte_ps]')" = "[0.01,1000000,1000]"
check "a partition on the HDD files" cwctl part create media --size 128M --tier hdd
# 1M blocks: 1 ms + 1.05 ms of CPU a request; 1% of the CPUs takes
# cpus * 10 ms a second, some cpus * 4.9 requests of 1M
n=0 out=""
while out=$(cwctl --json resv create media --rate 1MB/s --block 1M 2>&1); do
	n=$((n + 1)); [ $n -lt 100 ] || break
done
check "streams are admitted, then refused" test "$n" -ge 1 -a "$n" -lt 100
check "refused for the host" test "$(jq -c '.code, .details.condition, .details.stream' <<<"$out" | tr -d '\n')" = '"refused""host""new"'
check "the details say what is needed and given" \
	jq -e '.details.host.cpu_need > .details.host.cpu_given and (.details.host.cpu_given - '"$cpus"' * 0.01 | fabs) < 1e-9 and .details.host.cpu_need_ps > .details.host.cpu_given_ps' <<<"$out"
check "and no disk" jq -e '.details.disk == null' <<<"$out"
msg=$(cwctl resv create media --rate 1MB/s --block 1M 2>&1)
check "the sentence says the CPUs" grep -q "refused for the host: the streams would need .* CPUs of real-time work .* are given to streams (1.0% of $cpus CPUs); the largest rate that fits with 1M blocks is" <<<"$msg"
max=$(jq .details.max_rate <<<"$out")
check "a largest rate is named" test "$max" -gt 0 -a "$max" -lt 1000000
check "the largest rate named is admitted" cwctl resv create media --rate "$max" --block 1M --dry-run
expect_fail "one byte a second more is not" cwctl resv create media --rate $((max + 1)) --block 1M --dry-run
hr=$(cwctl --json disk headroom | jq -c '.partitions[] | select(.part == "media")')
check "headroom: the host limits the partition" jq -e '.limited_by_host == true and .limited_by == null and .max_rate == '"$max" <<<"$hr"
check "headroom text names the host" grep -q "media .* the host's CPUs" <(cwctl disk headroom)
check "the streams' need shows in status" \
	jq -e '.host.cpu_need > 0 and .host.cpu_need <= .host.cpu_given' <(cwctl --json status)
before=$(cwctl --json status | jq -c '.host | del(.cpus)')

# --- a restart keeps the setting, the streams and the refusal
check "the server stops" ctl_stop
ctl_start "$d" --no-export-all --conf "$conf"
check "the setting and the streams' need are back" test "$(cwctl --json status | jq -c '.host | del(.cpus)')" = "$before"
check "the same stream is refused for the host" \
	test "$(cwctl --json resv create media --rate 1MB/s --block 1M 2>&1 | jq -r .details.condition)" = host
check "the server stops" ctl_stop

# --- the disks alone admit it
ctl_start "$d" --no-export-all --conf 'host = { test = false; };'
check "no host in status" test "$(cwctl --json status | jq -c .host)" = null
check "with the host test off the disks admit the stream" \
	cwctl resv create media --rate 1MB/s --block 1M --dry-run
check "the server stops" ctl_stop

# --- the host keeps time: a model far cheaper than the streams' path
# (5 us a request, 10 GB/s of copies) grows once a stream has cost more
# than it says for three seconds in a row
if chrt -f 10 true 2>/dev/null && command -v qemu-io >/dev/null; then
	ctl_start "$d" --no-export-all --conf 'host = { share = "100%"; request_cost = "5us"; copy_rate = "10GB/s"; };'
	check "a partition on the SSD file" cwctl part create fast --size 64M --tier ssd
	check "recorded (a hole is read without the disk)" ctl_fill fast 64M
	id=$(cwctl --json resv create fast --rate 100MB/s --block 1M | jq -e .id)
	check "a stream of 100 MB/s is admitted (an SSD C covers a write)" test -n "$id"
	check "its export" cwctl export add fast --resv "$id"
	# What is checked here is the model, not the deadlines (on a test
	# machine running other tests the stream may be late: exit 4).
	st=0
	"$top_builddir/tools/cwstream" play "nbd+unix:///fast?socket=$CTL_NBD" --rate 100MB/s \
		--block 1M --duration 6 --resv "$id" --socket "$CTL_SOCK" --rt-priority 10 --quiet || st=$?
	check "it plays 6 s at real-time priority" test "$st" -eq 0 -o "$st" -eq 4
	check "the log says the path costs more than the model" \
		grep -q "host: the streams' path keeps costing more CPU than its model says" "$CTL_LOG"
	check "status shows the grown model" \
		jq -e '.host.request_ns > 5000 and .host.byte_ps > 100' <(cwctl --json status)
	check "the server stops" ctl_stop
else
	echo "# the host's watch: no real-time priority or no qemu-io here, left out"
fi

# --- bad settings: FILE:LINE, and nothing starts
bad() {
	printf 'pool = "%s/pool.db";\ncontrol_socket = "%s/bad.sock";\n%s\n' "$d" "$d" "$1" >"$d/bad.conf"
	! "$CTL_DAEMON" -f -c "$d/bad.conf" 2>"$d/bad.err" && grep -q "bad.conf:3: .*$2" "$d/bad.err"
}
check "share above 100% is refused" bad 'host = { share = "150%"; };' "expected a percentage above 0"
check "a request cost that is not a duration is refused" bad 'host = { request_cost = "fast"; };' "expected a duration"
check "a copy rate of 0 is refused" bad 'host = { copy_rate = "0"; };' "expected a rate"
check "an unknown host key is refused" bad 'host = { cpus = 2; };' "unknown setting"
