/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Reservation commands (the server's are in daemon/control/control-resv.c):
 * create, list, show, release and claim.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <clockwise/admit.h>
#include <clockwise/layout.h>
#include <clockwise/units.h>

#include "ctl/ctl.h"
#include "table.h"

void print_resvs(json_object *a)
{
	struct table t = { .ncols = 8 };

	table_row(&t, "ID", "PART", "RATE", "BLOCK", "RANGE", "PERIOD", "DISKS", "ENDS-IN");
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *r = json_object_array_get_idx(a, i);
		char rate[CW_UNITS_BUF], blk[CW_UNITS_BUF], per[CW_UNITS_BUF], end[CW_UNITS_BUF];
		char a1[CW_UNITS_BUF], a2[CW_UNITS_BUF], range[TABLE_CELL];

		snprintf(range, sizeof(range), "%s:%s", fsize(r, "range_start", a1),
			 fsize(r, "range_end", a2));
		/* A static one (clockwised -r) has no id to release it by. */
		table_row(&t, json_object_get_boolean(get(r, "static")) ? "static" : gs(r, "id"),
			  gs(r, "part"), frate(r, "rate", rate),
			  fsize(r, "block", blk), range, fdur(r, "period_ns", per), gs(r, "disks"),
			  get(r, "ends_in_ns") ? fdur(r, "ends_in_ns", end) : "never");
	}
	table_print(&t, stdout);
}

void print_resv(json_object *r)
{
	json_object *pd = get(r, "per_disk");
	struct table t = { .ncols = 6 };
	char rate[CW_UNITS_BUF], blk[CW_UNITS_BUF], per[CW_UNITS_BUF], lead[CW_UNITS_BUF];

	printf("reservation %s on %s: %s in %s blocks, one every %s\n", gs(r, "id"),
	       gs(r, "part"), frate(r, "rate", rate), fsize(r, "block", blk),
	       fdur(r, "period_ns", per));
	/* The client's side of the guarantee: ask for each block this long
	 * before it is needed. */
	printf("each block is due %s after it is asked for (due %s): a client asks that far "
	       "ahead of need\n", fdur(r, "lead_ns", lead), gs(r, "due"));
	if (json_object_get_boolean(get(r, "record")))
		printf("a recording stream: each of its requests booked on every copy's disk\n");
	if (json_object_get_int(get(r, "survive")))
		printf("admitted to survive the loss of any one disk: each disk booked for the "
		       "worst case of its copies\n");
	if (get(r, "move"))
		printf("booked on both sides of move %s while it runs\n", gs(r, "move"));
	if (get(r, "cache_refused"))
		printf("its blocks stay off the partition's SSD cache: %s\n",
		       gs(r, "cache_refused"));
	else if (get(r, "cache"))
		printf("booked on the partition's SSD cache too: its blocks may be cached\n");
	if (get(r, "claimed_by"))
		printf("claimed by process %s: only its connections run at real-time priority\n",
		       gs(r, "claimed_by"));
	table_row(&t, "DISK", "PERIOD", "DEADLINE", "SERVICE", "REQUESTS", "STRIDE");
	for (size_t i = 0; pd && i < json_object_array_length(pd); i++) {
		json_object *p = json_object_array_get_idx(pd, i);
		char a[CW_UNITS_BUF], b[CW_UNITS_BUF], d[CW_UNITS_BUF], disk[CW_NAME_MAX + 16];

		snprintf(disk, sizeof(disk), "%s%s", gs(p, "disk"),
			 json_object_get_boolean(get(p, "cache")) ? " (cache)" : "");
		table_row(&t, disk, fdur(p, "period_ns", a), fdur(p, "deadline_ns", d),
			  fdur(p, "service_ns", b), gs(p, "requests"), gs(p, "stride"));
	}
	table_print(&t, stdout);
}

static void print_resv_created(json_object *r)
{
	char rate[CW_UNITS_BUF], blk[CW_UNITS_BUF], max[CW_UNITS_BUF];

	if (json_object_get_boolean(get(r, "dry_run"))) {
		printf("would admit %s in %s blocks on %s (nothing booked); the largest rate "
		       "that fits now is %s\n", frate(r, "rate", rate), fsize(r, "block", blk),
		       gs(r, "part"), frate_floor(r, "max_rate", max));
		return;
	}
	printf("admitted ");
	print_resv(r);
}

