/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: the SSD cache.  The policy alone: heat decays by ticks, a
 * block becomes a candidate only when warm enough, a full cache evicts
 * its coldest block only for a block hotter by the threshold, pinned
 * ranges are refused and counted, the hit counters stay bounded.  On a
 * real pool (sqlite file, disk files): the setting is stored (schema
 * 8 -> 9 migration), refused with the free SSD space when it does not fit
 * and for a partition on SSDs; hot blocks are promoted and then read from
 * the SSD, write-through keeps both copies equal, write-back writes the
 * SSD only and a reopen writes the armed blocks back; a smaller setting
 * demotes first; kill -9 at random instants of promotions and write-backs
 * under a verified write load loses no acknowledged write and leaves no
 * block owned twice (CW_CACHE_KILLS kills, default 12).
 */
#include "config.h"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include <clockwise/cache.h>
#include <clockwise/mover.h>

#include "pooltest.h"

#define S (CW_NS_PER_S)

/* ---- the policy ---- */

static void hits(struct cw_cache_policy *p, uint64_t b, unsigned n, uint32_t slot)
{
	for (unsigned i = 0; i < n; i++)
		cw_cache_policy_hit(p, b, slot);
}

static void test_policy_decay(void)
{
	struct cw_cache_policy_opts o = { .decay_shift = 2 };
	struct cw_cache_policy *p;
	uint32_t h0, h1, h2;

	CU_ASSERT_FATAL(cw_cache_policy_new(100, 4, &o, &p) == 0);
	hits(p, 7, 10, UINT32_MAX);
	cw_cache_policy_tick(p, 1 * S);
	h0 = cw_cache_policy_heat(p, 7);
	CU_ASSERT(h0 == 10 * 16);
	cw_cache_policy_tick(p, 1 * S + 1);	/* not a tick yet */
	CU_ASSERT(cw_cache_policy_heat(p, 7) == h0);
	cw_cache_policy_tick(p, 2 * S);
	h1 = cw_cache_policy_heat(p, 7);
	cw_cache_policy_tick(p, 3 * S);
	h2 = cw_cache_policy_heat(p, 7);
	CU_ASSERT(h1 == h0 - h0 / 4);	/* decay_shift 2: a quarter per tick */
	CU_ASSERT(h2 == h1 - h1 / 4);
	for (int t = 4; t < 60; t++)
		cw_cache_policy_tick(p, t * S);
	CU_ASSERT(cw_cache_policy_heat(p, 7) < 4);	/* cold again */
	CU_ASSERT(cw_cache_policy_level(0) == 0);
	CU_ASSERT(cw_cache_policy_level(8) == 1);
	CU_ASSERT(cw_cache_policy_level(UINT32_MAX) == 15);
	cw_cache_policy_free(p);
}

static void test_policy_promote(void)
{
	struct cw_cache_policy_opts o = { .min_hits = 2 };
	struct cw_cache_policy *p;
	struct cw_cache_decision d;

	CU_ASSERT_FATAL(cw_cache_policy_new(100, 2, &o, &p) == 0);
	hits(p, 3, 1, UINT32_MAX);	/* one read: not warm enough */
	cw_cache_policy_next(p, &d);
	CU_ASSERT(d.kind == CW_CACHE_NONE);
	hits(p, 3, 2, UINT32_MAX);
	cw_cache_policy_next(p, &d);
	CU_ASSERT_FATAL(d.kind == CW_CACHE_PROMOTE);
	CU_ASSERT(d.block == 3);
	cw_cache_policy_cached(p, d.slot, 3);
	CU_ASSERT(cw_cache_policy_used(p) == 1);
	hits(p, 3, 5, UINT32_MAX);	/* a cached block is no candidate */
	cw_cache_policy_next(p, &d);
	CU_ASSERT(d.kind == CW_CACHE_NONE);
	hits(p, 5, 4, UINT32_MAX);
	cw_cache_policy_next(p, &d);
	CU_ASSERT_FATAL(d.kind == CW_CACHE_PROMOTE && d.block == 5);
	cw_cache_policy_cached(p, d.slot, 5);
	cw_cache_policy_tick(p, 1 * S);
	cw_cache_policy_free(p);
}

