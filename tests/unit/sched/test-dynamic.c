/*
 * Description: the dynamic slack policy against the rule it implements,
 * by brute force.  For small admitted task sets, every integer release
 * pattern within a horizon (each stream's releases any times at least a
 * period apart) runs with a best-effort queue that is never empty: no
 * deadline is missed, the room the scheduler computes (cw_sched_room_ns)
 * equals the rule evaluated literally at every integer deadline at every
 * decision (with no guard and with a guard of 1), every best-effort start
 * fits in it, and every start delta-l
 * makes on the same pattern fits in it too (dynamic admits whatever
 * delta-l admits, state for state).  With the first best-effort request
 * taking 2 longer than its charge, jobs are late, but none by more than
 * the overrun: an overrun costs what it took, no more.  Random sporadic
 * releases with early
 * arrivals, shorter actual times and the periodic server when ΔL = 0 never
 * miss either.
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

#define MAXJ 64

static struct cw_sched *new_sched(enum cw_sched_policy p, const struct cw_admit_result *r,
				  const struct cw_task *t, size_t n, int64_t guard)
{
	struct cw_sched_opts o;
	struct cw_sched *s = NULL;

	cw_sched_opts_init(&o);
	o.policy = p;
	o.delta_l_ns = r->delta_l_ns;
	o.idle_be_ns = r->idle_be_ns;
	o.guard_ns = guard;
	CU_ASSERT_FATAL(cw_sched_new(&o, &s) == 0);
	for (size_t k = 0; k < n; k++)
		CU_ASSERT_FATAL(cw_sched_stream_admit(s, k, t[k].period_ns, t[k].service_ns, t[k].deadline_ns) == 0);
	return s;
}

/* ---- the rule, literally ------------------------------------------------ */

struct bjob {
	int64_t at;			/* arrival = release in the pattern */
	unsigned k;
	struct cw_sched_req r;
	bool in, started;
	int64_t done_at;
};

/* min over every integer d > now at which work is due of
 * d - now - W(d) - (g if released work is due by d), W(d) the C of the
 * jobs enqueued and not started due by d plus, for each stream,
 * C (floor((d - D - a) / T) + 1) for d >= a + D, with a its earliest next
 * release: now + 1, or its latest release + T if later. */
static int64_t brute_room(const struct cw_task *t, size_t n, const struct bjob *j, size_t nj,
			  int64_t now, int64_t g)
{
	int64_t a[8], far = now + 1, room = INT64_MAX, h = 1;

	for (size_t k = 0; k < n; k++) {
		bool seen = false;
		int64_t last = 0;

		for (size_t i = 0; i < nj; i++)
			if (j[i].in && j[i].k == k) {
				last = seen ? CW_MAX(last, j[i].r.release_ns) : j[i].r.release_ns;
				seen = true;
			}
		a[k] = seen ? CW_MAX(now + 1, last + t[k].period_ns) : now + 1;
		far = CW_MAX(far, a[k]);
		h = h / sim_gcd(h, t[k].period_ns) * t[k].period_ns;
	}
	for (size_t i = 0; i < nj; i++)
		if (j[i].in && !j[i].started)
			far = CW_MAX(far, j[i].r.deadline_ns);
	/* past every pending deadline and fixed release, W grows by U h <= h
	 * a hyperperiod: the least value lies within one more of them */
	for (int64_t d = now + 1; d <= far + 2 * h; d++) {
		int64_t w = 0, p = 0;

		for (size_t i = 0; i < nj; i++)
			if (j[i].in && !j[i].started && j[i].r.deadline_ns <= d)
				p += j[i].r.service_ns;
		w = p;
		for (size_t k = 0; k < n; k++) {
			int64_t dk = cw_task_deadline_ns(&t[k]);

			if (d >= a[k] + dk)
				w += ((d - a[k] - dk) / t[k].period_ns + 1) * t[k].service_ns;
		}
		if (w > 0)
			room = CW_MIN(room, d - now - w - (p > 0 ? g : 0));
	}
	return room == INT64_MAX ? INT64_MAX / 4 : room;
}

