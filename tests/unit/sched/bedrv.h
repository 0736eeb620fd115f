/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A virtual-time driver for best-effort clients against one or more
 * struct cw_sched (one per disk): each client keeps `depth` requests
 * queued on each disk it uses while it is active, each request takes its
 * cost times the disk's slowdown at that moment, and every dispatch is
 * logged.  With a tracker the clients' requests carry delta and rho
 * between disks (RBFQ section 3.2).  Tests assert on the log.
 */
#ifndef CW_TEST_BEDRV_H
#define CW_TEST_BEDRV_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <clockwise/sched.h>
#include <clockwise/sched-beq.h>

#define BD_MAX_DISKS 4

struct bd_client {
	uint64_t id;
	unsigned depth;			/* queued per disk while active */
	int64_t cost_ns;		/* each request's expected cost */
	int64_t cost_max_ns;		/* > cost_ns: costs drawn from [cost, cost_max] */
	int64_t from_ns, to_ns;		/* active in [from, to); to 0: to the end */
	unsigned disks;			/* bit mask; 0: disk 0 */
	/* counts, per disk */
	unsigned queued[BD_MAX_DISKS];
};

struct bd_rec {
	int64_t t, cost;
	uint32_t client, disk;	/* client: index into the clients array */
	enum cw_sched_phase phase;
};

struct bd_run {
	struct cw_sched *s[BD_MAX_DISKS];
	unsigned n_disks;		/* 0: 1 */
	struct bd_client *c;
	size_t n;
	int64_t end_ns;
	/* actual service = cost * slow_num / slow_den while t < slow_from, and
	 * cost * slow2_num / slow_den after (all 0: actual = cost) */
	int64_t slow_num, slow2_num, slow_den, slow_from;
	struct cw_sched_tracker *trk;
	bool retrack;			/* requests bring delta and rho again at the head */
	unsigned rng;
	int64_t now;			/* where bd_go starts (and then ended) */
	/* out */
	struct bd_rec *log;
	size_t n_log, cap_log;
	int err;
};

struct bd_req {
	struct cw_sched_req r;		/* first */
	uint32_t client;
	struct bd_run *run;
	unsigned disk;
};


static inline int64_t bd_rand(unsigned *rng, int64_t lo, int64_t hi)
{
	unsigned x = *rng ? *rng : 2463534242u;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*rng = x;
	return lo + (int64_t)(x % (unsigned)(hi - lo + 1));
}

static inline bool bd_active(const struct bd_client *c, int64_t now)
{
	return now >= c->from_ns && (!c->to_ns || now < c->to_ns);
}

static inline void bd_set_err(struct bd_run *r, int e)
{
	if (e < 0 && !r->err)
		r->err = e;
}

static inline void bd_retrack(struct cw_sched_req *r)
{
	struct bd_req *q = (struct bd_req *)r;

	bd_set_err(q->run, cw_sched_tracker_tag(q->run->trk, q->disk, r));
}

static inline void bd_fill(struct bd_run *r, unsigned d, int64_t now)
{
	for (size_t i = 0; i < r->n; i++) {
		struct bd_client *c = &r->c[i];

		if (!bd_active(c, now) || !((c->disks ? c->disks : 1u) & (1u << d)))
			continue;
		while (c->queued[d] < c->depth && !r->err) {
			struct bd_req *q = calloc(1, sizeof(*q));

			if (!q) {
				bd_set_err(r, -ENOMEM);
				return;
			}
			q->client = (uint32_t)i;
			q->run = r;
			q->disk = d;
			q->r = (struct cw_sched_req){
				.cls = CW_SCHED_BE, .client = c->id, .arrival_ns = now,
				.service_ns = c->cost_max_ns > c->cost_ns ?
					      bd_rand(&r->rng, c->cost_ns, c->cost_max_ns) : c->cost_ns,
			};
			/* delta and rho now, or (retrack) when it is tagged */
			if (r->trk && r->retrack)
				q->r.retrack = bd_retrack;
			else if (r->trk)
				bd_set_err(r, cw_sched_tracker_tag(r->trk, d, &q->r));
			bd_set_err(r, cw_sched_enqueue(r->s[d], &q->r, now));
			c->queued[d]++;
		}
	}
}

static inline void bd_log(struct bd_run *r, const struct bd_req *q, unsigned d, int64_t now)
{
	if (r->n_log == r->cap_log) {
		size_t cap = r->cap_log ? r->cap_log * 2 : 1024;
		struct bd_rec *v = realloc(r->log, cap * sizeof(*v));

		if (!v) {
			bd_set_err(r, -ENOMEM);
			return;
		}
		r->log = v;
		r->cap_log = cap;
	}
	r->log[r->n_log++] = (struct bd_rec){ .t = now, .cost = q->r.service_ns, .client = q->client,
					      .disk = d, .phase = q->r.phase };
}

