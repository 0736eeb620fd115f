/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: cw_path_split on a real pool of two file disks (its map
 * and holes through cw_path_part_ops), and with the cache's route and a
 * move's mirrors answered by the test: holes, a map over two disks, a
 * request crossing blocks, the best-effort cut, real-time against best
 * effort by the reservation's range, span and disks, a cache hit and miss
 * and a write to both copies, a write to a block being moved, a punch
 * where a disk cannot punch, a mirrored partition's copies out of
 * sync (written and read no more; the first in sync takes the IO piece),
 * and its snake reads (best effort where the disk's load is least, a
 * stream's by the rule admission charges).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include <clockwise/path.h>

#include "cwtest.h"
#include "layout/pooltest.h"

#define BS TP_BS
#define SSD_ID 7	/* the cache's disk in the tests that route */

static struct tp t;
static struct cw_part *part;
static uint64_t be_piece = BS;
static bool punch_ok = true;

static int disk(void *arg, uint32_t id, struct cw_path_disk *ret)
{
	(void)arg;
	if (id != 1 && id != 2 && id != SSD_ID)
		return -ENODEV;
	*ret = (struct cw_path_disk){ .be_piece = be_piece, .can_punch = punch_ok || id == 2 };
	return 0;
}

static struct cw_path_part lay;

#define MAXP 64
static struct cw_path_piece got[MAXP];
static size_t n;

static int emit(void *arg, const struct cw_path_piece *p)
{
	(void)arg;
	CU_ASSERT_FATAL(n < MAXP);
	got[n++] = *p;
	return 0;
}

static int split_with(const struct cw_path_ops *ops, struct cw_path_req rq)
{
	rq.block_size = BS;
	rq.zero_chunk = BS / 2;
	n = 0;
	return cw_path_split(ops, &lay, &rq, emit, NULL);
}

static int split(struct cw_path_req rq)
{
	return split_with(&cw_path_part_ops, rq);
}

static struct cw_extent block_at(uint64_t off)
{
	struct cw_extent e;

	CU_ASSERT_FATAL(cw_part_map(part, off, 1, &e) == 0);
	return e;
}

static void written(uint64_t first, uint64_t nb, bool data)
{
	struct cw_alloc_change c = { .part = part, .first_block = first, .nblocks = nb,
				     .allocated = data };

	CU_ASSERT_FATAL(cw_part_set_allocated(t.pool, &c, 1) == 0);
}

/* The pool, made by the first test that runs. */
static void setup(void)
{
	uint64_t nb[] = { 64, 64 };

	if (part)
		return;
	tp_pool(&t, BS, 2, nb, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 8 * BS, NULL, &part) == 0);
	lay = (struct cw_path_part){ .part = part, .disk = disk };
}

static void reset(void)
{
	setup();
	be_piece = BS;
	punch_ok = true;
	written(0, 8, true);
}

/* A read of a hole is zeros without I/O; the data between is read. */
static void test_holes(void)
{
	reset();
	written(0, 1, false);
	written(3, 1, false);
	CU_ASSERT_FATAL(split((struct cw_path_req){ .offset = 0, .length = 4 * BS,
						    .op = CW_IO_READ }) == 0);
	CU_ASSERT_FATAL(n == 4);
	CU_ASSERT_EQUAL(got[0].kind, CW_PATH_HOLE);
	CU_ASSERT_EQUAL(got[0].length, BS);
	CU_ASSERT_EQUAL(got[1].kind, CW_PATH_IO);
	CU_ASSERT_EQUAL(got[1].buf_offset, BS);
	CU_ASSERT_EQUAL(got[2].kind, CW_PATH_IO);
	CU_ASSERT_EQUAL(got[3].kind, CW_PATH_HOLE);
	CU_ASSERT_EQUAL(got[3].buf_offset, 3 * BS);
	/* a write goes to its blocks, holes or not */
	CU_ASSERT_FATAL(split((struct cw_path_req){ .offset = 0, .length = BS,
						    .op = CW_IO_WRITE }) == 0);
	CU_ASSERT_FATAL(n == 1);
	CU_ASSERT_EQUAL(got[0].kind, CW_PATH_IO);
}

/* Rotation puts neighbouring blocks on the two disks: a piece each,
 * where the map says, the first on each disk marked. */
