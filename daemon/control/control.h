/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * control — clockwised's control socket: the server side of the protocol
 * in clockwise/ctl-proto.h, its command handlers over the pool (clockwise/
 * layout.h), admission (clockwise/admit.h) and disk models
 * (clockwise/model.h), and the reservations it admitted.
 *
 * The things only the data path has (NBD exports, live counters) come in
 * through struct cwc_hooks; a hook left NULL makes its commands answer
 * "not-supported".  So the daemon plugs in with:
 *
 *     struct cwc_server_opts o;
 *     cwc_server_opts_init(&o);
 *     o.socket_path = config->control_socket;
 *     o.read_gid = <gid of "clockwise">; o.admin_gid = <gid of "clockwise-admin">;
 *     o.hooks = (struct cwc_hooks){ .userdata = d, .export_add = ..., .stats = ... };
 *     r = cwc_server_new(&o, pool, &srv);
 *     ... add cwc_server_fd(srv) to the main loop's epoll (EPOLLIN) and call
 *     cwc_server_dispatch(srv) when it is readable; or run
 *     cwc_server_run(srv) in a thread and cwc_server_stop(srv) from another.
 *
 * Threads: the server is single-threaded, but for calibrations, which run
 * in a thread each (the connection that asked waits for its reply; every
 * other is served); every call but cwc_server_stop() and the
 * cwc_server_resv_* readers must come from the thread that runs it.  It uses the pool through its management calls, which serialise on
 * the pool's own mutex, so the data path may map partitions meanwhile.
 *
 * State: reservations, exports and calibrated disk models live in the pool
 * database (clockwise/pool-objects.h), the one source of truth; each
 * command that changes them writes through in one transaction first and
 * changes nothing in memory when that fails.  Reservations and models are
 * the admission state's (opts.admit; without one the server makes its own
 * from the pool), whose listener tells the data path of new plans.
 * cwc_server_new() serves each stored export again (through export_add),
 * so that hook is called before cwc_server_new() returns.
 *
 * Limits, per connection: a line of at most CW_CTL_LINE_MAX bytes (longer:
 * "too-large", and the line is skipped), a token bucket of requests
 * (burst, then rate_per_s; beyond: "rate-limited"), replies buffered up to
 * out_max bytes (a client that does not read is dropped); at most
 * max_clients connections, each closed after idle_timeout_ns of silence.
 */
#ifndef CWD_CONTROL_H
#define CWD_CONTROL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <clockwise/admit-state.h>
#include <clockwise/hist.h>
#include <clockwise/layout.h>
#include <clockwise/model.h>
#include <clockwise/sched.h>
#include <clockwise/nbd.h>
#include <clockwise/sched-beq.h>

#include <clockwise/ctl-proto.h>

#define CWC_DEFAULT_SOCKET "/run/clockwise/control"
#define CWC_NO_GID ((gid_t)-1)

/* An export as the control plane knows it. */
struct cwc_export {
	char name[CW_NAME_MAX + 1];
	char part[CW_NAME_MAX + 1];
	bool readonly;
	uint64_t resv_id;	/* 0: none */
	/* A ublk device (daemon/ublk/) instead of an NBD export; its
	 * queue depth and largest request (0: the defaults), and the
	 * device's path once the data path made it. */
	bool ublk;
	uint32_t ublk_depth, ublk_max_request;
	int32_t ublk_dev;	/* the kernel's device number, stored; -1: none */
	char device[32];
};

/* Live counters from the data path (the stats hook fills them). */
/* Latencies in ns, in clockwise/hist.h's log-linear buckets. */
#define CWC_HIST_BUCKETS CW_HIST_BUCKETS

/* One dispatcher's share of its disk's counters. */
struct cwc_lane_stats {
	uint64_t rt_requests, be_requests;
	uint64_t read_bytes, written_bytes;
	uint64_t queued;
};

