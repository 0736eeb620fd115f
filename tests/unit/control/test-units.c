/*
 * Description: the quantities of cwctl and cwstream: sizes are binary,
 * rates decimal (bits or bytes), durations in any unit; fractions of a
 * byte or nanosecond and garbage are refused; formatting parses back.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "cwtest.h"
#include "units.h"

static void test_sizes(void)
{
	static const struct {
		const char *s;
		uint64_t v;
	} ok[] = {
		{ "0", 0 }, { "4096", 4096 }, { "64K", 65536 }, { "64k", 65536 },
		{ "64KiB", 65536 }, { "64KB", 65536 }, { "1M", 1 << 20 },
		{ "1.5G", UINT64_C(3) << 29 }, { "2T", UINT64_C(2) << 40 }, { "512B", 512 },
		{ "0.5K", 512 },
	};
	static const char *const bad[] = { "", "K", "1.", ".5", "1X", "1KK", "-1", "1 K",
					   "0.1K", "1.5", "1e3", "1Kib?", "1iB" };
	uint64_t v;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		v = 12345;
		CU_ASSERT_EQUAL_FATAL(cw_units_parse_size(ok[i].s, &v), 0);
		CU_ASSERT_EQUAL(v, ok[i].v);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 777;
		CU_ASSERT_EQUAL(cw_units_parse_size(bad[i], &v), -EINVAL);
		CU_ASSERT_EQUAL(v, 777);	/* untouched on error */
	}
	CU_ASSERT_EQUAL(cw_units_parse_size("9000000T", &v), -ERANGE);
	CU_ASSERT_EQUAL(cw_units_parse_size("1234567890123456789", &v), -ERANGE);
	CU_ASSERT_EQUAL(cw_units_parse_size(NULL, &v), -EINVAL);
}

static void test_rates(void)
{
	static const struct {
		const char *s;
		uint64_t v;
	} ok[] = {
		{ "8Mbit", 1000000 }, { "8Mb/s", 1000000 }, { "8Mbps", 1000000 },
		{ "817KB/s", 817000 }, { "817kB/s", 817000 }, { "1.5MB/s", 1500000 },
		{ "4MiB/s", 4 << 20 }, { "1000000", 1000000 }, { "100", 100 },
		{ "1.5Gbit", 187500000 }, { "25MBps", 25000000 }, { "64bit/s", 8 },
		{ "10M", 10000000 },
	};
	static const char *const bad[] = { "", "0", "0MB/s", "1bit", "8Mbit/h", "MB/s", "1.5",
					   "8 Mbit", "x", "8Mbyte" };
	uint64_t v;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		v = 0;
		CU_ASSERT_EQUAL_FATAL(cw_units_parse_rate(ok[i].s, &v), 0);
		CU_ASSERT_EQUAL(v, ok[i].v);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 777;
		CU_ASSERT_EQUAL(cw_units_parse_rate(bad[i], &v), -EINVAL);
		CU_ASSERT_EQUAL(v, 777);
	}
}

static void test_durations(void)
{
	static const struct {
		const char *s;
		int64_t v;
	} ok[] = {
		{ "90", INT64_C(90000000000) }, { "1.5s", 1500000000 }, { "250ms", 250000000 },
		{ "100us", 100000 }, { "7ns", 7 }, { "2m", INT64_C(120000000000) },
		{ "10min", INT64_C(600000000000) }, { "1h", INT64_C(3600000000000) },
		{ "0", 0 },
	};
	static const char *const bad[] = { "", "s", "1.5ns", "1d", "-1", "1 s" };
	int64_t v;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		CU_ASSERT_EQUAL_FATAL(cw_units_parse_duration(ok[i].s, &v), 0);
		CU_ASSERT_EQUAL(v, ok[i].v);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CU_ASSERT_EQUAL(cw_units_parse_duration(bad[i], &v), -EINVAL);
	CU_ASSERT_EQUAL(cw_units_parse_duration("999999999999h", &v), -ERANGE);
}

static void test_format(void)
{
	char buf[CW_UNITS_BUF];
	uint64_t sizes[] = { 0, 1, 1023, 1024, 65536, 1 << 20, UINT64_C(3) << 29,
			     UINT64_C(5) << 40, 1536 };
	uint64_t v;
	int64_t ns;

	CU_ASSERT_STRING_EQUAL(cw_units_format_size(1 << 20, buf), "1M");
	CU_ASSERT_STRING_EQUAL(cw_units_format_size(UINT64_C(3) << 29, buf), "1.5G");
	CU_ASSERT_STRING_EQUAL(cw_units_format_size(100, buf), "100B");
	CU_ASSERT_STRING_EQUAL(cw_units_format_rate(1500000, buf), "1.5MB/s");
	CU_ASSERT_STRING_EQUAL(cw_units_format_rate(817000, buf), "817KB/s");
	CU_ASSERT_STRING_EQUAL(cw_units_format_duration(12300000, buf), "12.3ms");
	CU_ASSERT_STRING_EQUAL(cw_units_format_duration(-1500, buf), "-1.5us");
	CU_ASSERT_STRING_EQUAL(cw_units_format_duration(2000000000, buf), "2s");
	/* Exact values round-trip. */
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		CU_ASSERT_EQUAL(cw_units_parse_size(cw_units_format_size(sizes[i], buf), &v), 0);
		CU_ASSERT_EQUAL(v, sizes[i]);
	}
	CU_ASSERT_EQUAL(cw_units_parse_rate(cw_units_format_rate(2500000, buf), &v), 0);
	CU_ASSERT_EQUAL(v, 2500000);
	CU_ASSERT_EQUAL(cw_units_parse_duration(cw_units_format_duration(1500000, buf), &ns), 0);
	CU_ASSERT_EQUAL(ns, 1500000);
	/* The largest values still fit the buffer. */
	cw_units_format_size(UINT64_MAX, buf);
	CU_ASSERT(strlen(buf) < CW_UNITS_BUF);
	cw_units_format_duration(INT64_MIN, buf);
	CU_ASSERT(strlen(buf) < CW_UNITS_BUF);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("units", NULL, NULL);

	cwtest_add(s, "sizes", test_sizes);
	cwtest_add(s, "rates", test_rates);
	cwtest_add(s, "durations", test_durations);
	cwtest_add(s, "format", test_format);
	return cwtest_run();
}
