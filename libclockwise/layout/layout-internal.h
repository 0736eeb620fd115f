/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * layout — private structures of the volume layer.  Sections follow the
 * files: label.c, alloc.c, runs.c, pool.c, part.c, move.c.
 *
 * The in-memory state mirrors the database exactly after every committed
 * transaction: a disk's bitmap has a bit set for its label block, for every
 * block some partition maps, and for every target block reserved by a
 * pending move plan (reservations are memory only, so they vanish if the
 * process dies).
 */
#ifndef CW_LAYOUT_INTERNAL_H
#define CW_LAYOUT_INTERNAL_H

#include <pthread.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/types.h>

#include <clockwise/layout.h>
#include <clockwise/mover.h>
#include <clockwise/cache.h>

#include "meta/meta-internal.h"

/* ---- label.c ---- */

#define LABEL_MAGIC "CLKWISE\x01"
#define LABEL_VERSION 1
#define LABEL_BYTES 4096	/* read and written; the rest of block 0 is unused */

struct label {
	uint32_t version;
	uint8_t pool_uuid[16];
	uint8_t disk_uuid[16];
	uint32_t block_size;
	uint32_t tier;
	uint64_t nblocks;
};

uint32_t lay_crc32c(uint32_t crc, const void *buf, size_t len);
void lay_label_encode(const struct label *l, uint8_t buf[LABEL_BYTES]);
/* -ENOMSG: no label at all; -EUCLEAN: a label that is damaged. */
int lay_label_decode(const uint8_t buf[LABEL_BYTES], struct label *ret);
int lay_uuid_random(uint8_t ret[16]);

/* ---- alloc.c: free space per disk and zone, placement ---- */

struct disk {
	uint32_t id;
	enum cw_tier tier;
	enum cw_disk_state state;
	uint8_t uuid[16];
	char name[CW_NAME_MAX + 1];
	char *path;
	uint64_t dev, ino;		/* cw_io_identity */
	int fd;
	uint64_t capacity_bytes;
	uint64_t found_bytes;		/* its size at open (CW_DISK_SHRUNK says) */
	uint64_t nblocks;		/* including the label block 0 */
	uint64_t *bitmap;		/* bit set: block in use */
	uint64_t free;
	uint64_t zone_start[CW_ZONES + 1];	/* in blocks; [0] = 1 */
	uint64_t zone_free[CW_ZONES];
	uint64_t low;			/* no free block below this */
	uint64_t high;			/* no free block at or above this */
	uint64_t cursor;		/* CW_ZONE_ANY: next-fit start */
	char domain[CW_NAME_MAX + 1];	/* failure domain; "": its own */
	bool spare;			/* given no block but by a replacement */
	char *unreplaced;		/* cw_disk_set_unreplaced's (NULL: none) */
};

/* Disk id of the pool in *ret, or -ENOENT with the reason set. */
int lay_disk_find(struct cw_pool *pool, uint32_t id, struct disk **ret);

/* Whether copies on a and b could fail together: the same disk, or the
 * same named domain on disks of one kind (an RBD image and a local disk
 * never share a domain). */
static inline bool lay_same_domain(const struct disk *a, const struct disk *b)
{
	if (a == b)
		return true;
	if (!a->domain[0] || !b->domain[0])
		return false;
	if ((a->tier == CW_TIER_RBD) != (b->tier == CW_TIER_RBD))
		return false;
	return strcmp(a->domain, b->domain) == 0;
}

/* One mapping word: disk id in the top 16 bits, physical block below; 0
 * means "no block". */
#define ENTRY(disk, pblock) (((uint64_t)(disk) << 48) | (uint64_t)(pblock))
#define ENTRY_DISK(e) ((uint32_t)((e) >> 48))
#define ENTRY_PBLOCK(e) ((e) & ((UINT64_C(1) << 48) - 1))

int lay_disk_init_space(struct disk *d);
bool lay_disk_test(const struct disk *d, uint64_t pblock);
void lay_disk_mark(struct disk *d, uint64_t pblock);	/* must be free */
void lay_disk_put(struct disk *d, uint64_t pblock);	/* must be used */

struct placement {
	enum cw_placement policy;
	enum cw_zone_pref zone;
	struct disk **disks;		/* candidates, by id */
	size_t ndisks;
	uint32_t after_disk;		/* rotation starts after this id */
};