struct cwc_disk_stats {
	uint32_t disk_id;
	uint64_t rt_requests, rt_misses;
	uint64_t be_requests;
	int64_t be_p50_ns, be_p99_ns, be_max_ns;	/* BE latency */
	uint64_t be_hist[CWC_HIST_BUCKETS];	/* BE latency: a client diffs two for an interval's */
	int64_t be_lat_sum_ns;			/* the latencies the histogram counts, summed */
	uint64_t queued;			/* requests booked, not yet complete, now */
	unsigned lanes;				/* dispatchers summed here */
	struct cwc_lane_stats *lane;		/* each of them (malloc'ed, freed by the server) */
	int64_t slack_used_ns;			/* BE service run in the streams' slack */
	uint64_t read_bytes, written_bytes;
	uint64_t misses[CW_MISS_CLASSES];	/* RT misses by class */
	uint64_t be_overruns;			/* BE requests over their charge */
	int64_t be_overrun_ns;			/* by this much in all */
	/* Requests served alone, their service time over the model's C
	 * (median and 99.9th percentile), those over C; C of a pool block.
	 * tail_over_c is the ratio at the model's tail percentile (its
	 * tail_permille, or 999 when it has none): where C should hold. */
	uint64_t alone_requests, over_c;
	double p50_over_c, p999_over_c, tail_over_c;
	unsigned tail_permille;
	int64_t c_block_ns;
};

struct cwc_resv_stats {
	uint64_t resv_id;	/* 0: a start-up stream (clockwised -r) */
	char export_name[CW_NAME_MAX + 1];	/* a start-up stream's export */
	uint64_t requests, misses;
	uint64_t short_requests;	/* smaller than its block (submit.c) */
	uint64_t read_bytes, written_bytes;
	int64_t worst_late_ns;
	uint64_t miss_class[CW_MISS_CLASSES];	/* misses by class */
};

/* An export's best effort on one of its disks (in.client: the export's
 * index among them; in.qos: its share of the disk, for what it is due). */
struct cwc_export_disk {
	struct cw_sched_share_in in;
	uint64_t bytes;
};

struct cwc_export_stats {
	char name[CW_NAME_MAX + 1 + CW_NBD_CLASS_MAX + 1];	/* "EXPORT" or "EXPORT@CLASS" */
	int64_t since_ns;		/* counting from (the server's clock) */
	size_t n_disks;
	struct cwc_export_disk *disks;	/* malloc'ed by the hook, freed by the server */
};

struct cwc_stats {
	struct cwc_disk_stats *disks;	/* malloc'ed by the hook, freed by the server */
	size_t n_disks;
	struct cwc_resv_stats *resvs;	/* likewise */
	size_t n_resvs;
	struct cwc_export_stats *exports;	/* likewise */
	size_t n_exports;
};

struct nbdsrv_client;
/* Frees what the stats hook filled, and zeroes it. */
static inline void cwc_stats_free(struct cwc_stats *st)
{
	for (size_t i = 0; i < st->n_disks; i++)
		free(st->disks[i].lane);
	free(st->disks);
	free(st->resvs);
	for (size_t i = 0; i < st->n_exports; i++)
		free(st->exports[i].disks);
	free(st->exports);
	*st = (struct cwc_stats){ 0 };
}

