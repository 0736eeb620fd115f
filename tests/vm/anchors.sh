#!/usr/bin/env bash
# Run inside the guest by tests/bench/anchors (tests/vm/guest): the tools
# Clockwise means to replace, each beside Clockwise on the same work and
# the same disks.  The guest's disks are QEMU virtio disks that QEMU's
# throttle groups hold to an HDD's rate and IOPS (vda, vdb) and an SSD's
# (vdc); the kernel's tools and clockwised take them in turn, as whole
# block devices (clockwised serves them as they are: no emulation).
#   1. pvmove vs cwctl part move: a stream read through the block device
#      (tests/vm/blkplay, O_DIRECT, at its rate) while the partition's
#      blocks go from vda to vdb: late blocks, the move's time;
#   2. dm-cache (smq, dmsetup's cache target) vs the SSD cache: 4 KiB
#      random reads, Zipf(1.1), after a warm-up: hit ratio, mean latency;
#   3. BFQ weights (cgroup v2 io.bfq.weight) vs RBFQ shares (cwctl export
#      qos --weight): two tenants weighted 1:4 read one disk at once: the
#      heavy one's share of the bytes against 0.8;
#   4. md RAID1 recovery vs cwctl part rebuild: a stream read through the
#      mirror while its half on vdb is rewritten from vda: late blocks,
#      the rewrite's time.
# Each prints a table and a ratio line; the last line is the key=value
# line of tests/bench/anchors.  CW_VM_ANCHORS_RATE (bytes/s, default
# 1500000: 2 MB/s in 256 KiB blocks does not fit beside the best-effort
# reserve on the uncalibrated HDD model) the stream's rate; CW_VM_ANCHORS_MOVE_MB (64) the moved
# partition; CW_VM_ANCHORS_WARM (45) and CW_VM_ANCHORS_SECS (30) the
# cache runs' seconds; CW_VM_ANCHORS_SHARE_SECS (20) the tenants'.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/ctl-lib.sh"
. "$top_srcdir/tests/vm/lib.sh"
d=$cw_tmp
blkplay=$top_srcdir/tests/vm/blkplay
rate=${CW_VM_ANCHORS_RATE:-1500000}
move_mb=${CW_VM_ANCHORS_MOVE_MB:-64}
warm=${CW_VM_ANCHORS_WARM:-45}
secs=${CW_VM_ANCHORS_SECS:-30}
share_secs=${CW_VM_ANCHORS_SHARE_SECS:-20}
cache_mb=32 data_mb=256 tenant_mb=128 raid_mb=${CW_VM_ANCHORS_RAID_MB:-64}
BLOCK=262144
A=/dev/vda B=/dev/vdb S=/dev/vdc
t_start=$SECONDS
step() { echo "-- [$((SECONDS - t_start))s] $*"; }
die() { echo "anchors: $*" >&2; [ -z "${CTL_LOG:-}" ] || tail -n 20 "$CTL_LOG" >&2; exit 1; }
# no udev in the guest to load the disks' driver when their devices appear
modprobe virtio_blk || die "no virtio_blk module"
for _ in $(seq 50); do [ -b $S ] && break; sleep 0.1; done
for dev in $A $B $S; do test -b $dev || die "no $dev: tests/bench/anchors gives the guest three disks"; done
modprobe nbd nbds_max=4 || die "no nbd module"

# LVM without udev: its own configuration in a writable directory.
export LVM_SYSTEM_DIR=$d/lvm
mkdir -p "$LVM_SYSTEM_DIR"
cat >"$LVM_SYSTEM_DIR/lvm.conf" <<EOF
devices { obtain_device_list_from_udev = 0 filter = [ "a|^/dev/vd|", "r|.*|" ] }
activation { udev_sync = 0 udev_rules = 0 monitoring = 0 }
global { use_lvmpolld = 0 }
backup { backup = 0 archive = 0 }
EOF

