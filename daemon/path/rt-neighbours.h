/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Real-time threads of other processes on the host: what can take a CPU
 * from a stream's threads (at real-time priority) that admission never
 * booked, since SCHED_FIFO does not share a CPU with an equal or a
 * higher priority.  A second clockwised, or a `chrt -f 50` busy loop, on
 * a two-CPU host leaves the dispatchers one CPU or none.  A miss whose
 * thread waited for a CPU names them, so that a miss caused outside the
 * daemon is told apart from one of its own.  Kernel threads are left out
 * (their real-time work is interrupts, not a neighbour's load).
 *
 * It reads /proc/PID/task/TID/stat for every thread: for the thread that
 * logs a miss, never for a dispatcher.
 */
#ifndef CLOCKWISED_RT_NEIGHBOURS_H
#define CLOCKWISED_RT_NEIGHBOURS_H

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RT_NEIGHBOURS_NAMED 4	/* threads named; the rest are counted */
#define PF_KTHREAD_FLAG 0x00200000u

/* One thread's stat: its name, state, flags, rt_priority and policy
 * (fields 2, 3, 9, 40 and 41 of proc(5)); false if it is gone. */
static inline bool rt_thread_stat(int dirfd, const char *tid, char comm[17], char *state,
				  unsigned long *flags, int *prio, int *policy)
{
	char path[300], buf[1024], *open_p, *close_p, *tok, *save;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "%s/stat", tid);
	fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	open_p = strchr(buf, '(');
	close_p = strrchr(buf, ')');	/* a name may hold ')' itself */
	if (!open_p || !close_p || close_p < open_p)
		return false;
	n = close_p - open_p - 1;
	snprintf(comm, 17, "%.*s", (int)(n < 16 ? n : 16), open_p + 1);
	*prio = *policy = -1;
	for (field = 3, tok = strtok_r(close_p + 1, " ", &save); tok;
	     field++, tok = strtok_r(NULL, " ", &save)) {
		if (field == 3)
			*state = tok[0];
		else if (field == 9)
			*flags = strtoul(tok, NULL, 10);
		else if (field == 40)
			*prio = atoi(tok);
		else if (field == 41) {
			*policy = atoi(tok);
			break;
		}
	}
	return *policy >= 0;
}

struct rt_neighbour {
	char comm[17], pid[12];
	int prio, policy;
	bool running;
};

/* The order they are named in: running first, then the highest priority
 * (those that can hold a stream's threads off a CPU). */
static inline int rt_neighbour_cmp(const void *a, const void *b)
{
	const struct rt_neighbour *x = a, *y = b;

	if (x->running != y->running)
		return x->running ? -1 : 1;
	return (y->prio > x->prio) - (y->prio < x->prio);
}

#define RT_NEIGHBOURS_SEEN 64	/* threads sorted; more are counted only */

/* Names in buf ("; real-time threads of other processes on this host:
 * NAME[PID] FIFO 50 running, ...") the user-space threads of other
 * processes at SCHED_FIFO or SCHED_RR with a priority of min_prio or
 * more, running ones and then the highest first; buf is left empty when
 * there is none.  Returns how many there are. */
static inline unsigned rt_neighbours(char *buf, size_t len, int min_prio)
{
	DIR *proc = opendir("/proc"), *tasks;
	struct dirent *pe, *te;
	struct rt_neighbour seen[RT_NEIGHBOURS_SEEN];
	pid_t self = getpid();
	unsigned found = 0, n = 0;
	size_t off = 0;

	if (len)
		buf[0] = 0;
	if (!proc)
		return 0;
	while ((pe = readdir(proc))) {
		char path[300];
		int dirfd;

		if (!isdigit((unsigned char)pe->d_name[0]) || atoi(pe->d_name) == self)
			continue;
		snprintf(path, sizeof(path), "/proc/%s/task", pe->d_name);
		dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dirfd < 0)
			continue;
		tasks = fdopendir(dirfd);
		if (!tasks) {
			close(dirfd);
			continue;
		}
		while ((te = readdir(tasks))) {
			char comm[17], state = '?';
			unsigned long flags = 0;
			int prio, policy;

			if (!isdigit((unsigned char)te->d_name[0]) ||
			    !rt_thread_stat(dirfd, te->d_name, comm, &state, &flags, &prio, &policy) ||
			    (flags & PF_KTHREAD_FLAG) ||
			    (policy != SCHED_FIFO && policy != SCHED_RR) || prio < min_prio)
				continue;
			found++;
			if (n == RT_NEIGHBOURS_SEEN)
				continue;
			seen[n] = (struct rt_neighbour){ .prio = prio, .policy = policy,
							 .running = state == 'R' };
			snprintf(seen[n].comm, sizeof(seen[n].comm), "%s", comm);
			snprintf(seen[n].pid, sizeof(seen[n].pid), "%.11s", pe->d_name);
			n++;
		}
		closedir(tasks);
	}
	closedir(proc);
	qsort(seen, n, sizeof(seen[0]), rt_neighbour_cmp);
	for (unsigned i = 0; i < n && i < RT_NEIGHBOURS_NAMED && off < len; i++) {
		int w = snprintf(buf + off, len - off, "%s%s[%s] %s %d%s",
				 i == 0 ? "; real-time threads of other processes on this host: " :
					  ", ",
				 seen[i].comm, seen[i].pid, seen[i].policy == SCHED_FIFO ? "FIFO" : "RR",
				 seen[i].prio, seen[i].running ? " running" : "");

		off = w < 0 || off + (size_t)w > len ? len : off + (size_t)w;
	}
	if (found > RT_NEIGHBOURS_NAMED && off < len)
		snprintf(buf + off, len - off, " and %u more", found - RT_NEIGHBOURS_NAMED);
	return found;
}

#endif
