/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Dynamic partitions (Bosch & Mullender, section 2): an ordered list of
 * fixed-size blocks on any disks of the pool, that grows and shrinks at its
 * end.
 *
 * The block list lives twice: as runs in the database (the truth) and as
 * an array of atomic mapping words here, which the I/O path reads without a
 * lock.  Invariant kept by every change: the database transaction commits
 * first, then the words are published with release stores and the size
 * last when growing, the size first when shrinking; so a reader that sees
 * block b below the size it loaded finds b's word, or 0 (shrunk meanwhile:
 * reported as beyond the end).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "layout/layout-internal.h"

static const char sql_part_insert[] =
	"INSERT INTO part (name, nblocks, placement, tier_pref, zone_pref, disk, tier_fallback)"
	" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
static const char sql_part_copies[] = "INSERT INTO part_copies (part, copies) VALUES (?1, ?2)";
static const char sql_part_resize[] = "UPDATE part SET nblocks = ?2 WHERE id = ?1";
static const char sql_part_rename[] = "UPDATE part SET name = ?2 WHERE id = ?1";
static const char sql_part_delete[] = "DELETE FROM part WHERE id = ?1";
static const char sql_part_all[] =
	"SELECT id, name, nblocks, placement, tier_pref, zone_pref, disk, tier_fallback,"
	" coalesce((SELECT copies FROM part_copies WHERE part = part.id), 1) FROM part ORDER BY id";

/* Largest partition: 2^40 blocks, far beyond any pool, and small enough
 * that block numbers times the block size stay within 64 bits. */
#define PART_BLOCKS_MAX (UINT64_C(1) << 40)

/* ---- names ---- */

static const char *const placement_names[] = { "rotation", "random", "single" };
static const char *const tier_pref_names[] = { "none", "hdd", "ssd" };
static const char *const zone_names[] = { "any", "outer", "inner" };
static const char *const tier_names[] = { "hdd", "ssd", "rbd" };

static int parse(const char *const *names, size_t n, const char *s)
{
	for (size_t i = 0; s && i < n; i++)
		if (strcmp(names[i], s) == 0)
			return (int)i;
	return -EINVAL;
}

#define PARSER(fn, type, names)                                         \
	int fn(const char *s, type *ret)                                \
	{                                                               \
		int v = parse(names, CW_ARRAY_SIZE(names), s);          \
		if (v < 0)                                              \
			return v;                                       \
		*ret = (type)v;                                         \
		return 0;                                               \
	}
#define NAMER(fn, type, names)                                          \
	const char *fn(type v)                                          \
	{                                                               \
		return (unsigned)v < CW_ARRAY_SIZE(names) ? names[v] : NULL; \
	}

PARSER(cw_placement_parse, enum cw_placement, placement_names)
PARSER(cw_tier_pref_parse, enum cw_tier_pref, tier_pref_names)
PARSER(cw_zone_pref_parse, enum cw_zone_pref, zone_names)
PARSER(cw_tier_parse, enum cw_tier, tier_names)
NAMER(cw_placement_name, enum cw_placement, placement_names)
NAMER(cw_tier_pref_name, enum cw_tier_pref, tier_pref_names)
NAMER(cw_zone_pref_name, enum cw_zone_pref, zone_names)
NAMER(cw_tier_name, enum cw_tier, tier_names)

/* ---- the block map ---- */

static struct blockdir *dir_new(size_t nchunks)
{
	struct blockdir *d = calloc(1, sizeof(*d) + nchunks * sizeof(d->chunk[0]));

	if (d)
		d->nchunks = nchunks;
	return d;
}

/* A directory of at least need chunks of words words each in place of
 * *dirp's (kept for its readers). */
static int dir_reserve(_Atomic(struct blockdir *) *dirp, size_t need, size_t words)
{
	struct blockdir *old = atomic_load_explicit(dirp, memory_order_relaxed), *d;

	if (need <= old->nchunks)
		return 0;
	d = dir_new(CW_MAX(need, 2 * old->nchunks));
	if (!d)
		return -ENOMEM;
	memcpy(d->chunk, old->chunk, old->nchunks * sizeof(d->chunk[0]));
	for (size_t i = old->nchunks; i < d->nchunks; i++) {
		d->chunk[i] = calloc(words, sizeof(uint64_t));
		if (!d->chunk[i]) {
			for (size_t k = old->nchunks; k < i; k++)
				free(d->chunk[k]);
			free(d);
			return -ENOMEM;
		}
	}
	/* Readers may still hold the old directory: it stays until the
	 * partition is freed, and its chunks are shared with the new one. */
	d->older = old;
	atomic_store_explicit(dirp, d, memory_order_release);
	return 0;
}

int lay_part_reserve(struct cw_part *p, uint64_t nblocks)
{
	size_t need = CW_DIV_ROUND_UP(nblocks, CHUNK_ENTRIES);
	int r = 0;

	/* The copies' words first: a reader that finds block b in dir
	 * finds it in xdir too. */
	if (p->copies > 1)
		r = dir_reserve(&p->xdir, need, XCHUNK_WORDS(p->copies));
	return r < 0 ? r : dir_reserve(&p->dir, need, CHUNK_WORDS);
}

void lay_part_store(struct cw_part *p, uint64_t b, uint64_t entry)
{
	struct blockdir *d = atomic_load_explicit(&p->dir, memory_order_relaxed);

	atomic_store_explicit(&d->chunk[b >> CHUNK_SHIFT][b & (CHUNK_ENTRIES - 1)], entry,
			      memory_order_release);
}

