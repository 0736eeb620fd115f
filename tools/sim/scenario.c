/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Scenario files: what cwsim simulates.  A scenario is "key = value" lines
 * ('#' starts a comment); cwsim(1) lists the keys.  The defaults are the
 * paper's set-up (section 4): three Quantum Atlas-II disks, Motion-JPEG and
 * CD-audio streams, the CELLO-like best-effort load, twenty minutes — run
 * under clockwised's plan (plan = daemon); the presets, which reproduce the
 * paper's figures, run under the paper's (plan = paper).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "sim.h"

#include <clockwise/layout.h>
#include <clockwise/mover.h>
#include <clockwise/pool-objects.h>
#include <clockwise/units.h>

static const char *const placement_names[SIM_N_PLACEMENTS] = {
	[SIM_ROTATION] = "rotation",
	[SIM_RANDOM] = "random",
	[SIM_SINGLE] = "single",
};

const char *sim_placement_name(enum sim_placement p)
{
	return (unsigned)p < SIM_N_PLACEMENTS ? placement_names[p] : "?";
}

static const char *const be_order_names[SIM_N_BEQ] = {
	[SIM_BEQ_FIFO] = "fifo",
	[SIM_BEQ_RBFQ] = "rbfq",
	[SIM_BEQ_SFC] = "sfc",
};

const char *sim_be_order_name(enum sim_be_order o)
{
	return (unsigned)o < SIM_N_BEQ ? be_order_names[o] : "?";
}

const char *sim_plan_name(enum sim_plan p)
{
	return p == SIM_PLAN_PAPER ? "paper" : "daemon";
}

void sim_scenario_plan_opts(const struct sim_scenario *sc, struct cw_admit_plan_opts *ret)
{
	if (sc->plan == SIM_PLAN_PAPER)
		cw_admit_plan_opts_paper(ret);
	else
		cw_admit_plan_opts_init(ret);
	/* The scenario's own server is admitted like a stream before them
	 * all: it is the disk's room for best effort, so admission keeps no
	 * other and the plan adds none. */
	if (sc->server_period_ns) {
		ret->be_reserve = false;
		ret->auto_server = false;
	}
}

void sim_scenario_defaults(struct sim_scenario *sc)
{
	*sc = (struct sim_scenario){
		.model_spec = "atlas2",
		.disks = 3,
		.placements = 1u << SIM_ROTATION | 1u << SIM_RANDOM,
		.policies = 1u << CW_SCHED_DELTA_L | 1u << CW_SCHED_EDF | 1u << CW_SCHED_LST |
			    1u << CW_SCHED_DYNAMIC,
		.duration_ns = 1200 * CW_NS_PER_S,
		.seed = 1,
		.video = SIM_VIDEO_MIX,
		.buffer_scale = 1,
		.rt_area_pct = 30,
		.be_area_pct = 50,
		.clip_blocks = 60,
		.be = SIM_BE_CELLO,
		.be_rate = 45,
		.be_peak = 200,
		.be_burst_s = 1,
		.be_bytes = 4 * SIM_KIB,
		.be_write_pct = 45,
		.be_partitions = 8,
		.copies = 1,
		.be_pblock_bytes = SIM_MIB,
		.cache_ssd_us = 100,
		.move_at_ns = -1,
		.move_part = -1,
		.move_off = -1,
		.fail_disk = -1,
		.timeline_ns = CW_NS_PER_S / 2,
		.mover_depth = 16,	/* clockwised.conf(5)'s default */
		.mover_share = 100,
		.loads = 40,
		.be_orders = 1u << SIM_BEQ_FIFO,
		.sfc_curve = CW_SFC_HILBERT,
		.sfc_window_ppm = 350000,
	};
}

int sim_scenario_preset(const char *name, struct sim_scenario *sc)
{
	sim_scenario_defaults(sc);
	sc->bus_bps = 20000000;	/* Fast-Wide SCSI-2, one bus per disk */
	sc->host = (struct cw_host_model){ .cpus = 1, .share_ppm = CW_HOST_SHARE_DEFAULT_PPM };
	sc->plan = SIM_PLAN_PAPER;	/* the figures are the paper's */
	if (!strcmp(name, "paper"))
		return 0;
	if (!strcmp(name, "quick")) {
		/* the paper's shape, small: a test-sized sweep */
		sc->duration_ns = 60 * CW_NS_PER_S;
		sc->loads = 8;
		return 0;
	}
	return -ENOENT;
}

static int bad(const char *where, const char *key, const char *why)
{
	fprintf(stderr, "cwsim: %s: %s: %s\n", where, key, why);
	return -EINVAL;
}

