/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A reservation's QoS and layout into one task per participating disk:
 * Bosch & Mullender, section 3.1.  T = b/B on a single disk; a disk that
 * serves only every k-th user request gets the period k b/B; C is the
 * disk model's worst case for the bytes a user request needs from that
 * disk.  "If any of the participating disks fails to admit its part of the
 * new task, Clockwise [...] rejects the entire real-time task."
 *
 * Invariant: each part's task is never lighter than what the stream can
 * ask of its disk (period rounded down, strides at their smallest, every
 * piece of a request charged its own seek and rotation; a block a move
 * copies charged on both its disks, so that every layout the move passes
 * through asks no more of any disk; every block charged on each disk of
 * a cache that may hold a copy of it), and a part is
 * admitted only if every set of tasks that can be active together during
 * its window passes cw_admit_test.
 *
 * Mirrored partitions (RADIR, Aggarwal et al., section III-B): a read is
 * a snake request, each user request charged on the one copy
 * cw_admit_snake_pick() gives, the very function the data path's split
 * routes it by (so a disk is asked exactly what it was charged, never
 * more); a recording stream's request is a thick one, charged on every
 * copy.  cw_admit_plan_survive adds each case of one failed disk (its
 * copies serve nothing, the rule runs over the copies left) with the
 * rebuild's reserve on the survivors, and books on each disk a task no
 * lighter than its part in any case: the shortest period and deadline,
 * the longest service, the widest window, tested as such.
 *
 * Why the booking is the failure case's even while no disk has failed
 * (and not the normal case's, with the failure case kept for admission
 * only): the normal case's longer period 2T (two copies) gives its jobs
 * later deadlines and the disk a larger slack dL_N, which the dispatcher
 * lets best effort spend before a released job.  A job J of the stream
 * released at 0 may then wait, legally, until 2T - C.  If the other disk
 * fails at T, the request it would have served arrives here too, due at
 * 2T, so [T, 2T) must hold 2C of the stream, the other tasks' demand
 * dbf_o(T) and a best-effort piece b in progress, while the failure case
 * admission tested (Jeffay's condition (2) at L = T: T >= C + dbf_o(T) +
 * b, the rebuild's reserve among the others) guarantees one C only: a
 * miss whenever C > T - C - dbf_o(T) - b, e.g. a stream alone with C =
 * 0.6 T.  It is sound only if the slack spent never exceeds the failure
 * case's, dL <= dL_F, which is what booking the failure case does; the
 * time that booking holds and the normal case leaves unused (the half
 * of its jobs that go to the other copy) is already best effort's as the
 * disk's idle time between released jobs.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admit/admit-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

struct acc {
	bool used;
	uint64_t first, last, count;	/* user request indices */
	uint64_t stride;		/* smallest, UINT64_MAX while one request */
	int64_t c;			/* largest per-request service time */
	uint64_t cur;			/* request being summed */
	int64_t cur_c;
};

static void acc_close(struct acc *a)
{
	if (a->used && a->cur_c > a->c)
		a->c = a->cur_c;
}

/* Adds one piece of user request r on a disk. */
static void acc_piece(struct acc *a, uint64_t r, int64_t c)
{
	if (a->used && a->cur == r) {
		a->cur_c += c;	/* another piece of the same request: its own seek */
		return;
	}
	if (a->used) {
		acc_close(a);
		a->stride = CW_MIN(a->stride, r - a->cur);
	} else {
		a->used = true;
		a->first = r;
		a->stride = UINT64_MAX;
	}
	a->count++;
	a->last = r;
	a->cur = r;
	a->cur_c = c;
}

/* Whether partition block k may also be on another disk (a move copies it). */
static bool moving(const struct cw_admit_layout *l, uint64_t k)
{
	return l->alt_disk && l->alt_disk[k] != l->disk[k];
}

/* Charges requests r .. r + run - 1 of b bytes (the last perhaps
 * shorter), wholly inside partition block k, or (piece > 0, run 1) the
 * piece of piece bytes request r has there, to disk d: the disk holding
 * k (where disk_off says), or (elsewhere) one where it may be anywhere:
 * the disk a move copies it to, a cache's. */
static int charge_run(const struct cw_admit_layout *l, const struct cw_admit_disk *disks,
		      struct acc *acc, uint64_t k, uint32_t d, bool elsewhere, uint64_t b,
		      uint64_t piece, uint64_t r, uint64_t run)
{
	uint64_t lo = 0, hi = 0;
	int64_t c;
	int e;

	if (l->disk_off && !elsewhere) {
		lo = l->disk_off[k];
		hi = lo + l->pblock_bytes;
	}
	for (uint64_t j = 0; j < run; j++) {
		uint64_t bytes = piece ? piece : CW_MIN((r + j + 1) * b, l->range_bytes) - (r + j) * b;

		e = cw_model_service_ns(disks[d].model, lo, hi, bytes, &c);
		if (e < 0)
			return e;
		acc_piece(&acc[d], r + j, c);
		if (j == 1 && run > 3) {
			/* requests 1 .. run-2 are full blocks of b with the
			 * cost of request 1: skip to run-2 */
			acc[d].count += run - 3;
			acc[d].cur = acc[d].last = r + run - 2;
			j = run - 2;
		}
	}
	return 0;
}

/* Charges the run everywhere block k may be: its disk, where a move
 * copies it, and each cache disk. */
static int charge_copy0(const struct cw_admit_layout *l, const struct cw_admit_disk *disks,
			struct acc *acc, uint64_t k, uint64_t b, uint64_t piece, uint64_t r,
			uint64_t run)
{
	int e = charge_run(l, disks, acc, k, l->disk[k], false, b, piece, r, run);

	if (e == 0 && moving(l, k))
		e = charge_run(l, disks, acc, k, l->alt_disk[k], true, b, piece, r, run);
	for (size_t i = 0; e == 0 && i < l->n_copy; i++)
		e = charge_run(l, disks, acc, k, l->copy_disk[i], true, b, piece, r, run);
	return e;
}

/* The disk (an index) of copy c of block k. */
static uint32_t copy_disk(const struct cw_admit_layout *l, uint64_t k, uint32_t c)
{
	return c == 0 ? l->disk[k] : l->mirror_disk[(c - 1) * l->n_pblocks + k];
}

/* Charges requests r .. r + run - 1 (as charge_run) on copy c of block k:
 * copy 0 as a single copy is, another at its own offset. */
static int charge_copy(const struct cw_admit_layout *l, const struct cw_admit_disk *disks,
		       struct acc *acc, uint64_t k, uint32_t c, uint64_t b, uint64_t piece,
		       uint64_t r, uint64_t run)
{
	struct cw_admit_layout lc;
	uint64_t off;

	if (c == 0)
		return charge_copy0(l, disks, acc, k, b, piece, r, run);
	/* Copy c's block k where its offset says: a layout whose block k
	 * lies there (charge_run reads only disk_off[k]). */
	lc = *l;
	off = l->mirror_off ? l->mirror_off[(c - 1) * l->n_pblocks + k] : 0;
	lc.disk_off = l->mirror_off ? &off - k : NULL;
	return charge_run(&lc, disks, acc, k, copy_disk(l, k, c), false, b, piece, r, run);
}

int cw_admit_snake_pick(uint64_t request, const uint32_t *ids, unsigned n)
{
	unsigned want, best = 0;

	if (n == 0)
		return -1;
	/* The want-th lowest id: the one with exactly want ids below it. */
	want = (unsigned)(request % n);
	for (unsigned i = 0; i < n; i++) {
		unsigned below = 0;

		for (unsigned j = 0; j < n; j++)
			below += ids[j] < ids[i];
		if (below == want)
			best = i;
	}
	return (int)best;
}

/* Charges the run everywhere block k may be.  One copy: charge_copy0.
 * A mirrored block: every copy for a thick stream, else each request on
 * the copy cw_admit_snake_pick() gives among those off the failed disk. */
static int charge_block(const struct cw_admit_layout *l, const struct cw_admit_disk *disks,
			struct acc *acc, uint64_t k, uint64_t b, uint64_t piece, uint64_t r,
			uint64_t run)
{
	uint32_t ids[CW_ADMIT_COPIES_MAX], cs[CW_ADMIT_COPIES_MAX];
	unsigned n = 0;
	int e = 0;

	if (l->n_copies <= 1)
		return charge_copy0(l, disks, acc, k, b, piece, r, run);
	for (uint32_t c = 0; c < l->n_copies && c < CW_ADMIT_COPIES_MAX; c++) {
		if (l->thick) {
			/* a failed disk's copy is not written */
			if (copy_disk(l, k, c) != l->failed)
				e = charge_copy(l, disks, acc, k, c, b, piece, r, run);
			if (e < 0)
				return e;
		} else if (copy_disk(l, k, c) != l->failed) {
			ids[n] = copy_disk(l, k, c);
			cs[n++] = c;
		}
	}
	if (l->thick)
		return 0;
	if (n == 0)
		return -ENODEV;	/* every copy on the failed disk: cannot be */
	/* Request by request (the picks alternate); of a long run only the
	 * first 2n and the last n one by one, the middle counted at once,
	 * each copy's share of it after its last request of the first 2n
	 * (acc keeps the smallest stride, which is n there). */
	for (uint64_t j = 0; j < run && e == 0; j++) {
		if (run > 3 * n && j == 2 * n && !l->alt_disk) {
			uint64_t mid_end = run - n;

			for (unsigned i = 0; i < n; i++) {
				struct acc *a = &acc[ids[i]];
				uint64_t cnt = 0, last = 0;

				for (uint64_t q = j; q < j + n && q < mid_end; q++)
					if ((unsigned)cw_admit_snake_pick(r + q, ids, n) == i) {
						/* this one and every n-th after it */
						cnt = (mid_end - 1 - q) / n + 1;
						last = q + (cnt - 1) * n;
					}
				if (!cnt)
					continue;
				/* the picks repeat every n requests: each disk's
				 * stride in the run is n */
				a->stride = CW_MIN(a->stride, (uint64_t)n);
				a->count += cnt;
				a->cur = a->last = r + last;
			}
			j = mid_end - 1;
			continue;
		}
		e = charge_copy(l, disks, acc, k, cs[cw_admit_snake_pick(r + j, ids, n)], b, piece,
				r + j, 1);
	}
	return e;
}

static int plan_fail(struct cw_admit_plan *p, int err, const char *msg)
{
	snprintf(p->reason, sizeof(p->reason), "%s", msg);
	return err;
}

/* A refusal of a set that holds the best-effort reserve says so: without
 * it the stream might have fitted, and people ask why it did not. */
static void be_reserve_reason(struct cw_admit_result *r, const struct cw_task *be)
{
	size_t len = strlen(r->reason);

	snprintf(r->reason + len, sizeof(r->reason) - len,
		 " (with the best-effort reserve: %" PRId64 " us every %" PRId64 " ms)",
		 be->service_ns / 1000, be->period_ns / 1000000);
}

/* ... and the rebuild's reserve in a failure case. */
static void rebuild_reason(struct cw_admit_result *r, const struct cw_task *rb)
{
	size_t len = strlen(r->reason);

	snprintf(r->reason + len, sizeof(r->reason) - len,
		 " (with the rebuild's reserve: %" PRId64 " us every %" PRId64 " ms)",
		 rb->service_ns / 1000, rb->period_ns / 1000000);
}

/* The worst result for part over its window: every set of tasks active
 * together with it.  Schedulability only gets worse as tasks are added,
 * so only the instants where some task starts (and the window's start)
 * need a test. */
static int admit_part(const struct cw_admit_disk *dk, struct cw_admit_part *part)
{
	const struct cw_task *nt = &part->task;
	_cleanup_free_ struct cw_task *set = malloc((dk->n_tasks + 3) * sizeof(*set));
	_cleanup_free_ size_t *idx = malloc((dk->n_tasks + 3) * sizeof(*idx));
	_cleanup_free_ int64_t *at = malloc((dk->n_tasks + 1) * sizeof(*at));
	bool reserve = dk->be_reserve.service_ns > 0;
	bool rebuild = dk->rebuild_reserve.service_ns > 0;
	bool always = nt->from_ns == 0 && nt->to_ns == 0;
	size_t n_at = 0;
	bool have = false;

	if (!set || !idx || !at)
		return -ENOMEM;
	at[n_at++] = nt->from_ns;
	for (size_t i = 0; i < dk->n_tasks && !always; i++) {
		const struct cw_task *t = &dk->tasks[i];

		if (!(t->from_ns == 0 && t->to_ns == 0) && t->from_ns > nt->from_ns &&
		    t->from_ns < nt->to_ns)
			at[n_at++] = t->from_ns;
	}
	for (size_t k = 0; k < n_at; k++) {
		struct cw_admit_result r;
		size_t n = 0;
		int e;

		for (size_t i = 0; i < dk->n_tasks; i++) {
			const struct cw_task *t = &dk->tasks[i];
			bool t_always = t->from_ns == 0 && t->to_ns == 0;

			if (always ? admit_window_overlaps(t, 0, 0) :
			    t_always || (t->from_ns <= at[k] && at[k] < t->to_ns)) {
				idx[n] = i;
				set[n++] = *t;
			}
		}
		if (reserve) {
			idx[n] = CW_ADMIT_FAIL_RESERVE;
			set[n++] = (struct cw_task){ dk->be_reserve.period_ns,
						     dk->be_reserve.service_ns, 0, 0 };
		}
		if (rebuild) {
			idx[n] = CW_ADMIT_FAIL_REBUILD;
			set[n++] = (struct cw_task){ dk->rebuild_reserve.period_ns,
						     dk->rebuild_reserve.service_ns, 0, 0 };
		}
		idx[n] = CW_ADMIT_FAIL_SELF;
		set[n++] = *nt;
		e = cw_admit_test(set, n, &r);
		if (e < 0)
			return e;
		if (!r.schedulable && reserve)
			be_reserve_reason(&r, &dk->be_reserve);
		if (!r.schedulable && rebuild)
			rebuild_reason(&r, &dk->rebuild_reserve);
		if (!have || (!r.schedulable && part->result.schedulable) ||
		    (r.schedulable == part->result.schedulable && r.delta_l_ns < part->result.delta_l_ns)) {
			part->result = r;
			part->fail_disk_task = r.schedulable ? CW_ADMIT_FAIL_SELF :
					       admit_culprit(&r, set, n, idx);
			have = true;
		}
		if (!r.schedulable)
			break;
	}
	return 0;
}

int cw_admit_plan(const struct cw_admit_qos *q, const struct cw_admit_layout *l,
		  const struct cw_admit_disk *disks, size_t n_disks, struct cw_admit_plan *ret)
{
	_cleanup_free_ struct acc *acc = NULL;
	struct cw_admit_plan p = { 0 };
	unsigned __int128 t0;
	uint64_t nreq, b;
	int e;

	if (!ret)
		return -EINVAL;
	*ret = p;
	if (!q || !l || (n_disks && !disks))
		return plan_fail(ret, -EINVAL, "missing argument");
	if (q->bandwidth_bps == 0 || q->block_bytes == 0)
		return plan_fail(ret, -EINVAL, "bandwidth and block size must be positive");
	if (!cw_admit_due_name(q->due))
		return plan_fail(ret, -EINVAL, "unknown deadline rule");
	if (q->span_start_ns < 0 || q->span_end_ns < 0 ||
	    (q->span_end_ns && q->span_end_ns <= q->span_start_ns))
		return plan_fail(ret, -EINVAL, "time span must be 0 <= start < end (end 0: open)");
	if (l->pblock_bytes == 0 || l->first_bytes >= l->pblock_bytes || l->range_bytes == 0 ||
	    !l->disk)
		return plan_fail(ret, -EINVAL, "empty range or bad partition block size");
	for (size_t k = 0; k < l->n_pblocks; k++)
		if (l->disk[k] >= n_disks || !disks[l->disk[k]].model ||
		    (l->alt_disk && (l->alt_disk[k] >= n_disks || !disks[l->alt_disk[k]].model)))
			return plan_fail(ret, -EINVAL, "layout names a disk without a model");
	for (size_t i = 0; i < l->n_copy; i++)
		if (!l->copy_disk || l->copy_disk[i] >= n_disks || !disks[l->copy_disk[i]].model)
			return plan_fail(ret, -EINVAL, "layout names a cache disk without a model");
	if (l->n_copies > CW_ADMIT_COPIES_MAX || (l->n_copies > 1 && !l->mirror_disk))
		return plan_fail(ret, -EINVAL, "bad copies in the layout");
	for (size_t i = 0; l->n_copies > 1 && i < (l->n_copies - 1) * l->n_pblocks; i++)
		if (l->mirror_disk[i] >= n_disks || !disks[l->mirror_disk[i]].model)
			return plan_fail(ret, -EINVAL, "layout names a copy's disk without a model");
	for (size_t d = 0; d < n_disks; d++) {
		if (disks[d].n_tasks && !disks[d].tasks)
			return plan_fail(ret, -EINVAL, "disk task set missing");
		if (disks[d].be_reserve.service_ns < 0 ||
		    (disks[d].be_reserve.service_ns > 0 && disks[d].be_reserve.period_ns <= 0))
			return plan_fail(ret, -EINVAL, "bad best-effort reserve");
		if (disks[d].rebuild_reserve.service_ns < 0 ||
		    (disks[d].rebuild_reserve.service_ns > 0 &&
		     disks[d].rebuild_reserve.period_ns <= 0))
			return plan_fail(ret, -EINVAL, "bad rebuild reserve");
	}
	b = q->block_bytes;
	if ((unsigned __int128)l->first_bytes + l->range_bytes >
	    (unsigned __int128)l->n_pblocks * l->pblock_bytes)
		return plan_fail(ret, -EINVAL, "range runs past the partition blocks given");

	/* The stream's period, rounded down: releases may come that often. */
	t0 = (unsigned __int128)b * CW_NS_PER_S / q->bandwidth_bps;
	if (t0 == 0 || t0 > INT64_MAX / 4)
		return plan_fail(ret, -ERANGE, "block size / bandwidth is not a usable period");
	p.stream_period_ns = (int64_t)t0;

	acc = calloc(n_disks ? n_disks : 1, sizeof(*acc));
	if (!acc)
		return -ENOMEM;
	nreq = l->range_bytes / b + (l->range_bytes % b != 0);

	for (uint64_t r = 0; r < nreq;) {
		uint64_t s = l->first_bytes + r * b;
		uint64_t end = l->first_bytes + CW_MIN((r + 1) * b, l->range_bytes);
		uint64_t k = s / l->pblock_bytes, pend = (k + 1) * l->pblock_bytes;

		if (end <= pend) {
			/* Requests wholly inside partition block k: the same disk
			 * and cost for the whole run, handled at once. */
			uint64_t run = 1;

			while (r + run < nreq &&
			       l->first_bytes + CW_MIN((r + run + 1) * b, l->range_bytes) <= pend)
				run++;
			e = charge_block(l, disks, acc, k, b, 0, r, run);
			if (e < 0)
				return plan_fail(ret, e, "a block lies outside its disk's model");
			r += run;
			continue;
		}
		/* A request spanning several partition blocks: one piece each. */
		for (uint64_t off = s; off < end;) {
			uint64_t kk = off / l->pblock_bytes;
			uint64_t pe = CW_MIN(end, (kk + 1) * l->pblock_bytes);

			e = charge_block(l, disks, acc, kk, b, pe - off, r, 1);
			if (e < 0)
				return plan_fail(ret, e, "a block lies outside its disk's model");
			off = pe;
		}
		r++;
	}

	for (size_t d = 0; d < n_disks; d++)
		if (acc[d].used)
			p.n_parts++;
	p.parts = calloc(p.n_parts, sizeof(*p.parts));
	if (!p.parts)
		return -ENOMEM;
	p.admitted = true;
	p.failed_part = SIZE_MAX;
	p.failed = p.worst_case = CW_ADMIT_NO_FAILURE;
	snprintf(p.reason, sizeof(p.reason), "ok");
	for (size_t d = 0, i = 0; d < n_disks; d++) {
		struct acc *a = &acc[d];
		struct cw_admit_part *pt;
		unsigned __int128 per;

		if (!a->used)
			continue;
		acc_close(a);
		pt = &p.parts[i++];
		pt->disk = (uint32_t)d;
		pt->requests = a->count;
		/* One request on a disk: it comes at most once per pass over the
		 * range; the range length is then its period. */
		pt->stride = a->stride == UINT64_MAX ? CW_MAX(nreq, 1) : a->stride;
		per = t0 * pt->stride;
		if (per > INT64_MAX / 4) {
			cw_admit_plan_done(&p);
			return plan_fail(ret, -ERANGE, "a disk's period does not fit in nanoseconds");
		}
		pt->task.period_ns = (int64_t)per;
		pt->task.service_ns = a->c;
		/* due a disk period after release (the client reads that far
		 * ahead), or a stream period however seldom this disk serves
		 * one */
		pt->task.deadline_ns = admit_part_deadline(q->due, (int64_t)t0);
		if (q->span_start_ns || q->span_end_ns) {
			unsigned __int128 from = q->span_start_ns + t0 * a->first;
			unsigned __int128 to = q->span_start_ns + t0 * (a->last + 1) + per;

			if (to > INT64_MAX / 2)
				to = INT64_MAX / 2;
			if (q->span_end_ns && to > (unsigned __int128)q->span_end_ns)
				to = q->span_end_ns;
			if (from >= to)
				from = to - 1;
			pt->task.from_ns = (int64_t)from;
			pt->task.to_ns = (int64_t)to;
		}
		e = admit_part(&disks[d], pt);
		if (e < 0) {
			cw_admit_plan_done(&p);
			return e;
		}
		if (!pt->result.schedulable && p.admitted) {
			p.admitted = false;
			p.failed_part = i - 1;
			snprintf(p.reason, sizeof(p.reason), "disk %zu: %s", d, pt->result.reason);
		}
	}
	*ret = p;
	return 0;
}

int cw_admit_be_reserve(const struct cw_model *m, uint64_t piece_bytes, struct cw_task *ret)
{
	int64_t c;
	int e;

	if (!m || !ret || piece_bytes == 0)
		return -EINVAL;
	e = cw_model_service_ns(m, 0, 0, piece_bytes, &c);
	if (e < 0)
		return e;
	if (c <= 0 || c > INT64_MAX / 4 / CW_ADMIT_BE_SHARE)
		return -ERANGE;
	*ret = (struct cw_task){ CW_MAX(CW_ADMIT_BE_PERIOD_NS, CW_ADMIT_BE_SHARE * c), c, 0, 0 };
	return 0;
}

/* b's task folded into a's: the worst of both (admit.h,
 * cw_admit_plan_survive). */
static void part_worst(struct cw_admit_part *a, const struct cw_admit_part *b)
{
	struct cw_task *t = &a->task;
	const struct cw_task *u = &b->task;

	t->period_ns = CW_MIN(t->period_ns, u->period_ns);
	t->service_ns = CW_MAX(t->service_ns, u->service_ns);
	t->deadline_ns = CW_MIN(cw_task_deadline_ns(t), cw_task_deadline_ns(u));
	if (t->deadline_ns == t->period_ns)
		t->deadline_ns = 0;
	if (!(t->from_ns == 0 && t->to_ns == 0)) {
		if (u->from_ns == 0 && u->to_ns == 0) {
			t->from_ns = t->to_ns = 0;
		} else {
			t->from_ns = CW_MIN(t->from_ns, u->from_ns);
			t->to_ns = CW_MAX(t->to_ns, u->to_ns);
		}
	}
	a->requests = CW_MAX(a->requests, b->requests);
	a->stride = CW_MIN(a->stride, b->stride);
}

int cw_admit_plan_survive(const struct cw_admit_qos *q, const struct cw_admit_layout *l,
			  const struct cw_admit_disk *disks, size_t n_disks,
			  struct cw_admit_plan *ret)
{
	_cleanup_free_ bool *holds = NULL;
	_cleanup_free_ uint32_t *worst = NULL;
	struct cw_admit_plan p = { 0 };
	size_t nc;
	int e;

	_cleanup_free_ struct cw_admit_disk *normal = NULL;

	if (!ret)
		return -EINVAL;
	/* The normal case has no rebuild to make room for. */
	normal = malloc((n_disks ? n_disks : 1) * sizeof(*normal));
	if (!normal)
		return -ENOMEM;
	for (size_t i = 0; i < n_disks; i++) {
		normal[i] = disks[i];
		normal[i].rebuild_reserve = (struct cw_task){ 0 };
	}
	e = cw_admit_plan(q, l, normal, n_disks, ret);
	if (e < 0 || !ret->admitted || l->n_copies <= 1)
		return e;
	holds = calloc(n_disks ? n_disks : 1, sizeof(*holds));
	worst = calloc(n_disks ? n_disks : 1, sizeof(*worst));
	if (!holds || !worst) {
		cw_admit_plan_done(ret);
		return -ENOMEM;
	}
	nc = CW_MIN(l->n_copies, CW_ADMIT_COPIES_MAX);
	for (size_t k = 0; k < l->n_pblocks; k++)
		for (uint32_t c = 0; c < nc; c++)
			holds[copy_disk(l, k, c)] = true;
	for (size_t i = 0; i < n_disks; i++)
		worst[i] = CW_ADMIT_NO_FAILURE;
	/* Each case of one failed disk: refused as it is, or folded in. */
	for (uint32_t f = 0; f < n_disks; f++) {
		struct cw_admit_layout lf = *l;

		if (!holds[f])
			continue;
		lf.failed = f;
		e = cw_admit_plan(q, &lf, disks, n_disks, &p);
		if (e < 0 || !p.admitted) {
			cw_admit_plan_done(ret);
			p.failed = f;
			*ret = p;
			return e;
		}
		for (size_t i = 0; i < p.n_parts; i++) {
			struct cw_admit_part *a = NULL;

			for (size_t j = 0; j < ret->n_parts && !a; j++)
				if (ret->parts[j].disk == p.parts[i].disk)
					a = &ret->parts[j];
			if (!a) {	/* a disk only a failure case reads */
				struct cw_admit_part *np = realloc(ret->parts, (ret->n_parts + 1) *
								   sizeof(*np));

				if (!np) {
					cw_admit_plan_done(&p);
					cw_admit_plan_done(ret);
					return -ENOMEM;
				}
				ret->parts = np;
				a = &np[ret->n_parts++];
				*a = p.parts[i];
			}
			if (p.parts[i].task.period_ns < a->task.period_ns ||
			    worst[a->disk] == CW_ADMIT_NO_FAILURE)
				worst[a->disk] = f;
			part_worst(a, &p.parts[i]);
		}
		cw_admit_plan_done(&p);
	}
	/* The worst of the cases is what is booked: tested as such. */
	for (size_t i = 0; i < ret->n_parts; i++) {
		struct cw_admit_part *a = &ret->parts[i];

		e = admit_part(&disks[a->disk], a);
		if (e < 0) {
			cw_admit_plan_done(ret);
			return e;
		}
		if (!a->result.schedulable && ret->admitted) {
			ret->admitted = false;
			ret->failed_part = i;
			ret->failed = CW_ADMIT_ANY_FAILURE;
			ret->worst_case = worst[a->disk];
			snprintf(ret->reason, sizeof(ret->reason), "disk %" PRIu32 ": %s", a->disk,
				 a->result.reason);
		}
	}
	return 0;
}

int cw_admit_rebuild_reserve(const struct cw_model *m, uint64_t piece_bytes, uint32_t share_ppm,
			     struct cw_task *ret)
{
	unsigned __int128 per;
	int64_t c;
	int e;

	if (!m || !ret || piece_bytes == 0 || share_ppm > 1000000)
		return -EINVAL;
	*ret = (struct cw_task){ 0 };
	if (share_ppm == 0)
		return 0;
	e = cw_model_service_ns(m, 0, 0, piece_bytes, &c);
	if (e < 0)
		return e;
	/* the period that makes c a share_ppm share, rounded up */
	per = ((unsigned __int128)c * 1000000 + share_ppm - 1) / share_ppm;
	if (c <= 0 || per > INT64_MAX / 4)
		return -ERANGE;
	*ret = (struct cw_task){ (int64_t)per, c, 0, 0 };
	return 0;
}

int cw_admit_due_parse(const char *name, enum cw_admit_due *ret)
{
	if (!name || !ret)
		return -EINVAL;
	if (!strcmp(name, "disk"))
		*ret = CW_ADMIT_DUE_DISK;
	else if (!strcmp(name, "stream"))
		*ret = CW_ADMIT_DUE_STREAM;
	else
		return -EINVAL;
	return 0;
}

const char *cw_admit_due_name(enum cw_admit_due due)
{
	return due == CW_ADMIT_DUE_DISK ? "disk" : due == CW_ADMIT_DUE_STREAM ? "stream" : NULL;
}

uint64_t cw_admit_be_piece(enum cw_tier tier, uint64_t block)
{
	return tier == CW_TIER_HDD ? CW_MIN(block, CW_ADMIT_BE_PIECE_HDD) : block;
}

void cw_admit_plan_done(struct cw_admit_plan *p)
{
	if (!p)
		return;
	free(p->parts);
	p->parts = NULL;
	p->n_parts = 0;
}
