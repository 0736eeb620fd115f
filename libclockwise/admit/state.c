/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The admission state of a pool (clockwise/admit-state.h): Bosch &
 * Mullender, section 3.1 — "If any of the participating disks fails to
 * admit its part of the new task, Clockwise [...] rejects the entire
 * real-time task."
 *
 * Invariants:
 *   - a disk's task set is exactly the parts on it of the reservations in
 *     st->resvs, and each part was admitted (cw_admit_plan's windowed test,
 *     with the disk's best-effort reserve) beside the parts before it, or
 *     re-admitted with the disk's current model (set_model);
 *   - a stored reservation is in memory only once the pool holds it, and
 *     leaves memory only once the pool let it go;
 *   - each disk's plan is cw_admit_disk_plan() of its task set and model,
 *     recomputed (and announced) whenever either changes.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <clockwise/admit-state.h>
#include <clockwise/cache.h>
#include <clockwise/mover.h>
#include <clockwise/pool-objects.h>
#include <clockwise/sched-beq.h>
#include <clockwise/units.h>

#include "admit/admit-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#define RESV_MAX 4096

struct dstate {
	uint32_t id;
	char name[CW_NAME_MAX + 1];
	enum cw_tier tier;
	struct cw_model model;
	enum cw_admit_model_source source;
	struct cw_disk_plan plan;
};

struct cw_admit_state {
	struct cw_admit_state_opts o;
	struct cw_pool *pool;
	uint64_t block;
	/* Guards resvs, n_resvs and the plans against readers in other
	 * threads; the changing thread reads without it. */
	pthread_mutex_t lock;
	struct dstate *disks[CW_DISKS_MAX + 1];	/* by id */
	struct cw_admit_resv **resvs;
	size_t n_resvs;
	uint64_t next_stream;
	/* Exports' best-effort QoS; the changing thread's alone. */
	struct cw_admit_be **bes;
	size_t n_bes;
	struct cw_host_model host;	/* none until set */
};

static int be_streams_check(const struct cw_admit_state *st, uint32_t disk_id,
			    const struct cw_task *tasks, size_t n, const struct cw_task *extra,
			    struct cw_admit_refusal *ref);
static int bes_load(struct cw_admit_state *st);
static void be_free(struct cw_admit_be *be);
static int be_refresh(struct cw_admit_state *st, const char *part, uint32_t disk_id);

static int64_t wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * CW_NS_PER_S + ts.tv_nsec;
}

void cw_admit_state_opts_init(struct cw_admit_state_opts *o)
{
	*o = (struct cw_admit_state_opts){ .size = sizeof(*o) };
	cw_admit_plan_opts_init(&o->plan);
	o->clock_ns = cw_now_ns;
	o->wall_ns = wall_now;
}

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

static void changes_add(struct cw_admit_changes *c, uint32_t id)
{
	if (c)
		c->bits[id / 64] |= UINT64_C(1) << (id % 64);
}

/* A reservation and the parts arrays a move replaced (rebook): another
 * thread may still read an old one (cw_admit_resv_part_on), so they go
 * with the reservation.  Every parts array ends with a zero disk id. */
struct resv_obj {
	struct cw_admit_resv pub;	/* first: a resv's address is its object's */
	struct retired {
		struct retired *next;
		struct cw_admit_resv_part *parts;
	} *retired;
};

static struct cw_admit_resv *resv_new(void)
{
	struct resv_obj *o = calloc(1, sizeof(*o));

	return o ? &o->pub : NULL;
}

/* Room for n parts and the zero disk id after them. */
static struct cw_admit_resv_part *parts_new(size_t n)
{
	return calloc(n + 1, sizeof(struct cw_admit_resv_part));
}

static void resv_free(struct cw_admit_resv *r)
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
	const struct cw_admit_resv_part *p = __atomic_load_n(&rv->parts, __ATOMIC_ACQUIRE);

	for (; p && p->disk_id; p++)
		if (p->disk_id == disk_id)
			return p;
	return NULL;
}

