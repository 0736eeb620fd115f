/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Invariant checks in SQLite's manner (its ALWAYS() and NEVER()): a
 * condition that a proof says always (or never) holds, written where the
 * code still does something sane if it does not:
 *
 *	if (NEVER(s->dlr > s->o.delta_l_ns))
 *		s->dlr = s->o.delta_l_ns;
 *
 * In a debug build (NDEBUG not defined: every build of this tree unless
 * the builder adds -DNDEBUG, so every test run) a broken invariant aborts
 * at once, naming the condition and where it is, so that the test, fuzzer
 * or simulation that broke it stops right there.  With NDEBUG the condition
 * is still evaluated, the defensive branch is taken and the program goes
 * on.  The condition must have no side effect.
 */
#ifndef CW_INVARIANT_H
#define CW_INVARIANT_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef NDEBUG
#define CW_INVARIANTS 0
#define ALWAYS(x) (!!(x))
#define NEVER(x) (!!(x))
#else
#define CW_INVARIANTS 1
#define ALWAYS(x) \
	((x) ? true : (cw_invariant_broken_("ALWAYS(" #x ")", __FILE__, __LINE__), false))
#define NEVER(x) \
	((x) ? (cw_invariant_broken_("NEVER(" #x ")", __FILE__, __LINE__), true) : false)

/* A bug, not an error: the one place library code prints, like assert(). */
__attribute__((noreturn, cold)) static inline void
cw_invariant_broken_(const char *what, const char *file, int line)
{
	fprintf(stderr, "%s:%d: invariant broken: %s\n", file, line, what);
	fflush(stderr);
	abort();
}
#endif

#endif