static void test_policy_threshold(void)
{
	struct cw_cache_policy *p;
	struct cw_cache_decision d;
	uint32_t cold, warm;

	CU_ASSERT_FATAL(cw_cache_policy_new(100, 2, NULL, &p) == 0);
	cw_cache_policy_cached(p, 0, 10);
	cw_cache_policy_cached(p, 1, 11);
	hits(p, 10, 40, 0);
	hits(p, 11, 8, 1);
	cw_cache_policy_tick(p, 1 * S);
	cold = cw_cache_policy_coldest(p);
	CU_ASSERT(cold == 1);
	/* As hot as the coldest cached block: no swap. */
	hits(p, 20, 8, UINT32_MAX);
	cw_cache_policy_next(p, &d);
	CU_ASSERT(d.kind == CW_CACHE_NONE);
	/* Hotter by a level (twice the heat and more): the coldest goes. */
	warm = 8;
	hits(p, 21, 2 * warm + 4, UINT32_MAX);
	cw_cache_policy_next(p, &d);
	CU_ASSERT_FATAL(d.kind == CW_CACHE_EVICT);
	CU_ASSERT(d.block == 11 && d.slot == 1);
	cw_cache_policy_uncached(p, 1);
	/* The candidate that won is kept for the next call. */
	cw_cache_policy_next(p, &d);
	CU_ASSERT_FATAL(d.kind == CW_CACHE_PROMOTE);
	CU_ASSERT(d.block == 21 && d.slot == 1);
	cw_cache_policy_free(p);
}

static void test_policy_pin_bounds(void)
{
	struct cw_cache_policy *p;
	struct cw_cache_policy_opts o = { .max_hotspots = 16 };
	struct cw_cache_decision d;
	uint64_t first = 40, n = 10;

	CU_ASSERT_FATAL(cw_cache_policy_new(1000, 4, &o, &p) == 0);
	CU_ASSERT(cw_cache_policy_pin(p, &first, &n, 1) == 0);
	CU_ASSERT(cw_cache_policy_pinned(p, 45) && !cw_cache_policy_pinned(p, 50));
	hits(p, 45, 10, UINT32_MAX);
	cw_cache_policy_next(p, &d);
	CU_ASSERT(d.kind == CW_CACHE_NONE);
	CU_ASSERT(cw_cache_policy_refused(p) == 1);
	/* 16 counters for 1000 blocks: 64 blocks share one. */
	CU_ASSERT(cw_cache_policy_heat(p, 0) == cw_cache_policy_heat(p, 63));
	CU_ASSERT(cw_cache_policy_heat(p, 63) > 0);
	CU_ASSERT(cw_cache_policy_heat(p, 64) == 0);
	cw_cache_policy_hit(p, 5000, UINT32_MAX);	/* beyond: ignored */
	{
		uint64_t f[65] = { 0 }, k[65] = { 0 };

		CU_ASSERT(cw_cache_policy_pin(p, f, k, 65) == -E2BIG);
	}
	/* A block cached before its range is pinned is evicted first (its
	 * stream is not booked on the SSD), with nothing kept to promote;
	 * one cached while the pin was set (a promotion under way) too. */
	first = 0;
	n = 0;
	CU_ASSERT(cw_cache_policy_pin(p, &first, &n, 0) == 0);
	cw_cache_policy_cached(p, 2, 45);
	first = 40;
	n = 10;
	CU_ASSERT(cw_cache_policy_pin(p, &first, &n, 1) == 0);
	cw_cache_policy_next(p, &d);
	CU_ASSERT(d.kind == CW_CACHE_EVICT && d.block == 45 && d.slot == 2);
	cw_cache_policy_uncached(p, 2);
	cw_cache_policy_next(p, &d);
	CU_ASSERT(d.kind == CW_CACHE_NONE);
	cw_cache_policy_cached(p, 1, 41);
	cw_cache_policy_next(p, &d);
	CU_ASSERT(d.kind == CW_CACHE_EVICT && d.block == 41 && d.slot == 1);
	cw_cache_policy_free(p);
}

