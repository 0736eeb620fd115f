/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: the simulator's event loop releases every RT request a
 * stream is due to make in the run (counted from the phases and periods
 * admission gave), serves every BE record of the trace exactly once, gives
 * each policy the same requests, and ends with no deadline missed under
 * delta-l even when every request takes its admitted worst case; a
 * stream's reads of a mirrored partition alternate between its copies'
 * disks (cw_path_stream_copy), and after one of them fails they all go
 * to the other, in time.
 */
#include "config.h"

#include <inttypes.h>

#include "cwtest.h"
#include "../../../tools/sim/scenario.c"
#include "../../../tools/sim/trace.c"
#include "../../../tools/sim/stream.c"
#include "../../../tools/sim/setup.c"
#include "../../../tools/sim/engine.c"
#include "../../../tools/sim/move.c"
#include "../../../tools/sim/path.c"
#include "../../../tools/sim/pool.c"

static void scenario(struct sim_scenario *sc, int64_t secs, enum sim_be_source be)
{
	sim_scenario_defaults(sc);
	sc->duration_ns = secs * CW_NS_PER_S;
	sc->be = be;
	CU_ASSERT_FATAL(sim_scenario_finish(sc) == 0);
}

/* Requests stream i is due to make in the run. */
static uint64_t due(const struct sim_stream *st, int64_t duration)
{
	return st->phase_ns < duration ?
	       (uint64_t)((duration - st->phase_ns + st->period_ns - 1) / st->period_ns) : 0;
}

static void test_every_release(void)
{
	struct sim_scenario sc;
	struct sim_setup s;
	struct sim_trace t = { 0 };
	uint64_t want = 0, rt[3];

	scenario(&sc, 100, SIM_BE_NONE);
	CU_ASSERT_FATAL(sim_setup_build(&sc, SIM_ROTATION, SIM_VIDEO_MIX, 9, NULL, NULL, &s) == 0);
	CU_ASSERT_FATAL(s.n_streams == 9);
	for (size_t i = 0; i < s.n_streams; i++)
		want += due(&s.streams[i], sc.duration_ns);
	CU_ASSERT_FATAL(want > 9 * 50);
	for (unsigned p = 0; p < 3; p++) {
		struct sim_result r;

		CU_ASSERT_FATAL(sim_run(&s, s.n_streams, &t, p, &r) == 0);
		CU_ASSERT_EQUAL(r.rt_done, want);
		CU_ASSERT_EQUAL(r.rt_misses, 0);
		CU_ASSERT_EQUAL(r.rt_overruns, 0);
		CU_ASSERT(r.end_ns >= sc.duration_ns - 4 * CW_NS_PER_S);
		rt[p] = r.rt_done;
	}
	CU_ASSERT(rt[0] == rt[1] && rt[1] == rt[2]);
	sim_setup_done(&s);
}

static void test_every_be_record(void)
{
	struct sim_scenario sc;
	struct sim_setup s;
	struct sim_trace t;

	scenario(&sc, 60, SIM_BE_CELLO);
	CU_ASSERT_FATAL(sim_setup_build(&sc, SIM_RANDOM, SIM_VIDEO_MIX, 20, NULL, NULL, &s) == 0);
	CU_ASSERT_FATAL(sim_trace_load(&sc, s.be_part_bytes, &t) == 0);
	/* the generator's mean rate, within a wide margin for its bursts */
	CU_ASSERT(t.n > 60 * 45 / 3 && t.n < 60 * 45 * 3);
	for (size_t i = 1; i < t.n; i++)
		CU_ASSERT_FATAL(t.v[i].t_ns >= t.v[i - 1].t_ns);
	for (unsigned p = 0; p < 3; p++) {
		struct sim_result r;

		CU_ASSERT_FATAL(sim_run(&s, s.n_streams, &t, p, &r) == 0);
		CU_ASSERT_EQUAL(r.be_requests, t.n);
		CU_ASSERT_EQUAL(r.be_done, t.n);
		CU_ASSERT_EQUAL(r.be_slack + r.be_idle + r.be_server, t.n);	/* 4 KB: one piece */
		CU_ASSERT(r.be_p50_ms > 0 && r.be_p50_ms <= r.be_p99_ms && r.be_p99_ms <= r.be_max_ms);
		CU_ASSERT(r.be_mean_ms <= r.be_max_ms);
	}
	sim_trace_done(&t);
	sim_setup_done(&s);
}

