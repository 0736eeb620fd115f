/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwise/sched-beq.h — orders for the best-effort queue of a disk's
 * dispatcher (struct cw_sched_beq_ops in clockwise/sched.h), and the pure
 * functions that go with them.
 *
 * RBFQ (Gulati, Merchant & Varman, "RePAIR: Reservation-Based Proportionate
 * Allocation For IO Resources", section 3): each client has a reservation
 * (minimum), a weight (proportional share) and a limit (maximum); requests
 * carry real-time local and global tags, and the queue serves reservations
 * first (local phase) and weights with the rest (global phase).  Shares are
 * of the disk's time: a request costs its expected service time.
 *
 * SFC (Aref, El-Bassyouni, Kamel & Mokbel, "Scalable QoS-Aware
 * Disk-Scheduling", section 3): each request is a point (its client's
 * priority, its deadline, its position ahead of the head) on a grid, served
 * in the order of a space-filling curve through the grid, conditionally
 * preemptive with a window w (policies SR, SRP, SS; window AE or ER).
 */
#ifndef CLOCKWISE_SCHED_BEQ_H
#define CLOCKWISE_SCHED_BEQ_H

#include <clockwise/types.h>
#include <clockwise/admit.h>
#include <clockwise/sched.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CW_SCHED_PPM UINT32_C(1000000)	/* the whole disk's time */

/* "fifo", "rbfq", "sfc" -> the ops; NULL for anything else. */
const struct cw_sched_beq_ops *cw_sched_beq_by_name(const char *name);

/* What a BE request costs its client: cost_ns if set, else service_ns. */
int64_t cw_sched_req_cost(const struct cw_sched_req *req);

/* ---- RBFQ --------------------------------------------------------------- */

struct cw_sched_rbfq_conf {
	size_t size;		/* sizeof(struct cw_sched_rbfq_conf) */
	/* How far behind real time reservations (and limit tags) of clients
	 * that stay backlogged may fall and still be caught up, so that a
	 * client kept waiting behind long requests catches up afterwards but
	 * an overload is not repaid for as long as it lasted; default 1 s. */
	int64_t lag_ns;
	bool no_tag_adjust;	/* experiments only: the paper's Figure 14 without it */
};

const struct cw_sched_beq_ops *cw_sched_beq_rbfq(void);
void cw_sched_rbfq_conf_init(struct cw_sched_rbfq_conf *conf);

/* A client's QoS is valid: weight >= 1, reservation and limit at most the
 * whole disk, limit 0 or at least the reservation, idle credit >= 0.
 * 0 or -EINVAL. */
int cw_sched_client_check(const struct cw_sched_client *qos);

/* The service RBFQ gives continuously backlogged clients in the fluid
 * model (the paper's Theorem, with limits): with capacity_ppm of the disk
 * for best effort, if the reservations do not fit each client gets
 * capacity in proportion to its reservation; otherwise client i gets
 * clamp(lambda * w_i, M_i, L_i) with lambda such that the shares add up to
 * the capacity (or every client sits at its limit).  ret_share[i] is a
 * fraction of the disk's time.  0 or -EINVAL. */
int cw_sched_shares(const struct cw_sched_client *clients, size_t n, uint32_t capacity_ppm,
		    double *ret_share);

/* The paper's critical capacities C_k (section 3): clients sorted by
 * M_i / w_i, C_k = (M_k / w_k) sum_{i<=k} w_i + sum_{i>k} M_i, in ppm
 * (rounded up); ret_order[k] is the client of rank k.  0 or -EINVAL. */
int cw_sched_critical(const struct cw_sched_client *clients, size_t n, double *ret_capacity,
		      size_t *ret_order);

/* ---- What clients got against what they are due -------------------------
 *
 * Over an interval, each client on a disk: the cost it was served, the
 * part for its reservation, and how long it had requests queued or in
 * service (busy).  A client busy for at least CW_SCHED_BACKLOGGED_PPM of
 * the interval was backlogged: it is due its share of what the backlogged
 * clients got together (cw_sched_shares over their QoS; on a disk faster
 * than its model that may be more than the whole disk); any other client
 * asked for less than it could have had and is due what it got.  Its
 * reservation was met when it got at least CW_SCHED_MET_PPM of
 * min(reservation, due) — or it was not backlogged; its limit held when
 * it got at most the limit and CW_SCHED_MET_PPM's complement over it;
 * both give one request's cost, which an interval's edge may cut. */
#define CW_SCHED_BACKLOGGED_PPM UINT32_C(900000)
#define CW_SCHED_MET_PPM UINT32_C(980000)

struct cw_sched_share_in {
	uint64_t client;		/* whose (several entries of one client are summed) */
	uint32_t disk;			/* on which disk */
	struct cw_sched_client qos;	/* its QoS there, not spread */
	int64_t served_ns, resv_ns, busy_ns, throttled_ns;
	uint64_t requests;		/* that many were served */
};

struct cw_sched_share_out {
	uint64_t client;
	double received, due;		/* fractions of one disk's time, summed over disks */
	double reserved, limit;		/* likewise; limit 0: none */
	double throttled;		/* fraction of the interval held by the limit (max over disks) */
	double one;			/* one request's mean cost (max over disks) */
	bool backlogged;		/* on some disk */
	bool resv_met, limit_held;
};

/* The table of an interval of interval_ns: entries in[0..n) in any order,
 * one per client and disk; *ret (malloc'ed, free it) has one row per
 * client, in order of first appearance, *ret_n of them.  0, -EINVAL or
 * -ENOMEM. */
int cw_sched_share_table(const struct cw_sched_share_in *in, size_t n, int64_t interval_ns,
			 struct cw_sched_share_out **ret, size_t *ret_n);

/* ---- Admission of reservations ------------------------------------------ */

/* The share of a disk's time that best effort has in the long run beside a
 * set of periodic tasks: 10^6 * (1 - sum C/T), rounded down (each task's
 * part rounded up).  0 or -EINVAL. */
int cw_sched_be_capacity(const struct cw_task *tasks, size_t n, uint32_t *ret_ppm);

/* A rate (requests or bytes per second) of requests that each cost
 * cost_ns, as a share of a disk's time, rounded up.  0, -EINVAL, or
 * -ERANGE when it is more than the whole disk. */
int cw_sched_rate_ppm(uint64_t per_s, int64_t cost_ns, uint32_t *ret_ppm);

struct cw_sched_resv_verdict {
	bool fits;
	uint32_t capacity_ppm;	/* what best effort has */
	uint64_t reserved_ppm;	/* the others' reservations */
	uint32_t free_ppm;	/* the most the new one could have */
	char reason[256];	/* one line, for people, when it does not fit */
};

/* Whether a new reservation of want_ppm fits beside the reservations
 * others[0..n) in capacity_ppm (the check mClock never made): the sum
 * must not exceed the capacity.  0 (the verdict in ret) or -EINVAL. */
int cw_sched_resv_admit(const uint32_t *others, size_t n, uint32_t want_ppm,
			uint32_t capacity_ppm, struct cw_sched_resv_verdict *ret);

/* ---- Across disks: the paper's delta and rho (section 3.2) --------------- */

/* A client's requests go to several disks, each with its own dispatcher.
 * The paper's gateway (dmClock's ServiceTracker) counts, per client, the
 * cost each disk served (and how much of it for the reservation), and
 * fills in a request's other_ns / other_resv_ns with what the client got
 * on the other disks since its previous request to this one.
 *
 * The step: one client's record on one disk (zeroed to start), and the
 * client's totals over every disk as of now.  A caller whose disks run on
 * several threads keeps the totals in atomics and each disk's record on
 * its own thread; both steps are then lock-free. */
struct cw_sched_track {
	int64_t own_ns, own_resv_ns;	/* served on this disk */
	int64_t seen_ns, seen_resv_ns;	/* elsewhere, as of its previous request here */
};

/* Before enqueueing req on the disk: its other_ns / other_resv_ns from the
 * client's totals (which include what this disk served). */
void cw_sched_track_tag(struct cw_sched_track *d, int64_t total_ns, int64_t total_resv_ns,
			struct cw_sched_req *req);
/* After req completed on the disk (its phase set by the dispatch): what
 * it adds to the disk's record, and to the totals (*ret_cost_ns, and
 * *ret_resv_ns: the part for the reservation, 0 or the cost). */
void cw_sched_track_done(struct cw_sched_track *d, const struct cw_sched_req *req,
			 int64_t *ret_cost_ns, int64_t *ret_resv_ns);

/* The same for callers on one thread: every client's records and totals
 * in one object.  Not thread-safe. */
struct cw_sched_tracker;

int cw_sched_tracker_new(unsigned n_disks, struct cw_sched_tracker **ret);
void cw_sched_tracker_free(struct cw_sched_tracker *t);	/* NULL-safe */
/* Before enqueueing req (its client set) on disk: fills other_ns and
 * other_resv_ns.  -EINVAL, -ENOMEM. */
int cw_sched_tracker_tag(struct cw_sched_tracker *t, unsigned disk, struct cw_sched_req *req);
/* After req completed on disk (its phase set by the dispatch). */
int cw_sched_tracker_done(struct cw_sched_tracker *t, unsigned disk,
			  const struct cw_sched_req *req);

/* ---- Space-filling curves ------------------------------------------------ */

enum cw_sfc_curve {
	CW_SFC_SWEEP = 0,	/* rows in one direction (raster): EDF with deadline first */
	CW_SFC_CSCAN,		/* continuous scan: rows alternate direction */
	CW_SFC_HILBERT,
	CW_SFC_GRAY,		/* Faloutsos: bit-interleaved Gray code */
	CW_SFC_DIAGONAL,	/* by sum of coordinates, zig-zag within */
	CW_SFC_N_CURVES,
};

int cw_sfc_curve_parse(const char *name, enum cw_sfc_curve *ret_curve);
const char *cw_sfc_curve_name(enum cw_sfc_curve curve);

/* A curve over a grid of dims dimensions (1..8) with 2^bits levels each
 * (bits 1..16, dims * bits <= 62).  Coordinate 0 varies slowest on the
 * Sweep and C-Scan curves. */
struct cw_sfc;

int cw_sfc_new(enum cw_sfc_curve curve, unsigned dims, unsigned bits, struct cw_sfc **ret);
void cw_sfc_free(struct cw_sfc *sfc);	/* NULL-safe */
/* The point's position along the curve, in [0, 2^(dims*bits)); each
 * coordinate is clamped to the grid. */
uint64_t cw_sfc_index(const struct cw_sfc *sfc, const uint32_t *coords);
uint64_t cw_sfc_length(const struct cw_sfc *sfc);	/* 2^(dims*bits) */

/* Irregularities of a served sequence (section 4.1): for each dimension
 * k, the number of pairs i < j with points[i][k] > points[j][k].  points
 * holds n points of dims coordinates one after the other; ret has dims
 * entries.  O(n log n).  0, -EINVAL or -ENOMEM. */
int cw_sfc_irregularity(const uint32_t *points, size_t n, unsigned dims, uint64_t *ret);

/* ---- The SFC order ------------------------------------------------------- */

enum cw_sfc_dim {
	CW_SFC_DIM_PRIO = 1 << 0,	/* the client's priority (cw_sched_client.prio) */
	CW_SFC_DIM_DEADLINE = 1 << 1,	/* time to be_deadline_ns (none: the last level) */
	CW_SFC_DIM_POSITION = 1 << 2,	/* distance ahead of the head, one way round */
};

enum cw_sfc_policy {
	CW_SFC_SR = 0,	/* serve and resume */
	CW_SFC_SRP,	/* serve, resume and promote (the default) */
	CW_SFC_SS,	/* serve and scan */
};

struct cw_sched_sfc_conf {
	size_t size;			/* sizeof(struct cw_sched_sfc_conf) */
	enum cw_sfc_curve curve;	/* default Hilbert */
	unsigned dims;			/* CW_SFC_DIM_* in that order; default all three */
	unsigned bits;			/* 2^bits levels per dimension; default 4 (16) */
	uint32_t window_ppm;		/* w as a share of the curve's length; default 35% */
	uint32_t expand_ppm;		/* e as a share of w; default 5% */
	enum cw_sfc_policy policy;	/* default SRP */
	bool always_expand;		/* AE; default false: ER */
	uint64_t capacity_bytes;	/* the disk's size (position scale); required */
	int64_t horizon_ns;		/* deadlines this far or farther share the last level */
};

const struct cw_sched_beq_ops *cw_sched_beq_sfc(void);
void cw_sched_sfc_conf_init(struct cw_sched_sfc_conf *conf);
/* "sr", "srp", "ss". */
int cw_sfc_policy_parse(const char *name, enum cw_sfc_policy *ret_policy);

#ifdef __cplusplus
}
#endif
#endif
