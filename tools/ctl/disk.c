/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Disk commands (the server's are in daemon/control/control-disk.c): list, add,
 * calibrate and plan; disk remove is c_simple's.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/io.h>
#include <clockwise/model.h>
#include <clockwise/units.h>

#include "ctl/ctl.h"
#include "plan-table.h"
#include "table.h"

void print_disks(json_object *a)
{
	struct table t = { .ncols = 10 };

	table_row(&t, "NAME", "ID", "TIER", "STATE", "SIZE", "FREE", "MODEL", "TASKS", "UTIL",
		  "DELTA-L");
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *d = json_object_array_get_idx(a, i), *m = get(d, "model");
		char size[CW_UNITS_BUF], fr[CW_UNITS_BUF], dl[CW_UNITS_BUF], util[16], model[TABLE_CELL];
		bool cal = json_object_get_boolean(get(m, "calibrated"));
		char tail[32] = "";

		snprintf(util, sizeof(util), "%.0f%%",
			 100 * json_object_get_double(get(d, "utilization")));
		/* an image's C is a tail percentile: which one */
		if (get(m, "tail_percentile"))
			snprintf(tail, sizeof(tail), "%sp%g", cal ? ", " : "",
				 json_object_get_double(get(m, "tail_percentile")));
		snprintf(model, sizeof(model), "%s%s%s%s%s%s%s", gs(m, "name"),
			 cal || tail[0] ? " (" : "", cal ? "calibrated" : "", tail,
			 cal || tail[0] ? ")" : "", get(d, "emulate") ? ", emulating " : "",
			 get(d, "emulate") ? gs(get(d, "emulate"), "name") : "");
		table_row(&t, gs(d, "name"), gs(d, "id"), gs(d, "tier"), gs(d, "state"),
			  fsize(d, "size", size), fsize(d, "free", fr), model, gs(d, "tasks"),
			  util, get(d, "delta_l_ns") ? fdur(d, "delta_l_ns", dl) : "none");
	}
	table_print(&t, stdout);
}

static void print_disk_added(json_object *d)
{
	char size[CW_UNITS_BUF];

	printf("added disk %s (id %s, %s, %s%s%s)\n", gs(d, "name"), gs(d, "id"), gs(d, "tier"),
	       fsize(d, "size", size), get(d, "emulate") ? ", emulating " : "",
	       get(d, "emulate") ? gs(get(d, "emulate"), "name") : "");
}

static void print_disk_set(json_object *d)
{
	printf("disk %s: failure domain %s%s\n", gs(d, "name"), gs(d, "domain"),
	       json_object_get_boolean(get(d, "spare")) ? ", spare" : "");
}

/* disk set NAME [--domain DOMAIN ("" for the disk's own)] [--spare]. */
int c_disk_set(int argc, char **argv)
{
	static const struct option lo[] = { HELP_OPT, { "domain", required_argument, NULL, 'D' },
					    { "spare", no_argument, NULL, 's' },
					    { "no-spare", no_argument, NULL, 'S' }, { 0 } };
	json_object *a = args_new();
	bool have = false, domain = false;
	int o;

	while ((o = next_opt(argc, argv, "hD:", lo)) != -1) {
		if (o == 's' || o == 'S') {
			json_object_object_add(a, "spare", json_object_new_boolean(o == 's'));
		} else if (o == 'D') {
			if (optarg[0])	/* absent: its own */
				put_str(a, "domain", optarg);
			domain = true;
		} else {
			return json_object_put(a), EXIT_USAGE;
		}
		have = true;
	}
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one disk NAME");
	if (!have)
		return json_object_put(a), usage_error("--domain or --spare is required (--domain "
						       "\"\" for the disk's own)");
	/* --domain "" with --spare: the server takes its own only when told. */
	if (domain && !get(a, "domain") && get(a, "spare"))
		return json_object_put(a), usage_error("--domain \"\" goes alone: give the disk its "
						       "own domain, then set --spare");
	put_str(a, "name", argv[optind]);
	return call(CW_CTL_CMD_DISK_SET, a, print_disk_set);
}

