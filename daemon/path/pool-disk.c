/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The disks of the data path: a disk of the pool opened (its model, its
 * emulation, the fence against a dead daemon's writes in flight, the
 * device it lies on), its lanes and slot records set up, its dispatchers
 * and scheduling core started and stopped, and a disk added or removed
 * while the daemon runs (control thread).  A disk's slot is published
 * to the I/O threads (pb_disk_index) only once it is ready.
 */
#include "config.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "daemon/path/pool-internal.h"
#include "daemon/thread-name.h"

static const char *const state_names[] = {
	[CW_DISK_PRESENT] = "present",
	[CW_DISK_MISSING] = "missing",
	[CW_DISK_WRONG_LABEL] = "holds another disk or no label",
	[CW_DISK_BAD_LABEL] = "has a corrupt label",
	[CW_DISK_SHRUNK] = "shrank (a file truncated?)",
};

/* Makes m the disk's model (a copy): what the sizes of its bookings and
 * the service of its BE pieces are estimated with from now on. */
int pb_disk_set_model(struct disk *d, const struct cw_model *m)
{
	struct disk_model *dm = calloc(1, sizeof(*dm));

	if (!dm)
		return -ENOMEM;
	dm->m = *m;
	dm->older = atomic_load_explicit(&d->model, memory_order_relaxed);
	atomic_store_explicit(&d->model, dm, memory_order_release);
	return 0;
}

static const char *const model_from[] = {
	[CW_ADMIT_MODEL_PRESET] = "the tier's preset",
	[CW_ADMIT_MODEL_CONFIG] = "the configuration",
	[CW_ADMIT_MODEL_STORED] = "the pool",
	[CW_ADMIT_MODEL_CALIBRATED] = "its calibration",
};

/* The model and plan admission holds for the disk (clockwise/admit-state.h:
 * a stored model outranks the configuration's, which outranks the tier's
 * preset). */
static int disk_first_model(struct pb *pb, struct disk *d)
{
	enum cw_admit_model_source src;
	struct cw_disk_plan plan;
	const char *from;
	struct cw_model m;
	int r;

	r = cw_admit_state_get_model(pb->adm, d->id, &m, &src);
	if (r == 0)
		r = cw_admit_state_plan(pb->adm, d->id, &plan);
	if (r == 0)
		r = pb_disk_set_model(d, &m);
	if (r < 0) {
		cwd_log(LOG_ERR, "disk %s: no model: %s", d->name, strerror(-r));
		return r;
	}
	from = model_from[src];
	if (src == CW_ADMIT_MODEL_CONFIG && d->emulate && !strcmp(m.name, d->emulate->name))
		from = "the disk it emulates";
	d->be_piece = (uint32_t)plan.be_piece_bytes;
	atomic_store(&d->live_streams, plan.n_tasks > 0);
	cwd_log(LOG_INFO, "disk %s: model from %s; a best-effort piece (%" PRIu32 " KiB at "
		"most) takes %" PRId64 " us at worst; reserved for best effort: one every %"
		PRId64 " ms", d->name, from, d->be_piece >> 10, plan.be_max_ns / 1000,
		plan.be_reserve.period_ns / CW_NS_PER_MS);
	return 0;
}

/* The model the disk emulates: the configuration's (stored in the pool,
 * which cwctl status reads) or the one stored with cwctl disk add. */
static int disk_emulated(struct pb *pb, struct disk *d, const struct cwd_config_disk *cd)
{
	struct cw_model m;
	int r;

	if (cd && cd->emulate) {
		m = *cd->emulate;
		r = cw_disk_emulate_set(pb->pool, d->id, &m);
	} else {
		r = cw_disk_emulate_get(pb->pool, d->id, &m);
		if (r == -ENOENT)
			return 0;
	}
	if (r < 0) {
		cwd_log(LOG_ERR, "disk %s: %s", d->name, cw_pool_last_error(pb->pool)->msg);
		return r;
	}
	d->emulate = malloc(sizeof(*d->emulate));
	if (!d->emulate)
		return -ENOMEM;
	*d->emulate = m;
	/* one emulated disk, one engine keeping its time */
	d->nlanes = 1;
	return 0;
}

