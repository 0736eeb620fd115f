# Sourced by every tests/integration/test-*.sh.
#
#   requires CMD...     skip (exit 77) unless every CMD is on PATH
#   check DESC CMD...   run CMD; count a pass or a failure, say which
#   expect_fail DESC CMD...  the same, but CMD must fail
#   cleanup_add CMD     run CMD (eval'd) at exit, last added first
#   wait_for DESC SECS CMD...  poll CMD until it succeeds (no fixed sleeps)
#   cw_keep_logs FILE...  at exit, if anything failed: print the daemon's
#                       miss lines of each FILE (a glob is expanded then),
#                       then each FILE, and keep them beside the test's log
#   cw_rt_lock -s|-x    share (-s) or take alone (-x) the host's CPUs at
#                       real-time priority with the other tests of this build
#                       (-u: let go)
#   cw_budget SECS      SECS, or five times that in a sanitizer build: the
#                       time to wait for what a slower build does later
#
# At exit it prints "cw-counts: passed=N failed=M" for scripts/check and
# exits 1 if anything failed.
set -u
: "${top_builddir:=$(pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
cw_passed=0
cw_failed=0
cw_cleanups=()
cw_tmp=$(mktemp -d "${TMPDIR:-/tmp}/cwtest.XXXXXX")

requires() {
	local c
	for c in "$@"; do
		if ! command -v "$c" >/dev/null 2>&1; then
			echo "SKIP: $c is not installed"
			rm -rf "$cw_tmp"
			trap - EXIT
			exit 77
		fi
	done
}

cleanup_add() { cw_cleanups=("$1" "${cw_cleanups[@]}"); }

check() {
	local desc=$1; shift
	if "$@"; then
		echo "PASS: $desc"; cw_passed=$((cw_passed + 1))
	else
		echo "FAIL: $desc (exit $?: $*)"; cw_failed=$((cw_failed + 1))
	fi
}

expect_fail() {
	local desc=$1; shift
	if "$@"; then
		echo "FAIL: $desc (unexpectedly succeeded: $*)"; cw_failed=$((cw_failed + 1))
	else
		echo "PASS: $desc"; cw_passed=$((cw_passed + 1))
	fi
}

wait_for() {
	local desc=$1 secs=$2; shift 2
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		if [ $SECONDS -ge $deadline ]; then
			echo "timed out after ${secs}s waiting for $desc"
			return 1
		fi
		sleep 0.05
	done
}

# The daemon's logs, shown and kept when the test fails: its miss lines
# (class and timeline, see daemon/path/lane-miss.c) first, so that a failed
# "no deadline missed" says which request missed and why; the logs are
# copied to TEST.daemon.log beside the test's own log (cw_tmp goes).
cw_keep_logs() { cleanup_add "cw_show_logs $*"; }
cw_show_logs() {
	local f n keep
	[ "$cw_failed" -eq 0 ] && return 0
	keep=$top_builddir/tests/integration/$(basename "$0" .sh).daemon.log
	# emptied by the first call at exit; a test with several daemons'
	# directories calls it once for each
	if [ -z "${cw_logs_shown:-}" ]; then
		: >"$keep" 2>/dev/null || keep=/dev/null
		cw_logs_shown=1
	fi
	[ -w "$keep" ] || keep=/dev/null
	for f in "$@"; do
		[ -f "$f" ] || continue
		n=${f%/*}; n=${n##*/}/${f##*/}	# its directory too: a test may run several
		echo "---- the daemon's misses in $n:" >&2
		grep -E 'missed a deadline|misses not logged' "$f" >&2 || echo "(none logged)" >&2
		echo "---- $n:" >&2
		cat "$f" >&2
		{ echo "---- $n"; cat "$f"; } >>"$keep"
	done
	[ "$keep" = /dev/null ] || echo "---- the daemon's logs are kept in $keep" >&2
}

# A test that spins at real-time priority to make a stream miss (the
# CPU cause of test-clockwised-misses) does the same to the stream of any
# test that make check -j runs beside it: the streams' tests take this
# lock shared for their whole run (ctl_start), the spinner alone (-x)
# while it spins.  Held until the test's shell exits.
cw_rt_lock() {
	[ -n "${cw_rt_fd:-}" ] || exec {cw_rt_fd}>>"$top_builddir/tests/integration/rt-hog.lock"
	flock -w 600 "$1" "$cw_rt_fd" || echo "(went on without the real-time lock after 600 s)"
}

# A sanitizer build runs the daemon several times slower (and a busy
# host slower still): a wait for something it does, not for a deadline it
# keeps, gets more time there.  CW_SANITIZED is set by Makefile.am;
# CW_BUDGET_SCALE (tests/vm/lib.sh: the QEMU guest) multiplies it again.
cw_budget() {
	local k=${CW_BUDGET_SCALE:-1}
	if [ -n "${CW_SANITIZED:-}" ]; then echo $(($1 * 5 * k)); else echo $(($1 * k)); fi
}

# sim_pool DB MODEL N: a pool at DB of N sparse disks d0.img... beside it,
# each as large as MODEL (a cwsim preset) and emulating it.
sim_pool() {
	local db=$1 model=$2 n=$3 cap i
	cap=$("$top_builddir/tools/cwsim" model "$model" | sed -n 's/.* cap=\([0-9]*\) .*/\1/p')
	"$top_builddir/tools/cwpool" create "$db" >/dev/null || return 1
	for ((i = 0; i < n; i++)); do
		truncate -s "$((cap / 4096 * 4096))" "$(dirname "$db")/d$i.img" || return 1
		"$top_builddir/tools/cwpool" add-disk "$db" "$(dirname "$db")/d$i.img" hdd "d$i" \
			"$model" >/dev/null || return 1
	done
}

cw_finish() {
	local c
	for c in "${cw_cleanups[@]}"; do eval "$c" || true; done
	# (released for every process that inherited it, too)
	[ -z "${cw_rt_fd:-}" ] || flock -u "$cw_rt_fd"
	rm -rf "$cw_tmp"
	echo "cw-counts: passed=$cw_passed failed=$cw_failed"
	[ "$cw_failed" -eq 0 ] || exit 1
}
trap cw_finish EXIT