void lay_copy_store(struct cw_part *p, unsigned c, uint64_t b, uint64_t entry)
{
	if (c == 0)
		lay_part_store(p, b, entry);
	else
		atomic_store_explicit(lay_xword(p, c, b), entry, memory_order_release);
}

static void dir_free(struct blockdir *d)
{
	for (size_t i = 0; d && i < d->nchunks; i++)
		free((void *)d->chunk[i]);
	while (d) {
		struct blockdir *older = d->older;

		free(d);
		d = older;
	}
}

void lay_part_free(struct cw_part *p)
{
	if (!p)
		return;
	lay_cache_free(p);
	dir_free(atomic_load_explicit(&p->dir, memory_order_relaxed));
	dir_free(atomic_load_explicit(&p->xdir, memory_order_relaxed));
	free(p);
}

/* Whether the disk of mapping word e is present.  A disk's state is set
 * when the pool opens it and a disk holding a block of a partition is
 * never removed, so this needs no lock. */
static bool stale_bit(const struct cw_part *p, unsigned c, uint64_t b)
{
	return atomic_load_explicit(lay_stale_word(p, c, b), memory_order_acquire) &
	       (UINT64_C(1) << (b & 63));
}

static bool block_present(const struct cw_part *p, uint64_t e)
{
	const struct disk *d = p->pool->disks[ENTRY_DISK(e)];

	return d && d->state == CW_DISK_PRESENT;
}

/* Whether no copy of block b is both on a present disk and in sync (one
 * copy: whether its disk is missing): a mirrored partition serves a block
 * from its survivors. */
static bool block_gone(const struct cw_part *p, uint64_t b)
{
	for (unsigned c = 0; c < p->copies; c++)
		if (block_present(p, lay_copy_entry(p, c, b)) &&
		    (p->copies == 1 || !stale_bit(p, c, b)))
			return false;
	return true;
}

uint64_t lay_part_gone(const struct cw_part *p, uint64_t b, uint64_t n)
{
	uint64_t k = 0;

	for (uint64_t i = b; i < b + n; i++)
		k += block_gone(p, i);
	return k;
}

void lay_part_gone_changed(struct cw_part *p, uint64_t before, uint64_t after)
{
	uint64_t m = atomic_load_explicit(&p->missing, memory_order_relaxed) + after - before;

	atomic_store_explicit(&p->missing, m, memory_order_relaxed);
	atomic_store_explicit(&p->available, m == 0, memory_order_release);
}

void lay_part_update_available(struct cw_part *p)
{
	uint64_t n = atomic_load_explicit(&p->nblocks, memory_order_relaxed), missing = 0;

	for (uint64_t b = 0; b < n; b++)
		missing += block_gone(p, b);
	atomic_store_explicit(&p->missing, missing, memory_order_relaxed);
	atomic_store_explicit(&p->available, missing == 0, memory_order_release);
}

static struct cw_part *part_new(struct cw_pool *pool, uint64_t id, const char *name,
				const struct cw_part_opts *opts)
{
	struct cw_part *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->copies = opts->copies ? opts->copies : 1;
	p->dir = dir_new(0);
	p->xdir = p->copies > 1 ? dir_new(0) : NULL;
	if (!p->dir || (p->copies > 1 && !p->xdir)) {
		free(p->dir);
		free(p->xdir);
		free(p);
		return NULL;
	}
	p->pool = pool;
	p->id = id;
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->opts = *opts;
	p->opts.copies = p->copies;
	p->bshift = pool->bshift;
	atomic_init(&p->nblocks, 0);
	atomic_init(&p->available, true);
	atomic_init(&p->missing, 0);
	return p;
}

static void part_link(struct cw_pool *pool, struct cw_part *p)
{
	struct cw_part **pp = &pool->parts;

	while (*pp && (*pp)->id < p->id)
		pp = &(*pp)->next;
	p->next = *pp;
	*pp = p;
}

static struct cw_part *part_by_name(struct cw_pool *pool, const char *name)
{
	for (struct cw_part *p = pool->parts; p; p = p->next)
		if (strcmp(p->name, name) == 0)
			return p;
	return NULL;
}

/* ---- the hot path ---- */

/* Whether every copy c >= 1 of block b follows that copy of b - 1 on its
 * disk. */
static bool copies_follow(const struct cw_part *p, uint64_t b)
{
	for (unsigned c = 1; c < p->copies; c++) {
		uint64_t prev = lay_copy_entry(p, c, b - 1), e = lay_copy_entry(p, c, b);

		if (!e || e != prev + 1)
			return false;
	}
	return true;
}

int cw_part_map(const struct cw_part *part, uint64_t offset, uint64_t length,
		struct cw_extent *ret)
{
	struct cw_part *p = (struct cw_part *)part;
	uint64_t n, b, e, first, within, avail, bs;
	bool missing;

	n = atomic_load_explicit(&p->nblocks, memory_order_acquire);
	b = offset >> p->bshift;
	if (b >= n)
		return -ERANGE;
	first = e = lay_entry(p, b);
	if (!e)
		return -ERANGE;
	bs = UINT64_C(1) << p->bshift;
	within = offset & (bs - 1);
	avail = bs - within;
	if (!length)
		length = avail;
	missing = atomic_load_explicit(&p->missing, memory_order_relaxed) &&
		  (p->copies == 1 ? !block_present(p, first) : block_gone(p, b));
	/* Physically adjacent blocks on the same disk are one extent; the
	 * blocks on missing disks that follow each other, whatever disk,
	 * are one run of bytes that cannot be served. */
	while (avail < length && ++b < n) {
		uint64_t next = lay_entry(p, b);

		if (missing ? !next || (p->copies == 1 ? block_present(p, next) : !block_gone(p, b))
			    : next != e + 1)
			break;
		/* With copies, an extent is contiguous on every one. */
		if (p->copies > 1 && !missing && !copies_follow(p, b))
			break;
		e = next;
		avail += bs;
	}
	ret->disk_id = ENTRY_DISK(first);
	ret->phys_offset = (ENTRY_PBLOCK(first) << p->bshift) + within;
	ret->length = CW_MIN(avail, length);
	return missing ? -ENODEV : 0;
}

