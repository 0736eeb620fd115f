/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: a crash during a metadata change leaves the old state or the
 * new one.  100 times, a child process runs a deterministic random series
 * of creates, resizes, deletes, renames and moves on a real pool and is
 * killed with SIGKILL — half the time between two sqlite statements chosen
 * at random (a statement trace that raises SIGKILL), half the time after a
 * random delay.  Each time the pool must reopen (the open verifies that no
 * block is owned twice and that the free maps agree), the free counts must
 * add up, and the partitions must be exactly those after the last change
 * the child reported done, or after the one it was making.
 */
#include "config.h"

#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <time.h>

#include "pooltest.h"

#define ITERATIONS 100
#define NPARTS 4
#define MAXB 60
#define OPS 40

struct model {
	bool present[NPARTS];
	uint64_t nblocks[NPARTS];
};

enum { OP_CREATE, OP_RESIZE, OP_DELETE, OP_RENAME, OP_MOVE };

struct op {
	int kind;
	int a, b;
	uint64_t n, first, count;
	int placement, zone, tier;
};

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* The next operation; depends only on the generator and the model, so the
 * parent can replay what the child did. */
static struct op next_op(uint64_t *x, const struct model *m)
{
	struct op op = { .a = (int)(rnd(x) % NPARTS) };
	unsigned r = (unsigned)(rnd(x) % 10);

	if (!m->present[op.a]) {
		op.kind = OP_CREATE;
		op.n = rnd(x) % (MAXB + 1);
		op.placement = (int)(rnd(x) % 3);
		op.zone = (int)(rnd(x) % 3);
		return op;
	}
	if (r < 2 || (r >= 7 && m->nblocks[op.a] == 0)) {
		op.kind = OP_RESIZE;
		op.n = rnd(x) % (MAXB + 1);
	} else if (r < 4) {
		op.kind = OP_DELETE;
	} else if (r < 7) {
		op.kind = OP_RENAME;
		op.b = (int)(rnd(x) % NPARTS);
		if (m->present[op.b]) {
			op.kind = OP_RESIZE;
			op.n = rnd(x) % (MAXB + 1);
		}
	} else {
		op.kind = OP_MOVE;
		op.first = rnd(x) % m->nblocks[op.a];
		op.count = 1 + rnd(x) % (m->nblocks[op.a] - op.first);
		op.tier = rnd(x) % 2 ? CW_TIER_PREF_SSD : CW_TIER_PREF_HDD;
	}
	return op;
}

static void model_apply(struct model *m, const struct op *op)
{
	switch (op->kind) {
	case OP_CREATE:
		m->present[op->a] = true;
		m->nblocks[op->a] = op->n;
		break;
	case OP_RESIZE:
		m->nblocks[op->a] = op->n;
		break;
	case OP_DELETE:
		m->present[op->a] = false;
		m->nblocks[op->a] = 0;
		break;
	case OP_RENAME:
		m->present[op->b] = true;
		m->nblocks[op->b] = m->nblocks[op->a];
		m->present[op->a] = false;
		m->nblocks[op->a] = 0;
		break;
	default:
		break;
	}
}

static int pool_apply(struct cw_pool *pool, const struct op *op)
{
	char name[32], other[32];
	struct cw_part *p = NULL;
	struct cw_move *mv;
	int r;

	snprintf(name, sizeof(name), "p%d", op->a);
	snprintf(other, sizeof(other), "p%d", op->b);
	if (op->kind == OP_CREATE) {
		struct cw_part_opts o = { .placement = (enum cw_placement)op->placement,
					  .zone = (enum cw_zone_pref)op->zone };

		return cw_part_create(pool, name, op->n * TP_BS, &o, &p);
	}
	r = cw_part_lookup(pool, name, &p);
	if (r < 0)
		return r;
	switch (op->kind) {
	case OP_RESIZE:
		return cw_part_resize(p, op->n * TP_BS);
	case OP_DELETE:
		return cw_part_delete(p);
	case OP_RENAME:
		return cw_part_rename(p, other);
	default: {
		struct cw_move_opts mo = { .placement = CW_PLACE_ROTATION,
					   .tier = (enum cw_tier_pref)op->tier };

		r = cw_move_plan(p, op->first, op->count, &mo, &mv);
		if (r == -ENOSPC)
			return 0;	/* a full tier: nothing changes */
		if (r < 0)
			return r;
		return cw_move_commit(mv);
	}
	}
}

