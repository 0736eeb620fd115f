#!/bin/bash
# Description: nbdcopy writes 256 MiB of random data into a partition
# striped over two disks and reads it back unchanged; disk b runs four
# lanes (four dispatchers), disk a its default.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires nbdcopy

check "pool" cwd_pool 160M a b:ssd
check "partition" cwd_part vol 256M rotation
cwd_conf "disks = ( { name = \"b\"; path = \"$cw_tmp/b.disk\"; tier = \"ssd\"; lanes = 4; } );"
cwd_start
head -c 256M /dev/urandom >"$cw_tmp/in"
check "nbdcopy in" nbdcopy "$cw_tmp/in" "$(cwd_uri vol)"
check "nbdcopy out" nbdcopy "$(cwd_uri vol)" "$cw_tmp/out"
check "same data" cmp "$cw_tmp/in" "$cw_tmp/out"
check "same checksum" test "$(sha256sum <"$cw_tmp/in")" = "$(sha256sum <"$cw_tmp/out")"
check "both disks carried data" bash -c \
	"last=\$(( \$(sed -n 's/.*disk b: .*, \\([0-9]*\\) lanes\\{0,1\\},.*/\\1/p' '$(cwd_log)') - 1 ));
	 kill -USR1 $cwd_pid; until grep -q \"stats disk b lane \$last:\" '$(cwd_log)'; do sleep 0.05; done;
	 grep 'stats disk a lane 0' '$(cwd_log)' | grep -qv 'write_bytes=0 ' &&
	 grep 'stats disk b' '$(cwd_log)' | grep -qv 'write_bytes=0 '"
check "disk b's four lanes all carried data" bash -c \
	"test \$(grep 'stats disk b lane' '$(cwd_log)' | grep -cv 'write_bytes=0 ') -eq 4"
check "clean stop" cwd_stop
