/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cwsim's answers to the request split's layout questions
 * (clockwise/path.h): the engine splits a best-effort request with
 * cw_path_split(), as clockwised's data path does, and only these
 * answers are cwsim's own — where its blocks are (the pool's map, as the
 * set-up or the move copied it, or cwsim's own striping), its cache's
 * slots, its move's mirrors and its plan's best-effort piece.
 *
 * Invariant: disk ids are a disk's index plus one (ids start at 1, as the
 * pool's do), SIM_PATH_SSD is the cache's; a run the map answers is
 * contiguous on one disk, as cw_part_map's is, and with copies on every
 * copy's disk (cwsim's runs are single blocks unless the copies follow).  cwsim has no holes (every
 * block reads from its disk) and its disks do not punch.  After a disk
 * failed (fail =) the map and the copies are the run pool's (the
 * failure's copies out of sync, the rebuild's switches), asked of it
 * through move.c.  A mirrored read's loads (cw_path_ops.load) are the
 * engine's disks': work queued and not taken, requests not complete.
 */
#include "config.h"

#include <errno.h>

#include <clockwise/cache.h>

#include "common/util.h"
#include "sim.h"

/* Where block g of the best-effort partitions is. */
static struct sim_pblock path_block(const struct sim_path *p, uint64_t g)
{
	const struct sim_scenario *sc = p->s->sc;

	if (p->blocks)
		return p->blocks[g];
	return (struct sim_pblock){ .disk = (unsigned)(g % sc->disks),
				    .off = sim_be_start(sc) + g / sc->disks * sc->be_pblock_bytes };
}

/* Whether every copy c >= 1 of block g follows that copy of g - 1. */
static bool copies_follow(const struct sim_path *p, uint64_t g)
{
	unsigned k = p->s->sc->copies;

	for (unsigned c = 1; p->xblocks && c < k; c++) {
		const struct sim_pblock *a = &p->xblocks[(g - 1) * (k - 1) + c - 1];
		const struct sim_pblock *b = &p->xblocks[g * (k - 1) + c - 1];

		if (a->disk != b->disk || b->off != a->off + p->s->sc->be_pblock_bytes)
			return false;
	}
	return true;
}

static int path_allocated(void *lay, uint64_t off, uint64_t len, uint64_t *ret_len)
{
	(void)lay;
	(void)off;
	*ret_len = len;
	return 1;
}

static int path_map(void *lay, uint64_t off, uint64_t len, struct cw_extent *ret)
{
	const struct sim_path *p = lay;
	uint64_t pb = p->s->sc->be_pblock_bytes, ppp = p->s->be_part_bytes / pb;
	uint64_t b = off / pb, g = p->part * ppp + b;
	struct sim_pblock at;

	if (b >= ppp)
		return -ERANGE;
	if (p->failed)
		return sim_move_map(p->mv, p->part, off, CW_MIN(len, pb - off % pb), ret);
	at = path_block(p, g);
	*ret = (struct cw_extent){ .disk_id = at.disk + 1, .phys_offset = at.off + off % pb,
				   .length = CW_MIN(len, pb - off % pb) };
	/* following physically adjacent blocks, as cw_part_map does */
	while (ret->length < len && ++b < ppp) {
		struct sim_pblock next = path_block(p, ++g);

		if (next.disk != at.disk || next.off != at.off + pb || !copies_follow(p, g))
			break;
		ret->length = CW_MIN(len, ret->length + pb);
		at = next;
	}
	return 0;
}

/* A read of a cached block is the SSD's and counts as a hit (heating the
 * block, as cw_cache_route does); a write to one keeps the copy equal. */
static enum cw_cache_route path_route(void *lay, uint64_t off, uint64_t len, bool write,
				 struct cw_extent *ret_ssd)
{
	struct sim_path *p = lay;
	uint64_t pb = p->s->sc->be_pblock_bytes;
	uint64_t g = p->part * (p->s->be_part_bytes / pb) + off / pb;
	uint32_t slot = p->cslot[g];

