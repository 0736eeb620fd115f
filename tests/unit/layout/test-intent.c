/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: copies out of sync and the write-intent record of mirrored
 * partitions on a real pool (sqlite file, disk files) — marking a copy's
 * blocks stale and in sync again keeps the copy_stale rows and the bits in
 * step across a reopen; a disk's copies all marked at once (a missing
 * disk, whose partitions stay available from the survivors); a region is
 * recorded dirty before a write and forgotten only once idle for a sweep;
 * after a crash (the pool closed with writes in flight) the dirty regions'
 * other copies come back stale, the first copy in sync winning, and the
 * record empty; writers on threads of their own against a sweeper never
 * find their region's row missing while their write is in flight.
 */
#include "config.h"

#include <pthread.h>

#include <clockwise/mover.h>

#include "pooltest.h"
#include "layout/layout-internal.h"

static const uint64_t three[] = { 401, 401, 401 };

static bool in_sync(struct cw_part *p, uint64_t b, uint32_t c)
{
	struct cw_copy cs[CW_COPIES_MAX];

	CU_ASSERT_FATAL(cw_part_block_copies(p, b, cs) == 0);
	return cs[c].in_sync;
}

static void test_set_stale(void)
{
	struct cw_part_opts o2 = { .copies = 2 };
	struct cw_part_info pi;
	struct cw_part *p, *one;
	struct tp t;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 300 * TP_BS, &o2, &p) == 0);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "one", 4 * TP_BS, NULL, &one) == 0);
	CU_ASSERT(cw_part_copy_set_stale(one, 0, 0, 1, true) == -EINVAL);
	CU_ASSERT(cw_part_copy_set_stale(p, 2, 0, 1, true) == -EINVAL);
	CU_ASSERT(cw_part_copy_set_stale(p, 1, 299, 2, true) == -ERANGE);
	CU_ASSERT(cw_part_copy_stale_count(p, 1) == 0);

	/* Copy 1 of blocks 5..69: one row, in memory and on disk. */
	CU_ASSERT_FATAL(cw_part_copy_set_stale(p, 1, 5, 65, true) == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_stale WHERE copy = 1") == 1);
	CU_ASSERT(cw_part_copy_stale_count(p, 1) == 65 && cw_part_copy_stale_count(p, 0) == 0);
	CU_ASSERT(in_sync(p, 4, 1) && !in_sync(p, 5, 1) && !in_sync(p, 69, 1) && in_sync(p, 70, 1));
	CU_ASSERT(in_sync(p, 5, 0));
	CU_ASSERT(cw_part_lost_blocks(p) == 0);
	/* Marking again changes nothing. */
	CU_ASSERT_FATAL(cw_part_copy_set_stale(p, 1, 10, 10, true) == 0);
	CU_ASSERT(cw_part_copy_stale_count(p, 1) == 65);
	/* Copy 0 of block 6 too: its data is on no copy. */
	CU_ASSERT_FATAL(cw_part_copy_set_stale(p, 0, 6, 1, true) == 0);
	CU_ASSERT(cw_part_lost_blocks(p) == 1);
	CU_ASSERT_FATAL(cw_part_info(p, &pi) == 0);
	CU_ASSERT(pi.stale_copies == 66 && !pi.available && pi.missing_blocks == 1);

	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT(cw_part_copy_stale_count(p, 1) == 65 && cw_part_copy_stale_count(p, 0) == 1);
	CU_ASSERT(!in_sync(p, 6, 0) && !in_sync(p, 6, 1) && in_sync(p, 7, 0));
	CU_ASSERT_FATAL(cw_part_info(p, &pi) == 0);
	CU_ASSERT(pi.stale_copies == 66 && !pi.available);

	/* The clearer: a resync of block 6's copy 0, then of copy 1 in parts. */
	CU_ASSERT_FATAL(cw_part_copy_set_stale(p, 0, 6, 1, false) == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_stale WHERE copy = 0") == 0);
	CU_ASSERT_FATAL(cw_part_info(p, &pi) == 0);
	CU_ASSERT(pi.available && pi.missing_blocks == 0);
	CU_ASSERT_FATAL(cw_part_copy_set_stale(p, 1, 0, 20, false) == 0);
	CU_ASSERT(cw_part_copy_stale_count(p, 1) == 50 && in_sync(p, 19, 1) && !in_sync(p, 20, 1));
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT(cw_part_copy_stale_count(p, 1) == 50 && !in_sync(p, 20, 1));
	CU_ASSERT_FATAL(cw_part_copy_set_stale(p, 1, 0, 300, false) == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_stale") == 0);
	CU_ASSERT_FATAL(cw_part_info(p, &pi) == 0);
	CU_ASSERT(pi.stale_copies == 0);
	tp_fini(&t);
}

/* Every copy on one disk marked at once; with that disk missing, the
 * partition is served from the others. */
static void test_disk_stale(void)
{
	struct cw_part_opts o2 = { .placement = CW_PLACE_ROTATION, .copies = 2 };
	struct cw_part_info pi;
	struct cw_part *p, *one;
	struct cw_error err;
	uint64_t on2 = 0, marked = 0;
	char path[160];
	struct tp t;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 30 * TP_BS, &o2, &p) == 0);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "one", 3 * TP_BS, NULL, &one) == 0);
	for (uint64_t b = 0; b < 30; b++) {
		struct cw_copy cs[CW_COPIES_MAX];

		CU_ASSERT_FATAL(cw_part_block_copies(p, b, cs) == 0);
		on2 += (cs[0].disk_id == 2) + (cs[1].disk_id == 2);
	}
	CU_ASSERT(on2 == 20);
	cw_pool_close(t.pool);
	t.pool = NULL;
	tp_path(&t, "d2.img", path, sizeof(path));
	CU_ASSERT_FATAL(unlink(path) == 0);
	CU_ASSERT_FATAL(cw_pool_open(t.db, &err, &t.pool) == 0);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "one", &one) == 0);
	CU_ASSERT_FATAL(cw_pool_disk_set_stale(t.pool, 2, &marked) == 0);
	CU_ASSERT(marked == 20);
	CU_ASSERT(cw_part_copy_stale_count(p, 0) + cw_part_copy_stale_count(p, 1) == 20);
	CU_ASSERT(cw_part_lost_blocks(p) == 0);
	CU_ASSERT_FATAL(cw_part_info(p, &pi) == 0);
	CU_ASSERT(pi.available && pi.missing_blocks == 0);
	/* A read of any block finds a copy in sync off the missing disk. */
	for (uint64_t b = 0; b < 30; b++) {
		struct cw_copy cs[CW_COPIES_MAX];
		struct cw_extent e;

		CU_ASSERT_FATAL(cw_part_block_copies(p, b, cs) == 0);
		CU_ASSERT((cs[0].in_sync && cs[0].disk_id != 2) || (cs[1].in_sync && cs[1].disk_id != 2));
		CU_ASSERT(cw_part_map(p, b * TP_BS, TP_BS, &e) == 0);
	}
	/* The single copy on disk 2 is untouched and not served. */
	CU_ASSERT_FATAL(cw_part_info(one, &pi) == 0);
	CU_ASSERT(!pi.available);
	CU_ASSERT_FATAL(cw_pool_disk_set_stale(t.pool, 2, &marked) == 0);
	CU_ASSERT(marked == 0);
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT(cw_part_copy_stale_count(p, 0) + cw_part_copy_stale_count(p, 1) == 20);
	CU_ASSERT_FATAL(cw_part_info(p, &pi) == 0);
	CU_ASSERT(pi.available);
	tp_fini(&t);
}

