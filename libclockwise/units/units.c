/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Sizes, rates and durations as people write them (the grammar is in
 * clockwise/units.h).  Every value is computed exactly: the number is read
 * as an integer mantissa and a count of decimals, multiplied out in 128
 * bits and divided at the end, so "1.5G" is exactly 1610612736 and "0.1K"
 * (102.4 bytes) is refused rather than rounded behind the user's back.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "clockwise/units.h"
#include "common/util.h"

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

/* The power of a K/M/G/T prefix letter (either case), 0 if none. */
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

/* A size suffix at *s ("", "B", "K", "KiB", "KB", ...): the bytes it
 * multiplies by; *s moves past it. */
static uint64_t size_suffix(const char **s)
{
	const char *p = *s;
	unsigned power = prefix_power(*p);
	uint64_t mult = 1;

	if (power) {
		p++;
		mult = pow_u64(1024, power);
		if (p[0] == 'i' && p[1] == 'B')
			p += 2;
		else if (p[0] == 'B') {
			mult = pow_u64(1000, power);
			p++;
		}
	} else if (*p == 'B') {
		p++;
	}
	*s = p;
	return mult;
}

int cw_units_parse_size(const char *s, uint64_t *ret_bytes)
{
	uint64_t mant, mult, v;
	unsigned dec;
	int r;

	if (!s || !ret_bytes)
		return -EINVAL;
	r = read_number(&s, &mant, &dec);
	if (r < 0)
		return r;
	mult = size_suffix(&s);
	if (*s)
		return -EINVAL;
	r = scale(mant, dec, mult, 1, &v);
	if (r < 0)
		return r;
	*ret_bytes = v;
	return 0;
}

/* "[prefix[i]]bit[s][/s]" or "[prefix[i]]bps": the bits per second one
 * unit stands for, 0 if s is not a bit rate suffix. */
static uint64_t bit_suffix(const char *s)
{
	static const char *const names[] = { "bit", "bit/s", "bits", "bits/s", "bps" };
	unsigned power = prefix_power(*s);
	uint64_t base = 1000;

	if (power) {
		s++;
		if (*s == 'i') {
			base = 1024;
			s++;
		}
	}
	for (size_t i = 0; i < CW_ARRAY_SIZE(names); i++)
		if (strcmp(s, names[i]) == 0)
			return pow_u64(base, power);
	return 0;
}

int cw_units_parse_rate(const char *s, uint64_t *ret_bytes_per_s)
{
	uint64_t mant, v, bits, mult;
	unsigned dec;
	int r;

	if (!s || !ret_bytes_per_s)
		return -EINVAL;
	r = read_number(&s, &mant, &dec);
	if (r < 0)
		return r;
	bits = bit_suffix(s);
	if (bits) {
		r = scale(mant, dec, bits, 8, &v);
	} else {
		/* a size, per second */
		mult = size_suffix(&s);
		if (strcmp(s, "") != 0 && strcmp(s, "/s") != 0)
			return -EINVAL;
		r = scale(mant, dec, mult, 1, &v);
	}
	if (r < 0)
		return r;
	if (v == 0)
		return -EINVAL;
	*ret_bytes_per_s = v;
	return 0;
}

int cw_units_parse_iorate(const char *s, uint64_t *ret, bool *ret_iops)
{
	uint64_t mant, v;
	unsigned dec;
	const char *p = s;
	int r;

	if (!s || !ret || !ret_iops)
		return -EINVAL;
	r = read_number(&p, &mant, &dec);
	if (r < 0)
		return r;
	if (strcasecmp(p, "iops") == 0) {
		r = scale(mant, dec, 1, 1, &v);
		if (r < 0)
			return r;
		if (v == 0)
			return -EINVAL;
		*ret = v;
		*ret_iops = true;
		return 0;
	}
	r = cw_units_parse_rate(s, ret);
	if (r == 0)
		*ret_iops = false;
	return r;
}

int cw_units_parse_duration(const char *s, int64_t bare_ns, int64_t *ret_ns)
{
	static const struct {
		const char *suffix;
		uint64_t ns;
	} units[] = {
		{ "s", 1000000000 }, { "ms", 1000000 }, { "us", 1000 }, { "ns", 1 },
		{ "m", 60000000000 }, { "min", 60000000000 }, { "h", 3600000000000 },
	};
	uint64_t mant, v, unit = 0;
	unsigned dec;
	int r;

	if (!s || !ret_ns || bare_ns <= 0)
		return -EINVAL;
	r = read_number(&s, &mant, &dec);
	if (r < 0)
		return r;
	if (!*s)
		unit = (uint64_t)bare_ns;
	for (size_t i = 0; i < CW_ARRAY_SIZE(units) && !unit; i++)
		if (strcmp(s, units[i].suffix) == 0)
			unit = units[i].ns;
	if (!unit)
		return -EINVAL;
	r = scale(mant, dec, unit, 1, &v);
	if (r < 0)
		return r;
	*ret_ns = (int64_t)v;
	return 0;
}