uint32_t cw_part_copies(const struct cw_part *part)
{
	return part->copies;
}

int cw_part_block_copies(const struct cw_part *part, uint64_t block, struct cw_copy *ret)
{
	uint64_t n = atomic_load_explicit(&((struct cw_part *)part)->nblocks, memory_order_acquire);

	if (block >= n)
		return -ERANGE;
	for (unsigned c = 0; c < part->copies; c++) {
		uint64_t e = lay_copy_entry(part, c, block);

		if (!e)
			return -ERANGE;	/* shrunk meanwhile */
		ret[c] = (struct cw_copy){ .disk_id = ENTRY_DISK(e),
					   .phys_offset = ENTRY_PBLOCK(e) << part->bshift,
					   .in_sync = part->copies == 1 || !stale_bit(part, c, block) };
	}
	return 0;
}

int cw_part_map_copies(const struct cw_part *part, uint64_t offset, struct cw_copy *ret)
{
	uint64_t within = offset & ((UINT64_C(1) << part->bshift) - 1);
	int r = cw_part_block_copies(part, offset >> part->bshift, ret);

	for (unsigned c = 0; r == 0 && c < part->copies; c++)
		ret[c].phys_offset += within;
	return r;
}

int cw_part_block_disks(const struct cw_part *part, uint64_t first_block, uint64_t nblocks,
			uint32_t *ret_disk_ids)
{
	uint64_t n = atomic_load_explicit(&((struct cw_part *)part)->nblocks, memory_order_acquire);

	if (first_block > n || nblocks > n - first_block)
		return -ERANGE;
	for (uint64_t i = 0; i < nblocks; i++) {
		uint64_t e = lay_entry(part, first_block + i);

		if (!e)
			return -ERANGE;
		ret_disk_ids[i] = ENTRY_DISK(e);
	}
	return 0;
}

uint64_t cw_part_nblocks(const struct cw_part *part)
{
	return atomic_load_explicit(&((struct cw_part *)part)->nblocks, memory_order_acquire);
}

uint64_t cw_part_size_bytes(const struct cw_part *part)
{
	return cw_part_nblocks(part) << part->bshift;
}

uint32_t cw_part_block_size(const struct cw_part *part)
{
	return UINT32_C(1) << part->bshift;
}

/* ---- management ---- */

static int check_opts(struct cw_pool *pool, const struct cw_part_opts *o)
{
	if (!cw_placement_name(o->placement))
		return lay_set_error(pool, -EINVAL, "unknown placement policy %d "
				     "(rotation, random or single)", (int)o->placement);
	if (!cw_tier_pref_name(o->tier))
		return lay_set_error(pool, -EINVAL, "unknown tier preference %d (none, hdd or ssd)",
				     (int)o->tier);
	if (!cw_zone_pref_name(o->zone))
		return lay_set_error(pool, -EINVAL, "unknown zone preference %d (any, outer or inner)",
				     (int)o->zone);
	if (o->disk_id && o->placement != CW_PLACE_SINGLE)
		return lay_set_error(pool, -EINVAL, "a disk can only be named for single placement");
	if (o->copies > CW_COPIES_MAX)
		return lay_set_error(pool, -EINVAL, "%u copies: a partition keeps 1 to %d",
				     o->copies, CW_COPIES_MAX);
	return 0;
}

static int check_name(struct cw_pool *pool, const char *name)
{
	if (!cw_name_valid(name))
		return lay_set_error(pool, -EINVAL,
				     "invalid partition name '%s': use 1..%d of A-Z a-z 0-9 . _ -, "
				     "not starting with . or -", name ? name : "", CW_NAME_MAX);
	if (part_by_name(pool, name))
		return lay_set_error(pool, -EEXIST, "a partition named '%s' already exists", name);
	return 0;
}

static int size_to_blocks(struct cw_pool *pool, uint64_t size_bytes, uint64_t *ret)
{
	uint64_t n = (size_bytes >> pool->bshift) + ((size_bytes & (pool->block_size - 1)) != 0);

	if (n > PART_BLOCKS_MAX)
		return lay_set_error(pool, -EINVAL, "size %llu bytes is beyond the largest partition",
				     (unsigned long long)size_bytes);
	*ret = n;
	return 0;
}

static int enospc(struct cw_pool *pool, const char *what, uint64_t need, uint64_t avail,
		  const struct placement *pl, const char *hint)
{
	uint64_t nb = need << pool->bshift, ab = avail << pool->bshift;

	lay_set_error(pool, -ENOSPC, "%s needs %llu bytes (%llu blocks) but only %llu bytes "
		      "(%llu blocks) are free%s%s%s", what, (unsigned long long)nb,
		      (unsigned long long)need, (unsigned long long)ab, (unsigned long long)avail,
		      pl->policy == CW_PLACE_SINGLE ? " on one disk" : "",
		      pl->ndisks == 0 ? " (no disk present)" : "", hint);
	pool->err.needed_bytes = nb;
	pool->err.available_bytes = ab;
	return -ENOSPC;
}

