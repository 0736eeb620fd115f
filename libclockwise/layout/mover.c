/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The mover: journalled moves (journal.c) carried out one block at a time
 * under live I/O, in five phases (clockwise/mover.h), and the I/O gate
 * that makes it safe.
 *
 * The gate is an epoch counter per partition in the manner of sleepable
 * RCU: every I/O increments the in-flight count of the current epoch's
 * parity before it maps, checks that the epoch did not change meanwhile
 * (else it retries on the new one), and decrements it when done.  The
 * mover "drains" by bumping the epoch and waiting for the old parity's
 * count to reach 0.  With sequentially consistent operations, an I/O
 * either incremented before the bump (the mover waits for it) or sees the
 * new epoch and with it everything the mover stored before the bump (the
 * copy slot, the new mapping word).  Hence:
 *   - after the drain that follows publishing the copy slot, every write
 *     that can reach the source sees the slot, mirrors itself to the
 *     destination (cw_part_write_mirror) and marks the slot dirty;
 *   - a copy that no write overlapped (the slot stayed clean from before
 *     the copy's read to after its sync) equals the source, and with the
 *     mirrored writes the destination stays equal to it up to the switch;
 *   - after the drain that follows the switch, no I/O uses the source:
 *     only then is it freed (and only then is the slot cleared, so a
 *     write that mapped the source before the switch still mirrors).
 * Only the mover bumps a partition's epoch, and it waits for each drain
 * before the next bump, so two parities suffice.
 *
 * The state machine is pure bookkeeping with no I/O and no clock: the
 * daemon and cwsim drive the same code.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "layout/layout-internal.h"

/* A block rewritten faster than it can be copied this many times in a
 * row pauses its move, with the reason. */
#define MOVER_RETRIES 64

/* ---- the I/O gate ---- */

unsigned cw_part_io_begin(struct cw_part *p)
{
	for (;;) {
		uint64_t e = atomic_load(&p->io_epoch);

		atomic_fetch_add(&p->io_active[e & 1], 1);
		if (atomic_load(&p->io_epoch) == e)
			return (unsigned)(e & 1);
		atomic_fetch_sub(&p->io_active[e & 1], 1);
	}
}

void cw_part_io_end(struct cw_part *p, unsigned ticket)
{
	atomic_fetch_sub(&p->io_active[ticket & 1], 1);
}

/* Starts a drain: I/O begun from now on counts in the other parity. */
static unsigned gate_bump(struct cw_part *p)
{
	return (unsigned)(atomic_fetch_add(&p->io_epoch, 1) & 1);
}

static bool gate_drained(struct cw_part *p, unsigned parity)
{
	return atomic_load(&p->io_active[parity]) == 0;
}

int cw_part_write_mirror(struct cw_part *p, uint64_t offset, const struct cw_extent *ext,
			 uint64_t *ret_skip, struct cw_extent *ret_mirror)
{
	uint64_t cb = atomic_load(&p->copy_block), src, dst, bs, lo, hi, blo, bhi;
	uint64_t phys_blo;

	if (!cb)
		return 0;
	bs = UINT64_C(1) << p->bshift;
	blo = (cb - 1) << p->bshift;
	bhi = blo + bs;
	lo = CW_MAX(offset, blo);
	hi = CW_MIN(offset + ext->length, bhi);
	if (lo >= hi)
		return 0;
	src = atomic_load(&p->copy_src);
	dst = atomic_load(&p->copy_dst);
	/* Where the extent puts the block's first byte: the source, unless
	 * the mapping already switched to the destination. */
	phys_blo = ext->phys_offset + blo - offset;
	if (ext->disk_id != ENTRY_DISK(src) || phys_blo != ENTRY_PBLOCK(src) << p->bshift)
		return 0;
	atomic_store(&p->copy_dirty, true);
	*ret_skip = lo - offset;
	ret_mirror->disk_id = ENTRY_DISK(dst);
	ret_mirror->phys_offset = (ENTRY_PBLOCK(dst) << p->bshift) + (lo - blo);
	ret_mirror->length = hi - lo;
	return 1;
}

static void slot_publish(struct cw_part *p, const struct jstep *st)
{
	atomic_store(&p->copy_src, st->src);
	atomic_store(&p->copy_dst, st->dst);
	atomic_store(&p->copy_dirty, false);
	atomic_store(&p->copy_block, st->block + 1);
}

static void slot_clear(struct cw_part *p)
{
	atomic_store(&p->copy_block, 0);
}

/* ---- the state machine ---- */

/* Leaves the block in flight: the slot is cleared, and free_entry (if
 * any) is given back once the I/O that might use it drained. */
static void step_leave(struct cw_pool *pool, uint64_t free_entry)
{
	struct mover *mv = &pool->mover;

	slot_clear(mv->jm->part);
	mv->parity = gate_bump(mv->jm->part);
	mv->free_entry = free_entry;
	mv->phase = MV_DRAIN_FREE;
}

static void pause_with(struct cw_pool *pool, struct jmove *jm, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void pause_with(struct cw_pool *pool, struct jmove *jm, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	/* If even the journal cannot say so, the move stops in memory and
	 * runs again at the next open. */
	if (lay_journal_set_state(pool, jm, CW_MOVE_PAUSED, why) < 0) {
		jm->info.state = CW_MOVE_PAUSED;
		snprintf(jm->info.error, sizeof(jm->info.error), "%s", why);
	}
}

/* The block in flight stays where it is (row: failed or skipped) and
 * its destination is given back once drained; if even that cannot be
 * journalled, the move pauses with the block still planned. */
static void step_drop(struct cw_pool *pool, int row)
{
	struct mover *mv = &pool->mover;

	if (lay_journal_step(pool, mv->jm, &mv->cur, row) < 0) {
		pause_with(pool, mv->jm, "journalling the %s block %llu failed",
			   row == ROW_FAILED ? "unreadable" : "changed",
			   (unsigned long long)mv->cur.block);
		step_leave(pool, 0);
	} else {
		mv->jm->next++;
		step_leave(pool, mv->cur.dst);
	}
}

static bool disk_present(const struct cw_pool *pool, uint32_t id)
{
	return id >= 1 && id <= CW_DISKS_MAX && pool->disks[id] &&
	       pool->disks[id]->state == CW_DISK_PRESENT;
}

static void fill_task(const struct cw_pool *pool, struct cw_mover_task *t)
{
	const struct mover *mv = &pool->mover;

	*t = (struct cw_mover_task){
		.action = CW_MOVER_COPY,
		.move_id = mv->jm->info.id,
		.part = mv->jm->part,
		.block = mv->cur.block,
		.src_disk_id = ENTRY_DISK(mv->cur.src),
		.src_offset = ENTRY_PBLOCK(mv->cur.src) << pool->bshift,
		.dst_disk_id = ENTRY_DISK(mv->cur.dst),
		.dst_offset = ENTRY_PBLOCK(mv->cur.dst) << pool->bshift,
		.length = pool->block_size,
		.again = mv->retries > 0,
	};
}

/* Finishes moves that have nothing left; true if jm went. */
static bool finish_if_done(struct cw_pool *pool, struct jmove *jm)
{
	if (jm->next < jm->nsteps || lay_mover_in_flight(pool, jm) ||
	    (pool->mover.jm == jm && pool->mover.phase == MV_DRAIN_FREE))
		return false;
	if (jm->info.state == CW_MOVE_RUNNING && lay_journal_set_state(pool, jm, CW_MOVE_DONE, NULL) < 0)
		return false;
	if (jm->info.state != CW_MOVE_DONE && jm->info.state != CW_MOVE_CANCELLED)
		return false;
	if (pool->mover.jm == jm)
		pool->mover.jm = NULL;
	lay_jmove_unlink(pool, jm);
	lay_jmove_free(jm);
	return true;
}

/* Whether the step's block is still where it was planned from (a shrink
 * may have taken it away). */
static bool still_mapped(struct cw_part *p, const struct jstep *st)
{
	return st->block < atomic_load_explicit(&p->nblocks, memory_order_relaxed) &&
	       lay_entry(p, st->block) == st->src;
}

/* Starts the next block of a running move: false if there is none. */
static bool step_begin(struct cw_pool *pool)
{
	struct mover *mv = &pool->mover;

	for (struct jmove *jm = pool->jmoves, *nx; jm; jm = nx) {
		struct jstep st;
		struct cw_part *p = jm->part;

		nx = jm->next_move;
		if (finish_if_done(pool, jm) || jm->info.state != CW_MOVE_RUNNING ||
		    jm->next >= jm->nsteps)
			continue;
		st = jm->steps[jm->next];
		if (!disk_present(pool, ENTRY_DISK(st.dst)) || !disk_present(pool, ENTRY_DISK(st.src))) {
			pause_with(pool, jm, "disk %u is missing", disk_present(pool, ENTRY_DISK(st.dst))
				   ? ENTRY_DISK(st.src) : ENTRY_DISK(st.dst));
			continue;
		}
		mv->jm = jm;
		mv->cur = st;
		mv->retries = 0;
		if (!still_mapped(p, &st)) {
			/* Shrunk away (or changed) since it was planned. */
			if (lay_journal_step(pool, jm, &st, ROW_SKIPPED) < 0) {
				pause_with(pool, jm, "journalling a skipped block failed");
				mv->jm = NULL;
				continue;
			}
			jm->next++;
			lay_free_entries(pool, &st.dst, 1);
			mv->jm = NULL;
			nx = jm;	/* look at it again: maybe finished */
			continue;
		}
		slot_publish(p, &st);
		mv->parity = gate_bump(p);
		mv->phase = MV_DRAIN_COPY;
		return true;
	}
	return false;
}

int cw_mover_next(struct cw_pool *pool, struct cw_mover_task *ret)
{
	struct mover *mv = &pool->mover;
	int r = 0;

	pthread_mutex_lock(&pool->lock);
	memset(ret, 0, sizeof(*ret));
	for (;;) {
		if (mv->phase == MV_COPYING) {
			r = -EBUSY;
			break;
		}
		if (mv->phase == MV_NONE && lay_cache_busy(pool)) {
			ret->action = CW_MOVER_WAIT;	/* a cache step holds the gates */
			break;
		}
		if (mv->phase == MV_NONE && !step_begin(pool)) {
			ret->action = CW_MOVER_IDLE;
			break;
		}
		if (!gate_drained(mv->jm->part, mv->parity)) {
			ret->action = CW_MOVER_WAIT;
			ret->move_id = mv->jm->info.id;
			break;
		}
		if (mv->phase == MV_DRAIN_FREE) {
			struct jmove *jm = mv->jm;

			if (mv->free_entry)
				lay_free_entries(pool, &mv->free_entry, 1);
			mv->free_entry = 0;
			mv->phase = MV_NONE;
			finish_if_done(pool, jm);
			mv->jm = NULL;
			continue;
		}
		/* MV_DRAIN_COPY, drained: unless the move stopped meanwhile. */
		if (mv->jm->info.state != CW_MOVE_RUNNING) {
			bool cancelled = mv->jm->info.state == CW_MOVE_CANCELLED;

			if (cancelled)
				mv->jm->next++;
			step_leave(pool, cancelled ? mv->cur.dst : 0);
			continue;
		}
		mv->phase = MV_COPYING;
		fill_task(pool, ret);
		break;
	}
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_mover_copied(struct cw_pool *pool, int read_err, int write_err)
{
	struct mover *mv = &pool->mover;
	struct jmove *jm = mv->jm;
	struct cw_part *p;
	int r = 0;

	pthread_mutex_lock(&pool->lock);
	if (mv->phase != MV_COPYING) {
		r = -EINVAL;
		goto out;
	}
	p = jm->part;
	if (!read_err || write_err)
		jm->info.bytes_copied += pool->block_size;
	if (jm->info.state != CW_MOVE_RUNNING) {
		bool cancelled = jm->info.state == CW_MOVE_CANCELLED;

		if (cancelled)
			jm->next++;
		step_leave(pool, cancelled ? mv->cur.dst : 0);
	} else if (write_err) {
		pause_with(pool, jm, "writing block %llu to disk %u: %s",
			   (unsigned long long)mv->cur.block, ENTRY_DISK(mv->cur.dst),
			   strerror(write_err < 0 ? -write_err : write_err));
		step_leave(pool, 0);
	} else if (read_err || !still_mapped(p, &mv->cur)) {
		step_drop(pool, read_err ? ROW_FAILED : ROW_SKIPPED);
	} else if (atomic_exchange(&p->copy_dirty, false)) {
		/* A write overlapped the copy: once it is done, copy again. */
		if (++mv->retries > MOVER_RETRIES) {
			pause_with(pool, jm, "block %llu is rewritten faster than it can be copied",
				   (unsigned long long)mv->cur.block);
			step_leave(pool, 0);
		} else {
			mv->parity = gate_bump(p);
			mv->phase = MV_DRAIN_COPY;
		}
	} else if (lay_journal_step(pool, jm, &mv->cur, ROW_MOVED) < 0) {
		pause_with(pool, jm, "journalling the switch of block %llu failed",
			   (unsigned long long)mv->cur.block);
		step_leave(pool, 0);
	} else {
		jm->next++;
		lay_part_store(p, mv->cur.block, mv->cur.dst);
		p->gen++;
		lay_part_update_available(p);
		/* The slot stays until the drain: a write that mapped the
		 * source before the switch still mirrors itself. */
		mv->parity = gate_bump(p);
		mv->free_entry = mv->cur.src;
		mv->phase = MV_DRAIN_FREE;
	}
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

bool cw_mover_busy(struct cw_pool *pool)
{
	bool busy;

	pthread_mutex_lock(&pool->lock);
	busy = pool->mover.phase != MV_NONE;
	for (struct jmove *jm = pool->jmoves; jm && !busy; jm = jm->next_move)
		busy = jm->info.state == CW_MOVE_RUNNING;
	pthread_mutex_unlock(&pool->lock);
	return busy;
}

