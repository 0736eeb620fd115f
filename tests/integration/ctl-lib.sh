# Sourced by the control-plane tests after lib.sh.
#
#   ctl_start DIR [--read-group G] [--admin-group G] [--no-export-all]
#             [--policy delta-l|edf|lst|dynamic] [--reserve SPEC]... [--emulate MODEL]
#             [--model MODEL] [--conf LINE]...
#                            clockwised over a pool in DIR (new, holding three
#                            sparse file-backed disks hdd0 hdd1 ssd0), NBD
#                            on DIR/nbd.sock, control socket DIR/control;
#                            (--reserve: clockwised -r SPEC; --emulate:
#                            hdd0 and hdd1 keep MODEL's time; --model:
#                            admission uses MODEL for them; --conf: LINE
#                            added to clockwised.conf),
#                            waits for its ready line; sets CTL_SOCK,
#                            CTL_NBD, CTL_PID and CTL_LOG
#   ctl_start_standin DIR [ARGS...]  the same socket served by
#                            tests/unit/daemon/ctl-test-server (the control
#                            server without the data path), for what needs
#                            its knobs (rate limits, injected clock)
#   cwctl ARGS...            the real cwctl on that socket
#   ctl_code CMD...          run CMD, print the error code cwctl reported
#   ctl_fill PART SIZE       write the first SIZE bytes of PART (through a
#                            temporary export): a block never written is a
#                            hole, which is read without a disk access
#   ctl_admits PART RATE BLOCK  whether such a reservation is admitted now
#                            (released again at once)
#   ctl_largest PART BLOCK PCT [OPTS...]  the largest rate admitted now,
#                            within PCT percent
#   ctl_write_disks DIR      write hdd0 and hdd1 out (past their labels):
#                            an emulated or calibrated disk is then
#                            measured, not its holes
#   ctl_max_rate PART BLOCK  the largest rate admitted now for a stream of
#                            BLOCK blocks over PART (a dry run's max_rate)
#   ctl_disks DIR            the three disks: already in clockwised's pool
#                            (checked), added through cwctl for the stand-in
CTL_SERVER=${CTL_SERVER:-$top_builddir/tests/unit/daemon/ctl-test-server}
CTL_DAEMON=$top_builddir/daemon/clockwised
CWCTL=$top_builddir/tools/cwctl
CTL_RAW=$top_builddir/tests/integration/ctl-raw
CTL_STANDIN=0

ctl_start() {
	local dir=$1 rgroup=cw-test-no-group radmin=cw-test-no-group all=true policy=delta-l
	local resv=() disks="" emulate="" model="" conf="" essd="" ublk=""
	shift
	while [ $# -gt 0 ]; do
		case $1 in
		--read-group) rgroup=$2; shift ;;
		--admin-group) radmin=$2; shift ;;
		--no-export-all) all=false ;;
		--ublk) ublk=" ublk = [ $2 ];"; shift ;;	# exports.ublk: '"a", "b"' 
		--policy) policy=$2; shift ;;
		--reserve) resv+=(-r "$2"); shift ;;
		--emulate) emulate="emulate = \"$2\";"; shift ;;
		--emulate-ssd) essd=",
  { path = \"$dir/ssd0.img\"; name = \"ssd0\"; emulate = \"$2\"; }"; shift ;;
		--model) model="model = \"$2\";"; shift ;;
		--conf) conf="$conf$2
