/*
 * Description: the per-disk dispatcher — its interface and errors, ΔL_r
 * accounting (charge, refill, refund, overrun), early RT requests as BE,
 * an adversarial simulation (worst-case and random sporadic releases with
 * a BE queue that is never empty) in which delta-l never misses, the
 * periodic BE server when ΔL = 0, and a constructed case where lst misses
 * a deadline and delta-l does not.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <clockwise/admit.h>
#include <clockwise/sched.h>
#include "common/util.h"
#include "cwtest.h"
#include "sched/simdrv.h"

static struct cw_sched *new_sched(enum cw_sched_policy p, int64_t dl, int64_t idle)
{
	struct cw_sched_opts o;
	struct cw_sched *s = NULL;

	cw_sched_opts_init(&o);
	o.policy = p;
	o.delta_l_ns = dl;
	o.idle_be_ns = idle;
	CU_ASSERT_FATAL(cw_sched_new(&o, &s) == 0);
	return s;
}

static struct cw_sched_req rt(uint64_t stream, int64_t arrival, int64_t period, int64_t c)
{
	return (struct cw_sched_req){ .cls = CW_SCHED_RT, .stream = stream, .arrival_ns = arrival,
				      .period_ns = period, .service_ns = c };
}

static struct cw_sched_req be(int64_t arrival, int64_t e)
{
	return (struct cw_sched_req){ .cls = CW_SCHED_BE, .arrival_ns = arrival, .service_ns = e };
}

static struct cw_sched_decision next(struct cw_sched *s, int64_t now)
{
	struct cw_sched_decision d;

	CU_ASSERT_FATAL(cw_sched_next(s, now, &d) == 0);
	return d;
}

static void test_policy_names(void)
{
	enum cw_sched_policy p;

	CU_ASSERT(cw_sched_policy_parse("delta-l", &p) == 0 && p == CW_SCHED_DELTA_L);
	CU_ASSERT(cw_sched_policy_parse("edf", &p) == 0 && p == CW_SCHED_EDF);
	CU_ASSERT(cw_sched_policy_parse("lst", &p) == 0 && p == CW_SCHED_LST);
	CU_ASSERT_EQUAL(cw_sched_policy_parse("fifo", &p), -EINVAL);
	CU_ASSERT_STRING_EQUAL(cw_sched_policy_name(CW_SCHED_DELTA_L), "delta-l");
	CU_ASSERT_EQUAL(cw_sched_policy_name((enum cw_sched_policy)7), NULL);
}

static void test_errors(void)
{
	struct cw_sched_opts o;
	struct cw_sched *s = NULL;
	struct cw_sched_req a = rt(1, 0, 100, 10), b = be(0, 5), bad = rt(1, 0, 0, 10);
	struct cw_sched_req big = be(0, 1000);
	struct cw_sched_decision d;

	cw_sched_opts_init(&o);
	o.delta_l_ns = -1;
	CU_ASSERT_EQUAL(cw_sched_new(&o, &s), -EINVAL);
	cw_sched_opts_init(&o);
	o.server_slice_ns = 10;	/* slice without period */
	CU_ASSERT_EQUAL(cw_sched_new(&o, &s), -EINVAL);
	cw_sched_free(NULL);

	s = new_sched(CW_SCHED_DELTA_L, 20, 50);
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &bad, 0), -EINVAL);
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &big, 0), -E2BIG);	/* > idle_be, no server */
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &a, 0), 0);
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &a, 0), -EEXIST);
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &b, 0), 0);
	CU_ASSERT_EQUAL(cw_sched_cancel(s, &b), 0);
	CU_ASSERT_EQUAL(cw_sched_cancel(s, &b), -ENOENT);
	d = next(s, 0);
	CU_ASSERT_EQUAL(d.verdict, CW_SCHED_DISPATCH);
	CU_ASSERT_PTR_EQUAL(d.req, &a);
	CU_ASSERT_EQUAL(next(s, 1).verdict, CW_SCHED_BUSY);
	CU_ASSERT_EQUAL(cw_sched_complete(s, &b, 10, 10), -EINVAL);
	CU_ASSERT_EQUAL(cw_sched_cancel(s, &a), -ENOENT);	/* in service */
	CU_ASSERT_EQUAL(cw_sched_next(s, 0, &d), -EINVAL);	/* time went back */
	CU_ASSERT_EQUAL(cw_sched_complete(s, &a, 10, 10), 0);
	CU_ASSERT_EQUAL(next(s, 10).verdict, CW_SCHED_IDLE);
	CU_ASSERT_EQUAL(cw_sched_set_slack(s, -5, 0), -EINVAL);
	cw_sched_free(s);
}

