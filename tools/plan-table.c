/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Disk plans as a table or as JSON (plan-table.h). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include <json-c/json.h>

#include <clockwise/units.h>

#include "plan-table.h"
#include "table.h"

/* A limit in time: "none" when there is none. */
static char *limit(int64_t ns, char buf[CW_UNITS_BUF])
{
	return ns == CW_ADMIT_NO_LIMIT ? strcpy(buf, "none") : cw_units_format_duration(ns, buf);
}

/* A periodic task as SLICE/PERIOD, "-" for none. */
static char *task(int64_t slice_ns, int64_t period_ns, char buf[2 * CW_UNITS_BUF])
{
	char a[CW_UNITS_BUF], b[CW_UNITS_BUF];

	if (slice_ns == 0)
		return strcpy(buf, "-");
	snprintf(buf, 2 * CW_UNITS_BUF, "%s/%s", cw_units_format_duration(slice_ns, a),
		 cw_units_format_duration(period_ns, b));
	return buf;
}

void plan_table_print(FILE *f, const struct plan_row *rows, size_t n)
{
	struct table t = { .ncols = 12 };

	table_row(&t, "DISK", "ID", "TASKS", "UTIL", "DELTA-L", "BE-BUDGET", "IDLE-BE", "SERVER",
		  "BE-PIECE", "BE-MAX", "RESERVE", "STARVED");
	for (size_t i = 0; i < n; i++) {
		const struct cw_disk_plan *p = &rows[i].plan;
		char id[16], tasks[24], util[24], dl[CW_UNITS_BUF], bud[CW_UNITS_BUF];
		char idle[CW_UNITS_BUF], srv[2 * CW_UNITS_BUF], piece[CW_UNITS_BUF];
		char max[CW_UNITS_BUF], res[2 * CW_UNITS_BUF];

		snprintf(id, sizeof(id), "%" PRIu32, p->disk_id);
		snprintf(tasks, sizeof(tasks), "%zu", p->n_tasks);
		snprintf(util, sizeof(util), "%.1f%%", 100 * p->utilization);
		table_row(&t, rows[i].disk, id, tasks, util, limit(p->delta_l_ns, dl),
			  limit(p->be_budget_ns, bud), limit(p->idle_be_ns, idle),
			  task(p->server_slice_ns, p->server_period_ns, srv),
			  cw_units_format_size(p->be_piece_bytes, piece),
			  cw_units_format_duration(p->be_max_ns, max),
			  task(p->be_reserve.service_ns, p->be_reserve.period_ns, res),
			  p->be_starved ? "yes" : "no");
	}
	table_print(&t, f);
}

int plan_table_print_json(FILE *f, const struct plan_row *rows, size_t n)
{
	fputc('[', f);
	for (size_t i = 0; i < n; i++) {
		char buf[1024];
		int r = cw_disk_plan_format_json(&rows[i].plan, rows[i].disk, buf, sizeof(buf));

		if (r < 0)
			return r;
		fprintf(f, "%s\n  %s", i ? "," : "", buf);
	}
	fprintf(f, "%s]\n", n ? "\n" : "");
	return 0;
}

/* Reads key as an integer into *v: nulls are "no limit" where allowed. */
static bool int_key(json_object *o, const char *key, bool null_ok, int64_t *v)
{
	json_object *x;

	if (!json_object_object_get_ex(o, key, &x))
		return false;
	if (!x) {
		*v = CW_ADMIT_NO_LIMIT;
		return null_ok;
	}
	if (!json_object_is_type(x, json_type_int))
		return false;
	*v = json_object_get_int64(x);
	return true;
}

int plan_row_from_json(json_object *o, struct plan_row *ret)
{
	struct plan_row row = { 0 };
	struct cw_disk_plan *p = &row.plan;
	json_object *name, *util, *starved;
	int64_t id, tasks, piece;

	if (!json_object_is_type(o, json_type_object) ||
	    !json_object_object_get_ex(o, "disk", &name) ||
	    !json_object_is_type(name, json_type_string) ||
	    !json_object_object_get_ex(o, "utilization", &util) ||
	    !(json_object_is_type(util, json_type_double) ||
	      json_object_is_type(util, json_type_int)) ||
	    !json_object_object_get_ex(o, "be_starved", &starved) ||
	    !json_object_is_type(starved, json_type_boolean) ||
	    !int_key(o, "disk_id", false, &id) || id < 0 || id > UINT32_MAX ||
	    !int_key(o, "tasks", false, &tasks) || tasks < 0 ||
	    !int_key(o, "delta_l_ns", true, &p->delta_l_ns) ||
	    !int_key(o, "be_budget_ns", true, &p->be_budget_ns) ||
	    !int_key(o, "idle_be_ns", true, &p->idle_be_ns) ||
	    !int_key(o, "server_slice_ns", false, &p->server_slice_ns) ||
	    !int_key(o, "server_period_ns", false, &p->server_period_ns) ||
	    !int_key(o, "be_piece_bytes", false, &piece) || piece < 0 ||
	    !int_key(o, "be_max_ns", false, &p->be_max_ns) ||
	    !int_key(o, "be_reserve_period_ns", false, &p->be_reserve.period_ns) ||
	    !int_key(o, "be_reserve_service_ns", false, &p->be_reserve.service_ns))
		return -EINVAL;
	snprintf(row.disk, sizeof(row.disk), "%s", json_object_get_string(name));
	p->disk_id = (uint32_t)id;
	p->n_tasks = (size_t)tasks;
	p->utilization = json_object_get_double(util);
	p->be_piece_bytes = (uint64_t)piece;
	p->be_starved = json_object_get_boolean(starved);
	*ret = row;
	return 0;
}
