/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwise/layout.h — the volume layer: a pool of disks carved into
 * dynamic partitions (Bosch & Mullender, section 2).
 *
 * A pool is one sqlite database (the only source of truth for metadata) and
 * a set of disks, block devices or regular files.  Every disk carries a label
 * in its first block (magic, format version, pool UUID, disk UUID, block
 * size, checksum), so the pool reassembles by identity, not by path.  The
 * space of a disk after the label is cut into blocks of one size per pool
 * (default 1 MiB), grouped into zones: zone 0 is the outer zone (lowest
 * addresses, the fastest on an HDD).
 *
 * A dynamic partition is a name and an ordered list of blocks on any disks.
 * It grows and shrinks at its end and can be reorganised online by moves.
 *
 * Threads: management calls (everything that changes the pool) serialise on
 * a mutex inside the pool.  The mapping calls (cw_part_map,
 * cw_part_block_disks, cw_part_size_bytes, cw_part_allocated, cw_part_data_bytes) take no lock and may run in any
 * number of threads concurrently with management calls, including a move
 * commit: each block's location is one atomic word, so a reader sees either
 * the old or the new location of a block, never a mix.  A partition handle
 * stays valid until cw_part_delete() of it or cw_pool_close(); the caller
 * must stop mapping a partition before deleting it.
 *
 * Errors: functions return 0 (or a count) or a negative errno and never
 * print.  The reason of the last failed management call of a pool is kept
 * in cw_pool_last_error(); cw_pool_create/open, which have no pool yet,
 * fill a caller's struct cw_error instead.
 *   -ENOSPC     not enough free space (needed/available bytes are set)
 *   -EEXIST     name or path already in use
 *   -EINVAL     invalid argument (name, size, policy, tier, zone, range)
 *   -ENOENT     no such disk, partition or database
 *   -EBUSY      a disk still holds blocks; a disk of another pool; the
 *               pool is open in another process
 *   -EUCLEAN    corrupt label or database
 *   -ENODEV     the partition (or disk) is unavailable: a disk is missing
 *   -ERANGE     offset or block range beyond the end of a partition
 *   -ESTALE     a move plan no longer matches the partition (it changed)
 *   -EXDEV      a partition's copies need more failure domains (disks) than
 *               its candidate disks span
 */
#ifndef CLOCKWISE_LAYOUT_H
#define CLOCKWISE_LAYOUT_H

#include <clockwise/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CW_BLOCK_SIZE_DEFAULT	(UINT32_C(1) << 20)	/* 1 MiB */
#define CW_BLOCK_SIZE_MIN	(UINT32_C(64) << 10)	/* 64 KiB */
#define CW_BLOCK_SIZE_MAX	(UINT32_C(1) << 30)
#define CW_NAME_MAX		63	/* disk and partition names, bytes */
#define CW_DISKS_MAX		255	/* disk ids are 1..CW_DISKS_MAX */
#define CW_EXPORTS_MAX		256	/* exports a daemon serves at once */
#define CW_ZONES		3	/* outer, middle, inner */
#define CW_UUID_STRING_LEN	36	/* 8-4-4-4-12, without the NUL */
#define CW_COPIES_MAX		3	/* copies of each block a partition may keep */
#define CW_DISK_UNREPLACED_MAX	768	/* cw_disk_info's unreplaced, with its NUL */
/* Blocks of a mirrored partition's write-intent region (cw_part_intent_begin). */
#define CW_INTENT_REGION_BLOCKS	64

/* Why a call failed: a sentence for a human, and for -ENOSPC the numbers. */
struct cw_error {
	int code;			/* the negative errno returned */
	uint64_t needed_bytes;		/* -ENOSPC only */
	uint64_t available_bytes;	/* -ENOSPC only */
	char msg[512];
};

/* Placement of a partition's blocks over the candidate disks. */
enum cw_placement {
	CW_PLACE_ROTATION = 0,	/* block n+1 on the next disk (striping) */
	CW_PLACE_RANDOM = 1,	/* each block on a random disk with space */
	CW_PLACE_SINGLE = 2,	/* every block on one disk */
};

/* Which disks are candidates.  A preferred HDD tier falls back to every
 * disk when the tier lacks the space; the SSD tier only when the
 * partition allows it (cw_part_opts.tier_fallback), else the allocation
 * is refused with -ENOSPC and the free space found on SSDs.  Moves to a
 * tier never fall back. */
