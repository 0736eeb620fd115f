#!/usr/bin/env bash
# Description: what the control socket changes while clockwised runs
# reaches its data path at once.  A disk added with `cwctl disk add` is
# opened and served: a partition created on it is exported, written
# (qemu-io, and nbdcopy with a flush) and read back, and the bytes are
# found in the new disk's file; after a restart they are still there.  An
# exported partition that grows is offered at its new size to new
# connections (nbdinfo) and written at its new end, while a connection
# opened before keeps the old size; shrinking it is refused; one that
# grows onto more disks while a client writes and flushes serves it all.
# An unused runtime disk is removed and closed (while another export is
# under load), a used one refused.  Reservations given with -r at start
# count in the control socket's admission: a stream that fits only
# without them is refused with the reason, and they are listed as static.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctl-lib.sh"
requires jq nbdinfo nbdcopy qemu-io fio truncate cmp dd mkfifo
M=$((1 << 20))
d=$cw_tmp/rt
mkdir "$d"
ctl_start "$d"
uri() { echo "nbd+unix:///$1?socket=$CTL_NBD"; }

# --- a disk added at runtime serves at once
truncate -s 128M "$d/new.img"
check "disk add new at runtime" cwctl disk add "$d/new.img" --name new --tier ssd
check "the daemon opened it" grep -q 'disk new (.*new.img) added: served' "$CTL_LOG"
check "part create on it alone" cwctl part create fresh --size 32M --policy single --disk new
check "export add fresh" cwctl export add fresh
check "nbdinfo sees its size" test "$(nbdinfo --size "$(uri fresh)")" -eq $((32 * M))
check "qemu-io writes a pattern" qemu-io -f raw -c "write -P 0x5a $((12 * M)) 4M" \
	-c "write -P 0xa5 $((28 * M)) 4M" -c flush "$(uri fresh)"
check "and reads it back" qemu-io -f raw -c "read -P 0x5a $((12 * M)) 4M" \
	-c "read -P 0xa5 $((28 * M)) 4M" "$(uri fresh)"
head -c $((8 * M)) /dev/urandom > "$d/rand"
check "nbdcopy writes 8M with a flush" nbdcopy --flush "$d/rand" "$(uri fresh)"
check "nbdcopy reads the same back" bash -c 'nbdcopy "$0" - | head -c $1 | cmp - "$2"' \
	"$(uri fresh)" $((8 * M)) "$d/rand"
# The bytes are on the new disk's file, where the partition map says.
run=$(cwctl --json part show fresh | jq -c '.runs[0]')
off=$(echo "$run" | jq .offset)
check "the first run is on disk new" test "$(echo "$run" | jq .disk_id)" = \
	"$(cwctl --json disk list | jq '.[] | select(.name == "new") | .id')"
check "and its bytes are in new.img" bash -c 'dd if="$0" bs=1M skip=$(($1 / 1048576)) \
	count=8 status=none | cmp - "$2"' "$d/new.img" "$off" "$d/rand"

# --- growing an exported partition
# A connection opened before the grow keeps its size (NBD cannot change it)
# and the server's bounds: a raw client, which checks nothing itself.
mkfifo "$d/go"
NBD_EXPORT=fresh "$top_builddir/tests/integration/nbd-proto-client" "$CTL_NBD" \
	keeps-old-size < "$d/go" > "$d/old-conn" 2>&1 &
oldc=$!
exec 9>"$d/go"
cleanup_add "kill $oldc 2>/dev/null"
wait_for "the old connection" 20 test -s "$d/old-conn"
check "it was told 32M" test "$(sed -n 1p "$d/old-conn")" -eq $((32 * M))
check "grow fresh to 48M" cwctl part resize fresh --size 48M
echo go >&9
exec 9>&-
wait "$oldc"
check "the old connection reads its old end, not past it" grep -qx bounded "$d/old-conn"
check "a new connection sees 48M" test "$(nbdinfo --size "$(uri fresh)")" -eq $((48 * M))
check "qemu-io writes at the new end" qemu-io -f raw -c "write -P 0x3c $((47 * M)) 1M" \
	-c flush "$(uri fresh)"
check "and reads it back" qemu-io -f raw -c "read -P 0x3c $((47 * M)) 1M" "$(uri fresh)"
check "shrinking an exported partition: busy" \
	test "$(ctl_code cwctl part resize fresh --size 16M)" = busy
cwctl part resize fresh --size 16M 2> "$d/shrink.err"
check "saying why" grep -q 'exported as fresh.*shrinks only once the export is removed' \
	"$d/shrink.err"
check "the size did not change" test "$(nbdinfo --size "$(uri fresh)")" -eq $((48 * M))

# A partition that grows onto more disks while a client writes and
# flushes (every FLUSH goes to each disk of the export, a list the grow
# appends to under it).
check "part create wide, one block" cwctl part create wide --size 1M --policy rotation
check "export wide" cwctl export add wide
fio --name=w --ioengine=nbd --uri="$(uri wide)" --rw=randwrite --bs=4k --fsync=1 \
	--size=1M --time_based --runtime=4 --output="$d/fio-wide.out" >/dev/null 2>&1 &
