/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The lane's dispatch step (clockwise/path.h): what a disk's lane does
 * with the pieces it took in, the same in clockwised's dispatchers and in
 * cwsim's simulated disks.
 *
 * With cw_sched (a disk with streams; Bosch & Mullender, sections
 * 3.1-3.3) the policy decides what starts and when: one request is in
 * service at a time (a disk is not preemptible, and the scheduling core
 * must see every request in service), and a WAIT verdict is the time to
 * ask again.  Without, the disk gets its full queue depth: the
 * best-effort order decides who goes first (it moves what may start now
 * into the FIFO), the FIFO what starts, in batches, while fewer than
 * queue_depth are in flight; an order that holds requests back (a
 * limit) says when to look again.
 *
 * Invariants: inflight counts the items cw_path_lane_next took and
 * neither cw_path_lane_done nor cw_path_lane_unstarted gave back; with
 * sched it is 0 or 1 and busy says which; without, it never passes
 * queue_depth through next.  An item is in at most one of cw_sched, the
 * order, the FIFO and flight.
 *
 * No locks, no allocation, no atomics: the caller owns the lane (one
 * dispatching thread at a time) and the items.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include <clockwise/path.h>

#include "common/invariant.h"
#include "common/util.h"

#define CHARGE_NONE_NS CW_NS_PER_MS	/* a charge the model cannot give */
#define FLUSH_AS_BYTES 4096		/* a flush is charged as a request this long */
/* Far enough ahead that no limit holds anything back. */
#define LATER_NS (INT64_MAX / 8)

int cw_path_lane_init(struct cw_path_lane *l, struct cw_sched *sched, unsigned queue_depth,
		      const struct cw_sched_beq_ops *beq, const void *beq_conf)
{
	int r;

	memset(l, 0, sizeof(*l));
	l->sched = sched;
	l->queue_depth = queue_depth;
	/* On a disk with streams the order sits inside cw_sched, within
	 * the slack; a FIFO order is the lane's own FIFO. */
	if (sched || !beq || beq == cw_sched_beq_fifo())
		return 0;
	r = beq->init(beq_conf, &l->beq_state);
	if (r < 0)
		return r;
	l->beq = beq;
	return 0;
}

void cw_path_lane_fini(struct cw_path_lane *l)
{
	if (l->beq_state)
		l->beq->fini(l->beq_state);
	l->beq_state = NULL;
	l->beq = NULL;
}

void cw_path_item_init(struct cw_path_item *it, void *user, int64_t arrival_ns)
{
	memset(&it->sr, 0, sizeof(it->sr));
	it->sr.arrival_ns = arrival_ns;
	it->sr.user = user;
	it->next = NULL;
}

void cw_path_charge_rt(struct cw_path_item *it, const struct cw_sched_stream *s, bool same_job,
		       uint64_t offset, uint64_t length)
{
	struct cw_sched_req *sr = &it->sr;

	/* cw_sched gives the release; further pieces of the same request
	 * on this disk belong to the same job */
	sr->cls = CW_SCHED_RT;
	sr->stream = s->id;
	sr->same_job = same_job;
	sr->offset_bytes = offset;	/* where dynamic's burst leaves the arm */
	sr->length_bytes = length;
	sr->period_ns = s->period_ns;
	sr->rel_deadline_ns = s->deadline_ns;
	sr->service_ns = s->service_ns;
}

void cw_path_charge_be(struct cw_path_item *it, const struct cw_model *m, uint64_t offset,
		       uint64_t length)
{
	struct cw_sched_req *sr = &it->sr;
	uint64_t n = length ? length : FLUSH_AS_BYTES;
	int64_t ns;

	sr->cls = CW_SCHED_BE;
	sr->offset_bytes = offset;
	sr->length_bytes = length;
	/* ΔL charges the bound: the request may be anywhere on the disk and
	 * the head anywhere (cw_model_service_ns) */
	sr->service_ns = cw_model_service_ns(m, 0, 0, n, &ns) < 0 ? CHARGE_NONE_NS : ns;
	/* its client's share is of the disk's time at the mean access, so
	 * that a rate in bytes per second is one share whatever the size */
	if (cw_model_mean_ns(m, n, &ns) == 0)
		sr->cost_ns = ns;
}

static void fifo_append(struct cw_path_lane *l, struct cw_path_item *it)
{
	it->next = NULL;
	if (l->fifo_tail)
		l->fifo_tail->next = it;
	else
		l->fifo = it;
	l->fifo_tail = it;
}