# cw_up: clockwised on the three disks (their own pool, 64 KiB blocks as
# dm-cache's), no emulation: QEMU keeps their time.
cw_up() {
	local dev
	# a pool's label (block 0's first bytes) is no signature wipefs knows
	for dev in $A $B $S; do
		wipefs -qa $dev; dd if=/dev/zero of=$dev bs=1M count=1 oflag=direct status=none
	done
	"$top_builddir/tools/cwpool" create "$d/pool.db" 65536 >/dev/null &&
		"$top_builddir/tools/cwpool" add-disk "$d/pool.db" $A hdd hdd0 >/dev/null &&
		"$top_builddir/tools/cwpool" add-disk "$d/pool.db" $B hdd hdd1 >/dev/null &&
		"$top_builddir/tools/cwpool" add-disk "$d/pool.db" $S ssd ssd0 >/dev/null &&
		ctl_start "$d" --no-export-all "$@"
}
cw_down() {
	local n
	for n in /dev/nbd0 /dev/nbd1 /dev/nbd2 /dev/nbd3; do nbd_down $n; done
	ctl_stop
	rm -f "$d/pool.db"
}
# play_start DEV [MB]: the stream on DEV (its first MB MiB, default
# move_mb) until play_stop; its summary in $d/play.json (at a real-time
# priority, as a media player and the other tests' are)
play_start() {
	chrt -f 10 "$blkplay" "$1" --rate "$rate" --block $BLOCK --duration 3600 \
		--size $((${2:-$move_mb} << 20)) >"$d/play.json" 2>"$d/play.err" &
	play=$!
}
# play_stop VAR: stops it and sets VAR to its summary (not in a $(...)
# subshell, whose wait would not wait for the shell's child)
play_stop() {
	kill -INT $play; wait $play
	[ -s "$d/play.json" ] || die "the player ended without a summary: $(cat "$d/play.err")"
	printf -v "$1" '%s' "$(cat "$d/play.json")"
}
now() { date +%s.%N; }
secs_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# ---- 1. pvmove vs cwctl part move, a stream playing ----
step "pvmove"
pvcreate -qq -ff -y $A $B || die "pvcreate"
vgcreate -qq vg $A $B || die "vgcreate"
lvcreate -qq -Wn -Zn -L ${move_mb}M -n media vg $A || die "lvcreate"
dmsetup mknodes
lv=/dev/mapper/vg-media
dd if=/dev/zero of=$lv bs=1M count=$move_mb oflag=direct status=none || die "cannot fill $lv"
play_start $lv
sleep 2	# the stream under way, as in the Clockwise run
t0=$(now)
pvmove -qq -i0 $A $B || die "pvmove"
lvm_move_s=$(secs_since "$t0")
sleep 2
play_stop lvm_play
lvremove -qq -f vg/media; vgremove -qq -f vg; pvremove -qq -ff -y $A $B

step "cwctl part move"
cw_up || die "clockwised does not start"
cwctl part create media --size ${move_mb}M --policy single --disk hdd0 >/dev/null || die "part create"
ctl_fill media ${move_mb}M || die "cannot fill media"
# due a period after each request, as the player needs (it reads one
# block at a time)
rid=$(cwctl --json resv create media --rate "$rate" --block $BLOCK --due stream | jq -e .id) ||
	die "the stream is refused"
cwctl export add media --resv "$rid" >/dev/null || die "export add"
nbd_up /dev/nbd0 media || die "nbd-client"
# whole blocks to the daemon (the kernel's default cuts them at 128 KiB:
# cwctl(8), stats short_requests)
echo $((BLOCK / 1024)) >/sys/block/nbd0/queue/max_sectors_kb || die "max_sectors_kb"
play_start /dev/nbd0
sleep 2
t0=$(now)
cwctl --json part move media --disks hdd1 --policy single >"$d/move.json" || die "part move"
cwctl move list --watch --interval 0.2 >/dev/null
cw_move_s=$(secs_since "$t0")
sleep 2
play_stop cw_play
cw_rt_missed=$(cwctl --json stats | jq '[.disks[].rt_misses] | add')
cw_down

