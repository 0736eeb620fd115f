/*
 * Description: the I/O engines (io_uring, libaio, and the memory engine
 * for files on tmpfs) on real files in a temporary directory and on a real
 * loop device: write/read patterns, a
 * full queue kept busy, the depth limit, polling and timed reaps, fdatasync,
 * and errors coming back as negative errno in res.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include <clockwise/io.h>
#include "common/cleanup.h"
#include "common/util.h"
#include "io/io-internal.h"
/* The request accounting the engines share is the library's own (not
 * exported): the test builds it in. */
#include "io/req.c"
#include "cwtest.h"

static enum cw_io_kind kind;	/* the engine the running suite tests */
static char tmpdir[200];
static unsigned file_seq;

#define BLK 4096u

/* A pattern no two (seed, offset) pairs share, so a block read from the
 * wrong place or a stale buffer is caught. */
static void fill(void *buf, size_t len, uint64_t seed, uint64_t off)
{
	uint64_t *w = buf;
	size_t i;

	for (i = 0; i < len / 8; i++)
		w[i] = (seed << 40) ^ ((off + i * 8) * UINT64_C(0x9e3779b97f4a7c15));
}

static bool check(const void *buf, size_t len, uint64_t seed, uint64_t off)
{
	const uint64_t *w = buf;
	size_t i;

	for (i = 0; i < len / 8; i++)
		if (w[i] != ((seed << 40) ^ ((off + i * 8) * UINT64_C(0x9e3779b97f4a7c15))))
			return false;
	return true;
}

/* A new file of size bytes in the temporary directory, opened through
 * cw_io_open; its path in ret_path. */
