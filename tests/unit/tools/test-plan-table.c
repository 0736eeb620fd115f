/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: disk plans print as `cwctl disk plan` and `cwsim plan`
 * show them: the JSON array holds exactly the objects
 * cw_disk_plan_format_json makes, and each object reads back into the
 * plan it came from (no limit, server, reserve and starvation included),
 * so cwctl's table of a daemon's reply equals cwsim's table of the same
 * plans; a reply missing a field or with a wrong type is refused; tables
 * align every column and leave the last unpadded.
 */
#include "config.h"

#include <string.h>

#include <json-c/json.h>

#include "cwtest.h"
#include "../../../tools/plan-table.h"
#include "../../../tools/table.h"

static const struct plan_row rows[] = {
	{ "hdd0", { .disk_id = 1, .n_tasks = 3, .utilization = 0.42,
		    .delta_l_ns = 80000000, .be_budget_ns = 60000000, .idle_be_ns = 80000001,
		    .be_piece_bytes = 262144, .be_max_ns = 28816462,
		    .be_reserve = { 288164620, 28816462, 0, 0 } } },
	{ "a-much-longer-disk-name", { .disk_id = 17, .n_tasks = 0,
		    .delta_l_ns = CW_ADMIT_NO_LIMIT, .be_budget_ns = CW_ADMIT_NO_LIMIT,
		    .idle_be_ns = CW_ADMIT_NO_LIMIT, .be_piece_bytes = 1048576,
		    .be_max_ns = 2197152 } },
	{ "ssd0", { .disk_id = 3, .n_tasks = 9, .utilization = 0.999999,
		    .delta_l_ns = 0, .be_budget_ns = 0, .idle_be_ns = 1,
		    .server_slice_ns = 12500000, .server_period_ns = 100000000,
		    .be_piece_bytes = 1048576, .be_max_ns = 20000000,
		    .be_reserve = { 100000000, 20000000, 0, 0 }, .be_starved = true } },
};
#define N_ROWS (sizeof(rows) / sizeof(rows[0]))

/* What f printed so far, NUL-terminated (f is a memstream). */
static char *printed(FILE *f, char **buf)
{
	CU_ASSERT_FATAL(fflush(f) == 0);
	return *buf;
}

static void same_plan(const struct plan_row *a, const struct plan_row *b)
{
	CU_ASSERT_STRING_EQUAL(a->disk, b->disk);
	CU_ASSERT_EQUAL(a->plan.disk_id, b->plan.disk_id);
	CU_ASSERT_EQUAL(a->plan.n_tasks, b->plan.n_tasks);
	CU_ASSERT_DOUBLE_EQUAL(a->plan.utilization, b->plan.utilization, 1e-6);
	CU_ASSERT_EQUAL(a->plan.delta_l_ns, b->plan.delta_l_ns);
	CU_ASSERT_EQUAL(a->plan.be_budget_ns, b->plan.be_budget_ns);
	CU_ASSERT_EQUAL(a->plan.idle_be_ns, b->plan.idle_be_ns);
	CU_ASSERT_EQUAL(a->plan.server_slice_ns, b->plan.server_slice_ns);
	CU_ASSERT_EQUAL(a->plan.server_period_ns, b->plan.server_period_ns);
	CU_ASSERT_EQUAL(a->plan.be_piece_bytes, b->plan.be_piece_bytes);
	CU_ASSERT_EQUAL(a->plan.be_max_ns, b->plan.be_max_ns);
	CU_ASSERT_EQUAL(a->plan.be_reserve.period_ns, b->plan.be_reserve.period_ns);
	CU_ASSERT_EQUAL(a->plan.be_reserve.service_ns, b->plan.be_reserve.service_ns);
	CU_ASSERT_EQUAL(a->plan.be_starved, b->plan.be_starved);
}