/* One side of a range, n bytes of text: 0 when empty. */
static int range_side(const char *s, size_t n, uint64_t *ret)
{
	char buf[64];

	*ret = 0;
	if (n == 0)
		return 0;
	if (n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return cw_units_parse_size(buf, ret);
}

int cw_units_parse_range(const char *s, uint64_t *ret_start, uint64_t *ret_end)
{
	const char *sep;
	uint64_t a, b;
	int r;

	if (!s || !ret_start || !ret_end)
		return -EINVAL;
	sep = strpbrk(s, ":+");
	if (!sep || strpbrk(sep + 1, ":+"))
		return -EINVAL;
	r = range_side(s, (size_t)(sep - s), &a);
	if (r == 0)
		r = range_side(sep + 1, strlen(sep + 1), &b);
	if (r < 0)
		return r;
	if (*sep == '+') {
		if (!sep[1])
			return -EINVAL;	/* START+ says no length */
		if (b == 0)
			return -EDOM;
		if (b > (uint64_t)INT64_MAX - a)
			return -ERANGE;
		b += a;
	} else if (sep[1] && b <= a) {
		return -EDOM;
	}
	*ret_start = a;
	*ret_end = b;
	return 0;
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

/* The units of one family: base 1024 or 1000, the suffix per power. */
struct family {
	uint64_t base;
	const char *sfx[5];
};

/* The largest power whose unit value reaches, 0 for none. */
static unsigned top_power(const struct family *f, uint64_t value)
{
	unsigned i = 0;

	while (i < 4 && value >= pow_u64(f->base, i + 1))
		i++;
	return i;
}

/* The value in its family exactly with at most one decimal, in the largest
 * unit that can; false if none above bytes can (and value needs one). */
static bool exact(const struct family *f, uint64_t value, char *buf, size_t len)
{
	for (unsigned i = top_power(f, value); i > 0; i--) {
		uint64_t unit = pow_u64(f->base, i);

		if (((unsigned __int128)value * 10) % unit == 0) {
			one_decimal(value, unit, f->sfx[i], buf, len);
			return true;
		}
	}
	if (top_power(f, value) > 0)
		return false;
	one_decimal(value, 1, f->sfx[0], buf, len);
	return true;
}

/* The shorter exact form of the two families (the first on a tie), or the
 * first family's rounded to one decimal. */
static char *format(const struct family *first, const struct family *second, uint64_t value,
		    char buf[CW_UNITS_BUF])
{
	char a[CW_UNITS_BUF], b[CW_UNITS_BUF];
	bool ea = exact(first, value, a, sizeof(a));
	bool eb = exact(second, value, b, sizeof(b));

	if (ea && (!eb || strlen(a) <= strlen(b)))
		return strcpy(buf, a);
	if (eb)
		return strcpy(buf, b);
	return one_decimal(value, pow_u64(first->base, top_power(first, value)),
			   first->sfx[top_power(first, value)], buf, CW_UNITS_BUF);
}

char *cw_units_format_size(uint64_t bytes, char buf[CW_UNITS_BUF])
{
	static const struct family bin = { 1024, { "B", "K", "M", "G", "T" } };
	static const struct family dec = { 1000, { "B", "KB", "MB", "GB", "TB" } };
	char a[CW_UNITS_BUF];

	/* A size is typed back (a partition's, a range's end): one that no
	 * unit shows exactly prints in bytes, never rounded (2G - 1 byte
	 * is not "2G"). */
	if (!exact(&bin, bytes, a, sizeof(a)) && !exact(&dec, bytes, a, sizeof(a))) {
		snprintf(buf, CW_UNITS_BUF, "%" PRIu64 "B", bytes);
		return buf;
	}
	return format(&bin, &dec, bytes, buf);
}

char *cw_units_format_rate(uint64_t bytes_per_s, char buf[CW_UNITS_BUF])
{
	static const struct family dec = { 1000, { "B/s", "KB/s", "MB/s", "GB/s", "TB/s" } };
	static const struct family bin = { 1024, { "B/s", "KiB/s", "MiB/s", "GiB/s", "TiB/s" } };

	return format(&dec, &bin, bytes_per_s, buf);
}

char *cw_units_format_iorate(uint64_t per_s, bool iops, char buf[CW_UNITS_BUF])
{
	if (!iops)
		return cw_units_format_rate(per_s, buf);
	snprintf(buf, CW_UNITS_BUF, "%" PRIu64 "iops", per_s);
	return buf;
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

char *cw_units_format_duration3(int64_t ns, char buf[CW_UNITS_BUF])
{
	static const struct {
		uint64_t unit;
		const char *sfx;
	} u[] = { { 1000000000, "s" }, { 1000000, "ms" }, { 1000, "us" } };
	uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
	const char *sign = ns < 0 ? "-" : "";

	for (size_t i = 0; i < CW_ARRAY_SIZE(u); i++) {
		uint64_t scale, hundredths, whole, frac;
		unsigned decimals;

		if (a < u[i].unit)
			continue;
		/* As many decimals as three digits leave: 1.82, 15.7, 250. */
		decimals = a < 10 * u[i].unit ? 2 : a < 100 * u[i].unit ? 1 : 0;
		scale = decimals == 2 ? 100 : decimals == 1 ? 10 : 1;
		hundredths = (uint64_t)(((unsigned __int128)a * scale + u[i].unit / 2) / u[i].unit);
		whole = hundredths / scale;
		frac = hundredths % scale;
		while (decimals && frac % 10 == 0) {	/* 1.50 -> 1.5, 2.00 -> 2 */
			frac /= 10;
			decimals--;
		}
		if (decimals)	/* frac < 100: two digits at most */
			snprintf(buf, CW_UNITS_BUF, "%s%" PRIu64 ".%0*u%s", sign, whole,
				 (int)decimals, (unsigned)(frac % 100), u[i].sfx);
		else
			snprintf(buf, CW_UNITS_BUF, "%s%" PRIu64 "%s", sign, whole, u[i].sfx);
		return buf;
	}
	snprintf(buf, CW_UNITS_BUF, "%s%" PRIu64 "ns", sign, a);
	return buf;
}

uint64_t cw_units_floor_rate(uint64_t v)
{
	uint64_t unit = 1;

	while (unit < UINT64_C(1000000000000) && v / unit >= 1000)
		unit *= 1000;
	if (unit == 1)
		return v;
	return v / (unit / 10) * (unit / 10);
}