static int new_file(uint64_t size, bool writable, char *ret_path, size_t path_len)
{
	bool direct = false;
	int fd;

	snprintf(ret_path, path_len, "%s/f%u", tmpdir, file_seq++);
	fd = open(ret_path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(ftruncate(fd, (off_t)size) == 0);
	close(fd);
	fd = cw_io_open(ret_path, writable, &direct);
	CU_ASSERT_FATAL(fd >= 0);
	return fd;
}

static struct cw_io_engine *engine(unsigned depth)
{
	struct cw_io_engine *e = NULL;

	CU_ASSERT_FATAL(cw_io_engine_new(kind, depth, &e) == 0);
	CU_ASSERT_FATAL(e != NULL);
	CU_ASSERT_EQUAL(cw_io_inflight(e), 0);
	return e;
}

/* Submits every request (reaping when the queue is full) and reaps them
 * all; returns how many came back. */
static unsigned run_all(struct cw_io_engine *e, struct cw_io_req *reqs, unsigned n)
{
	struct cw_io_req *done[64];
	unsigned sent = 0, back = 0;

	while (back < n) {
		while (sent < n) {
			struct cw_io_req *q = &reqs[sent];
			int r = cw_io_submit(e, &q, 1);

			CU_ASSERT_FATAL(r >= 0);
			if (r == 0)
				break;
			sent++;
		}
		int r = cw_io_reap(e, 1, CW_NS_PER_S * 10, done, CW_ARRAY_SIZE(done));

		CU_ASSERT_FATAL(r > 0);
		back += (unsigned)r;
	}
	CU_ASSERT_EQUAL(cw_io_inflight(e), 0);
	return back;
}

static void test_kind_names(void)
{
	enum cw_io_kind k;

	CU_ASSERT(cw_io_kind_parse("io_uring", &k) == 0 && k == CW_IO_URING);
	CU_ASSERT(cw_io_kind_parse("uring", &k) == 0 && k == CW_IO_URING);
	CU_ASSERT(cw_io_kind_parse("libaio", &k) == 0 && k == CW_IO_AIO);
	CU_ASSERT(cw_io_kind_parse("aio", &k) == 0 && k == CW_IO_AIO);
	CU_ASSERT_EQUAL(cw_io_kind_parse("posix", &k), -EINVAL);
	CU_ASSERT_EQUAL(cw_io_kind_parse(NULL, &k), -EINVAL);
	CU_ASSERT_STRING_EQUAL(cw_io_kind_name(CW_IO_URING), "io_uring");
	CU_ASSERT_STRING_EQUAL(cw_io_kind_name(CW_IO_AIO), "libaio");
	CU_ASSERT_STRING_EQUAL(cw_io_kind_name(CW_IO_MEM), "memory");
	/* the memory engine is the daemon's choice, not a setting */
	CU_ASSERT_EQUAL(cw_io_kind_parse("memory", &k), -EINVAL);
	CU_ASSERT_EQUAL(cw_io_engine_new(CW_IO_URING, 0, &(struct cw_io_engine *){ NULL }), -EINVAL);
	CU_ASSERT_EQUAL(cw_io_engine_new((enum cw_io_kind)7, 8, &(struct cw_io_engine *){ NULL }), -EINVAL);
	cw_io_engine_free(NULL);
}

/* Disk names of images on a cluster are checked before any cluster is
 * asked; the descriptor helpers work on plain files the same way. */
static void test_rbd_names(void)
{
	static const char *const bad[] = {
		"rbd:", "rbd:pool", "rbd:/img", "rbd:pool/", "rbd:a/b/c", "rbd:p/i?",
		"rbd:p/i?conf=rel/ceph.conf", "rbd:p/i?id=", "rbd:p/i?user=x", "rbd:p/i?id=a&id=b",
		"rbd:p/i?id=a&", "rbd:p/i@snap", "rbd:p q/i",
	};
	char path[4096];
	uint64_t size, dev, ino, dev2, ino2;
	char buf[8] = "abcdefg";
	struct cw_io_engine *e = NULL;
	int fd, fd2;

	CU_ASSERT(cw_io_path_is_rbd("rbd:p/i"));
	CU_ASSERT(!cw_io_path_is_rbd("/dev/rbd0"));
	CU_ASSERT(!cw_io_path_is_rbd(NULL));
	CU_ASSERT_STRING_EQUAL(cw_io_kind_name(CW_IO_RBD), "rbd");
	CU_ASSERT_EQUAL(cw_io_kind_parse("rbd", &(enum cw_io_kind){ 0 }), -EINVAL);
	for (size_t i = 0; i < CW_ARRAY_SIZE(bad); i++) {
		CU_ASSERT_EQUAL(cw_io_open(bad[i], true, NULL), -EINVAL);
		CU_ASSERT_EQUAL(cw_io_open_dev(bad[i], O_RDWR), -EINVAL);
	}
	/* a well-formed name whose configuration file is not there */
	fd = cw_io_open("rbd:p/i?conf=/nonexistent/ceph.conf&id=x", false, NULL);
	CU_ASSERT_EQUAL(fd, cw_io_rbd_supported() ? -ENOENT : -EPROTONOSUPPORT);
	CU_ASSERT_EQUAL(cw_io_engine_new(CW_IO_RBD, 4, &e), cw_io_rbd_supported() ? 0 : -EPROTONOSUPPORT);
	if (cw_io_rbd_supported()) {
		struct cw_io_req r = { .fd = 0, .op = CW_IO_READ, .buf = buf, .len = 8 }, *q = &r;

		/* a descriptor that stands for no image */
		CU_ASSERT_EQUAL(cw_io_submit(e, &q, 1), -EBADF);
		cw_io_engine_free(e);
	}

	snprintf(path, sizeof(path), "%s/plain.img", tmpdir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(cw_io_pwrite(fd, buf, 8, 4096), 8);
	CU_ASSERT_EQUAL(cw_io_fdatasync(fd), 0);
	CU_ASSERT(cw_io_size(fd, &size) == 0 && size == 4104);
	memset(buf, 0, sizeof(buf));
	CU_ASSERT_EQUAL(cw_io_pread(fd, buf, 8, 4096), 8);
	CU_ASSERT_STRING_EQUAL(buf, "abcdefg");
	fd2 = cw_io_open_dev(path, O_RDONLY);
	CU_ASSERT_FATAL(fd2 >= 0);
	CU_ASSERT(cw_io_identity(fd, &dev, &ino) == 0 && cw_io_identity(fd2, &dev2, &ino2) == 0);
	CU_ASSERT(dev == dev2 && ino == ino2);
	CU_ASSERT_EQUAL(cw_io_close(fd2), 0);
	CU_ASSERT_EQUAL(cw_io_close(fd), 0);
	CU_ASSERT_EQUAL(cw_io_close(-1), 0);
	unlink(path);
}

static void *kick_later(void *arg)
{
	usleep(20000);
	cw_io_kick(arg);
	return NULL;
}

/* An engine whose completions come on threads of their own can be waited
 * on apart from reaping: the wait ends at its timeout, or at a kick, from
 * before the wait or from another thread during it; other engines say
 * they cannot.  (Completions ending it are the RBD tests' business.) */
static void test_wait_kick(void)
{
	struct cw_io_engine *e = engine(4);
	pthread_t t;
	int64_t t0;

	CU_ASSERT(!cw_io_can_wait(e));
	CU_ASSERT_EQUAL(cw_io_wait(e, 1000), -EOPNOTSUPP);
	cw_io_kick(e);	/* nothing to end: harmless */
	cw_io_engine_free(e);
	if (!cw_io_rbd_supported())
		return;
	CU_ASSERT_FATAL(cw_io_engine_new(CW_IO_RBD, 4, &e) == 0);
	CU_ASSERT(cw_io_can_wait(e));
	t0 = cw_now_ns();
	CU_ASSERT_EQUAL(cw_io_wait(e, 0), 0);
	CU_ASSERT_EQUAL(cw_io_wait(e, 10 * CW_NS_PER_MS), 0);
	CU_ASSERT(cw_now_ns() - t0 >= 10 * CW_NS_PER_MS);
	/* a kick ends the next wait at once, and that one only */
	cw_io_kick(e);
	t0 = cw_now_ns();
	CU_ASSERT_EQUAL(cw_io_wait(e, 60 * CW_NS_PER_S), 0);
	CU_ASSERT(cw_now_ns() - t0 < 30 * CW_NS_PER_S);
	t0 = cw_now_ns();
	CU_ASSERT_EQUAL(cw_io_wait(e, 10 * CW_NS_PER_MS), 0);
	CU_ASSERT(cw_now_ns() - t0 >= 10 * CW_NS_PER_MS);
	/* a kick from another thread ends a wait without a limit */
	CU_ASSERT_FATAL(pthread_create(&t, NULL, kick_later, e) == 0);
	CU_ASSERT_EQUAL(cw_io_wait(e, -1), 0);
	pthread_join(t, NULL);
	cw_io_engine_free(e);
}

/* Partial transfers and transient errors, one kernel result at a time. */
static void test_account(void)
{
	char buf[8192];
	struct cw_io_req q = { .op = CW_IO_READ, .buf = buf, .len = sizeof(buf), .off = 4096 };
	void *next;
	uint64_t off;
	unsigned i;

	cw_io_req_start(&q);
	CU_ASSERT_FALSE(cw_io_req_account(&q, 4096));
	CU_ASSERT_EQUAL(cw_io_req_next(&q, &next, &off), 4096);
	CU_ASSERT_PTR_EQUAL(next, buf + 4096);
	CU_ASSERT_EQUAL(off, 8192);
	CU_ASSERT_TRUE(cw_io_req_account(&q, 4096));
	CU_ASSERT_EQUAL(q.res, 8192);

	cw_io_req_start(&q);
	for (i = 0; i < CW_IO_MAX_RETRIES; i++)
		CU_ASSERT_FALSE(cw_io_req_account(&q, i % 2 ? -EINTR : -EAGAIN));
	CU_ASSERT_EQUAL(cw_io_req_next(&q, &next, &off), sizeof(buf));
	CU_ASSERT_TRUE(cw_io_req_account(&q, -EAGAIN));
	CU_ASSERT_EQUAL(q.res, -EAGAIN);

	cw_io_req_start(&q);	/* progress, then a hard error: the error wins */
	CU_ASSERT_FALSE(cw_io_req_account(&q, 512));
	CU_ASSERT_TRUE(cw_io_req_account(&q, -EIO));
	CU_ASSERT_EQUAL(q.res, -EIO);

	cw_io_req_start(&q);	/* end of device: a short count, then nothing */
	CU_ASSERT_FALSE(cw_io_req_account(&q, 1024));
	CU_ASSERT_TRUE(cw_io_req_account(&q, 0));
	CU_ASSERT_EQUAL(q.res, 1024);

	cw_io_req_start(&q);	/* end of a file of unaligned size */
	CU_ASSERT_TRUE(cw_io_req_account(&q, 5000));
	CU_ASSERT_EQUAL(q.res, 5000);

	q.op = CW_IO_FSYNC;
	cw_io_req_start(&q);
	CU_ASSERT_TRUE(cw_io_req_account(&q, 0));
	CU_ASSERT_EQUAL(q.res, 0);

	q.len = CW_IO_MAX_CHUNK * 2 + 4096;	/* longer than one kernel request */
	q.op = CW_IO_READ;
	cw_io_req_start(&q);
	CU_ASSERT_EQUAL(cw_io_req_next(&q, &next, &off), CW_IO_MAX_CHUNK);
	CU_ASSERT_FALSE(cw_io_req_account(&q, (int64_t)CW_IO_MAX_CHUNK));
	CU_ASSERT_FALSE(cw_io_req_account(&q, (int64_t)CW_IO_MAX_CHUNK));
	CU_ASSERT_EQUAL(cw_io_req_next(&q, &next, &off), 4096);
	CU_ASSERT_TRUE(cw_io_req_account(&q, 4096));
	CU_ASSERT_EQUAL(q.res, (int64_t)q.len);
}

/* Requests of different sizes at different places, written in one batch
 * and read back both through the engine and with plain pread. */
static void test_patterns(void)
{
	enum { N = 16 };
	char path[256];
	_cleanup_close_ int fd = new_file(4 << 20, true, path, sizeof(path));
	struct cw_io_engine *e = engine(N);
	struct cw_io_req w[N], rd[N], *batch[N], *done[N];
	void *wb[N], *rb[N];
	size_t align = 0;
	uint64_t off = 0;
	unsigned i;
	int got = 0;

	CU_ASSERT_EQUAL(cw_io_alignment(fd, &align), 0);
	CU_ASSERT(align >= 512 && align <= BLK && cw_is_pow2_u64(align));
	if (kind == CW_IO_URING) {
		enum cw_io_kind k = CW_IO_AIO;
		struct statfs sf;

		/* a disk file system reads inline: io_uring stays */
		CU_ASSERT_EQUAL_FATAL(fstatfs(fd, &sf), 0);
		if (sf.f_type != TMPFS_MAGIC && sf.f_type != RAMFS_MAGIC) {
			CU_ASSERT_EQUAL(cw_io_kind_for_fd(fd, CW_IO_URING, &k), 0);
			CU_ASSERT_EQUAL(k, CW_IO_URING);
		}
		CU_ASSERT_EQUAL(cw_io_kind_for_fd(-1, CW_IO_URING, &k), -EBADF);
		CU_ASSERT_EQUAL(cw_io_kind_for_fd(fd, (enum cw_io_kind)5, &k), -EINVAL);
	}
	for (i = 0; i < N; i++) {
		size_t len = BLK * (1 + i % 5);

		wb[i] = cw_io_alloc(len);
		rb[i] = cw_io_alloc(len);
		CU_ASSERT_FATAL(wb[i] && rb[i]);
		fill(wb[i], len, i + 1, off);
		memset(rb[i], 0xa5, len);
		w[i] = (struct cw_io_req){ .fd = fd, .op = CW_IO_WRITE, .buf = wb[i], .len = len,
					   .off = off, .user = &w[i] };
		rd[i] = w[i];
		rd[i].op = CW_IO_READ;
		rd[i].buf = rb[i];
		rd[i].user = &rd[i];
		batch[i] = &w[i];
		off += len + BLK * (i % 3);	/* leave holes between some */
	}
	CU_ASSERT_EQUAL(cw_io_submit(e, batch, N), N);
	CU_ASSERT_EQUAL(cw_io_inflight(e), N);
	while (got < N) {
		int r = cw_io_reap(e, N - got, -1, done + got, N - got);

		CU_ASSERT_FATAL(r > 0);
		got += r;
	}
	for (i = 0; i < N; i++) {
		CU_ASSERT_PTR_EQUAL(done[i]->user, done[i]);	/* the cookie survives */
		CU_ASSERT_EQUAL(done[i]->res, (int64_t)done[i]->len);
	}
	for (i = 0; i < N; i++) {
		_cleanup_free_ void *p = malloc(w[i].len);
		_cleanup_close_ int bfd = open(path, O_RDONLY | O_CLOEXEC);	/* buffered */

		CU_ASSERT_EQUAL(pread(bfd, p, w[i].len, (off_t)w[i].off), (ssize_t)w[i].len);
		CU_ASSERT(check(p, w[i].len, i + 1, w[i].off));
		batch[i] = &rd[i];
	}
	CU_ASSERT_EQUAL(run_all(e, rd, N), N);
	for (i = 0; i < N; i++) {
		CU_ASSERT_EQUAL(rd[i].res, (int64_t)rd[i].len);
		CU_ASSERT(check(rb[i], rd[i].len, i + 1, rd[i].off));
		free(wb[i]);
		free(rb[i]);
	}
	cw_io_engine_free(e);
}

/* Thousands of 4 KiB writes then reads at shuffled offsets with the queue
 * kept full; every block must hold its own pattern afterwards. */
static void test_many_inflight(void)
{
	enum { DEPTH = 64, NBLK = 2048 };
	char path[256];
	_cleanup_close_ int fd = new_file((uint64_t)NBLK * BLK, true, path, sizeof(path));
	struct cw_io_engine *e = engine(DEPTH);
	struct cw_io_req *reqs = calloc(NBLK, sizeof(*reqs)), *done[DEPTH];
	char *bufs = cw_io_alloc((size_t)NBLK * BLK);
	unsigned *perm = calloc(NBLK, sizeof(*perm));
	unsigned i, sent = 0, back = 0, peak = 0, pass;

	CU_ASSERT_FATAL(reqs && bufs && perm);
	for (i = 0; i < NBLK; i++)
		perm[i] = i;
	srandom(42);
	for (i = NBLK - 1; i > 0; i--) {
		unsigned j = (unsigned)random() % (i + 1), t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
	for (pass = 0; pass < 2; pass++) {
		enum cw_io_op op = pass == 0 ? CW_IO_WRITE : CW_IO_READ;

		for (i = 0; i < NBLK; i++) {
			char *b = bufs + (size_t)i * BLK;

			if (op == CW_IO_WRITE)
				fill(b, BLK, 7, (uint64_t)perm[i] * BLK);
			else
				memset(b, 0, BLK);
			reqs[i] = (struct cw_io_req){ .fd = fd, .op = op, .buf = b, .len = BLK,
						      .off = (uint64_t)perm[i] * BLK };
		}
		sent = back = 0;
		while (back < NBLK) {
			struct cw_io_req *batch[DEPTH];
			unsigned n = 0;
			int r;

			while (sent + n < NBLK && n < DEPTH)
				batch[n] = &reqs[sent + n], n++;
			r = cw_io_submit(e, batch, n);
			CU_ASSERT_FATAL(r >= 0);
			sent += (unsigned)r;
			peak = CW_MAX(peak, cw_io_inflight(e));
			CU_ASSERT_FATAL(cw_io_inflight(e) <= DEPTH);
			r = cw_io_reap(e, 1, -1, done, DEPTH);
			CU_ASSERT_FATAL(r > 0);
			for (i = 0; i < (unsigned)r; i++)
				CU_ASSERT_EQUAL(done[i]->res, BLK);
			back += (unsigned)r;
		}
	}
	CU_ASSERT_EQUAL(peak, DEPTH);
	for (i = 0; i < NBLK; i++)
		if (!check(bufs + (size_t)i * BLK, BLK, 7, (uint64_t)perm[i] * BLK))
			break;
	CU_ASSERT_EQUAL(i, NBLK);
	cw_io_engine_free(e);
	free(reqs);
	free(bufs);
	free(perm);
}

/* The engine takes no more than depth requests; reaping one makes room
 * for exactly one. */
static void test_queue_full(void)
{
	enum { DEPTH = 4, N = 10 };
	char path[256];
	_cleanup_close_ int fd = new_file(N * BLK, true, path, sizeof(path));
	struct cw_io_engine *e = engine(DEPTH);
	struct cw_io_req reqs[N], *batch[N], *done[N];
	_cleanup_free_ char *buf = cw_io_alloc(N * BLK);
	unsigned i;
	int r;

	for (i = 0; i < N; i++) {
		reqs[i] = (struct cw_io_req){ .fd = fd, .op = CW_IO_READ, .buf = buf + i * BLK,
					      .len = BLK, .off = i * BLK };
		batch[i] = &reqs[i];
	}
	CU_ASSERT_EQUAL(cw_io_submit(e, batch, N), DEPTH);
	CU_ASSERT_EQUAL(cw_io_inflight(e), DEPTH);
	CU_ASSERT_EQUAL(cw_io_submit(e, batch + DEPTH, N - DEPTH), 0);
	/* More than can ever finish, without a limit: refused, not a hang. */
	CU_ASSERT_EQUAL(cw_io_reap(e, DEPTH + 1, -1, done, N), -EINVAL);
	CU_ASSERT_EQUAL(cw_io_reap(e, 1, -1, done, 1), 1);
	CU_ASSERT_EQUAL(cw_io_inflight(e), DEPTH - 1);
	CU_ASSERT_EQUAL(cw_io_submit(e, batch + DEPTH, N - DEPTH), 1);
	CU_ASSERT_EQUAL(cw_io_inflight(e), DEPTH);
	r = cw_io_reap(e, DEPTH, -1, done, N);
	CU_ASSERT_EQUAL(r, DEPTH);
	CU_ASSERT_EQUAL(cw_io_inflight(e), 0);
	CU_ASSERT_EQUAL(cw_io_submit(e, NULL, 1), -EINVAL);
	reqs[0].op = (enum cw_io_op)9;
	CU_ASSERT_EQUAL(cw_io_submit(e, batch, 1), -EINVAL);
	CU_ASSERT_EQUAL(cw_io_inflight(e), 0);
	cw_io_engine_free(e);
}

/* Polls return at once, timed reaps wait their time and no longer than
 * needed, and a request still running is not reported early. */
static void test_poll_timeout(void)
{
	char path[256];
	_cleanup_close_ int fd = new_file(BLK, true, path, sizeof(path));
	struct cw_io_engine *e = engine(4);
	_cleanup_free_ char *buf = cw_io_alloc(BLK);
	struct cw_io_req q = { .fd = fd, .op = CW_IO_READ, .buf = buf, .len = BLK }, *p = &q, *done;
	int64_t t0, t1;
	int r, polls = 0;

	t0 = cw_now_ns();
	CU_ASSERT_EQUAL(cw_io_reap(e, 1, 0, &done, 1), 0);
	CU_ASSERT_EQUAL(cw_io_reap(e, 1, 20 * CW_NS_PER_MS, &done, 1), 0);
	t1 = cw_now_ns();
	CU_ASSERT(t1 - t0 >= 20 * CW_NS_PER_MS);

	/* Polling finds the request once it is done. */
	CU_ASSERT_EQUAL(cw_io_submit(e, &p, 1), 1);
	t0 = cw_now_ns();
	do {
		r = cw_io_reap(e, 1, 0, &done, 1);
		polls++;
	} while (r == 0 && cw_now_ns() - t0 < 10 * CW_NS_PER_S);
	CU_ASSERT_EQUAL(r, 1);
	CU_ASSERT_PTR_EQUAL(done, &q);
	CU_ASSERT_EQUAL(q.res, BLK);

	/* A timed reap returns as soon as the request is done. */
	CU_ASSERT_EQUAL(cw_io_submit(e, &p, 1), 1);
	t0 = cw_now_ns();
	CU_ASSERT_EQUAL(cw_io_reap(e, 1, 60 * CW_NS_PER_S, &done, 1), 1);
	CU_ASSERT(cw_now_ns() - t0 < 30 * CW_NS_PER_S);

	if (kind == CW_IO_URING) {
		/* A pipe read stays pending until data arrives (native AIO
		 * cannot do pipes asynchronously: io_submit would block). */
		int pfd[2];
		char pb[64];
		struct cw_io_req pq = { .op = CW_IO_READ, .buf = pb, .len = sizeof(pb) }, *pp = &pq;

		CU_ASSERT_FATAL(pipe2(pfd, O_CLOEXEC) == 0);
		pq.fd = pfd[0];
		CU_ASSERT_EQUAL(cw_io_submit(e, &pp, 1), 1);
		CU_ASSERT_EQUAL(cw_io_reap(e, 1, 0, &done, 1), 0);
		t0 = cw_now_ns();
		CU_ASSERT_EQUAL(cw_io_reap(e, 1, 10 * CW_NS_PER_MS, &done, 1), 0);
		CU_ASSERT(cw_now_ns() - t0 >= 10 * CW_NS_PER_MS);
		CU_ASSERT_EQUAL(cw_io_inflight(e), 1);
		CU_ASSERT_EQUAL(write(pfd[1], "hello", 5), 5);
		CU_ASSERT_EQUAL(cw_io_reap(e, 1, -1, &done, 1), 1);
		CU_ASSERT_EQUAL(pq.res, 5);
		CU_ASSERT_EQUAL(memcmp(pb, "hello", 5), 0);
		close(pfd[0]);
		close(pfd[1]);
	}
	cw_io_engine_free(e);
}

static void test_fsync(void)
{
	char path[256];
	_cleanup_close_ int fd = new_file(BLK * 4, true, path, sizeof(path));
	struct cw_io_engine *e = engine(4);
	_cleanup_free_ char *buf = cw_io_alloc(BLK);
	struct cw_io_req q[2] = {
		{ .fd = fd, .op = CW_IO_WRITE, .buf = buf, .len = BLK, .off = BLK },
		{ .fd = fd, .op = CW_IO_FSYNC, .len = 12345, .off = 7 },	/* both ignored */
	};

	fill(buf, BLK, 3, BLK);
	CU_ASSERT_EQUAL(run_all(e, &q[0], 1), 1);
	CU_ASSERT_EQUAL(q[0].res, BLK);
	CU_ASSERT_EQUAL(run_all(e, &q[1], 1), 1);
	CU_ASSERT_EQUAL(q[1].res, 0);
	CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_FSYNC, NULL, 0, 0), 0);
	CU_ASSERT_EQUAL(cw_io_sync(e, 999999, CW_IO_FSYNC, NULL, 0, 0), -EBADF);
	cw_io_engine_free(e);
}

/* A punch zeroes its range and gives the space back, in a batch with
 * writes on either side (libaio does it inline, between kernel batches). */
static void test_punch(void)
{
	char path[256];
	_cleanup_close_ int fd = new_file(BLK * 8, true, path, sizeof(path));
	struct cw_io_engine *e = engine(8);
	_cleanup_free_ char *buf = cw_io_alloc(BLK * 8);
	struct cw_io_req q[4];
	struct stat st_full, st_punched;

	memset(buf, 0x5a, BLK * 8);
	CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_WRITE, buf, BLK * 8, 0), BLK * 8);
	CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_FSYNC, NULL, 0, 0), 0);
	CU_ASSERT_FATAL(fstat(fd, &st_full) == 0);
	q[0] = (struct cw_io_req){ .fd = fd, .op = CW_IO_WRITE, .buf = buf, .len = BLK };
	q[1] = (struct cw_io_req){ .fd = fd, .op = CW_IO_PUNCH, .len = BLK * 4, .off = BLK * 2 };
	q[2] = (struct cw_io_req){ .fd = fd, .op = CW_IO_PUNCH, .len = BLK, .off = BLK * 7 };
	q[3] = (struct cw_io_req){ .fd = fd, .op = CW_IO_WRITE, .buf = buf, .len = BLK,
				   .off = BLK };
	CU_ASSERT_EQUAL(run_all(e, q, 4), 4);
	CU_ASSERT_EQUAL(q[0].res, BLK);
	CU_ASSERT_EQUAL(q[1].res, BLK * 4);
	CU_ASSERT_EQUAL(q[2].res, BLK);
	CU_ASSERT_EQUAL(q[3].res, BLK);
	memset(buf, 0x77, BLK * 8);
	CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_READ, buf, BLK * 8, 0), BLK * 8);
	for (unsigned b = 0; b < 8; b++) {
		bool zero = (b >= 2 && b < 6) || b == 7;

		for (size_t i = 0; i < BLK; i += 512)
			CU_ASSERT_EQUAL_FATAL(buf[b * BLK + i], zero ? 0 : 0x5a);
	}
	CU_ASSERT_FATAL(fstat(fd, &st_punched) == 0);
	CU_ASSERT(st_punched.st_blocks < st_full.st_blocks);
	CU_ASSERT_EQUAL(st_punched.st_size, st_full.st_size);
	/* No buffer needed; a descriptor that cannot punch says so. */
	CU_ASSERT_EQUAL(cw_io_sync(e, 999999, CW_IO_PUNCH, NULL, BLK, 0), -EBADF);
	cw_io_engine_free(e);
}

