/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ctl-glue.h — clockwised's control socket (daemon/control.h) wired into
 * its data path (pool-backend.h) and NBD server (nbd-server.h).
 */
#ifndef CWD_CTL_GLUE_H
#define CWD_CTL_GLUE_H

#include <stddef.h>

#include <clockwise/layout.h>

#include "daemon/conf.h"
#include "daemon/nbd-server.h"
#include "daemon/pool-backend.h"

struct ctl;

/* Binds the control socket of cfg (groups resolved with getgrnam; a
 * missing one leaves its rights to root, logged).  0 or -errno (logged). */
int ctl_new(struct cw_pool *pool, struct cw_admit_state *adm, struct pb *pb,
	    struct nbd_server *nbd, const struct cwd_config *cfg, struct ctl **ret_ctl);
/* Exports every partition whose disks are present, through the control
 * server so that it lists them; *ret_n: how many. */
int ctl_export_all(struct ctl *ctl, size_t *ret_n);
/* Serves the socket in a thread of its own. */
int ctl_start(struct ctl *ctl);
/* pb_log_stats() under the lock the socket's changes take (ctl may be NULL). */
void ctl_log_stats(struct ctl *ctl, struct pb *pb);
/* Stops serving and frees (NULL-safe); before the NBD server and pb go. */
void ctl_free(struct ctl *ctl);

#endif
