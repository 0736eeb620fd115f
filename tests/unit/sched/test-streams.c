/*
 * Description: cw_sched gives RT requests their releases from its own
 * per-stream state — the first request of a stream, early and late ones,
 * further pieces of a job (same_job), a period change, forgetting a
 * stream, the stream table's bounds and its index under many inserts and
 * forgets — and the sequences the two drivers used to produce (cwsim's
 * engine and the daemon's dispatcher, which computed the expected release
 * themselves) get exactly the releases and deadlines they got then.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <clockwise/sched.h>
#include "common/invariant.h"
#include "common/util.h"
#include "cwtest.h"
#include "sched/simdrv.h"

static struct cw_sched *new_sched(void)
{
	struct cw_sched_opts o;
	struct cw_sched *s = NULL;

	cw_sched_opts_init(&o);
	o.policy = CW_SCHED_EDF;
	CU_ASSERT_FATAL(cw_sched_new(&o, &s) == 0);
	return s;
}

static struct cw_sched_req rt(uint64_t stream, int64_t arrival, int64_t period, bool same_job)
{
	return (struct cw_sched_req){ .cls = CW_SCHED_RT, .stream = stream, .arrival_ns = arrival,
				      .period_ns = period, .service_ns = 1, .same_job = same_job };
}

/* One request and the window it must get. */
struct step {
	uint64_t stream;
	int64_t arrival, period;
	bool same_job;
	int64_t release, deadline;
};

/* Enqueues each step's request (into r[]) at its arrival and checks its
 * window. */
static void run_steps(struct cw_sched *s, const struct step *st, size_t n, struct cw_sched_req *r)
{
	for (size_t i = 0; i < n; i++) {
		r[i] = rt(st[i].stream, st[i].arrival, st[i].period, st[i].same_job);
		CU_ASSERT_EQUAL_FATAL(cw_sched_enqueue(s, &r[i], st[i].arrival), 0);
		CU_ASSERT_EQUAL(r[i].release_ns, st[i].release);
		CU_ASSERT_EQUAL(r[i].deadline_ns, st[i].deadline);
	}
}

static void test_invariants_on(void)
{
	/* the library is built with the flags of this test: its checks are on */
	CU_ASSERT_EQUAL(CW_INVARIANTS, 1);
}

static void test_releases(void)
{
	static const struct step a[] = {
		/* first request of a stream: released when it comes */
		{ 7, 1000, 100, false, 1000, 1100 },
		/* early: released a period after the last release */
		{ 7, 1010, 100, false, 1100, 1200 },
		/* early again, further ahead: still a period apart */
		{ 7, 1020, 100, false, 1200, 1300 },
		/* late: released when it comes; the next counts from there */
		{ 7, 1450, 100, false, 1450, 1550 },
		/* further pieces of that job: its window, the stream stays */
		{ 7, 1450, 100, true, 1450, 1550 },
		{ 7, 1450, 100, true, 1450, 1550 },
	}, b[] = {
		/* another stream is on its own */
		{ 8, 1460, 30, false, 1460, 1490 },
		{ 7, 1460, 100, false, 1550, 1650 },
		/* a same_job piece that came after the job's release is not
		 * part of it (pieces of one request share its arrival) */
		{ 8, 1500, 30, true, 1500, 1530 },
		/* a period change: the latest job keeps its window (1550 +
		 * 100), the new period counts from there */
		{ 7, 1560, 40, false, 1650, 1690 },
		{ 7, 1560, 40, false, 1690, 1730 },
		/* a same_job piece of another period than its job's: a job */
		{ 7, 1560, 50, true, 1730, 1780 },
	}, c[] = {
		/* forgotten: the id starts afresh (a new reservation) */
		{ 7, 1570, 200, false, 1570, 1770 },
		/* a same_job piece of a stream with no job starts one */
		{ 9, 1580, 10, true, 1580, 1590 },
		{ 9, 1580, 10, false, 1590, 1600 },
	};
	struct cw_sched *s = new_sched();
	struct cw_sched_req ra[CW_ARRAY_SIZE(a)], rb[CW_ARRAY_SIZE(b)], rc[CW_ARRAY_SIZE(c)], bad;
	struct cw_sched_stream st;

	CU_ASSERT_EQUAL(cw_sched_stream_get(s, 7, &st), -ENOENT);
	run_steps(s, a, CW_ARRAY_SIZE(a), ra);
	CU_ASSERT_EQUAL(cw_sched_stream_get(s, 7, &st), 0);
	CU_ASSERT(st.id == 7 && st.period_ns == 100 && st.service_ns == 1 && st.release_ns == 1450);
	run_steps(s, b, CW_ARRAY_SIZE(b), rb);
	CU_ASSERT_EQUAL(cw_sched_stream_get(s, 7, &st), 0);
	CU_ASSERT(st.period_ns == 50 && st.release_ns == 1730);
	CU_ASSERT_EQUAL(cw_sched_stream_count(s), 2);
	CU_ASSERT_EQUAL(cw_sched_stream_forget(s, 7), 0);
	CU_ASSERT_EQUAL(cw_sched_stream_forget(s, 7), -ENOENT);
	CU_ASSERT_EQUAL(cw_sched_stream_get(s, 7, &st), -ENOENT);
	CU_ASSERT_EQUAL(cw_sched_stream_count(s), 1);
	run_steps(s, c, CW_ARRAY_SIZE(c), rc);
	/* a failed enqueue changes nothing */
	bad = rt(9, 1580, 0, false);
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &bad, 1580), -EINVAL);
	CU_ASSERT_EQUAL(cw_sched_stream_get(s, 9, &st), 0);
	CU_ASSERT_EQUAL(st.release_ns, 1590);
	CU_ASSERT_EQUAL(cw_sched_stream_count(s), 3);
	CU_ASSERT_EQUAL(cw_sched_stream_at(s, 3, &st), -ENOENT);
	cw_sched_free(s);
}

