/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A map from 64-bit client ids to pointers (open addressing, linear
 * probing, at most half full), for the best-effort orders and the
 * cross-disk tracker.  Entries are never removed: clients are few and
 * long-lived (exports), and each order caps how many it keeps.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "sched/sched-internal.h"

static size_t slot_of(uint64_t id, size_t cap)
{
	/* splitmix64's finalizer: ids are often small and dense */
	id ^= id >> 30;
	id *= UINT64_C(0xbf58476d1ce4e5b9);
	id ^= id >> 27;
	id *= UINT64_C(0x94d049bb133111eb);
	id ^= id >> 31;
	return (size_t)(id & (cap - 1));
}

void *sched_idmap_get(const struct sched_idmap *m, uint64_t id)
{
	if (!m->cap)
		return NULL;
	for (size_t i = slot_of(id, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (!m->v[i].ptr)
			return NULL;
		if (m->v[i].id == id)
			return m->v[i].ptr;
	}
}

static void place(struct sched_idmap_ent *v, size_t cap, uint64_t id, void *ptr)
{
	size_t i;

	for (i = slot_of(id, cap); v[i].ptr; i = (i + 1) & (cap - 1))
		;
	v[i] = (struct sched_idmap_ent){ .id = id, .ptr = ptr };
}

int sched_idmap_put(struct sched_idmap *m, uint64_t id, void *ptr)
{
	if ((m->n + 1) * 2 > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 16;
		struct sched_idmap_ent *v = calloc(cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		for (size_t i = 0; i < m->cap; i++)
			if (m->v[i].ptr)
				place(v, cap, m->v[i].id, m->v[i].ptr);
		free(m->v);
		m->v = v;
		m->cap = cap;
	}
	place(m->v, m->cap, id, ptr);
	m->n++;
	return 0;
}

void sched_idmap_done(struct sched_idmap *m, void (*free_fn)(void *ptr))
{
	for (size_t i = 0; i < m->cap; i++)
		if (m->v[i].ptr && free_fn)
			free_fn(m->v[i].ptr);
	free(m->v);
	*m = (struct sched_idmap){ 0 };
}
