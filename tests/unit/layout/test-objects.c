/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: reservations and exports in the pool database
 * (clockwise/pool-objects.h) on real sqlite files: the round trip across
 * reopen with ids never reused, every refusal changing nothing, the rules
 * that keep a held partition, disk or reservation from going, the
 * migration of a schema-2 database, the read-only model look-up beside an
 * open pool, and a crash in the middle of storing a reservation leaving it
 * whole or absent.
 */
#include "config.h"

#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <clockwise/model.h>
#include <clockwise/pool-objects.h>

#include "meta/meta-internal.h"
#include "pooltest.h"

static const uint64_t three[] = { 64, 64, 64 };

static struct cw_part *make_part(struct tp *t, const char *name, uint64_t nblocks)
{
	struct cw_part *p;

	CU_ASSERT_FATAL(cw_part_create(t->pool, name, nblocks * TP_BS, NULL, &p) == 0);
	return p;
}

static uint64_t part_id(struct cw_part *p)
{
	struct cw_part_info pi;

	CU_ASSERT_FATAL(cw_part_info(p, &pi) == 0);
	return pi.id;
}

/* A reservation over the first half of the partition, with a part on each
 * of disks 1 and 2; distinct numbers so that a swapped column shows. */
static struct cw_resv_disk two_parts[] = {
	{ .disk_id = 1, .period_ns = 40000000, .service_ns = 9000001, .from_ns = 1000,
	  .to_ns = 2000, .requests = 17, .stride = 2 },
	{ .disk_id = 2, .period_ns = 40000002, .service_ns = 9000003, .from_ns = 1001,
	  .to_ns = 2001, .requests = 16, .stride = 3 },
};

static struct cw_resv_rec resv_on(uint64_t pid)
{
	return (struct cw_resv_rec){
		.part_id = pid, .rate_bps = 25000000, .block_bytes = 1000000,
		.range_start_bytes = 4096, .range_end_bytes = 10 * TP_BS,
		.start_ns = 1700000000000000000, .end_ns = 1700000060000000000,
		.period_ns = 40000000, .n_disks = 2, .disks = two_parts,
	};
}

static void assert_same_resv(const struct cw_resv_rec *a, const struct cw_resv_rec *b)
{
	CU_ASSERT(a->part_id == b->part_id);
	CU_ASSERT(a->rate_bps == b->rate_bps);
	CU_ASSERT(a->block_bytes == b->block_bytes);
	CU_ASSERT(a->range_start_bytes == b->range_start_bytes);
	CU_ASSERT(a->range_end_bytes == b->range_end_bytes);
	CU_ASSERT(a->start_ns == b->start_ns);
	CU_ASSERT(a->end_ns == b->end_ns);
	CU_ASSERT(a->period_ns == b->period_ns);
	CU_ASSERT_FATAL(a->n_disks == b->n_disks);
	for (size_t i = 0; i < a->n_disks; i++) {
		const struct cw_resv_disk *x = &a->disks[i], *y = &b->disks[i];

		CU_ASSERT(x->disk_id == y->disk_id && x->period_ns == y->period_ns &&
			  x->service_ns == y->service_ns && x->from_ns == y->from_ns &&
			  x->to_ns == y->to_ns && x->requests == y->requests &&
			  x->stride == y->stride);
	}
}

