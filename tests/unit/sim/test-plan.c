/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: `cwsim plan` takes a pool or a scenario (a preset or a file,
 * with --set), never both and never neither, and says what is wrong; the
 * plan key selects the paper's plan or clockwised's, the presets say
 * paper, and an explicit server turns the reserve and the automatic
 * server off; the plan of a disk is the one the run gives its scheduler
 * (ΔL, the budget after the guard, the server), counted without the
 * explicit server's task.
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>

#include "cwtest.h"
#include "../../../tools/sim/scenario.c"
#include "../../../tools/sim/trace.c"
#include "../../../tools/sim/stream.c"
#include "../../../tools/sim/setup.c"
#include "../../../tools/sim/engine.c"
#include "../../../tools/sim/move.c"
#include "../../../tools/sim/path.c"
#include "../../../tools/sim/pool.c"
#include "../../../tools/sim/plan.c"

/* Parses a NULL-terminated argument list (without "plan"). */
static int parse(struct sim_plan_args *a, char *why, ...)
{
	char *argv[16] = { "plan" };
	int argc = 1, e;
	va_list ap;

	va_start(ap, why);
	for (char *s; (s = va_arg(ap, char *)) && argc < 15;)
		argv[argc++] = s;
	va_end(ap);
	why[0] = '\0';
	e = sim_plan_parse_args(argc, argv, a, why, 256);
	CU_ASSERT((e == 0) == (why[0] == '\0'));	/* a reason exactly when refused */
	return e;
}

static void test_args(void)
{
	struct sim_plan_args a;
	char why[256];

	CU_ASSERT_FATAL(parse(&a, why, "--pool", "p.db", NULL) == 0);
	CU_ASSERT_STRING_EQUAL(a.pool, "p.db");
	CU_ASSERT(!a.json && !a.preset && !a.scenario && a.n_sets == 0);
	free(a.sets);
	CU_ASSERT_FATAL(parse(&a, why, "--json", "--preset", "quick", "--set", "plan=daemon",
			      "--set", "disks=2", NULL) == 0);
	CU_ASSERT(a.json && !a.pool);
	CU_ASSERT_STRING_EQUAL(a.preset, "quick");
	CU_ASSERT_FATAL(a.n_sets == 2);
	CU_ASSERT_STRING_EQUAL(a.sets[0], "plan=daemon");
	CU_ASSERT_STRING_EQUAL(a.sets[1], "disks=2");
	free(a.sets);
	CU_ASSERT_FATAL(parse(&a, why, "my.scn", "--json", NULL) == 0);
	CU_ASSERT_STRING_EQUAL(a.scenario, "my.scn");
	CU_ASSERT(a.json);
	free(a.sets);
	CU_ASSERT_FATAL(parse(&a, why, "--help", NULL) == 0);
	CU_ASSERT(a.help);
	free(a.sets);

	CU_ASSERT_EQUAL(parse(&a, why, NULL), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "--pool"));
	CU_ASSERT_EQUAL(parse(&a, why, "--pool", "p.db", "--preset", "quick", NULL), -EINVAL);
	CU_ASSERT_EQUAL(parse(&a, why, "--pool", "p.db", "x.scn", NULL), -EINVAL);
	CU_ASSERT_EQUAL(parse(&a, why, "--pool", "p.db", "--set", "seed=2", NULL), -EINVAL);
	CU_ASSERT_EQUAL(parse(&a, why, "--preset", "quick", "x.scn", NULL), -EINVAL);
	CU_ASSERT_EQUAL(parse(&a, why, "a.scn", "b.scn", NULL), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "b.scn"));
	CU_ASSERT_EQUAL(parse(&a, why, "--bogus", NULL), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "--bogus"));
	CU_ASSERT_EQUAL(parse(&a, why, "--pool", NULL), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "needs a value"));

	/* --survive: 0 or 1, for a scenario's streams (not -1: not given) */
	CU_ASSERT_FATAL(parse(&a, why, "--preset", "quick", NULL) == 0);
	CU_ASSERT(a.survive == -1);
	free(a.sets);
	CU_ASSERT_FATAL(parse(&a, why, "--survive", "1", "x.scn", NULL) == 0);
	CU_ASSERT(a.survive == 1);
	free(a.sets);
	CU_ASSERT_FATAL(parse(&a, why, "x.scn", "--survive", "0", NULL) == 0);
	CU_ASSERT(a.survive == 0);
	free(a.sets);
	CU_ASSERT_EQUAL(parse(&a, why, "--survive", "2", "x.scn", NULL), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "0 or 1"));
	CU_ASSERT_EQUAL(parse(&a, why, "--pool", "p.db", "--survive", "1", NULL), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "--survive"));
}

