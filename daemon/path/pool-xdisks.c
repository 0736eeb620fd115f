/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An export's disk list: the disks a client's FLUSH syncs (pool-internal.h,
 * struct pbx).  A disk joins before anything of the export's partition is
 * written there (by the mover, a cache, or a block newly placed) and
 * leaves once nothing of it is, read by FLUSH without a lock.
 */
#include "config.h"

#include <sched.h>

#include "daemon/path/pool-internal.h"

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

void pb_export_drop_disk(struct pb *pb, struct pbx *x, uint32_t di)
{
	unsigned n, i;
	bool punch = true;

	pthread_mutex_lock(&pb->xdisks_lock);
	n = atomic_load_explicit(&x->ndisks, memory_order_relaxed);
	for (i = 0; i < n && x->disks[i] != di; i++)
		;
	if (i == n) {
		pthread_mutex_unlock(&pb->xdisks_lock);
		return;
	}
	/* The last entry takes its place, then the count drops: a FLUSH
	 * that read the count before sees every other disk still (one of
	 * them perhaps twice). */
	atomic_store(&x->disks[i], x->disks[n - 1]);
	atomic_store(&x->ndisks, n - 1);
	for (i = 0; i < n - 1; i++)
		punch &= pb->disks[x->disks[i]].can_punch;
	atomic_store_explicit(&x->can_punch, punch, memory_order_relaxed);
	pthread_mutex_unlock(&pb->xdisks_lock);
	/* A FLUSH in its short window (no waiting inside) may still hold
	 * the old list: once none is, none can reach di. */
	while (atomic_load(&x->flush_readers))
		sched_yield();
}

/* Disk disk_id joins the disk list of part's exports, so that a client's
 * FLUSH syncs what the mover or a cache writes there.  The list is the
 * control thread's to change, under its lock. */
void pb_part_take_disk(struct pb *pb, const struct cw_part *part, uint32_t disk_id)
{
	int di = pb_disk_index(pb, disk_id);

	if (di < 0)
		return;
	pthread_mutex_lock(&pb->exports_lock);
	for (struct pbx *x = pb->exports; x; x = x->next)
		if (x->part == part)
			pb_export_take_disk(pb, x, (uint32_t)di);
	pthread_mutex_unlock(&pb->exports_lock);
}

void pb_export_take_pending(struct pb *pb, struct pbx *x)
{
	uint64_t nblocks = cw_part_nblocks(x->part);
	_cleanup_free_ struct cw_move_info *mv = NULL;
	_cleanup_free_ uint32_t *dst = NULL;
	bool seen[CW_DISKS_MAX + 1] = { false };
	uint32_t ids[CW_DISKS_MAX];
	size_t n = cw_part_cache_disks(x->part, ids), nm = 0;

	for (size_t k = 0; k < n; k++)
		seen[ids[k]] = true;
	if (nblocks && cw_move_list(pb->pool, &mv, &nm) == 0 &&
	    (dst = calloc(nblocks, sizeof(*dst))))
		for (size_t i = 0; i < nm; i++) {
			/* a move of other blocks leaves these where they are */
			if (mv[i].finished_ns ||
			    cw_move_destinations(pb->pool, mv[i].id, x->part, 0, nblocks, dst) < 0)
				continue;
			for (uint64_t b = 0; b < nblocks; b++)
				if (dst[b] <= CW_DISKS_MAX)
					seen[dst[b]] = true;
		}
	for (uint32_t id = 1; id <= CW_DISKS_MAX; id++) {
		int di = seen[id] ? pb_disk_index(pb, id) : -1;

		if (di >= 0)
			pb_export_take_disk(pb, x, (uint32_t)di);
	}
}
