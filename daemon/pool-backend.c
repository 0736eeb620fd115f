/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The data path of clockwised (DESIGN.md rule 3; Bosch & Mullender,
 * section 3): NBD request -> partition block map -> one piece per disk run
 * -> the lane's slot record -> its dispatcher -> the policy -> the I/O engine.
 *
 * Submission takes no mutex.  The connection thread maps the request with
 * the lock-free cw_part_map(), then books every piece in its lane's slot
 * reservation record (see "intake" below) and wakes the lane only if it
 * sleeps.  The dispatcher takes the committed bookings in slot order (or,
 * on an idle lane without streams, the reader itself: see lane.c).
 *
 * Dispatch.  A disk that carries admitted streams runs the scheduling core
 * (cw_sched: ΔL, EDF or LST) on its first lane with one request in service,
 * because the admission test models a non-preemptive single server: RT
 * pieces get release = max(arrival, expected release) and deadline =
 * release + T, the policy decides when BE pieces may run.  A disk without
 * streams has no deadline to protect; every policy then serves BE in
 * arrival order, so its lanes keep queue_depth requests in flight each.
 *
 * Completion.  The last piece of a request to finish completes it (one
 * atomic decrement); a FUA write then runs a second phase, an fdatasync on
 * every disk it touched, before the reply.  FLUSH is an fdatasync on every
 * disk of the partition.
 */
#include "config.h"

#include "daemon/pool-internal.h"

static const struct nbd_backend_ops pb_ops;

/* ---- submission (connection threads) ---- */

static struct lane *piece_lane(struct pb *pb, uint32_t disk_index, uint64_t phys_off)
{
	struct disk *d = &pb->disks[disk_index];

	if (d->ntasks || d->nlanes == 1 ||
	    atomic_load_explicit(&d->live_streams, memory_order_relaxed))
		return &d->lanes[0];
	return &d->lanes[(phys_off / pb->block_size) % d->nlanes];
}

int pb_disk_index(struct pb *pb, uint32_t id)
{
	size_t i;

	for (i = 0; i < pb->ndisks; i++)
		if (pb->disks[i].id == id)
			return pb->disks[i].fd >= 0 ? (int)i : -ENODEV;
	return -ENODEV;
}

static void piece_init_flush(struct preq *q, struct piece *p, struct pb *pb, uint32_t di)
{
	struct disk *d = &pb->disks[di];

	*p = (struct piece){ .req = q, .lane = &d->lanes[0] };
	p->io = (struct cw_io_req){ .fd = d->fd, .op = CW_IO_FSYNC, .user = p };
}

/* A flush piece for every disk of the export, from piece `at` on. */
static void add_flush_pieces(struct preq *q, unsigned at)
{
	struct pbx *x = q->x;
	unsigned i;

	for (i = 0; i < x->ndisks; i++)
		piece_init_flush(q, &q->p[at + i], x->pb, x->disks[i]);
}

static void push_pieces(struct preq *q, unsigned from, unsigned n)
{
	struct pb *pb = q->x->pb;
	unsigned i;

	atomic_store(&q->pending, n);
	for (i = 0; i < n; i++)
		cwd_queue_change(&q->p[from + i].lane->st, 1);
	for (i = 0; i < n; i++) {
		struct piece *p = &q->p[from + i];
		int r = lane_push(pb, p);

		if (r < 0) {
			p->rt = false;
			lane_piece_done(p->lane, p, r, cw_now_ns());
		}
	}
}

static struct preq *preq_new(struct pb *pb, size_t npieces)
{
	struct preq *q;

	if (npieces <= PREQ_SMALL_PIECES) {
		q = lane_preq_get(pb);
		if (q)
			q->small = true;
		return q;
	}
	q = malloc(sizeof(*q) + npieces * sizeof(struct piece));
	if (q)
		q->small = false;
	return q;
}

static void preq_free(struct preq *q)
{
	if (q->small)
		lane_preq_put(q->x->pb, q);
	else
		free(q);
}

void pb_req_finish(struct preq *q)
{
	int err = atomic_load(&q->err);

	if (q->fua && !err) {
		q->fua = false;
		push_pieces(q, q->npieces, q->nflush);
		return;
	}
	nbd_io_complete(q->nio, err);
	preq_free(q);
}

static bool in_span(const struct resv *r, int64_t now)
{
	return now >= r->start_ns && (r->end_ns == 0 || now < r->end_ns);
}

/* Maps and books a READ, WRITE or (zero: from the shared zero buffer, in
 * ZERO_CHUNK pieces) WRITE_ZEROES. */
