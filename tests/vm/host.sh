# Sourced by the tests that run a script in the guest
# (tests/integration/test-vm-*.sh), after tests/integration/lib.sh:
#   vm_test WHAT [GUEST-OPTIONS...] SCRIPT
# runs SCRIPT in tests/vm/guest with the options given, and counts the
# guest's PASS/FAIL (its cw-counts line) as this test's own; exits 77
# when the guest says it cannot run (QEMU, kernel, busybox missing) or
# never booted on this host, twice (WHAT: what was then not tried).
vm_test() {
	local what=$1 out t0=$SECONDS rc counts p f try
	# a directory per guest of the test (WHAT may have spaces, which
	# the guest's kernel command line cannot take)
	vm_runs=$((${vm_runs:-0} + 1))
	out=$cw_tmp/vm$vm_runs
	shift
	mkdir -p "$out"
	# The guest stands for a machine of its own: its one CPU gets a
	# larger share of the host's than the tests beside it (nice -10,
	# where allowed), as a virtual machine that keeps streams is given
	# its CPU.
	# A guest that did not boot gets a second try: under software
	# emulation a kernel with two CPUs now and then dies as it boots
	# (an int3 oops in sched_clock_tick while it patches its own code).
	for try in 1 2; do
		nice -n -10 bash "$top_srcdir/tests/vm/guest" -v --timeout "${CW_VM_TIMEOUT:-300}" \
			--out "$out" "$@" |
			tee "$cw_tmp/guest.log"
		rc=${PIPESTATUS[0]}
		[ "$rc" -ne 0 ] && [ "$rc" -ne 2 ] && [ "$rc" -ne 77 ] && [ ! -s "$out/.boot_s" ] &&
			[ "$try" = 1 ] || break
		echo "the guest did not boot (exit $rc, the lines above): once more"
	done
	if [ "$rc" -eq 77 ]; then
		rm -rf "$cw_tmp"; trap - EXIT; exit 77
	fi
	# A guest that never came up (its second init never said so) says
	# nothing of what it was to test: a host whose QEMU cannot boot the
	# kernel.  But a guest refused its arguments (exit 2) before QEMU
	# ran: the test's own mistake, a failure.
	check "tests/vm/guest took its arguments (exit $rc)" test "$rc" -ne 2
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 2 ] && [ ! -s "$out/.boot_s" ]; then
		echo "SKIP: the guest did not boot on this host (QEMU exit path above); nothing" \
			"of $what was tried"
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
}
