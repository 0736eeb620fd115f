/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Disk commands of the control server: list, add, remove, calibrate and
 * plan.  A disk's model and plan are the admission state's
 * (clockwise/admit-state.h); a calibration hands it the measured model,
 * which it stores and admits every stream of the disk again with.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "control-internal.h"

static json_object *disk_json(struct cwc_server *srv, const struct cw_disk_info *d)
{
	json_object *o = json_object_new_object(), *m = json_object_new_object();
	enum cw_admit_model_source src;
	struct cw_disk_plan plan;
	struct cw_model model;
	uint32_t bs = cw_pool_block_size(srv->pool);

	cwc_add(o, "id", json_object_new_int64(d->id));
	cwc_add(o, "name", cwc_jstr(d->name));
	cwc_add(o, "tier", cwc_jstr(cw_tier_name(d->tier)));
	/* The failure domain: named, or the disk's own (its name). */
	cwc_add(o, "domain", cwc_jstr(d->domain[0] ? d->domain : d->name));
	cwc_add(o, "state", cwc_jstr(cwc_disk_state_name(d->state)));
	cwc_add(o, "spare", json_object_new_boolean(d->spare));
	/* failed, and no spare carries its streams: why (degrade.c) */
	if (d->unreplaced[0])
		cwc_add(o, "unreplaced", cwc_jstr(d->unreplaced));
	cwc_add(o, "path", cwc_jstr(d->path));
	cwc_add(o, "capacity", cw_ctl_json_u64(d->capacity_bytes));
	cwc_add(o, "size", cw_ctl_json_u64(d->data_blocks * bs));
	cwc_add(o, "free", cw_ctl_json_u64(d->free_blocks * bs));
	cwc_add(o, "blocks", cw_ctl_json_u64(d->data_blocks));
	cwc_add(o, "free_blocks", cw_ctl_json_u64(d->free_blocks));
	if (cw_admit_state_get_model(srv->adm, d->id, &model, &src) == 0) {
		char text[4096];

		cwc_add(m, "name", cwc_jstr(model.name));
		cwc_add(m, "calibrated", json_object_new_boolean(src == CW_ADMIT_MODEL_CALIBRATED));
		cwc_add(m, "source", cwc_jstr(cw_admit_model_source_name(src)));
		if (cw_model_format(&model, text, sizeof(text)) > 0)
			cwc_add(m, "text", cwc_jstr(text));	/* the cwmodel1 line */
		if (model.tail_permille)
			cwc_add(m, "tail_percentile",
				json_object_new_double(model.tail_permille / 10.0));
	}
	cwc_add(o, "model", m);
	if (cw_disk_emulate_get(srv->pool, d->id, &model) == 0) {
		char text[4096];

		m = json_object_new_object();
		cwc_add(m, "name", cwc_jstr(model.name));
		if (cw_model_format(&model, text, sizeof(text)) > 0)
			cwc_add(m, "text", cwc_jstr(text));
		cwc_add(o, "emulate", m);
	}
	/* The plan tests every task at once: the worst moment. */
	if (cw_admit_state_plan(srv->adm, d->id, &plan) == 0) {
		cwc_add(o, "tasks", json_object_new_int64((int64_t)plan.n_tasks));
		cwc_add(o, "utilization", json_object_new_double(plan.utilization));
		cwc_add(o, "delta_l_ns", cwc_jns(plan.delta_l_ns));
	}
	return o;
}

int cwc_cmd_disk_list(struct ctx *c, json_object **ret)
{
	_cleanup_free_ struct cw_disk_info *d = NULL;
	size_t n = 0;
	int r = cw_disk_list(c->srv->pool, &d, &n);

	if (r < 0)
		return cwc_fail_pool(c, r, "listing disks");
	*ret = json_object_new_array();
	for (size_t i = 0; i < n; i++)
		json_object_array_add(*ret, disk_json(c->srv, &d[i]));
	return 0;
}

