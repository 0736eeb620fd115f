/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The write-intent record of mirrored partitions (DESIGN.md, "Copies"; the
 * idea is md's write-intent bitmap): which regions of
 * CW_INTENT_REGION_BLOCKS blocks may have a write that reached some copies
 * and not others, so that after a crash only those regions need a resync.
 *
 * Invariant: while a write to a mirrored partition is in flight on any
 * copy (from cw_part_intent_begin to cw_part_intent_end), each region it
 * touches has its row in copy_intent, committed before the write was
 * dispatched.  So a crash leaves a row on every region whose copies may
 * differ, and lay_intent_recover (at open) makes each such block
 * consistent: the first copy in sync (copy 0 unless it was stale already)
 * wins, every other copy of the block is marked out of sync, and a resync
 * later copies the winner over them (journalled at the end of the open,
 * or, while a move of the partition is unfinished, owed in copy_resync,
 * written in the transaction that drops the rows, so that a second crash
 * before the move ends still resyncs them).  A write that was acknowledged was
 * on every live copy already (and, once flushed, durable there), so
 * whichever copy wins holds it; a write that was not acknowledged may be
 * old or new, but the same on every read from then on.
 *
 * One word per region in the partition's xdir (lay_intent_word): bits
 * 0..47 count the writes in flight there, I_DIRTY says its row is
 * committed, I_RECENT that a write began since the last sweep.  begin
 * increments every count first and commits rows only for regions not yet
 * I_DIRTY (under the pool lock, so a sweep cannot drop a row meanwhile);
 * the sweep, under the same lock, clears I_DIRTY of a region only by a
 * compare-and-swap from "dirty, nothing in flight, not recent", then
 * deletes the row.  A writer that comes after that swap sees no I_DIRTY
 * and waits for the lock, so its row is committed again after the delete:
 * no write is ever in flight on a region without a row.  I_RECENT keeps a
 * region busy with writes dirty across sweeps, so a steady writer costs no
 * transaction at all; a region idle for two sweeps is clean.  A pool
 * closed cleanly forgets every region with nothing in flight (a daemon
 * that stops has ended its writes), so only a crash leaves rows behind.
 *
 * A partition with one copy has no xdir and no record: its writers call
 * nothing (the daemon tests copies > 1 once per request).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "common/util.h"
#include "layout/layout-internal.h"

#define I_DIRTY (UINT64_C(1) << 63)
#define I_RECENT (UINT64_C(1) << 62)
#define I_COUNT ((UINT64_C(1) << 48) - 1)

_Static_assert(CW_INTENT_REGION_BLOCKS == 64 && CHUNK_ENTRIES % CW_INTENT_REGION_BLOCKS == 0,
	       "a region is one word of out-of-sync bits");

static const char sql_intent_add[] =
	"INSERT OR IGNORE INTO copy_intent (part, region) VALUES (?1, ?2)";
static const char sql_intent_del[] = "DELETE FROM copy_intent WHERE part = ?1 AND region = ?2";
static const char sql_intent_all[] = "SELECT part, region FROM copy_intent ORDER BY part, region";
static const char sql_intent_none[] = "DELETE FROM copy_intent";
static const char sql_intent_trunc[] = "DELETE FROM copy_intent WHERE part = ?1 AND region >= ?2";
static const char sql_resync_all[] =
	"SELECT part, region, m0, m1, m2 FROM copy_resync ORDER BY part, region";
static const char sql_resync_none[] = "DELETE FROM copy_resync";
static const char sql_resync_add[] =
	"INSERT INTO copy_resync (part, region, m0, m1, m2) VALUES (?1, ?2, ?3, ?4, ?5)";
static const char sql_resync_trunc[] = "DELETE FROM copy_resync WHERE part = ?1 AND region >= ?2";

_Static_assert(CW_COPIES_MAX == 3, "copy_resync has a word per copy, m0..m2");

/* The regions [*ret_first, *ret_last] of bytes [offset, offset + length)
 * (length > 0), or -ERANGE past the end. */
static int regions(const struct cw_part *p, uint64_t offset, uint64_t length,
		   uint64_t *ret_first, uint64_t *ret_last)
{
	uint64_t nb = atomic_load_explicit(&((struct cw_part *)p)->nblocks, memory_order_acquire);
	uint32_t shift = p->bshift + 6;

	if (offset + length < offset || (offset + length - 1) >> p->bshift >= nb)
		return -ERANGE;
	*ret_first = offset >> shift;
	*ret_last = (offset + length - 1) >> shift;
	return 0;
}

int cw_part_intent_begin(struct cw_part *p, uint64_t offset, uint64_t length)
{
	struct cw_pool *pool = p->pool;
	uint64_t first, last;
	bool need = false;
	int r;

	if (p->copies < 2 || length == 0)
		return 0;
	r = regions(p, offset, length, &first, &last);
	if (r < 0)
		return r;
	for (uint64_t g = first; g <= last; g++) {
		_Atomic uint64_t *w = lay_intent_word(p, g);
		uint64_t old = atomic_fetch_add(w, 1);

		if (!(old & I_RECENT))
			atomic_fetch_or(w, I_RECENT);
		need |= !(old & I_DIRTY);
	}
	if (!need)
		return 0;
	pthread_mutex_lock(&pool->lock);
	r = meta_begin(pool->meta);
	for (uint64_t g = first; g <= last && r == 0; g++)
		if (!(atomic_load(lay_intent_word(p, g)) & I_DIRTY))
			r = meta_exec(pool->meta, sql_intent_add, 2, (int64_t)p->id, (int64_t)g);
	r = meta_end(pool->meta, r);
	for (uint64_t g = first; g <= last && r == 0; g++)
		atomic_fetch_or(lay_intent_word(p, g), I_DIRTY);
	pthread_mutex_unlock(&pool->lock);
	if (r < 0)
		cw_part_intent_end(p, offset, length);
	return r;
}

void cw_part_intent_end(struct cw_part *p, uint64_t offset, uint64_t length)
{
	uint64_t first, last;

	if (p->copies < 2 || length == 0 || regions(p, offset, length, &first, &last) < 0)
		return;
	for (uint64_t g = first; g <= last; g++)
		atomic_fetch_sub(lay_intent_word(p, g), 1);
}

uint64_t cw_part_intent_dirty(const struct cw_part *p)
{
	uint64_t nb = atomic_load(&((struct cw_part *)p)->nblocks), k = 0;

	for (uint64_t g = 0; p->copies > 1 && g * CW_INTENT_REGION_BLOCKS < nb; g++)
		k += (atomic_load(lay_intent_word(p, g)) & I_DIRTY) != 0;
	return k;
}

/* Forgets the dirty regions with no write in flight: those not begun
 * since the previous sweep, or (all) every one. */
static int sweep(struct cw_pool *pool, bool all, uint64_t *ret_cleared)
{
	struct cleared {
		struct cw_part *p;
		uint64_t g;
	} *cl = NULL;
	size_t n = 0, cap = 0;
	int r = 0;

	pthread_mutex_lock(&pool->lock);
	for (struct cw_part *p = pool->parts; p && r == 0; p = p->next) {
		uint64_t nb = atomic_load(&p->nblocks);

		for (uint64_t g = 0; p->copies > 1 && g * CW_INTENT_REGION_BLOCKS < nb; g++) {
			_Atomic uint64_t *w = lay_intent_word(p, g);
			uint64_t v = atomic_load(w);

			if (!(v & I_DIRTY))
				continue;
			if ((v & I_RECENT) && !all) {
				atomic_fetch_and(w, ~I_RECENT);
				continue;
			}
			if ((v & I_COUNT) || !atomic_compare_exchange_strong(w, &v, v & ~I_DIRTY))
				continue;
			if (n == cap) {
				struct cleared *m = realloc(cl, (cap = cap ? 2 * cap : 64) * sizeof(*cl));

				if (!m) {
					atomic_fetch_or(w, I_DIRTY);
					r = -ENOMEM;
					break;
				}
				cl = m;
			}
			cl[n++] = (struct cleared){ p, g };
		}
	}
	if (n) {
		int rb = meta_begin(pool->meta);

		for (size_t i = 0; i < n && rb == 0; i++)
			rb = meta_exec(pool->meta, sql_intent_del, 2, (int64_t)cl[i].p->id,
				       (int64_t)cl[i].g);
		rb = meta_end(pool->meta, rb);
		if (rb < 0) {	/* the rows stay: so do the marks */
			for (size_t i = 0; i < n; i++)
				atomic_fetch_or(lay_intent_word(cl[i].p, cl[i].g), I_DIRTY);
			n = 0;
			r = rb;
		}
	}
	pthread_mutex_unlock(&pool->lock);
	free(cl);
	if (ret_cleared)
		*ret_cleared = n;
	return r;
}

int cw_pool_intent_sweep(struct cw_pool *pool, uint64_t *ret_cleared)
{
	return sweep(pool, false, ret_cleared);
}

void lay_intent_close(struct cw_pool *pool)
{
	(void)sweep(pool, true, NULL);	/* what fails stays: resynced at open */
}

int lay_intent_truncate(struct meta *m, const struct cw_part *p, uint64_t nblocks)
{
	int64_t g = (int64_t)CW_DIV_ROUND_UP(nblocks, CW_INTENT_REGION_BLOCKS);
	int r = meta_exec(m, sql_intent_trunc, 2, (int64_t)p->id, g);

	return r < 0 ? r : meta_exec(m, sql_resync_trunc, 2, (int64_t)p->id, g);
}

/* Region g of p after a crash: every copy of its blocks but the first in
 * sync out of sync, in memory; returns whether any bit changed. */
static bool recover_region(struct cw_part *p, uint64_t g, uint64_t *marked)
{
	uint64_t nb = atomic_load(&p->nblocks), b0 = g * CW_INTENT_REGION_BLOCKS;
	uint64_t n = CW_MIN((uint64_t)CW_INTENT_REGION_BLOCKS, nb - b0), kept = 0, set = 0;
	uint64_t mask = n == 64 ? ~UINT64_C(0) : (UINT64_C(1) << n) - 1;

	/* The region is one word of each copy's bits: kept has a bit for
	 * each block whose winner is already chosen. */
	for (unsigned c = 0; c < p->copies; c++) {
		_Atomic uint64_t *w = lay_stale_word(p, c, b0);
		uint64_t insync = ~atomic_load(w) & mask;
		uint64_t lose = insync & kept;

		kept |= insync;
		marked[c] = lose;
		if (lose) {
			atomic_fetch_or(w, lose);
			atomic_fetch_add(&p->stale, (uint64_t)__builtin_popcountll(lose));
			set |= lose;
		}
	}
	return set != 0;
}

/* Remembers the copies of region g of partition id marked out of sync
 * (with those of g remembered already), for the resync at the end of the
 * open (lay_rebuild_recovered), which journals their rebuild or keeps
 * them until the partition's move ends; copy_resync keeps the list
 * meanwhile (lay_intent_recover writes it).  -ENOMEM: the caller's
 * transaction fails, and the record stays for the next open. */
static int remember(struct cw_pool *pool, uint64_t id, uint64_t g, const uint64_t *marked)
{
	struct lay_resync *v;

	for (size_t i = 0; i < pool->nresync; i++) {
		v = &pool->resync[i];
		if (v->part_id == id && v->region == g) {
			for (unsigned c = 0; c < CW_COPIES_MAX; c++)
				v->marked[c] |= marked[c];
			return 0;
		}
	}
	if (pool->nresync == pool->resync_cap) {
		size_t cap = pool->resync_cap ? 2 * pool->resync_cap : 64;
		struct lay_resync *nv = realloc(pool->resync, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		pool->resync = nv;
		pool->resync_cap = cap;
	}
	v = &pool->resync[pool->nresync++];
	v->part_id = id;
	v->region = g;
	memcpy(v->marked, marked, sizeof(v->marked));
	return 0;
}

static int resync_cmp(const void *a, const void *b)
{
	const struct lay_resync *x = a, *y = b;

	if (x->part_id != y->part_id)
		return x->part_id < y->part_id ? -1 : 1;
	return x->region < y->region ? -1 : x->region > y->region;
}

/* The resync a crash before this open owed and had not journalled
 * (copy_resync), into the pool's list. */
static int resync_load(struct cw_pool *pool)
{
	sqlite3_stmt *s;
	int r, rc;

	r = meta_stmt(pool->meta, sql_resync_all, &s);
	if (r < 0)
		return r;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		uint64_t marked[CW_COPIES_MAX];
		int64_t g = sqlite3_column_int64(s, 1);

		for (unsigned c = 0; c < CW_COPIES_MAX; c++)
			marked[c] = (uint64_t)sqlite3_column_int64(s, 2 + (int)c);
		if (g >= 0 && (r = remember(pool, (uint64_t)sqlite3_column_int64(s, 0),
					     (uint64_t)g, marked)) < 0)
			break;
	}
	sqlite3_reset(s);
	return r < 0 ? r : rc == SQLITE_DONE ? 0 : meta_errno(rc);
}

/* The pool's list as copy_resync, in the caller's transaction. */
static int resync_store(struct cw_pool *pool)
{
	int r = meta_exec(pool->meta, sql_resync_none, 0);

	for (size_t i = 0; i < pool->nresync && r == 0; i++) {
		const struct lay_resync *v = &pool->resync[i];

		r = meta_exec(pool->meta, sql_resync_add, 5, (int64_t)v->part_id,
			      (int64_t)v->region, (int64_t)v->marked[0], (int64_t)v->marked[1],
			      (int64_t)v->marked[2]);
	}
	return r;
}

int lay_intent_recover(struct cw_pool *pool, struct cw_error *err)
{
	struct cw_part *p = NULL;
	sqlite3_stmt *s;
	bool any = false;
	int r, rc = SQLITE_DONE;

	r = resync_load(pool);
	if (r < 0)
		return meta_err(err, r, "reading the resync owed since the last crash: %s",
				strerror(-r));
	r = meta_stmt(pool->meta, sql_intent_all, &s);
	if (r < 0)
		return meta_err(err, -EUCLEAN, "the database has no copy_intent table: %s",
				sqlite3_errmsg(pool->meta->db));
	r = meta_begin(pool->meta);
	if (r < 0) {
		sqlite3_reset(s);
		return meta_err(err, r, "resyncing dirty regions: %s", strerror(-r));
	}
	while (r == 0 && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		uint64_t id = (uint64_t)sqlite3_column_int64(s, 0), marked[CW_COPIES_MAX] = { 0 };
		int64_t g = sqlite3_column_int64(s, 1);

		any = true;
		if (!p || p->id != id)
			for (p = pool->parts; p && p->id != id;)
				p = p->next;
		if (!p || p->copies < 2 || g < 0 ||
		    (uint64_t)g * CW_INTENT_REGION_BLOCKS >= atomic_load(&p->nblocks))
			continue;	/* gone, or shrunk past it: nothing to resync */
		if (!recover_region(p, (uint64_t)g, marked))
			continue;
		r = remember(pool, p->id, (uint64_t)g, marked);
		for (unsigned c = 0; c < p->copies && r == 0; c++)
			r = lay_stale_store_chunk(pool->meta, p, c,
							  ((uint64_t)g * CW_INTENT_REGION_BLOCKS) >>
							  CHUNK_SHIFT);
	}
	sqlite3_reset(s);
	if (r == 0 && rc != SQLITE_DONE)
		r = meta_errno(rc);
	/* The duty passes from copy_intent to copy_resync in one
	 * transaction: no crash between finds it in neither. */
	if (r == 0 && any) {
		qsort(pool->resync, pool->nresync, sizeof(*pool->resync), resync_cmp);
		r = resync_store(pool);
	}
	if (r == 0 && any)
		r = meta_exec(pool->meta, sql_intent_none, 0);
	r = meta_end(pool->meta, r);
	if (r < 0)
		return meta_err(err, r, "resyncing the dirty regions of mirrored partitions: %s",
				strerror(-r));
	return 0;
}
