/*
 * Description: RBFQ (Gulati, Merchant & Varman) as the best-effort order,
 * in virtual time: the paper's Table 3 schedule exactly; weights 1:2 give
 * 2:4 of 6 dispatches; reservations 2:1 give 4:2, all in the local phase;
 * a client at its limit waits and is held to it; an idle client comes back
 * with at most its idle credit; tag adjustment keeps a newcomer from
 * starving (and without it the newcomer does starve); local tags stay
 * 1/M apart after global-phase service; reservations hold when the
 * capacity halves (section 4.1.2); random client sets get the fluid
 * allocation of the paper's Theorem (with limits) by brute force; the
 * paper's critical capacities; admission of reservations; the distributed
 * delta/rho of section 3.2 (the Figure 3 case).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "cwtest.h"
#include "sched/bedrv.h"
#include "../../../libclockwise/sched/idmap.c"
#include "../../../libclockwise/sched/rbfq.c"	/* the tags, for the spacing test */

#define MS CW_NS_PER_MS

static struct cw_sched *rbfq_sched(const struct cw_sched_client *qos, size_t n)
{
	struct cw_sched *s = bd_sched(cw_sched_beq_rbfq(), NULL);

	CU_ASSERT_FATAL(s != NULL);
	for (size_t i = 0; i < n; i++)
		CU_ASSERT_FATAL(cw_sched_set_client(s, i + 1, &qos[i]) == 0);
	return s;
}

static void clients(struct bd_client *c, size_t n, unsigned depth, int64_t cost)
{
	memset(c, 0, n * sizeof(*c));
	for (size_t i = 0; i < n; i++)
		c[i] = (struct bd_client){ .id = i + 1, .depth = depth, .cost_ns = cost };
}

/* Table 3: M1 = 20, M2 = 40 IOPS, w1:w2 = 3:1, C = 100 IOPS (10 ms each):
 * every 50 ms c1 (local), c2 (local), c1 (global), c2 (local), c1 (global). */
static void test_paper_example(void)
{
	struct cw_sched_client q[2] = { { .resv_ppm = 200000, .weight = 3 },
					{ .resv_ppm = 400000, .weight = 1 } };
	struct bd_client c[2];
	struct bd_run r = { .c = c, .n = 2, .end_ns = 200 * MS };
	static const uint32_t who[5] = { 0, 1, 0, 1, 0 };
	static const enum cw_sched_phase why[5] = { CW_SCHED_PHASE_RESV, CW_SCHED_PHASE_RESV,
						    CW_SCHED_PHASE_SHARE, CW_SCHED_PHASE_RESV,
						    CW_SCHED_PHASE_SHARE };

	clients(c, 2, 10, 10 * MS);
	r.s[0] = rbfq_sched(q, 2);
	bd_go(&r);
	CU_ASSERT_EQUAL(r.err, 0);
	CU_ASSERT_EQUAL_FATAL(r.n_log, 20);
	for (size_t k = 0; k < r.n_log; k++) {
		CU_ASSERT_EQUAL(r.log[k].t, (int64_t)k * 10 * MS);
		CU_ASSERT_EQUAL(r.log[k].client, who[k % 5]);
		CU_ASSERT_EQUAL(r.log[k].phase, why[k % 5]);
	}
	bd_done(&r);
}

static void test_weights(void)
{
	struct cw_sched_client q[2] = { { .weight = 1 }, { .weight = 2 } };
	struct bd_client c[2];
	struct bd_run r = { .c = c, .n = 2, .end_ns = 10000 * MS };
	unsigned n[2] = { 0 };
	int64_t a, b;

	clients(c, 2, 4, 10 * MS);
	r.s[0] = rbfq_sched(q, 2);
	bd_go(&r);
	CU_ASSERT_EQUAL(r.err, 0);
	CU_ASSERT_FATAL(r.n_log >= 6);
	for (size_t k = 0; k < 6; k++) {
		n[r.log[k].client]++;
		CU_ASSERT_EQUAL(r.log[k].phase, CW_SCHED_PHASE_SHARE);
	}
	CU_ASSERT_EQUAL(n[0], 2);
	CU_ASSERT_EQUAL(n[1], 4);
	a = bd_served(&r, 0, -1, 0, r.end_ns);
	b = bd_served(&r, 1, -1, 0, r.end_ns);
	CU_ASSERT(llabs(2 * a - b) <= 2 * 10 * MS);
	bd_done(&r);
}

/* Reservations 20% and 10% held to the same limits: in 200 ms of 10 ms
 * requests, 4 and 2 dispatches, every one for the reservation. */
static void test_reservations(void)
{
	struct cw_sched_client q[2] = { { .resv_ppm = 200000, .weight = 1, .limit_ppm = 200000 },
					{ .resv_ppm = 100000, .weight = 1, .limit_ppm = 100000 } };
	struct bd_client c[2];
	struct bd_run r = { .c = c, .n = 2, .end_ns = 200 * MS };
	unsigned n[2] = { 0 };

	clients(c, 2, 8, 10 * MS);
	r.s[0] = rbfq_sched(q, 2);
	bd_go(&r);
	CU_ASSERT_EQUAL(r.err, 0);
	for (size_t k = 0; k < r.n_log; k++) {
		n[r.log[k].client]++;
		CU_ASSERT_EQUAL(r.log[k].phase, CW_SCHED_PHASE_RESV);
	}
	CU_ASSERT_EQUAL(n[0], 4);
	CU_ASSERT_EQUAL(n[1], 2);
	bd_done(&r);
}

/* Over-reserved (80% + 40%): the capacity goes 2:1, all in the local phase. */
static void test_overbooked(void)
{
	struct cw_sched_client q[2] = { { .resv_ppm = 800000, .weight = 1 },
					{ .resv_ppm = 400000, .weight = 5 } };
	struct bd_client c[2];
	struct bd_run r = { .c = c, .n = 2, .end_ns = 3000 * MS };
	int64_t a, b;

	clients(c, 2, 8, 10 * MS);
	r.s[0] = rbfq_sched(q, 2);
	bd_go(&r);
	for (size_t k = 0; k < r.n_log; k++)
		CU_ASSERT_EQUAL(r.log[k].phase, CW_SCHED_PHASE_RESV);
	a = bd_served(&r, 0, -1, 0, r.end_ns);
	b = bd_served(&r, 1, -1, 0, r.end_ns);
	CU_ASSERT(llabs(a - 2 * b) <= 3 * 10 * MS);
	bd_done(&r);
}

