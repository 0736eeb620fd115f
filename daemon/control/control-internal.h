/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * control-internal.h — what the control server's files share:
 * control-socket.c (the socket, its clients and the calibration threads),
 * control-cmd.c (a request's way from its line to its reply: parsing,
 * rights, the command table), control-util.c (errors and look-ups every
 * command uses), and one file per command family: control-disk.c,
 * control-part.c, control-resv.c, control-export.c, control-qos.c, control-status.c,
 * control-headroom.c.
 * Private to daemon/control/.
 *
 * The calls point one way: control-socket.c -> control-cmd.c -> the families ->
 * control-util.c; control-status.c asks the other families for their
 * lists.  Admission state (models, reservations, plans) is the admission
 * module's (clockwise/admit-state.h); the server keeps only its exports.
 */
#ifndef CWD_CONTROL_INTERNAL_H
#define CWD_CONTROL_INTERNAL_H

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/un.h>

#include "control.h"

struct client;
struct calib_job;
struct cwc_http;

/* What an epoll event of the server points at (its first member). */
enum cwc_ev_kind {
	CWC_EV_CLIENT = 1,
	CWC_EV_JOB,
	CWC_EV_HTTP,
};

struct cwc_server {
	struct cwc_server_opts o;
	char *path;
	struct cw_pool *pool;
	struct cw_admit_state *adm;
	bool own_adm;			/* made by the server (no daemon gave one) */
	int listen_fd, epoll_fd, wake_fd;
	bool stopping;
	struct client *clients;
	unsigned n_clients;
	struct calib_job *jobs;
	struct epoll_event batch[16];	/* the events being dispatched */
	int batch_n;
	struct cwc_http *http;		/* the metrics listeners */

	struct cwc_export *exports;
	size_t n_exports;
};

