/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The simulator proper: Bosch & Mullender, section 4 ("This simulator
 * implements dynamic partitions and uses the Clockwise schedulability test
 * and scheduler to schedule simulated I/O requests").
 *
 * Set-up (which streams, their blocks and tasks) is setup.c's and
 * stream.c's; this file runs one.
 *
 * Plan: each disk runs with cw_admit_disk_plan() of its admitted tasks —
 * the function clockwised's admission state uses — so the dispatcher gets
 * the plan's best-effort budget (ΔL after the guard), idle allowance and
 * periodic server.  Under plan = daemon best-effort requests are also cut
 * into the plan's pieces, as clockwised's pool back end cuts them; under
 * plan = paper the budget is ΔL itself and there is no automatic server.
 *
 * Run: a discrete-event loop over virtual int64 nanoseconds.  Each disk
 * has its own lane (struct cw_path_lane: the dispatch step clockwised's
 * dispatchers run, with its struct cw_sched, the library's dispatcher,
 * unchanged, which also gives each request its release) and a struct
 * cw_model_disk (the library's mechanics, which the emulating I/O engine
 * runs too).  Events are stream releases, BE arrivals,
 * completions and the scheduler's "ask again at" wake-ups; ties are broken
 * by insertion order, so a seed determines the whole run.
 *
 * Mirrors and a failure (copies =, fail =): a stream's read goes to the
 * copy cw_path_stream_copy() gives (the rule admission charged each disk
 * by), a best-effort one's through the split to the copy whose disk
 * would serve it first (the disks' loads: work queued and not taken,
 * requests not complete).  At the failure the disk serves nothing more:
 * what it had queued or in service fails at once, a stream's piece is
 * read again from the copy chosen now (its deadline unchanged), a
 * best-effort piece fails (be_failed; clockwised reads it again from
 * another copy); a stream's read keeps its class on a survivor only if
 * it was admitted to survive, else it is best effort, as in the split.
 * Each stream's requests are timed against their deadline (release +
 * b/B) as its player would time them: a miss is one done later.
 *
 * Invariant: the simulator never decides what a disk does next; it only
 * asks its lane's step (cw_path_lane_next) whenever something changed,
 * and reports back the service time the mechanics produced
 * (cw_path_lane_done); a piece is charged as clockwised charges it
 * (cw_path_charge_rt, cw_path_charge_be), but for best effort on cwsim's
 * own disks, without a pool (be_piece, cache_step).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "sim.h"

#include <clockwise/cache.h>
#include <clockwise/units.h>

/* ---- the event loop ---------------------------------------------------- */

enum { EV_RT, EV_BE, EV_DONE, EV_WAKE, EV_CLIENT, EV_HIT, EV_MOVE, EV_MOVER, EV_FAIL };

struct ev {
	int64_t t;
	uint64_t seq;
	uint32_t kind, idx;
};

struct evq {
	struct ev *v;
	size_t n, cap;
	uint64_t seq;
};

static bool ev_before(const struct ev *a, const struct ev *b)
{
	return a->t != b->t ? a->t < b->t : a->seq < b->seq;
}

static int ev_push(struct evq *q, int64_t t, uint32_t kind, uint32_t idx)
{
	struct ev e = { .t = t, .seq = q->seq++, .kind = kind, .idx = idx };
	size_t i;

	if (q->n == q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 256;
		struct ev *v = realloc(q->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		q->v = v;
		q->cap = cap;
	}
	for (i = q->n++; i > 0 && ev_before(&e, &q->v[(i - 1) / 2]); i = (i - 1) / 2)
		q->v[i] = q->v[(i - 1) / 2];
	q->v[i] = e;
	return 0;
}

static struct ev ev_pop(struct evq *q)
{
	struct ev top = q->v[0], last = q->v[--q->n];
	size_t i = 0;

	for (;;) {
		size_t l = 2 * i + 1, m = l;

		if (l >= q->n)
			break;
		if (l + 1 < q->n && ev_before(&q->v[l + 1], &q->v[l]))
			m = l + 1;
		if (!ev_before(&q->v[m], &last))
			break;
		q->v[i] = q->v[m];
		i = m;
	}
	if (q->n)
		q->v[i] = last;
	return top;
}

/* A stream's request (a block), in one or more pieces. */
struct sjob {
	uint32_t stream;
	uint32_t pending;	/* pieces not done */
	uint64_t k;		/* the clip entry */
	int64_t due_ns;		/* release + the stream period */
};

/* A request as one disk sees it. */
struct sreq {
	struct cw_path_item it;	/* in its disk's lane (it.sr: its charges) */
	uint64_t off, bytes;
	uint32_t parent;	/* BE: index of the trace record, or the client's slot */
	bool client;		/* from a BE client, not the trace */
	bool promote;		/* the cache's read of the block it promotes */
	unsigned disk;		/* a cache hit: the disk it did not need */
	bool mover;		/* a piece of the mover's I/O mio */
	struct sim_move_io mio;
	struct sjob *job;	/* a piece of a stream's request, or NULL */
	uint64_t boff;		/* job: its bytes start this far into the block */
	struct sreq *next_free;	/* also: the next cache hit in flight */
};

/* A BE client's state: its outstanding reads (slots) and what it got. */
struct cstate {
	int64_t arrival[SIM_MAX_DEPTH];
	uint32_t pending[SIM_MAX_DEPTH];
	struct sim_rng rng;
	double *zipf_cdf;		/* zipf: P(rank <= k), per rank k */
	int64_t *lat;
	size_t n_lat, cap_lat;
	uint64_t requests, bytes;
	int64_t cost, cost_resv;
	double resv_share, limit_share;	/* asked, summed over the disks */
};

struct dstate {
	struct cw_model_disk mech;
	struct cw_path_lane lane;	/* the dispatch step, its cw_sched inside */
	struct sreq *cur;
	int64_t cur_actual;
	int64_t wake_at;	/* pending wake-up, INT64_MIN: none */
	int64_t busy_ns;
	/* The overrun watch and what it did, as clockwised's data path:
	 * the model's margin now, and the factor the streams' C grew by. */
	struct cw_sched_overrun_watch watch;
	uint32_t margin_ppm;
	double c_scale;
	int64_t idle_be_ns;	/* the plan's idle allowance now */
	bool no_slack;
	bool failed;		/* fail =: gone, serves nothing */
	/* queued and not taken: pieces and their charged time (loads) */
	uint64_t queued_n;
	int64_t queued_ns;
};

/* The timeline (cwsim run -o with fail =), one bucket per timeline_ns:
 * per disk its busy time and the mover's part of it, and the latest
 * stream request done in it against its deadline (ms, INT64_MIN: none),
 * of survivors and of the others, and the rebuild's blocks done. */
struct tl_bucket {
	int64_t busy_ns[SIM_MAX_DISKS], mover_ns[SIM_MAX_DISKS];
	int64_t late_surv_ns, late_other_ns;
	uint64_t rebuild_bytes;
};

struct bestate {
	int64_t arrival;
	uint32_t pending;
	bool rejected;
};

struct run {
	const struct sim_setup *setup;
	const struct sim_scenario *sc;
	const struct sim_trace *trace;
	size_t n_streams;
	struct evq q;
	struct dstate d[SIM_MAX_DISKS];
	uint64_t *next_n;		/* per stream: next request index */
	struct bestate *be;
	int64_t *lat;
	size_t n_lat;
	struct sreq *free_list;
	struct sreq **chunks;
	size_t n_chunks;
	uint64_t be_rejected, be_overruns;
	uint64_t margin_raises, slack_stopped;
	uint32_t margin_max_ppm;
	double part0_sum;
	uint64_t part0_n;
	enum sim_be_order order;
	struct cw_sched_tracker *trk;	/* RBFQ's delta between disks */
	struct cstate *cl;		/* sc->n_clients */
	/* The SSD cache (sc->cache_pct): the policy clockwised runs, the
	 * slot of each BE block (UINT32_MAX: not cached), the promotion in
	 * flight, and the hits in flight (all take the same time: FIFO). */
	struct cw_cache_policy *cache;
	uint32_t *cslot;
	bool promoting;
	uint64_t prom_block;
	uint32_t prom_slot;
	struct sreq *hit_head, *hit_tail;
	uint64_t c_hits, c_misses, c_promotions, c_demotions;
	/* The move (sc->move_at_ns >= 0, move.c), where the BE blocks are
	 * (the set-up's, or the move's map), the pieces of each of the
	 * mover's I/Os still out, its pending wake-up, and per disk the
	 * time other best-effort requests took there (its pace). */
	struct sim_move *mv;
	const struct sim_pblock *be_blocks;
	unsigned m_pending[CW_MOVER_DEPTH_MAX];
	int64_t m_wake;
	uint64_t others_ns[SIM_MAX_DISKS];
	/* BE latencies by arrival: before the move, while it runs, after */
	int64_t *plat[3];
	size_t n_plat[3], cap_plat[3];
	/* The failure (fail =): done, the spare that took over, its
	 * pieces that failed; per stream its requests, misses, the latest */
	bool failed;
	int fail_spare;
	uint64_t be_failed;
	uint64_t *s_req, *s_miss, *s_be;
	int64_t *s_worst;
	struct cw_path_load loads[SIM_MAX_DISKS];
	struct tl_bucket *tl;
	size_t n_tl;
};

/* Appends x to the growing array *v. */
static int lat_push(int64_t **v, size_t *n, size_t *cap, int64_t x)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 1024;
		int64_t *nv = realloc(*v, c * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = c;
	}
	(*v)[(*n)++] = x;
	return 0;
}

