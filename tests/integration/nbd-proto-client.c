/*
 * nbd-proto-client — talks raw NBD to a server on a unix socket and checks
 * how it answers bad input: malformed handshakes, unknown options and
 * commands, out-of-range, misaligned and oversized requests.
 *
 *   nbd-proto-client SOCKET list        names every scenario
 *   nbd-proto-client SOCKET SCENARIO    runs one; exit 0 when the server
 *                                       answered as the protocol says
 *
 * It expects the exports test-nbd-protocol.sh sets up: "disk" (read-write,
 * 1 MiB, minimum block 512, maximum 64 KiB) and "ro" (read-only).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <clockwise/nbd.h>

#define DISK_SIZE (1u << 20)
#define DISK_MAX  65536u
#define NBD_EXT_CAP 4096

static const char *sock_path;
static char failure[512];

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(failure, sizeof(failure), fmt, ap);
	va_end(ap);
	return -1;
}

#define EXPECT(cond, ...) do { if (!(cond)) return fail(__VA_ARGS__); } while (0)
#define TRY(x) do { if ((x) < 0) return -1; } while (0)

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3]; }
static uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static void put32(uint8_t *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }
static void put16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = v & 0xff; }

static int dial(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 10 };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return fail("socket: %m");
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return fail("connect %s: %m", sock_path);
	}
	/* A server that hangs instead of answering fails the test. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static int put(int fd, const void *b, size_t n)
{
	const uint8_t *p = b;

	while (n > 0) {
		ssize_t r = send(fd, p, n, MSG_NOSIGNAL);

		if (r < 0)
			return fail("send: %m");
		p += r, n -= (size_t)r;
	}
	return 0;
}

static int get(int fd, void *b, size_t n)
{
	uint8_t *p = b;

	while (n > 0) {
		ssize_t r = recv(fd, p, n, 0);

		if (r == 0)
			return fail("server closed the connection early");
		if (r < 0)
			return fail("recv: %m");
		p += r, n -= (size_t)r;
	}
	return 0;
}

/* The server must close: EOF (or a reset) and no stray bytes, in time. */
static int expect_close(int fd)
{
	uint8_t b[256];
	ssize_t r;

	for (;;) {
		r = recv(fd, b, sizeof(b), 0);
		if (r == 0 || (r < 0 && errno == ECONNRESET))
			return 0;
		if (r < 0)
			return fail("server did not close the connection: %m");
		return fail("server sent %zd unexpected bytes instead of closing", r);
	}
}

/* Greeting, then our flags. */
static int greet(int fd, uint32_t cflags)
{
	uint8_t g[CW_NBD_GREETING_BYTES], f[4];
	int gflags;

	TRY(get(fd, g, sizeof(g)));
	gflags = cw_nbd_decode_greeting(g);
	EXPECT(gflags >= 0, "bad greeting");
	EXPECT(gflags & CW_NBD_FLAG_FIXED_NEWSTYLE, "server is not fixed newstyle");
	put32(f, cflags);
	return put(fd, f, sizeof(f));
}

static int send_opt(int fd, uint32_t option, const void *data, uint32_t len)
{
	uint8_t h[CW_NBD_OPTION_BYTES];

	cw_nbd_encode_option(h, option, len);
	TRY(put(fd, h, sizeof(h)));
	return len ? put(fd, data, len) : 0;
}

/* Reads one option reply; data (up to cap) goes to buf. */
static int get_rep(int fd, uint32_t option, struct cw_nbd_option_reply *rep, uint8_t *buf,
		   size_t cap)
{
	uint8_t h[CW_NBD_OPTION_REPLY_BYTES];

	TRY(get(fd, h, sizeof(h)));
	EXPECT(cw_nbd_decode_option_reply(h, rep) == 0, "bad option reply magic");
	EXPECT(rep->option == option, "reply to option %u, expected %u", rep->option, option);
	EXPECT(rep->length <= cap, "option reply of %u bytes", rep->length);
	return rep->length ? get(fd, buf, rep->length) : 0;
}

static int expect_rep(int fd, uint32_t option, uint32_t want)
{
	struct cw_nbd_option_reply rep;
	uint8_t buf[8192];

	TRY(get_rep(fd, option, &rep, buf, sizeof(buf)));
	EXPECT(rep.reply == want, "option %u: reply 0x%x, expected 0x%x", option, rep.reply, want);
	return 0;
}

static uint32_t go_payload(uint8_t *b, const char *name, bool block_size)
{
	uint32_t n = (uint32_t)strlen(name);

	put32(b, n);
	memcpy(b + 4, name, n);
	put16(b + 4 + n, block_size ? 1 : 0);
	put16(b + 6 + n, CW_NBD_INFO_BLOCK_SIZE);
	return 6 + n + (block_size ? 2 : 0);
}

static uint64_t export_size;	/* as the last open_export() was told */

/* A connection in transmission on export name. */
static int open_export(const char *name, bool structured, uint16_t *ret_eflags)
{
	struct cw_nbd_option_reply rep;
	uint8_t b[8192];
	uint32_t len;
	int fd = dial();

	if (fd < 0)
		return -1;
	if (greet(fd, CW_NBD_FLAG_C_FIXED_NEWSTYLE | CW_NBD_FLAG_C_NO_ZEROES) < 0)
		goto bad;
	if (structured && (send_opt(fd, CW_NBD_OPT_STRUCTURED_REPLY, NULL, 0) < 0 ||
			   expect_rep(fd, CW_NBD_OPT_STRUCTURED_REPLY, CW_NBD_REP_ACK) < 0))
		goto bad;
	len = go_payload(b, name, true);
	if (send_opt(fd, CW_NBD_OPT_GO, b, len) < 0)
		goto bad;
	for (;;) {
		if (get_rep(fd, CW_NBD_OPT_GO, &rep, b, sizeof(b)) < 0)
			goto bad;
		if (rep.reply == CW_NBD_REP_ACK)
			break;
		if (rep.reply != CW_NBD_REP_INFO) {
			fail("GO %s: reply 0x%x", name, rep.reply);
			goto bad;
		}
		if (be16(b) == CW_NBD_INFO_EXPORT)
			export_size = (uint64_t)be32(b + 2) << 32 | be32(b + 6);
		if (be16(b) == CW_NBD_INFO_EXPORT && ret_eflags)
			*ret_eflags = be16(b + 10);
	}
	return fd;
bad:
	close(fd);
	return -1;
}

static int send_req(int fd, uint16_t type, uint16_t flags, uint64_t cookie, uint64_t off,
		    uint32_t len, const void *payload)
{
	struct cw_nbd_request r = { .flags = flags, .type = type, .cookie = cookie,
				    .offset = off, .length = len };
	uint8_t h[CW_NBD_REQUEST_BYTES];

	cw_nbd_encode_request(h, &r);
	TRY(put(fd, h, sizeof(h)));
	return payload ? put(fd, payload, len) : 0;
}