int cw_path_lane_push(struct cw_path_lane *l, struct cw_path_item *it, int64_t now_ns)
{
	struct cw_sched_req *sr = &it->sr;

	if (l->sched)
		return cw_sched_enqueue(l->sched, sr, now_ns);
	if (!l->beq_state) {
		fifo_append(l, it);
		return 0;
	}
	/* Without cw_sched no slack is charged: the order counts the
	 * item's cost, its service only standing in for a cost the model
	 * could not give. */
	sr->service_ns = sr->cost_ns > 0 ? sr->cost_ns : CHARGE_NONE_NS;
	return l->beq->push(l->beq_state, sr, now_ns);
}

/* Moves what the order lets start now into the FIFO, at most n; sets
 * *ret_wait when it holds requests back. */
static void order_pull(struct cw_path_lane *l, int64_t now, unsigned n, int64_t *ret_wait)
{
	const struct cw_sched_beq_ops *o = l->beq;
	struct cw_sched_req *sr;
	int64_t at;

	for (; n > 0; n--) {
		sr = o->peek(l->beq_state, now);
		if (!sr)
			break;
		o->take(l->beq_state, sr);
		sr->start_ns = now;
		fifo_append(l, CW_CONTAINER_OF(sr, struct cw_path_item, sr));
	}
	if (!n || !o->count(l->beq_state) || !o->ready_ns)
		return;
	/* held back by a limit: ask again when one may go */
	at = o->ready_ns(l->beq_state, now);
	if (at != INT64_MAX)
		*ret_wait = CW_MAX(at, now);
}

static int sched_next(struct cw_path_lane *l, int64_t now, struct cw_path_item **ret,
		      int64_t *ret_wait)
{
	struct cw_sched_decision dec;
	int r;

	if (l->busy)
		return 0;
	r = cw_sched_next(l->sched, now, &dec);
	if (r < 0)
		return r;
	if (dec.verdict == CW_SCHED_WAIT)
		*ret_wait = dec.until_ns;
	if (dec.verdict != CW_SCHED_DISPATCH)
		return 0;	/* IDLE, or BUSY (not ours: busy says so first) */
	ret[0] = CW_CONTAINER_OF(dec.req, struct cw_path_item, sr);
	l->busy = true;
	l->inflight++;
	return 1;
}

int cw_path_lane_next(struct cw_path_lane *l, int64_t now_ns, struct cw_path_item **ret,
		      unsigned max, int64_t *ret_wait_ns)
{
	unsigned room, n = 0;

	*ret_wait_ns = -1;
	if (!max)
		return 0;
	if (l->sched)
		return sched_next(l, now_ns, ret, ret_wait_ns);
	room = l->inflight < l->queue_depth ? CW_MIN(l->queue_depth - l->inflight, max) : 0;
	/* The order hands on what may start now, up to the queue depth. */
	if (l->beq_state && !l->fifo && room)
		order_pull(l, now_ns, room, ret_wait_ns);
	for (; n < room && l->fifo; n++) {
		ret[n] = l->fifo;
		l->fifo = l->fifo->next;
	}
	if (!l->fifo)
		l->fifo_tail = NULL;
	l->inflight += n;
	return (int)n;
}

void cw_path_lane_unstarted(struct cw_path_lane *l, struct cw_path_item **items, unsigned n)
{
	if (NEVER(l->sched) || NEVER(n > l->inflight))
		return;
	for (unsigned i = n; i-- > 0;) {
		items[i]->next = l->fifo;
		if (!l->fifo)
			l->fifo_tail = items[i];
		l->fifo = items[i];
	}
	l->inflight -= n;
}

int cw_path_lane_done(struct cw_path_lane *l, struct cw_path_item *it, int64_t now_ns,
		      int64_t actual_ns)
{
	int r;

	/* cw_sched refuses a request not in service: then nothing changed */
	if (l->sched && (r = cw_sched_complete(l->sched, &it->sr, now_ns, actual_ns)) < 0)
		return r;
	l->busy = false;
	/* What comes back here the lane handed out: the count has it. */
	if (!NEVER(l->inflight == 0))
		l->inflight--;
	return 0;
}

void cw_path_lane_drain(struct cw_path_lane *l)
{
	const struct cw_sched_beq_ops *o = l->beq;
	struct cw_sched_req *sr;

	if (!l->beq_state)
		return;
	while ((sr = o->peek(l->beq_state, LATER_NS))) {
		o->take(l->beq_state, sr);
		fifo_append(l, CW_CONTAINER_OF(sr, struct cw_path_item, sr));
	}
	cw_path_lane_fini(l);
}

struct cw_path_item *cw_path_lane_set_sched(struct cw_path_lane *l, struct cw_sched *sched)
{
	struct cw_path_item *all;

	/* cw_sched must see every request in service */
	(void)NEVER(l->inflight != 0);
	cw_path_lane_drain(l);
	all = l->fifo;
	l->fifo = l->fifo_tail = NULL;
	l->sched = sched;
	l->busy = false;
	return all;
}
