/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwise/slots.h — the slot reservation record (RADIR, Aggarwal, Yasa &
 * Sarangi): one row of time slots per disk, booked concurrently without a
 * lock.
 *
 * Time is cut into slots of slot_ns (default 100 us for an SSD, 1 ms for an
 * HDD); slot numbers are int64_t counted from 0 by the caller's clock (see
 * cw_slots_slot_of()).  A record holds a ring of ring_slots slots starting
 * at "now"; slots behind now are recycled for the next lap, so the record
 * never runs out.  Only the driver moves now (cw_slots_next() or
 * cw_slots_advance()), so tests and cwsim drive time explicitly.
 *
 * Records live in a domain: the domain owns the per-thread request
 * descriptors, the priority weights and the mode (lock-free, wait-free or
 * the one-mutex baseline).  A request may span several records of one
 * domain: a snake request (mirrors: each slot on any one of the disks) or a
 * thick request (data and parity: the same slots on every disk).
 *
 * Use:
 *   submitter threads:  cw_slots_ctx_new() once, then per request
 *                       cw_slots_reserve() -> cw_slots_commit(cookie),
 *                       or cw_slots_release() to give a booking back;
 *   one dispatcher per record: cw_slots_next(until) in a loop, which
 *                       hands out committed bookings in slot order and
 *                       moves now; cw_slots_peek() looks ahead.
 * reserve, commit and release are linearizable.  In the lock-free and
 * wait-free modes no call takes a lock or sleeps; CW_SLOTS_MUTEX puts every
 * call behind one mutex (the baseline the benchmark compares against).
 */
#ifndef CLOCKWISE_SLOTS_H
#define CLOCKWISE_SLOTS_H

#include <errno.h>
#include <clockwise/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cw_slots_reserve()'s answer when no run of vacant slots started in the
 * window [start_slot, deadline_slot]: the paper's FAIL. */
#define CW_SLOTS_FAIL (-ETIME)

/* Disks one request may span (snake mirrors or thick stripes). */
#define CW_SLOTS_MAX_DISKS 4

#define CW_SLOTS_SSD_SLOT_NS (100 * CW_NS_PER_US)
#define CW_SLOTS_HDD_SLOT_NS (1 * CW_NS_PER_MS)

enum cw_slots_mode {
	CW_SLOTS_LOCKFREE = 0,	/* default */
	CW_SLOTS_WAITFREE = 1,	/* newer requests help older announced ones */
	CW_SLOTS_MUTEX = 2,	/* baseline: the same record behind one mutex */
};

enum cw_slots_dir {
	CW_SLOTS_READ = 0,
	CW_SLOTS_WRITE = 1,
};

enum cw_slots_shape {
	CW_SLOTS_SINGLE = 0,	/* one disk: disks[0] */
	CW_SLOTS_SNAKE = 1,	/* each slot on any one of disks[] (mirrors) */
	CW_SLOTS_THICK = 2,	/* the same slots on every one of disks[] */
};

/* The priority rule applied when two requests want the same slot
 * (section IV-C): deadline distance first, then accumulated priority, reads
 * before writes, writes to the last written block, fewer disk slots, more
 * dependants, more slots already booked, older request. */
struct cw_slots_weights {
	int64_t deadline_range;		/* slots; default 16 */
	int64_t priority_threshold;	/* default 4 */
	int64_t size_range;		/* disk slots; default 2 */
	int64_t deps_range;		/* default 2 */
	bool prefer_large;		/* default false: smaller requests win */
	uint32_t rollback_limit;	/* cancellations before a request is
					 * helped by everyone; default 8 */
};

struct cw_slots_domain_opts {
	size_t size;			/* sizeof(struct cw_slots_domain_opts) */
	enum cw_slots_mode mode;
	uint32_t max_threads;		/* contexts; default 128, at most 4096 */
	uint32_t max_window;		/* deadline - start, slots; default 4096 */
	uint32_t max_slots;		/* disk slots of one request; default 512 */
	struct cw_slots_weights weights;	/* zero fields take defaults */
};

struct cw_slots_req;

/* Housekeeping ("dummy") slots a disk adds to a request, e.g. SSD garbage
 * collection or write amplification; called at reservation time. */
typedef uint32_t (*cw_slots_dummy_fn)(void *arg, const struct cw_slots_req *req);

struct cw_slots_opts {
	size_t size;			/* sizeof(struct cw_slots_opts) */
	enum cw_tier tier;		/* chooses the default slot_ns */
	int64_t slot_ns;		/* 0: 100 us on SSD, 1 ms on HDD */
	uint32_t ring_slots;		/* power of two >= 2 * (max_window + max_slots);
					 * default the larger of that and 65536 */
	int64_t now_slot;		/* the first now; default 0 */
	cw_slots_dummy_fn dummy;	/* may be NULL */
	void *dummy_arg;
};

struct cw_slots_domain;
struct cw_slots;
struct cw_slots_ctx;

struct cw_slots_req {
	enum cw_slots_dir dir;
	enum cw_slots_shape shape;
	unsigned ndisks;			/* 1 for SINGLE */
	struct cw_slots *disks[CW_SLOTS_MAX_DISKS];
	int64_t start_slot;			/* earliest first slot */
	int64_t deadline_slot;			/* latest first slot */
	uint32_t size_slots;			/* before dummy slots, >= 1 */
	uint32_t dependants;			/* requests depending on this one */
	uint64_t block;				/* block address, for write preference */
	int32_t priority;			/* base priority, higher wins */
};

