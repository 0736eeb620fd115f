/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Private to the admit module: test.c (Jeffay's test and ΔL) and plan.c
 * (QoS and layout to per-disk tasks). */
#ifndef CW_ADMIT_PRIVATE_H
#define CW_ADMIT_PRIVATE_H

#include <clockwise/admit.h>

/* Whether a task's window overlaps [from, to); from == to == 0 is always. */
static inline bool admit_window_overlaps(const struct cw_task *t, int64_t from, int64_t to)
{
	bool t_always = t->from_ns == 0 && t->to_ns == 0;
	bool always = from == 0 && to == 0;

	return t_always || always || (t->from_ns < to && from < t->to_ns);
}

#endif