/* Takes n blocks by the placement into ret_entries, or nothing:
 * -ENOSPC when the candidates hold fewer than n free blocks (for single:
 * when no one disk does), with ret_avail the blocks that were available. */
int lay_alloc(struct cw_pool *pool, const struct placement *pl, uint64_t n,
	      uint64_t *ret_entries, uint64_t *ret_avail);
/* Copy c (>= 1) of n blocks whose copies 0..c-1 are in prev[k][0..n),
 * each on a candidate that shares a domain with none of them, by the
 * placement (rotation: the next such disk after copy c-1's; random: one
 * at random; single: one such disk for all).  Nothing is taken on
 * failure: -ENOSPC (a block found no such disk with room; *ret_block
 * says which). */
int lay_alloc_copy(struct cw_pool *pool, const struct placement *pl, uint64_t n,
		   uint64_t *const *prev, unsigned c, uint64_t *ret_entries, uint64_t *ret_block);
/* How many distinct failure domains the candidates span. */
static inline unsigned lay_domains(const struct placement *pl)
{
	unsigned n = 0;

	for (size_t i = 0; i < pl->ndisks; i++) {
		bool seen = false;

		for (size_t k = 0; k < i && !seen; k++)
			seen = lay_same_domain(pl->disks[i], pl->disks[k]);
		n += !seen;
	}
	return n;
}
/* The blocks lay_alloc() could take by the placement: checked before
 * anything is allocated for a request, so an absurd size costs nothing. */
uint64_t lay_available(const struct placement *pl);
void lay_free_entries(struct cw_pool *pool, const uint64_t *entries, uint64_t n);
/* alloc.c: the present disks that may take n new blocks under o, limited
 * to only[] when given; a tier preference falls back to every disk unless
 * strict.  buf holds CW_DISKS_MAX pointers. */
int lay_candidates(struct cw_pool *pool, const struct cw_part_opts *o, const uint32_t *only,
		   size_t nonly, bool strict, uint64_t n, struct placement *pl, struct disk **buf);
int lay_parts_load(struct cw_pool *pool, struct cw_error *err);

/* ---- runs.c: block runs in the database ---- */

/* Replaces the runs of logical blocks [a, b) of a partition by the mapping
 * entries[0 .. b-a) (NULL: the range becomes unmapped). */
int lay_runs_replace(struct meta *m, uint64_t part_id, uint64_t a, uint64_t b,
		     const uint64_t *entries);
/* The same for copy c of the partition (c 0: lay_runs_replace). */
int lay_runs_replace_copy(struct meta *m, uint64_t part_id, uint32_t c, uint64_t a, uint64_t b,
			  const uint64_t *entries);
/* Calls fn for each run of the pool; stops at the first error. */
struct run {
	uint64_t part;
	uint32_t copy;			/* 0: table run; 1, 2: copy_run */
	uint64_t lstart, count, stride;
	uint32_t disk;
	uint64_t pstart;
};
int lay_runs_load(struct meta *m, int (*fn)(void *ctx, const struct run *r), void *ctx);
/* The same over copy_run (the runs of copies 1 and 2). */
int lay_copy_runs_load(struct meta *m, int (*fn)(void *ctx, const struct run *r), void *ctx);

/* ---- pool.c / part.c: the lock-free block map ---- */

#define CHUNK_SHIFT 12
#define CHUNK_ENTRIES (1u << CHUNK_SHIFT)
/* After its CHUNK_ENTRIES mapping words, a chunk holds the hole bitmap of
 * its blocks (holes.c): HOLE_WORDS words, bit b%64 of word b/64. */
#define HOLE_WORDS (CHUNK_ENTRIES / 64)
#define CHUNK_WORDS (CHUNK_ENTRIES + HOLE_WORDS)

/* A directory of fixed chunks.  Chunks never move; a growing partition
 * publishes a larger directory and keeps the old one until it is freed,
 * so a reader holding an old directory still reads valid chunks. */
struct blockdir {
	size_t nchunks;
	struct blockdir *older;		/* retired directories, freed with the part */
	_Atomic uint64_t *chunk[];
};

