/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: the sqlite store — pragmas of every connection (WAL,
 * foreign keys, synchronous=FULL), schema versions and migrations that
 * commit whole or not at all, transactions, the statement cache, the lock
 * against a second process, and error codes.
 */
#include "config.h"

#include "meta/meta.c"	/* private module, reached directly */
#include "layout/pooltest.h"

static int64_t q(struct meta *m, const char *sql)
{
	sqlite3_stmt *s;
	int64_t v = -1;

	CU_ASSERT_FATAL(sqlite3_prepare_v2(m->db, sql, -1, &s, NULL) == SQLITE_OK);
	if (sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return v;
}

static void test_create_pragmas(void)
{
	struct tp t;
	struct meta *m, *m2;
	struct cw_error err;

	tp_init(&t);
	CU_ASSERT_FATAL(meta_create(t.db, &err, &m) == 0);
	CU_ASSERT(q(m, "PRAGMA user_version") == META_SCHEMA_VERSION);
	CU_ASSERT(q(m, "SELECT journal_mode = 'wal' FROM pragma_journal_mode") == 1);
	CU_ASSERT(q(m, "PRAGMA foreign_keys") == 1);
	CU_ASSERT(q(m, "PRAGMA synchronous") == 2);	/* FULL */
	CU_ASSERT(q(m, "SELECT count(*) FROM sqlite_master WHERE type = 'table'") == 25);	/* with sqlite_sequence */
	CU_ASSERT(meta_size_bytes(t.db) > 0);
	/* One process at a time. */
	CU_ASSERT(meta_open(t.db, &err, &m2) == -EBUSY);
	CU_ASSERT(meta_create(t.db, &err, &m2) == -EEXIST);
	meta_close(m);
	CU_ASSERT_FATAL(meta_open(t.db, &err, &m) == 0);
	CU_ASSERT(q(m, "PRAGMA foreign_keys") == 1);
	CU_ASSERT(q(m, "PRAGMA synchronous") == 2);
	meta_close(m);
	tp_fini(&t);
}

static void test_migration_atomic(void)
{
	struct tp t;
	struct meta *m;
	struct cw_error err;

	tp_init(&t);
	/* A database whose first migration cannot apply (a table in the
	 * way): the migration fails as a whole, nothing half-made remains. */
	CU_ASSERT_FATAL(meta_new(t.db, true, &err, &m) == 0);
	CU_ASSERT_FATAL(sqlite3_exec(m->db, "CREATE TABLE run (x)", NULL, NULL, NULL) == SQLITE_OK);
	CU_ASSERT(migrate(m, 0, &err) < 0);
	CU_ASSERT(strstr(err.msg, "schema migration") != NULL);
	CU_ASSERT(q(m, "PRAGMA user_version") == 0);
	CU_ASSERT(q(m, "SELECT count(*) FROM sqlite_master WHERE name IN ('pool', 'disk', 'part')") == 0);
	/* Without the obstacle, version 0 migrates to the current one. */
	CU_ASSERT_FATAL(sqlite3_exec(m->db, "DROP TABLE run", NULL, NULL, NULL) == SQLITE_OK);
	CU_ASSERT(migrate(m, 0, &err) == 0);
	CU_ASSERT(q(m, "PRAGMA user_version") == META_SCHEMA_VERSION);
	CU_ASSERT(q(m, "SELECT count(*) FROM sqlite_master WHERE name IN ('pool', 'disk', 'part', 'run')") == 4);
	meta_close(m);
	tp_fini(&t);
}

/* 16 -> 17: a pool of schema 16 opens with copy_resync, empty, keyed by
 * (part, region) and gone with its partition. */
static void test_migration_17(void)
{
	struct tp t;
	struct meta *m;
	struct cw_error err;

	tp_init(&t);
	CU_ASSERT_FATAL(meta_create(t.db, &err, &m) == 0);
	CU_ASSERT_FATAL(sqlite3_exec(m->db, "DROP TABLE copy_resync; PRAGMA user_version = 16",
				     NULL, NULL, NULL) == SQLITE_OK);
	meta_close(m);
	CU_ASSERT_FATAL(meta_open(t.db, &err, &m) == 0);
	CU_ASSERT(q(m, "PRAGMA user_version") == 17);
	CU_ASSERT(q(m, "SELECT count(*) FROM sqlite_master WHERE type = 'table'") == 25);
	CU_ASSERT(q(m, "SELECT count(*) FROM copy_resync") == 0);
	CU_ASSERT_FATAL(sqlite3_exec(m->db,
		"INSERT INTO part (name, nblocks, placement, tier_pref, zone_pref)"
		"  VALUES ('p', 1, 0, 0, 0);"
		"INSERT INTO copy_resync (part, region, m1) VALUES (1, 3, -1)",
		NULL, NULL, NULL) == SQLITE_OK);
	CU_ASSERT(q(m, "SELECT m1 FROM copy_resync WHERE part = 1 AND region = 3") == -1);
	CU_ASSERT(q(m, "SELECT m0 + m2 FROM copy_resync") == 0);
	CU_ASSERT(sqlite3_exec(m->db, "INSERT INTO copy_resync (part, region) VALUES (1, 3)",
			       NULL, NULL, NULL) != SQLITE_OK);
	CU_ASSERT(sqlite3_exec(m->db, "INSERT INTO copy_resync (part, region) VALUES (1, -1)",
			       NULL, NULL, NULL) != SQLITE_OK);
	CU_ASSERT(sqlite3_exec(m->db, "INSERT INTO copy_resync (part, region) VALUES (9, 0)",
			       NULL, NULL, NULL) != SQLITE_OK);
	CU_ASSERT_FATAL(sqlite3_exec(m->db, "DELETE FROM part", NULL, NULL, NULL) == SQLITE_OK);
	CU_ASSERT(q(m, "SELECT count(*) FROM copy_resync") == 0);
	meta_close(m);
	tp_fini(&t);
}

static void test_transactions_and_keys(void)
{
	static const char ins_part[] =
		"INSERT INTO part (id, name, nblocks, placement, tier_pref, zone_pref) "
		"VALUES (?1, 'x' || ?1, 0, 0, 0, 0)";
	static const char ins_run[] =
		"INSERT INTO run (part, lstart, lend, count, stride, disk, pstart) "
		"VALUES (?1, 0, 0, 1, 1, ?2, 1)";
	struct tp t;
	struct meta *m;
	sqlite3_stmt *s1, *s2;

	tp_init(&t);
	CU_ASSERT_FATAL(meta_create(t.db, NULL, &m) == 0);
	CU_ASSERT_FATAL(meta_begin(m) == 0);
	CU_ASSERT(meta_exec(m, ins_part, 1, (int64_t)1) == 0);
	meta_rollback(m);
	CU_ASSERT(q(m, "SELECT count(*) FROM part") == 0);
	CU_ASSERT_FATAL(meta_begin(m) == 0);
	CU_ASSERT(meta_exec(m, ins_part, 1, (int64_t)1) == 0);
	CU_ASSERT(meta_commit(m) == 0);
	CU_ASSERT(q(m, "SELECT count(*) FROM part") == 1);
	/* A unique name twice, a run on no disk: refused by the schema. */
	CU_ASSERT(meta_exec(m, ins_part, 1, (int64_t)1) == -EEXIST);
	CU_ASSERT(meta_exec(m, ins_run, 2, (int64_t)1, (int64_t)9) == -EEXIST);
	CU_ASSERT(q(m, "SELECT count(*) FROM run") == 0);
	/* The statement cache hands back the same prepared statement. */
	CU_ASSERT_FATAL(meta_stmt(m, ins_part, &s1) == 0);
	CU_ASSERT_FATAL(meta_stmt(m, ins_part, &s2) == 0);
	CU_ASSERT(s1 == s2);
	CU_ASSERT(meta_stmt(m, "SELECT nonsense FROM nowhere", &s1) < 0);
	meta_close(m);
	tp_fini(&t);
}

static void test_errno_map(void)
{
	CU_ASSERT(meta_errno(SQLITE_OK) == 0);
	CU_ASSERT(meta_errno(SQLITE_DONE) == 0);
	CU_ASSERT(meta_errno(SQLITE_BUSY) == -EBUSY);
	CU_ASSERT(meta_errno(SQLITE_FULL) == -ENOSPC);
	CU_ASSERT(meta_errno(SQLITE_CORRUPT) == -EUCLEAN);
	CU_ASSERT(meta_errno(SQLITE_NOTADB) == -EUCLEAN);
	CU_ASSERT(meta_errno(SQLITE_CONSTRAINT_UNIQUE) == -EEXIST);
	CU_ASSERT(meta_errno(SQLITE_IOERR_FSYNC) == -EIO);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("meta", NULL, NULL);

	cwtest_add(s, "create, pragmas, lock", test_create_pragmas);
	cwtest_add(s, "migrations are atomic", test_migration_atomic);
	cwtest_add(s, "16 -> 17: copy_resync", test_migration_17);
	cwtest_add(s, "transactions, keys, statement cache", test_transactions_and_keys);
	cwtest_add(s, "sqlite codes as errno", test_errno_map);
	return cwtest_run();
}
