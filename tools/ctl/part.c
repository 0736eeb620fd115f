/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Partition commands (the server's are in daemon/control/control-part.c): list,
 * create, show, resize and delete.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <clockwise/layout.h>
#include <clockwise/units.h>

#include "ctl/ctl.h"
#include "table.h"

/* "yes"; for a mirrored partition with copies out of sync "degraded:
 * copy 1 stale 20" (each copy with some); or for a partition with blocks
 * on missing disks its state and the disks: "partial: b missing",
 * "offline: b, c missing". */
static const char *part_available(json_object *p, char *buf, size_t n)
{
	json_object *md = get(p, "missing_disks"), *spc = get(p, "stale_per_copy");
	size_t at;

	if (json_object_get_boolean(get(p, "available")) &&
	    json_object_get_boolean(get(p, "degraded"))) {
		at = (size_t)snprintf(buf, n, "degraded:");
		for (size_t c = 0, k = 0; spc && c < json_object_array_length(spc) && at < n; c++) {
			int64_t st = json_object_get_int64(json_object_array_get_idx(spc, c));

			if (st)
				at += (size_t)snprintf(buf + at, n - at, "%s copy %zu stale %" PRId64,
						       k++ ? "," : "", c, st);
		}
		return buf;
	}
	if (json_object_get_boolean(get(p, "available")))
		return "yes";
	at = (size_t)snprintf(buf, n, "%s:", get(p, "state") ? gs(p, "state") : "no");
	for (size_t i = 0; md && i < json_object_array_length(md) && at < n; i++)
		at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? ", " : " ",
				       json_object_get_string(json_object_array_get_idx(md, i)));
	if (at < n)
		snprintf(buf + at, n - at, " missing");
	return buf;
}

void print_parts(json_object *a)
{
	struct table t = { .ncols = 7 };

	table_row(&t, "NAME", "SIZE", "POLICY", "TIER", "ZONE", "COPIES", "AVAILABLE");
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *p = json_object_array_get_idx(a, i);
		char size[CW_UNITS_BUF], av[256], copies[32];

		snprintf(copies, sizeof(copies), "%" PRId64, get(p, "copies") ? gi(p, "copies") : 1);
		table_row(&t, gs(p, "name"), fsize(p, "size", size), gs(p, "policy"),
			  gs(p, "tier"), gs(p, "zone"), copies, part_available(p, av, sizeof(av)));
	}
	table_print(&t, stdout);
}

static void print_part_done(json_object *p)
{
	char size[CW_UNITS_BUF];

	printf("partition %s: %s, policy %s, tier %s, zone %s", gs(p, "name"),
	       fsize(p, "size", size), gs(p, "policy"), gs(p, "tier"), gs(p, "zone"));
	if (get(p, "copies") && gi(p, "copies") > 1)
		printf(", %" PRId64 " copies", gi(p, "copies"));
	printf("\n");
}

int c_part_create(int argc, char **argv)
{
	static const struct option lo[] = {
		HELP_OPT, { "size", required_argument, NULL, 's' },
		{ "policy", required_argument, NULL, 'p' }, { "tier", required_argument, NULL, 't' },
		{ "zone", required_argument, NULL, 'z' }, { "disk", required_argument, NULL, 'd' },
		{ "tier-fallback", no_argument, NULL, 'F' },
		{ "copies", required_argument, NULL, 'c' }, { 0 }
	};
	json_object *a = args_new();
	uint64_t size;
	bool have_size = false;
	int o;

	while ((o = next_opt(argc, argv, "hs:p:t:z:d:Fc:", lo)) != -1) {
		switch (o) {
		case 's':
			if (!size_arg("--size", optarg, &size))
				return json_object_put(a), EXIT_USAGE;
			put_u64(a, "size", size);
			have_size = true;
			break;
		case 'p': put_str(a, "policy", optarg); break;
		case 't': put_str(a, "tier", optarg); break;
		case 'z': put_str(a, "zone", optarg); break;
		case 'd': put_str(a, "disk", optarg); break;
		case 'F': json_object_object_add(a, "tier_fallback", json_object_new_boolean(1)); break;
		case 'c':
			if (strlen(optarg) != 1 || optarg[0] < '1' || optarg[0] > '0' + CW_COPIES_MAX)
				return json_object_put(a),
				       usage_error("--copies: 1, 2 or 3");
			put_u64(a, "copies", (uint64_t)(optarg[0] - '0'));
			break;
		default: return json_object_put(a), EXIT_USAGE;
		}
	}
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one partition NAME");
	if (!have_size)
		return json_object_put(a), usage_error("--size is required");
	put_str(a, "name", argv[optind]);
	return call(CW_CTL_CMD_PART_CREATE, a, print_part_done);
}