static const uint64_t R = CW_INTENT_REGION_BLOCKS;

static void test_intent(void)
{
	struct cw_part_opts o2 = { .copies = 2 };
	struct cw_part *p, *one;
	uint64_t cleared = 99;
	struct tp t;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 300 * TP_BS, &o2, &p) == 0);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "one", 4 * TP_BS, NULL, &one) == 0);
	/* One copy: no record. */
	CU_ASSERT(cw_part_intent_begin(one, 0, TP_BS) == 0);
	cw_part_intent_end(one, 0, TP_BS);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_intent") == 0);
	CU_ASSERT(cw_part_intent_begin(p, 300 * TP_BS - 10, 11) == -ERANGE);

	/* A write across regions 0 and 1: both recorded before it runs. */
	CU_ASSERT_FATAL(cw_part_intent_begin(p, (R - 1) * TP_BS, 2 * TP_BS) == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_intent") == 2);
	CU_ASSERT(sql_int(t.db, "SELECT sum(region) FROM copy_intent") == 1);
	CU_ASSERT(cw_part_intent_dirty(p) == 2);
	/* In flight: no sweep forgets it. */
	for (int i = 0; i < 3; i++) {
		CU_ASSERT_FATAL(cw_pool_intent_sweep(t.pool, &cleared) == 0);
		CU_ASSERT(cleared == 0);
	}
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_intent") == 2);
	cw_part_intent_end(p, (R - 1) * TP_BS, 2 * TP_BS);
	/* A second write in region 1 while it is dirty: no new row. */
	CU_ASSERT_FATAL(cw_part_intent_begin(p, (R + 5) * TP_BS, 4096) == 0);
	cw_part_intent_end(p, (R + 5) * TP_BS, 4096);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_intent") == 2);
	/* Region 0, idle since the sweeps saw it, goes at the next; region
	 * 1, written since, one sweep later. */
	CU_ASSERT_FATAL(cw_pool_intent_sweep(t.pool, &cleared) == 0);
	CU_ASSERT(cleared == 1);
	CU_ASSERT(sql_int(t.db, "SELECT region FROM copy_intent") == 1);
	CU_ASSERT_FATAL(cw_pool_intent_sweep(t.pool, &cleared) == 0);
	CU_ASSERT(cleared == 1);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_intent") == 0);
	CU_ASSERT(cw_part_intent_dirty(p) == 0);
	/* Recorded again on the next write. */
	CU_ASSERT_FATAL(cw_part_intent_begin(p, 2 * R * TP_BS, TP_BS) == 0);
	CU_ASSERT(sql_int(t.db, "SELECT region FROM copy_intent") == 2);
	cw_part_intent_end(p, 2 * R * TP_BS, TP_BS);
	/* A clean close forgets a dirty region with nothing in flight: the
	 * reopen finds every copy in sync. */
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_intent") == 0);
	CU_ASSERT(cw_part_copy_stale_count(p, 1) == 0 && cw_part_copy_stale_count(p, 0) == 0);
	/* The same region left dirty by a crash (its row, nothing in
	 * memory): the reopen resyncs exactly it. */
	cw_pool_close(t.pool);
	t.pool = NULL;
	sql_run(t.db, "INSERT INTO copy_intent VALUES ((SELECT id FROM part WHERE name = 'p'), 2)");
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_intent") == 0);
	CU_ASSERT(cw_part_copy_stale_count(p, 1) == R && cw_part_copy_stale_count(p, 0) == 0);
	CU_ASSERT(in_sync(p, 2 * R - 1, 1) && !in_sync(p, 2 * R, 1) && !in_sync(p, 3 * R - 1, 1) &&
		  in_sync(p, 3 * R, 1));
	tp_fini(&t);
}

