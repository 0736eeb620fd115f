/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The data path of clockwised (DESIGN.md rule 3; Bosch & Mullender,
 * section 3): NBD request -> partition block map -> one piece per disk run
 * -> the lane's slot record -> its dispatcher -> the policy -> the I/O engine.
 *
 * Submission takes no mutex.  The connection thread maps the request with
 * the lock-free cw_part_map(), then books every piece in its lane's slot
 * reservation record (see "intake" below) and wakes the lane only if it
 * sleeps.  The dispatcher takes the committed bookings in slot order.
 *
 * Dispatch.  A disk that carries admitted streams runs the scheduling core
 * (cw_sched: ΔL, EDF or LST) on its first lane with one request in service,
 * because the admission test models a non-preemptive single server: RT
 * pieces get release = max(arrival, expected release) and deadline =
 * release + T, the policy decides when BE pieces may run.  A disk without
 * streams has no deadline to protect; every policy then serves BE in
 * arrival order, so its lanes keep queue_depth requests in flight each.
 *
 * Completion.  The last piece of a request to finish completes it (one
 * atomic decrement); a FUA write then runs a second phase, an fdatasync on
 * every disk it touched, before the reply.  FLUSH is an fdatasync on every
 * disk of the partition.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <clockwise/admit.h>
#include <clockwise/io.h>
#include <clockwise/model.h>
#include <clockwise/sched.h>
#include <clockwise/slots.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "daemon/log.h"
#include "daemon/pool-backend.h"
#include "daemon/stats.h"

#define ZERO_CHUNK (UINT32_C(1) << 20)	/* WRITE_ZEROES is written in pieces of this */
#define REAP_BATCH 64
/* While requests are in flight on a lane without streams, the dispatcher
 * waits for completions at most this long before it looks at its record
 * again (an engine wait cannot also watch the record). */
#define POLL_NS (50 * CW_NS_PER_US)
#define SPIN_NS (50 * CW_NS_PER_US)	/* before a lane sleeps */
#define SERVER_PERIOD_NS (100 * CW_NS_PER_MS)
#define ERRORS_LOGGED 8	/* per disk; then one line per 1000 */
#define SLOTS_WINDOW 4096	/* slots a booking may look ahead (the domain's max_window) */
#define BOOKING_SLOTS_MAX 64	/* one piece books at most this many slots */
#define SLOTS_THREADS 1024	/* connection and dispatcher threads booking at once */

struct piece;

struct lane {
	struct pb *pb;
	struct disk *disk;
	unsigned idx;
	pthread_t thread;
	bool started;
	struct cw_slots *rec;		/* bookings of this lane */
	int64_t slot_ns;
	atomic_int_fast64_t booked_end;	/* highest booked slot + 1, a hint */
	atomic_int sleeping;
	atomic_bool stop;
	struct cwd_counters st;
	/* Owned by the dispatcher thread alone. */
	struct cw_io_engine *eng;
	struct cw_sched *sched;		/* RT disks, lane 0 */
	struct piece *fifo, *fifo_tail;	/* lanes without streams */
	unsigned inflight;
	bool busy;			/* a request in service under cw_sched */
	int64_t *expected_ns;		/* per reservation: next expected release */
};

struct disk {
	uint32_t id;
	char name[CW_NAME_MAX + 1];
	char path[4096];
	enum cw_tier tier;
	int fd;
	bool direct;
	size_t align;
	struct cw_model model;
	enum cw_sched_policy policy;
	unsigned nlanes;
	struct lane *lanes;
	struct cw_task *tasks;		/* admitted stream parts */
	size_t ntasks;
	atomic_uint_fast64_t nerrors;
	int64_t be_max_ns;		/* service of the largest BE piece */
};

struct resv {
	struct pb_reservation r;
	size_t idx;			/* in pb->resvs */
	struct pbx *x;
	uint64_t lo, hi;
	int64_t start_ns, end_ns;	/* CLOCK_MONOTONIC; end 0: none */
	int64_t *period_ns;		/* per disk index: T (0: not on it) */
	int64_t *service_ns;		/* per disk index: C */
	struct cwd_counters st;
};

/* An export: one partition. */
struct pbx {
	struct pb *pb;
	struct cw_part *part;
	char name[CW_NAME_MAX + 1];
	char description[128];
	uint32_t *disks;		/* indexes of the disks it touches */
	unsigned ndisks;
	struct resv *resv;
	struct pbx *next;
};

struct pb {
	struct cw_pool *pool;
	struct cw_slots_domain *domain;
	atomic_uint live_ctx;		/* threads holding a booking descriptor */
	const struct cwd_config *cfg;
	uint32_t block_size;
	struct disk *disks;
	size_t ndisks;
	struct pbx *exports;
	struct resv **resvs;
	size_t nresvs;
	void *zeros;
	int64_t start_ns;
};

struct preq;

struct piece {
	struct piece *next;
	struct preq *req;
	struct lane *lane;
	bool rt;
	bool first_on_disk;		/* RT: this piece moves the stream's expected release */
	struct resv *resv;
	struct cw_sched_req sr;
	struct cw_io_req io;
	int64_t start_ns;
};

struct preq {
	struct nbd_io *nio;
	struct pbx *x;
	int64_t arrival_ns;
	atomic_uint pending;
	atomic_int err;
	bool fua;			/* a flush phase follows the writes */
	unsigned npieces, nflush;
	struct piece p[];		/* npieces, then nflush */
};

static const struct nbd_backend_ops pb_ops;

/* ---- intake: the lane's slot reservation record ----
 *
 * Every piece is booked in its lane's RADIR record (clockwise/slots.h) by
 * the thread that maps the request: cw_slots_reserve() finds the first run
 * of vacant slots from the record's now, long enough for the piece's
 * expected service time, and cw_slots_commit() publishes it with the piece
 * as cookie.  Both are lock-free; concurrent connections contend only on
 * the slots themselves.  The record's now is the dispatcher's cursor: it
 * takes committed bookings in slot order (cw_slots_next) as soon as they
 * are there, not when the wall clock reaches their slot, so slots measure
 * disk time queued on the lane and release times and deadlines stay the
 * scheduling core's business.  A booking the cursor passed before it was
 * committed is refused at commit (-ETIMEDOUT) and booked again.
 */

