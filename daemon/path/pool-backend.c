/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The data path of clockwised (Bosch & Mullender, section 3): NBD
 * request -> partition block map -> one piece per disk run -> the lane's
 * slot record -> its dispatcher -> the policy -> the I/O engine.
 *
 * This file is the NBD back end of a pool (its ops, and an export's
 * descriptor for the NBD server), the set-up and teardown of the whole,
 * the admission state's events and the counters.  The rest, each file
 * calling only files further down this list:
 *
 *   pool-mover.c, pool-cache.c, pool-ownio.c   the mover's copies
 *   pool-disk.c     a disk opened, its lanes and dispatchers started
 *   pool-alloc.c    the keeper of holes
 *   submit.c        a request split into pieces, booked in the lanes
 *   pool-export.c   an export's disks, best-effort clients, reservation
 *   lane.c          intake, dispatch and completion (lane-beq.c: the
 *                   best-effort order; lane-miss.c: misses explained)
 *   preq.c          a request's memory and its end
 *
 * Submission takes no mutex.  The connection thread maps the request with
 * the lock-free cw_part_map(), then books every piece in its lane's slot
 * reservation record (see "intake" in lane.c) and wakes the lane only if it
 * sleeps.  The dispatcher takes the committed bookings in slot order (or,
 * on an idle lane without streams, the reader itself: see lane.c).
 *
 * Dispatch.  A disk that carries admitted streams runs the scheduling core
 * (cw_sched: ΔL, EDF or LST) on its first lane with one request in service,
 * because the admission test models a non-preemptive single server: RT
 * pieces get from it release = max(arrival, the stream's last release +
 * T) and deadline = release + T, the policy decides when BE pieces may run.  A disk without
 * streams has no deadline to protect; every policy then serves BE in
 * arrival order, so its lanes keep queue_depth requests in flight each.
 *
 * Completion.  The last piece of a request to finish completes it (one
 * atomic decrement); a FUA write then runs a second phase, an fdatasync on
 * every disk it touched, before the reply (lane.c), and the request ends
 * below the lanes (preq.c).  FLUSH is an fdatasync on every disk of the
 * partition.
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>

#include "daemon/path/pool-internal.h"

/* For an export served partially: whether the block at off is on a
 * disk the data path does not have, and in *ret_len how many bytes from
 * off, at most len, are in the same state. */
static bool missing_run(struct pbx *x, uint64_t off, uint64_t len, uint64_t *ret_len)
{
	uint64_t bs = x->pb->block_size, at = off;
	bool first = false;

	for (;;) {
		uint32_t id;
		bool m = cw_part_block_disks(x->part, at / bs, 1, &id) < 0 ||
			 pb_disk_index(x->pb, id) < 0;

		if (at == off)
			first = m;
		else if (m != first)
			break;
		at = (at / bs + 1) * bs;
		if (at >= off + len)
			break;
	}
	*ret_len = CW_MIN(at, off + len) - off;
	return first;
}

/* Whether a request on [off, off + len) touches a missing block: it
 * fails whole with EIO, before anything is read or written. */
static bool touches_missing(struct pbx *x, uint64_t off, uint64_t len)
{
	uint64_t run;

	return x->missing && len && (missing_run(x, off, len, &run) || run < len);
}

static int pb_pread(void *backend, struct nbdsrv_io *io)
{
	if (touches_missing(backend, io->offset, io->length))
		return -EIO;
	return pb_submit_rw(backend, io, CW_IO_READ, false);
}

/* A write to blocks that all hold data goes to the lanes; one that
 * touches a hole first has the hole made a written block (pool-alloc.c). */
static int pb_pwrite(void *backend, struct nbdsrv_io *io)
{
	struct pbx *x = backend;

	if (touches_missing(x, io->offset, io->length))
		return -EIO;
	if (!pb_range_written(x, io->offset, io->length))
		return pb_alloc_queue(x, io);
	return pb_submit_rw(x, io, CW_IO_WRITE, false);
}

/* WRITE_ZEROES: with NO_HOLE, zeros are written (into blocks made
 * written first); without, whole blocks become holes and the partial
 * ones are punched or written.  FAST_ZERO refuses what needs writing. */