static void test_two_disks(void)
{
	reset();
	CU_ASSERT_FATAL(split((struct cw_path_req){ .offset = 0, .length = 4 * BS,
						    .op = CW_IO_WRITE }) == 0);
	CU_ASSERT_FATAL(n == 4);
	for (unsigned i = 0; i < 4; i++) {
		struct cw_extent e = block_at(i * BS);

		CU_ASSERT_EQUAL(got[i].kind, CW_PATH_IO);
		CU_ASSERT_EQUAL(got[i].op, CW_IO_WRITE);
		CU_ASSERT_EQUAL(got[i].disk_id, e.disk_id);
		CU_ASSERT_EQUAL(got[i].phys_offset, e.phys_offset);
		CU_ASSERT_EQUAL(got[i].length, BS);
		CU_ASSERT_EQUAL(got[i].buf_offset, i * BS);
		CU_ASSERT_EQUAL(got[i].first_on_disk, i < 2);
		CU_ASSERT_FALSE(got[i].rt);
	}
	CU_ASSERT_NOT_EQUAL(got[0].disk_id, got[1].disk_id);
}

/* A request from the middle of one block into the next ends its first
 * piece at the block's end. */
static void test_crossing(void)
{
	reset();
	CU_ASSERT_FATAL(split((struct cw_path_req){ .offset = BS / 2, .length = BS,
						    .op = CW_IO_READ }) == 0);
	CU_ASSERT_FATAL(n == 2);
	CU_ASSERT_EQUAL(got[0].phys_offset, block_at(0).phys_offset + BS / 2);
	CU_ASSERT_EQUAL(got[0].length, BS / 2);
	CU_ASSERT_EQUAL(got[1].phys_offset, block_at(BS).phys_offset);
	CU_ASSERT_EQUAL(got[1].length, BS / 2);
	CU_ASSERT_EQUAL(got[1].buf_offset, BS / 2);
}

/* Best effort is cut at the disk's piece. */
static void test_be_cut(void)
{
	reset();
	be_piece = BS / 4;
	CU_ASSERT_FATAL(split((struct cw_path_req){ .offset = 0, .length = BS,
						    .op = CW_IO_READ }) == 0);
	CU_ASSERT_FATAL(n == 4);
	for (unsigned i = 0; i < 4; i++) {
		CU_ASSERT_EQUAL(got[i].length, BS / 4);
		CU_ASSERT_EQUAL(got[i].phys_offset, block_at(0).phys_offset + i * BS / 4);
		CU_ASSERT_EQUAL(got[i].first_on_disk, i == 0);
	}
}

/* Inside the reservation's range and span its pieces on the disks it
 * books are the stream's, whole; elsewhere best effort, cut. */
static void test_class(void)
{
	struct cw_admit_resv_part parts[2] = { { .disk_id = block_at(0).disk_id }, { 0 } };
	struct cw_admit_resv rv = { .range_start_bytes = 0, .range_end_bytes = 2 * BS,
				    .span_start_ns = 100, .parts = parts };
	struct cw_path_req rq = { .offset = 0, .length = 2 * BS, .op = CW_IO_READ, .resv = &rv,
				  .arrival_ns = 100 };

	reset();
	be_piece = BS / 2;
	CU_ASSERT_FATAL(split(rq) == 0);
	CU_ASSERT_FATAL(n == 3);
	CU_ASSERT_TRUE(got[0].rt);
	CU_ASSERT_EQUAL(got[0].length, BS);
	CU_ASSERT_FALSE(got[1].rt);	/* the other disk is not booked */
	CU_ASSERT_EQUAL(got[1].length, BS / 2);
	/* past the range's end */
	rq.length = 3 * BS;
	CU_ASSERT_FATAL(split(rq) == 0);
	for (size_t i = 0; i < n; i++)
		CU_ASSERT_FALSE(got[i].rt);
	/* before the span */
	rq.length = BS;
	rq.arrival_ns = 99;
	CU_ASSERT_FATAL(split(rq) == 0);
	CU_ASSERT_FATAL(n == 2);
	CU_ASSERT_FALSE(got[0].rt);
	CU_ASSERT_FALSE(cw_path_in_resv(&rv, 0, BS, 99));
	CU_ASSERT_TRUE(cw_path_in_resv(&rv, BS, BS, 100));
}

/* The cache, answered by the test: block 0 is cached at slot 5 of
 * SSD_ID, the others are not. */
static enum cw_cache_route route(void *l, uint64_t off, uint64_t len, bool write,
				 struct cw_extent *ret_ssd)
{
	(void)l;
	if (off >= BS)
		return CW_CACHE_ORIGIN;
	*ret_ssd = (struct cw_extent){ .disk_id = SSD_ID, .phys_offset = 5 * BS + off,
				       .length = len };
	return write ? CW_CACHE_BOTH : CW_CACHE_SSD;
}