struct cw_part {
	struct cw_pool *pool;
	uint64_t id;
	char name[CW_NAME_MAX + 1];
	struct cw_part_opts opts;
	uint32_t bshift;
	_Atomic uint64_t nblocks;
	_Atomic(struct blockdir *) dir;
	atomic_bool available;
	/* Blocks on disks that are not present (cw_part_info.missing_blocks);
	 * 0 lets cw_part_map skip looking at each block's disk. */
	_Atomic uint64_t missing;
	uint64_t gen;			/* bumped by shrink and move commit */
	/* Copies of each block (opts.copies, at least 1).  With more than
	 * one, xdir holds the others: per chunk, (copies - 1) runs of
	 * CHUNK_ENTRIES mapping words (copy 1's, then copy 2's), then
	 * copies runs of HOLE_WORDS words, the out-of-sync bits of copy
	 * 0, 1, 2.  It grows with dir, published before it; a partition
	 * with one copy has none and its hot path never looks. */
	uint32_t copies;
	_Atomic(struct blockdir *) xdir;
	_Atomic uint64_t stale;		/* set out-of-sync bits */
	bool tier_fallback;		/* a tier preference may fall back */
	/* The I/O gate (mover.c): in-flight I/O per epoch parity, and the
	 * blocks being copied: copy_nslots slots of the mover's batch, each
	 * with its block (block + 1; 0: none), source and destination
	 * mapping words and whether a write overlapped it, and the range
	 * [copy_lo, copy_hi) of blocks they lie in (a quick test for the
	 * writes that touch none). */
	_Atomic uint64_t io_epoch;
	_Atomic uint64_t io_active[2];
	_Atomic unsigned copy_nslots;
	_Atomic uint64_t copy_lo, copy_hi;
	struct copy_slot {
		_Atomic uint64_t block;
		_Atomic uint64_t src, dst;
		atomic_bool dirty;
	} copy[CW_MOVER_DEPTH_MAX];
	/* The SSD cache (cache.c): the stored setting, the slots it owns
	 * (mapping words), the cache in service (read lock-free), the
	 * reserved ranges it must not move, and its counters. */
	struct cw_cache_conf cache_conf;
	uint64_t *cache_slots;
	uint32_t cache_nslots;
	_Atomic(struct cw_cache *) cache;
	uint64_t cache_pin_first[64], cache_pin_n[64];
	size_t cache_npins;
	struct {
		_Atomic uint64_t hits, misses;
		uint64_t promotions, demotions, writebacks, refused_before;
	} cache_cnt;
	struct cw_part *next;
};

struct cw_move {
	struct cw_pool *pool;
	struct cw_part *part;
	uint64_t gen;
	uint64_t first, n;
	uint64_t *old;			/* entries of the range at plan time */
	uint64_t *new;			/* entries after the move */
	struct cw_move_step *steps;
	size_t nsteps;
	struct cw_move *next;
};

/* journal.c: an unfinished journalled move, with the blocks still to
 * move (steps[next..nsteps), each destination reserved). */
struct jstep {
	uint64_t block, src, dst;	/* logical block, mapping words */
	uint64_t from;			/* the batch's: where the copy is read (src, or
					 * another copy's word when copy `copy` is out
					 * of sync: a rebuild) */
	uint32_t copy;			/* the copy of the block that moves; src == dst:
					 * rewritten in place */
};

struct jmove {
	struct cw_move_info info;
	struct cw_part *part;
	struct jstep *steps;
	size_t nsteps, next;
	struct jmove *next_move;
};

/* The mover's batch: blocks steps[next..next + n) of one move, each in
 * copy slot i of its partition.  MV_DRAIN: waiting for the gate's drain
 * (before a copy, before what is freed is freed); MV_COPYING: the copies
 * of the blocks in state MB_OUT are the caller's. */
enum mover_phase { MV_NONE, MV_DRAIN, MV_COPYING };

enum mover_bstate {
	MB_COPY,	/* to copy (again), once drained */
	MB_OUT,		/* its copy handed out */
	MB_MOVED,	/* switched: src given back once drained */
	MB_DROP,	/* failed or skipped or cancelled: dst given back once drained */
	MB_LEFT,	/* stays planned (paused): nothing given back */
	MB_END,		/* settled */
};

struct mover_block {
	struct jstep st;
	enum mover_bstate state;
	bool cleared;			/* its slot was cleared before the drain */
	int row;			/* MB_DROP: ROW_FAILED or ROW_SKIPPED, or -1 (cancelled) */
	unsigned retries;
	bool wrote;			/* a rebuild's or repair's dst rewritten from st.from */
};