static void test_worst_case_no_miss(void)
{
	struct sim_scenario sc;
	struct sim_setup s;
	struct sim_trace t;
	struct sim_result r;

	scenario(&sc, 60, SIM_BE_CELLO);
	sc.worst_case = true;
	sc.aligned = true;
	sc.be_bytes = 512 * SIM_KIB;
	sc.be_rate = 4;
	sc.be_peak = 20;
	CU_ASSERT_FATAL(sim_setup_build(&sc, SIM_ROTATION, SIM_VIDEO_MIX, 0, NULL, NULL, &s) == 0);
	CU_ASSERT_FATAL(sim_trace_load(&sc, s.be_part_bytes, &t) == 0);
	CU_ASSERT_FATAL(sim_run(&s, s.n_streams, &t, CW_SCHED_DELTA_L, &r) == 0);
	CU_ASSERT(r.rt_done > 1000);
	CU_ASSERT_EQUAL(r.rt_misses, 0);
	CU_ASSERT(r.rt_min_slack_ns >= 0);	/* BE work may use ΔL, never more */
	CU_ASSERT(r.be_done + r.be_rejected == t.n);
	sim_trace_done(&t);
	sim_setup_done(&s);
}

/* One stream on a 2-copy partition placed single (copy 0 of every block
 * on disk 0, copy 1 on disk 1): its reads alternate between the disks,
 * as admission charged them; disk 0 failing half-way, the survivor
 * serves the rest, and no request is late. */
static void test_copies_alternate(void)
{
	struct sim_scenario sc;
	struct sim_setup s;
	struct sim_trace t = { 0 };
	struct sim_result r;
	uint64_t want;

	sim_scenario_defaults(&sc);
	sc.disks = 2;
	sc.copies = 2;
	sc.placements = 1u << SIM_SINGLE;
	sc.streams = 1;
	sc.be = SIM_BE_NONE;
	sc.plan = SIM_PLAN_DAEMON;
	sc.duration_ns = 40 * CW_NS_PER_S;
	CU_ASSERT_FATAL(sim_scenario_finish(&sc) == 0);
	CU_ASSERT_FATAL(sim_setup_build(&sc, SIM_SINGLE, SIM_VIDEO_817, 1, NULL, NULL, &s) == 0);
	CU_ASSERT_FATAL(s.n_streams == 1 && s.streams[0].xdisk != NULL);
	CU_ASSERT_FATAL(s.streams[0].disk[0] != s.streams[0].xdisk[0]);
	want = due(&s.streams[0], sc.duration_ns);
	CU_ASSERT_FATAL(sim_run(&s, 1, &t, CW_SCHED_DELTA_L, &r) == 0);
	CU_ASSERT_EQUAL(r.rt_done, want);
	CU_ASSERT_EQUAL(r.rt_misses, 0);
	/* each disk served half the reads (the model's time varies) */
	CU_ASSERT(r.util[0] > 0 && r.util[1] > 0);
	CU_ASSERT(r.util[0] < 2 * r.util[1] && r.util[1] < 2 * r.util[0]);

	sc.fail_disk = 0;
	sc.fail_at_ns = 20 * CW_NS_PER_S;
	CU_ASSERT_FATAL(sim_run(&s, 1, &t, CW_SCHED_DELTA_L, &r) == 0);
	CU_ASSERT_EQUAL(r.stream_res[0].requests, want);
	CU_ASSERT_EQUAL(r.survive_misses + r.other_misses, 0);
	CU_ASSERT(r.stream_res[0].survive);
	CU_ASSERT(r.fail_spare == -1 && r.rebuild_end_s < 0);
	CU_ASSERT(r.stale_at_end > 0);
	/* disk 0 served about half the first half, disk 1 the rest */
	CU_ASSERT(r.util[1] > 2 * r.util[0]);
	sim_setup_done(&s);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("sim-engine", NULL, NULL);

	cwtest_add(s, "every RT release is made", test_every_release);
	cwtest_add(s, "every BE record is served once", test_every_be_record);
	cwtest_add(s, "delta-l: no miss at worst case", test_worst_case_no_miss);
	cwtest_add(s, "a stream's reads alternate between its copies", test_copies_alternate);
	return cwtest_run();
}
