/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The lanes of clockwised's data path: booking pieces in a lane's slot
 * record, and the dispatcher thread that takes them, applies the disk's
 * policy (the library's dispatch step, clockwise/path.h: Bosch &
 * Mullender, sections 3.1-3.3, through cw_sched) and drives the I/O
 * engine.  See pool-backend.c for the whole path.
 *
 * Who dispatches: whoever holds the lane's dispatch lock.  That is its
 * dispatcher thread, except on a lane without streams whose dispatcher is
 * idle when a connection's reader has booked a burst and is about to
 * block: the reader then runs the dispatch itself (lane_borrow), and on a
 * fast disk its requests are done and answered before it blocks, with no
 * thread woken.  A lane with streams is only ever dispatched by its own
 * thread, so the policy alone decides when its requests start.
 *
 * On an engine whose completions come on threads of their own (an RBD
 * image: cw_io_can_wait), the dispatcher of a lane without streams waits
 * for them without the lock, so a reader books and submits its requests
 * itself even while others are in flight, and leaves them there: their
 * completion wakes the dispatcher, which reaps and answers them.  It is
 * woken for nothing else, where it looked at its record every
 * POLL_NS_RBD (five times during a 1 MiB read) and a request booked
 * while others ran waited for one of them to end.
 */
#include "config.h"

#include <sys/stat.h>

#include "common/atomic.h"
#include "common/futex.h"
#include "common/invariant.h"
#include "daemon/path/pool-internal.h"
#include "daemon/rundelay.h"

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

static void lane_wake(struct lane *l)
{
	/* seq_cst on both sides (here after the booking, and in lane_park
	 * and lane_engine_wait before they look at the record) so one of
	 * them sees the other; every booking that finds the dispatcher
	 * parked wakes it (daemon/park.h). */
	if (!park_wake(&l->park) && atomic_load(&l->eng_waiting))
		cw_io_kick(l->eng);
}

/* Whether the lane's dispatcher waits in its engine (lane_engine_wait)
 * rather than in lane_park; dispatcher, or under the dispatch lock. */
static bool lane_waits_in_engine(const struct lane *l)
{
	return !l->pl.sched && cw_io_can_wait(l->eng);
}

/* Set in dispatcher threads. */
static __thread bool in_dispatcher;

/* Lanes a connection's reader booked into and has not woken yet: it wakes
 * them when it is about to block (lane_unplug), so a burst of requests
 * read at once costs each lane one wake-up and the dispatcher takes the
 * whole burst in one intake. */
#define WAKE_LATER_MAX 8
/* A reader leaves a burst with a piece this large to the dispatcher: the
 * copy costs more than the wake-up, and the dispatcher reads while the
 * reader takes the next requests (1M sequential reads lost a tenth). */
#define BORROW_PIECE_MAX (128u << 10)
/* Big: a piece over BORROW_PIECE_MAX.  The reader's flush (lane_unplug)
 * borrows an idle lane's dispatcher; nbd/protocol-reply.c holds its
 * writers' wake-ups in the same kind of batch. */
static __thread struct wake_batch tls_wake;

void lane_plug(void)
{
	tls_wake.on = true;
}

static bool lane_borrow(struct lane *l);

/* The reader is about to block: each lane it booked into is dispatched
 * here if its dispatcher is idle, or else woken. */
void lane_unplug(void)
{
	unsigned i;

	for (i = 0; i < tls_wake.n; i++)
		if (tls_wake.big[i] || !lane_borrow(tls_wake.who[i]))
			lane_wake(tls_wake.who[i]);
	tls_wake.n = 0;
}

/* rt: a piece of an admitted stream wakes its lane at once; held until
 * the reader blocks it would wait for the booking of the rest of the
 * burst, time the admission test does not count. */
static void lane_wake_later(struct lane *l, bool rt, size_t len)
{
	bool big = len > BORROW_PIECE_MAX;
	unsigned i;

	if (rt || in_dispatcher || !tls_wake.on) {
		lane_wake(l);
		return;
	}
	if (wake_batch_hold(&tls_wake, WAKE_LATER_MAX, l, big) < 0) {
		/* Full: the held lanes are woken now, l is held. */
		for (i = 0; i < tls_wake.n; i++)
			lane_wake(tls_wake.who[i]);
		tls_wake.n = 0;
		(void)wake_batch_hold(&tls_wake, WAKE_LATER_MAX, l, big);
	}
}

static bool lane_has_bookings(struct lane *l)
{
	return atomic_load(&l->booked_end) > cw_slots_now(l->rec) || atomic_load(&l->overflow);
}

/* The same, of what the dispatcher may take now: not past a thick
 * booking's hold (lane_push_thick), whose end wakes it.  What it parks
 * on, so that it never spins, at real-time priority, while a booker it
 * may keep from its CPU holds it back. */
static int64_t held_below(struct lane *l, int64_t until)
{
	if (atomic_load(&l->hold_n))
		for (unsigned h = 0; h < LANE_HOLDS; h++)
			until = CW_MIN(until, (int64_t)atomic_load(&l->hold_at[h]));
	return until;
}

static bool lane_has_takeable(struct lane *l)
{
	return held_below(l, atomic_load(&l->booked_end)) > cw_slots_now(l->rec) ||
	       atomic_load(&l->overflow);
}

/* What a stream's piece notes at its booking, before the commit hands
 * it to the dispatcher, and what lane_miss_woke needs after (read while
 * the piece is still the booker's). */
struct rt_note {
	int64_t booked, rd_booked;
	int rd_fd;
};

/* Notes the booking of the stream's piece p, which waited for a full
 * window since full_since (0: it did not). */
static void rt_booking(struct piece *p, int64_t full_since, struct rt_note *ret)
{
	struct preq *q = p->req;
	const struct nbdsrv_io *nio = q->nio;

	p->booked_ns = cw_now_ns();
	p->push_wait_ns = full_since ? p->booked_ns - full_since : 0;
	/* the reader's CPU wait since arrival, read once a request (its
	 * first piece, on the reader's thread) */
	if (q->reader_cpu_ns < 0)
		q->reader_cpu_ns = nio && nio->reader_rd_fd >= 0 ?
			CW_MAX(rundelay_read(nio->reader_rd_fd) - nio->arrived_rd_ns, 0) : 0;
	/* the run delay at the request's first booking */
	*ret = (struct rt_note){ .booked = p->booked_ns, .rd_fd = -1 };
	if (nio && nio->reader_rd_fd >= 0) {
		ret->rd_fd = nio->reader_rd_fd;
		ret->rd_booked = nio->arrived_rd_ns + q->reader_cpu_ns;
	}
}