lvm_late=$(jq .misses <<<"$lvm_play") cw_late=$(jq .misses <<<"$cw_play")
echo
echo "stream of $rate B/s in 256 KiB blocks while $move_mb MiB move from vda to vdb:"
printf '%-18s %8s %6s %12s %12s %8s\n' mover blocks late worst_late_ms mean_ms move_s
printf '%-18s %8s %6s %12s %12s %8s\n' pvmove "$(jq .blocks <<<"$lvm_play")" "$lvm_late" \
	"$(jq .worst_late_ms <<<"$lvm_play")" "$(jq .mean_ms <<<"$lvm_play")" "$lvm_move_s"
printf '%-18s %8s %6s %12s %12s %8s\n' "cwctl part move" "$(jq .blocks <<<"$cw_play")" "$cw_late" \
	"$(jq .worst_late_ms <<<"$cw_play")" "$(jq .mean_ms <<<"$cw_play")" "$cw_move_s"
echo "move: late blocks pvmove/cw $lvm_late/$cw_late, move time cw/pvmove" \
	"$(awk -v a="$cw_move_s" -v b="$lvm_move_s" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')" \
	"(the daemon's own misses: $cw_rt_missed)"

# ---- 2. dm-cache (smq) vs the SSD cache ----
# zipf DEV NAME SECONDS: fio's 4 KiB Zipf(1.1) random reads over the
# first data_mb of DEV; prints the mean completion latency in ms.
zipf() {
	fio --name=zipf --filename="$1" --size=${data_mb}M --direct=1 --ioengine=libaio --iodepth=4 \
		--rw=randread --bs=4k --random_distribution=zipf:1.1:0 --randrepeat=0 --norandommap \
		--runtime="$3" --time_based --eta=never --output-format=json --output="$d/fio-$2.json" >/dev/null ||
		die "fio $2"
	jq -r '.jobs[0].read.clat_ns.mean / 1000000' "$d/fio-$2.json"
}
step "dm-cache"
modprobe -a dm_cache dm_cache_smq || die "no dm-cache modules"
dd if=/dev/zero of=$A bs=1M count=$data_mb oflag=direct status=none || die "cannot fill vda"
dd if=/dev/zero of=$S bs=1M count=8 oflag=direct status=none
# (no udev: dmsetup mknodes makes each /dev/mapper node the next table names)
dmsetup create cmeta --table "0 16384 linear $S 0" &&
	dmsetup create cdata --table "0 $((cache_mb * 2048)) linear $S 16384" &&
	dmsetup create corigin --table "0 $((data_mb * 2048)) linear $A 0" &&
	dmsetup mknodes &&
	dmsetup create cached --table "0 $((data_mb * 2048)) cache /dev/mapper/cmeta /dev/mapper/cdata /dev/mapper/corigin 128 1 writethrough smq 0" ||
	die "no dm-cache"
dmsetup mknodes
zipf /dev/mapper/cached dmcache-warm "$warm" >/dev/null
read -r h0 m0 < <(dmsetup status cached | awk '{ print $8, $9 }')
dm_mean=$(zipf /dev/mapper/cached dmcache "$secs")
read -r h1 m1 < <(dmsetup status cached | awk '{ print $8, $9 }')
dm_used=$(dmsetup status cached | awk '{ print $7 }')
dmsetup remove cached; dmsetup remove corigin; dmsetup remove cdata; dmsetup remove cmeta
dm_hit=$(awk -v h=$((h1 - h0)) -v m=$((m1 - m0)) 'BEGIN { printf "%.3f", (h + m) ? h / (h + m) : 0 }')