"; shift ;;
		*) echo "ctl_start: unknown option $1" >&2; return 1 ;;
		esac
		shift
	done
	[ -z "$emulate$model" ] || disks="disks = (
  { path = \"$dir/hdd0.img\"; name = \"hdd0\"; $emulate $model },
  { path = \"$dir/hdd1.img\"; name = \"hdd1\"; $emulate $model }$essd );"
	CTL_STANDIN=0
	CTL_SOCK=$dir/control
	CTL_NBD=$dir/nbd.sock
	CTL_LOG=$dir/clockwised.log
	if ! test -e "$dir/pool.db"; then	# else: a restart on the same pool
		"$top_builddir/tools/cwpool" create "$dir/pool.db" || return 1
		truncate -s 256M "$dir/hdd0.img" "$dir/hdd1.img" &&
			truncate -s 128M "$dir/ssd0.img" || return 1
		"$top_builddir/tools/cwpool" add-disk "$dir/pool.db" "$dir/hdd0.img" hdd hdd0 >/dev/null &&
			"$top_builddir/tools/cwpool" add-disk "$dir/pool.db" "$dir/hdd1.img" hdd hdd1 >/dev/null &&
			"$top_builddir/tools/cwpool" add-disk "$dir/pool.db" "$dir/ssd0.img" ssd ssd0 >/dev/null ||
			return 1
	fi
	cat >"$dir/clockwised.conf" <<EOC
pool = "$dir/pool.db";
listen = { unix = [ "$CTL_NBD" ]; };
control_socket = "$CTL_SOCK";
control_read_group = "$rgroup";
control_admin_group = "$radmin";
exports = { all = $all;$ublk };
policy = "$policy";
log_level = "info";
$conf$disks
EOC
	# Emptied here, not by the background job's redirection: on a restart
	# the old log's ready line (and the killed daemon's sockets) would
	# otherwise pass for the new daemon's until that job runs.
	# A restart keeps the last run's log (its misses) as clockwised.log.N.
	if [ -s "$CTL_LOG" ]; then
		local n=1
		while [ -e "$CTL_LOG.$n" ]; do n=$((n + 1)); done
		mv "$CTL_LOG" "$CTL_LOG.$n"
	fi
	: >"$CTL_LOG"
	# Each daemon directory's logs are kept (a test may run several).
	case " ${CTL_LOGS_KEPT:-} " in
	*" $dir "*) ;;
	*) cw_keep_logs "$CTL_LOG.[0-9]* $CTL_LOG"; CTL_LOGS_KEPT="${CTL_LOGS_KEPT:-} $dir" ;;
	esac
	# No test's real-time spinner beside its streams; a test that counts
	# its stream's misses (CTL_RT_LOCK=-x) runs beside no other daemon
	# of the suite, whose real-time threads admission here cannot book.
	cw_rt_lock "${CTL_RT_LOCK:--s}"
	"$CTL_DAEMON" -f -c "$dir/clockwised.conf" "${resv[@]}" 2>>"$CTL_LOG" {cw_rt_fd}>&- &
	CTL_PID=$!
	cleanup_add "kill $CTL_PID 2>/dev/null; wait $CTL_PID 2>/dev/null"
	wait_for "clockwised to be ready" "$(cw_budget 30)" ctl_ready || { cat "$CTL_LOG" >&2; return 1; }
}

ctl_ready() {
	kill -0 "$CTL_PID" 2>/dev/null || { echo "clockwised exited" >&2; cat "$CTL_LOG" >&2; exit 1; }
	grep -q 'ready: ' "$CTL_LOG" && test -S "$CTL_SOCK"
}

ctl_start_standin() {
	local dir=$1; shift
	CTL_STANDIN=1
	CTL_SOCK=$dir/control
	"$CTL_SERVER" --pool "$dir/pool.db" --socket "$CTL_SOCK" "$@" &
	CTL_PID=$!
	cleanup_add "kill $CTL_PID 2>/dev/null; wait $CTL_PID 2>/dev/null"
	wait_for "the control socket" 20 test -S "$CTL_SOCK"
}

# Stops the server and checks it ended cleanly (exit 0, socket removed).
ctl_stop() {
	kill "$CTL_PID" && wait "$CTL_PID" && ! test -e "$CTL_SOCK"
}

cwctl() { "$CWCTL" --socket "$CTL_SOCK" "$@"; }

ctl_fill() {
	cwctl export add "$1" --name "fill-$1" >/dev/null &&
	qemu-io -f raw -c "write -P 0x5a 0 $2" "nbd+unix:///fill-$1?socket=$CTL_NBD" >/dev/null &&
	cwctl export remove "fill-$1" >/dev/null
}

# ctl_admits PART RATE BLOCK [RESV-OPTIONS...]: whether a reservation of
# RATE bytes/s in BLOCK blocks on PART (with resv create's options, e.g.
# --survive 1) is admitted now (it is released again at once).
ctl_admits() {
	local id
	id=$(cwctl --json resv create "$1" --rate "$2" --block "$3" "${@:4}" 2>/dev/null |
		jq -e .id) && [ -n "$id" ] || return 1
	cwctl resv release "$id" >/dev/null
}

# ctl_largest PART BLOCK PCT [RESV-OPTIONS...]: the largest rate (B/s,
# within PCT percent) of a reservation of BLOCK blocks on PART that
# admission takes now (with resv create's options), found by asking it
# (ctl_admits: doubling from 100000 B/s, then halving the gap); 0 when
# not even 100000 B/s is admitted.
ctl_largest() {
	local part=$1 block=$2 pct=$3 lo=100000 hi mid
	shift 3
	ctl_admits "$part" "$lo" "$block" "$@" || { echo 0; return; }
	hi=$((lo * 2))
	while ctl_admits "$part" "$hi" "$block" "$@"; do
		lo=$hi; hi=$((hi * 2))
		[ "$hi" -lt 100000000000 ] || { echo "$lo"; return; }
	done
	while [ $((hi - lo)) -gt $((lo * pct / 100)) ]; do
		mid=$(((lo + hi) / 2))
		if ctl_admits "$part" "$mid" "$block" "$@"; then lo=$mid; else hi=$mid; fi
	done
	echo "$lo"
}

