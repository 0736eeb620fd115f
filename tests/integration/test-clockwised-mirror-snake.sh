#!/usr/bin/env bash
# Description: snake reads and admission that survives a disk on a
# 2-copy partition over two emulated hdd7200 disks, copy 0 of every block
# on one of them.  fio's nbd engine
# reads 4 KiB at random, 16 at a time: the daemon's per-disk stats show
# both disks serving a large share of the bytes (each read went to the
# copy whose disk finishes it first), and fio's bytes are the disks'.
# The headroom says a stream that survives a disk is smaller than one
# that need not; a rate between the two is refused with --survive 1
# (the default here) naming the failed disk, admitted with --survive 0,
# refused as a recording stream (--record: every request on both disks);
# --survive 1 on a partition of one copy is refused, saying why; a
# surviving stream played by cwstream reads from both disks in turn, as
# real-time, and the daemon misses no deadline; it is kept across a restart (resv show); a larger
# rebuild_share leaves a smaller surviving stream.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq nbdcopy fio
CTL_RT_LOCK=-x	# its stream beside no other daemon of the suite (ctl_start)
fio --enghelp 2>/dev/null | grep -qw nbd || { echo "SKIP: fio lacks the nbd engine"; exit 77; }

ctl_start "$cw_tmp" --emulate hdd7200
# Copy 0 of every block on one disk (policy single), copy 1 on the other:
# reads sent to the first copy in sync would all go to one disk.
cwctl part create mir --size 48M --tier hdd --copies 2 --policy single >/dev/null
cwctl part create one --size 8M --tier hdd >/dev/null
cwctl export add mir >/dev/null
# Written, so that a read is no hole (a hole reads as zeros, no disk).
head -c 48M /dev/urandom >"$cw_tmp/in"
check "nbdcopy in" nbdcopy "$cw_tmp/in" "nbd+unix:///mir?socket=$CTL_NBD"

read_of() { cwctl --json stats | jq "[.disks[] | select(.disk == \"$1\") | .read_bytes] | add // 0"; }
a0=$(read_of hdd0) b0=$(read_of hdd1)
check "fio: 4 KiB random reads, 16 deep" env -C "$cw_tmp" fio --name=r --ioengine=nbd \
	--uri="nbd+unix:///mir?socket=$CTL_NBD" --rw=randread --bs=4k --iodepth=16 \
	--size=48M --runtime=4 --time_based --output-format=json --output="$cw_tmp/fio.json"
a=$(($(read_of hdd0) - a0)) b=$(($(read_of hdd1) - b0))
fio_bytes=$(jq '.jobs[0].read.io_bytes' "$cw_tmp/fio.json")
echo "# hdd0 read $a bytes, hdd1 $b, fio $fio_bytes ($(jq '.jobs[0].read.iops | floor' "$cw_tmp/fio.json") IOPS)"
check "both disks served reads" test "$a" -gt 0 -a "$b" -gt 0
check "each disk at least 30% of them" test $((a * 10)) -ge $((3 * (a + b))) -a \
	$((b * 10)) -ge $((3 * (a + b)))
check "every byte fio read came from one disk" test $((a + b)) -ge "$fio_bytes"

hr=$(cwctl --json disk headroom --block 1M)
plain=$(jq '.partitions[] | select(.part == "mir") | .max_rate' <<<"$hr")
surv=$(jq '.partitions[] | select(.part == "mir") | .max_rate_survive' <<<"$hr")
echo "# largest 1M stream on mir: $plain B/s, surviving a disk: $surv B/s"
check "a stream that survives a disk is smaller" test "$surv" -gt 0 -a "$surv" -lt "$plain"
check "the headroom table shows both" bash -c 'grep -q "MAX-RATE .*SURVIVE-RATE" <<<"$0" &&
	grep -Eq "^mir .* [0-9.]+MB/s +hdd[01] +[0-9.]+MB/s +hdd[01]$" <<<"$0"' \
	"$(cwctl disk headroom --block 1M)"
