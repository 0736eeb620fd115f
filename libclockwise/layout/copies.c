/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Copies of a partition's blocks on distinct disks in distinct failure
 * domains (DESIGN.md, "Copies"; the mirrored requests of RADIR, section
 * III-B): where copies 1 and 2 of new blocks go, the disks' domains, and
 * each copy's in-sync state.
 *
 * Invariant, kept by every placement and by cw_disk_set_domain: no two
 * copies of one block lie on disks of one failure domain, so a block's
 * copies sit on as many disks as it has copies.  A domain is a name given
 * to disks that fail together (a shelf, a host, a controller); a disk
 * without one is its own, and an RBD image never shares one with a local
 * disk whatever the names say, since they fail for unrelated reasons.
 *
 * Copy 0 is placed by the partition's policy exactly as a single copy is
 * (so one copy behaves as it always did); copy c goes, block by block, to
 * a candidate disk that shares no domain with copies 0..c-1 of that block:
 * under rotation the first such disk after copy c-1's in id order (so a
 * striped partition's copies are striped too, shifted by one disk: every
 * disk carries the same share of first and second copies), under random
 * one at random, under single one such disk for every block (the one with
 * the most room).  The greedy choice can fail where an exact matching
 * would not (space left only on the disks of a block's own domains); then
 * nothing is taken and the allocation is refused with the reason.
 *
 * In-sync state: one bit per copy per block, set while a copy is out of
 * sync (not to be read).  Every copy is in sync when placed; the database
 * keeps the set bits in copy_stale like holes (a chunk without a row has
 * none).  The bits change under the pool lock, in memory first and then
 * in the database (cw_part_copy_set_stale): a reader that sees a bit set
 * goes to another copy at once, and the caller acknowledges what the mark
 * concerns only once the transaction committed.  Memory is never behind
 * the database in the stale direction, so a failed commit leaves a copy
 * marked in memory that the database still says is in sync: safe, since
 * it is not read, and the next mark of its chunk writes it too.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "layout/layout-internal.h"

#define STALE_BYTES (HOLE_WORDS * 8)

static const char sql_stale_all[] = "SELECT part, copy, chunk, bits FROM copy_stale";
static const char sql_stale_trunc[] = "DELETE FROM copy_stale WHERE part = ?1 AND chunk >= ?2";
static const char sql_stale_get[] =
	"SELECT copy, bits FROM copy_stale WHERE part = ?1 AND chunk = ?2";
static const char sql_stale_put[] =
	"UPDATE copy_stale SET bits = ?4 WHERE part = ?1 AND copy = ?2 AND chunk = ?3";
static const char sql_stale_set[] =
	"INSERT OR REPLACE INTO copy_stale (part, copy, chunk, bits) VALUES (?1, ?2, ?3, ?4)";
static const char sql_stale_del[] =
	"DELETE FROM copy_stale WHERE part = ?1 AND copy = ?2 AND chunk = ?3";
static const char sql_domain_set[] =
	"INSERT OR REPLACE INTO disk_domain (disk, domain) VALUES (?1, ?2)";
static const char sql_domain_clear[] = "DELETE FROM disk_domain WHERE disk = ?1";

/* Whether candidate d may take copy c of block i: room, and no domain in
 * common with the block's earlier copies. */
static bool fits(struct cw_pool *pool, const struct disk *d, uint64_t *const *prev, unsigned c,
		 uint64_t i)
{
	if (!d->free)
		return false;
	for (unsigned k = 0; k < c; k++)
		if (lay_same_domain(d, pool->disks[ENTRY_DISK(prev[k][i])]))
			return false;
	return true;
}

/* One free block of d, where the zone says (alloc.c's taking, through
 * a one-disk single placement). */
static uint64_t take_one(struct cw_pool *pool, struct disk *d, enum cw_zone_pref zone)
{
	struct disk *one[1] = { d };
	struct placement pl = { .policy = CW_PLACE_SINGLE, .zone = zone, .disks = one,
				.ndisks = 1 };
	uint64_t e = 0, avail;

	if (lay_alloc(pool, &pl, 1, &e, &avail) < 0)
		return 0;
	return e;
}

int lay_alloc_copy(struct cw_pool *pool, const struct placement *pl, uint64_t n,
		   uint64_t *const *prev, unsigned c, uint64_t *ret_entries, uint64_t *ret_block)
{
	size_t k = pl->ndisks;
	struct disk *single = NULL;

	if (pl->policy == CW_PLACE_SINGLE && n) {
		/* One disk for the copy, the one with the most room that
		 * shares no domain with the earlier copies (each on one disk). */
		for (size_t j = 0; j < k; j++)
			if (fits(pool, pl->disks[j], prev, c, 0) &&
			    (!single || pl->disks[j]->free > single->free))
				single = pl->disks[j];
		if (!single || single->free < n) {
			*ret_block = 0;
			return -ENOSPC;
		}
	}
	for (uint64_t i = 0; i < n; i++) {
		struct disk *d = single;

		if (!d && pl->policy == CW_PLACE_RANDOM) {
			size_t start = (size_t)(lay_random(pool) % k);

			for (size_t j = 0; j < k && !d; j++)
				if (fits(pool, pl->disks[(start + j) % k], prev, c, i))
					d = pl->disks[(start + j) % k];
		} else if (!d) {
			uint32_t after = ENTRY_DISK(prev[c - 1][i]);
			size_t idx;

			for (idx = 0; idx < k && pl->disks[idx]->id <= after; idx++)
				;
			for (size_t j = 0; j < k && !d; j++)
				if (fits(pool, pl->disks[(idx + j) % k], prev, c, i))
					d = pl->disks[(idx + j) % k];
		}
		ret_entries[i] = d ? take_one(pool, d, pl->zone) : 0;
		if (!ret_entries[i]) {
			lay_free_entries(pool, ret_entries, i);
			*ret_block = i;
			return -ENOSPC;
		}
	}
	return 0;
}

/* ---- failure domains ---- */

int cw_disk_set_domain(struct cw_pool *pool, uint32_t disk_id, const char *domain)
{
	char saved[CW_NAME_MAX + 1];
	struct disk *d;
	int r = 0;

	if (!domain)
		domain = "";
	pthread_mutex_lock(&pool->lock);
	r = lay_disk_find(pool, disk_id, &d);
	if (r < 0)
		goto out;
	if (domain[0] && !cw_name_valid(domain)) {
		r = lay_set_error(pool, -EINVAL, "invalid domain '%s': use 1..%d of A-Z a-z 0-9 . _ -, "
				  "not starting with . or -", domain, CW_NAME_MAX);
		goto out;
	}
	if (strcmp(d->domain, domain) == 0)
		goto out;
	/* No block may end with two copies in the new domain. */
	memcpy(saved, d->domain, sizeof(saved));
	snprintf(d->domain, sizeof(d->domain), "%s", domain);
	for (struct cw_part *p = pool->parts; p && r == 0; p = p->next) {
		uint64_t n = atomic_load_explicit(&p->nblocks, memory_order_relaxed);

		for (uint64_t b = 0; b < n && p->copies > 1 && r == 0; b++)
			for (unsigned c = 0; c < p->copies && r == 0; c++) {
				struct disk *dc = pool->disks[ENTRY_DISK(lay_copy_entry(p, c, b))];

				for (unsigned k = 0; k < c && r == 0; k++) {
					struct disk *dk =
						pool->disks[ENTRY_DISK(lay_copy_entry(p, k, b))];

					if ((dc == d || dk == d) && lay_same_domain(dc, dk))
						r = lay_set_error(pool, -EBUSY,
								  "disk %s cannot join domain '%s': "
								  "block %llu of partition '%s' has "
								  "copies on %s and %s", d->name, domain,
								  (unsigned long long)b, p->name,
								  dk->name, dc->name);
				}
			}
	}
	if (r == 0) {
		sqlite3_stmt *s;

		r = meta_begin(pool->meta);
		if (r == 0 && !domain[0])
			r = meta_exec(pool->meta, sql_domain_clear, 1, (int64_t)disk_id);
		else if (r == 0)
			r = meta_stmt(pool->meta, sql_domain_set, &s);
		if (r == 0 && domain[0]) {
			sqlite3_bind_int64(s, 1, disk_id);
			sqlite3_bind_text(s, 2, domain, -1, SQLITE_STATIC);
			r = meta_step(s);
		}
		r = meta_end(pool->meta, r);
		if (r < 0)
			lay_set_error(pool, r, "setting the domain of disk %s: %s", d->name,
				      strerror(-r));
	}
	if (r < 0)
		memcpy(d->domain, saved, sizeof(d->domain));
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

/* ---- in-sync state ---- */

int lay_stale_load(struct cw_pool *pool, struct cw_error *err)
{
	struct cw_part *p = NULL;
	sqlite3_stmt *s;
	int r, rc;

	r = meta_stmt(pool->meta, sql_stale_all, &s);
	if (r < 0)
		return meta_err(err, -EUCLEAN, "the database has no copy_stale table: %s",
				sqlite3_errmsg(pool->meta->db));
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		uint64_t id = (uint64_t)sqlite3_column_int64(s, 0);
		int64_t copy = sqlite3_column_int64(s, 1), chunk = sqlite3_column_int64(s, 2);
		const uint8_t *blob = sqlite3_column_blob(s, 3);
		uint64_t nb;

		if (!p || p->id != id)
			for (p = pool->parts; p && p->id != id;)
				p = p->next;
		if (!p || !blob || sqlite3_column_bytes(s, 3) != STALE_BYTES || chunk < 0 ||
		    copy < 0 || copy >= p->copies) {
			sqlite3_reset(s);
			return meta_err(err, -EUCLEAN, "the database is damaged: a bad copy_stale row "
					"for partition %llu", (unsigned long long)id);
		}
		nb = atomic_load(&p->nblocks);
		if ((uint64_t)chunk >= CW_DIV_ROUND_UP(nb, CHUNK_ENTRIES))
			continue;
		for (unsigned i = 0; i < HOLE_WORDS; i++) {
			uint64_t w, b0 = ((uint64_t)chunk << CHUNK_SHIFT) + 64 * i;

			memcpy(&w, blob + 8 * i, 8);
			w = le64toh(w);
			if (b0 >= nb)
				break;
			if (nb - b0 < 64)
				w &= (UINT64_C(1) << (nb - b0)) - 1;
			atomic_store(lay_stale_word(p, (unsigned)copy, b0), w);
			atomic_fetch_add(&p->stale, (uint64_t)__builtin_popcountll(w));
		}
	}
	sqlite3_reset(s);
	if (rc != SQLITE_DONE)
		return meta_err(err, meta_errno(rc), "reading copies' sync state: %s",
				sqlite3_errmsg(pool->meta->db));
	return 0;
}

int lay_stale_truncate(struct meta *m, const struct cw_part *p, uint64_t nblocks)
{
	uint64_t chunk = nblocks >> CHUNK_SHIFT, keep = nblocks & (CHUNK_ENTRIES - 1);
	struct {
		int64_t copy;
		uint8_t bits[STALE_BYTES];
	} rows[CW_COPIES_MAX];
	unsigned n = 0;
	sqlite3_stmt *s;
	int r, rc;

	r = meta_exec(m, sql_stale_trunc, 2, (int64_t)p->id, (int64_t)CW_DIV_ROUND_UP(nblocks,
										      CHUNK_ENTRIES));
	if (r < 0 || keep == 0)
		return r;
	/* The chunk the end falls in: its bits past the end go, so that a
	 * grow finds its new blocks in sync. */
	r = meta_stmt(m, sql_stale_get, &s);
	if (r < 0)
		return r;
	sqlite3_bind_int64(s, 1, (int64_t)p->id);
	sqlite3_bind_int64(s, 2, (int64_t)chunk);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW && n < CW_COPIES_MAX) {
		const void *blob = sqlite3_column_blob(s, 1);

		if (!blob || sqlite3_column_bytes(s, 1) != STALE_BYTES)
			continue;
		rows[n].copy = sqlite3_column_int64(s, 0);
		memcpy(rows[n++].bits, blob, STALE_BYTES);
	}
	sqlite3_reset(s);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return meta_errno(rc);
	for (unsigned i = 0; i < n && r == 0; i++) {
		for (uint64_t b = keep; b < CHUNK_ENTRIES; b++)
			rows[i].bits[b >> 3] &= (uint8_t)~(1u << (b & 7));
		r = meta_stmt(m, sql_stale_put, &s);
		if (r == 0) {
			sqlite3_bind_int64(s, 1, (int64_t)p->id);
			sqlite3_bind_int64(s, 2, rows[i].copy);
			sqlite3_bind_int64(s, 3, (int64_t)chunk);
			sqlite3_bind_blob(s, 4, rows[i].bits, STALE_BYTES, SQLITE_STATIC);
			r = meta_step(s);
		}
	}
	return r;
}

