/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The libaio back end (Linux native AIO).  Each engine owns depth iocbs on
 * a free stack.  A batch costs one io_submit.  Completions are read straight
 * from the completion ring the kernel maps into the process (struct
 * aio_ring in fs/aio.c, ABI since 2.6.x), so a reap that finds completions
 * posted costs no system call; io_getevents is only used to sleep.
 *
 * io_submit refuses a bad request (bad fd, bad opcode) synchronously: such
 * a request is accepted anyway and comes back from reap with the error in
 * res, as it would from io_uring.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <libaio.h>

#include "common/atomic.h"
#include "common/util.h"
#include "io/io-internal.h"

/* The kernel's completion ring header (fs/aio.c struct aio_ring). */
struct aio_uring {
	unsigned id;
	unsigned nr;
	unsigned head;
	unsigned tail;
	unsigned magic;
	unsigned compat_features;
	unsigned incompat_features;
	unsigned header_length;
	struct io_event io_events[];
};
#define AIO_RING_MAGIC 0xa10a10a1u

struct aio_engine {
	struct cw_io_engine head;	/* first: the front end's view */
	io_context_t ctx;
	struct aio_uring *uring;	/* NULL: the kernel's ring is not readable */
	struct iocb *iocbs;
	struct iocb **free;		/* stack of unused iocbs */
	unsigned nfree;
	struct iocb **batch;		/* io_submit's argument */
	struct io_event *events;
	/* Requests io_submit refused, waiting to be reaped (a FIFO ring). */
	struct cw_io_fifo failed;
};

static struct aio_engine *to_aio(struct cw_io_engine *e)
{
	return (struct aio_engine *)e;
}

static void aio_free(struct cw_io_engine *e)
{
	struct aio_engine *a = to_aio(e);

	if (!a)
		return;
	if (a->ctx)
		io_destroy(a->ctx);
	free(a->iocbs);
	free(a->free);
	free(a->batch);
	free(a->events);
	free(a->failed.q);
	free(a);
}

static int aio_new(unsigned depth, struct cw_io_engine **ret_engine)
{
	struct aio_engine *a;
	struct aio_uring *ring;
	unsigned i;
	int r;

	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->iocbs = calloc(depth, sizeof(*a->iocbs));
	a->free = calloc(depth, sizeof(*a->free));
	a->batch = calloc(depth, sizeof(*a->batch));
	a->events = calloc(depth, sizeof(*a->events));
	a->failed.q = calloc(depth, sizeof(*a->failed.q));
	if (!a->iocbs || !a->free || !a->batch || !a->events || !a->failed.q) {
		aio_free(&a->head);
		return -ENOMEM;
	}
	r = io_setup((int)depth, &a->ctx);
	if (r < 0) {
		a->ctx = 0;
		aio_free(&a->head);
		return r;
	}
	for (i = 0; i < depth; i++)
		a->free[i] = &a->iocbs[depth - 1 - i];
	a->nfree = depth;
	ring = (struct aio_uring *)a->ctx;
	if (ring->magic == AIO_RING_MAGIC && ring->incompat_features == 0)
		a->uring = ring;
	*ret_engine = &a->head;
	return 0;
}

static void aio_prep(struct iocb *cb, struct cw_io_req *q)
{
	void *buf;
	uint64_t off;
	size_t len = cw_io_req_next(q, &buf, &off);

	switch (q->op) {
	case CW_IO_READ:
		io_prep_pread(cb, q->fd, buf, len, (long long)off);
		break;
	case CW_IO_WRITE:
		io_prep_pwrite(cb, q->fd, buf, len, (long long)off);
		break;
	case CW_IO_FSYNC:
		io_prep_fdsync(cb, q->fd);
		break;
	case CW_IO_PUNCH:
		break;	/* aio_submit does it at once: libaio has no fallocate */
	}
	cb->data = q;
}

static void aio_fail(struct aio_engine *a, struct cw_io_req *q)
{
	cw_io_fifo_push(&a->failed, a->head.depth, q);
}

/* Submits what is left of q on its own (a resubmitted remainder).  Returns
 * false when q is finished instead, with its error in res. */
static bool aio_resubmit(struct aio_engine *a, struct iocb *cb, struct cw_io_req *q)
{
	for (;;) {
		int r;

		aio_prep(cb, q);
		r = io_submit(a->ctx, 1, &cb);
		if (r == 1)
			return true;
		if (cw_io_req_account(q, r == 0 ? -EAGAIN : r))
			return false;
	}
}

