/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Log-linear latency histograms (clockwise/hist.h).
 *
 * Bucket i < 2*SUB holds the value i alone (the first two ranges are one
 * value wide).  Above, a value v with its highest bit at b (b >= SUB_BITS
 * + 1) is shifted right by s = b - SUB_BITS, leaving a number in [SUB,
 * 2*SUB): its bucket is (s + 1) * SUB + (v >> s) - SUB, and the bucket is
 * 2^s wide from (v >> s) << s.  So each bucket is at most 2^s / (SUB <<
 * s) = 1/SUB of its lower edge wide, and the index grows with v.
 */
#include "config.h"

#include "clockwise/hist.h"

#define LAST (CW_HIST_BUCKETS - 1)

size_t cw_hist_index(uint64_t v)
{
	unsigned s;

	if (v >= CW_HIST_MAX)
		return LAST;
	if (v < 2 * CW_HIST_SUB)
		return (size_t)v;
	s = (unsigned)(63 - __builtin_clzll(v)) - CW_HIST_SUB_BITS;
	return (size_t)(s + 1) * CW_HIST_SUB + (size_t)(v >> s) - CW_HIST_SUB;
}

uint64_t cw_hist_lower(size_t i)
{
	size_t s;

	if (i >= LAST)
		return CW_HIST_MAX;
	if (i < 2 * CW_HIST_SUB)
		return i;
	s = i / CW_HIST_SUB - 1;
	return (uint64_t)(CW_HIST_SUB + i % CW_HIST_SUB) << s;
}

uint64_t cw_hist_upper(size_t i)
{
	if (i >= LAST)
		return CW_HIST_MAX;
	return cw_hist_lower(i) + (i < 2 * CW_HIST_SUB ? 1 : UINT64_C(1) << (i / CW_HIST_SUB - 1));
}

uint64_t cw_hist_total(const uint64_t counts[CW_HIST_BUCKETS])
{
	uint64_t n = 0;

	for (size_t i = 0; i < CW_HIST_BUCKETS; i++)
		n += counts[i];
	return n;
}

uint64_t cw_hist_quantile(const uint64_t counts[CW_HIST_BUCKETS], double q)
{
	uint64_t n = cw_hist_total(counts), want, seen = 0;

	if (n == 0)
		return 0;
	if (q <= 0)
		q = 0;
	if (q >= 1)
		q = 1;
	/* the rank of the sample, 1-based: the smallest with q of them at
	 * or below it */
	want = (uint64_t)(q * (double)n + 0.999999);
	if (want < 1)
		want = 1;
	for (size_t i = 0; i < CW_HIST_BUCKETS; i++) {
		seen += counts[i];
		if (seen >= want)
			return i == LAST ? CW_HIST_MAX : cw_hist_upper(i) - 1;
	}
	return CW_HIST_MAX;
}

uint64_t cw_hist_count_le(const uint64_t counts[CW_HIST_BUCKETS], uint64_t le)
{
	uint64_t n = 0;

	for (size_t i = 0; i < LAST && cw_hist_upper(i) - 1 <= le; i++)
		n += counts[i];
	return n;
}
