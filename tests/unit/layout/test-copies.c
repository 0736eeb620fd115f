/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: mirrored partitions on a real pool (sqlite file, disk
 * files) — 2 and 3 copies of every block on distinct disks, in distinct
 * failure domains (named domains, an RBD image apart from local disks),
 * refused with the reason when the disks lack domains or room; grow,
 * shrink, delete, moves and a journalled move interrupted by a close keep
 * the copies apart and every block owned once (the reopen checks it);
 * extents contiguous on every copy; the copies and their in-sync state
 * stored and read back, and a schema-11 pool upgraded; a move takes any
 * copy (copy 1 off a disk too), a rebuild rewrites copies out of sync in
 * place from one in sync and resumes after a reopen, a disk is replaced
 * (copies moved or rebuilt onto the new one, refused when data is lost).
 */
#include "config.h"

#include <clockwise/cache.h>
#include <clockwise/mover.h>

#include "pooltest.h"
#include "layout/layout-internal.h"

static const uint64_t four[] = { 201, 201, 201, 201 };

/* Every block of p has cw_part_copies(p) copies on distinct disks, in
 * sync, and (domains given, by disk id) in distinct domains. */
static void check_apart(struct cw_part *p, const char *const *domains)
{
	uint64_t n = cw_part_nblocks(p);
	uint32_t k = cw_part_copies(p);

	for (uint64_t b = 0; b < n; b++) {
		struct cw_copy cs[CW_COPIES_MAX];
		struct cw_extent e;

		CU_ASSERT_FATAL(cw_part_block_copies(p, b, cs) == 0);
		CU_ASSERT_FATAL(cw_part_map(p, b * cw_part_block_size(p), 0, &e) == 0);
		CU_ASSERT(e.disk_id == cs[0].disk_id && e.phys_offset == cs[0].phys_offset);
		for (uint32_t c = 0; c < k; c++) {
			CU_ASSERT(cs[c].in_sync);
			for (uint32_t d = 0; d < c; d++) {
				CU_ASSERT_FATAL(cs[c].disk_id != cs[d].disk_id);
				if (domains && domains[cs[c].disk_id][0])
					CU_ASSERT(strcmp(domains[cs[c].disk_id],
							 domains[cs[d].disk_id]) != 0);
			}
		}
	}
}

/* Every block's copies on distinct disks, in sync or not. */
static void check_apart_any(struct cw_part *p)
{
	for (uint64_t b = 0; b < cw_part_nblocks(p); b++) {
		struct cw_copy cs[CW_COPIES_MAX];

		CU_ASSERT_FATAL(cw_part_block_copies(p, b, cs) == 0);
		for (uint32_t c = 0; c < cw_part_copies(p); c++)
			for (uint32_t d = 0; d < c; d++)
				CU_ASSERT(cs[c].disk_id != cs[d].disk_id);
	}
}

static uint64_t disk_free(struct cw_pool *pool, uint32_t id)
{
	struct cw_disk_info di;

	CU_ASSERT_FATAL(cw_disk_info(pool, id, &di) == 0);
	return di.free_blocks;
}

static void test_two_and_three(void)
{
	struct cw_part_opts o2 = { .placement = CW_PLACE_ROTATION, .copies = 2 };
	struct cw_part_opts o3 = { .placement = CW_PLACE_RANDOM, .copies = 3 };
	struct cw_part_opts os = { .placement = CW_PLACE_SINGLE, .copies = 2 };
	struct cw_part *p, *q, *r, *one;
	struct cw_part_info pi;
	uint32_t on[5] = { 0 };
	struct tp t;

	tp_pool(&t, TP_BS, 4, four, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "m2", 40 * TP_BS, &o2, &p) == 0);
	CU_ASSERT(cw_part_copies(p) == 2);
	check_apart(p, NULL);
	/* Rotation: both copies striped, the second one disk further on. */
	for (uint64_t b = 0; b < 40; b++) {
		struct cw_copy cs[CW_COPIES_MAX];

		CU_ASSERT_FATAL(cw_part_block_copies(p, b, cs) == 0);
		CU_ASSERT(cs[1].disk_id == cs[0].disk_id % 4 + 1);
		on[cs[0].disk_id]++;
		on[cs[1].disk_id]++;
	}
	for (uint32_t d = 1; d <= 4; d++)
		CU_ASSERT(on[d] == 20);
	CU_ASSERT(disk_free(t.pool, 1) == 200 - 20);
	CU_ASSERT_FATAL(cw_part_info(p, &pi) == 0);
	CU_ASSERT(pi.copies == 2 && pi.nblocks == 40 && pi.stale_copies == 0 &&
		  pi.opts.copies == 2);

	CU_ASSERT_FATAL(cw_part_create(t.pool, "m3", 30 * TP_BS, &o3, &q) == 0);
	check_apart(q, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "s2", 10 * TP_BS, &os, &r) == 0);
	check_apart(r, NULL);
	for (uint64_t b = 1; b < 10; b++) {	/* single: each copy on one disk */
		struct cw_copy c0[CW_COPIES_MAX], cb[CW_COPIES_MAX];

		CU_ASSERT_FATAL(cw_part_block_copies(r, 0, c0) == 0);
		CU_ASSERT_FATAL(cw_part_block_copies(r, b, cb) == 0);
		CU_ASSERT(c0[0].disk_id == cb[0].disk_id && c0[1].disk_id == cb[1].disk_id);
	}
	/* A single copy is as it always was. */
	CU_ASSERT_FATAL(cw_part_create(t.pool, "one", 8 * TP_BS, NULL, &one) == 0);
	CU_ASSERT(cw_part_copies(one) == 1);
	tp_check_totals(t.pool, 0);
	CU_ASSERT(sql_int(t.db, "SELECT copies FROM part_copies WHERE part ="
			  " (SELECT id FROM part WHERE name = 'm3')") == 3);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM part_copies WHERE part ="
			  " (SELECT id FROM part WHERE name = 'one')") == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(DISTINCT copy) FROM copy_run WHERE part ="
			  " (SELECT id FROM part WHERE name = 'm3')") == 2);

	/* The same after a reopen (which checks every block is owned once
	 * and no block has two copies on a disk). */
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "m2", &p) == 0);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "m3", &q) == 0);
	CU_ASSERT(cw_part_copies(p) == 2 && cw_part_copies(q) == 3);
	check_apart(p, NULL);
	check_apart(q, NULL);
	tp_check_totals(t.pool, 0);
	/* Delete gives back every copy. */
	CU_ASSERT_FATAL(cw_part_delete(q) == 0);
	tp_check_totals(t.pool, 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_run WHERE copy = 2") == 0);
	tp_fini(&t);
}

