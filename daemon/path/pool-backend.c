/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The data path of clockwised (Bosch & Mullender, section 3): NBD
 * request -> partition block map -> one piece per disk run -> the lane's
 * slot record -> its dispatcher -> the policy -> the I/O engine.
 *
 * Submission takes no mutex.  The connection thread maps the request with
 * the lock-free cw_part_map(), then books every piece in its lane's slot
 * reservation record (see "intake" below) and wakes the lane only if it
 * sleeps.  The dispatcher takes the committed bookings in slot order (or,
 * on an idle lane without streams, the reader itself: see lane.c).
 *
 * Dispatch.  A disk that carries admitted streams runs the scheduling core
 * (cw_sched: ΔL, EDF or LST) on its first lane with one request in service,
 * because the admission test models a non-preemptive single server: RT
 * pieces get from it release = max(arrival, the stream's last release +
 * T) and deadline = release + T, the policy decides when BE pieces may run.  A disk without
 * streams has no deadline to protect; every policy then serves BE in
 * arrival order, so its lanes keep queue_depth requests in flight each.
 *
 * Completion.  The last piece of a request to finish completes it (one
 * atomic decrement); a FUA write then runs a second phase, an fdatasync on
 * every disk it touched, before the reply.  FLUSH is an fdatasync on every
 * disk of the partition.
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>

#include <clockwise/path.h>

#include "daemon/path/pool-internal.h"
#include "daemon/thread-name.h"

static const struct nbdsrv_backend_ops pb_ops;

/* ---- submission (connection threads) ---- */

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

static void push_pieces(struct preq *q, unsigned from, unsigned n)
{
	struct pb *pb = q->x->pb;
	unsigned i;

	atomic_store(&q->pending, n);
	for (i = 0; i < n; i++)
		cwd_stats_queue_change(&q->p[from + i].lane->st, 1);
	for (i = 0; i < n; i++) {
		struct piece *p = &q->p[from + i];
		int r = lane_push(pb, p);

		if (r < 0) {
			p->rt = false;
			lane_piece_done(p->lane, p, r, cw_now_ns());
		}
	}
}

static struct preq *preq_new(struct pb *pb, size_t npieces)
{
	struct preq *q;

	if (npieces <= PREQ_SMALL_PIECES) {
		q = lane_preq_get(pb);
		if (q)
			q->small = true;
		return q;
	}
	q = malloc(sizeof(*q) + npieces * sizeof(struct piece));
	if (q)
		q->small = false;
	return q;
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
	q->fua = false;
	q->gate = NULL;
	q->npieces = 0;
	q->nflush = 0;
	return q;
}

static void preq_free(struct preq *q)
{
	if (q->small)
		lane_preq_put(q->x->pb, q);
	else
		free(q);
}

/* An RT request whose pieces were all done in time must have its reply
 * leave in time too: the latest deadline of its pieces and one of their
 * lanes go with it to the NBD server, which says when it did not
 * (pb_reply_late).  Every piece is done: their fields are settled. */
static void rt_deadline(struct preq *q)
{
	int64_t deadline = 0, ready = 0;
	struct lane *l = NULL;

	for (unsigned i = 0; i < q->npieces; i++) {
		const struct piece *p = &q->p[i];

		if (!p->rt)
			continue;
		if (p->done_ns > p->sr.deadline_ns)
			return;	/* counted as the lane's miss already */
		deadline = CW_MAX(deadline, p->sr.deadline_ns);
		ready = CW_MAX(ready, p->done_ns);
		l = p->lane;
	}
	if (l) {
		q->nio->deadline_ns = deadline;
		q->nio->ready_ns = ready;
		q->nio->backend_data = l;
	}
}

static void preq_finish(struct preq *q)
{
	int err = atomic_load(&q->err);

	if (q->fua && !err) {
		q->fua = false;
		push_pieces(q, q->npieces, q->nflush);
		return;
	}
	if (q->gate)
		cw_part_io_end(q->gate, q->gate_ticket);
	if (q->done) {
		q->done(q->done_arg, err);
	} else {
		if (!err)
			rt_deadline(q);
		nbdsrv_io_complete(q->nio, err);
	}
	preq_free(q);
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

/* The request being split: its pieces so far and the disks they touch. */
struct split_out {
	struct pb *pb;
	struct preq *q;
	const struct submission *s;
	struct resv *rv;
	unsigned n, maxp, nt;
	bool seen[CW_DISKS_MAX + 1];
	uint32_t touched[CW_DISKS_MAX];
};

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
			     .first_on_disk = sp->first_on_disk };
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

/* Splits (cw_path_split) and books a submission, inside the partition's
 * I/O gate. */