static int parse_u64(const char *v, uint64_t lo, uint64_t hi, uint64_t *ret)
{
	char *end;
	unsigned long long x;

	if (*v < '0' || *v > '9')
		return -EINVAL;
	errno = 0;
	x = strtoull(v, &end, 10);
	if (errno || *end || x < lo || x > hi)
		return -EINVAL;
	*ret = x;
	return 0;
}

static int parse_double(const char *v, double lo, double hi, double *ret)
{
	char *end;
	double x;

	if (!*v)
		return -EINVAL;
	errno = 0;
	x = strtod(v, &end);
	if (errno || *end || !isfinite(x) || x < lo || x > hi)
		return -EINVAL;
	*ret = x;
	return 0;
}

/* A comma-separated list of names into a bit mask. */
static int parse_mask(const char *v, const char *const *names, unsigned n, unsigned *ret)
{
	_cleanup_free_ char *copy = strdup(v);
	unsigned mask = 0;
	char *save = NULL;

	if (!copy)
		return -ENOMEM;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		unsigned i;

		t += strspn(t, " \t");
		t[strcspn(t, " \t")] = '\0';
		for (i = 0; i < n; i++)
			if (names[i] && !strcmp(t, names[i]))
				break;
		if (i == n)
			return -EINVAL;
		mask |= 1u << i;
	}
	if (!mask)
		return -EINVAL;
	*ret = mask;
	return 0;
}

static int set_path(char *dst, size_t len, const char *base, const char *path)
{
	int n;

	if (!*path)
		return -EINVAL;
	if (path[0] == '/' || !base[0])
		n = snprintf(dst, len, "%s", path);
	else
		n = snprintf(dst, len, "%s/%s", base, path);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Milliseconds or seconds (a decimal) into nanoseconds. */
/* A duration (clockwise/units.h); a bare number counts in the key's unit. */
static int parse_time(const char *v, int64_t unit_ns, int64_t hi_ns, int64_t *ret)
{
	int64_t ns;

	if (cw_units_parse_duration(v, unit_ns, &ns) < 0 || ns > hi_ns)
		return -EINVAL;
	*ret = ns;
	return 0;
}

/* "P%" (of the disk's time) or "P%be" (of its best-effort capacity). */
static int parse_pct(const char *v, double *ret, bool *ret_of_be)
{
	_cleanup_free_ char *copy = strdup(v);
	char *pc;

	if (!copy)
		return -ENOMEM;
	pc = strchr(copy, '%');
	if (!pc || (strcmp(pc, "%") && strcmp(pc, "%be")))
		return -EINVAL;
	*ret_of_be = pc[1] != '\0';
	*pc = '\0';
	return parse_double(copy, 0, 100, ret);
}

/* "NAME key=value ...": a best-effort client. */
/* "WHAT at TIME": cuts v to WHAT and reads TIME (seconds, or with a
 * unit) into *ret_ns. */
static int parse_at(char *v, int64_t *ret_ns)
{
	char *at = strstr(v, " at ");

	if (!at)
		return -EINVAL;
	*at = '\0';
	at += 4;
	at += strspn(at, " \t");
	return parse_time(at, CW_UNITS_S, CW_UNITS_S * 86400 * 7, ret_ns);
}

/* DISK[,DISK...] (scenario disks, 0 for the first) as a mask of them,
 * at least one; list is cut up. */
static int parse_disks(char *list, uint64_t *ret)
{
	char *save = NULL;
	uint64_t u, mask = 0;

	for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		t += strspn(t, " \t");
		t[strcspn(t, " \t")] = '\0';
		if (parse_u64(t, 0, SIM_MAX_DISKS - 1, &u) < 0)
			return -EINVAL;
		mask |= UINT64_C(1) << u;
	}
	if (!mask)
		return -EINVAL;
	*ret = mask;
	return 0;
}

/* move = PART to DISK[,DISK...] at TIME, PART be<N> or be (every one);
 * evacuate = DISK at TIME. */
static int parse_move(struct sim_scenario *sc, const char *key, const char *v,
		      const char *where)
{
	_cleanup_free_ char *copy = strdup(v);
	char *to;
	uint64_t u, mask = 0;
	int64_t at;
	int part = -1;

	if (!copy)
		return -ENOMEM;
	if (!strcmp(key, "evacuate")) {
		if (parse_at(copy, &at) < 0 || parse_u64(copy, 0, SIM_MAX_DISKS - 1, &u) < 0)
			return bad(where, key, "expected DISK at SECONDS (DISK: 0 for the first)");
		sc->move_off = (int)u;
		sc->move_disks = 0;
		sc->move_part = -1;
		sc->move_at_ns = at;
		return 0;
	}
	if (parse_at(copy, &at) < 0 || !(to = strstr(copy, " to ")))
		return bad(where, key, "expected PART to DISK[,DISK...] at SECONDS");
	*to = '\0';
	to += 4;
	if (strcmp(copy, "be")) {
		if (strncmp(copy, "be", 2) || parse_u64(copy + 2, 0, 1023, &u) < 0)
			return bad(where, key, "PART: expected be (every best-effort partition) "
				   "or be<N> (0 for the first)");
		part = (int)u;
	}
	if (parse_disks(to, &mask) < 0)
		return bad(where, key, "expected PART to DISK[,DISK...] at SECONDS (DISK: a disk of "
			   "the scenario, 0 for the first)");
	sc->move_part = part;
	sc->move_disks = mask;
	sc->move_off = -1;
	sc->move_at_ns = at;
	return 0;
}

