/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Export commands of the control server: list, add and remove, stored in the
 * pool (clockwise/pool-objects.h) and served through the export hooks.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "control-internal.h"
#include "daemon/nbd/nbd-server.h"

#include <clockwise/pool-objects.h>

#define CLIENTS_LISTED 64	/* per export in export.list; "connections" counts all */

static json_object *export_json(const struct cwc_export *e)
{
	json_object *o = json_object_new_object();

	cwc_add(o, "name", cwc_jstr(e->name));
	cwc_add(o, "part", cwc_jstr(e->part));
	cwc_add(o, "readonly", json_object_new_boolean(e->readonly));
	cwc_add(o, "resv", e->resv_id ? cw_ctl_json_u64(e->resv_id) : NULL);
	if (e->ublk)	/* none while it is not served */
		cwc_add(o, "device", e->device[0] ? cwc_jstr(e->device) : NULL);
	return o;
}

/* Who is connected to export e: o gets "served" (false: listed, but its
 * partition cannot be served now), "connections" and "clients" (the
 * first CLIENTS_LISTED: uid and pid on a unix socket, address on TCP,
 * seconds connected, whether it holds the real-time priority).  Returns the connections, or -errno. */
static int export_clients_json(struct cwc_server *srv, const struct cwc_export *e,
			       json_object *o)
{
	struct nbdsrv_client cl[CLIENTS_LISTED];
	json_object *a;
	int64_t now = srv->o.clock_ns();
	size_t n = 0;
	int r;

	if (!srv->o.hooks.export_clients)
		return 0;	/* no data path: nobody can be connected */
	r = srv->o.hooks.export_clients(srv->o.hooks.userdata, e, cl, CLIENTS_LISTED, &n);
	cwc_add(o, "served", json_object_new_boolean(r != -ENOENT));
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	a = json_object_new_array();
	for (size_t i = 0; i < CW_MIN(n, (size_t)CLIENTS_LISTED); i++) {
		json_object *k = json_object_new_object();

		if (cl[i].known) {
			cwc_add(k, "uid", json_object_new_int64(cl[i].uid));
			cwc_add(k, "pid", json_object_new_int64(cl[i].pid));
		} else {
			cwc_add(k, "address", cwc_jstr(cl[i].addr));
		}
		cwc_add(k, "connected_s", json_object_new_int64((now - cl[i].since_ns) / CW_NS_PER_S));
		if (cl[i].realtime)	/* holds the export's real-time priority */
			cwc_add(k, "realtime", json_object_new_boolean(true));
		json_object_array_add(a, k);
	}
	cwc_add(o, "connections", cw_ctl_json_u64(n));
	cwc_add(o, "clients", a);
	return (int)CW_MIN(n, (size_t)INT32_MAX);
}

int cwc_cmd_export_list(struct ctx *c, json_object **ret)
{
	*ret = json_object_new_array();
	for (size_t i = 0; i < c->srv->n_exports; i++) {
		json_object *o = export_json(&c->srv->exports[i]);

		cwc_add(o, "qos", cwc_qos_json(c->srv, c->srv->exports[i].name));
		(void)export_clients_json(c->srv, &c->srv->exports[i], o);
		json_object_array_add(*ret, o);
	}
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
	ret->ublk = e->ublk;
	ret->ublk_depth = e->ublk_depth;
	ret->ublk_max_request = e->ublk_max_request;
	ret->ublk_dev = e->ublk ? e->ublk_dev : -1;
	return ret;
}

/* Stores and serves partition pname as export ename (NULL: its own name);
 * -errno, with the reason in c. */
static int export_add(struct ctx *c, const char *pname, const char *ename, bool readonly,
		      bool with_resv, uint64_t resv_id, const struct cwc_export *ublk,
		      struct cwc_export **ret)
{
	struct cwc_server *srv = c->srv;
	struct cwc_export e = { .readonly = readonly, .resv_id = resv_id, .ublk_dev = -1 };
	char why[512] = "";
	struct cw_export_rec rec;
	struct cw_part_info pi;
	struct cw_part *part;
	const struct cw_admit_resv *rv;
	int r;

