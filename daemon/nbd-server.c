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
#include <netdb.h>
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <clockwise/nbd.h>
#include "common/cleanup.h"
#include "common/util.h"
#include "nbd-server.h"

#define MAX_LISTEN 8
#define RBUF_BYTES (64 * 1024)
#define BUF_ALIGN 4096
/* Slot buffers up to this size stay allocated between requests; larger
 * ones are released so an idle connection does not pin 32 MiB a slot. */
#define BUF_KEEP_BYTES (1u << 20)
/* Payload bytes in flight per connection before the reader waits. */
#define INFLIGHT_BYTES_MAX (128u << 20)
/* The handshake must finish this fast, or the client is dropped. */
#define HANDSHAKE_TIMEOUT_S 30
/* A stop waits this long for clients to take their last replies. */
#define STOP_GRACE_S 10
#define BATCH_MAX 256

/* Exports live in a fixed array, so a connection's pointer to its export
 * never moves; a removed one stays (name and all) until its slot is
 * reused, which only happens once no connection uses it. */
#define EXPORTS_MAX 256

struct export {
	struct nbdsrv_export e;	/* name and description owned */
	struct cw_nbd_limits lim;
	bool removed;
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
};

struct conn {
	struct nbdsrv *srv;
	int fd;
	struct conn *prev, *next;	/* server list, under srv->lock */
	const struct export *exp;
	struct cw_nbd_limits lim;

	/* reader only */
	struct slot *slots;
	unsigned n_slots;
	struct slot *free_local;
	uint32_t want_bytes;		/* what take_slot() waits to fit */
	bool wake_pending;		/* completions the writer has not heard of */
	uint8_t *rbuf;
	size_t rpos, rlen;
	uint32_t wait_avg;		/* recent waits for input, smoothed (ns) */
	bool realtime;			/* runs SCHED_FIFO: never polls */

	/* shared, lock-free */
	_Atomic(struct slot *) free_shared;	/* writer pushes, reader takes all */
	_Atomic(struct slot *) done;		/* back ends push, writer takes all */
	atomic_uint inflight;			/* slots out of the free stacks */
	atomic_uint completers;			/* threads inside nbdsrv_io_complete() */
	atomic_uint inflight_bytes;
	atomic_int writer_sleeping;		/* futex words */
	atomic_int reader_sleeping;
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
	struct cw_nbd_export_info *infos;	/* the handshake's view, under lock */
	size_t *live;				/* infos[i] is exports[live[i]] */
	size_t n_live;

	int listen_fds[MAX_LISTEN];
	char *unix_paths[MAX_LISTEN];
	unsigned n_listen;
	int wake_fd;				/* eventfd: stop the acceptor */
	pthread_t acceptor;
	bool started, stopped;

	pthread_mutex_t lock;			/* conns, n_conns; infos, live once started */
	pthread_cond_t conns_gone;
	struct conn *conns;
	unsigned n_conns;
};

/* ------------------------------------------------------------------ */
/* small helpers */

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

