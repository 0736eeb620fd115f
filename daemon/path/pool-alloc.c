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
 *   1. zeroes every hole a write touches but does not cover (punching the
 *      block where the disk can, else writing zeros around the write),
 *      so the bytes around the write read as zeros once the block holds
 *      data;
 *   2. writes the data of the batch's writes, and syncs every disk steps
 *      1 and 2 wrote (with the destinations of blocks being moved and the
 *      partition's cache disks);
 *   3. records the batch's changes in one transaction: blocks written (by
 *      the writes that succeeded), and the whole blocks a TRIM or a
 *      WRITE_ZEROES without NO_HOLE covers as holes;
 *   4. then answers the writes, and, in arrival order, punches the space
 *      of the new holes and of the partial blocks a TRIM or zero covers,
 *      and answers those once that is done.
 *
 * Every disk access of steps 1, 2 and 4 — the zeros, the data, the
 * punches, the syncs — is the daemon's own best-effort I/O through the
 * lanes (pb_submit_internal, pb_flush_internal): on a disk with streams
 * it runs in the slack, charged like any best-effort request, so making
 * and freeing blocks never takes disk time the admission test did not
 * leave.  This thread waits for each step's I/O before the next, so no
 * zeroing of a batch overlaps a write or a punch of another.  The commit
 * of step 3 is the one thing done here, on the pool database's disk.
 *
 * A block freed by one partition and given to another keeps the first's
 * bytes until it is written: so it is marked written only once the bytes
 * a reader will see there (zeros around, the write's data) are on its
 * disks and synced.  A write that fails leaves its new blocks holes (and
 * fails the writes of the batch that share a block with it); a kill -9 or
 * a power cut before the commit leaves holes over whatever reached the
 * disk, which read as zeros; one after it finds the data synced.  So a
 * write to a hole is acknowledged after its block is marked written and
 * never shows stale bytes, and a block is marked a hole before its space
 * is given back: after a crash the database never hides an acknowledged
 * write and never shows bytes of a block it calls a hole, nor another
 * partition's.  A batch stops before a request that touches a block an
 * earlier one of it changes the other way (a write and a trim of one
 * block in flight together): the next batch then sees the first's
 * outcome.
 *
 * Costs: one sync of the disks written and one commit per batch, not per
 * request; zeroing happens once per block.  A stream's first write to a
 * block waits for that batch (best effort, a sync and a commit its
 * admission did not count): writing a reserved range once before it is
 * streamed avoids it.
 */
#include "config.h"

#include <fcntl.h>
#include <linux/falloc.h>

#include "common/futex.h"
#include "daemon/path/pool-internal.h"
#include "daemon/thread-name.h"

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
	if (!old)
		park_wake(&pb->alloc_park);
	return 0;
}

/* ---- the keeper's own I/O, through the lanes ---- */

/* Marks in touched[] (by slot) the disks of the copies in sync of the
 * bytes at off of a partition with copies (the ones its writes reach). */
static int mark_copies(struct pb *pb, const struct cw_part *part, uint64_t off, bool *touched)
{
	struct cw_copy cs[CW_COPIES_MAX];
	uint32_t n = cw_part_copies(part);
	int r = n > 1 ? cw_part_map_copies(part, off, cs) : 0, di;

	for (uint32_t c = 0; r == 0 && n > 1 && c < n; c++)
		if (cs[c].in_sync && (di = pb_disk_index(pb, cs[c].disk_id)) >= 0)
			touched[di] = true;
	return r;
}

/* Marks in touched[] (by slot) the disks that hold partition bytes
 * [off, off + len), every copy's. */
static int mark_disks(struct pbx *x, uint64_t off, uint64_t len, bool *touched)
{
	uint64_t end = off + len;

	while (off < end) {
		struct cw_extent e;
		int r = cw_part_map(x->part, off, end - off, &e), di;

		if (r < 0)
			return r;
		/* With copies, copy 0's disk may be gone: mark_copies
		 * marks those in sync. */
		di = pb_disk_index(x->pb, e.disk_id);
		if (di < 0 && cw_part_copies(x->part) == 1)
			return di;
		if (di >= 0 && cw_part_copies(x->part) == 1)
			touched[di] = true;
		if ((r = mark_copies(x->pb, x->part, off, touched)) < 0)
			return r;
		off += e.length;
	}
	return 0;
}

/* One of the keeper's requests ended: its error goes to the job (the
 * first one kept), and the keeper wakes when none is left. */
