#!/bin/bash
# Description: the raw-socket client's malformed handshakes, unknown
# options and commands, out-of-range, misaligned and oversized requests
# against clockwised itself: each gets the protocol's error reply or a
# clean disconnect, nothing lands outside the partition, and the daemon
# keeps serving.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
client=$top_builddir/tests/integration/nbd-proto-client

# The client expects "disk" (1 MiB, read-write, requests up to 64 KiB)
# and "ro" (read-only); read-only is set for all exports of a daemon, so
# the read-only scenarios run against a second start.
check "pool" "$cwpool" create "$cwd_db" 64K
truncate -s 8M "$cw_tmp/a.disk"
check "disk" "$cwpool" add-disk "$cwd_db" "$cw_tmp/a.disk" hdd a
check "partition disk" cwd_part disk 1M
check "partition ro" cwd_part ro 64K
cwd_conf 'exports = { all = true; max_request_bytes = 65536; };'
cwd_start
align=$(nbdinfo --json "$(cwd_uri disk)" | jq '.exports[0].block_size_minimum')
# "ro" lies right after "disk" on the disk: it shows stray writes.
check "guard pattern" qemu-io -f raw -c 'write -P 0xee 0 64k' "$(cwd_uri ro)"
for s in $("$client" "$cwd_sock" list); do
	case $s in
	export-name|read-only) continue ;;
	esac
	# The misaligned write case assumes a minimum block of 512 bytes.
	if [ "$align" -ne 512 ] && [ "${s#bad-requests}" != "$s" ]; then
		echo "SKIP: $s (minimum block $align)"
		continue
	fi
	check "protocol: $s" "$client" "$cwd_sock" "$s"
done
check "the neighbour partition is untouched" \
	qemu-io -f raw -c 'read -P 0xee 0 64k' "$(cwd_uri ro)"
check "still serving" "$client" "$cwd_sock" idle-client-others-served
check "still running" kill -0 "$cwd_pid"
check "clean stop" cwd_stop

cwd_conf 'exports = { all = true; max_request_bytes = 65536; read_only = true; };'
cwd_start
check "protocol: export-name (read-only)" "$client" "$cwd_sock" export-name
check "protocol: read-only" "$client" "$cwd_sock" read-only
check "clean stop" cwd_stop
