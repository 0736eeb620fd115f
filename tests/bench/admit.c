/*
 * Benchmark: one admission decision (Jeffay's test and ΔL for a disk's
 * streams plus one new stream) on a disk holding 10, 100 and 1,000
 * streams with periods from 10 ms to 2 s and mixed block sizes, against
 * the same test evaluated at every integer L in microseconds (the
 * baseline, run in the same process where it finishes in reasonable time).
 * Last line: admit_100_us=<x> admit_1000_ms=<y> speedup_vs_naive_100=<z>
 */
#include "config.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/admit.h>
#include <clockwise/model.h>
#include "common/util.h"

static unsigned rng = 2026;

static double urand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	return (double)rng / 4294967296.0;
}

/* A fast device declared as a model, so 1,000 streams fit on one disk. */
static void nvme_model(struct cw_model *m)
{
	*m = (struct cw_model){ .tier = CW_TIER_SSD, .capacity_bytes = UINT64_C(2000000000000),
				.overhead_ns = 2000, .n_seek = 1, .n_zones = 1 };
	snprintf(m->name, sizeof(m->name), "bench-nvme");
	m->seek[0] = (struct cw_model_seek){ 0, 10000 };
	m->zone[0] = (struct cw_model_zone){ 0, m->capacity_bytes, UINT64_C(3000000000) };
}

/* n + 1 streams (the last is the one asking), schedulable. */
static void make_set(const struct cw_model *m, size_t n, struct cw_task *t)
{
	static const uint64_t sizes[] = { 4096, 16384, 65536 };

	for (;;) {
		struct cw_admit_result r;

		for (size_t k = 0; k <= n; k++) {
			/* log-uniform periods between 10 ms and 2 s */
			int64_t p = (int64_t)(1e7 * exp(urand() * log(200.0)));
			int64_t c;

			if (cw_model_service_ns(m, 0, 0, sizes[k % 3], &c) < 0)
				abort();
			t[k] = (struct cw_task){ .period_ns = p, .service_ns = c };
		}
		if (cw_admit_test(t, n + 1, &r) == 0 && r.schedulable)
			return;
	}
}

/* The baseline: conditions (1) and (2) and ΔL = min over every integer L
 * in [T_1, T_n] (microseconds: periods rounded down, C up). */
static bool naive_us(const struct cw_task *t, size_t n, int64_t *ret_dl)
{
	int64_t *T = malloc(n * sizeof(*T)), *C = malloc(n * sizeof(*C));
	int64_t t1 = INT64_MAX, tn = 0, dl = INT64_MAX;
	double u = 0;
	bool ok = true;

	for (size_t k = 0; k < n; k++) {
		T[k] = t[k].period_ns / 1000;
		C[k] = (t[k].service_ns + 999) / 1000;
		u += (double)C[k] / (double)T[k];
		t1 = CW_MIN(t1, T[k]);
		tn = CW_MAX(tn, T[k]);
	}
	if (u > 1)
		ok = false;
	for (int64_t L = t1; ok && L <= tn; L++) {
		int64_t d_l = 0, d_l1 = 0, block = 0;

		for (size_t j = 0; j < n; j++) {
			d_l += L / T[j] * C[j];
			d_l1 += (L - 1) / T[j] * C[j];
			if (T[j] > L && C[j] > block)
				block = C[j];	/* a job that may start just before */
		}
		dl = CW_MIN(dl, L - d_l);
		if (L > t1 && block) {
			if (L < block + d_l1)
				ok = false;
			dl = CW_MIN(dl, L - block - d_l1);
		}
	}
	free(T);
	free(C);
	*ret_dl = dl;
	return ok;
}

/* Mean time of one fast decision, repeated for at least 0.2 s. */
static double time_fast(const struct cw_task *t, size_t n, struct cw_admit_result *r)
{
	int64_t t0 = cw_now_ns(), el;
	unsigned reps = 0;

	do {
		if (cw_admit_test(t, n, r) < 0)
			abort();
		reps++;
		el = cw_now_ns() - t0;
	} while (el < 200 * CW_NS_PER_MS);
	return (double)el / reps;
}

int main(void)
{
	static const size_t counts[] = { 10, 100, 1000 };
	static struct cw_task t[1001];
	struct cw_model m;
	double fast_100 = 0, fast_1000 = 0, naive_100 = 0;

	nvme_model(&m);
	if (cw_model_validate(&m) < 0)
		return 1;
	for (size_t i = 0; i < CW_ARRAY_SIZE(counts); i++) {
		size_t n = counts[i];
		struct cw_admit_result r;
		double fast, naive = 0;

		make_set(&m, n, t);
		fast = time_fast(t, n + 1, &r);
		printf("streams=%zu U=%.3f dL_us=%.1f fast_us=%.2f", n, r.utilization,
		       (double)r.delta_l_ns / 1000.0, fast / 1000.0);
		if (n <= 100) {
			int64_t t0 = cw_now_ns(), dl;
			bool ok = naive_us(t, n + 1, &dl);

			naive = (double)(cw_now_ns() - t0);
			printf(" naive_us=%.0f (verdict %s, dL_us=%" PRId64 ") speedup=%.0f", naive / 1000.0,
			       ok == r.schedulable ? "agrees" : "DIFFERS", dl, naive / fast);
		} else
			printf(" naive skipped (%zu streams x 2e6 values of L)", n + 1);
		printf("\n");
		if (n == 100) {
			fast_100 = fast;
			naive_100 = naive;
		}
		if (n == 1000)
			fast_1000 = fast;
	}
	printf("admit_100_us=%.2f admit_1000_ms=%.3f speedup_vs_naive_100=%.0f\n",
	       fast_100 / 1000.0, fast_1000 / 1e6, naive_100 / fast_100);
	return 0;
}