static void test_cache(void)
{
	struct cw_path_ops ops = cw_path_part_ops;

	ops.route = route;
	reset();
	CU_ASSERT_FATAL(split_with(&ops, (struct cw_path_req){ .offset = 0, .length = 2 * BS,
							       .op = CW_IO_READ,
							       .cached = true }) == 0);
	CU_ASSERT_FATAL(n == 2);
	CU_ASSERT_EQUAL(got[0].disk_id, SSD_ID);	/* a hit */
	CU_ASSERT_EQUAL(got[0].phys_offset, 5 * BS);
	CU_ASSERT_EQUAL(got[1].disk_id, block_at(BS).disk_id);	/* a miss */
	/* a write keeps the copy equal */
	CU_ASSERT_FATAL(split_with(&ops, (struct cw_path_req){ .offset = BS / 2, .length = BS / 4,
							       .op = CW_IO_WRITE,
							       .cached = true }) == 0);
	CU_ASSERT_FATAL(n == 2);
	CU_ASSERT_EQUAL(got[0].kind, CW_PATH_IO);
	CU_ASSERT_EQUAL(got[0].disk_id, block_at(0).disk_id);
	CU_ASSERT_EQUAL(got[1].kind, CW_PATH_COPY);
	CU_ASSERT_EQUAL(got[1].disk_id, SSD_ID);
	CU_ASSERT_EQUAL(got[1].phys_offset, 5 * BS + BS / 2);
	CU_ASSERT_EQUAL(got[1].length, BS / 4);
	CU_ASSERT_EQUAL(got[1].buf_offset, 0);
}

/* A move, answered by the test: block 1 is being copied to disk 2 at
 * block 40. */
static int mirrors(void *l, uint64_t off, const struct cw_extent *e, uint64_t *skips,
		   struct cw_extent *ret, unsigned max)
{
	uint64_t end = off + e->length;

	(void)l;
	(void)max;
	if (end <= BS || off >= 2 * BS)
		return 0;
	skips[0] = off < BS ? BS - off : 0;
	ret[0] = (struct cw_extent){ .disk_id = 2, .phys_offset = 40 * BS + (off > BS ? off - BS : 0),
				     .length = (end < 2 * BS ? end : 2 * BS) - (off > BS ? off : BS) };
	return 1;
}

static void test_move(void)
{
	struct cw_path_ops ops = cw_path_part_ops;

	ops.mirrors = mirrors;
	reset();
	CU_ASSERT_FATAL(split_with(&ops, (struct cw_path_req){ .offset = 0, .length = 3 * BS,
							       .op = CW_IO_WRITE }) == 0);
	CU_ASSERT_FATAL(n == 4);
	CU_ASSERT_EQUAL(got[1].kind, CW_PATH_IO);
	CU_ASSERT_EQUAL(got[1].buf_offset, BS);
	CU_ASSERT_EQUAL(got[2].kind, CW_PATH_COPY);	/* both copies */
	CU_ASSERT_EQUAL(got[2].disk_id, 2);
	CU_ASSERT_EQUAL(got[2].phys_offset, 40 * BS);
	CU_ASSERT_EQUAL(got[2].length, BS);
	CU_ASSERT_EQUAL(got[2].buf_offset, BS);
	CU_ASSERT_EQUAL(got[3].kind, CW_PATH_IO);
	/* a read goes to the block where it is */
	CU_ASSERT_FATAL(split_with(&ops, (struct cw_path_req){ .offset = BS, .length = BS,
							       .op = CW_IO_READ }) == 0);
	CU_ASSERT_FATAL(n == 1);
}

/* A disk that cannot punch is skipped, or written with zeros in chunks. */
static void test_punch(void)
{
	reset();
	punch_ok = false;	/* disk 1 cannot, disk 2 can */
	CU_ASSERT_FATAL(split((struct cw_path_req){ .offset = 0, .length = 2 * BS,
						    .op = CW_IO_PUNCH }) == 0);
	CU_ASSERT_FATAL(n == 1);
	CU_ASSERT_EQUAL(got[0].disk_id, 2);
	CU_ASSERT_EQUAL(got[0].op, CW_IO_PUNCH);
	CU_ASSERT_FATAL(split((struct cw_path_req){ .offset = 0, .length = 2 * BS,
						    .op = CW_IO_PUNCH, .zero = true }) == 0);
	CU_ASSERT_FATAL(n == 4);	/* every piece at most a zero chunk */
	for (size_t i = 0; i < n; i++) {
		CU_ASSERT_EQUAL(got[i].op, got[i].disk_id == 1 ? CW_IO_WRITE : CW_IO_PUNCH);
		CU_ASSERT_EQUAL(got[i].zero, got[i].disk_id == 1);
		CU_ASSERT_EQUAL(got[i].length, BS / 2);
	}
}

