/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * plan-table — each disk's plan (clockwise/admit-state.h) as `cwsim plan`
 * and `cwctl disk plan` print it: a table for people, or the JSON array of
 * cw_disk_plan_format_json() objects that clockwised's disk.plan command
 * answers.
 */
#ifndef CW_TOOLS_PLAN_TABLE_H
#define CW_TOOLS_PLAN_TABLE_H

#include <stdio.h>

#include <clockwise/admit-state.h>

struct json_object;

struct plan_row {
	char disk[CW_NAME_MAX + 1];
	struct cw_disk_plan plan;
};

/* DISK ID TASKS UTIL DELTA-L BE-BUDGET IDLE-BE SERVER BE-PIECE BE-MAX
 * RESERVE STARVED: times in the units' short form, "none" for no limit,
 * "-" for no server or reserve, which show as SLICE/PERIOD. */
void plan_table_print(FILE *f, const struct plan_row *rows, size_t n);

/* The rows as one JSON array, one object per line: 0, or -ENOSPC when an
 * object does not fit (cannot happen with the names CW_NAME_MAX allows). */
int plan_table_print_json(FILE *f, const struct plan_row *rows, size_t n);

/* One object as cw_disk_plan_format_json prints it back into a row: 0, or
 * -EINVAL when a key is missing or has the wrong type. */
int plan_row_from_json(struct json_object *o, struct plan_row *ret);

#endif
