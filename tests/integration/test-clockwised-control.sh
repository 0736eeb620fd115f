#!/usr/bin/env bash
# Description: cwctl drives clockwised's data path: a reservation made on
# the control socket turns a bound export's reads into RT requests (counted
# by the daemon's stats, with no deadline miss) while best-effort fio load
# runs on another export; `export add` makes an export NBD clients see and
# `export remove` takes it away (cutting off its client); over-admission is
# refused with the disk and the condition; exports.all decides whether the
# pool's partitions are exported at start.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq nbdinfo fio truncate qemu-io
CWSTREAM=$top_builddir/tools/cwstream
d=$cw_tmp/one
mkdir "$d"
ctl_start "$d"
uri() { echo "nbd+unix:///$1?socket=$CTL_NBD"; }
has_export() { nbdinfo --list "nbd+unix:///?socket=$CTL_NBD" 2>/dev/null | grep -q "^export=\"$1\":"; }

# The test's disk images share one device: the daemon says what that
# does to streams.
check "disks on one device: the daemon warns" \
	grep -q "disk hdd1: .* lies on the same device ([0-9]*:[0-9]*) as disk hdd0" "$CTL_LOG"
check "an empty pool: no export at start" test "$(cwctl --json export list | jq length)" -eq 0
check "part create media" cwctl part create media --size 64M
check "part create be" cwctl part create be --size 64M
check "a new partition is not exported by itself" bash -c '! nbdinfo --list "$0" 2>/dev/null | grep -q "^export=\"media\""' "nbd+unix:///?socket=$CTL_NBD"

# --- exports come and go while the daemon runs
check "export add be" cwctl export add be
check "nbdinfo sees be" has_export be
check "with the partition's size" test "$(nbdinfo --size "$(uri be)")" -eq $((64 << 20))
check "export add under another name, read-only" cwctl export add be --name be2 --readonly
check "nbdinfo sees be2 read-only" bash -c 'nbdinfo --json "$0" | jq -e ".exports[0].\"is_read_only\" == true"' "$(uri be2)"
# A client holding be2 open is cut off by its removal (which needs
# --force while it is connected), and the removal waits for it.
"$CWSTREAM" play "$(uri be2)" --rate 1MB/s --block 64K --duration 60s --json \
	> "$d/client.json" 2>/dev/null &
client=$!
cleanup_add "kill $client 2>/dev/null"
wait_for "the client on be2" 20 test -s "$d/client.json"
check "export remove be2 while a client reads it: refused" test \
	"$(cwctl export remove be2 2>&1 | grep -o '(busy)$')" = "(busy)"
check "export remove be2 --force" cwctl export remove be2 --force
wait "$client"
rc=$?
check "its client was cut off (an error, not a 60 s run)" test "$rc" -ne 0 -a "$rc" -lt 128
check "nbdinfo no longer sees be2" bash -c '! nbdinfo --list "$0" | grep -q "^export=\"be2\""' "nbd+unix:///?socket=$CTL_NBD"
expect_fail "connecting to a removed export fails" nbdinfo --size "$(uri be2)"
check "be is still served" test "$(nbdinfo --size "$(uri be)")" -eq $((64 << 20))

# --- a reservation makes the stream's reads RT
# A stream plays what was recorded (a hole is read without a disk access).
check "record media" ctl_fill media 64M
id=$(cwctl --json resv create media --rate 8Mbit --block 256K | jq .id)
check "reservation admitted" test "$id" -ge 1
check "export media bound to it" cwctl export add media --resv "$id"
fio --name=be --ioengine=nbd --uri="$(uri be)" --rw=randrw --bs=64k --iodepth=8 \
	--runtime=3 --time_based --output="$d/fio.out" >/dev/null 2>&1 &
fio=$!
cleanup_add "kill $fio 2>/dev/null"
"$CWSTREAM" play "$(uri media)" --rate 8Mbit --block 256K --duration 2s --json > "$d/play.json"
rc=$?
# Under a sanitizer the daemon and the client spend many times the CPU the
# disk model allows for, so misses are possible there and only reported.
if [ -n "${CW_SANITIZED:-}" ]; then
	check "the stream played (misses allowed under a sanitizer)" test "$rc" -eq 0 -o "$rc" -eq 4