/* A BE request that arrived at arrival is done at now. */
static int be_latency(struct run *r, int64_t arrival, int64_t now)
{
	int64_t end = r->mv ? sim_move_end_ns(r->mv) : -1;
	unsigned ph = 0;

	if (r->mv && r->sc->move_at_ns >= 0 && arrival >= r->sc->move_at_ns)
		ph = end >= 0 && arrival >= end ? 2 : 1;
	return lat_push(&r->plat[ph], &r->n_plat[ph], &r->cap_plat[ph], now - arrival);
}

static struct sreq *sreq_get(struct run *r)
{
	struct sreq *q = r->free_list;

	if (!q) {
		enum { CHUNK = 1024 };
		struct sreq **v = realloc(r->chunks, (r->n_chunks + 1) * sizeof(*v));
		struct sreq *c;

		if (!v)
			return NULL;
		r->chunks = v;
		c = calloc(CHUNK, sizeof(*c));
		if (!c)
			return NULL;
		r->chunks[r->n_chunks++] = c;
		for (size_t i = 0; i < CHUNK; i++) {
			c[i].next_free = r->free_list;
			r->free_list = &c[i];
		}
		q = r->free_list;
	}
	r->free_list = q->next_free;
	memset(q, 0, sizeof(*q));
	return q;
}

static void sreq_put(struct run *r, struct sreq *q)
{
	q->next_free = r->free_list;
	r->free_list = q;
}

/* Queues q on its disk's lane, counted in the disk's load. */
static int lane_push(struct run *r, unsigned disk, struct sreq *q, int64_t now)
{
	struct dstate *d = &r->d[disk];
	int e = cw_path_lane_push(&d->lane, &q->it, now);

	if (e == 0) {
		d->queued_n++;
		d->queued_ns += q->it.sr.service_ns;
	}
	return e;
}

/* The disks' loads now, as a mirrored read's copy choice asks them. */
static void loads_now(struct run *r)
{
	for (unsigned i = 0; i < r->sc->disks; i++) {
		const struct dstate *d = &r->d[i];

		r->loads[i] = (struct cw_path_load){ .vacancy_ns = d->queued_ns,
						     .load = d->queued_n + (d->cur != NULL) };
	}
}

static struct tl_bucket *tl_at(struct run *r, int64_t t)
{
	size_t b = r->tl ? (size_t)(t / r->sc->timeline_ns) : 0;

	return r->tl && b < r->n_tl ? &r->tl[b] : NULL;
}

/* Disk disk is busy from t for ns (the mover's I/O: mover): into the
 * timeline's buckets it spans. */
static void tl_busy(struct run *r, unsigned disk, int64_t t, int64_t ns, bool mover)
{
	while (r->tl && ns > 0) {
		struct tl_bucket *b = tl_at(r, t);
		int64_t part = r->sc->timeline_ns - t % r->sc->timeline_ns;

		if (!b)
			return;
		part = CW_MIN(part, ns);
		b->busy_ns[disk] += part;
		b->mover_ns[disk] += mover ? part : 0;
		t += part;
		ns -= part;
	}
}

/* Asks the disk's lane what to do now (one request at a time, as the
 * policy says), and does it.  A failed disk fails what it takes, at
 * once. */
static int kick(struct run *r, unsigned disk, int64_t now)
{
	struct dstate *d = &r->d[disk];
	struct cw_path_item *it;
	int64_t until;
	int e = cw_path_lane_next(&d->lane, now, &it, 1, &until);

	if (e < 0)
		return e;
	if (e == 1) {
		struct sreq *q = CW_CONTAINER_OF(it, struct sreq, it);

		d->queued_n--;
		d->queued_ns -= q->it.sr.service_ns;
		d->cur = q;
		if (d->failed) {
			d->cur_actual = 0;
			return ev_push(&r->q, now, EV_DONE, disk);
		}
		d->cur_actual = cw_model_disk_serve(&d->mech, now, q->off, q->bytes);
		if (r->sc->worst_case)
			d->cur_actual = q->it.sr.service_ns;	/* the bound itself, every time */
		d->busy_ns += d->cur_actual;
		tl_busy(r, disk, now, d->cur_actual, q->mover);
		return ev_push(&r->q, now + d->cur_actual, EV_DONE, disk);
	}
	if (until < 0)
		return 0;	/* idle, or one in service */
	if (d->wake_at > now && d->wake_at <= until)
		return 0;	/* an earlier wake-up is pending */
	d->wake_at = until;
	return ev_push(&r->q, until, EV_WAKE, disk);
}

static int be_piece(struct run *r, unsigned disk, uint64_t off, uint64_t n, uint64_t client,
		    uint32_t parent, bool from_client, const struct sim_move_io *mio,
		    struct sjob *job, uint64_t boff, int64_t now);

/* Queues bytes at boff of the block of job (its clip entry k) where
 * they are read from now: the copy cw_path_stream_copy() gives among
 * those in sync on the disks it is booked on (the rule admission
 * charged; a spare being rebuilt is not one of them), as the stream's on a disk
 * it is booked on while every copy is in sync or it was admitted to
 * survive, else as best effort in the plan's pieces, as the split does. */
