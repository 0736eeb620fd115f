/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwise/admit-state.h — the one owner of a pool's admission state.
 *
 * Per pool it holds each disk's model, the reservations admitted (stored
 * ones and the daemon's start-up ones alike), each disk's admitted task set
 * and best-effort reserve, and each disk's *plan*: what its dispatcher runs
 * with (ΔL, the best-effort budget after the guard, the idle allowance,
 * the periodic server).  Every program that admits or schedules asks it:
 * the control socket's handlers, `clockwised -r`, `cwsim plan`.
 *
 * Operations are atomic against the pool's stored objects: a reservation
 * is admitted on every disk its range touches or on none (the refusal says
 * why), and what is stored in the pool database is written first, in one
 * transaction, so memory never holds what the database does not.  Each
 * operation that changes a disk's plan reports that disk, through the
 * returned set and one event per disk to the listener; the data path
 * applies the new plan from that event.
 *
 * Bosch & Mullender, sections 3.1-3.3: a reservation's QoS becomes one task
 * (T, C) per disk (cw_admit_plan), Jeffay's test admits it against the
 * disk's tasks and its best-effort reserve, ΔL is the slack of the set and
 * the periodic server carries best effort when ΔL cannot.
 *
 * Threads: one thread changes the state (the control thread, or the
 * daemon's main thread before it starts); cw_admit_state_resv_list() and
 * cw_admit_state_plan() may be called from any thread.  A reservation
 * object handed out stays valid until the event that releases it has
 * returned, and unchanged but for its parts: a new model of their disk
 * changes a part's service time with one atomic store (read it with an
 * atomic load where another thread may change the model), and a move
 * books the stream on other disks (cw_admit_state_move_book) by putting a
 * new parts array in place.  Another thread finds a disk's part with
 * cw_admit_resv_part_on(); a part it found stays readable until the
 * reservation is released.
 */
#ifndef CLOCKWISE_ADMIT_STATE_H
#define CLOCKWISE_ADMIT_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <clockwise/admit.h>
#include <clockwise/layout.h>
#include <clockwise/model.h>
#include <clockwise/pool-objects.h>
#include <clockwise/sched.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- a disk's plan: pure ------------------------------------------------ */

/* How a plan is derived from a task set.  The guard keeps part of ΔL from
 * best effort: what the model does not see (a dispatcher waking on a busy
 * CPU, a reply's way to its client, a disk slower than its calibration)
 * then does not make a stream late.  The best-effort budget is
 * ΔL - max(guard_min_ns, ΔL / guard_div), at least 0 (guard_div 0: no
 * share).  With auto_server, a disk whose budget and idle allowance cannot
 * hold one best-effort piece gets the periodic server, period
 * be_reserve.period_ns, with the largest slice that fits. */
struct cw_admit_plan_opts {
	size_t size;			/* sizeof(struct cw_admit_plan_opts) */
	int64_t guard_min_ns;		/* default CW_ADMIT_GUARD_MIN_NS */
	unsigned guard_div;		/* default CW_ADMIT_GUARD_DIV */
	bool be_reserve;		/* admission keeps the BE reserve (admit.h); default true */
	bool auto_server;		/* default true */
};

#define CW_ADMIT_GUARD_MIN_NS (2 * CW_NS_PER_MS)
#define CW_ADMIT_GUARD_DIV 4

/* The daemon's defaults; cwsim uses them too unless a scenario says not. */
void cw_admit_plan_opts_init(struct cw_admit_plan_opts *opts);
/* The paper's plan: no guard, no reserve, no automatic server. */
void cw_admit_plan_opts_paper(struct cw_admit_plan_opts *opts);

struct cw_disk_plan {
	uint32_t disk_id;
	size_t n_tasks;			/* stream parts admitted on the disk */
	double utilization;		/* of the streams and the server */
	int64_t delta_l_ns;		/* ΔL of streams + server; CW_ADMIT_NO_LIMIT: none */
	int64_t be_budget_ns;		/* ΔL after the guard: the dispatcher's slack */
	int64_t idle_be_ns;		/* idle allowance (no guard); CW_ADMIT_NO_LIMIT: none */
	int64_t server_slice_ns;	/* 0: no server */
	int64_t server_period_ns;
	uint64_t be_piece_bytes;	/* the largest best-effort piece */
	int64_t be_max_ns;		/* its worst-case service time */
	struct cw_task be_reserve;	/* what admission keeps (zero: none) */
	bool be_starved;		/* not even the server holds one piece */
	int64_t guard_ns;		/* what the guard keeps of any job's slack
					 * (the dynamic policy's guard) */
};

