/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cwsim's private header: the trace-driven simulator of Bosch & Mullender,
 * section 4.  Sections follow the files: scenario.c (what to simulate),
 * trace.c (best-effort load), stream.c and setup.c (layout and
 * admission), engine.c (the event loop over virtual time), move.c and
 * pool.c (a pool's moves and layout), report.c (text, JSON,
 * CSV and plots), cmd.c (the run, sweep and model subcommands), plan.c
 * (the plan subcommand).
 *
 * The simulator owns no scheduling logic (DESIGN rule 1): admission is
 * cw_admit_plan, each disk's plan (slack budget, idle allowance, server)
 * is cw_admit_disk_plan as in clockwised, dispatch is cw_sched,
 * service-time bounds are cw_model_service_ns, the disk's mechanics
 * cw_model_disk_serve.  It only supplies the clock and the requests.
 */
#ifndef CWSIM_SIM_H
#define CWSIM_SIM_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <clockwise/admit.h>
#include <clockwise/admit-state.h>
#include <clockwise/model.h>
#include <clockwise/mover.h>
#include <clockwise/path.h>
#include <clockwise/sched.h>
#include <clockwise/sched-beq.h>

#define SIM_KIB UINT64_C(1024)
#define SIM_MIB (UINT64_C(1024) * 1024)
#define SIM_MAX_DISKS 64
#define SIM_MAX_CLIENTS 16
#define SIM_MAX_DEPTH 256
#define SIM_EXIT_USAGE 2
#define SIM_REPORT_STREAMS 64

/* ---- scenario.c -------------------------------------------------------- */

enum sim_placement {
	SIM_ROTATION = 0,	/* block n on disk (d0 + n) mod N, outer zones */
	SIM_RANDOM,		/* disks in turn, each block anywhere on its disk */
	SIM_SINGLE,		/* the paper's "memory optimized": one disk per stream */
	SIM_N_PLACEMENTS,
};

enum sim_video {
	SIM_VIDEO_MIX = 0,	/* each pair's video type drawn from the seed */
	SIM_VIDEO_817,		/* Motion-JPEG 817 KB/s in 1 MB blocks */
	SIM_VIDEO_245,		/* Motion-JPEG 245 KB/s in 256 KB blocks */
};

/* The BE queue's order on every disk (cw_sched_beq_ops). */
enum sim_be_order {
	SIM_BEQ_FIFO = 0,
	SIM_BEQ_RBFQ,
	SIM_BEQ_SFC,
	SIM_N_BEQ,
};

/* A best-effort client that keeps depth reads of bytes outstanding, at
 * random places of its own BE partition (client k reads partition k). */
struct sim_client {
	char name[32];
	uint32_t weight;		/* >= 1 */
	double resv_pct, limit_pct;	/* 0: none */
	bool resv_of_be, limit_of_be;	/* of the disk's BE capacity, not its time */
	unsigned depth;
	uint64_t bytes;
	uint32_t prio;			/* SFC */
	int64_t credit_ns;		/* RBFQ idle credit */
	double zipf;			/* reads Zipf(zipf) over its blocks, 0: uniform */
};

enum sim_be_source {
	SIM_BE_NONE = 0,
	SIM_BE_CELLO,		/* built-in generator after HP CELLO's busiest day */
	SIM_BE_CSV,		/* time,disk,offset,size,rw */
	SIM_BE_BLKPARSE,	/* blkparse's default text output */
};

/* Which plan each disk runs with (cw_admit_disk_plan): clockwised's, or
 * the paper's. */
enum sim_plan {
	SIM_PLAN_DAEMON = 0,	/* guard, BE reserve, automatic server, BE pieces */
	SIM_PLAN_PAPER,		/* ΔL itself, no reserve, no automatic server */
};