static void test_json_array_round_trip(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	json_object *a;

	CU_ASSERT_FATAL(f != NULL);
	CU_ASSERT_FATAL(plan_table_print_json(f, rows, N_ROWS) == 0);
	a = json_tokener_parse(printed(f, &buf));
	CU_ASSERT_FATAL(a && json_object_is_type(a, json_type_array));
	CU_ASSERT_FATAL(json_object_array_length(a) == N_ROWS);
	for (size_t i = 0; i < N_ROWS; i++) {
		char one[1024];
		json_object *o = json_object_array_get_idx(a, i), *want;
		struct plan_row back;

		/* each element is the library's object, key for key */
		CU_ASSERT_FATAL(cw_disk_plan_format_json(&rows[i].plan, rows[i].disk, one,
							 sizeof(one)) > 0);
		want = json_tokener_parse(one);
		CU_ASSERT_FATAL(want != NULL);
		CU_ASSERT(json_object_equal(o, want));
		json_object_put(want);
		CU_ASSERT_FATAL(plan_row_from_json(o, &back) == 0);
		same_plan(&rows[i], &back);
	}
	/* one object per line, inside the brackets */
	CU_ASSERT_EQUAL(buf[0], '[');
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "},\n  {"));
	CU_ASSERT_STRING_EQUAL(buf + strlen(buf) - 4, "}\n]\n");
	json_object_put(a);
	fclose(f);
	free(buf);
}

static void test_json_empty(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CU_ASSERT_FATAL(f != NULL);
	CU_ASSERT_FATAL(plan_table_print_json(f, rows, 0) == 0);
	CU_ASSERT_STRING_EQUAL(printed(f, &buf), "[]\n");
	fclose(f);
	free(buf);
}

/* The object of rows[0] with key replaced by value (NULL: removed). */
static json_object *with(const char *key, json_object *value)
{
	char one[1024];
	json_object *o;

	CU_ASSERT_FATAL(cw_disk_plan_format_json(&rows[0].plan, rows[0].disk, one, sizeof(one)) > 0);
	o = json_tokener_parse(one);
	CU_ASSERT_FATAL(o != NULL);
	if (value)
		json_object_object_add(o, key, value);
	else
		json_object_object_del(o, key);
	return o;
}

static void test_from_json_refuses(void)
{
	static const char *const keys[] = {
		"disk", "disk_id", "tasks", "utilization", "delta_l_ns", "be_budget_ns",
		"idle_be_ns", "server_slice_ns", "server_period_ns", "be_piece_bytes", "be_max_ns",
		"be_reserve_period_ns", "be_reserve_service_ns", "be_starved",
	};
	struct plan_row r;
	json_object *o;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		o = with(keys[i], NULL);
		CU_ASSERT_EQUAL(plan_row_from_json(o, &r), -EINVAL);
		json_object_put(o);
		/* a string where the key wants something else (disk wants one) */
		o = with(keys[i], json_object_new_string("12"));
		CU_ASSERT_EQUAL(plan_row_from_json(o, &r), i == 0 ? 0 : -EINVAL);
		json_object_put(o);
	}
	/* null means "no limit" for the three limits only */
	o = with("delta_l_ns", NULL);
	json_object_object_add(o, "delta_l_ns", NULL);
	CU_ASSERT_EQUAL(plan_row_from_json(o, &r), 0);
	CU_ASSERT_EQUAL(r.plan.delta_l_ns, CW_ADMIT_NO_LIMIT);
	json_object_put(o);
	o = with("server_slice_ns", NULL);
	json_object_object_add(o, "server_slice_ns", NULL);
	CU_ASSERT_EQUAL(plan_row_from_json(o, &r), -EINVAL);
	json_object_put(o);
	o = with("disk_id", json_object_new_int64(-1));
	CU_ASSERT_EQUAL(plan_row_from_json(o, &r), -EINVAL);
	json_object_put(o);
	o = json_object_new_array();
	CU_ASSERT_EQUAL(plan_row_from_json(o, &r), -EINVAL);
	json_object_put(o);
	CU_ASSERT_EQUAL(plan_row_from_json(NULL, &r), -EINVAL);
}

