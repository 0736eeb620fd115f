/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A partition's SSD cache (clockwise/cache.h): its space, the lock-free
 * routing of I/O, and the worker's state machine.
 *
 * Space.  A cache owns SSD blocks ("slots"), rows of table cache_slot;
 * their bits are set in the disks' free maps like a partition's blocks.
 * Table cache_block holds the armed blocks of a write-back cache: a row
 * exists whenever the SSD copy may be newer than the HDD.
 *
 * Each block of the partition has one atomic word: its state, its slot,
 * and two flags writers set (REWRITTEN, DIRTY).  States and routing:
 *
 *   EMPTY     not cached             read HDD   write HDD
 *   COPYING   being promoted         read HDD   write HDD, REWRITTEN
 *   VALID     cached, HDD equal      read SSD   write both
 *   ARMED     write-back, journalled read SSD   write SSD (DIRTY)
 *   CLEANING  being written back     read SSD   write both, REWRITTEN
 *
 * A writer takes its route from the word it gets back from one fetch_or
 * of the flags, so its decision and the flags are one atomic step, and
 * the worker's transitions out of COPYING and CLEANING are compare-and-
 * swaps that fail when REWRITTEN is set.  Every I/O passes the
 * partition's gate (mover.c) before it looks at the word; the worker
 * drains the gate after each transition that changes where I/O may go,
 * before it depends on it:
 *   - promotion (in batches of up to 16 blocks behind one drain):
 *     EMPTY -> COPYING, drain (writes that went to the HDD only are
 *     done), copy HDD -> SSD and sync, then COPYING -> VALID unless a
 *     write came meanwhile (then the block stays EMPTY).  Write-back:
 *     the row is committed, then VALID -> ARMED;
 *   - write-back: ARMED -> CLEANING, drain (writes to the SSD only are
 *     done), copy SSD -> HDD and sync, CLEANING -> VALID unless a write
 *     came (they went to both, but may have raced the copy: copy again),
 *     then the row is deleted;
 *   - demotion: VALID -> EMPTY, drain (nothing reads the slot any more),
 *     then the slot is free.
 * So an acknowledged write is on the HDD unless its block is ARMED or
 * CLEANING, and then on the SSD with a committed row: after a kill -9
 * the rows are loaded as ARMED and written back first.  Every other
 * block starts EMPTY: a write-through cache starts cold.
 *
 * The worker shares the partitions' gates with the mover, whose drains
 * assume they are the only ones: cw_cache_next runs nothing while a move
 * runs, and cw_mover_next waits while a cache step is under way.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/cache.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "layout/layout-internal.h"

#define ST_EMPTY 0
#define ST_COPYING 1
#define ST_VALID 2
#define ST_ARMED 3
#define ST_CLEANING 4
#define W_STATE(w) ((unsigned)((w) >> 32) & 0xf)
#define W_SLOT(w) ((uint32_t)(w))
#define W_REWRITTEN (UINT64_C(1) << 40)
#define W_DIRTY (UINT64_C(1) << 41)
#define W_FLAGS (W_REWRITTEN | W_DIRTY)
#define WORD(st, slot) (((uint64_t)(st) << 32) | (uint64_t)(slot))

/* A write-back a write overlapped this many times in a row waits. */
#define CACHE_RETRIES 16

static const char sql_slot_insert[] =
	"INSERT INTO cache_slot (part, slot, disk, pblock) VALUES (?1, ?2, ?3, ?4)";
static const char sql_slot_trim[] = "DELETE FROM cache_slot WHERE part = ?1 AND slot >= ?2";
static const char sql_conf_set[] = "UPDATE part SET cache_bytes = ?2, cache_mode = ?3 WHERE id = ?1";
static const char sql_conf_all[] = "SELECT id, cache_bytes, cache_mode FROM part";
static const char sql_slot_all[] =
	"SELECT part, slot, disk, pblock FROM cache_slot ORDER BY part, slot";
static const char sql_armed_all[] = "SELECT part, block, slot FROM cache_block";
static const char sql_arm[] = "INSERT OR REPLACE INTO cache_block (part, block, slot) VALUES (?1, ?2, ?3)";
static const char sql_disarm[] = "DELETE FROM cache_block WHERE part = ?1 AND block = ?2";

struct cw_cache {
	struct cw_part *part;
	struct cw_cache_conf conf;
	uint32_t bshift;
	uint64_t nblocks;		/* blocks covered (the size when it started) */
	_Atomic uint64_t *word;		/* per block */
	uint32_t nslots;
	uint64_t *slot_entry;		/* mapping words of the slots */
	struct cw_cache_policy *pol;
	uint32_t armed;			/* rows */
	bool retiring;			/* a new setting waits: demote everything */
	bool failed;			/* a copy failed: no more promotions */
	uint64_t restart_next;		/* armed blocks from before a restart: scan from */
	bool restart_scan;
};

