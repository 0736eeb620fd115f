/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * `cwsim plan`: each disk's plan (clockwise/admit-state.h) — the slack
 * ΔL, the best-effort budget after the guard, the idle allowance, the
 * periodic server, the best-effort piece and reserve — of a pool database
 * with its stored reservations, or of a scenario after admitting its
 * streams as `cwsim run` does.  Both go through cw_admit_disk_plan, the
 * function clockwised's admission state uses, so `cwsim plan --pool` of a
 * pool prints what `cwctl disk plan` asks a daemon serving it.  A
 * scenario's streams may be admitted to survive the loss of a disk
 * (--survive 1, as cwsim admit's and cwctl resv create's).
 *
 * `cwsim admit --pool`: a stream over a partition of a pool tested as
 * `cwctl resv create --dry-run` tests it (cw_admit_state_reserve and
 * cw_admit_state_headroom, with --survive as there), booking nothing.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/layout.h>
#include <clockwise/units.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "plan-table.h"
#include "sim.h"

static void plan_usage(FILE *f)
{
	fprintf(f, "usage: cwsim plan [--json] --pool FILE\n"
		"       cwsim plan [--json] [--survive 0|1] (--preset NAME | SCENARIO)\n"
		"                  [--set KEY=VALUE]...\n"
		"  each disk's plan: a table, or with --json the array clockwised's\n"
		"  disk.plan answers; see cwsim(1)\n");
}

int sim_plan_parse_args(int argc, char **argv, struct sim_plan_args *ret, char *why,
			size_t why_len)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "pool", required_argument, NULL, 'P' },
		{ "preset", required_argument, NULL, 'p' },
		{ "set", required_argument, NULL, 's' },
		{ "survive", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sim_plan_args a = { .survive = -1 };
	int o;

	a.sets = calloc((size_t)argc + 1, sizeof(*a.sets));
	if (!a.sets)
		return -ENOMEM;
	optind = 0;	/* glibc: start over, whatever a previous parse left */
	opterr = 0;
	while ((o = getopt_long(argc, argv, ":jp:s:h", opts, NULL)) != -1) {
		switch (o) {
		case 'j':
			a.json = true;
			break;
		case 'P':
			a.pool = optarg;
			break;
		case 'p':
			a.preset = optarg;
			break;
		case 's':
			a.sets[a.n_sets++] = optarg;
			break;
		case 'S':
			if (strcmp(optarg, "0") && strcmp(optarg, "1")) {
				snprintf(why, why_len, "--survive takes 0 or 1, not %s", optarg);
				goto bad;
			}
			a.survive = optarg[0] - '0';
			break;
		case 'h':
			a.help = true;
			break;
		case ':':
			snprintf(why, why_len, "%s needs a value", argv[optind - 1]);
			goto bad;
		default:
			snprintf(why, why_len, "unknown option %s", argv[optind - 1]);
			goto bad;
		}
	}
	if (optind < argc)
		a.scenario = argv[optind++];
	if (a.help) {
		*ret = a;
		return 0;
	}
	if (optind < argc) {
		snprintf(why, why_len, "one SCENARIO at most, not also %s", argv[optind]);
		goto bad;
	}
	if (a.pool && (a.preset || a.scenario || a.n_sets)) {
		snprintf(why, why_len, "--pool takes no scenario, preset or --set");
		goto bad;
	}
	if (a.pool && a.survive >= 0) {
		snprintf(why, why_len, "--pool takes no --survive: its reservations keep the one "
			 "they were admitted with");
		goto bad;
	}
	if (!a.pool && !!a.preset == !!a.scenario) {
		snprintf(why, why_len, "a pool (--pool FILE), a preset or a SCENARIO file is needed,"
			 " one of them");
		goto bad;
	}
	*ret = a;
	return 0;
bad:
	free(a.sets);
	return -EINVAL;
}

