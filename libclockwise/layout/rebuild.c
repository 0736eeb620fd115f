/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Rebuild and replace (issue "a guarantee that survives a disk", item 5):
 * plans that the mover (mover.c) carries out like any journalled move, as
 * best-effort I/O in the slack, with its journal, progress, pause, resume,
 * cancel and crash-safe resume.
 *
 *   - A rebuild rewrites, in place, each copy out of sync on a present
 *     disk from a copy in sync (a step whose src and dst are the copy's
 *     own place; the mover reads another copy, jstep.from).  At every
 *     open, the copies the write-intent recovery just marked (the dirty
 *     regions a crash left) get one by themselves, so a crash resyncs
 *     only dirty regions and with no command.
 *   - A replacement takes every copy on one disk to another: a move where
 *     the copy on the old disk is in sync and the disk present, a rebuild
 *     onto the new disk otherwise.
 *   - A scrub compares each copy in sync with the block's first copy in
 *     sync, the reference, in place (the mover reads both), and with
 *     repair rewrites one that differs as a rebuild would.
 *   - A spare is a present disk placement passes over; a replacement
 *     onto it makes it a data disk.  Which spare takes a failed disk's
 *     place is admission's choice (cw_admit_state_takeover: the spares
 *     with room, cw_pool_spares, each checked against the streams), made
 *     the same way by clockwised on a failure and by cwsim's failure
 *     scenario (fail =).
 * What keeps an acknowledged write from being overwritten by older data
 * is the mover's (its file comment, "Copies"); here only the plans, made
 * under the pool lock and journalled in one transaction, or refused with
 * nothing taken.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "layout/layout-internal.h"

static const char sql_spare_set[] = "INSERT OR IGNORE INTO disk_spare (disk) VALUES (?1)";
static const char sql_spare_clear[] = "DELETE FROM disk_spare WHERE disk = ?1";
static const char sql_resync_paid[] = "DELETE FROM copy_resync WHERE part = ?1";

static bool is_stale(const struct cw_part *p, unsigned c, uint64_t b)
{
	return p->copies > 1 && (atomic_load(lay_stale_word(p, c, b)) >> (b & 63) & 1);
}

static bool present(const struct cw_pool *pool, uint32_t id)
{
	return id >= 1 && id <= CW_DISKS_MAX && pool->disks[id] &&
	       pool->disks[id]->state == CW_DISK_PRESENT;
}

/* Whether block b of p has a copy other than c in sync on a present disk. */
static bool readable_elsewhere(const struct cw_part *p, unsigned c, uint64_t b)
{
	for (unsigned k = 0; k < p->copies; k++)
		if (k != c && !is_stale(p, k, b) &&
		    present(p->pool, ENTRY_DISK(lay_copy_entry(p, k, b))))
			return true;
	return false;
}

/* An empty plan for p, with room for cap steps (not linked). */
static struct cw_move *plan_new(struct cw_part *p, uint64_t cap)
{
	struct cw_move *m = calloc(1, sizeof(*m));
	uint64_t nb = atomic_load_explicit(&p->nblocks, memory_order_relaxed);

	if (!m)
		return NULL;
	m->old = calloc(nb ? nb : 1, sizeof(uint64_t));
	m->new = calloc(nb ? nb : 1, sizeof(uint64_t));
	m->steps = calloc(cap ? cap : 1, sizeof(*m->steps));
	if (!m->old || !m->new || !m->steps) {
		lay_move_free(m);
		return NULL;
	}
	for (uint64_t b = 0; b < nb; b++)
		m->old[b] = m->new[b] = lay_entry(p, b);
	m->pool = p->pool;
	m->part = p;
	m->gen = p->gen;
	m->first = 0;
	m->n = nb;
	return m;
}

static void plan_step(struct cw_move *m, uint64_t b, unsigned c, uint64_t src, uint64_t dst)
{
	uint32_t sh = m->pool->bshift;

	m->steps[m->nsteps++] = (struct cw_move_step){
		.block = b, .copy = c,
		.src_disk_id = ENTRY_DISK(src), .src_offset = ENTRY_PBLOCK(src) << sh,
		.dst_disk_id = ENTRY_DISK(dst), .dst_offset = ENTRY_PBLOCK(dst) << sh,
	};
	if (c == 0)
		m->new[b] = dst;
}

