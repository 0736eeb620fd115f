/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The io_uring back end.  One ring per engine, sized to its depth, so the
 * submission ring always has room for every request in flight (including
 * a resubmitted remainder) and the completion ring (twice as large) never
 * overflows.  A batch costs one io_uring_enter; a reap that finds
 * completions already posted costs none.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <linux/falloc.h>
#include <liburing.h>

#include "common/util.h"
#include "io/io-internal.h"

struct uring_engine {
	struct cw_io_engine head;	/* first: the front end's view */
	struct io_uring ring;
};

static struct uring_engine *to_uring(struct cw_io_engine *e)
{
	return (struct uring_engine *)e;
}

static int uring_new(unsigned depth, struct cw_io_engine **ret_engine)
{
	struct uring_engine *u;
	int r;

	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	r = io_uring_queue_init(depth, &u->ring, 0);
	if (r < 0) {
		free(u);
		return r;
	}
	*ret_engine = &u->head;
	return 0;
}

static void uring_free(struct cw_io_engine *e)
{
	struct uring_engine *u = to_uring(e);

	io_uring_queue_exit(&u->ring);
	free(u);
}

/* Fills an SQE for what is left of q.  There is always one: the ring holds
 * depth entries and at most depth requests are in flight. */
static void uring_prep(struct uring_engine *u, struct cw_io_req *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	void *buf;
	uint64_t off;
	size_t len = cw_io_req_next(q, &buf, &off);

	switch (q->op) {
	case CW_IO_READ:
		io_uring_prep_read(sqe, q->fd, buf, (unsigned)len, off);
		break;
	case CW_IO_WRITE:
		io_uring_prep_write(sqe, q->fd, buf, (unsigned)len, off);
		break;
	case CW_IO_FSYNC:
		io_uring_prep_fsync(sqe, q->fd, IORING_FSYNC_DATASYNC);
		break;
	case CW_IO_PUNCH:
		/* Whole, however long: a punch done again is the same punch. */
		io_uring_prep_fallocate(sqe, q->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					(off_t)q->off, (off_t)q->len);
		break;
	}
	io_uring_sqe_set_data(sqe, q);
}

/* Hands prepared SQEs to the kernel.  EAGAIN/EBUSY/EINTR/ENOMEM leave them
 * queued in the ring for the next call; they are not lost. */
static int uring_flush(struct uring_engine *u)
{
	int r;

	if (io_uring_sq_ready(&u->ring) == 0)
		return 0;
	r = io_uring_submit(&u->ring);
	if (r == -EAGAIN || r == -EBUSY || r == -EINTR || r == -ENOMEM)
		return 0;
	return r < 0 ? r : 0;
}

static int uring_submit(struct cw_io_engine *e, struct cw_io_req **reqs, unsigned n)
{
	struct uring_engine *u = to_uring(e);
	unsigned i;
	int r;

	for (i = 0; i < n; i++)
		uring_prep(u, reqs[i]);
	r = uring_flush(u);
	return r < 0 ? r : (int)n;
}

/* Moves posted completions into ret_reqs (at most max); remainders of
 * partial or transiently failed requests are prepared again. */
static unsigned uring_collect(struct uring_engine *u, struct cw_io_req **ret_reqs, unsigned max)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0, got = 0;

	io_uring_for_each_cqe(&u->ring, head, cqe) {
		struct cw_io_req *q;

		if (got == max)
			break;
		q = io_uring_cqe_get_data(cqe);
		seen++;
		if (cw_io_req_account(q, cqe->res))
			ret_reqs[got++] = q;
		else
			uring_prep(u, q);
	}
	io_uring_cq_advance(&u->ring, seen);
	return got;
}

static int uring_reap(struct cw_io_engine *e, unsigned min_complete, int64_t deadline_ns,
		      struct cw_io_req **ret_reqs, unsigned max)
{
	struct uring_engine *u = to_uring(e);
	unsigned got = 0;

	for (;;) {
		struct io_uring_cqe *cqe;
		struct timespec ts;
		struct __kernel_timespec kts, *tsp = NULL;
		int r;

		got += uring_collect(u, ret_reqs + got, max - got);
		r = uring_flush(u);
		if (r < 0)
			return got ? (int)got : r;
		if (got >= min_complete || got == max || deadline_ns == CW_IO_POLL)
			return (int)got;
		if (deadline_ns != CW_IO_FOREVER) {
			if (!cw_io_remaining(deadline_ns, &ts))
				return (int)got;
			kts.tv_sec = ts.tv_sec;
			kts.tv_nsec = ts.tv_nsec;
			tsp = &kts;
		}
		r = io_uring_wait_cqes(&u->ring, &cqe, min_complete - got, tsp, NULL);
		if (r == -ETIME || r == -EINTR)
			continue;	/* the deadline check above decides */
		if (r < 0)
			return got ? (int)got : r;
	}
}

const struct cw_io_ops cw_io_uring_ops = {
	.name = "io_uring",
	.engine_new = uring_new,
	.engine_free = uring_free,
	.submit = uring_submit,
	.reap = uring_reap,
};