/* A crash with writes in flight on 2- and 3-copy partitions: each dirty
 * region keeps one copy per block in sync, the first one in sync before. */
static void test_crash_recover(void)
{
	struct cw_part_opts o2 = { .copies = 2 }, o3 = { .copies = 3 };
	struct cw_part *p, *q;
	struct tp t;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 200 * TP_BS, &o2, &p) == 0);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "q", 100 * TP_BS, &o3, &q) == 0);
	/* Block 70's copy 0 was stale already: copy 1 wins there. */
	CU_ASSERT_FATAL(cw_part_copy_set_stale(p, 0, 70, 1, true) == 0);
	CU_ASSERT_FATAL(cw_part_intent_begin(p, 70 * TP_BS, 3 * TP_BS) == 0);
	/* The last region of p is short (200 = 3 * 64 + 8). */
	CU_ASSERT_FATAL(cw_part_intent_begin(p, 199 * TP_BS, TP_BS) == 0);
	CU_ASSERT_FATAL(cw_part_intent_begin(q, 0, 100 * TP_BS) == 0);
	/* The process dies: nothing ends, nothing is swept. */
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "q", &q) == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_intent") == 0);
	CU_ASSERT(cw_part_copy_stale_count(p, 0) == 1);
	CU_ASSERT(cw_part_copy_stale_count(p, 1) == R - 1 + 8);
	CU_ASSERT(!in_sync(p, 70, 0) && in_sync(p, 70, 1));
	CU_ASSERT(in_sync(p, 71, 0) && !in_sync(p, 71, 1));
	CU_ASSERT(in_sync(p, 63, 1) && in_sync(p, 191, 1) && !in_sync(p, 192, 1));
	CU_ASSERT(cw_part_lost_blocks(p) == 0);
	CU_ASSERT(cw_part_copy_stale_count(q, 0) == 0 && cw_part_copy_stale_count(q, 1) == 100 &&
		  cw_part_copy_stale_count(q, 2) == 100);
	/* A rebuild journalled for exactly the copies the recovery marked
	 * (not block 70's copy 0, stale before the crash). */
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM move WHERE kind = 4 AND state = 0") == 2);
	CU_ASSERT(sql_int(t.db, "SELECT blocks FROM move WHERE part = (SELECT id FROM part WHERE "
			  "name = 'p')") == R - 1 + 8);
	CU_ASSERT(sql_int(t.db, "SELECT blocks FROM move WHERE part = (SELECT id FROM part WHERE "
			  "name = 'q')") == 200);
	/* Kept in copy_stale: the same after another open, which journals
	 * nothing more. */
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "q", &q) == 0);
	CU_ASSERT(cw_part_copy_stale_count(p, 1) == R - 1 + 8 && in_sync(p, 70, 1));
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM move") == 2);
	/* The mover runs them (the copies themselves: test-copies). */
	for (;;) {
		struct cw_mover_task task;

		CU_ASSERT_FATAL(cw_mover_next(t.pool, &task) == 0);
		if (task.action == CW_MOVER_IDLE)
			break;
		if (task.action == CW_MOVER_COPY) {
			CU_ASSERT(task.rebuild && task.src_disk_id != task.dst_disk_id);
			CU_ASSERT_FATAL(cw_mover_copied(t.pool, 0, 0) == 0);
		}
	}
	CU_ASSERT(cw_part_copy_stale_count(p, 1) == 0 && cw_part_copy_stale_count(p, 0) == 1);
	CU_ASSERT(cw_part_copy_stale_count(q, 1) == 0 && cw_part_copy_stale_count(q, 2) == 0);
	tp_fini(&t);
}