struct sim_scenario {
	char model_spec[PATH_MAX + 80];	/* preset name, file:PATH or pool:PATH:DISK */
	struct cw_model model;
	unsigned disks;
	unsigned placements;		/* bit mask of enum sim_placement */
	unsigned policies;		/* bit mask of enum cw_sched_policy */
	int64_t duration_ns;
	uint64_t seed;
	unsigned streams;		/* run: at most this many (0: until refused) */
	enum sim_video video;
	unsigned buffer_scale;		/* multiplies the streams' block sizes */
	unsigned rt_area_pct;		/* outer share of each disk for RT data */
	unsigned be_area_pct;		/* inner share of each disk for BE data */
	unsigned clip_blocks;		/* blocks per stream file, looped */
	bool aligned;			/* all streams start at 0 (else a random phase) */
	enum cw_admit_due due;		/* when a striped stream's request is due */
	bool worst_case;		/* every request takes its admitted or expected time */
	enum sim_be_source be;
	char be_path[PATH_MAX];
	double be_rate;			/* cello: mean requests per second */
	double be_peak;			/* cello: burst rate */
	double be_burst_s;		/* cello: mean length of a burst */
	uint64_t be_bytes;		/* cello: request size */
	unsigned be_write_pct;
	unsigned be_partitions;
	uint64_t be_part_max_bytes;	/* at most this each (0: the BE area shared out) */
	uint64_t be_pblock_bytes;
	/* An SSD cache of the BE partitions' blocks (clockwise/cache.h's
	 * policy): its size as a share of them (0: none), and how long a
	 * read of a cached block takes there. */
	unsigned cache_pct;
	unsigned cache_ssd_us;
	/* A move of best-effort partitions, carried out by the library's
	 * mover (clockwise/mover.h) in batches of mover_depth blocks, each
	 * block a best-effort read and write, as clockwised's mover does:
	 * move_part (-1: every one) to the disks of move_disks (a mask of
	 * scenario disks), or off disk move_off (-1: none), from move_at_ns
	 * on (-1: no move).  A move runs on a pool: the scenario's, else a
	 * scratch pool cwsim makes (removed at exit). */
	int64_t move_at_ns;
	int move_part;
	uint64_t move_disks;
	int move_off;
	unsigned mover_depth;
	unsigned mover_share;
	uint64_t bus_bps;		/* 0: no bus limit */
	/* The host's CPUs as a resource of admission (clockwise/admit.h):
	 * host_request_us, host_copy_mb_s, host_cpus, host_share_pct; none
	 * unless a cost is given. */
	struct cw_host_model host;
	int64_t server_period_ns;	/* periodic BE server on every disk, 0: none */
	int64_t server_slice_ns;
	/* A pool database: its disks, the partitions cwsim lays out in it
	 * (cw_part_create, as clockwised does) and its admission state
	 * (cw_admit_state_reserve) in place of cwsim's own (empty: none). */
	char pool_path[PATH_MAX];
	/* Copies of each block of the partitions cwsim lays out (1..3),
	 * placed by the pool's placement (cw_part_create): more than one
	 * runs on a pool, the scenario's or a scratch one.  Writes go to
	 * every copy, reads to the first in sync (cw_path_split). */
	unsigned copies;
	/* A disk failure (fail = DISK at TIME): disk fail_disk (-1: none)
	 * is gone from fail_at_ns on: its copies are marked out of sync
	 * (cw_pool_disk_set_stale), reads go to the survivors, what was
	 * queued on it fails, and a spare takes it over if one carries the
	 * streams booked on it, as clockwised's takeover decides
	 * (cw_admit_state_takeover: a rebuild the mover runs in slack), or
	 * none does and the disk stays degraded, the reason kept.  spares (a
	 * mask of scenario disks, 0: none): disks made spares of the pool
	 * (cw_disk_set_spare) before anything is placed.  survive: the
	 * streams' reservations' --survive (auto: on, with copies). */
	int fail_disk;
	int64_t fail_at_ns;
	uint64_t spares;
	enum cw_admit_survive survive;
	/* cwsim run -o DIR with fail =: the run's timeline, one row per
	 * timeline_ns (empty: none) */
	char timeline_path[PATH_MAX];
	int64_t timeline_ns;
	enum sim_plan plan;
	unsigned loads;			/* sweep: load points per placement */
	unsigned be_orders;		/* bit mask of enum sim_be_order */
	struct sim_client clients[SIM_MAX_CLIENTS];
	unsigned n_clients;
	enum cw_sfc_curve sfc_curve;
	uint32_t sfc_window_ppm;
	char base_dir[PATH_MAX];	/* relative paths in a file start here */
};