/* ---- on a pool ---- */

static struct cw_pool *gpool;
static int64_t gnow = 0;	/* the worker's clock: one tick per call */

static void pattern(uint8_t *buf, uint64_t b, uint32_t g)
{
	uint64_t *w = (uint64_t *)buf;

	for (size_t i = 0; i < TP_BS / 8; i++)
		w[i] = (b << 40) ^ ((uint64_t)g << 20) ^ i;
}

static int64_t gen_of(const uint8_t *buf, uint64_t b)
{
	static uint8_t want[TP_BS];
	uint32_t g = (uint32_t)((((const uint64_t *)buf)[0] ^ (b << 40)) >> 20);

	pattern(want, b, g);
	return memcmp(buf, want, TP_BS) == 0 ? (int64_t)g : -1;
}

/* A write through the cache's routing, as the daemon's data path does. */
static enum cw_cache_route c_write(struct cw_part *p, uint64_t b, uint32_t g, bool sync)
{
	static uint8_t buf[TP_BS];
	enum cw_cache_route r = CW_CACHE_ORIGIN;
	struct cw_extent e, ce;
	struct cw_cache *c;
	unsigned t;

	pattern(buf, b, g);
	t = cw_part_io_begin(p);
	c = cw_part_cache(p);
	CU_ASSERT_FATAL(cw_part_map(p, b * TP_BS, TP_BS, &e) == 0);
	if (c)
		r = cw_cache_route(c, b * TP_BS, TP_BS, true, &ce);
	if (r != CW_CACHE_SSD) {
		int fd = cw_disk_fd(gpool, e.disk_id);

		CU_ASSERT_FATAL(pwrite(fd, buf, TP_BS, (off_t)e.phys_offset) == TP_BS);
		CU_ASSERT_FATAL(!sync || fdatasync(fd) == 0);
	}
	if (r != CW_CACHE_ORIGIN) {
		int fd = cw_disk_fd(gpool, ce.disk_id);

		CU_ASSERT_FATAL(ce.length == TP_BS);
		CU_ASSERT_FATAL(pwrite(fd, buf, TP_BS, (off_t)ce.phys_offset) == TP_BS);
		CU_ASSERT_FATAL(!sync || fdatasync(fd) == 0);
	}
	cw_part_io_end(p, t);
	return r;
}

/* A read through the routing: the generation, or -1; *ret_route where. */
static int64_t c_read(struct cw_part *p, uint64_t b, enum cw_cache_route *ret_route)
{
	static uint8_t buf[TP_BS];
	enum cw_cache_route r = CW_CACHE_ORIGIN;
	struct cw_extent e;
	struct cw_cache *c;
	unsigned t = cw_part_io_begin(p);

	c = cw_part_cache(p);
	CU_ASSERT_FATAL(cw_part_map(p, b * TP_BS, TP_BS, &e) == 0);
	if (c)
		r = cw_cache_route(c, b * TP_BS, TP_BS, false, &e);
	CU_ASSERT_FATAL(pread(cw_disk_fd(gpool, e.disk_id), buf, TP_BS, (off_t)e.phys_offset) ==
			TP_BS);
	cw_part_io_end(p, t);
	if (ret_route)
		*ret_route = r;
	return gen_of(buf, b);
}

/* The generation on the HDD itself, whatever the cache holds. */
static int64_t origin_gen(struct cw_part *p, uint64_t b)
{
	static uint8_t buf[TP_BS];
	struct cw_extent e;

	CU_ASSERT_FATAL(cw_part_map(p, b * TP_BS, TP_BS, &e) == 0);
	CU_ASSERT_FATAL(pread(cw_disk_fd(gpool, e.disk_id), buf, TP_BS, (off_t)e.phys_offset) ==
			TP_BS);
	return gen_of(buf, b);
}

