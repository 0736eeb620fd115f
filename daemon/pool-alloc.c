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
 *      data, and syncs those disks;
 *   2. records the batch's changes in one transaction: blocks written,
 *      and the whole blocks a TRIM or a WRITE_ZEROES without NO_HOLE
 *      covers as holes;
 *   3. then, in arrival order, books the writes (their replies follow
 *      the lanes as usual), punches the space of the new holes and of
 *      the partial blocks a TRIM or zero covers, and answers the rest
 *      once that is done.
 *
 * Every disk access of steps 1 and 3 — the zeros, the punches, the syncs
 * — is the daemon's own best-effort I/O through the lanes
 * (pb->submit_internal, pb->flush_internal): on a disk with streams it
 * runs in the slack, charged like any best-effort request, so making and
 * freeing blocks never takes disk time the admission test did not leave.
 * This thread waits for each step's I/O before the next, so no zeroing of
 * a batch overlaps a write or a punch of another.  The commit of step 2
 * is the one thing done here, on the pool database's disk.
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
 * request; zeroing happens once per block.  A stream's first write to a
 * block waits for that batch (best effort and a commit its admission did
 * not count): writing a reserved range once before it is streamed avoids
 * it.
 */
#include "config.h"

#include <fcntl.h>
#include <linux/falloc.h>

#include "daemon/pool-internal.h"
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

/* Marks in touched[] (by slot) the disks that hold partition bytes
 * [off, off + len). */