/* Runs the mover to idle without copying (the bits are what is checked);
 * returns the copies it asked for. */
static unsigned drive(struct cw_pool *pool)
{
	struct cw_mover_task task;
	unsigned n = 0;

	for (;;) {
		CU_ASSERT_FATAL(cw_mover_next(pool, &task) == 0);
		if (task.action == CW_MOVER_IDLE)
			return n;
		if (task.action == CW_MOVER_COPY) {
			CU_ASSERT_FATAL(cw_mover_copied(pool, 0, 0) == 0);
			n++;
		}
	}
}

/* A crash while a partition is being moved: its dirty regions' rebuild
 * waits for the move and follows it. */
static void test_crash_busy(void)
{
	static const uint64_t four[] = { 401, 401, 401, 401 };
	struct cw_part_opts o2 = { .copies = 2 };
	uint64_t *ids = NULL, others = 0;
	struct cw_part *p;
	size_t n = 0;
	struct tp t;

	tp_pool(&t, TP_BS, 4, four, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 90 * TP_BS, &o2, &p) == 0);
	CU_ASSERT_FATAL(cw_disk_evacuate(t.pool, 1, &ids, &n) == 0 && n == 1);
	free(ids);
	CU_ASSERT_FATAL(cw_part_intent_begin(p, 0, 2 * TP_BS) == 0);
	tp_reopen(&t);	/* the process died */
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT(cw_part_copy_stale_count(p, 1) == R);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM move WHERE kind = 4") == 0);
	/* The evacuation rebuilds the copies 1 it takes off disk 1 (read
	 * from copy 0); the rebuild that follows it, the others. */
	for (uint64_t b = 0; b < R; b++) {
		struct cw_copy cs[CW_COPIES_MAX];

		CU_ASSERT_FATAL(cw_part_block_copies(p, b, cs) == 0);
		others += cs[1].disk_id != 1;
	}
	CU_ASSERT(others > 0 && others < R);
	CU_ASSERT(drive(t.pool) >= R);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM move WHERE kind = 4 AND state = 2") == 1);
	CU_ASSERT(sql_int(t.db, "SELECT blocks FROM move WHERE kind = 4") == (int64_t)others);
	CU_ASSERT(cw_part_copy_stale_count(p, 1) == 0 && cw_part_copy_stale_count(p, 0) == 0);
	tp_fini(&t);
}

/* Two crashes while a partition is being moved: the resync the first
 * one's recovery owed, waiting for the move, is kept in the pool
 * (copy_resync), so after the second it still follows the move; once
 * journalled it is owed no more. */
