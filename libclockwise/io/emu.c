/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The emulating back end: a disk that keeps a model's time (clockwise/emu.h).
 *
 * Each request goes to the inner engine at once (the data is real and
 * reaches the backing file as soon as it can) and is handed back when both
 * the inner engine has finished it and the emulated disk would have: at
 * the absolute CLOCK_MONOTONIC time done_ns the mechanics give
 * (cw_model_disk_serve for an HDD, cw_model_disk_ssd_finish for an SSD).
 *
 * HDD: one request is in service at a time.  Which one comes next is
 * decided when the arm becomes free, among the requests that had arrived
 * by then — lazily, on the next submit or reap at or after that time, so
 * a request that arrives while another is in service competes for the arm
 * as on a real drive.  Arrival order, or with a command queue the least
 * access time among the first satf_window waiting.  A flush is a barrier:
 * it is served after every earlier request and before any later one, and
 * takes no time of its own (the emulated disk has no write cache).  A
 * punch takes the time of a write of its length, as a drive that zeroes.
 *
 * SSD: each request's channel and finishing time are known at arrival.
 *
 * Invariant: every request handed back has done_ns <= the time it is
 * handed back (lateness >= 0 is measured, never negative), and a request
 * is never handed back before its inner I/O finished, so the emulator adds
 * no way to lose data: a write is on the backing file before its
 * completion is seen.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <clockwise/emu.h>
#include "common/util.h"
#include "io/io-internal.h"
#include "common/atomic.h"

#define NOT_YET INT64_MAX	/* done_ns of a request waiting for the arm */

struct slot {
	struct cw_io_req *req;		/* the caller's */
	struct cw_io_req inner;		/* what the inner engine runs */
	uint64_t seq;			/* arrival order */
	int64_t arrival_ns;
	int64_t done_ns;		/* when the emulated disk finishes it */
	uint64_t bytes;			/* the part within the capacity */
	bool used, inner_busy;
};

struct emu_engine {
	struct cw_io_engine head;	/* first: the front end's view */
	struct cw_io_engine *inner;
	struct cw_model m;
	struct cw_model_disk disk;
	struct cw_io_emu_opts o;
	struct slot *slots;		/* depth of them */
	unsigned *free_slots, n_free;
	struct cw_io_req **batch;	/* submit's scratch: depth entries each */
	unsigned *batch_slot;
	unsigned waiting;		/* HDD: slots with done_ns == NOT_YET */
	uint64_t seq;
	int64_t arm_free_ns;		/* HDD: the request in service ends */
	int tfd;			/* a timerfd: no timer slack, unlike nanosleep */
	atomic_uint_fast64_t late_reported;	/* st.late at the last cw_io_emu_behind */
	struct {
		atomic_uint_fast64_t requests, late;
		atomic_int_fast64_t busy_ns, late_sum_ns, late_max_ns;
	} st;
};

static struct emu_engine *to_emu(struct cw_io_engine *e)
{
	return (struct emu_engine *)e;
}

static const struct cw_io_ops emu_ops;

static bool is_emu(const struct cw_io_engine *e)
{
	return e && e->ops == &emu_ops;
}

void cw_io_emu_opts_init(struct cw_io_emu_opts *o)
{
	*o = (struct cw_io_emu_opts){
		.size = sizeof(*o),
		.inner = CW_IO_URING,
		.late_warn_ns = CW_NS_PER_MS,
		.spin_ns = 100 * CW_NS_PER_US,
	};
	cw_model_disk_opts_init(&o->disk);
}

static void emu_free(struct cw_io_engine *e)
{
	struct emu_engine *x = to_emu(e);

	cw_io_engine_free(x->inner);
	if (x->tfd >= 0)
		close(x->tfd);
	free(x->slots);
	free(x->free_slots);
	free(x->batch);
	free(x->batch_slot);
	free(x);
}

int cw_io_emu_new(const struct cw_model *m, const struct cw_io_emu_opts *opts, unsigned depth,
		  struct cw_io_engine **ret)
{
	struct emu_engine *x;
	int r;