/* Runs the stream's first request, arriving at 0, to completion at c. */
static void first_job(struct cw_sched *s, struct cw_sched_req *r0)
{
	struct cw_sched_decision d;

	CU_ASSERT_EQUAL_FATAL(cw_sched_enqueue(s, r0, 0), 0);
	CU_ASSERT_EQUAL(r0->release_ns, 0);
	d = next(s, 0);
	CU_ASSERT_PTR_EQUAL_FATAL(d.req, r0);
	CU_ASSERT_EQUAL(cw_sched_complete(s, r0, r0->service_ns, r0->service_ns), 0);
}

static void test_release_wait_and_early(void)
{
	struct cw_sched *s = new_sched(CW_SCHED_EDF, 0, 1);
	struct cw_sched_req a0 = rt(1, 0, 100, 10), a = rt(1, 10, 100, 10);
	struct cw_sched_req b0 = rt(2, 0, 50, 10), b = rt(2, 10, 50, 10);
	struct cw_sched_decision d;
	struct cw_sched_stats st;

	/* arrived early: release = the previous release + T, deadline =
	 * release + T */
	first_job(s, &a0);
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &a, 10), 0);
	CU_ASSERT_EQUAL(a.release_ns, 100);
	CU_ASSERT_EQUAL(a.deadline_ns, 200);
	/* under EDF an idle disk runs it early, as best-effort work */
	d = next(s, 10);
	CU_ASSERT_EQUAL(d.verdict, CW_SCHED_DISPATCH);
	CU_ASSERT_EQUAL(d.req->via, CW_SCHED_VIA_IDLE);
	CU_ASSERT_EQUAL(cw_sched_complete(s, &a, 20, 10), 0);
	cw_sched_get_stats(s, &st);
	CU_ASSERT_EQUAL(st.rt_early, 1);
	cw_sched_free(s);

	/* under delta-l with ΔL = 0 and idle_be = 5 it may not: wait */
	s = new_sched(CW_SCHED_DELTA_L, 0, 5);
	first_job(s, &b0);
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &b, 10), 0);
	d = next(s, 10);
	CU_ASSERT_EQUAL(d.verdict, CW_SCHED_WAIT);
	CU_ASSERT_EQUAL(d.until_ns, 50);
	d = next(s, 50);
	CU_ASSERT_EQUAL(d.verdict, CW_SCHED_DISPATCH);
	CU_ASSERT_EQUAL(d.req->via, CW_SCHED_VIA_RT);
	CU_ASSERT_EQUAL(cw_sched_complete(s, &b, 65, 15), 0);
	cw_sched_get_stats(s, &st);
	CU_ASSERT_EQUAL(st.min_slack_ns, 100 - 65);
	CU_ASSERT_EQUAL(st.rt_missed, 0);
	cw_sched_free(s);
}

