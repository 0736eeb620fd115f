/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A disk's new model (calibrated, configured or stored): every stream on
 * the disk is planned again under it, and the disk's task set tested
 * again at each instant a windowed stream starts (Jeffay's test, with the
 * best-effort reserve).  The model is taken only if every stream still
 * passes; then the pool, the plan and the exports' best-effort shares on
 * the disk follow.
 *
 * Invariant: each part on a disk was admitted beside the others, or
 * re-admitted with the disk's current model.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admit/state-internal.h"
#include "common/atomic.h"
#include "common/cleanup.h"
#include "common/util.h"

const char *cw_admit_model_source_name(enum cw_admit_model_source s)
{
	switch (s) {
	case CW_ADMIT_MODEL_PRESET: return "preset";
	case CW_ADMIT_MODEL_CONFIG: return "config";
	case CW_ADMIT_MODEL_STORED: return "stored";
	case CW_ADMIT_MODEL_CALIBRATED: return "calibrated";
	}
	return "?";
}

/* Whether every set of tasks active together passes Jeffay's test with the
 * reserve: the instants where some windowed task starts, and "always".
 * 1 when one does not (*ret_fail: an index into t, or CW_ADMIT_FAIL_*). */
static int set_admissible(const struct cw_task *t, size_t n, const struct cw_task *reserve,
			  struct cw_admit_result *ret, size_t *ret_fail)
{
	_cleanup_free_ struct cw_task *set = malloc((n + 1) * sizeof(*set));
	_cleanup_free_ size_t *idx = malloc((n + 1) * sizeof(*idx));

	if (!set || !idx)
		return -ENOMEM;
	for (size_t k = 0; k <= n; k++) {
		/* k == n: the always-active tasks alone (no windowed one
		 * starts); else the instant task k starts. */
		bool windowed = k < n && (t[k].from_ns || t[k].to_ns);
		size_t m = 0;
		int r;

		if (k < n && !windowed)
			continue;
		for (size_t i = 0; i < n; i++) {
			bool always = t[i].from_ns == 0 && t[i].to_ns == 0;

			if (always || (windowed && t[i].from_ns <= t[k].from_ns &&
				       t[k].from_ns < t[i].to_ns)) {
				idx[m] = i;
				set[m++] = t[i];
			}
		}
		if (reserve->service_ns > 0) {
			idx[m] = CW_ADMIT_FAIL_RESERVE;
			set[m++] = (struct cw_task){ reserve->period_ns, reserve->service_ns, 0, 0 };
		}
		r = cw_admit_test(set, m, ret);
		if (r < 0)
			return r;
		if (!ret->schedulable) {
			*ret_fail = admit_culprit(ret, set, m, idx);
			return 1;
		}
	}
	return 0;
}

/* C of rv's part on disk d under model m: cw_admit_plan of rv's range
 * alone, with m on d. */
static int part_service(struct cw_admit_state *st, const struct cw_admit_resv *rv,
			const struct dstate *d, const struct cw_model *m, int64_t *ret)
{
	_cleanup_(ast_range_layout_done) struct range_layout rl = { 0 };
	_cleanup_(cw_admit_plan_done) struct cw_admit_plan plan = { 0 };
	_cleanup_free_ struct cw_admit_disk *ad = NULL;
	struct cw_admit_qos q = { .bandwidth_bps = rv->rate_bps, .block_bytes = rv->block_bytes,
				  .due = rv->due };
	uint32_t ids[CW_DISKS_MAX];
	struct cw_part *part;
	int r;

	r = cw_part_lookup(st->pool, rv->part, &part);
	if (r == 0)
		r = ast_range_layout(st, part, rv->range_start_bytes, rv->range_end_bytes, &rl,
				     NULL);
	if (r == 0)
		r = ast_range_layout_move(st, part, rv->move_id, rv->range_start_bytes, &rl, NULL);
	if (r == 0)
		r = ast_range_layout_copies(st, &rl, ids, ast_resv_copies(rv, ids), NULL);
	if (r < 0)
		return r;
	ad = calloc(rl.n_disks ? rl.n_disks : 1, sizeof(*ad));
	if (!ad)
		return -ENOMEM;
	for (size_t i = 0; i < rl.n_disks; i++) {
		const struct dstate *o = st->disks[rl.disks[i].id];

		ad[i].model = o == d ? m : o ? &o->model : NULL;
	}
	r = cw_admit_plan(&q, &rl.l, ad, rl.n_disks, &plan);
	if (r < 0)
		return r;
	for (size_t i = 0; i < plan.n_parts; i++)
		if (rl.disks[plan.parts[i].disk].id == d->id) {
			*ret = plan.parts[i].task.service_ns;
			return 0;
		}
	return -ENOENT;	/* the range no longer touches d: cannot be */
}