/* A booking committed up to slot end on l: its end published, and l's
 * dispatcher woken at once (a stream's piece, rt its note, or at_once),
 * else with the burst. */
static void lane_booked(struct lane *l, int64_t end, const struct rt_note *rt, bool at_once,
			size_t len)
{
	int64_t cur = atomic_load(&l->booked_end);

	while (cur < end && !atomic_compare_exchange_weak(&l->booked_end, &cur, end))
		;
	/* A reader that lost its CPU between the booking and the wake-up
	 * leaves the dispatcher asleep with no wake-up set: a miss then
	 * says so (the CPU's, not the schedule's).  Before the wake-up, which
	 * may hand this CPU to the dispatcher. */
	if (rt)
		lane_miss_woke(l, rt->booked, rt->rd_fd, rt->rd_booked);
	lane_wake_later(l, rt || at_once, len);
}

/* Books piece p on its lane; 0 or a negative errno. */
static int lane_push(struct pb *pb, struct piece *p)
{
	struct lane *l = p->lane;
	bool rt = p->rt;	/* once committed, p is the dispatcher's */
	size_t len = p->io.len;
	struct cw_slots_ctx *ctx = pb_thread_ctx(pb);
	struct cw_slots_req rq = { 0 };
	struct cw_slots_booking b;
	struct rt_note note = { .rd_fd = -1 };
	int64_t svc = 0, full_since = 0;
	int r;

	if (!ctx)
		return -EUSERS;
	if (p->io.op != CW_IO_FSYNC)
		cw_model_service_ns(disk_model(l->disk), 0, 0, p->io.len, &svc);
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
		if (r == CW_SLOTS_FAIL && in_dispatcher) {
			/* A dispatcher (the flush phase of a FUA write) must
			 * not wait for a dispatcher: hand the piece over
			 * beside the record, which its lane drains too. */
			struct piece *head = atomic_load(&l->overflow);

			do {
				p->next = head;
			} while (!atomic_compare_exchange_weak(&l->overflow, &head, p));
			lane_wake(l);
			return 0;
		}
		if (r == CW_SLOTS_FAIL) {
			/* The lane has a whole window of work queued: wait
			 * for its dispatcher to take some. */
			if (rt && !full_since)
				full_since = cw_now_ns();
			lane_wake(l);
			sched_yield();
			continue;
		}
		if (r < 0)
			return r;
		if (rt)
			rt_booking(p, full_since, &note);
		r = cw_slots_commit(ctx, &b, (uint64_t)(uintptr_t)p);
		if (r == 0)
			break;
		cw_slots_release(ctx, &b);
		if (r != -ETIMEDOUT)
			return r;
	}
	lane_booked(l, b.first_slot + b.n_slots, rt ? &note : NULL, false, len);
	return 0;
}

/* ---- thick bookings: a mirrored write's pieces in the same slots ----
 *
 * RADIR's thick request (section III-B): a write of a mirrored partition
 * books the same run of slots on every copy's record (cw_slots_reserve,
 * CW_SLOTS_THICK), so each copy's disk gives it the same time, and it is
 * handed out on every record or on none.  A best-effort write's pieces
 * and a recording stream's real-time ones (each copy's disk charged for
 * every request: resv create --record) alike: the stream's are booked
 * at its priority and noted as lane_push notes one piece (rt_booking),
 * so no copy's record holds a stream's write another copy's lacks, and
 * the request, acknowledged when every piece is done, has every live
 * copy.  The record's commit is per
 * record: a dispatcher that passed the run's first slot on one record
 * after the commit succeeded on another would leave the piece there
 * handed out and the booking refused.  So the booker first holds every
 * lane's cursor below the run (hold_at): a dispatcher advances to the
 * lesser of its bookings' end and the holds (lane_until), having said
 * where it goes (adv) before it reads them, and the booker, having set
 * its hold, reads adv: at most the run's first slot, the cursor stops
 * there until the hold goes (seq_cst on both sides: one of them sees the
 * other's store); past it, the booker lets go and books again.  With
 * every lane held, the commit cannot meet a passed slot on any record. */

/* Takes a free hold entry of l at slot; its index. */
static unsigned hold_take(struct lane *l, int64_t slot)
{
	for (;;) {
		for (unsigned h = 0; h < LANE_HOLDS; h++) {
			int_fast64_t free_ = INT64_MAX;

			if (atomic_compare_exchange_strong(&l->hold_at[h], &free_, slot)) {
				atomic_fetch_add(&l->hold_n, 1);
				return h;
			}
		}
		sched_yield();	/* LANE_HOLDS thick bookings under way on l */
	}
}

static void hold_give(struct lane *l, unsigned h)
{
	atomic_fetch_sub(&l->hold_n, 1);
	atomic_store(&l->hold_at[h], INT64_MAX);
}

/* How far l's dispatcher may move its cursor now: its bookings' end,
 * below every hold; adv says so first. */
static int64_t lane_until(struct lane *l)
{
	int64_t until = atomic_load(&l->booked_end);

	atomic_store(&l->adv, until);
	return held_below(l, until);
}

/* Books the thick request lead leads on each of its pieces' lanes: 0, or
 * -EAGAIN when it must be booked piece by piece (a dispatcher's flush
 * finding a full window), or the record's -errno. */
