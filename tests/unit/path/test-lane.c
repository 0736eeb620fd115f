/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: the lane's dispatch step (cw_path_lane_*) with the clock
 * injected and no engine: the charges of a real-time and a best-effort
 * piece from a disk model; under delta-l a stream's released request
 * before best effort larger than the slack, smaller best effort first;
 * a WAIT verdict as the time to call again; one request in service
 * until its completion frees the lane; the FIFO keeping queue_depth in
 * flight and taking back what did not start; the RBFQ order serving a
 * second client before the first's backlog and its limit asking for a
 * wake-up; and a lane getting its scheduling core with work queued.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include <clockwise/path.h>
#include <clockwise/sched-beq.h>

#include "cwtest.h"

/* A caller's piece: the item inside, not first, as in the daemon. */
struct piece {
	int id;
	struct cw_path_item it;
};

static struct piece *piece_of(struct cw_path_item *it)
{
	return (struct piece *)(void *)((char *)it - offsetof(struct piece, it));
}

/* A stream's piece: stream s, T, C, arriving at t. */
static void rt(struct piece *p, int id, uint64_t s, int64_t t_ns, int64_t c_ns, int64_t at)
{
	struct cw_sched_stream ss = { .id = s, .period_ns = t_ns, .service_ns = c_ns };

	p->id = id;
	cw_path_item_init(&p->it, p, at);
	cw_path_charge_rt(&p->it, &ss, false, 0, 4096);
}

/* A best-effort piece of expected service c, client cl, arriving at t. */
static void be(struct piece *p, int id, int64_t c_ns, uint64_t cl, int64_t at)
{
	p->id = id;
	cw_path_item_init(&p->it, p, at);
	p->it.sr.cls = CW_SCHED_BE;
	p->it.sr.service_ns = c_ns;
	p->it.sr.cost_ns = c_ns;
	p->it.sr.client = cl;
}

static struct cw_sched *new_sched(enum cw_sched_policy pol, int64_t delta_l, int64_t idle_be)
{
	struct cw_sched_opts o;
	struct cw_sched *s = NULL;

	cw_sched_opts_init(&o);
	o.policy = pol;
	o.delta_l_ns = delta_l;
	o.idle_be_ns = idle_be;
	CU_ASSERT_EQUAL_FATAL(cw_sched_new(&o, &s), 0);
	return s;
}

/* The id of the one piece the lane starts at now (-1: none), and the
 * wake-up it asked for. */
static int start_one(struct cw_path_lane *l, int64_t now, int64_t *wait)
{
	struct cw_path_item *it[1];
	int64_t w;
	int n = cw_path_lane_next(l, now, it, 1, wait ? wait : &w);

	CU_ASSERT_FATAL(n >= 0 && n <= 1);
	return n ? piece_of(it[0])->id : -1;
}

static void test_charges(void)
{
	struct cw_model m;
	struct piece p;
	struct cw_sched_stream ss = { .id = 7, .period_ns = 100, .service_ns = 10,
				      .deadline_ns = 80 };
	int64_t bound, mean;

	CU_ASSERT_FATAL(cw_model_preset("atlas2", &m) == 0);
	cw_path_item_init(&p.it, &p, 5);
	cw_path_charge_rt(&p.it, &ss, true, 1 << 20, 65536);
	CU_ASSERT_EQUAL(p.it.sr.cls, CW_SCHED_RT);
	CU_ASSERT_EQUAL(p.it.sr.stream, 7);
	CU_ASSERT_EQUAL(p.it.sr.period_ns, 100);
	CU_ASSERT_EQUAL(p.it.sr.service_ns, 10);
	CU_ASSERT_EQUAL(p.it.sr.rel_deadline_ns, 80);
	CU_ASSERT(p.it.sr.same_job);
	CU_ASSERT_EQUAL(p.it.sr.arrival_ns, 5);
	CU_ASSERT_PTR_EQUAL(p.it.sr.user, &p);
	CU_ASSERT_EQUAL(p.it.sr.offset_bytes, 1 << 20);
	CU_ASSERT_EQUAL(p.it.sr.length_bytes, 65536);

	/* best effort: the bound anywhere on the disk, the mean cost */
	cw_path_item_init(&p.it, &p, 5);
	cw_path_charge_be(&p.it, &m, 4096, 65536);
	CU_ASSERT_FATAL(cw_model_service_ns(&m, 0, 0, 65536, &bound) == 0);
	CU_ASSERT_FATAL(cw_model_mean_ns(&m, 65536, &mean) == 0);
	CU_ASSERT_EQUAL(p.it.sr.cls, CW_SCHED_BE);
	CU_ASSERT_EQUAL(p.it.sr.service_ns, bound);
	CU_ASSERT_EQUAL(p.it.sr.cost_ns, mean);
	CU_ASSERT(mean < bound);
	CU_ASSERT_FALSE(p.it.sr.same_job);	/* init cleared it */
	CU_ASSERT_EQUAL(p.it.sr.offset_bytes, 4096);
	/* a flush as 4 KiB, its length kept */
	cw_path_charge_be(&p.it, &m, 0, 0);
	CU_ASSERT_FATAL(cw_model_service_ns(&m, 0, 0, 4096, &bound) == 0);
	CU_ASSERT_EQUAL(p.it.sr.service_ns, bound);
	CU_ASSERT_EQUAL(p.it.sr.length_bytes, 0);
	/* a model that cannot say (no capacity): 1 ms, no cost */
	memset(&m, 0, sizeof(m));
	cw_path_item_init(&p.it, &p, 5);
	cw_path_charge_be(&p.it, &m, 0, 4096);
	CU_ASSERT_EQUAL(p.it.sr.service_ns, CW_NS_PER_MS);
	CU_ASSERT_EQUAL(p.it.sr.cost_ns, 0);
}

