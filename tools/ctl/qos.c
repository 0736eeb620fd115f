/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * export qos (the server's is daemon/control/control-qos.c): an export's best
 * effort between exports, its reservation, weight and limit.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/pool-objects.h>
#include <clockwise/units.h>

#include "ctl/ctl.h"
#include "table.h"

/* --reserve / --limit: a rate in bytes per second or in iops; "0" or
 * "none" drops it. */
static bool iorate_arg(json_object *a, const char *opt, const char *key, const char *s)
{
	char ikey[32];
	uint64_t v = 0;
	bool iops = false;

	if (strcmp(s, "0") != 0 && strcmp(s, "none") != 0 &&
	    cw_units_parse_iorate(s, &v, &iops) < 0) {
		usage_error("%s \"%s\": expected " CW_UNITS_IORATE_HELP ", or none", opt, s);
		return false;
	}
	snprintf(ikey, sizeof(ikey), "%s_iops", key);
	put_u64(a, key, v);
	json_object_object_add(a, ikey, json_object_new_boolean(iops));
	return true;
}

static void print_qos(json_object *q)
{
	struct table t = { .ncols = 4 };

	if (!q) {
		printf("no best-effort QoS: weight 1, no reservation, no limit\n");
		return;
	}
	if (get(q, "fits")) {
		printf("it fits\n");
		return;
	}
	printf("export %s: reserve %s, weight %s, limit %s\n", gs(q, "export"),
	       get(q, "reserve") ? gs(get(q, "reserve"), "text") : "none", gs(q, "weight"),
	       get(q, "limit") ? gs(get(q, "limit"), "text") : "none");
	table_row(&t, "DISK", "BLOCKS", "RESERVED", "LIMIT");
	for (size_t i = 0; i < json_object_array_length(get(q, "disks")); i++) {
		json_object *d = json_object_array_get_idx(get(q, "disks"), i);
		char b[16], r[16], l[16];

		snprintf(b, sizeof(b), "%.1f%%", 100 * json_object_get_double(get(d, "blocks_share")));
		snprintf(r, sizeof(r), "%.2f%%", 100 * json_object_get_double(get(d, "reserve_share")));
		snprintf(l, sizeof(l), "%.2f%%", 100 * json_object_get_double(get(d, "limit_share")));
		table_row(&t, gs(d, "disk"), b, r, get(d, "limit_share") ? l : "-");
	}
	table_print(&t, stdout);
}

int c_export_qos(int argc, char **argv)
{
	static const struct option lo[] = {
		HELP_OPT, { "reserve", required_argument, NULL, 'r' },
		{ "weight", required_argument, NULL, 'w' }, { "limit", required_argument, NULL, 'l' },
		{ "clear", no_argument, NULL, 'c' }, { "dry-run", no_argument, NULL, 'n' }, { 0 }
	};
	json_object *a = args_new();
	char *end;
	unsigned long long w;
	int o;

	while ((o = next_opt(argc, argv, "hr:w:l:cn", lo)) != -1) {
		if (o == 'r' && iorate_arg(a, "--reserve", "reserve", optarg))
			continue;
		if (o == 'l' && iorate_arg(a, "--limit", "limit", optarg))
			continue;
		if (o == 'w') {
			errno = 0;
			w = strtoull(optarg, &end, 10);
			if (errno || *end || !*optarg || optarg[0] == '-' || w < 1 || w > CW_BE_WEIGHT_MAX) {
				json_object_put(a);
				return usage_error("--weight \"%s\": expected a whole number from 1 to %d",
						   optarg, CW_BE_WEIGHT_MAX);
			}
			put_u64(a, "weight", w);
			continue;
		}
		if (o == 'c' || o == 'n') {
			json_object_object_add(a, o == 'c' ? "clear" : "dry_run",
					       json_object_new_boolean(1));
			continue;
		}
		return json_object_put(a), EXIT_USAGE;
	}
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one export NAME");
	put_str(a, "name", argv[optind]);
	return call(CW_CTL_CMD_EXPORT_QOS, a, print_qos);
}