/* ---- gate (mover.c owns it; the two share it in turn) ---- */

static unsigned gate_bump(struct cw_part *p)
{
	return (unsigned)(atomic_fetch_add(&p->io_epoch, 1) & 1);
}

static bool gate_drained(struct cw_part *p, unsigned parity)
{
	return atomic_load(&p->io_active[parity]) == 0;
}

/* ---- the object ---- */

static void cache_free(struct cw_cache *c)
{
	if (!c)
		return;
	cw_cache_policy_free(c->pol);
	free(c->word);
	free(c->slot_entry);
	free(c);
}

static int cache_new(struct cw_part *p, const struct cw_cache_conf *conf, uint32_t nslots,
		     struct cw_cache **ret)
{
	struct cw_cache *c = calloc(1, sizeof(*c));
	int r;

	if (!c)
		return -ENOMEM;
	c->part = p;
	c->conf = *conf;
	c->bshift = p->bshift;
	c->nblocks = atomic_load_explicit(&p->nblocks, memory_order_relaxed);
	c->nslots = CW_MIN(nslots, p->cache_nslots);
	c->word = calloc(CW_MAX(c->nblocks, 1), sizeof(*c->word));
	c->slot_entry = malloc(CW_MAX(c->nslots, 1) * sizeof(*c->slot_entry));
	if (!c->word || !c->slot_entry) {
		cache_free(c);
		return -ENOMEM;
	}
	memcpy(c->slot_entry, p->cache_slots, c->nslots * sizeof(*c->slot_entry));
	r = cw_cache_policy_new(c->nblocks, c->nslots, &p->pool->cache_opts, &c->pol);
	if (r < 0) {
		cache_free(c);
		return r;
	}
	*ret = c;
	return 0;
}

void cw_pool_cache_policy(struct cw_pool *pool, const struct cw_cache_policy_opts *o)
{
	pthread_mutex_lock(&pool->lock);
	pool->cache_opts = o ? *o : (struct cw_cache_policy_opts){ 0 };
	pthread_mutex_unlock(&pool->lock);
}

struct cw_cache *cw_part_cache(const struct cw_part *part)
{
	return atomic_load_explicit(&((struct cw_part *)part)->cache, memory_order_acquire);
}

void lay_cache_free(struct cw_part *p)
{
	cache_free(atomic_load_explicit(&p->cache, memory_order_relaxed));
	atomic_store_explicit(&p->cache, NULL, memory_order_relaxed);
	free(p->cache_slots);
	p->cache_slots = NULL;
}

/* ---- routing ---- */

static void ssd_extent(const struct cw_cache *c, uint32_t slot, uint64_t offset, uint64_t len,
		       struct cw_extent *ret)
{
	uint64_t e = c->slot_entry[slot], bs = UINT64_C(1) << c->bshift;
	uint64_t within = offset & (bs - 1);

	ret->disk_id = ENTRY_DISK(e);
	ret->phys_offset = (ENTRY_PBLOCK(e) << c->bshift) + within;
	ret->length = CW_MIN(len, bs - within);
}

enum cw_cache_route cw_cache_route(struct cw_cache *c, uint64_t offset, uint64_t len, bool write,
				   struct cw_extent *ret_ssd)
{
	uint64_t b = offset >> c->bshift, w;
	struct cw_part *p = c->part;
	unsigned st;

	if (b >= c->nblocks)
		return CW_CACHE_ORIGIN;
	w = atomic_load(&c->word[b]);
	st = W_STATE(w);
	if (!write) {
		bool hit = st >= ST_VALID;

		cw_cache_policy_hit(c->pol, b, hit ? W_SLOT(w) : UINT32_MAX);
		atomic_fetch_add_explicit(hit ? &p->cache_cnt.hits : &p->cache_cnt.misses, 1,
					  memory_order_relaxed);
		if (!hit)
			return CW_CACHE_ORIGIN;
		ssd_extent(c, W_SLOT(w), offset, len, ret_ssd);
		return CW_CACHE_SSD;
	}
	if (st == ST_EMPTY)
		return CW_CACHE_ORIGIN;
	w = atomic_fetch_or(&c->word[b], W_FLAGS);
	switch (W_STATE(w)) {
	case ST_VALID:
	case ST_CLEANING:
		ssd_extent(c, W_SLOT(w), offset, len, ret_ssd);
		return CW_CACHE_BOTH;
	case ST_ARMED:
		ssd_extent(c, W_SLOT(w), offset, len, ret_ssd);
		return CW_CACHE_SSD;
	default:
		return CW_CACHE_ORIGIN;
	}
}

/* ---- settings ---- */

