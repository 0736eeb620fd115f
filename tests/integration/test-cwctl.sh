#!/usr/bin/env bash
# Description: every cwctl command against clockwised on a real pool
# (sqlite file, file-backed disks): the happy paths, the refusals
# (over-admission, unknown names, bad arguments, things in use) with their
# stable codes, and that a refusal changes nothing.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq truncate python3

d=$cw_tmp
ctl_start "$d"
check "three disks in the pool" ctl_disks "$d"

# --- help and usage
check "cwctl --help" bash -c '"$0" --help | grep -q "^Usage: cwctl"' "$CWCTL"
check "cwctl disk --help" bash -c '"$0" disk --help | grep -q "disk calibrate"' "$CWCTL"
check "cwctl resv create --help" bash -c '"$0" resv create --help | grep -q -- "--rate"' "$CWCTL"
check "every command has --help" bash -c 'for c in status "disk add" "disk list" "disk remove" \
	"disk calibrate" "part create" "part list" "part show" "part resize" "part delete" \
	"resv create" "resv list" "resv show" "resv release" "export list" "export add" \
	"export remove" stats; do "$0" $c --help | grep -q "^Usage: cwctl" || exit 1; done' "$CWCTL"
"$CWCTL" --socket "$CTL_SOCK" frobnicate 2>/dev/null; rc=$?
check "unknown command exits 2" test "$rc" -eq 2
"$CWCTL" --socket "$d/nothing-here" status 2>/dev/null; rc=$?
check "no server exits 3" test "$rc" -eq 3

# --- disks
check "disk list shows three" test "$(cwctl --json disk list | jq length)" -eq 3
check "ssd0 is on the ssd tier" test "$(cwctl --json disk list | jq -r '.[2].tier')" = ssd
check "a path already in the pool: exists" test "$(ctl_code cwctl disk add "$d/hdd0.img")" = exists
truncate -s 64M "$d/x.img"
check "a bad tier: bad-request" test "$(ctl_code cwctl disk add "$d/x.img" --tier tape)" = bad-request
check "a bad disk name: bad-request" test "$(ctl_code cwctl disk add "$d/x.img" --name -x)" = bad-request
expect_fail "a missing file is refused" cwctl disk add "$d/missing.img"
check "refused adds changed nothing" test "$(cwctl --json disk list | jq length)" -eq 3
check "disk add on the running daemon" cwctl disk add "$d/x.img" --name extra
check "four disks" test "$(cwctl --json disk list | jq length)" -eq 4
check "disk remove of an empty disk" cwctl disk remove extra
check "unknown disk: not-found" test "$(ctl_code cwctl disk remove nope)" = not-found

# --- partitions
check "part create media" cwctl part create media --size 200M
check "part create be on the ssd, single" cwctl part create be --size 64M --tier ssd --tier-fallback --policy single
check "part create with zone" cwctl part create outer --size 10M --zone outer --policy single --disk hdd1
check "same name: exists" test "$(ctl_code cwctl part create media --size 1M)" = exists
check "too big: no-space" test "$(ctl_code cwctl part create huge --size 10T)" = no-space
# An absurd size is refused from the free space, before a block map for
# it is allocated: at once, and the control socket answers the next.
check "absurd: no-space" test "$(ctl_code cwctl part create absurd --size 2048T)" = no-space
check "absurd: the message has the numbers" bash -c \
	'"$0" --socket "$1" part create absurd --size 2048T 2>&1 | grep -q "needs 2251799813685248 bytes"' \
	"$CWCTL" "$CTL_SOCK"
check "bad policy: bad-request" test "$(ctl_code cwctl part create p --size 1M --policy best)" = bad-request
check "bad name: bad-request" test "$(ctl_code cwctl part create 'a/b' --size 1M)" = bad-request
cwctl part create p --size 12X 2>/dev/null; rc=$?
check "unparsable size exits 2" test "$rc" -eq 2
check "three partitions" test "$(cwctl --json part list | jq length)" -eq 3
check "refusals left no partition behind" test "$(cwctl --json part list | jq '[.[].name] | sort | join(",")' -r)" = "be,media,outer"
check "part show: blocks per disk add up" test \
	"$(cwctl --json part show media | jq '[.per_disk[].blocks] | add')" -eq 200
check "part show: striped over three disks" test "$(cwctl --json part show media | jq '.per_disk | length')" -eq 3
check "part show human" bash -c '"$0" --socket "$1" part show media | grep -q "^hdd0 *67"' "$CWCTL" "$CTL_SOCK"
check "part resize media to 240M" test "$(cwctl --json part resize media --size 240M | jq .size)" -eq $((240 << 20))
check "resize unknown: not-found" test "$(ctl_code cwctl part resize nope --size 1M)" = not-found

