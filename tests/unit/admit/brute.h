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
	int64_t dl, dl_m, dl_q;		/* corrected ΔL, ΔL_m over [T_1, horizon], ΔL_q */
	int64_t paper_dl;		/* Definition 1 as printed: L in [T_1, T_n] */
	int64_t argmin_x;		/* x with S(x) = dl */
};

static int brute_cmp(const void *a, const void *b)
{
	const struct cw_task *x = a, *y = b;

	return (x->period_ns > y->period_ns) - (x->period_ns < y->period_ns);
}

static inline int64_t brute_dem(const struct cw_task *t, size_t n, int64_t x)
{
	int64_t d = 0;

	for (size_t j = 0; j < n; j++)
		d += x / t[j].period_ns * t[j].service_ns;
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

/* tasks sorted by period in place; horizon: the last x for ΔL_m. */
static inline void brute_eval(struct cw_task *t, size_t n, int64_t h, int64_t horizon,
			      struct brute *ret)
{
	int64_t t1, tn, m = INT64_MAX, q = INT64_MAX, pm = INT64_MAX, pq = INT64_MAX;

	ret->argmin_x = 0;

	qsort(t, n, sizeof(*t), brute_cmp);
	t1 = t[0].period_ns;
	tn = t[n - 1].period_ns;
	ret->schedulable = brute_util_ok(t, n, h);
	/* Jeffay's (2) and ΔL_q: every i > 1, every L with T_1 < L < T_i. */
	for (size_t i = 1; i < n; i++)
		for (int64_t L = t1 + 1; L < t[i].period_ns; L++) {
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
	ret->dl_m = m;
	ret->dl_q = q;
	ret->dl = m < q ? m : q;
	ret->paper_dl = pm < pq ? pm : pq;
	if (q < m) {
		/* the x of ΔL_q: L - 1 at its minimum */
		for (size_t i = 1; i < n; i++)
			for (int64_t L = t1 + 1; L < t[i].period_ns; L++)
				if (L - (t[i].service_ns + brute_dem(t, i, L - 1)) == q)
					ret->argmin_x = L - 1;
	}
}

#endif
