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
	"$cwd_bin" -f -c "$cwd_cfg" "$@" 2>"$(cwd_log)" &
	cwd_pid=$!
	[ "$cwd_run" -gt 1 ] || cw_keep_logs "$cw_tmp/clockwised.[0-9]*.log"
	cleanup_add "kill -9 $cwd_pid 2>/dev/null"
	wait_for "clockwised to be ready" 30 cwd_is_ready || { cat "$(cwd_log)"; exit 1; }
	cwd_is_ready
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

cwd_uri() { echo "nbd+unix:///$1?socket=$cwd_sock"; }
