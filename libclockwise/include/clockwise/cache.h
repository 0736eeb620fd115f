/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwise/cache.h — the SSD cache of an HDD partition: S bytes of SSD
 * blocks that hold copies of the partition's hottest blocks.
 *
 * Two layers:
 *
 *   - the policy (cw_cache_policy_*): pure bookkeeping of block heat with
 *     decay, in the spirit of dm-cache's smq: hit counters per hotspot
 *     (a bounded number, each covering one block or more), cached blocks
 *     kept in a multiqueue of heat levels, a block promoted only when it
 *     is hotter than the coldest cached one by a threshold.  No clock and
 *     no I/O: the daemon and cwsim drive the same code.  cw_cache_policy_hit
 *     is lock-free and allocates nothing; everything else is called by one
 *     thread (the worker);
 *
 *   - a partition's cache (cw_part_cache_*, cw_cache_*): its space in the
 *     pool (SSD blocks owned by the partition's cache, kept in the pool
 *     database), the lock-free routing of reads and writes, and the state
 *     machine that promotes and demotes blocks, driven like the mover
 *     (clockwise/mover.h): the caller asks cw_cache_next() what to do,
 *     copies one block, and reports with cw_cache_copied().
 *
 * Write-through (the default): a write to a cached block goes to both
 * places, so the HDD always holds the data and the cache starts cold after
 * a restart.  Write-back: a cached block is "armed" by a row in the pool
 * database before writes to it go to the SSD only; after a crash every
 * armed block is written back before anything else (a row exists for as
 * long as the SSD copy may be newer than the HDD), so a kill -9 loses
 * nothing.
 *
 * Rule 2: a block in the range of an active reservation is cached only
 * while its stream is booked on the cache's disks too
 * (cw_admit_state_cache_sync); the admission state pins the other ranges
 * (cw_cache_pin): their blocks are not promoted (counted as refused),
 * and those cached before the pin are demoted first.
 */
#ifndef CLOCKWISE_CACHE_H
#define CLOCKWISE_CACHE_H

#include <clockwise/layout.h>

