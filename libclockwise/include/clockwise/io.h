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

#include <sys/types.h>

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
	/* Chosen for a disk named rbd:POOL/IMAGE (cw_io_open): librbd's
	 * asynchronous calls on the image the descriptor stands for. */
	CW_IO_RBD = 3,
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
	/* Set by the emulating engine as it hands the request back: how long
	 * the emulated disk took, from the request's arrival to when the
	 * disk finished it (the host's lag after that, waking or its file's
	 * own I/O, left out); 0 from the other engines. */
	int64_t disk_ns;
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

/* Whether e's completions can be waited for apart from reaping them
 * (cw_io_wait, cw_io_kick): an engine whose requests finish on threads of
 * their own (CW_IO_RBD) can. */
bool cw_io_can_wait(const struct cw_io_engine *e);

/* Sleeps until a request of e may have finished since the last reap, a
 * cw_io_kick() came (since the last wait), or timeout_ns passed (< 0: no
 * limit); reaps nothing.  Unlike the other calls on an engine, it may run
 * while one other thread submits and reaps on e, so that the thread that
 * owns e can wait without holding what guards it.  -EOPNOTSUPP where
 * cw_io_can_wait() is false. */
int cw_io_wait(struct cw_io_engine *e, int64_t timeout_ns);

/* Ends the cw_io_wait() in progress on e, or else the next one, at once;
 * any thread. */
void cw_io_kick(struct cw_io_engine *e);

/* Convenience for one synchronous request through the engine (calibration,
 * labels): submits it, waits for it, returns res. */
int64_t cw_io_sync(struct cw_io_engine *e, int fd, enum cw_io_op op, void *buf,
		   size_t len, uint64_t off);

/* Opens path for direct I/O (O_DIRECT|O_CLOEXEC, O_RDWR or O_RDONLY);
 * on a file system that refuses O_DIRECT (tmpfs) it falls back to buffered
 * I/O and sets *ret_direct to false.  Returns the fd or a negative errno.
 *
 * A path rbd:POOL/IMAGE[?conf=FILE&id=NAME] names a Ceph RBD image: the
 * cluster is reached with librados (FILE, or the default configuration
 * search, as client NAME, or admin) and the descriptor returned stands
 * for the image: the cw_io_* calls below and the engines
 * (CW_IO_RBD, see cw_io_kind_for_fd) take it, plain system calls on it
 * fail.  Close it with cw_io_close.  -EINVAL for a malformed name,
 * -EPROTONOSUPPORT when libclockwise was built without librbd, -ELIBACC
 * when librados2 and librbd1 are not installed (they are loaded at the
 * first image, not linked), -ELIBBAD when they are too old, else what
 * librados or librbd answered (-ETIMEDOUT: no cluster; -ENOENT: no such
 * pool or image). */
int cw_io_open(const char *path, bool writable, bool *ret_direct);

/* Like cw_io_open without O_DIRECT: flags are open(2)'s (O_CLOEXEC is
 * added); for an rbd: path only O_ACCMODE counts. */
int cw_io_open_dev(const char *path, int flags);

/* Whether path names an RBD image (starts with "rbd:"), and whether this
 * build can open one (built with librbd, and librados2 and librbd1
 * installed: the first call loads them). */
bool cw_io_path_is_rbd(const char *path);
bool cw_io_rbd_supported(void);

/* An image's exclusive lock, which librbd takes for the first write, is
 * its owner's until that client closes the image; a client that died
 * holds it until the cluster drops its watch (30 s), and a write of
 * another client waits that long.  cw_io_rbd_address writes the address
 * the cluster knows this process by, for fd's cluster (the owner's name
 * of a lock this process takes: "127.0.0.1:0/2849347118"), to buf.
 * cw_io_rbd_reclaim breaks fd's image's exclusive lock when owner holds
 * it, after the cluster blocklisted owner (so that it cannot write any
 * more, were it alive): call it only with the address of a client known
 * dead.  1: broken; 0: owner does not hold it; -EBADF: fd is no image;
 * else what librbd answered. */
int cw_io_rbd_address(int fd, char *buf, size_t len);
int cw_io_rbd_reclaim(int fd, const char *owner);

/* Closes a descriptor from cw_io_open or cw_io_open_dev (NULL-safe for
 * fd < 0), and any other descriptor with close(2).  No request on it may
 * be in flight. */
int cw_io_close(int fd);

/* The size of what fd opens (a block device, a regular file, an image). */
int cw_io_size(int fd, uint64_t *ret_bytes);

/* What fd opens, as two numbers equal for two descriptors of the same
 * device, file or image (st_dev and st_ino, or st_rdev for a block
 * device; an image's cluster and id). */
int cw_io_identity(int fd, uint64_t *ret_dev, uint64_t *ret_ino);

/* Synchronous positional I/O for labels and the like (pread, pwrite,
 * fdatasync on a file; the image's on an rbd: descriptor): the bytes
 * moved or -errno. */
ssize_t cw_io_pread(int fd, void *buf, size_t len, uint64_t off);
ssize_t cw_io_pwrite(int fd, const void *buf, size_t len, uint64_t off);
int cw_io_fdatasync(int fd);

/* Gives [off, off + len) back to the device so that it reads zeros:
 * fallocate(PUNCH_HOLE|KEEP_SIZE) on a file, write-zeroes on an image.
 * -EOPNOTSUPP (or what the device said) where it cannot. */
int cw_io_punch(int fd, uint64_t off, uint64_t len);

/* The alignment buffers, offsets and lengths need on fd (>= 512). */
int cw_io_alignment(int fd, size_t *ret_align);

/* Aligned buffer allocation (posix_memalign); free with free(). */
void *cw_io_alloc(size_t len);

#ifdef __cplusplus
}
#endif
#endif