static void test_round_trip(void)
{
	struct tp t;
	struct cw_resv_rec want, *list = NULL;
	/* (scratch a ublk device's: its settings and number come back too) */
	struct cw_export_rec e1 = { .name = "movie", .readonly = true, .ublk_dev = -1 },
			     e2 = { .name = "scratch", .ublk = true, .ublk_depth = 32,
				    .ublk_max_request = 1 << 20, .ublk_dev = 3 };
	struct cw_export_rec *ex = NULL;
	uint64_t pid, id1, id2, id3, id4;
	size_t n;

	tp_pool(&t, TP_BS, 3, three, NULL);
	pid = part_id(make_part(&t, "media", 20));
	want = resv_on(pid);
	CU_ASSERT_FATAL(cw_resv_add(t.pool, &want, &id1) == 0);
	want.n_disks = 0;	/* a reservation may touch no disk worth a task */
	want.start_ns = want.end_ns = 0;
	want.due = 1;	/* due a stream period (enum cw_admit_due) */
	CU_ASSERT_FATAL(cw_resv_add(t.pool, &want, &id2) == 0);
	CU_ASSERT(id1 >= 1 && id2 > id1);
	e1.part_id = e2.part_id = pid;
	e1.resv_id = id1;
	CU_ASSERT_FATAL(cw_export_add(t.pool, &e1) == 0);
	CU_ASSERT_FATAL(cw_export_add(t.pool, &e2) == 0);

	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_resv_list(t.pool, &list, &n) == 0);
	CU_ASSERT_FATAL(n == 2);
	CU_ASSERT(list[0].id == id1 && list[1].id == id2);
	want = resv_on(pid);
	assert_same_resv(&list[0], &want);
	want.n_disks = 0;
	want.start_ns = want.end_ns = 0;
	want.due = 1;
	assert_same_resv(&list[1], &want);
	CU_ASSERT(list[0].due == 0 && list[1].due == 1);
	cw_resv_list_free(list, n);

	CU_ASSERT_FATAL(cw_export_list(t.pool, &ex, &n) == 0);
	CU_ASSERT_FATAL(n == 2);
	CU_ASSERT(memcmp(&ex[0], &e1, sizeof(e1)) == 0);	/* name order */
	CU_ASSERT(memcmp(&ex[1], &e2, sizeof(e2)) == 0);
	free(ex);

	/* Ids are never reused, not even the highest one after a reopen. */
	CU_ASSERT_FATAL(cw_resv_remove(t.pool, id2) == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM resv_disk") == 2);
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_resv_add(t.pool, &want, &id3) == 0);
	CU_ASSERT(id3 > id2);
	CU_ASSERT_FATAL(cw_export_remove(t.pool, "movie") == 0);
	CU_ASSERT_FATAL(cw_resv_remove(t.pool, id1) == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM resv_disk") == 0);	/* parts go along */
	want = resv_on(pid);
	CU_ASSERT_FATAL(cw_resv_add(t.pool, &want, &id4) == 0);
	CU_ASSERT(id4 > id3);
	CU_ASSERT_FATAL(cw_export_list(t.pool, &ex, &n) == 0);
	CU_ASSERT(n == 1 && strcmp(ex[0].name, "scratch") == 0 && !ex[0].readonly &&
		  ex[0].resv_id == 0);
	free(ex);
	tp_fini(&t);
}

/* Every refusal: the code, a reason, and nothing stored. */
static void test_refusals(void)
{
	struct tp t;
	struct cw_resv_rec r;
	struct cw_resv_disk bad[2];
	struct cw_export_rec e = { .name = "x" };
	uint64_t p1, p2, id, unused = 0;

	tp_pool(&t, TP_BS, 3, three, NULL);
	p1 = part_id(make_part(&t, "one", 20));
	p2 = part_id(make_part(&t, "two", 4));

	r = resv_on(p1 + p2 + 7);
	CU_ASSERT(cw_resv_add(t.pool, &r, &unused) == -ENOENT);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "no partition") != NULL);
	r = resv_on(p1);
	r.rate_bps = 0;
	CU_ASSERT(cw_resv_add(t.pool, &r, &unused) == -EINVAL);
	r = resv_on(p1);
	r.block_bytes = 0;
	CU_ASSERT(cw_resv_add(t.pool, &r, &unused) == -EINVAL);
	r = resv_on(p2);	/* 10 blocks of range on a 4-block partition */
	CU_ASSERT(cw_resv_add(t.pool, &r, &unused) == -EINVAL);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "not inside") != NULL);
	r = resv_on(p1);
	r.range_start_bytes = r.range_end_bytes;
	CU_ASSERT(cw_resv_add(t.pool, &r, &unused) == -EINVAL);
	memcpy(bad, two_parts, sizeof(bad));
	bad[1].disk_id = 9;
	r = resv_on(p1);
	r.disks = bad;
	CU_ASSERT(cw_resv_add(t.pool, &r, &unused) == -ENOENT);
	bad[1].disk_id = 1;
	CU_ASSERT(cw_resv_add(t.pool, &r, &unused) == -EINVAL);
	bad[1].disk_id = 2;
	bad[1].service_ns = 0;
	CU_ASSERT(cw_resv_add(t.pool, &r, &unused) == -EINVAL);
	r = resv_on(p1);
	r.due = 2;
	CU_ASSERT(cw_resv_add(t.pool, &r, &unused) == -EINVAL);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "deadline rule") != NULL);
	CU_ASSERT(unused == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM resv") == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM resv_disk") == 0);
	CU_ASSERT(cw_resv_remove(t.pool, 1) == -ENOENT);

	r = resv_on(p1);
	CU_ASSERT_FATAL(cw_resv_add(t.pool, &r, &id) == 0);
	e.part_id = p1 + p2 + 7;
	CU_ASSERT(cw_export_add(t.pool, &e) == -ENOENT);
	e.part_id = p2;
	e.resv_id = id;		/* on partition one, not two */
	CU_ASSERT(cw_export_add(t.pool, &e) == -EINVAL);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "another partition") != NULL);
	e.part_id = p1;
	e.resv_id = id + 100;
	CU_ASSERT(cw_export_add(t.pool, &e) == -ENOENT);
	e.resv_id = 0;
	snprintf(e.name, sizeof(e.name), "-bad");
	CU_ASSERT(cw_export_add(t.pool, &e) == -EINVAL);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM export") == 0);
	snprintf(e.name, sizeof(e.name), "x");
	CU_ASSERT_FATAL(cw_export_add(t.pool, &e) == 0);
	e.part_id = p2;
	CU_ASSERT(cw_export_add(t.pool, &e) == -EEXIST);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "exists") != NULL);
	CU_ASSERT(sql_int(t.db, "SELECT part FROM export WHERE name = 'x'") == (int64_t)p1);
	CU_ASSERT(cw_export_remove(t.pool, "nothing") == -ENOENT);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM export") == 1);
	tp_fini(&t);
}