static void test_refusals(void)
{
	static const uint64_t two[] = { 101, 31 };
	struct cw_part_opts o2 = { .copies = 2 }, o3 = { .copies = 3 }, o4 = { .copies = 4 };
	struct cw_part *p;
	struct tp t;

	tp_pool(&t, TP_BS, 2, two, NULL);
	CU_ASSERT(cw_part_create(t.pool, "x", TP_BS, &o3, &p) == -EXDEV);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "3 failure domains") != NULL);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "too few disks") != NULL);
	CU_ASSERT(cw_part_create(t.pool, "x", TP_BS, &o4, &p) == -EINVAL);
	/* 40 blocks would fit one copy, not two: the small disk holds 30. */
	CU_ASSERT(cw_part_create(t.pool, "x", 40 * TP_BS, &o2, &p) == -ENOSPC);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "other copies") != NULL);
	tp_check_totals(t.pool, 0);
	CU_ASSERT(disk_free(t.pool, 1) == 100 && disk_free(t.pool, 2) == 30);
	/* More than all the free space: refused before anything is taken. */
	CU_ASSERT(cw_part_create(t.pool, "x", 100 * TP_BS, &o2, &p) == -ENOSPC);
	CU_ASSERT(cw_pool_last_error(t.pool)->needed_bytes == 200 * TP_BS);
	/* One domain for both disks: no room for a second copy. */
	CU_ASSERT_FATAL(cw_disk_set_domain(t.pool, 1, "shelf") == 0);
	CU_ASSERT_FATAL(cw_disk_set_domain(t.pool, 2, "shelf") == 0);
	CU_ASSERT(cw_part_create(t.pool, "x", TP_BS, &o2, &p) == -EXDEV);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "distinct disk domains") != NULL);
	CU_ASSERT_FATAL(cw_disk_set_domain(t.pool, 2, NULL) == 0);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "x", 30 * TP_BS, &o2, &p) == 0);
	check_apart(p, NULL);
	/* Growing past what the small disk holds: refused, nothing taken. */
	CU_ASSERT(cw_part_resize(p, 31 * TP_BS) == -ENOSPC);
	CU_ASSERT(cw_part_nblocks(p) == 30);
	tp_check_totals(t.pool, 0);
	/* A domain that would put two copies together is refused. */
	CU_ASSERT(cw_disk_set_domain(t.pool, 2, "shelf") == -EBUSY);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "has copies on") != NULL);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM disk_domain WHERE domain = 'shelf'") == 1);
	CU_ASSERT(cw_disk_set_domain(t.pool, 2, "bad/name") == -EINVAL);
	/* An SSD cache in front of copies is not there yet. */
	CU_ASSERT(cw_part_cache_set(p, &(struct cw_cache_conf){ .size_bytes = TP_BS }) ==
		  -EOPNOTSUPP);
	tp_fini(&t);
}

static void test_domains(void)
{
	static const uint64_t six[] = { 101, 101, 101, 101, 101, 101 };
	/* by disk id: two shelves of two and two disks of their own */
	static const char *const dom[] = { "", "a", "a", "b", "b", "", "" };
	struct cw_part_opts o3 = { .placement = CW_PLACE_ROTATION, .copies = 3 };
	struct cw_part_opts or = { .placement = CW_PLACE_RANDOM, .copies = 2 };
	struct cw_disk_info di;
	struct cw_part *p, *q;
	struct tp t;

	tp_pool(&t, TP_BS, 6, six, NULL);
	for (uint32_t d = 1; d <= 6; d++)
		CU_ASSERT_FATAL(cw_disk_set_domain(t.pool, d, dom[d]) == 0);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 50 * TP_BS, &o3, &p) == 0);
	check_apart(p, dom);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "q", 50 * TP_BS, &or, &q) == 0);
	check_apart(q, dom);
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_disk_info(t.pool, 2, &di) == 0);
	CU_ASSERT(strcmp(di.domain, "a") == 0);
	CU_ASSERT_FATAL(cw_disk_info(t.pool, 6, &di) == 0);
	CU_ASSERT(di.domain[0] == '\0');
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	check_apart(p, dom);
	tp_fini(&t);
}

/* An RBD image and a local disk never share a domain, whatever the names:
 * the rule itself, on the private disk structures (an image needs a
 * cluster to be added). */
static void test_rbd_domain(void)
{
	struct disk a = { .id = 1, .tier = CW_TIER_HDD, .domain = "site" };
	struct disk b = { .id = 2, .tier = CW_TIER_RBD, .domain = "site" };
	struct disk c = { .id = 3, .tier = CW_TIER_SSD, .domain = "site" };
	struct disk d = { .id = 4, .tier = CW_TIER_RBD, .domain = "site" };
	struct disk e = { .id = 5, .tier = CW_TIER_HDD };
	struct disk f = { .id = 6, .tier = CW_TIER_HDD };
	struct disk *all[] = { &a, &b, &c, &d, &e, &f };
	struct placement pl = { .disks = all, .ndisks = 6 };

	CU_ASSERT(!lay_same_domain(&a, &b));
	CU_ASSERT(lay_same_domain(&a, &c));	/* an SSD and an HDD may share one */
	CU_ASSERT(lay_same_domain(&b, &d));	/* two images may */
	CU_ASSERT(!lay_same_domain(&e, &f));	/* no name: each its own */
	CU_ASSERT(lay_same_domain(&e, &e));
	CU_ASSERT(lay_domains(&pl) == 4);	/* {a, c}, {b, d}, e, f */
}

static void test_grow_shrink(void)
{
	static const uint64_t three[] = { 101, 101, 101 };
	struct cw_part_opts o2 = { .placement = CW_PLACE_ROTATION, .copies = 2 };
	struct cw_part *p;
	struct tp t;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 10 * TP_BS, &o2, &p) == 0);
	for (int i = 0; i < 5; i++) {
		CU_ASSERT_FATAL(cw_part_resize(p, (uint64_t)(17 + 9 * i) * TP_BS) == 0);
		check_apart(p, NULL);
		tp_check_totals(t.pool, 0);
		CU_ASSERT_FATAL(cw_part_resize(p, (uint64_t)(6 + 5 * i) * TP_BS) == 0);
		check_apart(p, NULL);
		tp_check_totals(t.pool, 0);
	}
	CU_ASSERT(cw_part_nblocks(p) == 26);
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT(cw_part_nblocks(p) == 26);
	check_apart(p, NULL);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

