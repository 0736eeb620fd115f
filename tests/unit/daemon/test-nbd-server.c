/* Description: the NBD front end with a memory back end and libnbd as the
 * client: replies completed from another thread in reverse order reach the
 * right requests; back-end errors become error replies and the connection
 * lives on; stop waits for requests in flight; connection limits, export
 * validation and the multi-conn flag behave as documented; an export's
 * clients are listed by uid and pid (unix) or address (TCP). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libnbd.h>

#include <clockwise/nbd.h>

#include "daemon/nbd/nbd-server.h"
#include "cwtest.h"

#define SIZE      (4u << 20)
#define EIO_OFF   (1u << 20)		/* reads and writes here fail with EIO */
#define NOSPC_OFF (2u << 20)		/* writes here fail at once: ENOSPC */

/* ---- a memory back end that can hold requests ---- */

struct mem {
	uint8_t *data;
	pthread_mutex_t lock;
	pthread_cond_t changed;
	unsigned hold;			/* hold this many requests, then release */
	struct nbdsrv_io *held[64];
	unsigned n_held;
	bool wait_for_stop;		/* release only once the server stops */
	atomic_bool released;
};

static struct mem mem;
static struct nbdsrv *srv;
static char dir[64], sock[96];

static int do_io(struct nbdsrv_io *io)
{
	if (io->op != NBDSRV_IO_FLUSH && io->offset < EIO_OFF + 4096 &&
	    io->offset + io->length > EIO_OFF)
		return -EIO;
	switch (io->op) {
	case NBDSRV_IO_READ: memcpy(io->buf, mem.data + io->offset, io->length); break;
	case NBDSRV_IO_WRITE: memcpy(mem.data + io->offset, io->buf, io->length); break;
	case NBDSRV_IO_ZERO: memset(mem.data + io->offset, 0, io->length); break;
	default: break;
	}
	return 0;
}

static int m_submit(void *b, struct nbdsrv_io *io)
{
	if (io->op == NBDSRV_IO_WRITE && io->offset == NOSPC_OFF)
		return -ENOSPC;
	pthread_mutex_lock(&mem.lock);
	if (mem.hold) {
		mem.held[mem.n_held++] = io;
		pthread_cond_broadcast(&mem.changed);
		pthread_mutex_unlock(&mem.lock);
		return 0;
	}
	pthread_mutex_unlock(&mem.lock);
	nbdsrv_io_complete(io, do_io(io));
	return 0;
}

static const struct nbdsrv_backend_ops mem_ops = {
	.pread = m_submit, .pwrite = m_submit, .flush = m_submit, .zero = m_submit,
};

