/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: the data path's counters (daemon/path/stats.c): each latency
 * falls in the log-linear bucket (clockwise/hist.h) that holds it, a
 * quantile is never below the exact one of a known sample and at most
 * 1.6% above it, the queue length's maximum survives its ups and downs
 * on several threads, and the log line carries every counter.
 */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/log.h"
#include "daemon/path/stats.h"
#include "cwtest.h"

#define US 1000

/* The bucket a sample landed in: the only one that is not empty. */
static int only_bucket(const atomic_uint_fast64_t h[CWD_STATS_HIST_BUCKETS])
{
	int b = -1;

	for (int i = 0; i < (int)CWD_STATS_HIST_BUCKETS; i++)
		if (cwd_stats_get(&h[i])) {
			if (b >= 0)
				return -2;
			b = i;
		}
	return b;
}

/* Each latency lands in the one bucket of clockwise/hist.h that holds it
 * (negative ones as 0, beyond the range in the last). */
static void test_buckets(void)
{
	const int64_t samples[] = {
		-5, 0, 1, 127, 128, 129, 999, US, 4 * US - 1, 4 * US, 1500 * US,
		INT64_C(1) << 39, (INT64_C(1) << 40) - 1, INT64_C(1) << 40, INT64_MAX,
	};

	for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
		atomic_uint_fast64_t h[CWD_STATS_HIST_BUCKETS] = { 0 };
		uint64_t v = samples[i] < 0 ? 0 : (uint64_t)samples[i];
		int b;

		cwd_stats_hist_add(h, samples[i]);
		b = only_bucket(h);
		CU_ASSERT_FATAL(b >= 0);
		if (v >= CW_HIST_MAX)
			CU_ASSERT_EQUAL(b, CWD_STATS_HIST_BUCKETS - 1)
		else
			CU_ASSERT(cw_hist_lower((size_t)b) <= v && v < cw_hist_upper((size_t)b));
	}
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* Issue 36, item 3: the percentiles the daemon reports (stats, cwctl
 * stats, the metrics) against the exact ones of a known sample: never
 * below, at most 1.6% above (the quick start showed power-of-two bucket
 * edges before, BE-P50 65.5ms for whatever lay between 32.8 and 65.5). */
static void test_quantiles(void)
{
	static const double qs[] = { 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0 };
	enum { N = 20000 };
	static int64_t v[N];
	static atomic_uint_fast64_t h[CWD_STATS_HIST_BUCKETS];
	double worst = 0;

	CU_ASSERT_EQUAL(cwd_stats_hist_quantile(h, 0.5), 0);	/* no samples */
	srand(12345);
	for (int i = 0; i < N; i++) {
		/* Mostly fast, a long tail: 20 us to about 1 s. */
		int shift = rand() % 100 < 90 ? rand() % 8 : rand() % 16;

		v[i] = ((int64_t)(rand() % 1000 + 1) << shift) * 20;
		cwd_stats_hist_add(h, v[i]);
	}
	qsort(v, N, sizeof(v[0]), cmp_i64);
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		/* The exact percentile: the sample of rank ceil(q N). */
		size_t k = (size_t)ceil(qs[i] * N);
		int64_t exact = v[k - 1], got = cwd_stats_hist_quantile(h, qs[i]);
		double err = (double)(got - exact) / (double)exact;

		printf("p%g: %lld ns, exactly %lld ns (+%.2f%%)\n", qs[i] * 100, (long long)got,
		       (long long)exact, err * 100);
		CU_ASSERT(got >= exact);
		CU_ASSERT(err <= 0.016);
		worst = err > worst ? err : worst;
	}
	printf("worst relative error %.2f%%\n", worst * 100);
	/* A small example by hand: 90 at 5 us, 9 at 100 us, 1 at 10 ms,
	 * each reported as the largest value of its bucket. */
	memset(h, 0, sizeof(h));
	for (int i = 0; i < 100; i++)
		cwd_stats_hist_add(h, i < 90 ? 5 * US : i < 99 ? 100 * US : 10000 * US);
	CU_ASSERT_EQUAL(cwd_stats_hist_quantile(h, 0.5), cw_hist_upper(cw_hist_index(5 * US)) - 1);
	CU_ASSERT(cwd_stats_hist_quantile(h, 0.5) - 5 * US < 5 * US / 60);
	CU_ASSERT(cwd_stats_hist_quantile(h, 0.99) - 100 * US < 100 * US / 60);
	CU_ASSERT(cwd_stats_hist_quantile(h, 0.99) >= 100 * US);
	CU_ASSERT(cwd_stats_hist_quantile(h, 1.0) - 10000 * US < 10000 * US / 60);
	CU_ASSERT(cwd_stats_hist_quantile(h, 1.0) >= 10000 * US);
}

static void test_queue_max(void)
{
	struct cwd_stats c = { 0 };

	for (int i = 0; i < 5; i++)
		cwd_stats_queue_change(&c, 1);
	cwd_stats_queue_change(&c, -1);
	cwd_stats_queue_change(&c, -1);
	cwd_stats_queue_change(&c, 1);
	CU_ASSERT_EQUAL(cwd_stats_get(&c.queued), 4);
	CU_ASSERT_EQUAL(cwd_stats_get(&c.queued_max), 5);
	cwd_stats_queue_change(&c, 3);
	CU_ASSERT_EQUAL(cwd_stats_get(&c.queued), 7);
	CU_ASSERT_EQUAL(cwd_stats_get(&c.queued_max), 7);
	cwd_stats_queue_change(&c, -7);
	CU_ASSERT_EQUAL(cwd_stats_get(&c.queued), 0);
	CU_ASSERT_EQUAL(cwd_stats_get(&c.queued_max), 7);
}

