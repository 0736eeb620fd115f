/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The admission formulas evaluated literally, at every integer L, for the
 * property tests and as the benchmark's baseline.  Nothing here is shared
 * with libclockwise/admit/test.c: it is the definition, not the method.
 */
#ifndef CW_TEST_BRUTE_H
#define CW_TEST_BRUTE_H

#include <stdlib.h>
#include <clockwise/admit.h>

struct brute {
	bool schedulable;
	int64_t dl, dl_m, dl_q;		/* corrected ΔL, ΔL_m over [D_1, horizon], ΔL_q */
	int64_t paper_dl;		/* Definition 1 as printed: L in [T_1, T_n] (D = T) */
	int64_t argmin_x;		/* x with S(x) = dl */
};

/* by deadline, then period */
static int brute_cmp(const void *a, const void *b)
{
	const struct cw_task *x = a, *y = b;
	int64_t dx = cw_task_deadline_ns(x), dy = cw_task_deadline_ns(y);

	if (dx != dy)
		return (dx > dy) - (dx < dy);
	return (x->period_ns > y->period_ns) - (x->period_ns < y->period_ns);
}

/* The work of jobs released at or after 0 and due by x: sum over j of
 * (floor((x - D_j) / T_j) + 1) C_j where x >= D_j (floor(x / T_j) C_j
 * when D = T). */
static inline int64_t brute_dem(const struct cw_task *t, size_t n, int64_t x)
{
	int64_t d = 0;

	for (size_t j = 0; j < n; j++) {
		int64_t dj = cw_task_deadline_ns(&t[j]);

		if (x >= dj)
			d += ((x - dj) / t[j].period_ns + 1) * t[j].service_ns;
	}
	return d;
}

/* U <= 1 decided in integers over the common multiple h of the periods. */
static inline bool brute_util_ok(const struct cw_task *t, size_t n, int64_t h)
{
	int64_t w = 0;

	for (size_t j = 0; j < n; j++)
		w += h / t[j].period_ns * t[j].service_ns;
	return w <= h;
}

/* tasks sorted by deadline in place; horizon: the last x for ΔL_m (past
 * the longest deadline by a common multiple h of the periods). */
static inline void brute_eval(struct cw_task *t, size_t n, int64_t h, int64_t horizon,
			      struct brute *ret)
{
	int64_t t1, tn = 0, m = INT64_MAX, q = INT64_MAX, pm = INT64_MAX, pq = INT64_MAX;

	ret->argmin_x = 0;

	qsort(t, n, sizeof(*t), brute_cmp);
	t1 = cw_task_deadline_ns(&t[0]);
	for (size_t j = 0; j < n; j++)
		tn = t[j].period_ns > tn ? t[j].period_ns : tn;
	ret->schedulable = brute_util_ok(t, n, h);
	/* Jeffay's (2) and ΔL_q: every i > 1, every L with D_1 < L < D_i. */
	for (size_t i = 1; i < n; i++)
		for (int64_t L = t1 + 1; L < cw_task_deadline_ns(&t[i]); L++) {
			int64_t v = L - (t[i].service_ns + brute_dem(t, i, L - 1));

			if (v < 0)
				ret->schedulable = false;
			if (v < q)
				q = v;
		}
	for (int64_t L = t1; L <= horizon; L++) {
		int64_t v = L - brute_dem(t, n, L);

		if (v < m) {
			m = v;
			ret->argmin_x = L;
		}
		if (L <= tn && v < pm)
			pm = v;
	}
	/* the paper's ΔL_q: L over [T_1, T_n] for every i > 1 */
	for (size_t i = 1; i < n; i++)
		for (int64_t L = t1; L <= tn; L++) {
			int64_t v = L - (t[i].service_ns + brute_dem(t, i, L - 1));

			if (v < pq)
				pq = v;
		}
	if (m < 0)
		ret->schedulable = false;	/* D(x) > x: deadlines shorter than periods */
	ret->dl_m = m;
	ret->dl_q = q;
	ret->dl = m < q ? m : q;
	ret->paper_dl = pm < pq ? pm : pq;
	if (q < m) {
		/* the x of ΔL_q: L - 1 at its minimum */
		for (size_t i = 1; i < n; i++)
			for (int64_t L = t1 + 1; L < cw_task_deadline_ns(&t[i]); L++)
				if (L - (t[i].service_ns + brute_dem(t, i, L - 1)) == q)
					ret->argmin_x = L - 1;
	}
}

#endif
