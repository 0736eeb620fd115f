/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The sqlite3 store: opening, integrity, schema migrations, transactions. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "meta/meta-internal.h"

/*
 * migrations[v] takes a database from user_version v to v + 1.  Never edit
 * a released entry: add a new one and bump META_SCHEMA_VERSION.
 *
 * Block runs: logical blocks lstart + i*stride (0 <= i < count) of a
 * partition sit on physical blocks pstart + i of one disk.  A striped
 * (rotation) partition over k disks is k rows, a single-disk one is one row;
 * lend is the last logical block, kept so a range lookup can use an index.
 */
static const char *const migrations[] = {
	/* 0 -> 1 */
	"CREATE TABLE pool ("
	"  id INTEGER PRIMARY KEY CHECK (id = 1),"
	"  uuid BLOB NOT NULL CHECK (length(uuid) = 16),"
	"  block_size INTEGER NOT NULL);"
	"CREATE TABLE disk ("
	"  id INTEGER PRIMARY KEY CHECK (id BETWEEN 1 AND 255),"
	"  uuid BLOB NOT NULL UNIQUE CHECK (length(uuid) = 16),"
	"  name TEXT NOT NULL UNIQUE,"
	"  path TEXT NOT NULL,"
	"  tier INTEGER NOT NULL CHECK (tier IN (0, 1)),"
	"  capacity INTEGER NOT NULL,"
	"  nblocks INTEGER NOT NULL CHECK (nblocks >= 2));"
	"CREATE TABLE part ("
	"  id INTEGER PRIMARY KEY,"
	"  name TEXT NOT NULL UNIQUE,"
	"  nblocks INTEGER NOT NULL CHECK (nblocks >= 0),"
	"  placement INTEGER NOT NULL,"
	"  tier_pref INTEGER NOT NULL,"
	"  zone_pref INTEGER NOT NULL,"
	"  disk INTEGER NOT NULL DEFAULT 0);"
	"CREATE TABLE run ("
	"  part INTEGER NOT NULL REFERENCES part(id) ON DELETE CASCADE,"
	"  lstart INTEGER NOT NULL,"
	"  lend INTEGER NOT NULL,"
	"  count INTEGER NOT NULL CHECK (count >= 1),"
	"  stride INTEGER NOT NULL CHECK (stride >= 1),"
	"  disk INTEGER NOT NULL REFERENCES disk(id),"
	"  pstart INTEGER NOT NULL CHECK (pstart >= 1),"
	"  PRIMARY KEY (part, lstart)) WITHOUT ROWID;"
	"CREATE INDEX run_lend ON run(part, lend);"
	"CREATE INDEX run_disk ON run(disk);",
	/* 1 -> 2: each disk's service-time model (model.h's text form), from
	 * calibration or declared; it goes with its disk. */
	"CREATE TABLE disk_model ("
	"  disk INTEGER PRIMARY KEY REFERENCES disk(id) ON DELETE CASCADE,"
	"  model TEXT NOT NULL,"
	"  calibrated INTEGER NOT NULL CHECK (calibrated IN (0, 1)));",
	/* 2 -> 3: the control plane's admitted reservations, each with the
	 * task it booked on every disk it touches (so a restart rebuilds the
	 * task sets as admitted, without planning again), and its exports.
	 * A partition with either is not deleted (RESTRICT: the library
	 * refuses first with -EBUSY and a reason), nor a reservation an
	 * export is bound to.  Times are CLOCK_REALTIME nanoseconds; ids
	 * AUTOINCREMENT so that they are never reused. */
	"CREATE TABLE resv ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  part INTEGER NOT NULL REFERENCES part(id) ON DELETE RESTRICT,"
	"  rate INTEGER NOT NULL CHECK (rate > 0),"
	"  block INTEGER NOT NULL CHECK (block > 0),"
	"  range_start INTEGER NOT NULL CHECK (range_start >= 0),"
	"  range_end INTEGER NOT NULL CHECK (range_end > range_start),"
	"  start_ns INTEGER NOT NULL,"
	"  end_ns INTEGER NOT NULL,"
	"  period_ns INTEGER NOT NULL CHECK (period_ns > 0));"
	"CREATE INDEX resv_part ON resv(part);"
	"CREATE TABLE resv_disk ("
	"  resv INTEGER NOT NULL REFERENCES resv(id) ON DELETE CASCADE,"
	"  disk INTEGER NOT NULL REFERENCES disk(id) ON DELETE RESTRICT,"
	"  period_ns INTEGER NOT NULL CHECK (period_ns > 0),"
	"  service_ns INTEGER NOT NULL CHECK (service_ns > 0),"
	"  from_ns INTEGER NOT NULL,"
	"  to_ns INTEGER NOT NULL,"
	"  requests INTEGER NOT NULL,"
	"  stride INTEGER NOT NULL,"
	"  PRIMARY KEY (resv, disk)) WITHOUT ROWID;"
	"CREATE INDEX resv_disk_disk ON resv_disk(disk);"
	"CREATE TABLE export ("
	"  name TEXT PRIMARY KEY,"
	"  part INTEGER NOT NULL REFERENCES part(id) ON DELETE RESTRICT,"
	"  readonly INTEGER NOT NULL CHECK (readonly IN (0, 1)),"
	"  resv INTEGER REFERENCES resv(id) ON DELETE RESTRICT);"
	"CREATE INDEX export_part ON export(part);"
	"CREATE INDEX export_resv ON export(resv);",
	/* 3 -> 4: each export's best-effort QoS between exports (rates in
	 * bytes/s, or requests/s where *_iops); it holds its partition like
	 * a reservation does.  Keyed by the export's name, not the export
	 * row, since an exported partition need not have one (exports.all). */
	"CREATE TABLE be_qos ("
	"  export TEXT PRIMARY KEY,"
	"  part INTEGER NOT NULL REFERENCES part(id) ON DELETE RESTRICT,"
	"  reserve INTEGER NOT NULL CHECK (reserve >= 0),"
	"  reserve_iops INTEGER NOT NULL CHECK (reserve_iops IN (0, 1)),"
	"  weight INTEGER NOT NULL CHECK (weight BETWEEN 1 AND 10000),"
	"  lim INTEGER NOT NULL CHECK (lim >= 0),"
	"  lim_iops INTEGER NOT NULL CHECK (lim_iops IN (0, 1)));"
	"CREATE INDEX be_qos_part ON be_qos(part);",
	/* 4 -> 5: a partition's holes, one bitmap per chunk of 4096 logical
	 * blocks (64 little-endian words; bit b%64 of word b/64 is block b).
	 * A set bit is a block never written since it was given to the
	 * partition, or deallocated since (TRIM, WRITE_ZEROES): it reads as
	 * zeros whatever its disk holds.  A chunk without a row has no
	 * holes, so the partitions of an older pool read as written. */
	"CREATE TABLE hole ("
	"  part INTEGER NOT NULL REFERENCES part(id) ON DELETE CASCADE,"
	"  chunk INTEGER NOT NULL CHECK (chunk >= 0),"
	"  bits BLOB NOT NULL CHECK (length(bits) = 512),"
	"  PRIMARY KEY (part, chunk)) WITHOUT ROWID;",
	/* 5 -> 6: the model a disk emulates (clockwise/emu.h), in model.h's
	 * text form; a disk without a row is served as it is. */
	"CREATE TABLE disk_emulate ("
	"  disk INTEGER PRIMARY KEY REFERENCES disk(id) ON DELETE CASCADE,"
	"  model TEXT NOT NULL);",
	/* 6 -> 7: tier 2, an image on a Ceph cluster.  A CHECK is changed by
	 * rebuilding the table (SQLite's documented procedure, foreign keys
	 * off while it runs: see migrate). */
	"CREATE TABLE disk_new ("
	"  id INTEGER PRIMARY KEY CHECK (id BETWEEN 1 AND 255),"
	"  uuid BLOB NOT NULL UNIQUE CHECK (length(uuid) = 16),"
	"  name TEXT NOT NULL UNIQUE,"
	"  path TEXT NOT NULL,"
	"  tier INTEGER NOT NULL CHECK (tier IN (0, 1, 2)),"
	"  capacity INTEGER NOT NULL,"
	"  nblocks INTEGER NOT NULL CHECK (nblocks >= 2));"
	"INSERT INTO disk_new SELECT id, uuid, name, path, tier, capacity, nblocks FROM disk;"
	"DROP TABLE disk;"
	"ALTER TABLE disk_new RENAME TO disk;",
	/* 7 -> 8: moves, journalled (clockwise/mover.h).  A move row keeps
	 * the move's state and counters; a move_block row one block to move,
	 * with its source and its destination (disk, physical block), which
	 * stays reserved while the row is planned (state 0) and the move
	 * unfinished, so a crash mid-copy leaves no block owned twice and the
	 * copy is done again at the next open.  Rows of moved or skipped
	 * blocks go when the move finishes; failed ones (the source did not
	 * read) stay to be reported.  And whether a partition's tier
	 * preference may fall back to other disks: yes for the partitions of
	 * older pools, as it always did. */
	"CREATE TABLE move ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  kind INTEGER NOT NULL CHECK (kind BETWEEN 0 AND 3),"
	"  part INTEGER NOT NULL REFERENCES part(id) ON DELETE CASCADE,"
	"  disk INTEGER NOT NULL DEFAULT 0,"
	"  state INTEGER NOT NULL CHECK (state BETWEEN 0 AND 3),"
	"  placement INTEGER NOT NULL,"
	"  tier_pref INTEGER NOT NULL,"
	"  zone_pref INTEGER NOT NULL,"
	"  blocks INTEGER NOT NULL CHECK (blocks >= 0),"
	"  done INTEGER NOT NULL DEFAULT 0,"
	"  failed INTEGER NOT NULL DEFAULT 0,"
	"  skipped INTEGER NOT NULL DEFAULT 0,"
	"  bytes INTEGER NOT NULL DEFAULT 0,"
	"  created_ns INTEGER NOT NULL,"
	"  finished_ns INTEGER NOT NULL DEFAULT 0,"
	"  error TEXT NOT NULL DEFAULT '');"
	"CREATE INDEX move_part ON move(part);"
	"CREATE TABLE move_block ("
	"  move INTEGER NOT NULL REFERENCES move(id) ON DELETE CASCADE,"
	"  block INTEGER NOT NULL CHECK (block >= 0),"
	"  src_disk INTEGER NOT NULL,"
	"  src_pblock INTEGER NOT NULL CHECK (src_pblock >= 1),"
	"  dst_disk INTEGER NOT NULL,"
	"  dst_pblock INTEGER NOT NULL CHECK (dst_pblock >= 1),"
	"  state INTEGER NOT NULL DEFAULT 0 CHECK (state BETWEEN 0 AND 3),"
	"  PRIMARY KEY (move, block)) WITHOUT ROWID;"
	"ALTER TABLE part ADD COLUMN tier_fallback INTEGER NOT NULL DEFAULT 1"
	"  CHECK (tier_fallback IN (0, 1));",
	/* 8 -> 9: SSD caches (clockwise/cache.h).  A partition's setting
	 * (bytes, 0: none; mode 0 write-through, 1 write-back); the SSD
	 * blocks its cache owns, slot by slot; and the armed blocks of a
	 * write-back cache, whose SSD copy may be newer than the HDD: they
	 * are written back when the pool opens again. */
	"ALTER TABLE part ADD COLUMN cache_bytes INTEGER NOT NULL DEFAULT 0"
	"  CHECK (cache_bytes >= 0);"
	"ALTER TABLE part ADD COLUMN cache_mode INTEGER NOT NULL DEFAULT 0"
	"  CHECK (cache_mode IN (0, 1));"
	"CREATE TABLE cache_slot ("
	"  part INTEGER NOT NULL REFERENCES part(id) ON DELETE CASCADE,"
	"  slot INTEGER NOT NULL CHECK (slot >= 0),"
	"  disk INTEGER NOT NULL REFERENCES disk(id),"
	"  pblock INTEGER NOT NULL CHECK (pblock >= 1),"
	"  PRIMARY KEY (part, slot)) WITHOUT ROWID;"
	"CREATE INDEX cache_slot_disk ON cache_slot(disk);"
	"CREATE TABLE cache_block ("
	"  part INTEGER NOT NULL REFERENCES part(id) ON DELETE CASCADE,"
	"  block INTEGER NOT NULL CHECK (block >= 0),"
	"  slot INTEGER NOT NULL CHECK (slot >= 0),"
	"  PRIMARY KEY (part, block)) WITHOUT ROWID;",
	/* 9 -> 10: when a reservation's requests are due after their release
	 * (clockwise/admit.h, enum cw_admit_due): 0 a disk period, as every
	 * reservation made before, 1 a stream period; and the unfinished move
	 * a reservation is booked on both sides of (rule 2 of moving data,
	 * clockwise/admit-state.h): while it runs, the resv_disk rows are the
	 * parts of the range's blocks where they are and where the move puts
	 * them; 0: none.  No reference: a finished move's row may be forgotten
	 * before the booking settles. */
	"ALTER TABLE resv ADD COLUMN due INTEGER NOT NULL DEFAULT 0 CHECK (due IN (0, 1));"
	"ALTER TABLE resv ADD COLUMN move INTEGER NOT NULL DEFAULT 0 CHECK (move >= 0);",
	/* 10 -> 11: a part of a reservation booked for the copies its
	 * partition's SSD cache may hold on that disk (rule 2 for caches,
	 * cw_admit_state_cache_sync): every block of the range is charged
	 * there; 0 for every part booked before. */
	"ALTER TABLE resv_disk ADD COLUMN copy INTEGER NOT NULL DEFAULT 0 CHECK (copy IN (0, 1));",
	/* 11 -> 12: mirrored partitions.  How many copies of each block a
	 * partition keeps, fixed at create (no part_copies row: 1, as every
	 * partition made before); copy 0 stays in run, copies 1 and 2 have
	 * their runs in copy_run, the same form with the copy's number.
	 * copy_stale is the in-sync state, one bitmap per chunk of 4096
	 * blocks like hole's: a set bit is a copy of the block that is out of
	 * sync (no row: all in sync).  A disk's failure domain (no disk_domain
	 * row: its own); copies of a block are kept in distinct domains.  A
	 * move_block row moves one copy of its block: the key takes the copy
	 * (the table rebuilt, as 6 -> 7 did for disk).  New tables are made
	 * IF NOT EXISTS, so that a database taken back to an older version by
	 * dropping only that version's additions (as the migration tests do)
	 * still comes forward. */
	"CREATE TABLE IF NOT EXISTS part_copies ("
	"  part INTEGER PRIMARY KEY REFERENCES part(id) ON DELETE CASCADE,"
	"  copies INTEGER NOT NULL CHECK (copies BETWEEN 2 AND 3));"
	"CREATE TABLE IF NOT EXISTS disk_domain ("
	"  disk INTEGER PRIMARY KEY REFERENCES disk(id) ON DELETE CASCADE,"
	"  domain TEXT NOT NULL CHECK (length(domain) BETWEEN 1 AND 63));"
	"CREATE TABLE IF NOT EXISTS copy_run ("
	"  part INTEGER NOT NULL REFERENCES part(id) ON DELETE CASCADE,"
	"  copy INTEGER NOT NULL CHECK (copy BETWEEN 1 AND 2),"
	"  lstart INTEGER NOT NULL,"
	"  lend INTEGER NOT NULL,"
	"  count INTEGER NOT NULL CHECK (count >= 1),"
	"  stride INTEGER NOT NULL CHECK (stride >= 1),"
	"  disk INTEGER NOT NULL REFERENCES disk(id),"
	"  pstart INTEGER NOT NULL CHECK (pstart >= 1),"
	"  PRIMARY KEY (part, copy, lstart)) WITHOUT ROWID;"
	"CREATE INDEX IF NOT EXISTS copy_run_lend ON copy_run(part, copy, lend);"
	"CREATE INDEX IF NOT EXISTS copy_run_disk ON copy_run(disk);"
	"CREATE TABLE IF NOT EXISTS copy_stale ("
	"  part INTEGER NOT NULL REFERENCES part(id) ON DELETE CASCADE,"
	"  copy INTEGER NOT NULL CHECK (copy BETWEEN 0 AND 2),"
	"  chunk INTEGER NOT NULL CHECK (chunk >= 0),"
	"  bits BLOB NOT NULL CHECK (length(bits) = 512),"
	"  PRIMARY KEY (part, copy, chunk)) WITHOUT ROWID;"
	"CREATE TABLE move_block_new ("
	"  move INTEGER NOT NULL REFERENCES move(id) ON DELETE CASCADE,"
	"  block INTEGER NOT NULL CHECK (block >= 0),"
	"  copy INTEGER NOT NULL DEFAULT 0 CHECK (copy BETWEEN 0 AND 2),"
	"  src_disk INTEGER NOT NULL,"
	"  src_pblock INTEGER NOT NULL CHECK (src_pblock >= 1),"
	"  dst_disk INTEGER NOT NULL,"
	"  dst_pblock INTEGER NOT NULL CHECK (dst_pblock >= 1),"
	"  state INTEGER NOT NULL DEFAULT 0 CHECK (state BETWEEN 0 AND 3),"
	"  PRIMARY KEY (move, block, copy)) WITHOUT ROWID;"
	"INSERT INTO move_block_new SELECT move, block, 0, src_disk, src_pblock, dst_disk,"
	"  dst_pblock, state FROM move_block;"
	"DROP TABLE move_block;"
	"ALTER TABLE move_block_new RENAME TO move_block;",
	/* 12 -> 13: the write-intent record of mirrored partitions (md's
	 * write-intent bitmap): a row is a region of CW_INTENT_REGION_BLOCKS
	 * blocks that may have a write in flight on some copies and not on
	 * others.  It is made before such a write is dispatched and dropped
	 * lazily once the region is idle; at open a row left by a crash
	 * makes every copy of its blocks but one out of sync (intent.c). */
	"CREATE TABLE IF NOT EXISTS copy_intent ("
	"  part INTEGER NOT NULL REFERENCES part(id) ON DELETE CASCADE,"
	"  region INTEGER NOT NULL CHECK (region >= 0),"
	"  PRIMARY KEY (part, region)) WITHOUT ROWID;",
	/* 13 -> 14: exports served as ublk block devices (clockwised's
	 * daemon/ublk/) instead of over NBD: their queue depth and largest
	 * request (0: the daemon's defaults), and the device number the
	 * kernel gave (-1: none yet), so that a daemon started after a crash
	 * takes its device back (ublk's user recovery). */
	"CREATE TABLE IF NOT EXISTS export_ublk ("
	"  export TEXT PRIMARY KEY REFERENCES export(name) ON DELETE CASCADE,"
	"  queue_depth INTEGER NOT NULL CHECK (queue_depth >= 0),"
	"  max_request INTEGER NOT NULL CHECK (max_request >= 0),"
	"  dev INTEGER NOT NULL DEFAULT -1 CHECK (dev >= -1));",
	/* 14 -> 15: moves of four more kinds, a rebuild (4: copies out of
	 * sync rewritten in place), a replacement (5: every copy on one disk
	 * taken to another) and a scrub (6: copies compared; 7: and
	 * repaired); the CHECK changes by rebuilding the table, as 6 -> 7
	 * did. */
	"CREATE TABLE move_new ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  kind INTEGER NOT NULL CHECK (kind BETWEEN 0 AND 7),"
	"  part INTEGER NOT NULL REFERENCES part(id) ON DELETE CASCADE,"
	"  disk INTEGER NOT NULL DEFAULT 0,"
	"  state INTEGER NOT NULL CHECK (state BETWEEN 0 AND 3),"
	"  placement INTEGER NOT NULL,"
	"  tier_pref INTEGER NOT NULL,"
	"  zone_pref INTEGER NOT NULL,"
	"  blocks INTEGER NOT NULL CHECK (blocks >= 0),"
	"  done INTEGER NOT NULL DEFAULT 0,"
	"  failed INTEGER NOT NULL DEFAULT 0,"
	"  skipped INTEGER NOT NULL DEFAULT 0,"
	"  bytes INTEGER NOT NULL DEFAULT 0,"
	"  created_ns INTEGER NOT NULL,"
	"  finished_ns INTEGER NOT NULL DEFAULT 0,"
	"  error TEXT NOT NULL DEFAULT '');"
	"INSERT INTO move_new SELECT id, kind, part, disk, state, placement, tier_pref, zone_pref,"
	"  blocks, done, failed, skipped, bytes, created_ns, finished_ns, error FROM move;"
	"DROP TABLE move;"
	"ALTER TABLE move_new RENAME TO move;"
	"CREATE INDEX move_part ON move(part);"
	/* And the pool's spare disks: present, holding nothing, given no
	 * block until a disk that fails is replaced by one. */
	"CREATE TABLE IF NOT EXISTS disk_spare ("
	"  disk INTEGER PRIMARY KEY REFERENCES disk(id) ON DELETE CASCADE);",
	/* 15 -> 16: how a reservation on a mirrored partition uses its
	 * copies: survive, admitted to survive the loss of any one disk
	 * (cwctl resv create --survive 1: its parts are the worst of every
	 * failure case); record, a recording stream whose every request is
	 * charged on every copy's disk (--record).  No row: 0, 0 (as every
	 * reservation made before). */
	"CREATE TABLE IF NOT EXISTS resv_copies ("
	"  resv INTEGER PRIMARY KEY REFERENCES resv(id) ON DELETE CASCADE,"
	"  survive INTEGER NOT NULL CHECK (survive IN (0, 1)),"
	"  record INTEGER NOT NULL DEFAULT 0 CHECK (record IN (0, 1)));",
	/* 16 -> 17: the resync a crash's write-intent recovery owes and has
	 * not journalled yet (it waits for an unfinished move of the
	 * partition): a row per region, with the bits of the copies the
	 * recovery marked out of sync there, one word per copy (m0..m2,
	 * the block's bit b % 64 of region b / 64).  Written in the
	 * recovery's transaction, which drops the copy_intent rows, so a
	 * second crash before the move ends still resyncs them; dropped
	 * once the rebuild is journalled (layout/rebuild.c). */
	"CREATE TABLE IF NOT EXISTS copy_resync ("
	"  part INTEGER NOT NULL REFERENCES part(id) ON DELETE CASCADE,"
	"  region INTEGER NOT NULL CHECK (region >= 0),"
	"  m0 INTEGER NOT NULL DEFAULT 0,"
	"  m1 INTEGER NOT NULL DEFAULT 0,"
	"  m2 INTEGER NOT NULL DEFAULT 0,"
	"  PRIMARY KEY (part, region)) WITHOUT ROWID;",
};