int c_resv_create(int argc, char **argv)
{
	static const struct option lo[] = {
		HELP_OPT, { "rate", required_argument, NULL, 'r' },
		{ "block", required_argument, NULL, 'b' }, { "range", required_argument, NULL, 'R' },
		{ "start", required_argument, NULL, 's' },
		{ "duration", required_argument, NULL, 'd' },
		{ "dry-run", no_argument, NULL, 'n' }, { "due", required_argument, NULL, 'D' },
		{ "survive", required_argument, NULL, 'S' },
		{ "record", no_argument, NULL, 'W' },
		{ 0 }
	};
	json_object *a = args_new();
	uint64_t v;
	int64_t ns;
	bool rate = false, block = false;
	enum cw_admit_due due;
	int o;

	while ((o = next_opt(argc, argv, "hr:b:R:s:d:nD:S:W", lo)) != -1) {
		switch (o) {
		case 'W':
			json_object_object_add(a, "record", json_object_new_boolean(1));
			break;
		case 'S':
			if (strcmp(optarg, "0") && strcmp(optarg, "1")) {
				json_object_put(a);
				return usage_error("--survive \"%s\": expected 0 or 1 (the disks a "
						   "stream survives the loss of)", optarg);
			}
			put_u64(a, "survive", optarg[0] == '1');
			break;
		case 'D':
			if (cw_admit_due_parse(optarg, &due) < 0) {
				json_object_put(a);
				return usage_error("--due \"%s\": expected disk or stream", optarg);
			}
			put_str(a, "due", optarg);
			break;
		case 'n':
			json_object_object_add(a, "dry_run", json_object_new_boolean(1));
			break;
		case 'r':
			if (cw_units_parse_rate(optarg, &v) < 0) {
				json_object_put(a);
				return usage_error("--rate \"%s\": expected " CW_UNITS_RATE_HELP, optarg);
			}
			put_u64(a, "rate", v);
			rate = true;
			break;
		case 'b':
			if (!size_arg("--block", optarg, &v))
				return json_object_put(a), EXIT_USAGE;
			put_u64(a, "block", v);
			block = true;
			break;
		case 'R': {
			uint64_t end;
			int r = cw_units_parse_range(optarg, &v, &end);

			if (r < 0) {
				json_object_put(a);
				return usage_error("--range \"%s\": %s; expected " CW_UNITS_RANGE_HELP,
						   optarg, r == -EDOM ? "an empty range" :
						   r == -ERANGE ? "too large" : "not a range");
			}
			if (v)
				put_u64(a, "range_start", v);
			if (end)
				put_u64(a, "range_end", end);
			break;
		}
		case 's':
		case 'd':
			if (cw_units_parse_duration(optarg, CW_UNITS_S, &ns) < 0) {
				json_object_put(a);
				return usage_error("--%s \"%s\": expected " CW_UNITS_DURATION_HELP,
						   o == 's' ? "start" : "duration", optarg);
			}
			put_u64(a, o == 's' ? "start" : "duration", (uint64_t)ns);
			break;
		default:
			return json_object_put(a), EXIT_USAGE;
		}
	}
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one partition PART");
	if (!rate || !block)
		return json_object_put(a), usage_error("--rate and --block are required");
	put_str(a, "part", argv[optind]);
	return call(CW_CTL_CMD_RESV_CREATE, a, print_resv_created);
}

void print_released(json_object *r)
{
	printf("released reservation %s\n", gs(r, "id"));
}

static void print_claimed(json_object *r)
{
	if (get(r, "claimed_by"))
		printf("reservation %s: only process %s may hold the real-time priority of export "
		       "%s\n", gs(r, "id"), gs(r, "claimed_by"), gs(r, "export"));
	else
		printf("reservation %s: no claim; the first client of export %s to ask holds its "
		       "real-time priority\n", gs(r, "id"), gs(r, "export"));
}

int c_resv_claim(int argc, char **argv)
{
	static const struct option lo[] = {
		HELP_OPT, { "pid", required_argument, NULL, 'p' },
		{ "drop", no_argument, NULL, 'd' }, { 0 }
	};
	json_object *a = args_new();
	uint64_t v = 0;
	bool pid = false, drop = false;
	int o;

	while ((o = next_opt(argc, argv, "hp:d", lo)) != -1) {
		switch (o) {
		case 'p':
			if (!id_arg(optarg, &v))
				return json_object_put(a), EXIT_USAGE;
			if (v > INT32_MAX)
				return json_object_put(a),
				       usage_error("--pid \"%s\": not a process id", optarg);
			put_u64(a, "pid", v);
			pid = true;
			break;
		case 'd':
			json_object_object_add(a, "drop", json_object_new_boolean(true));
			drop = true;
			break;
		default:
			return json_object_put(a), EXIT_USAGE;
		}
	}
	if (pid && drop)
		return json_object_put(a), usage_error("--pid and --drop exclude each other");
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one reservation ID");
	if (!id_arg(argv[optind], &v))
		return json_object_put(a), EXIT_USAGE;
	put_u64(a, "id", v);
	/* cwctl itself ends at once: the claim is for whoever ran it */
	if (!pid && !drop)
		put_u64(a, "pid", (uint64_t)getppid());
	return call(CW_CTL_CMD_RESV_CLAIM, a, print_claimed);
}