int c_disk_add(int argc, char **argv)
{
	static const struct option lo[] = {
		HELP_OPT, { "tier", required_argument, NULL, 't' },
		{ "name", required_argument, NULL, 'n' },
		{ "emulate", required_argument, NULL, 'e' },
		{ "domain", required_argument, NULL, 'D' }, { 0 }
	};
	json_object *a = args_new();
	char path[PATH_MAX];
	int o;

	while ((o = next_opt(argc, argv, "ht:n:e:D:", lo)) != -1) {
		if (o == 'D' && optarg[0])
			put_str(a, "domain", optarg);
		else if (o == 'D')
			continue;
		else if (o == 't')
			put_str(a, "tier", optarg);
		else if (o == 'n')
			put_str(a, "name", optarg);
		else if (o == 'e')
			put_str(a, "emulate", optarg);
		else
			return json_object_put(a), EXIT_USAGE;
	}
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one PATH");
	/* The server resolves nothing relative to the caller's directory;
	 * an image on a cluster is named, not a file. */
	if (cw_io_path_is_rbd(argv[optind]))
		snprintf(path, sizeof(path), "%s", argv[optind]);
	else if (!realpath(argv[optind], path)) {
		fprintf(stderr, "%s: %s: %s\n", cmd_name, argv[optind], strerror(errno));
		json_object_put(a);
		return EXIT_REFUSED;
	}
	put_str(a, "path", path);
	return call(CW_CTL_CMD_DISK_ADD, a, print_disk_added);
}

static void print_calibrated(json_object *r)
{
	char w[CW_UNITS_BUF];

	json_object *warn;

	printf("calibrated %s: worst case %s per pool block", gs(r, "disk"),
	       fdur(r, "block_service_ns", w));
	if (get(r, "tail_percentile"))
		printf(" (the %gth percentile of its service times, plus the margin)",
		       json_object_get_double(get(r, "tail_percentile")));
	printf("\nmodel: %s\n", gs(r, "model"));
	if (json_object_object_get_ex(r, "warning", &warn))
		fprintf(stderr, "cwctl: warning: %s: %s\n", gs(r, "disk"), json_object_get_string(warn));
}

int c_disk_calibrate(int argc, char **argv)
{
	static const struct option lo[] = {
		HELP_OPT, { "quick", no_argument, NULL, 'q' },
		{ "percentile", required_argument, NULL, 'p' }, { 0 }
	};
	json_object *a = args_new();
	unsigned permille;
	int o;

	while ((o = next_opt(argc, argv, "hqp:", lo)) != -1) {
		if (o == 'q') {
			json_object_object_add(a, "quick", json_object_new_boolean(1));
		} else if (o == 'p') {
			if (cw_calib_parse_percentile(optarg, &permille) < 0)
				return json_object_put(a), usage_error("--percentile %s: expected a "
					"number from 50 to 100 in steps of 0.1, such as 99.9", optarg);
			put_str(a, "percentile", optarg);
		} else {
			return json_object_put(a), EXIT_USAGE;
		}
	}
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one disk NAME");
	put_str(a, "name", argv[optind]);
	return call(CW_CTL_CMD_DISK_CALIBRATE, a, print_calibrated);
}

/* The reply of disk.plan, an array of cw_disk_plan_format_json objects,
 * as the table cwsim plan prints too. */
static void print_plans(json_object *a)
{
	struct plan_row *rows;
	size_t n;

	if (!json_object_is_type(a, json_type_array)) {
		fprintf(stderr, "%s: %s: the server's reply is not a list of plans\n", cmd_name,
			socket_path);
		exit(EXIT_CONNECT);
	}
	n = json_object_array_length(a);
	rows = calloc(n ? n : 1, sizeof(*rows));
	if (!rows) {
		fprintf(stderr, "%s: out of memory\n", cmd_name);
		exit(EXIT_REFUSED);
	}
	for (size_t i = 0; i < n; i++) {
		if (plan_row_from_json(json_object_array_get_idx(a, i), &rows[i]) < 0) {
			fprintf(stderr, "%s: %s: the server's plan of a disk lacks a field"
				" (try --json)\n", cmd_name, socket_path);
			free(rows);
			exit(EXIT_CONNECT);
		}
	}
	plan_table_print(stdout, rows, n);
	free(rows);
}

int c_disk_plan(int argc, char **argv)
{
	static const struct option lo[] = { HELP_OPT, { "json", no_argument, NULL, 'j' }, { 0 } };
	json_object *a = NULL;
	int o;

	while ((o = next_opt(argc, argv, "hj", lo)) != -1) {
		if (o != 'j')
			return EXIT_USAGE;
		json_out = true;
	}
	if (argc - optind > 1)
		return usage_error("expected at most one disk NAME");
	if (argc - optind == 1) {
		a = args_new();
		put_str(a, "name", argv[optind]);
	}
	return call(CW_CTL_CMD_DISK_PLAN, a, print_plans);
}
