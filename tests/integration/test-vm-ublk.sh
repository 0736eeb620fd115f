#!/usr/bin/env bash
# Description: clockwised's exports as ublk block devices, for real: in a
# QEMU guest on bookworm-backports' 6.12 kernel (tests/vm/guest --kernel
# bpo; Debian 12's own 6.1 has no ublk_drv), cwctl export add --ublk makes
# /dev/ublkb0; ext4 on it takes fio's verified files and fsck finds it
# clean; the device and NBD read the same bytes; clockwised killed (-9)
# under fio's verified writes to another device and started again takes
# both devices back (ublk's user recovery) and fio verifies every block;
# a device node's owner, group and mode follow the export's access rules;
# growing the partition under a device is refused; removing the export
# removes the device; clockwised without root makes an unprivileged
# device only its user opens; a stream through a device bound to its
# reservation, at its rate beside fio's load, misses nothing.  A second,
# shorter guest of two vCPUs (tests/vm/ublk-queues.sh): a queue per CPU,
# a thread for each, both serving, and kill -9 takes both back.  The
# checks run in the guest (tests/vm/ublk-kernel.sh) and are counted here.
# Skipped (77) without QEMU, busybox-static or the backports kernel
# (tests/vm/guest and tests/vm/kernel-bpo say which), and in a sanitizer
# build (as test-vm-nbd.sh: the plain build runs it).
. "${top_srcdir:-.}/tests/integration/lib.sh"
if [ -n "${CW_SANITIZED:-}" ]; then
	echo "SKIP: the guest test runs in the plain build only (a sanitizer build's binaries" \
		"under software emulation are too slow)"
	rm -rf "$cw_tmp"; trap - EXIT; exit 77
fi
requires mkfs.ext4 e2fsck fio jq nbdcopy blkdiscard
cw_rt_lock -x
. "$top_srcdir/tests/vm/host.sh"
# (3 to 4 minutes in all when the host is quiet)
: "${CW_VM_TIMEOUT:=600}"
vm_test ublk --kernel bpo "$top_srcdir/tests/vm/ublk-kernel.sh"
# (its own guest: with two vCPUs, each a host thread, the first guest's
# stream would wait for the host's CPUs more often)
vm_test ublk-queues --kernel bpo --smp 2 "$top_srcdir/tests/vm/ublk-queues.sh"
