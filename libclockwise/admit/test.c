/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Jeffay's non-preemptive EDF test and the slack ΔL.
 *
 * Bosch & Mullender, "Real-Time Disk Scheduling in a Mixed-Media File
 * System", section 1 (conditions (1) and (2), after Jeffay, Stanat &
 * Martel 1991) and section 3.2 (Definition 1, Theorem 1).
 *
 * Invariant kept: a set is reported schedulable only if every job of every
 * sporadic release pattern meets its deadline under non-preemptive EDF, and
 * delta_l_ns never exceeds the least distance between a job's end and its
 * deadline over all those patterns (it equals it when exact is true and
 * every D = T).
 *
 * The mathematics.  A task j is released at most once per T_j and each
 * job is due D_j <= T_j after its release (D_j = T_j unless the task says
 * otherwise).  Let D(x) = sum_j max(0, floor((x - D_j) / T_j) + 1) C_j,
 * the work of jobs released at or after some instant with deadlines
 * within x of it (= sum_j floor(x / T_j) C_j when D = T).  Take any job
 * that ends late by our measure and the last instant t1 before its
 * deadline d at which no job with deadline <= d was waiting or in
 * service; x = d - t1.  In [t1, d) the disk does that demand, at most
 * D(x), plus at most one request started before t1: a job due after d and
 * released before t1, so of a task k with D_k > x + 1, of which at most
 * C_k - 1 remains.  So every job ends at least
 *   S(x) = x - D(x) - max(0, max over D_k > x + 1 of (C_k - 1))
 * before its deadline.  With D = T the pattern "task k starts at -1, all
 * others are released together at 0 and then as fast as allowed" makes
 * the last job due by x end exactly S(x) early, so the slack below is
 * exact; with shorter deadlines that pattern may leave the disk idle
 * between releases, and the slack is a sound bound, not always reached:
 *   ΔL = min over x >= D_1 of S(x) = min(ΔL_m, ΔL_q) with
 *   ΔL_m = min over x >= D_1 of (x - D(x))
 *   ΔL_q = min over i and D_1 < L < D_i of (L - C_i - D(L - 1))
 * (substitute L = x + 1; D(L - 1) only counts tasks with D_j < L < D_i,
 * i.e. Jeffay's sum over j < i), condition (2) is ΔL_q >= 0, and the set
 * is schedulable iff ΔL >= 0.  With D = T, ΔL_m >= x (1 - U) >= 0 follows
 * from condition (1); with shorter deadlines it does not (two tasks
 * (T, D, C) = (10, 4, 3) have U = 0.6 and D(4) = 6 > 4), so ΔL_m >= 0 is
 * checked as a condition of its own: George, Rivierre and Spuri's test
 * for non-preemptive EDF with constrained deadlines.
 *
 * Where the paper is wrong.  Definition 1 takes L only up to T_n in ΔL_m,
 * claiming larger L only raise the slack.  They do not: x - D(x) keeps
 * falling at multiples of the periods whenever the utilization is close to
 * 1.  For T = (10, 15, 15), C = (5, 3, 4) (U = 0.967) the paper gives
 * ΔL = 2, but at x = 30, 30 - D(30) = 30 - 15 - 6 - 8 = 1, and the release
 * pattern above makes a job end only 1 before its deadline (the unit test
 * simulates it).  We follow the mathematics: x runs on past D_n until
 * x (1 - U) - K >= the minimum found, K = sum_j C_j (T_j - D_j) / T_j
 * rounded up (x - D(x) >= x (1 - U) - K for every x, since floor(y) + 1
 * <= y + 1), with ΔL_m = 0 when U = 1 exactly and every D = T (D(H) = H
 * at the hyperperiod H); U = 1 with a shorter deadline is refused as not
 * decided (the bound never rises and the hyperperiod may be vast).
 * Definition 1 also lets L run over [T_1, T_n] for every i in ΔL_q; the
 * values outside Jeffay's range (T_1, T_i) are never below min S(x), so
 * ΔL is the same either way, and we keep Jeffay's range so that ΔL_q >= 0
 * is condition (2).
 *
 * Speed.  x - D(x) rises by one per unit of x and falls only where a floor
 * term changes, at D_j plus multiples of T_j, so only those points are
 * visited (a heap over the distinct pairs (T, D)), with the prefix minimum
 * giving condition (2) for each task as the sweep passes D_i - 2.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admit/admit-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

typedef unsigned __int128 u128;

#define ONE_FX ((u128)1 << 64)	/* 1.0 in 64.64 fixed point */

/* The sweep gives up beyond this many points: before D_n that is an error
 * (-E2BIG), after it ΔL_m is cut to a sound lower bound (exact = false). */
#define MAX_POINTS (UINT64_C(1) << 25)

/* By deadline, then period: the order of condition (2) and of the sweep's
 * first points. */
static int cmp_deadline(const void *a, const void *b, void *arg)
{
	const struct cw_task *t = arg;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	int64_t di = cw_task_deadline_ns(&t[i]), dj = cw_task_deadline_ns(&t[j]);

	if (di != dj)
		return di < dj ? -1 : 1;
	if (t[i].period_ns != t[j].period_ns)
		return t[i].period_ns < t[j].period_ns ? -1 : 1;
	return i < j ? -1 : i > j;
}

static u128 gcd128(u128 a, u128 b)
{
	while (b) {
		u128 r = a % b;
		a = b;
		b = r;
	}
	return a;
}

/* The exact sum of C/T as a reduced fraction, or false when a denominator
 * would pass 2^62.  Only called when U is within n 2^-64 of 1, so every
 * partial sum stays below 2 and the products below fit in 128 bits. */
static bool util_rational(const struct cw_task *tasks, size_t n, u128 *ret_num, u128 *ret_den)
{
	u128 num = 0, den = 1;

	for (size_t i = 0; i < n; i++) {
		u128 c = (u128)tasks[i].service_ns, t = (u128)tasks[i].period_ns;
		u128 g = gcd128(den, t), l = den / g;

		if (l > ((u128)1 << 62) / t)
			return false;
		num = num * (t / g) + c * l;
		den = l * t;
		g = gcd128(num, den);
		num /= g;
		den /= g;
		if (num > 2 * den)
			return false;
	}
	*ret_num = num;
	*ret_den = den;
	return true;
}

/* U = sum C/T compared with 1, exactly.  cmp: -1 below, 0 equal, 1 above,
 * 2 too close to decide (the denominators overflow; the caller refuses).
 * hi_fx bounds U from above in 64.64 fixed point, below 2^64 if cmp < 0. */
struct util {
	int cmp;
	double utilization;
	u128 hi_fx;
};

static void util_cmp(const struct cw_task *tasks, size_t n, struct util *ret)
{
	u128 lo = 0, hi = 0, num, den;
	double u = 0;

	/* Each C/T is bracketed in 64.64 fixed point; the brackets decide
	 * unless U is within n 2^-64 of 1, where the exact fraction does. */
	for (size_t i = 0; i < n; i++) {
		u128 c = (u128)tasks[i].service_ns, t = (u128)tasks[i].period_ns;
		u128 f = (c << 64) / t;	/* c <= t < 2^63: no overflow */

		lo += f;
		hi += f + ((c << 64) % t != 0);
		u += (double)tasks[i].service_ns / (double)tasks[i].period_ns;
	}
	ret->utilization = u;
	ret->hi_fx = hi;
	if (hi < ONE_FX)
		ret->cmp = -1;
	else if (lo > ONE_FX)
		ret->cmp = 1;
	else if (hi == ONE_FX && lo == ONE_FX)
		ret->cmp = 0;
	else if (util_rational(tasks, n, &num, &den))
		ret->cmp = num < den ? -1 : num > den;
	else
		ret->cmp = 2;
	if (ret->cmp < 0 && hi >= ONE_FX)
		ret->hi_fx = ONE_FX - 1;	/* keeps the horizon 1 - U > 0 */
}

struct group {
	int64_t period;
	int64_t deadline;
	int64_t sum_c;
	int64_t max_c;
	size_t max_idx;		/* input index of the task with max_c */
};

struct ev {
	int64_t at;
	size_t g;
};

static void ev_down(struct ev *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;

		if (l < n && h[l].at < h[m].at)
			m = l;
		if (l + 1 < n && h[l + 1].at < h[m].at)
			m = l + 1;
		if (m == i)
			return;
		struct ev t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

static void fail(struct cw_admit_result *r, enum cw_admit_why why, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void fail(struct cw_admit_result *r, enum cw_admit_why why, const char *fmt, ...)
{
	va_list ap;

	r->schedulable = false;
	r->why = why;
	r->delta_l_ns = r->delta_l_m_ns = r->delta_l_q_ns = r->idle_be_ns = 0;
	va_start(ap, fmt);
	vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
	va_end(ap);
}

/* K = sum_j C_j (T_j - D_j) / T_j, each term rounded up: D(x) <= x U + K
 * for every x.  Saturates at INT64_MAX / 4. */
static int64_t deadline_debt(const struct cw_task *tasks, size_t n)
{
	u128 k = 0;

	for (size_t i = 0; i < n; i++) {
		u128 c = (u128)tasks[i].service_ns, t = (u128)tasks[i].period_ns;
		u128 gap = t - (u128)cw_task_deadline_ns(&tasks[i]);

		k += (c * gap + t - 1) / t;	/* c, gap < 2^63: no overflow */
		if (k > INT64_MAX / 4)
			return INT64_MAX / 4;
	}
	return (int64_t)k;
}

int cw_admit_test(const struct cw_task *tasks, size_t n, struct cw_admit_result *ret)
{
	_cleanup_free_ size_t *order = NULL;
	_cleanup_free_ struct group *g = NULL;
	_cleanup_free_ struct ev *heap = NULL;
	struct util util;
	struct cw_admit_result r = { .exact = true };
	size_t ng = 0, gi;
	int64_t d = 0, pm = CW_ADMIT_NO_LIMIT, pm_x = 0, dlq = CW_ADMIT_NO_LIMIT, debt;
	uint64_t points = 0;

	if (!ret || (n && !tasks))
		return -EINVAL;

	for (size_t i = 0; i < n; i++) {
		const struct cw_task *t = &tasks[i];

		if (t->period_ns <= 0 || t->service_ns <= 0 || t->deadline_ns < 0 ||
		    t->deadline_ns > t->period_ns) {
			r.fail_task = i;
			fail(&r, CW_ADMIT_INVALID, "task %zu: T and C must be positive and D within "
			     "[0, T] (T=%" PRId64 " C=%" PRId64 " D=%" PRId64 ")", i, t->period_ns,
			     t->service_ns, t->deadline_ns);
			*ret = r;
			return 0;
		}
		if (t->service_ns > t->period_ns) {
			r.fail_task = i;
			r.utilization = (double)t->service_ns / (double)t->period_ns;
			fail(&r, CW_ADMIT_UTILIZATION, "condition (1): task %zu alone has C > T (T=%"
			     PRId64 " C=%" PRId64 ")", i, t->period_ns, t->service_ns);
			*ret = r;
			return 0;
		}
		if (t->service_ns > cw_task_deadline_ns(t)) {
			r.fail_task = i;
			r.fail_l_ns = t->deadline_ns;
			r.fail_need_ns = t->service_ns;
			fail(&r, CW_ADMIT_DEMAND, "demand: task %zu alone has C > D (D=%" PRId64
			     " C=%" PRId64 ")", i, t->deadline_ns, t->service_ns);
			*ret = r;
			return 0;
		}
	}
	if (n == 0) {
		r.schedulable = true;
		r.delta_l_ns = r.delta_l_m_ns = r.delta_l_q_ns = r.idle_be_ns = CW_ADMIT_NO_LIMIT;
		snprintf(r.reason, sizeof(r.reason), "ok: no tasks");
		*ret = r;
		return 0;
	}

	util_cmp(tasks, n, &util);
	r.utilization = util.utilization;
	if (util.cmp > 0) {
		fail(&r, CW_ADMIT_UTILIZATION, "condition (1): U = %.12g > 1", util.utilization);
		*ret = r;
		return 0;
	}
	if (util.cmp == 2) {
		fail(&r, CW_ADMIT_UTILIZATION,
		     "condition (1): U is within 1e-15 of 1 and cannot be decided exactly");
		*ret = r;
		return 0;
	}
	debt = deadline_debt(tasks, n);
	if (util.cmp == 0 && debt > 0) {
		fail(&r, CW_ADMIT_UTILIZATION,
		     "condition (1): U = 1 with a deadline shorter than its period is not decided");
		*ret = r;
		return 0;
	}

	order = malloc(n * sizeof(*order));
	g = malloc(n * sizeof(*g));
	heap = malloc(n * sizeof(*heap));
	if (!order || !g || !heap)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(*order), cmp_deadline, (void *)tasks);
	for (size_t k = 0; k < n; k++) {
		const struct cw_task *t = &tasks[order[k]];
		int64_t dl = cw_task_deadline_ns(t);

		if (ng == 0 || g[ng - 1].period != t->period_ns || g[ng - 1].deadline != dl)
			g[ng++] = (struct group){ .period = t->period_ns, .deadline = dl, .max_c = 0 };
		g[ng - 1].sum_c += t->service_ns;
		if (t->service_ns > g[ng - 1].max_c) {
			g[ng - 1].max_c = t->service_ns;
			g[ng - 1].max_idx = order[k];
		}
	}
	for (size_t k = 0; k < ng; k++)
		heap[k] = (struct ev){ .at = g[k].deadline, .g = k };	/* sorted: already a heap */

	const int64_t d1 = g[0].deadline, dn = g[ng - 1].deadline;

	gi = 1;
	for (;;) {
		int64_t x = heap[0].at;

		/* Every point <= D_i - 2 is in pm: condition (2) for group gi. */
		while (gi < ng && g[gi].deadline - 2 < x) {
			if (g[gi].deadline - 2 >= d1) {
				int64_t q = pm - (g[gi].max_c - 1);

				if (q < 0) {
					r.fail_task = g[gi].max_idx;
					r.fail_l_ns = pm_x + 1;
					r.fail_need_ns = pm_x + 1 - q;
					fail(&r, CW_ADMIT_BLOCKING,
					     "condition (2): task %zu (T=%" PRId64 " D=%" PRId64
					     " C=%" PRId64 ") at L=%" PRId64 ": needs %" PRId64 " > L",
					     g[gi].max_idx, g[gi].period, g[gi].deadline, g[gi].max_c,
					     pm_x + 1, pm_x + 1 - q);
					*ret = r;
					return 0;
				}
				dlq = CW_MIN(dlq, q);
			}
			gi++;
		}
		if (gi == ng && x > dn) {
			/* Beyond D_n: x' - D(x') >= x' (1 - U) - K for every x' >= x. */
			if (util.cmp == 0) {
				pm = CW_MIN(pm, 0);	/* D(H) = H at the hyperperiod (D = T) */
				break;
			}
			u128 room = ONE_FX - util.hi_fx;	/* 2^64 (1 - U), rounded down */
			int64_t floor_here = (int64_t)(((u128)x * room) >> 64) - debt;

			if (floor_here >= pm)
				break;
			if (points >= MAX_POINTS) {
				if (floor_here < pm) {
					pm = floor_here;
					pm_x = x;
				}
				r.exact = false;
				break;
			}
		} else if (points >= MAX_POINTS) {
			return -E2BIG;
		}
		while (heap[0].at == x) {
			struct group *gg = &g[heap[0].g];

			d += gg->sum_c;
			if (heap[0].at > INT64_MAX - gg->period)
				return -ERANGE;
			heap[0].at += gg->period;
			ev_down(heap, ng, 0);
		}
		if (x - d < pm) {
			pm = x - d;
			pm_x = x;
		}
		points++;
	}

	if (pm < 0) {
		/* only with deadlines shorter than periods (D = T: pm >= x (1 - U)) */
		r.fail_task = SIZE_MAX;	/* the set, no one task */
		r.fail_l_ns = pm_x;
		r.fail_need_ns = pm_x - pm;
		if (r.exact)
			fail(&r, CW_ADMIT_DEMAND, "demand: %" PRId64 " of work is due within L=%"
			     PRId64 " > L", pm_x - pm, pm_x);
		else
			fail(&r, CW_ADMIT_DEMAND, "demand: the work due within L cannot be shown "
			     "to fit in L for every L (U = %.12g)", util.utilization);
		*ret = r;
		return 0;
	}
	r.schedulable = true;
	r.why = CW_ADMIT_OK;
	r.delta_l_m_ns = pm;
	r.delta_l_q_ns = dlq;
	r.delta_l_ns = CW_MIN(pm, dlq);
	r.idle_be_ns = pm + 1;
	snprintf(r.reason, sizeof(r.reason), "ok: U=%.6f dL=%" PRId64 " ns%s", r.utilization,
		 r.delta_l_ns, r.exact ? "" : " (lower bound)");
	*ret = r;
	return 0;
}

int cw_admit_server_fit(const struct cw_task *tasks, size_t n, int64_t period_ns,
			int64_t min_delta_l_ns, int64_t *ret_slice_ns)
{
	_cleanup_free_ struct cw_task *all = NULL;
	int64_t lo = 0, hi = period_ns;	/* lo fits (0 = nothing), hi + 1 does not */

	if ((n && !tasks) || period_ns <= 0 || min_delta_l_ns < 0 || !ret_slice_ns)
		return -EINVAL;
	all = malloc((n + 1) * sizeof(*all));
	if (!all)
		return -ENOMEM;
	if (n)
		memcpy(all, tasks, n * sizeof(*all));
	/* Adding work only lowers every S(x): the fitting slices are a prefix. */
	while (lo < hi) {
		int64_t mid = lo + (hi - lo + 1) / 2;
		struct cw_admit_result r;
		int k;

		all[n] = (struct cw_task){ .period_ns = period_ns, .service_ns = mid };
		k = cw_admit_test(all, n + 1, &r);
		if (k < 0)
			return k;
		if (r.schedulable && r.delta_l_ns >= min_delta_l_ns)
			lo = mid;
		else
			hi = mid - 1;
	}
	*ret_slice_ns = lo;
	return 0;
}
