/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * slots.h — private to the slots module: the packed slot and request-state
 * words and the structures behind the public handles.  Tests include it to
 * check the encodings.
 */
#ifndef CW_SLOTS_PRIV_H
#define CW_SLOTS_PRIV_H

#include <pthread.h>
#include <clockwise/slots.h>
#include "common/atomic.h"

/*
 * A slot word (64 bits): state, commit flag, lap, owner, round.
 *   bits 0-1   state: VACANT, TRANSIENT, RESERVED, CLOSED (passed by now)
 *   bit  2     COMMIT: first slot of a committed booking part
 *   bits 3-18  lap of the slot number the word describes (slot >> log2 ring)
 *   bits 19-30 owner: the request descriptor
 *   bits 31-63 round of that descriptor (unique per attempt)
 * A cell at lap L-1 in state CLOSED is VACANT for lap L: recycling costs
 * nothing but the dispatcher's one CAS when it passes the slot.
 *
 * Laps compare modulo 2^16.  A thread that stalls between reading now and
 * writing a slot word can come back many laps later (the stress test and
 * the benchmark move now by millions of slots a second; 8-bit laps were
 * seen to alias there).  2^15 laps of a 65536-slot ring are 2^31 slots:
 * 2.5 days of 100 us slots.  Rounds wrap after 2^33 attempts of one
 * descriptor.  Beyond that a stall can make a stale word look current:
 * the ABA limit of any packed-word design.
 */
enum { C_VACANT = 0, C_TRANSIENT = 1, C_RESERVED = 2, C_CLOSED = 3 };
#define C_STATE_MASK UINT64_C(3)
#define C_COMMIT (UINT64_C(1) << 2)
#define C_LAP_SHIFT 3
#define C_LAP_MASK 0xffffu
#define C_OWNER_SHIFT 19
#define C_OWNER_MASK 0xfffu
#define C_ROUND_SHIFT 31
#define ROUND_MASK ((UINT64_C(1) << 33) - 1)

static inline uint64_t cell_pack(unsigned state, unsigned lap, uint32_t owner, uint64_t round)
{
	return (uint64_t)state | ((uint64_t)(lap & C_LAP_MASK) << C_LAP_SHIFT) |
	       ((uint64_t)(owner & C_OWNER_MASK) << C_OWNER_SHIFT) |
	       ((round & ROUND_MASK) << C_ROUND_SHIFT);
}
static inline unsigned cell_state(uint64_t v) { return (unsigned)(v & C_STATE_MASK); }
static inline unsigned cell_lap(uint64_t v) { return (unsigned)(v >> C_LAP_SHIFT) & C_LAP_MASK; }
static inline uint32_t cell_owner(uint64_t v) { return (uint32_t)(v >> C_OWNER_SHIFT) & C_OWNER_MASK; }
static inline uint64_t cell_round(uint64_t v) { return (v >> C_ROUND_SHIFT) & ROUND_MASK; }
/* Owner, round and lap: what stays equal while a booking holds a cell. */
static inline uint64_t cell_id(uint64_t v) { return v & ~(C_STATE_MASK | C_COMMIT); }

/*
 * A request-state word (the paper's iterationState, 64 bits):
 *   bits 0-2   phase
 *   bits 3-23  offset from the request's start slot: the search position in
 *              INIT and CANCEL, the first slot in TEMP, PERM and FINISH
 *   bits 24-56 round (33 bits, as in the slot word)
 */
enum { P_IDLE = 0, P_INIT, P_TEMP, P_PERM, P_CANCEL, P_FINISH, P_FAIL };
#define S_OFF_SHIFT 3
#define S_OFF_MASK ((UINT64_C(1) << 21) - 1)
#define S_ROUND_SHIFT 24

static inline uint64_t st_pack(unsigned phase, uint64_t round, uint64_t off)
{
	return (uint64_t)phase | ((off & S_OFF_MASK) << S_OFF_SHIFT) |
	       ((round & ROUND_MASK) << S_ROUND_SHIFT);
}
static inline unsigned st_phase(uint64_t s) { return (unsigned)(s & 7); }
static inline uint64_t st_off(uint64_t s) { return (s >> S_OFF_SHIFT) & S_OFF_MASK; }
static inline uint64_t st_round(uint64_t s) { return (s >> S_ROUND_SHIFT) & ROUND_MASK; }