static int lane_push_thick(struct pb *pb, struct piece *lead)
{
	struct cw_slots_ctx *ctx = pb_thread_ctx(pb);
	struct cw_slots_req rq = { .dir = CW_SLOTS_WRITE, .shape = CW_SLOTS_THICK };
	struct cw_slots_booking b;
	/* once committed, the pieces are the dispatchers' (and the request
	 * may end): what comes after reads only these */
	struct lane *ls[CW_SLOTS_MAX_DISKS];
	size_t lens[CW_SLOTS_MAX_DISKS];
	struct rt_note notes[CW_SLOTS_MAX_DISKS];
	struct piece *p, *ps[CW_SLOTS_MAX_DISKS];
	unsigned held[CW_SLOTS_MAX_DISKS], k = 0, i;
	bool rt = lead->rt;	/* every piece's (thick_join) */
	int64_t svc_max = 0, start, full_since = 0;
	int r;

	if (!ctx)
		return -EUSERS;
	for (p = lead; p && k < CW_SLOTS_MAX_DISKS; p = p->thick_next) {
		int64_t svc = 0;

		cw_model_service_ns(disk_model(p->lane->disk), 0, 0, p->io.len, &svc);
		svc_max = CW_MAX(svc_max, svc);
		ps[k] = p;
		ls[k] = p->lane;
		lens[k] = p->io.len;
		rq.disks[k++] = p->lane->rec;
	}
	rq.priority = rt;
	rq.ndisks = k;
	rq.size_slots = (uint32_t)CW_MIN(CW_MAX(CW_DIV_ROUND_UP(svc_max, lead->lane->slot_ns), 1),
					 BOOKING_SLOTS_MAX);
	rq.block = lead->io.off / pb->block_size;
	for (;;) {
		bool safe = true;

		/* from where every cursor is, or is going */
		start = 0;
		for (i = 0; i < k; i++)
			start = CW_MAX(start, CW_MAX(cw_slots_now(ls[i]->rec),
						     (int64_t)atomic_load(&ls[i]->adv)));
		rq.start_slot = start;
		rq.deadline_slot = start + SLOTS_WINDOW - rq.size_slots;
		r = cw_slots_reserve(ctx, &rq, &b);
		if (r == CW_SLOTS_FAIL) {
			if (in_dispatcher)
				return -EAGAIN;
			if (rt && !full_since)
				full_since = cw_now_ns();
			for (i = 0; i < k; i++)
				lane_wake(ls[i]);
			sched_yield();
			continue;
		}
		if (r < 0)
			return r;
		for (i = 0; i < k; i++)
			held[i] = hold_take(ls[i], b.first_slot);
		for (i = 0; i < k; i++)
			safe &= atomic_load(&ls[i]->adv) <= b.first_slot;
		for (i = 0; rt && safe && i < k; i++)
			rt_booking(ps[i], full_since, &notes[i]);
		r = safe ? cw_slots_commit(ctx, &b, (uint64_t)(uintptr_t)lead) : -ETIMEDOUT;
		if (r == 0)
			break;
		for (i = 0; i < k; i++) {
			hold_give(ls[i], held[i]);
			lane_wake(ls[i]);	/* it may have parked at the hold */
		}
		cw_slots_release(ctx, &b);
		/* held below the run, no record can have refused the commit */
		if (NEVER(safe) || r != -ETIMEDOUT)
			return r < 0 ? r : -EIO;
	}
	for (i = 0; i < k; i++) {
		struct lane *l = ls[i];

		hold_give(l, held[i]);
		/* a cursor that reached the hold may have parked there, with
		 * others' bookings behind it: woken at once */
		lane_booked(l, b.first_slot + b.n_slots, rt ? &notes[i] : NULL,
			    cw_slots_now(l->rec) >= b.first_slot, lens[i]);
	}
	return 0;
}

/* The piece of the thick request lead (the cookie) that lane l serves. */
static struct piece *thick_piece(struct piece *lead, const struct lane *l)
{
	struct piece *p;

	for (p = lead; p && p->lane != l; p = p->thick_next)
		;
	return ALWAYS(p) ? p : lead;
}

/* The first of pieces [from + i, from + n) of q booked by itself or as a
 * thick request's lead (n: none). */
static unsigned next_own(const struct preq *q, unsigned from, unsigned n, unsigned i)
{
	while (i < n && q->p[from + i].thick_lead)
		i++;
	return i;
}

/* Books pieces [from, from + n) of q, each on its lane (a thick request's
 * with its lead); one that cannot be booked is done at once with the
 * error.  Submission's, and a FUA write's flush phase (lane_req_done). */
void lane_push_pieces(struct preq *q, unsigned from, unsigned n)
{
	struct pb *pb = q->x->pb;
	unsigned i;

	atomic_store(&q->pending, n);
	for (i = 0; i < n; i++)
		cwd_stats_queue_change(&q->p[from + i].lane->st, 1);
	/* A piece pushed may be done, and with it the request, before the
	 * next is looked at: the next one to push (not one booked with its
	 * thick request's lead) is found while the one at hand is not. */
	for (i = next_own(q, from, n, 0); i < n;) {
		struct piece *p = &q->p[from + i], *t, *nx;
		unsigned j = next_own(q, from, n, i + 1);
		int r;

		if (p->thick_next) {
			r = lane_push_thick(pb, p);
			if (r == 0) {
				i = j;
				continue;
			}
			/* booked piece by piece after all (p, not pushed yet,
			 * keeps the request) */
			for (t = p->thick_next; t; t = nx) {
				nx = t->thick_next;
				t->thick_lead = t->thick_next = NULL;
				r = lane_push(pb, t);
				if (r < 0) {
					t->rt = false;
					lane_piece_done(t->lane, t, r, cw_now_ns());
				}
			}
			p->thick_next = NULL;
		}
		r = lane_push(pb, p);
		if (r < 0) {
			p->rt = false;
			lane_piece_done(p->lane, p, r, cw_now_ns());
		}
		i = j;
	}
}

/* Every committed booking so far, in slot order, then what overflowed. */
static struct piece *lane_take(struct lane *l)
{
	struct piece *head = NULL, **tail = &head, *o, *rev = NULL;
	struct cw_slots_entry e;
	int64_t until;

	for (o = atomic_exchange(&l->overflow, NULL); o; ) {
		struct piece *n = o->next;

		o->next = rev;
		rev = o;
		o = n;
	}

	while ((until = lane_until(l)) > cw_slots_now(l->rec)) {
		struct piece *p;

		if (cw_slots_next(l->rec, until, &e) != 1)
			continue;
		p = (struct piece *)(uintptr_t)e.cookie;
		/* a thick request: this lane's piece of it */
		*tail = p->thick_next ? thick_piece(p, l) : p;
		(*tail)->next = NULL;
		(*tail)->slot = e.slot;
		tail = &(*tail)->next;
	}
	*tail = rev;
	return head;
}

static void lane_park(struct lane *l, int64_t timeout_ns)
{
	park_unless(&l->park, lane_has_takeable(l) || atomic_load(&l->stop) ||
			      atomic_load(&l->plan) || atomic_load(&l->handback),
		    timeout_ns);
}

