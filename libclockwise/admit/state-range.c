/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A reservation's range as admission sees it (clockwise/admit.h, struct
 * cw_admit_layout): the disk and disk offset of each partition block it
 * touches; with an unfinished move, where the move puts each block too
 * (alt_disk); with the partition's SSD cache, the cache's disks
 * (copy_disk).  And which running move takes blocks of a range to other
 * disks, asked of the pool's journal (clockwise/mover.h).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/mover.h>

#include "admit/state-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

void ast_range_layout_done(struct range_layout *rl)
{
	free(rl->disks);
	free(rl->disk_idx);
	free(rl->disk_off);
	free(rl->alt_idx);
	free(rl->mirror_idx);
	free(rl->mirror_off);
}

/* A mirrored partition's copies 1.. of blocks [first, first + n) into
 * rl (admit.h, mirror_disk): each admission plans with every copy, in
 * sync or not (a copy out of sync is a failure case's). */
static int range_mirrors(struct cw_admit_state *st, struct cw_part *part, uint64_t first,
			 uint64_t n, const uint32_t *idx_of, struct range_layout *rl,
			 struct cw_admit_refusal *ref)
{
	uint32_t nc = cw_part_copies(part);

	_Static_assert(CW_ADMIT_COPIES_MAX == CW_COPIES_MAX, "copies");
	if (nc <= 1)
		return 0;
	rl->mirror_idx = calloc((nc - 1) * n, sizeof(*rl->mirror_idx));
	rl->mirror_off = calloc((nc - 1) * n, sizeof(*rl->mirror_off));
	if (!rl->mirror_idx || !rl->mirror_off)
		return -ENOMEM;
	for (uint64_t k = 0; k < n; k++) {
		struct cw_copy cs[CW_COPIES_MAX];
		int r = cw_part_block_copies(part, first + k, cs);

		if (r < 0)
			return r;
		for (uint32_t c = 1; c < nc; c++) {
			if (cs[c].disk_id > CW_DISKS_MAX || !st->disks[cs[c].disk_id]) {
				ast_refuse(ref, "copy %" PRIu32 " of partition block %" PRIu64 " is on "
					   "disk %" PRIu32 ", which has no model", c, first + k,
					   cs[c].disk_id);
				return -ENODEV;
			}
			rl->mirror_idx[(c - 1) * n + k] = idx_of[cs[c].disk_id];
			rl->mirror_off[(c - 1) * n + k] = cs[c].phys_offset;
		}
	}
	rl->l.n_copies = nc;
	rl->l.mirror_disk = rl->mirror_idx;
	rl->l.mirror_off = rl->mirror_off;
	return 0;
}

int ast_range_layout(struct cw_admit_state *st, struct cw_part *part, uint64_t start,
		     uint64_t end, struct range_layout *rl, struct cw_admit_refusal *ref)
{
	uint64_t pb = cw_part_block_size(part);
	uint64_t first = start / pb, n = (end - 1) / pb - first + 1;
	_cleanup_free_ uint32_t *ids = NULL;
	uint32_t idx_of[CW_DISKS_MAX + 1] = { 0 };
	int r;

	memset(rl, 0, sizeof(*rl));
	r = cw_disk_list(st->pool, &rl->disks, &rl->n_disks);
	if (r < 0)
		return r;
	for (size_t i = 0; i < rl->n_disks; i++)
		idx_of[rl->disks[i].id] = (uint32_t)i;
	ids = calloc(n, sizeof(*ids));
	rl->disk_idx = calloc(n, sizeof(*rl->disk_idx));
	rl->disk_off = calloc(n, sizeof(*rl->disk_off));
	if (!ids || !rl->disk_idx || !rl->disk_off)
		return -ENOMEM;
	r = cw_part_block_disks(part, first, n, ids);
	if (r < 0)
		return r;
	for (uint64_t k = 0; k < n; k++) {
		struct cw_extent e;

		r = cw_part_map(part, (first + k) * pb, pb, &e);
		if (r < 0) {
			ast_refuse(ref, "partition block %" PRIu64 ": %s", first + k,
				   r == -ENODEV ? "on a missing disk" : strerror(-r));
			return r;
		}
		if (!st->disks[ids[k]]) {
			ast_refuse(ref, "partition block %" PRIu64 " is on disk %" PRIu32
				   ", which has no model", first + k, ids[k]);
			return -ENODEV;
		}
		rl->disk_idx[k] = idx_of[ids[k]];
		rl->disk_off[k] = e.phys_offset;
	}
	rl->l = (struct cw_admit_layout){
		.pblock_bytes = pb,
		.n_pblocks = n,
		.disk = rl->disk_idx,
		.disk_off = rl->disk_off,
		.first_bytes = start - first * pb,
		.range_bytes = end - start,
		.failed = CW_ADMIT_NO_FAILURE,
	};
	return range_mirrors(st, part, first, n, idx_of, rl, ref);
}