/* Errors come back per request, as negative errno in res, and do not
 * disturb the requests around them. */
static void test_errors(void)
{
	char path[256], ropath[256];
	_cleanup_close_ int fd = new_file(BLK * 8, true, path, sizeof(path));
	_cleanup_close_ int rofd = new_file(BLK * 8, false, ropath, sizeof(ropath));
	struct cw_io_engine *e = engine(8);
	_cleanup_free_ char *buf = cw_io_alloc(BLK * 8);
	struct cw_io_req q[3];
	bool direct = false;
	int ufd, wfd;

	memset(buf, 0x11, BLK * 8);
	/* good, bad fd, good — in one batch */
	q[0] = (struct cw_io_req){ .fd = fd, .op = CW_IO_WRITE, .buf = buf, .len = BLK };
	q[1] = (struct cw_io_req){ .fd = 999999, .op = CW_IO_READ, .buf = buf + BLK, .len = BLK };
	q[2] = (struct cw_io_req){ .fd = fd, .op = CW_IO_READ, .buf = buf + 2 * BLK, .len = BLK,
				   .off = BLK };
	CU_ASSERT_EQUAL(run_all(e, q, 3), 3);
	CU_ASSERT_EQUAL(q[0].res, BLK);
	CU_ASSERT_EQUAL(q[1].res, -EBADF);
	CU_ASSERT_EQUAL(q[2].res, BLK);

	CU_ASSERT_EQUAL(cw_io_sync(e, -1, CW_IO_READ, buf, BLK, 0), -EBADF);
	CU_ASSERT_EQUAL(cw_io_sync(e, rofd, CW_IO_WRITE, buf, BLK, 0), -EBADF);
	/* Reads at and across the end of a regular file are short, not errors. */
	CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_READ, buf, BLK, BLK * 8), 0);
	CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_READ, buf, BLK * 4, BLK * 6), BLK * 2);

	/* An O_DIRECT file of unaligned size reads back exactly its size. */
	wfd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	CU_ASSERT_FATAL(wfd >= 0);
	CU_ASSERT_EQUAL(write(wfd, buf, 5000), 5000);
	close(wfd);
	ufd = cw_io_open(path, false, &direct);
	CU_ASSERT_FATAL(ufd >= 0);
	CU_ASSERT_EQUAL(cw_io_sync(e, ufd, CW_IO_READ, buf, BLK * 2, 0), 5000);
	if (direct) {
		/* O_DIRECT refuses a misaligned offset or buffer. */
		CU_ASSERT_EQUAL(cw_io_sync(e, ufd, CW_IO_READ, buf, BLK, 100), -EINVAL);
		CU_ASSERT_EQUAL(cw_io_sync(e, ufd, CW_IO_READ, buf + 1, BLK, 0), -EINVAL);
	}
	close(ufd);

	/* cw_io_sync refuses to run beside other requests. */
	q[0] = (struct cw_io_req){ .fd = fd, .op = CW_IO_READ, .buf = buf, .len = BLK };
	struct cw_io_req *p = &q[0], *done;
	CU_ASSERT_EQUAL(cw_io_submit(e, &p, 1), 1);
	CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_READ, buf + BLK, BLK, 0), -EBUSY);
	CU_ASSERT_EQUAL(cw_io_reap(e, 1, -1, &done, 1), 1);

	CU_ASSERT_EQUAL(cw_io_open(ropath, false, NULL) >= 0 ? 0 : -1, 0);
	CU_ASSERT_EQUAL(cw_io_open("/nonexistent/clockwise", false, &direct), -ENOENT);
	CU_ASSERT_EQUAL(cw_io_open(NULL, false, &direct), -EINVAL);
	cw_io_engine_free(e);
}