int lay_stale_store_chunk(struct meta *m, const struct cw_part *p, unsigned c, uint64_t chunk)
{
	uint8_t bits[STALE_BYTES];
	bool any = false;
	sqlite3_stmt *s;
	int r;

	for (unsigned i = 0; i < HOLE_WORDS; i++) {
		uint64_t w = atomic_load(lay_stale_word(p, c, (chunk << CHUNK_SHIFT) + 64 * i));

		any |= w != 0;
		w = htole64(w);
		memcpy(bits + 8 * i, &w, 8);
	}
	if (!any)
		return meta_exec(m, sql_stale_del, 3, (int64_t)p->id, (int64_t)c, (int64_t)chunk);
	r = meta_stmt(m, sql_stale_set, &s);
	if (r < 0)
		return r;
	sqlite3_bind_int64(s, 1, (int64_t)p->id);
	sqlite3_bind_int64(s, 2, c);
	sqlite3_bind_int64(s, 3, (int64_t)chunk);
	sqlite3_bind_blob(s, 4, bits, STALE_BYTES, SQLITE_STATIC);
	return meta_step(s);
}

uint64_t lay_stale_flip(struct cw_part *p, unsigned c, uint64_t b, uint64_t n, bool stale)
{
	uint64_t changed = 0;

	while (n) {
		unsigned lo = (unsigned)(b & 63), k = (unsigned)CW_MIN(n, (uint64_t)(64 - lo));
		uint64_t mask = (k == 64 ? ~UINT64_C(0) : ((UINT64_C(1) << k) - 1)) << lo, old;

		old = stale ? atomic_fetch_or(lay_stale_word(p, c, b), mask)
			    : atomic_fetch_and(lay_stale_word(p, c, b), ~mask);
		changed += (uint64_t)__builtin_popcountll((stale ? ~old : old) & mask);
		b += k;
		n -= k;
	}
	if (stale)
		atomic_fetch_add(&p->stale, changed);
	else
		atomic_fetch_sub(&p->stale, changed);
	return changed;
}

