/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A connection's life, on its reader thread (conn_main): the handshake,
 * the real-time priority taken if it may, the writer thread started, the
 * transmission phase; then every request in flight let finish and its
 * reply go out before the connection leaves the server's list and its
 * memory is freed.
 */
#include "config.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "common/util.h"
#include "daemon/nbd/nbd-internal.h"
#include "daemon/thread-name.h"

/* Takes c off the server's list: from here on the server may be freed,
 * so this is the last look at it.  Returns whether the memory of the
 * ended connections is to be given back to the system now: when the
 * last one ended, or a second after the last time.  On the reader's
 * thread (it counts its own CPU time). */
bool conn_unlink(struct conn *c)
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

/* After conn_unlink(): c->srv is not to be touched. */
void conn_free(struct conn *c)
{
	if (c->rd_fd >= 0)
		close(c->rd_fd);
	if (c->wr_fd >= 0)
		close(c->wr_fd);
	nbdtls_free(c->sess);
	free(c->slots);
	free(c->rbuf);
	free(c->rmw_buf);
	free(c->blk_buf);
	if (c->fd >= 0)
		close(c->fd);
	free(c);
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

void *conn_main(void *arg)
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