struct mover {
	enum mover_phase phase;
	struct jmove *jm;		/* whose batch is in flight */
	struct cw_part *part;
	unsigned n;			/* blocks in the batch */
	unsigned parity;		/* the epoch parity being drained */
	struct mover_block b[CW_MOVER_DEPTH_MAX];
	unsigned out[CW_MOVER_DEPTH_MAX];	/* MV_COPYING: the blocks handed out */
	unsigned nout;
};

/* cache.c: the one step of the caches under way. */
enum cache_phase { CP_IDLE, CP_DRAIN, CP_COPYING, CP_COPY, CP_FREE, CP_SWAP };

struct cache_worker {
	enum cache_phase phase, after;	/* after: what follows a drain */
	struct cw_part *part, *last;	/* last: round robin */
	struct cw_cache *c;
	uint64_t block;
	uint32_t slot;
	bool promote, demote;
	unsigned parity, retries;
	/* Promotions go in batches behind one drain: bn blocks, bi next. */
	uint64_t bblock[16];
	uint32_t bslot[16];
	unsigned bn, bi;
};

int lay_cache_load(struct cw_pool *pool, struct cw_error *err);
void lay_cache_free(struct cw_part *p);
bool lay_cache_busy(const struct cw_pool *pool);
bool lay_cache_on_disk(const struct cw_part *p, uint32_t disk_id);
int lay_cache_check(struct cw_pool *pool, int (*mark)(void *ctx, uint64_t entry, uint64_t slot),
		    void *ctx);

struct cw_pool {
	pthread_mutex_t lock;
	struct meta *meta;
	char *db_path;
	uint8_t uuid[16];
	uint32_t block_size;
	uint32_t bshift;
	struct disk *disks[CW_DISKS_MAX + 1];
	_Atomic int fds[CW_DISKS_MAX + 1];
	struct cw_part *parts;
	struct cw_move *moves;
	struct jmove *jmoves;
	struct mover mover;
	/* The copies the write-intent recovery marked out of sync, for
	 * rebuild.c to resync: from the recovery to the end of the open, and
	 * after it those of partitions that had a move unfinished then,
	 * until it ends. */
	struct lay_resync {
		uint64_t part_id;
		uint64_t region;
		uint64_t marked[CW_COPIES_MAX];	/* per copy, the region's bits */
	} *resync;
	size_t nresync, resync_cap;
	struct cache_worker cachew;
	struct cw_cache_policy_opts cache_opts;
	uint64_t rng;
	struct cw_error err;
};

uint64_t lay_random(struct cw_pool *pool);
int lay_set_error(struct cw_pool *pool, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Entry of logical block b (b below the published size). */
static inline uint64_t lay_entry(const struct cw_part *p, uint64_t b)
{
	struct blockdir *d = atomic_load_explicit(&((struct cw_part *)p)->dir,
						  memory_order_acquire);

	return atomic_load_explicit(&d->chunk[b >> CHUNK_SHIFT][b & (CHUNK_ENTRIES - 1)],
				    memory_order_acquire);
}

/* The word of the hole bitmap that holds block b's bit (b below the
 * reserved size). */
static inline _Atomic uint64_t *lay_hole_word(const struct cw_part *p, uint64_t b)
{
	struct blockdir *d = atomic_load_explicit(&((struct cw_part *)p)->dir,
						  memory_order_acquire);

	return &d->chunk[b >> CHUNK_SHIFT][CHUNK_ENTRIES + ((b & (CHUNK_ENTRIES - 1)) >> 6)];
}

int lay_part_reserve(struct cw_part *p, uint64_t nblocks);
void lay_part_store(struct cw_part *p, uint64_t b, uint64_t entry);

/* Words of an xdir chunk of a partition with copies k: the copies'
 * mapping words, their out-of-sync bits, then one write-intent word per
 * region of the chunk (intent.c). */
#define INTENT_WORDS (CHUNK_ENTRIES / CW_INTENT_REGION_BLOCKS)
#define XCHUNK_WORDS(k) ((size_t)((k) - 1) * CHUNK_ENTRIES + (size_t)(k) * HOLE_WORDS + \
			 INTENT_WORDS)

/* The word of copy c (>= 1) of block b, and of b's out-of-sync bit of
 * copy c (any), b below the reserved size. */
static inline _Atomic uint64_t *lay_xword(const struct cw_part *p, unsigned c, uint64_t b)
{
	struct blockdir *d = atomic_load_explicit(&((struct cw_part *)p)->xdir,
						  memory_order_acquire);

	return &d->chunk[b >> CHUNK_SHIFT][(size_t)(c - 1) * CHUNK_ENTRIES + (b & (CHUNK_ENTRIES - 1))];
}