static int submit(struct pbx *x, const struct submission *s)
{
	struct pb *pb = x->pb;
	struct cw_cache *cache = cw_part_cache(x->part);
	struct resv *rv = s->be_only ? NULL : x->resv;
	struct cw_path_part lay = { .part = x->part, .cache = cache, .disk = split_disk,
				    .disk_arg = pb };
	struct cw_path_req rq = { .offset = s->off, .length = s->len, .op = s->op,
				  .zero = s->zero, .cached = cache != NULL,
				  .block_size = pb->block_size, .zero_chunk = ZERO_CHUNK,
				  .resv = rv ? rv->a : NULL };
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
	q->gate = x->part;
	q->gate_ticket = cw_part_io_begin(x->part);
	/* Inside the gate: a cache is freed only after a drain. */
	if (cache != cw_part_cache(x->part)) {
		cw_part_io_end(x->part, q->gate_ticket);
		preq_free(q);
		return submit(x, s);	/* the cache changed meanwhile */
	}
	o = &(struct split_out){ .pb = pb, .q = q, .s = s, .rv = rv, .maxp = (unsigned)maxp };
	lane_plug();	/* the NBD reader calls pb_unplug before it blocks */
	rq.arrival_ns = q->arrival_ns;
	r = cw_path_split(&cw_path_part_ops, &lay, &rq, split_emit, o);
	if (r < 0) {
		cw_part_io_end(x->part, q->gate_ticket);
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
	push_pieces(q, 0, o->n);
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
static int pb_submit_internal(struct pbx *x, uint64_t off, uint64_t len, enum cw_io_op op,
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
static int pb_flush_internal(struct pbx *x, const bool *touched,
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
	push_pieces(q, 0, n);
	return 0;
}

static int pb_submit_disk(struct pbx *x, uint32_t disk_id, enum cw_io_op op, uint64_t off,
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
	push_pieces(q, 0, n);
	return 0;
}

/* For an export served partially: whether the block at off is on a
 * disk the data path does not have, and in *ret_len how many bytes from
 * off, at most len, are in the same state. */
static bool missing_run(struct pbx *x, uint64_t off, uint64_t len, uint64_t *ret_len)
{
	uint64_t bs = x->pb->block_size, at = off;
	bool first = false;

	for (;;) {
		uint32_t id;
		bool m = cw_part_block_disks(x->part, at / bs, 1, &id) < 0 ||
			 pb_disk_index(x->pb, id) < 0;

		if (at == off)
			first = m;
		else if (m != first)
			break;
		at = (at / bs + 1) * bs;
		if (at >= off + len)
			break;
	}
	*ret_len = CW_MIN(at, off + len) - off;
	return first;
}

/* Whether a request on [off, off + len) touches a missing block: it
 * fails whole with EIO, before anything is read or written. */
static bool touches_missing(struct pbx *x, uint64_t off, uint64_t len)
{
	uint64_t run;

	return x->missing && len && (missing_run(x, off, len, &run) || run < len);
}

static int pb_pread(void *backend, struct nbdsrv_io *io)
{
	if (touches_missing(backend, io->offset, io->length))
		return -EIO;
	return pb_submit_rw(backend, io, CW_IO_READ, false);
}

/* A write to blocks that all hold data goes to the lanes; one that
 * touches a hole first has the hole made a written block (pool-alloc.c). */
static int pb_pwrite(void *backend, struct nbdsrv_io *io)
{
	struct pbx *x = backend;

	if (touches_missing(x, io->offset, io->length))
		return -EIO;
	if (!pb_range_written(x, io->offset, io->length))
		return pb_alloc_queue(x, io);
	return pb_submit_rw(x, io, CW_IO_WRITE, false);
}

/* WRITE_ZEROES: with NO_HOLE, zeros are written (into blocks made
 * written first); without, whole blocks become holes and the partial
 * ones are punched or written.  FAST_ZERO refuses what needs writing. */
static int pb_zero(void *backend, struct nbdsrv_io *io)
{
	struct pbx *x = backend;

	if (touches_missing(x, io->offset, io->length))
		return -EIO;
	if (io->fast_zero &&
	    (!io->may_trim || !atomic_load_explicit(&x->can_punch, memory_order_relaxed)))
		return -ENOTSUP;
	if (!io->may_trim && pb_range_written(x, io->offset, io->length))
		return pb_submit_rw(x, io, CW_IO_WRITE, true);
	return pb_alloc_queue(x, io);
}

static int pb_flush(void *backend, struct nbdsrv_io *nio)
{
	struct pbx *x = backend;
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
	push_pieces(q, 0, q->npieces);
out:
	atomic_fetch_sub(&x->flush_readers, 1);
	return r;
}

/* TRIM: the whole blocks it covers become holes and give their space
 * back to the disk where it can punch (the blocks stay the partition's);
 * the partial ones are punched where the disk can. */
static int pb_trim(void *backend, struct nbdsrv_io *io)
{
	if (touches_missing(backend, io->offset, io->length))
		return -EIO;
	return pb_alloc_queue(backend, io);
}

/* CACHE: a hint.  A disk read through the page cache (one O_DIRECT
 * refused) is asked to read ahead the range's written blocks; a direct
 * disk has no cache of ours to fill, and the SSD tier's part (promoting
 * the range) belongs to the mover.  Holes need nothing. */
static int pb_cache(void *backend, struct nbdsrv_io *io)
{
	struct pbx *x = backend;
	uint64_t off = io->offset, end = off + io->length, run;
	int r;

	if (touches_missing(x, off, io->length))
		return -EIO;
	while (off < end) {
		r = cw_part_allocated(x->part, off, end - off, &run);
		if (r < 0)
			return r;
		for (uint64_t at = off; r == 1 && at < off + run;) {
			struct cw_extent e;
			int di;

			if (cw_part_map(x->part, at, off + run - at, &e) < 0)
				break;
			di = pb_disk_index(x->pb, e.disk_id);
			if (di >= 0 && !x->pb->disks[di].direct)
				(void)posix_fadvise(x->pb->disks[di].fd, (off_t)e.phys_offset,
						    (off_t)e.length, POSIX_FADV_WILLNEED);
			at += e.length;
		}
		off += run;
	}
	nbdsrv_io_complete(io, 0);
	return 0;
}

/* BLOCK_STATUS for base:allocation: the runs of written blocks and holes,
 * from the hole bits (no disk access, no lock).  A block on a missing
 * disk (an export served partially) is neither data nor zeros: a hole
 * whose contents are not known, which a copying client reads (and gets
 * EIO) rather than skips. */
static int pb_block_status(void *backend, struct nbdsrv_io *io)
{
	struct pbx *x = backend;
	struct cw_nbd_extent *ext = io->buf;
	uint32_t max = io->req_one ? 1 : NBD_EXTENTS_MAX, n = 0;
	uint64_t off = io->offset, end = off + io->length, run;

	while (off < end && n < max) {
		int r = cw_part_allocated(x->part, off, end - off, &run);

		bool missing = false;

		if (r < 0)
			return r;
		if (x->missing)
			missing = missing_run(x, off, run, &run);
		ext[n++] = (struct cw_nbd_extent){
			.length = (uint32_t)run,
			.status = missing ? CW_NBD_STATE_HOLE
				  : r ? 0 : CW_NBD_STATE_HOLE | CW_NBD_STATE_ZERO,
		};
		off += run;
	}
	io->n_extents = n;
	nbdsrv_io_complete(io, 0);
	return 0;
}

static void pb_unplug(void *backend)
{
	(void)backend;
	lane_unplug();
}

/* Called on the connection's own thread, which the server then raises to
 * this priority: it also goes to the real-time CPUs, if set. */
static int pb_rt_priority(void *backend)
{
	struct pbx *x = backend;

	if (!x->resv)
		return 0;
	/* Tried here too, so a refusal is noted for the guarantee. */
	(void)pb_thread_realtime(x->pb, 0);
	return (int)x->pb->cfg->rt_priority;
}

/* The reader of a connection asks now and then: one that holds the
 * export's real-time priority spends what its stream was admitted for. */
static uint64_t pb_cpu_budget(void *backend, bool rt, struct cw_host_model *ret_model)
{
	struct pbx *x = backend;

	return pb_host_budget(x->pb, rt ? x->resv : NULL, ret_model);
}

/* A read's holes, from the hole bits (no lock): read as zeros by the
 * connection's reader, no disk's time. */
static uint64_t pb_diskless_bytes(void *backend, uint64_t off, uint64_t len)
{
	struct pbx *x = backend;
	uint64_t end = off + len, n = 0, run;

	while (off < end) {
		int r = cw_part_allocated(x->part, off, end - off, &run);

		if (r < 0 || run == 0)
			return n + (end - off);
		if (r == 0)
			n += run;
		off += run;
	}
	return n;
}

void pb_guarantee_lacks(struct pb *pb, unsigned cond)
{
	atomic_fetch_or(&pb->conditions, cond);
}

void pb_guarantee(struct pb *pb, char *buf, size_t len)
{
	unsigned c = atomic_load(&pb->conditions);
	size_t at = 0;

	buf[0] = 0;
	if (c & PB_COND_RT)
		at += (size_t)snprintf(buf + at, len - at, "%sdispatchers of disks with streams at "
				       "normal priority", at ? "; " : "");
	if (c & PB_COND_MLOCK && at < len)
		at += (size_t)snprintf(buf + at, len - at, "%smemory not locked (it may be paged "
				       "out)", at ? "; " : "");
	if (c & PB_COND_CPUS && at < len)
		snprintf(buf + at, len - at, "%srt_cpus refused", at ? "; " : "");
}

/* The reply of an RT request done in time left late: a delivery miss of
 * its reservation (the export's binding cannot go while its connections
 * have requests in flight). */
static void pb_reply_late(void *backend, const struct nbdsrv_io *io,
			  const struct nbdsrv_late *late)
{
	struct pbx *x = backend;

	if (io->backend_data && x->resv)
		lane_miss_reply_late(io->backend_data, x->resv, io->deadline_ns, io->ready_ns,
				     late->began_ns, late->sent_ns, late->cpu_wait_ns);
}

static const struct nbdsrv_backend_ops pb_ops = {
	.rt_priority = pb_rt_priority,
	.cpu_budget = pb_cpu_budget,
	.diskless_bytes = pb_diskless_bytes,
	.reply_late = pb_reply_late,
	.pread = pb_pread,
	.pwrite = pb_pwrite,
	.flush = pb_flush,
	.trim = pb_trim,
	.zero = pb_zero,
	.cache = pb_cache,
	.block_status = pb_block_status,
	.unplug = pb_unplug,
};

/* ---- setup ---- */

static const char *const state_names[] = {
	[CW_DISK_PRESENT] = "present",
	[CW_DISK_MISSING] = "missing",
	[CW_DISK_WRONG_LABEL] = "holds another disk or no label",
	[CW_DISK_BAD_LABEL] = "has a corrupt label",
	[CW_DISK_SHRUNK] = "shrank (a file truncated?)",
};

/* Makes m the disk's model (a copy): what the sizes of its bookings and
 * the service of its BE pieces are estimated with from now on. */
static int disk_set_model(struct disk *d, const struct cw_model *m)
{
	struct disk_model *dm = calloc(1, sizeof(*dm));

	if (!dm)
		return -ENOMEM;
	dm->m = *m;
	dm->older = atomic_load_explicit(&d->model, memory_order_relaxed);
	atomic_store_explicit(&d->model, dm, memory_order_release);
	return 0;
}

static const char *const model_from[] = {
	[CW_ADMIT_MODEL_PRESET] = "the tier's preset",
	[CW_ADMIT_MODEL_CONFIG] = "the configuration",
	[CW_ADMIT_MODEL_STORED] = "the pool",
	[CW_ADMIT_MODEL_CALIBRATED] = "its calibration",
};

/* The model and plan admission holds for the disk (clockwise/admit-state.h:
 * a stored model outranks the configuration's, which outranks the tier's
 * preset). */
static int disk_first_model(struct pb *pb, struct disk *d)
{
	enum cw_admit_model_source src;
	struct cw_disk_plan plan;
	const char *from;
	struct cw_model m;
	int r;

	r = cw_admit_state_get_model(pb->adm, d->id, &m, &src);
	if (r == 0)
		r = cw_admit_state_plan(pb->adm, d->id, &plan);
	if (r == 0)
		r = disk_set_model(d, &m);
	if (r < 0) {
		cwd_log(LOG_ERR, "disk %s: no model: %s", d->name, strerror(-r));
		return r;
	}
	from = model_from[src];
	if (src == CW_ADMIT_MODEL_CONFIG && d->emulate && !strcmp(m.name, d->emulate->name))
		from = "the disk it emulates";
	d->be_piece = (uint32_t)plan.be_piece_bytes;
	atomic_store(&d->live_streams, plan.n_tasks > 0);
	cwd_log(LOG_INFO, "disk %s: model from %s; a best-effort piece (%" PRIu32 " KiB at "
		"most) takes %" PRId64 " us at worst; reserved for best effort: one every %"
		PRId64 " ms", d->name, from, d->be_piece >> 10, plan.be_max_ns / 1000,
		plan.be_reserve.period_ns / CW_NS_PER_MS);
	return 0;
}

/* The model the disk emulates: the configuration's (stored in the pool,
 * which cwctl status reads) or the one stored with cwctl disk add. */
static int disk_emulated(struct pb *pb, struct disk *d, const struct cwd_config_disk *cd)
{
	struct cw_model m;
	int r;

	if (cd && cd->emulate) {
		m = *cd->emulate;
		r = cw_disk_emulate_set(pb->pool, d->id, &m);
	} else {
		r = cw_disk_emulate_get(pb->pool, d->id, &m);
		if (r == -ENOENT)
			return 0;
	}
	if (r < 0) {
		cwd_log(LOG_ERR, "disk %s: %s", d->name, cw_pool_last_error(pb->pool)->msg);
		return r;
	}
	d->emulate = malloc(sizeof(*d->emulate));
	if (!d->emulate)
		return -ENOMEM;
	*d->emulate = m;
	/* one emulated disk, one engine keeping its time */
	d->nlanes = 1;
	return 0;
}

/* How long a disk's open waits for the I/O of a daemon before it. */
#define FENCE_WAIT_S 60

/*
 * A daemon killed with -9 may leave writes in flight in the kernel: the
 * teardown of an io_uring may run after its process is gone, and a
 * request punted to a kernel worker ends when it ends.  Such a write was
 * never acknowledged, so it may land or not; but landing after this
 * daemon served the block, it would change data under a client that read
 * it, and a move could copy it on.  Each request in flight holds a
 * reference to the file the dead daemon opened, so the flock() that
 * daemon took on it lasts until its last request ended: the disk is taken
 * only once that lock can be had.  false: still held after FENCE_WAIT_S
 * (said; the disk is left out, like a missing one).
 */
static bool disk_fence(const struct disk *d)
{
	int64_t t0 = cw_now_ns(), waited;
	bool said = false;

	while (flock(d->fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK) {
			/* a file system without flock: nothing to wait for */
			cwd_log(LOG_DEBUG, "disk %s: no lock on %s: %s", d->name, d->path,
				strerror(errno));
			return true;
		}
		if (!said)
			cwd_log(LOG_NOTICE, "disk %s: %s is locked by another process, a daemon "
				"before this one perhaps, whose writes are still in flight: waiting "
				"for it (at most %d s)", d->name, d->path, FENCE_WAIT_S);
		said = true;
		if (cw_now_ns() - t0 > FENCE_WAIT_S * CW_NS_PER_S) {
			cwd_log(LOG_ERR, "disk %s: %s is still locked by another process after "
				"%d s; its partitions are not exported (fuser %s says which)",
				d->name, d->path, FENCE_WAIT_S, d->path);
			return false;
		}
		usleep(10000);
	}
	waited = cw_now_ns() - t0;
	if (said)
		cwd_log(LOG_NOTICE, "disk %s: the lock on %s came after %.0f ms", d->name,
			d->path, waited / 1e6);
	return true;
}

/* The whole disk a device number lies on: a partition's parent (from
 * sysfs), else dev itself; 0 for none (tmpfs, a network file system). */
static dev_t whole_device(dev_t dev)
{
	char path[64], buf[32];
	unsigned maj, min;
	ssize_t n;
	int dfd, fd;

	if (major(dev) == 0)
		return 0;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u", major(dev), minor(dev));
	/* the link's target, a directory: ".." from it is its parent */
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return dev;
	if (faccessat(dfd, "partition", F_OK, 0) != 0) {
		close(dfd);
		return dev;
	}
	fd = openat(dfd, "../dev", O_RDONLY | O_CLOEXEC);
	close(dfd);
	if (fd < 0)
		return dev;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return dev;
	buf[n] = '\0';
	if (sscanf(buf, "%u:%u", &maj, &min) != 2)
		return dev;
	return makedev(maj, min);
}

/* Admission books each disk's time as its own: two disks of the pool on
 * one device delay each other's requests by what neither was charged.
 * An emulated disk keeps its model's time and is left out. */
static void shared_device_warn(const struct pb *pb, const struct disk *d)
{
	if (!d->device || d->emulate)
		return;
	for (size_t i = 0; i < pb->ndisks; i++) {
		const struct disk *o = &pb->disks[i];

		if (o == d || o->fd < 0 || o->emulate || o->device != d->device)
			continue;
		cwd_log(LOG_WARNING, "disk %s: %s lies on the same device (%u:%u) as disk %s: "
			"the requests of one delay the other's, which admission does not book; "
			"a stream on either can miss its deadlines", d->name, d->path,
			major(d->device), minor(d->device), o->name);
		return;
	}
}

static int disk_open(struct pb *pb, struct disk *d, const struct cw_disk_info *info)
{
	const struct cwd_config *cfg = pb->cfg;
	const struct cwd_config_disk *cd = NULL;
	size_t i;
	int r;

	d->id = info->id;
	d->fd = -1;
	d->tier = info->tier;
	snprintf(d->name, sizeof(d->name), "%s", info->name);
	snprintf(d->path, sizeof(d->path), "%s", info->path);
	for (i = 0; i < cfg->n_disks; i++)
		if (strcmp(cfg->disks[i].name, info->name) == 0)
			cd = &cfg->disks[i];
	d->policy = (enum cw_sched_policy)(cd ? cd->policy : cfg->policy);
	d->be_order = cw_sched_beq_by_name(cwd_config_be_order_name(cd ? cd->be_order : cfg->be_order));
	d->nlanes = cd ? cd->lanes : cwd_config_default_lanes(info->tier);
	if (d->nlanes == 0)
		d->nlanes = 1;
	r = disk_emulated(pb, d, cd);
	if (r < 0)
		return r;
	d->fault = cd ? cd->fault : NULL;
	r = disk_first_model(pb, d);
	if (r < 0)
		return r;
	cw_sched_sfc_conf_init(&d->sfc);
	d->sfc.capacity_bytes = disk_model(d)->capacity_bytes;
	d->lanes = calloc(d->nlanes, sizeof(*d->lanes));
	if (!d->lanes)
		return -ENOMEM;
	for (i = 0; i < d->nlanes; i++) {
		struct cw_slots_opts so = { .size = sizeof(so), .tier = d->tier };
		struct lane *l = &d->lanes[i];

		l->pb = pb;
		l->disk = d;
		l->idx = (unsigned)i;
		so.slot_ns = cd ? cd->slot_ns : 0;
		r = cw_slots_new(pb->domain, &so, &l->rec);
		if (r < 0) {
			cwd_log(LOG_ERR, "disk %s: cannot set up its slot record: %s", d->name,
				strerror(-r));
			return r;
		}
		l->slot_ns = cw_slots_slot_ns(l->rec);
	}
	if (info->state == CW_DISK_SHRUNK) {
		cwd_log(LOG_ERR, "disk %s (%s) shrank: it is %" PRIu64 " bytes, its blocks need "
			"%" PRIu64 " (truncated?); its partitions are not exported, and nothing is "
			"written to it until the file is whole again", d->name, d->path,
			info->found_bytes, info->data_offset_bytes +
			info->data_blocks * cw_pool_block_size(pb->pool));
		return 0;
	}
	if (info->state != CW_DISK_PRESENT) {
		cwd_log(LOG_WARNING, "disk %s (%s) %s: %s", d->name, d->path,
			state_names[info->state], cfg->exports.partial ?
			"its partitions are served partially, its blocks failing with EIO" :
			"its partitions are not exported");
		return 0;
	}
	/* An image on a cluster shares the pool's connection and handle. */
	r = cw_io_open(info->path, !cfg->exports.read_only, &d->direct);
	if (r < 0) {
		/* Like a missing disk: its partitions wait, the rest are served. */
		cwd_log(LOG_ERR, "disk %s: cannot open %s: %s; its partitions are not exported",
			d->name, d->path, strerror(-r));
		return 0;
	}
	d->fd = r;
	if (cw_io_path_is_rbd(info->path) && !cfg->exports.read_only)
		pb_rbd_take_lock(pb, d);
	else if (!cw_io_path_is_rbd(info->path) && !disk_fence(d)) {
		cw_io_close(d->fd);
		d->fd = -1;
		return 0;
	}
	{
		struct stat st;

		d->regular = fstat(d->fd, &st) == 0 && S_ISREG(st.st_mode);
		d->need_bytes = info->data_offset_bytes +
				info->data_blocks * cw_pool_block_size(pb->pool);
		d->device = d->regular ? whole_device(st.st_dev) :
			    S_ISBLK(st.st_mode) ? whole_device(st.st_rdev) : 0;
	}
	shared_device_warn(pb, d);
	/* io_uring punts reads it cannot do without blocking to kernel
	 * workers: a file on tmpfs gets the memory engine (the copy done
	 * inline), one on another such file system libaio. */
	if (cw_io_kind_for_fd(d->fd, cfg->io_engine, &d->io_kind) < 0)
		d->io_kind = cfg->io_engine;
	d->can_punch = !cfg->exports.read_only && pb_disk_can_punch(d);
	d->poll_ns = d->io_kind == CW_IO_RBD ? POLL_NS_RBD : POLL_NS;
	r = cw_io_alignment(d->fd, &d->align);
	if (r < 0 || !d->direct)
		d->align = 512;
	cwd_log(LOG_INFO, "disk %s: %s, %s, policy %s, best effort %s, %u lane%s, %s %s I/O%s%s",
		d->name, d->path, cw_tier_name(d->tier), cw_sched_policy_name(d->policy),
		d->be_order ? d->be_order->name : "fifo", d->nlanes,
		d->nlanes == 1 ? "" : "s", d->direct ? "direct" : "buffered",
		cw_io_kind_name(d->io_kind), d->emulate ? ", emulating " : "",
		d->emulate ? d->emulate->name : "");
	if (d->fault)
		cwd_log(LOG_WARNING, "disk %s: its I/O goes through the fault-injecting engine "
			"(a testing feature: faults and power cuts as configured)", d->name);
	return 0;
}

/* Makes an opened disk's slot visible to the I/O threads. */
static void disk_publish(struct pb *pb, size_t di)
{
	if (pb->disks[di].fd >= 0)
		atomic_store_explicit(&pb->slot_of[pb->disks[di].id], (int)di,
				      memory_order_release);
}

static int resv_add(struct pb *pb, const struct cw_admit_resv *a)
{
	struct resv *rv = calloc(1, sizeof(*rv));
	size_t slot;

	if (!rv)
		return -ENOMEM;
	rv->a = a;
	pthread_mutex_lock(&pb->resv_lock);
	for (slot = 0; slot < pb->nresvs && pb->resvs[slot]; slot++)
		;
	if (slot == pb->nresvs) {
		struct resv **v = slot < PB_RESV_MAX ?
				  realloc(pb->resvs, (slot + 1) * sizeof(*v)) : NULL;

		if (!v) {
			pthread_mutex_unlock(&pb->resv_lock);
			free(rv);
			return slot < PB_RESV_MAX ? -ENOMEM : -ENOSPC;
		}
		pb->resvs = v;
		pb->nresvs++;
	}
	rv->idx = slot;
	pb->resvs[slot] = rv;
	pthread_mutex_unlock(&pb->resv_lock);
	return 0;
}

int pb_new(struct cw_pool *pool, struct cw_admit_state *adm, const struct cwd_config *cfg,
	   struct pb **ret_pb)
{
	struct cw_disk_info *infos = NULL;
	struct pb *pb;
	size_t n, i, j;
	int r;

	pb = calloc(1, sizeof(*pb));
	if (!pb)
		return -ENOMEM;
	pb->pool = pool;
	pb->adm = adm;
	pb->req_finish = preq_finish;
	pb->submit_internal = pb_submit_internal;
	pb->flush_internal = pb_flush_internal;
	pb->submit_disk = pb_submit_disk;
	pthread_mutex_init(&pb->resv_lock, NULL);
	pthread_mutex_init(&pb->xdisks_lock, NULL);
	pthread_mutex_init(&pb->exports_lock, NULL);
	pb->cfg = cfg;
	pb->block_size = cw_pool_block_size(pool);
	pb->start_ns = cw_now_ns();
	for (i = 0; i <= CW_DISKS_MAX; i++)
		atomic_init(&pb->slot_of[i], -1);
	lane_init_once();
	{
		struct cw_slots_domain_opts dopts = { .size = sizeof(dopts),
						      .mode = CW_SLOTS_LOCKFREE,
						      .max_threads = SLOTS_THREADS,
						      .max_window = SLOTS_WINDOW };

		r = cw_slots_domain_new(&dopts, &pb->domain);
		if (r < 0) {
			free(pb);
			return r;
		}
	}
	pb->zeros = cw_io_alloc(ZERO_CHUNK);
	if (!pb->zeros) {
		cw_slots_domain_free(pb->domain);
		free(pb);
		return -ENOMEM;
	}
	memset(pb->zeros, 0, ZERO_CHUNK);
	/* The reservations admitted before the data path existed. */
	for (i = 0; cw_admit_state_resv_at(adm, i); i++) {
		r = resv_add(pb, cw_admit_state_resv_at(adm, i));
		if (r < 0)
			goto fail;
	}
	r = cw_disk_list(pool, &infos, &n);
	if (r < 0)
		goto fail;
	pb->disks = calloc(PB_DISKS_CAP, sizeof(*pb->disks));
	if (!pb->disks) {
		r = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < n; i++) {
		pb->disks[i].fd = -1;
		pb->ndisks = i + 1;
		r = disk_open(pb, &pb->disks[i], &infos[i]);
		if (r < 0)
			goto fail;
		disk_publish(pb, i);
	}
	for (i = 0; i < cfg->n_disks; i++) {
		for (j = 0; j < n; j++)
			if (strcmp(cfg->disks[i].name, infos[j].name) == 0)
				break;
		if (j == n)
			cwd_log(LOG_WARNING, "%s:%u: disk %s (%s) is not in the pool", cfg->file,
				cfg->disks[i].line, cfg->disks[i].name, cfg->disks[i].path);
	}
	free(infos);
	*ret_pb = pb;
	return 0;
fail:
	free(infos);
	pb_free(pb);
	return r;
}

/* Adds the disks of blocks [from, to) of x's partition to x->disks; each
 * before the count that covers it, so FLUSH on another thread sees whole
 * entries.  A block on a disk not open: counted in x->missing, its disk
 * marked in missing[] (by id), when exports.activation_mode is
 * "partial"; otherwise -ENODEV, logged. */
static int export_take_disks(struct pb *pb, struct pbx *x, const char *part, uint64_t from,
			     uint64_t to, size_t *ret_align, bool *ret_rotational, bool *missing)
{
	_cleanup_free_ uint32_t *ids = calloc(to > from ? to - from : 1, sizeof(*ids));
	uint64_t b;
	int r;

	if (!ids)
		return -ENOMEM;
	r = to > from ? cw_part_block_disks(x->part, from, to - from, ids) : 0;
	if (r < 0)
		return r;
	for (b = 0; b < to - from; b++) {
		int di = pb_disk_index(pb, ids[b]);

		if (di < 0 && pb->cfg->exports.partial && missing) {
			x->missing++;
			missing[ids[b]] = true;
			continue;
		}
		if (di < 0) {
			struct cw_disk_info info;

			cwd_log(LOG_WARNING, "partition %s is not exported: its disk %s is missing",
				part, cw_disk_info(pb->pool, ids[b], &info) == 0 ? info.name :
				"(unknown)");
			return -ENODEV;
		}
		*ret_align = CW_MAX(*ret_align, pb->disks[di].align);
		*ret_rotational |= pb->disks[di].tier == CW_TIER_HDD;
		pb_export_take_disk(pb, x, (uint32_t)di);
	}
	return 0;
}

/* The names of the disks marked in missing[], "b" or "b, c", into buf. */
static const char *missing_names(struct pb *pb, const bool *missing, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (uint32_t id = 1; id <= CW_DISKS_MAX && at < len; id++) {
		struct cw_disk_info info;

		if (missing[id] && cw_disk_info(pb->pool, id, &info) == 0)
			at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? ", " : "", info.name);
	}
	return buf;
}

/* Gives client x the QoS be (NULL: none) on each disk, for the lanes to
 * pick up; the one it replaces stays until the export goes, since a
 * dispatcher may be reading it.  Control thread. */
static void client_be_set(struct pb *pb, struct pbx_client *x, const struct cw_admit_be *be)
{
	struct pbx_be *nb;

	if (!be && !atomic_load_explicit(&x->be, memory_order_relaxed))
		return;	/* weight 1 and nothing else, as every order starts */
	nb = calloc(1, sizeof(*nb));
	if (!nb) {
		cwd_log(LOG_ERR, "export %s: out of memory for its best-effort QoS", x->name);
		return;
	}
	nb->gen = atomic_fetch_add(&pb->be_gen, 1) + 1;
	for (size_t i = 0; be && i < be->n_parts; i++) {
		int di = pb_disk_index(pb, be->parts[i].disk_id);

		if (di < 0)
			continue;
		nb->has[di] = true;
		nb->client[di] = be->parts[i].order;
		nb->due[di] = be->parts[i].client;
	}
	nb->older = atomic_load_explicit(&x->be, memory_order_relaxed);
	atomic_store_explicit(&x->be, nb, memory_order_release);
}

_Static_assert(CW_NBD_CLASS_MAX == CW_CLASS_MAX, "one length for a class's name");

static void client_init(struct pb *pb, struct pbx *x, struct pbx_client *c, const char *cls)
{
	c->x = x;
	snprintf(c->name, sizeof(c->name), "%s%s%s", x->name, cls ? "@" : "", cls ? cls : "");
	c->client = atomic_fetch_add(&pb->next_client, 1) + 1;
	c->since_ns = cw_now_ns();
}

/* The class of x named cls; NULL if it has none (make: a new one, or NULL
 * out of memory).  Lookups are lock-free; making is the control
 * thread's. */
static struct pbx_client *class_get(struct pb *pb, struct pbx *x, const char *cls, bool make)
{
	struct pbx_client *c = &x->main, *n;

	while ((n = atomic_load_explicit(&c->next, memory_order_acquire))) {
		c = n;
		if (!strcmp(c->name + strlen(x->name) + 1, cls))
			return c;
	}
	if (!make || !(n = calloc(1, sizeof(*n))))
		return NULL;
	client_init(pb, x, n, cls);
	atomic_store_explicit(&c->next, n, memory_order_release);
	return n;
}

struct pbx_client *pb_client_of(struct pbx *x, struct nbdsrv_io *nio)
{
	struct pbx_client *c;

	if (!nio || !nio->client_class || !nio->conn_data)
		return &x->main;
	c = __atomic_load_n(nio->conn_data, __ATOMIC_ACQUIRE);
	if (c)
		return c;
	/* a class without a QoS of its own, now, is the export's for this
	 * connection's life */
	c = class_get(x->pb, x, nio->client_class, false);
	if (!c)
		c = &x->main;
	__atomic_store_n(nio->conn_data, c, __ATOMIC_RELEASE);
	return c;
}

/* The client of x that the QoS of name ("EXPORT" or "EXPORT@CLASS") is
 * for, made if new; NULL if name is not x's. */
static struct pbx_client *client_named(struct pb *pb, struct pbx *x, const char *name, bool make)
{
	size_t n = strlen(x->name);

	if (strncmp(name, x->name, n))
		return NULL;
	if (!name[n])
		return &x->main;
	return name[n] == '@' ? class_get(pb, x, name + n + 1, make) : NULL;
}

static void client_free(struct pbx_client *c)
{
	for (struct pbx_be *b = atomic_load(&c->be), *o; b; b = o) {
		o = b->older;
		free(b);
	}
}

void pb_export_free(struct pbx *x)
{
	struct pbx_client *c, *n;

	if (!x)
		return;
	for (c = atomic_load(&x->main.next); c; c = n) {
		n = atomic_load(&c->next);
		client_free(c);
		free(c);
	}
	client_free(&x->main);
	free(x);
}

int pb_export(struct pb *pb, struct cw_part *part, struct nbdsrv_export *ret_exp)
{
	struct cw_part_info info;
	struct pbx *x;
	size_t align = 512;
	bool rotational = false, missing[CW_DISKS_MAX + 1] = { false };
	char names[256];
	unsigned nd;
	int r;

	r = cw_part_info(part, &info);
	if (r < 0)
		return r;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->pb = pb;
	x->part = part;
	atomic_init(&x->ndisks, 0);
	atomic_init(&x->can_punch, true);
	r = export_take_disks(pb, x, info.name, 0, cw_part_nblocks(part), &align, &rotational,
			      missing);
	if (r == 0 && align > 65536)
		r = -EINVAL;
	if (r < 0) {
		free(x);
		return r;
	}
	pb_export_take_pending(pb, x);
	nd = atomic_load_explicit(&x->ndisks, memory_order_relaxed);
	x->align = align;
	snprintf(x->name, sizeof(x->name), "%s", info.name);
	client_init(pb, x, &x->main, NULL);
	/* its QoS, and its classes' */
	for (size_t i = 0; pb->adm; i++) {
		const struct cw_admit_be *be = cw_admit_state_be_at(pb->adm, i);
		struct pbx_client *c;

		if (!be)
			break;
		if ((c = client_named(pb, x, be->export_name, true)))
			client_be_set(pb, c, be);
	}
	snprintf(x->description, sizeof(x->description), "clockwise partition %s on %u disk%s%s",
		 info.name, nd, nd == 1 ? "" : "s",
		 x->missing ? ", partial: blocks on a missing disk fail" : "");
	if (x->missing)
		cwd_log(LOG_WARNING, "partition %s is served partially (activation_mode \"partial\"): "
			"%" PRIu64 " of its %" PRIu64 " blocks are on missing disk%s %s and fail with "
			"EIO", info.name, x->missing, info.nblocks,
			strchr(missing_names(pb, missing, names, sizeof(names)), ',') ? "s" : "",
			names);
	pthread_mutex_lock(&pb->exports_lock);
	x->next = pb->exports;
	pb->exports = x;
	pthread_mutex_unlock(&pb->exports_lock);
	*ret_exp = (struct nbdsrv_export){
		.name = x->name,
		.description = x->description,
		.size = info.size_bytes - info.size_bytes % align,
		.read_only = pb->cfg->exports.read_only,
		.flush_global = pb->cfg->exports.multi_conn,
		.rotational = rotational,
		.fast_zero = true,	/* pb_zero refuses a zero it cannot make fast */
		.min_block = (uint32_t)align,
		.pref_block = CW_MAX(pb->cfg->exports.block_size, (uint32_t)align),
		.max_block = pb->cfg->exports.max_request_bytes,
		/* Every export of the partition reaches the same blocks. */
		.data_key = part,
		.ops = &pb_ops,
		.backend = x,
	};
	return 0;
}

int pb_export_grow(struct pb *pb, struct pbx *x, uint64_t *ret_size, char *err, size_t errlen)
{
	uint64_t nblocks = cw_part_nblocks(x->part), size = cw_part_size_bytes(x->part);
	size_t align = x->align;
	bool rotational = false;
	int r;

	/* Blocks already served keep their disks: only look at them all,
	 * since the list is short and a grow is rare. */
	r = export_take_disks(pb, x, x->name, 0, nblocks, &align, &rotational, NULL);
	if (r < 0) {
		snprintf(err, errlen, "export %s: a disk of its new blocks is not open", x->name);
		return r;
	}
	if (align > x->align) {
		/* Its clients were told min_block = x->align, and requests
		 * that small would fail on the new disk. */
		snprintf(err, errlen, "export %s: its new blocks are on a disk that needs %zu-byte "
			 "I/O, its clients were told %zu; remove and add the export again",
			 x->name, align, x->align);
		return -EINVAL;
	}
	*ret_size = size - size % x->align;
	return 0;
}

static int64_t no_limit(int64_t ns)
{
	return ns == CW_ADMIT_NO_LIMIT ? INT64_MAX / 4 : ns;
}

/* A plan for disk d's first lane: the disk's plan and its streams. */
static struct lane_plan *lane_plan_new(struct pb *pb, const struct disk *d,
				       const struct cw_disk_plan *plan)
{
	struct lane_plan *pl;

	pthread_mutex_lock(&pb->resv_lock);
	pl = malloc(sizeof(*pl) + pb->nresvs * sizeof(pl->streams[0]));
	if (pl) {
		pl->plan = *plan;
		/* A disk whose model no margin can save gives best effort
		 * no slack beside released streams (pb_misses_tick): it runs
		 * only on the idle disk, within the idle allowance. */
		if (atomic_load(&d->no_slack))
			pl->plan.be_budget_ns = 0;
		pl->n_streams = 0;
		for (size_t i = 0; i < pb->nresvs; i++) {
			const struct cw_admit_resv_part *pt = pb->resvs[i] ?
							       resv_part(pb->resvs[i], d->id) : NULL;

			if (pt)
				pl->streams[pl->n_streams++] = (struct cw_sched_stream){
					.id = pb->resvs[i]->a->stream,
					.period_ns = pt->task.period_ns,
					.service_ns = pt->task.service_ns,
					.deadline_ns = pt->task.deadline_ns,
				};
		}
	}
	pthread_mutex_unlock(&pb->resv_lock);
	return pl;
}

/* The scheduling core of a disk that carries streams when it starts. */
static int disk_sched(struct pb *pb, struct disk *d)
{
	struct cw_sched_opts o;
	struct cw_disk_plan pl;
	struct lane_plan *lp;
	int r;

	r = cw_admit_state_plan(pb->adm, d->id, &pl);
	if (r < 0)
		return r;
	cw_sched_opts_init(&o);
	o.policy = d->policy;
	o.delta_l_ns = no_limit(pl.be_budget_ns);
	o.idle_be_ns = no_limit(pl.idle_be_ns);
	o.server_slice_ns = pl.server_slice_ns;
	o.server_period_ns = pl.server_period_ns;
	o.beq = d->be_order;
	o.beq_conf = o.beq == cw_sched_beq_sfc() ? &d->sfc : NULL;
	o.guard_ns = pl.guard_ns;
	r = cw_sched_new(&o, &d->lanes[0].pl.sched);
	if (r < 0)
		return r;
	/* the lane declares the disk's streams to it before its first step */
	lp = lane_plan_new(pb, d, &pl);
	if (!lp)
		return -ENOMEM;
	lane_post_plan(&d->lanes[0], lp);
	return 0;
}

/* Starts the dispatchers of disk d: an I/O engine and a thread per lane,
 * and the scheduling core of a disk with streams. */
static int disk_start(struct pb *pb, struct disk *d)
{
	size_t j;
	int r;

	if (d->fd < 0)
		return 0;
	if (atomic_load(&d->live_streams)) {
		r = disk_sched(pb, d);
		if (r < 0)
			return r;
	}
	for (j = 0; j < d->nlanes; j++) {
		struct lane *l = &d->lanes[j];

		r = lane_beq_new(l);
		if (r < 0) {
			cwd_log(LOG_ERR, "disk %s: cannot set up its best-effort order: %s", d->name,
				strerror(-r));
			return r;
		}
		if (d->emulate) {
			struct cw_io_emu_opts eo;

			cw_io_emu_opts_init(&eo);
			cw_model_disk_opts_of(d->emulate, &eo.disk);	/* its channels, bus, ... */
			eo.inner = d->io_kind;
			r = cw_io_emu_new(d->emulate, &eo, pb->cfg->queue_depth, &l->eng);
		} else
			r = cw_io_engine_new(d->io_kind, pb->cfg->queue_depth, &l->eng);
		if (r == 0 && d->fault) {
			struct cw_io_engine *inner = l->eng;

			l->eng = NULL;	/* the fault engine owns it, even on failure */
			r = cw_io_fault_new(inner, d->fault, &l->eng);
		}
		if (r < 0) {
			cwd_log(LOG_ERR, "disk %s: cannot set up %s: %s", d->name,
				cw_io_kind_name(d->io_kind), strerror(-r));
			return r;
		}
		r = -pthread_create(&l->thread, NULL, lane_main, l);
		if (r < 0)
			return r;
		thread_name(l->thread, "cw-d:%s/%zu", d->name, j);
		l->started = true;
	}
	return 0;
}

/* Stops and joins d's dispatchers (each drains what it was given first). */
static void disk_stop(struct disk *d)
{
	size_t j;

	for (j = 0; j < d->nlanes && d->lanes; j++)
		if (d->lanes[j].started)
			lane_stop(&d->lanes[j]);
	for (j = 0; j < d->nlanes && d->lanes; j++) {
		if (!d->lanes[j].started)
			continue;
		pthread_join(d->lanes[j].thread, NULL);
		d->lanes[j].started = false;
	}
}

/* Frees what a stopped disk holds and closes it. */
static void disk_close(struct disk *d)
{
	size_t j;

	for (j = 0; j < d->nlanes && d->lanes; j++) {
		cw_io_engine_free(d->lanes[j].eng);
		cw_sched_free(d->lanes[j].pl.sched);
		lane_beq_free(&d->lanes[j]);
		lane_miss_free(&d->lanes[j]);
		free(atomic_load(&d->lanes[j].plan));
		cw_slots_free(d->lanes[j].rec);
	}
	free(d->lanes);
	free(d->emulate);
	d->emulate = NULL;
	for (struct disk_model *dm = atomic_load(&d->model), *o; dm; dm = o) {
		o = dm->older;
		free(dm);
	}
	atomic_store(&d->model, NULL);
	d->lanes = NULL;
	d->nlanes = 0;
	cw_io_closep(&d->fd);
}

/* The stall probes, above every thread of the daemon (the dispatchers
 * run at rt_priority + 1), where the daemon may use real-time priority. */
static void stall_probe_begin(struct pb *pb)
{
	const struct cwd_config *cfg = pb->cfg;
	char err[160];
	int r;

	if (!cfg->stall_probe_us || !cfg->rt_priority)
		return;
	r = stall_probe_start((int64_t)cfg->stall_probe_us * 1000,
			      (int)CW_MIN(cfg->rt_priority + 2, 99u), cfg->rt_cpus, &pb->probe, err,
			      sizeof(err));
	if (r < 0)
		cwd_log(LOG_NOTICE, "no stall probes (%s): a miss whose thread waited for a CPU "
			"cannot say whether the host held every thread off it", err);
}

int pb_start(struct pb *pb)
{
	size_t i;
	int r;

	for (i = 0; i < pb->ndisks; i++) {
		r = disk_start(pb, &pb->disks[i]);
		if (r < 0)
			return r;
	}
	r = pb_alloc_start(pb);
	if (r < 0)
		return r;
	r = pb_mover_start(pb);
	if (r < 0)
		return r;
	pb_host_publish(pb);
	stall_probe_begin(pb);
	pb->started = true;
	return 0;
}

/* The file the daemon opened must be the one the pool labelled (and
 * checked) under that path, not whatever the path names by now. */
static int disk_same_file(struct pb *pb, const struct disk *d, char *err, size_t errlen)
{
	uint64_t odev, oino, pdev, pino;
	int pfd = cw_disk_fd(pb->pool, d->id);

	if (pfd < 0 || cw_io_identity(pfd, &pdev, &pino) < 0 ||
	    cw_io_identity(d->fd, &odev, &oino) < 0) {
		snprintf(err, errlen, "disk %s: cannot check its label", d->name);
		return -EIO;
	}
	if (odev != pdev || oino != pino) {
		snprintf(err, errlen, "disk %s: %s no longer holds the disk the pool labelled",
			 d->name, d->path);
		return -ESTALE;
	}
	return 0;
}

int pb_disk_add(struct pb *pb, uint32_t disk_id, char *err, size_t errlen)
{
	struct cw_disk_info info;
	struct disk *d;
	size_t di = pb->ndisks;
	int r;

	if (pb_disk_index(pb, disk_id) >= 0) {
		snprintf(err, errlen, "disk %" PRIu32 " is open already", disk_id);
		return -EEXIST;
	}
	r = cw_disk_info(pb->pool, disk_id, &info);
	if (r < 0) {
		snprintf(err, errlen, "disk %" PRIu32 ": not in the pool", disk_id);
		return r;
	}
	if (di == PB_DISKS_CAP) {
		snprintf(err, errlen, "disk %s: the data path has used all its %d disk slots "
			 "since it started; restart clockwised to serve it", info.name,
			 PB_DISKS_CAP);
		return -ENOSPC;
	}
	d = &pb->disks[di];
	memset(d, 0, sizeof(*d));
	d->fd = -1;
	r = disk_open(pb, d, &info);
	if (r == 0 && d->fd < 0)
		r = -ENODEV;	/* disk_open logged why */
	if (r < 0) {
		snprintf(err, errlen, "disk %s: cannot open %s: %s", info.name, info.path,
			 strerror(-r));
		goto fail;
	}
	r = disk_same_file(pb, d, err, errlen);
	if (r == 0 && pb->started)
		r = disk_start(pb, d);
	if (r < 0) {
		if (!err[0])
			snprintf(err, errlen, "disk %s: cannot start its dispatchers: %s",
				 info.name, strerror(-r));
		disk_stop(d);
		goto fail;
	}
	pb->ndisks = di + 1;
	disk_publish(pb, di);
	return 0;
fail:
	disk_close(d);
	memset(d, 0, sizeof(*d));
	return r;
}

int pb_disk_remove(struct pb *pb, uint32_t disk_id, char *err, size_t errlen)
{
	int di = pb_disk_index(pb, disk_id);
	struct cw_disk_info info;
	struct pbx *x;
	unsigned i, n;

	if (di < 0)
		return -ENOENT;
	/* The pool let it go (every block of it is free), so an export that
	 * still lists it had its partition moved off it: it leaves the
	 * export's FLUSH. */
	if (cw_disk_info(pb->pool, disk_id, &info) == 0 && info.free_blocks == info.data_blocks)
		for (x = pb->exports; x; x = x->next)
			pb_export_drop_disk(pb, x, (uint32_t)di);
	for (x = pb->exports; x; x = x->next) {
		n = atomic_load_explicit(&x->ndisks, memory_order_relaxed);
		for (i = 0; i < n; i++)
			if (x->disks[i] == (uint32_t)di) {
				snprintf(err, errlen, "disk %s: export %s flushes it; remove the "
					 "export first", pb->disks[di].name, x->name);
				return -EBUSY;
			}
	}
	/* Nothing maps to it (no partition has a block there) and no export
	 * lists it, so no request can reach its lanes once it is unlisted. */
	atomic_store_explicit(&pb->slot_of[disk_id], -1, memory_order_release);
	/* The keeper of holes may still hold a wake-up for its lanes. */
	pb_alloc_quiesce(pb);
	disk_stop(&pb->disks[di]);
	cwd_log(LOG_INFO, "disk %s (%s): closed", pb->disks[di].name, pb->disks[di].path);
	disk_close(&pb->disks[di]);
	return 0;
}

/* ---- admission events (the control thread, or main before start) ---- */

/* Released: the control server refuses while an export is bound to it,
 * and an export's removal waited for its requests, so nothing in flight
 * points at it. */
static void resv_drop(struct pb *pb, const struct cw_admit_resv *a)
{
	pthread_mutex_lock(&pb->resv_lock);
	for (size_t i = 0; i < pb->nresvs; i++)
		if (pb->resvs[i] && pb->resvs[i]->a == a) {
			for (struct pbx *x = pb->exports; x; x = x->next)
				if (x->resv == pb->resvs[i])
					x->resv = NULL;
			pb_host_resv_gone(pb, pb->resvs[i]);
			free(pb->resvs[i]);
			pb->resvs[i] = NULL;
		}
	pthread_mutex_unlock(&pb->resv_lock);
}

/* A disk's new plan reaches its first lane's dispatcher; its model the
 * threads that book on it. */
static void plan_changed(struct pb *pb, const struct cw_admit_event *ev)
{
	int di = pb_disk_index(pb, ev->disk_id);
	struct lane_plan *pl;
	struct disk *d;

	if (di < 0)
		return;	/* not open: it takes its plan when it is */
	d = &pb->disks[di];
	if (memcmp(disk_model(d), ev->model, sizeof(*ev->model)) != 0) {
		char text[4096];

		if (disk_set_model(d, ev->model) < 0)
			cwd_log(LOG_ERR, "disk %s: out of memory for its new model", d->name);
		else if (cw_model_format(ev->model, text, sizeof(text)) > 0)
			cwd_log(LOG_NOTICE, "disk %s: new model: %s", d->name, text);
	}
	if (ev->plan->n_tasks)
		atomic_store(&d->live_streams, true);
	if (!atomic_load(&d->live_streams))
		return;
	if (ev->plan->be_starved && ev->plan->n_tasks)
		cwd_log(LOG_WARNING, "disk %s: its streams leave best-effort pieces of %" PRId64
			" us no room (server slice %" PRId64 " us): they fail", d->name,
			ev->plan->be_max_ns / 1000, ev->plan->server_slice_ns / 1000);
	cwd_log(LOG_INFO, "disk %s: %zu stream part%s, policy %s, best-effort slack %" PRId64
		" us, server %" PRId64 " us every %" PRId64 " ms", d->name, ev->plan->n_tasks,
		ev->plan->n_tasks == 1 ? "" : "s", cw_sched_policy_name(d->policy),
		ev->plan->n_tasks ? no_limit(ev->plan->be_budget_ns) / 1000 : 0,
		ev->plan->server_slice_ns / 1000, ev->plan->server_period_ns / CW_NS_PER_MS);
	if (!d->lanes[0].started)
		return;	/* disk_start takes the plan */
	pl = lane_plan_new(pb, d, ev->plan);
	if (!pl) {
		cwd_log(LOG_ERR, "disk %s: out of memory for its new plan", d->name);
		return;
	}
	lane_post_plan(&d->lanes[0], pl);
}

/* The margin a disk's overrun watch proposed: the model's margin grows
 * by that factor (to at most MARGIN_MAX_PPM) and every stream is admitted
 * again; if one no longer fits, the model stays and the disk gives best
 * effort no more slack, so the overruns cost best effort, not deadlines. */
static void raise_margin(struct pb *pb, struct disk *d, uint64_t proposal_ppm)
{
	struct cw_admit_refusal why;
	enum cw_admit_model_source src;
	struct cw_disk_plan plan;
	struct lane_plan *pl;
	struct cw_model m;
	uint32_t ppm;
	bool taken = false;
	int r;

	if (cw_admit_state_get_model(pb->adm, d->id, &m, &src) < 0)
		return;
	ppm = cw_sched_margin_raise(m.margin_ppm, 1.0 + proposal_ppm / 1e6);
	if (ppm <= m.margin_ppm)
		return;
	cwd_log(LOG_WARNING, "disk %s: its requests keep taking longer than its model says (up to "
		"%.2f times their charge): raising its margin from %u%% to %u%%", d->name,
		1.0 + proposal_ppm / 1e6, m.margin_ppm / 10000, ppm / 10000);
	m.margin_ppm = ppm;
	r = cw_admit_state_set_model(pb->adm, d->id, &m, src, &taken, &why, NULL);
	if (r == 0 && taken)
		return;	/* the new plan reaches the lane by its event */
	cwd_log(LOG_WARNING, "disk %s: the larger margin does not fit its streams (%s): the model "
		"stays and best effort runs on this disk only when no stream waits", d->name,
		r == -EBUSY ? why.reason : strerror(-r));
	atomic_store(&d->no_slack, true);
	if (cw_admit_state_plan(pb->adm, d->id, &plan) < 0 || !d->lanes[0].started)
		return;
	pl = lane_plan_new(pb, d, &plan);
	if (pl)
		lane_post_plan(&d->lanes[0], pl);
}

/* The longest stall of the host since the last tick, said when it is
 * long enough to matter to a stream (a real machine has none). */
static void host_stalls_log(struct pb *pb)
{
	uint64_t n;
	int cpu;
	int64_t worst = stall_probe_worst_since(pb->probe, &cpu, &n);

	if (worst >= HOST_STALL_LOG_NS)
		cwd_log(LOG_NOTICE, "host: CPU %d ran no thread below real-time priority %d for "
			"%.0f us (%" PRIu64 " stalls over %d ms since the last look): another "
			"process's real-time thread, the kernel (one built without preemption "
			"ends a system call before it switches) or the hypervisor held it; the "
			"streams' threads wait for such a stall too", cpu,
			stall_probe_priority(pb->probe), (double)worst / 1000.0, n,
			STALL_PROBE_MIN_NS / 1000000);
}

void pb_misses_tick(struct pb *pb)
{
	for (size_t i = 0; i < pb->ndisks; i++) {
		struct disk *d = &pb->disks[i];
		uint64_t ppm;

		if (d->fd < 0 || !d->lanes)
			continue;
		for (unsigned j = 0; j < d->nlanes; j++)
			lane_miss_drain(&d->lanes[j]);
		ppm = atomic_exchange(&d->margin_proposal_ppm, 0);
		if (ppm && !atomic_load(&d->no_slack))
			raise_margin(pb, d, ppm);
	}
	host_stalls_log(pb);
}

void pb_admit_event(void *userdata, const struct cw_admit_event *ev)
{
	struct pb *pb = userdata;
	int r;

	switch (ev->kind) {
	case CW_ADMIT_EV_PLAN:
		plan_changed(pb, ev);
		break;
	case CW_ADMIT_EV_RESV_ADDED:
		r = resv_add(pb, ev->resv);
		if (r < 0)
			cwd_log(LOG_ERR, "reservation %" PRIu64 " on %s: the data path cannot take "
				"it: %s (its requests stay best-effort)", ev->resv->id,
				ev->resv->part, strerror(-r));
		break;
	case CW_ADMIT_EV_RESV_RELEASED:
		resv_drop(pb, ev->resv);
		break;
	case CW_ADMIT_EV_BE_SET:
	case CW_ADMIT_EV_BE_CLEARED:
		for (struct pbx *x = pb->exports; x; x = x->next) {
			struct pbx_client *c = client_named(pb, x, ev->be->export_name,
							    ev->kind == CW_ADMIT_EV_BE_SET);

			if (c)
				client_be_set(pb, c, ev->kind == CW_ADMIT_EV_BE_SET ? ev->be : NULL);
		}
		break;
	}
}

int pb_export_bind(struct pb *pb, struct pbx *x, uint64_t resv_id)
{
	int r = -ENOENT;

	pthread_mutex_lock(&pb->resv_lock);
	for (size_t i = 0; i < pb->nresvs; i++) {
		const struct resv *rv = pb->resvs[i];

		if (rv && (resv_id ? rv->a->persistent && rv->a->id == resv_id :
			   !rv->a->persistent && strcmp(rv->a->export_name, x->name) == 0)) {
			x->resv = pb->resvs[i];
			r = 0;
			break;
		}
	}
	pthread_mutex_unlock(&pb->resv_lock);
	return r;
}

void pb_log_stats(struct pb *pb)
{
	char what[CW_NAME_MAX + 32];
	size_t i, j;

	for (i = 0; i < pb->ndisks; i++)
		for (j = 0; j < pb->disks[i].nlanes; j++) {
			if (pb->disks[i].fd < 0)
				continue;
			snprintf(what, sizeof(what), "disk %s lane %zu", pb->disks[i].name, j);
			cwd_stats_log(what, &pb->disks[i].lanes[j].st);
		}
	for (i = 0; i < pb->ndisks; i++) {
		struct cw_io_emu_stats es;

		if (pb->disks[i].fd < 0 || !pb->disks[i].emulate)
			continue;
		pb_disk_emu_stats(&pb->disks[i], &es);
		cwd_log(LOG_INFO, "disk %s emulating %s: %" PRIu64 " requests, busy %" PRId64
			" ms, late by %" PRId64 " us on average and %" PRId64 " us at most, %"
			PRIu64 " late beyond 1 ms", pb->disks[i].name, pb->disks[i].emulate->name,
			es.requests, es.busy_ns / CW_NS_PER_MS,
			es.requests ? es.late_sum_ns / (int64_t)es.requests / 1000 : 0,
			es.late_max_ns / 1000, es.late);
	}
	pthread_mutex_lock(&pb->resv_lock);
	for (i = 0; i < pb->nresvs; i++) {
		const struct resv *rv = pb->resvs[i];

		if (!rv)
			continue;	/* released */
		if (rv->a->persistent)
			snprintf(what, sizeof(what), "reservation %" PRIu64, rv->a->id);
		else
			snprintf(what, sizeof(what), "reservation %s", rv->a->export_name);
		cwd_stats_log(what, &rv->st);
	}
	pthread_mutex_unlock(&pb->resv_lock);
	for (const struct pbx *x = pb->exports; x; x = x->next)
		for (const struct pbx_client *c = &x->main; c; c = atomic_load(&c->next))
			cwd_log(LOG_INFO, "stats export %s: be_requests=%" PRIu64 " be_bytes=%" PRIu64
				" be_disk_time_us=%" PRIu64 " be_for_reservation_us=%" PRIu64, c->name,
				(uint64_t)cwd_stats_get(&c->be_st.requests),
				(uint64_t)cwd_stats_get(&c->be_st.bytes),
				(uint64_t)cwd_stats_get(&c->be_st.cost_ns) / 1000,
				(uint64_t)cwd_stats_get(&c->be_st.resv_ns) / 1000);
}

void pb_free(struct pb *pb)
{
	struct pbx *x, *next;
	size_t i;

	if (!pb)
		return;
	pb_mover_stop(pb);
	pb_alloc_stop(pb);
	for (i = 0; i < pb->ndisks; i++)
		disk_stop(&pb->disks[i]);
	/* The misses since the last tick, each logged once (the log's promise). */
	for (i = 0; i < pb->ndisks; i++)
		for (unsigned j = 0; pb->disks[i].lanes && j < pb->disks[i].nlanes; j++)
			lane_miss_drain(&pb->disks[i].lanes[j]);
	stall_probe_stop(pb->probe);
	pb->probe = NULL;
	free(pb->mover_x);	/* its last requests are done: the lanes stopped */
	pb->mover_x = NULL;
	for (i = 0; pb->disks && i < pb->ndisks; i++)
		disk_close(&pb->disks[i]);
	for (x = pb->exports; x; x = next) {
		next = x->next;
		pb_export_free(x);
	}
	for (i = 0; i < pb->nresvs; i++)
		free(pb->resvs[i]);
	free(pb->resvs);
	pthread_mutex_destroy(&pb->resv_lock);
	pthread_mutex_destroy(&pb->xdisks_lock);
	pthread_mutex_destroy(&pb->exports_lock);
	free(pb->disks);
	free(pb->zeros);
	/* Connection threads free their descriptors as they exit, which can
	 * be just after the NBD server saw them finish. */
	while (atomic_load(&pb->live_ctx))
		sched_yield();
	for (struct preq *q = atomic_exchange(&pb->spare, NULL), *qn; q; q = qn) {
		qn = q->next_spare;
		free(q);
	}
	cw_slots_domain_free(pb->domain);
	free(pb);
}