/* The plan of one disk with model m (tier and the pool's block size give
 * its best-effort piece) serving tasks.  -EBUSY when the tasks are not
 * schedulable (ret->reason-less: call cw_admit_test for the reason),
 * -EINVAL, -ERANGE, -ENOMEM. */
int cw_admit_disk_plan(const struct cw_admit_plan_opts *opts, const struct cw_model *m,
		       enum cw_tier tier, uint64_t pool_block_bytes, const struct cw_task *tasks,
		       size_t n_tasks, struct cw_disk_plan *ret_plan);

/* The plan as one JSON object (no trailing newline), the form `cwsim plan`
 * and `cwctl disk plan --json` print: -ENOSPC if buf is too small. */
int cw_disk_plan_format_json(const struct cw_disk_plan *p, const char *disk_name, char *buf,
			     size_t len);

/* ---- the state ----------------------------------------------------------- */

/* One disk's share of a reservation. */
struct cw_admit_resv_part {
	uint32_t disk_id;
	struct cw_task task;		/* times on the state's clock */
	uint64_t requests;
	uint64_t stride;
	bool copy;			/* booked for its partition's cache copies here
					 * (cw_admit_state_cache_sync) */
};

struct cw_admit_resv {
	uint64_t id;			/* the pool's id; 0 for one not stored */
	uint64_t stream;		/* unique in this state, never reused: a scheduler's stream id */
	bool persistent;		/* stored in the pool; else the daemon's, for its lifetime */
	char part[CW_NAME_MAX + 1];
	uint64_t part_id;
	char export_name[CW_NAME_MAX + 1];	/* not stored: the export it was given for */
	uint64_t rate_bps;
	uint64_t block_bytes;
	uint64_t range_start_bytes, range_end_bytes;	/* [start, end) of the partition */
	int64_t span_start_ns, span_end_ns;	/* the state's clock; 0, 0: always; end 0: open */
	int64_t period_ns;		/* b/B */
	enum cw_admit_due due;		/* when its requests are due after release */
	int64_t lead_ns;		/* how far ahead of need a client must ask for a
					 * block: the longest part deadline */
	size_t n_parts;
	struct cw_admit_resv_part *parts;	/* followed by one with disk_id 0 */
	/* The unfinished move the parts are booked for (its blocks counted
	 * where they are and where it puts them); 0: none. */
	uint64_t move_id;
	/* Why its partition's SSD cache may not hold its blocks: admission
	 * refused the stream on a cache disk (cw_admit_state_cache_sync);
	 * empty when it is booked on every disk of the cache, or there is
	 * none. */
	char cache_refused[CW_ADMIT_REASON_MAX + 384];
	bool cache_refused_new;		/* the last cache sync set or changed it */
	/* Admitted to survive the loss of any one disk of its mirrored
	 * partition (cw_admit_plan_survive): with a disk failed its reads on
	 * the survivors are still its own; without, the reads a failure
	 * moves to another copy are best effort. */
	bool survive;
	/* A recording stream on a mirrored partition: each request charged
	 * on every copy's disk (RADIR's thick request), so its writes are
	 * its own on every copy; without, a stream's writes there are best
	 * effort and its reads alternate between the copies. */
	bool record;
};

/* The part of rv on disk_id, or NULL: safe against a move's re-booking
 * in another thread (see the top of this file). */
const struct cw_admit_resv_part *cw_admit_resv_part_on(const struct cw_admit_resv *rv,
						       uint32_t disk_id);