static void test_crash_busy_twice(void)
{
	static const uint64_t four[] = { 401, 401, 401, 401 };
	struct cw_part_opts o2 = { .copies = 2 };
	uint64_t *ids = NULL;
	struct cw_part *p;
	size_t n = 0;
	struct tp t;

	tp_pool(&t, TP_BS, 4, four, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 200 * TP_BS, &o2, &p) == 0);
	CU_ASSERT_FATAL(cw_disk_evacuate(t.pool, 1, &ids, &n) == 0 && n == 1);
	free(ids);
	/* regions 0 and 2 dirty */
	CU_ASSERT_FATAL(cw_part_intent_begin(p, 0, 2 * TP_BS) == 0);
	CU_ASSERT_FATAL(cw_part_intent_begin(p, 2 * R * TP_BS, TP_BS) == 0);
	tp_reopen(&t);	/* the process died */
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_intent") == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_resync") == 2);
	CU_ASSERT(sql_int(t.db, "SELECT sum(region) FROM copy_resync") == 2);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_resync WHERE m0 = 0 AND m1 = -1 AND "
			  "m2 = 0") == 2);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM move WHERE kind = 4") == 0);
	tp_reopen(&t);	/* and again, the move still unfinished */
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT(cw_part_copy_stale_count(p, 1) == 2 * R);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_resync") == 2);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM move WHERE kind = 4") == 0);
	CU_ASSERT(drive(t.pool) >= 2 * R);
	/* the rebuild followed the evacuation, and is owed no more */
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM move WHERE kind = 4 AND state = 2") == 1);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_resync") == 0);
	CU_ASSERT(cw_part_copy_stale_count(p, 1) == 0 && cw_part_copy_stale_count(p, 0) == 0);
	tp_reopen(&t);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM move WHERE kind = 4") == 1);
	tp_fini(&t);
}

/* Without a move, the resync is journalled at the open that recovers:
 * nothing is owed after it.  What is owed while a rebuild runs stays
 * owed till it ends; a shrink forgets what is owed past the end. */
static void test_resync_owed(void)
{
	struct cw_part_opts o2 = { .copies = 2 };
	struct cw_part *p;
	struct tp t;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 200 * TP_BS, &o2, &p) == 0);
	CU_ASSERT_FATAL(cw_part_intent_begin(p, 0, TP_BS) == 0);
	tp_reopen(&t);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_resync") == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM move WHERE kind = 4 AND blocks = 64") == 1);
	cw_pool_close(t.pool);
	t.pool = NULL;
	sql_run(t.db, "INSERT INTO copy_resync (part, region, m1) VALUES (1, 1, 1), (1, 3, 3)");
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	/* a rebuild unfinished: owed still, with the bits of block 64 */
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_resync") == 2);
	CU_ASSERT_FATAL(cw_part_resize(p, 100 * TP_BS) == 0);
	CU_ASSERT(sql_int(t.db, "SELECT group_concat(region) FROM copy_resync") == 1);
	/* the rebuild ends: what is owed is journalled (nothing out of sync
	 * there: no rebuild) and owed no more */
	CU_ASSERT(drive(t.pool) == 64);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_resync") == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM move") == 1);
	tp_fini(&t);
}

/* A shrink forgets the record past the end, in the database and in
 * memory (a grow records its regions anew). */
static void test_intent_shrink(void)
{
	struct cw_part_opts o2 = { .copies = 2 };
	struct cw_part *p;
	struct tp t;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 200 * TP_BS, &o2, &p) == 0);
	CU_ASSERT_FATAL(cw_part_intent_begin(p, 150 * TP_BS, TP_BS) == 0);
	cw_part_intent_end(p, 150 * TP_BS, TP_BS);
	CU_ASSERT_FATAL(cw_part_resize(p, 100 * TP_BS) == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_intent") == 0);
	/* Grown again: a write there records its region anew. */
	CU_ASSERT_FATAL(cw_part_resize(p, 200 * TP_BS) == 0);
	CU_ASSERT(cw_part_intent_dirty(p) == 0);
	CU_ASSERT_FATAL(cw_part_intent_begin(p, 150 * TP_BS, TP_BS) == 0);
	CU_ASSERT(sql_int(t.db, "SELECT region FROM copy_intent") == 2);
	cw_part_intent_end(p, 150 * TP_BS, TP_BS);
	CU_ASSERT_FATAL(cw_part_resize(p, 100 * TP_BS) == 0);
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT(cw_part_copy_stale_count(p, 1) == 0);
	tp_fini(&t);
}

/* Writers and a sweeper at once: between begin and end, the region's
 * row is always in the database (read by a connection of each writer's
 * own).  Broken by a sweep that drops a row a writer counts on. */
