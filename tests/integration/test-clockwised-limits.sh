#!/bin/bash
# Description: clockwised's limits on NBD clients.  A client over the
# connection limit is told why (NBD_REP_ERR_POLICY) instead of seeing an
# EOF; a storm of bad clients is logged as a few lines and one count per
# second; an idle connection is closed when the configuration says so.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires nbdinfo
client=$top_builddir/tests/integration/nbd-proto-client

check "pool" cwd_pool 16M a
check "partition disk" cwd_part disk 1M

# Two connections at most; two clients hold them.
cwd_conf 'limits = { connections = 2; connections_per_user = 2; handshake_timeout_s = 2; };'
cwd_start
for i in 1 2; do
	"$client" "$cwd_sock" held-until-stop >"$cw_tmp/held$i.out" &
	eval "held$i=\$!"
	cleanup_add "kill \$held$i 2>/dev/null"
	check "client $i holds a connection" wait_for "client $i" 20 grep -q ready "$cw_tmp/held$i.out"
done
expect_fail "a third is refused" nbdinfo --size "$(cwd_uri disk)"
check "and told it is policy, not a broken server" bash -c \
	"nbdinfo --size '$(cwd_uri disk)' 2>&1 | grep -q policy"
check "the daemon says why" grep -q "refused a client of uid $(id -u): too many connections" \
	"$(cwd_log)"

# A storm of bad clients: a few lines a second, the rest counted.  The
# clients of a burst come at once: one after another, on a busy host or
# under a sanitizer, they came slower than 5 a second, every one was
# logged and nothing was left out to count.  Bursts until a line says
# what was left out (logged by the acceptor, which wakes each second).
start=$SECONDS
burst() {
	local pids=() i
	for i in $(seq 20); do
		"$client" "$cwd_sock" bad-client-flags >/dev/null 2>&1 &
		pids+=($!)
	done
	wait "${pids[@]}"
	grep -q "were left out" "$(cwd_log)"
}
check "the count of what was left out is logged" \
	wait_for "the summary line" "$(cw_budget 10)" burst
lines=$(grep -c -E "nbd: (refused a client|handshake of a client|closed a client)" "$(cwd_log)")
secs=$((SECONDS - start + 2))
check "at most 5 lines a second about clients ($lines in ${secs}s)" test "$lines" -le $((5 * secs))
check "the held clients were served throughout" kill -0 "$held1" "$held2"
check "clean stop" cwd_stop
check "client 1 saw a clean close" wait "$held1"
check "client 2 saw a clean close" wait "$held2"

# An idle connection is closed after idle_timeout_s.
cwd_conf 'limits = { idle_timeout_s = 1; };'
cwd_start
"$client" "$cwd_sock" held-until-stop >"$cw_tmp/idle.out" &
idle=$!
cleanup_add "kill $idle 2>/dev/null"
check "an idle client is closed by the daemon" wait "$idle"
check "the daemon says so" grep -q "idle too long" "$(cwd_log)"
check "others are still served" nbdinfo --size "$(cwd_uri disk)"
check "clean stop" cwd_stop