static int pb_zero(void *backend, struct nbdsrv_io *io)
{
	struct pbx *x = backend;

	if (touches_missing(x, io->offset, io->length))
		return -EIO;
	if (io->fast_zero &&
	    (!io->may_trim || !atomic_load_explicit(&x->can_punch, memory_order_relaxed)))
		return -ENOTSUP;
	if (!io->may_trim && pb_range_written(x, io->offset, io->length))
		return pb_submit_rw(x, io, CW_IO_WRITE, true);
	return pb_alloc_queue(x, io);
}

static int pb_flush(void *backend, struct nbdsrv_io *nio)
{
	return pb_submit_flush(backend, nio);
}

/* TRIM: the whole blocks it covers become holes and give their space
 * back to the disk where it can punch (the blocks stay the partition's);
 * the partial ones are punched where the disk can. */
static int pb_trim(void *backend, struct nbdsrv_io *io)
{
	if (touches_missing(backend, io->offset, io->length))
		return -EIO;
	return pb_alloc_queue(backend, io);
}

/* CACHE: a hint.  A disk read through the page cache (one O_DIRECT
 * refused) is asked to read ahead the range's written blocks; a direct
 * disk has no cache of ours to fill, and the SSD tier's part (promoting
 * the range) belongs to the mover.  Holes need nothing. */
static int pb_cache(void *backend, struct nbdsrv_io *io)
{
	struct pbx *x = backend;
	uint64_t off = io->offset, end = off + io->length, run;
	int r;

	if (touches_missing(x, off, io->length))
		return -EIO;
	while (off < end) {
		r = cw_part_allocated(x->part, off, end - off, &run);
		if (r < 0)
			return r;
		for (uint64_t at = off; r == 1 && at < off + run;) {
			struct cw_extent e;
			int di;

			if (cw_part_map(x->part, at, off + run - at, &e) < 0)
				break;
			di = pb_disk_index(x->pb, e.disk_id);
			if (di >= 0 && !x->pb->disks[di].direct)
				(void)posix_fadvise(x->pb->disks[di].fd, (off_t)e.phys_offset,
						    (off_t)e.length, POSIX_FADV_WILLNEED);
			at += e.length;
		}
		off += run;
	}
	nbdsrv_io_complete(io, 0);
	return 0;
}

/* BLOCK_STATUS for base:allocation: the runs of written blocks and holes,
 * from the hole bits (no disk access, no lock).  A block on a missing
 * disk (an export served partially) is neither data nor zeros: a hole
 * whose contents are not known, which a copying client reads (and gets
 * EIO) rather than skips. */
static int pb_block_status(void *backend, struct nbdsrv_io *io)
{
	struct pbx *x = backend;
	struct cw_nbd_extent *ext = io->buf;
	uint32_t max = io->req_one ? 1 : NBD_EXTENTS_MAX, n = 0;
	uint64_t off = io->offset, end = off + io->length, run;

	while (off < end && n < max) {
		int r = cw_part_allocated(x->part, off, end - off, &run);

		bool missing = false;

		if (r < 0)
			return r;
		if (x->missing)
			missing = missing_run(x, off, run, &run);
		ext[n++] = (struct cw_nbd_extent){
			.length = (uint32_t)run,
			.status = missing ? CW_NBD_STATE_HOLE
				  : r ? 0 : CW_NBD_STATE_HOLE | CW_NBD_STATE_ZERO,
		};
		off += run;
	}
	io->n_extents = n;
	nbdsrv_io_complete(io, 0);
	return 0;
}

static void pb_unplug(void *backend)
{
	(void)backend;
	lane_unplug();
}

/* Called on the connection's own thread, which the server then raises to
 * this priority: it also goes to the real-time CPUs, if set. */
static int pb_rt_priority(void *backend)
{
	struct pbx *x = backend;

	if (!x->resv)
		return 0;
	/* Tried here too, so a refusal is noted for the guarantee. */
	(void)pb_thread_realtime(x->pb, 0);
	return (int)x->pb->cfg->rt_priority;
}

/* The reader of a connection asks now and then: one that holds the
 * export's real-time priority spends what its stream was admitted for. */