step "the SSD cache"
cw_up || die "clockwised does not start"
cwctl part create data --size ${data_mb}M --policy single --disk hdd0 >/dev/null || die "part create"
ctl_fill data ${data_mb}M || die "cannot fill data"
cwctl export add data >/dev/null || die "export add"
cwctl part cache data --size ${cache_mb}M >/dev/null || die "the cache is refused"
nbd_up /dev/nbd1 data || die "nbd-client"
cache_stat() { cwctl --json stats | jq -r ".caches[] | select(.part == \"data\") | .$1"; }
zipf /dev/nbd1 cw-warm "$warm" >/dev/null
h0=$(cache_stat hits); m0=$(cache_stat misses)
cw_mean=$(zipf /dev/nbd1 cw "$secs")
h1=$(cache_stat hits); m1=$(cache_stat misses)
cw_used=$(cache_stat used_bytes)
cw_down
cw_hit=$(awk -v h=$((h1 - h0)) -v m=$((m1 - m0)) 'BEGIN { printf "%.3f", (h + m) ? h / (h + m) : 0 }')
dm_mean=$(printf '%.2f' "$dm_mean") cw_mean=$(printf '%.2f' "$cw_mean")
echo
echo "4 KiB Zipf(1.1) random reads over $data_mb MiB of vda, QD 4, a $cache_mb MiB cache on vdc" \
	"in 64 KiB blocks, measured ${secs} s after ${warm} s of warm-up:"
printf '%-10s %9s %8s %14s\n' cache hit_ratio mean_ms used
printf '%-10s %9s %8s %14s\n' dm-cache "$dm_hit" "$dm_mean" "$dm_used blocks"
printf '%-10s %9s %8s %14s\n' clockwise "$cw_hit" "$cw_mean" "$((cw_used >> 20)) MiB"
echo "cache: hit ratio cw/dm-cache $(awk -v a="$cw_hit" -v b="$dm_hit" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')," \
	"mean latency cw/dm-cache $(awk -v a="$cw_mean" -v b="$dm_mean" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')"

# ---- 3. BFQ weights vs RBFQ shares ----
# tenant DEV OFFSET NAME [CGROUP]: one tenant's fio, 64 KiB random reads
# of tenant_mb from OFFSET of DEV, 8 in flight (in CGROUP: BFQ counts
# its weight by cgroup); share4 NAME: the heavy tenant's share of the
# bytes, then the MiB each read.
tenant() {
	[ -z "${4:-}" ] || echo $BASHPID >"$4/cgroup.procs"
	exec fio --name="$3" --filename="$1" --offset="$2" --size=${tenant_mb}M --direct=1 --ioengine=libaio \
		--iodepth=8 --rw=randread --bs=64k --runtime="$share_secs" --time_based \
		--output-format=json --output="$d/fio-$3.json" >/dev/null
}
share4() {
	local b1 b4
	b1=$(jq '.jobs[0].read.io_bytes' "$d/fio-$1-1.json")
	b4=$(jq '.jobs[0].read.io_bytes' "$d/fio-$1-4.json")
	awk -v a="$b1" -v b="$b4" 'BEGIN { printf "%.3f %.1f %.1f", (a + b) ? b / (a + b) : 0, a / 1048576, b / 1048576 }'
}
step "BFQ weights"
dd if=/dev/zero of=$A bs=1M count=$((2 * tenant_mb)) oflag=direct status=none
sched=$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/block/vda/queue/scheduler)
echo bfq >/sys/block/vda/queue/scheduler || die "no bfq"
cg=/sys/fs/cgroup
mountpoint -q $cg || mount -t cgroup2 none $cg || die "no cgroup2"
echo +io >$cg/cgroup.subtree_control
mkdir -p $cg/t1 $cg/t4
echo 100 >$cg/t1/io.bfq.weight && echo 400 >$cg/t4/io.bfq.weight || die "no io.bfq.weight"
tenant $A 0 bfq-1 $cg/t1 & p1=$!
tenant $A ${tenant_mb}M bfq-4 $cg/t4 & p4=$!
wait $p1 $p4
echo "$sched" >/sys/block/vda/queue/scheduler
read -r bfq_share bfq_mb1 bfq_mb4 < <(share4 bfq)

step "RBFQ shares"
# The order of best-effort requests is the daemon's only while they wait
# in it: with 32 in flight per dispatcher (queue_depth's default) both
# tenants' requests sat in QEMU's throttle queue, neither was backlogged
# at the daemon and each got half (share 0.476 in the first run).  Two in
# flight keep the disk busy and the backlog where RBFQ orders it, as BFQ
# serves one queue at a time on a rotational disk.
cw_up --conf "queue_depth = 2;" || die "clockwised does not start"
for t in 1 4; do
	cwctl part create t$t --size ${tenant_mb}M --policy single --disk hdd0 >/dev/null &&
		ctl_fill t$t ${tenant_mb}M && cwctl export add t$t >/dev/null &&
		cwctl export qos t$t --weight $t >/dev/null || die "tenant t$t"
