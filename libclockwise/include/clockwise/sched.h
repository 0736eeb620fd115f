/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwise/sched.h — per-disk dispatch: the ΔL policy (default), dynamic
 * slack, EDF, LST.
 *
 * Bosch & Mullender, sections 3.2-3.3 and 4.2.  One struct cw_sched per
 * disk (per lane of an SSD) holds the released real-time (RT) requests in
 * EDF order, the RT requests not yet released, the best-effort (BE) queue,
 * ΔL and the remaining slack ΔL_r.  It is pure code: the time is always an
 * argument (now_ns), there are no threads, no locks and no I/O.  One
 * driver (the daemon's disk dispatcher, or cwsim) owns it and calls:
 *
 *   cw_sched_enqueue()  when a request arrives;
 *   cw_sched_next()     when the disk is free or a request arrived or the
 *                       time it was told to wait for has come: the answer
 *                       is a request to start now, or "ask again at
 *                       until_ns", or idle (nothing queued that can run);
 *   cw_sched_complete() when the started request finished;
 *   cw_sched_stream_forget()  when a stream's reservation is released.
 *
 * One request is in service at a time (a disk is not preemptible).
 *
 * RT requests and their releases: the scheduler keeps, per stream (the
 * driver's cw_sched_req.stream), the stream's period on this disk and the
 * release of its latest job.  A request gets release = max(arrival, that
 * release + T), the first of a stream its arrival, and deadline = release
 * + D (D = T unless the request says otherwise: a striped stream's
 * request on one disk is due a stream period after its release though the
 * disk sees only every k-th); so a stream's jobs are released at least T
 * apart whatever the driver does, each due D later, which is what the
 * admission test assumed when it admitted the stream.  A request with same_job set is a further piece of the user
 * request that started the stream's latest job on this disk: it gets that
 * job's release and deadline and does not start another (if the stream
 * has no such job, a job started with another period, or the piece
 * arrived after the job's release, it starts a job as a first piece
 * would).  A stream whose period changes keeps its latest job's window:
 * the next job is released no earlier than that job's deadline, and the
 * new period counts from there (the new D from each new release).
 *
 * What stays the driver's: one stream id per admitted stream on this disk
 * (reused only after cw_sched_stream_forget), period_ns and service_ns the
 * admitted T and C, the pieces of one job taking at most C together, each
 * request enqueued when it arrives (arrival_ns = now: one enqueued later
 * than it arrived loses that time from its slack), and forgetting a
 * stream when its reservation is released.  A request that arrives before
 * its release waits, and meanwhile may run as best-effort work.
 *
 * Policies:
 *  delta-l  A BE request (or an early RT request) goes first when its
 *           expected service time fits in ΔL_r, which it then consumes;
 *           otherwise the released RT requests run as a burst in EDF order.
 *           ΔL_r is refilled to ΔL when no released RT request remains
 *           (queued or in service) and nothing is in service.  On an idle
 *           disk (no released RT request) a BE request of up to
 *           idle_be_ns may start (cw_admit_result.idle_be_ns), charging
 *           ΔL_r as far as it goes.  No admitted deadline is missed.
 *  dynamic  A BE request (or an early RT request) of service s may start at
 *           now when, for every deadline d of the admitted work,
 *             s + W_pend(d) + W_fut(now, d) <= d - now  (- the guard, for
 *           a d by which released work is due): W_pend the service C of
 *           released RT requests not started, the server job's budget,
 *           W_fut that of every job the streams (and the server) can still
 *           release with a deadline by d.  Best effort gets exactly the
 *           room the admitted streams leave now, not the worst case over
 *           all time.  Every admitted stream must be known before its
 *           first request: cw_sched_stream_admit().  No admitted deadline
 *           is missed.
 *  edf      BE only when no RT request is released (any size: a long BE
 *           request can make an RT request miss).
 *  lst      BE when now + its service time is at or before the latest
 *           start time of the released RT queue (the paper's comparison;
 *           it misses deadlines when RT releases follow a long BE request).
 * In every policy the periodic BE server, when configured, is a sporadic
 * task (period, slice) scheduled in EDF order like a stream: a server job
 * is released when BE work waits, runs BE requests while they fit in its
 * slice, and so BE never starves even when ΔL = 0.
 */
#ifndef CLOCKWISE_SCHED_H
#define CLOCKWISE_SCHED_H

#include <clockwise/types.h>

#ifdef __cplusplus
extern "C" {
#endif

enum cw_sched_policy {
	CW_SCHED_DELTA_L = 0,	/* default */
	CW_SCHED_EDF = 1,
	CW_SCHED_LST = 2,
	CW_SCHED_DYNAMIC = 3,
};

#define CW_SCHED_N_POLICIES 4

/* "delta-l" (also "deltal", "dl"), "edf", "lst", "dynamic" (also "dyn");
 * -EINVAL otherwise. */
int cw_sched_policy_parse(const char *name, enum cw_sched_policy *ret_policy);
const char *cw_sched_policy_name(enum cw_sched_policy policy);

enum cw_sched_class {
	CW_SCHED_RT = 0,
	CW_SCHED_BE = 1,
};

/* How a dispatched request was chosen. */
enum cw_sched_via {
	CW_SCHED_VIA_RT = 0,	/* released RT request, EDF order */
	CW_SCHED_VIA_SLACK,	/* BE (or early RT) in ΔL_r or LST slack */
	CW_SCHED_VIA_IDLE,	/* BE (or early RT) on a disk with no released RT */
	CW_SCHED_VIA_SERVER,	/* BE run by the periodic server */
};

/* Why the best-effort order chose a request (RBFQ's two phases). */
enum cw_sched_phase {
	CW_SCHED_PHASE_ORDER = 0,	/* the order itself (FIFO, SFC), or not BE */
	CW_SCHED_PHASE_RESV,		/* RBFQ local phase: for the client's reservation */
	CW_SCHED_PHASE_SHARE,		/* RBFQ global phase: for the client's weight */
};

/* A request.  The caller allocates it, fills the input fields and owns it;
 * the scheduler keeps a pointer from cw_sched_enqueue() until the request
 * is handed back by cw_sched_next() and completed, or cancelled. */
struct cw_sched_req {
	/* input */
	enum cw_sched_class cls;
	uint64_t stream;	/* RT: stream (task) id, chosen by the driver */
	bool same_job;		/* RT: a further piece of the stream's latest job */
	int64_t arrival_ns;	/* when it arrived (normally now) */
	int64_t period_ns;	/* RT: T of the stream on this disk */
	int64_t rel_deadline_ns;	/* RT: D, due this long after release, C <= D <= T;
					 * 0: D = T (cw_task.deadline_ns) */
	int64_t service_ns;	/* expected service time; RT: the admitted C */
	void *user;		/* caller's pointer, untouched */
	/* input for the BE queue's order (a FIFO ignores them) */
	uint64_t client;	/* BE: whose request (cw_sched_set_client); 0 is a client too */
	int64_t cost_ns;	/* BE: what it costs its client's share, the disk model's
				 * mean service time; 0: service_ns (a bound, for ΔL) */
	uint64_t offset_bytes;	/* where on the disk it starts, and how long (RT */
	uint64_t length_bytes;	/* too): the SFC order's position dimension, and
				 * where dynamic's bursts leave the arm */
	int64_t be_deadline_ns;	/* BE: 0 = none; else the SFC order's deadline dimension */
	int64_t other_ns;	/* BE over several disks (RBFQ's delta): cost served to */
	int64_t other_resv_ns;	/* this client elsewhere since its previous request here,
				 * and the part of it served for its reservation (rho);
				 * cw_sched_tracker computes both.  0 on a single disk. */
	/* Optional, with other_ns: called by the order when the request
	 * reaches the head of its client's queue, to set other_ns and
	 * other_resv_ns again to what the client got elsewhere since its
	 * client's latest request here was tagged (cw_sched_track_tag); the
	 * order counts that at once, for this request and those behind it,
	 * rather than with the client's next request (dmClock's delayed
	 * tags): with many requests queued, service elsewhere while they
	 * wait would otherwise run past a spread limit for as long. */
	void (*retrack)(struct cw_sched_req *req);
	/* output, set by the scheduler */
	int64_t release_ns;	/* RT: max(arrival, the stream's last release + T) */
	int64_t deadline_ns;	/* RT: release + D */
	int64_t start_ns;	/* when dispatched */
	enum cw_sched_via via;
	enum cw_sched_phase phase;	/* BE: why the BE order chose it */
	int64_t throttled_ns;	/* BE: how long it waited at its queue's head for the limit */
	/* private */
	size_t priv_;
	int priv_state_;
};

/* A best-effort client's quality of service on one disk.  Shares are of
 * the disk's time: a request costs its expected service time (cost_ns, else
 * service_ns, from the disk model), so a 1 MiB read costs more than a 4 KiB one, and a
 * reservation or limit is parts per million of the disk's time (10^6 = the
 * whole disk).  RBFQ uses resv, weight, limit and idle credit; SFC uses
 * prio.  A client never set has weight 1 and nothing else. */
struct cw_sched_client {
	uint32_t resv_ppm;	/* minimum share M (0: none) */
	uint32_t weight;	/* proportional share w >= 1 */
	uint32_t limit_ppm;	/* maximum share (0: none); >= resv_ppm */
	int64_t idle_credit_ns;	/* sigma: cost a client back from idle may run ahead */
	uint32_t prio;		/* SFC: 0 is the most urgent level */
	/* Reservation and limit are the client's over every disk it uses
	 * (dmClock): each disk's local tags advance by its reservation-phase
	 * service elsewhere (other_resv_ns, rho) and its limit tags by all
	 * its service elsewhere (other_ns, delta), so they may each be up to
	 * CW_SCHED_SPREAD_MAX whole disks.  False: they are this disk's alone
	 * (the paper's M_ij) and only the weight counts service elsewhere. */
	bool spread;
};

#define CW_SCHED_SPREAD_MAX 255	/* disks a spread client's rates may cover */

/* What one client got, for stats (cost is expected service time). */
struct cw_sched_client_stats {
	uint64_t requests;		/* dispatched */
	int64_t served_ns;		/* their cost */
	int64_t served_resv_ns;		/* of which for the reservation */
	int64_t throttled_ns;		/* time its next request waited for the limit */
	size_t queued;
};

/* The BE queue's order, behind a small interface: FIFO, RBFQ shares
 * (cw_sched_beq_rbfq) and space-filling curves (cw_sched_beq_sfc).
 * init gets cw_sched_opts.beq_conf (NULL: the order's defaults).  peek
 * shows the request the order would serve next (NULL if none may go now);
 * take removes exactly that request (and sets its phase); remove drops any
 * queued request.  Optional: ready_ns, for an order that may hold queued
 * requests back (a limit), says when one may go (INT64_MAX: never without
 * a new arrival); set_client and client_stats carry per-client QoS. */
struct cw_sched_beq_ops {
	const char *name;
	int (*init)(const void *conf, void **ret_state);
	void (*fini)(void *state);
	int (*push)(void *state, struct cw_sched_req *req, int64_t now_ns);
	struct cw_sched_req *(*peek)(void *state, int64_t now_ns);
	void (*take)(void *state, struct cw_sched_req *req);
	int (*remove)(void *state, struct cw_sched_req *req);	/* 0 or -ENOENT */
	size_t (*count)(const void *state);
	int64_t (*ready_ns)(void *state, int64_t now_ns);
	int (*set_client)(void *state, uint64_t client, const struct cw_sched_client *qos);
	int (*client_stats)(const void *state, uint64_t client,
			    struct cw_sched_client_stats *ret_stats);
};

const struct cw_sched_beq_ops *cw_sched_beq_fifo(void);

struct cw_sched_opts {
	size_t size;			/* sizeof(struct cw_sched_opts) */
	enum cw_sched_policy policy;
	int64_t delta_l_ns;		/* ΔL of the disk's admitted set (>= 0) */
	int64_t idle_be_ns;		/* cw_admit_result.idle_be_ns (>= 0) */
	int64_t server_slice_ns;	/* periodic BE server: 0 = none; it must */
	int64_t server_period_ns;	/* be part of the admitted task set */
	const struct cw_sched_beq_ops *beq;	/* NULL: FIFO */
	const void *beq_conf;		/* the order's own options, NULL: defaults */
	int64_t guard_ns;		/* dynamic: room kept before every deadline
					 * of released work (cw_disk_plan.guard_ns) */
};

/* Defaults: delta-l, no slack, no server, FIFO. */
void cw_sched_opts_init(struct cw_sched_opts *opts);

struct cw_sched;

int cw_sched_new(const struct cw_sched_opts *opts, struct cw_sched **ret_sched);
void cw_sched_free(struct cw_sched *s);	/* NULL-safe; queued requests are dropped, not freed */

/* After the admitted set changed (cw_admit_test on the active tasks).
 * ΔL_r is clamped to the new ΔL at once and refilled to it at the next
 * refill point. */
int cw_sched_set_slack(struct cw_sched *s, int64_t delta_l_ns, int64_t idle_be_ns);
int cw_sched_set_server(struct cw_sched *s, int64_t slice_ns, int64_t period_ns);
/* dynamic: the room kept before every deadline of released work (>= 0). */
int cw_sched_set_guard(struct cw_sched *s, int64_t guard_ns);

/* Queues a request; an RT request gets its release and deadline here.
 * -EINVAL for bad fields; -E2BIG under delta-l for a BE request larger
 * than anything the current slack, idle allowance and server could ever
 * run; -EEXIST if it is already queued; -ENOSPC for a new stream beyond
 * CW_SCHED_STREAMS_MAX; -ERANGE when a stream's next release would pass
 * INT64_MAX / 2; -ENOMEM.  On an error nothing changed. */
int cw_sched_enqueue(struct cw_sched *s, struct cw_sched_req *req, int64_t now_ns);

/* Removes a queued request that was not dispatched: 0 or -ENOENT. */
int cw_sched_cancel(struct cw_sched *s, struct cw_sched_req *req);

/* What the scheduler keeps about a stream on this disk: its latest job. */
struct cw_sched_stream {
	uint64_t id;		/* cw_sched_req.stream */
	int64_t period_ns;	/* T of the latest job */
	int64_t service_ns;	/* C of the latest job */
	int64_t release_ns;	/* its release; the next is no earlier than + T;
				 * INT64_MIN: admitted, no job yet */
	int64_t deadline_ns;	/* D of the latest job (relative) */
};

/* Streams tracked at once per struct cw_sched. */
#define CW_SCHED_STREAMS_MAX 65536

/* Drops what the scheduler keeps about a stream (its reservation was
 * released), so that its id may be reused by a new stream: 0 or -ENOENT.
 * Its requests still queued keep their release and deadline. */
int cw_sched_stream_forget(struct cw_sched *s, uint64_t stream);

/* An admitted stream on this disk, with its admitted T, C and D (0: T),
 * before its first request (the dynamic policy counts the jobs it may
 * release; the others do not need it).  A stream already known keeps its
 * latest job; its later jobs are counted with the shorter period, the
 * larger C and the shorter D of the two.  -EINVAL for T or C not positive
 * or not C <= D <= T, -ENOSPC, -ENOMEM. */
int cw_sched_stream_admit(struct cw_sched *s, uint64_t stream, int64_t period_ns,
			  int64_t service_ns, int64_t deadline_ns);

/* The stream with this id: 0 or -ENOENT. */
int cw_sched_stream_get(const struct cw_sched *s, uint64_t stream,
			struct cw_sched_stream *ret_stream);

/* The streams tracked, in no order, as positions 0 .. count - 1; a
 * position is good until the next cw_sched_enqueue or forget.
 * cw_sched_stream_at: 0 or -ENOENT past the end. */
size_t cw_sched_stream_count(const struct cw_sched *s);
int cw_sched_stream_at(const struct cw_sched *s, size_t pos, struct cw_sched_stream *ret_stream);

enum cw_sched_verdict {
	CW_SCHED_DISPATCH = 0,	/* start req now */
	CW_SCHED_WAIT,		/* nothing now; ask again at until_ns (or on a new arrival) */
	CW_SCHED_IDLE,		/* nothing queued can run until a new arrival */
	CW_SCHED_BUSY,		/* a request is in service; complete it first */
};

struct cw_sched_decision {
	enum cw_sched_verdict verdict;
	struct cw_sched_req *req;	/* DISPATCH */
	int64_t until_ns;		/* WAIT */
};

/* The dynamic rule's room at now_ns, computed in full whatever the
 * policy: the largest best-effort service that may start now (negative:
 * none; INT64_MAX / 4: no admitted work).  -EINVAL if now_ns went
 * backwards, -ENOMEM. */
int cw_sched_room_ns(struct cw_sched *s, int64_t now_ns, int64_t *ret_room_ns);

/* What the disk does next at now_ns (now_ns must not go backwards). */
int cw_sched_next(struct cw_sched *s, int64_t now_ns, struct cw_sched_decision *ret_decision);

/* The dispatched request finished at now_ns after actual_ns of service.
 * An RT request that ran longer than its C, or a BE request longer than
 * expected, has the excess charged to ΔL_r; a shorter BE request gives the
 * difference back.  -EINVAL if req is not the one in service. */
int cw_sched_complete(struct cw_sched *s, struct cw_sched_req *req, int64_t now_ns,
		      int64_t actual_ns);

struct cw_sched_stats {
	uint64_t rt_done;
	uint64_t rt_missed;		/* finished after the deadline */
	uint64_t rt_early;		/* ran before release, as BE */
	uint64_t rt_overrun;		/* took longer than C */
	uint64_t be_done;
	uint64_t be_slack, be_idle, be_server;	/* BE dispatches by route */
	int64_t min_slack_ns;		/* least deadline - finish over RT (INT64_MAX: none) */
	int64_t delta_l_ns;
	int64_t delta_l_r_ns;		/* remaining slack now (dynamic: the room
					 * known at the last decision, less the
					 * time since) */
	size_t rt_released, rt_waiting, be_queued;	/* queue lengths now */
	bool busy;
	uint64_t dyn_scans;		/* dynamic: rooms computed in full */
};

void cw_sched_get_stats(const struct cw_sched *s, struct cw_sched_stats *ret_stats);

/* A client's QoS for the BE order (takes effect with the client's next
 * request; queued ones keep their tags).  -EINVAL for bad values (weight
 * 0, limit below reservation), -EOPNOTSUPP when the order has no clients
 * (FIFO), -ENOMEM. */
int cw_sched_set_client(struct cw_sched *s, uint64_t client, const struct cw_sched_client *qos);
/* -ENOENT for a client the order has never seen, -EOPNOTSUPP as above. */
int cw_sched_get_client_stats(const struct cw_sched *s, uint64_t client,
			      struct cw_sched_client_stats *ret_stats);

/* ---- misses, explained (sched/miss.c) ----
 *
 * A real-time request that ends after its deadline breaks an assumption
 * of the proof above: a request took longer than it was charged, or a
 * decision was not taken when it was due.  What the driver saw of one
 * late request (or of one whose reply left late) says which. */
enum cw_sched_miss_class {
	CW_MISS_MODEL = 0,	/* the request itself took longer than its C */
	CW_MISS_OVERRUN,	/* another request in its window overran its charge */
	CW_MISS_CPU,		/* the dispatcher waited for a CPU when it was due */
	CW_MISS_DELIVERY,	/* done in time; the reply left after the deadline */
	CW_MISS_SCHED,		/* none of those: a wrong decision */
	CW_MISS_EMULATOR,	/* an emulated disk's backing store (the host's
				 * disk or CPU) fell behind the emulated time */
};
#define CW_MISS_CLASSES 6

struct cw_sched_miss {
	int64_t release_ns, deadline_ns;
	int64_t start_ns;		/* dispatched to the disk */
	int64_t done_ns;		/* seen complete by the dispatcher */
	int64_t reply_ns;		/* the reply sent (0: not known) */
	int64_t charged_ns;		/* its C */
	/* time the dispatcher was runnable but not running: during the
	 * request's own service, and from its release to done_ns */
	int64_t cpu_wait_service_ns, cpu_wait_window_ns;
	/* the largest overrun (actual - charge, CPU waits left out) of
	 * another request in service between release and done */
	int64_t other_overrun_ns;
	bool other_overrun_rt;		/* that request was a stream's, not best effort */
	/* time the request waited on its connection before the daemon read
	 * it, the reading thread runnable but not running */
	int64_t cpu_wait_reader_ns;
	/* time its reader, having booked it, waited for a CPU before it
	 * woke the dispatcher (which, asleep, did not know of it) */
	int64_t cpu_wait_wake_ns;
	/* its path to the dispatcher (0: not known): put in the dispatcher's
	 * record by the thread that read it, taken from there into the
	 * policy's queue; and how long the dispatcher slept (not in
	 * service, not runnable) while it was in the record or the queue */
	int64_t booked_ns, taken_ns, slept_ns;
	/* how long its reader was parked, before it booked it, waiting for
	 * a free slot of the connection or for reply memory */
	int64_t reader_parked_ns;
	/* On an emulated disk, time a request came back after the emulated
	 * disk had finished it, its backing store (the host's disk or CPU)
	 * being slower: its own (left out of its service, as the CPU waits
	 * are), and the most of any request in service in its window, its
	 * own included (0: none, or not an emulated disk). */
	int64_t emu_lag_own_ns, emu_lag_ns;
};

/* CPU waits shorter than this are noise of the clock, not a cause. */
#define CW_MISS_CPU_TOLERANCE_NS (20 * 1000)

/* The class of a miss: delivery (done in time); else the first cause that
 * alone made it as late as it was, in this order: model (its own service,
 * CPU waits and an emulator's lag left out, exceeded C), overrun (of a
 * best-effort request; a stream's is the model's), emulator (the lag of an
 * emulated disk's backing store), CPU (waits of the dispatcher and of the
 * connection's reader, before it booked the request or between its booking
 * and its wake-up of the dispatcher, counted when one is above the
 * tolerance); else the largest of those that showed at all; else a
 * scheduling error. */
enum cw_sched_miss_class cw_sched_miss_classify(const struct cw_sched_miss *m);
/* "model", "overrun", "cpu", "delivery", "sched", "emulator"; NULL past
 * the end. */
const char *cw_sched_miss_class_name(enum cw_sched_miss_class c);

/* ---- a disk whose requests keep overrunning (sched/miss.c) ----
 *
 * Fed every completed request's charge and actual service (CPU waits left
 * out), it says when the disk's model no longer holds: when, over the
 * last window of requests, more than the tolerated fraction overran their
 * charge by more than the noise allowed, it proposes the margin (a factor,
 * >= 1) that would have covered all but that fraction of them, and starts
 * a new window. */
struct cw_sched_overrun_watch {
	uint32_t window;		/* requests per verdict (default 1000) */
	uint32_t tolerated_ppm;		/* overruns tolerated (default 10000: 1%) */
	uint32_t noise_ppm;		/* an overrun by less is none (default 50000: 5%) */
	/* state */
	uint32_t n, over;
	uint32_t nratios;
	double ratios[64];		/* the largest actual/charge seen, sorted up */
};

void cw_sched_overrun_watch_init(struct cw_sched_overrun_watch *w);
/* Adds one request; returns 1 and the proposed margin factor when the
 * window ended with too many overruns, 0 otherwise (-EINVAL). */
int cw_sched_overrun_watch_add(struct cw_sched_overrun_watch *w, int64_t charged_ns,
			       int64_t actual_ns, double *ret_margin);

/* The model margin (ppm) after a watch proposed factor on a model with
 * margin old_ppm: C grows by the factor, at most doubled a step (a burst
 * of stalls is not the disk's new speed; one that stays slow is raised
 * again by the next window), up to CW_SCHED_MARGIN_MAX_PPM. */
#define CW_SCHED_MARGIN_MAX_PPM 4000000u
uint32_t cw_sched_margin_raise(uint32_t old_ppm, double factor);

#ifdef __cplusplus
}
#endif
#endif
