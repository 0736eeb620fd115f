/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A connection reader's buffered input: the socket (or its TLS session)
 * read into a buffer of RBUF_BYTES, large payloads straight into their
 * slot, with the handshake's deadline and the idle timeout, and, on a
 * real-time connection, each read dated by when its bytes came.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>

#include "common/util.h"
#include "daemon/nbd/nbd-internal.h"
#include "daemon/rundelay.h"

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
int conn_read(struct conn *c, void *dst, size_t n)
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
int conn_skip(struct conn *c, uint64_t n)
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
