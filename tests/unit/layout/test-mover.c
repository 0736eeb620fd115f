/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: journalled moves and the mover, on a real pool (sqlite file,
 * disk files).  Blocks carry patterns that are checked after every move:
 * a partition re-laid onto the SSD tier, a disk evacuated (refused first
 * when the other disks lack the room, with the numbers) and then removed,
 * a copy overlapped by a write done again, writes mirrored while a block
 * is in its slot, pause, resume, cancel, unreadable sources, failed
 * destinations, a shrink under a move, a move interrupted by a close
 * resumed at reopen, and kill -9 at random instants of an evacuation
 * under a verified write load: every acknowledged write readable, no
 * block owned twice (the reopen checks it), the move finished afterwards.
 */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>

#include <clockwise/model.h>
#include <clockwise/mover.h>

#include "pooltest.h"

static const enum cw_tier hsh[] = { CW_TIER_HDD, CW_TIER_SSD, CW_TIER_HDD };
static struct cw_pool *gpool;	/* the pool io_write and io_gen use */

#define REOPEN(t) do { tp_reopen(t); gpool = (t)->pool; } while (0)

/* Block b's contents at generation g: words of (b, g, index). */
static void pattern(uint8_t *buf, uint64_t b, uint32_t g)
{
	uint64_t *w = (uint64_t *)buf;

	for (size_t i = 0; i < TP_BS / 8; i++)
		w[i] = (b << 40) ^ ((uint64_t)g << 20) ^ i;
}

static void io_write(struct cw_part *p, uint64_t b, uint32_t g, bool sync)
{
	static uint8_t buf[TP_BS];
	struct cw_extent e, m[CW_MOVER_DEPTH_MAX];
	uint64_t skip[CW_MOVER_DEPTH_MAX];
	unsigned t;
	int fd, nm;

	pattern(buf, b, g);
	t = cw_part_io_begin(p);
	CU_ASSERT_FATAL(cw_part_map(p, b * TP_BS, TP_BS, &e) == 0);
	fd = cw_disk_fd(gpool, e.disk_id);
	CU_ASSERT_FATAL(pwrite(fd, buf, e.length, (off_t)e.phys_offset) == (ssize_t)e.length);
	if (sync)
		CU_ASSERT_FATAL(fdatasync(fd) == 0);
	nm = cw_part_write_mirrors(p, b * TP_BS, &e, skip, m, CW_MOVER_DEPTH_MAX);
	for (int i = 0; i < nm; i++) {
		int mfd = cw_disk_fd(gpool, m[i].disk_id);

		CU_ASSERT_FATAL(pwrite(mfd, buf + skip[i], m[i].length, (off_t)m[i].phys_offset) ==
				(ssize_t)m[i].length);
		if (sync)
			CU_ASSERT_FATAL(fdatasync(mfd) == 0);
	}
	cw_part_io_end(p, t);
}

/* The generation block b holds, or -1 if it holds no pattern of b. */
static int64_t io_gen(struct cw_part *p, uint64_t b)
{
	static uint8_t buf[TP_BS], want[TP_BS];
	struct cw_extent e;
	uint32_t g;
	unsigned t = cw_part_io_begin(p);
	int fd;

	CU_ASSERT_FATAL(cw_part_map(p, b * TP_BS, TP_BS, &e) == 0);
	fd = cw_disk_fd(gpool, e.disk_id);
	CU_ASSERT_FATAL(pread(fd, buf, TP_BS, (off_t)e.phys_offset) == TP_BS);
	cw_part_io_end(p, t);
	g = (uint32_t)((((uint64_t *)buf)[0] ^ (b << 40)) >> 20);
	pattern(want, b, g);
	return memcmp(buf, want, TP_BS) == 0 ? (int64_t)g : -1;
}

static void fill(struct cw_pool *pool, struct cw_part *p, uint64_t n, uint32_t g)
{
	struct cw_alloc_change c = { p, 0, n, true };

	gpool = pool;
	for (uint64_t b = 0; b < n; b++)
		io_write(p, b, g, false);
	CU_ASSERT_FATAL(cw_part_set_allocated(pool, &c, 1) == 0);
}

static void check_gen(struct cw_part *p, uint64_t n, uint32_t g)
{
	for (uint64_t b = 0; b < n; b++)
		CU_ASSERT(io_gen(p, b) == g);
}

/* Does the task's copy as the daemon would: read, write, sync. */
static void copy(struct cw_pool *pool, const struct cw_mover_task *t)
{
	static uint8_t buf[TP_BS];
	int s = cw_disk_fd(pool, t->src_disk_id), d = cw_disk_fd(pool, t->dst_disk_id);

	CU_ASSERT_FATAL(t->length == TP_BS);
	CU_ASSERT_FATAL(pread(s, buf, TP_BS, (off_t)t->src_offset) == TP_BS);
	CU_ASSERT_FATAL(pwrite(d, buf, TP_BS, (off_t)t->dst_offset) == TP_BS);
	CU_ASSERT_FATAL(fdatasync(d) == 0);
}

/* Batches of this many blocks where the tests drive the mover in
 * batches (1: cw_mover_next). */
static unsigned tdepth = 1;

/* Asks the mover for the next thing to do, in batches of tdepth. */
static unsigned next_tasks(struct cw_pool *pool, struct cw_mover_task *t)
{
	unsigned n = 0;

	if (tdepth == 1) {
		CU_ASSERT_FATAL(cw_mover_next(pool, t) == 0);
		return t->action == CW_MOVER_COPY;
	}
	CU_ASSERT_FATAL(cw_mover_next_batch(pool, t, tdepth, &n) == 0);
	CU_ASSERT_FATAL((t->action == CW_MOVER_COPY) == (n > 0));
	return n;
}