static uint32_t conf_slots(const struct cw_pool *pool, const struct cw_cache_conf *c)
{
	uint64_t n = (c->size_bytes >> pool->bshift) + ((c->size_bytes & (pool->block_size - 1)) != 0);

	return n > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)n;
}

static bool conf_equal(const struct cw_cache_conf *a, const struct cw_cache_conf *b)
{
	return a->size_bytes == b->size_bytes && (a->size_bytes == 0 || a->mode == b->mode);
}

/* Takes n more slots on the SSD tier for p: the database rows, then the
 * memory.  Called in a transaction. */
static int slots_grow(struct cw_pool *pool, struct cw_part *p, uint32_t want)
{
	static const struct cw_part_opts ssd = { .placement = CW_PLACE_ROTATION,
						 .tier = CW_TIER_PREF_SSD };
	_cleanup_free_ uint64_t *entries = NULL;
	struct disk *buf[CW_DISKS_MAX];
	struct placement pl;
	uint32_t have = p->cache_nslots, n = want - have;
	uint64_t avail, *grown;
	sqlite3_stmt *s;
	int r;

	r = lay_candidates(pool, &ssd, NULL, 0, true, n, &pl, buf);
	if (r < 0)
		return r;
	avail = lay_available(&pl);
	entries = avail >= n ? malloc(n * sizeof(*entries)) : NULL;
	if (avail >= n && !entries)
		return lay_set_error(pool, -ENOMEM, "out of memory");
	if (avail < n || lay_alloc(pool, &pl, n, entries, &avail) < 0) {
		lay_set_error(pool, -ENOSPC, "a cache of %llu bytes for partition '%s' needs %llu "
			      "more bytes (%u blocks) on the SSD tier but only %llu bytes are free "
			      "there", (unsigned long long)((uint64_t)want << pool->bshift), p->name,
			      (unsigned long long)((uint64_t)n << pool->bshift), n,
			      (unsigned long long)(avail << pool->bshift));
		pool->err.needed_bytes = (uint64_t)n << pool->bshift;
		pool->err.available_bytes = avail << pool->bshift;
		return -ENOSPC;
	}
	grown = realloc(p->cache_slots, want * sizeof(*grown));
	if (!grown) {
		lay_free_entries(pool, entries, n);
		return lay_set_error(pool, -ENOMEM, "out of memory");
	}
	p->cache_slots = grown;
	r = meta_stmt(pool->meta, sql_slot_insert, &s);
	for (uint32_t i = 0; i < n && r == 0; i++) {
		sqlite3_bind_int64(s, 1, (int64_t)p->id);
		sqlite3_bind_int64(s, 2, have + i);
		sqlite3_bind_int64(s, 3, ENTRY_DISK(entries[i]));
		sqlite3_bind_int64(s, 4, (int64_t)ENTRY_PBLOCK(entries[i]));
		r = meta_step(s);
	}
	if (r < 0) {
		lay_free_entries(pool, entries, n);
		return r;
	}
	memcpy(p->cache_slots + have, entries, n * sizeof(*entries));
	p->cache_nslots = want;
	return 0;
}

