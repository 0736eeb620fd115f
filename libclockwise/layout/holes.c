/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Holes: which blocks of a partition hold data.
 *
 * A block given to a partition (created, grown) is a hole until its first
 * write; TRIM and WRITE_ZEROES may make it one again.  A hole reads as
 * zeros without a disk access, whatever its disk holds (a deleted
 * partition's data, say), and BLOCK_STATUS reports it, so sparse copies
 * skip it.
 *
 * The truth is the pool database (table hole, meta.c), not the disk files'
 * own holes: a disk may be a block device, which has none, and a block
 * freed by one partition and given to another keeps its bytes.  After a
 * kill -9 the database says what was committed, and the caller's ordering
 * makes that safe:
 *   - a write to a hole is acknowledged only after the block is marked
 *     written here (committed, synchronous=FULL), and the block is marked
 *     only once the block's bytes outside that write were zeroed and the
 *     write's own data written, both synced; so a block marked written
 *     never shows stale bytes (not even after a failed write or a power
 *     cut), and an acknowledged write is never hidden by a hole;
 *   - a block is marked a hole before its space is given back (punched),
 *     so a crash between the two leaves a hole over stale bytes, which
 *     reads as zeros: the hole bit wins.
 * A write in flight (not acknowledged) at the crash may be lost to a hole;
 * the protocol allows that.
 *
 * Memory: each chunk of the block map carries its blocks' hole bits
 * (lay_hole_word).  The I/O path reads them without a lock; they change
 * only under the pool lock, after the transaction committed, one atomic
 * store per word.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "layout/layout-internal.h"

static const char sql_hole_put[] =
	"INSERT OR REPLACE INTO hole (part, chunk, bits) VALUES (?1, ?2, ?3)";
static const char sql_hole_del[] = "DELETE FROM hole WHERE part = ?1 AND chunk = ?2";
static const char sql_hole_trunc[] = "DELETE FROM hole WHERE part = ?1 AND chunk >= ?2";
static const char sql_hole_all[] = "SELECT part, chunk, bits FROM hole ORDER BY part, chunk";

#define HOLE_BYTES (HOLE_WORDS * 8)

/* Bits [from, to) of one word set. */
static uint64_t bits(unsigned from, unsigned to)
{
	uint64_t hi = to >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << to) - 1;

	return hi & ~((UINT64_C(1) << from) - 1);
}

/* Writes one chunk's bitmap words[] as its row (none when it has no
 * holes). */
static int chunk_put(struct meta *m, uint64_t part, uint64_t chunk, const uint64_t *words)
{
	uint8_t blob[HOLE_BYTES];
	sqlite3_stmt *s;
	bool any = false;
	int r;

	for (unsigned i = 0; i < HOLE_WORDS; i++) {
		uint64_t le = htole64(words[i]);

		memcpy(blob + 8 * i, &le, 8);
		any |= words[i] != 0;
	}
	if (!any)
		return meta_exec(m, sql_hole_del, 2, (int64_t)part, (int64_t)chunk);
	r = meta_stmt(m, sql_hole_put, &s);
	if (r < 0)
		return r;
	sqlite3_bind_int64(s, 1, (int64_t)part);
	sqlite3_bind_int64(s, 2, (int64_t)chunk);
	sqlite3_bind_blob(s, 3, blob, sizeof(blob), SQLITE_STATIC);
	return meta_step(s);
}

static void chunk_get(const struct cw_part *p, uint64_t chunk, uint64_t *words)
{
	for (unsigned i = 0; i < HOLE_WORDS; i++)
		words[i] = atomic_load_explicit(lay_hole_word(p, (chunk << CHUNK_SHIFT) + 64 * i),
						memory_order_relaxed);
}

static void chunk_store(struct cw_part *p, uint64_t chunk, const uint64_t *words)
{
	for (unsigned i = 0; i < HOLE_WORDS; i++)
		atomic_store_explicit(lay_hole_word(p, (chunk << CHUNK_SHIFT) + 64 * i), words[i],
				      memory_order_release);
}

/* Sets (hole) or clears bits of blocks [first, first + n) in words[], the
 * bitmap of chunk `chunk`; only the part inside that chunk. */