static void futex_wait(atomic_int *addr, int val)
{
	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(atomic_int *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Wakes a thread parked by park(); cheap when nobody sleeps. */
static void unpark(atomic_int *sleeping)
{
	if (atomic_load_explicit(sleeping, memory_order_seq_cst) &&
	    atomic_exchange_explicit(sleeping, 0, memory_order_seq_cst))
		futex_wake(sleeping);
}

/* Sleeps until unpark() unless ready() turns true first.  The flag is
 * raised before ready() is checked and wakers publish before they look at
 * the flag (both seq_cst), so a wake-up cannot fall between the two. */
static void park(atomic_int *sleeping, bool (*ready)(struct conn *), struct conn *c)
{
	atomic_store_explicit(sleeping, 1, memory_order_seq_cst);
	if (ready(c)) {
		atomic_store_explicit(sleeping, 0, memory_order_relaxed);
		return;
	}
	futex_wait(sleeping, 1);
	atomic_store_explicit(sleeping, 0, memory_order_relaxed);
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
	/* Read before the push: from then on the slot may be answered and reused. */
	bool big = s->io.op == NBDSRV_IO_READ && s->io.length > INLINE_SEND_MAX;
	struct slot *old;

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
			unpark(&c->writer_sleeping);
		}
	} else if (!old) {
		unpark(&c->writer_sleeping);
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

		unpark(&c->writer_sleeping);
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
		unpark(&c->writer_sleeping);
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

/* Bound the payload memory in flight, but never refuse the only request:
 * an idle connection must make progress. */
static bool bytes_fit(struct conn *c, uint32_t bytes)
{
	return atomic_load_explicit(&c->inflight, memory_order_seq_cst) == 0 ||
	       atomic_load_explicit(&c->inflight_bytes, memory_order_seq_cst) + (uint64_t)bytes <=
	       INFLIGHT_BYTES_MAX;
}

static bool reader_ready(struct conn *c)
{
	return (c->free_local || atomic_load_explicit(&c->free_shared, memory_order_seq_cst)) &&
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
	if (werr) {
		s->hdr_len = cw_nbd_encode_error_reply(s->hdr, st, s->cookie, werr, s->why);
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

/* Returns a slot to the reader. */
static void recycle(struct conn *c, struct slot *s)
{
	struct slot *old;

	if (s->buf_cap > BUF_KEEP_BYTES) {
		free(s->io.buf);
		s->io.buf = NULL;
		s->buf_cap = 0;
	}
	atomic_fetch_sub_explicit(&c->inflight_bytes, s->io.op == NBDSRV_IO_READ ||
				  s->io.op == NBDSRV_IO_WRITE ? s->io.length : 0,
				  memory_order_relaxed);
	push(&c->free_shared, s, &old);
	atomic_fetch_sub_explicit(&c->inflight, 1, memory_order_seq_cst);
	unpark(&c->reader_sleeping);
}

/* Sends what is left of the batch in out_iov: 0 once all of it is out,
 * -EAGAIN when the socket is full (flags MSG_DONTWAIT), or -errno. */
static int send_batch(struct conn *c, int flags)
{
	while (c->out_n > 0) {
		struct iovec *iov = c->out_iov + c->out_pos;
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)CW_MIN(c->out_n, IOV_MAX) };
		ssize_t r = sendmsg(c->fd, &m, MSG_NOSIGNAL | flags);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
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
				/* The client is gone: keep draining so the
				 * back end's completions still land, and make
				 * the reader stop. */
				atomic_store(&c->send_broken, true);
				shutdown(c->fd, SHUT_RD);
			}
			c->out_n = 0;
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
			unpark(&c->writer_sleeping);
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
		 * once more after letting it go, and sends these too. */
		if (tls_plug.big[i]) {
			unpark(&c->writer_sleeping);
		} else if (send_trylock(c)) {
			send_locked(c, false);
			/* The writer waits for its last slot to come back. */
			if (atomic_load_explicit(&c->reader_done, memory_order_seq_cst))
				unpark(&c->writer_sleeping);
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
		park(&c->writer_sleeping, writer_ready, c);
	}
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
		if (d && n >= RBUF_BYTES / 2)
			r = recv(c->fd, d, n, MSG_WAITALL);
		else
			r = conn_recv(c);
		if (r == 0)
			return -ECONNRESET;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		}
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

static void set_rcvtimeo(int fd, int seconds)
{
	struct timeval tv = { .tv_sec = seconds };

	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* Runs the option haggling; returns 0 with c->exp set, or -errno. */
static int handshake(struct conn *c)
{
	struct nbdsrv *srv = c->srv;
	struct cw_nbd_handshake hs = {
		.default_export = srv->cfg.default_export,
	};
	_cleanup_free_ uint8_t *data = NULL;
	struct cw_nbd_buf out = { 0 };
	uint8_t b[CW_NBD_GREETING_BYTES];
	int r;

	data = malloc(CW_NBD_OPT_DATA_MAX);
	if (!data)
		return -ENOMEM;
	cw_nbd_hs_reset(&hs);
	set_rcvtimeo(c->fd, HANDSHAKE_TIMEOUT_S);
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
		hs.exports = srv->infos;
		hs.n_exports = srv->n_live;
		r = cw_nbd_hs_option(&hs, &opt, payload, &out);
		if (r == CW_NBD_HS_TRANSMIT) {
			c->exp = &srv->exports[srv->live[hs.export_index]];
			c->lim = c->exp->lim;
			c->lim.structured = hs.structured;
			c->lim.eflags = srv->infos[hs.export_index].eflags;
		}
		pthread_mutex_unlock(&srv->lock);
		if (r < 0)
			break;
		if (out.len && send_all(c->fd, out.data, out.len) < 0) {
			r = -EPIPE;
			break;
		}
		if (r == CW_NBD_HS_TRANSMIT) {
			r = 1;
		} else if (r == CW_NBD_HS_CLOSE) {
			r = -ECONNABORTED;
		}
	}
	free(out.data);
	set_rcvtimeo(c->fd, 0);
	return r == 1 ? 0 : r;
}

/* ------------------------------------------------------------------ */
/* the reader: transmission */

static struct slot *take_slot(struct conn *c, uint32_t bytes)
{
	struct slot *s;

	c->want_bytes = bytes;
	for (;;) {
		if (!c->free_local)
			c->free_local = atomic_exchange_explicit(&c->free_shared, NULL,
								 memory_order_seq_cst);
		if (c->free_local && bytes_fit(c, bytes))
			break;
		if (atomic_load(&c->send_broken))
			return NULL;
		flush_wake(c);
		park(&c->reader_sleeping, reader_ready, c);
	}
	s = c->free_local;
	c->free_local = s->next;
	atomic_fetch_add_explicit(&c->inflight, 1, memory_order_seq_cst);
	atomic_fetch_add_explicit(&c->inflight_bytes, bytes, memory_order_relaxed);
	return s;
}

static int ensure_buf(struct slot *s, uint32_t length)
{
	void *p;
	size_t cap;

	if (s->buf_cap >= length)
		return 0;
	cap = ((size_t)length + 65535) & ~(size_t)65535;
	if (posix_memalign(&p, BUF_ALIGN, cap) != 0)
		return -ENOMEM;
	free(s->io.buf);
	s->io.buf = p;
	s->buf_cap = (uint32_t)cap;
	return 0;
}

static const enum nbdsrv_io_op cmd_op[] = {
	[CW_NBD_CMD_READ] = NBDSRV_IO_READ,
	[CW_NBD_CMD_WRITE] = NBDSRV_IO_WRITE,
	[CW_NBD_CMD_FLUSH] = NBDSRV_IO_FLUSH,
	[CW_NBD_CMD_TRIM] = NBDSRV_IO_TRIM,
	[CW_NBD_CMD_WRITE_ZEROES] = NBDSRV_IO_ZERO,
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
	}
	return -EINVAL;
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

		r = conn_read(c, h, sizeof(h));
		if (r < 0)
			return r == -ECONNRESET ? 0 : r;
		r = cw_nbd_decode_request(h, &req);
		if (r < 0) {
			srv_log(c->srv, LOG_WARNING, "export %s: bad request magic, closing",
				c->exp->e.name);
			return r;
		}
		v = cw_nbd_check_request(&c->lim, &req);
		if (v.action == CW_NBD_DISCONNECT) {
			if (req.type != CW_NBD_CMD_DISC)
				srv_log(c->srv, LOG_WARNING, "export %s: %s, closing",
					c->exp->e.name, v.why);
			return req.type == CW_NBD_CMD_DISC ? 0 : -EPROTO;
		}
		bytes = (req.type == CW_NBD_CMD_READ || req.type == CW_NBD_CMD_WRITE) &&
			v.action == CW_NBD_EXEC ? req.length : 0;
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
		s->io.backend_data = NULL;

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
		/* After submit() the slot is the back end's: not a byte of
		 * it may be touched here. */
		r = submit(c, s);
		if (r < 0)
			nbdsrv_io_complete(&s->io, r);
	}
}