/* True once the server refuses new connections (it is stopping). */
static bool refused(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool r;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	r = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0;
	close(fd);
	return r;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void pause_briefly(void)
{
	nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
}

/* Completes the held requests, newest first, from this thread. */
static void *releaser(void *arg)
{
	unsigned i, n;

	pthread_mutex_lock(&mem.lock);
	while (mem.n_held < mem.hold)
		pthread_cond_wait(&mem.changed, &mem.lock);
	n = mem.n_held;
	pthread_mutex_unlock(&mem.lock);
	if (mem.wait_for_stop)
		while (!refused())
			pause_briefly();
	atomic_store(&mem.released, true);
	for (i = n; i-- > 0;)
		nbdsrv_io_complete(mem.held[i], do_io(mem.held[i]));
	return NULL;
}

/* The server on sock, and on 127.0.0.1:tcp_port unless that is NULL. */
static void start_server_on(const struct nbdsrv_config *cfg, bool flush_global,
			    const char *tcp_port)
{
	struct nbdsrv_export e = {
		.name = "mem", .description = "memory", .size = SIZE,
		.flush_global = flush_global, .min_block = 512, .ops = &mem_ops,
	};
	unsigned i;

	memset(mem.data, 0, SIZE);
	for (i = 0; i < SIZE; i += 4)
		memcpy(mem.data + i, &i, 4);	/* every word holds its offset */
	mem.hold = 0;
	mem.n_held = 0;
	mem.wait_for_stop = false;
	atomic_store(&mem.released, false);
	CU_ASSERT_EQUAL_FATAL(nbdsrv_new(cfg, &srv), 0);
	CU_ASSERT_EQUAL_FATAL(nbdsrv_add_export(srv, &e), 0);
	CU_ASSERT_EQUAL_FATAL(nbdsrv_listen_unix(srv, sock, NULL, CW_NBD_TLS_OFF), 0);
	if (tcp_port)
		CU_ASSERT_EQUAL_FATAL(nbdsrv_listen_tcp(srv, "127.0.0.1", tcp_port,
							CW_NBD_TLS_OFF), 0);
	CU_ASSERT_EQUAL_FATAL(nbdsrv_start(srv), 0);
}

static void start_server(const struct nbdsrv_config *cfg, bool flush_global)
{
	start_server_on(cfg, flush_global, NULL);
}

/* A loopback TCP port free a moment ago. */
static void free_port(char *buf, size_t n)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	CU_ASSERT_FATAL(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
			getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
	snprintf(buf, n, "%u", ntohs(sa.sin_port));
	close(fd);
}

static char last_error[512];

static struct nbd_handle *client(void)
{
	struct nbd_handle *h = nbd_create();

	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	nbd_set_export_name(h, "mem");
	if (nbd_connect_unix(h, sock) < 0) {
		snprintf(last_error, sizeof(last_error), "%s", nbd_get_error() ?: "");
		nbd_close(h);
		return NULL;
	}
	return h;
}

static int count_done(void *user_data, int *error)
{
	atomic_uint *order = user_data;

	(void)error;
	atomic_fetch_add(order, 1);
	return 1;
}

/* ---- tests ---- */

static void test_reverse_completion(void)
{
	enum { N = 16 };
	static uint8_t bufs[N][4096];
	atomic_uint done = 0;
	int64_t cookies[N];
	struct nbd_handle *h;
	pthread_t t;
	unsigned i, j;

	start_server(NULL, true);
	mem.hold = N;
	h = client();
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	CU_ASSERT_EQUAL(pthread_create(&t, NULL, releaser, NULL), 0);
	for (i = 0; i < N; i++) {
		cookies[i] = nbd_aio_pread(h, bufs[i], 4096, (uint64_t)i * 65536,
					   (nbd_completion_callback){ .callback = count_done,
								      .user_data = &done }, 0);
		CU_ASSERT(cookies[i] > 0);
	}
	while (atomic_load(&done) < N)
		CU_ASSERT_FATAL(nbd_poll(h, 10000) >= 0);
	pthread_join(t, NULL);
	for (i = 0; i < N; i++)
		for (j = 0; j < 4096; j += 4) {
			uint32_t w;

			memcpy(&w, bufs[i] + j, 4);
			if (w != i * 65536 + j) {
				CU_FAIL("a reply carried another request's data");
				i = N;
				break;
			}
		}
	nbd_shutdown(h, 0);
	nbd_close(h);
	nbdsrv_free(srv);
}

static void test_errors_keep_connection(void)
{
	uint8_t b[4096];
	struct nbd_handle *h;

	start_server(NULL, true);
	h = client();
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	/* An I/O error from the back end becomes EIO for that request. */
	CU_ASSERT_EQUAL(nbd_pread(h, b, 4096, EIO_OFF, 0), -1);
	CU_ASSERT_EQUAL(nbd_get_errno(), EIO);
	memset(b, 0x5a, sizeof(b));
	CU_ASSERT_EQUAL(nbd_pwrite(h, b, 4096, EIO_OFF, 0), -1);
	CU_ASSERT_EQUAL(nbd_get_errno(), EIO);
	/* A back end that refuses at once: its errno reaches the client. */
	CU_ASSERT_EQUAL(nbd_pwrite(h, b, 4096, NOSPC_OFF, 0), -1);
	CU_ASSERT_EQUAL(nbd_get_errno(), ENOSPC);
	/* And the connection still serves. */
	CU_ASSERT_EQUAL(nbd_pwrite(h, b, 4096, 8192, LIBNBD_CMD_FLAG_FUA), 0);
	memset(b, 0, sizeof(b));
	CU_ASSERT_EQUAL(nbd_pread(h, b, 4096, 8192, 0), 0);
	CU_ASSERT_EQUAL(b[0], 0x5a);
	CU_ASSERT_EQUAL(b[4095], 0x5a);
	CU_ASSERT_EQUAL(mem.data[8192], 0x5a);
	CU_ASSERT_EQUAL(nbd_zero(h, 4096, 8192, 0), 0);
	CU_ASSERT_EQUAL(mem.data[8192], 0);
	CU_ASSERT_EQUAL(nbd_flush(h, 0), 0);
	/* No trim callback: not offered, and refused if sent anyway. */
	CU_ASSERT_EQUAL(nbd_can_trim(h), 0);
	nbd_shutdown(h, 0);
	nbd_close(h);
	nbdsrv_free(srv);
}

static void *stopper(void *arg)
{
	nbdsrv_stop(srv);
	/* Stop may only return once the back end gave every request back. */
	CU_ASSERT_TRUE(atomic_load(&mem.released));
	return NULL;
}

static void test_stop_waits_for_inflight(void)
{
	static uint8_t bufs[4][4096];
	atomic_uint done = 0;
	struct nbd_handle *h;
	pthread_t r, s;
	unsigned i;

	start_server(NULL, true);
	mem.hold = 4;
	mem.wait_for_stop = true;
	h = client();
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	CU_ASSERT_EQUAL(pthread_create(&r, NULL, releaser, NULL), 0);
	for (i = 0; i < 4; i++)
		CU_ASSERT(nbd_aio_pread(h, bufs[i], 4096, (uint64_t)i * 4096,
					(nbd_completion_callback){ .callback = count_done,
								   .user_data = &done }, 0) > 0);
	/* The back end holds all four before the server is told to stop. */
	pthread_mutex_lock(&mem.lock);
	while (mem.n_held < 4)
		pthread_cond_wait(&mem.changed, &mem.lock);
	pthread_mutex_unlock(&mem.lock);
	CU_ASSERT_EQUAL(pthread_create(&s, NULL, stopper, NULL), 0);
	while (atomic_load(&done) < 4)
		if (nbd_poll(h, 10000) < 0)
			break;
	CU_ASSERT_EQUAL(atomic_load(&done), 4u);
	for (i = 0; i < 4; i++) {
		uint32_t w;

		memcpy(&w, bufs[i], 4);
		CU_ASSERT_EQUAL(w, i * 4096);
	}
	pthread_join(s, NULL);
	pthread_join(r, NULL);
	nbd_close(h);
	nbdsrv_free(srv);
}

static void test_connection_limit(void)
{
	struct nbdsrv_config cfg = { .max_connections = 2, .max_per_user = 2 };
	struct nbd_handle *a, *b, *c;

	start_server(&cfg, true);
	a = client();
	b = client();
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT_EQUAL(nbdsrv_connections(srv), 2u);
	c = client();
	CU_ASSERT_PTR_NULL(c);		/* refused: over the limit */
	/* ...in so many words, not by a silent close. */
	CU_ASSERT_PTR_NOT_NULL(strstr(last_error, "policy"));
	CU_ASSERT_EQUAL(nbdsrv_connections(srv), 2u);
	nbd_shutdown(a, 0);
	nbd_close(a);
	while (nbdsrv_connections(srv) > 1)
		pause_briefly();
	c = client();
	CU_ASSERT_PTR_NOT_NULL(c);	/* room again */
	if (c)
		nbd_close(c);
	nbd_close(b);
	nbdsrv_free(srv);
}

/* Who is connected to an export: a unix client by its uid and pid (the
 * kernel's word), a TCP one by its address and port; a client gone is no
 * longer listed; an unknown export is -ENOENT. */
static void test_export_clients(void)
{
	struct nbdsrv_config cfg = { .max_connections = 8, .max_per_user = 8 };
	struct nbdsrv_client cl[4];
	struct nbd_handle *a, *t;
	char port[16], want[64];
	struct sockaddr_in mine;
	socklen_t len = sizeof(mine);
	size_t n = 99;
	int64_t t0 = now_ns();

	free_port(port, sizeof(port));
	start_server_on(&cfg, true, port);
	CU_ASSERT_EQUAL(nbdsrv_export_clients(srv, "mem", cl, 4, &n), 0);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_EQUAL(nbdsrv_export_clients(srv, "nope", cl, 4, &n), -ENOENT);
	a = client();
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT_EQUAL(nbdsrv_export_clients(srv, "mem", cl, 4, &n), 0);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_TRUE(cl[0].known);
	CU_ASSERT_EQUAL(cl[0].uid, getuid());
	CU_ASSERT_EQUAL(cl[0].pid, getpid());
	CU_ASSERT_STRING_EQUAL(cl[0].addr, "");
	CU_ASSERT(cl[0].since_ns >= t0 && cl[0].since_ns <= now_ns());

	t = nbd_create();
	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	nbd_set_export_name(t, "mem");
	CU_ASSERT_EQUAL_FATAL(nbd_connect_tcp(t, "127.0.0.1", port), 0);
	CU_ASSERT_EQUAL(nbdsrv_export_clients(srv, "mem", cl, 4, &n), 0);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	/* The newest first; its address is the TCP client's own end. */
	CU_ASSERT_FALSE(cl[0].known);
	CU_ASSERT_EQUAL_FATAL(getsockname(nbd_aio_get_fd(t), (struct sockaddr *)&mine, &len), 0);
	snprintf(want, sizeof(want), "127.0.0.1:%u", ntohs(mine.sin_port));
	CU_ASSERT_STRING_EQUAL(cl[0].addr, want);
	CU_ASSERT_TRUE(cl[1].known);
	/* At most max are filled; n counts all. */
	CU_ASSERT_EQUAL(nbdsrv_export_clients(srv, "mem", cl, 1, &n), 0);
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT_EQUAL(nbdsrv_export_clients(srv, "mem", NULL, 0, &n), 0);
	CU_ASSERT_EQUAL(n, 2);

	nbd_shutdown(a, 0);
	nbd_close(a);
	while (nbdsrv_connections(srv) > 1)
		pause_briefly();
	CU_ASSERT_EQUAL(nbdsrv_export_clients(srv, "mem", cl, 4, &n), 0);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_FALSE(cl[0].known);
	nbd_close(t);
	nbdsrv_free(srv);
}

static void test_multi_conn_only_with_global_flush(void)
{
	struct nbd_handle *h;

	start_server(NULL, false);
	h = client();
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	CU_ASSERT_EQUAL(nbd_can_multi_conn(h), 0);
	CU_ASSERT_EQUAL(nbd_can_flush(h), 1);
	CU_ASSERT_EQUAL(nbd_can_fua(h), 1);
	nbd_close(h);
	nbdsrv_free(srv);

	start_server(NULL, true);
	h = client();
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	CU_ASSERT_EQUAL(nbd_can_multi_conn(h), 1);
	CU_ASSERT_EQUAL(nbd_get_block_size(h, LIBNBD_SIZE_MINIMUM), 512);
	CU_ASSERT_EQUAL(nbd_get_block_size(h, LIBNBD_SIZE_PREFERRED), 4096);
	CU_ASSERT_EQUAL(nbd_get_size(h), (int64_t)SIZE);
	nbd_close(h);
	nbdsrv_free(srv);
}

static void test_export_validation(void)
{
	struct nbdsrv_export ok = { .name = "x", .size = 1 << 20, .ops = &mem_ops };
	struct nbdsrv_export e;
	static const struct nbdsrv_backend_ops no_write = { .pread = m_submit };
	struct nbdsrv *s;

	CU_ASSERT_EQUAL_FATAL(nbdsrv_new(NULL, &s), 0);
	CU_ASSERT_EQUAL(nbdsrv_start(s), -EINVAL);		/* nothing to serve */
	e = ok; e.min_block = 3;
	CU_ASSERT_EQUAL(nbdsrv_add_export(s, &e), -EINVAL);	/* not a power of 2 */
	e = ok; e.min_block = 1 << 17;
	CU_ASSERT_EQUAL(nbdsrv_add_export(s, &e), -EINVAL);	/* over 64 KiB */
	e = ok; e.min_block = 4096; e.pref_block = 512;
	CU_ASSERT_EQUAL(nbdsrv_add_export(s, &e), -EINVAL);	/* preferred < minimum */
	e = ok; e.min_block = 4096; e.max_block = 6144;
	CU_ASSERT_EQUAL(nbdsrv_add_export(s, &e), -EINVAL);	/* max not a multiple */
	e = ok; e.max_block = 1u << 26;
	CU_ASSERT_EQUAL(nbdsrv_add_export(s, &e), -EINVAL);	/* over max_request */
	e = ok; e.min_block = 4096; e.size = 4096 * 3 + 512;
	CU_ASSERT_EQUAL(nbdsrv_add_export(s, &e), -EINVAL);	/* size not aligned */
	e = ok; e.ops = &no_write;
	CU_ASSERT_EQUAL(nbdsrv_add_export(s, &e), -EINVAL);	/* writable, no pwrite */
	e.read_only = true;
	CU_ASSERT_EQUAL(nbdsrv_add_export(s, &e), 0);
	CU_ASSERT_EQUAL(nbdsrv_add_export(s, &ok), -EEXIST);	/* same name */
	CU_ASSERT_EQUAL(nbdsrv_start(s), -EINVAL);		/* nowhere to listen */
	CU_ASSERT_EQUAL(nbdsrv_listen_unix(s, "/nonexistent-dir/x.sock", NULL, CW_NBD_TLS_OFF), -ENOENT);
	nbdsrv_free(s);
}

static int setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/cw-nbd-server.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(sock, sizeof(sock), "%s/s", dir);
	mem.data = malloc(SIZE);
	pthread_mutex_init(&mem.lock, NULL);
	pthread_cond_init(&mem.changed, NULL);
	return mem.data ? 0 : -1;
}

