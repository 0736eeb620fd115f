/*
 * Description: single-thread semantics of the slot reservation record in
 * each mode (lock-free, wait-free, mutex): a vacant run, a jump over a
 * booking ahead, deadline FAIL, ring wrap and recycling, commit/next/peek,
 * release, snake and thick requests, dummy slots, bad input; contention
 * with a stalled request (preempted or helped); the priority rule is a
 * strict order where the paper's is not.
 *
 * The test includes slots.c to reach the announce/step functions and
 * stall a request half way.
 */
#include "config.h"

#include <string.h>
#include "../../../libclockwise/slots/slots.c"
#include "cwtest.h"

static enum cw_slots_mode g_mode;

struct fixture {
	struct cw_slots_domain *dom;
	struct cw_slots *disk[3];
	struct cw_slots_ctx *a, *b;
};

static uint32_t write_dummy(void *arg, const struct cw_slots_req *req)
{
	return req->dir == CW_SLOTS_WRITE ? *(uint32_t *)arg : 0;
}

static void fx_open(struct fixture *f, uint32_t ring, int64_t now, uint32_t *dummy)
{
	struct cw_slots_domain_opts dopts = { .size = sizeof(dopts), .mode = g_mode,
					      .max_threads = 8, .max_window = 64, .max_slots = 32 };
	unsigned i;

	memset(f, 0, sizeof(*f));
	CU_ASSERT_FATAL(cw_slots_domain_new(&dopts, &f->dom) == 0);
	for (i = 0; i < 3; i++) {
		struct cw_slots_opts o = { .size = sizeof(o), .ring_slots = ring, .now_slot = now };

		if (dummy && i == 0) {
			o.dummy = write_dummy;
			o.dummy_arg = dummy;
		}
		CU_ASSERT_FATAL(cw_slots_new(f->dom, &o, &f->disk[i]) == 0);
	}
	CU_ASSERT_FATAL(cw_slots_ctx_new(f->dom, &f->a) == 0);
	CU_ASSERT_FATAL(cw_slots_ctx_new(f->dom, &f->b) == 0);
}

/* With one thread the occupancy hint is exact: a bit is set exactly for
 * the RESERVED slots of the current lap.  Returns the slots where not. */
static unsigned hint_errors(struct cw_slots *rec)
{
	int64_t now = cw_slots_now(rec), p;
	unsigned bad = 0;

	for (p = now; p < now + rec->ring; p++) {
		uint64_t i = (uint64_t)p & rec->mask, v = *cell_at(rec, p);
		bool bit = (*occ_word(rec, i) >> (i & (rec->occ_group - 1))) & 1;
		bool booked = cell_state(v) == C_RESERVED && cell_lap(v) == lap_of(rec, p);

		bad += bit != booked;
	}
	return bad;
}

static void fx_close(struct fixture *f)
{
	unsigned i;

	for (i = 0; i < 3; i++) {
		CU_ASSERT(hint_errors(f->disk[i]) == 0);
		CU_ASSERT(cw_slots_valid(f->disk[i]) == 0);
		cw_slots_free(f->disk[i]);
	}
	cw_slots_ctx_free(f->a);
	cw_slots_ctx_free(f->b);
	cw_slots_domain_free(f->dom);
}

static struct cw_slots_req rq(struct cw_slots *disk, int64_t start, int64_t deadline, uint32_t size,
			      enum cw_slots_dir dir)
{
	return (struct cw_slots_req){ .dir = dir, .shape = CW_SLOTS_SINGLE, .ndisks = 1,
				      .disks = { disk }, .start_slot = start,
				      .deadline_slot = deadline, .size_slots = size };
}

/* 1 when ctx holds slot p of disk, else 0. */
static int held_by(struct cw_slots *disk, int64_t p, struct cw_slots_ctx *ctx)
{
	uint32_t o;
	int r = cw_slots_owner(disk, p, &o, NULL);

	CU_ASSERT(r >= 0);
	return r == 1 && o == cw_slots_ctx_id(ctx);
}

static int64_t book(struct fixture *f, struct cw_slots_ctx *c, struct cw_slots_req r,
		    struct cw_slots_booking *b)
{
	int ret = cw_slots_reserve(c, &r, b);

	return ret == 0 ? b->first_slot : ret;
}

static void test_vacant(void)
{
	struct fixture f;
	struct cw_slots_booking b;
	int64_t p;

	fx_open(&f, 0, 0, NULL);
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 10, 20, 4, CW_SLOTS_READ), &b) == 10);
	CU_ASSERT(b.n_slots == 4);
	for (p = 8; p < 16; p++)
		CU_ASSERT(held_by(f.disk[0], p, f.a) == (p >= 10 && p < 14));
	fx_close(&f);
}