static uint64_t pb_cpu_budget(void *backend, bool rt, struct cw_host_model *ret_model)
{
	struct pbx *x = backend;

	return pb_host_budget(x->pb, rt ? x->resv : NULL, ret_model);
}

/* A read's holes, from the hole bits (no lock): read as zeros by the
 * connection's reader, no disk's time. */
static uint64_t pb_diskless_bytes(void *backend, uint64_t off, uint64_t len)
{
	struct pbx *x = backend;
	uint64_t end = off + len, n = 0, run;

	while (off < end) {
		int r = cw_part_allocated(x->part, off, end - off, &run);

		if (r < 0 || run == 0)
			return n + (end - off);
		if (r == 0)
			n += run;
		off += run;
	}
	return n;
}

void pb_guarantee_lacks(struct pb *pb, unsigned cond)
{
	atomic_fetch_or(&pb->conditions, cond);
}

void pb_guarantee(struct pb *pb, char *buf, size_t len)
{
	unsigned c = atomic_load(&pb->conditions);
	size_t at = 0;

	buf[0] = 0;
	if (c & PB_COND_RT)
		at += (size_t)snprintf(buf + at, len - at, "%sdispatchers of disks with streams at "
				       "normal priority", at ? "; " : "");
	if (c & PB_COND_MLOCK && at < len)
		at += (size_t)snprintf(buf + at, len - at, "%smemory not locked (it may be paged "
				       "out)", at ? "; " : "");
	if (c & PB_COND_CPUS && at < len)
		snprintf(buf + at, len - at, "%srt_cpus refused", at ? "; " : "");
}

/* The reply of an RT request done in time left late: a delivery miss of
 * its reservation (the export's binding cannot go while its connections
 * have requests in flight). */
static void pb_reply_late(void *backend, const struct nbdsrv_io *io,
			  const struct nbdsrv_late *late)
{
	struct pbx *x = backend;

	if (io->backend_data && x->resv)
		lane_miss_reply_late(io->backend_data, x->resv, io->deadline_ns, io->ready_ns,
				     late->began_ns, late->sent_ns, late->cpu_wait_ns);
}

static const struct nbdsrv_backend_ops pb_ops = {
	.rt_priority = pb_rt_priority,
	.cpu_budget = pb_cpu_budget,
	.diskless_bytes = pb_diskless_bytes,
	.reply_late = pb_reply_late,
	.pread = pb_pread,
	.pwrite = pb_pwrite,
	.flush = pb_flush,
	.trim = pb_trim,
	.zero = pb_zero,
	.cache = pb_cache,
	.block_status = pb_block_status,
	.unplug = pb_unplug,
};

int pb_export(struct pb *pb, struct cw_part *part, struct nbdsrv_export *ret_exp)
{
	uint64_t size;
	bool rotational;
	struct pbx *x;
	int r;

	r = pb_export_new(pb, part, &size, &rotational, &x);
	if (r < 0)
		return r;
	*ret_exp = (struct nbdsrv_export){
		.name = x->name,
		.description = x->description,
		.size = size,
		.read_only = pb->cfg->exports.read_only,
		.flush_global = pb->cfg->exports.multi_conn,
		.rotational = rotational,
		.fast_zero = true,	/* pb_zero refuses a zero it cannot make fast */
		.min_block = (uint32_t)x->align,
		.pref_block = CW_MAX(pb->cfg->exports.block_size, (uint32_t)x->align),
		.max_block = pb->cfg->exports.max_request_bytes,
		/* Every export of the partition reaches the same blocks. */
		.data_key = part,
		.ops = &pb_ops,
		.backend = x,
	};
	return 0;
}

/* ---- setup ---- */

/* The stall probes run while a reservation exists: only a deadline's
 * miss needs them (the caller holds resv_lock). */
static void probes_arm_locked(struct pb *pb)
{
	bool any = false;

	for (size_t i = 0; i < pb->nresvs && !any; i++)
		any = pb->resvs[i] != NULL;
	stall_probe_arm(pb->probe, any);
}