static void chunk_apply(uint64_t *words, uint64_t chunk, uint64_t first, uint64_t n, bool hole)
{
	uint64_t lo = chunk << CHUNK_SHIFT, hi = lo + CHUNK_ENTRIES;
	uint64_t a = CW_MAX(first, lo), b = CW_MIN(first + n, hi);

	for (uint64_t w = (a - lo) / 64; a < b; w++) {
		unsigned from = (unsigned)((a - lo) % 64);
		unsigned to = (unsigned)CW_MIN((uint64_t)64, b - lo - w * 64);
		uint64_t m = bits(from, to);

		words[w] = hole ? words[w] | m : words[w] & ~m;
		a = lo + w * 64 + to;
	}
}

int lay_holes_new(struct meta *m, struct cw_part *p, uint64_t first, uint64_t n)
{
	uint64_t words[HOLE_WORDS];
	int r = 0;

	if (!n)
		return 0;
	for (uint64_t c = first >> CHUNK_SHIFT; r == 0 && c <= (first + n - 1) >> CHUNK_SHIFT;
	     c++) {
		/* Past the old end, bits are what a shrink left: cleared here
		 * only by the range set. */
		chunk_get(p, c, words);
		chunk_apply(words, c, first, n, true);
		r = chunk_put(m, p->id, c, words);
		if (r == 0)
			chunk_store(p, c, words);
	}
	return r;
}

int lay_holes_truncate(struct meta *m, const struct cw_part *p, uint64_t nblocks)
{
	return meta_exec(m, sql_hole_trunc, 2, (int64_t)p->id,
			 (int64_t)CW_DIV_ROUND_UP(nblocks, CHUNK_ENTRIES));
}

int lay_holes_load(struct cw_pool *pool, struct cw_error *err)
{
	struct cw_part *p = NULL;
	sqlite3_stmt *s;
	int r, rc;

	r = meta_stmt(pool->meta, sql_hole_all, &s);
	if (r < 0)
		return meta_err(err, -EUCLEAN, "the database has no hole table: %s",
				sqlite3_errmsg(pool->meta->db));
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		uint64_t id = (uint64_t)sqlite3_column_int64(s, 0);
		int64_t chunk = sqlite3_column_int64(s, 1);
		const uint8_t *blob = sqlite3_column_blob(s, 2);
		uint64_t words[HOLE_WORDS];

		if (!p || p->id != id)
			for (p = pool->parts; p && p->id != id;)
				p = p->next;
		if (!p || !blob || sqlite3_column_bytes(s, 2) != HOLE_BYTES || chunk < 0) {
			sqlite3_reset(s);
			return meta_err(err, -EUCLEAN, "the database is damaged: a bad hole row "
					"for partition %llu", (unsigned long long)id);
		}
		/* A shrink removes the rows past the end; a row that is
		 * still there describes no block. */
		if ((uint64_t)chunk >= CW_DIV_ROUND_UP(atomic_load(&p->nblocks), CHUNK_ENTRIES))
			continue;
		for (unsigned i = 0; i < HOLE_WORDS; i++) {
			memcpy(&words[i], blob + 8 * i, 8);
			words[i] = le64toh(words[i]);
		}
		chunk_store(p, (uint64_t)chunk, words);
	}
	sqlite3_reset(s);
	if (rc != SQLITE_DONE)
		return meta_err(err, meta_errno(rc), "reading holes: %s",
				sqlite3_errmsg(pool->meta->db));
	return 0;
}

/* ---- the hot path ---- */