enum cw_tier_pref {
	CW_TIER_PREF_NONE = 0,
	CW_TIER_PREF_HDD = 1,
	CW_TIER_PREF_SSD = 2,
};

/* Where on a disk: outer takes the lowest free addresses first (the fast
 * zone of an HDD), inner the highest, any continues where the disk's last
 * allocation ended. */
enum cw_zone_pref {
	CW_ZONE_ANY = 0,
	CW_ZONE_OUTER = 1,
	CW_ZONE_INNER = 2,
};

/* Parsers for the names used by configuration and the control protocol:
 * "rotation" "random" "single"; "none" "hdd" "ssd"; "any" "outer" "inner";
 * and the disk tiers "hdd" "ssd".  -EINVAL for anything else. */
int cw_placement_parse(const char *s, enum cw_placement *ret);
int cw_tier_pref_parse(const char *s, enum cw_tier_pref *ret);
int cw_zone_pref_parse(const char *s, enum cw_zone_pref *ret);
int cw_tier_parse(const char *s, enum cw_tier *ret);
const char *cw_placement_name(enum cw_placement p);	/* NULL if invalid */
const char *cw_tier_pref_name(enum cw_tier_pref t);
const char *cw_zone_pref_name(enum cw_zone_pref z);
const char *cw_tier_name(enum cw_tier t);

/* ---- pool ---- */

struct cw_pool;

/* Creates a new pool: a new sqlite database at db_path (which must not
 * exist), a fresh pool UUID, block_size bytes per block (0: the default;
 * otherwise a power of two in [CW_BLOCK_SIZE_MIN, CW_BLOCK_SIZE_MAX]).
 * ret_err may be NULL. */
int cw_pool_create(const char *db_path, uint32_t block_size, struct cw_error *ret_err,
		   struct cw_pool **ret_pool);

/* Opens an existing pool and reassembles its disks by the UUIDs in their
 * labels.  A disk whose path is missing, unreadable, carries a corrupt
 * label or another disk's label is "missing": the pool opens degraded,
 * partitions with a block on a missing disk are unavailable (they cannot
 * be resized or moved, and cw_part_map says -ENODEV for exactly the
 * blocks on missing disks) and the others work.  A corrupt database is refused with
 * -EUCLEAN and left as it was. */
int cw_pool_open(const char *db_path, struct cw_error *ret_err, struct cw_pool **ret_pool);

/* Closes the pool and every handle from it (NULL-safe); pending move
 * plans are aborted. */
void cw_pool_close(struct cw_pool *pool);

/* The reason of the last failed management call on this pool. */
const struct cw_error *cw_pool_last_error(const struct cw_pool *pool);

uint32_t cw_pool_block_size(const struct cw_pool *pool);
/* The pool UUID, 16 bytes, and its 8-4-4-4-12 text (buf >= 37 bytes). */
const uint8_t *cw_pool_uuid(const struct cw_pool *pool);
void cw_uuid_format(const uint8_t uuid[16], char buf[CW_UUID_STRING_LEN + 1]);
/* Number of disks recorded in the pool that are missing (0: not degraded). */
unsigned cw_pool_missing_disks(const struct cw_pool *pool);

/* ---- disks ---- */

enum cw_disk_state {
	CW_DISK_PRESENT = 0,
	CW_DISK_MISSING = 1,	/* the path is gone or unreadable */
	CW_DISK_WRONG_LABEL = 2,	/* the path holds another disk or no label */
	CW_DISK_BAD_LABEL = 3,	/* the label's checksum or fields are wrong */
	CW_DISK_SHRUNK = 4,	/* smaller than its blocks need (a file truncated):
				 * never written past its end, so it is not used */
};

