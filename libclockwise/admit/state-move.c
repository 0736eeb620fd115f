/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A reservation booked again where its blocks go: while a move runs, on
 * both sides of it (each block where it is and where the move puts it,
 * tested against the other streams on each disk); once the move is over,
 * as the range lies now, untested, since that asks at most what the
 * move's booking did (clockwise/admit.h, alt_disk); and before a move
 * starts, whether the stream would pass with its blocks where the move
 * puts them (cw_admit_state_move_check).  The new parts array goes to the
 * pool first, then replaces the old one under the lock; the old one stays
 * readable until the reservation goes (struct resv_obj).  The SSD cache's
 * bookings (state-cache.c) are made the same way.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/mover.h>

#include "admit/state-internal.h"
#include "common/atomic.h"
#include "common/cleanup.h"
#include "common/util.h"

/* Leaves rv's own tasks out of p's disks: the stream is tested against
 * the others alone. */
static void prepared_drop_owner(struct prepared *p, const struct cw_admit_resv *rv)
{
	for (size_t i = 0; i < p->rl.n_disks; i++) {
		size_t k = 0;

		for (size_t j = 0; p->owner[i] && j < p->ad[i].n_tasks; j++)
			if (p->owner[i][j] != rv) {
				p->tasks[i][k] = p->tasks[i][j];
				p->owner[i][k++] = p->owner[i][j];
			}
		p->ad[i].n_tasks = k;
	}
}

/* A refusal of plan, rv's range laid out as p says a move would: the
 * stream itself is an admitted one, not new; "WITH, reservation N would
 * be refused on disk D: why". */
static void refusal_moved(const struct prepared *p, const struct cw_admit_plan *plan,
			  const struct cw_admit_resv *rv, const char *with,
			  struct cw_admit_refusal *ref)
{
	char prefix[CW_NAME_MAX + 64], was[sizeof(ref->reason)];

	if (!ref)
		return;
	ast_refusal_of_plan(p, plan, rv->rate_bps, ref);
	if (ref->who == CW_ADMIT_WHO_NEW) {
		ast_refusal_who(ref, ref->part.fail_disk_task, rv, &ref->part.task);
		snprintf(prefix, sizeof(prefix), "refused on disk %s: ", ref->disk);
		ast_refusal_words(ref, prefix, rv->block_bytes, rv->rate_bps,
				  "where its blocks would be");
	}
	memcpy(was, ref->reason, sizeof(was));
	if (rv->persistent)
		snprintf(prefix, sizeof(prefix), "reservation %" PRIu64, rv->id);
	else
		snprintf(prefix, sizeof(prefix), "the start-up stream of export %s",
			 rv->export_name);
	ast_refuse(ref, "%s, %s would be %s", with, prefix, was);
}

/* The plan of rv's range as p lays it out, tested against the others on
 * each disk; on refusal ref says so, after "with": "WITH, reservation N
 * would be refused on disk D: ...". */
int ast_plan_moved(const struct cw_admit_state *st, struct prepared *p,
		   const struct cw_admit_resv *rv, const char *with, struct cw_admit_plan *plan,
		   struct cw_admit_refusal *ref)
{
	int r;

	p->q.span_start_ns = rv->span_start_ns;
	p->q.span_end_ns = rv->span_end_ns;
	prepared_drop_owner(p, rv);
	r = ast_plan_tested(st, p, rv->rate_bps, plan, ref);
	if (r == -EBUSY && !plan->admitted)
		refusal_moved(p, plan, rv, with, ref);
	return r;
}

/* Replaces rv's parts (owned from now on) and its move: the pool's copy
 * first, then memory under the lock (the old array stays readable until
 * rv goes), then every disk whose task set changed gets its plan again. */
int ast_rebook(struct cw_admit_state *st, struct cw_admit_resv *rv, uint64_t move_id,
	       struct cw_admit_resv_part *parts, size_t n, struct cw_admit_refusal *ref,
	       struct cw_admit_changes *changes)
{
	struct resv_obj *o = (struct resv_obj *)rv;
	struct retired *t = calloc(1, sizeof(*t));
	bool disk[CW_DISKS_MAX + 1] = { false };
	int r = 0;

