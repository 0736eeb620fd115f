/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwise/pool-objects.h — what the control plane keeps beside the
 * layout in the pool database: admitted reservations and exports, so that
 * a restarted daemon serves exactly what it served before.
 *
 * Each call is one transaction; errors are -errno with the reason in
 * cw_pool_last_error(), as in clockwise/layout.h.
 *
 * Rules the database keeps (not only this library):
 *   - a partition with a reservation or an export is not deleted:
 *     cw_part_delete() refuses with -EBUSY (the control plane asks the
 *     user to release and remove them first; nothing cascades silently);
 *   - a reservation an export is bound to is not removed: -EBUSY;
 *   - an export bound to a reservation must be on the reservation's
 *     partition: -EINVAL;
 *   - reservation ids grow and are never reused, also across restarts.
 *
 * The admitted per-disk parts are stored with the reservation, so a
 * restart rebuilds the disks' admitted task sets exactly as they were
 * admitted, without planning again (a model calibrated since then applies
 * to new reservations only, as it did before the restart).
 */
#ifndef CLOCKWISE_POOL_OBJECTS_H
#define CLOCKWISE_POOL_OBJECTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <clockwise/layout.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One disk's share of a reservation: the task admission booked there.
 * Times are wall-clock (CLOCK_REALTIME) nanoseconds, since a monotonic
 * clock does not survive a reboot; from_ns == to_ns == 0: always. */
struct cw_resv_disk {
	uint32_t disk_id;
	int64_t period_ns;
	int64_t service_ns;
	int64_t from_ns;
	int64_t to_ns;
	uint64_t requests;		/* user requests touching the disk */
	uint64_t stride;		/* smallest stride, in user requests */
	bool copy;			/* booked for a cache's copies (schema 11) */
};

struct cw_resv_rec {
	uint64_t id;			/* set by cw_resv_add */
	uint64_t part_id;
	uint64_t rate_bps;		/* B > 0 */
	uint64_t block_bytes;		/* b > 0 */
	uint64_t range_start_bytes;	/* [start, end) of the partition */
	uint64_t range_end_bytes;
	int64_t start_ns, end_ns;	/* CLOCK_REALTIME; 0, 0: always; end 0: open */
	int64_t period_ns;		/* b/B */
	unsigned due;			/* enum cw_admit_due: 0 a disk period, 1 b/B */
	size_t n_disks;
	struct cw_resv_disk *disks;	/* owned by the caller, or by the list */
	/* The unfinished move whose both sides the parts cover (rule 2 of
	 * moving data, clockwise/admit-state.h); 0: none. */
	uint64_t move_id;
	/* Admitted to survive the loss of any one disk; a recording stream,
	 * charged on every copy (schema 15). */
	bool survive;
	bool record;
};

/* Stores an admitted reservation on partition r->part_id with its parts
 * and returns its new id.  -ENOENT: no such partition (or a part's disk is
 * not in the pool); -EINVAL: zero rate or block, an empty range or one past
 * the partition's end, a part without period or service time. */
int cw_resv_add(struct cw_pool *pool, const struct cw_resv_rec *r, uint64_t *ret_id);
/* Replaces the parts of reservation id and its move (0: none) in one
 * transaction: a move re-books a stream on the disks its blocks go to.
 * -ENOENT: no such reservation (or a part's disk is not in the pool);
 * -EINVAL: a bad part, as for cw_resv_add. */
int cw_resv_rebook(struct cw_pool *pool, uint64_t id, uint64_t move_id,
		   const struct cw_resv_disk *disks, size_t n);
/* -ENOENT: no such reservation; -EBUSY: an export is bound to it. */
int cw_resv_remove(struct cw_pool *pool, uint64_t id);
/* Every reservation in id order, each with its parts; free with
 * cw_resv_list_free(). */
int cw_resv_list(struct cw_pool *pool, struct cw_resv_rec **ret, size_t *ret_n);
void cw_resv_list_free(struct cw_resv_rec *list, size_t n);	/* NULL-safe */

struct cw_export_rec {
	char name[CW_NAME_MAX + 1];	/* unique, cw_name_valid() */
	uint64_t part_id;
	bool readonly;
	uint64_t resv_id;		/* 0: none */
	/* Served as a ublk block device, not over NBD: its queue depth and
	 * largest request in bytes (0: the server's defaults) and the
	 * kernel's number of the device (-1: none yet). */
	bool ublk;
	uint32_t ublk_depth, ublk_max_request;
	int32_t ublk_dev;
};

/* -EEXIST: the name is taken; -EINVAL: a bad name, or the reservation is
 * on another partition; -ENOENT: no such partition or reservation. */
int cw_export_add(struct cw_pool *pool, const struct cw_export_rec *e);
/* -ENOENT: no such export. */
int cw_export_remove(struct cw_pool *pool, const char *name);
/* Every export in name order, malloc'ed; the caller frees it. */
int cw_export_list(struct cw_pool *pool, struct cw_export_rec **ret, size_t *ret_n);
/* Records the device number of a ublk export (-1: none).  -ENOENT: no
 * such ublk export. */
int cw_export_set_ublk_dev(struct cw_pool *pool, const char *name, int32_t dev);

/* An export's best-effort quality of service between exports (RBFQ,
 * clockwise/sched-beq.h): a reservation (the least it gets while it asks),
 * a weight (its share of the rest against other exports) and a limit (the
 * most it gets).  A rate is bytes per second, or requests per second where
 * its _iops flag is set.  Admission checks reservations against each
 * disk's best-effort capacity (clockwise/admit-state.h). */
struct cw_be_qos {
	uint64_t reserve;		/* 0: none */
	bool reserve_iops;
	uint32_t weight;		/* 1 .. CW_BE_WEIGHT_MAX */
	uint64_t limit;			/* 0: none */
	bool limit_iops;
};

#define CW_BE_WEIGHT_MAX 10000

struct cw_be_qos_rec {
	char export_name[CW_CLIENT_NAME_MAX + 1];	/* or EXPORT@CLASS */
	uint64_t part_id;		/* the partition the export serves */
	struct cw_be_qos qos;
};

/* Stores (or replaces) an export's QoS.  Like a reservation it holds its
 * partition: cw_part_delete() refuses while it is stored.  -EINVAL: a bad
 * name or weight; -ENOENT: no such partition. */
int cw_be_qos_put(struct cw_pool *pool, const struct cw_be_qos_rec *q);
/* -ENOENT: none stored for that export. */
int cw_be_qos_remove(struct cw_pool *pool, const char *export_name);
/* Every stored QoS in export-name order, malloc'ed; the caller frees it. */
int cw_be_qos_list(struct cw_pool *pool, struct cw_be_qos_rec **ret, size_t *ret_n);

/* Reads the stored model of the disk named disk_name from the pool
 * database at db_path, opened read-only and without the pool's lock, so a
 * tool (cwsim) can use it while the daemon runs.  -ENOENT: no such
 * database, disk, or no model stored for it; -EUCLEAN: not a pool
 * database, or a damaged model.  ret_calibrated and ret_err may be NULL. */
struct cw_model;
int cw_pool_read_disk_model(const char *db_path, const char *disk_name, struct cw_model *ret_model,
			    bool *ret_calibrated, struct cw_error *ret_err);

#ifdef __cplusplus
}
#endif
#endif