static void test_jump_and_fail(void)
{
	struct fixture f;
	struct cw_slots_booking b1, b2, b3;
	int64_t p;

	fx_open(&f, 0, 0, NULL);
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 10, 10, 10, CW_SLOTS_WRITE), &b1) == 10);
	/* 8..13 overlaps the booking: the search jumps past it. */
	CU_ASSERT(book(&f, f.b, rq(f.disk[0], 8, 30, 4, CW_SLOTS_READ), &b2) == 20);
	/* A short request still fits before it. */
	CU_ASSERT(book(&f, f.b, rq(f.disk[0], 8, 30, 2, CW_SLOTS_READ), &b3) == 8);
	/* Every start in [10, 18] overlaps [10, 24): FAIL, nothing changes. */
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 10, 18, 3, CW_SLOTS_READ), &b3) == CW_SLOTS_FAIL);
	for (p = 0; p < 40; p++) {
		int want = (p >= 8 && p < 10) || (p >= 20 && p < 24);

		CU_ASSERT(held_by(f.disk[0], p, f.b) == want);
	}
	/* Deadline one later: the first start that fits. */
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 10, 24, 3, CW_SLOTS_READ), &b3) == 24);
	fx_close(&f);
}

static void test_bad_input(void)
{
	struct fixture f, g;
	struct cw_slots_booking b;
	struct cw_slots_req r;

	fx_open(&f, 0, 0, NULL);
	fx_open(&g, 0, 0, NULL);
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 10, 20, 0, CW_SLOTS_READ), &b) == -EINVAL);
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 10, 9, 1, CW_SLOTS_READ), &b) == -EINVAL);
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], -1, 9, 1, CW_SLOTS_READ), &b) == -EINVAL);
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 0, 65, 1, CW_SLOTS_READ), &b) == -ERANGE);
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 0, 10, 33, CW_SLOTS_READ), &b) == -ERANGE);
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 1000000, 1000010, 1, CW_SLOTS_READ), &b) == -ERANGE);
	CU_ASSERT(book(&f, f.a, rq(g.disk[0], 0, 10, 1, CW_SLOTS_READ), &b) == -EINVAL);
	r = rq(f.disk[0], 0, 10, 1, CW_SLOTS_READ);
	r.ndisks = 2;
	CU_ASSERT(cw_slots_reserve(f.a, &r, &b) == -EINVAL);	/* single with two disks */
	r.shape = CW_SLOTS_THICK;
	r.disks[1] = f.disk[0];
	CU_ASSERT(cw_slots_reserve(f.a, &r, &b) == -EINVAL);	/* the same disk twice */
	r = rq(f.disk[0], 0, 10, 1, 7);
	CU_ASSERT(cw_slots_reserve(f.a, &r, &b) == -EINVAL);
	CU_ASSERT(cw_slots_reserve(f.a, NULL, &b) == -EINVAL);
	/* Nothing was booked by any of these. */
	CU_ASSERT(cw_slots_peek(f.disk[0], 0, 200, &(struct cw_slots_entry){ 0 }) == 0);
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 0, 10, 3, CW_SLOTS_READ), &b) == 0);
	CU_ASSERT(cw_slots_release(f.b, &b) == -EPERM);
	{
		struct cw_slots_booking forged = b;

		forged.req_.disks[0] = g.disk[0];	/* another domain's disk */
		CU_ASSERT(cw_slots_release(f.a, &forged) == -EINVAL);
		CU_ASSERT(cw_slots_commit(f.a, &forged, 1) == -EINVAL);
		forged = b;
		forged.n_slots = 0;
		CU_ASSERT(cw_slots_release(f.a, &forged) == -EINVAL);
	}
	CU_ASSERT(held_by(f.disk[0], 0, f.a) == 1);
	CU_ASSERT(cw_slots_owner(f.disk[0], -1, NULL, NULL) == -ERANGE);
	fx_close(&g);
	fx_close(&f);
}

static void test_commit_next_peek(void)
{
	struct fixture f;
	struct cw_slots_booking b1, b2, b3;
	struct cw_slots_entry e;

	fx_open(&f, 0, 0, NULL);
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 12, 12, 3, CW_SLOTS_WRITE), &b2) == 12);
	CU_ASSERT(book(&f, f.b, rq(f.disk[0], 5, 5, 2, CW_SLOTS_READ), &b1) == 5);
	CU_ASSERT(cw_slots_commit(f.a, &b2, 0xb2) == 0);
	CU_ASSERT(cw_slots_peek(f.disk[0], 0, 100, &e) == 1 && e.slot == 12);
	CU_ASSERT(cw_slots_commit(f.b, &b1, 0xb1) == 0);
	CU_ASSERT(cw_slots_commit(f.a, &b1, 0xb1) == -EINVAL);	/* not a's */
	CU_ASSERT(cw_slots_peek(f.disk[0], 0, 100, &e) == 1 && e.slot == 5 && e.cookie == 0xb1);
	CU_ASSERT(cw_slots_peek(f.disk[0], 6, 100, &e) == 1 && e.slot == 12);
	CU_ASSERT(cw_slots_now(f.disk[0]) == 0);	/* peek does not move now */

	CU_ASSERT(cw_slots_next(f.disk[0], 100, &e) == 1);
	CU_ASSERT(e.slot == 5 && e.n_slots == 2 && e.cookie == 0xb1 && e.dir == CW_SLOTS_READ);
	CU_ASSERT(cw_slots_now(f.disk[0]) == 6);
	CU_ASSERT(cw_slots_next(f.disk[0], 100, &e) == 1);
	CU_ASSERT(e.slot == 12 && e.n_slots == 3 && e.booking_slots == 3 && e.cookie == 0xb2 &&
		  e.dir == CW_SLOTS_WRITE);
	/* A booking nobody committed is dropped when its slot passes. */
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 40, 40, 2, CW_SLOTS_READ), &b3) == 40);
	CU_ASSERT(cw_slots_next(f.disk[0], 100, &e) == 0);
	CU_ASSERT(cw_slots_now(f.disk[0]) == 100);
	CU_ASSERT(cw_slots_commit(f.a, &b3, 1) == -ETIMEDOUT);
	CU_ASSERT(cw_slots_release(f.a, &b3) == 0);
	/* Windows behind now are clamped to now; entirely behind: FAIL. */
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 50, 99, 2, CW_SLOTS_READ), &b3) == CW_SLOTS_FAIL);
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 60, 120, 2, CW_SLOTS_READ), &b3) == 100);
	fx_close(&f);
}

