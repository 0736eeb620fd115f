/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwise/mover.h — data that moves: journalled moves (a partition
 * re-laid, a disk evacuated), the block-by-block state machine that carries
 * them out, and the I/O gate every reader and writer of a partition passes
 * so a block can change place under live I/O.
 *
 * A move is journalled in the pool database when it starts: its plan (one
 * row per block to move, with its source and its reserved destination),
 * its state and its counters.  Whoever executes it (the daemon, cwsim)
 * asks cw_mover_next() what to do, does the copy and tells
 * cw_mover_copied(); the library keeps the rest:
 *
 *   1. the block's copy slot is published on its partition (writes to its
 *      source from now on are mirrored to its destination) and the I/O
 *      that began before is drained;
 *   2. the caller copies the block and makes the destination durable;
 *   3. a write that overlapped the copy makes it dirty: back to 2;
 *   4. the mapping switches in one transaction and one atomic store;
 *   5. the I/O that may still use the source is drained, then the source
 *      is freed.
 * So the source is freed only once the destination is durable and
 * recorded, an acknowledged write is on the source until the switch
 * commits and on both while the block is in its slot, and no block is
 * owned twice at any instant.  After a crash the pool reopens with every
 * unfinished move's destinations still reserved: a running move resumes
 * at the block it was copying (the copy is done again), a cancelled one
 * gives them back.
 *
 * Threads: management calls and the mover calls take the pool lock.  The
 * gate calls (cw_part_io_begin/end, cw_part_write_mirror) take none.
 */
#ifndef CLOCKWISE_MOVER_H
#define CLOCKWISE_MOVER_H

#include <clockwise/layout.h>

