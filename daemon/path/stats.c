/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <inttypes.h>
#include <math.h>

#include "common/util.h"
#include "daemon/log.h"
#include "daemon/path/stats.h"

void cwd_stats_hist_add(atomic_uint_fast64_t hist[CWD_STATS_HIST_BUCKETS], int64_t ns)
{
	cwd_stats_add(&hist[cw_hist_index(ns > 0 ? (uint64_t)ns : 0)], 1);
}

int64_t cwd_stats_hist_quantile(const atomic_uint_fast64_t hist[CWD_STATS_HIST_BUCKETS], double q)
{
	uint64_t h[CWD_STATS_HIST_BUCKETS];

	for (size_t b = 0; b < CWD_STATS_HIST_BUCKETS; b++)
		h[b] = cwd_stats_get(&hist[b]);
	return (int64_t)cw_hist_quantile(h, q);
}

void cwd_stats_alone_add(struct cwd_stats *c, int64_t svc_ns, int64_t c_ns)
{
	double b = c_ns > 0 ? (log2((double)CW_MAX(svc_ns, (int64_t)1) / (double)c_ns) +
			       CWD_STATS_RATIO_OCTAVES / 2) * 8 : CWD_STATS_RATIO_BUCKETS;
	/* Bucket k holds ratios up to its upper edge, inclusive (the edge
	 * cwd_stats_ratio_quantile reports): a request that took exactly its
	 * C, as an emulated SSD's write does, shows 1.00 rather than the
	 * next edge up, 1.09. */
	unsigned k = b <= 1 ? 0 : b >= CWD_STATS_RATIO_BUCKETS ? CWD_STATS_RATIO_BUCKETS - 1 :
		     (unsigned)ceil(b) - 1;

	cwd_stats_add(&c->alone, 1);
	cwd_stats_add(&c->over_c_ratio[k], 1);
	if (svc_ns > c_ns)
		cwd_stats_add(&c->over_c, 1);
}

double cwd_stats_ratio_quantile(const uint64_t hist[CWD_STATS_RATIO_BUCKETS], double q)
{
	uint64_t total = 0, seen = 0;
	unsigned b;

	for (b = 0; b < CWD_STATS_RATIO_BUCKETS; b++)
		total += hist[b];
	if (!total)
		return 0;
	for (b = 0; b < CWD_STATS_RATIO_BUCKETS - 1; b++) {
		seen += hist[b];
		if ((double)seen >= q * (double)total)
			break;
	}
	return exp2((double)(b + 1) / 8 - CWD_STATS_RATIO_OCTAVES / 2);
}

void cwd_stats_queue_change(struct cwd_stats *c, int delta)
{
	uint64_t now, max;

	if (delta < 0) {
		atomic_fetch_sub_explicit(&c->queued, (uint64_t)-delta, memory_order_relaxed);
		return;
	}
	now = atomic_fetch_add_explicit(&c->queued, (uint64_t)delta, memory_order_relaxed) +
	      (uint64_t)delta;
	max = cwd_stats_get(&c->queued_max);
	while (now > max &&
	       !atomic_compare_exchange_weak_explicit(&c->queued_max, &max, now,
						      memory_order_relaxed, memory_order_relaxed))
		;
}

void cwd_stats_log(const char *what, const struct cwd_stats *c)
{
	cwd_log(LOG_INFO,
		"stats %s: requests=%" PRIu64 " read_bytes=%" PRIu64 " write_bytes=%" PRIu64
		" flushes=%" PRIu64 " errors=%" PRIu64 " rt_done=%" PRIu64 " rt_missed=%" PRIu64
		" be_done=%" PRIu64 " slack_used_us=%" PRIu64 " queued=%" PRIu64
		" queued_max=%" PRIu64 " be_p50_us<=%" PRId64 " be_p99_us<=%" PRId64
		" misses_model=%" PRIu64 " misses_overrun=%" PRIu64 " misses_cpu=%" PRIu64
		" misses_delivery=%" PRIu64 " misses_sched=%" PRIu64 " misses_emulator=%" PRIu64
		" be_overruns=%" PRIu64,
		what, cwd_stats_get(&c->requests), cwd_stats_get(&c->read_bytes), cwd_stats_get(&c->write_bytes),
		cwd_stats_get(&c->flushes), cwd_stats_get(&c->errors), cwd_stats_get(&c->rt_done),
		cwd_stats_get(&c->rt_missed), cwd_stats_get(&c->be_done), cwd_stats_get(&c->slack_used_ns) / 1000,
		cwd_stats_get(&c->queued), cwd_stats_get(&c->queued_max),
		/* rounded up: the log says "<=" */
		(cwd_stats_hist_quantile(c->be_lat, 0.5) + 999) / 1000,
		(cwd_stats_hist_quantile(c->be_lat, 0.99) + 999) / 1000,
		cwd_stats_get(&c->miss[0]), cwd_stats_get(&c->miss[1]), cwd_stats_get(&c->miss[2]),
		cwd_stats_get(&c->miss[3]), cwd_stats_get(&c->miss[4]), cwd_stats_get(&c->miss[5]),
		cwd_stats_get(&c->be_overruns));
}