/* Journals the rebuild of p's copies that want(ctx, c, b) says, where
 * they can be (on a present disk, the block readable elsewhere), in
 * place; *ret_id 0 when there are none.  Under the lock. */
static int rebuild(struct cw_part *p, bool (*want)(void *ctx, unsigned c, uint64_t b), void *ctx,
		   uint64_t *ret_id)
{
	struct cw_pool *pool = p->pool;
	struct cw_move_opts o = { .placement = p->opts.placement, .tier = p->opts.tier,
				  .zone = p->opts.zone };
	uint64_t nb = atomic_load_explicit(&p->nblocks, memory_order_relaxed), n = 0;
	struct cw_move *m;
	int r;

	*ret_id = 0;
	for (uint64_t b = 0; b < nb; b++)
		for (unsigned c = 0; c < p->copies; c++)
			n += is_stale(p, c, b) && want(ctx, c, b);
	if (!n)
		return 0;
	m = plan_new(p, n);
	if (!m)
		return lay_set_error(pool, -ENOMEM, "out of memory");
	for (uint64_t b = 0; b < nb; b++)
		for (unsigned c = 0; c < p->copies; c++) {
			uint64_t e = lay_copy_entry(p, c, b);

			if (is_stale(p, c, b) && want(ctx, c, b) && present(pool, ENTRY_DISK(e)) &&
			    readable_elsewhere(p, c, b))
				plan_step(m, b, c, e, e);
		}
	if (!m->nsteps) {
		lay_move_free(m);
		return 0;
	}
	r = lay_journal_plans(pool, &m, 1, CW_MOVE_REBUILD, 0, &o, false, NULL, ret_id);
	lay_move_free(m);
	return r;
}

static bool want_all(void *ctx, unsigned c, uint64_t b)
{
	(void)ctx;
	(void)c;
	(void)b;
	return true;
}

/* The copies the intent recovery marked, of one partition: entries
 * [0, n) of the pool's list, in region order. */
struct recovered {
	const struct lay_resync *v;
	size_t n;
};

static bool want_recovered(void *ctx, unsigned c, uint64_t b)
{
	const struct recovered *rc = ctx;
	uint64_t g = b / CW_INTENT_REGION_BLOCKS;

	for (size_t i = 0; i < rc->n; i++)
		if (rc->v[i].region == g)
			return rc->v[i].marked[c] >> (b % CW_INTENT_REGION_BLOCKS) & 1;
	return false;
}

/* A resync rewrites copies in place: no copy changes disk, so the
 * streams stay booked as they are and need no admission (a replacement,
 * a copy on another disk, does: cw_admit_state_disk_replace).
 * Journals the rebuild of p's recovered copies rc, then drops what
 * copy_resync owed for p (a crash between the two finds both: the
 * rebuild journalled, and a resync owed that the next open journals
 * once it ends, finding in sync what it rebuilt). */
static int resync_part(struct cw_part *p, struct recovered *rc)
{
	struct meta *m = p->pool->meta;
	uint64_t mid;
	int r = rebuild(p, want_recovered, rc, &mid);

	if (r == 0 && (r = meta_begin(m)) == 0)
		r = meta_end(m, meta_exec(m, sql_resync_paid, 1, (int64_t)p->id));
	return r;
}

/* Journals a rebuild of the recovered copies of every partition (all)
 * or of partition id only, and drops them from the list (and from
 * copy_resync); keeps those of a partition with a move unfinished (and,
 * unless all, the others'), and those whose rebuild could not be
 * journalled, till the partition's next move ends or the next open.
 * Under the lock. */
