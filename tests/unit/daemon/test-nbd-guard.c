/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: no NBD client can undo another's writes or lock the others
 * out through the front end (daemon/nbd/): read-modify-writes are
 * serialized per partition, not per export; a client that takes no
 * replies holds neither the read-modify-write lock nor the reply memory
 * of the others, and is closed after the stall timeout; clients stuck in
 * their handshake give way to new ones; the last connections are kept
 * for root; an unaligned WRITE_ZEROES keeps NO_HOLE.
 *
 * The clients are raw sockets speaking the protocol by hand: the only
 * way to be a client that asks no block size (so gets the
 * read-modify-write path), never reads its replies, or never finishes
 * its handshake.
 */
#include "config.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <clockwise/nbd.h>

#include "daemon/nbd/nbd-server.h"
#include "daemon/nbd/nbd-tls.h"
#include "cwtest.h"

#define SIZE   (16u << 20)
#define BLOCK  4096u
#define BIG    (8u << 20)	/* a read the stalled clients never take */

/* ---- a memory back end, shared by several exports ---- */

static struct {
	uint8_t *data;
	/* Reads of one block wait this long: the window between the read
	 * and the write of a read-modify-write, wide open. */
	atomic_int rmw_delay_us;
	/* Reads of exactly BLOCK bytes at or past hold_from are held. */
	atomic_bool hold;
	uint64_t hold_from;
	pthread_mutex_t lock;
	struct nbdsrv_io *held[64];
	unsigned n_held;
	atomic_uint big_reads;
	atomic_int zero_may_trim;	/* of the last ZERO: 1, 0; -1 none */
} mem;

static struct nbdsrv *srv;
static char dir[64], sock[96], port[16];

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_ms(int ms)
{
	nanosleep(&(struct timespec){ .tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000L }, NULL);
}

static int m_submit(void *b, struct nbdsrv_io *io)
{
	(void)b;
	switch (io->op) {
	case NBDSRV_IO_READ:
		if (io->length == BIG) {
			atomic_fetch_add(&mem.big_reads, 1);
			break;	/* its bytes do not matter */
		}
		if (io->length == BLOCK && atomic_load(&mem.hold) && io->offset >= mem.hold_from) {
			pthread_mutex_lock(&mem.lock);
			mem.held[mem.n_held++] = io;
			pthread_mutex_unlock(&mem.lock);
			return 0;
		}
		memcpy(io->buf, mem.data + io->offset, io->length);
		if (io->length == BLOCK && atomic_load(&mem.rmw_delay_us))
			usleep((useconds_t)atomic_load(&mem.rmw_delay_us));
		break;
	case NBDSRV_IO_WRITE:
		memcpy(mem.data + io->offset, io->buf, io->length);
		break;
	case NBDSRV_IO_ZERO:
		atomic_store(&mem.zero_may_trim, io->may_trim);
		memset(mem.data + io->offset, 0, io->length);
		break;
	default:
		break;
	}
	nbdsrv_io_complete(io, 0);
	return 0;
}

static unsigned n_held(void)
{
	unsigned n;

	pthread_mutex_lock(&mem.lock);
	n = mem.n_held;
	pthread_mutex_unlock(&mem.lock);
	return n;
}

static void release_held(void)
{
	pthread_mutex_lock(&mem.lock);
	atomic_store(&mem.hold, false);
	for (unsigned i = 0; i < mem.n_held; i++) {
		memcpy(mem.held[i]->buf, mem.data + mem.held[i]->offset, mem.held[i]->length);
		nbdsrv_io_complete(mem.held[i], 0);
	}
	mem.n_held = 0;
	pthread_mutex_unlock(&mem.lock);
}

static const struct nbdsrv_backend_ops mem_ops = {
	.pread = m_submit, .pwrite = m_submit, .flush = m_submit, .zero = m_submit,
};

/* Exports "a" and "b" of the same bytes (one partition, two exports),
 * 4 KiB blocks; on sock, and on loopback TCP when tcp. */