/*
 * Reads one whole reply (all chunks) for cookie.  error gets the NBD
 * error (0 on success); read data, if any, goes to data.
 */
static int get_reply(int fd, uint64_t cookie, uint32_t *error, uint8_t *data, uint32_t len,
		     uint64_t off)
{
	for (;;) {
		uint8_t h[CW_NBD_CHUNK_BYTES];
		struct cw_nbd_reply r;
		int n;

		TRY(get(fd, h, CW_NBD_SIMPLE_REPLY_BYTES));
		n = cw_nbd_decode_reply(h, CW_NBD_SIMPLE_REPLY_BYTES, &r);
		if (n == -EAGAIN) {
			TRY(get(fd, h + CW_NBD_SIMPLE_REPLY_BYTES, 4));
			n = cw_nbd_decode_reply(h, sizeof(h), &r);
		}
		EXPECT(n > 0, "bad reply magic");
		EXPECT(r.cookie == cookie, "reply cookie %llu, expected %llu",
		       (unsigned long long)r.cookie, (unsigned long long)cookie);
		if (!r.structured) {
			*error = r.error;
			if (!r.error && data)
				TRY(get(fd, data, len));
			return 0;
		}
		if (r.type == CW_NBD_REPLY_TYPE_OFFSET_DATA) {
			uint8_t o[8];
			uint64_t at;

			EXPECT(r.length >= 9 && data, "bad OFFSET_DATA chunk");
			TRY(get(fd, o, 8));
			at = (uint64_t)be32(o) << 32 | be32(o + 4);
			EXPECT(at >= off && at - off + (r.length - 8) <= len,
			       "data chunk outside the request");
			TRY(get(fd, data + (at - off), r.length - 8));
			*error = 0;
		} else if (r.type == CW_NBD_REPLY_TYPE_ERROR) {
			uint8_t e[6 + 4096];

			EXPECT(r.length >= 6 && r.length <= sizeof(e), "bad ERROR chunk");
			TRY(get(fd, e, r.length));
			*error = be32(e);
			EXPECT(*error != 0, "ERROR chunk with error 0");
			EXPECT(be16(e + 4) <= r.length - 6, "ERROR message overflows the chunk");
		} else {
			EXPECT(r.type == CW_NBD_REPLY_TYPE_NONE && r.length == 0,
			       "unexpected chunk type %u", r.type);
			*error = 0;
		}
		if (r.flags & CW_NBD_REPLY_FLAG_DONE)
			return 0;
	}
}

static int expect_err(int fd, uint64_t cookie, uint32_t want)
{
	uint32_t err;

	/* Not for successful reads: their data is not expected here. */
	TRY(get_reply(fd, cookie, &err, NULL, 0, 0));
	EXPECT(err == want, "request %llu: error %u, expected %u", (unsigned long long)cookie,
	       err, want);
	return 0;
}

/* Reads the one BLOCK_STATUS reply for cookie: its descriptors go to
 * ext (up to cap), their number to *n; an error reply sets *error. */
static int get_block_status(int fd, uint64_t cookie, uint32_t *error,
			    struct cw_nbd_extent *ext, uint32_t cap, uint32_t *n)
{
	uint8_t h[CW_NBD_CHUNK_BYTES], b[8];
	struct cw_nbd_reply r;
	uint32_t i;

	*n = 0;
	TRY(get(fd, h, sizeof(h)));
	EXPECT(cw_nbd_decode_reply(h, sizeof(h), &r) == (int)sizeof(h), "not a chunk");
	EXPECT(r.cookie == cookie, "reply cookie %llu", (unsigned long long)r.cookie);
	EXPECT(r.flags & CW_NBD_REPLY_FLAG_DONE, "BLOCK_STATUS in more than one chunk");
	if (r.type == CW_NBD_REPLY_TYPE_ERROR) {
		uint8_t e[6 + 4096];

		EXPECT(r.length >= 6 && r.length <= sizeof(e), "bad ERROR chunk");
		TRY(get(fd, e, r.length));
		*error = be32(e);
		return 0;
	}
	EXPECT(r.type == CW_NBD_REPLY_TYPE_BLOCK_STATUS, "chunk type %u", r.type);
	EXPECT(r.length >= 12 && (r.length - 4) % 8 == 0, "BLOCK_STATUS of %u bytes", r.length);
	EXPECT((r.length - 4) / 8 <= cap, "%u descriptors", (r.length - 4) / 8);
	TRY(get(fd, b, 4));
	EXPECT(be32(b) == CW_NBD_META_ID_ALLOCATION, "context id %u", be32(b));
	for (i = 0; i < (r.length - 4) / 8; i++) {
		TRY(get(fd, b, 8));
		ext[i].length = be32(b);
		ext[i].status = be32(b + 4);
		EXPECT(ext[i].length > 0, "a descriptor of length 0");
		EXPECT(!(ext[i].status & ~(CW_NBD_STATE_HOLE | CW_NBD_STATE_ZERO)),
		       "status 0x%x", ext[i].status);
	}
	*n = i;
	*error = 0;
	return 0;
}

/* Asks for base:allocation on export name with LIST or SET; returns
 * the number of contexts the server named (each must be base:allocation
 * with its id) or -1. */
static int meta_context(int fd, uint32_t option, const char *name, const char *query)
{
	struct cw_nbd_buf q = { 0 };
	struct cw_nbd_option_reply rep;
	uint8_t b[8192];
	int n = 0, r;

	r = cw_nbd_encode_meta_query(&q, name, query ? &query : NULL, query ? 1 : 0);
	if (r == 0)
		r = send_opt(fd, option, q.data, (uint32_t)q.len);
	free(q.data);
	TRY(r);
	for (;;) {
		TRY(get_rep(fd, option, &rep, b, sizeof(b)));
		if (rep.reply == CW_NBD_REP_ACK)
			return n;
		EXPECT(rep.reply == CW_NBD_REP_META_CONTEXT, "meta context reply 0x%x", rep.reply);
		EXPECT(rep.length == 4 + strlen(CW_NBD_META_BASE_ALLOCATION) &&
		       be32(b) == CW_NBD_META_ID_ALLOCATION &&
		       memcmp(b + 4, CW_NBD_META_BASE_ALLOCATION, rep.length - 4) == 0,
		       "a context other than base:allocation");
		n++;
	}
}

/* ---- scenarios: handshake ---- */

static int s_bad_client_flags(void)
{
	int fd = dial();

	TRY(fd);
	TRY(greet(fd, CW_NBD_FLAG_C_FIXED_NEWSTYLE | 0x100));
	return expect_close(fd);
}

static int s_not_fixed_newstyle(void)
{
	int fd = dial();

	TRY(fd);
	TRY(greet(fd, 0));
	return expect_close(fd);
}

