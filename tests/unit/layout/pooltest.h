/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fixtures for the layout tests: a temporary directory holding a pool
 * database and sparse files standing in for disks.
 */
#ifndef CW_POOLTEST_H
#define CW_POOLTEST_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include <clockwise/layout.h>
#include "cwtest.h"

#define TP_BS (UINT32_C(64) << 10)	/* small blocks keep the files small */

struct tp {
	char dir[64];
	char db[128];
	struct cw_pool *pool;
};

static inline void tp_path(const struct tp *t, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", t->dir, name);
}

/* A sparse file of the given size. */
static inline void tp_file(const char *path, uint64_t bytes)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(ftruncate(fd, (off_t)bytes) == 0);
	close(fd);
}

static inline void tp_init(struct tp *t)
{
	const char *tmp = getenv("TMPDIR");

	memset(t, 0, sizeof(*t));
	snprintf(t->dir, sizeof(t->dir), "%s/cwlayout.XXXXXX", tmp && strlen(tmp) < 40 ? tmp : "/tmp");
	CU_ASSERT_FATAL(mkdtemp(t->dir) != NULL);
	snprintf(t->db, sizeof(t->db), "%s/pool.db", t->dir);
}

/* A new pool with disks of nblocks[i] blocks (label included) and the
 * given tiers; returns nothing, asserts everything. */
static inline void tp_pool(struct tp *t, uint32_t bs, size_t ndisks, const uint64_t *nblocks,
			   const enum cw_tier *tiers)
{
	struct cw_error err;

	tp_init(t);
	CU_ASSERT_FATAL(cw_pool_create(t->db, bs, &err, &t->pool) == 0);
	for (size_t i = 0; i < ndisks; i++) {
		char path[160], name[32];
		uint32_t id;

		snprintf(name, sizeof(name), "d%zu.img", i + 1);
		tp_path(t, name, path, sizeof(path));
		tp_file(path, nblocks[i] * (bs ? bs : CW_BLOCK_SIZE_DEFAULT));
		CU_ASSERT_FATAL(cw_disk_add(t->pool, path, tiers ? tiers[i] : CW_TIER_HDD, NULL, &id) == 0);
		CU_ASSERT_FATAL(id == i + 1);
	}
}

static inline void tp_reopen(struct tp *t)
{
	struct cw_error err;

	cw_pool_close(t->pool);
	t->pool = NULL;
	CU_ASSERT_FATAL(cw_pool_open(t->db, &err, &t->pool) == 0);
}

static inline void tp_fini(struct tp *t)
{
	DIR *d;
	struct dirent *e;

	cw_pool_close(t->pool);
	t->pool = NULL;
	d = opendir(t->dir);
	if (!d)
		return;
	while ((e = readdir(d))) {
		char p[400];

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", t->dir, e->d_name);
		unlink(p);
	}
	closedir(d);
	rmdir(t->dir);
}

/* The first column of the first row of sql on the database at db, by a
 * connection of its own (-1: no row). */
static inline int64_t sql_int(const char *db, const char *sql)
{
	sqlite3 *h;
	sqlite3_stmt *s;
	int64_t v = -1;

	CU_ASSERT_FATAL(sqlite3_open(db, &h) == SQLITE_OK);
	CU_ASSERT_FATAL(sqlite3_prepare_v2(h, sql, -1, &s, NULL) == SQLITE_OK);
	if (sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	sqlite3_close(h);
	return v;
}

/* Runs sql on the database at db behind the library's back. */
static inline void sql_run(const char *db, const char *sql)
{
	sqlite3 *h;

	CU_ASSERT_FATAL(sqlite3_open(db, &h) == SQLITE_OK);
	CU_ASSERT_FATAL(sqlite3_exec(h, sql, NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(h);
}

/* The pool's free-space identity: every data block is free or in exactly
 * one partition (move reservations aside). */
static inline void tp_check_totals(struct cw_pool *pool, uint64_t reserved)
{
	struct cw_disk_info *disks;
	struct cw_part_info *parts;
	size_t nd, np;
	uint64_t data = 0, nfree = 0, used = 0;

	CU_ASSERT_FATAL(cw_disk_list(pool, &disks, &nd) == 0);
	CU_ASSERT_FATAL(cw_part_list(pool, &parts, &np) == 0);
	for (size_t i = 0; i < nd; i++) {
		uint64_t zf = 0;

		data += disks[i].data_blocks;
		nfree += disks[i].free_blocks;
		for (int z = 0; z < CW_ZONES; z++)
			zf += disks[i].zone_free_blocks[z];
		CU_ASSERT(zf == disks[i].free_blocks);
	}
	for (size_t i = 0; i < np; i++)
		used += parts[i].nblocks * (parts[i].copies ? parts[i].copies : 1);
	CU_ASSERT(nfree + used + reserved == data);
	free(disks);
	free(parts);
}

/* Whole-file comparison, for "nothing was changed". */
static inline char *tp_slurp(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	CU_ASSERT_FATAL(f != NULL);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	CU_ASSERT_FATAL(buf != NULL);
	CU_ASSERT_FATAL(fread(buf, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	*ret_len = (size_t)n;
	return buf;
}

/* The first 4 KiB of a file (a disk's label). */
static inline void tp_head(const char *path, uint8_t buf[4096])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	CU_ASSERT_FATAL(fd >= 0);
	memset(buf, 0, 4096);
	CU_ASSERT_FATAL(pread(fd, buf, 4096, 0) >= 0);
	close(fd);
}

/* ---- a verified write load for kill -9 tests ----
 * A child reports each write of generation g of block b on a pipe: in
 * flight before it writes, acknowledged (bit 63) once written; the parent
 * reads the reports of a killed child into acked[] and flying[]. */

static inline void tp_write_reported(int wfd, uint64_t b, uint32_t g,
				     void (*write_fn)(uint64_t b, uint32_t g))
{
	uint64_t msg[2] = { b, g };

	if (write(wfd, msg, sizeof(msg)) != sizeof(msg))
		_exit(3);
	write_fn(b, g);
	msg[1] |= UINT64_C(1) << 63;
	if (write(wfd, msg, sizeof(msg)) != sizeof(msg))
		_exit(3);
}

static inline void tp_read_reports(int rfd, int64_t *acked, int64_t *flying)
{
	uint64_t msg[2];

	while (read(rfd, msg, sizeof(msg)) == sizeof(msg)) {
		if (msg[1] >> 63)
			acked[msg[0]] = (uint32_t)msg[1];
		else
			flying[msg[0]] = (uint32_t)msg[1];
	}
}

static inline uint64_t tp_xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

#endif
