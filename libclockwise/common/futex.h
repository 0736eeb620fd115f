/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The futex, the one place the tree makes the system call: wait while a
 * word holds a value, wake one or all of its waiters.  Private futexes
 * only (threads of one process).  Not installed: the library's engines
 * (io/rbd.c) and the daemon's sleeping threads (daemon/park.h and what
 * it serves) include it.
 *
 * These calls order nothing themselves: the caller's atomics on the word
 * and on what it guards carry the memory orders (see daemon/park.h for
 * why the flag and the work are seq_cst there).  A wait returns on a
 * wake-up, a spurious wake-up, a signal, a timeout, or at once if the
 * word no longer holds val: callers look again, in a loop.
 */
#ifndef CW_COMMON_FUTEX_H
#define CW_COMMON_FUTEX_H

#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Sleeps while *addr == val, for at most timeout_ns (< 0: no limit). */
static inline void cw_futex_wait_for(atomic_int *addr, int val, int64_t timeout_ns)
{
	struct timespec ts, *tsp = NULL;

	if (timeout_ns >= 0) {
		ts.tv_sec = timeout_ns / 1000000000;
		ts.tv_nsec = timeout_ns % 1000000000;
		tsp = &ts;
	}
	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, tsp, NULL, 0);
}

/* Sleeps while *addr == val. */
static inline void cw_futex_wait(atomic_int *addr, int val)
{
	cw_futex_wait_for(addr, val, -1);
}

/* Sleeps while *addr == val, until deadline_ns on CLOCK_MONOTONIC
 * (absolute, so a retry after a spurious wake-up does not stretch it;
 * < 0: no deadline). */
static inline void cw_futex_wait_until(atomic_int *addr, int val, int64_t deadline_ns)
{
	struct timespec ts = { .tv_sec = deadline_ns / 1000000000,
			       .tv_nsec = deadline_ns % 1000000000 };

	syscall(SYS_futex, addr, FUTEX_WAIT_BITSET_PRIVATE, val, deadline_ns < 0 ? NULL : &ts,
		NULL, FUTEX_BITSET_MATCH_ANY);
}

/* Wakes one thread sleeping on addr. */
static inline void cw_futex_wake(atomic_int *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Wakes every thread sleeping on addr. */
static inline void cw_futex_wake_all(atomic_int *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

#endif
