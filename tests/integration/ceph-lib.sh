# Sourced by the RBD tests and tests/bench/rbd after lib.sh (or alone,
# with cw_tmp set): a one-node Ceph cluster on 127.0.0.1 under a
# temporary directory, from Debian's ceph-mon, ceph-osd and ceph-common.
#
#   ceph_requires     skip (exit 77) with the reason unless the packages
#                     and a clockwised built with librbd are there
#   ceph_up [DIR]     a monitor and one BlueStore OSD on a plain file,
#                     under cephx, no mgr; pool "rbd"; ready once a real
#                     object write went through.  Sets ceph_dir, ceph_conf.
#                     With CW_CEPH_CONF set (a cluster a driver brought
#                     up), uses that one instead and leaves it running.
#   ceph_down         stops the daemons (by pid) and removes the directory
#   ceph_osd_stop / ceph_osd_start   the OSD, for outage tests
#   ceph_setup        what every RBD case starts with: ceph_requires, and
#                     a cluster (its own, torn down at exit, or the driver's)
#   ceph_image NAME SIZE [fill]   creates image rbd/NAME (unique to this
#                     run: the cluster may be shared) and with fill writes it
#                     out whole (reads of never-written regions never reach
#                     the OSD, so measurements need it)
#   ceph_spec NAME [CONF]   the disk name of image NAME: rbd:rbd/...?conf=
#   ceph_rbd ARGS / ceph_cli ARGS   rbd and ceph against the cluster
#
# Facts this relies on: the monitor refuses to start below 5% free disk
# unless mon_data_avail_crit says otherwise; without a mgr `ceph -s`
# shows no usage, so readiness is a real write; an OSD made with
# `ceph-osd --mkfs --no-mon-config` and no bluestore_block_path makes its
# block file inside its own directory.
ceph_dir=
ceph_conf=
ceph_owned=0

ceph_requires() {
	local c
	for c in ceph-mon ceph-osd ceph rbd rados monmaptool ceph-authtool; do
		if ! command -v "$c" >/dev/null 2>&1; then
			echo "SKIP: $c is not installed (Debian: ceph-mon ceph-osd ceph-common)"
			rm -rf "$cw_tmp"
			trap - EXIT
			exit 77
		fi
	done
	if [ -x "$top_builddir/daemon/clockwised" ] &&
	   ! "$top_builddir/daemon/clockwised" --version 2>/dev/null | grep -q '+rbd'; then
		echo "SKIP: clockwised was built without librbd (Debian: librbd-dev)"
		rm -rf "$cw_tmp"
		trap - EXIT
		exit 77
	fi
}

ceph_cli() { timeout 60 ceph -c "$ceph_conf" "$@"; }
ceph_rbd() { timeout 120 rbd -c "$ceph_conf" "$@"; }

# A free TCP port on 127.0.0.1 for the monitor.
ceph_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

ceph_osd_start() {
	ceph-osd -c "$ceph_conf" -i 0 2>>"$ceph_dir/log/osd-start.log" || return 1
	# up again once a write goes through
	wait_for "the OSD to serve writes" 90 \
		timeout 20 rados -c "$ceph_conf" -p rbd put ready "$ceph_conf"
}

ceph_osd_stop() {
	local pid
	pid=$(cat "$ceph_dir/run/osd.0.pid" 2>/dev/null) || return 1
	kill -TERM "$pid" || return 1
	wait_for "the OSD to stop" 60 bash -c "! kill -0 $pid"
}

