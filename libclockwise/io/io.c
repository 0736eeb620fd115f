/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The engine front end: argument checks, the depth limit, the completion
 * bookkeeping both back ends share (partial transfers, transient errors),
 * and the helpers for opening, aligning and allocating.
 *
 * Invariant: e->inflight counts requests accepted by cw_io_submit() and not
 * yet handed back by cw_io_reap(); it never exceeds e->depth, which is also
 * what each back end sized its rings for, so a back end never runs out of
 * submission or completion slots.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/uio.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <linux/stat.h>

#include <clockwise/io.h>
#include "common/cleanup.h"
#include "common/util.h"
#include "io/io-internal.h"

/* io_uring's limit on ring entries (IORING_MAX_ENTRIES). */
#define CW_IO_MAX_DEPTH 32768u

static const struct cw_io_ops *const engine_ops[] = {
	[CW_IO_URING] = &cw_io_uring_ops,
	[CW_IO_AIO] = &cw_io_aio_ops,
	[CW_IO_MEM] = &cw_io_mem_ops,
	[CW_IO_RBD] = &cw_io_rbd_ops,
};

int cw_io_kind_parse(const char *name, enum cw_io_kind *ret_kind)
{
	if (!name || !ret_kind)
		return -EINVAL;
	if (!strcasecmp(name, "io_uring") || !strcasecmp(name, "uring"))
		*ret_kind = CW_IO_URING;
	else if (!strcasecmp(name, "libaio") || !strcasecmp(name, "aio"))
		*ret_kind = CW_IO_AIO;
	else
		return -EINVAL;
	return 0;
}

const char *cw_io_kind_name(enum cw_io_kind kind)
{
	switch (kind) {
	case CW_IO_URING:
		return "io_uring";
	case CW_IO_AIO:
		return "libaio";
	case CW_IO_MEM:
		return "memory";
	case CW_IO_RBD:
		return "rbd";
	}
	return NULL;
}

int cw_io_kind_for_fd(int fd, enum cw_io_kind preferred, enum cw_io_kind *ret_kind)
{
	struct stat st;
	struct statfs sf;
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };

	if (!ret_kind || (unsigned)preferred >= CW_ARRAY_SIZE(engine_ops))
		return -EINVAL;
	if (io_rbd_is(fd)) {
		*ret_kind = CW_IO_RBD;
		return 0;
	}
	if (fstat(fd, &st) < 0)
		return -errno;
	*ret_kind = preferred;
	if (preferred != CW_IO_URING || !S_ISREG(st.st_mode))
		return 0;
	if (fstatfs(fd, &sf) < 0)
		return -errno;
	if (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC) {
		*ret_kind = CW_IO_MEM;
		return 0;
	}
	/* The kernel refuses RWF_NOWAIT before it looks at the buffer, the
	 * offset or O_DIRECT alignment, so one positional byte (which
	 * changes nothing) tells whether io_uring could read inline. */
	if (preadv2(fd, &iov, 1, 0, RWF_NOWAIT) < 0 && errno == EOPNOTSUPP)
		*ret_kind = CW_IO_AIO;
	return 0;
}

int cw_io_engine_new(enum cw_io_kind kind, unsigned depth, struct cw_io_engine **ret_engine)
{
	struct cw_io_engine *e = NULL;
	int r;

	if (!ret_engine || (unsigned)kind >= CW_ARRAY_SIZE(engine_ops) || depth == 0 ||
	    depth > CW_IO_MAX_DEPTH)
		return -EINVAL;
	r = engine_ops[kind]->engine_new(depth, &e);
	if (r < 0)
		return r;
	e->ops = engine_ops[kind];
	e->depth = depth;
	e->inflight = 0;
	*ret_engine = e;
	return 0;
}

void cw_io_engine_free(struct cw_io_engine *e)
{
	struct cw_io_req *done[64];

	if (!e)
		return;
	/* The kernel may still DMA into the callers' buffers: wait for every
	 * request before the rings go away. */
	while (e->inflight > 0) {
		unsigned want = CW_MIN(e->inflight, (unsigned)CW_ARRAY_SIZE(done));

		if (cw_io_reap(e, want, CW_IO_FOREVER, done, want) < 0)
			break;
	}
	e->ops->engine_free(e);
}