static void test_delta_l_accounting(void)
{
	struct cw_sched *s = new_sched(CW_SCHED_DELTA_L, 10, 30);
	struct cw_sched_req r1 = rt(1, 0, 100, 20), r2 = rt(2, 0, 200, 20);
	struct cw_sched_req b1 = be(0, 4), b2 = be(0, 4), b3 = be(0, 4), b4 = be(0, 25);
	struct cw_sched_decision d;
	struct cw_sched_stats st;
	int64_t now = 0;

	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &r1, 0), 0);
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &r2, 0), 0);
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &b1, 0), 0);
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &b2, 0), 0);
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &b3, 0), 0);
	/* FIFO BE first while it fits in ΔL_r = 10: 4, then 4 */
	d = next(s, now);
	CU_ASSERT_PTR_EQUAL(d.req, &b1);
	CU_ASSERT_EQUAL(d.req->via, CW_SCHED_VIA_SLACK);
	/* b1 took only 3: the difference comes back */
	CU_ASSERT_EQUAL(cw_sched_complete(s, &b1, now += 3, 3), 0);
	cw_sched_get_stats(s, &st);
	CU_ASSERT_EQUAL(st.delta_l_r_ns, 7);
	d = next(s, now);
	CU_ASSERT_PTR_EQUAL(d.req, &b2);
	CU_ASSERT_EQUAL(cw_sched_complete(s, &b2, now += 4, 4), 0);
	/* 3 left < 4: the RT burst in EDF order, even though BE waits */
	d = next(s, now);
	CU_ASSERT_PTR_EQUAL(d.req, &r1);
	/* r1 overruns its C by 2: charged to the slack */
	CU_ASSERT_EQUAL(cw_sched_complete(s, &r1, now += 22, 22), 0);
	cw_sched_get_stats(s, &st);
	CU_ASSERT_EQUAL(st.delta_l_r_ns, 1);
	CU_ASSERT_EQUAL(st.rt_overrun, 1);
	d = next(s, now);
	CU_ASSERT_PTR_EQUAL(d.req, &r2);
	CU_ASSERT_EQUAL(cw_sched_complete(s, &r2, now += 20, 20), 0);
	/* no released RT left: refilled, and the BE queue moves on */
	d = next(s, now);
	CU_ASSERT_PTR_EQUAL(d.req, &b3);
	CU_ASSERT_EQUAL(d.req->via, CW_SCHED_VIA_IDLE);
	cw_sched_get_stats(s, &st);
	CU_ASSERT_EQUAL(st.delta_l_r_ns, 6);
	CU_ASSERT_EQUAL(cw_sched_complete(s, &b3, now += 4, 4), 0);
	/* an idle disk takes a request larger than ΔL but within idle_be,
	 * and then has no slack left until the next refill */
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &b4, now), 0);
	d = next(s, now);
	CU_ASSERT_PTR_EQUAL(d.req, &b4);
	cw_sched_get_stats(s, &st);
	CU_ASSERT_EQUAL(st.delta_l_r_ns, 0);
	CU_ASSERT_EQUAL(cw_sched_complete(s, &b4, now += 25, 25), 0);
	cw_sched_get_stats(s, &st);
	CU_ASSERT_EQUAL(st.be_done, 4);
	CU_ASSERT_EQUAL(st.be_slack, 2);
	CU_ASSERT_EQUAL(st.be_idle, 2);
	CU_ASSERT_EQUAL(st.rt_missed, 0);
	cw_sched_free(s);
}

/* An overrun the remaining slack cannot cover is owed to the next refill:
 * a best-effort request charged 4 that takes 25 leaves ΔL_r = 10 - 25 =
 * -15; the refill after the RT burst starts at 10 - 15 = -5, so no slack
 * request runs beside the next released job; the one after that refill
 * is whole again. */
static void test_overrun_debt_carried(void)
{
	struct cw_sched *s = new_sched(CW_SCHED_DELTA_L, 10, 30);
	struct cw_sched_req r1 = rt(1, 0, 100, 20), r2 = rt(1, 100, 100, 20);
	struct cw_sched_req r3 = rt(1, 200, 100, 20);
	struct cw_sched_req b1 = be(0, 4), b2 = be(100, 4), b3 = be(200, 4);
	struct cw_sched_decision d;
	struct cw_sched_stats st;

	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &r1, 0), 0);
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &b1, 0), 0);
	d = next(s, 0);
	CU_ASSERT_PTR_EQUAL(d.req, &b1);
	CU_ASSERT_EQUAL(cw_sched_complete(s, &b1, 25, 25), 0);
	cw_sched_get_stats(s, &st);
	CU_ASSERT_EQUAL(st.delta_l_r_ns, -15);
	d = next(s, 25);
	CU_ASSERT_PTR_EQUAL(d.req, &r1);
	CU_ASSERT_EQUAL(cw_sched_complete(s, &r1, 45, 20), 0);
	/* Nothing released: the refill, less the debt. */
	d = next(s, 45);
	CU_ASSERT_EQUAL(d.verdict, CW_SCHED_IDLE);
	cw_sched_get_stats(s, &st);
	CU_ASSERT_EQUAL(st.delta_l_r_ns, -5);
	/* The next job is released with a BE request beside it: the job
	 * goes first, the debt is not slack. */
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &r2, 100), 0);
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &b2, 100), 0);
	d = next(s, 100);
	CU_ASSERT_PTR_EQUAL(d.req, &r2);
	CU_ASSERT_EQUAL(cw_sched_complete(s, &r2, 120, 20), 0);
	d = next(s, 120);
	CU_ASSERT_PTR_EQUAL(d.req, &b2);
	CU_ASSERT_EQUAL(cw_sched_complete(s, &b2, 124, 4), 0);
	/* Paid: the next refill is whole, and slack goes first again. */
	d = next(s, 130);
	CU_ASSERT_EQUAL(d.verdict, CW_SCHED_IDLE);
	cw_sched_get_stats(s, &st);
	CU_ASSERT_EQUAL(st.delta_l_r_ns, 10);
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &r3, 200), 0);
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &b3, 200), 0);
	d = next(s, 200);
	CU_ASSERT_PTR_EQUAL(d.req, &b3);
	CU_ASSERT_EQUAL(d.req->via, CW_SCHED_VIA_SLACK);
	cw_sched_get_stats(s, &st);
	CU_ASSERT_EQUAL(st.rt_missed, 0);
	cw_sched_free(s);
}

