/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The export.qos command of the control server: an export's best-effort
 * reservation, weight and limit between exports, or a connection class's
 * within an export (EXPORT@CLASS: the connections that opened it by that
 * name are one client of their own).  The admission state
 * admits and stores it (cw_admit_state_be_set) and tells the data path,
 * whose dispatchers apply it to the export's next requests without
 * dropping its clients.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <clockwise/units.h>

#include "control-internal.h"

static json_object *rate_json(uint64_t v, bool iops)
{
	char buf[CW_UNITS_BUF];
	json_object *o;

	if (!v)
		return NULL;
	o = json_object_new_object();
	cwc_add(o, iops ? "iops" : "bytes_per_s", cw_ctl_json_u64(v));
	cwc_add(o, "text", cwc_jstr(cw_units_format_iorate(v, iops, buf)));
	return o;
}

static json_object *be_json(const struct cwc_server *srv, const struct cw_admit_be *be)
{
	json_object *o = json_object_new_object(), *disks = json_object_new_array();

	cwc_add(o, "export", cwc_jstr(be->export_name));
	cwc_add(o, "part", cwc_jstr(be->part));
	cwc_add(o, "reserve", rate_json(be->qos.reserve, be->qos.reserve_iops));
	cwc_add(o, "weight", json_object_new_int64(be->qos.weight));
	cwc_add(o, "limit", rate_json(be->qos.limit, be->qos.limit_iops));
	for (size_t i = 0; i < be->n_parts; i++) {
		const struct cw_admit_be_part *bp = &be->parts[i];
		json_object *d = json_object_new_object();
		struct cw_disk_info info;

		if (cw_disk_info(srv->pool, bp->disk_id, &info) == 0)
			cwc_add(d, "disk", cwc_jstr(info.name));
		cwc_add(d, "disk_id", json_object_new_int64(bp->disk_id));
		cwc_add(d, "blocks_share", json_object_new_double(bp->share_ppm / 1e6));
		cwc_add(d, "reserve_share", json_object_new_double(bp->client.resv_ppm / 1e6));
		cwc_add(d, "limit_share", bp->client.limit_ppm ?
			json_object_new_double(bp->client.limit_ppm / 1e6) : NULL);
		json_object_array_add(disks, d);
	}
	cwc_add(o, "disks", disks);
	return o;
}

json_object *cwc_qos_json(const struct cwc_server *srv, const char *name)
{
	const struct cw_admit_be *be = srv->adm ? cw_admit_state_be_find(srv->adm, name) : NULL;

	return be ? be_json(srv, be) : NULL;
}

int cwc_cmd_export_qos(struct ctx *c, json_object **ret)
{
	struct cwc_server *srv = c->srv;
	const char *name = cw_ctl_arg_str(c->req, "name");
	const struct cw_admit_be *old, *be = NULL;
	struct cw_admit_be_request rq = { .export_name = name, .persistent = true };
	struct cw_admit_refusal ref;
	const struct cwc_export *e = NULL;
	bool clear = false, any = false;
	uint64_t v;
	int r;

	if (!name || !cw_client_name_valid(name))
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "\"%s\" is not an export name (or EXPORT@CLASS: "
				"a connection class within an export)", name ? name : "");
	/* EXPORT@CLASS: the clients that open the export by that name */
	for (size_t i = 0; i < srv->n_exports && !e; i++)
		if (!strncmp(srv->exports[i].name, name, strcspn(name, "@")) &&
		    strlen(srv->exports[i].name) == strcspn(name, "@"))
			e = &srv->exports[i];
	if (!e)
		return cwc_fail(c, CW_CTL_E_NOT_FOUND, "no export %.*s", (int)strcspn(name, "@"),
				name);
	if (!srv->adm)
		return cwc_fail(c, CW_CTL_E_NOT_SUPPORTED, "this server has no admission state");
	old = cw_admit_state_be_find(srv->adm, name);
	cw_ctl_arg_bool(c->req, "clear", &clear);
	if (clear) {
		r = cw_admit_state_be_clear(srv->adm, name);
		if (r == -ENOENT)
			return cwc_fail(c, CW_CTL_E_NOT_FOUND, "export %s has no QoS", name);
		if (r < 0)
			return cwc_fail_pool(c, r, "clearing the QoS");
		*ret = NULL;
		return 0;
	}
	/* What is not given stays as it was. */
	rq.part = e->part;
	if (old)
		rq.qos = old->qos;
	if (cw_ctl_arg_uint(c->req, "reserve", &v)) {
		rq.qos.reserve = v;
		rq.qos.reserve_iops = false;
		cw_ctl_arg_bool(c->req, "reserve_iops", &rq.qos.reserve_iops);
		any = true;
	}
	if (cw_ctl_arg_uint(c->req, "limit", &v)) {
		rq.qos.limit = v;
		rq.qos.limit_iops = false;
		cw_ctl_arg_bool(c->req, "limit_iops", &rq.qos.limit_iops);
		any = true;
	}
	if (cw_ctl_arg_uint(c->req, "weight", &v)) {
		if (v < 1 || v > CW_BE_WEIGHT_MAX)
			return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "weight %" PRIu64 " is out of range; "
					"expected 1 to %d", v, CW_BE_WEIGHT_MAX);
		rq.qos.weight = (uint32_t)v;
		any = true;
	}
	if (!any) {
		/* nothing to change: show it */
		*ret = cwc_qos_json(srv, name);
		return 0;
	}
	if (rq.qos.reserve && rq.qos.limit && rq.qos.reserve_iops == rq.qos.limit_iops &&
	    rq.qos.limit < rq.qos.reserve)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "export %s: the limit is below the "
				"reservation", name);
	cw_ctl_arg_bool(c->req, "dry_run", &rq.dry_run);
	r = cw_admit_state_be_set(srv->adm, &rq, &be, &ref);
	if (r == -EBUSY && ref.disk_id) {
		c->details = json_object_new_object();
		cwc_add(c->details, "disk", cwc_jstr(ref.disk));
		cwc_add(c->details, "disk_id", json_object_new_int64(ref.disk_id));
		return cwc_fail(c, CW_CTL_E_REFUSED, "%s", ref.reason);
	}
	if (r < 0)
		return cwc_fail_refused(c, r, &ref);
	*ret = be ? be_json(srv, be) : json_object_new_object();
	if (!be)
		cwc_add(*ret, "fits", json_object_new_boolean(true));
	return 0;
}