void sim_scenario_defaults(struct sim_scenario *sc);
/* Presets "paper" and "quick"; -ENOENT otherwise. */
int sim_scenario_preset(const char *name, struct sim_scenario *sc);
/* Reads KEY = VALUE lines into sc; prints "NAME:LINE: why" and returns
 * -EINVAL on the first bad line. */
int sim_scenario_load(const char *path, struct sim_scenario *sc);
/* One "key=value" (from --set); where names the source for messages. */
int sim_scenario_set(struct sim_scenario *sc, const char *key, const char *value,
		     const char *where);
/* Resolves the model and checks the whole: prints and returns -EINVAL. */
int sim_scenario_finish(struct sim_scenario *sc);
/* What a command line names: the preset (or else the file at path), then
 * --quick (a minute, at most 8 loads), then each "KEY=VALUE" of sets in
 * order (paths in them relative to the working directory), then
 * sim_scenario_finish.  Prints what is wrong and returns -EINVAL. */
int sim_scenario_from_args(const char *preset, const char *path, bool quick,
			   char *const *sets, size_t n_sets, struct sim_scenario *sc);
const char *sim_placement_name(enum sim_placement p);
const char *sim_be_order_name(enum sim_be_order o);
const char *sim_plan_name(enum sim_plan p);
/* The options the scenario's plan takes: cw_admit_plan_opts_init (daemon)
 * or cw_admit_plan_opts_paper.  An explicit server (server_period_ms)
 * takes the place of the BE reserve and the automatic server. */
void sim_scenario_plan_opts(const struct sim_scenario *sc, struct cw_admit_plan_opts *ret);
/* How many disks are spares (spare =). */
static inline unsigned sim_scenario_spares(const struct sim_scenario *sc)
{
	return (unsigned)__builtin_popcountll(sc->spares);
}

/* ---- trace.c ----------------------------------------------------------- */

struct sim_rng {
	uint64_t s[4];
};

void sim_rng_seed(struct sim_rng *r, uint64_t seed, uint64_t stream);
uint64_t sim_rng_next(struct sim_rng *r);
double sim_rng_unit(struct sim_rng *r);		/* [0, 1) */
uint64_t sim_rng_below(struct sim_rng *r, uint64_t n);	/* [0, n) */

struct sim_be_rec {
	int64_t t_ns;
	uint32_t part;		/* BE partition (trace disk folded) */
	bool write;
	uint64_t off;		/* byte offset in the partition */
	uint64_t bytes;
};

struct sim_trace {
	struct sim_be_rec *v;
	size_t n, cap;
};

/* Builds the BE load the scenario names, up to its duration.  Offsets are
 * folded into part_bytes.  Bad input prints "NAME:LINE: why" and returns
 * -EINVAL. */
int sim_trace_load(const struct sim_scenario *sc, uint64_t part_bytes, struct sim_trace *ret);
void sim_trace_done(struct sim_trace *t);

/* ---- stream.c, setup.c (the set-up), engine.c (the run) ----------------- */

/* The end of the RT area (the outer rt_area_pct of a disk) and the start
 * of the BE area (its inner be_area_pct), in bytes. */
uint64_t sim_rt_end(const struct sim_scenario *sc);
uint64_t sim_be_start(const struct sim_scenario *sc);

/* Where a partition block of a BE partition lies. */
struct sim_pblock {
	uint32_t disk;		/* index into the scenario's disks */
	uint64_t off;		/* byte offset on the disk */
};