static void test_edf_be_only_when_nothing_released(void)
{
	struct cw_sched *s = new_sched(CW_SCHED_EDF, 1000, 1000);
	struct cw_sched_req r1 = rt(1, 0, 100, 20), b1 = be(0, 1);
	struct cw_sched_decision d;

	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &b1, 0), 0);
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &r1, 0), 0);
	d = next(s, 0);
	CU_ASSERT_PTR_EQUAL(d.req, &r1);
	CU_ASSERT_EQUAL(cw_sched_complete(s, &r1, 20, 20), 0);
	d = next(s, 20);
	CU_ASSERT_PTR_EQUAL(d.req, &b1);
	cw_sched_free(s);
}

/* ---- adversarial simulation ------------------------------------------- */

struct pattern_stats {
	unsigned sets, runs, be_done, misses;
};

static void run_set(enum cw_sched_policy p, const struct cw_task *t, size_t n,
		    const struct cw_admit_result *r, int64_t slice, int64_t period, unsigned *rng,
		    struct pattern_stats *ps)
{
	static struct sim_job jobs[4096];
	/* every size up to a little more than the largest that may run */
	int64_t be_max = slice > r->idle_be_ns ? slice : r->idle_be_ns;

	for (int kind = 0; kind < 3; kind++) {
		struct cw_sched *s = new_sched(p, r->delta_l_ns, r->idle_be_ns);
		struct sim_be bq = { .keep = 3, .min_ns = 1, .max_ns = be_max + 3,
				     .first_ns = kind == 0 ? be_max : 0, .rng = rng };
		struct cw_sched_stats st;
		struct sim_out out;
		size_t nj = sim_make_jobs(t, n, kind, rng, jobs, CW_ARRAY_SIZE(jobs), 400);

		if (slice)
			CU_ASSERT_FATAL(cw_sched_set_server(s, slice, period) == 0);
		sim_run(s, jobs, nj, &bq, 0, &out);
		cw_sched_get_stats(s, &st);
		CU_ASSERT_EQUAL(out.err, 0);
		CU_ASSERT_EQUAL(st.rt_done, nj);
		for (size_t j = 0; j < nj; j++)
			CU_ASSERT_EQUAL(jobs[j].release, jobs[j].at);
		ps->runs++;
		ps->misses += st.rt_missed > 0;
		ps->be_done += out.be_done;
		if (p == CW_SCHED_DELTA_L && st.rt_missed) {
			printf("\n  miss: kind %d, dL=%ld idle=%ld, tasks:", kind,
			       (long)r->delta_l_ns, (long)r->idle_be_ns);
			for (size_t k = 0; k < n; k++)
				printf(" (%ld,%ld)", (long)t[k].period_ns, (long)t[k].service_ns);
			printf("\n");
		}
		cw_sched_free(s);
	}
}

