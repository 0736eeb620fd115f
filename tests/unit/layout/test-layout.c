/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: the volume layer against a real sqlite database and real
 * sparse files as disks — labels, pool create/open, disks, placement
 * policies, zones, grow/shrink, rename/delete, the mapping, moves, degraded
 * open, path swaps, foreign and damaged labels and databases.
 */
#include "config.h"

#include <sqlite3.h>

#include "layout/label.c"	/* the checksum and label codec, private */
#include "pooltest.h"
#include "meta/meta-internal.h"
#include <clockwise/model.h>

#define MiB (UINT64_C(1) << 20)

static const uint64_t three[] = { 301, 301, 301 };

/* Location of block b as one word, for comparisons. */
static uint64_t where(struct cw_part *p, uint64_t b)
{
	struct cw_extent e;

	CU_ASSERT_FATAL(cw_part_map(p, b * cw_part_block_size(p), 0, &e) == 0);
	CU_ASSERT_FATAL(e.phys_offset % cw_part_block_size(p) == 0);
	return ((uint64_t)e.disk_id << 48) | (e.phys_offset / cw_part_block_size(p));
}

static uint64_t disk_free(struct cw_pool *pool, uint32_t id)
{
	struct cw_disk_info di;

	CU_ASSERT_FATAL(cw_disk_info(pool, id, &di) == 0);
	return di.free_blocks;
}

/* ---- labels ---- */

static void test_crc32c(void)
{
	/* The check value of CRC-32C (RFC 3720 B.4 lists 32 zero bytes too). */
	uint8_t zeros[32] = { 0 };

	CU_ASSERT(lay_crc32c(0, "123456789", 9) == 0xE3069283u);
	CU_ASSERT(lay_crc32c(0, zeros, 32) == 0x8A9136AAu);
}

static void test_label_codec(void)
{
	struct label l = { .version = LABEL_VERSION, .block_size = 1 << 20, .tier = CW_TIER_SSD,
			   .nblocks = 12345 }, back;
	uint8_t buf[LABEL_BYTES];

	CU_ASSERT_FATAL(lay_uuid_random(l.pool_uuid) == 0);
	CU_ASSERT_FATAL(lay_uuid_random(l.disk_uuid) == 0);
	lay_label_encode(&l, buf);
	CU_ASSERT_FATAL(lay_label_decode(buf, &back) == 0);
	CU_ASSERT(memcmp(back.pool_uuid, l.pool_uuid, 16) == 0);
	CU_ASSERT(memcmp(back.disk_uuid, l.disk_uuid, 16) == 0);
	CU_ASSERT(back.block_size == l.block_size && back.tier == l.tier && back.nblocks == l.nblocks);
	for (int i = 8; i < 72; i += 7) {
		buf[i] ^= 0x10;
		CU_ASSERT(lay_label_decode(buf, &back) == -EUCLEAN);
		buf[i] ^= 0x10;
	}
	buf[0] = 'X';
	CU_ASSERT(lay_label_decode(buf, &back) == -ENOMSG);
}

static void test_uuid_format(void)
{
	uint8_t u[16];
	char s[CW_UUID_STRING_LEN + 1];

	for (int i = 0; i < 16; i++)
		u[i] = (uint8_t)(i * 17);
	cw_uuid_format(u, s);
	CU_ASSERT_STRING_EQUAL(s, "00112233-4455-6677-8899-aabbccddeeff");
}

/* ---- pool ---- */

static void test_pool_create_open(void)
{
	struct tp t;
	uint8_t uuid[16];

	tp_init(&t);
	CU_ASSERT_FATAL(cw_pool_create(t.db, 0, NULL, &t.pool) == 0);
	CU_ASSERT(cw_pool_block_size(t.pool) == CW_BLOCK_SIZE_DEFAULT);
	memcpy(uuid, cw_pool_uuid(t.pool), 16);
	CU_ASSERT((uuid[6] >> 4) == 4);
	tp_reopen(&t);
	CU_ASSERT(memcmp(uuid, cw_pool_uuid(t.pool), 16) == 0);
	CU_ASSERT(cw_pool_block_size(t.pool) == CW_BLOCK_SIZE_DEFAULT);
	CU_ASSERT(cw_pool_missing_disks(t.pool) == 0);
	CU_ASSERT(sql_int(t.db, "PRAGMA user_version") == META_SCHEMA_VERSION);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM pool") == 1);
	tp_fini(&t);
}

static void test_pool_bad_block_size(void)
{
	static const uint32_t bad[] = { 3 << 20, 32 << 10, 1000000, UINT32_C(1) << 31 };
	struct cw_error err;
	struct cw_pool *p = NULL;
	struct stat st;
	struct tp t;

	tp_init(&t);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CU_ASSERT(cw_pool_create(t.db, bad[i], &err, &p) == -EINVAL);
		CU_ASSERT(err.code == -EINVAL && strstr(err.msg, "power of two") != NULL);
		CU_ASSERT(stat(t.db, &st) < 0 && errno == ENOENT);
	}
	CU_ASSERT_FATAL(cw_pool_create(t.db, 64 << 10, &err, &t.pool) == 0);
	CU_ASSERT(cw_pool_block_size(t.pool) == 64 << 10);
	tp_fini(&t);
}

static void test_pool_create_exists_and_lock(void)
{
	struct cw_error err;
	struct cw_pool *p = NULL;
	struct tp t;

	tp_pool(&t, TP_BS, 1, three, NULL);
	CU_ASSERT(cw_pool_create(t.db, 0, &err, &p) == -EEXIST);
	CU_ASSERT(strstr(err.msg, "already exists") != NULL);
	/* A second opener, in this process or another, is refused. */
	CU_ASSERT(cw_pool_open(t.db, &err, &p) == -EBUSY);
	CU_ASSERT(strstr(err.msg, "another process") != NULL);
	tp_reopen(&t);
	CU_ASSERT(cw_pool_missing_disks(t.pool) == 0);
	tp_fini(&t);
}

static void test_pool_open_refusals(void)
{
	struct cw_error err;
	struct cw_pool *p = NULL;
	char path[160], *before, *after;
	size_t n1, n2;
	struct tp t;
	FILE *f;

	tp_init(&t);
	CU_ASSERT(cw_pool_open(t.db, &err, &p) == -ENOENT);

	/* Not a database at all. */
	tp_path(&t, "junk.db", path, sizeof(path));
	f = fopen(path, "wb");
	CU_ASSERT_FATAL(f != NULL);
	for (int i = 0; i < 8192; i++)
		fputc((i * 7) & 0xff, f);
	fclose(f);
	before = tp_slurp(path, &n1);
	CU_ASSERT(cw_pool_open(path, &err, &p) == -EUCLEAN);
	CU_ASSERT(strstr(err.msg, "not a readable pool database") != NULL);
	after = tp_slurp(path, &n2);
	CU_ASSERT(n1 == n2 && memcmp(before, after, n1) == 0);
	free(before);
	free(after);

	/* An sqlite database of something else. */
	tp_path(&t, "other.db", path, sizeof(path));
	sql_run(path, "CREATE TABLE x (a INTEGER); INSERT INTO x VALUES (1);");
	before = tp_slurp(path, &n1);
	CU_ASSERT(cw_pool_open(path, &err, &p) == -EUCLEAN);
	CU_ASSERT(strstr(err.msg, "not a Clockwise pool") != NULL);
	after = tp_slurp(path, &n2);
	CU_ASSERT(n1 == n2 && memcmp(before, after, n1) == 0);
	free(before);
	free(after);

	/* A pool database from a newer library. */
	CU_ASSERT_FATAL(cw_pool_create(t.db, 0, &err, &t.pool) == 0);
	cw_pool_close(t.pool);
	t.pool = NULL;
	sql_run(t.db, "PRAGMA user_version = 99");
	CU_ASSERT(cw_pool_open(t.db, &err, &p) == -EPROTONOSUPPORT);
	CU_ASSERT(strstr(err.msg, "newer") != NULL);
	CU_ASSERT(sql_int(t.db, "PRAGMA user_version") == 99);
	tp_fini(&t);
}

