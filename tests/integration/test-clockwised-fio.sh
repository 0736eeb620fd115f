#!/bin/bash
# Description: fio's nbd engine with crc32c verification against both I/O
# engines and every policy, with a stream admitted on part of the export so
# RT and BE requests go through the scheduling core together; four
# connections book into the disks' slot records at once.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires fio
fio --enghelp 2>/dev/null | grep -qw nbd || { echo "SKIP: fio lacks the nbd engine"; exit 77; }

check "pool" cwd_pool 64M a b:ssd
check "partition" cwd_part vol 64M rotation
for engine in io_uring libaio; do
	for policy in delta-l edf lst; do
		cwd_conf "io_engine = \"$engine\"; policy = \"$policy\";"
		cwd_start -r vol:1M:64k,range=0:16M
		# (in the temp dir: fio leaves verify state files in its cwd)
		check "$engine $policy: fio randrw verify" \
			env -C "$cw_tmp" fio --name=v --ioengine=nbd --uri="$(cwd_uri vol)" --rw=randrw --bs=4k,64k \
			--iodepth=16 --numjobs=4 --size=8M --offset_increment=8M --io_size=4M \
			--verify=crc32c --verify_fatal=1 \
			--output="$cw_tmp/fio.out"
		check "$engine $policy: stop" cwd_stop
		check "$engine $policy: RT requests were served" \
			bash -c "grep 'stats reservation vol' '$(cwd_log)' | grep -qv 'rt_done=0 '"
		check "$engine $policy: BE requests too" \
			bash -c "grep 'stats disk a lane 0' '$(cwd_log)' | grep -qv 'be_done=0 '"
		# (Deadlines are checked in test-clockwised-reserve.sh, with a
		# stream that keeps to its rate; here two connections overdrive
		# it on a shared machine.)
	done
done