/* The same range while the unfinished move move_id runs on part: each
 * block also where the move puts it (clockwise/admit.h, alt_disk), the
 * range laid out from start (rl->l as range_layout made it).  A move
 * that is over (or unknown) adds nothing: 0 either way. */
int ast_range_layout_move(struct cw_admit_state *st, struct cw_part *part, uint64_t move_id,
			  uint64_t start, struct range_layout *rl,
			  struct cw_admit_refusal *ref)
{
	uint64_t first = start / rl->l.pblock_bytes, n = rl->l.n_pblocks;
	_cleanup_free_ uint32_t *after = calloc(n ? n : 1, sizeof(*after));
	uint32_t idx_of[CW_DISKS_MAX + 1];
	bool known[CW_DISKS_MAX + 1] = { false };
	int r;

	if (!after)
		return -ENOMEM;
	if (!move_id)
		return 0;
	r = cw_move_destinations(st->pool, move_id, part, first, n, after);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	for (size_t i = 0; i < rl->n_disks; i++) {
		idx_of[rl->disks[i].id] = (uint32_t)i;
		known[rl->disks[i].id] = true;
	}
	rl->alt_idx = calloc(n ? n : 1, sizeof(*rl->alt_idx));
	if (!rl->alt_idx)
		return -ENOMEM;
	for (uint64_t k = 0; k < n; k++) {
		if (after[k] > CW_DISKS_MAX || !known[after[k]] || !st->disks[after[k]]) {
			ast_refuse(ref, "move %" PRIu64 " takes partition block %" PRIu64 " to "
				   "disk %" PRIu32 ", which has no model", move_id, first + k,
				   after[k]);
			return -ENODEV;
		}
		rl->alt_idx[k] = idx_of[after[k]];
	}
	rl->l.alt_disk = rl->alt_idx;
	return 0;
}

int ast_range_moving(struct cw_admit_state *st, struct cw_part *part, uint64_t start,
		     uint64_t end, uint64_t *ret_id, struct cw_admit_refusal *ref)
{
	_cleanup_free_ struct cw_move_info *m = NULL;
	_cleanup_free_ uint32_t *after = NULL;
	uint64_t first = start / st->block, n;
	struct cw_part_info pi = { 0 };
	size_t nm = 0;
	int r;

	*ret_id = 0;
	if (end <= start)
		return 0;
	n = (end - 1) / st->block - first + 1;
	after = calloc(n, sizeof(*after));
	if (!after)
		return -ENOMEM;
	r = cw_part_info(part, &pi);
	if (r == 0)
		r = cw_move_list(st->pool, &m, &nm);
	for (size_t i = 0; r == 0 && i < nm; i++) {
		if (m[i].state != CW_MOVE_RUNNING || strcmp(m[i].part, pi.name) != 0)
			continue;
		r = cw_move_takes(st->pool, m[i].id, part, first, n, after);
		if (r == 1) {
			*ret_id = m[i].id;
			return 0;
		}
		if (r == -ENOENT)	/* it ended since the list was read */
			r = 0;
	}
	if (r < 0)
		ast_refuse(ref, "reading the moves of partition %s: %s", pi.name, strerror(-r));
	return r;
}

/* The same range with a copy of each block perhaps on each of disks
 * ids[0..n) (clockwise/admit.h, copy_disk): a cache's. */
int ast_range_layout_copies(struct cw_admit_state *st, struct range_layout *rl,
			    const uint32_t *ids, size_t n, struct cw_admit_refusal *ref)
{
	for (size_t i = 0; i < n; i++) {
		size_t k;

		for (k = 0; k < rl->n_disks && rl->disks[k].id != ids[i]; k++)
			;
		if (k == rl->n_disks || !st->disks[ids[i]]) {
			ast_refuse(ref, "the cache's disk %" PRIu32 " has no model", ids[i]);
			return -ENODEV;
		}
		rl->copy_idx[i] = (uint32_t)k;
		rl->copy_id[ids[i]] = true;
	}
	rl->l.copy_disk = rl->copy_idx;
	rl->l.n_copy = n;
	return 0;
}

/* The disks rv is booked on for its partition's cache copies, into ids
 * (room for CW_DISKS_MAX); how many. */
size_t ast_resv_copies(const struct cw_admit_resv *rv, uint32_t *ids)
{
	size_t n = 0;

	for (size_t i = 0; i < rv->n_parts; i++)
		if (rv->parts[i].copy)
			ids[n++] = rv->parts[i].disk_id;
	return n;
}
