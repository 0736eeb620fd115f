#!/usr/bin/env bash
# Run inside the guest by tests/bench/ublk (tests/vm/guest --kernel bpo):
# one export of clockwised read three ways over the same backing file,
# each with fio (io_uring, O_DIRECT, 4 KiB random reads): through the
# kernel's NBD client (nbd-client -unix), through the export's ublk
# device, and through the kernel's own loop device on the disk file the
# pool holds (the baseline with no server at all).  QD32 for IOPS, QD1
# for the 99th percentile of completion latency, in rounds, each figure
# the best of its rounds.  Prints one line per run and the ratios last:
#   ublk_over_nbd_4k_qd32=<x> ublk_over_loop_4k_qd32=<y> ublk_qd1_p99_over_nbd=<z>
# CW_VM_BENCH_SECONDS (default 5) per run, CW_VM_BENCH_ROUNDS (default 3).
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/ctl-lib.sh"
. "$top_srcdir/tests/vm/lib.sh"
d=$cw_tmp
secs=${CW_VM_BENCH_SECONDS:-5}
rounds=${CW_VM_BENCH_ROUNDS:-3}
size=256M
modprobe ublk_drv && modprobe nbd nbds_max=2 || { echo "no ublk_drv or nbd"; exit 1; }
modprobe loop 2>/dev/null
# one disk, the backing file, wholly the partition's
"$top_builddir/tools/cwpool" create "$d/pool.db" >/dev/null &&
	truncate -s 320M "$d/disk.img" &&
	"$top_builddir/tools/cwpool" add-disk "$d/pool.db" "$d/disk.img" ssd ssd0 >/dev/null || exit 1
ctl_start "$d" --no-export-all || exit 1
cwctl part create b --size $size >/dev/null && cwctl export add b --ublk >/dev/null &&
	cwctl export add b --name bn >/dev/null || exit 1
ublk=$(cwctl --json export list | jq -r '.[] | select(.name == "b") | .device')
# written once, so that no read is of a hole (served without the disk)
dd if=/dev/urandom of="$ublk" bs=1M count=256 oflag=direct status=none || exit 1
nbd_up /dev/nbd0 bn || exit 1
cleanup_add "nbd_down /dev/nbd0"
# The partition's first block on the disk file, and so the loop
# device's offset: found by its first MiB, which is random.
head -c 1048576 "$ublk" >"$d/first"
off=
for ((mb = 0; mb < 320; mb++)); do
	if cmp -s -n 1048576 <(dd if="$d/disk.img" bs=1M skip=$mb count=1 status=none) "$d/first"; then
		off=$((mb << 20)); break
	fi
done
[ -n "$off" ] || { echo "the partition's first block is not in the disk file"; exit 1; }
loop=$(losetup -f --show -o "$off" --sizelimit $((256 << 20)) "$d/disk.img") || exit 1
cleanup_add "losetup -d $loop"
cmp -s -n $((8 << 20)) "$loop" "$ublk" || echo "note: the loop device's first 8 MiB differ (the partition is not contiguous on the disk)"

run() {	# DEV QD -> "iops p99_us"
	fio --name=r --filename="$1" --rw=randread --bs=4k --ioengine=io_uring --iodepth="$2" \
		--direct=1 --time_based --runtime="$secs" --size=$size --norandommap --eta=never \
		--output-format=json --output="$d/fio.json" >/dev/null 2>&1 || { echo "0 0"; return; }
	jq -r '.jobs[0].read | "\(.iops) \(.clat_ns.percentile["99.000000"] / 1000)"' "$d/fio.json"
}
# Rounds, each device in turn within each: the host's other work (the
# guest's one CPU is emulated on a shared machine) slows a run, never
# speeds it up, so each figure is the best of its rounds.
declare -A iops p99
for ((round = 1; round <= rounds; round++)); do
	for dev in nbd:/dev/nbd0 ublk:$ublk loop:$loop; do
		for qd in 32 1; do
			k=${dev%%:*}$qd
			read -r i p < <(run "${dev#*:}" $qd)
			printf 'round %d %-5s qd%-2s %10.0f IOPS  p99 %8.0f us\n' $round "${dev%%:*}" $qd \
				"$i" "$p"
			awk -v a="$i" -v b="${iops[$k]:-0}" 'BEGIN { exit !(a > b) }' && iops[$k]=$i
			awk -v a="$p" -v b="${p99[$k]:-0}" 'BEGIN { exit !(b == 0 || (a > 0 && a < b)) }' &&
				p99[$k]=$p
		done
	done
done
for k in nbd32 nbd1 ublk32 ublk1 loop32 loop1; do
	printf 'best  %-7s %10.0f IOPS  p99 %8.0f us\n' "$k" "${iops[$k]}" "${p99[$k]}"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }
echo "ublk_over_nbd_4k_qd32=$(ratio "${iops[ublk32]}" "${iops[nbd32]}")" \
	"ublk_over_loop_4k_qd32=$(ratio "${iops[ublk32]}" "${iops[loop32]}")" \
	"ublk_qd1_p99_over_nbd=$(ratio "${p99[ublk1]}" "${p99[nbd1]}")"
