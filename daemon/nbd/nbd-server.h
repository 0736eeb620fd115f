/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * nbd-server.h — clockwised's NBD front end.
 *
 * It listens on unix sockets and TCP (loopback unless told otherwise),
 * runs the fixed newstyle handshake and the transmission phase for a set
 * of exports, and hands every valid request to the export's back end
 * through struct nbdsrv_backend_ops.  The wire format is libclockwise's
 * (clockwise/nbd.h); this file only moves bytes.
 *
 * Threads: each connection has a reader thread (handshake, then requests)
 * and, in transmission, a writer thread that sends replies.  A back end
 * completes a request with nbdsrv_io_complete() from any thread — the reader
 * itself for a synchronous back end, a disk dispatcher for the real one —
 * so many requests are in flight per connection and replies go out in
 * completion order.  Completion is one lock-free push; nothing on the
 * per-request path takes a mutex or calls malloc once a connection's
 * request slots are warm.
 */
#ifndef CW_DAEMON_NBD_SERVER_H
#define CW_DAEMON_NBD_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <clockwise/nbd.h>

struct cw_host_model;

struct nbdtls_creds;

enum nbdsrv_io_op {
	NBDSRV_IO_READ,
	NBDSRV_IO_WRITE,
	NBDSRV_IO_FLUSH,
	NBDSRV_IO_TRIM,
	NBDSRV_IO_ZERO,
	NBDSRV_IO_CACHE,
	NBDSRV_IO_BLOCK_STATUS,
};

/* BLOCK_STATUS: the most extents one answer carries (the client asks
 * again from where it ends). */
#define NBD_EXTENTS_MAX 2048

/* One request as a back end sees it.  It belongs to the back end from the
 * ops call until nbdsrv_io_complete(); after that it must not be touched. */
struct nbdsrv_io {
	enum nbdsrv_io_op op;
	uint64_t offset;	/* inside the export, aligned to min_block */
	uint32_t length;	/* > 0 except for FLUSH */
	bool fua;		/* WRITE/TRIM/ZERO: stable before completing */
	bool may_trim;		/* ZERO: may deallocate (no NBD_CMD_FLAG_NO_HOLE) */
	bool fast_zero;		/* ZERO: fail with -ENOTSUP rather than be slow
				 * (NBD_CMD_FLAG_FAST_ZERO) */
	bool req_one;		/* BLOCK_STATUS: one extent is enough */
	uint32_t n_extents;	/* BLOCK_STATUS: extents the back end filled */
	void *buf;		/* READ: fill length bytes; WRITE: the data.
				 * 4096-aligned, so O_DIRECT can use it.
				 * BLOCK_STATUS: room for NBD_EXTENTS_MAX (1
				 * with req_one) struct cw_nbd_extent, to fill
				 * from offset on with base:allocation status;
				 * they may cover less than length, not more. */
	void *backend_data;	/* free for the back end's bookkeeping */
	/* Set by the back end before it completes a request whose reply
	 * has a deadline (0: none, the default): reply_late hears if the
	 * reply left after it. */
	int64_t deadline_ns;
	int64_t ready_ns;	/* with deadline_ns: when its data was ready */
	/* When the request was on the connection, if known (else 0): before
	 * the server read it when its reader had been waiting for a CPU. */
	int64_t arrived_ns;
	/* On a real-time connection: the reader's run-delay descriptor
	 * (rundelay.h; -1 on others), valid while the back end's call
	 * runs on the reader's thread, and its run delay as of arrived_ns,
	 * so the back end can tell how long the reader waited for a CPU
	 * before it booked the request; and how long the reader was parked
	 * for a free slot of its connection or for reply memory (a client
	 * with too much in flight, or the server's memory all in use). */
	int reader_rd_fd;
	int64_t arrived_rd_ns, parked_ns;
	bool parked_memory;		/* parked for memory, not for a slot */
	/* The connection class the client named ("EXPORT@CLASS"), or NULL;
	 * and a word the back end may keep per connection (NULL at first;
	 * it must stay valid until the export goes). */
	const char *client_class;
	void **conn_data;
	/* Set by a front end other than the NBD server's (daemon/ublk/):
	 * nbdsrv_io_complete() calls it and does nothing else.  NULL for
	 * the NBD server's own requests. */
	void (*complete)(struct nbdsrv_io *io, int err);
};

