/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Completion and the replies' way out.  A back end completes a request
 * with nbdsrv_io_complete(), from any thread: one push on its
 * connection's done stack.  Whoever holds the connection's send lock (its
 * writer thread, or a dispatcher that completed a batch while the writer
 * slept: nbdsrv_io_unplug_send) takes the whole stack, encodes the
 * replies and sends them in batches, and gives the slots back to the
 * reader (slots.c).  Plugging (nbdsrv_io_plug) lets a thread that
 * completes many requests wake each writer once.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <sys/socket.h>
#include <syslog.h>

#include "common/util.h"
#include "daemon/nbd/nbd-internal.h"
#include "daemon/rundelay.h"

/* The connection whose reader runs on this thread, if any. */
__thread struct conn *tls_reader;

/* Writers whose wake-up this thread holds (nbdsrv_io_plug), in the same
 * kind of batch as a reader's lanes (daemon/path/lane.c); here each held
 * connection also keeps a count in c->completers until the flush, and
 * the flush may send the replies itself (nbdsrv_io_unplug_send). */
#define PLUG_MAX WAKE_BATCH_MAX
/* Replies with more read data than this are left to the writer even by
 * nbdsrv_io_unplug_send(): the copy into the socket costs more than the
 * wake-up, and the writer sends while the completing thread goes on. */
#define INLINE_SEND_MAX (128u << 10)
/* Big: a reply over INLINE_SEND_MAX. */
static __thread struct wake_batch tls_plug;

void nbdsrv_io_complete(struct nbdsrv_io *io, int err)
{
	if (io->complete) {	/* another front end's request */
		io->complete(io, err);
		return;
	}
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
		cw_futex_wake(&s->sync_done);
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
		/* Newly held, c keeps the count taken above until the
		 * unplug; held already, the count it keeps is enough. */
		int held = wake_batch_hold(&tls_plug, PLUG_MAX, c, big);

		if (held > 0)
			return;
		if (held < 0)
			park_wake(&c->writer_park);
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
		struct conn *c = tls_plug.who[i];

		park_wake(&c->writer_park);
		atomic_fetch_sub_explicit(&c->completers, 1, memory_order_release);
	}
	tls_plug.n = 0;
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
	struct nbdsrv_late late = { .sent_ns = 0 };

	if (!e || !e->ops->reply_late)
		return;
	for (struct slot *s = c->out_head; s != c->out_end; s = s->next) {
		if (!s->io.deadline_ns || lost)
			continue;
		if (!late.sent_ns)
			late.sent_ns = cw_now_ns();
		if (late.sent_ns <= s->io.deadline_ns)
			continue;
		if (!late.began_ns) {
			late.began_ns = c->out_began_ns ? c->out_began_ns : late.sent_ns;
			late.cpu_wait_ns = -1;
			/* wr_fd is the writer's own: no other thread reads it */
			if (pthread_equal(pthread_self(), c->writer) && c->wr_fd >= 0)
				late.cpu_wait_ns = CW_MAX(rundelay_read(c->wr_fd) - c->wr_rd_parked, 0);
		}
		e->ops->reply_late(e->backend, &s->io, &late);
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
		c->out_began_ns = 0;
		for (s = c->out_head, n = 0, k = 0; s && k < BATCH_MAX; s = s->next, k++) {
			n += reply_iov(c, s, c->out_iov + n);
			if (s->io.deadline_ns && !c->out_began_ns)
				c->out_began_ns = cw_now_ns();
		}
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
		struct conn *c = tls_plug.who[i];

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

void *writer_main(void *arg)
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
		if (atomic_load_explicit(&c->rt_seen, memory_order_acquire)) {
			/* what it waits for a CPU from its wake-up on
			 * (late_replies) */
			if (c->wr_fd < 0)
				c->wr_fd = rundelay_open();
			c->wr_rd_parked = rundelay_read(c->wr_fd);
		}
		park_unless(&c->writer_park, writer_ready(c), -1);
	}
	if (c->realtime)
		atomic_store(&c->writer_cpu_end,
			     (uint64_t)CW_MAX(cw_clock_ns(CLOCK_THREAD_CPUTIME_ID), 1));
	return NULL;
}