/* A partition with a reservation or an export, a reservation with an
 * export, a disk with a reservation's part: each refuses to go with
 * -EBUSY and says who holds it; once released they go. */
static void test_busy_rules(void)
{
	struct tp t;
	struct cw_resv_rec r;
	struct cw_export_rec e = { .name = "held" };
	struct cw_part *p, *q;
	uint64_t id, id3;

	tp_pool(&t, TP_BS, 3, three, NULL);
	p = make_part(&t, "media", 20);
	r = resv_on(part_id(p));
	CU_ASSERT_FATAL(cw_resv_add(t.pool, &r, &id) == 0);
	CU_ASSERT(cw_part_delete(p) == -EBUSY);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "reservation") != NULL);
	e.part_id = part_id(p);
	e.resv_id = id;
	CU_ASSERT_FATAL(cw_export_add(t.pool, &e) == 0);
	CU_ASSERT(cw_resv_remove(t.pool, id) == -EBUSY);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "held") != NULL);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM resv") == 1);

	q = make_part(&t, "other", 4);
	r = resv_on(part_id(q));
	r.range_end_bytes = TP_BS;
	CU_ASSERT_FATAL(cw_resv_add(t.pool, &r, &id3) == 0);

	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "media", &p) == 0);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "other", &q) == 0);
	CU_ASSERT(cw_part_delete(p) == -EBUSY);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "export held") != NULL);
	CU_ASSERT(cw_part_delete(q) == -EBUSY);
	CU_ASSERT_FATAL(cw_resv_remove(t.pool, id3) == 0);
	CU_ASSERT_FATAL(cw_part_delete(q) == 0);
	CU_ASSERT_FATAL(cw_export_remove(t.pool, "held") == 0);
	CU_ASSERT(cw_part_delete(p) == -EBUSY);		/* the reservation still holds it */
	CU_ASSERT_FATAL(cw_resv_remove(t.pool, id) == 0);
	CU_ASSERT_FATAL(cw_part_delete(p) == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM part") == 0);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

/* cw_disk_remove of an empty disk some reservation still has a part on. */
static void test_disk_held_by_resv(void)
{
	static const enum cw_tier tiers[] = { CW_TIER_HDD, CW_TIER_HDD, CW_TIER_SSD };
	struct tp t;
	struct cw_part_opts o = { .placement = CW_PLACE_ROTATION, .tier = CW_TIER_PREF_HDD };
	struct cw_resv_disk on3 = two_parts[0];
	struct cw_resv_rec r;
	struct cw_part *p;
	uint64_t id;

	tp_pool(&t, TP_BS, 3, three, tiers);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "hdds", 8 * TP_BS, &o, &p) == 0);
	on3.disk_id = 3;	/* as if admitted while a block lay there */
	r = resv_on(part_id(p));
	r.range_end_bytes = 8 * TP_BS;
	r.n_disks = 1;
	r.disks = &on3;
	CU_ASSERT_FATAL(cw_resv_add(t.pool, &r, &id) == 0);
	CU_ASSERT(cw_disk_remove(t.pool, 3) == -EBUSY);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "reservation") != NULL);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM disk") == 3);
	CU_ASSERT_FATAL(cw_resv_remove(t.pool, id) == 0);
	CU_ASSERT(cw_disk_remove(t.pool, 3) == 0);
	tp_fini(&t);
}

