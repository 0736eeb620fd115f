/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Submission, on the thread that submits (a connection's reader, or the
 * daemon's own: the keeper of holes, the mover, the caches' worker): a
 * request becomes pieces, one per disk run, as cw_path_split decides
 * (holes, the block map, the cache's route, a moving block's mirror, a
 * mirrored partition's copies, the class and the best-effort cut), and
 * each piece is booked in its lane's
 * slot record (lane.c).  No mutex: the map is lock-free and so is the
 * booking.  A FUA write carries its flush pieces, which the lanes push
 * once its writes are done; a request ends in preq.c.  See pool-backend.c
 * for the whole path.
 */
#include "config.h"

#include <clockwise/path.h>

#include "daemon/path/pool-internal.h"

static struct lane *piece_lane(struct pb *pb, uint32_t disk_index, uint64_t phys_off)
{
	struct disk *d = &pb->disks[disk_index];

	if (d->nlanes == 1 || atomic_load_explicit(&d->live_streams, memory_order_relaxed))
		return &d->lanes[0];
	return &d->lanes[(phys_off / pb->block_size) % d->nlanes];
}

static void piece_init_flush(struct preq *q, struct piece *p, struct pb *pb, uint32_t di)
{
	struct disk *d = &pb->disks[di];

	*p = (struct piece){ .req = q, .lane = &d->lanes[0] };
	p->io = (struct cw_io_req){ .fd = d->fd, .op = CW_IO_FSYNC, .user = p };
}

/* A flush piece for each of the first n disks of the export, from piece
 * `at` on. */
static void add_flush_pieces(struct preq *q, unsigned at, unsigned n)
{
	struct pbx *x = q->x;
	unsigned i;

	for (i = 0; i < n; i++)
		piece_init_flush(q, &q->p[at + i], x->pb, x->disks[i]);
}

/* A request of npieces pieces for x: a client's (nio) or the daemon's
 * own (done(arg, err) when it ends), arriving now, no flush phase yet. */
static struct preq *preq_start(struct pbx *x, size_t npieces, struct nbdsrv_io *nio,
			       void (*done)(void *arg, int err), void *arg)
{
	struct preq *q = preq_new(x->pb, npieces);

	if (!q)
		return NULL;
	q->nio = nio;
	q->done = done;
	q->done_arg = arg;
	q->x = x;
	q->cl = pb_client_of(x, nio);
	q->arrival_ns = cw_now_ns();
	/* A request that waited on its connection while the reader could
	 * not run is released from when it came. */
	q->parked_ns = 0;
	q->reader_cpu_ns = -1;
	q->parked_memory = false;
	if (nio && nio->arrived_ns > 0 && nio->arrived_ns < q->arrival_ns) {
		q->parked_ns = CW_MIN(nio->parked_ns, q->arrival_ns - nio->arrived_ns);
		q->arrival_ns = nio->arrived_ns;
		q->parked_memory = nio->parked_memory;
	}
	atomic_init(&q->err, 0);
	atomic_init(&q->mirror_state, 0);
	q->intent_len = 0;
	q->fua = false;
	q->gate = NULL;
	q->npieces = 0;
	q->nflush = 0;
	return q;
}

/* What one submission asks for: a client's request (nio, done NULL) or
 * the daemon's own I/O (pb_submit_internal).  Bytes [off, off + len) of
 * the export, from or into buf; zero: written from the shared zero buffer
 * (WRITE) or, for PUNCH, written as zeros where a disk cannot punch (a
 * PUNCH without zero skips those disks); be_only: never a stream's. */
struct submission {
	struct nbdsrv_io *nio;
	uint64_t off, len;
	void *buf;
	enum cw_io_op op;
	bool zero, fua, be_only;
	void (*done)(void *arg, int err);
	void *done_arg;
};

/* A disk as the split sees it (cw_path_part's disk question). */
static int split_disk(void *arg, uint32_t disk_id, struct cw_path_disk *ret)
{
	struct pb *pb = arg;
	int di = pb_disk_index(pb, disk_id);

	if (di < 0)
		return di;
	*ret = (struct cw_path_disk){ .be_piece = pb->disks[di].be_piece,
				      .can_punch = pb->disks[di].can_punch };
	return 0;
}

/* A disk's load as a mirrored read's copy choice sees it
 * (cw_path_snake_copy): the vacancy of the lane the piece would be booked
 * in (its booked slots the dispatcher has not taken), then what is booked
 * on the disk's lanes and not complete. */
static int split_load(void *arg, uint32_t disk_id, uint64_t phys_off, struct cw_path_load *ret)
{
	struct pb *pb = arg;
	int di = pb_disk_index(pb, disk_id);
	struct disk *d;
	struct lane *l;
	int64_t ahead;
	uint64_t load = 0;

	if (di < 0)
		return di;
	d = &pb->disks[di];
	l = piece_lane(pb, (uint32_t)di, phys_off);
	ahead = atomic_load_explicit(&l->booked_end, memory_order_relaxed) - cw_slots_now(l->rec);
	for (unsigned i = 0; i < d->nlanes; i++)
		load += cwd_stats_get(&d->lanes[i].st.queued);
	*ret = (struct cw_path_load){ .vacancy_ns = ahead > 0 ? ahead * l->slot_ns : 0,
				      .load = load };
	return 0;
}

/* The request being split: its pieces so far and the disks they touch. */
struct split_out {
	struct pb *pb;
	struct preq *q;
	const struct submission *s;
	struct resv *rv;
	unsigned n, maxp, nt;
	bool seen[CW_DISKS_MAX + 1];
	uint32_t touched[CW_DISKS_MAX];
	struct piece *lead;	/* a mirrored write's IO piece, leading its thick booking */
	unsigned lead_n;	/* pieces in it */
};

/* A mirrored write's piece p on another copy (sp) joins the thick booking
 * its IO piece leads when it repeats all of it on a lane of its own with
 * slots as long, in the same class: best effort, or a recording stream's
 * (booked on every copy's disk).  A copy cut otherwise, a moving block's
 * destination, a cache copy, a piece of another class are booked alone. */
static void thick_join(struct split_out *o, struct piece *p, const struct cw_path_piece *sp)
{
	struct piece *l = o->lead, *q;

	if (sp->kind == CW_PATH_IO) {
		o->lead = sp->mirror && sp->op != CW_IO_READ ? p : NULL;
		o->lead_n = 1;
		return;
	}
	if (!l || !sp->mirror || sp->rt != l->rt || sp->op != l->io.op || p->part_off != l->part_off ||
	    p->io.len != l->io.len || p->lane->slot_ns != l->lane->slot_ns ||
	    o->lead_n >= CW_SLOTS_MAX_DISKS)
		return;
	for (q = l; q; q = q->thick_next)
		if (q->lane == p->lane)
			return;
	p->thick_lead = l;
	p->thick_next = l->thick_next;
	l->thick_next = p;
	o->lead_n++;
}

/* A piece of the split, booked as the lane's: a hole reads as zeros
 * here, without I/O. */
static int split_emit(void *arg, const struct cw_path_piece *sp)
{
	struct split_out *o = arg;
	struct pb *pb = o->pb;
	struct piece *p;
	int di;

	if (sp->kind == CW_PATH_HOLE) {
		memset((uint8_t *)o->s->buf + sp->buf_offset, 0, sp->length);
		return 0;
	}
	di = pb_disk_index(pb, sp->disk_id);
	if (di < 0)
		return di;
	if (o->n >= o->maxp)	/* cannot happen: cw_path_split_max bounds it */
		return -EIO;
	p = &o->q->p[o->n++];
	*p = (struct piece){ .req = o->q, .lane = piece_lane(pb, (uint32_t)di, sp->phys_offset),
			     .first_on_disk = sp->first_on_disk, .mirror = sp->mirror,
			     .part_off = o->s->off + sp->buf_offset };
	p->io = (struct cw_io_req){
		.fd = pb->disks[di].fd, .op = sp->op, .len = sp->length, .off = sp->phys_offset,
		.buf = sp->op == CW_IO_PUNCH ? NULL
		       : sp->zero ? pb->zeros : (uint8_t *)o->s->buf + sp->buf_offset,
		.user = p,
	};
	if (sp->rt) {
		p->rt = true;
		p->resv = o->rv;
	}
	if (!o->seen[sp->disk_id]) {
		o->seen[sp->disk_id] = true;
		o->touched[o->nt++] = (uint32_t)di;
	}
	return 0;
}

/* split_emit for a mirrored partition: a write's copies join their IO
 * piece's thick booking. */
static int split_emit_copies(void *arg, const struct cw_path_piece *sp)
{
	struct split_out *o = arg;
	int r = split_emit(arg, sp);

	if (r == 0 && sp->kind != CW_PATH_HOLE)
		thick_join(o, &o->q->p[o->n - 1], sp);
	return r;
}

/*
 * A stream's request smaller than its reservation's block.  Each request
 * is one job of the stream all the same (cw_sched releases a job a period
 * after the one before, the sporadic task admission booked), so a client
 * that cuts its blocks in two is served at half the stream's rate, and
 * falls behind with no deadline of the daemon's missed.  The kernel's NBD
 * client does this by default: it sends at most the device's
 * max_sectors_kb (128 KiB) per request.  Counted (stats:
 * short_requests) and said once per reservation.
 */
static void resv_short(const struct pbx *x, struct resv *rv, uint64_t len)
{
	cwd_stats_add(&rv->st.rt_short, 1);
	if (atomic_flag_test_and_set(&rv->short_told))
		return;
	cwd_log(LOG_WARNING, "export %s: a request of %" PRIu64 " bytes under reservation %" PRIu64
		" of %" PRIu64 "-byte blocks: each request is one of the stream's blocks, released a "
		"period after the one before, so requests smaller than the block give the stream less "
		"than its rate (a kernel NBD client sends at most /sys/block/nbdN/queue/max_sectors_kb "
		"per request: raise it to the block size, or reserve the block the client sends)",
		x->name, len, rv->a->id, rv->a->block_bytes);
}

/* Splits (cw_path_split) and books a submission, inside the partition's
 * I/O gate. */
static int submit(struct pbx *x, const struct submission *s)
{
	struct pb *pb = x->pb;
	struct cw_cache *cache = cw_part_cache(x->part);
	struct resv *rv = s->be_only ? NULL : x->resv;
	struct cw_path_part lay = { .part = x->part, .cache = cache, .disk = split_disk,
				    .disk_arg = pb, .load = split_load };
	struct cw_path_req rq = { .offset = s->off, .length = s->len, .op = s->op,
				  .zero = s->zero, .cached = cache != NULL,
				  .block_size = pb->block_size, .zero_chunk = ZERO_CHUNK,
				  .resv = rv ? rv->a : NULL, .copies = cw_part_copies(x->part) };
	size_t maxp = cw_path_split_max(&rq);
	/* FUA flushes each disk touched, and there are no more of those
	 * than pieces (disks may be added meanwhile: not pb->ndisks). */
	unsigned nflush = s->fua ? (unsigned)CW_MIN(maxp, CW_DISKS_MAX) : 0, i;
	struct split_out *o;
	struct preq *q;
	int r;

	q = preq_start(x, maxp + nflush, s->nio, s->done, s->done_arg);
	if (!q)
		return -ENOMEM;
	/* A mirrored write: its regions recorded dirty, durably, before
	 * any copy is written (the write-intent record; preq_finish ends
	 * it).  The one test a single copy pays. */
	if (rq.copies > 1 && s->op != CW_IO_READ) {
		r = cw_part_intent_begin(x->part, s->off, s->len);
		if (r < 0) {
			preq_free(q);
			return r;
		}
		q->intent_off = s->off;
		q->intent_len = s->len;
	}
	q->gate = x->part;
	q->gate_ticket = cw_part_io_begin(x->part);
	/* Inside the gate: a cache is freed only after a drain. */
	if (cache != cw_part_cache(x->part)) {
		cw_part_io_end(x->part, q->gate_ticket);
		cw_part_intent_end(x->part, q->intent_off, q->intent_len);
		preq_free(q);
		return submit(x, s);	/* the cache changed meanwhile */
	}
	if (rv && s->nio && s->len < rv->a->block_bytes && !s->zero &&
	    (s->op == CW_IO_READ || s->op == CW_IO_WRITE) &&
	    s->off + s->len < rv->a->range_end_bytes &&
	    cw_path_in_resv(rv->a, s->off, s->len, q->arrival_ns))
		resv_short(x, rv, s->len);
	o = &(struct split_out){ .pb = pb, .q = q, .s = s, .rv = rv, .maxp = (unsigned)maxp };
	lane_plug();	/* the NBD reader calls pb_unplug before it blocks */
	rq.arrival_ns = q->arrival_ns;
	r = cw_path_split(&cw_path_part_ops, &lay, &rq,
			  rq.copies > 1 ? split_emit_copies : split_emit, o);
	if (r < 0) {
		cw_part_io_end(x->part, q->gate_ticket);
		cw_part_intent_end(x->part, q->intent_off, q->intent_len);
		preq_free(q);
		return r;
	}
	if (o->n == 0) {	/* holes only, or nothing to punch */
		preq_finish(q);
		return 0;
	}
	q->npieces = o->n;
	/* FUA: once every piece is written, fdatasync the disks it touched. */
	q->nflush = nflush ? o->nt : 0;
	q->fua = q->nflush > 0;
	for (i = 0; i < q->nflush; i++)
		piece_init_flush(q, &q->p[o->n + i], pb, o->touched[i]);
	lane_push_pieces(q, 0, o->n);
	return 0;
}

/* Maps and books a READ (holes read as zeros, without I/O), WRITE or
 * (zero: from the shared zero buffer, in ZERO_CHUNK pieces) WRITE_ZEROES. */
int pb_submit_rw(struct pbx *x, struct nbdsrv_io *nio, enum cw_io_op op, bool zero)
{
	return submit(x, &(struct submission){ .nio = nio, .off = nio->offset,
					       .len = nio->length, .buf = nio->buf, .op = op,
					       .zero = zero, .fua = nio->fua });
}

/* The daemon's own I/O on an export's bytes, as best effort. */
int pb_submit_internal(struct pbx *x, uint64_t off, uint64_t len, enum cw_io_op op,
		       void *buf, unsigned flags, void (*done)(void *arg, int err), void *arg)
{
	if (!done || len == 0 || off + len < off)
		return -EINVAL;
	return submit(x, &(struct submission){ .off = off, .len = len, .buf = buf, .op = op,
					       .zero = flags & PB_SUB_ZERO,
					       .fua = flags & PB_SUB_FUA, .be_only = true,
					       .done = done, .done_arg = arg });
}

/* An fdatasync of each disk marked in touched[] (by slot), as best effort
 * through the disks' first lanes; x's client is charged. */
int pb_flush_internal(struct pbx *x, const bool *touched,
		      void (*done)(void *arg, int err), void *arg)
{
	struct pb *pb = x->pb;
	unsigned n = 0, i;
	struct preq *q;

	for (i = 0; i < PB_DISKS_CAP; i++)
		n += touched[i];
	q = preq_start(x, n ? n : 1, NULL, done, arg);
	if (!q)
		return -ENOMEM;
	q->npieces = n;
	if (n == 0) {
		preq_finish(q);
		return 0;
	}
	lane_plug();
	for (i = 0, n = 0; i < PB_DISKS_CAP; i++)
		if (touched[i])
			piece_init_flush(q, &q->p[n++], pb, i);
	lane_push_pieces(q, 0, n);
	return 0;
}

int pb_submit_disk(struct pbx *x, uint32_t disk_id, enum cw_io_op op, uint64_t off,
		   uint64_t len, void *buf, void (*done)(void *arg, int err), void *arg)
{
	struct pb *pb = x->pb;
	int di = pb_disk_index(pb, disk_id);
	uint64_t piece, at = 0;
	unsigned n = 0;
	struct preq *q;

	if (di < 0)
		return di;
	if (!done || (op != CW_IO_FSYNC && (len == 0 || off + len < off)))
		return -EINVAL;
	piece = pb->disks[di].be_piece;
	q = preq_start(x, op == CW_IO_FSYNC ? 1 : (len + piece - 1) / piece, NULL, done, arg);
	if (!q)
		return -ENOMEM;
	lane_plug();
	if (op == CW_IO_FSYNC)
		piece_init_flush(q, &q->p[n++], pb, (uint32_t)di);
	while (op != CW_IO_FSYNC && at < len) {
		struct piece *p = &q->p[n++];
		uint64_t l = CW_MIN(len - at, piece);

		*p = (struct piece){ .req = q, .lane = piece_lane(pb, (uint32_t)di, off + at) };
		p->io = (struct cw_io_req){ .fd = pb->disks[di].fd, .op = op, .len = l,
					    .off = off + at, .buf = (uint8_t *)buf + at, .user = p };
		at += l;
	}
	q->npieces = n;
	lane_push_pieces(q, 0, n);
	return 0;
}

/* FLUSH: an fdatasync on every disk of x's list, counted in
 * x->flush_readers while it reads the list (pb_export_drop_disk waits for
 * those). */
int pb_submit_flush(struct pbx *x, struct nbdsrv_io *nio)
{
	unsigned nd;
	struct preq *q;
	int r = 0;

	atomic_fetch_add(&x->flush_readers, 1);
	nd = atomic_load(&x->ndisks);
	if (!nd) {
		nbdsrv_io_complete(nio, 0);
		goto out;
	}
	q = preq_start(x, nd, nio, NULL, NULL);
	if (!q) {
		r = -ENOMEM;
		goto out;
	}
	lane_plug();
	q->npieces = nd;
	add_flush_pieces(q, 0, nd);
	lane_push_pieces(q, 0, q->npieces);
out:
	atomic_fetch_sub(&x->flush_readers, 1);
	return r;
}