static int s_bad_option_magic(void)
{
	uint8_t h[CW_NBD_OPTION_BYTES];
	int fd = dial();

	TRY(fd);
	TRY(greet(fd, CW_NBD_FLAG_C_FIXED_NEWSTYLE));
	cw_nbd_encode_option(h, CW_NBD_OPT_LIST, 0);
	h[7] ^= 0xff;
	TRY(put(fd, h, sizeof(h)));
	return expect_close(fd);
}

static int s_unknown_options(void)
{
	uint32_t opts[] = { 12345, CW_NBD_OPT_STARTTLS, CW_NBD_OPT_EXTENDED_HEADERS, 0 };
	struct cw_nbd_option_reply rep;
	uint8_t b[8192];
	unsigned i, servers = 0;
	int fd = dial();

	TRY(fd);
	TRY(greet(fd, CW_NBD_FLAG_C_FIXED_NEWSTYLE));
	for (i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		TRY(send_opt(fd, opts[i], "abc", 3));
		TRY(expect_rep(fd, opts[i], CW_NBD_REP_ERR_UNSUP));
	}
	/* Known options with malformed data. */
	TRY(send_opt(fd, CW_NBD_OPT_LIST_META_CONTEXT, "abc", 3));
	TRY(expect_rep(fd, CW_NBD_OPT_LIST_META_CONTEXT, CW_NBD_REP_ERR_INVALID));
	TRY(send_opt(fd, CW_NBD_OPT_SET_META_CONTEXT, "abc", 3));
	TRY(expect_rep(fd, CW_NBD_OPT_SET_META_CONTEXT, CW_NBD_REP_ERR_INVALID));
	/* The connection is still good: LIST works and shows both exports. */
	TRY(send_opt(fd, CW_NBD_OPT_LIST, NULL, 0));
	for (;;) {
		TRY(get_rep(fd, CW_NBD_OPT_LIST, &rep, b, sizeof(b)));
		if (rep.reply == CW_NBD_REP_ACK)
			break;
		EXPECT(rep.reply == CW_NBD_REP_SERVER, "LIST reply 0x%x", rep.reply);
		servers++;
	}
	EXPECT(servers == 2, "LIST showed %u exports, expected 2", servers);
	TRY(send_opt(fd, CW_NBD_OPT_LIST, "x", 1));
	TRY(expect_rep(fd, CW_NBD_OPT_LIST, CW_NBD_REP_ERR_INVALID));
	TRY(send_opt(fd, CW_NBD_OPT_ABORT, NULL, 0));
	TRY(expect_rep(fd, CW_NBD_OPT_ABORT, CW_NBD_REP_ACK));
	return expect_close(fd);
}

static int s_malformed_go(void)
{
	uint8_t b[64];
	uint32_t len;
	int fd = dial();

	TRY(fd);
	TRY(greet(fd, CW_NBD_FLAG_C_FIXED_NEWSTYLE));
	TRY(send_opt(fd, CW_NBD_OPT_GO, "\0\0", 2));
	TRY(expect_rep(fd, CW_NBD_OPT_GO, CW_NBD_REP_ERR_INVALID));
	len = go_payload(b, "disk", true);
	put32(b, 200);		/* name longer than the option */
	TRY(send_opt(fd, CW_NBD_OPT_GO, b, len));
	TRY(expect_rep(fd, CW_NBD_OPT_GO, CW_NBD_REP_ERR_INVALID));
	len = go_payload(b, "nosuch", true);
	TRY(send_opt(fd, CW_NBD_OPT_GO, b, len));
	TRY(expect_rep(fd, CW_NBD_OPT_GO, CW_NBD_REP_ERR_UNKNOWN));
	/* disk needs 512-byte alignment: a client that does not ask is
	 * told the block sizes anyway, with a minimum of 1. */
	len = go_payload(b, "disk", false);
	TRY(send_opt(fd, CW_NBD_OPT_INFO, b, len));
	TRY(expect_rep(fd, CW_NBD_OPT_INFO, CW_NBD_REP_INFO));
	{
		struct cw_nbd_option_reply rep;
		uint8_t info[64];

		TRY(get_rep(fd, CW_NBD_OPT_INFO, &rep, info, sizeof(info)));
		EXPECT(rep.reply == CW_NBD_REP_INFO && rep.length == 14 &&
		       be16(info) == CW_NBD_INFO_BLOCK_SIZE, "no NBD_INFO_BLOCK_SIZE unasked");
		EXPECT(be32(info + 2) == 1, "minimum block %u told to a client that did not ask",
		       be32(info + 2));
	}
	TRY(expect_rep(fd, CW_NBD_OPT_INFO, CW_NBD_REP_ACK));
	TRY(send_opt(fd, CW_NBD_OPT_STRUCTURED_REPLY, "x", 1));
	TRY(expect_rep(fd, CW_NBD_OPT_STRUCTURED_REPLY, CW_NBD_REP_ERR_INVALID));
	/* And after all that, a good GO still enters transmission. */
	len = go_payload(b, "disk", true);
	TRY(send_opt(fd, CW_NBD_OPT_GO, b, len));
	TRY(expect_rep(fd, CW_NBD_OPT_GO, CW_NBD_REP_INFO));
	TRY(expect_rep(fd, CW_NBD_OPT_GO, CW_NBD_REP_INFO));
	TRY(expect_rep(fd, CW_NBD_OPT_GO, CW_NBD_REP_ACK));
	TRY(send_req(fd, CW_NBD_CMD_DISC, 0, 1, 0, 0, NULL));
	return expect_close(fd);
}

static int s_too_big_option(void)
{
	static uint8_t junk[100000];
	uint8_t h[CW_NBD_OPTION_BYTES];
	int fd = dial();

	TRY(fd);
	TRY(greet(fd, CW_NBD_FLAG_C_FIXED_NEWSTYLE));
	TRY(send_opt(fd, CW_NBD_OPT_INFO, junk, sizeof(junk)));
	TRY(expect_rep(fd, CW_NBD_OPT_INFO, CW_NBD_REP_ERR_TOO_BIG));
	TRY(send_opt(fd, CW_NBD_OPT_LIST, NULL, 0));
	TRY(expect_rep(fd, CW_NBD_OPT_LIST, CW_NBD_REP_SERVER));
	TRY(expect_rep(fd, CW_NBD_OPT_LIST, CW_NBD_REP_SERVER));
	TRY(expect_rep(fd, CW_NBD_OPT_LIST, CW_NBD_REP_ACK));
	/* 2 GiB of option data is not worth reading: the server hangs up. */
	cw_nbd_encode_option(h, CW_NBD_OPT_INFO, UINT32_C(1) << 31);
	TRY(put(fd, h, sizeof(h)));
	return expect_close(fd);
}

static int s_export_name_unknown(void)
{
	int fd = dial();

	TRY(fd);
	TRY(greet(fd, CW_NBD_FLAG_C_FIXED_NEWSTYLE));
	TRY(send_opt(fd, CW_NBD_OPT_EXPORT_NAME, "nosuch", 6));
	return expect_close(fd);
}

