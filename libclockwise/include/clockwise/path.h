/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwise/path.h — the request split of the data path (one core: the
 * daemon and the simulator call the same function): a request on a
 * partition's bytes becomes the pieces the disks serve.  One pass over the extent answers, run by run: holes (a
 * READ of one reads zeros without I/O), the block map, the SSD cache's
 * route, the destinations of blocks being moved (a write goes to both
 * copies; every copy of a mirrored partition), the class (real-time
 * inside a reservation's range and span on
 * the disks it books, best effort otherwise) and the best-effort cut (a
 * BE piece is at most its disk's piece, so that it fits in less slack).
 *
 * Pure: the layout questions go through struct cw_path_ops, the clock
 * comes in as the request's arrival time, the pieces go out through a
 * callback.  clockwised books them in its lanes, cwsim in its simulated
 * disks; both call cw_path_split(), so they split the same way.
 *
 * Then the lane's dispatch step (struct cw_path_lane, below): what one
 * disk's lane does with the pieces it took in — their charges (RT from
 * the stream's task, BE from the disk model), the queue they wait in
 * (cw_sched on a disk with streams; else the best-effort order or the
 * FIFO, up to the queue depth), what starts now and when to look again,
 * and the accounting of a completion.  clockwised's dispatchers and
 * cwsim's disks run the same step; the clock is an argument, the engine
 * the caller's.
 */
#ifndef CLOCKWISE_PATH_H
#define CLOCKWISE_PATH_H

#include <stdbool.h>
#include <stdint.h>

#include <clockwise/admit-state.h>
#include <clockwise/cache.h>
#include <clockwise/io.h>
#include <clockwise/layout.h>
#include <clockwise/model.h>
#include <clockwise/sched.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How soon a disk would serve one more request: RADIR's two keys for a
 * snake request (getMinDiskSlot, section IV-D): the first vacancy of the
 * slot record the request would be booked in, in ns from now (work
 * booked there and not yet taken), then the load factor, the requests
 * booked on the disk and not yet complete. */
struct cw_path_load {
	int64_t vacancy_ns;
	uint64_t load;
};

/* What a disk tells the split. */
struct cw_path_disk {
	uint64_t be_piece;	/* a BE piece on it is at most this long (cw_admit_be_piece) */
	bool can_punch;		/* it can deallocate (CW_IO_PUNCH) */
};

/* The layout questions, each about the partition behind lay. */
struct cw_path_ops {
	/* cw_part_allocated(): 1 data, 0 a hole, for *ret_length bytes. */
	int (*allocated)(void *lay, uint64_t offset, uint64_t length, uint64_t *ret_length);
	/* cw_part_map(). */
	int (*map)(void *lay, uint64_t offset, uint64_t length, struct cw_extent *ret);
	/* cw_cache_route(), asked only for a request with cached set. */
	enum cw_cache_route (*route)(void *lay, uint64_t offset, uint64_t length, bool write,
				     struct cw_extent *ret_ssd);
	/* cw_part_write_mirrors(); NULL: nothing is ever moved. */
	int (*mirrors)(void *lay, uint64_t offset, const struct cw_extent *ext,
		       uint64_t *ret_skips, struct cw_extent *ret_mirrors, unsigned max);
	/* The disk disk_id, or -ENODEV. */
	int (*disk)(void *lay, uint32_t disk_id, struct cw_path_disk *ret);
	/* cw_part_map_copies(): every copy of the bytes at offset, for the
	 * extent map gave there, copy 0 (map's) first; asked only when the
	 * request has copies > 1. */
	int (*copies)(void *lay, uint64_t offset, struct cw_copy *ret);
	/* How busy the disk disk_id is for a read at phys_offset there
	 * (struct cw_path_load), asked only for a best-effort read of a
	 * mirrored partition; NULL: never asked (the first copy in sync
	 * serves). */
	int (*load)(void *lay, uint32_t disk_id, uint64_t phys_offset, struct cw_path_load *ret);
};

/* A real partition's answers (cw_part_allocated, cw_part_map,
 * cw_cache_route, cw_part_write_mirrors), lay a struct cw_path_part. */
struct cw_path_part {
	struct cw_part *part;
	struct cw_cache *cache;	/* read once inside the I/O gate; NULL: none */
	int (*disk)(void *arg, uint32_t disk_id, struct cw_path_disk *ret);
	void *disk_arg;
	/* cw_path_ops.load, with disk_arg; NULL: none. */
	int (*load)(void *arg, uint32_t disk_id, uint64_t phys_offset, struct cw_path_load *ret);
};
extern const struct cw_path_ops cw_path_part_ops;

struct cw_path_req {
	uint64_t offset, length;	/* bytes of the partition */
	enum cw_io_op op;		/* CW_IO_READ, CW_IO_WRITE or CW_IO_PUNCH */
	/* WRITE: from zeros (WRITE_ZEROES); PUNCH: written as zeros where a
	 * disk cannot punch (without it those disks are skipped). */
	bool zero;
	bool cached;			/* the partition has an SSD cache: route each block */
	uint32_t block_size;		/* the pool's */
	uint32_t zero_chunk;		/* zeros are written in pieces of at most this */
	const struct cw_admit_resv *resv;	/* the export's stream, or NULL */
	int64_t arrival_ns;		/* on the clock of resv's span */
	/* The partition's copies (cw_part_copies; 0: 1).  A write goes to
	 * every copy in sync: the first one's piece is the IO piece, each
	 * other copy's a COPY piece after it (and a moving block's
	 * destination on either is a COPY too), all best effort; a read to
	 * one in-sync copy, a stream's by cw_path_stream_copy, a best-effort
	 * one's by cw_path_snake_copy (RADIR's snake request). */
	uint32_t copies;
};

enum cw_path_kind {
	CW_PATH_IO = 0,		/* the request's bytes where they are served */
	CW_PATH_HOLE = 1,	/* a READ of a hole: zeros, no I/O */
	CW_PATH_COPY = 2,	/* a write repeated: a moving block's destination, a cache copy */
};

struct cw_path_piece {
	enum cw_path_kind kind;
	enum cw_io_op op;
	uint32_t disk_id;		/* not for a hole */
	uint64_t phys_offset;		/* on the disk; not for a hole */
	uint64_t length;
	uint64_t buf_offset;		/* bytes into the request's buffer */
	bool zero;			/* written from zeros, not from the buffer */
	bool rt;			/* the stream's: booked in resv's part on the disk */
	/* The request's first piece on the disk (for a COPY: only a
	 * real-time one, the stream's first there). */
	bool first_on_disk;
	/* On a partition with copies, c + 1 for a piece that reads or
	 * writes copy c of its blocks (bytes buf_offset on of the request),
	 * so that a failure can mark that copy out of sync; 0 for the rest
	 * (one copy, a moving block's destination, a cache copy). */
	uint8_t mirror;
};

/* The first copy of n (n >= 1) in sync (copy 0 while it is), or
 * -ENODATA when none is: where a write's IO piece goes, and a read when
 * nothing tells the disks' loads apart. */
int cw_path_read_copy(const struct cw_copy *copies, unsigned n);

/* A best-effort read's copy, RADIR's getMinDiskSlot (section IV-D): of
 * the copies in sync, the one whose loads[c] has the earliest vacancy,
 * then the lowest load, then the lowest copy number (a sequential reader
 * stays on one arm until its queue grows).  -ENODATA when none is in
 * sync. */
int cw_path_snake_copy(const struct cw_copy *copies, unsigned n,
		       const struct cw_path_load *loads);

/* A stream's read (request number request of its blocks, from its
 * range's start): the copy cw_admit_snake_pick() gives among those in
 * sync on a disk the stream is booked on (booked: its n_booked disk ids;
 * NULL: every disk), as admission charged it (clockwise/admit.h).  A
 * copy in sync on a disk it is not booked on (a spare being rebuilt,
 * until the replacement is done and the stream booked there) is read
 * only when no booked one is in sync.  *ret_normal: every copy is in sync
 * and booked (the normal case; else a failure case's pick, which is the
 * stream's only if it was admitted to survive).  -ENODATA when none is
 * in sync. */
int cw_path_stream_copy(const struct cw_copy *copies, unsigned n, uint64_t request,
			const uint32_t *booked, unsigned n_booked, bool *ret_normal);

/* Whether a request of bytes [offset, offset + length) arriving at
 * arrival_ns is inside resv's range and span (its stream's class). */
bool cw_path_in_resv(const struct cw_admit_resv *resv, uint64_t offset, uint64_t length,
		     int64_t arrival_ns);

/* The most pieces cw_path_split() can emit for rq (a bound). */
size_t cw_path_split_max(const struct cw_path_req *rq);

/* Splits rq into pieces, in order, each handed to emit (whose negative
 * return stops the split and is returned).  A piece ends at a hole, a
 * run of the map, a cache block, a zero chunk and, when best effort, at
 * its disk's BE piece.  Returns 0, or the layout's or emit's -errno. */
int cw_path_split(const struct cw_path_ops *ops, void *lay, const struct cw_path_req *rq,
		  int (*emit)(void *arg, const struct cw_path_piece *p), void *arg);

/* ---- the lane's dispatch step (path/lane.c) ----
 *
 * A lane is one queue of a disk with one policy: a disk with streams has
 * one lane with cw_sched (one request in service at a time, the policy
 * decides when); a disk without has lanes that keep up to queue_depth
 * requests in flight, taken from the best-effort order (clockwise/sched.h,
 * struct cw_sched_beq_ops) or, without one, in arrival order (the FIFO).
 * The step is pure and single-threaded: its caller (a dispatcher thread,
 * a simulated disk) owns the lane, passes the time, starts the items on
 * its engine and reports their completion.  Nothing is allocated per
 * item: the caller's piece embeds a struct cw_path_item. */

/* What the lane knows of a piece; the caller's piece embeds it (and gets
 * back to itself by the item's offset in it, or through sr.user). */
struct cw_path_item {
	struct cw_sched_req sr;		/* first: its charges and the policy's verdict */
	struct cw_path_item *next;	/* in the lane's FIFO */
};

struct cw_path_lane {
	/* The disk's scheduling core when it has streams, or NULL; the
	 * caller makes and frees it. */
	struct cw_sched *sched;
	/* Without: the best-effort order (NULL: arrival order) and its
	 * state, which the lane owns. */
	const struct cw_sched_beq_ops *beq;
	void *beq_state;
	/* Without: what may start, in order (the order moves into it what
	 * it lets go). */
	struct cw_path_item *fifo, *fifo_tail;
	unsigned queue_depth;		/* without: in flight at most */
	unsigned inflight;		/* taken by cw_path_lane_next, not yet done */
	bool busy;			/* with: a request in service */
};

/* A lane: sched (or NULL), the queue depth without, and the BE order
 * without (NULL or the FIFO's ops: arrival order; with sched the order
 * sits in it and this one is not made).  0 or the order's -errno. */
int cw_path_lane_init(struct cw_path_lane *l, struct cw_sched *sched, unsigned queue_depth,
		      const struct cw_sched_beq_ops *beq, const void *beq_conf);
/* Frees the order (not sched, not the items). */
void cw_path_lane_fini(struct cw_path_lane *l);

/* An item's scheduling fields cleared, the caller's pointer and its
 * arrival set: before one of the charges below. */
void cw_path_item_init(struct cw_path_item *it, void *user, int64_t arrival_ns);
/* A real-time item of stream s (s->id, its T, C and D on this disk;
 * release_ns unused): same_job, a further piece of the request that
 * started the stream's latest job on the disk (cw_sched_req.same_job). */
void cw_path_charge_rt(struct cw_path_item *it, const struct cw_sched_stream *s, bool same_job,
		       uint64_t offset, uint64_t length);
/* A best-effort item on a disk of model m: service_ns the bound ΔL
 * charges (cw_model_service_ns, anywhere on the disk), cost_ns what it
 * costs its client's share (cw_model_mean_ns).  Length 0 (a flush) is
 * charged as 4 KiB; a bound the model cannot give is 1 ms, a cost it
 * cannot give none (the order then counts service_ns). */
void cw_path_charge_be(struct cw_path_item *it, const struct cw_model *m, uint64_t offset,
		       uint64_t length);

/* Queues a charged item (an uncharged one on a lane with neither sched
 * nor order): in cw_sched, the order or the FIFO.  0, or cw_sched's or
 * the order's -errno (cw_sched: -E2BIG for best effort larger than any
 * slack could run); on an error nothing was queued. */
int cw_path_lane_push(struct cw_path_lane *l, struct cw_path_item *it, int64_t now_ns);

/* What starts now: at most max items into ret, taken from the lane and
 * counted in flight; returns how many, or cw_sched's -errno.  With
 * sched: at most one, none while one is in service (busy).  Without: the
 * FIFO's head up to the queue depth; an empty FIFO is first filled from
 * the order with what it lets start now (as many as could start).
 * *ret_wait_ns: the time to call again though nothing arrived or
 * completed (cw_sched's WAIT, an order's limit), or -1. */
int cw_path_lane_next(struct cw_path_lane *l, int64_t now_ns, struct cw_path_item **ret,
		      unsigned max, int64_t *ret_wait_ns);
/* Items next() took from the FIFO that did not start (the engine was
 * full) go back to its head, in order; a lane without sched only. */
void cw_path_lane_unstarted(struct cw_path_lane *l, struct cw_path_item **items, unsigned n);
/* An item next() took is done at now_ns after actual_ns of service (0: it
 * never started): out of flight, and with sched completed there
 * (cw_sched_complete, which charges an overrun to the slack) and the
 * lane free.  0, or cw_sched_complete's -errno (-EINVAL: not the
 * request in service; nothing changed). */
int cw_path_lane_done(struct cw_path_lane *l, struct cw_path_item *it, int64_t now_ns,
		      int64_t actual_ns);

/* The lane gets its scheduling core (streams came to its disk), with
 * nothing in flight: the order is freed, and everything queued comes
 * back as a list (through next), what the order held first and in its
 * order, for the caller to charge and push again. */
struct cw_path_item *cw_path_lane_set_sched(struct cw_path_lane *l, struct cw_sched *sched);
/* Everything the order holds to the FIFO's tail, in its order (limits
 * no longer hold it back), and the order freed: the lane ends. */
void cw_path_lane_drain(struct cw_path_lane *l);

/* Whether the FIFO holds items; how many the order holds. */
static inline bool cw_path_lane_queued(const struct cw_path_lane *l)
{
	return l->fifo != NULL;
}

static inline size_t cw_path_lane_held(const struct cw_path_lane *l)
{
	return l->beq_state ? l->beq->count(l->beq_state) : 0;
}

/* Whether items go to the FIFO uncharged (neither sched nor an order). */
static inline bool cw_path_lane_plain(const struct cw_path_lane *l)
{
	return !l->sched && !l->beq_state;
}

#ifdef __cplusplus
}
#endif

#endif
