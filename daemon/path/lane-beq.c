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
 * the dispatcher sees a piece of the export after a change.  That QoS is
 * the export's whole (spread, as dmClock has it): each piece carries what
 * the export got on its other disks since its previous piece here was
 * tagged (delta, and rho for the reservation; cw_sched_track_tag on the
 * lane's record and the export's totals), read when the order tags it at
 * the head of the export's queue (dmClock's delayed tags), so
 * reservation, weight and limit hold for the partition whichever of its
 * disks the clients happen to read.
 *
 * On a disk with streams the order sits inside cw_sched, within the ΔL
 * slack.  On a disk without, the lane's dispatch step keeps it itself
 * (clockwise/path.h) and moves pieces from it to the lane's FIFO while
 * fewer than queue_depth are in flight: the order decides who goes
 * first, the disk still gets its full queue depth.  A lane ordered FIFO
 * keeps none and pieces go straight to the FIFO, as before.
 *
 * Everything here runs on the lane's dispatcher (or a reader holding its
 * dispatch lock): no atomics beyond reading the export's QoS pointer.
 */
#include "config.h"

#include "daemon/path/pool-internal.h"

int lane_beq_new(struct lane *l)
{
	const struct disk *d = l->disk;

	return cw_path_lane_init(&l->pl, l->pl.sched, l->pb->cfg->queue_depth, d->be_order,
				 d->be_order == cw_sched_beq_sfc() ? &d->sfc : NULL);
}

void lane_beq_free(struct lane *l)
{
	cw_path_lane_fini(&l->pl);
	free(l->clients);
	l->clients = NULL;
	l->n_clients = 0;
}

/* The lane's record of client x, or NULL (out of memory: x keeps the QoS
 * it had and its requests go without delta and rho). */
static struct lane_client *lane_client(struct lane *l, const struct pbx_client *x)
{
	if (x->client >= l->n_clients) {
		size_t n = CW_MAX(x->client + 1, 2 * l->n_clients);
		struct lane_client *v = realloc(l->clients, n * sizeof(*v));

		if (!v)
			return NULL;
		memset(v + l->n_clients, 0, (n - l->n_clients) * sizeof(*v));
		l->clients = v;
		l->n_clients = n;
	}
	return &l->clients[x->client];
}

/* Gives the order the export's QoS on this disk if it changed since. */
static void client_update(struct lane *l, const struct pbx_client *x, struct lane_client *lc,
			  int di)
{
	const struct pbx_be *be = atomic_load_explicit(&x->be, memory_order_acquire);
	static const struct cw_sched_client plain = { .weight = 1 };
	const struct cw_sched_client *q = be && be->has[di] ? &be->client[di] : &plain;
	uint64_t gen = be ? be->gen : 0;
	int r;

	if (lc->gen == gen)
		return;
	if (l->pl.sched)
		r = cw_sched_set_client(l->pl.sched, x->client, q);
	else
		r = l->pl.beq->set_client(l->pl.beq_state, x->client, q);
	if (r == 0 || r == -EOPNOTSUPP)
		lc->gen = gen;
	else
		cwd_log(LOG_ERR, "disk %s: export %s: cannot set its best-effort QoS: %s",
			l->disk->name, x->name, strerror(-r));
}

/* Whether the lane's pieces go through an order that knows clients. */
static bool lane_ordered(const struct lane *l)
{
	return l->pl.sched ? l->disk->be_order && l->disk->be_order != cw_sched_beq_fifo() :
			     !!l->pl.beq_state;
}

/* The totals count every disk's completions; the lane's record what it
 * served and saw.  On the lane's dispatch, from inside its order. */
static void lane_retrack(struct cw_sched_req *sr)
{
	struct piece *p = sr->user;
	const struct pbx_client *x = p->req->cl;
	struct lane_client *lc = lane_client(p->lane, x);

	sr->other_ns = sr->other_resv_ns = 0;
	if (lc)
		cw_sched_track_tag(&lc->trk, (int64_t)cwd_stats_get(&x->be_st.cost_ns),
				   (int64_t)cwd_stats_get(&x->be_st.resv_ns), sr);
}