static int parse_client(struct sim_scenario *sc, const char *v, const char *where)
{
	_cleanup_free_ char *copy = strdup(v);
	struct sim_client c = { .weight = 1, .depth = 8, .bytes = 64 * SIM_KIB };
	char *save = NULL, *t;
	uint64_t u;
	double x;

	if (!copy)
		return -ENOMEM;
	if (sc->n_clients == SIM_MAX_CLIENTS)
		return bad(where, "client", "at most 16 clients");
	t = strtok_r(copy, " \t", &save);
	if (!t || strchr(t, '=') || strlen(t) >= sizeof(c.name))
		return bad(where, "client", "expected NAME [weight=W] [resv=P%|P%be] "
			   "[limit=P%|P%be] [depth=N] [size_kb=K] [prio=P] [credit_ms=T] "
			   "[zipf=THETA]");
	snprintf(c.name, sizeof(c.name), "%s", t);
	while ((t = strtok_r(NULL, " \t", &save))) {
		char *eq = strchr(t, '=');
		const char *k = t, *val = eq ? eq + 1 : "";

		if (!eq)
			return bad(where, t, "expected key=value");
		*eq = '\0';
		if (!strcmp(k, "weight") && parse_u64(val, 1, 1000000, &u) == 0)
			c.weight = (uint32_t)u;
		else if (!strcmp(k, "resv") && parse_pct(val, &c.resv_pct, &c.resv_of_be) == 0)
			;
		else if (!strcmp(k, "limit") && parse_pct(val, &c.limit_pct, &c.limit_of_be) == 0 &&
			 c.limit_pct > 0)
			;
		else if (!strcmp(k, "depth") && parse_u64(val, 1, SIM_MAX_DEPTH, &u) == 0)
			c.depth = (unsigned)u;
		else if (!strcmp(k, "size_kb") && parse_u64(val, 4, 64 * 1024, &u) == 0 && u % 4 == 0)
			c.bytes = u * SIM_KIB;
		else if (!strcmp(k, "prio") && parse_u64(val, 0, 255, &u) == 0)
			c.prio = (uint32_t)u;
		else if (!strcmp(k, "credit_ms") && parse_double(val, 0, 1e6, &x) == 0)
			c.credit_ns = (int64_t)llround(x * 1e6);
		else if (!strcmp(k, "zipf") && parse_double(val, 0, 10, &x) == 0)
			c.zipf = x;
		else
			return bad(where, k, "expected weight=1..1000000, resv=P% or P%be (0..100), "
				   "limit=P% or P%be (more than 0), depth=1..256, size_kb=4..65536 "
				   "(a multiple of 4), prio=0..255, credit_ms=T or zipf=0..10");
	}
	if (c.limit_pct && c.resv_of_be == c.limit_of_be && c.limit_pct < c.resv_pct)
		return bad(where, c.name, "the limit is below the reservation");
	sc->clients[sc->n_clients++] = c;
	return 0;
}