/* Whose guarantee a refusal is about. */
enum cw_admit_who {
	CW_ADMIT_WHO_NEW = 0,		/* the stream asked for */
	CW_ADMIT_WHO_RESV,		/* a stored reservation: resv_id */
	CW_ADMIT_WHO_STARTUP,		/* a start-up (-r) stream: export */
	CW_ADMIT_WHO_RESERVE,		/* the disk's best-effort reserve */
	CW_ADMIT_WHO_ALL,		/* the disk's streams together (U > 1) */
	CW_ADMIT_WHO_REBUILD,		/* the rebuild's reserve, in a failure case */
};

const char *cw_admit_who_name(enum cw_admit_who w);	/* "new", "resv", ... */

/* What a refused operation says: one line in words and units, and the
 * facts behind it. */
struct cw_admit_refusal {
	uint32_t disk_id;		/* 0: not a disk's refusal */
	char disk[CW_NAME_MAX + 1];
	enum cw_admit_who who;		/* whose deadline would be missed */
	uint64_t resv_id;		/* CW_ADMIT_WHO_RESV: its id */
	char export_name[CW_NAME_MAX + 1];	/* CW_ADMIT_WHO_STARTUP: its export */
	struct cw_admit_part part;	/* the refused part (task and test result) */
	struct cw_task task;		/* the task who names (T and C on this disk) */
	struct cw_host_result host;	/* part.result.why CW_ADMIT_HOST: the host's verdict */
	bool has_max_rate;		/* a refused reservation: max_rate_bps is known */
	uint64_t max_rate_bps;		/* the largest rate that fits (0: none at this block) */
	char reason[CW_ADMIT_REASON_MAX + 384];
};

/* Disks whose plan changed, by id. */
struct cw_admit_changes {
	uint64_t bits[(CW_DISKS_MAX + 64) / 64];
};

static inline bool cw_admit_changes_has(const struct cw_admit_changes *c, uint32_t disk_id)
{
	return disk_id <= CW_DISKS_MAX && (c->bits[disk_id / 64] >> (disk_id % 64) & 1);
}

enum cw_admit_event_kind {
	CW_ADMIT_EV_PLAN,		/* disk's plan changed: plan, model */
	CW_ADMIT_EV_RESV_ADDED,		/* resv joined; told before the disks' PLAN events */
	CW_ADMIT_EV_RESV_RELEASED,	/* resv leaves; freed when the call returns */
	CW_ADMIT_EV_BE_SET,		/* an export's best-effort QoS is be (new or changed) */
	CW_ADMIT_EV_BE_CLEARED,		/* be leaves; freed when the call returns */
};

struct cw_admit_event {
	enum cw_admit_event_kind kind;
	uint32_t disk_id;
	const struct cw_disk_plan *plan;
	const struct cw_model *model;
	const struct cw_admit_resv *resv;
	const struct cw_admit_be *be;
};

typedef void (*cw_admit_listener_fn)(void *userdata, const struct cw_admit_event *ev);

/* Where a disk's model came from, in rising rank: a stored one outranks
 * the configuration's, which outranks the tier's preset. */
enum cw_admit_model_source {
	CW_ADMIT_MODEL_PRESET = 0,
	CW_ADMIT_MODEL_CONFIG,
	CW_ADMIT_MODEL_STORED,		/* in the pool, set by hand */
	CW_ADMIT_MODEL_CALIBRATED,	/* in the pool, measured */
};

const char *cw_admit_model_source_name(enum cw_admit_model_source s);

struct cw_admit_state_opts {
	size_t size;			/* sizeof(struct cw_admit_state_opts) */
	struct cw_admit_plan_opts plan;
	uint32_t preset_margin_ppm;	/* added to tier presets; default 0 */
	int64_t (*clock_ns)(void);	/* default cw_now_ns (CLOCK_MONOTONIC) */
	int64_t (*wall_ns)(void);	/* stored times; default CLOCK_REALTIME */
	cw_admit_listener_fn listener;	/* may be NULL */
	void *listener_data;
	/* The rebuild's reserve on a disk that survives a failure, in
	 * millionths of the disk (cw_admit_rebuild_reserve): tested with the
	 * streams that must survive (cw_admit_plan_survive) and with every
	 * stream on a disk that holds one.  Default
	 * CW_ADMIT_REBUILD_SHARE_PPM; 0: none. */
	uint32_t rebuild_share_ppm;
};