static int aio_submit(struct cw_io_engine *e, struct cw_io_req **reqs, unsigned n)
{
	struct aio_engine *a = to_aio(e);
	unsigned i, done = 0;

	/* A PUNCH at the head is done here and waits for reap with the
	 * refused ones; the rest of the batch goes to the kernel up to the
	 * next PUNCH, which a later call takes. */
	while (n > 0 && reqs[0]->op == CW_IO_PUNCH) {
		while (!cw_io_req_account(reqs[0], cw_io_punch_now(reqs[0])))
			;
		aio_fail(a, reqs[0]);
		reqs++;
		n--;
		done++;
	}
	if (done)
		return (int)done;
	for (i = 0; i < n && reqs[i]->op != CW_IO_PUNCH; i++)
		;
	n = i;
	for (i = 0; i < n; i++) {
		struct iocb *cb = a->free[--a->nfree];

		aio_prep(cb, reqs[i]);
		a->batch[i] = cb;
	}
	while (done < n) {
		int r = io_submit(a->ctx, (long)(n - done), a->batch + done);

		if (r > 0) {
			done += (unsigned)r;
			continue;
		}
		if (r == -EINTR)
			continue;
		if (r == -EAGAIN || r == 0)
			break;
		/* The first request is refused on its own merits: it fails. */
		a->free[a->nfree++] = a->batch[done];
		aio_fail(a, reqs[done]);
		reqs[done]->res = r;
		done++;
	}
	/* Whatever the kernel would not take goes back unsubmitted. */
	for (i = done; i < n; i++)
		a->free[a->nfree++] = a->batch[i];
	return done ? (int)done : -EAGAIN;
}

/* Up to max posted completions, read from the mapped ring. */
static unsigned aio_peek(struct aio_engine *a, unsigned max)
{
	struct aio_uring *ring = a->uring;
	unsigned head, tail, n = 0;
	struct timespec zero = { 0, 0 };
	int r;

	if (!ring) {
		r = io_getevents(a->ctx, 0, (long)max, a->events, &zero);
		return r > 0 ? (unsigned)r : 0;
	}
	head = ring->head;
	tail = cw_pr_load_acquire(&ring->tail);
	while (head != tail && n < max) {
		a->events[n++] = ring->io_events[head];
		head = (head + 1) % ring->nr;
	}
	cw_pr_store_release(&ring->head, head);
	return n;
}

/* Turns n events into finished requests in ret_reqs; returns how many. */
static unsigned aio_complete(struct aio_engine *a, unsigned n, struct cw_io_req **ret_reqs)
{
	unsigned i, got = 0;

	for (i = 0; i < n; i++) {
		struct io_event *ev = &a->events[i];
		struct cw_io_req *q = ev->data;
		struct iocb *cb = ev->obj;

		if (!cw_io_req_account(q, (long)ev->res) && aio_resubmit(a, cb, q))
			continue;
		a->free[a->nfree++] = cb;
		ret_reqs[got++] = q;
	}
	return got;
}

static int aio_reap(struct cw_io_engine *e, unsigned min_complete, int64_t deadline_ns,
		    struct cw_io_req **ret_reqs, unsigned max)
{
	struct aio_engine *a = to_aio(e);
	unsigned got = cw_io_fifo_pop(&a->failed, e->depth, ret_reqs, max);

	for (;;) {
		struct timespec ts, *tsp = NULL;
		int r;

		got += aio_complete(a, aio_peek(a, max - got), ret_reqs + got);
		if (got >= min_complete || got == max || deadline_ns == CW_IO_POLL)
			return (int)got;
		if (deadline_ns != CW_IO_FOREVER) {
			if (!cw_io_remaining(deadline_ns, &ts))
				return (int)got;
			tsp = &ts;
		}
		r = io_getevents(a->ctx, (long)(min_complete - got), (long)(max - got), a->events, tsp);
		if (r == -EINTR)
			continue;
		if (r < 0)
			return got ? (int)got : r;
		got += aio_complete(a, (unsigned)r, ret_reqs + got);
	}
}

const struct cw_io_ops cw_io_aio_ops = {
	.name = "libaio",
	.engine_new = aio_new,
	.engine_free = aio_free,
	.submit = aio_submit,
	.reap = aio_reap,
};