static void cache_copy(struct cw_pool *pool, const struct cw_cache_task *t)
{
	static uint8_t buf[TP_BS];
	int s = cw_disk_fd(pool, t->src_disk_id), d = cw_disk_fd(pool, t->dst_disk_id);

	CU_ASSERT_FATAL(t->length == TP_BS);
	CU_ASSERT_FATAL(pread(s, buf, TP_BS, (off_t)t->src_offset) == TP_BS);
	CU_ASSERT_FATAL(pwrite(d, buf, TP_BS, (off_t)t->dst_offset) == TP_BS);
	CU_ASSERT_FATAL(fdatasync(d) == 0);
}

/* Runs the caches' worker until idle (at most max copies); the copies. */
static unsigned cdrive(struct cw_pool *pool, unsigned max)
{
	struct cw_cache_task t;
	unsigned n = 0;

	while (n < max) {
		gnow += S;
		CU_ASSERT_FATAL(cw_cache_next(pool, gnow, &t) == 0);
		if (t.action == CW_CACHE_IDLE)
			break;
		if (t.action == CW_CACHE_WAIT)
			continue;	/* nothing in flight here: drained next time */
		cache_copy(pool, &t);
		CU_ASSERT_FATAL(cw_cache_copied(pool, 0, 0) == 0);
		n++;
	}
	return n;
}

static const enum cw_tier hs[] = { CW_TIER_HDD, CW_TIER_SSD };

/* A pool with an HDD partition "p" of nb blocks, each written at gen 1. */
static struct cw_part *setup(struct tp *t, uint64_t nb, uint64_t ssd_blocks)
{
	const uint64_t sizes[] = { nb + 8, ssd_blocks + 1 };
	struct cw_part_opts po = { .placement = CW_PLACE_SINGLE, .disk_id = 1 };
	struct cw_part *p;
	struct cw_alloc_change ch;

	tp_pool(t, TP_BS, 2, sizes, hs);
	gpool = t->pool;
	CU_ASSERT_FATAL(cw_part_create(t->pool, "p", nb * TP_BS, &po, &p) == 0);
	for (uint64_t b = 0; b < nb; b++)
		c_write(p, b, 1, false);
	ch = (struct cw_alloc_change){ p, 0, nb, true };
	CU_ASSERT_FATAL(cw_part_set_allocated(t->pool, &ch, 1) == 0);
	return p;
}

static void read_n(struct cw_part *p, uint64_t b, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		CU_ASSERT(c_read(p, b, NULL) >= 0);
}