/* How long a disk's open waits for the I/O of a daemon before it. */
#define FENCE_WAIT_S 60

/*
 * A daemon killed with -9 may leave writes in flight in the kernel: the
 * teardown of an io_uring may run after its process is gone, and a
 * request punted to a kernel worker ends when it ends.  Such a write was
 * never acknowledged, so it may land or not; but landing after this
 * daemon served the block, it would change data under a client that read
 * it, and a move could copy it on.  Each request in flight holds a
 * reference to the file the dead daemon opened, so the flock() that
 * daemon took on it lasts until its last request ended: the disk is taken
 * only once that lock can be had.  false: still held after FENCE_WAIT_S
 * (said; the disk is left out, like a missing one).
 */
static bool disk_fence(const struct disk *d)
{
	int64_t t0 = cw_now_ns(), waited;
	bool said = false;

	while (flock(d->fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK) {
			/* a file system without flock: nothing to wait for */
			cwd_log(LOG_DEBUG, "disk %s: no lock on %s: %s", d->name, d->path,
				strerror(errno));
			return true;
		}
		if (!said)
			cwd_log(LOG_NOTICE, "disk %s: %s is locked by another process, a daemon "
				"before this one perhaps, whose writes are still in flight: waiting "
				"for it (at most %d s)", d->name, d->path, FENCE_WAIT_S);
		said = true;
		if (cw_now_ns() - t0 > FENCE_WAIT_S * CW_NS_PER_S) {
			cwd_log(LOG_ERR, "disk %s: %s is still locked by another process after "
				"%d s; its partitions are not exported (fuser %s says which)",
				d->name, d->path, FENCE_WAIT_S, d->path);
			return false;
		}
		usleep(10000);
	}
	waited = cw_now_ns() - t0;
	if (said)
		cwd_log(LOG_NOTICE, "disk %s: the lock on %s came after %.0f ms", d->name,
			d->path, waited / 1e6);
	return true;
}

/* The whole disk a device number lies on: a partition's parent (from
 * sysfs), else dev itself; 0 for none (tmpfs, a network file system). */
static dev_t whole_device(dev_t dev)
{
	char path[64], buf[32];
	unsigned maj, min;
	ssize_t n;
	int dfd, fd;

	if (major(dev) == 0)
		return 0;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u", major(dev), minor(dev));
	/* the link's target, a directory: ".." from it is its parent */
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return dev;
	if (faccessat(dfd, "partition", F_OK, 0) != 0) {
		close(dfd);
		return dev;
	}
	fd = openat(dfd, "../dev", O_RDONLY | O_CLOEXEC);
	close(dfd);
	if (fd < 0)
		return dev;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return dev;
	buf[n] = '\0';
	if (sscanf(buf, "%u:%u", &maj, &min) != 2)
		return dev;
	return makedev(maj, min);
}

/* Admission books each disk's time as its own: two disks of the pool on
 * one device delay each other's requests by what neither was charged.
 * An emulated disk keeps its model's time and is left out. */
static void shared_device_warn(const struct pb *pb, const struct disk *d)
{
	if (!d->device || d->emulate)
		return;
	for (size_t i = 0; i < pb->ndisks; i++) {
		const struct disk *o = &pb->disks[i];

		if (o == d || o->fd < 0 || o->emulate || o->device != d->device)
			continue;
		cwd_log(LOG_WARNING, "disk %s: %s lies on the same device (%u:%u) as disk %s: "
			"the requests of one delay the other's, which admission does not book; "
			"a stream on either can miss its deadlines", d->name, d->path,
			major(d->device), minor(d->device), o->name);
		return;
	}
}

