/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: the simulated disk never takes longer than the model's
 * worst case that admission charges (cw_model_service_ns over the range
 * the request lies in), for every preset, by brute force over random
 * head positions, times, ranges and sizes; a bus slower than the media
 * does break the bound (so the engine's overrun count can see it); seeks
 * and rotation really cost time.
 */
#include "config.h"

#include <inttypes.h>

#include "cwtest.h"
#include "../../../tools/sim/disk.c"
#include "../../../tools/sim/trace.c"

static void check_bound(const char *preset, uint64_t bus_bps, bool expect_within)
{
	struct cw_model m;
	struct sim_disk d;
	struct sim_rng r;
	bool over = false;

	CU_ASSERT_FATAL(cw_model_preset(preset, &m) == 0);
	sim_rng_seed(&r, 42, 7);
	sim_disk_init(&d, &m, bus_bps, (int64_t)sim_rng_below(&r, (uint64_t)m.rotation_ns + 1));
	for (int i = 0; i < 20000; i++) {
		uint64_t cap = m.capacity_bytes;
		uint64_t lo = sim_rng_below(&r, cap - 4096) / 512 * 512;
		uint64_t hi = lo + 4096 + sim_rng_below(&r, cap - lo - 4096) / 512 * 512;
		uint64_t bytes = 512 * (1 + sim_rng_below(&r, CW_MIN(hi - lo, 16 * SIM_MIB) / 512));
		uint64_t off = lo + sim_rng_below(&r, (hi - lo - bytes) / 512 + 1) * 512;
		int64_t now = (int64_t)sim_rng_below(&r, UINT64_C(1) << 50), worst, t;

		d.head_bytes = sim_rng_below(&r, cap);
		CU_ASSERT_FATAL(cw_model_service_ns(&m, lo, hi, bytes, &worst) == 0);
		t = sim_disk_service(&d, now, off, bytes);
		CU_ASSERT_FATAL(t > 0);
		CU_ASSERT_FATAL(d.head_bytes == off + bytes);
		if (t > worst)
			over = true;
		if (expect_within && t > worst) {
			fprintf(stderr, "%s: %" PRIu64 "@%" PRIu64 " in [%" PRIu64 ",%" PRIu64
				") took %" PRId64 " > %" PRId64 "\n", preset, bytes, off, lo, hi, t, worst);
			CU_FAIL_FATAL("service time above the model's worst case");
		}
	}
	CU_ASSERT(over == !expect_within);
}

static void test_within_model(void)
{
	for (const char *const *p = cw_model_preset_names(); *p; p++) {
		check_bound(*p, 0, true);
		check_bound(*p, UINT64_C(1) << 40, true);	/* a bus faster than any zone */
	}
}

static void test_slow_bus_breaks_bound(void)
{
	/* 5 MB/s under the Atlas-II's 7..11 MB/s zones */
	check_bound("atlas2", 5000000, false);
}

static void test_costs(void)
{
	struct cw_model m;
	struct sim_disk d;
	int64_t near = 0, far = 0, same_track, t;

	CU_ASSERT_FATAL(cw_model_preset("atlas2", &m) == 0);
	sim_disk_init(&d, &m, 0, 0);
	/* averaged over rotation positions, a long seek costs more */
	for (int64_t at = 0; at < m.rotation_ns; at += m.rotation_ns / 50) {
		d.head_bytes = 0;
		near += sim_disk_service(&d, at, 1 << 20, 4096);
		d.head_bytes = 0;
		far += sim_disk_service(&d, at, m.capacity_bytes - 8192, 4096);
	}
	CU_ASSERT(far > near + 50 * (cw_model_seek_ns(&m, m.capacity_bytes / 2)));
	/* the next sectors, asked for just in time (the command overhead
	 * before the head gets there), need no seek and almost no rotation */
	d.head_bytes = 0;
	t = sim_disk_service(&d, 0, 0, 4096);
	same_track = sim_disk_service(&d, t - m.overhead_ns - 1000, 4096, 4096);
	CU_ASSERT(same_track < m.overhead_ns + m.rotation_ns / 10);
	/* asked for once the head has passed them: nearly a revolution */
	d.head_bytes = 0;
	t = sim_disk_service(&d, 0, 0, 4096);
	CU_ASSERT(sim_disk_service(&d, t, 4096, 4096) > m.rotation_ns / 2);
}

static void test_rng_repeatable(void)
{
	struct sim_rng a, b, c;
	bool differs = false;

	sim_rng_seed(&a, 5, 1);
	sim_rng_seed(&b, 5, 1);
	sim_rng_seed(&c, 5, 2);
	for (int i = 0; i < 1000; i++) {
		uint64_t x = sim_rng_next(&a);

		CU_ASSERT_FATAL(x == sim_rng_next(&b));
		differs |= x != sim_rng_next(&c);
		CU_ASSERT_FATAL(sim_rng_below(&a, 10) < 10);
		sim_rng_below(&b, 10);
	}
	CU_ASSERT(differs);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("sim-disk", NULL, NULL);

	cwtest_add(s, "service time within the model", test_within_model);
	cwtest_add(s, "a slow bus breaks the bound", test_slow_bus_breaks_bound);
	cwtest_add(s, "seek and rotation cost time", test_costs);
	cwtest_add(s, "random streams repeat per seed", test_rng_repeatable);
	return cwtest_run();
}
