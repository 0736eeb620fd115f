/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwise/io.h — asynchronous block I/O engines (io_uring, libaio, memory;
 * clockwise/emu.h stacks an emulated disk on any of them).
 *
 * An engine is a small queue of requests against file descriptors opened
 * with O_DIRECT (block devices or regular files).  One engine belongs to one
 * thread: the disk dispatcher that owns it submits and reaps; nothing here
 * takes a lock.  Buffers, offsets and lengths must be aligned to the
 * descriptor's logical block size (cw_io_alignment()).
 */
#ifndef CLOCKWISE_IO_H
#define CLOCKWISE_IO_H

#include <clockwise/types.h>

#ifdef __cplusplus
extern "C" {
#endif

enum cw_io_kind {
	CW_IO_URING = 0,	/* default */
	CW_IO_AIO = 1,
	/* Chosen by cw_io_kind_for_fd for files on a memory file system,
	 * not by configuration: the copy done inline in submit. */
	CW_IO_MEM = 2,
};

enum cw_io_op {
	CW_IO_READ = 0,
	CW_IO_WRITE = 1,
	CW_IO_FSYNC = 2,	/* fdatasync of fd: len and off ignored */
	/* [off, off + len) reads as zeros after it and its space goes back
	 * (fallocate PUNCH_HOLE | KEEP_SIZE; a block device zeroes it): buf
	 * ignored, res is len.  Only where the fd can punch (EOPNOTSUPP). */
	CW_IO_PUNCH = 3,
};

struct cw_io_engine;

/* One request.  The caller owns it until it comes back from cw_io_reap();
 * res is then the byte count or a negative errno. */
struct cw_io_req {
	int fd;
	enum cw_io_op op;
	void *buf;
	size_t len;
	uint64_t off;
	void *user;		/* caller's cookie, untouched */
	int64_t res;
	/* private to the engine */
	uint64_t priv_;
};

/* Parses "io_uring"/"uring" or "libaio"/"aio". */
int cw_io_kind_parse(const char *name, enum cw_io_kind *ret_kind);
const char *cw_io_kind_name(enum cw_io_kind kind);

/* The engine that serves fd best when preferred is configured.  io_uring
 * hands every request on a file system without non-blocking reads to
 * kernel worker threads, at about four times the CPU per I/O of libaio,
 * which does such reads inline.  So for io_uring this answers CW_IO_MEM
 * for a regular file on a memory file system (tmpfs, ramfs: every request
 * is a copy that never waits for a device), CW_IO_AIO for a file elsewhere
 * without non-blocking reads, and io_uring otherwise; any other preference
 * is kept. */
int cw_io_kind_for_fd(int fd, enum cw_io_kind preferred, enum cw_io_kind *ret_kind);

/* A new engine able to hold depth requests in flight. */
int cw_io_engine_new(enum cw_io_kind kind, unsigned depth, struct cw_io_engine **ret_engine);
void cw_io_engine_free(struct cw_io_engine *e);	/* NULL-safe; waits for in-flight I/O */

/* Queues and submits n requests; returns how many were accepted (may be
 * fewer than n when the queue is full) or a negative errno. */
int cw_io_submit(struct cw_io_engine *e, struct cw_io_req **reqs, unsigned n);

/* Waits until at least min_complete requests have finished or timeout_ns
 * passed (timeout_ns < 0: no limit; 0: poll), and returns up to max of
 * them in ret_reqs; returns the count or a negative errno. */
int cw_io_reap(struct cw_io_engine *e, unsigned min_complete, int64_t timeout_ns,
	       struct cw_io_req **ret_reqs, unsigned max);

/* Number of requests submitted and not yet reaped. */
unsigned cw_io_inflight(const struct cw_io_engine *e);

/* Convenience for one synchronous request through the engine (calibration,
 * labels): submits it, waits for it, returns res. */
int64_t cw_io_sync(struct cw_io_engine *e, int fd, enum cw_io_op op, void *buf,
		   size_t len, uint64_t off);

/* Opens path for direct I/O (O_DIRECT|O_CLOEXEC, O_RDWR or O_RDONLY);
 * on a file system that refuses O_DIRECT (tmpfs) it falls back to buffered
 * I/O and sets *ret_direct to false.  Returns the fd or a negative errno. */
int cw_io_open(const char *path, bool writable, bool *ret_direct);

/* The alignment buffers, offsets and lengths need on fd (>= 512). */
int cw_io_alignment(int fd, size_t *ret_align);

/* Aligned buffer allocation (posix_memalign); free with free(). */
void *cw_io_alloc(size_t len);

#ifdef __cplusplus
}
#endif
#endif