	if (!srv->o.hooks.export_add)
		return cwc_fail(c, CW_CTL_E_NOT_SUPPORTED, "this server has no data path to export "
				"through"), -EOPNOTSUPP;
	if (ublk && ublk->ublk) {
		if (!srv->o.hooks.export_add_ublk)
			return cwc_fail(c, CW_CTL_E_NOT_SUPPORTED, "this server has no ublk front "
					"end"), -EOPNOTSUPP;
		e.ublk = true;
		e.ublk_depth = ublk->ublk_depth;
		e.ublk_max_request = ublk->ublk_max_request;
	}
	if (cwc_find_part(c, pname, &part) < 0)
		return -ENOENT;
	r = cw_part_info(part, &pi);
	if (r < 0)
		return cwc_fail_pool(c, r, pname), r;
	if (!pi.available && !srv->o.activation_partial)
		return cwc_fail(c, CW_CTL_E_UNAVAILABLE, "partition %s is offline: %" PRIu64
				" of its blocks are on a missing disk (activation_mode = \"partial\" "
				"in clockwised.conf serves the rest, those blocks failing with EIO)",
				pname, pi.missing_blocks), -ENODEV;
	if (!ename)
		ename = pi.name;
	if (!cw_name_valid(ename))
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "export name \"%s\" is not valid", ename),
		       -EINVAL;
	for (size_t i = 0; i < srv->n_exports; i++)
		if (strcmp(srv->exports[i].name, ename) == 0)
			return cwc_fail(c, CW_CTL_E_EXISTS, "export %s exists", ename), -EEXIST;
	if (srv->n_exports >= CW_EXPORTS_MAX)
		return cwc_fail(c, CW_CTL_E_NO_SPACE, "too many exports (%d)", CW_EXPORTS_MAX), -ENOSPC;
	snprintf(e.name, sizeof(e.name), "%s", ename);
	snprintf(e.part, sizeof(e.part), "%s", pi.name);
	if (with_resv) {
		rv = cw_admit_state_resv_find(srv->adm, e.resv_id);
		if (!rv)
			return cwc_fail(c, CW_CTL_E_NOT_FOUND, "no reservation %" PRIu64, e.resv_id),
			       -ENOENT;
		if (strcmp(rv->part, pi.name) != 0)
			return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "reservation %" PRIu64
					" is on partition %s, not %s", e.resv_id, rv->part, pi.name),
			       -EINVAL;
	}
	{
		struct cwc_export *ne = realloc(srv->exports, (srv->n_exports + 1) * sizeof(*ne));

		if (!ne)
			return cwc_fail(c, CW_CTL_E_INTERNAL, "out of memory"), -ENOMEM;
		srv->exports = ne;
	}
	r = cw_export_add(srv->pool, export_rec(&e, pi.id, &rec));
	if (r < 0)
		return cwc_fail_pool(c, r, "storing the export"), r;
	r = e.ublk ? srv->o.hooks.export_add_ublk(srv->o.hooks.userdata, &e, part, why,
						  sizeof(why)) :
		     srv->o.hooks.export_add(srv->o.hooks.userdata, &e, part);
	if (r < 0) {
		int r2 = cw_export_remove(srv->pool, e.name);

		cwc_fail(c, cw_ctl_code_from_errno(r), "exporting %s: %s%s", e.name,
			 why[0] ? why : strerror(-r),
			 r2 < 0 ? " (and it stays stored: removing it from the pool failed)" : "");
		return r;
	}
	srv->exports[srv->n_exports] = e;
	*ret = &srv->exports[srv->n_exports++];
	return 0;
}

int cwc_cmd_export_add(struct ctx *c, json_object **ret)
{
	uint64_t resv_id = 0, depth = 0, max_request = 0;
	bool readonly = false, with_resv;
	struct cwc_export *e, u = { 0 };

	cw_ctl_arg_bool(c->req, "readonly", &readonly);
	with_resv = cw_ctl_arg_uint(c->req, "resv", &resv_id);
	cw_ctl_arg_bool(c->req, "ublk", &u.ublk);
	cw_ctl_arg_uint(c->req, "queue_depth", &depth);
	cw_ctl_arg_uint(c->req, "max_request", &max_request);
	if (depth > UINT16_MAX || max_request > UINT32_MAX)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "queue_depth or max_request out of range");
	u.ublk_depth = (uint32_t)depth;
	u.ublk_max_request = (uint32_t)max_request;
	if (export_add(c, cw_ctl_arg_str(c->req, "part"), cw_ctl_arg_str(c->req, "name"),
		       readonly, with_resv, resv_id, &u, &e) < 0)
		return -1;
	*ret = export_json(e);
	return 0;
}

static int export_part(struct cwc_server *srv, const char *part_name,
		       const struct cwc_export *ublk, char *err, size_t errlen)
{
	struct ctx c = { .srv = srv };
	struct cwc_export *e;
	int r;

	for (size_t i = 0; i < srv->n_exports; i++)
		if (strcmp(srv->exports[i].name, part_name) == 0)
			return 0;
	r = export_add(&c, part_name, NULL, false, false, 0, ublk, &e);
	if (r < 0)
		snprintf(err, errlen, "%s", c.msg);
	return r;
}

int cwc_server_export_part(struct cwc_server *srv, const char *part_name, char *err,
			   size_t errlen)
{
	return export_part(srv, part_name, NULL, err, errlen);
}

int cwc_server_export_part_ublk(struct cwc_server *srv, const char *part_name, uint32_t depth,
				uint32_t max_request, char *err, size_t errlen)
{
	struct cwc_export u = { .ublk = true, .ublk_depth = depth, .ublk_max_request = max_request };

	return export_part(srv, part_name, &u, err, errlen);
}

/* Removing an export disconnects its clients: only with force while it
 * has any (the refusal names them, as export.list does). */
