/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Names the daemon's threads, so that top -H, ps -L and
 * /proc/PID/task/TID/comm tell a disk's dispatcher from a client's
 * reader: "cw-d:DISK/LANE", "cw-r:EXPORT", "cw-w:EXPORT", ...  The
 * kernel keeps 15 characters; a longer name is cut there.
 */
#ifndef CLOCKWISED_THREAD_NAME_H
#define CLOCKWISED_THREAD_NAME_H

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

__attribute__((format(printf, 2, 3)))
static inline void thread_name(pthread_t t, const char *fmt, ...)
{
	char name[16];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	pthread_setname_np(t, name);	/* a name only: failing changes nothing */
}

#endif
