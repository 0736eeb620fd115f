#!/bin/bash
# Description: the OSD stopped under load: the clients get EIO (once the
# cluster's op timeout passes), clockwised stays up and serves the other
# disks, and the image serves again once the OSD is back.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
. "$top_srcdir/tests/integration/ceph-lib.sh"
requires qemu-io fio
ceph_setup
cwctl() { "$top_builddir/tools/cwctl" -s "$cw_tmp/control" "$@"; }

check "image" ceph_image r0 64M
check "pool" cwd_pool 32M l0
check "an RBD disk joins it" "$cwpool" add-disk "$cwd_db" "$(ceph_spec r0)" rbd r0
check "partition on the image" cwd_part vol 48M single 2
check "partition on the local disk" cwd_part here 16M single 1
cwd_conf
cwd_start
uri=$(cwd_uri vol)
check "write" qemu-io -f raw -c 'write -P 0x3c 0 8M' -c flush "$uri"
# load: random reads at depth 8 for longer than the outage lasts
fio --name=load --ioengine=nbd --uri="$uri" --rw=randread --bs=64k --iodepth=8 --size=8M \
	--time_based --runtime=120 --output="$cw_tmp/fio.out" >/dev/null 2>&1 &
load=$!
cleanup_add "kill $load 2>/dev/null"
wait_for "the load to run" 30 bash -c "cwctl() { '$top_builddir/tools/cwctl' -s '$cw_tmp/control' \"\$@\"; };
	cwctl --json stats | grep -q '\"be_requests\": *[1-9]'"
check "stop the OSD" ceph_osd_stop
wait_for "fio to see an error" 60 bash -c "! kill -0 $load"
check "the load failed with EIO" grep -qi 'error=Input/output error\|err= *5' "$cw_tmp/fio.out"
qemu-io -f raw -c 'read -P 0x3c 0 1M' "$uri" >"$cw_tmp/qio" 2>&1
check "a read gets EIO" grep -q 'Input/output error' "$cw_tmp/qio"
check "clockwised is up" kill -0 "$cwd_pid"
check "answers its control socket" cwctl status
check "and serves the local disk" qemu-io -f raw -c 'write -P 0x11 0 1M' -c 'read -P 0x11 0 1M' "$(cwd_uri here)"
check "the daemon says which disk failed and why" \
	grep -q 'disk r0 (rbd:.*): read of .* failed: Connection timed out' "$(cwd_log)"
check "start the OSD" ceph_osd_start
check "the image serves again" qemu-io -f raw -c 'read -P 0x3c 0 8M' "$uri"
check "and takes writes" qemu-io -f raw -c 'write -P 0x4d 8M 1M' -c flush -c 'read -P 0x4d 8M 1M' "$uri"
check "stop" cwd_stop