ceph_up() {
	local port fsid osd_uuid
	if [ -n "${CW_CEPH_CONF:-}" ]; then
		ceph_conf=$CW_CEPH_CONF
		ceph_dir=$(dirname "$ceph_conf")
		ceph_owned=0
		return 0
	fi
	ceph_dir=${1:-$cw_tmp/ceph}
	ceph_conf=$ceph_dir/ceph.conf
	ceph_owned=1
	mkdir -p "$ceph_dir"/{mon,osd,run,log} || return 1
	port=$(ceph_port) || return 1
	fsid=$(cat /proc/sys/kernel/random/uuid)
	osd_uuid=$(cat /proc/sys/kernel/random/uuid)
	cat >"$ceph_conf" <<EOC
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$port
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = $ceph_dir/keyring
log file = $ceph_dir/log/\$name.log
ms bind ipv6 = false
public addr = 127.0.0.1
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail crit = 0
mon data avail warn = 0
[client]
# the outage test waits this long for an error, not 30 s
rados osd op timeout = 5
client mount timeout = 10
admin socket =
log file =
# as clockwised has it, so that fio's rbd engine is measured alike
rbd cache = false
[mon]
mon data = $ceph_dir/mon
run dir = $ceph_dir/run
pid file = $ceph_dir/run/\$name.pid
admin socket = $ceph_dir/run/\$name.asok
[osd]
osd data = $ceph_dir/osd
run dir = $ceph_dir/run
pid file = $ceph_dir/run/\$name.pid
admin socket = $ceph_dir/run/\$name.asok
osd objectstore = bluestore
bluestore block create = true
bluestore block size = 4294967296
bluestore cache autotune = false
bluestore cache size = 134217728
osd memory target = 939524096
EOC
	ceph-authtool "$ceph_dir/keyring" --create-keyring --gen-key -n mon. \
		--cap mon 'allow *' >/dev/null || return 1
	ceph-authtool "$ceph_dir/keyring" --gen-key -n client.admin \
		--cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null || return 1
	ceph-authtool "$ceph_dir/keyring" --gen-key -n osd.0 \
		--cap mon 'allow profile osd' --cap osd 'allow *' >/dev/null || return 1
	monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$port]" \
		"$ceph_dir/monmap" >/dev/null || return 1
	ceph-mon -c "$ceph_conf" --mkfs -i a --monmap "$ceph_dir/monmap" \
		--keyring "$ceph_dir/keyring" || return 1
	ceph-mon -c "$ceph_conf" -i a || return 1
	wait_for "the monitor" 60 ceph_cli -s || return 1
	ceph_cli osd new "$osd_uuid" 0 >/dev/null || return 1
	ceph-osd -c "$ceph_conf" -i 0 --mkfs --osd-uuid "$osd_uuid" --no-mon-config \
		>"$ceph_dir/log/mkfs.log" 2>&1 || { cat "$ceph_dir/log/mkfs.log"; return 1; }
	ceph_cli osd pool create rbd 8 8 >/dev/null 2>&1 || return 1
	ceph_cli osd pool application enable rbd rbd >/dev/null 2>&1 || return 1
	ceph_osd_start
}

ceph_down() {
	local f pid pids=()
	[ "$ceph_owned" = 1 ] && [ -n "$ceph_dir" ] || return 0
	for f in "$ceph_dir"/run/osd.0.pid "$ceph_dir"/run/mon.a.pid; do
		pid=$(cat "$f" 2>/dev/null) || continue
		kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
	done
	for pid in "${pids[@]}"; do
		wait_for "ceph daemon $pid to stop" 30 bash -c "! kill -0 $pid" ||
			kill -KILL "$pid" 2>/dev/null
	done
	rm -rf "$ceph_dir"
	ceph_owned=0
}

ceph_setup() {
	ceph_requires
	cleanup_add ceph_down
	ceph_up || { echo "FAIL: the cluster did not come up"; exit 1; }
}

ceph_image_name() { echo "cw$$-$1"; }

ceph_image() {
	local name
	name=$(ceph_image_name "$1")
	ceph_rbd create --size "$2" "rbd/$name" || return 1
	cleanup_add "ceph_rbd rm --no-progress rbd/$name >/dev/null 2>&1"
	[ "${3:-}" = fill ] || return 0
	ceph_rbd bench --io-type write --io-size 4M --io-threads 4 --io-total "$2" \
		--io-pattern seq "rbd/$name" >/dev/null
}

ceph_spec() { echo "rbd:rbd/$(ceph_image_name "$1")?conf=${2:-$ceph_conf}"; }