int pb_disk_open(struct pb *pb, struct disk *d, const struct cw_disk_info *info)
{
	const struct cwd_config *cfg = pb->cfg;
	const struct cwd_config_disk *cd = NULL;
	size_t i;
	int r;

	d->id = info->id;
	d->fd = -1;
	d->tier = info->tier;
	snprintf(d->name, sizeof(d->name), "%s", info->name);
	snprintf(d->path, sizeof(d->path), "%s", info->path);
	for (i = 0; i < cfg->n_disks; i++)
		if (strcmp(cfg->disks[i].name, info->name) == 0)
			cd = &cfg->disks[i];
	d->policy = (enum cw_sched_policy)(cd ? cd->policy : cfg->policy);
	d->be_order = cw_sched_beq_by_name(cwd_config_be_order_name(cd ? cd->be_order : cfg->be_order));
	d->nlanes = cd ? cd->lanes : cwd_config_default_lanes(info->tier);
	if (d->nlanes == 0)
		d->nlanes = 1;
	r = disk_emulated(pb, d, cd);
	if (r < 0)
		return r;
	d->fault = cd ? cd->fault : NULL;
	r = disk_first_model(pb, d);
	if (r < 0)
		return r;
	cw_sched_sfc_conf_init(&d->sfc);
	d->sfc.capacity_bytes = disk_model(d)->capacity_bytes;
	d->lanes = calloc(d->nlanes, sizeof(*d->lanes));
	if (!d->lanes)
		return -ENOMEM;
	for (i = 0; i < d->nlanes; i++) {
		struct cw_slots_opts so = { .size = sizeof(so), .tier = d->tier };
		struct lane *l = &d->lanes[i];

		l->pb = pb;
		l->disk = d;
		l->idx = (unsigned)i;
		so.slot_ns = cd ? cd->slot_ns : 0;
		r = cw_slots_new(pb->domain, &so, &l->rec);
		if (r < 0) {
			cwd_log(LOG_ERR, "disk %s: cannot set up its slot record: %s", d->name,
				strerror(-r));
			return r;
		}
		l->slot_ns = cw_slots_slot_ns(l->rec);
		for (unsigned h = 0; h < LANE_HOLDS; h++)
			atomic_init(&l->hold_at[h], INT64_MAX);
	}
	if (info->state == CW_DISK_SHRUNK) {
		cwd_log(LOG_ERR, "disk %s (%s) shrank: it is %" PRIu64 " bytes, its blocks need "
			"%" PRIu64 " (truncated?); its partitions are not exported, and nothing is "
			"written to it until the file is whole again", d->name, d->path,
			info->found_bytes, info->data_offset_bytes +
			info->data_blocks * cw_pool_block_size(pb->pool));
		return 0;
	}
	if (info->state != CW_DISK_PRESENT) {
		cwd_log(LOG_WARNING, "disk %s (%s) %s: %s", d->name, d->path,
			state_names[info->state], cfg->exports.partial ?
			"its partitions are served partially, its blocks failing with EIO" :
			"its partitions are not exported");
		return 0;
	}
	/* An image on a cluster shares the pool's connection and handle. */
	r = cw_io_open(info->path, !cfg->exports.read_only, &d->direct);
	if (r < 0) {
		/* Like a missing disk: its partitions wait, the rest are served. */
		cwd_log(LOG_ERR, "disk %s: cannot open %s: %s; its partitions are not exported",
			d->name, d->path, strerror(-r));
		return 0;
	}
	d->fd = r;
	if (cw_io_path_is_rbd(info->path) && !cfg->exports.read_only)
		pb_rbd_take_lock(pb, d);
	else if (!cw_io_path_is_rbd(info->path) && !disk_fence(d)) {
		cw_io_close(d->fd);
		d->fd = -1;
		return 0;
	}
	{
		struct stat st;

		d->regular = fstat(d->fd, &st) == 0 && S_ISREG(st.st_mode);
		d->need_bytes = info->data_offset_bytes +
				info->data_blocks * cw_pool_block_size(pb->pool);
		d->device = d->regular ? whole_device(st.st_dev) :
			    S_ISBLK(st.st_mode) ? whole_device(st.st_rdev) : 0;
	}
	shared_device_warn(pb, d);
	/* io_uring punts reads it cannot do without blocking to kernel
	 * workers: a file on tmpfs gets the memory engine (the copy done
	 * inline), one on another such file system libaio. */
	if (cw_io_kind_for_fd(d->fd, cfg->io_engine, &d->io_kind) < 0)
		d->io_kind = cfg->io_engine;
	d->can_punch = !cfg->exports.read_only && pb_disk_can_punch(d);
	d->poll_ns = d->io_kind == CW_IO_RBD ? POLL_NS_RBD : POLL_NS;
	r = cw_io_alignment(d->fd, &d->align);
	if (r < 0 || !d->direct)
		d->align = 512;
	cwd_log(LOG_INFO, "disk %s: %s, %s, policy %s, best effort %s, %u lane%s, %s %s I/O%s%s",
		d->name, d->path, cw_tier_name(d->tier), cw_sched_policy_name(d->policy),
		d->be_order ? d->be_order->name : "fifo", d->nlanes,
		d->nlanes == 1 ? "" : "s", d->direct ? "direct" : "buffered",
		cw_io_kind_name(d->io_kind), d->emulate ? ", emulating " : "",
		d->emulate ? d->emulate->name : "");
	if (d->fault)
		cwd_log(LOG_WARNING, "disk %s: its I/O goes through the fault-injecting engine "
			"(a testing feature: faults and power cuts as configured)", d->name);
	return 0;
}