static void test_pool_damaged_database(void)
{
	struct cw_error err;
	struct cw_pool *p = NULL;
	struct cw_part *part;
	char *before, *after;
	size_t n1, n2;
	struct tp t;
	int fd;

	/* Two runs claiming the same physical blocks. */
	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "a", 4 * TP_BS, NULL, &part) == 0);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "b", 4 * TP_BS, NULL, &part) == 0);
	cw_pool_close(t.pool);
	t.pool = NULL;
	sql_run(t.db, "UPDATE run SET pstart = (SELECT min(pstart) FROM run WHERE part = 1 AND disk = 1)"
		      " WHERE part = 2 AND disk = 1");
	before = tp_slurp(t.db, &n1);
	CU_ASSERT(cw_pool_open(t.db, &err, &p) == -EUCLEAN);
	CU_ASSERT(strstr(err.msg, "owned twice") != NULL);
	after = tp_slurp(t.db, &n2);
	CU_ASSERT(n1 == n2 && memcmp(before, after, n1) == 0);
	free(before);
	free(after);

	/* A partition longer than its runs. */
	sql_run(t.db, "UPDATE run SET pstart = 200 WHERE part = 2 AND disk = 1;"
		      "UPDATE part SET nblocks = nblocks + 1 WHERE id = 2");
	CU_ASSERT(cw_pool_open(t.db, &err, &p) == -EUCLEAN);
	CU_ASSERT(strstr(err.msg, "not mapped") != NULL);
	sql_run(t.db, "UPDATE part SET nblocks = nblocks - 1 WHERE id = 2");
	tp_reopen(&t);
	cw_pool_close(t.pool);
	t.pool = NULL;

	/* Garbage over the middle of the file. */
	fd = open(t.db, O_RDWR);
	CU_ASSERT_FATAL(fd >= 0);
	{
		char junk[4096];

		memset(junk, 0xa5, sizeof(junk));
		CU_ASSERT_FATAL(pwrite(fd, junk, sizeof(junk), 4096) == (ssize_t)sizeof(junk));
	}
	close(fd);
	before = tp_slurp(t.db, &n1);
	CU_ASSERT(cw_pool_open(t.db, &err, &p) == -EUCLEAN);
	CU_ASSERT(err.code == -EUCLEAN && err.msg[0] != '\0');
	after = tp_slurp(t.db, &n2);
	CU_ASSERT(n1 == n2 && memcmp(before, after, n1) == 0);
	free(before);
	free(after);
	tp_fini(&t);
}

/* ---- disks ---- */

static void test_disk_add_list(void)
{
	static const enum cw_tier tiers[] = { CW_TIER_HDD, CW_TIER_HDD, CW_TIER_SSD };
	struct cw_disk_info *v;
	size_t n;
	struct tp t;

	tp_pool(&t, TP_BS, 3, three, tiers);
	CU_ASSERT_FATAL(cw_disk_list(t.pool, &v, &n) == 0);
	CU_ASSERT_FATAL(n == 3);
	for (size_t i = 0; i < n; i++) {
		char name[32], path[160], file[32];
		uint64_t zsum = 0;

		snprintf(name, sizeof(name), "disk%zu", i + 1);
		snprintf(file, sizeof(file), "d%zu.img", i + 1);
		tp_path(&t, file, path, sizeof(path));
		CU_ASSERT(v[i].id == i + 1);
		CU_ASSERT_STRING_EQUAL(v[i].name, name);
		CU_ASSERT_STRING_EQUAL(v[i].path, path);
		CU_ASSERT(v[i].tier == tiers[i]);
		CU_ASSERT(v[i].state == CW_DISK_PRESENT);
		CU_ASSERT(v[i].capacity_bytes == 301 * TP_BS);
		CU_ASSERT(v[i].data_offset_bytes == TP_BS);
		CU_ASSERT(v[i].data_blocks == 300);
		CU_ASSERT(v[i].free_blocks == 300);
		CU_ASSERT(v[i].zone_start_bytes[0] == TP_BS);
		CU_ASSERT(v[i].zone_start_bytes[CW_ZONES] == 301 * TP_BS);
		for (int z = 0; z < CW_ZONES; z++) {
			CU_ASSERT(v[i].zone_start_bytes[z] < v[i].zone_start_bytes[z + 1]);
			CU_ASSERT(v[i].zone_free_blocks[z] * TP_BS ==
				  v[i].zone_start_bytes[z + 1] - v[i].zone_start_bytes[z]);
			zsum += v[i].zone_free_blocks[z];
		}
		CU_ASSERT(zsum == 300);
		CU_ASSERT(cw_disk_fd(t.pool, v[i].id) >= 0);
	}
	free(v);
	CU_ASSERT(cw_disk_fd(t.pool, 9) == -ENOENT);
	/* Labels carry the pool's and the disk's identity. */
	{
		uint8_t head[4096];
		struct label l;
		char path[160];
		struct cw_disk_info di;

		tp_path(&t, "d3.img", path, sizeof(path));
		tp_head(path, head);
		CU_ASSERT_FATAL(lay_label_decode(head, &l) == 0);
		CU_ASSERT(memcmp(l.pool_uuid, cw_pool_uuid(t.pool), 16) == 0);
		CU_ASSERT_FATAL(cw_disk_info(t.pool, 3, &di) == 0);
		CU_ASSERT(memcmp(l.disk_uuid, di.uuid, 16) == 0);
		CU_ASSERT(l.tier == CW_TIER_SSD && l.block_size == TP_BS && l.nblocks == 301);
	}
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_disk_list(t.pool, &v, &n) == 0);
	CU_ASSERT(n == 3 && v[2].tier == CW_TIER_SSD && v[2].free_blocks == 300);
	free(v);
	tp_fini(&t);
}

static void test_disk_add_refusals(void)
{
	struct tp t, other;
	char path[160], alt[160], small[160];
	uint8_t before[4096], after[4096];
	uint32_t id;
	size_t n;
	struct cw_disk_info *v;
	char u[CW_UUID_STRING_LEN + 1];

	tp_pool(&t, TP_BS, 1, three, NULL);
	tp_path(&t, "d1.img", path, sizeof(path));
	/* Same path, and the same file by another name. */
	CU_ASSERT(cw_disk_add(t.pool, path, CW_TIER_HDD, NULL, &id) == -EEXIST);
	tp_path(&t, "hard.img", alt, sizeof(alt));
	CU_ASSERT_FATAL(link(path, alt) == 0);
	CU_ASSERT(cw_disk_add(t.pool, alt, CW_TIER_HDD, NULL, &id) == -EEXIST);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "already disk 1") != NULL);
	unlink(alt);

	/* Too small for a label and one block: nothing written. */
	tp_path(&t, "small.img", small, sizeof(small));
	tp_file(small, 2 * TP_BS - 1);
	CU_ASSERT(cw_disk_add(t.pool, small, CW_TIER_HDD, NULL, &id) == -ENOSPC);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "too small") != NULL);
	tp_head(small, after);
	memset(before, 0, sizeof(before));
	CU_ASSERT(memcmp(before, after, 4096) == 0);

	/* Missing path, not a file or device, bad tier, bad or taken name. */
	tp_path(&t, "nope.img", alt, sizeof(alt));
	CU_ASSERT(cw_disk_add(t.pool, alt, CW_TIER_HDD, NULL, &id) == -ENOENT);
	CU_ASSERT(cw_disk_add(t.pool, t.dir, CW_TIER_HDD, NULL, &id) == -EINVAL ||
		  cw_disk_add(t.pool, t.dir, CW_TIER_HDD, NULL, &id) == -EISDIR);
	CU_ASSERT(cw_disk_add(t.pool, "/dev/null", CW_TIER_HDD, NULL, &id) == -EINVAL);
	tp_file(small, 10 * TP_BS);
	CU_ASSERT(cw_disk_add(t.pool, small, (enum cw_tier)5, NULL, &id) == -EINVAL);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "unknown tier") != NULL);
	CU_ASSERT(cw_disk_add(t.pool, small, CW_TIER_HDD, "bad/name", &id) == -EINVAL);
	CU_ASSERT(cw_disk_add(t.pool, small, CW_TIER_HDD, "disk1", &id) == -EEXIST);
	CU_ASSERT(cw_disk_add(t.pool, NULL, CW_TIER_HDD, NULL, &id) == -EINVAL);
	CU_ASSERT_FATAL(cw_disk_list(t.pool, &v, &n) == 0);
	CU_ASSERT(n == 1);
	free(v);

	/* Another pool's disk: refused, its label untouched. */
	tp_pool(&other, TP_BS, 1, three, NULL);
	tp_path(&other, "d1.img", alt, sizeof(alt));
	tp_head(alt, before);
	CU_ASSERT(cw_disk_add(t.pool, alt, CW_TIER_HDD, NULL, &id) == -EBUSY);
	cw_uuid_format(cw_pool_uuid(other.pool), u);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, u) != NULL);
	tp_head(alt, after);
	CU_ASSERT(memcmp(before, after, 4096) == 0);

	/* A damaged label: refused, untouched. */
	cw_pool_close(other.pool);
	other.pool = NULL;
	{
		int fd = open(alt, O_RDWR);

		CU_ASSERT_FATAL(fd >= 0);
		before[40] ^= 1;
		CU_ASSERT_FATAL(pwrite(fd, before, 4096, 0) == 4096);
		close(fd);
	}
	CU_ASSERT(cw_disk_add(t.pool, alt, CW_TIER_HDD, NULL, &id) == -EUCLEAN);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "damaged") != NULL);
	tp_head(alt, after);
	CU_ASSERT(memcmp(before, after, 4096) == 0);
	tp_fini(&other);

	/* Named disks. */
	CU_ASSERT(cw_disk_add(t.pool, small, CW_TIER_SSD, "fast", &id) == 0);
	CU_ASSERT(id == 2);
	tp_reopen(&t);
	{
		struct cw_disk_info di;

		CU_ASSERT_FATAL(cw_disk_info(t.pool, 2, &di) == 0);
		CU_ASSERT_STRING_EQUAL(di.name, "fast");
		CU_ASSERT(di.data_blocks == 9 && di.tier == CW_TIER_SSD);
	}
	tp_fini(&t);
}