static void test_limit(void)
{
	struct cw_sched_client q[2] = { { .weight = 8, .limit_ppm = 100000 }, { .weight = 1 } };
	struct cw_sched_client_stats st;
	struct bd_client c[2];
	struct bd_run r = { .c = c, .n = 1, .end_ns = 10000 * MS };
	struct cw_sched_req a = { .cls = CW_SCHED_BE, .client = 1, .service_ns = 10 * MS };
	struct cw_sched_req b = a;
	struct cw_sched_decision d;
	struct cw_sched *s;
	int64_t served;

	/* a request at its limit waits, and the scheduler says until when */
	s = rbfq_sched(q, 1);
	CU_ASSERT(cw_sched_enqueue(s, &a, 0) == 0 && cw_sched_enqueue(s, &b, 0) == 0);
	CU_ASSERT(cw_sched_next(s, 0, &d) == 0 && d.verdict == CW_SCHED_DISPATCH && d.req == &a);
	CU_ASSERT(cw_sched_complete(s, &a, 10 * MS, 10 * MS) == 0);
	CU_ASSERT(cw_sched_next(s, 10 * MS, &d) == 0);
	CU_ASSERT_EQUAL(d.verdict, CW_SCHED_WAIT);
	CU_ASSERT_EQUAL(d.until_ns, 100 * MS);	/* 10 ms at 10% */
	CU_ASSERT(cw_sched_next(s, 100 * MS, &d) == 0 && d.verdict == CW_SCHED_DISPATCH &&
		  d.req == &b);
	CU_ASSERT(cw_sched_complete(s, &b, 110 * MS, 10 * MS) == 0);
	CU_ASSERT(cw_sched_get_client_stats(s, 1, &st) == 0);
	CU_ASSERT_EQUAL(st.throttled_ns, 100 * MS);	/* b waited from 0 to 100 ms */
	CU_ASSERT_EQUAL(st.requests, 2);
	cw_sched_free(s);

	/* alone: exactly its limit; beside an unlimited client: no more */
	for (size_t n = 1; n <= 2; n++) {
		clients(c, 2, 8, 10 * MS);
		r = (struct bd_run){ .c = c, .n = n, .end_ns = 10000 * MS };
		r.s[0] = rbfq_sched(q, 2);
		bd_go(&r);
		CU_ASSERT_EQUAL(r.err, 0);
		served = bd_served(&r, 0, -1, 0, r.end_ns);
		CU_ASSERT(served <= r.end_ns / 10 + 10 * MS);
		CU_ASSERT(served >= r.end_ns / 10 - 10 * MS);
		if (n == 2)	/* work-conserving: the other gets the rest */
			CU_ASSERT(bd_served(&r, 1, -1, 0, r.end_ns) >= r.end_ns - served - 20 * MS);
		bd_done(&r);
	}
}

/* How far client b's service runs ahead of client a's from time t0 on. */
static int64_t lead(const struct bd_run *r, int64_t t0)
{
	int64_t sa = 0, sb = 0, max = INT64_MIN;

	for (size_t k = 0; k < r->n_log; k++) {
		if (r->log[k].t < t0)
			continue;
		if (r->log[k].client == 0)
			sa += r->log[k].cost;
		else
			sb += r->log[k].cost;
		max = CW_MAX(max, sb - sa);
	}
	return max;
}

static int64_t idle_lead(int64_t credit, int64_t back_at)
{
	struct cw_sched_client q[2] = { { .weight = 1 }, { .weight = 1, .idle_credit_ns = credit } };
	struct bd_client c[2];
	struct bd_run r = { .c = c, .n = 2, .end_ns = back_at + 1000 * MS };
	int64_t l;

	clients(c, 2, 8, 10 * MS);
	c[1].depth = 64;
	c[1].from_ns = back_at;
	r.s[0] = rbfq_sched(q, 2);
	bd_go(&r);
	CU_ASSERT_EQUAL(r.err, 0);
	l = lead(&r, back_at);
	bd_done(&r);
	return l;
}

static void test_idle_credit(void)
{
	int64_t none = idle_lead(0, 5000 * MS), some = idle_lead(50 * MS, 5000 * MS);
	int64_t longer = idle_lead(50 * MS, 50000 * MS);

	/* without credit the returning client is at most a request or two ahead */
	CU_ASSERT(none <= 2 * 10 * MS);
	/* with it, it runs ahead by its credit, never more ... */
	CU_ASSERT(some >= 50 * MS);
	CU_ASSERT(some <= 50 * MS + 2 * 10 * MS);
	/* ... however long it was idle */
	CU_ASSERT_EQUAL(longer, some);
}

static int64_t first_of(const struct bd_run *r, uint32_t client)
{
	for (size_t k = 0; k < r->n_log; k++)
		if (r->log[k].client == client)
			return r->log[k].t;
	return INT64_MAX;
}

/* a (weight 4) alone for 10 s with a deep queue: the global tags of its
 * queued requests fall behind real time.  b (weight 1) arrives: with tag
 * adjustment it is served at once and the two share 4:1; without it, b
 * starves until a's old tags catch up (the paper's Figure 14). */