static void resync(struct cw_pool *pool, uint64_t id, bool all)
{
	size_t k = 0;

	for (size_t i = 0, j; i < pool->nresync; i = j) {
		struct lay_resync *v = &pool->resync[i];
		struct cw_part *p = lay_part_by_id(pool, v->part_id);
		struct recovered rc = { v, 0 };

		for (j = i; j < pool->nresync && pool->resync[j].part_id == v->part_id; j++)
			rc.n++;
		/* a partition gone: its rows went with it */
		if (p && (!(all || v->part_id == id) || lay_journal_busy(pool, p) ||
			  resync_part(p, &rc) < 0)) {
			memmove(&pool->resync[k], v, rc.n * sizeof(*v));
			k += rc.n;
		}
	}
	pool->nresync = k;
	if (!k) {
		free(pool->resync);
		pool->resync = NULL;
		pool->resync_cap = 0;
	}
}

void lay_rebuild_recovered(struct cw_pool *pool)
{
	pthread_mutex_lock(&pool->lock);
	resync(pool, 0, true);
	pthread_mutex_unlock(&pool->lock);
}

void lay_rebuild_pending(struct cw_pool *pool, struct cw_part *p)
{
	if (pool->nresync)
		resync(pool, p->id, false);
}

int cw_part_rebuild(struct cw_part *p, uint64_t *ret_id)
{
	struct cw_pool *pool = p->pool;
	int r;

	*ret_id = 0;
	pthread_mutex_lock(&pool->lock);
	if (p->copies < 2)
		r = lay_set_error(pool, -EINVAL, "partition '%s' has one copy: nothing to rebuild",
				  p->name);
	else if (lay_journal_busy(pool, p))
		r = lay_set_error(pool, -EBUSY, "partition '%s' is being moved already: pause, "
				  "finish or cancel that move first", p->name);
	else
		r = rebuild(p, want_all, NULL, ret_id);
	pthread_mutex_unlock(&pool->lock);
	return r;
}

/* A place on disk d for copy c of block b of p: no domain in common with
 * the block's other copies; 0 if d has none (the reason set). */
static int replace_target(struct cw_part *p, struct disk *d, unsigned c, uint64_t b,
			  uint64_t *ret)
{
	struct cw_pool *pool = p->pool;
	struct disk *one[1] = { d };
	struct placement pl = { .policy = CW_PLACE_SINGLE, .zone = p->opts.zone, .disks = one,
				.ndisks = 1 };
	uint64_t avail;

	for (unsigned k = 0; k < p->copies; k++) {
		struct disk *o = pool->disks[ENTRY_DISK(lay_copy_entry(p, k, b))];

		if (k != c && o && lay_same_domain(d, o))
			return lay_set_error(pool, -EXDEV, "disk %s cannot take copy %u of block "
					     "%llu of partition '%s': copy %u is on disk %s, in the "
					     "same failure domain", d->name, c, (unsigned long long)b,
					     p->name, k, o->name);
	}
	if (lay_alloc(pool, &pl, 1, ret, &avail) < 0)
		return lay_set_error(pool, -ENOSPC, "disk %s has no room left for the copies of "
				     "disk being replaced (at block %llu of partition '%s')",
				     d->name, (unsigned long long)b, p->name);
	return 0;
}

/* The replacement plan of p's copies on disk old onto nd (NULL and 0 if
 * it has none there). */