/* An extent cw_part_map gives is contiguous on every copy. */
static void test_map_contiguous(void)
{
	static const uint64_t two[] = { 101, 101 };
	struct cw_part_opts os = { .placement = CW_PLACE_SINGLE, .copies = 2 };
	struct cw_part_opts filler = { .placement = CW_PLACE_SINGLE, .disk_id = 2 };
	struct cw_copy cs[CW_COPIES_MAX];
	struct cw_extent e;
	struct cw_part *p, *f;
	struct tp t;

	tp_pool(&t, TP_BS, 2, two, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 4 * TP_BS, &os, &p) == 0);
	/* Copy 0 of blocks 4.. follows on its disk, copy 1 does not: a
	 * block of another partition lies between. */
	CU_ASSERT_FATAL(cw_part_create(t.pool, "f", TP_BS, &filler, &f) == 0);
	CU_ASSERT_FATAL(cw_part_resize(p, 8 * TP_BS) == 0);
	check_apart(p, NULL);
	CU_ASSERT_FATAL(cw_part_map(p, TP_BS / 2, 0, &e) == 0);
	CU_ASSERT(e.length == TP_BS / 2);
	CU_ASSERT_FATAL(cw_part_map(p, 0, 8 * TP_BS, &e) == 0);
	CU_ASSERT(e.length == 4 * TP_BS);
	CU_ASSERT_FATAL(cw_part_map_copies(p, 4 * TP_BS + 100, cs) == 0);
	CU_ASSERT_FATAL(cw_part_map(p, 4 * TP_BS + 100, 4 * TP_BS - 100, &e) == 0);
	CU_ASSERT(e.length == 4 * TP_BS - 100);
	CU_ASSERT(cs[0].phys_offset == e.phys_offset && cs[0].disk_id == e.disk_id);
	CU_ASSERT(cs[1].phys_offset % TP_BS == 100);
	CU_ASSERT(cw_part_map_copies(p, 8 * TP_BS, cs) == -ERANGE);
	tp_fini(&t);
}

/* The block's bytes at copy c, in buf. */
static void read_copy(struct cw_pool *pool, struct cw_part *p, uint64_t b, unsigned c,
		      uint8_t *buf)
{
	struct cw_copy cs[CW_COPIES_MAX];

	CU_ASSERT_FATAL(cw_part_block_copies(p, b, cs) == 0);
	CU_ASSERT_FATAL(pread(cw_disk_fd(pool, cs[c].disk_id), buf, TP_BS,
			      (off_t)cs[c].phys_offset) == TP_BS);
}

/* Writes byte v over every copy of block b of p. */
static void write_all(struct cw_pool *pool, struct cw_part *p, uint64_t b, uint8_t v)
{
	static uint8_t buf[TP_BS];
	struct cw_copy cs[CW_COPIES_MAX];

	memset(buf, v, sizeof(buf));
	CU_ASSERT_FATAL(cw_part_block_copies(p, b, cs) == 0);
	for (uint32_t c = 0; c < cw_part_copies(p); c++)
		CU_ASSERT_FATAL(pwrite(cw_disk_fd(pool, cs[c].disk_id), buf, TP_BS,
				       (off_t)cs[c].phys_offset) == TP_BS);
}

/* Runs the mover to idle, copying as the daemon does, or stops after
 * `stop` copies (0: no limit; a reopen then is a kill between blocks).
 * Returns the copies done. */
static unsigned drive_copies(struct cw_pool *pool, unsigned stop)
{
	static uint8_t buf[TP_BS], dst[TP_BS];
	struct cw_mover_task task;
	unsigned n = 0;

	for (;;) {
		struct cw_mover_outcome o = { 0, 0, false };

		if (stop && n == stop)
			break;	/* nothing left outstanding */
		CU_ASSERT_FATAL(cw_mover_next(pool, &task) == 0);
		if (task.action == CW_MOVER_IDLE)
			break;
		if (task.action != CW_MOVER_COPY)
			continue;
		CU_ASSERT_FATAL(pread(cw_disk_fd(pool, task.src_disk_id), buf, TP_BS,
				      (off_t)task.src_offset) == TP_BS);
		if (task.verify) {	/* a scrub: compare, and repair */
			CU_ASSERT_FATAL(pread(cw_disk_fd(pool, task.dst_disk_id), dst, TP_BS,
					      (off_t)task.dst_offset) == TP_BS);
			o.differs = memcmp(buf, dst, TP_BS) != 0;
		}
		if (!task.verify || (o.differs && task.repair))
			CU_ASSERT_FATAL(pwrite(cw_disk_fd(pool, task.dst_disk_id), buf, TP_BS,
					       (off_t)task.dst_offset) == TP_BS);
		CU_ASSERT_FATAL(cw_mover_copied_batch(pool, &o, 1) == 0);
		n++;
	}
	return n;
}

/* A move of a mirrored partition never puts a block beside its other copy. */
static void test_move(void)
{
	static const uint64_t three[] = { 101, 101, 101 };
	struct cw_part_opts o2 = { .placement = CW_PLACE_ROTATION, .copies = 2 };
	uint32_t to[] = { 1, 2 };
	struct cw_move_opts mo = { .placement = CW_PLACE_ROTATION, .disk_ids = to, .ndisks = 2 };
	struct cw_move *m;
	struct cw_part *p;
	struct tp t;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 12 * TP_BS, &o2, &p) == 0);
	/* Block by block: each with copy 0 on disk 3 has copy 1 on disk 1
	 * (rotation puts it on the next disk), so copy 0 must go to 2. */
	for (uint64_t b = 0; b < 12; b++) {
		struct cw_copy cs[CW_COPIES_MAX];
		struct cw_move_step st;

		CU_ASSERT_FATAL(cw_part_block_copies(p, b, cs) == 0);
		if (cs[0].disk_id != 3)
			continue;
		CU_ASSERT_FATAL(cw_move_plan(p, b, 1, &mo, &m) == 0);
		CU_ASSERT_FATAL(cw_move_nsteps(m) == 1);
		CU_ASSERT_FATAL(cw_move_step(m, 0, &st) == 0);
		CU_ASSERT(st.dst_disk_id != cs[1].disk_id && st.dst_disk_id != 3);
		CU_ASSERT_FATAL(cw_move_commit(m) == 0);
		check_apart(p, NULL);
	}
	tp_check_totals(t.pool, 0);
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	check_apart(p, NULL);
	/* Off disk 3 entirely: copy 1 leaves it as well as copy 0, each to
	 * the one of disks 1 and 2 the block's other copy is not on. */
	CU_ASSERT_FATAL(cw_move_plan(p, 0, 12, &mo, &m) == 0);
	CU_ASSERT(cw_move_nsteps(m) == 4);
	for (size_t k = 0; k < cw_move_nsteps(m); k++) {
		struct cw_copy cs[CW_COPIES_MAX];
		struct cw_move_step st;

		CU_ASSERT_FATAL(cw_move_step(m, k, &st) == 0);
		CU_ASSERT_FATAL(cw_part_block_copies(p, st.block, cs) == 0);
		CU_ASSERT(st.src_disk_id == 3 && st.copy == 1 && cs[1].disk_id == 3);
		CU_ASSERT(st.dst_disk_id == (cs[0].disk_id == 1 ? 2u : 1u));
	}
	CU_ASSERT_FATAL(cw_move_commit(m) == 0);
	check_apart(p, NULL);
	CU_ASSERT(disk_free(t.pool, 3) == 100);
	/* An evacuation of a disk that holds only copies 1: journalled and
	 * carried out, each to the disk that does not hold its copy 0. */
	{
		struct cw_part_opts os = { .placement = CW_PLACE_SINGLE, .disk_id = 1, .copies = 2 };
		struct cw_copy cs[CW_COPIES_MAX];
		uint64_t *ids = NULL;
		struct cw_part *q;
		size_t n = 0;

		CU_ASSERT_FATAL(cw_part_create(t.pool, "q", 6 * TP_BS, &os, &q) == 0);
		CU_ASSERT_FATAL(cw_part_block_copies(q, 0, cs) == 0);
		CU_ASSERT_FATAL(cs[0].disk_id == 1 && cs[1].disk_id != 1);
		CU_ASSERT_FATAL(cw_disk_evacuate(t.pool, cs[1].disk_id, &ids, &n) == 0 && n >= 1);
		free(ids);
		CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM move_block WHERE copy = 1") >= 6);
		CU_ASSERT(drive_copies(t.pool, 0) >= 6);
		for (uint64_t b = 0; b < 6; b++) {
			struct cw_copy now[CW_COPIES_MAX];

			CU_ASSERT_FATAL(cw_part_block_copies(q, b, now) == 0);
			CU_ASSERT(now[0].disk_id == 1 && now[1].disk_id != 1 &&
				  now[1].disk_id != cs[1].disk_id);
		}
		CU_ASSERT(disk_free(t.pool, cs[1].disk_id) == 100);
		check_apart(q, NULL);
		check_apart(p, NULL);
	}
	tp_check_totals(t.pool, 0);
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	check_apart(p, NULL);
	tp_fini(&t);
}

