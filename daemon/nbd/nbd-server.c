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
 *
 * This file holds the server itself: created, stopped and freed, its
 * counters, and its log (srv_log; client_log for what clients cause, held
 * to a rate).  The other files of daemon/nbd/ are listed in
 * nbd-internal.h.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <syslog.h>
#include <time.h>

#include "common/util.h"
#include "daemon/nbd/nbd-internal.h"

#define REPLY_MEMORY_DEFAULT (UINT64_C(256) << 20)
#define HANDSHAKE_TIMEOUT_DEFAULT_NS (INT64_C(10) * 1000000000)
#define STALL_TIMEOUT_DEFAULT_NS (INT64_C(30) * 1000000000)
/* Messages a storm of bad clients may log each second before the rest
 * are only counted, and said in one line. */
#define CLIENT_LOGS_PER_S 5
/* A stop waits this long for clients to take their last replies. */
#define STOP_GRACE_S 10

/* ------------------------------------------------------------------ */
/* the log */

void srv_log(struct nbdsrv *srv, int prio, const char *fmt, ...)
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
void flush_dropped(struct nbdsrv *srv, int64_t now)
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

void client_log(struct nbdsrv *srv, int prio, const char *fmt, ...)
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

/* "uid 1000", or "the network" for a TCP client. */
const char *peer_name(const struct nbdsrv_peer *p, char *buf, size_t n)
{
	if (!p->known)
		return "the network";
	snprintf(buf, n, "uid %u", (unsigned)p->uid);
	return buf;
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

const struct nbdsrv_access *nbdsrv_access_rules(const struct nbdsrv *srv, size_t *ret_n)
{
	*ret_n = srv->cfg.n_access;
	return srv->cfg.access;
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
