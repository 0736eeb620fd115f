/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * conf-disks.c — the hardware: the disks list (path or rbd: image, name,
 * tier, dispatch policy and best-effort order, slot length, lanes, model,
 * emulation and fault injection for tests) and the host group (the share
 * of the CPUs real-time streams may take, and the CPU cost of a request
 * and of copying, for admission's host test).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <clockwise/layout.h>
#include <clockwise/units.h>

#include "common/util.h"
#include "daemon/conf-groups.h"

#define MODEL_MAX_BYTES 31	/* model's CW_MODEL_NAME_MAX - 1 */
#define SLOT_US_MAX 1000000	/* one second */
#define LANES_MAX 64
#define DEFAULT_SLOT_US_HDD 1000
#define DEFAULT_SLOT_US_SSD 100

static const struct choice tiers[] = {
	{ "hdd", CW_TIER_HDD, false },
	{ "ssd", CW_TIER_SSD, false },
	{ "rbd", CW_TIER_RBD, false },
	{ NULL, 0, false },
};

/* ---- disks ---- */

static int disk_path(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config_disk *d = obj;
	const char *v = config_setting_get_string(s);

	/* An image on a Ceph cluster: no file, no absolute path. */
	if (v && cw_io_path_is_rbd(v)) {
		if (strlen(v) > 4095)
			return conf_fail(p, s, "%s is %zu bytes long; expected at most 4095", WHERE(s),
				    strlen(v));
		free(d->path);
		d->path = strdup(v);
		return d->path ? 0 : -ENOMEM;
	}
	return conf_get_path(p, s, 4095, &d->path);
}

static int disk_name(struct parse *p, const config_setting_t *s, void *obj)
{
	return conf_get_name(p, s, CWD_NAME_MAX_BYTES, &((struct cwd_config_disk *)obj)->name);
}

/* domain = "shelf1": the copies of a block stay in distinct domains. */
static int disk_domain(struct parse *p, const config_setting_t *s, void *obj)
{
	return conf_get_name(p, s, CWD_NAME_MAX_BYTES, &((struct cwd_config_disk *)obj)->domain);
}

static int disk_model(struct parse *p, const config_setting_t *s, void *obj)
{
	return conf_get_name(p, s, MODEL_MAX_BYTES, &((struct cwd_config_disk *)obj)->model);
}

/* emulate = "atlas2" (a preset, perhaps with settings of its mechanics:
 * "ssd channels=8 gc=1G/50ms") or a stored model string: the disk's I/O
 * completes when that disk would have completed it (clockwise/emu.h). */
static int disk_emulate(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config_disk *d = obj;
	const char *v = NULL;
	struct cw_model m;
	char why[512];
	int r = conf_get_string(p, s, "a model preset or a model string in quotes", &v);

	if (r < 0)
		return r;
	r = cw_model_from_string_why(v, &m, why, sizeof(why));
	if (r < 0)
		return conf_fail(p, s, "%s: %s", WHERE(s), why);
	free(d->emulate);
	d->emulate = malloc(sizeof(*d->emulate));
	if (!d->emulate)
		return -ENOMEM;
	*d->emulate = m;
	return 0;
}

/* fault = "fail-write=3,cut-file=/run/cut": for tests, the disk's I/O
 * goes through the fault-injecting engine (clockwise/fault.h). */
static int disk_fault(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config_disk *d = obj;
	const char *v = NULL;
	struct cw_io_fault_opts o;
	char why[512];
	int r = conf_get_string(p, s, "fault settings in quotes", &v);

	if (r < 0)
		return r;
	r = cw_io_fault_parse(v, &o, why, sizeof(why));
	if (r < 0)
		return conf_fail(p, s, "%s: %s", WHERE(s), why);
	free(d->fault);
	d->fault = malloc(sizeof(*d->fault));
	if (!d->fault)
		return -ENOMEM;
	*d->fault = o;
	return 0;
}

static int disk_tier(struct parse *p, const config_setting_t *s, void *obj)
{
	int v, r = conf_get_choice(p, s, tiers, "a tier", &v);

	if (r == 0)
		((struct cwd_config_disk *)obj)->tier = (enum cw_tier)v;
	return r;
}

static int disk_policy(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config_disk *d = obj;
	int v, r = conf_get_choice(p, s, conf_policies, "a dispatch policy", &v);

	if (r == 0) {
		d->policy = (enum cwd_config_policy)v;
		p->disk_policy[d - p->c->disks] = s;
	}
	return r;
}

static int disk_be_order(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config_disk *d = obj;
	int v, r = conf_get_choice(p, s, conf_be_orders, "a best-effort order", &v);

	if (r == 0) {
		d->be_order = (enum cwd_config_be_order)v;
		p->disk_be_order[d - p->c->disks] = s;
	}
	return r;
}

static int disk_slot_us(struct parse *p, const config_setting_t *s, void *obj)
{
	long long v;
	int r = conf_get_int(p, s, 1, SLOT_US_MAX, &v);

	if (r == 0)
		((struct cwd_config_disk *)obj)->slot_ns = v * CW_NS_PER_US;
	return r;
}

unsigned cwd_config_default_lanes(enum cw_tier tier)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (tier != CW_TIER_SSD)
		return 1;
	return n >= 8 ? 4 : n >= 4 ? (unsigned)(n / 2) : 1;
}