struct cw_disk_info {
	uint32_t id;			/* 1..CW_DISKS_MAX */
	enum cw_tier tier;
	enum cw_disk_state state;
	uint8_t uuid[16];
	char name[CW_NAME_MAX + 1];
	char path[4096];
	uint64_t capacity_bytes;	/* the device or file size at add time */
	uint64_t found_bytes;		/* CW_DISK_SHRUNK: its size at open */
	uint64_t data_offset_bytes;	/* where block 0 of the data starts */
	uint64_t data_blocks;		/* blocks after the label */
	uint64_t free_blocks;
	/* Zone z covers physical byte offsets [zone_start[z], zone_start[z+1])
	 * with zone_start[CW_ZONES] the end of the data area. */
	uint64_t zone_start_bytes[CW_ZONES + 1];
	uint64_t zone_free_blocks[CW_ZONES];
	/* The failure domain ("": the disk's own, shared with no other
	 * disk).  Copies of a block are kept in distinct domains; an RBD
	 * image and a local disk never share one, whatever their names. */
	char domain[CW_NAME_MAX + 1];
	bool spare;			/* a spare (cw_disk_set_spare) */
	/* Why the disk, failed, was not replaced by a spare
	 * (cw_disk_set_unreplaced); "" if it was, or was not asked. */
	char unreplaced[CW_DISK_UNREPLACED_MAX];
};

/* Adds the block device or regular file at path to the pool as tier
 * (name NULL or "": "disk<id>"), writes its label into the first block,
 * and returns its id.  Refused: a path already in the pool (-EEXIST), a
 * disk labelled for another pool (-EBUSY) or with a corrupt label
 * (-EUCLEAN) — nothing is written over either — or a disk too small for the
 * label and one block (-ENOSPC). */
int cw_disk_add(struct cw_pool *pool, const char *path, enum cw_tier tier, const char *name,
		uint32_t *ret_id);

/* Sets a disk's failure domain (a name as cw_name_valid says, or "" or
 * NULL: its own).  -EBUSY, and nothing changes, when a partition would
 * then have two copies of a block in one domain. */
int cw_disk_set_domain(struct cw_pool *pool, uint32_t disk_id, const char *domain);

/* Makes a disk a spare (or a data disk again): a spare is given no block
 * by placement, moves or evacuations, only by a replacement
 * (cw_disk_replace, which makes it a data disk).  -EBUSY when it holds
 * blocks. */
int cw_disk_set_spare(struct cw_pool *pool, uint32_t disk_id, bool spare);

/* Every present spare disk with at least need free blocks, the most room
 * first (among equals the lowest id), into ret_ids (room for max); how
 * many. */
size_t cw_pool_spares(struct cw_pool *pool, uint64_t need, uint32_t *ret_ids, size_t max);

/* Says why disk_id, failed, keeps its copies where they are (no spare
 * would carry the streams booked on it: clockwised's takeover), or (why
 * NULL or "") that nothing keeps it; in memory, cut at
 * CW_DISK_UNREPLACED_MAX - 1 bytes, until the disk is replaced
 * (cw_disk_replace clears it) or the pool closes.  -ENOENT: no such
 * disk. */
int cw_disk_set_unreplaced(struct cw_pool *pool, uint32_t disk_id, const char *why);

/* Removes an empty disk from the pool and erases its label; -EBUSY while
 * any partition has a block on it or a stored reservation has a part on it
 * (clockwise/pool-objects.h). */
int cw_disk_remove(struct cw_pool *pool, uint32_t disk_id);

/* Every disk of the pool in id order, in one malloc'ed array the caller
 * frees with free(). */
int cw_disk_list(struct cw_pool *pool, struct cw_disk_info **ret_disks, size_t *ret_n);
int cw_disk_info(struct cw_pool *pool, uint32_t disk_id, struct cw_disk_info *ret);
/* The pool's open read-write descriptor of a present disk (owned by the
 * pool, O_CLOEXEC, buffered: open the path again for O_DIRECT), or
 * -ENODEV / -ENOENT.  Lock-free. */
int cw_disk_fd(const struct cw_pool *pool, uint32_t disk_id);

/* A disk's service-time model (clockwise/model.h), kept in the pool
 * database with the disk and removed with it.  calibrated says whether it
 * was measured on this disk (true) or declared (a preset, the
 * configuration).  Getting a disk that has none: -ENOENT. */
struct cw_model;
int cw_disk_model_set(struct cw_pool *pool, uint32_t disk_id, const struct cw_model *model,
		      bool calibrated);
int cw_disk_model_get(struct cw_pool *pool, uint32_t disk_id, struct cw_model *ret_model,
		      bool *ret_calibrated);
/* Stores a disk's model and, in the same transaction, the service times
 * its stored reservations' parts on it were admitted again with under that
 * model (resv_ids[i] gets service_ns[i]); -ENOENT, and nothing changed,
 * if one of those reservations has no part on the disk. */