static int submit_rw(struct pbx *x, struct nbd_io *nio, enum cw_io_op op, bool zero)
{
	struct pb *pb = x->pb;
	uint64_t off = nio->offset, end = nio->offset + nio->length;
	uint32_t chunk = zero ? ZERO_CHUNK : UINT32_MAX;
	size_t maxp = nio->length / CW_MIN(pb->block_size, chunk) + 2;
	unsigned nflush = nio->fua ? (unsigned)pb->ndisks : 0, n = 0, i;
	struct resv *rv = x->resv;
	struct preq *q;
	bool seen[CW_DISKS_MAX + 1] = { false };
	uint32_t touched[CW_DISKS_MAX];
	unsigned nt = 0;
	int r;

	q = preq_new(pb, maxp + nflush);
	if (!q)
		return -ENOMEM;
	q->nio = nio;
	q->x = x;
	q->arrival_ns = cw_now_ns();
	atomic_init(&q->err, 0);
	lane_plug();	/* the NBD reader calls pb_unplug before it blocks */
	bool rt = rv && off >= rv->lo && end <= rv->hi && in_span(rv, q->arrival_ns);

	while (off < end) {
		struct cw_extent e;
		struct piece *p = &q->p[n];
		int di;

		r = cw_part_map(x->part, off, CW_MIN(end - off, chunk), &e);
		if (r < 0)
			goto fail;
		di = pb_disk_index(pb, e.disk_id);
		if (di < 0) {
			r = di;
			goto fail;
		}
		if (n >= maxp) {	/* cannot happen: pieces end at blocks */
			r = -EIO;
			goto fail;
		}
		*p = (struct piece){ .req = q, .lane = piece_lane(pb, (uint32_t)di, e.phys_offset) };
		p->io = (struct cw_io_req){
			.fd = pb->disks[di].fd, .op = op, .len = e.length, .off = e.phys_offset,
			.buf = zero ? pb->zeros : (uint8_t *)nio->buf + (off - nio->offset),
			.user = p,
		};
		if (!seen[e.disk_id]) {
			seen[e.disk_id] = true;
			p->first_on_disk = true;
			touched[nt++] = (uint32_t)di;
		}
		if (rt && rv->period_ns[di]) {
			p->rt = true;
			p->resv = rv;
		}
		off += e.length;
		n++;
	}
	q->npieces = n;
	/* FUA: once every piece is written, fdatasync the disks it touched. */
	q->nflush = nflush ? nt : 0;
	q->fua = q->nflush > 0;
	for (i = 0; i < q->nflush; i++)
		piece_init_flush(q, &q->p[n + i], pb, touched[i]);
	push_pieces(q, 0, n);
	return 0;
fail:
	preq_free(q);
	return r;
}

static int pb_pread(void *backend, struct nbd_io *io)
{
	return submit_rw(backend, io, CW_IO_READ, false);
}

static int pb_pwrite(void *backend, struct nbd_io *io)
{
	return submit_rw(backend, io, CW_IO_WRITE, false);
}

static int pb_zero(void *backend, struct nbd_io *io)
{
	return submit_rw(backend, io, CW_IO_WRITE, true);
}

static int pb_flush(void *backend, struct nbd_io *nio)
{
	struct pbx *x = backend;
	struct preq *q;

	if (!x->ndisks) {
		nbd_io_complete(nio, 0);
		return 0;
	}
	q = preq_new(x->pb, x->ndisks);
	if (!q)
		return -ENOMEM;
	q->nio = nio;
	q->x = x;
	q->arrival_ns = cw_now_ns();
	atomic_init(&q->err, 0);
	q->fua = false;
	lane_plug();
	q->npieces = x->ndisks;
	q->nflush = 0;
	add_flush_pieces(q, 0);
	push_pieces(q, 0, q->npieces);
	return 0;
}

/* TRIM is advisory (the protocol lets a server ignore it): blocks belong to
 * the partition until it shrinks, so there is nothing to give back.  With
 * FUA the (unchanged) range is as stable as it was. */
static int pb_trim(void *backend, struct nbd_io *io)
{
	(void)backend;
	nbd_io_complete(io, 0);
	return 0;
}

static void pb_unplug(void *backend)
{
	(void)backend;
	lane_unplug();
}

static const struct nbd_backend_ops pb_ops = {
	.pread = pb_pread,
	.pwrite = pb_pwrite,
	.flush = pb_flush,
	.trim = pb_trim,
	.zero = pb_zero,
	.unplug = pb_unplug,
};

/* ---- setup ---- */

