/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * control-internal.h — what the control server's two halves share:
 * control-cmd.c (the command handlers over the pool, admission and the
 * reservations) and control.c (the socket, its clients and the
 * calibration threads).  Private to daemon/.
 */
#ifndef CWD_CONTROL_INTERNAL_H
#define CWD_CONTROL_INTERNAL_H

#include <pthread.h>
#include <sys/epoll.h>

#include "control.h"

struct client;
struct calib_job;

struct model_slot {
	bool set;
	bool calibrated;
	struct cw_model m;
};

struct cwc_server {
	struct cwc_server_opts o;
	char *path;
	struct cw_pool *pool;
	int listen_fd, epoll_fd, wake_fd;
	bool stopping;
	struct client *clients;
	unsigned n_clients;
	struct calib_job *jobs;
	struct epoll_event batch[16];	/* the events being dispatched */
	int batch_n;

	struct model_slot *models;	/* [CW_DISKS_MAX + 1], by disk id */

	pthread_mutex_t lock;	/* guards resvs for cwc_server_resv_list() */
	struct cwc_resv *resvs;
	size_t n_resvs;

	struct cwc_export *exports;
	size_t n_exports;
};

/* One request being handled: the reply's error, if any, is gathered here. */
struct ctx {
	struct cwc_server *srv;
	const struct cwc_request *req;
	cwc_emit_fn emit;
	void *emit_data;
	enum cwc_code code;
	char msg[512];
	json_object *details;
};

/* A calibration: what to measure, and what came of it.  On the socket it
 * runs in a thread of its own (struct calib_job below) so that other
 * clients are served meanwhile; in process it runs in the caller. */
struct calib {
	struct cw_disk_info disk;
	struct cw_calib_opts opts;
	uint64_t quick_sizes[2];
	struct cw_model emulate;	/* what opts.emulate points to, if set */
	struct cw_model model;
	int result;
};

/* ---- control-cmd.c ---- */

/* Parses one line and checks the caller's rights: false after emitting
 * the error reply; true with *req to run (release with cwc_request_done). */
bool ctl_request_admit(struct cwc_server *srv, const char *line, size_t len, bool can_read,
		       bool can_change, cwc_emit_fn emit, void *userdata, struct cwc_request *req);
/* Runs a request and emits its reply. */
void ctl_request_run(struct cwc_server *srv, const struct cwc_request *req, cwc_emit_fn emit,
		     void *userdata);
void ctl_emit_error(cwc_emit_fn emit, void *data, enum cwc_code code, const char *msg,
		    json_object *details);
/* Loads the reservations, exports and disk models stored in the pool and
 * tells the hooks; on failure undoes what it told them and keeps nothing. */
int ctl_state_load(struct cwc_server *srv);
/* Releases the reservations whose time span is over. */
void ctl_expire_resvs(struct cwc_server *srv);
/* A calibration's disk and options from the request (-1: c says why),
 * and, once measured, the model stored and the reply built. */
int ctl_calib_prepare(struct ctx *c, struct calib *k);
int ctl_calib_finish(struct ctx *c, struct calib *k, json_object **ret);

#endif
