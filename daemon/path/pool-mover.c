/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The mover: one thread that carries out the pool's journalled moves
 * (clockwise/mover.h) with real I/O.  The library decides what to do and
 * keeps the journal; this file does the copies, each as the daemon's own
 * best-effort I/O through the disks' lanes (pb_submit_disk), charged to a
 * client of its own: on a disk with streams it runs in the slack ΔL like
 * any best-effort request, so no stream misses a deadline for it.
 *
 * A batch of up to mover_depth blocks at a time, pipelined: every read of
 * the batch is submitted at once, each block's write as soon as its read
 * is done (so the source reads the next blocks while the destination
 * writes the earlier ones), then one fdatasync per destination disk, then
 * the library switches the clean blocks in one transaction and asks for
 * the dirty ones again.  Before the copy, the destination disks join the
 * disk list of every export of the partition, so a client's FLUSH syncs
 * the writes that are mirrored there.
 *
 * A scrub's block (t.verify) reads its destination too, into a second
 * buffer, once the source is read; the two are compared, and only a
 * repair of one that differs writes (and syncs) the destination.
 *
 * On a disk without streams the mover takes at most mover_share percent
 * of the disk's time while other best-effort clients use it (its cost as
 * the best-effort order counts it, the model's mean service time of each
 * request): after a batch that had company it waits so long that its
 * cost is that share of the time.  Alone, it takes what the disk gives.
 */
#include "config.h"

#include "daemon/path/pool-internal.h"
#include "daemon/thread-name.h"

/* How long the mover waits while I/O on a block drains, and while
 * nothing runs (a command wakes it at once). */
#define MOVER_DRAIN_NS (200 * CW_NS_PER_US)
#define MOVER_IDLE_S 1

/* One I/O of a batch done. */
struct io_event {
	unsigned idx;			/* the task, or the sync's index */
	enum cw_io_op op;
	int err;
};

/* A batch's I/O: its completions queue here for the mover's thread. */
struct batch_io {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned inflight;
	unsigned nq;
	struct io_event q[2 * CW_MOVER_DEPTH_MAX];
};

struct io_tag {
	struct batch_io *b;
	unsigned idx;
	enum cw_io_op op;
};