struct bstats {
	unsigned long runs, be_starts, dl_starts, room_checks, room_wrong, over_room, dl_over;
	unsigned long misses, dl_misses;
	/* runs whose first best-effort request overran: how many, how many
	 * had a miss, and how many a job later than the overrun */
	unsigned long ovr_runs, ovr_missed, ovr_beyond;
};

/* One pattern under policy p with the BE queue kept at one request of
 * size b, the first of them taking over longer than its charge.  Checks
 * as the description says. */
static void brute_run(enum cw_sched_policy p, const struct cw_task *t, size_t n,
		      const struct cw_admit_result *res, struct bjob *j, size_t nj, int64_t b,
		      int64_t g, int64_t over, struct bstats *bs)
{
	struct cw_sched *s = new_sched(p, res, t, n, g);
	struct cw_sched_req be = { 0 }, *cur = NULL;
	struct cw_sched_stats st;
	bool be_in = false, be_ok = true;
	int64_t now = 0, end = 0;
	size_t i = 0, done = 0;

	int64_t actual = 0, late = INT64_MIN, over0 = over;

	for (size_t q = 0; q < nj; q++)
		j[q].in = j[q].started = false;
	for (;;) {
		struct cw_sched_decision d;
		int64_t next = INT64_MAX;

		if (cur && end <= now) {
			CU_ASSERT_EQUAL(cw_sched_complete(s, cur, end, actual), 0);
			if (cur == &be) {
				be_in = false;
			} else {
				struct bjob *bj = (struct bjob *)((char *)cur - offsetof(struct bjob, r));

				bj->done_at = end;
				late = CW_MAX(late, end - cur->deadline_ns);
				done++;
			}
			cur = NULL;
		}
		if (done == nj)
			break;
		for (; i < nj && j[i].at <= now; i++) {
			j[i].r = (struct cw_sched_req){ .cls = CW_SCHED_RT, .stream = j[i].k,
				.arrival_ns = now, .period_ns = t[j[i].k].period_ns,
				.rel_deadline_ns = t[j[i].k].deadline_ns,
				.service_ns = t[j[i].k].service_ns };
			CU_ASSERT_EQUAL_FATAL(cw_sched_enqueue(s, &j[i].r, now), 0);
			CU_ASSERT_EQUAL(j[i].r.release_ns, j[i].at);
			j[i].in = true;
		}
		if (!be_in && be_ok) {
			be = (struct cw_sched_req){ .cls = CW_SCHED_BE, .arrival_ns = now, .service_ns = b };
			int e = cw_sched_enqueue(s, &be, now);

			be_ok = e == 0;	/* -E2BIG: too big ever to run safely */
			be_in = be_ok;
		}
		if (!cur) {
			int64_t room = brute_room(t, n, j, nj, now, g);

			if (p == CW_SCHED_DYNAMIC && !over0) {
				int64_t got;

				CU_ASSERT_EQUAL_FATAL(cw_sched_room_ns(s, now, &got), 0);
				bs->room_checks++;
				if (got != room) {
					bs->room_wrong++;
					if (bs->room_wrong < 4) {
						printf("\n  room at %ld: %ld, the rule says %ld; tasks", (long)now,
						       (long)got, (long)room);
						for (size_t k = 0; k < n; k++)
							printf(" (%ld,%ld)", (long)t[k].period_ns, (long)t[k].service_ns);
						printf(", jobs");
						for (size_t q = 0; q < nj; q++)
							printf(" %u@%ld", j[q].k, (long)j[q].at);
						printf("\n");
					}
				}
			}
			CU_ASSERT_EQUAL_FATAL(cw_sched_next(s, now, &d), 0);
			if (d.verdict == CW_SCHED_DISPATCH) {
				cur = d.req;
				if (cur != &be)
					((struct bjob *)((char *)cur - offsetof(struct bjob, r)))->started = true;
				if (cur->via == CW_SCHED_VIA_SLACK || cur->via == CW_SCHED_VIA_IDLE) {
					bool above = cur->service_ns > room;

					if (over0) {
						/* after an overrun the room is a bound */
					} else if (p == CW_SCHED_DYNAMIC) {
						bs->be_starts++;
						bs->over_room += above;
					} else {
						bs->dl_starts++;
						bs->dl_over += above;
						if (above && bs->dl_over < 4)
							printf("\n  delta-l starts %ld at %ld, room %ld\n",
							       (long)cur->service_ns, (long)now, (long)room);
					}
				}
				actual = cur->service_ns;
				if (cur == &be && over) {
					actual += over;	/* the first best-effort request overruns */
					over = 0;
				}
				end = now + actual;
				continue;
			}
			if (d.verdict == CW_SCHED_WAIT)
				next = d.until_ns;
		} else
			next = end;
		if (i < nj)
			next = CW_MIN(next, j[i].at);
		if (next == INT64_MAX)
			break;
		now = next;
	}
	cw_sched_get_stats(s, &st);
	CU_ASSERT_EQUAL(st.rt_done, nj);
	if (over0) {
		bs->ovr_runs++;
		bs->ovr_missed += st.rt_missed > 0;
		bs->ovr_beyond += late > over0;
	} else if (p == CW_SCHED_DYNAMIC) {
		bs->misses += st.rt_missed;
	} else {
		bs->dl_misses += st.rt_missed;
	}
	bs->runs++;
	cw_sched_free(s);
}