static void test_migrate_from_schema_2(void)
{
	struct tp t;
	struct cw_resv_rec r, *list;
	struct cw_part *p;
	uint64_t id;
	size_t n;

	tp_pool(&t, TP_BS, 3, three, NULL);
	make_part(&t, "old", 12);
	cw_pool_close(t.pool);
	t.pool = NULL;
	/* Back to what schema 2 had: no reservations or exports. */
	sql_run(t.db, "DROP TABLE cache_block; DROP TABLE cache_slot; ALTER TABLE part DROP COLUMN cache_mode;"
		      " ALTER TABLE part DROP COLUMN cache_bytes;"
		      " DROP TABLE move_block; DROP TABLE move; ALTER TABLE part DROP COLUMN tier_fallback;"
		      " DROP TABLE disk_emulate; DROP TABLE hole; DROP TABLE be_qos; DROP TABLE export;"
		      " DROP TABLE resv_disk; DROP TABLE resv; PRAGMA user_version = 2");
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM sqlite_master WHERE name = 'resv'") == 0);
	tp_reopen(&t);
	CU_ASSERT(sql_int(t.db, "PRAGMA user_version") == META_SCHEMA_VERSION);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "old", &p) == 0);
	CU_ASSERT_FATAL(cw_resv_list(t.pool, &list, &n) == 0);
	CU_ASSERT(n == 0);
	cw_resv_list_free(list, n);
	r = resv_on(part_id(p));
	CU_ASSERT_FATAL(cw_resv_add(t.pool, &r, &id) == 0);
	CU_ASSERT(cw_part_delete(p) == -EBUSY);		/* the new rules hold */
	tp_fini(&t);
}

static void test_read_disk_model(void)
{
	struct tp t;
	struct cw_model m, got;
	struct cw_error err;
	bool calibrated = false;
	char junk[160];
	size_t len1, len2;
	char *before, *after;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_model_preset("atlas2", &m) == 0);
	CU_ASSERT_FATAL(cw_disk_model_set(t.pool, 2, &m, true) == 0);
	/* Beside the open, locked pool. */
	memset(&got, 0, sizeof(got));
	CU_ASSERT(cw_pool_read_disk_model(t.db, "disk2", &got, &calibrated, &err) == 0);
	CU_ASSERT(calibrated);
	CU_ASSERT(memcmp(&got, &m, sizeof(m)) == 0);
	CU_ASSERT(cw_pool_read_disk_model(t.db, "disk1", &got, NULL, &err) == -ENOENT);
	CU_ASSERT(strstr(err.msg, "no stored model") != NULL);
	CU_ASSERT(cw_pool_read_disk_model(t.db, "disk9", &got, NULL, &err) == -ENOENT);
	CU_ASSERT(strstr(err.msg, "no disk named") != NULL);
	cw_pool_close(t.pool);
	t.pool = NULL;

	/* Closed: still readable, and the file is left as it was. */
	before = tp_slurp(t.db, &len1);
	CU_ASSERT(cw_pool_read_disk_model(t.db, "disk2", &got, NULL, NULL) == 0);
	after = tp_slurp(t.db, &len2);
	CU_ASSERT(len1 == len2 && memcmp(before, after, len1) == 0);
	free(before);
	free(after);

	sql_run(t.db, "UPDATE disk_model SET model = 'cwmodel1 nonsense=1'");
	CU_ASSERT(cw_pool_read_disk_model(t.db, "disk2", &got, NULL, &err) == -EUCLEAN);
	tp_path(&t, "nothing.db", junk, sizeof(junk));
	CU_ASSERT(cw_pool_read_disk_model(junk, "disk2", &got, NULL, &err) == -ENOENT);
	CU_ASSERT(access(junk, F_OK) != 0);	/* not created */
	tp_path(&t, "d1.img", junk, sizeof(junk));	/* not a database */
	CU_ASSERT(cw_pool_read_disk_model(junk, "disk2", &got, NULL, &err) == -EUCLEAN);
	CU_ASSERT(cw_pool_read_disk_model(t.db, NULL, &got, NULL, &err) == -EINVAL);
	CU_ASSERT_FATAL(cw_pool_open(t.db, &err, &t.pool) == 0);	/* no lock was left */
	tp_fini(&t);
}