/* Copies out of sync rewritten in place from a copy in sync by a
 * journalled rebuild, resumed after a reopen: marked in sync in memory
 * and in the database, their bytes those of copy 0. */
static void test_rebuild(void)
{
	static const uint64_t three[] = { 101, 101, 101 };
	struct cw_part_opts o2 = { .placement = CW_PLACE_ROTATION, .copies = 2 };
	static uint8_t a[TP_BS], b[TP_BS];
	struct cw_move_info mi;
	struct cw_part *p, *one;
	uint64_t id = 0, other;
	struct tp t;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 12 * TP_BS, &o2, &p) == 0);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "one", 2 * TP_BS, NULL, &one) == 0);
	CU_ASSERT(cw_part_rebuild(one, &id) == -EINVAL);
	CU_ASSERT(cw_part_rebuild(p, &id) == 0 && id == 0);	/* all in sync */
	for (uint64_t k = 0; k < 12; k++)
		write_all(t.pool, p, k, (uint8_t)(k + 1));
	/* Copy 1 of blocks 2..9 out of sync and overwritten (a write that
	 * did not reach it), copy 0 of block 11 too. */
	CU_ASSERT_FATAL(cw_part_copy_set_stale(p, 1, 2, 8, true) == 0);
	CU_ASSERT_FATAL(cw_part_copy_set_stale(p, 0, 11, 1, true) == 0);
	memset(a, 0xee, sizeof(a));
	for (uint64_t k = 2; k < 10; k++) {
		struct cw_copy cs[CW_COPIES_MAX];

		CU_ASSERT_FATAL(cw_part_block_copies(p, k, cs) == 0);
		CU_ASSERT_FATAL(pwrite(cw_disk_fd(t.pool, cs[1].disk_id), a, TP_BS,
				       (off_t)cs[1].phys_offset) == TP_BS);
	}
	CU_ASSERT_FATAL(cw_part_rebuild(p, &id) == 0 && id > 0);
	CU_ASSERT(cw_part_rebuild(p, &other) == -EBUSY);
	CU_ASSERT_FATAL(cw_move_get(t.pool, id, &mi) == 0);
	CU_ASSERT(mi.kind == CW_MOVE_REBUILD && mi.blocks == 9);
	CU_ASSERT(strcmp(cw_move_kind_name(mi.kind), "rebuild") == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM move_block WHERE src_disk = dst_disk AND "
			  "src_pblock = dst_pblock") == 9);
	tp_check_totals(t.pool, 0);	/* in place: nothing reserved */
	CU_ASSERT(drive_copies(t.pool, 4) == 4);
	CU_ASSERT(cw_part_copy_stale_count(p, 1) + cw_part_copy_stale_count(p, 0) == 5);
	tp_reopen(&t);	/* the rest after a crash-like reopen */
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT(cw_part_copy_stale_count(p, 1) + cw_part_copy_stale_count(p, 0) == 5);
	tp_check_totals(t.pool, 0);
	CU_ASSERT(drive_copies(t.pool, 0) == 5);
	CU_ASSERT(cw_part_copy_stale_count(p, 0) == 0 && cw_part_copy_stale_count(p, 1) == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_stale") == 0);
	CU_ASSERT_FATAL(cw_move_get(t.pool, id, &mi) == 0);
	CU_ASSERT(mi.state == CW_MOVE_DONE && mi.done == 9 && mi.failed == 0);
	check_apart(p, NULL);
	for (uint64_t k = 0; k < 12; k++) {
		memset(b, (int)(k + 1), sizeof(b));
		read_copy(t.pool, p, k, 0, a);
		CU_ASSERT(memcmp(a, b, TP_BS) == 0);
		read_copy(t.pool, p, k, 1, a);
		CU_ASSERT(memcmp(a, b, TP_BS) == 0);
	}
	tp_check_totals(t.pool, 0);
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	check_apart(p, NULL);
	tp_fini(&t);
}

/* A client's write of byte v over block b, as the daemon's split makes
 * it: every copy in sync, each with the mirrors of its place (a block
 * being rebuilt or moved), inside the I/O gate. */
static void client_write(struct cw_pool *pool, struct cw_part *p, uint64_t b, uint8_t v)
{
	static uint8_t buf[TP_BS];
	struct cw_copy cs[CW_COPIES_MAX];
	unsigned g = cw_part_io_begin(p);

	memset(buf, v, sizeof(buf));
	CU_ASSERT_FATAL(cw_part_map_copies(p, b * TP_BS, cs) == 0);
	for (uint32_t c = 0; c < cw_part_copies(p); c++) {
		struct cw_extent e = { cs[c].disk_id, cs[c].phys_offset, TP_BS }, m[4];
		uint64_t skip[4];
		int nm;

		if (!cs[c].in_sync)
			continue;	/* not written: a rebuild rewrites it */
		CU_ASSERT_FATAL(pwrite(cw_disk_fd(pool, e.disk_id), buf, TP_BS,
				       (off_t)e.phys_offset) == TP_BS);
		nm = cw_part_write_mirrors(p, b * TP_BS, &e, skip, m, 4);
		for (int i = 0; i < nm; i++)
			CU_ASSERT_FATAL(pwrite(cw_disk_fd(pool, m[i].disk_id), buf + skip[i],
					       m[i].length, (off_t)m[i].phys_offset) ==
					(ssize_t)m[i].length);
	}
	cw_part_io_end(p, g);
}