/*
 * A back end.  Each call starts one request and returns 0 once it is
 * under way — it then ends with exactly one nbdsrv_io_complete(), from any
 * thread, possibly before the call returns — or a negative errno if it
 * failed at once (no completion follows; the client gets the error).
 * flush must make every write completed before it stable; trim and zero
 * may be NULL, and the export then does not offer them.
 */
/* Where the time of a late reply went: its data was ready at the io's
 * ready_ns; its batch began to be sent at began_ns (its sender woke and
 * took the send lock meanwhile) and was out at sent_ns (the time in
 * between was the socket's: a full one is a client that does not read).
 * cpu_wait_ns: how long the connection's writer, when it was the sender,
 * waited for a CPU since it last slept (its run delay); -1 when another
 * thread sent or the kernel does not say. */
struct nbdsrv_late {
	int64_t began_ns, sent_ns;
	int64_t cpu_wait_ns;
};

struct nbdsrv_backend_ops {
	int (*pread)(void *backend, struct nbdsrv_io *io);
	int (*pwrite)(void *backend, struct nbdsrv_io *io);
	int (*flush)(void *backend, struct nbdsrv_io *io);
	int (*trim)(void *backend, struct nbdsrv_io *io);
	int (*zero)(void *backend, struct nbdsrv_io *io);
	/* Optional: a hint to fetch a range before it is read (CACHE). */
	int (*cache)(void *backend, struct nbdsrv_io *io);
	/* Optional: which parts of a range are holes (BLOCK_STATUS with
	 * base:allocation); without it no meta context is offered. */
	int (*block_status)(void *backend, struct nbdsrv_io *io);
	/* Optional.  The reader calls it before it blocks (on the socket or
	 * for a free request slot) and when its connection ends: a back end
	 * may hold the wake-ups of the calls above until then, so a burst
	 * of requests read at once costs one wake-up, not one each. */
	void (*unplug)(void *backend);
	/* Optional.  A real-time priority (SCHED_FIFO, 1 to 99) for the
	 * threads of a connection to this export, whose requests have
	 * deadlines; 0: none.  Asked once the client has chosen the export,
	 * of one connection of the export at a time: the first to choose it
	 * holds it (a stream's player; the others are best effort) until it
	 * ends or asks for more than its budget (cpu_budget) allows; where a
	 * process claimed it (nbdsrv_export_claim), only that one's. */
	int (*rt_priority)(void *backend);
	/* Optional.  What a connection's requests may spend in CPU
	 * (clockwise/admit.h, "the host's CPU beyond what the streams were
	 * admitted for"): the host's model in ret_model and the budget's
	 * rate, ps a second, of the connection that holds the real-time
	 * priority when rt, else of every other connection of the server
	 * together; UINT64_MAX: no bound.  The reader asks now and then; it
	 * must not block. */
	uint64_t (*cpu_budget)(void *backend, bool rt, struct cw_host_model *ret_model);
	/* Optional, with cpu_budget.  How many bytes of a READ of
	 * [offset, offset + length) no disk serves (holes, read as zeros):
	 * a best-effort request's bytes that a disk serves are booked in
	 * the disk's time and order, and not charged again; without it
	 * every byte is. */
	uint64_t (*diskless_bytes)(void *backend, uint64_t offset, uint64_t length);
	/* Optional.  The reply to io, which had a deadline, left after it
	 * (called by the thread that sent it, before io is reused: it must
	 * not block); late says when and what held it. */
	void (*reply_late)(void *backend, const struct nbdsrv_io *io,
			   const struct nbdsrv_late *late);
};