done
nbd_up /dev/nbd2 t1 && nbd_up /dev/nbd3 t4 || die "nbd-client"
tenant /dev/nbd2 0 rbfq-1 & p1=$!
tenant /dev/nbd3 0 rbfq-4 & p4=$!
# what the daemon saw meanwhile: shares received and due, and whether
# each tenant kept the disk backlogged (shares hold only when it does)
sleep 2
cwctl --json stats --watch $((share_secs - 4)) --count 1 >"$d/rbfq-watch.json" 2>&1
wait $p1 $p4
echo "the daemon over the tenants' run: $(jq -c '[.exports[]? | {export, received, due, backlogged}]' \
	"$d/rbfq-watch.json" 2>/dev/null || cat "$d/rbfq-watch.json")"
cw_down
read -r rbfq_share rbfq_mb1 rbfq_mb4 < <(share4 rbfq)
bfq_err=$(awk -v s="$bfq_share" 'BEGIN { e = s - 0.8; printf "%.3f", e < 0 ? -e : e }')
rbfq_err=$(awk -v s="$rbfq_share" 'BEGIN { e = s - 0.8; printf "%.3f", e < 0 ? -e : e }')
echo
echo "two tenants weighted 1:4, 64 KiB random reads, QD 8 each, on vda for ${share_secs} s:"
printf '%-6s %8s %8s %11s %11s\n' order MiB_w1 MiB_w4 share_w4 share_error
printf '%-6s %8s %8s %11s %11s\n' bfq "$bfq_mb1" "$bfq_mb4" "$bfq_share" "$bfq_err"
printf '%-6s %8s %8s %11s %11s\n' rbfq "$rbfq_mb1" "$rbfq_mb4" "$rbfq_share" "$rbfq_err"
echo "shares: bfq_share_error=$bfq_err rbfq_share_error=$rbfq_err"

# ---- 4. md RAID1 recovery vs a mirror's rebuild, a stream playing ----
# Both rewrite a whole mirror half, vdb, from vda while the stream reads
# the mirror: md recovers a RAID1 made degraded (vda and "missing") when
# vdb is added (no bitmap: a new member is recovered whole, at md's
# speed_limit_min/max); clockwised rebuilds the copies on hdd1 (vdb) of a
# 2-copy partition, which went stale while hdd1 failed every request
# (the fault engine's fail-file) as the partition was written, with
# `cwctl part rebuild` once hdd1 is back.
step "md RAID1 recovery"
modprobe raid1 || die "no raid1 module"
wipefs -qa $A $B
mdadm --create /dev/md0 --run --quiet --level=1 --raid-devices=2 --metadata=1.2 --bitmap=none \
	--size=$((raid_mb * 1024)) $A missing || die "mdadm --create"
dd if=/dev/zero of=/dev/md0 bs=1M count=$raid_mb oflag=direct status=none || die "cannot fill md0"
play_start /dev/md0 $raid_mb
sleep 2
t0=$(now)
mdadm --quiet /dev/md0 --add $B || die "mdadm --add"
sleep 0.5
mdadm --wait /dev/md0 >/dev/null 2>&1
md_s=$(secs_since "$t0")
grep -q recovery /proc/mdstat && die "md0 still recovering"
sleep 2
play_stop md_play
md_limits="$(cat /proc/sys/dev/raid/speed_limit_min)-$(cat /proc/sys/dev/raid/speed_limit_max) KB/s"
mdadm --stop /dev/md0 >/dev/null 2>&1
mdadm --zero-superblock $A $B 2>/dev/null

