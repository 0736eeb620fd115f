/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * stats.h — per-disk (per lane) and per-reservation counters of the data
 * path.  Each counter is written by dispatcher threads with relaxed atomic
 * adds and read by whoever reports them; nothing here takes a lock.
 */
#ifndef CWD_STATS_H
#define CWD_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include <clockwise/hist.h>

/* Best-effort latencies in ns, in clockwise/hist.h's log-linear buckets
 * (a percentile at most 1.6% above the measured one). */
#define CWD_STATS_HIST_BUCKETS CW_HIST_BUCKETS
#define CWD_STATS_MISS_CLASSES 6	/* CW_MISS_CLASSES */
/* Service time over C: eight buckets per doubling from 2^-10 to 2^10
 * (bucket 0 also takes what is below, the last what is above). */
#define CWD_STATS_RATIO_OCTAVES 20
#define CWD_STATS_RATIO_BUCKETS (8 * CWD_STATS_RATIO_OCTAVES)

struct cwd_stats {
	atomic_uint_fast64_t requests;		/* pieces completed */
	atomic_uint_fast64_t read_bytes, write_bytes;
	atomic_uint_fast64_t flushes;
	atomic_uint_fast64_t errors;		/* pieces that failed */
	atomic_uint_fast64_t rt_done, rt_missed;
	/* A reservation's requests smaller than its block (each is one of
	 * the stream's jobs all the same: see submit.c) */
	atomic_uint_fast64_t rt_short;
	atomic_uint_fast64_t rt_late_max_ns;	/* the latest of them, done or sent */
	atomic_uint_fast64_t be_done;
	atomic_uint_fast64_t slack_used_ns;	/* BE service run in ΔL slack */
	atomic_uint_fast64_t queued;		/* booked, not yet complete, now */
	atomic_uint_fast64_t queued_max;
	atomic_uint_fast64_t be_lat[CWD_STATS_HIST_BUCKETS];	/* arrival to completion */
	atomic_uint_fast64_t be_lat_sum_ns;	/* their sum (a histogram's _sum) */
	/* RT misses by class (enum cw_sched_miss_class), and the BE
	 * requests that took longer than they were charged */
	atomic_uint_fast64_t miss[CWD_STATS_MISS_CLASSES];
	atomic_uint_fast64_t be_overruns, be_overrun_ns;
	/* Reads and writes the lane served with nothing else in flight (the
	 * single server admission assumes), their service time against the
	 * model's C for their size, and those that took longer than C. */
	atomic_uint_fast64_t alone, over_c;
	atomic_uint_fast64_t over_c_ratio[CWD_STATS_RATIO_BUCKETS];
	/* The dispatcher's CPU time starting real-time requests (a memory
	 * disk's copy is done inside the start): the host's watch. */
	atomic_uint_fast64_t rt_cpu_ns;
};

static inline void cwd_stats_add(atomic_uint_fast64_t *c, uint64_t v)
{
	atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

/* *c = max(*c, v). */
static inline void cwd_stats_max(atomic_uint_fast64_t *c, uint64_t v)
{
	uint64_t old = atomic_load_explicit(c, memory_order_relaxed);

	while (old < v && !atomic_compare_exchange_weak_explicit(c, &old, v, memory_order_relaxed,
								 memory_order_relaxed))
		;
}

static inline uint64_t cwd_stats_get(const atomic_uint_fast64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

void cwd_stats_hist_add(atomic_uint_fast64_t hist[CWD_STATS_HIST_BUCKETS], int64_t ns);

/* The latency under which a fraction q (0..1) of the samples lie, in ns:
 * the largest value of its bucket, never below the measured percentile
 * and at most 1.6% above it (cw_hist_quantile); 0 without samples. */
int64_t cwd_stats_hist_quantile(const atomic_uint_fast64_t hist[CWD_STATS_HIST_BUCKETS], double q);

/* One request served alone took svc_ns where the model's C is c_ns. */
void cwd_stats_alone_add(struct cwd_stats *c, int64_t svc_ns, int64_t c_ns);

/* The service time over C under which a fraction q of the requests
 * served alone lie (the upper edge of its bucket, at most 9% above it);
 * 0 without samples.  hist is summed over lanes by the caller. */
double cwd_stats_ratio_quantile(const uint64_t hist[CWD_STATS_RATIO_BUCKETS], double q);

/* A booking entered (+1) or left (-1) a queue; tracks the maximum. */
void cwd_stats_queue_change(struct cwd_stats *c, int delta);

/* One log line with every counter, prefixed by what. */
void cwd_stats_log(const char *what, const struct cwd_stats *c);

#endif
