#!/bin/bash
# Description: best effort between exports with real clients: three fio
# clients saturate one disk through three exports; with weights 1:4 set by
# `cwctl export qos` while the daemon runs, the heavier export gets more
# than twice the other's bytes, and an export limited to 2MB/s stays under
# its limit, where under be_order = "fifo" the weights do nothing; and
# `cwctl stats --watch` says so: received against due, the limit held.  Bad QoS
# is refused with a clear message and changes nothing.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires fio jq
fio --enghelp 2>/dev/null | grep -qw nbd || { echo "SKIP: fio lacks the nbd engine"; exit 77; }
cwctl() { "$top_builddir/tools/cwctl" --socket "$cw_tmp/control" "$@"; }

check "pool" cwd_pool 320M a
for p in light heavy capped; do
	check "partition $p" cwd_part "$p" 96M single
done

# Three clients at once for SECS seconds, 256 KiB random reads (the HDD's
# best-effort piece, so a rate limit is exact in bytes), 32 in flight
# each; writes "name bytes" per export to $1.
SECS=8
run3() {
	local p args=()
	for p in light heavy capped; do
		args+=(--name="$p" --uri="$(cwd_uri "$p")")
	done
	env -C "$cw_tmp" fio --ioengine=nbd --rw=randread --bs=256k --iodepth=32 --size=96M \
		--time_based --runtime="$SECS" --output-format=terse --terse-version=3 \
		"${args[@]}" >"$1.terse" || return 1
	# name, bytes read, runtime in ms
	awk -F';' '{ printf "%s %.0f %d\n", $3, $6 * 1024, $9 }' "$1.terse" >"$1"
}
ms_of() { awk -v n="$1" '$1 == n { print $3 }' "$2"; }
qos_weight() { [ "$(cwctl --json export qos "$1" | jq -r .weight)" = "$2" ]; }
set_qos() {
	cwctl export qos light --weight 1 >/dev/null &&
	cwctl export qos heavy --weight 4 >/dev/null &&
	cwctl export qos capped --weight 4 --limit 2MB/s >/dev/null
}
listed() {
	[ "$(cwctl --json export list |
	     jq -c '[.[] | [.name, .qos.weight, (.qos.reserve.bytes_per_s // 0)]]')" = \
	  '[["capped",4,0],["heavy",4,0],["light",1,4000000]]' ]
}
bytes_of() { awk -v n="$1" '$1 == n { print $2 }' "$2"; }

# Few requests in flight on the disk, so that most wait in its order.  The
# disk emulates a 7200 rpm drive (about 140 random 256 KiB reads a second
# here): the disk, not the clients, must be the bottleneck for shares to
# mean anything, and a plain file on a fast host disk served 200-470 MB/s,
# more than a sanitized daemon or a loaded host's clients could ask for.
for order in fifo rbfq; do
	cwd_conf "be_order = \"$order\"; queue_depth = 2;
disks = ( { path = \"$cw_tmp/a.disk\"; name = \"a\"; emulate = \"hdd7200\"; } );"
	check "$order: start" cwd_start
	if [ $order = fifo ]; then
		# data on the disk, so that reads are real reads
		for p in light heavy capped; do
			check "fill $p" env -C "$cw_tmp" fio --name=fill --ioengine=nbd \
				--uri="$(cwd_uri "$p")" --rw=write --bs=1M --size=96M --output=/dev/null
		done
	fi
	check "$order: weights and a limit" set_qos
	# five seconds of the run, as cwctl stats --watch sees them: RBFQ's
	# lag is a few requests, under 10% of light's due only over a few
	# hundred (over two seconds a loaded host's distcheck saw 23%)
	(sleep 1.5; cwctl --json stats --watch 5 --count 1 >"$cw_tmp/$order.watch") &
	watcher=$!
	check "$order: three clients" run3 "$cw_tmp/$order.out"
	check "$order: stats --watch ran" wait $watcher
	cat "$cw_tmp/$order.out"
	jq -c '.exports[]' "$cw_tmp/$order.watch"
	got() { jq -r --arg e "$1" ".exports[] | select(.export == \$e) | .$2" "$cw_tmp/$order.watch"; }
	check "$order: every export was backlogged" \
		test "$(jq '[.exports[] | .backlogged] | all' "$cw_tmp/$order.watch")" = true
	# received against due, for the weighted two
	err=$(jq '[.exports[] | select(.export != "capped") | (.received - .due) / .due |
		   fabs] | max' "$cw_tmp/$order.watch")
	echo "$order: worst |received - due| / due of light and heavy: $err"
	light=$(bytes_of light "$cw_tmp/$order.out")
	heavy=$(bytes_of heavy "$cw_tmp/$order.out")
	capped=$(bytes_of capped "$cw_tmp/$order.out")
	echo "$order: light=$light heavy=$heavy capped=$capped"
	if [ $order = rbfq ]; then
		check "rbfq: weight 4 gets more than twice weight 1" test $((heavy)) -gt $((2 * light))
		# 2 MB/s over its run, and what was in flight when it began
		ms=$(ms_of capped "$cw_tmp/$order.out")
		echo "capped: $((capped * 1000 / ms)) bytes/s over $ms ms"
		check "rbfq: the limit holds" \
			test $((capped)) -le $((2000000 * ms / 1000 * 102 / 100 + 262144 * 33))
		check "rbfq: the others use what the limit leaves" test $((light)) -gt $((capped))
		# (under a sanitizer the daemon's CPU, not the disk, paces the
		# clients over those five seconds: shown, not compared; one
		# ASan run saw 28%, while weight 4 still got 2.8 times weight 1)
		if [ -n "${CW_SANITIZED:-}" ]; then
			echo "(sanitizer build) rbfq: stats: light and heavy within $err of their due"
		else
			check "rbfq: stats: light and heavy within 10% of their due" \
				awk -v e="$err" 'BEGIN { exit !(e < 0.10) }'
		fi
		check "rbfq: stats: the limit held" test "$(got capped limit_held)" = true
		check "rbfq: stats: the limit throttled" \
			awk -v t="$(got capped throttled)" 'BEGIN { exit !(t > 0) }'
		check "rbfq: stats since start: three exports with their counters" test \
			"$(cwctl --json stats | jq '[.exports[] | select(.requests > 0 and
			   .disks[0].served_ns > 0 and (.received | type) == "number")] | length')" = 3
		cwctl stats | tee "$cw_tmp/stats.txt"
		check "rbfq: stats prints the exports' table" grep -q '^EXPORT.*RECEIVED.*DUE' \
			"$cw_tmp/stats.txt"
		fifo_heavy=$(bytes_of heavy "$cw_tmp/fifo.out")
		fifo_light=$(bytes_of light "$cw_tmp/fifo.out")
		echo "fifo heavy/light=$(awk -v h="$fifo_heavy" -v l="$fifo_light" 'BEGIN { printf "%.2f", h / l }')" \
		     "rbfq heavy/light=$(awk -v h="$heavy" -v l="$light" 'BEGIN { printf "%.2f", h / l }')"
	else
		check "fifo: no weights (heavy within 1.6x of light)" \
			test $((heavy * 10)) -lt $((light * 16))
		check "fifo: stats: far from their due" awk -v e="$err" 'BEGIN { exit !(e > 0.25) }'
		check "fifo: stats: the limit not held" test "$(got capped limit_held)" = false
	fi
	check "$order: stop" cwd_stop