/* A stream sent ever further ahead of its releases runs out of range
 * before its releases overflow. */
static void test_release_range(void)
{
	struct cw_sched *s = new_sched();
	int64_t period = INT64_MAX / 4;
	struct cw_sched_req r[4];
	int e = 0;
	size_t i;

	for (i = 0; i < CW_ARRAY_SIZE(r) && e == 0; i++) {
		r[i] = rt(1, 0, period, false);
		e = cw_sched_enqueue(s, &r[i], 0);
		if (e == 0)
			CU_ASSERT(r[i].deadline_ns > r[i].release_ns);
	}
	CU_ASSERT_EQUAL(e, -ERANGE);
	CU_ASSERT_EQUAL(i, 4);	/* released at 0, max/4, max/2; the fourth refused */
	cw_sched_free(s);
}

/* The table against a plain array: random ids (small, dense and huge),
 * forgets in between, get/at/count agree and every id keeps its state. */
static void test_table(void)
{
	enum { N = 3000 };
	static uint64_t ids[N];
	static int64_t rel[N];
	static bool live[N];
	static struct cw_sched_req reqs[N];
	struct cw_sched *s = new_sched();
	unsigned rng = 31337;
	size_t nlive = 0;

	for (size_t i = 0; i < N; i++)
		ids[i] = i % 3 == 0 ? i : i % 3 == 1 ? (uint64_t)sim_rand(&rng, 0, 1 << 30) << 33 | i :
			 UINT64_MAX - i;
	for (int round = 0; round < 4; round++) {
		for (size_t i = 0; i < N; i++) {
			int e;

			if (sim_rand(&rng, 0, 3) == 0)
				continue;
			if (live[i] && sim_rand(&rng, 0, 2) == 0) {
				CU_ASSERT_EQUAL_FATAL(cw_sched_stream_forget(s, ids[i]), 0);
				live[i] = false;
				nlive--;
				continue;
			}
			e = cw_sched_cancel(s, &reqs[i]);	/* to reuse it */
			CU_ASSERT_FATAL(e == 0 || e == -ENOENT);
			reqs[i] = rt(ids[i], 10 * round, 1000, false);
			CU_ASSERT_EQUAL_FATAL(cw_sched_enqueue(s, &reqs[i], 0), 0);
			CU_ASSERT_EQUAL_FATAL(reqs[i].release_ns, live[i] ? rel[i] + 1000 : 10 * round);
			rel[i] = reqs[i].release_ns;
			nlive += !live[i];
			live[i] = true;
		}
		CU_ASSERT_EQUAL_FATAL(cw_sched_stream_count(s), nlive);
		for (size_t i = 0; i < N; i++) {
			struct cw_sched_stream st;
			int e = cw_sched_stream_get(s, ids[i], &st);

			CU_ASSERT_EQUAL_FATAL(e, live[i] ? 0 : -ENOENT);
			if (live[i])
				CU_ASSERT_EQUAL_FATAL(st.release_ns, rel[i]);
		}
		for (size_t k = 0; k < nlive; k++) {
			struct cw_sched_stream st;
			size_t i;

			CU_ASSERT_EQUAL_FATAL(cw_sched_stream_at(s, k, &st), 0);
			for (i = 0; i < N && ids[i] != st.id; i++)
				;
			CU_ASSERT_FATAL(i < N && live[i] && st.release_ns == rel[i]);
		}
	}
	cw_sched_free(s);
}

/* At most CW_SCHED_STREAMS_MAX streams; forgetting one makes room. */
static void test_table_limit(void)
{
	struct cw_sched *s = new_sched();
	struct cw_sched_req *r = calloc(CW_SCHED_STREAMS_MAX + 1, sizeof(*r));
	struct cw_sched_stream st;
	uint64_t id;

	CU_ASSERT_FATAL(r != NULL);
	for (id = 0; id < CW_SCHED_STREAMS_MAX; id++) {
		r[id] = rt(id * 7919, 0, 10, false);
		CU_ASSERT_EQUAL_FATAL(cw_sched_enqueue(s, &r[id], 0), 0);
	}
	r[id] = rt(1, 0, 10, false);	/* a new id: no room */
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &r[id], 0), -ENOSPC);
	CU_ASSERT_EQUAL(cw_sched_stream_get(s, 1, &st), -ENOENT);
	CU_ASSERT_EQUAL(cw_sched_cancel(s, &r[1]), 0);
	r[1] = rt(7919, 0, 10, false);	/* a known one: fine */
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &r[1], 0), 0);
	CU_ASSERT_EQUAL(r[1].release_ns, 10);
	CU_ASSERT_EQUAL(cw_sched_stream_forget(s, 7919 * 5), 0);
	CU_ASSERT_EQUAL(cw_sched_enqueue(s, &r[id], 0), 0);
	CU_ASSERT_EQUAL(cw_sched_stream_count(s), CW_SCHED_STREAMS_MAX);
	cw_sched_free(s);
	free(r);
}

