/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The best-effort order of a lane: which export's piece goes next when
 * several wait (clockwise/sched-beq.h: FIFO, RBFQ shares, SFC).
 *
 * Each export is one client of every disk's order.  A piece costs the disk
 * model's mean service time of its length (cw_model_mean_ns), so that an
 * export's share is of the disk's time and a rate in bytes per second is
 * one share whatever the request size; its QoS on the disk comes from the
 * admission state (struct pbx_be) and reaches the order the first time
 * the dispatcher sees a piece of the export after a change.
 *
 * On a disk with streams the order sits inside cw_sched, within the ΔL
 * slack.  On a disk without, the lane's dispatcher keeps it itself and
 * moves pieces from it to the lane's submission list while fewer than
 * queue_depth are in flight: the order decides who goes first, the disk
 * still gets its full queue depth.  A lane ordered FIFO keeps none and
 * pieces go straight to the submission list, as before.
 *
 * Everything here runs on the lane's dispatcher (or a reader holding its
 * dispatch lock): no atomics beyond reading the export's QoS pointer.
 */
#include "config.h"

#include "daemon/pool-internal.h"

int lane_beq_new(struct lane *l)
{
	const struct disk *d = l->disk;

	if (!d->be_order || d->be_order == cw_sched_beq_fifo())
		return 0;
	return d->be_order->init(d->be_order == cw_sched_beq_sfc() ? &d->sfc : NULL, &l->beq);
}

void lane_beq_free(struct lane *l)
{
	if (l->beq)
		l->disk->be_order->fini(l->beq);
	l->beq = NULL;
	free(l->client_gen);
	l->client_gen = NULL;
	l->n_client_gen = 0;
}

/* Gives the order the export's QoS on this disk if it changed since. */
static void client_update(struct lane *l, const struct pbx *x)
{
	const struct pbx_be *be = atomic_load_explicit(&x->be, memory_order_acquire);
	int di = pb_disk_index(l->pb, l->disk->id);
	static const struct cw_sched_client plain = { .weight = 1 };
	uint64_t gen = be ? be->gen : 0;
	int r;

	if (x->client >= l->n_client_gen) {
		size_t n = CW_MAX(x->client + 1, 2 * l->n_client_gen);
		uint64_t *v = realloc(l->client_gen, n * sizeof(*v));

		if (!v)
			return;	/* it keeps the QoS it had */
		memset(v + l->n_client_gen, 0, (n - l->n_client_gen) * sizeof(*v));
		l->client_gen = v;
		l->n_client_gen = n;
	}
	if (l->client_gen[x->client] == gen || di < 0)
		return;
	if (l->sched)
		r = cw_sched_set_client(l->sched, x->client,
					be && be->has[di] ? &be->client[di] : &plain);
	else
		r = l->disk->be_order->set_client(l->beq, x->client,
						  be && be->has[di] ? &be->client[di] : &plain);
	if (r == 0 || r == -EOPNOTSUPP)
		l->client_gen[x->client] = gen;
	else
		cwd_log(LOG_ERR, "disk %s: export %s: cannot set its best-effort QoS: %s",
			l->disk->name, x->name, strerror(-r));
}

void lane_be_fill(struct lane *l, struct piece *p)
{
	struct cw_sched_req *sr = &p->sr;
	int64_t cost;

	sr->client = p->req->x->client;
	sr->offset_bytes = p->io.off;
	sr->length_bytes = p->io.len;
	if (cw_model_mean_ns(disk_model(l->disk), p->io.len ? p->io.len : 4096, &cost) == 0)
		sr->cost_ns = cost;
	if (l->sched ? l->disk->be_order && l->disk->be_order != cw_sched_beq_fifo() : !!l->beq)
		client_update(l, p->req->x);
}

int lane_beq_push(struct lane *l, struct piece *p, int64_t now)
{
	struct cw_sched_req *sr = &p->sr;

	memset(sr, 0, sizeof(*sr));
	sr->cls = CW_SCHED_BE;
	sr->arrival_ns = p->req->arrival_ns;
	sr->user = p;
	lane_be_fill(l, p);
	sr->service_ns = sr->cost_ns > 0 ? sr->cost_ns : CW_NS_PER_MS;
	return l->disk->be_order->push(l->beq, sr, now);
}

void lane_beq_pull(struct lane *l, int64_t now, unsigned n, int64_t *ret_wait)
{
	const struct cw_sched_beq_ops *o = l->disk->be_order;
	struct cw_sched_req *sr;

	*ret_wait = -1;
	if (!l->beq)
		return;
	for (; n > 0; n--) {
		sr = o->peek(l->beq, now);
		if (!sr)
			break;
		o->take(l->beq, sr);
		sr->start_ns = now;
		lane_fifo_append(l, sr->user);
	}
	if (!n || !o->count(l->beq) || !o->ready_ns)
		return;
	/* held back by a limit: ask again when one may go */
	int64_t at = o->ready_ns(l->beq, now);

	if (at != INT64_MAX)
		*ret_wait = CW_MAX(at, now);
}

size_t lane_beq_count(const struct lane *l)
{
	return l->beq ? l->disk->be_order->count(l->beq) : 0;
}

void lane_beq_drain(struct lane *l)
{
	const struct cw_sched_beq_ops *o = l->disk->be_order;
	/* Far enough ahead that no limit holds anything back. */
	const int64_t later = INT64_MAX / 8;
	struct cw_sched_req *sr;

	if (!l->beq)
		return;
	while ((sr = o->peek(l->beq, later))) {
		o->take(l->beq, sr);
		lane_fifo_append(l, sr->user);
	}
	o->fini(l->beq);
	l->beq = NULL;
	/* cw_sched starts with no clients: give them their QoS again */
	memset(l->client_gen, 0, l->n_client_gen * sizeof(*l->client_gen));
}

void lane_be_done(struct lane *l, struct piece *p)
{
	struct pbx_be_counters *c = &p->req->x->be_st;
	int64_t cost = p->sr.cost_ns;

	/* a FIFO lane left the order's fields alone */
	if (cost <= 0 && cw_model_mean_ns(disk_model(l->disk), p->io.len ? p->io.len : 4096,
					  &cost) < 0)
		cost = 0;
	cwd_stats_add(&c->requests, 1);
	cwd_stats_add(&c->bytes, p->io.len);
	cwd_stats_add(&c->cost_ns, (uint64_t)cost);
	if (p->sr.phase == CW_SCHED_PHASE_RESV)
		cwd_stats_add(&c->resv_ns, (uint64_t)cost);
}
