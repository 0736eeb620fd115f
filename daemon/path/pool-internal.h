/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pool-internal.h — what the data path's files share (the map of them is
 * pool-backend.c's opening comment): struct pb, its disks, lanes, exports,
 * requests and pieces, and each file's functions for the others, in a
 * section named after the file.  Never used outside daemon/.
 */
#ifndef CWD_POOL_INTERNAL_H
#define CWD_POOL_INTERNAL_H

#include <errno.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <clockwise/admit-state.h>
#include <clockwise/emu.h>
#include <clockwise/io.h>
#include <clockwise/model.h>
#include <clockwise/mover.h>
#include <clockwise/cache.h>
#include <clockwise/path.h>
#include <clockwise/sched.h>
#include <clockwise/sched-beq.h>
#include <clockwise/slots.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "daemon/log.h"
#include "daemon/park.h"
#include "daemon/path/path.h"
#include "daemon/path/stall-probe.h"
#include "daemon/path/stats.h"

#define ZERO_CHUNK (UINT32_C(1) << 20)	/* WRITE_ZEROES is written in pieces of this */
#define REAP_BATCH 64
/* While requests are in flight on a lane without streams, the dispatcher
 * waits for completions at most this long before it looks at its record
 * again (an engine wait cannot also watch the record). */
#define POLL_NS (50 * CW_NS_PER_US)
/* The same on an image on a cluster: its requests take milliseconds, and
 * looking at the record 20000 times a second while they run takes CPU
 * from what serves them when the OSDs share the host. */
#define POLL_NS_RBD (500 * CW_NS_PER_US)
/* Writes to a disk file look at its size at most this often (lane.c). */
#define SHRUNK_CHECK_NS CW_NS_PER_MS
/* Requests this small are reused (preq_new), not malloc'ed.  The room is
 * cw_path_split_max()'s bound, not the pieces a request ends up with: a
 * 4 KiB read's bound is 5, a 128 KiB read's 7 (a write's, with the
 * mirrors a moving block may need, 24 and more: those are malloc'ed). */
#define PREQ_SMALL_PIECES 8
#define ERRORS_LOGGED 8	/* per disk; then one line per 1000 */
#define SLOTS_WINDOW 4096	/* slots a booking may look ahead (the domain's max_window) */
#define BOOKING_SLOTS_MAX 64	/* one piece books at most this many slots */
#define SLOTS_THREADS 1024	/* connection and dispatcher threads booking at once */
#define LANE_HOLDS 16		/* thick bookings holding a lane's cursor at once (lane.c) */
#define PB_RESV_MAX 1024	/* reservations at once (static and from the control socket) */
/* Disk slots: room for every disk the pool can hold, made at start, so a
 * disk added while the daemon runs takes a free slot and the array never
 * moves under the threads that read it.  A slot is not reused after its
 * disk was removed; per-disk arrays (struct resv, the glue's tasks) are
 * indexed by slot and have this many entries. */
#define PB_DISKS_CAP CW_DISKS_MAX

struct piece;
struct preq;
struct lane_miss;

/* Flags of pb_submit_internal. */
#define PB_SUB_ZERO 1u
#define PB_SUB_FUA 2u

/* A plan's "no limit" (CW_ADMIT_NO_LIMIT) as a time the scheduling core
 * can add to without overflow. */
static inline int64_t no_limit(int64_t ns)
{
	return ns == CW_ADMIT_NO_LIMIT ? INT64_MAX / 4 : ns;
}

/* A disk's plan from the admission state, handed to its first lane's
 * dispatcher when streams are admitted or released while it runs
 * (lane_post_plan). */
struct lane_plan {
	struct cw_disk_plan plan;
	/* The streams admitted on the disk, with their T and C there: the
	 * scheduler knows them before their first request and forgets
	 * others (release_ns unused). */
	size_t n_streams;
	struct cw_sched_stream streams[];
};