static void batch_io_done(void *arg, int err)
{
	struct io_tag *t = arg;
	struct batch_io *b = t->b;

	pthread_mutex_lock(&b->lock);
	b->q[b->nq].idx = t->idx;
	b->q[b->nq].op = t->op;
	b->q[b->nq++].err = err;
	pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

/* Submits one I/O of the batch: 0, or -errno (it will not complete). */
static int batch_submit(struct pb *pb, struct batch_io *b, struct io_tag *tag, uint32_t disk_id,
			enum cw_io_op op, uint64_t off, uint64_t len, void *buf)
{
	int r;

	pthread_mutex_lock(&b->lock);
	b->inflight++;
	pthread_mutex_unlock(&b->lock);
	tag->b = b;
	tag->op = op;
	r = pb_submit_disk(pb->mover_x, disk_id, op, off, len, buf, batch_io_done, tag);
	if (r < 0) {
		pthread_mutex_lock(&b->lock);
		b->inflight--;
		pthread_mutex_unlock(&b->lock);
	}
	return r;
}

/* ---- the share on disks without streams ---- */

/* The time best-effort clients other than the mover had pieces on disk
 * slot di, so far (a client busy now counts up to now). */
static uint64_t others_busy_ns(struct pb *pb, unsigned di, int64_t now)
{
	uint64_t sum = 0;

	pthread_mutex_lock(&pb->exports_lock);
	for (struct pbx *x = pb->exports; x; x = x->next)
		for (struct pbx_client *c = &x->main; c; c = atomic_load(&c->next)) {
			const struct pbx_be_disk *dc = &c->be_disk[di];
			int64_t since = atomic_load_explicit(&dc->busy_since, memory_order_relaxed);

			sum += atomic_load_explicit(&dc->busy_ns, memory_order_relaxed);
			if (since > 0 && now > since)
				sum += (uint64_t)(now - since);
		}
	pthread_mutex_unlock(&pb->exports_lock);
	return sum;
}

/* The mover's pace on each disk slot (cw_mover_pace_after). */
struct pace {
	struct cw_mover_pace d[PB_DISKS_CAP];
};

/* Waits until the disks of the batch's tasks let the mover go on. */
static void pace_wait(struct pb *pb, struct pace *pc, const struct cw_mover_task *t, unsigned n)
{
	int64_t until = 0, now;

	for (unsigned i = 0; i < n; i++)
		for (int k = 0; k < 2; k++) {
			int di = pb_disk_index(pb, k ? t[i].dst_disk_id : t[i].src_disk_id);

			if (di >= 0)
				until = CW_MAX(until, pc->d[di].next_ns);
		}
	while ((now = cw_now_ns()) < until && !atomic_load(&pb->mover_stop)) {
		int64_t ns = CW_MIN(until - now, 100 * CW_NS_PER_MS);
		struct timespec ts = { ns / CW_NS_PER_S, ns % CW_NS_PER_S };

		nanosleep(&ts, NULL);
	}
}

/* After a batch: each disk it touched sets the mover's pace there. */
static void pace_after(struct pb *pb, struct pace *pc, const struct cw_mover_task *t, unsigned n)
{
	int64_t now = cw_now_ns();
	bool seen[PB_DISKS_CAP] = { false };

	for (unsigned i = 0; i < n; i++)
		for (int k = 0; k < 2; k++) {
			uint32_t id = k ? t[i].dst_disk_id : t[i].src_disk_id;
			int di = pb_disk_index(pb, id);

			if (di < 0 || seen[di])
				continue;
			seen[di] = true;
			cw_mover_pace_after(&pc->d[di], pb->cfg->mover_share,
					    atomic_load_explicit(&pb->disks[di].live_streams,
								 memory_order_relaxed),
					    cw_mover_batch_cost_ns(t, n, id, disk_model(&pb->disks[di])),
					    others_busy_ns(pb, (unsigned)di, now), now);
		}
}

/* ---- one batch ---- */

/* Submits the write of task t's block (buf, read from its source) to its
 * destination; 1 if submitted. */
static unsigned write_dst(struct pb *pb, struct batch_io *b, struct io_tag *tag,
			  const struct cw_mover_task *t, void *buf, struct cw_mover_outcome *out,
			  bool *wrote)
{
	int r = batch_submit(pb, b, tag, t->dst_disk_id, CW_IO_WRITE, t->dst_offset, t->length,
			     buf);

	if (r < 0)
		out->write_err = r;
	*wrote = r == 0;
	return r == 0;
}

/* Copies the batch's blocks, pipelined, and tells the library. */
static void copy_batch(struct pb *pb, const struct cw_mover_task *t, unsigned n, void **bufs,
		       void **vbufs)
{
	bool got_src[CW_MOVER_DEPTH_MAX] = { false }, wrote[CW_MOVER_DEPTH_MAX] = { false };
	struct batch_io b = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
	struct io_tag tags[CW_MOVER_DEPTH_MAX], sync_tags[CW_MOVER_DEPTH_MAX];
	struct cw_mover_outcome out[CW_MOVER_DEPTH_MAX] = { { 0, 0 } };
	uint32_t sync_disk[CW_MOVER_DEPTH_MAX];
	unsigned nsync = 0;
	int r;

	for (unsigned i = 0; i < n; i++) {
		pb_part_take_disk(pb, t[i].part, t[i].dst_disk_id);
		tags[i].idx = i;
		r = batch_submit(pb, &b, &tags[i], t[i].src_disk_id, CW_IO_READ, t[i].src_offset,
				 t[i].length, bufs[i]);
		if (r < 0)
			out[i].read_err = r;
	}
	lane_unplug();
	/* Each read done: its write; the writes done, the syncs. */
	for (bool syncing = false;;) {
		struct io_event ev[2 * CW_MOVER_DEPTH_MAX];
		unsigned nev, nw = 0, left;

		pthread_mutex_lock(&b.lock);
		while (b.inflight && !b.nq)
			pthread_cond_wait(&b.cond, &b.lock);
		nev = b.nq;
		memcpy(ev, b.q, nev * sizeof(ev[0]));
		b.nq = 0;
		b.inflight -= nev;
		pthread_mutex_unlock(&b.lock);
		for (unsigned e = 0; e < nev; e++) {
			unsigned i = ev[e].idx;

			if (ev[e].op == CW_IO_FSYNC) {
				for (unsigned j = 0; ev[e].err && j < n; j++)
					if (t[j].dst_disk_id == sync_disk[i] && !out[j].read_err &&
					    !out[j].write_err && wrote[j])
						out[j].write_err = ev[e].err;
			} else if (ev[e].op == CW_IO_WRITE) {
				out[i].write_err = ev[e].err;
			} else if (t[i].verify && got_src[i]) {
				/* The destination read: unreadable counts as differing. */
				out[i].differs = ev[e].err || memcmp(bufs[i], vbufs[i], t[i].length);
				if (out[i].differs && t[i].repair)
					nw += write_dst(pb, &b, &tags[i], &t[i], bufs[i], &out[i],
							&wrote[i]);
			} else if (ev[e].err) {
				out[i].read_err = ev[e].err;
			} else if (t[i].verify) {
				got_src[i] = true;
				r = batch_submit(pb, &b, &tags[i], t[i].dst_disk_id, CW_IO_READ,
						 t[i].dst_offset, t[i].length, vbufs[i]);
				if (r < 0)
					out[i].differs = true;
				nw += r == 0;
			} else {
				nw += write_dst(pb, &b, &tags[i], &t[i], bufs[i], &out[i], &wrote[i]);
			}
		}
		if (nw)
			lane_unplug();
		pthread_mutex_lock(&b.lock);
		left = b.inflight + b.nq;
		pthread_mutex_unlock(&b.lock);
		if (left)
			continue;
		if (syncing)
			break;
		/* One fdatasync per destination disk, once its writes are done. */
		syncing = true;
		for (unsigned i = 0; i < n; i++) {
			unsigned k;

			if (out[i].read_err || out[i].write_err || !wrote[i])
				continue;
			for (k = 0; k < nsync && sync_disk[k] != t[i].dst_disk_id; k++)
				;
			if (k == nsync)
				sync_disk[nsync++] = t[i].dst_disk_id;
		}
		for (unsigned k = 0; k < nsync; k++) {
			sync_tags[k].idx = k;
			r = batch_submit(pb, &b, &sync_tags[k], sync_disk[k], CW_IO_FSYNC, 0, 0, NULL);
			for (unsigned i = 0; r < 0 && i < n; i++)
				if (t[i].dst_disk_id == sync_disk[k] && !out[i].read_err && wrote[i])
					out[i].write_err = r;
		}
		if (!nsync)
			break;
		lane_unplug();
	}
	for (unsigned i = 0; i < n; i++) {
		if (out[i].read_err < 0)
			cwd_log(LOG_ERR, "move %" PRIu64 ": block %" PRIu64 " of its partition does "
				"not read from disk %u (%s): it stays where it is", t[i].move_id,
				t[i].block, t[i].src_disk_id, strerror(-out[i].read_err));
		else if (out[i].write_err < 0)
			cwd_log(LOG_ERR, "move %" PRIu64 ": writing block %" PRIu64 " to disk %u "
				"failed (%s): the move pauses", t[i].move_id, t[i].block,
				t[i].dst_disk_id, strerror(-out[i].write_err));
		else if (out[i].differs)
			cwd_log(LOG_WARNING, "scrub %" PRIu64 ": copy %u of block %" PRIu64 " (disk %u) "
				"differs from the copy on disk %u%s", t[i].move_id, t[i].copy,
				t[i].block, t[i].dst_disk_id, t[i].src_disk_id,
				t[i].repair ? ": rewritten from it" : "");
	}
	if (cw_mover_copied_batch(pb->pool, out, n) < 0)
		cwd_log(LOG_ERR, "move %" PRIu64 ": the mover lost its batch", t[0].move_id);
	pthread_cond_destroy(&b.cond);
	pthread_mutex_destroy(&b.lock);
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
	unsigned depth = pb->cfg->mover_depth ? pb->cfg->mover_depth : 1;
	void *bufs[CW_MOVER_DEPTH_MAX] = { NULL }, *vbufs[CW_MOVER_DEPTH_MAX] = { NULL };
	struct cw_mover_task t[CW_MOVER_DEPTH_MAX];
	_cleanup_free_ struct pace *pc = calloc(1, sizeof(*pc));
	bool logged_idle = true;

	for (unsigned i = 0; i < depth && pc; i++)
		if (posix_memalign(&bufs[i], 4096, pb->block_size) != 0)
			bufs[i] = NULL;
		else if (posix_memalign(&vbufs[i], 4096, pb->block_size) != 0) {
			free(bufs[i]);
			bufs[i] = vbufs[i] = NULL;
		}
	if (!pc || !bufs[depth - 1]) {
		cwd_log(LOG_ERR, "the mover has no memory for %u blocks: moves do not run", depth);
		goto out;
	}
	while (!atomic_load(&pb->mover_stop)) {
		unsigned n = 0;
		int r = cw_mover_next_batch(pb->pool, t, depth, &n);

		if (r < 0) {
			cwd_log(LOG_ERR, "the mover: %s", strerror(-r));
			idle_wait(pb, MOVER_IDLE_S * CW_NS_PER_S);
			continue;
		}
		switch (t[0].action) {
		case CW_MOVER_IDLE:
			if (pb_cache_work(pb, bufs[0]))
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
			pace_wait(pb, pc, t, n);
			copy_batch(pb, t, n, bufs, vbufs);
			pace_after(pb, pc, t, n);
			break;
		}
	}
out:
	for (unsigned i = 0; i < depth; i++) {
		free(bufs[i]);
		free(vbufs[i]);
	}
	return NULL;
}

int pb_mover_start(struct pb *pb)
{
	struct pbx *x = calloc(1, sizeof(*x));
	int r;

	if (!x)
		return -ENOMEM;
	x->pb = pb;
	snprintf(x->name, sizeof(x->name), "(mover)");
	pb_client_init(pb, x, &x->main, NULL);
	atomic_init(&x->can_punch, false);
	pb->mover_x = x;
	pthread_mutex_init(&pb->mover_lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&pb->mover_cond, &ca);
	pthread_condattr_destroy(&ca);
	r = -pthread_create(&pb->mover_thread, NULL, mover_main, pb);
	if (r == 0)
		thread_name(pb->mover_thread, "cw-mover");
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
	/* pb->mover_x stays until the lanes stopped (pb_free): a lane may
	 * still be finishing the request whose completion let the mover
	 * go, and that request points at it. */
}