/* Ends a request: err is 0 or a negative errno (sent as its NBD value;
 * the front end does not log it: the back end knows which disk failed).
 * It may be called from any thread; after it returns, the caller must not
 * touch io, and the connection may already be gone. */
void nbdsrv_io_complete(struct nbdsrv_io *io, int err);

/* For a thread that completes many requests in a row (a disk dispatcher):
 * after nbdsrv_io_plug(), nbdsrv_io_complete() on this thread does not wake the
 * connections' writers but remembers them, and nbdsrv_io_unplug() wakes each
 * once.  A thread must unplug before it blocks and soon after a batch. */
void nbdsrv_io_plug(void);
void nbdsrv_io_unplug(void);
/* Like nbdsrv_io_unplug(), but sends the replies on this thread when no
 * writer is sending at the time, saving its wake-up; it never blocks on a
 * socket (a full one is left to the writer).  Not for a thread whose
 * timing matters more than a send's cost (a dispatcher of streams). */
void nbdsrv_io_unplug_send(void);
/* Ends a plug begun on a thread that is not a dispatcher (a connection's
 * reader dispatching for a lane): sends like nbdsrv_io_unplug_send(), and
 * completions on this thread wake at once again. */
void nbdsrv_io_plug_end(void);

struct nbdsrv_export {
	const char *name;		/* copied; the partition name */
	const char *description;	/* copied; may be NULL */
	uint64_t size;
	bool read_only;
	/* The back end's flush covers writes completed on every connection
	 * (one cache, or none): only then is multi-conn advertised. */
	bool flush_global;
	bool rotational;
	/* The back end's zero fails a request with fast_zero set with
	 * -ENOTSUP unless it is faster than writing zeros: only then is
	 * NBD_FLAG_SEND_FAST_ZERO advertised. */
	bool fast_zero;
	/* Block size constraints; 0 picks 1, 4096 and the server's
	 * max_request.  min is a power of two up to 64 KiB. */
	uint32_t min_block, pref_block, max_block;
	/* Exports with the same key (not NULL) reach the same bytes (two
	 * exports of one partition): their read-modify-writes of blocks
	 * smaller than min_block are serialized together.  NULL: the
	 * export's bytes are its own. */
	const void *data_key;
	const struct nbdsrv_backend_ops *ops;
	void *backend;
};

/* Who a client is.  On a unix socket the kernel says (SO_PEERCRED and
 * SO_PEERGROUPS); a TCP client is nobody in particular (known false). */
#define NBDSRV_PEER_GROUPS_MAX 256
struct nbdsrv_peer {
	bool known;
	uid_t uid;
	gid_t gid;
	pid_t pid;
	unsigned n_groups;		/* supplementary groups the kernel gave */
	gid_t groups[NBDSRV_PEER_GROUPS_MAX];
};

/* Someone an access list names: anyone (a TCP client too), a user, or
 * the members of a group (primary or supplementary). */
enum nbdsrv_principal_kind {
	NBDSRV_ANYONE,
	NBDSRV_USER,
	NBDSRV_GROUP,
};

struct nbdsrv_principal {
	enum nbdsrv_principal_kind kind;
	uint32_t id;			/* uid or gid */
};

/* Who may use an export, and how. */
struct nbdsrv_access {
	const char *export;		/* NULL: every export no entry names */
	const struct nbdsrv_principal *read_write;
	size_t n_read_write;
	const struct nbdsrv_principal *read_only;
	size_t n_read_only;
};

/* What peer may do with the export called name under the rules list[n]:
 * an enum cw_nbd_access.  Without rules for it (n == 0, or no entry for
 * name and no default entry), anyone who reached the socket may read and
 * write; root and the server's own user always may. */