/* The SSD tier keeps to SSDs unless the partition allows otherwise. */
static bool tier_strict(const struct cw_part_opts *o)
{
	return o->tier == CW_TIER_PREF_SSD && !o->tier_fallback;
}

/* What an allocation for the partition named is, for -ENOSPC. */
static void what_alloc(const struct cw_part_opts *o, const char *verb, const char *name,
		       char *buf, size_t size)
{
	snprintf(buf, size, "%s partition '%s'%s", verb, name,
		 tier_strict(o) ? " on the SSD tier" : "");
}

static const char *alloc_hint(const struct cw_part_opts *o)
{
	return tier_strict(o) ? "; tier fallback would let it use the other disks" : "";
}

/* Placement for n new blocks at the end of p. */
static int grow_placement(struct cw_pool *pool, struct cw_part *p, uint64_t n,
			  struct placement *pl, struct disk **buf)
{
	uint64_t have = atomic_load_explicit(&p->nblocks, memory_order_relaxed);
	uint64_t last = have ? lay_entry(p, have - 1) : 0;
	uint32_t single = p->opts.disk_id;
	int r;

	if (p->opts.placement == CW_PLACE_SINGLE && !single && have)
		single = ENTRY_DISK(lay_entry(p, 0));
	r = lay_candidates(pool, &p->opts, single ? &single : NULL, single ? 1 : 0,
			   tier_strict(&p->opts), n, pl, buf);
	pl->after_disk = ENTRY_DISK(last);
	return r;
}

/* The disks copies 1.. of p's new blocks may go to: every present disk
 * of its tier preference (a single placement's named disk is copy 0's
 * alone). */
static int copies_candidates(struct cw_pool *pool, struct cw_part *p, uint64_t n,
			     struct placement *pl, struct disk **buf)
{
	return lay_candidates(pool, &p->opts, NULL, 0, tier_strict(&p->opts), n, pl, buf);
}

/* -EXDEV with the reason when p's candidates span fewer failure domains
 * than p has copies; 0 with one copy or enough. */
static int copies_domains(struct cw_pool *pool, struct cw_part *p, uint64_t n, const char *what)
{
	struct disk *buf[CW_DISKS_MAX];
	struct placement pl;
	unsigned domains;
	int r;

	if (p->copies == 1)
		return 0;
	r = copies_candidates(pool, p, n, &pl, buf);
	if (r < 0)
		return r;
	domains = lay_domains(&pl);
	if (domains >= p->copies)
		return 0;
	return lay_set_error(pool, -EXDEV, "%s partition '%s' with %u copies needs disks in %u "
			     "failure domains, but its candidate disks span %u%s", what, p->name,
			     p->copies, p->copies, domains,
			     pl.ndisks < p->copies ? " (too few disks)"
						   : " (set distinct disk domains)");
}

/* The free blocks on the disks of every copy of p (copy 0's candidates
 * pl, avail of them as lay_available says, and the copies'). */
static uint64_t copies_avail(struct cw_pool *pool, struct cw_part *p, uint64_t n,
			     uint64_t avail)
{
	struct disk *buf[CW_DISKS_MAX];
	struct placement pl;
	uint64_t sum = 0;

	if (p->copies == 1 || copies_candidates(pool, p, n, &pl, buf) < 0)
		return avail;
	for (size_t i = 0; i < pl.ndisks; i++)
		sum += pl.disks[i]->free;
	return sum;
}

/* Whether n blocks of every copy could fit at all (the copies' exact
 * fit is lay_alloc_copy's to find): an absurd size costs nothing. */
static bool copies_fit(struct cw_pool *pool, struct cw_part *p, uint64_t n)
{
	return p->copies == 1 || copies_avail(pool, p, n, 0) / p->copies >= n;
}

/* The entries of copies 1.. of n new blocks (from block have on) of p,
 * whose copy 0 is e[0]: into e[1..copies), allocated here; nothing is
 * taken on failure (the reason set).  A single placement that has
 * blocks keeps each copy on its disk.  what: "creating"/"growing". */
static int place_copies(struct cw_pool *pool, struct cw_part *p, uint64_t have, uint64_t n,
			uint64_t **e, const char *what)
{
	struct disk *buf[CW_DISKS_MAX];
	struct placement pl;
	uint64_t bad = 0;
	unsigned c;
	int r;

	r = copies_domains(pool, p, n, what);
	if (r == 0)
		r = copies_candidates(pool, p, n, &pl, buf);
	for (c = 1; c < p->copies && r == 0; c++) {
		struct placement one = pl;
		struct disk *d = have && p->opts.placement == CW_PLACE_SINGLE ?
				 pool->disks[ENTRY_DISK(lay_copy_entry(p, c, 0))] : NULL;

		if (d) {	/* where copy c of block 0 is */
			one.disks = &d;
			one.ndisks = 1;
		}
		e[c] = malloc(CW_MAX(n, 1) * sizeof(uint64_t));
		r = e[c] ? lay_alloc_copy(pool, &one, n, e, c, e[c], &bad)
			 : lay_set_error(pool, -ENOMEM, "out of memory");
	}
	if (r == -ENOSPC) {
		uint64_t fr = 0;

		for (size_t i = 0; i < pl.ndisks; i++)
			fr += pl.disks[i]->free;
		lay_set_error(pool, -ENOSPC, "%s partition '%s': no disk outside the failure "
			      "domains of block %llu's other copies has room for copy %u "
			      "(%u copies need %llu bytes, %llu bytes are free)", what, p->name,
			      (unsigned long long)(have + bad), c - 1, p->copies,
			      (unsigned long long)((n * p->copies) << pool->bshift),
			      (unsigned long long)(fr << pool->bshift));
		pool->err.needed_bytes = (n * p->copies) << pool->bshift;
		pool->err.available_bytes = fr << pool->bshift;
	}
	if (r < 0)
		for (unsigned k = 1; k < p->copies; k++) {
			if (e[k] && k + 1 < c)	/* copies placed before the one that failed */
				lay_free_entries(pool, e[k], n);
			free(e[k]);
			e[k] = NULL;
		}
	return r;
}