/* Real short transfers and transient errors through the engine: a pipe
 * holding half of what is asked for. */
static void test_partial_pipe(void)
{
	enum { LEN = 8192, HALF = LEN / 2 };
	struct cw_io_engine *e = engine(2);
	_cleanup_free_ char *buf = calloc(1, LEN), *src = malloc(LEN);
	struct cw_io_req q = { .op = CW_IO_READ, .len = LEN }, *p = &q, *done;
	int pfd[2], avail = -1;
	int64_t t0;

	CU_ASSERT_FATAL(buf && src);
	fill(src, LEN, 5, 0);
	q.buf = buf;

	if (kind == CW_IO_MEM) {
		/* The memory engine reads at an offset: a pipe has none. */
		CU_ASSERT_FATAL(pipe2(pfd, O_CLOEXEC | O_NONBLOCK) == 0);
		q.fd = pfd[0];
		CU_ASSERT_EQUAL(run_all(e, &q, 1), 1);
		CU_ASSERT_EQUAL(q.res, -ESPIPE);
		close(pfd[0]);
		close(pfd[1]);
	} else if (kind == CW_IO_AIO) {
		/* Native AIO reads a pipe synchronously in io_submit; made
		 * non-blocking, half arrives, then every retry finds the pipe
		 * empty, and after the bounded retries the request fails with
		 * EAGAIN.  (io_uring waits for data instead, below.) */
		CU_ASSERT_FATAL(pipe2(pfd, O_CLOEXEC | O_NONBLOCK) == 0);
		CU_ASSERT_EQUAL(write(pfd[1], src, HALF), HALF);
		q.fd = pfd[0];
		CU_ASSERT_EQUAL(run_all(e, &q, 1), 1);
		CU_ASSERT_EQUAL(q.res, -EAGAIN);
		CU_ASSERT_EQUAL(memcmp(buf, src, HALF), 0);	/* the first half did land */
		close(pfd[0]);
		close(pfd[1]);
	} else {
		/* The remainder waits in the kernel for the rest. */
		memset(buf, 0, LEN);
		CU_ASSERT_FATAL(pipe2(pfd, O_CLOEXEC) == 0);
		CU_ASSERT_EQUAL(write(pfd[1], src, HALF), HALF);
		q.fd = pfd[0];
		CU_ASSERT_EQUAL(cw_io_submit(e, &p, 1), 1);
		t0 = cw_now_ns();
		do {
			CU_ASSERT_FATAL(ioctl(pfd[0], FIONREAD, &avail) == 0);
		} while (avail > 0 && cw_now_ns() - t0 < 10 * CW_NS_PER_S);
		CU_ASSERT_EQUAL(avail, 0);
		/* The short result is taken in and the rest resubmitted, not
		 * reported. */
		CU_ASSERT_EQUAL(cw_io_reap(e, 1, 0, &done, 1), 0);
		CU_ASSERT_EQUAL(cw_io_inflight(e), 1);
		CU_ASSERT_EQUAL(write(pfd[1], src + HALF, HALF), HALF);
		CU_ASSERT_EQUAL(cw_io_reap(e, 1, -1, &done, 1), 1);
		CU_ASSERT_EQUAL(q.res, LEN);
		CU_ASSERT_EQUAL(memcmp(buf, src, LEN), 0);
		close(pfd[0]);
		close(pfd[1]);
	}
	cw_io_engine_free(e);
}