struct lane {
	struct pb *pb;
	struct disk *disk;
	unsigned idx;
	pthread_t thread;
	bool started;
	struct cw_slots *rec;		/* bookings of this lane */
	int64_t slot_ns;
	atomic_int_fast64_t booked_end;	/* highest booked slot + 1, a hint */
	/* A thick booking's first slot, which the dispatcher's cursor must
	 * not pass until it is committed on every copy's record (lane.c,
	 * lane_push_thick): INT64_MAX for a free entry; hold_n counts the
	 * taken ones, adv is the slot the dispatcher advances to. */
	atomic_int_fast64_t hold_at[LANE_HOLDS];
	atomic_uint hold_n;
	atomic_int_fast64_t adv;
	_Atomic(struct piece *) overflow;	/* pushed by dispatchers on a full window */
	struct park park;		/* the dispatcher's, in lane_park */
	/* The dispatcher waits in its engine (cw_io_wait) without the
	 * dispatch lock: waking it is a kick of the engine (lane.c). */
	atomic_bool eng_waiting;
	/* Whoever holds it runs the lane's dispatch (the fields below): its
	 * dispatcher, or a connection's reader while the dispatcher is idle
	 * (lane_unplug).  0 free, 1 held, 2 held with the dispatcher waiting. */
	atomic_int dlock;
	atomic_bool handback;		/* a reader left requests in flight */
	atomic_bool stop;
	_Atomic(struct lane_plan *) plan;	/* posted, not yet applied */
	struct cwd_stats st;
	/* Owned by the dispatcher thread alone. */
	struct cw_io_engine *eng;
	/* The lane's dispatch step (clockwise/path.h): pl.sched on RT
	 * disks' lane 0; on lanes without streams the disk's best-effort
	 * order (none: arrival order, straight into the FIFO), from which
	 * the step moves what may start into its FIFO, up to queue_depth in
	 * flight; what is in flight, one in service under cw_sched. */
	struct cw_path_lane pl;
	struct lane_client *clients;	/* by export client id (lane-beq.c) */
	size_t n_clients;
	struct lane_miss *miss;		/* lanes with streams (lane-miss.c) */
	_Atomic(struct lane_miss *) miss_pub;	/* the same, for the thread that logs */
	uint64_t starts;		/* requests handed to the engine, ever */
	bool realtime;			/* the dispatcher runs SCHED_FIFO */
	bool be_low;			/* ... below the connections, for best effort's
					 * copies (lane_copy_priority) */
};

struct disk_model {
	struct cw_model m;
	struct disk_model *older;
};

/* An emulating engine's lateness, summed over the disk's lanes, and the
 * warning a lane logs (at most every EMU_WARN_NS) when cw_io_emu_behind()
 * says the host fell behind (pool-backend.c). */
#define EMU_WARN_NS (10 * CW_NS_PER_S)
/* A stall of the host (stall-probe.h) this long is logged at the tick. */
#define HOST_STALL_LOG_NS (10 * 1000 * 1000)
/* pool-emu.c */
void pb_disk_emu_stats(const struct disk *d, struct cw_io_emu_stats *ret);
void pb_disk_emu_warn(struct disk *d);

struct disk {
	uint32_t id;
	char name[CW_NAME_MAX + 1];
	char path[4096];
	enum cw_tier tier;
	int fd;
	bool direct;
	enum cw_io_kind io_kind;	/* the engine its lanes use */
	int64_t poll_ns;		/* POLL_NS, or POLL_NS_RBD on an image */
	struct cw_model *emulate;	/* the model its engine keeps the time of, or NULL */
	/* for tests: its engines inject these faults (clockwise/fault.h), or NULL */
	const struct cw_io_fault_opts *fault;
	/* The first error an fdatasync of it returned, or 0: every later one
	 * fails with it too (lane.c, flush_error). */
	atomic_int flush_err;
	atomic_int_fast64_t emu_warned_ns;	/* when the host last fell behind it */
	size_t align;
	/* The model, replaced whole when the disk is calibrated again
	 * (pb_disk_set_model) while connection threads and dispatchers read
	 * it: read it with disk_model(); old ones are freed with the disk. */
	_Atomic(struct disk_model *) model;
	enum cw_sched_policy policy;
	/* The best-effort order of every lane (NULL: FIFO) and its options. */
	const struct cw_sched_beq_ops *be_order;
	struct cw_sched_sfc_conf sfc;
	unsigned nlanes;
	struct lane *lanes;
	atomic_uint_fast64_t nerrors;
	atomic_bool degraded;		/* its copies were marked out of sync (said once) */
	/* Its failures of mirrored pieces in the current second (degrade.c):
	 * DISK_FAILED_ERRORS of them and every copy on it is marked; then
	 * failed. */
	atomic_int_fast64_t err_second;
	atomic_uint err_count;
	atomic_bool failed;
	uint32_t be_piece;		/* BE pieces are at most this long (cw_admit_be_piece) */
	/* The disk has had streams: every request goes to lane 0, whose
	 * dispatcher runs the scheduling core with the disk's plan. */
	atomic_bool live_streams;
	/* fallocate(PUNCH_HOLE) works on it and leaves zeros (a file on a
	 * file system with holes, a block device that can zero): a range is
	 * zeroed and its space given back without writing. */
	bool can_punch;
	/* A margin its overrun watch proposes (ppm above 1), for the
	 * control thread (pb_misses_tick); 0: none. */
	atomic_uint_fast64_t margin_proposal_ppm;
	atomic_bool no_slack;		/* no margin fits: best effort gets no slack */
	/* A regular file must stay at least need_bytes long (label and
	 * blocks): one truncated under the daemon is found before its next
	 * flush, before its next write once SHRUNK_CHECK_NS passed since its
	 * size was last looked at (size_ns), and at the first request on it
	 * that fails or comes short (lane.c); from then on shrunk fails every
	 * request on it with EIO, so that nothing more is written past its
	 * end (a write there would grow it again, and what was cut would
	 * read as zeros). */
	bool regular;
	dev_t device;			/* the whole disk under it (0: none known) */
	uint64_t need_bytes;
	atomic_bool shrunk;
	atomic_int_fast64_t size_ns;
};