int cw_part_copy_set_stale(struct cw_part *p, uint32_t copy, uint64_t block, uint64_t n,
			   bool stale)
{
	int r;

	if (p->copies < 2 || copy >= p->copies)
		return -EINVAL;
	pthread_mutex_lock(&p->pool->lock);
	r = lay_copy_set_stale(p, copy, block, n, stale);
	pthread_mutex_unlock(&p->pool->lock);
	return r;
}

int lay_copy_set_stale(struct cw_part *p, uint32_t copy, uint64_t block, uint64_t n, bool stale)
{
	struct cw_pool *pool = p->pool;
	uint64_t nb, gone;
	int r = 0;

	nb = atomic_load(&p->nblocks);
	if (block > nb || n > nb - block)
		return -ERANGE;
	/* Only these blocks change: the partition's availability follows
	 * them without a look at the rest (a failing disk marks piece by
	 * piece). */
	gone = lay_part_gone(p, block, n);
	if (n == 0 || lay_stale_flip(p, copy, block, n, stale) == 0)
		goto out;	/* nothing changes: the database already says so */
	r = meta_begin(pool->meta);
	for (uint64_t ch = block >> CHUNK_SHIFT; r == 0 && ch <= (block + n - 1) >> CHUNK_SHIFT;
	     ch++)
		r = lay_stale_store_chunk(pool->meta, p, copy, ch);
	r = meta_end(pool->meta, r);
	if (r < 0 && !stale)
		lay_stale_flip(p, copy, block, n, true);	/* still stale on disk: stays so */
	lay_part_gone_changed(p, gone, lay_part_gone(p, block, n));
out:
	return r;
}

