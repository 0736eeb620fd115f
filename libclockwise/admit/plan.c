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
static int charge_block(const struct cw_admit_layout *l, const struct cw_admit_disk *disks,
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

/* The worst result for part over its window: every set of tasks active
 * together with it.  Schedulability only gets worse as tasks are added,
 * so only the instants where some task starts (and the window's start)
 * need a test. */
static int admit_part(const struct cw_admit_disk *dk, struct cw_admit_part *part)
{
	const struct cw_task *nt = &part->task;
	_cleanup_free_ struct cw_task *set = malloc((dk->n_tasks + 2) * sizeof(*set));
	_cleanup_free_ size_t *idx = malloc((dk->n_tasks + 2) * sizeof(*idx));
	_cleanup_free_ int64_t *at = malloc((dk->n_tasks + 1) * sizeof(*at));
	bool reserve = dk->be_reserve.service_ns > 0;
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
		idx[n] = CW_ADMIT_FAIL_SELF;
		set[n++] = *nt;
		e = cw_admit_test(set, n, &r);
		if (e < 0)
			return e;
		if (!r.schedulable && reserve)
			be_reserve_reason(&r, &dk->be_reserve);
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
	for (size_t d = 0; d < n_disks; d++) {
		if (disks[d].n_tasks && !disks[d].tasks)
			return plan_fail(ret, -EINVAL, "disk task set missing");
		if (disks[d].be_reserve.service_ns < 0 ||
		    (disks[d].be_reserve.service_ns > 0 && disks[d].be_reserve.period_ns <= 0))
			return plan_fail(ret, -EINVAL, "bad best-effort reserve");
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
