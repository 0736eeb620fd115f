/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The engine front end: argument checks, the depth limit, the completion
 * bookkeeping every back end shares (partial transfers, transient
 * errors), and buffers.  The engines' table is in engines.c, the devices
 * in dev.c.
 *
 * Invariant: e->inflight counts requests accepted by cw_io_submit() and not
 * yet handed back by cw_io_reap(); it never exceeds e->depth, which is also
 * what each back end sized its rings for, so a back end never runs out of
 * submission or completion slots.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include <clockwise/io.h>
#include "common/util.h"
#include "io/io-internal.h"

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