/* One RT stream as admitted: its QoS and, per disk it uses, the task. */
struct sim_stream {
	bool video;
	uint64_t bandwidth_bps;
	uint64_t block_bytes;
	int64_t period_ns;		/* b/B as cw_admit_plan rounded it */
	int64_t phase_ns;		/* first release */
	uint32_t *disk;			/* clip_blocks entries */
	uint64_t *off;
	/* With copies: copies 1.. of each, clip entries per copy (copy c
	 * of entry k at [(c - 1) * clip + k]); NULL with one copy. */
	uint32_t *xdisk;
	uint64_t *xoff;
	bool survive;			/* admitted to survive a disk */
	int64_t disk_period_ns[SIM_MAX_DISKS];
	int64_t disk_service_ns[SIM_MAX_DISKS];
	int64_t disk_deadline_ns[SIM_MAX_DISKS];	/* D: a stream period */
};

/* A placement's streams, added in order until admission refused one. */
struct sim_setup {
	const struct sim_scenario *sc;
	enum sim_placement placement;
	size_t n_streams;		/* admitted */
	uint64_t clip;			/* blocks per stream file as placed */
	size_t cap;
	struct sim_stream *streams;
	char refusal[CW_ADMIT_REASON_MAX + 192];	/* why the next one was refused */
	uint64_t host_need_ps;		/* what the admitted streams need of the host */
	uint64_t next_bps, next_block;	/* the refused one's QoS (0: none refused) */
	/* per disk: tasks in admission order (the server first, if any) */
	struct cw_task *tasks[SIM_MAX_DISKS];
	size_t n_tasks[SIM_MAX_DISKS];
	size_t server_tasks;		/* 0 or 1 per disk */
	uint64_t be_part_bytes;
	struct cw_admit_plan_opts plan_opts;	/* sim_scenario_plan_opts */
	struct cw_task be_reserve;	/* admission keeps it on every disk (zero: none) */
	uint64_t be_piece_bytes;	/* BE pieces are cut at most this long */
	/* Per disk (sc->disks): the model admission books it as, and the
	 * one its mechanics run (both sc->model without a pool; with one,
	 * what the pool's admission state has, and the model the disk
	 * emulates or else sc->model). */
	struct cw_model *adm_model, *mech_model;
	/* With a pool: each BE partition's blocks, be_part_bytes /
	 * be_pblock_bytes of them per partition, partition after partition
	 * (NULL: striped over the BE area), and the disks' pool ids. */
	struct sim_pblock *be_blocks;
	/* With copies: copies 1.. of those blocks, block after block
	 * (sc->copies - 1 each); NULL with one copy. */
	struct sim_pblock *be_xblocks;
	uint32_t disk_ids[SIM_MAX_DISKS];
};

/* Admits streams (video, its audio, next video, ...) until admission
 * refuses or max_streams (0: no limit) are in.  If curve is not NULL, it
 * is called after each admitted stream with the load and the least ΔL. */
typedef void (*sim_curve_fn)(void *userdata, size_t streams, double load_mb_s,
			     int64_t delta_l_ns);
int sim_setup_build(const struct sim_scenario *sc, enum sim_placement placement,
		    enum sim_video video, size_t max_streams, sim_curve_fn curve, void *userdata,
		    struct sim_setup *ret);
void sim_setup_done(struct sim_setup *s);
/* The size of each BE partition: the BE area of every disk, in pool
 * blocks, shared out.  Prints why not and returns -EINVAL. */
int sim_be_part_bytes(const struct sim_scenario *sc, uint64_t *ret);
/* What the setters of a set-up share (setup.c for cwsim's own layout,
 * pool.c for a pool's).  Stream i's kind (video or audio, its rate and
 * block, clip entries of disk and off allocated) and the draw its
 * phase comes from (modulo its period): every pair of streams draws the
 * same whatever the scenario, from kinds seeded with (seed, 1). */
int sim_stream_draw(const struct sim_scenario *sc, enum sim_video video, size_t i,
		    uint64_t clip, struct sim_rng *kinds, struct sim_stream *st,
		    uint64_t *ret_phase_draw);