/* lane_park's counterpart on a lane that waits in its engine, the
 * dispatch lock not held: a completion ends the wait as a booking, a
 * stop or a plan do (lane_wake).  A reader that left requests in flight
 * (handback) needs no look: their completions come here.  busy: requests
 * were in flight when the lock was let go, and a stop or a plan waits for
 * them, so their completion is what to wait for. */
static void lane_engine_wait(struct lane *l, int64_t timeout_ns, bool busy)
{
	atomic_store(&l->eng_waiting, true);
	if (!lane_has_takeable(l) &&
	    (busy || (!atomic_load(&l->stop) && !atomic_load(&l->plan))))
		(void)cw_io_wait(l->eng, timeout_ns);
	atomic_store(&l->eng_waiting, false);
}

/* The dispatch lock (Drepper's futex mutex): a reader only ever tries it;
 * the dispatcher waits for it. */
static bool dlock_try(struct lane *l)
{
	int free_ = 0;

	return atomic_compare_exchange_strong(&l->dlock, &free_, 1);
}

static void dlock_take(struct lane *l)
{
	if (dlock_try(l))
		return;
	while (atomic_exchange(&l->dlock, 2) != 0)
		cw_futex_wait(&l->dlock, 2);
}

static void dlock_drop(struct lane *l)
{
	int was = atomic_exchange(&l->dlock, 0);

	/* Only its holder drops it: whoever holds it dispatches (above). */
	if (NEVER(was == 0))
		return;
	if (was == 2)
		cw_futex_wake(&l->dlock);
}

/* ---- completion ---- */

static void log_io_error(struct lane *l, const struct piece *p, int err)
{
	struct disk *d = l->disk;
	uint64_t n = atomic_fetch_add_explicit(&d->nerrors, 1, memory_order_relaxed) + 1;
	static const char *const ops[] = { "read", "write", "fdatasync", "punch" };

	if (n <= ERRORS_LOGGED || n % 1000 == 0)
		cwd_log(LOG_ERR, "disk %s (%s): %s of %zu bytes at offset %" PRIu64 " failed: %s "
			"(export %s; %" PRIu64 " errors on this disk so far)", d->name, d->path,
			ops[p->io.op], p->io.len, p->io.off, strerror(-err), p->req->x->name, n);
}

/* Every piece of q is done.  A FUA write whose writes all succeeded then
 * runs its second phase, an fdatasync on every disk it touched (its
 * flush pieces, after the writes), before the reply; any other request
 * ends (preq.c). */
static void lane_req_done(struct preq *q)
{
	if (atomic_load_explicit(&q->mirror_state, memory_order_relaxed) && pb_mirror_end(q))
		return;
	if (q->fua && !atomic_load(&q->err)) {
		q->fua = false;
		lane_push_pieces(q, q->npieces, q->nflush);
		return;
	}
	preq_finish(q);
}

/* Called on the dispatcher thread when a piece is done (err 0 or -errno). */
void lane_piece_done(struct lane *l, struct piece *p, int err, int64_t now)
{
	struct preq *q = p->req;
	int zero = 0;

	cwd_stats_add(&l->st.requests, 1);
	cwd_stats_queue_change(&l->st, -1);
	if (err) {
		cwd_stats_add(&l->st.errors, 1);
		log_io_error(l, p, err);
		if (p->mirror || p->io.op == CW_IO_FSYNC)
			err = pb_mirror_failed(l, p, err);
		if (err)
			atomic_compare_exchange_strong(&q->err, &zero, err);
	} else if (p->io.op == CW_IO_READ) {
		cwd_stats_add(&l->st.read_bytes, p->io.len);
	} else if (p->io.op == CW_IO_WRITE) {
		cwd_stats_add(&l->st.write_bytes, p->io.len);
	} else if (p->io.op == CW_IO_FSYNC) {
		cwd_stats_add(&l->st.flushes, 1);
	}
	if (p->rt) {
		cwd_stats_add(&l->st.rt_done, 1);
		cwd_stats_add(&p->resv->st.requests, 1);
		cwd_stats_add(&p->resv->st.rt_done, 1);
		cwd_stats_add(p->io.op == CW_IO_READ ? &p->resv->st.read_bytes : &p->resv->st.write_bytes,
			p->io.len);
		if (now > p->sr.deadline_ns) {
			cwd_stats_add(&l->st.rt_missed, 1);
			cwd_stats_add(&p->resv->st.rt_missed, 1);
			cwd_stats_max(&p->resv->st.rt_late_max_ns, (uint64_t)(now - p->sr.deadline_ns));
		}
		p->done_ns = now;
	} else {
		int64_t lat;

		lane_be_leave(l, p, now);
		cwd_stats_add(&l->st.be_done, 1);
		lat = CW_MAX(now - q->arrival_ns, (int64_t)0);
		cwd_stats_hist_add(l->st.be_lat, lat);
		cwd_stats_add(&l->st.be_lat_sum_ns, (uint64_t)lat);
		if (!err && p->io.op != CW_IO_FSYNC)
			lane_be_done(l, p);
		/* Slack is what the streams leave: ΔL_r between their
		 * requests, and the disk idle of released ones (where most
		 * best effort runs); the server's time is booked like a
		 * stream's, not slack. */
		if (l->pl.sched &&
		    (p->sr.via == CW_SCHED_VIA_SLACK || p->sr.via == CW_SCHED_VIA_IDLE))
			cwd_stats_add(&l->st.slack_used_ns, (uint64_t)(now - p->start_ns));
	}
	if (atomic_fetch_sub(&q->pending, 1) == 1)
		lane_req_done(q);
}

/* ---- dispatcher ---- */

static void lane_fail(struct lane *l, struct piece *p, int err)
{
	lane_piece_done(l, p, err, cw_now_ns());
}

static struct piece *piece_of(struct cw_path_item *it)
{
	return CW_CONTAINER_OF(it, struct piece, it);
}

/* Charges a piece the lane took in and queues it by the lane's policy
 * (clockwise/path.h): on a stream lane, a stream's piece by its part's
 * task, best effort by the disk's model; on a lane with a best-effort
 * order, every piece as best effort. */
