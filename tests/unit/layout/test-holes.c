/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: a partition's blocks are holes until written and again
 * after they are deallocated; cw_part_allocated reports runs of one state;
 * the state survives a reopen, a grow and a shrink, an older pool reads as
 * written, and a process killed with SIGKILL leaves the state after the
 * last change it finished or after the one it was making.
 */
#include "config.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "meta/meta-internal.h"
#include "pooltest.h"

#define BS TP_BS

/* The state of blocks [0, n) of part, one char each: 'd' data, '.' hole. */
static void state(const struct cw_part *part, uint64_t n, char *buf)
{
	uint64_t off = 0, end = n * BS, len;

	while (off < end) {
		int r = cw_part_allocated(part, off, end - off, &len);

		CU_ASSERT_FATAL(r == 0 || r == 1);
		CU_ASSERT_FATAL(len > 0 && len <= end - off);
		for (uint64_t b = off / BS; b < (off + len + BS - 1) / BS; b++)
			buf[b] = r ? 'd' : '.';
		off += len;
		/* A run ends where the state changes (or at the end asked). */
		if (off < end) {
			uint64_t l2;

			CU_ASSERT(cw_part_allocated(part, off, BS, &l2) == !r);
		}
	}
	buf[n] = 0;
}

static void set(struct cw_pool *pool, struct cw_part *p, uint64_t first, uint64_t n, bool data)
{
	struct cw_alloc_change c = { .part = p, .first_block = first, .nblocks = n,
				     .allocated = data };

	CU_ASSERT_FATAL(cw_part_set_allocated(pool, &c, 1) == 0);
}