/* A request as its descriptor publishes it and as helpers copy it. */
#define CW_SLOTS_REQ_FIELDS					\
	int64_t start, deadline;				\
	uint64_t ticket, block;					\
	int64_t base_prio;					\
	uint32_t n, dir, shape, ndisks, deps;			\
	uint32_t dummy[CW_SLOTS_MAX_DISKS];			\
	struct cw_slots *disks[CW_SLOTS_MAX_DISKS];

/* One submitting thread's request descriptor (the paper's REQUEST[tid]). */
struct desc {
	uint64_t state CW_PADDED;	/* phase | offset | round */
	uint64_t relword CW_PADDED;	/* (round << 1) | 1 while releasing round:
					 * read for every booked slot a search
					 * meets, so kept off the busy lines */
	uint64_t seq CW_PADDED;		/* odd while the owner rewrites the fields */
	int64_t prio;			/* accumulated priority */
	uint64_t rollbacks;		/* times cancelled by others */
	/* The request, immutable while seq is even and unchanged. */
	CW_SLOTS_REQ_FIELDS
	uint32_t claimed;
};

/* Booking metadata at the first slot of a committed part, published by the
 * COMMIT flag (written before it, read after it). */
struct meta {
	uint64_t cookie, block, first, packed;	/* packed: part len | booking len << 24 | dir << 48 */
};

struct cw_slots_domain {
	enum cw_slots_mode mode;
	struct cw_slots_weights w;
	uint32_t max_threads, max_window, max_slots;
	struct desc *desc;
	uint32_t hiwater CW_PADDED;		/* 1 + highest descriptor ever claimed */
	uint64_t ticket CW_PADDED;		/* request age, for priority ties and helping */
	pthread_mutex_t lock CW_PADDED;		/* CW_SLOTS_MUTEX only */
};

/*
 * The occupancy hint: one bit per ring slot, in words of occ_group slots,
 * set when a booking's slot becomes RESERVED and cleared when the slot is
 * given back or passed by now.  A search reads one word instead of up to
 * 64 slot words to jump over booked slots.  It is only a hint: a set bit
 * may be stale (a slot given back while a helper was marking it), so only
 * the fast search trusts it; FAIL is decided on the slot words alone.  When
 * no operation runs, every RESERVED slot of the current lap has its bit
 * set (cw_slots_valid() checks it): bits are cleared before a release
 * frees its words and before now passes them, so no clear can hide a
 * later booking.
 */

/* One submitting context's share of a record's load: written only by the
 * thread using that context (no read-modify-write on a shared line per
 * booking), summed by readers (cw_slots_load()). */
struct lshard {
	int64_t v;
} CW_PADDED;

struct cw_slots {
	struct cw_slots_domain *dom;
	uint64_t *cells;
	struct meta *meta;
	struct lshard *lshard;		/* dom->max_threads shares */
	uint64_t *occ;			/* occupancy hint, a bit per slot (below) */
	uint32_t occ_group, occ_shift;	/* slots per occ word: min(64, ring) */
	uint32_t ring, mask, lap_shift;
	int64_t slot_ns;
	cw_slots_dummy_fn dummy;
	void *dummy_arg;
	int64_t now CW_PADDED;
	int64_t load CW_PADDED;		/* reserved cells ahead of now, the load
					 * factor: this (changed by whoever passes
					 * or releases without a context) plus
					 * every lshard[] */
	uint64_t last_block CW_PADDED;	/* block of the last booked write */
};

struct obs {
	uint64_t *cell;
	uint64_t val;
};

struct cw_slots_ctx {
	struct cw_slots_domain *dom;
	uint32_t id;
	uint64_t ops;
	struct obs *obs;		/* FAIL validation: obstacles of the first collect */
	size_t obs_cap;
	uint8_t *pick;			/* MUTEX mode: disk chosen per slot */
};

#endif
