/*
 * Description: many threads book one record at once (64 threads on
 * however few cores there are) for a bounded time while a dispatcher moves
 * now; every operation is recorded with invocation and response stamps
 * from one global counter.  Afterwards: no slot was ever owned by two
 * bookings at once, every live booking owns exactly its slots and nothing
 * else is owned, the dispatcher handed out every committed booking once,
 * in order, and every FAIL was right at some instant inside its interval
 * (no vacant run in its window).  Then small histories (3 threads, 3 ops)
 * are checked exhaustively for linearizability against the sequential
 * specification, and the checker itself is shown to reject forged
 * histories.  Snake and thick requests over three disks are stressed too.
 *
 * CW_STRESS_SECONDS scales the time (default 1.5 s per mode); under
 * ThreadSanitizer fewer threads and iterations run.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>

#include <clockwise/slots.h>
#include "common/util.h"
#include "cwtest.h"

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

#define MAX_OPS_PER_THREAD 6000

enum { OP_RESERVE = 1, OP_RELEASE = 2 };

struct op {
	int kind;
	int res;		/* reserve: 0 or CW_SLOTS_FAIL; release: count */
	int64_t start, deadline, first, now_before;
	uint32_t n;
	uint64_t inv, resp;
	int32_t released_by;	/* reserve: index of its release op, or -1 */
	bool committed;
	struct cw_slots_booking b;
};

struct worker {
	pthread_t th;
	struct cw_slots_ctx *ctx;
	struct op *ops;
	size_t nops;
	unsigned seed;
	int tid;
};

struct dispatched {
	int64_t slot;
	uint32_t n;
	uint64_t cookie;
};

struct nowmark {
	uint64_t inv;	/* stamp before the call */
	int64_t now;	/* now when the call returned */
};

static _Atomic uint64_t g_clk;
static atomic_bool g_stop;
static _Atomic uint64_t g_done;
static _Atomic uint64_t g_disp_calls;
static struct cw_slots *g_rec;
static struct worker *g_w;
static int g_nthreads;
static double g_seconds;

static uint64_t stamp(void)
{
	return atomic_fetch_add(&g_clk, 1) + 1;
}

static unsigned rnd(unsigned *seed)
{
	*seed = *seed * 1103515245u + 12345u;
	return (*seed >> 16) & 0x7fff;
}

/* Cookie: thread and op index. */
static uint64_t cookie_of(int tid, size_t i)
{
	return ((uint64_t)tid << 32) | i;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	while (!atomic_load(&g_stop) && w->nops + 2 < MAX_OPS_PER_THREAD) {
		struct op *o = &w->ops[w->nops];
		int64_t now = cw_slots_now(g_rec);
		struct cw_slots_req r = {
			.dir = rnd(&w->seed) & 1 ? CW_SLOTS_WRITE : CW_SLOTS_READ,
			.shape = CW_SLOTS_SINGLE, .ndisks = 1, .disks = { g_rec },
			.size_slots = 1 + rnd(&w->seed) % 6,
			.block = rnd(&w->seed) % 4,
			.dependants = rnd(&w->seed) % 3,
		};
		size_t me = w->nops;

		r.start_slot = now + 4 + rnd(&w->seed) % 40;
		r.deadline_slot = r.start_slot + rnd(&w->seed) % 20;
		*o = (struct op){ .kind = OP_RESERVE, .start = r.start_slot, .deadline = r.deadline_slot,
				  .n = r.size_slots, .now_before = now, .released_by = -1, .first = -1 };
		o->inv = stamp();
		o->res = cw_slots_reserve(w->ctx, &r, &o->b);
		o->resp = stamp();
		w->nops++;
		if (o->res == 0) {
			o->first = o->b.first_slot;
			if (rnd(&w->seed) % 6 == 0 || cw_slots_commit(w->ctx, &o->b, cookie_of(w->tid, me)) < 0) {
				struct op *rel = &w->ops[w->nops];

				*rel = (struct op){ .kind = OP_RELEASE, .released_by = -1 };
				rel->inv = stamp();
				rel->res = cw_slots_release(w->ctx, &o->b);
				rel->resp = stamp();
				o->released_by = (int32_t)w->nops;
				w->nops++;
			} else {
				o->committed = true;
			}
		}
		/* Keep now moving with the work: wait for the dispatcher. */
		atomic_fetch_add(&g_done, 1);
		while (atomic_load(&g_done) > atomic_load(&g_disp_calls) + 16 && !atomic_load(&g_stop))
			sched_yield();
	}
	return NULL;
}

struct disp_state {
	struct dispatched *d;
	size_t nd, capd;
	struct nowmark *m;
	size_t nm, capm;
};

