/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The NBD front end: sockets, threads and buffers around the pure codec
 * in libclockwise/proto/nbd.c.
 *
 * Per connection:
 *   reader thread  handshake, then: read a request header, judge it
 *                  (cw_nbd_check_request), take a request slot, read any
 *                  write payload straight into the slot's aligned buffer,
 *                  call the back end.  Never waits for a completion
 *                  unless every slot is in flight.
 *   back end       completes from any thread: nbdsrv_io_complete() stores the
 *                  result and pushes the slot on the connection's done
 *                  stack (one CAS); it wakes the writer only when the
 *                  stack was empty and the writer sleeps.
 *   sender         whoever holds the connection's send lock takes the
 *                  whole done stack at once (one exchange), encodes the
 *                  reply headers, sends all of them and their read data
 *                  with one sendmsg, and returns the slots to the reader
 *                  through a second lock-free stack.  That is the
 *                  writer thread, or a thread that completed a batch
 *                  while the writer slept (nbdsrv_io_unplug_send: a lane's
 *                  dispatcher or a reader dispatching for a lane), which
 *                  so saves the writer's wake-up; such a thread never
 *                  blocks on the socket but hands what is left, with
 *                  the lock, to the writer.
 *
 * So a request costs no malloc (slots and their buffers are reused), no
 * mutex, one copy-free hand-off each way, and replies are batched under
 * load.  Both stacks are single-consumer, taken whole by exchange, so the
 * ABA problem of pop-one Treiber stacks cannot arise.
 *
 * Ending a connection (NBD_CMD_DISC, EOF, error or server stop): the
 * reader stops reading, the writer drains every request still in flight
 * (the back end owns their slots until it completes them), then the
 * socket closes.  Nothing is freed while a back end may still write to it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <malloc.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <clockwise/admit.h>
#include <clockwise/layout.h>
#include <clockwise/nbd.h>
#include "common/cleanup.h"
#include "common/util.h"
#include "daemon/nbd/nbd-server.h"
#include "daemon/nbd/nbd-tls.h"
#include "daemon/park.h"
#include "daemon/rundelay.h"
#include "daemon/thread-name.h"

#define RBUF_BYTES (64 * 1024)
#define BUF_ALIGN 4096
/* Slot buffers up to this size stay allocated between requests (while
 * all kept buffers fit in half the reply memory); larger ones are
 * released so an idle connection does not pin 32 MiB a slot. */
#define BUF_KEEP_BYTES (1u << 20)
/* Slot buffers from this size on are mappings of their own, given back
 * whole when dropped: from malloc's arenas, a load's large buffers were
 * kept scattered there long after it (malloc_trim gives back no arena's
 * top but the main one's), and malloc's own threshold is set high for
 * librbd's sake (main.c). */
#define BUF_MAP_BYTES (256u << 10)
#define REPLY_MEMORY_DEFAULT (UINT64_C(256) << 20)
#define HANDSHAKE_TIMEOUT_DEFAULT_NS (INT64_C(10) * 1000000000)
#define STALL_TIMEOUT_DEFAULT_NS (INT64_C(30) * 1000000000)
/* A reader waiting for reply memory that only others can free looks
 * again this often (nothing of its own comes back to wake it). */
#define MEMORY_RECHECK_NS (INT64_C(5) * 1000000)
/* A client over a connection limit is told so within this, by at most
 * REFUSING_MAX threads at once; more are closed without a word. */
#define REFUSE_TIMEOUT_NS (INT64_C(2) * 1000000000)
#define REFUSING_MAX 16
/* Messages a storm of bad clients may log each second before the rest
 * are only counted, and said in one line. */
#define CLIENT_LOGS_PER_S 5
/* A stop waits this long for clients to take their last replies. */
#define STOP_GRACE_S 10
/* A reader asks its back end for its CPU budget this often. */
#define CPU_BUDGET_REFRESH_NS (100 * 1000000)
#define BATCH_MAX 256

/* Exports live in a fixed array, so a connection's pointer to its export
 * never moves; a removed one stays (name and all) until its slot is
 * reused, which only happens once no connection uses it. */

/* What the exports that reach the same bytes share (the exports of one
 * partition: nbdsrv_export.data_key), so that a read-modify-write
 * through one export cannot undo a write through another. */
struct rmw_dom {
	const void *key;
	unsigned refs;			/* exports using it, under srv->lock */
	/* One read-modify-write at a time (see serve_unaligned). */
	pthread_mutex_t lock;
	/* Writes, zeros and trims of every connection in flight, and
	 * whether a read-modify-write holds them off (write_enter). */
	atomic_int writes;
	atomic_int rmw_active;
};

struct export {
	struct nbdsrv_export e;	/* name and description owned */
	struct cw_nbd_limits lim;
	bool removed;
	struct rmw_dom *dom;	/* never NULL once added */
	/* The connection that holds its real-time priority (NULL: none;
	 * conn_go_realtime), and its process (holder_pid, under the
	 * server's lock; 0: not known).  Given back by the holder alone,
	 * taken over only by the claimant's connection. */
	_Atomic(struct conn *) holder;
	pid_t holder_pid;
	/* The process whose connections alone may hold it (claim_allows),
	 * 0 for any; its pidfd (under the server's lock, -1 for none) says
	 * when it has gone.  claim_gen grows with every change. */
	atomic_int claim_pid;
	int claim_pidfd;
	atomic_uint claim_gen;
};

struct slot {
	struct nbdsrv_io io;		/* what the back end sees; first */
	struct conn *conn;
	struct slot *next;		/* on the free or the done stack */
	uint64_t cookie;
	uint32_t buf_cap;
	int err;			/* negative errno from the back end */
	uint32_t wire_error;		/* codec verdict error, or 0 */
	const char *why;
	size_t hdr_len;
	uint8_t hdr[CW_NBD_ERROR_REPLY_MAX];
	/* A request the reader waits for itself (read-modify-write): its
	 * completion raises sync_done instead of queueing a reply. */
	bool sync;
	atomic_int sync_done;
	bool counted;			/* in its export's writes */
	uint32_t pool_bytes;		/* of its payload, what it took of the pool */
};

struct conn {
	struct nbdsrv *srv;
	int fd;
	enum cw_nbd_tls tls_mode;	/* what its listener offers */
	struct nbdtls *sess;		/* once STARTTLS ran: every byte goes here */
	struct nbdsrv_peer peer;
	char addr[64];			/* a TCP peer's address:port; else "" */
	int64_t since_ns;		/* accepted then */
	const char *refuse;		/* over a limit: why; else NULL */
	/* Accepted over a limit while others stalled in their handshake:
	 * not counted until it makes progress (claim_place).  Still in its
	 * handshake, it gave way to another (evict): no longer counted.
	 * Both under srv->lock. */
	bool provisional;
	bool evicted;
	int64_t deadline_ns;		/* the handshake's end; 0: none */
	struct conn *prev, *next;	/* server list, under srv->lock */
	const struct export *exp;
	struct cw_nbd_limits lim;
	char client_class[CW_NBD_CLASS_MAX + 1];	/* "EXPORT@CLASS": CLASS; else "" */
	void *backend_conn;		/* the back end's, for this connection */

	/* reader only */
	struct slot *slots;
	unsigned n_slots;
	struct slot *free_local;
	/* Slots never used, taken only when no used one is free: a used
	 * slot has its buffer, mapped and faulted in (take_slot). */
	struct slot *free_fresh;
	uint32_t want_bytes;		/* what take_slot() waits to fit */
	bool wake_pending;		/* completions the writer has not heard of */
	uint8_t *rbuf;
	size_t rpos, rlen;
	uint32_t wait_avg;		/* recent waits for input, smoothed (ns) */
	bool realtime;			/* runs SCHED_FIFO: never polls */
	/* Its CPU budget (cpu_spend): its own while it holds the export's
	 * real-time priority, else the server's best-effort one; the rate
	 * and model the back end last gave, at cpu_at_ns. */
	atomic_bool rt_holder;		/* read by nbdsrv_export_clients */
	bool rt_demoted;		/* may not take it (again) */
	unsigned claim_gen;		/* the export's, when last looked at */
	bool writer_started;
	_Atomic int64_t cpu_tat_ns;
	int64_t cpu_at_ns;
	uint64_t cpu_rate_ps;
	struct cw_host_model cpu_model;
	/* A real-time connection's threads' CPU clocks, for the host's
	 * watch (nbdsrv_rt_cpu_ns): set once both threads run; the writer's
	 * last CPU time once it ended (0 before). */
	clockid_t reader_clk, writer_clk;
	atomic_bool clocks;
	atomic_uint_fast64_t writer_cpu_end;
	/* A real-time reader's run delay (rundelay.h) and when it last
	 * received; the bytes in rbuf were on the socket at rbuf_at_ns
	 * (0: not known), earlier than they were read if the reader had
	 * been waiting for a CPU. */
	int rd_fd;
	int64_t rd_ns, rd_at_ns, rbuf_at_ns;
	int64_t rbuf_rd_ns;		/* the run delay as of rbuf_at_ns */
	int64_t park_ns;		/* take_slot's park for the request in hand */
	bool park_memory;
	/* The export's minimum block when the client, not having asked,
	 * was promised 1; else 0.  Buffers of the requests it takes. */
	uint32_t rmw_align;
	struct slot rmw;
	uint8_t *rmw_buf, *blk_buf;
	size_t rmw_cap;

	/* shared, lock-free */
	_Atomic(struct slot *) free_shared;	/* writer pushes, reader takes all */
	_Atomic(struct slot *) done;		/* back ends push, writer takes all */
	atomic_uint inflight;			/* slots out of the free stacks */
	atomic_uint completers;			/* threads inside nbdsrv_io_complete() */
	atomic_uint inflight_bytes;
	struct park writer_park;		/* where each sleeps (park.h) */
	struct park reader_park;
	atomic_bool reader_done;		/* no more submissions */
	atomic_bool send_broken;		/* client stopped taking replies */
	pthread_t writer;

	/* Sending: whoever holds send_lock (the writer, or a dispatcher
	 * that completed requests while the writer slept) sends; it takes
	 * the done stack itself.  A dispatcher never blocks on the socket:
	 * when it is full it leaves the rest here and hands the lock over
	 * to the writer (handoff). */
	atomic_int send_lock;
	atomic_int handoff;
	struct slot *out_head, *out_end;	/* the batch in out_iov, then more */
	int out_pos, out_n;			/* iovecs of the batch still to send */
	struct iovec out_iov[2 * BATCH_MAX];
};

struct nbdsrv {
	struct nbdsrv_config cfg;
	struct export *exports;
	size_t n_exports;
	struct rmw_dom *doms;			/* CW_EXPORTS_MAX of them */
	struct cw_nbd_export_info *infos;	/* the handshake's view, under lock */
	size_t *live;				/* infos[i] is exports[live[i]] */
	size_t n_live;

	int listen_fds[NBDSRV_LISTEN_MAX];
	char *unix_paths[NBDSRV_LISTEN_MAX];
	enum cw_nbd_tls listen_tls[NBDSRV_LISTEN_MAX];
	unsigned n_listen;
	int wake_fd;				/* eventfd: stop the acceptor */
	pthread_t acceptor;
	bool started, stopped;

	pthread_mutex_t lock;			/* conns, n_conns; infos, live once started */
	pthread_cond_t conns_gone;
	struct conn *conns;
	unsigned n_conns;			/* served (not refused) */
	unsigned n_refusing;
	unsigned n_provisional;			/* over a limit, in the handshake */
	atomic_uint n_active;			/* n_conns, for shares without the lock */
	atomic_uint_fast64_t payload_bytes;	/* in flight, all connections */
	/* Reply memory: each connection's floor, and the pool above the
	 * floors (bytes_fit); pool_used is what slots took of it. */
	uint64_t floor_bytes, pool_bytes;
	atomic_uint_fast64_t pool_used;
	atomic_uint_fast64_t buf_bytes;		/* slot buffers allocated */
	int64_t last_trim_ns;			/* under lock */
	uint64_t rt_cpu_gone_ns;		/* under lock: of ended real-time connections */
	_Atomic int64_t be_tat_ns;		/* every best-effort connection's budget */

	/* Messages about clients, limited (client_log). */
	pthread_mutex_t log_lock;
	int64_t log_window_ns;
	unsigned log_in_window, log_dropped;
};

/* ------------------------------------------------------------------ */
/* small helpers */

static const char *peer_name(const struct nbdsrv_peer *p, char *buf, size_t n);
static const char *claim_place(struct conn *c);