static int lane_enqueue(struct lane *l, struct piece *p, int64_t now)
{
	struct disk *d = l->disk;
	const struct cw_admit_resv_part *pt = NULL;
	int r;

	cw_path_item_init(&p->it, p, p->req->arrival_ns);
	if (l->pl.sched) {
		p->taken_ns = now;
		if (p->rt && !(pt = resv_part(p->resv, d->id))) {
			/* Mapped here while a move had the stream booked on the
			 * disk, which it is no longer
			 * (cw_admit_state_move_settle): best effort now, like
			 * any request the stream has no part for. */
			p->rt = false;
			lane_be_enter(l, p, now);
		}
	}
	if (pt) {
		struct cw_sched_stream ss = {
			.id = p->resv->a->stream,
			.period_ns = pt->task.period_ns,
			.deadline_ns = pt->task.deadline_ns,
			/* a new model may change C while streams run (one store) */
			.service_ns = cw_pr_load_relaxed(&pt->task.service_ns),
		};

		cw_path_charge_rt(&p->it, &ss, !p->first_on_disk, p->io.off, p->io.len);
	} else {
		cw_path_charge_be(&p->it, disk_model(d), p->io.off, p->io.len);
		lane_be_fill(l, p);
	}
	r = cw_path_lane_push(&l->pl, &p->it, now);
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
		if (!p->rt)
			lane_be_enter(l, p, now);
		/* neither a scheduling core nor an order: to the FIFO as
		 * they come, uncharged */
		if (cw_path_lane_plain(&l->pl)) {
			(void)cw_path_lane_push(&l->pl, &p->it, now);
			continue;
		}
		r = lane_enqueue(l, p, now);
		if (r < 0)
			lane_fail(l, p, r == -E2BIG ? -EIO : r);
	}
}

/* Whether the disk is a file cut shorter than its blocks (see struct
 * disk), said once. */
bool pb_disk_shrunk(struct disk *d, int64_t now)
{
	struct stat st;

	if (!d->regular)
		return false;
	if (atomic_load_explicit(&d->shrunk, memory_order_relaxed))
		return true;
	atomic_store_explicit(&d->size_ns, now, memory_order_relaxed);
	if (fstat(d->fd, &st) < 0 || (uint64_t)st.st_size >= d->need_bytes)
		return false;
	if (!atomic_exchange(&d->shrunk, true))
		cwd_log(LOG_ERR, "disk %s (%s) shrank under the daemon: it is %" PRIu64 " bytes, its "
			"blocks need %" PRIu64 " (truncated?); every request on it fails with EIO "
			"from now on, so nothing is written past its end: restore the file and "
			"restart clockwised", d->name, d->path, (uint64_t)st.st_size, d->need_bytes);
	return true;
}

/* cw_io_submit, unless the disk shrank: then -EIO.  A flush must not say
 * written what was cut: it looks at the file's size.  Only a write can
 * take a file past its end (a read there fails by itself, and then looks
 * at the size: lane_reaped), and it costs an fstat, as much CPU as a 4 KiB
 * copy from tmpfs: writes look at the size once SHRUNK_CHECK_NS passed
 * since it was last looked at, and so a file cut while they run may be
 * written past its end for that long.  Reads only look at what was found
 * before. */
static int lane_submit(struct lane *l, struct cw_io_req **batch, unsigned n, int64_t now)
{
	struct disk *d = l->disk;
	bool look = false;

	if (atomic_load_explicit(&d->shrunk, memory_order_relaxed))
		return -EIO;
	if (d->regular) {
		bool due = now - atomic_load_explicit(&d->size_ns, memory_order_relaxed) >=
			   SHRUNK_CHECK_NS;

		for (unsigned i = 0; i < n && !look; i++)
			look = batch[i]->op == CW_IO_FSYNC || (due && batch[i]->op != CW_IO_READ);
	}
	if (look && pb_disk_shrunk(d, now))
		return -EIO;
	return cw_io_submit(l->eng, batch, n);
}

/*
 * On a memory disk (tmpfs, ramfs) a read or a write is a copy the
 * dispatcher does itself, inside submit, on its CPU and at its priority.
 * For a stream's request that is right; best effort's copies at the
 * dispatcher's priority took the CPUs from the streams' connection
 * threads and from local players: with 2 GB/s of best effort on two such
 * disks of a 2-core host, the dispatchers copied for 0.7 of a CPU at
 * priority 11, and streams' replies left late and players woke late
 * (misses classed delivery and cpu, and the players' round trips).  So a
 * dispatcher starts a best-effort request there one below rt_priority,
 * where every connection thread of a stream preempts it, and goes back
 * up before a stream's request or a sleep (the wake-up must find it at
 * its priority).  Best effort's copy may then take longer than charged
 * (by what the streams' threads ran meanwhile: they are bounded by the
 * host's share), which overrun charging takes out of the slack.
 */
static void lane_copy_priority(struct lane *l, bool be)
{
	unsigned rt = l->pb->cfg->rt_priority;
	struct sched_param sp;

	if (!l->realtime || l->be_low == be || l->disk->io_kind != CW_IO_MEM)
		return;
	sp.sched_priority = (int)(be ? CW_MAX(rt, 2u) - 1 : CW_MIN(rt + 1, 99u));
	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0)
		l->be_low = be;
}

/* alone: nothing else was in flight when the lane's step took it. */
static int submit_one(struct lane *l, struct piece *p, int64_t now, bool alone)
{
	struct cw_io_req *io = &p->io;
	int r;

	p->start_ns = now;
	p->alone = alone;
	p->start_seq = ++l->starts;
	r = lane_submit(l, &io, 1, now);
	if (r == 1)
		return 0;
	return r < 0 ? r : -EAGAIN;
}

/* Starts what the lane's step allows (clockwise/path.h); sets
 * *wait_until when it asked for a later call (-1: no timer). */