static int disk_lanes(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config_disk *d = obj;
	long long v;
	int r = conf_get_int(p, s, 1, LANES_MAX, &v);

	if (r == 0) {
		d->lanes = (unsigned)v;
		p->disk_lanes[d - p->c->disks] = s;
	}
	return r;
}

const struct key conf_disk_keys[] = {
	{ "path", disk_path },
	{ "name", disk_name },
	{ "tier", disk_tier },
	{ "policy", disk_policy },
	{ "be_order", disk_be_order },
	{ "slot_us", disk_slot_us },
	{ "lanes", disk_lanes },
	{ "model", disk_model },
	{ "emulate", disk_emulate },
	{ "fault", disk_fault },
	{ "domain", disk_domain },
	{ NULL, NULL },
};

static int parse_disk(struct parse *p, const config_setting_t *s, struct cwd_config_disk *d)
{
	const config_setting_t *lanes;
	size_t idx = (size_t)(d - p->c->disks);
	int r;

	d->tier = CW_TIER_HDD;
	d->line = config_setting_source_line(s);
	r = conf_parse_group(p, s, conf_disk_keys, d);
	if (r < 0)
		return r;
	if (!d->path)
		return conf_fail(p, s, "%s has no path; expected path = \"/dev/...\" in every disk", WHERE(s));
	if (!d->name)
		return conf_fail(p, s, "%s has no name; expected name = \"...\" in every disk", WHERE(s));
	if (cw_io_path_is_rbd(d->path) && d->tier == CW_TIER_HDD)
		d->tier = CW_TIER_RBD;	/* hdd is only the default */
	if ((d->tier == CW_TIER_RBD) != cw_io_path_is_rbd(d->path))
		return conf_fail(p, s, "%s: tier rbd goes with path = \"rbd:POOL/IMAGE\" and only with "
			    "it; expected tier = \"rbd\" with an rbd: path, another tier with a "
			    "file or device", WHERE(s));
	lanes = p->disk_lanes[idx];
	if (lanes && d->tier != CW_TIER_SSD)
		return conf_fail(p, lanes, "%s is set on an hdd; expected lanes only with tier = \"ssd\"",
			    WHERE(lanes));
	if (!lanes)
		d->lanes = cwd_config_default_lanes(d->tier);
	if (d->slot_ns == 0)
		d->slot_ns = (d->tier == CW_TIER_SSD ? DEFAULT_SLOT_US_SSD : DEFAULT_SLOT_US_HDD) *
			     CW_NS_PER_US;
	return 0;
}