static void test_release(void)
{
	struct fixture f;
	struct cw_slots_booking b1, b2;
	int64_t p;

	fx_open(&f, 0, 0, NULL);
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 10, 10, 5, CW_SLOTS_READ), &b1) == 10);
	CU_ASSERT(book(&f, f.b, rq(f.disk[0], 10, 12, 3, CW_SLOTS_READ), &b2) == CW_SLOTS_FAIL);
	CU_ASSERT(cw_slots_release(f.a, &b1) == 5);
	for (p = 10; p < 15; p++)
		CU_ASSERT(held_by(f.disk[0], p, f.a) == 0);
	CU_ASSERT(cw_slots_release(f.a, &b1) == 0);	/* twice: nothing left */
	CU_ASSERT(book(&f, f.b, rq(f.disk[0], 10, 12, 3, CW_SLOTS_READ), &b2) == 10);
	CU_ASSERT(cw_slots_commit(f.a, &b1, 1) == -ETIMEDOUT);
	fx_close(&f);
}

static void test_ring_wrap(void)
{
	struct fixture f;
	struct cw_slots_booking b;
	struct cw_slots_entry e;
	uint32_t ring;
	int64_t p;

	fx_open(&f, 256, 200, NULL);
	ring = cw_slots_ring_slots(f.disk[0]);
	CU_ASSERT(ring == 256);
	/* [250, 262) crosses the end of the array. */
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 250, 250, 12, CW_SLOTS_READ), &b) == 250);
	CU_ASSERT(cw_slots_commit(f.a, &b, 7) == 0);
	for (p = 250; p < 262; p++)
		CU_ASSERT(held_by(f.disk[0], p, f.a) == 1);
	CU_ASSERT(held_by(f.disk[0], 262, f.a) == 0);
	/* Slot 200 + 256 lies beyond the ring until now passes 200. */
	CU_ASSERT(book(&f, f.b, rq(f.disk[0], 456, 456, 1, CW_SLOTS_READ), &b) == -ERANGE);
	CU_ASSERT(cw_slots_next(f.disk[0], 1000, &e) == 1 && e.slot == 250 && e.cookie == 7);
	CU_ASSERT(cw_slots_advance(f.disk[0], 300) == 300);
	CU_ASSERT(cw_slots_valid(f.disk[0]) == 0);
	/* The same array cells, one lap later, are vacant again. */
	CU_ASSERT(book(&f, f.b, rq(f.disk[0], 506, 506, 12, CW_SLOTS_READ), &b) == 506);
	CU_ASSERT(held_by(f.disk[0], 506, f.b) == 1);
	/* Many laps at once. */
	CU_ASSERT(cw_slots_advance(f.disk[0], 300 + 5 * 256 + 3) == 300 + 5 * 256 + 3);
	CU_ASSERT(cw_slots_valid(f.disk[0]) == 0);
	for (p = 1583; p < 1583 + 256; p++)
		CU_ASSERT(cw_slots_owner(f.disk[0], p, NULL, NULL) == 0);
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 1600, 1640, 32, CW_SLOTS_WRITE), &b) == 1600);
	fx_close(&f);
}

/* Runs at odd and even first slots, so that the two-word CAS paths
 * (taking, converting, passing two slots at once) meet both alignments,
 * across the end of the array and into the next lap. */
