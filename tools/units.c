/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Sizes, rates and durations as people write them (see units.h).  Every
 * value is computed exactly: the number is read as an integer mantissa
 * and a count of decimals, multiplied out in 128 bits and divided at the
 * end, so "1.5G" is exactly 1610612736 and "0.1K" (102.4 bytes) is
 * refused rather than rounded behind the user's back.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "units.h"

/* Reads "digits[.digits]" from *s: the digits as one integer and how many
 * followed the point.  At most 18 significant digits. */
static int read_number(const char **s, uint64_t *ret_mant, unsigned *ret_decimals)
{
	const char *p = *s;
	uint64_t mant = 0;
	unsigned digits = 0, decimals = 0;
	bool point = false;

	for (;; p++) {
		if (*p >= '0' && *p <= '9') {
			if (++digits > 18)
				return -ERANGE;
			mant = mant * 10 + (uint64_t)(*p - '0');
			if (point)
				decimals++;
		} else if (*p == '.' && !point) {
			point = true;
		} else {
			break;
		}
	}
	if (digits == 0 || (point && decimals == 0))
		return -EINVAL;
	*s = p;
	*ret_mant = mant;
	*ret_decimals = decimals;
	return 0;
}

/* mant / 10^decimals * num / den, which must be a whole number that fits
 * in an int64. */
static int scale(uint64_t mant, unsigned decimals, uint64_t num, uint64_t den, uint64_t *ret)
{
	unsigned __int128 v = (unsigned __int128)mant * num;
	unsigned __int128 d = den;

	for (unsigned i = 0; i < decimals; i++)
		d *= 10;
	if (v % d)
		return -EINVAL;
	v /= d;
	if (v > INT64_MAX)
		return -ERANGE;
	*ret = (uint64_t)v;
	return 0;
}

static uint64_t pow_u64(uint64_t base, unsigned n)
{
	uint64_t r = 1;

	while (n--)
		r *= base;
	return r;
}

/* The power of a K/M/G/T prefix letter (case-insensitive), 0 if none. */
static unsigned prefix_power(char c)
{
	switch (c) {
	case 'k': case 'K': return 1;
	case 'm': case 'M': return 2;
	case 'g': case 'G': return 3;
	case 't': case 'T': return 4;
	default: return 0;
	}
}

int cw_units_parse_size(const char *s, uint64_t *ret_bytes)
{
	uint64_t mant, v;
	unsigned dec, power;
	int r;

	if (!s || !ret_bytes)
		return -EINVAL;
	r = read_number(&s, &mant, &dec);
	if (r < 0)
		return r;
	power = prefix_power(*s);
	if (power)
		s++;
	/* "K", "KB", "KiB", "B" or nothing */
	if (power && *s == 'i' && (s[1] == 'B' || s[1] == 'b'))
		s += 2;
	else if (*s == 'B' || *s == 'b')
		s++;
	if (*s)
		return -EINVAL;
	r = scale(mant, dec, pow_u64(1024, power), 1, &v);
	if (r < 0)
		return r;
	*ret_bytes = v;
	return 0;
}

int cw_units_parse_rate(const char *s, uint64_t *ret_bytes_per_s)
{
	static const char *const bits[] = { "b", "b/s", "bps", "bit", "bit/s", "bits", "bits/s" };
	static const char *const bytes[] = { "", "B", "B/s", "Bps", "/s" };
	uint64_t mant, v, base = 1000;
	unsigned dec, power;
	bool is_bits = false, known = false;
	int r;

	if (!s || !ret_bytes_per_s)
		return -EINVAL;
	r = read_number(&s, &mant, &dec);
	if (r < 0)
		return r;
	power = prefix_power(*s);
	if (power) {
		s++;
		if (*s == 'i') {
			base = 1024;
			s++;
		}
	}
	for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]) && !known; i++)
		known = is_bits = strcmp(s, bits[i]) == 0;
	for (size_t i = 0; i < sizeof(bytes) / sizeof(bytes[0]) && !known; i++)
		known = strcmp(s, bytes[i]) == 0;
	if (!known)
		return -EINVAL;
	r = scale(mant, dec, pow_u64(base, power), is_bits ? 8 : 1, &v);
	if (r < 0)
		return r;
	if (v == 0)
		return -EINVAL;
	*ret_bytes_per_s = v;
	return 0;
}

int cw_units_parse_duration(const char *s, int64_t *ret_ns)
{
	static const struct {
		const char *suffix;
		uint64_t ns;
	} units[] = {
		{ "", 1000000000 }, { "s", 1000000000 }, { "ms", 1000000 }, { "us", 1000 },
		{ "ns", 1 }, { "m", 60000000000 }, { "min", 60000000000 },
		{ "h", 3600000000000 },
	};
	uint64_t mant, v;
	unsigned dec;
	int r;

	if (!s || !ret_ns)
		return -EINVAL;
	r = read_number(&s, &mant, &dec);
	if (r < 0)
		return r;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(s, units[i].suffix) != 0)
			continue;
		r = scale(mant, dec, units[i].ns, 1, &v);
		if (r < 0)
			return r;
		*ret_ns = (int64_t)v;
		return 0;
	}
	return -EINVAL;
}

/* value/unit with one decimal, rounded, the ".0" dropped, then suffix. */
static char *one_decimal(uint64_t value, uint64_t unit, const char *suffix, char *buf,
			 size_t len)
{
	unsigned __int128 tenths = ((unsigned __int128)value * 10 + unit / 2) / unit;
	uint64_t whole = (uint64_t)(tenths / 10);
	unsigned frac = (unsigned)(tenths % 10);

	if (frac)
		snprintf(buf, len, "%" PRIu64 ".%u%s", whole, frac, suffix);
	else
		snprintf(buf, len, "%" PRIu64 "%s", whole, suffix);
	return buf;
}

char *cw_units_format_size(uint64_t bytes, char buf[CW_UNITS_BUF])
{
	static const char *const sfx[] = { "B", "K", "M", "G", "T" };
	unsigned i = 0;

	while (i + 1 < 5 && bytes >= pow_u64(1024, i + 1))
		i++;
	return one_decimal(bytes, pow_u64(1024, i), sfx[i], buf, CW_UNITS_BUF);
}

char *cw_units_format_rate(uint64_t bytes_per_s, char buf[CW_UNITS_BUF])
{
	static const char *const sfx[] = { "B/s", "KB/s", "MB/s", "GB/s", "TB/s" };
	unsigned i = 0;

	while (i + 1 < 5 && bytes_per_s >= pow_u64(1000, i + 1))
		i++;
	return one_decimal(bytes_per_s, pow_u64(1000, i), sfx[i], buf, CW_UNITS_BUF);
}

char *cw_units_format_duration(int64_t ns, char buf[CW_UNITS_BUF])
{
	uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
	char tmp[CW_UNITS_BUF - 1];

	if (a < 1000)
		snprintf(tmp, sizeof(tmp), "%" PRIu64 "ns", a);
	else if (a < 1000000)
		one_decimal(a, 1000, "us", tmp, sizeof(tmp));
	else if (a < 1000000000)
		one_decimal(a, 1000000, "ms", tmp, sizeof(tmp));
	else
		one_decimal(a, 1000000000, "s", tmp, sizeof(tmp));
	snprintf(buf, CW_UNITS_BUF, "%s%s", ns < 0 ? "-" : "", tmp);
	return buf;
}