static int s_export_name(void)
{
	uint8_t b[10 + 124], zero[124] = { 0 }, data[512];
	uint32_t err;
	int fd = dial();

	TRY(fd);
	TRY(greet(fd, CW_NBD_FLAG_C_FIXED_NEWSTYLE));
	TRY(send_opt(fd, CW_NBD_OPT_EXPORT_NAME, "ro", 2));
	TRY(get(fd, b, sizeof(b)));
	EXPECT(be16(b + 8) & CW_NBD_FLAG_READ_ONLY, "ro is not read-only");
	EXPECT(memcmp(b + 10, zero, 124) == 0, "the 124 reserved bytes are not zero");
	TRY(send_req(fd, CW_NBD_CMD_READ, 0, 1, 0, 512, NULL));
	TRY(get_reply(fd, 1, &err, data, sizeof(data), 0));
	EXPECT(err == 0, "read failed: %u", err);
	TRY(send_req(fd, CW_NBD_CMD_DISC, 0, 2, 0, 0, NULL));
	return expect_close(fd);
}

static int s_idle_client_others_served(void)
{
	uint8_t g[CW_NBD_GREETING_BYTES];
	int idle = dial(), fd;

	/* One client sits in the handshake saying nothing... */
	TRY(idle);
	TRY(get(idle, g, sizeof(g)));
	/* ...while another does its work. */
	fd = open_export("disk", true, NULL);
	TRY(fd);
	TRY(send_req(fd, CW_NBD_CMD_FLUSH, 0, 1, 0, 0, NULL));
	TRY(expect_err(fd, 1, 0));
	TRY(send_req(fd, CW_NBD_CMD_DISC, 0, 2, 0, 0, NULL));
	TRY(expect_close(fd));
	close(idle);
	return 0;
}

/*
 * base:allocation: listed, set only after structured replies, and then
 * BLOCK_STATUS answers in one chunk whose descriptors lie inside the
 * request (one with REQ_ONE); CACHE and FAST_ZERO work where offered.
 */
static int s_block_status(void)
{
	const char *name = getenv("NBD_EXPORT") ? getenv("NBD_EXPORT") : "disk";
	struct cw_nbd_extent ext[NBD_EXT_CAP];
	struct cw_nbd_option_reply rep;
	uint64_t size = 0, sum = 0;
	uint16_t eflags = 0;
	uint32_t err, n, i, len;
	uint8_t b[8192];
	int fd = dial();

	TRY(fd);
	TRY(greet(fd, CW_NBD_FLAG_C_FIXED_NEWSTYLE | CW_NBD_FLAG_C_NO_ZEROES));
	EXPECT(meta_context(fd, CW_NBD_OPT_LIST_META_CONTEXT, name, NULL) == 1,
	       "LIST did not name base:allocation");
	EXPECT(meta_context(fd, CW_NBD_OPT_LIST_META_CONTEXT, name, "base:") == 1,
	       "LIST base: did not name base:allocation");
	TRY(send_opt(fd, CW_NBD_OPT_SET_META_CONTEXT, NULL, 0));
	TRY(expect_rep(fd, CW_NBD_OPT_SET_META_CONTEXT, CW_NBD_REP_ERR_INVALID));
	TRY(send_opt(fd, CW_NBD_OPT_STRUCTURED_REPLY, NULL, 0));
	TRY(expect_rep(fd, CW_NBD_OPT_STRUCTURED_REPLY, CW_NBD_REP_ACK));
	EXPECT(meta_context(fd, CW_NBD_OPT_SET_META_CONTEXT, name, "qemu:nosuch") == 0,
	       "SET chose an unknown context");
	EXPECT(meta_context(fd, CW_NBD_OPT_SET_META_CONTEXT, name,
			    CW_NBD_META_BASE_ALLOCATION) == 1, "SET did not choose base:allocation");
	len = go_payload(b, name, true);
	TRY(send_opt(fd, CW_NBD_OPT_GO, b, len));
	for (;;) {
		TRY(get_rep(fd, CW_NBD_OPT_GO, &rep, b, sizeof(b)));
		if (rep.reply == CW_NBD_REP_ACK)
			break;
		EXPECT(rep.reply == CW_NBD_REP_INFO, "GO: reply 0x%x", rep.reply);
		if (be16(b) == CW_NBD_INFO_EXPORT) {
			size = (uint64_t)be32(b + 2) << 32 | be32(b + 6);
			eflags = be16(b + 10);
		}
	}
	EXPECT(size >= 4096, "export of %llu bytes", (unsigned long long)size);
	len = size > UINT32_MAX - 4095 ? UINT32_MAX - 4095 : (uint32_t)size;
	TRY(send_req(fd, CW_NBD_CMD_BLOCK_STATUS, 0, 1, 0, len, NULL));
	TRY(get_block_status(fd, 1, &err, ext, NBD_EXT_CAP, &n));
	EXPECT(err == 0 && n > 0, "BLOCK_STATUS failed: %u", err);
	for (i = 0; i < n; i++)
		sum += ext[i].length;
	EXPECT(sum <= len, "descriptors cover %llu bytes of %u", (unsigned long long)sum, len);
	TRY(send_req(fd, CW_NBD_CMD_BLOCK_STATUS, CW_NBD_CMD_FLAG_REQ_ONE, 2, 0, len, NULL));
	TRY(get_block_status(fd, 2, &err, ext, NBD_EXT_CAP, &n));
	EXPECT(err == 0 && n == 1, "REQ_ONE: error %u, %u descriptors", err, n);
	TRY(send_req(fd, CW_NBD_CMD_BLOCK_STATUS, CW_NBD_CMD_FLAG_DF, 3, 0, 4096, NULL));
	TRY(get_block_status(fd, 3, &err, ext, NBD_EXT_CAP, &n));
	EXPECT(err == CW_NBD_EINVAL, "BLOCK_STATUS with DF: error %u", err);
	TRY(send_req(fd, CW_NBD_CMD_BLOCK_STATUS, 0, 4, size - 4096, 8192, NULL));
	TRY(get_block_status(fd, 4, &err, ext, NBD_EXT_CAP, &n));
	EXPECT(err == CW_NBD_EINVAL, "BLOCK_STATUS past the end: error %u", err);
	if (eflags & CW_NBD_FLAG_SEND_CACHE) {
		TRY(send_req(fd, CW_NBD_CMD_CACHE, 0, 5, 0, 4096, NULL));
		TRY(expect_err(fd, 5, 0));
	}
	if ((eflags & CW_NBD_FLAG_SEND_FAST_ZERO) && !(eflags & CW_NBD_FLAG_READ_ONLY)) {
		/* Fast or refused at once: never an other error. */
		TRY(send_req(fd, CW_NBD_CMD_WRITE_ZEROES, CW_NBD_CMD_FLAG_FAST_ZERO, 6, 0, 4096,
			     NULL));
		TRY(get_reply(fd, 6, &err, NULL, 0, 0));
		EXPECT(err == 0 || err == CW_NBD_ENOTSUP, "FAST_ZERO: error %u", err);
	}
	TRY(send_req(fd, CW_NBD_CMD_DISC, 0, 7, 0, 0, NULL));
	return expect_close(fd);
}

