# Sourced by tests/integration/test-clockwised-*.sh after lib.sh.
#
#   cwd_pool SIZE NAME[:TIER]...   a pool in the test's temp dir with one
#                                  file-backed disk of SIZE per NAME
#   cwd_part NAME SIZE [PLACEMENT [DISK_ID]]   a partition
#   cwd_conf [TEXT]                the config: pool, unix socket, TEXT
#                                  (and exports.all unless TEXT has exports)
#   cwd_start [ARGS]               start clockwised -f; wait for its ready
#                                  line (fails if it exits first); sets cwd_pid
#   cwd_stop                       SIGTERM by PID; fails unless it exits 0
#   cwd_kill9                      SIGKILL by PID
#   cwd_wait_cut SPEC              wait (20 s) for the fault engine's power
#                                  cut (SPEC, said if none came) to end the
#                                  daemon; fails if none came (then kill -9)
#   cwd_notify_listen SOCK LOG     a notify socket like systemd's at SOCK:
#                                  every datagram into LOG (python3); waits
#                                  for the socket
#   cwd_uri NAME                   the nbd+unix URI of export NAME
#   cwd_log                        the current instance's log file
cwd_bin=$top_builddir/daemon/clockwised
cwpool=$top_builddir/tools/cwpool
cwd_db=$cw_tmp/pool.db
cwd_sock=$cw_tmp/nbd.sock
cwd_cfg=$cw_tmp/clockwised.conf
cwd_pid=
cwd_run=0

cwd_pool() {
	local size=$1 d name tier
	shift
	"$cwpool" create "$cwd_db" || return 1
	for d in "$@"; do
		name=${d%%:*}
		tier=hdd
		[ "$name" = "$d" ] || tier=${d#*:}
		truncate -s "$size" "$cw_tmp/$name.disk" || return 1
		"$cwpool" add-disk "$cwd_db" "$cw_tmp/$name.disk" "$tier" "$name" >/dev/null || return 1
	done
}

cwd_part() { "$cwpool" create-part "$cwd_db" "$@"; }

cwd_conf() {
	cat >"$cwd_cfg" <<EOC
pool = "$cwd_db";
listen = { unix = [ "$cwd_sock" ]; };
control_socket = "$cw_tmp/control";
log_level = "debug";
${1:-}
EOC
	# Every partition cwpool made is exported, unless TEXT says how.
	case ${1:-} in
	*"exports = {"*) ;;
	*) echo 'exports = { all = true; };' >>"$cwd_cfg" ;;
	esac
}

cwd_log() { echo "$cw_tmp/clockwised.$cwd_run.log"; }

cwd_is_ready() {
	if ! kill -0 "$cwd_pid" 2>/dev/null; then
		echo "clockwised exited during start-up:" >&2
		cat "$(cwd_log)" >&2
		exit 1
	fi
	grep -q 'ready: ' "$(cwd_log)"
}

cwd_start() {
	cwd_run=$((cwd_run + 1))
	cw_rt_lock -s	# see ctl_start
	"$cwd_bin" -f -c "$cwd_cfg" "$@" 2>"$(cwd_log)" {cw_rt_fd}>&- &
	cwd_pid=$!
	[ "$cwd_run" -gt 1 ] || cw_keep_logs "$cw_tmp/clockwised.[0-9]*.log"
	cleanup_add "kill -9 $cwd_pid 2>/dev/null"
	wait_for "clockwised to be ready" 30 cwd_is_ready || { cat "$(cwd_log)"; exit 1; }
	cwd_is_ready
}

# cwd_start_tcp CONF: starts the daemon on a loopback port free a moment
# ago, after `CONF PORT` wrote its configuration; the port in cwd_port
# (empty, and false, if five tries found none).
cwd_start_tcp() {
	local p try
	cwd_port=
	for try in 1 2 3 4 5; do
		p=$((20000 + RANDOM % 40000))
		"$1" "$p"
		cwd_start 2>/dev/null || continue
		if grep -q "listening on 127.0.0.1:$p" "$(cwd_log)"; then cwd_port=$p; return 0; fi
		cwd_stop
	done
	return 1
}

# tls_ca DIR: a CA in DIR (ca-key.pem, ca-cert.pem), made with certtool.
tls_ca() {
	certtool --generate-privkey --outfile "$1/ca-key.pem" 2>/dev/null &&
	printf 'cn = clockwise test CA\nca\ncert_signing_key\nexpiration_days = 2\n' >"$1/ca.info" &&
	certtool --generate-self-signed --load-privkey "$1/ca-key.pem" --template "$1/ca.info" \
		--outfile "$1/ca-cert.pem" 2>/dev/null
}

# tls_signed CADIR KEY CERT ROLE: a key and a certificate for localhost
# the CA signed; ROLE tls_www_server or tls_www_client.
tls_signed() {
	certtool --generate-privkey --outfile "$2" 2>/dev/null &&
	printf 'organization = clockwise test\ncn = localhost\ndns_name = localhost\n%s\nencryption_key\nsigning_key\nexpiration_days = 2\n' \
		"$4" >"$2.info" &&
	certtool --generate-certificate --load-ca-certificate "$1/ca-cert.pem" \
		--load-ca-privkey "$1/ca-key.pem" --load-privkey "$2" --template "$2.info" \
		--outfile "$3" 2>/dev/null
}

cwd_stop() {
	local rc=0
	kill -TERM "$cwd_pid" && wait "$cwd_pid" || rc=$?
	cwd_pid=
	return $rc
}

cwd_kill9() {
	kill -KILL "$cwd_pid"
	wait "$cwd_pid" 2>/dev/null
	cwd_pid=
	return 0
}

cwd_wait_cut() {
	local rc=0
	if ! wait_for "the power cut" 20 eval '! kill -0 "$cwd_pid" 2>/dev/null'; then
		echo "no power cut with $1"
		kill -9 "$cwd_pid"
		rc=1
	fi
	wait "$cwd_pid" 2>/dev/null
	cwd_pid=
	return $rc
}

cwd_notify_listen() {
	python3 - "$1" "$2" <<'EOF_PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as f:
    while True:
        f.write(s.recv(4096).decode() + "\n")
EOF_PY
	cleanup_add "kill $! 2>/dev/null"
	wait_for "the notify socket" 20 test -S "$1"
}

cwd_uri() { echo "nbd+unix:///$1?socket=$cwd_sock"; }

# cwd_copy_image SHOW COPY: copy COPY of the partition whose
# `cwctl --json part show NAME --all` is SHOW, as its disks' files
# (cw_tmp/DISK.disk) hold it, block after block.
cwd_copy_image() {
	local bs blocks disk offset
	bs=$(jq .block_size <<<"$1")
	jq -r --argjson c "$2" '[.copy_runs[] | select(.copy == $c)] | sort_by(.first_block) |
		.[] | "\(.blocks) \(.disk) \(.offset)"' <<<"$1" |
	while read -r blocks disk offset; do
		dd if="$cw_tmp/$disk.disk" bs="$bs" skip=$((offset / bs)) count="$blocks" status=none
	done
}