uint64_t cw_part_copy_stale_count(const struct cw_part *p, uint32_t copy)
{
	uint64_t nb = atomic_load(&((struct cw_part *)p)->nblocks), k = 0;

	if (p->copies < 2 || copy >= p->copies)
		return 0;
	for (uint64_t b = 0; b < nb; b += 64)
		k += (uint64_t)__builtin_popcountll(atomic_load(lay_stale_word(p, copy, b)));
	return k;
}

uint64_t cw_part_lost_blocks(const struct cw_part *p)
{
	uint64_t nb = atomic_load(&((struct cw_part *)p)->nblocks), k = 0;

	if (p->copies < 2)
		return 0;
	for (uint64_t b = 0; b < nb; b += 64) {
		uint64_t all = ~UINT64_C(0);

		for (unsigned c = 0; c < p->copies; c++)
			all &= atomic_load(lay_stale_word(p, c, b));
		if (nb - b < 64)
			all &= (UINT64_C(1) << (nb - b)) - 1;
		k += (uint64_t)__builtin_popcountll(all);
	}
	return k;
}

int cw_pool_disk_set_stale(struct cw_pool *pool, uint32_t disk_id, uint64_t *ret_marked)
{
	uint64_t marked = 0;
	int r;

	pthread_mutex_lock(&pool->lock);
	r = meta_begin(pool->meta);
	for (struct cw_part *p = pool->parts; p && r == 0; p = p->next) {
		uint64_t nb = atomic_load(&p->nblocks), before = marked;

		for (uint64_t ch = 0; p->copies > 1 && r == 0 && ch << CHUNK_SHIFT < nb; ch++) {
			uint64_t end = CW_MIN(nb, (ch + 1) << CHUNK_SHIFT);

			for (unsigned c = 0; c < p->copies && r == 0; c++) {
				uint64_t m = 0;

				for (uint64_t b = ch << CHUNK_SHIFT; b < end; b++)
					if (ENTRY_DISK(lay_copy_entry(p, c, b)) == disk_id)
						m += lay_stale_flip(p, c, b, 1, true);
				if (m)
					r = lay_stale_store_chunk(pool->meta, p, c, ch);
				marked += m;
			}
		}
		if (marked != before)
			lay_part_update_available(p);
	}
	r = meta_end(pool->meta, r);
	pthread_mutex_unlock(&pool->lock);
	if (r == 0 && ret_marked)
		*ret_marked = marked;
	return r;
}