	if (!ret || cw_model_validate(m) < 0 || (opts && opts->size < sizeof(*opts)) ||
	    (opts && (opts->late_warn_ns < 0 || opts->spin_ns < 0 ||
		      opts->spin_ns > CW_NS_PER_MS)))
		return -EINVAL;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	if (opts)
		x->o = *opts;
	else {
		cw_io_emu_opts_init(&x->o);
		cw_model_disk_opts_of(m, &x->o.disk);
	}
	x->m = *m;
	x->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	if (x->tfd < 0) {
		r = -errno;
		free(x);
		return r;
	}
	r = cw_model_disk_init(&x->disk, &x->m, &x->o.disk);
	if (r == 0)
		r = cw_io_engine_new(x->o.inner, depth, &x->inner);
	if (r < 0) {
		close(x->tfd);
		free(x);
		return r;
	}
	x->slots = calloc(depth, sizeof(*x->slots));
	x->free_slots = calloc(depth, sizeof(*x->free_slots));
	x->batch = calloc(depth, sizeof(*x->batch));
	x->batch_slot = calloc(depth, sizeof(*x->batch_slot));
	if (!x->slots || !x->free_slots || !x->batch || !x->batch_slot) {
		emu_free(&x->head);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < depth; i++)
		x->free_slots[x->n_free++] = depth - 1 - i;
	x->head.ops = &emu_ops;
	x->head.depth = depth;
	x->head.inflight = 0;
	*ret = &x->head;
	return 0;
}

/* HDD: whether s may be served next — a flush only after every earlier
 * request started, nothing after a waiting flush before it. */
static bool barrier_allows(const struct emu_engine *x, const struct slot *s, uint64_t first_seq,
			   uint64_t first_flush_seq)
{
	if (s->req->op == CW_IO_FSYNC)
		return s->seq == first_seq;
	return s->seq < first_flush_seq;
}

/* HDD: puts requests on the arm whose turn came by now. */
static void advance(struct emu_engine *x, int64_t now)
{
	unsigned depth = x->head.depth;

	while (x->waiting > 0 && x->arm_free_ns <= now) {
		uint64_t first_seq = UINT64_MAX, first_flush = UINT64_MAX, window_end;
		int64_t first_arrival = INT64_MAX, start, best_t = INT64_MAX;
		struct slot *best = NULL;

		for (unsigned i = 0; i < depth; i++) {
			struct slot *s = &x->slots[i];

			if (!s->used || s->done_ns != NOT_YET)
				continue;
			first_seq = CW_MIN(first_seq, s->seq);
			first_arrival = CW_MIN(first_arrival, s->arrival_ns);
			if (s->req->op == CW_IO_FSYNC)
				first_flush = CW_MIN(first_flush, s->seq);
		}
		/* the arm waits for the first arrival if it is idle */
		start = CW_MAX(x->arm_free_ns, first_arrival);
		/* the drive sees the first satf_window requests that arrived
		 * by start (sequence numbers follow arrival) */
		window_end = first_seq + CW_MAX(x->o.satf_window, 1u);
		for (unsigned i = 0; i < depth; i++) {
			struct slot *s = &x->slots[i];
			int64_t t;

			if (!s->used || s->done_ns != NOT_YET || s->arrival_ns > start ||
			    !barrier_allows(x, s, first_seq, first_flush))
				continue;
			if (x->o.satf_window <= 1 || s->req->op == CW_IO_FSYNC || s->bytes == 0) {
				t = (int64_t)(s->seq - first_seq);	/* arrival order */
			} else {
				if (s->seq >= window_end)
					continue;
				t = cw_model_disk_peek(&x->disk, start, s->req->off, s->bytes);
			}
			if (t < best_t || (t == best_t && best && s->seq < best->seq)) {
				best_t = t;
				best = s;
			}
		}
		if (CW_UNLIKELY(!best))
			return;		/* cannot happen: the first arrival qualifies */
		if (best->req->op == CW_IO_FSYNC || best->bytes == 0)
			best->done_ns = start;
		else
			best->done_ns = start + cw_model_disk_serve(&x->disk, start, best->req->off,
								    best->bytes);
		atomic_fetch_add_explicit(&x->st.busy_ns, best->done_ns - start, memory_order_relaxed);
		x->arm_free_ns = best->done_ns;
		x->waiting--;
	}
}

/* The model's part of a request: how much of it lies within the capacity,
 * or the error it gets without touching the file. */
static int64_t clip(const struct emu_engine *x, const struct cw_io_req *q, uint64_t *ret_bytes)
{
	uint64_t cap = x->m.capacity_bytes / 512 * 512;

	*ret_bytes = 0;
	if (q->op == CW_IO_FSYNC)
		return 0;
	if (q->off >= cap || q->len == 0)
		return q->op != CW_IO_READ && q->len ? -ENOSPC : 0;
	*ret_bytes = CW_MIN((uint64_t)q->len, cap - q->off);
	return 0;
}

