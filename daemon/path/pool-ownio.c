/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One of the daemon's own I/Os through the lanes, waited for: the SSD
 * caches' worker (pool-cache.c) and the mover (pool-mover.c) both use it.
 */
#include "config.h"

#include "daemon/path/pool-internal.h"

/* A waited I/O of the mover's or a cache's. */
struct wait1 {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int err;
};

static void wait1_done(void *arg, int err)
{
	struct wait1 *w = arg;

	pthread_mutex_lock(&w->lock);
	w->done = true;
	w->err = err;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* One I/O of the mover, waited for: 0 or -errno. */
int pb_mover_io(struct pb *pb, uint32_t disk_id, enum cw_io_op op, uint64_t off, uint64_t len,
		void *buf)
{
	struct wait1 w = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
	int r;

	r = pb_submit_disk(pb->mover_x, disk_id, op, off, len, buf, wait1_done, &w);
	if (r < 0)
		return r;
	lane_unplug();
	pthread_mutex_lock(&w.lock);
	while (!w.done)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	pthread_cond_destroy(&w.cond);
	pthread_mutex_destroy(&w.lock);
	return w.err;
}