done

# Bad input, on a running daemon; nothing changes.
cwd_conf "queue_depth = 4;"
check "start again" cwd_start
check "QoS kept across the restart" qos_weight heavy 4
out=$(cwctl export qos light --weight 0 2>&1); rc=$?
check "weight 0 is a usage error" test $rc -eq 2
check "  and says so" grep -q "expected a whole number from 1 to" <<<"$out"
out=$(cwctl export qos light --reserve 2MB/s --limit 1MB/s 2>&1); rc=$?
check "a limit below the reservation is refused" test $rc -eq 1
check "  and says so" grep -q "limit is below the reservation" <<<"$out"
out=$(cwctl export qos light --reserve 1GB/s 2>&1); rc=$?
check "more than the disk is refused" test $rc -eq 1
check "  and says so" grep -q "more than the whole disk" <<<"$out"
check "a reservation that fits" cwctl export qos light --reserve 4MB/s
# light's 4MB/s takes this share of the disk; ask for what leaves 5% less
# than the rest (and less than the whole disk)
share=$(cwctl --json export qos light | jq '.disks[0].reserve_share')
want=$(awk -v s="$share" 'BEGIN { printf "%.0f", 4000000 * (1.05 - s) / s }')
echo "light's share $share; asking $want bytes/s for heavy"
out=$(cwctl export qos heavy --reserve "$want" 2>&1); rc=$?
check "one that does not fit beside it is refused" test $rc -eq 1
check "  with what fits" grep -q "at most .* fits" <<<"$out"
echo "$out"
fits=$(sed -n 's/.*at most \([^ ]*\) fits.*/\1/p' <<<"$out")
check "  and what fits does (dry run)" cwctl export qos heavy --reserve "$fits" --dry-run
expect_fail "unknown export" cwctl export qos nosuch --weight 2
check "nothing else changed" listed
check "clear" cwctl export qos light --clear
check "stop" cwd_stop

# QoS in clockwised.conf: light's is taken (it has none stored), heavy's
# stored one outranks the file's (and a notice names the line); a
# reservation that does not fit stops the start, naming its line (the
# file has four lines of its own before them).
cwd_conf "exports = { all = true; qos = (
  { name = \"light\"; weight = 3; limit = \"5MB/s\"; },
  { name = \"heavy\"; weight = 9; }
); };"
check "start with QoS in the file" cwd_start
check "light's from the file" qos_weight light 3
check "  with its limit" test "$(cwctl --json export qos light | jq .limit.bytes_per_s)" = 5000000
check "heavy's stored one outranks it" qos_weight heavy 4
check "  and a notice says so" grep -q "export heavy: the best-effort QoS stored in the pool .* \
outranks the one at $cwd_cfg:7" "$(cwd_log)"
check "stop" cwd_stop
cwd_conf "
exports = { all = true; qos = ( { name = \"light\"; reserve = \"1GB/s\"; } ); };"
out=$("$cwd_bin" -f -c "$cwd_cfg" 2>&1); rc=$?
echo "$out" | tail -2
check "a reservation that does not fit stops the start" test $rc -ne 0
check "  naming the line" grep -q "$cwd_cfg:6: best-effort QoS for export light: .*more than the \
whole disk" <<<"$out"
cwd_conf "exports = { all = true; qos = ( { name = \"light\"; weight = 0; } ); };"
out=$("$cwd_bin" -f -c "$cwd_cfg" 2>&1); rc=$?
check "a bad weight in the file is refused" test $rc -ne 0
check "  with its line" grep -q "$cwd_cfg:5: exports.qos\[0\].weight = 0 is out of range" <<<"$out"