static void test_adversarial_delta_l(void)
{
	unsigned rng = 4242;
	struct pattern_stats dl = { 0 }, lst = { 0 };

	while (dl.sets < 600) {
		struct cw_task t[5];
		struct cw_admit_result r;
		int64_t h;
		size_t n = sim_random_set(&rng, t, &h);

		CU_ASSERT_FATAL(cw_admit_test(t, n, &r) == 0);
		if (!r.schedulable)
			continue;
		dl.sets++;
		run_set(CW_SCHED_DELTA_L, t, n, &r, 0, 0, &rng, &dl);
		run_set(CW_SCHED_LST, t, n, &r, 0, 0, &rng, &lst);
	}
	printf("\n  delta-l: %u runs, %u with a miss, %u BE done; lst: %u runs with a miss\n",
	       dl.runs, dl.misses, dl.be_done, lst.misses);
	CU_ASSERT_EQUAL(dl.misses, 0);
	CU_ASSERT(dl.be_done > 1000);
}

/* ΔL = 0: only the periodic server lets BE work in, and it is admitted
 * like a stream, so nothing misses. */
static void test_server_when_no_slack(void)
{
	unsigned rng = 99;
	struct pattern_stats ps = { 0 };
	unsigned with_server = 0;

	while (with_server < 150) {
		struct cw_task t[6];
		struct cw_admit_result r0, r;
		int64_t h, slice, period;
		size_t n = sim_random_set(&rng, t, &h);

		CU_ASSERT_FATAL(cw_admit_test(t, n, &r0) == 0);
		if (!r0.schedulable || r0.delta_l_ns != 0)
			continue;
		if (!sim_add_server(t, n, &r, &slice, &period))
			continue;
		with_server++;
		ps.sets++;
		run_set(CW_SCHED_DELTA_L, t, n, &r, slice, period, &rng, &ps);
	}
	CU_ASSERT_EQUAL(ps.misses, 0);
	CU_ASSERT(ps.be_done > 100);
}

/* T = (1000, 600), C = (400, 200): ΔL = 1.  With only A queued at 0, its
 * latest start is 600, so LST starts a 401 BE request; B, released at 1,
 * then runs 401..601 and pushes A to 1001, past its deadline.  delta-l
 * runs the RT burst first and the BE request after it. */
static void test_lst_misses_delta_l_does_not(void)
{
	struct cw_task t[] = { { .period_ns = 1000, .service_ns = 400 },
			       { .period_ns = 600, .service_ns = 200 } };
	struct cw_admit_result r;
	enum cw_sched_policy pol[] = { CW_SCHED_LST, CW_SCHED_DELTA_L };
	uint64_t missed[2];

	CU_ASSERT_FATAL(cw_admit_test(t, 2, &r) == 0);
	CU_ASSERT_FATAL(r.schedulable);
	CU_ASSERT_EQUAL(r.delta_l_ns, 1);
	CU_ASSERT(r.idle_be_ns >= 401);
	for (int k = 0; k < 2; k++) {
		struct cw_sched *s = new_sched(pol[k], r.delta_l_ns, r.idle_be_ns);
		struct sim_job jobs[] = {
			{ .arrival = 0, .period = 1000, .service = 400, .actual = 400, .stream = 0 },
			{ .arrival = 1, .period = 600, .service = 200, .actual = 200, .stream = 1 },
		};
		struct sim_be bq = { .keep = 1, .min_ns = 401, .max_ns = 401, .rng = &(unsigned){ 1 } };
		struct sim_out out;
		struct cw_sched_stats st;

		sim_run(s, jobs, 2, &bq, 0, &out);
		cw_sched_get_stats(s, &st);
		CU_ASSERT_EQUAL(out.err, 0);
		CU_ASSERT_EQUAL(st.rt_done, 2);
		missed[k] = st.rt_missed;
		cw_sched_free(s);
	}
	CU_ASSERT_EQUAL(missed[0], 1);
	CU_ASSERT_EQUAL(missed[1], 0);

	/* The paper's Symphony example: T = 200 ms, C = 120 ms, a BE job of
	 * 100 ms at t = 0 and the RT request at t = 1.  LST starts the BE job
	 * (no RT request queued yet) and misses; delta-l refuses a request
	 * that could never run safely without a server. */
	{
		struct cw_task a[] = { { .period_ns = 200 * CW_NS_PER_MS, .service_ns = 120 * CW_NS_PER_MS } };
		struct cw_sched *s;
		struct cw_sched_req b = be(0, 100 * CW_NS_PER_MS);
		struct sim_job jobs[] = { { .arrival = 1, .period = a[0].period_ns,
					    .service = a[0].service_ns, .actual = a[0].service_ns } };
		struct sim_be bq = { .keep = 1, .min_ns = b.service_ns, .max_ns = b.service_ns,
				     .rng = &(unsigned){ 1 } };
		struct sim_out out;
		struct cw_sched_stats st;

		CU_ASSERT_FATAL(cw_admit_test(a, 1, &r) == 0);
		s = new_sched(CW_SCHED_LST, r.delta_l_ns, r.idle_be_ns);
		sim_run(s, jobs, 1, &bq, 0, &out);
		cw_sched_get_stats(s, &st);
		CU_ASSERT_EQUAL(st.rt_missed, 1);
		cw_sched_free(s);
		s = new_sched(CW_SCHED_DELTA_L, r.delta_l_ns, r.idle_be_ns);
		CU_ASSERT_EQUAL(cw_sched_enqueue(s, &b, 0), -E2BIG);
		cw_sched_free(s);
	}
}