static inline _Atomic uint64_t *lay_stale_word(const struct cw_part *p, unsigned c, uint64_t b)
{
	struct blockdir *d = atomic_load_explicit(&((struct cw_part *)p)->xdir,
						  memory_order_acquire);

	return &d->chunk[b >> CHUNK_SHIFT][(size_t)(p->copies - 1) * CHUNK_ENTRIES +
					   (size_t)c * HOLE_WORDS +
					   ((b & (CHUNK_ENTRIES - 1)) >> 6)];
}

/* The write-intent word of region r (intent.c), r below the reserved
 * size's regions. */
static inline _Atomic uint64_t *lay_intent_word(const struct cw_part *p, uint64_t r)
{
	struct blockdir *d = atomic_load_explicit(&((struct cw_part *)p)->xdir,
						  memory_order_acquire);
	uint64_t b = r * CW_INTENT_REGION_BLOCKS;

	return &d->chunk[b >> CHUNK_SHIFT][XCHUNK_WORDS(p->copies) - INTENT_WORDS +
					   ((b & (CHUNK_ENTRIES - 1)) / CW_INTENT_REGION_BLOCKS)];
}

/* Mapping word of copy c of block b (c 0: lay_entry). */
static inline uint64_t lay_copy_entry(const struct cw_part *p, unsigned c, uint64_t b)
{
	return c == 0 ? lay_entry(p, b)
		      : atomic_load_explicit(lay_xword(p, c, b), memory_order_acquire);
}

void lay_copy_store(struct cw_part *p, unsigned c, uint64_t b, uint64_t entry);
/* Loads every partition's out-of-sync bits at open (copy_stale). */
int lay_stale_load(struct cw_pool *pool, struct cw_error *err);
/* Forgets the out-of-sync bits of p past block nblocks in the database
 * (a shrink), inside the caller's transaction. */
int lay_stale_truncate(struct meta *m, const struct cw_part *p, uint64_t nblocks);
/* Writes the out-of-sync bits of copy c in chunk `chunk` of p as they are
 * in memory (a row, or none when all are clear), inside the caller's
 * transaction. */
int lay_stale_store_chunk(struct meta *m, const struct cw_part *p, unsigned c, uint64_t chunk);
/* intent.c: at open, after lay_stale_load, the regions a crash left
 * dirty: every copy of their blocks but the first in sync is marked out
 * of sync, and the record is emptied (one transaction). */
int lay_intent_recover(struct cw_pool *pool, struct cw_error *err);
/* rebuild.c: at the end of the open, a rebuild move journalled for each
 * partition with copies the intent recovery marked (pool->resync); one
 * with an unfinished move keeps them for lay_rebuild_pending, which the
 * mover calls as that move ends.  They stay out of sync if a rebuild
 * cannot be journalled (cw_part_rebuild takes them later), or if the
 * daemon stops before. */
void lay_rebuild_recovered(struct cw_pool *pool);
void lay_rebuild_pending(struct cw_pool *pool, struct cw_part *p);
/* At close: forgets every dirty region with no write in flight. */
void lay_intent_close(struct cw_pool *pool);
/* Forgets p's write-intent rows past block nblocks, inside the caller's
 * transaction (a shrink). */
int lay_intent_truncate(struct meta *m, const struct cw_part *p, uint64_t nblocks);
void lay_part_free(struct cw_part *p);
void lay_part_update_available(struct cw_part *p);
/* The same for a change to blocks [b, b + n) only: how many of them are
 * gone (no copy present and in sync), before and after the change. */
uint64_t lay_part_gone(const struct cw_part *p, uint64_t b, uint64_t n);
void lay_part_gone_changed(struct cw_part *p, uint64_t before, uint64_t after);
void lay_move_free(struct cw_move *m);
void lay_move_drop(struct cw_pool *pool, struct cw_move *m);
/* Gives back the targets of m's steps (but of those rewritten in place)
 * and forgets the steps. */
void lay_move_drop_steps(struct cw_pool *pool, struct cw_move *m);
/* The mapping word of a step's destination. */
static inline uint64_t lay_step_dst(const struct cw_pool *pool, const struct cw_move_step *st)
{
	return ENTRY(st->dst_disk_id, st->dst_offset >> pool->bshift);
}
/* move.c: cw_move_plan() under the pool lock, and unlinking a plan. */
int lay_move_plan(struct cw_part *p, uint64_t first_block, uint64_t nblocks,
		  const struct cw_move_opts *opts, struct cw_move **ret_move);