/* The race a rebuild must win: a write acknowledged while the copy is
 * being rewritten from data read before it.  The write reaches the copy
 * being rebuilt too (mirrored to it), the rewrite that read the old data
 * is done again, and only then is the copy in sync — holding the write. */
static void test_rebuild_overlap(void)
{
	static const uint64_t two[] = { 101, 101 };
	struct cw_part_opts o2 = { .copies = 2 };
	static uint8_t old[TP_BS], a[TP_BS], b[TP_BS];
	struct cw_mover_task task;
	struct cw_part *p;
	uint64_t id;
	struct tp t;

	tp_pool(&t, TP_BS, 2, two, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 4 * TP_BS, &o2, &p) == 0);
	write_all(t.pool, p, 2, 1);
	CU_ASSERT_FATAL(cw_part_copy_set_stale(p, 1, 2, 1, true) == 0);
	CU_ASSERT_FATAL(cw_part_rebuild(p, &id) == 0 && id > 0);
	do {
		CU_ASSERT_FATAL(cw_mover_next(t.pool, &task) == 0);
	} while (task.action == CW_MOVER_WAIT);
	CU_ASSERT_FATAL(task.action == CW_MOVER_COPY && task.block == 2 && task.rebuild);
	/* The mover reads copy 0 (old data), then the client writes 7. */
	CU_ASSERT_FATAL(pread(cw_disk_fd(t.pool, task.src_disk_id), old, TP_BS,
			      (off_t)task.src_offset) == TP_BS);
	client_write(t.pool, p, 2, 7);
	memset(b, 7, sizeof(b));
	read_copy(t.pool, p, 2, 1, a);
	CU_ASSERT(memcmp(a, b, TP_BS) == 0);	/* mirrored to the copy being rebuilt */
	/* The old data lands after it, and the mover is told it is done. */
	CU_ASSERT_FATAL(pwrite(cw_disk_fd(t.pool, task.dst_disk_id), old, TP_BS,
			       (off_t)task.dst_offset) == TP_BS);
	CU_ASSERT_FATAL(cw_mover_copied(t.pool, 0, 0) == 0);
	CU_ASSERT(cw_part_copy_stale_count(p, 1) == 1);	/* not trusted: done again */
	do {
		CU_ASSERT_FATAL(cw_mover_next(t.pool, &task) == 0);
	} while (task.action == CW_MOVER_WAIT);
	CU_ASSERT_FATAL(task.action == CW_MOVER_COPY && task.block == 2 && task.again);
	CU_ASSERT_FATAL(pread(cw_disk_fd(t.pool, task.src_disk_id), old, TP_BS,
			      (off_t)task.src_offset) == TP_BS);
	CU_ASSERT_FATAL(pwrite(cw_disk_fd(t.pool, task.dst_disk_id), old, TP_BS,
			       (off_t)task.dst_offset) == TP_BS);
	CU_ASSERT_FATAL(cw_mover_copied(t.pool, 0, 0) == 0);
	CU_ASSERT(drive_copies(t.pool, 0) == 0);
	CU_ASSERT(cw_part_copy_stale_count(p, 1) == 0);
	read_copy(t.pool, p, 2, 1, a);
	CU_ASSERT(memcmp(a, b, TP_BS) == 0);	/* the write, not the older data */
	read_copy(t.pool, p, 2, 0, a);
	CU_ASSERT(memcmp(a, b, TP_BS) == 0);
	/* In sync now: a write reaches the copy directly. */
	client_write(t.pool, p, 2, 9);
	memset(b, 9, sizeof(b));
	read_copy(t.pool, p, 2, 1, a);
	CU_ASSERT(memcmp(a, b, TP_BS) == 0);
	tp_fini(&t);
}

/* A rebuild whose source copy does not read marks it out of sync and
 * reads the next copy in sync; with none left the block is lost. */
static void test_rebuild_read_error(void)
{
	static const uint64_t three[] = { 101, 101, 101 };
	struct cw_part_opts o3 = { .placement = CW_PLACE_ROTATION, .copies = 3 };
	struct cw_copy cs[CW_COPIES_MAX];
	struct cw_mover_task task;
	struct cw_move_info mi;
	struct cw_part *p;
	uint64_t id;
	struct tp t;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 2 * TP_BS, &o3, &p) == 0);
	CU_ASSERT_FATAL(cw_part_block_copies(p, 0, cs) == 0);
	CU_ASSERT_FATAL(cw_part_copy_set_stale(p, 2, 0, 1, true) == 0);
	CU_ASSERT_FATAL(cw_part_rebuild(p, &id) == 0 && id > 0);
	CU_ASSERT_FATAL(cw_mover_next(t.pool, &task) == 0 && task.action == CW_MOVER_COPY);
	CU_ASSERT(task.rebuild && task.copy == 2 && task.src_disk_id == cs[0].disk_id &&
		  task.dst_disk_id == cs[2].disk_id && task.dst_offset == cs[2].phys_offset);
	CU_ASSERT_FATAL(cw_mover_copied(t.pool, -EIO, 0) == 0);
	CU_ASSERT(cw_part_copy_stale_count(p, 0) == 1);	/* copy 0 did not read */
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_stale WHERE copy = 0") == 1);
	do {
		CU_ASSERT_FATAL(cw_mover_next(t.pool, &task) == 0);
	} while (task.action == CW_MOVER_WAIT);
	CU_ASSERT_FATAL(task.action == CW_MOVER_COPY);
	CU_ASSERT(task.src_disk_id == cs[1].disk_id && task.copy == 2);
	CU_ASSERT_FATAL(cw_mover_copied(t.pool, 0, 0) == 0);
	CU_ASSERT(drive_copies(t.pool, 0) == 0);
	CU_ASSERT(cw_part_copy_stale_count(p, 2) == 0 && cw_part_copy_stale_count(p, 0) == 1);
	/* Copy 0's turn; its only source fails too: lost, counted failed. */
	CU_ASSERT_FATAL(cw_part_copy_set_stale(p, 2, 0, 1, true) == 0);
	CU_ASSERT_FATAL(cw_part_rebuild(p, &id) == 0 && id > 0);
	CU_ASSERT_FATAL(cw_mover_next(t.pool, &task) == 0 && task.action == CW_MOVER_COPY);
	CU_ASSERT(task.src_disk_id == cs[1].disk_id);
	CU_ASSERT_FATAL(cw_mover_copied(t.pool, -EIO, 0) == 0);
	CU_ASSERT(cw_part_lost_blocks(p) == 1);
	CU_ASSERT(drive_copies(t.pool, 0) == 0);
	CU_ASSERT_FATAL(cw_move_get(t.pool, id, &mi) == 0);
	CU_ASSERT(mi.state == CW_MOVE_DONE && mi.failed == 2 && mi.done == 0);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