enum { THREADS = 4, ROUNDS = 20000, DEPTH = 3 };
static struct cwd_stats shared;
static pthread_barrier_t start;

static void *queue_worker(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&start);
	for (int i = 0; i < ROUNDS; i++) {
		cwd_stats_queue_change(&shared, DEPTH);
		cwd_stats_queue_change(&shared, -DEPTH);
	}
	return NULL;
}

/* Each thread holds at most DEPTH at a time: the maximum lies between one
 * thread's and all of them together, and nothing is left queued. */
static void test_queue_threads(void)
{
	pthread_t t[THREADS];

	memset(&shared, 0, sizeof(shared));
	pthread_barrier_init(&start, NULL, THREADS);
	for (int i = 0; i < THREADS; i++)
		CU_ASSERT_FATAL(pthread_create(&t[i], NULL, queue_worker, NULL) == 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&start);
	CU_ASSERT_EQUAL(cwd_stats_get(&shared.queued), 0);
	CU_ASSERT(cwd_stats_get(&shared.queued_max) >= DEPTH);
	CU_ASSERT(cwd_stats_get(&shared.queued_max) <= THREADS * DEPTH);
}

/* What cwd_stats_log wrote to stderr at the given log level. */
static char *logged(const struct cwd_stats *c, int level)
{
	static char buf[2048];
	FILE *f = tmpfile();
	int saved = dup(STDERR_FILENO);
	size_t n;

	CU_ASSERT_FATAL(f != NULL && saved >= 0);
	CU_ASSERT_FATAL(dup2(fileno(f), STDERR_FILENO) >= 0);
	cwd_log_set_level(level);
	cwd_stats_log("disk d1 lane 0", c);
	cwd_log_set_level(LOG_INFO);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

/* The value of key= in line, or -1. */
static long long field(const char *line, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), " %s=", key);
	p = strstr(line, pat);
	return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

static void test_log_line(void)
{
	static const struct { const char *key; long long want; } f[] = {
		{ "requests", 11 }, { "read_bytes", 4096 }, { "write_bytes", 8192 },
		{ "flushes", 2 }, { "errors", 1 }, { "rt_done", 6 }, { "rt_missed", 3 },
		{ "be_done", 5 }, { "slack_used_us", 1234 }, { "queued", 4 },
		{ "queued_max", 9 }, { "misses_model", 1 }, { "misses_overrun", 2 },
		{ "misses_cpu", 3 }, { "misses_delivery", 4 }, { "misses_sched", 5 },
		{ "be_overruns", 6 },
	};
	struct cwd_stats c = { 0 };
	const char *line;
	char want[64];

	cwd_stats_add(&c.requests, 11);
	cwd_stats_add(&c.read_bytes, 4096);
	cwd_stats_add(&c.write_bytes, 8192);
	cwd_stats_add(&c.flushes, 2);
	cwd_stats_add(&c.errors, 1);
	cwd_stats_add(&c.rt_done, 6);
	cwd_stats_add(&c.rt_missed, 3);
	cwd_stats_add(&c.be_done, 5);
	cwd_stats_add(&c.slack_used_ns, 1234567);
	for (int k = 0; k < CWD_STATS_MISS_CLASSES; k++)
		cwd_stats_add(&c.miss[k], (uint64_t)k + 1);
	cwd_stats_add(&c.be_overruns, 6);
	cwd_stats_queue_change(&c, 9);
	cwd_stats_queue_change(&c, -5);
	for (int i = 0; i < 10; i++)
		cwd_stats_hist_add(c.be_lat, i < 5 ? 3 * US : 300 * US);
	line = logged(&c, LOG_INFO);
	CU_ASSERT_PTR_NOT_NULL(strstr(line, "stats disk d1 lane 0: "));
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		if (field(line, f[i].key) != f[i].want)
			fprintf(stderr, "%s: %lld, want %lld in: %s", f[i].key, field(line, f[i].key),
				f[i].want, line);
		CU_ASSERT_EQUAL(field(line, f[i].key), f[i].want);
	}
	/* Quantiles in us, from the histogram: half at 3 us, the rest 300;
	 * each the largest value of its bucket (within 1.6%), rounded up. */
	snprintf(want, sizeof(want), " be_p50_us<=%llu ",
		 (unsigned long long)(cw_hist_upper(cw_hist_index(3 * US)) - 1 + 999) / 1000);
	CU_ASSERT_PTR_NOT_NULL(strstr(line, want));
	CU_ASSERT_PTR_NOT_NULL(strstr(line, " be_p50_us<=4 "));
	snprintf(want, sizeof(want), " be_p99_us<=%llu ",
		 (unsigned long long)(cw_hist_upper(cw_hist_index(300 * US)) - 1 + 999) / 1000);
	CU_ASSERT_PTR_NOT_NULL(strstr(line, want));
	/* Below the level: nothing. */
	CU_ASSERT_STRING_EQUAL(logged(&c, LOG_WARNING), "");
}

int main(void)
{
	CU_pSuite s = cwtest_suite("daemon stats", NULL, NULL);

	cwtest_add(s, "latencies fall in their documented buckets", test_buckets);
	cwtest_add(s, "quantiles within 1.6% above the exact ones of a known sample",
		   test_quantiles);
	cwtest_add(s, "queue length and its maximum", test_queue_max);
	cwtest_add(s, "queue maximum on several threads", test_queue_threads);
	cwtest_add(s, "the log line carries every counter", test_log_line);
	return cwtest_run();
}
