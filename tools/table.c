/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Aligned text tables for the tools (table.h). */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "table.h"

void table_row(struct table *t, ...)
{
	va_list ap;

	if (t->nrows == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 16;
		void *p = realloc(t->cells, cap * sizeof(*t->cells));

		if (!p) {
			fprintf(stderr, "%s: out of memory\n", program_invocation_short_name);
			exit(EXIT_FAILURE);
		}
		t->cells = p;
		t->cap = cap;
	}
	va_start(ap, t);
	for (unsigned i = 0; i < t->ncols; i++)
		snprintf(t->cells[t->nrows][i], TABLE_CELL, "%s", va_arg(ap, const char *));
	va_end(ap);
	t->nrows++;
}

void table_print(struct table *t, FILE *f)
{
	size_t w[TABLE_COLS] = { 0 };

	for (size_t r = 0; r < t->nrows; r++)
		for (unsigned i = 0; i < t->ncols; i++)
			if (strlen(t->cells[r][i]) > w[i])
				w[i] = strlen(t->cells[r][i]);
	for (size_t r = 0; r < t->nrows; r++) {
		for (unsigned i = 0; i < t->ncols; i++) {
			if (i + 1 == t->ncols)
				fprintf(f, "%s\n", t->cells[r][i]);
			else
				fprintf(f, "%-*s  ", (int)w[i], t->cells[r][i]);
		}
	}
	free(t->cells);
	t->cells = NULL;
	t->nrows = t->cap = 0;
}
