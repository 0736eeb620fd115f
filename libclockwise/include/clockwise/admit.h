/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwise/admit.h — admission control: QoS -> (T, C) per disk, Jeffay's
 * non-preemptive EDF test, the slack ΔL, the periodic best-effort server.
 *
 * Bosch & Mullender, sections 3.1-3.3, on Jeffay, Stanat & Martel (1991).
 * Everything here is pure integer arithmetic on nanoseconds: no clock, no
 * I/O, no threads, no global state.
 *
 * The slack.  For a task set with periods T_j and relative deadlines
 * D_j <= T_j (a job is due D_j after its release; D_j = T_j unless a task
 * says otherwise), sorted by deadline, with demand
 *   D(x) = sum_j max(0, floor((x - D_j) / T_j) + 1) C_j
 * (= sum_j floor(x / T_j) C_j when every D_j = T_j), every job of every
 * sporadic release pattern, scheduled by non-preemptive EDF, finishes at
 * least
 *   ΔL = min(ΔL_m, ΔL_q)
 *   ΔL_m = min over x >= D_1 of  x - D(x)                       (no upper limit)
 *   ΔL_q = min over i, D_1 < L < D_i of  L - C_i - D(L - 1)     (Jeffay's range)
 * before its deadline, and some release pattern makes a job finish exactly
 * ΔL early (the value is tight).  The paper bounds L by T_n in ΔL_m; that
 * can overstate the slack (see admit.c and cwsim(1)).  Jeffay's condition
 * (2) is exactly ΔL_q >= 0; with D = T his condition (1), U <= 1, gives
 * ΔL_m >= 0, and with shorter deadlines ΔL_m >= 0 is a condition of its
 * own (the demand bound of George, Rivierre and Spuri's test for
 * non-preemptive EDF).
 *
 * A striped stream's part on one disk is such a task: the disk serves
 * every k-th request (T = k b/B) but each request is due b/B after it was
 * released, as the player needs it (D = b/B).
 *
 * Best-effort work.  Under the ΔL dispatcher (clockwise/sched.h) at most
 * ΔL of best-effort work runs between two moments at which no real-time
 * request is released; on an idle disk one best-effort request of up to
 * idle_be_ns = 1 + min over x >= D_1 of (x - D(x)) may start.  Larger
 * best-effort requests, or any when ΔL = 0, need the periodic server: a
 * task (period, slice) admitted like a stream (cw_admit_server_fit).
 */
#ifndef CLOCKWISE_ADMIT_H
#define CLOCKWISE_ADMIT_H

#include <clockwise/types.h>
#include <clockwise/model.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A periodic (sporadic) task on one disk: at most one job per period_ns,
 * each taking at most service_ns and due deadline_ns after its release.
 * The window [from_ns, to_ns) is when the task is active; from_ns ==
 * to_ns == 0 means always.  cw_admit_test ignores windows; cw_admit_plan
 * uses them. */
struct cw_task {
	int64_t period_ns;	/* T > 0 */
	int64_t service_ns;	/* C > 0 */
	int64_t from_ns;
	int64_t to_ns;
	int64_t deadline_ns;	/* D, C <= D <= T; 0: D = T */
};

/* D of a task: deadline_ns, or its period when that is 0. */
static inline int64_t cw_task_deadline_ns(const struct cw_task *t)
{
	return t->deadline_ns ? t->deadline_ns : t->period_ns;
}

/* Why a task set is refused. */
enum cw_admit_why {
	CW_ADMIT_OK = 0,
	CW_ADMIT_INVALID,	/* a task with T <= 0, C <= 0, D < 0 or D > T (fail_task) */
	CW_ADMIT_UTILIZATION,	/* condition (1): U > 1 (or one task with C > T: fail_task) */
	CW_ADMIT_BLOCKING,	/* condition (2) fails for task fail_task at L = fail_l_ns */
	CW_ADMIT_DEMAND,	/* deadlines shorter than periods: D(L) > L at L =
				 * fail_l_ns (or one task with C > D: fail_task) */
	CW_ADMIT_HOST,		/* the disks admit it, the host's CPUs do not
				 * (struct cw_host_model); no disk's test */
};

#define CW_ADMIT_REASON_MAX 200

struct cw_admit_result {
	bool schedulable;
	enum cw_admit_why why;
	double utilization;	/* for display; the decision uses exact arithmetic */
	/* Slack, valid when schedulable (else 0).  An empty set has none of
	 * these limits: CW_ADMIT_NO_LIMIT. */
	int64_t delta_l_ns;
	int64_t delta_l_m_ns;
	int64_t delta_l_q_ns;	/* CW_ADMIT_NO_LIMIT when no pair (i, L) exists */
	int64_t idle_be_ns;	/* largest best-effort request an idle disk may start */
	/* false when U is so close to 1 that the horizon of ΔL_m was cut:
	 * the values are then sound lower bounds, not exact. */
	bool exact;
	/* On CW_ADMIT_BLOCKING / CW_ADMIT_INVALID and DEMAND: index into the
	 * input (DEMAND of the whole set: SIZE_MAX). */
	size_t fail_task;
	int64_t fail_l_ns;
	int64_t fail_need_ns;	/* BLOCKING, DEMAND: the work due within fail_l_ns */
	char reason[CW_ADMIT_REASON_MAX];	/* one line, for people */
};

#define CW_ADMIT_NO_LIMIT INT64_MAX

/* Jeffay's conditions (1) and (2), the demand bound and the slack, in
 * O(P log n) where P is the number of points at which a floor term
 * changes (not every L).  Returns 0 (the verdict is in ret_result,
 * refusal included), -EINVAL for bad arguments, -E2BIG when more than
 * 2^25 points lie below the longest deadline (periods some ten million
 * times apart), -ERANGE when a multiple of a period leaves int64_t,
 * -ENOMEM. */
int cw_admit_test(const struct cw_task *tasks, size_t n, struct cw_admit_result *ret_result);

/* The periodic best-effort server (section 3.3): the largest slice, with
 * the given period, that keeps tasks plus the server schedulable, with at
 * least min_delta_l_ns of slack left.  0 with *ret_slice_ns = 0 when even
 * a 1 ns slice does not fit. */
int cw_admit_server_fit(const struct cw_task *tasks, size_t n, int64_t period_ns,
			int64_t min_delta_l_ns, int64_t *ret_slice_ns);

/* ---- Reservations over a partition's layout ---------------------------- */

/* The paper's QoS: bandwidth B and user block size b give the stream's
 * period b/B; the range of the partition and the time span say which
 * blocks are read when.  The stream reads the range in order, one user
 * block every b/B, starting at span_start_ns; span_end_ns == 0: no end
 * (the windows then follow from the range alone). */
/* When a user request is due, after its release.  CW_ADMIT_DUE_DISK (the
 * default, the paper's section 3.1): its disk's period, so a disk that
 * serves every k-th request has k b/B for each, and a client must ask for
 * a block k b/B before it needs it (the reservation's lead, the longest
 * part period).  CW_ADMIT_DUE_STREAM: b/B on every disk, for a client
 * that asks for each block only one period before it needs it; striping
 * then adds no room for more streams, as the requests of all the streams
 * on a disk may come within one period. */
enum cw_admit_due {
	CW_ADMIT_DUE_DISK = 0,
	CW_ADMIT_DUE_STREAM,
};

/* "disk" or "stream"; -EINVAL otherwise. */
int cw_admit_due_parse(const char *name, enum cw_admit_due *ret_due);
const char *cw_admit_due_name(enum cw_admit_due due);	/* NULL if unknown */

struct cw_admit_qos {
	uint64_t bandwidth_bps;		/* B, bytes per second */
	uint64_t block_bytes;		/* b */
	int64_t span_start_ns;
	int64_t span_end_ns;
	enum cw_admit_due due;
};

/* The reserved range as plain data (from the volume layer, not tied to it):
 * the range starts at byte first_bytes of partition block 0 of this list
 * and is range_bytes long; partition block k lies on disk disk[k] (an index
 * into the disks array) at byte disk_off[k] of that disk (disk_off NULL:
 * anywhere on the disk), and perhaps on alt_disk[k] as well. */
struct cw_admit_layout {
	uint64_t pblock_bytes;		/* partition block size */
	size_t n_pblocks;
	const uint32_t *disk;
	const uint64_t *disk_off;
	uint64_t first_bytes;		/* < pblock_bytes */
	uint64_t range_bytes;
	/* NULL, or: a move copies partition block k to disk alt_disk[k]
	 * (alt_disk[k] == disk[k]: it stays), so while it runs the block is
	 * on either.  Each request is charged on both disks, on alt_disk
	 * anywhere (the model's worst case): no disk is asked more in any
	 * layout the move passes through, whatever blocks it moved so far. */
	const uint32_t *alt_disk;
	/* Disks (indices into the disks array) that may hold a copy of any
	 * block of the range: an SSD cache (clockwise/cache.h), which reads a
	 * cached block from the copy and writes both.  Each request is
	 * charged on each of them too, anywhere on it (the model's worst
	 * case): any block may be cached, in any slot. */
	const uint32_t *copy_disk;
	size_t n_copy;
	/* A mirrored partition (clockwise/layout.h, cw_part_copies): n_copies
	 * > 1, and copy c >= 1 of partition block k on disk
	 * mirror_disk[(c - 1) * n_pblocks + k] at byte
	 * mirror_off[(c - 1) * n_pblocks + k] (mirror_off NULL: anywhere).
	 * A read is a snake request (RADIR section III-B): user request r
	 * (counted from the range's start) is served by one copy, the one
	 * cw_admit_snake_pick() gives among the copies on disks other than
	 * failed, so each disk is charged the requests the data path sends
	 * it; with thick (a recording stream) each request is a thick one,
	 * charged on every copy's disk. */
	uint32_t n_copies;		/* 0 or 1: one copy */
	const uint32_t *mirror_disk;
	const uint64_t *mirror_off;
	bool thick;
	/* A failure case: the disk (an index) taken for lost, whose copies
	 * serve nothing; CW_ADMIT_NO_FAILURE in the normal case (and any
	 * value with one copy: the field is then ignored). */
	uint32_t failed;
};

#define CW_ADMIT_NO_FAILURE UINT32_MAX
#define CW_ADMIT_COPIES_MAX 3	/* as CW_COPIES_MAX (clockwise/layout.h) */

/* RADIR's snake request as a rule (section III-B, getMinDiskSlot's place
 * for a stream): user request r of a stream, on a block whose copies that
 * can serve it are on disks ids[0..n) (distinct; copies out of sync and a
 * failed disk's left out), is read from the copy on the (r mod n)-th
 * lowest of those disks.  Admission (cw_admit_plan) charges each disk
 * the requests this sends it and the data path (cw_path_split) sends
 * them there, so a disk never sees more of a stream than it was charged
 * for; with copies placed in rotation a stream's requests alternate
 * between the disks.  Returns the index into ids, or -1 when n is 0. */
int cw_admit_snake_pick(uint64_t request, const uint32_t *ids, unsigned n);

/* One disk: its model, the tasks it has admitted (with windows) and its
 * best-effort reserve.  A reserve with be_reserve.service_ns > 0 is a
 * periodic server (period_ns, service_ns; its window is ignored) counted
 * with the disk's tasks in every test, so that a disk keeps room for one
 * best-effort request of that service time every period whatever streams
 * it admits: a stream that would leave less is refused. */
struct cw_admit_disk {
	const struct cw_model *model;
	const struct cw_task *tasks;
	size_t n_tasks;
	struct cw_task be_reserve;	/* all zero: none */
	/* In a failure case (cw_admit_layout.failed), the rebuild's reserve
	 * on a surviving disk: a best-effort piece every period (a share of
	 * the disk, CW_ADMIT_REBUILD_SHARE_PPM by default), tested with the
	 * tasks like be_reserve.  All zero: none. */
	struct cw_task rebuild_reserve;
};

/* The part of a reservation one disk serves.  A user request that touches
 * a disk in several pieces is one job whose C is the sum of the pieces'.
 * The period is the stream period times the smallest stride (in user
 * requests) between two requests touching the disk: a disk serving every
 * k-th block gets k times the period; with uneven strides the smallest
 * stride is taken, which is sound (releases are never closer) though
 * pessimistic for the longer gaps.  Its deadline is the stream period
 * whatever the stride: each user request is due b/B after its release. */
struct cw_admit_part {
	uint32_t disk;
	struct cw_task task;		/* T, C and the active window on this disk */
	uint64_t requests;		/* user requests touching the disk */
	uint64_t stride;		/* smallest stride, in user requests */
	/* The disk's tasks active with this part, worst over the window; its
	 * fail_task indexes that set, whose last task is this part. */
	struct cw_admit_result result;
	/* Refused for one task: which, as an index into the disk's tasks
	 * (struct cw_admit_disk), or one of these. */
	size_t fail_disk_task;
};

#define CW_ADMIT_FAIL_SELF SIZE_MAX		/* this part */
#define CW_ADMIT_FAIL_RESERVE (SIZE_MAX - 1)	/* the disk's best-effort reserve */
#define CW_ADMIT_FAIL_ALL (SIZE_MAX - 2)	/* no one task: the set (U > 1) */
#define CW_ADMIT_FAIL_REBUILD (SIZE_MAX - 3)	/* the rebuild's reserve (failure case) */

/* ---- the host: CPU time on the real-time path -------------------------
 *
 * A disk's test charges a request the disk's time; the request also takes
 * CPU time on the daemon's path (the connection's reader, the disk's
 * dispatcher, the copies of its bytes from the engine into a buffer and
 * from the buffer onto the socket, the reply's writer).  Those threads run
 * at real-time priority, so they wait only for one another and the kernel:
 * the streams are served in time only if their real-time CPU work fits in
 * the share of the CPUs given to them, a utilization bound like
 * condition (1) with the CPUs as the resource.  A stream at rate B in
 * blocks of b asks B/b requests and B bytes a second, so it needs
 *     B/b * request_ns + B * byte_ps / 1000   ns of CPU per second,
 * counted here exactly in picoseconds of CPU per second, each stream's
 * share rounded up; a set is admitted when the sum is at most
 *     cpus * share_ppm * 10^6   ps per second.
 * A model with request_ns and byte_ps both 0 is "none": no test. */
struct cw_host_model {
	int64_t request_ns;	/* CPU time of one request, its bytes aside */
	uint64_t byte_ps;	/* CPU time of one byte, every copy counted, in ps */
	uint32_t cpus;		/* CPUs of the host */
	uint32_t share_ppm;	/* of them given to streams, in millionths */
};

#define CW_HOST_SHARE_DEFAULT_PPM 500000	/* half the CPUs */
#define CW_HOST_PS_PER_CPU_S UINT64_C(1000000000000)	/* one CPU for a second */

static inline bool cw_host_model_none(const struct cw_host_model *h)
{
	return !h || (h->request_ns <= 0 && h->byte_ps == 0);
}

/* The CPU time a stream needs, in ps per second (rounded up, UINT64_MAX
 * when it does not fit); 0 with no model or no block. */
uint64_t cw_host_demand_ps(const struct cw_host_model *h, uint64_t rate_bps,
			   uint64_t block_bytes);
/* What the streams are given, in ps per second (UINT64_MAX: no model). */
uint64_t cw_host_capacity_ps(const struct cw_host_model *h);

/* ---- a host whose streams keep costing more than its model ----------
 *
 * The daemon sees two of a stream's three copies of a byte (the engine's
 * read into the buffer and the reply's write onto the socket; the
 * client's read is the client's) and every request's own CPU: an
 * interval's charge is requests * request_ns + bytes * byte_ps * 2/3.
 * Fed each interval's charge and the CPU the real-time path really spent
 * (its connection threads, and the dispatchers' starts of real-time
 * requests, inline copies included), it says when the model no longer
 * holds: after CW_HOST_WATCH_INTERVALS intervals in a row, each charged
 * at least CW_HOST_WATCH_MIN_NS, that spent more than 5/4 of their
 * charge, it proposes the factor (the least of those intervals'
 * spent/charged, in ppm, at most CW_HOST_WATCH_MAX_PPM) by which to scale
 * the model (cw_host_model_scale), and starts again. */
#define CW_HOST_WATCH_INTERVALS 3
#define CW_HOST_WATCH_MIN_NS 5000000	/* 0.5% of a CPU over a second */
#define CW_HOST_WATCH_MAX_PPM 4000000u	/* at most four times a step */
struct cw_host_watch {
	uint32_t over;			/* intervals over in a row */
	uint64_t least_ppm;		/* the least spent/charged among them */
};

/* What the model charges the daemon's side for requests and bytes, ns. */
uint64_t cw_host_charge_ns(const struct cw_host_model *h, uint64_t requests, uint64_t bytes);
/* Adds an interval; 1 and *ret_factor_ppm (> 10^6) when the model should
 * grow, 0 when not, -EINVAL. */
int cw_host_watch_add(struct cw_host_watch *w, const struct cw_host_model *h,
		      uint64_t requests, uint64_t bytes, uint64_t spent_ns,
		      uint64_t *ret_factor_ppm);
/* Both costs of h times factor_ppm / 10^6 (rounded up). */
void cw_host_model_scale(struct cw_host_model *h, uint64_t factor_ppm);

/* Measures this host's costs with its own CPUs and kernel: a request's
 * system calls and thread hand-offs, and a byte's copies (a tmpfs read,
 * a write into a pipe and the read out of it), as CPU time (median of
 * several trials; some 0.1 s of CPU).  0 or -errno. */
int cw_host_measure(int64_t *ret_request_ns, uint64_t *ret_byte_ps);

/* ---- the host's CPU beyond what the streams were admitted for --------
 *
 * A request no disk serves (a read of a hole, zeros, a page-cache hit)
 * costs only CPU and socket time, which no disk's test books; served at
 * real-time priority, or without bound at normal priority, such requests
 * take the CPUs the streams' paths and players need.  So every connection
 * spends CPU from a budget, charged what the model says a request costs
 * (cw_host_cost_ps: request_ns, and byte_ps for each byte it reads or
 * writes, every copy counted: its client's, on a host serving local
 * clients, runs on the same CPUs):
 *  - the one connection that holds an export's reservation runs at
 *    real-time priority and spends at most what the stream was admitted
 *    for (cw_host_demand_ps of its rate and block), at most
 *    CW_HOST_RT_BURST_NS of it ahead;
 *  - every other connection is best effort, at normal priority, and all
 *    of them together spend at most cw_host_be_capacity_ps: a part
 *    (CW_HOST_BE_SHARE_PPM) of the CPUs admission does not give to
 *    streams, the rest left to the host (the clients and players, and
 *    whatever else it runs), at most CW_HOST_BE_BURST_NS of it ahead.
 * A budget is a generic cell rate algorithm: one time, when the work
 * charged so far is paid for at the budget's rate (its "theoretical
 * arrival time", tat).  A request may start while tat is no more than the
 * burst ahead of now, and moves tat on by its cost at the rate; so one
 * time in one word is the whole state, which a compare-and-swap keeps
 * when several threads spend one budget. */
#define CW_HOST_BE_SHARE_PPM 500000		/* of the CPUs streams are not given */
#define CW_HOST_BE_MIN_PS (CW_HOST_PS_PER_CPU_S / 100)	/* 1% of a CPU at least */
#define CW_HOST_BE_BURST_NS (20 * CW_NS_PER_MS)
#define CW_HOST_RT_BURST_NS CW_NS_PER_S

/* The CPU every best-effort connection together may spend, ps a second:
 * CW_HOST_BE_SHARE_PPM of cpus * (10^6 - share_ppm) ppm, at least
 * CW_HOST_BE_MIN_PS; UINT64_MAX (no bound) without a model. */
uint64_t cw_host_be_capacity_ps(const struct cw_host_model *h);
/* What requests carrying bytes (read or written) cost on the host, ps
 * (UINT64_MAX when it does not fit); 0 without a model. */
uint64_t cw_host_cost_ps(const struct cw_host_model *h, uint64_t requests, uint64_t bytes);
/* A request of cost_ps on a budget of rate_ps a second whose work is paid
 * for until tat_ns, at now_ns: 0 when it may start now, *ret_tat_ns then
 * the budget's new time; else how long (ns, > 0) to wait before asking
 * again, *ret_tat_ns untouched.  A rate of UINT64_MAX is no bound; 0 is
 * refused as -EINVAL, and so are a negative burst and a NULL ret. */
int64_t cw_host_budget_take(int64_t tat_ns, int64_t now_ns, uint64_t rate_ps, uint64_t cost_ps,
			    int64_t burst_ns, int64_t *ret_tat_ns);

/* The host's verdict on a new stream beside streams needing others_ps. */
struct cw_host_result {
	bool refused;
	uint64_t stream_ps;		/* the new stream's demand */
	uint64_t need_ps;		/* every stream's, the new one's included */
	uint64_t given_ps;		/* cw_host_capacity_ps */
	uint64_t max_rate_bps;		/* the largest rate in these blocks that fits */
};

/* Tests a stream of rate_bps in block_bytes blocks beside others_ps: 0
 * (the verdict in ret), -EINVAL for a bad model or stream. */
int cw_host_test(const struct cw_host_model *h, uint64_t others_ps, uint64_t rate_bps,
		 uint64_t block_bytes, struct cw_host_result *ret);

/* "the streams would need 1.20 CPUs of real-time work (...), 1.00 is given
 * (50% of 2 CPUs)": one sentence for a refused result, no full stop. */
void cw_host_result_words(const struct cw_host_model *h, const struct cw_host_result *res,
			  char *buf, size_t len);

struct cw_admit_plan {
	bool admitted;			/* every part admitted */
	size_t n_parts;
	struct cw_admit_part *parts;	/* owned; cw_admit_plan_done frees */
	size_t failed_part;		/* first refused part when !admitted */
	int64_t stream_period_ns;	/* b/B */
	char reason[CW_ADMIT_REASON_MAX + 64];	/* "disk 2: ..." */
	/* cw_admit_plan_host's verdict (zero: the host was not asked); a
	 * refusal there leaves every part admitted and admitted false. */
	struct cw_host_result host;
	/* cw_admit_plan_survive: the failure case of the refusal (a disk
	 * index), CW_ADMIT_NO_FAILURE for the normal case (and from
	 * cw_admit_plan); CW_ADMIT_ANY_FAILURE when every case fits alone
	 * but the task booked for all of them (the worst of each) does not,
	 * worst_case then the case that gave its shortest period. */
	uint32_t failed;
	uint32_t worst_case;
};

#define CW_ADMIT_ANY_FAILURE (UINT32_MAX - 1)

/* The best-effort reserve clockwised keeps on every disk: one request of
 * piece_bytes (the model's worst case anywhere on the disk) every
 * max(CW_ADMIT_BE_PERIOD_NS, CW_ADMIT_BE_SHARE times that service), so
 * that it holds at most 1/CW_ADMIT_BE_SHARE of the disk.  -EINVAL for a bad
 * model or size, -ERANGE when the service does not fit. */
#define CW_ADMIT_BE_PERIOD_NS (100 * CW_NS_PER_MS)
#define CW_ADMIT_BE_SHARE 10
int cw_admit_be_reserve(const struct cw_model *model, uint64_t piece_bytes,
			struct cw_task *ret_task);

/* The rebuild's reserve on a disk that survives a failure (struct
 * cw_admit_disk, rebuild_reserve): one best-effort piece of piece_bytes
 * (the model's worst case anywhere) every period that makes it share_ppm
 * millionths of the disk.  share_ppm 0: none (all zero).  -EINVAL for a
 * bad model or size, -ERANGE when it does not fit. */
#define CW_ADMIT_REBUILD_SHARE_PPM 100000	/* a tenth of each survivor */
int cw_admit_rebuild_reserve(const struct cw_model *model, uint64_t piece_bytes,
			     uint32_t share_ppm, struct cw_task *ret_task);

/* The largest best-effort piece clockwised sends a disk: on an HDD at most
 * CW_ADMIT_BE_PIECE_HDD bytes (a smaller piece fits in less slack, and
 * a smaller reserve lets shorter stream periods in), elsewhere one pool
 * block. */
#define CW_ADMIT_BE_PIECE_HDD (UINT64_C(256) << 10)
uint64_t cw_admit_be_piece(enum cw_tier tier, uint64_t pool_block_bytes);

/* Plans a reservation without making it (a dry run: nothing is changed).
 * Making it is appending each part's task to its disk's task set, which the
 * caller owns and stores.  Returns 0 (verdict in ret_plan), -EINVAL for bad
 * QoS or layout (ret_plan->reason says what), -ERANGE if b/B or C do not
 * fit in nanoseconds, -ENOMEM. */
int cw_admit_plan(const struct cw_admit_qos *qos, const struct cw_admit_layout *layout,
		  const struct cw_admit_disk *disks, size_t n_disks,
		  struct cw_admit_plan *ret_plan);
void cw_admit_plan_done(struct cw_admit_plan *plan);	/* NULL-safe, idempotent */

/* A plan that survives the loss of any one disk (layout->n_copies > 1):
 * cw_admit_plan in the normal case (each disk's rebuild_reserve left out)
 * and in each case of one failed disk
 * (layout->failed set to each disk holding a copy of the range, which
 * then serves nothing: the surviving copies carry all the stream's reads,
 * with each disk's rebuild_reserve beside them), refused with the first
 * case that does not fit (ret_plan->failed).  Each part is the worst of
 * the cases on its disk (the shortest period and deadline, the longest
 * service, the widest window), tested again as such: a disk booked with
 * it keeps every case's deadlines whichever disk fails.  Returns as
 * cw_admit_plan. */
int cw_admit_plan_survive(const struct cw_admit_qos *qos, const struct cw_admit_layout *layout,
			  const struct cw_admit_disk *disks, size_t n_disks,
			  struct cw_admit_plan *ret_plan);

/* The host's test of an admitted plan (qos as planned) beside streams
 * needing others_ps: a refusal sets plan->admitted false and plan->host.
 * A refused plan, or no model, is left as it is.  0 or -EINVAL. */
int cw_admit_plan_host(struct cw_admit_plan *plan, const struct cw_admit_qos *qos,
		       const struct cw_host_model *h, uint64_t others_ps);

#ifdef __cplusplus
}
#endif
#endif
