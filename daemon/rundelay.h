/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * How long the calling thread has waited for a CPU while runnable (the
 * run delay of /proc/thread-self/schedstat, kept by the kernel's
 * schedstats): what tells a thread that was due but not running from one
 * that had nothing to do.  One pread per sample, from a descriptor the
 * thread opened itself.
 */
#ifndef CLOCKWISED_RUNDELAY_H
#define CLOCKWISED_RUNDELAY_H

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The calling thread's schedstat, or -1 where the kernel has none. */
static inline int rundelay_open(void)
{
	return open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
}

/* Nanoseconds waited so far (0 where the kernel does not say). */
static inline int64_t rundelay_read(int fd)
{
	char buf[96];
	ssize_t n;
	char *p;

	if (fd < 0)
		return 0;
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	/* "on-CPU-ns run-delay-ns timeslices" */
	p = strchr(buf, ' ');
	return p ? strtoll(p + 1, NULL, 10) : 0;
}

#endif
