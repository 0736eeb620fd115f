/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The io module's private header: the operations struct each back end
 * fills in, the engine head every back end embeds first, and the
 * completion bookkeeping both back ends share.
 */
#ifndef CW_IO_INTERNAL_H
#define CW_IO_INTERNAL_H

#include <errno.h>
#include <sys/types.h>
#include <time.h>
#include <clockwise/io.h>

struct cw_io_engine;

/* A back end: just the callbacks it needs.  The front end (io.c) checks
 * arguments, keeps inflight and enforces depth; a back end never sees more
 * requests than it has room for. */
struct cw_io_ops {
	const char *name;
	/* Allocates the back end's engine (embedding struct cw_io_engine
	 * first) for depth requests in flight. */
	int (*engine_new)(unsigned depth, struct cw_io_engine **ret_engine);
	void (*engine_free)(struct cw_io_engine *e);
	/* Queues and submits n (<= depth - inflight) requests; returns how many
	 * the kernel took, or a negative errno when it took none. */
	int (*submit)(struct cw_io_engine *e, struct cw_io_req **reqs, unsigned n);
	/* Collects finished requests as cw_io_reap() documents; min_complete
	 * <= max, and <= inflight when deadline_ns < 0. */
	int (*reap)(struct cw_io_engine *e, unsigned min_complete, int64_t deadline_ns,
		    struct cw_io_req **ret_reqs, unsigned max);
	/* Optional, both or neither (cw_io_can_wait): sleeps until a
	 * completion or a kick, or deadline_ns (CW_IO_FOREVER or an
	 * absolute CLOCK_MONOTONIC time); touches only what a concurrent
	 * submit and reap leave to it.  kick: any thread. */
	void (*wait)(struct cw_io_engine *e, int64_t deadline_ns);
	void (*kick)(struct cw_io_engine *e);
};

struct cw_io_engine {
	const struct cw_io_ops *ops;
	unsigned depth;
	unsigned inflight;	/* accepted by submit, not yet returned by reap */
};

extern const struct cw_io_ops cw_io_uring_ops;
extern const struct cw_io_ops cw_io_aio_ops;
extern const struct cw_io_ops cw_io_mem_ops;
extern const struct cw_io_ops cw_io_rbd_ops;

/* ---- dev.c: kinds of device other than a file or a block device ---- */

/* A kind of device behind stand-in descriptors of its own. */
struct io_dev_ops {
	const char *name;
	bool (*claims_path)(const char *path);	/* a path of this kind */
	bool (*owns)(int fd);			/* one of its descriptors */
	/* the stand-in descriptor, or -errno */
	int (*open)(const char *path, bool writable);
	int (*close)(int fd);
	int (*size)(int fd, uint64_t *ret_bytes);
	int (*identity)(int fd, uint64_t *ret_dev, uint64_t *ret_ino);
	/* a synchronous read, write (both return the bytes moved) or flush */
	ssize_t (*sync)(int fd, enum cw_io_op op, void *buf, size_t len, uint64_t off);
	int (*punch)(int fd, uint64_t off, uint64_t len);
	enum cw_io_kind engine;			/* the engine that serves it */
};

/* The kind fd is a stand-in of, or that path names; NULL: a file or a
 * block device. */
const struct io_dev_ops *io_dev_of(int fd);
const struct io_dev_ops *io_dev_for_path(const char *path);

extern const struct io_dev_ops io_dev_rbd;

/* ---- rbd.c: cluster images behind stand-in descriptors ---- */

struct io_rbd_spec {
	char pool[128];
	char image[128];
	char conf[4096];	/* "": librados's default search */
	char id[64];		/* client id without "client."; "": admin */
};

/* Parses "rbd:POOL/IMAGE[?conf=FILE&id=NAME]": -EINVAL when it does not. */
int io_rbd_spec_parse(const char *path, struct io_rbd_spec *ret_spec);
/* Connects (or shares a connection) and opens the image; returns the
 * stand-in descriptor.  -EPROTONOSUPPORT when built without librbd. */