void cw_admit_state_opts_init(struct cw_admit_state_opts *opts);

struct cw_admit_state;

/* Builds the state of pool: every disk's model (stored, else the model it
 * emulates as a CW_ADMIT_MODEL_CONFIG one, else its tier's preset), every
 * stored reservation booked exactly as it was admitted.
 * No events are sent for what it loads.  The pool must outlive the state.
 * -errno, with the pool's reason in cw_pool_last_error() where it has one. */
int cw_admit_state_new(struct cw_pool *pool, const struct cw_admit_state_opts *opts,
		       struct cw_admit_state **ret_state);
void cw_admit_state_free(struct cw_admit_state *st);	/* NULL-safe */

/* Sets the listener after creation (the data path exists only later). */
void cw_admit_state_set_listener(struct cw_admit_state *st, cw_admit_listener_fn fn,
				 void *userdata);

enum cw_admit_survive {
	CW_ADMIT_SURVIVE_AUTO = 0,
	CW_ADMIT_SURVIVE_OFF,
	CW_ADMIT_SURVIVE_ON,
};

/* A reservation request: the paper's QoS over a partition. */
struct cw_admit_request {
	const char *part;		/* partition name */
	uint64_t rate_bps;
	uint64_t block_bytes;
	uint64_t range_start_bytes;
	uint64_t range_end_bytes;	/* 0: the partition's end */
	int64_t start_in_ns;		/* the span starts this long from now (0 with duration 0: always) */
	int64_t duration_ns;		/* 0: open */
	bool persistent;		/* store it in the pool (else: the daemon's lifetime) */
	const char *export_name;	/* not persistent: which export it is for */
	bool dry_run;			/* plan and test, change nothing */
	enum cw_admit_due due;		/* default: a disk period (the paper's) */
	/* A running move taking blocks of the range to other disks: the
	 * stream is booked on both sides of it at once (as
	 * cw_admit_state_move_book would), and settles where the blocks lie
	 * once it is over (cw_admit_state_moves_settle).  0: the admission
	 * state finds it itself, the first running move of the partition
	 * that takes blocks of the range elsewhere (none: the stream is
	 * booked where its range lies). */
	uint64_t move_id;
	/* Survive the loss of any one disk (cw_admit_plan_survive): AUTO
	 * is ON on a mirrored partition and OFF on one copy; ON on a
	 * partition of one copy is refused (-EINVAL). */
	enum cw_admit_survive survive;
	/* A recording stream (cw_admit_resv.record); on one copy it changes
	 * nothing. */
	bool record;
};

/* Admits a reservation: 0 with *ret_resv (NULL on a dry run), or -EBUSY
 * with the refusal (when the tests refuse: it names the disk and the
 * stream whose deadline would be missed, and the largest rate that fits),
 * -EINVAL for a block larger than the range, -ENOENT (no such partition),
 * -EINVAL/-ERANGE (bad request: refusal.reason says what), -ENODEV (the
 * range lies on a missing disk), -ENOSPC (too many), -errno from the
 * pool.  ret_changes and ret_refusal may be NULL.
 * Rule 2 for the partition's SSD cache is kept on the way (the one path
 * for every caller): the range is pinned in the cache before the stream
 * is booked, and unpinned only once the stream is booked on the cache's
 * disks too (cw_admit_state_cache_sync of the partition, without retry:
 * when they refuse, cache_refused says why and the range stays pinned).
 * A refusal or a dry run pins nothing.  So is rule 2 for moves: while a
 * move runs that takes blocks of the range to other disks, the stream is
 * tested and booked on both sides of it (move_id above), and the
 * headroom (cw_admit_state_headroom) is the one on both sides too. */
int cw_admit_state_reserve(struct cw_admit_state *st, const struct cw_admit_request *req,
			   const struct cw_admit_resv **ret_resv,
			   struct cw_admit_refusal *ret_refusal,
			   struct cw_admit_changes *ret_changes);

