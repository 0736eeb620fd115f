/*
 * Description: one meaning per suffix.  Sizes: K/M/G/T and KiB... are
 * powers of 1024, KB/MB... powers of 1000, a bare number is bytes.  Rates:
 * a size per second ("8M" = 8 MiB/s, "8MB/s" = 8000000) or bits per
 * second ("8Mbit/s" = 1000000).  Durations in any unit, a bare number in
 * the caller's.  Byte ranges as START:END or START+LENGTH.  Fractions of
 * a byte or nanosecond, junk and overflow are refused without touching
 * the result; exact values format and parse back to themselves.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "clockwise/units.h"
#include "cwtest.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void test_sizes(void)
{
	static const struct {
		const char *s;
		uint64_t v;
	} ok[] = {
		{ "0", 0 }, { "4096", 4096 }, { "64K", 65536 }, { "64k", 65536 },
		{ "64KiB", 65536 }, { "64KB", 64000 }, { "64kB", 64000 }, { "1M", 1 << 20 },
		{ "1MiB", 1 << 20 }, { "1MB", 1000000 }, { "1.5G", UINT64_C(3) << 29 },
		{ "1.5GB", 1500000000 }, { "2T", UINT64_C(2) << 40 },
		{ "2TB", UINT64_C(2000000000000) }, { "2TiB", UINT64_C(2) << 40 },
		{ "512B", 512 }, { "0.5K", 512 }, { "0.001KB", 1 },
	};
	static const char *const bad[] = { "", "K", "1.", ".5", "1X", "1KK", "-1", "1 K",
					   "0.1K", "1.5", "1e3", "1Kib", "1iB", "1Kb", "1b",
					   "1KiB/s", "1M/s", "1Mbit", "1KBB", "0x10" };
	uint64_t v;

	for (size_t i = 0; i < N(ok); i++) {
		v = 12345;
		CU_ASSERT_EQUAL_FATAL(cw_units_parse_size(ok[i].s, &v), 0);
		CU_ASSERT_EQUAL(v, ok[i].v);
	}
	for (size_t i = 0; i < N(bad); i++) {
		v = 777;
		CU_ASSERT_EQUAL(cw_units_parse_size(bad[i], &v), -EINVAL);
		CU_ASSERT_EQUAL(v, 777);	/* untouched on error */
	}
	CU_ASSERT_EQUAL(cw_units_parse_size("9000000T", &v), -ERANGE);
	CU_ASSERT_EQUAL(cw_units_parse_size("9223372036854775808", &v), -ERANGE);
	CU_ASSERT_EQUAL(cw_units_parse_size("1234567890123456789", &v), -ERANGE);
	CU_ASSERT_EQUAL(cw_units_parse_size("8388608T", &v), -ERANGE);	/* 2^63 */
	CU_ASSERT_EQUAL(cw_units_parse_size("8388607.999999T", &v), -EINVAL);
	CU_ASSERT_EQUAL(cw_units_parse_size("8388607T", &v), 0);
	CU_ASSERT_EQUAL(v, UINT64_C(8388607) << 40);
	CU_ASSERT_EQUAL(cw_units_parse_size(NULL, &v), -EINVAL);
	CU_ASSERT_EQUAL(cw_units_parse_size("1", NULL), -EINVAL);
}

