/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Free space and placement (Bosch & Mullender, section 2: a dynamic
 * partition's blocks may lie anywhere on any disk of the pool).
 *
 * Each disk keeps a bitmap of its blocks (bit set: in use; block 0 is the
 * label and always set), its free count and a free count per zone.  Zone 0
 * is the outer zone: the lowest addresses, the fastest on an HDD.
 * Invariants, checked by lay_pool_check(): free == clear bits, zone_free[z]
 * == clear bits in zone z, no clear bit below low, none at or above high.
 * Those two hints make "outer" (lowest free first) and "inner" (highest
 * free first) allocation amortised O(1) per block.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "layout/layout-internal.h"

#define NONE UINT64_MAX

int lay_disk_init_space(struct disk *d)
{
	uint64_t data = d->nblocks - 1;

	d->bitmap = calloc(CW_DIV_ROUND_UP(d->nblocks, 64), sizeof(uint64_t));
	if (!d->bitmap)
		return -ENOMEM;
	d->bitmap[0] = 1;	/* the label */
	d->free = data;
	for (int z = 0; z < CW_ZONES; z++)
		d->zone_start[z] = 1 + data * (uint64_t)z / CW_ZONES;
	d->zone_start[CW_ZONES] = d->nblocks;
	for (int z = 0; z < CW_ZONES; z++)
		d->zone_free[z] = d->zone_start[z + 1] - d->zone_start[z];
	d->low = 1;
	d->high = d->nblocks;
	d->cursor = 1;
	return 0;
}

static int zone_of(const struct disk *d, uint64_t pblock)
{
	int z = 0;

	while (z < CW_ZONES - 1 && pblock >= d->zone_start[z + 1])
		z++;
	return z;
}

bool lay_disk_test(const struct disk *d, uint64_t pblock)
{
	return d->bitmap[pblock >> 6] & (UINT64_C(1) << (pblock & 63));
}

void lay_disk_mark(struct disk *d, uint64_t pblock)
{
	d->bitmap[pblock >> 6] |= UINT64_C(1) << (pblock & 63);
	d->free--;
	d->zone_free[zone_of(d, pblock)]--;
}

void lay_disk_put(struct disk *d, uint64_t pblock)
{
	d->bitmap[pblock >> 6] &= ~(UINT64_C(1) << (pblock & 63));
	d->free++;
	d->zone_free[zone_of(d, pblock)]++;
	d->low = CW_MIN(d->low, pblock);
	d->high = CW_MAX(d->high, pblock + 1);
}

/* First clear bit in [from, end), or end. */
static uint64_t zero_up(const uint64_t *bm, uint64_t from, uint64_t end)
{
	while (from < end) {
		uint64_t w = ~bm[from >> 6] & (~UINT64_C(0) << (from & 63));

		if (w) {
			uint64_t b = (from & ~UINT64_C(63)) + (uint64_t)__builtin_ctzll(w);

			return CW_MIN(b, end);
		}
		from = (from | 63) + 1;
	}
	return end;
}

/* Last clear bit in [begin, below), or NONE. */
static uint64_t zero_down(const uint64_t *bm, uint64_t below, uint64_t begin)
{
	while (below > begin) {
		uint64_t i = below - 1;
		uint64_t w = ~bm[i >> 6] & (~UINT64_C(0) >> (63 - (i & 63)));

		if (w) {
			uint64_t b = (i & ~UINT64_C(63)) + 63 - (uint64_t)__builtin_clzll(w);

			return b >= begin ? b : NONE;
		}
		below = i & ~UINT64_C(63);
	}
	return NONE;
}

/* Takes one free block of d (d->free > 0) where the zone preference says. */
static uint64_t disk_take(struct disk *d, enum cw_zone_pref zone)
{
	uint64_t b;

	switch (zone) {
	case CW_ZONE_OUTER:
		b = zero_up(d->bitmap, d->low, d->nblocks);
		d->low = b + 1;
		break;
	case CW_ZONE_INNER:
		b = zero_down(d->bitmap, d->high, 1);
		d->high = b;
		break;
	default:
		b = zero_up(d->bitmap, d->cursor, d->nblocks);
		if (b == d->nblocks)
			b = zero_up(d->bitmap, 1, d->cursor);
		d->cursor = b + 1;
		break;
	}
	lay_disk_mark(d, b);
	return b;
}

static uint64_t take(struct disk *d, enum cw_zone_pref zone)
{
	return ENTRY(d->id, disk_take(d, zone));
}

/* The disk a single-disk placement takes from: the one with most free. */
static struct disk *single_disk(const struct placement *pl)
{
	struct disk *single = NULL;

	for (size_t i = 0; i < pl->ndisks; i++)
		if (!single || pl->disks[i]->free > single->free)
			single = pl->disks[i];
	return single;
}

uint64_t lay_available(const struct placement *pl)
{
	struct disk *single;
	uint64_t avail = 0;

	if (pl->policy == CW_PLACE_SINGLE) {
		single = single_disk(pl);
		return single ? single->free : 0;
	}
	for (size_t i = 0; i < pl->ndisks; i++)
		avail += pl->disks[i]->free;
	return avail;
}

int lay_alloc(struct cw_pool *pool, const struct placement *pl, uint64_t n,
	      uint64_t *ret_entries, uint64_t *ret_avail)
{
	uint64_t avail = lay_available(pl);
	size_t k = pl->ndisks, idx;
	struct disk *single = pl->policy == CW_PLACE_SINGLE ? single_disk(pl) : NULL;

	*ret_avail = avail;
	if (avail < n)
		return -ENOSPC;

	switch (pl->policy) {
	case CW_PLACE_SINGLE:
		for (uint64_t i = 0; i < n; i++)
			ret_entries[i] = take(single, pl->zone);
		break;
	case CW_PLACE_RANDOM: {
		_cleanup_free_ struct disk **open = malloc(k * sizeof(*open));
		size_t m = 0;

		if (!open)
			return -ENOMEM;
		for (size_t i = 0; i < k; i++)
			if (pl->disks[i]->free)
				open[m++] = pl->disks[i];
		for (uint64_t i = 0; i < n; i++) {
			size_t j = lay_random(pool) % m;

			ret_entries[i] = take(open[j], pl->zone);
			if (!open[j]->free)
				open[j] = open[--m];
		}
		break;
	}
	default:
		for (idx = 0; idx < k && pl->disks[idx]->id <= pl->after_disk; idx++)
			;
		for (uint64_t i = 0; i < n; i++) {
			idx %= k;
			while (!pl->disks[idx]->free)
				idx = (idx + 1) % k;
			ret_entries[i] = take(pl->disks[idx], pl->zone);
			idx++;
		}
		break;
	}
	return 0;
}

void lay_free_entries(struct cw_pool *pool, const uint64_t *entries, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		if (entries[i])
			lay_disk_put(pool->disks[ENTRY_DISK(entries[i])], ENTRY_PBLOCK(entries[i]));
}

/* ---- move plans: their reserved targets go back to the free space ---- */

void lay_move_free(struct cw_move *m)
{
	if (!m)
		return;
	free(m->old);
	free(m->new);
	free(m->steps);
	free(m);
}

/* Frees a plan that is no longer linked, with its reserved targets. */
void lay_move_drop(struct cw_pool *pool, struct cw_move *m)
{
	lay_move_drop_steps(pool, m);
	lay_move_free(m);
}

void lay_move_drop_steps(struct cw_pool *pool, struct cw_move *m)
{
	for (size_t k = 0; k < m->nsteps; k++) {
		uint64_t e = lay_step_dst(pool, &m->steps[k]);

		if (e != ENTRY(m->steps[k].src_disk_id, m->steps[k].src_offset >> pool->bshift))
			lay_free_entries(pool, &e, 1);
	}
	m->nsteps = 0;
}

/* The disks a placement may use (layout-internal.h): partitions, moves
 * and caches all choose from here. */
int lay_candidates(struct cw_pool *pool, const struct cw_part_opts *o, const uint32_t *only,
		   size_t nonly, bool strict, uint64_t n, struct placement *pl, struct disk **buf)
{
	enum cw_tier want = o->tier == CW_TIER_PREF_SSD ? CW_TIER_SSD : CW_TIER_HDD;

	pl->policy = o->placement;
	pl->zone = o->zone;
	pl->disks = buf;
	pl->ndisks = 0;
	pl->after_disk = 0;
	for (size_t k = 0; k < nonly; k++) {
		uint32_t id = only[k];

		if (id < 1 || id > CW_DISKS_MAX || !pool->disks[id])
			return lay_set_error(pool, -ENOENT, "no disk %u in the pool", id);
		if (pool->disks[id]->state != CW_DISK_PRESENT)
			return lay_set_error(pool, -ENODEV, "disk %u (%s) is missing", id,
					     pool->disks[id]->name);
	}
	for (int pass = 0; pass < 2; pass++) {
		uint64_t tier_free = 0, most = 0;

		pl->ndisks = 0;
		for (uint32_t i = 1; i <= CW_DISKS_MAX; i++) {
			struct disk *d = pool->disks[i];
			bool listed = !only;

			for (size_t k = 0; only && k < nonly; k++)
				listed |= only[k] == i;
			if (!d || d->state != CW_DISK_PRESENT || !listed || (d->spare && !only))
				continue;
			if (pass == 0 && o->tier != CW_TIER_PREF_NONE && d->tier != want)
				continue;
			buf[pl->ndisks++] = d;
			tier_free += d->free;
			most = CW_MAX(most, d->free);
		}
		if (o->tier == CW_TIER_PREF_NONE || strict)
			break;
		/* The preferred tier has room: keep to it; else any disk. */
		if ((o->placement == CW_PLACE_SINGLE ? most : tier_free) >= n)
			break;
	}
	return 0;
}