static int clients_forced(struct ctx *c, const struct cwc_export *e)
{
	json_object *o;
	bool force = false;
	int n;

	cw_ctl_arg_bool(c->req, "force", &force);
	if (force)
		return 0;
	o = json_object_new_object();
	n = export_clients_json(c->srv, e, o);
	if (n <= 0) {
		json_object_put(o);
		return 0;
	}
	c->details = o;		/* served, connections, clients */
	return cwc_fail(c, CW_CTL_E_BUSY, "export %s has %d client%s connected: removing it "
			"disconnects %s; say so with force (cwctl export remove --force)", e->name,
			n, n == 1 ? "" : "s", n == 1 ? "it" : "them");
}

int cwc_cmd_export_remove(struct ctx *c, json_object **ret)
{
	struct cwc_server *srv = c->srv;
	const char *name = cw_ctl_arg_str(c->req, "name");
	int r;

	for (size_t i = 0; i < srv->n_exports; i++) {
		struct cw_export_rec rec;
		struct cw_part_info pi = { 0 };
		struct cw_part *part;

		if (strcmp(srv->exports[i].name, name) != 0)
			continue;
		if (clients_forced(c, &srv->exports[i]) < 0)
			return -1;
		/* The database first; put back if the data path refuses. */
		if (cw_part_lookup(srv->pool, srv->exports[i].part, &part) == 0)
			cw_part_info(part, &pi);
		export_rec(&srv->exports[i], pi.id, &rec);
		r = cw_export_remove(srv->pool, name);
		if (r < 0)
			return cwc_fail_pool(c, r, "removing the export");
		if (srv->o.hooks.export_remove) {
			r = srv->o.hooks.export_remove(srv->o.hooks.userdata, &srv->exports[i]);
			if (r < 0) {
				int r2 = cw_export_add(srv->pool, &rec);

				return cwc_fail(c, cw_ctl_code_from_errno(r), "removing export %s: %s%s",
					    name, strerror(-r),
					    r2 < 0 ? " (it is gone from the pool all the same)" : "");
			}
		}
		*ret = export_json(&srv->exports[i]);
		/* its QoS goes with it (and lets go of the partition) */
		if (srv->adm)
			(void)cw_admit_state_be_clear(srv->adm, name);
		memmove(&srv->exports[i], &srv->exports[i + 1],
			(srv->n_exports - i - 1) * sizeof(srv->exports[0]));
		srv->n_exports--;
		return 0;
	}
	return cwc_fail(c, CW_CTL_E_NOT_FOUND, "no export %s", name);
}


/* ---- exports stored in the pool ---- */

static const char *part_name(const struct cw_part_info *parts, size_t n, uint64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (parts[i].id == id)
			return parts[i].name;
	return NULL;
}

/* *ret_served counts the hook calls made. */
static int load_exports(struct cwc_server *srv, size_t *ret_served)
{
	_cleanup_free_ struct cw_export_rec *recs = NULL;
	_cleanup_free_ struct cw_part_info *parts = NULL;
	size_t n, n_parts;
	int r;

	r = cw_part_list(srv->pool, &parts, &n_parts);
	if (r == 0)
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
		e->ublk = recs[i].ublk;
		e->ublk_depth = recs[i].ublk_depth;
		e->ublk_max_request = recs[i].ublk_max_request;
		e->ublk_dev = recs[i].ublk_dev;
		srv->n_exports++;
		if (!srv->o.hooks.export_add)
			continue;	/* listed; served once a data path runs */
		r = cw_part_lookup(srv->pool, name, &part);
		if (r == 0 && e->ublk) {
			char why[512] = "";

			/* Its device (taken back after a crash, or made
			 * anew); without ublk in this kernel it is listed,
			 * not served, as the hook logged. */
			r = srv->o.hooks.export_add_ublk ?
			    srv->o.hooks.export_add_ublk(srv->o.hooks.userdata, e, part, why,
							 sizeof(why)) : -EOPNOTSUPP;
			if (r < 0 && r != -ENOMEM)
				r = 0;
		} else if (r == 0) {
			r = srv->o.hooks.export_add(srv->o.hooks.userdata, e, part);
		}
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

void cwc_server_export_device(struct cwc_server *srv, const char *name, int32_t dev)
{
	for (size_t i = 0; i < srv->n_exports; i++)
		if (strcmp(srv->exports[i].name, name) == 0) {
			srv->exports[i].ublk_dev = dev;
			snprintf(srv->exports[i].device, sizeof(srv->exports[i].device),
				 "/dev/ublkb%" PRId32, dev);
		}
}

const struct cwc_export *cwc_server_exports(const struct cwc_server *srv, size_t *ret_n)
{
	*ret_n = srv->n_exports;
	return srv->exports;
}

void cwc_export_unload(struct cwc_server *srv, size_t served)
{
	for (size_t i = served; i-- > 0;)
		if (srv->o.hooks.export_remove)
			srv->o.hooks.export_remove(srv->o.hooks.userdata, &srv->exports[i]);
	free(srv->exports);
	srv->exports = NULL;
	srv->n_exports = 0;
}

int cwc_export_load(struct cwc_server *srv)
{
	size_t served = 0;
	int r = load_exports(srv, &served);

	if (r < 0)
		cwc_export_unload(srv, served);
	return r;
}