static void test_rates(void)
{
	static const struct {
		const char *s;
		uint64_t v;
	} ok[] = {
		/* a size per second: the size's own meaning */
		{ "8M", 8 << 20 }, { "8M/s", 8 << 20 }, { "8MiB/s", 8 << 20 }, { "8MiB", 8 << 20 },
		{ "8MB/s", 8000000 }, { "8MB", 8000000 }, { "817KB/s", 817000 },
		{ "817kB/s", 817000 }, { "1.5MB/s", 1500000 }, { "64K", 65536 },
		{ "1000000", 1000000 }, { "100", 100 }, { "100/s", 100 }, { "100B/s", 100 },
		{ "1GB/s", 1000000000 }, { "1G", 1 << 30 },
		/* bits per second: decimal prefixes, binary with i */
		{ "8Mbit/s", 1000000 }, { "8Mbit", 1000000 }, { "8Mbps", 1000000 },
		{ "8Mbits/s", 1000000 }, { "1.5Gbit", 187500000 }, { "64bit/s", 8 },
		{ "8kbit/s", 1000 }, { "8Kbit/s", 1000 }, { "8Kibit/s", 1024 },
	};
	static const char *const bad[] = { "", "0", "0MB/s", "0bit/s", "1bit", "8Mbit/h",
					   "MB/s", "1.5", "8 Mbit", "x", "8Mbyte", "8Mb",
					   "8Mb/s", "25MBps", "8MB/h", "8/", "8Mi", "8MiBit/s" };
	uint64_t v;

	for (size_t i = 0; i < N(ok); i++) {
		v = 0;
		CU_ASSERT_EQUAL_FATAL(cw_units_parse_rate(ok[i].s, &v), 0);
		CU_ASSERT_EQUAL(v, ok[i].v);
	}
	for (size_t i = 0; i < N(bad); i++) {
		v = 777;
		CU_ASSERT_EQUAL(cw_units_parse_rate(bad[i], &v), -EINVAL);
		CU_ASSERT_EQUAL(v, 777);
	}
	CU_ASSERT_EQUAL(cw_units_parse_rate("9300000TB/s", &v), -ERANGE);
	/* A rate and a size with the same spelling agree. */
	for (size_t i = 0; i < N(ok); i++) {
		uint64_t size;

		if (cw_units_parse_size(ok[i].s, &size) == 0) {
			CU_ASSERT_EQUAL_FATAL(cw_units_parse_rate(ok[i].s, &v), 0);
			CU_ASSERT_EQUAL(v, size);
		}
	}
}

/* Byte ranges: START:END and START+LENGTH name the same bytes; empty
 * sides are the start and the end; an empty range is -EDOM. */
static void test_ranges(void)
{
	static const struct {
		const char *s;
		uint64_t start, end;
	} ok[] = {
		{ "1G:3G", UINT64_C(1) << 30, UINT64_C(3) << 30 },
		{ "1G+2G", UINT64_C(1) << 30, UINT64_C(3) << 30 },
		{ "0:8M", 0, 8 << 20 }, { "0+8M", 0, 8 << 20 }, { "+8M", 0, 8 << 20 },
		{ ":8M", 0, 8 << 20 }, { "1G:", UINT64_C(1) << 30, 0 }, { ":", 0, 0 },
		{ "1.5K:2KB", 1536, 2000 }, { "4096+1", 4096, 4097 },
		{ "8388606T+1T", UINT64_C(8388606) << 40, UINT64_C(8388607) << 40 },
	};
	static const char *const bad[] = {
		"", "1G", "1G:2G:3G", "1G+2G+1", "1G:+2G", "1G+", "x:1G", "1G:y", "1G-3G",
		"1G :3G", "-1:2", "0.5:1K",
		"1111111111111111111111111111111111111111111111111111111111111111:1",
	};
	static const char *const empty[] = { "1G:1G", "3G:1G", "1G+0", ":0", "0:0" };
	uint64_t a, b;

	for (size_t i = 0; i < N(ok); i++) {
		a = b = 777;
		CU_ASSERT_EQUAL_FATAL(cw_units_parse_range(ok[i].s, &a, &b), 0);
		CU_ASSERT_EQUAL(a, ok[i].start);
		CU_ASSERT_EQUAL(b, ok[i].end);
	}
	for (size_t i = 0; i < N(bad); i++) {
		a = b = 777;
		if (cw_units_parse_range(bad[i], &a, &b) != -EINVAL)
			printf("\n\"%s\" is not refused as a malformed range\n", bad[i]);
		CU_ASSERT_EQUAL(cw_units_parse_range(bad[i], &a, &b), -EINVAL);
		CU_ASSERT(a == 777 && b == 777);
	}
	for (size_t i = 0; i < N(empty); i++) {
		a = b = 777;
		CU_ASSERT_EQUAL(cw_units_parse_range(empty[i], &a, &b), -EDOM);
		CU_ASSERT(a == 777 && b == 777);
	}
	CU_ASSERT_EQUAL(cw_units_parse_range("9T:9000000T", &a, &b), -ERANGE);
	CU_ASSERT_EQUAL(cw_units_parse_range("8388607T+1T", &a, &b), -ERANGE);
	CU_ASSERT_EQUAL(cw_units_parse_range(NULL, &a, &b), -EINVAL);
	CU_ASSERT_EQUAL(cw_units_parse_range("1:2", NULL, &b), -EINVAL);
}