static void test_runs_at_every_alignment(void)
{
	struct fixture f;
	struct cw_slots_booking b[8];
	int64_t base = 100, p;
	unsigned lap, i, n;

	fx_open(&f, 256, base, NULL);
	for (lap = 0; lap < 6; lap++) {	/* about three laps of the ring */
		for (n = 1; n <= 5; n++) {
			int64_t at = base + 2;

			for (i = 0; i < 8; i++) {
				/* a gap of one slot before every other run: both
				 * alignments whatever n is */
				int64_t want = at + (i & 1);

				CU_ASSERT(book(&f, f.a, rq(f.disk[0], want, want, n, CW_SLOTS_READ),
					       &b[i]) == want);
				for (p = want; p < want + n; p++)
					CU_ASSERT(held_by(f.disk[0], p, f.a) == 1);
				CU_ASSERT(held_by(f.disk[0], want + n, f.a) == 0);
				CU_ASSERT(hint_errors(f.disk[0]) == 0);
				at = want + n;
			}
			CU_ASSERT(cw_slots_valid(f.disk[0]) == 0);
			/* Give back every other booking, then pass them all. */
			for (i = 0; i < 8; i += 2)
				CU_ASSERT(cw_slots_release(f.a, &b[i]) == (int)n);
			CU_ASSERT(hint_errors(f.disk[0]) == 0);
			base = cw_slots_advance(f.disk[0], at + (lap & 1));
			CU_ASSERT(base == at + (int64_t)(lap & 1));
			CU_ASSERT(hint_errors(f.disk[0]) == 0);
			CU_ASSERT(cw_slots_valid(f.disk[0]) == 0);
		}
	}
	fx_close(&f);
}

static void test_snake(void)
{
	struct fixture f;
	struct cw_slots_booking b0, b1, s;
	struct cw_slots_req r;
	struct cw_slots_entry e;
	int64_t p;

	fx_open(&f, 0, 0, NULL);
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 10, 10, 3, CW_SLOTS_READ), &b0) == 10);
	CU_ASSERT(book(&f, f.a, rq(f.disk[1], 13, 13, 3, CW_SLOTS_READ), &b1) == 13);
	r = (struct cw_slots_req){ .dir = CW_SLOTS_READ, .shape = CW_SLOTS_SNAKE, .ndisks = 2,
				   .disks = { f.disk[0], f.disk[1] }, .start_slot = 10,
				   .deadline_slot = 10, .size_slots = 6 };
	/* Neither mirror is free for 6 slots from 10; together they are. */
	CU_ASSERT(cw_slots_reserve(f.b, &r, &s) == 0 && s.first_slot == 10);
	for (p = 10; p < 16; p++) {
		CU_ASSERT(held_by(f.disk[0], p, f.b) == (p >= 13));
		CU_ASSERT(held_by(f.disk[1], p, f.b) == (p < 13));
	}
	CU_ASSERT(cw_slots_commit(f.b, &s, 0x5) == 0);
	CU_ASSERT(cw_slots_next(f.disk[1], 100, &e) == 1);
	CU_ASSERT(e.slot == 10 && e.n_slots == 3 && e.booking_first == 10 && e.booking_slots == 6);
	CU_ASSERT(cw_slots_next(f.disk[0], 100, &e) == 1);
	CU_ASSERT(e.slot == 13 && e.n_slots == 3 && e.cookie == 0x5);
	/* Both mirrors full for the window: FAIL. */
	r.start_slot = r.deadline_slot = 110;
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 110, 110, 2, CW_SLOTS_READ), &b0) == 110);
	CU_ASSERT(book(&f, f.a, rq(f.disk[1], 111, 111, 2, CW_SLOTS_READ), &b1) == 111);
	r.size_slots = 2;	/* 111 is busy on both */
	CU_ASSERT(cw_slots_reserve(f.b, &r, &s) == CW_SLOTS_FAIL);
	r.size_slots = 1;
	CU_ASSERT(cw_slots_reserve(f.b, &r, &s) == 0 && s.first_slot == 110);
	CU_ASSERT(held_by(f.disk[1], 110, f.b) == 1);
	fx_close(&f);
}

static void test_snake_prefers_fewer_dummy_slots(void)
{
	struct fixture f;
	struct cw_slots_booking s;
	struct cw_slots_req r;
	uint32_t extra = 2;

	fx_open(&f, 0, 0, &extra);	/* disk 0 adds 2 slots to writes */
	r = (struct cw_slots_req){ .dir = CW_SLOTS_WRITE, .shape = CW_SLOTS_SNAKE, .ndisks = 2,
				   .disks = { f.disk[0], f.disk[1] }, .start_slot = 10,
				   .deadline_slot = 20, .size_slots = 3 };
	CU_ASSERT(cw_slots_reserve(f.a, &r, &s) == 0);
	CU_ASSERT(s.first_slot == 10 && s.n_slots == 3);
	CU_ASSERT(held_by(f.disk[1], 10, f.a) == 1 && held_by(f.disk[0], 10, f.a) == 0);
	fx_close(&f);
}

