#!/usr/bin/env bash
# Best effort with guarantees between clients, on real I/O: clockwised on
# three emulated hdd7200 disks (files in $TMPDIR that answer when such a
# disk would), one stream admitted with -r and read at its rate, and five
# exports, each striped over the three disks, read by fio at once, each
# keeping 16 reads of 256 KiB in flight: three weighted 1:2:4, one with 30%
# of the disks' best-effort capacity reserved, one limited to 10% of it.
# The same run with be_order = "fifo" (the baseline) and "rbfq".  For each
# order, each export's share of the bytes read; then, over the weighted
# three, the largest distance between an export's part of their bytes and
# its weight's part (share_error_max), the reserved export's rate over its
# reservation (resv_met), how far the limited one went over its limit
# (limit_over) and the stream's deadline misses (rt_misses).  Each order
# also prints what `cwctl stats --watch` saw of the run: every export's
# share of disk time received against the share it was due.
#   usage: beqos-live.sh [SECONDS]    (default 10 per order)
# Environment: CW_BEQOS_EMULATE (default hdd7200; "none": the files' own
# time, which the scheduler's books still count in the hdd7200 model's, so
# shares, reservations and limits hold all the same), CW_BEQOS_DISKS
# (default 3).
set -u
secs=${1:-10}
emulate=${CW_BEQOS_EMULATE:-hdd7200}
ndisks=${CW_BEQOS_DISKS:-3}
top_builddir=${top_builddir:-.}
cwd_bin=$top_builddir/daemon/clockwised
cwpool=$top_builddir/tools/cwpool
cwctl_bin=$top_builddir/tools/cwctl
for c in fio jq awk; do
	command -v $c >/dev/null || { echo "SKIP: $c is not installed"; exit 77; }
