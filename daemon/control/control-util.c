/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What every command of the control server uses (control-internal.h): the
 * reply's error and the look-ups of disks, partitions and bindings.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "control-internal.h"

int cwc_fail(struct ctx *c, enum cw_ctl_code code, const char *fmt, ...)
{
	va_list ap;

	c->code = code;
	va_start(ap, fmt);
	vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
	va_end(ap);
	return -1;
}

int cwc_fail_pool(struct ctx *c, int r, const char *what)
{
	const struct cw_error *e = cw_pool_last_error(c->srv->pool);

	if (e && e->code == r && r == -ENOSPC && e->needed_bytes) {
		json_object *det = json_object_new_object();

		cwc_add(det, "needed_bytes", cw_ctl_json_u64(e->needed_bytes));
		cwc_add(det, "available_bytes", cw_ctl_json_u64(e->available_bytes));
		json_object_put(c->details);
		c->details = det;
	}
	if (e && e->code == r && e->msg[0])
		return cwc_fail(c, cw_ctl_code_from_errno(r), "%s: %s", what, e->msg);
	return cwc_fail(c, cw_ctl_code_from_errno(r), "%s: %s", what, strerror(-r));
}

static const char *why_name(enum cw_admit_why w)
{
	switch (w) {
	case CW_ADMIT_OK: return "ok";
	case CW_ADMIT_INVALID: return "invalid";
	case CW_ADMIT_UTILIZATION: return "utilization";
	case CW_ADMIT_DEMAND: return "demand";
	case CW_ADMIT_HOST: return "host";
	default: return "blocking";
	}
}

json_object *cwc_host_json(uint64_t need_ps, uint64_t given_ps)
{
	json_object *o = json_object_new_object();
	double cpu = (double)CW_HOST_PS_PER_CPU_S;

	cwc_add(o, "cpu_need", json_object_new_double((double)need_ps / cpu));
	cwc_add(o, "cpu_given", json_object_new_double((double)given_ps / cpu));
	cwc_add(o, "cpu_need_ps", cw_ctl_json_u64(need_ps));
	cwc_add(o, "cpu_given_ps", cw_ctl_json_u64(given_ps));
	return o;
}

/* The host refused: what the streams would need of the CPUs and what is
 * given, beside the condition and the largest rate every refusal has. */
static void host_details(json_object *det, const struct cw_admit_refusal *ref)
{
	json_object *h = cwc_host_json(ref->host.need_ps, ref->host.given_ps);

	cwc_add(h, "stream_cpu", json_object_new_double((double)ref->host.stream_ps /
							 (double)CW_HOST_PS_PER_CPU_S));
	cwc_add(det, "host", h);
}

