/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cwtest.h — the one runner every CUnit test program ends with.
 *
 * It runs the registered suites verbosely and prints a line
 *   cw-counts: passed=N failed=M
 * that scripts/check adds up over all suites.  Exit status follows
 * automake: 0 pass, 1 fail, 77 skip, 99 hard error.
 */
#ifndef CWTEST_H
#define CWTEST_H

#include <stdio.h>
#include <stdlib.h>
#include <CUnit/Basic.h>

/* Registers a suite; on failure ends the program as a hard error. */
static inline CU_pSuite cwtest_suite(const char *name, CU_InitializeFunc init,
				     CU_CleanupFunc fini)
{
	CU_pSuite s;

	if (CU_get_registry() == NULL && CU_initialize_registry() != CUE_SUCCESS)
		exit(99);
	s = CU_add_suite(name, init, fini);
	if (!s)
		exit(99);
	return s;
}

static inline void cwtest_add(CU_pSuite s, const char *name, CU_TestFunc fn)
{
	if (!CU_add_test(s, name, fn))
		exit(99);
}

static inline int cwtest_run(void)
{
	unsigned run, failed;

	CU_basic_set_mode(CU_BRM_VERBOSE);
	if (CU_basic_run_tests() != CUE_SUCCESS)
		return 99;
	run = CU_get_number_of_tests_run();
	failed = CU_get_number_of_tests_failed();
	printf("cw-counts: passed=%u failed=%u\n", run - failed, failed);
	fflush(stdout);
	CU_cleanup_registry();
	return failed ? 1 : 0;
}

/* Makes a new directory $TMPDIR/<name>.XXXXXX (under /tmp without
 * TMPDIR), its path in dir; on failure ends the program as a hard error. */
static inline void cwtest_tmpdir(char *dir, size_t size, const char *name)
{
	const char *t = getenv("TMPDIR");

	snprintf(dir, size, "%s/%s.XXXXXX", t && *t ? t : "/tmp", name);
	if (!mkdtemp(dir))
		exit(99);
}

/* cwtest_run(), then removes dir and all it holds; a removal that fails
 * turns a pass into a hard error. */
static inline int cwtest_run_in_tmpdir(const char *dir)
{
	char cmd[4200];
	int r = cwtest_run();

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0 && r == 0)
		r = 99;
	return r;
}

#endif