int sim_scenario_set(struct sim_scenario *sc, const char *key, const char *v, const char *where)
{
	static const char *const policy_names[] = { "delta-l", "edf", "lst", "dynamic" };
	uint64_t u;
	double x;

	if (!strcmp(key, "model")) {
		if (!strncmp(v, "file:", 5)) {
			char path[PATH_MAX];

			if (set_path(path, sizeof(path), sc->base_dir, v + 5) < 0)
				return bad(where, key, "bad path");
			snprintf(sc->model_spec, sizeof(sc->model_spec), "file:%s", path);
			return 0;
		}
		if (!strncmp(v, "pool:", 5)) {
			/* A disk name has no ':', so the last one ends the path. */
			const char *disk = strrchr(v + 5, ':');
			char db[PATH_MAX], path[PATH_MAX];

			if (!disk || disk == v + 5 || !cw_name_valid(disk + 1) ||
			    (size_t)(disk - (v + 5)) >= sizeof(db))
				return bad(where, key, "expected pool:DB_PATH:DISK_NAME");
			memcpy(db, v + 5, (size_t)(disk - (v + 5)));
			db[disk - (v + 5)] = '\0';
			if (set_path(path, sizeof(path), sc->base_dir, db) < 0)
				return bad(where, key, "bad path");
			snprintf(sc->model_spec, sizeof(sc->model_spec), "pool:%s:%s", path, disk + 1);
			return 0;
		}
		if (!*v || strlen(v) >= sizeof(sc->model_spec))
			return bad(where, key, "expected a preset name (perhaps with settings such as "
				   "bus=20MB/s), file:PATH or pool:DB_PATH:DISK_NAME");
		snprintf(sc->model_spec, sizeof(sc->model_spec), "%s", v);
		return 0;
	}
	if (!strcmp(key, "disks")) {
		if (parse_u64(v, 1, SIM_MAX_DISKS, &u) < 0)
			return bad(where, key, "expected 1..64");
		sc->disks = (unsigned)u;
		return 0;
	}
	if (!strcmp(key, "placement")) {
		if (parse_mask(v, placement_names, SIM_N_PLACEMENTS, &sc->placements) < 0)
			return bad(where, key, "expected rotation, random, single (comma-separated)");
		return 0;
	}
	if (!strcmp(key, "policy")) {
		if (parse_mask(v, policy_names, CW_SCHED_N_POLICIES, &sc->policies) < 0)
			return bad(where, key, "expected delta-l, edf, lst, dynamic (comma-separated)");
		return 0;
	}
	if (!strcmp(key, "be_order")) {
		if (parse_mask(v, be_order_names, SIM_N_BEQ, &sc->be_orders) < 0)
			return bad(where, key, "expected fifo, rbfq, sfc (comma-separated)");
		return 0;
	}
	if (!strcmp(key, "client"))
		return parse_client(sc, v, where);
	if (!strcmp(key, "sfc_curve"))
		return cw_sfc_curve_parse(v, &sc->sfc_curve) < 0 ?
		       bad(where, key, "expected sweep, c-scan, hilbert, gray or diagonal") : 0;
	if (!strcmp(key, "sfc_window_pct")) {
		if (parse_double(v, 0, 100, &x) < 0)
			return bad(where, key, "expected 0..100");
		sc->sfc_window_ppm = (uint32_t)llround(x * 1e4);
		return 0;
	}
	if (!strcmp(key, "duration_s"))
		return parse_time(v, CW_UNITS_S, CW_UNITS_S * 86400 * 7, &sc->duration_ns) < 0 ||
		       !sc->duration_ns ?
		       bad(where, key, "expected seconds (or 10m, 1h), more than 0 and at most a week") : 0;
	if (!strcmp(key, "seed"))
		return parse_u64(v, 0, UINT64_MAX, &sc->seed) < 0 ?
		       bad(where, key, "expected an unsigned integer") : 0;
	if (!strcmp(key, "streams")) {
		if (parse_u64(v, 0, 100000, &u) < 0)
			return bad(where, key, "expected 0 (until refused) .. 100000");
		sc->streams = (unsigned)u;
		return 0;
	}
	if (!strcmp(key, "service")) {
		if (!strcmp(v, "mechanics"))
			sc->worst_case = false;
		else if (!strcmp(v, "worst"))
			sc->worst_case = true;
		else
			return bad(where, key, "expected mechanics or worst");
		return 0;
	}
	if (!strcmp(key, "phases")) {
		if (!strcmp(v, "random"))
			sc->aligned = false;
		else if (!strcmp(v, "aligned"))
			sc->aligned = true;
		else
			return bad(where, key, "expected random or aligned");
		return 0;
	}
	if (!strcmp(key, "due")) {
		return cw_admit_due_parse(v, &sc->due) < 0 ?
		       bad(where, key, "expected disk or stream") : 0;
	}
	if (!strcmp(key, "plan")) {
		if (!strcmp(v, "daemon"))
			sc->plan = SIM_PLAN_DAEMON;
		else if (!strcmp(v, "paper"))
			sc->plan = SIM_PLAN_PAPER;
		else
			return bad(where, key, "expected daemon or paper");
		return 0;
	}
	if (!strcmp(key, "video")) {
		if (!strcmp(v, "mix"))
			sc->video = SIM_VIDEO_MIX;
		else if (!strcmp(v, "817"))
			sc->video = SIM_VIDEO_817;
		else if (!strcmp(v, "245"))
			sc->video = SIM_VIDEO_245;
		else
			return bad(where, key, "expected mix, 817 or 245");
		return 0;
	}
#define UINT_KEY(name, field, lo, hi, msg)                                  \
	if (!strcmp(key, name)) {                                           \
		if (parse_u64(v, lo, hi, &u) < 0)                           \
			return bad(where, key, msg);                        \
		sc->field = (unsigned)u;                                    \
		return 0;                                                   \
	}
	UINT_KEY("buffer_scale", buffer_scale, 1, 64, "expected 1..64")
	UINT_KEY("rt_area_pct", rt_area_pct, 1, 100, "expected 1..100")
	UINT_KEY("be_area_pct", be_area_pct, 1, 100, "expected 1..100")
	UINT_KEY("clip_blocks", clip_blocks, 1, 1000000, "expected 1..1000000")
	UINT_KEY("be_write_pct", be_write_pct, 0, 100, "expected 0..100")
	UINT_KEY("be_partitions", be_partitions, 1, 1024, "expected 1..1024")
	UINT_KEY("copies", copies, 1, CW_COPIES_MAX, "expected 1..3 (copies of each block)")
	UINT_KEY("cache_pct", cache_pct, 0, 100, "expected 0..100 (percent of the BE blocks)")
	UINT_KEY("cache_ssd_us", cache_ssd_us, 1, 1000000, "expected 1..1000000 (microseconds)")
	UINT_KEY("loads", loads, 1, 1000, "expected 1..1000")
	UINT_KEY("mover_depth", mover_depth, 1, CW_MOVER_DEPTH_MAX, "expected 1..64 (blocks)")
	UINT_KEY("mover_share", mover_share, 1, 100, "expected 1..100 (percent)")
#undef UINT_KEY
	if (!strcmp(key, "be")) {
		if (!strcmp(v, "none"))
			sc->be = SIM_BE_NONE;
		else if (!strcmp(v, "cello"))
			sc->be = SIM_BE_CELLO;
		else if (!strncmp(v, "csv:", 4) || !strncmp(v, "blkparse:", 9)) {
			bool csv = v[0] == 'c';

			if (set_path(sc->be_path, sizeof(sc->be_path), sc->base_dir,
				     v + (csv ? 4 : 9)) < 0)
				return bad(where, key, "bad path");
			sc->be = csv ? SIM_BE_CSV : SIM_BE_BLKPARSE;
		} else
			return bad(where, key, "expected none, cello, csv:PATH or blkparse:PATH");
		return 0;
	}
	if (!strcmp(key, "fail")) {
		_cleanup_free_ char *copy = strdup(v);
		int64_t at;

		if (!copy)
			return -ENOMEM;
		if (!strcmp(v, "none")) {
			sc->fail_disk = -1;
			return 0;
		}
		if (parse_at(copy, &at) < 0 || parse_u64(copy, 0, SIM_MAX_DISKS - 1, &u) < 0)
			return bad(where, key, "expected DISK at SECONDS (DISK: 0 for the first), "
				   "or none");
		sc->fail_disk = (int)u;
		sc->fail_at_ns = at;
		return 0;
	}
	if (!strcmp(key, "spare")) {
		_cleanup_free_ char *copy = strdup(v);

		if (!copy)
			return -ENOMEM;
		if (!strcmp(v, "none")) {
			sc->spares = 0;
			return 0;
		}
		if (parse_disks(copy, &sc->spares) < 0)
			return bad(where, key, "expected DISK[,DISK...] (disks of the scenario, 0 for "
				   "the first), or none");
		return 0;
	}
	if (!strcmp(key, "survive")) {
		if (!strcmp(v, "auto"))
			sc->survive = CW_ADMIT_SURVIVE_AUTO;
		else if (!strcmp(v, "1"))
			sc->survive = CW_ADMIT_SURVIVE_ON;
		else if (!strcmp(v, "0"))
			sc->survive = CW_ADMIT_SURVIVE_OFF;
		else
			return bad(where, key, "expected 0, 1 or auto (the streams' --survive)");
		return 0;
	}
	if (!strcmp(key, "move") || !strcmp(key, "evacuate")) {
		if (!strcmp(v, "none")) {
			sc->move_at_ns = -1;
			return 0;
		}
		return parse_move(sc, key, v, where);
	}
	if (!strcmp(key, "be_rate"))
		return parse_double(v, 0.001, 1e6, &sc->be_rate) < 0 ?
		       bad(where, key, "expected requests per second (0.001..1e6)") : 0;
	if (!strcmp(key, "be_peak"))
		return parse_double(v, 0.001, 1e6, &sc->be_peak) < 0 ?
		       bad(where, key, "expected requests per second (0.001..1e6)") : 0;
	if (!strcmp(key, "be_burst_s"))
		return parse_double(v, 0.001, 86400, &sc->be_burst_s) < 0 ?
		       bad(where, key, "expected seconds (0.001..86400)") : 0;
	if (!strcmp(key, "be_size_kb")) {
		if (parse_u64(v, 1, 1024 * 1024, &u) < 0)
			return bad(where, key, "expected KiB, 1..1048576");
		sc->be_bytes = u * SIM_KIB;
		return 0;
	}
	if (!strcmp(key, "be_part_mb")) {
		if (parse_u64(v, 0, UINT64_C(1) << 30, &u) < 0)
			return bad(where, key, "expected MiB (0: the BE area shared out)");
		sc->be_part_max_bytes = u * SIM_MIB;
		return 0;
	}
	if (!strcmp(key, "be_pblock_kb")) {
		if (parse_u64(v, 4, 1024 * 1024, &u) < 0 || u % 4)
			return bad(where, key, "expected KiB, a multiple of 4 (4..1048576)");
		sc->be_pblock_bytes = u * SIM_KIB;
		return 0;
	}
	if (!strcmp(key, "bus_mb_s")) {
		if (parse_double(v, 0, 1e6, &x) < 0)
			return bad(where, key, "expected MB/s (10^6 bytes), 0 for no limit");
		sc->bus_bps = (uint64_t)llround(x * 1e6);
		return 0;
	}
	if (!strcmp(key, "pool")) {
		if (!*v) {
			sc->pool_path[0] = '\0';
			return 0;
		}
		return set_path(sc->pool_path, sizeof(sc->pool_path), sc->base_dir, v) < 0 ?
		       bad(where, key, "bad path") : 0;
	}
	if (!strcmp(key, "host_request_us"))
		return parse_time(v, CW_UNITS_US, CW_UNITS_S, &sc->host.request_ns) < 0 ?
		       bad(where, key, "expected microseconds of CPU a request (or 800ns; 0: free)") : 0;
	if (!strcmp(key, "host_copy_mb_s")) {
		if (parse_double(v, 0, 1e9, &x) < 0)
			return bad(where, key, "expected MB/s (10^6 bytes) one CPU copies, 0 for free");
		sc->host.byte_ps = x > 0 ? (uint64_t)ceil(1e6 / x) : 0;
		return 0;
	}
	if (!strcmp(key, "host_cpus")) {
		if (parse_u64(v, 1, 4096, &u) < 0)
			return bad(where, key, "expected 1..4096");
		sc->host.cpus = (uint32_t)u;
		return 0;
	}
	if (!strcmp(key, "host_share_pct")) {
		if (parse_double(v, 0.0001, 100, &x) < 0)
			return bad(where, key, "expected a percentage of the CPUs, above 0 up to 100");
		sc->host.share_ppm = (uint32_t)llround(x * 1e4);
		return 0;
	}
	if (!strcmp(key, "server_period_ms"))
		return parse_time(v, CW_UNITS_MS, CW_UNITS_S * 3600, &sc->server_period_ns) < 0 ?
		       bad(where, key, "expected milliseconds (or 10us, 1s; 0: no server)") : 0;
	if (!strcmp(key, "server_slice_ms"))
		return parse_time(v, CW_UNITS_MS, CW_UNITS_S * 3600, &sc->server_slice_ns) < 0 ?
		       bad(where, key, "expected milliseconds (or 10us, 1s)") : 0;
	return bad(where, key, "unknown key");
}

