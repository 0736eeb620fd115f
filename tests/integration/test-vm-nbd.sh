#!/usr/bin/env bash
# Description: the kernel's NBD client, for real: in a QEMU guest on
# Debian's kernel (tests/vm/guest), nbd-client hands clockwised's unix
# socket to the kernel; ext4 and xfs on /dev/nbd0 take fio's verified
# files and fsck finds them clean, before and after clockwised restarts;
# a reserved stream read through /dev/nbd1 with O_DIRECT at its rate,
# while fio loads another export, has no late block; sub-block writes of
# 512-byte sectors land where they were aimed.  The checks run in the
# guest (tests/vm/nbd-kernel.sh) and are counted here.  Skipped (77)
# without QEMU, the kernel or busybox-static (tests/vm/guest says which),
# and in a sanitizer build: the guest runs the host's binaries under
# software emulation, where a sanitizer's would take minutes and keep no
# stream's time; the plain build runs it.
. "${top_srcdir:-.}/tests/integration/lib.sh"
if [ -n "${CW_SANITIZED:-}" ]; then
	echo "SKIP: the guest test runs in the plain build only (a sanitizer build's binaries" \
		"under software emulation are too slow to keep a stream's time)"
	rm -rf "$cw_tmp"; trap - EXIT; exit 77
fi
requires nbd-client mkfs.xfs xfs_repair mkfs.ext4 e2fsck fio jq nbdcopy qemu-io python3
# The guest's CPU is one of the host's: no stream of another test beside
# it (see ctl_start).
cw_rt_lock -x
. "$top_srcdir/tests/vm/host.sh"
vm_test "the kernel's NBD client" "$top_srcdir/tests/vm/nbd-kernel.sh"
