#!/bin/bash
# Description: two clockwised daemons, each with its own pool of images on
# one cluster, serve at the same time and keep each other's data apart.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
. "$top_srcdir/tests/integration/ceph-lib.sh"
requires nbdcopy
ceph_setup

check "images" ceph_image a 64M
check "images" ceph_image b 64M
mkdir -p "$cw_tmp/a" "$cw_tmp/b"
pids=()
for h in a b; do
	d=$cw_tmp/$h
	check "pool $h" "$cwpool" create "$d/pool.db"
	check "its image" "$cwpool" add-disk "$d/pool.db" "$(ceph_spec $h)" rbd "r$h"
	check "its partition" "$cwpool" create-part "$d/pool.db" vol 48M single 1
	cat >"$d/clockwised.conf" <<EOC
pool = "$d/pool.db";
listen = { unix = [ "$d/nbd.sock" ]; };
control_socket = "$d/control";
exports = { all = true; };
EOC
	"$top_builddir/daemon/clockwised" -f -c "$d/clockwised.conf" 2>"$d/log" &
	pids+=($!)
	cleanup_add "kill $! 2>/dev/null"
done
for h in a b; do
	check "daemon $h ready" wait_for "daemon $h" 60 grep -q 'ready: ' "$cw_tmp/$h/log"
	head -c 40M /dev/urandom >"$cw_tmp/$h/data"
done
# both at once
nbdcopy "$cw_tmp/a/data" "nbd+unix:///vol?socket=$cw_tmp/a/nbd.sock" & wa=$!
nbdcopy "$cw_tmp/b/data" "nbd+unix:///vol?socket=$cw_tmp/b/nbd.sock" & wb=$!
check "daemon a takes its data" wait $wa
check "daemon b takes its data" wait $wb
for h in a b; do
	check "daemon $h gives back its own" bash -c "nbdcopy 'nbd+unix:///vol?socket=$cw_tmp/$h/nbd.sock' - |
		head -c 40M | cmp - '$cw_tmp/$h/data'"
done
i=0
for h in a b; do
	check "daemon $h stops" bash -c "kill -TERM ${pids[$i]}; wait_pid() { while kill -0 \$1 2>/dev/null; do sleep 0.1; done; }; wait_pid ${pids[$i]}"
	i=$((i + 1))
done
