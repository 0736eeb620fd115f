/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Degraded service of mirrored partitions (issue "a guarantee that
 * survives a disk", item 4): a copy that fails is marked out of sync and
 * the partition goes on with the others.
 *
 *   - A write piece (or a FUA write's fdatasync, or a FLUSH's) that fails
 *     on one copy marks that copy of its blocks out of sync — the whole
 *     disk's copies for an fdatasync, since a failed flush says nothing
 *     of what it covered — durably (cw_part_copy_set_stale commits)
 *     before the piece counts as done, so before the request can be
 *     acknowledged.  The request then succeeds if each block it wrote
 *     still has a copy in sync: every such copy had the write, and a FUA
 *     write's or a FLUSH's fdatasync covered its disk (a copy whose flush
 *     failed is out of sync, not live).  Only when no copy of a block has
 *     it does the request fail with EIO.
 *   - A read piece that fails marks its copy out of sync the same way,
 *     and is read again from the next copy in sync once the request's
 *     other pieces are done; each retry leaves one more copy out of sync,
 *     so it ends, with EIO when no copy is left.
 *   - A disk whose mirrored pieces fail DISK_FAILED_ERRORS times within a
 *     second is taken for gone (a pulled drive, a dead file system): every
 *     copy on it is marked at once, so reads stop trying it block by block.
 *     So is one whose fdatasync for a client's flush or a mirrored write
 *     failed: it may have dropped writes, and its later flushes fail too.
 *   - A disk the daemon could not open at start has its copies marked out
 *     of sync before any export is made (pb_mirror_missing): their
 *     partitions are served from the survivors instead of not at all.
 *   - A disk taken for gone, or missing at start, is replaced by a spare
 *     of the pool with room for its blocks that carries the streams
 *     booked on it, as `cwctl disk replace` checks them
 *     (cw_admit_state_takeover, on the control thread: pb_takeover_tick):
 *     the mover rebuilds its copies there from the survivors at once,
 *     with no command.  When no spare carries them, the disk stays
 *     degraded with the reason logged and shown by cwctl
 *     (cw_disk_set_unreplaced): a spare too slow for the streams would
 *     break the guarantee it was kept for.
 *
 * Nothing here runs for a partition with one copy: lane.c calls in only
 * for a failed piece, and for a request whose mirror_state is set.  The
 * marks take the pool's lock and a transaction on the failing disk's
 * dispatcher thread: that lane serves nothing useful meanwhile.  The log
 * says so once per disk (struct disk's degraded).
 */
#include "config.h"

#include <clockwise/path.h>

#include "daemon/path/pool-internal.h"

/* Says once that disk d's copies are being marked out of sync. */
static void say_degraded(struct disk *d, const char *part, const char *why)
{
	if (!atomic_exchange(&d->degraded, true))
		cwd_log(LOG_WARNING, "disk %s (%s): %s; its copies of mirrored partitions are marked "
			"out of sync and served from the other copies (partition %s degraded)",
			d->name, d->path, why, part);
}

/* Disk id, gone, is to be replaced by a spare: on the control thread,
 * which owns the admission state (pb_takeover_tick). */
static void spare_takeover(struct pb *pb, uint32_t id)
{
	atomic_fetch_or(&pb->takeover[id / 64], UINT64_C(1) << (id % 64));
}

/* Disk id, gone: a spare replaces it if one carries the streams booked
 * on it, or the reason is logged and kept for cwctl. */
static void takeover(struct pb *pb, uint32_t id)
{
	struct cw_admit_takeover t;
	struct cw_disk_info di, si;
	int r;

	if (cw_disk_info(pb->pool, id, &di) < 0)
		return;
	r = cw_admit_state_takeover(pb->adm, id, &t, NULL);
	if (r < 0) {
		cwd_log(LOG_ERR, "disk %s is gone and no spare was tried: %s", di.name, strerror(-r));
		return;
	}
	if (t.spare && cw_disk_info(pb->pool, t.spare, &si) == 0) {
		cwd_log(LOG_WARNING, "disk %s is gone: spare %s replaces it, its copies are rebuilt "
			"there (%zu moves; cwctl move list)%s%s", di.name, si.name, t.n_moves,
			t.refused ? "; not by " : "", t.why);
		free(t.move_ids);
		pb_mover_kick(pb);
		return;
	}
	free(t.move_ids);
	if (!t.why[0])
		return;	/* it held nothing */
	(void)cw_disk_set_unreplaced(pb->pool, id, t.why);
	cwd_log(LOG_ERR, "disk %s is gone and no spare replaces it (%s): its copies stay out of "
		"sync and its partitions degraded; streams that survive a disk keep their "
		"deadlines on the copies left, but a second failure loses blocks.  Add a disk that "
		"carries them and run cwctl disk replace %s NEW", di.name, t.why, di.name);
}

void pb_takeover_tick(struct pb *pb)
{
	for (uint32_t w = 0; w < CW_ARRAY_SIZE(pb->takeover); w++) {
		uint64_t bits = atomic_exchange(&pb->takeover[w], 0);

		while (bits) {
			uint32_t b = (uint32_t)__builtin_ctzll(bits);

			bits &= bits - 1;
			takeover(pb, w * 64 + b);
		}
	}
}

/* Failures within one second that take a disk for gone. */
#define DISK_FAILED_ERRORS 8

/* Takes d for gone, once: every copy of mirrored partitions on it is
 * marked out of sync and a spare takes its place if the pool has one.
 * why: what failed; part: the partition whose request saw it. */
static void take_for_gone(struct pb *pb, struct disk *d, const char *part, const char *why)
{
	uint64_t marked = 0;
	int r;

	if (atomic_exchange(&d->failed, true))
		return;
	r = cw_pool_disk_set_stale(pb->pool, d->id, &marked);
	if (r < 0) {
		cwd_log(LOG_ERR, "disk %s: marking its copies out of sync: %s", d->name, strerror(-r));
		return;
	}
	cwd_log(LOG_WARNING, "disk %s (%s): %s: taken for gone, every copy of mirrored partitions "
		"on it marked out of sync (%" PRIu64 " more; partition %s and any other with copies "
		"there degraded)", d->name, d->path, why, marked, part);
	spare_takeover(pb, d->id);
}

/* Counts a failure of d; the DISK_FAILED_ERRORS-th within a second takes
 * it for gone. */
static void count_failure(struct pb *pb, struct disk *d, const char *part)
{
	int64_t sec = cw_now_ns() / 1000000000, was = atomic_load(&d->err_second);
	char why[64];

	if (atomic_load(&d->failed))
		return;
	if (was != sec && atomic_compare_exchange_strong(&d->err_second, &was, sec))
		atomic_store(&d->err_count, 0);
	if (atomic_fetch_add(&d->err_count, 1) + 1 != DISK_FAILED_ERRORS)
		return;
	snprintf(why, sizeof(why), "%d requests failed within a second", DISK_FAILED_ERRORS);
	take_for_gone(pb, d, part, why);
}

int pb_mirror_failed(struct lane *l, struct piece *p, int err)
{
	struct preq *q = p->req;
	struct pb *pb = q->x->pb;
	struct disk *d = l->disk;
	struct cw_part *part = q->x->part;
	uint64_t first, last;
	int r;

	if (cw_part_copies(part) < 2)
		return err;
	if (p->io.op == CW_IO_FSYNC) {
		/* Only a client's flush or a mirrored write's: the daemon's
		 * own (the mover's) must see its flush fail. */
		if (!q->nio && !q->intent_len)
			return err;
		r = cw_pool_disk_set_stale(pb->pool, d->id, NULL);
		if (r < 0) {
			cwd_log(LOG_ERR, "disk %s: marking its copies out of sync after a failed "
				"fdatasync: %s", d->name, strerror(-r));
			return err;
		}
		say_degraded(d, q->x->name, "an fdatasync failed");
		/* It may have dropped writes it took, and every later flush of
		 * it fails (lane.c): as good as gone, so a spare takes its
		 * place now rather than after failures that may never come
		 * (its copies out of sync, nothing but flushes reaches it). */
		take_for_gone(pb, d, q->x->name, "an fdatasync failed");
		atomic_fetch_or(&q->mirror_state, PREQ_DEGRADED);
		return 0;
	}
	first = p->part_off / pb->block_size;
	last = (p->part_off + CW_MAX(p->io.len, (size_t)1) - 1) / pb->block_size;
	r = cw_part_copy_set_stale(part, p->mirror - 1u, first, last - first + 1, true);
	if (r < 0) {
		cwd_log(LOG_ERR, "partition %s: marking copy %u of blocks %" PRIu64 "..%" PRIu64
			" out of sync: %s", q->x->name, p->mirror - 1u, first, last, strerror(-r));
		return err;
	}
	say_degraded(d, q->x->name, p->io.op == CW_IO_READ ? "a read failed" : "a write failed");
	count_failure(pb, d, q->x->name);
	if (p->io.op == CW_IO_READ) {
		p->retry = true;
		atomic_fetch_or(&q->mirror_state, PREQ_REREAD);
	} else {
		atomic_fetch_or(&q->mirror_state, PREQ_DEGRADED);
	}
	return 0;
}

static void fail(struct preq *q, int err)
{
	int zero = 0;

	atomic_compare_exchange_strong(&q->err, &zero, err);
}

/* Books q's failed reads again, each on the first copy in sync of its
 * bytes; returns how many. */
static unsigned reread(struct preq *q)
{
	struct pb *pb = q->x->pb;
	uint32_t nc = cw_part_copies(q->x->part);
	unsigned k = 0;

	for (unsigned i = 0; i < q->npieces; i++) {
		struct piece *p = &q->p[i];
		struct cw_copy cs[CW_COPIES_MAX];
		struct cw_io_req io = p->io;
		uint64_t part_off = p->part_off;
		int c, di;

		if (!p->retry)
			continue;
		if (cw_part_map_copies(q->x->part, part_off, cs) < 0 ||
		    (c = cw_path_read_copy(cs, nc)) < 0 || (di = pb_disk_index(pb, cs[c].disk_id)) < 0) {
			fail(q, -EIO);	/* no copy holds it any more */
			continue;
		}
		io.fd = pb->disks[di].fd;
		io.off = cs[c].phys_offset;
		io.user = &q->p[k];
		/* k <= i: the piece moves forward, its old fields read above */
		q->p[k] = (struct piece){ .req = q, .lane = &pb->disks[di].lanes[0],
					  .mirror = (uint8_t)(c + 1), .part_off = part_off, .io = io };
		k++;
	}
	return k;
}

bool pb_mirror_end(struct preq *q)
{
	unsigned st = atomic_exchange(&q->mirror_state, 0), k;
	struct cw_part *part = q->x->part;
	bool wrote = false;

	if ((st & PREQ_REREAD) && !atomic_load(&q->err)) {
		k = reread(q);
		if (k && !atomic_load(&q->err)) {
			atomic_store(&q->mirror_state, st & ~PREQ_REREAD);
			q->npieces = k;
			lane_push_pieces(q, 0, k);
			return true;
		}
	}
	if (!(st & PREQ_DEGRADED) || atomic_load(&q->err))
		return false;
	atomic_store(&q->mirror_state, st & ~PREQ_REREAD);	/* the flush phase checks again */
	/* Each block written has a copy in sync still. */
	for (unsigned i = 0; i < q->npieces; i++) {
		const struct piece *p = &q->p[i];
		uint64_t bs = q->x->pb->block_size, b;

		if (!p->mirror || p->io.op == CW_IO_READ || p->io.op == CW_IO_FSYNC)
			continue;
		wrote = true;
		for (b = p->part_off / bs; b <= (p->part_off + p->io.len - 1) / bs; b++) {
			struct cw_copy cs[CW_COPIES_MAX];

			if (cw_part_block_copies(part, b, cs) < 0 ||
			    cw_path_read_copy(cs, cw_part_copies(part)) < 0) {
				fail(q, -EIO);
				return false;
			}
		}
	}
	/* A FLUSH: every block of the partition has one. */
	if (!wrote && cw_part_lost_blocks(part))
		fail(q, -EIO);
	return false;
}

void pb_mirror_missing(struct pb *pb)
{
	struct cw_disk_info *infos = NULL;
	size_t n;

	if (cw_disk_list(pb->pool, &infos, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		uint64_t marked = 0;
		int r;

		if (pb_disk_index(pb, infos[i].id) >= 0)
			continue;
		r = cw_pool_disk_set_stale(pb->pool, infos[i].id, &marked);
		if (r < 0)
			cwd_log(LOG_ERR, "disk %s is not open: marking its copies out of sync: %s",
				infos[i].name, strerror(-r));
		else if (marked)
			cwd_log(LOG_WARNING, "disk %s is not open: %" PRIu64 " copies of blocks of "
				"mirrored partitions on it are marked out of sync; those partitions "
				"are served from the other copies (degraded)", infos[i].name, marked);
		if (r == 0 && !infos[i].spare)
			spare_takeover(pb, infos[i].id);
	}
	free(infos);
}