static void test_conf(void)
{
	struct cw_cache_conf conf = { 4 * TP_BS, CW_CACHE_WRITE_THROUGH }, got;
	struct cw_part_opts so = { .tier = CW_TIER_PREF_SSD };
	struct cw_cache_stats st;
	struct cw_part *p, *s;
	struct tp t;

	p = setup(&t, 16, 6);
	CU_ASSERT(cw_part_cache_stats(p, &st) == -ENOENT);
	conf.size_bytes = 7 * TP_BS;
	CU_ASSERT(cw_part_cache_set(p, &conf) == -ENOSPC);
	CU_ASSERT(cw_pool_last_error(t.pool)->available_bytes == 6 * TP_BS);
	CU_ASSERT(strstr(cw_pool_last_error(t.pool)->msg, "SSD") != NULL);
	conf.size_bytes = 4 * TP_BS - 1;	/* rounded up to blocks */
	CU_ASSERT_FATAL(cw_part_cache_set(p, &conf) == 0);
	CU_ASSERT(cw_part_cache_get(p, &got) == 0 && got.size_bytes == 4 * TP_BS);
	conf.mode = (enum cw_cache_mode)7;
	CU_ASSERT(cw_part_cache_set(p, &conf) == -EINVAL);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "s", TP_BS, &so, &s) == 0);
	conf.mode = CW_CACHE_WRITE_BACK;
	CU_ASSERT(cw_part_cache_set(s, &conf) == -EINVAL);
	CU_ASSERT(cw_part_delete(p) == -EBUSY);		/* its cache first */
	CU_ASSERT(cw_disk_evacuate(t.pool, 2, &(uint64_t *){ NULL }, &(size_t){ 0 }) == -EBUSY);
	CU_ASSERT_FATAL(cw_part_cache_set(p, &conf) == 0);
	tp_reopen(&t);	/* the setting, the slots are stored */
	gpool = t.pool;
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT(cw_part_cache_get(p, &got) == 0 && got.size_bytes == 4 * TP_BS &&
		  got.mode == CW_CACHE_WRITE_BACK);
	/* Off: the worker gives the space back, then the partition goes. */
	conf.size_bytes = 0;
	CU_ASSERT_FATAL(cw_part_cache_set(p, &conf) == 0);
	cdrive(t.pool, 100);
	CU_ASSERT(cw_part_cache(p) == NULL);
	CU_ASSERT(cw_part_delete(p) == 0);
	tp_reopen(&t);
	tp_fini(&t);
}