static int resv_add(struct pb *pb, const struct cw_admit_resv *a)
{
	struct resv *rv = calloc(1, sizeof(*rv));
	size_t slot;

	if (!rv)
		return -ENOMEM;
	rv->a = a;
	atomic_flag_clear(&rv->short_told);
	pthread_mutex_lock(&pb->resv_lock);
	for (slot = 0; slot < pb->nresvs && pb->resvs[slot]; slot++)
		;
	if (slot == pb->nresvs) {
		struct resv **v = slot < PB_RESV_MAX ?
				  realloc(pb->resvs, (slot + 1) * sizeof(*v)) : NULL;

		if (!v) {
			pthread_mutex_unlock(&pb->resv_lock);
			free(rv);
			return slot < PB_RESV_MAX ? -ENOMEM : -ENOSPC;
		}
		pb->resvs = v;
		pb->nresvs++;
	}
	rv->idx = slot;
	pb->resvs[slot] = rv;
	probes_arm_locked(pb);
	pthread_mutex_unlock(&pb->resv_lock);
	return 0;
}

int pb_new(struct cw_pool *pool, struct cw_admit_state *adm, const struct cwd_config *cfg,
	   struct pb **ret_pb)
{
	struct cw_disk_info *infos = NULL;
	struct pb *pb;
	size_t n, i, j;
	int r;

	pb = calloc(1, sizeof(*pb));
	if (!pb)
		return -ENOMEM;
	pb->pool = pool;
	pb->adm = adm;
	pthread_mutex_init(&pb->resv_lock, NULL);
	pthread_mutex_init(&pb->xdisks_lock, NULL);
	pthread_mutex_init(&pb->exports_lock, NULL);
	pb->cfg = cfg;
	pb->block_size = cw_pool_block_size(pool);
	pb->start_ns = cw_now_ns();
	for (i = 0; i <= CW_DISKS_MAX; i++)
		atomic_init(&pb->slot_of[i], -1);
	pb_thread_ctx_init_once();
	{
		struct cw_slots_domain_opts dopts = { .size = sizeof(dopts),
						      .mode = CW_SLOTS_LOCKFREE,
						      .max_threads = SLOTS_THREADS,
						      .max_window = SLOTS_WINDOW };

		r = cw_slots_domain_new(&dopts, &pb->domain);
		if (r < 0) {
			free(pb);
			return r;
		}
	}
	pb->zeros = cw_io_alloc(ZERO_CHUNK);
	if (!pb->zeros) {
		cw_slots_domain_free(pb->domain);
		free(pb);
		return -ENOMEM;
	}
	memset(pb->zeros, 0, ZERO_CHUNK);
	/* The reservations admitted before the data path existed. */
	for (i = 0; cw_admit_state_resv_at(adm, i); i++) {
		r = resv_add(pb, cw_admit_state_resv_at(adm, i));
		if (r < 0)
			goto fail;
	}
	r = cw_disk_list(pool, &infos, &n);
	if (r < 0)
		goto fail;
	pb->disks = calloc(PB_DISKS_CAP, sizeof(*pb->disks));
	if (!pb->disks) {
		r = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < n; i++) {
		pb->disks[i].fd = -1;
		pb->ndisks = i + 1;
		r = pb_disk_open(pb, &pb->disks[i], &infos[i]);
		if (r < 0)
			goto fail;
		pb_disk_publish(pb, i);
	}
	pb_mirror_missing(pb);
	for (i = 0; i < cfg->n_disks; i++) {
		for (j = 0; j < n; j++)
			if (strcmp(cfg->disks[i].name, infos[j].name) == 0)
				break;
		if (j == n)
			cwd_log(LOG_WARNING, "%s:%u: disk %s (%s) is not in the pool", cfg->file,
				cfg->disks[i].line, cfg->disks[i].name, cfg->disks[i].path);
	}
	free(infos);
	*ret_pb = pb;
	return 0;
fail:
	free(infos);
	pb_free(pb);
	return r;
}

/* The stall probes, above every thread of the daemon (the dispatchers
 * run at rt_priority + 1), where the daemon may use real-time priority. */
