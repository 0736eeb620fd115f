/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Per-disk dispatch: the ΔL scheduler of Bosch & Mullender, section 3.2
 * ("Whenever the remaining slack time ΔL_r is larger than the expected
 * service time of a best-effort request, the best-effort request is given
 * precedence over real-time requests"), the periodic best-effort server of
 * section 3.3, the EDF and LST schedulers of section 4.2, and dynamic
 * slack (below), which reads the disk's state where ΔL takes the worst
 * case over all of time.
 *
 * Invariant (delta-l): between two refills of ΔL_r the best-effort work
 * started totals at most ΔL (counted in actual service time), except that
 * one request of up to idle_be_ns may start on a disk with no released RT
 * request.  A refill happens only when no released RT request is queued,
 * none is in service and nothing else is in service either.  In numbers
 * (delta-l and edf; lst spends ΔL_r without looking at it): 0 <= ΔL_r <=
 * ΔL while nothing overruns; a request that takes longer than it was
 * charged (an RT or slack request by actual - C, an idle-route one by its
 * whole actual time) lowers the floor by that much until the next refill
 * (the field excess), and what of it ΔL_r could not cover is taken from
 * that refill (the refill starts at ΔL less the debt, the debt then the
 * excess): slack that is not there is never spent twice.
 *
 * Releases (section 3.2) are computed here, not by the driver: a stream's
 * job is released at max(arrival, the stream's previous release + T), the
 * first at its arrival, and is due D <= T later (D = T but for a striped
 * stream's part, whose requests are due a stream period after release);
 * the further pieces of a job on this disk (same_job) share its window.
 * So every stream's jobs are at least T apart and each is due D after its
 * release, whatever the driver sends: the sporadic task the admission
 * test admitted.
 *
 * Why no admitted deadline is missed (admit.c gives the S(x) notation:
 * D(x) = sum_j max(0, floor((x - D_j) / T_j) + 1) C_j, S(x) = x - D(x) -
 * B(x), B(x) the largest C_k - 1 with D_k > x + 1, and ΔL = min S >= 0,
 * idle_be = 1 + min (x - D(x)); admission also holds D(x) <= x).  Suppose an RT job with
 * deadline d ends late; let t1 be the last instant before d at which no
 * released RT job with deadline <= d was unfinished, x = d - t1.  In
 * [t1, d) the disk is never idle and never starts an RT job due after d
 * (EDF), so it does the demand D(x) plus: at most one request already in
 * service at t1, and best-effort work started in [t1, d).  No refill
 * happens in (t1, d) (a released RT job is always waiting), nor at t1 if
 * something is in service then.
 *  - In service at t1 an RT job due after d: it was released before t1,
 *    so D_k > x + 1 and at most C_k - 1 <= B(x) of it remains; the BE work
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
 *
 * Dynamic slack.  Time is an integer; a request started at u occupies the
 * disk over [u, u + its actual time).  The driver enqueues every request
 * that arrived by now before it asks what to do at now (the convention
 * that makes idle_be_ns = 1 + min (x - D(x)) exact above), so a stream
 * with no request at now releases its next job at now + 1 at the
 * earliest.  At a decision instant t (the disk free) let, for a deadline
 * d,
 *   P(d)  the charged C of the RT requests released and not started with
 *         deadline <= d, the server job's remaining budget if it is due
 *         by d, and the pieces of a stream's latest job not seen yet
 *         (its C less the charges seen, due at its deadline);
 *   F(d)  the same for the work that may still be released: the waiting
 *         RT requests at their deadlines, and for each stream k,
 *         C_k max(0, floor((d - D_k - a_k) / T_k) + 1) with a_k =
 *         max(t + 1, r_k + T_k) (r_k its latest release; t + 1 for a
 *         stream with no job yet);
 *         for the server, whose jobs this code releases at decisions,
 *         a = max(t, its last release + its period).
 * (A stream whose admitted T, C and D differ from its latest job's counts
 * with the shorter T, the larger C and the shorter D.)  The rule: a best-effort request
 * (or an RT request before its release) of charged service s may start at
 * t iff for every d at which some of that work is due
 *     s + P(d) + F(d) <= d - t - (g if P(d) > 0, else 0)
 * with g >= 0 the guard.  room(t) is the least d - t - P(d) - F(d) - g.
 *
 * Theorem.  Let every admitted stream be known (a request seen or
 * cw_sched_stream_admit) before its first release, the streams and the
 * server pass Jeffay's test, and let J, due at d, end after d.  Let t1 be
 * the last instant before d at which the disk idled, or started anything
 * but an RT request or server chunk of a job due by d.  Then some request
 * started in [t1, d) took longer than its charge.  So with no overruns no
 * admitted deadline is missed, and an overrun can only cost the jobs in
 * its own busy interval: the rule sees the time it took at the next
 * decision, which delta-l's ΔL_r must book as excess instead.
 *
 * Proof.  By the choice of t1, every instant of (t1, d) is spent on a
 * request started in [t1, d): the one started at t1, if any, and after it
 * only RT requests and server chunks of jobs due by d.  Let x = d - t1 and
 * suppose nothing started in [t1, d) overran.
 *  (a) A best-effort start at t1 (or an early RT request, best effort
 *      here) passed the rule at t1 for d, so s + P(d) + F(d) <= x.  The
 *      disk is busy through [t1, d) on the request of s and on work due by
 *      d that runs after t1; each piece of that work was released and
 *      unstarted at t1 (in P(d)), or is of a job released after t1: a
 *      waiting request (in F(d)), a piece of a latest job not seen at t1
 *      (in P(d)), or a later job of stream k, released no earlier than
 *      a_k (its arrival is after t1 and its release at least r_k + T_k)
 *      and the next ones a period apart, each due D_k after its release,
 *      so at most max(0, floor((d - D_k - a_k) / T_k) + 1) jobs of at
 *      most C_k each are due by d; the server's jobs likewise
 *      (a server job released at t1 itself is counted from a = t1).  J
 *      unfinished at d means this work exceeds x: a contradiction.  The
 *      guard only makes the test stricter.
 *  (b) An RT request or server chunk of a job of task k due after d
 *      started at t1: EDF chose it, so no released job due by d waited at
 *      t1.  J was released after t1 (released by t1 and not started, it
 *      would have waited), so x > D_J >= D_1; the job started at t1 was
 *      released by t1 and is due after d, so D_k > x.  The rest of [t1, d)
 *      runs jobs released in [t1 + 1, d - D_j], at most D(x - 1) of work,
 *      and the job of k takes at most C_k, so J late means x < C_k +
 *      D(x - 1): Jeffay's condition (2) fails at L = x in (D_1, D_k).
 *  (c) The disk idled at t1: it never idles with a released job (nor
 *      with a server job with budget and a request that fits), and a job
 *      released at t1 would have been seen at t1, so every job run in
 *      (t1, d) was released in [t1 + 1, d - D_j]: at most D(x - 1) <= x - 1
 *      of work (ΔL_m >= 0: D(y) <= y; with D = T condition (1) gives it),
 *      while [t1 + 1, d) is busy and J is not done: more than x - 1.  A
 *      contradiction.
 * The idle rule is (a) with nothing released: room(t) is then at least
 * 1 + min (x - D(x)) = idle_be_ns (F(d) <= D(d - t - 1)), so dynamic
 * starts whatever delta-l's idle rule would, and more when streams'
 * next releases are known to lie ahead.  The periodic server is an
 * admitted task (cw_admit_server_fit) in (b) and (c), its active job
 * pending work in (a); a job of it ends when no request fits its budget,
 * so it never waits in the sense of (b) and (c).  Nothing else in the
 * proof depends on the order among best-effort requests or on the burst
 * rule below (which only ever prefers RT work in EDF order).
 *
 * Computing it.  d - t - P(d) - F(d) rises with d and falls only at
 * deadlines, so only they are visited, in order, from one heap of
 * sources (each pending or waiting request, each stream's next future
 * deadline); past the point where (d - t)(1 - U) - P_tot - g - K is at
 * least the least value found, no later d can be lower (F(d) <= U (d - t)
 * + K, K = sum_k C_k (T_k - D_k) / T_k, 0 when every D = T), so the scan
 * stops.  With U = 1 it stops a hyperperiod H past the last
 * pending deadline or fixed next release (beyond which the value gains
 * H (1 - U) >= 0 each H), or when H is too large after DYN_MAX_POINTS
 * deadlines with the bound 1 - P_tot - g, which D(y) <= y gives.  And it is rarely done: between
 * two decisions W(d) = P(d) + F(d) can only fall at each d unless an RT
 * request is enqueued, a job or server job is released (its deadline then
 * takes the guard) or the streams or server change, so the room found at
 * t0 less the time since is a lower bound at t; a candidate that fits in
 * it starts without a scan.
 *
 * Each step above is checked where it happens, with ALWAYS()/NEVER()
 * (common/invariant.h: a debug build, and so every test and simulation,
 * aborts at the first broken one): releases in release() and
 * cw_sched_enqueue(); one request in service, EDF order against the
 * released heap and the server job, slack, idle and server budgets, and
 * the dynamic room a start relied on in check_dispatch(); no refill with work released or in service and no
 * idling with a released job in decide() and wait_or_idle(); the range of
 * ΔL_r and the server's budget after every call in check_state().
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched-internal.h"
#include "common/invariant.h"
#include "common/util.h"

enum { ST_NONE = 0, ST_REL, ST_WAIT, ST_BE, ST_SERVICE };

/* A stream's latest job on this disk (struct cw_sched_stream), the
 * charge of its pieces seen so far, and what admission declared. */
struct stream {
	uint64_t id;
	int64_t period, service, release;
	int64_t dl;			/* D of the latest job: due dl after release */
	int64_t seen;			/* service_ns of the latest job's pieces */
	int64_t adm_period, adm_service, adm_dl;	/* cw_sched_stream_admit; 0: none */
	bool has_job;
};

/* dynamic: one source of deadlines in the scan (see dyn_scan) */
struct dyn_src {
	int64_t d, c, t;		/* next deadline, its C, period (0: once) */
	bool pend;			/* released work */
};

#define SLOT_FREE UINT32_MAX

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
	int64_t excess;			/* overrun charged to ΔL_r since its refill */
	int64_t cur_dlr_before;		/* ΔL_r before cur was charged */
	int64_t last_now;

	/* the periodic BE server's current job */
	bool srv_active;
	int64_t srv_deadline, srv_budget, srv_next;

	/* The streams: a dense array (what a rule over all streams walks)
	 * and an open-addressing index over it (linear probing, at most
	 * half full), grown only when a new stream comes. */
	struct stream *sv;
	uint32_t nsv, cap_sv;
	uint32_t *slot;			/* index into sv, or SLOT_FREE */
	uint32_t slot_mask;		/* slot has slot_mask + 1 entries (0: none yet) */

	struct cw_sched_req **scratch;	/* LST */
	size_t scratch_cap;

	/* dynamic: the room found by the last full scan, at dyn_t0; a lower
	 * bound of the room at any later now is dyn_room0 - (now - dyn_t0)
	 * until something that can add work or move a deadline earlier
	 * (dyn_ok = false) */
	bool dyn_ok, dyn_guarded;	/* guarded: the guard taken off dyn_room0 */
	int64_t dyn_t0, dyn_room0;
	int64_t dyn_decided;		/* the room the current decision used */
	bool dyn_burst;			/* refused with RT released: RT until none
					 * is or the room holds a batch (dyn_resume) */
	uint64_t head_bytes;		/* where the latest request dispatched ended */
	bool u_ok;
	double u_hi;			/* sum of C/T, rounded up */
	double k_hi;			/* sum of C (T - D) / T, rounded up */
	int64_t hyper;			/* their periods' common multiple (0: too large) */
	struct dyn_src *src;
	size_t src_cap;
	struct cw_sched_stats st;
};

/* An RT request's D: due this long after its release. */
static int64_t req_dl(const struct cw_sched_req *r)
{
	return r->rel_deadline_ns ? r->rel_deadline_ns : r->period_ns;
}

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

/* ---- streams ----------------------------------------------------------- */

static uint32_t stream_hash(uint64_t id)
{
	/* the finalizer of splitmix64: ids are often small and dense */
	id ^= id >> 30;
	id *= UINT64_C(0xbf58476d1ce4e5b9);
	id ^= id >> 27;
	id *= UINT64_C(0x94d049bb133111eb);
	id ^= id >> 31;
	return (uint32_t)id;
}

/* The slot that holds id, or the free slot where it would go. */
static uint32_t stream_slot(const struct cw_sched *s, uint64_t id)
{
	uint32_t i = stream_hash(id) & s->slot_mask;

	while (s->slot[i] != SLOT_FREE && s->sv[s->slot[i]].id != id)
		i = (i + 1) & s->slot_mask;
	return i;
}

static struct stream *stream_find(const struct cw_sched *s, uint64_t id)
{
	uint32_t i;

	if (!s->nsv)
		return NULL;
	i = stream_slot(s, id);
	return s->slot[i] == SLOT_FREE ? NULL : &s->sv[s->slot[i]];
}

/* Room for one more stream: the dense array and an index at most half
 * full after it. */
static int stream_reserve(struct cw_sched *s)
{
	uint32_t want = s->nsv + 1;

	if (want > CW_SCHED_STREAMS_MAX)
		return -ENOSPC;
	if (want > s->cap_sv) {
		uint32_t cap = CW_MIN(CW_MAX(2 * s->cap_sv, 8u), (uint32_t)CW_SCHED_STREAMS_MAX);
		struct stream *v = realloc(s->sv, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->sv = v;
		s->cap_sv = cap;
	}
	if (2 * want > s->slot_mask + 1 || !s->slot) {
		uint32_t n = s->slot ? 2 * (s->slot_mask + 1) : 16;
		uint32_t *v = malloc(n * sizeof(*v));

		if (!v)
			return -ENOMEM;
		free(s->slot);
		s->slot = v;
		s->slot_mask = n - 1;
		for (uint32_t i = 0; i < n; i++)
			v[i] = SLOT_FREE;
		for (uint32_t k = 0; k < s->nsv; k++)
			v[stream_slot(s, s->sv[k].id)] = k;
	}
	return 0;
}

/* A new stream, after stream_reserve: cannot fail. */
static struct stream *stream_add(struct cw_sched *s, uint64_t id)
{
	uint32_t i = stream_slot(s, id);

	s->slot[i] = s->nsv;
	s->sv[s->nsv] = (struct stream){ .id = id };
	s->dyn_ok = s->u_ok = false;
	return &s->sv[s->nsv++];
}

int cw_sched_stream_forget(struct cw_sched *s, uint64_t id)
{
	uint32_t hole, i, k, last;

	if (!s)
		return -EINVAL;
	if (!stream_find(s, id))
		return -ENOENT;
	hole = stream_slot(s, id);
	k = s->slot[hole];
	/* Deletion without tombstones: move later entries of the probe run
	 * back into the hole unless their home lies cyclically in
	 * (hole, i]. */
	for (i = hole;;) {
		uint32_t home;

		s->slot[hole] = SLOT_FREE;
		for (;;) {
			i = (i + 1) & s->slot_mask;
			if (s->slot[i] == SLOT_FREE)
				goto moved;
			home = stream_hash(s->sv[s->slot[i]].id) & s->slot_mask;
			if (hole <= i ? (home <= hole || home > i) : (home <= hole && home > i))
				break;
		}
		s->slot[hole] = s->slot[i];
		hole = i;
	}
moved:
	s->dyn_ok = s->u_ok = false;
	/* keep sv dense: the last stream takes the forgotten one's place */
	last = --s->nsv;
	if (k != last) {
		s->sv[k] = s->sv[last];
		s->slot[stream_slot(s, s->sv[k].id)] = k;
	}
	return 0;
}

static void stream_out(const struct stream *st, struct cw_sched_stream *ret)
{
	*ret = (struct cw_sched_stream){ .id = st->id, .period_ns = st->period,
					 .service_ns = st->service, .deadline_ns = st->dl,
					 .release_ns = st->has_job ? st->release : INT64_MIN };
}

int cw_sched_stream_get(const struct cw_sched *s, uint64_t id, struct cw_sched_stream *ret)
{
	const struct stream *st;

	if (!s || !ret)
		return -EINVAL;
	st = stream_find(s, id);
	if (!st)
		return -ENOENT;
	stream_out(st, ret);
	return 0;
}

int cw_sched_stream_admit(struct cw_sched *s, uint64_t id, int64_t period, int64_t service,
			  int64_t deadline)
{
	struct stream *st;
	int e;

	if (deadline == 0)
		deadline = period;
	if (!s || period <= 0 || service <= 0 || deadline < service || deadline > period ||
	    period > INT64_MAX / 4)
		return -EINVAL;
	st = stream_find(s, id);
	if (!st) {
		e = stream_reserve(s);
		if (e < 0)
			return e;
		st = stream_add(s, id);
		st->period = period;
		st->service = service;
		st->dl = deadline;
	}
	st->adm_period = period;
	st->adm_service = service;
	st->adm_dl = deadline;
	s->dyn_ok = s->u_ok = false;
	return 0;
}

size_t cw_sched_stream_count(const struct cw_sched *s)
{
	return s ? s->nsv : 0;
}

int cw_sched_stream_at(const struct cw_sched *s, size_t pos, struct cw_sched_stream *ret)
{
	if (!s || !ret)
		return -EINVAL;
	if (pos >= s->nsv)
		return -ENOENT;
	stream_out(&s->sv[pos], ret);
	return 0;
}

/* ---- set-up ------------------------------------------------------------ */

static const char *const policy_names[] = {
	[CW_SCHED_DELTA_L] = "delta-l",
	[CW_SCHED_EDF] = "edf",
	[CW_SCHED_LST] = "lst",
	[CW_SCHED_DYNAMIC] = "dynamic",
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
	else if (!strcmp(name, "dynamic") || !strcmp(name, "dyn"))
		*ret = CW_SCHED_DYNAMIC;
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
	    !cw_sched_policy_name(opts->policy) || opts->guard_ns < 0 ||
	    !slack_ok(opts->delta_l_ns, opts->idle_be_ns) ||
	    !server_ok(opts->server_slice_ns, opts->server_period_ns))
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->o = *opts;
	s->wait.by_release = true;
	s->beq = opts->beq ? opts->beq : cw_sched_beq_fifo();
	e = s->beq->init(opts->beq_conf, &s->beq_state);
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
	free(s->src);
	free(s->sv);
	free(s->slot);
	free(s);
}

/* The state the proof keeps between calls.  ΔL_r never exceeds ΔL, and
 * (delta-l, edf) is at least -excess: every charge beyond an overrun is
 * covered by the slack at hand.  The server job keeps its budget within
 * its slice. */
static void check_state(struct cw_sched *s)
{
	if (NEVER(s->dlr > s->o.delta_l_ns))
		s->dlr = s->o.delta_l_ns;
	(void)NEVER(s->o.policy != CW_SCHED_LST && s->o.policy != CW_SCHED_DYNAMIC &&
		    s->dlr < -s->excess);
	(void)NEVER(s->dyn_ok && s->dyn_t0 > s->last_now);
	(void)NEVER(s->excess < 0);
	if (s->srv_active && NEVER(s->srv_budget < 0 || s->srv_budget > s->o.server_slice_ns))
		s->srv_budget = CW_MAX(0, CW_MIN(s->srv_budget, s->o.server_slice_ns));
	(void)NEVER(s->cur && s->cur->priv_state_ != ST_SERVICE);
}

int cw_sched_set_slack(struct cw_sched *s, int64_t delta_l_ns, int64_t idle_be_ns)
{
	if (!s || !slack_ok(delta_l_ns, idle_be_ns))
		return -EINVAL;
	s->o.delta_l_ns = delta_l_ns;
	s->o.idle_be_ns = idle_be_ns;
	s->dlr = CW_MIN(s->dlr, delta_l_ns);
	check_state(s);
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
	s->dyn_ok = s->u_ok = false;
	check_state(s);
	return 0;
}

int cw_sched_set_guard(struct cw_sched *s, int64_t guard_ns)
{
	if (!s || guard_ns < 0)
		return -EINVAL;
	s->o.guard_ns = guard_ns;
	s->dyn_ok = false;
	return 0;
}

/* ---- queueing ---------------------------------------------------------- */

/* The largest BE request delta-l could ever start with this set-up. */
static int64_t be_limit(const struct cw_sched *s)
{
	return CW_MAX(CW_MAX(s->o.delta_l_ns, s->o.idle_be_ns), s->o.server_slice_ns);
}

/* dynamic: released work appeared, so the guard may now apply at
 * deadlines where it did not; the cached room loses it once. */
static void dyn_released(struct cw_sched *s)
{
	if (s->dyn_ok && !s->dyn_guarded) {
		s->dyn_room0 -= s->o.guard_ns;
		s->dyn_guarded = true;
	}
}

/* dynamic: an RT request came.  A new job of a known stream was already
 * counted by the last scan, as a job released no earlier than a_k and
 * due no earlier, of no more work, so the cached room stays a lower bound
 * (less the guard if it is released now); anything else (a new stream, a
 * changed T or C, pieces beyond the job's C, a release before the scan's
 * a_k) needs a new scan. */
static void dyn_enqueued(struct cw_sched *s, const struct stream *old,
			 const struct cw_sched_req *r, int64_t now)
{
	const struct stream *st = stream_find(s, r->stream);

	if (!s->dyn_ok)
		return;
	if (!old || !st || old->period != st->period || old->service != st->service ||
	    old->dl != st->dl || st->seen > st->service || r->release_ns <= s->dyn_t0)
		s->dyn_ok = false;
	else if (r->release_ns <= now)
		dyn_released(s);
}

/* The paper's release (section 3.2): when the stream expected its next
 * request (its latest release + T) or when the request came, whichever is
 * later; the first of a stream when it came.  st is NULL for a new stream
 * (room for it is reserved). */
static void release(struct cw_sched *s, struct stream *st, struct cw_sched_req *r)
{
	int64_t dl = req_dl(r);

	if (st && st->has_job && r->same_job && st->period == r->period_ns && st->dl == dl &&
	    r->arrival_ns <= st->release) {
		/* a further piece of the latest job: its window, nothing new */
		r->release_ns = st->release;
		r->deadline_ns = st->release + st->dl;
		st->seen = CW_MIN(st->seen + r->service_ns, INT64_MAX / 4);
		return;
	}
	if (!st)
		st = stream_add(s, r->stream);
	if (!st->has_job) {
		r->release_ns = r->arrival_ns;
	} else {
		/* a period change keeps the latest job's window (its T) */
		r->release_ns = CW_MAX(r->arrival_ns, st->release + st->period);
		if (NEVER(r->release_ns - st->release < st->period))
			r->release_ns = st->release + st->period;
	}
	r->deadline_ns = r->release_ns + dl;
	if (st->period != r->period_ns || st->service != r->service_ns || st->dl != dl)
		s->u_ok = false;
	st->period = r->period_ns;
	st->service = r->service_ns;
	st->dl = dl;
	st->release = r->release_ns;
	st->seen = r->service_ns;
	st->has_job = true;
}

int cw_sched_enqueue(struct cw_sched *s, struct cw_sched_req *r, int64_t now)
{
	struct stream *st, old = { 0 };
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
	if (r->period_ns <= 0 || r->arrival_ns > INT64_MAX / 2 || r->period_ns > INT64_MAX / 4 ||
	    r->rel_deadline_ns < 0 || r->rel_deadline_ns > r->period_ns)
		return -EINVAL;
	/* Room first, for the stream and for every RT request in either heap
	 * (so that releasing one later, promote, never needs memory): once
	 * the stream's state moves on below, nothing may fail. */
	st = stream_find(s, r->stream);
	e = st ? 0 : stream_reserve(s);
	if (e == 0)
		e = heap_reserve(&s->rel, s->rel.n + s->wait.n + 1);
	if (e == 0)
		e = heap_reserve(&s->wait, s->wait.n + 1);
	if (e < 0)
		return e;
	if (st && st->has_job && st->release > INT64_MAX / 2 - st->period)
		return -ERANGE;	/* enqueued ever further ahead of its releases */
	if (st)
		old = *st;
	release(s, st, r);
	dyn_enqueued(s, st ? &old : NULL, r, now);
	(void)ALWAYS(r->release_ns >= r->arrival_ns && r->deadline_ns - r->release_ns == req_dl(r));
	e = heap_push(r->release_ns <= now ? &s->rel : &s->wait, r);
	if (NEVER(e < 0))
		return e;
	r->priv_state_ = r->release_ns <= now ? ST_REL : ST_WAIT;
	return 0;
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
		if (NEVER(heap_push(&s->rel, r) < 0)) {	/* enqueue reserved room */
			heap_push(&s->wait, r);	/* cannot fail: it was there */
			return;
		}
		r->priv_state_ = ST_REL;
		dyn_released(s);
	}
}

static bool released(const struct cw_sched *s)
{
	return s->rel.n > 0 || s->srv_active;
}

/* What the proof needs of the request about to start (see the top of
 * this file): one in service at a time; a released RT request in EDF
 * order, before the server job only when due earlier; BE work (an early RT
 * request included) within ΔL_r, within idle_be_ns on a disk with no
 * released RT request, or within the server job's budget. */
static void check_dispatch(const struct cw_sched *s, const struct cw_sched_req *r,
			   enum cw_sched_via via, int64_t now)
{
	const struct heap *h = &s->rel;
	bool dl = s->o.policy == CW_SCHED_DELTA_L, dyn = s->o.policy == CW_SCHED_DYNAMIC;

	(void)NEVER(s->cur);
	switch (via) {
	case CW_SCHED_VIA_RT:
		(void)ALWAYS(r->priv_state_ == ST_REL && r == heap_top(h));
		(void)ALWAYS(r->release_ns <= now && r->deadline_ns - r->release_ns == req_dl(r));
		(void)NEVER((h->n > 1 && h->v[1]->deadline_ns < r->deadline_ns) ||
			    (h->n > 2 && h->v[2]->deadline_ns < r->deadline_ns));
		(void)NEVER(s->srv_active && s->srv_deadline <= r->deadline_ns);
		break;
	case CW_SCHED_VIA_SERVER:
		(void)ALWAYS(s->srv_active && r->service_ns <= s->srv_budget);
		(void)NEVER(h->n && h->v[0]->deadline_ns < s->srv_deadline);
		break;
	case CW_SCHED_VIA_SLACK:
		(void)NEVER(dl && r->service_ns > s->dlr);
		(void)ALWAYS(s->o.policy != CW_SCHED_EDF);
		(void)NEVER(dyn && r->service_ns > s->dyn_decided);
		break;
	case CW_SCHED_VIA_IDLE:
		(void)NEVER(h->n || s->srv_active);
		(void)NEVER(dl && r->service_ns > s->o.idle_be_ns);
		(void)NEVER(dyn && r->service_ns > s->dyn_decided);
		break;
	}
	(void)NEVER(r->priv_state_ == ST_WAIT && (via == CW_SCHED_VIA_RT || via == CW_SCHED_VIA_SERVER));
}

static void dispatch(struct cw_sched *s, struct cw_sched_req *r, enum cw_sched_via via,
		     int64_t now, struct cw_sched_decision *ret)
{
	check_dispatch(s, r, via, now);
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
	s->head_bytes = r->offset_bytes + r->length_bytes;
	r->start_ns = now;
	r->via = via;
	s->cur = r;
	s->cur_dlr_before = s->dlr;
	/* dynamic keeps no ΔL_r: it reads the room again at each decision */
	switch (via) {
	case CW_SCHED_VIA_SLACK:
		s->st.be_slack += r->cls == CW_SCHED_BE;
		if (s->o.policy != CW_SCHED_DYNAMIC)
			s->dlr -= r->service_ns;
		break;
	case CW_SCHED_VIA_IDLE:
		s->st.be_idle += r->cls == CW_SCHED_BE;
		if (s->o.policy != CW_SCHED_DYNAMIC)
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

/* ---- dynamic slack ------------------------------------------------------ */

/* After a refusal, best effort goes again when the room holds this many
 * requests of the candidate's size.  In cwsim's full paper sweep 1 (LST's
 * interleaving) loses to ΔL at high loads on rotation placement (4x at 45
 * streams), waiting for every released RT request loses to LST on random
 * placement; 8 still loses to ΔL at the top two rotation loads, 32 to LST
 * by 10% at 35 and 36 random streams; 16 beats ΔL everywhere and is
 * within 4% of LST. */
#define DYN_RESUME 16

/* ... unless the released RT request due first lies at least 1 <<
 * DYN_NEAR_SHIFT times nearer the arm than the candidate: then the burst
 * goes on until the room holds DYN_DRAIN requests, so the arm serves the
 * streams' area while it is there instead of coming back for it.  A
 * saturating best-effort client beside streams in their own area (cwsim's
 * tools/scenarios/closed-loop.scn, the guarantee benchmark's load) gets
 * through less than under ΔL without it: 0.4-1.2% more mean latency at
 * 4-40 streams with 16 alone; within 0.1% of ΔL's at every count and
 * seed tried with 32 (its p99 at most 5% above ΔL's, at the most streams
 * admission takes); 64 breaks LST's 5% on the rotation sweep.  Nearer by
 * less than 4 times, the burst goes on too often where placement is
 * random and streams and best effort share the whole disk. */
#define DYN_DRAIN 32
#define DYN_NEAR_SHIFT 2

/* The scan gives up after this many deadlines (U = 1, or so close to it
 * that the cut-off is far) with a bound that still holds. */
#define DYN_MAX_POINTS 4096

/* With U = 1 the scan ends a hyperperiod past the last fixed point when
 * the hyperperiod is at most this. */
#define DYN_MAX_HYPER (INT64_C(1) << 40)


/* A deadline source's heap (min-heap on d), in s->src. */
static void src_down(struct dyn_src *h, size_t n, size_t i)
{
	struct dyn_src x = h[i];

	for (;;) {
		size_t l = 2 * i + 1, m = l;

		if (l >= n)
			break;
		if (l + 1 < n && h[l + 1].d < h[l].d)
			m = l + 1;
		if (h[m].d >= x.d)
			break;
		h[i] = h[m];
		i = m;
	}
	h[i] = x;
}

/* A stream's future jobs are counted with the shorter period and the
 * larger C of its latest job and of what admission declared. */
static int64_t fut_period(const struct stream *st)
{
	return st->adm_period ? CW_MIN(st->period, st->adm_period) : st->period;
}

static int64_t fut_service(const struct stream *st)
{
	return CW_MAX(st->service, st->adm_service);
}

/* ... and the shorter deadline */
static int64_t fut_dl(const struct stream *st)
{
	return st->adm_dl ? CW_MIN(st->dl, st->adm_dl) : st->dl;
}

/* sum C/T over the streams and the server, rounded up so that the
 * cut-off below stays a lower bound */
static int64_t lcm_capped(int64_t h, int64_t t)
{
	int64_t a = h, b = t;

	if (!h)
		return 0;
	while (b) {
		int64_t r = a % b;
		a = b;
		b = r;
	}
	h /= a;
	return h > DYN_MAX_HYPER / t ? 0 : h * t;
}

static double dyn_util(struct cw_sched *s)
{
	if (!s->u_ok) {
		double u = 0, debt = 0;
		int64_t h = 1;

		for (uint32_t k = 0; k < s->nsv; k++) {
			const struct stream *st = &s->sv[k];
			double c = (double)fut_service(st), t = (double)fut_period(st);

			u += c / t;
			debt += c * (t - (double)fut_dl(st)) / t;
			h = lcm_capped(h, fut_period(st));
		}
		if (s->o.server_slice_ns) {
			u += (double)s->o.server_slice_ns / (double)s->o.server_period_ns;
			h = lcm_capped(h, s->o.server_period_ns);
		}
		s->u_hi = u * (1 + 1e-12) + 1e-12;
		s->k_hi = debt > 0 ? debt * (1 + 1e-12) + 1 : 0;
		s->hyper = h;
		s->u_ok = true;
	}
	return s->u_hi;
}

static int src_reserve(struct cw_sched *s, size_t want)
{
	if (want > s->src_cap) {
		size_t cap = CW_MAX(want, 2 * s->src_cap);
		struct dyn_src *v = realloc(s->src, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->src = v;
		s->src_cap = cap;
	}
	return 0;
}

/* The room at now: min over deadlines d of d - now - W(d) - the guard
 * when released work is due by d, W(d) the work due by d that may still
 * run: released RT requests not started (pending), the server job's
 * budget, the latest jobs' pieces not seen yet, waiting RT requests at
 * their deadlines, and each stream's (and the server's) future jobs from
 * its earliest next release on, one a period, each due its D after its
 * release.  Deadlines are visited in order from a heap of sources; the
 * scan stops where no later deadline can go lower, (d - now)(1 - U) -
 * P_tot - guard - K >= best, since the future jobs due by d take at most
 * U (d - now) + K, K = sum C (T - D) / T. */
static int dyn_scan(struct cw_sched *s, int64_t now, int64_t *ret)
{
	size_t n = 0, want = s->rel.n + s->wait.n + 2 * (size_t)s->nsv + 2;
	int64_t ptot = 0, w = 0, best = INT64_MAX, g = s->o.guard_ns, far = now;
	double u = dyn_util(s), debt = s->k_hi;
	struct dyn_src *h;
	bool pend = false;
	unsigned points = 0;

	if (src_reserve(s, want) < 0)
		return -ENOMEM;
	h = s->src;
	for (size_t i = 0; i < s->rel.n; i++) {
		const struct cw_sched_req *r = s->rel.v[i];

		h[n++] = (struct dyn_src){ .d = r->deadline_ns, .c = r->service_ns, .pend = true };
		ptot += r->service_ns;
	}
	for (size_t i = 0; i < s->wait.n; i++) {
		const struct cw_sched_req *r = s->wait.v[i];

		h[n++] = (struct dyn_src){ .d = r->deadline_ns, .c = r->service_ns };
		ptot += r->service_ns;
	}
	for (uint32_t k = 0; k < s->nsv; k++) {
		const struct stream *st = &s->sv[k];
		int64_t a = now + 1, t = fut_period(st);

		if (st->has_job) {
			a = CW_MAX(a, st->release + st->period);
			if (st->seen < st->service) {
				/* pieces of the latest job not seen yet */
				h[n++] = (struct dyn_src){ .d = st->release + st->dl,
							   .c = st->service - st->seen,
							   .pend = st->release <= now };
				ptot += st->service - st->seen;
			}
		}
		h[n++] = (struct dyn_src){ .d = a + fut_dl(st), .c = fut_service(st), .t = t };
	}
	if (s->o.server_slice_ns) {
		/* the server's job is released by this code, at a decision:
		 * possibly at now itself */
		if (s->srv_active) {
			h[n++] = (struct dyn_src){ .d = s->srv_deadline, .c = s->srv_budget, .pend = true };
			ptot += s->srv_budget;
		}
		h[n++] = (struct dyn_src){ .d = CW_MAX(now, s->srv_next) + s->o.server_period_ns,
					   .c = s->o.server_slice_ns, .t = s->o.server_period_ns };
	}
	for (size_t i = 0; i < n; i++)
		far = CW_MAX(far, h[i].d - h[i].t);
	for (size_t i = n / 2; i-- > 0;)
		src_down(h, n, i);
	while (n) {
		int64_t d = h[0].d, v;

		w += h[0].c;
		pend |= h[0].pend;
		if (h[0].t) {
			h[0].d += h[0].t;
			src_down(h, n, 0);
		} else {
			h[0] = h[--n];
			if (n)
				src_down(h, n, 0);
		}
		if (n && h[0].d == d)
			continue;	/* all the work due at d first */
		v = d - now - w - (pend ? g : 0);
		best = CW_MIN(best, v);
		if (u < 1 && (double)(d - now) * (1 - u) - (double)ptot - (double)g - debt >=
		    (double)best + 1)
			break;
		/* past far nothing is pending or fixed: d - now - W(d) gains
		 * H (1 - U) >= 0 a hyperperiod H later */
		if (s->hyper && d - far >= s->hyper)
			break;
		if (++points >= DYN_MAX_POINTS) {
			/* every later d: d - now - D(d - now - 1) >= 1 for an
			 * admitted set (D(x) <= x), so W(d) <= P_tot + d - now - 1 */
			best = CW_MIN(best, 1 - ptot - g);
			break;
		}
	}
	s->st.dyn_scans++;
	*ret = best == INT64_MAX ? INT64_MAX / 4 : best;
	return 0;
}

/* The room for a candidate of service c at now: the last scan's, less
 * the time since, when that already holds c; otherwise a new scan. */
static int64_t dyn_room(struct cw_sched *s, int64_t now, int64_t c)
{
	int64_t room;

	if (s->dyn_ok) {
		room = s->dyn_room0 - (now - s->dyn_t0);
		if (room >= c || now == s->dyn_t0)
			return room;
	}
	if (dyn_scan(s, now, &room) < 0)
		return -1;	/* no memory: no best-effort before RT */
	s->dyn_ok = true;
	s->dyn_guarded = false;
	s->dyn_t0 = now;
	s->dyn_room0 = room;
	return room;
}

/* Whether the dynamic rule lets c start now (and what it decided on). */
static bool dyn_fits(struct cw_sched *s, int64_t now, const struct cw_sched_req *c)
{
	s->dyn_decided = dyn_room(s, now, c->service_ns);
	return c->service_ns <= s->dyn_decided;
}

static uint64_t distance(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

/* Whether a burst ends for the candidate c (see DYN_RESUME). */
static bool dyn_resume(struct cw_sched *s, int64_t now, const struct cw_sched_req *c)
{
	const struct cw_sched_req *rt = heap_top(&s->rel);
	bool near = rt && distance(rt->offset_bytes, s->head_bytes) <
			  distance(c->offset_bytes, s->head_bytes) >> DYN_NEAR_SHIFT;
	int64_t n = near ? DYN_DRAIN : DYN_RESUME;
	int64_t batch = CW_MIN(c->service_ns, INT64_MAX / 4 / n) * n;

	return dyn_room(s, now, batch) >= batch;
}

int cw_sched_room_ns(struct cw_sched *s, int64_t now, int64_t *ret)
{
	if (!s || !ret || now < s->last_now)
		return -EINVAL;
	s->last_now = now;
	promote(s, now);
	return dyn_scan(s, now, ret);
}

static bool server_release(struct cw_sched *s, int64_t now)
{
	if (s->o.server_slice_ns == 0 || s->srv_active || now < s->srv_next ||
	    s->beq->count(s->beq_state) == 0)
		return false;
	/* a sporadic task: jobs a period apart (srv_next), each due a period
	 * after its release, each with at most the slice */
	s->srv_active = true;
	dyn_released(s);
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

static void wait_or_idle(struct cw_sched *s, int64_t now, struct cw_sched_decision *ret)
{
	int64_t until = INT64_MAX;
	struct cw_sched_req *w = heap_top(&s->wait);

	/* never idle while a released job waits (the proof's busy interval) */
	(void)NEVER(released(s));

	if (w)
		until = w->release_ns;
	/* a BE order that holds its requests back (a limit) says until when */
	if (s->beq->ready_ns && s->beq->count(s->beq_state))
		until = CW_MIN(until, CW_MAX(now + 1, s->beq->ready_ns(s->beq_state, now)));
	if (s->o.server_slice_ns && !s->srv_active && s->beq->count(s->beq_state))
		until = CW_MIN(until, s->srv_next);
	if (until == INT64_MAX)
		*ret = (struct cw_sched_decision){ .verdict = CW_SCHED_IDLE };
	else
		*ret = (struct cw_sched_decision){ .verdict = CW_SCHED_WAIT, .until_ns = until };
}

static void decide(struct cw_sched *s, int64_t now, struct cw_sched_decision *ret)
{
	promote(s, now);
	for (;;) {
		if (!released(s)) {
			/* The refill point: nothing released, nothing in service.
			 * An overrun ΔL_r could not cover is still owed: it
			 * comes out of this refill (charge what is spent). */
			int64_t debt = s->o.policy == CW_SCHED_DELTA_L || s->o.policy == CW_SCHED_EDF ?
				       CW_MAX(0, -s->dlr) : 0;

			(void)NEVER(s->cur);
			s->dlr = s->o.delta_l_ns - debt;
			s->excess = debt;
			s->dyn_burst = false;
			for (int k = 0; k < 2; k++) {
				struct cw_sched_req *c = candidate(s, now, k);

				if (c && (s->o.policy != CW_SCHED_DELTA_L ||
					  c->service_ns <= s->o.idle_be_ns) &&
				    (s->o.policy != CW_SCHED_DYNAMIC || dyn_fits(s, now, c))) {
					dispatch(s, c, CW_SCHED_VIA_IDLE, now, ret);
					return;
				}
			}
			/* Server jobs are released lazily, only when slack
			 * cannot serve the BE queue (a later release is always
			 * allowed for a sporadic task). */
			if (server_release(s, now))
				continue;
			wait_or_idle(s, now, ret);
			return;
		}
		if (s->dyn_burst) {
			struct cw_sched_req *c = candidate(s, now, 0);

			if (c && dyn_resume(s, now, c))
				s->dyn_burst = false;
		}
		if (s->o.policy != CW_SCHED_EDF && !s->dyn_burst) {
			int64_t room = s->dlr;

			if (s->o.policy == CW_SCHED_LST) {
				int64_t lst = lst_of_queue(s);

				room = lst >= now ? lst - now : -1;
			}
			for (int k = 0; k < 2; k++) {
				struct cw_sched_req *c = candidate(s, now, k);

				if (c && s->o.policy == CW_SCHED_DYNAMIC ? dyn_fits(s, now, c) :
				    c && c->service_ns <= room) {
					dispatch(s, c, CW_SCHED_VIA_SLACK, now, ret);
					return;
				}
			}
			/* Like ΔL's burst: once the room is too small, the
			 * released RT requests run back to back until it holds
			 * DYN_RESUME such requests again (or none is
			 * released), so the arm stays in their area and best
			 * effort then runs as a batch: one BE request between
			 * two RT requests costs a seek each way, LST's loss at
			 * high loads. */
			if (s->o.policy == CW_SCHED_DYNAMIC && candidate(s, now, 0))
				s->dyn_burst = true;
		}
		server_release(s, now);
		if (edf_pick(s, now, ret))
			return;
	}
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
	decide(s, now, ret);
	check_state(s);
	return 0;
}

int cw_sched_complete(struct cw_sched *s, struct cw_sched_req *r, int64_t now, int64_t actual)
{
	if (!s || !r || r != s->cur || actual < 0)
		return -EINVAL;
	s->cur = NULL;
	r->priv_state_ = ST_NONE;
	if (now > s->last_now)
		s->last_now = now;
	switch (s->o.policy == CW_SCHED_DYNAMIC ? CW_SCHED_VIA_RT : r->via) {
	case CW_SCHED_VIA_SLACK:
	case CW_SCHED_VIA_IDLE:
		/* charge what it really took; shorter gives back */
		s->dlr = s->cur_dlr_before - actual;
		if (r->via == CW_SCHED_VIA_IDLE && s->dlr < 0 && actual <= r->service_ns)
			s->dlr = 0;
		s->dlr = CW_MIN(s->dlr, s->o.delta_l_ns);	/* set_slack meanwhile */
		if (actual > r->service_ns)
			s->excess += r->via == CW_SCHED_VIA_IDLE ? actual : actual - r->service_ns;
		break;
	case CW_SCHED_VIA_SERVER:
	case CW_SCHED_VIA_RT:
		if (actual > r->service_ns) {
			s->dlr -= actual - r->service_ns;	/* overrun eats slack */
			s->excess += actual - r->service_ns;
		}
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
	check_state(s);
	return 0;
}

void cw_sched_get_stats(const struct cw_sched *s, struct cw_sched_stats *ret)
{
	*ret = s->st;
	ret->delta_l_ns = s->o.delta_l_ns;
	ret->delta_l_r_ns = s->dlr;
	if (s->o.policy == CW_SCHED_DYNAMIC)
		ret->delta_l_r_ns = s->dyn_ok ? s->dyn_room0 - (s->last_now - s->dyn_t0) : 0;
	ret->rt_released = s->rel.n;
	ret->rt_waiting = s->wait.n;
	ret->be_queued = s->beq->count(s->beq_state);
	ret->busy = s->cur != NULL;
}

int cw_sched_set_client(struct cw_sched *s, uint64_t client, const struct cw_sched_client *qos)
{
	if (!s || !qos)
		return -EINVAL;
	if (!s->beq->set_client)
		return -EOPNOTSUPP;
	return s->beq->set_client(s->beq_state, client, qos);
}

int cw_sched_get_client_stats(const struct cw_sched *s, uint64_t client,
			      struct cw_sched_client_stats *ret)
{
	if (!s || !ret)
		return -EINVAL;
	if (!s->beq->client_stats)
		return -EOPNOTSUPP;
	return s->beq->client_stats(s->beq_state, client, ret);
}