static void conn_unlink(struct conn *c)
{
	struct nbdsrv *srv = c->srv;

	pthread_mutex_lock(&srv->lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		srv->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	srv->n_conns--;
	pthread_cond_broadcast(&srv->conns_gone);
	pthread_mutex_unlock(&srv->lock);
}

static void conn_free(struct conn *c)
{
	unsigned i;

	for (i = 0; i < c->n_slots; i++)
		free(c->slots[i].io.buf);
	free(c->slots);
	free(c->rbuf);
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
	c->free_local = c->slots;
	return 0;
}

/* A connection to an export whose requests have deadlines reads and
 * replies at real-time priority (its writer inherits it): a busy CPU would
 * otherwise delay the requests before the disk's dispatcher sees them and
 * the data after.  Without the privilege it says so once. */
static void conn_go_realtime(struct conn *c)
{
	static atomic_bool told;
	const struct nbdsrv_export *e = &c->exp->e;
	struct sched_param sp = { 0 };
	int r;

	if (!e->ops->rt_priority)
		return;
	sp.sched_priority = e->ops->rt_priority(e->backend);
	if (sp.sched_priority <= 0)
		return;
	r = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
	c->realtime = r == 0;
	if (r && !atomic_exchange(&told, true))
		srv_log(c->srv, LOG_NOTICE, "export %s: connections stay at normal priority: %s",
			e->name, strerrordesc_np(r) ?: "error");
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	int r;

	r = handshake(c);
	if (r < 0) {
		if (r != -ECONNABORTED && r != -ECONNRESET)
			srv_log(c->srv, LOG_INFO, "handshake ended: %s",
				strerrordesc_np(-r) ?: "error");
		goto out;
	}
	conn_go_realtime(c);
	r = conn_setup_slots(c);
	if (r < 0)
		goto out;
	r = -pthread_create(&c->writer, NULL, writer_main, c);
	if (r < 0) {
		srv_log(c->srv, LOG_ERR, "cannot start a writer thread: %s",
			strerrordesc_np(-r) ?: "error");
		goto out;
	}
	tls_reader = c;
	r = transmission(c);
	flush_wake(c);
	tls_reader = NULL;
	/* Protocol violations were logged where they were seen. */
	if (r < 0 && r != -EPIPE && r != -EPROTO && r != -EBADMSG)
		srv_log(c->srv, LOG_INFO, "export %s: connection ended: %s", c->exp->e.name,
			strerrordesc_np(-r) ?: "error");
	/* Let every request in flight finish and its reply go out. */
	atomic_store_explicit(&c->reader_done, true, memory_order_seq_cst);
	unpark(&c->writer_sleeping);
	pthread_join(c->writer, NULL);
out:
	conn_unlink(c);
	conn_free(c);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* accepting */

static void accept_one(struct nbdsrv *srv, int lfd)
{
	struct conn *c;
	pthread_attr_t attr;
	int fd, one = 1, r;

	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			srv_log(srv, LOG_WARNING, "accept: %m");
		return;
	}
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

	pthread_mutex_lock(&srv->lock);
	if (srv->stopped || srv->n_conns >= srv->cfg.max_connections) {
		pthread_mutex_unlock(&srv->lock);
		srv_log(srv, LOG_WARNING, "refusing a connection: %u open, the limit",
			srv->cfg.max_connections);
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
	c->next = srv->conns;
	if (c->next)
		c->next->prev = c;
	srv->conns = c;
	srv->n_conns++;
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
	struct pollfd pfd[MAX_LISTEN + 1];
	unsigned i;

	for (i = 0; i < srv->n_listen; i++)
		pfd[i] = (struct pollfd){ .fd = srv->listen_fds[i], .events = POLLIN };
	pfd[srv->n_listen] = (struct pollfd){ .fd = srv->wake_fd, .events = POLLIN };
	for (;;) {
		if (poll(pfd, srv->n_listen + 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			srv_log(srv, LOG_ERR, "poll: %m");
			break;
		}
		if (pfd[srv->n_listen].revents)
			break;
		for (i = 0; i < srv->n_listen; i++)
			if (pfd[i].revents & POLLIN)
				accept_one(srv, pfd[i].fd);
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
	srv->exports = calloc(EXPORTS_MAX, sizeof(*srv->exports));
	srv->infos = calloc(EXPORTS_MAX, sizeof(*srv->infos));
	srv->live = calloc(EXPORTS_MAX, sizeof(*srv->live));
	if (!srv->exports || !srv->infos || !srv->live) {
		free(srv->exports);
		free(srv->infos);
		free(srv->live);
		close(srv->wake_fd);
		free(srv);
		return -ENOMEM;
	}
	pthread_mutex_init(&srv->lock, NULL);
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
		f = cw_nbd_eflags(e->read_only, true, e->ops->trim != NULL, e->ops->zero != NULL,
				  e->read_only || e->flush_global, true);
		if (e->rotational)
			f |= CW_NBD_FLAG_ROTATIONAL;
		srv->infos[srv->n_live] = (struct cw_nbd_export_info){
			.name = e->name, .description = e->description, .size = e->size,
			.eflags = f, .min_block = e->min_block, .pref_block = e->pref_block,
			.max_block = e->max_block,
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
		if (srv->n_exports == EXPORTS_MAX) {
			r = -ENOSPC;
			goto out;
		}
		x = &srv->exports[srv->n_exports++];
	}
	free((char *)x->e.name);
	free((char *)x->e.description);
	*x = (struct export){ .e = *exp };
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
	rebuild_infos(srv);
out:
	pthread_mutex_unlock(&srv->lock);
	free(name);
	free(desc);
	return r;
}

int nbdsrv_remove_export(struct nbdsrv *srv, const char *name)
{
	struct export *x = NULL;
	struct conn *c;
	size_t i;

	pthread_mutex_lock(&srv->lock);
	for (i = 0; i < srv->n_exports && !x; i++)
		if (!srv->exports[i].removed && strcmp(srv->exports[i].e.name, name) == 0)
			x = &srv->exports[i];
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

static int add_listener(struct nbdsrv *srv, int fd, const char *unix_path)
{
	if (srv->n_listen >= MAX_LISTEN) {
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
	srv->n_listen++;
	return 0;
}

int nbdsrv_listen_unix(struct nbdsrv *srv, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = -1;
	struct stat st;

	if (srv->started)
		return -EBUSY;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Replace a socket left by a dead daemon, never any other file. */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return -EEXIST;
		unlink(path);
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	return add_listener(srv, CW_TAKE_FD(fd), path);
}

int nbdsrv_listen_tcp(struct nbdsrv *srv, const char *host, const char *port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_ADDRCONFIG };
	struct addrinfo *res, *ai;
	int r, n = 0, last = -EADDRNOTAVAIL;

	if (srv->started)
		return -EBUSY;
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
		r = add_listener(srv, fd, NULL);
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
	srv->started = true;
	return 0;
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
	while (srv->n_conns > 0) {
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
	}
	free(srv->exports);
	free(srv->infos);
	free(srv->live);
	close(srv->wake_fd);
	pthread_cond_destroy(&srv->conns_gone);
	pthread_mutex_destroy(&srv->lock);
	free(srv);
}
