/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * nbd-internal.h — what the NBD front end's files share (daemon/nbd/,
 * after nbdkit's server/): the server, its exports, connections and
 * request slots, and the functions each file offers the others.  Private
 * to daemon/nbd/; the interface is nbd-server.h.
 *
 * Each file calls only those below it in this list (so no two call each
 * other, even by way of a third):
 *   sockets.c             listeners, the acceptor thread
 *   connections.c         a connection's life on its reader thread
 *   protocol-handshake.c  the option haggling, the access lists
 *   protocol.c            transmission: requests read, judged, dispatched
 *   protocol-unaligned.c  requests smaller than the export's blocks
 *   protocol-reply.c      completion, and the replies' way out (the writer)
 *   priority.c            the real-time priority, claims, the CPU budget
 *   input.c               the reader's buffered input
 *   limits.c              connection limits, and who gives way
 *   slots.c               request slots, their buffers, the reply memory
 *   exports.c             the exports: added, removed, resized, claimed
 *   nbd-server.c          the server: created, stopped, freed; its log
 *   nbd-tls.c             TLS sessions (GnuTLS)
 * A back end, called through its ops (slots.c: submit), calls
 * nbdsrv_io_complete back: a cycle through a function pointer, by
 * design, as between nbdkit and its plugins.
 */
#ifndef CW_DAEMON_NBD_INTERNAL_H
#define CW_DAEMON_NBD_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <clockwise/admit.h>
#include <clockwise/layout.h>
#include <clockwise/nbd.h>
#include "common/futex.h"
#include "daemon/nbd/nbd-server.h"
#include "daemon/nbd/nbd-tls.h"
#include "daemon/park.h"

/* The names below are the front end's own: hidden, so that no shared
 * library's symbol of the same name can stand in for one (nor one of
 * them for the library's). */
#pragma GCC visibility push(hidden)

#define RBUF_BYTES (64 * 1024)
#define BUF_ALIGN 4096
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
	unsigned long long claim_start;	/* its start time (proc_start_time) */
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
	atomic_bool rt_seen;		/* realtime, as the writer may read it */
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
	int64_t out_began_ns;			/* when a batch with deadlines began */
	/* A real-time connection's writer: its run delay (rundelay.h),
	 * read by the writer only, and its value when it last slept. */
	int wr_fd;
	int64_t wr_rd_parked;
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
/* small helpers, inline: every file below may use them */

/* A write (or zero, or trim) leaves its bytes' count; the last one out
 * wakes a read-modify-write waiting for them (serve_unaligned). */
static inline void write_leave(struct rmw_dom *d)
{
	if (atomic_fetch_sub_explicit(&d->writes, 1, memory_order_seq_cst) == 1 &&
	    atomic_load_explicit(&d->rmw_active, memory_order_seq_cst))
		cw_futex_wake(&d->writes);
}

/* Pushes s on a lock-free stack (a connection's free or done stack). */
static inline void push(_Atomic(struct slot *) *head, struct slot *s, struct slot **ret_old)
{
	struct slot *old = atomic_load_explicit(head, memory_order_relaxed);

	do {
		s->next = old;
	} while (!atomic_compare_exchange_weak_explicit(head, &old, s, memory_order_seq_cst,
							memory_order_relaxed));
	*ret_old = old;
}

/* Called by the reader before it blocks: the back end's unplug, and the
 * writer woken for the completions the reader held back (wake_pending). */
static inline void flush_wake(struct conn *c)
{
	if (c->exp && c->exp->e.ops->unplug)	/* no export yet in the handshake */
		c->exp->e.ops->unplug(c->exp->e.backend);
	if (c->wake_pending) {
		c->wake_pending = false;
		park_wake(&c->writer_park);
	}
}

/* The client's class ("EXPORT@CLASS"), or NULL. */
static inline const char *conn_class(const struct conn *c)
{
	return c->client_class[0] ? c->client_class : NULL;
}

/* ------------------------------------------------------------------ */
/* sockets.c: nbdsrv_listen_unix, nbdsrv_listen_tcp, nbdsrv_start */

/* connections.c */
void *conn_main(void *arg);
bool conn_unlink(struct conn *c);
void conn_free(struct conn *c);

/* protocol-handshake.c (and nbdsrv_access_for) */
int handshake(struct conn *c);

/* protocol.c */
int transmission(struct conn *c);

/* protocol-unaligned.c */
bool unaligned(const struct conn *c, const struct cw_nbd_request *req);
int serve_unaligned(struct conn *c, struct slot *s);
void write_enter(struct conn *c, struct slot *s);

/* protocol-reply.c (and nbdsrv_io_complete, nbdsrv_io_plug ...) */
/* The connection whose reader runs on this thread, if any. */
extern __thread struct conn *tls_reader;
void *writer_main(void *arg);

/* priority.c */
int cpu_spend(struct conn *c, const struct cw_nbd_request *req, uint32_t bytes);
void conn_go_realtime(struct conn *c);
void conn_give_back(struct conn *c);

/* input.c */
int conn_read(struct conn *c, void *dst, size_t n);
int conn_skip(struct conn *c, uint64_t n);

/* limits.c: all under srv->lock */
const char *over_limit(struct nbdsrv *srv, const struct nbdsrv_peer *peer, bool *ret_by_user);
struct conn *stalled(struct nbdsrv *srv, const struct nbdsrv_peer *peer, bool by_user);
void evict(struct nbdsrv *srv, struct conn *c);
const char *claim_place(struct conn *c);

/* slots.c */
int conn_setup_slots(struct conn *c);
void conn_drop_bufs(struct conn *c);
struct slot *take_slot(struct conn *c, uint32_t bytes);
int ensure_buf(struct slot *s, uint32_t length);
int submit(struct conn *c, struct slot *s);
void recycle(struct conn *c, struct slot *s);

/* exports.c (and nbdsrv_add_export ...) */
bool claim_gone(struct nbdsrv *srv, struct export *x);

/* nbd-server.c (and nbdsrv_new ...) */
void srv_log(struct nbdsrv *srv, int prio, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void client_log(struct nbdsrv *srv, int prio, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void flush_dropped(struct nbdsrv *srv, int64_t now);
const char *peer_name(const struct nbdsrv_peer *p, char *buf, size_t n);

#pragma GCC visibility pop

#endif
