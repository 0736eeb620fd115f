/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The conditionally preemptive space-filling-curve order of Aref,
 * El-Bassyouni, Kamel & Mokbel, sections 3.1-3.3, as a best-effort order
 * of struct cw_sched_beq_ops.
 *
 * A request becomes a point on a grid of 2^bits levels per dimension: its
 * client's priority, the time left to its deadline (none: the last level)
 * and its distance ahead of the head (one way round the disk, so that the
 * position dimension on its own is C-SCAN), each quantized when it
 * arrives; its value T is the point's position along the chosen curve.
 * The queue q holds the current cycle in order of T, q' the next cycle.
 * With T_cur the value of the request served last and w the window:
 *   T_new >= T_cur            into q (it does not preempt the cycle);
 *   T_cur - w <= T_new < T_cur into q' (higher, but not enough to preempt);
 *   T_new < T_cur - w          into q (it preempts the cycle).
 * q is served in order; when it runs dry q' becomes the next cycle.
 *   SR   (serve and resume): nothing more.
 *   SRP  (serve, resume and promote): before each dispatch from q, the
 *        head of q' goes first if it lies more than w before the head of
 *        q (the paper's Figure 5: T1, T5, T2, T6, T3, T7, T4).
 *   SS   (serve and scan): after a preempting request, q' is served in
 *        order before the cycle resumes.
 * Window: a dispatch that preempts the cycle (T below T_cur, not the
 * first of a new cycle, not part of an SS scan) widens w by e; under ER
 * any other dispatch resets w to its initial value, under AE it never
 * shrinks.  The paper leaves open what exactly counts as a preemption
 * for ER's reset ("when a disk request is served and another disk request
 * from q is dispatched"); we take "served in cycle order".
 *
 * Invariant: every queued request is in exactly one of q, q'; the
 * value of each is fixed at arrival (the paper's "inserted into a priority
 * queue according to its one-dimensional value").
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched-internal.h"
#include "common/util.h"

struct sent {
	struct cw_sched_req *req;
	uint64_t v, seq;
};

struct sheap {
	struct sent *v;
	size_t n, cap;
};

struct sclient {
	uint32_t prio;
	struct cw_sched_client_stats st;
};

struct sfc {
	struct cw_sched_sfc_conf conf;
	struct cw_sfc *curve;
	unsigned dims;
	uint64_t w0, w, e;
	struct sheap q, qw;
	bool have_cur, new_cycle, scanning;
	uint64_t cur_v, seq, head_bytes;
	struct sched_idmap clients;
	/* the last peek's choice */
	struct cw_sched_req *peeked;
	struct sheap *peeked_from;
};

/* ---- heaps by (value, arrival) -------------------------------------------- */

static bool sbefore(const struct sent *a, const struct sent *b)
{
	return a->v != b->v ? a->v < b->v : a->seq < b->seq;
}

static void sift_up(struct sheap *h, size_t i)
{
	struct sent x = h->v[i];

	while (i > 0 && sbefore(&x, &h->v[(i - 1) / 2])) {
		h->v[i] = h->v[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->v[i] = x;
}

static void sift_down(struct sheap *h, size_t i)
{
	struct sent x = h->v[i];

	for (;;) {
		size_t l = 2 * i + 1, m = l;

		if (l >= h->n)
			break;
		if (l + 1 < h->n && sbefore(&h->v[l + 1], &h->v[l]))
			m = l + 1;
		if (!sbefore(&h->v[m], &x))
			break;
		h->v[i] = h->v[m];
		i = m;
	}
	h->v[i] = x;
}

static int spush(struct sheap *h, struct sent x)
{
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 16;
		struct sent *v = realloc(h->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		h->v = v;
		h->cap = cap;
	}
	h->v[h->n++] = x;
	sift_up(h, h->n - 1);
	return 0;
}

static void sdel(struct sheap *h, size_t i)
{
	h->n--;
	if (i != h->n) {
		h->v[i] = h->v[h->n];
		sift_down(h, i);
		sift_up(h, i);
	}
}

static size_t sfind(const struct sheap *h, const struct cw_sched_req *r)
{
	for (size_t i = 0; i < h->n; i++)
		if (h->v[i].req == r)
			return i;
	return SIZE_MAX;
}

static const struct sent *stop(const struct sheap *h)
{
	return h->n ? &h->v[0] : NULL;
}

/* ---- the order ------------------------------------------------------------ */

void cw_sched_sfc_conf_init(struct cw_sched_sfc_conf *c)
{
	*c = (struct cw_sched_sfc_conf){
		.size = sizeof(*c),
		.curve = CW_SFC_HILBERT,
		.dims = CW_SFC_DIM_PRIO | CW_SFC_DIM_DEADLINE | CW_SFC_DIM_POSITION,
		.bits = 4,
		.window_ppm = 350000,
		.expand_ppm = 50000,
		.policy = CW_SFC_SRP,
		.horizon_ns = CW_NS_PER_S,
	};
}

int cw_sfc_policy_parse(const char *name, enum cw_sfc_policy *ret)
{
	static const char *const names[] = { [CW_SFC_SR] = "sr", [CW_SFC_SRP] = "srp",
					     [CW_SFC_SS] = "ss" };

	if (!name || !ret)
		return -EINVAL;
	for (size_t i = 0; i < CW_ARRAY_SIZE(names); i++)
		if (!strcmp(name, names[i])) {
			*ret = (enum cw_sfc_policy)i;
			return 0;
		}
	return -EINVAL;
}

static uint32_t level(unsigned __int128 x, unsigned __int128 scale, uint32_t n)
{
	unsigned __int128 l = scale ? x * n / scale : 0;

	return l >= n ? n - 1 : (uint32_t)l;
}

static uint64_t value(const struct sfc *f, const struct cw_sched_req *r, int64_t now)
{
	const struct sclient *c = sched_idmap_get(&f->clients, r->client);
	uint32_t n = UINT32_C(1) << f->conf.bits, pt[3];
	unsigned k = 0;

	if (f->conf.dims & CW_SFC_DIM_PRIO)
		pt[k++] = CW_MIN(c ? c->prio : 0, n - 1);
	if (f->conf.dims & CW_SFC_DIM_DEADLINE) {
		if (!r->be_deadline_ns)
			pt[k++] = n - 1;
		else if (r->be_deadline_ns <= now)
			pt[k++] = 0;
		else
			pt[k++] = level((uint64_t)(r->be_deadline_ns - now), (uint64_t)f->conf.horizon_ns, n);
	}
	if (f->conf.dims & CW_SFC_DIM_POSITION) {
		uint64_t cap = f->conf.capacity_bytes;
		uint64_t off = r->offset_bytes % cap, head = f->head_bytes % cap;

		pt[k++] = level(off >= head ? off - head : cap - head + off, cap, n);
	}
	return cw_sfc_index(f->curve, pt);
}

/* a < b - w, without overflow */
static bool far_before(uint64_t a, uint64_t b, uint64_t w)
{
	return b > w && a < b - w;
}

static int sfc_push(void *st, struct cw_sched_req *r, int64_t now)
{
	struct sfc *f = st;
	struct sent x = { .req = r, .v = value(f, r, now), .seq = f->seq++ };

	/* T_cur stays the one served last even when the queues are empty: it
	 * may still be in service (the paper's Figure 5) */
	if (!f->have_cur || x.v >= f->cur_v || far_before(x.v, f->cur_v, f->w))
		return spush(&f->q, x);
	return spush(&f->qw, x);	/* inside the window */
}

static struct cw_sched_req *sfc_peek(void *st, int64_t now)
{
	struct sfc *f = st;
	const struct sent *a, *b;

	if (f->q.n == 0 && f->qw.n) {
		/* the cycle is over: the waiting queue is the next one */
		struct sheap t = f->q;

		f->q = f->qw;
		f->qw = t;
		f->new_cycle = true;
		f->scanning = false;
	}
	if (f->scanning && f->qw.n == 0)
		f->scanning = false;
	a = stop(&f->q);
	b = stop(&f->qw);
	f->peeked_from = &f->q;
	if (b && (f->scanning || (f->conf.policy == CW_SFC_SRP && far_before(b->v, a->v, f->w))))
		f->peeked_from = &f->qw;
	f->peeked = f->peeked_from->n ? f->peeked_from->v[0].req : NULL;
	return f->peeked;
}

static void sfc_take(void *st, struct cw_sched_req *r)
{
	struct sfc *f = st;
	struct sheap *h = r == f->peeked ? f->peeked_from : &f->q;
	size_t i = sfind(h, r);
	struct sclient *c = sched_idmap_get(&f->clients, r->client);
	uint64_t v;
	bool scan = f->scanning && h == &f->qw;

	if (i == SIZE_MAX) {
		h = h == &f->q ? &f->qw : &f->q;
		if ((i = sfind(h, r)) == SIZE_MAX)
			return;
	}
	v = h->v[i].v;
	sdel(h, i);
	if (f->have_cur && !f->new_cycle && !scan && v < f->cur_v) {
		/* a preemption of the cycle: widen the window (AE and ER) */
		f->w = f->w > UINT64_MAX - f->e ? UINT64_MAX : f->w + f->e;
		if (f->conf.policy == CW_SFC_SS && h == &f->q)
			f->scanning = true;
	} else if (!f->conf.always_expand)
		f->w = f->w0;	/* ER: served in cycle order */
	f->cur_v = v;
	f->have_cur = true;
	f->new_cycle = false;
	f->head_bytes = r->offset_bytes + r->length_bytes;
	f->peeked = NULL;
	r->phase = CW_SCHED_PHASE_ORDER;
	if (c) {
		c->st.requests++;
		c->st.served_ns += cw_sched_req_cost(r);
	}
}

static int sfc_remove(void *st, struct cw_sched_req *r)
{
	struct sfc *f = st;
	size_t i;

	if (f->peeked == r)
		f->peeked = NULL;
	if ((i = sfind(&f->q, r)) != SIZE_MAX) {
		sdel(&f->q, i);
		return 0;
	}
	if ((i = sfind(&f->qw, r)) != SIZE_MAX) {
		sdel(&f->qw, i);
		return 0;
	}
	return -ENOENT;
}

static size_t sfc_count(const void *st)
{
	const struct sfc *f = st;

	return f->q.n + f->qw.n;
}

static int sfc_set_client(void *st, uint64_t id, const struct cw_sched_client *qos)
{
	struct sfc *f = st;
	struct sclient *c = sched_idmap_get(&f->clients, id);
	int e = cw_sched_client_check(qos);

	if (e < 0)
		return e;
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c)
			return -ENOMEM;
		e = sched_idmap_put(&f->clients, id, c);
		if (e < 0) {
			free(c);
			return e;
		}
	}
	c->prio = qos->prio;
	return 0;
}

static int sfc_client_stats(const void *st, uint64_t id, struct cw_sched_client_stats *ret)
{
	const struct sfc *f = st;
	const struct sclient *c = sched_idmap_get(&f->clients, id);

	if (!c)
		return -ENOENT;
	*ret = c->st;
	ret->queued = 0;
	for (size_t i = 0; i < f->q.n; i++)
		ret->queued += f->q.v[i].req->client == id;
	for (size_t i = 0; i < f->qw.n; i++)
		ret->queued += f->qw.v[i].req->client == id;
	return 0;
}

static int sfc_init(const void *conf, void **ret)
{
	const struct cw_sched_sfc_conf *cf = conf;
	struct cw_sched_sfc_conf def;
	struct sfc *f;
	unsigned dims;
	uint64_t len;
	int e;

	if (!cf) {
		/* no disk size known: priority and deadline only */
		cw_sched_sfc_conf_init(&def);
		def.dims &= ~(unsigned)CW_SFC_DIM_POSITION;
		cf = &def;
	}
	if ( cf->size < sizeof(*cf) || !cf->dims || (cf->dims & ~7u) ||
	    ((cf->dims & CW_SFC_DIM_POSITION) && !cf->capacity_bytes) ||
	    ((cf->dims & CW_SFC_DIM_DEADLINE) && cf->horizon_ns <= 0) ||
	    cf->window_ppm > CW_SCHED_PPM || (unsigned)cf->policy > CW_SFC_SS)
		return -EINVAL;
	dims = (unsigned)__builtin_popcount(cf->dims);
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->conf = *cf;
	f->dims = dims;
	e = cw_sfc_new(cf->curve, dims, cf->bits, &f->curve);
	if (e < 0) {
		free(f);
		return e;
	}
	len = cw_sfc_length(f->curve);
	f->w0 = (uint64_t)((unsigned __int128)len * cf->window_ppm / CW_SCHED_PPM);
	f->e = (uint64_t)((unsigned __int128)f->w0 * cf->expand_ppm / CW_SCHED_PPM);
	f->w = f->w0;
	*ret = f;
	return 0;
}

static void sfc_fini(void *st)
{
	struct sfc *f = st;

	if (!f)
		return;
	cw_sfc_free(f->curve);
	free(f->q.v);
	free(f->qw.v);
	sched_idmap_done(&f->clients, free);
	free(f);
}

static const struct cw_sched_beq_ops sfc_ops = {
	.name = "sfc",
	.init = sfc_init,
	.fini = sfc_fini,
	.push = sfc_push,
	.peek = sfc_peek,
	.take = sfc_take,
	.remove = sfc_remove,
	.count = sfc_count,
	.set_client = sfc_set_client,
	.client_stats = sfc_client_stats,
};

const struct cw_sched_beq_ops *cw_sched_beq_sfc(void)
{
	return &sfc_ops;
}