int io_rbd_open(const char *path, bool writable);
bool io_rbd_is(int fd);
int io_rbd_close(int fd);		/* -ENOENT: not a stand-in */
int io_rbd_size(int fd, uint64_t *ret_bytes);
int io_rbd_identity(int fd, uint64_t *ret_dev, uint64_t *ret_ino);
/* A synchronous read, write (both return the bytes moved) or flush. */
ssize_t io_rbd_sync(int fd, enum cw_io_op op, void *buf, size_t len, uint64_t off);
int io_rbd_punch(int fd, uint64_t off, uint64_t len);

/*
 * Progress of a request lives in req->priv_: the bytes done so far in the
 * low 48 bits, the transient-error retries in the high 16.  A request whose
 * kernel result leaves work to do is resubmitted for the remainder:
 * the position of that remainder is (buf, off, len) advanced by
 * cw_io_done_bytes().
 */
#define CW_IO_DONE_MASK ((UINT64_C(1) << 48) - 1)
#define CW_IO_RETRY_SHIFT 48
/* -EAGAIN/-EINTR are retried this many times before they are reported. */
#define CW_IO_MAX_RETRIES 16

static inline uint64_t cw_io_done_bytes(const struct cw_io_req *r)
{
	return r->priv_ & CW_IO_DONE_MASK;
}

/* One kernel request moves at most this much, so a length always fits the
 * 32-bit io_uring field; longer requests continue as partial completions. */
#define CW_IO_MAX_CHUNK (UINT64_C(1) << 30)

/* Where the not yet done part of r starts and how long the next kernel
 * request for it is. */
static inline size_t cw_io_req_next(const struct cw_io_req *r, void **ret_buf, uint64_t *ret_off)
{
	uint64_t done = cw_io_done_bytes(r), left = r->len - done;

	*ret_buf = (char *)r->buf + done;
	*ret_off = r->off + done;
	return left < CW_IO_MAX_CHUNK ? left : CW_IO_MAX_CHUNK;
}

/* READ and WRITE move bytes through buf; FSYNC and PUNCH have none. */
static inline bool cw_io_op_moves_data(enum cw_io_op op)
{
	return op == CW_IO_READ || op == CW_IO_WRITE;
}

/* A PUNCH done at once by the calling thread (the back ends whose kernel
 * interface has no fallocate): 0 or -errno, for cw_io_req_account. */
int cw_io_punch_now(const struct cw_io_req *r);

static inline void cw_io_req_start(struct cw_io_req *r)
{
	r->priv_ = 0;
	r->res = 0;
	r->disk_ns = 0;
}

/* Folds one kernel result into r.  Returns true when r is finished (r->res
 * set), false when its remainder must be submitted again. */
bool cw_io_req_account(struct cw_io_req *r, int64_t res);

/* Requests a back end finished inside submit (the memory engine's, or
 * ones libaio refused), waiting for reap in submission order.  q has the
 * engine's depth entries: with at most depth requests in flight it never
 * overflows. */
struct cw_io_fifo {
	struct cw_io_req **q;
	unsigned head, n;
};

static inline void cw_io_fifo_push(struct cw_io_fifo *f, unsigned depth, struct cw_io_req *r)
{
	f->q[(f->head + f->n) % depth] = r;
	f->n++;
}

/* Moves up to max requests to out; returns how many. */
static inline unsigned cw_io_fifo_pop(struct cw_io_fifo *f, unsigned depth,
				      struct cw_io_req **out, unsigned max)
{
	unsigned got = 0;

	while (f->n > 0 && got < max) {
		out[got++] = f->q[f->head];
		f->head = (f->head + 1) % depth;
		f->n--;
	}
	return got;
}

/* Back ends get the reap timeout as a deadline: CW_IO_FOREVER, CW_IO_POLL
 * (never wait, never read the clock) or an absolute CLOCK_MONOTONIC time. */
#define CW_IO_FOREVER INT64_C(-1)
#define CW_IO_POLL INT64_C(0)

/* The relative wait left until deadline_ns as a timespec; false when the
 * deadline has passed. */
bool cw_io_remaining(int64_t deadline_ns, struct timespec *ret_ts);

#endif
