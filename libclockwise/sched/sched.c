/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Per-disk dispatch: the ΔL scheduler of Bosch & Mullender, section 3.2
 * ("Whenever the remaining slack time ΔL_r is larger than the expected
 * service time of a best-effort request, the best-effort request is given
 * precedence over real-time requests"), the periodic best-effort server of
 * section 3.3, and the EDF and LST schedulers of section 4.2.
 *
 * Invariant (delta-l): between two refills of ΔL_r the best-effort work
 * started totals at most ΔL (counted in actual service time), except that
 * one request of up to idle_be_ns may start on a disk with no released RT
 * request.  A refill happens only when no released RT request is queued,
 * none is in service and nothing else is in service either.
 *
 * Why no admitted deadline is missed (admit.c gives the S(x) notation:
 * S(x) = x - D(x) - B(x), B(x) the largest C_k - 1 with T_k > x + 1, and
 * ΔL = min S, idle_be = 1 + min (x - D(x))).  Suppose an RT job with
 * deadline d ends late; let t1 be the last instant before d at which no
 * released RT job with deadline <= d was unfinished, x = d - t1.  In
 * [t1, d) the disk is never idle and never starts an RT job due after d
 * (EDF), so it does the demand D(x) plus: at most one request already in
 * service at t1, and best-effort work started in [t1, d).  No refill
 * happens in (t1, d) (a released RT job is always waiting), nor at t1 if
 * something is in service then.
 *  - In service at t1 an RT job due after d: it was released before t1,
 *    so T_k > x + 1 and at most C_k - 1 <= B(x) of it remains; the BE work
 *    after t1 is at most ΔL_r(t1) <= ΔL <= S(x).  Total <= x - D(x).
 *  - In service at t1 a BE request of actual length e started at s < t1:
 *    no refill in [s, d), so the BE work after t1 is at most
 *    max(0, ΔL - e); the request's remaining part is at most e - 1.  If
 *    e <= ΔL the total is < ΔL <= S(x); otherwise e <= idle_be, so the
 *    total is e - 1 <= x - D(x).
 *  - Nothing in service at t1: at most ΔL of BE work.
 * In each case the work in [t1, d) fits in x, so the job is not late.  An
 * RT request that runs early (before its release) is best-effort work
 * here; a server chunk is an admitted job of the server task, and a
 * server job with budget left but no request that fits ends at once, so it
 * is never "waiting" in the sense above.
 *
 * The idle rule follows: on a disk with no released RT request, a BE
 * request may start if it fits in idle_be_ns (it then takes ΔL_r down as
 * far as it goes); the paper's "cannot schedule best-effort requests"
 * when ΔL = 0 is too strict by exactly idle_be_ns.  RT work running over
 * its C is charged to ΔL_r too, so a small overrun eats slack, not
 * deadlines.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched-internal.h"
#include "common/util.h"

enum { ST_NONE = 0, ST_REL, ST_WAIT, ST_BE, ST_SERVICE };

struct heap {
	struct cw_sched_req **v;
	size_t n, cap;
	bool by_release;	/* key: release (waiting) or deadline (released) */
};

struct cw_sched {
	struct cw_sched_opts o;
	struct heap rel, wait;
	const struct cw_sched_beq_ops *beq;
	void *beq_state;

	struct cw_sched_req *cur;	/* in service */
	int64_t dlr;			/* ΔL_r */
	int64_t cur_dlr_before;		/* ΔL_r before cur was charged */
	int64_t last_now;

	/* the periodic BE server's current job */
	bool srv_active;
	int64_t srv_deadline, srv_budget, srv_next;

	struct cw_sched_req **scratch;	/* LST */
	size_t scratch_cap;
	struct cw_sched_stats st;
};

/* ---- heaps ------------------------------------------------------------- */

static bool before(const struct heap *h, const struct cw_sched_req *a, const struct cw_sched_req *b)
{
	int64_t ka = h->by_release ? a->release_ns : a->deadline_ns;
	int64_t kb = h->by_release ? b->release_ns : b->deadline_ns;

	if (ka != kb)
		return ka < kb;
	if (a->arrival_ns != b->arrival_ns)
		return a->arrival_ns < b->arrival_ns;
	return a->stream < b->stream;
}

static void heap_set(struct heap *h, size_t i, struct cw_sched_req *r)
{
	h->v[i] = r;
	r->priv_ = i;
}

static void heap_up(struct heap *h, size_t i)
{
	struct cw_sched_req *r = h->v[i];

	while (i > 0 && before(h, r, h->v[(i - 1) / 2])) {
		heap_set(h, i, h->v[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	heap_set(h, i, r);
}

static void heap_down(struct heap *h, size_t i)
{
	struct cw_sched_req *r = h->v[i];

	for (;;) {
		size_t l = 2 * i + 1, m = l;

		if (l >= h->n)
			break;
		if (l + 1 < h->n && before(h, h->v[l + 1], h->v[l]))
			m = l + 1;
		if (!before(h, h->v[m], r))
			break;
		heap_set(h, i, h->v[m]);
		i = m;
	}
	heap_set(h, i, r);
}

static int heap_reserve(struct heap *h, size_t want)
{
	if (want > h->cap) {
		size_t cap = CW_MAX(want, h->cap ? h->cap * 2 : 16);
		struct cw_sched_req **v = realloc(h->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		h->v = v;
		h->cap = cap;
	}
	return 0;
}

static int heap_push(struct heap *h, struct cw_sched_req *r)
{
	int e = heap_reserve(h, h->n + 1);

	if (e < 0)
		return e;
	heap_set(h, h->n++, r);
	heap_up(h, h->n - 1);
	return 0;
}

static void heap_del(struct heap *h, struct cw_sched_req *r)
{
	size_t i = r->priv_;

	h->n--;
	if (i != h->n) {
		heap_set(h, i, h->v[h->n]);
		heap_down(h, i);
		heap_up(h, h->v[i]->priv_);
	}
}

static struct cw_sched_req *heap_top(const struct heap *h)
{
	return h->n ? h->v[0] : NULL;
}

/* ---- set-up ------------------------------------------------------------ */

static const char *const policy_names[] = {
	[CW_SCHED_DELTA_L] = "delta-l",
	[CW_SCHED_EDF] = "edf",
	[CW_SCHED_LST] = "lst",
};

int cw_sched_policy_parse(const char *name, enum cw_sched_policy *ret)
{
	if (!name || !ret)
		return -EINVAL;
	if (!strcmp(name, "delta-l") || !strcmp(name, "deltal") || !strcmp(name, "dl"))
		*ret = CW_SCHED_DELTA_L;
	else if (!strcmp(name, "edf"))
		*ret = CW_SCHED_EDF;
	else if (!strcmp(name, "lst"))
		*ret = CW_SCHED_LST;
	else
		return -EINVAL;
	return 0;
}

const char *cw_sched_policy_name(enum cw_sched_policy p)
{
	return (unsigned)p < CW_ARRAY_SIZE(policy_names) ? policy_names[p] : NULL;
}

void cw_sched_opts_init(struct cw_sched_opts *o)
{
	*o = (struct cw_sched_opts){
		.size = sizeof(*o),
		.policy = CW_SCHED_DELTA_L,
		.delta_l_ns = INT64_MAX,
		.idle_be_ns = INT64_MAX,
	};
}

static bool slack_ok(int64_t dl, int64_t idle)
{
	return dl >= 0 && idle >= 0;
}

static bool server_ok(int64_t slice, int64_t period)
{
	return (slice == 0 && period == 0) || (slice > 0 && period >= slice);
}

int cw_sched_new(const struct cw_sched_opts *opts, struct cw_sched **ret)
{
	struct cw_sched *s;
	int e;

	if (!opts || !ret || opts->size < sizeof(*opts) ||
	    !cw_sched_policy_name(opts->policy) ||
	    !slack_ok(opts->delta_l_ns, opts->idle_be_ns) ||
	    !server_ok(opts->server_slice_ns, opts->server_period_ns))
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->o = *opts;
	s->wait.by_release = true;
	s->beq = opts->beq ? opts->beq : cw_sched_beq_fifo();
	e = s->beq->init(&s->beq_state);
	if (e < 0) {
		free(s);
		return e;
	}
	s->dlr = opts->delta_l_ns;
	s->last_now = INT64_MIN;
	s->st.min_slack_ns = INT64_MAX;
	*ret = s;
	return 0;
}

void cw_sched_free(struct cw_sched *s)
{
	if (!s)
		return;
	s->beq->fini(s->beq_state);
	free(s->rel.v);
	free(s->wait.v);
	free(s->scratch);
	free(s);
}

int cw_sched_set_slack(struct cw_sched *s, int64_t delta_l_ns, int64_t idle_be_ns)
{
	if (!s || !slack_ok(delta_l_ns, idle_be_ns))
		return -EINVAL;
	s->o.delta_l_ns = delta_l_ns;
	s->o.idle_be_ns = idle_be_ns;
	s->dlr = CW_MIN(s->dlr, delta_l_ns);
	return 0;
}

int cw_sched_set_server(struct cw_sched *s, int64_t slice_ns, int64_t period_ns)
{
	if (!s || !server_ok(slice_ns, period_ns))
		return -EINVAL;
	s->o.server_slice_ns = slice_ns;
	s->o.server_period_ns = period_ns;
	if (slice_ns == 0)
		s->srv_active = false;
	else
		s->srv_budget = CW_MIN(s->srv_budget, slice_ns);
	return 0;
}

/* ---- queueing ---------------------------------------------------------- */

/* The largest BE request delta-l could ever start with this set-up. */
static int64_t be_limit(const struct cw_sched *s)
{
	return CW_MAX(CW_MAX(s->o.delta_l_ns, s->o.idle_be_ns), s->o.server_slice_ns);
}

int cw_sched_enqueue(struct cw_sched *s, struct cw_sched_req *r, int64_t now)
{
	int e;

	if (!s || !r || r->service_ns <= 0 || (r->cls != CW_SCHED_RT && r->cls != CW_SCHED_BE))
		return -EINVAL;
	if (r->priv_state_ != ST_NONE)
		return -EEXIST;
	if (r->cls == CW_SCHED_BE) {
		if (s->o.policy == CW_SCHED_DELTA_L && r->service_ns > be_limit(s))
			return -E2BIG;
		e = s->beq->push(s->beq_state, r, now);
		if (e < 0)
			return e;
		r->priv_state_ = ST_BE;
		return 0;
	}
	if (r->period_ns <= 0 || r->expected_ns > INT64_MAX / 2 || r->arrival_ns > INT64_MAX / 2 ||
	    r->period_ns > INT64_MAX / 4)
		return -EINVAL;
	/* Room for every RT request in the released heap, so that releasing
	 * one later (promote) never needs memory. */
	e = heap_reserve(&s->rel, s->rel.n + s->wait.n + 1);
	if (e < 0)
		return e;
	r->release_ns = CW_MAX(r->arrival_ns, r->expected_ns);
	r->deadline_ns = r->release_ns + r->period_ns;
	if (r->release_ns <= now) {
		e = heap_push(&s->rel, r);
		r->priv_state_ = ST_REL;
	} else {
		e = heap_push(&s->wait, r);
		r->priv_state_ = ST_WAIT;
	}
	return e;
}

int cw_sched_cancel(struct cw_sched *s, struct cw_sched_req *r)
{
	if (!s || !r)
		return -EINVAL;
	switch (r->priv_state_) {
	case ST_REL:
		heap_del(&s->rel, r);
		break;
	case ST_WAIT:
		heap_del(&s->wait, r);
		break;
	case ST_BE:
		if (s->beq->remove(s->beq_state, r) < 0)
			return -ENOENT;
		break;
	default:
		return -ENOENT;
	}
	r->priv_state_ = ST_NONE;
	return 0;
}

/* ---- decisions --------------------------------------------------------- */

static void promote(struct cw_sched *s, int64_t now)
{
	struct cw_sched_req *r;

	while ((r = heap_top(&s->wait)) && r->release_ns <= now) {
		heap_del(&s->wait, r);
		heap_push(&s->rel, r);	/* cannot fail: enqueue reserved room */
		r->priv_state_ = ST_REL;
	}
}

static bool released(const struct cw_sched *s)
{
	return s->rel.n > 0 || s->srv_active;
}

static void dispatch(struct cw_sched *s, struct cw_sched_req *r, enum cw_sched_via via,
		     int64_t now, struct cw_sched_decision *ret)
{
	switch (r->priv_state_) {
	case ST_REL:
		heap_del(&s->rel, r);
		break;
	case ST_WAIT:
		heap_del(&s->wait, r);
		s->st.rt_early++;
		break;
	case ST_BE:
		s->beq->take(s->beq_state, r);
		break;
	}
	r->priv_state_ = ST_SERVICE;
	r->start_ns = now;
	r->via = via;
	s->cur = r;
	s->cur_dlr_before = s->dlr;
	switch (via) {
	case CW_SCHED_VIA_SLACK:
		s->st.be_slack += r->cls == CW_SCHED_BE;
		s->dlr -= r->service_ns;
		break;
	case CW_SCHED_VIA_IDLE:
		s->st.be_idle += r->cls == CW_SCHED_BE;
		s->dlr = CW_MAX(0, s->dlr - r->service_ns);
		break;
	case CW_SCHED_VIA_SERVER:
		s->st.be_server++;
		s->srv_budget -= r->service_ns;
		break;
	case CW_SCHED_VIA_RT:
		break;
	}
	*ret = (struct cw_sched_decision){ .verdict = CW_SCHED_DISPATCH, .req = r };
}

/* Best-effort candidates in order: the BE queue's choice, then the RT
 * request with the earliest release that has not been released yet. */
static struct cw_sched_req *candidate(struct cw_sched *s, int64_t now, int k)
{
	return k == 0 ? s->beq->peek(s->beq_state, now) : heap_top(&s->wait);
}

/* Latest start time of the released queue run back to back in EDF order:
 * min over k of (d_k - sum of C up to k), the server job included. */
static int64_t lst_of_queue(struct cw_sched *s)
{
	size_t n = s->rel.n;
	int64_t sum = 0, lst = INT64_MAX;

	if (n > s->scratch_cap) {
		struct cw_sched_req **v = realloc(s->scratch, n * sizeof(*v));

		if (!v)
			return INT64_MIN;	/* no memory: no best-effort before RT */
		s->scratch = v;
		s->scratch_cap = n;
	}
	memcpy(s->scratch, s->rel.v, n * sizeof(*s->scratch));
	/* a copy of the heap, drained in order by a second heap view */
	struct heap h = { .v = s->scratch, .n = n, .cap = n };
	bool srv = s->srv_active;

	while (h.n || srv) {
		struct cw_sched_req *r = h.n ? h.v[0] : NULL;
		int64_t d, c;

		if (srv && (!r || s->srv_deadline <= r->deadline_ns)) {
			d = s->srv_deadline;
			c = s->srv_budget;
			srv = false;
		} else {
			d = r->deadline_ns;
			c = r->service_ns;
			h.n--;
			if (h.n) {
				h.v[0] = h.v[h.n];
				heap_down(&h, 0);
			}
		}
		sum += c;
		lst = CW_MIN(lst, d - sum);
	}
	/* heap_down wrote scratch positions into priv_: put the real ones back */
	for (size_t i = 0; i < s->rel.n; i++)
		s->rel.v[i]->priv_ = i;
	return lst;
}

static bool server_release(struct cw_sched *s, int64_t now)
{
	if (s->o.server_slice_ns == 0 || s->srv_active || now < s->srv_next ||
	    s->beq->count(s->beq_state) == 0)
		return false;
	s->srv_active = true;
	s->srv_deadline = now + s->o.server_period_ns;
	s->srv_budget = s->o.server_slice_ns;
	s->srv_next = now + s->o.server_period_ns;
	return true;
}

/* EDF among the released RT requests and the server job.  Returns false
 * when the server job ended without dispatching (caller decides again). */
static bool edf_pick(struct cw_sched *s, int64_t now, struct cw_sched_decision *ret)
{
	struct cw_sched_req *r = heap_top(&s->rel);

	if (s->srv_active && (!r || s->srv_deadline <= r->deadline_ns)) {
		struct cw_sched_req *b = s->beq->peek(s->beq_state, now);

		if (b && b->service_ns <= s->srv_budget) {
			dispatch(s, b, CW_SCHED_VIA_SERVER, now, ret);
			return true;
		}
		s->srv_active = false;	/* nothing that fits: the job ends */
		return false;
	}
	dispatch(s, r, CW_SCHED_VIA_RT, now, ret);
	return true;
}

static void wait_or_idle(struct cw_sched *s, struct cw_sched_decision *ret)
{
	int64_t until = INT64_MAX;
	struct cw_sched_req *w = heap_top(&s->wait);

	if (w)
		until = w->release_ns;
	if (s->o.server_slice_ns && !s->srv_active && s->beq->count(s->beq_state))
		until = CW_MIN(until, s->srv_next);
	if (until == INT64_MAX)
		*ret = (struct cw_sched_decision){ .verdict = CW_SCHED_IDLE };
	else
		*ret = (struct cw_sched_decision){ .verdict = CW_SCHED_WAIT, .until_ns = until };
}

int cw_sched_next(struct cw_sched *s, int64_t now, struct cw_sched_decision *ret)
{
	if (!s || !ret)
		return -EINVAL;
	if (now < s->last_now)
		return -EINVAL;
	s->last_now = now;
	if (s->cur) {
		*ret = (struct cw_sched_decision){ .verdict = CW_SCHED_BUSY };
		return 0;
	}
	promote(s, now);
	for (;;) {
		if (!released(s)) {
			/* The refill point: nothing released, nothing in service. */
			s->dlr = s->o.delta_l_ns;
			for (int k = 0; k < 2; k++) {
				struct cw_sched_req *c = candidate(s, now, k);

				if (c && (s->o.policy != CW_SCHED_DELTA_L ||
					  c->service_ns <= s->o.idle_be_ns)) {
					dispatch(s, c, CW_SCHED_VIA_IDLE, now, ret);
					return 0;
				}
			}
			/* Server jobs are released lazily, only when slack
			 * cannot serve the BE queue (a later release is always
			 * allowed for a sporadic task). */
			if (server_release(s, now))
				continue;
			wait_or_idle(s, ret);
			return 0;
		}
		if (s->o.policy != CW_SCHED_EDF) {
			int64_t room = s->dlr;

			if (s->o.policy == CW_SCHED_LST) {
				int64_t lst = lst_of_queue(s);

				room = lst >= now ? lst - now : -1;
			}
			for (int k = 0; k < 2; k++) {
				struct cw_sched_req *c = candidate(s, now, k);

				if (c && c->service_ns <= room) {
					dispatch(s, c, CW_SCHED_VIA_SLACK, now, ret);
					return 0;
				}
			}
		}
		server_release(s, now);
		if (edf_pick(s, now, ret))
			return 0;
	}
}

int cw_sched_complete(struct cw_sched *s, struct cw_sched_req *r, int64_t now, int64_t actual)
{
	if (!s || !r || r != s->cur || actual < 0)
		return -EINVAL;
	s->cur = NULL;
	r->priv_state_ = ST_NONE;
	if (now > s->last_now)
		s->last_now = now;
	switch (r->via) {
	case CW_SCHED_VIA_SLACK:
	case CW_SCHED_VIA_IDLE:
		/* charge what it really took; shorter gives back */
		s->dlr = s->cur_dlr_before - actual;
		if (r->via == CW_SCHED_VIA_IDLE && s->dlr < 0 && actual <= r->service_ns)
			s->dlr = 0;
		s->dlr = CW_MIN(s->dlr, s->o.delta_l_ns);	/* set_slack meanwhile */
		break;
	case CW_SCHED_VIA_SERVER:
	case CW_SCHED_VIA_RT:
		if (actual > r->service_ns)
			s->dlr -= actual - r->service_ns;	/* overrun eats slack */
		break;
	}
	if (r->cls == CW_SCHED_RT) {
		int64_t slack = r->deadline_ns - now;

		s->st.rt_done++;
		s->st.rt_missed += slack < 0;
		s->st.rt_overrun += actual > r->service_ns;
		s->st.min_slack_ns = CW_MIN(s->st.min_slack_ns, slack);
	} else
		s->st.be_done++;
	return 0;
}

void cw_sched_get_stats(const struct cw_sched *s, struct cw_sched_stats *ret)
{
	*ret = s->st;
	ret->delta_l_ns = s->o.delta_l_ns;
	ret->delta_l_r_ns = s->dlr;
	ret->rt_released = s->rel.n;
	ret->rt_waiting = s->wait.n;
	ret->be_queued = s->beq->count(s->beq_state);
	ret->busy = s->cur != NULL;
}