int cw_part_cache_set(struct cw_part *p, const struct cw_cache_conf *conf)
{
	struct cw_pool *pool = p->pool;
	uint32_t want, had;
	int r;

	pthread_mutex_lock(&pool->lock);
	if (!cw_cache_mode_name(conf->mode)) {
		r = lay_set_error(pool, -EINVAL, "unknown cache mode %d (write-through or "
				  "write-back)", (int)conf->mode);
		goto out;
	}
	if (conf->size_bytes && p->opts.tier == CW_TIER_PREF_SSD) {
		r = lay_set_error(pool, -EINVAL, "partition '%s' lives on the SSD tier: it needs "
				  "no SSD cache", p->name);
		goto out;
	}
	if (conf->size_bytes && p->copies > 1) {
		r = lay_set_error(pool, -EOPNOTSUPP, "partition '%s' keeps %u copies: an SSD cache "
				  "in front of copies is not supported yet", p->name, p->copies);
		goto out;
	}
	want = conf_slots(pool, conf);
	had = p->cache_nslots;
	r = meta_begin(pool->meta);
	if (r == 0 && want > had)
		r = slots_grow(pool, p, want);
	if (r == 0)
		r = meta_exec(pool->meta, sql_conf_set, 3, (int64_t)p->id,
			      (int64_t)((uint64_t)want << pool->bshift), (int64_t)conf->mode);
	r = meta_end(pool->meta, r);
	if (r < 0) {
		if (p->cache_nslots > had) {	/* rolled back: give the blocks back */
			lay_free_entries(pool, p->cache_slots + had, p->cache_nslots - had);
			p->cache_nslots = had;
		}
		if (r != -ENOSPC)
			lay_set_error(pool, r, "setting the cache of partition '%s': %s", p->name,
				      strerror(-r));
		goto out;
	}
	p->cache_conf.size_bytes = (uint64_t)want << pool->bshift;
	p->cache_conf.mode = conf->mode;
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_part_cache_get(struct cw_part *p, struct cw_cache_conf *ret)
{
	pthread_mutex_lock(&p->pool->lock);
	*ret = p->cache_conf;
	pthread_mutex_unlock(&p->pool->lock);
	return 0;
}

size_t cw_part_cache_disks(struct cw_part *p, uint32_t *ret_ids)
{
	bool seen[CW_DISKS_MAX + 1] = { false };
	size_t n = 0;

	pthread_mutex_lock(&p->pool->lock);
	for (uint32_t s = 0; s < p->cache_nslots; s++) {
		uint32_t d = ENTRY_DISK(p->cache_slots[s]);

		if (!seen[d]) {
			seen[d] = true;
			ret_ids[n++] = d;
		}
	}
	pthread_mutex_unlock(&p->pool->lock);
	return n;
}

bool lay_cache_on_disk(const struct cw_part *p, uint32_t disk_id)
{
	for (uint32_t s = 0; s < p->cache_nslots; s++)
		if (ENTRY_DISK(p->cache_slots[s]) == disk_id)
			return true;
	return false;
}

int cw_cache_pin(struct cw_part *p, const uint64_t *first, const uint64_t *n, size_t nranges)
{
	struct cw_cache *c;
	int r = 0;

	pthread_mutex_lock(&p->pool->lock);
	if (nranges > 64)
		r = -E2BIG;
	if (r == 0) {
		memcpy(p->cache_pin_first, first, nranges * sizeof(*first));
		memcpy(p->cache_pin_n, n, nranges * sizeof(*n));
		p->cache_npins = nranges;
		c = cw_part_cache(p);
		if (c)
			r = cw_cache_policy_pin(c->pol, first, n, nranges);
	}
	pthread_mutex_unlock(&p->pool->lock);
	return r;
}

bool cw_cache_pinned(struct cw_part *p, uint64_t block)
{
	bool in = false;

	pthread_mutex_lock(&p->pool->lock);
	for (size_t i = 0; i < p->cache_npins && !in; i++)
		in = block >= p->cache_pin_first[i] && block - p->cache_pin_first[i] < p->cache_pin_n[i];
	pthread_mutex_unlock(&p->pool->lock);
	return in;
}

int cw_part_cache_stats(struct cw_part *p, struct cw_cache_stats *ret)
{
	struct cw_cache *c;
	int r = 0;

	memset(ret, 0, sizeof(*ret));
	pthread_mutex_lock(&p->pool->lock);
	c = cw_part_cache(p);
	if (!c && !p->cache_conf.size_bytes) {
		r = -ENOENT;
		goto out;
	}
	if (c) {
		ret->conf = c->conf;
		ret->slots = c->nslots;
		ret->used = cw_cache_policy_used(c->pol);
		ret->armed = c->armed;
		for (uint64_t b = 0; b < c->nblocks; b++) {
			uint64_t w = atomic_load_explicit(&c->word[b], memory_order_relaxed);

			ret->dirty += W_STATE(w) == ST_ARMED && (w & W_DIRTY);
		}
		ret->refused_reserved = cw_cache_policy_refused(c->pol);
	}
	ret->pending = !c || !conf_equal(&c->conf, &p->cache_conf);
	ret->hits = atomic_load_explicit(&p->cache_cnt.hits, memory_order_relaxed);
	ret->misses = atomic_load_explicit(&p->cache_cnt.misses, memory_order_relaxed);
	ret->promotions = p->cache_cnt.promotions;
	ret->demotions = p->cache_cnt.demotions;
	ret->writebacks = p->cache_cnt.writebacks;
	ret->refused_reserved += p->cache_cnt.refused_before;
out:
	pthread_mutex_unlock(&p->pool->lock);
	return r;
}

/* ---- open ---- */

static struct cw_part *part_by_id(struct cw_pool *pool, uint64_t id)
{
	struct cw_part *p = pool->parts;

	while (p && p->id != id)
		p = p->next;
	return p;
}

static int load_slots(struct cw_pool *pool, struct cw_error *err)
{
	sqlite3_stmt *s;
	int rc, r;

	r = meta_stmt(pool->meta, sql_slot_all, &s);
	if (r < 0)
		return meta_err(err, -EUCLEAN, "the database has no cache tables: %s",
				sqlite3_errmsg(pool->meta->db));
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct cw_part *p = part_by_id(pool, (uint64_t)sqlite3_column_int64(s, 0));
		int64_t slot = sqlite3_column_int64(s, 1), pb = sqlite3_column_int64(s, 3);
		int64_t di = sqlite3_column_int64(s, 2);
		struct disk *d = di >= 1 && di <= CW_DISKS_MAX ? pool->disks[di] : NULL;
		uint64_t *grown;

		if (!p || !d || slot != (int64_t)p->cache_nslots || pb < 1 ||
		    (uint64_t)pb >= d->nblocks || lay_disk_test(d, (uint64_t)pb)) {
			sqlite3_reset(s);
			return meta_err(err, -EUCLEAN, "the database is damaged: bad cache slot %lld "
					"of partition %lld", (long long)slot,
					(long long)sqlite3_column_int64(s, 0));
		}
		grown = realloc(p->cache_slots, (p->cache_nslots + 1) * sizeof(*grown));
		if (!grown) {
			sqlite3_reset(s);
			return meta_err(err, -ENOMEM, "out of memory");
		}
		p->cache_slots = grown;
		lay_disk_mark(d, (uint64_t)pb);
		p->cache_slots[p->cache_nslots++] = ENTRY(di, pb);
	}
	sqlite3_reset(s);
	return rc == SQLITE_DONE ? 0 : meta_err(err, meta_errno(rc), "reading cache slots: %s",
						sqlite3_errmsg(pool->meta->db));
}

