/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Block runs: the compact form of a partition's block list in the
 * database.  A run says "logical blocks lstart + i*stride, 0 <= i < count,
 * are physical blocks pstart + i of one disk".  Rotation over k disks
 * stores k runs whatever the size, a single-disk partition one; only random
 * placement approaches a row per block.
 *
 * Changing the blocks of a logical range [a, b) cuts every run that has a
 * member inside it into the part before and the part after (the members of
 * a run inside [a, b) are consecutive in i), then encodes the new mapping of
 * the range.  Invariant: every mapped logical block belongs to exactly one
 * run; lay_pool_check() verifies it on open.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "layout/layout-internal.h"

/* The statements on the runs of copy 0 (table run) and of copies 1 and 2
 * (copy_run, where each also names its copy: the last argument). */
static const struct runs_sql {
	const char *find, *delete, *insert, *prev, *all;
} sqls[2] = {
	{
		.find = "SELECT lstart, count, stride, disk, pstart FROM run"
			" WHERE part = ?1 AND lend >= ?2 AND lstart < ?3",
		.delete = "DELETE FROM run WHERE part = ?1 AND lstart = ?2",
		.insert = "INSERT INTO run (part, lstart, lend, count, stride, disk, pstart)"
			  " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
		.prev = "SELECT lstart, count, stride, pstart FROM run"
			" WHERE part = ?1 AND disk = ?2 AND lend < ?3 ORDER BY lend DESC LIMIT 1",
		.all = "SELECT part, lstart, count, stride, disk, pstart, 0 FROM run"
		       " ORDER BY part, lstart",
	},
	{
		.find = "SELECT lstart, count, stride, disk, pstart FROM copy_run"
			" WHERE part = ?1 AND copy = ?4 AND lend >= ?2 AND lstart < ?3",
		.delete = "DELETE FROM copy_run WHERE part = ?1 AND lstart = ?2 AND copy = ?3",
		.insert = "INSERT INTO copy_run (part, lstart, lend, count, stride, disk, pstart,"
			  " copy) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
		.prev = "SELECT lstart, count, stride, pstart FROM copy_run"
			" WHERE part = ?1 AND copy = ?4 AND disk = ?2 AND lend < ?3"
			" ORDER BY lend DESC LIMIT 1",
		.all = "SELECT part, lstart, count, stride, disk, pstart, copy FROM copy_run"
		       " ORDER BY part, copy, lstart",
	},
};

static const struct runs_sql *sql_of(uint32_t copy)
{
	return &sqls[copy != 0];
}

static int insert(struct meta *m, const struct run *r)
{
	return meta_exec(m, sql_of(r->copy)->insert, r->copy ? 8 : 7, (int64_t)r->part,
			 (int64_t)r->lstart, (int64_t)(r->lstart + (r->count - 1) * r->stride),
			 (int64_t)r->count, (int64_t)r->stride, (int64_t)r->disk,
			 (int64_t)r->pstart, (int64_t)r->copy);
}

static int delete(struct meta *m, uint64_t part, uint32_t copy, uint64_t lstart)
{
	return meta_exec(m, sql_of(copy)->delete, copy ? 3 : 2, (int64_t)part, (int64_t)lstart,
			 (int64_t)copy);
}