int cwc_fail_refused(struct ctx *c, int r, const struct cw_admit_refusal *ref)
{
	json_object *det;
	bool host = ref->part.result.why == CW_ADMIT_HOST;

	if (r != -EBUSY || (!ref->disk_id && !host))
		return cwc_fail(c, r == -EBUSY ? CW_CTL_E_REFUSED :
				r == -EINVAL || r == -ERANGE ? CW_CTL_E_BAD_REQUEST :
				cw_ctl_code_from_errno(r), "%s",
				ref->reason[0] ? ref->reason : strerror(-r));
	det = json_object_new_object();
	if (host) {
		cwc_add(det, "stream", cwc_jstr(cw_admit_who_name(ref->who)));
		cwc_add(det, "condition", cwc_jstr(why_name(ref->part.result.why)));
		host_details(det, ref);
		goto rate;
	}
	cwc_add(det, "disk", cwc_jstr(ref->disk));
	cwc_add(det, "disk_id", json_object_new_int64(ref->disk_id));
	/* Whose deadline: the same stream the sentence names. */
	cwc_add(det, "stream", cwc_jstr(cw_admit_who_name(ref->who)));
	if (ref->who == CW_ADMIT_WHO_RESV)
		cwc_add(det, "resv", cw_ctl_json_u64(ref->resv_id));
	if (ref->who == CW_ADMIT_WHO_STARTUP)
		cwc_add(det, "export", cwc_jstr(ref->export_name));
	cwc_add(det, "condition", cwc_jstr(why_name(ref->part.result.why)));
	cwc_add(det, "utilization", json_object_new_double(ref->part.result.utilization));
	if (ref->who != CW_ADMIT_WHO_ALL) {
		cwc_add(det, "period_ns", json_object_new_int64(ref->task.period_ns));
		cwc_add(det, "service_ns", json_object_new_int64(ref->task.service_ns));
		cwc_add(det, "deadline_ns", json_object_new_int64(cw_task_deadline_ns(&ref->task)));
	}
	if (ref->part.result.why == CW_ADMIT_BLOCKING || ref->part.result.why == CW_ADMIT_DEMAND) {
		cwc_add(det, "l_ns", json_object_new_int64(ref->part.result.fail_l_ns));
		cwc_add(det, "need_ns", json_object_new_int64(ref->part.result.fail_need_ns));
	}
rate:
	if (ref->has_max_rate)
		cwc_add(det, "max_rate", cw_ctl_json_u64(ref->max_rate_bps));
	c->details = det;
	return cwc_fail(c, CW_CTL_E_REFUSED, "%s", ref->reason);
}

json_object *cwc_jstr(const char *s)
{
	return json_object_new_string(s ? s : "");
}

json_object *cwc_jns(int64_t ns)
{
	return ns == CW_ADMIT_NO_LIMIT ? NULL : json_object_new_int64(ns);
}

const char *cwc_disk_state_name(enum cw_disk_state s)
{
	switch (s) {
	case CW_DISK_PRESENT: return "present";
	case CW_DISK_MISSING: return "missing";
	case CW_DISK_WRONG_LABEL: return "wrong-label";
	case CW_DISK_SHRUNK: return "shrunk";
	default: return "bad-label";
	}
}

int cwc_find_disk(struct ctx *c, const char *name, struct cw_disk_info *ret)
{
	_cleanup_free_ struct cw_disk_info *d = NULL;
	size_t n = 0;
	char *end;
	unsigned long id;
	int r = cw_disk_list(c->srv->pool, &d, &n);

	if (r < 0)
		return cwc_fail_pool(c, r, "listing disks");
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
	return cwc_fail(c, CW_CTL_E_NOT_FOUND, "no disk \"%s\" in the pool", name);
}

int cwc_find_part(struct ctx *c, const char *name, struct cw_part **ret)
{
	int r = cw_part_lookup(c->srv->pool, name, ret);

	if (r == -ENOENT)
		return cwc_fail(c, CW_CTL_E_NOT_FOUND, "no partition \"%s\"", name);
	if (r < 0)
		return cwc_fail_pool(c, r, name);
	return 0;
}

const struct cwc_export *cwc_resv_export(const struct cwc_server *srv, uint64_t id)
{
	for (size_t i = 0; i < srv->n_exports; i++)
		if (srv->exports[i].resv_id == id)
			return &srv->exports[i];
	return NULL;
}

int cwc_placement_args(struct ctx *c, enum cw_placement *placement, enum cw_tier_pref *tier,
		       enum cw_zone_pref *zone)
{
	const char *s;

	if ((s = cw_ctl_arg_str(c->req, "policy")) && cw_placement_parse(s, placement) < 0)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "policy \"%s\": expected rotation, random or single", s);
	if ((s = cw_ctl_arg_str(c->req, "tier")) && cw_tier_pref_parse(s, tier) < 0)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "tier \"%s\": expected hdd, ssd or none", s);
	if ((s = cw_ctl_arg_str(c->req, "zone")) && cw_zone_pref_parse(s, zone) < 0)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "zone \"%s\": expected outer, inner or any", s);
	return 0;
}