static void test_tag_adjust(void)
{
	struct cw_sched_client q[2] = { { .weight = 4 }, { .weight = 1 } };
	struct cw_sched_rbfq_conf conf;

	for (int adjust = 1; adjust >= 0; adjust--) {
		struct bd_client c[2];
		struct bd_run r = { .c = c, .n = 2, .end_ns = 12000 * MS };
		int64_t a, b;

		cw_sched_rbfq_conf_init(&conf);
		conf.no_tag_adjust = !adjust;
		clients(c, 2, 8, 10 * MS);
		c[0].depth = 1000;
		c[1].from_ns = 10000 * MS;
		r.s[0] = bd_sched(cw_sched_beq_rbfq(), &conf);
		CU_ASSERT_FATAL(r.s[0] != NULL);
		for (size_t i = 0; i < 2; i++)
			CU_ASSERT(cw_sched_set_client(r.s[0], i + 1, &q[i]) == 0);
		bd_go(&r);
		CU_ASSERT_EQUAL(r.err, 0);
		a = bd_served(&r, 0, -1, 10000 * MS, r.end_ns);
		b = bd_served(&r, 1, -1, 10000 * MS, r.end_ns);
		if (adjust) {
			CU_ASSERT(first_of(&r, 1) <= 10000 * MS + 20 * MS);
			CU_ASSERT(llabs(a - 4 * b) <= 5 * 10 * MS);
		} else
			CU_ASSERT_EQUAL(b, 0);
		bd_done(&r);
	}
}

/* The ops alone: after global-phase dispatches of a client with a
 * reservation, its queued local tags are still 1/M apart, and its head
 * moved back by 1/M for each. */
static void test_local_spacing(void)
{
	const struct cw_sched_beq_ops *ops = cw_sched_beq_rbfq();
	struct cw_sched_client qa = { .resv_ppm = 100000, .weight = 10 }, qb = { .weight = 1 };
	struct cw_sched_req ra[8], rb[8];
	void *st = NULL;
	struct rbfq *f;
	struct client *ca;
	int64_t now = 0, head0;
	unsigned shares = 0;

	CU_ASSERT_FATAL(ops->init(NULL, &st) == 0);
	f = st;
	CU_ASSERT(ops->set_client(st, 1, &qa) == 0 && ops->set_client(st, 2, &qb) == 0);
	for (int i = 0; i < 8; i++) {
		ra[i] = (struct cw_sched_req){ .cls = CW_SCHED_BE, .client = 1, .service_ns = 10 * MS };
		rb[i] = (struct cw_sched_req){ .cls = CW_SCHED_BE, .client = 2, .service_ns = 10 * MS };
		CU_ASSERT(ops->push(st, &ra[i], 0) == 0 && ops->push(st, &rb[i], 0) == 0);
	}
	ca = find(f, 1);
	CU_ASSERT_FATAL(ca != NULL);
	head0 = head(ca)->l - ca->l_off;
	CU_ASSERT_EQUAL(head0, 0);
	/* t = 0: a's first request is due (local); then global until 100 ms */
	while (shares < 3) {
		struct cw_sched_req *r = ops->peek(st, now);

		CU_ASSERT_FATAL(r != NULL);
		ops->take(st, r);
		if (r->client == 1 && r->phase == CW_SCHED_PHASE_SHARE)
			shares++;
		now += 10 * MS;
	}
	CU_ASSERT_FATAL(ca->n >= 2);
	/* requests 2.. had tags 100, 200, ...; three global dispatches took
	 * requests 2, 3, 4 and gave back 3 x 100 ms, so the head (request 5,
	 * tag 400) is now due at 100 ms */
	CU_ASSERT_EQUAL(head(ca)->l - ca->l_off, 100 * MS);
	for (size_t k = 1; k < ca->n; k++) {
		const struct ent *a = &ca->q[(ca->head + k - 1) % ca->cap];
		const struct ent *b = &ca->q[(ca->head + k) % ca->cap];

		CU_ASSERT_EQUAL(b->l - a->l, 100 * MS);
	}
	ops->fini(st);
}

/* Section 4.1.2: a (30% reserved, weight 1) and b (weight 4); the disk
 * gets twice as slow at 5 s.  Before: 1:4 would give a 20%, so it gets
 * its 30% and b the rest; after, a still gets 30% of the cost it asked
 * for, b what is left. */
static void test_fluctuating(void)
{
	struct cw_sched_client q[2] = { { .resv_ppm = 300000, .weight = 1 }, { .weight = 4 } };
	struct bd_client c[2];
	struct bd_run r = { .c = c, .n = 2, .end_ns = 10000 * MS, .slow_num = 1, .slow2_num = 2,
			    .slow_den = 1, .slow_from = 5000 * MS };
	double want[2][2];

	CU_ASSERT(cw_sched_shares(q, 2, 1000000, want[0]) == 0);
	CU_ASSERT(cw_sched_shares(q, 2, 500000, want[1]) == 0);
	CU_ASSERT(fabs(want[0][0] - 0.3) < 1e-9 && fabs(want[0][1] - 0.7) < 1e-9);
	CU_ASSERT(fabs(want[1][0] - 0.3) < 1e-9 && fabs(want[1][1] - 0.2) < 1e-9);
	clients(c, 2, 8, 10 * MS);
	r.s[0] = rbfq_sched(q, 2);
	bd_go(&r);
	CU_ASSERT_EQUAL(r.err, 0);
	for (int half = 0; half < 2; half++) {
		int64_t t0 = half ? 5500 * MS : 500 * MS, t1 = half ? 10000 * MS : 5000 * MS;

		for (size_t i = 0; i < 2; i++) {
			double got = (double)bd_served(&r, i, -1, t0, t1) / (double)(t1 - t0);

			CU_ASSERT(fabs(got - want[half][i]) <= 0.01);
		}
	}
	bd_done(&r);
}

/* Random client sets on a disk of random speed: achieved shares match
 * the fluid allocation within 1% of the disk. */