ctl_write_disks() {
	local i
	for i in hdd0 hdd1; do
		dd if=/dev/zero of="$1/$i.img" bs=1M seek=1 count=255 conv=notrunc oflag=direct \
			status=none || return 1
	done
}

# ctl_cached_media DIR SSD_MODEL PART_CREATE_ARGS...: a daemon on DIR's
# pool (the HDDs emulating hdd7200 and written out, the SSD emulating
# SSD_MODEL) with partition media of 16 MiB (PART_CREATE_ARGS), recorded,
# and an SSD cache as large.
ctl_cached_media() {
	local dir=$1 ssd=$2
	shift 2
	ctl_start "$dir" --no-export-all --emulate hdd7200 --emulate-ssd "$ssd" || return 1
	check "write hdd0 and hdd1 out (no holes)" ctl_write_disks "$dir"
	check "part create media $*" cwctl part create media --size 16M "$@"
	check "record media" ctl_fill media 16M
	check "give it an SSD cache as large" cwctl part cache media --size 16M
}

ctl_max_rate() {
	cwctl --json resv create "$1" --rate 1000 --block "$2" --dry-run | jq -e .max_rate
}

# The code in parentheses at the end of cwctl's error line.
ctl_code() {
	"$@" 2>&1 >/dev/null | sed -n 's/.*(\([a-z-]*\))$/\1/p' | tail -n1
}

ctl_disks() {
	local dir=$1
	if [ "$CTL_STANDIN" = 0 ]; then
		test "$(cwctl disk list | grep -c '^\(hdd0\|hdd1\|ssd0\) ')" -eq 3
		return
	fi
	truncate -s 256M "$dir/hdd0.img" "$dir/hdd1.img" && truncate -s 128M "$dir/ssd0.img" &&
		cwctl disk add "$dir/hdd0.img" --name hdd0 >/dev/null &&
		cwctl disk add "$dir/hdd1.img" --name hdd1 >/dev/null &&
		cwctl disk add "$dir/ssd0.img" --name ssd0 --tier ssd >/dev/null
}

# A verified write load on 1 MiB regions of an export (URI): pattern P of
# region R is "flying" in DIR/flying.R while qemu-io writes it and
# "acked" in DIR/acked.R once it said the write was done.
# ctl_writer DIR URI NREGIONS: overwrites random regions until DIR/stop.
ctl_writer() {
	local dir=$1 uri=$2 n=$3 i=0 r p
	while ! test -e "$dir/stop"; do
		r=$((RANDOM % n)); p=$(((i % 250) + 2)); i=$((i + 1))
		echo $p >"$dir/flying.$r"
		qemu-io -f raw -c "write -P $p $((r * 1048576)) 1M" "$uri" >/dev/null 2>&1 || continue
		echo $p >"$dir/acked.$r"
	done
}

# ctl_verify DIR URI NREGIONS: each region holds its acknowledged
# pattern, or the one in flight when a kill came (which then counts as
# acknowledged).
ctl_verify() {
	local dir=$1 uri=$2 n=$3 r a f bad=0
	for r in $(seq 0 $((n - 1))); do
		a=$(cat "$dir/acked.$r"); f=$(cat "$dir/flying.$r")
		if ctl_reads "$uri" "$a" "$r"; then
			:
		elif [ "$a" != "$f" ] && ctl_reads "$uri" "$f" "$r"; then
			echo "$f" >"$dir/acked.$r"
		else
			echo "region $r: neither pattern $a (acknowledged) nor $f" >&2; bad=1
		fi
		cat "$dir/acked.$r" >"$dir/flying.$r"
	done
	return $bad
}

ctl_reads() { qemu-io -f raw -c "read -P $2 $(($3 * 1048576)) 1M" "$1" 2>&1 | grep -q '^read'; }