/* Under delta-l a best-effort piece goes before the stream's released
 * one only while it fits in the slack left (ΔL_r); one that does not
 * waits for the stream's request. */
static void test_rt_before_be(void)
{
	struct cw_sched *s = new_sched(CW_SCHED_DELTA_L, 20, 50);
	struct cw_path_lane l;
	struct piece small, big, a, b;
	struct cw_path_item *it[4];
	int64_t w;

	CU_ASSERT_FATAL(cw_path_lane_init(&l, s, 32, cw_sched_beq_fifo(), NULL) == 0);
	be(&big, 1, 40, 0, 0);
	rt(&a, 2, 1, 100, 10, 0);
	be(&small, 3, 15, 0, 0);
	CU_ASSERT_EQUAL(cw_path_lane_push(&l, &small.it, 0), 0);
	CU_ASSERT_EQUAL(cw_path_lane_push(&l, &a.it, 0), 0);
	CU_ASSERT_EQUAL(cw_path_lane_push(&l, &big.it, 0), 0);
	/* the small one fits in ΔL_r = 20: first, in the slack */
	CU_ASSERT_EQUAL(cw_path_lane_next(&l, 0, it, 4, &w), 1);
	CU_ASSERT_EQUAL(piece_of(it[0])->id, 3);
	CU_ASSERT_EQUAL(it[0]->sr.via, CW_SCHED_VIA_SLACK);
	CU_ASSERT_EQUAL(cw_path_lane_done(&l, it[0], 15, 15), 0);
	/* 5 left: the stream's request before the big one */
	CU_ASSERT_EQUAL(start_one(&l, 15, NULL), 2);
	CU_ASSERT_EQUAL(cw_path_lane_done(&l, &a.it, 25, 10), 0);
	/* no released request left: the big one on the idle disk */
	CU_ASSERT_EQUAL(start_one(&l, 25, NULL), 1);
	CU_ASSERT_EQUAL(big.it.sr.via, CW_SCHED_VIA_IDLE);
	CU_ASSERT_EQUAL(cw_path_lane_done(&l, &big.it, 65, 40), 0);
	CU_ASSERT_EQUAL(l.inflight, 0);

	/* the stream's next job and a big piece arriving together: the
	 * stream's goes first */
	rt(&b, 4, 1, 100, 10, 100);
	be(&big, 1, 40, 0, 100);
	CU_ASSERT_EQUAL(cw_path_lane_push(&l, &big.it, 100), 0);
	CU_ASSERT_EQUAL(cw_path_lane_push(&l, &b.it, 100), 0);
	CU_ASSERT_EQUAL(start_one(&l, 100, NULL), 4);
	CU_ASSERT_EQUAL(b.it.sr.via, CW_SCHED_VIA_RT);
	CU_ASSERT_EQUAL(cw_path_lane_done(&l, &b.it, 110, 10), 0);
	CU_ASSERT_EQUAL(start_one(&l, 110, NULL), 1);
	CU_ASSERT_EQUAL(cw_path_lane_done(&l, &big.it, 150, 40), 0);
	cw_path_lane_fini(&l);
	cw_sched_free(s);
}