static int stream_read(struct run *r, struct sjob *job, uint64_t boff, uint64_t bytes,
		       int64_t now)
{
	const struct sim_setup *s = r->setup;
	const struct sim_stream *st = &s->streams[job->stream];
	unsigned k = s->sc->copies, disk;
	struct cw_copy cs[CW_COPIES_MAX];
	bool normal = true, rt;
	struct sreq *q;
	uint64_t off;
	int c = 0, e;

	if (st->xdisk && r->failed) {
		e = sim_move_copies(r->mv, 0, (int)job->stream, job->k * st->block_bytes + boff, cs);
		if (e < 0)
			return e;
	} else if (st->xdisk) {
		cs[0] = (struct cw_copy){ .disk_id = st->disk[job->k] + 1,
					  .phys_offset = st->off[job->k] + boff, .in_sync = true };
		for (unsigned x = 1; x < k; x++)
			cs[x] = (struct cw_copy){ .disk_id = st->xdisk[(x - 1) * s->clip + job->k] + 1,
						  .phys_offset = st->xoff[(x - 1) * s->clip + job->k] +
								 boff, .in_sync = true };
	} else {
		k = 1;
		cs[0] = (struct cw_copy){ .disk_id = st->disk[job->k] + 1,
					  .phys_offset = st->off[job->k] + boff, .in_sync = true };
	}
	if (k > 1) {
		uint32_t booked[CW_COPIES_MAX];
		unsigned nb = 0;

		/* the copies' disks the stream is booked on */
		for (unsigned x = 0; x < k; x++)
			if (cs[x].disk_id >= 1 && cs[x].disk_id <= SIM_MAX_DISKS &&
			    st->disk_period_ns[cs[x].disk_id - 1])
				booked[nb++] = cs[x].disk_id;
		c = cw_path_stream_copy(cs, k, job->k, booked, nb, &normal);
	}
	if (c < 0) {
		job->pending--;	/* no copy left: never read (a miss) */
		job->due_ns = CW_MIN(job->due_ns, now - 1);
		return 0;
	}
	disk = cs[c].disk_id - 1;
	off = cs[c].phys_offset;
	rt = (normal || st->survive) && st->disk_period_ns[disk];
	if (!rt) {
		/* best effort, in the plan's pieces, its own client's */
		uint64_t piece = s->be_piece_bytes ? s->be_piece_bytes : bytes;

		job->pending--;
		r->s_be[job->stream]++;
		for (uint64_t at = 0; at < bytes; at += piece) {
			e = be_piece(r, disk, off + at, CW_MIN(piece, bytes - at),
				     r->sc->n_clients + 2 + r->sc->be_partitions + job->stream, 0, false,
				     NULL, job, boff + at, now);
			if (e < 0)
				return e;
			job->pending += (uint32_t)e;
		}
		return 0;
	}
	{
		/* the disk's scheduler tracks the stream's releases on that disk */
		struct cw_sched_stream ss = {
			.id = job->stream,
			.period_ns = st->disk_period_ns[disk],
			.deadline_ns = st->disk_deadline_ns[disk],
			.service_ns = (int64_t)((double)st->disk_service_ns[disk] * r->d[disk].c_scale),
		};

		q = sreq_get(r);
		if (!q)
			return -ENOMEM;
		q->off = off;
		q->bytes = bytes;
		q->job = job;
		q->boff = boff;
		cw_path_item_init(&q->it, q, now);
		cw_path_charge_rt(&q->it, &ss, false, q->off, q->bytes);
		e = lane_push(r, disk, q, now);
		if (e < 0)
			return e;
	}
	return kick(r, disk, now);
}

/* A piece of a stream's request is done at now (or its block can no
 * longer be read): after the last, the request is timed against its
 * deadline. */
static void stream_piece_done(struct run *r, struct sjob *job, int64_t now)
{
	const struct sim_stream *st = &r->setup->streams[job->stream];
	int64_t late = now - job->due_ns;
	struct tl_bucket *b = tl_at(r, now);

	if (job->pending) {
		if (--job->pending)
			return;
	}
	r->s_req[job->stream]++;
	r->s_miss[job->stream] += late > 0;
	r->s_worst[job->stream] = CW_MAX(r->s_worst[job->stream], late);
	if (b && st->survive)
		b->late_surv_ns = CW_MAX(b->late_surv_ns, late);
	else if (b)
		b->late_other_ns = CW_MAX(b->late_other_ns, late);
	free(job);
}

static int on_rt(struct run *r, uint32_t idx, int64_t now)
{
	const struct sim_stream *st = &r->setup->streams[idx];
	uint64_t n = r->next_n[idx]++;
	struct sjob *job = malloc(sizeof(*job));
	int e;

	if (!job)
		return -ENOMEM;
	/* the clip plays in a loop */
	*job = (struct sjob){ .stream = idx, .pending = 1, .k = n % r->setup->clip,
			      .due_ns = now + st->period_ns };
	if (st->phase_ns + (int64_t)(n + 1) * st->period_ns < r->sc->duration_ns) {
		e = ev_push(&r->q, st->phase_ns + (int64_t)(n + 1) * st->period_ns, EV_RT, idx);
		if (e < 0) {
			free(job);
			return e;
		}
	}
	e = stream_read(r, job, 0, st->block_bytes, now);
	if (e == 0 && job->pending == 0)
		stream_piece_done(r, job, now);	/* nothing queued: lost, or refused */
	return e;
}

/* The cache's next step when none is in flight: a promotion is a
 * best-effort read of the block on its disk (its write to the SSD costs
 * no disk time); a demotion of a write-through block costs nothing. */
static int cache_step(struct run *r, int64_t now)
{
	const struct sim_scenario *sc = r->sc;
	struct cw_cache_decision d;
	uint64_t pb = sc->be_pblock_bytes;
	struct sreq *q;
	int64_t c;
	unsigned disk;
	int e;

	if (!r->cache || r->promoting || now > sc->duration_ns)
		return 0;
	cw_cache_policy_tick(r->cache, now);
	cw_cache_policy_next(r->cache, &d);
	if (d.kind == CW_CACHE_EVICT) {
		r->cslot[d.block] = UINT32_MAX;
		cw_cache_policy_uncached(r->cache, d.slot);
		r->c_demotions++;
		cw_cache_policy_next(r->cache, &d);
	}
	if (d.kind != CW_CACHE_PROMOTE)
		return 0;
	q = sreq_get(r);
	if (!q)
		return -ENOMEM;
	if (r->be_blocks) {
		disk = r->be_blocks[d.block].disk;
		q->off = r->be_blocks[d.block].off;
	} else {
		disk = (unsigned)(d.block % sc->disks);
		q->off = sim_be_start(sc) + d.block / sc->disks * pb;
	}
	q->bytes = pb;
	q->parent = 0;
	q->client = false;
	q->promote = true;
	q->disk = 0;
	e = cw_model_service_ns(&sc->model, sim_be_start(sc), 0, pb, &c);
	if (e < 0)
		return e;
	/* charged as cwsim's own disks charge best effort (be_piece), the
	 * bound over the BE area, and to no client */
	cw_path_item_init(&q->it, q, now);
	q->it.sr.cls = CW_SCHED_BE;
	q->it.sr.service_ns = c;
	q->it.sr.cost_ns = c;
	q->it.sr.offset_bytes = q->off;
	q->it.sr.length_bytes = pb;
	if (r->trk && (e = cw_sched_tracker_tag(r->trk, disk, &q->it.sr)) < 0)
		return e;
	e = lane_push(r, disk, q, now);
	if (e == -E2BIG) {	/* a block larger than any slack: no cache here */
		sreq_put(r, q);
		cw_cache_policy_free(r->cache);
		r->cache = NULL;
		return 0;
	}
	if (e < 0)
		return e;
	r->promoting = true;
	r->prom_block = d.block;
	r->prom_slot = d.slot;
	return kick(r, disk, now);
}

/* A piece served by the cache's SSD: done after the SSD's time, without
 * a disk. */
static int cache_piece(struct run *r, uint64_t bytes, uint32_t parent, bool from_client,
		       int64_t now)
{
	struct sreq *q = sreq_get(r);

	if (!q)
		return -ENOMEM;
	*q = (struct sreq){ .bytes = bytes, .parent = parent, .client = from_client };
	if (r->hit_tail)
		r->hit_tail->next_free = q;
	else
		r->hit_head = q;
	r->hit_tail = q;
	return ev_push(&r->q, now + (int64_t)r->sc->cache_ssd_us * CW_NS_PER_US, EV_HIT, 0) < 0 ?
		-ENOMEM : 1;
}

/* Queues a BE piece of n bytes at off of disk (the pool's, or cwsim's
 * own layout) as the request parent's (a mover's piece when mio is not
 * NULL): 1, or 0 when it was refused as larger than any slack could ever
 * run. */
static int be_piece(struct run *r, unsigned disk, uint64_t off, uint64_t n, uint64_t client,
		    uint32_t parent, bool from_client, const struct sim_move_io *mio,
		    struct sjob *job, uint64_t boff, int64_t now)
{
	const struct sim_scenario *sc = r->sc;
	const struct sim_setup *s = r->setup;
	uint64_t area = sc->model.capacity_bytes - sim_be_start(sc);
	struct sreq *q = sreq_get(r);
	int64_t c, cost;
	int e;