int cwc_cmd_disk_add(struct ctx *c, json_object **ret)
{
	const char *path = cw_ctl_arg_str(c->req, "path"), *tier_s = cw_ctl_arg_str(c->req, "tier");
	const char *name = cw_ctl_arg_str(c->req, "name");
	const char *emulate = cw_ctl_arg_str(c->req, "emulate");
	const char *domain = cw_ctl_arg_str(c->req, "domain");
	struct cwc_server *srv = c->srv;
	enum cw_tier tier = cw_io_path_is_rbd(path) ? CW_TIER_RBD : CW_TIER_HDD;
	struct cw_disk_info d;
	struct cw_model em;
	char why[512] = "";
	uint32_t id;
	int r;

	if (path[0] != '/' && !cw_io_path_is_rbd(path))
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "disk path \"%s\" must be absolute, or "
				"rbd:POOL/IMAGE for an image on a Ceph cluster", path);
	if (tier_s && cw_tier_parse(tier_s, &tier) < 0)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "tier \"%s\": expected hdd, ssd or rbd",
				tier_s);
	if (name && !cw_name_valid(name))
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST,
				"disk name \"%s\": 1-%d characters of A-Z a-z 0-9 . _ -, "
				"not starting with . or -", name, CW_NAME_MAX);
	if (emulate && cw_model_from_string_why(emulate, &em, why, sizeof(why)) < 0)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "emulate: %s", why);
	if (domain && !cw_name_valid(domain))
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST,
				"domain \"%s\": 1-%d characters of A-Z a-z 0-9 . _ -, "
				"not starting with . or -", domain, CW_NAME_MAX);
	r = cw_disk_add(srv->pool, path, tier, name, &id);
	if (r < 0)
		return cwc_fail_pool(c, r, path);
	if (domain && (r = cw_disk_set_domain(srv->pool, id, domain)) < 0) {
		(void)cw_disk_remove(srv->pool, id);
		return cwc_fail_pool(c, r, path);
	}
	if (emulate && (r = cw_disk_emulate_set(srv->pool, id, &em)) < 0) {
		(void)cw_disk_remove(srv->pool, id);
		return cwc_fail_pool(c, r, path);
	}
	r = cw_disk_info(srv->pool, id, &d);
	if (r == 0)
		r = cw_admit_state_disk_add(srv->adm, id, NULL);
	/* Admission books it as the disk it emulates, as a configured model
	 * (a stored or calibrated one outranks it). */
	if (r == 0 && emulate)
		r = cw_admit_state_set_model(srv->adm, id, &em, CW_ADMIT_MODEL_CONFIG, NULL, NULL,
					     NULL);
	if (r < 0)
		snprintf(why, sizeof(why), "disk %s: %s", d.name, strerror(-r));
	/* The data path serves it from now on, or it is not added. */
	if (r == 0 && srv->o.hooks.disk_add)
		r = srv->o.hooks.disk_add(srv->o.hooks.userdata, &d, why, sizeof(why));
	if (r < 0) {
		int r2;

		(void)cw_admit_state_disk_remove(srv->adm, id, NULL);
		r2 = cw_disk_remove(srv->pool, id);
		if (r2 < 0)
			return cwc_fail(c, cw_ctl_code_from_errno(r), "%s; it stays in the pool, "
					"unserved (taking it out failed: %s)", why, strerror(-r2));
		return cwc_fail(c, cw_ctl_code_from_errno(r), "%s; not added", why);
	}
	*ret = disk_json(srv, &d);
	return 0;
}

/* disk.set: a disk's failure domain ("" or absent: its own; left as it
 * is when only spare is given), and whether it is a spare. */
int cwc_cmd_disk_set(struct ctx *c, json_object **ret)
{
	const char *domain = cw_ctl_arg_str(c->req, "domain");
	struct cw_disk_info d;
	bool spare, has_spare;
	int r = 0;

	if (cwc_find_disk(c, cw_ctl_arg_str(c->req, "name"), &d) < 0)
		return -1;
	if (domain && domain[0] && !cw_name_valid(domain))
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST,
				"domain \"%s\": 1-%d characters of A-Z a-z 0-9 . _ -, "
				"not starting with . or -", domain, CW_NAME_MAX);
	has_spare = cw_ctl_arg_bool(c->req, "spare", &spare);
	if (domain || !has_spare)
		r = cw_disk_set_domain(c->srv->pool, d.id, domain);
	if (r == 0 && has_spare)
		r = cw_disk_set_spare(c->srv->pool, d.id, spare);
	if (r == 0)
		r = cw_disk_info(c->srv->pool, d.id, &d);
	if (r < 0)
		return cwc_fail_pool(c, r, d.name);
	*ret = disk_json(c->srv, &d);
	return 0;
}

static int disk_in_use(struct ctx *c, const struct cw_disk_info *d)
{
	return cwc_fail(c, CW_CTL_E_BUSY, "disk %s still holds blocks of partitions (%" PRIu64
			" of %" PRIu64 " blocks in use)", d->name, d->data_blocks - d->free_blocks,
			d->data_blocks);
}