/* A listener that requires TLS: before STARTTLS every option but ABORT
 * gets NBD_REP_ERR_TLS_REQD, STARTTLS with data is invalid, and
 * EXPORT_NAME (which has no error reply) closes. */
static int s_tls_required(void)
{
	uint32_t opts[] = { CW_NBD_OPT_LIST, CW_NBD_OPT_STRUCTURED_REPLY, CW_NBD_OPT_INFO,
			    CW_NBD_OPT_GO, CW_NBD_OPT_LIST_META_CONTEXT, 12345 };
	uint8_t b[64];
	uint32_t len = go_payload(b, "vol", true);
	unsigned i;
	int fd = dial();

	TRY(fd);
	TRY(greet(fd, CW_NBD_FLAG_C_FIXED_NEWSTYLE | CW_NBD_FLAG_C_NO_ZEROES));
	for (i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		bool go = opts[i] == CW_NBD_OPT_GO || opts[i] == CW_NBD_OPT_INFO;

		TRY(send_opt(fd, opts[i], go ? b : NULL, go ? len : 0));
		TRY(expect_rep(fd, opts[i], CW_NBD_REP_ERR_TLS_REQD));
	}
	TRY(send_opt(fd, CW_NBD_OPT_STARTTLS, "x", 1));
	TRY(expect_rep(fd, CW_NBD_OPT_STARTTLS, CW_NBD_REP_ERR_INVALID));
	TRY(send_opt(fd, CW_NBD_OPT_ABORT, NULL, 0));
	TRY(expect_rep(fd, CW_NBD_OPT_ABORT, CW_NBD_REP_ACK));
	TRY(expect_close(fd));
	close(fd);
	fd = dial();
	TRY(fd);
	TRY(greet(fd, CW_NBD_FLAG_C_FIXED_NEWSTYLE | CW_NBD_FLAG_C_NO_ZEROES));
	TRY(send_opt(fd, CW_NBD_OPT_EXPORT_NAME, "vol", 3));
	return expect_close(fd);
}

/* ---- scenarios: transmission ---- */

static int bad_requests(bool structured)
{
	uint8_t w[DISK_MAX], r[DISK_MAX];
	uint16_t eflags = 0;
	uint32_t err;
	unsigned i;
	int fd = open_export("disk", structured, &eflags);

	TRY(fd);
	EXPECT(eflags & CW_NBD_FLAG_SEND_FLUSH, "flush not offered");
	EXPECT(eflags & CW_NBD_FLAG_SEND_FUA, "FUA not offered");
	EXPECT(eflags & CW_NBD_FLAG_CAN_MULTI_CONN, "multi-conn not offered for a file");
	for (i = 0; i < sizeof(w); i++)
		w[i] = (uint8_t)(i * 7 + structured);

	TRY(send_req(fd, 99, 0, 10, 0, 512, NULL));			/* unknown command */
	TRY(expect_err(fd, 10, CW_NBD_EINVAL));
	TRY(send_req(fd, CW_NBD_CMD_BLOCK_STATUS, 0, 11, 0, 512, NULL));	/* not negotiated */
	TRY(expect_err(fd, 11, CW_NBD_EINVAL));
	TRY(send_req(fd, CW_NBD_CMD_READ, 0, 12, DISK_SIZE, 512, NULL));	/* past the end */
	TRY(expect_err(fd, 12, CW_NBD_EINVAL));
	TRY(send_req(fd, CW_NBD_CMD_READ, 0, 13, UINT64_MAX - 511, 1024, NULL)); /* wraps */
	TRY(expect_err(fd, 13, CW_NBD_EINVAL));
	/* A refused write's payload is consumed: the stream stays framed. */
	TRY(send_req(fd, CW_NBD_CMD_WRITE, 0, 14, DISK_SIZE - 512, 1024, w));
	TRY(expect_err(fd, 14, CW_NBD_ENOSPC));
	TRY(send_req(fd, CW_NBD_CMD_WRITE, 0, 15, 100, 512, w));		/* misaligned */
	TRY(expect_err(fd, 15, CW_NBD_EINVAL));
	TRY(send_req(fd, CW_NBD_CMD_WRITE, 0x40, 16, 0, 512, w));		/* bad flag */
	TRY(expect_err(fd, 16, CW_NBD_EINVAL));
	TRY(send_req(fd, CW_NBD_CMD_READ, 0, 17, 0, 0, NULL));			/* zero length */
	TRY(expect_err(fd, 17, CW_NBD_EINVAL));
	TRY(send_req(fd, CW_NBD_CMD_READ, 0, 18, 0, DISK_MAX + 512, NULL));	/* oversized */
	TRY(expect_err(fd, 18, CW_NBD_EINVAL));
	if (structured) {	/* ...and unfragmented: too long for one chunk */
		TRY(send_req(fd, CW_NBD_CMD_READ, CW_NBD_CMD_FLAG_DF, 118, 0, DISK_MAX + 512,
			     NULL));
		TRY(expect_err(fd, 118, CW_NBD_EOVERFLOW));
	}
	TRY(send_req(fd, CW_NBD_CMD_TRIM, 0, 119, DISK_SIZE - 512, 1024, NULL));	/* past end */
	TRY(expect_err(fd, 119, CW_NBD_EINVAL));
	TRY(send_req(fd, CW_NBD_CMD_FLUSH, 0, 19, 512, 0, NULL));		/* ranged flush */
	TRY(expect_err(fd, 19, CW_NBD_EINVAL));

	/* Nothing of the refused writes landed; a good write does. */
	TRY(send_req(fd, CW_NBD_CMD_READ, 0, 20, DISK_SIZE - 512, 512, NULL));
	TRY(get_reply(fd, 20, &err, r, 512, DISK_SIZE - 512));
	EXPECT(err == 0, "read failed");
	EXPECT(memcmp(r, w, 512) != 0, "a refused write reached the disk");
	TRY(send_req(fd, CW_NBD_CMD_WRITE, CW_NBD_CMD_FLAG_FUA, 21, 4096, DISK_MAX, w));
	TRY(expect_err(fd, 21, 0));
	TRY(send_req(fd, CW_NBD_CMD_READ, 0, 22, 4096, DISK_MAX, NULL));
	TRY(get_reply(fd, 22, &err, r, DISK_MAX, 4096));
	EXPECT(err == 0 && memcmp(r, w, DISK_MAX) == 0, "read back differs from what was written");
	TRY(send_req(fd, CW_NBD_CMD_WRITE_ZEROES, CW_NBD_CMD_FLAG_NO_HOLE, 23, 4096, 1024, NULL));
	TRY(expect_err(fd, 23, 0));
	TRY(send_req(fd, CW_NBD_CMD_READ, 0, 24, 4096, 2048, NULL));
	TRY(get_reply(fd, 24, &err, r, 2048, 4096));
	for (i = 0; i < 1024; i++)
		EXPECT(r[i] == 0, "WRITE_ZEROES left byte %u = %u", i, r[i]);
	EXPECT(memcmp(r + 1024, w + 1024, 1024) == 0, "WRITE_ZEROES went past its range");
	TRY(send_req(fd, CW_NBD_CMD_TRIM, 0, 25, 8192, 4096, NULL));
	TRY(expect_err(fd, 25, 0));
	TRY(send_req(fd, CW_NBD_CMD_FLUSH, 0, 26, 0, 0, NULL));
	TRY(expect_err(fd, 26, 0));
	TRY(send_req(fd, CW_NBD_CMD_DISC, 0, 27, 0, 0, NULL));
	return expect_close(fd);
}