int nbdsrv_access_for(const struct nbdsrv_access *list, size_t n, const struct nbdsrv_peer *peer,
		   const char *name);

/* priority is a syslog level (LOG_ERR, LOG_WARNING, LOG_INFO, ...). */
typedef void (*nbdsrv_log_fn)(void *userdata, int priority, const char *msg);

struct nbdsrv_config {
	uint32_t max_request;		/* largest READ/WRITE; 0: 32 MiB */
	/* Connections served at once; 0: 64.  A client over a limit is
	 * told so (NBD_REP_ERR_POLICY to its options) and closed; but while
	 * connections stall in their handshake (not yet authenticated, no
	 * export chosen), a newcomer is let in provisionally, and once it
	 * sends an option (after STARTTLS, where TLS is on) it takes the
	 * place of the oldest of them, so clients that never finish their
	 * handshake cannot lock the others out.  The last
	 * NBDSRV_ADMIN_RESERVE connections are kept for root and the
	 * server's own user on a unix socket. */
	unsigned max_connections;
	/* Of those, per user (every TCP client counts as one user); 0:
	 * half of max_connections, so one user cannot lock out the rest. */
	unsigned max_per_user;
	/* The whole handshake must end within this; 0: 10 s. */
	int64_t handshake_timeout_ns;
	/* A connection with nothing in flight that sends no request for
	 * this long is closed; 0: never. */
	int64_t idle_timeout_ns;
	/* A client that takes none of its replies, or sends no byte of a
	 * TLS record it began, for this long is closed and its reply memory
	 * freed; 0: 30 s. */
	int64_t stall_timeout_ns;
	/* Payload bytes (read data waiting to be sent, write data being
	 * written) of all connections together; a connection over its share
	 * is not read until it drains.  Half of it is split evenly among
	 * max_connections, a floor each connection may always use; the
	 * other half goes to whoever asks, each within budget / connections
	 * open, so clients that take no replies cannot hold all of it.
	 * Buffers kept for reuse are bounded by half of it.  0: 256 MiB. */
	uint64_t reply_memory_bytes;
	unsigned max_inflight;		/* requests per connection; 0: 64 */
	/* A reader whose recent waits for the next request were shorter
	 * than this polls its socket this long before it sleeps; 0: never. */
	uint32_t busy_poll_ns;
	int default_export;		/* index an empty name picks (so 0, the
					 * first export, when zeroed); -1: none */
	/* Exports are added and removed while the server runs: it may
	 * start with none (and default_export then only picks an export
	 * if there is one). */
	bool live_exports;
	nbdsrv_log_fn log;			/* NULL: silent */
	void *log_userdata;
	/* Who may use which export (not copied: it must outlive the
	 * server); none: whoever can connect. */
	const struct nbdsrv_access *access;
	size_t n_access;
	/* The credentials of listeners that offer TLS (nbd-tls.h; not
	 * copied: it must outlive the server); NULL: none may. */
	const struct nbdtls_creds *tls_creds;
};

/* Connections kept for root and the server's own user (on a unix
 * socket) once the others reached max_connections - this. */
#define NBDSRV_ADMIN_RESERVE 2u
/* Listeners one server holds (a TCP address may resolve to several). */
#define NBDSRV_LISTEN_MAX 16

struct nbdsrv;

int nbdsrv_new(const struct nbdsrv_config *cfg, struct nbdsrv **ret_srv);

/* Adds an export, before or after nbdsrv_start().  -EINVAL for a bad
 * name, size or block constraints, -EEXIST for a duplicate name, -ENOSPC
 * past 256 exports (removed ones count until no client uses them). */
int nbdsrv_add_export(struct nbdsrv *srv, const struct nbdsrv_export *exp);

/* Removes an export: no new client can choose it, the clients using it
 * are disconnected, and it returns once each of them ended (its requests
 * in flight completed), so the back end may go.  -ENOENT if there is no
 * such export. */
int nbdsrv_remove_export(struct nbdsrv *srv, const char *name);