/* The bound holds for the worst of these. */
static void test_bound(void)
{
	struct cw_path_req rq = { .offset = 0, .length = 8 * BS, .op = CW_IO_WRITE,
				  .block_size = BS, .zero_chunk = BS / 2, .zero = true };

	reset();
	be_piece = BS / 4;
	CU_ASSERT_FATAL(split(rq) == 0);
	CU_ASSERT(n <= cw_path_split_max(&rq));
	CU_ASSERT_EQUAL(split((struct cw_path_req){ .offset = 7 * BS, .length = 2 * BS,
						    .op = CW_IO_READ }), -ERANGE);
}

/* A 2-copy partition: a write goes to each copy in sync, the first one
 * taking the IO piece, each piece saying its copy; a read to the first
 * in sync; none in sync: the block is gone (ENODEV, as a missing disk's). */
static void test_mirror_stale(void)
{
	struct cw_path_part saved = lay;
	struct cw_copy cs[CW_COPIES_MAX];
	struct cw_part *m;
	struct cw_alloc_change c;
	struct cw_path_req w = { .offset = 0, .length = BS, .op = CW_IO_WRITE, .copies = 2 };
	struct cw_path_req r = { .offset = 0, .length = BS, .op = CW_IO_READ, .copies = 2 };

	reset();
	CU_ASSERT_FATAL(cw_part_create(t.pool, "m", 2 * BS, &(struct cw_part_opts){ .copies = 2 },
				       &m) == 0);
	c = (struct cw_alloc_change){ .part = m, .first_block = 0, .nblocks = 2, .allocated = true };
	CU_ASSERT_FATAL(cw_part_set_allocated(t.pool, &c, 1) == 0);
	CU_ASSERT_FATAL(cw_part_block_copies(m, 0, cs) == 0);
	lay = (struct cw_path_part){ .part = m, .disk = disk };

	CU_ASSERT_FATAL(split(w) == 0);
	CU_ASSERT_FATAL(n == 2);
	CU_ASSERT(got[0].kind == CW_PATH_IO && got[0].disk_id == cs[0].disk_id && got[0].mirror == 1);
	CU_ASSERT(got[1].kind == CW_PATH_COPY && got[1].disk_id == cs[1].disk_id &&
		  got[1].mirror == 2 && got[1].phys_offset == cs[1].phys_offset);
	CU_ASSERT_FATAL(split(r) == 0);
	CU_ASSERT(n == 1 && got[0].disk_id == cs[0].disk_id && got[0].mirror == 1);

	/* copy 0 out of sync: copy 1 alone, for writes and reads */
	CU_ASSERT_FATAL(cw_part_copy_set_stale(m, 0, 0, 1, true) == 0);
	CU_ASSERT_FATAL(split(w) == 0);
	CU_ASSERT_FATAL(n == 1);
	CU_ASSERT(got[0].kind == CW_PATH_IO && got[0].disk_id == cs[1].disk_id &&
		  got[0].phys_offset == cs[1].phys_offset && got[0].mirror == 2);
	CU_ASSERT_FATAL(split(r) == 0);
	CU_ASSERT(n == 1 && got[0].disk_id == cs[1].disk_id && got[0].mirror == 2);
	/* block 1 is untouched */
	w.offset = r.offset = BS;
	CU_ASSERT_FATAL(split(w) == 0);
	CU_ASSERT(n == 2);
	w.offset = r.offset = 0;

	/* no copy in sync: the block is gone, as on a missing disk */
	CU_ASSERT_FATAL(cw_part_copy_set_stale(m, 1, 0, 1, true) == 0);
	CU_ASSERT(split(w) == -ENODEV);
	CU_ASSERT(split(r) == -ENODEV);
	/* a resync clears the marks: both copies again */
	CU_ASSERT_FATAL(cw_part_copy_set_stale(m, 0, 0, 1, false) == 0);
	CU_ASSERT_FATAL(cw_part_copy_set_stale(m, 1, 0, 1, false) == 0);
	CU_ASSERT_FATAL(split(w) == 0);
	CU_ASSERT(n == 2);
	lay = saved;
	CU_ASSERT_FATAL(cw_part_delete(m) == 0);
}