/* One request being handled: the reply's error, if any, is gathered here. */
struct ctx {
	struct cwc_server *srv;
	const struct cw_ctl_request *req;
	pid_t pid;			/* the caller's process on the socket, else 0 */
	cwc_emit_fn emit;
	void *emit_data;
	enum cw_ctl_code code;
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

/* ---- control-socket.c ---- */

/* Who is at the other end of unix socket fd (SO_PEERCRED, and
 * SO_PEERGROUPS where the kernel has it) and what the server lets them
 * do: change things (root, the admin group), read (those, and the read
 * group).  -errno when the kernel does not say. */
struct cwc_peer {
	uid_t uid;
	pid_t pid;		/* the process that connected */
	gid_t gid;
	bool can_read, can_change;
};
int cwc_peer_rights(const struct cwc_server *srv, int fd, struct cwc_peer *ret);
/* Removes a socket file at path that nothing answers on (a previous
 * run's); -EADDRINUSE when something does, -EEXIST for another file. */
int cwc_clear_stale(const char *path, const struct sockaddr_un *sa);

/* ---- control-http.c: the metrics endpoint ---- */

/* Binds the metrics addresses of the options and serves them in the
 * server's epoll; -errno (what started stays for cwc_http_free). */
int cwc_http_start(struct cwc_server *srv);
/* Serves what is ready on any metrics listener; the milliseconds until
 * one has a timeout due (-1: none). */
int cwc_http_run(struct cwc_server *srv);
void cwc_http_free(struct cwc_server *srv);

/* ---- control-metrics.c ---- */

/* The exposition, Prometheus text (0.0.4) or OpenMetrics (1.0.0), in a
 * malloc'ed buffer; 0 or -errno. */
int cwc_metrics_text(struct cwc_server *srv, bool openmetrics, char **ret, size_t *ret_len);

/* ---- control-cmd.c ---- */

/* Parses one line and checks the caller's rights: false after emitting
 * the error reply; true with *req to run (release with cw_ctl_request_done). */
bool cwc_request_admit(struct cwc_server *srv, const char *line, size_t len, bool can_read,
		       bool can_change, cwc_emit_fn emit, void *userdata, struct cw_ctl_request *req);
/* Runs a request and emits its reply. */
/* pid: the caller's process (0: not known), for resv.claim. */
void cwc_request_run(struct cwc_server *srv, const struct cw_ctl_request *req, pid_t pid,
		     cwc_emit_fn emit, void *userdata);
void cwc_emit_error(cwc_emit_fn emit, void *data, enum cw_ctl_code code, const char *msg,
		    json_object *details);

/* ---- control-util.c ---- */

int cwc_fail(struct ctx *c, enum cw_ctl_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A failed pool call: its code, and the pool's own sentence. */
int cwc_fail_pool(struct ctx *c, int r, const char *what);
/* A refused admission: the sentence and its facts as details. */
int cwc_fail_refused(struct ctx *c, int r, const struct cw_admit_refusal *ref);
/* {"cpu_need": CPUs, "cpu_given": CPUs, "cpu_need_ps": n, "cpu_given_ps": n}
 * (ps of CPU a second): what streams need of the host and are given. */
json_object *cwc_host_json(uint64_t need_ps, uint64_t given_ps);
json_object *cwc_jstr(const char *s);
json_object *cwc_jns(int64_t ns);	/* NULL (JSON null) for CW_ADMIT_NO_LIMIT */
static inline void cwc_add(json_object *o, const char *k, json_object *v)
{
	json_object_object_add(o, k, v);
}
const char *cwc_disk_state_name(enum cw_disk_state s);
/* A disk by name, or by its id written in decimal; -1: c says why. */
int cwc_find_disk(struct ctx *c, const char *name, struct cw_disk_info *ret);
int cwc_find_part(struct ctx *c, const char *name, struct cw_part **ret);
/* The request's "policy", "tier" and "zone", where given, into the
 * caller's defaults; -1: c says what was wrong. */
int cwc_placement_args(struct ctx *c, enum cw_placement *placement, enum cw_tier_pref *tier,
		       enum cw_zone_pref *zone);
/* The export bound to reservation id, or NULL. */
const struct cwc_export *cwc_resv_export(const struct cwc_server *srv, uint64_t id);

/* ---- command families: each handler fills *ret or returns -1 ---- */

typedef int (*cwc_handler_fn)(struct ctx *c, json_object **ret);

int cwc_cmd_disk_list(struct ctx *c, json_object **ret);
int cwc_cmd_disk_add(struct ctx *c, json_object **ret);
int cwc_cmd_disk_remove(struct ctx *c, json_object **ret);
int cwc_cmd_disk_set(struct ctx *c, json_object **ret);
int cwc_cmd_disk_calibrate(struct ctx *c, json_object **ret);
int cwc_cmd_disk_plan(struct ctx *c, json_object **ret);
int cwc_cmd_disk_headroom(struct ctx *c, json_object **ret);	/* control-headroom.c */
/* A calibration's disk and options from the request (-1: c says why),
 * and, once measured, the model taken and the reply built. */
int cwc_calib_prepare(struct ctx *c, struct calib *k);
int cwc_calib_finish(struct ctx *c, struct calib *k, json_object **ret);

int cwc_cmd_part_list(struct ctx *c, json_object **ret);
int cwc_cmd_part_create(struct ctx *c, json_object **ret);
int cwc_cmd_part_show(struct ctx *c, json_object **ret);
int cwc_cmd_part_resize(struct ctx *c, json_object **ret);
/* control-move.c */
int cwc_cmd_disk_evacuate(struct ctx *c, json_object **ret);
int cwc_cmd_disk_replace(struct ctx *c, json_object **ret);
int cwc_cmd_part_rebuild(struct ctx *c, json_object **ret);
int cwc_cmd_part_scrub(struct ctx *c, json_object **ret);
int cwc_cmd_part_move(struct ctx *c, json_object **ret);
/* control-cache.c */
int cwc_cmd_part_cache(struct ctx *c, json_object **ret);
json_object *cwc_caches_json(struct cwc_server *srv);
/* Rule 2 for SSD caches: books the streams of partition part (NULL:
 * all) on its cache's disks where admission lets it (retry: also those
 * refused before) and pins the ranges of the others
 * (cw_admit_state_cache_sync), and tells a new refusal once.  Each round
 * of the control thread (without retry: a cache that left disks), and at
 * start. */
void cwc_caches_sync(struct cwc_server *srv, const char *part, bool retry);
/* Tells, through the notice hook, each stream whose cache refusal is new
 * (cache_refused_new): after a call that synced caches. */
void cwc_caches_notice(struct cwc_server *srv);
int cwc_cmd_move_list(struct ctx *c, json_object **ret);
int cwc_cmd_move_pause(struct ctx *c, json_object **ret);
int cwc_cmd_move_resume(struct ctx *c, json_object **ret);
int cwc_cmd_move_cancel(struct ctx *c, json_object **ret);
/* Moves postponed by rule 2 (control-move.c) are tried again after a
 * release: they resume once their streams fit on both sides of them. */
void cwc_moves_retry_postponed(struct cwc_server *srv);
/* Streams booked for moves that are over settle where their ranges lie
 * (cw_admit_state_moves_settle): each round of the control thread. */
void cwc_moves_settle(struct cwc_server *srv);
int cwc_cmd_part_delete(struct ctx *c, json_object **ret);

int cwc_cmd_resv_create(struct ctx *c, json_object **ret);
int cwc_cmd_resv_list(struct ctx *c, json_object **ret);
int cwc_cmd_resv_show(struct ctx *c, json_object **ret);
int cwc_cmd_resv_release(struct ctx *c, json_object **ret);
int cwc_cmd_resv_claim(struct ctx *c, json_object **ret);
/* Releases the stored reservations whose time span is over. */
void cwc_resv_expire(struct cwc_server *srv);

int cwc_cmd_export_list(struct ctx *c, json_object **ret);
int cwc_cmd_export_add(struct ctx *c, json_object **ret);
int cwc_cmd_export_remove(struct ctx *c, json_object **ret);

/* control-qos.c: exports' best-effort QoS (clockwise/admit-state.h) */
int cwc_cmd_export_qos(struct ctx *c, json_object **ret);
/* The export's QoS as JSON, or NULL (JSON null) when it has none. */
json_object *cwc_qos_json(const struct cwc_server *srv, const char *export_name);
/* Serves each stored export again (the hooks are told); on failure takes
 * back what it told them and keeps nothing. */
int cwc_export_load(struct cwc_server *srv);
void cwc_export_unload(struct cwc_server *srv, size_t served);

int cwc_cmd_status(struct ctx *c, json_object **ret);
/* Each export's best effort in st against what it was due, over one
 * interval since the first of them was exported (cw_sched_share_table):
 * *ret malloc'ed, one row per export, *ret_n of them (0: nothing known). */
void cwc_export_shares(const struct cwc_server *srv, const struct cwc_stats *st,
		       struct cw_sched_share_out **ret, size_t *ret_n);
int cwc_cmd_stats(struct ctx *c, json_object **ret);

#endif
