/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A ublk device for an export (ublk.h): the control commands on
 * /dev/ublk-control, and one thread per queue that fetches the kernel's
 * requests, hands them to the export's back end and commits their
 * results.
 *
 * The protocol, as the kernel's Documentation/block/ublk.rst describes
 * it: ADD_DEV allocates /dev/ublkcN; SET_PARAMS gives the disk's sizes;
 * every tag of every queue then sends FETCH_REQ (with its buffer's
 * address) on /dev/ublkcN, from the queue's own thread, and START_DEV
 * (which waits for them) adds /dev/ublkbN.  A FETCH_REQ completes when the
 * kernel has a request for its tag (its descriptor is in the queue's
 * mmap'ed array; a write's data already in the tag's buffer); the server
 * answers with COMMIT_AND_FETCH_REQ, result and next fetch in one.  When
 * the device stops, the fetches outstanding end with UBLK_IO_RES_ABORT,
 * or with the ring's exit.
 *
 * Copies: one per request, the kernel's, between the bio's pages and the
 * tag's buffer, which the back end reads into and writes from with
 * O_DIRECT.  UBLK_F_USER_COPY (6.5) moves the same copy into the server's
 * pread/pwrite on /dev/ublkcN and so saves nothing here; zero copy
 * (6.15's UBLK_F_AUTO_BUF_REG with registered buffers) is not in 6.12's
 * uapi as this daemon would need it.  So the plain path is the path.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <signal.h>

#include <linux/ublk_cmd.h>

/* Newer than Debian 12's linux-libc-dev (6.1): unprivileged devices came
 * in 6.2 (the uapi's value). */
#ifndef UBLK_F_UNPRIVILEGED_DEV
#define UBLK_F_UNPRIVILEGED_DEV (1ULL << 5)
#endif

#include "daemon/thread-name.h"
#include "daemon/ublk/ublk.h"

#define CONTROL_PATH "/dev/ublk-control"
#define DEFAULT_DEPTH 64u
#define DEFAULT_MAX_REQUEST (512u << 10)
/* The largest buffer per tag the kernel takes (UBLK_MAX_IO_BUF_BYTES in
 * its driver; not in the uapi of 6.1). */
#define MAX_IO_BUF_BYTES (1u << 20)
/* A queue's descriptor array sits in /dev/ublkcN's mapping at this
 * stride per queue: UBLK_MAX_QUEUE_DEPTH descriptors, rounded to pages
 * (the driver's ublk_max_cmd_buf_size()). */
#define IODESC_STRIDE(page) \
	((UBLK_MAX_QUEUE_DEPTH * sizeof(struct ublksrv_io_desc) + (page) - 1) / (page) * (page))
/* An unprivileged device's commands start with this many bytes of its
 * /dev/ublkcN path (NUL-padded). */
#define CDEV_PATH_LEN 32
/* 6.2 on: GET_DEV_INFO with the node's path, for unprivileged devices. */
#ifndef UBLK_CMD_GET_DEV_INFO2
#define UBLK_CMD_GET_DEV_INFO2 0x12
#endif
/* The eventfd's read in a queue's ring: not a tag. */
#define WAKE_TAG UINT64_MAX
/* /dev/ublkcN appears through devtmpfs (or udev) after ADD_DEV. */
#define NODE_WAIT_NS (INT64_C(5) * 1000000000)

struct uq;

/* One tag: the request the kernel gave it, as the back end sees it. */
struct utag {
	struct nbdsrv_io io;		/* first: nbdsrv_io_complete's io */
	struct uq *q;
	unsigned tag;
	int res;
	struct utag *next;		/* on the queue's done stack */
	void *buf;
};

struct uq {
	struct ublk_dev *dev;
	unsigned id;
	struct io_uring ring;
	bool ring_ok;
	int efd;
	uint64_t efd_val;
	const struct ublksrv_io_desc *iods;
	size_t iods_len;
	struct utag *tags;
	/* Completed by the back end, to commit (a Treiber stack: any
	 * thread pushes, the queue's thread takes all). */
	_Atomic(struct utag *) done;
	atomic_bool sleeping;
	atomic_bool stopping;
	unsigned fetching;		/* tags whose command is with the kernel */
	unsigned serving;		/* tags with the back end */
	void *conn_data;		/* the back end's word for this queue */
	pthread_t thread;
	bool started;
};

struct ublk_dev {
	struct nbdsrv_export exp;
	int id;
	int ctrl_fd, cdev_fd;
	unsigned nq, depth;
	uint32_t max_request;
	void *bufs;
	size_t bufs_len;
	struct uq *q;
	bool added, live;
	bool recovered;
	/* Made by a daemon without root (UBLK_F_UNPRIVILEGED_DEV): only
	 * the daemon's user may open it, whatever its node says. */
	bool unpriv;
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A control command on /dev/ublk-control (a ring of 128-byte entries:
 * struct ublksrv_ctrl_cmd is 32 bytes).  The opcodes are the plain ones
 * of 6.1's uapi, which 6.12 still takes (CONFIG_BLKDEV_UBLK_LEGACY_OPCODES,
 * on in Debian's kernels).  Returns the command's result. */
static int ctrl_cmd(int fd, unsigned op, struct ublksrv_ctrl_cmd *cmd)
{
	struct io_uring ring;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	int r;

	r = io_uring_queue_init(2, &ring, IORING_SETUP_SQE128);
	if (r < 0)
		return r;
	sqe = io_uring_get_sqe(&ring);
	if (!sqe) {
		io_uring_queue_exit(&ring);
		return -EBUSY;
	}
	memset(sqe, 0, 128);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	sqe->cmd_op = op;
	memcpy(sqe->cmd, cmd, sizeof(*cmd));
	r = io_uring_submit_and_wait(&ring, 1);
	if (r >= 0) {
		r = io_uring_wait_cqe(&ring, &cqe);
		if (r == 0) {
			r = cqe->res;
			io_uring_cqe_seen(&ring, cqe);
		}
	}
	io_uring_queue_exit(&ring);
	return r;
}

/* A command for device d.  An unprivileged device's commands carry the
 * path of its /dev/ublkcN first in their buffer (the kernel checks the
 * caller's access to that node: 6.12's ublksrv_ctrl_cmd.dev_path_len,
 * the low 16 bits of 6.1's data[1]); the payload follows it, and what
 * the kernel writes there is copied back. */
static int dev_cmd(struct ublk_dev *d, unsigned op, void *buf, uint16_t len, uint64_t data0)
{
	struct ublksrv_ctrl_cmd c = {
		.dev_id = (uint32_t)d->id,
		.queue_id = (uint16_t)-1,
		.len = len,
		.addr = (uint64_t)(uintptr_t)buf,
		.data = { data0 },
	};
	uint8_t with_path[CDEV_PATH_LEN + 512];
	int r;

	if (!d->unpriv || op == UBLK_CMD_ADD_DEV)
		return ctrl_cmd(d->ctrl_fd, op, &c);
	if (len > sizeof(with_path) - CDEV_PATH_LEN)
		return -EINVAL;
	memset(with_path, 0, CDEV_PATH_LEN);
	snprintf((char *)with_path, CDEV_PATH_LEN, "/dev/ublkc%d", d->id);
	if (len)
		memcpy(with_path + CDEV_PATH_LEN, buf, len);
	c.len = (uint16_t)(CDEV_PATH_LEN + len);
	c.addr = (uint64_t)(uintptr_t)with_path;
	c.data[1] = CDEV_PATH_LEN;
	r = ctrl_cmd(d->ctrl_fd, op, &c);
	if (r >= 0 && len)
		memcpy(buf, with_path + CDEV_PATH_LEN, len);
	return r;
}

int ublk_available(char *err, size_t errlen)
{
	int fd = open(CONTROL_PATH, O_RDWR | O_CLOEXEC);

	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (errno == ENOENT || errno == ENODEV || errno == ENXIO) {
		snprintf(err, errlen, "no ublk in this kernel: %s is missing (the kernel's "
			 "ublk_drv module, CONFIG_BLK_DEV_UBLK, Linux 5.19 on: modprobe ublk_drv; "
			 "Debian 12's own 6.1 kernel lacks it, bookworm-backports' has it)",
			 CONTROL_PATH);
		return -EOPNOTSUPP;
	}
	snprintf(err, errlen, "cannot open %s: %s (only root may create ublk devices, or a "
		 "user the node is opened to, on a kernel with unprivileged ublk devices: "
		 "Linux 6.2 on)", CONTROL_PATH, strerror(errno));
	return -errno;
}

/* ---- a queue ---- */

/* The queue whose thread this is: a request it completes itself (a
 * back end that served it at once, or a lane it dispatched for) needs no
 * wake-up, as the thread looks at its done stack before it sleeps. */
static __thread struct uq *tls_queue;

/* After a push to q->done: the first completer to find the thread asleep
 * (it said so before its last look at the stack) wakes it, the others
 * need not, as it drains the whole stack once awake. */
static void wake(struct uq *q)
{
	uint64_t one = 1;

	if (atomic_exchange_explicit(&q->sleeping, false, memory_order_seq_cst))
		(void)!write(q->efd, &one, sizeof(one));
}

/* nbdsrv_io_complete() of a tag's request, on any thread. */
static void tag_complete(struct nbdsrv_io *io, int err)
{
	struct utag *t = (struct utag *)io;
	struct uq *q = t->q;
	struct utag *old = atomic_load_explicit(&q->done, memory_order_relaxed);

	t->res = err;
	do
		t->next = old;
	while (!atomic_compare_exchange_weak_explicit(&q->done, &old, t, memory_order_seq_cst,
						      memory_order_relaxed));
	if (tls_queue != q)
		wake(q);
}

static void io_cmd(struct uq *q, struct utag *t, unsigned op, int result)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	struct ublksrv_io_cmd *c;

	/* The ring has a place for every tag and the wake-up's read. */
	if (!sqe)
		abort();
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = q->dev->cdev_fd;
	sqe->cmd_op = op;
	sqe->user_data = t->tag;
	c = (struct ublksrv_io_cmd *)sqe->cmd;
	c->q_id = (uint16_t)q->id;
	c->tag = (uint16_t)t->tag;
	c->result = result;
	c->addr = (uint64_t)(uintptr_t)t->buf;
	q->fetching++;
}

static void arm_wake(struct uq *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

	if (!sqe)
		abort();
	io_uring_prep_read(sqe, q->efd, &q->efd_val, sizeof(q->efd_val), 0);
	sqe->user_data = WAKE_TAG;
}

/* The kernel's request for tag t, to the back end. */
static void serve(struct uq *q, struct utag *t)
{
	const struct ublksrv_io_desc *iod = &q->iods[t->tag];
	const struct nbdsrv_backend_ops *ops = q->dev->exp.ops;
	void *b = q->dev->exp.backend;
	uint32_t flags = ublksrv_get_flags(iod);
	uint64_t len = (uint64_t)iod->nr_sectors << 9;
	int r;

	memset(&t->io, 0, sizeof(t->io));
	t->io.offset = iod->start_sector << 9;
	t->io.length = (uint32_t)len;
	t->io.fua = flags & UBLK_IO_F_FUA;
	t->io.buf = t->buf;
	t->io.reader_rd_fd = -1;
	t->io.conn_data = &q->conn_data;
	t->io.complete = tag_complete;
	q->serving++;
	switch (ublksrv_get_op(iod)) {
	case UBLK_IO_OP_READ:
		t->io.op = NBDSRV_IO_READ;
		r = len > q->dev->max_request ? -EINVAL : ops->pread(b, &t->io);
		break;
	case UBLK_IO_OP_WRITE:
		t->io.op = NBDSRV_IO_WRITE;
		r = q->dev->exp.read_only ? -EROFS :
		    len > q->dev->max_request ? -EINVAL : ops->pwrite(b, &t->io);
		break;
	case UBLK_IO_OP_FLUSH:
		t->io.op = NBDSRV_IO_FLUSH;
		t->io.length = 0;
		r = ops->flush(b, &t->io);
		break;
	case UBLK_IO_OP_DISCARD:
		t->io.op = NBDSRV_IO_TRIM;
		r = ops->trim ? ops->trim(b, &t->io) : -EOPNOTSUPP;
		break;
	case UBLK_IO_OP_WRITE_ZEROES:
		t->io.op = NBDSRV_IO_ZERO;
		t->io.may_trim = !(flags & UBLK_IO_F_NOUNMAP);
		r = ops->zero ? ops->zero(b, &t->io) : -EOPNOTSUPP;
		break;
	default:
		r = -EOPNOTSUPP;
		break;
	}
	if (r < 0)
		tag_complete(&t->io, r);
}

/* Commits what the back end completed, each with its next fetch. */
static void commit_done(struct uq *q)
{
	struct utag *t = atomic_exchange_explicit(&q->done, NULL, memory_order_seq_cst);

	while (t) {
		struct utag *next = t->next;
		int res = t->res;

		if (res == 0)
			res = t->io.op == NBDSRV_IO_FLUSH ? 0 : (int)t->io.length;
		q->serving--;
		io_cmd(q, t, UBLK_IO_COMMIT_AND_FETCH_REQ, res);
		t = next;
	}
}

/* Runs the queue's thread on the CPUs whose requests the kernel sends
 * to the queue (blk-mq's map, GET_QUEUE_AFFINITY): the request, its
 * completion and the thread meet on one CPU's caches.  Best effort: a
 * thread left unpinned serves as well, if further from its requests. */
static void pin(struct uq *q)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	if (dev_cmd(q->dev, UBLK_CMD_GET_QUEUE_AFFINITY, &set, sizeof(set), q->id) >= 0 &&
	    CPU_COUNT(&set) > 0)
		(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *queue_main(void *arg)
{
	struct uq *q = arg;
	const struct nbdsrv_backend_ops *ops = q->dev->exp.ops;
	int prio = ops->rt_priority ? ops->rt_priority(q->dev->exp.backend) : 0;

	tls_queue = q;
	pin(q);
	/* An export bound to a reservation: its queue books the stream's
	 * requests, at the real-time priority an NBD connection's reader
	 * of it would have (the back end set it, or noted that it could
	 * not). */
	if (prio > 0) {
		struct sched_param sp = { .sched_priority = prio };

		(void)pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
	}
	for (unsigned i = 0; i < q->dev->depth; i++)
		io_cmd(q, &q->tags[i], UBLK_IO_FETCH_REQ, -1);
	arm_wake(q);
	for (;;) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;
		int r;

		commit_done(q);
		/* Stopped (STOP_DEV returned: no request is left in the
		 * kernel) and nothing with the back end: the ring's exit
		 * cancels the fetches outstanding. */
		if (atomic_load(&q->stopping) && q->serving == 0)
			break;
		if (q->fetching == 0 && q->serving == 0)
			break;		/* every fetch aborted: the device is gone */
		atomic_store_explicit(&q->sleeping, true, memory_order_seq_cst);
		if (atomic_load_explicit(&q->done, memory_order_seq_cst) ||
		    (atomic_load(&q->stopping) && q->serving == 0)) {
			atomic_store_explicit(&q->sleeping, false, memory_order_relaxed);
			continue;
		}
		r = io_uring_submit_and_wait(&q->ring, 1);
		atomic_store_explicit(&q->sleeping, false, memory_order_relaxed);
		if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY)
			break;
		io_uring_for_each_cqe(&q->ring, head, cqe) {
			n++;
			if (cqe->user_data == WAKE_TAG) {
				arm_wake(q);
				continue;
			}
			q->fetching--;
			if (cqe->res == UBLK_IO_RES_OK)
				serve(q, &q->tags[cqe->user_data]);
			/* UBLK_IO_RES_ABORT (the device stops) or an error:
			 * the tag is the kernel's no more. */
		}
		io_uring_cq_advance(&q->ring, n);
		if (ops->unplug)
			ops->unplug(q->dev->exp.backend);
	}
	return NULL;
}

static int queue_setup(struct ublk_dev *d, struct uq *q, unsigned id)
{
	long page = sysconf(_SC_PAGESIZE);
	int r;

	q->dev = d;
	q->id = id;
	q->efd = eventfd(0, EFD_CLOEXEC);
	if (q->efd < 0)
		return -errno;
	r = io_uring_queue_init(d->depth + 1, &q->ring, 0);
	if (r < 0)
		return r;
	q->ring_ok = true;
	q->iods_len = ((d->depth * sizeof(struct ublksrv_io_desc)) + (size_t)page - 1) /
		      (size_t)page * (size_t)page;
	q->iods = mmap(NULL, q->iods_len, PROT_READ, MAP_SHARED | MAP_POPULATE, d->cdev_fd,
		       (off_t)(UBLKSRV_CMD_BUF_OFFSET + id * IODESC_STRIDE((size_t)page)));
	if (q->iods == MAP_FAILED) {
		q->iods = NULL;
		return -errno;
	}
	q->tags = calloc(d->depth, sizeof(*q->tags));
	if (!q->tags)
		return -ENOMEM;
	for (unsigned i = 0; i < d->depth; i++) {
		q->tags[i].q = q;
		q->tags[i].tag = i;
		q->tags[i].buf = (char *)d->bufs + ((size_t)id * d->depth + i) * d->max_request;
	}
	return 0;
}

static void queue_free(struct uq *q)
{
	if (q->ring_ok)
		io_uring_queue_exit(&q->ring);
	if (q->iods)
		munmap((void *)q->iods, q->iods_len);
	if (q->efd >= 0)
		close(q->efd);
	free(q->tags);
}

/* ---- the device ---- */

static unsigned shift_of(uint32_t v)
{
	unsigned s = 0;

	while ((1u << (s + 1)) <= v)
		s++;
	return s;
}

static int set_params(struct ublk_dev *d)
{
	uint32_t lbs = d->exp.min_block > 512 ? d->exp.min_block : 512;
	uint32_t pbs = d->exp.pref_block > lbs ? d->exp.pref_block : lbs;
	struct ublk_params p = {
		.len = sizeof(p),
		.types = UBLK_PARAM_TYPE_BASIC,
		.basic = {
			.attrs = UBLK_ATTR_VOLATILE_CACHE | UBLK_ATTR_FUA |
				 (d->exp.rotational ? UBLK_ATTR_ROTATIONAL : 0) |
				 (d->exp.read_only ? UBLK_ATTR_READ_ONLY : 0),
			.logical_bs_shift = (uint8_t)shift_of(lbs),
			.physical_bs_shift = (uint8_t)shift_of(pbs),
			.io_opt_shift = (uint8_t)shift_of(pbs),
			.io_min_shift = (uint8_t)shift_of(lbs),
			.max_sectors = d->max_request >> 9,
			.dev_sectors = d->exp.size >> 9,
		},
	};

	if (d->exp.ops->trim || d->exp.ops->zero) {
		/* No data moves with these: as large as a request's length
		 * field lets them be, a whole number of blocks. */
		uint32_t most = (UINT32_MAX / lbs * lbs) >> 9;

		p.types |= UBLK_PARAM_TYPE_DISCARD;
		p.discard = (struct ublk_param_discard){
			.discard_granularity = pbs,
			.max_discard_sectors = d->exp.ops->trim ? most : 0,
			.max_write_zeroes_sectors = d->exp.ops->zero ? most : 0,
			.max_discard_segments = 1,
		};
	}
	return dev_cmd(d, UBLK_CMD_SET_PARAMS, &p, sizeof(p), 0);
}

/* /dev/ublkcN, once devtmpfs or udev made it. */
static int open_cdev(struct ublk_dev *d)
{
	char path[64];
	int64_t until = now_ns() + NODE_WAIT_NS;

	snprintf(path, sizeof(path), "/dev/ublkc%d", d->id);
	for (;;) {
		d->cdev_fd = open(path, O_RDWR | O_CLOEXEC);
		if (d->cdev_fd >= 0)
			return 0;
		/* (a device of a daemon without root: udev's rule gives
		 * the node to its owner a moment after it appears) */
		if ((errno != ENOENT && !(d->unpriv && errno == EACCES)) || now_ns() > until)
			return -errno;
		usleep(2000);
	}
}

/* The block device's owner and mode, once it is there. */
static int node_access(struct ublk_dev *d, const struct ublk_config *cfg)
{
	char path[64];
	int64_t until = now_ns() + NODE_WAIT_NS;

	if (!cfg->mode || d->unpriv)
		return 0;
	snprintf(path, sizeof(path), "/dev/ublkb%d", d->id);
	while (access(path, F_OK) < 0) {
		if (now_ns() > until)
			return -ENOENT;
		usleep(2000);
	}
	if (chown(path, cfg->owner, cfg->group) < 0 || chmod(path, cfg->mode) < 0)
		return -errno;
	return 0;
}

/* Device id, if a server that is gone left it with user recovery:
 * START_USER_RECOVERY, and d takes its sizes (0, d->recovered set).  A
 * device of ours that cannot be recovered is deleted, one that is not
 * there or is another live server's is left (0, a new one is made).
 * The old server's file of /dev/ublkcN may still be closing as its
 * process ends: -EBUSY is tried again for a while. */
static int take_back(struct ublk_dev *d, int id)
{
	struct ublksrv_ctrl_dev_info info;
	int64_t until = now_ns() + NODE_WAIT_NS;
	bool gone;
	int r;

	d->id = id;
	memset(&info, 0, sizeof(info));
	/* without root, only an unprivileged device of this user answers
	 * (one it cannot reach is not there for it) */
	r = dev_cmd(d, d->unpriv ? UBLK_CMD_GET_DEV_INFO2 : UBLK_CMD_GET_DEV_INFO, &info,
		    sizeof(info), 0);
	if (r < 0)
		return 0;	/* not there (a reboot): a new one */
	gone = info.ublksrv_pid <= 0 || (kill(info.ublksrv_pid, 0) < 0 && errno == ESRCH);
	if (!gone)
		return 0;	/* a live server's */
	if (!(info.flags & UBLK_F_USER_RECOVERY) || info.queue_depth > UBLK_MAX_QUEUE_DEPTH ||
	    info.max_io_buf_bytes > MAX_IO_BUF_BYTES || info.max_io_buf_bytes % 4096 ||
	    info.nr_hw_queues < 1 || info.nr_hw_queues > UBLK_DEV_QUEUES_MAX) {
		if (info.state == UBLK_S_DEV_LIVE)
			(void)dev_cmd(d, UBLK_CMD_STOP_DEV, NULL, 0, 0);
		(void)dev_cmd(d, UBLK_CMD_DEL_DEV, NULL, 0, 0);
		return 0;
	}
	for (;;) {
		r = dev_cmd(d, UBLK_CMD_START_USER_RECOVERY, NULL, 0, 0);
		if (r != -EBUSY || now_ns() > until)
			break;
		usleep(10000);
	}
	if (r < 0)
		return r;
	d->recovered = true;
	d->added = true;
	d->nq = info.nr_hw_queues;
	d->depth = info.queue_depth;
	d->max_request = info.max_io_buf_bytes;
	return 0;
}

/* One queue per CPU online, as blk-mq maps them, at most
 * UBLK_DEV_QUEUES_DEFAULT_MAX: each queue costs a thread. */
static unsigned default_queues(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > UBLK_DEV_QUEUES_DEFAULT_MAX ? UBLK_DEV_QUEUES_DEFAULT_MAX : (unsigned)n;
}

int ublk_dev_new(const struct nbdsrv_export *exp, const struct ublk_config *cfg,
		 struct ublk_dev **ret_dev, char *err, size_t errlen)
{
	struct ublksrv_ctrl_dev_info info;
	struct ublk_dev *d;
	const char *what = "";
	int r;

	r = ublk_available(err, errlen);
	if (r < 0)
		return r;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->exp = *exp;
	d->id = -1;
	d->cdev_fd = -1;
	d->unpriv = geteuid() != 0;
	d->nq = cfg->queues ? cfg->queues : default_queues();
	d->depth = cfg->queue_depth ? cfg->queue_depth : DEFAULT_DEPTH;
	d->max_request = cfg->max_request ? cfg->max_request : DEFAULT_MAX_REQUEST;
	if (d->depth > UBLK_MAX_QUEUE_DEPTH || d->max_request > MAX_IO_BUF_BYTES ||
	    d->max_request % 4096 || d->max_request < exp->min_block ||
	    d->nq > UBLK_DEV_QUEUES_MAX) {
		snprintf(err, errlen, "ublk: queue depth %u (1 to %u), largest request %" PRIu32
			 " bytes (4 KiB to 1 MiB, in 4 KiB steps) or queues %u (1 to %u) out of "
			 "range", d->depth, UBLK_MAX_QUEUE_DEPTH, d->max_request, d->nq,
			 UBLK_DEV_QUEUES_MAX);
		free(d);
		return -EINVAL;
	}
	d->ctrl_fd = open(CONTROL_PATH, O_RDWR | O_CLOEXEC);
	if (d->ctrl_fd < 0) {
		r = -errno;
		free(d);
		return r;
	}
	r = cfg->recover_id >= 0 ? take_back(d, cfg->recover_id) : 0;
	if (r < 0) {
		what = "recovering the device a previous server left";
		goto fail;
	}
	/* (after a recovery: the sizes the device was made with) */
	d->bufs_len = (size_t)d->nq * d->depth * d->max_request;
	d->bufs = mmap(NULL, d->bufs_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	if (d->bufs == MAP_FAILED) {
		d->bufs = NULL;
		r = -ENOMEM;
		what = "request buffers";
		goto fail;
	}
	d->q = calloc(d->nq, sizeof(*d->q));
	if (!d->q) {
		r = -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < d->nq; i++)
		d->q[i].efd = -1;

	if (!d->recovered) {
		memset(&info, 0, sizeof(info));
		info.nr_hw_queues = (uint16_t)d->nq;
		info.queue_depth = (uint16_t)d->depth;
		info.max_io_buf_bytes = d->max_request;
		info.dev_id = (uint32_t)-1;
		info.flags = UBLK_F_USER_RECOVERY | UBLK_F_USER_RECOVERY_REISSUE |
			     (d->unpriv ? UBLK_F_UNPRIVILEGED_DEV : 0);
		d->id = -1;
		r = dev_cmd(d, UBLK_CMD_ADD_DEV, &info, sizeof(info), 0);
		if (r < 0) {
			what = d->unpriv && (r == -EPERM || r == -EINVAL || r == -EACCES) ?
			       "ADD_DEV without root (this kernel makes unprivileged ublk devices "
			       "from Linux 6.2 on, up to ublk_drv's ublks_max)" : "ADD_DEV";
			goto fail;
		}
		d->id = (int)info.dev_id;
		d->added = true;
	}
	/* (before SET_PARAMS: without root, every command needs the node
	 * that udev gives the daemon's user a moment after ADD_DEV) */
	r = open_cdev(d);
	if (r < 0) {
		what = "opening /dev/ublkcN";
		goto fail;
	}
	if (!d->recovered) {
		r = set_params(d);
		if (r < 0) {
			what = "SET_PARAMS";
			goto fail;
		}
	}
	for (unsigned i = 0; i < d->nq; i++) {
		r = queue_setup(d, &d->q[i], i);
		if (r < 0) {
			what = "setting up a queue";
			goto fail;
		}
	}
	for (unsigned i = 0; i < d->nq; i++) {
		r = -pthread_create(&d->q[i].thread, NULL, queue_main, &d->q[i]);
		if (r < 0) {
			what = "starting a queue's thread";
			goto fail;
		}
		d->q[i].started = true;
		thread_name(d->q[i].thread, "cw-ublk");
	}
	/* Waits for every tag's FETCH_REQ; after a recovery the kernel
	 * then hands the queued requests again. */
	r = dev_cmd(d, d->recovered ? UBLK_CMD_END_USER_RECOVERY : UBLK_CMD_START_DEV, NULL, 0,
		    (uint64_t)getpid());
	if (r < 0) {
		what = d->recovered ? "END_USER_RECOVERY" : "START_DEV";
		goto fail;
	}
	d->live = true;
	r = node_access(d, cfg);
	if (r < 0) {
		what = "setting /dev/ublkbN's owner and mode";
		goto fail;
	}
	*ret_dev = d;
	return 0;
fail:
	snprintf(err, errlen, "ublk device for export %s: %s: %s", exp->name, what, strerror(-r));
	ublk_dev_free(d);
	return r;
}

int ublk_dev_id(const struct ublk_dev *d)
{
	return d->id;
}

bool ublk_dev_busy(const struct ublk_dev *d)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/dev/ublkb%d", d->id);
	fd = open(path, O_RDONLY | O_EXCL | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return errno == EBUSY;
	close(fd);
	return false;
}

unsigned ublk_dev_queues(const struct ublk_dev *d)
{
	return d->nq;
}

bool ublk_dev_unprivileged(const struct ublk_dev *d)
{
	return d->unpriv;
}

bool ublk_dev_recovered(const struct ublk_dev *d)
{
	return d->recovered;
}

void ublk_dev_free(struct ublk_dev *d)
{
	if (!d)
		return;
	/* STOP_DEV returns once the block device is gone, its requests
	 * served by the queues, which then end. */
	if (d->live)
		(void)dev_cmd(d, UBLK_CMD_STOP_DEV, NULL, 0, 0);
	for (unsigned i = 0; d->q && i < d->nq; i++) {
		struct uq *q = &d->q[i];

		if (!q->started)
			continue;
		atomic_store(&q->stopping, true);
		atomic_store(&q->sleeping, true);
		wake(q);
		pthread_join(q->thread, NULL);
	}
	for (unsigned i = 0; d->q && i < d->nq; i++)
		queue_free(&d->q[i]);
	free(d->q);
	if (d->cdev_fd >= 0)
		close(d->cdev_fd);
	/* Once /dev/ublkcN is closed (DEL_DEV waits for that). */
	if (d->added)
		(void)dev_cmd(d, UBLK_CMD_DEL_DEV, NULL, 0, 0);
	if (d->bufs)
		munmap(d->bufs, d->bufs_len);
	close(d->ctrl_fd);
	free(d);
}
