/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * hist.h — latency histograms whose percentiles are measurements, not
 * bucket edges.
 *
 * Log-linear buckets, as HdrHistogram keeps them: below 2^(CW_HIST_SUB_BITS
 * + 1) one bucket per value; above, every power of two is cut into
 * 2^CW_HIST_SUB_BITS equal buckets.  A bucket is at most 1/64 of its lower
 * edge wide, so a percentile reported as its bucket's upper edge is never
 * below the true one and at most 1.6% above it.  Values from 0 to 2^40
 * (in whatever unit the caller counts, nanoseconds for latencies: about
 * 18 minutes); larger ones go to the last bucket, reported as 2^40.
 *
 * The counts are the caller's array of CW_HIST_BUCKETS counters, so that
 * a data path can keep them as relaxed atomics (cw_hist_index gives the
 * bucket to add 1 to) and a reader sums copies of them.  Nothing here
 * allocates or locks.
 */
#ifndef CLOCKWISE_HIST_H
#define CLOCKWISE_HIST_H

#include <stddef.h>
#include <stdint.h>

#define CW_HIST_SUB_BITS 6
#define CW_HIST_SUB (1u << CW_HIST_SUB_BITS)
#define CW_HIST_MAX_BITS 40
/* (MAX_BITS - SUB_BITS + 1) ranges of SUB buckets, and the overflow */
#define CW_HIST_BUCKETS ((CW_HIST_MAX_BITS - CW_HIST_SUB_BITS + 1) * CW_HIST_SUB + 1)
#define CW_HIST_MAX (UINT64_C(1) << CW_HIST_MAX_BITS)

/* The bucket a value falls in. */
size_t cw_hist_index(uint64_t v);

/* The values bucket i holds: [lower, upper). */
uint64_t cw_hist_lower(size_t i);
uint64_t cw_hist_upper(size_t i);

/* The number of samples in counts. */
uint64_t cw_hist_total(const uint64_t counts[CW_HIST_BUCKETS]);

/* The value under which a fraction q (0..1) of the samples lie, as the
 * upper edge of its bucket, less one (the largest value the bucket
 * holds); 0 without samples. */
uint64_t cw_hist_quantile(const uint64_t counts[CW_HIST_BUCKETS], double q);

/* How many samples lie at or below le (le rounded down to a bucket
 * edge: the cumulative count of an exposition's bucket "le"). */
uint64_t cw_hist_count_le(const uint64_t counts[CW_HIST_BUCKETS], uint64_t le);

#endif