static void test_basics(void)
{
	uint64_t nb[] = { 9000 };
	struct cw_part *p, *q;
	char s[8200];
	uint64_t len;
	struct tp t;

	tp_pool(&t, BS, 1, nb, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 10 * BS, NULL, &p) == 0);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "big", 8192 * BS, NULL, &q) == 0);
	state(p, 10, s);
	CU_ASSERT_STRING_EQUAL(s, "..........");
	/* One run across a whole fresh partition, chunks included. */
	CU_ASSERT_EQUAL(cw_part_allocated(q, 0, 8192 * BS, &len), 0);
	CU_ASSERT_EQUAL(len, 8192 * BS);
	CU_ASSERT_EQUAL(cw_part_allocated(q, 100, 0, &len), 0);
	CU_ASSERT_EQUAL(len, BS - 100);
	CU_ASSERT_EQUAL(cw_part_allocated(p, 10 * BS, BS, &len), -ERANGE);

	set(t.pool, p, 1, 2, true);
	set(t.pool, p, 5, 5, true);
	set(t.pool, p, 7, 1, false);
	state(p, 10, s);
	CU_ASSERT_STRING_EQUAL(s, ".dd..dd.dd");
	CU_ASSERT_EQUAL(cw_part_allocated(p, BS + 512, 10 * BS, &len), 1);
	CU_ASSERT_EQUAL(len, 2 * BS - 512);
	/* A batch over two partitions and across a chunk boundary. */
	{
		struct cw_alloc_change c[] = {
			{ .part = q, .first_block = 4000, .nblocks = 200, .allocated = true },
			{ .part = p, .first_block = 0, .nblocks = 1, .allocated = true },
			{ .part = q, .first_block = 4050, .nblocks = 10, .allocated = false },
		};

		CU_ASSERT_FATAL(cw_part_set_allocated(t.pool, c, 3) == 0);
	}
	CU_ASSERT_EQUAL(cw_part_allocated(q, 4000 * BS, 1000 * BS, &len), 1);
	CU_ASSERT_EQUAL(len, 50 * BS);
	CU_ASSERT_EQUAL(cw_part_allocated(q, 4060 * BS, 1000 * BS, &len), 1);
	CU_ASSERT_EQUAL(len, 140 * BS);
	CU_ASSERT_EQUAL(cw_part_allocated(q, 4200 * BS, 0, &len), 0);

	/* A range past the end changes nothing at all. */
	{
		struct cw_alloc_change c[] = {
			{ .part = p, .first_block = 3, .nblocks = 1, .allocated = true },
			{ .part = p, .first_block = 9, .nblocks = 2, .allocated = true },
		};

		CU_ASSERT_EQUAL(cw_part_set_allocated(t.pool, c, 2), -ERANGE);
	}
	state(p, 10, s);
	CU_ASSERT_STRING_EQUAL(s, "ddd..dd.dd");

	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "big", &q) == 0);
	state(p, 10, s);
	CU_ASSERT_STRING_EQUAL(s, "ddd..dd.dd");
	CU_ASSERT_EQUAL(cw_part_allocated(q, 4000 * BS, 1000 * BS, &len), 1);
	CU_ASSERT_EQUAL(len, 50 * BS);

	/* What a shrink or delete would lose: the data blocks in a range. */
	{
		uint64_t bytes = 1;

		CU_ASSERT_EQUAL(cw_part_data_bytes(p, 0, 10, &bytes), 0);
		CU_ASSERT_EQUAL(bytes, 7 * BS);		/* ddd..dd.dd */
		CU_ASSERT_EQUAL(cw_part_data_bytes(p, 6, 4, &bytes), 0);
		CU_ASSERT_EQUAL(bytes, 3 * BS);
		CU_ASSERT_EQUAL(cw_part_data_bytes(p, 3, 2, &bytes), 0);
		CU_ASSERT_EQUAL(bytes, 0);
		CU_ASSERT_EQUAL(cw_part_data_bytes(p, 10, 0, &bytes), 0);
		CU_ASSERT_EQUAL(bytes, 0);
		CU_ASSERT_EQUAL(cw_part_data_bytes(p, 9, 2, &bytes), -ERANGE);
		CU_ASSERT_EQUAL(cw_part_data_bytes(q, 0, 8192, &bytes), 0);
		CU_ASSERT_EQUAL(bytes, 190 * BS);	/* 4000+200 less 4050+10 */
	}

	/* Shrink then grow: the blocks given again are holes. */
	CU_ASSERT_FATAL(cw_part_resize(p, 6 * BS) == 0);
	CU_ASSERT_FATAL(cw_part_resize(p, 12 * BS) == 0);
	state(p, 12, s);
	CU_ASSERT_STRING_EQUAL(s, "ddd..d......");
	CU_ASSERT_FATAL(cw_part_resize(q, 100 * BS) == 0);
	CU_ASSERT_EQUAL(sql_int(t.db, "SELECT count(*) FROM hole WHERE chunk > 0"), 0);
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	state(p, 12, s);
	CU_ASSERT_STRING_EQUAL(s, "ddd..d......");
	/* Fully written chunks keep no row. */
	set(t.pool, p, 0, 12, true);
	CU_ASSERT_EQUAL(sql_int(t.db, "SELECT count(*) FROM hole WHERE part = (SELECT id FROM "
				"part WHERE name = 'p')"), 0);
	CU_ASSERT_FATAL(cw_part_delete(p) == 0);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p2", 3 * BS, NULL, &p) == 0);
	state(p, 3, s);
	CU_ASSERT_STRING_EQUAL(s, "...");
	tp_fini(&t);
}