/* Every set of release times in [0, h) at least T apart, for each
 * stream, combined over the streams: pat[k] holds stream k's current one. */
struct pats {
	int64_t v[8][MAXJ];
	size_t len[8];
};

static bool next_pattern(int64_t *v, size_t *len, int64_t period, int64_t h)
{
	/* the patterns of one stream in lexicographic order of their bit
	 * strings: try to add a release, else move the last one later */
	int64_t from = *len ? v[*len - 1] + period : 0;

	if (from < h && *len < MAXJ / 4) {
		v[(*len)++] = from;
		return true;
	}
	while (*len) {
		int64_t x = ++v[*len - 1];

		if (x < h)
			return true;
		(*len)--;
	}
	return false;	/* back to the empty pattern: all done */
}

static void brute_set(const struct cw_task *t, size_t n, int64_t h, const int64_t *bsizes,
		      size_t nb, struct bstats *bs)
{
	struct cw_admit_result res;
	struct pats pt = { 0 };
	static struct bjob j[MAXJ];

	CU_ASSERT_FATAL(cw_admit_test(t, n, &res) == 0);
	if (!res.schedulable)
		return;
	for (;;) {
		size_t nj = 0;

		/* merge the streams' releases by time */
		for (size_t k = 0; k < n; k++)
			for (size_t q = 0; q < pt.len[k]; q++)
				j[nj++] = (struct bjob){ .at = pt.v[k][q], .k = (unsigned)k };
		for (size_t a = 1; a < nj; a++)
			for (size_t c = a; c > 0 && j[c - 1].at > j[c].at; c--) {
				struct bjob x = j[c];

				j[c] = j[c - 1];
				j[c - 1] = x;
			}
		for (size_t q = 0; q < nb; q++) {
			int64_t b = bsizes[q] ? bsizes[q] : res.idle_be_ns;

			brute_run(CW_SCHED_DYNAMIC, t, n, &res, j, nj, b, 0, 0, bs);
			brute_run(CW_SCHED_DYNAMIC, t, n, &res, j, nj, b, 1, 0, bs);
			brute_run(CW_SCHED_DELTA_L, t, n, &res, j, nj, b, 0, 0, bs);
			if (q == 0)
				brute_run(CW_SCHED_DYNAMIC, t, n, &res, j, nj, b, 0, 2, bs);
		}
		/* the next combination: an odometer over the streams */
		size_t k = 0;

		while (k < n && !next_pattern(pt.v[k], &pt.len[k], t[k].period_ns, h))
			k++;
		if (k == n)
			break;
	}
}

