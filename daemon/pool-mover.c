/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The mover: one thread that carries out the pool's journalled moves
 * (clockwise/mover.h) with real I/O.  The library decides what to do and
 * keeps the journal; this file does the copies, each as the daemon's own
 * best-effort I/O through the disks' lanes (pb->submit_disk), charged to a
 * client of its own: on a disk with streams it runs in the slack ΔL like
 * any best-effort request, so no stream misses a deadline for it.
 *
 * One block at a time: read the source, write the destination, fdatasync
 * the destination, then tell the library, which switches the mapping or
 * asks for the copy again.  Before the copy, the destination disk joins
 * the disk list of every export of the partition, so a client's FLUSH
 * syncs the writes that are mirrored there.
 */
#include "config.h"

#include "daemon/pool-internal.h"

/* How long the mover waits while I/O on a block drains, and while
 * nothing runs (a command wakes it at once). */
#define MOVER_DRAIN_NS (200 * CW_NS_PER_US)
#define MOVER_IDLE_S 1

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

	r = pb->submit_disk(pb->mover_x, disk_id, op, off, len, buf, wait1_done, &w);
	if (r < 0)
		return r;
	lane_unplug();
	pthread_mutex_lock(&w.lock);
	while (!w.done)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	return w.err;
}

/* The destination disk joins the disk list of the partition's exports. */
static void take_dst(struct pb *pb, const struct cw_mover_task *t)
{
	int di = pb_disk_index(pb, t->dst_disk_id);

	if (di < 0)
		return;
	for (struct pbx *x = pb->exports; x; x = x->next)
		if (x->part == t->part)
			pb_export_take_disk(pb, x, (uint32_t)di);
}

static void copy_block(struct pb *pb, const struct cw_mover_task *t, void *buf)
{
	int rerr, werr = 0;

	take_dst(pb, t);
	rerr = pb_mover_io(pb, t->src_disk_id, CW_IO_READ, t->src_offset, t->length, buf);
	if (rerr == 0)
		werr = pb_mover_io(pb, t->dst_disk_id, CW_IO_WRITE, t->dst_offset, t->length, buf);
	if (rerr == 0 && werr == 0)
		werr = pb_mover_io(pb, t->dst_disk_id, CW_IO_FSYNC, 0, 0, NULL);
	if (rerr < 0)
		cwd_log(LOG_ERR, "move %" PRIu64 ": block %" PRIu64 " of its partition does not read "
			"from disk %u (%s): it stays where it is", t->move_id, t->block,
			t->src_disk_id, strerror(-rerr));
	if (werr < 0)
		cwd_log(LOG_ERR, "move %" PRIu64 ": writing block %" PRIu64 " to disk %u failed (%s): "
			"the move pauses", t->move_id, t->block, t->dst_disk_id, strerror(-werr));
	if (cw_mover_copied(pb->pool, rerr, werr) < 0)
		cwd_log(LOG_ERR, "move %" PRIu64 ": the mover lost its step", t->move_id);
}

static void idle_wait(struct pb *pb, int64_t ns)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ns / CW_NS_PER_S;
	ts.tv_nsec += ns % CW_NS_PER_S;
	if (ts.tv_nsec >= CW_NS_PER_S) {
		ts.tv_sec++;
		ts.tv_nsec -= CW_NS_PER_S;
	}
	pthread_mutex_lock(&pb->mover_lock);
	while (!pb->mover_kicked && !pb->mover_stop &&
	       pthread_cond_timedwait(&pb->mover_cond, &pb->mover_lock, &ts) == 0)
		;
	pb->mover_kicked = false;
	pthread_mutex_unlock(&pb->mover_lock);
}

static void *mover_main(void *arg)
{
	struct pb *pb = arg;
	_cleanup_free_ void *buf = NULL;
	bool logged_idle = true;

	if (posix_memalign(&buf, 4096, pb->block_size) != 0) {
		cwd_log(LOG_ERR, "the mover has no memory for a block: moves do not run");
		return NULL;
	}
	while (!atomic_load(&pb->mover_stop)) {
		struct cw_mover_task t;
		int r = cw_mover_next(pb->pool, &t);

		if (r < 0) {
			cwd_log(LOG_ERR, "the mover: %s", strerror(-r));
			idle_wait(pb, MOVER_IDLE_S * CW_NS_PER_S);
			continue;
		}
		switch (t.action) {
		case CW_MOVER_IDLE:
			if (pb_cache_work(pb, buf))
				break;	/* the caches' turn (pool-cache.c) */
			if (!logged_idle)
				cwd_log(LOG_INFO, "no move runs any more");
			logged_idle = true;
			idle_wait(pb, MOVER_IDLE_S * CW_NS_PER_S);
			break;
		case CW_MOVER_WAIT:
			idle_wait(pb, MOVER_DRAIN_NS);
			break;
		case CW_MOVER_COPY:
			logged_idle = false;
			copy_block(pb, &t, buf);
			break;
		}
	}
	return NULL;
}

void pb_export_take_disk(struct pb *pb, struct pbx *x, uint32_t di)
{
	unsigned n, i;

	pthread_mutex_lock(&pb->xdisks_lock);
	n = atomic_load_explicit(&x->ndisks, memory_order_relaxed);
	for (i = 0; i < n && x->disks[i] != di; i++)
		;
	if (i == n) {
		if (!pb->disks[di].can_punch)
			atomic_store_explicit(&x->can_punch, false, memory_order_relaxed);
		x->disks[n++] = di;
		atomic_store_explicit(&x->ndisks, n, memory_order_release);
	}
	pthread_mutex_unlock(&pb->xdisks_lock);
}

int pb_mover_start(struct pb *pb)
{
	struct pbx *x = calloc(1, sizeof(*x));
	int r;

	if (!x)
		return -ENOMEM;
	x->pb = pb;
	snprintf(x->name, sizeof(x->name), "(mover)");
	x->main.x = x;
	snprintf(x->main.name, sizeof(x->main.name), "%s", x->name);
	x->main.client = atomic_fetch_add(&pb->next_client, 1) + 1;
	x->main.since_ns = cw_now_ns();
	atomic_init(&x->can_punch, false);
	pb->mover_x = x;
	pthread_mutex_init(&pb->mover_lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&pb->mover_cond, &ca);
	pthread_condattr_destroy(&ca);
	r = -pthread_create(&pb->mover_thread, NULL, mover_main, pb);
	pb->mover_started = r == 0;
	return r;
}

void pb_mover_kick(struct pb *pb)
{
	if (!pb->mover_started)
		return;
	pthread_mutex_lock(&pb->mover_lock);
	pb->mover_kicked = true;
	pthread_cond_signal(&pb->mover_cond);
	pthread_mutex_unlock(&pb->mover_lock);
}

void pb_mover_stop(struct pb *pb)
{
	if (!pb->mover_started)
		return;
	pthread_mutex_lock(&pb->mover_lock);
	pb->mover_stop = true;
	pthread_cond_signal(&pb->mover_cond);
	pthread_mutex_unlock(&pb->mover_lock);
	pthread_join(pb->mover_thread, NULL);
	pb->mover_started = false;
	pthread_cond_destroy(&pb->mover_cond);
	pthread_mutex_destroy(&pb->mover_lock);
	free(pb->mover_x);
	pb->mover_x = NULL;
}