static int print_rows(bool json, const struct plan_row *rows, size_t n)
{
	if (!json)
		plan_table_print(stdout, rows, n);
	else if (plan_table_print_json(stdout, rows, n) < 0) {
		fprintf(stderr, "cwsim plan: a plan does not fit in its JSON object\n");
		return EXIT_FAILURE;
	}
	return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* The pool at path and its admission state, as clockwised builds it; an
 * exit status when they cannot be had (said on stderr for cmd). */
static int pool_state(const char *cmd, const char *path, struct cw_pool **ret_pool,
		      struct cw_admit_state **ret_st)
{
	struct cw_error err = { 0 };
	int r;

	r = cw_pool_open(path, &err, ret_pool);
	if (r == -EBUSY) {
		fprintf(stderr, "cwsim %s: %s: the pool is open in another process, most likely a"
			" running clockwised: ask it with `cwctl %s`, or stop it first\n", cmd, path,
			!strcmp(cmd, "plan") ? "disk plan" : "resv create --dry-run");
		return EXIT_FAILURE;
	}
	if (r < 0) {
		fprintf(stderr, "cwsim %s: cannot open the pool: %s\n", cmd,
			err.msg[0] ? err.msg : strerror(-r));
		return SIM_EXIT_USAGE;
	}
	r = cw_admit_state_new(*ret_pool, NULL, ret_st);
	if (r < 0) {
		const struct cw_error *pe = cw_pool_last_error(*ret_pool);

		fprintf(stderr, "cwsim %s: %s: cannot load its disks, models and reservations: %s\n",
			cmd, path, pe && pe->msg[0] ? pe->msg : strerror(-r));
		return EXIT_FAILURE;
	}
	return EXIT_SUCCESS;
}

/* The pool's disks in id order, as clockwised's disk.plan lists them. */
static int plan_pool(const struct sim_plan_args *a)
{
	_cleanup_(sim_pool_closep) struct cw_pool *pool = NULL;
	_cleanup_(sim_state_freep) struct cw_admit_state *st = NULL;
	_cleanup_free_ struct cw_disk_info *d = NULL;
	_cleanup_free_ struct plan_row *rows = NULL;
	size_t n = 0, k = 0;
	int r = pool_state("plan", a->pool, &pool, &st);

	if (r != EXIT_SUCCESS)
		return r;
	r = cw_disk_list(pool, &d, &n);
	if (r < 0) {
		fprintf(stderr, "cwsim plan: %s: cannot list its disks: %s\n", a->pool,
			strerror(-r));
		return EXIT_FAILURE;
	}
	rows = calloc(n ? n : 1, sizeof(*rows));
	if (!rows) {
		fprintf(stderr, "cwsim plan: out of memory\n");
		return EXIT_FAILURE;
	}
	for (size_t i = 0; i < n; i++) {
		/* a disk the state does not know (missing) has no plan */
		if (cw_admit_state_plan(st, d[i].id, &rows[k].plan) < 0)
			continue;
		snprintf(rows[k++].disk, sizeof(rows->disk), "%s", d[i].name);
	}
	return print_rows(a->json, rows, k);
}

/* The scenario's disks after admitting its streams in its first
 * placement, named disk0, disk1, ... by their index. */
static int plan_scenario(const struct sim_plan_args *a)
{
	struct sim_scenario sc;
	struct sim_setup setup;
	struct plan_row rows[SIM_MAX_DISKS];
	enum sim_placement pl = 0;
	int e;

	if (sim_scenario_from_args(a->preset, a->scenario, false, a->sets, a->n_sets, &sc) < 0)
		return SIM_EXIT_USAGE;
	if (a->survive >= 0)
		sc.survive = a->survive ? CW_ADMIT_SURVIVE_ON : CW_ADMIT_SURVIVE_OFF;
	while (!(sc.placements & 1u << pl))
		pl++;
	e = sim_setup_build(&sc, pl, sc.video, sc.streams, NULL, NULL, &setup);
	if (e < 0)
		return EXIT_FAILURE;
	for (unsigned d = 0; d < sc.disks && e == 0; d++) {
		snprintf(rows[d].disk, sizeof(rows[d].disk), "disk%u", d);
		e = sim_setup_plan(&setup, d, setup.n_streams, &rows[d].plan);
	}
	if (e < 0) {
		fprintf(stderr, "cwsim plan: %s\n", strerror(-e));
		sim_setup_done(&setup);
		return EXIT_FAILURE;
	}
	if (!a->json)
		printf("%s placement, plan %s: %zu streams admitted%s (%.2f MiB/s); next: %s\n\n",
		       sim_placement_name(pl), sim_plan_name(sc.plan), setup.n_streams,
		       sc.copies > 1 && sc.survive != CW_ADMIT_SURVIVE_OFF ?
		       " to survive the loss of a disk" : "",
		       sim_setup_load_mb_s(&setup, setup.n_streams), setup.refusal);
	sim_setup_done(&setup);
	return print_rows(a->json, rows, sc.disks);
}

int sim_cmd_plan(int argc, char **argv)
{
	struct sim_plan_args a;
	char why[256];
	int e = sim_plan_parse_args(argc, argv, &a, why, sizeof(why));

	if (e == -ENOMEM) {
		fprintf(stderr, "cwsim plan: out of memory\n");
		return EXIT_FAILURE;
	}
	if (e < 0) {
		fprintf(stderr, "cwsim plan: %s\n", why);
		plan_usage(stderr);
		return SIM_EXIT_USAGE;
	}
	if (a.help)
		plan_usage(stdout);
	else
		e = a.pool ? plan_pool(&a) : plan_scenario(&a);
	free(a.sets);
	return a.help ? EXIT_SUCCESS : e;
}

static void admit_usage(FILE *f)
{
	fprintf(f, "usage: cwsim admit --pool FILE PART --block SIZE [--rate RATE]\n"
		"                   [--range START:END] [--survive 0|1] [--record]\n"
		"  a stream over PART tested as `cwctl resv create --dry-run` tests it;\n"
		"  JSON: the largest rate that fits (and, on a mirrored partition, the largest\n"
		"  that survives the loss of any one disk) and, with --rate, the verdict\n");
}

int sim_cmd_admit_pool(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pool", required_argument, NULL, 'P' }, { "block", required_argument, NULL, 'b' },
		{ "rate", required_argument, NULL, 'r' }, { "range", required_argument, NULL, 'R' },
		{ "survive", required_argument, NULL, 'S' }, { "record", no_argument, NULL, 'W' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	_cleanup_(sim_pool_closep) struct cw_pool *pool = NULL;
	_cleanup_(sim_state_freep) struct cw_admit_state *st = NULL;
	struct cw_admit_request rq = { .dry_run = true };
	struct cw_admit_refusal ref;
	const struct cw_admit_resv *rv;
	const char *path = NULL;
	uint64_t plain = 0, surv = 0;
	int o, r, rp, rs = 0;

	optind = 0;
	opterr = 0;
	while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (o) {
		case 'P':
			path = optarg;
			break;
		case 'b':
			if (cw_units_parse_size(optarg, &rq.block_bytes) < 0)
				goto usage;
			break;
		case 'r':
			if (cw_units_parse_rate(optarg, &rq.rate_bps) < 0)
				goto usage;
			break;
		case 'R':
			if (cw_units_parse_range(optarg, &rq.range_start_bytes,
						 &rq.range_end_bytes) < 0)
				goto usage;
			break;
		case 'S':
			if (strcmp(optarg, "0") && strcmp(optarg, "1"))
				goto usage;
			rq.survive = optarg[0] == '1' ? CW_ADMIT_SURVIVE_ON : CW_ADMIT_SURVIVE_OFF;
			break;
		case 'W':
			rq.record = true;
			break;
		case 'h':
			admit_usage(stdout);
			return EXIT_SUCCESS;
		default:
			goto usage;
		}
	}
	if (!path || optind != argc - 1 || !rq.block_bytes)
		goto usage;
	rq.part = argv[optind];
	r = pool_state("admit", path, &pool, &st);
	if (r != EXIT_SUCCESS)
		return r;
	/* the largest rates: the stream's own case and, on a mirrored
	 * partition, the one that survives a disk */
	rp = cw_admit_state_headroom(st, &(struct cw_admit_request){ .part = rq.part,
			.block_bytes = rq.block_bytes, .range_start_bytes = rq.range_start_bytes,
			.range_end_bytes = rq.range_end_bytes, .record = rq.record,
			.survive = CW_ADMIT_SURVIVE_OFF }, &plain, &ref);
	if (rp == 0 && rq.survive != CW_ADMIT_SURVIVE_OFF) {
		struct cw_admit_request s = rq;

		s.survive = CW_ADMIT_SURVIVE_ON;
		rs = cw_admit_state_headroom(st, &s, &surv, &ref);
		if (rs == -EINVAL && rq.survive == CW_ADMIT_SURVIVE_AUTO)
			rs = 1;	/* one copy: nothing to survive */
	}
	if (rp < 0 || rs < 0) {
		fprintf(stderr, "cwsim admit: %s\n", ref.reason[0] ? ref.reason : strerror(-(rp < 0 ? rp : rs)));
		return EXIT_FAILURE;
	}
	printf("{\"part\": ");
	sim_json_string(stdout, rq.part);
	printf(", \"block\": %" PRIu64 ", \"max_rate\": %" PRIu64, rq.block_bytes, plain);
	if (rq.survive != CW_ADMIT_SURVIVE_OFF && rs == 0)
		printf(", \"max_rate_survive\": %" PRIu64, surv);
	if (rq.rate_bps) {
		r = cw_admit_state_reserve(st, &rq, &rv, &ref, NULL);
		if (r < 0 && r != -EBUSY) {
			printf("}\n");
			fprintf(stderr, "cwsim admit: %s\n", ref.reason[0] ? ref.reason : strerror(-r));
			return EXIT_FAILURE;
		}
		printf(", \"rate\": %" PRIu64 ", \"admitted\": %s, \"reason\": ", rq.rate_bps,
		       r == 0 ? "true" : "false");
		sim_json_string(stdout, r == 0 ? "ok" : ref.reason);
	}
	printf("}\n");
	return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
usage:
	admit_usage(stderr);
	return SIM_EXIT_USAGE;
}

void sim_json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}