static void start(struct nbdsrv_config *cfg, bool tcp)
{
	static const char *names[] = { "a", "b" };

	memset(mem.data, 0, SIZE);
	atomic_store(&mem.rmw_delay_us, 0);
	atomic_store(&mem.hold, false);
	atomic_store(&mem.big_reads, 0);
	atomic_store(&mem.zero_may_trim, -1);
	mem.n_held = 0;
	CU_ASSERT_EQUAL_FATAL(nbdsrv_new(cfg, &srv), 0);
	for (unsigned i = 0; i < 2; i++) {
		struct nbdsrv_export e = {
			.name = names[i], .size = SIZE, .min_block = BLOCK, .data_key = &mem,
			.ops = &mem_ops,
		};

		CU_ASSERT_EQUAL_FATAL(nbdsrv_add_export(srv, &e), 0);
	}
	CU_ASSERT_EQUAL_FATAL(nbdsrv_listen_unix(srv, sock, NULL, CW_NBD_TLS_OFF), 0);
	if (tcp) {
		struct sockaddr_in sa = { .sin_family = AF_INET,
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t len = sizeof(sa);
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		CU_ASSERT_FATAL(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
				getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
		snprintf(port, sizeof(port), "%u", ntohs(sa.sin_port));
		close(fd);
		CU_ASSERT_EQUAL_FATAL(nbdsrv_listen_tcp(srv, "127.0.0.1", port, CW_NBD_TLS_OFF), 0);
	}
	CU_ASSERT_EQUAL_FATAL(nbdsrv_start(srv), 0);
}

/* ---- a raw client ---- */

static int dial(bool tcp)
{
	int fd;

	if (tcp) {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port)),
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			close(fd);
			return -1;
		}
	} else {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };

		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			close(fd);
			return -1;
		}
	}
	if (fd >= 0) {
		/* No test waits for a reply longer than this. */
		struct timeval tv = { .tv_sec = 10 };

		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	return fd;
}

static bool put(int fd, const void *p, size_t n)
{
	return send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n;
}

static bool get(int fd, void *p, size_t n)
{
	return recv(fd, p, n, MSG_WAITALL) == (ssize_t)n;
}

/* The handshake with NBD_OPT_EXPORT_NAME (no block size asked, so the
 * server keeps its promise of 1 by read-modify-writes): the socket in
 * transmission, or -1 if the server closed it. */
static int nbd_open(const char *name, bool tcp)
{
	uint8_t g[18], reply[10];
	uint32_t cflags = htobe32(CW_NBD_FLAG_C_FIXED_NEWSTYLE | CW_NBD_FLAG_C_NO_ZEROES);
	struct __attribute__((packed)) {
		uint64_t magic;
		uint32_t opt, len;
	} o = { htobe64(UINT64_C(0x49484156454F5054)), htobe32(CW_NBD_OPT_EXPORT_NAME),
		htobe32((uint32_t)strlen(name)) };
	int fd = dial(tcp);

	if (fd < 0)
		return -1;
	if (!get(fd, g, sizeof(g)) || !put(fd, &cflags, 4) || !put(fd, &o, sizeof(o)) ||
	    !put(fd, name, strlen(name)) || !get(fd, reply, sizeof(reply))) {
		close(fd);
		return -1;
	}
	return fd;
}

static bool request(int fd, uint16_t type, uint16_t flags, uint64_t cookie, uint64_t off,
		    uint32_t len, const void *data)
{
	struct __attribute__((packed)) {
		uint32_t magic;
		uint16_t flags, type;
		uint64_t cookie, off;
		uint32_t len;
	} r = { htobe32(CW_NBD_REQUEST_MAGIC), htobe16(flags), htobe16(type), cookie,
		htobe64(off), htobe32(len) };

	return put(fd, &r, sizeof(r)) && (!data || put(fd, data, len));
}