/* Makes an opened disk's slot visible to the I/O threads. */
void pb_disk_publish(struct pb *pb, size_t di)
{
	if (pb->disks[di].fd >= 0)
		atomic_store_explicit(&pb->slot_of[pb->disks[di].id], (int)di,
				      memory_order_release);
}

/* A plan for disk d's first lane: the disk's plan and its streams. */
struct lane_plan *lane_plan_new(struct pb *pb, const struct disk *d,
			       const struct cw_disk_plan *plan)
{
	struct lane_plan *pl;

	pthread_mutex_lock(&pb->resv_lock);
	pl = malloc(sizeof(*pl) + pb->nresvs * sizeof(pl->streams[0]));
	if (pl) {
		pl->plan = *plan;
		/* A disk whose model no margin can save gives best effort
		 * no slack beside released streams (pb_misses_tick): it runs
		 * only on the idle disk, within the idle allowance. */
		if (atomic_load(&d->no_slack))
			pl->plan.be_budget_ns = 0;
		pl->n_streams = 0;
		for (size_t i = 0; i < pb->nresvs; i++) {
			const struct cw_admit_resv_part *pt = pb->resvs[i] ?
							       resv_part(pb->resvs[i], d->id) : NULL;

			if (pt)
				pl->streams[pl->n_streams++] = (struct cw_sched_stream){
					.id = pb->resvs[i]->a->stream,
					.period_ns = pt->task.period_ns,
					.service_ns = pt->task.service_ns,
					.deadline_ns = pt->task.deadline_ns,
				};
		}
	}
	pthread_mutex_unlock(&pb->resv_lock);
	return pl;
}

/* The scheduling core of a disk that carries streams when it starts. */
static int disk_sched(struct pb *pb, struct disk *d)
{
	struct cw_sched_opts o;
	struct cw_disk_plan pl;
	struct lane_plan *lp;
	int r;

	r = cw_admit_state_plan(pb->adm, d->id, &pl);
	if (r < 0)
		return r;
	cw_sched_opts_init(&o);
	o.policy = d->policy;
	o.delta_l_ns = no_limit(pl.be_budget_ns);
	o.idle_be_ns = no_limit(pl.idle_be_ns);
	o.server_slice_ns = pl.server_slice_ns;
	o.server_period_ns = pl.server_period_ns;
	o.beq = d->be_order;
	o.beq_conf = o.beq == cw_sched_beq_sfc() ? &d->sfc : NULL;
	o.guard_ns = pl.guard_ns;
	r = cw_sched_new(&o, &d->lanes[0].pl.sched);
	if (r < 0)
		return r;
	/* the lane declares the disk's streams to it before its first step */
	lp = lane_plan_new(pb, d, &pl);
	if (!lp)
		return -ENOMEM;
	lane_post_plan(&d->lanes[0], lp);
	return 0;
}