static void test_disk_remove(void)
{
	struct tp t, other;
	struct cw_part *p;
	char path[160];
	uint8_t head[4096], zero[4096] = { 0 };
	uint32_t id;
	size_t n;
	struct cw_disk_info *v;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 3 * TP_BS, NULL, &p) == 0);
	CU_ASSERT(cw_disk_remove(t.pool, 2) == -EBUSY);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "holds 1 blocks") != NULL);
	CU_ASSERT(cw_disk_remove(t.pool, 7) == -ENOENT);
	CU_ASSERT_FATAL(cw_part_delete(p) == 0);
	CU_ASSERT_FATAL(cw_disk_remove(t.pool, 2) == 0);
	tp_path(&t, "d2.img", path, sizeof(path));
	tp_head(path, head);
	CU_ASSERT(memcmp(head, zero, 4096) == 0);
	CU_ASSERT(cw_disk_fd(t.pool, 2) < 0);
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_disk_list(t.pool, &v, &n) == 0);
	CU_ASSERT(n == 2 && v[0].id == 1 && v[1].id == 3);
	free(v);
	/* Free again: another pool may take it; id 2 is reused here. */
	tp_pool(&other, TP_BS, 0, NULL, NULL);
	CU_ASSERT(cw_disk_add(other.pool, path, CW_TIER_HDD, NULL, &id) == 0);
	CU_ASSERT(cw_disk_add(t.pool, path, CW_TIER_HDD, NULL, &id) == -EBUSY);
	tp_fini(&other);
	tp_fini(&t);
}

/* ---- partitions ---- */

static void test_part_rotation_map(void)
{
	struct tp t;
	struct cw_part *p;
	struct cw_extent e;
	uint32_t disks[12];
	uint64_t seen[12];

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "video", 11 * TP_BS + 1, NULL, &p) == 0);
	CU_ASSERT(cw_part_nblocks(p) == 12);
	CU_ASSERT(cw_part_size_bytes(p) == 12 * TP_BS);
	CU_ASSERT_FATAL(cw_part_block_disks(p, 0, 12, disks) == 0);
	for (int b = 0; b < 12; b++) {
		CU_ASSERT(disks[b] == (uint32_t)(b % 3) + 1);
		seen[b] = where(p, b);
		for (int k = 0; k < b; k++)
			CU_ASSERT(seen[k] != seen[b]);
	}
	/* Within a block, the offset carries over; the extent stops at the
	 * block because the next one is on another disk. */
	CU_ASSERT_FATAL(cw_part_map(p, 4 * TP_BS + 100, 10 * TP_BS, &e) == 0);
	CU_ASSERT(e.disk_id == 2);
	CU_ASSERT(e.phys_offset == (seen[4] & 0xffffffffffff) * TP_BS + 100);
	CU_ASSERT(e.length == TP_BS - 100);
	CU_ASSERT_FATAL(cw_part_map(p, 4 * TP_BS + 100, 50, &e) == 0);
	CU_ASSERT(e.length == 50);
	CU_ASSERT(cw_part_map(p, 12 * TP_BS, 0, &e) == -ERANGE);
	CU_ASSERT(cw_part_block_disks(p, 10, 3, disks) == -ERANGE);
	CU_ASSERT(e.phys_offset >= TP_BS);	/* never the label */
	tp_check_totals(t.pool, 0);
	CU_ASSERT(disk_free(t.pool, 1) == 296);
	tp_fini(&t);
}

static void test_part_single_contiguous(void)
{
	struct tp t;
	struct cw_part *p, *q;
	struct cw_extent e;
	struct cw_part_opts o = { .placement = CW_PLACE_SINGLE, .zone = CW_ZONE_OUTER };
	uint32_t disks[40];

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "one", 40 * TP_BS, &o, &p) == 0);
	CU_ASSERT_FATAL(cw_part_block_disks(p, 0, 40, disks) == 0);
	for (int b = 1; b < 40; b++)
		CU_ASSERT(disks[b] == disks[0]);
	/* Outer zone on an empty disk: blocks 1..40, one extent. */
	CU_ASSERT_FATAL(cw_part_map(p, 0, 40 * TP_BS, &e) == 0);
	CU_ASSERT(e.phys_offset == TP_BS);
	CU_ASSERT(e.length == 40 * TP_BS);
	CU_ASSERT_FATAL(cw_part_map(p, TP_BS / 2, 0, &e) == 0);
	CU_ASSERT(e.length == TP_BS / 2);
	/* Single picks the disk with most room: not the one already used. */
	CU_ASSERT_FATAL(cw_part_create(t.pool, "two", 5 * TP_BS, &o, &q) == 0);
	CU_ASSERT_FATAL(cw_part_block_disks(q, 0, 1, &disks[1]) == 0);
	CU_ASSERT(disks[1] != disks[0]);
	/* Growing stays on the disk. */
	CU_ASSERT_FATAL(cw_part_resize(p, 50 * TP_BS) == 0);
	CU_ASSERT_FATAL(cw_part_block_disks(p, 0, 40, disks) == 0);
	CU_ASSERT_FATAL(cw_part_block_disks(p, 40, 10, disks + 1) == 0);
	for (int b = 1; b < 11; b++)
		CU_ASSERT(disks[b] == disks[0]);
	/* A pinned disk. */
	o.disk_id = 3;
	CU_ASSERT_FATAL(cw_part_create(t.pool, "three", 2 * TP_BS, &o, &q) == 0);
	CU_ASSERT_FATAL(cw_part_block_disks(q, 0, 2, disks) == 0);
	CU_ASSERT(disks[0] == 3 && disks[1] == 3);
	o.disk_id = 9;
	CU_ASSERT(cw_part_create(t.pool, "four", TP_BS, &o, &q) == -ENOENT);
	o.disk_id = 1;
	o.placement = CW_PLACE_ROTATION;
	CU_ASSERT(cw_part_create(t.pool, "four", TP_BS, &o, &q) == -EINVAL);
	/* Single fails when no one disk has the room, even if all together do. */
	o = (struct cw_part_opts){ .placement = CW_PLACE_SINGLE };
	CU_ASSERT(cw_part_create(t.pool, "big", 400 * TP_BS, &o, &q) == -ENOSPC);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "on one disk") != NULL);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

static void test_part_random(void)
{
	struct tp t;
	struct cw_part *p;
	struct cw_part_opts o = { .placement = CW_PLACE_RANDOM };
	uint32_t disks[600];
	unsigned per[4] = { 0 };

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "r", 600 * TP_BS, &o, &p) == 0);
	CU_ASSERT_FATAL(cw_part_block_disks(p, 0, 600, disks) == 0);
	for (int b = 0; b < 600; b++) {
		CU_ASSERT_FATAL(disks[b] >= 1 && disks[b] <= 3);
		per[disks[b]]++;
	}
	/* 600 draws over 3 disks: each far from empty and from full. */
	for (int d = 1; d <= 3; d++)
		CU_ASSERT(per[d] > 100 && per[d] <= 300);
	/* And a random partition that fills the rest of the pool. */
	CU_ASSERT_FATAL(cw_part_create(t.pool, "rest", 300 * TP_BS, &o, &p) == 0);
	CU_ASSERT(disk_free(t.pool, 1) + disk_free(t.pool, 2) + disk_free(t.pool, 3) == 0);
	tp_reopen(&t);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