static void test_thick(void)
{
	struct fixture f;
	struct cw_slots_booking b, t;
	struct cw_slots_req r;
	struct cw_slots_entry e;
	int64_t p;

	fx_open(&f, 0, 0, NULL);
	CU_ASSERT(book(&f, f.a, rq(f.disk[1], 10, 10, 2, CW_SLOTS_READ), &b) == 10);
	r = (struct cw_slots_req){ .dir = CW_SLOTS_WRITE, .shape = CW_SLOTS_THICK, .ndisks = 2,
				   .disks = { f.disk[0], f.disk[1] }, .start_slot = 9,
				   .deadline_slot = 20, .size_slots = 3 };
	/* Data and parity need the same slots: disk 1 is busy at 10-11. */
	CU_ASSERT(cw_slots_reserve(f.b, &r, &t) == 0 && t.first_slot == 12);
	for (p = 9; p < 16; p++) {
		CU_ASSERT(held_by(f.disk[0], p, f.b) == (p >= 12 && p < 15));
		CU_ASSERT(held_by(f.disk[1], p, f.b) == (p >= 12 && p < 15));
	}
	CU_ASSERT(cw_slots_commit(f.b, &t, 9) == 0);
	CU_ASSERT(cw_slots_next(f.disk[0], 100, &e) == 1 && e.slot == 12 && e.n_slots == 3);
	CU_ASSERT(cw_slots_next(f.disk[1], 100, &e) == 1 && e.slot == 12 && e.cookie == 9);
	r.start_slot = 200;
	r.deadline_slot = 201;
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 202, 202, 1, CW_SLOTS_READ), &b) == 202);
	CU_ASSERT(cw_slots_reserve(f.b, &r, &t) == CW_SLOTS_FAIL);
	CU_ASSERT(cw_slots_release(f.a, &b) == 1);
	CU_ASSERT(cw_slots_reserve(f.b, &r, &t) == 0 && t.first_slot == 200);
	CU_ASSERT(cw_slots_release(f.b, &t) == 6);
	fx_close(&f);
}

static void test_dummy_slots(void)
{
	struct fixture f;
	struct cw_slots_booking b;
	uint32_t extra = 2;
	int64_t p;

	fx_open(&f, 0, 0, &extra);
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 10, 10, 3, CW_SLOTS_WRITE), &b) == 10);
	CU_ASSERT(b.n_slots == 5);
	for (p = 9; p < 17; p++)
		CU_ASSERT(held_by(f.disk[0], p, f.a) == (p >= 10 && p < 15));
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 15, 15, 3, CW_SLOTS_READ), &b) == 15);
	CU_ASSERT(b.n_slots == 3);
	fx_close(&f);
}

static void test_mode_names(void)
{
	enum cw_slots_mode m;

	CU_ASSERT(cw_slots_mode_parse("wf", &m) == 0 && m == CW_SLOTS_WAITFREE);
	CU_ASSERT(cw_slots_mode_parse("lockfree", &m) == 0 && m == CW_SLOTS_LOCKFREE);
	CU_ASSERT(cw_slots_mode_parse("mutex", &m) == 0 && m == CW_SLOTS_MUTEX);
	CU_ASSERT(cw_slots_mode_parse("spin", &m) == -EINVAL);
	CU_ASSERT(strcmp(cw_slots_mode_name(CW_SLOTS_WAITFREE), "wf") == 0);
}

static void test_bad_options(void)
{
	struct cw_slots_domain_opts d = { .size = sizeof(d), .max_threads = 5000 };
	struct cw_slots_domain *dom;
	struct cw_slots *rec;
	struct cw_slots_opts o = { .size = sizeof(o), .ring_slots = 1000 };

	CU_ASSERT(cw_slots_domain_new(&d, &dom) == -EINVAL);
	d.max_threads = 0;
	d.mode = 9;
	CU_ASSERT(cw_slots_domain_new(&d, &dom) == -EINVAL);
	CU_ASSERT_FATAL(cw_slots_domain_new(NULL, &dom) == 0);
	CU_ASSERT(cw_slots_new(dom, &o, &rec) == -EINVAL);	/* not a power of two */
	o.ring_slots = 1024;				/* < 2 * (4096 + 512) */
	CU_ASSERT(cw_slots_new(dom, &o, &rec) == -EINVAL);
	o.ring_slots = 0;
	o.tier = CW_TIER_HDD;
	CU_ASSERT_FATAL(cw_slots_new(dom, &o, &rec) == 0);
	CU_ASSERT(cw_slots_slot_ns(rec) == CW_SLOTS_HDD_SLOT_NS);
	CU_ASSERT(cw_slots_slot_of(rec, 1000, 1000 + 5 * CW_NS_PER_MS + 1) == 5);
	cw_slots_free(rec);
	o.tier = CW_TIER_SSD;
	CU_ASSERT_FATAL(cw_slots_new(dom, &o, &rec) == 0);
	CU_ASSERT(cw_slots_slot_ns(rec) == 100 * CW_NS_PER_US);
	cw_slots_free(rec);
	cw_slots_domain_free(dom);
}