static void *dispatcher_main(void *arg)
{
	struct disp_state *s = arg;
	uint64_t last = 0;

	while (!atomic_load(&g_stop)) {
		struct cw_slots_entry e;
		uint64_t inv;
		int r;

		/* One slot per completed operation: the window stays crowded,
		 * so both bookings and FAILs are common. */
		uint64_t done = atomic_load(&g_done);
		int64_t target = cw_slots_now(g_rec) + (int64_t)(done - last);

		if (done == last) {
			sched_yield();
			continue;
		}
		last = done;
		do {
			inv = stamp();
			r = cw_slots_next(g_rec, target, &e);
			if (r == 1 && s->nd < s->capd)
				s->d[s->nd++] = (struct dispatched){ e.slot, e.n_slots, e.cookie };
			if (s->nm < s->capm)
				s->m[s->nm++] = (struct nowmark){ inv, cw_slots_now(g_rec) };
		} while (r == 1);
		atomic_store(&g_disp_calls, last);
	}
	return NULL;
}

/* now as far as any dispatcher call started at or before stamp c got it. */
static int64_t now_at(const struct disp_state *s, uint64_t c, int64_t base)
{
	size_t lo = 0, hi = s->nm;

	while (lo < hi) {	/* last mark with inv <= c */
		size_t mid = (lo + hi) / 2;

		if (s->m[mid].inv <= c)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? s->m[lo - 1].now : base;
}

struct bref {
	int tid;
	size_t i;
};

static struct op *op_of(struct bref r)
{
	return &g_w[r.tid].ops[r.i];
}

static int cmp_first(const void *a, const void *b)
{
	const struct op *x = op_of(*(const struct bref *)a), *y = op_of(*(const struct bref *)b);

	return x->first < y->first ? -1 : x->first > y->first;
}

/* Could booking o hold its slots just after stamp c? */
static bool maybe_held(const struct op *o, int tid, uint64_t c)
{
	if (o->inv > c)
		return false;
	if (o->released_by >= 0 && g_w[tid].ops[o->released_by].resp <= c)
		return false;
	return true;
}

struct check {
	unsigned overlaps, ownership, dispatch, fails_wrong, fails_checked, windows;
};

static void check_history(struct disp_state *ds, int64_t base_now, struct check *ck)
{
	struct bref *bk = NULL, **cover = NULL;
	size_t nb = 0, cap = 0, i, j, *ncover = NULL;
	int64_t maxslot = 0, final_now = cw_slots_now(g_rec), p;
	int t;

	for (t = 0; t < g_nthreads; t++)
		for (i = 0; i < g_w[t].nops; i++) {
			struct op *o = &g_w[t].ops[i];

			if (o->kind != OP_RESERVE || o->res != 0)
				continue;
			if (o->first < o->start || o->first > o->deadline || o->first < o->now_before ||
			    o->b.n_slots != o->n)
				ck->windows++;
			if (nb == cap) {
				cap = cap ? 2 * cap : 4096;
				bk = realloc(bk, cap * sizeof(*bk));
				CU_ASSERT_FATAL(bk != NULL);
			}
			bk[nb++] = (struct bref){ t, i };
			maxslot = CW_MAX(maxslot, o->first + o->n);
		}
	/* No slot owned twice: overlapping bookings must be separated by a
	 * release that began before the later one answered. */
	qsort(bk, nb, sizeof(*bk), cmp_first);
	for (i = 0; i < nb; i++) {
		struct op *a = op_of(bk[i]);

		for (j = i + 1; j < nb && op_of(bk[j])->first < a->first + a->n; j++) {
			struct op *b = op_of(bk[j]);
			bool ok = (a->released_by >= 0 && g_w[bk[i].tid].ops[a->released_by].inv < b->resp) ||
				  (b->released_by >= 0 && g_w[bk[j].tid].ops[b->released_by].inv < a->resp);

			if (!ok)
				ck->overlaps++;
		}
	}
	/* At the end: every live booking owns its slots ahead of now, and
	 * every owned slot belongs to a live booking. */
	for (p = final_now; p < final_now + cw_slots_ring_slots(g_rec); p++) {
		uint32_t own;
		uint64_t round;
		int r = cw_slots_owner(g_rec, p, &own, &round);
		bool found = false;

		if (r != 1)
			continue;
		for (t = 0; t < g_nthreads && !found; t++) {
			if (cw_slots_ctx_id(g_w[t].ctx) != own)
				continue;
			for (i = 0; i < g_w[t].nops; i++) {
				struct op *o = &g_w[t].ops[i];

				if (o->kind == OP_RESERVE && o->res == 0 && o->b.round_ == round &&
				    o->released_by < 0 && p >= o->first && p < o->first + o->n)
					found = true;
			}
		}
		if (!found)
			ck->ownership++;
	}
	for (i = 0; i < nb; i++) {
		struct op *o = op_of(bk[i]);
		uint32_t own;
		uint64_t round;

		if (o->released_by >= 0)
			continue;
		for (p = CW_MAX(o->first, final_now); p < o->first + o->n; p++)
			if (cw_slots_owner(g_rec, p, &own, &round) != 1 ||
			    own != cw_slots_ctx_id(g_w[bk[i].tid].ctx) || round != o->b.round_)
				ck->ownership++;
	}
	/* The dispatcher: in slot order, no overlap, each a committed booking,
	 * every committed one it passed handed out once. */
	for (i = 0; i < ds->nd; i++) {
		struct dispatched *d = &ds->d[i];
		int tid = (int)(d->cookie >> 32);
		size_t oi = (size_t)(d->cookie & 0xffffffff);
		struct op *o;

		if (i > 0 && d->slot < ds->d[i - 1].slot + ds->d[i - 1].n) {
			printf("  dispatched %lld+%u overlaps %lld+%u\n", (long long)d->slot, d->n,
			       (long long)ds->d[i - 1].slot, ds->d[i - 1].n);
			ck->dispatch++;
		}
		if (tid < 0 || tid >= g_nthreads || oi >= g_w[tid].nops) {
			ck->dispatch++;
			continue;
		}
		o = &g_w[tid].ops[oi];
		if (!o->committed || o->first != d->slot || o->n != d->n || o->released_by >= 0) {
			printf("  dispatched %lld+%u: booking %lld+%u committed %d released %d\n",
			       (long long)d->slot, d->n, (long long)o->first, o->n, o->committed,
			       o->released_by);
			ck->dispatch++;
		}
		o->committed = false;	/* seen */
	}
	for (i = 0; i < nb; i++) {
		struct op *o = op_of(bk[i]);

		if (o->committed && o->first < final_now - 1 && ds->nd < ds->capd &&
		    ds->nm < ds->capm) {
			printf("  committed %lld+%u never dispatched (now %lld)\n", (long long)o->first,
			       o->n, (long long)final_now);
			ck->dispatch++;
		}
	}
	/* FAIL: some instant inside [inv, resp] (just after one of the events
	 * in it) at which every start in the window was blocked by a booking
	 * that could be live or by now. */
	cover = calloc((size_t)maxslot + 64, sizeof(*cover));
	ncover = calloc((size_t)maxslot + 64, sizeof(*ncover));
	CU_ASSERT_FATAL(cover && ncover);
	for (i = 0; i < nb; i++) {
		struct op *o = op_of(bk[i]);

		for (p = o->first; p < o->first + o->n; p++) {
			cover[p] = realloc(cover[p], (ncover[p] + 1) * sizeof(**cover));
			CU_ASSERT_FATAL(cover[p] != NULL);
			cover[p][ncover[p]++] = bk[i];
		}
	}
	for (t = 0; t < g_nthreads; t++)
		for (i = 0; i < g_w[t].nops; i++) {
			struct op *f = &g_w[t].ops[i];
			uint64_t cand[512], c;
			size_t ncand = 0, ci, m;
			bool right = false;

			if (f->kind != OP_RESERVE || f->res != CW_SLOTS_FAIL)
				continue;
			ck->fails_checked++;
			/* The state only grows more blocked just after a booking or
			 * a dispatcher call began: try those instants. */
			cand[ncand++] = f->inv;
			for (p = f->start; p < f->deadline + f->n && p < maxslot; p++)
				for (j = 0; j < ncover[p] && ncand < CW_ARRAY_SIZE(cand); j++) {
					c = op_of(cover[p][j])->inv;
					if (c > f->inv && c < f->resp)
						cand[ncand++] = c;
				}
			for (m = 0; m < ds->nm && ncand < CW_ARRAY_SIZE(cand); m++)
				if (ds->m[m].inv > f->inv && ds->m[m].inv < f->resp)
					cand[ncand++] = ds->m[m].inv;
			for (ci = 0; ci < ncand && !right; ci++) {
				c = cand[ci];
				{
				int64_t now = now_at(ds, c, base_now), s;
				bool all = true;

				for (s = f->start; s <= f->deadline && all; s++) {
					bool blocked = false;

					for (p = s; p < s + f->n && !blocked; p++) {
						if (p < now)
							blocked = true;
						else if (p < maxslot)
							for (j = 0; j < ncover[p] && !blocked; j++)
								blocked = maybe_held(op_of(cover[p][j]),
										     cover[p][j].tid, c);
					}
					all = blocked;
				}
				right = all;
				}
			}
			if (!right)
				ck->fails_wrong++;
		}
	for (p = 0; p < maxslot + 64; p++)
		free(cover[p]);
	free(cover);
	free(ncover);
	free(bk);
}

static void stress_mode(enum cw_slots_mode mode, int nthreads)
{
	struct cw_slots_domain_opts dopts = { .size = sizeof(dopts), .mode = mode,
					      .max_threads = 128, .max_window = 64, .max_slots = 16 };
	struct cw_slots_opts ro = { .size = sizeof(ro), .ring_slots = 256 };
	struct cw_slots_domain *dom;
	struct disp_state ds = { 0 };
	struct check ck = { 0 };
	pthread_t disp;
	uint64_t start_ns;
	size_t total = 0, succ = 0;
	int t;

	CU_ASSERT_FATAL(cw_slots_domain_new(&dopts, &dom) == 0);
	CU_ASSERT_FATAL(cw_slots_new(dom, &ro, &g_rec) == 0);
	CU_ASSERT(cw_slots_ring_slots(g_rec) == 256);	/* many laps in a run */
	g_nthreads = nthreads;
	g_w = calloc((size_t)nthreads, sizeof(*g_w));
	ds.capd = ds.capm = 1u << 20;
	ds.d = calloc(ds.capd, sizeof(*ds.d));
	ds.m = calloc(ds.capm, sizeof(*ds.m));
	CU_ASSERT_FATAL(g_w && ds.d && ds.m);
	atomic_store(&g_stop, false);
	atomic_store(&g_done, 0);
	atomic_store(&g_disp_calls, 0);
	for (t = 0; t < nthreads; t++) {
		g_w[t].tid = t;
		g_w[t].seed = 0x9e3779b9u * (unsigned)(t + 1);
		g_w[t].ops = calloc(MAX_OPS_PER_THREAD, sizeof(struct op));
		CU_ASSERT_FATAL(g_w[t].ops != NULL);
		CU_ASSERT_FATAL(cw_slots_ctx_new(dom, &g_w[t].ctx) == 0);
	}
	start_ns = (uint64_t)cw_now_ns();
	CU_ASSERT_FATAL(pthread_create(&disp, NULL, dispatcher_main, &ds) == 0);
	for (t = 0; t < nthreads; t++)
		CU_ASSERT_FATAL(pthread_create(&g_w[t].th, NULL, worker_main, &g_w[t]) == 0);
	/* Wait for the time bound or for every thread to fill its history. */
	while ((double)((uint64_t)cw_now_ns() - start_ns) < g_seconds * 1e9 &&
	       atomic_load(&g_done) < (uint64_t)nthreads * (MAX_OPS_PER_THREAD / 2 - 2))
		sched_yield();
	atomic_store(&g_stop, true);
	for (t = 0; t < nthreads; t++)
		pthread_join(g_w[t].th, NULL);
	pthread_join(disp, NULL);

	CU_ASSERT(cw_slots_valid(g_rec) == 0);
	check_history(&ds, 0, &ck);
	for (t = 0; t < nthreads; t++) {
		size_t i;

		for (i = 0; i < g_w[t].nops; i++)
			if (g_w[t].ops[i].kind == OP_RESERVE) {
				total++;
				succ += g_w[t].ops[i].res == 0;
				CU_ASSERT(g_w[t].ops[i].res == 0 || g_w[t].ops[i].res == CW_SLOTS_FAIL);
			}
	}
	printf("  %s %d threads: %zu reserves (%zu booked, %u FAIL checked), %zu dispatched, now %lld\n",
	       cw_slots_mode_name(mode), nthreads, total, succ, ck.fails_checked, ds.nd,
	       (long long)cw_slots_now(g_rec));
	CU_ASSERT(total > (size_t)nthreads);
	CU_ASSERT(succ > 0 && ck.fails_checked > 0);
	CU_ASSERT(ck.windows == 0);
	CU_ASSERT(ck.overlaps == 0);
	CU_ASSERT(ck.ownership == 0);
	CU_ASSERT(ck.dispatch == 0);
	CU_ASSERT(ck.fails_wrong == 0);
	if (ck.windows || ck.overlaps || ck.ownership || ck.dispatch || ck.fails_wrong)
		printf("  violations: window %u overlap %u ownership %u dispatch %u fail %u\n",
		       ck.windows, ck.overlaps, ck.ownership, ck.dispatch, ck.fails_wrong);
	for (t = 0; t < nthreads; t++) {
		cw_slots_ctx_free(g_w[t].ctx);
		free(g_w[t].ops);
	}
	free(g_w);
	free(ds.d);
	free(ds.m);
	cw_slots_free(g_rec);
	cw_slots_domain_free(dom);
}

/* The stress checker must see a forged double booking and a forged
 * FAIL while its window was vacant. */
static void test_stress_checker_rejects(void)
{
	struct cw_slots_domain *dom;
	struct disp_state ds = { 0 };
	struct check ck = { 0 };
	struct worker w = { .tid = 0 };
	struct op ops[3];

	CU_ASSERT_FATAL(cw_slots_domain_new(NULL, &dom) == 0);
	CU_ASSERT_FATAL(cw_slots_new(dom, NULL, &g_rec) == 0);
	CU_ASSERT_FATAL(cw_slots_ctx_new(dom, &w.ctx) == 0);
	ops[0] = (struct op){ .kind = OP_RESERVE, .start = 10, .deadline = 20, .first = 10, .n = 4,
			      .inv = 1, .resp = 2, .released_by = -1, .b = { .n_slots = 4 } };
	ops[1] = (struct op){ .kind = OP_RESERVE, .start = 12, .deadline = 20, .first = 12, .n = 2,
			      .inv = 3, .resp = 4, .released_by = -1, .b = { .n_slots = 2 } };
	ops[2] = (struct op){ .kind = OP_RESERVE, .start = 30, .deadline = 31, .n = 1,
			      .res = CW_SLOTS_FAIL, .inv = 5, .resp = 6, .released_by = -1 };
	w.ops = ops;
	w.nops = 3;
	g_w = &w;
	g_nthreads = 1;
	check_history(&ds, 0, &ck);
	CU_ASSERT(ck.overlaps == 1);
	CU_ASSERT(ck.fails_checked == 1 && ck.fails_wrong == 1);
	/* A release before the second booking answered makes it fine. */
	memset(&ck, 0, sizeof(ck));
	ops[0].released_by = 2;
	ops[2] = (struct op){ .kind = OP_RELEASE, .inv = 2, .resp = 3, .released_by = -1 };
	check_history(&ds, 0, &ck);
	CU_ASSERT(ck.overlaps == 0 && ck.fails_checked == 0);
	g_w = NULL;
	cw_slots_ctx_free(w.ctx);
	cw_slots_free(g_rec);
	cw_slots_domain_free(dom);
}

static int stress_threads(void)
{
	const char *env = getenv("CW_STRESS_THREADS");

	return env && atoi(env) > 0 ? atoi(env) : UNDER_TSAN ? 16 : 64;
}

static void test_stress_lf(void)
{
	stress_mode(CW_SLOTS_LOCKFREE, stress_threads());
}

static void test_stress_wf(void)
{
	stress_mode(CW_SLOTS_WAITFREE, stress_threads());
}

/* ---- snake and thick over three disks, checked when quiescent ---- */

struct shape_worker {
	pthread_t th;
	struct cw_slots_ctx *ctx;
	struct cw_slots **disks;
	struct cw_slots_booking *live;
	size_t nlive;
	unsigned seed;
};

#define SHAPE_LIVE_MAX 4096

static void *shape_main(void *arg)
{
	struct shape_worker *w = arg;

	while (!atomic_load(&g_stop) && w->nlive < SHAPE_LIVE_MAX) {
		struct cw_slots_req r = { .dir = rnd(&w->seed) & 1, .size_slots = 1 + rnd(&w->seed) % 5 };
		struct cw_slots_booking b;
		unsigned kind = rnd(&w->seed) % 3;

		if (kind == 0) {
			r.shape = CW_SLOTS_SINGLE;
			r.ndisks = 1;
			r.disks[0] = w->disks[rnd(&w->seed) % 3];
		} else {
			unsigned first = rnd(&w->seed) % 3;

			r.shape = kind == 1 ? CW_SLOTS_SNAKE : CW_SLOTS_THICK;
			r.ndisks = 2 + rnd(&w->seed) % 2;
			r.disks[0] = w->disks[first];
			r.disks[1] = w->disks[(first + 1) % 3];
			r.disks[2] = w->disks[(first + 2) % 3];
		}
		r.start_slot = rnd(&w->seed) % 150;
		r.deadline_slot = r.start_slot + rnd(&w->seed) % 30;
		if (cw_slots_reserve(w->ctx, &r, &b) == 0) {
			if (rnd(&w->seed) % 4 == 0) {
				CU_ASSERT(cw_slots_release(w->ctx, &b) == (int)(b.n_slots *
					  (r.shape == CW_SLOTS_THICK ? r.ndisks : 1)));
			} else {
				w->live[w->nlive++] = b;
			}
		}
	}
	return NULL;
}

static void test_stress_shapes(void)
{
	static const enum cw_slots_mode modes[] = { CW_SLOTS_LOCKFREE, CW_SLOTS_WAITFREE };
	int nthreads = UNDER_TSAN ? 8 : 32;
	size_t m;

	for (m = 0; m < CW_ARRAY_SIZE(modes); m++) {
		struct cw_slots_domain_opts dopts = { .size = sizeof(dopts), .mode = modes[m],
						      .max_window = 64, .max_slots = 16 };
		struct cw_slots_domain *dom;
		struct cw_slots *disks[3];
		struct shape_worker *w = calloc((size_t)nthreads, sizeof(*w));
		uint64_t start_ns;
		unsigned bad = 0, owned = 0, expect = 0, nbook = 0;
		int t, d;
		int64_t p;

		CU_ASSERT_FATAL(w != NULL);
		CU_ASSERT_FATAL(cw_slots_domain_new(&dopts, &dom) == 0);
		for (d = 0; d < 3; d++)
			CU_ASSERT_FATAL(cw_slots_new(dom, NULL, &disks[d]) == 0);
		atomic_store(&g_stop, false);
		for (t = 0; t < nthreads; t++) {
			w[t].seed = 77u * (unsigned)(t + 1);
			w[t].disks = disks;
			w[t].live = calloc(SHAPE_LIVE_MAX, sizeof(*w[t].live));
			CU_ASSERT_FATAL(w[t].live && cw_slots_ctx_new(dom, &w[t].ctx) == 0);
		}
		start_ns = (uint64_t)cw_now_ns();
		for (t = 0; t < nthreads; t++)
			CU_ASSERT_FATAL(pthread_create(&w[t].th, NULL, shape_main, &w[t]) == 0);
		while ((double)((uint64_t)cw_now_ns() - start_ns) < g_seconds * 0.3e9)
			sched_yield();
		atomic_store(&g_stop, true);
		for (t = 0; t < nthreads; t++)
			pthread_join(w[t].th, NULL);
		/* Every live booking owns its slots: each disk for thick, exactly
		 * one mirror for snake; nothing else is owned. */
		for (t = 0; t < nthreads; t++) {
			size_t i;

			for (i = 0; i < w[t].nlive; i++) {
				struct cw_slots_booking *b = &w[t].live[i];

				nbook++;
				for (p = b->first_slot; p < b->first_slot + b->n_slots; p++) {
					unsigned holders = 0, k;

					for (k = 0; k < b->req_.ndisks; k++) {
						uint32_t own;
						uint64_t round;

						if (cw_slots_owner(b->req_.disks[k], p, &own, &round) == 1 &&
						    own == b->owner_ && round == b->round_)
							holders++;
					}
					expect += holders;
					if (b->req_.shape == CW_SLOTS_THICK ? holders != b->req_.ndisks : holders != 1)
						bad++;
				}
			}
		}
		for (d = 0; d < 3; d++) {
			CU_ASSERT(cw_slots_valid(disks[d]) == 0);
			for (p = 0; p < 256; p++)
				owned += cw_slots_owner(disks[d], p, NULL, NULL) == 1;
		}
		printf("  %s shapes: %u live bookings\n", cw_slots_mode_name(modes[m]), nbook);
		CU_ASSERT(nbook > 0);
		CU_ASSERT(bad == 0);
		CU_ASSERT(owned == expect);
		for (t = 0; t < nthreads; t++) {
			cw_slots_ctx_free(w[t].ctx);
			free(w[t].live);
		}
		free(w);
		for (d = 0; d < 3; d++)
			cw_slots_free(disks[d]);
		cw_slots_domain_free(dom);
	}
}

/* ---- small histories, checked exhaustively ---- */

#define SH_THREADS 3
#define SH_OPS 3
#define SH_SLOTS 10

struct hop {
	int kind;
	int64_t start, deadline;
	uint32_t n;
	int res;
	int64_t first;
	int of;			/* release: index of the reserve it releases */
	uint64_t inv, resp;
};

struct hist {
	struct hop op[SH_THREADS * SH_OPS];
	int nops;
};

/* Sequential specification, searched over every order that respects
 * real time (a before b when a answered before b was invoked). */
static bool lin_search(const struct hist *h, unsigned done, uint32_t booked, const uint32_t *masks)
{
	int i, j;

	if (done == (1u << h->nops) - 1)
		return true;
	for (i = 0; i < h->nops; i++) {
		const struct hop *o = &h->op[i];
		uint32_t mask = booked;
		bool ok = true, minimal = true;
		int64_t s;

		if (done & (1u << i))
			continue;
		/* i may go next only if no pending op answered before i began. */
		for (j = 0; j < h->nops; j++)
			if (j != i && !(done & (1u << j)) && h->op[j].resp < o->inv)
				minimal = false;
		if (!minimal)
			continue;
		if (o->kind == OP_RESERVE && o->res == 0) {
			ok = o->first >= o->start && o->first <= o->deadline && !(booked & masks[i]);
			mask = booked | masks[i];
		} else if (o->kind == OP_RESERVE) {
			for (s = o->start; s <= o->deadline && ok; s++)
				if (!(booked & (((1u << o->n) - 1) << s)))
					ok = false;
		} else {
			/* release: frees its booking, answers its size (or 0 if
			 * the booking failed) */
			const struct hop *b = &h->op[o->of];
			uint32_t m = b->res == 0 ? masks[o->of] : 0;

			ok = b->res == 0 ? (done & (1u << o->of)) && o->res == (int)b->n : o->res == 0;
			mask = booked & ~m;
		}
		if (ok && lin_search(h, done | (1u << i), mask, masks))
			return true;
	}
	return false;
}

static bool linearizable(const struct hist *h)
{
	uint32_t masks[SH_THREADS * SH_OPS] = { 0 };
	int i;

	for (i = 0; i < h->nops; i++)
		if (h->op[i].kind == OP_RESERVE && h->op[i].res == 0)
			masks[i] = ((1u << h->op[i].n) - 1) << h->op[i].first;
	return lin_search(h, 0, 0, masks);
}

struct sh_thread {
	pthread_t th;
	struct cw_slots_ctx *ctx;
	struct cw_slots *rec;
	struct hop *ops;
	int base;
	unsigned seed;
	atomic_int *gate;
};

static void *sh_main(void *arg)
{
	struct sh_thread *t = arg;
	struct cw_slots_booking b[SH_OPS];
	int i;

	atomic_fetch_sub(t->gate, 1);
	while (atomic_load(t->gate) > 0)
		sched_yield();
	for (i = 0; i < SH_OPS; i++) {
		struct hop *o = &t->ops[i];

		if (o->kind == OP_RESERVE) {
			struct cw_slots_req r = { .dir = rnd(&t->seed) & 1, .shape = CW_SLOTS_SINGLE,
						  .ndisks = 1, .disks = { t->rec },
						  .start_slot = o->start, .deadline_slot = o->deadline,
						  .size_slots = o->n };

			o->inv = stamp();
			o->res = cw_slots_reserve(t->ctx, &r, &b[i]);
			o->resp = stamp();
			o->first = o->res == 0 ? b[i].first_slot : -1;
		} else {
			int of = o->of - t->base;

			o->inv = stamp();
			o->res = t->ops[of].res == 0 ? cw_slots_release(t->ctx, &b[of]) : 0;
			o->resp = stamp();
		}
	}
	return NULL;
}

static void print_hist(const struct hist *h)
{
	int i;

	printf("  not linearizable:\n");
	for (i = 0; i < h->nops; i++) {
		const struct hop *o = &h->op[i];

		if (o->kind == OP_RESERVE)
			printf("    t%d reserve [%lld,%lld] n=%u -> %d first %lld  (%llu..%llu)\n",
			       i / SH_OPS, (long long)o->start, (long long)o->deadline, o->n, o->res,
			       (long long)o->first, (unsigned long long)o->inv, (unsigned long long)o->resp);
		else
			printf("    t%d release op%d -> %d  (%llu..%llu)\n", i / SH_OPS, o->of, o->res,
			       (unsigned long long)o->inv, (unsigned long long)o->resp);
	}
}

static void run_small_histories(enum cw_slots_mode mode, unsigned iters, unsigned *ret_bad)
{
	struct cw_slots_domain_opts dopts = { .size = sizeof(dopts), .mode = mode, .max_threads = 8,
					      .max_window = 8, .max_slots = 4 };
	struct cw_slots_opts ro = { .size = sizeof(ro), .ring_slots = 32 };
	unsigned it, seed = 12345;

	*ret_bad = 0;
	for (it = 0; it < iters; it++) {
		struct cw_slots_domain *dom;
		struct cw_slots *rec;
		struct sh_thread th[SH_THREADS];
		struct hist h = { .nops = SH_THREADS * SH_OPS };
		atomic_int gate = SH_THREADS;
		int t, i;

		CU_ASSERT_FATAL(cw_slots_domain_new(&dopts, &dom) == 0);
		CU_ASSERT_FATAL(cw_slots_new(dom, &ro, &rec) == 0);
		for (t = 0; t < SH_THREADS; t++) {
			for (i = 0; i < SH_OPS; i++) {
				struct hop *o = &h.op[t * SH_OPS + i];
				/* a release of this thread's previous reserve, sometimes */
				bool rel = i > 0 && h.op[t * SH_OPS + i - 1].kind == OP_RESERVE &&
					   rnd(&seed) % 3 == 0;

				if (rel) {
					*o = (struct hop){ .kind = OP_RELEASE, .of = t * SH_OPS + i - 1 };
				} else {
					*o = (struct hop){ .kind = OP_RESERVE, .start = rnd(&seed) % 5,
							   .n = 1 + rnd(&seed) % 3 };
					o->deadline = o->start + rnd(&seed) % 3;
				}
			}
			th[t] = (struct sh_thread){ .rec = rec, .ops = &h.op[t * SH_OPS], .base = t * SH_OPS,
						    .seed = rnd(&seed), .gate = &gate };
			CU_ASSERT_FATAL(cw_slots_ctx_new(dom, &th[t].ctx) == 0);
		}
		for (t = 0; t < SH_THREADS; t++)
			CU_ASSERT_FATAL(pthread_create(&th[t].th, NULL, sh_main, &th[t]) == 0);
		for (t = 0; t < SH_THREADS; t++)
			pthread_join(th[t].th, NULL);
		if (!linearizable(&h)) {
			if (!*ret_bad)
				print_hist(&h);
			(*ret_bad)++;
		}
		for (t = 0; t < SH_THREADS; t++)
			cw_slots_ctx_free(th[t].ctx);
		cw_slots_free(rec);
		cw_slots_domain_free(dom);
	}
}

static void test_small_histories(void)
{
	unsigned iters = UNDER_TSAN ? 150 : (unsigned)(300 * g_seconds), bad;

	run_small_histories(CW_SLOTS_LOCKFREE, iters, &bad);
	CU_ASSERT(bad == 0);
	run_small_histories(CW_SLOTS_WAITFREE, iters, &bad);
	CU_ASSERT(bad == 0);
}

/* The checker must reject what a record must never do. */
static void test_checker_rejects(void)
{
	struct hist h = { .nops = 2 };

	/* Two overlapping bookings, both answered. */
	h.op[0] = (struct hop){ OP_RESERVE, 0, 2, 2, 0, 1, 0, 1, 2 };
	h.op[1] = (struct hop){ OP_RESERVE, 0, 2, 2, 0, 2, 0, 3, 4 };
	CU_ASSERT(!linearizable(&h));
	/* Overlapping but concurrent: still impossible. */
	h.op[1].inv = 1;
	CU_ASSERT(!linearizable(&h));
	/* A FAIL while the window was vacant. */
	h.op[0] = (struct hop){ OP_RESERVE, 0, 2, 2, CW_SLOTS_FAIL, -1, 0, 1, 2 };
	h.op[1] = (struct hop){ OP_RESERVE, 5, 5, 1, 0, 5, 0, 3, 4 };
	CU_ASSERT(!linearizable(&h));
	/* FAIL is right if it may come after a booking that fills it. */
	h.op[1] = (struct hop){ OP_RESERVE, 0, 0, 4, 0, 0, 0, 0, 3 };
	CU_ASSERT(linearizable(&h));
	/* ... but not if the booking answered only after the FAIL began and
	 * was released before it answered. */
	h.nops = 3;
	h.op[1] = (struct hop){ OP_RESERVE, 0, 0, 4, 0, 0, 0, 0, 1 };
	h.op[2] = (struct hop){ OP_RELEASE, 0, 0, 0, 4, -1, 1, 2, 3 };
	h.op[0].inv = 5;
	h.op[0].resp = 6;
	CU_ASSERT(!linearizable(&h));
}

int main(void)
{
	const char *env = getenv("CW_STRESS_SECONDS");
	CU_pSuite s;

	g_seconds = env ? atof(env) : (UNDER_TSAN ? 0.4 : 1.5);
	if (g_seconds <= 0)
		g_seconds = 1.5;
	s = cwtest_suite("slots-stress", NULL, NULL);
	cwtest_add(s, "history checker rejects forged histories", test_checker_rejects);
	cwtest_add(s, "stress checker rejects forged histories", test_stress_checker_rejects);
	cwtest_add(s, "small histories are linearizable", test_small_histories);
	cwtest_add(s, "stress: lock-free", test_stress_lf);
	cwtest_add(s, "stress: wait-free", test_stress_wf);
	cwtest_add(s, "stress: snake and thick", test_stress_shapes);
	return cwtest_run();
}
