/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A request of the data path (struct preq) from its memory to its end,
 * below both the submission (submit.c), which makes and fills it, and the
 * lanes (lane.c), which complete its pieces and push a FUA write's flush
 * phase: the last piece done ends it here (preq_finish), and nothing here
 * calls back up into either.
 *
 * Each thread that books pieces has a descriptor: its booking context in
 * the pool's slot domain (lane_push) and its spare small requests (the
 * memory of a request is kept on the thread that makes the next one).
 */
#include "config.h"

#include "daemon/path/pool-internal.h"

static pthread_key_t ctx_key;
static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;

/* A thread's booking descriptor; freed when the thread ends. */
struct tctx {
	struct cw_slots_ctx *ctx;
	struct pb *pb;
	struct preq *spare;	/* small requests to reuse (preq_get) */
};

static void ctx_free(void *arg)
{
	struct tctx *t = arg;
	struct pb *pb = t->pb;

	while (t->spare) {
		struct preq *q = t->spare;

		t->spare = q->next_spare;
		free(q);
	}
	cw_slots_ctx_free(t->ctx);
	free(t);
	atomic_fetch_sub(&pb->live_ctx, 1);	/* pb_free waits for this */
}

static void ctx_key_init(void)
{
	if (pthread_key_create(&ctx_key, ctx_free) != 0)
		abort();	/* only at start, with no key left: nothing can run */
}

void pb_thread_ctx_init_once(void)
{
	pthread_once(&ctx_once, ctx_key_init);
}

/* This thread's descriptor in the domain, made on first use and freed when
 * the thread ends (connection threads come and go). */
static struct tctx *thread_tctx(struct pb *pb)
{
	struct tctx *t = pthread_getspecific(ctx_key);

	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->pb = pb;
	if (cw_slots_ctx_new(pb->domain, &t->ctx) < 0) {
		free(t);
		return NULL;
	}
	atomic_fetch_add(&pb->live_ctx, 1);
	pthread_setspecific(ctx_key, t);
	return t;
}

struct cw_slots_ctx *pb_thread_ctx(struct pb *pb)
{
	struct tctx *t = thread_tctx(pb);

	return t ? t->ctx : NULL;
}

/* Small requests (PREQ_SMALL_PIECES pieces) are not freed but kept for the
 * next one: a dispatcher returns them to the pool's stack (one CAS push),
 * and a submitting thread takes that whole stack at once into its own list
 * when its list is empty.  So a request costs no malloc once warm, and the
 * stack, only ever taken whole, cannot suffer ABA. */
static struct preq *preq_get(struct pb *pb)
{
	struct tctx *t = thread_tctx(pb);
	struct preq *q;

	if (t && !t->spare)
		t->spare = atomic_exchange(&pb->spare, NULL);
	if (!t || !t->spare)
		return malloc(sizeof(*q) + PREQ_SMALL_PIECES * sizeof(struct piece));
	q = t->spare;
	t->spare = q->next_spare;
	return q;
}

static void preq_put(struct pb *pb, struct preq *q)
{
	struct preq *head = atomic_load(&pb->spare);

	do {
		q->next_spare = head;
	} while (!atomic_compare_exchange_weak(&pb->spare, &head, q));
}

struct preq *preq_new(struct pb *pb, size_t npieces)
{
	struct preq *q;

	if (npieces <= PREQ_SMALL_PIECES) {
		q = preq_get(pb);
		if (q)
			q->small = true;
		return q;
	}
	q = malloc(sizeof(*q) + npieces * sizeof(struct piece));
	if (q)
		q->small = false;
	return q;
}

void preq_free(struct preq *q)
{
	if (q->small)
		preq_put(q->x->pb, q);
	else
		free(q);
}

/* An RT request whose pieces were all done in time must have its reply
 * leave in time too: the latest deadline of its pieces and one of their
 * lanes go with it to the NBD server, which says when it did not
 * (pb_reply_late).  Every piece is done: their fields are settled. */
static void rt_deadline(struct preq *q)
{
	int64_t deadline = 0, ready = 0;
	struct lane *l = NULL;

	for (unsigned i = 0; i < q->npieces; i++) {
		const struct piece *p = &q->p[i];

		if (!p->rt)
			continue;
		if (p->done_ns > p->sr.deadline_ns)
			return;	/* counted as the lane's miss already */
		deadline = CW_MAX(deadline, p->sr.deadline_ns);
		ready = CW_MAX(ready, p->done_ns);
		l = p->lane;
	}
	if (l) {
		q->nio->deadline_ns = deadline;
		q->nio->ready_ns = ready;
		q->nio->backend_data = l;
	}
}

void preq_finish(struct preq *q)
{
	int err = atomic_load(&q->err);

	if (q->intent_len)
		cw_part_intent_end(q->x->part, q->intent_off, q->intent_len);
	if (q->gate)
		cw_part_io_end(q->gate, q->gate_ticket);
	if (q->done) {
		q->done(q->done_arg, err);
	} else {
		if (!err)
			rt_deadline(q);
		nbdsrv_io_complete(q->nio, err);
	}
	preq_free(q);
}
