/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pool-internal.h — what the data path's files share: the lanes and their
 * dispatchers (lane.c), submission and set-up (pool-backend.c), and
 * reservations (reserve.c).  Never used outside daemon/.
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

#include <clockwise/admit.h>
#include <clockwise/emu.h>
#include <clockwise/io.h>
#include <clockwise/model.h>
#include <clockwise/sched.h>
#include <clockwise/slots.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "daemon/log.h"
#include "daemon/pool-backend.h"
#include "daemon/stats.h"

#define ZERO_CHUNK (UINT32_C(1) << 20)	/* WRITE_ZEROES is written in pieces of this */
#define REAP_BATCH 64
/* While requests are in flight on a lane without streams, the dispatcher
 * waits for completions at most this long before it looks at its record
 * again (an engine wait cannot also watch the record). */
#define POLL_NS (50 * CW_NS_PER_US)
#define PREQ_SMALL_PIECES 4	/* requests this small are reused (lane_preq_get) */
#define ERRORS_LOGGED 8	/* per disk; then one line per 1000 */
#define SLOTS_WINDOW 4096	/* slots a booking may look ahead (the domain's max_window) */
#define BOOKING_SLOTS_MAX 64	/* one piece books at most this many slots */
#define SLOTS_THREADS 1024	/* connection and dispatcher threads booking at once */
#define PB_RESV_MAX 1024	/* reservations at once (static and from the control socket) */
/* Disk slots: room for every disk the pool can hold, made at start, so a
 * disk added while the daemon runs takes a free slot and the array never
 * moves under the threads that read it.  A slot is not reused after its
 * disk was removed; per-disk arrays (struct resv, the glue's tasks) are
 * indexed by slot and have this many entries. */
#define PB_DISKS_CAP CW_DISKS_MAX

struct piece;

/* The slack and BE server of a lane with streams, handed to its dispatcher
 * when streams are admitted or released while it runs (lane_post_plan). */
struct lane_plan {
	int64_t delta_l_ns, idle_be_ns;
	int64_t server_slice_ns, server_period_ns;
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
	_Atomic(struct piece *) overflow;	/* pushed by dispatchers on a full window */
	atomic_int sleeping;
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
	struct cw_sched *sched;		/* RT disks, lane 0 */
	struct piece *fifo, *fifo_tail;	/* lanes without streams */
	unsigned inflight;
	bool busy;			/* a request in service under cw_sched */
	int64_t *expected_ns;		/* per reservation: next expected release */
};

struct disk_model {
	struct cw_model m;
	struct disk_model *older;
};

/* An emulating engine's lateness, summed over the disk's lanes, and the
 * warning a lane logs (at most every EMU_WARN_NS) when cw_io_emu_behind()
 * says the host fell behind (pool-backend.c). */
#define EMU_WARN_NS (10 * CW_NS_PER_S)
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
	struct cw_model *emulate;	/* the model its engine keeps the time of, or NULL */
	atomic_int_fast64_t emu_warned_ns;	/* when the host last fell behind it */
	size_t align;
	/* The model, replaced whole when the disk is calibrated again
	 * (pb_disk_set_model) while connection threads and dispatchers read
	 * it: read it with disk_model(); old ones are freed with the disk. */
	_Atomic(struct disk_model *) model;
	enum cw_sched_policy policy;
	unsigned nlanes;
	struct lane *lanes;
	struct cw_task *tasks;		/* admitted stream parts */
	size_t ntasks;
	atomic_uint_fast64_t nerrors;
	uint32_t be_piece;		/* BE pieces are at most this long (cw_admit_be_piece) */
	int64_t be_max_ns;		/* service of the largest BE piece */
	struct cw_task be_reserve;	/* the BE reserve admission keeps (admit.h) */
	atomic_bool live_streams;	/* streams admitted at runtime: RT goes to lane 0 */
};

struct resv {
	struct pb_reservation r;
	size_t idx;			/* in pb->resvs */
	struct pbx *x;
	uint64_t lo, hi;
	int64_t start_ns, end_ns;	/* CLOCK_MONOTONIC; end 0: none */
	int64_t *period_ns;		/* per disk slot (PB_DISKS_CAP): T (0: not on it) */
	int64_t *service_ns;		/* per disk slot: C */
	struct cwd_stats st;
	uint64_t ctl_id;		/* the control plane's id; 0: static (-r) */
	/* Static ones: the plan admitted (for the control server's
	 * admission, which must count them); NULL otherwise. */
	struct cw_admit_part *parts;
	size_t nparts;
	int64_t stream_period_ns;
};

/* An export: one partition. */
struct pbx {
	struct pb *pb;
	struct cw_part *part;
	char name[CW_NAME_MAX + 1];
	char description[128];
	size_t align;			/* its min_block: the largest alignment of its disks */
	/* Slots of the disks it touches.  Only appended to (a partition that
	 * grows onto another disk, pb_export_grow), each entry before the
	 * count that covers it (release; FLUSH loads it with acquire). */
	uint32_t disks[PB_DISKS_CAP];
	atomic_uint ndisks;
	struct resv *resv;
	struct pbx *next;
};

struct pb {
	struct cw_pool *pool;
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
	struct resv **resvs;
	size_t nresvs;
	void *zeros;
	int64_t start_ns;
	_Atomic(struct preq *) spare;	/* small requests to reuse */
};

struct preq;

struct piece {
	struct piece *next;
	struct preq *req;
	struct lane *lane;
	bool rt;
	bool first_on_disk;		/* RT: this piece moves the stream's expected release */
	struct resv *resv;
	struct cw_sched_req sr;
	struct cw_io_req io;
	int64_t start_ns;
};

struct preq {
	struct nbdsrv_io *nio;
	struct pbx *x;
	int64_t arrival_ns;
	atomic_uint pending;
	atomic_int err;
	bool fua;			/* a flush phase follows the writes */
	bool small;			/* room for PREQ_SMALL_PIECES: reused, not freed */
	struct preq *next_spare;
	unsigned npieces, nflush;
	struct piece p[];		/* npieces, then nflush */
};

/* lane.c */
void lane_init_once(void);		/* the per-thread booking descriptors */
int lane_push(struct pb *pb, struct piece *p);
struct preq *lane_preq_get(struct pb *pb);	/* room for PREQ_SMALL_PIECES; NULL: ENOMEM */
void lane_preq_put(struct pb *pb, struct preq *q);
void lane_plug(void);			/* this thread's wake-ups wait for lane_unplug() */
void lane_unplug(void);
void *lane_main(void *arg);
void lane_stop(struct lane *l);
void lane_piece_done(struct lane *l, struct piece *p, int err, int64_t now);
/* Hands a plan (malloc'ed; the lane frees it) to a lane's dispatcher,
 * which applies it once nothing started outside the policy is in flight. */
void lane_post_plan(struct lane *l, struct lane_plan *pl);

/* pool-backend.c */
void pb_req_finish(struct preq *q);
/* The slot of an open disk by id; -ENODEV if it has none.  Lock-free. */
int pb_disk_index(struct pb *pb, uint32_t id);
int pb_disk_set_model(struct disk *d, const struct cw_model *m);

static inline const struct cw_model *disk_model(const struct disk *d)
{
	return &atomic_load_explicit(&d->model, memory_order_acquire)->m;
}

/* reserve.c */
int pb_disk_sched(struct disk *d);
int pb_disk_plan(const struct disk *d, const struct cw_task *tasks, size_t n,
		 struct lane_plan *ret);
void pb_resv_free(struct resv *rv);

#endif