int sim_scenario_load(const char *path, struct sim_scenario *sc)
{
	_cleanup_free_ char *line = NULL;
	FILE *f;
	size_t len = 0;
	unsigned long lineno = 0;
	const char *slash;
	int e = 0;

	f = fopen(path, "re");
	if (!f) {
		fprintf(stderr, "cwsim: %s: %m\n", path);
		return -errno;
	}
	slash = strrchr(path, '/');
	if (slash)
		snprintf(sc->base_dir, sizeof(sc->base_dir), "%.*s", (int)(slash - path), path);
	else
		sc->base_dir[0] = '\0';
	while (getline(&line, &len, f) >= 0) {
		char where[PATH_MAX + 32], *s, *eq, *k, *v;

		lineno++;
		snprintf(where, sizeof(where), "%s:%lu", path, lineno);
		s = line;
		s[strcspn(s, "#\r\n")] = '\0';
		s += strspn(s, " \t");
		if (!*s)
			continue;
		eq = strchr(s, '=');
		if (!eq) {
			e = bad(where, s, "expected key = value");
			break;
		}
		k = s;
		*eq = '\0';
		for (char *t = eq; t > k && strchr(" \t", t[-1]); t--)
			t[-1] = '\0';
		v = eq + 1;
		v += strspn(v, " \t");
		for (char *t = v + strlen(v); t > v && strchr(" \t", t[-1]); t--)
			t[-1] = '\0';
		e = sim_scenario_set(sc, k, v, where);
		if (e < 0)
			break;
	}
	if (!e && ferror(f)) {
		fprintf(stderr, "cwsim: %s: read error\n", path);
		e = -EIO;
	}
	fclose(f);
	return e;
}