step "cwctl part rebuild"
faulty="disks = ( { path = \"$A\"; name = \"hdd0\"; },
	{ path = \"$B\"; name = \"hdd1\"; fault = \"fail-file=$d/hdd1.dead\"; },
	{ path = \"$S\"; name = \"ssd0\"; } );"
cw_up --conf "$faulty" || die "clockwised does not start"
cwctl part create mir --size ${raid_mb}M --copies 2 --tier hdd >/dev/null || die "part create --copies 2"
touch "$d/hdd1.dead"
ctl_fill mir ${raid_mb}M || die "cannot write mir while hdd1 fails"
stale=$(cwctl --json part show mir --all | jq '.stale_per_copy | add')
[ "$stale" -ge $((raid_mb * 16)) ] 2>/dev/null || die "only $stale blocks of mir went stale on hdd1"
rm -f "$d/hdd1.dead"
ctl_stop || die "clockwised does not stop"
ctl_start "$d" --no-export-all --conf "$faulty" || die "clockwised does not start again"
# (a rebuild the daemon may start by itself waits for the stream)
for id in $(cwctl --json move list | jq -r '.[] | select(.state != "done") | .id'); do
	cwctl move pause "$id" >/dev/null
done
rid=$(cwctl --json resv create mir --rate "$rate" --block $BLOCK --due stream | jq -e .id) ||
	die "the stream is refused on the degraded mirror"
cwctl export add mir --resv "$rid" >/dev/null || die "export add"
nbd_up /dev/nbd0 mir || die "nbd-client"
echo $((BLOCK / 1024)) >/sys/block/nbd0/queue/max_sectors_kb || die "max_sectors_kb"
play_start /dev/nbd0 $raid_mb
sleep 2
t0=$(now)
ids=$(cwctl --json move list | jq -r '.[] | select(.state != "done") | .id')
if [ -n "$ids" ]; then
	for id in $ids; do cwctl move resume "$id" >/dev/null; done
else
	cwctl --json part rebuild mir >"$d/rebuild.json" || die "part rebuild"
fi
cwctl move list --watch --interval 0.2 >/dev/null
cw_rb_s=$(secs_since "$t0")
sleep 2
play_stop cw_rb_play
cw_rb_missed=$(cwctl --json stats | jq '[.disks[].rt_misses] | add')
left=$(cwctl --json part show mir --all | jq '.stale_per_copy | add')
[ "$left" -eq 0 ] || die "$left blocks of mir still stale after the rebuild"
cw_down

md_late=$(jq .misses <<<"$md_play") cw_rb_late=$(jq .misses <<<"$cw_rb_play")
echo
echo "stream of $rate B/s in 256 KiB blocks while a $raid_mb MiB mirror half (vdb) is rewritten from vda:"
printf '%-22s %8s %6s %12s %12s %9s\n' rewrite blocks late worst_late_ms mean_ms rewrite_s
printf '%-22s %8s %6s %12s %12s %9s\n' "md RAID1 recovery" "$(jq .blocks <<<"$md_play")" "$md_late" \
	"$(jq .worst_late_ms <<<"$md_play")" "$(jq .mean_ms <<<"$md_play")" "$md_s"
printf '%-22s %8s %6s %12s %12s %9s\n' "cwctl part rebuild" "$(jq .blocks <<<"$cw_rb_play")" \
	"$cw_rb_late" "$(jq .worst_late_ms <<<"$cw_rb_play")" "$(jq .mean_ms <<<"$cw_rb_play")" "$cw_rb_s"
echo "rebuild: late blocks md/cw $md_late/$cw_rb_late, time cw/md" \
	"$(awk -v a="$cw_rb_s" -v b="$md_s" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')" \
	"(md's speed limits $md_limits; the daemon's own misses: $cw_rb_missed)"

step "done"
echo "pvmove_late_blocks=$lvm_late cw_move_late_blocks=$cw_late dmcache_hit=$dm_hit" \
	"cw_cache_hit=$cw_hit dmcache_mean_ms=$dm_mean cw_cache_mean_ms=$cw_mean" \
	"md_recovery_late_blocks=$md_late cw_rebuild_late_blocks=$cw_rb_late"