static pthread_key_t ctx_key;
static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;

/* A thread's booking descriptor; freed when the thread ends. */
struct tctx {
	struct cw_slots_ctx *ctx;
	struct pb *pb;
};

static void ctx_free(void *arg)
{
	struct tctx *t = arg;
	struct pb *pb = t->pb;

	cw_slots_ctx_free(t->ctx);
	free(t);
	atomic_fetch_sub(&pb->live_ctx, 1);	/* pb_free waits for this */
}

static void ctx_key_init(void)
{
	if (pthread_key_create(&ctx_key, ctx_free) != 0)
		abort();	/* only at start, with no key left: nothing can run */
}

/* This thread's descriptor in the domain, made on first use and freed when
 * the thread ends (connection threads come and go). */
static struct cw_slots_ctx *thread_ctx(struct pb *pb)
{
	struct tctx *t = pthread_getspecific(ctx_key);

	if (t)
		return t->ctx;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->pb = pb;
	if (cw_slots_ctx_new(pb->domain, &t->ctx) < 0) {
		free(t);
		return NULL;
	}
	atomic_fetch_add(&pb->live_ctx, 1);
	pthread_setspecific(ctx_key, t);
	return t->ctx;
}

static void futex_wait(atomic_int *addr, int val, int64_t timeout_ns)
{
	struct timespec ts, *tsp = NULL;

	if (timeout_ns >= 0) {
		ts.tv_sec = timeout_ns / CW_NS_PER_S;
		ts.tv_nsec = timeout_ns % CW_NS_PER_S;
		tsp = &ts;
	}
	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, tsp, NULL, 0);
}