	if (!q)
		return -ENOMEM;
	q->off = off;
	q->bytes = n;
	q->parent = parent;
	q->client = from_client;
	q->mover = mio != NULL;
	if (mio)
		q->mio = *mio;
	q->job = job;
	q->boff = boff;
	cw_path_item_init(&q->it, q, now);
	if (r->be_blocks) {
		/* the pool's block, charged as clockwised charges it:
		 * the bound anywhere on the disk, the mean access */
		cw_path_charge_be(&q->it, &s->adm_model[disk], off, n);
	} else {
		/* cwsim's own disks (no pool: the paper's set-up) charge
		 * otherwise, on purpose: ΔL the bound over the BE area
		 * alone (its blocks lie there, not anywhere on the disk),
		 * and its client the mean access within that area */
		e = cw_model_service_ns(&sc->model, sim_be_start(sc), 0, n, &c);
		/* what it costs its client: the mean access (a seek
		 * over a third of the BE area, half a turn), not the
		 * bound that ΔL charges */
		if (e == 0)
			e = cw_model_access_ns(&sc->model, off >= area / 3 ? off - area / 3 :
					       off + area / 3, off, n, 500000, &cost);
		if (e < 0)
			return e;
		q->it.sr.cls = CW_SCHED_BE;
		q->it.sr.service_ns = c;
		q->it.sr.cost_ns = CW_MIN(cost, c);
		q->it.sr.offset_bytes = off;
		q->it.sr.length_bytes = n;
	}
	q->it.sr.client = client;
	if (r->trk && (e = cw_sched_tracker_tag(r->trk, disk, &q->it.sr)) < 0)
		return e;
	e = lane_push(r, disk, q, now);
	if (e == -E2BIG) {
		sreq_put(r, q);
		return 0;
	}
	if (e < 0)
		return e;
	e = kick(r, disk, now);
	return e < 0 ? e : 1;
}

/* A BE request being split: whose it is, what it queued. */
struct be_out {
	struct run *r;
	uint64_t client;
	uint32_t parent;
	bool from_client;
	int64_t now;
	uint32_t pending;
	bool rejected;
};

/* A piece of the split, queued on its disk or the cache's SSD. */
static int be_emit(void *arg, const struct cw_path_piece *p)
{
	struct be_out *o = arg;
	int e;

	if (p->disk_id == SIM_PATH_SSD)
		e = cache_piece(o->r, p->length, o->parent, o->from_client, o->now);
	else
		e = be_piece(o->r, p->disk_id - 1, p->phys_offset, p->length, o->client, o->parent,
			     o->from_client, NULL, NULL, 0, o->now);
	if (e < 0)
		return e;
	/* larger than any slack delta-l could ever give it */
	o->rejected |= e == 0;
	o->pending += (uint32_t)e;
	return 0;
}

/* Hands a BE request of partition part to clockwised's split
 * (cw_path_split on cwsim's layout, path.c) and queues its pieces:
 * *ret_pending counts the pieces queued, *ret_rejected says whether one
 * was refused as larger than any slack could ever run. */
static int be_request(struct run *r, uint32_t part, uint64_t off, uint64_t bytes, bool write,
		      uint64_t client, uint32_t parent, bool from_client, int64_t now,
		      uint32_t *ret_pending, bool *ret_rejected)
{
	struct sim_path lay = { .s = r->setup, .blocks = r->be_blocks,
				.xblocks = r->setup->be_xblocks, .part = part,
				.cache = r->cache, .cslot = r->cslot, .hits = &r->c_hits,
				.misses = &r->c_misses, .mv = r->mv, .failed = r->failed,
				.loads = r->loads };
	struct be_out o = { .r = r, .client = client, .parent = parent,
			    .from_client = from_client, .now = now };
	int e;

	loads_now(r);
	e = sim_path_split(&lay, off, bytes, write, be_emit, &o);
	*ret_pending = o.pending;
	*ret_rejected |= o.rejected;
	return e < 0 ? e : cache_step(r, now);
}

/* Queues one of the mover's I/Os, in the pieces of the plan, as the
 * mover's own client's (the one after the scenario's). */
static int mover_queue(struct run *r, const struct sim_move_io *io, int64_t now)
{
	uint64_t piece = r->setup->be_piece_bytes;
	unsigned n = 0;
	int e;

	for (uint64_t at = 0; at < io->bytes; at += piece) {
		e = be_piece(r, io->disk, io->off + at, CW_MIN(piece, io->bytes - at),
			     r->sc->n_clients + 1, 0, false, io, NULL, 0, now);
		if (e < 0)
			return e;
		n += (unsigned)e;
	}
	r->m_pending[io->task] = n;
	if (n == 0) {
		/* too large for the slack: the block stays where it is */
		struct sim_move_io next;
		unsigned nn;

		e = sim_move_io_done(r->mv, io, -E2BIG, now, r->others_ns, &next, &nn);
		if (e == 0 && nn)
			e = mover_queue(r, &next, now);
		return e;
	}
	return 0;
}

/* The mover's next step: its next batch's reads, or a wake-up. */
static int mover_kick(struct run *r, int64_t now)
{
	struct sim_move_io io[CW_MOVER_DEPTH_MAX];
	unsigned n = 0;
	int64_t wake = 0;
	int e = sim_move_next(r->mv, now, io, &n, &wake);

	if (e == 0 && wake > now && wake != r->m_wake) {
		r->m_wake = wake;
		e = ev_push(&r->q, wake, EV_MOVER, 0);
	}
	for (unsigned k = 0; k < n && e == 0; k++)
		e = mover_queue(r, &io[k], now);
	return e;
}

/* A piece of the mover's I/O is done: after the I/O's last, its next. */
static int mover_piece_done(struct run *r, const struct sreq *q, int64_t now)
{
	struct sim_move_io next;
	unsigned nn = 0;
	int e;

	struct tl_bucket *b = q->mio.write ? tl_at(r, now) : NULL;

	if (b)
		b->rebuild_bytes += q->bytes;
	if (--r->m_pending[q->mio.task])
		return 0;
	e = sim_move_io_done(r->mv, &q->mio, 0, now, r->others_ns, &next, &nn);
	if (e == 0 && nn)
		e = mover_queue(r, &next, now);
	return e < 0 ? e : mover_kick(r, now);
}

/* The client of the trace's partition part: its own, as clockwised has
 * one per export (a partition's export), after the scenario's clients
 * (1..n_clients) and the mover's (n_clients + 1).  Only an order between
 * clients (rbfq, sfc) tells them apart: with rbfq the partitions take
 * turns, as they do in the daemon; the FIFO keeps the trace's order. */
static uint64_t trace_client(const struct run *r, uint32_t part)
{
	return r->sc->n_clients + 2 + part;
}

static int on_be(struct run *r, uint32_t idx, int64_t now)
{
	const struct sim_be_rec *rec = &r->trace->v[idx];
	struct bestate *b = &r->be[idx];
	int e;

	b->arrival = now;
	e = be_request(r, rec->part, rec->off, rec->bytes, rec->write, trace_client(r, rec->part),
		      idx, false, now, &b->pending, &b->rejected);
	if (e < 0)
		return e;
	if (b->rejected)
		r->be_rejected++;
	if (idx + 1 < r->trace->n)
		return ev_push(&r->q, r->trace->v[idx + 1].t_ns, EV_BE, idx + 1);
	return 0;
}

/* A client's next block: uniform, or Zipf by rank with the ranks spread
 * over the partition by a multiplicative hash (as fio does), so the hot
 * blocks are not neighbours. */
static uint64_t client_block(const struct sim_client *spec, struct cstate *c, uint64_t blocks)
{
	double u;
	uint64_t lo = 0, hi = blocks - 1;

	if (!spec->zipf)
		return sim_rng_below(&c->rng, blocks);
	if (!c->zipf_cdf) {
		double sum = 0;

		c->zipf_cdf = malloc(blocks * sizeof(*c->zipf_cdf));
		if (!c->zipf_cdf)
			return sim_rng_below(&c->rng, blocks);
		for (uint64_t k = 0; k < blocks; k++)
			c->zipf_cdf[k] = sum += pow((double)(k + 1), -spec->zipf);
		for (uint64_t k = 0; k < blocks; k++)
			c->zipf_cdf[k] /= sum;
	}
	u = sim_rng_unit(&c->rng);
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (c->zipf_cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo * UINT64_C(0x9E3779B97F4A7C15)) % blocks;
}

