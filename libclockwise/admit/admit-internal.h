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

/* Who a refused test result blames, with idx[i] naming set[i] for the
 * caller: one task, or CW_ADMIT_FAIL_ALL when the set as a whole needs
 * more than the disk (U > 1, no task alone). */
/* D of a part of a reservation due this way, with stream period t0
 * (0: the part's own period). */
static inline int64_t admit_part_deadline(enum cw_admit_due due, int64_t t0)
{
	return due == CW_ADMIT_DUE_STREAM ? t0 : 0;
}

static inline size_t admit_culprit(const struct cw_admit_result *r, const struct cw_task *set,
				   size_t n, const size_t *idx)
{
	if (r->why == CW_ADMIT_UTILIZATION &&
	    !(r->fail_task < n && set[r->fail_task].service_ns > set[r->fail_task].period_ns))
		return CW_ADMIT_FAIL_ALL;
	return r->fail_task < n ? idx[r->fail_task] : CW_ADMIT_FAIL_ALL;
}

#endif
