#!/bin/bash
# Description: a partition striped over a local disk and an RBD image
# keeps its data; the image calibrates as tier rbd (a tail, no seek
# curve) and cwctl stats sets the service time it measured against C,
# at the tail percentile the calibration was told (cwctl disk calibrate
# --percentile), which the model keeps; bad percentiles are refused.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
. "$top_srcdir/tests/integration/ceph-lib.sh"
requires nbdcopy fio jq
ceph_setup
cwctl() { "$top_builddir/tools/cwctl" -s "$cw_tmp/control" "$@"; }

check "image" ceph_image r0 128M fill
check "pool" cwd_pool 128M l0
check "an RBD disk joins it" "$cwpool" add-disk "$cwd_db" "$(ceph_spec r0)" rbd r0
check "striped over both" cwd_part vol 160M rotation
cwd_conf
cwd_start
head -c 160M /dev/urandom >"$cw_tmp/data"
check "write through NBD" nbdcopy "$cw_tmp/data" "$(cwd_uri vol)"
check "read back" nbdcopy "$(cwd_uri vol)" "$cw_tmp/back"
check "the same bytes" cmp "$cw_tmp/data" "$cw_tmp/back"
check "both disks hold blocks" bash -c "'$top_builddir/tools/cwctl' -s '$cw_tmp/control' --json disk list |
	jq -e 'map(select(.blocks != .free_blocks)) | length == 2'"

check "calibrate the image" cwctl --json disk calibrate r0 --quick
cwctl --json disk list >"$cw_tmp/disks"
check "its model is of tier rbd, with no seek curve" \
	jq -e '.[] | select(.name == "r0") | .model.text | test("tier=rbd .* seek=0:0 ")' "$cw_tmp/disks"
check "and measured block sizes" \
	jq -e '.[] | select(.name == "r0") | .model.text | test(" bs=4096:[0-9]+,65536:[0-9]+,1048576:")' \
	"$cw_tmp/disks"
# one request at a time: what C speaks of
check "sequential reads, one at a time" fio --name=seq --ioengine=nbd --uri="$(cwd_uri vol)" \
	--rw=read --bs=1M --iodepth=1 --size=64M --output="$cw_tmp/fio.out"
cwctl --json stats >"$cw_tmp/stats"
check "stats count requests served alone" \
	jq -e '.disks[] | select(.disk == "r0") | .alone_requests >= 16' "$cw_tmp/stats"
check "and set their tail against C" \
	jq -e '.disks[] | select(.disk == "r0") | .p999_over_c > 0 and .c_block_ns > 0 and .over_c <= .alone_requests' \
	"$cw_tmp/stats"
check "cwctl stats shows it, at the calibration's percentile (--quick: the median)" \
	bash -c "'$top_builddir/tools/cwctl' -s '$cw_tmp/control' stats | grep -q '^r0 .*@p50 '"
check "and the local disk's at the 99.9th" \
	bash -c "'$top_builddir/tools/cwctl' -s '$cw_tmp/control' stats | grep -q '^l0 .*@p99.9 '"

# ---- the tail percentile ----
status_is() { local want=$1; shift; "$@" >/dev/null 2>&1; [ $? -eq "$want" ]; }
model_of() { cwctl --json disk list | jq -r ".[] | select(.name == \"$1\") | .model.text"; }
before=$(model_of r0)
for bad in 99.95 49 100.1 abc 99.9% ""; do
	check "--percentile '$bad' is refused" status_is 2 cwctl disk calibrate r0 --quick --percentile "$bad"
done
check "and says what it takes" bash -c "'$top_builddir/tools/cwctl' -s '$cw_tmp/control' disk calibrate r0 --percentile 99.95 2>&1 |
	grep -q 'from 50 to 100 in steps of 0.1'"
# what cwctl would not send, the daemon refuses too
printf '%s\n' '{"cmd": "disk.calibrate", "args": {"name": "r0", "percentile": "99.95"}}' \
	'{"cmd": "disk.calibrate", "args": {"name": "l0", "percentile": "99"}}' |
	"$top_builddir/tests/integration/ctl-raw" "$cw_tmp/control" >"$cw_tmp/raw"
check "the daemon refuses a percentile finer than 0.1" \
	jq -se '.[0].error.code == "bad-request" and (.[0].error.message | test("steps of 0.1"))' "$cw_tmp/raw"
check "and one for a local disk, naming its tier" \
	jq -se '.[1].error.code == "bad-request" and (.[1].error.message | test("tier hdd"))' "$cw_tmp/raw"
check "the model is what it was" test "$(model_of r0)" = "$before"
check "calibrate at the 99th percentile" cwctl --json disk calibrate r0 --quick --percentile 99
check "the model keeps the percentile" bash -c '[[ "$0" == *" tail=990" ]]' "$(model_of r0)"
check "disk list says it" test "$(cwctl --json disk list | jq '.[] | select(.name == "r0") | .model.tail_percentile')" = 99
check "status shows it" bash -c "'$top_builddir/tools/cwctl' -s '$cw_tmp/control' status | grep -q '^r0 .*(calibrated, p99)'"
check "stats set the 99th percentile against C" \
	bash -c "'$top_builddir/tools/cwctl' -s '$cw_tmp/control' --json stats |
	jq -e '.disks[] | select(.disk == \"r0\") | .tail_percentile == 99 and .tail_over_c >= 0'"
cwctl stats
check "a restart keeps it" cwd_stop
cwd_start
check "the stored model has it" bash -c '[[ "$0" == *" tail=990" ]]' "$(model_of r0)"
check "stop" cwd_stop