static void stall_probe_begin(struct pb *pb)
{
	const struct cwd_config *cfg = pb->cfg;
	char err[160];
	int r;

	if (!cfg->stall_probe_us || !cfg->rt_priority)
		return;
	r = stall_probe_start((int64_t)cfg->stall_probe_us * 1000,
			      (int)CW_MIN(cfg->rt_priority + 2, 99u), cfg->rt_cpus, &pb->probe, err,
			      sizeof(err));
	if (r < 0) {
		cwd_log(LOG_NOTICE, "no stall probes (%s): a miss whose thread waited for a CPU "
			"cannot say whether the host held every thread off it", err);
		return;
	}
	pthread_mutex_lock(&pb->resv_lock);
	probes_arm_locked(pb);
	pthread_mutex_unlock(&pb->resv_lock);
}

int pb_start(struct pb *pb)
{
	size_t i;
	int r;

	for (i = 0; i < pb->ndisks; i++) {
		r = pb_disk_start(pb, &pb->disks[i]);
		if (r < 0)
			return r;
	}
	r = pb_alloc_start(pb);
	if (r < 0)
		return r;
	r = pb_mover_start(pb);
	if (r < 0)
		return r;
	pb_host_publish(pb);
	stall_probe_begin(pb);
	pb->started = true;
	return 0;
}

/* ---- admission events (the control thread, or main before start) ---- */

/* Released: the control server refuses while an export is bound to it,
 * and an export's removal waited for its requests, so nothing in flight
 * points at it. */
static void resv_drop(struct pb *pb, const struct cw_admit_resv *a)
{
	pthread_mutex_lock(&pb->resv_lock);
	for (size_t i = 0; i < pb->nresvs; i++)
		if (pb->resvs[i] && pb->resvs[i]->a == a) {
			for (struct pbx *x = pb->exports; x; x = x->next)
				if (x->resv == pb->resvs[i])
					x->resv = NULL;
			pb_host_resv_gone(pb, pb->resvs[i]);
			free(pb->resvs[i]);
			pb->resvs[i] = NULL;
		}
	probes_arm_locked(pb);
	pthread_mutex_unlock(&pb->resv_lock);
}

/* A disk's new plan reaches its first lane's dispatcher; its model the
 * threads that book on it. */
static void plan_changed(struct pb *pb, const struct cw_admit_event *ev)
{
	int di = pb_disk_index(pb, ev->disk_id);
	struct lane_plan *pl;
	struct disk *d;

	if (di < 0)
		return;	/* not open: it takes its plan when it is */
	d = &pb->disks[di];
	if (memcmp(disk_model(d), ev->model, sizeof(*ev->model)) != 0) {
		char text[4096];

		if (pb_disk_set_model(d, ev->model) < 0)
			cwd_log(LOG_ERR, "disk %s: out of memory for its new model", d->name);
		else if (cw_model_format(ev->model, text, sizeof(text)) > 0)
			cwd_log(LOG_NOTICE, "disk %s: new model: %s", d->name, text);
	}
	if (ev->plan->n_tasks)
		atomic_store(&d->live_streams, true);
	if (!atomic_load(&d->live_streams))
		return;
	if (ev->plan->be_starved && ev->plan->n_tasks)
		cwd_log(LOG_WARNING, "disk %s: its streams leave best-effort pieces of %" PRId64
			" us no room (server slice %" PRId64 " us): they fail", d->name,
			ev->plan->be_max_ns / 1000, ev->plan->server_slice_ns / 1000);
	cwd_log(LOG_INFO, "disk %s: %zu stream part%s, policy %s, best-effort slack %" PRId64
		" us, server %" PRId64 " us every %" PRId64 " ms", d->name, ev->plan->n_tasks,
		ev->plan->n_tasks == 1 ? "" : "s", cw_sched_policy_name(d->policy),
		ev->plan->n_tasks ? no_limit(ev->plan->be_budget_ns) / 1000 : 0,
		ev->plan->server_slice_ns / 1000, ev->plan->server_period_ns / CW_NS_PER_MS);
	if (!d->lanes[0].started)
		return;	/* pb_disk_start takes the plan */
	pl = lane_plan_new(pb, d, ev->plan);
	if (!pl) {
		cwd_log(LOG_ERR, "disk %s: out of memory for its new plan", d->name);
		return;
	}
	lane_post_plan(&d->lanes[0], pl);
}

/* The margin a disk's overrun watch proposed: the model's margin grows
 * by that factor (to at most MARGIN_MAX_PPM) and every stream is admitted
 * again; if one no longer fits, the model stays and the disk gives best
 * effort no more slack, so the overruns cost best effort, not deadlines. */
