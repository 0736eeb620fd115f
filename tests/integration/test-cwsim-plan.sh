#!/usr/bin/env bash
# Description: `cwctl disk plan` asks a running clockwised for each disk's
# plan, and `cwsim plan --pool` computes it from the same pool file once
# the daemon is gone: for a pool with a calibrated disk, preset ones, a
# disk that emulates the Atlas-II (its plan is the Atlas-II's, not the
# tier's preset, in both), and stored reservations (one with a time span),
# both print the same plans, as JSON and as a table.  While the daemon holds the pool cwsim refuses
# and says why; a bad pool path or a file that is no pool is refused with
# exit 2 and a clear error, and the file is left as it was.
# (hdd0 is calibrated by the stand-in control server, whose
# --calibrate-preset stores a known model: calibrating a sparse file on a
# busy machine measures noise, and the streams below must fit.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq truncate cmp sha256sum

cwsim=$top_builddir/tools/cwsim
d=$cw_tmp
jqe() { jq -e "$@" >/dev/null; }
ctl_start_standin "$d" --calibrate-preset atlas2
check "three disks" ctl_disks "$d"
check "calibrate hdd0 (stores atlas2 as its model)" cwctl disk calibrate hdd0
check "the stand-in stops" ctl_stop

ctl_start "$d" --no-export-all
check "clockwised serves the three disks" ctl_disks "$d"
check "hdd0's model is the calibrated one" sh -c "'$CWCTL' --socket '$CTL_SOCK' --json disk list |
	jq -e '.[] | select(.name == \"hdd0\") | .model.calibrated' >/dev/null"
truncate -s 256M "$d/emu0.img"
check "a disk that emulates the Atlas-II" cwctl disk add "$d/emu0.img" --name emu0 --emulate atlas2
check "part create media" cwctl part create media --size 200M
check "part create onemu on emu0" cwctl part create onemu --size 64M --policy single --disk emu0
check "a stream on emu0 alone" cwctl resv create onemu --rate 1MB/s --block 256K
check "part create solo on hdd1" cwctl part create solo --size 64M --policy single --disk hdd1
check "a stream over media" cwctl resv create media --rate 8Mbit --block 1M
check "a stream with a span" cwctl resv create media --rate 817KB/s --block 256K \
	--range 0:10M --start 1s --duration 1h
check "a heavy stream on hdd1 alone" cwctl resv create solo --rate 4MB/s --block 256K
id=$(cwctl --json resv create media --rate 1MB/s --block 1M | jq .id)
check "a stream released again" cwctl resv release "$id"

check "cwctl disk plan --json" sh -c "'$CWCTL' --socket '$CTL_SOCK' disk plan --json >'$d/daemon.json'"
check "cwctl --json disk plan, the global flag" sh -c \
	"'$CWCTL' --socket '$CTL_SOCK' --json disk plan | jq -S . >'$d/daemon-global.json'"
check "cwctl disk plan (table)" sh -c "'$CWCTL' --socket '$CTL_SOCK' disk plan >'$d/daemon.txt'"
check "one plan per disk" test "$(jq length "$d/daemon.json")" = 4
check "the disks carry the streams" \
	jqe 'map(select(.tasks > 0)) | length == 4' "$d/daemon.json"
check "the guard takes slack: budget < delta-L where streams run" \
	jqe 'map(select(.tasks > 0) | .be_budget_ns < .delta_l_ns) | all' "$d/daemon.json"
check "hdd1's budget is below its delta-L by max(2 ms, a quarter)" jqe \
	'.[] | select(.disk == "hdd1") | .be_budget_ns == .delta_l_ns -
	 ([2000000, ((.delta_l_ns / 4) | floor)] | max)' "$d/daemon.json"
check "the table has a header and four disks" \
	test "$(grep -c '^\(hdd0\|hdd1\|ssd0\|emu0\) ' "$d/daemon.txt")" = 4
check "the table's header" grep -q '^DISK .*DELTA-L .*BE-BUDGET .*SERVER .*STARVED$' "$d/daemon.txt"
check "disk plan hdd1 is hdd1's entry" sh -c "'$CWCTL' --socket '$CTL_SOCK' disk plan hdd1 --json |
	jq -e --slurpfile all '$d/daemon.json' '. == [\$all[0][] | select(.disk == \"hdd1\")]' >/dev/null"
check "no such disk: refused" test "$(ctl_code cwctl disk plan nosuch)" = not-found
rc=0; cwctl disk plan hdd0 hdd1 >/dev/null 2>&1 || rc=$?
check "two names: usage (exit 2)" test "$rc" = 2

rc=0
"$cwsim" plan --pool "$d/pool.db" >/dev/null 2>"$d/busy.err" || rc=$?
check "cwsim refuses the pool a daemon holds (exit 1)" test "$rc" = 1
check "and says a daemon holds it, and to ask cwctl" \
	grep -q 'open in another process.*clockwised.*cwctl disk plan' "$d/busy.err"

check "the daemon stops" ctl_stop
check "cwsim plan --pool --json" sh -c "'$cwsim' plan --pool '$d/pool.db' --json >'$d/sim.json'"
check "cwsim plan --pool (table)" sh -c "'$cwsim' plan --pool '$d/pool.db' >'$d/sim.txt'"
jq -S . "$d/daemon.json" >"$d/a" && jq -S . "$d/sim.json" >"$d/b"
check "the same plans as JSON" cmp "$d/a" "$d/b"
check "the same with cwctl's global --json" cmp "$d/daemon-global.json" "$d/b"
check "the same table" cmp "$d/daemon.txt" "$d/sim.txt"
[ "$cw_failed" -eq 0 ] || diff "$d/a" "$d/b"
# emu0 is not calibrated: both book it as the Atlas-II it emulates (the
# worst case of a best-effort piece is the Atlas-II's), not as the hdd
# preset hdd1 has.
atlas_be_max=$("$cwsim" plan --json --preset quick --set model=atlas2 --set disks=1 | jq '.[0].be_max_ns')
check "emu0's plan is the Atlas-II's" jqe --argjson m "$atlas_be_max" \
	'.[] | select(.disk == "emu0") | .be_max_ns == $m' "$d/sim.json"
check "hdd1's is the preset's, another" jqe --argjson m "$atlas_be_max" \
	'.[] | select(.disk == "hdd1") | .be_max_ns != $m' "$d/sim.json"

# Bad input: a clear error, exit 2, nothing changed.
rc=0
"$cwsim" plan --pool "$d/nothere.db" >"$d/out" 2>"$d/err" || rc=$?
check "a missing pool: exit 2" test "$rc" = 2
check "a missing pool: says which and why" grep -q "nothere.db: No such file" "$d/err"
check "a missing pool: prints nothing on stdout" test ! -s "$d/out"
head -c 8192 /dev/urandom >"$d/junk.db"
sum=$(sha256sum <"$d/junk.db")
rc=0
"$cwsim" plan --pool "$d/junk.db" >/dev/null 2>"$d/err" || rc=$?
check "a file that is no pool: exit 2" test "$rc" = 2
check "a file that is no pool: says so" grep -q "cannot open the pool: .*junk.db" "$d/err"
check "a file that is no pool: left as it was" test "$(sha256sum <"$d/junk.db")" = "$sum"
rc=0
"$cwsim" plan --pool "$d/pool.db" --preset quick >/dev/null 2>"$d/err" || rc=$?
check "--pool with a preset: usage (exit 2)" test "$rc" = 2