/* The data path's side of an admitted reservation: the admission state's
 * object (which owns it and outlives every request that points here; see
 * pb_admit_event) and the counters of its requests. */
struct resv {
	const struct cw_admit_resv *a;
	size_t idx;			/* in pb->resvs */
	struct cwd_stats st;
	atomic_flag short_told;		/* its short requests logged */
};

/* The part of rv on disk id, or NULL: its period and admitted C.  A
 * move re-books the stream while requests run (a part on its destination
 * disks while it copies, none on its source once done): a request mapped
 * to a disk is the stream's there only while it has a part there. */
static inline const struct cw_admit_resv_part *resv_part(const struct resv *rv, uint32_t id)
{
	return cw_admit_resv_part_on(rv->a, id);
}

/* An export's best-effort QoS on each disk (the admission state's
 * cw_admit_be, by disk slot), replaced whole when it changes while the
 * dispatchers read it; old ones are freed with the export.  gen grows
 * with each: a lane gives its order a client's QoS when it sees a new
 * one. */
struct pbx_be {
	uint64_t gen;
	struct pbx_be *older;
	bool has[PB_DISKS_CAP];
	struct cw_sched_client client[PB_DISKS_CAP];	/* the disk's order gets (spread) */
	struct cw_sched_client due[PB_DISKS_CAP];	/* its share of the disk, for stats */
};

/* What an export's best-effort pieces got: cost is the disk model's mean
 * service time of each (the share RBFQ gives), resv the part of it its
 * order gave for the reservation.  The totals over every disk are also
 * what its requests' delta and rho are taken from (lane-beq.c). */
struct pbx_be_counters {
	atomic_uint_fast64_t requests, bytes, cost_ns, resv_ns;
};

/* The same on one disk, with the time the export had pieces queued or in
 * flight there (busy: backlogged when it is most of an interval) and the
 * time its pieces waited at the head of the order for its limit.  busy
 * is exact on a disk of one lane; on several lanes (an SSD's), a lane
 * going idle just as another gets busy may lose a moment of it. */
struct pbx_be_disk {
	atomic_uint_fast64_t requests, bytes, cost_ns, resv_ns, throttled_ns, busy_ns;
	atomic_int_fast64_t busy_since;	/* 0: not busy now */
	atomic_uint outstanding;	/* pieces on the disk now */
};

/* A client of a lane's order: the QoS generation it has and its record
 * for delta and rho (dispatcher only). */
struct lane_client {
	uint64_t gen;
	struct cw_sched_track trk;
};

/* A client of the disks' best-effort orders: an export, or a connection
 * class within it (clients that opened "EXPORT@CLASS"; a class with a QoS
 * of its own, set for that name, is its own client; any other class is
 * the export's).  Classes are made on the control thread when their QoS
 * is set, appended to the export's list and never freed before it. */
struct pbx_client {
	struct pbx *x;
	char name[CW_NAME_MAX + 1 + CW_NBD_CLASS_MAX + 1];	/* "EXPORT" or "EXPORT@CLASS" */
	uint64_t client;		/* its id in the disks' best-effort orders */
	_Atomic(struct pbx_be *) be;	/* NULL: weight 1, nothing else */
	struct pbx_be_counters be_st;
	struct pbx_be_disk be_disk[PB_DISKS_CAP];	/* by disk slot */
	int64_t since_ns;		/* a client since (cw_now_ns) */
	_Atomic(struct pbx_client *) next;	/* the export's next class */
};