static void test_durations(void)
{
	static const struct {
		const char *s;
		int64_t bare, v;
	} ok[] = {
		{ "90", CW_UNITS_S, INT64_C(90000000000) }, { "1.5s", CW_UNITS_S, 1500000000 },
		{ "250ms", CW_UNITS_S, 250000000 }, { "100us", CW_UNITS_S, 100000 },
		{ "7ns", CW_UNITS_S, 7 }, { "2m", CW_UNITS_S, INT64_C(120000000000) },
		{ "10min", CW_UNITS_S, INT64_C(600000000000) },
		{ "1h", CW_UNITS_S, INT64_C(3600000000000) }, { "0", CW_UNITS_S, 0 },
		/* the caller names the unit of a bare number */
		{ "10", CW_UNITS_MS, 10000000 }, { "2.5", CW_UNITS_MS, 2500000 },
		{ "10s", CW_UNITS_MS, 10000000000 }, { "3", CW_UNITS_US, 3000 },
	};
	static const char *const bad[] = { "", "s", "1.5ns", "1d", "-1", "1 s", "1S", "1sec" };
	int64_t v;

	for (size_t i = 0; i < N(ok); i++) {
		CU_ASSERT_EQUAL_FATAL(cw_units_parse_duration(ok[i].s, ok[i].bare, &v), 0);
		CU_ASSERT_EQUAL(v, ok[i].v);
	}
	for (size_t i = 0; i < N(bad); i++) {
		v = 777;
		CU_ASSERT_EQUAL(cw_units_parse_duration(bad[i], CW_UNITS_S, &v), -EINVAL);
		CU_ASSERT_EQUAL(v, 777);
	}
	CU_ASSERT_EQUAL(cw_units_parse_duration("0.5", CW_UNITS_NS, &v), -EINVAL);
	CU_ASSERT_EQUAL(cw_units_parse_duration("1", 0, &v), -EINVAL);
	CU_ASSERT_EQUAL(cw_units_parse_duration("999999999999h", CW_UNITS_S, &v), -ERANGE);
}

static void test_format(void)
{
	static const struct {
		uint64_t v;
		const char *size, *rate;
	} cases[] = {
		{ 0, "0B", "0B/s" }, { 100, "100B", "100B/s" }, { 1000, "1KB", "1KB/s" },
		{ 1024, "1K", "1KiB/s" }, { 1536, "1.5K", "1.5KiB/s" },
		{ 1 << 20, "1M", "1MiB/s" }, { 8 << 20, "8M", "8MiB/s" },
		{ 1000000, "1MB", "1MB/s" }, { 1500000, "1.5MB", "1.5MB/s" },
		{ 817000, "817KB", "817KB/s" }, { UINT64_C(3) << 29, "1.5G", "1.5GiB/s" },
		{ 2000000000, "2GB", "2GB/s" }, { 1000001, "1000001B", "1MB/s" },
		{ (UINT64_C(2047) << 20), "2047M", "2047MiB/s" },
		{ (UINT64_C(2) << 30) - 1, "2147483647B", "2.1GB/s" },
	};
	char buf[CW_UNITS_BUF];

	for (size_t i = 0; i < N(cases); i++) {
		CU_ASSERT_STRING_EQUAL(cw_units_format_size(cases[i].v, buf), cases[i].size);
		CU_ASSERT_STRING_EQUAL(cw_units_format_rate(cases[i].v, buf), cases[i].rate);
	}
	CU_ASSERT_STRING_EQUAL(cw_units_format_duration(12300000, buf), "12.3ms");
	CU_ASSERT_STRING_EQUAL(cw_units_format_duration(-1500, buf), "-1.5us");
	CU_ASSERT_STRING_EQUAL(cw_units_format_duration(2000000000, buf), "2s");
	/* The largest values still fit the buffer. */
	cw_units_format_size(UINT64_MAX, buf);
	CU_ASSERT(strlen(buf) < CW_UNITS_BUF);
	cw_units_format_rate(UINT64_MAX, buf);
	CU_ASSERT(strlen(buf) < CW_UNITS_BUF);
	cw_units_format_duration(INT64_MIN, buf);
	CU_ASSERT(strlen(buf) < CW_UNITS_BUF);
}