static int load_model_file(const char *path, struct cw_model *ret)
{
	_cleanup_free_ char *line = NULL;
	size_t len = 0;
	FILE *f = fopen(path, "re");
	int e = -EINVAL;

	if (!f) {
		fprintf(stderr, "cwsim: model %s: %m\n", path);
		return -errno;
	}
	/* the first line that is not blank or a comment is the model */
	while (getline(&line, &len, f) >= 0) {
		line[strcspn(line, "\r\n")] = '\0';
		if (!line[strspn(line, " \t")] || line[strspn(line, " \t")] == '#')
			continue;
		e = cw_model_parse(line + strspn(line, " \t"), ret);
		break;
	}
	fclose(f);
	if (e < 0)
		fprintf(stderr, "cwsim: model %s: not a valid \"cwmodel1 ...\" line\n", path);
	return e;
}

/* The model stored for a disk in a pool database, read without the
 * pool's lock so that a running daemon's pool can be used. */
static int load_model_pool(const char *spec, struct cw_model *ret)
{
	char db[PATH_MAX];
	const char *disk = strrchr(spec, ':');
	struct cw_error err = { 0 };
	int e;

	snprintf(db, sizeof(db), "%.*s", (int)(disk - spec), spec);
	e = cw_pool_read_disk_model(db, disk + 1, ret, NULL, &err);
	if (e < 0)
		fprintf(stderr, "cwsim: model: %s\n", err.msg[0] ? err.msg : strerror(-e));
	return e;
}