static void test_part_tiers(void)
{
	static const enum cw_tier tiers[] = { CW_TIER_HDD, CW_TIER_SSD, CW_TIER_HDD };
	static const uint64_t sizes[] = { 301, 11, 301 };
	struct tp t;
	struct cw_part *p;
	struct cw_part_opts o = { .placement = CW_PLACE_ROTATION, .tier = CW_TIER_PREF_SSD };
	uint32_t disks[30];

	tp_pool(&t, TP_BS, 3, sizes, tiers);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "hot", 6 * TP_BS, &o, &p) == 0);
	CU_ASSERT_FATAL(cw_part_block_disks(p, 0, 6, disks) == 0);
	for (int b = 0; b < 6; b++)
		CU_ASSERT(disks[b] == 2);
	/* More than the SSD tier holds: refused with the free space found
	 * there (10 blocks less the 6 of "hot"), unless it may fall back. */
	CU_ASSERT(cw_part_create(t.pool, "warm", 9 * TP_BS, &o, &p) == -ENOSPC);
	CU_ASSERT(cw_pool_last_error(t.pool)->needed_bytes == 9 * TP_BS);
	CU_ASSERT(cw_pool_last_error(t.pool)->available_bytes == 4 * TP_BS);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "SSD tier") != NULL);
	o.tier_fallback = true;
	CU_ASSERT_FATAL(cw_part_create(t.pool, "warm", 9 * TP_BS, &o, &p) == 0);
	CU_ASSERT_FATAL(cw_part_block_disks(p, 0, 9, disks) == 0);
	CU_ASSERT(disks[0] == 1 && disks[1] == 2 && disks[2] == 3);
	/* The choice is kept: growing "hot" past the SSDs is refused after
	 * a reopen too, growing "warm" falls back. */
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "hot", &p) == 0);
	CU_ASSERT(cw_part_resize(p, 40 * TP_BS) == -ENOSPC);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "warm", &p) == 0);
	CU_ASSERT(cw_part_resize(p, 12 * TP_BS) == 0);
	o.tier_fallback = false;
	o.tier = CW_TIER_PREF_HDD;
	CU_ASSERT_FATAL(cw_part_create(t.pool, "cold", 30 * TP_BS, &o, &p) == 0);
	CU_ASSERT_FATAL(cw_part_block_disks(p, 0, 30, disks) == 0);
	for (int b = 0; b < 30; b++)
		CU_ASSERT(disks[b] == 1 || disks[b] == 3);
	tp_fini(&t);
}

static void test_part_zones(void)
{
	static const uint64_t one[] = { 301 };
	struct tp t;
	struct cw_part *p;
	struct cw_extent e;
	struct cw_disk_info di;
	struct cw_part_opts o = { .placement = CW_PLACE_SINGLE, .zone = CW_ZONE_INNER };

	tp_pool(&t, TP_BS, 1, one, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "in", 3 * TP_BS, &o, &p) == 0);
	/* Inner: highest addresses first. */
	CU_ASSERT_FATAL(cw_part_map(p, 0, 0, &e) == 0);
	CU_ASSERT(e.phys_offset == 300 * TP_BS);
	CU_ASSERT_FATAL(cw_part_map(p, 2 * TP_BS, 0, &e) == 0);
	CU_ASSERT(e.phys_offset == 298 * TP_BS);
	CU_ASSERT_FATAL(cw_disk_info(t.pool, 1, &di) == 0);
	CU_ASSERT(di.zone_free_blocks[2] == 97 && di.zone_free_blocks[0] == 100);
	o.zone = CW_ZONE_OUTER;
	CU_ASSERT_FATAL(cw_part_create(t.pool, "out", 2 * TP_BS, &o, &p) == 0);
	CU_ASSERT_FATAL(cw_part_map(p, 0, 0, &e) == 0);
	CU_ASSERT(e.phys_offset == TP_BS);
	CU_ASSERT_FATAL(cw_disk_info(t.pool, 1, &di) == 0);
	CU_ASSERT(di.zone_free_blocks[0] == 98);
	CU_ASSERT(e.phys_offset >= di.zone_start_bytes[0] && e.phys_offset < di.zone_start_bytes[1]);
	/* A freed outer block is the next one taken. */
	CU_ASSERT_FATAL(cw_part_resize(p, TP_BS) == 0);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "out2", TP_BS, &o, &p) == 0);
	CU_ASSERT_FATAL(cw_part_map(p, 0, 0, &e) == 0);
	CU_ASSERT(e.phys_offset == 2 * TP_BS);
	/* The outer zone full: outer spills into the middle zone. */
	CU_ASSERT_FATAL(cw_part_create(t.pool, "fill", 100 * TP_BS, &o, &p) == 0);
	CU_ASSERT_FATAL(cw_part_map(p, 99 * TP_BS, 0, &e) == 0);
	CU_ASSERT_FATAL(cw_disk_info(t.pool, 1, &di) == 0);
	CU_ASSERT(e.phys_offset >= di.zone_start_bytes[1] && e.phys_offset < di.zone_start_bytes[2]);
	CU_ASSERT(di.zone_free_blocks[0] == 0);
	tp_reopen(&t);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

static void test_part_grow_shrink(void)
{
	struct tp t;
	struct cw_part *p;
	uint64_t before[10];
	uint32_t disks[6];
	struct cw_extent e;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "g", 4 * TP_BS, NULL, &p) == 0);
	for (int b = 0; b < 4; b++)
		before[b] = where(p, b);
	CU_ASSERT_FATAL(cw_part_resize(p, 6 * TP_BS) == 0);
	for (int b = 0; b < 4; b++)
		CU_ASSERT(where(p, b) == before[b]);
	/* Rotation continues after the last block's disk (1): 2, 3. */
	CU_ASSERT_FATAL(cw_part_block_disks(p, 0, 6, disks) == 0);
	CU_ASSERT(disks[3] == 1 && disks[4] == 2 && disks[5] == 3);
	for (int b = 0; b < 6; b++)
		before[b] = where(p, b);
	CU_ASSERT_FATAL(cw_part_resize(p, 2 * TP_BS + 1) == 0);
	CU_ASSERT(cw_part_nblocks(p) == 3);
	CU_ASSERT(cw_part_map(p, 3 * TP_BS, 0, &e) == -ERANGE);
	CU_ASSERT(disk_free(t.pool, 1) + disk_free(t.pool, 2) + disk_free(t.pool, 3) == 897);
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "g", &p) == 0);
	CU_ASSERT(cw_part_nblocks(p) == 3);
	for (int b = 0; b < 3; b++)
		CU_ASSERT(where(p, b) == before[b]);
	CU_ASSERT_FATAL(cw_part_resize(p, 0) == 0);
	CU_ASSERT(cw_part_map(p, 0, 0, &e) == -ERANGE);
	CU_ASSERT_FATAL(cw_part_resize(p, TP_BS) == 0);
	CU_ASSERT(cw_part_resize(p, UINT64_MAX) == -EINVAL);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

static void test_part_enospc(void)
{
	struct tp t;
	struct cw_part *p, *q;
	const struct cw_error *err;
	struct cw_part_info *v;
	size_t n;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "a", 100 * TP_BS, NULL, &p) == 0);
	CU_ASSERT(cw_part_create(t.pool, "huge", 801 * TP_BS, NULL, &q) == -ENOSPC);
	err = cw_pool_last_error(t.pool);
	CU_ASSERT(err->code == -ENOSPC);
	CU_ASSERT(err->needed_bytes == 801 * TP_BS);
	CU_ASSERT(err->available_bytes == 800 * TP_BS);
	CU_ASSERT(strstr(err->msg, "needs 52494336 bytes") != NULL);
	CU_ASSERT(strstr(err->msg, "52428800 bytes") != NULL);
	CU_ASSERT(disk_free(t.pool, 1) + disk_free(t.pool, 2) + disk_free(t.pool, 3) == 800);
	CU_ASSERT_FATAL(cw_part_list(t.pool, &v, &n) == 0);
	CU_ASSERT(n == 1);
	free(v);
	/* Growing past the free space: the same, the partition unchanged. */
	CU_ASSERT(cw_part_resize(p, 901 * TP_BS) == -ENOSPC);
	CU_ASSERT(cw_pool_last_error(t.pool)->needed_bytes == 801 * TP_BS);
	CU_ASSERT(cw_part_nblocks(p) == 100);
	/* An absurd size (2048 TiB: a block map of 256 GiB here) is refused
	 * from the free-space numbers, before its map is allocated (which
	 * would fail with ENOMEM, or take seconds). */
	CU_ASSERT(cw_part_create(t.pool, "absurd", UINT64_C(2048) << 40, NULL, &q) == -ENOSPC);
	CU_ASSERT(cw_pool_last_error(t.pool)->needed_bytes == UINT64_C(2048) << 40);
	CU_ASSERT(cw_pool_last_error(t.pool)->available_bytes == 800 * TP_BS);
	CU_ASSERT(cw_part_resize(p, UINT64_C(2048) << 40) == -ENOSPC);
	CU_ASSERT(cw_pool_last_error(t.pool)->needed_bytes ==
		  (UINT64_C(2048) << 40) - 100 * TP_BS);
	CU_ASSERT(cw_part_nblocks(p) == 100);
	/* Exactly the free space fits. */
	CU_ASSERT_FATAL(cw_part_resize(p, 900 * TP_BS) == 0);
	tp_reopen(&t);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