static void lane_dispatch(struct lane *l, int64_t now, int64_t *wait_until)
{
	struct cw_path_item *took[REAP_BATCH];
	unsigned base = l->pl.inflight;
	int64_t later;
	int n;

	if (l->pl.sched) {
		struct piece *p;
		int64_t cpu;
		int r;

		if (cw_path_lane_next(&l->pl, now, took, 1, wait_until) != 1)
			return;
		p = piece_of(took[0]);
		lane_copy_priority(l, !p->rt);
		cpu = p->rt ? cw_clock_ns(CLOCK_THREAD_CPUTIME_ID) : 0;
		r = submit_one(l, p, now, base == 0);
		if (p->rt)
			cwd_stats_add(&l->st.rt_cpu_ns,
				      (uint64_t)CW_MAX(cw_clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu, 0));
		if (r < 0) {
			(void)cw_path_lane_done(&l->pl, &p->it, now, 0);
			lane_fail(l, p, r);
			return;
		}
		lane_miss_started(l, p);
		return;
	}
	*wait_until = -1;
	/* A plan waits for what the FIFO started to drain. */
	if (atomic_load(&l->plan))
		return;
	/* The order hands on what may start now, up to the queue depth;
	 * the FIFO's head goes to the engine in batches. */
	n = cw_path_lane_next(&l->pl, now, took, REAP_BATCH, wait_until);
	while (n > 0) {
		struct cw_io_req *batch[REAP_BATCH];
		int i, r;

		for (i = 0; i < n; i++) {
			struct piece *p = piece_of(took[i]);

			p->start_ns = now;
			p->alone = base + (unsigned)i == 0;
			p->start_seq = ++l->starts;
			batch[i] = &p->io;
		}
		r = lane_submit(l, batch, (unsigned)n, now);
		if (r < 0 && r != -EAGAIN && r != -EBUSY) {
			cw_path_lane_unstarted(&l->pl, took + 1, (unsigned)n - 1);
			(void)cw_path_lane_done(&l->pl, took[0], now, 0);
			lane_fail(l, piece_of(took[0]), r);
		} else if (r <= 0) {
			cw_path_lane_unstarted(&l->pl, took, (unsigned)n);
			return;	/* the engine is full: reap first */
		} else {
			cw_path_lane_unstarted(&l->pl, took + r, (unsigned)(n - r));
		}
		if (!cw_path_lane_queued(&l->pl) || atomic_load(&l->plan))
			return;
		base = l->pl.inflight;
		n = cw_path_lane_next(&l->pl, now, took, REAP_BATCH, &later);
	}
}

/* What admission assumed (one request at a time, C from the model) set
 * against what the disk did: on a disk whose latency others share, a
 * cluster's, the operator sees here when C stops holding.  On an emulated
 * disk what the disk did is the emulated disk's time (the engine's
 * disk_ns): the host's lag around it (a busy CPU, the file's own disk)
 * is the emulator's lateness, counted and warned about apart
 * (pool-emu.c); counted in, it took an emulated SSD, whose requests take
 * a fraction of a millisecond, to 19-41 times its C at the 99.9th
 * percentile. */
static void served_alone(struct lane *l, const struct piece *p, int64_t now)
{
	int64_t c_ns, svc = now - p->start_ns;

	if (l->disk->emulate && p->io.disk_ns > 0)
		svc = p->io.disk_ns;
	if (cw_model_service_ns(disk_model(l->disk), 0, 0, p->io.len, &c_ns) == 0)
		cwd_stats_alone_add(&l->st, svc, c_ns);
}

/*
 * An fdatasync's error is reported once: the kernel marks the pages whose
 * writeback failed clean and tells the next fdatasync of the file (each
 * open file once), not every one that covered the lost writes.  Two
 * flushes in flight over one failed write, or a flush after a failed one,
 * would see the second succeed over data that is gone.  So the first
 * error sticks to the disk: every flush of it fails from then on, until
 * the daemon restarts and reads back what the disk really holds
 * (PostgreSQL learned the same: retrying fsync is not safe).  Returns the
 * error an fdatasync that returned err reports.
 */
static int flush_error(struct lane *l, int err)
{
	struct disk *d = l->disk;
	int none = 0;

	if (!err)
		return atomic_load_explicit(&d->flush_err, memory_order_acquire);
	if (atomic_compare_exchange_strong(&d->flush_err, &none, err))
		cwd_log(LOG_ERR, "disk %s (%s): an fdatasync failed (%s): writes it covered may be "
			"lost; every later flush of this disk fails too, until the daemon restarts",
			d->name, d->path, strerror(-err));
	return err;
}

static void lane_reaped(struct lane *l, struct cw_io_req *io, int64_t now)
{
	struct piece *p = io->user;
	int err = 0;

	if (io->res < 0) {
		err = (int)io->res;
		(void)pb_disk_shrunk(l->disk, now);	/* the cause, perhaps */
	} else if (io->op != CW_IO_FSYNC && (size_t)io->res < io->len) {
		if (pb_disk_shrunk(l->disk, now) || io->res == 0) {
			err = -EIO;	/* past the end of the disk */
		} else {
			/* A short transfer: carry on with the rest. */
			io->buf = (uint8_t *)io->buf + io->res;
			io->len -= (size_t)io->res;
			io->off += (uint64_t)io->res;
			if (lane_submit(l, &io, 1, now) == 1)
				return;	/* still in flight */
			err = -EIO;
		}
	}
	if (io->op == CW_IO_FSYNC)
		err = flush_error(l, err);
	if (l->pl.sched)
		lane_miss_done(l, p, now);
	/* What the engine gives back this lane submitted, under the lock
	 * its dispatching thread holds: the lane's step counts it out of
	 * flight and, with cw_sched, completes it. */
	(void)cw_path_lane_done(&l->pl, &p->it, now, now - p->start_ns);
	if (!err && p->alone && p->start_seq == l->starts && io->op != CW_IO_FSYNC)
		served_alone(l, p, now);
	lane_piece_done(l, p, err, now);
}

void lane_post_plan(struct lane *l, struct lane_plan *pl)
{
	free(atomic_exchange(&l->plan, pl));
	park_wake_always(&l->park);
	if (atomic_load(&l->eng_waiting))
		cw_io_kick(l->eng);
}

/* The real-time threads' footing (path.h). */
void pb_thread_cpus(struct pb *pb)
{
	cpu_set_t set;

	if (!pb->cfg->rt_cpus)
		return;
	CPU_ZERO(&set);
	for (int c = 0; c < 64; c++)
		if (pb->cfg->rt_cpus >> c & 1)
			CPU_SET(c, &set);
	if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0)
		atomic_fetch_or(&pb->conditions, PB_COND_CPUS);
}

/* The calling thread to the configured rt_priority plus boost (at most
 * 99), on the rt_cpus if set. */
int pb_thread_realtime(struct pb *pb, unsigned boost)
{
	struct sched_param sp = { .sched_priority = (int)pb->cfg->rt_priority };
	int r;

	if (sp.sched_priority)
		sp.sched_priority = CW_MIN(sp.sched_priority + (int)boost, 99);
	pb_thread_cpus(pb);
	if (!sp.sched_priority) {
		atomic_fetch_or(&pb->conditions, PB_COND_RT);
		return 0;
	}
	r = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
	if (r) {
		atomic_fetch_or(&pb->conditions, PB_COND_RT);
		return -r;
	}
	return 0;
}