/* Client slot idx (client idx / SIM_MAX_DEPTH) sends its next read. */
static int on_client(struct run *r, uint32_t idx, int64_t now)
{
	const struct sim_scenario *sc = r->sc;
	unsigned ci = idx / SIM_MAX_DEPTH, slot = idx % SIM_MAX_DEPTH;
	const struct sim_client *spec = &sc->clients[ci];
	struct cstate *c = &r->cl[ci];
	uint64_t blocks = r->setup->be_part_bytes / spec->bytes;
	bool rejected = false;
	int e;

	if (now >= sc->duration_ns || !blocks)
		return 0;
	c->arrival[slot] = now;
	e = be_request(r, ci % sc->be_partitions, client_block(spec, c, blocks) * spec->bytes,
		      spec->bytes, false, ci + 1, idx, true, now, &c->pending[slot], &rejected);
	if (e < 0)
		return e;
	if (rejected)
		r->be_rejected++;	/* the client stops: its reads never fit */
	return 0;
}

static int client_done(struct run *r, unsigned disk, const struct sreq *q, int64_t now)
{
	unsigned ci = q->parent / SIM_MAX_DEPTH, slot = q->parent % SIM_MAX_DEPTH;
	struct cstate *c = &r->cl[ci];
	int e;

	if (!q->disk && r->trk && (e = cw_sched_tracker_done(r->trk, disk, &q->it.sr)) < 0)
		return e;
	if (now <= r->sc->duration_ns) {
		c->cost += cw_sched_req_cost(&q->it.sr);
		c->cost_resv += q->it.sr.phase == CW_SCHED_PHASE_RESV ? cw_sched_req_cost(&q->it.sr) : 0;
		c->bytes += q->bytes;
	}
	if (--c->pending[slot])
		return 0;
	c->requests++;
	e = lat_push(&c->lat, &c->n_lat, &c->cap_lat, now - c->arrival[slot]);
	if (e == 0)
		e = be_latency(r, c->arrival[slot], now);
	return e < 0 ? e : on_client(r, q->parent, now);
}

/* The watch proposed a margin (factor) for disk's model: as clockwised
 * does, the margin grows (cw_sched_margin_raise) and the disk's streams
 * are planned again with their C grown alike; if they no longer fit, the
 * margin stays and best effort gets no more slack on the disk. */
static int raise_margin(struct run *r, unsigned disk, double factor)
{
	const struct sim_setup *s = r->setup;
	struct dstate *d = &r->d[disk];
	uint32_t ppm = cw_sched_margin_raise(d->margin_ppm, factor);
	double scale = (1.0 + ppm / 1e6) / (1.0 + s->adm_model[disk].margin_ppm / 1e6);
	_cleanup_free_ struct cw_task *set = malloc((s->n_tasks[disk] + 1) * sizeof(*set));
	struct cw_model m = s->adm_model[disk];
	struct cw_disk_plan p;
	size_t n = 0, t;
	int e;

	if (!set)
		return -ENOMEM;
	if (ppm <= d->margin_ppm)
		return 0;
	for (; n < s->server_tasks; n++)
		set[n] = s->tasks[disk][n];
	t = n;
	for (size_t i = 0; i < r->n_streams; i++)
		if (s->streams[i].disk_period_ns[disk]) {
			set[n] = s->tasks[disk][t++];
			set[n].service_ns = (int64_t)((double)set[n].service_ns * scale);
			n++;
		}
	m.margin_ppm = ppm;
	e = cw_admit_disk_plan(&s->plan_opts, &m, m.tier, s->sc->be_pblock_bytes, set, n, &p);
	if (e == -EBUSY || (e == 0 && p.delta_l_ns < 0)) {
		d->no_slack = true;
		r->slack_stopped++;
		/* best effort only on the idle disk, within its allowance */
		return cw_sched_set_slack(d->lane.sched, 0, d->idle_be_ns);
	}
	if (e < 0)
		return e;
	d->margin_ppm = ppm;
	d->c_scale = scale;
	r->margin_raises++;
	r->margin_max_ppm = CW_MAX(r->margin_max_ppm, ppm);
	d->idle_be_ns = p.idle_be_ns;
	e = cw_sched_set_slack(d->lane.sched, p.be_budget_ns, p.idle_be_ns);
	if (e == 0)
		e = cw_sched_set_guard(d->lane.sched, p.guard_ns);
	for (size_t i = 0; i < r->n_streams && e == 0; i++)
		if (s->streams[i].disk_period_ns[disk])
			e = cw_sched_stream_admit(d->lane.sched, i, s->streams[i].disk_period_ns[disk],
						  (int64_t)((double)s->streams[i].disk_service_ns[disk] *
							    scale), s->streams[i].disk_deadline_ns[disk]);
	return e;
}

/* A BE piece is done (on its disk, or read from the cache): its request
 * or its client's read ends with its last piece. */
static int piece_done(struct run *r, unsigned disk, struct sreq *q, int64_t now)
{
	int e = 0;

	if (q->client) {
		e = client_done(r, disk, q, now);
	} else if (q->it.sr.cls == CW_SCHED_BE || q->disk) {
		struct bestate *b = &r->be[q->parent];

		if (--b->pending == 0 && !b->rejected) {
			r->lat[r->n_lat++] = now - b->arrival;
			e = be_latency(r, b->arrival, now);
			if (r->trace->v[q->parent].part == 0) {
				r->part0_sum += (double)(now - b->arrival);
				r->part0_n++;
			}
		}
	}
	sreq_put(r, q);
	return e;
}

/* A piece the failed disk took fails: a stream's is read again from the
 * copy chosen now, a best-effort one fails with its request. */
static int fail_piece(struct run *r, unsigned disk, struct sreq *q, int64_t now)
{
	int e = 0;

	if (r->trk && q->it.sr.cls == CW_SCHED_BE &&
	    (e = cw_sched_tracker_done(r->trk, disk, &q->it.sr)) < 0)
		return e;
	if (q->job) {
		struct sjob *job = q->job;

		e = stream_read(r, job, q->boff, q->bytes, now);
		if (e == 0 && job->pending == 0)
			stream_piece_done(r, job, now);
		sreq_put(r, q);
	} else if (q->mover) {
		e = mover_piece_done(r, q, now);
		sreq_put(r, q);
	} else {
		r->be_failed++;
		e = piece_done(r, disk, q, now);
	}
	return e < 0 ? e : kick(r, disk, now);
}

/* Disk disk fails at now (fail =). */
static int on_fail(struct run *r, unsigned disk, int64_t now)
{
	int e = sim_move_fail(r->mv, disk, now, &r->fail_spare);

	if (e < 0)
		return e;
	r->d[disk].failed = true;
	r->failed = true;
	e = mover_kick(r, now);
	return e < 0 ? e : kick(r, disk, now);
}

static int on_done(struct run *r, unsigned disk, int64_t now)
{
	struct dstate *d = &r->d[disk];
	struct sreq *q = d->cur;
	double factor;
	int e;

	d->cur = NULL;
	e = cw_path_lane_done(&d->lane, &q->it, now, d->cur_actual);
	if (e < 0)
		return e;
	if (d->failed)
		return fail_piece(r, disk, q, now);
	if (q->it.sr.service_ns > 0 && !d->no_slack &&
	    cw_sched_overrun_watch_add(&d->watch, q->it.sr.service_ns, d->cur_actual, &factor) == 1) {
		e = raise_margin(r, disk, factor);
		if (e < 0)
			return e;
	}
	if (q->it.sr.cls == CW_SCHED_BE)
		r->be_overruns += d->cur_actual > q->it.sr.service_ns;
	if (q->mover) {
		if (r->trk && (e = cw_sched_tracker_done(r->trk, disk, &q->it.sr)) < 0)
			return e;
		e = mover_piece_done(r, q, now);
		sreq_put(r, q);
		return e < 0 ? e : kick(r, disk, now);
	}
	if (q->it.sr.cls == CW_SCHED_BE && !q->promote)
		r->others_ns[disk] += (uint64_t)d->cur_actual;
	if (q->job) {
		if (r->trk && q->it.sr.cls == CW_SCHED_BE &&
		    (e = cw_sched_tracker_done(r->trk, disk, &q->it.sr)) < 0)
			return e;
		stream_piece_done(r, q->job, now);
		sreq_put(r, q);
		return kick(r, disk, now);
	}
	if (q->promote) {
		r->cslot[r->prom_block] = r->prom_slot;
		cw_cache_policy_cached(r->cache, r->prom_slot, r->prom_block);
		r->c_promotions++;
		r->promoting = false;
		sreq_put(r, q);
		e = cache_step(r, now);
		return e < 0 ? e : kick(r, disk, now);
	}
	e = piece_done(r, disk, q, now);
	if (e < 0)
		return e;
	return kick(r, disk, now);
}