static void test_part_names_and_options(void)
{
	static const char *const bad[] = { "", ".hidden", "-x", "a/b", "a b", "caf\xc3\xa9" };
	struct tp t;
	struct cw_part *p, *q;
	struct cw_part_opts o = { 0 };
	char longname[80];
	enum cw_placement pl;
	enum cw_tier_pref tp;
	enum cw_zone_pref zp;
	enum cw_tier tier;

	tp_pool(&t, TP_BS, 3, three, NULL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CU_ASSERT(cw_part_create(t.pool, bad[i], TP_BS, NULL, &p) == -EINVAL);
		CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "invalid partition name") != NULL);
	}
	CU_ASSERT(cw_part_create(t.pool, NULL, TP_BS, NULL, &p) == -EINVAL);
	memset(longname, 'x', sizeof(longname));
	longname[CW_NAME_MAX + 1] = '\0';
	CU_ASSERT(cw_part_create(t.pool, longname, TP_BS, NULL, &p) == -EINVAL);
	longname[CW_NAME_MAX] = '\0';
	CU_ASSERT(cw_part_create(t.pool, longname, TP_BS, NULL, &p) == 0);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "x.1_B-2", TP_BS, NULL, &p) == 0);
	CU_ASSERT(cw_part_create(t.pool, "x.1_B-2", TP_BS, NULL, &q) == -EEXIST);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "already exists") != NULL);

	o.placement = (enum cw_placement)7;
	CU_ASSERT(cw_part_create(t.pool, "o", TP_BS, &o, &q) == -EINVAL);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "unknown placement") != NULL);
	o.placement = CW_PLACE_RANDOM;
	o.tier = (enum cw_tier_pref)-1;
	CU_ASSERT(cw_part_create(t.pool, "o", TP_BS, &o, &q) == -EINVAL);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "unknown tier") != NULL);
	o.tier = CW_TIER_PREF_NONE;
	o.zone = (enum cw_zone_pref)3;
	CU_ASSERT(cw_part_create(t.pool, "o", TP_BS, &o, &q) == -EINVAL);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "unknown zone") != NULL);
	CU_ASSERT(disk_free(t.pool, 1) + disk_free(t.pool, 2) + disk_free(t.pool, 3) == 898);

	CU_ASSERT(cw_placement_parse("single", &pl) == 0 && pl == CW_PLACE_SINGLE);
	CU_ASSERT(cw_placement_parse("striped", &pl) == -EINVAL);
	CU_ASSERT(cw_tier_pref_parse("ssd", &tp) == 0 && tp == CW_TIER_PREF_SSD);
	CU_ASSERT(cw_tier_pref_parse("tape", &tp) == -EINVAL);
	CU_ASSERT(cw_zone_pref_parse("inner", &zp) == 0 && zp == CW_ZONE_INNER);
	CU_ASSERT(cw_zone_pref_parse(NULL, &zp) == -EINVAL);
	CU_ASSERT(cw_tier_parse("hdd", &tier) == 0 && tier == CW_TIER_HDD);
	CU_ASSERT(cw_tier_parse("HDD", &tier) == -EINVAL);
	CU_ASSERT_STRING_EQUAL(cw_placement_name(CW_PLACE_ROTATION), "rotation");
	CU_ASSERT(cw_zone_pref_name((enum cw_zone_pref)9) == NULL);
	tp_fini(&t);
}

static void test_part_rename_delete_list(void)
{
	struct tp t;
	struct cw_part *a, *b, *x;
	struct cw_part_info *v, info;
	size_t n;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "a", 5 * TP_BS, NULL, &a) == 0);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "b", 7 * TP_BS, NULL, &b) == 0);
	CU_ASSERT(cw_part_rename(a, "b") == -EEXIST);
	CU_ASSERT(cw_part_rename(a, "no/slash") == -EINVAL);
	CU_ASSERT_FATAL(cw_part_rename(a, "alpha") == 0);
	CU_ASSERT(cw_part_lookup(t.pool, "a", &x) == -ENOENT);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "no partition named 'a'") != NULL);
	CU_ASSERT(cw_part_lookup(t.pool, "alpha", &x) == 0 && x == a);
	CU_ASSERT_FATAL(cw_part_info(a, &info) == 0);
	CU_ASSERT_STRING_EQUAL(info.name, "alpha");
	CU_ASSERT(info.nblocks == 5 && info.size_bytes == 5 * TP_BS && info.available);
	CU_ASSERT_FATAL(cw_part_delete(b) == 0);
	CU_ASSERT(cw_part_lookup(t.pool, "b", &x) == -ENOENT);
	CU_ASSERT(disk_free(t.pool, 1) + disk_free(t.pool, 2) + disk_free(t.pool, 3) == 895);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "b", TP_BS, NULL, &b) == 0);
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_list(t.pool, &v, &n) == 0);
	CU_ASSERT_FATAL(n == 2);
	CU_ASSERT_STRING_EQUAL(v[0].name, "alpha");
	CU_ASSERT_STRING_EQUAL(v[1].name, "b");
	CU_ASSERT(v[0].id < v[1].id && v[0].nblocks == 5 && v[1].nblocks == 1);
	free(v);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

static void test_runs_compact(void)
{
	struct tp t;
	struct cw_part *p;
	struct cw_part_opts o = { .placement = CW_PLACE_SINGLE };

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "stripe", 900 * TP_BS, NULL, &p) == 0);
	CU_ASSERT_FATAL(cw_part_resize(p, 600 * TP_BS) == 0);
	/* Growing a block at a time extends the runs, adds no rows. */
	for (uint64_t n = 601; n <= 630; n++)
		CU_ASSERT_FATAL(cw_part_resize(p, n * TP_BS) == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM run WHERE part = 1") == 3);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "one", 90 * TP_BS, &o, &p) == 0);
	cw_pool_close(t.pool);
	t.pool = NULL;
	/* Rotation over 3 disks: 3 rows; single: 1 — not a row per block. */
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM run WHERE part = 1") == 3);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM run WHERE part = 2") == 1);
	CU_ASSERT(sql_int(t.db, "SELECT sum(count) FROM run") == 720);
	/* WAL is a property of the file. */
	CU_ASSERT(sql_int(t.db, "SELECT journal_mode = 'wal' FROM pragma_journal_mode") == 1);
	tp_reopen(&t);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