static int replace_plan(struct cw_part *p, uint32_t old, struct disk *nd, struct cw_move **ret)
{
	struct cw_pool *pool = p->pool;
	uint64_t nb = atomic_load_explicit(&p->nblocks, memory_order_relaxed), n = 0;
	uint64_t lost = 0, first_lost = 0;
	struct cw_move *m;
	int r = 0;

	*ret = NULL;
	for (uint64_t b = 0; b < nb; b++)
		for (unsigned c = 0; c < p->copies; c++)
			if (ENTRY_DISK(lay_copy_entry(p, c, b)) == old) {
				bool own = present(pool, old) && !is_stale(p, c, b);

				n++;
				if (!own && !readable_elsewhere(p, c, b) && !lost++)
					first_lost = b;
			}
	if (!n)
		return 0;
	if (lost)
		return lay_set_error(pool, -ENODATA, "partition '%s': %llu blocks (the first block "
				     "%llu) have no copy in sync but on disk %s, which is missing or "
				     "out of sync there: they are lost; delete or rewrite them "
				     "before replacing the disk", p->name, (unsigned long long)lost,
				     (unsigned long long)first_lost, pool->disks[old]->name);
	if (lay_journal_busy(pool, p))
		return lay_set_error(pool, -EBUSY, "partition '%s' is being moved already: pause, "
				     "finish or cancel that move first", p->name);
	if (lay_cache_on_disk(p, old))
		return lay_set_error(pool, -EBUSY, "disk %u holds the SSD cache of partition '%s': "
				     "drop that cache first", old, p->name);
	m = plan_new(p, n);
	if (!m)
		return lay_set_error(pool, -ENOMEM, "out of memory");
	for (uint64_t b = 0; b < nb && r == 0; b++)
		for (unsigned c = 0; c < p->copies && r == 0; c++) {
			uint64_t e = lay_copy_entry(p, c, b), t;

			if (ENTRY_DISK(e) != old)
				continue;
			r = replace_target(p, nd, c, b, &t);
			if (r == 0)
				plan_step(m, b, c, e, t);
		}
	if (r < 0) {
		lay_move_drop(pool, m);
		return r;
	}
	*ret = m;
	return 0;
}