/* ---- the drivers' old protocol ----------------------------------------- */

/* What cwsim's engine did before the scheduler tracked streams (on_rt):
 * per stream and disk the next expected release, INT64_MIN before the
 * first request; release = max(arrival, expected). */
static void old_cwsim(const struct sim_job *jobs, size_t n, int64_t *ret_release)
{
	int64_t next[8];

	for (size_t k = 0; k < CW_ARRAY_SIZE(next); k++)
		next[k] = INT64_MIN;
	for (size_t i = 0; i < n; i++) {
		int64_t *exp = &next[jobs[i].stream];
		int64_t expected = *exp == INT64_MIN ? jobs[i].arrival : *exp;

		ret_release[i] = CW_MAX(jobs[i].arrival, expected);
		*exp = ret_release[i] + jobs[i].period;
	}
}

/* What the daemon's dispatcher did (lane.c, sched_enqueue): 0 before the
 * first request; the first piece of a request on the disk moves the
 * expected release on, a further piece takes the previous one. */
static void old_lane(const struct sim_job *jobs, size_t n, int64_t *ret_release)
{
	int64_t exp[8] = { 0 };

	for (size_t i = 0; i < n; i++) {
		int64_t *e = &exp[jobs[i].stream], expected;

		if (!jobs[i].same_job) {
			expected = *e ? *e : jobs[i].arrival;
			*e = CW_MAX(jobs[i].arrival, expected) + jobs[i].period;
		} else {
			expected = *e - jobs[i].period;
		}
		ret_release[i] = CW_MAX(jobs[i].arrival, expected);
	}
}

/* Random request sequences of up to 8 streams (early, on time and late
 * arrivals; with pieces, 1 to 3 pieces per request), run through sim_run
 * with a BE queue, against the old drivers' releases. */
static void test_old_protocol(void)
{
	enum { MAXJ = 1500 };
	static struct sim_job jobs[MAXJ];
	static int64_t want[MAXJ];
	unsigned rng = 2024, runs = 0, early = 0, late = 0, pieces = 0;

	for (int it = 0; it < 400; it++) {
		bool lane = it % 2;
		size_t ns = (size_t)sim_rand(&rng, 1, 8), nj = 0;
		struct cw_sched *s = new_sched();
		struct sim_be bq = { .keep = 2, .min_ns = 1, .max_ns = 20, .rng = &rng };
		struct sim_out out;

		for (size_t k = 0; k < ns; k++) {
			int64_t period = sim_rand(&rng, 20, 200), at = sim_rand(&rng, 1, 300);

			while (nj + 3 < MAXJ && at < 4000) {
				int np = lane ? (int)sim_rand(&rng, 1, 3) : 1;

				for (int p = 0; p < np; p++)
					jobs[nj++] = (struct sim_job){ .arrival = at, .period = period,
						.service = 1 + period / 40, .actual = 1 + period / 40,
						.stream = k, .same_job = p > 0 };
				/* the next request: early, about on time, or late */
				at += sim_rand(&rng, 0, 2) == 0 ? sim_rand(&rng, 0, period) :
				      period + sim_rand(&rng, 0, period);
			}
		}
		sim_run(s, jobs, nj, &bq, 0, &out);
		CU_ASSERT_EQUAL_FATAL(out.err, 0);
		/* jobs are now in the order they were enqueued */
		(lane ? old_lane : old_cwsim)(jobs, nj, want);
		for (size_t i = 0; i < nj; i++) {
			CU_ASSERT_EQUAL_FATAL(jobs[i].release, want[i]);
			CU_ASSERT_EQUAL_FATAL(jobs[i].deadline, want[i] + jobs[i].period);
			early += jobs[i].release > jobs[i].arrival;
			late += jobs[i].release == jobs[i].arrival;
			pieces += jobs[i].same_job;
		}
		runs++;
		cw_sched_free(s);
	}
	printf("\n  %u runs: %u early, %u released on arrival, %u further pieces\n", runs, early,
	       late, pieces);
	CU_ASSERT(early > 1000 && late > 1000 && pieces > 1000);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("sched-streams", NULL, NULL);

	cwtest_add(s, "invariant checks on", test_invariants_on);
	cwtest_add(s, "releases", test_releases);
	cwtest_add(s, "release range", test_release_range);
	cwtest_add(s, "stream table", test_table);
	cwtest_add(s, "stream table limit", test_table_limit);
	cwtest_add(s, "old driver protocol, same releases", test_old_protocol);
	return cwtest_run();
}