/* A dispatcher whose disk has streams runs at real-time priority, one
 * above the configuration's rt_priority, so that neither other work on a
 * busy CPU nor the connection threads of the streams (at rt_priority,
 * and SCHED_FIFO does not share a CPU between equals) hold back the
 * decisions it must take when they are due: with all of them equal, a
 * dispatcher waited 17 ms for a CPU while streams' readers and writers
 * ran.  Without the privilege it says so once and goes on. */
static void lane_go_realtime(struct lane *l)
{
	static atomic_bool told;
	int r = pb_thread_realtime(l->pb, 1);

	l->realtime = r == 0 && l->pb->cfg->rt_priority;
	if (l->realtime)
		cwd_log(LOG_INFO, "disk %s: its dispatcher runs at real-time priority %u",
			l->disk->name, CW_MIN(l->pb->cfg->rt_priority + 1, 99u));
	else if (r < 0 && !atomic_exchange(&told, true))
		cwd_log(LOG_WARNING, "dispatchers of disks with streams stay at normal priority: "
			"%s (rt_priority needs CAP_SYS_NICE): the guarantee holds only while "
			"the CPUs are not busy", strerror(-r));
}

/* Streams released since the last plan leave the scheduler's table. */
static void forget_streams(struct lane *l, const struct lane_plan *pl)
{
	struct cw_sched_stream ss;

	for (size_t i = cw_sched_stream_count(l->pl.sched); i-- > 0;) {
		bool kept = false;

		if (cw_sched_stream_at(l->pl.sched, i, &ss) < 0)
			continue;
		for (size_t j = 0; j < pl->n_streams && !kept; j++)
			kept = pl->streams[j].id == ss.id;
		if (!kept)
			(void)cw_sched_stream_forget(l->pl.sched, ss.id);
	}
}

/* Applies a posted plan: a lane without streams gets its scheduling core
 * (once the requests the FIFO started are done, since the core must see
 * every request in service) and takes the FIFO's queue into it; a lane
 * with one gets its new slack and server. */
static void lane_apply_plan(struct lane *l, int64_t now)
{
	struct lane_plan *pl;
	struct cw_path_item *it, *next;
	int r;

	if (!atomic_load(&l->plan) || (!l->pl.sched && l->pl.inflight))
		return;
	pl = atomic_exchange(&l->plan, NULL);
	if (!pl)
		return;
	if (!l->pl.sched) {
		struct cw_sched_opts o;
		struct cw_sched *s;

		cw_sched_opts_init(&o);
		o.policy = l->disk->policy;
		o.delta_l_ns = no_limit(pl->plan.be_budget_ns);
		o.idle_be_ns = no_limit(pl->plan.idle_be_ns);
		o.server_slice_ns = pl->plan.server_slice_ns;
		o.server_period_ns = pl->plan.server_period_ns;
		o.beq = l->disk->be_order;
		o.beq_conf = o.beq == cw_sched_beq_sfc() ? &l->disk->sfc : NULL;
		o.guard_ns = pl->plan.guard_ns;
		r = cw_sched_new(&o, &s);
		if (r < 0) {
			cwd_log(LOG_ERR, "disk %s: cannot start its scheduling core: %s",
				l->disk->name, strerror(-r));
			free(pl);
			return;
		}
		lane_go_realtime(l);
		if (lane_miss_new(l) < 0)
			cwd_log(LOG_ERR, "disk %s: no memory to explain misses", l->disk->name);
		lane_beq_drain(l);
		for (it = cw_path_lane_set_sched(&l->pl, s); it; it = next) {
			struct piece *p = piece_of(it);

			next = it->next;
			r = lane_enqueue(l, p, now);
			if (r < 0)
				lane_fail(l, p, r == -E2BIG ? -EIO : r);
		}
	} else {
		forget_streams(l, pl);
		r = cw_sched_set_slack(l->pl.sched, no_limit(pl->plan.be_budget_ns),
				       no_limit(pl->plan.idle_be_ns));
		if (r == 0)
			r = cw_sched_set_server(l->pl.sched, pl->plan.server_slice_ns,
						pl->plan.server_period_ns);
		if (r == 0)
			r = cw_sched_set_guard(l->pl.sched, pl->plan.guard_ns);
		if (r < 0)
			cwd_log(LOG_ERR, "disk %s: cannot change its slack: %s", l->disk->name,
				strerror(-r));
	}
	/* the streams admitted, known before their first requests */
	for (size_t j = 0; j < pl->n_streams; j++) {
		const struct cw_sched_stream *ss = &pl->streams[j];

		r = cw_sched_stream_admit(l->pl.sched, ss->id, ss->period_ns, ss->service_ns,
					  ss->deadline_ns);
		if (r < 0)
			cwd_log(LOG_ERR, "disk %s: cannot track stream %" PRIu64 ": %s",
				l->disk->name, ss->id, strerror(-r));
	}
	free(pl);
}

/* Hands the replies of this batch on: a lane without streams sends them
 * itself when their connection's writer is idle (no wake-up, no context
 * switch); a lane with streams only wakes the writers, since a send's cost
 * is not in its admission test. */
static void lane_unplug_replies(struct lane *l)
{
	if (l->pl.sched)
		nbdsrv_io_unplug();
	else
		nbdsrv_io_unplug_send();
}

enum step { STEP_AGAIN, STEP_PARK, STEP_EXIT };

/* A plan applied slower than this is said (lane_step). */
#define PLAN_SLOW_NS (1 * CW_NS_PER_MS)

/* One round of the dispatcher, under the dispatch lock. */
static enum step lane_step(struct lane *l, int64_t *wait_until, int64_t *now)
{
	struct cw_io_req *done[REAP_BATCH];
	int64_t timeout;
	int n, i;