# ctl_no_miss DESC MISSED [BOUND]: checks that the daemon missed no more
# than BOUND (0) deadlines, MISSED from its stats, with one exception: a
# miss whose every line in the daemon's logs names real-time threads of
# other processes (but the player's own) that held the CPU its stream's
# threads waited for (daemon/path/rt-neighbours.h), or a stall of the host
# (the kernel or the hypervisor held every thread off a CPU: the daemon's
# stall probes), is caused outside what admission books (a second daemon,
# a `chrt -f` loop on the host, a kernel without preemption): then the
# check passes and says so, naming them.  Any other miss, or one not logged line by
# line, fails the check (and the logs are shown, see cw_keep_logs).
ctl_no_miss() {
	local desc=$1 missed=$2 bound=${3:-0} lines
	if [ "$missed" -le "$bound" ]; then
		check "$desc" true
		return
	fi
	# the control thread logs the misses it drains a tick later
	wait_for "$missed miss lines" "$(cw_budget 5)" ctl_miss_lines_at_least "$missed"
	lines=$(ctl_miss_lines)
	if [ -n "$lines" ] && ctl_lines_hosts "$lines"; then
		echo "$missed missed, each while the host held a CPU (a stall the daemon's probes" \
			"saw, or real-time threads of other processes):"
		echo "$lines"
		check "$desc (the misses are the host's, not the daemon's)" true
	else
		echo "$missed missed; the daemon's miss lines:"
		echo "$lines"
		check "$desc" test "$missed" -le "$bound"
	fi
}
# ctl_misses_hosts SUMMARY MISSED LOG_AT: whether the misses of a stream
# that the player (cwstream's --json summary) and the daemon (MISSED, its
# count over the play) both watched are all the host's, on the daemon's
# log from line LOG_AT on: there was at least one; every daemon miss line
# is of class cpu or delivery naming a stall of the host, or of class
# emulator; and a miss the player saw and the daemon did not (the
# player's own wake-up, or its reply's way back through the kernel) came
# with a stall the daemon's probes logged at least as long as the player
# was late.  Prints what it judged by.  Anything else (or no miss at all)
# returns 1: the caller's checks then fail on the misses.
ctl_misses_hosts() {
	local summary=$1 missed=$2 log_at=$3 played lines stall_lines worst_stall late host=1
	played=$(jq .misses <<<"$summary")
	[ "$played" -ne 0 ] || [ "$missed" -ne 0 ] || return 1
	# the control thread logs the misses it drains a tick later
	[ "$missed" -eq 0 ] ||
		wait_for "$missed miss lines" "$(cw_budget 5)" ctl_miss_lines_at_least "$missed" >/dev/null
	lines=$(tail -n "+$((log_at + 1))" "$CTL_LOG" | grep -E 'missed a deadline|misses not logged')
	stall_lines=$(tail -n "+$((log_at + 1))" "$CTL_LOG" | grep -E 'host: CPU [0-9]+ ran no thread')
	worst_stall=$(sed -nE 's/.* for ([0-9]+) us .*/\1/p' <<<"$stall_lines" | sort -n | tail -n1)
	late=$(($(jq .worst_late_ns <<<"$summary") / 1000))
	echo "cwstream missed $played (worst ${late} us late), the daemon $missed"
	[ -z "$lines" ] || { echo "the daemon's miss lines:"; echo "$lines"; }
	[ -z "$stall_lines" ] || { echo "the host's stalls meanwhile:"; echo "$stall_lines" | tail -n 10; }
	if [ "$missed" -ne 0 ] && { [ -z "$lines" ] ||
		grep -Ev 'missed a deadline by [0-9]+ us \((cpu|delivery)\):.*the host held every thread' \
			<<<"$lines" | grep -Ev 'missed a deadline by [0-9]+ us \(emulator\):' | grep -q .; }; then
		host=
	fi
	if [ "$played" -ne 0 ] && [ "$missed" -eq 0 ] &&
		{ [ -z "$worst_stall" ] || [ "$worst_stall" -lt "$late" ]; }; then
		host=
	fi
	[ -n "$host" ] && echo "each came with the host's stalls (longest ${worst_stall:-?} us)"
	[ -n "$host" ]
}
# ctl_lines_hosts LINES: whether every miss line names a cause outside
# the daemon: a stall of the host that held every thread off a CPU (the
# daemon's stall probes saw it; a miss of class cpu or delivery), an
# emulated disk's backing store that fell behind the emulated time (class
# emulator: the host's disk or CPU), or a real-time thread of another
# process than the stream's own player (another daemon's stall probes,
# which sleep but for microseconds, do not count).
ctl_lines_hosts() {
	local l others
	while IFS= read -r l; do
		if grep -Eq '\((cpu|delivery)\):.*the host held every thread|\(emulator\):' <<<"$l"; then
			continue
		fi
		others=$(sed -nE 's/.*real-time threads of other processes on this host: ([^;]*).*/\1/p' \
			<<<"$l" | tr ',' '\n' | grep -v 'cwstream\[' | grep -v 'cw-probe/' | grep -c .)
		[ "$others" -gt 0 ] || return 1
	done <<<"$1"
	return 0
}
ctl_miss_lines() {
	cat "$CTL_LOG".[0-9]* "$CTL_LOG" 2>/dev/null | grep -E 'missed a deadline|misses not logged'
}
ctl_miss_lines_at_least() {
	ctl_miss_lines | grep -q 'misses not logged' ||
		[ "$(ctl_miss_lines | wc -l)" -ge "$1" ]
}
