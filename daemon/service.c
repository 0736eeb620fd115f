/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The control socket inside clockwised: daemon/control.c's server on the
 * configured socket, run in a thread of its own, plugged into the data
 * path through struct cwc_hooks.
 *
 * - export add/remove: an NBD export of a partition appears or goes while
 *   the server runs (nbdsrv_add_export / nbdsrv_remove_export; a
 *   removal returns once the export's clients ended, so its back end goes
 *   with nothing in flight).
 * - resv_changed: a reservation admitted by the control server (Jeffay's
 *   test, Bosch & Mullender section 3.1, on its disk models, which are the
 *   data path's) joins the data path: its per-disk tasks join the disk's
 *   set, ΔL and the BE server are recomputed as reserve.c does at start
 *   (sections 3.2-3.3), and the disk's dispatcher gets the new plan.  An
 *   export bound to it then sends in-range, in-span requests as RT.
 * - stats: the data path's counters per disk and per reservation.
 *
 * Everything here runs on the control thread, but for svc_log_stats()
 * (the main thread's SIGUSR1), which takes the same mutex.
 */
#include "config.h"

#include <grp.h>

#include "daemon/control.h"
#include "daemon/service.h"
#include "daemon/pool-internal.h"

struct svc {
	struct pb *pb;
	struct nbdsrv *nbd;
	const struct cwd_config *cfg;
	struct cwc_server *srv;
	pthread_t thread;
	bool running;
	pthread_mutex_t lock;		/* pb->resvs and the runtime tasks */
	/* Per disk index: the tasks admitted through the socket. */
	struct cw_task **tasks;
	size_t *ntasks;
};

static gid_t group_gid(const char *name, const char *key)
{
	struct group *g = getgrnam(name);

	if (!g) {
		cwd_log(LOG_NOTICE, "control socket: no group \"%s\" (%s): only root may %s", name,
			key, strcmp(key, "control_read_group") == 0 ? "read" : "change things");
		return CWC_NO_GID;
	}
	return g->gr_gid;
}

/* ---- exports ---- */

static struct pbx *find_export(struct pb *pb, const char *name)
{
	for (struct pbx *x = pb->exports; x; x = x->next)
		if (strcmp(x->name, name) == 0)
			return x;
	return NULL;
}

static struct resv *find_resv(struct pb *pb, uint64_t id)
{
	for (size_t i = 0; i < pb->nresvs; i++)
		if (pb->resvs[i] && pb->resvs[i]->ctl_id == id)
			return pb->resvs[i];
	return NULL;
}

/* Unlinks and frees an export the NBD server no longer serves. */
static void drop_export(struct pb *pb, struct pbx *x)
{
	struct pbx **pp;

	for (pp = &pb->exports; *pp; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	free(x);
}

static int hook_export_add(void *userdata, const struct cwc_export *e, struct cw_part *part)
{
	struct svc *ctl = userdata;
	struct nbdsrv_export ne;
	struct resv *rv = NULL;
	struct pbx *x;
	int r;

	if (e->resv_id) {
		rv = find_resv(ctl->pb, e->resv_id);
		if (!rv)
			return -ENOENT;
	}
	r = pb_export(ctl->pb, part, &ne);
	if (r < 0)
		return r;
	x = ne.backend;
	/* The export's name is the control plane's choice, not always the
	 * partition's. */
	snprintf(x->name, sizeof(x->name), "%s", e->name);
	ne.name = x->name;
	ne.read_only = ne.read_only || e->readonly;
	x->resv = rv;
	r = nbdsrv_add_export(ctl->nbd, &ne);
	if (r < 0) {
		drop_export(ctl->pb, x);
		return r;
	}
	cwd_log(LOG_INFO, "export %s (partition %s): %" PRIu64 " bytes%s%s", e->name, e->part,
		ne.size, ne.read_only ? ", read-only" : "", rv ? ", with a reservation" : "");
	return 0;
}

static int hook_export_remove(void *userdata, const struct cwc_export *e)
{
	struct svc *ctl = userdata;
	struct pbx *x = find_export(ctl->pb, e->name);
	int r;

	r = nbdsrv_remove_export(ctl->nbd, e->name);
	/* An export listed but never served (its partition was on a missing
	 * disk at start) is simply forgotten. */
	if (r == -ENOENT && !x)
		return 0;
	if (r < 0)
		return r;
	if (x)
		drop_export(ctl->pb, x);
	cwd_log(LOG_INFO, "export %s removed", e->name);
	return 0;
}

/* ---- reservations ---- */

/* ΔL and the BE server of disk di over its static and runtime tasks, as
 * pb_disk_sched() computes them at start, handed to its lane 0. */
static void replan(struct svc *ctl, size_t di)
{
	struct disk *d = &ctl->pb->disks[di];
	size_t n = d->ntasks + ctl->ntasks[di];
	_cleanup_free_ struct cw_task *all = calloc(n + 1, sizeof(*all));
	struct lane_plan *pl;

	if (!all || !(pl = calloc(1, sizeof(*pl)))) {
		cwd_log(LOG_ERR, "disk %s: out of memory for its new plan", d->name);
		return;
	}
	if (d->ntasks)
		memcpy(all, d->tasks, d->ntasks * sizeof(*all));
	if (ctl->ntasks[di])
		memcpy(all + d->ntasks, ctl->tasks[di], ctl->ntasks[di] * sizeof(*all));
	if (pb_disk_plan(d, all, n, pl) < 0) {
		free(pl);
		return;
	}
	atomic_store(&d->live_streams, true);
	lane_post_plan(&d->lanes[0], pl);
}

static int resv_add(struct svc *ctl, const struct cwc_resv *cr)
{
	struct pb *pb = ctl->pb;
	_cleanup_free_ struct resv *rv = calloc(1, sizeof(*rv));
	size_t i, slot;

	if (!rv)
		return -ENOMEM;
	for (slot = 0; slot < pb->nresvs && pb->resvs[slot]; slot++)
		;
	if (slot == PB_RESV_MAX)
		return -ENOSPC;
	if (slot == pb->nresvs) {
		struct resv **arr = realloc(pb->resvs, (pb->nresvs + 1) * sizeof(*arr));

		if (!arr)
			return -ENOMEM;
		pb->resvs = arr;
		pb->resvs[pb->nresvs++] = NULL;
	}
	rv->period_ns = calloc(PB_DISKS_CAP, sizeof(int64_t));
	rv->service_ns = calloc(PB_DISKS_CAP, sizeof(int64_t));
	if (!rv->period_ns || !rv->service_ns) {
		pb_resv_free(CW_TAKE_PTR(rv));
		return -ENOMEM;
	}
	snprintf(rv->r.export_name, sizeof(rv->r.export_name), "%s", cr->part);
	rv->r.bandwidth_bps = cr->rate_bps;
	rv->r.block_bytes = cr->block_bytes;
	rv->ctl_id = cr->id;
	rv->idx = slot;
	rv->lo = cr->range_start_bytes;
	rv->hi = cr->range_end_bytes;
	rv->start_ns = cr->span_start_ns;
	rv->end_ns = cr->span_end_ns;
	for (i = 0; i < cr->n_parts; i++) {
		int di = pb_disk_index(pb, cr->parts[i].disk_id);
		struct cw_task *t;

		if (di < 0)
			continue;	/* cannot be: the partition is on present disks */
		t = realloc(ctl->tasks[di], (ctl->ntasks[di] + 1) * sizeof(*t));
		if (!t)
			continue;	/* the stream's requests on it stay BE */
		ctl->tasks[di] = t;
		t[ctl->ntasks[di]++] = cr->parts[i].task;
		rv->period_ns[di] = cr->parts[i].task.period_ns;
		rv->service_ns[di] = cr->parts[i].task.service_ns;
	}
	pb->resvs[slot] = CW_TAKE_PTR(rv);
	for (i = 0; i < pb->ndisks; i++)
		if (pb->resvs[slot]->period_ns[i])
			replan(ctl, i);
	return 0;
}

/* Released: the control server refuses while an export is bound to it,
 * and an export's removal waited for its requests, so nothing in flight
 * points at it. */
static void resv_release(struct svc *ctl, const struct cwc_resv *cr)
{
	struct pb *pb = ctl->pb;
	struct resv *rv = find_resv(pb, cr->id);
	size_t i, j;

	if (!rv)
		return;
	for (i = 0; i < cr->n_parts; i++) {
		int di = pb_disk_index(pb, cr->parts[i].disk_id);

		if (di < 0)
			continue;
		for (j = 0; j < ctl->ntasks[di]; j++)
			if (memcmp(&ctl->tasks[di][j], &cr->parts[i].task, sizeof(struct cw_task)) == 0) {
				ctl->tasks[di][j] = ctl->tasks[di][--ctl->ntasks[di]];
				break;
			}
	}
	pb->resvs[rv->idx] = NULL;
	for (i = 0; i < pb->ndisks; i++)
		if (rv->period_ns[i])
			replan(ctl, i);
	pb_resv_free(rv);
}

static void hook_resv_changed(void *userdata, const struct cwc_resv *r, bool added)
{
	struct svc *ctl = userdata;
	int ret = 0;

	pthread_mutex_lock(&ctl->lock);
	if (added)
		ret = resv_add(ctl, r);
	else
		resv_release(ctl, r);
	pthread_mutex_unlock(&ctl->lock);
	if (ret < 0)
		cwd_log(LOG_ERR, "reservation %" PRIu64 " on %s: the data path cannot take it: %s "
			"(its requests stay best-effort)", r->id, r->part, strerror(-ret));
	else
		cwd_log(LOG_INFO, "reservation %" PRIu64 " on %s %s", r->id, r->part,
			added ? "admitted" : "released");
}

/* A new model (a calibration): the control server admits with it from
 * now on, and the dispatchers estimate best-effort pieces and size the BE
 * server with it.  The control server refuses a calibration of a disk
 * with streams; streams given at start (-r) keep the service times they
 * were admitted with, which the new plan says if they no longer fit. */
static void hook_model_changed(void *userdata, uint32_t disk_id, const struct cw_model *m,
			       const char *text)
{
	struct svc *ctl = userdata;
	int di = pb_disk_index(ctl->pb, disk_id), r;
	struct disk *d;

	if (di < 0)
		return;
	d = &ctl->pb->disks[di];
	pthread_mutex_lock(&ctl->lock);
	r = pb_disk_set_model(d, m);
	if (r == 0 && d->ntasks + ctl->ntasks[di])
		replan(ctl, (size_t)di);
	pthread_mutex_unlock(&ctl->lock);
	if (r < 0)
		cwd_log(LOG_ERR, "disk %s: the new model is not usable here (%s); the old one stays",
			d->name, strerror(-r));
	else
		cwd_log(LOG_NOTICE, "disk %s: new model: %s", d->name, text);
}

/* ---- disks and sizes changed at runtime ---- */

/* Admission of disk d uses its dispatchers' model, unless the pool
 * stores one (see ctl_new). */
static void share_model(struct svc *ctl, const struct disk *d)
{
	if (d->fd >= 0 && cwc_server_get_model(ctl->srv, d->id, NULL, NULL) == -ENOENT)
		(void)cwc_server_set_model(ctl->srv, d->id, disk_model(d), false);
}

static int hook_disk_add(void *userdata, const struct cw_disk_info *info, char *err,
			 size_t errlen)
{
	struct svc *ctl = userdata;
	int r;

	/* The lock keeps svc_log_stats (another thread) off pb->ndisks. */
	pthread_mutex_lock(&ctl->lock);
	r = pb_disk_add(ctl->pb, info->id, err, errlen);
	pthread_mutex_unlock(&ctl->lock);
	if (r < 0) {
		cwd_log(LOG_ERR, "%s", err);
		return r;
	}
	share_model(ctl, &ctl->pb->disks[pb_disk_index(ctl->pb, info->id)]);
	cwd_log(LOG_NOTICE, "disk %s (%s) added: served from now on", info->name, info->path);
	return 0;
}

static int hook_disk_remove(void *userdata, const struct cw_disk_info *info, char *err,
			    size_t errlen)
{
	struct svc *ctl = userdata;
	int r;

	pthread_mutex_lock(&ctl->lock);
	r = pb_disk_remove(ctl->pb, info->id, err, errlen);
	pthread_mutex_unlock(&ctl->lock);
	if (r < 0 && r != -ENOENT)
		cwd_log(LOG_NOTICE, "%s", err);
	return r;
}

static int hook_export_resize(void *userdata, const struct cwc_export *e, struct cw_part *part,
			      char *err, size_t errlen)
{
	struct svc *ctl = userdata;
	struct pbx *x = find_export(ctl->pb, e->name);
	uint64_t size;
	int r;

	(void)part;
	if (!x)
		return 0;	/* listed but not served (a missing disk) */
	r = pb_export_grow(ctl->pb, x, &size, err, errlen);
	if (r == 0)
		r = nbdsrv_set_export_size(ctl->nbd, e->name, size);
	if (r < 0) {
		if (!err[0])
			snprintf(err, errlen, "export %s: %s", e->name, strerror(-r));
		cwd_log(LOG_ERR, "%s", err);
		return r;
	}
	cwd_log(LOG_INFO, "export %s: %" PRIu64 " bytes for new connections", e->name, size);
	return 0;
}

/* ---- stats ---- */

static void lane_sum(struct cwc_disk_stats *ds, const struct cwd_stats *c,
		     atomic_uint_fast64_t *hist)
{
	ds->rt_requests += cwd_stats_get(&c->rt_done);
	ds->rt_misses += cwd_stats_get(&c->rt_missed);
	ds->be_requests += cwd_stats_get(&c->be_done);
	ds->slack_used_ns += (int64_t)cwd_stats_get(&c->slack_used_ns);
	ds->read_bytes += cwd_stats_get(&c->read_bytes);
	ds->written_bytes += cwd_stats_get(&c->write_bytes);
	for (unsigned b = 0; b < CWD_STATS_HIST_BUCKETS; b++)
		hist[b] += cwd_stats_get(&c->be_lat[b]);
}

static int hook_stats(void *userdata, struct cwc_stats *ret)
{
	struct svc *ctl = userdata;
	struct pb *pb = ctl->pb;
	size_t i, j, n = 0;

	ret->disks = calloc(pb->ndisks ? pb->ndisks : 1, sizeof(*ret->disks));
	if (!ret->disks)
		return -ENOMEM;
	for (i = 0; i < pb->ndisks; i++) {
		struct cwc_disk_stats *ds = &ret->disks[ret->n_disks];
		atomic_uint_fast64_t hist[CWD_STATS_HIST_BUCKETS] = { 0 };
		struct disk *d = &pb->disks[i];

		if (d->fd < 0)
			continue;
		ds->disk_id = d->id;
		for (j = 0; j < d->nlanes; j++)
			lane_sum(ds, &d->lanes[j].st, hist);
		ds->be_p50_ns = cwd_stats_hist_quantile(hist, 0.5);
		ds->be_p99_ns = cwd_stats_hist_quantile(hist, 0.99);
		ds->be_max_ns = cwd_stats_hist_quantile(hist, 1.0);
		ret->n_disks++;
	}
	pthread_mutex_lock(&ctl->lock);
	ret->resvs = calloc(pb->nresvs ? pb->nresvs : 1, sizeof(*ret->resvs));
	if (!ret->resvs) {
		pthread_mutex_unlock(&ctl->lock);
		return -ENOMEM;
	}
	for (i = 0; i < pb->nresvs; i++) {
		struct resv *rv = pb->resvs[i];

		if (!rv)
			continue;
		ret->resvs[n++] = (struct cwc_resv_stats){
			.resv_id = rv->ctl_id,
			.requests = cwd_stats_get(&rv->st.rt_done),
			.misses = cwd_stats_get(&rv->st.rt_missed),
		};
	}
	ret->n_resvs = n;
	pthread_mutex_unlock(&ctl->lock);
	return 0;
}

/* ---- the server ---- */

static void *svc_main(void *arg)
{
	struct svc *ctl = arg;
	int r = cwc_server_run(ctl->srv);

	if (r < 0)
		cwd_log(LOG_ERR, "control socket: %s", strerror(-r));
	return NULL;
}

/* Keeps the reply's error message, if it is one. */
static void keep_error(const char *line, void *userdata)
{
	char *msg = userdata;
	json_object *root = json_tokener_parse(line), *err, *m;

	if (root && json_object_object_get_ex(root, "error", &err) &&
	    json_object_object_get_ex(err, "message", &m))
		snprintf(msg, 256, "%s", json_object_get_string(m));
	json_object_put(root);
}

int svc_new(struct cw_pool *pool, struct pb *pb, struct nbdsrv *nbd,
	    const struct cwd_config *cfg, struct svc **ret_ctl)
{
	struct cwc_server_opts o;
	struct svc *ctl;
	size_t i;
	int r;

	ctl = calloc(1, sizeof(*ctl));
	if (!ctl)
		return -ENOMEM;
	ctl->pb = pb;
	ctl->nbd = nbd;
	ctl->cfg = cfg;
	pthread_mutex_init(&ctl->lock, NULL);
	/* By disk slot, room for disks added while the daemon runs. */
	ctl->tasks = calloc(PB_DISKS_CAP, sizeof(*ctl->tasks));
	ctl->ntasks = calloc(PB_DISKS_CAP, sizeof(*ctl->ntasks));
	if (!ctl->tasks || !ctl->ntasks) {
		svc_free(ctl);
		return -ENOMEM;
	}
	cwc_server_opts_init(&o);
	o.socket_path = cfg->control_socket;
	o.read_gid = group_gid(cfg->control_read_group, "control_read_group");
	o.admin_gid = group_gid(cfg->control_admin_group, "control_admin_group");
	o.socket_gid = o.read_gid;
	o.hooks = (struct cwc_hooks){
		.userdata = ctl,
		.export_add = hook_export_add,
		.export_remove = hook_export_remove,
		.stats = hook_stats,
		.resv_changed = hook_resv_changed,
		.model_changed = hook_model_changed,
		.disk_add = hook_disk_add,
		.disk_remove = hook_disk_remove,
		.export_resize = hook_export_resize,
	};
	r = cwc_server_new(&o, pool, &ctl->srv);
	if (r < 0) {
		cwd_log(LOG_ERR, "cannot create the control socket %s: %s", cfg->control_socket,
			strerror(-r));
		svc_free(ctl);
		return r;
	}
	/* Admission on the socket uses the models the dispatchers use, except
	 * where the pool stores one (a calibration measured on that disk
	 * outranks a preset or a declared model). */
	for (i = 0; i < pb->ndisks; i++)
		share_model(ctl, &pb->disks[i]);
	*ret_ctl = ctl;
	return 0;
}

int svc_export_all(struct svc *ctl, size_t *ret_n)
{
	struct cw_part_info *parts = NULL;
	size_t n, i;
	int r;

	*ret_n = 0;
	r = cw_part_list(ctl->pb->pool, &parts, &n);
	if (r < 0)
		return r;
	/* Through the server, so that it lists them as its own. */
	for (i = 0; i < n; i++) {
		json_object *req = json_object_new_object(), *args = json_object_new_object();
		const char *line;
		char msg[256] = "";

		if (!req || !args) {
			json_object_put(req);
			json_object_put(args);
			r = -ENOMEM;
			break;
		}
		json_object_object_add(args, "part", json_object_new_string(parts[i].name));
		json_object_object_add(req, "cmd", json_object_new_string("export.add"));
		json_object_object_add(req, "args", args);
		line = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
		cwc_server_handle_line(ctl->srv, line, strlen(line), true, true, keep_error, msg);
		json_object_put(req);
		if (find_export(ctl->pb, parts[i].name))
			(*ret_n)++;
		else
			cwd_log(LOG_WARNING, "partition %s is not exported: %s", parts[i].name,
				msg[0] ? msg : "unknown error");
	}
	free(parts);
	return r < 0 ? r : 0;
}

/* Static reservation rv as the control server lists and counts it. */
static int static_resv(struct pb *pb, const struct resv *rv, struct cwc_resv *ret)
{
	struct cw_part_info pi;
	int r = cw_part_info(rv->x->part, &pi);

	if (r < 0)
		return r;
	*ret = (struct cwc_resv){
		.part_id = pi.id, .rate_bps = rv->r.bandwidth_bps,
		.block_bytes = rv->r.block_bytes, .range_start_bytes = rv->lo,
		.range_end_bytes = rv->hi, .period_ns = rv->stream_period_ns,
		.n_parts = rv->nparts, .is_static = true,
	};
	if (rv->r.span_start_s || rv->r.span_end_s) {
		ret->span_start_ns = rv->start_ns;
		ret->span_end_ns = rv->end_ns;
	}
	snprintf(ret->part, sizeof(ret->part), "%s", pi.name);
	snprintf(ret->export_name, sizeof(ret->export_name), "%s", rv->r.export_name);
	ret->parts = calloc(rv->nparts ? rv->nparts : 1, sizeof(*ret->parts));
	if (!ret->parts)
		return -ENOMEM;
	for (size_t i = 0; i < rv->nparts; i++)
		ret->parts[i] = (struct cwc_resv_part){
			.disk_id = pb->disks[rv->parts[i].disk].id, .task = rv->parts[i].task,
			.requests = rv->parts[i].requests, .stride = rv->parts[i].stride,
		};
	return 0;
}

/* The static streams of disk di beside those the pool stores (admitted by
 * the control server, which did not know of the static ones then). */
static int static_fits(struct svc *ctl, size_t di)
{
	struct disk *d = &ctl->pb->disks[di];
	size_t n = d->ntasks + ctl->ntasks[di];
	_cleanup_free_ struct cw_task *all = calloc(n ? n : 1, sizeof(*all));
	struct cw_admit_result res;
	int r;

	if (!all)
		return -ENOMEM;
	if (!d->ntasks || !ctl->ntasks[di])
		return 0;
	memcpy(all, d->tasks, d->ntasks * sizeof(*all));
	memcpy(all + d->ntasks, ctl->tasks[di], ctl->ntasks[di] * sizeof(*all));
	r = cw_admit_test(all, n, &res);
	if (r == 0 && !res.schedulable) {
		cwd_log(LOG_ERR, "disk %s: the static reservations (-r) do not fit beside the "
			"%zu stream part%s of reservations stored in the pool: %s", d->name,
			ctl->ntasks[di], ctl->ntasks[di] == 1 ? "" : "s", res.reason);
		return -EBUSY;
	}
	return r;
}

int ctl_add_static_resvs(struct svc *ctl)
{
	struct pb *pb = ctl->pb;
	size_t i;
	int r;

	for (i = 0; i < pb->ndisks; i++) {
		r = static_fits(ctl, i);
		if (r < 0)
			return r;
	}
	for (i = 0; i < pb->nresvs; i++) {
		struct resv *rv = pb->resvs[i];
		struct cwc_resv cr;

		if (!rv || rv->ctl_id || !rv->x)
			continue;
		r = static_resv(pb, rv, &cr);
		if (r == 0)
			r = cwc_server_add_static_resv(ctl->srv, &cr);
		cwc_resv_free_parts(&cr);
		if (r < 0) {
			cwd_log(LOG_ERR, "reservation for %s: cannot tell the control socket: %s",
				rv->r.export_name, strerror(-r));
			return r;
		}
	}
	return 0;
}

int svc_start(struct svc *ctl)
{
	int r = -pthread_create(&ctl->thread, NULL, svc_main, ctl);

	if (r == 0)
		ctl->running = true;
	return r;
}

void svc_log_stats(struct svc *ctl, struct pb *pb)
{
	if (ctl)
		pthread_mutex_lock(&ctl->lock);
	pb_log_stats(pb);
	if (ctl)
		pthread_mutex_unlock(&ctl->lock);
}

void svc_free(struct svc *ctl)
{
	size_t i;

	if (!ctl)
		return;
	if (ctl->running) {
		cwc_server_stop(ctl->srv);
		pthread_join(ctl->thread, NULL);
	}
	cwc_server_free(ctl->srv);
	for (i = 0; ctl->tasks && i < PB_DISKS_CAP; i++)
		free(ctl->tasks[i]);
	free(ctl->tasks);
	free(ctl->ntasks);
	pthread_mutex_destroy(&ctl->lock);
	free(ctl);
}
