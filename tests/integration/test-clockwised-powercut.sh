#!/bin/bash
# Description: power cuts under a whole pool.  Two disks under the fault
# engine; a deleted partition first fills them with its own pattern, so
# the new partition's blocks start with foreign bytes.  A client writes
# verifiable records (every fifth with FUA, a FLUSH after every eight
# others) until the power fails at the Nth write of a disk (the engine
# undoes, or tears, every write no completed flush covers, and kills the
# daemon), several times, two of them while a move runs; once the daemon
# is killed with -9 in the middle of the writes instead, and the power
# fails in the next round (the killed daemon's writes in flight land
# after it is gone; the next one waits for them).  After each restart
# every write a FLUSH or FUA acknowledged reads back, and no byte of the
# partition is one it never wrote.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires qemu-io jq

ctl() { "$top_builddir/tools/cwctl" --socket "$cw_tmp/control" "$@"; }
client=$top_builddir/tests/integration/nbd-durable
log=$cw_tmp/records.log
# the partition's 16M in 1M records: a first write fills a block
# (CW_POWERCUT_SLOTS=256 CW_POWERCUT_SLOT=64k: first writes fill part)
SLOTS=${CW_POWERCUT_SLOTS:-16} SLOT=${CW_POWERCUT_SLOT:-1M}
check "pool" cwd_pool 26M hdd0 hdd1
check "the old partition fills both disks" cwd_part old 48M rotation
# Each disk's spec: "hdd0 spec|hdd1 spec".
conf_with() {
	cwd_conf "mover_depth = 1;
disks = ( { name = \"hdd0\"; path = \"$cw_tmp/hdd0.disk\"; fault = \"${1%|*}\"; },
	{ name = \"hdd1\"; path = \"$cw_tmp/hdd1.disk\"; fault = \"${1#*|}\"; } );"
}
conf_with "|"
cwd_start
check "the old partition's pattern" qemu-io -f raw -c 'write -P 0xee 0 48M' -c flush "$(cwd_uri old)"
check "unexported" ctl export remove old
check "deleted" ctl part delete old --force
check "the new partition on its blocks" ctl part create vol --size 16M
check "stop" cwd_stop

uri=$(cwd_uri vol)
rounds=0 cuts=0 kills=0 moves=0 checked=0 lost=0 foreign=0 verified=0
verify() {
	local out
	out=$("$client" "$uri" verify "$log" $SLOTS $SLOT)
	echo "after round $rounds, cut $cuts: $out"
	case $out in *checked=*) verified=$((verified + 1)) ;; *) return ;; esac
	checked=$(echo "$out" | sed -n 's/.*checked=\([0-9]*\).*/\1/p')
	lost=$((lost + $(echo "$out" | sed -n 's/.*lost=\([0-9]*\).*/\1/p')))
	foreign=$((foreign + $(echo "$out" | sed -n 's/.*foreign=\([0-9]*\).*/\1/p')))
}
# Each round's writes have generations of their own (the verify takes
# the highest acknowledged one of a slot as the newest), whether or not
# the round ended in a cut.
gen() { echo $((rounds * 1000000)); }
# round SPEC [MOVE]: check what the last cut left and let a move it
# interrupted end, without faults; then start with SPEC, start MOVE,
# write until the power fails.  (A move resumed under SPEC would count
# its copies towards the cut, which then came during the check on a host
# slow enough: seen, "cut-write=50" reached by a resumed move's copies
# before the check had read its 16 records.)
round() {
	conf_with "|"
	cwd_start
	verify
	ctl move list --watch --interval 0.2 >/dev/null
	cwd_stop
	conf_with "$1"
	cwd_start
	if [ -n "${2:-}" ]; then
		ctl part move vol $2 >/dev/null && moves=$((moves + 1))
	fi
	rounds=$((rounds + 1))
	"$client" "$uri" write "$log" "$(gen)" $SLOTS $SLOT 8 3000
	cwd_wait_cut "$1" && cuts=$((cuts + 1))
}
# kill_round: no faults; kill -9 once 20 writes were issued, while the
# client still writes.
kill_round() {
	conf_with "|"
	cwd_start
	verify
	rounds=$((rounds + 1))
	"$client" "$uri" write "$log" "$(gen)" $SLOTS $SLOT 8 3000 &
	local writer=$!
	wait_for "20 writes" 20 grep -q "^i [0-9]* $(($(gen) + 20))\$" "$log"
	kill -9 "$cwd_pid"
	wait "$cwd_pid" 2>/dev/null
	cwd_pid=
	wait "$writer"
	kills=$((kills + 1))
}
touch "$log"
# The cut comes at the Nth write of one disk: during a move, of the disk
# the move copies to.
round "cut-write=40|"
round "|cut-write=75,cut=tear,seed=1"
round "|cut-write=30" "--disks hdd1 --policy single"
kill_round
round "|cut-write=60,cut=tear,seed=2"
round "cut-write=20|" "--disks hdd0 --policy single"
round "cut-write=50,cut=tear,seed=3|"
conf_with "|"
cwd_start
verify
ctl move list
check "clean stop" cwd_stop
echo "rounds=$rounds cuts=$cuts kills=$kills moves-started=$moves acknowledged-writes-checked=$checked lost=$lost foreign=$foreign"
check "every restart verified" test "$verified" -eq $((rounds + 1))
check "6 power cuts" test "$cuts" -eq 6
check "one kill -9" test "$kills" -eq 1
check "two of them while a move ran" test "$moves" -eq 2
check "acknowledged writes were checked" test "$checked" -gt 40
check "none lost" test "$lost" -eq 0
check "no foreign bytes" test "$foreign" -eq 0