static int teardown(void)
{
	free(mem.data);
	rmdir(dir);
	return 0;
}

/* One user gets half the connections by default: the other half stays
 * for everyone else. */
static void test_per_user_limit(void)
{
	struct nbdsrv_config cfg = { .max_connections = 4 };
	struct nbd_handle *h[3];

	start_server(&cfg, true);
	h[0] = client();
	h[1] = client();
	CU_ASSERT_PTR_NOT_NULL_FATAL(h[0]);
	CU_ASSERT_PTR_NOT_NULL_FATAL(h[1]);
	h[2] = client();
	CU_ASSERT_PTR_NULL(h[2]);
	CU_ASSERT_PTR_NOT_NULL(strstr(last_error, "policy"));
	nbd_close(h[0]);
	nbd_close(h[1]);
	nbdsrv_free(srv);
}

/* A client that sends its handshake a byte at a time is still dropped at
 * the one deadline; a client idle past the idle timeout is closed. */
static void test_handshake_deadline_and_idle(void)
{
	struct nbdsrv_config cfg = { .handshake_timeout_ns = 300 * 1000000LL,
					 .idle_timeout_ns = 300 * 1000000LL };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	static const uint8_t hello[] = { 0, 0, 0, 1, 'I', 'H', 'A', 'V', 'E', 'O', 'P', 'T',
					 0, 0, 0, 3, 0, 0, 0, 0 };	/* LIST */
	uint8_t g[18];
	struct nbd_handle *h;
	int64_t t0;
	size_t i;
	int fd;

	start_server(&cfg, true);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	CU_ASSERT_EQUAL_FATAL(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	CU_ASSERT_EQUAL_FATAL(recv(fd, g, sizeof(g), MSG_WAITALL), 18);
	t0 = now_ns();
	/* Client flags, then an option header dribbled out: each byte well
	 * within the deadline, the whole not. */
	for (i = 0; i < sizeof(hello); i++) {
		if (send(fd, hello + i, 1, MSG_NOSIGNAL) != 1)
			break;
		nanosleep(&(struct timespec){ .tv_nsec = 25 * 1000000 }, NULL);
	}
	/* Not the LIST reply: the connection was closed. */
	CU_ASSERT(recv(fd, g, sizeof(g), 0) <= 0);
	close(fd);

	h = client();
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	CU_ASSERT_EQUAL(nbdsrv_connections(srv), 1u);
	while (nbdsrv_connections(srv) > 0 && now_ns() - t0 < 10000 * 1000000LL)
		pause_briefly();
	CU_ASSERT_EQUAL(nbdsrv_connections(srv), 0u);	/* idle: closed */
	nbd_close(h);
	nbdsrv_free(srv);
}

/* The rules: an export's own entry before the default one, read_write
 * before read_only, groups primary or supplementary, "*" for a client
 * with no credentials, root always. */
static void test_access_rules(void)
{
	static const struct nbdsrv_principal rw[] = { { NBDSRV_USER, 1000 }, { NBDSRV_GROUP, 50 } };
	static const struct nbdsrv_principal ro[] = { { NBDSRV_GROUP, 60 } };
	static const struct nbdsrv_principal anyone[] = { { NBDSRV_ANYONE, 0 } };
	static const struct nbdsrv_access rules[] = {
		{ .export = NULL, .read_write = rw, .n_read_write = 2, .read_only = ro,
		  .n_read_only = 1 },
		{ .export = "open", .read_only = anyone, .n_read_only = 1 },
		{ .export = "closed" },
	};
	struct nbdsrv_peer p = { .known = true, .uid = 1000, .gid = 1000 };
	struct nbdsrv_peer tcp = { .known = false };

	CU_ASSERT_EQUAL(nbdsrv_access_for(NULL, 0, &tcp, "x"), CW_NBD_ACCESS_RW);
	CU_ASSERT_EQUAL(nbdsrv_access_for(rules, 3, &p, "x"), CW_NBD_ACCESS_RW);
	CU_ASSERT_EQUAL(nbdsrv_access_for(rules, 3, &p, "open"), CW_NBD_ACCESS_RO);
	CU_ASSERT_EQUAL(nbdsrv_access_for(rules, 3, &p, "closed"), CW_NBD_ACCESS_NONE);
	p.uid = 1001;
	CU_ASSERT_EQUAL(nbdsrv_access_for(rules, 3, &p, "x"), CW_NBD_ACCESS_NONE);
	p.groups[p.n_groups++] = 60;
	CU_ASSERT_EQUAL(nbdsrv_access_for(rules, 3, &p, "x"), CW_NBD_ACCESS_RO);
	p.gid = 50;
	CU_ASSERT_EQUAL(nbdsrv_access_for(rules, 3, &p, "x"), CW_NBD_ACCESS_RW);
	CU_ASSERT_EQUAL(nbdsrv_access_for(rules, 3, &tcp, "x"), CW_NBD_ACCESS_NONE);
	CU_ASSERT_EQUAL(nbdsrv_access_for(rules, 3, &tcp, "open"), CW_NBD_ACCESS_RO);
	p = (struct nbdsrv_peer){ .known = true, .uid = 0, .gid = 0 };
	CU_ASSERT_EQUAL(nbdsrv_access_for(rules, 3, &p, "closed"), CW_NBD_ACCESS_RW);
}

/* ---- the real-time priority and its claim ---- */

static int rt_prio(void *b)
{
	(void)b;
	return 1;
}

static uint64_t no_cpu_bound(void *b, bool rt, struct cw_host_model *m)
{
	(void)b, (void)rt, (void)m;
	return UINT64_MAX;
}

/* Which of the export's clients hold its real-time priority: a bit per
 * client, the oldest the lowest; *ret_n the count. */
static unsigned rt_holders(size_t *ret_n)
{
	struct nbdsrv_client cl[8];
	unsigned bits = 0;

	CU_ASSERT_EQUAL_FATAL(nbdsrv_export_clients(srv, "rt", cl, 8, ret_n), 0);
	for (size_t i = 0; i < *ret_n && i < 8; i++)
		if (cl[i].realtime)
			bits |= 1u << (*ret_n - 1 - i);	/* listed newest first */
	return bits;
}

static struct nbd_handle *rt_client(void)
{
	struct nbd_handle *h = nbd_create();
	char b[512];

	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	nbd_set_export_name(h, "rt");
	CU_ASSERT_EQUAL_FATAL(nbd_connect_unix(h, sock), 0);
	CU_ASSERT_EQUAL(nbd_pread(h, b, sizeof(b), 0, 0), 0);	/* asks again */
	return h;
}

/* The first client of an export whose back end gives a priority holds
 * it, until a claim names another process: then it lets it go at its
 * next request, and only the claimant's connections take it; a claim
 * ends with its process.  (Issue 31, item 10: a client that connected
 * before the player held the stream's priority.) */
static void test_rt_claim(void)
{
	static const struct nbdsrv_backend_ops rt_ops = {
		.pread = m_submit, .pwrite = m_submit, .flush = m_submit, .zero = m_submit,
		.rt_priority = rt_prio, .cpu_budget = no_cpu_bound,
	};
	struct nbdsrv_export e = { .name = "rt", .size = SIZE, .min_block = 512, .ops = &rt_ops };
	struct nbdsrv_config cfg = { .max_connections = 8, .max_per_user = 8 };
	struct nbd_handle *a, *b, *c;
	char buf[512];
	pid_t other, now = 99;
	size_t n;

	start_server(&cfg, true);
	CU_ASSERT_EQUAL_FATAL(nbdsrv_add_export(srv, &e), 0);
	CU_ASSERT_EQUAL(nbdsrv_export_claim(srv, "rt", -1, &now), 0);
	CU_ASSERT_EQUAL(now, 0);
	CU_ASSERT_EQUAL(nbdsrv_export_claim(srv, "nope", -1, &now), -ENOENT);

	a = rt_client();
	b = rt_client();
	CU_ASSERT_EQUAL(rt_holders(&n), 1u);	/* first come: a */
	CU_ASSERT_EQUAL(n, 2);

	/* another process claims it: a lets it go at its next request, and
	 * neither a nor b nor a new client takes it */
	other = fork();
	CU_ASSERT_FATAL(other >= 0);
	if (other == 0) {
		pause();
		_exit(0);
	}
	CU_ASSERT_EQUAL(nbdsrv_export_claim(srv, "rt", other, &now), 0);
	CU_ASSERT_EQUAL(now, other);
	CU_ASSERT_EQUAL(rt_holders(&n), 1u);	/* not yet: no request since */
	CU_ASSERT_EQUAL(nbd_pread(a, buf, sizeof(buf), 0, 0), 0);
	CU_ASSERT_EQUAL(nbd_pread(b, buf, sizeof(buf), 0, 0), 0);
	c = rt_client();
	CU_ASSERT_EQUAL(nbd_pread(a, buf, sizeof(buf), 0, 0), 0);
	CU_ASSERT_EQUAL(rt_holders(&n), 0u);
	CU_ASSERT_EQUAL(n, 3);
	nbd_close(c);

	/* the claimant ends: so does its claim, and a new client takes the
	 * priority again (those refused stay best effort) */
	kill(other, SIGTERM);
	CU_ASSERT_EQUAL(waitpid(other, NULL, 0), other);
	CU_ASSERT_EQUAL(nbdsrv_export_claim(srv, "rt", -1, &now), 0);
	CU_ASSERT_EQUAL(now, 0);
	CU_ASSERT_EQUAL(nbdsrv_export_claim(srv, "rt", other, &now), -ESRCH);
	while (nbdsrv_connections(srv) > 2)
		pause_briefly();
	c = rt_client();
	CU_ASSERT_EQUAL(nbd_pread(a, buf, sizeof(buf), 0, 0), 0);
	CU_ASSERT_EQUAL(rt_holders(&n), 4u);	/* c, the third */

	/* this process claims it: c, its connection, keeps it */
	CU_ASSERT_EQUAL(nbdsrv_export_claim(srv, "rt", getpid(), &now), 0);
	CU_ASSERT_EQUAL(now, getpid());
	CU_ASSERT_EQUAL(nbd_pread(c, buf, sizeof(buf), 0, 0), 0);
	CU_ASSERT_EQUAL(rt_holders(&n), 4u);
	/* lifted: the priority stays where it is */
	CU_ASSERT_EQUAL(nbdsrv_export_claim(srv, "rt", 0, &now), 0);
	CU_ASSERT_EQUAL(now, 0);
	CU_ASSERT_EQUAL(nbd_pread(c, buf, sizeof(buf), 0, 0), 0);
	CU_ASSERT_EQUAL(rt_holders(&n), 4u);
	nbd_close(a);
	nbd_close(b);
	nbd_close(c);
	nbdsrv_free(srv);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("nbd server", setup, teardown);

	cwtest_add(s, "replies completed in reverse order", test_reverse_completion);
	cwtest_add(s, "back-end errors keep the connection", test_errors_keep_connection);
	cwtest_add(s, "stop waits for requests in flight", test_stop_waits_for_inflight);
	cwtest_add(s, "connection limit", test_connection_limit);
	cwtest_add(s, "who is connected to an export", test_export_clients);
	cwtest_add(s, "multi-conn only with a global flush", test_multi_conn_only_with_global_flush);
	cwtest_add(s, "export validation", test_export_validation);
	cwtest_add(s, "access rules", test_access_rules);
	cwtest_add(s, "connections per user", test_per_user_limit);
	cwtest_add(s, "handshake deadline and idle timeout", test_handshake_deadline_and_idle);
	cwtest_add(s, "a claim binds the real-time priority", test_rt_claim);
	return cwtest_run();
}