/* A scrub finds the block whose copies differ and a repair rewrites it
 * from copy 0; a copy out of sync is not compared. */
static void test_scrub(void)
{
	static const uint64_t three[] = { 101, 101, 101 };
	struct cw_part_opts o3 = { .placement = CW_PLACE_ROTATION, .copies = 3 };
	static uint8_t a[TP_BS], b[TP_BS];
	struct cw_copy cs[CW_COPIES_MAX];
	struct cw_move_info mi;
	struct cw_part *p, *one;
	uint64_t id, other, *bad = NULL;
	size_t nbad = 0;
	struct tp t;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 6 * TP_BS, &o3, &p) == 0);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "one", TP_BS, NULL, &one) == 0);
	CU_ASSERT(cw_part_scrub(one, false, &id) == -EINVAL);
	for (uint64_t k = 0; k < 6; k++)
		write_all(t.pool, p, k, (uint8_t)(k + 40));
	/* One byte of copy 2 of block 3 changed behind the pool's back;
	 * copy 1 of block 5 out of sync, and different. */
	CU_ASSERT_FATAL(cw_part_block_copies(p, 3, cs) == 0);
	CU_ASSERT_FATAL(pwrite(cw_disk_fd(t.pool, cs[2].disk_id), "X", 1,
			       (off_t)cs[2].phys_offset + 100) == 1);
	CU_ASSERT_FATAL(cw_part_copy_set_stale(p, 1, 5, 1, true) == 0);
	CU_ASSERT_FATAL(cw_part_block_copies(p, 5, cs) == 0);
	CU_ASSERT_FATAL(pwrite(cw_disk_fd(t.pool, cs[1].disk_id), "Y", 1,
			       (off_t)cs[1].phys_offset) == 1);
	CU_ASSERT_FATAL(cw_part_scrub(p, false, &id) == 0 && id > 0);
	CU_ASSERT(cw_part_scrub(p, false, &other) == -EBUSY);
	CU_ASSERT(drive_copies(t.pool, 0) == 11);	/* 2 copies of 6 blocks but one */
	CU_ASSERT_FATAL(cw_move_get(t.pool, id, &mi) == 0);
	CU_ASSERT(mi.kind == CW_MOVE_SCRUB && mi.state == CW_MOVE_DONE && mi.blocks == 11 &&
		  mi.done == 10 && mi.failed == 1);
	CU_ASSERT_FATAL(cw_move_failed_blocks(t.pool, id, &bad, &nbad) == 0);
	CU_ASSERT(nbad == 1 && bad[0] == 3);
	free(bad);
	read_copy(t.pool, p, 3, 2, a);
	CU_ASSERT(a[100] == 'X');	/* found, not touched */
	CU_ASSERT(cw_part_copy_stale_count(p, 1) == 1 && cw_part_copy_stale_count(p, 2) == 0);
	/* --repair: rewritten from copy 0, and a scrub after finds nothing. */
	CU_ASSERT_FATAL(cw_part_scrub(p, true, &id) == 0 && id > 0);
	CU_ASSERT(drive_copies(t.pool, 0) == 11);
	CU_ASSERT_FATAL(cw_move_get(t.pool, id, &mi) == 0);
	CU_ASSERT(mi.kind == CW_MOVE_REPAIR && mi.failed == 1);
	memset(b, 43, sizeof(b));
	read_copy(t.pool, p, 3, 2, a);
	CU_ASSERT(memcmp(a, b, TP_BS) == 0);
	CU_ASSERT_FATAL(cw_part_scrub(p, false, &id) == 0 && id > 0);
	CU_ASSERT(drive_copies(t.pool, 0) == 11);
	CU_ASSERT_FATAL(cw_move_get(t.pool, id, &mi) == 0);
	CU_ASSERT(mi.failed == 0 && mi.done == 11);
	CU_ASSERT(cw_part_copy_stale_count(p, 1) == 1);	/* the rebuild's, not the scrub's */
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

/* A disk replaced: its copies in sync moved, those out of sync rebuilt
 * from the other copy, onto the new disk; refused while a block's only
 * copy in sync is there and missing. */
static void test_replace(void)
{
	static const uint64_t three[] = { 101, 101, 101 };
	struct cw_part_opts o2 = { .placement = CW_PLACE_ROTATION, .copies = 2 };
	static uint8_t a[TP_BS], b[TP_BS];
	struct cw_part *p;
	uint64_t *ids = NULL, on1 = 0;
	char path[160];
	uint32_t id;
	size_t n = 0;
	struct tp t;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 12 * TP_BS, &o2, &p) == 0);
	tp_path(&t, "d4.img", path, sizeof(path));
	tp_file(path, 101 * TP_BS);
	CU_ASSERT_FATAL(cw_disk_add(t.pool, path, CW_TIER_HDD, NULL, &id) == 0 && id == 4);
	for (uint64_t k = 0; k < 12; k++) {
		struct cw_copy cs[CW_COPIES_MAX];

		write_all(t.pool, p, k, (uint8_t)(k + 7));
		CU_ASSERT_FATAL(cw_part_block_copies(p, k, cs) == 0);
		on1 += cs[0].disk_id == 1 || cs[1].disk_id == 1;
		/* Copy on disk 1 out of sync for blocks whose copy 1 is there. */
		if (cs[1].disk_id == 1)
			CU_ASSERT_FATAL(cw_part_copy_set_stale(p, 1, k, 1, true) == 0);
	}
	CU_ASSERT(cw_disk_replace(t.pool, 1, 1, NULL, &ids, &n) == -EINVAL);
	CU_ASSERT(cw_disk_replace(t.pool, 1, 9, NULL, &ids, &n) == -ENOENT);
	/* A block with both copies out of sync is lost: refused, named. */
	CU_ASSERT_FATAL(cw_part_copy_set_stale(p, 0, 0, 12, true) == 0);
	CU_ASSERT(cw_disk_replace(t.pool, 1, 4, NULL, &ids, &n) == -ENODATA);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "partition 'p'") != NULL);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "lost") != NULL);
	CU_ASSERT_FATAL(cw_part_copy_set_stale(p, 0, 0, 12, false) == 0);
	tp_check_totals(t.pool, 0);
	CU_ASSERT_FATAL(cw_disk_replace(t.pool, 1, 4, NULL, &ids, &n) == 0 && n == 1);
	free(ids);
	CU_ASSERT(drive_copies(t.pool, 0) == on1);
	CU_ASSERT(disk_free(t.pool, 1) == 100);
	check_apart(p, NULL);
	for (uint64_t k = 0; k < 12; k++) {
		memset(b, (int)(k + 7), sizeof(b));
		for (unsigned c = 0; c < 2; c++) {
			read_copy(t.pool, p, k, c, a);
			CU_ASSERT(memcmp(a, b, TP_BS) == 0);
		}
	}
	CU_ASSERT(cw_disk_remove(t.pool, 1) == 0);
	tp_check_totals(t.pool, 0);
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	check_apart(p, NULL);
	tp_fini(&t);
}