/* Rule 2 of moving data (clockwise/mover.h): whether the admitted stream
 * (cw_admit_resv.stream) would still be admitted if blocks [first_block,
 * first_block + nblocks) of its partition were on disk_ids[0..nblocks)
 * instead of where they are (its other blocks staying): its range laid
 * out so, the moved blocks anywhere on their disks (the model's worst
 * case), planned at its rate, block and span and tested on each disk
 * against the streams there but itself, and the exports' best-effort
 * reservations.  Changes nothing.  0: it would be; -EBUSY with ref (the
 * disk and whose deadline); -ENOENT: no such stream; -ENODEV: a disk
 * without a model; -errno. */
int cw_admit_state_move_check(struct cw_admit_state *st, uint64_t stream, uint64_t first_block,
			      uint64_t nblocks, const uint32_t *disk_ids,
			      struct cw_admit_refusal *ref);

/* Rule 2 carried out: books the admitted stream for the unfinished move
 * move_id so that the move may run while the stream plays.  While a move
 * copies a block, the block is on its source or its destination, so each
 * block of the range the move takes elsewhere is counted on both disks
 * (clockwise/admit.h, alt_disk; on the destination anywhere on it), and
 * the stream is tested on each disk of that union against the other
 * streams there and the exports' best-effort reservations.  If every disk
 * admits it, its parts become the union's: in the pool first (with the
 * move, cw_resv_rebook), then in memory, then the PLAN events of every
 * disk whose task set changed; a stream booked for another, finished move
 * is booked from where its blocks are now.  Nothing changes on refusal.
 * 0; -EBUSY with ref (the disk and whose deadline: "with its blocks on
 * both sides of move M, reservation N would be refused on disk D: ...");
 * -ENOENT: no such stream, or move_id is not unfinished; -EINVAL: the
 * move is of another partition; -ENODEV: a disk without a model; -errno
 * from the pool (ref says). */
int cw_admit_state_move_book(struct cw_admit_state *st, uint64_t stream, uint64_t move_id,
			     struct cw_admit_refusal *ref, struct cw_admit_changes *ret_changes);

/* A replacement of disk old_id by new_id (cw_disk_replace: a spare
 * taking a failed disk's place, or cwctl disk replace) checked against
 * the admitted streams and booked, the replacement's moves (one per
 * partition) journalled and not yet run: each stream whose range has a
 * copy of some block on old_id is planned with new_id in old_id's place,
 * every copy (where on new_id is not known yet: its slowest zone), at its
 * rate, block, span and survive, and tested on each disk against the
 * streams there but itself, the streams moved onto new_id before it
 * included.  Its parts become that plan's, with its part on old_id kept
 * (a copy there in sync serves reads until the mover takes it), booked
 * for its partition's move among move_ids[0..n_moves), so that once the
 * move is over it settles where its blocks are
 * (cw_admit_state_moves_settle); the pool first, then memory, then the
 * PLAN events.  All or none: on a refusal every stream booked so far gets
 * its parts and move back.  0 (also when no stream has a copy on
 * old_id); -EBUSY with ref ("with disk NEW in place of disk OLD,
 * reservation N would be refused on disk D: ..."; disk names D);
 * -ENODEV: new_id has no model; -EINVAL; -errno. */
int cw_admit_state_replace(struct cw_admit_state *st, uint32_t old_id, uint32_t new_id,
			   const uint64_t *move_ids, size_t n_moves, struct cw_admit_refusal *ref,
			   struct cw_admit_changes *ret_changes);

/* cwctl disk replace and a spare's takeover: disk old_id replaced by
 * new_id (cw_disk_replace, its moves journalled paused), checked against
 * and booked for the streams (cw_admit_state_replace); the moves then
 * run (*ret_ids, *ret_n: malloc'ed), or on a refusal are cancelled, the
 * new disk made a spare again if it was one, and -EBUSY with ref.  The
 * pool's refusal (cw_pool_last_error) as its -errno, nothing journalled. */
int cw_admit_state_disk_replace(struct cw_admit_state *st, uint32_t old_id, uint32_t new_id,
				uint64_t **ret_ids, size_t *ret_n, struct cw_admit_refusal *ref,
				struct cw_admit_changes *ret_changes);