struct cwc_hooks {
	void *userdata;
	/* Start serving partition part as export e (the name is chosen and
	 * checked unique by the server).  0 or -errno. */
	int (*export_add)(void *userdata, const struct cwc_export *e, struct cw_part *part);
	/* Optional: the same for an export with e->ublk set, which gets a
	 * block device of its own (its path in e->device).  -errno with the
	 * reason in err. */
	int (*export_add_ublk)(void *userdata, struct cwc_export *e, struct cw_part *part,
			       char *err, size_t errlen);
	int (*export_remove)(void *userdata, const struct cwc_export *e);
	/* Fill *ret with malloc'ed arrays; 0 or -errno. */
	int (*stats)(void *userdata, struct cwc_stats *ret);
	/* A disk was added to the pool: the data path opens it.  On -errno
	 * (reason in err) the server takes the disk out of the pool again. */
	int (*disk_add)(void *userdata, const struct cw_disk_info *d, char *err, size_t errlen);
	/* A disk is about to leave the pool (no partition has a block on it):
	 * the data path closes it, or refuses with -errno (reason in err).
	 * Should the pool then refuse, disk_add is told to take it back. */
	int (*disk_remove)(void *userdata, const struct cw_disk_info *d, char *err,
			   size_t errlen);
	/* Export e's partition grew: new connections get its new size.
	 * -errno with the reason in err. */
	int (*export_resize)(void *userdata, const struct cwc_export *e, struct cw_part *part,
			     char *err, size_t errlen);
	/* Optional: called on the server's thread about once a second
	 * (CWC_TICK_MS), for the data path's own work with the admission
	 * state (the misses it explains, the margins it proposes). */
	void (*tick)(void *userdata);
	/* Optional: what the deadline guarantee lacks, in words, into buf
	 * ("" when nothing: it is unconditional). */
	void (*guarantee)(void *userdata, char *buf, size_t len);
	/* The clients connected to export e (nbd-server.h): the first max in
	 * ret, the count of all in *ret_n.  -ENOENT: e is listed but not
	 * served (its partition is on a missing disk). */
	int (*export_clients)(void *userdata, const struct cwc_export *e,
			      struct nbdsrv_client *ret, size_t max, size_t *ret_n);
	/* Optional: only the connections of process pid may hold export
	 * e's real-time priority (nbdsrv_export_claim: 0 lifts the claim,
	 * -1 only looks); the claimant after the call in *ret_pid (0: none).
	 * -ENOENT: e is not served; -ESRCH: no such process. */
	int (*export_claim)(void *userdata, const struct cwc_export *e, pid_t pid,
			    pid_t *ret_pid);
	/* A move was started, resumed, paused or cancelled: the mover looks
	 * at the journal again. */
	void (*moves_changed)(void *userdata);
	/* Optional: a fact for the log, said once (a reserved stream whose
	 * blocks a cache may not hold, and why). */
	void (*notice)(void *userdata, const char *msg);
};

#define CWC_TICK_MS 1000

#define CWC_CALIB_MARGIN_PPM 250000	/* +25% */
#define CWC_IDLE_TIMEOUT_NS (INT64_C(30) * 1000000000)
#define CWC_ADMIN_RESERVE 2u

struct cwc_server_opts {
	const char *socket_path;	/* default CWC_DEFAULT_SOCKET */
	mode_t socket_mode;		/* default 0660 */
	gid_t socket_gid;		/* chown the socket to this group; CWC_NO_GID: leave */
	gid_t read_gid;			/* may read; CWC_NO_GID: root only */
	gid_t admin_gid;		/* may read and change; CWC_NO_GID: root only */
	/* Connections at once; default 64.  The last CWC_ADMIN_RESERVE are
	 * kept for root and members of admin_gid; one user other than root
	 * holds at most max_per_uid (0: a quarter of max_clients), so
	 * neither one user nor many can lock an admin out. */
	unsigned max_clients;
	unsigned max_per_uid;
	unsigned rate_burst;		/* requests; default 200 */
	unsigned rate_per_s;		/* refill; default 100 */
	size_t out_max;			/* reply bytes buffered per client; default 8 MiB */
	/* A connection that neither sends nor takes a reply for this long
	 * is closed (one waiting for a calibration is not); 0: never.
	 * Default CWC_IDLE_TIMEOUT_NS. */
	int64_t idle_timeout_ns;
	/* The pool's admission state, which the server uses and changes;
	 * NULL: the server makes its own (with preset_margin_ppm). */
	struct cw_admit_state *admit;
	uint32_t margin_ppm;		/* added to the service time of preset models; default 0 */
	/* Added to the service times a calibration measures: a disk measured
	 * once, on a busy machine or behind a cache, is slower at times than
	 * its worst measured case.  Default CWC_CALIB_MARGIN_PPM. */
	uint32_t calib_margin_ppm;
	int64_t (*clock_ns)(void);	/* default cw_now_ns (CLOCK_MONOTONIC) */
	/* Wall-clock time for the reservations' times in the pool database,
	 * which outlive the monotonic clock; default CLOCK_REALTIME.  Used
	 * for an admission state the server makes itself. */
	int64_t (*wall_ns)(void);
	/* Measures a disk; default cw_model_calibrate.  On the socket it runs
	 * in a thread of its own while the server goes on serving. */
	int (*calibrate)(const char *path, const struct cw_calib_opts *opts,
			 cw_calib_progress_fn progress, void *userdata, struct cw_model *ret_model);
	/* exports.activation_mode "partial": a partition with blocks on a
	 * missing disk may be exported (the data path fails those blocks
	 * with EIO); false: it is offline, and export add refuses it. */
	bool activation_partial;
	/* Where the metrics (OpenMetrics/Prometheus text, GET /metrics) are
	 * served: unix sockets, made like the control socket and readable
	 * by whoever may read through it, and TCP addresses (the caller
	 * keeps them to loopback).  n_metrics 0: none.  The arrays stay the
	 * caller's and must outlive cwc_server_new(). */
	const struct sockaddr_storage *metrics_addr;
	const socklen_t *metrics_addrlen;
	size_t n_metrics;
	struct cwc_hooks hooks;
};