/* Starts the dispatchers of disk d: an I/O engine and a thread per lane,
 * and the scheduling core of a disk with streams. */
int pb_disk_start(struct pb *pb, struct disk *d)
{
	size_t j;
	int r;

	if (d->fd < 0)
		return 0;
	if (atomic_load(&d->live_streams)) {
		r = disk_sched(pb, d);
		if (r < 0)
			return r;
	}
	for (j = 0; j < d->nlanes; j++) {
		struct lane *l = &d->lanes[j];

		r = lane_beq_new(l);
		if (r < 0) {
			cwd_log(LOG_ERR, "disk %s: cannot set up its best-effort order: %s", d->name,
				strerror(-r));
			return r;
		}
		if (d->emulate) {
			struct cw_io_emu_opts eo;

			cw_io_emu_opts_init(&eo);
			cw_model_disk_opts_of(d->emulate, &eo.disk);	/* its channels, bus, ... */
			eo.inner = d->io_kind;
			r = cw_io_emu_new(d->emulate, &eo, pb->cfg->queue_depth, &l->eng);
		} else
			r = cw_io_engine_new(d->io_kind, pb->cfg->queue_depth, &l->eng);
		if (r == 0 && d->fault) {
			struct cw_io_engine *inner = l->eng;

			l->eng = NULL;	/* the fault engine owns it, even on failure */
			r = cw_io_fault_new(inner, d->fault, &l->eng);
		}
		if (r < 0) {
			cwd_log(LOG_ERR, "disk %s: cannot set up %s: %s", d->name,
				cw_io_kind_name(d->io_kind), strerror(-r));
			return r;
		}
		r = -pthread_create(&l->thread, NULL, lane_main, l);
		if (r < 0)
			return r;
		thread_name(l->thread, "cw-d:%s/%zu", d->name, j);
		l->started = true;
	}
	return 0;
}

/* Stops and joins d's dispatchers (each drains what it was given first). */
void pb_disk_stop(struct disk *d)
{
	size_t j;

	for (j = 0; j < d->nlanes && d->lanes; j++)
		if (d->lanes[j].started)
			lane_stop(&d->lanes[j]);
	for (j = 0; j < d->nlanes && d->lanes; j++) {
		if (!d->lanes[j].started)
			continue;
		pthread_join(d->lanes[j].thread, NULL);
		d->lanes[j].started = false;
	}
}

/* Frees what a stopped disk holds and closes it. */
void pb_disk_close(struct disk *d)
{
	size_t j;

	for (j = 0; j < d->nlanes && d->lanes; j++) {
		cw_io_engine_free(d->lanes[j].eng);
		cw_sched_free(d->lanes[j].pl.sched);
		lane_beq_free(&d->lanes[j]);
		lane_miss_free(&d->lanes[j]);
		free(atomic_load(&d->lanes[j].plan));
		cw_slots_free(d->lanes[j].rec);
	}
	free(d->lanes);
	free(d->emulate);
	d->emulate = NULL;
	for (struct disk_model *dm = atomic_load(&d->model), *o; dm; dm = o) {
		o = dm->older;
		free(dm);
	}
	atomic_store(&d->model, NULL);
	d->lanes = NULL;
	d->nlanes = 0;
	cw_io_closep(&d->fd);
}

/* The file the daemon opened must be the one the pool labelled (and
 * checked) under that path, not whatever the path names by now. */
