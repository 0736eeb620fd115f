/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The request split (clockwise/path.h): one pass over a request's bytes,
 * run by run, asking the layout what it needs at each step, in this
 * order — whether the run holds data (a READ of a hole is zeros), where
 * the map puts it, whether it is the stream's on that disk (Bosch &
 * Mullender section 3: a reservation's requests inside its range and
 * span are real-time on the disks it books), the best-effort cut at the
 * disk's piece, the cache's route (a read of a cached block is the SSD
 * copy's; a write keeps the copy equal), a disk that cannot punch, and,
 * for a write, the destinations of blocks being moved, the cache copy and
 * the partition's other copies (each with its own moving destination); a
 * read of a mirrored partition is served by one in-sync copy, RADIR's
 * snake request (section III-B): a stream's by the rule its admission
 * charged each disk by (cw_admit_snake_pick over the copies in sync, so a
 * disk never sees more of a stream than it was booked for; in a failure
 * case only a stream admitted to survive it keeps its class), a
 * best-effort one's on the copy whose disk would finish it first (the
 * record's first vacancy, then the load: getMinDiskSlot, section IV-D).
 * A write goes to every copy in sync (its IO piece to the first, COPY
 * pieces to the others), as best effort on a mirrored partition unless
 * its stream records (its reservation charged every copy): a copy
 * out of sync is not written, since nothing reads it before a resync
 * rewrites it whole.
 *
 * Invariants: the pieces of kind IO and HOLE cover [offset, offset +
 * length) exactly once, in order (but for a PUNCH skipped where a disk
 * cannot punch and zero is not set); a COPY follows the IO piece it
 * repeats, with its buffer bytes; a write reaches every copy of its
 * partition in sync, each copy's pieces covering the same bytes; a piece is
 * longer than its disk's BE piece only when real-time; a zero write is at
 * most zero_chunk long.
 */
#include "config.h"

#include <errno.h>

#include <clockwise/mover.h>
#include <clockwise/path.h>

#include "common/util.h"

bool cw_path_in_resv(const struct cw_admit_resv *a, uint64_t offset, uint64_t length,
		     int64_t now)
{
	return a && offset >= a->range_start_bytes && offset + length <= a->range_end_bytes &&
	       now >= a->span_start_ns && (a->span_end_ns == 0 || now < a->span_end_ns);
}

int cw_path_read_copy(const struct cw_copy *copies, unsigned n)
{
	for (unsigned c = 0; c < n; c++)
		if (copies[c].in_sync)
			return (int)c;
	return -ENODATA;
}

int cw_path_snake_copy(const struct cw_copy *copies, unsigned n,
		       const struct cw_path_load *loads)
{
	int best = -ENODATA;

	for (unsigned c = 0; c < n; c++) {
		const struct cw_path_load *a = &loads[c], *b;

		if (!copies[c].in_sync)
			continue;
		b = best >= 0 ? &loads[best] : NULL;
		/* getMinDiskSlot: fewer slots to wait, then the lower load */
		if (!b || a->vacancy_ns < b->vacancy_ns ||
		    (a->vacancy_ns == b->vacancy_ns && a->load < b->load))
			best = (int)c;
	}
	return best;
}

static bool booked_on(const uint32_t *booked, unsigned n_booked, uint32_t disk_id)
{
	if (!booked)
		return true;
	for (unsigned i = 0; i < n_booked; i++)
		if (booked[i] == disk_id)
			return true;
	return false;
}

int cw_path_stream_copy(const struct cw_copy *copies, unsigned n, uint64_t request,
			const uint32_t *booked, unsigned n_booked, bool *ret_normal)
{
	uint32_t ids[CW_COPIES_MAX];
	unsigned at[CW_COPIES_MAX], m = 0;

	/* the copies in sync where the stream is booked; else any in sync */
	for (int any = 0; any < 2 && m == 0; any++)
		for (unsigned c = 0; c < n && c < CW_COPIES_MAX; c++)
			if (copies[c].in_sync &&
			    (any || booked_on(booked, n_booked, copies[c].disk_id))) {
				ids[m] = copies[c].disk_id;
				at[m++] = c;
			}
	*ret_normal = m == n;
	for (unsigned i = 0; i < m && *ret_normal; i++)
		*ret_normal = booked_on(booked, n_booked, ids[i]);
	if (m == 0)
		return -ENODATA;
	return (int)at[cw_admit_snake_pick(request, ids, m)];
}

size_t cw_path_split_max(const struct cw_path_req *rq)
{
	uint64_t chunk = rq->zero ? rq->zero_chunk : UINT32_MAX;
	uint64_t least = CW_MIN(CW_MIN((uint64_t)rq->block_size, chunk), CW_ADMIT_BE_PIECE_HDD);
	/* a piece per least bytes and per block; the mirrors of moving
	 * blocks as many again and a block's; the cache copies as many */
	size_t base = rq->length / least + rq->length / rq->block_size + 3;
	size_t copies = rq->copies > 1 ? rq->copies : 1;

	if (rq->op == CW_IO_READ)	/* holes end at blocks */
		return base + rq->length / rq->block_size + 2;
	/* each copy as many as copy 0, with its moving blocks' mirrors */
	return copies * (base + base + rq->block_size / least + 2) + (rq->cached ? base : 0);
}

/* What the split keeps between pieces. */
struct split {
	const struct cw_path_ops *ops;
	void *lay;
	const struct cw_path_req *rq;
	int (*emit)(void *arg, const struct cw_path_piece *p);
	void *arg;
	bool seen[CW_DISKS_MAX + 1];	/* by disk id: the request has a piece there */
};

static bool rt_on(const struct split *s, bool rt, uint32_t disk_id)
{
	return rt && cw_admit_resv_part_on(s->rq->resv, disk_id);
}

static int disk_of(const struct split *s, uint32_t disk_id, struct cw_path_disk *ret)
{
	if (disk_id > CW_DISKS_MAX)
		return -ENODEV;
	return s->ops->disk(s->lay, disk_id, ret);
}

/* The copy a read of the bytes at off (cs: every copy) is served from: a
 * stream's (rt: inside its range and span) by the rule admission charged
 * (cw_path_stream_copy), and *ret_rt whether it stays the stream's (in a
 * failure case only if it was admitted to survive); a best-effort one's
 * where it completes first (cw_path_snake_copy, the disks' loads asked). */
static int read_copy(struct split *s, uint64_t off, const struct cw_copy *cs, bool rt,
		     bool *ret_rt)
{
	const struct cw_path_req *rq = s->rq;
	struct cw_path_load loads[CW_COPIES_MAX] = { { 0 } };
	uint32_t n = CW_MIN(rq->copies, CW_COPIES_MAX);
	bool normal;
	int c;

	*ret_rt = false;
	if (rt) {
		const struct cw_admit_resv *a = rq->resv;

		uint32_t booked[CW_COPIES_MAX];
		unsigned nb = 0;

		/* the copies' disks the stream is booked on */
		for (uint32_t i = 0; i < n; i++)
			if (cw_admit_resv_part_on(a, cs[i].disk_id))
				booked[nb++] = cs[i].disk_id;
		c = cw_path_stream_copy(cs, n, (off - a->range_start_bytes) / a->block_bytes,
					booked, nb, &normal);
		*ret_rt = c >= 0 && (normal || a->survive);
		return c;
	}
	if (!s->ops->load)
		return cw_path_read_copy(cs, n);
	for (uint32_t i = 0; i < n; i++) {
		int r = cs[i].in_sync ? s->ops->load(s->lay, cs[i].disk_id, cs[i].phys_offset,
						     &loads[i]) : 0;

		if (r < 0)
			return r;
	}
	return cw_path_snake_copy(cs, n, loads);
}

/* The pieces that repeat the write p, its bytes from skip on, on extent
 * m (a moving block's destination, the block's cache copy, another copy
 * of the partition: mirror, that copy's number + 1, else 0).  A stream's
 * piece repeated on a disk where its reservation is booked too (a move
 * books it where the block goes) is the stream's there. */
static int copy(struct split *s, const struct cw_path_piece *p, uint64_t skip, uint8_t mirror,
		const struct cw_extent *m)
{
	struct cw_path_disk d;
	enum cw_io_op op = p->op;
	bool zero = p->zero;
	bool rt = rt_on(s, p->rt, m->disk_id);
	uint64_t done = 0;
	int r = disk_of(s, m->disk_id, &d);

	if (r < 0)
		return r;
	if (op == CW_IO_PUNCH && !d.can_punch) {
		op = CW_IO_WRITE;	/* the destination cannot punch: zeros */
		zero = true;
	}
	while (done < m->length) {
		uint64_t len = rt ? m->length - done : CW_MIN(m->length - done, d.be_piece);
		struct cw_path_piece c = {
			.kind = CW_PATH_COPY, .op = op, .disk_id = m->disk_id,
			.phys_offset = m->phys_offset + done, .buf_offset = p->buf_offset + skip + done,
			.zero = zero, .rt = rt, .first_on_disk = rt && done == 0 && !s->seen[m->disk_id],
			.mirror = mirror,
		};

		if (zero)
			len = CW_MIN(len, s->rq->zero_chunk);
		c.length = len;
		r = s->emit(s->arg, &c);
		if (r < 0)
			return r;
		done += len;
	}
	if (m->length)
		s->seen[m->disk_id] = true;
	return 0;
}

/* The write p (at partition offset off, on extent e) repeated on the
 * destinations of the blocks of e being moved. */
static int mirrors(struct split *s, const struct cw_path_piece *p, uint64_t off,
		   const struct cw_extent *e)
{
	struct cw_extent ms[CW_MOVER_DEPTH_MAX];
	uint64_t skips[CW_MOVER_DEPTH_MAX];
	int nm, r;

	if (!s->ops->mirrors)
		return 0;
	nm = s->ops->mirrors(s->lay, off, e, skips, ms, CW_MOVER_DEPTH_MAX);
	if (nm < 0)
		return nm;
	for (int j = 0; j < nm; j++)
		if ((r = copy(s, p, skips[j], 0, &ms[j])) < 0)
			return r;
	return 0;
}

/* The write p (at partition offset off, length bytes, on copy p->mirror
 * - 1) repeated on every other copy of the partition in sync (cs, where
 * each holds those bytes), each with the destination of its block if it
 * is being moved. */
static int copies_write(struct split *s, const struct cw_path_piece *p, uint64_t off,
			const struct cw_copy *cs, uint64_t length)
{
	int r;

	for (uint32_t c = 0; c < s->rq->copies; c++) {
		struct cw_extent m = { .disk_id = cs[c].disk_id, .phys_offset = cs[c].phys_offset,
				       .length = length };
		/* The copy's own piece, as mirrors() sees it: where its
		 * moving block's source is. */
		struct cw_path_piece pc = *p;

		if (c + 1 == p->mirror || !cs[c].in_sync)
			continue;
		pc.disk_id = m.disk_id;
		pc.phys_offset = m.phys_offset;
		pc.length = length;
		if ((r = copy(s, p, 0, (uint8_t)(c + 1), &m)) < 0 ||
		    (r = mirrors(s, &pc, off, &m)) < 0)
			return r;
	}
	return 0;
}

int cw_path_split(const struct cw_path_ops *ops, void *lay, const struct cw_path_req *rq,
		  int (*emit)(void *arg, const struct cw_path_piece *p), void *arg)
{
	struct split s = { .ops = ops, .lay = lay, .rq = rq, .emit = emit, .arg = arg };
	uint64_t off = rq->offset, end = rq->offset + rq->length;
	uint64_t chunk = rq->zero ? rq->zero_chunk : UINT32_MAX;
	uint64_t bs = rq->block_size;
	bool rt = cw_path_in_resv(rq->resv, rq->offset, rq->length, rq->arrival_ns);
	int r;

	if (end < off || bs == 0 || (rq->zero && rq->zero_chunk == 0))
		return -EINVAL;
	while (off < end) {
		uint64_t want = CW_MIN(end - off, chunk);
		struct cw_extent e, ce;
		struct cw_copy cs[CW_COPIES_MAX];
		struct cw_path_disk d;
		enum cw_io_op op = rq->op;
		enum cw_cache_route cr = CW_CACHE_ORIGIN;
		struct cw_path_piece p;
		bool prt, rt_here = rt;	/* the stream's, where its disk is booked */
		int mc = 0;	/* the copy the IO piece is on */

		if (rq->cached)	/* one block at a time: each has its own route */
			want = CW_MIN(want, bs - off % bs);
		if (op == CW_IO_READ) {
			r = ops->allocated(lay, off, want, &want);
			if (r < 0)
				return r;
			if (r == 0) {
				p = (struct cw_path_piece){ .kind = CW_PATH_HOLE, .op = op,
							    .length = want,
							    .buf_offset = off - rq->offset };
				if ((r = emit(arg, &p)) < 0)
					return r;
				off += want;
				continue;
			}
		}
		r = ops->map(lay, off, want, &e);
		if (r < 0)
			return r;
		if (rq->copies > 1) {
			/* A read from the copy that serves it, a write first to
			 * the first copy in sync (copy 0 while it is). */
			if ((r = ops->copies(lay, off, cs)) < 0)
				return r;
			/* A stream's write on a mirrored partition is best
			 * effort (its reservation books each copy's disk for
			 * the reads snake sends it), but a recording stream's,
			 * booked on every copy for every request. */
			mc = op == CW_IO_READ ? read_copy(&s, off, cs, rt, &rt_here) :
			     cw_path_read_copy(cs, rq->copies);
			if (op != CW_IO_READ)
				rt_here = rt && rq->resv->record;
			if (mc < 0)
				return mc == -ENODATA ? -EIO : mc;	/* no copy holds the data */
			e.disk_id = cs[mc].disk_id;
			e.phys_offset = cs[mc].phys_offset;
		}
		if ((r = disk_of(&s, e.disk_id, &d)) < 0)
			return r;
		prt = rt_on(&s, rt_here, e.disk_id);
		if (!prt && e.length > d.be_piece)
			e.length = d.be_piece;	/* fits in less slack */
		if (rq->cached)
			cr = ops->route(lay, off, e.length, op != CW_IO_READ, &ce);
		if (cr == CW_CACHE_SSD) {
			/* Served by the cache copy: the stream's where it is booked
			 * on the cache's disk (cw_admit_state_cache_sync), else
			 * best effort. */
			if ((r = disk_of(&s, ce.disk_id, &d)) < 0)
				return r;
			e = ce;
			prt = rt_on(&s, rt, e.disk_id);
			if (!prt && e.length > d.be_piece)
				e.length = d.be_piece;
		}
		if (op == CW_IO_PUNCH && !d.can_punch) {
			if (!rq->zero) {
				off += e.length;	/* nothing to give back here */
				continue;
			}
			op = CW_IO_WRITE;
			e.length = CW_MIN(e.length, (uint64_t)rq->zero_chunk);
		}
		p = (struct cw_path_piece){
			.kind = CW_PATH_IO, .op = op, .disk_id = e.disk_id,
			.phys_offset = e.phys_offset, .length = e.length,
			.buf_offset = off - rq->offset, .zero = rq->zero && op != CW_IO_PUNCH,
			.rt = prt, .first_on_disk = !s.seen[e.disk_id],
			.mirror = rq->copies > 1 ? (uint8_t)(mc + 1) : 0,
		};
		s.seen[e.disk_id] = true;
		if ((r = emit(arg, &p)) < 0)
			return r;
		if (op != CW_IO_READ) {
			/* Blocks being moved, and a cache copy that stays equal. */
			if ((r = mirrors(&s, &p, off, &e)) < 0)
				return r;
			if (cr == CW_CACHE_BOTH) {
				ce.length = e.length;
				if ((r = copy(&s, &p, 0, 0, &ce)) < 0)
					return r;
			}
			if (rq->copies > 1 && (r = copies_write(&s, &p, off, cs, e.length)) < 0)
				return r;
		}
		off += e.length;
	}
	return 0;
}

/* ---- a real partition's answers ---- */

static int part_allocated(void *lay, uint64_t offset, uint64_t length, uint64_t *ret_length)
{
	return cw_part_allocated(((struct cw_path_part *)lay)->part, offset, length, ret_length);
}

static int part_map(void *lay, uint64_t offset, uint64_t length, struct cw_extent *ret)
{
	return cw_part_map(((struct cw_path_part *)lay)->part, offset, length, ret);
}

static enum cw_cache_route part_route(void *lay, uint64_t offset, uint64_t length, bool write,
				      struct cw_extent *ret_ssd)
{
	struct cw_cache *c = ((struct cw_path_part *)lay)->cache;

	return c ? cw_cache_route(c, offset, length, write, ret_ssd) : CW_CACHE_ORIGIN;
}

static int part_mirrors(void *lay, uint64_t offset, const struct cw_extent *ext,
			uint64_t *ret_skips, struct cw_extent *ret_mirrors, unsigned max)
{
	return cw_part_write_mirrors(((struct cw_path_part *)lay)->part, offset, ext, ret_skips,
				     ret_mirrors, max);
}

static int part_copies(void *lay, uint64_t offset, struct cw_copy *ret)
{
	return cw_part_map_copies(((struct cw_path_part *)lay)->part, offset, ret);
}

static int part_load(void *lay, uint32_t disk_id, uint64_t phys_offset,
		     struct cw_path_load *ret)
{
	struct cw_path_part *pp = lay;

	if (!pp->load) {
		*ret = (struct cw_path_load){ 0 };
		return 0;
	}
	return pp->load(pp->disk_arg, disk_id, phys_offset, ret);
}

static int part_disk(void *lay, uint32_t disk_id, struct cw_path_disk *ret)
{
	struct cw_path_part *pp = lay;

	return pp->disk(pp->disk_arg, disk_id, ret);
}

const struct cw_path_ops cw_path_part_ops = {
	.allocated = part_allocated,
	.map = part_map,
	.route = part_route,
	.mirrors = part_mirrors,
	.disk = part_disk,
	.copies = part_copies,
	.load = part_load,
};