/* Each disk's load as the test sets it (by disk id). */
static struct cw_path_load loads[3];

static int load(void *arg, uint32_t id, uint64_t phys, struct cw_path_load *ret)
{
	(void)arg;
	(void)phys;
	CU_ASSERT_FATAL(id >= 1 && id <= 2);
	*ret = loads[id];
	return 0;
}

/* The rule a stream's reads and admission share, and RADIR's choice for
 * best effort, alone. */
static void test_snake_rules(void)
{
	uint32_t ids[3] = { 5, 2, 9 };
	struct cw_copy cs[2] = { { .disk_id = 1, .in_sync = true }, { .disk_id = 2, .in_sync = true } };
	struct cw_path_load l[2] = { { 0, 3 }, { 0, 1 } };
	bool normal;

	/* a stream's reads alternate between the copies it is booked on;
	 * one in sync where it is not booked (a spare being rebuilt) is
	 * left alone while a booked one is in sync, and is then no normal
	 * case; with none booked in sync, any in sync */
	{
		uint32_t both[2] = { 1, 2 }, one[1] = { 1 }, none[1] = { 7 };

		CU_ASSERT_EQUAL(cw_path_stream_copy(cs, 2, 0, both, 2, &normal), 0);
		CU_ASSERT_TRUE(normal);
		CU_ASSERT_EQUAL(cw_path_stream_copy(cs, 2, 1, both, 2, &normal), 1);
		CU_ASSERT_EQUAL(cw_path_stream_copy(cs, 2, 1, one, 1, &normal), 0);
		CU_ASSERT_FALSE(normal);
		CU_ASSERT_EQUAL(cw_path_stream_copy(cs, 2, 0, one, 1, &normal), 0);
		CU_ASSERT_EQUAL(cw_path_stream_copy(cs, 2, 1, none, 1, &normal), 1);
		CU_ASSERT_FALSE(normal);
	}
	/* request r: the (r mod n)-th lowest disk id */
	CU_ASSERT_EQUAL(cw_admit_snake_pick(0, ids, 3), 1);
	CU_ASSERT_EQUAL(cw_admit_snake_pick(1, ids, 3), 0);
	CU_ASSERT_EQUAL(cw_admit_snake_pick(2, ids, 3), 2);
	CU_ASSERT_EQUAL(cw_admit_snake_pick(3, ids, 3), 1);
	CU_ASSERT_EQUAL(cw_admit_snake_pick(7, ids, 0), -1);
	/* the lower load; the earlier vacancy before it; a tie: copy 0 */
	CU_ASSERT_EQUAL(cw_path_snake_copy(cs, 2, l), 1);
	l[1].vacancy_ns = 1000;
	CU_ASSERT_EQUAL(cw_path_snake_copy(cs, 2, l), 0);
	l[0] = l[1];
	CU_ASSERT_EQUAL(cw_path_snake_copy(cs, 2, l), 0);
	cs[0].in_sync = false;
	CU_ASSERT_EQUAL(cw_path_snake_copy(cs, 2, l), 1);
	CU_ASSERT_EQUAL(cw_path_stream_copy(cs, 2, 0, NULL, 0, &normal), 1);
	CU_ASSERT_FALSE(normal);
	cs[1].in_sync = false;
	CU_ASSERT_EQUAL(cw_path_snake_copy(cs, 2, l), -ENODATA);
	CU_ASSERT_EQUAL(cw_path_stream_copy(cs, 2, 0, NULL, 0, &normal), -ENODATA);
}

/* A 2-copy partition's reads: best effort on the copy whose disk has the
 * least queued (the load asked through cw_path_part), a stream's
 * alternating between the copies' disks by request, as admission charged
 * it; with a copy out of sync the stream's read moves to the other, its
 * own only if it was admitted to survive; a stream's writes are best
 * effort on every copy, a recording stream's its own on every copy. */
