/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The keeper of holes: the one thread that turns a partition's blocks
 * into written blocks or holes (libclockwise/layout/holes.c keeps the
 * state, in the pool database, and says why the database is the truth
 * after a crash).
 *
 * The I/O path stays free of locks: a READ skips holes by a look at the
 * hole bits (zeros, no disk access), a WRITE whose blocks all hold data
 * goes straight to the lanes.  Only a WRITE that touches a hole, a TRIM
 * and a WRITE_ZEROES come here, by one lock-free push.  This thread takes
 * the whole queue at once and, for the batch:
 *
 *   1. zeroes every hole a write touches but does not cover (punching it
 *      where the disk can, else writing zeros), so the bytes around the
 *      write read as zeros once the block holds data, and syncs those
 *      disks;
 *   2. records the batch's changes in one transaction: blocks written,
 *      and the whole blocks a TRIM or a WRITE_ZEROES without NO_HOLE
 *      covers as holes;
 *   3. then, in arrival order, books the writes (their replies follow
 *      the lanes as usual), punches the space of the new holes and of
 *      the partial blocks a TRIM or zero covers, and answers the rest.
 *
 * So a write to a hole is acknowledged after its block is marked written
 * and never shows stale bytes, and a block is marked a hole before its
 * space is given back: after a kill -9 the database never hides an
 * acknowledged write and never shows bytes of a block it calls a hole.
 * A batch stops before a request that touches a block an earlier one of
 * it changes the other way (a write and a trim of one block in flight
 * together): the next batch then sees the first's outcome.
 *
 * Costs: one commit (and a sync of the zeroed disks) per batch, not per
 * request; zeroing by hand happens once per block and only on a disk
 * that cannot punch.  That I/O, and the punches, run here outside the
 * disks' schedules: a stream's first write to a block waits for a commit
 * its admission did not count (writing a reserved range once before it
 * is streamed avoids it).
 */
#include "config.h"

#include <fcntl.h>
#include <linux/falloc.h>

#include "daemon/pool-internal.h"

/* Block ranges one batch records: room for the largest request on the
 * smallest pool blocks (1 GiB in 64 KiB blocks, every other one a hole). */
#define CHANGES_MAX (1u << 15)

static bool is_write(const struct nbdsrv_io *nio)
{
	return nio->op == NBDSRV_IO_WRITE || (nio->op == NBDSRV_IO_ZERO && !nio->may_trim);
}

bool pb_disk_can_punch(const struct disk *d)
{
	/* An image always can (write-zeroes), and a write there would wait
	 * for the image's lock, which after a crash the dead owner holds
	 * until the cluster notices, some 30 s: not at start-up. */
	if (d->io_kind == CW_IO_RBD)
		return true;
	/* Block 0 holds the label in its first 4 KiB and nothing after
	 * (pool blocks are 64 KiB at least): punching its second 4 KiB
	 * costs nothing. */
	return cw_io_punch(d->fd, 4096, 4096) == 0;
}

bool pb_range_written(struct pbx *x, uint64_t off, uint64_t len)
{
	uint64_t run;

	return cw_part_allocated(x->part, off, len, &run) == 1 && run == len;
}

