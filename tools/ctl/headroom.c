/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * disk headroom (the server's is daemon/control/control-headroom.c): the largest
 * rates admission would still take, per disk and per partition.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <clockwise/units.h>

#include "ctl/ctl.h"
#include "table.h"

/* A rate the server says fits, rounded down so that it still fits when
 * typed back; "-" when there is none to say. */
static void print_headroom(json_object *h)
{
	struct table t = { .ncols = 8 }, u = { .ncols = 5 };
	json_object *d = get(h, "disks"), *p = get(h, "partitions");
	char bs[CW_UNITS_BUF];

	printf("largest stream rates that would be admitted now, in %s blocks\n\n",
	       fsize(h, "block", bs));
	table_row(&t, "DISK", "TIER", "STATE", "STREAMS", "UTIL", "DELTA-L", "BE-BUDGET",
		  "MAX-RATE");
	for (size_t i = 0; d && i < json_object_array_length(d); i++) {
		json_object *o = json_object_array_get_idx(d, i);
		char util[16], dl[CW_UNITS_BUF], be[CW_UNITS_BUF], r[CW_UNITS_BUF];

		snprintf(util, sizeof(util), "%.0f%%",
			 100 * json_object_get_double(get(o, "utilization")));
		table_row(&t, gs(o, "disk"), gs(o, "tier"), gs(o, "state"), gs(o, "streams"), util,
			  get(o, "delta_l_ns") ? fdur(o, "delta_l_ns", dl) : "none",
			  get(o, "be_budget_ns") ? fdur(o, "be_budget_ns", be) : "none",
			  frate_floor(o, "max_rate", r));
	}
	table_print(&t, stdout);
	if (!p || !json_object_array_length(p))
		return;
	printf("\n");
	/* the survivable stream's columns when a partition is mirrored */
	for (size_t i = 0; i < json_object_array_length(p); i++)
		if (json_object_get_int(get(json_object_array_get_idx(p, i), "copies")) > 1)
			u.ncols = 7;
	table_row(&u, "PART", "SIZE", "DISKS", "MAX-RATE", "LIMITED-BY", "SURVIVE-RATE",
		  "LIMITED-BY");
	for (size_t i = 0; i < json_object_array_length(p); i++) {
		json_object *o = json_object_array_get_idx(p, i), *n = get(o, "disks");
		char size[CW_UNITS_BUF], r[CW_UNITS_BUF], sr[CW_UNITS_BUF], disks[TABLE_CELL] = "";
		bool mirrored = get(o, "max_rate_survive") || get(o, "error_survive");

		for (size_t k = 0; n && k < json_object_array_length(n); k++) {
			size_t len = strlen(disks);

			snprintf(disks + len, sizeof(disks) - len, "%s%s", k ? "," : "",
				 json_object_get_string(json_object_array_get_idx(n, k)));
		}
		table_row(&u, gs(o, "part"), fsize(o, "size", size), disks[0] ? disks : "-",
			  frate_floor(o, "max_rate", r), get(o, "limited_by") ?
			  gs(o, "limited_by") : get(o, "limited_by_host") ? "the host's CPUs" :
			  get(o, "error") ? gs(o, "error") : "-",
			  /* a mirrored partition's stream that survives a disk */
			  mirrored ? frate_floor(o, "max_rate_survive", sr) : "-",
			  !mirrored ? "-" : get(o, "limited_by_survive") ? gs(o, "limited_by_survive") :
			  get(o, "limited_by_host_survive") ? "the host's CPUs" :
			  get(o, "error_survive") ? gs(o, "error_survive") : "-");
	}
	table_print(&u, stdout);
}

int c_disk_headroom(int argc, char **argv)
{
	static const struct option lo[] = { HELP_OPT, { "block", required_argument, NULL, 'b' },
					    { 0 } };
	json_object *a = args_new();
	uint64_t v;
	int o;

	while ((o = next_opt(argc, argv, "hb:", lo)) != -1) {
		if (o != 'b' || !size_arg("--block", optarg, &v))
			return json_object_put(a), EXIT_USAGE;
		put_u64(a, "block", v);
	}
	if (argc - optind > 1)
		return json_object_put(a), usage_error("expected at most one disk NAME");
	if (argc - optind == 1)
		put_str(a, "name", argv[optind]);
	return call(CW_CTL_CMD_DISK_HEADROOM, a, print_headroom);
}