int cwc_cmd_disk_remove(struct ctx *c, json_object **ret)
{
	struct cwc_server *srv = c->srv;
	struct cw_admit_refusal ref;
	struct cw_disk_info d;
	bool closed = false;
	int r;

	if (cwc_find_disk(c, cw_ctl_arg_str(c->req, "name"), &d) < 0)
		return -1;
	/* With streams on it the state refuses (and says which); without,
	 * it forgets the disk only once the pool has let it go, below. */
	if (cw_admit_state_disk_streams(srv->adm, d.id) &&
	    cw_admit_state_disk_remove(srv->adm, d.id, &ref) == -EBUSY)
		return cwc_fail(c, CW_CTL_E_BUSY, "%s", ref.reason);
	if (d.free_blocks != d.data_blocks)
		return disk_in_use(c, &d);
	if (srv->o.hooks.disk_remove) {
		char why[256] = "";

		r = srv->o.hooks.disk_remove(srv->o.hooks.userdata, &d, why, sizeof(why));
		if (r < 0 && r != -ENOENT)
			return cwc_fail(c, cw_ctl_code_from_errno(r), "%s", why);
		closed = r == 0;
	}
	r = cw_disk_remove(srv->pool, d.id);
	if (r < 0 && closed && srv->o.hooks.disk_add) {
		char why[256] = "";

		/* Still in the pool: the data path takes it back. */
		if (srv->o.hooks.disk_add(srv->o.hooks.userdata, &d, why, sizeof(why)) < 0)
			return cwc_fail(c, cw_ctl_code_from_errno(r), "disk %s: the pool kept it (%s) "
					"but it is no longer served: %s", d.name, strerror(-r), why);
	}
	if (r == -EBUSY)
		return disk_in_use(c, &d);
	if (r < 0)
		return cwc_fail_pool(c, r, d.name);
	(void)cw_admit_state_disk_remove(srv->adm, d.id, NULL);
	*ret = json_object_new_object();
	cwc_add(*ret, "name", cwc_jstr(d.name));
	cwc_add(*ret, "id", json_object_new_int64(d.id));
	return 0;
}

int cwc_calib_prepare(struct ctx *c, struct calib *k)
{
	const char *pct = cw_ctl_arg_str(c->req, "percentile");
	unsigned permille = 0;
	bool quick = false;
	int r;

	memset(k, 0, sizeof(*k));
	if (cwc_find_disk(c, cw_ctl_arg_str(c->req, "name"), &k->disk) < 0)
		return -1;
	if (k->disk.state != CW_DISK_PRESENT)
		return cwc_fail(c, CW_CTL_E_UNAVAILABLE, "disk %s is %s", k->disk.name,
				cwc_disk_state_name(k->disk.state));
	cw_ctl_arg_bool(c->req, "quick", &quick);
	if (pct && k->disk.tier != CW_TIER_RBD)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "percentile %s: disk %s is of tier %s, "
				"whose worst case is measured, not a tail; a tail percentile is "
				"for disks on a cluster (tier rbd)", pct, k->disk.name,
				cw_tier_name(k->disk.tier));
	r = pct ? cw_calib_parse_percentile(pct, &permille) : 0;
	if (r < 0)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "percentile \"%s\": expected a number "
				"from 50 to 100 in steps of 0.1, such as 99.9 (the default) or 99",
				pct);
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
		/* The median of five: a first look should not take one
		 * sample stalled by a busy machine for the disk's worst. */
		k->opts.repeats = 5;
		k->opts.percentile = 50;
		k->opts.tail_permille = 500;
	}
	if (permille)
		k->opts.tail_permille = permille;	/* said, even with --quick */
	return 0;
}

/* What the reply warns of: a backing or numbers that are no disk's
 * (cw_calib_check), and streams the measurement ran beside. */
static void calib_warning(struct ctx *c, const struct calib *k, json_object *reply)
{
	size_t streams = cw_admit_state_disk_streams(c->srv->adm, k->disk.id);
	char text[2048] = "";
	int n = 0;

	if (!k->opts.emulate)	/* an emulated disk keeps its model's time */
		(void)cw_calib_check(k->disk.path, &k->model, text, sizeof(text));
	if (streams)
		n = (int)strlen(text);
	if (streams && (size_t)n < sizeof(text))
		snprintf(text + n, sizeof(text) - (size_t)n, "%sthe disk carries %zu stream "
			 "reservation part%s: the measurement's reads ran beside %s, unscheduled, "
			 "so %s may have been late meanwhile, and %s requests may have made the "
			 "model slower than the disk (on the safe side); each still passes "
			 "admission with the new model", n ? "; " : "", streams,
			 streams == 1 ? "" : "s", streams == 1 ? "it" : "them",
			 streams == 1 ? "it" : "they", streams == 1 ? "its" : "their");
	if (text[0])
		cwc_add(reply, "warning", cwc_jstr(text));
}

