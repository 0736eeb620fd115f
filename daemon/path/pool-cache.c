/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The SSD caches' worker (clockwise/cache.h): the library decides what to
 * promote, demote and write back and keeps the journal; this file does
 * the copies, on the mover's thread when no move runs, with the mover's
 * I/O (pb_mover_io: the daemon's own best-effort requests through the
 * lanes, so on a disk with streams in the slack ΔL, never as RT).
 *
 * Which reserved ranges a cache may hold is the control thread's to say
 * (control-cache.c, cw_cache_pin): rule 2 of the design, a block of a
 * reserved range is cached only where admission holds for its stream.
 */
#include "config.h"

#include "daemon/path/pool-internal.h"

/* Steps in one round before the mover looks at its moves again. */
#define CACHE_ROUND_STEPS 256
#define CACHE_DRAIN_NS (100 * CW_NS_PER_US)

/* Each cache's disks join the disk lists of its partition's exports (a
 * cache that restarted with armed blocks serves them before any
 * promotion). */
static void take_cache_disks(struct pb *pb)
{
	_cleanup_free_ struct cw_part_info *parts = NULL;
	size_t nparts = 0;

	if (cw_part_list(pb->pool, &parts, &nparts) < 0)
		return;
	for (size_t i = 0; i < nparts; i++) {
		uint32_t ids[CW_DISKS_MAX];
		struct cw_part *part;
		size_t nd;

		if (cw_part_lookup(pb->pool, parts[i].name, &part) < 0 || !cw_part_cache(part))
			continue;
		nd = cw_part_cache_disks(part, ids);
		for (size_t j = 0; j < nd; j++)
			pb_part_take_disk(pb, part, ids[j]);
	}
}

static void cache_copy(struct pb *pb, const struct cw_cache_task *t, void *buf)
{
	struct cw_part_info info = { .name = "?" };
	int rerr, werr = 0;

	if (t->promote)
		pb_part_take_disk(pb, t->part, t->dst_disk_id);
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

	take_cache_disks(pb);
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