/* Every block's location survives close and open, whatever was done. */
static void test_reopen_round_trip(void)
{
	static const enum cw_tier tiers[] = { CW_TIER_HDD, CW_TIER_HDD, CW_TIER_SSD };
	struct tp t;
	struct cw_part *p[4];
	struct cw_part_opts o[4] = {
		{ .placement = CW_PLACE_ROTATION },
		{ .placement = CW_PLACE_RANDOM, .zone = CW_ZONE_INNER },
		{ .placement = CW_PLACE_SINGLE, .zone = CW_ZONE_OUTER },
		{ .placement = CW_PLACE_ROTATION, .tier = CW_TIER_PREF_SSD },
	};
	static const char *const names[] = { "rot", "rnd", "one", "fast" };
	struct cw_move_opts mo = { .placement = CW_PLACE_ROTATION, .tier = CW_TIER_PREF_SSD };
	struct cw_move *m;
	uint64_t *loc[4], nb[4], freeb[4];

	tp_pool(&t, TP_BS, 3, three, tiers);
	for (int i = 0; i < 4; i++)
		CU_ASSERT_FATAL(cw_part_create(t.pool, names[i], (uint64_t)(20 + 7 * i) * TP_BS,
					       &o[i], &p[i]) == 0);
	CU_ASSERT_FATAL(cw_part_resize(p[0], 50 * TP_BS) == 0);
	CU_ASSERT_FATAL(cw_part_resize(p[1], 10 * TP_BS) == 0);
	CU_ASSERT_FATAL(cw_part_resize(p[2], 60 * TP_BS) == 0);
	CU_ASSERT_FATAL(cw_move_plan(p[0], 5, 30, &mo, &m) == 0);
	CU_ASSERT_FATAL(cw_move_commit(m) == 0);
	CU_ASSERT_FATAL(cw_part_resize(p[0], 45 * TP_BS) == 0);
	for (int i = 0; i < 4; i++) {
		nb[i] = cw_part_nblocks(p[i]);
		loc[i] = malloc(nb[i] * sizeof(uint64_t));
		for (uint64_t b = 0; b < nb[i]; b++)
			loc[i][b] = where(p[i], b);
	}
	for (uint32_t d = 1; d <= 3; d++)
		freeb[d] = disk_free(t.pool, d);
	tp_reopen(&t);
	for (int i = 0; i < 4; i++) {
		struct cw_part *q;

		CU_ASSERT_FATAL(cw_part_lookup(t.pool, names[i], &q) == 0);
		CU_ASSERT_FATAL(cw_part_nblocks(q) == nb[i]);
		for (uint64_t b = 0; b < nb[i]; b++)
			CU_ASSERT(where(q, b) == loc[i][b]);
		free(loc[i]);
	}
	for (uint32_t d = 1; d <= 3; d++)
		CU_ASSERT(disk_free(t.pool, d) == freeb[d]);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

/* ---- moves ---- */

static void test_move_commit_abort(void)
{
	static const enum cw_tier tiers[] = { CW_TIER_HDD, CW_TIER_HDD, CW_TIER_SSD };
	struct tp t;
	struct cw_part *p;
	struct cw_move *m;
	struct cw_move_step st;
	struct cw_move_opts mo = { .placement = CW_PLACE_ROTATION, .tier = CW_TIER_PREF_SSD };
	struct cw_part_opts o = { .placement = CW_PLACE_ROTATION, .tier = CW_TIER_PREF_HDD };
	uint64_t before[12], ssd_free;
	uint32_t disks[12];

	tp_pool(&t, TP_BS, 3, three, tiers);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 12 * TP_BS, &o, &p) == 0);
	for (int b = 0; b < 12; b++)
		before[b] = where(p, b);
	ssd_free = disk_free(t.pool, 3);

	/* Abort: the targets are free again, nothing moved. */
	CU_ASSERT_FATAL(cw_move_plan(p, 2, 6, &mo, &m) == 0);
	CU_ASSERT(cw_move_nsteps(m) == 6);
	CU_ASSERT(disk_free(t.pool, 3) == ssd_free - 6);
	tp_check_totals(t.pool, 6);
	cw_move_abort(m);
	CU_ASSERT(disk_free(t.pool, 3) == ssd_free);
	for (int b = 0; b < 12; b++)
		CU_ASSERT(where(p, b) == before[b]);

	/* Commit: the range is on the SSD, the rest where it was, the old
	 * blocks free. */
	CU_ASSERT_FATAL(cw_move_plan(p, 2, 6, &mo, &m) == 0);
	for (size_t i = 0; i < cw_move_nsteps(m); i++) {
		CU_ASSERT_FATAL(cw_move_step(m, i, &st) == 0);
		CU_ASSERT(st.block == 2 + i);
		CU_ASSERT(((uint64_t)st.src_disk_id << 48 | st.src_offset / TP_BS) == before[st.block]);
		CU_ASSERT(st.dst_disk_id == 3 && st.dst_offset >= TP_BS);
		/* Not switched before the commit. */
		CU_ASSERT(where(p, st.block) == before[st.block]);
	}
	CU_ASSERT(cw_move_step(m, 6, &st) == -ERANGE);
	CU_ASSERT_FATAL(cw_move_commit(m) == 0);
	CU_ASSERT_FATAL(cw_part_block_disks(p, 0, 12, disks) == 0);
	for (int b = 0; b < 12; b++) {
		if (b >= 2 && b < 8) {
			CU_ASSERT(disks[b] == 3);
		} else {
			CU_ASSERT(where(p, b) == before[b]);
		}
	}
	CU_ASSERT(disk_free(t.pool, 3) == ssd_free - 6);
	CU_ASSERT(disk_free(t.pool, 1) + disk_free(t.pool, 2) == 600 - 6);
	tp_check_totals(t.pool, 0);

	/* A second move of the same range to the SSD has nothing to do. */
	CU_ASSERT_FATAL(cw_move_plan(p, 2, 6, &mo, &m) == 0);
	CU_ASSERT(cw_move_nsteps(m) == 0);
	CU_ASSERT_FATAL(cw_move_commit(m) == 0);

	/* Back to named disks, single placement: all onto one of them. */
	{
		uint32_t ids[] = { 2 };
		struct cw_move_opts back = { .placement = CW_PLACE_SINGLE, .disk_ids = ids,
					     .ndisks = 1, .zone = CW_ZONE_INNER };

		size_t stay = 0;

		CU_ASSERT_FATAL(cw_part_block_disks(p, 0, 12, disks) == 0);
		for (int b = 0; b < 12; b++)
			stay += disks[b] == 2;
		CU_ASSERT(stay == 3);
		CU_ASSERT_FATAL(cw_move_plan(p, 0, 12, &back, &m) == 0);
		CU_ASSERT(cw_move_nsteps(m) == 12 - stay);
		CU_ASSERT_FATAL(cw_move_commit(m) == 0);
		CU_ASSERT_FATAL(cw_part_block_disks(p, 0, 12, disks) == 0);
		for (int b = 0; b < 12; b++)
			CU_ASSERT(disks[b] == 2);
	}
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT_FATAL(cw_part_block_disks(p, 0, 12, disks) == 0);
	for (int b = 0; b < 12; b++)
		CU_ASSERT(disks[b] == 2);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

static void test_move_refusals(void)
{
	static const enum cw_tier tiers[] = { CW_TIER_HDD, CW_TIER_HDD, CW_TIER_SSD };
	static const uint64_t sizes[] = { 301, 301, 5 };
	struct tp t;
	struct cw_part *p;
	struct cw_move *m, *m2;
	struct cw_move_opts mo = { .placement = CW_PLACE_ROTATION, .tier = CW_TIER_PREF_SSD };
	struct cw_part_opts o = { .placement = CW_PLACE_ROTATION, .tier = CW_TIER_PREF_HDD };
	uint32_t bad_ids[] = { 42 };

	tp_pool(&t, TP_BS, 3, sizes, tiers);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 20 * TP_BS, &o, &p) == 0);
	CU_ASSERT(cw_move_plan(p, 0, 10, &mo, &m) == -ENOSPC);
	CU_ASSERT(cw_pool_last_error(t.pool)->needed_bytes == 10 * TP_BS);
	CU_ASSERT(cw_pool_last_error(t.pool)->available_bytes == 4 * TP_BS);
	CU_ASSERT(disk_free(t.pool, 3) == 4);
	CU_ASSERT(cw_move_plan(p, 15, 6, &mo, &m) == -ERANGE);
	CU_ASSERT(cw_move_plan(p, 20, 1, &mo, &m) == -ERANGE);
	CU_ASSERT(cw_move_plan(p, 0, 0, &mo, &m) == -EINVAL);
	CU_ASSERT(cw_move_plan(p, 0, 1, NULL, &m) == -EINVAL);
	mo.disk_ids = bad_ids;
	mo.ndisks = 1;
	CU_ASSERT(cw_move_plan(p, 0, 1, &mo, &m) == -ENOENT);
	mo.disk_ids = NULL;
	mo.ndisks = 0;

	/* The partition shrinks under a plan: the commit is refused. */
	CU_ASSERT_FATAL(cw_move_plan(p, 16, 4, &mo, &m) == 0);
	CU_ASSERT_FATAL(cw_part_resize(p, 18 * TP_BS) == 0);
	CU_ASSERT(cw_move_commit(m) == -ESTALE);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "changed") != NULL);
	cw_move_abort(m);
	CU_ASSERT(disk_free(t.pool, 3) == 4);
	/* Two plans over one range: the second commit is stale. */
	CU_ASSERT_FATAL(cw_move_plan(p, 0, 2, &mo, &m) == 0);
	CU_ASSERT_FATAL(cw_move_plan(p, 0, 2, &mo, &m2) == 0);
	CU_ASSERT_FATAL(cw_move_commit(m) == 0);
	CU_ASSERT(cw_move_commit(m2) == -ESTALE);
	cw_move_abort(m2);
	/* Deleting the partition drops its plans. */
	CU_ASSERT_FATAL(cw_move_plan(p, 4, 2, &mo, &m) == 0);
	CU_ASSERT(disk_free(t.pool, 3) == 0);
	CU_ASSERT_FATAL(cw_part_delete(p) == 0);
	CU_ASSERT(disk_free(t.pool, 3) == 4);
	tp_check_totals(t.pool, 0);
	/* A plan left pending at close leaves nothing behind. */
	CU_ASSERT_FATAL(cw_part_create(t.pool, "q", 4 * TP_BS, &o, &p) == 0);
	CU_ASSERT_FATAL(cw_move_plan(p, 0, 4, &mo, &m) == 0);
	tp_reopen(&t);
	CU_ASSERT(disk_free(t.pool, 3) == 4);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