	*now = cw_now_ns();
	lane_miss_sample(l, *now);
	if (atomic_load(&l->plan)) {
		int64_t t = cw_now_ns();

		lane_apply_plan(l, *now);
		t = cw_now_ns() - t;
		if (t > PLAN_SLOW_NS)
			cwd_log(LOG_NOTICE, "disk %s: its dispatcher took %.1f ms to apply a new plan "
				"(its streams waited meanwhile)", l->disk->name, t / 1e6);
	}
	lane_intake(l, *now);
	lane_dispatch(l, *now, wait_until);
	if (l->pl.inflight) {
		/* Under cw_sched nothing else may start before the request in
		 * service ends; a full lane waits for a completion; otherwise
		 * look at the record again soon.  Readers that book meanwhile
		 * find the lock taken and leave their requests to this loop. */
		if (l->pl.sched || l->pl.inflight >= l->pl.queue_depth)
			timeout = -1;
		else
			timeout = cw_path_lane_queued(&l->pl) ? 0 :
				  l->disk->poll_ns ? l->disk->poll_ns : POLL_NS;
		/* Waits for a completion without the lock (lane_main):
		 * what completed so far, then nothing to do here. */
		if (lane_waits_in_engine(l))
			timeout = 0;
		if (timeout)
			lane_unplug_replies(l);
		n = cw_io_reap(l->eng, timeout ? 1 : 0, timeout, done, REAP_BATCH);
		if (n == 0 && lane_waits_in_engine(l) &&
		    (!cw_path_lane_queued(&l->pl) || l->pl.inflight >= l->pl.queue_depth)) {
			lane_unplug_replies(l);
			return STEP_PARK;
		}
		*now = cw_now_ns();
		if (n > 0 && l->pl.sched)
			lane_miss_reaped(l, *now);
		if (l->disk->emulate && cw_io_emu_behind(l->eng))
			pb_disk_emu_warn(l->disk);
		for (i = 0; i < n; i++)
			lane_reaped(l, done[i], *now);
		lane_unplug_replies(l);
		return STEP_AGAIN;
	}
	lane_unplug_replies(l);
	if (cw_path_lane_queued(&l->pl))
		return STEP_AGAIN;
	if (atomic_load(&l->stop) && !lane_has_bookings(l)) {
		struct cw_sched_stats ss;

		if (!l->pl.sched && cw_path_lane_held(&l->pl)) {
			/* what a limit holds back still runs before the lane ends */
			lane_beq_drain(l);
			return STEP_AGAIN;
		}
		if (!l->pl.sched)
			return STEP_EXIT;
		cw_sched_get_stats(l->pl.sched, &ss);
		if (!ss.rt_released && !ss.rt_waiting && !ss.be_queued)
			return STEP_EXIT;
	}
	return STEP_PARK;
}

void *lane_main(void *arg)
{
	struct lane *l = arg;
	int64_t wait_until = -1, now, timeout;
	enum step st;
	bool busy, in_engine;

	in_dispatcher = true;
	if (l->pl.sched) {
		lane_go_realtime(l);
		if (lane_miss_new(l) < 0)
			cwd_log(LOG_ERR, "disk %s: no memory to explain misses", l->disk->name);
	}
	/* Replies to the connections' writers go out once per batch of
	 * completions, not once per request (lane_unplug_replies). */
	nbdsrv_io_plug();

	for (;;) {
		/* with streams, each round's length and its wait for the
		 * lock, for the misses' timelines (lane_step moves now on) */
		int64_t from = l->miss ? cw_now_ns() : 0, locked;

		dlock_take(l);
		locked = from ? cw_now_ns() : 0;
		atomic_store(&l->handback, false);
		st = lane_step(l, &wait_until, &now);
		busy = l->pl.inflight > 0;
		in_engine = lane_waits_in_engine(l);
		dlock_drop(l);
		if (from)
			lane_miss_round(l, from, locked, cw_now_ns());
		if (st == STEP_EXIT)
			break;
		if (st != STEP_PARK)
			continue;
		lane_copy_priority(l, false);
		/* From the park, not from the step's start: a long step
		 * would sleep past the wake-up the policy set, and show in a
		 * miss's timeline as sleep. */
		now = cw_now_ns();
		timeout = wait_until < 0 ? -1 : CW_MAX(wait_until - now, 0);
		if (in_engine)
			lane_engine_wait(l, timeout, busy);
		else
			lane_park(l, timeout);
		if (l->miss)
			lane_miss_slept(l, now, cw_now_ns(), wait_until);
	}
	return NULL;
}

/* Rounds a reader runs at most for a lane before it goes back to its
 * socket (other connections may keep the lane busy). */
#define BORROW_ROUNDS 4

/*
 * A connection's reader, about to block, dispatches what it booked on a
 * lane without streams itself if the lane's dispatcher is idle: on an
 * engine that completes at once (the page cache, tmpfs) the requests are
 * done and their replies sent with no thread woken, where the dispatcher
 * and the writer would cost two context switches.  Requests still in
 * flight when it leaves are handed back to the dispatcher.  Returns false
 * when the dispatcher must be woken: the lock was taken, the disk has
 * streams (their dispatcher alone applies the policy), a plan or a stop
 * waits, or work is left that no completion will bring the dispatcher
 * back to (on an engine it waits in, requests in flight will).
 */
static bool lane_borrow(struct lane *l)
{
	struct cw_io_req *done[REAP_BATCH];
	int64_t now, wait_until;
	unsigned rounds = 0;
	bool idle;
	int n, i;

	/* A disk with streams (static ones are set before any reader runs)
	 * is not even tried, so its dispatcher never waits for a reader. */
	if (atomic_load(&l->disk->live_streams) || !dlock_try(l))
		return false;
	if (l->pl.sched || atomic_load(&l->plan) || atomic_load(&l->stop)) {
		dlock_drop(l);
		return false;
	}
	in_dispatcher = true;
	nbdsrv_io_plug();
	do {
		now = cw_now_ns();
		lane_intake(l, now);
		lane_dispatch(l, now, &wait_until);
		n = l->pl.inflight ? cw_io_reap(l->eng, 0, 0, done, REAP_BATCH) : 0;
		now = cw_now_ns();
		for (i = 0; i < n; i++)
			lane_reaped(l, done[i], now);
	} while (n > 0 && (cw_path_lane_queued(&l->pl) || lane_has_bookings(l)) &&
		 ++rounds < BORROW_ROUNDS);
	nbdsrv_io_plug_end();
	in_dispatcher = false;
	idle = !l->pl.inflight && !cw_path_lane_queued(&l->pl) && !cw_path_lane_held(&l->pl);
	if (!idle)
		atomic_store(&l->handback, true);
	if (l->pl.inflight && cw_io_can_wait(l->eng))
		idle = true;
	dlock_drop(l);
	return idle;
}

void lane_stop(struct lane *l)
{
	atomic_store(&l->stop, true);
	park_wake_always(&l->park);
	if (atomic_load(&l->eng_waiting))
		cw_io_kick(l->eng);
}
