/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The control socket inside clockwised: daemon/control/control.h's server on the
 * configured socket, run in a thread of its own, plugged into the data
 * path through struct cwc_hooks.
 *
 * - export add/remove: an NBD export of a partition appears or goes while
 *   the server runs (nbdsrv_add_export / nbdsrv_remove_export; a
 *   removal returns once the export's clients ended, so its back end goes
 *   with nothing in flight).
 * - reservations and plans are not the service's: the admission state
 *   (clockwise/admit-state.h) owns them and tells the data path itself
 *   (pb_admit_event).  An export bound to a reservation sends in-range,
 *   in-span requests as RT.
 * - ublk exports: the same back end behind a block device of its own
 *   (daemon/ublk/) instead of the NBD server.
 * - stats: the data path's counters per disk and per reservation.
 *
 * Everything here runs on the control thread, but for svc_log_stats()
 * (the main thread's SIGUSR1), which takes the same mutex.
 */
#include "config.h"

#include <grp.h>

#include "daemon/control/control.h"
#include "daemon/service.h"
#include "daemon/thread-name.h"
#include "daemon/path/pool-internal.h"
#include "daemon/ublk/ublk.h"

/* An export served as a ublk device (dev NULL: not yet made). */
struct svc_ublk {
	char name[CW_NAME_MAX + 1];
	struct nbdsrv_export ne;
	struct ublk_config uc;
	struct ublk_dev *dev;
	struct svc_ublk *next;
};

struct svc {
	struct pb *pb;
	struct nbdsrv *nbd;
	const struct cwd_config *cfg;
	struct cwc_server *srv;
	pthread_t thread;
	bool running;
	pthread_mutex_t lock;		/* pb->ndisks against svc_log_stats */
	struct svc_ublk *ublks;		/* control thread only */
	bool path_started;		/* the dispatchers run (svc_start) */
};

static struct svc_ublk **ublk_find(struct svc *svc, const char *name)
{
	struct svc_ublk **pp;

	for (pp = &svc->ublks; *pp; pp = &(*pp)->next)
		if (strcmp((*pp)->name, name) == 0)
			return pp;
	return NULL;
}

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

/* Unlinks and frees an export the NBD server no longer serves. */
static void drop_export(struct pb *pb, struct pbx *x)
{
	struct pbx **pp;

	pthread_mutex_lock(&pb->exports_lock);
	for (pp = &pb->exports; *pp; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	pthread_mutex_unlock(&pb->exports_lock);
	pb_export_free(x);
}

static int hook_export_add(void *userdata, const struct cwc_export *e, struct cw_part *part)
{
	struct svc *svc = userdata;
	struct nbdsrv_export ne;
	struct pbx *x;
	int r;

	r = pb_export(svc->pb, part, &ne);
	if (r < 0)
		return r;
	x = ne.backend;
	/* The export's name is the control plane's choice, not always the
	 * partition's. */
	snprintf(x->name, sizeof(x->name), "%s", e->name);
	ne.name = x->name;
	ne.read_only = ne.read_only || e->readonly;
	/* Bound to its reservation, or else to a start-up one given for
	 * its name (-r). */
	r = pb_export_bind(svc->pb, x, e->resv_id);
	if (r < 0 && e->resv_id) {
		drop_export(svc->pb, x);
		return r;
	}
	r = nbdsrv_add_export(svc->nbd, &ne);
	if (r < 0) {
		drop_export(svc->pb, x);
		return r;
	}
	cwd_log(LOG_INFO, "export %s (partition %s): %" PRIu64 " bytes%s%s", e->name, e->part,
		ne.size, ne.read_only ? ", read-only" : "", x->resv ? ", with a reservation" : "");
	return 0;
}

/* Makes (or takes back) u's device and records its number; on failure
 * the export is dropped from the data path (-errno, reason in err). */
static int ublk_start(struct svc *svc, struct svc_ublk *u, char *err, size_t errlen)
{
	struct pbx *x = u->ne.backend;
	int r = ublk_dev_new(&u->ne, &u->uc, &u->dev, err, errlen);

	if (r < 0) {
		cwd_log(LOG_ERR, "export %s is not served as a ublk device: %s", u->name,
			err[0] ? err : strerror(-r));
		return r;
	}
	/* The number, so that a daemon after a crash takes it back. */
	if (ublk_dev_id(u->dev) != u->uc.recover_id) {
		r = cw_export_set_ublk_dev(svc->pb->pool, u->name, ublk_dev_id(u->dev));
		if (r < 0)
			cwd_log(LOG_WARNING, "export %s: its device number is not stored (%s): after "
				"a crash a new device replaces it", u->name, strerror(-r));
	}
	cwc_server_export_device(svc->srv, u->name, ublk_dev_id(u->dev));
	cwd_log(LOG_INFO, "export %s: /dev/ublkb%d%s, %" PRIu64 " bytes, %u queue%s%s%s%s", u->name,
		ublk_dev_id(u->dev),
		ublk_dev_recovered(u->dev) ? ", taken back with its queued requests" : "",
		u->ne.size, ublk_dev_queues(u->dev), ublk_dev_queues(u->dev) == 1 ? "" : "s",
		ublk_dev_unprivileged(u->dev) ? ", unprivileged (only the daemon's user opens it; "
		"the export's access rules do not apply)" : "", u->ne.read_only ? ", read-only" : "",
		x->resv ? ", with a reservation" : "");
	return 0;
}

/* Takes u out of the list (names are unique there). */
static void ublk_unlink(struct svc *svc, struct svc_ublk *u)
{
	struct svc_ublk **pp = ublk_find(svc, u->name);

	if (pp)
		*pp = u->next;
}

static int hook_export_add_ublk(void *userdata, struct cwc_export *e, struct cw_part *part,
				char *err, size_t errlen)
{
	struct svc *svc = userdata;
	struct svc_ublk *u;
	struct pbx *x;
	int r;

	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	r = pb_export(svc->pb, part, &u->ne);
	if (r < 0) {
		free(u);
		return r;
	}
	x = u->ne.backend;
	snprintf(x->name, sizeof(x->name), "%s", e->name);
	snprintf(u->name, sizeof(u->name), "%s", e->name);
	u->ne.name = x->name;
	u->ne.read_only = u->ne.read_only || e->readonly;
	u->uc = (struct ublk_config){ .queue_depth = e->ublk_depth,
				      .queues = svc->cfg->exports.ublk_queues,
				      .max_request = e->ublk_max_request,
				      .recover_id = e->ublk_dev };
	/* Who may open the device: the export's access rules, as far as
	 * a node's owner, group and mode can say them. */
	{
		size_t n;
		const struct nbdsrv_access *rules = nbdsrv_access_rules(svc->nbd, &n);
		unsigned left = ublk_node_access(rules, n, e->name, &u->uc);

		if (left)
			cwd_log(LOG_WARNING, "export %s: %u user%s or group%s of its access rules "
				"cannot open its ublk device (a node has one owner and one group)",
				e->name, left, left == 1 ? "" : "s", left == 1 ? "" : "s");
	}
	r = pb_export_bind(svc->pb, x, e->resv_id);
	if (r < 0 && e->resv_id) {
		drop_export(svc->pb, x);
		free(u);
		return r;
	}
	u->next = svc->ublks;
	svc->ublks = u;
	/* Before the dispatchers run (the stored exports, at start), the
	 * kernel's first reads of a new device (its partition table) would
	 * wait for them: made in svc_start(). */
	if (!svc->path_started)
		return 0;
	r = ublk_start(svc, u, err, errlen);
	if (r < 0) {
		ublk_unlink(svc, u);
		drop_export(svc->pb, x);
		free(u);
		return r;
	}
	e->ublk_dev = ublk_dev_id(u->dev);
	snprintf(e->device, sizeof(e->device), "/dev/ublkb%d", e->ublk_dev);
	return 0;
}

static int hook_export_remove(void *userdata, const struct cwc_export *e)
{
	struct svc *svc = userdata;
	struct pbx *x = find_export(svc->pb, e->name);
	struct svc_ublk **pu = ublk_find(svc, e->name);
	int r;

	if (pu) {
		struct svc_ublk *u = *pu;

		/* Returns once its requests are served and the device gone. */
		ublk_dev_free(u->dev);
		*pu = u->next;
		free(u);
		if (x)
			drop_export(svc->pb, x);
		cwd_log(LOG_INFO, "export %s removed (and its ublk device)", e->name);
		return 0;
	}
	r = nbdsrv_remove_export(svc->nbd, e->name);
	/* An export listed but never served (its partition was on a missing
	 * disk at start) is simply forgotten. */
	if (r == -ENOENT && !x)
		return 0;
	if (r < 0)
		return r;
	if (x)
		drop_export(svc->pb, x);
	cwd_log(LOG_INFO, "export %s removed", e->name);
	return 0;
}

/* ---- disks and sizes changed at runtime ---- */

static int hook_disk_add(void *userdata, const struct cw_disk_info *info, char *err,
			 size_t errlen)
{
	struct svc *svc = userdata;
	int r;

	/* The lock keeps svc_log_stats (another thread) off pb->ndisks. */
	pthread_mutex_lock(&svc->lock);
	r = pb_disk_add(svc->pb, info->id, err, errlen);
	pthread_mutex_unlock(&svc->lock);
	if (r < 0) {
		cwd_log(LOG_ERR, "%s", err);
		return r;
	}
	cwd_log(LOG_NOTICE, "disk %s (%s) added: served from now on", info->name, info->path);
	return 0;
}

static int hook_disk_remove(void *userdata, const struct cw_disk_info *info, char *err,
			    size_t errlen)
{
	struct svc *svc = userdata;
	int r;

	pthread_mutex_lock(&svc->lock);
	r = pb_disk_remove(svc->pb, info->id, err, errlen);
	pthread_mutex_unlock(&svc->lock);
	if (r < 0 && r != -ENOENT)
		cwd_log(LOG_NOTICE, "%s", err);
	return r;
}

static int hook_export_clients(void *userdata, const struct cwc_export *e,
			       struct nbdsrv_client *ret, size_t max, size_t *ret_n)
{
	struct svc *svc = userdata;

	struct svc_ublk **pu = ublk_find(svc, e->name);

	if (pu) {
		/* No connections; one user when the device is held open
		 * exclusively (mounted), so that removing it is refused
		 * without --force as an NBD export's with a client. */
		*ret_n = 0;
		if ((*pu)->dev && ublk_dev_busy((*pu)->dev)) {
			if (max) {
				ret[0] = (struct nbdsrv_client){ .since_ns = cw_now_ns() };
				snprintf(ret[0].addr, sizeof(ret[0].addr), "/dev/ublkb%d (in use)",
					 ublk_dev_id((*pu)->dev));
			}
			*ret_n = 1;
		}
		return 0;
	}
	return nbdsrv_export_clients(svc->nbd, e->name, ret, max, ret_n);
}

static int hook_export_claim(void *userdata, const struct cwc_export *e, pid_t pid,
			     pid_t *ret_pid)
{
	struct svc *svc = userdata;

	return nbdsrv_export_claim(svc->nbd, e->name, pid, ret_pid);
}

static int hook_export_resize(void *userdata, const struct cwc_export *e, struct cw_part *part,
			      char *err, size_t errlen)
{
	struct svc *svc = userdata;
	struct pbx *x = find_export(svc->pb, e->name);
	uint64_t size;
	int r;

	(void)part;
	if (!x)
		return 0;	/* listed but not served (a missing disk) */
	if (ublk_find(svc, e->name)) {
		/* ublk's UPDATE_SIZE came in Linux 6.16; before it a
		 * started device keeps the size SET_PARAMS gave it. */
		snprintf(err, errlen, "export %s is a ublk device, whose size this kernel cannot "
			 "change while it runs (live resize needs Linux 6.16's UBLK_CMD_UPDATE_SIZE); "
			 "remove the export and add it again to see the new size", e->name);
		cwd_log(LOG_ERR, "%s", err);
		return -EOPNOTSUPP;
	}
	r = pb_export_grow(svc->pb, x, &size, err, errlen);
	if (r == 0)
		r = nbdsrv_set_export_size(svc->nbd, e->name, size);
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

static void lane_sum(struct cwc_disk_stats *ds, const struct cwd_stats *c, uint64_t *ratio)
{
	ds->alone_requests += cwd_stats_get(&c->alone);
	ds->over_c += cwd_stats_get(&c->over_c);
	for (unsigned b = 0; b < CWD_STATS_RATIO_BUCKETS; b++)
		ratio[b] += cwd_stats_get(&c->over_c_ratio[b]);
	ds->rt_requests += cwd_stats_get(&c->rt_done);
	ds->rt_misses += cwd_stats_get(&c->rt_missed);
	ds->be_requests += cwd_stats_get(&c->be_done);
	ds->slack_used_ns += (int64_t)cwd_stats_get(&c->slack_used_ns);
	ds->read_bytes += cwd_stats_get(&c->read_bytes);
	ds->written_bytes += cwd_stats_get(&c->write_bytes);
	_Static_assert(CWD_STATS_MISS_CLASSES == CW_MISS_CLASSES, "one set of classes");
	for (unsigned k = 0; k < CW_MISS_CLASSES; k++)
		ds->misses[k] += cwd_stats_get(&c->miss[k]);
	ds->be_overruns += cwd_stats_get(&c->be_overruns);
	ds->be_overrun_ns += (int64_t)cwd_stats_get(&c->be_overrun_ns);
	ds->be_lat_sum_ns += (int64_t)cwd_stats_get(&c->be_lat_sum_ns);
	ds->queued += cwd_stats_get(&c->queued);
	ds->lanes++;
	_Static_assert(CWC_HIST_BUCKETS == CWD_STATS_HIST_BUCKETS, "one histogram");
	for (unsigned b = 0; b < CWD_STATS_HIST_BUCKETS; b++)
		ds->be_hist[b] += cwd_stats_get(&c->be_lat[b]);
}

/* Each export's (and class's) best effort on each of the export's disks. */
static int export_stats(struct pb *pb, struct cwc_stats *ret)
{
	int64_t now = cw_now_ns();
	size_t n = 0;

	for (const struct pbx *x = pb->exports; x; x = x->next)
		for (const struct pbx_client *c = &x->main; c; c = atomic_load(&c->next))
			n++;
	ret->exports = calloc(n ? n : 1, sizeof(*ret->exports));
	if (!ret->exports)
		return -ENOMEM;
	for (const struct pbx *x = pb->exports; x; x = x->next)
		for (const struct pbx_client *cl = &x->main; cl && ret->n_exports < n;
		     cl = atomic_load(&cl->next)) {
			struct cwc_export_stats *es = &ret->exports[ret->n_exports];
			const struct pbx_be *be = atomic_load_explicit(&cl->be, memory_order_acquire);
			unsigned nd = atomic_load_explicit(&x->ndisks, memory_order_acquire);

			snprintf(es->name, sizeof(es->name), "%s", cl->name);
			es->since_ns = cl->since_ns;
			es->disks = calloc(nd ? nd : 1, sizeof(*es->disks));
			if (!es->disks)
				return -ENOMEM;
			ret->n_exports++;
			for (unsigned k = 0; k < nd; k++) {
				uint32_t di = x->disks[k];
				const struct pbx_be_disk *c = &cl->be_disk[di];
				int64_t since = atomic_load_explicit(&c->busy_since, memory_order_relaxed);
				struct cwc_export_disk *ed = &es->disks[es->n_disks++];

				ed->in = (struct cw_sched_share_in){
					.client = ret->n_exports - 1,
					.disk = pb->disks[di].id,
					.qos = be && be->has[di] ? be->due[di] :
					       (struct cw_sched_client){ .weight = 1 },
					.served_ns = (int64_t)cwd_stats_get(&c->cost_ns),
					.resv_ns = (int64_t)cwd_stats_get(&c->resv_ns),
					.busy_ns = (int64_t)cwd_stats_get(&c->busy_ns) +
						   (since > 0 && now > since ? now - since : 0),
					.throttled_ns = (int64_t)cwd_stats_get(&c->throttled_ns),
					.requests = cwd_stats_get(&c->requests),
				};
				ed->bytes = cwd_stats_get(&c->bytes);
			}
		}
	return 0;
}

static int hook_stats(void *userdata, struct cwc_stats *ret)
{
	struct svc *svc = userdata;
	struct pb *pb = svc->pb;
	size_t i, j, n = 0;

	ret->disks = calloc(pb->ndisks ? pb->ndisks : 1, sizeof(*ret->disks));
	if (!ret->disks)
		return -ENOMEM;
	for (i = 0; i < pb->ndisks; i++) {
		struct cwc_disk_stats *ds = &ret->disks[ret->n_disks];
		uint64_t ratio[CWD_STATS_RATIO_BUCKETS] = { 0 };
		struct disk *d = &pb->disks[i];

		if (d->fd < 0)
			continue;
		ds->disk_id = d->id;
		ds->lane = calloc(d->nlanes ? d->nlanes : 1, sizeof(*ds->lane));
		if (!ds->lane)
			return -ENOMEM;
		ret->n_disks++;	/* from here on, its lanes are the caller's to free */
		for (j = 0; j < d->nlanes; j++) {
			const struct cwd_stats *c = &d->lanes[j].st;

			lane_sum(ds, c, ratio);
			ds->lane[j] = (struct cwc_lane_stats){
				.rt_requests = cwd_stats_get(&c->rt_done),
				.be_requests = cwd_stats_get(&c->be_done),
				.read_bytes = cwd_stats_get(&c->read_bytes),
				.written_bytes = cwd_stats_get(&c->write_bytes),
				.queued = cwd_stats_get(&c->queued),
			};
		}
		ds->p50_over_c = cwd_stats_ratio_quantile(ratio, 0.5);
		ds->p999_over_c = cwd_stats_ratio_quantile(ratio, 0.999);
		ds->tail_permille = disk_model(d)->tail_permille ? disk_model(d)->tail_permille : 999;
		ds->tail_over_c = cwd_stats_ratio_quantile(ratio, ds->tail_permille / 1000.0);
		if (cw_model_service_ns(disk_model(d), 0, 0, pb->block_size, &ds->c_block_ns) < 0)
			ds->c_block_ns = 0;
		ds->be_p50_ns = (int64_t)cw_hist_quantile(ds->be_hist, 0.5);
		ds->be_p99_ns = (int64_t)cw_hist_quantile(ds->be_hist, 0.99);
		ds->be_max_ns = (int64_t)cw_hist_quantile(ds->be_hist, 1.0);
	}
	pthread_mutex_lock(&pb->resv_lock);
	ret->resvs = calloc(pb->nresvs ? pb->nresvs : 1, sizeof(*ret->resvs));
	if (!ret->resvs) {
		pthread_mutex_unlock(&pb->resv_lock);
		return -ENOMEM;
	}
	for (i = 0; i < pb->nresvs; i++) {
		struct resv *rv = pb->resvs[i];

		if (!rv)
			continue;
		ret->resvs[n++] = (struct cwc_resv_stats){
			.resv_id = rv->a->persistent ? rv->a->id : 0,
			.requests = cwd_stats_get(&rv->st.rt_done),
			.misses = cwd_stats_get(&rv->st.rt_missed),
			.short_requests = cwd_stats_get(&rv->st.rt_short),
			.read_bytes = cwd_stats_get(&rv->st.read_bytes),
			.written_bytes = cwd_stats_get(&rv->st.write_bytes),
			.worst_late_ns = (int64_t)cwd_stats_get(&rv->st.rt_late_max_ns),
		};
		for (unsigned k = 0; k < CW_MISS_CLASSES; k++)
			ret->resvs[n - 1].miss_class[k] = cwd_stats_get(&rv->st.miss[k]);
		if (!rv->a->persistent)
			snprintf(ret->resvs[n - 1].export_name, sizeof(ret->resvs[n - 1].export_name),
				 "%s", rv->a->export_name);
	}
	ret->n_resvs = n;
	pthread_mutex_unlock(&pb->resv_lock);
	return export_stats(pb, ret);
}

static void hook_guarantee(void *userdata, char *buf, size_t len)
{
	struct svc *svc = userdata;

	pb_guarantee(svc->pb, buf, len);
}

static void hook_tick(void *userdata)
{
	struct svc *svc = userdata;

	pb_misses_tick(svc->pb);
	pb_host_tick(svc->pb, nbdsrv_rt_cpu_ns(svc->nbd));
	pb_takeover_tick(svc->pb);
}

static void hook_moves_changed(void *userdata)
{
	struct svc *svc = userdata;

	pb_mover_kick(svc->pb);
}

static void hook_notice(void *userdata, const char *msg)
{
	(void)userdata;
	cwd_log(LOG_WARNING, "%s", msg);
}

/* ---- the server ---- */

static void *svc_main(void *arg)
{
	struct svc *svc = arg;
	int r = cwc_server_run(svc->srv);

	if (r < 0)
		cwd_log(LOG_ERR, "control socket: %s", strerror(-r));
	return NULL;
}

int svc_new(struct cw_pool *pool, struct cw_admit_state *adm, struct pb *pb,
	    struct nbdsrv *nbd, const struct cwd_config *cfg, struct svc **ret_ctl)
{
	struct cwc_server_opts o;
	struct svc *svc;
	int r;

	svc = calloc(1, sizeof(*svc));
	if (!svc)
		return -ENOMEM;
	svc->pb = pb;
	svc->nbd = nbd;
	svc->cfg = cfg;
	pthread_mutex_init(&svc->lock, NULL);
	cwc_server_opts_init(&o);
	o.admit = adm;
	o.socket_path = cfg->control_socket;
	o.read_gid = group_gid(cfg->control_read_group, "control_read_group");
	o.admin_gid = group_gid(cfg->control_admin_group, "control_admin_group");
	o.socket_gid = o.read_gid;
	o.idle_timeout_ns = (int64_t)cfg->control_idle_timeout_s * CW_NS_PER_S;
	o.activation_partial = cfg->exports.partial;
	o.metrics_addr = cfg->metrics.addr;
	o.metrics_addrlen = cfg->metrics.addrlen;
	o.n_metrics = cfg->metrics.n;
	o.hooks = (struct cwc_hooks){
		.userdata = svc,
		.export_add = hook_export_add,
		.export_add_ublk = hook_export_add_ublk,
		.export_remove = hook_export_remove,
		.stats = hook_stats,
		.disk_add = hook_disk_add,
		.disk_remove = hook_disk_remove,
		.export_resize = hook_export_resize,
		.tick = hook_tick,
		.guarantee = hook_guarantee,
		.export_clients = hook_export_clients,
		.export_claim = hook_export_claim,
		.moves_changed = hook_moves_changed,
		.notice = hook_notice,
	};
	r = cwc_server_new(&o, pool, &svc->srv);
	if (r < 0) {
		cwd_log(LOG_ERR, "cannot create the control socket %s%s: %s", cfg->control_socket,
			cfg->metrics.n ? " or the metrics listeners" : "", strerror(-r));
		svc_free(svc);
		return r;
	}
	*ret_ctl = svc;
	return 0;
}

int svc_exports(struct svc *svc, bool all, size_t *ret_listed, size_t *ret_unserved)
{
	_cleanup_free_ struct cw_part_info *parts = NULL;
	const struct cwc_export *ex;
	size_t n = 0, nx;
	int r;

	/* The ublk devices the configuration names first: exports.all then
	 * leaves those partitions be (an export of the name exists). */
	for (size_t i = 0; i < svc->cfg->exports.n_ublk; i++) {
		char msg[512] = "";

		r = cwc_server_export_part_ublk(svc->srv, svc->cfg->exports.ublk[i],
						svc->cfg->exports.ublk_queue_depth,
						svc->cfg->exports.ublk_max_request_bytes, msg,
						sizeof(msg));
		if (r == -ENOMEM)
			return r;
		if (r < 0)
			cwd_log(LOG_WARNING, "partition %s is not exported as a ublk device: %s",
				svc->cfg->exports.ublk[i], msg[0] ? msg : "unknown error");
	}
	r = all ? cw_part_list(svc->pb->pool, &parts, &n) : 0;
	if (r < 0)
		return r;
	/* Through the server, so that it lists (and stores) them. */
	for (size_t i = 0; i < n; i++) {
		char msg[512] = "";

		r = cwc_server_export_part(svc->srv, parts[i].name, msg, sizeof(msg));
		if (r == -ENOMEM)
			return r;
		if (r < 0)
			cwd_log(LOG_WARNING, "partition %s is not exported: %s", parts[i].name,
				msg[0] ? msg : "unknown error");
	}
	/* What export list shows: the stored exports and those just made;
	 * one whose partition has a block on a missing disk is listed, not
	 * served (the data path said so when it was loaded). */
	ex = cwc_server_exports(svc->srv, &nx);
	*ret_listed = nx;
	*ret_unserved = 0;
	for (size_t i = 0; i < nx; i++)
		*ret_unserved += !find_export(svc->pb, ex[i].name);
	return 0;
}

int svc_start(struct svc *svc)
{
	struct svc_ublk *u, *next;
	int r;

	/* The ublk exports stored in the pool, now that requests are served:
	 * one that cannot be made is listed, not served (logged). */
	svc->path_started = true;
	for (u = svc->ublks; u; u = next) {
		char err[512] = "";

		next = u->next;
		if (u->dev || ublk_start(svc, u, err, sizeof(err)) == 0)
			continue;
		ublk_unlink(svc, u);
		drop_export(svc->pb, u->ne.backend);
		free(u);
	}
	r = -pthread_create(&svc->thread, NULL, svc_main, svc);

	if (r == 0) {
		thread_name(svc->thread, "cw-control");
		svc->running = true;
	}
	return r;
}

void svc_log_stats(struct svc *svc, struct pb *pb)
{
	if (svc)
		pthread_mutex_lock(&svc->lock);
	pb_log_stats(pb);
	if (svc)
		pthread_mutex_unlock(&svc->lock);
}

void svc_free(struct svc *svc)
{
	if (!svc)
		return;
	if (svc->running) {
		cwc_server_stop(svc->srv);
		pthread_join(svc->thread, NULL);
	}
	/* The devices go before the data path they send to. */
	while (svc->ublks) {
		struct svc_ublk *u = svc->ublks;

		svc->ublks = u->next;
		ublk_dev_free(u->dev);
		drop_export(svc->pb, u->ne.backend);
		free(u);
	}
	cwc_server_free(svc->srv);
	pthread_mutex_destroy(&svc->lock);
	free(svc);
}