/* The oldest cache hit in flight is done. */
static int on_hit(struct run *r, int64_t now)
{
	struct sreq *q = r->hit_head;

	if (!q)
		return 0;
	r->hit_head = q->next_free;
	if (!r->hit_head)
		r->hit_tail = NULL;
	q->disk++;	/* nonzero: no disk's tracker saw it */
	return piece_done(r, q->disk - 1, q, now);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static double mean_ms(const int64_t *v, size_t n)
{
	double sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += (double)v[i];
	return n ? sum / (double)n / 1e6 : 0;
}

static double pct_ms(const int64_t *v, size_t n, unsigned pct)
{
	size_t i;

	if (!n)
		return 0;
	/* nearest rank */
	i = (n * pct + 99) / 100;
	i = i ? i - 1 : 0;
	return (double)v[CW_MIN(i, n - 1)] / 1e6;
}

static void run_free(struct run *r)
{
	for (unsigned d = 0; d < SIM_MAX_DISKS; d++) {
		cw_sched_free(r->d[d].lane.sched);
		cw_path_lane_fini(&r->d[d].lane);
	}
	for (size_t i = 0; i < r->n_chunks; i++)
		free(r->chunks[i]);
	free(r->chunks);
	free(r->q.v);
	free(r->next_n);
	free(r->be);
	free(r->lat);
	for (unsigned i = 0; r->cl && i < r->sc->n_clients; i++) {
		free(r->cl[i].lat);
		free(r->cl[i].zipf_cdf);
	}
	free(r->cl);
	cw_sched_tracker_free(r->trk);
	cw_cache_policy_free(r->cache);
	free(r->cslot);
	sim_move_free(r->mv);
	for (unsigned i = 0; i < 3; i++)
		free(r->plat[i]);
	free(r->s_req);
	free(r->s_miss);
	free(r->s_be);
	free(r->s_worst);
	free(r->tl);
}

/* The clients' QoS on one disk, admitted against the best-effort capacity
 * the disk's tasks leave (cw_sched_resv_admit): a scenario whose
 * reservations do not fit is refused with the numbers. */
static int clients_setup(struct run *r, unsigned disk, const struct cw_task *set, size_t n,
			 struct sim_result *res)
{
	const struct sim_scenario *sc = r->sc;
	uint32_t cap, resv[SIM_MAX_CLIENTS];
	int e = cw_sched_be_capacity(set, n, &cap);

	if (e < 0)
		return e;
	res->be_capacity = disk ? CW_MIN(res->be_capacity, (double)cap / CW_SCHED_PPM) :
				  (double)cap / CW_SCHED_PPM;
	for (unsigned i = 0; i < sc->n_clients; i++) {
		const struct sim_client *c = &sc->clients[i];
		struct cw_sched_client q = { .weight = c->weight, .prio = c->prio,
					     .idle_credit_ns = c->credit_ns };
		struct cw_sched_resv_verdict v;

		q.resv_ppm = (uint32_t)llround(c->resv_pct * 1e4 * (c->resv_of_be ? cap / 1e6 : 1));
		q.limit_ppm = (uint32_t)llround(c->limit_pct * 1e4 * (c->limit_of_be ? cap / 1e6 : 1));
		if (c->limit_pct && !q.limit_ppm)
			q.limit_ppm = 1;
		e = cw_sched_resv_admit(resv, i, q.resv_ppm, cap, &v);
		if (e < 0)
			return e;
		if (!v.fits) {
			fprintf(stderr, "cwsim: disk %u: client %s: %s\n", disk, c->name, v.reason);
			return -EINVAL;
		}
		resv[i] = q.resv_ppm;
		if (cw_sched_client_check(&q) < 0) {
			fprintf(stderr, "cwsim: disk %u: client %s: the limit (%.2f%%) is below the "
				"reservation (%.2f%%)\n", disk, c->name, q.limit_ppm / 1e4,
				q.resv_ppm / 1e4);
			return -EINVAL;
		}
		r->cl[i].resv_share += (double)q.resv_ppm / CW_SCHED_PPM;
		r->cl[i].limit_share += (double)q.limit_ppm / CW_SCHED_PPM;
		if (r->order != SIM_BEQ_FIFO && (e = cw_sched_set_client(r->d[disk].lane.sched, i + 1, &q)) < 0)
			return e;
	}
	return 0;
}

static int run_setup(struct run *r, struct sim_result *res, enum cw_sched_policy policy)
{
	const struct sim_scenario *sc = r->sc;
	struct sim_rng phases;

	sim_rng_seed(&phases, sc->seed, 3);
	res->delta_l_min_ns = res->be_budget_min_ns = CW_ADMIT_NO_LIMIT;
	for (unsigned d = 0; d < sc->disks; d++) {
		struct cw_sched_opts o;
		struct cw_sched *sched;
		const struct sim_setup *s = r->setup;
		_cleanup_free_ struct cw_task *set = malloc((s->n_tasks[d] + 1) * sizeof(*set));
		struct cw_sched_sfc_conf sfc;
		struct cw_model_disk_opts mo;
		struct cw_disk_plan p;
		size_t n;
		int e;

		if (!set)
			return -ENOMEM;
		/* what the clients share */
		n = sim_setup_tasks(s, d, r->n_streams, set);
		e = sim_setup_plan(r->setup, d, r->n_streams, &p);
		if (e == -EBUSY)
			return -EDOM;	/* a prefix of an admitted set: cannot happen */
		if (e < 0)
			return e;
		res->delta_l_ns[d] = p.delta_l_ns;
		res->delta_l_min_ns = CW_MIN(res->delta_l_min_ns, p.delta_l_ns);
		res->be_budget_ns[d] = p.be_budget_ns;
		res->be_budget_min_ns = CW_MIN(res->be_budget_min_ns, p.be_budget_ns);
		res->server_slice_ns[d] = p.server_slice_ns;
		cw_sched_opts_init(&o);
		o.policy = policy;
		o.delta_l_ns = p.be_budget_ns;
		o.idle_be_ns = p.idle_be_ns;
		o.server_period_ns = p.server_period_ns;
		o.server_slice_ns = p.server_slice_ns;
		o.guard_ns = p.guard_ns;
		cw_sched_sfc_conf_init(&sfc);
		sfc.curve = sc->sfc_curve;
		sfc.window_ppm = sc->sfc_window_ppm;
		sfc.capacity_bytes = s->mech_model[d].capacity_bytes;
		o.beq = r->order == SIM_BEQ_RBFQ ? cw_sched_beq_rbfq() :
			r->order == SIM_BEQ_SFC ? cw_sched_beq_sfc() : cw_sched_beq_fifo();
		o.beq_conf = r->order == SIM_BEQ_SFC ? &sfc : NULL;
		e = cw_sched_new(&o, &sched);
		if (e < 0)
			return e;
		(void)cw_path_lane_init(&r->d[d].lane, sched, 1, NULL, NULL);	/* no order: 0 */
		cw_sched_overrun_watch_init(&r->d[d].watch);
		r->d[d].margin_ppm = s->adm_model[d].margin_ppm;
		r->d[d].c_scale = 1.0;
		r->d[d].idle_be_ns = o.idle_be_ns;
		/* every admitted stream is known before its first request */
		for (size_t i = 0; i < r->n_streams && e == 0; i++)
			if (s->streams[i].disk_period_ns[d])
				e = cw_sched_stream_admit(r->d[d].lane.sched, i, s->streams[i].disk_period_ns[d],
							  s->streams[i].disk_service_ns[d],
							  s->streams[i].disk_deadline_ns[d]);
		if (e == 0)
			e = clients_setup(r, d, set, n, res);
		if (e < 0)
			return e;
		cw_model_disk_opts_of(&s->mech_model[d], &mo);
		if (sc->bus_bps)
			mo.bus_bps = sc->bus_bps;	/* the scenario's bus */
		mo.phase_ns = s->mech_model[d].rotation_ns ?
			      (int64_t)sim_rng_below(&phases,
						     (uint64_t)s->mech_model[d].rotation_ns) : 0;
		e = cw_model_disk_init(&r->d[d].mech, &s->mech_model[d], &mo);
		if (e < 0)
			return e;
		r->d[d].wake_at = INT64_MIN;
	}
	return 0;
}

/* The failure's counts, and each stream's (sim_result). */
static void fail_result(struct run *r, struct sim_result *res)
{
	res->fail_at_s = (double)r->sc->fail_at_ns / 1e9;
	res->fail_spare = r->fail_spare;
	snprintf(res->fail_why, sizeof(res->fail_why), "%s",
		 sim_move_takeover_why(r->mv, &res->fail_refused));
	res->be_failed = r->be_failed;
	res->stale_at_end = r->mv ? sim_move_stale(r->mv) : 0;
	res->n_stream_results = CW_MIN(r->n_streams, (size_t)SIM_REPORT_STREAMS);
	for (size_t i = 0; i < r->n_streams; i++) {
		bool surv = r->setup->streams[i].survive;

		if (surv)
			res->survive_misses += r->s_miss[i];
		else
			res->other_misses += r->s_miss[i];
		if (i >= SIM_REPORT_STREAMS)
			continue;
		res->stream_res[i].requests = r->s_req[i];
		res->stream_res[i].misses = r->s_miss[i];
		res->stream_res[i].be = r->s_be[i];
		res->stream_res[i].survive = surv;
		res->stream_res[i].worst_ms = r->s_worst[i] == INT64_MIN ? 0 :
					      (double)r->s_worst[i] / 1e6;
	}
}

/* The timeline as CSV (sim_scenario.timeline_path): per bucket its start
 * (s), per disk its busy share and the rebuild's part of it, the latest
 * stream requests against their deadline (ms, survivors' and others';
 * empty: none done), and the rebuild's MiB written so far. */
static int timeline_write(struct run *r, int64_t end)
{
	const struct sim_scenario *sc = r->sc;
	FILE *f = fopen(sc->timeline_path, "we");
	double mib = 0;

	if (!f) {
		fprintf(stderr, "cwsim: %s: %m\n", sc->timeline_path);
		return -errno;
	}
	fprintf(f, "t_s");
	for (unsigned d = 0; d < sc->disks; d++)
		fprintf(f, ",busy%u,rebuild%u", d, d);
	fprintf(f, ",late_survive_ms,late_other_ms,rebuild_mib\n");
	for (size_t i = 0; i < r->n_tl && (int64_t)i * sc->timeline_ns < end; i++) {
		const struct tl_bucket *b = &r->tl[i];
		double w = (double)sc->timeline_ns;

		fprintf(f, "%.3f", (double)((int64_t)i * sc->timeline_ns) / 1e9);
		for (unsigned d = 0; d < sc->disks; d++)
			fprintf(f, ",%.4f,%.4f", (double)b->busy_ns[d] / w, (double)b->mover_ns[d] / w);
		mib += (double)b->rebuild_bytes / SIM_MIB;
		if (b->late_surv_ns != INT64_MIN)
			fprintf(f, ",%.3f", (double)b->late_surv_ns / 1e6);
		else
			fprintf(f, ",");
		if (b->late_other_ns != INT64_MIN)
			fprintf(f, ",%.3f", (double)b->late_other_ns / 1e6);
		else
			fprintf(f, ",");
		fprintf(f, ",%.2f\n", mib);
	}
	if (fclose(f) != 0) {
		fprintf(stderr, "cwsim: %s: %m\n", sc->timeline_path);
		return -EIO;
	}
	return 0;
}

int sim_run(const struct sim_setup *setup, size_t n_streams, const struct sim_trace *trace,
	    enum cw_sched_policy policy, struct sim_result *ret)
{
	unsigned o = setup->sc->be_orders ? (unsigned)__builtin_ctz(setup->sc->be_orders) : 0;

	return sim_run_be(setup, n_streams, trace, policy, o, ret);
}

/* What each client got, as sim_client_result. */
static void clients_result(struct run *r, struct sim_result *res)
{
	const struct sim_scenario *sc = r->sc;
	double t = (double)sc->duration_ns;

	double w_sum = 0, s_sum = 0;

	res->n_clients = sc->n_clients;
	res->share_error_max = res->resv_met = res->limit_over = res->limit_ratio = -1;
	for (unsigned i = 0; i < sc->n_clients; i++) {
		struct cstate *c = &r->cl[i];
		struct sim_client_result *o = &res->clients[i];
		double sum = 0;

		*o = (struct sim_client_result){
			.requests = c->requests,
			.mb_s = (double)c->bytes / (double)SIM_MIB / (t / 1e9),
			.share = (double)c->cost / t / sc->disks,
			.resv_share = c->resv_share / sc->disks,
			.limit_share = c->limit_share / sc->disks,
			.resv_part = (double)c->cost_resv / t / sc->disks,
		};
		for (unsigned d = 0; d < sc->disks; d++) {
			struct cw_sched_client_stats st;

			if (cw_sched_get_client_stats(r->d[d].lane.sched, i + 1, &st) == 0)
				o->throttled_s += (double)st.throttled_ns / 1e9;
		}
		if (c->n_lat) {
			qsort(c->lat, c->n_lat, sizeof(*c->lat), cmp_i64);
			for (size_t k = 0; k < c->n_lat; k++)
				sum += (double)c->lat[k];
			o->mean_ms = sum / (double)c->n_lat / 1e6;
			o->p99_ms = pct_ms(c->lat, c->n_lat, 99);
		}
		if (o->resv_share > 0)
			res->resv_met = res->resv_met < 0 ? o->share / o->resv_share :
				       CW_MIN(res->resv_met, o->share / o->resv_share);
		if (o->limit_share > 0) {
			res->limit_ratio = CW_MAX(res->limit_ratio, o->share / o->limit_share);
			res->limit_over = CW_MAX(0, res->limit_ratio - 1);
		}
		if (!o->resv_share && !o->limit_share) {
			w_sum += sc->clients[i].weight;
			s_sum += o->share;
		}
	}
	for (unsigned i = 0; i < sc->n_clients && w_sum > 0 && s_sum > 0; i++) {
		const struct sim_client_result *o = &res->clients[i];

		if (!o->resv_share && !o->limit_share)
			res->share_error_max = CW_MAX(res->share_error_max,
						      fabs(o->share / s_sum -
							   sc->clients[i].weight / w_sum));
	}
}

int sim_run_be(const struct sim_setup *setup, size_t n_streams, const struct sim_trace *trace,
	       enum cw_sched_policy policy, enum sim_be_order order, struct sim_result *ret)
{
	const struct sim_scenario *sc = setup->sc;
	struct run r = { .setup = setup, .sc = sc, .trace = trace, .order = order };
	struct sim_result res = { .placement = setup->placement, .policy = policy,
				  .be_order = order };
	int64_t t0 = cw_now_ns();
	int64_t now = 0;
	int e;

	r.n_streams = CW_MIN(n_streams, setup->n_streams);
	res.streams = r.n_streams;
	res.rt_load_mb_s = sim_setup_load_mb_s(setup, r.n_streams);
	r.next_n = calloc(r.n_streams + 1, sizeof(*r.next_n));
	r.be = calloc(trace->n + 1, sizeof(*r.be));
	r.lat = calloc(trace->n + 1, sizeof(*r.lat));
	r.cl = calloc(sc->n_clients + 1, sizeof(*r.cl));
	r.s_req = calloc(r.n_streams + 1, sizeof(*r.s_req));
	r.s_miss = calloc(r.n_streams + 1, sizeof(*r.s_miss));
	r.s_be = calloc(r.n_streams + 1, sizeof(*r.s_be));
	r.s_worst = calloc(r.n_streams + 1, sizeof(*r.s_worst));
	r.fail_spare = -1;
	if (sc->timeline_path[0] && sc->timeline_ns > 0) {
		r.n_tl = (size_t)(sc->duration_ns / sc->timeline_ns) + 1;
		r.tl = calloc(r.n_tl, sizeof(*r.tl));
		for (size_t i = 0; r.tl && i < r.n_tl; i++)
			r.tl[i].late_surv_ns = r.tl[i].late_other_ns = INT64_MIN;
	}
	for (size_t i = 0; r.s_worst && i < r.n_streams; i++)
		r.s_worst[i] = INT64_MIN;
	if (!r.next_n || !r.be || !r.lat || !r.cl || !r.s_req || !r.s_miss || !r.s_be || !r.s_worst ||
	    (sc->timeline_path[0] && !r.tl)) {
		e = -ENOMEM;
		goto out;
	}
	if (order >= SIM_N_BEQ) {
		e = -EINVAL;
		goto out;
	}
	if (order == SIM_BEQ_RBFQ && (e = cw_sched_tracker_new(sc->disks, &r.trk)) < 0)
		goto out;
	for (unsigned i = 0; i < sc->n_clients; i++)
		sim_rng_seed(&r.cl[i].rng, sc->seed, 100 + i);
	e = run_setup(&r, &res, policy);
	if (e == 0 && sc->cache_pct) {
		uint64_t nb = (uint64_t)sc->be_partitions * (setup->be_part_bytes / sc->be_pblock_bytes);
		uint64_t ns = nb * sc->cache_pct / 100;

		r.cslot = malloc(CW_MAX(nb, 1) * sizeof(*r.cslot));
		e = r.cslot ? cw_cache_policy_new(nb, (uint32_t)CW_MIN(ns, UINT32_MAX - 1), NULL,
						  &r.cache) : -ENOMEM;
		for (uint64_t b = 0; e == 0 && b < nb; b++)
			r.cslot[b] = UINT32_MAX;
	}
	r.be_blocks = setup->be_blocks;
	if (e == 0 && (sc->move_at_ns >= 0 || sc->fail_disk >= 0)) {
		e = sim_move_open(setup, r.n_streams, &r.mv);
		if (e == 0) {
			r.be_blocks = sim_move_blocks(r.mv);
			e = sc->fail_disk >= 0 ? ev_push(&r.q, sc->fail_at_ns, EV_FAIL,
							 (uint32_t)sc->fail_disk) :
			    ev_push(&r.q, sc->move_at_ns, EV_MOVE, 0);
		}
	}
	if (e < 0)
		goto out;
	for (size_t i = 0; i < r.n_streams && e == 0; i++)
		if (setup->streams[i].phase_ns < sc->duration_ns)
			e = ev_push(&r.q, setup->streams[i].phase_ns, EV_RT, (uint32_t)i);
	if (e == 0 && trace->n)
		e = ev_push(&r.q, trace->v[0].t_ns, EV_BE, 0);
	for (unsigned i = 0; i < sc->n_clients && e == 0; i++)
		for (unsigned k = 0; k < sc->clients[i].depth && e == 0; k++)
			e = ev_push(&r.q, 0, EV_CLIENT, i * SIM_MAX_DEPTH + k);
	while (e == 0 && r.q.n) {
		struct ev ev = ev_pop(&r.q);

		now = ev.t;
		res.events++;
		switch (ev.kind) {
		case EV_RT:
			e = on_rt(&r, ev.idx, now);
			break;
		case EV_BE:
			e = on_be(&r, ev.idx, now);
			break;
		case EV_DONE:
			e = on_done(&r, ev.idx, now);
			break;
		case EV_CLIENT:
			e = on_client(&r, ev.idx, now);
			break;
		case EV_HIT:
			e = on_hit(&r, now);
			break;
		case EV_MOVE:
			e = sim_move_begin(r.mv, now);
			if (e == 0)
				e = mover_kick(&r, now);
			break;
		case EV_FAIL:
			e = on_fail(&r, ev.idx, now);
			break;
		case EV_MOVER:
			if (r.m_wake == now) {
				r.m_wake = 0;
				e = mover_kick(&r, now);
			}
			break;
		case EV_WAKE:
			if (r.d[ev.idx].wake_at == now) {
				r.d[ev.idx].wake_at = INT64_MIN;
				e = kick(&r, ev.idx, now);
			}
			break;
		}
	}
	if (e < 0)
		goto out;

	res.end_ns = now;
	res.rt_min_slack_ns = INT64_MAX;
	for (unsigned d = 0; d < sc->disks; d++) {
		struct cw_sched_stats st;

		cw_sched_get_stats(r.d[d].lane.sched, &st);
		res.rt_done += st.rt_done;
		res.rt_misses += st.rt_missed;
		res.rt_overruns += st.rt_overrun;
		res.be_slack += st.be_slack;
		res.be_idle += st.be_idle;
		res.be_server += st.be_server;
		res.rt_min_slack_ns = CW_MIN(res.rt_min_slack_ns, st.min_slack_ns);
		res.util[d] = now > 0 ? (double)r.d[d].busy_ns / (double)now : 0;
	}
	res.be_requests = trace->n;
	res.be_done = r.n_lat;
	res.be_rejected = r.be_rejected;
	res.be_overruns = r.be_overruns;
	res.cache_hits = r.c_hits;
	res.cache_misses = r.c_misses;
	res.cache_promotions = r.c_promotions;
	res.cache_demotions = r.c_demotions;
	res.margin_raises = r.margin_raises;
	res.slack_stopped = r.slack_stopped;
	res.margin_max_ppm = r.margin_max_ppm;
	if (r.n_lat) {
		double sum = 0;

		qsort(r.lat, r.n_lat, sizeof(*r.lat), cmp_i64);
		for (size_t i = 0; i < r.n_lat; i++)
			sum += (double)r.lat[i];
		res.be_mean_ms = sum / (double)r.n_lat / 1e6;
		res.be_p50_ms = pct_ms(r.lat, r.n_lat, 50);
		res.be_p99_ms = pct_ms(r.lat, r.n_lat, 99);
		res.be_max_ms = (double)r.lat[r.n_lat - 1] / 1e6;
		res.be_part0_mean_ms = r.part0_n ? r.part0_sum / (double)r.part0_n / 1e6 : 0;
	}
	/* every BE request's (the trace's and the clients'), in all phases */
	{
		size_t n = r.n_plat[0] + r.n_plat[1] + r.n_plat[2], k = 0;
		_cleanup_free_ int64_t *all = malloc(CW_MAX(n, 1) * sizeof(*all));

		if (!all) {
			e = -ENOMEM;
			goto out;
		}
		for (unsigned ph = 0; ph < 3; k += r.n_plat[ph++])
			if (r.n_plat[ph])
				memcpy(all + k, r.plat[ph], r.n_plat[ph] * sizeof(*all));
		qsort(all, n, sizeof(*all), cmp_i64);
		res.be_all_mean_ms = mean_ms(all, n);
		res.be_all_p99_ms = pct_ms(all, n, 99);
	}
	for (unsigned ph = 0; ph < 3; ph++) {
		if (r.n_plat[ph])
			qsort(r.plat[ph], r.n_plat[ph], sizeof(int64_t), cmp_i64);
		res.be_phase_n[ph] = r.n_plat[ph];
		res.be_phase_mean_ms[ph] = mean_ms(r.plat[ph], r.n_plat[ph]);
		res.be_phase_p99_ms[ph] = pct_ms(r.plat[ph], r.n_plat[ph], 99);
	}
	res.fail_spare = -1;
	res.rebuild_start_s = res.rebuild_end_s = res.degraded_end_s = -1;
	e = sim_move_result(r.mv, &res);
	if (e < 0)
		goto out;
	if (sc->fail_disk >= 0)
		fail_result(&r, &res);
	if (r.tl)
		e = timeline_write(&r, now);
	if (e < 0)
		goto out;
	for (uint64_t g = 0; r.be_blocks && g < sc->be_partitions * (setup->be_part_bytes /
								      sc->be_pblock_bytes); g++)
		res.be_blocks_on[r.be_blocks[g].disk]++;
	clients_result(&r, &res);
	res.wall_s = (double)(cw_now_ns() - t0) / 1e9;
	*ret = res;
out:
	run_free(&r);
	return e;
}
