/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The SSD caches' worker (clockwise/cache.h): the library decides what to
 * promote, demote and write back and keeps the journal; this file does
 * the copies, on the mover's thread when no move runs, with the mover's
 * I/O (pb_mover_io: the daemon's own best-effort requests through the
 * lanes, so on a disk with streams in the slack ΔL, never as RT).
 *
 * Before each round it tells every cache which blocks the active
 * reservations cover: those are not moved (rule 2 of the design: a block
 * of a reserved range may move only where admission holds for its
 * stream, and nothing tests admission on the SSD yet).
 */
#include "config.h"

#include "daemon/pool-internal.h"

/* Steps in one round before the mover looks at its moves again. */
#define CACHE_ROUND_STEPS 256
#define CACHE_DRAIN_NS (100 * CW_NS_PER_US)

static void take_cache_disk(struct pb *pb, struct cw_part *part, uint32_t disk_id);

/* The reserved ranges of each partition, as its cache's pins; and its
 * cache's disks in its exports' disk lists (a cache that restarted with
 * armed blocks serves them before any promotion). */
static void pin_reserved(struct pb *pb)
{
	_cleanup_free_ struct cw_part_info *parts = NULL;
	size_t nparts = 0;

	if (cw_part_list(pb->pool, &parts, &nparts) < 0)
		return;
	for (size_t i = 0; i < nparts; i++) {
		uint64_t first[64], n[64], bs = pb->block_size;
		struct cw_part *part;
		size_t k = 0;

		uint32_t ids[CW_DISKS_MAX];
		size_t nd;

		if (cw_part_lookup(pb->pool, parts[i].name, &part) < 0 || !cw_part_cache(part))
			continue;
		nd = cw_part_cache_disks(part, ids);
		for (size_t j = 0; j < nd; j++)
			take_cache_disk(pb, part, ids[j]);
		pthread_mutex_lock(&pb->resv_lock);
		for (size_t r = 0; r < pb->nresvs && k < 64; r++) {
			const struct cw_admit_resv *a = pb->resvs[r] ? pb->resvs[r]->a : NULL;

			if (!a || a->part_id != parts[i].id)
				continue;
			first[k] = a->range_start_bytes / bs;
			n[k] = (a->range_end_bytes + bs - 1) / bs - first[k];
			k++;
		}
		pthread_mutex_unlock(&pb->resv_lock);
		cw_cache_pin(part, first, n, k);
	}
}

/* The cache's disk joins the disk list of the partition's exports, so a
 * client's FLUSH syncs what is written there. */
static void take_cache_disk(struct pb *pb, struct cw_part *part, uint32_t disk_id)
{
	int di = pb_disk_index(pb, disk_id);

	for (struct pbx *x = pb->exports; x && di >= 0; x = x->next)
		if (x->part == part)
			pb_export_take_disk(pb, x, (uint32_t)di);
}

static void cache_copy(struct pb *pb, const struct cw_cache_task *t, void *buf)
{
	struct cw_part_info info = { .name = "?" };
	int rerr, werr = 0;

	if (t->promote)
		take_cache_disk(pb, t->part, t->dst_disk_id);
	rerr = pb_mover_io(pb, t->src_disk_id, CW_IO_READ, t->src_offset, t->length, buf);
	if (rerr == 0)
		werr = pb_mover_io(pb, t->dst_disk_id, CW_IO_WRITE, t->dst_offset, t->length, buf);
	if (rerr == 0 && werr == 0 && t->sync)
		werr = pb_mover_io(pb, t->dst_disk_id, CW_IO_FSYNC, 0, 0, NULL);
	if (rerr < 0 || werr < 0) {
		cw_part_info(t->part, &info);
		cwd_log(LOG_ERR, "cache: %s block %" PRIu64 " of partition %s: %s disk %u failed "
			"(%s)%s", t->promote ? "promoting" : "writing back", t->block, info.name,
			rerr < 0 ? "reading" : "writing", rerr < 0 ? t->src_disk_id : t->dst_disk_id,
			strerror(-(rerr < 0 ? rerr : werr)),
			t->promote ? "" : ": the block stays on the SSD, its cache stops");
	}
	if (cw_cache_copied(pb->pool, rerr, werr) < 0)
		cwd_log(LOG_ERR, "cache: the worker lost its step");
}

bool pb_cache_work(struct pb *pb, void *buf)
{
	bool worked = false;

	pin_reserved(pb);
	for (unsigned i = 0; i < CACHE_ROUND_STEPS && !atomic_load(&pb->mover_stop); i++) {
		struct cw_cache_task t;
		int r = cw_cache_next(pb->pool, cw_now_ns(), &t);

		if (r < 0) {
			cwd_log(LOG_ERR, "cache: %s", strerror(-r));
			break;
		}
		if (t.action == CW_CACHE_IDLE)
			break;
		worked = true;
		if (t.action == CW_CACHE_WAIT) {
			struct timespec ts = { 0, CACHE_DRAIN_NS };

			nanosleep(&ts, NULL);
			i--;	/* a drain is part of its step */
			continue;
		}
		cache_copy(pb, &t, buf);
	}
	return worked;
}