/* A stream's request arriving before its release, with no slack to run
 * it early: the lane asks to be called at the release. */
static void test_wait(void)
{
	struct cw_sched *s = new_sched(CW_SCHED_DELTA_L, 0, 5);
	struct cw_path_lane l;
	struct piece a0, a;
	int64_t w = 0;

	CU_ASSERT_FATAL(cw_path_lane_init(&l, s, 32, NULL, NULL) == 0);
	rt(&a0, 1, 1, 50, 10, 0);
	CU_ASSERT_EQUAL(cw_path_lane_push(&l, &a0.it, 0), 0);
	CU_ASSERT_EQUAL(start_one(&l, 0, &w), 1);
	CU_ASSERT_EQUAL(w, -1);
	CU_ASSERT_EQUAL(cw_path_lane_done(&l, &a0.it, 10, 10), 0);
	rt(&a, 2, 1, 50, 10, 10);
	CU_ASSERT_EQUAL(cw_path_lane_push(&l, &a.it, 10), 0);
	CU_ASSERT_EQUAL(a.it.sr.release_ns, 50);
	CU_ASSERT_EQUAL(start_one(&l, 10, &w), -1);
	CU_ASSERT_EQUAL(w, 50);
	CU_ASSERT_EQUAL(start_one(&l, 49, &w), -1);
	CU_ASSERT_EQUAL(w, 50);
	CU_ASSERT_EQUAL(start_one(&l, 50, &w), 2);
	CU_ASSERT_EQUAL(w, -1);
	CU_ASSERT_EQUAL(cw_path_lane_done(&l, &a.it, 60, 10), 0);
	/* idle: nothing to start, no wake-up */
	CU_ASSERT_EQUAL(start_one(&l, 60, &w), -1);
	CU_ASSERT_EQUAL(w, -1);
	cw_path_lane_fini(&l);
	cw_sched_free(s);
}

/* With cw_sched one request is in service; its completion frees the
 * lane, and a start that failed (done with 0) frees it too. */
static void test_done_frees(void)
{
	struct cw_sched *s = new_sched(CW_SCHED_EDF, 0, 0);
	struct cw_path_lane l;
	struct piece p[3];
	struct cw_sched_stats st;
	int64_t w;

	CU_ASSERT_FATAL(cw_path_lane_init(&l, s, 32, NULL, NULL) == 0);
	for (int i = 0; i < 3; i++) {
		be(&p[i], i, 10, 0, 0);
		CU_ASSERT_EQUAL(cw_path_lane_push(&l, &p[i].it, 0), 0);
	}
	CU_ASSERT_EQUAL(start_one(&l, 0, &w), 0);
	CU_ASSERT(l.busy);
	CU_ASSERT_EQUAL(l.inflight, 1);
	CU_ASSERT_EQUAL(start_one(&l, 1, &w), -1);	/* busy */
	CU_ASSERT_EQUAL(w, -1);
	CU_ASSERT_EQUAL(cw_path_lane_done(&l, &p[0].it, 10, 10), 0);
	CU_ASSERT_FALSE(l.busy);
	CU_ASSERT_EQUAL(l.inflight, 0);
	CU_ASSERT_EQUAL(start_one(&l, 10, &w), 1);
	/* it never started (the engine refused it) */
	CU_ASSERT_EQUAL(cw_path_lane_done(&l, &p[1].it, 10, 0), 0);
	CU_ASSERT_EQUAL(start_one(&l, 10, &w), 2);
	/* only the request in service completes; another changes nothing */
	CU_ASSERT_EQUAL(cw_path_lane_done(&l, &p[0].it, 12, 2), -EINVAL);
	CU_ASSERT(l.busy);
	CU_ASSERT_EQUAL(l.inflight, 1);
	CU_ASSERT_EQUAL(cw_path_lane_done(&l, &p[2].it, 20, 10), 0);
	cw_sched_get_stats(s, &st);
	CU_ASSERT_EQUAL(st.be_done, 3);
	CU_ASSERT_FALSE(st.busy);
	cw_path_lane_fini(&l);
	cw_sched_free(s);
}

/* Without cw_sched: queue_depth in flight, in arrival order, at most max
 * a call; what did not start goes back to the head. */
