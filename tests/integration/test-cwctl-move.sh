#!/usr/bin/env bash
# Description: data that moves while it is served.  A partition on hdd0 is
# written with a pattern per MiB; evacuating hdd0 is refused up front with
# the numbers while the other disks lack the room, then runs under a
# verified write load through NBD (each write's pattern recorded once
# qemu-io acknowledged it) and hdd0 is removed while the export stays up
# and a client connected across the removal flushes.  Every region then
# reads its last acknowledged pattern.  A partition move to the SSD tier is
# refused when it does not fit; a move paused before a restart is paused
# after it and finishes once resumed; a kill -9 in the middle of a move
# under writes leaves every acknowledged write readable, and the move
# resumes by itself after the restart.  --tier ssd is refused without
# --tier-fallback when the SSDs are full.  A move of a reserved range runs
# at once when admission holds for the stream with its blocks on both
# sides of the move (the stream is booked there, then where its range
# lies once the move is done or cancelled), and is refused with
# admission's reason when it would not hold where the move puts them.  A
# reservation made while a move takes its range elsewhere is booked on both
# sides at once, or refused naming the move.
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
check "delete the fillers" cwctl part delete filler
check "delete filler2" cwctl part delete filler2

# ---- rule 2: a reserved range moves only where admission holds ----
on_hdd0_only() { test "$(cwctl --json part show media | jq '[.per_disk[] | select(.disk != "hdd0")] | length')" = 0; }
m=$(ctl_largest media 1M 2)
rid=$(cwctl --json resv create media --rate $((m / 10)) --block 1M --range 0:10M | jq .id)
check "a small reservation on media" test -n "$rid"
out=$(cwctl --json disk evacuate hdd0)
check "evacuating its disk runs at once: the stream fits on both sides" \
	jq -e '.moves[0].state == "running" or .moves[0].state == "done"' <<<"$out"
mid=$(jq '.moves[0].id' <<<"$out")
check "the move runs to its end" cwctl move list --watch --interval 0.2
check "and is done" test "$(cwctl --json move list | jq -r ".[] | select(.id == $mid) | .state")" = done
check "the reservation is booked where its range lies now, not on hdd0" \
	bash -c '"$0" --socket "$1" --json resv show "$2" | jq -e "(.per_disk | length) >= 1 and all(.per_disk[]; .disk != \"hdd0\")"' \
	"$CWCTL" "$CTL_SOCK" "$rid"
check "release it" cwctl resv release "$rid"
check "back onto hdd0" cwctl part move media --disks hdd0 --policy single
check "moved back" cwctl move list --watch --interval 0.2
check "media is on hdd0 again" on_hdd0_only
check "part create other on hdd1" cwctl part create other --size 40M --policy single --disk hdd1
big=$(cwctl --json resv create other --rate $((m * 9 / 10)) --block 1M | jq .id)
rid=$(cwctl --json resv create media --rate $((m * 6 / 10)) --block 1M | jq .id)
check "a large stream on each disk" test -n "$big" -a -n "$rid"
out=$(cwctl --json part move media --disks hdd1 --policy single 2>&1 >/dev/null)
echo "refusal: $(jq -r .message <<<"$out")"
check "a move that admission refuses is refused: busy" jq -e '.code == "busy"' <<<"$out"
check "with admission's reason: the disk and whose deadline" \
	jq -e --arg w "with its blocks where the move puts them, reservation $rid would be refused on disk hdd1" \
	'.message | contains($w)' <<<"$out"
check "the move was cancelled at once" \
	test "$(cwctl --json move list | jq '[.[] | select(.state == "running" or .state == "paused")] | length')" = 0
check "nothing moved" on_hdd0_only
check "release the streams" cwctl resv release "$rid"
check "release the other" cwctl resv release "$big"
check "delete other" cwctl part delete other

# ---- evacuation under writes ----
start_writer
out=$(cwctl --json disk evacuate hdd0 --watch --interval 0.2)
check "the evacuation watch ends with status 0" test $? -eq 0
stop_writer
check "one JSON object per line while watching" bash -c 'echo "$0" | jq -se "length >= 1 and all(.[]; .kind == \"evacuate\")"' "$out"
check "the move is done with every block moved" test "$(cwctl --json move list | jq -c '[.[0].state, .[0].done == .[0].blocks, .[0].failed]')" = '["done",true,0]'
check "hdd0 holds nothing" test "$(cwctl --json part show media | jq '[.per_disk[] | select(.disk == "hdd0")] | length')" = 0
check "every acknowledged write reads back" verify
# The export's FLUSH follows the partition: hdd0 leaves it, and the disk
# goes, while the export stays up and its clients connected.
qemu-io -f raw -c "write -P 3 0 1M" -c "sleep 3000" -c flush -c "read -P 3 0 1M" "$uri" \
	>"$d/across.out" 2>&1 &