static int s_bad_requests_simple(void) { return bad_requests(false); }
static int s_bad_requests_structured(void) { return bad_requests(true); }

static int s_read_only(void)
{
	uint8_t w[512] = { 1 };
	uint16_t eflags = 0;
	uint32_t err;
	int fd = open_export("ro", false, &eflags);

	TRY(fd);
	EXPECT(eflags & CW_NBD_FLAG_READ_ONLY, "ro is not advertised read-only");
	TRY(send_req(fd, CW_NBD_CMD_WRITE, 0, 1, 0, 512, w));
	TRY(expect_err(fd, 1, CW_NBD_EPERM));
	TRY(send_req(fd, CW_NBD_CMD_WRITE_ZEROES, 0, 2, 0, 512, NULL));
	TRY(expect_err(fd, 2, CW_NBD_EINVAL));	/* not offered on a read-only export */
	TRY(send_req(fd, CW_NBD_CMD_READ, 0, 3, 0, 512, NULL));
	TRY(get_reply(fd, 3, &err, w, sizeof(w), 0));
	EXPECT(err == 0, "read of a read-only export failed: %u", err);
	TRY(send_req(fd, CW_NBD_CMD_DISC, 0, 4, 0, 0, NULL));
	return expect_close(fd);
}

static int s_oversized_write_closes(void)
{
	int fd = open_export("disk", false, NULL);

	TRY(fd);
	TRY(send_req(fd, CW_NBD_CMD_WRITE, 0, 1, 0, UINT32_C(1) << 30, NULL));
	return expect_close(fd);
}

static int s_bad_request_magic_closes(void)
{
	uint8_t h[CW_NBD_REQUEST_BYTES] = { 0x12, 0x34 };
	int fd = open_export("disk", true, NULL);

	TRY(fd);
	TRY(put(fd, h, sizeof(h)));
	return expect_close(fd);
}

/* DISC after a pipeline: every request in flight is answered first. */
static int s_disc_drains(void)
{
	static uint8_t r[DISK_MAX];
	uint64_t seen = 0;
	unsigned i;
	int fd = open_export("disk", false, NULL);

	TRY(fd);
	for (i = 0; i < 32; i++)
		TRY(send_req(fd, CW_NBD_CMD_READ, 0, i, (uint64_t)i * 4096, 4096, NULL));
	TRY(send_req(fd, CW_NBD_CMD_DISC, 0, 99, 0, 0, NULL));
	for (i = 0; i < 32; i++) {
		uint8_t h[CW_NBD_SIMPLE_REPLY_BYTES];
		struct cw_nbd_reply rep;

		TRY(get(fd, h, sizeof(h)));
		EXPECT(cw_nbd_decode_reply(h, sizeof(h), &rep) == 16 && rep.error == 0 &&
		       rep.cookie < 32, "bad reply in the pipeline");
		EXPECT(!(seen & (UINT64_C(1) << rep.cookie)), "cookie answered twice");
		seen |= UINT64_C(1) << rep.cookie;
		TRY(get(fd, r, 4096));
	}
	EXPECT(seen == 0xffffffffu, "not every request was answered");
	return expect_close(fd);
}

/* A client that sends a long pipeline before it reads a reply: the
 * socket fills, and whoever was sending replies must not lose, repeat or
 * tear one when it hands the rest on.  Every reply carries its data. */
static int s_full_socket(void)
{
	enum { N = 256, PER = DISK_MAX };
	static uint8_t ref[16][PER], r[PER];
	unsigned seen[N] = { 0 }, i;
	uint32_t err;
	int fd = open_export("disk", false, NULL);

	TRY(fd);
	for (i = 0; i < 16; i++) {
		TRY(send_req(fd, CW_NBD_CMD_READ, 0, i, (uint64_t)i * PER, PER, NULL));
		TRY(get_reply(fd, i, &err, ref[i], PER, (uint64_t)i * PER));
		EXPECT(err == 0, "reference read %u failed: %u", i, err);
	}
	for (i = 0; i < N; i++)
		TRY(send_req(fd, CW_NBD_CMD_READ, 0, 1000 + i, (uint64_t)(i % 16) * PER, PER,
			     NULL));
	for (i = 0; i < N; i++) {
		uint8_t h[CW_NBD_SIMPLE_REPLY_BYTES];
		struct cw_nbd_reply rep;
		unsigned k;

		TRY(get(fd, h, sizeof(h)));
		EXPECT(cw_nbd_decode_reply(h, sizeof(h), &rep) == 16 && rep.error == 0 &&
		       rep.cookie >= 1000 && rep.cookie < 1000 + N, "bad reply %u in the pipeline",
		       i);
		k = (unsigned)(rep.cookie - 1000);
		EXPECT(!seen[k]++, "cookie %u answered twice", k);
		TRY(get(fd, r, PER));
		EXPECT(memcmp(r, ref[k % 16], PER) == 0, "reply to %u carries other data", k);
	}
	TRY(send_req(fd, CW_NBD_CMD_DISC, 0, 99, 0, 0, NULL));
	return expect_close(fd);
}

/*
 * nbd-client 3.24 (Debian's, what the kernel route uses), byte for byte:
 * fixed newstyle with no zeroes, then NBD_OPT_GO with no information
 * requests, and nothing else.  It must be served (a minimum block of 1),
 * and then requests of any alignment work with simple replies.
 */
static const uint8_t hello_324[] = {
		0x00, 0x00, 0x00, 0x03,				/* client flags */
		'I', 'H', 'A', 'V', 'E', 'O', 'P', 'T',
		0x00, 0x00, 0x00, 0x07,				/* NBD_OPT_GO */
		0x00, 0x00, 0x00, 0x0a,				/* length 10 */
		0x00, 0x00, 0x00, 0x04, 'd', 'i', 's', 'k',	/* the name */
		0x00, 0x00,					/* no info requests */
};