static void refuse(struct cw_admit_refusal *ref, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void refuse(struct cw_admit_refusal *ref, const char *fmt, ...)
{
	va_list ap;

	if (!ref)
		return;
	va_start(ap, fmt);
	vsnprintf(ref->reason, sizeof(ref->reason), fmt, ap);
	va_end(ap);
}

/* Puts the words fmt says before ref's reason. */
static void refusal_prefix(struct cw_admit_refusal *ref, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void refusal_prefix(struct cw_admit_refusal *ref, const char *fmt, ...)
{
	char was[sizeof(ref->reason)], pre[160];
	va_list ap;

	if (!ref)
		return;
	va_start(ap, fmt);
	vsnprintf(pre, sizeof(pre), fmt, ap);
	va_end(ap);
	memcpy(was, ref->reason, sizeof(was));
	/* cut at the buffer's end, as refuse() does */
	strncpy(ref->reason, pre, sizeof(ref->reason) - 1);
	ref->reason[sizeof(ref->reason) - 1] = '\0';
	strncat(ref->reason, was, sizeof(ref->reason) - 1 - strlen(ref->reason));
}

/* ---- models and plans ---- */

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
static int disk_tasks(const struct cw_admit_state *st, uint32_t id, struct cw_task **ret,
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

static void emit(struct cw_admit_state *st, const struct cw_admit_event *ev)
{
	if (st->o.listener)
		st->o.listener(st->o.listener_data, ev);
}

/* Recomputes the plan of disk id and announces it. */
static int replan(struct cw_admit_state *st, uint32_t id, struct cw_admit_changes *changes)
{
	struct dstate *d = st->disks[id];
	_cleanup_free_ struct cw_task *tasks = NULL;
	struct cw_disk_plan p;
	size_t n;
	int r;

	if (!d)
		return 0;
	r = disk_tasks(st, id, &tasks, NULL, &n);
	if (r == 0)
		r = compute_plan(st, d, tasks, n, &p);
	if (r < 0)
		return r;
	pthread_mutex_lock(&st->lock);
	d->plan = p;
	pthread_mutex_unlock(&st->lock);
	changes_add(changes, id);
	emit(st, &(struct cw_admit_event){ .kind = CW_ADMIT_EV_PLAN, .disk_id = id,
					   .plan = &d->plan, .model = &d->model });
	return 0;
}

static int replan_resv(struct cw_admit_state *st, const struct cw_admit_resv *rv,
		       struct cw_admit_changes *changes)
{
	int r = 0;

	for (size_t i = 0; i < rv->n_parts && r == 0; i++)
		r = replan(st, rv->parts[i].disk_id, changes);
	return r;
}

static int disk_load(struct cw_admit_state *st, const struct cw_disk_info *info)
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

/* ---- the reserved range ---- */

/* The range [start, end) of part as cw_admit_plan sees it: the disk (an
 * index into disks) and disk offset of each partition block it touches. */
struct range_layout {
	struct cw_disk_info *disks;
	size_t n_disks;
	uint32_t *disk_idx;
	uint64_t *disk_off;
	uint32_t *alt_idx;		/* where a move puts them (range_layout_move) */
	uint32_t copy_idx[CW_DISKS_MAX];	/* a cache's disks (range_layout_copies) */
	bool copy_id[CW_DISKS_MAX + 1];		/* the same, by disk id */
	struct cw_admit_layout l;
};

static void range_layout_done(struct range_layout *rl)
{
	free(rl->disks);
	free(rl->disk_idx);
	free(rl->disk_off);
	free(rl->alt_idx);
}

static int range_layout(struct cw_admit_state *st, struct cw_part *part, uint64_t start,
			uint64_t end, struct range_layout *rl, struct cw_admit_refusal *ref)
{
	uint64_t pb = cw_part_block_size(part);
	uint64_t first = start / pb, n = (end - 1) / pb - first + 1;
	_cleanup_free_ uint32_t *ids = NULL;
	uint32_t idx_of[CW_DISKS_MAX + 1] = { 0 };
	int r;

	memset(rl, 0, sizeof(*rl));
	r = cw_disk_list(st->pool, &rl->disks, &rl->n_disks);
	if (r < 0)
		return r;
	for (size_t i = 0; i < rl->n_disks; i++)
		idx_of[rl->disks[i].id] = (uint32_t)i;
	ids = calloc(n, sizeof(*ids));
	rl->disk_idx = calloc(n, sizeof(*rl->disk_idx));
	rl->disk_off = calloc(n, sizeof(*rl->disk_off));
	if (!ids || !rl->disk_idx || !rl->disk_off)
		return -ENOMEM;
	r = cw_part_block_disks(part, first, n, ids);
	if (r < 0)
		return r;
	for (uint64_t k = 0; k < n; k++) {
		struct cw_extent e;

		r = cw_part_map(part, (first + k) * pb, pb, &e);
		if (r < 0) {
			refuse(ref, "partition block %" PRIu64 ": %s", first + k,
			       r == -ENODEV ? "on a missing disk" : strerror(-r));
			return r;
		}
		if (!st->disks[ids[k]]) {
			refuse(ref, "partition block %" PRIu64 " is on disk %" PRIu32
			       ", which has no model", first + k, ids[k]);
			return -ENODEV;
		}
		rl->disk_idx[k] = idx_of[ids[k]];
		rl->disk_off[k] = e.phys_offset;
	}
	rl->l = (struct cw_admit_layout){
		.pblock_bytes = pb,
		.n_pblocks = n,
		.disk = rl->disk_idx,
		.disk_off = rl->disk_off,
		.first_bytes = start - first * pb,
		.range_bytes = end - start,
	};
	return 0;
}

/* The same range while the unfinished move move_id runs on part: each
 * block also where the move puts it (clockwise/admit.h, alt_disk), the
 * range laid out from start (rl->l as range_layout made it).  A move
 * that is over (or unknown) adds nothing: 0 either way. */
static int range_layout_move(struct cw_admit_state *st, struct cw_part *part, uint64_t move_id,
			     uint64_t start, struct range_layout *rl,
			     struct cw_admit_refusal *ref)
{
	uint64_t first = start / rl->l.pblock_bytes, n = rl->l.n_pblocks;
	_cleanup_free_ uint32_t *after = calloc(n ? n : 1, sizeof(*after));
	uint32_t idx_of[CW_DISKS_MAX + 1];
	bool known[CW_DISKS_MAX + 1] = { false };
	int r;

	if (!after)
		return -ENOMEM;
	if (!move_id)
		return 0;
	r = cw_move_destinations(st->pool, move_id, part, first, n, after);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	for (size_t i = 0; i < rl->n_disks; i++) {
		idx_of[rl->disks[i].id] = (uint32_t)i;
		known[rl->disks[i].id] = true;
	}
	rl->alt_idx = calloc(n ? n : 1, sizeof(*rl->alt_idx));
	if (!rl->alt_idx)
		return -ENOMEM;
	for (uint64_t k = 0; k < n; k++) {
		if (after[k] > CW_DISKS_MAX || !known[after[k]] || !st->disks[after[k]]) {
			refuse(ref, "move %" PRIu64 " takes partition block %" PRIu64 " to disk %"
			       PRIu32 ", which has no model", move_id, first + k, after[k]);
			return -ENODEV;
		}
		rl->alt_idx[k] = idx_of[after[k]];
	}
	rl->l.alt_disk = rl->alt_idx;
	return 0;
}

/* The same range with a copy of each block perhaps on each of disks
 * ids[0..n) (clockwise/admit.h, copy_disk): a cache's. */
static int range_layout_copies(struct cw_admit_state *st, struct range_layout *rl,
			       const uint32_t *ids, size_t n, struct cw_admit_refusal *ref)
{
	for (size_t i = 0; i < n; i++) {
		size_t k;

		for (k = 0; k < rl->n_disks && rl->disks[k].id != ids[i]; k++)
			;
		if (k == rl->n_disks || !st->disks[ids[i]]) {
			refuse(ref, "the cache's disk %" PRIu32 " has no model", ids[i]);
			return -ENODEV;
		}
		rl->copy_idx[i] = (uint32_t)k;
		rl->copy_id[ids[i]] = true;
	}
	rl->l.copy_disk = rl->copy_idx;
	rl->l.n_copy = n;
	return 0;
}

/* The disks rv is booked on for its partition's cache copies, into ids
 * (room for CW_DISKS_MAX); how many. */
static size_t resv_copies(const struct cw_admit_resv *rv, uint32_t *ids)
{
	size_t n = 0;

	for (size_t i = 0; i < rv->n_parts; i++)
		if (rv->parts[i].copy)
			ids[n++] = rv->parts[i].disk_id;
	return n;
}

/* ---- reservations ---- */

static int64_t shift_ns(int64_t t, int64_t by)
{
	return t ? t + by : 0;
}

/* Parts as the pool stores them (wall-clock times), malloc'ed. */
static struct cw_resv_disk *parts_stored(const struct cw_admit_state *st,
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

static int resv_store(struct cw_admit_state *st, struct cw_admit_resv *rv)
{
	_cleanup_free_ struct cw_resv_disk *d = parts_stored(st, rv->parts, rv->n_parts);
	int64_t by = st->o.wall_ns() - st->o.clock_ns();
	struct cw_resv_rec rec = {
		.part_id = rv->part_id, .rate_bps = rv->rate_bps, .block_bytes = rv->block_bytes,
		.range_start_bytes = rv->range_start_bytes, .range_end_bytes = rv->range_end_bytes,
		.start_ns = shift_ns(rv->span_start_ns, by), .end_ns = shift_ns(rv->span_end_ns, by),
		.period_ns = rv->period_ns, .due = (unsigned)rv->due,
		.n_disks = rv->n_parts, .disks = d, .move_id = rv->move_id,
	};

	if (!d)
		return -ENOMEM;
	return cw_resv_add(st->pool, &rec, &rv->id);
}

/* How far ahead of need a client asks for a block: the longest deadline
 * of its parts (at least b/B). */
static void resv_set_lead(struct cw_admit_resv *rv)
{
	rv->lead_ns = rv->period_ns;
	for (size_t i = 0; i < rv->n_parts; i++)
		rv->lead_ns = CW_MAX(rv->lead_ns, cw_task_deadline_ns(&rv->parts[i].task));
}

/* Appends rv (owned from now on) to the list. */
static int resv_append(struct cw_admit_state *st, struct cw_admit_resv *rv)
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

static int resvs_load(struct cw_admit_state *st)
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
		struct cw_admit_resv *rv = resv_new();

		if (!rv || !(rv->parts = parts_new(rec->n_disks))) {
			resv_free(rv);
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
		resv_set_lead(rv);
		r = resv_append(st, rv);
		if (r < 0)
			resv_free(rv);
	}
	cw_resv_list_free(recs, n);
	free(parts);
	return r;
}

/* ---- refusals in words ---- */

const char *cw_admit_who_name(enum cw_admit_who w)
{
	switch (w) {
	case CW_ADMIT_WHO_NEW: return "new";
	case CW_ADMIT_WHO_RESV: return "resv";
	case CW_ADMIT_WHO_STARTUP: return "start-up";
	case CW_ADMIT_WHO_RESERVE: return "best-effort-reserve";
	case CW_ADMIT_WHO_ALL: return "all";
	}
	return "?";
}

/* Whose deadline a refusal is about: owner (NULL for the new stream) or
 * one of the CW_ADMIT_FAIL_* stand-ins, with its task on the disk. */
static void refusal_who(struct cw_admit_refusal *ref, size_t fail,
			const struct cw_admit_resv *owner, const struct cw_task *task)
{
	if (fail == CW_ADMIT_FAIL_RESERVE)
		ref->who = CW_ADMIT_WHO_RESERVE;
	else if (fail == CW_ADMIT_FAIL_ALL)
		ref->who = CW_ADMIT_WHO_ALL;
	else if (!owner)
		ref->who = CW_ADMIT_WHO_NEW;
	else if (owner->persistent)
		ref->who = CW_ADMIT_WHO_RESV;
	else
		ref->who = CW_ADMIT_WHO_STARTUP;
	if (owner && owner->persistent)
		ref->resv_id = owner->id;
	if (owner && !owner->persistent)
		snprintf(ref->export_name, sizeof(ref->export_name), "%s", owner->export_name);
	if (task)
		ref->task = *task;
}

static void who_text(const struct cw_admit_refusal *ref, char *buf, size_t len)
{
	switch (ref->who) {
	case CW_ADMIT_WHO_RESV:
		snprintf(buf, len, "reservation %" PRIu64, ref->resv_id);
		break;
	case CW_ADMIT_WHO_STARTUP:
		snprintf(buf, len, "the start-up stream of export %s", ref->export_name);
		break;
	case CW_ADMIT_WHO_RESERVE:
		snprintf(buf, len, "the best-effort reserve");
		break;
	default:
		snprintf(buf, len, "the new stream");
		break;
	}
}

/* The refused test of ref->part in words and units, after "prefix": which
 * stream would miss its deadline and why.  block and rate are the named
 * stream's (0: unknown); with says what changed ("with the new stream"). */
static void refusal_words(struct cw_admit_refusal *ref, const char *prefix, uint64_t block,
			  uint64_t rate, const char *with)
{
	const struct cw_admit_result *res = &ref->part.result;
	const struct cw_task *t = &ref->task;
	char who[CW_NAME_MAX + 64], c[CW_UNITS_BUF], per[CW_UNITS_BUF], b[CW_UNITS_BUF];
	char r[CW_UNITS_BUF], l[CW_UNITS_BUF], need[CW_UNITS_BUF];

	who_text(ref, who, sizeof(who));
	cw_units_format_duration3(t->service_ns, c);
	cw_units_format_duration3(t->period_ns, per);
	if (res->why == CW_ADMIT_UTILIZATION && ref->who != CW_ADMIT_WHO_ALL) {
		refuse(ref, "%sone %s%srequest of %s takes %s, longer than the %s between its "
		       "requests on this disk%s%s (condition (1): C > T)", prefix,
		       block ? cw_units_format_size(block, b) : "", block ? " " : "", who, c, per,
		       rate ? " at " : "", rate ? cw_units_format_rate(rate, r) : "");
	} else if (res->why == CW_ADMIT_UTILIZATION) {
		refuse(ref, "%sits streams %s would keep it busy %.1f%% of the time "
		       "(condition (1): more than 100%%)", prefix, with, 100 * res->utilization);
	} else if (res->why == CW_ADMIT_BLOCKING) {
		refuse(ref, "%sa request of %s takes up to %s; started just before the requests "
		       "of the streams with shorter periods come, it leaves them %s of disk work "
		       "to do within %s, %s too much: one would miss its deadline (condition (2))",
		       prefix, who, c, cw_units_format_duration3(res->fail_need_ns, need),
		       cw_units_format_duration3(res->fail_l_ns, l),
		       cw_units_format_duration3(res->fail_need_ns - res->fail_l_ns, per));
	} else if (res->why == CW_ADMIT_DEMAND && ref->who != CW_ADMIT_WHO_ALL) {
		refuse(ref, "%sone %s%srequest of %s takes %s, longer than the %s within which "
		       "it is due%s%s (C > D)", prefix,
		       block ? cw_units_format_size(block, b) : "", block ? " " : "", who, c,
		       cw_units_format_duration3(res->fail_l_ns, l),
		       rate ? " at " : "", rate ? cw_units_format_rate(rate, r) : "");
	} else if (res->why == CW_ADMIT_DEMAND) {
		refuse(ref, "%sits streams %s could ask for %s of disk work due within %s, %s "
		       "too much: one would miss its deadline (the demand of requests due "
		       "sooner than the stream's next one on this disk)", prefix, with,
		       cw_units_format_duration3(res->fail_need_ns, need),
		       cw_units_format_duration3(res->fail_l_ns, l),
		       cw_units_format_duration3(res->fail_need_ns - res->fail_l_ns, per));
	} else {
		refuse(ref, "%s%s", prefix, res->reason);
	}
}

/* ---- admitting ---- */

/* A request checked and its range laid out, with each disk's tasks (and
 * their owners) and reserve: all that planning it at some rate needs. */
struct prepared {
	struct range_layout rl;
	struct cw_admit_disk *ad;
	struct cw_task **tasks;
	const struct cw_admit_resv ***owner;
	struct cw_part_info pi;
	uint64_t end;
	struct cw_admit_qos q;		/* bandwidth set by each plan */
	/* The host's model and what the streams admitted need of it; NULL
	 * when the host is not asked (no model; a stream booked again). */
	const struct cw_host_model *host;
	uint64_t host_others_ps;
};

static void prepared_done(struct prepared *p)
{
	for (size_t i = 0; p->tasks && i < p->rl.n_disks; i++)
		free(p->tasks[i]);
	for (size_t i = 0; p->owner && i < p->rl.n_disks; i++)
		free(p->owner[i]);
	free(p->tasks);
	free(p->owner);
	free(p->ad);
	range_layout_done(&p->rl);
}

/* The tasks, owners and reserve of every disk of p->rl that has a model. */
static int prepare_disks(const struct cw_admit_state *st, struct prepared *p)
{
	size_t n = p->rl.n_disks ? p->rl.n_disks : 1;

	p->ad = calloc(n, sizeof(*p->ad));
	p->tasks = calloc(n, sizeof(*p->tasks));
	p->owner = calloc(n, sizeof(*p->owner));
	if (!p->ad || !p->tasks || !p->owner)
		return -ENOMEM;
	for (size_t i = 0; i < p->rl.n_disks; i++) {
		const struct dstate *d = st->disks[p->rl.disks[i].id];
		int r;

		if (!d)
			continue;	/* no block of the range is on it */
		r = disk_tasks(st, d->id, &p->tasks[i], &p->owner[i], &p->ad[i].n_tasks);
		if (r < 0)
			return r;
		p->ad[i].model = &d->model;
		p->ad[i].tasks = p->tasks[i];
		/* Streams never take the room of best-effort I/O (admit.h). */
		p->ad[i].be_reserve = d->plan.be_reserve;
	}
	return 0;
}

static uint64_t host_need(const struct cw_admit_state *st)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < st->n_resvs; i++) {
		uint64_t d = cw_host_demand_ps(&st->host, st->resvs[i]->rate_bps,
					       st->resvs[i]->block_bytes);

		sum = d > UINT64_MAX - sum ? UINT64_MAX : sum + d;
	}
	return sum;
}

/* A new stream is tested against the host too. */
static void prepare_host(const struct cw_admit_state *st, struct prepared *p)
{
	p->host = cw_host_model_none(&st->host) ? NULL : &st->host;
	p->host_others_ps = p->host ? host_need(st) : 0;
}

/* Everything of req but its rate, checked; the range laid out. */
static int prepare(struct cw_admit_state *st, const struct cw_admit_request *req,
		   struct prepared *p, struct cw_admit_refusal *ref)
{
	int64_t now = st->o.clock_ns();
	struct cw_part *part;
	char a[CW_UNITS_BUF], b[CW_UNITS_BUF];
	int r;

	if (!req || !req->part) {
		refuse(ref, "no partition named");
		return -EINVAL;
	}
	r = cw_part_lookup(st->pool, req->part, &part);
	if (r == -ENOENT)
		refuse(ref, "no partition \"%s\"", req->part);
	if (r == 0)
		r = cw_part_info(part, &p->pi);
	if (r < 0)
		return r;
	p->end = req->range_end_bytes ? req->range_end_bytes : p->pi.size_bytes;
	if (req->block_bytes == 0) {
		refuse(ref, "the block size must be positive");
		return -EINVAL;
	}
	if (req->range_start_bytes >= p->end || p->end > p->pi.size_bytes) {
		refuse(ref, "range %" PRIu64 ":%" PRIu64 " is not inside partition %s (%" PRIu64
		       " bytes)", req->range_start_bytes, p->end, p->pi.name, p->pi.size_bytes);
		return -EINVAL;
	}
	if (req->block_bytes > p->end - req->range_start_bytes) {
		refuse(ref, "a block of %s is larger than %s (%s)",
		       cw_units_format_size(req->block_bytes, a),
		       req->range_start_bytes || req->range_end_bytes ? "the range reserved" :
		       "the partition", cw_units_format_size(p->end - req->range_start_bytes, b));
		return -EINVAL;
	}
	if (req->start_in_ns < 0 || req->duration_ns < 0 ||
	    req->start_in_ns > (INT64_MAX - now) / 2 || req->duration_ns > (INT64_MAX - now) / 2) {
		refuse(ref, "start or duration out of range");
		return -EINVAL;
	}
	r = range_layout(st, part, req->range_start_bytes, p->end, &p->rl, ref);
	if (r < 0) {
		if (ref && !ref->reason[0])
			refuse(ref, "mapping the range: %s", strerror(-r));
		return r;
	}
	r = prepare_disks(st, p);
	if (r < 0)
		return r;
	if (!cw_admit_due_name(req->due)) {
		refuse(ref, "unknown deadline rule");
		return -EINVAL;
	}
	prepare_host(st, p);
	p->q = (struct cw_admit_qos){ .block_bytes = req->block_bytes, .due = req->due };
	if (req->start_in_ns || req->duration_ns) {
		p->q.span_start_ns = now + req->start_in_ns;
		p->q.span_end_ns = req->duration_ns ? p->q.span_start_ns + req->duration_ns : 0;
	}
	return 0;
}

/* prepare(), and with req->move_id each block of the range also where
 * that move puts it (none if the move is over). */
static int prepare_req(struct cw_admit_state *st, const struct cw_admit_request *req,
		       struct prepared *p, struct cw_admit_refusal *ref)
{
	struct cw_part *part;
	int r = prepare(st, req, p, ref);

	if (r < 0 || !req->move_id)
		return r;
	r = cw_part_lookup(st->pool, req->part, &part);
	if (r == 0)
		r = range_layout_move(st, part, req->move_id, req->range_start_bytes, &p->rl, ref);
	return r;
}

/* A stream of block-byte requests on disk id alone, anywhere on it. */
static int prepare_disk(struct cw_admit_state *st, uint32_t id, uint64_t block,
			struct prepared *p, struct cw_admit_refusal *ref)
{
	const struct dstate *d = id <= CW_DISKS_MAX ? st->disks[id] : NULL;
	size_t n, at = SIZE_MAX;
	int r;

	if (!d)
		return -ENOENT;
	if (block == 0 || block > d->model.capacity_bytes) {
		refuse(ref, "the block size must be positive and fit on disk %s", d->name);
		return -EINVAL;
	}
	r = cw_disk_list(st->pool, &p->rl.disks, &p->rl.n_disks);
	if (r < 0)
		return r;
	for (size_t i = 0; i < p->rl.n_disks; i++)
		if (p->rl.disks[i].id == id)
			at = i;
	if (at == SIZE_MAX)
		return -ENOENT;
	n = (size_t)((block + st->block - 1) / st->block);
	p->rl.disk_idx = calloc(n, sizeof(*p->rl.disk_idx));
	if (!p->rl.disk_idx)
		return -ENOMEM;
	for (size_t k = 0; k < n; k++)
		p->rl.disk_idx[k] = (uint32_t)at;
	p->rl.l = (struct cw_admit_layout){ .pblock_bytes = st->block, .n_pblocks = n,
					    .disk = p->rl.disk_idx, .range_bytes = block };
	p->q = (struct cw_admit_qos){ .block_bytes = block };
	prepare_host(st, p);
	return prepare_disks(st, p);
}

static int plan_at(const struct prepared *p, uint64_t rate, struct cw_admit_plan *plan)
{
	struct cw_admit_qos q = p->q;
	int r;

	q.bandwidth_bps = rate;
	cw_admit_plan_done(plan);
	r = cw_admit_plan(&q, &p->rl.l, p->ad, p->rl.n_disks, plan);
	if (r == 0 && p->host)
		r = cw_admit_plan_host(plan, &q, p->host, p->host_others_ps);
	return r;
}

/* The host refused what every disk admitted: no disk, the new stream. */
static void refusal_host(const struct prepared *p, const struct cw_admit_plan *plan,
			 struct cw_admit_refusal *ref)
{
	char words[CW_ADMIT_REASON_MAX + 64];

	ref->who = CW_ADMIT_WHO_NEW;
	ref->part.result.why = CW_ADMIT_HOST;
	ref->host = plan->host;
	cw_host_result_words(p->host, &plan->host, words, sizeof(words));
	refuse(ref, "refused for the host: %s", words);
}

/* Fills ref from plan's refused part, for the stream p asked at rate. */
static void refusal_of_plan(const struct prepared *p, const struct cw_admit_plan *plan,
			    uint64_t rate, struct cw_admit_refusal *ref)
{
	const struct cw_admit_part *pt;
	const struct cw_disk_info *d;
	size_t f;
	const struct cw_admit_resv *owner = NULL;
	const struct cw_task *task;
	uint64_t block = p->q.block_bytes;
	char prefix[CW_NAME_MAX + 32];

	if (!ref)
		return;
	memset(ref, 0, sizeof(*ref));
	if (plan->host.refused) {
		refusal_host(p, plan, ref);
		return;
	}
	pt = &plan->parts[plan->failed_part];
	d = &p->rl.disks[pt->disk];
	f = pt->fail_disk_task;
	task = &pt->task;
	ref->disk_id = d->id;
	snprintf(ref->disk, sizeof(ref->disk), "%s", d->name);
	ref->part = *pt;
	ref->part.result.reason[sizeof(ref->part.result.reason) - 1] = '\0';
	if (f == CW_ADMIT_FAIL_RESERVE) {
		task = &p->ad[pt->disk].be_reserve;
		block = rate = 0;
	} else if (f == CW_ADMIT_FAIL_ALL) {
		task = NULL;
	} else if (f != CW_ADMIT_FAIL_SELF && f < p->ad[pt->disk].n_tasks) {
		owner = p->owner[pt->disk][f];
		task = &p->tasks[pt->disk][f];
		block = owner->block_bytes;
		rate = owner->rate_bps;
	}
	refusal_who(ref, f, owner, task);
	snprintf(prefix, sizeof(prefix), "refused on disk %s: ", d->name);
	refusal_words(ref, prefix, block, rate, "with the new stream");
}

/* The largest rate at which p is admitted (0: none) by bisection, and the
 * plan refusing one byte per second more (none when even a period of
 * 1 ns fits). */
static int largest_rate(const struct prepared *p, uint64_t *ret, struct cw_admit_plan *refused)
{
	unsigned __int128 top = (unsigned __int128)p->q.block_bytes * CW_NS_PER_S;
	uint64_t lo = 0, hi = top >= INT64_MAX ? INT64_MAX : (uint64_t)top + 1;
	_cleanup_(cw_admit_plan_done) struct cw_admit_plan plan = { 0 };

	/* lo is admitted (0: nothing asked), hi is not (or past the top). */
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		int r = plan_at(p, mid, &plan);

		if (r < 0 && r != -ERANGE)	/* ERANGE: a period too long to count */
			return r;
		if (r == 0 && plan.admitted)
			lo = mid;
		else
			hi = mid;
	}
	*ret = lo;
	if (refused && lo < top) {
		int r = plan_at(p, lo + 1, refused);

		if (r < 0 && r != -ERANGE)
			return r;
	}
	return 0;
}

