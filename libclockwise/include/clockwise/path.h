/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwise/path.h — the request split of the data path (one core: the
 * daemon and the simulator call the same function): a request on a
 * partition's bytes becomes the pieces the disks serve.  One pass over the extent answers, run by run: holes (a
 * READ of one reads zeros without I/O), the block map, the SSD cache's
 * route, the destinations of blocks being moved (a write goes to both
 * copies), the class (real-time inside a reservation's range and span on
 * the disks it books, best effort otherwise) and the best-effort cut (a
 * BE piece is at most its disk's piece, so that it fits in less slack).
 *
 * Pure: the layout questions go through struct cw_path_ops, the clock
 * comes in as the request's arrival time, the pieces go out through a
 * callback.  clockwised books them in its lanes, cwsim in its simulated
 * disks; both call cw_path_split(), so they split the same way.
 */
#ifndef CLOCKWISE_PATH_H
#define CLOCKWISE_PATH_H

#include <stdbool.h>
#include <stdint.h>

#include <clockwise/admit-state.h>
#include <clockwise/cache.h>
#include <clockwise/io.h>
#include <clockwise/layout.h>

#ifdef __cplusplus
extern "C" {
#endif

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
};

/* A real partition's answers (cw_part_allocated, cw_part_map,
 * cw_cache_route, cw_part_write_mirrors), lay a struct cw_path_part. */
struct cw_path_part {
	struct cw_part *part;
	struct cw_cache *cache;	/* read once inside the I/O gate; NULL: none */
	int (*disk)(void *arg, uint32_t disk_id, struct cw_path_disk *ret);
	void *disk_arg;
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
};

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

#ifdef __cplusplus
}
#endif

#endif