static int emu_submit(struct cw_io_engine *e, struct cw_io_req **reqs, unsigned n)
{
	struct emu_engine *x = to_emu(e);
	struct cw_io_req **inner = x->batch;
	unsigned *slot_of = x->batch_slot, n_inner = 0, taken = 0;
	int64_t now = cw_now_ns();
	int r = 0, err = 0;

	advance(x, now);
	for (unsigned i = 0; i < n; i++) {
		unsigned k = x->free_slots[--x->n_free];
		struct slot *s = &x->slots[k];
		struct cw_io_req *q = reqs[i];
		uint64_t bytes;
		int64_t refused = clip(x, q, &bytes);

		slot_of[i] = k;
		*s = (struct slot){ .req = q, .arrival_ns = now, .used = true, .bytes = bytes,
				    .done_ns = NOT_YET };
		q->res = refused;
		if (refused == 0 && (q->op == CW_IO_FSYNC || s->bytes > 0)) {
			s->inner = (struct cw_io_req){ .fd = q->fd, .op = q->op, .buf = q->buf,
						       .len = (size_t)s->bytes, .off = q->off,
						       .user = s };
			s->inner_busy = true;
			inner[n_inner++] = &s->inner;
		}
	}
	if (n_inner > 0) {
		r = cw_io_submit(x->inner, inner, n_inner);
		if (r < 0) {
			err = r;	/* reported if nothing at all was taken */
			r = 0;
		}
	}
	/* Keep the prefix of the batch whose inner requests were taken. */
	for (unsigned i = 0, ni = 0; i < n; i++) {
		struct slot *s = &x->slots[slot_of[i]];

		if (s->inner_busy && ni++ >= (unsigned)r) {
			for (unsigned j = i; j < n; j++) {
				x->slots[slot_of[j]].used = false;
				x->free_slots[x->n_free++] = slot_of[j];
			}
			break;
		}
		taken++;
		s->seq = x->seq++;
		if (s->req->res < 0 || (s->req->op != CW_IO_FSYNC && s->bytes == 0)) {
			s->done_ns = now;	/* refused or empty: no disk time */
		} else if (x->m.tier == CW_TIER_SSD) {
			if (s->req->op == CW_IO_FSYNC) {
				s->done_ns = now;
				for (unsigned c = 0; c < x->disk.o.channels; c++)
					s->done_ns = CW_MAX(s->done_ns, x->disk.free_ns[c]);
			} else {
				s->done_ns = cw_model_disk_ssd_finish(&x->disk, now, s->req->off,
								      s->bytes,
								      s->req->op != CW_IO_READ);
				atomic_fetch_add_explicit(&x->st.busy_ns, s->done_ns - now,
							  memory_order_relaxed);
			}
		} else {
			x->waiting++;
		}
	}
	if (taken == 0 && n_inner > 0)
		return err < 0 ? err : -EAGAIN;
	advance(x, now);
	return (int)taken;
}

/* Collects what the inner engine finished, without waiting unless
 * timeout_ns says so. */
static int pull_inner(struct emu_engine *x, unsigned min_complete, int64_t timeout_ns)
{
	struct cw_io_req *done[64];
	int got;

	if (cw_io_inflight(x->inner) == 0)
		return 0;
	got = cw_io_reap(x->inner, min_complete, timeout_ns, done, CW_ARRAY_SIZE(done));
	for (int i = 0; i < got; i++) {
		struct slot *s = done[i]->user;

		s->inner_busy = false;
		s->req->res = done[i]->res;
	}
	return got < 0 ? got : 0;
}

static void account_late(struct emu_engine *x, int64_t late)
{
	int64_t max = atomic_load_explicit(&x->st.late_max_ns, memory_order_relaxed);

	atomic_fetch_add_explicit(&x->st.requests, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&x->st.late_sum_ns, late, memory_order_relaxed);
	if (late > max)
		atomic_store_explicit(&x->st.late_max_ns, late, memory_order_relaxed);
	if (late > x->o.late_warn_ns)
		atomic_fetch_add_explicit(&x->st.late, 1, memory_order_relaxed);
}

/* Hands back up to max finished requests in the order the disk finished
 * them; *ret_next is the next time something may become ready (NOT_YET:
 * nothing pending) and *ret_stuck whether a request's time has come but
 * not its inner I/O. */