int cw_disk_model_readmit(struct cw_pool *pool, uint32_t disk_id, const struct cw_model *model,
			  bool calibrated, const uint64_t *resv_ids, const int64_t *service_ns,
			  size_t n);

/* The model a disk emulates (clockwise/emu.h: its I/O completes when that
 * disk would have completed it), kept with the disk; NULL clears it.
 * Getting a disk that emulates nothing: -ENOENT. */
int cw_disk_emulate_set(struct cw_pool *pool, uint32_t disk_id, const struct cw_model *model);
int cw_disk_emulate_get(struct cw_pool *pool, uint32_t disk_id, struct cw_model *ret_model);

/* ---- partitions ---- */

struct cw_part;

struct cw_part_opts {
	enum cw_placement placement;
	enum cw_tier_pref tier;
	enum cw_zone_pref zone;
	uint32_t disk_id;	/* CW_PLACE_SINGLE: this disk; 0: the one with most space */
	bool tier_fallback;	/* CW_TIER_PREF_SSD: other disks when SSDs are full */
	/* Copies of each block, 1..CW_COPIES_MAX (0: 1), each on its own
	 * disk in its own failure domain; fixed when the partition is made.
	 * Copy 0 is placed by the policy above, copy c on the next disk
	 * (rotation, single: disk by disk) or a random one (random) that
	 * shares no domain with the block's copies before it. */
	uint32_t copies;
};

struct cw_part_info {
	uint64_t id;
	char name[CW_NAME_MAX + 1];
	uint64_t size_bytes;
	uint64_t nblocks;
	struct cw_part_opts opts;
	bool available;		/* false: a block is on a missing disk */
	uint64_t missing_blocks;	/* how many blocks are on missing disks */
	uint32_t copies;		/* opts.copies, 1 for a single copy */
	uint64_t stale_copies;		/* copies of blocks that are out of sync */
};

/* Names: 1..CW_NAME_MAX bytes of [A-Za-z0-9._-], not starting with '.'
 * or '-'. */
bool cw_name_valid(const char *name);

/* A best-effort client's name: an export's ("media"), or a connection
 * class within it ("media@backup": what clients that open that export
 * name share); the class is a name of at most CW_CLASS_MAX bytes. */
#define CW_CLASS_MAX 31
#define CW_CLIENT_NAME_MAX (CW_NAME_MAX + 1 + CW_CLASS_MAX)
bool cw_client_name_valid(const char *name);

/* Creates a partition of size_bytes rounded up to whole blocks (0 is
 * allowed: an empty partition), placing its blocks by opts (NULL: rotation,
 * no tier preference, any zone).  Nothing is allocated on failure. */
int cw_part_create(struct cw_pool *pool, const char *name, uint64_t size_bytes,
		   const struct cw_part_opts *opts, struct cw_part **ret_part);
int cw_part_lookup(struct cw_pool *pool, const char *name, struct cw_part **ret_part);

/* Grows or shrinks the partition at its end to size_bytes rounded up to
 * blocks.  Growing keeps every existing block and places the new ones by the
 * partition's policy (rotation continues after the last block's disk,
 * single stays on its disk). */
int cw_part_resize(struct cw_part *part, uint64_t size_bytes);
int cw_part_rename(struct cw_part *part, const char *new_name);
/* Deletes the partition and frees its blocks; part is freed.  -EBUSY (and
 * nothing changes) while a stored reservation or export holds it
 * (clockwise/pool-objects.h). */
int cw_part_delete(struct cw_part *part);

int cw_part_info(struct cw_part *part, struct cw_part_info *ret);
/* Every partition in id order, malloc'ed; the caller frees it. */
int cw_part_list(struct cw_pool *pool, struct cw_part_info **ret_parts, size_t *ret_n);

/* ---- the hot path (lock-free) ---- */

/* A piece of a partition's byte range on one disk. */
struct cw_extent {
	uint32_t disk_id;
	uint64_t phys_offset;	/* byte offset on the disk (label included) */
	uint64_t length;	/* contiguous bytes from phys_offset */
};

