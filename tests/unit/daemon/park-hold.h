/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * For tests of daemon/park.h and its users: a thread with park_held set
 * stops in its wake-up between its look at the sleeper and the wake-up
 * itself (the window a waker that lost its CPU leaves open) until the
 * test lets it go.  Included before daemon/park.h or a file that
 * includes it.
 */
#ifndef CW_TEST_PARK_HOLD_H
#define CW_TEST_PARK_HOLD_H

#include <semaphore.h>
#include <stdbool.h>

static __thread bool park_held;
static sem_t park_at_gap, park_release_gap;

static void park_hold_here(void)
{
	if (park_held) {
		sem_post(&park_at_gap);
		sem_wait(&park_release_gap);
	}
}
#define park_wake_gap() park_hold_here()

static inline int park_hold_init(void)
{
	return sem_init(&park_at_gap, 0, 0) == 0 && sem_init(&park_release_gap, 0, 0) == 0 ? 0 : -1;
}

/* Waits for the held waker to reach its gap. */
static inline void park_hold_reached(void)
{
	sem_wait(&park_at_gap);
}

static inline void park_hold_release(void)
{
	sem_post(&park_release_gap);
}

static inline void park_hold_fini(void)
{
	sem_destroy(&park_at_gap);
	sem_destroy(&park_release_gap);
}

#endif
