/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A connection's real-time priority and its CPU budget: which connection
 * of an export reads and replies at real-time priority (the first, or
 * the claimant's process's: conn_go_realtime), how it loses it
 * (conn_go_best_effort), and what each request costs of its budget, or
 * of best effort's, before it starts (cpu_spend).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "common/util.h"
#include "daemon/nbd/nbd-internal.h"
#include "daemon/rundelay.h"

/* A reader asks its back end for its CPU budget this often. */
#define CPU_BUDGET_REFRESH_NS (100 * 1000000)

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
void conn_give_back(struct conn *c)
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
int cpu_spend(struct conn *c, const struct cw_nbd_request *req, uint32_t bytes)
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
void conn_go_realtime(struct conn *c)
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
	if (c->realtime)
		atomic_store_explicit(&c->rt_seen, true, memory_order_release);
	if (c->realtime && c->rd_fd < 0)
		c->rd_fd = rundelay_open();
	if (r && !atomic_exchange(&told, true))
		srv_log(c->srv, LOG_NOTICE, "export %s: connections stay at normal priority: %s",
			e->name, strerrordesc_np(r) ?: "error");
}
