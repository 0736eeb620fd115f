/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Moves: reorganising a dynamic partition online (Bosch & Mullender,
 * section 2: "the structure of dynamic partitions can be altered after a
 * dynamic partition has been created"), the ground of tiering.
 *
 * A plan reserves target blocks in memory only; the caller copies the
 * data; the commit switches the range in one transaction and then one
 * release store per block, so a concurrent reader maps each block to its
 * old or its new place, both of which hold the data.  Old blocks become
 * free only after the switch.  Invariant: a plan is committed only if the
 * partition's generation (bumped by every shrink and move commit) is the
 * one it was planned against, so its sources are still the blocks whose
 * data was copied.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "layout/layout-internal.h"

/* Plans the copies of p's blocks [first, first + n) that lie on disks
 * ok[] does not accept, copy by copy: each gets a target on a candidate
 * of pl that shares no failure domain with the block's other copies
 * (where they will be), so a move never puts two copies of a block
 * together.  Steps in block order, then copy order; m->new[i] is copy 0's
 * target.  Nothing is taken on failure (-ENOSPC, the reason set). */
static int copies_steps(struct cw_part *p, const struct placement *pl, uint64_t first,
			uint64_t n, const bool *ok, struct cw_move *m)
{
	struct cw_pool *pool = p->pool;
	struct disk *buf[CW_DISKS_MAX];
	uint32_t after = 0;

	for (uint64_t i = 0; i < n; i++) {
		uint64_t cur[CW_COPIES_MAX];

		for (unsigned c = 0; c < p->copies; c++)
			cur[c] = lay_copy_entry(p, c, first + i);
		for (unsigned c = 0; c < p->copies; c++) {
			struct placement one = *pl;
			struct cw_move_step *st;
			uint64_t t, avail;

			if (ok[ENTRY_DISK(cur[c])])
				continue;
			one.disks = buf;
			one.ndisks = 0;
			one.after_disk = after;
			for (size_t d = 0; d < pl->ndisks; d++) {
				bool apart = true;

				for (unsigned k = 0; k < p->copies && apart; k++)
					apart = k == c || !lay_same_domain(pl->disks[d],
									    pool->disks[ENTRY_DISK(cur[k])]);
				if (apart)
					buf[one.ndisks++] = pl->disks[d];
			}
			if (lay_alloc(pool, &one, 1, &t, &avail) < 0) {
				lay_move_drop_steps(pool, m);
				return lay_set_error(pool, -ENOSPC, "moving copy %u of block %llu of "
						     "partition '%s': no target disk with room outside "
						     "the failure domains of its other copies", c,
						     (unsigned long long)(first + i), p->name);
			}
			st = &m->steps[m->nsteps++];
			*st = (struct cw_move_step){
				.block = first + i, .copy = c,
				.src_disk_id = ENTRY_DISK(cur[c]),
				.src_offset = ENTRY_PBLOCK(cur[c]) << pool->bshift,
				.dst_disk_id = ENTRY_DISK(t),
				.dst_offset = ENTRY_PBLOCK(t) << pool->bshift,
			};
			cur[c] = t;
			if (c == 0)
				m->new[i] = t;
			after = ENTRY_DISK(t);
		}
	}
	return 0;
}

void lay_move_unlink(struct cw_pool *pool, struct cw_move *m)
{
	for (struct cw_move **mp = &pool->moves; *mp; mp = &(*mp)->next)
		if (*mp == m) {
			*mp = m->next;
			return;
		}
}

int lay_move_plan(struct cw_part *p, uint64_t first_block, uint64_t nblocks,
		  const struct cw_move_opts *opts, struct cw_move **ret_move)
{
	struct cw_pool *pool = p->pool;
	struct disk *buf[CW_DISKS_MAX];
	bool ok[CW_DISKS_MAX + 1] = { false };
	_cleanup_free_ uint64_t *targets = NULL;
	struct cw_part_opts o;
	struct placement pl;
	struct cw_move *m = NULL;
	uint64_t have, k = 0, avail;
	int r;

	have = atomic_load_explicit(&p->nblocks, memory_order_relaxed);
	if (!opts || !cw_placement_name(opts->placement) || !cw_tier_pref_name(opts->tier) ||
	    !cw_zone_pref_name(opts->zone) || (opts->ndisks && !opts->disk_ids)) {
		r = lay_set_error(pool, -EINVAL, "invalid move options (placement, tier, zone or disks)");
		goto out;
	}
	if (!nblocks || first_block >= have || nblocks > have - first_block) {
		r = lay_set_error(pool, nblocks ? -ERANGE : -EINVAL,
				  "blocks %llu..+%llu are not within partition '%s' (%llu blocks)",
				  (unsigned long long)first_block, (unsigned long long)nblocks,
				  p->name, (unsigned long long)have);
		goto out;
	}
	if (!atomic_load_explicit(&p->available, memory_order_relaxed)) {
		r = lay_set_error(pool, -ENODEV, "partition '%s' is unavailable: a disk is missing",
				  p->name);
		goto out;
	}
	o = (struct cw_part_opts){ .placement = opts->placement, .tier = opts->tier,
				   .zone = opts->zone };
	r = lay_candidates(pool, &o, opts->disk_ids, opts->ndisks, true, nblocks, &pl, buf);
	if (r < 0)
		goto out;
	if (pl.policy == CW_PLACE_SINGLE && pl.ndisks > 1) {
		/* One target disk: the one with the most room. */
		for (size_t i = 1; i < pl.ndisks; i++)
			if (pl.disks[i]->free > pl.disks[0]->free)
				pl.disks[0] = pl.disks[i];
		pl.ndisks = 1;
	}
	for (size_t i = 0; i < pl.ndisks; i++)
		ok[pl.disks[i]->id] = true;

	m = calloc(1, sizeof(*m));
	if (m) {
		m->old = malloc(nblocks * sizeof(uint64_t));
		m->new = malloc(nblocks * sizeof(uint64_t));
		m->steps = malloc(nblocks * p->copies * sizeof(*m->steps));
		targets = malloc(nblocks * p->copies * sizeof(uint64_t));
	}
	if (!m || !m->old || !m->new || !m->steps || !targets) {
		r = lay_set_error(pool, -ENOMEM, "out of memory");
		goto out;
	}
	for (uint64_t i = 0; i < nblocks; i++) {
		m->old[i] = m->new[i] = lay_entry(p, first_block + i);
		for (unsigned c = 0; c < p->copies; c++)
			k += !ok[ENTRY_DISK(lay_copy_entry(p, c, first_block + i))];
	}
	if (p->copies > 1 && lay_available(&pl) >= k) {
		r = copies_steps(p, &pl, first_block, nblocks, ok, m);
		if (r < 0)
			goto out;
	} else {
		r = lay_alloc(pool, &pl, k, targets, &avail);
	}
	if (r == -ENOSPC) {
		lay_set_error(pool, r, "moving %llu blocks of partition '%s' needs %llu bytes but only "
			      "%llu bytes are free on the target disks", (unsigned long long)k,
			      p->name, (unsigned long long)(k << pool->bshift),
			      (unsigned long long)(avail << pool->bshift));
		pool->err.needed_bytes = k << pool->bshift;
		pool->err.available_bytes = avail << pool->bshift;
		goto out;
	}
	if (r < 0) {
		lay_set_error(pool, r, "planning a move: %s", strerror(-r));
		goto out;
	}
	for (uint64_t i = 0; i < nblocks && p->copies == 1; i++) {
		struct cw_move_step *st;

		if (ok[ENTRY_DISK(m->old[i])])
			continue;
		m->new[i] = targets[m->nsteps];
		st = &m->steps[m->nsteps++];
		*st = (struct cw_move_step){
			.block = first_block + i,
			.src_disk_id = ENTRY_DISK(m->old[i]),
			.src_offset = ENTRY_PBLOCK(m->old[i]) << pool->bshift,
			.dst_disk_id = ENTRY_DISK(m->new[i]),
			.dst_offset = ENTRY_PBLOCK(m->new[i]) << pool->bshift,
		};
	}
	m->pool = pool;
	m->part = p;
	m->gen = p->gen;
	m->first = first_block;
	m->n = nblocks;
	m->next = pool->moves;
	pool->moves = m;
	*ret_move = m;
	m = NULL;
out:
	lay_move_free(m);
	return r;
}

int cw_move_plan(struct cw_part *p, uint64_t first_block, uint64_t nblocks,
		 const struct cw_move_opts *opts, struct cw_move **ret_move)
{
	int r;

	pthread_mutex_lock(&p->pool->lock);
	r = lay_move_plan(p, first_block, nblocks, opts, ret_move);
	pthread_mutex_unlock(&p->pool->lock);
	return r;
}

size_t cw_move_nsteps(const struct cw_move *move)
{
	return move->nsteps;
}

int cw_move_step(const struct cw_move *move, size_t i, struct cw_move_step *ret)
{
	if (i >= move->nsteps)
		return -ERANGE;
	*ret = move->steps[i];
	return 0;
}

int cw_move_commit(struct cw_move *m)
{
	struct cw_pool *pool = m->pool;
	struct cw_part *p = m->part;
	int r;

	pthread_mutex_lock(&pool->lock);
	if (p->gen != m->gen ||
	    atomic_load_explicit(&p->nblocks, memory_order_relaxed) < m->first + m->n) {
		r = lay_set_error(pool, -ESTALE, "partition '%s' changed since the move was planned",
				  p->name);
		goto out;
	}
	if (!m->nsteps) {
		r = 0;
		goto done;
	}
	r = meta_begin(pool->meta);
	if (r == 0)
		r = lay_runs_replace(pool->meta, p->id, m->first, m->first + m->n, m->new);
	for (size_t k = 0; k < m->nsteps && r == 0; k++)
		if (m->steps[k].copy) {
			uint64_t e = lay_step_dst(pool, &m->steps[k]);

			r = lay_runs_replace_copy(pool->meta, p->id, m->steps[k].copy,
						  m->steps[k].block, m->steps[k].block + 1, &e);
		}
	r = meta_end(pool->meta, r);
	if (r < 0) {
		lay_set_error(pool, r, "committing the move of partition '%s': %s", p->name,
			      strerror(-r));
		goto out;
	}
	for (size_t k = 0; k < m->nsteps; k++)
		lay_copy_store(p, m->steps[k].copy, m->steps[k].block,
			       lay_step_dst(pool, &m->steps[k]));
	for (size_t k = 0; k < m->nsteps; k++) {
		uint64_t e = ENTRY(m->steps[k].src_disk_id, m->steps[k].src_offset >> pool->bshift);

		lay_free_entries(pool, &e, 1);
	}
	p->gen++;
done:
	lay_move_unlink(pool, m);
	lay_move_free(m);
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

void cw_move_abort(struct cw_move *m)
{
	struct cw_pool *pool;

	if (!m)
		return;
	pool = m->pool;
	pthread_mutex_lock(&pool->lock);
	lay_move_unlink(pool, m);
	lay_move_drop(pool, m);
	pthread_mutex_unlock(&pool->lock);
}
