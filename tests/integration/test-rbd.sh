#!/bin/bash
# Description: disks on a Ceph cluster.  One one-node cluster (a monitor
# and a BlueStore OSD on a file, no mgr) is brought up for all the cases
# in tests/integration/rbd/, which run against it in turn and are torn
# down with it; each case also runs alone (bringing its own cluster).
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/ceph-lib.sh"
requires qemu-io nbdcopy nbdinfo
ceph_requires

t0=$SECONDS
cleanup_add ceph_down
check "a one-node cluster comes up" ceph_up
echo "cluster up in $((SECONDS - t0)) s"
[ "$cw_failed" -eq 0 ] || exit 1
export CW_CEPH_CONF=$ceph_conf
for t in "$top_srcdir"/tests/integration/rbd/*.sh; do
	echo "== $(basename "$t")"
	t0=$SECONDS
	check "$(basename "$t" .sh)" bash "$t"
	echo "($(basename "$t" .sh): $((SECONDS - t0)) s)"
done