/* Frees e[1..copies) (the arrays, not the blocks). */
static void copies_free(uint64_t **e)
{
	for (unsigned c = 1; c < CW_COPIES_MAX; c++) {
		free(e[c]);
		e[c] = NULL;
	}
}

/* Gives back the blocks of copies 1.. in e (n each). */
static void copies_put(struct cw_pool *pool, const struct cw_part *p, uint64_t **e, uint64_t n)
{
	for (unsigned c = 1; c < p->copies; c++)
		if (e[c])
			lay_free_entries(pool, e[c], n);
}

/* Runs of copies 1.. for blocks [a, b) (e NULL: unmapped), in the
 * caller's transaction. */
static int copies_runs(struct cw_pool *pool, const struct cw_part *p, uint64_t a, uint64_t b,
		       uint64_t **e)
{
	int r = 0;

	for (unsigned c = 1; c < p->copies && r == 0; c++)
		r = lay_runs_replace_copy(pool->meta, p->id, c, a, b, e ? e[c] : NULL);
	return r;
}

int cw_part_create(struct cw_pool *pool, const char *name, uint64_t size_bytes,
		   const struct cw_part_opts *opts, struct cw_part **ret_part)
{
	static const struct cw_part_opts defaults = { .placement = CW_PLACE_ROTATION };
	_cleanup_free_ uint64_t *entries = NULL;
	uint64_t *xe[CW_COPIES_MAX] = { NULL };
	struct disk *buf[CW_DISKS_MAX];
	struct placement pl;
	struct cw_part *p = NULL;
	uint64_t n = 0, avail;
	sqlite3_stmt *s;
	int r;

	if (!opts)
		opts = &defaults;
	pthread_mutex_lock(&pool->lock);
	r = check_name(pool, name);
	if (r == 0)
		r = check_opts(pool, opts);
	if (r == 0)
		r = size_to_blocks(pool, size_bytes, &n);
	if (r < 0)
		goto out;
	p = part_new(pool, 0, name, opts);
	if (!p) {
		r = lay_set_error(pool, -ENOMEM, "out of memory");
		goto out;
	}
	r = grow_placement(pool, p, n, &pl, buf);
	if (r < 0)
		goto out;
	/* A size beyond the free space is refused before its block map
	 * is allocated: 2048T would cost gigabytes and seconds to fail. */
	avail = lay_available(&pl);
	if (p->copies > 1)
		r = copies_domains(pool, p, n, "creating");
	if (r == 0 && avail >= n && copies_fit(pool, p, n)) {
		entries = malloc(CW_MAX(n, 1) * sizeof(*entries));
		r = entries && lay_part_reserve(p, n) == 0 ? lay_alloc(pool, &pl, n, entries, &avail)
							  : lay_set_error(pool, -ENOMEM, "out of memory");
	}
	if (r == 0 && (avail < n || !copies_fit(pool, p, n))) {
		char what[CW_NAME_MAX + 96];

		what_alloc(opts, "creating", name, what, sizeof(what));
		r = enospc(pool, what, n * p->copies, copies_avail(pool, p, n, avail), &pl,
			   alloc_hint(opts));
	} else if (r == -ENOSPC) {
		char what[CW_NAME_MAX + 96];

		what_alloc(opts, "creating", name, what, sizeof(what));
		r = enospc(pool, what, n, avail, &pl, alloc_hint(opts));
	}
	if (r == 0 && p->copies > 1) {
		xe[0] = entries;
		r = place_copies(pool, p, 0, n, xe, "creating");
		if (r < 0)
			lay_free_entries(pool, entries, n);
	}
	if (r < 0)
		goto out;

	r = meta_begin(pool->meta);
	if (r == 0)
		r = meta_stmt(pool->meta, sql_part_insert, &s);
	if (r == 0) {
		sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 2, (int64_t)n);
		sqlite3_bind_int64(s, 3, opts->placement);
		sqlite3_bind_int64(s, 4, opts->tier);
		sqlite3_bind_int64(s, 5, opts->zone);
		sqlite3_bind_int64(s, 6, opts->disk_id);
		sqlite3_bind_int64(s, 7, opts->tier_fallback);
		r = meta_step(s);
	}
	if (r == 0) {
		p->id = (uint64_t)sqlite3_last_insert_rowid(pool->meta->db);
		r = lay_runs_replace(pool->meta, p->id, 0, n, entries);
	}
	if (r == 0 && p->copies > 1)
		r = meta_exec(pool->meta, sql_part_copies, 2, (int64_t)p->id, (int64_t)p->copies);
	if (r == 0)
		r = copies_runs(pool, p, 0, n, xe);
	/* Its blocks may hold another partition's old data: holes until
	 * written. */
	if (r == 0)
		r = lay_holes_new(pool->meta, p, 0, n);
	r = meta_end(pool->meta, r);
	if (r < 0) {
		lay_free_entries(pool, entries, n);
		copies_put(pool, p, xe, n);
		lay_set_error(pool, r, "creating partition '%s': %s", name, strerror(-r));
		goto out;
	}
	for (uint64_t b = 0; b < n; b++)
		for (unsigned c = p->copies; c-- > 0;)
			lay_copy_store(p, c, b, c ? xe[c][b] : entries[b]);
	atomic_store_explicit(&p->nblocks, n, memory_order_release);
	part_link(pool, p);
	if (ret_part)
		*ret_part = p;
	p = NULL;