/* Every room right, every start within it, no miss under either policy. */
static void assert_rule_kept(const struct bstats *bs)
{
	CU_ASSERT(bs->be_starts > 10000);
	CU_ASSERT_EQUAL(bs->room_wrong, 0);
	CU_ASSERT_EQUAL(bs->over_room, 0);
	CU_ASSERT_EQUAL(bs->misses, 0);
	CU_ASSERT_EQUAL(bs->dl_over, 0);
	CU_ASSERT_EQUAL(bs->dl_misses, 0);
}

static void test_every_pattern(void)
{
	static const int64_t sizes[] = { 1, 2, 3, 0 /* idle_be */ };
	struct bstats bs = { 0 };
	unsigned sets = 0;

	/* two streams, periods 2..5, every C that admission takes */
	for (int64_t t1 = 2; t1 <= 5; t1++)
		for (int64_t t2 = t1; t2 <= 5; t2++)
			for (int64_t c1 = 1; c1 <= t1; c1++)
				for (int64_t c2 = 1; c2 <= t2; c2++) {
					struct cw_task t[] = { { t1, c1, 0, 0 }, { t2, c2, 0, 0 } };
					struct cw_admit_result r;

					CU_ASSERT_FATAL(cw_admit_test(t, 2, &r) == 0);
					if (!r.schedulable)
						continue;
					sets++;
					brute_set(t, 2, 2 * t2 + 1, sizes, CW_ARRAY_SIZE(sizes), &bs);
				}
	/* three streams, a shorter horizon */
	{
		static const struct cw_task three[][3] = {
			{ { 3, 1, 0, 0 }, { 4, 1, 0, 0 }, { 6, 1, 0, 0 } },
			{ { 2, 1, 0, 0 }, { 5, 1, 0, 0 }, { 7, 1, 0, 0 } },
			{ { 4, 1, 0, 0 }, { 4, 1, 0, 0 }, { 5, 2, 0, 0 } },
		};

		for (size_t q = 0; q < CW_ARRAY_SIZE(three); q++) {
			sets++;
			brute_set(three[q], 3, 8, sizes, CW_ARRAY_SIZE(sizes), &bs);
		}
	}
	printf("\n  %u sets, %lu runs: dynamic %lu BE starts, %lu rooms checked (%lu wrong), "
	       "%lu over the rule, %lu misses; delta-l %lu starts, %lu over the rule, %lu misses\n",
	       sets, bs.runs, bs.be_starts, bs.room_checks, bs.room_wrong, bs.over_room, bs.misses,
	       bs.dl_starts, bs.dl_over, bs.dl_misses);
	CU_ASSERT(sets > 20);
	assert_rule_kept(&bs);
	CU_ASSERT(bs.be_starts > bs.dl_starts);
	/* An overrun costs the jobs after it at most its own length. */
	printf("  one best-effort request 2 over its charge: %lu runs, %lu with a miss, "
	       "%lu with a job later than 2\n", bs.ovr_runs, bs.ovr_missed, bs.ovr_beyond);
	CU_ASSERT(bs.ovr_runs > 10000);
	CU_ASSERT(bs.ovr_missed > 0);
	CU_ASSERT_EQUAL(bs.ovr_beyond, 0);
}

/* The same with deadlines shorter than periods (a striped stream's part
 * on one disk: due a stream period after release, released every k):
 * two streams, periods 2..5, every D <= T with one below, every C <= D
 * that admission takes, and three-stream sets. */
