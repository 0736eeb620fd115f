#!/bin/bash
# Description: clients that stall in TLS lock no one out.  One client
# keeps a dozen connections at STARTTLS, each with a TLS record header
# promising 512 bytes and 20 of them sent, and renews each one the daemon
# drops: more than the network's share of connections.  nbdinfo over TLS
# is still served (a client accepted over the limit that gets as far as
# an option after STARTTLS takes the place of the oldest connection stuck
# in its handshake).  And after the handshake, a client that sends part
# of a record and stops is closed after stall_timeout_s, where its reader
# used to wait for the rest for ever.
. "${top_srcdir:-.}/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/clockwised-lib.sh"
requires nbdinfo python3
if ! command -v certtool >/dev/null; then
	echo "SKIP: GnuTLS's certtool is not installed (Debian package gnutls-bin)"
	rm -rf "$cw_tmp"
	trap - EXIT
	exit 77
fi

pki=$cw_tmp/pki
mkdir -p "$pki"
check "a CA" tls_ca "$pki"
check "the server's certificate" tls_signed "$pki" "$pki/server-key.pem" "$pki/server-cert.pem" \
	tls_www_server
check "pool" cwd_pool 64M a
check "partition" cwd_part vol 16M

# The clients, by hand: the only way to stop in the middle of a record.
cat >"$cw_tmp/tlsclient.py" <<'EOF'
import select, socket, ssl, struct, sys, time

OPT_MAGIC = 0x49484156454F5054

def recvall(s, n):
    b = b''
    while len(b) < n:
        d = s.recv(n - len(b))
        if not d:
            raise EOFError
        b += d
    return b

def starttls(host, port):
    """A connection at STARTTLS: (socket, acknowledged?)."""
    s = socket.create_connection((host, port), timeout=10)
    recvall(s, 18)
    s.sendall(struct.pack('>I', 3) + struct.pack('>QII', OPT_MAGIC, 5, 0))
    _, _, typ, ln = struct.unpack('>QIII', recvall(s, 20))
    recvall(s, ln)
    return s, typ == 1

def stall(host, port, n, secs, ready):
    """n connections, each stopped in a TLS record; any dropped is renewed."""
    conns, acked, renewed = [], 0, 0
    end = time.monotonic() + secs
    while time.monotonic() < end:
        while len(conns) < n:
            try:
                s, ok = starttls(host, port)
            except (OSError, EOFError):
                time.sleep(0.01)
                continue
            if ok:
                acked += 1
                # A ClientHello's first 15 of 512 bytes.
                s.sendall(b'\x16\x03\x01\x02\x00' + b'\x01\x00\x01\xfc\x03\x03' +
                          b'\x5a' * 9)
            conns.append(s)
            renewed += 1
        if ready:
            open(ready, 'w').write('%d\n' % acked)
            ready = None
        r, _, _ = select.select(conns, [], [], 0.05)
        for s in r:
            try:
                d = s.recv(4096)
            except OSError:
                d = b''
            if not d:
                conns.remove(s)
                s.close()
    print('connections made %d, STARTTLS acknowledged %d' % (renewed, acked))

def partial_record(host, port, ca):
    """A proper TLS session and export, then part of a request's record:
    the seconds until the server closed the connection."""
    s, ok = starttls(host, port)
    assert ok
    ctx = ssl.create_default_context(cafile=ca)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    t = ctx.wrap_bio(inc, out, server_hostname='localhost')

    def flush():
        d = out.read()
        if d:
            s.sendall(d)

    def more():
        d = s.recv(65536)
        if not d:
            raise EOFError
        inc.write(d)

    while True:
        try:
            t.do_handshake()
            flush()
            break
        except ssl.SSLWantReadError:
            flush()
            more()

    def tread(n):
        b = b''
        while len(b) < n:
            try:
                b += t.read(n - len(b))
            except ssl.SSLWantReadError:
                more()
        return b

    name = b'vol'
    t.write(struct.pack('>QII', OPT_MAGIC, 7, 4 + len(name) + 2) +
            struct.pack('>I', len(name)) + name + struct.pack('>H', 0))
    flush()
    while True:
        _, _, typ, ln = struct.unpack('>QIII', tread(20))
        tread(ln)
        if typ == 1:
            break
        assert typ < 0x80000000, 'OPT_GO refused: %#x' % typ
    t.write(struct.pack('>IHHQQI', 0x25609513, 0, 0, 1, 0, 4096))	# READ
    rec = out.read()
    s.sendall(rec[:10])
    t0 = time.monotonic()
    s.settimeout(30)
    try:
        while s.recv(65536):
            pass
    except socket.timeout:
        print('still open after 30 s')
        return 1
    except OSError:
        pass
    print('closed %.1f s after the partial record' % (time.monotonic() - t0))
    return 0

if sys.argv[1] == 'stall':
    stall(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), sys.argv[6])
else:
    sys.exit(partial_record(sys.argv[2], int(sys.argv[3]), sys.argv[4]))
EOF

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
exports = { all = true; };
access = { read_write = [ "*" ]; };
limits = { connections = 16; connections_per_user = 8; stall_timeout_s = 2; };
EOC
}
cwd_start_tcp tcp_conf
port=$cwd_port
check "a TCP listener that requires TLS" test -n "$port"
uri="nbds://localhost:$port/vol?tls-certificates=$pki"
check "nbdinfo over TLS" test "$(nbdinfo --size "$uri")" = 16777216

# ---- a dozen connections stopped in a TLS record, renewed when dropped
python3 "$cw_tmp/tlsclient.py" stall 127.0.0.1 "$port" 12 30 "$cw_tmp/ready" \
	>"$cw_tmp/stall.out" 2>&1 &
staller=$!
cleanup_add "kill $staller 2>/dev/null"
check "the stalled connections are open" wait_for "the staller" 20 test -s "$cw_tmp/ready"
served=0
for i in 1 2 3 4 5; do
	[ "$(timeout 20 nbdinfo --size "$uri" 2>>"$cw_tmp/nbdinfo.err")" = 16777216 ] &&
		served=$((served + 1))
done
echo "nbdinfo beside the stalled connections: served $served of 5"
check "nbdinfo is served beside them" test "$served" -eq 5
kill "$staller" 2>/dev/null
wait "$staller" 2>/dev/null
cat "$cw_tmp/stall.out"

# ---- after the handshake: part of a record, then nothing
python3 "$cw_tmp/tlsclient.py" record 127.0.0.1 "$port" "$pki/ca-cert.pem" >"$cw_tmp/record.out" 2>&1
rc=$?
cat "$cw_tmp/record.out"
check "a partial record is dropped after stall_timeout_s" test "$rc" -eq 0
check "still serving" test "$(nbdinfo --size "$uri")" = 16777216
check "stop" cwd_stop