/* The largest rate that fits, in ref and in its sentence. */
static int refusal_max_rate(const struct prepared *p, struct cw_admit_refusal *ref)
{
	char b[CW_UNITS_BUF], m[CW_UNITS_BUF];
	size_t len;
	uint64_t max;
	int r;

	if (!ref)
		return 0;
	r = largest_rate(p, &max, NULL);
	if (r < 0)
		return r;
	ref->has_max_rate = true;
	ref->max_rate_bps = max;
	len = strlen(ref->reason);
	cw_units_format_size(p->q.block_bytes, b);
	if (max)
		snprintf(ref->reason + len, sizeof(ref->reason) - len, "; the largest rate that "
			 "fits with %s blocks is %s", b,
			 cw_units_format_rate(cw_units_floor_rate(max), m));
	else
		snprintf(ref->reason + len, sizeof(ref->reason) - len, "; no rate fits with %s "
			 "blocks", b);
	return 0;
}

/* The headroom of a prepared stream; r: how preparing it went. */
static int headroom(const struct prepared *p, int r, uint64_t *ret, struct cw_admit_refusal *ref)
{
	_cleanup_(cw_admit_plan_done) struct cw_admit_plan refused = { 0 };

	if (r == 0)
		r = largest_rate(p, ret, &refused);
	if (r == 0 && refused.n_parts && !refused.admitted)
		refusal_of_plan(p, &refused, *ret + 1, ref);
	return r;
}