static void lane_wake(struct lane *l)
{
	/* seq_cst on both sides (here after the booking, and in lane_park
	 * before it looks at the record) so one of them sees the other. */
	if (atomic_load(&l->sleeping) && atomic_exchange(&l->sleeping, 0))
		syscall(SYS_futex, &l->sleeping, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static bool lane_has_bookings(struct lane *l)
{
	return atomic_load(&l->booked_end) > cw_slots_now(l->rec);
}

/* Books piece p on its lane; 0 or a negative errno. */
static int lane_push(struct pb *pb, struct piece *p)
{
	struct lane *l = p->lane;
	struct cw_slots_ctx *ctx = thread_ctx(pb);
	struct cw_slots_req rq = { 0 };
	struct cw_slots_booking b;
	int64_t svc = 0, end, cur;
	int r;

	if (!ctx)
		return -EUSERS;
	if (p->io.op != CW_IO_FSYNC)
		cw_model_service_ns(&l->disk->model, 0, 0, p->io.len, &svc);
	rq.dir = p->io.op == CW_IO_READ ? CW_SLOTS_READ : CW_SLOTS_WRITE;
	rq.shape = CW_SLOTS_SINGLE;
	rq.ndisks = 1;
	rq.disks[0] = l->rec;
	rq.size_slots = (uint32_t)CW_MIN(CW_MAX(CW_DIV_ROUND_UP(svc, l->slot_ns), 1),
					 BOOKING_SLOTS_MAX);
	rq.block = p->io.off / pb->block_size;
	rq.priority = p->rt;
	for (;;) {
		rq.start_slot = cw_slots_now(l->rec);
		rq.deadline_slot = rq.start_slot + SLOTS_WINDOW - rq.size_slots;
		r = cw_slots_reserve(ctx, &rq, &b);
		if (r == CW_SLOTS_FAIL) {
			/* The lane has a whole window of work queued: wait
			 * for its dispatcher to take some. */
			lane_wake(l);
			sched_yield();
			continue;
		}
		if (r < 0)
			return r;
		r = cw_slots_commit(ctx, &b, (uint64_t)(uintptr_t)p);
		if (r == 0)
			break;
		cw_slots_release(ctx, &b);
		if (r != -ETIMEDOUT)
			return r;
	}
	end = b.first_slot + b.n_slots;
	cur = atomic_load(&l->booked_end);
	while (cur < end && !atomic_compare_exchange_weak(&l->booked_end, &cur, end))
		;
	lane_wake(l);
	return 0;
}

/* Every committed booking so far, in slot order. */
static struct piece *lane_take(struct lane *l)
{
	struct piece *head = NULL, **tail = &head;
	struct cw_slots_entry e;
	int64_t until;

	while ((until = atomic_load(&l->booked_end)) > cw_slots_now(l->rec)) {
		if (cw_slots_next(l->rec, until, &e) != 1)
			continue;
		*tail = (struct piece *)(uintptr_t)e.cookie;
		(*tail)->next = NULL;
		tail = &(*tail)->next;
	}
	return head;
}

static void lane_park(struct lane *l, int64_t timeout_ns)
{
	int64_t until = cw_now_ns() + SPIN_NS;

	/* A client at queue depth 1 sends its next request microseconds
	 * after the reply: yielding for a moment catches it without the
	 * futex round trip, and lets the connection threads run meanwhile. */
	while (!lane_has_bookings(l) && cw_now_ns() < until &&
	       (timeout_ns < 0 || timeout_ns > SPIN_NS))
		sched_yield();
	atomic_store(&l->sleeping, 1);
	if (lane_has_bookings(l) || atomic_load(&l->stop)) {
		atomic_store(&l->sleeping, 0);
		return;
	}
	futex_wait(&l->sleeping, 1, timeout_ns);
	atomic_store(&l->sleeping, 0);
}

/* ---- completion ---- */

static void req_finish(struct preq *q);

static void log_io_error(struct lane *l, const struct piece *p, int err)
{
	struct disk *d = l->disk;
	uint64_t n = atomic_fetch_add_explicit(&d->nerrors, 1, memory_order_relaxed) + 1;
	static const char *const ops[] = { "read", "write", "fdatasync" };

	if (n <= ERRORS_LOGGED || n % 1000 == 0)
		cwd_log(LOG_ERR, "disk %s (%s): %s of %zu bytes at offset %" PRIu64 " failed: %s "
			"(export %s; %" PRIu64 " errors on this disk so far)", d->name, d->path,
			ops[p->io.op], p->io.len, p->io.off, strerror(-err), p->req->x->name, n);
}

/* Called on the dispatcher thread when a piece is done (err 0 or -errno). */
static void piece_done(struct lane *l, struct piece *p, int err, int64_t now)
{
	struct preq *q = p->req;
	int zero = 0;

	cwd_add(&l->st.requests, 1);
	cwd_queue_change(&l->st, -1);
	if (err) {
		cwd_add(&l->st.errors, 1);
		log_io_error(l, p, err);
		atomic_compare_exchange_strong(&q->err, &zero, err);
	} else if (p->io.op == CW_IO_READ) {
		cwd_add(&l->st.read_bytes, p->io.len);
	} else if (p->io.op == CW_IO_WRITE) {
		cwd_add(&l->st.write_bytes, p->io.len);
	} else {
		cwd_add(&l->st.flushes, 1);
	}
	if (p->rt) {
		cwd_add(&l->st.rt_done, 1);
		cwd_add(&p->resv->st.requests, 1);
		cwd_add(&p->resv->st.rt_done, 1);
		cwd_add(p->io.op == CW_IO_READ ? &p->resv->st.read_bytes : &p->resv->st.write_bytes,
			p->io.len);
		if (now > p->sr.deadline_ns) {
			cwd_add(&l->st.rt_missed, 1);
			cwd_add(&p->resv->st.rt_missed, 1);
		}
	} else {
		cwd_add(&l->st.be_done, 1);
		cwd_hist_add(l->st.be_lat, now - q->arrival_ns);
		if (l->sched && p->sr.via == CW_SCHED_VIA_SLACK)
			cwd_add(&l->st.slack_used_ns, (uint64_t)(now - p->start_ns));
	}
	if (atomic_fetch_sub(&q->pending, 1) == 1)
		req_finish(q);
}

/* ---- dispatcher ---- */

static void lane_fail(struct lane *l, struct piece *p, int err)
{
	piece_done(l, p, err, cw_now_ns());
}

static void fifo_append(struct lane *l, struct piece *p)
{
	p->next = NULL;
	if (l->fifo_tail)
		l->fifo_tail->next = p;
	else
		l->fifo = p;
	l->fifo_tail = p;
}

/* Fills the scheduling fields of a piece that arrived on a stream lane. */
static int sched_enqueue(struct lane *l, struct piece *p, int64_t now)
{
	struct disk *d = l->disk;
	struct cw_sched_req *sr = &p->sr;
	int64_t svc;
	int r;

	memset(sr, 0, sizeof(*sr));
	sr->arrival_ns = p->req->arrival_ns;
	sr->user = p;
	if (p->rt) {
		size_t di = (size_t)(d - l->pb->disks);
		int64_t *exp = &l->expected_ns[p->resv->idx];

		sr->cls = CW_SCHED_RT;
		sr->stream = p->resv->idx;
		sr->period_ns = p->resv->period_ns[di];
		sr->service_ns = p->resv->service_ns[di];
		/* The paper's release: when the stream was expected, or when
		 * the request came, whichever is later; the next is expected
		 * a period after this one's release.  Further pieces of the
		 * same request on this disk belong to the same job. */
		if (p->first_on_disk) {
			sr->expected_ns = *exp ? *exp : sr->arrival_ns;
			*exp = CW_MAX(sr->arrival_ns, sr->expected_ns) + sr->period_ns;
		} else {
			sr->expected_ns = *exp - sr->period_ns;
		}
	} else {
		sr->cls = CW_SCHED_BE;
		r = cw_model_service_ns(&d->model, 0, 0, p->io.len ? p->io.len : 4096, &svc);
		sr->service_ns = r < 0 ? CW_NS_PER_MS : svc;
	}
	r = cw_sched_enqueue(l->sched, sr, now);
	if (r == -E2BIG && !p->rt && atomic_fetch_add(&d->nerrors, 0) < ERRORS_LOGGED)
		cwd_log(LOG_ERR, "disk %s: a best-effort request of %zu bytes does not fit in the "
			"slack the admitted streams leave", d->name, p->io.len);
	return r;
}

static void lane_intake(struct lane *l, int64_t now)
{
	struct piece *p = lane_take(l), *next;
	int r;

	for (; p; p = next) {
		next = p->next;
		if (!l->sched) {
			fifo_append(l, p);
			continue;
		}
		r = sched_enqueue(l, p, now);
		if (r < 0)
			lane_fail(l, p, r == -E2BIG ? -EIO : r);
	}
}

static int submit_one(struct lane *l, struct piece *p, int64_t now)
{
	struct cw_io_req *io = &p->io;
	int r;

	p->start_ns = now;
	r = cw_io_submit(l->eng, &io, 1);
	if (r == 1) {
		l->inflight++;
		return 0;
	}
	return r < 0 ? r : -EAGAIN;
}

/* Starts what the policy allows; sets *wait_until when it asked for a
 * later call (-1: no timer). */
static void lane_dispatch(struct lane *l, int64_t now, int64_t *wait_until)
{
	unsigned depth = l->pb->cfg->queue_depth;

	*wait_until = -1;
	if (l->sched) {
		struct cw_sched_decision dec;
		struct piece *p;
		int r;

		if (l->busy)
			return;
		r = cw_sched_next(l->sched, now, &dec);
		if (r < 0 || dec.verdict == CW_SCHED_IDLE || dec.verdict == CW_SCHED_BUSY)
			return;
		if (dec.verdict == CW_SCHED_WAIT) {
			*wait_until = dec.until_ns;
			return;
		}
		p = dec.req->user;
		r = submit_one(l, p, now);
		if (r < 0) {
			cw_sched_complete(l->sched, &p->sr, now, 0);
			lane_fail(l, p, r);
			return;
		}
		l->busy = true;
		return;
	}
	while (l->fifo && l->inflight < depth) {
		struct cw_io_req *batch[REAP_BATCH];
		struct piece *p = l->fifo;
		unsigned n = 0, i;
		int r;

		while (p && n < REAP_BATCH && l->inflight + n < depth) {
			p->start_ns = now;
			batch[n++] = &p->io;
			p = p->next;
		}
		r = cw_io_submit(l->eng, batch, n);
		if (r <= 0) {
			if (r < 0 && r != -EAGAIN && r != -EBUSY) {
				struct piece *f = l->fifo;

				l->fifo = f->next;
				if (!l->fifo)
					l->fifo_tail = NULL;
				lane_fail(l, f, r);
				continue;
			}
			return;	/* the engine is full: reap first */
		}
		for (i = 0; i < (unsigned)r; i++)
			l->fifo = l->fifo->next;
		if (!l->fifo)
			l->fifo_tail = NULL;
		l->inflight += (unsigned)r;
	}
}

static void lane_reaped(struct lane *l, struct cw_io_req *io, int64_t now)
{
	struct piece *p = io->user;
	int err = 0;

	l->inflight--;
	if (io->res < 0) {
		err = (int)io->res;
	} else if (io->op != CW_IO_FSYNC && (size_t)io->res < io->len) {
		if (io->res == 0) {
			err = -EIO;	/* past the end of the disk */
		} else {
			/* A short transfer: carry on with the rest. */
			io->buf = (uint8_t *)io->buf + io->res;
			io->len -= (size_t)io->res;
			io->off += (uint64_t)io->res;
			if (cw_io_submit(l->eng, &io, 1) == 1) {
				l->inflight++;
				return;
			}
			err = -EIO;
		}
	}
	if (l->sched) {
		cw_sched_complete(l->sched, &p->sr, now, now - p->start_ns);
		l->busy = false;
	}
	piece_done(l, p, err, now);
}

static void *lane_main(void *arg)
{
	struct lane *l = arg;
	struct cw_io_req *done[REAP_BATCH];
	int64_t wait_until = -1, now, timeout;
	int n, i;

	for (;;) {
		now = cw_now_ns();
		lane_intake(l, now);
		lane_dispatch(l, now, &wait_until);
		if (l->inflight) {
			/* Under cw_sched nothing else may start before the
			 * request in service ends; a full lane waits for a
			 * completion; otherwise look at the record again soon. */
			if (l->sched || l->inflight >= l->pb->cfg->queue_depth)
				timeout = -1;
			else
				timeout = l->fifo ? 0 : POLL_NS;
			n = cw_io_reap(l->eng, timeout ? 1 : 0, timeout, done, REAP_BATCH);
			now = cw_now_ns();
			for (i = 0; i < n; i++)
				lane_reaped(l, done[i], now);
			continue;
		}
		if (l->fifo)
			continue;
		if (atomic_load(&l->stop) && !lane_has_bookings(l)) {
			struct cw_sched_stats ss;

			if (!l->sched)
				break;
			cw_sched_get_stats(l->sched, &ss);
			if (!ss.rt_released && !ss.rt_waiting && !ss.be_queued)
				break;
		}
		lane_park(l, wait_until < 0 ? -1 : CW_MAX(wait_until - now, 0));
	}
	return NULL;
}

/* ---- submission (connection threads) ---- */

static struct lane *piece_lane(struct pb *pb, uint32_t disk_index, uint64_t phys_off)
{
	struct disk *d = &pb->disks[disk_index];

	if (d->ntasks || d->nlanes == 1)
		return &d->lanes[0];
	return &d->lanes[(phys_off / pb->block_size) % d->nlanes];
}

static int disk_index(struct pb *pb, uint32_t id)
{
	size_t i;

	for (i = 0; i < pb->ndisks; i++)
		if (pb->disks[i].id == id)
			return pb->disks[i].fd >= 0 ? (int)i : -ENODEV;
	return -ENODEV;
}

static void piece_init_flush(struct preq *q, struct piece *p, struct pb *pb, uint32_t di)
{
	struct disk *d = &pb->disks[di];

	*p = (struct piece){ .req = q, .lane = &d->lanes[0] };
	p->io = (struct cw_io_req){ .fd = d->fd, .op = CW_IO_FSYNC, .user = p };
}

/* A flush piece for every disk of the export, from piece `at` on. */
static void add_flush_pieces(struct preq *q, unsigned at)
{
	struct pbx *x = q->x;
	unsigned i;

	for (i = 0; i < x->ndisks; i++)
		piece_init_flush(q, &q->p[at + i], x->pb, x->disks[i]);
}

static void push_pieces(struct preq *q, unsigned from, unsigned n)
{
	struct pb *pb = q->x->pb;
	unsigned i;

	atomic_store(&q->pending, n);
	for (i = 0; i < n; i++)
		cwd_queue_change(&q->p[from + i].lane->st, 1);
	for (i = 0; i < n; i++) {
		struct piece *p = &q->p[from + i];
		int r = lane_push(pb, p);

		if (r < 0) {
			p->rt = false;
			piece_done(p->lane, p, r, cw_now_ns());
		}
	}
}

static void req_finish(struct preq *q)
{
	int err = atomic_load(&q->err);

	if (q->fua && !err) {
		q->fua = false;
		push_pieces(q, q->npieces, q->nflush);
		return;
	}
	nbd_io_complete(q->nio, err);
	free(q);
}

static bool in_span(const struct resv *r, int64_t now)
{
	return now >= r->start_ns && (r->end_ns == 0 || now < r->end_ns);
}

/* Maps and books a READ, WRITE or (zero: from the shared zero buffer, in
 * ZERO_CHUNK pieces) WRITE_ZEROES. */
static int submit_rw(struct pbx *x, struct nbd_io *nio, enum cw_io_op op, bool zero)
{
	struct pb *pb = x->pb;
	uint64_t off = nio->offset, end = nio->offset + nio->length;
	uint32_t chunk = zero ? ZERO_CHUNK : UINT32_MAX;
	size_t maxp = nio->length / CW_MIN(pb->block_size, chunk) + 2;
	unsigned nflush = nio->fua ? (unsigned)pb->ndisks : 0, n = 0, i;
	struct resv *rv = x->resv;
	struct preq *q;
	bool seen[CW_DISKS_MAX + 1] = { false };
	uint32_t touched[CW_DISKS_MAX];
	unsigned nt = 0;
	int r;

	q = malloc(sizeof(*q) + (maxp + nflush) * sizeof(struct piece));
	if (!q)
		return -ENOMEM;
	q->nio = nio;
	q->x = x;
	q->arrival_ns = cw_now_ns();
	atomic_init(&q->err, 0);
	bool rt = rv && off >= rv->lo && end <= rv->hi && in_span(rv, q->arrival_ns);

	while (off < end) {
		struct cw_extent e;
		struct piece *p = &q->p[n];
		int di;

		r = cw_part_map(x->part, off, CW_MIN(end - off, chunk), &e);
		if (r < 0)
			goto fail;
		di = disk_index(pb, e.disk_id);
		if (di < 0) {
			r = di;
			goto fail;
		}
		if (n >= maxp) {	/* cannot happen: pieces end at blocks */
			r = -EIO;
			goto fail;
		}
		*p = (struct piece){ .req = q, .lane = piece_lane(pb, (uint32_t)di, e.phys_offset) };
		p->io = (struct cw_io_req){
			.fd = pb->disks[di].fd, .op = op, .len = e.length, .off = e.phys_offset,
			.buf = zero ? pb->zeros : (uint8_t *)nio->buf + (off - nio->offset),
			.user = p,
		};
		if (!seen[e.disk_id]) {
			seen[e.disk_id] = true;
			p->first_on_disk = true;
			touched[nt++] = (uint32_t)di;
		}
		if (rt && rv->period_ns[di]) {
			p->rt = true;
			p->resv = rv;
		}
		off += e.length;
		n++;
	}
	q->npieces = n;
	/* FUA: once every piece is written, fdatasync the disks it touched. */
	q->nflush = nflush ? nt : 0;
	q->fua = q->nflush > 0;
	for (i = 0; i < q->nflush; i++)
		piece_init_flush(q, &q->p[n + i], pb, touched[i]);
	push_pieces(q, 0, n);
	return 0;
fail:
	free(q);
	return r;
}

static int pb_pread(void *backend, struct nbd_io *io)
{
	return submit_rw(backend, io, CW_IO_READ, false);
}

static int pb_pwrite(void *backend, struct nbd_io *io)
{
	return submit_rw(backend, io, CW_IO_WRITE, false);
}

static int pb_zero(void *backend, struct nbd_io *io)
{
	return submit_rw(backend, io, CW_IO_WRITE, true);
}

static int pb_flush(void *backend, struct nbd_io *nio)
{
	struct pbx *x = backend;
	struct preq *q;

	if (!x->ndisks) {
		nbd_io_complete(nio, 0);
		return 0;
	}
	q = malloc(sizeof(*q) + x->ndisks * sizeof(struct piece));
	if (!q)
		return -ENOMEM;
	q->nio = nio;
	q->x = x;
	q->arrival_ns = cw_now_ns();
	atomic_init(&q->err, 0);
	q->fua = false;
	q->npieces = x->ndisks;
	q->nflush = 0;
	add_flush_pieces(q, 0);
	push_pieces(q, 0, q->npieces);
	return 0;
}

/* TRIM is advisory (the protocol lets a server ignore it): blocks belong to
 * the partition until it shrinks, so there is nothing to give back.  With
 * FUA the (unchanged) range is as stable as it was. */
static int pb_trim(void *backend, struct nbd_io *io)
{
	(void)backend;
	nbd_io_complete(io, 0);
	return 0;
}

static const struct nbd_backend_ops pb_ops = {
	.pread = pb_pread,
	.pwrite = pb_pwrite,
	.flush = pb_flush,
	.trim = pb_trim,
	.zero = pb_zero,
};

/* ---- setup ---- */

static const char *const state_names[] = {
	[CW_DISK_PRESENT] = "present",
	[CW_DISK_MISSING] = "missing",
	[CW_DISK_WRONG_LABEL] = "holds another disk or no label",
	[CW_DISK_BAD_LABEL] = "has a corrupt label",
};

static int disk_open(struct pb *pb, struct disk *d, const struct cw_disk_info *info)
{
	const struct cwd_config *cfg = pb->cfg;
	const struct cwd_config_disk *cd = NULL;
	const char *model;
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
	d->nlanes = cd ? cd->lanes : (info->tier == CW_TIER_SSD ? 4 : 1);
	if (d->nlanes == 0)
		d->nlanes = 1;
	model = cd && cd->model ? cd->model : info->tier == CW_TIER_SSD ? "ssd" : "hdd7200";
	r = cw_model_preset(model, &d->model);
	if (r < 0) {
		cwd_log(LOG_ERR, "disk %s: unknown model \"%s\"", d->name, model);
		return r;
	}
	r = cw_model_service_ns(&d->model, 0, 0, pb->block_size, &d->be_max_ns);
	if (r < 0)
		d->be_max_ns = 0;
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
	if (info->state != CW_DISK_PRESENT) {
		cwd_log(LOG_WARNING, "disk %s (%s) %s: its partitions are not exported", d->name,
			d->path, state_names[info->state]);
		return 0;
	}
	r = cw_io_open(info->path, !cfg->exports.read_only, &d->direct);
	if (r < 0) {
		/* Like a missing disk: its partitions wait, the rest are served. */
		cwd_log(LOG_ERR, "disk %s: cannot open %s: %s; its partitions are not exported",
			d->name, d->path, strerror(-r));
		return 0;
	}
	d->fd = r;
	r = cw_io_alignment(d->fd, &d->align);
	if (r < 0 || !d->direct)
		d->align = 512;
	cwd_log(LOG_INFO, "disk %s: %s, %s, policy %s, %u lane%s, %s I/O", d->name, d->path,
		cw_tier_name(d->tier), cw_sched_policy_name(d->policy), d->nlanes,
		d->nlanes == 1 ? "" : "s", d->direct ? "direct" : "buffered");
	return 0;
}

int pb_new(struct cw_pool *pool, const struct cwd_config *cfg, struct pb **ret_pb)
{
	struct cw_disk_info *infos = NULL;
	struct pb *pb;
	size_t n, i, j;
	int r;

	pb = calloc(1, sizeof(*pb));
	if (!pb)
		return -ENOMEM;
	pb->pool = pool;
	pb->cfg = cfg;
	pb->block_size = cw_pool_block_size(pool);
	pb->start_ns = cw_now_ns();
	pthread_once(&ctx_once, ctx_key_init);
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
	r = cw_disk_list(pool, &infos, &n);
	if (r < 0)
		goto fail;
	pb->disks = calloc(n ? n : 1, sizeof(*pb->disks));
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

int pb_export(struct pb *pb, struct cw_part *part, struct nbd_export *ret_exp)
{
	struct cw_part_info info;
	uint64_t nblocks, b;
	uint32_t *ids = NULL;
	struct pbx *x;
	size_t align = 512;
	unsigned i;
	bool rotational = false;
	int r;

	r = cw_part_info(part, &info);
	if (r < 0)
		return r;
	nblocks = cw_part_nblocks(part);
	x = calloc(1, sizeof(*x));
	ids = calloc(nblocks ? nblocks : 1, sizeof(*ids));
	if (!x || !ids) {
		free(x);
		free(ids);
		return -ENOMEM;
	}
	r = nblocks ? cw_part_block_disks(part, 0, nblocks, ids) : 0;
	if (r < 0)
		goto fail;
	x->disks = calloc(pb->ndisks ? pb->ndisks : 1, sizeof(*x->disks));
	if (!x->disks) {
		r = -ENOMEM;
		goto fail;
	}
	for (b = 0; b < nblocks; b++) {
		int di = -ENODEV;

		for (i = 0; i < pb->ndisks; i++)
			if (pb->disks[i].id == ids[b])
				di = (int)i;
		if (di < 0 || pb->disks[di].fd < 0) {
			cwd_log(LOG_WARNING, "partition %s is not exported: its disk %s is missing",
				info.name, di < 0 ? "(unknown)" : pb->disks[di].name);
			r = -ENODEV;
			goto fail;
		}
		for (i = 0; i < x->ndisks; i++)
			if (x->disks[i] == (uint32_t)di)
				break;
		if (i == x->ndisks) {
			x->disks[x->ndisks++] = (uint32_t)di;
			align = CW_MAX(align, pb->disks[di].align);
			rotational |= pb->disks[di].tier == CW_TIER_HDD;
		}
	}
	free(ids);
	if (align > 65536) {
		r = -EINVAL;
		goto fail_x;
	}
	x->pb = pb;
	x->part = part;
	snprintf(x->name, sizeof(x->name), "%s", info.name);
	snprintf(x->description, sizeof(x->description), "clockwise partition %s on %u disk%s",
		 info.name, x->ndisks, x->ndisks == 1 ? "" : "s");
	x->next = pb->exports;
	pb->exports = x;
	*ret_exp = (struct nbd_export){
		.name = x->name,
		.description = x->description,
		.size = info.size_bytes - info.size_bytes % align,
		.read_only = pb->cfg->exports.read_only,
		.flush_global = pb->cfg->exports.multi_conn,
		.rotational = rotational,
		.min_block = (uint32_t)align,
		.pref_block = CW_MAX(pb->cfg->exports.block_size, (uint32_t)align),
		.max_block = pb->cfg->exports.max_request_bytes,
		.ops = &pb_ops,
		.backend = x,
	};
	return 0;
fail:
	free(ids);
fail_x:
	free(x->disks);
	free(x);
	return r;
}

/* ---- reservations ---- */

static int parse_size(const char *s, uint64_t *ret)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	if (!*s || *s == '-')
		return -EINVAL;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*ret = (uint64_t)v << shift;
	return 0;
}

int pb_reservation_parse(const char *spec, struct pb_reservation *ret, char *err, size_t errlen)
{
	char buf[512], *f[8], *save = NULL, *tok;
	uint64_t v[7] = { 0 };
	unsigned n = 0, i;

	if (strlen(spec) >= sizeof(buf)) {
		snprintf(err, errlen, "reservation \"%.40s...\" is too long", spec);
		return -EINVAL;
	}
	strcpy(buf, spec);
	for (tok = strtok_r(buf, ":", &save); tok && n < 8; tok = strtok_r(NULL, ":", &save))
		f[n++] = tok;
	if ((n != 3 && n != 5 && n != 7) || tok) {
		snprintf(err, errlen, "reservation \"%s\": expected "
			 "EXPORT:BANDWIDTH:BLOCK[:OFFSET:LENGTH[:START_S:END_S]]", spec);
		return -EINVAL;
	}
	if (!cw_name_valid(f[0])) {
		snprintf(err, errlen, "reservation \"%s\": \"%s\" is not an export name", spec, f[0]);
		return -EINVAL;
	}
	for (i = 1; i < n; i++) {
		if (parse_size(f[i], &v[i]) < 0 || (i >= 5 && v[i] > INT32_MAX)) {
			snprintf(err, errlen, "reservation \"%s\": \"%s\" is not a %s", spec, f[i],
				 i >= 5 ? "number of seconds" : "size");
			return -EINVAL;
		}
	}
	if (!v[1] || !v[2]) {
		snprintf(err, errlen, "reservation \"%s\": bandwidth and block size must be > 0",
			 spec);
		return -EINVAL;
	}
	if (n == 7 && v[6] && v[6] <= v[5]) {
		snprintf(err, errlen, "reservation \"%s\": the span ends before it starts", spec);
		return -EINVAL;
	}
	*ret = (struct pb_reservation){
		.bandwidth_bps = v[1], .block_bytes = v[2], .offset = v[3], .length = v[4],
		.span_start_s = (int64_t)v[5], .span_end_s = (int64_t)v[6],
	};
	snprintf(ret->export_name, sizeof(ret->export_name), "%s", f[0]);
	return 0;
}

static void resv_free(struct resv *rv)
{
	if (!rv)
		return;
	free(rv->period_ns);
	free(rv->service_ns);
	free(rv);
}

int pb_reserve(struct pb *pb, const struct pb_reservation *res, char *err, size_t errlen)
{
	struct cw_admit_plan plan = { 0 };
	struct cw_admit_disk *ad = NULL;
	struct cw_admit_layout lay = { 0 };
	struct cw_admit_qos qos = { 0 };
	uint32_t *ldisk = NULL;
	uint64_t *loff = NULL, size, fb, k;
	struct resv *rv = NULL, **arr;
	struct pbx *x;
	size_t i;
	int r;

	for (x = pb->exports; x; x = x->next)
		if (strcmp(x->name, res->export_name) == 0)
			break;
	if (!x) {
		snprintf(err, errlen, "reservation for %s: no such export", res->export_name);
		return -ENOENT;
	}
	if (x->resv) {
		snprintf(err, errlen, "reservation for %s: the export already has one", x->name);
		return -EEXIST;
	}
	size = cw_part_size_bytes(x->part);
	rv = calloc(1, sizeof(*rv));
	if (!rv)
		return -ENOMEM;
	rv->r = *res;
	rv->x = x;
	rv->lo = res->offset;
	rv->hi = res->length ? res->offset + res->length : size;
	if (rv->lo >= rv->hi || rv->hi > size || rv->hi < rv->lo) {
		snprintf(err, errlen, "reservation for %s: range [%" PRIu64 ", %" PRIu64
			 ") is not inside the partition (%" PRIu64 " bytes)", x->name, rv->lo,
			 rv->hi, size);
		r = -ERANGE;
		goto out;
	}
	rv->start_ns = pb->start_ns + res->span_start_s * CW_NS_PER_S;
	rv->end_ns = res->span_end_s ? pb->start_ns + res->span_end_s * CW_NS_PER_S : 0;
	rv->period_ns = calloc(pb->ndisks, sizeof(int64_t));
	rv->service_ns = calloc(pb->ndisks, sizeof(int64_t));
	fb = rv->lo / pb->block_size;
	lay.pblock_bytes = pb->block_size;
	lay.n_pblocks = (size_t)((rv->hi - 1) / pb->block_size - fb + 1);
	lay.first_bytes = rv->lo - fb * pb->block_size;
	lay.range_bytes = rv->hi - rv->lo;
	ldisk = calloc(lay.n_pblocks, sizeof(*ldisk));
	loff = calloc(lay.n_pblocks, sizeof(*loff));
	ad = calloc(pb->ndisks, sizeof(*ad));
	if (!rv->period_ns || !rv->service_ns || !ldisk || !loff || !ad) {
		r = -ENOMEM;
		goto out;
	}
	for (k = 0; k < lay.n_pblocks; k++) {
		struct cw_extent e;
		int di;

		r = cw_part_map(x->part, (fb + k) * pb->block_size, pb->block_size, &e);
		if (r < 0)
			goto out;
		di = disk_index(pb, e.disk_id);
		if (di < 0) {
			r = di;
			goto out;
		}
		ldisk[k] = (uint32_t)di;
		loff[k] = e.phys_offset;
	}
	lay.disk = ldisk;
	lay.disk_off = loff;
	for (i = 0; i < pb->ndisks; i++)
		ad[i] = (struct cw_admit_disk){ &pb->disks[i].model, pb->disks[i].tasks,
						pb->disks[i].ntasks };
	qos = (struct cw_admit_qos){ .bandwidth_bps = res->bandwidth_bps,
				     .block_bytes = res->block_bytes,
				     .span_start_ns = rv->start_ns, .span_end_ns = rv->end_ns };
	r = cw_admit_plan(&qos, &lay, ad, pb->ndisks, &plan);
	if (r < 0) {
		snprintf(err, errlen, "reservation for %s: %s", x->name,
			 plan.reason[0] ? plan.reason : strerror(-r));
		goto out;
	}
	if (!plan.admitted) {
		/* The plan counts disks by index; people know them by name. */
		snprintf(err, errlen, "reservation for %s refused on disk %s: %s", x->name,
			 plan.failed_part < plan.n_parts ?
			 pb->disks[plan.parts[plan.failed_part].disk].name : "?", plan.reason);
		r = -EBUSY;
		goto out;
	}
	arr = realloc(pb->resvs, (pb->nresvs + 1) * sizeof(*arr));
	if (!arr) {
		r = -ENOMEM;
		goto out;
	}
	pb->resvs = arr;
	/* Commit: every part's task joins its disk's set. */
	for (i = 0; i < plan.n_parts; i++) {
		const struct cw_admit_part *pt = &plan.parts[i];
		struct disk *d = &pb->disks[pt->disk];
		struct cw_task *t = realloc(d->tasks, (d->ntasks + 1) * sizeof(*t));

		if (!t) {
			r = -ENOMEM;	/* earlier parts stay: the daemon stops on this */
			goto out;
		}
		d->tasks = t;
		d->tasks[d->ntasks++] = pt->task;
		rv->period_ns[pt->disk] = pt->task.period_ns;
		rv->service_ns[pt->disk] = pt->task.service_ns;
		cwd_log(LOG_INFO, "reservation %s: disk %s T=%" PRId64 " us C=%" PRId64 " us "
			"(slack %" PRId64 " us)", x->name, d->name, pt->task.period_ns / 1000,
			pt->task.service_ns / 1000, pt->result.delta_l_ns / 1000);
	}
	rv->idx = pb->nresvs;
	pb->resvs[pb->nresvs++] = rv;
	x->resv = CW_TAKE_PTR(rv);
	r = 0;
out:
	cw_admit_plan_done(&plan);
	free(ldisk);
	free(loff);
	free(ad);
	resv_free(rv);
	return r;
}

/* The scheduling core of a disk with streams: ΔL from Jeffay's test over
 * every admitted part, and a periodic BE server when the slack cannot hold
 * the largest BE piece (section 3.3). */
static int disk_sched(struct pb *pb, struct disk *d)
{
	struct cw_admit_result res;
	struct cw_sched_opts o;
	struct lane *l = &d->lanes[0];
	int64_t slice = 0;
	struct cw_task *t;
	int r;

	r = cw_admit_test(d->tasks, d->ntasks, &res);
	if (r < 0)
		return r;
	if (!res.schedulable) {
		cwd_log(LOG_ERR, "disk %s: the admitted streams are not schedulable: %s", d->name,
			res.reason);
		return -EBUSY;
	}
	cw_sched_opts_init(&o);
	o.policy = d->policy;
	if (CW_MAX(res.delta_l_ns, res.idle_be_ns) < d->be_max_ns) {
		r = cw_admit_server_fit(d->tasks, d->ntasks, SERVER_PERIOD_NS, 0, &slice);
		if (r == 0 && slice > 0) {
			t = realloc(d->tasks, (d->ntasks + 1) * sizeof(*t));
			if (!t)
				return -ENOMEM;
			d->tasks = t;
			t[d->ntasks] = (struct cw_task){ SERVER_PERIOD_NS, slice, 0, 0 };
			r = cw_admit_test(d->tasks, d->ntasks + 1, &res);
			if (r < 0)
				return r;
			o.server_slice_ns = slice;
			o.server_period_ns = SERVER_PERIOD_NS;
		}
	}
	o.delta_l_ns = res.delta_l_ns == CW_ADMIT_NO_LIMIT ? INT64_MAX / 4 : res.delta_l_ns;
	o.idle_be_ns = res.idle_be_ns == CW_ADMIT_NO_LIMIT ? INT64_MAX / 4 : res.idle_be_ns;
	r = cw_sched_new(&o, &l->sched);
	if (r < 0)
		return r;
	cwd_log(LOG_INFO, "disk %s: %zu stream part%s, policy %s, slack %" PRId64 " us, "
		"BE server %" PRId64 " us every %" PRId64 " ms", d->name, d->ntasks,
		d->ntasks == 1 ? "" : "s", cw_sched_policy_name(d->policy), o.delta_l_ns / 1000,
		slice / 1000, slice ? SERVER_PERIOD_NS / CW_NS_PER_MS : 0);
	return 0;
}

int pb_start(struct pb *pb)
{
	size_t i, j;
	int r;

	for (i = 0; i < pb->ndisks; i++) {
		struct disk *d = &pb->disks[i];

		if (d->fd < 0)
			continue;
		if (d->ntasks) {
			r = disk_sched(pb, d);
			if (r < 0)
				return r;
		}
		for (j = 0; j < d->nlanes; j++) {
			struct lane *l = &d->lanes[j];

			l->expected_ns = calloc(pb->nresvs ? pb->nresvs : 1, sizeof(int64_t));
			if (!l->expected_ns)
				return -ENOMEM;
			r = cw_io_engine_new(pb->cfg->io_engine, pb->cfg->queue_depth, &l->eng);
			if (r < 0) {
				cwd_log(LOG_ERR, "disk %s: cannot set up %s: %s", d->name,
					cw_io_kind_name(pb->cfg->io_engine), strerror(-r));
				return r;
			}
			r = -pthread_create(&l->thread, NULL, lane_main, l);
			if (r < 0)
				return r;
			l->started = true;
		}
	}
	return 0;
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
			cwd_counters_log(what, &pb->disks[i].lanes[j].st);
		}
	for (i = 0; i < pb->nresvs; i++) {
		snprintf(what, sizeof(what), "reservation %s", pb->resvs[i]->x->name);
		cwd_counters_log(what, &pb->resvs[i]->st);
	}
}

void pb_free(struct pb *pb)
{
	struct pbx *x, *next;
	size_t i, j;

	if (!pb)
		return;
	for (i = 0; i < pb->ndisks; i++)
		for (j = 0; j < pb->disks[i].nlanes; j++) {
			struct lane *l = &pb->disks[i].lanes[j];

			if (!l->started)
				continue;
			atomic_store(&l->stop, true);
			atomic_store(&l->sleeping, 0);
			syscall(SYS_futex, &l->sleeping, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
			pthread_join(l->thread, NULL);
		}
	for (i = 0; i < pb->ndisks; i++) {
		struct disk *d = &pb->disks[i];

		for (j = 0; j < d->nlanes && d->lanes; j++) {
			cw_io_engine_free(d->lanes[j].eng);
			cw_sched_free(d->lanes[j].sched);
			free(d->lanes[j].expected_ns);
			cw_slots_free(d->lanes[j].rec);
		}
		free(d->lanes);
		free(d->tasks);
		if (d->fd >= 0)
			close(d->fd);
	}
	for (x = pb->exports; x; x = next) {
		next = x->next;
		free(x->disks);
		free(x);
	}
	for (i = 0; i < pb->nresvs; i++)
		resv_free(pb->resvs[i]);
	free(pb->resvs);
	free(pb->disks);
	free(pb->zeros);
	/* Connection threads free their descriptors as they exit, which can
	 * be just after the NBD server saw them finish. */
	while (atomic_load(&pb->live_ctx))
		sched_yield();
	cw_slots_domain_free(pb->domain);
	free(pb);
}