static void op_done(void *arg, int err)
{
	struct alloc_job *j = arg;
	struct pb *pb = j->x->pb;	/* j may be gone once the count drops */
	int none = 0;

	if (err)
		atomic_compare_exchange_strong(&j->err, &none, err);
	if (atomic_fetch_sub_explicit(&pb->alloc_inflight, 1, memory_order_acq_rel) == 1)
		cw_futex_wake(&pb->alloc_inflight);
}

static void op_failed(struct alloc_job *j, int err)
{
	atomic_fetch_add_explicit(&j->x->pb->alloc_inflight, 1, memory_order_relaxed);
	op_done(j, err);
}

/* Books bytes [off, off + len) of j's export as op from buf with flags
 * (pb_submit_internal); the outcome goes to j. */
static void io_range(struct alloc_job *j, struct pbx *x, uint64_t off, uint64_t len,
		     enum cw_io_op op, void *buf, unsigned flags)
{
	struct pb *pb = x->pb;
	int r;

	atomic_fetch_add_explicit(&pb->alloc_inflight, 1, memory_order_relaxed);
	r = pb_submit_internal(x, off, len, op, buf, flags, op_done, j);
	if (r < 0) {
		atomic_fetch_sub_explicit(&pb->alloc_inflight, 1, memory_order_relaxed);
		op_failed(j, r);
	}
}

/* A PUNCH (with PB_SUB_ZERO: zeros where a disk cannot punch). */
static void op_range(struct alloc_job *j, struct pbx *x, uint64_t off, uint64_t len,
		     unsigned flags)
{
	io_range(j, x, off, len, CW_IO_PUNCH, NULL, flags);
}

/* Waits until every request booked by io_range or flush_disks ended. */
static void ops_wait(struct pb *pb)
{
	int n;

	/* The lanes' wake-ups and the replies this thread holds go first. */
	lane_unplug();
	nbdsrv_io_unplug_send();
	while ((n = atomic_load_explicit(&pb->alloc_inflight, memory_order_acquire)) != 0)
		cw_futex_wait(&pb->alloc_inflight, n);
}

static void flush_disks(struct alloc_job *j, const bool *touched)
{
	struct pb *pb = j->x->pb;
	int r;

	atomic_fetch_add_explicit(&pb->alloc_inflight, 1, memory_order_relaxed);
	r = pb_flush_internal(j->x, touched, op_done, j);
	if (r < 0) {
		atomic_fetch_sub_explicit(&pb->alloc_inflight, 1, memory_order_relaxed);
		op_failed(j, r);
	}
}

/* ---- one batch ---- */

struct batch {
	struct cw_alloc_change ch[CHANGES_MAX];
	struct alloc_job *owner[CHANGES_MAX];	/* the request each change is for */
	size_t n;
	bool zeroed[PB_DISKS_CAP];	/* disks written by steps 1 and 2 */
	bool any_zeroed;
	struct alloc_job step1;		/* steps 1 and 2's zeros and syncs (x: a job's) */
};

/* Marks in touched[] (by slot) every disk the batch's writes (and step
 * 1's zeros around them) went to: the disks their blocks are on now, for
 * a block being moved its destination (submit.c's split mirrors every
 * write to a block in a copy slot), and the partition's cache disks (a
 * write-back block is written there only).  Done once the writes are
 * done, inside the partition's I/O gate, so it sees the block's copy
 * slot or its mapping switched: a write mirrored after the mover synced
 * the destination (and too late to make the copy dirty, between its
 * last look and the switch) is synced here before step 3 records the
 * block as written.  Without it, a power loss after that commit could
 * leave the destination, which the block maps to from the switch on,
 * without the data.  A kill -9 never could: the page cache keeps it. */
static int mark_written_disks(struct pb *pb, struct alloc_job *done, bool *touched)
{
	uint64_t bs = pb->block_size;

	for (struct alloc_job *j = done; j; j = j->next) {
		struct cw_part *part = j->x->part;
		uint64_t off = j->nio->offset / bs * bs;
		uint64_t end = (j->nio->offset + j->nio->length + bs - 1) / bs * bs;
		uint32_t ids[CW_DISKS_MAX];
		size_t nc;
		unsigned t;
		int di;

		if (!is_write(j->nio))
			continue;
		t = cw_part_io_begin(part);
		nc = cw_part_cache_disks(part, ids);
		for (size_t k = 0; k < nc; k++)
			if ((di = pb_disk_index(pb, ids[k])) >= 0)
				touched[di] = true;
		while (off < end) {
			struct cw_extent e, ms[CW_MOVER_DEPTH_MAX];
			uint64_t skips[CW_MOVER_DEPTH_MAX];
			int r = cw_part_map(part, off, end - off, &e), nm;

			if (r < 0) {
				cw_part_io_end(part, t);
				return r;
			}
			if (cw_part_copies(part) == 1 && (di = pb_disk_index(pb, e.disk_id)) >= 0)
				touched[di] = true;
			(void)mark_copies(pb, part, off, touched);
			nm = cw_part_write_mirrors(part, off, &e, skips, ms, CW_MOVER_DEPTH_MAX);
			for (int k = 0; k < nm; k++)
				if ((di = pb_disk_index(pb, ms[k].disk_id)) >= 0)
					touched[di] = true;
			off += e.length;
		}
		cw_part_io_end(part, t);
	}
	return 0;
}