int cw_admit_state_headroom(struct cw_admit_state *st, const struct cw_admit_request *req,
			    uint64_t *ret_rate_bps, struct cw_admit_refusal *ref)
{
	_cleanup_(prepared_done) struct prepared p = { 0 };

	if (ref)
		memset(ref, 0, sizeof(*ref));
	return headroom(&p, prepare_req(st, req, &p, ref), ret_rate_bps, ref);
}

int cw_admit_state_disk_headroom(struct cw_admit_state *st, uint32_t id, uint64_t block,
				 uint64_t *ret_rate_bps, struct cw_admit_refusal *ref)
{
	_cleanup_(prepared_done) struct prepared p = { 0 };

	if (ref)
		memset(ref, 0, sizeof(*ref));
	return headroom(&p, prepare_disk(st, id, block, &p, ref), ret_rate_bps, ref);
}

/* Plans p at rate and tests it: -EBUSY with plan->admitted false when
 * the disks' streams refuse it (the caller says why), -EBUSY with ref when
 * the exports' best-effort reservations would lose their room, -errno. */
static int plan_tested(const struct cw_admit_state *st, const struct prepared *p, uint64_t rate,
		       struct cw_admit_plan *plan, struct cw_admit_refusal *ref)
{
	int r = plan_at(p, rate, plan);

	if (r < 0) {
		refuse(ref, "%s", plan->reason[0] ? plan->reason : strerror(-r));
		return r;
	}
	if (!plan->admitted)
		return -EBUSY;
	for (size_t i = 0; i < plan->n_parts; i++) {
		size_t k = plan->parts[i].disk;

		r = be_streams_check(st, p->rl.disks[k].id, p->ad[k].tasks, p->ad[k].n_tasks,
				     &plan->parts[i].task, ref);
		if (r < 0)
			return r;
	}
	return 0;
}

int cw_admit_state_reserve(struct cw_admit_state *st, const struct cw_admit_request *req,
			   const struct cw_admit_resv **ret_resv, struct cw_admit_refusal *ref,
			   struct cw_admit_changes *changes)
{
	_cleanup_(prepared_done) struct prepared p = { 0 };
	_cleanup_(cw_admit_plan_done) struct cw_admit_plan plan = { 0 };
	struct cw_admit_resv *rv = NULL;
	int r;

	if (ref)
		memset(ref, 0, sizeof(*ref));
	if (ret_resv)
		*ret_resv = NULL;
	r = prepare_req(st, req, &p, ref);
	if (r < 0)
		return r;
	if (req->rate_bps == 0) {
		refuse(ref, "the rate must be positive");
		return -EINVAL;
	}
	if (!req->dry_run && st->n_resvs >= RESV_MAX) {
		refuse(ref, "too many reservations (%d)", RESV_MAX);
		return -ENOSPC;
	}
	r = plan_tested(st, &p, req->rate_bps, &plan, ref);
	if (r == -EBUSY && !plan.admitted) {
		refusal_of_plan(&p, &plan, req->rate_bps, ref);
		r = refusal_max_rate(&p, ref);
		if (r == 0 && p.rl.l.alt_disk)
			refusal_prefix(ref, "with its blocks on both sides of move %" PRIu64
				       " (it takes them to other disks): ", req->move_id);
		return r < 0 ? r : -EBUSY;
	}
	if (r == -EBUSY && p.rl.l.alt_disk)
		refusal_prefix(ref, "with its blocks on both sides of move %" PRIu64 ": ",
			       req->move_id);
	if (r < 0)
		return r;
	if (req->dry_run)
		return 0;