static void test_every_pattern_constrained(void)
{
	static const int64_t sizes[] = { 1, 2, 0 /* idle_be */ };
	struct bstats bs = { 0 };
	unsigned sets = 0, refused = 0;

	for (int64_t t1 = 2; t1 <= 5; t1++)
		for (int64_t t2 = t1; t2 <= 5; t2++)
			for (int64_t d1 = 1; d1 <= t1; d1++)
				for (int64_t d2 = 1; d2 <= t2; d2++)
					for (int64_t c1 = 1; c1 <= d1; c1++)
						for (int64_t c2 = 1; c2 <= d2; c2++) {
							struct cw_task t[] = { { t1, c1, 0, 0, d1 },
									       { t2, c2, 0, 0, d2 } };
							struct cw_admit_result r;

							if (d1 == t1 && d2 == t2)
								continue;
							CU_ASSERT_FATAL(cw_admit_test(t, 2, &r) == 0);
							if (!r.schedulable) {
								refused++;
								continue;
							}
							sets++;
							brute_set(t, 2, 2 * t2 + 1, sizes,
								  CW_ARRAY_SIZE(sizes), &bs);
						}
	{
		static const struct cw_task three[][3] = {
			{ { 6, 1, 0, 0, 2 }, { 6, 1, 0, 0, 2 }, { 3, 1, 0, 0, 3 } },
			{ { 4, 1, 0, 0, 2 }, { 6, 2, 0, 0, 4 }, { 8, 1, 0, 0, 3 } },
			{ { 3, 1, 0, 0, 2 }, { 9, 1, 0, 0, 3 }, { 9, 1, 0, 0, 4 } },
		};

		for (size_t q = 0; q < CW_ARRAY_SIZE(three); q++) {
			struct cw_admit_result r;

			CU_ASSERT_FATAL(cw_admit_test(three[q], 3, &r) == 0);
			CU_ASSERT(r.schedulable);
			sets++;
			brute_set(three[q], 3, 9, sizes, CW_ARRAY_SIZE(sizes), &bs);
		}
	}
	printf("\n  %u sets (%u refused), %lu runs: dynamic %lu BE starts, %lu rooms checked "
	       "(%lu wrong), %lu over the rule, %lu misses; delta-l %lu starts, %lu over the "
	       "rule, %lu misses; overrun of 2: %lu runs, %lu with a job later than 2\n", sets,
	       refused, bs.runs, bs.be_starts, bs.room_checks, bs.room_wrong, bs.over_room,
	       bs.misses, bs.dl_starts, bs.dl_over, bs.dl_misses, bs.ovr_runs, bs.ovr_beyond);
	CU_ASSERT(sets > 50);
	CU_ASSERT(refused > 10);	/* short deadlines refuse sets U alone would take */
	assert_rule_kept(&bs);
	CU_ASSERT(bs.ovr_runs > 1000);
	CU_ASSERT_EQUAL(bs.ovr_beyond, 0);
}

/* Random admitted sets, the three kinds of jobs of sim_make_jobs (a
 * long BE request just before a synchronous release, the largest C first,
 * random sporadic with early arrivals and shorter actual times), BE sizes
 * up to past the largest that may run; with the server when ΔL = 0. */
static void random_sets(bool server, unsigned want, unsigned *ret_misses, uint64_t *ret_be)
{
	static struct sim_job jobs[4096];
	unsigned rng = server ? 77 : 4243, sets = 0;

	*ret_misses = 0;
	*ret_be = 0;
	while (sets < want) {
		struct cw_task t[6];
		struct cw_admit_result r;
		int64_t h, slice = 0, period = 0;
		size_t n = sim_random_set(&rng, t, &h);

		CU_ASSERT_FATAL(cw_admit_test(t, n, &r) == 0);
		if (!r.schedulable || (server && r.delta_l_ns != 0))
			continue;
		if (server && !sim_add_server(t, n, &r, &slice, &period))
			continue;
		sets++;
		for (int kind = 0; kind < 3; kind++) {
			struct cw_sched *s = new_sched(CW_SCHED_DYNAMIC, &r, t, n, 0);
			int64_t be_max = CW_MAX(slice, r.idle_be_ns);
			struct sim_be bq = { .keep = 3, .min_ns = 1, .max_ns = be_max + 3,
					     .first_ns = kind == 0 ? be_max : 0, .rng = &rng };
			struct cw_sched_stats st;
			struct sim_out out;
			size_t nj = sim_make_jobs(t, n, kind, &rng, jobs, CW_ARRAY_SIZE(jobs), 400);

			if (slice)
				CU_ASSERT_FATAL(cw_sched_set_server(s, slice, period) == 0);
			sim_run(s, jobs, nj, &bq, 0, &out);
			cw_sched_get_stats(s, &st);
			CU_ASSERT_EQUAL(out.err, 0);
			CU_ASSERT_EQUAL(st.rt_done, nj);
			for (size_t q = 0; q < nj; q++)
				CU_ASSERT_EQUAL(jobs[q].release, jobs[q].at);
			*ret_misses += st.rt_missed > 0;
			*ret_be += out.be_done;
			cw_sched_free(s);
		}
	}
}

