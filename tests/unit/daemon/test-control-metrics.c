/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: the metrics exposition's pieces (daemon/control/control-metrics.c,
 * included for its statics): the best-effort latency histogram becomes
 * cumulative "le" buckets at the daemon's bucket edges in seconds, with
 * +Inf, _sum and _count; a counter's family is named with _total in the
 * Prometheus format and without it in OpenMetrics; label values are
 * escaped, and an empty one is left out.
 */
#include "daemon/control/control-metrics.c"

#include "cwtest.h"

/* What fn wrote, as Prometheus text (om false) or OpenMetrics. */
static char *text;
static size_t text_len;

static struct out open_out(bool om)
{
	struct out o = { .om = om };

	free(text);
	text = NULL;
	o.f = open_memstream(&text, &text_len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o.f);
	return o;
}

static unsigned count_lines(const char *s, const char *prefix)
{
	unsigned n = 0;

	for (const char *l = s; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		n += strncmp(l, prefix, strlen(prefix)) == 0;
	return n;
}

static void test_histogram(void)
{
	struct cwc_disk_stats s = { 0 };
	struct out o = open_out(false);

	s.be_hist[cw_hist_index(20000)] = 3;		/* 20 us */
	s.be_hist[cw_hist_index(700000)] = 5;		/* 700 us */
	s.be_hist[cw_hist_index(2000000)] = 1;		/* 2 ms */
	s.be_hist[CWC_HIST_BUCKETS - 1] = 1;		/* beyond the range */
	s.be_lat_sum_ns = 1500000000;
	be_histogram(&o, "h", &s, "hdd0");
	fclose(o.f);
	/* 50 us to 10 s, 1-2.5-5 a decade, and +Inf */
	CU_ASSERT_EQUAL(count_lines(text, "h_bucket{disk=\"hdd0\",le="), 18);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "h_bucket{disk=\"hdd0\",le=\"5e-05\"} 3\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "h_bucket{disk=\"hdd0\",le=\"0.0005\"} 3\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "h_bucket{disk=\"hdd0\",le=\"0.001\"} 8\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "h_bucket{disk=\"hdd0\",le=\"0.0025\"} 9\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "h_bucket{disk=\"hdd0\",le=\"10\"} 9\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "h_bucket{disk=\"hdd0\",le=\"+Inf\"} 10\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "h_sum{disk=\"hdd0\"} 1.5\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "h_count{disk=\"hdd0\"} 10\n"));
}

static void test_families_and_labels(void)
{
	struct out o = open_out(false);

	family(&o, "c", "counter", "A counter.");
	counter(&o, "c", 7, "disk", "a\"b\\c", "export", "", NULL);
	fclose(o.f);
	CU_ASSERT_STRING_EQUAL(text, "# HELP c_total A counter.\n# TYPE c_total counter\n"
			       "c_total{disk=\"a\\\"b\\\\c\"} 7\n");
	o = open_out(true);
	family(&o, "c", "counter", "A counter.");
	sample(&o, "g", 0.25, NULL);
	fclose(o.f);
	CU_ASSERT_STRING_EQUAL(text, "# HELP c A counter.\n# TYPE c counter\ng 0.25\n");
	free(text);
	text = NULL;
}

int main(void)
{
	CU_pSuite s = cwtest_suite("metrics exposition", NULL, NULL);

	cwtest_add(s, "the histogram as cumulative le buckets", test_histogram);
	cwtest_add(s, "families, _total and labels", test_families_and_labels);
	return cwtest_run();
}