/* Step 2 for a write: its data (zeros for a WRITE_ZEROES that keeps its
 * blocks), as the daemon's own I/O; the outcome goes to j. */
static void write_data(struct alloc_job *j)
{
	struct nbdsrv_io *nio = j->nio;
	bool data = nio->op == NBDSRV_IO_WRITE;

	io_range(j, j->x, nio->offset, nio->length, CW_IO_WRITE, data ? nio->buf : NULL,
		 data ? 0 : PB_SUB_ZERO);
}

/* Whether j's blocks and change c's overlap. */
static bool job_touches(const struct alloc_job *j, uint64_t bs, const struct cw_alloc_change *c)
{
	uint64_t b0 = j->nio->offset / bs, b1 = (j->nio->offset + j->nio->length - 1) / bs + 1;

	return c->part == j->x->part && b0 < c->first_block + c->nblocks && c->first_block < b1;
}

/* Step 3's part for writes that failed: their changes are dropped (their
 * new blocks stay holes), and a write that shares a block with a dropped
 * change fails too (the block's bytes around it are not all its own or
 * zeros), dropping its changes in turn. */
static void drop_failed(struct pb *pb, struct batch *bt, struct alloc_job *done)
{
	bool again = true;
	size_t k = 0;

	while (again) {
		again = false;
		for (struct alloc_job *j = done; j; j = j->next) {
			if (!is_write(j->nio) || atomic_load(&j->err) < 0)
				continue;
			for (size_t i = 0; i < bt->n; i++) {
				int e = atomic_load(&bt->owner[i]->err);

				if (e < 0 && job_touches(j, pb->block_size, &bt->ch[i])) {
					atomic_store(&j->err, e);
					again = true;
					break;
				}
			}
		}
	}
	for (size_t i = 0; i < bt->n; i++)
		if (atomic_load(&bt->owner[i]->err) >= 0) {
			bt->owner[k] = bt->owner[i];
			bt->ch[k++] = bt->ch[i];
		}
	bt->n = k;
}

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

static void batch_add(struct batch *bt, struct alloc_job *j, uint64_t b0, uint64_t n,
		      bool allocated)
{
	struct cw_alloc_change *last = bt->n ? &bt->ch[bt->n - 1] : NULL;

	if (last && bt->owner[bt->n - 1] == j && last->allocated == allocated &&
	    last->first_block + last->nblocks == b0) {
		last->nblocks += n;
		return;
	}
	bt->owner[bt->n] = j;
	bt->ch[bt->n++] = (struct cw_alloc_change){ .part = j->x->part, .first_block = b0,
						    .nblocks = n, .allocated = allocated };
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

/* Books the zeroing of block [b_off, b_off + bs) around the write
 * [w_off, w_end) (step 1). */
static int zero_block(struct batch *bt, struct pbx *x, uint64_t b_off, uint64_t bs,
		      uint64_t w_off, uint64_t w_end)
{
	uint64_t lo = CW_MAX(w_off, b_off), hi = CW_MIN(w_end, b_off + bs);
	int r = mark_disks(x, b_off, bs, bt->zeroed);

	if (r < 0)
		return r;
	if (!bt->any_zeroed)
		bt->step1.x = x;
	bt->any_zeroed = true;
	if (atomic_load_explicit(&x->can_punch, memory_order_relaxed)) {
		op_range(&bt->step1, x, b_off, bs, PB_SUB_ZERO);
		return 0;
	}
	if (lo > b_off)
		op_range(&bt->step1, x, b_off, lo - b_off, PB_SUB_ZERO);
	if (b_off + bs > hi)
		op_range(&bt->step1, x, hi, b_off + bs - hi, PB_SUB_ZERO);
	return 0;
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
			batch_add(bt, j, b0, b1 - b0, false);
		return 0;
	}
	for (uint64_t b = b0; b < b1; b++) {
		if (cw_part_allocated(x->part, b * bs, bs, &run) == 1 || batch_writes(bt, x->part, b))
			continue;
		/* A block the request does not cover has stale bytes
		 * around it: zero the block first (the whole block where
		 * its disk punches: no stale byte is ever read from it;
		 * else the parts around the write). */
		if (off > b * bs || end < (b + 1) * bs) {
			r = zero_block(bt, x, b * bs, bs, off, end);
			if (r < 0)
				return r;
		}
		if (bt->n == CHANGES_MAX)
			return -ENOSPC;	/* cannot happen: need was checked */
		batch_add(bt, j, b, 1, true);
	}
	return 0;
}