_Static_assert(CW_ARRAY_SIZE(migrations) == META_SCHEMA_VERSION,
	       "one migration per schema version");

int meta_verr(struct cw_error *err, int code, const char *fmt, va_list ap)
{
	if (err) {
		memset(err, 0, sizeof(*err));
		err->code = code;
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	}
	return code;
}

int meta_err(struct cw_error *err, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	meta_verr(err, code, fmt, ap);
	va_end(ap);
	return code;
}

int meta_errno(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_DONE:
	case SQLITE_ROW:
		return 0;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_READONLY:
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_CANTOPEN:
		return -ENOENT;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
	case SQLITE_FORMAT:
		return -EUCLEAN;
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	case SQLITE_TOOBIG:
	case SQLITE_RANGE:
	case SQLITE_MISMATCH:
		return -EINVAL;
	default:
		return -EIO;
	}
}

static int db_err(struct meta *m, struct cw_error *err, int rc, const char *what)
{
	return meta_err(err, meta_errno(rc), "%s: %s", what,
			m && m->db ? sqlite3_errmsg(m->db) : sqlite3_errstr(rc));
}

int meta_stmt(struct meta *m, const char *sql, sqlite3_stmt **ret)
{
	sqlite3_stmt *s;
	unsigned i;
	int rc;

	for (i = 0; i < m->ncache; i++)
		if (m->cache[i].sql == sql) {
			s = m->cache[i].stmt;
			sqlite3_reset(s);
			sqlite3_clear_bindings(s);
			*ret = s;
			return 0;
		}
	rc = sqlite3_prepare_v3(m->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL);
	if (rc != SQLITE_OK)
		return meta_errno(rc);
	if (m->ncache < CW_ARRAY_SIZE(m->cache)) {
		m->cache[m->ncache].sql = sql;
		m->cache[m->ncache].stmt = s;
		m->ncache++;
	} else {
		/* Cannot happen with the library's fixed set of statements. */
		sqlite3_finalize(s);
		return -ENOMEM;
	}
	*ret = s;
	return 0;
}