/* Runs every disk from 0 to end_ns: at each event (a completion, a time
 * a scheduler asked to be woken at, a client starting or stopping) the
 * clients refill their queues and every free disk asks its scheduler. */
static inline void bd_go(struct bd_run *r)
{
	unsigned nd = r->n_disks ? r->n_disks : 1;
	struct bd_req *cur[BD_MAX_DISKS] = { 0 };
	int64_t end[BD_MAX_DISKS] = { 0 }, until[BD_MAX_DISKS], now = r->now;

	while (now < r->end_ns && !r->err) {
		int64_t next = r->end_ns;

		for (unsigned d = 0; d < nd; d++)
			if (cur[d] && end[d] <= now) {
				struct bd_req *q = cur[d];

				bd_set_err(r, cw_sched_complete(r->s[d], &q->r, now, now - q->r.start_ns));
				if (r->trk)
					bd_set_err(r, cw_sched_tracker_done(r->trk, d, &q->r));
				r->c[q->client].queued[d]--;
				free(q);
				cur[d] = NULL;
			}
		for (unsigned d = 0; d < nd; d++)
			bd_fill(r, d, now);
		for (unsigned d = 0; d < nd; d++) {
			struct cw_sched_decision dec;

			until[d] = INT64_MAX;
			if (cur[d])
				continue;
			bd_set_err(r, cw_sched_next(r->s[d], now, &dec));
			if (dec.verdict == CW_SCHED_DISPATCH) {
				struct bd_req *q = (struct bd_req *)dec.req;
				int64_t a = q->r.service_ns;

				if (r->slow_den)
					a = a * (now < r->slow_from ? r->slow_num : r->slow2_num) / r->slow_den;
				cur[d] = q;
				end[d] = now + (a > 0 ? a : 1);
				bd_log(r, q, d, now);
			} else if (dec.verdict == CW_SCHED_WAIT)
				until[d] = dec.until_ns;
		}
		for (unsigned d = 0; d < nd; d++) {
			int64_t t = cur[d] ? end[d] : until[d];

			next = t < next ? t : next;
		}
		for (size_t i = 0; i < r->n; i++) {
			int64_t f = r->c[i].from_ns, t = r->c[i].to_ns;

			if (f > now && f < next)
				next = f;
			if (t > now && t < next)
				next = t;
		}
		now = next > now ? next : now + 1;
	}
	for (unsigned d = 0; d < nd; d++)
		if (cur[d]) {
			/* finish it as it would have finished */
			now = end[d] > now ? end[d] : now;
			cw_sched_complete(r->s[d], &cur[d]->r, end[d], end[d] - cur[d]->r.start_ns);
			r->c[cur[d]->client].queued[d]--;
			free(cur[d]);
		}
	r->now = now;
}

/* Frees the schedulers and the requests still queued in them. */
static inline void bd_done(struct bd_run *r)
{
	unsigned nd = r->n_disks ? r->n_disks : 1;

	for (unsigned d = 0; d < nd; d++) {
		int64_t t = INT64_MAX / 8;

		for (int k = 0; k < 1000000 && r->s[d]; k++) {
			struct cw_sched_decision dec;

			if (cw_sched_next(r->s[d], t, &dec) < 0)
				break;
			if (dec.verdict == CW_SCHED_WAIT) {
				t = dec.until_ns;
				continue;
			}
			if (dec.verdict != CW_SCHED_DISPATCH)
				break;
			cw_sched_complete(r->s[d], dec.req, t, 1);
			free(dec.req);
		}
		cw_sched_free(r->s[d]);
		r->s[d] = NULL;
	}
	cw_sched_tracker_free(r->trk);
	free(r->log);
}

/* Cost served to client i on disk d (any: d < 0) in [t0, t1). */
static inline int64_t bd_served(const struct bd_run *r, size_t i, int d, int64_t t0, int64_t t1)
{
	int64_t sum = 0;

	for (size_t k = 0; k < r->n_log; k++) {
		const struct bd_rec *x = &r->log[k];

		if (x->client == i && (d < 0 || x->disk == (uint32_t)d) && x->t >= t0 && x->t < t1)
			sum += x->cost;
	}
	return sum;
}

static inline struct cw_sched *bd_sched(const struct cw_sched_beq_ops *ops, const void *conf)
{
	struct cw_sched_opts o;
	struct cw_sched *s = NULL;

	cw_sched_opts_init(&o);
	o.policy = CW_SCHED_EDF;	/* no streams: BE through the idle route */
	o.beq = ops;
	o.beq_conf = conf;
	if (cw_sched_new(&o, &s) < 0)
		return NULL;
	return s;
}

#endif