/* ---- degraded open, swaps, foreign disks ---- */

static void test_degraded_open(void)
{
	struct tp t;
	struct cw_part *rot, *one, *x;
	struct cw_part_opts o = { .placement = CW_PLACE_SINGLE, .disk_id = 1 };
	struct cw_extent e;
	struct cw_error err;
	struct cw_disk_info di;
	struct cw_part_info info;
	struct cw_move *m;
	struct cw_move_opts mo = { .placement = CW_PLACE_ROTATION };
	uint64_t loc;
	char path[160];
	uint32_t disks[4];

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "rot", 6 * TP_BS, NULL, &rot) == 0);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "one", 4 * TP_BS, &o, &one) == 0);
	loc = where(one, 3);
	cw_pool_close(t.pool);
	t.pool = NULL;
	tp_path(&t, "d3.img", path, sizeof(path));
	CU_ASSERT_FATAL(unlink(path) == 0);

	CU_ASSERT_FATAL(cw_pool_open(t.db, &err, &t.pool) == 0);
	CU_ASSERT(cw_pool_missing_disks(t.pool) == 1);
	CU_ASSERT(strstr(err.msg, "degraded") != NULL && strstr(err.msg, "disk 3") != NULL);
	CU_ASSERT_FATAL(cw_disk_info(t.pool, 3, &di) == 0);
	CU_ASSERT(di.state == CW_DISK_MISSING);
	CU_ASSERT(cw_disk_fd(t.pool, 3) < 0);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "rot", &rot) == 0);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "one", &one) == 0);
	/* Exactly the blocks on disk 3 (2 and 5 of 1, 2, 3, 1, 2, 3) are
	 * unavailable; the others still map. */
	CU_ASSERT(cw_part_map(rot, 0, 0, &e) == 0 && e.disk_id == 1 && e.length == TP_BS);
	CU_ASSERT(cw_part_map(rot, 2 * TP_BS + 512, 0, &e) == -ENODEV);
	CU_ASSERT(e.disk_id == 3 && e.length == TP_BS - 512);
	CU_ASSERT(cw_part_map(rot, 2 * TP_BS, 4 * TP_BS, &e) == -ENODEV && e.length == TP_BS);
	CU_ASSERT(cw_part_map(rot, 5 * TP_BS, 0, &e) == -ENODEV && e.disk_id == 3);
	CU_ASSERT(cw_part_map(rot, 4 * TP_BS, 2 * TP_BS, &e) == 0 && e.disk_id == 2 &&
		  e.length == TP_BS);
	CU_ASSERT(cw_part_map(rot, 6 * TP_BS, 0, &e) == -ERANGE);
	CU_ASSERT_FATAL(cw_part_info(rot, &info) == 0);
	CU_ASSERT(!info.available && info.missing_blocks == 2);
	CU_ASSERT_FATAL(cw_part_info(one, &info) == 0);
	CU_ASSERT(info.available && info.missing_blocks == 0);
	CU_ASSERT(cw_part_resize(rot, TP_BS) == -ENODEV);
	CU_ASSERT(cw_move_plan(rot, 0, 1, &mo, &m) == -ENODEV);
	/* The partition on present disks keeps working. */
	CU_ASSERT(where(one, 3) == loc);
	CU_ASSERT_FATAL(cw_part_resize(one, 8 * TP_BS) == 0);
	/* New space comes from present disks only. */
	CU_ASSERT_FATAL(cw_part_create(t.pool, "new", 4 * TP_BS, NULL, &x) == 0);
	CU_ASSERT_FATAL(cw_part_block_disks(x, 0, 4, disks) == 0);
	for (int b = 0; b < 4; b++)
		CU_ASSERT(disks[b] == 1 || disks[b] == 2);
	/* Deleting the unavailable partition is allowed, and frees its
	 * blocks on the missing disk too. */
	CU_ASSERT_FATAL(cw_part_delete(rot) == 0);
	CU_ASSERT(cw_disk_remove(t.pool, 3) == 0);
	tp_reopen(&t);
	CU_ASSERT(cw_pool_missing_disks(t.pool) == 0);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

static void test_path_swap(void)
{
	struct tp t;
	struct cw_part *p;
	struct cw_disk_info di;
	char p1[160], p2[160], tmp[160];
	uint8_t data[4096], back[4096];
	struct cw_extent e;

	tp_pool(&t, TP_BS, 2, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 2 * TP_BS, NULL, &p) == 0);
	/* Write a pattern into block 1 (disk 2) through the pool's fd. */
	CU_ASSERT_FATAL(cw_part_map(p, TP_BS, 0, &e) == 0);
	CU_ASSERT_FATAL(e.disk_id == 2);
	for (int i = 0; i < 4096; i++)
		data[i] = (uint8_t)(i * 31 + 7);
	CU_ASSERT_FATAL(pwrite(cw_disk_fd(t.pool, 2), data, 4096, (off_t)e.phys_offset) == 4096);
	cw_pool_close(t.pool);
	t.pool = NULL;
	tp_path(&t, "d1.img", p1, sizeof(p1));
	tp_path(&t, "d2.img", p2, sizeof(p2));
	tp_path(&t, "tmp.img", tmp, sizeof(tmp));
	CU_ASSERT_FATAL(rename(p1, tmp) == 0 && rename(p2, p1) == 0 && rename(tmp, p2) == 0);

	/* Reassembled by UUID: disk 2 is now found at d1.img. */
	tp_reopen(&t);
	CU_ASSERT(cw_pool_missing_disks(t.pool) == 0);
	CU_ASSERT_FATAL(cw_disk_info(t.pool, 2, &di) == 0);
	CU_ASSERT_STRING_EQUAL(di.path, p1);
	CU_ASSERT(di.state == CW_DISK_PRESENT);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT_FATAL(cw_part_map(p, TP_BS, 0, &e) == 0);
	CU_ASSERT_FATAL(pread(cw_disk_fd(t.pool, 2), back, 4096, (off_t)e.phys_offset) == 4096);
	CU_ASSERT(memcmp(data, back, 4096) == 0);
	tp_fini(&t);
}

static void test_path_holds_other_disk(void)
{
	struct tp t, other;
	struct cw_part *p;
	struct cw_error err;
	struct cw_disk_info di;
	struct cw_extent e;
	char mine[160], theirs[160];
	uint8_t before[4096], after[4096];
	int fd;

	tp_pool(&t, TP_BS, 2, three, NULL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "p", 2 * TP_BS, NULL, &p) == 0);
	cw_pool_close(t.pool);
	t.pool = NULL;
	tp_pool(&other, TP_BS, 1, three, NULL);
	cw_pool_close(other.pool);
	other.pool = NULL;
	tp_path(&t, "d2.img", mine, sizeof(mine));
	tp_path(&other, "d1.img", theirs, sizeof(theirs));
	CU_ASSERT_FATAL(rename(theirs, mine) == 0);
	tp_head(mine, before);

	CU_ASSERT_FATAL(cw_pool_open(t.db, &err, &t.pool) == 0);
	CU_ASSERT(cw_pool_missing_disks(t.pool) == 1);
	CU_ASSERT(strstr(err.msg, "another disk") != NULL);
	CU_ASSERT_FATAL(cw_disk_info(t.pool, 2, &di) == 0);
	CU_ASSERT(di.state == CW_DISK_WRONG_LABEL);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	/* block 1 is on disk 2, which is not served; block 0 is */
	CU_ASSERT(cw_part_map(p, TP_BS, 0, &e) == -ENODEV && e.disk_id == 2);
	CU_ASSERT(cw_part_map(p, 0, 0, &e) == 0 && e.disk_id == 1);
	CU_ASSERT(cw_disk_add(t.pool, mine, CW_TIER_HDD, NULL, NULL) == -EEXIST);
	cw_pool_close(t.pool);
	t.pool = NULL;
	tp_head(mine, after);
	CU_ASSERT(memcmp(before, after, 4096) == 0);

	/* A damaged label at open: that disk is refused, the pool degraded. */
	tp_path(&t, "d1.img", mine, sizeof(mine));
	tp_head(mine, before);
	before[20] ^= 0xff;
	fd = open(mine, O_RDWR);
	CU_ASSERT_FATAL(fd >= 0 && pwrite(fd, before, 4096, 0) == 4096);
	close(fd);
	CU_ASSERT_FATAL(cw_pool_open(t.db, &err, &t.pool) == 0);
	CU_ASSERT_FATAL(cw_disk_info(t.pool, 1, &di) == 0);
	CU_ASSERT(di.state == CW_DISK_BAD_LABEL);
	CU_ASSERT(strstr(err.msg, "damaged") != NULL);
	tp_head(mine, after);
	CU_ASSERT(memcmp(before, after, 4096) == 0);
	tp_fini(&other);
	tp_fini(&t);
}