/* A spare's takeover of a failed disk's copies: what was tried and done. */
struct cw_admit_takeover {
	uint32_t spare;			/* the spare that took them (0: none) */
	uint64_t *move_ids;		/* its replacement's moves (malloc'ed) */
	size_t n_moves;
	unsigned refused;		/* spares with room that could not carry the streams */
	/* Each spare's refusal, in the order tried ("spare S: with disk S in
	 * place of disk D, reservation N would be refused on disk X: ...;
	 * spare T: ..."), or with none tried "no spare with room ..."; ""
	 * when the disk holds nothing. */
	char why[CW_DISK_UNREPLACED_MAX];
};

/* The takeover of failed disk failed_id by a spare (clockwised's, when a
 * disk is taken for gone or is missing at start): the present spares
 * with room for its blocks, the most room first (cw_pool_spares), each
 * tried as cw_admit_state_disk_replace does until one carries every
 * stream booked on the failed disk in its place.  None: ret->spare 0 and
 * ret->why; the disk's copies stay out of sync where they are, the
 * partitions degraded, and the streams as they were booked (those that
 * survive a disk keep their deadlines on the copies left).  0; -errno. */
int cw_admit_state_takeover(struct cw_admit_state *st, uint32_t failed_id,
			    struct cw_admit_takeover *ret, struct cw_admit_changes *ret_changes);

/* The move the stream was booked for is over, or does not run after all
 * (refused, postponed): its parts become those of its range where the
 * blocks are now, stored with no move.  Never refused: on every disk
 * that asks at most what the move's booking did.  0 also when it has no
 * move; -ENOENT: no such stream; -errno. */
int cw_admit_state_move_settle(struct cw_admit_state *st, uint64_t stream,
			       struct cw_admit_changes *ret_changes);

/* Settles every stream booked for a move the pool's journal no longer
 * holds unfinished (done, cancelled, forgotten): after the mover finished
 * one, and at start after a crash.  How many, or -errno. */
int cw_admit_state_moves_settle(struct cw_admit_state *st, struct cw_admit_changes *ret_changes);

/* Rule 2 for a partition's SSD cache (clockwise/cache.h): a cached block
 * is read from the SSD and written to both disks, so a stream whose
 * blocks the cache may hold must be booked on the cache's disks too
 * (cw_part_cache_disks: the disks of every slot the cache owns, which
 * hold every copy it may have), each of its requests charged there
 * (clockwise/admit.h, copy_disk).  For the reservations of partition part
 * (NULL: every partition), each stream is brought to that:
 *   - booked on every cache disk already: kept, or (the cache left some
 *     disks, or is gone) settled on those it has, never refused;
 *   - else, if retry or it was never refused: tested with the cache's
 *     disks (against the other streams and the exports' best-effort
 *     reservations there); booked on them if every disk admits it, else
 *     cache_refused says why ("with its blocks cached on disk D,
 *     reservation N would be refused on disk D: ...") and its parts keep
 *     only the cache disks the cache still has;
 *   - else it stays refused.
 * A stream booked for a move keeps that booking beside.  Bookings go to
 * the pool first (cw_resv_rebook, each part's copy flag), and PLAN
 * events follow as for any rebooking.  After it, a stream's blocks may
 * be cached iff its cache_refused is empty.  The number of streams
 * whose refusal was set or changed (each then has cache_refused_new
 * until the next sync of its partition), or -errno.
 * Then the pins (cw_cache_pin) of each partition synced are set to the
 * ranges of its reservations not booked on every disk of its cache, also
 * after an error. */
int cw_admit_state_cache_sync(struct cw_admit_state *st, const char *part, bool retry,
			      struct cw_admit_changes *ret_changes);

struct cw_cache_conf;

/* Sets partition part's SSD cache (cw_part_cache_set) with rule 2 kept:
 * the whole partition pinned while the cache may take SSD blocks its
 * streams are not booked on, then cw_admit_state_cache_sync with retry.
 * cw_part_cache_set's errors, -ENOENT (no such partition). */
int cw_admit_state_cache_set(struct cw_admit_state *st, const char *part,
			     const struct cw_cache_conf *conf,
			     struct cw_admit_changes *ret_changes);

