/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: the mapping takes no lock.  Reader threads map random
 * offsets of a partition while the main thread moves all of its blocks
 * back and forth between tiers, and of another partition while it grows
 * past several block-map chunks.  Every answer must be a place the block
 * really had (its old or its new location), never a torn or foreign one.
 * Also run under ThreadSanitizer.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>

#include "pooltest.h"

#define NB 256
#define ROUNDS 24
#define READERS 3
#define GROW_TO 9000	/* past two 4096-entry chunks of the block map */

static _Atomic uint64_t allowed[NB][ROUNDS + 1];
static atomic_bool stop;
static atomic_ulong maps_done, errors;
static struct cw_part *moving, *growing;

static uint64_t loc(const struct cw_extent *e)
{
	return ((uint64_t)e->disk_id << 48) | (e->phys_offset / TP_BS);
}

static void *reader(void *arg)
{
	uint64_t x = (uintptr_t)arg * 0x9E3779B97F4A7C15u + 1;

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		struct cw_extent e;
		uint64_t b, within, g;
		bool ok = false;
		int r;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b = x % NB;
		within = (x >> 20) % TP_BS;
		r = cw_part_map(moving, b * TP_BS + within, 0, &e);
		if (r == 0 && e.phys_offset % TP_BS == within && e.length == TP_BS - within) {
			e.phys_offset -= within;
			for (int k = 0; k <= ROUNDS && !ok; k++)
				ok = atomic_load_explicit(&allowed[b][k], memory_order_relaxed) == loc(&e);
		}
		if (!ok)
			atomic_fetch_add(&errors, 1);

		/* The growing one: beyond its end or a sane location. */
		g = (x >> 8) % GROW_TO;
		r = cw_part_map(growing, g * TP_BS, 0, &e);
		if (!(r == -ERANGE ||
		      (r == 0 && e.disk_id >= 1 && e.disk_id <= 4 && e.phys_offset >= TP_BS)))
			atomic_fetch_add(&errors, 1);
		if (r == 0 && g >= cw_part_nblocks(growing))
			atomic_fetch_add(&errors, 1);	/* sizes only grow here */
		atomic_fetch_add_explicit(&maps_done, 1, memory_order_relaxed);
	}
	return NULL;
}

static void test_map_during_moves(void)
{
	static const enum cw_tier tiers[] = { CW_TIER_HDD, CW_TIER_HDD, CW_TIER_SSD, CW_TIER_SSD };
	static const uint64_t sizes[] = { 5001, 5001, 5001, 5001 };
	struct cw_part_opts o = { .placement = CW_PLACE_ROTATION, .tier = CW_TIER_PREF_HDD };
	struct tp t;
	pthread_t th[READERS];
	unsigned long before;

	tp_pool(&t, TP_BS, 4, sizes, tiers);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "moving", NB * TP_BS, &o, &moving) == 0);
	CU_ASSERT_FATAL(cw_part_create(t.pool, "growing", TP_BS, NULL, &growing) == 0);
	for (uint64_t b = 0; b < NB; b++) {
		struct cw_extent e;

		CU_ASSERT_FATAL(cw_part_map(moving, b * TP_BS, 0, &e) == 0);
		atomic_store(&allowed[b][0], loc(&e));
	}
	for (int i = 0; i < READERS; i++)
		CU_ASSERT_FATAL(pthread_create(&th[i], NULL, reader, (void *)(uintptr_t)(i + 1)) == 0);
	/* Wait until the readers run before changing anything. */
	while (atomic_load(&maps_done) < 1000)
		sched_yield();

	for (int r = 1; r <= ROUNDS; r++) {
		struct cw_move_opts mo = { .placement = CW_PLACE_ROTATION,
					   .tier = r % 2 ? CW_TIER_PREF_SSD : CW_TIER_PREF_HDD };
		struct cw_move *m;
		struct cw_move_step st;
		uint64_t want = (uint64_t)r * GROW_TO / ROUNDS;

		CU_ASSERT_FATAL(cw_move_plan(moving, 0, NB, &mo, &m) == 0);
		CU_ASSERT(cw_move_nsteps(m) == NB);
		for (size_t i = 0; i < cw_move_nsteps(m); i++) {
			CU_ASSERT_FATAL(cw_move_step(m, i, &st) == 0);
			atomic_store_explicit(&allowed[st.block][r],
					      ((uint64_t)st.dst_disk_id << 48) | (st.dst_offset / TP_BS),
					      memory_order_relaxed);
		}
		before = atomic_load(&maps_done);
		CU_ASSERT_FATAL(cw_move_commit(m) == 0);
		CU_ASSERT_FATAL(cw_part_resize(growing, want * TP_BS) == 0);
		/* Let the readers see this state before the next change. */
		while (atomic_load(&maps_done) < before + 200)
			sched_yield();
	}
	atomic_store(&stop, true);
	for (int i = 0; i < READERS; i++)
		pthread_join(th[i], NULL);
	CU_ASSERT(atomic_load(&errors) == 0);
	CU_ASSERT(atomic_load(&maps_done) > ROUNDS * 200);
	CU_ASSERT(cw_part_nblocks(growing) == GROW_TO);
	tp_check_totals(t.pool, 0);
	tp_reopen(&t);
	tp_check_totals(t.pool, 0);
	tp_fini(&t);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("concurrent mapping", NULL, NULL);

	cwtest_add(s, "map during move commits and growth", test_map_during_moves);
	return cwtest_run();
}