/* A pool from before holes were kept: every block reads as written. */
static void test_migrate_from_schema_3(void)
{
	uint64_t nb[] = { 64 };
	struct cw_part *p;
	char s[16];
	struct tp t;

	tp_pool(&t, BS, 1, nb, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "old", 4 * BS, NULL, &p) == 0);
	cw_pool_close(t.pool);
	t.pool = NULL;
	sql_run(t.db, "ALTER TABLE resv DROP COLUMN due; ALTER TABLE resv DROP COLUMN move;"
		      " ALTER TABLE resv_disk DROP COLUMN copy;"
		      " DROP TABLE cache_block; DROP TABLE cache_slot; ALTER TABLE part DROP COLUMN cache_mode;"
		      " ALTER TABLE part DROP COLUMN cache_bytes;"
		      " DROP TABLE move_block; DROP TABLE move; ALTER TABLE part DROP COLUMN tier_fallback;"
		      " DROP TABLE disk_emulate; DROP TABLE hole; DROP TABLE be_qos;"
		      " PRAGMA user_version = 3");
	tp_reopen(&t);
	CU_ASSERT(sql_int(t.db, "PRAGMA user_version") == META_SCHEMA_VERSION);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "old", &p) == 0);
	state(p, 4, s);
	CU_ASSERT_STRING_EQUAL(s, "dddd");
	tp_fini(&t);
}

/*
 * A child flips random ranges of a partition and reports each change done
 * on a pipe; it is killed with SIGKILL at a random moment.  The reopened
 * pool shows the state after the last change reported, or after the next.
 */
#define NB 200
#define CHANGES 400

static void child(struct tp *t, int fd, unsigned seed)
{
	struct cw_part *p;

	if (cw_part_lookup(t->pool, "c", &p) < 0)
		_exit(2);
	for (int i = 0; i < CHANGES; i++) {
		struct cw_alloc_change c = { .part = p };
		uint8_t b = 1;

		c.first_block = (uint64_t)rand_r(&seed) % NB;
		c.nblocks = 1 + (uint64_t)rand_r(&seed) % (NB - c.first_block);
		c.allocated = rand_r(&seed) & 1;
		if (cw_part_set_allocated(t->pool, &c, 1) < 0)
			_exit(3);
		if (write(fd, &b, 1) != 1)
			_exit(4);
	}
	_exit(0);
}

static void apply(char *m, unsigned *seed)
{
	uint64_t first = (uint64_t)rand_r(seed) % NB, n = 1 + (uint64_t)rand_r(seed) % (NB - first);
	bool data = rand_r(seed) & 1;

	memset(m + first, data ? 'd' : '.', n);
}

static void test_kill9(void)
{
	uint64_t nb[] = { 400 };
	struct cw_part *p;
	struct tp t;
	int runs;

	tp_pool(&t, BS, 1, nb, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "c", NB * BS, NULL, &p) == 0);
	for (runs = 0; runs < 20; runs++) {
		unsigned seed = 1000 + (unsigned)runs, ms = seed;
		char before[NB + 1], after[NB + 1], got[NB + 1];
		struct timespec ts = { 0, (long)(rand_r(&ms) % 30) * 1000000L };
		int fds[2], status, done = 0;
		uint8_t b;
		pid_t pid;

		state(p, NB, before);
		CU_ASSERT_FATAL(pipe(fds) == 0);
		cw_pool_close(t.pool);
		t.pool = NULL;
		pid = fork();
		CU_ASSERT_FATAL(pid >= 0);
		if (pid == 0) {
			close(fds[0]);
			tp_reopen(&t);
			child(&t, fds[1], seed);
		}
		close(fds[1]);
		nanosleep(&ts, NULL);
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		while (read(fds[0], &b, 1) == 1)
			done++;
		close(fds[0]);
		tp_reopen(&t);
		CU_ASSERT_FATAL(cw_part_lookup(t.pool, "c", &p) == 0);
		/* The model: the changes the child reported, then one more. */
		{
			unsigned s2 = seed;

			for (int i = 0; i < done; i++)
				apply(before, &s2);
			memcpy(after, before, sizeof(after));
			if (done < CHANGES)
				apply(after, &s2);
		}
		state(p, NB, got);
		CU_ASSERT(strcmp(got, before) == 0 || strcmp(got, after) == 0);
	}
	tp_fini(&t);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("holes", NULL, NULL);

	cwtest_add(s, "holes until written, runs, reopen, resize", test_basics);
	cwtest_add(s, "migration from schema 3", test_migrate_from_schema_3);
	cwtest_add(s, "kill -9 while recording", test_kill9);
	return cwtest_run();
}
