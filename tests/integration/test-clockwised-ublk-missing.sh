#!/usr/bin/env bash
# Description: on a kernel without ublk_drv (no /dev/ublk-control, as
# Debian 12's own 6.1 and most containers), cwctl export add --ublk fails
# and says why, nothing is stored (the partition can still be exported
# over NBD under the same name), and a partition that clockwised.conf's
# exports.ublk names is listed but not served, the reason logged, while
# the daemon starts and serves the rest.  Skipped (77) where the kernel has
# ublk (tests/integration/test-vm-ublk.sh covers that, in a guest).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
if [ -e /dev/ublk-control ]; then
	echo "SKIP: this kernel has ublk (/dev/ublk-control): nothing missing to test"
	rm -rf "$cw_tmp"; trap - EXIT; exit 77
fi
requires jq nbdinfo

"$top_builddir/tools/cwpool" create "$cw_tmp/pool.db" >/dev/null &&
	truncate -s 256M "$cw_tmp/hdd0.img" "$cw_tmp/hdd1.img" && truncate -s 128M "$cw_tmp/ssd0.img" &&
	for x in hdd0 hdd1; do
		"$top_builddir/tools/cwpool" add-disk "$cw_tmp/pool.db" "$cw_tmp/$x.img" hdd $x >/dev/null
	done && "$top_builddir/tools/cwpool" add-disk "$cw_tmp/pool.db" "$cw_tmp/ssd0.img" ssd ssd0 >/dev/null
ctl_start "$cw_tmp" --no-export-all
cwctl part create a --size 8M >/dev/null
cwctl part create b --size 8M >/dev/null
out=$(cwctl export add a --ublk 2>&1)
echo "$out"
expect_fail "export add a --ublk fails" cwctl export add a --ublk
check "and says the kernel has no ublk" grep -q "no ublk in this kernel: /dev/ublk-control is missing" <<<"$out"
check "nothing is stored" test "$(cwctl --json export list | jq length)" = 0
check "a is still exported over NBD" cwctl export add a
check "and served" nbdinfo --size "nbd+unix:///a?socket=$CTL_NBD"
check "clockwised stops" ctl_stop
check "clockwised starts with exports.ublk = [ \"b\" ]" ctl_start "$cw_tmp" --no-export-all --ublk '"b"'
check "and logs why b is not served" grep -q "export b is not served as a ublk device: no ublk in this kernel" "$CTL_LOG"
check "a is served still" nbdinfo --size "nbd+unix:///a?socket=$CTL_NBD"
# b is stored (a kernel with ublk_drv at the next start serves it) and
# listed without a device
check "b is listed, with no device" \
	test "$(cwctl --json export list | jq -r '[.[] | "\(.name):\(.device)"] | join(",")')" = "a:null,b:null"
check "clockwised stops" ctl_stop