/* An export: one partition. */
struct pbx {
	struct pb *pb;
	struct cw_part *part;
	char name[CW_NAME_MAX + 1];
	char description[192];
	size_t align;			/* its min_block: the largest alignment of its disks */
	/* Slots of the disks it touches.  Only appended to (a partition that
	 * grows onto another disk, pb_export_grow), each entry before the
	 * count that covers it (release; FLUSH loads it with acquire). */
	uint32_t disks[PB_DISKS_CAP];
	atomic_uint ndisks;
	/* FLUSHes between reading that list and handing their pieces to the
	 * lanes: a disk dropped from it (pb_export_drop_disk) is no longer
	 * reached once this was 0 after the drop. */
	atomic_uint flush_readers;
	atomic_bool can_punch;		/* every disk of it can punch holes */
	/* Served partially (exports.activation_mode "partial"): how many of
	 * its blocks are on disks the data path does not have; requests
	 * touching those fail with EIO.  Set before it is served, and fixed:
	 * a partition with missing blocks neither grows nor moves. */
	uint64_t missing;
	struct resv *resv;
	struct pbx_client main;		/* the export as a client; main.next: its classes */
	struct pbx *next;
};

/* A request that changes which blocks are holes (pool-alloc.c). */
struct alloc_job {
	struct alloc_job *next;
	struct pbx *x;
	struct nbdsrv_io *nio;
	atomic_int err;			/* its outcome: 0 or the first -errno */
};

struct pb {
	struct cw_pool *pool;
	struct cw_admit_state *adm;
	/* Disks (by id) taken for gone, or missing at start, whose takeover
	 * by a spare waits for the control thread (degrade.c). */
	_Atomic uint64_t takeover[(CW_DISKS_MAX + 64) / 64];
	/* The host's stalls (stall-probe.h), NULL without: the misses'
	 * lines say where the host held every thread off a CPU. */
	struct stall_probe *probe;
	struct cw_slots_domain *domain;
	atomic_uint live_ctx;		/* threads holding a booking descriptor */
	const struct cwd_config *cfg;
	uint32_t block_size;
	/* PB_DISKS_CAP slots; the first ndisks are used.  ndisks and a slot's
	 * set-up change only at start and on the control thread (under the
	 * glue's lock); the I/O threads find a disk's slot through slot_of,
	 * published once the slot is ready, and never read ndisks. */
	struct disk *disks;
	size_t ndisks;
	atomic_int slot_of[CW_DISKS_MAX + 1];	/* by disk id: its open slot, or -1 */
	bool started;			/* pb_start ran: a disk added now starts at once */
	struct pbx *exports;
	pthread_mutex_t resv_lock;	/* resvs and exports' bindings, for stats */
	struct resv **resvs;		/* NULL where one was released */
	size_t nresvs;
	void *zeros;
	int64_t start_ns;
	_Atomic(struct preq *) spare;	/* small requests to reuse */
	atomic_uint_fast64_t next_client;	/* best-effort client ids */
	atomic_uint_fast64_t be_gen;	/* QoS generations */
	/* The keeper of holes (pool-alloc.c): its queue, pushed by the
	 * connections' threads, taken whole by its thread. */
	_Atomic(struct alloc_job *) alloc_q;
	struct park alloc_park;
	atomic_bool alloc_busy;		/* inside a batch (pb_alloc_quiesce) */
	atomic_uint_fast64_t alloc_batches;	/* batches ended */
	atomic_bool alloc_stop;
	atomic_int alloc_inflight;	/* its own requests in the lanes */
	pthread_t alloc_thread;
	bool alloc_started;
	void *alloc_batch;		/* its work space */
	atomic_uint conditions;		/* PB_COND_*: what the guarantee lacks */
	/* The mover (pool-mover.c): it copies as the best-effort client of
	 * its own pseudo-export, never in the exports list. */
	struct pbx *mover_x;
	pthread_mutex_t mover_lock;
	pthread_cond_t mover_cond;
	bool mover_kicked, mover_started;
	atomic_bool mover_stop;
	pthread_t mover_thread;
	pthread_mutex_t xdisks_lock;	/* appends to the exports' disk lists */
	/* Links and unlinks of exports (control thread) against the mover's
	 * walks of the list: an export is freed once unlinked. */
	pthread_mutex_t exports_lock;
	/* The host's watch (pool-host.c): what released reservations were
	 * served (under resv_lock), and the control thread's last look. */
	uint64_t host_requests_gone, host_bytes_gone;
	struct cw_host_watch host_watch;
	uint64_t host_req, host_bytes, host_cpu;
	bool host_seen;
	/* The host's model the connections' CPU budgets charge by
	 * (pb_host_budget), as the control thread last set it. */
	_Atomic int64_t host_pub_request_ns;
	atomic_uint_fast64_t host_pub_byte_ps;
	atomic_uint host_pub_cpus, host_pub_share_ppm;
};