else
	check "the stream played without a miss" test "$rc" -eq 0
fi
wait "$fio"
check "fio ran its best-effort load" test $? -eq 0
cwctl --json stats > "$d/stats.json"
blocks=$(tail -n1 "$d/play.json" | jq .summary.blocks)
check "the reservation counted RT requests" test "$(jq ".reservations[] | select(.id == $id) | .requests" "$d/stats.json")" -ge "$blocks"
misses=$(jq ".reservations[] | select(.id == $id) | .misses" "$d/stats.json")
if [ -n "${CW_SANITIZED:-}" ]; then
	check "the reservation counted its misses ($misses under a sanitizer)" test "$misses" -ge 0
else
	check "no RT deadline miss" test "$misses" -eq 0
fi
check "the disks counted RT requests" test "$(jq '[.disks[].rt_requests] | add' "$d/stats.json")" -ge "$blocks"
[ -n "${CW_SANITIZED:-}" ] ||
	check "and no RT miss" test "$(jq '[.disks[].rt_misses] | add' "$d/stats.json")" -eq 0
check "and the best-effort requests" test "$(jq '[.disks[].be_requests] | add' "$d/stats.json")" -gt 100
check "with BE latency percentiles" test "$(jq '[.disks[].be_p99_ns] | max' "$d/stats.json")" -gt 0
check "the human stats" bash -c '"$0" --socket "$1" stats | grep -q "^RESV"' "$CWCTL" "$CTL_SOCK"
check "the export is listed bound to the reservation" \
	test "$(cwctl --json export list | jq -r ".[] | select(.name == \"media\") | .resv")" = "$id"

# --- over-admission: refused, with the disk and the condition
out=$(cwctl --json resv create media --rate 4GB/s --block 1M 2>&1 >/dev/null)
check "over-admission refused" test "$(echo "$out" | jq -r .code)" = refused
check "naming a disk" bash -c 'echo "$0" | jq -e ".details.disk | test(\"^(hdd0|hdd1|ssd0)$\")"' "$out"
check "and the condition" test "$(echo "$out" | jq -r .details.condition)" != null
check "the refusal admitted nothing" test "$(cwctl --json resv list | jq length)" -eq 1

# --- release: the export goes first, then the reservation
check "a bound reservation is not released" test "$(ctl_code cwctl resv release "$id")" = busy
check "export remove media" cwctl export remove media
check "resv release" cwctl resv release "$id"
# (be has no reservation and so no deadline: a block late on a busy host
# is cwstream's exit 4, not a read refused; the blocks must all come)
be_reads() {
	local rc
	"$CWSTREAM" play "$(uri be)" --rate 1MB/s --block 64K --duration 0.3s --json --quiet \
		>"$cw_tmp/be.json"
	rc=$?
	[ "$rc" -eq 0 ] || [ "$rc" -eq 4 ] || return "$rc"
	tail -n1 "$cw_tmp/be.json" | jq -e '.summary.blocks >= 4'
}
check "be still serves reads" be_reads
check "clockwised stops cleanly" ctl_stop

# --- exports.all: the partitions in the pool are exported at start (the
#     default), or only on request
d2=$cw_tmp/two
mkdir "$d2"
ctl_start "$d2"
check "part create p1" cwctl part create p1 --size 16M
check "clockwised stops" ctl_stop
ctl_start "$d2"
check "exports.all: p1 exported at start" has_export p1
check "and the control socket lists it" test "$(cwctl --json export list | jq -r '.[0].name')" = p1
check "export remove p1" cwctl export remove p1
check "clockwised stops" ctl_stop
ctl_start "$d2" --no-export-all
check "exports.all = false: nothing exported at start" test "$(cwctl --json export list | jq length)" -eq 0
check "until asked" cwctl export add p1
check "then nbdinfo sees it" has_export p1
check "clockwised stops" ctl_stop
