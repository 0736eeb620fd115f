/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Journalled moves: data that changes place while it is served (Bosch &
 * Mullender, section 2: dynamic partitions "can be altered after [they
 * have] been created").
 *
 * The journal (tables move and move_block, meta.c) holds every unfinished
 * move's plan; a planned row's destination is reserved in the free maps,
 * in memory as at any reopen, so it can be given to nothing else.  The
 * mover (mover.c) records each block's outcome here: the switch of a
 * block is one transaction (its run, its row, the move's counters) made
 * after the destination was synced, so a crash before it leaves the
 * source mapped and the destination reserved (the copy is done again at
 * the next open), and after it the destination mapped and the source
 * free.  No block is ever owned twice.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "layout/layout-internal.h"

static const char sql_move_insert[] =
	"INSERT INTO move (kind, part, disk, state, placement, tier_pref, zone_pref, blocks,"
	" created_ns, done, skipped) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 0, 0)";
static const char sql_block_insert[] =
	"INSERT INTO move_block (move, block, copy, src_disk, src_pblock, dst_disk, dst_pblock,"
	" state) VALUES (?1, ?2, ?7, ?3, ?4, ?5, ?6, 0)";
static const char sql_block_state[] =
	"UPDATE move_block SET state = ?3 WHERE move = ?1 AND block = ?2 AND copy = ?4";
static const char sql_move_counts[] =
	"UPDATE move SET done = ?2, failed = ?3, skipped = ?4, bytes = ?5 WHERE id = ?1";
static const char sql_move_state[] =
	"UPDATE move SET state = ?2, finished_ns = ?3 WHERE id = ?1";
static const char sql_move_error[] = "UPDATE move SET error = ?2 WHERE id = ?1";
static const char sql_move_tidy[] =
	"DELETE FROM move_block WHERE move = ?1 AND state IN (0, 1, 3)";
static const char sql_move_forget[] = "DELETE FROM move WHERE state IN (2, 3)";
static const char sql_move_all[] =
	"SELECT m.id, m.kind, m.part, m.disk, m.state, m.placement, m.tier_pref, m.zone_pref,"
	" m.blocks, m.done, m.failed, m.skipped, m.bytes, m.created_ns, m.finished_ns, m.error,"
	" coalesce(p.name, '') FROM move m LEFT JOIN part p ON p.id = m.part ORDER BY m.id";
static const char sql_block_planned[] =
	"SELECT block, src_disk, src_pblock, dst_disk, dst_pblock, copy FROM move_block"
	" WHERE move = ?1 AND state = 0 ORDER BY block, copy";
static const char sql_block_failed[] =
	"SELECT DISTINCT block FROM move_block WHERE move = ?1 AND state = 2 ORDER BY block";
static const char sql_part_opts[] =
	"UPDATE part SET placement = ?2, tier_pref = ?3, zone_pref = ?4 WHERE id = ?1";

static const char *const kind_names[] = { "part", "evacuate", "promote", "demote", "rebuild",
					   "replace", "scrub", "repair" };
static const char *const state_names[] = { "running", "paused", "done", "cancelled" };

const char *cw_move_kind_name(enum cw_move_kind k)
{
	return (unsigned)k < CW_ARRAY_SIZE(kind_names) ? kind_names[k] : NULL;
}

const char *cw_move_state_name(enum cw_move_state s)
{
	return (unsigned)s < CW_ARRAY_SIZE(state_names) ? state_names[s] : NULL;
}

static int64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- the in-memory journal ---- */

void lay_jmove_free(struct jmove *jm)
{
	if (!jm)
		return;
	free(jm->steps);
	free(jm);
}

void lay_jmove_unlink(struct cw_pool *pool, struct jmove *jm)
{
	for (struct jmove **jp = &pool->jmoves; *jp; jp = &(*jp)->next_move)
		if (*jp == jm) {
			*jp = jm->next_move;
			return;
		}
}

static struct jmove *jmove_by_id(struct cw_pool *pool, uint64_t id)
{
	for (struct jmove *jm = pool->jmoves; jm; jm = jm->next_move)
		if (jm->info.id == id)
			return jm;
	return NULL;
}

static void jmove_append(struct cw_pool *pool, struct jmove *jm)
{
	struct jmove **jp = &pool->jmoves;

	while (*jp)
		jp = &(*jp)->next_move;
	jm->next_move = NULL;
	*jp = jm;
}

void lay_journal_free(struct cw_pool *pool)
{
	while (pool->jmoves) {
		struct jmove *jm = pool->jmoves;

		pool->jmoves = jm->next_move;
		lay_jmove_free(jm);
	}
	pool->mover = (struct mover){ 0 };
}

int lay_journal_reserved(struct cw_pool *pool, int (*fn)(void *ctx, uint64_t entry,
							 uint64_t block), void *ctx)
{
	const struct mover *mv = &pool->mover;
	int r = 0;

	for (struct jmove *jm = pool->jmoves; jm && r == 0; jm = jm->next_move)
		for (size_t k = jm->next + (lay_mover_in_flight(pool, jm) ? mv->n : 0);
		     k < jm->nsteps && r == 0; k++)
			if (jm->steps[k].dst != jm->steps[k].src)	/* in place: the copy's */
				r = fn(ctx, jm->steps[k].dst, jm->steps[k].block);
	/* The batch: a switched block's source until it is given back, any
	 * other's destination until then. */
	for (unsigned i = 0; mv->phase != MV_NONE && i < mv->n && r == 0; i++)
		if (mv->b[i].state != MB_END && mv->b[i].st.src != mv->b[i].st.dst)
			r = fn(ctx, mv->b[i].state == MB_MOVED ? mv->b[i].st.src : mv->b[i].st.dst,
			       mv->b[i].st.block);
	return r;
}

/* ---- journalling a plan ---- */

static int journal_insert(struct cw_pool *pool, struct cw_move *m, enum cw_move_kind kind,
			  uint32_t disk, const struct cw_move_opts *o, const char *paused,
			  int64_t now, uint64_t *ret_id)
{
	struct meta *meta = pool->meta;
	enum cw_move_state state = !m->nsteps ? CW_MOVE_DONE : paused ? CW_MOVE_PAUSED
				   : CW_MOVE_RUNNING;
	sqlite3_stmt *s;
	uint64_t id;
	int r;

	r = meta_exec(meta, sql_move_insert, 9, (int64_t)kind, (int64_t)m->part->id,
		      (int64_t)disk, (int64_t)state,
		      (int64_t)o->placement, (int64_t)o->tier, (int64_t)o->zone,
		      (int64_t)m->nsteps, now);
	if (r < 0)
		return r;
	id = (uint64_t)sqlite3_last_insert_rowid(meta->db);
	if (!m->nsteps)
		r = meta_exec(meta, sql_move_state, 3, (int64_t)id, (int64_t)CW_MOVE_DONE, now);
	if (r == 0 && state == CW_MOVE_PAUSED) {
		r = meta_stmt(meta, sql_move_error, &s);
		if (r == 0) {
			sqlite3_bind_int64(s, 1, (int64_t)id);
			sqlite3_bind_text(s, 2, paused, -1, SQLITE_TRANSIENT);
			r = meta_step(s);
		}
	}
	for (size_t k = 0; k < m->nsteps && r == 0; k++) {
		const struct cw_move_step *st = &m->steps[k];

		r = meta_stmt(meta, sql_block_insert, &s);
		if (r < 0)
			break;
		sqlite3_bind_int64(s, 1, (int64_t)id);
		sqlite3_bind_int64(s, 2, (int64_t)st->block);
		sqlite3_bind_int64(s, 3, st->src_disk_id);
		sqlite3_bind_int64(s, 4, (int64_t)(st->src_offset >> pool->bshift));
		sqlite3_bind_int64(s, 5, st->dst_disk_id);
		sqlite3_bind_int64(s, 6, (int64_t)(st->dst_offset >> pool->bshift));
		sqlite3_bind_int64(s, 7, st->copy);
		r = meta_step(s);
	}
	*ret_id = id;
	return r;
}

/* The in-memory journal entry of a plan just journalled as id. */
static struct jmove *jmove_from_plan(struct cw_pool *pool, const struct cw_move *m, uint64_t id,
				     enum cw_move_kind kind, uint32_t disk,
				     const struct cw_move_opts *o, const char *paused, int64_t now)
{
	struct jmove *jm = calloc(1, sizeof(*jm));

	if (!jm)
		return NULL;
	jm->steps = calloc(m->nsteps ? m->nsteps : 1, sizeof(*jm->steps));
	if (!jm->steps) {
		free(jm);
		return NULL;
	}
	for (size_t k = 0; k < m->nsteps; k++) {
		const struct cw_move_step *st = &m->steps[k];

		jm->steps[k] = (struct jstep){
			.block = st->block,
			.src = ENTRY(st->src_disk_id, st->src_offset >> pool->bshift),
			.dst = ENTRY(st->dst_disk_id, st->dst_offset >> pool->bshift),
			.copy = st->copy,
		};
	}
	jm->nsteps = m->nsteps;
	jm->part = m->part;
	jm->info = (struct cw_move_info){
		.id = id, .kind = kind, .state = CW_MOVE_RUNNING, .part_id = m->part->id,
		.disk_id = disk, .blocks = m->nsteps, .created_ns = now,
	};
	jm->info.opts = *o;
	jm->info.opts.disk_ids = NULL;
	jm->info.opts.ndisks = 0;
	if (paused) {
		jm->info.state = CW_MOVE_PAUSED;
		snprintf(jm->info.error, sizeof(jm->info.error), "%s", paused);
	}
	snprintf(jm->info.part, sizeof(jm->info.part), "%s", m->part->name);
	return jm;
}

/* Journals plans[0..n) (each of partition plans[i]->part) in one
 * transaction and hands their reservations over to the journal; on
 * failure every plan is dropped with its reservations.  Under the lock. */
int lay_journal_plans(struct cw_pool *pool, struct cw_move **plans, size_t n,
		      enum cw_move_kind kind, uint32_t disk, const struct cw_move_opts *o,
		      bool set_opts, const char *paused, uint64_t *ret_ids)
{
	_cleanup_free_ struct jmove **jms = calloc(n ? n : 1, sizeof(*jms));
	int64_t now = realtime_ns();
	int r = jms ? 0 : -ENOMEM;

	for (size_t i = 0; i < n && r == 0; i++)
		if (plans[i]->part->gen != plans[i]->gen)
			r = -ESTALE;
	if (r == 0)
		r = meta_begin(pool->meta);
	for (size_t i = 0; i < n && r == 0; i++) {
		r = journal_insert(pool, plans[i], kind, disk, o, paused, now, &ret_ids[i]);
		if (r == 0 && set_opts)
			r = meta_exec(pool->meta, sql_part_opts, 4, (int64_t)plans[i]->part->id,
				      (int64_t)o->placement, (int64_t)o->tier, (int64_t)o->zone);
		if (r == 0 && plans[i]->nsteps) {
			jms[i] = jmove_from_plan(pool, plans[i], ret_ids[i], kind, disk, o, paused,
						 now);
			if (!jms[i])
				r = -ENOMEM;
		}
	}
	r = meta_end(pool->meta, r);
	for (size_t i = 0; i < n; i++) {
		lay_move_unlink(pool, plans[i]);
		if (r == 0) {
			if (set_opts) {
				plans[i]->part->opts.placement = o->placement;
				plans[i]->part->opts.tier = o->tier;
				plans[i]->part->opts.zone = o->zone;
			}
			if (jms[i])
				jmove_append(pool, jms[i]);
			lay_move_free(plans[i]);	/* the targets stay reserved */
		} else {
			lay_jmove_free(jms ? jms[i] : NULL);
			lay_move_drop(pool, plans[i]);
		}
		plans[i] = NULL;
	}
	if (r < 0)
		return lay_set_error(pool, r, r == -ESTALE ? "the partition changed while the move "
				     "was planned: try again" : "journalling the move: %s",
				     strerror(-r));
	return 0;
}

int cw_move_start(struct cw_part *p, uint64_t first_block, uint64_t nblocks,
		  const struct cw_move_opts *opts, enum cw_move_kind kind, uint64_t *ret_id)
{
	return cw_move_start_paused(p, first_block, nblocks, opts, kind, NULL, ret_id);
}

int cw_move_start_paused(struct cw_part *p, uint64_t first_block, uint64_t nblocks,
			 const struct cw_move_opts *opts, enum cw_move_kind kind,
			 const char *paused, uint64_t *ret_id)
{
	struct cw_pool *pool = p->pool;
	struct cw_move *m = NULL;
	uint64_t id = 0;
	int r;

	pthread_mutex_lock(&pool->lock);
	if (kind != CW_MOVE_PART && kind != CW_MOVE_PROMOTE && kind != CW_MOVE_DEMOTE) {
		r = lay_set_error(pool, -EINVAL, "invalid kind of move");
		goto out;
	}
	if (lay_journal_busy(pool, p)) {
		r = lay_set_error(pool, -EBUSY, "partition '%s' is being moved already: pause, "
				  "finish or cancel that move first", p->name);
		goto out;
	}
	r = lay_move_plan(p, first_block, nblocks, opts, &m);
	if (r == 0)
		r = lay_journal_plans(pool, &m, 1, kind, 0, opts, kind == CW_MOVE_PART, paused, &id);
	if (r == 0)
		*ret_id = id;
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_disk_evacuate(struct cw_pool *pool, uint32_t disk_id, uint64_t **ret_ids, size_t *ret_n)
{
	return cw_disk_evacuate_paused(pool, disk_id, NULL, ret_ids, ret_n);
}

int cw_disk_evacuate_paused(struct cw_pool *pool, uint32_t disk_id, const char *paused,
			    uint64_t **ret_ids, size_t *ret_n)
{
	_cleanup_free_ struct cw_move **plans = NULL;
	_cleanup_free_ uint64_t *ids = NULL;
	uint32_t others[CW_DISKS_MAX];
	struct cw_move_opts o = { .placement = CW_PLACE_ROTATION };
	uint64_t need = 0, avail = 0;
	size_t nparts = 0, n = 0, nothers = 0;
	struct disk *d;
	int r = 0;

	pthread_mutex_lock(&pool->lock);
	r = lay_disk_find(pool, disk_id, &d);
	if (r < 0)
		goto out;
	for (uint32_t i = 1; i <= CW_DISKS_MAX; i++)
		if (i != disk_id && pool->disks[i] && pool->disks[i]->state == CW_DISK_PRESENT &&
		    !pool->disks[i]->spare) {
			others[nothers++] = i;
			avail += pool->disks[i]->free;
		}
	for (struct cw_part *p = pool->parts; p; p = p->next) {
		uint64_t nb = atomic_load_explicit(&p->nblocks, memory_order_relaxed), on = 0;

		if (lay_cache_on_disk(p, disk_id)) {
			r = lay_set_error(pool, -EBUSY, "disk %u (%s) holds the SSD cache of partition "
					  "'%s': drop that cache first", disk_id, d->name, p->name);
			goto out;
		}
		nparts++;
		for (uint64_t b = 0; b < nb; b++)
			for (unsigned c = 0; c < p->copies; c++)	/* every copy leaves */
				on += ENTRY_DISK(lay_copy_entry(p, c, b)) == disk_id;
		need += on;
		if (on && lay_journal_busy(pool, p)) {
			r = lay_set_error(pool, -EBUSY, "partition '%s' is being moved already: "
					  "pause, finish or cancel that move first", p->name);
			goto out;
		}
	}
	if (need > avail) {
		r = lay_set_error(pool, -ENOSPC, "evacuating disk %u (%s) needs %llu bytes (%llu "
				  "blocks) but only %llu bytes (%llu blocks) are free on the other "
				  "disks", disk_id, d->name,
				  (unsigned long long)(need << pool->bshift), (unsigned long long)need,
				  (unsigned long long)(avail << pool->bshift), (unsigned long long)avail);
		pool->err.needed_bytes = need << pool->bshift;
		pool->err.available_bytes = avail << pool->bshift;
		goto out;
	}
	plans = calloc(nparts ? nparts : 1, sizeof(*plans));
	ids = calloc(nparts ? nparts : 1, sizeof(*ids));
	if (!plans || !ids) {
		r = lay_set_error(pool, -ENOMEM, "out of memory");
		goto out;
	}
	o.disk_ids = others;
	o.ndisks = nothers;
	for (struct cw_part *p = pool->parts; p && need; p = p->next) {
		uint64_t nb = atomic_load_explicit(&p->nblocks, memory_order_relaxed);
		bool on = false;

		for (uint64_t b = 0; b < nb && !on; b++)
			for (unsigned c = 0; c < p->copies && !on; c++)
				on = ENTRY_DISK(lay_copy_entry(p, c, b)) == disk_id;
		if (!on)
			continue;
		r = lay_move_plan(p, 0, nb, &o, &plans[n]);
		if (r < 0) {
			for (size_t i = 0; i < n; i++) {
				lay_move_unlink(pool, plans[i]);
				lay_move_drop(pool, plans[i]);
			}
			goto out;
		}
		n++;
	}
	r = lay_journal_plans(pool, plans, n, CW_MOVE_EVACUATE, disk_id, &o, false, paused, ids);
	if (r == 0) {
		*ret_ids = n ? CW_TAKE_PTR(ids) : NULL;
		*ret_n = n;
	}
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

/* ---- reading the journal ---- */

static void row_info(sqlite3_stmt *s, struct cw_move_info *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->id = (uint64_t)sqlite3_column_int64(s, 0);
	ret->kind = (enum cw_move_kind)sqlite3_column_int64(s, 1);
	ret->part_id = (uint64_t)sqlite3_column_int64(s, 2);
	ret->disk_id = (uint32_t)sqlite3_column_int64(s, 3);
	ret->state = (enum cw_move_state)sqlite3_column_int64(s, 4);
	ret->opts.placement = (enum cw_placement)sqlite3_column_int64(s, 5);
	ret->opts.tier = (enum cw_tier_pref)sqlite3_column_int64(s, 6);
	ret->opts.zone = (enum cw_zone_pref)sqlite3_column_int64(s, 7);
	ret->blocks = (uint64_t)sqlite3_column_int64(s, 8);
	ret->done = (uint64_t)sqlite3_column_int64(s, 9);
	ret->failed = (uint64_t)sqlite3_column_int64(s, 10);
	ret->skipped = (uint64_t)sqlite3_column_int64(s, 11);
	ret->bytes_copied = (uint64_t)sqlite3_column_int64(s, 12);
	ret->created_ns = sqlite3_column_int64(s, 13);
	ret->finished_ns = sqlite3_column_int64(s, 14);
	snprintf(ret->error, sizeof(ret->error), "%s", (const char *)sqlite3_column_text(s, 15));
	snprintf(ret->part, sizeof(ret->part), "%s", (const char *)sqlite3_column_text(s, 16));
}

int cw_move_list(struct cw_pool *pool, struct cw_move_info **ret, size_t *ret_n)
{
	struct cw_move_info *v = NULL;
	size_t n = 0, cap = 0;
	sqlite3_stmt *s;
	int r, rc;

	pthread_mutex_lock(&pool->lock);
	r = meta_stmt(pool->meta, sql_move_all, &s);
	while (r == 0 && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct jmove *jm;

		if (n == cap) {
			struct cw_move_info *nv = realloc(v, (cap = cap ? 2 * cap : 8) * sizeof(*v));

			if (!nv) {
				r = -ENOMEM;
				break;
			}
			v = nv;
		}
		row_info(s, &v[n]);
		/* A running move's bytes count copies not yet journalled. */
		jm = jmove_by_id(pool, v[n].id);
		if (jm)
			v[n].bytes_copied = jm->info.bytes_copied;
		n++;
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = meta_errno(rc);
	if (r == 0)
		sqlite3_reset(s);
	if (r < 0) {
		free(v);
		r = lay_set_error(pool, r, "listing moves: %s", strerror(-r));
	} else {
		*ret = v ? v : calloc(1, sizeof(*v));
		*ret_n = n;
		if (!*ret)
			r = lay_set_error(pool, -ENOMEM, "out of memory");
	}
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_move_get(struct cw_pool *pool, uint64_t id, struct cw_move_info *ret)
{
	_cleanup_free_ struct cw_move_info *v = NULL;
	size_t n = 0;
	int r = cw_move_list(pool, &v, &n);

	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		if (v[i].id == id) {
			*ret = v[i];
			return 0;
		}
	pthread_mutex_lock(&pool->lock);
	r = lay_set_error(pool, -ENOENT, "no move %llu", (unsigned long long)id);
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_move_failed_blocks(struct cw_pool *pool, uint64_t id, uint64_t **ret_blocks,
			  size_t *ret_n)
{
	uint64_t *v = NULL;
	size_t n = 0, cap = 0;
	sqlite3_stmt *s;
	int r, rc = SQLITE_DONE;

	pthread_mutex_lock(&pool->lock);
	r = meta_stmt(pool->meta, sql_block_failed, &s);
	if (r == 0)
		sqlite3_bind_int64(s, 1, (int64_t)id);
	while (r == 0 && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (n == cap) {
			uint64_t *nv = realloc(v, (cap = cap ? 2 * cap : 16) * sizeof(*v));

			if (!nv) {
				r = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[n++] = (uint64_t)sqlite3_column_int64(s, 0);
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = meta_errno(rc);
	if (r == 0)
		sqlite3_reset(s);
	if (r < 0) {
		free(v);
		r = lay_set_error(pool, r, "reading move %llu: %s", (unsigned long long)id,
				  strerror(-r));
	} else {
		*ret_blocks = v;
		*ret_n = n;
	}
	pthread_mutex_unlock(&pool->lock);
	return r;
}

/* cw_move_destinations(), and whether a block of them changes disk. */
static int destinations(struct cw_pool *pool, uint64_t id, const struct cw_part *part,
			uint64_t first_block, uint64_t nblocks, uint32_t *ret_disk_ids,
			bool *ret_taken)
{
	struct jmove *jm;
	int r;

	*ret_taken = false;
	pthread_mutex_lock(&pool->lock);
	r = cw_part_block_disks(part, first_block, nblocks, ret_disk_ids);
	if (r < 0) {
		r = lay_set_error(pool, r, "blocks %llu..%llu are not all in partition '%s'",
				  (unsigned long long)first_block,
				  (unsigned long long)(first_block + nblocks), part->name);
		goto out;
	}
	jm = jmove_by_id(pool, id);
	if (!jm) {
		r = lay_set_error(pool, -ENOENT, "no unfinished move %llu", (unsigned long long)id);
		goto out;
	}
	if (jm->part != part)
		goto out;
	for (size_t k = jm->next; k < jm->nsteps; k++) {
		uint64_t b = jm->steps[k].block;

		if (jm->steps[k].copy)
			continue;	/* the disks said are copy 0's */
		if (b >= first_block && b - first_block < nblocks) {
			uint32_t to = ENTRY_DISK(jm->steps[k].dst);

			*ret_taken |= ret_disk_ids[b - first_block] != to;
			ret_disk_ids[b - first_block] = to;
		}
	}
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_move_destinations(struct cw_pool *pool, uint64_t id, const struct cw_part *part,
			 uint64_t first_block, uint64_t nblocks, uint32_t *ret_disk_ids)
{
	bool taken;

	return destinations(pool, id, part, first_block, nblocks, ret_disk_ids, &taken);
}

int cw_move_takes(struct cw_pool *pool, uint64_t id, const struct cw_part *part,
		  uint64_t first_block, uint64_t nblocks, uint32_t *ret_disk_ids)
{
	bool taken;
	int r = destinations(pool, id, part, first_block, nblocks, ret_disk_ids, &taken);

	return r < 0 ? r : taken;
}

/* ---- pause, resume, cancel ---- */

int lay_journal_set_state(struct cw_pool *pool, struct jmove *jm, enum cw_move_state st,
			  const char *error)
{
	int64_t fin = st == CW_MOVE_DONE || st == CW_MOVE_CANCELLED ? realtime_ns() : 0;
	sqlite3_stmt *s;
	int r;

	r = meta_begin(pool->meta);
	if (r == 0)
		r = meta_exec(pool->meta, sql_move_state, 3, (int64_t)jm->info.id, (int64_t)st, fin);
	if (r == 0 && error) {
		r = meta_stmt(pool->meta, sql_move_error, &s);
		if (r == 0) {
			sqlite3_bind_int64(s, 1, (int64_t)jm->info.id);
			sqlite3_bind_text(s, 2, error, -1, SQLITE_TRANSIENT);
			r = meta_step(s);
		}
	}
	if (r == 0 && fin)
		r = meta_exec(pool->meta, sql_move_tidy, 1, (int64_t)jm->info.id);
	r = meta_end(pool->meta, r);
	if (r < 0)
		return r;
	jm->info.state = st;
	jm->info.finished_ns = fin;
	if (error)
		snprintf(jm->info.error, sizeof(jm->info.error), "%s", error);
	return 0;
}

static int find_unfinished(struct cw_pool *pool, uint64_t id, struct jmove **ret)
{
	sqlite3_stmt *s;
	bool exists = false;
	int r;

	*ret = jmove_by_id(pool, id);
	if (*ret)
		return 0;
	r = meta_stmt(pool->meta, sql_move_all, &s);
	while (r == 0 && sqlite3_step(s) == SQLITE_ROW)
		exists |= (uint64_t)sqlite3_column_int64(s, 0) == id;
	if (r == 0)
		sqlite3_reset(s);
	if (exists)
		return lay_set_error(pool, -EALREADY, "move %llu is finished",
				     (unsigned long long)id);
	return lay_set_error(pool, -ENOENT, "no move %llu", (unsigned long long)id);
}

int cw_move_pause(struct cw_pool *pool, uint64_t id, const char *reason)
{
	struct jmove *jm;
	int r;

	pthread_mutex_lock(&pool->lock);
	r = find_unfinished(pool, id, &jm);
	if (r == 0 && jm->info.state == CW_MOVE_PAUSED && !reason)
		r = lay_set_error(pool, -EALREADY, "move %llu is paused already",
				  (unsigned long long)id);
	if (r == 0)
		r = lay_journal_set_state(pool, jm, CW_MOVE_PAUSED, reason ? reason : "");
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_move_resume(struct cw_pool *pool, uint64_t id)
{
	struct jmove *jm;
	int r;

	pthread_mutex_lock(&pool->lock);
	r = find_unfinished(pool, id, &jm);
	if (r == 0 && jm->info.state == CW_MOVE_RUNNING)
		r = lay_set_error(pool, -EALREADY, "move %llu is running already",
				  (unsigned long long)id);
	if (r == 0)
		r = lay_journal_set_state(pool, jm, CW_MOVE_RUNNING, "");
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_move_cancel(struct cw_pool *pool, uint64_t id, const char *reason)
{
	struct jmove *jm;
	size_t keep;
	int r;

	pthread_mutex_lock(&pool->lock);
	r = find_unfinished(pool, id, &jm);
	if (r == 0)
		r = lay_journal_set_state(pool, jm, CW_MOVE_CANCELLED, reason ? reason : "");
	if (r < 0) {
		if (r != -ENOENT && r != -EALREADY)
			lay_set_error(pool, r, "cancelling move %llu: %s", (unsigned long long)id,
				      strerror(-r));
		goto out;
	}
	/* The batch in flight is the mover's to give back once drained; it
	 * forgets the move when the batch ends. */
	keep = jm->next + (lay_mover_in_flight(pool, jm) ? pool->mover.n : 0);
	for (size_t k = keep; k < jm->nsteps; k++)
		if (jm->steps[k].dst != jm->steps[k].src)
			lay_free_entries(pool, &jm->steps[k].dst, 1);
	jm->nsteps = keep;
	if (!lay_mover_in_flight(pool, jm)) {
		lay_jmove_unlink(pool, jm);
		lay_rebuild_pending(pool, jm->part);
		lay_jmove_free(jm);
	}
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_move_forget_finished(struct cw_pool *pool)
{
	int r;

	pthread_mutex_lock(&pool->lock);
	r = meta_exec(pool->meta, sql_move_forget, 0);
	if (r < 0)
		lay_set_error(pool, r, "forgetting finished moves: %s", strerror(-r));
	pthread_mutex_unlock(&pool->lock);
	return r;
}

/* ---- the mover's records ---- */

/* Records the outcome of steps in flight (row state, the move's
 * counters) in one transaction; for a moved block, with its new run. */
int lay_journal_step(struct cw_pool *pool, struct jmove *jm, const struct jstep *st, int row)
{
	return lay_journal_steps(pool, jm, &st, &row, 1);
}

int lay_journal_steps(struct cw_pool *pool, struct jmove *jm, const struct jstep *const *st,
		      const int *rows, size_t n)
{
	struct cw_move_info c = jm->info;
	int r;

	r = meta_begin(pool->meta);
	for (size_t i = 0; i < n && r == 0; i++) {
		c.done += rows[i] == ROW_MOVED;
		c.failed += rows[i] == ROW_FAILED;
		c.skipped += rows[i] == ROW_SKIPPED;
		if (rows[i] == ROW_MOVED && st[i]->dst != st[i]->src)
			r = lay_runs_replace_copy(pool->meta, jm->part->id, st[i]->copy,
						  st[i]->block, st[i]->block + 1, &st[i]->dst);
		/* A rebuilt copy's sync bit, cleared in memory by the caller. */
		if (r == 0 && rows[i] == ROW_MOVED && st[i]->from != st[i]->src)
			r = lay_stale_store_chunk(pool->meta, jm->part, st[i]->copy,
						  st[i]->block >> CHUNK_SHIFT);
		if (r == 0)
			r = meta_exec(pool->meta, sql_block_state, 4, (int64_t)c.id,
				      (int64_t)st[i]->block, (int64_t)rows[i], (int64_t)st[i]->copy);
	}
	if (r == 0)
		r = meta_exec(pool->meta, sql_move_counts, 5, (int64_t)c.id, (int64_t)c.done,
			      (int64_t)c.failed, (int64_t)c.skipped, (int64_t)c.bytes_copied);
	r = meta_end(pool->meta, r);
	if (r == 0)
		jm->info = c;
	return r;
}

/* ---- open ---- */

static int load_steps(struct cw_pool *pool, struct jmove *jm, struct cw_error *err)
{
	sqlite3_stmt *s;
	size_t cap = 0;
	int r, rc;

	r = meta_stmt(pool->meta, sql_block_planned, &s);
	if (r < 0)
		return meta_err(err, r, "reading the move journal: %s", strerror(-r));
	sqlite3_bind_int64(s, 1, (int64_t)jm->info.id);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		uint32_t sd = (uint32_t)sqlite3_column_int64(s, 1), dd;
		uint64_t sp = (uint64_t)sqlite3_column_int64(s, 2), dp;
		struct disk *d;

		dd = (uint32_t)sqlite3_column_int64(s, 3);
		dp = (uint64_t)sqlite3_column_int64(s, 4);
		d = dd >= 1 && dd <= CW_DISKS_MAX ? pool->disks[dd] : NULL;
		if (!d || dp < 1 || dp >= d->nblocks || sd < 1 || sd > CW_DISKS_MAX) {
			sqlite3_reset(s);
			return meta_err(err, -EUCLEAN, "the database is damaged: move %llu plans a "
					"block outside the pool", (unsigned long long)jm->info.id);
		}
		if ((dd != sd || dp != sp) && lay_disk_test(d, dp)) {
			sqlite3_reset(s);
			return meta_err(err, -EUCLEAN, "the database is damaged: disk %u block %llu "
					"is owned twice (by move %llu)", dd, (unsigned long long)dp,
					(unsigned long long)jm->info.id);
		}
		if (jm->nsteps == cap) {
			struct jstep *nv = realloc(jm->steps, (cap = cap ? 2 * cap : 64) *
						   sizeof(*nv));

			if (!nv) {
				sqlite3_reset(s);
				return meta_err(err, -ENOMEM, "out of memory");
			}
			jm->steps = nv;
		}
		if (sqlite3_column_int64(s, 5) < 0 ||
		    sqlite3_column_int64(s, 5) >= jm->part->copies) {
			sqlite3_reset(s);
			return meta_err(err, -EUCLEAN, "the database is damaged: move %llu plans a "
					"copy its partition does not have",
					(unsigned long long)jm->info.id);
		}
		if (dd != sd || dp != sp)	/* else rewritten in place: the copy's */
			lay_disk_mark(d, dp);
		jm->steps[jm->nsteps++] = (struct jstep){
			.block = (uint64_t)sqlite3_column_int64(s, 0),
			.src = ENTRY(sd, sp),
			.dst = ENTRY(dd, dp),
			.copy = (uint32_t)sqlite3_column_int64(s, 5),
		};
	}
	sqlite3_reset(s);
	if (rc != SQLITE_DONE)
		return meta_err(err, meta_errno(rc), "reading the move journal: %s",
				sqlite3_errmsg(pool->meta->db));
	return 0;
}

int lay_journal_load(struct cw_pool *pool, struct cw_error *err)
{
	sqlite3_stmt *s;
	int r, rc;

	r = meta_stmt(pool->meta, sql_move_all, &s);
	if (r < 0)
		return meta_err(err, -EUCLEAN, "the database has no move journal: %s",
				sqlite3_errmsg(pool->meta->db));
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct jmove *jm;

		if (sqlite3_column_int64(s, 4) != CW_MOVE_RUNNING &&
		    sqlite3_column_int64(s, 4) != CW_MOVE_PAUSED)
			continue;
		jm = calloc(1, sizeof(*jm));
		if (!jm) {
			sqlite3_reset(s);
			return meta_err(err, -ENOMEM, "out of memory");
		}
		row_info(s, &jm->info);
		jm->part = lay_part_by_id(pool, jm->info.part_id);
		if (!jm->part || !cw_move_kind_name(jm->info.kind)) {
			uint64_t id = jm->info.id;

			free(jm);
			sqlite3_reset(s);
			return meta_err(err, -EUCLEAN, "the database is damaged: move %llu is invalid",
					(unsigned long long)id);
		}
		jmove_append(pool, jm);
	}
	sqlite3_reset(s);
	if (rc != SQLITE_DONE)
		return meta_err(err, meta_errno(rc), "reading the move journal: %s",
				sqlite3_errmsg(pool->meta->db));
	for (struct jmove *jm = pool->jmoves; jm; jm = jm->next_move) {
		r = load_steps(pool, jm, err);
		if (r < 0)
			return r;
	}
	return 0;
}
