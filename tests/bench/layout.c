/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Benchmark: a 1 TiB dynamic partition (1,048,576 blocks of 1 MiB) striped
 * over 3 sparse-file disks — the time to create and commit it, the cost of
 * mapping 10 million random offsets, and the metadata size.  Baselines run
 * in the same process: the same lookups as a plain array index, and the
 * same block list stored as one sqlite row per block.
 *
 * Last line: create_commit_s=<x> lookup_ns=<y> metadata_bytes=<z>
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <clockwise/layout.h>

#define TIB (UINT64_C(1) << 40)
#define LOOKUPS 10000000u

static uint64_t rng = 0x9E3779B97F4A7C15u;

static uint64_t next_random(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * UINT64_C(2685821657736338717);
}

static double secs(int64_t ns)
{
	return (double)ns / 1e9;
}

static uint64_t file_bytes(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static void die(const char *what, int r)
{
	fprintf(stderr, "bench/layout: %s: %s\n", what, strerror(r < 0 ? -r : r));
	exit(1);
}

/* The baseline store: one row per block in one transaction, with the same
 * durability settings as the pool. */
static int64_t row_per_block(const char *path, const uint64_t *entries, uint64_t n)
{
	sqlite3 *db;
	sqlite3_stmt *s;
	int64_t t0 = cw_now_ns();

	if (sqlite3_open(path, &db) != SQLITE_OK)
		die("baseline open", EIO);
	sqlite3_exec(db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
		     "CREATE TABLE block (part INTEGER, lblock INTEGER, disk INTEGER, pblock INTEGER,"
		     " PRIMARY KEY (part, lblock)) WITHOUT ROWID; BEGIN", NULL, NULL, NULL);
	sqlite3_prepare_v2(db, "INSERT INTO block VALUES (1, ?1, ?2, ?3)", -1, &s, NULL);
	for (uint64_t b = 0; b < n; b++) {
		sqlite3_bind_int64(s, 1, (int64_t)b);
		sqlite3_bind_int64(s, 2, (int64_t)(entries[b] >> 48));
		sqlite3_bind_int64(s, 3, (int64_t)(entries[b] & ((UINT64_C(1) << 48) - 1)));
		if (sqlite3_step(s) != SQLITE_DONE)
			die("baseline insert", EIO);
		sqlite3_reset(s);
	}
	sqlite3_finalize(s);
	if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		die("baseline commit", EIO);
	sqlite3_close(db);
	return cw_now_ns() - t0;
}

static void cleanup(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[512];

	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	char dir[200], db[240], path[300], base[240];
	struct cw_error err;
	struct cw_pool *pool;
	struct cw_part *part;
	struct cw_extent ext;
	uint64_t *offsets, *entries, nblocks, sum = 0, meta_bytes, base_bytes;
	int64_t t0, create_ns, lookup_ns, array_ns, rows_ns;
	int r;

	snprintf(dir, sizeof(dir), "%s/cwbench.XXXXXX", tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		die("mkdtemp", errno);
	snprintf(db, sizeof(db), "%s/pool.db", dir);
	r = cw_pool_create(db, 0, &err, &pool);
	if (r < 0)
		die(err.msg, r);
	for (int i = 0; i < 3; i++) {
		/* A third of a TiB each, plus the label and some slack. */
		uint64_t bytes = TIB / 3 + (UINT64_C(16) << 20);
		int fd;

		snprintf(path, sizeof(path), "%s/disk%d.img", dir, i);
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || ftruncate(fd, (off_t)bytes) < 0)
			die(path, errno);
		close(fd);
		r = cw_disk_add(pool, path, CW_TIER_HDD, NULL, NULL);
		if (r < 0)
			die(cw_pool_last_error(pool)->msg, r);
	}

	t0 = cw_now_ns();
	r = cw_part_create(pool, "bench", TIB, NULL, &part);
	create_ns = cw_now_ns() - t0;
	if (r < 0)
		die(cw_pool_last_error(pool)->msg, r);
	nblocks = cw_part_nblocks(part);
	meta_bytes = file_bytes(db);
	snprintf(path, sizeof(path), "%s-wal", db);
	meta_bytes += file_bytes(path);

	offsets = malloc(LOOKUPS * sizeof(*offsets));
	entries = malloc(nblocks * sizeof(*entries));
	if (!offsets || !entries)
		die("malloc", ENOMEM);
	for (uint32_t i = 0; i < LOOKUPS; i++)
		offsets[i] = next_random() % TIB;
	/* The baseline array holds the same locations as the map. */
	for (uint64_t b = 0; b < nblocks; b++) {
		if (cw_part_map(part, b << 20, 0, &ext) < 0)
			die("map", EIO);
		entries[b] = ((uint64_t)ext.disk_id << 48) | (ext.phys_offset >> 20);
	}

	t0 = cw_now_ns();
	for (uint32_t i = 0; i < LOOKUPS; i++) {
		cw_part_map(part, offsets[i], 0, &ext);
		sum += ext.phys_offset + ext.disk_id;
	}
	lookup_ns = cw_now_ns() - t0;

	t0 = cw_now_ns();
	for (uint32_t i = 0; i < LOOKUPS; i++) {
		uint64_t e = entries[offsets[i] >> 20];

		sum -= ((e & ((UINT64_C(1) << 48) - 1)) << 20) + (offsets[i] & ((1u << 20) - 1)) +
		       (e >> 48);
	}
	array_ns = cw_now_ns() - t0;
	if (sum != 0)
		die("the map and the array disagree", EIO);

	snprintf(base, sizeof(base), "%s/rows.db", dir);
	rows_ns = row_per_block(base, entries, nblocks);
	base_bytes = file_bytes(base);
	snprintf(path, sizeof(path), "%s-wal", base);
	base_bytes += file_bytes(path);

	printf("partition: %" PRIu64 " blocks of 1 MiB over 3 disks (rotation)\n", nblocks);
	printf("create+commit: %.3f s (row-per-block baseline %.3f s, %.1fx faster)\n",
	       secs(create_ns), secs(rows_ns), (double)rows_ns / (double)create_ns);
	printf("lookup: %.1f ns (plain array index %.1f ns, ratio %.2f)\n",
	       (double)lookup_ns / LOOKUPS, (double)array_ns / LOOKUPS,
	       (double)lookup_ns / (double)array_ns);
	printf("metadata: %" PRIu64 " bytes incl. WAL (row-per-block baseline %" PRIu64 " bytes)\n",
	       meta_bytes, base_bytes);
	printf("create_commit_s=%.3f lookup_ns=%.1f metadata_bytes=%" PRIu64 "\n", secs(create_ns),
	       (double)lookup_ns / LOOKUPS, meta_bytes);

	free(offsets);
	free(entries);
	cw_pool_close(pool);
	cleanup(dir);
	return 0;
}