/* The largest rate, in bytes per second, at which req (its rate and
 * dry_run ignored) would be admitted now: a bisection over the rate with
 * the test cw_admit_state_reserve makes, so the rate returned is admitted
 * and one byte per second more is refused (then ret_refusal, which may be
 * NULL, says why and where: the disk that limits it).  0 when not even
 * 1 B/s fits.  Errors as cw_admit_state_reserve's for a bad request. */
int cw_admit_state_headroom(struct cw_admit_state *st, const struct cw_admit_request *req,
			    uint64_t *ret_rate_bps, struct cw_admit_refusal *ret_refusal);

/* The same for a stream that lies on disk_id alone, anywhere on it (its
 * model's worst case), each request block_bytes in pieces of one pool
 * block: what the disk can still carry.  -ENOENT for an unknown disk. */
int cw_admit_state_disk_headroom(struct cw_admit_state *st, uint32_t disk_id,
				 uint64_t block_bytes, uint64_t *ret_rate_bps,
				 struct cw_admit_refusal *ret_refusal);

/* Releases a reservation by id (stored ones) — -ENOENT, or the pool's
 * -EBUSY while an export is bound to it.  Then every partition's cache
 * is synced with retry (cw_admit_state_cache_sync): a stream refused on
 * a cache before may fit in the room it leaves, and its range is no
 * longer pinned. */
int cw_admit_state_release(struct cw_admit_state *st, uint64_t id,
			   struct cw_admit_changes *ret_changes);

/* Makes m disk_id's model if source ranks at least as high as the one it
 * has (a stored or calibrated model is written to the pool first).  Every
 * stream the disk carries is admitted again with the new model's service
 * times; if one no longer fits, nothing changes and -EBUSY says which
 * (ret_refusal->resv_id).  A lower-ranked source is ignored: 0 and
 * *ret_taken false.  ret_taken, ret_refusal, ret_changes may be NULL. */
int cw_admit_state_set_model(struct cw_admit_state *st, uint32_t disk_id,
			     const struct cw_model *m, enum cw_admit_model_source source,
			     bool *ret_taken, struct cw_admit_refusal *ret_refusal,
			     struct cw_admit_changes *ret_changes);
int cw_admit_state_get_model(struct cw_admit_state *st, uint32_t disk_id,
			     struct cw_model *ret_model, enum cw_admit_model_source *ret_source);

/* The pool took a disk (cw_disk_add): it gets its tier's preset and an
 * empty plan.  -ENOENT if the pool does not know it. */
int cw_admit_state_disk_add(struct cw_admit_state *st, uint32_t disk_id,
			    struct cw_admit_changes *ret_changes);
/* Before the pool lets a disk go: -EBUSY (reason in ret_refusal) while a
 * reservation has a part on it; else it is forgotten. */
int cw_admit_state_disk_remove(struct cw_admit_state *st, uint32_t disk_id,
			       struct cw_admit_refusal *ret_refusal);

/* The host (clockwise/admit.h, "the host"): every new stream
 * (cw_admit_state_reserve, the headroom functions) is tested against it
 * once every disk admits it, and refused with part.result.why
 * CW_ADMIT_HOST and ref.host when the streams would need more CPU than is
 * given.  None at first.  Setting one re-tests nothing: the streams
 * admitted stay, and cw_admit_state_host says what they need (perhaps
 * more than is given).  -EINVAL for a bad model. */
int cw_admit_state_set_host(struct cw_admit_state *st, const struct cw_host_model *h);
/* The model (zero: none) and what the admitted streams need of it, in ps
 * of CPU per second.  Either may be NULL. */
void cw_admit_state_host(const struct cw_admit_state *st, struct cw_host_model *ret_model,
			 uint64_t *ret_need_ps);

/* A disk's plan now; -ENOENT for a disk the state does not know. */
int cw_admit_state_plan(struct cw_admit_state *st, uint32_t disk_id,
			struct cw_disk_plan *ret_plan);

/* The reservations in admission order (not thread-safe: the changing
 * thread's view); NULL past the end. */
const struct cw_admit_resv *cw_admit_state_resv_at(const struct cw_admit_state *st, size_t i);
const struct cw_admit_resv *cw_admit_state_resv_find(const struct cw_admit_state *st,
						     uint64_t id);
