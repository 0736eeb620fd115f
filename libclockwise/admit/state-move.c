/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A reservation booked again where its blocks go: while a move runs, on
 * both sides of it (each block where it is and where the move puts it,
 * tested against the other streams on each disk); once the move is over,
 * as the range lies now, untested, since that asks at most what the
 * move's booking did (clockwise/admit.h, alt_disk); and before a move
 * starts, whether the stream would pass with its blocks where the move
 * puts them (cw_admit_state_move_check); and with one disk in another's
 * place (cw_admit_state_replace).  The new parts array goes to the
 * pool first, then replaces the old one under the lock; the old one stays
 * readable until the reservation goes (struct resv_obj).  The SSD cache's
 * bookings (state-cache.c) are made the same way.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
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
	char prefix[3 * CW_NAME_MAX + 96], was[sizeof(ref->reason)];

	if (!ref)
		return;
	/* a failure case follows the verb: "would be refused on disk D with
	 * disk F failed: why" */
	ast_refusal_of_plan(p, plan, rv->rate_bps, true, ref);
	if (ref->who == CW_ADMIT_WHO_NEW && !plan->host.refused) {
		ast_refusal_who(ref, ref->part.fail_disk_task, rv, &ref->part.task);
		ast_refusal_prefix(p, plan, true, prefix, sizeof(prefix));
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
		/* planned beside the others, not beside itself: a plan the
		 * test refuses has the parts of the disks up to the refusal
		 * only (a stream past half its disks' room lost the rest) */
		prepared_drop_owner(&p, rv);
		r = ast_plan_at(&p, rv->rate_bps, &plan);
	}
	if (r == 0 && !plan.admitted)
		r = -EBUSY;	/* asks more than it did after all: kept as it is */
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

/* p's layout with every copy on disk index from put on disk index to
 * (at offset at there); whether any was. */
static bool layout_replace(struct prepared *p, uint32_t from, uint32_t to, uint64_t at)
{
	struct cw_admit_layout *l = &p->rl.l;
	bool any = false;

	for (uint64_t k = 0; k < l->n_pblocks; k++) {
		if (p->rl.disk_idx[k] == from) {
			p->rl.disk_idx[k] = to;
			if (p->rl.disk_off)
				p->rl.disk_off[k] = at;
			any = true;
		}
		if (p->rl.alt_idx && p->rl.alt_idx[k] == from)
			p->rl.alt_idx[k] = to;
		for (uint32_t c = 1; c < l->n_copies; c++) {
			uint64_t i = (c - 1) * l->n_pblocks + k;

			if (p->rl.mirror_idx[i] == from) {
				p->rl.mirror_idx[i] = to;
				p->rl.mirror_off[i] = at;
				any = true;
			}
		}
	}
	return any;
}

/* The parts of plan with rv's part on disk id kept: n of them in *ret_n. */
static struct cw_admit_resv_part *parts_keeping(const struct prepared *p,
						const struct cw_admit_plan *plan,
						const struct cw_admit_resv *rv, uint32_t id,
						size_t *ret_n)
{
	struct cw_admit_resv_part *parts = ast_plan_parts(p, plan), *m;
	const struct cw_admit_resv_part *old = cw_admit_resv_part_on(rv, id);
	size_t n = plan->n_parts;

	*ret_n = n;
	if (!parts || !old)
		return parts;
	m = ast_parts_new(n + 1);
	if (m) {
		memcpy(m, parts, n * sizeof(*m));
		m[n] = *old;
		*ret_n = n + 1;
	}
	free(parts);
	return m;
}

/* Books rv with disk new_id in old_id's place (cw_admit_state_replace),
 * for move_id: 1 if its range has no copy on old_id, 0, or -EBUSY with
 * ref. */
static int replace_one(struct cw_admit_state *st, struct cw_admit_resv *rv, uint32_t old_id,
		       uint32_t new_id, uint64_t move_id, struct cw_admit_refusal *ref,
		       struct cw_admit_changes *changes)
{
	_cleanup_(ast_prepared_done) struct prepared p = { 0 };
	_cleanup_(cw_admit_plan_done) struct cw_admit_plan plan = { 0 };
	const struct dstate *nd = st->disks[new_id];
	uint32_t from = UINT32_MAX, to = UINT32_MAX;
	struct cw_admit_resv_part *parts;
	char with[2 * CW_NAME_MAX + 64];
	size_t n;
	int r = prepare_resv_as(st, rv, 0, &p, ref);

