/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The reader's requests smaller than the export's blocks.
 *
 * A client that did not ask for the block size (nbd-client, the kernel's)
 * was promised a minimum of 1.  Its requests that are not aligned to the
 * export's minimum are served here, on the reader, in whole blocks: a
 * read reads the blocks around it, a write or zero reads the partial
 * blocks at its ends, patches them and writes them back, a trim trims
 * the whole blocks inside it (a trim may do less than asked).
 *
 * Two read-modify-writes of one block must not interleave, or one undoes
 * the other's bytes: they take the lock of the bytes (struct rmw_dom,
 * shared by every export of one partition, not only by the connections
 * of one export).  Nor may another write land between the read and the
 * write of the patch, or the patch, written back with the bytes as they
 * were read, would undo it: every write, zero and trim is counted in its
 * bytes' domain (write_enter), and a read-modify-write holds new ones off
 * and waits for those in flight (rmw_hold_writes), its own connection's
 * included.  It waits for their completions only, never for a reply to
 * be sent: a client that takes no replies must not hold the lock, and
 * with it every other client's unaligned writes.  The count costs each
 * write two atomic operations on a shared word; only unaligned requests
 * ever wait.  Kernel clients send whole logical blocks (512 bytes), so
 * on exports whose disks take 512-byte I/O this path is never taken. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "daemon/nbd/nbd-internal.h"

/* One back-end request the reader waits for. */
static int sync_io(struct conn *c, enum nbdsrv_io_op op, uint64_t off, uint32_t len, void *buf,
		   bool fua, bool may_trim)
{
	struct slot *t = &c->rmw;
	const struct nbdsrv_export *e = &c->exp->e;
	int r;

	t->conn = c;
	t->sync = true;
	t->io = (struct nbdsrv_io){ .op = op, .offset = off, .length = len, .buf = buf, .fua = fua,
				 .may_trim = may_trim, .client_class = conn_class(c),
				 .conn_data = &c->backend_conn };
	atomic_store_explicit(&t->sync_done, 0, memory_order_relaxed);
	r = submit(c, t);
	if (r < 0)
		return r;
	if (e->ops->unplug)
		e->ops->unplug(e->backend);
	while (!atomic_load_explicit(&t->sync_done, memory_order_acquire))
		cw_futex_wait(&t->sync_done, 0);
	return t->err;
}

static void *aligned_buf(uint8_t **buf, size_t *cap, size_t n)
{
	void *p;

	if (*buf && *cap >= n)
		return *buf;
	if (posix_memalign(&p, BUF_ALIGN, n) != 0)
		return NULL;
	free(*buf);
	*buf = p;
	*cap = n;
	return p;
}

/* Rewrites n bytes at from inside the block at blk with src (NULL: zeros). */
static int patch_block(struct conn *c, uint64_t blk, const uint8_t *src, uint64_t from,
		       uint32_t n, bool fua)
{
	uint32_t a = c->rmw_align;
	int r;

	if (!c->blk_buf && posix_memalign((void **)&c->blk_buf, BUF_ALIGN, a) != 0) {
		c->blk_buf = NULL;
		return -ENOMEM;
	}
	r = sync_io(c, NBDSRV_IO_READ, blk, a, c->blk_buf, false, false);
	if (r < 0)
		return r;
	if (src)
		memcpy(c->blk_buf + (from - blk), src, n);
	else
		memset(c->blk_buf + (from - blk), 0, n);
	return sync_io(c, NBDSRV_IO_WRITE, blk, a, c->blk_buf, fua, false);
}

/* A write (src) or zero (src NULL) of [off, end) not aligned to a. */
static int rmw(struct conn *c, const struct slot *s, const uint8_t *src)
{
	uint64_t a = c->rmw_align, off = s->io.offset, end = off + s->io.length;
	uint64_t lo = off & ~(a - 1), a0 = (off + a - 1) & ~(a - 1), b0 = end & ~(a - 1);
	int r = 0;

	if (a0 > b0)	/* inside one block */
		return patch_block(c, lo, src, off, s->io.length, s->io.fua);
	if (off < a0)
		r = patch_block(c, a0 - a, src, off, (uint32_t)(a0 - off), s->io.fua);
	if (r == 0 && end > b0)
		r = patch_block(c, b0, src ? src + (b0 - off) : NULL, b0, (uint32_t)(end - b0),
				s->io.fua);
	if (r < 0 || a0 == b0)
		return r;
	/* NO_HOLE (may_trim false) holds for the whole blocks too. */
	if (!src)
		return sync_io(c, NBDSRV_IO_ZERO, a0, (uint32_t)(b0 - a0), NULL, s->io.fua,
			       s->io.may_trim);
	/* The payload's middle is not at an aligned address in its buffer. */
	if (!aligned_buf(&c->rmw_buf, &c->rmw_cap, b0 - a0))
		return -ENOMEM;
	memcpy(c->rmw_buf, src + (a0 - off), b0 - a0);
	return sync_io(c, NBDSRV_IO_WRITE, a0, (uint32_t)(b0 - a0), c->rmw_buf, s->io.fua, false);
}

