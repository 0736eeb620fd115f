/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <time.h>

#include <clockwise/types.h>

const char *cw_version(void)
{
	return PACKAGE_VERSION;
}

int64_t cw_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * CW_NS_PER_S + ts.tv_nsec;
}