int cw_io_submit(struct cw_io_engine *e, struct cw_io_req **reqs, unsigned n)
{
	unsigned i, room;
	int r;

	if (!e || (n && !reqs))
		return -EINVAL;
	room = e->depth - e->inflight;
	if (n > room)
		n = room;
	if (n == 0)
		return 0;
	for (i = 0; i < n; i++) {
		struct cw_io_req *q = reqs[i];

		if (!q || (unsigned)q->op > CW_IO_PUNCH || q->len > CW_IO_DONE_MASK ||
		    (cw_io_op_moves_data(q->op) && q->len > 0 && !q->buf))
			return -EINVAL;
		cw_io_req_start(q);
	}
	r = e->ops->submit(e, reqs, n);
	if (r > 0)
		e->inflight += r;
	return r;
}

int cw_io_reap(struct cw_io_engine *e, unsigned min_complete, int64_t timeout_ns,
	       struct cw_io_req **ret_reqs, unsigned max)
{
	int64_t deadline_ns;
	int r;

	if (!e || (max && !ret_reqs))
		return -EINVAL;
	if (min_complete > max)
		min_complete = max;
	/* Waiting without a limit for more than can ever finish never ends. */
	if (timeout_ns < 0 && min_complete > e->inflight)
		return -EINVAL;
	if (max == 0)
		return 0;
	if (timeout_ns < 0)
		deadline_ns = CW_IO_FOREVER;
	else if (timeout_ns == 0)
		deadline_ns = CW_IO_POLL;
	else
		deadline_ns = cw_now_ns() + timeout_ns;
	r = e->ops->reap(e, min_complete, deadline_ns, ret_reqs, max);
	if (r > 0)
		e->inflight -= r;
	return r;
}

unsigned cw_io_inflight(const struct cw_io_engine *e)
{
	return e ? e->inflight : 0;
}

bool cw_io_can_wait(const struct cw_io_engine *e)
{
	return e && e->ops->wait;
}

/* Reads nothing of e but its ops: its owner may be reaping meanwhile. */
int cw_io_wait(struct cw_io_engine *e, int64_t timeout_ns)
{
	if (!e)
		return -EINVAL;
	if (!e->ops->wait)
		return -EOPNOTSUPP;
	if (timeout_ns == 0)
		return 0;
	e->ops->wait(e, timeout_ns < 0 ? CW_IO_FOREVER : cw_now_ns() + timeout_ns);
	return 0;
}

void cw_io_kick(struct cw_io_engine *e)
{
	if (e && e->ops->kick)
		e->ops->kick(e);
}

int64_t cw_io_sync(struct cw_io_engine *e, int fd, enum cw_io_op op, void *buf,
		   size_t len, uint64_t off)
{
	struct cw_io_req req = { .fd = fd, .op = op, .buf = buf, .len = len, .off = off };
	struct cw_io_req *q = &req, *done;
	int r;

	if (!e)
		return -EINVAL;
	/* Other requests' completions would be handed to us and lost. */
	if (e->inflight > 0)
		return -EBUSY;
	r = cw_io_submit(e, &q, 1);
	if (r < 0)
		return r;
	if (r == 0)
		return -EAGAIN;
	do
		r = cw_io_reap(e, 1, CW_IO_FOREVER, &done, 1);
	while (r == 0);
	if (r < 0)
		return r;
	return req.res;
}