/* A simple reply: its error (0 for none), -1 if none came. */
static int reply(int fd, void *data, uint32_t len)
{
	uint8_t h[16];
	uint32_t err;

	if (!get(fd, h, sizeof(h)))
		return -1;
	memcpy(&err, h + 4, 4);
	err = be32toh(err);
	if (!err && data && !get(fd, data, len))
		return -1;
	return (int)err;
}

/* ---- tests ---- */

/* Whether a new client gets through the handshake and a read. */
static bool served(bool tcp)
{
	uint8_t buf[BLOCK];
	int fd = nbd_open("a", tcp);
	bool ok;

	if (fd < 0)
		return false;
	ok = request(fd, CW_NBD_CMD_READ, 0, 1, 0, BLOCK, NULL) && reply(fd, buf, BLOCK) == 0;
	close(fd);
	return ok;
}

struct writer {
	const char *export;
	uint32_t from, len;	/* the piece of each block it writes */
	int rounds, failed;
};

#define RMW_BLOCKS 16

/* Writes its piece of RMW_BLOCKS blocks, all in flight at once, round
 * after round with a new byte. */
static void *writer_main(void *arg)
{
	struct writer *w = arg;
	uint8_t buf[BLOCK];
	int fd = nbd_open(w->export, false);

	if (fd < 0) {
		w->failed = 1;
		return NULL;
	}
	for (int round = 1; round <= w->rounds && !w->failed; round++) {
		memset(buf, w->export[0] + round, sizeof(buf));
		for (unsigned b = 0; b < RMW_BLOCKS; b++)
			if (!request(fd, CW_NBD_CMD_WRITE, 0, b, (uint64_t)b * BLOCK + w->from, w->len,
				     buf))
				w->failed = 1;
		for (unsigned b = 0; b < RMW_BLOCKS && !w->failed; b++)
			if (reply(fd, NULL, 0) != 0)
				w->failed = 1;
	}
	close(fd);
	return NULL;
}

/* Two exports of one partition: sub-block writes through each, to the
 * same blocks at once, every one of them acknowledged, must all be
 * there (a read-modify-write through one export must not write back
 * bytes it read before a write through the other). */
