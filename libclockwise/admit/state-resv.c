/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The admission state's reservations as objects: made, and freed with the
 * parts arrays a move retired (struct resv_obj); stored in the pool and
 * loaded from it (the pool keeps wall-clock times, the state its own
 * clock); found and listed, for other threads too.
 *
 * Invariant: a stored reservation is in memory only once the pool holds
 * it (cw_admit_state_reserve: ast_resv_store, then ast_resv_append), and
 * leaves memory only once the pool let it go (cw_admit_state_release).
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

struct cw_admit_resv *ast_resv_new(void)
{
	struct resv_obj *o = calloc(1, sizeof(*o));

	return o ? &o->pub : NULL;
}

/* Room for n parts and the zero disk id after them. */
struct cw_admit_resv_part *ast_parts_new(size_t n)
{
	return calloc(n + 1, sizeof(struct cw_admit_resv_part));
}

void ast_resv_free(struct cw_admit_resv *r)
{
	struct resv_obj *o = (struct resv_obj *)r;

	if (!r)
		return;
	while (o->retired) {
		struct retired *t = o->retired;

		o->retired = t->next;
		free(t->parts);
		free(t);
	}
	free(r->parts);
	free(o);
}

const struct cw_admit_resv_part *cw_admit_resv_part_on(const struct cw_admit_resv *rv,
						       uint32_t disk_id)
{
	const struct cw_admit_resv_part *p = cw_pr_load_acquire(&rv->parts);

	for (; p && p->disk_id; p++)
		if (p->disk_id == disk_id)
			return p;
	return NULL;
}

/* ---- in the pool ---- */

static int64_t shift_ns(int64_t t, int64_t by)
{
	return t ? t + by : 0;
}

/* Parts as the pool stores them (wall-clock times), malloc'ed. */
struct cw_resv_disk *ast_parts_stored(const struct cw_admit_state *st,
				      const struct cw_admit_resv_part *parts, size_t n)
{
	struct cw_resv_disk *d = calloc(n ? n : 1, sizeof(*d));
	int64_t by = st->o.wall_ns() - st->o.clock_ns();

	for (size_t i = 0; d && i < n; i++) {
		const struct cw_admit_resv_part *p = &parts[i];

		d[i] = (struct cw_resv_disk){
			.disk_id = p->disk_id, .period_ns = p->task.period_ns,
			.service_ns = p->task.service_ns, .from_ns = shift_ns(p->task.from_ns, by),
			.to_ns = shift_ns(p->task.to_ns, by), .requests = p->requests,
			.stride = p->stride, .copy = p->copy,
		};
	}
	return d;
}

int ast_resv_store(struct cw_admit_state *st, struct cw_admit_resv *rv)
{
	_cleanup_free_ struct cw_resv_disk *d = ast_parts_stored(st, rv->parts, rv->n_parts);
	int64_t by = st->o.wall_ns() - st->o.clock_ns();
	struct cw_resv_rec rec = {
		.part_id = rv->part_id, .rate_bps = rv->rate_bps, .block_bytes = rv->block_bytes,
		.range_start_bytes = rv->range_start_bytes, .range_end_bytes = rv->range_end_bytes,
		.start_ns = shift_ns(rv->span_start_ns, by), .end_ns = shift_ns(rv->span_end_ns, by),
		.period_ns = rv->period_ns, .due = (unsigned)rv->due,
		.n_disks = rv->n_parts, .disks = d, .move_id = rv->move_id,
		.survive = rv->survive, .record = rv->record,
	};

	if (!d)
		return -ENOMEM;
	return cw_resv_add(st->pool, &rec, &rv->id);
}

/* How far ahead of need a client asks for a block: the longest deadline
 * of its parts (at least b/B). */
void ast_resv_set_lead(struct cw_admit_resv *rv)
{
	rv->lead_ns = rv->period_ns;
	for (size_t i = 0; i < rv->n_parts; i++)
		rv->lead_ns = CW_MAX(rv->lead_ns, cw_task_deadline_ns(&rv->parts[i].task));
}

/* Appends rv (owned from now on) to the list. */
int ast_resv_append(struct cw_admit_state *st, struct cw_admit_resv *rv)
{
	struct cw_admit_resv **v;

	pthread_mutex_lock(&st->lock);
	v = realloc(st->resvs, (st->n_resvs + 1) * sizeof(*v));
	if (v) {
		st->resvs = v;
		st->resvs[st->n_resvs++] = rv;
	}
	pthread_mutex_unlock(&st->lock);
	return v ? 0 : -ENOMEM;
}