static void model_read(struct cw_pool *pool, struct model *m)
{
	struct cw_part_info *v;
	size_t n;

	memset(m, 0, sizeof(*m));
	CU_ASSERT_FATAL(cw_part_list(pool, &v, &n) == 0);
	for (size_t i = 0; i < n; i++) {
		int k = v[i].name[0] == 'p' ? v[i].name[1] - '0' : -1;

		CU_ASSERT_FATAL(k >= 0 && k < NPARTS && v[i].name[2] == '\0');
		CU_ASSERT_FATAL(!m->present[k]);
		m->present[k] = true;
		m->nblocks[k] = v[i].nblocks;
		CU_ASSERT(v[i].available);
	}
	free(v);
}

static long statements_left;

static int trace_stmt(unsigned type, void *ctx, void *p, void *x)
{
	if (--statements_left == 0)
		raise(SIGKILL);
	return 0;
}

static int install_trace(sqlite3 *db, char **err, const void *api)
{
	sqlite3_trace_v2(db, SQLITE_TRACE_STMT, trace_stmt, NULL);
	return SQLITE_OK;
}

static void child(const char *db, uint64_t seed, long kill_after, int wfd)
{
	struct cw_pool *pool;
	struct model m;
	uint64_t x = seed;

	if (kill_after > 0) {
		statements_left = kill_after;
		sqlite3_auto_extension((void (*)(void))install_trace);
	}
	if (cw_pool_open(db, NULL, &pool) < 0)
		_exit(3);
	model_read(pool, &m);
	if (write(wfd, "R", 1) != 1)
		_exit(5);
	for (int i = 0; i < OPS; i++) {
		struct op op = next_op(&x, &m);

		if (pool_apply(pool, &op) < 0)
			_exit(4);
		model_apply(&m, &op);
		if (write(wfd, "D", 1) != 1)
			_exit(5);
	}
	cw_pool_close(pool);
	_exit(0);
}

static bool model_eq(const struct model *a, const struct model *b)
{
	for (int i = 0; i < NPARTS; i++)
		if (a->present[i] != b->present[i] || a->nblocks[i] != b->nblocks[i])
			return false;
	return true;
}

static void test_crash(void)
{
	static const enum cw_tier tiers[] = { CW_TIER_HDD, CW_TIER_HDD, CW_TIER_SSD };
	static const uint64_t sizes[] = { 401, 401, 401 };
	uint64_t x = (uint64_t)time(NULL) | 1;
	unsigned killed = 0, between = 0;
	struct tp t;

	tp_pool(&t, TP_BS, 3, sizes, tiers);
	for (int it = 0; it < ITERATIONS; it++) {
		struct model start, now, expect;
		uint64_t seed = rnd(&x) | 1, y;
		long kill_after = it % 2 ? 0 : (long)(1 + rnd(&x) % 300);
		int fds[2], status;
		unsigned done = 0;
		char c;
		pid_t pid;

		model_read(t.pool, &start);
		tp_check_totals(t.pool, 0);
		cw_pool_close(t.pool);
		t.pool = NULL;

		CU_ASSERT_FATAL(pipe(fds) == 0);
		pid = fork();
		CU_ASSERT_FATAL(pid >= 0);
		if (pid == 0) {
			close(fds[0]);
			child(t.db, seed, kill_after, fds[1]);
		}
		close(fds[1]);
		if (!kill_after) {
			struct timespec ts = { 0, (long)(rnd(&x) % 60000) * 1000 };

			/* Once it runs, let it get a random way in. */
			if (read(fds[0], &c, 1) == 1) {
				nanosleep(&ts, NULL);
				kill(pid, SIGKILL);
			}
		}
		while (read(fds[0], &c, 1) == 1)
			done += c == 'D';
		close(fds[0]);
		CU_ASSERT_FATAL(waitpid(pid, &status, 0) == pid);
		/* Killed, or it finished every operation. */
		CU_ASSERT_FATAL((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
				(WIFEXITED(status) && WEXITSTATUS(status) == 0));
		killed += WIFSIGNALED(status);
		between += WIFSIGNALED(status) && kill_after > 0;

		tp_reopen(&t);
		model_read(t.pool, &now);
		tp_check_totals(t.pool, 0);
		/* Replay: the state after `done` operations, or one more. */
		expect = start;
		y = seed;
		for (unsigned i = 0; i < done; i++) {
			struct op op = next_op(&y, &expect);

			model_apply(&expect, &op);
		}
		if (!model_eq(&now, &expect) && done < OPS) {
			struct op op = next_op(&y, &expect);

			model_apply(&expect, &op);
		}
		CU_ASSERT_FATAL(model_eq(&now, &expect));
	}
	/* The test must really have crashed the child, both ways. */
	CU_ASSERT(killed >= ITERATIONS / 2);
	CU_ASSERT(between >= ITERATIONS / 4);
	tp_fini(&t);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("crash", NULL, NULL);

	cwtest_add(s, "SIGKILL during metadata changes", test_crash);
	return cwtest_run();
}