/* Every block of a batch copied cleanly. */
static void copied_all(struct cw_pool *pool, unsigned n)
{
	static const struct cw_mover_outcome ok[CW_MOVER_DEPTH_MAX];

	if (tdepth == 1) {
		CU_ASSERT_FATAL(cw_mover_copied(pool, 0, 0) == 0);
	} else {
		CU_ASSERT_FATAL(cw_mover_copied_batch(pool, ok, n) == 0);
	}
}

/* Runs the mover until idle, at most max copies; returns the copies. */
static unsigned drive(struct cw_pool *pool, unsigned max)
{
	struct cw_mover_task t[CW_MOVER_DEPTH_MAX];
	unsigned n = 0;

	while (n < max) {
		unsigned k = next_tasks(pool, t);

		if (t[0].action == CW_MOVER_IDLE)
			break;
		CU_ASSERT_FATAL(t[0].action == CW_MOVER_COPY);	/* nothing else in flight */
		for (unsigned i = 0; i < k; i++)
			copy(pool, &t[i]);
		copied_all(pool, k);
		n += k;
	}
	return n;
}

static void info(struct cw_pool *pool, uint64_t id, struct cw_move_info *ret)
{
	CU_ASSERT_FATAL(cw_move_get(pool, id, ret) == 0);
}

static void test_to_ssd(void)
{
	static const uint64_t sizes[] = { 101, 61, 101 };
	struct cw_part_opts po = { .placement = CW_PLACE_ROTATION, .tier = CW_TIER_PREF_HDD };
	struct cw_move_opts mo = { .placement = CW_PLACE_ROTATION, .tier = CW_TIER_PREF_SSD };
	struct cw_move_info mi;
	struct cw_part_info pi;
	struct cw_part *p;
	uint32_t disks[40];
	uint64_t id, id2;
	struct tp t;

	tp_pool(&t, TP_BS, 3, sizes, hsh);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 40 * TP_BS, &po, &p) == 0);
	fill(t.pool, p, 40, 1);
	/* More than the SSDs hold: refused with the numbers, nothing kept. */
	CU_ASSERT(cw_part_resize(p, 70 * TP_BS) == 0);
	CU_ASSERT(cw_move_start(p, 0, 70, &mo, CW_MOVE_PART, &id) == -ENOSPC);
	CU_ASSERT(cw_pool_last_error(t.pool)->needed_bytes == 70 * TP_BS);
	CU_ASSERT(cw_pool_last_error(t.pool)->available_bytes == 60 * TP_BS);
	CU_ASSERT(cw_part_resize(p, 40 * TP_BS) == 0);
	tp_check_totals(t.pool, 0);

	CU_ASSERT_FATAL(cw_move_start(p, 0, 40, &mo, CW_MOVE_PART, &id) == 0);
	CU_ASSERT(cw_move_start(p, 0, 40, &mo, CW_MOVE_PART, &id2) == -EBUSY);
	CU_ASSERT(cw_part_delete(p) == -EBUSY);
	info(t.pool, id, &mi);
	CU_ASSERT(mi.state == CW_MOVE_RUNNING && mi.blocks == 40 && mi.done == 0);
	CU_ASSERT(mi.kind == CW_MOVE_PART && strcmp(mi.part, "p") == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM move_block WHERE state = 0") == 40);
	tp_check_totals(t.pool, 40);
	/* The growth policy follows the move at once. */
	CU_ASSERT(cw_part_info(p, &pi) == 0 && pi.opts.tier == CW_TIER_PREF_SSD);

	CU_ASSERT(drive(t.pool, 1000) == 40);
	CU_ASSERT_FATAL(cw_part_block_disks(p, 0, 40, disks) == 0);
	for (int b = 0; b < 40; b++)
		CU_ASSERT(disks[b] == 2);
	check_gen(p, 40, 1);
	info(t.pool, id, &mi);
	CU_ASSERT(mi.state == CW_MOVE_DONE && mi.done == 40 && mi.finished_ns >= mi.created_ns);
	CU_ASSERT(mi.bytes_copied == 40 * TP_BS);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM move_block") == 0);
	tp_check_totals(t.pool, 0);
	CU_ASSERT(!cw_mover_busy(t.pool));

	REOPEN(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	check_gen(p, 40, 1);
	CU_ASSERT(cw_part_info(p, &pi) == 0 && pi.opts.tier == CW_TIER_PREF_SSD);
	info(t.pool, id, &mi);
	CU_ASSERT(mi.state == CW_MOVE_DONE);
	/* Nothing to move is a move done at once. */
	CU_ASSERT_FATAL(cw_move_start(p, 0, 40, &mo, CW_MOVE_PART, &id2) == 0);
	info(t.pool, id2, &mi);
	CU_ASSERT(mi.state == CW_MOVE_DONE && mi.blocks == 0);
	CU_ASSERT(cw_move_forget_finished(t.pool) == 0);
	CU_ASSERT(cw_move_get(t.pool, id, &mi) == -ENOENT);
	CU_ASSERT(cw_part_delete(p) == 0);
	tp_fini(&t);
}

static void test_evacuate(void)
{
	static const uint64_t sizes[] = { 50, 30, 30 };
	struct cw_part_opts single = { .placement = CW_PLACE_SINGLE, .disk_id = 1 };
	struct cw_part *a, *b;
	struct cw_move_info mi;
	struct cw_disk_info di;
	uint64_t *ids = NULL;
	uint32_t disks[40];
	size_t n = 0;
	struct tp t;

	tp_pool(&t, TP_BS, 3, sizes, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "a", 39 * TP_BS, NULL, &a) == 0);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "b", 20 * TP_BS, &single, &b) == 0);
	fill(t.pool, a, 39, 3);
	fill(t.pool, b, 20, 4);
	/* On disk 1: 13 + 20 blocks; free elsewhere: 16 + 16. */
	CU_ASSERT(cw_disk_evacuate(t.pool, 1, &ids, &n) == -ENOSPC);
	CU_ASSERT(cw_pool_last_error(t.pool)->needed_bytes == 33 * TP_BS);
	CU_ASSERT(cw_pool_last_error(t.pool)->available_bytes == 32 * TP_BS);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "evacuating disk 1") != NULL);
	tp_check_totals(t.pool, 0);
	CU_ASSERT(cw_disk_evacuate(t.pool, 9, &ids, &n) == -ENOENT);
	CU_ASSERT_FATAL(cw_part_resize(b, 10 * TP_BS) == 0);
	CU_ASSERT_FATAL(cw_disk_evacuate(t.pool, 1, &ids, &n) == 0);
	CU_ASSERT_FATAL(n == 2);
	info(t.pool, ids[0], &mi);
	CU_ASSERT(mi.kind == CW_MOVE_EVACUATE && mi.disk_id == 1 && mi.blocks == 13);
	info(t.pool, ids[1], &mi);
	CU_ASSERT(mi.blocks == 10);
	CU_ASSERT(cw_disk_remove(t.pool, 1) == -EBUSY);
	CU_ASSERT(drive(t.pool, 1000) == 23);
	CU_ASSERT_FATAL(cw_part_block_disks(a, 0, 39, disks) == 0);
	for (int k = 0; k < 39; k++)
		CU_ASSERT(disks[k] == 2 || disks[k] == 3);
	check_gen(a, 39, 3);
	check_gen(b, 10, 4);
	CU_ASSERT(cw_disk_info(t.pool, 1, &di) == 0 && di.free_blocks == di.data_blocks);
	CU_ASSERT(cw_disk_remove(t.pool, 1) == 0);
	free(ids);
	/* The room is counted on the disks that remain. */
	CU_ASSERT(cw_disk_evacuate(t.pool, 3, &ids, &n) == -ENOSPC);
	REOPEN(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "a", &a) == 0);
	check_gen(a, 39, 3);
	tp_fini(&t);
}

