/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The best-effort queue in arrival order (FIFO), the first implementation
 * of struct cw_sched_beq_ops.  The policies only ever look at the head, so
 * another order (proportional shares, a space-filling curve) is another
 * ops struct, not a change to sched.c.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/sched-beq.h>

#include "sched/sched-internal.h"

struct fifo {
	struct cw_sched_req **v;
	size_t head, tail, cap;
};

static int fifo_init(const void *conf, void **ret)
{
	struct fifo *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	*ret = f;
	return 0;
}

static void fifo_fini(void *st)
{
	struct fifo *f = st;

	if (f)
		free(f->v);
	free(f);
}

static int fifo_push(void *st, struct cw_sched_req *req, int64_t now_ns)
{
	struct fifo *f = st;

	if (f->tail == f->cap) {
		if (f->head > f->cap / 2) {
			/* mostly consumed: slide down instead of growing */
			memmove(f->v, f->v + f->head, (f->tail - f->head) * sizeof(*f->v));
			f->tail -= f->head;
			f->head = 0;
		} else {
			size_t cap = f->cap ? f->cap * 2 : 16;
			struct cw_sched_req **v = realloc(f->v, cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			f->v = v;
			f->cap = cap;
		}
	}
	f->v[f->tail++] = req;
	return 0;
}

static struct cw_sched_req *fifo_peek(void *st, int64_t now_ns)
{
	struct fifo *f = st;

	return f->head < f->tail ? f->v[f->head] : NULL;
}

static void fifo_take(void *st, struct cw_sched_req *req)
{
	struct fifo *f = st;

	if (f->head < f->tail && f->v[f->head] == req)
		f->head++;
	if (f->head == f->tail)
		f->head = f->tail = 0;
}

static int fifo_remove(void *st, struct cw_sched_req *req)
{
	struct fifo *f = st;

	for (size_t i = f->head; i < f->tail; i++)
		if (f->v[i] == req) {
			memmove(f->v + i, f->v + i + 1, (f->tail - i - 1) * sizeof(*f->v));
			f->tail--;
			if (f->head == f->tail)
				f->head = f->tail = 0;
			return 0;
		}
	return -ENOENT;
}

static size_t fifo_count(const void *st)
{
	const struct fifo *f = st;

	return f->tail - f->head;
}

static const struct cw_sched_beq_ops fifo_ops = {
	.name = "fifo",
	.init = fifo_init,
	.fini = fifo_fini,
	.push = fifo_push,
	.peek = fifo_peek,
	.take = fifo_take,
	.remove = fifo_remove,
	.count = fifo_count,
};

const struct cw_sched_beq_ops *cw_sched_beq_fifo(void)
{
	return &fifo_ops;
}

/* ---- what every order uses of a request and a client ---- */

int64_t cw_sched_req_cost(const struct cw_sched_req *r)
{
	return r->cost_ns > 0 ? r->cost_ns : r->service_ns;
}

int cw_sched_client_check(const struct cw_sched_client *q)
{
	uint64_t most = (uint64_t)CW_SCHED_PPM * (q && q->spread ? CW_SCHED_SPREAD_MAX : 1);

	if (!q || q->weight < 1 || q->resv_ppm > most || q->limit_ppm > most ||
	    (q->limit_ppm && q->limit_ppm < q->resv_ppm) || q->idle_credit_ns < 0 ||
	    q->idle_credit_ns > INT64_MAX / CW_SCHED_PPM / 4)
		return -EINVAL;
	return 0;
}