	if (!write) {
		cw_cache_policy_hit(p->cache, g, slot);
		if (slot == UINT32_MAX) {
			(*p->misses)++;
			return CW_CACHE_ORIGIN;
		}
		(*p->hits)++;
	} else if (slot == UINT32_MAX) {
		return CW_CACHE_ORIGIN;
	}
	*ret_ssd = (struct cw_extent){ .disk_id = SIM_PATH_SSD,
				       .phys_offset = (uint64_t)slot * pb + off % pb, .length = len };
	return write ? CW_CACHE_BOTH : CW_CACHE_SSD;
}

static int path_mirrors(void *lay, uint64_t off, const struct cw_extent *ext, uint64_t *ret_skips,
		   struct cw_extent *ret, unsigned max)
{
	const struct sim_path *p = lay;

	return p->mv && !p->failed ? sim_move_mirrors(p->mv, p->part, off, ext->length, ret_skips, ret, max) : 0;
}

/* Every copy of the bytes at off: copy 0 where path_map says, the others
 * where the pool put them (every copy in sync until a disk fails; then
 * the run pool's answer). */
static int path_copies(void *lay, uint64_t off, struct cw_copy *ret)
{
	const struct sim_path *p = lay;
	unsigned k = p->s->sc->copies;
	uint64_t pb = p->s->sc->be_pblock_bytes, ppp = p->s->be_part_bytes / pb;
	uint64_t g = p->part * ppp + off / pb;
	struct sim_pblock at = path_block(p, g);

	if (off / pb >= ppp || !p->xblocks)
		return -ERANGE;
	if (p->failed)
		return sim_move_copies(p->mv, p->part, -1, off, ret);
	ret[0] = (struct cw_copy){ .disk_id = at.disk + 1, .phys_offset = at.off + off % pb,
				   .in_sync = true };
	for (unsigned c = 1; c < k; c++) {
		const struct sim_pblock *x = &p->xblocks[g * (k - 1) + c - 1];

		ret[c] = (struct cw_copy){ .disk_id = x->disk + 1,
					   .phys_offset = x->off + off % pb, .in_sync = true };
	}
	return 0;
}

static int path_disk(void *lay, uint32_t id, struct cw_path_disk *ret)
{
	const struct sim_path *p = lay;

	if (id == SIM_PATH_SSD)		/* a fixed time, whatever the length */
		*ret = (struct cw_path_disk){ .be_piece = UINT64_MAX };
	else if (id >= 1 && id <= p->s->sc->disks)
		*ret = (struct cw_path_disk){ .be_piece = p->s->be_piece_bytes };
	else
		return -ENODEV;
	return 0;
}

static int path_load(void *lay, uint32_t id, uint64_t phys_offset, struct cw_path_load *ret)
{
	const struct sim_path *p = lay;

	(void)phys_offset;
	if (id < 1 || id > p->s->sc->disks)
		return -ENODEV;
	*ret = p->loads ? p->loads[id - 1] : (struct cw_path_load){ 0 };
	return 0;
}

const struct cw_path_ops sim_path_ops = {
	.allocated = path_allocated, .map = path_map, .route = path_route,
	.mirrors = path_mirrors, .disk = path_disk, .copies = path_copies,
	.load = path_load,
};

int sim_path_split(struct sim_path *p, uint64_t off, uint64_t bytes, bool write,
		   int (*emit)(void *arg, const struct cw_path_piece *piece), void *arg)
{
	struct cw_path_req rq = {
		.offset = off, .length = bytes, .op = write ? CW_IO_WRITE : CW_IO_READ,
		.cached = p->cache != NULL,
		.block_size = (uint32_t)CW_MIN(p->s->sc->be_pblock_bytes, UINT32_MAX),
		.copies = p->xblocks ? p->s->sc->copies : 1,
	};

	return cw_path_split(&sim_path_ops, p, &rq, emit, arg);
}