int cw_part_allocated(const struct cw_part *part, uint64_t offset, uint64_t length,
		      uint64_t *ret_length)
{
	uint64_t n = atomic_load_explicit(&((struct cw_part *)part)->nblocks, memory_order_acquire);
	uint64_t b = offset >> part->bshift, bs = UINT64_C(1) << part->bshift;
	uint64_t run = bs - (offset & (bs - 1));
	bool hole;

	if (b >= n)
		return -ERANGE;
	if (!length)
		length = run;
	hole = atomic_load_explicit(lay_hole_word(part, b), memory_order_acquire) >> (b & 63) & 1;
	/* Whole words of the same state at a time, where they line up. */
	while (run < length && ++b < n) {
		uint64_t w = atomic_load_explicit(lay_hole_word(part, b), memory_order_acquire);

		if ((b & 63) == 0 && w == (hole ? ~UINT64_C(0) : 0) && b + 64 <= n) {
			run += 64 * bs;
			b += 63;
			continue;
		}
		if ((w >> (b & 63) & 1) != hole)
			break;
		run += bs;
	}
	*ret_length = CW_MIN(run, length);
	return hole ? 0 : 1;
}

int cw_part_data_bytes(const struct cw_part *part, uint64_t first_block, uint64_t nblocks,
		       uint64_t *ret_bytes)
{
	uint64_t n = atomic_load_explicit(&((struct cw_part *)part)->nblocks, memory_order_acquire);
	uint64_t off = first_block << part->bshift, end, sum = 0;

	if (first_block > n || nblocks > n - first_block)
		return -ERANGE;
	end = (first_block + nblocks) << part->bshift;
	while (off < end) {
		uint64_t len;
		int r = cw_part_allocated(part, off, end - off, &len);

		if (r < 0)
			return r;	/* shrunk meanwhile */
		if (r)
			sum += len;
		off += len;
	}
	*ret_bytes = sum;
	return 0;
}

/* ---- changes ---- */

/* One chunk's bitmap as the change will leave it. */
struct pending {
	struct cw_part *part;
	uint64_t chunk;
	uint64_t words[HOLE_WORDS];
};

static struct pending *pending_of(struct pending *v, size_t *n, struct cw_part *p, uint64_t c)
{
	for (size_t i = 0; i < *n; i++)
		if (v[i].part == p && v[i].chunk == c)
			return &v[i];
	v[*n].part = p;
	v[*n].chunk = c;
	chunk_get(p, c, v[*n].words);
	return &v[(*n)++];
}

int cw_part_set_allocated(struct cw_pool *pool, const struct cw_alloc_change *changes,
			  size_t n)
{
	struct pending *v = NULL;
	size_t nv = 0, cap = 0, i;
	int r = 0;

	pthread_mutex_lock(&pool->lock);
	for (i = 0; i < n; i++) {
		const struct cw_alloc_change *c = &changes[i];
		uint64_t nb = atomic_load_explicit(&c->part->nblocks, memory_order_relaxed);

		if (c->part->pool != pool || c->first_block > nb || c->nblocks > nb - c->first_block) {
			r = lay_set_error(pool, -ERANGE, "blocks %llu+%llu are not all in partition "
					  "'%s'", (unsigned long long)c->first_block,
					  (unsigned long long)c->nblocks, c->part->name);
			goto out;
		}
		if (c->nblocks)
			cap += ((c->first_block + c->nblocks - 1) >> CHUNK_SHIFT) -
			       (c->first_block >> CHUNK_SHIFT) + 1;
	}
	v = malloc(CW_MAX(cap, (size_t)1) * sizeof(*v));
	if (!v) {
		r = lay_set_error(pool, -ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		const struct cw_alloc_change *c = &changes[i];

		if (!c->nblocks)
			continue;
		for (uint64_t k = c->first_block >> CHUNK_SHIFT;
		     k <= (c->first_block + c->nblocks - 1) >> CHUNK_SHIFT; k++)
			chunk_apply(pending_of(v, &nv, c->part, k)->words, k, c->first_block,
				    c->nblocks, !c->allocated);
	}
	r = meta_begin(pool->meta);
	for (i = 0; r == 0 && i < nv; i++)
		r = chunk_put(pool->meta, v[i].part->id, v[i].chunk, v[i].words);
	r = meta_end(pool->meta, r);
	if (r < 0) {
		lay_set_error(pool, r, "recording which blocks hold data: %s", strerror(-r));
		goto out;
	}
	for (i = 0; i < nv; i++)
		chunk_store(v[i].part, v[i].chunk, v[i].words);
out:
	free(v);
	pthread_mutex_unlock(&pool->lock);
	return r;
}