	rv = resv_new();
	if (!rv || !(rv->parts = parts_new(plan.n_parts))) {
		resv_free(rv);
		return -ENOMEM;
	}
	snprintf(rv->part, sizeof(rv->part), "%s", p.pi.name);
	rv->part_id = p.pi.id;
	rv->persistent = req->persistent;
	if (!req->persistent && req->export_name)
		snprintf(rv->export_name, sizeof(rv->export_name), "%s", req->export_name);
	rv->rate_bps = req->rate_bps;
	rv->block_bytes = req->block_bytes;
	rv->range_start_bytes = req->range_start_bytes;
	rv->range_end_bytes = p.end;
	rv->span_start_ns = p.q.span_start_ns;
	rv->span_end_ns = p.q.span_end_ns;
	rv->period_ns = plan.stream_period_ns;
	rv->due = req->due;
	rv->move_id = p.rl.l.alt_disk ? req->move_id : 0;
	rv->n_parts = plan.n_parts;
	for (size_t i = 0; i < plan.n_parts; i++)
		rv->parts[i] = (struct cw_admit_resv_part){
			.disk_id = p.rl.disks[plan.parts[i].disk].id,
			.task = plan.parts[i].task,
			.requests = plan.parts[i].requests,
			.stride = plan.parts[i].stride,
		};
	resv_set_lead(rv);
	/* The database first (it gives the id), then memory. */
	if (rv->persistent) {
		r = resv_store(st, rv);
		if (r < 0) {
			const struct cw_error *e = cw_pool_last_error(st->pool);

			refuse(ref, "storing the reservation: %s",
			       e && e->code == r && e->msg[0] ? e->msg : strerror(-r));
			resv_free(rv);
			return r;
		}
	}
	rv->stream = ++st->next_stream;
	r = resv_append(st, rv);
	if (r < 0) {
		if (rv->persistent)
			(void)cw_resv_remove(st->pool, rv->id);
		resv_free(rv);
		return r;
	}
	emit(st, &(struct cw_admit_event){ .kind = CW_ADMIT_EV_RESV_ADDED, .resv = rv });
	r = replan_resv(st, rv, changes);
	if (ret_resv)
		*ret_resv = rv;
	return r;
}

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
	refusal_of_plan(p, plan, rv->rate_bps, ref);
	if (ref->who == CW_ADMIT_WHO_NEW) {
		refusal_who(ref, ref->part.fail_disk_task, rv, &ref->part.task);
		snprintf(prefix, sizeof(prefix), "refused on disk %s: ", ref->disk);
		refusal_words(ref, prefix, rv->block_bytes, rv->rate_bps,
			      "where its blocks would be");
	}
	memcpy(was, ref->reason, sizeof(was));
	if (rv->persistent)
		snprintf(prefix, sizeof(prefix), "reservation %" PRIu64, rv->id);
	else
		snprintf(prefix, sizeof(prefix), "the start-up stream of export %s",
			 rv->export_name);
	refuse(ref, "%s, %s would be %s", with, prefix, was);
}

/* The plan of rv's range as p lays it out, tested against the others on
 * each disk; on refusal ref says so, after "with": "WITH, reservation N
 * would be refused on disk D: ...". */
static int plan_moved(const struct cw_admit_state *st, struct prepared *p,
		      const struct cw_admit_resv *rv, const char *with, struct cw_admit_plan *plan,
		      struct cw_admit_refusal *ref)
{
	int r;

	p->q.span_start_ns = rv->span_start_ns;
	p->q.span_end_ns = rv->span_end_ns;
	prepared_drop_owner(p, rv);
	r = plan_tested(st, p, rv->rate_bps, plan, ref);
	if (r == -EBUSY && !plan->admitted)
		refusal_moved(p, plan, rv, with, ref);
	return r;
}

/* Replaces rv's parts (owned from now on) and its move: the pool's copy
 * first, then memory under the lock (the old array stays readable until
 * rv goes), then every disk whose task set changed gets its plan again. */