/* Opens "disk" as nbd-client 3.24 does; the caller checks the replies. */
static int open_324(void)
{
	uint8_t g[CW_NBD_GREETING_BYTES];
	int fd = dial();

	TRY(fd);
	if (get(fd, g, sizeof(g)) < 0 || put(fd, hello_324, sizeof(hello_324)) < 0) {
		close(fd);
		return -1;
	}
	if (cw_nbd_decode_greeting(g) != 3) {
		close(fd);
		return fail("greeting flags");
	}
	return fd;
}

static int s_nbd_client_324(void)
{
	struct cw_nbd_option_reply rep;
	static uint8_t pat[4096], got[4096], want[4096];
	uint8_t b[64];
	bool sized = false, blocks = false;
	uint32_t err;
	unsigned i;
	int fd = open_324();

	TRY(fd);
	for (;;) {
		TRY(get_rep(fd, CW_NBD_OPT_GO, &rep, b, sizeof(b)));
		if (rep.reply == CW_NBD_REP_ACK)
			break;
		EXPECT(rep.reply == CW_NBD_REP_INFO, "GO without info requests: reply 0x%x",
		       rep.reply);
		if (be16(b) == CW_NBD_INFO_EXPORT)
			sized = (uint64_t)be32(b + 2) << 32 | be32(b + 6);
		if (be16(b) == CW_NBD_INFO_BLOCK_SIZE) {
			EXPECT(be32(b + 2) == 1, "promised a minimum block of %u", be32(b + 2));
			blocks = true;
		}
	}
	EXPECT(sized && blocks, "no export size or block sizes before the ACK");

	/* A known pattern over the first 4 KiB, in whole blocks. */
	for (i = 0; i < sizeof(pat); i++)
		pat[i] = (uint8_t)(i * 13 + 1);
	TRY(send_req(fd, CW_NBD_CMD_WRITE, 0, 1, 0, sizeof(pat), pat));
	TRY(expect_err(fd, 1, 0));
	memcpy(want, pat, sizeof(want));
	/* Writes inside one block, across a block boundary, and spanning
	 * whole blocks with ragged ends; a zero and a trim off the grid. */
	TRY(send_req(fd, CW_NBD_CMD_WRITE, 0, 2, 700, 100, "abcdefghij0123456789abcdefghij0123456789"
		     "abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789"));
	memcpy(want + 700, "abcdefghij0123456789abcdefghij0123456789"
	       "abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789", 100);
	TRY(expect_err(fd, 2, 0));
	memset(b, 0xee, sizeof(b));
	TRY(send_req(fd, CW_NBD_CMD_WRITE, CW_NBD_CMD_FLAG_FUA, 3, 1000, 40, b));
	memset(want + 1000, 0xee, 40);
	TRY(expect_err(fd, 3, 0));
	for (i = 0; i < 1500; i++)
		got[i] = (uint8_t)(255 - i);
	TRY(send_req(fd, CW_NBD_CMD_WRITE, 0, 4, 1100, 1500, got));
	memcpy(want + 1100, got, 1500);
	TRY(expect_err(fd, 4, 0));
	TRY(send_req(fd, CW_NBD_CMD_WRITE_ZEROES, 0, 5, 2900, 700, NULL));
	memset(want + 2900, 0, 700);
	TRY(expect_err(fd, 5, 0));
	TRY(send_req(fd, CW_NBD_CMD_TRIM, 0, 6, 3700, 100, NULL));
	TRY(expect_err(fd, 6, 0));
	/* Reads at any offset see exactly that. */
	TRY(send_req(fd, CW_NBD_CMD_READ, 0, 7, 0, 3700, NULL));
	TRY(get_reply(fd, 7, &err, got, 3700, 0));
	EXPECT(err == 0, "read failed: %u", err);
	for (i = 0; i < 3700; i++)
		EXPECT(got[i] == want[i], "byte %u is %u, expected %u", i, got[i], want[i]);
	TRY(send_req(fd, CW_NBD_CMD_READ, 0, 8, 705, 3, NULL));
	TRY(get_reply(fd, 8, &err, got, 3, 705));
	EXPECT(err == 0 && memcmp(got, "fgh", 3) == 0, "a 3-byte read off the grid");
	/* The end of the export is still the end. */
	TRY(send_req(fd, CW_NBD_CMD_READ, 0, 9, DISK_SIZE - 1, 2, NULL));
	TRY(expect_err(fd, 9, CW_NBD_EINVAL));
	TRY(send_req(fd, CW_NBD_CMD_READ, 0, 10, DISK_SIZE - 1, 1, NULL));
	TRY(get_reply(fd, 10, &err, got, 1, DISK_SIZE - 1));
	EXPECT(err == 0, "reading the last byte failed: %u", err);
	TRY(send_req(fd, CW_NBD_CMD_DISC, 0, 11, 0, 0, NULL));
	return expect_close(fd);
}

/*
 * A read-modify-write on one connection never undoes a whole-block write
 * of another: a child patches one byte of block 0 over and over as a
 * minimum-block-1 client, while this connection (which asked for the
 * block size) writes the whole block with a new pattern and reads it back
 * each time; every byte but the patched one must be the last pattern.
 */