/* Maps the partition byte offset to its disk and physical offset.
 * ret->length is the number of bytes, at most length, that are contiguous
 * on that disk from there (following physically adjacent blocks); length 0
 * means "to the end of this block".  -ERANGE beyond the end.  -ENODEV
 * when the block at offset is on a missing disk: ret->disk_id is that
 * disk and ret->length the bytes from offset, at most length, that are on
 * missing disks (any of them), so a caller can serve the rest of a
 * partition around them.  O(1) plus one step per extra block. */
int cw_part_map(const struct cw_part *part, uint64_t offset, uint64_t length,
		struct cw_extent *ret);

/* The disk id of each block in [first_block, first_block + nblocks), in
 * ret_disk_ids[0..nblocks).  -ERANGE if the range passes the end. */
int cw_part_block_disks(const struct cw_part *part, uint64_t first_block, uint64_t nblocks,
			uint32_t *ret_disk_ids);

/* ---- copies (lock-free) ---- */

/* One copy of a block, or of an extent: where it is and whether it holds
 * the block's data (false: out of sync, not to be read). */
struct cw_copy {
	uint32_t disk_id;
	uint64_t phys_offset;	/* bytes on the disk (label included) */
	bool in_sync;
};

/* The copies each block of the partition has (1 without mirrors). */
uint32_t cw_part_copies(const struct cw_part *part);

/* Every copy of the bytes at offset, for the extent cw_part_map() gave
 * for offset (on a partition with copies, an extent it returns is
 * contiguous on every copy, so each copy holds those bytes from its
 * phys_offset on): ret[0..cw_part_copies()), copy 0 first, the one
 * cw_part_map() names.  -ERANGE beyond the end. */
int cw_part_map_copies(const struct cw_part *part, uint64_t offset, struct cw_copy *ret);

/* The copies of block b (disk, the block's first byte, in sync), as above. */
int cw_part_block_copies(const struct cw_part *part, uint64_t block, struct cw_copy *ret);

/* ---- copies out of sync, and the write-intent record ----
 *
 * A copy of a block is out of sync ("stale") when it may not hold the
 * block's data: a write to it failed, its disk is missing or failed, or a
 * crash left a write to its region unfinished.  Reads never go to a stale
 * copy; a resync copies an in-sync copy over it and clears the mark.  */

/* Marks copy `copy` of blocks [block, block + n) out of sync (stale true)
 * or back in sync (false), in memory and in the pool's database in one
 * transaction: when it returns 0 the mark is durable, so a write whose
 * failure on that copy it records may then be acknowledged.  On an error
 * of the database (-errno) the marks made in memory stay (a stale copy is
 * never read; clearing: the copy stays stale).  -ERANGE past the end,
 * -EINVAL for a copy the partition does not have.  Takes the pool lock. */
int cw_part_copy_set_stale(struct cw_part *part, uint32_t copy, uint64_t block, uint64_t n,
			   bool stale);

/* Copy `copy`'s stale blocks (0 for a partition with one copy), and the
 * blocks no copy holds in sync (their data is lost until a copy returns).
 * O(blocks / 64). */
uint64_t cw_part_copy_stale_count(const struct cw_part *part, uint32_t copy);
uint64_t cw_part_lost_blocks(const struct cw_part *part);

/* Marks every copy that lies on disk disk_id of every mirrored partition
 * out of sync (a disk missing or failed), one transaction; ret_marked
 * (may be NULL) gets how many copies of blocks were newly marked.  A
 * partition's only copies (one copy) are left alone: they are not
 * mirrored, and a missing disk makes them unavailable as it always did. */
int cw_pool_disk_set_stale(struct cw_pool *pool, uint32_t disk_id, uint64_t *ret_marked);

/* The write-intent record (md's write-intent bitmap), per region of
 * CW_INTENT_REGION_BLOCKS blocks of a mirrored partition.  A writer calls
 * cw_part_intent_begin for the bytes [offset, offset + length) before it
 * dispatches the write to the copies and cw_part_intent_end once every
 * copy is done.  begin is lock-free when every region is already recorded
 * dirty; otherwise it records them (one transaction, durable) before it
 * returns, under the pool lock.  cw_pool_intent_sweep forgets the regions
 * with no write in flight and none begun since the previous sweep, in one
 * transaction; call it every few seconds.  cw_pool_close forgets every
 * region with no write in flight.  After a crash, cw_pool_open
 * marks every copy of a dirty region's blocks but the first in sync out of
 * sync, so a resync covers only those regions.  Partitions with one copy
 * have no record (begin and end do nothing). */