struct piece {
	struct piece *next;
	struct preq *req;
	struct lane *lane;
	bool rt;
	bool first_on_disk;		/* RT: this piece starts the stream's job on its disk */
	bool be_busy;			/* BE: counted in its export's busy time (lane_be_enter) */
	struct resv *resv;
	/* In its lane's step (it.next: its FIFO); sr is it.sr, the name
	 * its charges and the policy's verdict are read by. */
	union {
		struct cw_path_item it;
		struct cw_sched_req sr;
	};
	struct cw_io_req io;
	int64_t booked_ns;		/* RT: in its lane's record (lane_push) */
	/* RT: its wait for room in the lane's record (a full window:
	 * lane_push) */
	int64_t push_wait_ns;
	int64_t taken_ns;		/* RT: taken from the record by the dispatcher */
	int64_t start_ns;
	int64_t rd_start;		/* the dispatcher's run delay at its start */
	int64_t done_ns;		/* RT: when its lane saw it done */
	/* Nothing else was in flight on the lane when it started, and it
	 * was the lane's start_seq-th start: served alone if no other
	 * started before it completed. */
	bool alone;
	uint64_t start_seq;
	/* On a partition with copies: the copy of the blocks at partition
	 * offset part_off it reads or writes, + 1 (cw_path_piece.mirror; 0:
	 * none), and, for a read, that it failed and is to be read again
	 * from another copy (lane.c, mirror_failed). */
	uint8_t mirror;
	bool retry;
	uint64_t part_off;
	/* A mirrored write booked as one thick request (RADIR section
	 * III-B: the same slots on every copy's record): its first piece
	 * (the IO piece) leads, thick_next chains the others, each of which
	 * names the lead; the lead is the booking's cookie on every record. */
	struct piece *thick_next;
	struct piece *thick_lead;
	int64_t slot;			/* where its lane's record handed it out */
};

struct preq {
	struct nbdsrv_io *nio;		/* a client's request, or NULL: */
	void (*done)(void *arg, int err);	/* the daemon's own, ends here */
	void *done_arg;
	struct pbx *x;
	struct pbx_client *cl;		/* whose best effort it is */
	int64_t arrival_ns;		/* on the connection (nbdsrv_io.arrived_ns) */
	/* From then until the daemon read it: its reader's park
	 * (nbdsrv_io.parked_ns), and its reader's wait for a CPU up to the
	 * booking of its first real-time piece (lane_push; -1 until then) */
	int64_t parked_ns, reader_cpu_ns;
	bool parked_memory;
	atomic_uint pending;
	atomic_int err;
	struct cw_part *gate;		/* in its I/O gate (clockwise/mover.h), or NULL */
	unsigned gate_ticket;
	bool fua;			/* a flush phase follows the writes */
	/* A mirrored partition's request: a copy failed and was marked out
	 * of sync (PREQ_DEGRADED: its end checks each block still has a
	 * copy; PREQ_REREAD: failed reads go to another copy; degrade.c),
	 * and the write-intent regions [intent_off, + intent_len) it holds
	 * (0: none). */
	atomic_uint mirror_state;
	uint64_t intent_off, intent_len;
	bool small;			/* room for PREQ_SMALL_PIECES: reused, not freed */
	struct preq *next_spare;
	unsigned npieces, nflush;
	struct piece p[];		/* npieces, then nflush */
};

/* degrade.c: a mirrored partition's copies failing */
#define PREQ_DEGRADED 1u
#define PREQ_REREAD 2u
/* Piece p of a request failed with err on lane l: a copy of a mirrored
 * partition (a read, a write, or an fdatasync of its disk) is marked out
 * of sync, durably, and 0 returned (the request goes on with the other
 * copies); otherwise err.  The dispatcher's thread, before the piece
 * counts as done. */