static int disk_same_file(struct pb *pb, const struct disk *d, char *err, size_t errlen)
{
	uint64_t odev, oino, pdev, pino;
	int pfd = cw_disk_fd(pb->pool, d->id);

	if (pfd < 0 || cw_io_identity(pfd, &pdev, &pino) < 0 ||
	    cw_io_identity(d->fd, &odev, &oino) < 0) {
		snprintf(err, errlen, "disk %s: cannot check its label", d->name);
		return -EIO;
	}
	if (odev != pdev || oino != pino) {
		snprintf(err, errlen, "disk %s: %s no longer holds the disk the pool labelled",
			 d->name, d->path);
		return -ESTALE;
	}
	return 0;
}

int pb_disk_add(struct pb *pb, uint32_t disk_id, char *err, size_t errlen)
{
	struct cw_disk_info info;
	struct disk *d;
	size_t di = pb->ndisks;
	int r;

	if (pb_disk_index(pb, disk_id) >= 0) {
		snprintf(err, errlen, "disk %" PRIu32 " is open already", disk_id);
		return -EEXIST;
	}
	r = cw_disk_info(pb->pool, disk_id, &info);
	if (r < 0) {
		snprintf(err, errlen, "disk %" PRIu32 ": not in the pool", disk_id);
		return r;
	}
	if (di == PB_DISKS_CAP) {
		snprintf(err, errlen, "disk %s: the data path has used all its %d disk slots "
			 "since it started; restart clockwised to serve it", info.name,
			 PB_DISKS_CAP);
		return -ENOSPC;
	}
	d = &pb->disks[di];
	memset(d, 0, sizeof(*d));
	d->fd = -1;
	r = pb_disk_open(pb, d, &info);
	if (r == 0 && d->fd < 0)
		r = -ENODEV;	/* pb_disk_open logged why */
	if (r < 0) {
		snprintf(err, errlen, "disk %s: cannot open %s: %s", info.name, info.path,
			 strerror(-r));
		goto fail;
	}
	r = disk_same_file(pb, d, err, errlen);
	if (r == 0 && pb->started)
		r = pb_disk_start(pb, d);
	if (r < 0) {
		if (!err[0])
			snprintf(err, errlen, "disk %s: cannot start its dispatchers: %s",
				 info.name, strerror(-r));
		pb_disk_stop(d);
		goto fail;
	}
	pb->ndisks = di + 1;
	pb_disk_publish(pb, di);
	return 0;
fail:
	pb_disk_close(d);
	memset(d, 0, sizeof(*d));
	return r;
}

int pb_disk_remove(struct pb *pb, uint32_t disk_id, char *err, size_t errlen)
{
	int di = pb_disk_index(pb, disk_id);
	struct cw_disk_info info;
	struct pbx *x;
	unsigned i, n;

	if (di < 0)
		return -ENOENT;
	/* The pool let it go (every block of it is free), so an export that
	 * still lists it had its partition moved off it: it leaves the
	 * export's FLUSH. */
	if (cw_disk_info(pb->pool, disk_id, &info) == 0 && info.free_blocks == info.data_blocks)
		for (x = pb->exports; x; x = x->next)
			pb_export_drop_disk(pb, x, (uint32_t)di);
	for (x = pb->exports; x; x = x->next) {
		n = atomic_load_explicit(&x->ndisks, memory_order_relaxed);
		for (i = 0; i < n; i++)
			if (x->disks[i] == (uint32_t)di) {
				snprintf(err, errlen, "disk %s: export %s flushes it; remove the "
					 "export first", pb->disks[di].name, x->name);
				return -EBUSY;
			}
	}
	/* Nothing maps to it (no partition has a block there) and no export
	 * lists it, so no request can reach its lanes once it is unlisted. */
	atomic_store_explicit(&pb->slot_of[disk_id], -1, memory_order_release);
	/* The keeper of holes may still hold a wake-up for its lanes. */
	pb_alloc_quiesce(pb);
	pb_disk_stop(&pb->disks[di]);
	cwd_log(LOG_INFO, "disk %s (%s): closed", pb->disks[di].name, pb->disks[di].path);
	pb_disk_close(&pb->disks[di]);
	return 0;
}
