/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Private to the sched module: sched.c (the policies), beq.c, rbfq.c and
 * sfc.c (the best-effort queue orders), shares.c and curve.c (their pure
 * functions), idmap.c (a map from client ids). */
#ifndef CW_SCHED_PRIVATE_H
#define CW_SCHED_PRIVATE_H

#include <clockwise/sched.h>
#include <clockwise/sched-beq.h>

/* idmap.c: client id -> pointer; NULL pointers cannot be stored. */
struct sched_idmap_ent {
	uint64_t id;
	void *ptr;
};

struct sched_idmap {
	struct sched_idmap_ent *v;
	size_t n, cap;
};

void *sched_idmap_get(const struct sched_idmap *m, uint64_t id);
int sched_idmap_put(struct sched_idmap *m, uint64_t id, void *ptr);	/* id not yet in m */
void sched_idmap_done(struct sched_idmap *m, void (*free_fn)(void *ptr));

#endif