int pb_mirror_failed(struct lane *l, struct piece *p, int err);
/* Every piece of q is done and q has PREQ_ flags: its failed reads are
 * booked again on another copy in sync (true: q goes on), or else each
 * block q wrote is checked to have a copy in sync still (-EIO if not). */
bool pb_mirror_end(struct preq *q);
/* At start: the copies on the pool's disks that are not open are marked
 * out of sync, so their partitions are served from the others. */
void pb_mirror_missing(struct pb *pb);

/* preq.c: a request's memory and its end */
void pb_thread_ctx_init_once(void);	/* the per-thread booking descriptors */
/* The calling thread's booking descriptor in pb's slot domain, made on
 * first use; NULL out of memory. */
struct cw_slots_ctx *pb_thread_ctx(struct pb *pb);
/* A request with room for npieces pieces (a small one reused); its fields
 * are the caller's to set.  NULL: ENOMEM. */
struct preq *preq_new(struct pb *pb, size_t npieces);
void preq_free(struct preq *q);
/* Ends a request whose pieces are all done (the lanes', or its
 * submitter's when it has none): leaves its I/O gate, completes it (its
 * done, or its NBD request with its reply's deadline) and frees it. */
void preq_finish(struct preq *q);

/* lane.c */
/* Books pieces [from, from + n) of q on their lanes (q->pending = n). */
void lane_push_pieces(struct preq *q, unsigned from, unsigned n);
void lane_plug(void);			/* this thread's wake-ups wait for lane_unplug() */
void lane_unplug(void);
void *lane_main(void *arg);
void lane_stop(struct lane *l);
void lane_piece_done(struct lane *l, struct piece *p, int err, int64_t now);
/* Hands a plan (malloc'ed; the lane frees it) to a lane's dispatcher,
 * which applies it once nothing started outside the policy is in flight. */
void lane_post_plan(struct lane *l, struct lane_plan *pl);

/* lane-miss.c: misses explained (dispatcher of a lane with streams) */
int lane_miss_new(struct lane *l);
void lane_miss_free(struct lane *l);
void lane_miss_sample(struct lane *l, int64_t now);	/* each round */
void lane_miss_reaped(struct lane *l, int64_t now);	/* after a reap, before lane_miss_done */
void lane_miss_started(struct lane *l, struct piece *p);
/* The dispatcher slept from..to (a futex or its engine); until: the
 * policy's wake-up time it slept for, -1 none. */
void lane_miss_slept(struct lane *l, int64_t from, int64_t to, int64_t until);
/* A round of the dispatcher: before the dispatch lock, with it, after it. */
void lane_miss_round(struct lane *l, int64_t from, int64_t locked, int64_t to);
void lane_miss_done(struct lane *l, struct piece *p, int64_t now);
/* a reader, about to wake the dispatcher for an RT request it booked at
 * booked_ns: kept when the wake-up comes late, with the reader's CPU wait
 * since the booking (its run delay from rd_fd, rd_booked at the booking;
 * rd_fd -1: not known) */
void lane_miss_woke(struct lane *l, int64_t booked_ns, int rd_fd, int64_t rd_booked);
/* any thread: the reply of an RT request whose data was ready at ready_ns
 * began to be sent at began_ns and left at sent_ns, after its deadline;
 * its sender waited cpu_wait_ns for a CPU since it last slept (-1: not
 * known) */
void lane_miss_reply_late(struct lane *l, struct resv *rv, int64_t deadline_ns, int64_t ready_ns,
			  int64_t began_ns, int64_t sent_ns, int64_t cpu_wait_ns);
void lane_miss_drain(struct lane *l);	/* logs the misses; not the dispatcher */

/* lane-beq.c: the best-effort order of a lane */
/* The lane's step at start (its queue depth; without streams the disk's
 * best-effort order, none for FIFO): 0 or -errno. */
int lane_beq_new(struct lane *l);
void lane_beq_free(struct lane *l);
/* A charged BE piece's client for the order, and the client's QoS on
 * this lane's disk if new.  Dispatcher only. */
void lane_be_fill(struct lane *l, struct piece *p);
/* Everything queued, in its order, to the lane's FIFO (the lane gets its
 * scheduling core, or ends), and the order freed. */