int cwc_calib_finish(struct ctx *c, struct calib *k, json_object **ret)
{
	struct cw_admit_refusal ref;
	struct cw_disk_info now;
	char text[4096];
	int64_t worst;
	int r;

	if (k->result < 0)
		return cwc_fail(c, cw_ctl_code_from_errno(k->result), "calibrating %s (%s): %s",
				k->disk.name, k->disk.path, strerror(-k->result));
	/* The disk may have left the pool (and its id been reused) meanwhile. */
	if (cw_disk_info(c->srv->pool, k->disk.id, &now) < 0 ||
	    memcmp(now.uuid, k->disk.uuid, sizeof(now.uuid)) != 0)
		return cwc_fail(c, CW_CTL_E_NOT_FOUND, "disk %s left the pool during its calibration",
				k->disk.name);
	r = cw_model_validate(&k->model);
	if (r < 0)
		return cwc_fail(c, cw_ctl_code_from_errno(r), "the measured model of %s is not "
				"usable: %s", k->disk.name, strerror(-r));
	/* Stored first (the admission state writes it through), so what the
	 * pool holds survives a restart; the data path hears of it. */
	/* Every stream on the disk (admitted meanwhile too) is admitted
	 * again with the new model; if one no longer fits, the old model
	 * stays and the refusal names that stream. */
	r = cw_admit_state_set_model(c->srv->adm, k->disk.id, &k->model,
				     CW_ADMIT_MODEL_CALIBRATED, NULL, &ref, NULL);
	if (r == -EBUSY) {
		char why[sizeof(ref.reason) + 128];
		size_t n = (size_t)snprintf(why, sizeof(why), "the model measured on %s is not "
					    "installed (the one admission uses stays): with it, %s",
					    k->disk.name, ref.reason);

		n = CW_MIN(n, sizeof(ref.reason) - 1);
		memcpy(ref.reason, why, n);
		ref.reason[n] = '\0';
		return cwc_fail_refused(c, r, &ref);
	}
	if (r < 0)
		return cwc_fail_pool(c, r, "storing the measured model");
	r = cw_model_format(&k->model, text, sizeof(text));
	if (r < 0 || (size_t)r >= sizeof(text))
		text[0] = '\0';
	*ret = json_object_new_object();
	cwc_add(*ret, "disk", cwc_jstr(k->disk.name));
	cwc_add(*ret, "model", cwc_jstr(text));
	if (cw_model_service_ns(&k->model, 0, 0, cw_pool_block_size(c->srv->pool), &worst) == 0)
		cwc_add(*ret, "block_service_ns", json_object_new_int64(worst));
	if (k->model.tail_permille)
		cwc_add(*ret, "tail_percentile", json_object_new_double(k->model.tail_permille / 10.0));
	calib_warning(c, k, *ret);
	return 0;
}

static int calib_progress(const char *phase, unsigned done, unsigned total, void *userdata)
{
	struct ctx *c = userdata;
	_cleanup_free_ char *line = cw_ctl_format_progress(phase, done, total);

	if (line)
		c->emit(line, c->emit_data);
	return 0;
}

int cwc_cmd_disk_calibrate(struct ctx *c, json_object **ret)
{
	struct calib k;

	if (cwc_calib_prepare(c, &k) < 0)
		return -1;
	k.result = c->srv->o.calibrate(k.disk.path, &k.opts, calib_progress, c, &k.model);
	return cwc_calib_finish(c, &k, ret);
}

/* Each disk's plan, or one disk's, in the form `cwsim plan` prints. */
int cwc_cmd_disk_plan(struct ctx *c, json_object **ret)
{
	_cleanup_free_ struct cw_disk_info *d = NULL;
	const char *name = cw_ctl_arg_str(c->req, "name");
	struct cw_disk_info one;
	size_t n = 0;
	int r;

	if (name) {
		if (cwc_find_disk(c, name, &one) < 0)
			return -1;
	} else {
		r = cw_disk_list(c->srv->pool, &d, &n);
		if (r < 0)
			return cwc_fail_pool(c, r, "listing disks");
	}
	*ret = json_object_new_array();
	for (size_t i = 0; i < (name ? 1 : n); i++) {
		const struct cw_disk_info *di = name ? &one : &d[i];
		struct cw_disk_plan p;
		char buf[1024];

		if (cw_admit_state_plan(c->srv->adm, di->id, &p) < 0 ||
		    cw_disk_plan_format_json(&p, di->name, buf, sizeof(buf)) < 0)
			continue;
		json_object_array_add(*ret, json_tokener_parse(buf));
	}
	return 0;
}