int lay_cache_load(struct cw_pool *pool, struct cw_error *err)
{
	sqlite3_stmt *s;
	int rc, r;

	r = meta_stmt(pool->meta, sql_conf_all, &s);
	if (r < 0)
		return meta_err(err, -EUCLEAN, "the database has no cache settings: %s",
				sqlite3_errmsg(pool->meta->db));
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct cw_part *p = part_by_id(pool, (uint64_t)sqlite3_column_int64(s, 0));

		if (p) {
			p->cache_conf.size_bytes = (uint64_t)sqlite3_column_int64(s, 1);
			p->cache_conf.mode = (enum cw_cache_mode)sqlite3_column_int64(s, 2);
		}
	}
	sqlite3_reset(s);
	r = load_slots(pool, err);
	if (r < 0)
		return r;
	/* Armed blocks: the SSD holds their data.  Their cache starts with
	 * them (under the setting they were armed with: whatever the stored
	 * one says, write-back) and writes them back first. */
	r = meta_stmt(pool->meta, sql_armed_all, &s);
	if (r < 0)
		return meta_err(err, -EUCLEAN, "the database has no cache tables: %s",
				sqlite3_errmsg(pool->meta->db));
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct cw_part *p = part_by_id(pool, (uint64_t)sqlite3_column_int64(s, 0));
		int64_t b = sqlite3_column_int64(s, 1), slot = sqlite3_column_int64(s, 2);
		struct cw_cache *c = p ? cw_part_cache(p) : NULL;

		if (p && !c) {
			struct cw_cache_conf conf = { (uint64_t)p->cache_nslots << pool->bshift,
						      CW_CACHE_WRITE_BACK };

			r = cache_new(p, &conf, p->cache_nslots, &c);
			if (r < 0) {
				sqlite3_reset(s);
				return meta_err(err, r, "out of memory");
			}
			atomic_store_explicit(&p->cache, c, memory_order_release);
			c->restart_scan = true;
		}
		if (!c || b < 0 || (uint64_t)b >= c->nblocks || slot < 0 || slot >= c->nslots ||
		    atomic_load(&c->word[b])) {
			sqlite3_reset(s);
			return meta_err(err, -EUCLEAN, "the database is damaged: bad cached block "
					"%lld of partition %lld", (long long)b,
					(long long)sqlite3_column_int64(s, 0));
		}
		atomic_store(&c->word[b], WORD(ST_ARMED, slot) | W_DIRTY);
		cw_cache_policy_cached(c->pol, (uint32_t)slot, (uint64_t)b);
		c->armed++;
	}
	sqlite3_reset(s);
	return rc == SQLITE_DONE ? 0 : meta_err(err, meta_errno(rc), "reading cached blocks: %s",
						sqlite3_errmsg(pool->meta->db));
}

int lay_cache_check(struct cw_pool *pool, int (*mark)(void *ctx, uint64_t entry, uint64_t slot),
		    void *ctx)
{
	int r = 0;

	for (struct cw_part *p = pool->parts; p && r == 0; p = p->next)
		for (uint32_t s = 0; s < p->cache_nslots && r == 0; s++)
			r = mark(ctx, p->cache_slots[s], s);
	return r;
}

/* ---- the worker ---- */

static bool moves_run(struct cw_pool *pool)
{
	if (pool->mover.phase != MV_NONE)
		return true;
	for (struct jmove *jm = pool->jmoves; jm; jm = jm->next_move)
		if (jm->info.state == CW_MOVE_RUNNING)
			return true;
	return false;
}