/* A rebuild and a replacement paused, resumed and cancelled: a cancel
 * keeps what was done and gives back the rest's destinations (none for
 * a rebuild in place), the copies not done stay out of sync. */
static void test_rebuild_cancel(void)
{
	static const uint64_t three[] = { 101, 101, 101 };
	struct cw_part_opts o2 = { .placement = CW_PLACE_SINGLE, .disk_id = 1, .copies = 2 };
	struct cw_move_info mi;
	uint64_t id, *ids = NULL;
	struct cw_copy cs[CW_COPIES_MAX];
	struct cw_part *p;
	size_t n = 0;
	struct tp t;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 10 * TP_BS, &o2, &p) == 0);
	CU_ASSERT_FATAL(cw_part_block_copies(p, 0, cs) == 0);
	CU_ASSERT_FATAL(cw_part_copy_set_stale(p, 1, 0, 10, true) == 0);
	CU_ASSERT_FATAL(cw_part_rebuild(p, &id) == 0 && id > 0);
	CU_ASSERT_FATAL(cw_move_pause(t.pool, id, NULL) == 0);
	CU_ASSERT(drive_copies(t.pool, 0) == 0);
	CU_ASSERT_FATAL(cw_move_resume(t.pool, id) == 0);
	CU_ASSERT(drive_copies(t.pool, 3) == 3);
	CU_ASSERT_FATAL(cw_move_cancel(t.pool, id, NULL) == 0);
	CU_ASSERT(drive_copies(t.pool, 0) == 0);
	CU_ASSERT_FATAL(cw_move_get(t.pool, id, &mi) == 0);
	CU_ASSERT(mi.state == CW_MOVE_CANCELLED && mi.done >= 2 && mi.done <= 3);
	CU_ASSERT(cw_part_copy_stale_count(p, 1) == 10 - mi.done);
	tp_check_totals(t.pool, 0);
	/* The copies 1 replaced onto disk 3, cancelled half-way. */
	CU_ASSERT_FATAL(cw_disk_replace(t.pool, cs[1].disk_id, 3, NULL, &ids, &n) == 0 && n == 1);
	CU_ASSERT(drive_copies(t.pool, 4) == 4);
	CU_ASSERT_FATAL(cw_move_cancel(t.pool, ids[0], NULL) == 0);
	CU_ASSERT(drive_copies(t.pool, 0) == 0);
	CU_ASSERT_FATAL(cw_move_get(t.pool, ids[0], &mi) == 0);
	free(ids);
	CU_ASSERT(disk_free(t.pool, 3) == 100 - mi.done);
	check_apart_any(p);
	tp_check_totals(t.pool, 0);
	tp_reopen(&t);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

/* A spare is given no block until a replacement takes it, and is kept
 * across a reopen. */
static void test_spare(void)
{
	static const uint64_t three[] = { 101, 101, 101 };
	struct cw_part_opts o2 = { .placement = CW_PLACE_ROTATION, .copies = 2 };
	struct cw_disk_info di;
	uint64_t *ids = NULL;
	struct cw_part *p;
	size_t n = 0;
	uint32_t id = 0;
	struct tp t;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT(cw_pool_spares(t.pool, 1, &id, 1) == 0);
	CU_ASSERT_FATAL(cw_disk_set_spare(t.pool, 3, true) == 0);
	CU_ASSERT(cw_disk_set_spare(t.pool, 9, true) == -ENOENT);
	CU_ASSERT(cw_pool_spares(t.pool, 100, &id, 1) == 1 && id == 3);
	CU_ASSERT(cw_pool_spares(t.pool, 101, &id, 1) == 0);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 20 * TP_BS, &o2, &p) == 0);
	CU_ASSERT(disk_free(t.pool, 3) == 100);	/* placed on 1 and 2 only */
	check_apart(p, NULL);
	CU_ASSERT(cw_disk_set_spare(t.pool, 1, true) == -EBUSY);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "holds blocks") != NULL);
	/* An evacuation does not take it either: no room elsewhere. */
	CU_ASSERT(cw_disk_evacuate(t.pool, 2, &ids, &n) == -ENOSPC);
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT(cw_disk_info(t.pool, 3, &di) == 0 && di.spare);
	CU_ASSERT_FATAL(cw_disk_replace(t.pool, 2, 3, NULL, &ids, &n) == 0 && n == 1);
	free(ids);
	CU_ASSERT(cw_disk_info(t.pool, 3, &di) == 0 && !di.spare);
	CU_ASSERT(drive_copies(t.pool, 0) == 20);
	CU_ASSERT(disk_free(t.pool, 2) == 100 && disk_free(t.pool, 3) == 80);
	check_apart(p, NULL);
	tp_reopen(&t);
	CU_ASSERT(cw_disk_info(t.pool, 3, &di) == 0 && !di.spare);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

/* A journalled move (an evacuation of copy 0's disk where no block has
 * copy 1 there) interrupted by a close, replayed at the reopen: copies
 * stay apart and in sync, every block owned once. */
static void test_journal_replay(void)
{
	static const uint64_t four3[] = { 101, 101, 101, 101 };
	struct cw_part_opts o2 = { .placement = CW_PLACE_SINGLE, .disk_id = 1, .copies = 2 };
	struct cw_mover_task task;
	uint64_t *ids = NULL;
	struct cw_copy cs[CW_COPIES_MAX];
	size_t n = 0;
	struct cw_part *p;
	unsigned done = 0;
	struct tp t;

	tp_pool(&t, TP_BS, 4, four3, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 10 * TP_BS, &o2, &p) == 0);
	CU_ASSERT_FATAL(cw_part_block_copies(p, 0, cs) == 0);
	CU_ASSERT_FATAL(cs[0].disk_id == 1);
	CU_ASSERT_FATAL(cw_disk_evacuate(t.pool, 1, &ids, &n) == 0 && n == 1);
	free(ids);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM move_block WHERE copy = 0") == 10);
	for (int i = 0; i < 4; i++) {
		CU_ASSERT_FATAL(cw_mover_next(t.pool, &task) == 0);
		CU_ASSERT_FATAL(task.action == CW_MOVER_COPY);
		CU_ASSERT(task.dst_disk_id != cs[1].disk_id && task.dst_disk_id != 1);
		CU_ASSERT_FATAL(cw_mover_copied(t.pool, 0, 0) == 0);
		done++;
	}
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	check_apart(p, NULL);
	tp_check_totals(t.pool, 10 - done);
	for (;;) {
		CU_ASSERT_FATAL(cw_mover_next(t.pool, &task) == 0);
		if (task.action == CW_MOVER_IDLE)
			break;
		if (task.action != CW_MOVER_COPY)
			continue;
		CU_ASSERT(task.dst_disk_id != cs[1].disk_id);
		CU_ASSERT_FATAL(cw_mover_copied(t.pool, 0, 0) == 0);
	}
	check_apart(p, NULL);
	CU_ASSERT(disk_free(t.pool, 1) == 100);
	tp_check_totals(t.pool, 0);
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	check_apart(p, NULL);
	tp_fini(&t);
}