static void test_migrate(void)
{
	struct cw_cache_conf conf = { 2 * TP_BS, CW_CACHE_WRITE_THROUGH };
	struct cw_part *p;
	sqlite3 *db;
	struct tp t;

	p = setup(&t, 8, 4);
	(void)p;
	cw_pool_close(t.pool);
	t.pool = NULL;
	CU_ASSERT_FATAL(sqlite3_open(t.db, &db) == SQLITE_OK);
	CU_ASSERT_FATAL(sqlite3_exec(db, "ALTER TABLE resv DROP COLUMN due; ALTER TABLE resv DROP COLUMN move;"
				     " ALTER TABLE resv_disk DROP COLUMN copy;"
				     " DROP TABLE cache_block; DROP TABLE cache_slot;"
				     " ALTER TABLE part DROP COLUMN cache_mode;"
				     " ALTER TABLE part DROP COLUMN cache_bytes;"
				     " PRAGMA user_version = 8", NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(db);
	tp_reopen(&t);	/* 8 -> 9 */
	gpool = t.pool;
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT(cw_part_cache_set(p, &conf) == 0);
	CU_ASSERT(c_read(p, 3, NULL) == 1);
	tp_reopen(&t);
	tp_fini(&t);
}

static void test_promote_wt(void)
{
	struct cw_cache_conf conf = { 2 * TP_BS, CW_CACHE_WRITE_THROUGH };
	struct cw_cache_stats st;
	enum cw_cache_route r;
	struct cw_part *p;
	struct tp t;

	p = setup(&t, 16, 4);
	CU_ASSERT_FATAL(cw_part_cache_set(p, &conf) == 0);
	cdrive(t.pool, 10);	/* starts the cache */
	CU_ASSERT_FATAL(cw_part_cache(p) != NULL);
	read_n(p, 5, 4);
	read_n(p, 9, 4);
	CU_ASSERT(cdrive(t.pool, 10) == 2);
	CU_ASSERT(c_read(p, 5, &r) == 1 && r == CW_CACHE_SSD);
	CU_ASSERT(c_read(p, 9, &r) == 1 && r == CW_CACHE_SSD);
	CU_ASSERT(c_read(p, 1, &r) == 1 && r == CW_CACHE_ORIGIN);
	/* Write-through: both copies. */
	CU_ASSERT(c_write(p, 5, 2, true) == CW_CACHE_BOTH);
	CU_ASSERT(c_read(p, 5, &r) == 2 && r == CW_CACHE_SSD);
	CU_ASSERT(origin_gen(p, 5) == 2);
	/* A much hotter block takes the colder one's place. */
	for (int k = 0; k < 3; k++) {
		read_n(p, 12, 40);
		cdrive(t.pool, 10);
	}
	CU_ASSERT(c_read(p, 12, &r) == 1 && r == CW_CACHE_SSD);
	CU_ASSERT_FATAL(cw_part_cache_stats(p, &st) == 0);
	CU_ASSERT(st.promotions == 3 && st.demotions == 1 && st.used == 2);
	CU_ASSERT(st.hits >= 4 && st.misses >= 8);
	for (uint64_t b = 0; b < 16; b++)
		CU_ASSERT(c_read(p, b, NULL) == (b == 5 ? 2 : 1));
	/* A restart: write-through starts cold, the data is on the HDD. */
	tp_reopen(&t);
	gpool = t.pool;
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	cdrive(t.pool, 10);
	CU_ASSERT(c_read(p, 5, &r) == 2 && r == CW_CACHE_ORIGIN);
	tp_fini(&t);
}

static void test_write_back(void)
{
	struct cw_cache_conf conf = { 3 * TP_BS, CW_CACHE_WRITE_BACK };
	struct cw_cache_stats st;
	enum cw_cache_route r;
	struct cw_part *p;
	struct tp t;

	p = setup(&t, 16, 4);
	CU_ASSERT_FATAL(cw_part_cache_set(p, &conf) == 0);
	cdrive(t.pool, 10);
	read_n(p, 2, 4);
	read_n(p, 7, 4);
	CU_ASSERT(cdrive(t.pool, 10) == 2);
	CU_ASSERT(c_write(p, 2, 5, true) == CW_CACHE_SSD);
	CU_ASSERT(c_write(p, 7, 6, true) == CW_CACHE_SSD);
	CU_ASSERT(origin_gen(p, 2) == 1);	/* the HDD is behind */
	CU_ASSERT(c_read(p, 2, &r) == 5 && r == CW_CACHE_SSD);
	CU_ASSERT_FATAL(cw_part_cache_stats(p, &st) == 0);
	CU_ASSERT(st.dirty == 2 && st.armed == 2);
	/* A reopen (as after a crash): the armed blocks are read from the
	 * SSD and written back first. */
	tp_reopen(&t);
	gpool = t.pool;
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	CU_ASSERT(c_read(p, 7, &r) == 6 && r == CW_CACHE_SSD);
	CU_ASSERT(cdrive(t.pool, 10) >= 2);
	CU_ASSERT(origin_gen(p, 2) == 5 && origin_gen(p, 7) == 6);
	CU_ASSERT_FATAL(cw_part_cache_stats(p, &st) == 0);
	CU_ASSERT(st.armed == 0 && st.writebacks == 2);
	/* Write-through now for these two; a new one is armed again. */
	read_n(p, 11, 4);
	cdrive(t.pool, 10);
	CU_ASSERT(c_write(p, 11, 3, true) == CW_CACHE_SSD);
	/* Off: written back and demoted before the space goes. */
	conf.size_bytes = 0;
	CU_ASSERT_FATAL(cw_part_cache_set(p, &conf) == 0);
	cdrive(t.pool, 100);
	CU_ASSERT(cw_part_cache(p) == NULL);
	CU_ASSERT(origin_gen(p, 11) == 3);
	for (uint64_t b = 0; b < 16; b++)
		CU_ASSERT(c_read(p, b, NULL) == (b == 2 ? 5 : b == 7 ? 6 : b == 11 ? 3 : 1));
	tp_reopen(&t);	/* the space is free again */
	tp_fini(&t);
}

/* A write that comes while its block is copied: it is not promoted. */
static void test_overlap(void)
{
	struct cw_cache_conf conf = { 2 * TP_BS, CW_CACHE_WRITE_BACK };
	struct cw_cache_task task;
	enum cw_cache_route r;
	struct cw_part *p;
	struct tp t;
	unsigned copies = 0;

	p = setup(&t, 8, 4);
	CU_ASSERT_FATAL(cw_part_cache_set(p, &conf) == 0);
	cdrive(t.pool, 10);
	read_n(p, 4, 4);
	for (;;) {
		gnow += S;
		CU_ASSERT_FATAL(cw_cache_next(t.pool, gnow, &task) == 0);
		if (task.action == CW_CACHE_IDLE)
			break;
		if (task.action != CW_CACHE_COPY)
			continue;
		cache_copy(t.pool, &task);
		if (copies++ == 0)	/* after the copy, before it is reported */
			CU_ASSERT(c_write(p, 4, 9, true) == CW_CACHE_ORIGIN);
		CU_ASSERT_FATAL(cw_cache_copied(t.pool, 0, 0) == 0);
	}
	CU_ASSERT(copies == 1);	/* not promoted: it stays on the HDD */
	CU_ASSERT(c_read(p, 4, &r) == 9 && r == CW_CACHE_ORIGIN);
	read_n(p, 4, 4);	/* a candidate again */
	CU_ASSERT(cdrive(t.pool, 10) == 1);
	CU_ASSERT(c_read(p, 4, &r) == 9 && r == CW_CACHE_SSD);
	tp_fini(&t);
}

/*
 * kill -9 during promotions and write-backs under writes.  The child
 * reads hot blocks (so they are promoted), writes new generations
 * through the routing (each synced, then reported on a pipe:
 * acknowledged), runs the worker, and switches the cache between
 * write-back and write-through now and then (which writes every armed
 * block back); it is killed after a random delay.  The reopened pool
 * (which checks that no block is owned twice) must read each block at
 * its last acknowledged generation or the one in flight, through the
 * cache, and again from the HDD once the worker wrote everything back.
 */
#define KB 24

static struct cw_part *gpart;	/* the child's partition */

static void synced_write(uint64_t b, uint32_t g)
{
	c_write(gpart, b, g, true);
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
	struct cw_cache_policy_opts po = { .tick_ns = 1 };
	struct cw_pool *pool;
	struct cw_error err;
	struct cw_part *p;
	struct cw_cache_task task;
	uint32_t gen[KB] = { 0 };
	int64_t now = 0;

	if (cw_pool_open(db, &err, &pool) < 0 || cw_part_lookup(pool, "p", &p) < 0)
		_exit(2);
	gpool = pool;
	cw_pool_cache_policy(pool, &po);
	for (uint64_t b = 0; b < KB; b++)
		gen[b] = (uint32_t)c_read(p, b, NULL);
	/* Mostly write-back; a change of mode retires the old cache. */
	if ((seed & 0x30) == 0) {
		struct cw_cache_conf conf = { 6 * TP_BS, CW_CACHE_WRITE_THROUGH };

		cw_part_cache_set(p, &conf);
	} else if ((seed & 0x30) == 0x10) {
		struct cw_cache_conf conf = { 6 * TP_BS, CW_CACHE_WRITE_BACK };

		cw_part_cache_set(p, &conf);
	}
	for (;;) {
		uint64_t x = tp_xorshift(&seed);

		if (x & 0x100)
			child_write(p, gen, x % KB, wfd);
		/* Reads of a hot third, and of the rest now and then. */
		c_read(p, (x >> 24) % (x & 0x800 ? KB : KB / 3), NULL);
		if (cw_cache_next(pool, now += 1000, &task) < 0)
			_exit(4);
		if (task.action == CW_CACHE_COPY) {
			int s = cw_disk_fd(pool, task.src_disk_id);
			int d = cw_disk_fd(pool, task.dst_disk_id);

			if (pread(s, buf, TP_BS, (off_t)task.src_offset) != TP_BS)
				_exit(5);
			/* Writes land between the copy's read and its write,
			 * often on the very block. */
			if (x & 0x200)
				child_write(p, gen, x & 0x400 ? task.block : (x >> 11) % KB, wfd);
			if (pwrite(d, buf, TP_BS, (off_t)task.dst_offset) != TP_BS || fdatasync(d) < 0)
				_exit(5);
			if (cw_cache_copied(pool, 0, 0) < 0)
				_exit(4);
		}
	}
}

static void test_kill9(void)
{
	struct cw_cache_conf conf = { 6 * TP_BS, CW_CACHE_WRITE_BACK };
	int64_t acked[KB], flying[KB];
	const char *env = getenv("CW_CACHE_KILLS");
	int kills = env && atoi(env) > 0 ? atoi(env) : 12;
	uint64_t seed = (uint64_t)time(NULL) | 1;
	unsigned armed_after = 0, promoted = 0;
	struct cw_cache_stats st;
	struct cw_part *p;
	struct tp t;

	p = setup(&t, KB, 8);
	CU_ASSERT_FATAL(cw_part_cache_set(p, &conf) == 0);
	cw_pool_close(t.pool);
	t.pool = NULL;
	for (uint64_t b = 0; b < KB; b++)
		acked[b] = flying[b] = 1;
	for (int it = 0; it < kills; it++) {
		struct timespec ts = { 0, 30000000 + (long)((seed >> 8) % 200000000) };
		int fds[2], stw;
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
		CU_ASSERT_FATAL(waitpid(pid, &stw, 0) == pid);
		CU_ASSERT(WIFSIGNALED(stw));
		tp_read_reports(fds[0], acked, flying);
		close(fds[0]);
		tp_reopen(&t);	/* no block owned twice, maps agree */
		gpool = t.pool;
		CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
		if (cw_part_cache_stats(p, &st) == 0 && st.armed) {
			armed_after += st.armed;
			promoted++;
		}
		/* Through the cache (armed blocks from the SSD), then from
		 * the HDD once the worker wrote them back. */
		for (int pass = 0; pass < 2; pass++) {
			if (pass == 1)
				cdrive(t.pool, 1000);
			for (uint64_t b = 0; b < KB; b++) {
				int64_t g = pass ? origin_gen(p, b) : c_read(p, b, NULL);
				/* A write in flight may also be torn (no pattern). */
				bool ok = g == acked[b] || g == flying[b] ||
					  (g < 0 && flying[b] != acked[b]);

				CU_ASSERT(ok);
				if (!ok)
					fprintf(stderr, "kill %d, %s: block %llu: gen %lld, "
						"acknowledged %lld\n", it, pass ? "HDD" : "read",
						(unsigned long long)b, (long long)g,
						(long long)acked[b]);
				if (pass == 0 && g >= 0)
					acked[b] = flying[b] = g;
			}
		}
		cw_pool_close(t.pool);
		t.pool = NULL;
	}
	tp_reopen(&t);
	CU_ASSERT_FATAL(cw_part_lookup(t.pool, "p", &p) == 0);
	fprintf(stderr, "kill9: %d kills, %u of them with armed blocks (%u in all) to write "
		"back\n", kills, promoted, armed_after);
	tp_fini(&t);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("cache", NULL, NULL);

	cwtest_add(s, "policy: heat decays by ticks", test_policy_decay);
	cwtest_add(s, "policy: warm blocks promoted into free slots", test_policy_promote);
	cwtest_add(s, "policy: evict only for a hotter block", test_policy_threshold);
	cwtest_add(s, "policy: pinned ranges, bounded counters", test_policy_pin_bounds);
	cwtest_add(s, "setting: stored, refused, dropped", test_conf);
	cwtest_add(s, "schema 8 -> 9", test_migrate);
	cwtest_add(s, "write-through: promote, read, evict", test_promote_wt);
	cwtest_add(s, "write-back: armed, written back after reopen", test_write_back);
	cwtest_add(s, "a write overlapping a promotion", test_overlap);
	cwtest_add(s, "kill -9 during promotions and write-backs", test_kill9);
	return cwtest_run();
}