static void srv_log(struct nbdsrv *srv, int prio, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void srv_log(struct nbdsrv *srv, int prio, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!srv->cfg.log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	srv->cfg.log(srv->cfg.log_userdata, prio, msg);
}

/* For what a client causes (bad handshakes, limits, timeouts): at most
 * CLIENT_LOGS_PER_S lines a second; the rest become one line saying how
 * many, so a storm of bad clients cannot flood the journal. */
static void client_log(struct nbdsrv *srv, int prio, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void flush_dropped(struct nbdsrv *srv, int64_t now)
{
	unsigned dropped = 0;

	pthread_mutex_lock(&srv->log_lock);
	if (now - srv->log_window_ns >= 1000000000) {
		dropped = srv->log_dropped;
		srv->log_window_ns = now;
		srv->log_in_window = 0;
		srv->log_dropped = 0;
	}
	pthread_mutex_unlock(&srv->log_lock);
	if (dropped)
		srv_log(srv, LOG_WARNING, "%u more messages about clients in the last second "
			"were left out", dropped);
}

static void client_log(struct nbdsrv *srv, int prio, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	bool ok;

	if (!srv->cfg.log)
		return;
	flush_dropped(srv, cw_now_ns());
	pthread_mutex_lock(&srv->log_lock);
	ok = srv->log_in_window < CLIENT_LOGS_PER_S;
	if (ok)
		srv->log_in_window++;
	else
		srv->log_dropped++;
	pthread_mutex_unlock(&srv->log_lock);
	if (!ok)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	srv->cfg.log(srv->cfg.log_userdata, prio, msg);
}

static void futex_wait(atomic_int *addr, int val)
{
	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(atomic_int *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* A write (or zero, or trim) leaves its bytes' count; the last one out
 * wakes a read-modify-write waiting for them (serve_unaligned). */
static void write_leave(struct rmw_dom *d)
{
	if (atomic_fetch_sub_explicit(&d->writes, 1, memory_order_seq_cst) == 1 &&
	    atomic_load_explicit(&d->rmw_active, memory_order_seq_cst))
		futex_wake(&d->writes);
}

static void push(_Atomic(struct slot *) *head, struct slot *s, struct slot **ret_old)
{
	struct slot *old = atomic_load_explicit(head, memory_order_relaxed);

	do {
		s->next = old;
	} while (!atomic_compare_exchange_weak_explicit(head, &old, s, memory_order_seq_cst,
							memory_order_relaxed));
	*ret_old = old;
}

static int send_all(int fd, const void *buf, size_t n)
{
	const uint8_t *p = buf;

	while (n > 0) {
		ssize_t r = send(fd, p, n, MSG_NOSIGNAL);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* completion and the writer */

/* The connection whose reader runs on this thread, if any. */
static __thread struct conn *tls_reader;

/* Writers whose wake-up this thread holds (nbdsrv_io_plug). */
#define PLUG_MAX 16
/* Replies with more read data than this are left to the writer even by
 * nbdsrv_io_unplug_send(): the copy into the socket costs more than the
 * wake-up, and the writer sends while the completing thread goes on. */
#define INLINE_SEND_MAX (128u << 10)
static __thread struct {
	bool on;
	unsigned n;
	struct conn *conns[PLUG_MAX];
	bool big[PLUG_MAX];		/* a reply over INLINE_SEND_MAX */
} tls_plug;

void nbdsrv_io_complete(struct nbdsrv_io *io, int err)
{
	struct slot *s = (struct slot *)io;	/* io is the slot's first member */
	struct conn *c = s->conn;

	if (s->counted) {
		s->counted = false;
		write_leave(c->exp->dom);
	}
	/* Read before the push: from then on the slot may be answered and reused. */
	bool big = s->io.op == NBDSRV_IO_READ && s->io.length > INLINE_SEND_MAX;
	struct slot *old;

	if (s->sync) {
		/* The reader waits for it; the count keeps the connection
		 * (and so the futex word) alive until the wake-up is done. */
		atomic_fetch_add_explicit(&c->completers, 1, memory_order_relaxed);
		s->err = err;
		atomic_store_explicit(&s->sync_done, 1, memory_order_release);
		futex_wake(&s->sync_done);
		atomic_fetch_sub_explicit(&c->completers, 1, memory_order_release);
		return;
	}

	/* Once the slot is pushed the writer may answer it, recycle it and
	 * end the connection before the wake-up below: this count keeps the
	 * connection alive until this thread is done with it. */
	atomic_fetch_add_explicit(&c->completers, 1, memory_order_relaxed);
	s->err = err;
	push(&c->done, s, &old);
	/* Completed on its own reader (a synchronous back end, or an error
	 * found before submission): the reader wakes the writer once for
	 * the whole batch, before it next blocks, instead of once a request;
	 * unless the reader plugged (it dispatches for a lane) and sends. */
	if (tls_reader == c && !tls_plug.on) {
		c->wake_pending = true;
	} else if (tls_plug.on) {
		unsigned i;

		/* Keep c alive (the count taken above) until the unplug. */
		for (i = 0; i < tls_plug.n; i++)
			if (tls_plug.conns[i] == c)
				break;
		if (i < tls_plug.n) {
			tls_plug.big[i] |= big;	/* already held once */
		} else if (tls_plug.n < PLUG_MAX) {
			tls_plug.big[i] = big;
			tls_plug.conns[tls_plug.n++] = c;
			return;
		} else {
			park_wake(&c->writer_park);
		}
	} else if (!old) {
		park_wake(&c->writer_park);
	}
	atomic_fetch_sub_explicit(&c->completers, 1, memory_order_release);
	/* c may be gone from here on. */
}

void nbdsrv_io_plug(void)
{
	tls_plug.on = true;
}

void nbdsrv_io_unplug(void)
{
	unsigned i;

	for (i = 0; i < tls_plug.n; i++) {
		struct conn *c = tls_plug.conns[i];

		park_wake(&c->writer_park);
		atomic_fetch_sub_explicit(&c->completers, 1, memory_order_release);
	}
	tls_plug.n = 0;
}

/* Called by the reader before it blocks. */
static void flush_wake(struct conn *c)
{
	if (c->exp && c->exp->e.ops->unplug)	/* no export yet in the handshake */
		c->exp->e.ops->unplug(c->exp->e.backend);
	if (c->wake_pending) {
		c->wake_pending = false;
		park_wake(&c->writer_park);
	}
}

/* Work for the writer: a hand-over, replies nobody is sending, or the end. */
static bool writer_ready(struct conn *c)
{
	return atomic_load_explicit(&c->handoff, memory_order_seq_cst) ||
	       (atomic_load_explicit(&c->done, memory_order_seq_cst) &&
		!atomic_load_explicit(&c->send_lock, memory_order_seq_cst)) ||
	       (atomic_load_explicit(&c->reader_done, memory_order_seq_cst) &&
		atomic_load_explicit(&c->inflight, memory_order_seq_cst) == 0);
}

/* What a request of bytes would take of the pool: what goes over the
 * connection's floor. */
static uint64_t pool_part(const struct conn *c, uint32_t bytes)
{
	uint64_t own = atomic_load_explicit(&c->inflight_bytes, memory_order_seq_cst);
	uint64_t floor = c->srv->floor_bytes;

	if (own + bytes <= floor)
		return 0;
	return own >= floor ? bytes : own + bytes - floor;
}

/* Bound the payload memory in flight.  Half of the budget is split
 * evenly among max_connections: a floor every connection may always
 * use, whatever the others hold.  The other half, the pool, goes to
 * whoever asks, each connection within budget / connections open.  So
 * clients that read much and take no replies (until the stall timeout
 * drops them) hold at most the pool: the others keep their floor, and
 * their requests in flight with it.  A connection with nothing in
 * flight gets the whole pool if nobody holds any of it, so a request
 * larger than floor and share still runs. */
static bool bytes_fit(struct conn *c, uint32_t bytes)
{
	struct nbdsrv *srv = c->srv;
	uint64_t part = pool_part(c, bytes), used, share;
	unsigned n = atomic_load_explicit(&srv->n_active, memory_order_relaxed);

	if (part == 0)
		return true;
	used = atomic_load_explicit(&srv->pool_used, memory_order_seq_cst);
	if (used == 0 && atomic_load_explicit(&c->inflight, memory_order_seq_cst) == 0)
		return true;
	share = CW_MAX(srv->cfg.reply_memory_bytes / (n ? n : 1), srv->floor_bytes);
	return atomic_load_explicit(&c->inflight_bytes, memory_order_seq_cst) + bytes <= share &&
	       used + part <= srv->pool_bytes;
}

static bool reader_ready(struct conn *c)
{
	return (c->free_local || c->free_fresh ||
		atomic_load_explicit(&c->free_shared, memory_order_seq_cst)) &&
	       bytes_fit(c, c->want_bytes);
}

/* Encodes the reply for a finished slot and returns its iovec count. */
static int reply_iov(struct conn *c, struct slot *s, struct iovec *iov)
{
	bool st = c->lim.structured;
	uint32_t werr = s->wire_error;

	/* Back-end errors are the back end's to log (it knows the disk and
	 * the offset, and logs a failing disk once, not once a request). */
	if (!werr && s->err) {
		werr = cw_nbd_errno_to_wire(s->err);
		s->why = "I/O error";
	}
	if (!werr && s->io.op == NBDSRV_IO_BLOCK_STATUS && !s->io.n_extents) {
		werr = CW_NBD_EIO;	/* a back end must describe something */
		s->why = "no extent";
	}
	if (werr) {
		s->hdr_len = cw_nbd_encode_error_reply(s->hdr, st, s->cookie, werr, s->why);
	} else if (s->io.op == NBDSRV_IO_BLOCK_STATUS) {
		s->hdr_len = cw_nbd_encode_block_status(s->hdr, s->cookie,
							CW_NBD_META_ID_ALLOCATION, s->io.buf,
							s->io.n_extents);
		iov[0] = (struct iovec){ s->hdr, s->hdr_len };
		iov[1] = (struct iovec){ s->io.buf, s->io.n_extents * sizeof(struct cw_nbd_extent) };
		return 2;
	} else if (s->io.op == NBDSRV_IO_READ) {
		s->hdr_len = cw_nbd_encode_read_reply(s->hdr, st, s->cookie, s->io.offset,
						      s->io.length);
		iov[0] = (struct iovec){ s->hdr, s->hdr_len };
		iov[1] = (struct iovec){ s->io.buf, s->io.length };
		return 2;
	} else {
		s->hdr_len = cw_nbd_encode_ok_reply(s->hdr, s->cookie);
	}
	iov[0] = (struct iovec){ s->hdr, s->hdr_len };
	return 1;
}

/* A slot buffer of cap bytes (a multiple of the page size), aligned to
 * BUF_ALIGN; NULL without memory. */
static void *buf_alloc(size_t cap)
{
	void *p;

	if (cap >= BUF_MAP_BYTES) {
		p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		return p == MAP_FAILED ? NULL : p;
	}
	return posix_memalign(&p, BUF_ALIGN, cap) == 0 ? p : NULL;
}

static void buf_free(void *p, size_t cap)
{
	if (p && cap >= BUF_MAP_BYTES)
		munmap(p, cap);
	else
		free(p);
}

static void drop_buf(struct nbdsrv *srv, struct slot *s)
{
	atomic_fetch_sub_explicit(&srv->buf_bytes, s->buf_cap, memory_order_relaxed);
	buf_free(s->io.buf, s->buf_cap);
	s->io.buf = NULL;
	s->buf_cap = 0;
}

/* Returns a slot to the reader. */
static void recycle(struct conn *c, struct slot *s)
{
	struct nbdsrv *srv = c->srv;
	struct slot *old;
	uint32_t bytes = s->io.op == NBDSRV_IO_READ || s->io.op == NBDSRV_IO_WRITE ? s->io.length : 0;

	if (s->buf_cap > BUF_KEEP_BYTES ||
	    atomic_load_explicit(&srv->buf_bytes, memory_order_relaxed) >
	    srv->cfg.reply_memory_bytes / 2)
		drop_buf(srv, s);
	atomic_fetch_sub_explicit(&c->inflight_bytes, bytes, memory_order_relaxed);
	atomic_fetch_sub_explicit(&srv->payload_bytes, bytes, memory_order_relaxed);
	atomic_fetch_sub_explicit(&srv->pool_used, s->pool_bytes, memory_order_seq_cst);
	s->pool_bytes = 0;
	push(&c->free_shared, s, &old);
	atomic_fetch_sub_explicit(&c->inflight, 1, memory_order_seq_cst);
	park_wake(&c->reader_park);
}

/* Sends what is left of the batch in out_iov: 0 once all of it is out,
 * -EAGAIN when the socket is full (flags MSG_DONTWAIT), or -errno. */
static int send_batch(struct conn *c, int flags)
{
	/* Under TLS only a thread that may block sends (see
	 * nbdsrv_io_unplug_send): a record is sent whole or not at all. */
	if (c->sess) {
		int r = nbdtls_sendv(c->sess, c->out_iov + c->out_pos, c->out_n);

		if (r == 0)
			c->out_n = 0;
		return r;
	}
	while (c->out_n > 0) {
		struct iovec *iov = c->out_iov + c->out_pos;
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)CW_MIN(c->out_n, IOV_MAX) };
		ssize_t r = sendmsg(c->fd, &m, MSG_NOSIGNAL | flags);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			/* A blocking send gives up after the stall timeout
			 * (SO_SNDTIMEO) with nothing sent. */
			if (errno == EWOULDBLOCK)
				return flags & MSG_DONTWAIT ? -EAGAIN : -ETIMEDOUT;
			return -errno;
		}
		while (c->out_n > 0 && (size_t)r >= iov->iov_len) {
			r -= (ssize_t)iov->iov_len;
			iov++, c->out_pos++, c->out_n--;
		}
		if (c->out_n > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + r;
			iov->iov_len -= (size_t)r;
		}
	}
	return 0;
}

/* Tells the back end of the replies just sent (or lost with the client:
 * never late) that left after their deadlines. */
static void late_replies(struct conn *c, bool lost)
{
	const struct nbdsrv_export *e = c->exp ? &c->exp->e : NULL;
	int64_t now = 0;

	if (!e || !e->ops->reply_late)
		return;
	for (struct slot *s = c->out_head; s != c->out_end; s = s->next) {
		if (!s->io.deadline_ns || lost)
			continue;
		if (!now)
			now = cw_now_ns();
		if (now > s->io.deadline_ns)
			e->ops->reply_late(e->backend, &s->io, now);
	}
}

/* Sends replies until the done stack is empty; only under send_lock.
 * Returns 0, or -EAGAIN when flags has MSG_DONTWAIT and the socket is
 * full (what is left stays in c->out_*, for the next holder). */
static int pump(struct conn *c, int flags)
{
	struct slot *s, *next, *list;
	int n, k, r;

	for (;;) {
		if (c->out_n > 0) {
			r = atomic_load_explicit(&c->send_broken, memory_order_relaxed) ? 0 :
			    send_batch(c, flags);
			if (r == -EAGAIN)
				return r;
			if (r < 0) {
				/* The client is gone, or took no reply for the
				 * stall timeout: keep draining so the back
				 * end's completions still land (and their
				 * memory is freed), and make the reader stop. */
				if (r == -ETIMEDOUT)
					client_log(c->srv, LOG_WARNING, "export %s: a client of %s "
						   "took no replies for %lld s, closed",
						   c->exp->e.name,
						   peer_name(&c->peer, (char[32]){ 0 }, 32),
						   (long long)(c->srv->cfg.stall_timeout_ns /
							       1000000000));
				atomic_store(&c->send_broken, true);
				shutdown(c->fd, SHUT_RDWR);
			}
			c->out_n = 0;
			late_replies(c, r < 0);
			for (s = c->out_head; s != c->out_end; s = next) {
				next = s->next;
				recycle(c, s);
			}
			c->out_head = c->out_end;
		}
		if (!c->out_head) {
			list = atomic_exchange_explicit(&c->done, NULL, memory_order_seq_cst);
			if (!list)
				return 0;
			/* The stack holds the newest first: reverse it so
			 * replies leave in completion order. */
			for (s = list; s; s = next) {
				next = s->next;
				s->next = c->out_head;
				c->out_head = s;
			}
		}
		for (s = c->out_head, n = 0, k = 0; s && k < BATCH_MAX; s = s->next, k++)
			n += reply_iov(c, s, c->out_iov + n);
		c->out_end = s;
		c->out_pos = 0;
		c->out_n = n;
	}
}

static bool send_trylock(struct conn *c)
{
	return !atomic_load_explicit(&c->send_lock, memory_order_relaxed) &&
	       !atomic_exchange_explicit(&c->send_lock, 1, memory_order_seq_cst);
}

/* Sends, holding send_lock, until nothing is done, then lets the lock go.
 * may_block false (a dispatcher): when the socket is full, the rest and
 * the lock go to the writer instead. */
static void send_locked(struct conn *c, bool may_block)
{
	do {
		if (pump(c, may_block ? 0 : MSG_DONTWAIT) == -EAGAIN) {
			atomic_store_explicit(&c->handoff, 1, memory_order_seq_cst);
			park_wake(&c->writer_park);
			return;
		}
		atomic_store_explicit(&c->send_lock, 0, memory_order_seq_cst);
		/* A completion that came while the lock was held woke a
		 * writer that found the lock taken: its reply is ours. */
	} while (atomic_load_explicit(&c->done, memory_order_seq_cst) && send_trylock(c));
}

/* The dispatcher's unplug on a lane without streams: send the replies
 * here, with no wake-up, unless a writer is sending already. */
void nbdsrv_io_unplug_send(void)
{
	unsigned i;

	for (i = 0; i < tls_plug.n; i++) {
		struct conn *c = tls_plug.conns[i];

		/* If the lock is taken, its holder looks at the done stack
		 * once more after letting it go, and sends these too.  A
		 * TLS record cannot be left half sent for the writer: it
		 * sends those. */
		if (tls_plug.big[i] || c->sess) {
			park_wake(&c->writer_park);
		} else if (send_trylock(c)) {
			send_locked(c, false);
			/* The writer waits for its last slot to come back. */
			if (atomic_load_explicit(&c->reader_done, memory_order_seq_cst))
				park_wake(&c->writer_park);
		}
		atomic_fetch_sub_explicit(&c->completers, 1, memory_order_release);
	}
	tls_plug.n = 0;
}

void nbdsrv_io_plug_end(void)
{
	nbdsrv_io_unplug_send();
	tls_plug.on = false;
}

static void *writer_main(void *arg)
{
	struct conn *c = arg;

	for (;;) {
		/* A hand-over comes with the lock already held. */
		if (atomic_exchange_explicit(&c->handoff, 0, memory_order_seq_cst) ||
		    (atomic_load_explicit(&c->done, memory_order_seq_cst) && send_trylock(c))) {
			send_locked(c, true);
			continue;
		}
		if (atomic_load(&c->reader_done) && atomic_load(&c->inflight) == 0) {
			/* Every slot is back; a completer may still be
			 * between its push and its return. */
			while (atomic_load_explicit(&c->completers, memory_order_acquire))
				sched_yield();
			break;
		}
		park_unless(&c->writer_park, writer_ready(c), -1);
	}
	if (c->realtime)
		atomic_store(&c->writer_cpu_end,
			     (uint64_t)CW_MAX(cw_clock_ns(CLOCK_THREAD_CPUTIME_ID), 1));
	return NULL;
}

/* ------------------------------------------------------------------ */
/* the reader: buffered input */

/* Fills the input buffer with what the socket holds, waiting for some.
 *
 * Waking a sleeping thread costs tens of microseconds where an idle CPU
 * halts (a virtual machine exits to its host), more than serving a 4 KiB
 * read.  A client that sends its next request only once it has the reply
 * (queue depth 1) would pay that on every request; so while the reader's
 * recent waits for input were of that order (between POLL_MIN_NS and
 * twice busy_poll_ns, smoothed), it polls the socket for up to
 * busy_poll_ns before it sleeps.  Shorter waits mean a client with
 * requests in flight, whose next request is on its way anyway: polling
 * for it only burns the CPU the client could use.  An idle connection's
 * long waits end the polling by themselves.  The poll yields the CPU
 * between looks, and a real-time reader does not poll at all. */
#define POLL_MIN_NS 10000

/* A receive under TLS, in recv()'s terms (-1 with errno). */
static ssize_t conn_recv_tls(struct conn *c, void *buf, size_t n)
{
	ssize_t r = nbdtls_recv(c->sess, buf, n);

	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

static void note_wait(struct conn *c, int64_t ns)
{
	int64_t avg = c->wait_avg;

	ns = CW_MIN(ns, INT64_C(1) << 31);
	c->wait_avg = (uint32_t)(avg + (ns - avg) / 8);
}

static ssize_t conn_recv(struct conn *c)
{
	uint32_t max = c->realtime ? 0 : c->srv->cfg.busy_poll_ns;
	int64_t t0;
	ssize_t r;

	if (c->sess)
		return conn_recv_tls(c, c->rbuf, RBUF_BYTES);
	if (!max)
		return recv(c->fd, c->rbuf, RBUF_BYTES, 0);
	t0 = cw_now_ns();
	if (c->wait_avg >= POLL_MIN_NS && c->wait_avg <= 2 * (uint64_t)max) {
		int64_t until = t0 + max, now;

		do {
			r = recv(c->fd, c->rbuf, RBUF_BYTES, MSG_DONTWAIT);
			now = cw_now_ns();
			if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
				note_wait(c, now - t0);
				return r;
			}
			sched_yield();
		} while (now < until);
	}
	r = recv(c->fd, c->rbuf, RBUF_BYTES, 0);
	note_wait(c, cw_now_ns() - t0);
	return r;
}

/* Waits for input until the handshake's deadline, or in transmission
 * for the idle timeout (which only ends a connection with nothing in
 * flight): 0 once there is some, -ETIMEDOUT when time is up.  One
 * deadline for the whole handshake, so a client cannot stretch it by
 * sending a byte now and then.  Under TLS it waits (for ever without an
 * idle timeout) for a record's first byte: the record timeout then runs
 * to its last (nbdtls_set_timeout), not while the client is idle. */
static int wait_input(struct conn *c)
{
	int64_t idle = c->exp ? c->srv->cfg.idle_timeout_ns : 0;
	struct pollfd p = { .fd = c->fd, .events = POLLIN };

	if (c->sess && nbdtls_pending(c->sess))
		return 0;
	if (!c->deadline_ns && !idle && !c->sess)
		return 0;
	for (;;) {
		bool forever = !c->deadline_ns && !idle;
		int64_t left = c->deadline_ns ? c->deadline_ns - cw_now_ns() : idle;
		int r;

		if (!forever && left <= 0)
			return -ETIMEDOUT;
		r = poll(&p, 1, forever ? -1 : (int)CW_MIN((left + 999999) / 1000000,
							     (int64_t)INT_MAX));
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r == 0 && !c->deadline_ns && idle &&
		    atomic_load_explicit(&c->inflight, memory_order_seq_cst) == 0)
			return -ETIMEDOUT;
	}
}

/* After a receive on a real-time connection: the input got here no later
 * than the reader's CPU wait since its last receive before now (bounded
 * by that receive), so a request that waited on the socket while its
 * reader could not run is dated when it came, not when it was read. */
static void note_arrival(struct conn *c)
{
	int64_t now, rd, wait;

	if (c->rd_fd < 0)
		return;
	now = cw_now_ns();
	rd = rundelay_read(c->rd_fd);
	wait = CW_MIN(CW_MAX(rd - c->rd_ns, 0), c->rd_at_ns ? now - c->rd_at_ns : 0);
	c->rd_ns = rd;
	c->rd_at_ns = now;
	c->rbuf_at_ns = now - wait;
	c->rbuf_rd_ns = rd - wait;
}

/* Reads exactly n bytes, first from the buffer, large remainders straight
 * into dst.  0, -ECONNRESET at end of stream, or -errno. */
static int conn_read(struct conn *c, void *dst, size_t n)
{
	uint8_t *d = dst;

	while (n > 0) {
		ssize_t r;

		if (c->rpos < c->rlen) {
			size_t k = CW_MIN(n, c->rlen - c->rpos);

			if (d)
				memcpy(d, c->rbuf + c->rpos, k);
			c->rpos += k;
			if (d)
				d += k;
			n -= k;
			continue;
		}
		c->rpos = c->rlen = 0;
		flush_wake(c);
		r = wait_input(c);
		if (r < 0)
			return (int)r;
		if (d && n >= RBUF_BYTES / 2)
			r = c->sess ? conn_recv_tls(c, d, n) : recv(c->fd, d, n, MSG_WAITALL);
		else
			r = conn_recv(c);
		if (r == 0)
			return -ECONNRESET;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		}
		note_arrival(c);
		if (d && n >= RBUF_BYTES / 2) {
			d += r;
			n -= (size_t)r;
		} else {
			c->rlen = (size_t)r;
		}
	}
	return 0;
}

/* Discards n bytes of input (the payload of a refused write). */
static int conn_skip(struct conn *c, uint64_t n)
{
	while (n > 0) {
		size_t k = (size_t)CW_MIN(n, (uint64_t)RBUF_BYTES);
		int r = conn_read(c, NULL, k);

		if (r < 0)
			return r;
		n -= k;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* the handshake */

/* Sends in the handshake give up after ns (a client that never reads
 * its replies); 0: never. */
static void set_sndtimeo(int fd, int64_t ns)
{
	struct timeval tv = { .tv_sec = ns / 1000000000, .tv_usec = ns % 1000000000 / 1000 };

	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* ------------------------------------------------------------------ */
/* access */

static bool principal_matches(const struct nbdsrv_principal *p, const struct nbdsrv_peer *peer)
{
	unsigned i;

	switch (p->kind) {
	case NBDSRV_ANYONE:
		return true;
	case NBDSRV_USER:
		return peer->known && peer->uid == p->id;
	case NBDSRV_GROUP:
		if (!peer->known)
			return false;
		if (peer->gid == p->id)
			return true;
		for (i = 0; i < peer->n_groups; i++)
			if (peer->groups[i] == p->id)
				return true;
		return false;
	}
	return false;
}

static bool any_matches(const struct nbdsrv_principal *list, size_t n, const struct nbdsrv_peer *peer)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (principal_matches(&list[i], peer))
			return true;
	return false;
}

int nbdsrv_access_for(const struct nbdsrv_access *list, size_t n, const struct nbdsrv_peer *peer,
		   const char *name)
{
	const struct nbdsrv_access *rule = NULL;
	size_t i;

	for (i = 0; i < n; i++) {
		if (list[i].export && strcmp(list[i].export, name) == 0) {
			rule = &list[i];
			break;
		}
		if (!list[i].export && !rule)
			rule = &list[i];
	}
	if (!rule)
		return CW_NBD_ACCESS_RW;
	/* Whoever owns the disks can read them anyway. */
	if (peer->known && (peer->uid == 0 || peer->uid == geteuid()))
		return CW_NBD_ACCESS_RW;
	if (any_matches(rule->read_write, rule->n_read_write, peer))
		return CW_NBD_ACCESS_RW;
	if (any_matches(rule->read_only, rule->n_read_only, peer))
		return CW_NBD_ACCESS_RO;
	return CW_NBD_ACCESS_NONE;
}

/* "uid 1000", or "the network" for a TCP client. */
static const char *peer_name(const struct nbdsrv_peer *p, char *buf, size_t n)
{
	if (!p->known)
		return "the network";
	snprintf(buf, n, "uid %u", (unsigned)p->uid);
	return buf;
}

/* A TCP peer as "address:port" ("[address]:port" for IPv6), for the
 * operator: who is connected. */
static void tcp_peer_addr(int fd, char *buf, size_t n)
{
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	buf[0] = '\0';
	if (getpeername(fd, (struct sockaddr *)&sa, &len) < 0)
		return;
	if (sa.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&sa;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		port = ntohs(in->sin_port);
		snprintf(buf, n, "%s:%u", host, port);
	} else if (sa.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		port = ntohs(in6->sin6_port);
		snprintf(buf, n, "[%s]:%u", host, port);
	}
}

/* The kernel's word on who is at the other end of a unix socket. */
static void peer_from_socket(int fd, struct nbdsrv_peer *ret_peer)
{
	struct ucred cred;
	socklen_t len = sizeof(cred), glen = sizeof(ret_peer->groups);

	ret_peer->known = false;
	ret_peer->n_groups = 0;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return;
	ret_peer->known = true;
	ret_peer->uid = cred.uid;
	ret_peer->gid = cred.gid;
	ret_peer->pid = cred.pid;
	/* Supplementary groups where the kernel reports them (4.13); more
	 * than fit are left out, so they grant nothing. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, ret_peer->groups, &glen) == 0)
		ret_peer->n_groups = glen / sizeof(gid_t);
}

/* Sends in the handshake: in the clear or under TLS. */
static int conn_send(struct conn *c, const void *buf, size_t n)
{
	if (c->sess)
		return nbdtls_sendv(c->sess, &(struct iovec){ (void *)buf, n }, 1);
	return send_all(c->fd, buf, n);
}

/* NBD_OPT_STARTTLS was acknowledged: the TLS handshake, within what is
 * left of the NBD handshake's time.  A client that sent more before it
 * (bytes in the input buffer) would have them taken as if under TLS:
 * it is closed instead. */
static int start_tls(struct conn *c)
{
	char err[256];
	int r;

	if (c->rpos < c->rlen) {
		client_log(c->srv, LOG_WARNING, "a client of %s sent data after STARTTLS before "
			   "TLS, closing", peer_name(&c->peer, (char[32]){ 0 }, 32));
		return -EPROTO;
	}
	r = nbdtls_accept(c->srv->cfg.tls_creds, c->fd, c->deadline_ns - cw_now_ns(), &c->sess,
			   err, sizeof(err));
	if (r < 0) {
		client_log(c->srv, LOG_WARNING, "a client of %s: %s",
			   peer_name(&c->peer, (char[32]){ 0 }, 32), err);
		return -EPROTO;
	}
	return 0;
}

/* Runs the option haggling; returns 0 with c->exp set, or -errno. */
static int handshake(struct conn *c)
{
	struct nbdsrv *srv = c->srv;
	struct cw_nbd_handshake hs = {
		.default_export = srv->cfg.default_export,
	};
	uint8_t access[CW_EXPORTS_MAX];
	_cleanup_free_ uint8_t *data = NULL;
	struct cw_nbd_buf out = { 0 };
	uint8_t b[CW_NBD_GREETING_BYTES];
	int r;

	data = malloc(CW_NBD_OPT_DATA_MAX);
	if (!data)
		return -ENOMEM;
	cw_nbd_hs_reset(&hs);
	hs.refuse = c->refuse;
	hs.tls = c->tls_mode;
	set_sndtimeo(c->fd, CW_MAX(c->deadline_ns - cw_now_ns(), INT64_C(1000000)));
	cw_nbd_encode_greeting(b);
	r = send_all(c->fd, b, sizeof(b));
	if (r == 0)
		r = conn_read(c, b, CW_NBD_CLIENT_FLAGS_BYTES);
	if (r == 0)
		r = cw_nbd_hs_client_flags(&hs, b);
	while (r == 0) {
		struct cw_nbd_option opt;
		const uint8_t *payload = data;

		r = conn_read(c, b, CW_NBD_OPTION_BYTES);
		if (r < 0)
			break;
		r = cw_nbd_decode_option(b, &opt);
		if (r < 0)
			break;
		if (opt.length > CW_NBD_OPT_DATA_MAX) {
			/* Skip what no valid option needs, up to a bound;
			 * past it the client is only wasting our time. */
			if (opt.length > (1u << 20)) {
				r = -EPROTO;
				break;
			}
			r = conn_skip(c, opt.length);
			payload = NULL;
		} else {
			r = conn_read(c, data, opt.length);
		}
		if (r < 0)
			break;
		out.len = 0;
		/* Exports may come and go while the server runs: the codec
		 * sees the list of the moment, and the export is chosen
		 * under the same lock that removal takes. */
		pthread_mutex_lock(&srv->lock);
		/* Where TLS is required, only a client that got through
		 * its TLS handshake has shown it is not stalling. */
		if (c->provisional && !c->evicted && opt.option != CW_NBD_OPT_STARTTLS &&
		    (c->tls_mode != CW_NBD_TLS_REQUIRE || c->sess))
			hs.refuse = claim_place(c);
		hs.exports = srv->infos;
		hs.n_exports = srv->n_live;
		if (srv->cfg.n_access) {
			for (size_t i = 0; i < srv->n_live; i++)
				access[i] = (uint8_t)nbdsrv_access_for(srv->cfg.access,
								    srv->cfg.n_access, &c->peer,
								    srv->infos[i].name);
			hs.access = access;
		}
		r = cw_nbd_hs_option(&hs, &opt, payload, &out);
		/* It gave way to another (evict): it is not counted. */
		if (c->evicted)
			r = -ECONNABORTED;
		if (r == CW_NBD_HS_TRANSMIT) {
			c->exp = &srv->exports[srv->live[hs.export_index]];
			memcpy(c->client_class, hs.client_class, sizeof(c->client_class));
			c->lim = c->exp->lim;
			c->lim.structured = hs.structured;
			c->lim.eflags = hs.eflags;
			c->lim.block_status = hs.meta_allocation;
			/* Told a minimum of 1: keep the promise. */
			if (!hs.block_size_known && c->lim.min_block > 1) {
				c->rmw_align = c->lim.min_block;
				c->lim.min_block = 1;
			}
		}
		pthread_mutex_unlock(&srv->lock);
		if (r < 0)
			break;
		if (out.len && conn_send(c, out.data, out.len) < 0) {
			r = -EPIPE;
			break;
		}
		if (r == CW_NBD_HS_STARTTLS) {
			r = start_tls(c);
			if (r < 0)
				break;
			cw_nbd_hs_tls_started(&hs);
			continue;
		}
		if (r == CW_NBD_HS_TRANSMIT) {
			r = 1;
		} else if (r == CW_NBD_HS_CLOSE) {
			r = -ECONNABORTED;
		}
	}
	free(out.data);
	c->deadline_ns = 0;
	/* From here on a client that takes no replies, or leaves a TLS
	 * record unfinished, for the stall timeout is closed. */
	set_sndtimeo(c->fd, srv->cfg.stall_timeout_ns);
	if (c->sess)
		nbdtls_set_timeout(c->sess, srv->cfg.stall_timeout_ns);
	return r == 1 ? 0 : r;
}

/* ------------------------------------------------------------------ */
/* the reader: transmission */

static struct slot *take_slot(struct conn *c, uint32_t bytes)
{
	struct slot *s;
	int64_t t0 = 0;

	c->want_bytes = bytes;
	c->park_ns = 0;
	for (;;) {
		if (!c->free_local)
			c->free_local = atomic_exchange_explicit(&c->free_shared, NULL,
								 memory_order_seq_cst);
		/* A slot used before, while there is one: taking the never
		 * used ones in turn gave each of a connection's 64 slots a
		 * buffer; 13 streams of 256 KiB blocks then held more than
		 * half the reply memory, every recycled buffer was dropped,
		 * and every request mapped a new one, whose pages the
		 * dispatcher faulted in during its copy while writers unmapped
		 * others (the process's mmap lock): 256 KiB reads from tmpfs
		 * took 1-5 ms instead of 0.1, and streams missed deadlines
		 * (class model). */
		if (!c->free_local && c->free_fresh) {
			c->free_local = c->free_fresh;
			c->free_fresh = c->free_fresh->next;
			c->free_local->next = NULL;
		}
		if (c->free_local && bytes_fit(c, bytes))
			break;
		if (atomic_load(&c->send_broken))
			return NULL;
		/* a real-time request says what held it (its miss's timeline) */
		if (c->rd_fd >= 0) {
			c->park_memory = c->free_local || c->free_fresh;
			if (!t0)
				t0 = cw_now_ns();
		}
		flush_wake(c);
		/* Memory others hold comes back with no word to this reader. */
		park_unless(&c->reader_park, reader_ready(c),
			    c->free_local && atomic_load(&c->srv->pool_used) ? MEMORY_RECHECK_NS : -1);
	}
	if (t0)
		c->park_ns = cw_now_ns() - t0;
	s = c->free_local;
	c->free_local = s->next;
	s->pool_bytes = (uint32_t)pool_part(c, bytes);
	atomic_fetch_add_explicit(&c->srv->pool_used, s->pool_bytes, memory_order_seq_cst);
	atomic_fetch_add_explicit(&c->inflight, 1, memory_order_seq_cst);
	atomic_fetch_add_explicit(&c->inflight_bytes, bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->srv->payload_bytes, bytes, memory_order_relaxed);
	return s;
}

static int ensure_buf(struct slot *s, uint32_t length)
{
	struct nbdsrv *srv = s->conn->srv;
	void *p;
	size_t cap;

	if (s->buf_cap >= length)
		return 0;
	cap = ((size_t)length + 65535) & ~(size_t)65535;
	p = buf_alloc(cap);
	if (!p)
		return -ENOMEM;
	drop_buf(srv, s);
	s->io.buf = p;
	s->buf_cap = (uint32_t)cap;
	atomic_fetch_add_explicit(&srv->buf_bytes, cap, memory_order_relaxed);
	return 0;
}

static const enum nbdsrv_io_op cmd_op[] = {
	[CW_NBD_CMD_READ] = NBDSRV_IO_READ,
	[CW_NBD_CMD_WRITE] = NBDSRV_IO_WRITE,
	[CW_NBD_CMD_FLUSH] = NBDSRV_IO_FLUSH,
	[CW_NBD_CMD_TRIM] = NBDSRV_IO_TRIM,
	[CW_NBD_CMD_WRITE_ZEROES] = NBDSRV_IO_ZERO,
	[CW_NBD_CMD_CACHE] = NBDSRV_IO_CACHE,
	[CW_NBD_CMD_BLOCK_STATUS] = NBDSRV_IO_BLOCK_STATUS,
};

static int submit(struct conn *c, struct slot *s)
{
	const struct nbdsrv_backend_ops *ops = c->exp->e.ops;
	void *b = c->exp->e.backend;

	switch (s->io.op) {
	case NBDSRV_IO_READ: return ops->pread(b, &s->io);
	case NBDSRV_IO_WRITE: return ops->pwrite(b, &s->io);
	case NBDSRV_IO_FLUSH: return ops->flush(b, &s->io);
	case NBDSRV_IO_TRIM: return ops->trim(b, &s->io);
	case NBDSRV_IO_ZERO: return ops->zero(b, &s->io);
	case NBDSRV_IO_CACHE: return ops->cache(b, &s->io);
	case NBDSRV_IO_BLOCK_STATUS: return ops->block_status(b, &s->io);
	}
	return -EINVAL;
}

/* ------------------------------------------------------------------ */
/* the reader: requests smaller than the export's blocks
 *
 * A client that did not ask for the block size (nbd-client, the kernel's)
 * was promised a minimum of 1.  Its requests that are not aligned to the
 * export's minimum are served here, on the reader, in whole blocks: a
 * read reads the blocks around it, a write or zero reads the partial
 * blocks at its ends, patches them and writes them back, a trim trims
 * the whole blocks inside it (a trim may do less than asked).
 *
 * Two read-modify-writes of one block must not interleave, or one undoes
 * the other's bytes: they take the lock of the bytes (struct rmw_dom,
 * shared by every export of one partition, not only by the connections
 * of one export).  Nor may another write land between the read and the
 * write of the patch, or the patch, written back with the bytes as they
 * were read, would undo it: every write, zero and trim is counted in its
 * bytes' domain (write_enter), and a read-modify-write holds new ones off
 * and waits for those in flight (rmw_hold_writes), its own connection's
 * included.  It waits for their completions only, never for a reply to
 * be sent: a client that takes no replies must not hold the lock, and
 * with it every other client's unaligned writes.  The count costs each
 * write two atomic operations on a shared word; only unaligned requests
 * ever wait.  Kernel clients send whole logical blocks (512 bytes), so
 * on exports whose disks take 512-byte I/O this path is never taken. */

static const char *conn_class(const struct conn *c)
{
	return c->client_class[0] ? c->client_class : NULL;
}

/* One back-end request the reader waits for. */
static int sync_io(struct conn *c, enum nbdsrv_io_op op, uint64_t off, uint32_t len, void *buf,
		   bool fua, bool may_trim)
{
	struct slot *t = &c->rmw;
	const struct nbdsrv_export *e = &c->exp->e;
	int r;

	t->conn = c;
	t->sync = true;
	t->io = (struct nbdsrv_io){ .op = op, .offset = off, .length = len, .buf = buf, .fua = fua,
				 .may_trim = may_trim, .client_class = conn_class(c),
				 .conn_data = &c->backend_conn };
	atomic_store_explicit(&t->sync_done, 0, memory_order_relaxed);
	r = submit(c, t);
	if (r < 0)
		return r;
	if (e->ops->unplug)
		e->ops->unplug(e->backend);
	while (!atomic_load_explicit(&t->sync_done, memory_order_acquire))
		futex_wait(&t->sync_done, 0);
	return t->err;
}

static void *aligned_buf(uint8_t **buf, size_t *cap, size_t n)
{
	void *p;

	if (*buf && *cap >= n)
		return *buf;
	if (posix_memalign(&p, BUF_ALIGN, n) != 0)
		return NULL;
	free(*buf);
	*buf = p;
	*cap = n;
	return p;
}

/* Rewrites n bytes at from inside the block at blk with src (NULL: zeros). */
static int patch_block(struct conn *c, uint64_t blk, const uint8_t *src, uint64_t from,
		       uint32_t n, bool fua)
{
	uint32_t a = c->rmw_align;
	int r;

	if (!c->blk_buf && posix_memalign((void **)&c->blk_buf, BUF_ALIGN, a) != 0) {
		c->blk_buf = NULL;
		return -ENOMEM;
	}
	r = sync_io(c, NBDSRV_IO_READ, blk, a, c->blk_buf, false, false);
	if (r < 0)
		return r;
	if (src)
		memcpy(c->blk_buf + (from - blk), src, n);
	else
		memset(c->blk_buf + (from - blk), 0, n);
	return sync_io(c, NBDSRV_IO_WRITE, blk, a, c->blk_buf, fua, false);
}

/* A write (src) or zero (src NULL) of [off, end) not aligned to a. */
static int rmw(struct conn *c, const struct slot *s, const uint8_t *src)
{
	uint64_t a = c->rmw_align, off = s->io.offset, end = off + s->io.length;
	uint64_t lo = off & ~(a - 1), a0 = (off + a - 1) & ~(a - 1), b0 = end & ~(a - 1);
	int r = 0;

	if (a0 > b0)	/* inside one block */
		return patch_block(c, lo, src, off, s->io.length, s->io.fua);
	if (off < a0)
		r = patch_block(c, a0 - a, src, off, (uint32_t)(a0 - off), s->io.fua);
	if (r == 0 && end > b0)
		r = patch_block(c, b0, src ? src + (b0 - off) : NULL, b0, (uint32_t)(end - b0),
				s->io.fua);
	if (r < 0 || a0 == b0)
		return r;
	/* NO_HOLE (may_trim false) holds for the whole blocks too. */
	if (!src)
		return sync_io(c, NBDSRV_IO_ZERO, a0, (uint32_t)(b0 - a0), NULL, s->io.fua,
			       s->io.may_trim);
	/* The payload's middle is not at an aligned address in its buffer. */
	if (!aligned_buf(&c->rmw_buf, &c->rmw_cap, b0 - a0))
		return -ENOMEM;
	memcpy(c->rmw_buf, src + (a0 - off), b0 - a0);
	return sync_io(c, NBDSRV_IO_WRITE, a0, (uint32_t)(b0 - a0), c->rmw_buf, s->io.fua, false);
}

/* Holds off new writes of every connection to d's bytes and waits for
 * those in flight (Dekker's pattern with write_enter: each side raises
 * its flag, then looks at the other's). */
static void rmw_hold_writes(struct rmw_dom *d)
{
	int n;

	atomic_store_explicit(&d->rmw_active, 1, memory_order_seq_cst);
	while ((n = atomic_load_explicit(&d->writes, memory_order_seq_cst)) != 0)
		futex_wait(&d->writes, n);
}

static int serve_unaligned(struct conn *c, struct slot *s)
{
	uint64_t a = c->rmw_align, off = s->io.offset, end = off + s->io.length;
	uint64_t lo = off & ~(a - 1), hi = (end + a - 1) & ~(a - 1);
	uint64_t a0 = (off + a - 1) & ~(a - 1), b0 = end & ~(a - 1);
	struct rmw_dom *d = c->exp->dom;
	int r;

	switch (s->io.op) {
	case NBDSRV_IO_READ:
		r = ensure_buf(s, (uint32_t)(hi - lo));
		if (r == 0)
			r = sync_io(c, NBDSRV_IO_READ, lo, (uint32_t)(hi - lo), s->io.buf, false,
				    false);
		if (r == 0)
			memmove(s->io.buf, (uint8_t *)s->io.buf + (off - lo), s->io.length);
		break;
	case NBDSRV_IO_TRIM:
		r = a0 < b0 ? sync_io(c, NBDSRV_IO_TRIM, a0, (uint32_t)(b0 - a0), NULL, s->io.fua,
				      true) : 0;
		break;
	case NBDSRV_IO_ZERO:
		/* Read, patch and write back is never fast. */
		if (s->io.fast_zero) {
			r = -ENOTSUP;
			break;
		}
		/* fall through */
	case NBDSRV_IO_WRITE:
		/* What this reader holds back goes out first: the wait
		 * below is for completions, which it may hold (flush_wake). */
		flush_wake(c);
		pthread_mutex_lock(&d->lock);
		rmw_hold_writes(d);
		r = rmw(c, s, s->io.op == NBDSRV_IO_WRITE ? s->io.buf : NULL);
		atomic_store_explicit(&d->rmw_active, 0, memory_order_seq_cst);
		syscall(SYS_futex, &d->rmw_active, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
		pthread_mutex_unlock(&d->lock);
		break;
	default:
		r = -EINVAL;
		break;
	}
	/* The slot's own request is over: restore what the reply needs. */
	s->io.offset = off;
	return r;
}

static bool unaligned(const struct conn *c, const struct cw_nbd_request *req)
{
	/* CACHE is a hint and BLOCK_STATUS answers at any offset. */
	return c->rmw_align > 1 && req->type != CW_NBD_CMD_FLUSH &&
	       req->type != CW_NBD_CMD_CACHE && req->type != CW_NBD_CMD_BLOCK_STATUS &&
	       ((req->offset | req->length) & (c->rmw_align - 1));
}

static bool modifies(enum nbdsrv_io_op op)
{
	return op == NBDSRV_IO_WRITE || op == NBDSRV_IO_ZERO || op == NBDSRV_IO_TRIM;
}

/* Counts a write in its bytes' domain before it is submitted; while a
 * read-modify-write runs on the export, waits for it to end first. */
static void write_enter(struct conn *c, struct slot *s)
{
	struct rmw_dom *d = c->exp->dom;

	for (;;) {
		atomic_fetch_add_explicit(&d->writes, 1, memory_order_seq_cst);
		if (!atomic_load_explicit(&d->rmw_active, memory_order_seq_cst))
			break;
		write_leave(d);
		/* What this reader holds back goes first: the
		 * read-modify-write waits for it. */
		flush_wake(c);
		while (atomic_load_explicit(&d->rmw_active, memory_order_seq_cst))
			futex_wait(&d->rmw_active, 1);
	}
	s->counted = true;
}

static void conn_go_realtime(struct conn *c);

/* Waits up to ns, or until the client hangs up or the server stops
 * reading it: -ECONNRESET when the server stops. */
static int cpu_wait(struct conn *c, int64_t ns)
{
	struct pollfd p = { .fd = c->fd, .events = POLLRDHUP };
	struct timespec ts = { .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };
	bool stopped;

	if (ppoll(&p, 1, &ts, NULL) <= 0)
		return 0;
	pthread_mutex_lock(&c->srv->lock);
	stopped = c->srv->stopped;
	pthread_mutex_unlock(&c->srv->lock);
	if (stopped)
		return -ECONNRESET;
	/* a client that only stopped sending still has its requests served */
	clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
	return 0;
}

/* c holds its export's real-time priority no more: given back, unless
 * the claimant's connection took it over meanwhile. */
static void conn_give_back(struct conn *c)
{
	struct conn *self = c;

	(void)atomic_compare_exchange_strong(&((struct export *)c->exp)->holder, &self, NULL);
}

/* The connection that held its export's real-time priority asked for
 * more than the stream was admitted for: it is best effort from now on,
 * its threads at normal priority and its CPU no longer the streams', and
 * the next connection to the export may hold the priority. */
static void conn_go_best_effort(struct conn *c, const char *why)
{
	struct nbdsrv *srv = c->srv;
	struct sched_param sp = { 0 };

	c->rt_holder = false;
	c->rt_demoted = true;
	c->cpu_at_ns = 0;
	(void)pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
	(void)pthread_setschedparam(c->writer, SCHED_OTHER, &sp);
	pthread_mutex_lock(&srv->lock);
	if (atomic_load(&c->clocks)) {
		srv->rt_cpu_gone_ns += (uint64_t)cw_clock_ns(c->reader_clk) +
				       (uint64_t)cw_clock_ns(c->writer_clk);
		atomic_store(&c->clocks, false);
	}
	pthread_mutex_unlock(&srv->lock);
	conn_give_back(c);
	client_log(srv, LOG_NOTICE, "export %s: a client of %s %s: best effort from now on",
		   c->exp->e.name, peer_name(&c->peer, (char[32]){ 0 }, 32), why);
}

/* Whether the claimant of a claim on x has gone (under the server's
 * lock): its claim then ends. */
static bool claim_gone(struct nbdsrv *srv, struct export *x)
{
	struct pollfd p = { .fd = x->claim_pidfd, .events = POLLIN };

	if (!atomic_load(&x->claim_pid) || x->claim_pidfd < 0 || poll(&p, 1, 0) == 0)
		return false;
	srv_log(srv, LOG_INFO, "export %s: process %d, whose claim on the real-time priority "
		"it was, has ended (revents %#x)", x->e.name, (int)atomic_load(&x->claim_pid),
		(unsigned)p.revents);
	close(x->claim_pidfd);
	x->claim_pidfd = -1;
	atomic_store(&x->claim_pid, 0);
	atomic_fetch_add(&x->claim_gen, 1);
	return true;
}

/* Whether c may hold its export's real-time priority: any connection
 * while no process claims the export (nbdsrv_export_claim), else only
 * the claimant's, known by the kernel's word on a unix socket.  A claim
 * whose process has gone is dropped here. */
static bool claim_allows(struct conn *c)
{
	struct export *x = (struct export *)c->exp;
	pid_t pid;

	c->claim_gen = atomic_load(&x->claim_gen);
	pid = atomic_load(&x->claim_pid);
	if (!pid || (c->peer.known && c->peer.pid == pid))
		return true;
	pthread_mutex_lock(&c->srv->lock);
	(void)claim_gone(c->srv, x);
	pthread_mutex_unlock(&c->srv->lock);
	return atomic_load(&x->claim_pid) == 0;
}

/* Before a request starts, its connection pays for it from its CPU
 * budget (clockwise/admit.h): a read of holes costs no disk time, only
 * CPU and socket time, which no disk's test books.  The connection that
 * holds the real-time priority spends no more than its stream was
 * admitted for, or becomes best effort; every other connection waits
 * while all of them together have spent what admission leaves to best
 * effort on what no disk serves (what a disk serves it books, in the
 * order its weights give: charged here too, a disk faster than that
 * budget lost the weights). */
static int cpu_spend(struct conn *c, const struct cw_nbd_request *req, uint32_t bytes)
{
	const struct nbdsrv_export *e = &c->exp->e;
	int64_t now = cw_now_ns();

	if (!e->ops->cpu_budget)
		return 0;
	/* a process claimed the priority since: only its connections keep
	 * it, and its connection took it over already or will */
	if (c->rt_holder &&
	    (atomic_load_explicit(&((struct export *)c->exp)->holder, memory_order_relaxed) != c ||
	     (atomic_load_explicit(&((struct export *)c->exp)->claim_gen, memory_order_relaxed) !=
		      c->claim_gen && !claim_allows(c))))
		conn_go_best_effort(c, "held the real-time priority that another process claimed");
	/* the priority let go by another connection (it ended, or asked
	 * for more than its budget): the stream's player may have come
	 * while that one held it */
	if (!c->rt_holder && !c->rt_demoted && e->ops->rt_priority &&
	    !atomic_load(&((struct export *)c->exp)->holder))
		conn_go_realtime(c);
	if (!c->rt_holder && bytes && req->type == CW_NBD_CMD_WRITE)
		return 0;
	if (!c->rt_holder && bytes && e->ops->diskless_bytes) {
		bytes = (uint32_t)e->ops->diskless_bytes(e->backend, req->offset, bytes);
		if (!bytes)
			return 0;
	}
	for (;;) {
		_Atomic int64_t *tat = c->rt_holder ? &c->cpu_tat_ns : &c->srv->be_tat_ns;
		int64_t old, next, w;
		int r;

		if (!c->cpu_at_ns || now - c->cpu_at_ns >= CPU_BUDGET_REFRESH_NS) {
			c->cpu_rate_ps = e->ops->cpu_budget(e->backend, c->rt_holder, &c->cpu_model);
			c->cpu_at_ns = now;
		}
		if (c->cpu_rate_ps == UINT64_MAX)
			return 0;
		old = atomic_load_explicit(tat, memory_order_relaxed);
		w = cw_host_budget_take(old, now, c->cpu_rate_ps, cw_host_cost_ps(&c->cpu_model, 1, bytes),
					c->rt_holder ? CW_HOST_RT_BURST_NS : CW_HOST_BE_BURST_NS, &next);
		if (w < 0)	/* no rate: no bound */
			return 0;
		if (w == 0) {
			if (atomic_compare_exchange_weak_explicit(tat, &old, next, memory_order_relaxed,
								  memory_order_relaxed))
				return 0;
			continue;
		}
		if (c->rt_holder) {
			conn_go_best_effort(c, "asked for more than its reservation was admitted for");
			continue;
		}
		flush_wake(c);
		r = cpu_wait(c, w);
		if (r < 0)
			return r;
		now = cw_now_ns();
	}
}

/* Reads and dispatches requests until the client leaves or errs. */
static int transmission(struct conn *c)
{
	uint8_t h[CW_NBD_REQUEST_BYTES];
	int r;

	for (;;) {
		struct cw_nbd_request req;
		struct cw_nbd_verdict v;
		struct slot *s;
		uint32_t bytes;
		int64_t at, at_rd;

		r = conn_read(c, h, sizeof(h));
		if (r < 0)
			return r == -ECONNRESET ? 0 : r;
		at = c->rbuf_at_ns;
		at_rd = c->rbuf_rd_ns;
		r = cw_nbd_decode_request(h, &req);
		if (r < 0) {
			client_log(c->srv, LOG_WARNING, "export %s: bad request magic, closing",
				   c->exp->e.name);
			return r;
		}
		v = cw_nbd_check_request(&c->lim, &req);
		if (v.action == CW_NBD_DISCONNECT) {
			if (req.type != CW_NBD_CMD_DISC)
				client_log(c->srv, LOG_WARNING, "export %s: %s, closing",
					   c->exp->e.name, v.why);
			return req.type == CW_NBD_CMD_DISC ? 0 : -EPROTO;
		}
		bytes = (req.type == CW_NBD_CMD_READ || req.type == CW_NBD_CMD_WRITE) &&
			v.action == CW_NBD_EXEC ? req.length : 0;
		r = cpu_spend(c, &req, bytes);
		if (r < 0)
			return r == -ECONNRESET ? 0 : r;
		s = take_slot(c, bytes);
		if (!s)
			return -EPIPE;
		s->cookie = req.cookie;
		s->err = 0;
		s->wire_error = 0;
		s->why = NULL;
		s->io.op = req.type < CW_ARRAY_SIZE(cmd_op) ? cmd_op[req.type] : NBDSRV_IO_FLUSH;
		s->io.offset = req.offset;
		s->io.length = v.action == CW_NBD_EXEC ? req.length : 0;
		s->io.fua = req.flags & CW_NBD_CMD_FLAG_FUA;
		s->io.may_trim = !(req.flags & CW_NBD_CMD_FLAG_NO_HOLE);
		s->io.fast_zero = req.flags & CW_NBD_CMD_FLAG_FAST_ZERO;
		s->io.req_one = req.flags & CW_NBD_CMD_FLAG_REQ_ONE;
		s->io.n_extents = 0;
		s->io.backend_data = NULL;
		s->io.deadline_ns = 0;
		s->io.arrived_ns = at;
		s->io.parked_ns = c->park_ns;
		s->io.parked_memory = c->park_ns && c->park_memory;
		s->io.reader_rd_fd = at ? c->rd_fd : -1;
		s->io.arrived_rd_ns = at_rd;
		s->io.client_class = conn_class(c);
		s->io.conn_data = &c->backend_conn;

		if (v.action == CW_NBD_REPLY_ERROR) {
			r = conn_skip(c, v.payload);
			if (r < 0) {
				s->io.op = NBDSRV_IO_FLUSH;	/* no bytes to account */
				s->io.length = 0;
				recycle(c, s);
				return r;
			}
			s->wire_error = v.error;
			s->why = v.why;
			s->io.op = NBDSRV_IO_FLUSH;
			s->io.length = 0;
			nbdsrv_io_complete(&s->io, 0);
			continue;
		}
		if (bytes) {
			r = ensure_buf(s, bytes);
			if (r == 0 && req.type == CW_NBD_CMD_WRITE)
				r = conn_read(c, s->io.buf, bytes);
			else if (r < 0 && req.type == CW_NBD_CMD_WRITE)
				r = conn_skip(c, bytes) < 0 ? -ECONNRESET : r;
			if (r == -ECONNRESET || (r < 0 && r != -ENOMEM)) {
				recycle(c, s);
				return r;
			}
			if (r < 0) {
				nbdsrv_io_complete(&s->io, r);
				continue;
			}
		}
		if (s->io.op == NBDSRV_IO_BLOCK_STATUS) {
			r = ensure_buf(s, NBD_EXTENTS_MAX * sizeof(struct cw_nbd_extent));
			if (r < 0) {
				nbdsrv_io_complete(&s->io, r);
				continue;
			}
		}
		if (unaligned(c, &req)) {
			nbdsrv_io_complete(&s->io, serve_unaligned(c, s));
			continue;
		}
		if (modifies(s->io.op))
			write_enter(c, s);
		/* After submit() the slot is the back end's: not a byte of
		 * it may be touched here. */
		r = submit(c, s);
		if (r < 0)
			nbdsrv_io_complete(&s->io, r);
	}
}

/* Takes c off the server's list: from here on the server may be freed,
 * so this is the last look at it.  Returns whether the memory of the
 * ended connections is to be given back to the system now: when the
 * last one ended, or a second after the last time.  On the reader's
 * thread (it counts its own CPU time). */
static bool conn_unlink(struct conn *c)
{
	struct nbdsrv *srv = c->srv;
	int64_t now = cw_now_ns();
	bool trim = false;

	pthread_mutex_lock(&srv->lock);
	if (atomic_load(&c->clocks))
		srv->rt_cpu_gone_ns += (uint64_t)cw_clock_ns(CLOCK_THREAD_CPUTIME_ID) +
				       atomic_load(&c->writer_cpu_end);
	if (c->prev)
		c->prev->next = c->next;
	else
		srv->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (c->refuse) {
		srv->n_refusing--;
	} else if (c->provisional && !c->evicted) {
		srv->n_provisional--;
	} else if (!c->evicted) {
		srv->n_conns--;
		atomic_fetch_sub_explicit(&srv->n_active, 1, memory_order_relaxed);
		if (c->exp && (srv->n_conns == 0 || now - srv->last_trim_ns >= 1000000000)) {
			trim = true;
			srv->last_trim_ns = now;
		}
	}
	pthread_cond_broadcast(&srv->conns_gone);
	pthread_mutex_unlock(&srv->lock);
	return trim;
}

static void conn_drop_bufs(struct conn *c)
{
	unsigned i;

	for (i = 0; i < c->n_slots; i++)
		drop_buf(c->srv, &c->slots[i]);
}

/* After conn_unlink(): c->srv is not to be touched. */
static void conn_free(struct conn *c)
{
	if (c->rd_fd >= 0)
		close(c->rd_fd);
	nbdtls_free(c->sess);
	free(c->slots);
	free(c->rbuf);
	free(c->rmw_buf);
	free(c->blk_buf);
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}

static int conn_setup_slots(struct conn *c)
{
	unsigned i;

	c->n_slots = c->srv->cfg.max_inflight;
	c->slots = calloc(c->n_slots, sizeof(*c->slots));
	if (!c->slots)
		return -ENOMEM;
	for (i = 0; i < c->n_slots; i++) {
		c->slots[i].conn = c;
		c->slots[i].next = i + 1 < c->n_slots ? &c->slots[i + 1] : NULL;
	}
	c->free_fresh = c->slots;
	return 0;
}

/* Gives glibc's free memory back to the system.  Under a sanitizer its
 * own allocator serves malloc and free, so glibc's arenas hold nothing of
 * ours; and glibc's malloc_trim, walking them there, once died of a SEGV
 * in mtrim as a connection ended (AddressSanitizer build,
 * test-clockwised-emulate).  There it does nothing. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CW_SANITIZED_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CW_SANITIZED_HEAP 1
#endif
#endif
static void heap_trim(void)
{
#ifndef CW_SANITIZED_HEAP
	malloc_trim(0);
#endif
}

/* Whether c takes its export's real-time priority: when nobody holds
 * it, or, for the claimant's connection, from a connection of another
 * process (the fio client that connected before the player: it notices
 * at its next request, cpu_spend).  Left as it is when the claimant's
 * own connection holds it.  Under the server's lock, so that two
 * claimant connections do not take it from each other. */
static bool conn_take(struct conn *c)
{
	struct export *x = (struct export *)c->exp;
	pid_t claim = atomic_load(&x->claim_pid);
	bool mine = claim && c->peer.known && c->peer.pid == claim, took;
	struct conn *cur;

	pthread_mutex_lock(&c->srv->lock);
	do {
		cur = atomic_load(&x->holder);
		took = false;
		if (cur && (!mine || x->holder_pid == claim))
			break;
		took = atomic_compare_exchange_weak(&x->holder, &cur, c);
	} while (!took);
	if (took)
		x->holder_pid = c->peer.known ? c->peer.pid : 0;
	pthread_mutex_unlock(&c->srv->lock);
	return took;
}

/* A connection to an export whose requests have deadlines reads and
 * replies at real-time priority (its writer inherits it): a busy CPU would
 * otherwise delay the requests before the disk's dispatcher sees them and
 * the data after.  Without the privilege it says so once.  Only one
 * connection of the export at a time, the first, holds that priority and
 * the stream's CPU budget (cpu_spend), until it ends or asks for more
 * than that (then another may take it, at its next request): any client
 * of an export bound to a reservation could otherwise read holes at
 * real-time priority, pure CPU that starved the streams' threads; the
 * others are best effort.  First come is a weak rule (a client that
 * connects before the player, or again and again, takes the priority
 * first): a player's process claims it (cwctl resv claim; cwstream does
 * with --resv), and then only its connections hold it (claim_allows), its
 * connection taking it over at once from another process's (conn_take).
 * Taken later, the writer is raised too; the CPU its threads spent before
 * is not the stream's, and is left out of the host's watch (their clocks
 * are not set). */
static void conn_go_realtime(struct conn *c)
{
	static atomic_bool told;
	const struct nbdsrv_export *e = &c->exp->e;
	struct sched_param sp = { 0 };
	int r;

	if (!e->ops->rt_priority)
		return;
	if (!claim_allows(c)) {
		c->rt_demoted = true;	/* another process's: not asked again */
		return;
	}
	if (!conn_take(c))
		return;
	sp.sched_priority = e->ops->rt_priority(e->backend);
	if (sp.sched_priority <= 0) {
		conn_give_back(c);
		c->rt_demoted = true;	/* none to take: not asked again */
		return;
	}
	c->rt_holder = true;
	c->cpu_at_ns = 0;
	r = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
	if (r == 0 && c->writer_started)
		(void)pthread_setschedparam(c->writer, SCHED_FIFO, &sp);
	c->realtime = r == 0;
	if (c->realtime && c->rd_fd < 0)
		c->rd_fd = rundelay_open();
	if (r && !atomic_exchange(&told, true))
		srv_log(c->srv, LOG_NOTICE, "export %s: connections stay at normal priority: %s",
			e->name, strerrordesc_np(r) ?: "error");
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	bool trim;
	int r;

	r = handshake(c);
	if (c->refuse) {
		client_log(c->srv, LOG_WARNING, "refused a client of %s: %s",
			   peer_name(&c->peer, (char[32]){ 0 }, 32), c->refuse);
		goto out;
	}
	if (r < 0) {
		if (r != -ECONNABORTED && r != -ECONNRESET)
			client_log(c->srv, LOG_INFO, "handshake of a client of %s ended: %s",
				   peer_name(&c->peer, (char[32]){ 0 }, 32),
				   strerrordesc_np(-r) ?: "error");
		goto out;
	}
	/* Set up at normal priority, so a client connecting does not hold
	 * back streams already playing; the writer inherits the priority. */
	r = conn_setup_slots(c);
	if (r < 0)
		goto out;
	conn_go_realtime(c);
	thread_name(pthread_self(), "cw-r:%s", c->exp->e.name);
	r = -pthread_create(&c->writer, NULL, writer_main, c);
	if (r < 0) {
		srv_log(c->srv, LOG_ERR, "cannot start a writer thread: %s",
			strerrordesc_np(-r) ?: "error");
		goto out;
	}
	c->writer_started = true;
	thread_name(c->writer, "cw-w:%s", c->exp->e.name);
	if (c->realtime && pthread_getcpuclockid(pthread_self(), &c->reader_clk) == 0 &&
	    pthread_getcpuclockid(c->writer, &c->writer_clk) == 0)
		atomic_store(&c->clocks, true);
	tls_reader = c;
	r = transmission(c);
	flush_wake(c);
	tls_reader = NULL;
	/* Protocol violations were logged where they were seen. */
	if (r == -ETIMEDOUT)
		client_log(c->srv, LOG_INFO, "export %s: a client of %s was idle too long, closed",
			   c->exp->e.name, peer_name(&c->peer, (char[32]){ 0 }, 32));
	else if (r == -ETIME)
		client_log(c->srv, LOG_WARNING, "export %s: a client of %s left a TLS record "
			   "unfinished for %lld s, closed", c->exp->e.name,
			   peer_name(&c->peer, (char[32]){ 0 }, 32),
			   (long long)(c->srv->cfg.stall_timeout_ns / 1000000000));
	else if (r < 0 && r != -EPIPE && r != -EPROTO && r != -EBADMSG)
		client_log(c->srv, LOG_INFO, "export %s: connection ended: %s", c->exp->e.name,
			   strerrordesc_np(-r) ?: "error");
	/* Let every request in flight finish and its reply go out. */
	atomic_store_explicit(&c->reader_done, true, memory_order_seq_cst);
	park_wake(&c->writer_park);
	pthread_join(c->writer, NULL);
	if (c->rt_holder)
		conn_give_back(c);
out:
	conn_drop_bufs(c);
	trim = conn_unlink(c);
	conn_free(c);
	/* Buffers of up to a few MiB per request, freed on many threads,
	 * stay in glibc's arenas otherwise: after a load, the daemon went
	 * on holding hundreds of MiB. */
	if (trim)
		heap_trim();
	return NULL;
}

/* ------------------------------------------------------------------ */
/* accepting */

static bool same_user(const struct nbdsrv_peer *a, const struct nbdsrv_peer *b)
{
	return a->known == b->known && (!a->known || a->uid == b->uid);
}

/* Counted connections (served, or in a handshake that had a place) of
 * the same user as peer; under srv->lock. */
static unsigned user_conns(struct nbdsrv *srv, const struct nbdsrv_peer *peer)
{
	unsigned n = 0;

	for (struct conn *c = srv->conns; c; c = c->next)
		if (!c->refuse && !c->evicted && !c->provisional && same_user(&c->peer, peer))
			n++;
	return n;
}

/* Root and the server's own user: the ones who must be able to get in
 * to set things right. */
static bool peer_is_admin(const struct nbdsrv_peer *p)
{
	return p->known && (p->uid == 0 || p->uid == geteuid());
}

/* Why peer may not have one more counted connection, or NULL; *ret_by_user
 * says whether it is its user's share that is full.  The last places are
 * kept for admins.  Under srv->lock. */
static const char *over_limit(struct nbdsrv *srv, const struct nbdsrv_peer *peer,
			      bool *ret_by_user)
{
	unsigned cap = srv->cfg.max_connections;

	*ret_by_user = false;
	if (!peer_is_admin(peer))
		cap -= CW_MIN(NBDSRV_ADMIN_RESERVE, cap - 1);
	if (srv->n_conns >= cap)
		return "too many connections to this server";
	*ret_by_user = true;
	if (user_conns(srv, peer) >= srv->cfg.max_per_user)
		return peer->known ? "too many connections of this user" :
				     "too many connections from the network";
	return NULL;
}

/* The oldest counted connection still in its handshake (no export chosen,
 * so not yet authenticated), of peer's user when by_user, else of anyone
 * but an admin: the one to give way to a client that made progress.
 * Under srv->lock. */
static struct conn *stalled(struct nbdsrv *srv, const struct nbdsrv_peer *peer, bool by_user)
{
	struct conn *victim = NULL;

	/* The list holds the newest first. */
	for (struct conn *c = srv->conns; c; c = c->next) {
		if (c->refuse || c->evicted || c->provisional || c->exp)
			continue;
		if (by_user ? !same_user(&c->peer, peer) : peer_is_admin(&c->peer))
			continue;
		victim = c;
	}
	return victim;
}

/* Ends c's handshake from the outside: it counts no more.  Under srv->lock. */
static void evict(struct nbdsrv *srv, struct conn *c)
{
	c->evicted = true;
	if (c->provisional) {
		srv->n_provisional--;
	} else {
		srv->n_conns--;
		atomic_fetch_sub_explicit(&srv->n_active, 1, memory_order_relaxed);
	}
	shutdown(c->fd, SHUT_RDWR);
}

/* A connection accepted over a limit (provisional) sent an option other
 * than STARTTLS (under TLS, where TLS is required), so it is no client
 * stalled in its handshake: it takes a
 * counted place, a free one or that of the oldest stalled connection.
 * NULL, or why it cannot.  Under srv->lock. */
static const char *claim_place(struct conn *c)
{
	struct nbdsrv *srv = c->srv;
	const char *why;
	struct conn *v;
	bool by_user;

	while ((why = over_limit(srv, &c->peer, &by_user))) {
		v = stalled(srv, &c->peer, by_user);
		if (!v)
			return why;
		evict(srv, v);
	}
	c->provisional = false;
	srv->n_provisional--;
	srv->n_conns++;
	atomic_fetch_add_explicit(&srv->n_active, 1, memory_order_relaxed);
	return NULL;
}

static void accept_one(struct nbdsrv *srv, unsigned li)
{
	struct nbdsrv_peer peer = { .known = false };
	const char *refuse = NULL;
	struct conn *c;
	pthread_attr_t attr;
	int64_t now;
	bool by_user, provisional = false;
	int fd, one = 1, r;

	fd = accept4(srv->listen_fds[li], NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			client_log(srv, LOG_WARNING, "accept: %m");
		return;
	}
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (srv->unix_paths[li])
		peer_from_socket(fd, &peer);
	now = cw_now_ns();

	pthread_mutex_lock(&srv->lock);
	/* Over a limit while connections stall in their handshake (a
	 * partial TLS record, or nothing at all), a newcomer gets a
	 * provisional place: if it makes progress it takes the place of the
	 * oldest of them (claim_place), so clients that never finish a
	 * handshake cannot lock out those that do.  The provisional places
	 * are few: the oldest gives way to the newest. */
	refuse = over_limit(srv, &peer, &by_user);
	if (refuse && !srv->stopped && stalled(srv, &peer, by_user)) {
		refuse = NULL;
		provisional = true;
		if (srv->n_provisional >= REFUSING_MAX) {
			struct conn *oldest = NULL;

			for (c = srv->conns; c; c = c->next)
				if (c->provisional && !c->evicted)
					oldest = c;
			evict(srv, oldest);
		}
	}
	/* A client over a limit is told so, by a few threads at most: a
	 * flood of them is closed without a word. */
	if (srv->stopped || (refuse && srv->n_refusing >= REFUSING_MAX)) {
		pthread_mutex_unlock(&srv->lock);
		if (!srv->stopped)
			client_log(srv, LOG_WARNING, "closed a client of %s at once: %s",
				   peer_name(&peer, (char[32]){ 0 }, 32), refuse);
		close(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (c)
		c->rbuf = malloc(RBUF_BYTES);
	if (!c || !c->rbuf) {
		pthread_mutex_unlock(&srv->lock);
		free(c);
		close(fd);
		return;
	}
	c->srv = srv;
	c->fd = fd;
	c->rd_fd = -1;
	c->tls_mode = srv->listen_tls[li];
	c->peer = peer;
	c->since_ns = now;
	if (!srv->unix_paths[li])
		tcp_peer_addr(fd, c->addr, sizeof(c->addr));
	c->refuse = refuse;
	c->deadline_ns = now + (refuse ? CW_MIN(REFUSE_TIMEOUT_NS, srv->cfg.handshake_timeout_ns)
				       : srv->cfg.handshake_timeout_ns);
	c->next = srv->conns;
	if (c->next)
		c->next->prev = c;
	srv->conns = c;
	c->provisional = provisional;
	if (refuse) {
		srv->n_refusing++;
	} else if (provisional) {
		srv->n_provisional++;
	} else {
		srv->n_conns++;
		atomic_fetch_add_explicit(&srv->n_active, 1, memory_order_relaxed);
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	r = pthread_create(&(pthread_t){ 0 }, &attr, conn_main, c);
	pthread_attr_destroy(&attr);
	pthread_mutex_unlock(&srv->lock);
	if (r != 0) {
		srv_log(srv, LOG_ERR, "cannot start a connection thread: %s", strerror(r));
		conn_unlink(c);
		conn_free(c);
	}
}

static void *acceptor_main(void *arg)
{
	struct nbdsrv *srv = arg;
	struct pollfd pfd[NBDSRV_LISTEN_MAX + 1];
	unsigned i;

	for (i = 0; i < srv->n_listen; i++)
		pfd[i] = (struct pollfd){ .fd = srv->listen_fds[i], .events = POLLIN };
	pfd[srv->n_listen] = (struct pollfd){ .fd = srv->wake_fd, .events = POLLIN };
	for (;;) {
		/* Wakes once a second to say how many messages about clients
		 * it left out, after a storm that then stopped. */
		int n = poll(pfd, srv->n_listen + 1, 1000);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			srv_log(srv, LOG_ERR, "poll: %m");
			break;
		}
		flush_dropped(srv, cw_now_ns());
		if (n == 0)
			continue;
		if (pfd[srv->n_listen].revents)
			break;
		for (i = 0; i < srv->n_listen; i++)
			if (pfd[i].revents & POLLIN)
				accept_one(srv, i);
	}
	return NULL;
}

/* ------------------------------------------------------------------ */
/* setup */

int nbdsrv_new(const struct nbdsrv_config *cfg, struct nbdsrv **ret_srv)
{
	struct nbdsrv *srv = calloc(1, sizeof(*srv));

	if (!srv)
		return -ENOMEM;
	if (cfg)
		srv->cfg = *cfg;
	else
		srv->cfg.default_export = -1;
	if (!srv->cfg.max_request)
		srv->cfg.max_request = CW_NBD_REQUEST_MAX_DEFAULT;
	if (!srv->cfg.max_connections)
		srv->cfg.max_connections = 64;
	if (!srv->cfg.max_per_user)
		srv->cfg.max_per_user = CW_MAX(srv->cfg.max_connections / 2, 1u);
	if (!srv->cfg.handshake_timeout_ns)
		srv->cfg.handshake_timeout_ns = HANDSHAKE_TIMEOUT_DEFAULT_NS;
	if (!srv->cfg.reply_memory_bytes)
		srv->cfg.reply_memory_bytes = REPLY_MEMORY_DEFAULT;
	if (!srv->cfg.stall_timeout_ns)
		srv->cfg.stall_timeout_ns = STALL_TIMEOUT_DEFAULT_NS;
	srv->floor_bytes = srv->cfg.reply_memory_bytes / 2 / srv->cfg.max_connections;
	srv->pool_bytes = srv->cfg.reply_memory_bytes - srv->floor_bytes * srv->cfg.max_connections;
	if (!srv->cfg.max_inflight)
		srv->cfg.max_inflight = 64;
	if (srv->cfg.max_inflight > 4096 || srv->cfg.max_request > (1u << 30)) {
		free(srv);
		return -EINVAL;
	}
	srv->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (srv->wake_fd < 0) {
		int r = -errno;

		free(srv);
		return r;
	}
	srv->exports = calloc(CW_EXPORTS_MAX, sizeof(*srv->exports));
	srv->doms = calloc(CW_EXPORTS_MAX, sizeof(*srv->doms));
	srv->infos = calloc(CW_EXPORTS_MAX, sizeof(*srv->infos));
	srv->live = calloc(CW_EXPORTS_MAX, sizeof(*srv->live));
	if (!srv->exports || !srv->doms || !srv->infos || !srv->live) {
		free(srv->exports);
		free(srv->doms);
		free(srv->infos);
		free(srv->live);
		close(srv->wake_fd);
		free(srv);
		return -ENOMEM;
	}
	pthread_mutex_init(&srv->lock, NULL);
	pthread_mutex_init(&srv->log_lock, NULL);
	pthread_cond_init(&srv->conns_gone, NULL);
	*ret_srv = srv;
	return 0;
}

/* The handshake's view of the exports not removed; under srv->lock. */
static void rebuild_infos(struct nbdsrv *srv)
{
	size_t i;

	srv->n_live = 0;
	for (i = 0; i < srv->n_exports; i++) {
		const struct nbdsrv_export *e = &srv->exports[i].e;
		uint16_t f;

		if (srv->exports[i].removed)
			continue;
		f = cw_nbd_eflags(&(struct cw_nbd_caps){
			.read_only = e->read_only, .can_flush = true,
			.can_trim = e->ops->trim != NULL, .can_zero = e->ops->zero != NULL,
			.can_fast_zero = e->fast_zero, .can_cache = e->ops->cache != NULL,
			.multi_conn = e->read_only || e->flush_global, .structured = true });
		if (e->rotational)
			f |= CW_NBD_FLAG_ROTATIONAL;
		srv->infos[srv->n_live] = (struct cw_nbd_export_info){
			.name = e->name, .description = e->description, .size = e->size,
			.eflags = f, .min_block = e->min_block, .pref_block = e->pref_block,
			.max_block = e->max_block, .block_status = e->ops->block_status != NULL,
		};
		srv->live[srv->n_live++] = i;
	}
}

static bool export_in_use(struct nbdsrv *srv, const struct export *x)
{
	for (struct conn *c = srv->conns; c; c = c->next)
		if (c->exp == x)
			return true;
	return false;
}

/* The domain of the bytes behind key, shared with the exports that use
 * it already; under srv->lock.  There are as many domains as export
 * slots, so one is always free. */
static struct rmw_dom *dom_take(struct nbdsrv *srv, const void *key)
{
	struct rmw_dom *d, *free_d = NULL;

	for (d = srv->doms; d < srv->doms + CW_EXPORTS_MAX; d++) {
		if (d->refs && d->key == key)
			break;
		if (!d->refs && !free_d)
			free_d = d;
	}
	if (d == srv->doms + CW_EXPORTS_MAX) {
		d = free_d;
		d->key = key;
		pthread_mutex_init(&d->lock, NULL);
		atomic_init(&d->writes, 0);
		atomic_init(&d->rmw_active, 0);
	}
	d->refs++;
	return d;
}

int nbdsrv_add_export(struct nbdsrv *srv, const struct nbdsrv_export *exp)
{
	struct export *x = NULL;
	char *name, *desc;
	const struct nbdsrv_backend_ops *ops = exp->ops;
	uint32_t min, pref, max;
	size_t i;
	int r = 0;

	if (!exp->name || strlen(exp->name) > 256 || !ops || !ops->pread ||
	    (!exp->read_only && (!ops->pwrite || !ops->flush)))
		return -EINVAL;
	if (exp->description && strlen(exp->description) > 1024)
		return -EINVAL;
	min = exp->min_block ? exp->min_block : 1;
	pref = exp->pref_block ? exp->pref_block : CW_MAX(4096u, min);
	max = exp->max_block ? exp->max_block : srv->cfg.max_request;
	/* The protocol's rules for NBD_INFO_BLOCK_SIZE. */
	if (!cw_is_pow2_u64(min) || min > 65536 || !cw_is_pow2_u64(pref) ||
	    pref < CW_MAX(512u, min) || max % min || max < CW_MIN(pref, exp->size) ||
	    max > srv->cfg.max_request || exp->size % min)
		return -EINVAL;

	name = strdup(exp->name);
	desc = exp->description ? strdup(exp->description) : NULL;
	if (!name || (exp->description && !desc)) {
		free(name);
		free(desc);
		return -ENOMEM;
	}
	pthread_mutex_lock(&srv->lock);
	for (i = 0; i < srv->n_exports; i++) {
		if (!srv->exports[i].removed && strcmp(srv->exports[i].e.name, exp->name) == 0) {
			r = -EEXIST;
			goto out;
		}
		if (!x && srv->exports[i].removed && !export_in_use(srv, &srv->exports[i]))
			x = &srv->exports[i];
	}
	if (!x) {
		if (srv->n_exports == CW_EXPORTS_MAX) {
			r = -ENOSPC;
			goto out;
		}
		x = &srv->exports[srv->n_exports++];
	}
	if (x->e.name && x->claim_pidfd >= 0)	/* a slot used before (a new one is zeroed) */
		close(x->claim_pidfd);
	free((char *)x->e.name);
	free((char *)x->e.description);
	/* No connection uses the slot any more: nor its domain. */
	if (x->dom && --x->dom->refs == 0)
		pthread_mutex_destroy(&x->dom->lock);
	*x = (struct export){ .e = *exp, .claim_pidfd = -1 };
	x->e.name = CW_TAKE_PTR(name);
	x->e.description = CW_TAKE_PTR(desc);
	x->e.min_block = min;
	x->e.pref_block = pref;
	x->e.max_block = max;
	x->lim = (struct cw_nbd_limits){
		.size = exp->size,
		.min_block = min,
		.max_request = max,
	};
	x->dom = dom_take(srv, exp->data_key ? exp->data_key : (const void *)x);
	rebuild_infos(srv);
out:
	pthread_mutex_unlock(&srv->lock);
	free(name);
	free(desc);
	return r;
}

/* The export served as name, or NULL (under the server's lock). */
static struct export *export_named(struct nbdsrv *srv, const char *name)
{
	for (size_t i = 0; i < srv->n_exports; i++)
		if (!srv->exports[i].removed && strcmp(srv->exports[i].e.name, name) == 0)
			return &srv->exports[i];
	return NULL;
}

int nbdsrv_remove_export(struct nbdsrv *srv, const char *name)
{
	struct export *x;
	struct conn *c;

	pthread_mutex_lock(&srv->lock);
	x = export_named(srv, name);
	if (!x) {
		pthread_mutex_unlock(&srv->lock);
		return -ENOENT;
	}
	/* No new client can choose it from here on; the ones that did are
	 * cut off, and each ends once its requests in flight completed. */
	x->removed = true;
	rebuild_infos(srv);
	for (c = srv->conns; c; c = c->next)
		if (c->exp == x)
			shutdown(c->fd, SHUT_RDWR);
	while (export_in_use(srv, x))
		pthread_cond_wait(&srv->conns_gone, &srv->lock);
	pthread_mutex_unlock(&srv->lock);
	return 0;
}

int nbdsrv_export_clients(struct nbdsrv *srv, const char *name, struct nbdsrv_client *ret,
			  size_t max, size_t *ret_n)
{
	const struct export *x;
	size_t n = 0;

	pthread_mutex_lock(&srv->lock);
	x = export_named(srv, name);
	for (const struct conn *c = srv->conns; x && c; c = c->next) {
		if (c->exp != x)
			continue;
		if (n < max) {
			ret[n] = (struct nbdsrv_client){ .known = c->peer.known, .uid = c->peer.uid,
							 .pid = c->peer.pid, .since_ns = c->since_ns,
							 .realtime = atomic_load(&c->rt_holder) };
			snprintf(ret[n].addr, sizeof(ret[n].addr), "%s", c->addr);
		}
		n++;
	}
	pthread_mutex_unlock(&srv->lock);
	if (!x)
		return -ENOENT;
	*ret_n = n;
	return 0;
}

int nbdsrv_export_claim(struct nbdsrv *srv, const char *name, pid_t pid, pid_t *ret_pid)
{
	struct export *x;
	int fd = -1, r = 0;

	if (pid > 0) {
		fd = pidfd_open(pid, 0);
		if (fd < 0)
			return -errno;
	}
	pthread_mutex_lock(&srv->lock);
	x = export_named(srv, name);
	if (!x) {
		r = -ENOENT;
	} else if (pid < 0) {
		(void)claim_gone(srv, x);
	} else {
		if (x->claim_pidfd >= 0)
			close(x->claim_pidfd);
		x->claim_pidfd = fd;
		fd = -1;
		atomic_store(&x->claim_pid, pid);
		atomic_fetch_add(&x->claim_gen, 1);
	}
	if (x && ret_pid)
		*ret_pid = atomic_load(&x->claim_pid);
	pthread_mutex_unlock(&srv->lock);
	if (fd >= 0)
		close(fd);
	if (r == 0 && pid > 0)
		srv_log(srv, LOG_INFO, "export %s: the real-time priority is claimed by process %d",
			name, (int)pid);
	else if (r == 0 && pid == 0)
		srv_log(srv, LOG_INFO, "export %s: the claim on the real-time priority is dropped",
			name);
	return r;
}

int nbdsrv_set_export_size(struct nbdsrv *srv, const char *name, uint64_t size)
{
	int r = -ENOENT;
	size_t i;

	pthread_mutex_lock(&srv->lock);
	for (i = 0; i < srv->n_exports; i++) {
		struct export *x = &srv->exports[i];

		if (x->removed || strcmp(x->e.name, name) != 0)
			continue;
		r = size % x->e.min_block ? -EINVAL : 0;
		if (r == 0) {
			/* A connection copies lim under this lock at its
			 * handshake and reads only its copy afterwards. */
			x->e.size = size;
			x->lim.size = size;
			rebuild_infos(srv);
		}
		break;
	}
	pthread_mutex_unlock(&srv->lock);
	return r;
}

static int add_listener(struct nbdsrv *srv, int fd, const char *unix_path,
			enum cw_nbd_tls tls)
{
	if (srv->n_listen >= NBDSRV_LISTEN_MAX) {
		close(fd);
		return -EMFILE;
	}
	if (listen(fd, 128) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	srv->listen_fds[srv->n_listen] = fd;
	srv->unix_paths[srv->n_listen] = unix_path ? strdup(unix_path) : NULL;
	srv->listen_tls[srv->n_listen] = tls;
	srv->n_listen++;
	return 0;
}

/* Replaces a socket left by a server that is gone, never a live one (a
 * second daemon must not take the first one's clients) nor any other
 * file. */
static int unlink_stale(const struct sockaddr_un *sa)
{
	_cleanup_close_ int probe = -1;
	struct stat st;

	if (lstat(sa->sun_path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe < 0)
		return -errno;
	if (connect(probe, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
		return -EADDRINUSE;
	return unlink(sa->sun_path) < 0 && errno != ENOENT ? -errno : 0;
}

/* A listener may offer TLS only with credentials to offer. */
static int check_tls(const struct nbdsrv *srv, enum cw_nbd_tls tls)
{
	if (tls > CW_NBD_TLS_REQUIRE || (tls != CW_NBD_TLS_OFF && !srv->cfg.tls_creds))
		return -EINVAL;
	return 0;
}

int nbdsrv_listen_unix(struct nbdsrv *srv, const char *path,
			   const struct nbdsrv_unix_perm *perm, enum cw_nbd_tls tls)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = -1;
	mode_t mode = perm && perm->mode ? perm->mode : 0660;
	int r;

	if (srv->started)
		return -EBUSY;
	r = check_tls(srv, tls);
	if (r < 0)
		return r;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	r = unlink_stale(&sa);
	if (r < 0)
		return r;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	/* The file appears with the umask's mode (0777 under umask 000):
	 * set the configured one before listen(), so no client can connect
	 * in between. */
	if (chmod(path, mode) < 0 ||
	    (perm && (perm->owner != (uid_t)-1 || perm->group != (gid_t)-1) &&
	     chown(path, perm->owner, perm->group) < 0)) {
		r = -errno;
		unlink(path);
		return r;
	}
	r = add_listener(srv, CW_TAKE_FD(fd), path, tls);
	if (r < 0)
		unlink(path);
	return r;
}

int nbdsrv_listen_tcp(struct nbdsrv *srv, const char *host, const char *port,
			  enum cw_nbd_tls tls)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_ADDRCONFIG };
	struct addrinfo *res, *ai;
	int r, n = 0, last = -EADDRNOTAVAIL;

	if (srv->started)
		return -EBUSY;
	r = check_tls(srv, tls);
	if (r < 0)
		return r;
	/* No host means loopback: exports are not for the network unless
	 * the configuration says so. */
	if (!host || !*host) {
		host = NULL;
		hints.ai_flags &= ~AI_PASSIVE;
	}
	r = getaddrinfo(host, port, &hints, &res);
	if (r != 0)
		return r == EAI_SYSTEM ? -errno : -EADDRNOTAVAIL;
	for (ai = res; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		int one = 1;

		if (fd < 0) {
			last = -errno;
			continue;
		}
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6)
			(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
			last = -errno;
			close(fd);
			continue;
		}
		r = add_listener(srv, fd, NULL, tls);
		/* Full: an error, not an address left out in silence. */
		if (r == -EMFILE) {
			freeaddrinfo(res);
			return r;
		}
		if (r < 0) {
			last = r;
			continue;
		}
		n++;
	}
	freeaddrinfo(res);
	return n > 0 ? 0 : last;
}

int nbdsrv_start(struct nbdsrv *srv)
{
	int r;

	if (srv->started)
		return -EBUSY;
	if (srv->n_listen == 0 || (srv->n_exports == 0 && !srv->cfg.live_exports))
		return -EINVAL;
	if (srv->cfg.default_export >= (int)srv->n_exports && !srv->cfg.live_exports)
		return -EINVAL;
	r = -pthread_create(&srv->acceptor, NULL, acceptor_main, srv);
	if (r < 0)
		return r;
	thread_name(srv->acceptor, "cw-accept");
	srv->started = true;
	return 0;
}

uint64_t nbdsrv_rt_cpu_ns(struct nbdsrv *srv)
{
	uint64_t ns;

	pthread_mutex_lock(&srv->lock);
	ns = srv->rt_cpu_gone_ns;
	for (struct conn *c = srv->conns; c; c = c->next) {
		uint64_t w;

		if (!atomic_load(&c->clocks))
			continue;
		w = atomic_load(&c->writer_cpu_end);
		ns += (uint64_t)cw_clock_ns(c->reader_clk) +
		      (w ? w : (uint64_t)cw_clock_ns(c->writer_clk));
	}
	pthread_mutex_unlock(&srv->lock);
	return ns;
}

unsigned nbdsrv_connections(struct nbdsrv *srv)
{
	unsigned n;

	pthread_mutex_lock(&srv->lock);
	n = srv->n_conns;
	pthread_mutex_unlock(&srv->lock);
	return n;
}

void nbdsrv_stop(struct nbdsrv *srv)
{
	struct timespec deadline;
	struct conn *c;
	unsigned i;

	if (!srv->started || srv->stopped)
		return;
	pthread_mutex_lock(&srv->lock);
	srv->stopped = true;
	pthread_mutex_unlock(&srv->lock);
	(void)eventfd_write(srv->wake_fd, 1);
	pthread_join(srv->acceptor, NULL);
	for (i = 0; i < srv->n_listen; i++) {
		close(srv->listen_fds[i]);
		srv->listen_fds[i] = -1;
	}

	/* Stop reading from every client; each connection then finishes
	 * what is in flight and closes itself. */
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += STOP_GRACE_S;
	pthread_mutex_lock(&srv->lock);
	for (c = srv->conns; c; c = c->next)
		shutdown(c->fd, SHUT_RD);
	while (srv->n_conns + srv->n_refusing + srv->n_provisional > 0) {
		if (pthread_cond_timedwait(&srv->conns_gone, &srv->lock, &deadline) == ETIMEDOUT) {
			/* A client that takes no replies must not hold
			 * the daemon: cut its sends too. */
			for (c = srv->conns; c; c = c->next)
				shutdown(c->fd, SHUT_RDWR);
			pthread_cond_wait(&srv->conns_gone, &srv->lock);
		}
	}
	pthread_mutex_unlock(&srv->lock);
}

void nbdsrv_free(struct nbdsrv *srv)
{
	size_t i;

	if (!srv)
		return;
	nbdsrv_stop(srv);
	for (i = 0; i < srv->n_listen; i++) {
		if (srv->listen_fds[i] >= 0)
			close(srv->listen_fds[i]);
		if (srv->unix_paths[i])
			unlink(srv->unix_paths[i]);
		free(srv->unix_paths[i]);
	}
	for (i = 0; i < srv->n_exports; i++) {
		free((char *)srv->exports[i].e.name);
		free((char *)srv->exports[i].e.description);
		if (srv->exports[i].claim_pidfd >= 0)
			close(srv->exports[i].claim_pidfd);
	}
	free(srv->exports);
	free(srv->doms);
	free(srv->infos);
	free(srv->live);
	close(srv->wake_fd);
	pthread_cond_destroy(&srv->conns_gone);
	pthread_mutex_destroy(&srv->lock);
	pthread_mutex_destroy(&srv->log_lock);
	free(srv);
}