static void test_fifo_depth(void)
{
	struct cw_path_lane l;
	struct piece p[6];
	struct cw_path_item *it[8];
	int64_t w;
	int n;

	CU_ASSERT_FATAL(cw_path_lane_init(&l, NULL, 3, cw_sched_beq_fifo(), NULL) == 0);
	CU_ASSERT(cw_path_lane_plain(&l));
	for (int i = 0; i < 6; i++) {
		p[i].id = i;
		cw_path_item_init(&p[i].it, &p[i], 0);	/* uncharged: a plain FIFO */
		CU_ASSERT_EQUAL(cw_path_lane_push(&l, &p[i].it, 0), 0);
	}
	n = cw_path_lane_next(&l, 0, it, 8, &w);
	CU_ASSERT_EQUAL_FATAL(n, 3);
	for (int i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(piece_of(it[i])->id, i);
	CU_ASSERT_EQUAL(w, -1);
	CU_ASSERT_EQUAL(l.inflight, 3);
	CU_ASSERT_EQUAL(cw_path_lane_next(&l, 0, it, 8, &w), 0);	/* full */
	CU_ASSERT_EQUAL(cw_path_lane_done(&l, &p[1].it, 5, 5), 0);
	CU_ASSERT_EQUAL(cw_path_lane_done(&l, &p[0].it, 5, 5), 0);
	/* two free, one asked for */
	CU_ASSERT_EQUAL(start_one(&l, 5, &w), 3);
	n = cw_path_lane_next(&l, 5, it, 8, &w);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(piece_of(it[0])->id, 4);
	/* the engine was full: 4 back at the head, before 5 */
	cw_path_lane_unstarted(&l, it, 1);
	CU_ASSERT_EQUAL(l.inflight, 2);
	CU_ASSERT_EQUAL(cw_path_lane_done(&l, &p[2].it, 9, 9), 0);
	n = cw_path_lane_next(&l, 9, it, 8, &w);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(piece_of(it[0])->id, 4);
	CU_ASSERT_EQUAL(piece_of(it[1])->id, 5);
	CU_ASSERT_FALSE(cw_path_lane_queued(&l));
	/* both back, then taken again in order */
	cw_path_lane_unstarted(&l, it, 2);
	CU_ASSERT(cw_path_lane_queued(&l));
	CU_ASSERT_EQUAL(start_one(&l, 9, &w), 4);
	CU_ASSERT_EQUAL(start_one(&l, 9, &w), 5);
	CU_ASSERT_EQUAL(l.inflight, 3);
	CU_ASSERT_EQUAL(start_one(&l, 9, &w), -1);
	cw_path_lane_fini(&l);
}

/* The RBFQ order on a lane without cw_sched (depth 1, so that the order
 * shows): a second client's piece goes before the first's backlog, where
 * arrival order would serve it last; a client past its limit makes the
 * lane ask for a wake-up. */
static void test_order(void)
{
	struct cw_path_lane l;
	struct piece a[4], b;
	struct cw_sched_client lim = { .weight = 1, .limit_ppm = 100000 };	/* 10% */
	int order[5], n = 0, id;
	int64_t w, now = 0;

	CU_ASSERT_FATAL(cw_path_lane_init(&l, NULL, 1, cw_sched_beq_rbfq(), NULL) == 0);
	CU_ASSERT_FALSE(cw_path_lane_plain(&l));
	for (int i = 0; i < 4; i++) {
		be(&a[i], i, 1000, 1, 0);
		CU_ASSERT_EQUAL(cw_path_lane_push(&l, &a[i].it, 0), 0);
	}
	be(&b, 9, 1000, 2, 0);
	CU_ASSERT_EQUAL(cw_path_lane_push(&l, &b.it, 0), 0);
	CU_ASSERT_EQUAL(cw_path_lane_held(&l), 5);
	while ((id = start_one(&l, now, &w)) >= 0) {
		struct piece *p = id == 9 ? &b : &a[id];

		CU_ASSERT_FATAL(n < 5);
		order[n++] = id;
		CU_ASSERT_EQUAL(start_one(&l, now, &w), -1);	/* depth 1 */
		now += 1000;
		CU_ASSERT_EQUAL(cw_path_lane_done(&l, &p->it, now, 1000), 0);
	}
	CU_ASSERT_EQUAL_FATAL(n, 5);
	CU_ASSERT(order[0] == 9 || order[1] == 9);
	CU_ASSERT_EQUAL(cw_path_lane_held(&l), 0);

	/* a limited client: after its first piece the order holds the rest
	 * back and says when one may go */
	CU_ASSERT_EQUAL(l.beq->set_client(l.beq_state, 3, &lim), 0);
	for (int i = 0; i < 2; i++) {
		be(&a[i], i, 1000, 3, now);
		CU_ASSERT_EQUAL(cw_path_lane_push(&l, &a[i].it, now), 0);
	}
	CU_ASSERT_EQUAL(start_one(&l, now, &w), 0);
	CU_ASSERT_EQUAL(cw_path_lane_done(&l, &a[0].it, now + 1000, 1000), 0);
	now += 1000;
	CU_ASSERT_EQUAL(start_one(&l, now, &w), -1);
	CU_ASSERT(w > now);
	CU_ASSERT_EQUAL(start_one(&l, w, &w), 1);
	cw_path_lane_fini(&l);
}

/* Streams come to the disk: what the order and the FIFO hold comes back,
 * the order's first, to be charged again into cw_sched. */
static void test_set_sched(void)
{
	struct cw_path_lane l;
	struct cw_sched *s = new_sched(CW_SCHED_DELTA_L, 100, 100);
	struct piece p[3];
	struct cw_path_item *it, *next;
	int n = 0;
	int64_t w;

	CU_ASSERT_FATAL(cw_path_lane_init(&l, NULL, 1, cw_sched_beq_rbfq(), NULL) == 0);
	for (int i = 0; i < 3; i++) {
		be(&p[i], i, 10, 1, 0);
		CU_ASSERT_EQUAL(cw_path_lane_push(&l, &p[i].it, 0), 0);
	}
	CU_ASSERT_EQUAL(start_one(&l, 0, &w), 0);
	CU_ASSERT_EQUAL(cw_path_lane_done(&l, &p[0].it, 10, 10), 0);
	for (it = cw_path_lane_set_sched(&l, s); it; it = next) {
		next = it->next;
		CU_ASSERT_EQUAL(piece_of(it)->id, ++n);
		CU_ASSERT_EQUAL(cw_path_lane_push(&l, it, 10), 0);
	}
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT_PTR_NULL(l.beq_state);
	CU_ASSERT_EQUAL(start_one(&l, 10, &w), 1);
	CU_ASSERT_EQUAL(start_one(&l, 10, &w), -1);	/* one in service */
	CU_ASSERT_EQUAL(cw_path_lane_done(&l, &p[1].it, 20, 10), 0);
	CU_ASSERT_EQUAL(start_one(&l, 20, &w), 2);
	CU_ASSERT_EQUAL(cw_path_lane_done(&l, &p[2].it, 30, 10), 0);
	cw_path_lane_fini(&l);
	cw_sched_free(s);
}

/* The lane ends: what a limit held back goes to the FIFO all the same. */
static void test_drain(void)
{
	struct cw_path_lane l;
	struct cw_sched_client lim = { .weight = 1, .limit_ppm = 1000 };
	struct piece p[3];
	int64_t w;

	CU_ASSERT_FATAL(cw_path_lane_init(&l, NULL, 8, cw_sched_beq_rbfq(), NULL) == 0);
	CU_ASSERT_EQUAL(l.beq->set_client(l.beq_state, 1, &lim), 0);
	for (int i = 0; i < 3; i++) {
		be(&p[i], i, 1000, 1, 0);
		CU_ASSERT_EQUAL(cw_path_lane_push(&l, &p[i].it, 0), 0);
	}
	CU_ASSERT_EQUAL(start_one(&l, 0, &w), 0);
	CU_ASSERT_EQUAL(start_one(&l, 0, &w), -1);
	CU_ASSERT(w > 0);
	cw_path_lane_drain(&l);
	CU_ASSERT(cw_path_lane_plain(&l));
	CU_ASSERT_EQUAL(start_one(&l, 0, &w), 1);
	CU_ASSERT_EQUAL(start_one(&l, 0, &w), 2);
	CU_ASSERT_EQUAL(l.inflight, 3);
	cw_path_lane_fini(&l);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("path-lane", NULL, NULL);

	cwtest_add(s, "charges", test_charges);
	cwtest_add(s, "delta-l: RT before BE larger than the slack", test_rt_before_be);
	cwtest_add(s, "WAIT gives a wake-up time", test_wait);
	cwtest_add(s, "completion frees the lane", test_done_frees);
	cwtest_add(s, "FIFO keeps queue_depth in flight", test_fifo_depth);
	cwtest_add(s, "the BE order", test_order);
	cwtest_add(s, "the lane gets its scheduling core", test_set_sched);
	cwtest_add(s, "drain", test_drain);
	return cwtest_run();
}