across=$!
sleep 1
check "hdd0 can be removed while export media is up" cwctl disk remove hdd0
wait "$across"; rc=$?
check "a client connected across the removal flushes and reads" \
	bash -c '[ "$0" = 0 ] && grep -q "^read" "$1" && ! grep -qi "error\|failed" "$1"' "$rc" "$d/across.out"
echo 3 >"$d/acked.0"; echo 3 >"$d/flying.0"
check "a new client writes and flushes" qemu-io -f raw -c "write -P 4 1M 1M" -c flush "$uri"
echo 4 >"$d/acked.1"; echo 4 >"$d/flying.1"
check "export media is still listed" test "$(cwctl --json export list | jq '[.[] | select(.name == "media")] | length')" = 1

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

# ---- a whole partition moved under another policy keeps it ----
check "part create spread (rotation)" cwctl part create spread --size 8M
check "export spread" cwctl export add spread
check "spread written" qemu-io -f raw -c "write -P 7 0 8M" "nbd+unix:///spread?socket=$CTL_NBD"
check "move spread onto hdd1 alone" cwctl part move spread --disks hdd1 --policy single
check "that move finishes" cwctl move list --watch --interval 0.2
check "part show gives its policy as single now" \
	test "$(cwctl --json part show spread | jq -r .policy)" = single
check "and its blocks on hdd1 alone" \
	test "$(cwctl --json part show spread | jq -c '[.per_disk[].disk]')" = '["hdd1"]'

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

# ---- rule 2 both ways: a move of a reserved range books its stream on
# both sides, and so does a reservation made over a range a running move
# takes elsewhere.  The control server alone has no mover: its moves stay
# running.
mkdir -p "$d/standin"
ctl_start_standin "$d/standin"
check "stand-in disks" ctl_disks "$d/standin"
check "part create solo on hdd0" cwctl part create solo --size 40M --policy single --disk hdd0
check "a reservation on solo's second half is admitted" \
	cwctl resv create solo --rate 1MB/s --block 1M --range 20M:40M
check "move solo onto hdd1" cwctl part move solo --disks hdd1 --policy single
state=$(cwctl --json move list | jq -r '.[-1].state')
check "that move runs: the stream is booked on both sides of it" test "$state" = running
disks_of() { cwctl --json resv show "$1" | jq -c '[.per_disk[].disk] | sort'; }
sid=$(cwctl --json resv list | jq '.[] | select(.part == "solo") | .id')
check "its reservation is on hdd0 and hdd1 while the move runs" test "$(disks_of "$sid")" = '["hdd0","hdd1"]'
check "cancel it" cwctl move cancel "$(cwctl --json move list | jq '.[-1].id')"
check "nothing moved: the reservation is back on hdd0 alone" test "$(disks_of "$sid")" = '["hdd0"]'
check "a stand-in restart" ctl_stop
ctl_start_standin "$d/standin"
check "it is still on hdd0 alone" test "$(disks_of "$sid")" = '["hdd0"]'

check "part create duo on hdd0" cwctl part create duo --size 40M --policy single --disk hdd0
check "move duo onto hdd1" cwctl part move duo --disks hdd1 --policy single
check "it runs (nothing copies here)" test "$(cwctl --json move list | jq -r '.[-1].state')" = running
did=$(cwctl --json resv create duo --rate 1MB/s --block 1M | jq -e .id)
check "a reservation over what it takes is admitted at once" test -n "$did"
check "on hdd0 and hdd1" test "$(disks_of "$did")" = '["hdd0","hdd1"]'
check "booked for that move" \
	test "$(cwctl --json resv show "$did" | jq .move)" = "$(cwctl --json move list | jq '.[-1].id')"
out=$(cwctl --json resv create duo --rate 400MB/s --block 1M 2>&1)
check "one that does not fit on both sides is refused" jq -e '.code == "refused"' <<<"$out"
check "naming the move" jq -e '.message | test("with its blocks on both sides of move [0-9]+")' <<<"$out"
check "a dry run is admitted alike" cwctl resv create duo --rate 1MB/s --block 1M --dry-run
check "a stand-in restart keeps the move and the booking" ctl_stop
ctl_start_standin "$d/standin"
check "still on hdd0 and hdd1 while the move runs" test "$(disks_of "$did")" = '["hdd0","hdd1"]'
check "the move runs after the restart" test "$(cwctl --json move list | jq -r '.[-1].state')" = running
