/*
 * Benchmark: the cost of one best-effort decision (a cw_sched_next() call
 * with best-effort work queued) on a disk holding 100 streams, under
 * dynamic slack and, in the same process on the same arrivals, under
 * delta-l (the baseline: a comparison with ΔL_r).  The disk is simulated
 * in virtual time: streams with periods of 1 to 4 s and utilization 0.75,
 * best-effort requests of 2 to 12 ms arriving at random (about 15% of the
 * disk), actual times between half and all of the charge, 20 simulated
 * minutes.  Mean and p99 wall time per decision; target: dynamic's mean
 * at most 2 us.
 * Last line: dyn_decide_mean_us=<x> dyn_decide_p99_us=<y>
 *            delta_l_decide_mean_us=<z> delta_l_decide_p99_us=<w> dyn_vs_delta_l=<r>
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <clockwise/admit.h>
#include <clockwise/sched.h>
#include "common/util.h"

#define NSTREAMS 100
#define DURATION_NS (1200 * CW_NS_PER_S)
#define MAXBE 4096

static unsigned rng;

static double urand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	return (double)rng / 4294967296.0;
}

static int64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * CW_NS_PER_S + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

struct result {
	size_t decisions;
	double mean_us, p99_us;
	uint64_t be_done, misses, scans;
	double be_lat_ms;
};

static void run(enum cw_sched_policy p, const struct cw_task *t, const struct cw_admit_result *ar,
		struct result *res)
{
	static struct cw_sched_req rt[NSTREAMS], be[MAXBE];
	static int64_t cost[1 << 20];
	static bool be_used[MAXBE];
	int64_t next_rt[NSTREAMS], now = 0, end = 0, next_be, lat = 0;
	struct cw_sched_opts o;
	struct cw_sched *s;
	struct cw_sched_req *cur = NULL;
	struct cw_sched_stats st;
	size_t nd = 0;

	rng = 7;	/* the same arrivals and actual times for both policies */
	memset(be_used, 0, sizeof(be_used));
	cw_sched_opts_init(&o);
	o.policy = p;
	o.delta_l_ns = ar->delta_l_ns;
	o.idle_be_ns = ar->idle_be_ns;
	if (cw_sched_new(&o, &s) < 0)
		abort();
	for (size_t k = 0; k < NSTREAMS; k++) {
		if (cw_sched_stream_admit(s, k, t[k].period_ns, t[k].service_ns, t[k].deadline_ns) < 0)
			abort();
		next_rt[k] = (int64_t)(urand() * (double)t[k].period_ns);
	}
	next_be = 0;
	while (now < DURATION_NS) {
		struct cw_sched_decision d;
		int64_t next = INT64_MAX;

		if (cur && end <= now) {
			if (cur->cls == CW_SCHED_BE) {
				be_used[cur - be] = false;
				lat += end - cur->arrival_ns;
			}
			cw_sched_complete(s, cur, end, cur->user ? *(int64_t *)cur->user : 0);
			cur = NULL;
		}
		for (size_t k = 0; k < NSTREAMS; k++)
			if (next_rt[k] <= now) {
				rt[k] = (struct cw_sched_req){ .cls = CW_SCHED_RT, .stream = k,
					.arrival_ns = now, .period_ns = t[k].period_ns,
					.service_ns = t[k].service_ns };
				if (cw_sched_enqueue(s, &rt[k], now) < 0)
					abort();
				next_rt[k] = now + t[k].period_ns;
			}
		while (next_be <= now) {
			size_t i = 0;

			while (i < MAXBE && be_used[i])
				i++;
			if (i < MAXBE) {
				be[i] = (struct cw_sched_req){ .cls = CW_SCHED_BE, .arrival_ns = now,
					.service_ns = 2 * CW_NS_PER_MS + (int64_t)(urand() * 10e6) };
				if (cw_sched_enqueue(s, &be[i], now) == 0)
					be_used[i] = true;
			}
			next_be += (int64_t)(urand() * 2 * 47e6);	/* mean 47 ms */
		}
		if (!cur) {
			bool be_queued;
			int64_t t0, t1;

			cw_sched_get_stats(s, &st);
			be_queued = st.be_queued > 0;
			t0 = wall_ns();
			if (cw_sched_next(s, now, &d) < 0)
				abort();
			t1 = wall_ns();
			if (be_queued && nd < CW_ARRAY_SIZE(cost))
				cost[nd++] = t1 - t0;
			if (d.verdict == CW_SCHED_DISPATCH) {
				static int64_t actual[MAXBE + NSTREAMS];
				size_t slot = d.req->cls == CW_SCHED_BE ? (size_t)(d.req - be) :
					      MAXBE + (size_t)(d.req - rt);

				cur = d.req;
				actual[slot] = cur->service_ns / 2 + (int64_t)(urand() * (double)(cur->service_ns / 2));
				cur->user = &actual[slot];
				end = now + actual[slot];
				continue;
			}
			if (d.verdict == CW_SCHED_WAIT)
				next = d.until_ns;
		} else
			next = end;
		for (size_t k = 0; k < NSTREAMS; k++)
			next = CW_MIN(next, next_rt[k]);
		now = CW_MAX(now + 1, CW_MIN(next, next_be));
	}
	cw_sched_get_stats(s, &st);
	qsort(cost, nd, sizeof(cost[0]), cmp_i64);
	{
		double sum = 0;

		for (size_t i = 0; i < nd; i++)
			sum += (double)cost[i];
		res->decisions = nd;
		res->mean_us = nd ? sum / (double)nd / 1e3 : 0;
		res->p99_us = nd ? (double)cost[nd * 99 / 100] / 1e3 : 0;
	}
	res->be_done = st.be_done;
	res->misses = st.rt_missed;
	res->scans = st.dyn_scans;
	res->be_lat_ms = st.be_done ? (double)lat / (double)st.be_done / 1e6 : 0;
	cw_sched_free(s);
}