/* Out-of-sync bits stored in copy_stale come back at open, are shown,
 * and a shrink forgets those past the end. */
static void test_stale_state(void)
{
	static const uint64_t two[] = { 101, 101 };
	struct cw_part_opts o2 = { .copies = 2 };
	struct cw_copy cs[CW_COPIES_MAX];
	struct cw_part_info pi;
	struct cw_part *p;
	char sql[1400];
	struct tp t;

	tp_pool(&t, TP_BS, 2, two, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 20 * TP_BS, &o2, &p) == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM copy_stale") == 0);
	cw_pool_close(t.pool);
	t.pool = NULL;
	/* copy 1 of blocks 3 and 17 out of sync (bits 3 and 17: bytes 0 and 2) */
	snprintf(sql, sizeof(sql), "INSERT INTO copy_stale VALUES ((SELECT id FROM part), 1, 0, "
		 "X'080002%01018d')", 0);
	sql_run(t.db, sql);
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT_FATAL(cw_part_info(p, &pi) == 0);
	CU_ASSERT(pi.stale_copies == 2);
	CU_ASSERT_FATAL(cw_part_block_copies(p, 3, cs) == 0);
	CU_ASSERT(cs[0].in_sync && !cs[1].in_sync);
	CU_ASSERT_FATAL(cw_part_block_copies(p, 4, cs) == 0);
	CU_ASSERT(cs[0].in_sync && cs[1].in_sync);
	CU_ASSERT_FATAL(cw_part_resize(p, 10 * TP_BS) == 0);
	CU_ASSERT_FATAL(cw_part_info(p, &pi) == 0);
	CU_ASSERT(pi.stale_copies == 1);
	CU_ASSERT_FATAL(cw_part_resize(p, 20 * TP_BS) == 0);
	CU_ASSERT_FATAL(cw_part_block_copies(p, 17, cs) == 0);
	CU_ASSERT(cs[1].in_sync);	/* a new block is in sync */
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT_FATAL(cw_part_info(p, &pi) == 0);
	CU_ASSERT(pi.stale_copies == 1);
	CU_ASSERT_FATAL(cw_part_block_copies(p, 17, cs) == 0);
	CU_ASSERT(cs[1].in_sync);
	tp_fini(&t);
}

/* A pool of schema 11 (before copies) opens upgraded: its partitions
 * keep one copy, its disks their own domains, its journal its rows. */
static void test_upgrade(void)
{
	static const uint64_t two[] = { 101, 101 };
	struct cw_disk_info di;
	struct cw_part *p;
	struct tp t;

	tp_pool(&t, TP_BS, 2, two, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "old", 10 * TP_BS, NULL, &p) == 0);
	cw_pool_close(t.pool);
	t.pool = NULL;
	/* Back to what schema 11 had, with a journalled move row. */
	sql_run(t.db, "PRAGMA foreign_keys = OFF;"
		      " DROP TABLE copy_run; DROP TABLE copy_stale;"
		      " DROP TABLE part_copies; DROP TABLE disk_domain;"
		      " CREATE TABLE mb_old (move INTEGER NOT NULL REFERENCES move(id) ON DELETE"
		      " CASCADE, block INTEGER NOT NULL CHECK (block >= 0), src_disk INTEGER NOT"
		      " NULL, src_pblock INTEGER NOT NULL CHECK (src_pblock >= 1), dst_disk INTEGER"
		      " NOT NULL, dst_pblock INTEGER NOT NULL CHECK (dst_pblock >= 1), state INTEGER"
		      " NOT NULL DEFAULT 0 CHECK (state BETWEEN 0 AND 3), PRIMARY KEY (move, block))"
		      " WITHOUT ROWID; DROP TABLE move_block; ALTER TABLE mb_old RENAME TO move_block;"
		      " INSERT INTO move (kind, part, state, placement, tier_pref, zone_pref, blocks,"
		      " created_ns) VALUES (0, 1, 3, 0, 0, 0, 1, 1);"
		      " INSERT INTO move_block VALUES (1, 0, 1, 1, 2, 1, 2);"
		      " PRAGMA user_version = 11");
	tp_reopen(&t);
	CU_ASSERT(sql_int(t.db, "PRAGMA user_version") == META_SCHEMA_VERSION);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM part_copies") == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM move_block WHERE copy = 0 AND state = 2") ==
		  1);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "old", &p) == 0);
	CU_ASSERT(cw_part_copies(p) == 1 && cw_part_nblocks(p) == 10);
	CU_ASSERT_FATAL(cw_disk_info(t.pool, 1, &di) == 0);
	CU_ASSERT(di.domain[0] == '\0');
	CU_ASSERT_FATAL(cw_part_create(t.pool, "new", 10 * TP_BS,
				       &(struct cw_part_opts){ .copies = 2 }, &p) == 0);
	check_apart(p, NULL);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("copies", NULL, NULL);

	cwtest_add(s, "2 and 3 copies on distinct disks", test_two_and_three);
	cwtest_add(s, "refused: domains, room, cache", test_refusals);
	cwtest_add(s, "distinct failure domains", test_domains);
	cwtest_add(s, "an RBD image apart from a local disk", test_rbd_domain);
	cwtest_add(s, "grow and shrink keep copies apart", test_grow_shrink);
	cwtest_add(s, "extents contiguous on every copy", test_map_contiguous);
	cwtest_add(s, "moves keep copies apart", test_move);
	cwtest_add(s, "journal replay keeps copies", test_journal_replay);
	cwtest_add(s, "rebuild in place, resumed", test_rebuild);
	cwtest_add(s, "replace a disk", test_replace);
	cwtest_add(s, "a rebuild's source that does not read", test_rebuild_read_error);
	cwtest_add(s, "scrub and repair", test_scrub);
	cwtest_add(s, "a write during a rebuild wins", test_rebuild_overlap);
	cwtest_add(s, "a spare", test_spare);
	cwtest_add(s, "a rebuild and a replacement paused and cancelled", test_rebuild_cancel);
	cwtest_add(s, "in-sync state stored", test_stale_state);
	cwtest_add(s, "schema 11 upgraded", test_upgrade);
	return cwtest_run();
}