static bool show_all_runs;	/* part show --all */

/* A partition with copies: where each copy is and whether it is in sync. */
static void print_copy_runs(json_object *p, size_t shown)
{
	json_object *cr = get(p, "copy_runs");
	struct table t = { .ncols = 6 };

	if (!cr)
		return;
	printf("\n%s copies, %s out of sync\n", gs(p, "copies"),
	       get(p, "stale_copies") ? gs(p, "stale_copies") : "0");
	table_row(&t, "COPY", "FIRST-BLOCK", "BLOCKS", "DISK", "DISK-OFFSET", "IN-SYNC");
	for (size_t i = 0; i < json_object_array_length(cr) && i < shown * 3; i++) {
		json_object *r = json_object_array_get_idx(cr, i);

		table_row(&t, gs(r, "copy"), gs(r, "first_block"), gs(r, "blocks"), gs(r, "disk"),
			  gs(r, "offset"), json_object_get_boolean(get(r, "in_sync")) ? "yes" : "no");
	}
	table_print(&t, stdout);
}

static void print_part_show(json_object *p)
{
	struct table t = { .ncols = 3 }, u = { .ncols = 4 };
	json_object *pd = get(p, "per_disk"), *runs = get(p, "runs");
	size_t shown = show_all_runs ? SIZE_MAX : 16;
	char bs[CW_UNITS_BUF];

	print_part_done(p);
	printf("%s blocks of %s", gs(p, "blocks"), fsize(p, "block_size", bs));
	if (json_object_get_boolean(get(p, "available")) &&
	    json_object_get_boolean(get(p, "degraded"))) {
		char av[256];

		printf(", %s (served from the copies in sync", part_available(p, av, sizeof(av)));
		if (get(p, "lost_blocks") && gi(p, "lost_blocks"))
			printf("; %s blocks have none and fail with EIO", gs(p, "lost_blocks"));
		printf(")");
		for (size_t i = 0; get(p, "degraded_because") &&
				   i < json_object_array_length(get(p, "degraded_because")); i++)
			printf("\n%s", json_object_get_string(
				json_object_array_get_idx(get(p, "degraded_because"), i)));
	}
	if (!json_object_get_boolean(get(p, "available"))) {
		char av[256];

		/* partial: its other blocks are served; offline: none */
		printf(", %s blocks on missing disks: %s (%s)", gs(p, "missing_blocks"),
		       part_available(p, av, sizeof(av)),
		       !strcmp(gs(p, "state"), "partial") ? "they fail with EIO, the rest is served"
							   : "not served");
	}
	printf("\n\n");
	table_row(&t, "DISK", "BLOCKS", "BYTES");
	for (size_t i = 0; pd && i < json_object_array_length(pd); i++) {
		json_object *d = json_object_array_get_idx(pd, i);
		char b[CW_UNITS_BUF], name[CW_NAME_MAX + 16];

		snprintf(name, sizeof(name), "%s%s", gs(d, "disk"),
			 get(d, "missing") ? " (missing)" : "");
		table_row(&t, name, gs(d, "blocks"), fsize(d, "bytes", b));
	}
	table_print(&t, stdout);
	printf("\n");
	table_row(&u, "FIRST-BLOCK", "BLOCKS", "DISK", "DISK-OFFSET");
	/* A striped partition has a run per block: the first few tell the
	 * pattern; --all lists them all. */
	for (size_t i = 0; runs && i < json_object_array_length(runs) && i < shown; i++) {
		json_object *r = json_object_array_get_idx(runs, i);

		table_row(&u, gs(r, "first_block"), gs(r, "blocks"), gs(r, "disk"), gs(r, "offset"));
	}
	table_print(&u, stdout);
	print_copy_runs(p, shown);
	if (runs && (size_t)gi(p, "runs_total") > json_object_array_length(runs))
		printf("(%" PRId64 " runs in all; --all lists them)\n", gi(p, "runs_total"));
	else if (runs && json_object_array_length(runs) > shown)
		printf("(%" PRId64 " runs in all; --all lists them)\n", gi(p, "runs_total"));
}