int cw_disk_replace(struct cw_pool *pool, uint32_t old_id, uint32_t new_id, const char *paused,
		    uint64_t **ret_ids, size_t *ret_n)
{
	_cleanup_free_ struct cw_move **plans = NULL;
	_cleanup_free_ uint64_t *ids = NULL;
	struct cw_move_opts o = { .placement = CW_PLACE_SINGLE, .disk_ids = NULL };
	struct disk *od, *nd;
	size_t nparts = 0, n = 0;
	int r = 0;

	pthread_mutex_lock(&pool->lock);
	od = old_id >= 1 && old_id <= CW_DISKS_MAX ? pool->disks[old_id] : NULL;
	nd = new_id >= 1 && new_id <= CW_DISKS_MAX ? pool->disks[new_id] : NULL;
	if (!od || !nd) {
		r = lay_set_error(pool, -ENOENT, "no disk %u in the pool", od ? new_id : old_id);
		goto out;
	}
	if (od == nd) {
		r = lay_set_error(pool, -EINVAL, "disk %s cannot replace itself", od->name);
		goto out;
	}
	if (!present(pool, new_id)) {
		r = lay_set_error(pool, -ENODEV, "disk %s is missing: it cannot take the copies of "
				  "disk %s", nd->name, od->name);
		goto out;
	}
	for (struct cw_part *p = pool->parts; p; p = p->next)
		nparts++;
	plans = calloc(nparts ? nparts : 1, sizeof(*plans));
	ids = calloc(nparts ? nparts : 1, sizeof(*ids));
	if (!plans || !ids) {
		r = lay_set_error(pool, -ENOMEM, "out of memory");
		goto out;
	}
	for (struct cw_part *p = pool->parts; p && r == 0; p = p->next) {
		r = replace_plan(p, old_id, nd, &plans[n]);
		if (r == 0 && plans[n])
			n++;
	}
	if (r < 0) {
		for (size_t i = 0; i < n; i++)
			lay_move_drop(pool, plans[i]);
		goto out;
	}
	r = lay_journal_plans(pool, plans, n, CW_MOVE_REPLACE, old_id, &o, false, paused, ids);
	/* A spare that takes a disk's copies is one of the data disks now
	 * (were this lost, it would only stay out of new placements). */
	if (r == 0 && nd->spare && meta_exec(pool->meta, sql_spare_clear, 1, (int64_t)new_id) == 0)
		nd->spare = false;
	if (r == 0) {	/* replaced after all */
		free(od->unreplaced);
		od->unreplaced = NULL;
	}
	if (r == 0) {
		*ret_ids = n ? CW_TAKE_PTR(ids) : NULL;
		*ret_n = n;
	}
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_part_scrub(struct cw_part *p, bool repair, uint64_t *ret_id)
{
	struct cw_pool *pool = p->pool;
	struct cw_move_opts o = { .placement = p->opts.placement, .tier = p->opts.tier,
				  .zone = p->opts.zone };
	struct cw_move *m = NULL;
	uint64_t nb;
	int r = 0;

	*ret_id = 0;
	pthread_mutex_lock(&pool->lock);
	if (p->copies < 2) {
		r = lay_set_error(pool, -EINVAL, "partition '%s' has one copy: nothing to compare",
				  p->name);
		goto out;
	}
	if (lay_journal_busy(pool, p)) {
		r = lay_set_error(pool, -EBUSY, "partition '%s' is being moved already: pause, "
				  "finish or cancel that move first", p->name);
		goto out;
	}
	nb = atomic_load_explicit(&p->nblocks, memory_order_relaxed);
	m = plan_new(p, nb * (p->copies - 1));
	if (!m) {
		r = lay_set_error(pool, -ENOMEM, "out of memory");
		goto out;
	}
	for (uint64_t b = 0; b < nb; b++) {
		bool ref = false;

		for (unsigned c = 0; c < p->copies; c++) {
			uint64_t e = lay_copy_entry(p, c, b);

			if (is_stale(p, c, b) || !present(pool, ENTRY_DISK(e)))
				continue;
			if (ref)
				plan_step(m, b, c, e, e);
			ref = true;	/* the first in sync: compared with, not compared */
		}
	}
	if (m->nsteps)
		r = lay_journal_plans(pool, &m, 1, repair ? CW_MOVE_REPAIR : CW_MOVE_SCRUB, 0, &o,
				      false, NULL, ret_id);
out:
	lay_move_free(m);
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_disk_set_spare(struct cw_pool *pool, uint32_t disk_id, bool spare)
{
	struct disk *d;
	int r = 0;

	pthread_mutex_lock(&pool->lock);
	r = lay_disk_find(pool, disk_id, &d);
	if (r < 0)
		goto out;
	if (spare && d->free != d->nblocks - 1) {
		r = lay_set_error(pool, -EBUSY, "disk %s holds blocks (%llu in use): a spare holds "
				  "nothing; evacuate it first", d->name,
				  (unsigned long long)(d->nblocks - 1 - d->free));
		goto out;
	}
	if (d->spare == spare)
		goto out;
	r = meta_exec(pool->meta, spare ? sql_spare_set : sql_spare_clear, 1, (int64_t)disk_id);
	if (r < 0)
		lay_set_error(pool, r, "marking disk %s: %s", d->name, strerror(-r));
	else
		d->spare = spare;
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

size_t cw_pool_spares(struct cw_pool *pool, uint64_t need, uint32_t *ret_ids, size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&pool->lock);
	for (uint32_t i = 1; i <= CW_DISKS_MAX; i++) {
		struct disk *d = pool->disks[i];
		size_t k;

		if (!d || !d->spare || d->state != CW_DISK_PRESENT || d->free < need)
			continue;
		/* by room, most first; among equals by id */
		for (k = n; k > 0 && pool->disks[ret_ids[k - 1]]->free < d->free; k--)
			if (k < max)
				ret_ids[k] = ret_ids[k - 1];
		if (k < max)
			ret_ids[k] = i;
		n += n < max;
	}
	pthread_mutex_unlock(&pool->lock);
	return n;
}

int cw_disk_set_unreplaced(struct cw_pool *pool, uint32_t disk_id, const char *why)
{
	struct disk *d;
	char *dup = NULL;
	int r;

	if (why && why[0] && !(dup = strndup(why, CW_DISK_UNREPLACED_MAX - 1)))
		return -ENOMEM;
	pthread_mutex_lock(&pool->lock);
	r = lay_disk_find(pool, disk_id, &d);
	if (r == 0) {
		free(d->unreplaced);
		d->unreplaced = dup;
		dup = NULL;
	}
	pthread_mutex_unlock(&pool->lock);
	free(dup);
	return r;
}
