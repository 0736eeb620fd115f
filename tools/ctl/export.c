/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Export commands (the server's are in daemon/control/control-export.c): list,
 * add and remove.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>

#include "ctl/ctl.h"
#include "table.h"

/* An export's clients in a few words: "uid 1000 pid 42 (real-time),
 * 10.0.0.2:5555",
 * "-" for none, "unavailable" when it is not served. */
static const char *clients_text(json_object *e, char *buf, size_t n)
{
	json_object *cl = get(e, "clients");
	size_t at = 0, listed = cl ? json_object_array_length(cl) : 0;

	if (get(e, "served") && !json_object_get_boolean(get(e, "served")))
		return "unavailable";
	if (!listed)
		return "-";
	buf[0] = '\0';
	for (size_t i = 0; i < listed && at < n; i++) {
		json_object *k = json_object_array_get_idx(cl, i);
		int w = get(k, "uid") ? snprintf(buf + at, n - at, "%suid %s pid %s", i ? ", " : "",
						  gs(k, "uid"), gs(k, "pid"))
				      : snprintf(buf + at, n - at, "%s%s", i ? ", " : "",
						 gs(k, "address"));

		at += w > 0 ? (size_t)w : 0;
		if (json_object_get_boolean(get(k, "realtime")) && at < n) {
			w = snprintf(buf + at, n - at, " (real-time)");
			at += w > 0 ? (size_t)w : 0;
		}
	}
	if (gi(e, "connections") > (int64_t)listed && at < n)
		snprintf(buf + at, n - at, " and %" PRId64 " more", gi(e, "connections") - (int64_t)listed);
	return buf;
}

void print_exports(json_object *a)
{
	struct table t = { .ncols = 6 };

	table_row(&t, "NAME", "PART", "READONLY", "RESV", "DEVICE", "CLIENTS");
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *e = json_object_array_get_idx(a, i);
		char who[512];

		table_row(&t, gs(e, "name"), gs(e, "part"),
			  json_object_get_boolean(get(e, "readonly")) ? "yes" : "no",
			  get(e, "resv") ? gs(e, "resv") : "-", get(e, "device") ? gs(e, "device") : "-",
			  clients_text(e, who, sizeof(who)));
	}
	table_print(&t, stdout);
}

int c_export_remove(int argc, char **argv)
{
	return name_force(argc, argv, CW_CTL_CMD_EXPORT_REMOVE, "export");
}

static void print_export_added(json_object *e)
{
	printf("exported %s as %s%s%s%s\n", gs(e, "part"), gs(e, "name"),
	       json_object_get_boolean(get(e, "readonly")) ? " (read-only)" : "",
	       get(e, "device") ? " on " : "", get(e, "device") ? gs(e, "device") : "");
}

int c_export_add(int argc, char **argv)
{
	static const struct option lo[] = {
		HELP_OPT, { "name", required_argument, NULL, 'n' },
		{ "readonly", no_argument, NULL, 'r' }, { "resv", required_argument, NULL, 'R' },
		{ "ublk", no_argument, NULL, 'u' }, { "queue-depth", required_argument, NULL, 'q' },
		{ "max-request", required_argument, NULL, 'm' }, { 0 }
	};
	json_object *a = args_new();
	uint64_t id;
	int o;

	while ((o = next_opt(argc, argv, "hn:rR:uq:m:", lo)) != -1) {
		if (o == 'n')
			put_str(a, "name", optarg);
		else if (o == 'r')
			json_object_object_add(a, "readonly", json_object_new_boolean(1));
		else if (o == 'R' && id_arg(optarg, &id))
			put_u64(a, "resv", id);
		else if (o == 'u')
			json_object_object_add(a, "ublk", json_object_new_boolean(1));
		else if (o == 'q' && id_arg(optarg, &id))
			put_u64(a, "queue_depth", id);
		else if (o == 'm' && id_arg(optarg, &id))
			put_u64(a, "max_request", id);
		else
			return json_object_put(a), EXIT_USAGE;
	}
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one partition PART");
	put_str(a, "part", argv[optind]);
	return call(CW_CTL_CMD_EXPORT_ADD, a, print_export_added);
}