/* part show NAME [--all]: a reply holds a page of runs (a few hundred,
 * so that it stays one readable line); --all follows next_block until
 * it has them all. */
int c_part_show(int argc, char **argv)
{
	static const struct option lo[] = { HELP_OPT, { "all", no_argument, NULL, 'a' }, { 0 } };
	struct cw_ctl_reply rep, more;
	json_object *a, *next;
	int o, r;

	while ((o = next_opt(argc, argv, "ha", lo)) != -1) {
		if (o != 'a')
			return EXIT_USAGE;
		show_all_runs = true;
	}
	if (argc - optind != 1)
		return usage_error("expected one partition NAME");
	a = args_new();
	put_str(a, "name", argv[optind]);
	r = fetch(CW_CTL_CMD_PART_SHOW, a, &rep);
	if (r)
		return r;
	while (show_all_runs && (next = get(rep.result, "next_block"))) {
		json_object *runs = get(rep.result, "runs"), *page;

		a = args_new();
		put_str(a, "name", argv[optind]);
		put_u64(a, "from_block", (uint64_t)json_object_get_int64(next));
		r = fetch(CW_CTL_CMD_PART_SHOW, a, &more);
		if (r) {
			cw_ctl_reply_done(&rep);
			return r;
		}
		page = get(more.result, "runs");
		for (size_t i = 0; page && i < json_object_array_length(page); i++)
			json_object_array_add(runs, json_object_get(json_object_array_get_idx(page, i)));
		/* a partition with copies: each page has their runs too */
		page = get(more.result, "copy_runs");
		for (size_t i = 0; page && get(rep.result, "copy_runs") &&
				   i < json_object_array_length(page); i++)
			json_object_array_add(get(rep.result, "copy_runs"),
					      json_object_get(json_object_array_get_idx(page, i)));
		json_object_object_del(rep.result, "next_block");
		if ((next = get(more.result, "next_block")))
			json_object_object_add(rep.result, "next_block", json_object_get(next));
		cw_ctl_reply_done(&more);
	}
	print_result(&rep, print_part_show);
	return 0;
}

int c_part_resize(int argc, char **argv)
{
	static const struct option lo[] = { HELP_OPT, { "size", required_argument, NULL, 's' },
					    { "force", no_argument, NULL, 'f' }, { 0 } };
	json_object *a = args_new();
	uint64_t size;
	bool have_size = false;
	int o;

	while ((o = next_opt(argc, argv, "hs:f", lo)) != -1) {
		/* +SIZE grows by it, -SIZE shrinks by it, SIZE is the size. */
		const char *key = optarg && *optarg == '+' ? "grow" :
				  optarg && *optarg == '-' ? "shrink" : "size";

		if (o == 'f') {
			json_object_object_add(a, "force", json_object_new_boolean(1));
			continue;
		}
		if (o != 's' || !size_arg("--size", optarg + (strcmp(key, "size") != 0), &size))
			return json_object_put(a), EXIT_USAGE;
		if (have_size)
			return json_object_put(a), usage_error("--size given twice");
		put_u64(a, key, size);
		have_size = true;
	}
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one partition NAME");
	if (!have_size)
		return json_object_put(a), usage_error("--size is required");
	put_str(a, "name", argv[optind]);
	return call(CW_CTL_CMD_PART_RESIZE, a, print_part_done);
}

int c_part_delete(int argc, char **argv)
{
	return name_force(argc, argv, CW_CTL_CMD_PART_DELETE, "partition");
}
