/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Private to the sched module: sched.c (the policies) and beq.c (the
 * best-effort queue orders). */
#ifndef CW_SCHED_PRIVATE_H
#define CW_SCHED_PRIVATE_H

#include <clockwise/sched.h>

#endif