static const char *const state_names[] = {
	[CW_DISK_PRESENT] = "present",
	[CW_DISK_MISSING] = "missing",
	[CW_DISK_WRONG_LABEL] = "holds another disk or no label",
	[CW_DISK_BAD_LABEL] = "has a corrupt label",
};

static int disk_open(struct pb *pb, struct disk *d, const struct cw_disk_info *info)
{
	const struct cwd_config *cfg = pb->cfg;
	const struct cwd_config_disk *cd = NULL;
	const char *model;
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
	d->nlanes = cd ? cd->lanes : cwd_default_lanes(info->tier);
	if (d->nlanes == 0)
		d->nlanes = 1;
	model = cd && cd->model ? cd->model : info->tier == CW_TIER_SSD ? "ssd" : "hdd7200";
	r = cw_model_preset(model, &d->model);
	if (r < 0) {
		cwd_log(LOG_ERR, "disk %s: unknown model \"%s\"", d->name, model);
		return r;
	}
	r = cw_model_service_ns(&d->model, 0, 0, pb->block_size, &d->be_max_ns);
	if (r < 0)
		d->be_max_ns = 0;
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
	}
	if (info->state != CW_DISK_PRESENT) {
		cwd_log(LOG_WARNING, "disk %s (%s) %s: its partitions are not exported", d->name,
			d->path, state_names[info->state]);
		return 0;
	}
	r = cw_io_open(info->path, !cfg->exports.read_only, &d->direct);
	if (r < 0) {
		/* Like a missing disk: its partitions wait, the rest are served. */
		cwd_log(LOG_ERR, "disk %s: cannot open %s: %s; its partitions are not exported",
			d->name, d->path, strerror(-r));
		return 0;
	}
	d->fd = r;
	/* io_uring punts reads it cannot do without blocking (tmpfs, some
	 * file systems) to kernel workers; libaio then costs less. */
	if (cw_io_kind_for_fd(d->fd, cfg->io_engine, &d->io_kind) < 0)
		d->io_kind = cfg->io_engine;
	r = cw_io_alignment(d->fd, &d->align);
	if (r < 0 || !d->direct)
		d->align = 512;
	cwd_log(LOG_INFO, "disk %s: %s, %s, policy %s, %u lane%s, %s %s I/O", d->name, d->path,
		cw_tier_name(d->tier), cw_sched_policy_name(d->policy), d->nlanes,
		d->nlanes == 1 ? "" : "s", d->direct ? "direct" : "buffered",
		cw_io_kind_name(d->io_kind));
	return 0;
}

