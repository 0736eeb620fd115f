/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <time.h>

#include <clockwise/types.h>

const char *cw_version(void)
{
	return PACKAGE_VERSION;
}

int64_t cw_clock_ns(clockid_t clk)
{
	struct timespec ts;

	if (clock_gettime(clk, &ts) < 0)
		return 0;
	return (int64_t)ts.tv_sec * CW_NS_PER_S + ts.tv_nsec;
}

int64_t cw_now_ns(void)
{
	return cw_clock_ns(CLOCK_MONOTONIC);
}