int cw_io_open(const char *path, bool writable, bool *ret_direct)
{
	int flags = (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC;
	int fd;

	if (!path)
		return -EINVAL;
	if (cw_io_path_is_rbd(path)) {
		/* librbd has no cache of ours to bypass (rbd.c turns its
		 * own off) */
		fd = io_rbd_open(path, writable);
		if (fd >= 0 && ret_direct)
			*ret_direct = true;
		return fd;
	}
	fd = open(path, flags | O_DIRECT);
	if (fd >= 0) {
		if (ret_direct)
			*ret_direct = true;
		return fd;
	}
	/* tmpfs and some FUSE file systems refuse O_DIRECT at open. */
	if (errno != EINVAL)
		return -errno;
	fd = open(path, flags);
	if (fd < 0)
		return -errno;
	if (ret_direct)
		*ret_direct = false;
	return fd;
}

int cw_io_alignment(int fd, size_t *ret_align)
{
	struct stat st;
	int flags;

	if (!ret_align)
		return -EINVAL;
	if (io_rbd_is(fd)) {
		*ret_align = 512;	/* librbd takes any; sectors keep one unit */
		return 0;
	}
	if (fstat(fd, &st) < 0)
		return -errno;
	flags = fcntl(fd, F_GETFL);
	if (flags < 0)
		return -errno;
	if (S_ISBLK(st.st_mode)) {
		int lbs = 0;

		if (ioctl(fd, BLKSSZGET, &lbs) < 0)
			return -errno;
		*ret_align = CW_MAX((size_t)lbs, (size_t)512);
		return 0;
	}
	if (!S_ISREG(st.st_mode))
		return -ENOTBLK;
	if (!(flags & O_DIRECT)) {
		/* Buffered I/O takes any alignment; keep sector units so the
		 * same code works either way. */
		*ret_align = 512;
		return 0;
	}
#ifdef STATX_DIOALIGN
	{
		struct statx stx;

		if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
		    (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align > 0) {
			size_t a = CW_MAX(stx.stx_dio_offset_align, stx.stx_dio_mem_align);

			*ret_align = CW_MAX(a, (size_t)512);
			return 0;
		}
	}
#endif
	/* The file system does not say: the page size is a multiple of every
	 * logical block size in use. */
	*ret_align = (size_t)sysconf(_SC_PAGESIZE);
	return 0;
}

void *cw_io_alloc(size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	void *p;

	if (len == 0)
		len = page;
	if (posix_memalign(&p, page, CW_DIV_ROUND_UP(len, page) * page) != 0)
		return NULL;
	return p;
}

int cw_io_open_dev(const char *path, int flags)
{
	int fd;

	if (!path)
		return -EINVAL;
	if (cw_io_path_is_rbd(path))
		return io_rbd_open(path, (flags & O_ACCMODE) != O_RDONLY);
	fd = open(path, flags | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int cw_io_close(int fd)
{
	if (fd < 0)
		return 0;
	if (io_rbd_close(fd) == 0)
		return 0;
	return close(fd) < 0 ? -errno : 0;
}

int cw_io_size(int fd, uint64_t *ret_bytes)
{
	struct stat st;

	if (!ret_bytes)
		return -EINVAL;
	if (io_rbd_is(fd))
		return io_rbd_size(fd, ret_bytes);
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISBLK(st.st_mode))
		return ioctl(fd, BLKGETSIZE64, ret_bytes) < 0 ? -errno : 0;
	if (!S_ISREG(st.st_mode))
		return -ENOTBLK;
	*ret_bytes = (uint64_t)st.st_size;
	return 0;
}

int cw_io_identity(int fd, uint64_t *ret_dev, uint64_t *ret_ino)
{
	struct stat st;

	if (!ret_dev || !ret_ino)
		return -EINVAL;
	if (io_rbd_is(fd))
		return io_rbd_identity(fd, ret_dev, ret_ino);
	if (fstat(fd, &st) < 0)
		return -errno;
	/* two device nodes of one disk are one disk */
	*ret_dev = S_ISBLK(st.st_mode) ? 0 : (uint64_t)st.st_dev;
	*ret_ino = S_ISBLK(st.st_mode) ? (uint64_t)st.st_rdev : (uint64_t)st.st_ino;
	return 0;
}

ssize_t cw_io_pread(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n;

	if (io_rbd_is(fd))
		return io_rbd_sync(fd, CW_IO_READ, buf, len, off);
	n = pread(fd, buf, len, (off_t)off);
	return n < 0 ? -errno : n;
}

ssize_t cw_io_pwrite(int fd, const void *buf, size_t len, uint64_t off)
{
	ssize_t n;

	if (io_rbd_is(fd))
		return io_rbd_sync(fd, CW_IO_WRITE, (void *)buf, len, off);
	n = pwrite(fd, buf, len, (off_t)off);
	return n < 0 ? -errno : n;
}

int cw_io_fdatasync(int fd)
{
	if (io_rbd_is(fd))
		return (int)io_rbd_sync(fd, CW_IO_FSYNC, NULL, 0, 0);
	return fdatasync(fd) < 0 ? -errno : 0;
}

int cw_io_punch(int fd, uint64_t off, uint64_t len)
{
	if (io_rbd_is(fd))
		return io_rbd_punch(fd, off, len);
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) < 0)
		return -errno;
	return 0;
}