void lay_move_unlink(struct cw_pool *pool, struct cw_move *m);

/* ---- journal.c: journalled moves and the mover ---- */

/* Loads the unfinished moves at open and reserves their destinations
 * (after the partitions, before the check). */
int lay_journal_load(struct cw_pool *pool, struct cw_error *err);
void lay_journal_free(struct cw_pool *pool);
/* What became of a journalled block (move_block.state). */
enum { ROW_PLANNED = 0, ROW_MOVED = 1, ROW_FAILED = 2, ROW_SKIPPED = 3 };

/* Records the outcome of st (row) and the move's counters in one
 * transaction; a moved block with its new run. */
int lay_journal_step(struct cw_pool *pool, struct jmove *jm, const struct jstep *st, int row);
/* The same for n steps in one transaction. */
int lay_journal_steps(struct cw_pool *pool, struct jmove *jm, const struct jstep *const *st,
		      const int *rows, size_t n);
int lay_journal_set_state(struct cw_pool *pool, struct jmove *jm, enum cw_move_state st,
			  const char *error);
void lay_jmove_free(struct jmove *jm);
/* Journals plans[0..n) (each of partition plans[i]->part) in one
 * transaction and hands their reservations over to the journal; on
 * failure every plan is dropped with its reservations.  Under the lock. */
int lay_journal_plans(struct cw_pool *pool, struct cw_move **plans, size_t n,
		      enum cw_move_kind kind, uint32_t disk, const struct cw_move_opts *o,
		      bool set_opts, const char *paused, uint64_t *ret_ids);
/* copies.c: sets (stale) or clears the out-of-sync bits of copy c of
 * blocks [b, b + n) in memory only; returns how many changed. */
uint64_t lay_stale_flip(struct cw_part *p, unsigned c, uint64_t b, uint64_t n, bool stale);
/* cw_part_copy_set_stale() under the pool lock. */
int lay_copy_set_stale(struct cw_part *p, uint32_t copy, uint64_t block, uint64_t n, bool stale);
void lay_jmove_unlink(struct cw_pool *pool, struct jmove *jm);
/* Whether jm's blocks steps[next..next + mover.n) are the mover's batch. */
static inline bool lay_mover_in_flight(const struct cw_pool *pool, const struct jmove *jm)
{
	return pool->mover.jm == jm && pool->mover.phase != MV_NONE;
}
struct cw_part *lay_part_by_id(struct cw_pool *pool, uint64_t id);
/* Whether p has an unfinished move (under the pool lock). */
static inline bool lay_journal_busy(const struct cw_pool *pool, const struct cw_part *p)
{
	for (const struct jmove *jm = pool->jmoves; jm; jm = jm->next_move)
		if (jm->part == p)
			return true;
	return false;
}
/* Calls fn for every block the journal and the mover hold reserved. */
int lay_journal_reserved(struct cw_pool *pool, int (*fn)(void *ctx, uint64_t entry,
							 uint64_t block), void *ctx);

/* ---- holes.c: which blocks of a partition are holes ---- */

/* Makes blocks [first, first + n) of p holes, in memory and, inside the
 * caller's transaction, in the database (a new or grown range). */
int lay_holes_new(struct meta *m, struct cw_part *p, uint64_t first, uint64_t n);
/* Forgets the database's hole rows past block nblocks (a shrink). */
int lay_holes_truncate(struct meta *m, const struct cw_part *p, uint64_t nblocks);
/* Loads every partition's holes at open. */
int lay_holes_load(struct cw_pool *pool, struct cw_error *err);

/* ---- objects.c: reservations and exports ---- */

/* -EBUSY with the reason set when a reservation or an export holds the
 * partition (or a reservation has a part on the disk); 0 when nothing
 * does; -errno.  Called under the pool lock. */
int lay_part_users(struct cw_pool *pool, const struct cw_part *p);
int lay_disk_users(struct cw_pool *pool, const struct disk *d);

/* Consistency check used by open and by tests: the bitmaps, free counts
 * and partition maps agree, and no block is owned twice.  Reservations of
 * pending moves count as owned. */
int lay_pool_check(struct cw_pool *pool, struct cw_error *err);

#endif
