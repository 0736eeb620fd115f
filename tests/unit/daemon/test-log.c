/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: clockwised's log (daemon/log.c) on stderr: a line carries
 * its syslog priority as "<N>" and the program's name, lines above the
 * level are dropped, an over-long message is cut to one line of at most
 * 1024 bytes that still ends in a newline, and lines from several threads
 * never mix.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/log.h"
#include "cwtest.h"

static FILE *out;
static int saved = -1;

/* Sends stderr to a temporary file until captured() gives it back. */
static void capture(void)
{
	out = tmpfile();
	saved = dup(STDERR_FILENO);
	CU_ASSERT_FATAL(out != NULL && saved >= 0);
	CU_ASSERT_FATAL(dup2(fileno(out), STDERR_FILENO) >= 0);
}

/* What was written since capture(), malloc'ed. */
static char *captured(size_t *ret_len)
{
	long n;
	char *buf;

	dup2(saved, STDERR_FILENO);
	close(saved);
	n = ftell(out);
	buf = calloc(1, (size_t)n + 1);
	CU_ASSERT_FATAL(buf != NULL);
	rewind(out);
	CU_ASSERT_EQUAL_FATAL(fread(buf, 1, (size_t)n, out), (size_t)n);
	fclose(out);
	*ret_len = (size_t)n;
	return buf;
}

static void test_prefix_and_level(void)
{
	size_t n;
	char *s;

	cwd_log_set_level(LOG_NOTICE);
	CU_ASSERT_EQUAL(cwd_log_level(), LOG_NOTICE);
	capture();
	cwd_log(LOG_ERR, "disk %s: %d errors", "d1", 3);
	cwd_log(LOG_INFO, "not shown");
	cwd_log(LOG_NOTICE, "shown");
	s = captured(&n);
	CU_ASSERT_STRING_EQUAL(s, "<3>clockwised: disk d1: 3 errors\n<5>clockwised: shown\n");
	free(s);
	cwd_log_set_level(LOG_INFO);
}

static void test_long_line(void)
{
	static char msg[3000];
	size_t n;
	char *s;

	memset(msg, 'x', sizeof(msg) - 1);
	capture();
	cwd_log(LOG_WARNING, "%s", msg);
	cwd_log(LOG_WARNING, "after");
	s = captured(&n);
	CU_ASSERT_PTR_NOT_NULL_FATAL(strchr(s, '\n'));
	CU_ASSERT_EQUAL(strchr(s, '\n') - s + 1, 1023);	/* the buffer, less its NUL */
	CU_ASSERT_EQUAL(strncmp(s, "<4>clockwised: xxx", 18), 0);
	CU_ASSERT_STRING_EQUAL(strchr(s, '\n') + 1, "<4>clockwised: after\n");
	free(s);

	/* The longest message that fits is not cut. */
	msg[1022 - strlen("<4>clockwised: ")] = 0;
	capture();
	cwd_log(LOG_WARNING, "%s", msg);
	s = captured(&n);
	CU_ASSERT_EQUAL(n, 1023);
	CU_ASSERT_EQUAL(s[n - 1], '\n');
	CU_ASSERT_EQUAL(s[n - 2], 'x');
	free(s);
}

enum { THREADS = 4, LINES = 500 };

static void *logger(void *arg)
{
	char fill[200];

	memset(fill, 'a' + (int)(intptr_t)arg, sizeof(fill) - 1);
	fill[sizeof(fill) - 1] = 0;
	for (int i = 0; i < LINES; i++)
		cwd_log(LOG_ERR, "%d %s %d", (int)(intptr_t)arg, fill, i);
	return NULL;
}

static void test_threads_whole_lines(void)
{
	pthread_t t[THREADS];
	unsigned count[THREADS] = { 0 };
	size_t n;
	char *s, *line, *save = NULL;

	capture();
	for (intptr_t i = 0; i < THREADS; i++)
		CU_ASSERT_FATAL(pthread_create(&t[i], NULL, logger, (void *)i) == 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	s = captured(&n);
	for (line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		int who, seq;
		char fill[256];

		if (sscanf(line, "<3>clockwised: %d %255s %d", &who, fill, &seq) != 3 ||
		    who < 0 || who >= THREADS || strlen(fill) != 199 ||
		    strspn(fill, (char[]){ (char)('a' + who), 0 }) != 199 ||
		    seq != (int)count[who]) {
			CU_FAIL("a line was mixed with another");
			break;
		}
		count[who]++;
	}
	for (int i = 0; i < THREADS; i++)
		CU_ASSERT_EQUAL(count[i], LINES);
	free(s);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("daemon log", NULL, NULL);

	cwtest_add(s, "priority prefix and level", test_prefix_and_level);
	cwtest_add(s, "an over-long message is one cut line", test_long_line);
	cwtest_add(s, "lines from several threads stay whole", test_threads_whole_lines);
	return cwtest_run();
}