int conf_key_disks(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config *c = p->c;
	int n = 0, i, r;

	r = conf_get_list(p, s, "a list ( { path = ...; name = ...; }, ... )", CW_DISKS_MAX, &n);
	if (r < 0)
		return r;
	c->disks = calloc((size_t)n + 1, sizeof(*c->disks));
	p->disk_lanes = calloc((size_t)n + 1, sizeof(*p->disk_lanes));
	p->disk_policy = calloc((size_t)n + 1, sizeof(*p->disk_policy));
	p->disk_be_order = calloc((size_t)n + 1, sizeof(*p->disk_be_order));
	if (!c->disks || !p->disk_lanes || !p->disk_policy || !p->disk_be_order)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
		struct cwd_config_disk *d = &c->disks[i];
		size_t j;

		c->n_disks++;
		r = parse_disk(p, e, d);
		if (r < 0)
			return r;
		for (j = 0; j < (size_t)i; j++) {
			if (!strcmp(c->disks[j].name, d->name))
				return conf_fail(p, e, "disk name \"%s\" is used twice (also at line %u); "
					    "expected a different name for each disk", d->name,
					    c->disks[j].line);
			if (!strcmp(c->disks[j].path, d->path))
				return conf_fail(p, e, "disk path \"%s\" is used twice (also at line %u); "
					    "expected a different path for each disk", d->path,
					    c->disks[j].line);
		}
	}
	return 0;
}

/* ---- host ---- */

/* host.share: a percentage of the CPUs, "50%" or 50, above 0 and at most
 * 100 (a fraction of a percent allowed: "12.5%"). */
static int host_share(struct parse *p, const config_setting_t *s, void *obj)
{
	double v;
	const char *str = NULL;
	char *end = NULL;

	(void)obj;
	if (config_setting_type(s) == CONFIG_TYPE_INT || config_setting_type(s) == CONFIG_TYPE_INT64)
		v = (double)config_setting_get_int64(s);
	else if (config_setting_type(s) == CONFIG_TYPE_FLOAT)
		v = config_setting_get_float(s);
	else if (config_setting_type(s) == CONFIG_TYPE_STRING) {
		str = config_setting_get_string(s);
		v = strtod(str, &end);
		if (end == str || (*end && strcmp(end, "%") != 0))
			v = -1;
	} else {
		return conf_wrong_type(p, s, "a percentage of the CPUs, like \"50%\"");
	}
	if (!(v > 0 && v <= 100))
		return conf_fail(p, s, "%s is not a share of the CPUs; expected a percentage above 0 "
			    "and at most 100, like \"50%%\"", WHERE(s));
	p->c->host.share_ppm = (uint32_t)(v * 10000 + 0.5);
	return 0;
}

static int host_request_cost(struct parse *p, const config_setting_t *s, void *obj)
{
	const char *str;
	int64_t ns;

	(void)obj;
	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return conf_wrong_type(p, s, "a duration such as \"20us\"");
	str = config_setting_get_string(s);
	if (cw_units_parse_duration(str, CW_UNITS_S, &ns) < 0 || ns <= 0 || ns > CW_NS_PER_S)
		return conf_fail(p, s, "%s = \"%s\" is not a request's CPU time; expected a duration "
			    "above 0 and at most 1s, such as \"20us\"", WHERE(s), str);
	p->c->host.request_ns = ns;
	return 0;
}

static int host_copy_rate(struct parse *p, const config_setting_t *s, void *obj)
{
	const char *str;
	uint64_t v;

	(void)obj;
	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return conf_wrong_type(p, s, "a rate such as \"4GB/s\"");
	str = config_setting_get_string(s);
	if (cw_units_parse_rate(str, &v) < 0 || v == 0)
		return conf_fail(p, s, "%s = \"%s\" is not a rate; expected " CW_UNITS_RATE_HELP,
			    WHERE(s), str);
	p->c->host.copy_rate_bps = v;
	return 0;
}

static int host_test(struct parse *p, const config_setting_t *s, void *obj)
{
	bool on = true;
	int r = conf_get_bool(p, s, &on);

	(void)obj;
	if (r == 0)
		p->c->host.off = !on;
	return r;
}

const struct key conf_host_keys[] = {
	{ "test", host_test },
	{ "share", host_share },
	{ "request_cost", host_request_cost },
	{ "copy_rate", host_copy_rate },
	{ NULL, NULL },
};

int conf_key_host(struct parse *p, const config_setting_t *s, void *obj)
{
	return conf_parse_group(p, s, conf_host_keys, NULL);
}