void lane_beq_drain(struct lane *l);
/* The counters of a finished BE piece, for its export. */
void lane_be_done(struct lane *l, struct piece *p);
/* A BE piece arrived on the lane / left it (done or failed): the
 * export's busy time on the disk. */
void lane_be_enter(struct lane *l, struct piece *p, int64_t now);
void lane_be_leave(struct lane *l, struct piece *p, int64_t now);

/* submit.c: requests split into pieces and booked in the lanes */
/* Maps and books a READ (holes read as zeros, without I/O), WRITE or
 * (zero: from the shared zero buffer) WRITE_ZEROES written as zeros. */
int pb_submit_rw(struct pbx *x, struct nbdsrv_io *nio, enum cw_io_op op, bool zero);
/* A client's FLUSH: an fdatasync of every disk in x's list. */
int pb_submit_flush(struct pbx *x, struct nbdsrv_io *nio);
/* The daemon's own I/O on x's bytes [off, off + len): best effort,
 * charged to x's client, never a stream's, through the lanes like any
 * request (so in the slack on disks with streams).  op READ or WRITE
 * from/into buf (a READ of holes gives zeros without I/O), WRITE with
 * PB_SUB_ZERO writes zeros, PUNCH gives the space back where a disk can
 * (with PB_SUB_ZERO, zeros are written where it cannot; without, such
 * disks are skipped); PB_SUB_FUA: the disks are synced before done.
 * done(arg, 0 or -errno) is called once, from any thread, perhaps before
 * the call returns; a negative return means it will not be. */
int pb_submit_internal(struct pbx *x, uint64_t off, uint64_t len, enum cw_io_op op, void *buf,
		       unsigned flags, void (*done)(void *arg, int err), void *arg);
/* An fdatasync of each disk slot marked in touched[PB_DISKS_CAP], best
 * effort through the lanes, charged to x's client. */
int pb_flush_internal(struct pbx *x, const bool *touched, void (*done)(void *arg, int err),
		      void *arg);
/* The daemon's own I/O on one disk by physical offset (the mover's
 * copies): op READ, WRITE or FSYNC, best effort, charged to x's client;
 * done as for pb_submit_internal. */
int pb_submit_disk(struct pbx *x, uint32_t disk_id, enum cw_io_op op, uint64_t off, uint64_t len,
		   void *buf, void (*done)(void *arg, int err), void *arg);

/* pool-disk.c: the disks, their lanes and dispatchers */
/* Opens disk d of the pool (info) into its slot: its model, its lanes and
 * slot records; a disk that cannot be served is left with fd -1 (logged)
 * and 0 returned.  -errno when the data path cannot be set up. */
int pb_disk_open(struct pb *pb, struct disk *d, const struct cw_disk_info *info);
/* Makes an opened disk's slot visible to the I/O threads. */
void pb_disk_publish(struct pb *pb, size_t di);
/* Starts the dispatchers of disk d (an engine and a thread per lane, the
 * scheduling core of a disk with streams). */
int pb_disk_start(struct pb *pb, struct disk *d);
void pb_disk_stop(struct disk *d);	/* each dispatcher drains what it was given first */
void pb_disk_close(struct disk *d);	/* frees what a stopped disk holds, closes it */
/* Makes m the disk's model (a copy) from now on; -ENOMEM. */
int pb_disk_set_model(struct disk *d, const struct cw_model *m);
/* A plan for disk d's first lane: the disk's plan and its streams (takes
 * resv_lock); NULL: ENOMEM. */
struct lane_plan *lane_plan_new(struct pb *pb, const struct disk *d,
				const struct cw_disk_plan *plan);

/* pool-export.c: the exports and their best-effort clients */
/* Makes the export of part, listed in pb->exports, with its disks, its
 * clients and their QoS: its size in ret_size (whole blocks of its
 * alignment), whether a disk of it is an HDD in ret_rotational.  -ENODEV
 * when a disk of it is missing (logged), -EINVAL when its disks need
 * more than 64 KiB alignment. */
int pb_export_new(struct pb *pb, struct cw_part *part, uint64_t *ret_size, bool *ret_rotational,
		  struct pbx **ret_x);
/* The admission state's best-effort QoS be set (set) or cleared reaches
 * the client of its name in every export.  Control thread. */
void pb_export_be_event(struct pb *pb, const struct cw_admit_be *be, bool set);
/* The client a request of x on the connection of nio belongs to: the
 * class it named if that has a QoS of its own, else the export (the
 * answer is kept in the connection's word).  Lock-free. */