	if (!t) {
		free(parts);
		return -ENOMEM;
	}
	if (rv->persistent) {
		_cleanup_free_ struct cw_resv_disk *d = ast_parts_stored(st, parts, n);

		r = d ? cw_resv_rebook(st->pool, rv->id, move_id, d, n) : -ENOMEM;
		if (r < 0) {
			const struct cw_error *e = cw_pool_last_error(st->pool);

			ast_refuse(ref, "storing reservation %" PRIu64 ": %s", rv->id,
				   e && e->code == r && e->msg[0] ? e->msg : strerror(-r));
			free(parts);
			free(t);
			return r;
		}
	}
	for (size_t i = 0; i < rv->n_parts; i++)
		disk[rv->parts[i].disk_id] = true;
	for (size_t i = 0; i < n; i++)
		disk[parts[i].disk_id] = true;
	pthread_mutex_lock(&st->lock);
	t->parts = rv->parts;
	t->next = o->retired;
	o->retired = t;
	cw_pr_store_release(&rv->parts, parts);
	rv->n_parts = n;
	rv->move_id = move_id;
	ast_resv_set_lead(rv);
	pthread_mutex_unlock(&st->lock);
	for (uint32_t id = 1; id <= CW_DISKS_MAX && r == 0; id++)
		if (disk[id])
			r = ast_replan(st, id, changes);
	return r;
}

/* The parts of an admitted plan, as a reservation keeps them. */
struct cw_admit_resv_part *ast_plan_parts(const struct prepared *p,
					  const struct cw_admit_plan *plan)
{
	struct cw_admit_resv_part *parts = ast_parts_new(plan->n_parts);

	for (size_t i = 0; parts && i < plan->n_parts; i++)
		parts[i] = (struct cw_admit_resv_part){
			.disk_id = p->rl.disks[plan->parts[i].disk].id,
			.task = plan->parts[i].task,
			.requests = plan->parts[i].requests,
			.stride = plan->parts[i].stride,
			.copy = p->rl.copy_id[p->rl.disks[plan->parts[i].disk].id],
		};
	return parts;
}

static struct cw_admit_resv *resv_by_stream(const struct cw_admit_state *st, uint64_t stream)
{
	for (size_t i = 0; i < st->n_resvs; i++)
		if (st->resvs[i]->stream == stream)
			return st->resvs[i];
	return NULL;
}

/* Lays out rv's range where its blocks are (and, with move_id, where
 * that move puts them; with copies on disks ids[0..n), a cache's), its
 * rate and span, for plan_moved. */
int ast_prepare_resv(struct cw_admit_state *st, const struct cw_admit_resv *rv,
		     uint64_t move_id, const uint32_t *ids, size_t n, struct prepared *p,
		     struct cw_admit_refusal *ref)
{
	struct cw_admit_request req = {
		.part = rv->part, .rate_bps = rv->rate_bps, .block_bytes = rv->block_bytes,
		.range_start_bytes = rv->range_start_bytes, .range_end_bytes = rv->range_end_bytes,
		.dry_run = true, .due = rv->due,
		.survive = rv->survive ? CW_ADMIT_SURVIVE_ON : CW_ADMIT_SURVIVE_OFF,
		.record = rv->record,
	};
	struct cw_part *part;
	int r = ast_prepare(st, &req, p, ref);

	if (r == 0 && move_id)
		r = cw_part_lookup(st->pool, rv->part, &part);
	if (r == 0 && move_id)
		r = ast_range_layout_move(st, part, move_id, rv->range_start_bytes, &p->rl, ref);
	if (r == 0)
		r = ast_range_layout_copies(st, &p->rl, ids, n, ref);
	return r;
}

/* The same with the cache copies rv is booked for. */
static int prepare_resv_as(struct cw_admit_state *st, const struct cw_admit_resv *rv,
			   uint64_t move_id, struct prepared *p, struct cw_admit_refusal *ref)
{
	uint32_t ids[CW_DISKS_MAX];

	return ast_prepare_resv(st, rv, move_id, ids, ast_resv_copies(rv, ids), p, ref);
}

int cw_admit_state_move_book(struct cw_admit_state *st, uint64_t stream, uint64_t move_id,
			     struct cw_admit_refusal *ref, struct cw_admit_changes *changes)
{
	_cleanup_(ast_prepared_done) struct prepared p = { 0 };
	_cleanup_(cw_admit_plan_done) struct cw_admit_plan plan = { 0 };
	struct cw_admit_resv *rv;
	struct cw_move_info mi;
	char with[64];
	int r;

	if (ref)
		memset(ref, 0, sizeof(*ref));
	if (!st || !move_id)
		return -EINVAL;
	rv = resv_by_stream(st, stream);
	if (!rv)
		return -ENOENT;
	r = cw_move_get(st->pool, move_id, &mi);
	if (r == 0 && (mi.state == CW_MOVE_DONE || mi.state == CW_MOVE_CANCELLED))
		r = -ENOENT;
	if (r == -ENOENT)
		ast_refuse(ref, "no unfinished move %" PRIu64, move_id);
	if (r < 0)
		return r;
	if (mi.part_id != rv->part_id) {
		ast_refuse(ref, "move %" PRIu64 " moves partition %s, not %s", move_id, mi.part,
			   rv->part);
		return -EINVAL;
	}
	r = prepare_resv_as(st, rv, move_id, &p, ref);
	snprintf(with, sizeof(with), "with its blocks on both sides of move %" PRIu64, move_id);
	if (r == 0)
		r = ast_plan_moved(st, &p, rv, with, &plan, ref);
	if (r < 0)
		return r;
	return ast_rebook(st, rv, move_id, ast_plan_parts(&p, &plan), plan.n_parts, ref, changes);
}