static void test_brute_force(void)
{
	unsigned rng = 12345;
	double worst = 0;

	for (int round = 0; round < 100; round++) {
		struct cw_sched_client q[5];
		struct bd_client c[5];
		size_t n = (size_t)bd_rand(&rng, 2, 5);
		int64_t slow = bd_rand(&rng, 100, 250);	/* actual = cost * slow / 100 */
		struct bd_run r = { .c = c, .n = n, .end_ns = 20000 * MS, .slow_num = slow,
				    .slow2_num = slow, .slow_den = 100, .rng = rng };
		double want[5];

		memset(c, 0, sizeof(c));
		for (size_t i = 0; i < n; i++) {
			q[i] = (struct cw_sched_client){ .weight = (uint32_t)bd_rand(&rng, 1, 8) };
			if (bd_rand(&rng, 0, 1))
				q[i].resv_ppm = (uint32_t)bd_rand(&rng, 1, 40) * 10000;
			if (bd_rand(&rng, 0, 2) == 0)
				q[i].limit_ppm = q[i].resv_ppm + (uint32_t)bd_rand(&rng, 1, 30) * 10000;
			c[i] = (struct bd_client){ .id = i + 1, .depth = 4,
						   .cost_ns = bd_rand(&rng, 1, 10) * MS };
			c[i].cost_max_ns = c[i].cost_ns * bd_rand(&rng, 1, 3);
		}
		CU_ASSERT_FATAL(cw_sched_shares(q, n, (uint32_t)(100000000 / slow), want) == 0);
		r.s[0] = rbfq_sched(q, n);
		bd_go(&r);
		CU_ASSERT_EQUAL(r.err, 0);
		for (size_t i = 0; i < n; i++) {
			double got = (double)bd_served(&r, i, -1, 2000 * MS, r.end_ns) /
				     (double)(r.end_ns - 2000 * MS);
			double err = fabs(got - want[i]);

			worst = CW_MAX(worst, err);
			if (err > 0.01)
				printf("\n  round %d client %zu: resv %u w %u limit %u cost %lld-%lld "
				       "slow %lld: got %.4f want %.4f", round, i, q[i].resv_ppm,
				       q[i].weight, q[i].limit_ppm, (long long)c[i].cost_ns,
				       (long long)c[i].cost_max_ns, (long long)slow, got, want[i]);
			CU_ASSERT(err <= 0.01);
		}
		rng = r.rng;
		bd_done(&r);
	}
	printf("\n  worst share error over 100 random sets: %.4f\n", worst);
}

/* The paper's example (section 3): M = 50, 120, 75, 25 with w = 10, 20,
 * 5, 1 (in the paper's order c1..c4 after sorting), critical capacities
 * 270, 280, 550, 900 and the service at C = 900, 725, 310. */
static void test_paper_allocation(void)
{
	/* the paper's c1..c4 (sorted by M/w), given here unsorted */
	struct cw_sched_client q[4] = {
		{ .resv_ppm = 120, .weight = 20 }, { .resv_ppm = 75, .weight = 5 },
		{ .resv_ppm = 50, .weight = 10 }, { .resv_ppm = 25, .weight = 1 },
	};
	static const double crit[4] = { 270, 280, 550, 900 };
	static const size_t order[4] = { 2, 0, 1, 3 };
	static const struct { uint32_t cap; double s[4]; } at[] = {
		{ 900, { 500, 125, 250, 25 } },
		{ 725, { 400, 100, 200, 25 } },
		{ 310, { 140, 75, 70, 25 } },
		{ 135, { 60, 37.5, 25, 12.5 } },	/* below sum M: in proportion to M */
	};
	double cc[4], s[4];
	size_t ord[4];

	CU_ASSERT(cw_sched_critical(q, 4, cc, ord) == 0);
	for (size_t k = 0; k < 4; k++) {
		CU_ASSERT(fabs(cc[k] - crit[k]) < 1e-9);
		CU_ASSERT_EQUAL(ord[k], order[k]);
	}
	for (size_t t = 0; t < CW_ARRAY_SIZE(at); t++) {
		CU_ASSERT(cw_sched_shares(q, 4, at[t].cap, s) == 0);
		for (size_t i = 0; i < 4; i++)
			CU_ASSERT(fabs(s[i] * CW_SCHED_PPM - at[t].s[i]) < 1e-6);
	}
	/* Table 1: weights 1:5, minimum 1 each */
	{
		struct cw_sched_client v[2] = { { .resv_ppm = 1000, .weight = 1 },
						{ .resv_ppm = 1000, .weight = 5 } };

		CU_ASSERT(cw_sched_shares(v, 2, 1500, s) == 0);
		CU_ASSERT(fabs(s[0] - s[1]) < 1e-12);
		CU_ASSERT(cw_sched_shares(v, 2, 4000, s) == 0);
		CU_ASSERT(fabs(s[0] * CW_SCHED_PPM - 1000) < 1e-6);
		CU_ASSERT(cw_sched_shares(v, 2, 12000, s) == 0);
		CU_ASSERT(fabs(s[0] * CW_SCHED_PPM - 2000) < 1e-6);
	}
}

static void test_admission(void)
{
	struct cw_task t[2] = { { .period_ns = 100 * MS, .service_ns = 25 * MS },
				{ .period_ns = 3, .service_ns = 1 } };
	uint32_t others[2] = { 300000, 200000 }, cap, ppm;
	struct cw_sched_resv_verdict v;

	CU_ASSERT(cw_sched_be_capacity(t, 1, &cap) == 0 && cap == 750000);
	/* 1/3 rounds up to 333334 ppm used */
	CU_ASSERT(cw_sched_be_capacity(t, 2, &cap) == 0 && cap == 750000 - 333334);
	CU_ASSERT(cw_sched_be_capacity(NULL, 0, &cap) == 0 && cap == CW_SCHED_PPM);
	t[1].period_ns = 0;
	CU_ASSERT_EQUAL(cw_sched_be_capacity(t, 2, &cap), -EINVAL);

	CU_ASSERT(cw_sched_rate_ppm(200, 5 * MS, &ppm) == 0 && ppm == 1000000);
	CU_ASSERT(cw_sched_rate_ppm(3, 1, &ppm) == 0 && ppm == 1);	/* rounded up */
	CU_ASSERT_EQUAL(cw_sched_rate_ppm(201, 5 * MS, &ppm), -ERANGE);
	CU_ASSERT_EQUAL(cw_sched_rate_ppm(1, 0, &ppm), -EINVAL);

	CU_ASSERT(cw_sched_resv_admit(others, 2, 250000, 750000, &v) == 0);
	CU_ASSERT(v.fits && v.free_ppm == 250000);
	CU_ASSERT(cw_sched_resv_admit(others, 2, 250001, 750000, &v) == 0);
	CU_ASSERT(!v.fits);
	CU_ASSERT_EQUAL(v.free_ppm, 250000);
	CU_ASSERT(strstr(v.reason, "at most 25.00% is free") != NULL);
	CU_ASSERT(strstr(v.reason, "75.00%") != NULL);
	CU_ASSERT(cw_sched_resv_admit(others, 2, 1, 400000, &v) == 0 && !v.fits && v.free_ppm == 0);
	CU_ASSERT_EQUAL(cw_sched_resv_admit(others, 2, 1, 2000000, &v), -EINVAL);
}