int cw_admit_state_set_model(struct cw_admit_state *st, uint32_t id, const struct cw_model *m,
			     enum cw_admit_model_source source, bool *ret_taken,
			     struct cw_admit_refusal *ref, struct cw_admit_changes *changes)
{
	struct dstate *d = id <= CW_DISKS_MAX ? st->disks[id] : NULL;
	_cleanup_free_ struct cw_task *tasks = NULL;
	_cleanup_free_ const struct cw_admit_resv **owner = NULL;
	_cleanup_free_ uint64_t *ids = NULL;
	_cleanup_free_ int64_t *svc = NULL;
	struct cw_admit_result res;
	struct cw_task reserve = { 0 };
	size_t n, n_stored = 0, fail = 0;
	int r;

	if (ret_taken)
		*ret_taken = false;
	if (ref)
		memset(ref, 0, sizeof(*ref));
	if (!d)
		return -ENOENT;
	r = cw_model_validate(m);
	if (r < 0)
		return r;
	if (source < d->source)
		return 0;
	r = ast_disk_tasks(st, id, &tasks, &owner, &n);
	if (r < 0)
		return r;
	ids = calloc(n ? n : 1, sizeof(*ids));
	svc = calloc(n ? n : 1, sizeof(*svc));
	if (!ids || !svc)
		return -ENOMEM;
	/* Every stream on the disk again, with the new service times. */
	for (size_t i = 0; i < n; i++) {
		r = part_service(st, owner[i], d, m, &tasks[i].service_ns);
		if (r < 0)
			return r;
		if (owner[i]->persistent) {
			ids[n_stored] = owner[i]->id;
			svc[n_stored++] = tasks[i].service_ns;
		}
	}
	if (st->o.plan.be_reserve) {
		struct cw_disk_plan p;

		r = cw_admit_disk_plan(&st->o.plan, m, d->tier, st->block, NULL, 0, &p);
		if (r < 0)
			return r;
		reserve = p.be_reserve;
	}
	if (n) {
		r = set_admissible(tasks, n, &reserve, &res, &fail);
		if (r < 0)
			return r;
	}
	if (n && r == 1) {
		if (ref) {
			const struct cw_admit_resv *o = fail < n ? owner[fail] : NULL;
			char prefix[4 * CW_NAME_MAX + 128], who[CW_NAME_MAX + 64];

			ref->disk_id = id;
			snprintf(ref->disk, sizeof(ref->disk), "%s", d->name);
			ref->part.disk = id;
			ref->part.result = res;
			ast_refusal_who(ref, fail, o, fail < n ? &tasks[fail] : fail ==
					CW_ADMIT_FAIL_RESERVE ? &reserve : NULL);
			ast_who_text(ref, who, sizeof(who));
			if (o)
				snprintf(prefix, sizeof(prefix), "disk %s: with the new model, %s (on "
					 "%s) would no longer be guaranteed: ", d->name, who, o->part);
			else if (fail == CW_ADMIT_FAIL_RESERVE)
				snprintf(prefix, sizeof(prefix), "disk %s: with the new model, its "
					 "streams would leave no room for best effort: ", d->name);
			else
				snprintf(prefix, sizeof(prefix), "disk %s: ", d->name);
			ast_refusal_words(ref, prefix, o ? o->block_bytes : 0, o ? o->rate_bps : 0,
					  "under the new model");
		}
		return -EBUSY;
	}
	if (source >= CW_ADMIT_MODEL_STORED) {
		r = cw_disk_model_readmit(st->pool, id, m, source == CW_ADMIT_MODEL_CALIBRATED, ids,
					  svc, n_stored);
		if (r < 0)
			return r;
	}
	pthread_mutex_lock(&st->lock);
	d->model = *m;
	d->source = source;
	for (size_t i = 0; i < n; i++) {
		struct cw_admit_resv *rv = (struct cw_admit_resv *)owner[i];

		for (size_t j = 0; j < rv->n_parts; j++)
			if (rv->parts[j].disk_id == id)
				/* The data path reads it while it runs
				 * (admit-state.h): one atomic store. */
				cw_pr_store_relaxed(&rv->parts[j].task.service_ns,
						    tasks[i].service_ns);
	}
	pthread_mutex_unlock(&st->lock);
	if (ret_taken)
		*ret_taken = true;
	r = ast_replan(st, id, changes);
	/* the exports' shares there are in the model's costs */
	return r < 0 ? r : ast_be_refresh(st, NULL, id);
}

int cw_admit_state_get_model(struct cw_admit_state *st, uint32_t id, struct cw_model *ret,
			     enum cw_admit_model_source *ret_source)
{
	const struct dstate *d = id <= CW_DISKS_MAX ? st->disks[id] : NULL;

	if (!d)
		return -ENOENT;
	if (ret)
		*ret = d->model;
	if (ret_source)
		*ret_source = d->source;
	return 0;
}
