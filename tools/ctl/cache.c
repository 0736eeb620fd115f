/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * part cache (the server's is in daemon/control/control-cache.c): a partition's
 * SSD cache; and the caches' table of stats, with the reserved ranges
 * each cache leaves alone (rule 2).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <clockwise/units.h>

#include "ctl/ctl.h"
#include "table.h"

/* The reserved ranges a cache leaves alone, and why (rule 2). */
static void print_pinned(json_object *c)
{
	json_object *a = get(c, "pinned");

	for (size_t i = 0; a && i < json_object_array_length(a); i++) {
		json_object *p = json_object_array_get_idx(a, i);

		if (get(p, "resv"))
			printf("  reservation %s", gs(p, "resv"));
		else
			printf("  the start-up stream of export %s", gs(p, "export"));
		printf(" (bytes %s..%s of %s) stays off the SSD: %s\n", gs(p, "range_start"),
		       gs(p, "range_end"), gs(c, "part"), gs(p, "why"));
	}
}

/* SSD caches: how often reads found their block there, and what moved. */
void print_caches(json_object *a)
{
	struct table t = { .ncols = 11 };
	bool refused = false;

	if (!a || !json_object_array_length(a))
		return;
	printf("\n");
	table_row(&t, "CACHE", "MODE", "SIZE", "USED", "HIT-RATIO", "HITS", "MISSES", "PROMOTED",
		  "DEMOTED", "DIRTY", "REFUSED");
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *o = json_object_array_get_idx(a, i);
		char size[CW_UNITS_BUF], used[CW_UNITS_BUF], ratio[16];

		pct(ratio, sizeof(ratio), o, "hit_ratio");
		table_row(&t, gs(o, "part"), gs(o, "mode"), fsize(o, "size", size),
			  fsize(o, "used_bytes", used), ratio, gs(o, "hits"), gs(o, "misses"),
			  gs(o, "promotions"), gs(o, "demotions"), gs(o, "dirty"),
			  gs(o, "refused_reserved"));
		refused |= gi(o, "refused_reserved") > 0;
	}
	table_print(&t, stdout);
	if (refused)
		printf("REFUSED: promotions of blocks of a reservation the SSD does not admit\n");
	for (size_t i = 0; i < json_object_array_length(a); i++)
		print_pinned(json_object_array_get_idx(a, i));
}

static void print_cache(json_object *c)
{
	char size[CW_UNITS_BUF];

	printf("partition %s: SSD cache %s, %s%s\n", gs(c, "part"), fsize(c, "size", size),
	       gs(c, "mode"), json_object_get_boolean(get(c, "pending")) ?
	       " (the daemon applies it: the old cache's blocks are demoted first)" : "");
	print_pinned(c);
}

int c_part_cache(int argc, char **argv)
{
	static const struct option lo[] = { HELP_OPT, { "size", required_argument, NULL, 's' },
					    { "off", no_argument, NULL, 'o' },
					    { "mode", required_argument, NULL, 'm' }, { 0 } };
	json_object *a = args_new();
	uint64_t size;
	bool have_size = false, have_mode = false;
	int o;

	while ((o = next_opt(argc, argv, "hs:om:", lo)) != -1) {
		if (o == 'm') {
			if (strcmp(optarg, "write-through") != 0 && strcmp(optarg, "write-back") != 0)
				return json_object_put(a),
				       usage_error("--mode \"%s\": write-through or write-back",
						   optarg);
			put_str(a, "mode", optarg);
			have_mode = true;
			continue;
		}
		if (o == 's' && !size_arg("--size", optarg, &size))
			return json_object_put(a), EXIT_USAGE;
		if (o != 's' && o != 'o')
			return json_object_put(a), EXIT_USAGE;
		if (have_size)
			return json_object_put(a), usage_error("give --size or --off once");
		put_u64(a, "size", o == 'o' ? 0 : size);
		have_size = true;
	}
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one partition NAME");
	if (!have_size && !have_mode)
		return json_object_put(a), usage_error("--size, --off or --mode is required");
	put_str(a, "name", argv[optind]);
	return call(CW_CTL_CMD_PART_CACHE, a, print_cache);
}