void sim_stream_free(struct sim_stream *st);
int sim_setup_add_task(struct sim_setup *s, unsigned d, const struct cw_task *t);
/* Appends st (admitted, its tasks added) to s's streams, and tells curve;
 * on failure st is freed. */
int sim_setup_push(struct sim_setup *s, struct sim_stream *st, sim_curve_fn curve,
		   void *userdata);
/* The server's task (if any) and the first n_streams streams' tasks on
 * disk d into ret (room for s->n_tasks[d]); returns how many. */
size_t sim_setup_tasks(const struct sim_setup *s, unsigned d, size_t n_streams,
		       struct cw_task *ret);
/* The plan of disk d carrying the server (if any) and the first n_streams
 * streams, as clockwised would run it (cw_admit_disk_plan); an explicit
 * server shows as the plan's server, and is not one of its n_tasks. */
int sim_setup_plan(const struct sim_setup *s, unsigned d, size_t n_streams,
		   struct cw_disk_plan *ret);
double sim_setup_load_mb_s(const struct sim_setup *s, size_t n_streams);

/* What one BE client got.  Shares are of the disks' time, counted in the
 * expected service time the scheduler charges (the disk model's), summed
 * over the disks and divided by run time times disks. */
struct sim_client_result {
	uint64_t requests;
	double mb_s;
	double share;			/* achieved */
	double resv_share, limit_share;	/* asked (0: none) */
	double resv_part;		/* of the achieved, the part given for the reservation */
	double throttled_s;		/* summed over disks */
	double mean_ms, p99_ms;
};

struct sim_result {
	enum sim_placement placement;
	enum cw_sched_policy policy;
	enum sim_be_order be_order;
	double be_capacity;		/* least over the disks, a share of its time */
	size_t n_clients;
	struct sim_client_result clients[SIM_MAX_CLIENTS];
	/* Over the clients: among those with neither reservation nor limit,
	 * the largest distance between a client's part of their service and
	 * its weight's part; the least share / reservation; the most a share
	 * went over its limit (0 when none did).  -1: no such client. */
	double share_error_max, resv_met, limit_over;
	double limit_ratio;		/* the most share / limit (-1: no limit) */
	size_t streams;
	double rt_load_mb_s;
	int64_t delta_l_ns[SIM_MAX_DISKS];
	int64_t delta_l_min_ns;		/* CW_ADMIT_NO_LIMIT without streams */
	int64_t be_budget_ns[SIM_MAX_DISKS];	/* the plan's: ΔL after the guard */
	int64_t be_budget_min_ns;
	int64_t server_slice_ns[SIM_MAX_DISKS];	/* the plan's server, 0: none */
	uint64_t rt_done, rt_misses, rt_overruns;
	int64_t rt_min_slack_ns;	/* INT64_MAX: no RT request */
	uint64_t be_requests, be_done, be_rejected, be_overruns;
	/* The overrun watch, as in clockwised: margins raised on a disk
	 * whose requests kept overrunning, the largest (ppm), and disks
	 * whose streams no larger margin fits, which gave best effort no
	 * more slack. */
	uint64_t margin_raises, slack_stopped;
	uint32_t margin_max_ppm;
	uint64_t be_slack, be_idle, be_server;	/* BE dispatches by route (cw_sched_stats) */
	double be_mean_ms, be_p50_ms, be_p99_ms, be_max_ms;
	double be_part0_mean_ms;	/* BE partition 0 alone (the paper plots CELLO disk 0) */
	/* The cache: pieces read from it and from the disks, blocks promoted
	 * (a best-effort read of the block each) and demoted. */
	uint64_t cache_hits, cache_misses, cache_promotions, cache_demotions;
	/* The move (move =, evacuate =): block copies planned, switched,
	 * failed, and made (a block written while copied is copied again);
	 * when it began and ended (-1: unfinished); best effort's latency
	 * by the requests' arrival: before it began, while it ran, after. */
	uint64_t move_blocks, move_done, move_failed, move_copies;
	double move_start_s, move_end_s;
	uint64_t be_phase_n[3];
	double be_phase_mean_ms[3], be_phase_p99_ms[3];
	uint64_t be_blocks_on[SIM_MAX_DISKS];	/* BE blocks on each disk at the end */
	/* The failure (fail =): when the disk failed, the spare that took
	 * it over (-1: none), when its rebuild began and ended (-1:
	 * unfinished), its blocks and those done, the end of the degraded
	 * interval (the rebuild's end, else -1), the copies left out of sync
	 * at the end over every partition, best-effort pieces that failed
	 * on the disk, and per stream (the first SIM_REPORT_STREAMS) its
	 * requests late against their stream deadline (release + b/B), the
	 * latest (ms, negative: the least slack), those sent as best effort
	 * (a copy on a disk it is not booked on, or not admitted to
	 * survive), and survivors' and others' misses summed. */
	double fail_at_s, rebuild_start_s, rebuild_end_s, degraded_end_s;
	int fail_spare;
	/* the takeover's word (cw_admit_takeover): spares that could not
	 * carry the streams, and each one's reason, or that none had room
	 * ("": the disk held nothing) */
	unsigned fail_refused;
	char fail_why[CW_DISK_UNREPLACED_MAX];
	uint64_t rebuild_blocks, rebuild_done, stale_at_end, be_failed;
	size_t n_stream_results;
	struct {
		uint64_t requests, misses;
		uint64_t be;		/* requests (or reads again) sent as best effort */
		double worst_ms;
		bool survive;
	} stream_res[SIM_REPORT_STREAMS];
	uint64_t survive_misses, other_misses;
	/* every BE request's, the trace's and the clients', move or not */
	double be_all_mean_ms, be_all_p99_ms;
	double util[SIM_MAX_DISKS];
	int64_t end_ns;
	uint64_t events;
	double wall_s;
};