#ifdef __cplusplus
extern "C" {
#endif

enum cw_move_kind {
	CW_MOVE_PART = 0,	/* a partition re-laid by placement, tier, zone, disks */
	CW_MOVE_EVACUATE = 1,	/* every block of a partition off one disk */
	CW_MOVE_PROMOTE = 2,	/* to the SSD tier (the cache) */
	CW_MOVE_DEMOTE = 3,	/* back off the SSD tier */
	CW_MOVE_REBUILD = 4,	/* out-of-sync copies rewritten in place from one in sync */
	CW_MOVE_REPLACE = 5,	/* every copy on one disk rebuilt or moved onto another */
	CW_MOVE_SCRUB = 6,	/* every copy read and compared with one in sync */
	CW_MOVE_REPAIR = 7,	/* the same, and a copy that differs rewritten from it */
};

enum cw_move_state {
	CW_MOVE_RUNNING = 0,
	CW_MOVE_PAUSED = 1,	/* by a command, or by an error (see error) */
	CW_MOVE_DONE = 2,
	CW_MOVE_CANCELLED = 3,	/* stopped; blocks moved so far stay moved */
};

struct cw_move_info {
	uint64_t id;
	enum cw_move_kind kind;
	enum cw_move_state state;
	uint64_t part_id;
	char part[CW_NAME_MAX + 1];	/* "" once the partition is gone */
	uint32_t disk_id;		/* evacuate: the disk being emptied */
	struct cw_move_opts opts;	/* disk_ids NULL here */
	uint64_t blocks;		/* planned block copies */
	uint64_t done;			/* switched to their destination */
	uint64_t failed;		/* source unreadable: left in place */
	uint64_t skipped;		/* changed under the move (shrunk away) */
	uint64_t bytes_copied;		/* including copies done again */
	int64_t created_ns;		/* CLOCK_REALTIME */
	int64_t finished_ns;		/* 0 while unfinished */
	char error[256];		/* why it paused; "" when by command */
};

const char *cw_move_kind_name(enum cw_move_kind k);	/* NULL if invalid */
const char *cw_move_state_name(enum cw_move_state s);

/* Journals a move of blocks [first_block, first_block + nblocks) of part
 * to the disks opts selects (cw_move_plan()'s rules: blocks already on an
 * acceptable disk stay; a tier is strict) and returns its id.  The
 * destinations are reserved at once: -ENOSPC (with the numbers in
 * cw_pool_last_error()) when they do not fit, and nothing is journalled.
 * -EBUSY if the partition already has an unfinished move.  kind is
 * CW_MOVE_PART, CW_MOVE_PROMOTE or CW_MOVE_DEMOTE.  A move with nothing
 * to copy is journalled as done. */
int cw_move_start(struct cw_part *part, uint64_t first_block, uint64_t nblocks,
		  const struct cw_move_opts *opts, enum cw_move_kind kind, uint64_t *ret_id);

/* Journals moves that take every block off disk_id, one per partition
 * holding any, onto the other present disks (of any tier), in one
 * transaction; the ids in a malloc'ed array (the caller frees it; NULL
 * and 0 when the disk holds nothing).  Refused up front, with the numbers,
 * when the other disks lack the free blocks: -ENOSPC.  -EBUSY when one of
 * those partitions already has an unfinished move. */
int cw_disk_evacuate(struct cw_pool *pool, uint32_t disk_id, uint64_t **ret_ids,
		     size_t *ret_n);

/* The same, journalled paused with the reason (not NULL) as its error:
 * nothing moves before cw_move_resume() (or cw_move_cancel()). */
int cw_move_start_paused(struct cw_part *part, uint64_t first_block, uint64_t nblocks,
			 const struct cw_move_opts *opts, enum cw_move_kind kind,
			 const char *paused, uint64_t *ret_id);
int cw_disk_evacuate_paused(struct cw_pool *pool, uint32_t disk_id, const char *paused,
			    uint64_t **ret_ids, size_t *ret_n);

/* Journals a rebuild of a mirrored partition (kind CW_MOVE_REBUILD): every
 * copy of a block that is out of sync and lies on a present disk is
 * rewritten in place from a copy in sync by the mover, as best-effort I/O,
 * journalled and resumable like any move; each copy is marked in sync in
 * the transaction that records its rewrite, once the rewrite is durable.
 * A write to the block meanwhile reaches the copy being rewritten too, and
 * a rewrite a write overlapped is done again, so no acknowledged write is
 * ever overwritten by older data.  0 with *ret_id 0 when nothing there can
 * be rebuilt; -EINVAL for a partition with one copy; -EBUSY if it has an
 * unfinished move. */
int cw_part_rebuild(struct cw_part *part, uint64_t *ret_id);

/* Journals the replacement of disk old_id by new_id (kind CW_MOVE_REPLACE,
 * disk old_id; one move per partition, in one transaction): every copy on
 * old moves to new, read from old while it is present and that copy in
 * sync, else rebuilt from another copy in sync.  No two copies of a block
 * end on one disk or failure domain.  Refused with the reason, nothing
 * journalled: -ENODATA when some blocks have no copy in sync but on a
 * missing old (the error names the partition and the first such block),
 * -ENOSPC when new lacks room, -EXDEV when new shares a failure domain
 * with another copy of a block, -EBUSY as cw_disk_evacuate.  paused: NULL,
 * or journalled paused with that reason, as cw_disk_evacuate_paused.  Once every
 * replacement move of old is done, old holds nothing and the caller may
 * remove it (cw_disk_remove). */
int cw_disk_replace(struct cw_pool *pool, uint32_t old_id, uint32_t new_id, const char *paused,
		    uint64_t **ret_ids, size_t *ret_n);

/* Journals a scrub of a mirrored partition (kind CW_MOVE_SCRUB, or
 * CW_MOVE_REPAIR with repair): the mover reads each copy in sync of each
 * block beside the block's first copy in sync (copy 0 while it is: the
 * reference when all say they are in sync) and compares them; with
 * repair, a copy that differs is rewritten from the reference, under the
 * rules of a rebuild.  A comparison a write overlapped is done again.
 * Each block compared counts done, each that differed (or did not read)
 * failed, listed by cw_move_failed_blocks.  Copies out of sync are not
 * compared (cw_part_rebuild rewrites them).  -EINVAL for one copy,
 * -EBUSY if the partition has an unfinished move. */
int cw_part_scrub(struct cw_part *part, bool repair, uint64_t *ret_id);

/* Where blocks [first_block, first_block + nblocks) of part will be once
 * the unfinished move id is done: the disk of each, in ret_disk_ids (the
 * disk it is on now where the move leaves it).  -ENOENT: no unfinished
 * move id; -ERANGE: blocks outside the partition. */
int cw_move_destinations(struct cw_pool *pool, uint64_t id, const struct cw_part *part,
			 uint64_t first_block, uint64_t nblocks, uint32_t *ret_disk_ids);
/* The same, and whether the move takes any of those blocks to another
 * disk: 1 if it does, 0 if it leaves each where it is; errors as
 * cw_move_destinations'. */
int cw_move_takes(struct cw_pool *pool, uint64_t id, const struct cw_part *part,
		  uint64_t first_block, uint64_t nblocks, uint32_t *ret_disk_ids);

/* Every move the journal holds, in id order (malloc'ed; free()). */
int cw_move_list(struct cw_pool *pool, struct cw_move_info **ret, size_t *ret_n);
int cw_move_get(struct cw_pool *pool, uint64_t id, struct cw_move_info *ret);

/* The blocks of a move whose source could not be read (malloc'ed logical
 * block numbers; free()). */
int cw_move_failed_blocks(struct cw_pool *pool, uint64_t id, uint64_t **ret_blocks,
			  size_t *ret_n);

/* Pause, resume, or cancel an unfinished move (reason NULL: by command;
 * else kept as its error, which move lists show).  Cancel keeps the
 * blocks already moved and gives back the destinations of the others.
 * -ENOENT: no such move; -EALREADY: it is finished (or already in the
 * asked state). */
int cw_move_pause(struct cw_pool *pool, uint64_t id, const char *reason);
int cw_move_resume(struct cw_pool *pool, uint64_t id);
int cw_move_cancel(struct cw_pool *pool, uint64_t id, const char *reason);

/* Forgets finished moves (done or cancelled) from the journal. */
int cw_move_forget_finished(struct cw_pool *pool);

/* ---- the state machine ---- */

enum cw_mover_action {
	CW_MOVER_IDLE = 0,	/* nothing runs */
	CW_MOVER_WAIT = 1,	/* I/O in flight must finish first: ask again soon */
	CW_MOVER_COPY = 2,	/* copy the block, make dst durable, cw_mover_copied() */
};

struct cw_mover_task {
	enum cw_mover_action action;
	uint64_t move_id;
	struct cw_part *part;
	uint64_t block;			/* logical block of part */
	uint32_t src_disk_id;
	uint64_t src_offset;		/* physical bytes */
	uint32_t dst_disk_id;
	uint64_t dst_offset;
	uint32_t length;		/* the block size */
	bool again;			/* a copy done again (a write overlapped) */
	uint32_t copy;			/* the copy of the block that moves or is rebuilt */
	bool rebuild;			/* src is another copy, in sync: dst is rewritten */
	bool verify;			/* a scrub: read dst too and compare; write dst only
					 * if it differs and repair is set */
	bool repair;
};

/* The next thing to do for the pool's moves (the oldest running move
 * first; one block at a time).  -EBUSY while a COPY is outstanding. */
int cw_mover_next(struct cw_pool *pool, struct cw_mover_task *ret);

/* Blocks a batch of the pipelined mover holds at most. */
#define CW_MOVER_DEPTH_MAX 64

/* The same for a batch of up to max (1..CW_MOVER_DEPTH_MAX) consecutive
 * blocks of one move, copied at once: ret[0].action says what to do, and
 * for a COPY ret[0..*ret_n) are the blocks to copy (each made durable
 * before cw_mover_copied_batch()).  Every block of a batch has its own
 * copy slot (writes to it are mirrored, a copy a write overlapped is done
 * again), and its mapping switches only once its destination is durable;
 * the batch's switches are journalled in one transaction.  A batch asks
 * for COPY again, with fewer blocks, while some must be copied again. */
int cw_mover_next_batch(struct cw_pool *pool, struct cw_mover_task *ret, unsigned max,
			unsigned *ret_n);

/* The outcome of one block of a COPY batch, as for cw_mover_copied(). */
struct cw_mover_outcome {
	int read_err;			/* of src, or (verify) of dst */
	int write_err;
	bool differs;			/* verify: dst differed from src (and was rewritten
					 * when repair) */
};

/* The outcomes of the outstanding COPY batch, out[i] for ret[i] of
 * cw_mover_next_batch(); n must be the batch's *ret_n (-EINVAL if not,
 * or if no COPY is outstanding). */
int cw_mover_copied_batch(struct cw_pool *pool, const struct cw_mover_outcome *out, unsigned n);

/* The outcome of the outstanding COPY: read_err from reading the source
 * (the block is marked failed, stays where it is, and the move goes on),
 * write_err from writing or syncing the destination (the move pauses with
 * the error; the source mapping stays).  -EINVAL if no COPY is
 * outstanding. */
int cw_mover_copied(struct cw_pool *pool, int read_err, int write_err);

/* ---- the mover's pace on a disk without streams ---- */

/* On a disk with streams the mover's copies run in the slack like any
 * best-effort request; on one without, the driver keeps it to share_pct
 * percent of the disk's time while other best-effort clients use it.
 * The cost counts as the best-effort order counts it: the model's mean
 * service time of each request.  One per disk; zero-initialised. */
struct cw_mover_pace {
	int64_t next_ns;	/* the mover's next batch there starts no sooner */
	uint64_t others_ns;	/* the others' busy time there after the last batch */
};

struct cw_model;

/* The cost of the batch t[0..n) on disk_id, with m that disk's model:
 * the mean service time of each block it reads there and of each it
 * writes there (0 when the batch does not touch the disk). */
int64_t cw_mover_batch_cost_ns(const struct cw_mover_task *t, unsigned n, uint32_t disk_id,
			       const struct cw_model *m);

/* After a batch that cost cost_ns on a disk: others_ns is the time other
 * best-effort clients had requests there so far, streams whether the disk
 * has streams.  If others used the disk since the last batch, the disk has
 * no streams and share_pct < 100, the next batch there waits until this
 * one was share_pct percent of the time since it ended. */
void cw_mover_pace_after(struct cw_mover_pace *pc, unsigned share_pct, bool streams,
			 int64_t cost_ns, uint64_t others_ns, int64_t now_ns);

/* Whether anything runs or waits (for a driver deciding to sleep). */
bool cw_mover_busy(struct cw_pool *pool);

/* ---- the I/O gate (lock-free) ---- */

/* Every I/O on a partition begins before it maps and ends after it
 * completed; the ticket of the begin goes to the end. */
unsigned cw_part_io_begin(struct cw_part *part);
void cw_part_io_end(struct cw_part *part, unsigned ticket);

/* The second place of a write: after cw_part_map() mapped the write at
 * offset to ext (inside one io_begin/io_end), the part of it that falls
 * on a block being copied must go to that block's destination as well.
 * Returns 1 and sets ret_skip (bytes into the extent where the mirrored
 * piece starts) and ret_mirror, or 0 when there is none. */
int cw_part_write_mirror(struct cw_part *part, uint64_t offset, const struct cw_extent *ext,
			 uint64_t *ret_skip, struct cw_extent *ret_mirror);

/* The same for every block of the extent being copied (a batch of the
 * pipelined mover may copy several): up to max mirrors, in the extent's
 * order, with the bytes into the extent where each starts; returns how
 * many (never more than CW_MOVER_DEPTH_MAX). */
int cw_part_write_mirrors(struct cw_part *part, uint64_t offset, const struct cw_extent *ext,
			  uint64_t *ret_skips, struct cw_extent *ret_mirrors, unsigned max);

#ifdef __cplusplus
}
#endif
#endif
