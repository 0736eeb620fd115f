/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * service.h — clockwised's control socket (daemon/control/control.h) wired into
 * its data path (path/path.h) and NBD server (nbd-server.h).
 */
#ifndef CWD_SERVICE_H
#define CWD_SERVICE_H

#include <stddef.h>

#include <clockwise/layout.h>

#include "daemon/conf.h"
#include "daemon/nbd/nbd-server.h"
#include "daemon/path/path.h"

struct svc;

/* Binds the control socket of cfg (groups resolved with getgrnam; a
 * missing one leaves its rights to root, logged).  0 or -errno (logged). */
int svc_new(struct cw_pool *pool, struct cw_admit_state *adm, struct pb *pb,
	    struct nbdsrv *nbd, const struct cwd_config *cfg, struct svc **ret_ctl);
/* With all, exports every partition (exports.all) through the control
 * server, so that it lists and stores them; then counts the exports it
 * lists (the set stored in the pool) and of those the ones not served (a
 * disk of their partition is missing). */
int svc_exports(struct svc *svc, bool all, size_t *ret_listed, size_t *ret_unserved);
/* Serves the socket in a thread of its own. */
int svc_start(struct svc *svc);
/* pb_log_stats() under the lock the socket's changes take (svc may be NULL). */
void svc_log_stats(struct svc *svc, struct pb *pb);
/* Stops serving and frees (NULL-safe); before the NBD server and pb go. */
void svc_free(struct svc *svc);

#endif