	if (r < 0)
		return r;
	for (size_t i = 0; i < p.rl.n_disks; i++) {
		if (p.rl.disks[i].id == old_id)
			from = (uint32_t)i;
		if (p.rl.disks[i].id == new_id)
			to = (uint32_t)i;
	}
	if (from == UINT32_MAX || to == UINT32_MAX)
		return 1;
	/* the innermost block of the new disk: its slowest place */
	if (!layout_replace(&p, from, to, nd->model.capacity_bytes > p.rl.l.pblock_bytes ?
				   nd->model.capacity_bytes - p.rl.l.pblock_bytes : 0))
		return 1;
	snprintf(with, sizeof(with), "with disk %s in place of disk %s", nd->name,
		 st->disks[old_id] ? st->disks[old_id]->name : "?");
	r = ast_plan_moved(st, &p, rv, with, &plan, ref);
	if (r < 0)
		return r;
	parts = parts_keeping(&p, &plan, rv, old_id, &n);
	return ast_rebook(st, rv, move_id ? move_id : rv->move_id, parts, n, ref, changes);
}

/* The move of move_ids[0..n) that is of rv's partition (0: none). */
static uint64_t move_of(struct cw_admit_state *st, const struct cw_admit_resv *rv,
			const uint64_t *move_ids, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct cw_move_info mi;

		if (cw_move_get(st->pool, move_ids[i], &mi) == 0 && mi.part_id == rv->part_id)
			return move_ids[i];
	}
	return 0;
}

int cw_admit_state_replace(struct cw_admit_state *st, uint32_t old_id, uint32_t new_id,
			   const uint64_t *move_ids, size_t n_moves, struct cw_admit_refusal *ref,
			   struct cw_admit_changes *changes)
{
	struct undo {
		struct cw_admit_resv *rv;
		uint64_t move_id;
		struct cw_admit_resv_part *parts;
		size_t n;
	} *u;
	size_t nu = 0;
	int r = 0;

	if (ref)
		memset(ref, 0, sizeof(*ref));
	if (!st || old_id == new_id || old_id < 1 || old_id > CW_DISKS_MAX || new_id < 1 ||
	    new_id > CW_DISKS_MAX || (n_moves && !move_ids))
		return -EINVAL;
	if (!st->disks[new_id]) {
		ast_refuse(ref, "disk %" PRIu32 " has no model", new_id);
		return -ENODEV;
	}
	u = calloc(st->n_resvs ? st->n_resvs : 1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	for (size_t i = 0; i < st->n_resvs && r >= 0; i++) {
		struct cw_admit_resv *rv = st->resvs[i];
		struct undo *x = &u[nu];

		*x = (struct undo){ .rv = rv, .move_id = rv->move_id, .n = rv->n_parts,
				    .parts = ast_parts_new(rv->n_parts) };
		if (!x->parts) {
			r = -ENOMEM;
			break;
		}
		memcpy(x->parts, rv->parts, rv->n_parts * sizeof(*rv->parts));
		r = replace_one(st, rv, old_id, new_id, move_of(st, rv, move_ids, n_moves), ref,
				changes);
		if (r == 0)
			nu++;
		else
			free(x->parts);
	}
	/* all or none: the streams booked so far get their parts and move
	 * back (what they asked before: untested) */
	while (nu--) {
		struct undo *x = &u[nu];

		if (r < 0)
			(void)ast_rebook(st, x->rv, x->move_id, x->parts, x->n, NULL, changes);
		else
			free(x->parts);
	}
	free(u);
	return r < 0 ? r : 0;
}

int cw_admit_state_disk_replace(struct cw_admit_state *st, uint32_t old_id, uint32_t new_id,
				uint64_t **ret_ids, size_t *ret_n, struct cw_admit_refusal *ref,
				struct cw_admit_changes *changes)
{
	_cleanup_free_ uint64_t *ids = NULL;
	_cleanup_free_ struct cw_disk_info *oi = malloc(sizeof(*oi));
	struct cw_disk_info ni;
	char refused[CW_ADMIT_REASON_MAX + 400] = "";
	size_t n = 0;
	int r;