void lane_be_fill(struct lane *l, struct piece *p)
{
	struct cw_sched_req *sr = &p->sr;
	const struct pbx_client *x = p->req->cl;
	struct lane_client *lc;
	int di = pb_disk_index(l->pb, l->disk->id);

	sr->client = x->client;
	if (!lane_ordered(l) || di < 0 || !(lc = lane_client(l, x)))
		return;
	client_update(l, x, lc, di);
	/* delta and rho, when the order tags it (at the head of its client's
	 * queue): what the client got on its other disks since its previous
	 * piece here was tagged.  An export on one disk has none: its pieces
	 * are tagged on arrival, as the paper has them. */
	if (atomic_load_explicit(&p->req->x->ndisks, memory_order_relaxed) > 1)
		sr->retrack = lane_retrack;
}

void lane_beq_drain(struct lane *l)
{
	if (!l->pl.beq_state)
		return;
	cw_path_lane_drain(&l->pl);
	/* cw_sched starts with no clients: give them their QoS again */
	for (size_t i = 0; i < l->n_clients; i++)
		l->clients[i].gen = 0;
}

void lane_be_done(struct lane *l, struct piece *p)
{
	struct pbx_client *x = p->req->cl;
	struct pbx_be_counters *c = &x->be_st;
	int di = pb_disk_index(l->pb, l->disk->id);
	int64_t cost = p->sr.cost_ns, resv = 0;

	if (lane_ordered(l) && cost > 0) {
		struct lane_client *lc = lane_client(l, x);
		struct cw_sched_track scratch = { 0 };

		cw_sched_track_done(lc ? &lc->trk : &scratch, &p->sr, &cost, &resv);
	} else if (cw_model_mean_ns(disk_model(l->disk), p->io.len ? p->io.len : 4096,
				    &cost) < 0) {
		cost = 0;	/* a FIFO lane left the order's fields alone */
	}
	cwd_stats_add(&c->requests, 1);
	cwd_stats_add(&c->bytes, p->io.len);
	cwd_stats_add(&c->cost_ns, (uint64_t)cost);
	cwd_stats_add(&c->resv_ns, (uint64_t)resv);
	if (di < 0)
		return;
	struct pbx_be_disk *dc = &x->be_disk[di];

	cwd_stats_add(&dc->requests, 1);
	cwd_stats_add(&dc->bytes, p->io.len);
	cwd_stats_add(&dc->cost_ns, (uint64_t)cost);
	cwd_stats_add(&dc->resv_ns, (uint64_t)resv);
	if (lane_ordered(l) && p->sr.throttled_ns > 0)
		cwd_stats_add(&dc->throttled_ns, (uint64_t)p->sr.throttled_ns);
}

void lane_be_enter(struct lane *l, struct piece *p, int64_t now)
{
	int di = pb_disk_index(l->pb, l->disk->id);
	struct pbx_be_disk *dc;

	if (di < 0)
		return;
	p->be_busy = true;
	dc = &p->req->cl->be_disk[di];
	if (atomic_fetch_add_explicit(&dc->outstanding, 1, memory_order_relaxed) == 0)
		atomic_store_explicit(&dc->busy_since, CW_MAX(now, 1), memory_order_relaxed);
}

void lane_be_leave(struct lane *l, struct piece *p, int64_t now)
{
	int di = pb_disk_index(l->pb, l->disk->id);
	struct pbx_be_disk *dc;
	int64_t since;

	if (di < 0 || !p->be_busy)
		return;	/* it never entered: failed on its way */
	p->be_busy = false;
	dc = &p->req->cl->be_disk[di];
	if (atomic_fetch_sub_explicit(&dc->outstanding, 1, memory_order_relaxed) != 1)
		return;
	since = atomic_exchange_explicit(&dc->busy_since, 0, memory_order_relaxed);
	if (since > 0 && now > since)
		cwd_stats_add(&dc->busy_ns, (uint64_t)(now - since));
}