static void drain_then(struct cw_pool *pool, enum cache_phase next)
{
	struct cache_worker *w = &pool->cachew;

	w->parity = gate_bump(w->part);
	w->phase = CP_DRAIN;
	w->after = next;
}

/* Sets block b's word from state `from` to `to` (keeping nothing of the
 * flags), whatever flags writers set meanwhile. */
static void word_move(struct cw_cache *c, uint64_t b, unsigned from, uint64_t to)
{
	uint64_t w = atomic_load(&c->word[b]);

	while (W_STATE(w) == from && !atomic_compare_exchange_weak(&c->word[b], &w, to))
		;
}

static int copy_task(struct cw_pool *pool, struct cw_cache_task *t)
{
	struct cache_worker *w = &pool->cachew;
	struct cw_part *p = w->part;
	uint64_t origin, slot = w->c->slot_entry[w->slot];

	if (w->block >= atomic_load_explicit(&p->nblocks, memory_order_acquire))
		return -ERANGE;
	origin = lay_entry(p, w->block);
	if (!origin || !atomic_load_explicit(&p->available, memory_order_acquire) ||
	    pool->disks[ENTRY_DISK(origin)]->state != CW_DISK_PRESENT)
		return -ENODEV;
	*t = (struct cw_cache_task){ .action = CW_CACHE_COPY, .part = p, .block = w->block,
				     .promote = w->promote, .length = UINT32_C(1) << p->bshift,
				     .sync = !w->promote || w->c->conf.mode == CW_CACHE_WRITE_BACK };
	t->src_disk_id = ENTRY_DISK(w->promote ? origin : slot);
	t->src_offset = ENTRY_PBLOCK(w->promote ? origin : slot) << p->bshift;
	t->dst_disk_id = ENTRY_DISK(w->promote ? slot : origin);
	t->dst_offset = ENTRY_PBLOCK(w->promote ? slot : origin) << p->bshift;
	w->phase = CP_COPYING;
	return 0;
}

static void start(struct cw_pool *pool, struct cw_part *p, struct cw_cache *c, uint64_t b,
		  uint32_t slot)
{
	struct cache_worker *w = &pool->cachew;

	w->part = p;
	w->c = c;
	w->block = b;
	w->slot = slot;
	w->retries = 0;
}

/* Adds block b to the batch of promotions: its slot is taken in the
 * policy at once (so the next decision picks another), and writes to it
 * go to the HDD and mark it REWRITTEN from now on. */
static void batch_add(struct cw_pool *pool, struct cw_cache *c, uint64_t b, uint32_t slot)
{
	struct cache_worker *w = &pool->cachew;

	cw_cache_policy_cached(c->pol, slot, b);
	atomic_store(&c->word[b], WORD(ST_COPYING, slot));
	w->bblock[w->bn] = b;
	w->bslot[w->bn++] = slot;
}

/* The batch's next block, copied after the one drain of the batch (a
 * drained parity stays drained: no I/O joins it again). */
static void batch_next(struct cw_pool *pool)
{
	struct cache_worker *w = &pool->cachew;

	if (w->bi >= w->bn)
		return;
	w->block = w->bblock[w->bi];
	w->slot = w->bslot[w->bi++];
	w->phase = CP_DRAIN;
	w->after = CP_COPY;
}

/* A promotion not done (a write came, a disk failed): the block stays on
 * the HDD only, its slot free. */
static void promote_undo(struct cw_pool *pool)
{
	struct cache_worker *w = &pool->cachew;

	atomic_store(&w->c->word[w->block], WORD(ST_EMPTY, 0));
	cw_cache_policy_uncached(w->c->pol, w->slot);
}

/* Writes back block b (ARMED), then demotes it if demote. */
static void start_clean(struct cw_pool *pool, struct cw_part *p, struct cw_cache *c, uint64_t b,
			bool demote)
{
	uint32_t slot = W_SLOT(atomic_load(&c->word[b]));

	start(pool, p, c, b, slot);
	pool->cachew.promote = false;
	pool->cachew.demote = demote;
	word_move(c, b, ST_ARMED, WORD(ST_CLEANING, slot));
	drain_then(pool, CP_COPY);
}

static void start_demote(struct cw_pool *pool, struct cw_part *p, struct cw_cache *c, uint64_t b)
{
	uint64_t w = atomic_load(&c->word[b]);

	if (W_STATE(w) == ST_ARMED) {
		start_clean(pool, p, c, b, true);
		return;
	}
	start(pool, p, c, b, W_SLOT(w));
	word_move(c, b, ST_VALID, WORD(ST_EMPTY, 0));
	drain_then(pool, CP_FREE);
}

/* The first ARMED block of a cache restarted with armed rows, or
 * UINT64_MAX. */