int ast_resvs_load(struct cw_admit_state *st)
{
	struct cw_resv_rec *recs = NULL;
	struct cw_part_info *parts = NULL;
	size_t n = 0, np = 0;
	int64_t by = st->o.wall_ns() - st->o.clock_ns();
	int r;

	r = cw_resv_list(st->pool, &recs, &n);
	if (r == 0)
		r = cw_part_list(st->pool, &parts, &np);
	for (size_t i = 0; r == 0 && i < n; i++) {
		const struct cw_resv_rec *rec = &recs[i];
		struct cw_admit_resv *rv = ast_resv_new();

		if (!rv || !(rv->parts = ast_parts_new(rec->n_disks))) {
			ast_resv_free(rv);
			r = -ENOMEM;
			break;
		}
		*rv = (struct cw_admit_resv){
			.id = rec->id, .stream = ++st->next_stream, .persistent = true,
			.part_id = rec->part_id, .rate_bps = rec->rate_bps,
			.block_bytes = rec->block_bytes, .range_start_bytes = rec->range_start_bytes,
			.range_end_bytes = rec->range_end_bytes,
			.span_start_ns = shift_ns(rec->start_ns, -by),
			.span_end_ns = shift_ns(rec->end_ns, -by), .period_ns = rec->period_ns,
			.due = (enum cw_admit_due)rec->due,
			.n_parts = rec->n_disks, .parts = rv->parts, .move_id = rec->move_id,
			.survive = rec->survive, .record = rec->record,
		};
		for (size_t j = 0; j < np; j++)
			if (parts[j].id == rec->part_id)
				snprintf(rv->part, sizeof(rv->part), "%s", parts[j].name);
		for (size_t j = 0; j < rec->n_disks; j++) {
			const struct cw_resv_disk *d = &rec->disks[j];

			rv->parts[j] = (struct cw_admit_resv_part){
				.disk_id = d->disk_id,
				.task = { d->period_ns, d->service_ns, shift_ns(d->from_ns, -by),
					  shift_ns(d->to_ns, -by),
					  /* as cw_admit_plan gave it */
					  admit_part_deadline(rv->due, rec->period_ns) },
				.requests = d->requests, .stride = d->stride, .copy = d->copy,
			};
		}
		ast_resv_set_lead(rv);
		r = ast_resv_append(st, rv);
		if (r < 0)
			ast_resv_free(rv);
	}
	cw_resv_list_free(recs, n);
	free(parts);
	return r;
}

/* ---- queries ---- */

const struct cw_admit_resv *cw_admit_state_resv_at(const struct cw_admit_state *st, size_t i)
{
	return i < st->n_resvs ? st->resvs[i] : NULL;
}

const struct cw_admit_resv *cw_admit_state_resv_find(const struct cw_admit_state *st,
						     uint64_t id)
{
	for (size_t i = 0; i < st->n_resvs; i++)
		if (st->resvs[i]->persistent && st->resvs[i]->id == id)
			return st->resvs[i];
	return NULL;
}

int cw_admit_state_resv_list(struct cw_admit_state *st, struct cw_admit_resv **ret,
			     size_t *ret_n)
{
	struct cw_admit_resv *v;
	size_t n;
	int r = 0;

	pthread_mutex_lock(&st->lock);
	n = st->n_resvs;
	v = calloc(n ? n : 1, sizeof(*v));
	for (size_t i = 0; v && i < n; i++) {
		v[i] = *st->resvs[i];
		v[i].parts = ast_parts_new(v[i].n_parts);
		if (!v[i].parts) {
			cw_admit_resv_list_free(v, i);
			v = NULL;
			break;
		}
		memcpy(v[i].parts, st->resvs[i]->parts, v[i].n_parts * sizeof(*v[i].parts));
	}
	pthread_mutex_unlock(&st->lock);
	if (!v)
		r = -ENOMEM;
	*ret = v;
	*ret_n = v ? n : 0;
	return r;
}

void cw_admit_resv_list_free(struct cw_admit_resv *list, size_t n)
{
	if (!list)
		return;
	for (size_t i = 0; i < n; i++)
		free(list[i].parts);
	free(list);
}