# --- reservations
id=$(cwctl --json resv create media --rate 8Mbit --block 1M | jq .id)
check "8Mbit admitted as reservation 1" test "$id" = 1
check "the rate is 1000000 B/s" test "$(cwctl --json resv show 1 | jq .rate)" -eq 1000000
check "one task per disk" test "$(cwctl --json resv show 1 | jq '.per_disk | length')" -eq 3
check "range, start and duration" cwctl resv create media --rate 817KB/s --block 64K \
	--range 0:10M --start 1s --duration 1h
check "the range is kept" test "$(cwctl --json resv show 2 | jq .range_end)" -eq $((10 << 20))
# The range in either form, the same as clockwised -r takes after range=.
id=$(cwctl --json resv create media --rate 64KB/s --block 64K --range 1M+9M | jq .id)
check "--range START+LENGTH is START:START+LENGTH" test \
	"$(cwctl --json resv show "$id" | jq -r '"\(.range_start):\(.range_end)"')" = \
	"$((1 << 20)):$((10 << 20))"
check "release it" cwctl resv release "$id"
out=$(cwctl resv create media --rate 1MB/s --block 1M --range 2M:1M 2>&1); rc=$?
check "an empty --range exits 2 and says so" bash -c \
	'[ "$1" -eq 2 ] && grep -q "an empty range; expected a byte range START:END" <<<"$0"' "$out" "$rc"
# One meaning per suffix: 8M is 8 MiB/s as with clockwised -r, 8MB/s is 10^6.
for spec in 8M:$((8 << 20)) 8MiB/s:$((8 << 20)) 8MB/s:8000000; do
	id=$(cwctl --json resv create media --rate "${spec%%:*}" --block 1M | jq .id)
	check "--rate ${spec%%:*} is ${spec#*:} B/s" test "$(cwctl --json resv show "$id" | jq .rate)" -eq "${spec#*:}"
	check "release it" cwctl resv release "$id"
done
out=$(cwctl --json resv create media --rate 2GB/s --block 1M 2>&1 >/dev/null)
check "over-admission refused" test "$(echo "$out" | jq -r .code)" = refused
check "the refusal names a disk" bash -c 'echo "$0" | jq -e ".details.disk | test(\"^(hdd0|hdd1|ssd0)$\")"' "$out"
check "the refusal names the condition" test "$(echo "$out" | jq -r .details.condition)" = utilization
# Fill the disks until admission says no: Jeffay's test must refuse
# before the booked utilization passes 1.
n=0
while cwctl resv create media --rate 20MB/s --block 1M >/dev/null 2>&1; do
	n=$((n + 1)); [ $n -lt 50 ] || break
done
check "admission stops short of 50 streams" test $n -lt 50
check "booked utilization stays at or under 1" bash -c \
	'"$0" --socket "$1" --json status | jq -e "[.disks[].utilization] | max <= 1"' "$CWCTL" "$CTL_SOCK"
count=$(cwctl --json resv list | jq length)
check "a refusal books nothing" test "$count" -eq $((n + 2))
check "unknown partition: not-found" test "$(ctl_code cwctl resv create nope --rate 1MB/s --block 1M)" = not-found
check "range past the end: bad-request" test "$(ctl_code cwctl resv create media --rate 1MB/s --block 1M --range 0:1T)" = bad-request
cwctl resv create media --rate fast --block 1M 2>/dev/null; rc=$?
check "unparsable rate exits 2" test "$rc" -eq 2
check "unknown reservation: not-found" test "$(ctl_code cwctl resv show 999)" = not-found
check "shrinking under a reservation: busy" test "$(ctl_code cwctl part resize media --size 5M)" = busy
check "status shows per-disk delta-L" bash -c '"$0" --socket "$1" status | grep -q "DELTA-L"' "$CWCTL" "$CTL_SOCK"

# --- exports
check "claiming a reservation bound to no export: bad-request" \
	test "$(ctl_code cwctl resv claim 1)" = bad-request
check "export add media bound to reservation 1" cwctl export add media --resv 1
# --- resv claim: which process's connections hold the export's priority
sleep 300 & claimant=$!
cleanup_add "kill $claimant 2>/dev/null"
check "claim reservation 1 for a process" cwctl resv claim 1 --pid "$claimant"
check "resv show names the claimant" test "$(cwctl --json resv show 1 | jq .claimed_by)" = "$claimant"
check "resv show says it in words" bash -c '"$0" --socket "$1" resv show 1 | grep -q "claimed by process $2"' \
	"$CWCTL" "$CTL_SOCK" "$claimant"