static void test_valid_catches_corruption(void)
{
	struct fixture f;
	struct cw_slots_booking b;
	uint64_t *c, keep;

	fx_open(&f, 0, 0, NULL);
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 10, 10, 3, CW_SLOTS_READ), &b) == 10);
	CU_ASSERT(cw_slots_valid(f.disk[0]) == 0);
	c = cell_at(f.disk[0], 30);
	keep = *c;
	*c = cell_pack(C_CLOSED, lap_of(f.disk[0], 30), 0, 0);	/* closed ahead of now */
	CU_ASSERT(cw_slots_valid(f.disk[0]) == -EUCLEAN);
	*c = cell_pack(C_RESERVED, lap_of(f.disk[0], 30), 1, 1);	/* load count off */
	CU_ASSERT(cw_slots_valid(f.disk[0]) == -EUCLEAN);
	*c = keep;
	/* A booked slot whose occupancy bit is clear. */
	CU_ASSERT(cw_slots_valid(f.disk[0]) == 0);
	*occ_word(f.disk[0], 11) &= ~(UINT64_C(1) << 11);
	CU_ASSERT(cw_slots_valid(f.disk[0]) == -EUCLEAN);
	*occ_word(f.disk[0], 11) |= UINT64_C(1) << 11;
	fx_close(&f);
}

/* Announces b's request and runs its INIT step only: b then holds its
 * first slot TRANSIENT, as if its thread stalled right there. */
static void stall_after_first_slot(struct cw_slots_ctx *ctx, struct cw_slots_req r, uint64_t *ticket)
{
	struct desc *d = &ctx->dom->desc[ctx->id];
	uint32_t dummy[CW_SLOTS_MAX_DISKS] = { 0 };
	uint32_t n = disk_slots(&r, dummy);
	uint64_t k = st_round(d->state) + 1;
	struct rview rv;
	bool giveup = false;

	*ticket = cw_pr_faa_seq(&ctx->dom->ticket, 1);
	announce(ctx, &r, r.start_slot, n, dummy, *ticket, k, NULL);
	CU_ASSERT_FATAL(view_read(ctx->dom, ctx->id, &rv));
	init_step(ctx, &rv, 0, &giveup);
	CU_ASSERT(st_phase(d->state) == P_TEMP);
}

/* A fixture where b's 4-slot request on disk 0 stalled after its first
 * slot; returns b's descriptor. */
static struct desc *open_stalled(struct fixture *f, int64_t start, int64_t deadline,
				 enum cw_slots_dir dir, uint64_t *ticket)
{
	fx_open(f, 0, 0, NULL);
	stall_after_first_slot(f->b, rq(f->disk[0], start, deadline, 4, dir), ticket);
	return &f->dom->desc[f->b->id];
}

static void test_contended_preempt(void)
{
	struct fixture f;
	struct cw_slots_booking a;
	uint64_t ticket;
	struct desc *db;
	int64_t p;

	if (g_mode == CW_SLOTS_MUTEX)
		return;
	db = open_stalled(&f, 10, 20, CW_SLOTS_WRITE, &ticket);
	CU_ASSERT(cw_slots_owner(f.disk[0], 10, NULL, NULL) == 0);	/* not linearized */
	/* A read beats a write with the same deadline: b is cancelled. */
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 10, 20, 2, CW_SLOTS_READ), &a) == 10);
	CU_ASSERT(st_phase(db->state) == P_CANCEL);
	CU_ASSERT(db->rollbacks == 1);
	/* b's thread wakes up and finishes its request after a's booking. */
	run(f.b, f.b->id, ticket, 0);
	CU_ASSERT(st_phase(db->state) == P_FINISH);
	CU_ASSERT((int64_t)(db->start + st_off(db->state)) == 12);
	for (p = 10; p < 18; p++) {
		CU_ASSERT(held_by(f.disk[0], p, f.a) == (p < 12));
		CU_ASSERT(held_by(f.disk[0], p, f.b) == (p >= 12 && p < 16));
	}
	fx_close(&f);
}

static void test_contended_help(void)
{
	struct fixture f;
	struct cw_slots_booking a;
	uint64_t ticket;
	struct desc *db;
	int64_t p;

	if (g_mode == CW_SLOTS_MUTEX)
		return;
	db = open_stalled(&f, 10, 20, CW_SLOTS_READ, &ticket);
	/* A write loses to the stalled read: a completes b's request first. */
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 10, 20, 2, CW_SLOTS_WRITE), &a) == 14);
	CU_ASSERT(st_phase(db->state) == P_FINISH);
	CU_ASSERT(db->rollbacks == 0);
	for (p = 10; p < 18; p++) {
		CU_ASSERT(held_by(f.disk[0], p, f.b) == (p < 14));
		CU_ASSERT(held_by(f.disk[0], p, f.a) == (p >= 14 && p < 16));
	}
	run(f.b, f.b->id, ticket, 0);	/* nothing left to do */
	CU_ASSERT(st_phase(db->state) == P_FINISH);
	fx_close(&f);
}