/* Parts of reservations on a disk: how many streams it carries. */
size_t cw_admit_state_disk_streams(const struct cw_admit_state *st, uint32_t disk_id);

/* A thread-safe snapshot of the reservations: malloc'ed copies, freed
 * with cw_admit_resv_list_free(). */
int cw_admit_state_resv_list(struct cw_admit_state *st, struct cw_admit_resv **ret,
			     size_t *ret_n);
void cw_admit_resv_list_free(struct cw_admit_resv *list, size_t n);	/* NULL-safe */

/* ---- best effort between exports ---------------------------------------
 *
 * An export's QoS (struct cw_be_qos) becomes one RBFQ client per disk its
 * partition has blocks on (struct cw_sched_client): for admission a rate
 * is a share of that disk's time, the rate times the part of the
 * partition's blocks on the disk (the order gets the whole rate, spread), in requests that each cost the model's mean service
 * (cw_model_mean_ns) — a rate in bytes per second in requests of the
 * disk's best-effort piece, one in iops in CW_ADMIT_BE_IOPS_BYTES.  The
 * reservations on a disk must fit in what its streams leave
 * (cw_sched_be_capacity of its admitted tasks; cw_sched_resv_admit), and
 * a stream is refused when it would leave less than they reserve. */

#define CW_ADMIT_BE_IOPS_BYTES 4096

struct cw_admit_be_part {
	uint32_t disk_id;
	struct cw_sched_client client;	/* its share of this disk (admission, what is due) */
	uint32_t share_ppm;		/* of the partition's blocks on the disk */
	/* What the disk's order gets: the export's whole QoS in this disk's
	 * costs, spread (dmClock): each disk's tags advance by the export's
	 * service on the others, so the reservation and the limit hold for
	 * the partition whatever part of it the clients read. */
	struct cw_sched_client order;
};

struct cw_admit_be {
	char export_name[CW_CLIENT_NAME_MAX + 1];	/* or EXPORT@CLASS: a class within it */
	char part[CW_NAME_MAX + 1];
	uint64_t part_id;
	bool persistent;		/* stored in the pool */
	struct cw_be_qos qos;
	size_t n_parts;
	struct cw_admit_be_part *parts;
};

struct cw_admit_be_request {
	const char *export_name;
	const char *part;		/* the partition the export serves */
	struct cw_be_qos qos;		/* weight 0: 1 */
	bool persistent;		/* store it in the pool */
	bool dry_run;			/* check, change nothing */
};

/* Sets (or replaces) an export's QoS: 0 with *ret_be (NULL on a dry run),
 * -EBUSY when a reservation does not fit on a disk (ret_refusal says the
 * disk, what it has and what fits), -EINVAL for a bad QoS (weight out of
 * range, a limit below the reservation, a rate beyond a whole disk:
 * ret_refusal->reason), -ENOENT (no such partition), -errno from the
 * pool.  ret_be and ret_refusal may be NULL. */
int cw_admit_state_be_set(struct cw_admit_state *st, const struct cw_admit_be_request *req,
			  const struct cw_admit_be **ret_be, struct cw_admit_refusal *ret_refusal);
/* Partition part changed its blocks (it grew, perhaps onto another disk):
 * every export of it gets its QoS built again, its share of each disk
 * from where its blocks are now (BE_SET events).  A new model on a disk
 * does the same for the exports there (cw_admit_state_set_model).  Not
 * refused: what was admitted stays.  0, -EINVAL, -ENOMEM, -errno from
 * the pool. */
int cw_admit_state_be_refresh(struct cw_admit_state *st, const char *part);
/* Drops an export's QoS (and its stored copy): -ENOENT if it has none. */
int cw_admit_state_be_clear(struct cw_admit_state *st, const char *export_name);
/* By export name, or the i-th (NULL past the end); the changing thread's
 * view, valid until the next change. */
const struct cw_admit_be *cw_admit_state_be_find(const struct cw_admit_state *st,
						 const char *export_name);
const struct cw_admit_be *cw_admit_state_be_at(const struct cw_admit_state *st, size_t i);

#ifdef __cplusplus
}
#endif
#endif