struct pbx_client *pb_client_of(struct pbx *x, struct nbdsrv_io *nio);
/* Makes c the client of x named x's name (cls NULL) or "NAME@CLS", with a
 * new client id: an export's own, a class of it, or the mover's. */
void pb_client_init(struct pb *pb, struct pbx *x, struct pbx_client *c, const char *cls);

/* pool-xdisks.c: adds disk slot di to x's disk list (FLUSH syncs it). */
void pb_export_take_disk(struct pb *pb, struct pbx *x, uint32_t di);
/* the same for every export of part, disk given by id (takes exports_lock) */
void pb_part_take_disk(struct pb *pb, const struct cw_part *part, uint32_t disk_id);
/* The disks besides its block map's that x's partition may
 * have unsynced data on join x's list, so that a FLUSH syncs them: its
 * cache's, and where its unfinished moves copy to.  An export made while
 * a move runs (the mover takes the caches' disks only when idle), or at
 * a start that resumes one, needs them from its first request on. */
void pb_export_take_pending(struct pb *pb, struct pbx *x);
/* Takes disk slot di out of x's disk list, once no block of x's
 * partition is there (moved away) and nothing is being copied there;
 * returns once no FLUSH can still reach it.  Control thread. */
void pb_export_drop_disk(struct pb *pb, struct pbx *x, uint32_t di);

/* pool-rbd.c: an image d just opened for writing gets its exclusive lock
 * back from this pool's previous daemon if it died holding it. */
void pb_rbd_take_lock(struct pb *pb, const struct disk *d);

/* pool-ownio.c: one I/O of the mover's or a cache's, waited for. */
int pb_mover_io(struct pb *pb, uint32_t disk_id, enum cw_io_op op, uint64_t off, uint64_t len,
		void *buf);
/* pool-cache.c: the caches' steps, on the mover's thread when no move
 * runs; whether there was any. */
bool pb_cache_work(struct pb *pb, void *buf);
/* pool-mover.c: the thread that carries out the pool's moves. */
int pb_mover_start(struct pb *pb);
void pb_mover_stop(struct pb *pb);

/* pool-alloc.c: blocks become written or holes */
/* Whether every block [off, off + len) touches holds data already. */
bool pb_range_written(struct pbx *x, uint64_t off, uint64_t len);
/* Hands a WRITE to a hole, a TRIM or a WRITE_ZEROES to the keeper of
 * holes, which completes it.  -ENOMEM. */
int pb_alloc_queue(struct pbx *x, struct nbdsrv_io *nio);
/* Whether cw_io_punch works on the disk's open descriptor (its io_kind
 * known). */
bool pb_disk_can_punch(const struct disk *d);
/* The disk is a file cut shorter than its blocks need (one fstat, at now):
 * logged the first time; its requests fail with EIO from then on (struct
 * disk). */
bool pb_disk_shrunk(struct disk *d, int64_t now);
int pb_alloc_start(struct pb *pb);
void pb_alloc_stop(struct pb *pb);	/* once no request is in flight */
/* Returns once the keeper is past every batch begun before the call:
 * after a disk is unlisted, it holds nothing of the disk's lanes (a
 * write it booked can complete, and its export go, before the keeper
 * wakes the lane).  Control thread. */
void pb_alloc_quiesce(struct pb *pb);

/* The slot of an open disk by id; -ENODEV if it has none.  Lock-free. */
static inline int pb_disk_index(struct pb *pb, uint32_t id)
{
	int di;

	if (id > CW_DISKS_MAX)
		return -ENODEV;
	di = atomic_load_explicit(&pb->slot_of[id], memory_order_acquire);
	return di >= 0 ? di : -ENODEV;
}

static inline const struct cw_model *disk_model(const struct disk *d)
{
	return &atomic_load_explicit(&d->model, memory_order_acquire)->m;
}

/* pool-host.c: a released reservation's counters stay in the host's
 * count (under resv_lock). */
void pb_host_resv_gone(struct pb *pb, const struct resv *rv);
/* The admission state's host model to the connections' budgets. */
void pb_host_publish(struct pb *pb);
/* A connection's CPU budget, ps a second (clockwise/admit.h): the
 * stream's demand for the one that holds reservation rv, the best-effort
 * capacity for the others (rv NULL); UINT64_MAX: no bound. */
uint64_t pb_host_budget(struct pb *pb, const struct resv *rv, struct cw_host_model *ret_model);

#endif