static void raise_margin(struct pb *pb, struct disk *d, uint64_t proposal_ppm)
{
	struct cw_admit_refusal why;
	enum cw_admit_model_source src;
	struct cw_disk_plan plan;
	struct lane_plan *pl;
	struct cw_model m;
	uint32_t ppm;
	bool taken = false;
	int r;

	if (cw_admit_state_get_model(pb->adm, d->id, &m, &src) < 0)
		return;
	ppm = cw_sched_margin_raise(m.margin_ppm, 1.0 + proposal_ppm / 1e6);
	if (ppm <= m.margin_ppm)
		return;
	cwd_log(LOG_WARNING, "disk %s: its requests keep taking longer than its model says (up to "
		"%.2f times their charge): raising its margin from %u%% to %u%%", d->name,
		1.0 + proposal_ppm / 1e6, m.margin_ppm / 10000, ppm / 10000);
	m.margin_ppm = ppm;
	r = cw_admit_state_set_model(pb->adm, d->id, &m, src, &taken, &why, NULL);
	if (r == 0 && taken)
		return;	/* the new plan reaches the lane by its event */
	cwd_log(LOG_WARNING, "disk %s: the larger margin does not fit its streams (%s): the model "
		"stays and best effort runs on this disk only when no stream waits", d->name,
		r == -EBUSY ? why.reason : strerror(-r));
	atomic_store(&d->no_slack, true);
	if (cw_admit_state_plan(pb->adm, d->id, &plan) < 0 || !d->lanes[0].started)
		return;
	pl = lane_plan_new(pb, d, &plan);
	if (pl)
		lane_post_plan(&d->lanes[0], pl);
}

/* The longest stall of the host since the last tick, said when it is
 * long enough to matter to a stream (a real machine has none). */
static void host_stalls_log(struct pb *pb)
{
	uint64_t n;
	int cpu;
	int64_t worst = stall_probe_worst_since(pb->probe, &cpu, &n);

	if (worst >= HOST_STALL_LOG_NS)
		cwd_log(LOG_NOTICE, "host: CPU %d ran no thread below real-time priority %d for "
			"%.0f us (%" PRIu64 " stalls over %d ms since the last look): another "
			"process's real-time thread, the kernel (one built without preemption "
			"ends a system call before it switches) or the hypervisor held it; the "
			"streams' threads wait for such a stall too", cpu,
			stall_probe_priority(pb->probe), (double)worst / 1000.0, n,
			STALL_PROBE_MIN_NS / 1000000);
}

void pb_misses_tick(struct pb *pb)
{
	for (size_t i = 0; i < pb->ndisks; i++) {
		struct disk *d = &pb->disks[i];
		uint64_t ppm;

		if (d->fd < 0 || !d->lanes)
			continue;
		for (unsigned j = 0; j < d->nlanes; j++)
			lane_miss_drain(&d->lanes[j]);
		ppm = atomic_exchange(&d->margin_proposal_ppm, 0);
		if (ppm && !atomic_load(&d->no_slack))
			raise_margin(pb, d, ppm);
	}
	host_stalls_log(pb);
}

void pb_admit_event(void *userdata, const struct cw_admit_event *ev)
{
	struct pb *pb = userdata;
	int r;

	switch (ev->kind) {
	case CW_ADMIT_EV_PLAN:
		plan_changed(pb, ev);
		break;
	case CW_ADMIT_EV_RESV_ADDED:
		r = resv_add(pb, ev->resv);
		if (r < 0)
			cwd_log(LOG_ERR, "reservation %" PRIu64 " on %s: the data path cannot take "
				"it: %s (its requests stay best-effort)", ev->resv->id,
				ev->resv->part, strerror(-r));
		break;
	case CW_ADMIT_EV_RESV_RELEASED:
		resv_drop(pb, ev->resv);
		break;
	case CW_ADMIT_EV_BE_SET:
	case CW_ADMIT_EV_BE_CLEARED:
		pb_export_be_event(pb, ev->be, ev->kind == CW_ADMIT_EV_BE_SET);
		break;
	}
}