int pb_new(struct cw_pool *pool, const struct cwd_config *cfg, struct pb **ret_pb)
{
	struct cw_disk_info *infos = NULL;
	struct pb *pb;
	size_t n, i, j;
	int r;

	pb = calloc(1, sizeof(*pb));
	if (!pb)
		return -ENOMEM;
	pb->pool = pool;
	pb->cfg = cfg;
	pb->block_size = cw_pool_block_size(pool);
	pb->start_ns = cw_now_ns();
	lane_init_once();
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
	r = cw_disk_list(pool, &infos, &n);
	if (r < 0)
		goto fail;
	pb->disks = calloc(n ? n : 1, sizeof(*pb->disks));
	if (!pb->disks) {
		r = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < n; i++) {
		pb->disks[i].fd = -1;
		pb->ndisks = i + 1;
		r = disk_open(pb, &pb->disks[i], &infos[i]);
		if (r < 0)
			goto fail;
	}
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

int pb_export(struct pb *pb, struct cw_part *part, struct nbd_export *ret_exp)
{
	struct cw_part_info info;
	uint64_t nblocks, b;
	uint32_t *ids = NULL;
	struct pbx *x;
	size_t align = 512;
	unsigned i;
	bool rotational = false;
	int r;

	r = cw_part_info(part, &info);
	if (r < 0)
		return r;
	nblocks = cw_part_nblocks(part);
	x = calloc(1, sizeof(*x));
	ids = calloc(nblocks ? nblocks : 1, sizeof(*ids));
	if (!x || !ids) {
		free(x);
		free(ids);
		return -ENOMEM;
	}
	r = nblocks ? cw_part_block_disks(part, 0, nblocks, ids) : 0;
	if (r < 0)
		goto fail;
	x->disks = calloc(pb->ndisks ? pb->ndisks : 1, sizeof(*x->disks));
	if (!x->disks) {
		r = -ENOMEM;
		goto fail;
	}
	for (b = 0; b < nblocks; b++) {
		int di = -ENODEV;

		for (i = 0; i < pb->ndisks; i++)
			if (pb->disks[i].id == ids[b])
				di = (int)i;
		if (di < 0 || pb->disks[di].fd < 0) {
			cwd_log(LOG_WARNING, "partition %s is not exported: its disk %s is missing",
				info.name, di < 0 ? "(unknown)" : pb->disks[di].name);
			r = -ENODEV;
			goto fail;
		}
		for (i = 0; i < x->ndisks; i++)
			if (x->disks[i] == (uint32_t)di)
				break;
		if (i == x->ndisks) {
			x->disks[x->ndisks++] = (uint32_t)di;
			align = CW_MAX(align, pb->disks[di].align);
			rotational |= pb->disks[di].tier == CW_TIER_HDD;
		}
	}
	free(ids);
	if (align > 65536) {
		r = -EINVAL;
		goto fail_x;
	}
	x->pb = pb;
	x->part = part;
	snprintf(x->name, sizeof(x->name), "%s", info.name);
	snprintf(x->description, sizeof(x->description), "clockwise partition %s on %u disk%s",
		 info.name, x->ndisks, x->ndisks == 1 ? "" : "s");
	x->next = pb->exports;
	pb->exports = x;
	*ret_exp = (struct nbd_export){
		.name = x->name,
		.description = x->description,
		.size = info.size_bytes - info.size_bytes % align,
		.read_only = pb->cfg->exports.read_only,
		.flush_global = pb->cfg->exports.multi_conn,
		.rotational = rotational,
		.min_block = (uint32_t)align,
		.pref_block = CW_MAX(pb->cfg->exports.block_size, (uint32_t)align),
		.max_block = pb->cfg->exports.max_request_bytes,
		.ops = &pb_ops,
		.backend = x,
	};
	return 0;
fail:
	free(ids);
fail_x:
	free(x->disks);
	free(x);
	return r;
}

int pb_start(struct pb *pb)
{
	size_t i, j;
	int r;

	for (i = 0; i < pb->ndisks; i++) {
		struct disk *d = &pb->disks[i];

		if (d->fd < 0)
			continue;
		if (d->ntasks) {
			r = pb_disk_sched(pb, d);
			if (r < 0)
				return r;
		}
		for (j = 0; j < d->nlanes; j++) {
			struct lane *l = &d->lanes[j];

			l->expected_ns = calloc(PB_RESV_MAX, sizeof(int64_t));
			if (!l->expected_ns)
				return -ENOMEM;
			r = cw_io_engine_new(d->io_kind, pb->cfg->queue_depth, &l->eng);
			if (r < 0) {
				cwd_log(LOG_ERR, "disk %s: cannot set up %s: %s", d->name,
					cw_io_kind_name(d->io_kind), strerror(-r));
				return r;
			}
			r = -pthread_create(&l->thread, NULL, lane_main, l);
			if (r < 0)
				return r;
			l->started = true;
		}
	}
	return 0;
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
			cwd_counters_log(what, &pb->disks[i].lanes[j].st);
		}
	for (i = 0; i < pb->nresvs; i++) {
		if (!pb->resvs[i])
			continue;	/* released */
		snprintf(what, sizeof(what), "reservation %s", pb->resvs[i]->r.export_name);
		cwd_counters_log(what, &pb->resvs[i]->st);
	}
}

void pb_free(struct pb *pb)
{
	struct pbx *x, *next;
	size_t i, j;

	if (!pb)
		return;
	for (i = 0; i < pb->ndisks; i++)
		for (j = 0; j < pb->disks[i].nlanes; j++) {
			struct lane *l = &pb->disks[i].lanes[j];

			if (!l->started)
				continue;
			lane_stop(l);
			pthread_join(l->thread, NULL);
		}
	for (i = 0; i < pb->ndisks; i++) {
		struct disk *d = &pb->disks[i];

		for (j = 0; j < d->nlanes && d->lanes; j++) {
			cw_io_engine_free(d->lanes[j].eng);
			cw_sched_free(d->lanes[j].sched);
			free(d->lanes[j].expected_ns);
			free(atomic_load(&d->lanes[j].plan));
			cw_slots_free(d->lanes[j].rec);
		}
		free(d->lanes);
		free(d->tasks);
		if (d->fd >= 0)
			close(d->fd);
	}
	for (x = pb->exports; x; x = next) {
		next = x->next;
		free(x->disks);
		free(x);
	}
	for (i = 0; i < pb->nresvs; i++)
		pb_resv_free(pb->resvs[i]);
	free(pb->resvs);
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