/* What cw_slots_reserve() booked: slots [first_slot, first_slot+n_slots)
 * (n_slots includes dummy slots).  owner_ and round_ name the booking. */
struct cw_slots_booking {
	int64_t first_slot;
	uint32_t n_slots;
	uint32_t owner_;
	uint64_t round_;
	struct cw_slots_req req_;
};

/* A committed booking as the dispatcher of one disk sees it: its part on
 * this disk starts at slot and lasts n_slots. */
struct cw_slots_entry {
	int64_t slot;
	uint32_t n_slots;		/* this disk's part */
	int64_t booking_first;		/* the whole booking */
	uint32_t booking_slots;
	uint64_t cookie;		/* from cw_slots_commit() */
	enum cw_slots_dir dir;
	uint64_t block;
};

int cw_slots_domain_new(const struct cw_slots_domain_opts *opts,
			struct cw_slots_domain **ret_domain);
void cw_slots_domain_free(struct cw_slots_domain *d);	/* NULL-safe */

/* Parses "lf"/"lockfree", "wf"/"waitfree" or "mutex". */
int cw_slots_mode_parse(const char *name, enum cw_slots_mode *ret_mode);
const char *cw_slots_mode_name(enum cw_slots_mode mode);

/* A record for one disk.  Free records only when no call is using them. */
int cw_slots_new(struct cw_slots_domain *d, const struct cw_slots_opts *opts,
		 struct cw_slots **ret_rec);
void cw_slots_free(struct cw_slots *rec);		/* NULL-safe */

/* A submitting thread's descriptor; one per thread, used by one thread at
 * a time.  -EUSERS when the domain's max_threads are taken. */
int cw_slots_ctx_new(struct cw_slots_domain *d, struct cw_slots_ctx **ret_ctx);
void cw_slots_ctx_free(struct cw_slots_ctx *ctx);	/* NULL-safe */

/* Books size_slots plus the disks' dummy slots, contiguous, starting at a
 * slot in [max(start_slot, now), deadline_slot].  Returns 0 and the
 * booking, CW_SLOTS_FAIL when no vacant run started in that window at the
 * operation's linearization point, -EINVAL for a malformed request,
 * -ERANGE when the window reaches beyond the ring (deadline_slot +
 * n_slots > now + ring_slots) or exceeds max_window/max_slots. */
int cw_slots_reserve(struct cw_slots_ctx *ctx, const struct cw_slots_req *req,
		     struct cw_slots_booking *ret_booking);

/* Publishes a booking to the dispatchers with the caller's cookie.  Returns
 * 0, or -ETIMEDOUT when a dispatcher already passed (part of) it: its
 * slots are lost and the caller should release it and book again. */
int cw_slots_commit(struct cw_slots_ctx *ctx, const struct cw_slots_booking *b,
		    uint64_t cookie);

/* Gives a booking's slots back (linearizable: they all become vacant at
 * once).  Must be called with the context that reserved it (-EPERM
 * otherwise).  Returns the number of slots it still held and gave back
 * (slots a dispatcher already passed are not), -EINVAL for a booking that
 * is not one. */
int cw_slots_release(struct cw_slots_ctx *ctx, const struct cw_slots_booking *b);

/* The dispatcher of rec (one thread): moves now forward one slot at a time
 * up to until_slot, recycling what it passes.  Stops after the first slot
 * that starts a committed booking part, returns 1 and the entry (now is
 * then entry.slot + 1); returns 0 when now reached until_slot.  Bookings
 * not committed when their first slot is passed are dropped. */
int cw_slots_next(struct cw_slots *rec, int64_t until_slot, struct cw_slots_entry *ret_entry);

/* Looks ahead without moving now: the first committed booking part
 * starting in [from_slot, until_slot).  Returns 1 and the entry, or 0. */
int cw_slots_peek(struct cw_slots *rec, int64_t from_slot, int64_t until_slot,
		  struct cw_slots_entry *ret_entry);

/* Moves now to now_slot (never backwards), dropping what it passes.  Safe
 * from any thread, e.g. a clock tick; costs one CAS per slot passed.
 * Returns the new now. */
int64_t cw_slots_advance(struct cw_slots *rec, int64_t now_slot);

int64_t cw_slots_now(const struct cw_slots *rec);
int64_t cw_slots_slot_ns(const struct cw_slots *rec);
uint32_t cw_slots_ring_slots(const struct cw_slots *rec);

/* Slot number of time t_ns on a clock that started at origin_ns. */
int64_t cw_slots_slot_of(const struct cw_slots *rec, int64_t origin_ns, int64_t t_ns);

/* Who holds slot: 1 and the booking's owner and round when it is booked
 * (reserved, or held by a request that has linearized), 0 when vacant,
 * -ERANGE outside [now, now + ring_slots). For tests and tools. */
int cw_slots_owner(struct cw_slots *rec, int64_t slot, uint32_t *ret_owner,
		   uint64_t *ret_round);

/* Checks the record's invariants (laps, owners, committed parts); call it
 * when no operation is running.  0 or -EUCLEAN. */
int cw_slots_valid(struct cw_slots *rec);

/* The context's descriptor number (the booking's owner_). */
uint32_t cw_slots_ctx_id(const struct cw_slots_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
