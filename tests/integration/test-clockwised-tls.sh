#!/bin/bash
# Description: NBD over TLS (NBD_OPT_STARTTLS).  A listener with
# tls = "require" answers every option before STARTTLS with
# NBD_REP_ERR_TLS_REQD and serves nbdinfo and qemu-img over TLS, with
# X.509 certificates (made here with certtool) and with pre-shared keys
# (psktool); a client with the wrong CA, the wrong key or an unknown user
# is refused; "on" serves both kinds of client, "off" offers no TLS.
# Over TCP (where libnbd verifies the server's certificate) the same
# client passes and one trusting another CA is refused.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires nbdinfo qemu-img qemu-io
if ! command -v certtool >/dev/null || ! command -v psktool >/dev/null; then
	echo "SKIP: GnuTLS's certtool and psktool are not installed (Debian package gnutls-bin)"
	rm -rf "$cw_tmp"
	trap - EXIT
	exit 77
fi
client=$top_builddir/tests/integration/nbd-proto-client

# ---- credentials: a CA, a server and a client certificate; PSK files
pki=$cw_tmp/pki
other=$cw_tmp/other-ca
mkdir -p "$pki" "$other" "$cw_tmp/client" "$cw_tmp/stranger"
check "a CA" tls_ca "$pki"
check "the server's certificate" tls_signed "$pki" "$pki/server-key.pem" "$pki/server-cert.pem" \
	tls_www_server
cp "$pki/ca-cert.pem" "$cw_tmp/client/"
check "a client certificate" tls_signed "$pki" "$cw_tmp/client/client-key.pem" \
	"$cw_tmp/client/client-cert.pem" tls_www_client
check "another CA" tls_ca "$other"
cp "$other/ca-cert.pem" "$cw_tmp/stranger/"
check "a PSK for alice" psktool -u alice -p "$cw_tmp/keys.psk"
mkdir -p "$cw_tmp/alice" "$cw_tmp/mallory"
cp "$cw_tmp/keys.psk" "$cw_tmp/alice/keys.psk"
check "another key for alice" psktool -u alice -p "$cw_tmp/mallory/keys.psk"
mkdir -p "$cw_tmp/bob"
check "a key for bob, whom the server does not know" psktool -u bob -p "$cw_tmp/bob/keys.psk"

check "pool" cwd_pool 64M a
check "partition" cwd_part vol 16M
tsock=$cw_tmp/tls.sock
osock=$cw_tmp/on.sock
conf() { # CREDENTIALS: three listeners, TLS off, required and offered
	cat >"$cwd_cfg" <<EOC
pool = "$cwd_db";
control_socket = "$cw_tmp/control";
log_level = "debug";
exports = { all = true; };
listen = {
	unix = ( "$cwd_sock", { path = "$tsock"; tls = "require"; },
		 { path = "$osock"; tls = "on"; } );
};
tls = { $1 };
EOC
}
x509_uri() { echo "nbds+unix:///vol?socket=$1&tls-certificates=$2&tls-hostname=localhost"; }
psk_uri() { echo "nbds+unix://${3:-alice}@/vol?socket=$1&tls-psk-file=$2/keys.psk"; }
qemu_x509() { # SOCKET DIR QEMU-IO-ARGS...
	local sock=$1 dir=$2
	shift 2
	qemu-io --object "tls-creds-x509,id=t0,dir=$dir,endpoint=client" \
		--image-opts "driver=nbd,server.type=unix,server.path=$sock,export=vol,tls-creds=t0,tls-hostname=localhost" \
		"$@"
}
qemu_psk() { # SOCKET DIR QEMU-IO-ARGS...
	local sock=$1 dir=$2
	shift 2
	qemu-io --object "tls-creds-psk,id=t0,dir=$dir,username=alice,endpoint=client" \
		--image-opts "driver=nbd,server.type=unix,server.path=$sock,export=vol,tls-creds=t0" "$@"
}
qio_ok() { "$@" >"$cw_tmp/qio.out" 2>&1 && grep -q 'bytes at offset' "$cw_tmp/qio.out" &&
	! grep -q 'failed' "$cw_tmp/qio.out"; }

# ---- certificates
conf "certificates = \"$pki\";"
cwd_start
check "the log names the TLS listeners" grep -q "listening on $tsock, TLS required" "$(cwd_log)"
check "required: the raw client meets TLS_REQD before STARTTLS" "$client" "$tsock" tls-required
expect_fail "required: nbdinfo without TLS is refused" nbdinfo --size "nbd+unix:///vol?socket=$tsock"
check "required: nbdinfo over TLS" test "$(nbdinfo --size "$(x509_uri "$tsock" "$pki")")" = 16777216
nbdinfo --json "$(x509_uri "$tsock" "$pki")" >"$cw_tmp/info.json"
check "nbdinfo says TLS" grep -q '"TLS": true' "$cw_tmp/info.json"
check "required: qemu-io writes and reads over TLS" qio_ok qemu_x509 "$tsock" "$cw_tmp/client" \
	-c 'write -P 0x5c 14M 1M' -c 'read -P 0x5c 14M 1M'
