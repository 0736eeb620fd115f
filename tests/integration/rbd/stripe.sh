#!/bin/bash
# Description: a partition striped over a local disk and an RBD image
# keeps its data; the image calibrates as tier rbd (a tail, no seek
# curve) and cwctl stats sets the service time it measured against C.
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
check "cwctl stats shows it" bash -c "'$top_builddir/tools/cwctl' -s '$cw_tmp/control' stats | grep -q 'P99.9/C'"
check "stop" cwd_stop