mid=$(((surv + plain) / 2))
out=$(cwctl resv create mir --rate "$mid" --block 1M 2>&1)
check "between the two: refused by default, naming the failed disk" bash -c \
	'grep -q "with disk hdd[01] failed, refused on disk hdd[01]" <<<"$0"' "$out"
echo "# $out"
check "... and admitted with --survive 0" bash -c 'grep -q "^would admit" <<<"$0"' \
	"$(cwctl resv create mir --rate "$mid" --block 1M --survive 0 --dry-run 2>&1)"
check "a recording stream at that rate: refused, every request on both disks" bash -c \
	'grep -q "^cwctl resv create: refused on disk hdd[01]" <<<"$0"' \
	"$(cwctl resv create mir --rate "$mid" --block 1M --survive 0 --record 2>&1)"
check "... admitted at half of it" bash -c 'grep -q "^would admit" <<<"$0"' \
	"$(cwctl resv create mir --rate "$((mid / 2))" --block 1M --record --dry-run 2>&1)"
check "--survive 1 on one copy: refused, saying why" bash -c \
	'grep -q "keeps one copy of each block" <<<"$0"' \
	"$(cwctl resv create one --rate 1MB/s --block 1M --survive 1 2>&1)"
check "--survive 2: a usage error" test "$(cwctl resv create mir --rate 1MB/s --block 1M \
	--survive 2 >/dev/null 2>&1; echo $?)" -eq 2
id=$(cwctl --json resv create mir --rate "$((surv / 2))" --block 1M | jq .id)
check "a surviving stream is admitted, and says so" bash -c \
	'grep -q "survive the loss of any one disk" <<<"$0"' "$(cwctl resv show "$id")"
check "booked on both disks" test "$(cwctl --json resv show "$id" | jq '.per_disk | length')" -eq 2

# The stream played: its reads alternate between the copies' disks by the
# rule admission booked them by, as real-time, and nothing is late.
rt_on() { cwctl --json stats | jq "[.disks[] | select(.disk == \"$1\") | .rt_requests] | add // 0"; }
check "export it bound to the reservation" cwctl export add mir --name s0 --resv "$id"
rate=$((surv / 2))
"$top_builddir/tools/cwstream" play "nbd+unix:///s0?socket=$CTL_NBD" --rate "$rate" --block 1M \
	--duration 8s --json --quiet >"$cw_tmp/s0.json" 2>"$cw_tmp/s0.err"
rc=$?
summary=$(tail -n1 "$cw_tmp/s0.json" | jq -c .summary)
r0=$(rt_on hdd0) r1=$(rt_on hdd1)
missed=$(cwctl --json stats | jq '[.disks[].rt_misses] | add')
echo "# stream of $rate B/s for 8 s: real-time requests hdd0 $r0, hdd1 $r1; missed $missed; cwstream: $summary"
# (the player's own lateness on a busy host is exit 4; the daemon's
# deadlines are checked below)
check "cwstream played every block (exit 0 or 4)" test "$rc" -eq 0 -o "$rc" -eq 4
check "... all of them" jq -e '.blocks >= 60' <<<"$summary"
check "its reads on both disks, as real-time" test "$r0" -gt 0 -a "$r1" -gt 0
check "about half on each (the rule's alternation)" test $((r0 - r1)) -le 2 -a $((r1 - r0)) -le 2
ctl_no_miss "the daemon missed no deadline" "$missed"
ctl_stop
# A larger rebuild reserve (clockwised.conf rebuild_share) leaves less to
# streams that survive a disk, nothing less to those that need not.
ctl_start "$cw_tmp" --emulate hdd7200 --conf "rebuild_share = 40;"
check "still surviving after a restart" test "$(cwctl --json resv show "$id" | jq .survive)" -eq 1
check "its export removed" cwctl export remove s0
check "the stream released" cwctl resv release "$id"
hr=$(cwctl --json disk headroom --block 1M)
check "rebuild_share = 40: a smaller surviving stream" test "$(jq '.partitions[] |
	select(.part == "mir") | .max_rate_survive' <<<"$hr")" -lt "$surv"
check "... the same one without" test "$(jq '.partitions[] | select(.part == "mir") | .max_rate' \
	<<<"$hr")" -eq "$plain"