/* Cuts the members inside [a, b) out of the runs that have some. */
static int cut(struct meta *m, uint64_t part, uint32_t copy, uint64_t a, uint64_t b)
{
	_cleanup_free_ struct run *hits = NULL;
	size_t n = 0, cap = 0;
	sqlite3_stmt *s;
	int r, rc;

	r = meta_stmt(m, sql_of(copy)->find, &s);
	if (r < 0)
		return r;
	sqlite3_bind_int64(s, 1, (int64_t)part);
	sqlite3_bind_int64(s, 2, (int64_t)a);
	sqlite3_bind_int64(s, 3, (int64_t)b);
	if (copy)
		sqlite3_bind_int64(s, 4, copy);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (n == cap) {
			struct run *t = realloc(hits, (cap = cap ? 2 * cap : 16) * sizeof(*t));

			if (!t) {
				sqlite3_reset(s);
				return -ENOMEM;
			}
			hits = t;
		}
		hits[n++] = (struct run){
			.part = part,
			.copy = copy,
			.lstart = (uint64_t)sqlite3_column_int64(s, 0),
			.count = (uint64_t)sqlite3_column_int64(s, 1),
			.stride = (uint64_t)sqlite3_column_int64(s, 2),
			.disk = (uint32_t)sqlite3_column_int64(s, 3),
			.pstart = (uint64_t)sqlite3_column_int64(s, 4),
		};
	}
	sqlite3_reset(s);
	if (rc != SQLITE_DONE)
		return meta_errno(rc);

	for (size_t k = 0; k < n; k++) {
		const struct run *h = &hits[k];
		/* Members i with a <= lstart + i*stride < b. */
		uint64_t lo = h->lstart >= a ? 0 : CW_DIV_ROUND_UP(a - h->lstart, h->stride);
		uint64_t hi = CW_MIN(h->count, CW_DIV_ROUND_UP(b - h->lstart, h->stride));

		if (lo >= hi)
			continue;	/* the stride steps over the range */
		r = delete(m, part, copy, h->lstart);
		if (r == 0 && lo > 0) {
			struct run before = *h;

			before.count = lo;
			r = insert(m, &before);
		}
		if (r == 0 && hi < h->count) {
			struct run after = *h;

			after.lstart = h->lstart + hi * h->stride;
			after.pstart = h->pstart + hi;
			after.count = h->count - hi;
			r = insert(m, &after);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/* Whether logical block l on physical block p continues run o; if so, o
 * takes it in. */
static bool extend(struct run *o, uint64_t l, uint64_t p)
{
	if (o->count == 1 && p == o->pstart + 1 && l > o->lstart) {
		o->stride = l - o->lstart;
		o->count = 2;
		return true;
	}
	if (o->count > 1 && p == o->pstart + o->count && l == o->lstart + o->count * o->stride) {
		o->count++;
		return true;
	}
	return false;
}

/* The run of disk d that ends last before logical block a, taken out of
 * the table when block l on p continues it, so that growing a partition
 * step by step keeps one run per disk instead of one per step. */
static int adopt(struct meta *m, uint64_t part, uint32_t copy, uint32_t d, uint64_t a, uint64_t l,
		 uint64_t p, struct run *ret)
{
	struct run prev = { .part = part, .copy = copy, .disk = d };
	sqlite3_stmt *s;
	int r, rc;

	r = meta_stmt(m, sql_of(copy)->prev, &s);
	if (r < 0)
		return r;
	sqlite3_bind_int64(s, 1, (int64_t)part);
	sqlite3_bind_int64(s, 2, d);
	sqlite3_bind_int64(s, 3, (int64_t)a);
	if (copy)
		sqlite3_bind_int64(s, 4, copy);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		prev.lstart = (uint64_t)sqlite3_column_int64(s, 0);
		prev.count = (uint64_t)sqlite3_column_int64(s, 1);
		prev.stride = (uint64_t)sqlite3_column_int64(s, 2);
		prev.pstart = (uint64_t)sqlite3_column_int64(s, 3);
	}
	sqlite3_reset(s);
	if (rc != SQLITE_ROW)
		return rc == SQLITE_DONE ? 0 : meta_errno(rc);
	*ret = prev;
	if (!extend(&prev, l, p))
		return 0;
	r = delete(m, part, copy, ret->lstart);
	return r < 0 ? r : 1;
}

/* Greedy per disk: a block extends its disk's open run when it is the next
 * physical block at the run's logical stride. */
static int encode(struct meta *m, uint64_t part, uint32_t copy, uint64_t a, uint64_t n,
		  const uint64_t *entries)
{
	_cleanup_free_ struct run *open = calloc(CW_DISKS_MAX + 1, sizeof(*open));
	int r;

	if (!open)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		uint32_t d = ENTRY_DISK(entries[i]);
		uint64_t p = ENTRY_PBLOCK(entries[i]), l = a + i;
		struct run *o = &open[d];

		if (!o->part) {
			/* The disk's first block in the range. */
			struct run prev;

			o->part = part;
			o->copy = copy;
			r = a ? adopt(m, part, copy, d, a, l, p, &prev) : 0;
			if (r < 0)
				return r;
			if (r > 0)
				*o = prev;
		}
		if (o->count && extend(o, l, p))
			continue;
		if (o->count) {
			r = insert(m, o);
			if (r < 0)
				return r;
		}
		*o = (struct run){ .part = part, .copy = copy, .lstart = l, .count = 1, .stride = 1,
				   .disk = d, .pstart = p };
	}
	for (uint32_t d = 0; d <= CW_DISKS_MAX; d++)
		if (open[d].count) {
			r = insert(m, &open[d]);
			if (r < 0)
				return r;
		}
	return 0;
}

int lay_runs_replace_copy(struct meta *m, uint64_t part_id, uint32_t c, uint64_t a, uint64_t b,
			  const uint64_t *entries)
{
	int r;

	if (a >= b)
		return 0;
	r = cut(m, part_id, c, a, b);
	if (r == 0 && entries)
		r = encode(m, part_id, c, a, b - a, entries);
	return r;
}

int lay_runs_replace(struct meta *m, uint64_t part_id, uint64_t a, uint64_t b,
		     const uint64_t *entries)
{
	return lay_runs_replace_copy(m, part_id, 0, a, b, entries);
}

static int runs_load(struct meta *m, const char *sql,
		     int (*fn)(void *ctx, const struct run *r), void *ctx)
{
	sqlite3_stmt *s;
	int r, rc;

	r = meta_stmt(m, sql, &s);
	if (r < 0)
		return r;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int64_t v[7];
		struct run run;

		for (int i = 0; i < 7; i++)
			v[i] = sqlite3_column_int64(s, i);
		if (v[2] < 1 || v[3] < 1 || v[1] < 0 || v[5] < 1 || v[4] < 1 || v[4] > CW_DISKS_MAX ||
		    v[6] < 0 || v[6] >= CW_COPIES_MAX) {
			sqlite3_reset(s);
			return -EUCLEAN;
		}
		run = (struct run){ .part = (uint64_t)v[0], .lstart = (uint64_t)v[1],
				    .count = (uint64_t)v[2], .stride = (uint64_t)v[3],
				    .disk = (uint32_t)v[4], .pstart = (uint64_t)v[5],
				    .copy = (uint32_t)v[6] };
		r = fn(ctx, &run);
		if (r < 0) {
			sqlite3_reset(s);
			return r;
		}
	}
	sqlite3_reset(s);
	return rc == SQLITE_DONE ? 0 : meta_errno(rc);
}

int lay_runs_load(struct meta *m, int (*fn)(void *ctx, const struct run *r), void *ctx)
{
	return runs_load(m, sqls[0].all, fn, ctx);
}

int lay_copy_runs_load(struct meta *m, int (*fn)(void *ctx, const struct run *r), void *ctx)
{
	return runs_load(m, sqls[1].all, fn, ctx);
}
