/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Status and stats commands of the control server: the pool, its disks,
 * partitions, reservations and exports at once, and the data path's counters.
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

int cwc_cmd_status(struct ctx *c, json_object **ret)
{
	struct cwc_server *srv = c->srv;
	char uuid[CW_UUID_STRING_LEN + 1];
	json_object *pool, *v;
	uint64_t size = 0, free_b = 0;
	uint32_t bs = cw_pool_block_size(srv->pool);

	*ret = json_object_new_object();
	pool = json_object_new_object();
	cw_uuid_format(cw_pool_uuid(srv->pool), uuid);
	cwc_add(pool, "uuid", cwc_jstr(uuid));
	cwc_add(pool, "block_size", cw_ctl_json_u64(bs));
	cwc_add(pool, "missing_disks", json_object_new_int64(cw_pool_missing_disks(srv->pool)));
	cwc_add(*ret, "version", cwc_jstr(cw_version()));
	if (cwc_cmd_disk_list(c, &v) < 0)
		return -1;
	for (size_t i = 0; i < json_object_array_length(v); i++) {
		json_object *d = json_object_array_get_idx(v, i), *x;

		if (json_object_object_get_ex(d, "size", &x))
			size += (uint64_t)json_object_get_int64(x);
		if (json_object_object_get_ex(d, "free", &x))
			free_b += (uint64_t)json_object_get_int64(x);
	}
	cwc_add(pool, "size", cw_ctl_json_u64(size));
	cwc_add(pool, "free", cw_ctl_json_u64(free_b));
	cwc_add(*ret, "pool", pool);
	cwc_add(*ret, "disks", v);
	if (cwc_cmd_part_list(c, &v) < 0)
		return -1;
	cwc_add(*ret, "partitions", v);
	cwc_cmd_resv_list(c, &v);
	cwc_add(*ret, "reservations", v);
	cwc_cmd_export_list(c, &v);
	cwc_add(*ret, "exports", v);
	cwc_add(*ret, "data_path", json_object_new_boolean(srv->o.hooks.export_add != NULL));
	return 0;
}

/* The best-effort latency histogram, counts by bucket (control.h). */
static json_object *hist_json(const uint64_t *h)
{
	json_object *a = json_object_new_array();

	for (unsigned b = 0; b < CWC_HIST_BUCKETS; b++)
		json_object_array_add(a, cw_ctl_json_u64(h[b]));
	return a;
}

int cwc_cmd_stats(struct ctx *c, json_object **ret)
{
	struct cwc_server *srv = c->srv;
	struct cwc_stats st = { 0 };
	json_object *disks, *resvs;
	int r;

	if (!srv->o.hooks.stats)
		return cwc_fail(c, CW_CTL_E_NOT_SUPPORTED, "this server has no data path to count");
	r = srv->o.hooks.stats(srv->o.hooks.userdata, &st);
	if (r < 0)
		return cwc_fail(c, cw_ctl_code_from_errno(r), "collecting counters: %s", strerror(-r));
	disks = json_object_new_array();
	for (size_t i = 0; i < st.n_disks; i++) {
		const struct cwc_disk_stats *s = &st.disks[i];
		json_object *o = json_object_new_object();
		struct cw_disk_info d;

		cwc_add(o, "disk_id", json_object_new_int64(s->disk_id));
		if (cw_disk_info(srv->pool, s->disk_id, &d) == 0)
			cwc_add(o, "disk", cwc_jstr(d.name));
		cwc_add(o, "rt_requests", cw_ctl_json_u64(s->rt_requests));
		cwc_add(o, "rt_misses", cw_ctl_json_u64(s->rt_misses));
		cwc_add(o, "be_requests", cw_ctl_json_u64(s->be_requests));
		cwc_add(o, "be_p50_ns", json_object_new_int64(s->be_p50_ns));
		cwc_add(o, "be_p99_ns", json_object_new_int64(s->be_p99_ns));
		cwc_add(o, "be_max_ns", json_object_new_int64(s->be_max_ns));
		cwc_add(o, "slack_used_ns", json_object_new_int64(s->slack_used_ns));
		cwc_add(o, "read_bytes", cw_ctl_json_u64(s->read_bytes));
		cwc_add(o, "written_bytes", cw_ctl_json_u64(s->written_bytes));
		cwc_add(o, "be_hist", hist_json(s->be_hist));
		/* What C promised against what the disk did, alone. */
		cwc_add(o, "alone_requests", cw_ctl_json_u64(s->alone_requests));
		cwc_add(o, "over_c", cw_ctl_json_u64(s->over_c));
		cwc_add(o, "p50_over_c", json_object_new_double(s->p50_over_c));
		cwc_add(o, "p999_over_c", json_object_new_double(s->p999_over_c));
		cwc_add(o, "c_block_ns", json_object_new_int64(s->c_block_ns));
		json_object_array_add(disks, o);
	}
	resvs = json_object_new_array();
	for (size_t i = 0; i < st.n_resvs; i++) {
		const struct cwc_resv_stats *s = &st.resvs[i];
		json_object *o = json_object_new_object();

		cwc_add(o, "id", cw_ctl_json_u64(s->resv_id));
		cwc_add(o, "requests", cw_ctl_json_u64(s->requests));
		cwc_add(o, "misses", cw_ctl_json_u64(s->misses));
		cwc_add(o, "read_bytes", cw_ctl_json_u64(s->read_bytes));
		cwc_add(o, "written_bytes", cw_ctl_json_u64(s->written_bytes));
		cwc_add(o, "worst_late_ns", json_object_new_int64(s->worst_late_ns));
		json_object_array_add(resvs, o);
	}
	free(st.disks);
	free(st.resvs);
	*ret = json_object_new_object();
	/* The server's clock: a client divides two replies' difference. */
	cwc_add(*ret, "now_ns", json_object_new_int64(srv->o.clock_ns()));
	cwc_add(*ret, "disks", disks);
	cwc_add(*ret, "reservations", resvs);
	return 0;
}