static int rebook(struct cw_admit_state *st, struct cw_admit_resv *rv, uint64_t move_id,
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
		_cleanup_free_ struct cw_resv_disk *d = parts_stored(st, parts, n);

		r = d ? cw_resv_rebook(st->pool, rv->id, move_id, d, n) : -ENOMEM;
		if (r < 0) {
			const struct cw_error *e = cw_pool_last_error(st->pool);

			refuse(ref, "storing reservation %" PRIu64 ": %s", rv->id,
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
	__atomic_store_n(&rv->parts, parts, __ATOMIC_RELEASE);
	rv->n_parts = n;
	rv->move_id = move_id;
	resv_set_lead(rv);
	pthread_mutex_unlock(&st->lock);
	for (uint32_t id = 1; id <= CW_DISKS_MAX && r == 0; id++)
		if (disk[id])
			r = replan(st, id, changes);
	return r;
}

/* The parts of an admitted plan, as a reservation keeps them. */
static struct cw_admit_resv_part *plan_parts(const struct prepared *p,
					     const struct cw_admit_plan *plan)
{
	struct cw_admit_resv_part *parts = parts_new(plan->n_parts);

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
static int prepare_resv(struct cw_admit_state *st, const struct cw_admit_resv *rv,
			uint64_t move_id, const uint32_t *ids, size_t n, struct prepared *p,
			struct cw_admit_refusal *ref)
{
	struct cw_admit_request req = {
		.part = rv->part, .rate_bps = rv->rate_bps, .block_bytes = rv->block_bytes,
		.range_start_bytes = rv->range_start_bytes, .range_end_bytes = rv->range_end_bytes,
		.dry_run = true, .due = rv->due,
	};
	struct cw_part *part;
	int r = prepare(st, &req, p, ref);

	if (r == 0 && move_id)
		r = cw_part_lookup(st->pool, rv->part, &part);
	if (r == 0 && move_id)
		r = range_layout_move(st, part, move_id, rv->range_start_bytes, &p->rl, ref);
	if (r == 0)
		r = range_layout_copies(st, &p->rl, ids, n, ref);
	return r;
}

/* The same with the cache copies rv is booked for. */
static int prepare_resv_as(struct cw_admit_state *st, const struct cw_admit_resv *rv,
			   uint64_t move_id, struct prepared *p, struct cw_admit_refusal *ref)
{
	uint32_t ids[CW_DISKS_MAX];

	return prepare_resv(st, rv, move_id, ids, resv_copies(rv, ids), p, ref);
}

int cw_admit_state_move_book(struct cw_admit_state *st, uint64_t stream, uint64_t move_id,
			     struct cw_admit_refusal *ref, struct cw_admit_changes *changes)
{
	_cleanup_(prepared_done) struct prepared p = { 0 };
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
		refuse(ref, "no unfinished move %" PRIu64, move_id);
	if (r < 0)
		return r;
	if (mi.part_id != rv->part_id) {
		refuse(ref, "move %" PRIu64 " moves partition %s, not %s", move_id, mi.part,
		       rv->part);
		return -EINVAL;
	}
	r = prepare_resv_as(st, rv, move_id, &p, ref);
	snprintf(with, sizeof(with), "with its blocks on both sides of move %" PRIu64, move_id);
	if (r == 0)
		r = plan_moved(st, &p, rv, with, &plan, ref);
	if (r < 0)
		return r;
	return rebook(st, rv, move_id, plan_parts(&p, &plan), plan.n_parts, ref, changes);
}

/* Books rv again without a test, for move_id (0: none) and with copies
 * on disks ids[0..n): a booking that on every disk asks at most what
 * rv's does now. */
static int rebook_lighter(struct cw_admit_state *st, struct cw_admit_resv *rv, uint64_t move_id,
			  const uint32_t *ids, size_t n, struct cw_admit_changes *changes)
{
	_cleanup_(prepared_done) struct prepared p = { 0 };
	_cleanup_(cw_admit_plan_done) struct cw_admit_plan plan = { 0 };
	int r = prepare_resv(st, rv, move_id, ids, n, &p, NULL);

	if (r == 0) {
		p.q.span_start_ns = rv->span_start_ns;
		p.q.span_end_ns = rv->span_end_ns;
		r = plan_at(&p, rv->rate_bps, &plan);
	}
	if (r < 0)
		return r;
	return rebook(st, rv, move_id, plan_parts(&p, &plan), plan.n_parts, NULL, changes);
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
	return rebook_lighter(st, rv, 0, ids, resv_copies(rv, ids), changes);
}

/* ---- a partition's SSD cache (rule 2) ---- */

static bool id_in(const uint32_t *ids, size_t n, uint32_t id)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

static void set_cache_refused(struct cw_admit_state *st, struct cw_admit_resv *rv,
			      const char *why)
{
	pthread_mutex_lock(&st->lock);
	snprintf(rv->cache_refused, sizeof(rv->cache_refused), "%s", why);
	rv->cache_refused_new = why[0] != '\0';
	pthread_mutex_unlock(&st->lock);
}

/* Tests rv with copies on disks want[0..nw) and books it so if every disk
 * admits it; else books it with keep[0..nk) (those it has that the cache
 * still has) and says why in *ref.  1 when refused, 0 when booked. */
static int cache_book(struct cw_admit_state *st, struct cw_admit_resv *rv, const uint32_t *want,
		      size_t nw, const uint32_t *keep, size_t nk, size_t nh,
		      struct cw_admit_refusal *ref, struct cw_admit_changes *changes)
{
	_cleanup_(prepared_done) struct prepared p = { 0 };
	_cleanup_(cw_admit_plan_done) struct cw_admit_plan plan = { 0 };
	char with[64 + CW_DISKS_MAX * (CW_NAME_MAX + 2)] = "with its blocks cached on disk";
	int r;

	memset(ref, 0, sizeof(*ref));
	for (size_t i = 0; i < nw; i++) {
		size_t len = strlen(with);

		snprintf(with + len, sizeof(with) - len, "%s %s", i ? "," : "",
			 st->disks[want[i]] ? st->disks[want[i]]->name : "?");
	}
	r = prepare_resv(st, rv, rv->move_id, want, nw, &p, ref);
	if (r == 0)
		r = plan_moved(st, &p, rv, with, &plan, ref);
	if (r == 0)
		return rebook(st, rv, rv->move_id, plan_parts(&p, &plan), plan.n_parts, ref,
			      changes);
	if (r != -EBUSY && r != -ENODEV)
		return r;
	if (!ref->reason[0])
		refuse(ref, "%s, it could not be booked: %s", with, strerror(-r));
	r = nk == nh ? 0 : rebook_lighter(st, rv, rv->move_id, keep, nk, changes);
	return r < 0 ? r : 1;
}

int cw_admit_state_cache_sync(struct cw_admit_state *st, const char *part, bool retry,
			      struct cw_admit_changes *changes)
{
	int n = 0;

	if (!st)
		return -EINVAL;
	for (size_t i = 0; i < st->n_resvs; i++) {
		struct cw_admit_resv *rv = st->resvs[i];
		uint32_t want[CW_DISKS_MAX], have[CW_DISKS_MAX], keep[CW_DISKS_MAX];
		size_t nw = 0, nh = resv_copies(rv, have), nk = 0;
		struct cw_admit_refusal ref;
		struct cw_part *pt;
		bool covered = true;
		int r = 0;

		if (part && strcmp(rv->part, part) != 0)
			continue;
		if (rv->cache_refused_new) {
			pthread_mutex_lock(&st->lock);
			rv->cache_refused_new = false;
			pthread_mutex_unlock(&st->lock);
		}
		if (cw_part_lookup(st->pool, rv->part, &pt) == 0)
			nw = cw_part_cache_disks(pt, want);
		for (size_t j = 0; j < nh; j++)
			if (id_in(want, nw, have[j]))
				keep[nk++] = have[j];
		for (size_t j = 0; j < nw; j++)
			covered &= id_in(have, nh, want[j]);
		if (covered || (!retry && rv->cache_refused[0])) {
			/* Copies the cache can no longer have are not booked. */
			if (nk != nh)
				r = rebook_lighter(st, rv, rv->move_id, keep, nk, changes);
			if (r == 0 && covered && rv->cache_refused[0])
				set_cache_refused(st, rv, "");
			if (r < 0)
				return r;
			continue;
		}
		r = cache_book(st, rv, want, nw, keep, nk, nh, &ref, changes);
		if (r < 0)
			return r;
		if (strcmp(rv->cache_refused, r ? ref.reason : "") != 0) {
			n += r;
			set_cache_refused(st, rv, r ? ref.reason : "");
		}
	}
	return n;
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
	_cleanup_(prepared_done) struct prepared p = { 0 };
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
			refuse(ref, "partition block %" PRIu64 " would be on disk %" PRIu32
			       ", which has no model", b, id);
			return -ENODEV;
		}
		p.rl.disk_idx[k] = idx_of[id];
	}
	p.rl.l.disk_off = NULL;
	return plan_moved(st, &p, rv, "with its blocks where the move puts them", &plan, ref);
}

int cw_admit_state_release(struct cw_admit_state *st, uint64_t id,
			   struct cw_admit_changes *changes)
{
	struct cw_admit_resv *rv = NULL;
	size_t i;
	int r;

	for (i = 0; i < st->n_resvs; i++)
		if (st->resvs[i]->persistent && st->resvs[i]->id == id) {
			rv = st->resvs[i];
			break;
		}
	if (!rv)
		return -ENOENT;
	r = cw_resv_remove(st->pool, id);
	/* Not there is as good as removed: memory follows the database. */
	if (r < 0 && r != -ENOENT)
		return r;
	pthread_mutex_lock(&st->lock);
	memmove(&st->resvs[i], &st->resvs[i + 1], (st->n_resvs - i - 1) * sizeof(*st->resvs));
	st->n_resvs--;
	pthread_mutex_unlock(&st->lock);
	emit(st, &(struct cw_admit_event){ .kind = CW_ADMIT_EV_RESV_RELEASED, .resv = rv });
	r = replan_resv(st, rv, changes);
	resv_free(rv);
	return r;
}

/* ---- models ---- */

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
	_cleanup_(range_layout_done) struct range_layout rl = { 0 };
	_cleanup_(cw_admit_plan_done) struct cw_admit_plan plan = { 0 };
	_cleanup_free_ struct cw_admit_disk *ad = NULL;
	struct cw_admit_qos q = { .bandwidth_bps = rv->rate_bps, .block_bytes = rv->block_bytes,
				  .due = rv->due };
	uint32_t ids[CW_DISKS_MAX];
	struct cw_part *part;
	int r;

	r = cw_part_lookup(st->pool, rv->part, &part);
	if (r == 0)
		r = range_layout(st, part, rv->range_start_bytes, rv->range_end_bytes, &rl, NULL);
	if (r == 0)
		r = range_layout_move(st, part, rv->move_id, rv->range_start_bytes, &rl, NULL);
	if (r == 0)
		r = range_layout_copies(st, &rl, ids, resv_copies(rv, ids), NULL);
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
	r = disk_tasks(st, id, &tasks, &owner, &n);
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
			refusal_who(ref, fail, o, fail < n ? &tasks[fail] : fail ==
				    CW_ADMIT_FAIL_RESERVE ? &reserve : NULL);
			who_text(ref, who, sizeof(who));
			if (o)
				snprintf(prefix, sizeof(prefix), "disk %s: with the new model, %s (on "
					 "%s) would no longer be guaranteed: ", d->name, who, o->part);
			else if (fail == CW_ADMIT_FAIL_RESERVE)
				snprintf(prefix, sizeof(prefix), "disk %s: with the new model, its "
					 "streams would leave no room for best effort: ", d->name);
			else
				snprintf(prefix, sizeof(prefix), "disk %s: ", d->name);
			refusal_words(ref, prefix, o ? o->block_bytes : 0, o ? o->rate_bps : 0,
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
				__atomic_store_n(&rv->parts[j].task.service_ns,
						 tasks[i].service_ns, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&st->lock);
	if (ret_taken)
		*ret_taken = true;
	r = replan(st, id, changes);
	/* the exports' shares there are in the model's costs */
	return r < 0 ? r : be_refresh(st, NULL, id);
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

/* ---- disks ---- */

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
	r = disk_load(st, &info);
	if (r < 0)
		return r;
	return replan(st, id, changes);
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
					refuse(ref, "disk %s serves reservation %" PRIu64, d->name,
					       rv->id);
				else
					refuse(ref, "disk %s serves the start-up reservation of "
					       "export %s", d->name, rv->export_name);
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

size_t cw_admit_state_disk_streams(const struct cw_admit_state *st, uint32_t id)
{
	size_t n = 0;

	for (size_t i = 0; i < st->n_resvs; i++)
		for (size_t j = 0; j < st->resvs[i]->n_parts; j++)
			n += st->resvs[i]->parts[j].disk_id == id;
	return n;
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
		v[i].parts = parts_new(v[i].n_parts);
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

/* ---- life ---- */

int cw_admit_state_new(struct cw_pool *pool, const struct cw_admit_state_opts *opts,
		       struct cw_admit_state **ret)
{
	struct cw_admit_state *st;
	_cleanup_free_ struct cw_disk_info *disks = NULL;
	cw_admit_listener_fn listener;
	size_t n = 0;
	int r;

	if (!pool || !ret)
		return -EINVAL;
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	if (opts)
		st->o = *opts;
	else
		cw_admit_state_opts_init(&st->o);
	if (!st->o.clock_ns)
		st->o.clock_ns = cw_now_ns;
	if (!st->o.wall_ns)
		st->o.wall_ns = wall_now;
	st->pool = pool;
	st->block = cw_pool_block_size(pool);
	listener = st->o.listener;
	st->o.listener = NULL;	/* nothing is announced of what is loaded */
	pthread_mutex_init(&st->lock, NULL);
	r = cw_disk_list(pool, &disks, &n);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = disk_load(st, &disks[i]);
	if (r == 0)
		r = resvs_load(st);
	if (r == 0)
		r = bes_load(st);
	for (uint32_t id = 1; r == 0 && id <= CW_DISKS_MAX; id++)
		if (st->disks[id])
			r = replan(st, id, NULL);
	if (r < 0) {
		cw_admit_state_free(st);
		return r;
	}
	st->o.listener = listener;
	*ret = st;
	return 0;
}

void cw_admit_state_set_listener(struct cw_admit_state *st, cw_admit_listener_fn fn,
				 void *userdata)
{
	st->o.listener = fn;
	st->o.listener_data = userdata;
}

void cw_admit_state_free(struct cw_admit_state *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->n_resvs; i++)
		resv_free(st->resvs[i]);
	free(st->resvs);
	for (size_t i = 0; i < st->n_bes; i++)
		be_free(st->bes[i]);
	free(st->bes);
	for (size_t i = 0; i <= CW_DISKS_MAX; i++)
		free(st->disks[i]);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

/* ---- best effort between exports ---- */

#define BES_MAX 4096

static void be_free(struct cw_admit_be *be)
{
	if (!be)
		return;
	free(be->parts);
	free(be);
}

/* A rate as a share of a disk's time: rate (bytes or requests per second)
 * times share_ppm of it on the disk, in requests of bytes that each cost
 * cost_ns; rounded up.  -ERANGE beyond max. */
static int be_rate_ppm(uint64_t rate, bool iops, uint64_t bytes, int64_t cost_ns, uint32_t share,
		       uint64_t max, uint32_t *ret)
{
	unsigned __int128 num = (unsigned __int128)rate * share * (uint64_t)cost_ns;
	unsigned __int128 den = (unsigned __int128)1000 * CW_SCHED_PPM * (iops ? 1 : bytes);
	unsigned __int128 ppm = (num + den - 1) / den;

	if (ppm > max)
		return -ERANGE;
	*ret = (uint32_t)ppm;
	return 0;
}

/* The inverse, rounded down: the largest rate that takes at most ppm. */
static uint64_t be_ppm_rate(uint32_t ppm, bool iops, uint64_t bytes, int64_t cost_ns,
			    uint32_t share)
{
	unsigned __int128 num = (unsigned __int128)ppm * 1000 * CW_SCHED_PPM * (iops ? 1 : bytes);
	unsigned __int128 den = (unsigned __int128)share * (uint64_t)cost_ns;

	if (!den)
		return UINT64_MAX;
	num /= den;
	return num > INT64_MAX ? INT64_MAX : (uint64_t)num;
}

static int be_cost(const struct cw_model *m, bool iops, uint64_t piece, uint64_t *ret_bytes,
		   int64_t *ret_cost)
{
	*ret_bytes = iops ? CW_ADMIT_BE_IOPS_BYTES : piece;
	return cw_model_mean_ns(m, *ret_bytes, ret_cost);
}

/* share_ppm of the rates on the disk, or (spread) all of them, at most
 * CW_SCHED_SPREAD_MAX disks' worth. */
static int be_client(const struct cw_be_qos *q, const struct cw_model *m, uint64_t piece,
		     uint32_t share, bool spread, struct cw_sched_client *ret)
{
	struct cw_sched_client c = { .weight = q && q->weight ? q->weight : 1, .spread = spread };
	uint64_t max = (uint64_t)CW_SCHED_PPM * (spread ? CW_SCHED_SPREAD_MAX : 1);
	uint64_t bytes;
	int64_t cost;
	int r;

	if (!q || !m || !ret || !piece || share > CW_SCHED_PPM || q->weight > CW_BE_WEIGHT_MAX)
		return -EINVAL;
	if (q->reserve) {
		r = be_cost(m, q->reserve_iops, piece, &bytes, &cost);
		if (r == 0)
			r = be_rate_ppm(q->reserve, q->reserve_iops, bytes, cost, share, max,
					&c.resv_ppm);
		if (r < 0)
			return r;
	}
	if (q->limit) {
		r = be_cost(m, q->limit_iops, piece, &bytes, &cost);
		if (r == 0)
			r = be_rate_ppm(q->limit, q->limit_iops, bytes, cost, share, max,
					&c.limit_ppm);
		if (r == -ERANGE)
			c.limit_ppm = 0;	/* more than the disk: no limit there */
		else if (r < 0)
			return r;
		else if (!c.limit_ppm && share)
			c.limit_ppm = 1;
	}
	if (cw_sched_client_check(&c) < 0)
		return -EINVAL;
	*ret = c;
	return 0;
}

int cw_admit_be_client(const struct cw_be_qos *q, const struct cw_model *m, uint64_t piece,
		       uint32_t share, struct cw_sched_client *ret)
{
	return be_client(q, m, piece, share, false, ret);
}

/* The parts of an export's QoS: one client per disk its partition has
 * blocks on. */
static int be_parts(const struct cw_admit_state *st, struct cw_part *part,
		    const struct cw_be_qos *q, struct cw_admit_be *be, struct cw_admit_refusal *ref)
{
	uint64_t nb = cw_part_nblocks(part), count[CW_DISKS_MAX + 1] = { 0 };
	_cleanup_free_ uint32_t *ids = calloc(nb ? nb : 1, sizeof(*ids));
	size_t n = 0;
	int r;

	if (!ids)
		return -ENOMEM;
	r = nb ? cw_part_block_disks(part, 0, nb, ids) : 0;
	if (r < 0)
		return r;
	for (uint64_t b = 0; b < nb; b++)
		if (ids[b] <= CW_DISKS_MAX && count[ids[b]]++ == 0)
			n++;
	be->parts = calloc(n ? n : 1, sizeof(*be->parts));
	if (!be->parts)
		return -ENOMEM;
	for (uint32_t id = 1; id <= CW_DISKS_MAX; id++) {
		const struct dstate *d = st->disks[id];
		struct cw_admit_be_part *bp;
		char a[CW_UNITS_BUF];

		if (!count[id])
			continue;
		if (!d) {
			refuse(ref, "partition %s has blocks on disk %" PRIu32 ", which has no model",
			       be->part, id);
			return -ENODEV;
		}
		bp = &be->parts[be->n_parts++];
		bp->disk_id = id;
		bp->share_ppm = (uint32_t)CW_DIV_ROUND_UP(count[id] * CW_SCHED_PPM, nb);
		r = be_client(q, &d->model, d->plan.be_piece_bytes, bp->share_ppm, false,
			      &bp->client);
		if (r == 0)
			r = be_client(q, &d->model, d->plan.be_piece_bytes, CW_SCHED_PPM, true,
				      &bp->order);
		if (r == -ERANGE)
			refuse(ref, "disk %s: a reservation of %s is more than the whole disk", d->name,
			       cw_units_format_iorate(q->reserve, q->reserve_iops, a));
		else if (r == -EINVAL)
			refuse(ref, "disk %s: the limit is below the reservation", d->name);
		if (r < 0)
			return r == -ERANGE ? -EINVAL : r;
	}
	return 0;
}

/* The reservations of exports other than except on a disk, in ppm. */
static size_t be_others(const struct cw_admit_state *st, uint32_t disk_id, const char *except,
			uint32_t *ret)
{
	size_t n = 0;

	for (size_t i = 0; i < st->n_bes; i++) {
		if (except && !strcmp(st->bes[i]->export_name, except))
			continue;
		for (size_t j = 0; j < st->bes[i]->n_parts; j++)
			if (st->bes[i]->parts[j].disk_id == disk_id &&
			    st->bes[i]->parts[j].client.resv_ppm)
				ret[n++] = st->bes[i]->parts[j].client.resv_ppm;
	}
	return n;
}

static int be_capacity(const struct cw_admit_state *st, uint32_t disk_id, uint32_t *ret)
{
	_cleanup_free_ struct cw_task *tasks = NULL;
	size_t n;
	int r = disk_tasks(st, disk_id, &tasks, NULL, &n);

	return r < 0 ? r : cw_sched_be_capacity(tasks, n, ret);
}

static int be_streams_check(const struct cw_admit_state *st, uint32_t disk_id,
			    const struct cw_task *tasks, size_t n, const struct cw_task *extra,
			    struct cw_admit_refusal *ref)
{
	_cleanup_free_ struct cw_task *all = calloc(n + 1, sizeof(*all));
	_cleanup_free_ uint32_t *others = calloc(st->n_bes + 1, sizeof(*others));
	struct cw_sched_resv_verdict v;
	uint32_t cap;
	size_t k;
	int r;

	if (!all || !others)
		return -ENOMEM;
	if (n)
		memcpy(all, tasks, n * sizeof(*all));
	all[n] = *extra;
	k = be_others(st, disk_id, NULL, others);
	if (!k)
		return 0;
	r = cw_sched_be_capacity(all, n + 1, &cap);
	if (r == 0)
		r = cw_sched_resv_admit(others, k, 0, cap, &v);
	if (r < 0)
		return r;
	if (v.fits)
		return 0;
	if (ref) {
		ref->disk_id = disk_id;
		snprintf(ref->disk, sizeof(ref->disk), "%s", st->disks[disk_id]->name);
		refuse(ref, "disk %s: the stream would leave best effort %.2f%% of the disk, and "
		       "exports reserve %.2f%% of it", st->disks[disk_id]->name, cap / 1e4,
		       v.reserved_ppm / 1e4);
	}
	return -EBUSY;
}

static int be_find_idx(const struct cw_admit_state *st, const char *name, size_t *ret)
{
	for (size_t i = 0; i < st->n_bes; i++)
		if (!strcmp(st->bes[i]->export_name, name)) {
			*ret = i;
			return 0;
		}
	return -ENOENT;
}

/* Admits be's reservation on each of its disks; on refusal says what
 * would fit on every disk. */
static int be_admit(const struct cw_admit_state *st, const struct cw_admit_be *be,
		    struct cw_admit_refusal *ref)
{
	_cleanup_free_ uint32_t *others = calloc(st->n_bes + 1, sizeof(*others));
	uint64_t fits = UINT64_MAX;
	int refused = -1;
	char a[CW_UNITS_BUF], b[CW_UNITS_BUF];

	if (!others)
		return -ENOMEM;
	if (!be->qos.reserve)
		return 0;
	for (size_t i = 0; i < be->n_parts; i++) {
		const struct cw_admit_be_part *bp = &be->parts[i];
		const struct dstate *d = st->disks[bp->disk_id];
		struct cw_sched_resv_verdict v;
		uint64_t bytes = 0;
		int64_t cost = 0;
		uint32_t cap;
		size_t k = be_others(st, bp->disk_id, be->export_name, others);
		int r = be_capacity(st, bp->disk_id, &cap);

		if (r == 0)
			r = cw_sched_resv_admit(others, k, bp->client.resv_ppm, cap, &v);
		if (r == 0)
			r = be_cost(&d->model, be->qos.reserve_iops, d->plan.be_piece_bytes, &bytes,
				    &cost);
		if (r < 0)
			return r;
		fits = CW_MIN(fits, be_ppm_rate(v.free_ppm, be->qos.reserve_iops, bytes, cost,
						bp->share_ppm));
		if (!v.fits && refused < 0) {
			refused = (int)i;
			if (ref) {
				ref->disk_id = bp->disk_id;
				snprintf(ref->disk, sizeof(ref->disk), "%s", d->name);
			}
		}
	}
	if (refused < 0)
		return 0;
	{
		const struct cw_admit_be_part *bp = &be->parts[refused];
		struct cw_sched_resv_verdict v;
		uint32_t cap;
		size_t k = be_others(st, bp->disk_id, be->export_name, others);

		if (be_capacity(st, bp->disk_id, &cap) == 0 &&
		    cw_sched_resv_admit(others, k, bp->client.resv_ppm, cap, &v) == 0)
			refuse(ref, "export %s: a best-effort reservation of %s does not fit on disk "
			       "%s: it needs %.2f%% of the disk, best effort has %.2f%%, other exports "
			       "reserve %.2f%%; at most %s fits", be->export_name,
			       cw_units_format_iorate(be->qos.reserve, be->qos.reserve_iops, a),
			       st->disks[bp->disk_id]->name, bp->client.resv_ppm / 1e4,
			       v.capacity_ppm / 1e4, v.reserved_ppm / 1e4,
			       fits ? cw_units_format_iorate(fits, be->qos.reserve_iops, b) :
			       "nothing");
	}
	return -EBUSY;
}

static int be_build(const struct cw_admit_state *st, const char *export_name,
		    const char *part_name, const struct cw_be_qos *q, bool persistent,
		    struct cw_admit_be **ret, struct cw_admit_refusal *ref)
{
	struct cw_admit_be *be;
	struct cw_part_info pi;
	struct cw_part *part;
	int r;

	if (!export_name || !cw_client_name_valid(export_name)) {
		refuse(ref, "\"%s\" is not an export name", export_name ? export_name : "");
		return -EINVAL;
	}
	if (!part_name) {
		refuse(ref, "no partition named");
		return -EINVAL;
	}
	if (q->weight > CW_BE_WEIGHT_MAX) {
		refuse(ref, "weight %" PRIu32 " is out of range; expected 1 to %d", q->weight,
		       CW_BE_WEIGHT_MAX);
		return -EINVAL;
	}
	r = cw_part_lookup(st->pool, part_name, &part);
	if (r == -ENOENT)
		refuse(ref, "no partition \"%s\"", part_name);
	if (r == 0)
		r = cw_part_info(part, &pi);
	if (r < 0)
		return r;
	be = calloc(1, sizeof(*be));
	if (!be)
		return -ENOMEM;
	snprintf(be->export_name, sizeof(be->export_name), "%s", export_name);
	snprintf(be->part, sizeof(be->part), "%s", pi.name);
	be->part_id = pi.id;
	be->persistent = persistent;
	be->qos = *q;
	if (!be->qos.weight)
		be->qos.weight = 1;
	r = be_parts(st, part, &be->qos, be, ref);
	if (r < 0) {
		be_free(be);
		return r;
	}
	*ret = be;
	return 0;
}

/* Puts be in place of the export's old QoS, or appends it. */
static int be_place(struct cw_admit_state *st, struct cw_admit_be *be, struct cw_admit_be **ret_old)
{
	size_t i;

	*ret_old = NULL;
	if (be_find_idx(st, be->export_name, &i) == 0) {
		*ret_old = st->bes[i];
		st->bes[i] = be;
		return 0;
	}
	if (st->n_bes >= BES_MAX)
		return -ENOSPC;
	struct cw_admit_be **v = realloc(st->bes, (st->n_bes + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	st->bes = v;
	st->bes[st->n_bes++] = be;
	return 0;
}

int cw_admit_state_be_set(struct cw_admit_state *st, const struct cw_admit_be_request *req,
			  const struct cw_admit_be **ret_be, struct cw_admit_refusal *ref)
{
	struct cw_admit_be *be = NULL, *old;
	int r;

	if (ref)
		memset(ref, 0, sizeof(*ref));
	if (ret_be)
		*ret_be = NULL;
	if (!st || !req)
		return -EINVAL;
	r = be_build(st, req->export_name, req->part, &req->qos, req->persistent, &be, ref);
	if (r == 0)
		r = be_admit(st, be, ref);
	if (r < 0 || req->dry_run)
		goto done;
	if (be->persistent) {
		struct cw_be_qos_rec rec = { .part_id = be->part_id, .qos = be->qos };

		snprintf(rec.export_name, sizeof(rec.export_name), "%s", be->export_name);
		r = cw_be_qos_put(st->pool, &rec);
		if (r < 0) {
			const struct cw_error *e = cw_pool_last_error(st->pool);

			refuse(ref, "storing the QoS: %s",
			       e && e->code == r && e->msg[0] ? e->msg : strerror(-r));
			goto done;
		}
	} else {
		size_t i;

		/* A stored QoS the daemon's own replaces is no longer stored. */
		if (be_find_idx(st, be->export_name, &i) == 0 && st->bes[i]->persistent)
			(void)cw_be_qos_remove(st->pool, be->export_name);
	}
	r = be_place(st, be, &old);
	if (r < 0)
		goto done;
	emit(st, &(struct cw_admit_event){ .kind = CW_ADMIT_EV_BE_SET, .be = be });
	be_free(old);
	if (ret_be)
		*ret_be = be;
	be = NULL;
done:
	be_free(be);
	return r;
}

int cw_admit_state_be_clear(struct cw_admit_state *st, const char *name)
{
	struct cw_admit_be *be;
	size_t i;
	int r;

	if (!st || !name)
		return -EINVAL;
	if (be_find_idx(st, name, &i) < 0)
		return -ENOENT;
	be = st->bes[i];
	if (be->persistent) {
		r = cw_be_qos_remove(st->pool, name);
		if (r < 0 && r != -ENOENT)
			return r;
	}
	st->bes[i] = st->bes[--st->n_bes];
	emit(st, &(struct cw_admit_event){ .kind = CW_ADMIT_EV_BE_CLEARED, .be = be });
	be_free(be);
	return 0;
}

/* Builds again the QoS of every export of partition part (NULL: any) with
 * a part on disk_id (0: any): the blocks it has on each disk and the
 * models' costs, as they are now.  Not refused (the reservation was
 * admitted; like a stored stream whose model changed). */
static int be_refresh(struct cw_admit_state *st, const char *part, uint32_t disk_id)
{
	for (size_t i = 0; i < st->n_bes; i++) {
		struct cw_admit_be *old = st->bes[i], *be;
		bool touches = !disk_id;
		int r;

		for (size_t j = 0; j < old->n_parts && !touches; j++)
			touches = old->parts[j].disk_id == disk_id;
		if (!touches || (part && strcmp(old->part, part)))
			continue;
		r = be_build(st, old->export_name, old->part, &old->qos, old->persistent, &be, NULL);
		if (r < 0)
			return r;
		st->bes[i] = be;
		emit(st, &(struct cw_admit_event){ .kind = CW_ADMIT_EV_BE_SET, .be = be });
		be_free(old);
	}
	return 0;
}

int cw_admit_state_be_refresh(struct cw_admit_state *st, const char *part)
{
	if (!st || !part)
		return -EINVAL;
	return be_refresh(st, part, 0);
}

const struct cw_admit_be *cw_admit_state_be_find(const struct cw_admit_state *st,
						 const char *name)
{
	size_t i;

	return st && name && be_find_idx(st, name, &i) == 0 ? st->bes[i] : NULL;
}

const struct cw_admit_be *cw_admit_state_be_at(const struct cw_admit_state *st, size_t i)
{
	return st && i < st->n_bes ? st->bes[i] : NULL;
}

/* The stored QoS, as they were set (a model changed since may have moved
 * their shares; they are not refused here, like stored streams). */
static int bes_load(struct cw_admit_state *st)
{
	_cleanup_free_ struct cw_be_qos_rec *recs = NULL;
	_cleanup_free_ struct cw_part_info *parts = NULL;
	size_t n = 0, np = 0;
	int r = cw_be_qos_list(st->pool, &recs, &n);

	if (r == 0 && n)
		r = cw_part_list(st->pool, &parts, &np);
	for (size_t i = 0; r == 0 && i < n; i++) {
		struct cw_admit_be *be, *old;
		size_t k;

		for (k = 0; k < np && parts[k].id != recs[i].part_id; k++)
			;
		if (k == np)
			continue;	/* the database's RESTRICT keeps this from happening */
		r = be_build(st, recs[i].export_name, parts[k].name, &recs[i].qos, true, &be, NULL);
		if (r == 0) {
			r = be_place(st, be, &old);
			if (r < 0)
				be_free(be);
			be_free(old);
		}
	}
	return r;
}

/* ---- the host ---- */

int cw_admit_state_set_host(struct cw_admit_state *st, const struct cw_host_model *h)
{
	if (!st || !h || h->request_ns < 0 || h->share_ppm > 1000000 ||
	    (!cw_host_model_none(h) && h->cpus == 0))
		return -EINVAL;
	st->host = *h;
	return 0;
}

void cw_admit_state_host(const struct cw_admit_state *st, struct cw_host_model *ret_model,
			 uint64_t *ret_need_ps)
{
	if (ret_model)
		*ret_model = st->host;
	if (ret_need_ps)
		*ret_need_ps = host_need(st);
}
