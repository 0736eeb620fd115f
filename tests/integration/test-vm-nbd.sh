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
out=$cw_tmp/vm
mkdir -p "$out"
t0=$SECONDS
# The guest stands for a machine of its own: its one CPU gets a larger
# share of the host's than the tests beside it (nice -10, where allowed),
# as a virtual machine that keeps streams is given its CPU.
nice -n -10 bash "$top_srcdir/tests/vm/guest" -v --timeout "${CW_VM_TIMEOUT:-300}" --out "$out" \
	"$top_srcdir/tests/vm/nbd-kernel.sh" | tee "$cw_tmp/guest.log"
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 77 ]; then
	rm -rf "$cw_tmp"; trap - EXIT; exit 77
fi
# A guest that never came up (its second init never said so) says nothing
# of the kernel's client: a host whose QEMU cannot boot the kernel.
if [ "$rc" -ne 0 ] && [ ! -s "$out/.boot_s" ]; then
	echo "SKIP: the guest did not boot on this host (QEMU exit path above); nothing of the" \
		"kernel's NBD client was tried"
	rm -rf "$cw_tmp"; trap - EXIT; exit 77
fi
echo "the guest's run: $((SECONDS - t0)) s, boot $(cat "$out/.boot_s" 2>/dev/null || echo ?) s"
counts=$(grep -E '^cw-counts: passed=[0-9]+ failed=[0-9]+' "$cw_tmp/guest.log" | tail -n1)
check "the guest ran its checks to the end" test -n "$counts"
if [ -n "$counts" ]; then
	p=${counts#*passed=}; p=${p%% *}
	f=${counts##*failed=}
	cw_passed=$((cw_passed + p))
	cw_failed=$((cw_failed + f))
fi
check "the guest's script exited 0" test "$rc" -eq 0