static void test_rmw_per_partition(void)
{
	struct nbdsrv_config cfg = { 0 };
	struct writer w[2] = { { "a", 0, 512, 6, 0 }, { "b", 512, 64, 6, 0 } };
	pthread_t t[2];
	unsigned lost = 0;

	start(&cfg, false);
	atomic_store(&mem.rmw_delay_us, 2000);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, writer_main, &w[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CU_ASSERT_FALSE(w[0].failed);
	CU_ASSERT_FALSE(w[1].failed);
	for (unsigned b = 0; b < RMW_BLOCKS; b++) {
		const uint8_t *p = mem.data + (size_t)b * BLOCK;

		for (int i = 0; i < 2; i++)
			for (uint32_t k = 0; k < w[i].len; k++)
				if (p[w[i].from + k] != (uint8_t)(w[i].export[0] + w[i].rounds)) {
					lost++;
					break;
				}
	}
	printf("\n  acknowledged pieces lost: %u of %u\n", lost, 2 * RMW_BLOCKS);
	CU_ASSERT_EQUAL(lost, 0u);
	nbdsrv_free(srv);
}

/* A client that reads much and takes no reply, then writes an unaligned
 * piece: another client's unaligned write still completes. */
static void test_rmw_not_held_by_stalled_client(void)
{
	struct nbdsrv_config cfg = { .stall_timeout_ns = 60 * 1000000000LL };
	uint8_t piece[10] = "0123456789";
	int s, v, r;
	int64_t t0;

	start(&cfg, false);
	s = nbd_open("a", false);
	v = nbd_open("a", false);
	CU_ASSERT_FATAL(s >= 0 && v >= 0);
	/* Far more than the socket holds: its reply stays unsent. */
	CU_ASSERT(request(s, CW_NBD_CMD_READ, 0, 1, 0, BIG, NULL));
	while (atomic_load(&mem.big_reads) == 0)
		sleep_ms(1);
	CU_ASSERT(request(s, CW_NBD_CMD_WRITE, 0, 2, 100, sizeof(piece), piece));
	sleep_ms(300);	/* for its reader to reach the write */
	t0 = now_ns();
	CU_ASSERT(request(v, CW_NBD_CMD_WRITE, 0, 3, 3 * BLOCK + 5, sizeof(piece), piece));
	r = reply(v, NULL, 0);
	printf("\n  the other client's unaligned write: %s after %.1f s\n",
	       r == 0 ? "done" : "no reply", (double)(now_ns() - t0) / 1e9);
	CU_ASSERT_EQUAL(r, 0);
	CU_ASSERT_EQUAL(memcmp(mem.data + 3 * BLOCK + 5, piece, sizeof(piece)), 0);
	close(s);
	close(v);
	nbdsrv_free(srv);
}

/* Clients that each read 8 MiB and never take it: another client still
 * gets its 32 reads of 4 KiB in flight at once, and the stalled ones
 * are closed after the stall timeout. */
static void test_reply_memory_share(void)
{
	struct nbdsrv_config cfg = { .reply_memory_bytes = 16u << 20, .max_connections = 16,
				     .max_per_user = 16, .stall_timeout_ns = 1000000000LL };
	enum { STALLED = 3, DEPTH = 32 };
	int st[STALLED], v;
	unsigned depth;
	int64_t t0;

	start(&cfg, false);
	for (int i = 0; i < STALLED; i++) {
		st[i] = nbd_open("a", false);
		CU_ASSERT_FATAL(st[i] >= 0);
		CU_ASSERT(request(st[i], CW_NBD_CMD_READ, 0, 1, 0, BIG, NULL));
	}
	while (atomic_load(&mem.big_reads) == 0)
		sleep_ms(1);
	sleep_ms(300);	/* for the others to take what they can */
	mem.hold_from = SIZE / 2;
	atomic_store(&mem.hold, true);
	v = nbd_open("b", false);
	CU_ASSERT_FATAL(v >= 0);
	for (unsigned i = 0; i < DEPTH; i++)
		CU_ASSERT(request(v, CW_NBD_CMD_READ, 0, i, SIZE / 2 + (uint64_t)i * BLOCK, BLOCK,
				  NULL));
	t0 = now_ns();
	while (n_held() < DEPTH && now_ns() - t0 < 3000000000LL)
		sleep_ms(5);
	depth = n_held();
	printf("\n  in flight beside %d stalled readers: %u of %d\n", STALLED, depth, DEPTH);
	CU_ASSERT_EQUAL(depth, (unsigned)DEPTH);
	release_held();
	for (unsigned i = 0; i < DEPTH; i++) {
		uint8_t buf[BLOCK];

		CU_ASSERT_EQUAL(reply(v, buf, BLOCK), 0);
	}
	/* Each stalled one is closed a stall timeout after it got its
	 * memory: only the other client stays. */
	t0 = now_ns();
	while (nbdsrv_connections(srv) > 1 && now_ns() - t0 < 20000000000LL)
		sleep_ms(20);
	printf("  connections after the stall timeouts: %u (%.1f s)\n", nbdsrv_connections(srv),
	       (double)(now_ns() - t0) / 1e9);
	CU_ASSERT_EQUAL(nbdsrv_connections(srv), 1u);
	for (int i = 0; i < STALLED; i++)
		close(st[i]);
	close(v);
	nbdsrv_free(srv);
}

/* NBD_CMD_FLAG_NO_HOLE on an unaligned WRITE_ZEROES holds for the whole
 * blocks it covers too. */
static void test_unaligned_zero_no_hole(void)
{
	struct nbdsrv_config cfg = { 0 };
	int fd;

	start(&cfg, false);
	fd = nbd_open("a", false);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT(request(fd, CW_NBD_CMD_WRITE_ZEROES, CW_NBD_CMD_FLAG_NO_HOLE, 1, 100,
			  3 * BLOCK, NULL));
	CU_ASSERT_EQUAL(reply(fd, NULL, 0), 0);
	CU_ASSERT_EQUAL(atomic_load(&mem.zero_may_trim), 0);
	close(fd);
	nbdsrv_free(srv);
}

/* Network clients that never finish their handshake fill the server:
 * a client that does is still served (the oldest of them gives way). */
static void test_handshake_gives_way(void)
{
	struct nbdsrv_config cfg = { .max_connections = 8, .max_per_user = 4 };
	int stuck[8];
	uint8_t g[18];

	start(&cfg, true);
	for (int i = 0; i < 8; i++) {
		stuck[i] = dial(true);
		CU_ASSERT_FATAL(stuck[i] >= 0);
		CU_ASSERT(get(stuck[i], g, sizeof(g)));	/* greeted, then silent */
	}
	CU_ASSERT(served(true));
	for (int i = 0; i < 8; i++)
		close(stuck[i]);
	nbdsrv_free(srv);
}

/* Network clients hold every connection they may: root (here, the
 * server's own user on the unix socket) still gets in. */
static void test_admin_reserve(void)
{
	struct nbdsrv_config cfg = { .max_connections = 6, .max_per_user = 6 };
	int net[6], n_served = 0;

	start(&cfg, true);
	for (int i = 0; i < 6; i++) {
		net[i] = nbd_open("a", true);
		n_served += net[i] >= 0;
	}
	printf("\n  network clients served: %d of 6 (%u kept)\n", n_served, NBDSRV_ADMIN_RESERVE);
	CU_ASSERT_EQUAL(n_served, 6 - (int)NBDSRV_ADMIN_RESERVE);
	CU_ASSERT(served(false));
	for (int i = 0; i < 6; i++)
		if (net[i] >= 0)
			close(net[i]);
	nbdsrv_free(srv);
}

/* A PSK file every user may read is refused, with the reason; the same
 * file, the owner's alone, is taken. */
static void test_secret_file_mode(void)
{
	struct nbdtls_creds *creds = NULL;
	char path[128], err[512] = "";
	FILE *f;

	snprintf(path, sizeof(path), "%s/keys.psk", dir);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("alice:00112233445566778899aabbccddeeff\n", f);
	fclose(f);
	CU_ASSERT_EQUAL(chmod(path, 0644), 0);
	CU_ASSERT_EQUAL(nbdtls_creds_new(NULL, path, false, &creds, err, sizeof(err)), -EPERM);
	printf("\n  mode 0644: %s\n", err);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "every user may read (mode 0644)"));
	if (!err[0])
		nbdtls_creds_free(creds);
	CU_ASSERT_EQUAL(chmod(path, 0640), 0);
	CU_ASSERT_EQUAL(nbdtls_creds_new(NULL, path, false, &creds, err, sizeof(err)), 0);
	nbdtls_creds_free(creds);
	unlink(path);
}

static int setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/cw-nbd-guard.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(sock, sizeof(sock), "%s/s", dir);
	mem.data = malloc(SIZE);
	pthread_mutex_init(&mem.lock, NULL);
	return mem.data ? 0 : -1;
}

static int teardown(void)
{
	free(mem.data);
	rmdir(dir);
	return 0;
}

int main(void)
{
	CU_pSuite s = cwtest_suite("nbd guard", setup, teardown);

	cwtest_add(s, "read-modify-write per partition", test_rmw_per_partition);
	cwtest_add(s, "a stalled client holds no read-modify-write",
		   test_rmw_not_held_by_stalled_client);
	cwtest_add(s, "reply memory shared; stalled clients closed", test_reply_memory_share);
	cwtest_add(s, "unaligned WRITE_ZEROES keeps NO_HOLE", test_unaligned_zero_no_hole);
	cwtest_add(s, "handshakes that never end give way", test_handshake_gives_way);
	cwtest_add(s, "connections kept for root", test_admin_reserve);
	cwtest_add(s, "a key file every user may read", test_secret_file_mode);
	return cwtest_run();
}
