/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The admission state's disks: each one's model as loaded (calibrated or
 * stored in the pool, the model it emulates, or its tier's preset), its
 * task set (the parts on it of every reservation) and its plan; adding
 * and removing disks, and the queries on them.
 *
 * Invariant: each disk's plan is cw_admit_disk_plan() of its task set and
 * model, recomputed (and announced) whenever either changes: whatever
 * changes either calls ast_replan() (or ast_replan_resv()) after.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admit/state-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

/* A preset for the tier, stretched so that its last (slowest) zone covers
 * the whole disk: admission then never under-estimates a bigger disk. */
static int preset_model(const struct cw_admit_state *st, const struct cw_disk_info *d,
			struct cw_model *m)
{
	int r = cw_model_preset(d->tier == CW_TIER_SSD ? "ssd" : d->tier == CW_TIER_RBD ? "rbd" :
				 "hdd7200", m);

	if (r < 0)
		return r;
	if (d->capacity_bytes > m->capacity_bytes) {
		m->capacity_bytes = d->capacity_bytes;
		m->zone[m->n_zones - 1].end_bytes = d->capacity_bytes;
	}
	m->margin_ppm = st->o.preset_margin_ppm;
	return cw_model_validate(m);
}

/* Every part on disk id, in admission order; with owners when wanted. */
int ast_disk_tasks(const struct cw_admit_state *st, uint32_t id, struct cw_task **ret,
		   const struct cw_admit_resv ***ret_owner, size_t *ret_n)
{
	size_t n = 0, k = 0;

	for (size_t i = 0; i < st->n_resvs; i++)
		for (size_t j = 0; j < st->resvs[i]->n_parts; j++)
			n += st->resvs[i]->parts[j].disk_id == id;
	*ret = calloc(n ? n : 1, sizeof(**ret));
	if (ret_owner)
		*ret_owner = calloc(n ? n : 1, sizeof(**ret_owner));
	if (!*ret || (ret_owner && !*ret_owner)) {
		free(*ret);
		if (ret_owner)
			free(*ret_owner);
		return -ENOMEM;
	}
	for (size_t i = 0; i < st->n_resvs; i++)
		for (size_t j = 0; j < st->resvs[i]->n_parts; j++)
			if (st->resvs[i]->parts[j].disk_id == id) {
				if (ret_owner)
					(*ret_owner)[k] = st->resvs[i];
				(*ret)[k++] = st->resvs[i]->parts[j].task;
			}
	*ret_n = n;
	return 0;
}

/* The plan of d over tasks.  Tasks admitted with windows that never meet
 * can fail the all-at-once test the plan uses (it ignores windows, so it
 * is never too generous): best effort then gets no slack at all. */
static int compute_plan(const struct cw_admit_state *st, const struct dstate *d,
			const struct cw_task *tasks, size_t n, struct cw_disk_plan *ret)
{
	int r = cw_admit_disk_plan(&st->o.plan, &d->model, d->tier, st->block, tasks, n, ret);

	if (r == -EBUSY) {
		struct cw_admit_plan_opts none;

		cw_admit_plan_opts_paper(&none);
		r = cw_admit_disk_plan(&none, &d->model, d->tier, st->block, NULL, 0, ret);
		if (r == 0) {
			ret->n_tasks = n;
			ret->delta_l_ns = ret->be_budget_ns = ret->idle_be_ns = 0;
			ret->be_starved = true;
			if (st->o.plan.be_reserve)
				cw_admit_be_reserve(&d->model, ret->be_piece_bytes,
						    &ret->be_reserve);
		}
	}
	if (r == 0)
		ret->disk_id = d->id;
	return r;
}

/* Recomputes the plan of disk id and announces it. */
int ast_replan(struct cw_admit_state *st, uint32_t id, struct cw_admit_changes *changes)
{
	struct dstate *d = st->disks[id];
	_cleanup_free_ struct cw_task *tasks = NULL;
	struct cw_disk_plan p;
	size_t n;
	int r;

	if (!d)
		return 0;
	r = ast_disk_tasks(st, id, &tasks, NULL, &n);
	if (r == 0)
		r = compute_plan(st, d, tasks, n, &p);
	if (r < 0)
		return r;
	pthread_mutex_lock(&st->lock);
	d->plan = p;
	pthread_mutex_unlock(&st->lock);
	ast_changes_add(changes, id);
	ast_emit(st, &(struct cw_admit_event){ .kind = CW_ADMIT_EV_PLAN, .disk_id = id,
					       .plan = &d->plan, .model = &d->model });
	return 0;
}

int ast_replan_resv(struct cw_admit_state *st, const struct cw_admit_resv *rv,
		    struct cw_admit_changes *changes)
{
	int r = 0;

	for (size_t i = 0; i < rv->n_parts && r == 0; i++)
		r = ast_replan(st, rv->parts[i].disk_id, changes);
	return r;
}

int ast_disk_load(struct cw_admit_state *st, const struct cw_disk_info *info)
{
	struct dstate *d = calloc(1, sizeof(*d));
	bool calibrated = false;
	int r;

	if (!d)
		return -ENOMEM;
	d->id = info->id;
	d->tier = info->tier;
	snprintf(d->name, sizeof(d->name), "%s", info->name);
	r = cw_disk_model_get(st->pool, info->id, &d->model, &calibrated);
	if (r == 0)
		d->source = calibrated ? CW_ADMIT_MODEL_CALIBRATED : CW_ADMIT_MODEL_STORED;
	/* Until measured, a disk that emulates a model is booked as that
	 * disk: every program asking this state (clockwised, cwsim plan)
	 * admits what the emulated disk can carry, not its tier's preset. */
	if (r == -ENOENT) {
		r = cw_disk_emulate_get(st->pool, info->id, &d->model);
		if (r == 0)
			d->source = CW_ADMIT_MODEL_CONFIG;
	}
	if (r == -ENOENT)
		r = preset_model(st, info, &d->model);
	if (r == 0)
		r = compute_plan(st, d, NULL, 0, &d->plan);
	if (r < 0) {
		free(d);
		return r;
	}
	st->disks[info->id] = d;
	return 0;
}

/* ---- adding and removing disks ---- */

int cw_admit_state_disk_add(struct cw_admit_state *st, uint32_t id,
			    struct cw_admit_changes *changes)
{
	struct cw_disk_info info;
	int r;

	if (id < 1 || id > CW_DISKS_MAX)
		return -ENOENT;
	r = cw_disk_info(st->pool, id, &info);
	if (r < 0)
		return r;
	free(st->disks[id]);
	st->disks[id] = NULL;
	r = ast_disk_load(st, &info);
	if (r < 0)
		return r;
	return ast_replan(st, id, changes);
}

int cw_admit_state_disk_remove(struct cw_admit_state *st, uint32_t id,
			       struct cw_admit_refusal *ref)
{
	struct dstate *d = id <= CW_DISKS_MAX ? st->disks[id] : NULL;

	if (ref)
		memset(ref, 0, sizeof(*ref));
	if (!d)
		return 0;
	for (size_t i = 0; i < st->n_resvs; i++) {
		const struct cw_admit_resv *rv = st->resvs[i];

		for (size_t j = 0; j < rv->n_parts; j++) {
			if (rv->parts[j].disk_id != id)
				continue;
			if (ref) {
				ref->disk_id = id;
				ref->resv_id = rv->id;
				snprintf(ref->disk, sizeof(ref->disk), "%s", d->name);
				if (rv->persistent)
					ast_refuse(ref, "disk %s serves reservation %" PRIu64,
						   d->name, rv->id);
				else
					ast_refuse(ref, "disk %s serves the start-up reservation "
						   "of export %s", d->name, rv->export_name);
			}
			return -EBUSY;
		}
	}
	pthread_mutex_lock(&st->lock);
	st->disks[id] = NULL;
	pthread_mutex_unlock(&st->lock);
	free(d);
	return 0;
}

/* ---- queries ---- */

int cw_admit_state_plan(struct cw_admit_state *st, uint32_t id, struct cw_disk_plan *ret)
{
	int r = -ENOENT;

	pthread_mutex_lock(&st->lock);
	if (id <= CW_DISKS_MAX && st->disks[id]) {
		*ret = st->disks[id]->plan;
		r = 0;
	}
	pthread_mutex_unlock(&st->lock);
	return r;
}

size_t cw_admit_state_disk_streams(const struct cw_admit_state *st, uint32_t id)
{
	size_t n = 0;

	for (size_t i = 0; i < st->n_resvs; i++)
		for (size_t j = 0; j < st->resvs[i]->n_parts; j++)
			n += st->resvs[i]->parts[j].disk_id == id;
	return n;
}