/* Simulates the first n_streams streams of setup with the BE trace under
 * policy, in virtual time. */
int sim_run(const struct sim_setup *setup, size_t n_streams, const struct sim_trace *trace,
	    enum cw_sched_policy policy, struct sim_result *ret);
/* The same with the BE order given (sim_run: the scenario's first). */
int sim_run_be(const struct sim_setup *setup, size_t n_streams, const struct sim_trace *trace,
	       enum cw_sched_policy policy, enum sim_be_order order, struct sim_result *ret);

/* ---- pool.c ------------------------------------------------------------ */

struct cw_pool;
/* For _cleanup_: close and free (NULL-safe). */
void sim_pool_closep(struct cw_pool **p);
void sim_state_freep(struct cw_admit_state **st);

/* The number of disks and the block size of the pool at path, for a
 * scenario with pool = path; prints why not and returns -errno. */
int sim_pool_probe(const char *path, unsigned *ret_disks, uint64_t *ret_block_bytes);
/* The streams of sim_setup_build on the pool: each stream i on partition
 * "s<i>" and BE partition p on "be<p>" (made with the scenario's
 * placement, streams in the outer zone and best effort in the inner one,
 * unless they are there already), admitted one after the other by the
 * pool's admission state until it refuses one or max_streams (0: no
 * limit) are in.  s has its common part set.  Prints why not and
 * returns -errno. */
int sim_pool_setup(struct sim_setup *s, enum sim_video video, size_t max_streams,
		   sim_curve_fn curve, void *userdata);

/* A scratch pool for a move (sc->move_at_ns >= 0) without pool =: in a
 * new directory of $TMPDIR, sc->disks sparse files of the model's size
 * that emulate it, blocks of be_pblock_bytes; sets sc->pool_path.  The
 * directory goes at exit.  Prints why not and returns -errno. */
int sim_pool_scratch(struct sim_scenario *sc);
/* A run's own copy of the scenario's pool, opened (a move changes the
 * pool's map and journal; the scenario's pool stays as it was).  Prints
 * why not and returns -errno. */
int sim_pool_run_copy(const struct sim_scenario *sc, struct cw_pool **ret);