static void test_contended_starving(void)
{
	struct fixture f;
	struct cw_slots_booking a;
	uint64_t ticket;
	struct desc *db;

	if (g_mode == CW_SLOTS_MUTEX)
		return;
	db = open_stalled(&f, 10, 20, CW_SLOTS_WRITE, &ticket);
	/* Past the rollback limit the write may no longer be preempted. */
	cw_pr_store_seq(&db->rollbacks, f.dom->w.rollback_limit);
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 10, 20, 2, CW_SLOTS_READ), &a) == 14);
	CU_ASSERT(st_phase(db->state) == P_FINISH);
	CU_ASSERT(held_by(f.disk[0], 10, f.b) == 1);
	fx_close(&f);
}

/* The paper restarts a cancelled request at index+1 (Algorithm 2, line
 * 48).  After a preemption that skips its old first slot, which may be
 * vacant again by then: with a window of one slot the request would FAIL
 * although the slot is free.  We restart where the run started. */
static void test_preempted_restarts_at_its_first_slot(void)
{
	struct fixture f;
	struct cw_slots_booking a;
	uint64_t ticket;
	struct desc *db;

	if (g_mode == CW_SLOTS_MUTEX)
		return;
	db = open_stalled(&f, 10, 10, CW_SLOTS_WRITE, &ticket);
	CU_ASSERT(book(&f, f.a, rq(f.disk[0], 10, 10, 1, CW_SLOTS_READ), &a) == 10);
	CU_ASSERT(st_phase(db->state) == P_CANCEL);
	CU_ASSERT(cw_slots_release(f.a, &a) == 1);
	run(f.b, f.b->id, ticket, 0);
	CU_ASSERT(st_phase(db->state) == P_FINISH);
	CU_ASSERT(held_by(f.disk[0], 10, f.b) == 1 && held_by(f.disk[0], 13, f.b) == 1);
	fx_close(&f);
}

/* Wait-free mode: a newer request first helps an older announced one. */
static void test_waitfree_helps_older(void)
{
	struct fixture f;
	struct cw_slots_booking a;
	uint64_t ticket;
	struct desc *db;
	int i;

	if (g_mode != CW_SLOTS_WAITFREE)
		return;
	db = open_stalled(&f, 10, 20, CW_SLOTS_WRITE, &ticket);
	/* Unrelated bookings elsewhere: after WF_PATIENCE of them the stalled
	 * request is old enough to be helped. */
	for (i = 0; i < WF_PATIENCE + 4 && st_phase(db->state) != P_FINISH; i++)
		CU_ASSERT(book(&f, f.a, rq(f.disk[0], 40 + i, 40 + i, 1, CW_SLOTS_READ), &a) == 40 + i);
	CU_ASSERT(st_phase(db->state) == P_FINISH);
	CU_ASSERT(i > WF_PATIENCE - 2);
	CU_ASSERT(held_by(f.disk[0], 10, f.b) == 1 && held_by(f.disk[0], 13, f.b) == 1);
	fx_close(&f);
}

static void test_dispatcher_cancels_stalled(void)
{
	struct fixture f;
	struct cw_slots_entry e;
	uint64_t ticket;
	struct desc *db;

	if (g_mode == CW_SLOTS_MUTEX)
		return;
	db = open_stalled(&f, 10, 30, CW_SLOTS_WRITE, &ticket);
	/* now passes the stalled request's first slot: it must start later. */
	CU_ASSERT(cw_slots_next(f.disk[0], 12, &e) == 0);
	CU_ASSERT(st_phase(db->state) == P_CANCEL);
	run(f.b, f.b->id, ticket, 0);
	CU_ASSERT(st_phase(db->state) == P_FINISH);
	CU_ASSERT((int64_t)(db->start + st_off(db->state)) == 12);
	CU_ASSERT(held_by(f.disk[0], 12, f.b) == 1);
	fx_close(&f);
}

/* The paper's getHighPriorityRequest (lines 58-96) as printed, for
 * comparison: returns true when it picks a. */
struct attrs {
	int64_t deadline, prio, n, deps, block, ticket;
	int dir;
};

static bool paper_rule(const struct attrs *a, const struct attrs *b, int64_t slot, uint64_t last)
{
	if (llabs(a->deadline - slot) - llabs(b->deadline - slot) > 16)
		return a->deadline < b->deadline;
	if (llabs(a->prio - b->prio) > 4)
		return a->prio > b->prio;
	if (a->dir == CW_SLOTS_READ && b->dir == CW_SLOTS_WRITE)
		return true;
	if (a->dir == CW_SLOTS_WRITE && b->dir == CW_SLOTS_WRITE) {
		if ((uint64_t)a->block == last && (uint64_t)b->block != last)
			return true;
		if ((uint64_t)b->block == last)
			return false;
	}
	if (llabs(a->n - b->n) > 2)
		return a->n < b->n;
	if (llabs(a->deps - b->deps) > 2)
		return a->deps > b->deps;
	return false;	/* line 95 with equal booked counts: reqB */
}