int meta_exec(struct meta *m, const char *sql, int nargs, ...)
{
	sqlite3_stmt *s;
	va_list ap;
	int r;

	r = meta_stmt(m, sql, &s);
	if (r < 0)
		return r;
	va_start(ap, nargs);
	for (int i = 0; i < nargs; i++)
		sqlite3_bind_int64(s, i + 1, va_arg(ap, int64_t));
	va_end(ap);
	return meta_step(s);
}

int meta_step(sqlite3_stmt *s)
{
	int rc = sqlite3_step(s);

	sqlite3_reset(s);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : meta_errno(rc);
}

int meta_end(struct meta *m, int r)
{
	if (r == 0)
		return meta_commit(m);
	meta_rollback(m);
	return r;
}

int meta_begin(struct meta *m)
{
	return meta_errno(sqlite3_exec(m->db, "BEGIN IMMEDIATE", NULL, NULL, NULL));
}

int meta_commit(struct meta *m)
{
	int rc = sqlite3_exec(m->db, "COMMIT", NULL, NULL, NULL);

	if (rc != SQLITE_OK) {
		meta_rollback(m);
		return meta_errno(rc);
	}
	return 0;
}

void meta_rollback(struct meta *m)
{
	if (!sqlite3_get_autocommit(m->db))
		sqlite3_exec(m->db, "ROLLBACK", NULL, NULL, NULL);
}