/* Splits text into lines (in place); returns how many. */
static size_t lines(char *text, char **ret, size_t max)
{
	size_t n = 0;

	for (char *save = NULL, *l = strtok_r(text, "\n", &save); l && n < max;
	     l = strtok_r(NULL, "\n", &save))
		ret[n++] = l;
	return n;
}

/* Where column col (0-based) starts in line l: after col runs of "  ". */
static size_t col_at(const char *l, unsigned col)
{
	const char *p = l;

	for (unsigned c = 0; c < col; c++) {
		p = strstr(p, "  ");
		CU_ASSERT_FATAL(p != NULL);
		p += strspn(p, " ");
	}
	return (size_t)(p - l);
}

static void test_table(void)
{
	char *buf = NULL, *l[8];
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CU_ASSERT_FATAL(f != NULL);
	plan_table_print(f, rows, N_ROWS);
	CU_ASSERT_FATAL(lines(printed(f, &buf), l, 8) == 1 + N_ROWS);
	CU_ASSERT(strncmp(l[0], "DISK ", 5) == 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(l[0], "BE-BUDGET"));
	CU_ASSERT(strcmp(l[0] + strlen(l[0]) - 7, "STARVED") == 0);
	/* every column starts where the header's does */
	for (unsigned c = 1; c < 12; c++)
		for (size_t r = 1; r <= N_ROWS; r++)
			CU_ASSERT_EQUAL(col_at(l[r], c), col_at(l[0], c));
	/* hdd0: 42%, the budget after the guard, no server, a reserve */
	CU_ASSERT_PTR_NOT_NULL(strstr(l[1], " 42.0% "));
	CU_ASSERT_PTR_NOT_NULL(strstr(l[1], " 80ms "));
	CU_ASSERT_PTR_NOT_NULL(strstr(l[1], " 60ms "));
	CU_ASSERT_PTR_NOT_NULL(strstr(l[1], " 28.8ms/288.2ms "));
	CU_ASSERT(strcmp(l[1] + strlen(l[1]) - 2, "no") == 0);
	/* no limit is "none", no server or reserve "-" */
	CU_ASSERT_PTR_NOT_NULL(strstr(l[2], " none "));
	CU_ASSERT(strstr(l[2], " - ") != NULL);
	/* ssd0: the server as slice/period, starved */
	CU_ASSERT_PTR_NOT_NULL(strstr(l[3], " 12.5ms/100ms "));
	CU_ASSERT(strcmp(l[3] + strlen(l[3]) - 3, "yes") == 0);
	fclose(f);
	free(buf);
}

static void test_generic_table(void)
{
	struct table t = { .ncols = 3 };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CU_ASSERT_FATAL(f != NULL);
	table_row(&t, "A", "BB", "C");
	table_row(&t, "longer", "x", "last");
	for (int i = 0; i < 40; i++)	/* past the first allocation */
		table_row(&t, "r", "", "z");
	table_print(&t, f);
	{
		static const char want[] = "A       BB  C\nlonger  x   last\nr           z\n";

		CU_ASSERT(strncmp(printed(f, &buf), want, sizeof(want) - 1) == 0);
	}
	CU_ASSERT_EQUAL(t.nrows, 0);
	CU_ASSERT_PTR_NULL(t.cells);
	/* a cell longer than TABLE_CELL is cut, not overrun */
	{
		char big[TABLE_CELL * 2];

		memset(big, 'x', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		t.ncols = 1;
		table_row(&t, big);
		CU_ASSERT_EQUAL(strlen(t.cells[0][0]), TABLE_CELL - 1);
		table_print(&t, f);
	}
	fclose(f);
	free(buf);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("tools-plan-table", NULL, NULL);

	cwtest_add(s, "JSON array round trip", test_json_array_round_trip);
	cwtest_add(s, "JSON of no disks", test_json_empty);
	cwtest_add(s, "a reply missing a field or mistyped", test_from_json_refuses);
	cwtest_add(s, "the plan table", test_table);
	cwtest_add(s, "tables align", test_generic_table);
	return cwtest_run();
}
