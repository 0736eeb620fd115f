/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwise/types.h — types and conventions shared by every libclockwise
 * module.
 *
 * Conventions: functions return 0 or a positive count on success and a
 * negative errno on failure; they never print and never exit.  Output
 * parameters are named ret_* and come last.  Time is an int64_t count of
 * nanoseconds, named *_ns.  Sizes in bytes end in _bytes.
 */
#ifndef CLOCKWISE_TYPES_H
#define CLOCKWISE_TYPES_H

#include <stdint.h>
#include <time.h>
#include <stddef.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CW_NS_PER_US INT64_C(1000)
#define CW_NS_PER_MS INT64_C(1000000)
#define CW_NS_PER_S  INT64_C(1000000000)

/* Storage tier of a disk. */
enum cw_tier {
	CW_TIER_HDD = 0,
	CW_TIER_SSD = 1,
	/* An image on a Ceph cluster (a disk named rbd:POOL/IMAGE): no
	 * head, no platter, a network and other clients between it and us. */
	CW_TIER_RBD = 2,
};

/* The library's version string, e.g. "0.1.0". */
const char *cw_version(void);

/* The current CLOCK_MONOTONIC time.  Only drivers (the daemon, tools) call
 * this: the scheduling core always takes the time as an argument. */
int64_t cw_now_ns(void);
/* Any clock in ns, e.g. CLOCK_THREAD_CPUTIME_ID or a thread's
 * (pthread_getcpuclockid); 0 when it cannot be read (a thread gone). */
int64_t cw_clock_ns(clockid_t clk);

#ifdef __cplusplus
}
#endif
#endif