/* What runs on a pool (what: "move", "copies"): one placement, no
 * periodic server, and the scenario's pool or a scratch one.  Prints why
 * not. */
static int on_pool(struct sim_scenario *sc, const char *what)
{
	if (__builtin_popcount(sc->placements) != 1) {
		fprintf(stderr, "cwsim: %s: one placement, not several\n", what);
		return -EINVAL;
	}
	if (sc->server_period_ns) {
		fprintf(stderr, "cwsim: %s: runs on a pool, whose admission keeps its own "
			"best-effort room; server_period_ms does not apply\n", what);
		return -EINVAL;
	}
	return !sc->pool_path[0] && sim_pool_scratch(sc) < 0 ? -EINVAL : 0;
}

int sim_scenario_finish(struct sim_scenario *sc)
{
	int e;

	if (!strncmp(sc->model_spec, "file:", 5))
		e = load_model_file(sc->model_spec + 5, &sc->model);
	else if (!strncmp(sc->model_spec, "pool:", 5))
		e = load_model_pool(sc->model_spec + 5, &sc->model);
	else {
		/* a preset and its mechanics, as emulate = takes it */
		char why[512];

		e = cw_model_from_string_why(sc->model_spec, &sc->model, why, sizeof(why));
		if (e < 0)
			fprintf(stderr, "cwsim: model: %s\n", why);
	}
	if (e < 0)
		return -EINVAL;
	if (sc->rt_area_pct + sc->be_area_pct > 100) {
		fprintf(stderr, "cwsim: rt_area_pct + be_area_pct must be at most 100\n");
		return -EINVAL;
	}
	if (sc->server_slice_ns > sc->server_period_ns ||
	    (sc->server_period_ns && !sc->server_slice_ns)) {
		fprintf(stderr, "cwsim: the BE server needs 0 < server_slice_ms <= server_period_ms\n");
		return -EINVAL;
	}
	if (sc->bus_bps) {
		uint64_t fastest = 0;

		for (unsigned i = 0; i < sc->model.n_zones; i++)
			fastest = CW_MAX(fastest, sc->model.zone[i].rate_bps);
		if (sc->bus_bps < fastest)
			fprintf(stderr, "cwsim: warning: the bus (%.1f MB/s) is slower than the disk's"
				" fastest zone (%.1f MB/s): requests will take longer than the model"
				" admits (counted as overruns)\n", (double)sc->bus_bps / 1e6,
				(double)fastest / 1e6);
	}
	if (sc->be_peak < sc->be_rate) {
		fprintf(stderr, "cwsim: be_peak must be at least be_rate\n");
		return -EINVAL;
	}
	/* the mover runs on a pool, and copies are placed by the pool's
	 * placement: the scenario's, or a scratch one */
	if (sc->move_at_ns >= 0 && on_pool(sc, "move") < 0)
		return -EINVAL;
	if (sc->copies > 1) {
		if (sc->copies > sc->disks) {
			fprintf(stderr, "cwsim: copies: %u copies need %u disks, the scenario has "
				"%u\n", sc->copies, sc->copies, sc->disks);
			return -EINVAL;
		}
		if (sc->cache_pct) {
			fprintf(stderr, "cwsim: copies: an SSD cache in front of copies is not "
				"supported yet (cache_pct)\n");
			return -EINVAL;
		}
		if (on_pool(sc, "copies") < 0)
			return -EINVAL;
	}
	if (sc->spares && sc->copies < 2 && sc->move_at_ns < 0 && on_pool(sc, "spare") < 0)
		return -EINVAL;
	if (sc->pool_path[0]) {
		/* the pool's disks and blocks, laid out by one placement */
		if (__builtin_popcount(sc->placements) != 1) {
			fprintf(stderr, "cwsim: pool: one placement (the partitions' in the pool), "
				"not several\n");
			return -EINVAL;
		}
		if (sc->server_period_ns) {
			fprintf(stderr, "cwsim: pool: the pool's admission keeps its own best-effort "
				"room; server_period_ms does not apply\n");
			return -EINVAL;
		}
		if (sim_pool_probe(sc->pool_path, &sc->disks, &sc->be_pblock_bytes) < 0)
			return -EINVAL;
	}
	if ((sc->disks < 64 && sc->spares >> sc->disks) || sc->fail_disk >= (int)sc->disks) {
		fprintf(stderr, "cwsim: %s: the scenario has disks 0 to %u\n",
			sc->fail_disk >= (int)sc->disks ? "fail" : "spare", sc->disks - 1);
		return -EINVAL;
	}
	if (sc->spares && sc->copies > sc->disks - sim_scenario_spares(sc)) {
		fprintf(stderr, "cwsim: copies: %u copies need %u disks besides the spares, the "
			"scenario has %u\n", sc->copies, sc->copies, sc->disks - sim_scenario_spares(sc));
		return -EINVAL;
	}
	if (sc->spares && !(sc->placements & ~(1u << SIM_SINGLE))) {
		fprintf(stderr, "cwsim: spare: placement single puts a stream on each disk in "
			"turn; use rotation or random\n");
		return -EINVAL;
	}
	if (sc->fail_disk >= 0) {
		if (sc->copies < 2) {
			fprintf(stderr, "cwsim: fail: a failed disk loses what it holds unless the "
				"partitions keep copies (copies = 2 or 3)\n");
			return -EINVAL;
		}
		if (sc->spares >> sc->fail_disk & 1) {
			fprintf(stderr, "cwsim: fail: disk %d is a spare, which holds nothing\n",
				sc->fail_disk);
			return -EINVAL;
		}
		if (sc->move_at_ns >= 0) {
			fprintf(stderr, "cwsim: fail: a failure and a move (move =, evacuate =) in "
				"one run are not simulated\n");
			return -EINVAL;
		}
		if (sc->fail_at_ns >= sc->duration_ns) {
			fprintf(stderr, "cwsim: fail: after the run ends (duration_s)\n");
			return -EINVAL;
		}
	}
	if (sc->move_at_ns >= 0) {
		if (sc->move_off >= (int)sc->disks || (sc->disks < 64 && sc->move_disks >> sc->disks)) {
			fprintf(stderr, "cwsim: move: the scenario has disks 0 to %u\n", sc->disks - 1);
			return -EINVAL;
		}
		if (sc->move_off >= 0 && sc->disks < 2) {
			fprintf(stderr, "cwsim: evacuate: no other disk to move to\n");
			return -EINVAL;
		}
		if (sc->move_part >= (int)sc->be_partitions) {
			fprintf(stderr, "cwsim: move: the scenario has best-effort partitions be0 to "
				"be%u\n", sc->be_partitions - 1);
			return -EINVAL;
		}
		if (sc->move_at_ns >= sc->duration_ns) {
			fprintf(stderr, "cwsim: move: starts after the run ends (duration_s)\n");
			return -EINVAL;
		}
	}
	return 0;
}