int main(void)
{
	struct cw_task t[NSTREAMS];
	struct cw_admit_result ar;
	struct result dyn, dl;

	rng = 2026;
	for (;;) {
		for (size_t k = 0; k < NSTREAMS; k++) {
			int64_t p = CW_NS_PER_S + (int64_t)(urand() * 3e9);

			/* D = T (deadline_ns 0): the rest of the task zeroed */
			t[k] = (struct cw_task){ .period_ns = p, .service_ns = p * 3 / 4 / NSTREAMS };
		}
		if (cw_admit_test(t, NSTREAMS, &ar) == 0 && ar.schedulable)
			break;
	}
	printf("100 streams, U = %.3f, delta-L = %.1f ms, idle allowance %.1f ms\n",
	       ar.utilization, (double)ar.delta_l_ns / 1e6, (double)ar.idle_be_ns / 1e6);
	/* twice each, the first to warm caches */
	run(CW_SCHED_DELTA_L, t, &ar, &dl);
	run(CW_SCHED_DYNAMIC, t, &ar, &dyn);
	run(CW_SCHED_DELTA_L, t, &ar, &dl);
	run(CW_SCHED_DYNAMIC, t, &ar, &dyn);
	printf("delta-l: %zu BE decisions, mean %.3f us, p99 %.3f us; %" PRIu64 " BE done, "
	       "mean latency %.1f ms, %" PRIu64 " misses\n", dl.decisions, dl.mean_us, dl.p99_us,
	       dl.be_done, dl.be_lat_ms, dl.misses);
	printf("dynamic: %zu BE decisions, mean %.3f us, p99 %.3f us; %" PRIu64 " BE done, "
	       "mean latency %.1f ms, %" PRIu64 " misses; %" PRIu64 " full scans\n", dyn.decisions,
	       dyn.mean_us, dyn.p99_us, dyn.be_done, dyn.be_lat_ms, dyn.misses, dyn.scans);
	printf("dyn_decide_mean_us=%.3f dyn_decide_p99_us=%.3f delta_l_decide_mean_us=%.3f "
	       "delta_l_decide_p99_us=%.3f dyn_vs_delta_l=%.2f\n", dyn.mean_us, dyn.p99_us,
	       dl.mean_us, dl.p99_us, dl.mean_us > 0 ? dyn.mean_us / dl.mean_us : 0);
	return 0;
}
