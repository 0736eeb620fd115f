/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The mover: journalled moves (journal.c) carried out in batches of
 * consecutive blocks under live I/O, each block in five phases
 * (clockwise/mover.h), and the I/O gate that makes it safe.
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
 * A batch gives each of its blocks a slot of its own and runs the phases
 * for all of them at once: one drain after the slots are published, the
 * copies (the caller pipelines them), the switches of the clean blocks in
 * one transaction, one drain, then the sources freed and the dirty blocks
 * copied again.  A block's phases are those above whatever its neighbours
 * do, so the argument holds for each.
 * Only the mover bumps a partition's epoch, and it waits for each drain
 * before the next bump, so two parities suffice.
 *
 * Copies.  A step moves one copy of its block (jstep.copy): writes reach
 * every copy in sync, each piece with the mirrors of its own location
 * (path/split.c), so a moving copy in sync is mirrored like copy 0.  A
 * copy out of sync is not written by clients at all; it is rebuilt: the
 * block is read from another copy in sync (jstep.from, chosen when the
 * batch begins) and the slot's source is that copy's place, so every
 * write to the block — which reaches that copy, being in sync — mirrors
 * itself to the copy being rebuilt and makes the slot dirty.  The
 * argument above then says: a rebuild no write overlapped equals the copy
 * it was read from at its sync, and the mirrored writes keep it equal up
 * to the switch, which marks it in sync (the bit cleared with the
 * journal's row in one transaction, the new place stored first) — so an
 * acknowledged write is never overwritten by older data.  A rebuild in
 * place (src == dst) frees nothing.  The source copy going out of sync
 * meanwhile leaves the block to the next batch, which reads another.
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

#include <clockwise/model.h>

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

/* The mirror of the extent's piece on slot c's block, if it has one. */
static bool slot_mirror(struct cw_part *p, struct copy_slot *c, uint64_t offset,
			const struct cw_extent *ext, uint64_t *ret_skip, struct cw_extent *ret_mirror)
{
	uint64_t cb = atomic_load(&c->block), src, dst, lo, hi, blo, bhi, phys_blo;

	if (!cb)
		return false;
	blo = (cb - 1) << p->bshift;
	bhi = blo + (UINT64_C(1) << p->bshift);
	lo = CW_MAX(offset, blo);
	hi = CW_MIN(offset + ext->length, bhi);
	if (lo >= hi)
		return false;
	src = atomic_load(&c->src);
	dst = atomic_load(&c->dst);
	/* Where the extent puts the block's first byte: the source, unless
	 * the mapping already switched to the destination. */
	phys_blo = ext->phys_offset + blo - offset;
	if (ext->disk_id != ENTRY_DISK(src) || phys_blo != ENTRY_PBLOCK(src) << p->bshift)
		return false;
	atomic_store(&c->dirty, true);
	*ret_skip = lo - offset;
	ret_mirror->disk_id = ENTRY_DISK(dst);
	ret_mirror->phys_offset = (ENTRY_PBLOCK(dst) << p->bshift) + (lo - blo);
	ret_mirror->length = hi - lo;
	return true;
}

int cw_part_write_mirrors(struct cw_part *p, uint64_t offset, const struct cw_extent *ext,
			  uint64_t *ret_skips, struct cw_extent *ret_mirrors, unsigned max)
{
	unsigned ns = atomic_load(&p->copy_nslots), n = 0;
	uint64_t first, last;

	if (!ns || !ext->length)
		return 0;
	first = offset >> p->bshift;
	last = (offset + ext->length - 1) >> p->bshift;
	if (last < atomic_load(&p->copy_lo) || first >= atomic_load(&p->copy_hi))
		return 0;
	for (unsigned i = 0; i < ns && n < max; i++)
		n += slot_mirror(p, &p->copy[i], offset, ext, &ret_skips[n], &ret_mirrors[n]);
	/* In the extent's order: the slots are in block order, but a block
	 * copied again keeps its slot. */
	for (unsigned i = 1; i < n; i++)
		for (unsigned j = i; j > 0 && ret_skips[j] < ret_skips[j - 1]; j--) {
			uint64_t ts = ret_skips[j];
			struct cw_extent te = ret_mirrors[j];

			ret_skips[j] = ret_skips[j - 1];
			ret_mirrors[j] = ret_mirrors[j - 1];
			ret_skips[j - 1] = ts;
			ret_mirrors[j - 1] = te;
		}
	return (int)n;
}

int cw_part_write_mirror(struct cw_part *p, uint64_t offset, const struct cw_extent *ext,
			 uint64_t *ret_skip, struct cw_extent *ret_mirror)
{
	return cw_part_write_mirrors(p, offset, ext, ret_skip, ret_mirror, 1);
}

/* ---- the state machine ---- */

static void pause_with(struct cw_pool *pool, struct jmove *jm, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void pause_with(struct cw_pool *pool, struct jmove *jm, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	if (jm->info.state != CW_MOVE_RUNNING)
		return;	/* the first reason stays */
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

static bool disk_present(const struct cw_pool *pool, uint32_t id)
{
	return id >= 1 && id <= CW_DISKS_MAX && pool->disks[id] &&
	       pool->disks[id]->state == CW_DISK_PRESENT;
}

static bool scrubbing(const struct jmove *jm)
{
	return jm->info.kind == CW_MOVE_SCRUB || jm->info.kind == CW_MOVE_REPAIR;
}

static void fill_task(const struct cw_pool *pool, const struct mover_block *b,
		      struct cw_mover_task *t)
{
	const struct mover *mv = &pool->mover;

	*t = (struct cw_mover_task){
		.action = CW_MOVER_COPY,
		.move_id = mv->jm->info.id,
		.part = mv->part,
		.block = b->st.block,
		.src_disk_id = ENTRY_DISK(b->st.from),
		.src_offset = ENTRY_PBLOCK(b->st.from) << pool->bshift,
		.dst_disk_id = ENTRY_DISK(b->st.dst),
		.dst_offset = ENTRY_PBLOCK(b->st.dst) << pool->bshift,
		.length = pool->block_size,
		.again = b->retries > 0,
		.copy = b->st.copy,
		.rebuild = b->st.from != b->st.src && !scrubbing(mv->jm),
		.verify = scrubbing(mv->jm),
		.repair = mv->jm->info.kind == CW_MOVE_REPAIR,
	};
}

/* Finishes moves that have nothing left; true if jm went. */
static bool finish_if_done(struct cw_pool *pool, struct jmove *jm)
{
	if (jm->next < jm->nsteps || lay_mover_in_flight(pool, jm))
		return false;
	if (jm->info.state == CW_MOVE_RUNNING && lay_journal_set_state(pool, jm, CW_MOVE_DONE, NULL) < 0)
		return false;
	if (jm->info.state != CW_MOVE_DONE && jm->info.state != CW_MOVE_CANCELLED)
		return false;
	if (pool->mover.jm == jm)
		pool->mover.jm = NULL;
	lay_jmove_unlink(pool, jm);
	/* A crash's dirty regions waited for it (rebuild.c). */
	lay_rebuild_pending(pool, jm->part);
	lay_jmove_free(jm);
	return true;
}

/* Whether the step's block is still where it was planned from (a shrink
 * may have taken it away). */
static bool still_mapped(struct cw_part *p, const struct jstep *st)
{
	return st->block < atomic_load_explicit(&p->nblocks, memory_order_relaxed) &&
	       lay_copy_entry(p, st->copy, st->block) == st->src;
}

static bool copy_stale(const struct cw_part *p, unsigned c, uint64_t b)
{
	return p->copies > 1 && (atomic_load(lay_stale_word(p, c, b)) >> (b & 63) & 1);
}

/* Where step st's block is read: its own copy while that is in sync on a
 * present disk (a move), else the first other copy in sync on a present
 * disk (a rebuild, and always for a scrub: the reference); 0 when none
 * is. */
static uint64_t step_from(const struct cw_pool *pool, const struct jmove *jm,
			  const struct jstep *st)
{
	const struct cw_part *p = jm->part;

	if (scrubbing(jm) && copy_stale(p, st->copy, st->block))
		return 0;	/* went out of sync: nothing to compare */
	if (!scrubbing(jm) && !copy_stale(p, st->copy, st->block) &&
	    disk_present(pool, ENTRY_DISK(st->src)))
		return st->src;
	for (unsigned c = 0; c < p->copies && p->copies > 1; c++) {
		uint64_t e = lay_copy_entry(p, c, st->block);

		if (c != st->copy && !copy_stale(p, c, st->block) && disk_present(pool, ENTRY_DISK(e)))
			return e;
	}
	return 0;
}

/* A mirrored block's copy at word `from` did not read: it is marked out
 * of sync (durably, so the switch can never trust it), true if done. */
static bool read_copy_failed(struct cw_part *p, uint64_t b, uint64_t from)
{
	for (unsigned c = 0; c < p->copies && p->copies > 1; c++)
		if (lay_copy_entry(p, c, b) == from)
			return lay_copy_set_stale(p, c, b, 1, true) == 0;
	return false;
}

/* Whether the copy at word `from` of block b is still one in sync. */
static bool from_in_sync(const struct cw_part *p, uint64_t b, uint64_t from)
{
	for (unsigned c = 0; c < p->copies; c++)
		if (lay_copy_entry(p, c, b) == from)
			return !copy_stale(p, c, b);
	return false;
}

static void slot_clear(struct cw_part *p, unsigned i)
{
	atomic_store(&p->copy[i].block, 0);
}

/* Skips the move's next step, its block changed since it was planned
 * (ROW_SKIPPED) or no copy of it can be read (ROW_FAILED); false if it
 * could not be journalled (the move paused). */
static bool skip_changed(struct cw_pool *pool, struct jmove *jm, int row)
{
	struct jstep st = jm->steps[jm->next];

	st.from = st.src;
	if (lay_journal_step(pool, jm, &st, row) < 0) {
		pause_with(pool, jm, "journalling a skipped block failed");
		return false;
	}
	jm->next++;
	if (st.dst != st.src)
		lay_free_entries(pool, &st.dst, 1);
	return true;
}

/* Starts a batch of at most max blocks of a running move: false if
 * there is none.  The batch is the steps from jm->next on whose blocks
 * are still mapped and whose disks are present, each in its slot. */
static bool batch_begin(struct cw_pool *pool, unsigned max)
{
	struct mover *mv = &pool->mover;

	for (struct jmove *jm = pool->jmoves, *nx; jm; jm = nx) {
		struct cw_part *p = jm->part;
		const struct jstep *st;
		unsigned n = 0;

		nx = jm->next_move;
		if (finish_if_done(pool, jm) || jm->info.state != CW_MOVE_RUNNING ||
		    jm->next >= jm->nsteps)
			continue;
		st = &jm->steps[jm->next];
		if (!still_mapped(p, st)) {
			/* Shrunk away (or changed) since it was planned. */
			if (skip_changed(pool, jm, ROW_SKIPPED))
				nx = jm;	/* look at it again: maybe finished */
			continue;
		}
		if (p->copies > 1 && !step_from(pool, jm, st) && disk_present(pool, ENTRY_DISK(st->dst))) {
			/* No copy of the block left to read: it is lost (a
			 * scrub's copy out of sync now: nothing to compare). */
			if (skip_changed(pool, jm, scrubbing(jm) ? ROW_SKIPPED : ROW_FAILED))
				nx = jm;
			continue;
		}
		if (!disk_present(pool, ENTRY_DISK(st->dst)) || !step_from(pool, jm, st)) {
			pause_with(pool, jm, "disk %u is missing", disk_present(pool, ENTRY_DISK(st->dst))
				   ? ENTRY_DISK(st->src) : ENTRY_DISK(st->dst));
			continue;
		}
		for (; n < max && jm->next + n < jm->nsteps; n++) {
			uint64_t from;

			st = &jm->steps[jm->next + n];
			from = step_from(pool, jm, st);
			if (n && (!disk_present(pool, ENTRY_DISK(st->dst)) || !from ||
				  !still_mapped(p, st)))
				break;	/* for the next batch to deal with */
			mv->b[n] = (struct mover_block){ .st = *st, .state = MB_COPY, .row = -1 };
			mv->b[n].st.from = from;
			/* Writes to the place read mirror themselves to dst. */
			atomic_store(&p->copy[n].src, from);
			atomic_store(&p->copy[n].dst, st->dst);
			atomic_store(&p->copy[n].dirty, false);
			atomic_store(&p->copy[n].block, st->block + 1);
		}
		mv->jm = jm;
		mv->part = p;
		mv->n = n;
		/* The steps are in block order. */
		atomic_store(&p->copy_lo, mv->b[0].st.block);
		atomic_store(&p->copy_hi, mv->b[n - 1].st.block + 1);
		atomic_store(&p->copy_nslots, n);
		mv->parity = gate_bump(p);
		mv->phase = MV_DRAIN;
		return true;
	}
	return false;
}

/* The batch is over: blocks left planned stay steps of the move, before
 * those not yet begun, in their order. */
static void batch_end(struct cw_pool *pool)
{
	struct mover *mv = &pool->mover;
	struct jmove *jm = mv->jm;
	size_t left = 0;

	for (unsigned i = 0; i < mv->n; i++)
		left += mv->b[i].state == MB_LEFT;
	for (unsigned i = 0, k = 0; i < mv->n; i++)
		if (mv->b[i].state == MB_LEFT)
			jm->steps[jm->next + mv->n - left + k++] = mv->b[i].st;
	jm->next += mv->n - left;
	atomic_store(&mv->part->copy_nslots, 0);
	mv->phase = MV_NONE;
	mv->n = 0;
	finish_if_done(pool, jm);
	mv->jm = NULL;
	mv->part = NULL;
}

/* The gate drained: gives back what waited for it, stops the blocks of a
 * move that stopped, and says what comes next: true when blocks are
 * to copy (MV_COPYING), false when the batch waits again or is over. */
static bool batch_settle(struct cw_pool *pool)
{
	struct mover *mv = &pool->mover;
	enum cw_move_state st = mv->jm->info.state;
	bool drain = false, copy = false;

	for (unsigned i = 0; i < mv->n; i++) {
		struct mover_block *b = &mv->b[i];

		if (b->state == MB_MOVED) {
			/* No I/O uses the source any more, nor mirrors. */
			if (b->st.src != b->st.dst)
				lay_free_entries(pool, &b->st.src, 1);
			slot_clear(mv->part, i);
			b->state = MB_END;
		} else if (b->state == MB_DROP && b->cleared) {
			if (b->st.src != b->st.dst)
				lay_free_entries(pool, &b->st.dst, 1);
			b->state = MB_END;
		}
		if (b->state == MB_COPY && st != CW_MOVE_RUNNING) {
			if (st == CW_MOVE_CANCELLED)
				b->state = MB_DROP;
			else
				b->state = MB_LEFT;
		}
		if (b->state == MB_LEFT)
			slot_clear(mv->part, i);
		if (b->state == MB_DROP && !b->cleared) {
			/* Writes that mirror into dst must end before it goes. */
			slot_clear(mv->part, i);
			b->cleared = true;
			drain = true;
		}
		copy |= b->state == MB_COPY;
	}
	if (drain) {
		mv->parity = gate_bump(mv->part);
		return false;
	}
	if (copy) {
		mv->phase = MV_COPYING;
		return true;
	}
	batch_end(pool);
	return false;
}

int cw_mover_next_batch(struct cw_pool *pool, struct cw_mover_task *ret, unsigned max,
			unsigned *ret_n)
{
	struct mover *mv = &pool->mover;
	int r = 0;

	if (max < 1 || max > CW_MOVER_DEPTH_MAX)
		return -EINVAL;
	pthread_mutex_lock(&pool->lock);
	memset(ret, 0, sizeof(*ret));
	*ret_n = 0;
	for (;;) {
		if (mv->phase == MV_COPYING && mv->nout) {
			r = -EBUSY;
			break;
		}
		if (mv->phase == MV_NONE && lay_cache_busy(pool)) {
			ret->action = CW_MOVER_WAIT;	/* a cache step holds the gates */
			break;
		}
		if (mv->phase == MV_NONE && !batch_begin(pool, max)) {
			ret->action = CW_MOVER_IDLE;
			break;
		}
		if (mv->phase == MV_DRAIN) {
			if (!gate_drained(mv->part, mv->parity)) {
				ret->action = CW_MOVER_WAIT;
				ret->move_id = mv->jm->info.id;
				break;
			}
			if (!batch_settle(pool))
				continue;
		}
		/* MV_COPYING: hand out the blocks to copy. */
		for (unsigned i = 0; i < mv->n && mv->nout < max; i++)
			if (mv->b[i].state == MB_COPY) {
				mv->b[i].state = MB_OUT;
				fill_task(pool, &mv->b[i], &ret[mv->nout]);
				mv->out[mv->nout++] = i;
			}
		*ret_n = mv->nout;
		break;
	}
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_mover_next(struct cw_pool *pool, struct cw_mover_task *ret)
{
	unsigned n;

	return cw_mover_next_batch(pool, ret, 1, &n);
}

/* Decides block b of the batch after its copy (under the lock): moved
 * (to switch), dropped, left, or to copy again. */
static void block_outcome(struct cw_pool *pool, struct mover_block *b, unsigned slot,
			  const struct cw_mover_outcome *o)
{
	struct mover *mv = &pool->mover;
	struct jmove *jm = mv->jm;

	if (!o->read_err || o->write_err)
		jm->info.bytes_copied += pool->block_size;
	/* What a switch may mark in sync: a copy rewritten from one in sync. */
	b->wrote = b->st.from != b->st.src && (!scrubbing(jm) || (o->differs && !o->write_err &&
								   jm->info.kind == CW_MOVE_REPAIR));
	if (jm->info.state == CW_MOVE_RUNNING && o->write_err)
		pause_with(pool, jm, "writing block %llu to disk %u: %s",
			   (unsigned long long)b->st.block, ENTRY_DISK(b->st.dst),
			   strerror(o->write_err < 0 ? -o->write_err : o->write_err));
	if (jm->info.state == CW_MOVE_CANCELLED) {
		b->state = MB_DROP;
	} else if (jm->info.state != CW_MOVE_RUNNING || o->write_err) {
		b->state = MB_LEFT;
	} else if (o->read_err && still_mapped(mv->part, &b->st) &&
		   read_copy_failed(mv->part, b->st.block, b->st.from)) {
		/* The copy read is out of sync now: the next batch reads
		 * another, or finds the block lost. */
		atomic_store(&mv->part->copy[slot].dirty, false);
		b->state = MB_LEFT;
	} else if (o->read_err || !still_mapped(mv->part, &b->st)) {
		b->state = MB_DROP;
		b->row = o->read_err ? ROW_FAILED : ROW_SKIPPED;
	} else if (b->st.from != b->st.src && !from_in_sync(mv->part, b->st.block, b->st.from)) {
		atomic_store(&mv->part->copy[slot].dirty, false);
		b->state = MB_LEFT;	/* read again from a copy in sync */
	} else if (atomic_exchange(&mv->part->copy[slot].dirty, false)) {
		/* A write overlapped the copy: once it is done, copy again. */
		if (++b->retries > MOVER_RETRIES) {
			pause_with(pool, jm, "block %llu is rewritten faster than it can be copied",
				   (unsigned long long)b->st.block);
			b->state = MB_LEFT;
		} else {
			b->state = MB_COPY;
		}
	} else {
		b->state = MB_MOVED;
		/* A scrub's block that differed is listed, repaired or not. */
		b->row = scrubbing(jm) && o->differs ? ROW_FAILED : ROW_MOVED;
	}
}

int cw_mover_copied_batch(struct cw_pool *pool, const struct cw_mover_outcome *out, unsigned n)
{
	struct mover *mv = &pool->mover;
	const struct jstep *steps[CW_MOVER_DEPTH_MAX];
	int rows[CW_MOVER_DEPTH_MAX];
	unsigned idx[CW_MOVER_DEPTH_MAX], nj = 0;
	bool moved = false;
	int r = 0;

	pthread_mutex_lock(&pool->lock);
	if (mv->phase != MV_COPYING || !mv->nout || n != mv->nout) {
		r = -EINVAL;
		goto out;
	}
	for (unsigned k = 0; k < n; k++) {
		struct mover_block *b = &mv->b[mv->out[k]];

		block_outcome(pool, b, mv->out[k], &out[k]);
		if (b->row >= 0 && (b->state == MB_MOVED || b->state == MB_DROP)) {
			if (b->state == MB_MOVED && !b->wrote)
				b->st.from = b->st.src;	/* no sync bit to store */
			idx[nj] = mv->out[k];
			steps[nj] = &b->st;
			rows[nj++] = b->row;
		}
	}
	mv->nout = 0;
	/* A rebuilt copy is readable at its new place before its bit says
	 * it is in sync (the bit is what the transaction stores). */
	for (unsigned k = 0; k < nj; k++) {
		struct mover_block *b = &mv->b[idx[k]];

		if (b->state == MB_MOVED && b->wrote) {
			lay_copy_store(mv->part, b->st.copy, b->st.block, b->st.dst);
			lay_stale_flip(mv->part, b->st.copy, b->st.block, 1, false);
		}
	}
	/* The switches (and the failed and skipped blocks) in one
	 * transaction: each destination was made durable before. */
	if (nj && lay_journal_steps(pool, mv->jm, steps, rows, nj) < 0) {
		pause_with(pool, mv->jm, "journalling the switch of block %llu failed",
			   (unsigned long long)steps[0]->block);
		for (unsigned k = 0; k < nj; k++) {
			struct mover_block *b = &mv->b[idx[k]];

			if (b->state == MB_MOVED && b->wrote) {
				lay_stale_flip(mv->part, b->st.copy, b->st.block, 1, true);
				lay_copy_store(mv->part, b->st.copy, b->st.block, b->st.src);
			}
			b->state = MB_LEFT;
		}
		nj = 0;
	}
	for (unsigned k = 0; k < nj; k++) {
		struct mover_block *b = &mv->b[idx[k]];

		if (b->state == MB_MOVED) {
			lay_copy_store(mv->part, b->st.copy, b->st.block, b->st.dst);
			moved = true;
		}
	}
	for (unsigned k = 0; k < n; k++) {
		struct mover_block *b = &mv->b[mv->out[k]];

		if (b->state == MB_DROP || b->state == MB_LEFT) {
			slot_clear(mv->part, mv->out[k]);
			b->cleared = true;
		}
	}
	if (moved) {
		mv->part->gen++;
		lay_part_update_available(mv->part);
	}
	/* The slots of switched blocks stay until the drain: a write that
	 * mapped the source before the switch still mirrors itself.  The
	 * same drain lets the writes that made a copy dirty end before it
	 * is done again. */
	mv->parity = gate_bump(mv->part);
	mv->phase = MV_DRAIN;
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_mover_copied(struct cw_pool *pool, int read_err, int write_err)
{
	struct cw_mover_outcome o = { read_err, write_err };

	return cw_mover_copied_batch(pool, &o, 1);
}

int64_t cw_mover_batch_cost_ns(const struct cw_mover_task *t, unsigned n, uint32_t disk_id,
			       const struct cw_model *m)
{
	int64_t sum = 0, ns;

	for (unsigned i = 0; i < n; i++) {
		unsigned here = (t[i].src_disk_id == disk_id) + (t[i].dst_disk_id == disk_id);

		if (here && cw_model_mean_ns(m, t[i].length, &ns) == 0)
			sum += (int64_t)here * ns;
	}
	return sum;
}

void cw_mover_pace_after(struct cw_mover_pace *pc, unsigned share_pct, bool streams,
			 int64_t cost_ns, uint64_t others_ns, int64_t now_ns)
{
	if (share_pct && share_pct < 100 && others_ns != pc->others_ns && !streams)
		pc->next_ns = now_ns + cost_ns * (100 - share_pct) / share_pct;
	pc->others_ns = others_ns;
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

