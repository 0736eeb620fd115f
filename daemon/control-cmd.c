/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The control server's command handlers (see control.h): disks,
 * partitions, reservations, exports, status and stats over the pool.
 *
 * Reservations are the paper's QoS requests (Bosch & Mullender, section
 * 3.1): a stream of b-byte blocks at B bytes per second over a range of a
 * partition.  Admission plans one task per participating disk with
 * cw_admit_plan() against the tasks each disk has already admitted, and
 * either every disk takes its part or nothing is booked.  Invariant: the
 * task set of every disk is the union of the parts of the reservations in
 * srv->resvs, and each was admitted together with the others.
 *
 * Reservations, exports and calibrated models are written through to the
 * pool database before memory changes (one transaction each), so memory
 * is always what the database holds; ctl_state_load() reads it back.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "control-internal.h"

#include <clockwise/pool-objects.h>

#define RESV_MAX 4096
#define EXPORT_MAX 256
#define PART_RUNS_MAX 256	/* runs listed by part.show */

/* ---- request context and errors ---------------------------------------- */

static int fail(struct ctx *c, enum cwc_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(struct ctx *c, enum cwc_code code, const char *fmt, ...)
{
	va_list ap;

	c->code = code;
	va_start(ap, fmt);
	vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
	va_end(ap);
	return -1;
}

/* A failed pool call: its code, and the pool's own sentence. */
static int fail_pool(struct ctx *c, int r, const char *what)
{
	const struct cw_error *e = cw_pool_last_error(c->srv->pool);

	if (e && e->code == r && e->msg[0])
		return fail(c, cwc_code_from_errno(r), "%s: %s", what, e->msg);
	return fail(c, cwc_code_from_errno(r), "%s: %s", what, strerror(-r));
}

static void add(json_object *o, const char *k, json_object *v)
{
	json_object_object_add(o, k, v);
}

static json_object *jstr(const char *s)
{
	return json_object_new_string(s ? s : "");
}

static json_object *jns(int64_t ns)
{
	return ns == CW_ADMIT_NO_LIMIT ? NULL : json_object_new_int64(ns);
}

/* ---- models and per-disk admission state ------------------------------- */

/* A preset for the tier, stretched so that its last (slowest) zone covers
 * the whole disk: admission then never under-estimates a bigger disk. */
static int preset_model(struct cwc_server *srv, const struct cw_disk_info *d, struct cw_model *m)
{
	int r = cw_model_preset(d->tier == CW_TIER_SSD ? "ssd" : "hdd7200", m);

	if (r < 0)
		return r;
	if (d->capacity_bytes > m->capacity_bytes) {
		m->capacity_bytes = d->capacity_bytes;
		m->zone[m->n_zones - 1].end_bytes = d->capacity_bytes;
	}
	m->margin_ppm = srv->o.margin_ppm;
	return cw_model_validate(m);
}

/* The model admission uses for disk d. */
static int disk_model(struct cwc_server *srv, const struct cw_disk_info *d,
		      struct cw_model *ret, bool *ret_calibrated)
{
	struct model_slot *s = &srv->models[d->id];

	*ret_calibrated = s->set && s->calibrated;
	if (s->set) {
		*ret = s->m;
		return 0;
	}
	return preset_model(srv, d, ret);
}

/* Every admitted task on disk_id, malloc'ed (NULL when none). */
static int disk_tasks(struct cwc_server *srv, uint32_t disk_id, struct cw_task **ret, size_t *ret_n)
{
	struct cw_task *t = NULL;
	size_t n = 0, cap = 0;

	for (size_t i = 0; i < srv->n_resvs; i++) {
		for (size_t j = 0; j < srv->resvs[i].n_parts; j++) {
			if (srv->resvs[i].parts[j].disk_id != disk_id)
				continue;
			if (n == cap) {
				struct cw_task *nt;

				cap = cap ? 2 * cap : 8;
				nt = realloc(t, cap * sizeof(*t));
				if (!nt) {
					free(t);
					return -ENOMEM;
				}
				t = nt;
			}
			t[n++] = srv->resvs[i].parts[j].task;
		}
	}
	*ret = t;
	*ret_n = n;
	return 0;
}

static const char *why_name(enum cw_admit_why w)
{
	switch (w) {
	case CW_ADMIT_OK: return "ok";
	case CW_ADMIT_INVALID: return "invalid";
	case CW_ADMIT_UTILIZATION: return "utilization";
	default: return "blocking";
	}
}

static const char *state_name(enum cw_disk_state s)
{
	switch (s) {
	case CW_DISK_PRESENT: return "present";
	case CW_DISK_MISSING: return "missing";
	case CW_DISK_WRONG_LABEL: return "wrong-label";
	default: return "bad-label";
	}
}

static json_object *disk_json(struct cwc_server *srv, const struct cw_disk_info *d)
{
	json_object *o = json_object_new_object(), *m = json_object_new_object();
	_cleanup_free_ struct cw_task *tasks = NULL;
	struct cw_admit_result res;
	struct cw_model model;
	bool calibrated;
	size_t n = 0;
	uint32_t bs = cw_pool_block_size(srv->pool);

	add(o, "id", json_object_new_int64(d->id));
	add(o, "name", jstr(d->name));
	add(o, "tier", jstr(cw_tier_name(d->tier)));
	add(o, "state", jstr(state_name(d->state)));
	add(o, "path", jstr(d->path));
	add(o, "capacity", cwc_json_u64(d->capacity_bytes));
	add(o, "size", cwc_json_u64(d->data_blocks * bs));
	add(o, "free", cwc_json_u64(d->free_blocks * bs));
	add(o, "blocks", cwc_json_u64(d->data_blocks));
	add(o, "free_blocks", cwc_json_u64(d->free_blocks));
	if (disk_model(srv, d, &model, &calibrated) == 0) {
		char text[4096];

		add(m, "name", jstr(model.name));
		add(m, "calibrated", json_object_new_boolean(calibrated));
		if (cw_model_format(&model, text, sizeof(text)) > 0)
			add(m, "text", jstr(text));	/* the cwmodel1 line */
	}
	add(o, "model", m);
	if (cw_disk_emulate_get(srv->pool, d->id, &model) == 0) {
		char text[4096];

		m = json_object_new_object();
		add(m, "name", jstr(model.name));
		if (cw_model_format(&model, text, sizeof(text)) > 0)
			add(m, "text", jstr(text));
		add(o, "emulate", m);
	}
	/* Windows ignored: the worst moment, all tasks active at once. */
	if (disk_tasks(srv, d->id, &tasks, &n) == 0 && cw_admit_test(tasks, n, &res) == 0) {
		add(o, "tasks", json_object_new_int64((int64_t)n));
		add(o, "utilization", json_object_new_double(res.utilization));
		add(o, "delta_l_ns", res.schedulable ? jns(res.delta_l_ns) : NULL);
	}
	return o;
}

/* A disk by name, or by its id written in decimal. */
static int find_disk(struct ctx *c, const char *name, struct cw_disk_info *ret)
{
	_cleanup_free_ struct cw_disk_info *d = NULL;
	size_t n = 0;
	char *end;
	unsigned long id;
	int r = cw_disk_list(c->srv->pool, &d, &n);

	if (r < 0)
		return fail_pool(c, r, "listing disks");
	for (size_t i = 0; i < n; i++) {
		if (strcmp(d[i].name, name) == 0) {
			*ret = d[i];
			return 0;
		}
	}
	id = strtoul(name, &end, 10);
	for (size_t i = 0; *name && !*end && i < n; i++) {
		if (d[i].id == id) {
			*ret = d[i];
			return 0;
		}
	}
	return fail(c, CWC_E_NOT_FOUND, "no disk \"%s\" in the pool", name);
}

static int find_part(struct ctx *c, const char *name, struct cw_part **ret)
{
	int r = cw_part_lookup(c->srv->pool, name, ret);

	if (r == -ENOENT)
		return fail(c, CWC_E_NOT_FOUND, "no partition \"%s\"", name);
	if (r < 0)
		return fail_pool(c, r, name);
	return 0;
}

/* ---- reservations ------------------------------------------------------ */

void cwc_resv_free_parts(struct cwc_resv *r)
{
	if (!r)
		return;
	free(r->parts);
	r->parts = NULL;
	r->n_parts = 0;
}

static struct cwc_resv *find_resv(struct cwc_server *srv, uint64_t id)
{
	for (size_t i = 0; i < srv->n_resvs; i++)
		if (srv->resvs[i].id == id)
			return &srv->resvs[i];
	return NULL;
}

/* Removes reservation i from the database, then from memory; -errno (the
 * pool says why) and nothing changed if the database refuses. */
static int drop_resv(struct cwc_server *srv, size_t i)
{
	struct cwc_resv r = srv->resvs[i];
	int rc = cw_resv_remove(srv->pool, r.id);

	/* Not there is as good as removed: memory follows the database. */
	if (rc < 0 && rc != -ENOENT)
		return rc;
	pthread_mutex_lock(&srv->lock);
	memmove(&srv->resvs[i], &srv->resvs[i + 1], (srv->n_resvs - i - 1) * sizeof(r));
	srv->n_resvs--;
	pthread_mutex_unlock(&srv->lock);
	if (srv->o.hooks.resv_changed)
		srv->o.hooks.resv_changed(srv->o.hooks.userdata, &r, false);
	cwc_resv_free_parts(&r);
	return 0;
}

static bool resv_exported(struct cwc_server *srv, uint64_t id, const char **ret_export)
{
	for (size_t i = 0; i < srv->n_exports; i++) {
		if (srv->exports[i].resv_id == id) {
			*ret_export = srv->exports[i].name;
			return true;
		}
	}
	return false;
}

/* A reservation whose time span is over holds nothing any more; one an
 * export is still bound to stays until the export goes. */
void ctl_expire_resvs(struct cwc_server *srv)
{
	int64_t now = srv->o.clock_ns();
	const char *e;

	for (size_t i = 0; i < srv->n_resvs;) {
		struct cwc_resv *r = &srv->resvs[i];

		/* A database that refuses now is asked again next time. */
		/* A static one stays: the data path keeps its task. */
		if (!r->is_static && r->span_end_ns && r->span_end_ns <= now &&
		    !resv_exported(srv, r->id, &e) &&
		    drop_resv(srv, i) == 0)
			continue;
		i++;
	}
}

static json_object *resv_json(struct cwc_server *srv, const struct cwc_resv *r, bool full)
{
	json_object *o = json_object_new_object(), *parts;
	int64_t now = srv->o.clock_ns();

	add(o, "id", cwc_json_u64(r->id));
	add(o, "part", jstr(r->part));
	add(o, "static", json_object_new_boolean(r->is_static));
	if (r->is_static)
		add(o, "export", jstr(r->export_name));
	add(o, "rate", cwc_json_u64(r->rate_bps));
	add(o, "block", cwc_json_u64(r->block_bytes));
	add(o, "range_start", cwc_json_u64(r->range_start_bytes));
	add(o, "range_end", cwc_json_u64(r->range_end_bytes));
	add(o, "period_ns", json_object_new_int64(r->period_ns));
	/* Times relative to now: the clock is the server's monotonic one. */
	add(o, "starts_in_ns", r->span_start_ns ? json_object_new_int64(r->span_start_ns - now)
						: NULL);
	add(o, "ends_in_ns", r->span_end_ns ? json_object_new_int64(r->span_end_ns - now) : NULL);
	add(o, "disks", json_object_new_int64((int64_t)r->n_parts));
	if (!full)
		return o;
	parts = json_object_new_array();
	for (size_t i = 0; i < r->n_parts; i++) {
		const struct cwc_resv_part *p = &r->parts[i];
		json_object *po = json_object_new_object();
		struct cw_disk_info d;

		add(po, "disk_id", json_object_new_int64(p->disk_id));
		if (cw_disk_info(srv->pool, p->disk_id, &d) == 0)
			add(po, "disk", jstr(d.name));
		add(po, "period_ns", json_object_new_int64(p->task.period_ns));
		add(po, "service_ns", json_object_new_int64(p->task.service_ns));
		add(po, "requests", cwc_json_u64(p->requests));
		add(po, "stride", cwc_json_u64(p->stride));
		json_object_array_add(parts, po);
	}
	add(o, "per_disk", parts);
	return o;
}

/* The reserved range of part as admission sees it: the disk and the disk
 * offset of every partition block the range touches. */
struct range_layout {
	struct cw_disk_info *disks;
	size_t n_disks;
	uint32_t *disk_idx;
	uint64_t *disk_off;
	struct cw_admit_layout l;
};

static void range_layout_done(struct range_layout *rl)
{
	free(rl->disks);
	free(rl->disk_idx);
	free(rl->disk_off);
}

static int range_layout(struct ctx *c, struct cw_part *part, uint64_t start, uint64_t end,
			struct range_layout *rl)
{
	uint64_t pb = cw_part_block_size(part);
	uint64_t first = start / pb, n = (end - 1) / pb - first + 1;
	_cleanup_free_ uint32_t *ids = NULL;
	uint32_t idx_of[CW_DISKS_MAX + 1];
	int r;

	memset(rl, 0, sizeof(*rl));
	r = cw_disk_list(c->srv->pool, &rl->disks, &rl->n_disks);
	if (r < 0)
		return fail_pool(c, r, "listing disks");
	for (size_t i = 0; i < rl->n_disks; i++)
		idx_of[rl->disks[i].id] = (uint32_t)i;
	ids = calloc(n, sizeof(*ids));
	rl->disk_idx = calloc(n, sizeof(*rl->disk_idx));
	rl->disk_off = calloc(n, sizeof(*rl->disk_off));
	if (!ids || !rl->disk_idx || !rl->disk_off)
		return fail(c, CWC_E_INTERNAL, "out of memory");
	r = cw_part_block_disks(part, first, n, ids);
	if (r < 0)
		return fail(c, cwc_code_from_errno(r), "mapping the range: %s", strerror(-r));
	for (uint64_t k = 0; k < n; k++) {
		struct cw_extent e;

		r = cw_part_map(part, (first + k) * pb, pb, &e);
		if (r < 0)
			return fail(c, cwc_code_from_errno(r), "partition block %" PRIu64 ": %s",
				    first + k,
				    r == -ENODEV ? "on a missing disk" : strerror(-r));
		rl->disk_idx[k] = idx_of[ids[k]];
		rl->disk_off[k] = e.phys_offset;
	}
	rl->l = (struct cw_admit_layout){
		.pblock_bytes = pb,
		.n_pblocks = n,
		.disk = rl->disk_idx,
		.disk_off = rl->disk_off,
		.first_bytes = start - first * pb,
		.range_bytes = end - start,
	};
	return 0;
}

static int refused(struct ctx *c, const struct cw_admit_plan *plan, const struct range_layout *rl)
{
	const struct cw_admit_part *p = &plan->parts[plan->failed_part];
	const struct cw_disk_info *d = &rl->disks[p->disk];
	json_object *det = json_object_new_object();

	add(det, "disk", jstr(d->name));
	add(det, "disk_id", json_object_new_int64(d->id));
	add(det, "condition", jstr(why_name(p->result.why)));
	add(det, "utilization", json_object_new_double(p->result.utilization));
	add(det, "period_ns", json_object_new_int64(p->task.period_ns));
	add(det, "service_ns", json_object_new_int64(p->task.service_ns));
	if (p->result.why == CW_ADMIT_BLOCKING)
		add(det, "l_ns", json_object_new_int64(p->result.fail_l_ns));
	c->details = det;
	return fail(c, CWC_E_REFUSED, "refused on disk %s: %s", d->name, p->result.reason);
}

/* Grows srv->resvs by one free slot. */
static int resv_room(struct cwc_server *srv)
{
	struct cwc_resv *nr;

	/* Under the lock: a reader in another thread may be copying. */
	pthread_mutex_lock(&srv->lock);
	nr = realloc(srv->resvs, (srv->n_resvs + 1) * sizeof(*nr));
	if (nr)
		srv->resvs = nr;
	pthread_mutex_unlock(&srv->lock);
	return nr ? 0 : -ENOMEM;
}

int cwc_server_add_static_resv(struct cwc_server *srv, const struct cwc_resv *r)
{
	struct cwc_resv res = *r;
	int rc;

	if (srv->n_resvs >= RESV_MAX)
		return -ENOSPC;
	res.parts = calloc(r->n_parts ? r->n_parts : 1, sizeof(*res.parts));
	if (!res.parts)
		return -ENOMEM;
	memcpy(res.parts, r->parts, r->n_parts * sizeof(*res.parts));
	res.id = 0;
	res.is_static = true;
	rc = resv_room(srv);
	if (rc < 0) {
		cwc_resv_free_parts(&res);
		return rc;
	}
	pthread_mutex_lock(&srv->lock);
	srv->resvs[srv->n_resvs++] = res;
	pthread_mutex_unlock(&srv->lock);
	return 0;
}

/* The database keeps wall-clock times, since the server's monotonic clock
 * starts again with the machine; 0 means "none" in both. */
static int64_t shift_ns(int64_t t, int64_t by)
{
	return t ? t + by : 0;
}

static int64_t wall_minus_mono(const struct cwc_server *srv)
{
	return srv->o.wall_ns() - srv->o.clock_ns();
}

/* Stores res in the pool and sets its id. */
static int resv_store(struct cwc_server *srv, struct cwc_resv *res)
{
	_cleanup_free_ struct cw_resv_disk *d = NULL;
	int64_t by = wall_minus_mono(srv);
	struct cw_resv_rec rec = {
		.part_id = res->part_id, .rate_bps = res->rate_bps, .block_bytes = res->block_bytes,
		.range_start_bytes = res->range_start_bytes,
		.range_end_bytes = res->range_end_bytes,
		.start_ns = shift_ns(res->span_start_ns, by),
		.end_ns = shift_ns(res->span_end_ns, by),
		.period_ns = res->period_ns, .n_disks = res->n_parts,
	};

	d = calloc(res->n_parts ? res->n_parts : 1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	for (size_t i = 0; i < res->n_parts; i++) {
		const struct cwc_resv_part *p = &res->parts[i];

		d[i] = (struct cw_resv_disk){
			.disk_id = p->disk_id, .period_ns = p->task.period_ns,
			.service_ns = p->task.service_ns, .from_ns = shift_ns(p->task.from_ns, by),
			.to_ns = shift_ns(p->task.to_ns, by), .requests = p->requests,
			.stride = p->stride,
		};
	}
	rec.disks = d;
	return cw_resv_add(srv->pool, &rec, &res->id);
}

/* A stored reservation as the server keeps it (part names the partition). */
static int resv_from_rec(const struct cw_resv_rec *rec, const char *part, int64_t by,
			 struct cwc_resv *ret)
{
	struct cwc_resv res = {
		.id = rec->id, .part_id = rec->part_id, .rate_bps = rec->rate_bps,
		.block_bytes = rec->block_bytes, .range_start_bytes = rec->range_start_bytes,
		.range_end_bytes = rec->range_end_bytes,
		.span_start_ns = shift_ns(rec->start_ns, -by),
		.span_end_ns = shift_ns(rec->end_ns, -by), .period_ns = rec->period_ns,
		.n_parts = rec->n_disks,
	};

	snprintf(res.part, sizeof(res.part), "%s", part);
	res.parts = calloc(rec->n_disks ? rec->n_disks : 1, sizeof(*res.parts));
	if (!res.parts)
		return -ENOMEM;
	for (size_t i = 0; i < rec->n_disks; i++) {
		const struct cw_resv_disk *d = &rec->disks[i];

		res.parts[i] = (struct cwc_resv_part){
			.disk_id = d->disk_id,
			.task = { .period_ns = d->period_ns, .service_ns = d->service_ns,
				  .from_ns = shift_ns(d->from_ns, -by),
				  .to_ns = shift_ns(d->to_ns, -by) },
			.requests = d->requests, .stride = d->stride,
		};
	}
	*ret = res;
	return 0;
}

static int h_resv_create(struct ctx *c, json_object **ret)
{
	struct cwc_server *srv = c->srv;
	const char *name = cwc_arg_str(c->req, "part");
	uint64_t rate = 0, block = 0, rs = 0, re = 0, start = 0, duration = 0;
	_cleanup_(range_layout_done) struct range_layout rl = { 0 };
	_cleanup_(cw_admit_plan_done) struct cw_admit_plan plan = { 0 };
	_cleanup_free_ struct cw_admit_disk *ad = NULL;
	_cleanup_free_ struct cw_model *models = NULL;
	struct cw_task **tasks = NULL;
	struct cw_admit_qos q;
	struct cw_part_info pi;
	struct cw_part *part;
	struct cwc_resv res = { 0 };
	int64_t now = srv->o.clock_ns();
	int r, out = -1;

	cwc_arg_uint(c->req, "rate", &rate);
	cwc_arg_uint(c->req, "block", &block);
	cwc_arg_uint(c->req, "range_start", &rs);
	cwc_arg_uint(c->req, "start", &start);
	cwc_arg_uint(c->req, "duration", &duration);
	if (find_part(c, name, &part) < 0)
		return -1;
	r = cw_part_info(part, &pi);
	if (r < 0)
		return fail_pool(c, r, name);
	if (!cwc_arg_uint(c->req, "range_end", &re) || re == 0)
		re = pi.size_bytes;
	if (rate == 0 || block == 0)
		return fail(c, CWC_E_BAD_REQUEST, "rate and block must be positive");
	if (rs >= re || re > pi.size_bytes)
		return fail(c, CWC_E_BAD_REQUEST,
			    "range %" PRIu64 ":%" PRIu64 " is not inside partition %s (%" PRIu64
			    " bytes)", rs, re, name, pi.size_bytes);
	if (srv->n_resvs >= RESV_MAX)
		return fail(c, CWC_E_NO_SPACE, "too many reservations (%d)", RESV_MAX);
	if (start > (uint64_t)(INT64_MAX - now) / 2 || duration > (uint64_t)(INT64_MAX - now) / 2)
		return fail(c, CWC_E_BAD_REQUEST, "start or duration too far in the future");
	if (range_layout(c, part, rs, re, &rl) < 0)
		return -1;

	ad = calloc(rl.n_disks ? rl.n_disks : 1, sizeof(*ad));
	models = calloc(rl.n_disks ? rl.n_disks : 1, sizeof(*models));
	tasks = calloc(rl.n_disks ? rl.n_disks : 1, sizeof(*tasks));
	if (!ad || !models || !tasks) {
		fail(c, CWC_E_INTERNAL, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < rl.n_disks; i++) {
		bool cal;

		r = disk_model(srv, &rl.disks[i], &models[i], &cal);
		if (r == 0)
			r = disk_tasks(srv, rl.disks[i].id, &tasks[i], &ad[i].n_tasks);
		if (r < 0) {
			fail(c, cwc_code_from_errno(r), "disk %s: no usable model: %s",
			     rl.disks[i].name, strerror(-r));
			goto done;
		}
		ad[i].model = &models[i];
		ad[i].tasks = tasks[i];
		/* Streams never take the room of best-effort I/O (admit.h). */
		r = cw_admit_be_reserve(&models[i],
					cw_admit_be_piece(rl.disks[i].tier, cw_pool_block_size(srv->pool)),
					&ad[i].be_reserve);
		if (r < 0) {
			fail(c, cwc_code_from_errno(r), "disk %s: its model gives no best-effort "
			     "reserve: %s", rl.disks[i].name, strerror(-r));
			goto done;
		}
	}
	q = (struct cw_admit_qos){ .bandwidth_bps = rate, .block_bytes = block };
	if (start || duration) {
		q.span_start_ns = now + (int64_t)start;
		q.span_end_ns = duration ? q.span_start_ns + (int64_t)duration : 0;
	}
	r = cw_admit_plan(&q, &rl.l, ad, rl.n_disks, &plan);
	if (r < 0) {
		fail(c, CWC_E_BAD_REQUEST, "%s", plan.reason[0] ? plan.reason : strerror(-r));
		goto done;
	}
	if (!plan.admitted) {
		refused(c, &plan, &rl);
		goto done;
	}

	snprintf(res.part, sizeof(res.part), "%s", pi.name);
	res.part_id = pi.id;
	res.rate_bps = rate;
	res.block_bytes = block;
	res.range_start_bytes = rs;
	res.range_end_bytes = re;
	res.span_start_ns = q.span_start_ns;
	res.span_end_ns = q.span_end_ns;
	res.period_ns = plan.stream_period_ns;
	res.parts = calloc(plan.n_parts ? plan.n_parts : 1, sizeof(*res.parts));
	if (!res.parts) {
		fail(c, CWC_E_INTERNAL, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < plan.n_parts; i++) {
		res.parts[i] = (struct cwc_resv_part){
			.disk_id = rl.disks[plan.parts[i].disk].id,
			.task = plan.parts[i].task,
			.requests = plan.parts[i].requests,
			.stride = plan.parts[i].stride,
		};
	}
	res.n_parts = plan.n_parts;
	/* Room first, then the database (which gives the id), then memory,
	 * which can no longer fail. */
	r = resv_room(srv);
	if (r == 0)
		r = resv_store(srv, &res);
	if (r < 0) {
		cwc_resv_free_parts(&res);
		if (r == -ENOMEM)
			fail(c, CWC_E_INTERNAL, "out of memory");
		else
			fail_pool(c, r, "storing the reservation");
		goto done;
	}
	pthread_mutex_lock(&srv->lock);
	srv->resvs[srv->n_resvs++] = res;
	pthread_mutex_unlock(&srv->lock);
	if (srv->o.hooks.resv_changed)
		srv->o.hooks.resv_changed(srv->o.hooks.userdata, &res, true);
	*ret = resv_json(srv, &srv->resvs[srv->n_resvs - 1], true);
	out = 0;
done:
	for (size_t i = 0; tasks && i < rl.n_disks; i++)
		free(tasks[i]);
	free(tasks);
	return out;
}

static int resv_arg(struct ctx *c, size_t *ret_index)
{
	uint64_t id = 0;

	cwc_arg_uint(c->req, "id", &id);
	for (size_t i = 0; i < c->srv->n_resvs; i++) {
		if (!c->srv->resvs[i].is_static && c->srv->resvs[i].id == id) {
			*ret_index = i;
			return 0;
		}
	}
	return fail(c, CWC_E_NOT_FOUND, "no reservation %" PRIu64, id);
}

static int h_resv_list(struct ctx *c, json_object **ret)
{
	json_object *a = json_object_new_array();

	for (size_t i = 0; i < c->srv->n_resvs; i++)
		json_object_array_add(a, resv_json(c->srv, &c->srv->resvs[i], false));
	*ret = a;
	return 0;
}

static int h_resv_show(struct ctx *c, json_object **ret)
{
	size_t i;

	if (resv_arg(c, &i) < 0)
		return -1;
	*ret = resv_json(c->srv, &c->srv->resvs[i], true);
	return 0;
}

static int h_resv_release(struct ctx *c, json_object **ret)
{
	const char *e;
	uint64_t id;
	size_t i;
	int r;

	if (resv_arg(c, &i) < 0)
		return -1;
	id = c->srv->resvs[i].id;
	if (resv_exported(c->srv, id, &e))
		return fail(c, CWC_E_BUSY, "reservation %" PRIu64 " is bound to export %s", id, e);
	r = drop_resv(c->srv, i);
	if (r < 0)
		return fail_pool(c, r, "releasing the reservation");
	*ret = json_object_new_object();
	add(*ret, "id", cwc_json_u64(id));
	return 0;
}

/* ---- disks ------------------------------------------------------------- */

static int h_disk_list(struct ctx *c, json_object **ret)
{
	_cleanup_free_ struct cw_disk_info *d = NULL;
	size_t n = 0;
	int r = cw_disk_list(c->srv->pool, &d, &n);

	if (r < 0)
		return fail_pool(c, r, "listing disks");
	*ret = json_object_new_array();
	for (size_t i = 0; i < n; i++)
		json_object_array_add(*ret, disk_json(c->srv, &d[i]));
	return 0;
}

static int h_disk_add(struct ctx *c, json_object **ret)
{
	const char *path = cwc_arg_str(c->req, "path"), *tier_s = cwc_arg_str(c->req, "tier");
	const char *name = cwc_arg_str(c->req, "name");
	const char *emulate = cwc_arg_str(c->req, "emulate");
	enum cw_tier tier = CW_TIER_HDD;
	struct cw_disk_info d;
	struct cw_model em;
	uint32_t id;
	int r;

	if (path[0] != '/')
		return fail(c, CWC_E_BAD_REQUEST, "disk path \"%s\" must be absolute", path);
	if (tier_s && cw_tier_parse(tier_s, &tier) < 0)
		return fail(c, CWC_E_BAD_REQUEST, "tier \"%s\": expected hdd or ssd", tier_s);
	if (name && !cw_name_valid(name))
		return fail(c, CWC_E_BAD_REQUEST,
			    "disk name \"%s\": 1-%d characters of A-Z a-z 0-9 . _ -, "
			    "not starting with . or -", name, CW_NAME_MAX);
	if (emulate && cw_model_from_string(emulate, &em) < 0)
		return fail(c, CWC_E_BAD_REQUEST, "emulate \"%.64s\": not a model preset (atlas2, "
			    "hdd7200, ssd) nor a model string \"cwmodel1 ...\"", emulate);
	r = cw_disk_add(c->srv->pool, path, tier, name, &id);
	if (r < 0)
		return fail_pool(c, r, path);
	if (emulate && (r = cw_disk_emulate_set(c->srv->pool, id, &em)) < 0) {
		cw_disk_remove(c->srv->pool, id);
		return fail_pool(c, r, path);
	}
	r = cw_disk_info(c->srv->pool, id, &d);
	if (r < 0)
		return fail_pool(c, r, path);
	c->srv->models[id].set = false;
	if (c->srv->o.hooks.disk_add) {
		char why[256] = "";

		/* The data path serves it from now on, or it is not added. */
		r = c->srv->o.hooks.disk_add(c->srv->o.hooks.userdata, &d, why, sizeof(why));
		if (r < 0) {
			int r2 = cw_disk_remove(c->srv->pool, id);

			if (r2 < 0)
				return fail(c, cwc_code_from_errno(r), "%s; it stays in the pool, "
					    "unserved (taking it out failed: %s)", why, strerror(-r2));
			return fail(c, cwc_code_from_errno(r), "%s; not added", why);
		}
	}
	*ret = disk_json(c->srv, &d);
	return 0;
}

static int disk_in_use(struct ctx *c, const struct cw_disk_info *d)
{
	return fail(c, CWC_E_BUSY, "disk %s still holds blocks of partitions (%" PRIu64 " of %"
		    PRIu64 " blocks in use)", d->name, d->data_blocks - d->free_blocks,
		    d->data_blocks);
}

static int h_disk_remove(struct ctx *c, json_object **ret)
{
	struct cw_disk_info d;
	bool closed = false;
	int r;

	if (find_disk(c, cwc_arg_str(c->req, "name"), &d) < 0)
		return -1;
	for (size_t i = 0; i < c->srv->n_resvs; i++)
		for (size_t j = 0; j < c->srv->resvs[i].n_parts; j++)
			if (c->srv->resvs[i].parts[j].disk_id == d.id && c->srv->resvs[i].is_static)
				return fail(c, CWC_E_BUSY, "disk %s serves the static reservation "
					    "of export %s", d.name, c->srv->resvs[i].export_name);
			else if (c->srv->resvs[i].parts[j].disk_id == d.id)
				return fail(c, CWC_E_BUSY, "disk %s serves reservation %" PRIu64,
					    d.name, c->srv->resvs[i].id);
	if (d.free_blocks != d.data_blocks)
		return disk_in_use(c, &d);
	if (c->srv->o.hooks.disk_remove) {
		char why[256] = "";

		r = c->srv->o.hooks.disk_remove(c->srv->o.hooks.userdata, &d, why, sizeof(why));
		if (r < 0 && r != -ENOENT)
			return fail(c, cwc_code_from_errno(r), "%s", why);
		closed = r == 0;
	}
	r = cw_disk_remove(c->srv->pool, d.id);
	if (r < 0 && closed && c->srv->o.hooks.disk_add) {
		char why[256] = "";

		/* Still in the pool: the data path takes it back. */
		if (c->srv->o.hooks.disk_add(c->srv->o.hooks.userdata, &d, why, sizeof(why)) < 0)
			return fail(c, cwc_code_from_errno(r), "disk %s: the pool kept it (%s) "
				    "but it is no longer served: %s", d.name, strerror(-r), why);
	}
	if (r == -EBUSY)
		return disk_in_use(c, &d);
	if (r < 0)
		return fail_pool(c, r, d.name);
	c->srv->models[d.id].set = false;
	*ret = json_object_new_object();
	add(*ret, "name", jstr(d.name));
	add(*ret, "id", json_object_new_int64(d.id));
	return 0;
}

/* Reservations with a part on the disk: admitted with its current model,
 * whose service times a new model would leave unchecked. */
static size_t disk_streams(const struct cwc_server *srv, uint32_t disk_id)
{
	size_t n = 0;

	for (size_t i = 0; i < srv->n_resvs; i++)
		for (size_t j = 0; j < srv->resvs[i].n_parts; j++)
			n += srv->resvs[i].parts[j].disk_id == disk_id;
	return n;
}

static int refuse_if_streams(struct ctx *c, const struct cw_disk_info *d)
{
	size_t n = disk_streams(c->srv, d->id);

	if (!n)
		return 0;
	return fail(c, CWC_E_BUSY, "disk %s carries %zu stream reservation part%s, admitted with "
		    "its current model: release them before calibrating it", d->name, n,
		    n == 1 ? "" : "s");
}

int ctl_calib_prepare(struct ctx *c, struct calib *k)
{
	bool quick = false;

	memset(k, 0, sizeof(*k));
	if (find_disk(c, cwc_arg_str(c->req, "name"), &k->disk) < 0)
		return -1;
	if (k->disk.state != CW_DISK_PRESENT)
		return fail(c, CWC_E_UNAVAILABLE, "disk %s is %s", k->disk.name,
			    state_name(k->disk.state));
	if (refuse_if_streams(c, &k->disk) < 0)
		return -1;
	cwc_arg_bool(c->req, "quick", &quick);
	cw_calib_opts_init(&k->opts);
	k->opts.tier = k->disk.tier;
	k->opts.name = k->disk.name;
	k->opts.span_bytes = k->disk.capacity_bytes;
	k->opts.margin_ppm = c->srv->o.calib_margin_ppm;
	if (cw_disk_emulate_get(c->srv->pool, k->disk.id, &k->emulate) == 0)
		k->opts.emulate = &k->emulate;	/* measure the disk it emulates */
	if (quick) {
		/* A few samples of few points, for tests and first looks. */
		k->quick_sizes[0] = 64 << 10;
		k->quick_sizes[1] = 1 << 20;
		k->opts.seek_distances = 4;
		k->opts.zones = 2;
		k->opts.zone_read_bytes = 1 << 20;
		k->opts.block_sizes = k->quick_sizes;
		k->opts.n_block_sizes = 2;
		k->opts.repeats = 3;
		k->opts.percentile = 100;
	}
	return 0;
}

/* A regular file with less than half its size allocated. */
static bool sparse_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       (uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size / 2;
}

/* Stores the measured model and builds the reply. */
int ctl_calib_finish(struct ctx *c, struct calib *k, json_object **ret)
{
	struct cw_disk_info now;
	char text[4096];
	int64_t worst;
	int r;

	if (k->result < 0)
		return fail(c, cwc_code_from_errno(k->result), "calibrating %s (%s): %s",
			    k->disk.name, k->disk.path, strerror(-k->result));
	/* The disk may have left the pool (and its id been reused) meanwhile. */
	if (cw_disk_info(c->srv->pool, k->disk.id, &now) < 0 ||
	    memcmp(now.uuid, k->disk.uuid, sizeof(now.uuid)) != 0)
		return fail(c, CWC_E_NOT_FOUND, "disk %s left the pool during its calibration",
			    k->disk.name);
	/* ... or a stream been admitted on it with the old model. */
	if (refuse_if_streams(c, &k->disk) < 0)
		return -1;
	r = cw_model_validate(&k->model);
	if (r < 0)
		return fail(c, cwc_code_from_errno(r), "the measured model of %s is not usable: %s",
			    k->disk.name, strerror(-r));
	/* Stored first: what the pool holds survives a restart. */
	r = cw_disk_model_set(c->srv->pool, k->disk.id, &k->model, true);
	if (r < 0)
		return fail_pool(c, r, "storing the measured model");
	r = cwc_server_set_model(c->srv, k->disk.id, &k->model, true);
	if (r < 0)
		return fail(c, cwc_code_from_errno(r), "the measured model of %s is not usable: %s",
			    k->disk.name, strerror(-r));
	r = cw_model_format(&k->model, text, sizeof(text));
	if (r < 0 || (size_t)r >= sizeof(text))
		text[0] = '\0';
	if (c->srv->o.hooks.model_changed)
		c->srv->o.hooks.model_changed(c->srv->o.hooks.userdata, k->disk.id, &k->model, text);
	*ret = json_object_new_object();
	add(*ret, "disk", jstr(k->disk.name));
	add(*ret, "model", jstr(text));
	if (cw_model_service_ns(&k->model, 0, 0, cw_pool_block_size(c->srv->pool), &worst) == 0)
		add(*ret, "block_service_ns", json_object_new_int64(worst));
	if (!k->opts.emulate && sparse_file(k->disk.path))
		add(*ret, "warning", jstr("the disk is a sparse file: its holes read without touching "
					  "the device, so this model is too fast; write the file "
					  "out (e.g. with dd) and calibrate again"));
	return 0;
}

static int calib_progress(const char *phase, unsigned done, unsigned total, void *userdata)
{
	struct ctx *c = userdata;
	_cleanup_free_ char *line = cwc_format_progress(phase, done, total);

	if (line)
		c->emit(line, c->emit_data);
	return 0;
}

static int h_disk_calibrate(struct ctx *c, json_object **ret)
{
	struct calib k;

	if (ctl_calib_prepare(c, &k) < 0)
		return -1;
	k.result = c->srv->o.calibrate(k.disk.path, &k.opts, calib_progress, c, &k.model);
	return ctl_calib_finish(c, &k, ret);
}

/* ---- partitions -------------------------------------------------------- */

static json_object *part_json(const struct cw_part_info *p)
{
	json_object *o = json_object_new_object();

	add(o, "id", cwc_json_u64(p->id));
	add(o, "name", jstr(p->name));
	add(o, "size", cwc_json_u64(p->size_bytes));
	add(o, "blocks", cwc_json_u64(p->nblocks));
	add(o, "policy", jstr(cw_placement_name(p->opts.placement)));
	add(o, "tier", jstr(cw_tier_pref_name(p->opts.tier)));
	add(o, "zone", jstr(cw_zone_pref_name(p->opts.zone)));
	add(o, "available", json_object_new_boolean(p->available));
	return o;
}

static int h_part_list(struct ctx *c, json_object **ret)
{
	_cleanup_free_ struct cw_part_info *p = NULL;
	size_t n = 0;
	int r = cw_part_list(c->srv->pool, &p, &n);

	if (r < 0)
		return fail_pool(c, r, "listing partitions");
	*ret = json_object_new_array();
	for (size_t i = 0; i < n; i++)
		json_object_array_add(*ret, part_json(&p[i]));
	return 0;
}

/* The reply of a command that changed a partition: its state now. */
static int reply_part(struct ctx *c, struct cw_part *part, const char *name, json_object **ret)
{
	struct cw_part_info pi;
	int r = cw_part_info(part, &pi);

	if (r < 0)
		return fail_pool(c, r, name);
	*ret = part_json(&pi);
	return 0;
}

static int h_part_create(struct ctx *c, json_object **ret)
{
	const char *name = cwc_arg_str(c->req, "name"), *s;
	struct cw_part_opts o = { .placement = CW_PLACE_ROTATION };
	struct cw_part *part;
	uint64_t size = 0;
	int r;

	cwc_arg_uint(c->req, "size", &size);
	if (!cw_name_valid(name))
		return fail(c, CWC_E_BAD_REQUEST,
			    "partition name \"%s\": 1-%d characters of A-Z a-z 0-9 . _ -, "
			    "not starting with . or -", name, CW_NAME_MAX);
	if ((s = cwc_arg_str(c->req, "policy")) && cw_placement_parse(s, &o.placement) < 0)
		return fail(c, CWC_E_BAD_REQUEST, "policy \"%s\": expected rotation, random or single", s);
	if ((s = cwc_arg_str(c->req, "tier")) && cw_tier_pref_parse(s, &o.tier) < 0)
		return fail(c, CWC_E_BAD_REQUEST, "tier \"%s\": expected hdd, ssd or none", s);
	if ((s = cwc_arg_str(c->req, "zone")) && cw_zone_pref_parse(s, &o.zone) < 0)
		return fail(c, CWC_E_BAD_REQUEST, "zone \"%s\": expected outer, inner or any", s);
	if ((s = cwc_arg_str(c->req, "disk"))) {
		struct cw_disk_info d;

		if (o.placement != CW_PLACE_SINGLE)
			return fail(c, CWC_E_BAD_REQUEST, "a disk is chosen only with policy single");
		if (find_disk(c, s, &d) < 0)
			return -1;
		o.disk_id = d.id;
	}
	r = cw_part_create(c->srv->pool, name, size, &o, &part);
	if (r < 0)
		return fail_pool(c, r, name);
	return reply_part(c, part, name, ret);
}

static int h_part_show(struct ctx *c, json_object **ret)
{
	const char *name = cwc_arg_str(c->req, "name");
	uint64_t blocks_on[CW_DISKS_MAX + 1] = { 0 };
	_cleanup_free_ uint32_t *ids = NULL;
	json_object *per_disk, *runs;
	struct cw_part_info pi;
	struct cw_part *part;
	uint64_t pb, nruns = 0;
	struct cw_extent run = { 0 };
	uint64_t run_first = 0;
	int r;

	if (find_part(c, name, &part) < 0)
		return -1;
	r = cw_part_info(part, &pi);
	if (r < 0)
		return fail_pool(c, r, name);
	pb = cw_part_block_size(part);
	*ret = part_json(&pi);
	add(*ret, "block_size", cwc_json_u64(pb));
	per_disk = json_object_new_array();
	runs = json_object_new_array();
	ids = calloc(pi.nblocks ? pi.nblocks : 1, sizeof(*ids));
	if (!ids)
		return fail(c, CWC_E_INTERNAL, "out of memory");
	if (pi.nblocks && pi.available && cw_part_block_disks(part, 0, pi.nblocks, ids) == 0) {
		/* Runs: logical blocks that are consecutive on one disk. */
		for (uint64_t k = 0; k <= pi.nblocks; k++) {
			struct cw_extent e = { 0 };
			bool joins;

			if (k < pi.nblocks) {
				blocks_on[ids[k]]++;
				if (cw_part_map(part, k * pb, pb, &e) < 0)
					break;
			}
			joins = k > 0 && k < pi.nblocks && e.disk_id == run.disk_id &&
				e.phys_offset == run.phys_offset + run.length;
			if (joins) {
				run.length += pb;
				continue;
			}
			if (k > 0 && nruns++ < PART_RUNS_MAX) {
				json_object *ro = json_object_new_object();

				add(ro, "first_block", cwc_json_u64(run_first));
				add(ro, "blocks", cwc_json_u64(run.length / pb));
				add(ro, "disk_id", json_object_new_int64(run.disk_id));
				add(ro, "offset", cwc_json_u64(run.phys_offset));
				json_object_array_add(runs, ro);
			}
			run = (struct cw_extent){ e.disk_id, e.phys_offset, pb };
			run_first = k;
		}
	}
	for (uint32_t id = 1; id <= CW_DISKS_MAX; id++) {
		json_object *d;
		struct cw_disk_info di;

		if (!blocks_on[id])
			continue;
		d = json_object_new_object();
		add(d, "disk_id", json_object_new_int64(id));
		if (cw_disk_info(c->srv->pool, id, &di) == 0)
			add(d, "disk", jstr(di.name));
		add(d, "blocks", cwc_json_u64(blocks_on[id]));
		add(d, "bytes", cwc_json_u64(blocks_on[id] * pb));
		json_object_array_add(per_disk, d);
	}
	add(*ret, "per_disk", per_disk);
	add(*ret, "runs", runs);
	add(*ret, "runs_total", cwc_json_u64(nruns));
	return 0;
}

/* Reservations and exports that hold on to partition name. */
static int part_users(struct ctx *c, const char *name, uint64_t below_bytes)
{
	for (size_t i = 0; i < c->srv->n_exports; i++)
		if (below_bytes == UINT64_MAX && strcmp(c->srv->exports[i].part, name) == 0)
			return fail(c, CWC_E_BUSY, "partition %s is exported as %s", name,
				    c->srv->exports[i].name);
	for (size_t i = 0; i < c->srv->n_resvs; i++) {
		const struct cwc_resv *r = &c->srv->resvs[i];

		if (strcmp(r->part, name) != 0 ||
		    (below_bytes != UINT64_MAX && r->range_end_bytes <= below_bytes))
			continue;
		if (r->is_static)
			return fail(c, CWC_E_BUSY, "the static reservation of export %s covers %s "
				    "up to byte %" PRIu64, r->export_name, name, r->range_end_bytes);
		return fail(c, CWC_E_BUSY, "reservation %" PRIu64 " covers %s up to byte %"
			    PRIu64, r->id, name, r->range_end_bytes);
	}
	return 0;
}

static int h_part_resize(struct ctx *c, json_object **ret)
{
	const char *name = cwc_arg_str(c->req, "name");
	struct cw_part *part;
	uint64_t size = 0, bs, have;
	int r;

	cwc_arg_uint(c->req, "size", &size);
	if (find_part(c, name, &part) < 0 || part_users(c, name, size) < 0)
		return -1;
	bs = cw_part_block_size(part);
	have = cw_part_nblocks(part);
	if (size / bs + (size % bs != 0) < have) {
		/* A client connected now was told the old size, and NBD cannot
		 * take it back: its requests could reach blocks the shrink
		 * gives to another partition. */
		for (size_t i = 0; i < c->srv->n_exports; i++)
			if (strcmp(c->srv->exports[i].part, name) == 0)
				return fail(c, CWC_E_BUSY, "partition %s is exported as %s: it can "
					    "grow, but shrinks only once the export is removed", name,
					    c->srv->exports[i].name);
	}
	r = cw_part_resize(part, size);
	if (r < 0)
		return fail_pool(c, r, name);
	for (size_t i = 0; cw_part_nblocks(part) > have && i < c->srv->n_exports; i++) {
		const struct cwc_export *e = &c->srv->exports[i];
		char why[256] = "";

		if (strcmp(e->part, name) != 0 || !c->srv->o.hooks.export_resize)
			continue;
		/* New connections get the new size; open ones keep theirs. */
		r = c->srv->o.hooks.export_resize(c->srv->o.hooks.userdata, e, part, why,
						  sizeof(why));
		if (r < 0)
			return fail(c, cwc_code_from_errno(r), "partition %s grew, but export %s "
				    "keeps its old size: %s", name, e->name, why);
	}
	return reply_part(c, part, name, ret);
}

static int h_part_delete(struct ctx *c, json_object **ret)
{
	const char *name = cwc_arg_str(c->req, "name");
	struct cw_part *part;
	int r;

	if (find_part(c, name, &part) < 0 || part_users(c, name, UINT64_MAX) < 0)
		return -1;
	r = cw_part_delete(part);
	if (r < 0)
		return fail_pool(c, r, name);
	*ret = json_object_new_object();
	add(*ret, "name", jstr(name));
	return 0;
}

/* ---- exports ----------------------------------------------------------- */

static json_object *export_json(const struct cwc_export *e)
{
	json_object *o = json_object_new_object();

	add(o, "name", jstr(e->name));
	add(o, "part", jstr(e->part));
	add(o, "readonly", json_object_new_boolean(e->readonly));
	add(o, "resv", e->resv_id ? cwc_json_u64(e->resv_id) : NULL);
	return o;
}

static int h_export_list(struct ctx *c, json_object **ret)
{
	*ret = json_object_new_array();
	for (size_t i = 0; i < c->srv->n_exports; i++)
		json_object_array_add(*ret, export_json(&c->srv->exports[i]));
	return 0;
}

static const struct cw_export_rec *export_rec(const struct cwc_export *e, uint64_t part_id,
					      struct cw_export_rec *ret)
{
	memset(ret, 0, sizeof(*ret));
	snprintf(ret->name, sizeof(ret->name), "%s", e->name);
	ret->part_id = part_id;
	ret->readonly = e->readonly;
	ret->resv_id = e->resv_id;
	return ret;
}

static int h_export_add(struct ctx *c, json_object **ret)
{
	struct cwc_server *srv = c->srv;
	const char *pname = cwc_arg_str(c->req, "part"), *ename = cwc_arg_str(c->req, "name");
	struct cwc_export e = { 0 };
	struct cw_export_rec rec;
	struct cw_part_info pi;
	struct cw_part *part;
	struct cwc_resv *rv;
	int r;

	if (!srv->o.hooks.export_add)
		return fail(c, CWC_E_NOT_SUPPORTED, "this server has no data path to export through");
	if (find_part(c, pname, &part) < 0)
		return -1;
	r = cw_part_info(part, &pi);
	if (r < 0)
		return fail_pool(c, r, pname);
	if (!pi.available)
		return fail(c, CWC_E_UNAVAILABLE, "partition %s has blocks on a missing disk", pname);
	if (!ename)
		ename = pi.name;
	if (!cw_name_valid(ename))
		return fail(c, CWC_E_BAD_REQUEST, "export name \"%s\" is not valid", ename);
	for (size_t i = 0; i < srv->n_exports; i++)
		if (strcmp(srv->exports[i].name, ename) == 0)
			return fail(c, CWC_E_EXISTS, "export %s exists", ename);
	if (srv->n_exports >= EXPORT_MAX)
		return fail(c, CWC_E_NO_SPACE, "too many exports (%d)", EXPORT_MAX);
	snprintf(e.name, sizeof(e.name), "%s", ename);
	snprintf(e.part, sizeof(e.part), "%s", pi.name);
	cwc_arg_bool(c->req, "readonly", &e.readonly);
	if (cwc_arg_uint(c->req, "resv", &e.resv_id)) {
		rv = find_resv(srv, e.resv_id);
		if (!rv)
			return fail(c, CWC_E_NOT_FOUND, "no reservation %" PRIu64, e.resv_id);
		if (strcmp(rv->part, pi.name) != 0)
			return fail(c, CWC_E_BAD_REQUEST, "reservation %" PRIu64
				    " is on partition %s, not %s", e.resv_id, rv->part, pi.name);
	}
	{
		struct cwc_export *ne = realloc(srv->exports, (srv->n_exports + 1) * sizeof(*ne));

		if (!ne)
			return fail(c, CWC_E_INTERNAL, "out of memory");
		srv->exports = ne;
	}
	r = cw_export_add(srv->pool, export_rec(&e, pi.id, &rec));
	if (r < 0)
		return fail_pool(c, r, "storing the export");
	r = srv->o.hooks.export_add(srv->o.hooks.userdata, &e, part);
	if (r < 0) {
		int r2 = cw_export_remove(srv->pool, e.name);

		return fail(c, cwc_code_from_errno(r), "exporting %s: %s%s", e.name, strerror(-r),
			    r2 < 0 ? " (and it stays stored: removing it from the pool failed)"
				   : "");
	}
	srv->exports[srv->n_exports++] = e;
	*ret = export_json(&e);
	return 0;
}

static int h_export_remove(struct ctx *c, json_object **ret)
{
	struct cwc_server *srv = c->srv;
	const char *name = cwc_arg_str(c->req, "name");
	int r;

	for (size_t i = 0; i < srv->n_exports; i++) {
		struct cw_export_rec rec;
		struct cw_part_info pi = { 0 };
		struct cw_part *part;

		if (strcmp(srv->exports[i].name, name) != 0)
			continue;
		/* The database first; put back if the data path refuses. */
		if (cw_part_lookup(srv->pool, srv->exports[i].part, &part) == 0)
			cw_part_info(part, &pi);
		export_rec(&srv->exports[i], pi.id, &rec);
		r = cw_export_remove(srv->pool, name);
		if (r < 0)
			return fail_pool(c, r, "removing the export");
		if (srv->o.hooks.export_remove) {
			r = srv->o.hooks.export_remove(srv->o.hooks.userdata, &srv->exports[i]);
			if (r < 0) {
				int r2 = cw_export_add(srv->pool, &rec);

				return fail(c, cwc_code_from_errno(r), "removing export %s: %s%s",
					    name, strerror(-r),
					    r2 < 0 ? " (it is gone from the pool all the same)" : "");
			}
		}
		*ret = export_json(&srv->exports[i]);
		memmove(&srv->exports[i], &srv->exports[i + 1],
			(srv->n_exports - i - 1) * sizeof(srv->exports[0]));
		srv->n_exports--;
		return 0;
	}
	return fail(c, CWC_E_NOT_FOUND, "no export %s", name);
}

/* ---- status and stats -------------------------------------------------- */

static int h_status(struct ctx *c, json_object **ret)
{
	struct cwc_server *srv = c->srv;
	char uuid[CW_UUID_STRING_LEN + 1];
	json_object *pool, *v;
	uint64_t size = 0, free_b = 0;
	uint32_t bs = cw_pool_block_size(srv->pool);

	*ret = json_object_new_object();
	pool = json_object_new_object();
	cw_uuid_format(cw_pool_uuid(srv->pool), uuid);
	add(pool, "uuid", jstr(uuid));
	add(pool, "block_size", cwc_json_u64(bs));
	add(pool, "missing_disks", json_object_new_int64(cw_pool_missing_disks(srv->pool)));
	add(*ret, "version", jstr(cw_version()));
	if (h_disk_list(c, &v) < 0)
		return -1;
	for (size_t i = 0; i < json_object_array_length(v); i++) {
		json_object *d = json_object_array_get_idx(v, i), *x;

		if (json_object_object_get_ex(d, "size", &x))
			size += (uint64_t)json_object_get_int64(x);
		if (json_object_object_get_ex(d, "free", &x))
			free_b += (uint64_t)json_object_get_int64(x);
	}
	add(pool, "size", cwc_json_u64(size));
	add(pool, "free", cwc_json_u64(free_b));
	add(*ret, "pool", pool);
	add(*ret, "disks", v);
	if (h_part_list(c, &v) < 0)
		return -1;
	add(*ret, "partitions", v);
	h_resv_list(c, &v);
	add(*ret, "reservations", v);
	h_export_list(c, &v);
	add(*ret, "exports", v);
	add(*ret, "data_path", json_object_new_boolean(srv->o.hooks.export_add != NULL));
	return 0;
}

static int h_stats(struct ctx *c, json_object **ret)
{
	struct cwc_server *srv = c->srv;
	struct cwc_stats st = { 0 };
	json_object *disks, *resvs;
	int r;

	if (!srv->o.hooks.stats)
		return fail(c, CWC_E_NOT_SUPPORTED, "this server has no data path to count");
	r = srv->o.hooks.stats(srv->o.hooks.userdata, &st);
	if (r < 0)
		return fail(c, cwc_code_from_errno(r), "collecting counters: %s", strerror(-r));
	disks = json_object_new_array();
	for (size_t i = 0; i < st.n_disks; i++) {
		const struct cwc_disk_stats *s = &st.disks[i];
		json_object *o = json_object_new_object();
		struct cw_disk_info d;

		add(o, "disk_id", json_object_new_int64(s->disk_id));
		if (cw_disk_info(srv->pool, s->disk_id, &d) == 0)
			add(o, "disk", jstr(d.name));
		add(o, "rt_requests", cwc_json_u64(s->rt_requests));
		add(o, "rt_misses", cwc_json_u64(s->rt_misses));
		add(o, "be_requests", cwc_json_u64(s->be_requests));
		add(o, "be_p50_ns", json_object_new_int64(s->be_p50_ns));
		add(o, "be_p99_ns", json_object_new_int64(s->be_p99_ns));
		add(o, "be_max_ns", json_object_new_int64(s->be_max_ns));
		add(o, "slack_used_ns", json_object_new_int64(s->slack_used_ns));
		add(o, "read_bytes", cwc_json_u64(s->read_bytes));
		add(o, "written_bytes", cwc_json_u64(s->written_bytes));
		json_object_array_add(disks, o);
	}
	resvs = json_object_new_array();
	for (size_t i = 0; i < st.n_resvs; i++) {
		const struct cwc_resv_stats *s = &st.resvs[i];
		json_object *o = json_object_new_object();

		add(o, "id", cwc_json_u64(s->resv_id));
		add(o, "requests", cwc_json_u64(s->requests));
		add(o, "misses", cwc_json_u64(s->misses));
		add(o, "worst_late_ns", json_object_new_int64(s->worst_late_ns));
		json_object_array_add(resvs, o);
	}
	free(st.disks);
	free(st.resvs);
	*ret = json_object_new_object();
	add(*ret, "disks", disks);
	add(*ret, "reservations", resvs);
	return 0;
}

typedef int (*handler_fn)(struct ctx *c, json_object **ret);

static const handler_fn handlers[CWC_CMD_COUNT] = {
	[CWC_CMD_STATUS] = h_status,
	[CWC_CMD_DISK_ADD] = h_disk_add,
	[CWC_CMD_DISK_LIST] = h_disk_list,
	[CWC_CMD_DISK_REMOVE] = h_disk_remove,
	[CWC_CMD_DISK_CALIBRATE] = h_disk_calibrate,
	[CWC_CMD_PART_CREATE] = h_part_create,
	[CWC_CMD_PART_LIST] = h_part_list,
	[CWC_CMD_PART_SHOW] = h_part_show,
	[CWC_CMD_PART_RESIZE] = h_part_resize,
	[CWC_CMD_PART_DELETE] = h_part_delete,
	[CWC_CMD_RESV_CREATE] = h_resv_create,
	[CWC_CMD_RESV_LIST] = h_resv_list,
	[CWC_CMD_RESV_SHOW] = h_resv_show,
	[CWC_CMD_RESV_RELEASE] = h_resv_release,
	[CWC_CMD_EXPORT_LIST] = h_export_list,
	[CWC_CMD_EXPORT_ADD] = h_export_add,
	[CWC_CMD_EXPORT_REMOVE] = h_export_remove,
	[CWC_CMD_STATS] = h_stats,
};

void ctl_emit_error(cwc_emit_fn emit, void *data, enum cwc_code code, const char *msg,
		       json_object *details)
{
	_cleanup_free_ char *line = cwc_format_error(code, msg, details);

	if (line)
		emit(line, data);
}

/* Parses and checks the rights for one line: false after emitting the
 * error reply; true with *req to run (release with cwc_request_done). */
bool ctl_request_admit(struct cwc_server *srv, const char *line, size_t len, bool can_read,
			  bool can_change, cwc_emit_fn emit, void *userdata, struct cwc_request *req)
{
	const struct cwc_cmd_spec *spec;
	struct cwc_fail f;

	(void)srv;
	if (cwc_request_parse(line, len, req, &f) < 0) {
		ctl_emit_error(emit, userdata, f.code, f.message, NULL);
		return false;
	}
	spec = cwc_cmd_spec(req->cmd);
	if (!(spec->access == CWC_ACCESS_READ ? can_read : can_change)) {
		ctl_emit_error(emit, userdata, CWC_E_PERMISSION_DENIED,
			   spec->access == CWC_ACCESS_READ
				   ? "permission denied: reading needs root or the clockwise group"
				   : "permission denied: changes need root or the admin group",
			   NULL);
		cwc_request_done(req);
		return false;
	}
	return true;
}

void ctl_request_run(struct cwc_server *srv, const struct cwc_request *req, cwc_emit_fn emit,
			void *userdata)
{
	struct ctx c = { .srv = srv, .req = req, .emit = emit, .emit_data = userdata };
	json_object *result = NULL;
	_cleanup_free_ char *out = NULL;

	ctl_expire_resvs(srv);
	if (handlers[req->cmd](&c, &result) < 0) {
		ctl_emit_error(emit, userdata, c.code, c.msg, c.details);
		json_object_put(c.details);
		return;
	}
	out = cwc_format_ok(result);
	json_object_put(result);
	if (out)
		emit(out, userdata);
	else
		ctl_emit_error(emit, userdata, CWC_E_INTERNAL, "out of memory", NULL);
}

void cwc_server_handle_line(struct cwc_server *srv, const char *line, size_t len, bool can_read,
			    bool can_change, cwc_emit_fn emit, void *userdata)
{
	struct cwc_request req;

	if (!ctl_request_admit(srv, line, len, can_read, can_change, emit, userdata, &req))
		return;
	ctl_request_run(srv, &req, emit, userdata);
	cwc_request_done(&req);
}

/* ---- state from the pool ----------------------------------------------- */

/* Takes back what ctl_state_load told the hooks, and frees it. */
static void state_unload(struct cwc_server *srv, size_t exports_served)
{
	for (size_t i = exports_served; i-- > 0;)
		if (srv->o.hooks.export_remove)
			srv->o.hooks.export_remove(srv->o.hooks.userdata, &srv->exports[i]);
	for (size_t i = srv->n_resvs; i-- > 0;) {
		if (srv->o.hooks.resv_changed)
			srv->o.hooks.resv_changed(srv->o.hooks.userdata, &srv->resvs[i], false);
		cwc_resv_free_parts(&srv->resvs[i]);
	}
	free(srv->resvs);
	free(srv->exports);
	srv->resvs = NULL;
	srv->exports = NULL;
	srv->n_resvs = srv->n_exports = 0;
	for (uint32_t id = 0; id <= CW_DISKS_MAX; id++)
		srv->models[id].set = false;
}

static int load_models(struct cwc_server *srv)
{
	_cleanup_free_ struct cw_disk_info *disks = NULL;
	struct cw_model m;
	bool calibrated;
	size_t n;
	int r;

	r = cw_disk_list(srv->pool, &disks, &n);
	for (size_t i = 0; r == 0 && i < n; i++) {
		r = cw_disk_model_get(srv->pool, disks[i].id, &m, &calibrated);
		if (r == -ENOENT) {
			r = 0;		/* the tier's preset, as before any calibration */
			continue;
		}
		if (r == 0)
			r = cwc_server_set_model(srv, disks[i].id, &m, calibrated);
	}
	return r;
}

static const char *part_name(const struct cw_part_info *parts, size_t n, uint64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (parts[i].id == id)
			return parts[i].name;
	return NULL;
}

static int load_resvs(struct cwc_server *srv, const struct cw_part_info *parts, size_t n_parts)
{
	struct cw_resv_rec *recs = NULL;
	int64_t by = wall_minus_mono(srv);
	size_t n;
	int r;

	r = cw_resv_list(srv->pool, &recs, &n);
	if (r < 0)
		return r;
	srv->resvs = calloc(n ? n : 1, sizeof(*srv->resvs));
	if (!srv->resvs)
		r = -ENOMEM;
	for (size_t i = 0; r == 0 && i < n; i++) {
		const char *name = part_name(parts, n_parts, recs[i].part_id);

		/* The database's keys make a missing partition impossible. */
		r = name ? resv_from_rec(&recs[i], name, by, &srv->resvs[i]) : -EUCLEAN;
		if (r == 0) {
			srv->n_resvs++;
			if (srv->o.hooks.resv_changed)
				srv->o.hooks.resv_changed(srv->o.hooks.userdata, &srv->resvs[i],
							  true);
		}
	}
	cw_resv_list_free(recs, n);
	return r;
}

/* Serves each stored export again; *ret_served counts the hook calls made. */
static int load_exports(struct cwc_server *srv, const struct cw_part_info *parts,
			size_t n_parts, size_t *ret_served)
{
	_cleanup_free_ struct cw_export_rec *recs = NULL;
	size_t n;
	int r;

	r = cw_export_list(srv->pool, &recs, &n);
	if (r < 0)
		return r;
	srv->exports = calloc(n ? n : 1, sizeof(*srv->exports));
	if (!srv->exports)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct cwc_export *e = &srv->exports[i];
		const char *name = part_name(parts, n_parts, recs[i].part_id);
		struct cw_part *part;

		if (!name)
			return -EUCLEAN;
		snprintf(e->name, sizeof(e->name), "%s", recs[i].name);
		snprintf(e->part, sizeof(e->part), "%s", name);
		e->readonly = recs[i].readonly;
		e->resv_id = recs[i].resv_id;
		srv->n_exports++;
		if (!srv->o.hooks.export_add)
			continue;	/* listed; served once a data path runs */
		r = cw_part_lookup(srv->pool, name, &part);
		if (r == 0)
			r = srv->o.hooks.export_add(srv->o.hooks.userdata, e, part);
		/* A partition on a missing disk cannot be served: its export
		 * stays listed (and stored) and the rest are served, as a
		 * degraded pool should be; the data path has logged why. */
		if (r == -ENODEV)
			r = 0;
		if (r < 0)
			return r;
		/* Counted either way: unloading removes every listed export and
		 * the data path answers -ENOENT for one it never served. */
		(*ret_served)++;
	}
	return 0;
}

int ctl_state_load(struct cwc_server *srv)
{
	_cleanup_free_ struct cw_part_info *parts = NULL;
	size_t n_parts, served = 0;
	int r;

	r = load_models(srv);
	if (r == 0)
		r = cw_part_list(srv->pool, &parts, &n_parts);
	if (r == 0)
		r = load_resvs(srv, parts, n_parts);
	if (r == 0)
		r = load_exports(srv, parts, n_parts, &served);
	if (r < 0) {
		state_unload(srv, served);
		return r;
	}
	/* Spans that ended while the server was down end now. */
	ctl_expire_resvs(srv);
	return 0;
}