/* ---- disk models ---- */

static void test_disk_model_store(void)
{
	struct tp t;
	struct cw_model m, got;
	bool calibrated = false;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT(cw_disk_model_get(t.pool, 1, &got, &calibrated) == -ENOENT);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "no model") != NULL);
	CU_ASSERT_FATAL(cw_model_preset("hdd7200", &m) == 0);
	CU_ASSERT(cw_disk_model_set(t.pool, 9, &m, false) == -ENOENT);
	CU_ASSERT_FATAL(cw_disk_model_set(t.pool, 1, &m, false) == 0);
	CU_ASSERT_FATAL(cw_model_preset("ssd", &m) == 0);
	CU_ASSERT_FATAL(cw_disk_model_set(t.pool, 1, &m, true) == 0);	/* replaces */
	tp_reopen(&t);
	memset(&got, 0, sizeof(got));
	CU_ASSERT_FATAL(cw_disk_model_get(t.pool, 1, &got, &calibrated) == 0);
	CU_ASSERT(calibrated);
	CU_ASSERT(memcmp(&got, &m, sizeof(m)) == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM disk_model") == 1);
	tp_fini(&t);
}

static void test_disk_model_goes_with_disk(void)
{
	struct tp t;
	struct cw_model m;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_model_preset("hdd7200", &m) == 0);
	CU_ASSERT_FATAL(cw_disk_model_set(t.pool, 2, &m, false) == 0);
	CU_ASSERT_FATAL(cw_disk_remove(t.pool, 2) == 0);
	tp_reopen(&t);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM disk_model") == 0);
	tp_fini(&t);
}

static void test_disk_model_damaged_and_migrated(void)
{
	struct tp t;
	struct cw_model m;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT_FATAL(cw_model_preset("hdd7200", &m) == 0);
	CU_ASSERT_FATAL(cw_disk_model_set(t.pool, 1, &m, false) == 0);
	cw_pool_close(t.pool);
	t.pool = NULL;
	sql_run(t.db, "UPDATE disk_model SET model = 'cwmodel1 nonsense=1'");
	tp_reopen(&t);
	CU_ASSERT(cw_disk_model_get(t.pool, 1, &m, NULL) == -EUCLEAN);
	cw_pool_close(t.pool);
	t.pool = NULL;
	/* A database of schema 1 (before disk models) is migrated on open. */
	sql_run(t.db, "DROP TABLE cache_block; DROP TABLE cache_slot; ALTER TABLE part DROP COLUMN cache_mode;"
		      " ALTER TABLE part DROP COLUMN cache_bytes;"
		      " DROP TABLE move_block; DROP TABLE move; ALTER TABLE part DROP COLUMN tier_fallback;"
		      " DROP TABLE disk_emulate; DROP TABLE hole; DROP TABLE export;"
		      " DROP TABLE resv_disk; DROP TABLE resv; DROP TABLE disk_model;"
		      " DROP TABLE be_qos; PRAGMA user_version = 1");
	tp_reopen(&t);
	CU_ASSERT(sql_int(t.db, "PRAGMA user_version") == META_SCHEMA_VERSION);
	CU_ASSERT(cw_disk_model_get(t.pool, 1, &m, NULL) == -ENOENT);
	CU_ASSERT_FATAL(cw_model_preset("atlas2", &m) == 0);
	CU_ASSERT(cw_disk_model_set(t.pool, 1, &m, false) == 0);
	tp_fini(&t);
}

/* The model a disk emulates: kept apart from its service-time model,
 * cleared with NULL, gone with the disk. */
static void test_disk_emulate_store(void)
{
	struct tp t;
	struct cw_model m, got, admit;

	tp_pool(&t, TP_BS, 3, three, NULL);
	CU_ASSERT(cw_disk_emulate_get(t.pool, 1, &got) == -ENOENT);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "no emulated model") != NULL);
	CU_ASSERT_FATAL(cw_model_preset("atlas2", &m) == 0);
	CU_ASSERT(cw_disk_emulate_set(t.pool, 9, &m) == -ENOENT);
	CU_ASSERT_FATAL(cw_disk_emulate_set(t.pool, 1, &m) == 0);
	CU_ASSERT_FATAL(cw_disk_emulate_set(t.pool, 2, &m) == 0);
	CU_ASSERT_FATAL(cw_model_preset("hdd7200", &admit) == 0);
	CU_ASSERT_FATAL(cw_disk_model_set(t.pool, 1, &admit, false) == 0);
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_disk_emulate_get(t.pool, 1, &got) == 0);
	CU_ASSERT(memcmp(&got, &m, sizeof(m)) == 0);
	CU_ASSERT_FATAL(cw_disk_model_get(t.pool, 1, &got, NULL) == 0);
	CU_ASSERT(memcmp(&got, &admit, sizeof(admit)) == 0);
	CU_ASSERT_FATAL(cw_disk_emulate_set(t.pool, 1, NULL) == 0);
	CU_ASSERT(cw_disk_emulate_get(t.pool, 1, &got) == -ENOENT);
	CU_ASSERT_FATAL(cw_disk_remove(t.pool, 2) == 0);
	CU_ASSERT(sql_int(t.db, "SELECT count(*) FROM disk_emulate") == 0);
	tp_fini(&t);
}

int main(void)
{
	CU_pSuite s;

	s = cwtest_suite("labels", NULL, NULL);
	cwtest_add(s, "crc32c check values", test_crc32c);
	cwtest_add(s, "label encode/decode and damage", test_label_codec);
	cwtest_add(s, "uuid text form", test_uuid_format);

	s = cwtest_suite("pool", NULL, NULL);
	cwtest_add(s, "create and reopen", test_pool_create_open);
	cwtest_add(s, "bad block sizes", test_pool_bad_block_size);
	cwtest_add(s, "existing path, second opener", test_pool_create_exists_and_lock);
	cwtest_add(s, "missing, foreign and newer databases", test_pool_open_refusals);
	cwtest_add(s, "damaged databases refused unchanged", test_pool_damaged_database);

	s = cwtest_suite("disks", NULL, NULL);
	cwtest_add(s, "add and list", test_disk_add_list);
	cwtest_add(s, "add refusals", test_disk_add_refusals);
	cwtest_add(s, "remove", test_disk_remove);
	cwtest_add(s, "models stored and replaced", test_disk_model_store);
	cwtest_add(s, "models go with their disk", test_disk_model_goes_with_disk);
	cwtest_add(s, "damaged model, schema 1 migrated", test_disk_model_damaged_and_migrated);
	cwtest_add(s, "emulated models stored and cleared", test_disk_emulate_store);

	s = cwtest_suite("partitions", NULL, NULL);
	cwtest_add(s, "rotation and the mapping", test_part_rotation_map);
	cwtest_add(s, "single disk, contiguous extents", test_part_single_contiguous);
	cwtest_add(s, "random placement", test_part_random);
	cwtest_add(s, "tier preference", test_part_tiers);
	cwtest_add(s, "zone preference", test_part_zones);
	cwtest_add(s, "grow and shrink", test_part_grow_shrink);
	cwtest_add(s, "larger than the free space", test_part_enospc);
	cwtest_add(s, "names and options", test_part_names_and_options);
	cwtest_add(s, "rename, delete, list", test_part_rename_delete_list);
	cwtest_add(s, "runs are compact", test_runs_compact);
	cwtest_add(s, "reopen round trip", test_reopen_round_trip);

	s = cwtest_suite("moves", NULL, NULL);
	cwtest_add(s, "commit and abort", test_move_commit_abort);
	cwtest_add(s, "refusals and stale plans", test_move_refusals);

	s = cwtest_suite("assembly", NULL, NULL);
	cwtest_add(s, "degraded open", test_degraded_open);
	cwtest_add(s, "paths swapped", test_path_swap);
	cwtest_add(s, "path holds another disk, damaged label", test_path_holds_other_disk);
	return cwtest_run();
}
