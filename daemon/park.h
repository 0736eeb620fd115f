/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A thread's parking spot: one thread (a lane's dispatcher, a connection's
 * reader or writer, the allocator) sleeps there until another has work
 * for it.  Cheap when nobody sleeps: a waker only loads a flag.
 *
 * The sleeper raises its flag, then looks for work, then sleeps on a
 * counter it read before raising the flag; a waker publishes its work,
 * then looks at the flag (both seq_cst, so one of them sees the other),
 * and if the sleeper is parked moves the counter on and wakes it.  Every
 * waker that finds the sleeper parked wakes it itself.  The spot used to
 * be one word a waker cleared before its wake-up, and a waker that lost
 * its CPU between the two (a best-effort reader, the control thread
 * posting a plan, preempted by real-time threads) left the sleeper parked
 * with the flag down, so every later waker, a stream's reader among them,
 * took it for awake: a dispatcher slept 134 ms through four bookings of
 * a stream that way, and its requests missed their deadlines.  Now a
 * waker that stalls delays only itself; what it costs is that several
 * wakers may each make the system call while the sleeper gets up.
 *
 * The futex itself is libclockwise/common/futex.h's.  Below the spot, a
 * thread's batch of held wake-ups (struct wake_batch), the one way a
 * thread that wakes many sleepers in a burst wakes each once.
 */
#ifndef CLOCKWISED_PARK_H
#define CLOCKWISED_PARK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/futex.h"

struct park {
	atomic_int parked;	/* the sleeper is about to sleep or asleep */
	atomic_int seq;		/* the futex word: moved on by every wake-up */
};

/* Where a test holds a waker between its look at the flag and its
 * wake-up; nothing in the daemon. */
#ifndef park_wake_gap
#define park_wake_gap() ((void)0)
#endif

/* The sleeper, before it looks for work: what park_sleep() waits on. */
static inline int park_prepare(struct park *pk)
{
	int seq = atomic_load_explicit(&pk->seq, memory_order_seq_cst);

	atomic_store_explicit(&pk->parked, 1, memory_order_seq_cst);
	return seq;
}

/* The sleeper found work after park_prepare(). */
static inline void park_cancel(struct park *pk)
{
	atomic_store_explicit(&pk->parked, 0, memory_order_relaxed);
}

/* The sleeper found none: sleeps until a wake-up after park_prepare(),
 * or timeout_ns (< 0: none), or a signal. */
static inline void park_sleep(struct park *pk, int seq, int64_t timeout_ns)
{
	cw_futex_wait_for(&pk->seq, seq, timeout_ns);
	atomic_store_explicit(&pk->parked, 0, memory_order_relaxed);
}

/* The sleeper's whole wait: sleeps unless the expression ready, looked
 * at once the flag is up, is true (a statement; ready is evaluated once). */
#define park_unless(pk, ready, timeout_ns)                                  \
	do {                                                                 \
		int park_seq_ = park_prepare(pk);                            \
		if (ready)                                                   \
			park_cancel(pk);                                     \
		else                                                         \
			park_sleep(pk, park_seq_, timeout_ns);               \
	} while (0)

/* Wakes the sleeper whether or not it is parked (a stop, a plan). */
static inline void park_wake_always(struct park *pk)
{
	atomic_fetch_add_explicit(&pk->seq, 1, memory_order_seq_cst);
	park_wake_gap();
	cw_futex_wake(&pk->seq);
}

/* After publishing work: wakes the sleeper if it is parked.  Returns
 * whether it was. */
static inline bool park_wake(struct park *pk)
{
	if (!atomic_load_explicit(&pk->parked, memory_order_seq_cst))
		return false;
	park_wake_always(pk);
	return true;
}

/* A thread's held wake-ups: a thread that hands work to several sleepers
 * in a burst (a reader booking into lanes, a dispatcher completing
 * replies for connections) holds each one's wake-up here and gives them
 * once, when it is about to block, so a burst costs each sleeper one
 * wake-up.  Who is a lane or a connection; big marks one whose work is
 * large enough that the holder should wake it rather than do the work
 * itself when it flushes.  The flush is the user's (what it does with
 * each entry differs); it sets n back to 0. */
#define WAKE_BATCH_MAX 16
struct wake_batch {
	bool on;		/* the thread holds wake-ups (plugged) */
	unsigned n;
	void *who[WAKE_BATCH_MAX];
	bool big[WAKE_BATCH_MAX];
};

/* Holds who's wake-up, up to max (<= WAKE_BATCH_MAX) entries.  Returns 1
 * if who is held now, 0 if it was already (big is added to its mark),
 * -1 if the batch is full (nothing held). */
static inline int wake_batch_hold(struct wake_batch *b, unsigned max, void *who, bool big)
{
	unsigned i;

	for (i = 0; i < b->n; i++)
		if (b->who[i] == who) {
			b->big[i] |= big;
			return 0;
		}
	if (b->n == max)
		return -1;
	b->who[b->n] = who;
	b->big[b->n++] = big;
	return 1;
}

#endif