/* A file system that refuses O_DIRECT (ramfs; tmpfs too before Linux
 * 6.6): cw_io_open says so and still gives a usable fd. */
static void test_buffered_fallback(void)
{
	char dir[256], path[300];
	struct cw_io_engine *e;
	_cleanup_free_ char *buf = cw_io_alloc(BLK);
	bool direct = true, mounted;
	enum cw_io_kind k;
	size_t align = 0;
	int fd;

	snprintf(dir, sizeof(dir), "%s/ramfs%u", tmpdir, file_seq++);
	CU_ASSERT_FATAL(mkdir(dir, 0700) == 0);
	mounted = mount("clockwise-test", dir, "ramfs", 0, NULL) == 0;
	if (!mounted) {
		printf("cannot mount ramfs (%m): trying /dev/shm\n");
		snprintf(dir, sizeof(dir), "/dev/shm");
	}
	snprintf(path, sizeof(path), "%s/cw-io-%d", dir, (int)getpid());
	fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	CU_ASSERT_FATAL(fd >= 0);
	close(fd);
	fd = cw_io_open(path, true, &direct);
	CU_ASSERT_FATAL(fd >= 0);
	if (mounted)
		CU_ASSERT_FALSE(direct);
	if (direct)
		printf("O_DIRECT accepted on %s: fallback not exercised\n", dir);
	else {
		CU_ASSERT_EQUAL(fcntl(fd, F_GETFL) & O_DIRECT, 0);
		CU_ASSERT_EQUAL(cw_io_alignment(fd, &align), 0);
		CU_ASSERT_EQUAL(align, 512);
	}
	/* io_uring would hand every request to worker threads here: a
	 * memory file system gets the memory engine; libaio stays libaio. */
	CU_ASSERT_EQUAL(cw_io_kind_for_fd(fd, CW_IO_URING, &k), 0);
	CU_ASSERT_EQUAL(k, CW_IO_MEM);
	CU_ASSERT_EQUAL(cw_io_kind_for_fd(fd, CW_IO_AIO, &k), 0);
	CU_ASSERT_EQUAL(k, CW_IO_AIO);
	e = engine(2);
	fill(buf, BLK, 9, 0);
	CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_WRITE, buf, BLK, 0), BLK);
	memset(buf, 0, BLK);
	CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_READ, buf, BLK, 0), BLK);
	CU_ASSERT(check(buf, BLK, 9, 0));
	CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_FSYNC, NULL, 0, 0), 0);
	cw_io_engine_free(e);
	close(fd);
	CU_ASSERT_EQUAL(unlink(path), 0);
	if (mounted)
		CU_ASSERT_EQUAL(umount(dir), 0);
}

