/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A discrete-event driver for struct cw_sched in virtual time, shared by
 * the admit and sched tests: RT requests arrive at given times (the
 * scheduler gives them their releases, written back into the jobs), an
 * optional best-effort queue is kept full with requests of random sizes,
 * each dispatched request takes its actual time, and the scheduler's own
 * statistics (misses, least slack) are what the tests assert on.
 */
#ifndef CW_TEST_SIMDRV_H
#define CW_TEST_SIMDRV_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <clockwise/admit.h>
#include <clockwise/sched.h>

struct sim_job {
	int64_t arrival, period, service, actual;
	int64_t dl;		/* D after release; 0: the period */
	uint64_t stream;
	bool same_job;		/* a further piece of the stream's latest job */
	int64_t at;		/* the release the test means (sim_run ignores it) */
	/* set by sim_run */
	int64_t release, deadline;
	size_t seq;		/* position before sorting: equal arrivals keep it */
};

struct sim_be {
	unsigned keep;		/* BE requests kept queued (0: none) */
	int64_t min_ns, max_ns;	/* sizes drawn uniformly from [min, max] */
	int64_t first_ns;	/* > 0: the first BE request has this size */
	unsigned *rng;
};

struct sim_out {
	uint64_t be_done;
	uint64_t be_refused;
	int64_t be_work;
	int64_t end;
	int err;
};

static inline int64_t sim_rand(unsigned *rng, int64_t lo, int64_t hi)
{
	/* xorshift32: reproducible from the seed */
	unsigned x = *rng;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*rng = x;
	return lo + (int64_t)(x % (unsigned)(hi - lo + 1));
}

static inline int64_t sim_gcd(int64_t a, int64_t b)
{
	while (b) {
		int64_t r = a % b;
		a = b;
		b = r;
	}
	return a;
}

/* A random set of 1 to 5 tasks with periods 2..30 whose common multiple
 * is at most 20000 (so brute force over it stays cheap). */
static inline size_t sim_random_set(unsigned *rng, struct cw_task *t, int64_t *ret_h)
{
	for (;;) {
		size_t n = (size_t)sim_rand(rng, 1, 5);
		int64_t h = 1;

		for (size_t k = 0; k < n; k++) {
			int64_t p = sim_rand(rng, 2, 30);

			t[k] = (struct cw_task){ .period_ns = p,
						 .service_ns = sim_rand(rng, 1, (p * 2 / (int64_t)(n + 1) > 1 ? p * 2 / (int64_t)(n + 1) : 1)) };
			h = h / sim_gcd(h, p) * p;
		}
		if (h <= 20000) {
			*ret_h = h;
			return n;
		}
	}
}

/* Jobs for tasks t: kind 0 synchronous at 1 (after a BE request started at
 * 0), kind 1 the largest-C task at 0 and the rest at 1, kind 2 random
 * sporadic with early arrivals and shorter actual times.  A job's at is
 * its release: a request that comes later than a period after the last
 * one is released when it comes, so only one that follows at exactly a
 * period can come early. */
static inline size_t sim_make_jobs(const struct cw_task *t, size_t n, int kind, unsigned *rng,
			struct sim_job *jobs, size_t max, int64_t horizon)
{
	size_t nj = 0, big = 0;

	for (size_t k = 1; k < n; k++)
		if (t[k].service_ns > t[big].service_ns)
			big = k;
	for (size_t k = 0; k < n; k++) {
		int64_t at = kind == 2 ? sim_rand(rng, 0, t[k].period_ns) : (kind == 1 && k == big ? 0 : 1);

		bool on_time = false;	/* released a period after the last */

		while (at < horizon && nj < max) {
			int64_t arrival = at, actual = t[k].service_ns, gap = 0;

			if (kind == 2 && on_time && sim_rand(rng, 0, 2) == 0)
				arrival = at - sim_rand(rng, 0, t[k].period_ns);	/* early */
			if (kind == 2 && sim_rand(rng, 0, 3) == 0)
				actual = sim_rand(rng, 1, t[k].service_ns);
			jobs[nj++] = (struct sim_job){ .arrival = arrival, .at = at,
				.period = t[k].period_ns, .service = t[k].service_ns,
				.actual = actual, .stream = k };
			if (kind == 2 && sim_rand(rng, 0, 1))
				gap = sim_rand(rng, 0, t[k].period_ns);
			at += t[k].period_ns + gap;
			on_time = gap == 0;
		}
	}
	return nj;
}

/* Adds the periodic server to an admitted set t[0..n) (room for n + 1):
 * period twice the longest T, the largest slice that fits; *r becomes
 * the test of the set with it.  False when no slice fits (or an error). */