/* Step 3 for a TRIM or a WRITE_ZEROES that may leave holes: books what
 * its blocks need; its outcome goes to j->err. */
static void book_dealloc(struct alloc_job *j)
{
	struct nbdsrv_io *nio = j->nio;
	struct pbx *x = j->x;
	uint64_t bs = x->pb->block_size, off = nio->offset, end = off + nio->length, b0, b1, run;
	bool zero = nio->op == NBDSRV_IO_ZERO;

	whole_blocks(bs, off, end, &b0, &b1);
	/* The new holes' space goes back to the disks, where they can. */
	if (b1 > b0)
		op_range(j, x, b0 * bs, (b1 - b0) * bs, 0);
	/* The partial blocks at the ends: a zero must leave zeros where
	 * they hold data (synced under FUA); a trim gives their space back
	 * if it can. */
	for (int side = 0; side < 2; side++) {
		uint64_t a = side ? CW_MAX(off, b1 * bs) : off;
		uint64_t b = side ? end : CW_MIN(end, b0 * bs);

		if (a >= b)
			continue;
		if (cw_part_allocated(x->part, a, b - a, &run) == 0 && run == b - a)
			continue;	/* a hole reads as zeros already */
		if (zero)
			op_range(j, x, a, b - a, PB_SUB_ZERO | (nio->fua ? PB_SUB_FUA : 0));
		else
			op_range(j, x, a, b - a, 0);
	}
}

/* Runs one batch from jobs (in arrival order) and returns the jobs left
 * for the next one. */
static struct alloc_job *run_batch(struct pb *pb, struct batch *bt, struct alloc_job *jobs)
{
	struct alloc_job *j, *done = NULL, **tail = &done, *rest = NULL, *next;
	bool any_write = false;
	int r;

	bt->n = 0;
	bt->any_zeroed = false;
	bt->step1.x = NULL;
	memset(bt->zeroed, 0, sizeof(bt->zeroed));
	atomic_init(&bt->step1.err, 0);
	/* Step 1: plan, and book the zeroing as it is found. */
	while ((j = jobs)) {
		atomic_init(&j->err, 0);
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
		any_write |= is_write(j->nio);
		j->next = NULL;
		*tail = j;
		tail = &j->next;
	}
	if (bt->any_zeroed)
		ops_wait(pb);
	r = atomic_load(&bt->step1.err);
	/* Step 2: the data once the zeros are there, then the syncs. */
	if (r == 0 && any_write) {
		for (j = done; j; j = j->next) {
			if (!is_write(j->nio))
				continue;
			if (!bt->any_zeroed && !bt->step1.x)
				bt->step1.x = j->x;	/* the syncs' client */
			write_data(j);
		}
		ops_wait(pb);
		r = mark_written_disks(pb, done, bt->zeroed);
		if (r < 0)
			op_failed(&bt->step1, r);
		else
			flush_disks(&bt->step1, bt->zeroed);
		ops_wait(pb);
		r = atomic_load(&bt->step1.err);
	}
	/* Step 3. */
	if (r == 0)
		drop_failed(pb, bt, done);
	if (r == 0 && bt->n) {
		r = cw_part_set_allocated(pb->pool, bt->ch, bt->n);
		if (r < 0)
			cwd_log(LOG_ERR, "recording which blocks hold data: %s",
				cw_pool_last_error(pb->pool)->msg);
	}
	/* Step 4: the writes are done; the punches are booked and waited for. */
	for (j = done; j; j = j->next) {
		if (r < 0)
			atomic_store(&j->err, r);
		else if (!is_write(j->nio))
			book_dealloc(j);
	}
	ops_wait(pb);
	for (j = done; j; j = next) {
		next = j->next;
		nbdsrv_io_complete(j->nio, atomic_load(&j->err));
		free(j);
	}
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
		park_unless(&pb->alloc_park, atomic_load_explicit(&pb->alloc_q, memory_order_seq_cst) ||
					     atomic_load(&pb->alloc_stop),
			    -1);
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
	if (r == 0)
		thread_name(pb->alloc_thread, "cw-alloc");
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
	park_wake_always(&pb->alloc_park);
	pthread_join(pb->alloc_thread, NULL);
	pb->alloc_started = false;
	free(pb->alloc_batch);
	pb->alloc_batch = NULL;
}
