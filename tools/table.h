/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * table — what the tools print for people: cells filled row by row, then
 * printed with each column as wide as its widest cell.
 */
#ifndef CW_TOOLS_TABLE_H
#define CW_TOOLS_TABLE_H

#include <stddef.h>
#include <stdio.h>

#define TABLE_COLS 12
#define TABLE_CELL 80	/* longer cells are cut */

struct table {
	unsigned ncols;		/* set before the first row, at most TABLE_COLS */
	size_t nrows, cap;
	char (*cells)[TABLE_COLS][TABLE_CELL];
};

/* Appends a row of t->ncols strings; out of memory ends the program. */
void table_row(struct table *t, ...);
/* Prints the rows (two spaces between columns, the last one unpadded) and
 * empties the table for reuse. */
void table_print(struct table *t, FILE *f);

#endif