/* ---- crash while storing ---- */

#define CRASH_RUNS 20
#define CRASH_ADDS 30

static int kill_after;

static int trace_kill(unsigned type, void *ctx, void *p, void *x)
{
	(void)type, (void)ctx, (void)p, (void)x;
	if (--kill_after == 0)
		raise(SIGKILL);
	return 0;
}

static int install_trace(sqlite3 *db, char **err, const void *api)
{
	(void)err, (void)api;
	sqlite3_trace_v2(db, SQLITE_TRACE_STMT, trace_kill, NULL);
	return SQLITE_OK;
}

/* A child adds reservations of 1 + i % 3 parts, telling the parent the
 * count after each commit, and dies at a random sqlite statement. */
static void test_crash_leaves_whole_resvs(void)
{
	uint64_t x = 0x9e3779b97f4a7c15;

	for (int run = 0; run < CRASH_RUNS; run++) {
		struct tp t;
		struct cw_resv_rec r, *list;
		struct cw_resv_disk parts[3];
		int fds[2], status, done = 0, got;
		size_t n;
		pid_t pid;

		tp_pool(&t, TP_BS, 3, three, NULL);
		r = resv_on(part_id(make_part(&t, "media", 20)));
		cw_pool_close(t.pool);
		t.pool = NULL;
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		CU_ASSERT_FATAL(pipe(fds) == 0);
		pid = fork();
		CU_ASSERT_FATAL(pid >= 0);
		if (pid == 0) {
			struct cw_error err;
			uint64_t id;

			close(fds[0]);
			sqlite3_auto_extension((void (*)(void))install_trace);
			kill_after = 1 + (int)(x % (CRASH_ADDS * 8));
			if (cw_pool_open(t.db, &err, &t.pool) < 0)
				_exit(3);
			for (int i = 0; i < CRASH_ADDS; i++) {
				r.n_disks = 1 + (size_t)i % 3;
				for (size_t k = 0; k < r.n_disks; k++) {
					parts[k] = two_parts[0];
					parts[k].disk_id = (uint32_t)k + 1;
				}
				r.disks = parts;
				if (cw_resv_add(t.pool, &r, &id) < 0)
					_exit(4);
				if (write(fds[1], &i, sizeof(i)) != sizeof(i))
					_exit(5);
			}
			_exit(0);
		}
		close(fds[1]);
		while (read(fds[0], &got, sizeof(got)) == sizeof(got))
			done = got + 1;
		close(fds[0]);
		CU_ASSERT_FATAL(waitpid(pid, &status, 0) == pid);
		/* Killed, or (rarely, a late statement) done with every add. */
		CU_ASSERT((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
			  (WIFEXITED(status) && WEXITSTATUS(status) == 0 && done == CRASH_ADDS));
		tp_reopen(&t);
		CU_ASSERT_FATAL(cw_resv_list(t.pool, &list, &n) == 0);
		CU_ASSERT(n == (size_t)done || n == (size_t)done + 1);
		for (size_t i = 0; i < n; i++)
			CU_ASSERT(list[i].n_disks == 1 + i % 3);
		cw_resv_list_free(list, n);
		tp_fini(&t);
	}
}

int main(void)
{
	CU_pSuite s;

	s = cwtest_suite("reservations and exports", NULL, NULL);
	cwtest_add(s, "round trip across reopen", test_round_trip);
	cwtest_add(s, "refusals change nothing", test_refusals);
	cwtest_add(s, "held partitions and reservations", test_busy_rules);
	cwtest_add(s, "held disk", test_disk_held_by_resv);
	cwtest_add(s, "migration from schema 2", test_migrate_from_schema_2);
	cwtest_add(s, "read-only model look-up", test_read_disk_model);
	cwtest_add(s, "crash while storing", test_crash_leaves_whole_resvs);
	return cwtest_run();
}