/* Every k/10 * 1000^p and k/10 * 1024^p (p >= 1, k up to 20000) has an
 * exact form, so it formats and parses back to itself, as a size and as a
 * rate. */
static void test_round_trip(void)
{
	static const uint64_t bases[] = { 1000, 1024 };
	char buf[CW_UNITS_BUF];
	unsigned checked = 0;

	for (size_t b = 0; b < N(bases); b++) {
		uint64_t unit = 1;

		for (unsigned p = 1; p <= 4; p++) {
			unit *= bases[b];
			for (uint64_t k = 1; k <= 20000; k++) {
				uint64_t x = k * unit / 10, v = 0;

				if (k * unit % 10)
					continue;
				CU_ASSERT_EQUAL_FATAL(cw_units_parse_size(cw_units_format_size(x, buf),
									  &v), 0);
				CU_ASSERT_EQUAL_FATAL(v, x);
				CU_ASSERT_EQUAL_FATAL(cw_units_parse_rate(cw_units_format_rate(x, buf),
									  &v), 0);
				CU_ASSERT_EQUAL_FATAL(v, x);
				checked++;
			}
		}
	}
	CU_ASSERT_EQUAL(checked, 4 * 20000 + 4 * 20000 / 5);
}

/* Three digits tell close times apart; a floored rate prints exactly,
 * parses back to itself and never exceeds what it floors. */
static void test_fine(void)
{
	char b[CW_UNITS_BUF];
	uint64_t v;

	CU_ASSERT_STRING_EQUAL(cw_units_format_duration3(1822293, b), "1.82ms");
	CU_ASSERT_STRING_EQUAL(cw_units_format_duration3(1572864, b), "1.57ms");
	CU_ASSERT_STRING_EQUAL(cw_units_format_duration3(15700000, b), "15.7ms");
	CU_ASSERT_STRING_EQUAL(cw_units_format_duration3(250000, b), "250us");
	CU_ASSERT_STRING_EQUAL(cw_units_format_duration3(1500000, b), "1.5ms");
	CU_ASSERT_STRING_EQUAL(cw_units_format_duration3(2 * CW_UNITS_S, b), "2s");
	CU_ASSERT_STRING_EQUAL(cw_units_format_duration3(999, b), "999ns");
	CU_ASSERT_STRING_EQUAL(cw_units_format_duration3(-1822293, b), "-1.82ms");
	CU_ASSERT_EQUAL(cw_units_floor_rate(476834567), 476800000);
	CU_ASSERT_EQUAL(cw_units_floor_rate(999), 999);
	CU_ASSERT_EQUAL(cw_units_floor_rate(1999), 1900);
	for (uint64_t x = 1; x < UINT64_C(1) << 50; x = x * 7 + 3) {
		uint64_t f = cw_units_floor_rate(x);

		CU_ASSERT(f <= x);
		CU_ASSERT_FATAL(cw_units_parse_rate(cw_units_format_rate(f, b), &v) == 0);
		CU_ASSERT_EQUAL(v, f);
	}
}

int main(void)
{
	CU_pSuite s = cwtest_suite("units", NULL, NULL);

	cwtest_add(s, "sizes", test_sizes);
	cwtest_add(s, "rates", test_rates);
	cwtest_add(s, "byte ranges", test_ranges);
	cwtest_add(s, "durations", test_durations);
	cwtest_add(s, "format", test_format);
	cwtest_add(s, "round trip", test_round_trip);
	cwtest_add(s, "fine durations, floored rates", test_fine);
	return cwtest_run();
}