#define WRITERS 3
#define ROUNDS 400

static struct {
	struct tp t;
	struct cw_part *p;
	atomic_bool stop;
	atomic_uint missing, errors, sweeps, cleared;
} race;

static void *race_writer(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg, x = id * 2654435761u;
	sqlite3 *h;
	sqlite3_stmt *s;

	if (sqlite3_open(race.t.db, &h) != SQLITE_OK ||
	    sqlite3_prepare_v2(h, "SELECT count(*) FROM copy_intent WHERE region = ?1", -1, &s,
			       NULL) != SQLITE_OK) {
		atomic_fetch_add(&race.errors, 1);
		return NULL;
	}
	sqlite3_busy_timeout(h, 5000);
	for (unsigned i = 0; i < ROUNDS; i++) {
		uint64_t g = (x = x * 1103515245u + 12345u) >> 16 & 3;
		uint64_t off = (g * R + (x >> 8) % R) * TP_BS;

		if (cw_part_intent_begin(race.p, off, 4096) < 0) {
			atomic_fetch_add(&race.errors, 1);
			continue;
		}
		sqlite3_bind_int64(s, 1, (int64_t)g);
		if (sqlite3_step(s) != SQLITE_ROW)
			atomic_fetch_add(&race.errors, 1);
		else if (sqlite3_column_int64(s, 0) != 1)
			atomic_fetch_add(&race.missing, 1);
		sqlite3_reset(s);
		cw_part_intent_end(race.p, off, 4096);
	}
	sqlite3_finalize(s);
	sqlite3_close(h);
	return NULL;
}

static void *race_sweeper(void *arg)
{
	(void)arg;
	while (!atomic_load(&race.stop)) {
		uint64_t n = 0;

		if (cw_pool_intent_sweep(race.t.pool, &n) < 0)
			atomic_fetch_add(&race.errors, 1);
		atomic_fetch_add(&race.sweeps, 1);
		atomic_fetch_add(&race.cleared, (unsigned)n);
	}
	return NULL;
}

static void test_intent_race(void)
{
	pthread_t w[WRITERS], sw;

	tp_pool(&race.t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(race.t.pool, "p", 4 * R * TP_BS,
				       &(struct cw_part_opts){ .copies = 2 }, &race.p) == 0);
	CU_ASSERT_FATAL(pthread_create(&sw, NULL, race_sweeper, NULL) == 0);
	for (unsigned i = 0; i < WRITERS; i++)
		CU_ASSERT_FATAL(pthread_create(&w[i], NULL, race_writer,
					       (void *)(uintptr_t)(i + 1)) == 0);
	for (unsigned i = 0; i < WRITERS; i++)
		pthread_join(w[i], NULL);
	atomic_store(&race.stop, true);
	pthread_join(sw, NULL);
	printf("  %u sweeps cleared %u regions; %u rows missing, %u errors\n",
	       atomic_load(&race.sweeps), atomic_load(&race.cleared), atomic_load(&race.missing),
	       atomic_load(&race.errors));
	CU_ASSERT(atomic_load(&race.missing) == 0);
	CU_ASSERT(atomic_load(&race.errors) == 0);
	CU_ASSERT(atomic_load(&race.cleared) > 0);	/* the sweeper did drop rows */
	/* Nothing in flight: two sweeps empty the record. */
	CU_ASSERT_FATAL(cw_pool_intent_sweep(race.t.pool, NULL) == 0);
	CU_ASSERT_FATAL(cw_pool_intent_sweep(race.t.pool, NULL) == 0);
	CU_ASSERT(sql_int(race.t.db, "SELECT count(*) FROM copy_intent") == 0);
	tp_fini(&race.t);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("intent", NULL, NULL);

	cwtest_add(s, "copies marked stale and in sync again", test_set_stale);
	cwtest_add(s, "a disk's copies marked at once", test_disk_stale);
	cwtest_add(s, "write intent recorded and swept", test_intent);
	cwtest_add(s, "a crash: dirty regions resynced", test_crash_recover);
	cwtest_add(s, "a crash during a move: the resync follows it", test_crash_busy);
	cwtest_add(s, "two crashes during a move: the resync still follows it",
		   test_crash_busy_twice);
	cwtest_add(s, "a resync owed is kept until journalled", test_resync_owed);
	cwtest_add(s, "a shrink forgets the record past the end", test_intent_shrink);
	cwtest_add(s, "writers against a sweeper", test_intent_race);
	return cwtest_run();
}
