#!/usr/bin/env bash
# Description: data that moves while it is served.  A partition on hdd0 is
# written with a pattern per MiB; evacuating hdd0 is refused up front with
# the numbers while the other disks lack the room, then runs under a
# verified write load through NBD (each write's pattern recorded once
# qemu-io acknowledged it) and hdd0 is removed.  Every region then reads
# its last acknowledged pattern.  A partition move to the SSD tier is
# refused when it does not fit; a move paused before a restart is paused
# after it and finishes once resumed; a kill -9 in the middle of a move
# under writes leaves every acknowledged write readable, and the move
# resumes by itself after the restart.  --tier ssd is refused without
# --tier-fallback when the SSDs are full.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq truncate qemu-io

d=$cw_tmp
REGIONS=48	# MiB regions of partition media written and checked
ctl_start "$d" --no-export-all
uri="nbd+unix:///media?socket=$CTL_NBD"

check "part create media on hdd0" cwctl part create media --size 100M --policy single --disk hdd0
check "export media" cwctl export add media
for r in $(seq 0 $((REGIONS - 1))); do
	echo 1 >"$d/acked.$r"; echo 1 >"$d/flying.$r"
done
check "write the first patterns" qemu-io -f raw -c "write -P 1 0 ${REGIONS}M" "$uri"

writer() { ctl_writer "$d" "$uri" "$REGIONS"; }
start_writer() { rm -f "$d/stop"; writer & WRITER=$!; cleanup_add "touch $d/stop; wait $WRITER 2>/dev/null"; }
stop_writer() { touch "$d/stop"; wait "$WRITER" 2>/dev/null; }
verify() { ctl_verify "$d" "$uri" "$REGIONS"; }

# ---- refusals up front ----
check "a filler on hdd1" cwctl part create filler --size 250M --policy single --disk hdd1
check "a filler on ssd0" cwctl part create filler2 --size 100M --policy single --disk ssd0
check "evacuating hdd0 is refused: no space" test "$(ctl_code cwctl disk evacuate hdd0)" = no-space
refusal=$(cwctl --json disk evacuate hdd0 2>&1 >/dev/null)
check "the refusal has the numbers" bash -c 'echo "$0" | jq -e ".details.needed_bytes == 104857600 and .details.available_bytes < .details.needed_bytes"' "$refusal"
check "and says them in words" bash -c 'echo "$0" | jq -e ".message | test(\"needs 104857600 bytes\")"' "$refusal"
check "nothing was journalled" test "$(cwctl --json move list | jq length)" = 0
check "to the SSDs it does not fit either" test "$(ctl_code cwctl part move media --tier ssd)" = no-space
check "--tier ssd without fallback is refused when the SSDs are full" \
	test "$(ctl_code cwctl part create big --size 200M --tier ssd)" = no-space
check "with --tier-fallback it is created" cwctl part create big --size 20M --tier ssd --tier-fallback
check "delete big" cwctl part delete big
# Rule 2: a reserved range does not move onto disks that never admitted it.
rid=$(cwctl --json resv create media --rate 1MB/s --block 1M --range 0:10M | jq .id)
check "a reservation on media" test -n "$rid"
check "evacuating its disk is refused: busy" test "$(ctl_code cwctl disk evacuate hdd0)" = busy
check "moving its partition is refused: busy" test "$(ctl_code cwctl part move media --disks hdd1)" = busy
check "the refusal names the reservation" bash -c '"$0" --socket "$1" disk evacuate hdd0 2>&1 | grep -q "reservation $2 covers bytes 0..10485760 of media"' "$CWCTL" "$CTL_SOCK" "$rid"
check "release it" cwctl resv release "$rid"
check "delete the fillers" cwctl part delete filler
check "delete filler2" cwctl part delete filler2

# ---- evacuation under writes ----
start_writer
out=$(cwctl --json disk evacuate hdd0 --watch --interval 0.2)
check "the evacuation watch ends with status 0" test $? -eq 0
stop_writer
check "one JSON object per line while watching" bash -c 'echo "$0" | jq -se "length >= 1 and all(.[]; .kind == \"evacuate\")"' "$out"
check "the move is done with every block moved" test "$(cwctl --json move list | jq -c '[.[0].state, .[0].done == .[0].blocks, .[0].failed]')" = '["done",true,0]'
check "hdd0 holds nothing" test "$(cwctl --json part show media | jq '[.per_disk[] | select(.disk == "hdd0")] | length')" = 0
check "every acknowledged write reads back" verify
# The export's FLUSH still lists hdd0 until it is added again.
check "hdd0 is refused while export media flushes it" test "$(ctl_code cwctl disk remove hdd0)" = busy
check "export remove media" cwctl export remove media
check "hdd0 can be removed" cwctl disk remove hdd0
check "export media again" cwctl export add media

# ---- a paused move survives a restart ----
check "part move media onto hdd1 alone" cwctl part move media --disks hdd1 --policy single
id=$(cwctl --json move list | jq '.[-1].id')
cwctl move pause "$id" >/dev/null 2>&1
check "the server stops" ctl_stop
ctl_start "$d" --no-export-all
state=$(cwctl --json move list | jq -r ".[] | select(.id == $id) | .state")
check "the move is paused or done after the restart" bash -c '[ "$0" = paused ] || [ "$0" = done ]' "$state"
if [ "$state" = paused ]; then
	check "resume it" cwctl move resume "$id"
fi
check "it finishes" cwctl move list --watch --interval 0.2
check "it is done" test "$(cwctl --json move list | jq -r ".[] | select(.id == $id) | .state")" = done
check "the data is intact after the restart" verify

# ---- kill -9 under writes, then the move resumes ----
check "a move onto the SSD" cwctl part move media --tier ssd
id=$(cwctl --json move list | jq '.[-1].id')
start_writer
wait_for "a block or two moved" 20 bash -c "cwctl --json move list | jq -e '.[] | select(.id == $id) | .done >= 2 or .state != \"running\"'"
kill -9 "$CTL_PID"; wait "$CTL_PID" 2>/dev/null
stop_writer
ctl_start "$d" --no-export-all
check "after kill -9 every acknowledged write reads back" verify
check "the move finishes by itself" cwctl move list --watch --interval 0.2
check "done" test "$(cwctl --json move list | jq -r ".[] | select(.id == $id) | .state")" = done
check "the data is intact after the move" verify
check "cancelling a finished move is refused" test "$(ctl_code cwctl move cancel "$id")" = bad-request
check "an unknown move is not found" test "$(ctl_code cwctl move pause 999)" = not-found
check "the server stops cleanly" ctl_stop