static void test_mirror_snake(void)
{
	struct cw_path_part saved = lay;
	struct cw_admit_resv_part parts[3] = { { .disk_id = 1 }, { .disk_id = 2 }, { 0 } };
	struct cw_admit_resv rv = { .range_start_bytes = 0, .range_end_bytes = 4 * BS,
				    .block_bytes = BS, .n_parts = 2, .parts = parts };
	struct cw_path_req r = { .offset = 0, .length = BS, .op = CW_IO_READ, .copies = 2 };
	struct cw_copy cs[CW_COPIES_MAX];
	struct cw_alloc_change c;
	struct cw_part *m;

	reset();
	CU_ASSERT_FATAL(cw_part_create(t.pool, "s", 4 * BS, &(struct cw_part_opts){ .copies = 2 },
				       &m) == 0);
	c = (struct cw_alloc_change){ .part = m, .first_block = 0, .nblocks = 4, .allocated = true };
	CU_ASSERT_FATAL(cw_part_set_allocated(t.pool, &c, 1) == 0);
	lay = (struct cw_path_part){ .part = m, .disk = disk, .load = load };
	CU_ASSERT_FATAL(cw_part_block_copies(m, 0, cs) == 0);

	/* best effort: equal loads, copy 0; then the less loaded disk */
	memset(loads, 0, sizeof(loads));
	CU_ASSERT_FATAL(split(r) == 0);
	CU_ASSERT(n == 1 && got[0].disk_id == cs[0].disk_id && got[0].mirror == 1 && !got[0].rt);
	loads[cs[0].disk_id].load = 4;
	CU_ASSERT_FATAL(split(r) == 0);
	CU_ASSERT(n == 1 && got[0].disk_id == cs[1].disk_id && got[0].mirror == 2 &&
		  got[0].phys_offset == cs[1].phys_offset);
	/* ... unless its record's first vacancy is later */
	loads[cs[1].disk_id].vacancy_ns = 1000000;
	CU_ASSERT_FATAL(split(r) == 0);
	CU_ASSERT(n == 1 && got[0].disk_id == cs[0].disk_id);

	/* a stream: request k on the copy of the (k mod 2)-th lowest disk,
	 * whatever the loads say */
	r.resv = &rv;
	for (uint64_t k = 0; k < 4; k++) {
		r.offset = k * BS;
		CU_ASSERT_FATAL(split(r) == 0);
		CU_ASSERT(n == 1 && got[0].rt && got[0].disk_id == (k % 2 ? 2u : 1u));
	}
	/* block 2's copy on disk 1 out of sync: disk 2 serves, as best
	 * effort; the stream's own if it was admitted to survive */
	CU_ASSERT_FATAL(cw_part_block_copies(m, 2, cs) == 0);
	CU_ASSERT_FATAL(cw_part_copy_set_stale(m, cs[0].disk_id == 1 ? 0 : 1, 2, 1, true) == 0);
	r.offset = 2 * BS;
	CU_ASSERT_FATAL(split(r) == 0);
	CU_ASSERT(n == 1 && got[0].disk_id == 2 && !got[0].rt);
	rv.survive = true;
	CU_ASSERT_FATAL(split(r) == 0);
	CU_ASSERT(n == 1 && got[0].disk_id == 2 && got[0].rt);
	/* a stream's write: every copy in sync, none of it the stream's */
	r.op = CW_IO_WRITE;
	r.offset = 0;
	CU_ASSERT_FATAL(split(r) == 0);
	CU_ASSERT_FATAL(n == 2);
	CU_ASSERT(!got[0].rt && !got[1].rt && got[0].disk_id != got[1].disk_id);
	/* a recording stream's: the stream's on every copy */
	rv.record = true;
	CU_ASSERT_FATAL(split(r) == 0);
	CU_ASSERT_FATAL(n == 2);
	CU_ASSERT(got[0].rt && got[1].rt && got[0].disk_id != got[1].disk_id);
	lay = saved;
	CU_ASSERT_FATAL(cw_part_delete(m) == 0);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("path-split", NULL, NULL);
	int r;

	cwtest_add(s, "holes", test_holes);
	cwtest_add(s, "map over two disks", test_two_disks);
	cwtest_add(s, "crossing blocks", test_crossing);
	cwtest_add(s, "best-effort cut", test_be_cut);
	cwtest_add(s, "class by reservation", test_class);
	cwtest_add(s, "cache route", test_cache);
	cwtest_add(s, "block under move", test_move);
	cwtest_add(s, "punch", test_punch);
	cwtest_add(s, "bound", test_bound);
	cwtest_add(s, "mirrored copies out of sync", test_mirror_stale);
	cwtest_add(s, "snake rules", test_snake_rules);
	cwtest_add(s, "mirrored reads: snake", test_mirror_snake);
	r = cwtest_run();
	if (part)
		tp_fini(&t);
	return r;
}