fiow=$!
cleanup_add "kill $fiow 2>/dev/null"
sleep 1
check "grow wide under load to 8M" cwctl part resize wide --size 8M
wait "$fiow"
check "fio's writes and flushes all succeeded" test $? -eq 0
check "wide now spans several disks" \
	test "$(cwctl --json part show wide | jq '.per_disk | length')" -ge 2
check "a new connection sees 8M" test "$(nbdinfo --size "$(uri wide)")" -eq $((8 * M))
check "written and flushed at its new end" qemu-io -f raw -c "write -P 0x77 $((7 * M)) 1M" \
	-c flush -c "read -P 0x77 $((7 * M)) 1M" "$(uri wide)"

# --- removal, while another export is under load
check "part create load" cwctl part create load --size 16M --policy single --disk hdd1
check "export load" cwctl export add load
fio --name=l --ioengine=nbd --uri="$(uri load)" --rw=randrw --bs=64k --iodepth=4 \
	--time_based --runtime=5 --output="$d/fio-load.out" >/dev/null 2>&1 &
fiol=$!
cleanup_add "kill $fiol 2>/dev/null"
check "a used runtime disk: busy" test "$(ctl_code cwctl disk remove new)" = busy
truncate -s 64M "$d/spare.img"
check "disk add spare" cwctl disk add "$d/spare.img" --name spare --tier ssd
check "disk remove spare" cwctl disk remove spare
check "the daemon closed it" grep -q 'disk spare (.*spare.img): closed' "$CTL_LOG"
no_spare() { ! cwctl disk list | grep -q '^spare '; }
check "it is gone from the pool" no_spare
check "and can be added again" cwctl disk add "$d/spare.img" --name spare2
check "a partition on it is served" cwctl part create p2 --size 8M --policy single --disk spare2
check "export p2" cwctl export add p2
check "qemu-io on p2" qemu-io -f raw -c "write -P 0x11 0 1M" -c "read -P 0x11 0 1M" "$(uri p2)"
check "export remove p2" cwctl export remove p2
check "part delete p2 (it holds data: --force)" cwctl part delete p2 --force
check "disk remove spare2" cwctl disk remove spare2
wait "$fiol"
check "the load ran through it all" test $? -eq 0

# --- a restart keeps it all
check "the daemon stops" ctl_stop
ctl_start "$d"
check "fresh is exported again at 48M" test "$(nbdinfo --size "$(uri fresh)")" -eq $((48 * M))
check "its data is back" qemu-io -f raw -c "read -P 0x5a $((12 * M)) 4M" -c "read -P 0x3c $((47 * M)) 1M" \
	-c "read -P 0xa5 $((28 * M)) 4M" "$(uri fresh)"
check "the nbdcopy bytes too" bash -c 'nbdcopy "$0" - | head -c $1 | cmp - "$2"' \
	"$(uri fresh)" $((8 * M)) "$d/rand"
check "the daemon stops again" ctl_stop

# --- static reservations (-r) count in the socket's admission
s=$cw_tmp/static
mkdir "$s"
ctl_start "$s"
check "part create media on hdd0" cwctl part create media --size 64M --policy single --disk hdd0
# hdd7200: C = 36 ms for 1 MiB, the best-effort reserve 28.8 ms.  15 MB/s
# (T = 69.9 ms) leaves 33.9 ms alone; beside the static 8M (8 MiB/s) stream
# (T = 125 ms) the static job and one of its own need 71.9 ms > T.
check "15MB/s fits alone" cwctl resv create media --rate 15MB/s --block 1M
check "release it" cwctl resv release 1
check "stop" ctl_stop
ctl_start "$s" --reserve media:8M:1M
static_listed() {
	cwctl --json resv list |
		jq -e 'length == 1 and .[0].static and .[0].export == "media" and .[0].id == 0'
}
static_in_table() { cwctl resv list | grep -q '^static  *media '; }
check "the static one is listed" static_listed
check "-r media:8M:1M is 8 MiB/s, as cwctl reads 8M" \
	test "$(cwctl --json resv list | jq '.[0].rate')" -eq $((8 << 20))
check "as static in the table" static_in_table
static_in_stats() { cwctl stats | grep -q '^static  '; }
check "its counters show in stats" static_in_stats
check "and counted on hdd0" test "$(cwctl --json disk list | jq '.[] | select(.name == "hdd0") | .tasks')" -eq 1
cwctl --json resv create media --rate 15MB/s --block 1M > /dev/null 2> "$s/refused"
check "15MB/s beside it is refused" jq -e '.code == "refused" and .details.disk == "hdd0"' "$s/refused"
check "with the condition" jq -e '.details.condition == "blocking" and (.message | test("refused on disk hdd0"))' "$s/refused"
check "a small stream still fits" cwctl resv create media --rate 64KB/s --block 64K
expect_fail "the static one cannot be released" cwctl resv release 0
check "it stays" bash -c 'test "$("$0" --socket "$1" --json resv list | jq "[.[] | select(.static)] | length")" -eq 1' "$CWCTL" "$CTL_SOCK"
check "its partition cannot shrink under it" \
	test "$(ctl_code cwctl part resize media --size 8M)" = busy
check "stop" ctl_stop