void pb_log_stats(struct pb *pb)
{
	char what[CW_NAME_MAX + 32];
	size_t i, j;

	for (i = 0; i < pb->ndisks; i++)
		for (j = 0; j < pb->disks[i].nlanes; j++) {
			if (pb->disks[i].fd < 0)
				continue;
			snprintf(what, sizeof(what), "disk %s lane %zu", pb->disks[i].name, j);
			cwd_stats_log(what, &pb->disks[i].lanes[j].st);
		}
	for (i = 0; i < pb->ndisks; i++) {
		struct cw_io_emu_stats es;

		if (pb->disks[i].fd < 0 || !pb->disks[i].emulate)
			continue;
		pb_disk_emu_stats(&pb->disks[i], &es);
		cwd_log(LOG_INFO, "disk %s emulating %s: %" PRIu64 " requests, busy %" PRId64
			" ms, late by %" PRId64 " us on average and %" PRId64 " us at most, %"
			PRIu64 " late beyond 1 ms", pb->disks[i].name, pb->disks[i].emulate->name,
			es.requests, es.busy_ns / CW_NS_PER_MS,
			es.requests ? es.late_sum_ns / (int64_t)es.requests / 1000 : 0,
			es.late_max_ns / 1000, es.late);
	}
	pthread_mutex_lock(&pb->resv_lock);
	for (i = 0; i < pb->nresvs; i++) {
		const struct resv *rv = pb->resvs[i];

		if (!rv)
			continue;	/* released */
		if (rv->a->persistent)
			snprintf(what, sizeof(what), "reservation %" PRIu64, rv->a->id);
		else
			snprintf(what, sizeof(what), "reservation %s", rv->a->export_name);
		cwd_stats_log(what, &rv->st);
	}
	pthread_mutex_unlock(&pb->resv_lock);
	for (const struct pbx *x = pb->exports; x; x = x->next)
		for (const struct pbx_client *c = &x->main; c; c = atomic_load(&c->next))
			cwd_log(LOG_INFO, "stats export %s: be_requests=%" PRIu64 " be_bytes=%" PRIu64
				" be_disk_time_us=%" PRIu64 " be_for_reservation_us=%" PRIu64, c->name,
				(uint64_t)cwd_stats_get(&c->be_st.requests),
				(uint64_t)cwd_stats_get(&c->be_st.bytes),
				(uint64_t)cwd_stats_get(&c->be_st.cost_ns) / 1000,
				(uint64_t)cwd_stats_get(&c->be_st.resv_ns) / 1000);
}

void pb_free(struct pb *pb)
{
	struct pbx *x, *next;
	size_t i;

	if (!pb)
		return;
	pb_mover_stop(pb);
	pb_alloc_stop(pb);
	for (i = 0; i < pb->ndisks; i++)
		pb_disk_stop(&pb->disks[i]);
	/* The misses since the last tick, each logged once (the log's promise). */
	for (i = 0; i < pb->ndisks; i++)
		for (unsigned j = 0; pb->disks[i].lanes && j < pb->disks[i].nlanes; j++)
			lane_miss_drain(&pb->disks[i].lanes[j]);
	stall_probe_stop(pb->probe);
	pb->probe = NULL;
	free(pb->mover_x);	/* its last requests are done: the lanes stopped */
	pb->mover_x = NULL;
	for (i = 0; pb->disks && i < pb->ndisks; i++)
		pb_disk_close(&pb->disks[i]);
	for (x = pb->exports; x; x = next) {
		next = x->next;
		pb_export_free(x);
	}
	for (i = 0; i < pb->nresvs; i++)
		free(pb->resvs[i]);
	free(pb->resvs);
	pthread_mutex_destroy(&pb->resv_lock);
	pthread_mutex_destroy(&pb->xdisks_lock);
	pthread_mutex_destroy(&pb->exports_lock);
	free(pb->disks);
	free(pb->zeros);
	/* Connection threads free their descriptors as they exit, which can
	 * be just after the NBD server saw them finish. */
	while (atomic_load(&pb->live_ctx))
		sched_yield();
	for (struct preq *q = atomic_exchange(&pb->spare, NULL), *qn; q; q = qn) {
		qn = q->next_spare;
		free(q);
	}
	cw_slots_domain_free(pb->domain);
	free(pb);
}