#ifdef __cplusplus
extern "C" {
#endif

enum cw_cache_mode {
	CW_CACHE_WRITE_THROUGH = 0,
	CW_CACHE_WRITE_BACK = 1,
};

/* "write-through" "write-back"; -EINVAL otherwise. */
int cw_cache_mode_parse(const char *s, enum cw_cache_mode *ret);
const char *cw_cache_mode_name(enum cw_cache_mode m);	/* NULL if invalid */

/* ---- the policy ---- */

struct cw_cache_policy;

struct cw_cache_policy_opts {
	int64_t tick_ns;		/* heat decays once per tick (0: 1 s) */
	unsigned decay_shift;		/* heat -= heat >> decay_shift per tick (0: 10,
				 * a half-life of some 710 ticks) */
	unsigned promote_levels;	/* hotter than the coldest by this many levels (0: 1) */
	uint32_t min_hits;		/* hits before a block is a candidate (0: 1) */
	uint32_t max_hotspots;		/* bound of hit counters (0: 1 << 20) */
};

/* A policy for nblocks blocks and nslots cache slots. */
int cw_cache_policy_new(uint64_t nblocks, uint32_t nslots, const struct cw_cache_policy_opts *o,
			struct cw_cache_policy **ret);
void cw_cache_policy_free(struct cw_cache_policy *p);	/* NULL-safe */

/* A block was read or written; slot is its cache slot, or UINT32_MAX when
 * it is not cached.  Lock-free, no allocation; blocks past nblocks are
 * ignored. */
void cw_cache_policy_hit(struct cw_cache_policy *p, uint64_t block, uint32_t slot);

/* Decays heat when a tick has passed since the last one. */
void cw_cache_policy_tick(struct cw_cache_policy *p, int64_t now_ns);

enum cw_cache_decision_kind {
	CW_CACHE_NONE = 0,
	CW_CACHE_PROMOTE = 1,	/* copy block into the free slot */
	CW_CACHE_EVICT = 2,	/* demote the block of slot to make room */
};

struct cw_cache_decision {
	enum cw_cache_decision_kind kind;
	uint64_t block;		/* PROMOTE: the block; EVICT: the victim */
	uint32_t slot;
};

/* What to do next.  A cached block in a pinned range is evicted first;
 * then a candidate hotter than the coldest cached block by the threshold
 * evicts it (the candidate is kept for the next call); candidates in a
 * pinned range are refused and counted. */
void cw_cache_policy_next(struct cw_cache_policy *p, struct cw_cache_decision *ret);

/* The worker tells the policy what became of a slot. */
void cw_cache_policy_cached(struct cw_cache_policy *p, uint32_t slot, uint64_t block);
void cw_cache_policy_uncached(struct cw_cache_policy *p, uint32_t slot);

/* Block ranges that must not be cached (rule 2): [first[i], first[i] +
 * n[i]).  Replaces the previous set; at most 64 ranges (-E2BIG). */
int cw_cache_policy_pin(struct cw_cache_policy *p, const uint64_t *first, const uint64_t *n,
			size_t nranges);
bool cw_cache_policy_pinned(const struct cw_cache_policy *p, uint64_t block);

/* Heat of a block (its hotspot's) and the level it maps to, for tests
 * and stats. */
uint32_t cw_cache_policy_heat(const struct cw_cache_policy *p, uint64_t block);
unsigned cw_cache_policy_level(uint32_t heat);
/* The coldest cached slot outside pinned ranges, or UINT32_MAX. */
uint32_t cw_cache_policy_coldest(const struct cw_cache_policy *p);
uint64_t cw_cache_policy_refused(const struct cw_cache_policy *p);
uint32_t cw_cache_policy_used(const struct cw_cache_policy *p);

/* ---- a partition's cache ---- */

/* The policy options of the caches a pool starts from now on (NULL: the
 * defaults). */
void cw_pool_cache_policy(struct cw_pool *pool, const struct cw_cache_policy_opts *o);

struct cw_cache_conf {
	uint64_t size_bytes;		/* 0: no cache */
	enum cw_cache_mode mode;
};

/* Gives part size_bytes (rounded up to blocks) of SSD-tier blocks as its
 * cache, or none (0).  Growing takes the blocks at once: -ENOSPC, with the
 * free SSD space in cw_pool_last_error(), when they do not fit.  The
 * worker applies a change (cw_cache_next): the cached blocks of the old
 * setting are demoted (written back when armed) before the space shrinks
 * and the new cache starts.  -EINVAL for a partition that lives on SSDs
 * or a bad mode; -EBUSY while the partition is being moved. */
int cw_part_cache_set(struct cw_part *part, const struct cw_cache_conf *conf);
/* The stored setting. */
int cw_part_cache_get(struct cw_part *part, struct cw_cache_conf *ret);

struct cw_cache;

/* The cache in service for part, or NULL (lock-free). */
struct cw_cache *cw_part_cache(const struct cw_part *part);

/* ---- routing (lock-free; inside cw_part_io_begin/end) ---- */

enum cw_cache_route {
	CW_CACHE_ORIGIN = 0,	/* the partition's own block */
	CW_CACHE_SSD = 1,	/* the cache copy only */
	CW_CACHE_BOTH = 2,	/* a write to both */
};

/* Where a read (write false) or a write of bytes [offset, offset + len)
 * of one block goes; ret_ssd gets the cache copy's extent for SSD and
 * BOTH.  Reads count as hits or misses, and every access heats its
 * block. */
enum cw_cache_route cw_cache_route(struct cw_cache *c, uint64_t offset, uint64_t len, bool write,
				   struct cw_extent *ret_ssd);

/* ---- the worker ---- */

enum cw_cache_action {
	CW_CACHE_IDLE = 0,	/* nothing to do */
	CW_CACHE_WAIT = 1,	/* I/O in flight must drain: ask again soon */
	CW_CACHE_COPY = 2,	/* copy src to dst (sync dst if sync), cw_cache_copied() */
};

struct cw_cache_task {
	enum cw_cache_action action;
	struct cw_part *part;
	uint64_t block;
	bool promote;			/* HDD to SSD; false: written back */
	bool sync;			/* dst must be durable before cw_cache_copied(): a
					 * write-back, or a promotion that arms the block;
					 * a write-through copy is lost with the cache
					 * at a restart anyway */
	uint32_t src_disk_id, dst_disk_id;
	uint64_t src_offset, dst_offset;	/* physical bytes */
	uint32_t length;
};

/* The next step of the pool's caches (settings to apply, blocks to write
 * back after a restart, promotions, demotions), one block at a time.
 * Call it only when no move runs (cw_mover_busy() false): they share the
 * partitions' I/O gates.  -EBUSY while a COPY is outstanding. */
int cw_cache_next(struct cw_pool *pool, int64_t now_ns, struct cw_cache_task *ret);
/* The outcome of the outstanding COPY (0 or -errno of the read, of the
 * write and sync). */
int cw_cache_copied(struct cw_pool *pool, int read_err, int write_err);

/* Pins the blocks of part in the given ranges (rule 2), see
 * cw_cache_policy_pin. */
int cw_cache_pin(struct cw_part *part, const uint64_t *first, const uint64_t *n, size_t nranges);
/* Whether block of part is in a range pinned now (whether its cache is in
 * service or not). */
bool cw_cache_pinned(struct cw_part *part, uint64_t block);

struct cw_cache_stats {
	struct cw_cache_conf conf;	/* in service */
	uint32_t slots;			/* of the cache in service */
	uint32_t used;			/* slots holding a block */
	uint32_t dirty;			/* written on the SSD only */
	uint32_t armed;			/* write-back rows */
	uint64_t hits, misses;		/* reads, one per block touched */
	uint64_t promotions, demotions, writebacks;
	uint64_t refused_reserved;	/* candidates in a reserved range */
	bool pending;			/* a new setting waits for the worker */
};

/* Since the pool opened; -ENOENT when part has no cache. */
int cw_part_cache_stats(struct cw_part *part, struct cw_cache_stats *ret);

/* The SSD disks holding part's cache slots (ret_ids has room for
 * CW_DISKS_MAX); the count. */
size_t cw_part_cache_disks(struct cw_part *part, uint32_t *ret_ids);

#ifdef __cplusplus
}
#endif
#endif