out:
	copies_free(xe);
	lay_part_free(p);
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_part_lookup(struct cw_pool *pool, const char *name, struct cw_part **ret_part)
{
	struct cw_part *p;
	int r = 0;

	pthread_mutex_lock(&pool->lock);
	p = name ? part_by_name(pool, name) : NULL;
	if (p)
		*ret_part = p;
	else
		r = lay_set_error(pool, -ENOENT, "no partition named '%s'", name ? name : "");
	pthread_mutex_unlock(&pool->lock);
	return r;
}

static int grow(struct cw_pool *pool, struct cw_part *p, uint64_t have, uint64_t want)
{
	_cleanup_free_ uint64_t *entries = NULL;
	uint64_t *xe[CW_COPIES_MAX] = { NULL };
	struct disk *buf[CW_DISKS_MAX];
	struct placement pl;
	uint64_t avail, n = want - have;
	int r;

	r = grow_placement(pool, p, n, &pl, buf);
	if (r < 0)
		return r;
	avail = lay_available(&pl);
	r = copies_domains(pool, p, n, "growing");
	if (r < 0)
		return r;
	r = -ENOSPC;
	if (avail >= n && copies_fit(pool, p, n)) {
		entries = malloc(n * sizeof(*entries));
		if (!entries || lay_part_reserve(p, want) < 0)
			return lay_set_error(pool, -ENOMEM, "out of memory");
		r = lay_alloc(pool, &pl, n, entries, &avail);
	}
	if (r == -ENOSPC) {
		char what[CW_NAME_MAX + 96];

		what_alloc(&p->opts, "growing", p->name, what, sizeof(what));
		return enospc(pool, what, n * p->copies, copies_avail(pool, p, n, avail), &pl,
			      alloc_hint(&p->opts));
	}
	if (r < 0)
		return lay_set_error(pool, r, "growing partition '%s': %s", p->name, strerror(-r));
	if (p->copies > 1) {
		xe[0] = entries;
		r = place_copies(pool, p, have, n, xe, "growing");
		if (r < 0) {
			lay_free_entries(pool, entries, n);
			return r;
		}
	}
	r = meta_begin(pool->meta);
	if (r == 0)
		r = meta_exec(pool->meta, sql_part_resize, 2, (int64_t)p->id, (int64_t)want);
	if (r == 0)
		r = lay_runs_replace(pool->meta, p->id, have, want, entries);
	if (r == 0)
		r = copies_runs(pool, p, have, want, xe);
	if (r == 0)
		r = lay_holes_new(pool->meta, p, have, n);
	r = meta_end(pool->meta, r);
	if (r < 0) {
		lay_free_entries(pool, entries, n);
		copies_put(pool, p, xe, n);
		copies_free(xe);
		return lay_set_error(pool, r, "growing partition '%s': %s", p->name, strerror(-r));
	}
	for (uint64_t b = have; b < want; b++)
		for (unsigned c = p->copies; c-- > 0;)
			lay_copy_store(p, c, b, c ? xe[c][b - have] : entries[b - have]);
	atomic_store_explicit(&p->nblocks, want, memory_order_release);
	copies_free(xe);
	return 0;
}

static int shrink(struct cw_pool *pool, struct cw_part *p, uint64_t have, uint64_t want)
{
	int r;

	r = meta_begin(pool->meta);
	if (r == 0)
		r = meta_exec(pool->meta, sql_part_resize, 2, (int64_t)p->id, (int64_t)want);
	if (r == 0)
		r = lay_runs_replace(pool->meta, p->id, want, have, NULL);
	if (r == 0)
		r = copies_runs(pool, p, want, have, NULL);
	if (r == 0)
		r = lay_holes_truncate(pool->meta, p, want);
	if (r == 0 && p->copies > 1)
		r = lay_stale_truncate(pool->meta, p, want);
	if (r == 0 && p->copies > 1)
		r = lay_intent_truncate(pool->meta, p, want);
	r = meta_end(pool->meta, r);
	if (r < 0) {
		return lay_set_error(pool, r, "shrinking partition '%s': %s", p->name, strerror(-r));
	}
	atomic_store_explicit(&p->nblocks, want, memory_order_release);
	/* The regions past the end lost their rows: a grow finds them clean. */
	for (uint64_t g = CW_DIV_ROUND_UP(want, CW_INTENT_REGION_BLOCKS);
	     p->copies > 1 && g < CW_DIV_ROUND_UP(have, CW_INTENT_REGION_BLOCKS); g++)
		atomic_store(lay_intent_word(p, g), 0);
	for (uint64_t b = want; b < have; b++)
		for (unsigned c = 0; c < p->copies; c++) {
			uint64_t e = lay_copy_entry(p, c, b);

			lay_copy_store(p, c, b, 0);
			lay_disk_put(pool->disks[ENTRY_DISK(e)], ENTRY_PBLOCK(e));
			if (p->copies > 1 && stale_bit(p, c, b)) {
				atomic_fetch_sub(&p->stale, 1);
				atomic_fetch_and(lay_stale_word(p, c, b), ~(UINT64_C(1) << (b & 63)));
			}
		}
	p->gen++;
	return 0;
}