/* The idle allowance is exact: a BE request of idle_be_ns started just
 * before every stream releases leaves the last job 0 slack, one of
 * idle_be_ns + 1 makes it miss (run under edf, which does not refuse it;
 * delta-l refuses it at the door). */
static void test_idle_allowance_is_exact(void)
{
	struct cw_task t[] = { { .period_ns = 1000, .service_ns = 400 },
			       { .period_ns = 600, .service_ns = 200 } };
	struct cw_admit_result r;

	CU_ASSERT_FATAL(cw_admit_test(t, 2, &r) == 0);
	CU_ASSERT_EQUAL_FATAL(r.idle_be_ns, 401);
	for (int64_t extra = 0; extra < 2; extra++) {
		struct cw_sched *s = new_sched(CW_SCHED_EDF, r.delta_l_ns, r.idle_be_ns);
		struct sim_job jobs[] = {
			{ .arrival = 1, .period = 1000, .service = 400, .actual = 400, .stream = 0 },
			{ .arrival = 1, .period = 600, .service = 200, .actual = 200, .stream = 1 },
		};
		struct sim_be bq = { .keep = 1, .min_ns = 1, .max_ns = 1,
				     .first_ns = r.idle_be_ns + extra, .rng = &(unsigned){ 1 } };
		struct cw_sched_stats st;
		struct sim_out out;

		sim_run(s, jobs, 2, &bq, 0, &out);
		cw_sched_get_stats(s, &st);
		CU_ASSERT_EQUAL(out.err, 0);
		CU_ASSERT_EQUAL(st.rt_missed, extra ? 2 : 0);	/* B, and A after it */
		CU_ASSERT_EQUAL(st.min_slack_ns, -extra);
		cw_sched_free(s);
	}
	{
		struct cw_sched *s = new_sched(CW_SCHED_DELTA_L, r.delta_l_ns, r.idle_be_ns);
		struct cw_sched_req ok = be(0, r.idle_be_ns), big = be(0, r.idle_be_ns + 1);

		CU_ASSERT_EQUAL(cw_sched_enqueue(s, &ok, 0), 0);
		CU_ASSERT_EQUAL(cw_sched_enqueue(s, &big, 0), -E2BIG);
		cw_sched_free(s);
	}
}

int main(void)
{
	CU_pSuite s = cwtest_suite("sched", NULL, NULL);

	cwtest_add(s, "policy names", test_policy_names);
	cwtest_add(s, "errors", test_errors);
	cwtest_add(s, "release, wait, early RT", test_release_wait_and_early);
	cwtest_add(s, "delta-l accounting", test_delta_l_accounting);
	cwtest_add(s, "an overrun's debt is taken from the next refill", test_overrun_debt_carried);
	cwtest_add(s, "edf: BE only when nothing released", test_edf_be_only_when_nothing_released);
	cwtest_add(s, "adversarial releases, full BE queue", test_adversarial_delta_l);
	cwtest_add(s, "server when dL = 0", test_server_when_no_slack);
	cwtest_add(s, "idle allowance is exact", test_idle_allowance_is_exact);
	cwtest_add(s, "lst misses, delta-l does not", test_lst_misses_delta_l_does_not);
	return cwtest_run();
}