static uint64_t next_armed(struct cw_cache *c)
{
	for (; c->restart_next < c->nblocks; c->restart_next++)
		if (W_STATE(atomic_load(&c->word[c->restart_next])) == ST_ARMED)
			return c->restart_next;
	c->restart_scan = false;
	return UINT64_MAX;
}

/* A used slot's block, for a cache that retires, or UINT64_MAX. */
static uint64_t any_cached(struct cw_cache *c)
{
	for (uint64_t b = 0; b < c->nblocks; b++)
		if (W_STATE(atomic_load(&c->word[b])) >= ST_VALID)
			return b;
	return UINT64_MAX;
}

/* Puts the stored setting in service once the old cache is empty and
 * unpublished: gives back the slots beyond it, starts the new cache. */
static int apply(struct cw_pool *pool, struct cw_part *p)
{
	uint32_t want = conf_slots(pool, &p->cache_conf);
	struct cw_cache *c = NULL;
	int r;

	if (want < p->cache_nslots) {
		r = meta_exec(pool->meta, sql_slot_trim, 2, (int64_t)p->id, (int64_t)want);
		if (r < 0)
			return r;
		lay_free_entries(pool, p->cache_slots + want, p->cache_nslots - want);
		p->cache_nslots = want;
	}
	if (want) {
		r = cache_new(p, &p->cache_conf, want, &c);
		if (r < 0)
			return r;
		cw_cache_policy_pin(c->pol, p->cache_pin_first, p->cache_pin_n, p->cache_npins);
	}
	atomic_store_explicit(&p->cache, c, memory_order_release);
	return 0;
}

/* Picks the next step of part p's cache; false when it has none. */
static bool pick(struct cw_pool *pool, struct cw_part *p, int64_t now_ns)
{
	struct cw_cache *c = cw_part_cache(p);
	struct cw_cache_decision d;
	uint64_t b;

	if (!c) {
		if (!p->cache_conf.size_bytes && !p->cache_nslots)
			return false;
		if (apply(pool, p) < 0 || !cw_part_cache(p))
			return false;
		c = cw_part_cache(p);
	}
	if (c->restart_scan && (b = next_armed(c)) != UINT64_MAX) {
		start_clean(pool, p, c, b, false);
		return true;
	}
	if (!conf_equal(&c->conf, &p->cache_conf) || c->nslots > p->cache_nslots)
		c->retiring = true;
	if (c->retiring) {
		b = any_cached(c);
		if (b != UINT64_MAX) {
			start_demote(pool, p, c, b);
			return true;
		}
		/* Empty: unpublish it, drain, then apply the new setting. */
		atomic_store_explicit(&p->cache, NULL, memory_order_release);
		start(pool, p, c, 0, 0);
		drain_then(pool, CP_SWAP);
		return true;
	}
	if (c->failed)
		return false;
	cw_cache_policy_tick(c->pol, now_ns);
	/* Promotions in a batch behind one drain: a drain waits for the
	 * partition's I/O in flight, which on a busy HDD costs as much as
	 * the copy. */
	pool->cachew.bn = pool->cachew.bi = 0;
	while (pool->cachew.bn < CW_ARRAY_SIZE(pool->cachew.bblock)) {
		cw_cache_policy_next(c->pol, &d);
		if (d.kind == CW_CACHE_EVICT && !pool->cachew.bn) {
			start_demote(pool, p, c, d.block);
			return true;
		}
		if (d.kind != CW_CACHE_PROMOTE)
			break;
		/* A hole reads as zeros without the cache; a block past the
		 * end (shrunk) has nothing to copy. */
		if (d.block < atomic_load_explicit(&p->nblocks, memory_order_acquire) &&
		    W_STATE(atomic_load(&c->word[d.block])) == ST_EMPTY &&
		    cw_part_allocated(p, d.block << p->bshift, 0, &b) == 1)
			batch_add(pool, c, d.block, d.slot);
	}
	if (!pool->cachew.bn)
		return false;
	start(pool, p, c, 0, 0);
	pool->cachew.promote = true;
	pool->cachew.parity = gate_bump(p);
	batch_next(pool);
	return true;
}

/* After a drain: the step the drain was for. */
static int resume(struct cw_pool *pool, struct cw_cache_task *t)
{
	struct cache_worker *w = &pool->cachew;
	struct cw_part *p = w->part;
	int r;

	w->phase = CP_IDLE;
	switch (w->after) {
	case CP_COPY:
		r = copy_task(pool, t);
		if (r < 0) {	/* the block went away or its disk did */
			if (w->promote) {
				promote_undo(pool);
				batch_next(pool);
			} else {
				word_move(w->c, w->block, ST_CLEANING,
					  WORD(ST_ARMED, w->slot) | W_DIRTY);
				w->c->failed = true;
				w->c->restart_scan = false;
			}
			return 0;
		}
		return 1;
	case CP_FREE:
		cw_cache_policy_uncached(w->c->pol, w->slot);
		p->cache_cnt.demotions++;
		return 0;
	case CP_SWAP:
		p->cache_cnt.refused_before += cw_cache_policy_refused(w->c->pol);
		cache_free(w->c);
		w->c = NULL;
		apply(pool, p);
		return 0;
	default:
		return 0;
	}
}