int cw_part_resize(struct cw_part *p, uint64_t size_bytes)
{
	struct cw_pool *pool = p->pool;
	uint64_t have, want = 0;
	int r;

	pthread_mutex_lock(&pool->lock);
	have = atomic_load_explicit(&p->nblocks, memory_order_relaxed);
	r = size_to_blocks(pool, size_bytes, &want);
	if (r == 0 && !atomic_load_explicit(&p->available, memory_order_relaxed))
		r = lay_set_error(pool, -ENODEV, "partition '%s' is unavailable: a disk is missing",
				  p->name);
	if (r == 0 && want > have)
		r = grow(pool, p, have, want);
	else if (r == 0 && want < have)
		r = shrink(pool, p, have, want);
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_part_rename(struct cw_part *p, const char *new_name)
{
	struct cw_pool *pool = p->pool;
	sqlite3_stmt *s;
	int r;

	pthread_mutex_lock(&pool->lock);
	if (new_name && strcmp(new_name, p->name) == 0) {
		r = 0;
		goto out;
	}
	r = check_name(pool, new_name);
	if (r < 0)
		goto out;
	r = meta_begin(pool->meta);
	if (r == 0)
		r = meta_stmt(pool->meta, sql_part_rename, &s);
	if (r == 0) {
		sqlite3_bind_int64(s, 1, (int64_t)p->id);
		sqlite3_bind_text(s, 2, new_name, -1, SQLITE_STATIC);
		r = meta_step(s);
	}
	r = meta_end(pool->meta, r);
	if (r < 0) {
		lay_set_error(pool, r, "renaming partition '%s': %s", p->name, strerror(-r));
		goto out;
	}
	snprintf(p->name, sizeof(p->name), "%s", new_name);
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_part_delete(struct cw_part *p)
{
	struct cw_pool *pool = p->pool;
	struct cw_part **pp;
	struct cw_move **mp;
	uint64_t n;
	int r;

	pthread_mutex_lock(&pool->lock);
	if (lay_journal_busy(pool, p)) {
		r = lay_set_error(pool, -EBUSY, "partition '%s' is being moved: cancel the move "
				  "first", p->name);
		goto out;
	}
	if (p->cache_nslots || cw_part_cache(p)) {
		r = lay_set_error(pool, -EBUSY, "partition '%s' has an SSD cache%s: drop it first "
				  "(cache size 0) and wait until it is gone", p->name,
				  p->cache_conf.size_bytes ? "" : " being dropped");
		goto out;
	}
	if (pool->cachew.last == p)
		pool->cachew.last = NULL;
	r = meta_begin(pool->meta);
	if (r == 0)
		r = lay_part_users(pool, p);
	if (r == -EBUSY) {
		meta_rollback(pool->meta);
		goto out;
	}
	if (r == 0)
		r = meta_exec(pool->meta, sql_part_delete, 1, (int64_t)p->id);
	r = meta_end(pool->meta, r);
	if (r < 0) {
		lay_set_error(pool, r, "deleting partition '%s': %s", p->name, strerror(-r));
		goto out;
	}
	/* Pending plans of the partition go with it. */
	for (mp = &pool->moves; *mp;) {
		struct cw_move *m = *mp;

		if (m->part == p) {
			*mp = m->next;
			lay_move_drop(pool, m);
		} else {
			mp = &m->next;
		}
	}
	n = atomic_load_explicit(&p->nblocks, memory_order_relaxed);
	for (uint64_t b = 0; b < n; b++)
		for (unsigned c = 0; c < p->copies; c++) {
			uint64_t e = lay_copy_entry(p, c, b);

			lay_disk_put(pool->disks[ENTRY_DISK(e)], ENTRY_PBLOCK(e));
		}
	for (pp = &pool->parts; *pp != p; pp = &(*pp)->next)
		;
	*pp = p->next;
	lay_part_free(p);
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

static void fill_info(const struct cw_part *p, struct cw_part_info *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->id = p->id;
	snprintf(ret->name, sizeof(ret->name), "%s", p->name);
	ret->nblocks = atomic_load_explicit(&((struct cw_part *)p)->nblocks, memory_order_relaxed);
	ret->size_bytes = ret->nblocks << p->bshift;
	ret->opts = p->opts;
	ret->available = atomic_load_explicit(&((struct cw_part *)p)->available,
					      memory_order_relaxed);
	ret->missing_blocks = atomic_load_explicit(&((struct cw_part *)p)->missing,
						   memory_order_relaxed);
	ret->copies = p->copies;
	ret->stale_copies = atomic_load_explicit(&((struct cw_part *)p)->stale,
						 memory_order_relaxed);
}

int cw_part_info(struct cw_part *p, struct cw_part_info *ret)
{
	pthread_mutex_lock(&p->pool->lock);
	fill_info(p, ret);
	pthread_mutex_unlock(&p->pool->lock);
	return 0;
}

int cw_part_list(struct cw_pool *pool, struct cw_part_info **ret_parts, size_t *ret_n)
{
	struct cw_part_info *v;
	size_t n = 0;

	pthread_mutex_lock(&pool->lock);
	for (struct cw_part *p = pool->parts; p; p = p->next)
		n++;
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v) {
		pthread_mutex_unlock(&pool->lock);
		return lay_set_error(pool, -ENOMEM, "out of memory");
	}
	n = 0;
	for (struct cw_part *p = pool->parts; p; p = p->next)
		fill_info(p, &v[n++]);
	pthread_mutex_unlock(&pool->lock);
	*ret_parts = v;
	*ret_n = n;
	return 0;
}

/* ---- open ---- */

struct load_ctx {
	struct cw_pool *pool;
	struct cw_part *cur;
	struct cw_error *err;
};

static int load_run(void *ctx, const struct run *run)
{
	struct load_ctx *c = ctx;
	struct disk *d = c->pool->disks[run->disk];
	uint64_t n;

	if (!c->cur || c->cur->id != run->part)
		for (c->cur = c->pool->parts; c->cur && c->cur->id != run->part;)
			c->cur = c->cur->next;
	if (!c->cur || !d)
		return meta_err(c->err, -EUCLEAN, "the database is damaged: a run of partition %llu "
				"refers to a missing partition or disk", (unsigned long long)run->part);
	n = atomic_load_explicit(&c->cur->nblocks, memory_order_relaxed);
	if (run->copy >= c->cur->copies)
		return meta_err(c->err, -EUCLEAN, "the database is damaged: partition '%s' keeps %u "
				"copies but has runs of copy %u", c->cur->name, c->cur->copies,
				run->copy);
	if (run->lstart >= n || (run->count - 1) > (n - 1 - run->lstart) / run->stride ||
	    run->pstart + run->count > d->nblocks)
		return meta_err(c->err, -EUCLEAN, "the database is damaged: a run of partition '%s' "
				"at block %llu lies outside the partition or disk %u", c->cur->name,
				(unsigned long long)run->lstart, run->disk);
	for (uint64_t i = 0; i < run->count; i++) {
		uint64_t l = run->lstart + i * run->stride, p = run->pstart + i;

		if (lay_copy_entry(c->cur, run->copy, l))
			return meta_err(c->err, -EUCLEAN, "the database is damaged: block %llu of "
					"partition '%s' is mapped twice", (unsigned long long)l,
					c->cur->name);
		if (lay_disk_test(d, p))
			return meta_err(c->err, -EUCLEAN, "the database is damaged: disk %u block "
					"%llu is owned twice", run->disk, (unsigned long long)p);
		lay_disk_mark(d, p);
		lay_copy_store(c->cur, run->copy, l, ENTRY(run->disk, p));
	}
	return 0;
}

int lay_parts_load(struct cw_pool *pool, struct cw_error *err)
{
	struct load_ctx ctx = { .pool = pool, .err = err };
	sqlite3_stmt *s;
	int r, rc;

	r = meta_stmt(pool->meta, sql_part_all, &s);
	if (r < 0)
		return meta_err(err, -EUCLEAN, "the database has no partition table: %s",
				sqlite3_errmsg(pool->meta->db));
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct cw_part_opts o = {
			.placement = (enum cw_placement)sqlite3_column_int64(s, 3),
			.tier = (enum cw_tier_pref)sqlite3_column_int64(s, 4),
			.zone = (enum cw_zone_pref)sqlite3_column_int64(s, 5),
			.disk_id = (uint32_t)sqlite3_column_int64(s, 6),
			.tier_fallback = sqlite3_column_int64(s, 7) != 0,
			.copies = (uint32_t)sqlite3_column_int64(s, 8),
		};
		const char *name = (const char *)sqlite3_column_text(s, 1);
		int64_t n = sqlite3_column_int64(s, 2);
		struct cw_part *p;

		if (!cw_name_valid(name) || n < 0 || (uint64_t)n > PART_BLOCKS_MAX ||
		    !cw_placement_name(o.placement) || !cw_tier_pref_name(o.tier) ||
		    !cw_zone_pref_name(o.zone) || o.copies < 1 || o.copies > CW_COPIES_MAX) {
			sqlite3_reset(s);
			return meta_err(err, -EUCLEAN, "the database is damaged: bad partition row %lld",
					(long long)sqlite3_column_int64(s, 0));
		}
		p = part_new(pool, (uint64_t)sqlite3_column_int64(s, 0), name, &o);
		if (!p || lay_part_reserve(p, (uint64_t)n) < 0) {
			lay_part_free(p);
			sqlite3_reset(s);
			return meta_err(err, -ENOMEM, "out of memory");
		}
		atomic_store_explicit(&p->nblocks, (uint64_t)n, memory_order_relaxed);
		part_link(pool, p);
	}
	sqlite3_reset(s);
	if (rc != SQLITE_DONE)
		return meta_err(err, meta_errno(rc), "reading partitions: %s",
				sqlite3_errmsg(pool->meta->db));
	r = lay_runs_load(pool->meta, load_run, &ctx);
	if (r == 0)
		r = lay_copy_runs_load(pool->meta, load_run, &ctx);
	if (r == -EUCLEAN && err && !err->msg[0])
		meta_err(err, r, "the database is damaged: a block run is invalid");
	if (r < 0 && (!err || !err->msg[0]))
		return meta_err(err, r, "reading block runs: %s", strerror(-r));
	if (r < 0)
		return r;
	r = lay_holes_load(pool, err);
	if (r == 0)
		r = lay_stale_load(pool, err);
	if (r == 0)
		r = lay_intent_recover(pool, err);
	if (r < 0)
		return r;
	/* A block not covered by any run is damage too; lay_pool_check reports
	 * it.  Availability follows the disks found. */
	for (struct cw_part *p = pool->parts; p; p = p->next) {
		uint64_t n = atomic_load_explicit(&p->nblocks, memory_order_relaxed);
		bool ok = true;

		for (uint64_t b = 0; b < n && ok; b++)
			for (unsigned c = 0; c < p->copies && ok; c++)
				ok = lay_copy_entry(p, c, b) != 0;
		if (ok)
			lay_part_update_available(p);
	}
	return 0;
}