static void test_random_sporadic(void)
{
	unsigned misses;
	uint64_t be;

	random_sets(false, 600, &misses, &be);
	printf("\n  600 sets x 3 kinds: %u runs with a miss, %lu BE done", misses, (unsigned long)be);
	CU_ASSERT_EQUAL(misses, 0);
	CU_ASSERT(be > 1000);
	random_sets(true, 150, &misses, &be);
	printf("; with the server (dL = 0): %u with a miss, %lu BE done\n", misses,
	       (unsigned long)be);
	CU_ASSERT_EQUAL(misses, 0);
	CU_ASSERT(be > 100);
}

/* ---- where a burst ends --------------------------------------------------- */

struct burst_out {
	unsigned ends, ends_short;	/* burst ends with RT still released; of
					 * them, with a room under 32 requests */
	unsigned switches;		/* RT dispatches followed by a BE one */
	int64_t least_end_room;		/* least room at such an end */
	uint64_t missed, be_done;
};

/* N streams of C = 40, periods 1000 + 170 k and first releases 137 k
 * apart, beside a best-effort queue kept at one request of 10; the
 * streams' blocks at offset rt_off, best effort's at be_off; 50,000 long. */
static void burst_run(uint64_t rt_off, uint64_t be_off, struct burst_out *o)
{
	enum { N = 8, C = 40, B = 10, END = 50000, JOBS = END / 1000 + 1 };
	static struct cw_sched_req rt[N][JOBS], be[END / B + 1];
	const struct cw_sched_req be0 = { .cls = CW_SCHED_BE, .service_ns = B,
					  .offset_bytes = be_off, .length_bytes = 4096 };
	struct cw_admit_result res = { 0 };
	struct cw_task t[N];
	int64_t next[N];
	unsigned jobs[N] = { 0 }, nbe = 0;
	struct cw_sched *s;
	struct cw_sched_req *cur = NULL;
	struct cw_sched_stats st;
	int64_t now = 0, done_at = 0;
	bool last_rt = false;

	for (int k = 0; k < N; k++) {
		t[k] = (struct cw_task){ .period_ns = 1000 + 170 * k, .service_ns = C };
		next[k] = 137 * k;
	}
	s = new_sched(CW_SCHED_DYNAMIC, &res, t, N, 0);
	*o = (struct burst_out){ .least_end_room = INT64_MAX };
	be[nbe] = be0;
	CU_ASSERT_FATAL(cw_sched_enqueue(s, &be[nbe++], now) == 0);
	while (now < END) {
		int64_t soon = INT64_MAX;

		if (cur && now >= done_at) {
			CU_ASSERT_FATAL(cw_sched_complete(s, cur, done_at, cur->service_ns) == 0);
			cur = NULL;
		}
		for (int k = 0; k < N; k++) {
			if (next[k] <= now) {
				struct cw_sched_req *r = &rt[k][jobs[k]++];

				*r = (struct cw_sched_req){ .cls = CW_SCHED_RT, .stream = k,
					.arrival_ns = now, .period_ns = t[k].period_ns, .service_ns = C,
					.offset_bytes = rt_off + 4096 * k, .length_bytes = 4096 };
				CU_ASSERT_FATAL(cw_sched_enqueue(s, r, now) == 0);
				next[k] += t[k].period_ns;
			}
			soon = CW_MIN(soon, next[k]);
		}
		if (!cur) {
			struct cw_sched_decision d;
			int64_t room;

			CU_ASSERT_FATAL(cw_sched_room_ns(s, now, &room) == 0);
			CU_ASSERT_FATAL(cw_sched_next(s, now, &d) == 0);
			if (d.verdict != CW_SCHED_DISPATCH) {
				now = d.verdict == CW_SCHED_WAIT ? CW_MIN(d.until_ns, soon) : soon;
				continue;
			}
			cw_sched_get_stats(s, &st);
			if (d.req->cls == CW_SCHED_BE && last_rt) {
				o->switches++;
				if (st.rt_released > 0) {
					o->ends++;
					o->ends_short += room < 32 * B;
					o->least_end_room = CW_MIN(o->least_end_room, room);
				}
			}
			if (d.req->cls == CW_SCHED_BE) {	/* keep one queued */
				be[nbe] = be0;
				be[nbe].arrival_ns = now;
				CU_ASSERT_FATAL(cw_sched_enqueue(s, &be[nbe++], now) == 0);
			}
			last_rt = d.req->cls == CW_SCHED_RT;
			cur = d.req;
			done_at = now + cur->service_ns;
		}
		now = CW_MIN(done_at > now ? done_at : INT64_MAX, soon);
	}
	cw_sched_get_stats(s, &st);
	o->missed = st.rt_missed;
	o->be_done = st.be_done;
	cw_sched_free(s);
}

