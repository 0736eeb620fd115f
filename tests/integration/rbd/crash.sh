#!/bin/bash
# Description: kill -9 of clockwised while FUA writes go to an RBD image:
# every write acknowledged before the kill is there after the restart,
# and the restarted daemon's first write does not wait for the image's
# lock, which the killed one never gave back (the cluster would keep it
# 30 s): the daemon breaks it, having recorded that it was its own.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
. "$top_srcdir/tests/integration/ceph-lib.sh"
requires qemu-io
ceph_setup

check "image" ceph_image r0 64M
check "pool" cwd_pool 64M
check "an RBD disk joins it" "$cwpool" add-disk "$cwd_db" "$(ceph_spec r0)" rbd r0
check "partition" cwd_part vol 48M single 1
cwd_conf
cwd_start
uri=$(cwd_uri vol)
# 640 FUA writes of 64 KiB, each its own pattern; the daemon dies under them
cmds=()
for i in $(seq 0 639); do cmds+=(-c "write -f -P $((i % 250 + 1)) $((i * 65536)) 64k"); done
qemu-io -f raw "${cmds[@]}" "$uri" >"$cw_tmp/writes" 2>&1 &
writer=$!
wait_for "some writes acknowledged" 60 bash -c "[ \$(grep -c '^wrote' '$cw_tmp/writes') -ge 40 ]"
check "kill -9 under FUA writes" cwd_kill9
wait "$writer"
acked=$(grep -c '^wrote' "$cw_tmp/writes")
echo "acknowledged before the kill: $acked of 640"
check "the kill came before the end" test "$acked" -lt 640
check "the pool recorded whose the image's lock was" grep -q " $(ceph_spec r0)\$" "$cwd_db-rbd-owners"
cwd_start
# past the 40 MiB written above
t0=$(date +%s%N)
check "a write after the restart" qemu-io -f raw -c "write -f -P 7 47M 64k" "$uri"
ms=$((($(date +%s%N) - t0) / 1000000))
echo "the first write after the restart took $ms ms"
check "without waiting for the lock (under 10 s)" test "$ms" -lt 10000
check "the restarted daemon broke the dead one's lock" grep -q "lock was still held by this pool's previous daemon" "$(cwd_log)"
cmds=()
for off in $(sed -n 's/^wrote 65536\/65536 bytes at offset \([0-9]*\)$/\1/p' "$cw_tmp/writes"); do
	cmds+=(-c "read -P $((off / 65536 % 250 + 1)) $off 64k")
done
qemu-io -f raw "${cmds[@]}" "$uri" >"$cw_tmp/reads" 2>&1
check "every acknowledged write is there" test "$(grep -c '^read 65536' "$cw_tmp/reads")" -eq "$acked"
expect_fail "none is torn" grep -q 'Pattern verification failed' "$cw_tmp/reads"
check "stop" cwd_stop
