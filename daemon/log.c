/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "daemon/log.h"

static atomic_int level = LOG_INFO;
static atomic_bool use_syslog;

void cwd_log_set_level(int l)
{
	atomic_store_explicit(&level, l, memory_order_relaxed);
}

int cwd_log_level(void)
{
	return atomic_load_explicit(&level, memory_order_relaxed);
}

void cwd_log_to_syslog(bool on)
{
	if (on)
		openlog("clockwised", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	atomic_store(&use_syslog, on);
}

void cwd_log(int priority, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n, m;

	if (priority > cwd_log_level())
		return;
	va_start(ap, fmt);
	if (atomic_load(&use_syslog)) {
		vsyslog(priority, fmt, ap);
		va_end(ap);
		return;
	}
	/* Build the whole line first: one write() keeps lines from
	 * different threads apart. */
	n = snprintf(line, sizeof(line), "<%d>clockwised: ", priority);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	n += m < (int)(sizeof(line) - (size_t)n - 1) ? m : (int)(sizeof(line) - (size_t)n - 2);
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;	/* nowhere left to report it */
}