int cw_part_intent_begin(struct cw_part *part, uint64_t offset, uint64_t length);
void cw_part_intent_end(struct cw_part *part, uint64_t offset, uint64_t length);
int cw_pool_intent_sweep(struct cw_pool *pool, uint64_t *ret_cleared);
/* Regions of the partition recorded dirty now. */
uint64_t cw_part_intent_dirty(const struct cw_part *part);

uint64_t cw_part_size_bytes(const struct cw_part *part);
uint64_t cw_part_nblocks(const struct cw_part *part);
uint32_t cw_part_block_size(const struct cw_part *part);

/* Whether the partition's block at offset holds data: 1 (written), or 0
 * (a hole: never written since it was given to the partition, or
 * deallocated since; it reads as zeros whatever its disk holds).
 * ret_length gets how many bytes from offset, at most length (0: to the
 * block's end), are in the same state.  -ERANGE beyond the end. */
int cw_part_allocated(const struct cw_part *part, uint64_t offset, uint64_t length,
		      uint64_t *ret_length);

/* The bytes of blocks [first_block, first_block + nblocks) that hold
 * data (whole blocks: a block written anywhere counts whole), from the
 * same bits as cw_part_allocated(): what a shrink or a delete of those
 * blocks would lose.  -ERANGE when the range passes the end. */
int cw_part_data_bytes(const struct cw_part *part, uint64_t first_block, uint64_t nblocks,
		       uint64_t *ret_bytes);

/* ---- holes (management) ---- */

/* Blocks [first_block, first_block + nblocks) of part become written
 * (allocated true) or holes. */
struct cw_alloc_change {
	struct cw_part *part;
	uint64_t first_block;
	uint64_t nblocks;
	bool allocated;
};

/* Records changes[0..n) in one transaction, then makes them visible to
 * cw_part_allocated(); -ERANGE (nothing changed) when a range passes its
 * partition's end.  The caller orders it with the data: a block is
 * zeroed before it is marked written, and marked a hole before its space
 * is given back (layout/holes.c says why). */
int cw_part_set_allocated(struct cw_pool *pool, const struct cw_alloc_change *changes,
			  size_t n);

/* ---- moves (online reorganisation, tiering) ---- */

struct cw_move;

struct cw_move_opts {
	enum cw_placement placement;	/* over the target disks */
	enum cw_tier_pref tier;		/* strict: only disks of this tier */
	enum cw_zone_pref zone;
	const uint32_t *disk_ids;	/* NULL: any disk (of the tier) */
	size_t ndisks;
};

/* One block to copy: from src to dst, block_size bytes each. */
struct cw_move_step {
	uint64_t block;			/* logical block of the partition */
	uint32_t src_disk_id;
	uint64_t src_offset;		/* physical bytes */
	uint32_t dst_disk_id;
	uint64_t dst_offset;
	uint32_t copy;			/* which copy of the block (0 .. copies - 1) */
};

/* Plans moving blocks [first_block, first_block + nblocks) of part to the
 * disks chosen by opts: blocks already on an acceptable disk stay, the
 * others get target blocks, reserved until commit or abort (and free again
 * if the process dies).  The mapping does not change yet. */
int cw_move_plan(struct cw_part *part, uint64_t first_block, uint64_t nblocks,
		 const struct cw_move_opts *opts, struct cw_move **ret_move);
size_t cw_move_nsteps(const struct cw_move *move);
int cw_move_step(const struct cw_move *move, size_t i, struct cw_move_step *ret);

/* After the caller copied every step's data: switches the range to the
 * targets in one transaction and one atomic store per block, and frees the
 * old blocks.  On success move is freed; on failure it stays valid (retry
 * or abort); -ESTALE if the partition changed under the plan (another move
 * commit or a shrink of the same partition since the plan), then abort it.
 *
 * What the caller owns: writes that reach a block while it is being copied
 * must reach its target too (or the block is copied again), and I/O mapped
 * to an old location before the commit must finish before the pool
 * allocates again, since the old blocks are free when this returns. */
int cw_move_commit(struct cw_move *move);
/* Drops the plan and frees its target blocks (NULL-safe). */
void cw_move_abort(struct cw_move *move);

#ifdef __cplusplus
}
#endif
#endif
