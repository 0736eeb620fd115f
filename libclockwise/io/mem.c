/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The memory back end, for disk files on a memory file system (tmpfs,
 * ramfs).  There a read or a write is a copy between the page cache and
 * the caller's buffer that never waits for a device: io_uring hands each
 * one to a kernel worker thread (two wake-ups a request) and libaio does
 * the copy inline but pays for an iocb, its accounting and the completion
 * ring around it.  This back end does the copy itself with one pread or
 * pwrite inside submit and keeps the finished requests in a FIFO that
 * reap hands back, so the callers see the same submit/reap contract.
 *
 * It is never chosen for a file that can block on a device or a network
 * (cw_io_kind_for_fd checks the file system); a caller that creates one by
 * hand for such a file gets synchronous I/O.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "io/io-internal.h"

struct mem_engine {
	struct cw_io_engine head;	/* first: the front end's view */
	struct cw_io_fifo done;		/* every request in flight: all finished */
};

static struct mem_engine *to_mem(struct cw_io_engine *e)
{
	return (struct mem_engine *)e;
}

static int mem_new(unsigned depth, struct cw_io_engine **ret_engine)
{
	struct mem_engine *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->done.q = calloc(depth, sizeof(*m->done.q));
	if (!m->done.q) {
		free(m);
		return -ENOMEM;
	}
	*ret_engine = &m->head;
	return 0;
}

static void mem_free(struct cw_io_engine *e)
{
	struct mem_engine *m = to_mem(e);

	free(m->done.q);
	free(m);
}

/* Runs q to its end: the remainders of short transfers and the bounded
 * transient retries go through the same accounting as the other back ends. */
static void mem_run(struct cw_io_req *q)
{
	for (;;) {
		void *buf;
		uint64_t off;
		size_t len = cw_io_req_next(q, &buf, &off);
		ssize_t r;

		switch (q->op) {
		case CW_IO_READ:
			r = pread(q->fd, buf, len, (off_t)off);
			break;
		case CW_IO_WRITE:
			r = pwrite(q->fd, buf, len, (off_t)off);
			break;
		case CW_IO_PUNCH:
			r = cw_io_punch_now(q);
			break;
		default:
			r = fdatasync(q->fd);
			break;
		}
		if (cw_io_req_account(q, r < 0 ? -errno : r))
			return;
	}
}

static int mem_submit(struct cw_io_engine *e, struct cw_io_req **reqs, unsigned n)
{
	struct mem_engine *m = to_mem(e);
	unsigned i;

	for (i = 0; i < n; i++) {
		mem_run(reqs[i]);
		cw_io_fifo_push(&m->done, e->depth, reqs[i]);
	}
	return (int)n;
}

static int mem_reap(struct cw_io_engine *e, unsigned min_complete, int64_t deadline_ns,
		    struct cw_io_req **ret_reqs, unsigned max)
{
	struct mem_engine *m = to_mem(e);
	unsigned got = cw_io_fifo_pop(&m->done, e->depth, ret_reqs, max);
	struct timespec ts;

	/* Everything submitted is finished, so without a deadline
	 * min_complete (at most what is in flight) is always there; a timed
	 * wait for more than there is waits its time, as the others do. */
	if (got < min_complete && deadline_ns > 0)
		while (cw_io_remaining(deadline_ns, &ts) &&
		       nanosleep(&ts, NULL) < 0 && errno == EINTR)
			;
	return (int)got;
}

const struct cw_io_ops cw_io_mem_ops = {
	.name = "memory",
	.engine_new = mem_new,
	.engine_free = mem_free,
	.submit = mem_submit,
	.reap = mem_reap,
};