check "claiming for no process: not-found" test "$(ctl_code cwctl resv claim 1 --pid 999999999)" = not-found
check "the claim stays when refused" test "$(cwctl --json resv show 1 | jq .claimed_by)" = "$claimant"
check "--pid and --drop together: usage" test "$(cwctl resv claim 1 --pid 1 --drop >/dev/null 2>&1; echo $?)" = 2
check "claiming an unknown reservation: not-found" test "$(ctl_code cwctl resv claim 999)" = not-found
kill "$claimant"; wait "$claimant" 2>/dev/null
check "a claim ends with its process" test "$(cwctl --json resv show 1 | jq .claimed_by)" = null
check "claim it for the shell that runs cwctl" cwctl resv claim 1
check "... which is this script" test "$(cwctl --json resv show 1 | jq .claimed_by)" = "$$"
check "drop the claim" cwctl resv claim 1 --drop
check "no claim after --drop" test "$(cwctl --json resv show 1 | jq .claimed_by)" = null
# A claimant that ended without being reaped (a zombie: its parent never
# waits) has ended too; the claim goes with it.
python3 -c 'import os, sys, time
p = os.fork()
if p == 0:
    time.sleep(0.5)
    os._exit(0)
print(p, flush=True)
time.sleep(60)' >"$d/zombie" &
zparent=$!
cleanup_add "kill $zparent 2>/dev/null"
check "a child that will end unreaped" wait_for "its pid" 10 test -s "$d/zombie"
zpid=$(cat "$d/zombie")
check "claim it for that child" cwctl resv claim 1 --pid "$zpid"
check "it ends, a zombie" wait_for "the zombie" 10 grep -q '^State:.*Z' "/proc/$zpid/status"
check "the claim ends with it" test "$(cwctl --json resv show 1 | jq .claimed_by)" = null
kill "$zparent"; wait "$zparent" 2>/dev/null
check "the same name again: exists" test "$(ctl_code cwctl export add media)" = exists
check "export add read-only under another name" cwctl export add be --name be-ro --readonly
check "a reservation of another partition: bad-request" test "$(ctl_code cwctl export add be --name x --resv 1)" = bad-request
check "two exports" test "$(cwctl --json export list | jq length)" -eq 2
check "read-only is kept" test "$(cwctl --json export list | jq '.[] | select(.name=="be-ro") | .readonly')" = true
check "deleting an exported partition: busy" test "$(ctl_code cwctl part delete media)" = busy
check "releasing a bound reservation: busy" test "$(ctl_code cwctl resv release 1)" = busy
check "export remove be-ro" cwctl export remove be-ro
check "export remove media" cwctl export remove media
check "removing it twice: not-found" test "$(ctl_code cwctl export remove media)" = not-found

# --- stats and status
check "stats has every disk" test "$(cwctl --json stats | jq '.disks | length')" -eq 3
check "stats --watch repeats" test "$(cwctl stats --watch 0.05 --count 3 | grep -c '^DISK')" -eq 3
check "status in JSON" bash -c '"$0" --socket "$1" --json status | jq -e ".pool.uuid and (.disks | length == 3) and (.partitions | length == 3)"' "$CWCTL" "$CTL_SOCK"

# --- calibration (reads only; a quick one on the small ssd file) of a
# disk with streams: the new model is installed if every stream still
# fits (and the reply says the streams ran beside it), or refused naming
# the one that would not (test-cwctl-recalibrate.sh makes each happen).
out=$(cwctl disk calibrate ssd0 --quick 2>&1)
check "calibrating a disk with streams: done with a word, or refused naming one" bash -c \
	'grep -q "warning: ssd0: .*the disk carries [0-9]* stream reservation parts" <<<"$0" ||
	 grep -q "not installed.*reservation [0-9]" <<<"$0"' "$out"
check "calibrating an unknown disk: not-found" test "$(ctl_code cwctl disk calibrate nope)" = not-found

# --- releasing and removing
for r in $(cwctl --json resv list | jq '.[].id'); do cwctl resv release "$r" >/dev/null; done
check "every reservation released" test "$(cwctl --json resv list | jq length)" -eq 0
check "calibrate ssd0" cwctl disk calibrate ssd0 --quick 2>"$cw_tmp/calib.err"
check "a sparse disk file is called too fast" grep -q "warning: ssd0: the disk is a sparse file" "$cw_tmp/calib.err"
check "and said so in JSON" bash -c '"$0" --socket "$1" --json disk calibrate ssd0 --quick | jq -se ".[-1].warning | test(\"sparse\")"' "$CWCTL" "$CTL_SOCK"
check "ssd0's model is calibrated" test "$(cwctl --json disk list | jq '.[2].model.calibrated')" = true
check "the data path takes the new model" grep -q "disk ssd0: new model: " "$CTL_LOG"
check "releasing twice: not-found" test "$(ctl_code cwctl resv release 1)" = not-found
check "a disk with blocks: busy" test "$(ctl_code cwctl disk remove hdd0)" = busy
check "part delete media" cwctl part delete media
check "part delete be" cwctl part delete be
check "part delete outer" cwctl part delete outer
check "disk remove hdd0 once empty" cwctl disk remove hdd0
check "two disks left" test "$(cwctl --json disk list | jq length)" -eq 2
check "the server stops cleanly" ctl_stop