static int s_rmw_keeps_others(void)
{
	enum { BLK = 512, ROUNDS = 3000, PATCHED = 100 };
	static uint8_t pat[BLK], got[BLK];
	struct cw_nbd_option_reply rep;
	uint8_t b[64];
	uint32_t err;
	int fd, st = 0, ws;
	pid_t child;

	fd = open_export("disk", false, NULL);
	TRY(fd);
	child = fork();
	if (child < 0)
		return fail("fork: %m");
	if (child == 0) {
		int a = open_324();

		if (a < 0)
			_exit(2);
		do {
			if (get_rep(a, CW_NBD_OPT_GO, &rep, b, sizeof(b)) < 0)
				_exit(2);
		} while (rep.reply == CW_NBD_REP_INFO);
		if (rep.reply != CW_NBD_REP_ACK)
			_exit(2);
		for (uint64_t k = 1; k <= ROUNDS; k++) {
			uint8_t v = (uint8_t)k;

			if (send_req(a, CW_NBD_CMD_WRITE, 0, k, PATCHED, 1, &v) < 0 ||
			    expect_err(a, k, 0) < 0)
				_exit(3);
		}
		_exit(0);
	}
	for (uint64_t k = 1; k <= ROUNDS && st == 0; k++) {
		for (unsigned i = 0; i < BLK; i++)
			pat[i] = (uint8_t)(k * 7 + i);
		if (send_req(fd, CW_NBD_CMD_WRITE, 0, 2 * k, 0, BLK, pat) < 0 ||
		    expect_err(fd, 2 * k, 0) < 0 ||
		    send_req(fd, CW_NBD_CMD_READ, 0, 2 * k + 1, 0, BLK, NULL) < 0 ||
		    get_reply(fd, 2 * k + 1, &err, got, BLK, 0) < 0) {
			st = -1;
			break;
		}
		if (err) {
			st = fail("read %" PRIu64 " failed: %u", k, err);
			break;
		}
		for (unsigned i = 0; i < BLK; i++)
			if (i != PATCHED && got[i] != pat[i]) {
				st = fail("round %" PRIu64 ": byte %u is %u, the write just "
					  "acknowledged put %u there: a read-modify-write undid it",
					  k, i, got[i], pat[i]);
				break;
			}
	}
	if (st)
		kill(child, SIGKILL);
	if (waitpid(child, &ws, 0) != child || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
		st = st ? st : fail("the patching client failed (%d)", ws);
	close(fd);
	return st;
}

/* Run by the test on an export bound to a reservation: sends 16 reads of
 * 256 KiB at once, then reads nothing for a second (its socket fills, so
 * the replies leave only once it reads), then takes them all. */
static int s_slow_reader(void)
{
	enum { N = 16, LEN = 256 << 10 };
	static uint8_t data[LEN];
	const char *name = getenv("NBD_EXPORT") ? getenv("NBD_EXPORT") : "disk";
	uint32_t err;
	int fd = open_export(name, false, NULL);

	bool seen[N + 1] = { false };

	TRY(fd);
	for (uint64_t k = 0; k < N; k++)
		TRY(send_req(fd, CW_NBD_CMD_READ, 0, k + 1, k * LEN, LEN, NULL));
	sleep(1);
	/* Replies in any order (their pieces end on their own). */
	for (unsigned k = 0; k < N; k++) {
		uint8_t h[CW_NBD_SIMPLE_REPLY_BYTES];
		struct cw_nbd_reply r;

		TRY(get(fd, h, sizeof(h)));
		EXPECT(cw_nbd_decode_reply(h, sizeof(h), &r) > 0 && !r.structured, "bad reply");
		EXPECT(r.cookie >= 1 && r.cookie <= N && !seen[r.cookie], "reply cookie %llu",
		       (unsigned long long)r.cookie);
		seen[r.cookie] = true;
		err = r.error;
		EXPECT(err == 0, "read %llu failed: %u", (unsigned long long)r.cookie, err);
		TRY(get(fd, data, LEN));
	}
	TRY(send_req(fd, CW_NBD_CMD_DISC, 0, 99, 0, 0, NULL));
	return expect_close(fd);
}

/* The server is up: it accepts and greets. */
static int s_greeting(void)
{
	uint8_t g[CW_NBD_GREETING_BYTES];
	int fd = dial();

	TRY(fd);
	TRY(get(fd, g, sizeof(g)));
	close(fd);
	return cw_nbd_decode_greeting(g) >= 0 ? 0 : fail("bad greeting");
}

/* Run in the background by the test: enters transmission with requests
 * answered, says "ready", and expects the server's stop to close it. */
static int s_held_until_stop(void)
{
	uint32_t err;
	int fd = open_export("disk", true, NULL);

	TRY(fd);
	TRY(send_req(fd, CW_NBD_CMD_FLUSH, 0, 1, 0, 0, NULL));
	TRY(get_reply(fd, 1, &err, NULL, 0, 0));
	EXPECT(err == 0, "flush failed");
	printf("ready\n");
	fflush(stdout);
	/* No timeout here: the server decides when this ends. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){ 0 }, sizeof(struct timeval));
	return expect_close(fd);
}

/* Run in the background by the test: opens export $NBD_EXPORT, prints
 * its size, waits for a line on stdin (the export grows meanwhile), then
 * checks that this connection can still read its last block but nothing
 * past the size it was told, and prints "bounded". */
static int s_keeps_old_size(void)
{
	const char *name = getenv("NBD_EXPORT");
	static uint8_t buf[4096];
	char line[16];
	uint32_t err;
	uint64_t size;
	int fd = open_export(name ? name : "disk", true, NULL);

	TRY(fd);
	size = export_size;
	printf("%llu\n", (unsigned long long)size);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return fail("no go-ahead on stdin");
	TRY(send_req(fd, CW_NBD_CMD_READ, 0, 1, size - sizeof(buf), sizeof(buf), NULL));
	TRY(get_reply(fd, 1, &err, buf, sizeof(buf), size - sizeof(buf)));
	EXPECT(err == 0, "reading the last block of the old size failed: %u", err);
	TRY(send_req(fd, CW_NBD_CMD_READ, 0, 2, size, sizeof(buf), NULL));
	TRY(get_reply(fd, 2, &err, buf, sizeof(buf), size));
	EXPECT(err != 0, "a read past the size this connection was told succeeded");
	printf("bounded\n");
	fflush(stdout);
	close(fd);
	return 0;
}

struct scenario {
	const char *name;
	int (*fn)(void);
};

static const struct scenario scenarios[] = {
	{ "bad-client-flags", s_bad_client_flags },
	{ "not-fixed-newstyle", s_not_fixed_newstyle },
	{ "bad-option-magic", s_bad_option_magic },
	{ "unknown-options", s_unknown_options },
	{ "malformed-go", s_malformed_go },
	{ "too-big-option", s_too_big_option },
	{ "export-name-unknown", s_export_name_unknown },
	{ "export-name", s_export_name },
	{ "idle-client-others-served", s_idle_client_others_served },
	{ "bad-requests-simple", s_bad_requests_simple },
	{ "bad-requests-structured", s_bad_requests_structured },
	{ "read-only", s_read_only },
	{ "oversized-write-closes", s_oversized_write_closes },
	{ "bad-request-magic-closes", s_bad_request_magic_closes },
	{ "disc-drains", s_disc_drains },
	{ "full-socket", s_full_socket },
	{ "block-status", s_block_status },
	{ "nbd-client-3.24", s_nbd_client_324 },
	{ "rmw-keeps-others", s_rmw_keeps_others },
};

/* Not in the list: the test starts it on its own. */
static const struct scenario extra[] = {
	{ "greeting", s_greeting },
	{ "held-until-stop", s_held_until_stop },
	{ "keeps-old-size", s_keeps_old_size },
	{ "tls-required", s_tls_required },
	{ "slow-reader", s_slow_reader },
};

/* Runs the scenario called name from t: 0 passed, 1 failed, -1 absent. */
static int run(const struct scenario *t, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (strcmp(name, t[i].name) != 0)
			continue;
		if (t[i].fn() < 0) {
			fprintf(stderr, "%s: %s\n", name, failure);
			return 1;
		}
		return 0;
	}
	return -1;
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

int main(int argc, char **argv)
{
	size_t i;
	int r;

	if (argc != 3) {
		fprintf(stderr, "usage: nbd-proto-client SOCKET (list|SCENARIO)\n");
		return 2;
	}
	sock_path = argv[1];
	if (strcmp(argv[2], "list") == 0) {
		for (i = 0; i < N(scenarios); i++)
			printf("%s\n", scenarios[i].name);
		return 0;
	}
	r = run(scenarios, N(scenarios), argv[2]);
	if (r < 0)
		r = run(extra, N(extra), argv[2]);
	if (r >= 0)
		return r;
	fprintf(stderr, "nbd-proto-client: no scenario %s\n", argv[2]);
	return 2;
}