int pb_alloc_queue(struct pbx *x, struct nbdsrv_io *nio)
{
	struct pb *pb = x->pb;
	struct alloc_job *j = malloc(sizeof(*j)), *old;

	if (!j)
		return -ENOMEM;
	j->x = x;
	j->nio = nio;
	old = atomic_load_explicit(&pb->alloc_q, memory_order_relaxed);
	do {
		j->next = old;
	} while (!atomic_compare_exchange_weak_explicit(&pb->alloc_q, &old, j,
							memory_order_seq_cst,
							memory_order_relaxed));
	if (!old && atomic_load_explicit(&pb->alloc_sleeping, memory_order_seq_cst)) {
		atomic_store_explicit(&pb->alloc_sleeping, 0, memory_order_seq_cst);
		syscall(SYS_futex, &pb->alloc_sleeping, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	}
	return 0;
}

/* ---- zeroing and punching ---- */

/* Zeros partition bytes [off, off + len) on their disks: a punch where
 * the disk can (may_punch), else zeros written.  The disks written are
 * marked in touched[] (by slot) when it is not NULL. */
static int zero_range(struct pbx *x, uint64_t off, uint64_t len, bool may_punch, bool *touched)
{
	struct pb *pb = x->pb;
	uint64_t end = off + len;

	while (off < end) {
		struct cw_extent e;
		struct disk *d;
		int r, di;

		r = cw_part_map(x->part, off, end - off, &e);
		if (r < 0)
			return r;
		di = pb_disk_index(pb, e.disk_id);
		if (di < 0)
			return di;
		d = &pb->disks[di];
		if (touched)
			touched[di] = true;
		if (!(may_punch && d->can_punch &&
		      cw_io_punch(d->fd, e.phys_offset, e.length) == 0)) {
			for (uint64_t done = 0; done < e.length;) {
				size_t k = (size_t)CW_MIN(e.length - done, (uint64_t)ZERO_CHUNK);
				ssize_t w = cw_io_pwrite(d->fd, pb->zeros, k, e.phys_offset + done);

				if (w == -EINTR)
					continue;
				if (w <= 0) {
					r = w < 0 ? (int)w : -EIO;
					cwd_log(LOG_ERR, "disk %s: zeroing %" PRIu64 " bytes at %" PRIu64
						": %s", d->name, e.length, e.phys_offset, strerror(-r));
					return r;
				}
				done += (uint64_t)w;
			}
		}
		off += e.length;
	}
	return 0;
}

/* Syncs the disks marked in touched[] (by slot).  Not up to pb->ndisks:
 * the control thread changes it; a slot marked was found open through
 * pb_disk_index(), and an export that writes to it keeps it open. */
static int sync_touched(struct pb *pb, const bool *touched)
{
	for (size_t i = 0; i < PB_DISKS_CAP; i++) {
		int r = touched[i] ? cw_io_fdatasync(pb->disks[i].fd) : 0;

		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- one batch ---- */

struct batch {
	struct cw_alloc_change ch[CHANGES_MAX];
	size_t n;
	bool zeroed[PB_DISKS_CAP];	/* disks written by step 1 */
	bool any_zeroed;
};

/* Block b of part is marked written by a change of this batch. */
static bool batch_writes(const struct batch *bt, const struct cw_part *part, uint64_t b)
{
	for (size_t i = 0; i < bt->n; i++)
		if (bt->ch[i].part == part && bt->ch[i].allocated && b >= bt->ch[i].first_block &&
		    b - bt->ch[i].first_block < bt->ch[i].nblocks)
			return true;
	return false;
}

/* A change of this batch touches blocks [b0, b1) of part the other way. */
static bool batch_conflicts(const struct batch *bt, const struct cw_part *part, uint64_t b0,
			    uint64_t b1, bool allocated)
{
	for (size_t i = 0; i < bt->n; i++)
		if (bt->ch[i].part == part && bt->ch[i].allocated != allocated &&
		    b0 < bt->ch[i].first_block + bt->ch[i].nblocks && bt->ch[i].first_block < b1)
			return true;
	return false;
}

static void batch_add(struct batch *bt, struct cw_part *part, uint64_t b0, uint64_t n,
		      bool allocated)
{
	struct cw_alloc_change *last = bt->n ? &bt->ch[bt->n - 1] : NULL;

	if (last && last->part == part && last->allocated == allocated &&
	    last->first_block + last->nblocks == b0) {
		last->nblocks += n;
		return;
	}
	bt->ch[bt->n++] = (struct cw_alloc_change){ .part = part, .first_block = b0, .nblocks = n,
						    .allocated = allocated };
}

/* The whole blocks [ret_b0, ret_b1) inside [off, end). */
static void whole_blocks(uint64_t bs, uint64_t off, uint64_t end, uint64_t *ret_b0,
			 uint64_t *ret_b1)
{
	*ret_b0 = (off + bs - 1) / bs;
	*ret_b1 = end / bs;
	if (*ret_b1 < *ret_b0)
		*ret_b1 = *ret_b0;
}

/* Step 1 for one request: its changes, and the zeroing a write needs.
 * Returns 1 when the request belongs to the next batch, 0, or -errno
 * (the request fails; the batch goes on). */
static int plan_job(struct batch *bt, struct alloc_job *j)
{
	struct nbdsrv_io *nio = j->nio;
	struct pbx *x = j->x;
	uint64_t bs = x->pb->block_size, off = nio->offset, end = off + nio->length;
	uint64_t first = off / bs, last = (end - 1) / bs, b0, b1, run;
	bool w = is_write(nio);
	size_t need;
	int r;

	if (w) {
		b0 = first;
		b1 = last + 1;
	} else {
		whole_blocks(bs, off, end, &b0, &b1);
	}
	need = w ? (size_t)(b1 - b0) : 1;
	if (batch_conflicts(bt, x->part, first, last + 1, w) ||
	    (bt->n && bt->n + need > CHANGES_MAX))
		return 1;
	if (!w) {
		/* Only blocks that hold data become holes: a range all holes
		 * already changes nothing and costs no commit. */
		if (b1 > b0 && !(cw_part_allocated(x->part, b0 * bs, (b1 - b0) * bs, &run) == 0 &&
				 run == (b1 - b0) * bs))
			batch_add(bt, x->part, b0, b1 - b0, false);
		return 0;
	}
	for (uint64_t b = b0; b < b1; b++) {
		if (cw_part_allocated(x->part, b * bs, bs, &run) == 1 || batch_writes(bt, x->part, b))
			continue;
		/* A block the request does not cover has stale bytes
		 * around it: zero the block first. */
		if (off > b * bs || end < (b + 1) * bs) {
			r = zero_range(x, b * bs, bs, true, bt->zeroed);
			if (r < 0)
				return r;
			bt->any_zeroed = true;
		}
		if (bt->n == CHANGES_MAX)
			return -ENOSPC;	/* cannot happen: need was checked */
		batch_add(bt, x->part, b, 1, true);
	}
	return 0;
}

/* Step 3 for a TRIM or a WRITE_ZEROES that may leave holes. */
static int finish_dealloc(struct alloc_job *j)
{
	struct nbdsrv_io *nio = j->nio;
	struct pbx *x = j->x;
	struct pb *pb = x->pb;
	uint64_t bs = pb->block_size, off = nio->offset, end = off + nio->length, b0, b1, run;
	bool zero = nio->op == NBDSRV_IO_ZERO, *touched = NULL;
	int r = 0;

	whole_blocks(bs, off, end, &b0, &b1);
	/* The new holes' space goes back to the disks, where they can. */
	if (b1 > b0 && atomic_load_explicit(&x->can_punch, memory_order_relaxed))
		(void)zero_range(x, b0 * bs, (b1 - b0) * bs, true, NULL);
	if (nio->fua) {
		touched = calloc(PB_DISKS_CAP, sizeof(*touched));
		if (!touched)
			return -ENOMEM;
	}
	/* The partial blocks at the ends: a zero must leave zeros where
	 * they hold data; a trim gives their space back if it can. */
	for (int side = 0; side < 2 && r == 0; side++) {
		uint64_t a = side ? CW_MAX(off, b1 * bs) : off;
		uint64_t b = side ? end : CW_MIN(end, b0 * bs);

		if (a >= b)
			continue;
		if (cw_part_allocated(x->part, a, b - a, &run) == 0 && run == b - a)
			continue;	/* a hole reads as zeros already */
		if (zero)
			r = zero_range(x, a, b - a, true, touched);
		else if (atomic_load_explicit(&x->can_punch, memory_order_relaxed))
			(void)zero_range(x, a, b - a, true, NULL);
	}
	if (r == 0 && touched)
		r = sync_touched(pb, touched);
	free(touched);
	return r;
}

/* Runs one batch from jobs (in arrival order) and returns the jobs left
 * for the next one. */
static struct alloc_job *run_batch(struct pb *pb, struct batch *bt, struct alloc_job *jobs)
{
	struct alloc_job *j, *done = NULL, **tail = &done, *rest = NULL;
	int r;

	bt->n = 0;
	bt->any_zeroed = false;
	memset(bt->zeroed, 0, sizeof(bt->zeroed));
	while ((j = jobs)) {
		r = plan_job(bt, j);
		if (r == 1) {
			rest = j;
			break;
		}
		jobs = j->next;
		if (r < 0) {
			nbdsrv_io_complete(j->nio, r);
			free(j);
			continue;
		}
		j->next = NULL;
		*tail = j;
		tail = &j->next;
	}
	r = bt->any_zeroed ? sync_touched(pb, bt->zeroed) : 0;
	if (r == 0 && bt->n) {
		r = cw_part_set_allocated(pb->pool, bt->ch, bt->n);
		if (r < 0)
			cwd_log(LOG_ERR, "recording which blocks hold data: %s",
				cw_pool_last_error(pb->pool)->msg);
	}
	for (j = done; j; j = jobs) {
		struct nbdsrv_io *nio = j->nio;
		/* Read before booking: a booked write may complete (and its
		 * request be reused) before the submission returns. */
		bool w = is_write(nio), data = nio->op == NBDSRV_IO_WRITE;
		int e = r;

		jobs = j->next;
		if (e == 0 && w)
			e = j->x->pb->submit(j->x, nio, CW_IO_WRITE, !data);
		else if (e == 0)
			e = finish_dealloc(j);
		/* A booked write completes from its lanes. */
		if (e < 0 || !w)
			nbdsrv_io_complete(nio, e);
		free(j);
	}
	lane_unplug();
	return rest;
}

static void *alloc_main(void *arg)
{
	struct pb *pb = arg;
	struct alloc_job *rest = NULL;
	struct batch *bt = pb->alloc_batch;

	nbdsrv_io_plug();
	for (;;) {
		struct alloc_job *jobs = rest, *taken, *rev = NULL;

		/* Busy before looking at a job: a disk unlisted before this
		 * store is not found by the batch (pb_alloc_quiesce), one
		 * unlisted after it waits for the batch to end. */
		atomic_store_explicit(&pb->alloc_busy, true, memory_order_relaxed);
		atomic_thread_fence(memory_order_seq_cst);
		taken = atomic_exchange_explicit(&pb->alloc_q, NULL, memory_order_seq_cst);
		/* The stack is newest first: reverse it behind what is left. */
		while (taken) {
			struct alloc_job *n = taken->next;

			taken->next = rev;
			rev = taken;
			taken = n;
		}
		if (jobs) {
			struct alloc_job *t = jobs;

			while (t->next)
				t = t->next;
			t->next = rev;
		} else {
			jobs = rev;
		}
		if (jobs) {
			rest = run_batch(pb, bt, jobs);
			nbdsrv_io_unplug_send();
			atomic_fetch_add_explicit(&pb->alloc_batches, 1, memory_order_release);
			atomic_store_explicit(&pb->alloc_busy, false, memory_order_release);
			continue;
		}
		atomic_store_explicit(&pb->alloc_busy, false, memory_order_release);
		if (atomic_load(&pb->alloc_stop))
			break;
		atomic_store_explicit(&pb->alloc_sleeping, 1, memory_order_seq_cst);
		if (!atomic_load_explicit(&pb->alloc_q, memory_order_seq_cst) &&
		    !atomic_load(&pb->alloc_stop))
			syscall(SYS_futex, &pb->alloc_sleeping, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
		atomic_store_explicit(&pb->alloc_sleeping, 0, memory_order_seq_cst);
	}
	return NULL;
}

int pb_alloc_start(struct pb *pb)
{
	int r;

	pb->alloc_batch = malloc(sizeof(struct batch));
	if (!pb->alloc_batch)
		return -ENOMEM;
	r = -pthread_create(&pb->alloc_thread, NULL, alloc_main, pb);
	pb->alloc_started = r == 0;
	if (r < 0) {
		free(pb->alloc_batch);
		pb->alloc_batch = NULL;
	}
	return r;
}

void pb_alloc_quiesce(struct pb *pb)
{
	uint_fast64_t seen;

	if (!pb->alloc_started)
		return;
	atomic_thread_fence(memory_order_seq_cst);
	seen = atomic_load_explicit(&pb->alloc_batches, memory_order_acquire);
	while (atomic_load_explicit(&pb->alloc_busy, memory_order_acquire) &&
	       atomic_load_explicit(&pb->alloc_batches, memory_order_acquire) == seen)
		sched_yield();
}

void pb_alloc_stop(struct pb *pb)
{
	if (!pb->alloc_started)
		return;
	atomic_store(&pb->alloc_stop, true);
	atomic_store_explicit(&pb->alloc_sleeping, 0, memory_order_seq_cst);
	syscall(SYS_futex, &pb->alloc_sleeping, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	pthread_join(pb->alloc_thread, NULL);
	pb->alloc_started = false;
	free(pb->alloc_batch);
	pb->alloc_batch = NULL;
}