/* A write that lands while its block is being copied: mirrored to the
 * destination, and the copy (which read the source before it) is done
 * again; after the switch a write goes to the destination only. */
static void test_overlap(void)
{
	static const uint64_t sizes[] = { 41, 41, 41 };
	struct cw_move_opts mo = { .placement = CW_PLACE_SINGLE, .disk_ids = (uint32_t[]){ 3 },
				   .ndisks = 1 };
	struct cw_part_opts po = { .placement = CW_PLACE_SINGLE, .disk_id = 1 };
	static uint8_t stale[TP_BS];
	struct cw_mover_task task;
	struct cw_extent e, m;
	struct cw_part *p;
	uint64_t id, skip;
	unsigned tk;
	struct tp t;

	tp_pool(&t, TP_BS, 3, sizes, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 4 * TP_BS, &po, &p) == 0);
	fill(t.pool, p, 4, 1);
	CU_ASSERT_FATAL(cw_move_start(p, 0, 4, &mo, CW_MOVE_PART, &id) == 0);

	/* I/O in flight when the slot is published holds the mover back. */
	tk = cw_part_io_begin(p);
	CU_ASSERT_FATAL(cw_mover_next(t.pool, &task) == 0);
	CU_ASSERT(task.action == CW_MOVER_WAIT && task.move_id == id);
	cw_part_io_end(p, tk);
	CU_ASSERT_FATAL(cw_mover_next(t.pool, &task) == 0);
	CU_ASSERT_FATAL(task.action == CW_MOVER_COPY && task.block == 0 && !task.again);
	CU_ASSERT(cw_mover_next(t.pool, &task) == -EBUSY);
	/* The copy reads the source, then a write comes, then the copy
	 * writes what it read. */
	CU_ASSERT_FATAL(pread(cw_disk_fd(t.pool, 1), stale, TP_BS, (off_t)task.src_offset) == TP_BS);
	io_write(p, 0, 2, false);
	CU_ASSERT_FATAL(pwrite(cw_disk_fd(t.pool, 3), stale, TP_BS, (off_t)task.dst_offset) == TP_BS);
	CU_ASSERT(cw_mover_copied(t.pool, 0, 0) == 0);
	CU_ASSERT(cw_mover_copied(t.pool, 0, 0) == -EINVAL);
	/* Not switched: done again. */
	CU_ASSERT_FATAL(cw_part_map(p, 0, TP_BS, &e) == 0 && e.disk_id == 1);
	CU_ASSERT_FATAL(cw_mover_next(t.pool, &task) == 0);
	CU_ASSERT_FATAL(task.action == CW_MOVER_COPY && task.block == 0 && task.again);
	copy(t.pool, &task);
	CU_ASSERT(cw_mover_copied(t.pool, 0, 0) == 0);
	CU_ASSERT_FATAL(cw_part_map(p, 0, TP_BS, &e) == 0 && e.disk_id == 3);
	CU_ASSERT(io_gen(p, 0) == 2);
	/* Switched: no mirror any more, even before the slot is cleared. */
	CU_ASSERT(cw_part_write_mirror(p, 0, &e, &skip, &m) == 0);
	/* A write mapped before the switch mirrors into the destination:
	 * the block in flight is 1 now; a write of 2 blocks from block 0
	 * covers it at skip = one block. */
	CU_ASSERT_FATAL(cw_mover_next(t.pool, &task) == 0);
	CU_ASSERT_FATAL(task.action == CW_MOVER_COPY && task.block == 1);
	e = (struct cw_extent){ 1, task.src_offset - TP_BS, 2 * TP_BS };
	CU_ASSERT(cw_part_write_mirror(p, 0, &e, &skip, &m) == 1);
	CU_ASSERT(skip == TP_BS && m.disk_id == 3 && m.phys_offset == task.dst_offset &&
		  m.length == TP_BS);
	copy(t.pool, &task);
	CU_ASSERT(cw_mover_copied(t.pool, 0, 0) == 0);	/* dirty from the mirror */
	CU_ASSERT(drive(t.pool, 100) == 3);
	for (uint64_t b = 1; b < 4; b++)
		CU_ASSERT(io_gen(p, b) == 1);
	CU_ASSERT(io_gen(p, 0) == 2);
	tp_fini(&t);
}