/* A loop device over a file: a real block device with O_DIRECT. */
static void test_loop_device(void)
{
	enum { SIZE = 8 << 20, N = 32 };
	char path[256], cmd[512], dev[64] = "";
	_cleanup_close_ int dfd = new_file(SIZE, true, path, sizeof(path));
	_cleanup_close_ int bfd = open(path, O_RDONLY | O_CLOEXEC);	/* buffered */
	struct cw_io_engine *e;
	struct cw_io_req reqs[N];
	_cleanup_free_ char *buf = cw_io_alloc((size_t)N * 2 * BLK);
	_cleanup_free_ char *chk = malloc(2 * BLK);
	bool direct = false;
	enum cw_io_kind k = CW_IO_AIO;
	size_t align = 0;
	unsigned i;
	FILE *f;
	int fd;

	snprintf(cmd, sizeof(cmd), "PATH=/usr/sbin:/sbin:$PATH losetup -f --show '%s' 2>/dev/null", path);
	f = popen(cmd, "r");
	CU_ASSERT_FATAL(f != NULL);
	if (!fgets(dev, sizeof(dev), f))
		dev[0] = '\0';
	if (pclose(f) != 0 || strncmp(dev, "/dev/loop", 9) != 0) {
		printf("SKIP: losetup is not permitted here; loop device not tested\n");
		return;
	}
	dev[strcspn(dev, "\n")] = '\0';
	fd = cw_io_open(dev, true, &direct);
	CU_ASSERT(fd >= 0);
	if (fd >= 0) {
		CU_ASSERT_TRUE(direct);
		CU_ASSERT_EQUAL(cw_io_kind_for_fd(fd, CW_IO_URING, &k), 0);
		CU_ASSERT_EQUAL(k, CW_IO_URING);
		CU_ASSERT_EQUAL(cw_io_alignment(fd, &align), 0);
		CU_ASSERT(align >= 512 && cw_is_pow2_u64(align));
		e = engine(16);
		for (i = 0; i < N; i++) {
			uint64_t off = (uint64_t)i * (SIZE / N) + (i % 4) * align;

			fill(buf + (size_t)i * 2 * BLK, 2 * BLK, 20 + i, off);
			reqs[i] = (struct cw_io_req){ .fd = fd, .op = CW_IO_WRITE,
						      .buf = buf + (size_t)i * 2 * BLK,
						      .len = 2 * BLK, .off = off };
		}
		CU_ASSERT_EQUAL(run_all(e, reqs, N), N);
		for (i = 0; i < N; i++)
			CU_ASSERT_EQUAL(reqs[i].res, 2 * BLK);
		CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_FSYNC, NULL, 0, 0), 0);
		memset(buf, 0, (size_t)N * 2 * BLK);
		for (i = 0; i < N; i++)
			reqs[i].op = CW_IO_READ;
		CU_ASSERT_EQUAL(run_all(e, reqs, N), N);
		for (i = 0; i < N; i++) {
			CU_ASSERT_EQUAL(reqs[i].res, 2 * BLK);
			CU_ASSERT(check(reqs[i].buf, 2 * BLK, 20 + i, reqs[i].off));
			/* and the backing file holds the same bytes */
			CU_ASSERT_EQUAL(pread(bfd, chk, 2 * BLK, (off_t)reqs[i].off), 2 * BLK);
			CU_ASSERT(check(chk, 2 * BLK, 20 + i, reqs[i].off));
		}
		/* The end of the device: reads stop there, writes fail. */
		CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_READ, buf, BLK, SIZE), 0);
		CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_READ, buf, 2 * BLK, SIZE - BLK), BLK);
		CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_WRITE, buf, BLK, SIZE), -ENOSPC);
		CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_READ, buf, BLK, align / 2), -EINVAL);
		cw_io_engine_free(e);
		close(fd);
	}
	snprintf(cmd, sizeof(cmd), "PATH=/usr/sbin:/sbin:$PATH losetup -d '%s'", dev);
	CU_ASSERT_EQUAL(system(cmd), 0);
}

