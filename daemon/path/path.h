/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * path.h — clockwised's data path as the rest of the daemon sees it:
 * the NBD back end that serves a pool's partitions (pool-backend.c and
 * the files around it, which share pool-internal.h).
 *
 * A request is mapped through its partition's block map (cw_part_map),
 * split into one piece per contiguous run on a disk, and each piece is
 * booked, by the connection's own thread, in the slot reservation record
 * (RADIR, clockwise/slots.h) of that disk's lane: lock-free, no mutex per
 * I/O.  One dispatcher thread
 * per disk, or per lane of an SSD, owns an I/O engine and the disk's
 * cw_sched; it takes the bookings, classifies them (RT when the export is
 * bound to a reservation and the request lies in its range and time span,
 * BE otherwise), lets the policy choose what runs, submits, reaps, and
 * completes the NBD request when its last piece is done.
 */
#ifndef CWD_PATH_H
#define CWD_PATH_H

#include <stdint.h>

#include <clockwise/admit-state.h>
#include <clockwise/layout.h>

#include "daemon/conf.h"
#include "daemon/nbd/nbd-server.h"

struct pb;

/* Opens every present disk of the pool with O_DIRECT and prepares its
 * lanes as cfg says (a disk absent from cfg gets the global policy).
 * Messages go to the daemon log. */
int pb_new(struct cw_pool *pool, struct cw_admit_state *adm, const struct cwd_config *cfg,
	   struct pb **ret_pb);

/* The admission state's listener (clockwise/admit-state.h): a new plan
 * goes to the disk's dispatcher, a reservation joins or leaves the data
 * path.  userdata is the struct pb. */
void pb_admit_event(void *userdata, const struct cw_admit_event *ev);

/* Prepares the export of a partition: fills ret_exp (size, block sizes,
 * ops, back end); name and description point into pb.  -ENODEV when a
 * disk of the partition is missing (the reason is logged). */
int pb_export(struct pb *pb, struct cw_part *part, struct nbdsrv_export *ret_exp);

/* Starts the dispatchers. */
int pb_start(struct pb *pb);

/* A disk the pool took while the daemon runs (cw_disk_add): opens it with
 * O_DIRECT, checks that the file opened is the one the pool labelled,
 * sets up its lanes and slot records and, once pb_start() ran, starts its
 * dispatchers; its partitions can then be exported at once.  Call from
 * one thread at a time (the control thread).  -errno with the reason in
 * err, and nothing changed. */
int pb_disk_add(struct pb *pb, uint32_t disk_id, char *err, size_t errlen);

/* Stops the dispatchers of an open disk and closes it, before the pool
 * lets it go.  The caller made sure no partition has a block on it;
 * -EBUSY (reason in err) while an export still lists it, -ENOENT if the
 * data path does not have it open (nothing to do). */
int pb_disk_remove(struct pb *pb, uint32_t disk_id, char *err, size_t errlen);

/* The export's partition grew: takes in the disks its new blocks are on
 * and returns the size new connections get.  -EINVAL (reason in err) when
 * a new disk needs a larger alignment than the export's clients were
 * told.  Control thread only. */
struct pbx;
int pb_export_grow(struct pb *pb, struct pbx *x, uint64_t *ret_size, char *err,
		   size_t errlen);

/* Frees an export no request is in flight for (the NBD server dropped
 * it), with its classes.  NULL-safe. */
void pb_export_free(struct pbx *x);

/* Binds export x to the reservation with id resv_id, or (0) to the
 * start-up reservation given for its name; -ENOENT if there is none. */
int pb_export_bind(struct pb *pb, struct pbx *x, uint64_t resv_id);

/* Stops the dispatchers once no request is in flight (stop the NBD server
 * first), and frees everything.  NULL-safe. */
void pb_free(struct pb *pb);
/* Wakes the mover: a move was started or resumed (pool-mover.c). */
void pb_mover_kick(struct pb *pb);

/* Logs the per-disk and per-reservation counters (daemon/path/stats.c). */
void pb_log_stats(struct pb *pb);
/* The data path's periodic work on the control thread: logs the misses
 * the dispatchers explained, and raises the margin of a disk whose
 * requests keep overrunning their model (re-admitting its streams). */
void pb_misses_tick(struct pb *pb);
/* On the same thread: each disk taken for gone (or missing at start)
 * since the last call is replaced by a spare that carries the streams
 * booked on it (cw_admit_state_takeover), or left degraded with the
 * reason logged and kept (cw_disk_set_unreplaced) (degrade.c). */
void pb_takeover_tick(struct pb *pb);
/* The host's watch, on the same thread once a second: conn_cpu_ns is
 * what the real-time connections' threads used so far
 * (nbdsrv_rt_cpu_ns); raises the host model when the streams' path keeps
 * costing more than it says (pool-host.c). */
void pb_host_tick(struct pb *pb, uint64_t conn_cpu_ns);

/* What the guarantee rests on and the system refused: the guarantee is
 * then conditional (a busy CPU, paging can make a stream late). */
#define PB_COND_RT 1u		/* a real-time thread at normal priority */
#define PB_COND_MLOCK 2u	/* memory not locked */
#define PB_COND_CPUS 4u		/* rt_cpus not applied */
/* The calling thread to the real-time CPUs (rt_cpus), if set. */
void pb_thread_cpus(struct pb *pb);
/* The calling thread to rt_priority and rt_cpus: 0 or -errno (noted in
 * the conditions). */
int pb_thread_realtime(struct pb *pb, unsigned boost);
/* Marks a condition the daemon found itself (PB_COND_MLOCK). */
void pb_guarantee_lacks(struct pb *pb, unsigned cond);
/* The conditions in words ("" when the guarantee is unconditional). */
void pb_guarantee(struct pb *pb, char *buf, size_t len);

#endif