/* Two disks of 40 blocks and partition "p" of n blocks on disk 1 at
 * generation g, with a move of all of it to disk 2 journalled as *ret_id. */
static struct cw_part *one_to_two(struct tp *t, uint64_t n, uint32_t g, uint64_t *ret_id)
{
	static const uint64_t sizes[] = { 41, 41 };
	static const uint32_t two = 2;
	struct cw_move_opts mo = { .placement = CW_PLACE_SINGLE, .disk_ids = &two, .ndisks = 1 };
	struct cw_part_opts po = { .placement = CW_PLACE_SINGLE, .disk_id = 1 };
	struct cw_part *p;

	tp_pool(t, TP_BS, 2, sizes, NULL);
	CU_ASSERT_FATAL(cw_part_create(t->pool, "p", n * TP_BS, &po, &p) == 0);
	fill(t->pool, p, n, g);
	CU_ASSERT_FATAL(cw_move_start(p, 0, n, &mo, CW_MOVE_PART, ret_id) == 0);
	return p;
}

static void test_pause_cancel(void)
{
	struct cw_mover_task task;
	struct cw_move_info mi;
	struct cw_disk_info di;
	struct cw_part *p;
	uint32_t disks[10];
	uint64_t id;
	struct tp t;

	p = one_to_two(&t, 10, 5, &id);
	CU_ASSERT(drive(t.pool, 3) == 3);
	CU_ASSERT(cw_move_pause(t.pool, id, NULL) == 0);
	CU_ASSERT(cw_move_pause(t.pool, id, NULL) == -EALREADY);
	CU_ASSERT(cw_mover_next(t.pool, &task) == 0 && task.action == CW_MOVER_IDLE);
	info(t.pool, id, &mi);
	CU_ASSERT(mi.state == CW_MOVE_PAUSED && mi.done == 3 && mi.error[0] == 0);
	/* Paused survives a reopen. */
	REOPEN(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT(cw_mover_next(t.pool, &task) == 0 && task.action == CW_MOVER_IDLE);
	tp_check_totals(t.pool, 7);
	CU_ASSERT(cw_move_resume(t.pool, id) == 0);
	CU_ASSERT(cw_move_resume(t.pool, id) == -EALREADY);
	CU_ASSERT(drive(t.pool, 2) == 2);
	/* Cancel with a block in flight: it is given back once drained. */
	CU_ASSERT_FATAL(cw_mover_next(t.pool, &task) == 0 && task.action == CW_MOVER_COPY);
	CU_ASSERT(cw_move_cancel(t.pool, id, NULL) == 0);
	tp_check_totals(t.pool, 1);
	copy(t.pool, &task);
	CU_ASSERT(cw_mover_copied(t.pool, 0, 0) == 0);
	CU_ASSERT(cw_mover_next(t.pool, &task) == 0 && task.action == CW_MOVER_IDLE);
	tp_check_totals(t.pool, 0);
	info(t.pool, id, &mi);
	CU_ASSERT(mi.state == CW_MOVE_CANCELLED && mi.done == 5 && mi.error[0] == '\0');
	CU_ASSERT(cw_move_cancel(t.pool, id, NULL) == -EALREADY);
	CU_ASSERT(cw_move_pause(t.pool, 99, NULL) == -ENOENT);
	CU_ASSERT_FATAL(cw_part_block_disks(p, 0, 10, disks) == 0);
	for (int b = 0; b < 10; b++)
		CU_ASSERT(disks[b] == (b < 5 ? 2 : 1));
	check_gen(p, 10, 5);
	CU_ASSERT(cw_disk_info(t.pool, 2, &di) == 0 && di.free_blocks == di.data_blocks - 5);
	REOPEN(&t);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

/* A source that does not read marks its block and the move goes on; a
 * destination that does not write pauses the move with the error. */
static void test_errors(void)
{
	struct cw_mover_task task;
	struct cw_move_info mi;
	struct cw_part *p;
	uint64_t id, *bad = NULL;
	size_t nbad = 0;
	uint32_t disks[6];
	struct tp t;

	p = one_to_two(&t, 6, 7, &id);
	CU_ASSERT_FATAL(cw_mover_next(t.pool, &task) == 0 && task.block == 0);
	CU_ASSERT(cw_mover_copied(t.pool, -EIO, 0) == 0);
	CU_ASSERT_FATAL(cw_mover_next(t.pool, &task) == 0 && task.block == 1);
	CU_ASSERT(cw_mover_copied(t.pool, 0, -ENOSPC) == 0);
	info(t.pool, id, &mi);
	CU_ASSERT(mi.state == CW_MOVE_PAUSED && mi.failed == 1);
	CU_ASSERT(strstr(mi.error, "writing block 1 to disk 2") != NULL);
	CU_ASSERT(cw_mover_next(t.pool, &task) == 0 && task.action == CW_MOVER_IDLE);
	tp_check_totals(t.pool, 5);
	CU_ASSERT(cw_move_resume(t.pool, id) == 0);
	CU_ASSERT(drive(t.pool, 100) == 5);
	info(t.pool, id, &mi);
	CU_ASSERT(mi.state == CW_MOVE_DONE && mi.done == 5 && mi.failed == 1);
	CU_ASSERT(cw_move_failed_blocks(t.pool, id, &bad, &nbad) == 0);
	CU_ASSERT(nbad == 1 && bad && bad[0] == 0);
	free(bad);
	CU_ASSERT_FATAL(cw_part_block_disks(p, 0, 6, disks) == 0);
	CU_ASSERT(disks[0] == 1 && disks[1] == 2 && disks[5] == 2);
	check_gen(p, 6, 7);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

/* A shrink under a move: the blocks it took are skipped, and a block
 * shrunk away while it was being copied is not switched. */
static void test_shrink_under(void)
{
	struct cw_mover_task task;
	struct cw_move_info mi;
	struct cw_part *p;
	uint64_t id;
	struct tp t;

	p = one_to_two(&t, 8, 1, &id);
	CU_ASSERT_FATAL(cw_mover_next(t.pool, &task) == 0 && task.block == 0);
	CU_ASSERT_FATAL(cw_part_resize(p, 0) == 0);
	copy(t.pool, &task);
	CU_ASSERT(cw_mover_copied(t.pool, 0, 0) == 0);
	CU_ASSERT(drive(t.pool, 100) == 0);
	info(t.pool, id, &mi);
	CU_ASSERT(mi.state == CW_MOVE_DONE && mi.done == 0 && mi.skipped == 8);
	tp_check_totals(t.pool, 0);
	REOPEN(&t);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

/* Closing mid-copy is a crash as far as the journal knows: the reopened
 * pool has the destinations reserved and the move resumes. */
static void test_resume(void)
{
	struct cw_mover_task task;
	struct cw_move_info mi;
	struct cw_part *p;
	uint64_t id;
	struct tp t;

	p = one_to_two(&t, 12, 9, &id);
	CU_ASSERT(drive(t.pool, 5) == 5);
	CU_ASSERT_FATAL(cw_mover_next(t.pool, &task) == 0 && task.action == CW_MOVER_COPY);
	REOPEN(&t);
	tp_check_totals(t.pool, 7);
	info(t.pool, id, &mi);
	CU_ASSERT(mi.state == CW_MOVE_RUNNING && mi.done == 5);
	CU_ASSERT(cw_mover_busy(t.pool));
	CU_ASSERT(drive(t.pool, 100) == 7);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	check_gen(p, 12, 9);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

/*
 * Threads: writers hammer their own blocks (block b belongs to writer
 * b % WRITERS) with new generations through the gate while the main
 * thread moves the partition back and forth between the disks.  Once all
 * stop, every block holds its writer's last generation.  Also run under
 * ThreadSanitizer.
 */
#define WRITERS 3
#define TB 12

static struct cw_part *tpart;
static atomic_bool tstop;
static _Atomic uint32_t tgen[TB];

static void *writer(void *arg)
{
	uint64_t x = (uintptr_t)arg * 0x9E3779B97F4A7C15u + 7;
	uint8_t *buf = malloc(TP_BS);

	while (buf && !atomic_load(&tstop)) {
		struct cw_extent e, m;
		uint64_t b, skip;
		uint32_t g;
		unsigned tk;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b = (x % (TB / WRITERS)) * WRITERS + (uintptr_t)arg;
		g = atomic_load(&tgen[b]) + 1;
		pattern(buf, b, g);
		tk = cw_part_io_begin(tpart);
		if (cw_part_map(tpart, b * TP_BS, TP_BS, &e) == 0 &&
		    pwrite(cw_disk_fd(gpool, e.disk_id), buf, e.length, (off_t)e.phys_offset) ==
			    (ssize_t)e.length &&
		    (cw_part_write_mirror(tpart, b * TP_BS, &e, &skip, &m) == 0 ||
		     pwrite(cw_disk_fd(gpool, m.disk_id), buf + skip, m.length,
			    (off_t)m.phys_offset) == (ssize_t)m.length))
			atomic_store(&tgen[b], g);
		cw_part_io_end(tpart, tk);
	}
	free(buf);
	return NULL;
}

static void test_threads(void)
{
	pthread_t th[WRITERS];
	uint64_t id;
	unsigned rounds = 0;
	struct tp t;

	tpart = one_to_two(&t, TB, 0, &id);
	atomic_store(&tstop, false);
	for (uintptr_t i = 0; i < WRITERS; i++)
		CU_ASSERT_FATAL(pthread_create(&th[i], NULL, writer, (void *)i) == 0);
	for (int k = 0; k < 6; k++) {
		struct cw_mover_task task[CW_MOVER_DEPTH_MAX];
		uint64_t *ids = NULL;
		size_t n = 0;

		for (;;) {
			unsigned nt = next_tasks(t.pool, task);

			if (task[0].action == CW_MOVER_IDLE)
				break;
			if (task[0].action == CW_MOVER_COPY) {
				for (unsigned i = 0; i < nt; i++)
					copy(t.pool, &task[i]);
				copied_all(t.pool, nt);
				rounds += nt;
			} else {
				sched_yield();
			}
		}
		if (cw_disk_evacuate(t.pool, 1 + (k % 2), &ids, &n) == 0)
			free(ids);
	}
	atomic_store(&tstop, true);
	for (int i = 0; i < WRITERS; i++)
		pthread_join(th[i], NULL);
	for (uint64_t b = 0; b < TB; b++)
		CU_ASSERT(io_gen(tpart, b) == atomic_load(&tgen[b]));
	fprintf(stderr, "threads: %u copies (some done again)\n", rounds);
	tp_fini(&t);
}

/*
 * kill -9 during an evacuation under writes.  The child interleaves
 * writes of new generations to random blocks (each synced, then reported
 * on a pipe: acknowledged) with mover steps; it is killed after a random
 * delay.  The reopened pool (which checks that no block is owned twice)
 * must show each block at its last acknowledged generation or the one
 * that was in flight, and the move must then run to its end.
 */
#define KILLS 50
#define KB 24

static struct cw_part *gpart;	/* the child's partition */

static void synced_write(uint64_t b, uint32_t g)
{
	io_write(gpart, b, g, true);
}

/* A write of a new generation of block b, reported. */
static void child_write(struct cw_part *p, uint32_t *gen, uint64_t b, int wfd)
{
	gpart = p;
	tp_write_reported(wfd, b, ++gen[b], synced_write);
}

static void child(const char *db, uint64_t seed, int wfd)
{
	static uint8_t buf[TP_BS];
	struct cw_pool *pool;
	struct cw_error err;
	struct cw_part *p;
	struct cw_mover_task task[CW_MOVER_DEPTH_MAX];
	uint32_t gen[KB] = { 0 };
	static const struct cw_mover_outcome ok[CW_MOVER_DEPTH_MAX];
	uint64_t *ids;
	unsigned nt;
	size_t n;

	if (cw_pool_open(db, &err, &pool) < 0 || cw_part_lookup(pool, "p", &p) < 0)
		_exit(2);
	gpool = pool;
	for (uint64_t b = 0; b < KB; b++)
		gen[b] = (uint32_t)io_gen(p, b);
	/* -EBUSY when an earlier run journalled one already. */
	if (cw_disk_evacuate(pool, 1, &ids, &n) == 0)
		free(ids);
	for (;;) {
		uint64_t x = tp_xorshift(&seed);

		if (x & 0x100)
			child_write(p, gen, x % KB, wfd);
		if (cw_mover_next_batch(pool, task, tdepth, &nt) < 0)
			_exit(4);
		if (task[0].action == CW_MOVER_COPY) {
			/* Writes land between a copy's read and its write,
			 * often on the very block; the batch's destinations
			 * are synced after all its writes. */
			for (unsigned i = 0; i < nt; i++) {
				int s = cw_disk_fd(pool, task[i].src_disk_id);
				int d = cw_disk_fd(pool, task[i].dst_disk_id);

				if (pread(s, buf, TP_BS, (off_t)task[i].src_offset) != TP_BS)
					_exit(5);
				if (x & 0x200)
					child_write(p, gen, x & 0x400 ? task[i].block : (x >> 11) % KB,
						    wfd);
				x = tp_xorshift(&seed);
				if (pwrite(d, buf, TP_BS, (off_t)task[i].dst_offset) != TP_BS)
					_exit(5);
			}
			for (unsigned i = 0; i < nt; i++)
				if (fdatasync(cw_disk_fd(pool, task[i].dst_disk_id)) < 0)
					_exit(5);
			if (cw_mover_copied_batch(pool, ok, nt) < 0)
				_exit(4);
		} else if (task[0].action == CW_MOVER_IDLE) {
			/* Back and forth: evacuate the other disk next. */
			if (cw_disk_evacuate(pool, 1 + (x & 1), &ids, &n) == 0)
				free(ids);
		}
	}
}

static void test_kill9(void)
{
	static const uint64_t sizes[] = { 41, 41 };
	int64_t acked[KB] = { 0 }, flying[KB] = { 0 };
	struct cw_part_opts po = { .placement = CW_PLACE_SINGLE, .disk_id = 1 };
	struct cw_part *p;
	uint64_t seed = (uint64_t)time(NULL) | 1;
	unsigned resumed = 0;
	struct tp t;

	tp_pool(&t, TP_BS, 2, sizes, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", KB * TP_BS, &po, &p) == 0);
	fill(t.pool, p, KB, 0);
	cw_pool_close(t.pool);
	t.pool = NULL;
	for (int it = 0; it < KILLS; it++) {
		struct timespec ts = { 0, (long)((seed >> 8) % 40000000) };
		int fds[2], st;
		pid_t pid;

		seed = seed * 6364136223846793005u + 1442695040888963407u;
		CU_ASSERT_FATAL(pipe(fds) == 0);
		pid = fork();
		CU_ASSERT_FATAL(pid >= 0);
		if (pid == 0) {
			close(fds[0]);
			child(t.db, seed | 1, fds[1]);
		}
		close(fds[1]);
		nanosleep(&ts, NULL);
		kill(pid, SIGKILL);
		CU_ASSERT_FATAL(waitpid(pid, &st, 0) == pid);
		CU_ASSERT(WIFSIGNALED(st));
		tp_read_reports(fds[0], acked, flying);
		close(fds[0]);
		REOPEN(&t);	/* no block owned twice, maps agree */
		CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
		gpool = t.pool;
		for (uint64_t b = 0; b < KB; b++) {
			int64_t g = io_gen(p, b);
			/* A write in flight may also be torn (no pattern). */
			bool ok = g == acked[b] || g == flying[b] || (g < 0 && flying[b] != acked[b]);

			CU_ASSERT(ok);
			if (!ok)
				fprintf(stderr, "block %llu: gen %lld, acknowledged %lld\n",
					(unsigned long long)b, (long long)g, (long long)acked[b]);
			acked[b] = flying[b] = g;
		}
		resumed += cw_mover_busy(t.pool);
		cw_pool_close(t.pool);
		t.pool = NULL;
	}
	REOPEN(&t);
	drive(t.pool, 10000);
	CU_ASSERT(!cw_mover_busy(t.pool));
	fprintf(stderr, "kill9: %u of %d reopened with a move to resume\n", resumed, KILLS);
	tp_fini(&t);
}

/* Drives the mover in batches of depth until idle. */
static unsigned drive_at(struct cw_pool *pool, unsigned depth)
{
	unsigned n;

	tdepth = depth;
	n = drive(pool, 1000);
	tdepth = 1;
	return n;
}

/* The move is done with done and failed blocks; blocks [0, failed) of
 * p's 10 are still on disk 1, the others on disk 2. */
static void done_on(struct cw_pool *pool, uint64_t id, struct cw_part *p, uint64_t done,
		    uint64_t failed, int on1)
{
	struct cw_move_info mi;
	uint32_t disks[10];

	info(pool, id, &mi);
	CU_ASSERT(mi.state == CW_MOVE_DONE && mi.done == done && mi.failed == failed);
	CU_ASSERT_FATAL(cw_part_block_disks(p, 0, 10, disks) == 0);
	for (int b = 0; b < 10; b++)
		CU_ASSERT(disks[b] == (b < on1 ? 1u : 2u));
}

/* A batch: each block has its slot (a write over several is mirrored to
 * each), the clean ones switch together, a dirty one is copied again. */
static void test_batch(void)
{
	static const struct cw_mover_outcome ok[CW_MOVER_DEPTH_MAX];
	static uint8_t stale[TP_BS];
	struct cw_mover_task task[CW_MOVER_DEPTH_MAX];
	struct cw_extent e, m[CW_MOVER_DEPTH_MAX];
	uint64_t id, skip[CW_MOVER_DEPTH_MAX];
	struct cw_part *p;
	uint32_t disks[10];
	unsigned n;
	struct tp t;

	p = one_to_two(&t, 10, 1, &id);
	CU_ASSERT(cw_mover_next_batch(t.pool, task, 0, &n) == -EINVAL);
	CU_ASSERT(cw_mover_next_batch(t.pool, task, CW_MOVER_DEPTH_MAX + 1, &n) == -EINVAL);
	CU_ASSERT_FATAL(cw_mover_next_batch(t.pool, task, 4, &n) == 0);
	CU_ASSERT_FATAL(task[0].action == CW_MOVER_COPY && n == 4);
	for (unsigned i = 0; i < n; i++) {
		CU_ASSERT(task[i].block == i && !task[i].again && task[i].move_id == id);
		CU_ASSERT(task[i].src_disk_id == 1 && task[i].dst_disk_id == 2);
	}
	CU_ASSERT(cw_mover_next_batch(t.pool, task + 4, 4, &n) == -EBUSY);
	CU_ASSERT(cw_mover_copied_batch(t.pool, ok, 3) == -EINVAL);
	/* A write over blocks 1..4 (4 is not in the batch) from block 1's
	 * source: mirrored to 1, 2 and 3 where the batch's sources are
	 * contiguous, as they are on a disk filled in order. */
	CU_ASSERT_FATAL(cw_part_map(p, 1 * TP_BS, 4 * TP_BS, &e) == 0);
	if (e.length == 4 * TP_BS) {
		CU_ASSERT(cw_part_write_mirrors(p, 1 * TP_BS, &e, skip, m, CW_MOVER_DEPTH_MAX) == 3);
		for (unsigned i = 0; i < 3; i++)
			CU_ASSERT(skip[i] == i * TP_BS && m[i].disk_id == 2 &&
				  m[i].phys_offset == task[i + 1].dst_offset && m[i].length == TP_BS);
		/* At most max of them. */
		CU_ASSERT(cw_part_write_mirrors(p, 1 * TP_BS, &e, skip, m, 1) == 1);
	}
	/* The mirror marked them dirty: they are copied again, 0 is not. */
	for (unsigned i = 0; i < 4; i++)
		copy(t.pool, &task[i]);
	CU_ASSERT(cw_mover_copied_batch(t.pool, ok, 4) == 0);
	CU_ASSERT_FATAL(cw_part_block_disks(p, 0, 4, disks) == 0);
	CU_ASSERT(disks[0] == 2 && disks[1] == (e.length == 4 * TP_BS ? 1 : 2));
	CU_ASSERT_FATAL(cw_mover_next_batch(t.pool, task, 4, &n) == 0);
	if (e.length == 4 * TP_BS) {
		CU_ASSERT_FATAL(task[0].action == CW_MOVER_COPY && n == 3);
		for (unsigned i = 0; i < n; i++)
			CU_ASSERT(task[i].block == i + 1 && task[i].again);
		/* This time a write lands on block 2 between the read and
		 * the write of its copy: only 2 is done again. */
		for (unsigned i = 0; i < n; i++) {
			if (task[i].block != 2) {
				copy(t.pool, &task[i]);
				continue;
			}
			CU_ASSERT_FATAL(pread(cw_disk_fd(t.pool, 1), stale, TP_BS,
					      (off_t)task[i].src_offset) == TP_BS);
			io_write(p, 2, 2, false);
			CU_ASSERT_FATAL(pwrite(cw_disk_fd(t.pool, 2), stale, TP_BS,
					       (off_t)task[i].dst_offset) == TP_BS);
		}
		CU_ASSERT(cw_mover_copied_batch(t.pool, ok, n) == 0);
		CU_ASSERT_FATAL(cw_part_block_disks(p, 0, 4, disks) == 0);
		CU_ASSERT(disks[1] == 2 && disks[2] == 1 && disks[3] == 2);
		/* 6 planned, 2's, and the sources of 1 and 3 until drained. */
		tp_check_totals(t.pool, 9);
		CU_ASSERT_FATAL(cw_mover_next_batch(t.pool, task, 4, &n) == 0);
		CU_ASSERT_FATAL(task[0].action == CW_MOVER_COPY && n == 1 && task[0].block == 2 &&
				task[0].again);
		copy(t.pool, &task[0]);
		CU_ASSERT(cw_mover_copied_batch(t.pool, ok, 1) == 0);
	}
	CU_ASSERT(drive_at(t.pool, 4) == 6);
	done_on(t.pool, id, p, 10, 0, 0);
	for (uint64_t b = 0; b < 10; b++)
		CU_ASSERT(io_gen(p, b) == (b == 2 && e.length == 4 * TP_BS ? 2 : 1));
	tp_check_totals(t.pool, 0);
	REOPEN(&t);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

/* A batch whose blocks end differently: one unreadable, one switched,
 * one that does not write (the move pauses, the rest stays planned);
 * then a batch cancelled in flight gives every destination back. */
static void test_batch_stops(void)
{
	static const struct cw_mover_outcome ok[CW_MOVER_DEPTH_MAX];
	const struct cw_mover_outcome mixed[4] = { { -EIO, 0 }, { 0, 0 }, { 0, -ENOSPC }, { 0, 0 } };
	struct cw_mover_task task[CW_MOVER_DEPTH_MAX];
	struct cw_move_info mi;
	struct cw_part *p;
	uint32_t disks[10];
	uint64_t id;
	unsigned n;
	struct tp t;

	p = one_to_two(&t, 10, 3, &id);
	CU_ASSERT_FATAL(cw_mover_next_batch(t.pool, task, 4, &n) == 0 && n == 4);
	for (unsigned i = 0; i < n; i++)
		copy(t.pool, &task[i]);
	CU_ASSERT(cw_mover_copied_batch(t.pool, mixed, 4) == 0);
	CU_ASSERT(cw_mover_next_batch(t.pool, task, 4, &n) == 0 && task[0].action == CW_MOVER_IDLE);
	info(t.pool, id, &mi);
	CU_ASSERT(mi.state == CW_MOVE_PAUSED && mi.failed == 1 && mi.done == 1);
	CU_ASSERT(strstr(mi.error, "writing block 2 to disk 2") != NULL);
	tp_check_totals(t.pool, 8);
	REOPEN(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	tp_check_totals(t.pool, 8);
	CU_ASSERT(cw_move_resume(t.pool, id) == 0);
	CU_ASSERT(drive_at(t.pool, 4) == 8);
	done_on(t.pool, id, p, 9, 1, 1);
	check_gen(p, 10, 3);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);

	/* Cancelled with a batch out: nothing switches, all given back. */
	p = one_to_two(&t, 10, 4, &id);
	CU_ASSERT_FATAL(cw_mover_next_batch(t.pool, task, 4, &n) == 0 && n == 4);
	CU_ASSERT(cw_move_cancel(t.pool, id, NULL) == 0);
	tp_check_totals(t.pool, 4);
	for (unsigned i = 0; i < n; i++)
		copy(t.pool, &task[i]);
	CU_ASSERT(cw_mover_copied_batch(t.pool, ok, 4) == 0);
	CU_ASSERT(cw_mover_next_batch(t.pool, task, 4, &n) == 0 && task[0].action == CW_MOVER_IDLE);
	CU_ASSERT(!cw_mover_busy(t.pool));
	info(t.pool, id, &mi);
	CU_ASSERT(mi.state == CW_MOVE_CANCELLED && mi.done == 0);
	CU_ASSERT_FATAL(cw_part_block_disks(p, 0, 10, disks) == 0);
	for (int b = 0; b < 10; b++)
		CU_ASSERT(disks[b] == 1);
	check_gen(p, 10, 4);
	tp_check_totals(t.pool, 0);
	REOPEN(&t);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

/* Runs test at a depth of batches. */
#define AT_DEPTH(name, test, depth) \
	static void name(void) \
	{ \
		tdepth = (depth); \
		test(); \
		tdepth = 1; \
	}
AT_DEPTH(test_threads_batched, test_threads, 8)
AT_DEPTH(test_kill9_batched, test_kill9, 6)

/* The mover's pace on a disk without streams: the batch's cost there is
 * the model's mean per block read and per block written; with company
 * since the last batch the next waits cost * (100 - share) / share, not
 * with none, nor on a disk with streams, nor with the whole share. */
static void test_pace(void)
{
	struct cw_mover_task t[3] = {
		{ .src_disk_id = 1, .dst_disk_id = 2, .length = 1 << 20 },
		{ .src_disk_id = 1, .dst_disk_id = 2, .length = 1 << 20 },
		{ .src_disk_id = 3, .dst_disk_id = 3, .length = 1 << 20 },
	};
	struct cw_mover_pace pc = { 0 };
	struct cw_model m;
	int64_t mean, cost;

	CU_ASSERT_FATAL(cw_model_preset("hdd7200", &m) == 0);
	CU_ASSERT_FATAL(cw_model_mean_ns(&m, 1 << 20, &mean) == 0 && mean > 0);
	CU_ASSERT_EQUAL(cw_mover_batch_cost_ns(t, 3, 1, &m), 2 * mean);
	CU_ASSERT_EQUAL(cw_mover_batch_cost_ns(t, 3, 2, &m), 2 * mean);
	CU_ASSERT_EQUAL(cw_mover_batch_cost_ns(t, 3, 3, &m), 2 * mean);
	CU_ASSERT_EQUAL(cw_mover_batch_cost_ns(t, 3, 4, &m), 0);
	cost = 2 * mean;
	/* company (the others' time moved from 0): 25% means 3 x cost idle */
	cw_mover_pace_after(&pc, 25, false, cost, 1000, 5000);
	CU_ASSERT_EQUAL(pc.next_ns, 5000 + 3 * cost);
	CU_ASSERT_EQUAL(pc.others_ns, 1000);
	/* alone since: no wait beyond the last */
	cw_mover_pace_after(&pc, 25, false, cost, 1000, 9000);
	CU_ASSERT_EQUAL(pc.next_ns, 5000 + 3 * cost);
	/* streams on the disk: the slack paces it, not the share */
	cw_mover_pace_after(&pc, 25, true, cost, 2000, 10000);
	CU_ASSERT_EQUAL(pc.next_ns, 5000 + 3 * cost);
	CU_ASSERT_EQUAL(pc.others_ns, 2000);
	/* the whole disk */
	cw_mover_pace_after(&pc, 100, false, cost, 3000, 20000);
	CU_ASSERT_EQUAL(pc.next_ns, 5000 + 3 * cost);
	cw_mover_pace_after(&pc, 50, false, cost, 4000, 20000);
	CU_ASSERT_EQUAL(pc.next_ns, 20000 + cost);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("mover", NULL, NULL);

	cwtest_add(s, "a partition onto the SSD tier", test_to_ssd);
	cwtest_add(s, "evacuate a disk, refused, then removed", test_evacuate);
	cwtest_add(s, "a write overlapping a copy", test_overlap);
	cwtest_add(s, "pause, resume, cancel", test_pause_cancel);
	cwtest_add(s, "unreadable source, failed destination", test_errors);
	cwtest_add(s, "a shrink under a move", test_shrink_under);
	cwtest_add(s, "resume after a close mid-copy", test_resume);
	cwtest_add(s, "writer threads while blocks move", test_threads);
	cwtest_add(s, "kill -9 during evacuation under writes", test_kill9);
	cwtest_add(s, "a batch: mirrors, a block copied again", test_batch);
	cwtest_add(s, "batches: pause, cancel, errors", test_batch_stops);
	cwtest_add(s, "batches of 8 under writer threads", test_threads_batched);
	cwtest_add(s, "kill -9 during batches of 6 under writes", test_kill9_batched);
	cwtest_add(s, "the pace on a disk without streams", test_pace);
	return cwtest_run();
}
