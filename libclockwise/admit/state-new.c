/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The admission state of a pool (clockwise/admit-state.h): Bosch &
 * Mullender, section 3.1 — "If any of the participating disks fails to
 * admit its part of the new task, Clockwise [...] rejects the entire
 * real-time task."
 *
 * Invariants:
 *   - a disk's task set is exactly the parts on it of the reservations in
 *     st->resvs, and each part was admitted (cw_admit_plan's windowed test,
 *     with the disk's best-effort reserve) beside the parts before it, or
 *     re-admitted with the disk's current model (set_model);
 *   - a stored reservation is in memory only once the pool holds it, and
 *     leaves memory only once the pool let it go;
 *   - each disk's plan is cw_admit_disk_plan() of its task set and model,
 *     recomputed (and announced) whenever either changes.
 *
 * This file holds the state's life: made new from the pool (its disks,
 * the stored reservations and best-effort QoS, each disk's plan) and
 * freed; it calls the sections that load those.  The rest is split along
 * its sections, each file keeping the invariant it is about;
 * state-internal.h says which file holds what and which calls which.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "admit/state-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

static int64_t wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * CW_NS_PER_S + ts.tv_nsec;
}

void cw_admit_state_opts_init(struct cw_admit_state_opts *o)
{
	*o = (struct cw_admit_state_opts){ .size = sizeof(*o) };
	cw_admit_plan_opts_init(&o->plan);
	o->clock_ns = cw_now_ns;
	o->wall_ns = wall_now;
	o->rebuild_share_ppm = CW_ADMIT_REBUILD_SHARE_PPM;
}

int cw_admit_state_new(struct cw_pool *pool, const struct cw_admit_state_opts *opts,
		       struct cw_admit_state **ret)
{
	struct cw_admit_state *st;
	_cleanup_free_ struct cw_disk_info *disks = NULL;
	cw_admit_listener_fn listener;
	size_t n = 0;
	int r;

	if (!pool || !ret)
		return -EINVAL;
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	if (opts)
		st->o = *opts;
	else
		cw_admit_state_opts_init(&st->o);
	if (!st->o.clock_ns)
		st->o.clock_ns = cw_now_ns;
	if (!st->o.wall_ns)
		st->o.wall_ns = wall_now;
	st->pool = pool;
	st->block = cw_pool_block_size(pool);
	listener = st->o.listener;
	st->o.listener = NULL;	/* nothing is announced of what is loaded */
	pthread_mutex_init(&st->lock, NULL);
	r = cw_disk_list(pool, &disks, &n);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = ast_disk_load(st, &disks[i]);
	if (r == 0)
		r = ast_resvs_load(st);
	if (r == 0)
		r = ast_bes_load(st);
	for (uint32_t id = 1; r == 0 && id <= CW_DISKS_MAX; id++)
		if (st->disks[id])
			r = ast_replan(st, id, NULL);
	if (r < 0) {
		cw_admit_state_free(st);
		return r;
	}
	st->o.listener = listener;
	*ret = st;
	return 0;
}

void cw_admit_state_set_listener(struct cw_admit_state *st, cw_admit_listener_fn fn,
				 void *userdata)
{
	st->o.listener = fn;
	st->o.listener_data = userdata;
}

void cw_admit_state_free(struct cw_admit_state *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->n_resvs; i++)
		ast_resv_free(st->resvs[i]);
	free(st->resvs);
	for (size_t i = 0; i < st->n_bes; i++)
		ast_be_free(st->bes[i]);
	free(st->bes);
	for (size_t i = 0; i <= CW_DISKS_MAX; i++)
		free(st->disks[i]);
	pthread_mutex_destroy(&st->lock);
	free(st);
}
