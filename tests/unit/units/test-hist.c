/*
 * Description: log-linear histograms report percentiles a reader can
 * take as measurements.  Every value falls in the bucket whose edges hold
 * it, buckets follow each other with no gap, and each is at most 1/64 of
 * its lower edge wide; on known samples (uniform, long-tailed, a single
 * value, two clusters) the reported p50, p90, p99 and p99.9 are never
 * below the exact percentile of the sorted sample and at most 1.6% (+1)
 * above it, where the power-of-two buckets they replace were up to 100%
 * off; cumulative counts at an edge are exact.
 */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clockwise/hist.h"
#include "cwtest.h"

#define N 200000

static uint64_t counts[CW_HIST_BUCKETS];
static uint64_t sample[N];

static uint64_t rnd(uint64_t *s)
{
	/* xorshift64*: the same sample on every run */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * UINT64_C(2685821657736338717);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void test_edges(void)
{
	uint64_t s = 7;

	CU_ASSERT_EQUAL(cw_hist_lower(0), 0);
	for (size_t i = 0; i + 1 < CW_HIST_BUCKETS; i++) {
		CU_ASSERT_TRUE_FATAL(cw_hist_upper(i) > cw_hist_lower(i));
		/* no gap, no overlap */
		CU_ASSERT_EQUAL_FATAL(cw_hist_upper(i), cw_hist_lower(i + 1));
		if (cw_hist_lower(i) >= 2 * CW_HIST_SUB)
			CU_ASSERT_TRUE_FATAL((cw_hist_upper(i) - cw_hist_lower(i)) * 64 <=
					     cw_hist_lower(i));
	}
	CU_ASSERT_EQUAL(cw_hist_lower(CW_HIST_BUCKETS - 1), CW_HIST_MAX);
	for (int k = 0; k < 100000; k++) {
		/* values of every magnitude */
		uint64_t v = rnd(&s) >> (rnd(&s) % 64);
		size_t i = cw_hist_index(v);

		if (v >= CW_HIST_MAX) {
			CU_ASSERT_EQUAL_FATAL(i, CW_HIST_BUCKETS - 1);
			continue;
		}
		CU_ASSERT_TRUE_FATAL(i < CW_HIST_BUCKETS - 1);
		CU_ASSERT_TRUE_FATAL(cw_hist_lower(i) <= v && v < cw_hist_upper(i));
	}
	for (uint64_t v = 0; v < 5000; v++)
		CU_ASSERT_TRUE_FATAL(cw_hist_index(v + 1) >= cw_hist_index(v));
	CU_ASSERT_EQUAL(cw_hist_index(CW_HIST_MAX - 1), CW_HIST_BUCKETS - 2);
	CU_ASSERT_EQUAL(cw_hist_index(UINT64_MAX), CW_HIST_BUCKETS - 1);
}

/* Fills the histogram from sample[0..n) and checks each percentile
 * against the sorted sample's. */
static void check_sample(size_t n, const char *what)
{
	static const double qs[] = { 0.5, 0.9, 0.99, 0.999, 1.0 };

	memset(counts, 0, sizeof(counts));
	for (size_t i = 0; i < n; i++)
		counts[cw_hist_index(sample[i])]++;
	CU_ASSERT_EQUAL(cw_hist_total(counts), n);
	qsort(sample, n, sizeof(sample[0]), cmp_u64);
	for (size_t k = 0; k < sizeof(qs) / sizeof(qs[0]); k++) {
		size_t rank = (size_t)ceil(qs[k] * (double)n);
		uint64_t exact = sample[(rank ? rank : 1) - 1];
		uint64_t got = cw_hist_quantile(counts, qs[k]);

		if (got < exact || (double)got > (double)exact * 1.016 + 1)
			fprintf(stderr, "%s: p%g reported %llu, exact %llu\n", what, qs[k] * 100,
				(unsigned long long)got, (unsigned long long)exact);
		CU_ASSERT_TRUE(got >= exact);
		CU_ASSERT_TRUE((double)got <= (double)exact * 1.016 + 1);
	}
}

static void test_uniform(void)
{
	uint64_t s = 11;

	for (size_t i = 0; i < N; i++)
		sample[i] = 1000 + rnd(&s) % 99000000;	/* 1 us to 99 ms */
	check_sample(N, "uniform");
}

static void test_long_tail(void)
{
	uint64_t s = 13;

	/* log-uniform over six decades: a latency's tail */
	for (size_t i = 0; i < N; i++)
		sample[i] = (uint64_t)(1000.0 * pow(10.0, 6.0 * (double)(rnd(&s) >> 11) /
						       (double)(UINT64_C(1) << 53)));
	check_sample(N, "long tail");
}

static void test_one_value(void)
{
	for (size_t i = 0; i < 1000; i++)
		sample[i] = 4242424;
	check_sample(1000, "one value");
	CU_ASSERT_TRUE(cw_hist_quantile(counts, 0.5) < 4242424 + 4242424 / 64 + 1);
}

static void test_two_clusters(void)
{
	uint64_t s = 17;

	/* 98% fast reads near 300 us, 2% near 40 ms: p99 lands in the slow
	 * cluster, p50 in the fast one */
	for (size_t i = 0; i < N; i++)
		sample[i] = i % 50 == 0 ? 40000000 + rnd(&s) % 5000000 : 300000 + rnd(&s) % 20000;
	check_sample(N, "two clusters");
	CU_ASSERT_TRUE(cw_hist_quantile(counts, 0.5) < 330000);
	CU_ASSERT_TRUE(cw_hist_quantile(counts, 0.99) > 40000000);
}

static void test_count_le(void)
{
	uint64_t le = cw_hist_upper(cw_hist_index(1000000)) - 1, n = 0;

	memset(counts, 0, sizeof(counts));
	for (uint64_t v = 0; v < 3000000; v += 997) {
		counts[cw_hist_index(v)]++;
		n += v <= le;
	}
	CU_ASSERT_EQUAL(cw_hist_count_le(counts, le), n);
	CU_ASSERT_EQUAL(cw_hist_count_le(counts, UINT64_MAX), cw_hist_total(counts));
	memset(counts, 0, sizeof(counts));
	CU_ASSERT_EQUAL(cw_hist_quantile(counts, 0.99), 0);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("hist", NULL, NULL);

	cwtest_add(s, "bucket edges", test_edges);
	cwtest_add(s, "uniform sample", test_uniform);
	cwtest_add(s, "long-tailed sample", test_long_tail);
	cwtest_add(s, "one value", test_one_value);
	cwtest_add(s, "two clusters", test_two_clusters);
	cwtest_add(s, "cumulative counts", test_count_le);
	return cwtest_run();
}
