#!/bin/bash
# Description: data through NBD onto a partition on an RBD image and back;
# the label in block 0 of the image; reassembly after a restart; disks
# added while the daemon runs; a cluster that does not answer leaves the
# pool degraded as a missing local disk does, and its return heals it.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
. "$top_srcdir/tests/integration/ceph-lib.sh"
requires nbdcopy nbdinfo qemu-io jq
ceph_setup
cwctl() { "$top_builddir/tools/cwctl" -s "$cw_tmp/control" "$@"; }

# The disk's own copy of the configuration, to take the cluster away.
conf=$cw_tmp/cluster.conf
cp "$ceph_conf" "$conf"
check "images" ceph_image r0 128M
check "images" ceph_image r1 64M
check "pool" cwd_pool 64M l0
check "an RBD disk joins it" "$cwpool" add-disk "$cwd_db" "$(ceph_spec r0 "$conf")" rbd r0
check "partition on it" cwd_part vol 96M single 2
check "partition on the local disk" cwd_part here 16M single 1
cwd_conf
cwd_start
check "its engine is rbd" grep -q 'disk r0: rbd:rbd/.*, rbd, .* rbd I/O' "$(cwd_log)"
check "the tier is rbd" bash -c "'$top_builddir/tools/cwctl' -s '$cw_tmp/control' --json disk list |
	jq -e '.[] | select(.name == \"r0\") | .tier == \"rbd\"'"
head -c 80M /dev/urandom >"$cw_tmp/data"
check "write through NBD" nbdcopy "$cw_tmp/data" "$(cwd_uri vol)"
check "read back" nbdcopy "$(cwd_uri vol)" "$cw_tmp/back"
check "the same bytes" bash -c "cd '$cw_tmp' && head -c 80M back | sha256sum | sed 's/-/data/' | sha256sum -c --quiet"
check "local partition" qemu-io -f raw -c 'write -P 0x5a 0 1M' "$(cwd_uri here)"
ceph_rbd export --no-progress "rbd/$(ceph_image_name r0)" "$cw_tmp/r0.img" >/dev/null 2>&1
check "the label lives in block 0 of the image" bash -c "head -c 8 '$cw_tmp/r0.img' | grep -q CLKWISE"
rm -f "$cw_tmp/r0.img"

# cwctl disk add takes an image while the daemon runs; bad names and
# missing images are refused with the reason.
check "cwctl disk add rbd:" bash -c "'$top_builddir/tools/cwctl' -s '$cw_tmp/control' disk add \
	'$(ceph_spec r1)' --name r1 | grep -q 'added disk r1 (id 3, rbd'"
cwctl disk add 'rbd:nopool' >"$cw_tmp/err" 2>&1
check "a malformed name is refused" grep -q 'expected rbd:POOL/IMAGE' "$cw_tmp/err"
cwctl disk add "$(ceph_spec absent)" >"$cw_tmp/err" 2>&1
check "an absent image is refused" grep -q 'No such file' "$cw_tmp/err"
cwctl disk add "$(ceph_spec r1)" --tier hdd >"$cw_tmp/err" 2>&1
check "an image is of tier rbd" grep -q 'of tier rbd' "$cw_tmp/err"
check "remove it again" cwctl disk remove r1
check "stop" cwd_stop

cwd_start
check "after a restart, by UUID" nbdcopy "$(cwd_uri vol)" "$cw_tmp/back"
check "the same bytes" bash -c "cd '$cw_tmp' && head -c 80M back | sha256sum | sed 's/-/data/' | sha256sum -c --quiet"
check "stop" cwd_stop

# No cluster: a monitor nobody listens on, a short mount timeout.
sed -i 's/^mon host = .*/mon host = v2:127.0.0.1:9/; s/^client mount timeout = .*/client mount timeout = 3/' "$conf"
cwd_start
check "the pool is degraded" grep -q 'degraded: 1 disk missing' "$(cwd_log)"
check "the image's partition is not exported" grep -q 'partition vol is not exported' "$(cwd_log)"
check "the local one is served" qemu-io -f raw -c 'read -P 0x5a 0 1M' "$(cwd_uri here)"
check "stop" cwd_stop
cp "$ceph_conf" "$conf"
cwd_start
check "the cluster back: exported again" bash -c \
	"nbdinfo --list 'nbd+unix:///?socket=$cwd_sock' | grep -q 'export=\"vol\"'"
check "with its data" nbdcopy "$(cwd_uri vol)" "$cw_tmp/back"
check "the same bytes" bash -c "cd '$cw_tmp' && head -c 80M back | sha256sum | sed 's/-/data/' | sha256sum -c --quiet"
check "stop" cwd_stop
