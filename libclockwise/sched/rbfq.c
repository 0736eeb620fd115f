/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * RBFQ, the reservation-based fair queue of Gulati, Merchant & Varman
 * (RePAIR), section 3.1 (Figure 5), 3.2 (delta), 3.3 (idle credits) and
 * 3.4 (limit), as a best-effort order of struct cw_sched_beq_ops.
 *
 * A request r of client i costs c_r, its expected service time (the disk
 * model's mean, cost_ns, or the bound service_ns; so large requests cost
 * more), and gets three tags in real time:
 *   local   l_r = max(l_{r-1} + (c_r + rho_r) / M_i, t - 4b)  M_i: reservation
 *   global  g_r = max(g_{r-1} + (c_r + delta_r) / w_i, t - sigma_i / w_i)
 *   limit   u_r = max(u_{r-1} + (c_r + delta_r) / L_i, t - b)  L_i: limit
 * where delta and rho (the client's service on other disks, and the part
 * of it for its reservation) count for M and L only when they are the
 * client's over every disk (cw_sched_client.spread, as dmClock has them);
 * per-disk M and L (the paper's M_ij) take rho = delta = 0.
 A request that can bring its delta and rho when it reaches the head of
 * its client's queue (cw_sched_req.retrack) is tagged then, after the
 * one before it, as dmClock's delayed tags are: tagged on arrival, the
 * service a client got elsewhere while a queue of its requests waited
 * here would count only in the tags of its latest, and the head, tagged
 * a queue earlier, would run past a spread limit by that queue.
 * with M and L as shares of the disk's time (ppm), w an integer weight,
 * sigma the idle credit (cost, only for a client whose queue was empty)
 * and b the lag (conf.lag_ns) for a client whose queue was not empty (for
 * one whose queue was empty, b = 0).  When every queued reservation is
 * more than b behind (an overload), all local tags move forward together
 * until the least behind is b behind.  Before tagging, global tags are shifted
 * together so that the smallest among queued heads equals now (tag
 * adjustment).  A client whose head has u > now is held back (limit).
 * Of the others: if some head has l <= now, the smallest l goes (local
 * phase, for reservations); otherwise the smallest g (global phase, for
 * weights), and then the local tags of the client's remaining requests,
 * and the base of its next one, drop by c_r / M_i, so that service given
 * for the weight does not count against the reservation.
 *
 * Invariants: a client's queued local tags are spaced by (c + rho) / M;
 * the global tags of queued heads, after adjustment, are >= now; a request
 * whose limit tag is in the future is never returned by peek.
 *
 * Where we depart from the paper, and why:
 *  - The paper's limit tag "incremented by iosize/B, stop if u > now"
 *    has no floor, so a client idle for an hour may then run an hour's
 *    worth of limit in a burst.  We floor it at the arrival time like the
 *    other two tags: a backlogged client gets at most L * T + one request
 *    over T from the moment it became backlogged.
 *  - "Add or subtract a constant so that the minimum global tag equals t"
 *    counts clients held at their limit; their tags stop moving, so every
 *    other client would drift ahead of real time and a newcomer (tagged
 *    t) would outrank all of them.  The minimum is taken over the heads
 *    that may go now (all heads if none may).
 *  - The paper's reservation proof (Appendix B, Theorem) ends with
 *    "for k* < j <= n, S_j >= T w_j M_k* / w_k*"; the bound holds for
 *    1 <= j <= k* (those clients get the weighted share; the others get
 *    exactly M_j).  cw_sched_shares follows the mathematics.
 *  - The paper assigns l_r = max(l_{r-1} + 1/M, t) but says tags are
 *    "spaced 1/M apart, as long as the client remains backlogged"; the
 *    two differ when a client waits behind long requests of others for
 *    longer than its queue covers: the formula then forgets its deficit
 *    and the reservation is missed (the brute-force test finds clients
 *    with small requests getting 12% of a 39% reservation).  The text's
 *    rule, unbounded, would repay an hour of overload for an hour after.
 *    Nor does a floor per client work in an overload: every client sits
 *    at the floor, and the order among them is arrival order, not the
 *    paper's "in proportion to their minimum demands".  So we keep the
 *    text's spacing while a client stays backlogged, bound the lag of the
 *    whole set by one uniform shift (which keeps the proportion), and cap
 *    any single client's lag at 4b.  The limit tag keeps a per-client
 *    floor at b: it needs no proportion.  A client whose queue ran dry
 *    less than b ago counts as backlogged, with its floor at b: spread
 *    over several disks, a client with work outstanding often has none
 *    queued on one disk for a moment (cwsim's reserved client lost 5% of
 *    its reservation that way); it may so get up to b of reservation it
 *    did not use, never more.
 *  - Tags are integer nanoseconds; each division keeps its remainder per
 *    client, so rounding never accumulates over a long backlog.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched-internal.h"
#include "common/util.h"

#define MAX_CLIENTS 65536
/* a backlogged client's reservation never lags more than this many lags */
#define HARD_LAG 4
/* (cost + delta) * 10^6 must fit in int64_t */
#define MAX_COST (INT64_MAX / CW_SCHED_PPM / 4)

struct ent {
	struct cw_sched_req *req;
	int64_t l, g, u;	/* l, g: raw (see leff and geff); u: real time */
	int64_t l_own;		/* c_r / M: what a global-phase dispatch gives back */
	uint64_t seq;
	bool pending;		/* not tagged yet: it will be at the head */
	int64_t arrived;	/* when pushed: a pending one's floors are of then */
	int64_t g_floor;	/* pending: its global floor, raw (arrival - g_off then) */
};

struct client {
	uint64_t id;
	struct cw_sched_client qos;
	struct ent *q;		/* ring of queued requests, oldest first */
	size_t head, n, cap;
	bool tagged;		/* has had a request */
	int64_t l_last, g_last, u_last;	/* raw tags of the last request tagged */
	int64_t l_off;		/* local-tag correction (grows) */
	uint64_t rem_l, rem_g, rem_u;	/* division remainders */
	int64_t head_since;	/* when the head became the head */
	int64_t empty_since;	/* when its queue last ran dry */
	size_t active;		/* index in rbfq.active, or SIZE_MAX */
	struct cw_sched_client_stats st;
};

struct rbfq {
	struct cw_sched_rbfq_conf conf;
	struct sched_idmap map;	/* id -> struct client */
	struct client **active;	/* clients with queued requests */
	size_t n_active, active_cap;
	int64_t g_off;		/* effective global tag = raw + g_off */
	int64_t l_shift;	/* effective local tag = raw - client's l_off + l_shift */
	size_t count;
	uint64_t seq;
	/* what the last peek chose, so that take knows the phase */
	struct cw_sched_req *peeked;
	enum cw_sched_phase peek_phase;
	int64_t peek_now;
	int64_t now;		/* the latest time seen */
};

static const struct cw_sched_client default_qos = { .weight = 1 };

void cw_sched_rbfq_conf_init(struct cw_sched_rbfq_conf *c)
{
	*c = (struct cw_sched_rbfq_conf){ .size = sizeof(*c), .lag_ns = CW_NS_PER_S };
}

/* ---- clients ------------------------------------------------------------- */

static struct client *find(const struct rbfq *f, uint64_t id)
{
	return sched_idmap_get(&f->map, id);
}

static int get(struct rbfq *f, uint64_t id, struct client **ret)
{
	struct client *c = find(f, id);
	int e;

	if (c) {
		*ret = c;
		return 0;
	}
	if (f->map.n >= MAX_CLIENTS)
		return -ENOSPC;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->id = id;
	c->qos = default_qos;
	c->active = SIZE_MAX;
	c->l_last = INT64_MAX;
	c->u_last = INT64_MIN;
	e = sched_idmap_put(&f->map, id, c);
	if (e < 0) {
		free(c);
		return e;
	}
	*ret = c;
	return 0;
}

static struct ent *head(const struct client *c)
{
	return &c->q[c->head];
}

static int activate(struct rbfq *f, struct client *c)
{
	if (c->active != SIZE_MAX)
		return 0;
	if (f->n_active == f->active_cap) {
		size_t cap = f->active_cap ? f->active_cap * 2 : 16;
		struct client **v = realloc(f->active, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		f->active = v;
		f->active_cap = cap;
	}
	c->active = f->n_active;
	f->active[f->n_active++] = c;
	return 0;
}

static void deactivate(struct rbfq *f, struct client *c)
{
	size_t i = c->active;

	f->active[i] = f->active[--f->n_active];
	f->active[i]->active = i;
	c->active = SIZE_MAX;
}

/* ---- tags ---------------------------------------------------------------- */

/* x * scale / div, keeping the remainder in *rem for the next time */
static int64_t step(int64_t x, uint64_t scale, uint64_t div, uint64_t *rem)
{
	uint64_t num = (uint64_t)x * scale + *rem;

	*rem = num % div;
	return (int64_t)(num / div);
}

static bool held(const struct client *c, const struct ent *e, int64_t now)
{
	return c->qos.limit_ppm && e->u > now;
}

/* A local tag in real time (INT64_MAX: none). */
static int64_t leff(const struct rbfq *f, const struct client *c, int64_t raw)
{
	return raw == INT64_MAX ? INT64_MAX : raw - c->l_off + f->l_shift;
}

static int64_t lraw(const struct rbfq *f, const struct client *c, int64_t eff)
{
	return eff + c->l_off - f->l_shift;
}

/* Tag adjustment: shifts every global tag so that the least among heads
 * that may go now (or among all heads, if none may) equals now.  And the
 * lag bound: when every queued reservation is more than lag behind real
 * time (an overload), shifts every local tag so that the least behind is
 * exactly lag behind; a uniform shift keeps them in proportion to M. */
static void adjust(struct rbfq *f, int64_t now)
{
	int64_t min_go = INT64_MAX, min_all = INT64_MAX, max_l = INT64_MIN;

	for (size_t k = 0; k < f->n_active; k++) {
		const struct client *c = f->active[k];
		const struct ent *e = head(c);

		if (e->pending)
			continue;	/* the head being tagged (tag_head) */
		min_all = CW_MIN(min_all, e->g);
		if (!held(c, e, now))
			min_go = CW_MIN(min_go, e->g);
		if (e->l != INT64_MAX)
			max_l = CW_MAX(max_l, leff(f, c, e->l));
	}
	if (max_l != INT64_MIN && max_l < now - f->conf.lag_ns)
		f->l_shift += now - f->conf.lag_ns - max_l;
	if (min_all == INT64_MAX || f->conf.no_tag_adjust)
		return;
	f->g_off = now - (min_go != INT64_MAX ? min_go : min_all);
}

/* Tags e (its request's cost, delta and rho) at now: idle, its client had
 * nothing queued; recent, it counts as backlogged all the same. */
static void tag(struct rbfq *f, struct client *c, struct ent *e, int64_t now, bool idle,
		bool recent)
{
	struct cw_sched_req *r = e->req;
	int64_t cost = cw_sched_req_cost(r), other, other_resv, other_limit;
	int64_t lag_floor = recent ? now - f->conf.lag_ns : now;

	if (r->retrack) {
		/* what it brought, and what came since */
		int64_t o = CW_MAX(r->other_ns, 0), o_resv = CW_MAX(r->other_resv_ns, 0);

		r->retrack(r);
		r->other_ns = CW_MIN(CW_MAX(r->other_ns, 0), MAX_COST) + CW_MIN(o, MAX_COST);
		r->other_resv_ns = CW_MIN(CW_MAX(r->other_resv_ns, 0), MAX_COST) +
				   CW_MIN(o_resv, MAX_COST);
	}
	other = CW_MIN(CW_MAX(r->other_ns, 0), MAX_COST - cost);
	other_resv = CW_MIN(CW_MAX(r->other_resv_ns, 0), MAX_COST - cost);
	/* a client whose reservation and limit are this disk's alone: only
	 * its weight counts what it got elsewhere */
	other_limit = c->qos.spread ? other : 0;
	if (!c->qos.spread)
		other_resv = 0;
	/* local: spaced while backlogged (up to the hard floor), from now
	 * after an idle spell */
	if (c->qos.resv_ppm) {
		int64_t inc = step(cost + other_resv, CW_SCHED_PPM, c->qos.resv_ppm, &c->rem_l);
		int64_t floor = !idle ? now - HARD_LAG * f->conf.lag_ns : lag_floor;

		e->l_own = (int64_t)((uint64_t)cost * CW_SCHED_PPM / c->qos.resv_ppm);
		if (c->tagged && c->l_last != INT64_MAX)
			e->l = lraw(f, c, CW_MAX(leff(f, c, c->l_last) + inc, floor));
		else
			e->l = lraw(f, c, now);
	} else
		e->l = INT64_MAX;	/* never due */
	/* global: raw = effective - g_off; an idle client may come back up
	 * to its idle credit behind now, never further.  A head tagged late
	 * (pending) keeps the floor it had on arrival, in the frame of the
	 * global tags then (they have been adjusted since) */
	{
		int64_t floor = e->pending ? e->g_floor + f->g_off : now;
		int64_t inc = step(cost + other, 1, c->qos.weight, &c->rem_g);

		if (idle && c->qos.idle_credit_ns)
			floor -= c->qos.idle_credit_ns / c->qos.weight;
		if (c->tagged)
			e->g = CW_MAX(c->g_last + f->g_off + inc, floor) - f->g_off;
		else
			e->g = floor - f->g_off;
	}
	if (c->qos.limit_ppm) {
		int64_t inc = step(cost + other_limit, CW_SCHED_PPM, c->qos.limit_ppm, &c->rem_u);

		e->u = c->u_last != INT64_MIN ? CW_MAX(c->u_last + inc, lag_floor) : now;
	} else
		e->u = INT64_MIN;
	c->l_last = e->l;
	c->g_last = e->g;
	c->u_last = e->u;
	c->tagged = true;
	e->pending = false;
}

static int rbfq_push(void *st, struct cw_sched_req *r, int64_t now)
{
	struct rbfq *f = st;
	struct client *c;
	struct ent *e;
	int64_t cost = cw_sched_req_cost(r);
	bool idle, recent;
	int err;

	f->now = CW_MAX(f->now, now);
	if (cost <= 0 || cost > MAX_COST)
		return -EINVAL;
	err = get(f, r->client, &c);
	if (err < 0)
		return err;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 8;
		struct ent *v = malloc(cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		for (size_t k = 0; k < c->n; k++)
			v[k] = c->q[(c->head + k) % c->cap];
		free(c->q);
		c->q = v;
		c->head = 0;
		c->cap = cap;
	}
	idle = c->n == 0;
	/* a queue that ran dry only a moment ago (within the lag) still
	 * counts as backlogged for the reservation and the limit: a client
	 * spread over several disks often has nothing queued on one of them
	 * for a moment, and would otherwise lose its reservation there */
	recent = !idle || (c->tagged && now - c->empty_since <= f->conf.lag_ns);
	adjust(f, now);
	if (idle && (err = activate(f, c)) < 0)
		return err;

	e = &c->q[(c->head + c->n) % c->cap];
	*e = (struct ent){ .req = r, .seq = f->seq++, .arrived = now, .g_floor = now - f->g_off };
	/* delayed tags (dmClock's): one that will bring its delta and rho
	 * when it reaches the head is tagged then, after the one before it,
	 * with its arrival's floors (as if it had been tagged on arrival with
	 * what it knows now) */
	if (idle || (!r->retrack && !c->q[(c->head + c->n - 1) % c->cap].pending))
		tag(f, c, e, now, idle, recent);
	else
		e->pending = true;
	if (idle)
		c->head_since = now;
	c->n++;
	f->count++;
	return 0;
}

/* The request to serve at now and why; NULL if every head is held. */
static struct cw_sched_req *choose(struct rbfq *f, int64_t now, enum cw_sched_phase *ret_phase)
{
	const struct ent *best_l = NULL, *best_g = NULL;
	const struct client *cl = NULL;

	for (size_t k = 0; k < f->n_active; k++) {
		const struct client *c = f->active[k];
		const struct ent *e = head(c);
		int64_t l;

		if (held(c, e, now))
			continue;
		l = leff(f, c, e->l);
		if (l <= now && (!best_l || l < leff(f, cl, best_l->l) ||
				 (l == leff(f, cl, best_l->l) && e->seq < best_l->seq))) {
			best_l = e;
			cl = c;
		}
		if (!best_g || e->g < best_g->g || (e->g == best_g->g && e->seq < best_g->seq))
			best_g = e;
	}
	if (best_l) {
		*ret_phase = CW_SCHED_PHASE_RESV;
		return best_l->req;
	}
	*ret_phase = CW_SCHED_PHASE_SHARE;
	return best_g ? best_g->req : NULL;
}

static struct cw_sched_req *rbfq_peek(void *st, int64_t now)
{
	struct rbfq *f = st;

	f->peeked = choose(f, now, &f->peek_phase);
	f->peek_now = now;
	f->now = CW_MAX(f->now, now);
	return f->peeked;
}

/* Index in c's ring of req, or SIZE_MAX. */
static size_t find_ent(const struct client *c, const struct cw_sched_req *r)
{
	for (size_t k = 0; k < c->n; k++)
		if (c->q[(c->head + k) % c->cap].req == r)
			return k;
	return SIZE_MAX;
}

/* The new head of c, if its tags waited for it to get there. */
static void tag_head(struct rbfq *f, struct client *c)
{
	struct ent *e = head(c);

	if (e->pending)
		tag(f, c, e, e->arrived, false, true);
}

static void drop(struct rbfq *f, struct client *c, size_t k)
{
	for (size_t j = k; j > 0; j--)
		c->q[(c->head + j) % c->cap] = c->q[(c->head + j - 1) % c->cap];
	c->head = (c->head + 1) % c->cap;
	c->n--;
	f->count--;
	if (c->n == 0) {
		deactivate(f, c);
		c->empty_since = f->now;
	} else if (k == 0) {
		tag_head(f, c);
	}
}

/* Folds the local-tag correction into the tags before it grows too big. */
static void rebase(struct client *c)
{
	for (size_t k = 0; k < c->n; k++) {
		struct ent *e = &c->q[(c->head + k) % c->cap];

		if (e->l != INT64_MAX && !e->pending)
			e->l -= c->l_off;
	}
	if (c->l_last != INT64_MAX)
		c->l_last -= c->l_off;
	c->l_off = 0;
}

static void rbfq_take(void *st, struct cw_sched_req *r)
{
	struct rbfq *f = st;
	struct client *c = find(f, r->client);
	enum cw_sched_phase phase = f->peek_phase;
	int64_t now = f->peek_now;
	size_t k;
	struct ent e;

	if (!c || (k = find_ent(c, r)) == SIZE_MAX)
		return;
	e = c->q[(c->head + k) % c->cap];
	if (r != f->peeked)
		phase = !e.pending && leff(f, c, e.l) <= now ? CW_SCHED_PHASE_RESV :
			CW_SCHED_PHASE_SHARE;
	if (phase == CW_SCHED_PHASE_SHARE && e.l != INT64_MAX && !e.pending) {
		c->l_off += e.l_own;	/* the paper's "subtract 1/M_k" */
		if (c->l_off > INT64_C(1) << 60)
			rebase(c);
	}
	r->throttled_ns = 0;
	if (k == 0 && c->qos.limit_ppm && e.u > c->head_since)
		r->throttled_ns = CW_MIN(e.u, now) - c->head_since;
	c->st.throttled_ns += r->throttled_ns;
	c->st.requests++;
	c->st.served_ns += cw_sched_req_cost(r);
	if (phase == CW_SCHED_PHASE_RESV)
		c->st.served_resv_ns += cw_sched_req_cost(r);
	r->phase = phase;
	drop(f, c, k);
	c->head_since = now;
	f->peeked = NULL;
}

static int rbfq_remove(void *st, struct cw_sched_req *r)
{
	struct rbfq *f = st;
	struct client *c = find(f, r->client);
	size_t k;

	if (!c || (k = find_ent(c, r)) == SIZE_MAX)
		return -ENOENT;
	drop(f, c, k);
	if (f->peeked == r)
		f->peeked = NULL;
	return 0;
}

static size_t rbfq_count(const void *st)
{
	const struct rbfq *f = st;

	return f->count;
}

static int64_t rbfq_ready(void *st, int64_t now)
{
	struct rbfq *f = st;
	int64_t t = INT64_MAX;

	for (size_t k = 0; k < f->n_active; k++) {
		const struct client *c = f->active[k];
		const struct ent *e = head(c);

		t = CW_MIN(t, held(c, e, now) ? e->u : now);
	}
	return t;
}

static int rbfq_set_client(void *st, uint64_t id, const struct cw_sched_client *qos)
{
	struct rbfq *f = st;
	struct client *c;
	int e = cw_sched_client_check(qos);

	if (e < 0)
		return e;
	e = get(f, id, &c);
	if (e < 0)
		return e;
	if (qos->resv_ppm != c->qos.resv_ppm)
		c->rem_l = 0;
	if (qos->weight != c->qos.weight)
		c->rem_g = 0;
	if (qos->limit_ppm != c->qos.limit_ppm)
		c->rem_u = 0;
	if (!c->qos.limit_ppm)
		c->u_last = INT64_MIN;	/* a new limit starts from the next arrival */
	c->qos = *qos;
	return 0;
}

static int rbfq_client_stats(const void *st, uint64_t id, struct cw_sched_client_stats *ret)
{
	const struct rbfq *f = st;
	const struct client *c = find(f, id);

	if (!c)
		return -ENOENT;
	*ret = c->st;
	ret->queued = c->n;
	return 0;
}

static int rbfq_init(const void *conf, void **ret)
{
	const struct cw_sched_rbfq_conf *cf = conf;
	struct rbfq *f;

	if (cf && (cf->size < sizeof(*cf) || cf->lag_ns < 0 || cf->lag_ns > MAX_COST))
		return -EINVAL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	if (cf)
		f->conf = *cf;
	else
		cw_sched_rbfq_conf_init(&f->conf);
	*ret = f;
	return 0;
}

static void client_free(void *p)
{
	struct client *c = p;

	free(c->q);
	free(c);
}

static void rbfq_fini(void *st)
{
	struct rbfq *f = st;

	if (!f)
		return;
	sched_idmap_done(&f->map, client_free);
	free(f->active);
	free(f);
}

static const struct cw_sched_beq_ops rbfq_ops = {
	.name = "rbfq",
	.init = rbfq_init,
	.fini = rbfq_fini,
	.push = rbfq_push,
	.peek = rbfq_peek,
	.take = rbfq_take,
	.remove = rbfq_remove,
	.count = rbfq_count,
	.ready_ns = rbfq_ready,
	.set_client = rbfq_set_client,
	.client_stats = rbfq_client_stats,
};

const struct cw_sched_beq_ops *cw_sched_beq_rbfq(void)
{
	return &rbfq_ops;
}
