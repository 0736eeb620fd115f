#!/bin/bash
# Description: a first start, as the systemd unit makes it: with no pool
# yet, clockwised without --init stops and says exactly what to run (the
# cwpool command, or --init), and creates nothing; with --init it creates
# an empty pool where the configuration names it, gets ready, and takes
# disks, partitions and exports through cwctl; the next start, without
# --init, serves the same pool; --init leaves an existing pool as it is.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires nbdinfo jq truncate
cwctl() { "$top_builddir/tools/cwctl" --socket "$cw_tmp/control" "$@"; }

mkdir "$cw_tmp/state"
cwd_db=$cw_tmp/state/pool.db
cwd_conf
out=$("$cwd_bin" -f -c "$cwd_cfg" 2>&1); rc=$?
check "no pool, no --init: exit 1" test "$rc" -eq 1
check "... saying what to run" bash -c 'grep -qF "cannot open pool $1: there is none: create it with \`cwpool create $1\` (then add disks), or start clockwised with --init to create an empty one" <<<"$0"' \
	"$out" "$cwd_db"
check "... and creating nothing" test ! -e "$cwd_db"

cwd_start --init
check "--init created the pool" test -s "$cwd_db"
check "and said so" grep -q -- "--init: created an empty pool at $cwd_db" "$(cwd_log)"
check "ready with no export" grep -q "ready: 0 exports" "$(cwd_log)"
truncate -s 64M "$cw_tmp/d0.disk"
check "cwctl disk add" cwctl disk add "$cw_tmp/d0.disk" --name d0
check "cwctl part create" cwctl part create media --size 8M
check "cwctl export add" cwctl export add media
check "served" nbdinfo --size "$(cwd_uri media)"
check "stop" cwd_stop

cwd_start
check "the next start, without --init, serves the same pool" test "$(nbdinfo --size "$(cwd_uri media)")" -eq $((8 << 20))
check "stop" cwd_stop
cwd_start --init
check "--init on an existing pool keeps it" test "$(cwctl --json part list | jq -r '.[].name')" = media
expect_fail "and creates nothing" grep -q "created an empty pool" "$(cwd_log)"
check "stop" cwd_stop