/* A client whose handshake chose an export. */
struct nbdsrv_client {
	bool known;		/* on a unix socket: uid and pid are the kernel's word */
	uid_t uid;
	pid_t pid;
	char addr[64];		/* a TCP client's "address:port" ("[v6]:port"); else "" */
	int64_t since_ns;	/* when it connected (CLOCK_MONOTONIC) */
	bool realtime;		/* holds the export's real-time priority */
};

/* The clients connected to export name now: the first max of them in
 * ret (which may be NULL if max is 0), how many there are in *ret_n.
 * -ENOENT if there is no such export. */
int nbdsrv_export_clients(struct nbdsrv *srv, const char *name, struct nbdsrv_client *ret,
			  size_t max, size_t *ret_n);

/* Only the connections of process pid, on a unix socket (the kernel's
 * word), may hold export name's real-time priority from now on, until
 * that process ends or another claim replaces this one; a connection of
 * another process that holds it now lets it go at its next request, and
 * one that asks for it is best effort for good.  Without a claim the
 * first connection to ask holds it.  pid 0 lifts the claim, -1 only
 * looks.  The claimant after the call (0: none) in *ret_pid if not NULL.
 * -ENOENT if there is no such export, -ESRCH if there is no such
 * process. */
int nbdsrv_export_claim(struct nbdsrv *srv, const char *name, pid_t pid, pid_t *ret_pid);

/* Changes the size new connections to an export get (a partition that
 * grew).  Connections open now keep the size they were told: NBD has no
 * way to change it under a client.  -EINVAL if size is not a multiple of
 * the export's min_block, -ENOENT if there is no such export. */
int nbdsrv_set_export_size(struct nbdsrv *srv, const char *name, uint64_t size);

/* A unix socket file's permissions, set whatever the umask. */
struct nbdsrv_unix_perm {
	mode_t mode;			/* 0: 0660 */
	uid_t owner;			/* (uid_t)-1: the server's user */
	gid_t group;			/* (gid_t)-1: the server's group */
};

/* Listens on a unix socket with the permissions perm (NULL: 0660, the
 * server's user and group).  A socket file left by a server that is gone
 * is replaced; -EADDRINUSE if a server answers on it, -EEXIST if path is
 * some other file.  tls: what the listener offers of TLS (NBD_OPT_STARTTLS);
 * -EINVAL for anything but CW_NBD_TLS_OFF without tls_creds. */
int nbdsrv_listen_unix(struct nbdsrv *srv, const char *path,
			   const struct nbdsrv_unix_perm *perm, enum cw_nbd_tls tls);

/* Listens on TCP; host NULL or "" means loopback only (127.0.0.1 and ::1
 * where available); port is a number or service name ("10809"). */
int nbdsrv_listen_tcp(struct nbdsrv *srv, const char *host, const char *port,
			  enum cw_nbd_tls tls);

/* Starts accepting connections. */
int nbdsrv_start(struct nbdsrv *srv);

/* Stops accepting, lets every connection finish its requests in flight,
 * closes them, and returns when all are gone.  Idempotent. */
void nbdsrv_stop(struct nbdsrv *srv);

/* Stops (if needed) and frees; NULL-safe. Unix socket files are removed. */
void nbdsrv_free(struct nbdsrv *srv);

/* The access rules the server was given (nbdsrv_config.access), for
 * another front end to judge by. */
const struct nbdsrv_access *nbdsrv_access_rules(const struct nbdsrv *srv, size_t *ret_n);

/* Connections open now (for status and tests). */
unsigned nbdsrv_connections(struct nbdsrv *srv);
/* CPU time the reader and writer threads of real-time connections (those
 * of exports bound to a reservation, at rt_priority) have used, ended
 * connections included: the host's watch (pb_host_tick). */
uint64_t nbdsrv_rt_cpu_ns(struct nbdsrv *srv);

#endif