/* Holds off new writes of every connection to d's bytes and waits for
 * those in flight (Dekker's pattern with write_enter: each side raises
 * its flag, then looks at the other's). */
static void rmw_hold_writes(struct rmw_dom *d)
{
	int n;

	atomic_store_explicit(&d->rmw_active, 1, memory_order_seq_cst);
	while ((n = atomic_load_explicit(&d->writes, memory_order_seq_cst)) != 0)
		cw_futex_wait(&d->writes, n);
}

int serve_unaligned(struct conn *c, struct slot *s)
{
	uint64_t a = c->rmw_align, off = s->io.offset, end = off + s->io.length;
	uint64_t lo = off & ~(a - 1), hi = (end + a - 1) & ~(a - 1);
	uint64_t a0 = (off + a - 1) & ~(a - 1), b0 = end & ~(a - 1);
	struct rmw_dom *d = c->exp->dom;
	int r;

	switch (s->io.op) {
	case NBDSRV_IO_READ:
		r = ensure_buf(s, (uint32_t)(hi - lo));
		if (r == 0)
			r = sync_io(c, NBDSRV_IO_READ, lo, (uint32_t)(hi - lo), s->io.buf, false,
				    false);
		if (r == 0)
			memmove(s->io.buf, (uint8_t *)s->io.buf + (off - lo), s->io.length);
		break;
	case NBDSRV_IO_TRIM:
		r = a0 < b0 ? sync_io(c, NBDSRV_IO_TRIM, a0, (uint32_t)(b0 - a0), NULL, s->io.fua,
				      true) : 0;
		break;
	case NBDSRV_IO_ZERO:
		/* Read, patch and write back is never fast. */
		if (s->io.fast_zero) {
			r = -ENOTSUP;
			break;
		}
		/* fall through */
	case NBDSRV_IO_WRITE:
		/* What this reader holds back goes out first: the wait
		 * below is for completions, which it may hold (flush_wake). */
		flush_wake(c);
		pthread_mutex_lock(&d->lock);
		rmw_hold_writes(d);
		r = rmw(c, s, s->io.op == NBDSRV_IO_WRITE ? s->io.buf : NULL);
		atomic_store_explicit(&d->rmw_active, 0, memory_order_seq_cst);
		cw_futex_wake_all(&d->rmw_active);
		pthread_mutex_unlock(&d->lock);
		break;
	default:
		r = -EINVAL;
		break;
	}
	/* The slot's own request is over: restore what the reply needs. */
	s->io.offset = off;
	return r;
}

bool unaligned(const struct conn *c, const struct cw_nbd_request *req)
{
	/* CACHE is a hint and BLOCK_STATUS answers at any offset. */
	return c->rmw_align > 1 && req->type != CW_NBD_CMD_FLUSH &&
	       req->type != CW_NBD_CMD_CACHE && req->type != CW_NBD_CMD_BLOCK_STATUS &&
	       ((req->offset | req->length) & (c->rmw_align - 1));
}

/* Counts a write in its bytes' domain before it is submitted; while a
 * read-modify-write runs on the export, waits for it to end first. */
void write_enter(struct conn *c, struct slot *s)
{
	struct rmw_dom *d = c->exp->dom;

	for (;;) {
		atomic_fetch_add_explicit(&d->writes, 1, memory_order_seq_cst);
		if (!atomic_load_explicit(&d->rmw_active, memory_order_seq_cst))
			break;
		write_leave(d);
		/* What this reader holds back goes first: the
		 * read-modify-write waits for it. */
		flush_wake(c);
		while (atomic_load_explicit(&d->rmw_active, memory_order_seq_cst))
			cw_futex_wait(&d->rmw_active, 1);
	}
	s->counted = true;
}