check "required: qemu-img info over TLS" qemu-img info --object \
	"tls-creds-x509,id=t0,dir=$cw_tmp/client,endpoint=client" --image-opts \
	"driver=nbd,server.type=unix,server.path=$tsock,export=vol,tls-creds=t0,tls-hostname=localhost"
# (libnbd checks the server's certificate only on TCP: qemu does here.)
expect_fail "a client trusting another CA is refused" qio_ok qemu_x509 "$tsock" "$cw_tmp/stranger" \
	-c 'read -P 0x5c 14M 1M'
# Many requests in flight both ways over TLS: nbdcopy there and back.
if command -v nbdcopy >/dev/null; then
	head -c 12M /dev/urandom >"$cw_tmp/data"
	check "nbdcopy to the export over TLS" nbdcopy "$cw_tmp/data" "$(x509_uri "$tsock" "$pki")"
	check "nbdcopy from the export over TLS" nbdcopy "$(x509_uri "$tsock" "$pki")" "$cw_tmp/back"
	check "the data came back" cmp -n 12582912 "$cw_tmp/data" "$cw_tmp/back"
fi
check "on: nbdinfo without TLS" test "$(nbdinfo --size "nbd+unix:///vol?socket=$osock")" = 16777216
check "on: nbdinfo over TLS" test "$(nbdinfo --size "$(x509_uri "$osock" "$pki")")" = 16777216
check "off: served in the clear" qio_ok qemu-io -f raw -c 'read -P 0x5c 14M 1M' "$(cwd_uri vol)"
expect_fail "off: a client that requires TLS is refused" nbdinfo --size "$(x509_uri "$cwd_sock" "$pki")"
check "stop" cwd_stop

# ---- verify_peer: only clients with a certificate of the CA
conf "certificates = \"$pki\"; verify_peer = true;"
cwd_start
check "verify_peer: a client certificate of the CA passes" qio_ok qemu_x509 "$tsock" \
	"$cw_tmp/client" -c 'read -P 0x5c 14M 1M'
expect_fail "verify_peer: a client without a certificate is refused" \
	nbdinfo --size "$(x509_uri "$tsock" "$pki")"
check "stop" cwd_stop

# ---- pre-shared keys
conf "psk = \"$cw_tmp/keys.psk\";"
cwd_start
check "psk: nbdinfo" test "$(nbdinfo --size "$(psk_uri "$tsock" "$cw_tmp/alice")")" = 16777216
check "psk: qemu-io" qio_ok qemu_psk "$tsock" "$cw_tmp/alice" -c 'read -P 0x5c 14M 1M'
expect_fail "psk: the wrong key is refused" nbdinfo --size "$(psk_uri "$tsock" "$cw_tmp/mallory")"
expect_fail "psk: an unknown user is refused" nbdinfo --size "$(psk_uri "$tsock" "$cw_tmp/bob" bob)"
expect_fail "psk: a client without TLS is refused" nbdinfo --size "nbd+unix:///vol?socket=$tsock"
check "the daemon logged the refusals" grep -q "TLS handshake" "$(cwd_log)"
check "still serving" test "$(nbdinfo --size "$(psk_uri "$tsock" "$cw_tmp/alice")")" = 16777216
check "stop" cwd_stop

# ---- TCP: a listener that requires TLS, where libnbd checks the
# server's certificate (it does not over unix sockets)
tcp_conf() { # PORT
	cat >"$cwd_cfg" <<EOC
pool = "$cwd_db";
control_socket = "$cw_tmp/control";
log_level = "debug";
listen = {
	unix = [ "$cwd_sock" ];
	tcp = ( { address = "127.0.0.1:$1"; tls = "require"; } );
};
tls = { certificates = "$pki"; };
access = { read_write = [ "*" ]; };
EOC
}
cwd_start_tcp tcp_conf
port=$cwd_port
check "a TCP listener that requires TLS" test -n "$port"
tcp_uri() { echo "nbds://localhost:$port/vol?tls-certificates=$1"; }
check "tcp: nbdinfo over TLS, the server's certificate verified" \
	test "$(nbdinfo --size "$(tcp_uri "$pki")")" = 16777216
expect_fail "tcp: a client trusting another CA is refused" nbdinfo --size "$(tcp_uri "$cw_tmp/stranger")"
expect_fail "tcp: in the clear is refused" nbdinfo --size "nbd://localhost:$port/vol"
check "tcp: qemu-io writes and reads over TLS" qio_ok qemu-io --object \
	"tls-creds-x509,id=t0,dir=$cw_tmp/client,endpoint=client" --image-opts \
	"driver=nbd,server.type=inet,server.host=localhost,server.port=$port,export=vol,tls-creds=t0" \
	-c 'write -P 0x3d 13M 1M' -c 'read -P 0x3d 13M 1M'
check "stop" cwd_stop

# ---- no credentials: a TLS listener is a configuration error
conf ""
expect_fail "TLS without credentials does not start" "$cwd_bin" -f -c "$cwd_cfg"
