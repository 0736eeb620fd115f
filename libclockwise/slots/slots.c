/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * slots.c — the RADIR slot reservation record: P. Aggarwal, G. Yasa and
 * S. R. Sarangi, "RADIR: Lock-free and Wait-free Bandwidth Allocation
 * Models for Solid State Drives" (papers/radir.txt), sections III-IV and
 * appendices A (Algorithms 1 and 2) and B (the linearizability proof).
 *
 * The record is a ring of slot words (slots.h).  A request moves through the
 * phases of Algorithm 2 in its descriptor's state word:
 *   INIT(k, pos)    search from pos for a first slot and take it TRANSIENT
 *   TEMP(k, first)  take the other slots [first, first+n) TRANSIENT
 *   PERM(k, first)  linearized: convert them to RESERVED
 *   CANCEL(k, pos)  lost a slot; round k+1 starts at INIT(k+1, pos)
 *   FINISH / FAIL
 * Every transition is a CAS on the state word that names the round, so any
 * number of helpers can run a request and only one of them makes each step.
 *
 * Invariants (checked by cw_slots_valid() and the stress test):
 *  I1  a slot word changes owner only from VACANT (or free: a stale
 *      TRANSIENT, a released RESERVED, a CLOSED word of the previous lap),
 *      or from a TRANSIENT word after its request was cancelled (a CAS on
 *      the owner's state that happens before the slot is overwritten);
 *  I2  when a request's state goes TEMP(k) -> PERM(k) every slot of its
 *      run holds TRANSIENT(owner, k) — nobody overwrites such a slot without
 *      first cancelling round k, which makes that CAS fail;
 *  I3  every slot behind now is CLOSED or belongs to a later lap: the
 *      dispatcher closes a slot (cancelling or finishing a TRANSIENT owner)
 *      before it publishes the new now.
 *
 * Linearization points (appendix B, corrected):
 *  - a booking linearizes at its TEMP -> PERM CAS (I2 makes its slots
 *    vacant-for-everyone-else and held by it at that instant);
 *  - a FAIL linearizes at the end of a validated double collect (below);
 *  - a release linearizes at the store that sets its descriptor's
 *    relword: from then on every reader treats the booking's RESERVED
 *    words as free, so all its slots become vacant at one instant (those
 *    a dispatcher closed before are not given back, and not counted).
 *
 * Where the paper is wrong or silent, and what we do instead:
 *  - FAIL (Algorithm 2 line 10) is declared after a scan, and the proof
 *    says the outcome "is independent of other threads".  It is not: slots
 *    seen RESERVED early in the scan may be released and slots seen
 *    TRANSIENT may be cancelled before the scan ends, so no instant need
 *    exist at which the window was full.  We validate with a double
 *    collect: the first pass records every held slot that blocks a start
 *    position, the second re-reads them (relword first, then the word);
 *    owner-and-round words never repeat, so an unchanged second read means
 *    each was held throughout, in particular at the end of the first pass.
 *  - CANCEL restarts at index+1 (line 48) even when the request was
 *    preempted by a higher-priority TRANSIENT, which may itself be
 *    cancelled: a vacant run would then be skipped and a later FAIL be
 *    wrong.  We move the search position only past a slot held by a
 *    RESERVED (or linearized) booking; a preempted request restarts at its
 *    old first slot.
 *  - getHighPriorityRequest (lines 58-96) is not symmetric: line 60 tests a
 *    signed difference, lines 74-78 return reqB when both writes hit the
 *    last block, line 95 returns reqB on a tie.  Two contenders can then
 *    each decide the other wins (both help, nobody progresses) or each
 *    decide to win (both cancel).  prefer() is a strict order: every rule
 *    compares absolute differences both ways and the last tie goes to the
 *    older request (ticket).
 *  - Helping recursion (line 35) is unbounded and can cycle; we help at
 *    most HELP_DEPTH levels deep and otherwise return to the caller, which
 *    retries.
 *  - Per-slot TEMP state updates (line 30) are not needed: a helper finds
 *    progress by reading the run's slot words (TRANSIENT(owner, k)), which
 *    saves one CAS per slot.
 *  - A helper that took a slot for a round that has meanwhile ended leaves
 *    a stray TRANSIENT word; readers treat a TRANSIENT word whose round is
 *    not live (or lies outside its run) as vacant, and the taker undoes it.
 *  - The paper's record is an unbounded array and bookings are never
 *    handed on.  Here the array is a ring: a slot word carries its lap, the
 *    dispatcher closes every slot it passes (I3), and a CLOSED word of the
 *    previous lap is vacant.  Bookings reach the dispatcher through a
 *    commit (the reserve/commit split of ck_ring): the owner writes the
 *    booking's metadata, then sets COMMIT on its first slot with one CAS
 *    that races with the dispatcher's close of that slot, so a booking is
 *    either handed out once or its commit fails with -ETIMEDOUT.
 *
 * Speed: before taking a first slot the INIT search jumps past booked
 * slots of the first disk by the occupancy hint (slots.h; the paper's
 * getReserveSlot jump, a word per 64 slots), so few runs are begun only to
 * be cancelled; a cancelled run's TRANSIENT words are cleared by whoever
 * cancelled it; two adjacent plain words are taken, converted and passed
 * with one 16-byte CAS; the load factor is kept in per-context shares
 * (no locked add on a shared line per booking); the owner runs its
 * request from its own copy and stores its FINISH.
 *
 * Progress: lock-free — a CAS on a slot or a state word fails only because
 * another one succeeded, and every success moves some request forward
 * (FAIL validation retries only after a release changed the window).
 * Wait-free mode (the paper's WF_RADIR): each reserve first helps one
 * announced request, chosen round-robin, if it is older than WF_PATIENCE
 * tickets; a request cancelled rollback_limit times can no longer be
 * preempted by a younger one and is helped by all who meet it.  A pending
 * request is therefore helped by every thread within max_threads of its
 * operations.  This is the paper's argument, not a proof: a FAIL check
 * can be sent back by releases for as long as they keep coming, and the
 * packed words carry the ABA limits described in slots.h.
 *
 * Why one file, above the tree's 1,500 lines: the argument above is one
 * argument over one word format, and every part of the file leans on it.
 * The booking phases keep I1 and I2, the FAIL check is the double collect,
 * commit and release are linearized by the relword, the dispatcher's
 * close and advance keep I3 and race with commit (close_slot() cancels a
 * live owner through the same classify() and cancel_live() the bookers
 * use), and cw_slots_valid() checks all three.  Each side reads one
 * definition of a free word (classify()).  Cut between booking and
 * dispatching, the two sides of the commit/close race and the invariant
 * that joins them would sit in different files; the only part that
 * touches no slot word (constructors, accessors, mode names, about 250
 * lines) would leave the record above 1,500 lines all the same.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <errno.h>

#include "common/util.h"
#include "common/cleanup.h"
#include "common/invariant.h"
#include "slots/slots-internal.h"

#define HELP_DEPTH 3
#define C_OWNER_MASK_BITS 12
_Static_assert(C_OWNER_MASK == (1u << C_OWNER_MASK_BITS) - 1, "owner bits");
#define WF_PATIENCE 16
/* cw_slots_advance() publishes now every this many slots (a power of 2). */
#define ADVANCE_PUBLISH 32

enum cls { K_FREE, K_MINE, K_HELD, K_PAST, K_LIVE };
enum ures { U_DONE, U_BLOCKED, U_RETRY, U_GIVEUP };

/* A consistent copy of a request and its state (seqlock read). */
struct rview {
	uint32_t id;
	uint64_t st, seq;
	CW_SLOTS_REQ_FIELDS
};

static inline unsigned lap_of(const struct cw_slots *rec, int64_t p)
{
	return (unsigned)((uint64_t)p >> rec->lap_shift) & C_LAP_MASK;
}

/* Laps compare modulo 2^16: a word up to 2^15 - 1 laps ahead of slot p
 * belongs to a later slot (p is behind now). */
static inline bool lap_ahead(unsigned lv, unsigned lp)
{
	unsigned d = (lv - lp) & C_LAP_MASK;

	return d >= 1 && d <= C_LAP_MASK / 2;
}

/* Slot p is a whole ring behind now: its word belongs to a later lap
 * whatever the lap bits say (a stalled thread's view). */
static inline bool long_gone(const struct cw_slots *rec, int64_t p)
{
	return p + (int64_t)rec->ring <= cw_pr_load_acquire(&rec->now);
}

static inline uint64_t *cell_at(struct cw_slots *rec, int64_t p)
{
	return &rec->cells[(uint64_t)p & rec->mask];
}

/* Who counts a change of a record's load: a context's own share, or
 * NO_SHARE for callers without a context (dispatcher, advancers), which
 * use the shared word. */
#define NO_SHARE UINT32_MAX

static inline void load_add(struct cw_slots *rec, uint32_t share, int64_t d)
{
	int64_t *v;

	if (share == NO_SHARE) {
		cw_pr_faa_relaxed(&rec->load, d);
		return;
	}
	/* Only the context's thread writes its share: no locked add. */
	v = &rec->lshard[share].v;
	cw_pr_store_relaxed(v, cw_pr_load_relaxed(v) + d);
}

/* The load factor: reserved cells ahead of now (exact when quiescent). */
static int64_t load_of(struct cw_slots *rec)
{
	uint32_t hi = cw_pr_load_acquire(&rec->dom->hiwater), i;
	int64_t sum = cw_pr_load_relaxed(&rec->load);

	for (i = 0; i < hi; i++)
		sum += cw_pr_load_relaxed(&rec->lshard[i].v);
	return sum;
}

static inline uint64_t *occ_word(const struct cw_slots *rec, uint64_t i)
{
	return &rec->occ[i >> rec->occ_shift];
}

/* Sets or clears the hint bits of [p, p+n); skips words already so. */
static void occ_mark(struct cw_slots *rec, int64_t p, int64_t n, bool set)
{
	while (n > 0) {
		uint64_t i = (uint64_t)p & rec->mask, b = i & (rec->occ_group - 1), v;
		int64_t len = CW_MIN(n, (int64_t)(rec->occ_group - b));
		uint64_t m = (len == 64 ? ~UINT64_C(0) : (UINT64_C(1) << len) - 1) << b;
		uint64_t *w = occ_word(rec, i);

		v = cw_pr_load_relaxed(w);
		if (set && (v & m) != m)
			cw_pr_for_seq(w, m);
		else if (!set && (v & m))
			cw_pr_fand_seq(w, ~m);
		p += len;
		n -= len;
	}
}

/* Clears the hint bits of [p, p+n), slots being given back or passed.  If
 * now has passed p meanwhile, a booking of the next lap may already have
 * set a bit this clear erased (it read now > p before setting it, so this
 * read of now sees that too): put those back. */
static void occ_unmark(struct cw_slots *rec, int64_t p, int64_t n)
{
	int64_t q;

	occ_mark(rec, p, n, false);
	if (cw_pr_load_seq(&rec->now) <= p)
		return;
	for (q = p; q < p + n; q++) {
		uint64_t v = cw_pr_load_acquire(cell_at(rec, q));

		if (cell_state(v) == C_RESERVED && cell_lap(v) != lap_of(rec, q))
			occ_mark(rec, q, 1, true);
	}
}

/* The last slot in [p, p+n) whose hint bit is set, or -1. */
static int64_t occ_last(const struct cw_slots *rec, int64_t p, uint32_t n)
{
	int64_t end = p + n;

	while (end > p) {
		uint64_t i = (uint64_t)(end - 1) & rec->mask, b = i & (rec->occ_group - 1);
		int64_t len = CW_MIN(end - p, (int64_t)b + 1);
		uint64_t m = (len == 64 ? ~UINT64_C(0) : (UINT64_C(1) << len) - 1) << (b + 1 - len);
		uint64_t v = cw_pr_load_relaxed(occ_word(rec, i)) & m;

		if (v)
			return end - 1 - (int64_t)(b - (63 - (uint64_t)__builtin_clzll(v)));
		end -= len;
	}
	return -1;
}

/* The first s in [p, last] where the hint shows [s, s+n) vacant, or
 * last + 1: a word skips up to 64 booked slots, then occ_last() jumps
 * past a booking that would cut the run short. */
static int64_t occ_fit(const struct cw_slots *rec, int64_t p, uint32_t n, int64_t last)
{
	while (p <= last) {
		uint64_t i = (uint64_t)p & rec->mask, b = i & (rec->occ_group - 1);
		uint64_t free_bits = ~cw_pr_load_relaxed(occ_word(rec, i)) >> b;
		int64_t q;

		if (!free_bits) {
			p += rec->occ_group - b;
			continue;
		}
		p += __builtin_ctzll(free_bits);	/* may land early, never late */
		q = occ_last(rec, p, n);
		if (q < 0)
			break;
		p = q + 1;
	}
	return CW_MIN(p, last + 1);
}

static inline uint64_t relword_of(uint64_t round)
{
	return (round << 1) | 1;
}

static inline unsigned units_per_slot(const struct rview *rv)
{
	return rv->shape == CW_SLOTS_THICK ? rv->ndisks : 1;
}

static inline bool in_run(const struct rview *rv, int64_t p)
{
	int64_t first = rv->start + (int64_t)st_off(rv->st);

	return p >= first && p < first + rv->n;
}

static bool view_read(struct cw_slots_domain *dom, uint32_t id, struct rview *rv)
{
	struct desc *d = &dom->desc[id];
	uint64_t s1 = cw_pr_load_acquire(&d->seq);
	unsigned i;

	if (s1 & 1)
		return false;
	rv->id = id;
	rv->seq = s1;
	rv->start = cw_pr_load_acquire(&d->start);
	rv->deadline = cw_pr_load_acquire(&d->deadline);
	rv->ticket = cw_pr_load_acquire(&d->ticket);
	rv->block = cw_pr_load_acquire(&d->block);
	rv->base_prio = cw_pr_load_acquire(&d->base_prio);
	rv->n = cw_pr_load_acquire(&d->n);
	rv->dir = cw_pr_load_acquire(&d->dir);
	rv->shape = cw_pr_load_acquire(&d->shape);
	rv->ndisks = cw_pr_load_acquire(&d->ndisks);
	rv->deps = cw_pr_load_acquire(&d->deps);
	for (i = 0; i < CW_SLOTS_MAX_DISKS; i++) {
		rv->dummy[i] = cw_pr_load_acquire(&d->dummy[i]);
		rv->disks[i] = cw_pr_load_acquire(&d->disks[i]);
	}
	rv->st = cw_pr_load_acquire(&d->state);
	/* The acquire loads above keep this one after them (no fence: the
	 * same order, and ThreadSanitizer understands it). */
	return cw_pr_load_relaxed(&d->seq) == s1;
}

/* What slot p's word v means to request (me, mk). */
static enum cls classify(struct cw_slots *rec, int64_t p, uint64_t v, uint32_t me,
			 uint64_t mk, struct rview *ov)
{
	struct cw_slots_domain *dom = rec->dom;
	unsigned lp = lap_of(rec, p), lv = cell_lap(v), st = cell_state(v);
	uint32_t o = cell_owner(v);
	uint64_t ko = cell_round(v);

	if (lv != lp) {
		if (long_gone(rec, p))
			return K_PAST;
		if (((lv + 1) & C_LAP_MASK) == lp && st == C_CLOSED)
			return K_FREE;
		if (lap_ahead(lv, lp))
			return K_PAST;
		/* The previous lap is not closed: p is beyond the ring.  The
		 * window check at entry keeps every search inside it. */
		return K_HELD;
	}
	switch (st) {
	case C_VACANT:
		return K_FREE;
	case C_CLOSED:
		return K_PAST;
	case C_RESERVED:
		if (o < dom->max_threads &&
		    cw_pr_load_acquire(&dom->desc[o].relword) == relword_of(ko))
			return K_FREE;
		return K_HELD;
	default:
		break;
	}
	if (o == me && ko == mk)
		return K_MINE;
	if (o >= dom->max_threads || !view_read(dom, o, ov) || st_round(ov->st) != ko)
		return K_FREE;	/* stale: its round is over */
	switch (st_phase(ov->st)) {
	case P_INIT:
		return K_LIVE;
	case P_TEMP:
		return in_run(ov, p) ? K_LIVE : K_FREE;
	case P_PERM:
		return in_run(ov, p) ? K_HELD : K_FREE;
	default:
		return K_FREE;
	}
}

static inline int64_t absdiff(int64_t a, int64_t b)
{
	return a > b ? a - b : b - a;
}

/* Slots a request at state st holds before slot p (the paper's
 * getSlotBooked, from the run instead of a counter). */
static int64_t booked_before(const struct rview *rv, int64_t p)
{
	int64_t first = rv->start + (int64_t)st_off(rv->st);

	if (st_phase(rv->st) != P_TEMP || p < first)
		return 0;
	return p - first;
}

/* The priority rule (section IV-C), made a strict order: true when a wins
 * slot p of rec against b. */
static bool prefer(struct cw_slots *rec, const struct rview *a, const struct rview *b, int64_t p)
{
	struct cw_slots_domain *dom = rec->dom;
	const struct cw_slots_weights *w = &dom->w;
	bool sa = cw_pr_load_relaxed(&dom->desc[a->id].rollbacks) >= w->rollback_limit;
	bool sb = cw_pr_load_relaxed(&dom->desc[b->id].rollbacks) >= w->rollback_limit;
	int64_t da, db, pa, pb;

	/* A starving request is never preempted by a fresher one. */
	if (sa != sb)
		return sa;
	if (sa)
		return a->ticket < b->ticket;
	da = absdiff(a->deadline, p);
	db = absdiff(b->deadline, p);
	if (absdiff(da, db) > w->deadline_range)
		return da < db;
	pa = a->base_prio + cw_pr_load_relaxed(&dom->desc[a->id].prio);
	pb = b->base_prio + cw_pr_load_relaxed(&dom->desc[b->id].prio);
	if (absdiff(pa, pb) > w->priority_threshold)
		return pa > pb;
	if (a->dir != b->dir)
		return a->dir == CW_SLOTS_READ;
	if (a->dir == CW_SLOTS_WRITE) {
		uint64_t last = cw_pr_load_relaxed(&rec->last_block);
		bool ma = a->block == last, mb = b->block == last;

		if (ma != mb)
			return ma;
	}
	if (absdiff(a->n, b->n) > w->size_range)
		return w->prefer_large ? a->n > b->n : a->n < b->n;
	if (absdiff(a->deps, b->deps) > w->deps_range)
		return a->deps > b->deps;
	pa = booked_before(a, p);
	pb = booked_before(b, p);
	if (pa != pb)
		return pa > pb;
	return a->ticket < b->ticket;
}

static void run(struct cw_slots_ctx *ctx, uint32_t id, uint64_t ticket, int depth);
static void perm_step(struct rview *rv, uint32_t share);

/* Gives back the slots round k held in [first, end) after it was
 * cancelled; readers would treat them as free anyway, but each would first
 * have to read the owner's descriptor to find out. */
static void clean_run(const struct rview *rv, uint64_t k, int64_t first, int64_t end)
{
	int64_t p;
	unsigned i;

	for (p = first; p < end; p++)
		for (i = 0; i < rv->ndisks; i++) {
			struct cw_slots *rec = rv->disks[i];
			uint64_t t = cell_pack(C_TRANSIENT, lap_of(rec, p), rv->id, k);

			if (cw_pr_load_relaxed(cell_at(rec, p)) == t)
				cw_pr_cas_seq_u64(cell_at(rec, p), &t, cell_pack(C_VACANT, lap_of(rec, p), 0, 0));
		}
}

/* Cancels round ko of a live request seen in ov (a preemption: the search
 * position stays where the run started). */
static bool cancel_live(struct cw_slots_domain *dom, const struct rview *ov)
{
	uint64_t st = ov->st, k = st_round(st);
	struct desc *d = &dom->desc[ov->id];

	if (st_phase(st) != P_INIT && st_phase(st) != P_TEMP)
		return false;
	if (!cw_pr_cas_seq_u64(&d->state, &st, st_pack(P_CANCEL, k, st_off(st))))
		return false;
	cw_pr_faa_seq(&d->rollbacks, 1);
	cw_pr_faa_relaxed(&d->prio, 1);
	if (st_phase(st) == P_TEMP) {
		int64_t first = ov->start + (int64_t)st_off(st);

		clean_run(ov, k, first, first + ov->n);
	}
	return true;
}

/* Request rv (round k) met a live TRANSIENT word of ov at slot p of rec. */
static enum ures contend(struct cw_slots_ctx *ctx, struct cw_slots *rec, const struct rview *rv,
			 struct rview *ov, int64_t p, int depth)
{
	if (prefer(rec, rv, ov, p)) {
		cancel_live(rec->dom, ov);
		return U_RETRY;
	}
	if (depth >= HELP_DEPTH)
		return U_GIVEUP;
	run(ctx, ov->id, ov->ticket, depth + 1);
	cw_pr_faa_relaxed(&rec->dom->desc[rv->id].prio, 1);
	return U_RETRY;
}

/* Undoes a slot taken for (id, k) if the request no longer needs it: its
 * round ended without a booking, or the slot lies outside its run. */
static bool keep_or_undo(struct cw_slots_domain *dom, const struct rview *rv, uint64_t k,
			 struct cw_slots *rec, int64_t p, uint64_t mine)
{
	uint64_t st = cw_pr_load_acquire(&dom->desc[rv->id].state), v;
	unsigned ph = st_phase(st);
	int64_t first = rv->start + (int64_t)st_off(st);

	/* In PERM or FINISH the slot can be part of the run: the PERM CAS may
	 * have come after our CAS and counted it, and helpers converted it.
	 * A slot taken outside the run, or for a round that ended without
	 * a booking, goes back.  (Had our CAS come after the booking was
	 * released, a helper stalled since PERM could still convert it: a
	 * leaked slot until the dispatcher passes it, which needs two
	 * threads stalled across a whole booking's life.) */
	if (st_round(st) == k &&
	    (ph == P_INIT || ((ph == P_TEMP || ph == P_PERM || ph == P_FINISH) &&
			      p >= first && p < first + rv->n)))
		return true;
	v = mine;
	cw_pr_cas_seq_u64(cell_at(rec, p), &v, cell_pack(C_VACANT, lap_of(rec, p), 0, 0));
	return false;
}

/* Snake: after taking mirror d at p, keep only the lowest mirror holding
 * (id, k) at p. */
static void snake_dedupe(const struct rview *rv, uint64_t k, unsigned d, int64_t p, uint64_t mine)
{
	unsigned e;

	for (e = 0; e < rv->ndisks; e++) {
		struct cw_slots *r2 = rv->disks[e];
		uint64_t v, want = cell_pack(C_TRANSIENT, lap_of(r2, p), rv->id, k);

		if (e == d)
			continue;
		v = cw_pr_load_acquire(cell_at(r2, p));
		if (cell_id(v) != cell_id(want) || cell_state(v) != C_TRANSIENT)
			continue;
		if (e < d) {
			uint64_t x = mine;

			cw_pr_cas_seq_u64(cell_at(rv->disks[d], p), &x,
					  cell_pack(C_VACANT, lap_of(rv->disks[d], p), 0, 0));
			return;
		}
		cw_pr_cas_seq_u64(cell_at(r2, p), &v, cell_pack(C_VACANT, lap_of(r2, p), 0, 0));
	}
}

/* Mirror order for a snake slot: fewest dummy slots, then lowest load. */
static void snake_order(const struct rview *rv, unsigned *order)
{
	int64_t load[CW_SLOTS_MAX_DISKS];
	unsigned i, j;

	order[0] = 0;
	if (rv->ndisks < 2)
		return;		/* one disk: no loads to sum */
	for (i = 0; i < rv->ndisks; i++) {
		order[i] = i;
		load[i] = load_of(rv->disks[i]);
	}
	for (i = 1; i < rv->ndisks; i++)
		for (j = i; j > 0; j--) {
			unsigned a = order[j - 1], b = order[j];
			int64_t la = load[a], lb = load[b];

			if (rv->dummy[a] < rv->dummy[b] ||
			    (rv->dummy[a] == rv->dummy[b] && la <= lb))
				break;
			order[j - 1] = b;
			order[j] = a;
		}
}

/* The common case of unit_step() on one disk, without a copy of anyone's
 * descriptor: slot p of rec is ours already, or plainly vacant (a VACANT
 * or previous-lap CLOSED word, which classify() would call K_FREE).  The
 * caller's state rv->st names round k, and in TEMP a run covering p, so
 * finding the state word unchanged after the CAS is keep_or_undo()'s
 * "keep" without its decoding.  U_GIVEUP: take the general path. */
static enum ures unit_fast(struct cw_slots_domain *dom, const struct rview *rv, uint64_t k,
			   struct cw_slots *rec, int64_t p)
{
	unsigned lp = lap_of(rec, p);
	uint64_t *c = cell_at(rec, p), v = cw_pr_load_acquire(c);
	uint64_t mine = cell_pack(C_TRANSIENT, lp, rv->id, k);

	if (v == mine)
		return U_DONE;
	if (v != cell_pack(C_VACANT, lp, 0, 0) &&
	    (v != cell_pack(C_CLOSED, lp - 1, 0, 0) || long_gone(rec, p)))
		return U_GIVEUP;
	if (!cw_pr_cas_seq_u64(c, &v, mine))
		return U_RETRY;
	if (cw_pr_load_acquire(&dom->desc[rv->id].state) == rv->st)
		return U_DONE;
	return keep_or_undo(dom, rv, k, rec, p, mine) ? U_DONE : U_RETRY;
}

/* Is v plainly vacant for slot p of rec at lap lp (unit_fast's test)? */
static inline bool plain_vacant(struct cw_slots *rec, int64_t p, unsigned lp, uint64_t v)
{
	return v == cell_pack(C_VACANT, lp, 0, 0) ||
	       (v == cell_pack(C_CLOSED, lp - 1, 0, 0) && !long_gone(rec, p));
}

/* unit_fast() for slots p and p+1 (p even) with one CAS: true when the
 * request holds both; false leaves them to one slot at a time. */
static bool pair_fast(struct cw_slots_domain *dom, const struct rview *rv, uint64_t k,
		      struct cw_slots *rec, int64_t p)
{
	unsigned lp = lap_of(rec, p);	/* p + 1 is in the same lap: p is even */
	uint64_t *c = cell_at(rec, p), v0, v1;
	uint64_t mine = cell_pack(C_TRANSIENT, lp, rv->id, k);
	bool k0, k1;

	if (!CW_PR_HAVE_CAS_PAIR)
		return false;
	v0 = cw_pr_load_acquire(c);
	v1 = cw_pr_load_acquire(c + 1);
	if (!plain_vacant(rec, p, lp, v0) || !plain_vacant(rec, p + 1, lp, v1) ||
	    !cw_pr_cas_pair_seq(c, v0, v1, mine, mine))
		return false;
	if (cw_pr_load_acquire(&dom->desc[rv->id].state) == rv->st)
		return true;
	k0 = keep_or_undo(dom, rv, k, rec, p, mine);
	k1 = keep_or_undo(dom, rv, k, rec, p + 1, mine);
	return k0 && k1;
}

/* Takes unit j of slot p for request rv, round k (Algorithm 1 for one
 * slot): U_DONE when it holds it, U_BLOCKED when a booking holds it. */
static enum ures unit_step(struct cw_slots_ctx *ctx, const struct rview *rv, uint64_t k,
			   int64_t p, unsigned j, int depth)
{
	unsigned order[CW_SLOTS_MAX_DISKS], i, nd = 1, live = CW_SLOTS_MAX_DISKS;
	uint64_t vals[CW_SLOTS_MAX_DISKS];
	enum cls cl[CW_SLOTS_MAX_DISKS];
	struct rview ov[CW_SLOTS_MAX_DISKS];

	if (rv->shape == CW_SLOTS_SNAKE) {
		nd = rv->ndisks;
		snake_order(rv, order);
	} else {
		enum ures u;

		order[0] = rv->shape == CW_SLOTS_THICK ? j : 0;
		u = unit_fast(ctx->dom, rv, k, rv->disks[order[0]], p);
		if (u != U_GIVEUP)
			return u;
	}
	for (i = 0; i < nd; i++) {
		struct cw_slots *rec = rv->disks[order[i]];

		vals[i] = cw_pr_load_acquire(cell_at(rec, p));
		cl[i] = classify(rec, p, vals[i], rv->id, k, &ov[i]);
		if (cl[i] == K_MINE)
			return U_DONE;
	}
	for (i = 0; i < nd; i++) {
		struct cw_slots *rec = rv->disks[order[i]];
		uint64_t mine = cell_pack(C_TRANSIENT, lap_of(rec, p), rv->id, k);

		if (cl[i] == K_LIVE && live == CW_SLOTS_MAX_DISKS)
			live = i;
		if (cl[i] != K_FREE)
			continue;
		if (!cw_pr_cas_seq_u64(cell_at(rec, p), &vals[i], mine))
			return U_RETRY;
		if (cell_state(vals[i]) == C_RESERVED && cell_lap(vals[i]) == lap_of(rec, p))
			load_add(rec, ctx->id, -1);	/* a released booking's */
		if (!keep_or_undo(ctx->dom, rv, k, rec, p, mine))
			return U_RETRY;
		if (nd > 1)
			snake_dedupe(rv, k, order[i], p, mine);
		return U_DONE;
	}
	if (live < CW_SLOTS_MAX_DISKS)
		return contend(ctx, rv->disks[order[live]], rv, &ov[live], p, depth);
	return U_BLOCKED;
}

static int64_t min_now(const struct rview *rv)
{
	int64_t m = INT64_MAX;
	unsigned i;

	for (i = 0; i < rv->ndisks; i++)
		m = CW_MIN(m, cw_pr_load_acquire(&rv->disks[i]->now));
	return m;
}

/* Is start position s blocked for good by a held slot?  Records the held
 * words for the second collect.  Returns 1 blocked, 0 not. */
static int position_blocked(struct cw_slots_ctx *ctx, const struct rview *rv, uint64_t k,
			    int64_t p, size_t *nobs)
{
	bool snake = rv->shape == CW_SLOTS_SNAKE;
	unsigned i, nd = rv->shape == CW_SLOTS_SINGLE ? 1 : rv->ndisks;
	size_t mark = *nobs;
	struct rview ov;

	/* Blocked: some disk held (single, thick) or every mirror (snake). */
	for (i = 0; i < nd; i++) {
		struct cw_slots *rec = rv->disks[i];
		uint64_t v = cw_pr_load_acquire(cell_at(rec, p));
		enum cls c = classify(rec, p, v, rv->id, k, &ov);

		/* At most nd a position, over at most max_window + max_slots
		 * positions (check_req): obs_cap holds them all. */
		if (c == K_HELD && !NEVER(*nobs >= ctx->obs_cap))
			ctx->obs[(*nobs)++] = (struct obs){ cell_at(rec, p), v };
		if (c == K_HELD || c == K_PAST) {
			if (!snake)
				return 1;
		} else if (snake) {
			break;
		}
	}
	if (snake && i == nd)
		return 1;
	*nobs = mark;
	return 0;
}

/* The FAIL check: returns 1 when no start in the window was vacant at the
 * end of the first collect, else 0 and a position to search from. */
static int verify_fail(struct cw_slots_ctx *ctx, const struct rview *rv, uint64_t k,
		       int64_t *ret_pos)
{
	struct cw_slots_domain *dom = ctx->dom;
	int64_t s0 = CW_MAX(rv->start, min_now(rv)), p, run_len = 0;
	size_t nobs = 0, i;

	for (p = s0; p <= rv->deadline + (int64_t)rv->n - 1; p++) {
		if (position_blocked(ctx, rv, k, p, &nobs)) {
			run_len = 0;
			continue;
		}
		if (++run_len == rv->n) {
			*ret_pos = p - rv->n + 1;
			return 0;
		}
	}
	if (nobs >= ctx->obs_cap) {
		*ret_pos = s0;		/* cannot happen: obs_cap covers a window */
		return 0;
	}
	/* Second collect: each held word must still be held by the same
	 * booking, not released (relword read before the word). */
	for (i = 0; i < nobs; i++) {
		uint64_t old = ctx->obs[i].val, now_v;
		uint32_t o = cell_owner(old);

		if (cw_pr_load_acquire(&dom->desc[o].relword) == relword_of(cell_round(old)))
			break;
		now_v = cw_pr_load_acquire(ctx->obs[i].cell);
		if (cell_id(now_v) != cell_id(old) ||
		    (cell_state(now_v) != C_TRANSIENT && cell_state(now_v) != C_RESERVED))
			break;
	}
	if (i < nobs) {
		*ret_pos = s0;
		return 0;
	}
	return 1;
}

/* After losing the INIT -> TEMP CAS: give back what we took at p unless
 * the winner's run covers it. */
static void undo_at(struct cw_slots_domain *dom, const struct rview *rv, uint64_t k, int64_t p)
{
	unsigned i;

	for (i = 0; i < rv->ndisks; i++) {
		struct cw_slots *rec = rv->disks[i];
		uint64_t mine = cell_pack(C_TRANSIENT, lap_of(rec, p), rv->id, k);

		if (cw_pr_load_acquire(cell_at(rec, p)) == mine)
			keep_or_undo(dom, rv, k, rec, p, mine);
	}
}

static void init_step(struct cw_slots_ctx *ctx, struct rview *rv, int depth, bool *giveup)
{
	struct cw_slots_domain *dom = ctx->dom;
	struct desc *d = &dom->desc[rv->id];
	uint64_t st = rv->st, k = st_round(st);
	int64_t p = CW_MAX(rv->start + (int64_t)st_off(st), min_now(rv));
	bool fast = true;

	for (;;) {
		while (p <= rv->deadline) {
			enum ures u;

			/* Slots booked on the first disk end every start there: the
			 * paper's getReserveSlot jump, by the occupancy hint.  A
			 * free slot passed over here (a stale bit) is found by
			 * verify_fail(), and after that the full step looks at
			 * each slot. */
			if (fast && rv->shape != CW_SLOTS_SNAKE) {
				p = occ_fit(rv->disks[0], p, rv->n, rv->deadline);
				if (p > rv->deadline)
					break;
			}
			u = unit_step(ctx, rv, k, p, 0, depth);

			if (u == U_DONE) {
				uint64_t e = st;

				if (!cw_pr_cas_seq_u64(&d->state, &e,
						       st_pack(P_TEMP, k, (uint64_t)(p - rv->start))))
					undo_at(dom, rv, k, p);
				return;
			}
			if (u == U_GIVEUP) {
				*giveup = true;
				return;
			}
			if (u == U_BLOCKED)
				p++;
			else if (cw_pr_load_acquire(&d->state) != st)
				return;
		}
		if (verify_fail(ctx, rv, k, &p)) {
			uint64_t e = st;

			cw_pr_cas_seq_u64(&d->state, &e, st_pack(P_FAIL, k, 0));
			return;
		}
		fast = false;
		if (cw_pr_load_acquire(&d->state) != st)
			return;
	}
}

static void temp_step(struct cw_slots_ctx *ctx, struct rview *rv, int depth, bool *giveup)
{
	struct desc *d = &ctx->dom->desc[rv->id];
	uint64_t st = rv->st, k = st_round(st), e;
	int64_t first = rv->start + (int64_t)st_off(st);
	unsigned w = units_per_slot(rv), u = 0;

	while (u < rv->n * w) {
		int64_t p = first + u / w;
		enum ures r;

		if (rv->shape == CW_SLOTS_SINGLE && !(p & 1) && u + 1 < rv->n &&
		    pair_fast(ctx->dom, rv, k, rv->disks[0], p)) {
			u += 2;
			continue;
		}
		r = unit_step(ctx, rv, k, p, u % w, depth);
		if (r == U_DONE) {
			u++;
			continue;
		}
		if (r == U_GIVEUP) {
			*giveup = true;
			return;
		}
		if (r == U_BLOCKED) {
			/* Every start up to p overlaps the booking at p. */
			e = st;
			if (cw_pr_cas_seq_u64(&d->state, &e,
					      st_pack(P_CANCEL, k, (uint64_t)(p + 1 - rv->start))))
				clean_run(rv, k, first, p);
			return;
		}
		if (cw_pr_load_acquire(&d->state) != st)
			return;
	}
	e = st;
	/* The linearization point of a booking. */
	cw_pr_cas_seq_u64(&d->state, &e, st_pack(P_PERM, k, st_off(st)));
}

/* PERM: make the run RESERVED (idempotent, any number of helpers); share
 * counts the load the caller adds. */
static void perm_step(struct rview *rv, uint32_t share)
{
	struct cw_slots_domain *dom = rv->disks[0]->dom;
	uint64_t st = rv->st, k = st_round(st), e;
	int64_t first = rv->start + (int64_t)st_off(st), p;
	int64_t conv[CW_SLOTS_MAX_DISKS] = { 0 };
	unsigned j, w = units_per_slot(rv);

	int64_t lo = INT64_MAX, hi = -1;

	/* One disk: each word is converted or already was (no mirrors); the
	 * hint bits of what this caller converted are set after. */
	for (p = first; rv->shape == CW_SLOTS_SINGLE && p < first + rv->n; p++) {
		struct cw_slots *rec = rv->disks[0];
		unsigned lp = lap_of(rec, p);
		uint64_t *c = cell_at(rec, p), t = cell_pack(C_TRANSIENT, lp, rv->id, k);
		uint64_t r = cell_pack(C_RESERVED, lp, rv->id, k);
		uint64_t v = cw_pr_load_acquire(c);

		if (v != t)
			continue;
		/* Two words with one CAS when both still wait (p even). */
		if (!(p & 1) && p + 1 < first + rv->n && cw_pr_load_acquire(c + 1) == t &&
		    cw_pr_cas_pair_seq(c, t, t, r, r)) {
			conv[0] += 2;
			lo = CW_MIN(lo, p);
			hi = ++p;
			continue;
		}
		if (cw_pr_cas_seq_u64(c, &v, r)) {
			conv[0]++;
			lo = CW_MIN(lo, p);
			hi = p;
		}
	}
	if (hi >= 0)
		occ_mark(rv->disks[0], lo, hi + 1 - lo, true);
	for (p = first; rv->shape != CW_SLOTS_SINGLE && p < first + rv->n; p++) {
		bool kept = false;

		for (j = 0; j < (rv->shape == CW_SLOTS_SNAKE ? rv->ndisks : w); j++) {
			struct cw_slots *rec = rv->disks[rv->shape == CW_SLOTS_SINGLE ? 0 : j];
			uint64_t *c = cell_at(rec, p);
			uint64_t t = cell_pack(C_TRANSIENT, lap_of(rec, p), rv->id, k);
			uint64_t v = cw_pr_load_acquire(c);

			if (cell_id(v) != cell_id(t) ||
			    (cell_state(v) != C_TRANSIENT && cell_state(v) != C_RESERVED))
				continue;
			if (kept) {	/* a second snake mirror for p */
				if (cell_state(v) == C_RESERVED)
					occ_unmark(rec, p, 1);
				if (cw_pr_cas_seq_u64(c, &v, cell_pack(C_VACANT, lap_of(rec, p), 0, 0)) &&
				    cell_state(v) == C_RESERVED)
					load_add(rec, share, -1);
				continue;
			}
			if (rv->shape == CW_SLOTS_SNAKE)
				kept = true;
			if (cell_state(v) == C_TRANSIENT &&
			    cw_pr_cas_seq_u64(c, &v, cell_pack(C_RESERVED, lap_of(rec, p), rv->id, k))) {
				conv[rv->shape == CW_SLOTS_SINGLE ? 0 : j]++;
				occ_mark(rec, p, 1, true);
			}
		}
	}
	for (j = 0; j < rv->ndisks; j++)
		if (conv[j])
			load_add(rv->disks[j], share, conv[j]);
	/* Written only when it changes: every submitter reads this line. */
	if (rv->dir == CW_SLOTS_WRITE)
		for (j = 0; j < rv->ndisks; j++)
			if (cw_pr_load_relaxed(&rv->disks[j]->last_block) != rv->block)
				cw_pr_store_relaxed(&rv->disks[j]->last_block, rv->block);
	/* From PERM(k) the only step is to FINISH(k): the owner (whose next
	 * request is the only other writer) may store it; helpers, which
	 * may be late, must not overwrite a newer request. */
	e = st;
	if (share == rv->id)
		cw_pr_store_release(&dom->desc[rv->id].state, st_pack(P_FINISH, k, st_off(st)));
	else
		cw_pr_cas_seq_u64(&dom->desc[rv->id].state, &e, st_pack(P_FINISH, k, st_off(st)));
}

/* Algorithm 2: runs request (id, ticket) until it finishes, fails, or (when
 * helping) it cannot progress without helping too deep.  own: the owner's
 * copy of what it just announced, which spares it reading it back. */
static void run_from(struct cw_slots_ctx *ctx, uint32_t id, uint64_t ticket, int depth,
		     const struct rview *own)
{
	struct desc *d = &ctx->dom->desc[id];
	struct rview rv;
	bool giveup = false;
	uint64_t seq = 1;

	if (own) {
		rv = *own;
		seq = own->seq;
	}

	while (!giveup) {
		uint64_t st, e;

		/* The request's fields stay while seq does: after the first
		 * copy only the state word needs reading. */
		if (seq & 1) {
			if (!view_read(ctx->dom, id, &rv)) {
				if (cw_pr_load_relaxed(&d->seq) & 1)
					return;	/* the owner is announcing a newer one */
				continue;
			}
			if (rv.ticket != ticket || rv.ndisks == 0 || rv.ndisks > CW_SLOTS_MAX_DISKS)
				return;
			seq = rv.seq;
		} else {
			rv.st = cw_pr_load_acquire(&d->state);
			if (cw_pr_load_relaxed(&d->seq) != seq)
				return;		/* a newer request: ours is over */
		}
		st = rv.st;
		switch (st_phase(st)) {
		case P_INIT:
			init_step(ctx, &rv, depth, &giveup);
			break;
		case P_TEMP:
			temp_step(ctx, &rv, depth, &giveup);
			break;
		case P_PERM:
			perm_step(&rv, ctx->id);
			break;
		case P_CANCEL:
			e = st;
			cw_pr_cas_seq_u64(&d->state, &e, st_pack(P_INIT, st_round(st) + 1, st_off(st)));
			break;
		default:
			return;
		}
	}
}

static void run(struct cw_slots_ctx *ctx, uint32_t id, uint64_t ticket, int depth)
{
	run_from(ctx, id, ticket, depth, NULL);
}

/* Wait-free mode: help one announced request, round-robin, if old. */
static void help_one(struct cw_slots_ctx *ctx, uint64_t my_ticket)
{
	struct cw_slots_domain *dom = ctx->dom;
	uint32_t hi = cw_pr_load_acquire(&dom->hiwater);
	uint32_t id = (uint32_t)((ctx->id + ++ctx->ops) % CW_MAX(hi, 1u));
	struct desc *d = &dom->desc[id];
	struct rview rv;
	unsigned ph = st_phase(cw_pr_load_acquire(&d->state));

	/* Two loads tell whether there is anything to help: most of the
	 * time there is not, and the whole copy is not worth reading. */
	if (id == ctx->id || ph < P_INIT || ph > P_CANCEL ||
	    cw_pr_load_relaxed(&d->ticket) + WF_PATIENCE >= my_ticket)
		return;
	if (!view_read(dom, id, &rv) || rv.ndisks == 0)
		return;
	ph = st_phase(rv.st);
	if (ph >= P_INIT && ph <= P_CANCEL && rv.ticket + WF_PATIENCE < my_ticket)
		run(ctx, id, rv.ticket, 1);
}

static int check_req(struct cw_slots_domain *dom, const struct cw_slots_req *req)
{
	unsigned i, j;

	if (!req || req->size_slots == 0 || req->ndisks == 0 ||
	    req->ndisks > CW_SLOTS_MAX_DISKS || req->start_slot < 0 ||
	    req->deadline_slot < req->start_slot ||
	    (req->dir != CW_SLOTS_READ && req->dir != CW_SLOTS_WRITE))
		return -EINVAL;
	switch (req->shape) {
	case CW_SLOTS_SINGLE:
		if (req->ndisks != 1)
			return -EINVAL;
		break;
	case CW_SLOTS_SNAKE:
	case CW_SLOTS_THICK:
		break;
	default:
		return -EINVAL;
	}
	for (i = 0; i < req->ndisks; i++) {
		if (!req->disks[i] || req->disks[i]->dom != dom)
			return -EINVAL;
		for (j = 0; j < i; j++)
			if (req->disks[j] == req->disks[i])
				return -EINVAL;
	}
	return 0;
}

/* Disk slots of a request: size plus dummy slots (the most any disk of a
 * thick request adds, the fewest of a snake's mirrors — it prefers them). */
static uint32_t disk_slots(const struct cw_slots_req *req, uint32_t *dummy)
{
	uint32_t add = req->shape == CW_SLOTS_SNAKE ? UINT32_MAX : 0;
	unsigned i;

	for (i = 0; i < req->ndisks; i++) {
		struct cw_slots *r = req->disks[i];

		dummy[i] = r->dummy ? r->dummy(r->dummy_arg, req) : 0;
		add = req->shape == CW_SLOTS_SNAKE ? CW_MIN(add, dummy[i]) : CW_MAX(add, dummy[i]);
	}
	return add > UINT32_MAX - req->size_slots ? UINT32_MAX : req->size_slots + add;
}

static int reserve_locked(struct cw_slots_ctx *ctx, const struct cw_slots_req *req,
			  int64_t s0, uint32_t n, const uint32_t *dummy, uint64_t k,
			  int64_t *ret_first)
{
	struct rview rv = { .id = ctx->id, .shape = req->shape, .ndisks = req->ndisks };
	unsigned order[CW_SLOTS_MAX_DISKS];
	int64_t s = s0, p;
	unsigned i, j;
	/* The same search as the lock-free modes: jump by the occupancy hint
	 * first, and look at every slot only before answering FAIL. */
	bool fast = req->shape != CW_SLOTS_SNAKE;

	memcpy(rv.disks, req->disks, sizeof(rv.disks));
	memcpy(rv.dummy, dummy, sizeof(rv.dummy));
	for (;;) {
		int64_t bad = -1;

		if (s > req->deadline_slot) {
			if (!fast)
				return CW_SLOTS_FAIL;
			fast = false;
			s = s0;
			continue;
		}
		if (fast) {
			s = occ_fit(req->disks[0], s, n, req->deadline_slot);
			if (s > req->deadline_slot)
				continue;
		}
		for (p = s; bad < 0 && p < s + n; p++) {
			ctx->pick[p - s] = CW_SLOTS_MAX_DISKS;
			snake_order(&rv, order);
			for (j = 0; j < req->ndisks; j++) {
				struct cw_slots *rec = req->disks[order[j]];
				struct rview ov;
				enum cls c = classify(rec, p, cw_pr_load_relaxed(cell_at(rec, p)),
						      ctx->id, k, &ov);

				if (c == K_FREE) {
					if (ctx->pick[p - s] == CW_SLOTS_MAX_DISKS)
						ctx->pick[p - s] = (uint8_t)order[j];
				} else if (req->shape != CW_SLOTS_SNAKE) {
					ctx->pick[p - s] = CW_SLOTS_MAX_DISKS;
					break;
				}
			}
			if (ctx->pick[p - s] == CW_SLOTS_MAX_DISKS)
				bad = p;
		}
		if (bad >= 0) {
			s = bad + 1;
			continue;
		}
		for (i = 0; i < req->ndisks; i++) {
			struct cw_slots *rec = req->disks[i];
			int64_t got = 0;

			for (p = s; p < s + n; p++) {
				if (req->shape == CW_SLOTS_SNAKE && ctx->pick[p - s] != i)
					continue;
				cw_pr_store_release(cell_at(rec, p),
						    cell_pack(C_RESERVED, lap_of(rec, p), ctx->id, k));
				if (req->shape == CW_SLOTS_SNAKE)
					occ_mark(rec, p, 1, true);
				got++;
			}
			if (req->shape != CW_SLOTS_SNAKE)
				occ_mark(rec, s, n, true);
			load_add(rec, ctx->id, got);
			if (req->dir == CW_SLOTS_WRITE &&
			    cw_pr_load_relaxed(&rec->last_block) != req->block)
				cw_pr_store_relaxed(&rec->last_block, req->block);
		}
		*ret_first = s;
		return 0;
	}
}

_Static_assert(CW_SLOTS_MAX_DISKS < 255, "pick holds a disk index");

/* Publishes a request in the owner's descriptor (a seqlock write: helpers
 * copy the fields only while seq is even and unchanged), then its INIT
 * state, which makes it visible to helpers.  own (may be NULL) gets the
 * owner's copy, as view_read() would read it. */
static void announce(struct cw_slots_ctx *ctx, const struct cw_slots_req *req, int64_t s0,
		     uint32_t n, const uint32_t *dummy, uint64_t ticket, uint64_t k,
		     struct rview *own)
{
	struct desc *d = &ctx->dom->desc[ctx->id];
	uint64_t seq = cw_pr_load_relaxed(&d->seq);
	unsigned i;

	cw_pr_store_relaxed(&d->seq, seq + 1);
	/* Release stores keep the odd seq before each field. */
	cw_pr_store_release(&d->start, s0);
	cw_pr_store_release(&d->deadline, req->deadline_slot);
	cw_pr_store_release(&d->ticket, ticket);
	cw_pr_store_release(&d->block, req->block);
	cw_pr_store_release(&d->base_prio, (int64_t)req->priority);
	cw_pr_store_release(&d->n, n);
	cw_pr_store_release(&d->dir, (uint32_t)req->dir);
	cw_pr_store_release(&d->shape, (uint32_t)req->shape);
	cw_pr_store_release(&d->ndisks, req->ndisks);
	cw_pr_store_release(&d->deps, req->dependants);
	for (i = 0; i < CW_SLOTS_MAX_DISKS; i++) {
		cw_pr_store_release(&d->dummy[i], dummy[i]);
		cw_pr_store_release(&d->disks[i], i < req->ndisks ? req->disks[i] : NULL);
	}
	cw_pr_store_release(&d->prio, 0);
	cw_pr_store_release(&d->rollbacks, 0);
	cw_pr_store_release(&d->seq, seq + 2);
	cw_pr_store_release(&d->state, st_pack(P_INIT, k, 0));
	if (!own)
		return;
	*own = (struct rview){
		.id = ctx->id, .seq = seq + 2, .st = st_pack(P_INIT, k, 0),
		.start = s0, .deadline = req->deadline_slot, .ticket = ticket,
		.block = req->block, .base_prio = req->priority, .n = n,
		.dir = (uint32_t)req->dir, .shape = (uint32_t)req->shape,
		.ndisks = req->ndisks, .deps = req->dependants,
	};
	for (i = 0; i < CW_SLOTS_MAX_DISKS; i++) {
		own->dummy[i] = dummy[i];
		own->disks[i] = i < req->ndisks ? req->disks[i] : NULL;
	}
}

int cw_slots_reserve(struct cw_slots_ctx *ctx, const struct cw_slots_req *req,
		     struct cw_slots_booking *ret_booking)
{
	struct cw_slots_domain *dom;
	struct desc *d;
	uint32_t dummy[CW_SLOTS_MAX_DISKS] = { 0 }, n;
	uint64_t st, k, ticket;
	int64_t s0 = INT64_MAX, first;
	unsigned i;
	int r;

	if (!ctx || !ret_booking)
		return -EINVAL;
	dom = ctx->dom;
	r = check_req(dom, req);
	if (r < 0)
		return r;
	n = disk_slots(req, dummy);
	if (n > dom->max_slots || req->deadline_slot - req->start_slot > dom->max_window)
		return -ERANGE;
	for (i = 0; i < req->ndisks; i++) {
		struct cw_slots *rec = req->disks[i];
		int64_t now = cw_pr_load_acquire(&rec->now);

		if (req->deadline_slot + n > now + rec->ring)
			return -ERANGE;
		s0 = CW_MIN(s0, now);
	}
	s0 = CW_MAX(s0, req->start_slot);
	if (s0 > req->deadline_slot)
		return CW_SLOTS_FAIL;	/* the whole window is behind now */

	d = &dom->desc[ctx->id];
	st = cw_pr_load_relaxed(&d->state);
	k = (st_round(st) + 1) & ROUND_MASK;
	/* Wait-free helping needs the global age of a request; elsewhere the
	 * ticket only breaks priority ties and names the request to its
	 * helpers, and a per-thread count keeps one more shared line off
	 * every reservation. */
	if (dom->mode == CW_SLOTS_WAITFREE)
		ticket = cw_pr_faa_seq(&dom->ticket, 1);
	else
		ticket = (++ctx->ops << C_OWNER_MASK_BITS) | ctx->id;

	if (dom->mode == CW_SLOTS_MUTEX) {
		pthread_mutex_lock(&dom->lock);
		r = reserve_locked(ctx, req, s0, n, dummy, k, &first);
		pthread_mutex_unlock(&dom->lock);
		cw_pr_store_relaxed(&d->state, st_pack(r == 0 ? P_FINISH : P_FAIL, k, 0));
	} else {
		if (dom->mode == CW_SLOTS_WAITFREE)
			help_one(ctx, ticket);
		struct rview own;

		announce(ctx, req, s0, n, dummy, ticket, k, &own);
		run_from(ctx, ctx->id, ticket, 0, &own);
		st = cw_pr_load_acquire(&d->state);
		k = st_round(st);
		r = st_phase(st) == P_FINISH ? 0 : CW_SLOTS_FAIL;
		first = s0 + (int64_t)st_off(st);
	}
	*ret_booking = (struct cw_slots_booking){
		.first_slot = r == 0 ? first : -1,
		.n_slots = n,
		.owner_ = ctx->id,
		.round_ = k,
		.req_ = *req,
	};
	return r;
}

/* Calls fn on every slot word of booking b on every disk it holds. */
static int for_each_held(const struct cw_slots_booking *b,
			 int (*fn)(struct cw_slots *rec, int64_t p, uint64_t v, uint64_t *c,
				   const struct cw_slots_booking *b, void *arg),
			 void *arg)
{
	int64_t p;
	unsigned i;
	int sum = 0;

	for (i = 0; i < b->req_.ndisks; i++) {
		struct cw_slots *rec = b->req_.disks[i];

		for (p = b->first_slot; p < b->first_slot + b->n_slots; p++) {
			uint64_t *c = cell_at(rec, p);
			uint64_t v = cw_pr_load_acquire(c);

			if (cell_state(v) == C_RESERVED &&
			    cell_id(v) == cell_id(cell_pack(0, lap_of(rec, p), b->owner_, b->round_)))
				sum += fn(rec, p, v, c, b, arg);
		}
	}
	return sum;
}

static int mode_lock(struct cw_slots_domain *dom)
{
	if (dom->mode == CW_SLOTS_MUTEX)
		pthread_mutex_lock(&dom->lock);
	return 0;
}

static void mode_unlock(struct cw_slots_domain *dom)
{
	if (dom->mode == CW_SLOTS_MUTEX)
		pthread_mutex_unlock(&dom->lock);
}

/* Is slot p of rec held RESERVED by booking b? */
static bool holds(struct cw_slots *rec, int64_t p, const struct cw_slots_booking *b, uint64_t *ret_v)
{
	uint64_t v = cw_pr_load_acquire(cell_at(rec, p));

	*ret_v = v;
	return cell_state(v) == C_RESERVED &&
	       cell_id(v) == cell_id(cell_pack(0, lap_of(rec, p), b->owner_, b->round_));
}

/* Publishes one disk's part [p, p+len) of b: metadata, then the COMMIT
 * flag on its first slot. */
static bool commit_part(struct cw_slots *rec, int64_t p, uint32_t len,
			const struct cw_slots_booking *b, uint64_t cookie)
{
	struct meta *m = &rec->meta[(uint64_t)p & rec->mask];
	uint64_t v;

	if (!holds(rec, p, b, &v))
		return false;
	cw_pr_store_relaxed(&m->cookie, cookie);
	cw_pr_store_relaxed(&m->block, b->req_.block);
	cw_pr_store_relaxed(&m->first, (uint64_t)b->first_slot);
	cw_pr_store_relaxed(&m->packed, (uint64_t)len | ((uint64_t)b->n_slots << 24) |
					 ((uint64_t)b->req_.dir << 48));
	return cw_pr_cas_seq_u64(cell_at(rec, p), &v, v | C_COMMIT);
}

int cw_slots_commit(struct cw_slots_ctx *ctx, const struct cw_slots_booking *b, uint64_t cookie)
{
	uint8_t *holder;
	int64_t p;
	unsigned i;
	int r = 0;

	if (!ctx || !b || b->first_slot < 0 || b->owner_ != ctx->id ||
	    b->n_slots == 0 || b->n_slots > ctx->dom->max_slots || check_req(ctx->dom, &b->req_) < 0)
		return -EINVAL;
	holder = ctx->pick;
	mode_lock(ctx->dom);
	/* Which disk holds each slot; the parts follow from that.  A slot
	 * already passed by a dispatcher makes the whole commit too late. */
	for (p = b->first_slot; p < b->first_slot + b->n_slots && r == 0; p++) {
		unsigned n = 0;
		uint64_t v;

		for (i = 0; i < b->req_.ndisks; i++)
			if (holds(b->req_.disks[i], p, b, &v)) {
				holder[p - b->first_slot] = (uint8_t)i;
				n++;
			}
		if (n == 0 || (b->req_.shape == CW_SLOTS_THICK && n != b->req_.ndisks))
			r = -ETIMEDOUT;
	}
	for (p = b->first_slot; p < b->first_slot + b->n_slots && r == 0; p++) {
		int64_t q = p + 1, off = p - b->first_slot;

		if (b->req_.shape != CW_SLOTS_SNAKE) {
			if (p > b->first_slot)
				break;
			for (i = 0; i < b->req_.ndisks && r == 0; i++)
				if (!commit_part(b->req_.disks[i], p, b->n_slots, b, cookie))
					r = -ETIMEDOUT;
			break;
		}
		if (off > 0 && holder[off - 1] == holder[off])
			continue;
		while (q < b->first_slot + b->n_slots && holder[q - b->first_slot] == holder[off])
			q++;
		if (!commit_part(b->req_.disks[holder[off]], p, (uint32_t)(q - p), b, cookie))
			r = -ETIMEDOUT;
	}
	mode_unlock(ctx->dom);
	return r;
}

static int unmark_one(struct cw_slots *rec, int64_t p, uint64_t v, uint64_t *c,
		      const struct cw_slots_booking *b, void *arg)
{
	occ_unmark(rec, p, 1);
	return 1;
}

static int release_one(struct cw_slots *rec, int64_t p, uint64_t v, uint64_t *c,
		       const struct cw_slots_booking *b, void *arg)
{
	if (!cw_pr_cas_seq_u64(c, &v, cell_pack(C_VACANT, lap_of(rec, p), 0, 0)))
		return 0;
	load_add(rec, *(const uint32_t *)arg, -1);
	return 1;
}

int cw_slots_release(struct cw_slots_ctx *ctx, const struct cw_slots_booking *b)
{
	struct desc *d;
	int n;

	if (!ctx || !b || b->first_slot < 0 || b->n_slots == 0 ||
	    b->n_slots > ctx->dom->max_slots || check_req(ctx->dom, &b->req_) < 0)
		return -EINVAL;
	if (b->owner_ != ctx->id)
		return -EPERM;
	d = &ctx->dom->desc[ctx->id];
	mode_lock(ctx->dom);
	/* What it holds now is what it gives back: from the relword store
	 * on, readers see these words as free and may take them directly,
	 * so the clearing pass below can find fewer. */
	/* Hint bits go before anyone may take the slots (and set them). */
	n = for_each_held(b, unmark_one, NULL);
	cw_pr_store_seq(&d->relword, relword_of(b->round_));
	for_each_held(b, release_one, &ctx->id);
	cw_pr_store_seq(&d->relword, 0);
	mode_unlock(ctx->dom);
	return n;
}

/* Passes slot p: CLOSED for its lap, after cancelling a live owner or
 * finishing a linearized one (I3).  Returns the word it replaced, or the
 * CLOSED word when another thread had passed p already. */
static uint64_t close_slot(struct cw_slots *rec, int64_t p)
{
	unsigned lp = lap_of(rec, p);
	uint64_t *c = cell_at(rec, p), closed = cell_pack(C_CLOSED, lp, 0, 0);

	for (;;) {
		uint64_t v = cw_pr_load_acquire(c);
		unsigned lv = cell_lap(v);
		struct rview ov;

		/* Already passed, or a slow advancer behind a faster one:
		 * never move a word back to an older lap.  Nothing was replaced,
		 * so say CLOSED: v may be a word read before a long stall,
		 * which some other thread closed meanwhile. */
		if ((lv == lp && cell_state(v) == C_CLOSED) || lap_ahead(lv, lp) || long_gone(rec, p))
			return closed;
		if (lv == lp && cell_state(v) == C_TRANSIENT) {
			enum cls cl = classify(rec, p, v, UINT32_MAX, 0, &ov);

			if (cl == K_LIVE) {
				cancel_live(rec->dom, &ov);
				continue;
			}
			if (cl == K_HELD) {
				perm_step(&ov, NO_SHARE);
				continue;
			}
		}
		if (cw_pr_cas_seq_u64(c, &v, closed))
			return v;	/* the caller counts the load it drops */
	}
}

/* Does passing slot p (lap lp) just replace v by CLOSED: no live request
 * to cancel or finish first, and not already passed?  (close_slot()'s
 * plain case.) */
static inline bool plain_close(unsigned lp, uint64_t v)
{
	unsigned lv = cell_lap(v);

	if (lv == lp)
		return cell_state(v) == C_VACANT || cell_state(v) == C_RESERVED;
	return !lap_ahead(lv, lp);
}

/* close_slot() for p and p+1 (p even) with one CAS when both are plain:
 * returns the number of RESERVED words of lap lp it dropped, or -1 to
 * leave them to close_slot(). */
static int close_pair(struct cw_slots *rec, int64_t p)
{
	unsigned lp = lap_of(rec, p);
	uint64_t *c = cell_at(rec, p), v0, v1, closed = cell_pack(C_CLOSED, lp, 0, 0);

	if (!CW_PR_HAVE_CAS_PAIR)
		return -1;
	v0 = cw_pr_load_acquire(c);
	v1 = cw_pr_load_acquire(c + 1);
	if (!plain_close(lp, v0) || !plain_close(lp, v1) || long_gone(rec, p) ||
	    !cw_pr_cas_pair_seq(c, v0, v1, closed, closed))
		return -1;
	return (cell_state(v0) == C_RESERVED && cell_lap(v0) == lp) +
	       (cell_state(v1) == C_RESERVED && cell_lap(v1) == lp);
}

static bool read_head(struct cw_slots *rec, int64_t p, uint64_t v, struct cw_slots_entry *e)
{
	struct cw_slots_domain *dom = rec->dom;
	struct meta *m = &rec->meta[(uint64_t)p & rec->mask];
	uint64_t packed;

	if (cell_state(v) != C_RESERVED || !(v & C_COMMIT) || cell_lap(v) != lap_of(rec, p) ||
	    cw_pr_load_acquire(&dom->desc[cell_owner(v)].relword) == relword_of(cell_round(v)))
		return false;
	packed = cw_pr_load_relaxed(&m->packed);
	*e = (struct cw_slots_entry){
		.slot = p,
		.n_slots = (uint32_t)(packed & 0xffffff),
		.booking_first = (int64_t)cw_pr_load_relaxed(&m->first),
		.booking_slots = (uint32_t)((packed >> 24) & 0xffffff),
		.cookie = cw_pr_load_relaxed(&m->cookie),
		.dir = (enum cw_slots_dir)(packed >> 48),
		.block = cw_pr_load_relaxed(&m->block),
	};
	return true;
}

static void publish_now(struct cw_slots *rec, int64_t now)
{
	int64_t cur = cw_pr_load_acquire(&rec->now);

	while (cur < now && !cw_pr_cas_seq_i64(&rec->now, &cur, now))
		;
}

int cw_slots_next(struct cw_slots *rec, int64_t until_slot, struct cw_slots_entry *ret_entry)
{
	int64_t now;
	int found = 0;

	if (!rec || !ret_entry)
		return -EINVAL;
	mode_lock(rec->dom);
	for (now = cw_pr_load_acquire(&rec->now); now < until_slot && !found; now++) {
		/* Decide on the word the close replaced: a commit racing with
		 * the close is then either seen or refused (-ETIMEDOUT). */
		uint64_t old = close_slot(rec, now);

		if (cell_state(old) == C_RESERVED && cell_lap(old) == lap_of(rec, now))
			cw_pr_faa_relaxed(&rec->load, -1);
		found = read_head(rec, now, old, ret_entry);
		occ_unmark(rec, now, 1);
		publish_now(rec, now + 1);
	}
	mode_unlock(rec->dom);
	return found;
}

int cw_slots_peek(struct cw_slots *rec, int64_t from_slot, int64_t until_slot,
		  struct cw_slots_entry *ret_entry)
{
	int64_t p;
	int found = 0;

	if (!rec || !ret_entry)
		return -EINVAL;
	mode_lock(rec->dom);
	p = CW_MAX(from_slot, cw_pr_load_acquire(&rec->now));
	until_slot = CW_MIN(until_slot, cw_pr_load_acquire(&rec->now) + rec->ring);
	for (; p < until_slot && !found; p++) {
		uint64_t v = cw_pr_load_acquire(cell_at(rec, p));

		found = read_head(rec, p, v, ret_entry) && cw_pr_load_acquire(cell_at(rec, p)) == v;
	}
	mode_unlock(rec->dom);
	return found;
}

int64_t cw_slots_advance(struct cw_slots *rec, int64_t now_slot)
{
	int64_t p, dropped = 0, from;

	mode_lock(rec->dom);
	from = cw_pr_load_acquire(&rec->now);
	for (p = from; p < now_slot; p++) {
		int64_t cur = cw_pr_load_acquire(&rec->now);
		uint64_t old;
		int pair;

		if (p < cur) {
			/* Another advancer went ahead (and cleared its bits). */
			occ_unmark(rec, from, p - from);
			from = p = cur;
		}
		if (p >= now_slot)
			break;
		if (!(p & 1) && p + 1 < now_slot && (pair = close_pair(rec, p)) >= 0) {
			dropped += pair;
			p++;
		} else {
			old = close_slot(rec, p);
			dropped += cell_state(old) == C_RESERVED && cell_lap(old) == lap_of(rec, p);
		}
		/* Every slot up to p is closed (I3 holds for p + 1): say so now
		 * and then, so that concurrent advancers skip what this one has
		 * done instead of racing it slot by slot for the same lines.
		 * The hint bits of the passed slots go first. */
		if (((p + 1) & (ADVANCE_PUBLISH - 1)) == 0) {
			occ_unmark(rec, from, p + 1 - from);
			from = p + 1;
			publish_now(rec, p + 1);
		}
	}
	if (from < now_slot)
		occ_unmark(rec, from, CW_MIN(p, now_slot) - from);
	if (dropped)
		cw_pr_faa_relaxed(&rec->load, -dropped);
	publish_now(rec, now_slot);
	p = cw_pr_load_acquire(&rec->now);
	/* I3's now only moves on: every slot before now_slot is passed. */
	(void)ALWAYS(p >= now_slot);
	mode_unlock(rec->dom);
	return p;
}

int64_t cw_slots_now(const struct cw_slots *rec)
{
	return cw_pr_load_acquire(&rec->now);
}

int64_t cw_slots_slot_ns(const struct cw_slots *rec)
{
	return rec->slot_ns;
}

uint32_t cw_slots_ring_slots(const struct cw_slots *rec)
{
	return rec->ring;
}

int64_t cw_slots_slot_of(const struct cw_slots *rec, int64_t origin_ns, int64_t t_ns)
{
	return t_ns <= origin_ns ? 0 : (t_ns - origin_ns) / rec->slot_ns;
}

int cw_slots_owner(struct cw_slots *rec, int64_t slot, uint32_t *ret_owner, uint64_t *ret_round)
{
	int64_t now;
	uint64_t v;
	struct rview ov;
	enum cls c;

	if (!rec)
		return -EINVAL;
	now = cw_pr_load_acquire(&rec->now);
	if (slot < now || slot >= now + rec->ring)
		return -ERANGE;
	v = cw_pr_load_acquire(cell_at(rec, slot));
	c = classify(rec, slot, v, UINT32_MAX, 0, &ov);
	if (c != K_HELD || cell_lap(v) != lap_of(rec, slot))
		return 0;
	if (ret_owner)
		*ret_owner = cell_owner(v);
	if (ret_round)
		*ret_round = cell_round(v);
	return 1;
}

int cw_slots_valid(struct cw_slots *rec)
{
	int64_t now, p;
	int64_t load = 0;

	if (!rec)
		return -EINVAL;
	now = cw_pr_load_acquire(&rec->now);
	for (p = now; p < now + rec->ring; p++) {
		uint64_t v = cw_pr_load_acquire(cell_at(rec, p));
		unsigned lp = lap_of(rec, p), lv = cell_lap(v), st = cell_state(v);

		if (lv != lp) {
			/* Only a passed slot of the previous lap may stay. */
			if (((lv + 1) & C_LAP_MASK) != lp || st != C_CLOSED)
				return -EUCLEAN;
			continue;
		}
		if (st == C_CLOSED)
			return -EUCLEAN;	/* closed ahead of now */
		if (st == C_VACANT && v != cell_pack(C_VACANT, lp, 0, 0))
			return -EUCLEAN;
		if (st == C_RESERVED &&
		    !(cw_pr_load_relaxed(occ_word(rec, (uint64_t)p & rec->mask)) &
		      (UINT64_C(1) << (((uint64_t)p & rec->mask) & (rec->occ_group - 1)))))
			return -EUCLEAN;	/* booked, but the hint says vacant */
		if (st == C_RESERVED || st == C_TRANSIENT) {
			if (cell_owner(v) >= rec->dom->max_threads)
				return -EUCLEAN;
			if (st == C_RESERVED)
				load++;
		}
		if (v & C_COMMIT) {
			struct meta *m = &rec->meta[(uint64_t)p & rec->mask];
			uint64_t packed = cw_pr_load_relaxed(&m->packed);
			uint32_t len = (uint32_t)(packed & 0xffffff), i;

			if (st != C_RESERVED || len == 0 || (int64_t)cw_pr_load_relaxed(&m->first) > p)
				return -EUCLEAN;
			for (i = 1; i < len; i++) {
				uint64_t w = cw_pr_load_acquire(cell_at(rec, p + i));

				if (cell_id(w) != cell_id(cell_pack(0, lap_of(rec, p + i),
								    cell_owner(v), cell_round(v))))
					return -EUCLEAN;
			}
		}
	}
	if (load != load_of(rec))
		return -EUCLEAN;
	return 0;
}

uint32_t cw_slots_ctx_id(const struct cw_slots_ctx *ctx)
{
	return ctx->id;
}

int cw_slots_mode_parse(const char *name, enum cw_slots_mode *ret_mode)
{
	static const struct {
		const char *name;
		enum cw_slots_mode mode;
	} names[] = {
		{ "lf", CW_SLOTS_LOCKFREE }, { "lockfree", CW_SLOTS_LOCKFREE },
		{ "wf", CW_SLOTS_WAITFREE }, { "waitfree", CW_SLOTS_WAITFREE },
		{ "mutex", CW_SLOTS_MUTEX },
	};
	size_t i;

	if (!name || !ret_mode)
		return -EINVAL;
	for (i = 0; i < CW_ARRAY_SIZE(names); i++)
		if (strcmp(name, names[i].name) == 0) {
			*ret_mode = names[i].mode;
			return 0;
		}
	return -EINVAL;
}

const char *cw_slots_mode_name(enum cw_slots_mode mode)
{
	switch (mode) {
	case CW_SLOTS_LOCKFREE:
		return "lf";
	case CW_SLOTS_WAITFREE:
		return "wf";
	case CW_SLOTS_MUTEX:
		return "mutex";
	}
	return NULL;
}

int cw_slots_domain_new(const struct cw_slots_domain_opts *opts, struct cw_slots_domain **ret_domain)
{
	struct cw_slots_domain_opts o = { .size = sizeof(o) };
	struct cw_slots_domain *d;
	void *mem;

	if (!ret_domain)
		return -EINVAL;
	if (opts) {
		if (opts->size < sizeof(size_t) || opts->size > sizeof(o))
			return -EINVAL;
		memcpy(&o, opts, opts->size);
	}
	if (o.mode > CW_SLOTS_MUTEX || o.max_threads > C_OWNER_MASK + 1 ||
	    o.max_window > S_OFF_MASK / 2 || o.max_slots > S_OFF_MASK / 2)
		return -EINVAL;
	if (!o.max_threads)
		o.max_threads = 128;
	if (!o.max_window)
		o.max_window = 4096;
	if (!o.max_slots)
		o.max_slots = 512;
	if (!o.weights.deadline_range)
		o.weights.deadline_range = 16;
	if (!o.weights.priority_threshold)
		o.weights.priority_threshold = 4;
	if (!o.weights.size_range)
		o.weights.size_range = 2;
	if (!o.weights.deps_range)
		o.weights.deps_range = 2;
	if (!o.weights.rollback_limit)
		o.weights.rollback_limit = 8;
	if (posix_memalign(&mem, CW_CACHELINE, sizeof(*d)))
		return -ENOMEM;
	d = mem;
	memset(d, 0, sizeof(*d));
	d->mode = o.mode;
	d->w = o.weights;
	d->max_threads = o.max_threads;
	d->max_window = o.max_window;
	d->max_slots = o.max_slots;
	if (posix_memalign(&mem, CW_CACHELINE, sizeof(struct desc) * o.max_threads)) {
		free(d);
		return -ENOMEM;
	}
	d->desc = mem;
	memset(d->desc, 0, sizeof(struct desc) * o.max_threads);
	pthread_mutex_init(&d->lock, NULL);
	*ret_domain = d;
	return 0;
}

void cw_slots_domain_free(struct cw_slots_domain *d)
{
	if (!d)
		return;
	pthread_mutex_destroy(&d->lock);
	free(d->desc);
	free(d);
}

int cw_slots_new(struct cw_slots_domain *d, const struct cw_slots_opts *opts,
		 struct cw_slots **ret_rec)
{
	struct cw_slots_opts o = { .size = sizeof(o) };
	_cleanup_free_ struct cw_slots *rec = NULL;
	void *mem;
	uint32_t i;

	if (!d || !ret_rec)
		return -EINVAL;
	if (opts) {
		if (opts->size < sizeof(size_t) || opts->size > sizeof(o))
			return -EINVAL;
		memcpy(&o, opts, opts->size);
	}
	if (!o.ring_slots)
		o.ring_slots = CW_MAX(65536u, 2 * (d->max_window + d->max_slots));
	if (!o.slot_ns)
		o.slot_ns = o.tier == CW_TIER_SSD ? CW_SLOTS_SSD_SLOT_NS : CW_SLOTS_HDD_SLOT_NS;
	if (o.slot_ns < 0 || !cw_is_pow2_u64(o.ring_slots) || o.ring_slots > (1u << 30) ||
	    o.ring_slots < 2 * (d->max_window + d->max_slots) || o.now_slot < 0 ||
	    (o.tier != CW_TIER_HDD && o.tier != CW_TIER_SSD && o.tier != CW_TIER_RBD))
		return -EINVAL;
	if (posix_memalign(&mem, CW_CACHELINE, sizeof(*rec)))
		return -ENOMEM;
	rec = mem;
	memset(rec, 0, sizeof(*rec));
	rec->dom = d;
	rec->ring = o.ring_slots;
	rec->mask = o.ring_slots - 1;
	rec->lap_shift = (uint32_t)__builtin_ctz(o.ring_slots);
	rec->slot_ns = o.slot_ns;
	rec->dummy = o.dummy;
	rec->dummy_arg = o.dummy_arg;
	rec->now = o.now_slot;
	rec->last_block = UINT64_MAX;
	if (posix_memalign(&mem, CW_CACHELINE, sizeof(uint64_t) * o.ring_slots))
		return -ENOMEM;
	rec->cells = mem;
	rec->meta = calloc(o.ring_slots, sizeof(struct meta));
	if (!rec->meta || posix_memalign(&mem, CW_CACHELINE, sizeof(struct lshard) * d->max_threads)) {
		free(rec->meta);
		free(rec->cells);
		return -ENOMEM;
	}
	rec->lshard = mem;
	memset(rec->lshard, 0, sizeof(struct lshard) * d->max_threads);
	rec->occ_group = CW_MIN(64u, o.ring_slots);	/* powers of two */
	rec->occ_shift = (uint32_t)__builtin_ctz(rec->occ_group);
	rec->occ = calloc(o.ring_slots / rec->occ_group, sizeof(uint64_t));
	if (!rec->occ) {
		free(rec->lshard);
		free(rec->meta);
		free(rec->cells);
		return -ENOMEM;
	}
	/* Slot now+i starts as "passed in the previous lap": vacant. */
	for (i = 0; i < o.ring_slots; i++) {
		int64_t p = o.now_slot + i;

		rec->cells[(uint64_t)p & rec->mask] =
			cell_pack(C_CLOSED, (lap_of(rec, p) + C_LAP_MASK) & C_LAP_MASK, 0, 0);
	}
	*ret_rec = CW_TAKE_PTR(rec);
	return 0;
}

void cw_slots_free(struct cw_slots *rec)
{
	if (!rec)
		return;
	free(rec->occ);
	free(rec->lshard);
	free(rec->meta);
	free(rec->cells);
	free(rec);
}

int cw_slots_ctx_new(struct cw_slots_domain *d, struct cw_slots_ctx **ret_ctx)
{
	_cleanup_free_ struct cw_slots_ctx *ctx = NULL;
	uint32_t id, hi;

	if (!d || !ret_ctx)
		return -EINVAL;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ctx->dom = d;
	ctx->obs_cap = (size_t)(d->max_window + d->max_slots) * CW_SLOTS_MAX_DISKS;
	ctx->obs = calloc(ctx->obs_cap, sizeof(struct obs));
	ctx->pick = calloc(d->max_slots, 1);
	if (!ctx->obs || !ctx->pick) {
		free(ctx->obs);
		free(ctx->pick);
		return -ENOMEM;
	}
	for (id = 0; id < d->max_threads; id++) {
		uint32_t free_mark = 0;

		if (cw_pr_cas_seq(&d->desc[id].claimed, &free_mark, 1))
			break;
	}
	if (id == d->max_threads) {
		free(ctx->obs);
		free(ctx->pick);
		return -EUSERS;
	}
	ctx->id = id;
	hi = cw_pr_load_acquire(&d->hiwater);
	while (hi < id + 1 && !cw_pr_cas_seq(&d->hiwater, &hi, id + 1))
		;
	*ret_ctx = CW_TAKE_PTR(ctx);
	return 0;
}

void cw_slots_ctx_free(struct cw_slots_ctx *ctx)
{
	if (!ctx)
		return;
	/* The descriptor keeps its round so old slot words never match a
	 * later owner of the same number. */
	cw_pr_store_release(&ctx->dom->desc[ctx->id].claimed, 0);
	free(ctx->obs);
	free(ctx->pick);
	free(ctx);
}