	if (ref)
		memset(ref, 0, sizeof(*ref));
	if (!st || !ret_ids || !ret_n)
		return -EINVAL;
	*ret_ids = NULL;
	*ret_n = 0;
	if (!oi)
		return -ENOMEM;
	r = cw_disk_info(st->pool, old_id, oi);
	if (r == 0)
		r = cw_disk_info(st->pool, new_id, &ni);
	if (r == 0)
		r = cw_disk_replace(st->pool, old_id, new_id, "checked against the reservations",
				    &ids, &n);
	if (r < 0)
		return r;
	r = cw_admit_state_replace(st, old_id, new_id, ids, n, ref, changes);
	/* a replacement refused stays in the journal, cancelled, saying why */
	if (r < 0)
		snprintf(refused, sizeof(refused), "refused: %s",
			 ref && ref->reason[0] ? ref->reason : strerror(-r));
	for (size_t i = 0; i < n; i++) {
		struct cw_move_info mi;

		/* one with nothing to copy is journalled done */
		if (cw_move_get(st->pool, ids[i], &mi) < 0 || mi.state == CW_MOVE_DONE)
			continue;
		if (r == 0)
			r = cw_move_resume(st->pool, ids[i]);
		else
			(void)cw_move_cancel(st->pool, ids[i], refused);
	}
	/* not replaced after all: a spare again, and why the old disk was
	 * not replaced before, if it was said */
	if (r < 0 && ni.spare)
		(void)cw_disk_set_spare(st->pool, new_id, true);
	if (r < 0 && oi->unreplaced[0])
		(void)cw_disk_set_unreplaced(st->pool, old_id, oi->unreplaced);
	if (r == 0) {
		*ret_ids = CW_TAKE_PTR(ids);
		*ret_n = n;
	}
	return r;
}

/* Appends "; " (unless first) and what fmt says to buf, cut at its end. */
static void why_add(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void why_add(char *buf, size_t len, const char *fmt, ...)
{
	size_t at = strlen(buf);
	va_list ap;

	if (at && at + 2 < len)
		at += (size_t)snprintf(buf + at, len - at, "; ");
	va_start(ap, fmt);
	if (at < len)
		vsnprintf(buf + at, len - at, fmt, ap);
	va_end(ap);
}

int cw_admit_state_takeover(struct cw_admit_state *st, uint32_t failed_id,
			    struct cw_admit_takeover *ret, struct cw_admit_changes *changes)
{
	uint32_t spares[CW_DISKS_MAX];
	struct cw_disk_info di;
	size_t n;
	int r;

	if (!st || !ret)
		return -EINVAL;
	*ret = (struct cw_admit_takeover){ 0 };
	r = cw_disk_info(st->pool, failed_id, &di);
	if (r < 0 || di.free_blocks == di.data_blocks)
		return r;
	n = cw_pool_spares(st->pool, di.data_blocks - di.free_blocks, spares, CW_DISKS_MAX);
	if (!n)
		why_add(ret->why, sizeof(ret->why), "no spare with room for its %" PRIu64 " blocks",
			di.data_blocks - di.free_blocks);
	for (size_t i = 0; i < n; i++) {
		struct cw_admit_refusal ref;
		struct cw_disk_info si;

		if (cw_disk_info(st->pool, spares[i], &si) < 0)
			continue;
		r = cw_admit_state_disk_replace(st, failed_id, spares[i], &ret->move_ids,
						&ret->n_moves, &ref, changes);
		if (r == 0) {
			ret->spare = spares[i];
			return 0;
		}
		if (r == -EBUSY && ref.reason[0])
			ret->refused++;
		why_add(ret->why, sizeof(ret->why), "spare %s: %s", si.name,
			ref.reason[0] ? ref.reason : cw_pool_last_error(st->pool)->msg);
	}
	return 0;
}
