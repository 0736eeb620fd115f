/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ublk.h — clockwised's second front door: an export served as a local
 * block device, /dev/ublkbN, through the kernel's userspace block driver
 * (ublk_drv, Linux 5.19 on; Documentation/block/ublk.rst).
 *
 * The device is made on /dev/ublk-control with io_uring commands
 * (ADD_DEV, SET_PARAMS, START_DEV; STOP_DEV and DEL_DEV when the export
 * goes).  Each ublk queue has a thread and an io_uring of its own on the
 * device's /dev/ublkcN, driven with FETCH_REQ and COMMIT_AND_FETCH_REQ;
 * each tag has a buffer of the largest request, mapped once with the
 * queue, never per request (the kernel copies a write's data into it
 * before the request arrives and a read's out of it when it is
 * committed).  A request is handed to the export's back end exactly as
 * the NBD server hands its own (struct nbdsrv_backend_ops: the same
 * split, lanes, classes, stats and misses), and comes back through
 * nbdsrv_io_complete(), which calls the io's complete hook.
 */
#ifndef CW_DAEMON_UBLK_H
#define CW_DAEMON_UBLK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/nbd/nbd-server.h"

/* The most queues a device may have (the kernel's UBLK_MAX_NR_QUEUES is
 * larger), and the most the default takes. */
#define UBLK_DEV_QUEUES_MAX 64
#define UBLK_DEV_QUEUES_DEFAULT_MAX 4

struct ublk_config {
	unsigned queue_depth;		/* tags per queue; 0: 64 */
	/* Hardware queues, each served by its own thread and io_uring,
	 * pinned to the CPUs the kernel maps to it; 0: one per CPU online,
	 * at most UBLK_DEV_QUEUES_DEFAULT_MAX. */
	unsigned queues;
	uint32_t max_request;		/* largest request in bytes; 0: 512 KiB */
	/* The device node's owner, group and mode (from the export's
	 * access rules); mode 0: leave the kernel's (root, 0600). */
	uid_t owner;
	gid_t group;
	mode_t mode;
	/* The device this export had (-1: none): if a server that is gone
	 * left it waiting for recovery, it is taken back (queued requests
	 * resume); else a new one is made. */
	int recover_id;
};

struct ublk_dev;

/* The device node's owner, group and mode into c from the access rules
 * list[n] (nbd-server.h) for export name: the first user named is its
 * owner, the first group its group, anyone ("*") the others; read-write
 * gives rw, read-only r.  Without rules for it: mode 0 (the kernel's
 * root 0600).  Returns how many users and groups the rules name that a
 * node's one owner and one group cannot hold (they get no access). */
unsigned ublk_node_access(const struct nbdsrv_access *list, size_t n, const char *name,
			  struct ublk_config *c);

/* Whether this kernel can serve ublk devices now: 0, or -errno with the
 * reason in err (-EOPNOTSUPP: no ublk_drv; -EACCES, -EPERM: not root). */
int ublk_available(char *err, size_t errlen);

/* Makes /dev/ublkbN for exp (its ops and back end are used until
 * ublk_dev_free) and starts serving it, or takes cfg->recover_id back.
 * Devices are made with user recovery (UBLK_F_USER_RECOVERY and
 * _REISSUE): when the daemon dies they stay, holding their requests,
 * until a daemon takes them back, which the kernel then hands every
 * request not yet acknowledged again.  -errno with the reason in err. */
int ublk_dev_new(const struct nbdsrv_export *exp, const struct ublk_config *cfg,
		 struct ublk_dev **ret_dev, char *err, size_t errlen);

/* N of /dev/ublkbN. */
int ublk_dev_id(const struct ublk_dev *dev);
/* Whether something holds /dev/ublkbN open exclusively (a mounted file
 * system, a device-mapper table): removing it would pull the device from
 * under its user. */
bool ublk_dev_busy(const struct ublk_dev *dev);
/* Its hardware queues (after a recovery: the ones it was made with). */
unsigned ublk_dev_queues(const struct ublk_dev *dev);
/* Whether it was made without root (UBLK_F_UNPRIVILEGED_DEV, Linux 6.2
 * on): only the daemon's user may open it, and its node's owner and mode
 * are udev's, not the access rules'. */
bool ublk_dev_unprivileged(const struct ublk_dev *dev);
/* Whether it was taken back from a server that had gone. */
bool ublk_dev_recovered(const struct ublk_dev *dev);

/* Stops the device (requests in flight complete first), deletes it and
 * frees; NULL-safe. */
void ublk_dev_free(struct ublk_dev *dev);

#endif