done
fio --enghelp 2>/dev/null | grep -qw nbd || { echo "SKIP: fio lacks the nbd engine"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/beqos-live.XXXXXX")
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
cwctl() { "$cwctl_bin" --socket "$tmp/control" "$@"; }
die() { echo "beqos-live: $*" >&2; [ -f "$tmp/log" ] && tail -20 "$tmp/log" >&2; exit 1; }

clients=(w1 w2 w4 resv30 lim10)
"$cwpool" create "$tmp/pool.db" >/dev/null || die "pool"
disks=
for i in $(seq "$ndisks"); do
	truncate -s $((448 / ndisks + 16))M "$tmp/d$i.disk"
	"$cwpool" add-disk "$tmp/pool.db" "$tmp/d$i.disk" hdd "d$i" >/dev/null || die "disk d$i"
	[ "$emulate" = none ] ||
		disks="$disks{ path = \"$tmp/d$i.disk\"; name = \"d$i\"; emulate = \"$emulate\"; },"
done
for p in "${clients[@]}" video; do
	"$cwpool" create-part "$tmp/pool.db" "$p" 64M rotation >/dev/null || die "partition $p"
done

start() {
	cat >"$tmp/conf" <<EOC
pool = "$tmp/pool.db";
listen = { unix = [ "$tmp/nbd.sock" ]; };
exports = { all = true; };
control_socket = "$tmp/control";
queue_depth = 4;
be_order = "$1";
disks = ( ${disks%,} );
EOC
	"$cwd_bin" -f -c "$tmp/conf" -r video:2M:256k 2>"$tmp/log" &
	pid=$!
	for _ in $(seq 400); do
		grep -q 'ready: ' "$tmp/log" && return 0
		kill -0 $pid 2>/dev/null || die "clockwised exited"
		sleep 0.05
	done
	die "clockwised did not start"
}
stop() { kill -TERM $pid && wait $pid; pid=; }
uri() { echo "nbd+unix:///$1?socket=$tmp/nbd.sock"; }

# The rate that is the disk's whole time, and best effort's part of it.
rates() {
	local s full cap
	cwctl export qos resv30 --reserve 1MB/s >/dev/null || die "probe"
	s=$(cwctl --json export qos resv30 | jq '.disks[0].reserve_share')
	full=$(awk -v s="$s" 'BEGIN { printf "%.0f", 1000000 / s }')
	cap=$(cwctl export qos resv30 --reserve $((full * 999 / 1000)) --dry-run 2>&1 |
	      sed -n 's/.*best effort has \([0-9.]*\)%.*/\1/p')
	[ -n "$cap" ] || cap=100
	resv=$(awk -v f="$full" -v c="$cap" 'BEGIN { printf "%.0f", f * c / 100 * 0.3 }')
	limit=$(awk -v f="$full" -v c="$cap" 'BEGIN { printf "%.0f", f * c / 100 * 0.1 }')
	echo "disk time = $full B/s of 256 KiB reads; best effort has $cap%:" \
	     "reserve $resv B/s, limit $limit B/s" >&2
}

for order in fifo rbfq; do
	start $order
	if [ $order = fifo ]; then
		for p in "${clients[@]}" video; do
			fio --name=fill --ioengine=nbd --uri="$(uri $p)" --rw=write --bs=1M \
				--output=/dev/null || die "fill $p"
		done
		rates
	fi
	cwctl export qos w1 --weight 1 >/dev/null &&
	cwctl export qos w2 --weight 2 >/dev/null &&
	cwctl export qos w4 --weight 4 >/dev/null &&
	cwctl export qos resv30 --weight 1 --reserve $resv >/dev/null &&
	cwctl export qos lim10 --weight 1 --limit $limit >/dev/null || die "QoS"
	args=()
	for p in "${clients[@]}"; do
		args+=(--name="$p" --uri="$(uri $p)" --rw=randread --bs=256k --iodepth=16)
	done
	# the stream: its blocks at its rate, one at a time
	args+=(--name=video --uri="$(uri video)" --rw=read --bs=256k --rate=2m --iodepth=1)
	# what cwctl stats sees of the run, from its second second to its last
	(sleep 1; cwctl --json stats --watch $((secs > 3 ? secs - 2 : 1)) --count 1 \
		>"$tmp/$order.watch") &
	watcher=$!
	(cd "$tmp" && fio --ioengine=nbd --size=64M --time_based --runtime="$secs" \
		--output-format=terse --terse-version=3 "${args[@]}") >"$tmp/$order.terse" ||
		die "fio"
	wait $watcher || die "cwctl stats --watch"
	echo "$order: cwctl stats --watch (shares of one disk's time, over $ndisks disks):"
	jq -r '.exports[] | "  \(.export): received \(.received * 1000 | round / 1000)" +
		" due \(.due * 1000 | round / 1000) reservation_met=\(.reservation_met)" +
		" limit_held=\(.limit_held)"' "$tmp/$order.watch"
	stop || die "clockwised did not stop cleanly"
	# how late the emulated disks answered (a busy host makes them late)
	grep -o 'disk [^ ]* emulating [^:]*: .*' "$tmp/log" | sed 's/^/  /'
	# name, bytes/s
	awk -F';' '{ printf "%s %.0f\n", $3, $6 * 1024 * 1000 / $9 }' "$tmp/$order.terse" \
		>"$tmp/$order.rates"
	grep -o 'stats reservation video: .*rt_missed=[0-9]*' "$tmp/log" |
		sed 's/.*rt_missed=//' >"$tmp/$order.missed"
done

awk -v resv="$resv" -v limit="$limit" '
	FNR == 1 { f++ }
	f <= 2 { rate[f, $1] = $2; next }
	f <= 4 { missed[f - 2] = $1 }
	END {
		split("w1 w2 w4 resv30 lim10", c, " ")
		split("1 2 4 1 1", w, " ")
		printf "%-8s %6s %11s %11s %s\n", "export", "weight", "fifo share", "rbfq share", "ideal (rbfq)"
		for (o = 1; o <= 2; o++) {
			tot[o] = 0; tw[o] = 0
			for (i = 1; i <= 5; i++) tot[o] += rate[o, c[i]]
			for (i = 1; i <= 3; i++) tw[o] += rate[o, c[i]]
		}
		for (i = 1; i <= 5; i++) {
			ideal = i <= 3 ? sprintf("%.4f of the three", w[i] / 7) : \
				i == 4 ? sprintf("resv %.0f B/s", resv) : sprintf("limit %.0f B/s", limit)
			printf "%-8s %6d %11.4f %11.4f %s\n", c[i], w[i], rate[1, c[i]] / tot[1], \
				rate[2, c[i]] / tot[2], ideal
		}
		for (o = 1; o <= 2; o++) {
			err = 0
			for (i = 1; i <= 3; i++) {
				d = rate[o, c[i]] / tw[o] - w[i] / 7
				if (d < 0) d = -d
				if (d > err) err = d
			}
			over = rate[o, "lim10"] / limit - 1
			if (over < 0) over = 0
			line[o] = sprintf("share_error_max=%.4f resv_met=%.3f limit_over=%.3f rt_misses=%d", \
					  err, rate[o, "resv30"] / resv, over, missed[o])
		}
		printf "rates (B/s): fifo"
		for (i = 1; i <= 5; i++) printf " %s=%.0f", c[i], rate[1, c[i]]
		printf "; rbfq"
		for (i = 1; i <= 5; i++) printf " %s=%.0f", c[i], rate[2, c[i]]
		printf "; video fifo=%.0f rbfq=%.0f\n", rate[1, "video"], rate[2, "video"]
		print "fifo: " line[1]
		print line[2]
	}' "$tmp/fifo.rates" "$tmp/rbfq.rates" "$tmp/fifo.missed" "$tmp/rbfq.missed"
