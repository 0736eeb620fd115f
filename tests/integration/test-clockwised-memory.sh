#!/bin/bash
# Description: disks that are files on a memory file system (tmpfs) are
# served through the memory engine (the copy done on the dispatching
# thread, not handed to io_uring's kernel workers): the daemon says so,
# fio's nbd engine verifies random reads and writes with crc32c across two
# connections and a stream, and data flushed before kill -9 is there after
# a restart.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires fio nbdcopy cmp
fio --enghelp 2>/dev/null | grep -qw nbd || { echo "SKIP: fio lacks the nbd engine"; exit 77; }

# A tmpfs of our own where we may mount one, else /dev/shm if it is tmpfs.
mem=$cw_tmp/mem
mkdir "$mem"
if mount -t tmpfs -o size=160M clockwise-test "$mem" 2>/dev/null; then
	cleanup_add "umount '$mem'"
elif [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
	mem=$(mktemp -d /dev/shm/cwtest.XXXXXX)
	cleanup_add "rm -rf '$mem'"
else
	echo "SKIP: no tmpfs to put disks on"
	exit 77
fi

check "pool" "$cwpool" create "$cwd_db"
for d in m0:ssd m1:hdd; do
	truncate -s 64M "$mem/${d%%:*}.disk"
	check "disk ${d%%:*} on tmpfs" "$cwpool" add-disk "$cwd_db" "$mem/${d%%:*}.disk" "${d#*:}" "${d%%:*}"
done
check "partition" cwd_part vol 96M
cwd_conf
cwd_start -r vol:512K:64k,range=0:8M
check "the daemon chose the memory engine for both disks" \
	test "$(grep -c 'memory I/O' "$(cwd_log)")" -eq 2

check "fio randrw verify over two connections" \
	env -C "$cw_tmp" fio --name=v --ioengine=nbd --uri="$(cwd_uri vol)" --rw=randrw --bs=4k,64k \
	--iodepth=16 --numjobs=2 --size=16M --offset_increment=48M --io_size=8M \
	--verify=crc32c --verify_fatal=1 --output="$cw_tmp/fio.out"

# Beside the stream (-r), best effort's copies on a memory disk run below
# the streams' connection threads: the dispatcher of m1 (at
# rt_priority + 1 = 11 for the stream) is seen at 9 while fio's load
# runs, and at no other priority.
tid=$(grep -lx 'cw-d:m1/0' /proc/"$cwd_pid"/task/*/comm | cut -d/ -f5)
check "the dispatcher of m1 is named" test -n "$tid"
env -C "$cw_tmp" fio --name=be --ioengine=nbd --uri="$(cwd_uri vol)" --rw=randrw --bs=64k \
	--iodepth=16 --time_based --runtime=3 --output=/dev/null & fio_pid=$!
declare -A seen=()
for _ in $(seq 1 3000); do
	read -r st <"/proc/$cwd_pid/task/$tid/stat" || break
	st=${st##*) }	# after the name: field 3 on
	read -r -a f <<<"$st"
	seen[${f[37]}]=1	# field 40, rt_priority
	kill -0 "$fio_pid" 2>/dev/null || break
done
wait "$fio_pid"
echo "priorities of the dispatcher of m1 seen: ${!seen[*]}"
check "best effort copied at rt_priority - 1" test -n "${seen[9]:-}"
check "no priority but 11 and 9" test "$(printf '%s\n' "${!seen[@]}" | grep -cvxE '9|11')" -eq 0

head -c 32M /dev/urandom >"$cw_tmp/data"
check "nbdcopy in (flushes at the end)" nbdcopy "$cw_tmp/data" "$(cwd_uri vol)"
check "kill -9" cwd_kill9
cwd_start
check "nbdcopy out after the restart" nbdcopy "$(cwd_uri vol)" "$cw_tmp/back"
check "the first 32 MiB are what was written" cmp -n $((32 << 20)) "$cw_tmp/data" "$cw_tmp/back"
check "stop" cwd_stop

# A connection reuses the buffers of the slots it used before: with 4
# requests of 256 KiB in flight it keeps about 4 buffers, under a reply
# memory whose half (4 MiB) its 64 slots would pass if each got one in
# turn.  Then every recycled buffer was dropped and each request mapped
# and faulted in a new one (64 pages of 4 KiB): the daemon's minor faults
# over 384 such reads count them.
cwd_conf 'limits = { reply_memory_bytes = 8388608; };'
cwd_start
faults() { awk '{ print $10 }' "/proc/$cwd_pid/stat"; }
f0=$(faults)
check "nbdcopy out: 96 MiB in 256 KiB requests, 4 in flight" nbdcopy --connections=1 \
	--requests=4 --request-size=262144 "$(cwd_uri vol)" null:
f1=$(faults)
echo "minor faults over 384 reads: $((f1 - f0))"
check "the slots' buffers are reused (under 2048 faults, not one buffer a request)" \
	test $((f1 - f0)) -lt 2048
check "stop" cwd_stop