/* The admission state of a run's copy of the pool (sim_pool_run_copy)
 * with the first n_streams streams of s booked as sim_pool_setup booked
 * them (cw_admit_state_reserve, in the same order), for a failure's
 * takeover (cw_admit_state_takeover).  Prints why not and returns
 * -errno. */
int sim_pool_run_state(const struct sim_setup *s, struct cw_pool *pool, size_t n_streams,
		       struct cw_admit_state **ret);

/* ---- move.c ------------------------------------------------------------ */

/* An I/O of the mover (or a write mirrored to a block's destination while
 * it is copied: task UINT32_MAX), on scenario disk disk. */
struct sim_move_io {
	unsigned disk;
	uint64_t off, bytes;
	uint32_t task;
	bool write;
};

struct sim_move;
/* The move of the scenario on a copy of the set-up's pool, the first
 * n_streams streams playing (with a failure, booked in the copy's
 * admission state: sim_pool_run_state); -EINVAL without a pool set-up. */
int sim_move_open(const struct sim_setup *s, size_t n_streams, struct sim_move **ret);
void sim_move_free(struct sim_move *m);	/* NULL-safe */
/* Where each best-effort block is now (as sim_setup.be_blocks). */
const struct sim_pblock *sim_move_blocks(const struct sim_move *m);
/* Journals the move (cw_move_start per partition): prints why not and
 * returns -EINVAL when it is refused. */
int sim_move_begin(struct sim_move *m, int64_t now);
bool sim_move_running(const struct sim_move *m);	/* begun, not done */
int64_t sim_move_end_ns(const struct sim_move *m);	/* -1: not done */
/* What the mover does at now: *ret_n reads to queue (up to
 * CW_MOVER_DEPTH_MAX), or with *ret_wake_ns set, nothing before then. */
int sim_move_next(struct sim_move *m, int64_t now, struct sim_move_io *ret, unsigned *ret_n,
		  int64_t *ret_wake_ns);
/* One of the batch's I/Os is done (err: 0 or -errno): the block's write
 * to queue in *ret (*ret_n 1), or nothing; after the batch's last, the
 * library switches its blocks and the mover's pace on each disk follows
 * others_ns (per disk: other best-effort clients' busy time so far). */
int sim_move_io_done(struct sim_move *m, const struct sim_move_io *io, int err, int64_t now,
		     const uint64_t *others_ns, struct sim_move_io *ret, unsigned *ret_n);
/* A write of bytes at off of best-effort partition part: where it goes
 * as well, on blocks being copied (which marks their copies dirty), at
 * most max, as cw_part_write_mirrors() answers (disk ids are cwsim's
 * disk index plus one); returns how many. */
int sim_move_mirrors(struct sim_move *m, uint32_t part, uint64_t off, uint64_t bytes,
		     uint64_t *ret_skips, struct cw_extent *ret, unsigned max);
/* The move's counts into res (nothing if it never began). */
int sim_move_result(struct sim_move *m, struct sim_result *res);
/* Disk disk fails at now (fail =): its copies marked out of sync, and a
 * spare takes it over if one carries the streams booked on it, as
 * clockwised's takeover decides (cw_pool_disk_set_stale,
 * cw_admit_state_takeover); the rebuild then runs as a move.
 * *ret_spare: the spare's index, or -1 (no spare replaces it: the
 * reason kept in the pool, cw_disk_set_unreplaced, and in
 * sim_move_takeover_why). */
int sim_move_fail(struct sim_move *m, unsigned disk, int64_t now, int *ret_spare);
/* What the takeover said: each spare tried that did not carry the
 * streams and why, or that none had room ("": the disk held nothing, or
 * no failure yet); *ret_refused: how many spares refused. */
const char *sim_move_takeover_why(const struct sim_move *m, unsigned *ret_refused);
/* Where the bytes at off of best-effort partition part (stream >= 0:
 * of stream stream's partition) lie now in the run's pool, every copy
 * with its sync state, disk ids cwsim's index plus one, as
 * cw_part_map_copies; and the extent cw_part_map gives, its disk id
 * alike. */