/* Books rv again without a test, for move_id (0: none) and with copies
 * on disks ids[0..n): a booking that on every disk asks at most what
 * rv's does now. */
int ast_rebook_lighter(struct cw_admit_state *st, struct cw_admit_resv *rv, uint64_t move_id,
		       const uint32_t *ids, size_t n, struct cw_admit_changes *changes)
{
	_cleanup_(ast_prepared_done) struct prepared p = { 0 };
	_cleanup_(cw_admit_plan_done) struct cw_admit_plan plan = { 0 };
	int r = ast_prepare_resv(st, rv, move_id, ids, n, &p, NULL);

	if (r == 0) {
		p.q.span_start_ns = rv->span_start_ns;
		p.q.span_end_ns = rv->span_end_ns;
		r = ast_plan_at(&p, rv->rate_bps, &plan);
	}
	if (r < 0)
		return r;
	return ast_rebook(st, rv, move_id, ast_plan_parts(&p, &plan), plan.n_parts, NULL, changes);
}

int cw_admit_state_move_settle(struct cw_admit_state *st, uint64_t stream,
			       struct cw_admit_changes *changes)
{
	struct cw_admit_resv *rv;
	uint32_t ids[CW_DISKS_MAX];

	if (!st)
		return -EINVAL;
	rv = resv_by_stream(st, stream);
	if (!rv)
		return -ENOENT;
	if (!rv->move_id)
		return 0;
	/* Not tested: on each disk the range as it lies now asks at most
	 * what the move's booking did (admit.h, alt_disk). */
	return ast_rebook_lighter(st, rv, 0, ids, ast_resv_copies(rv, ids), changes);
}

int cw_admit_state_moves_settle(struct cw_admit_state *st, struct cw_admit_changes *changes)
{
	int n = 0;

	if (!st)
		return -EINVAL;
	for (size_t i = 0; i < st->n_resvs; i++) {
		struct cw_admit_resv *rv = st->resvs[i];
		struct cw_move_info mi;
		int r;

		if (!rv->move_id)
			continue;
		r = cw_move_get(st->pool, rv->move_id, &mi);
		if (r == 0 && mi.state != CW_MOVE_DONE && mi.state != CW_MOVE_CANCELLED)
			continue;
		if (r < 0 && r != -ENOENT)
			return r;
		r = cw_admit_state_move_settle(st, rv->stream, changes);
		if (r < 0)
			return r;
		n++;
	}
	return n;
}

int cw_admit_state_move_check(struct cw_admit_state *st, uint64_t stream, uint64_t first_block,
			      uint64_t nblocks, const uint32_t *disk_ids,
			      struct cw_admit_refusal *ref)
{
	_cleanup_(ast_prepared_done) struct prepared p = { 0 };
	_cleanup_(cw_admit_plan_done) struct cw_admit_plan plan = { 0 };
	const struct cw_admit_resv *rv;
	uint32_t idx_of[CW_DISKS_MAX + 1] = { 0 };
	bool known[CW_DISKS_MAX + 1] = { false };
	uint64_t pb, first;
	int r;

	if (ref)
		memset(ref, 0, sizeof(*ref));
	rv = resv_by_stream(st, stream);
	if (!rv)
		return -ENOENT;
	r = prepare_resv_as(st, rv, 0, &p, ref);
	if (r < 0)
		return r;
	for (size_t i = 0; i < p.rl.n_disks; i++) {
		idx_of[p.rl.disks[i].id] = (uint32_t)i;
		known[p.rl.disks[i].id] = true;
	}
	/* The range's blocks where the move puts them; where on the disk is
	 * not known yet: anywhere (the model's worst case). */
	pb = p.rl.l.pblock_bytes;
	first = rv->range_start_bytes / pb;
	for (size_t k = 0; k < p.rl.l.n_pblocks; k++) {
		uint64_t b = first + k;
		uint32_t id;

		if (b < first_block || b - first_block >= nblocks)
			continue;
		id = disk_ids[b - first_block];
		if (id > CW_DISKS_MAX || !known[id] || !st->disks[id]) {
			ast_refuse(ref, "partition block %" PRIu64 " would be on disk %" PRIu32
				   ", which has no model", b, id);
			return -ENODEV;
		}
		p.rl.disk_idx[k] = idx_of[id];
	}
	p.rl.l.disk_off = NULL;
	return ast_plan_moved(st, &p, rv, "with its blocks where the move puts them", &plan, ref);
}