static unsigned collect(struct emu_engine *x, int64_t now, struct cw_io_req **out, unsigned max,
			int64_t *ret_next, bool *ret_stuck)
{
	unsigned depth = x->head.depth, got = 0;

	*ret_stuck = false;
	while (got < max) {
		struct slot *best = NULL;

		for (unsigned i = 0; i < depth; i++) {
			struct slot *s = &x->slots[i];

			if (!s->used || s->done_ns > now || s->inner_busy)
				continue;
			if (!best || s->done_ns < best->done_ns ||
			    (s->done_ns == best->done_ns && s->seq < best->seq))
				best = s;
		}
		if (!best)
			break;
		account_late(x, now - best->done_ns);
		best->req->disk_ns = best->done_ns - best->arrival_ns;
		out[got++] = best->req;
		best->used = false;
		x->free_slots[x->n_free++] = (unsigned)(best - x->slots);
	}
	*ret_next = x->waiting ? x->arm_free_ns : NOT_YET;
	for (unsigned i = 0; i < depth; i++) {
		const struct slot *s = &x->slots[i];

		if (!s->used)
			continue;
		if (s->done_ns <= now)
			*ret_stuck = true;	/* its inner I/O is still running */
		else if (s->done_ns < *ret_next)
			*ret_next = s->done_ns;
	}
	return got;
}

/* Waits until the absolute CLOCK_MONOTONIC time t.  For a completion
 * (spin) it sleeps until spin_ns before it (a wake-up takes tens of
 * microseconds, more on a busy host) and spins the rest; a caller's
 * timeout is only slept to. */
static int sleep_until(struct emu_engine *x, int64_t t, bool spin)
{
	int64_t wake = spin ? t - x->o.spin_ns : t;
	struct itimerspec its = { .it_value = { .tv_sec = wake / CW_NS_PER_S,
						.tv_nsec = wake % CW_NS_PER_S } };
	uint64_t expirations;

	if (wake > cw_now_ns()) {
		if (timerfd_settime(x->tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
			return -errno;
		while (read(x->tfd, &expirations, sizeof(expirations)) < 0)
			if (errno != EINTR)
				return -errno;
	}
	while (cw_now_ns() < t)
		cw_pr_stall();
	return 0;
}

static int emu_reap(struct cw_io_engine *e, unsigned min_complete, int64_t deadline_ns,
		    struct cw_io_req **ret_reqs, unsigned max)
{
	struct emu_engine *x = to_emu(e);
	unsigned got = 0;

	for (;;) {
		int64_t now = cw_now_ns(), next, until;
		bool stuck;
		int r;

		r = pull_inner(x, 0, 0);
		if (r < 0)
			return got ? (int)got : r;
		advance(x, now);
		got += collect(x, now, ret_reqs + got, max - got, &next, &stuck);
		if (got >= min_complete || got == max || deadline_ns == CW_IO_POLL ||
		    (deadline_ns != CW_IO_FOREVER && now >= deadline_ns))
			return (int)got;
		until = deadline_ns == CW_IO_FOREVER ? next : CW_MIN(next, deadline_ns);
		if (stuck) {
			/* the model is done before the file: wait for the file
			 * (lateness the stats will show) */
			r = pull_inner(x, 1, until == NOT_YET ? -1 : CW_MAX(until - now, (int64_t)1));
			if (r < 0)
				return got ? (int)got : r;
		} else if (until != NOT_YET) {
			r = sleep_until(x, until, until == next);
			if (r < 0)
				return got ? (int)got : r;
		} else {
			return (int)got;	/* nothing in flight at all */
		}
	}
}

int cw_io_emu_stats(const struct cw_io_engine *e, struct cw_io_emu_stats *ret)
{
	struct emu_engine *x;

	if (!is_emu(e) || !ret)
		return -EINVAL;
	x = to_emu((struct cw_io_engine *)e);
	*ret = (struct cw_io_emu_stats){
		.requests = atomic_load_explicit(&x->st.requests, memory_order_relaxed),
		.busy_ns = atomic_load_explicit(&x->st.busy_ns, memory_order_relaxed),
		.late_sum_ns = atomic_load_explicit(&x->st.late_sum_ns, memory_order_relaxed),
		.late_max_ns = atomic_load_explicit(&x->st.late_max_ns, memory_order_relaxed),
		.late = atomic_load_explicit(&x->st.late, memory_order_relaxed),
	};
	return 0;
}

bool cw_io_emu_behind(struct cw_io_engine *e)
{
	struct emu_engine *x;
	uint64_t late;

	if (!is_emu(e))
		return false;
	x = to_emu(e);
	late = atomic_load_explicit(&x->st.late, memory_order_relaxed);
	return atomic_exchange_explicit(&x->late_reported, late, memory_order_relaxed) != late;
}

const struct cw_model *cw_io_emu_model(const struct cw_io_engine *e)
{
	return is_emu(e) ? &to_emu((struct cw_io_engine *)e)->m : NULL;
}

static const struct cw_io_ops emu_ops = {
	.name = "emulated",
	.engine_free = emu_free,
	.submit = emu_submit,
	.reap = emu_reap,
};