static int mark_disks(struct pbx *x, uint64_t off, uint64_t len, bool *touched)
{
	uint64_t end = off + len;

	while (off < end) {
		struct cw_extent e;
		int r = cw_part_map(x->part, off, end - off, &e), di;

		if (r < 0)
			return r;
		di = pb_disk_index(x->pb, e.disk_id);
		if (di < 0)
			return di;
		touched[di] = true;
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
		syscall(SYS_futex, &pb->alloc_inflight, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void op_failed(struct alloc_job *j, int err)
{
	atomic_fetch_add_explicit(&j->x->pb->alloc_inflight, 1, memory_order_relaxed);
	op_done(j, err);
}

/* Books bytes [off, off + len) of j's export as op (PUNCH or WRITE of
 * zeros) with flags; the outcome goes to j. */
static void op_range(struct alloc_job *j, struct pbx *x, uint64_t off, uint64_t len,
		     unsigned flags)
{
	struct pb *pb = x->pb;
	int r;

	atomic_fetch_add_explicit(&pb->alloc_inflight, 1, memory_order_relaxed);
	r = pb->submit_internal(x, off, len, CW_IO_PUNCH, NULL, flags, op_done, j);
	if (r < 0) {
		atomic_fetch_sub_explicit(&pb->alloc_inflight, 1, memory_order_relaxed);
		op_failed(j, r);
	}
}

/* Waits until every request booked by op_range or flush_disks ended. */
static void ops_wait(struct pb *pb)
{
	int n;

	/* The lanes' wake-ups and the replies this thread holds go first. */
	lane_unplug();
	nbdsrv_io_unplug_send();
	while ((n = atomic_load_explicit(&pb->alloc_inflight, memory_order_acquire)) != 0)
		syscall(SYS_futex, &pb->alloc_inflight, FUTEX_WAIT_PRIVATE, n, NULL, NULL, 0);
}

static void flush_disks(struct alloc_job *j, const bool *touched)
{
	struct pb *pb = j->x->pb;
	int r;

	atomic_fetch_add_explicit(&pb->alloc_inflight, 1, memory_order_relaxed);
	r = pb->flush_internal(j->x, touched, op_done, j);
	if (r < 0) {
		atomic_fetch_sub_explicit(&pb->alloc_inflight, 1, memory_order_relaxed);
		op_failed(j, r);
	}
}

/* ---- one batch ---- */

struct batch {
	struct cw_alloc_change ch[CHANGES_MAX];
	size_t n;
	bool zeroed[PB_DISKS_CAP];	/* disks written by step 1 */
	bool any_zeroed;
	struct alloc_job step1;		/* step 1's outcome (x: the first job's) */
};

/* Marks in touched[] (by slot) the disks the blocks of the batch's
 * changes are on now and, for a block being moved, its destination:
 * step 1's zeros went there too (pool-backend.c mirrors every write to
 * a block in a copy slot).  Done once the zeros are written, inside the
 * partition's I/O gate, so it sees the block's copy slot or its mapping
 * switched: a zero write mirrored after the mover synced the
 * destination (and too late to make the copy dirty, between its last
 * look and the switch) is synced here before step 2 records the block
 * as written.  Without it, a power loss after that commit could leave
 * the destination, which the block maps to from the switch on, without
 * the zeros.  A kill -9 never could: the page cache keeps them. */
static int mark_moved_disks(struct pb *pb, const struct batch *bt, bool *touched)
{
	uint64_t bs = pb->block_size;

	for (size_t i = 0; i < bt->n; i++) {
		const struct cw_alloc_change *c = &bt->ch[i];
		uint64_t off = c->first_block * bs, end = off + c->nblocks * bs;
		unsigned t;

		if (!c->allocated)
			continue;
		t = cw_part_io_begin(c->part);
		while (off < end) {
			struct cw_extent e, ms[CW_MOVER_DEPTH_MAX];
			uint64_t skips[CW_MOVER_DEPTH_MAX];
			int r = cw_part_map(c->part, off, end - off, &e), di, nm;

			if (r < 0) {
				cw_part_io_end(c->part, t);
				return r;
			}
			if ((di = pb_disk_index(pb, e.disk_id)) >= 0)
				touched[di] = true;
			nm = cw_part_write_mirrors(c->part, off, &e, skips, ms, CW_MOVER_DEPTH_MAX);
			for (int k = 0; k < nm; k++)
				if ((di = pb_disk_index(pb, ms[k].disk_id)) >= 0)
					touched[di] = true;
			off += e.length;
		}
		cw_part_io_end(c->part, t);
	}
	return 0;
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
			batch_add(bt, x->part, b0, b1 - b0, false);
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
		batch_add(bt, x->part, b, 1, true);
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
	int r;

	bt->n = 0;
	bt->any_zeroed = false;
	memset(bt->zeroed, 0, sizeof(bt->zeroed));
	atomic_init(&bt->step1.err, 0);
	/* Step 1: plan, and book the zeroing as it is found. */
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
	if (bt->any_zeroed) {
		ops_wait(pb);
		r = mark_moved_disks(pb, bt, bt->zeroed);
		if (r < 0)
			op_failed(&bt->step1, r);
		if (atomic_load(&bt->step1.err) == 0)
			flush_disks(&bt->step1, bt->zeroed);
		ops_wait(pb);
	}
	r = atomic_load(&bt->step1.err);
	/* Step 2. */
	if (r == 0 && bt->n) {
		r = cw_part_set_allocated(pb->pool, bt->ch, bt->n);
		if (r < 0)
			cwd_log(LOG_ERR, "recording which blocks hold data: %s",
				cw_pool_last_error(pb->pool)->msg);
	}
	/* Step 3: the writes go, the punches are booked and waited for. */
	for (j = done; j; j = j->next) {
		struct nbdsrv_io *nio = j->nio;
		/* Read before booking: a booked write may complete (and its
		 * request be reused) before the submission returns. */
		bool data = nio->op == NBDSRV_IO_WRITE;
		int e;

		atomic_init(&j->err, r);
		if (r < 0)
			continue;
		if (is_write(nio)) {
			e = j->x->pb->submit(j->x, nio, CW_IO_WRITE, !data);
			/* A booked write completes from its lanes. */
			atomic_init(&j->err, e < 0 ? e : 1);
		} else {
			book_dealloc(j);
		}
	}
	ops_wait(pb);
	for (j = done; j; j = next) {
		int e = atomic_load(&j->err);

		next = j->next;
		if (e <= 0)
			nbdsrv_io_complete(j->nio, e);
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