struct cwc_server;

void cwc_server_opts_init(struct cwc_server_opts *opts);

/* Loads the state the pool stores (see above), then binds and listens (an
 * existing socket file at the path is replaced only if nothing answers on
 * it: -EADDRINUSE otherwise).  The pool stays the caller's and must
 * outlive the server.  A stored export whose partition cannot be served
 * (the hook fails) fails the start with the hook's error, with every hook
 * call made so far undone. */
int cwc_server_new(const struct cwc_server_opts *opts, struct cw_pool *pool,
		   struct cwc_server **ret_server);
/* Closes every connection, unlinks the socket, frees (NULL-safe). */
void cwc_server_free(struct cwc_server *srv);

/* An epoll descriptor, readable whenever the server has work: add it to
 * a main loop and call cwc_server_dispatch() when it is. */
int cwc_server_fd(const struct cwc_server *srv);
/* Handles what is ready, waiting at most timeout_ms (0: do not wait, -1:
 * until something happens).  0, or -errno on a failure of the server
 * itself (a client's failure only drops that client). */
int cwc_server_dispatch(struct cwc_server *srv, int timeout_ms);
/* Dispatches until cwc_server_stop(); 0 or -errno. */
int cwc_server_run(struct cwc_server *srv);
/* Makes cwc_server_run() return; safe from any thread and a signal handler. */
void cwc_server_stop(struct cwc_server *srv);

/* Exports partition part_name under its own name as export.add would (and
 * stores it), for exports.all at start; an export of that name that
 * exists already is left as it is (0).  -errno with the reason in err. */
/* Likewise, as a ublk device with queue depth and largest request (0:
 * the defaults). */
int cwc_server_export_part_ublk(struct cwc_server *srv, const char *part_name, uint32_t depth,
				uint32_t max_request, char *err, size_t errlen);
int cwc_server_export_part(struct cwc_server *srv, const char *part_name, char *err,
			   size_t errlen);

/* The exports the server lists (stored in the pool), in order. */
/* The data path made export name's ublk device, /dev/ublkbDEV (export
 * list shows it).  Before cwc_server_run or on its thread. */
void cwc_server_export_device(struct cwc_server *srv, const char *name, int32_t dev);
const struct cwc_export *cwc_server_exports(const struct cwc_server *srv, size_t *ret_n);

/* Handles one request line as if a client with this access had sent it,
 * writing progress and reply lines through emit.  The socket path uses it;
 * so can tests and an in-process caller. */
typedef void (*cwc_emit_fn)(const char *line, void *userdata);
void cwc_server_handle_line(struct cwc_server *srv, const char *line, size_t len, bool can_read,
			    bool can_change, cwc_emit_fn emit, void *userdata);

#endif