static int suite_uring(void)
{
	kind = CW_IO_URING;
	return 0;
}

static int suite_aio(void)
{
	kind = CW_IO_AIO;
	return 0;
}

static int suite_mem(void)
{
	kind = CW_IO_MEM;
	return 0;
}

static void add_engine_tests(CU_pSuite s)
{
	cwtest_add(s, "write/read patterns", test_patterns);
	cwtest_add(s, "many requests in flight", test_many_inflight);
	cwtest_add(s, "queue full", test_queue_full);
	cwtest_add(s, "poll and timeout", test_poll_timeout);
	cwtest_add(s, "short transfers and EAGAIN", test_partial_pipe);
	cwtest_add(s, "fdatasync", test_fsync);
	cwtest_add(s, "punch", test_punch);
	cwtest_add(s, "errors", test_errors);
	cwtest_add(s, "buffered fallback", test_buffered_fallback);
	cwtest_add(s, "loop device", test_loop_device);
	cwtest_add(s, "waits apart from reaping", test_wait_kick);
}

int main(void)
{
	CU_pSuite s;

	cwtest_tmpdir(tmpdir, sizeof(tmpdir), "cw-io");
	s = cwtest_suite("io", NULL, NULL);
	cwtest_add(s, "engine names", test_kind_names);
	cwtest_add(s, "partial completions", test_account);
	cwtest_add(s, "disks on a cluster: names", test_rbd_names);
	add_engine_tests(cwtest_suite("io_uring", suite_uring, NULL));
	add_engine_tests(cwtest_suite("libaio", suite_aio, NULL));
	add_engine_tests(cwtest_suite("memory", suite_mem, NULL));
	return cwtest_run_in_tmpdir(tmpdir);
}