static void test_burst_end(void)
{
	struct burst_out near, far;

	/* the streams' blocks far from best effort's: after a refusal the
	 * arm serves the released streams until the room holds 32 requests */
	burst_run(0, UINT64_C(1) << 40, &near);
	/* all in one place: the burst ends once the room holds 16 */
	burst_run(0, 0, &far);
	printf("\n  streams apart: %u switches, %u burst ends with RT released (%u under 32 requests, "
	       "least room %ld); together: %u switches, %u ends (%u under 32, least room %ld)\n",
	       near.switches, near.ends, near.ends_short, (long)near.least_end_room, far.switches,
	       far.ends, far.ends_short, (long)far.least_end_room);
	CU_ASSERT_EQUAL(near.missed, 0);
	CU_ASSERT_EQUAL(far.missed, 0);
	CU_ASSERT(near.be_done > 100 && far.be_done > 100);
	CU_ASSERT(far.ends > 0 && far.ends_short > 0);
	CU_ASSERT(far.least_end_room >= 16 * 10);
	CU_ASSERT_EQUAL(near.ends_short, 0);
	CU_ASSERT(near.switches < far.switches);
}

static void test_policy_name(void)
{
	enum cw_sched_policy p;

	CU_ASSERT(cw_sched_policy_parse("dynamic", &p) == 0 && p == CW_SCHED_DYNAMIC);
	CU_ASSERT(cw_sched_policy_parse("dyn", &p) == 0 && p == CW_SCHED_DYNAMIC);
	CU_ASSERT_STRING_EQUAL(cw_sched_policy_name(CW_SCHED_DYNAMIC), "dynamic");
}

int main(void)
{
	CU_pSuite s = cwtest_suite("dynamic", NULL, NULL);

	cwtest_add(s, "policy name", test_policy_name);
	cwtest_add(s, "every release pattern of small sets", test_every_pattern);
	cwtest_add(s, "every release pattern, deadlines shorter than periods",
		   test_every_pattern_constrained);
	cwtest_add(s, "random sporadic releases, the server", test_random_sporadic);
	cwtest_add(s, "a burst ends where the arm is", test_burst_end);
	return cwtest_run();
}