static void test_priority_rule_is_strict(void)
{
	static const int64_t dl[] = { 0, 10, 40 }, pr[] = { 0, 6 }, ns[] = { 1, 8 }, dp[] = { 0, 5 },
			     bl[] = { 1, 2 };
	struct fixture f;
	struct attrs at[3 * 2 * 2 * 2 * 2 * 2];
	size_t na = 0, i, j;
	unsigned paper_bad = 0, ours_bad = 0;
	size_t a1, a2, a3, a4, a5, a6;

	fx_open(&f, 0, 0, NULL);
	cw_pr_store_relaxed(&f.disk[0]->last_block, 1);
	for (a1 = 0; a1 < 3; a1++)
		for (a2 = 0; a2 < 2; a2++)
			for (a3 = 0; a3 < 2; a3++)
				for (a4 = 0; a4 < 2; a4++)
					for (a5 = 0; a5 < 2; a5++)
						for (a6 = 0; a6 < 2; a6++)
							at[na++] = (struct attrs){ dl[a1], pr[a2], ns[a3],
										   dp[a4], bl[a5], (int64_t)na,
										   (int)a6 };
	for (i = 0; i < na; i++)
		for (j = 0; j < na; j++) {
			struct rview x = { 0 }, y = { 0 };
			bool xy, yx;

			if (i == j)
				continue;
			x = (struct rview){ .id = 0, .deadline = at[i].deadline, .base_prio = at[i].prio,
					    .n = (uint32_t)at[i].n, .deps = (uint32_t)at[i].deps,
					    .block = (uint64_t)at[i].block, .ticket = (uint64_t)at[i].ticket,
					    .dir = (uint32_t)at[i].dir };
			y = (struct rview){ .id = 1, .deadline = at[j].deadline, .base_prio = at[j].prio,
					    .n = (uint32_t)at[j].n, .deps = (uint32_t)at[j].deps,
					    .block = (uint64_t)at[j].block, .ticket = (uint64_t)at[j].ticket,
					    .dir = (uint32_t)at[j].dir };
			xy = prefer(f.disk[0], &x, &y, 0);
			yx = prefer(f.disk[0], &y, &x, 0);
			ours_bad += xy == yx;
			paper_bad += paper_rule(&at[i], &at[j], 0, 1) == paper_rule(&at[j], &at[i], 0, 1);
		}
	CU_ASSERT(ours_bad == 0);
	/* The printed rule lets both contenders win or both lose. */
	CU_ASSERT(paper_bad > 0);
	fx_close(&f);
}

static int init_lf(void)
{
	g_mode = CW_SLOTS_LOCKFREE;
	return 0;
}

static int init_wf(void)
{
	g_mode = CW_SLOTS_WAITFREE;
	return 0;
}

static int init_mutex(void)
{
	g_mode = CW_SLOTS_MUTEX;
	return 0;
}

int main(void)
{
	static const struct {
		enum cw_slots_mode mode;
		CU_InitializeFunc init;
	} modes[] = { { CW_SLOTS_LOCKFREE, init_lf }, { CW_SLOTS_WAITFREE, init_wf },
		      { CW_SLOTS_MUTEX, init_mutex } };
	CU_pSuite s;
	size_t i;

	/* One suite per mode; the suite's init sets g_mode. */
	for (i = 0; i < CW_ARRAY_SIZE(modes); i++) {
		s = cwtest_suite(cw_slots_mode_name(modes[i].mode), modes[i].init, NULL);
		cwtest_add(s, "vacant run", test_vacant);
		cwtest_add(s, "jump over a booking ahead, deadline FAIL", test_jump_and_fail);
		cwtest_add(s, "bad input changes nothing", test_bad_input);
		cwtest_add(s, "commit, next, peek", test_commit_next_peek);
		cwtest_add(s, "release", test_release);
		cwtest_add(s, "ring wrap and recycling", test_ring_wrap);
		cwtest_add(s, "runs at every alignment, across laps", test_runs_at_every_alignment);
		cwtest_add(s, "snake request spans mirrors", test_snake);
		cwtest_add(s, "snake prefers fewer dummy slots", test_snake_prefers_fewer_dummy_slots);
		cwtest_add(s, "thick request", test_thick);
		cwtest_add(s, "dummy slots", test_dummy_slots);
		cwtest_add(s, "valid() catches corruption", test_valid_catches_corruption);
		cwtest_add(s, "contended: preempt the stalled write", test_contended_preempt);
		cwtest_add(s, "contended: help the stalled read", test_contended_help);
		cwtest_add(s, "contended: starving request is helped", test_contended_starving);
		cwtest_add(s, "dispatcher cancels a stalled request", test_dispatcher_cancels_stalled);
		cwtest_add(s, "preempted request restarts at its first slot",
			   test_preempted_restarts_at_its_first_slot);
		cwtest_add(s, "wait-free: newer requests help older ones", test_waitfree_helps_older);
	}
	s = cwtest_suite("slots", NULL, NULL);
	cwtest_add(s, "mode names", test_mode_names);
	cwtest_add(s, "bad options", test_bad_options);
	cwtest_add(s, "priority rule is a strict order", test_priority_rule_is_strict);
	return cwtest_run();
}