void meta_close(struct meta *m)
{
	if (!m)
		return;
	for (unsigned i = 0; i < m->ncache; i++)
		sqlite3_finalize(m->cache[i].stmt);
	sqlite3_close(m->db);
	cw_closep(&m->lock_fd);
	free(m);
}

static int pragma_int(struct meta *m, const char *sql, int64_t *ret)
{
	sqlite3_stmt *s;
	int rc;

	rc = sqlite3_prepare_v2(m->db, sql, -1, &s, NULL);
	if (rc != SQLITE_OK)
		return rc;
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*ret = sqlite3_column_int64(s, 0);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	return rc;
}

/* SQLITE_CONSTRAINT when a row refers to one that is not there. */
static int fk_check(struct meta *m)
{
	sqlite3_stmt *s;
	int rc = sqlite3_prepare_v2(m->db, "PRAGMA foreign_key_check", -1, &s, NULL);

	if (rc != SQLITE_OK)
		return rc;
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	return rc == SQLITE_ROW ? SQLITE_CONSTRAINT : rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* One migration, in one transaction. */
static int migrate_one(struct meta *m, int64_t v, struct cw_error *err)
{
	char sql[64];
	int rc;

	rc = sqlite3_exec(m->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(m->db, migrations[v], NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = fk_check(m);
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %lld", (long long)v + 1);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(m->db, sql, NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(m->db, "COMMIT", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		int r = db_err(m, err, rc, "schema migration");

		meta_rollback(m);
		return r;
	}
	return 0;
}

/* Runs the migrations from version `from` up, one transaction each.
 * Foreign keys are off meanwhile, so that a table rebuilt (dropped and
 * created again) takes no rows of others with it; each migration must
 * leave every reference whole, which fk_check verifies before it commits. */
static int migrate(struct meta *m, int64_t from, struct cw_error *err)
{
	int r = 0;

	if (from >= META_SCHEMA_VERSION)
		return 0;
	if (sqlite3_exec(m->db, "PRAGMA foreign_keys = OFF", NULL, NULL, NULL) != SQLITE_OK)
		return db_err(m, err, sqlite3_errcode(m->db), "schema migration");
	for (int64_t v = from; v < META_SCHEMA_VERSION && r == 0; v++)
		r = migrate_one(m, v, err);
	if (sqlite3_exec(m->db, "PRAGMA foreign_keys = ON", NULL, NULL, NULL) != SQLITE_OK && !r)
		r = db_err(m, err, sqlite3_errcode(m->db), "schema migration");
	return r;
}

/* The settings every change relies on.  journal_mode=WAL is persistent in
 * the file, so it is set only after the database passed its checks. */
static int set_pragmas(struct meta *m, struct cw_error *err)
{
	static const char *const pragmas[] = {
		"PRAGMA journal_mode = WAL",
		"PRAGMA synchronous = FULL",
		"PRAGMA foreign_keys = ON",
	};
	int rc;

	for (size_t i = 0; i < CW_ARRAY_SIZE(pragmas); i++) {
		rc = sqlite3_exec(m->db, pragmas[i], NULL, NULL, NULL);
		if (rc != SQLITE_OK)
			return db_err(m, err, rc, pragmas[i]);
	}
	return 0;
}

static int meta_new(const char *path, bool create, struct cw_error *err, struct meta **ret)
{
	_cleanup_free_ struct meta *m = NULL;
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
	int rc;

	m = calloc(1, sizeof(*m));
	if (!m)
		return meta_err(err, -ENOMEM, "out of memory");
	m->lock_fd = -1;
	/* The lock file is the database itself: flock() does not interfere
	 * with sqlite's fcntl() locks.  Creating it here with O_EXCL is also
	 * what makes cw_pool_create refuse an existing path. */
	m->lock_fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0), 0640);
	if (m->lock_fd < 0) {
		int e = errno;

		return meta_err(err, -e, "%s: %s", path,
				e == EEXIST ? "a file already exists there" : strerror(e));
	}
	if (flock(m->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;

		close(m->lock_fd);
		if (e == EWOULDBLOCK)
			return meta_err(err, -EBUSY, "%s: the pool is open in another process", path);
		return meta_err(err, -e, "%s: lock: %s", path, strerror(e));
	}
	rc = sqlite3_open_v2(path, &m->db, flags, NULL);
	if (rc != SQLITE_OK) {
		int r = db_err(m, err, rc, path);

		sqlite3_close(m->db);
		close(m->lock_fd);
		return r;
	}
	sqlite3_extended_result_codes(m->db, 1);
	sqlite3_busy_timeout(m->db, 1000);
	*ret = CW_TAKE_PTR(m);
	return 0;
}

int meta_create(const char *path, struct cw_error *err, struct meta **ret)
{
	struct meta *m;
	int r;

	r = meta_new(path, true, err, &m);
	if (r < 0)
		return r;
	r = set_pragmas(m, err);
	if (r == 0)
		r = migrate(m, 0, err);
	if (r < 0) {
		meta_close(m);
		unlink(path);
		return r;
	}
	*ret = m;
	return 0;
}

int meta_open(const char *path, struct cw_error *err, struct meta **ret)
{
	struct meta *m;
	int64_t version = 0;
	sqlite3_stmt *s = NULL;
	int r, rc;

	r = meta_new(path, false, err, &m);
	if (r < 0)
		return r;
	/* Read-only checks first, so a damaged or foreign file is refused
	 * before anything could be written to it. */
	rc = pragma_int(m, "PRAGMA user_version", &version);
	if (rc != SQLITE_OK) {
		r = meta_err(err, -EUCLEAN, "%s: not a readable pool database: %s", path,
			     sqlite3_errmsg(m->db));
		goto fail;
	}
	if (version <= 0) {
		r = meta_err(err, -EUCLEAN, "%s: not a Clockwise pool database (no schema version)",
			     path);
		goto fail;
	}
	if (version > META_SCHEMA_VERSION) {
		r = meta_err(err, -EPROTONOSUPPORT,
			     "%s: schema version %lld is newer than this library's %d", path,
			     (long long)version, META_SCHEMA_VERSION);
		goto fail;
	}
	rc = sqlite3_prepare_v2(m->db, "PRAGMA quick_check", -1, &s, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(s);
	if (rc != SQLITE_ROW || strcmp((const char *)sqlite3_column_text(s, 0), "ok") != 0) {
		r = meta_err(err, -EUCLEAN, "%s: the database is damaged: %s", path,
			     rc == SQLITE_ROW ? (const char *)sqlite3_column_text(s, 0)
					      : sqlite3_errmsg(m->db));
		sqlite3_finalize(s);
		goto fail;
	}
	sqlite3_finalize(s);
	r = set_pragmas(m, err);
	if (r == 0)
		r = migrate(m, version, err);
	if (r < 0)
		goto fail;
	*ret = m;
	return 0;
fail:
	meta_close(m);
	return r;
}

static uint64_t file_bytes(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

uint64_t meta_size_bytes(const char *path)
{
	char wal[4096];

	snprintf(wal, sizeof(wal), "%s-wal", path);
	return file_bytes(path) + file_bytes(wal);
}