static void test_plan_key(void)
{
	struct sim_scenario sc;
	struct cw_admit_plan_opts o;
	char *sets[] = { "plan=daemon" }, *bad[] = { "plan=both" };

	CU_ASSERT_FATAL(sim_scenario_preset("quick", &sc) == 0);
	CU_ASSERT_EQUAL(sc.plan, SIM_PLAN_PAPER);
	CU_ASSERT_FATAL(sim_scenario_preset("paper", &sc) == 0);
	CU_ASSERT_EQUAL(sc.plan, SIM_PLAN_PAPER);
	sim_scenario_plan_opts(&sc, &o);
	CU_ASSERT(o.guard_min_ns == 0 && o.guard_div == 0 && !o.be_reserve && !o.auto_server);
	sim_scenario_defaults(&sc);
	CU_ASSERT_EQUAL(sc.plan, SIM_PLAN_DAEMON);
	sim_scenario_plan_opts(&sc, &o);
	CU_ASSERT(o.guard_min_ns == CW_ADMIT_GUARD_MIN_NS && o.guard_div == CW_ADMIT_GUARD_DIV &&
		  o.be_reserve && o.auto_server);
	sc.server_period_ns = CW_NS_PER_S;
	sc.server_slice_ns = CW_NS_PER_S / 10;
	sim_scenario_plan_opts(&sc, &o);
	CU_ASSERT(o.guard_min_ns == CW_ADMIT_GUARD_MIN_NS && !o.be_reserve && !o.auto_server);
	CU_ASSERT_FATAL(sim_scenario_from_args("quick", NULL, false, sets, 1, &sc) == 0);
	CU_ASSERT_EQUAL(sc.plan, SIM_PLAN_DAEMON);
	CU_ASSERT_EQUAL(sim_scenario_from_args("quick", NULL, false, bad, 1, &sc), -EINVAL);
}

/* The plan a run gives each disk's scheduler is sim_setup_plan's. */
static void test_plan_is_the_runs(void)
{
	struct sim_scenario sc;
	struct sim_setup s;
	struct sim_trace t = { 0 };
	struct sim_result r;
	char *sets[] = { "plan=daemon", "duration_s=5", "be=none" };

	CU_ASSERT_FATAL(sim_scenario_from_args("quick", NULL, false, sets, 3, &sc) == 0);
	CU_ASSERT_FATAL(sim_setup_build(&sc, SIM_ROTATION, sc.video, 20, NULL, NULL, &s) == 0);
	CU_ASSERT_FATAL(s.n_streams == 20);
	CU_ASSERT(s.be_reserve.service_ns > 0);
	CU_ASSERT_EQUAL(s.be_piece_bytes, CW_ADMIT_BE_PIECE_HDD);
	CU_ASSERT_FATAL(sim_run(&s, s.n_streams, &t, CW_SCHED_DELTA_L, &r) == 0);
	for (unsigned d = 0; d < sc.disks; d++) {
		struct cw_disk_plan p;

		CU_ASSERT_FATAL(sim_setup_plan(&s, d, s.n_streams, &p) == 0);
		CU_ASSERT_EQUAL(p.disk_id, d);
		CU_ASSERT(p.n_tasks > 0);
		CU_ASSERT_EQUAL(r.delta_l_ns[d], p.delta_l_ns);
		CU_ASSERT_EQUAL(r.be_budget_ns[d], p.be_budget_ns);
		CU_ASSERT_EQUAL(r.server_slice_ns[d], p.server_slice_ns);
		CU_ASSERT(p.be_budget_ns < p.delta_l_ns);
		/* a prefix of the streams: fewer tasks, at least as much slack */
		{
			struct cw_disk_plan q;

			CU_ASSERT_FATAL(sim_setup_plan(&s, d, 4, &q) == 0);
			CU_ASSERT(q.n_tasks < p.n_tasks);
			CU_ASSERT(q.delta_l_ns >= p.delta_l_ns);
		}
	}
	sim_setup_done(&s);
}

static void test_explicit_server(void)
{
	struct sim_scenario sc;
	struct sim_setup s;
	char *sets[] = { "plan=daemon", "server_period_ms=1000", "server_slice_ms=100" };

	CU_ASSERT_FATAL(sim_scenario_from_args("quick", NULL, false, sets, 3, &sc) == 0);
	CU_ASSERT_FATAL(sim_setup_build(&sc, SIM_ROTATION, sc.video, 6, NULL, NULL, &s) == 0);
	CU_ASSERT_EQUAL(s.be_reserve.service_ns, 0);
	for (unsigned d = 0; d < sc.disks; d++) {
		struct cw_disk_plan p;
		size_t streams_on_d = 0;

		for (size_t i = 0; i < s.n_streams; i++)
			streams_on_d += s.streams[i].disk_period_ns[d] != 0;
		CU_ASSERT_FATAL(sim_setup_plan(&s, d, s.n_streams, &p) == 0);
		CU_ASSERT_EQUAL(p.n_tasks, streams_on_d);
		CU_ASSERT_EQUAL(p.server_slice_ns, 100 * CW_NS_PER_MS);
		CU_ASSERT_EQUAL(p.server_period_ns, CW_NS_PER_S);
		CU_ASSERT_FALSE(p.be_starved);
	}
	sim_setup_done(&s);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("sim-plan", NULL, NULL);

	cwtest_add(s, "plan's arguments", test_args);
	cwtest_add(s, "the plan key", test_plan_key);
	cwtest_add(s, "the plan is the run's", test_plan_is_the_runs);
	cwtest_add(s, "an explicit server", test_explicit_server);
	return cwtest_run();
}
