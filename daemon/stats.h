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

/* Latency histogram: bucket i counts latencies in [2^(i-1), 2^i) us
 * (bucket 0: under 1 us; the last bucket: everything longer). */
#define CWD_STATS_HIST_BUCKETS 24
#define CWD_STATS_MISS_CLASSES 5	/* CW_MISS_CLASSES */

struct cwd_stats {
	atomic_uint_fast64_t requests;		/* pieces completed */
	atomic_uint_fast64_t read_bytes, write_bytes;
	atomic_uint_fast64_t flushes;
	atomic_uint_fast64_t errors;		/* pieces that failed */
	atomic_uint_fast64_t rt_done, rt_missed;
	atomic_uint_fast64_t be_done;
	atomic_uint_fast64_t slack_used_ns;	/* BE service run in ΔL slack */
	atomic_uint_fast64_t queued;		/* booked, not yet complete, now */
	atomic_uint_fast64_t queued_max;
	atomic_uint_fast64_t be_lat[CWD_STATS_HIST_BUCKETS];	/* arrival to completion */
	/* RT misses by class (enum cw_sched_miss_class), and the BE
	 * requests that took longer than they were charged */
	atomic_uint_fast64_t miss[CWD_STATS_MISS_CLASSES];
	atomic_uint_fast64_t be_overruns, be_overrun_ns;
};

static inline void cwd_stats_add(atomic_uint_fast64_t *c, uint64_t v)
{
	atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

static inline uint64_t cwd_stats_get(const atomic_uint_fast64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

void cwd_stats_hist_add(atomic_uint_fast64_t hist[CWD_STATS_HIST_BUCKETS], int64_t ns);

/* The latency under which a fraction q (0..1) of the samples lie, as the
 * upper edge of its bucket in ns; 0 without samples. */
int64_t cwd_stats_hist_quantile(const atomic_uint_fast64_t hist[CWD_STATS_HIST_BUCKETS], double q);

/* A booking entered (+1) or left (-1) a queue; tracks the maximum. */
void cwd_stats_queue_change(struct cwd_stats *c, int delta);

/* One log line with every counter, prefixed by what. */
void cwd_stats_log(const char *what, const struct cwd_stats *c);

#endif