int sim_scenario_from_args(const char *preset, const char *path, bool quick,
			   char *const *sets, size_t n_sets, struct sim_scenario *sc)
{
	if (preset) {
		if (sim_scenario_preset(preset, sc) < 0) {
			fprintf(stderr, "cwsim: unknown preset '%s' (paper, quick)\n", preset);
			return -EINVAL;
		}
	} else {
		sim_scenario_defaults(sc);
		if (sim_scenario_load(path, sc) < 0)
			return -EINVAL;
	}
	if (quick) {
		sc->duration_ns = 60 * CW_NS_PER_S;
		sc->loads = CW_MIN(sc->loads, 8u);
	}
	sc->base_dir[0] = '\0';	/* --set paths are relative to the cwd */
	for (size_t i = 0; i < n_sets; i++) {
		const char *eq = strchr(sets[i], '=');
		char key[64];

		if (!eq) {
			fprintf(stderr, "cwsim: --set %s: expected KEY=VALUE\n", sets[i]);
			return -EINVAL;
		}
		snprintf(key, sizeof(key), "%.*s", (int)CW_MIN((size_t)(eq - sets[i]), sizeof(key) - 1),
			 sets[i]);
		if (sim_scenario_set(sc, key, eq + 1, "--set") < 0)
			return -EINVAL;
	}
	return sim_scenario_finish(sc);
}