static void test_errors(void)
{
	struct cw_sched_client bad[] = {
		{ .weight = 0 },
		{ .weight = 1, .resv_ppm = 200000, .limit_ppm = 100000 },
		{ .weight = 1, .resv_ppm = 2000000 },
		{ .weight = 1, .idle_credit_ns = -1 },
	};
	struct cw_sched_client ok = { .weight = 1, .resv_ppm = 100000, .limit_ppm = 100000 };
	struct cw_sched_client_stats st;
	struct cw_sched *s = bd_sched(cw_sched_beq_rbfq(), NULL), *fifo = bd_sched(NULL, NULL);
	struct cw_sched_rbfq_conf conf = { .size = 1 };

	CU_ASSERT_FATAL(s && fifo);
	for (size_t i = 0; i < CW_ARRAY_SIZE(bad); i++)
		CU_ASSERT_EQUAL(cw_sched_set_client(s, 1, &bad[i]), -EINVAL);
	CU_ASSERT_EQUAL(cw_sched_set_client(s, 1, &ok), 0);
	CU_ASSERT_EQUAL(cw_sched_get_client_stats(s, 2, &st), -ENOENT);
	CU_ASSERT_EQUAL(cw_sched_get_client_stats(s, 1, &st), 0);
	CU_ASSERT_EQUAL(cw_sched_set_client(fifo, 1, &ok), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(cw_sched_get_client_stats(fifo, 1, &st), -EOPNOTSUPP);
	CU_ASSERT(bd_sched(cw_sched_beq_rbfq(), &conf) == NULL);
	CU_ASSERT(cw_sched_beq_by_name("rbfq") == cw_sched_beq_rbfq());
	CU_ASSERT(cw_sched_beq_by_name("fifo") == cw_sched_beq_fifo());
	CU_ASSERT(cw_sched_beq_by_name("sfc") == cw_sched_beq_sfc());
	CU_ASSERT(cw_sched_beq_by_name("lifo") == NULL);
	cw_sched_free(s);
	cw_sched_free(fifo);
}

/* Changing a client's QoS while it is backlogged takes effect without a
 * request lost: its weight goes from 1 to 3 after 2 s. */
static void test_change_live(void)
{
	struct cw_sched_client q[2] = { { .weight = 1 }, { .weight = 1 } };
	struct cw_sched_client_stats st[2];
	struct bd_client c[2];
	struct bd_run r = { .c = c, .n = 2, .end_ns = 2000 * MS };
	int64_t a, b;

	clients(c, 2, 8, 10 * MS);
	r.s[0] = rbfq_sched(q, 2);
	bd_go(&r);
	q[0].weight = 3;
	CU_ASSERT(cw_sched_set_client(r.s[0], 1, &q[0]) == 0);
	r.end_ns = 6000 * MS;
	bd_go(&r);
	CU_ASSERT_EQUAL(r.err, 0);
	a = bd_served(&r, 0, -1, 0, 2000 * MS);
	b = bd_served(&r, 1, -1, 0, 2000 * MS);
	CU_ASSERT(llabs(a - b) <= 2 * 10 * MS);
	a = bd_served(&r, 0, -1, 2200 * MS, 6000 * MS);
	b = bd_served(&r, 1, -1, 2200 * MS, 6000 * MS);
	CU_ASSERT(llabs(a - 3 * b) <= 4 * 10 * MS);
	/* nothing lost: what was dispatched plus what is queued is what the
	 * clients sent (they keep 8 queued each) */
	for (size_t i = 0; i < 2; i++) {
		CU_ASSERT(cw_sched_get_client_stats(r.s[0], i + 1, &st[i]) == 0);
		CU_ASSERT(st[i].queued == 7 || st[i].queued == 8);	/* one may have just finished */
		CU_ASSERT_EQUAL(st[i].served_ns, bd_served(&r, i, -1, 0, r.now + 1));
	}
	bd_done(&r);
}

/* Figure 3: c1 reads both servers, c2 only s2; equal weights, 20% of
 * each server reserved for each client that uses it (the paper's M_ij:
 * not spread, so rho does not count).  With delta, c1's
 * service on s1 counts on s2, so s2 goes 20% to c1 (its reservation) and
 * 80% to c2: 120% and 80% of a server in all.  Without it, s2 is split
 * evenly. */
static void test_distributed(void)
{
	struct cw_sched_client q[2] = { { .resv_ppm = 200000, .weight = 1 },
					{ .resv_ppm = 200000, .weight = 1 } };

	for (int with = 1; with >= 0; with--) {
		struct bd_client c[2];
		struct bd_run r = { .c = c, .n = 2, .n_disks = 2, .end_ns = 10000 * MS };
		double c1s2, c2s2;

		clients(c, 2, 8, 10 * MS);
		c[0].disks = 3;
		c[1].disks = 2;
		for (unsigned d = 0; d < 2; d++)
			r.s[d] = rbfq_sched(q, 2);
		if (with)
			CU_ASSERT_FATAL(cw_sched_tracker_new(2, &r.trk) == 0);
		bd_go(&r);
		CU_ASSERT_EQUAL(r.err, 0);
		c1s2 = (double)bd_served(&r, 0, 1, 1000 * MS, r.end_ns) / 9e9;
		c2s2 = (double)bd_served(&r, 1, 1, 1000 * MS, r.end_ns) / 9e9;
		CU_ASSERT(fabs((double)bd_served(&r, 0, 0, 1000 * MS, r.end_ns) / 9e9 - 1) < 0.01);
		if (with) {
			CU_ASSERT(fabs(c1s2 - 0.2) < 0.02);
			CU_ASSERT(fabs(c2s2 - 0.8) < 0.02);
		} else {
			CU_ASSERT(fabs(c1s2 - 0.5) < 0.02);
			CU_ASSERT(fabs(c2s2 - 0.5) < 0.02);
		}
		bd_done(&r);
	}
}

/* Runs r: clients q[0] and q[1] (r->c) each keeping depth requests of
 * 10 ms queued on both disks, with a tracker. */
static void two_disks(struct bd_run *r, const struct cw_sched_client *q, unsigned depth)
{
	clients(r->c, 2, depth, 10 * MS);
	r->c[0].disks = r->c[1].disks = 3;
	for (unsigned d = 0; d < 2; d++)
		r->s[d] = rbfq_sched(q, 2);
	CU_ASSERT_FATAL(cw_sched_tracker_new(2, &r->trk) == 0);
	bd_go(r);
	CU_ASSERT_EQUAL(r->err, 0);
}

/* dmClock's semantics: a spread client's reservation (and limit) is its
 * total over every disk, each disk's tags advancing by what it got on the
 * others (rho for the reservation, delta for the limit).  Over two disks,
 * 40% of one disk reserved is 40% in all (not 40% on each), and a limit
 * of 30% holds the client to 30% in all; per-disk QoS gives twice that. */
static void test_spread(void)
{
	for (int spread = 1; spread >= 0; spread--) {
		/* reservation: a weight of 1 beside 100; limit: 100 beside 1 */
		struct cw_sched_client qa[2] = {
			{ .resv_ppm = 400000, .weight = 1, .spread = spread },
			{ .limit_ppm = 300000, .weight = 100, .spread = spread } };
		struct cw_sched_client qb[2] = { { .weight = 100 }, { .weight = 1 } };

		for (int k = 0; k < 2; k++) {
			struct cw_sched_client q[2] = { qa[k], qb[k] };
			struct bd_client c[2];
			struct bd_run r = { .c = c, .n = 2, .n_disks = 2, .end_ns = 10000 * MS };
			double got, want = k == 0 ? 0.4 : 0.3;

			two_disks(&r, q, 8);
			got = (double)bd_served(&r, 0, -1, 1000 * MS, r.end_ns) / 9e9;
			CU_ASSERT(fabs(got - (spread ? want : 2 * want)) < 0.02);
			/* and each disk gives half of it */
			CU_ASSERT(fabs((double)bd_served(&r, 0, 0, 1000 * MS, r.end_ns) / 9e9 -
				       got / 2) < 0.02);
			bd_done(&r);
		}
	}
	/* up to CW_SCHED_SPREAD_MAX disks' worth, only when spread */
	CU_ASSERT_EQUAL(cw_sched_client_check(&(struct cw_sched_client){
		.weight = 1, .resv_ppm = 3 * CW_SCHED_PPM, .spread = true }), 0);
	CU_ASSERT_EQUAL(cw_sched_client_check(&(struct cw_sched_client){
		.weight = 1, .resv_ppm = 3 * CW_SCHED_PPM }), -EINVAL);
}

/* dmClock's delayed tags: a spread limit over two disks with 16 requests
 * queued on each.  Tagged only on arrival, each disk counts the service
 * the other gave while its requests waited only with the next arrival,
 * and the client runs past its limit by about a queue's worth for the
 * first seconds; with retrack at the head it keeps to it from the start. */
static void test_retrack(void)
{
	double over[2];

	for (int with = 0; with < 2; with++) {
		struct cw_sched_client q[2] = { { .limit_ppm = 300000, .weight = 1, .spread = true },
						{ .weight = 1 } };
		struct bd_client c[2];
		struct bd_run r = { .c = c, .n = 2, .n_disks = 2, .end_ns = 2000 * MS,
				    .retrack = with };

		two_disks(&r, q, 16);
		/* 30% of one disk over 2 s is 600 ms of service */
		over[with] = (double)bd_served(&r, 0, -1, 0, r.end_ns) / (0.3 * 2e9) - 1;
		bd_done(&r);
	}
	printf("(over the limit in 2 s: %.3f tagged on arrival, %.3f with retrack) ",
	       over[0], over[1]);
	/* 16 requests of 10 ms over 600 ms on arrival; one a disk at the
	 * start (two in all, 3.3%) with retrack */
	CU_ASSERT(over[0] > 0.15);
	CU_ASSERT(over[1] < 0.04);
}

/* Delayed tags change when, not what: weights 1:2:4 over two disks, one
 * weight-4 client leaving at 2 s and another arriving at 3 s (its tags
 * start from now, the others' are adjusted), get the same shares tagged
 * at the head as on arrival, each within 2% of its weight's part. */
static void test_retrack_weights(void)
{
	double got[2][4];

	for (int with = 0; with < 2; with++) {
		struct cw_sched_client q[4] = { { .weight = 1 }, { .weight = 2 }, { .weight = 4 },
						{ .weight = 4 } };
		struct bd_client c[4];
		struct bd_run r = { .c = c, .n = 4, .n_disks = 2, .end_ns = 9000 * MS,
				    .retrack = with };
		int64_t total = 0;

		clients(c, 4, 8, 10 * MS);
		for (size_t i = 0; i < 4; i++)
			c[i].disks = 3;
		c[2].to_ns = 2000 * MS;
		c[3].from_ns = 3000 * MS;
		for (unsigned d = 0; d < 2; d++)
			r.s[d] = rbfq_sched(q, 4);
		CU_ASSERT_FATAL(cw_sched_tracker_new(2, &r.trk) == 0);
		bd_go(&r);
		CU_ASSERT_EQUAL(r.err, 0);
		for (size_t i = 0; i < 4; i++)
			total += bd_served(&r, i, -1, 4000 * MS, r.end_ns);
		for (size_t i = 0; i < 4; i++) {
			got[with][i] = (double)bd_served(&r, i, -1, 4000 * MS, r.end_ns) / (double)total;
			if (i != 2)
				CU_ASSERT(fabs(got[with][i] - q[i].weight / 7.0) < 0.02);
		}
		bd_done(&r);
	}
	printf("(on arrival %.3f %.3f %.3f, at the head %.3f %.3f %.3f) ", got[0][0], got[0][1],
	       got[0][3], got[1][0], got[1][1], got[1][3]);
	for (size_t i = 0; i < 4; i++)
		CU_ASSERT(fabs(got[0][i] - got[1][i]) < 0.02);
}

/* The per-disk step the daemon uses, one record per disk and the totals
 * kept by the caller: the same delta and rho as the tracker. */
static void test_track_step(void)
{
	struct cw_sched_track d[2] = { { 0 } };
	struct cw_sched_req r = { .cls = CW_SCHED_BE, .client = 1, .cost_ns = 7,
				  .service_ns = 100 };
	int64_t total = 0, total_resv = 0, cost, resv;

	cw_sched_track_tag(&d[0], total, total_resv, &r);
	CU_ASSERT(r.other_ns == 0 && r.other_resv_ns == 0);
	r.phase = CW_SCHED_PHASE_RESV;
	cw_sched_track_done(&d[1], &r, &cost, &resv);
	CU_ASSERT(cost == 7 && resv == 7);
	total += cost;
	total_resv += resv;
	r.phase = CW_SCHED_PHASE_SHARE;
	cw_sched_track_done(&d[0], &r, &cost, &resv);
	CU_ASSERT(cost == 7 && resv == 0);
	total += cost;
	cw_sched_track_tag(&d[0], total, total_resv, &r);
	CU_ASSERT(r.other_ns == 7 && r.other_resv_ns == 7);	/* disk 1's only */
	cw_sched_track_tag(&d[1], total, total_resv, &r);
	CU_ASSERT(r.other_ns == 7 && r.other_resv_ns == 0);	/* disk 0's only */
	cw_sched_track_tag(&d[1], total, total_resv, &r);
	CU_ASSERT(r.other_ns == 0 && r.other_resv_ns == 0);
}

static const struct cw_sched_share_out *row(const struct cw_sched_share_out *rows, size_t n,
					    uint64_t client)
{
	for (size_t k = 0; k < n; k++)
		if (rows[k].client == client)
			return &rows[k];
	CU_FAIL_FATAL("no row for the client");
	return NULL;
}

/* Received against due, by hand: weights 1:2:4 backlogged with 20% of a
 * light client's disk left to them; a reservation short of 98%; a limit
 * overrun; the same client on two disks summed. */
static void test_share_table(void)
{
	const int64_t T = 1000 * MS;
	struct cw_sched_share_in in[] = {
		{ .client = 1, .disk = 1, .qos = { .weight = 1 }, .served_ns = 100 * MS, .busy_ns = T },
		{ .client = 2, .disk = 1, .qos = { .weight = 2 }, .served_ns = 200 * MS, .busy_ns = T },
		{ .client = 3, .disk = 1, .qos = { .weight = 4 }, .served_ns = 500 * MS, .busy_ns = T },
		{ .client = 4, .disk = 1, .qos = { .weight = 9 }, .served_ns = 150 * MS,
		  .busy_ns = T / 2 },
		{ .client = 5, .disk = 2, .qos = { .weight = 1, .resv_ppm = 300000 },
		  .served_ns = 280 * MS, .resv_ns = 280 * MS, .busy_ns = T, .requests = 280 },
		{ .client = 6, .disk = 2, .qos = { .weight = 1, .limit_ppm = 100000 },
		  .served_ns = 120 * MS, .busy_ns = T, .throttled_ns = 300 * MS, .requests = 120 },
		{ .client = 7, .disk = 2, .qos = { .weight = 1 }, .served_ns = 490 * MS, .busy_ns = T },
		{ .client = 1, .disk = 2, .qos = { .weight = 1 }, .served_ns = 50 * MS, .busy_ns = 0 },
	};
	struct cw_sched_share_out *rows;
	const struct cw_sched_share_out *o;
	size_t n;

	CU_ASSERT_FATAL(cw_sched_share_table(in, CW_ARRAY_SIZE(in), T, &rows, &n) == 0);
	CU_ASSERT_EQUAL(n, 7);
	CU_ASSERT_EQUAL(rows[0].client, 1);	/* order of first appearance */
	/* disk 1: the backlogged three got 80% together: due 1:2:4 of it */
	o = row(rows, n, 1);
	CU_ASSERT(fabs(o->received - 0.15) < 1e-9);	/* 10% + 5% on disk 2 */
	CU_ASSERT(fabs(o->due - (0.8 / 7 + 0.05)) < 1e-6);
	CU_ASSERT(o->backlogged && o->resv_met && o->limit_held);
	CU_ASSERT(fabs(row(rows, n, 3)->due - 0.8 * 4 / 7) < 1e-6);
	o = row(rows, n, 4);	/* light: due what it got */
	CU_ASSERT(!o->backlogged && fabs(o->due - 0.15) < 1e-9);
	/* disk 2: 28% (and one request of 1 ms) of 30% is short of 98% */
	o = row(rows, n, 5);
	CU_ASSERT(fabs(o->reserved - 0.3) < 1e-9 && !o->resv_met);
	o = row(rows, n, 6);
	CU_ASSERT(fabs(o->limit - 0.1) < 1e-9 && !o->limit_held && fabs(o->throttled - 0.3) < 1e-9);
	CU_ASSERT(fabs(o->due - 0.1) < 1e-6);	/* never more than its limit */
	free(rows);
	/* at 29.35% and a request (1.05 ms) the reservation is met (98% of
	 * 30% is 29.4%); at 10.25% less a request (0.85 ms), the limit held */
	in[4].served_ns = 2935 * MS / 10;
	in[5].served_ns = 1025 * MS / 10;
	CU_ASSERT_FATAL(cw_sched_share_table(in, CW_ARRAY_SIZE(in), T, &rows, &n) == 0);
	CU_ASSERT(row(rows, n, 5)->resv_met && row(rows, n, 6)->limit_held);
	free(rows);
	/* a disk faster than its model: due is of what it gave, over 100% */
	for (size_t i = 0; i < 4; i++)
		in[i].served_ns *= 3;
	CU_ASSERT_FATAL(cw_sched_share_table(in, CW_ARRAY_SIZE(in), T, &rows, &n) == 0);
	CU_ASSERT(fabs(row(rows, n, 3)->due - 2.4 * 4 / 7) < 1e-6);
	CU_ASSERT(fabs(row(rows, n, 3)->received - 1.5) < 1e-9);
	free(rows);
	CU_ASSERT_EQUAL(cw_sched_share_table(in, CW_ARRAY_SIZE(in), 0, &rows, &n), -EINVAL);
	in[0].qos.weight = 0;
	CU_ASSERT_EQUAL(cw_sched_share_table(in, CW_ARRAY_SIZE(in), T, &rows, &n), -EINVAL);
}

/* The table against real orders: weights 1:2:4 saturating one disk get
 * within 2% of their due under RBFQ and far from it under FIFO (the one
 * with more requests queued wins there). */
static void test_share_table_run(void)
{
	for (int rbfq = 1; rbfq >= 0; rbfq--) {
		struct cw_sched_client q[3] = { { .weight = 1 }, { .weight = 2 }, { .weight = 4 } };
		struct bd_client c[3];
		struct bd_run r = { .c = c, .n = 3, .end_ns = 5000 * MS };
		struct cw_sched_share_in in[3];
		struct cw_sched_share_out *rows;
		double worst = 0;
		size_t n;

		clients(c, 3, 4, 10 * MS);
		c[0].depth = 16;
		if (rbfq) {
			r.s[0] = rbfq_sched(q, 3);
		} else {
			r.s[0] = bd_sched(cw_sched_beq_fifo(), NULL);
			CU_ASSERT_FATAL(r.s[0] != NULL);
		}
		bd_go(&r);
		CU_ASSERT_EQUAL(r.err, 0);
		for (size_t i = 0; i < 3; i++)
			in[i] = (struct cw_sched_share_in){
				.client = i + 1, .disk = 1, .qos = q[i], .busy_ns = 4000 * MS,
				.served_ns = bd_served(&r, i, 0, 1000 * MS, r.end_ns) };
		CU_ASSERT_FATAL(cw_sched_share_table(in, 3, 4000 * MS, &rows, &n) == 0);
		for (size_t i = 0; i < n; i++)
			worst = CW_MAX(worst, fabs(rows[i].received - rows[i].due));
		CU_ASSERT(rbfq ? worst < 0.02 : worst > 0.1);
		free(rows);
		bd_done(&r);
	}
}

/* The tracker by hand: delta is what the client got elsewhere since its
 * previous request here; rho the reservation part of it. */
static void test_tracker(void)
{
	struct cw_sched_tracker *t;
	struct cw_sched_req r = { .cls = CW_SCHED_BE, .client = 7, .service_ns = 5 };

	CU_ASSERT_FATAL(cw_sched_tracker_new(3, &t) == 0);
	CU_ASSERT(cw_sched_tracker_tag(t, 0, &r) == 0 && r.other_ns == 0 && r.other_resv_ns == 0);
	r.phase = CW_SCHED_PHASE_RESV;
	CU_ASSERT(cw_sched_tracker_done(t, 1, &r) == 0);	/* 5 on disk 1, reserved */
	r.phase = CW_SCHED_PHASE_SHARE;
	CU_ASSERT(cw_sched_tracker_done(t, 2, &r) == 0);	/* 5 on disk 2 */
	CU_ASSERT(cw_sched_tracker_done(t, 0, &r) == 0);	/* 5 on disk 0: not "other" */
	CU_ASSERT(cw_sched_tracker_tag(t, 0, &r) == 0);
	CU_ASSERT_EQUAL(r.other_ns, 10);
	CU_ASSERT_EQUAL(r.other_resv_ns, 5);
	CU_ASSERT(cw_sched_tracker_tag(t, 0, &r) == 0 && r.other_ns == 0);	/* nothing new */
	CU_ASSERT(cw_sched_tracker_tag(t, 1, &r) == 0);
	CU_ASSERT_EQUAL(r.other_ns, 10);	/* disks 0 and 2 */
	CU_ASSERT_EQUAL(r.other_resv_ns, 0);
	CU_ASSERT_EQUAL(cw_sched_tracker_tag(t, 3, &r), -EINVAL);
	cw_sched_tracker_free(t);
	cw_sched_tracker_free(NULL);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("rbfq", NULL, NULL);

	cwtest_add(s, "paper example (Table 3)", test_paper_example);
	cwtest_add(s, "weights 1:2", test_weights);
	cwtest_add(s, "reservations 2:1", test_reservations);
	cwtest_add(s, "overbooked reservations", test_overbooked);
	cwtest_add(s, "limit", test_limit);
	cwtest_add(s, "idle credit", test_idle_credit);
	cwtest_add(s, "tag adjustment", test_tag_adjust);
	cwtest_add(s, "local tags after global service", test_local_spacing);
	cwtest_add(s, "fluctuating capacity", test_fluctuating);
	cwtest_add(s, "brute force against the fluid allocation", test_brute_force);
	cwtest_add(s, "paper allocation and critical capacities", test_paper_allocation);
	cwtest_add(s, "admission of reservations", test_admission);
	cwtest_add(s, "errors", test_errors);
	cwtest_add(s, "QoS changed while running", test_change_live);
	cwtest_add(s, "distributed delta (Figure 3)", test_distributed);
	cwtest_add(s, "tracker", test_tracker);
	cwtest_add(s, "spread reservation and limit (dmClock)", test_spread);
	cwtest_add(s, "tracker step per disk", test_track_step);
	cwtest_add(s, "delayed delta and rho at the head (retrack)", test_retrack);
	cwtest_add(s, "delayed tags keep the weights", test_retrack_weights);
	cwtest_add(s, "received against due", test_share_table);
	cwtest_add(s, "received against due under RBFQ and FIFO", test_share_table_run);
	return cwtest_run();
}