int cw_cache_next(struct cw_pool *pool, int64_t now_ns, struct cw_cache_task *ret)
{
	struct cache_worker *w = &pool->cachew;
	int r = 0;

	memset(ret, 0, sizeof(*ret));
	pthread_mutex_lock(&pool->lock);
	for (unsigned guard = 0; guard < 64; guard++) {
		if (w->phase == CP_COPYING) {
			r = -EBUSY;
			break;
		}
		if (w->phase == CP_DRAIN) {
			if (!gate_drained(w->part, w->parity)) {
				ret->action = CW_CACHE_WAIT;
				break;
			}
			if (resume(pool, ret) == 1)
				break;
			continue;
		}
		if (moves_run(pool))
			break;
		/* Round robin over the partitions with a cache. */
		struct cw_part *p = w->last ? w->last->next : NULL, *first;
		bool found = false;

		if (!p)
			p = pool->parts;
		first = p;
		while (p && !found) {
			found = pick(pool, p, now_ns);
			w->last = p;
			p = p->next ? p->next : pool->parts;
			if (p == first)
				break;
		}
		if (!found)
			break;
	}
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_cache_copied(struct cw_pool *pool, int read_err, int write_err)
{
	struct cache_worker *w = &pool->cachew;
	struct cw_cache *c = w->c;
	struct cw_part *p = w->part;
	uint64_t b = w->block;
	int r = 0;

	pthread_mutex_lock(&pool->lock);
	if (w->phase != CP_COPYING) {
		r = -EINVAL;
		goto out;
	}
	w->phase = CP_IDLE;
	if (read_err || write_err) {
		/* A promotion is simply not done; a write-back that fails
		 * leaves the block armed (its data is on the SSD) and stops
		 * this cache's work until the daemon restarts. */
		if (w->promote) {
			promote_undo(pool);
			batch_next(pool);
		} else {
			word_move(c, b, ST_CLEANING, WORD(ST_ARMED, w->slot) | W_DIRTY);
			c->failed = true;
			c->restart_scan = false;
		}
		goto out;
	}
	if (w->promote) {
		uint64_t want = WORD(ST_COPYING, w->slot);

		/* A write came during the copy: the block is not promoted now
		 * (it may be again, as any candidate). */
		if (!atomic_compare_exchange_strong(&c->word[b], &want, WORD(ST_VALID, w->slot))) {
			promote_undo(pool);
			batch_next(pool);
			goto out;
		}
		p->cache_cnt.promotions++;
		/* Write-back: the row first, then writes may go to the SSD
		 * only.  Without the row the block stays write-through. */
		if (c->conf.mode == CW_CACHE_WRITE_BACK &&
		    meta_exec(pool->meta, sql_arm, 3, (int64_t)p->id, (int64_t)b,
			      (int64_t)w->slot) == 0) {
			word_move(c, b, ST_VALID, WORD(ST_ARMED, w->slot));
			c->armed++;
		}
		batch_next(pool);
		goto out;
	}
	{
		uint64_t want = WORD(ST_CLEANING, w->slot);

		if (!atomic_compare_exchange_strong(&c->word[b], &want, WORD(ST_VALID, w->slot))) {
			if (++w->retries >= CACHE_RETRIES) {	/* try again later */
				word_move(c, b, ST_CLEANING, WORD(ST_ARMED, w->slot) | W_DIRTY);
				goto out;
			}
			word_move(c, b, ST_CLEANING, WORD(ST_CLEANING, w->slot));
			drain_then(pool, CP_COPY);
			goto out;
		}
	}
	/* The HDD holds the block: the row may go.  If it cannot, the block
	 * is armed again (its row says so) and the next restart writes it
	 * back once more, which is harmless. */
	r = meta_exec(pool->meta, sql_disarm, 2, (int64_t)p->id, (int64_t)b);
	if (r < 0) {
		word_move(c, b, ST_VALID, WORD(ST_ARMED, w->slot));
		c->failed = true;
		goto out;
	}
	c->armed--;
	p->cache_cnt.writebacks++;
	if (w->demote) {
		word_move(c, b, ST_VALID, WORD(ST_EMPTY, 0));
		drain_then(pool, CP_FREE);
	}
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

bool lay_cache_busy(const struct cw_pool *pool)
{
	return pool->cachew.phase != CP_IDLE;
}
