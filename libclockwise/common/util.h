/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Small private helpers shared by the modules; never installed. */
#ifndef CW_UTIL_H
#define CW_UTIL_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

#define CW_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define CW_MIN(a, b) ((a) < (b) ? (a) : (b))
#define CW_MAX(a, b) ((a) > (b) ? (a) : (b))
#define CW_DIV_ROUND_UP(n, d) (((n) + (d) - 1) / (d))
/* The struct of type whose member is at ptr (an embedded item's owner). */
#define CW_CONTAINER_OF(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* Branch hints.  Invariant checks (ALWAYS/NEVER) are in invariant.h. */
#define CW_LIKELY(x) __builtin_expect(!!(x), 1)
#define CW_UNLIKELY(x) __builtin_expect(!!(x), 0)

static inline bool cw_is_pow2_u64(uint64_t x)
{
	return x && !(x & (x - 1));
}

#endif