int sim_move_copies(struct sim_move *m, uint32_t part, int stream, uint64_t off,
		    struct cw_copy *ret);
int sim_move_map(struct sim_move *m, uint32_t part, uint64_t off, uint64_t len,
		 struct cw_extent *ret);
/* Copies out of sync over every partition of the run's pool. */
uint64_t sim_move_stale(struct sim_move *m);

/* ---- path.c ------------------------------------------------------------ */

/* The request split's layout (clockwise/path.h) for best-effort
 * partition part: the set-up's or the move's blocks (NULL: cwsim's own
 * striping), the cache (NULL: none) with its slots and counts, the move
 * (NULL: none). */
struct sim_path {
	const struct sim_setup *s;
	const struct sim_pblock *blocks;
	const struct sim_pblock *xblocks;	/* sim_setup.be_xblocks */
	uint32_t part;
	struct cw_cache_policy *cache;
	const uint32_t *cslot;
	uint64_t *hits, *misses;
	struct sim_move *mv;
	/* After a failure (fail =): the map and the copies' sync state are
	 * the run's pool's (sim_move_map, sim_move_copies). */
	bool failed;
	/* Each disk's load as a mirrored best-effort read's copy choice sees
	 * it (cw_path_snake_copy), by disk index; NULL: the first copy in
	 * sync. */
	const struct cw_path_load *loads;
};
#define SIM_PATH_SSD (SIM_MAX_DISKS + 1)	/* the cache's disk id */
extern const struct cw_path_ops sim_path_ops;
/* cw_path_split() of a READ or WRITE of bytes at off of p's partition. */
int sim_path_split(struct sim_path *p, uint64_t off, uint64_t bytes, bool write,
		   int (*emit)(void *arg, const struct cw_path_piece *piece), void *arg);

/* ---- report.c ---------------------------------------------------------- */

void sim_report_text(FILE *f, const struct sim_scenario *sc, const struct sim_result *r);
void sim_report_json(FILE *f, const struct sim_scenario *sc, const struct sim_result *r);
void sim_report_csv_header(FILE *f);
void sim_report_csv(FILE *f, const struct sim_result *r, unsigned disks);
/* Writes DIR/NAME.gp and runs gnuplot on it (PNG and SVG): 0, or -ENOENT
 * when gnuplot is missing, or -EIO. */
int sim_plot(const char *dir, const char *name, const char *script);

/* ---- cmd.c ------------------------------------------------------------- */

int sim_cmd_run(int argc, char **argv);
int sim_cmd_sweep(int argc, char **argv);
int sim_cmd_model(int argc, char **argv);	/* prints a preset as a cwmodel1 line */
int sim_cmd_setup(int argc, char **argv);	/* streams and BE trace for a live run */

/* ---- sfcfig.c ---------------------------------------------------------- */

int sim_cmd_irregularity(int argc, char **argv);	/* the SFC paper's Figure 8 */
/* ---- plan.c ------------------------------------------------------------ */

struct sim_plan_args {
	bool json;
	bool help;
	const char *pool;		/* --pool FILE */
	const char *preset;
	const char *scenario;
	char **sets;			/* --set KEY=VALUE, n_sets of them (malloc'ed) */
	size_t n_sets;
	/* --survive 0|1: the scenario's streams admitted (not) to survive
	 * the loss of a disk, as the key survive = says; -1: not given */
	int survive;
};

/* `cwsim plan`'s arguments (argv[0] is "plan"): 0 with *ret (free
 * ret->sets), -EINVAL with why filled in, or -ENOMEM. */
int sim_plan_parse_args(int argc, char **argv, struct sim_plan_args *ret, char *why,
			size_t why_len);
int sim_cmd_plan(int argc, char **argv);
/* `cwsim admit --pool`: a stream over a pool's partition (plan.c). */
int sim_cmd_admit_pool(int argc, char **argv);
/* s as a JSON string, quoted and escaped. */
void sim_json_string(FILE *f, const char *s);

#endif