static inline bool sim_add_server(struct cw_task *t, size_t n, struct cw_admit_result *r,
				  int64_t *ret_slice, int64_t *ret_period)
{
	int64_t period = 2 * t[n - 1].period_ns, slice;

	if (cw_admit_server_fit(t, n, period, 0, &slice) < 0 || slice == 0)
		return false;
	t[n] = (struct cw_task){ .period_ns = period, .service_ns = slice };
	if (cw_admit_test(t, n + 1, r) < 0 || !r->schedulable)
		return false;
	*ret_slice = slice;
	*ret_period = period;
	return true;
}

static int sim_cmp_job(const void *a, const void *b)
{
	const struct sim_job *x = a, *y = b;

	if (x->arrival != y->arrival)
		return (x->arrival > y->arrival) - (x->arrival < y->arrival);
	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Runs jobs (sorted here by arrival, a stream's in the order given) through
 * s from start until every job is done and then stops; with be->keep the
 * BE queue never runs dry. */
static inline void sim_run(struct cw_sched *s, struct sim_job *jobs, size_t n,
			   const struct sim_be *be, int64_t start, struct sim_out *out)
{
	struct cw_sched_req *rt = calloc(n ? n : 1, sizeof(*rt));
	unsigned nbe = be ? be->keep : 0;
	struct cw_sched_req *bq = calloc(nbe ? nbe : 1, sizeof(*bq));
	bool *bq_used = calloc(nbe ? nbe : 1, sizeof(*bq_used));
	struct cw_sched_req *cur = NULL;
	int64_t now = start, cur_end = 0, cur_actual = 0;
	size_t i = 0, done = 0;
	bool first = true;

	memset(out, 0, sizeof(*out));
	for (size_t k = 0; k < n; k++)
		jobs[k].seq = k;
	qsort(jobs, n, sizeof(*jobs), sim_cmp_job);
	for (;;) {
		struct cw_sched_decision d = { .verdict = CW_SCHED_IDLE };
		int64_t next = INT64_MAX;
		int e;

		if (cur && cur_end <= now) {
			out->err = out->err ? out->err : cw_sched_complete(s, cur, cur_end, cur_actual);
			if (cur->cls == CW_SCHED_RT)
				done++;
			else {
				out->be_done++;
				out->be_work += cur_actual;
				bq_used[cur - bq] = false;
			}
			cur = NULL;
		}
		if (done == n)
			break;
		for (; i < n && jobs[i].arrival <= now; i++) {
			rt[i] = (struct cw_sched_req){
				.cls = CW_SCHED_RT, .stream = jobs[i].stream,
				.same_job = jobs[i].same_job, .arrival_ns = jobs[i].arrival,
				.period_ns = jobs[i].period, .service_ns = jobs[i].service,
				.rel_deadline_ns = jobs[i].dl,
				.user = &jobs[i],
			};
			out->err = out->err ? out->err : cw_sched_enqueue(s, &rt[i], now);
			jobs[i].release = rt[i].release_ns;
			jobs[i].deadline = rt[i].deadline_ns;
		}
		for (unsigned k = 0; k < nbe; k++) {
			if (bq_used[k])
				continue;
			bq[k] = (struct cw_sched_req){
				.cls = CW_SCHED_BE, .arrival_ns = now,
				.service_ns = first && be->first_ns > 0 ? be->first_ns :
					      sim_rand(be->rng, be->min_ns, be->max_ns),
			};
			first = false;
			e = cw_sched_enqueue(s, &bq[k], now);
			if (e == -E2BIG)
				out->be_refused++;	/* too big ever to run safely */
			else if (e < 0)
				out->err = out->err ? out->err : e;
			else
				bq_used[k] = true;
		}
		if (!cur) {
			out->err = out->err ? out->err : cw_sched_next(s, now, &d);
			if (d.verdict == CW_SCHED_DISPATCH) {
				cur = d.req;
				cur_actual = cur->cls == CW_SCHED_RT ?
					     ((struct sim_job *)cur->user)->actual : cur->service_ns;
				cur_end = now + cur_actual;
				continue;
			}
			if (d.verdict == CW_SCHED_WAIT)
				next = d.until_ns;
		} else
			next = cur_end;
		if (i < n && jobs[i].arrival < next)
			next = jobs[i].arrival;
		if (next == INT64_MAX || out->err)
			break;
		now = next;
	}
	out->end = now;
	free(rt);
	free(bq);
	free(bq_used);
}

#endif
