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

/* The host's model and what the streams need of it; null: no host test. */
static json_object *host_json(struct cwc_server *srv)
{
	struct cw_host_model h;
	uint64_t need;
	json_object *o;

	cw_admit_state_host(srv->adm, &h, &need);
	if (cw_host_model_none(&h))
		return NULL;
	o = cwc_host_json(need, cw_host_capacity_ps(&h));
	cwc_add(o, "cpus", json_object_new_int64(h.cpus));
	cwc_add(o, "share", json_object_new_double(h.share_ppm / 1e6));
	cwc_add(o, "request_ns", json_object_new_int64(h.request_ns));
	cwc_add(o, "byte_ps", cw_ctl_json_u64(h.byte_ps));
	cwc_add(o, "copy_rate", cw_ctl_json_u64(h.byte_ps ? CW_HOST_PS_PER_CPU_S / h.byte_ps : 0));
	return o;
}

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
	cwc_add(*ret, "host", host_json(srv));
	if (srv->o.hooks.guarantee) {
		char why[512];

		srv->o.hooks.guarantee(srv->o.hooks.userdata, why, sizeof(why));
		cwc_add(*ret, "guarantee", cwc_jstr(why[0] ? "conditional" : "full"));
		if (why[0])
			cwc_add(*ret, "guarantee_lacks", cwc_jstr(why));
	}
	return 0;
}

/* The best-effort latency histogram: [bucket, count] for each bucket of
 * clockwise/hist.h that holds any (a client diffs two replies' counts,
 * bucket by bucket, for an interval's percentiles). */
static json_object *hist_json(const uint64_t *h)
{
	json_object *a = json_object_new_array();

	for (unsigned b = 0; b < CWC_HIST_BUCKETS; b++) {
		json_object *pair;

		if (!h[b])
			continue;
		pair = json_object_new_array();
		json_object_array_add(pair, json_object_new_int64(b));
		json_object_array_add(pair, cw_ctl_json_u64(h[b]));
		json_object_array_add(a, pair);
	}
	return a;
}

/* {"model": n, "overrun": n, "cpu": n, "delivery": n, "sched": n, "emulator": n} */
static json_object *classes_json(const uint64_t *n)
{
	json_object *o = json_object_new_object();

	for (unsigned k = 0; k < CW_MISS_CLASSES; k++)
		cwc_add(o, cw_sched_miss_class_name((enum cw_sched_miss_class)k),
			cw_ctl_json_u64(n[k]));
	return o;
}

void cwc_export_shares(const struct cwc_server *srv, const struct cwc_stats *st,
		       struct cw_sched_share_out **ret, size_t *ret_n)
{
	int64_t now = srv->o.clock_ns(), since = now;
	size_t n = 0, k = 0;
	_cleanup_free_ struct cw_sched_share_in *in = NULL;

	*ret = NULL;
	*ret_n = 0;
	for (size_t i = 0; i < st->n_exports; i++) {
		n += st->exports[i].n_disks;
		since = CW_MIN(since, st->exports[i].since_ns);
	}
	in = calloc(n ? n : 1, sizeof(*in));
	for (size_t i = 0; in && i < st->n_exports; i++)
		for (size_t j = 0; j < st->exports[i].n_disks; j++)
			in[k++] = st->exports[i].disks[j].in;
	/* one interval for all: since the first of them was exported */
	if (!in || now <= since || cw_sched_share_table(in, n, now - since, ret, ret_n) < 0) {
		free(*ret);
		*ret = NULL;
		*ret_n = 0;
	}
}

/* Each export's best effort on its disks since it was exported, and what
 * that was against what it was due (cwc_export_shares; frees st's
 * exports). */
static json_object *exports_json(const struct cwc_server *srv, struct cwc_stats *st)
{
	json_object *a = json_object_new_array();
	struct cw_sched_share_out *rows = NULL;
	size_t nrows = 0;

	cwc_export_shares(srv, st, &rows, &nrows);
	for (size_t i = 0; i < st->n_exports; i++) {
		const struct cwc_export_stats *es = &st->exports[i];
		json_object *o = json_object_new_object(), *d = json_object_new_array();
		uint64_t req = 0, bytes = 0;

		cwc_add(o, "export", cwc_jstr(es->name));
		cwc_add(o, "since_ns", json_object_new_int64(es->since_ns));
		for (size_t j = 0; j < es->n_disks; j++) {
			json_object *e = json_object_new_object();
			struct cw_disk_info info;

			if (cw_disk_info(srv->pool, es->disks[j].in.disk, &info) == 0)
				cwc_add(e, "disk", cwc_jstr(info.name));
			cw_ctl_share_in_add(e, &es->disks[j].in);
			cwc_add(e, "bytes", cw_ctl_json_u64(es->disks[j].bytes));
			req += es->disks[j].in.requests;
			bytes += es->disks[j].bytes;
			json_object_array_add(d, e);
		}
		cwc_add(o, "requests", cw_ctl_json_u64(req));
		cwc_add(o, "bytes", cw_ctl_json_u64(bytes));
		for (size_t r = 0; r < nrows; r++)
			if (rows[r].client == i)
				cw_ctl_share_out_add(o, &rows[r]);
		cwc_add(o, "disks", d);
		json_object_array_add(a, o);
	}
	free(rows);
	cwc_stats_free(st);
	return a;
}

int cwc_cmd_stats(struct ctx *c, json_object **ret)
{
	struct cwc_server *srv = c->srv;
	struct cwc_stats st = { 0 };
	json_object *disks, *resvs, *exports;
	int r;

	if (!srv->o.hooks.stats)
		return cwc_fail(c, CW_CTL_E_NOT_SUPPORTED, "this server has no data path to count");
	r = srv->o.hooks.stats(srv->o.hooks.userdata, &st);
	if (r < 0) {
		cwc_stats_free(&st);
		return cwc_fail(c, cw_ctl_code_from_errno(r), "collecting counters: %s", strerror(-r));
	}
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
		cwc_add(o, "rt_miss_classes", classes_json(s->misses));
		cwc_add(o, "be_overruns", cw_ctl_json_u64(s->be_overruns));
		cwc_add(o, "be_overrun_ns", json_object_new_int64(s->be_overrun_ns));
		/* What C promised against what the disk did, alone. */
		cwc_add(o, "alone_requests", cw_ctl_json_u64(s->alone_requests));
		cwc_add(o, "over_c", cw_ctl_json_u64(s->over_c));
		cwc_add(o, "p50_over_c", json_object_new_double(s->p50_over_c));
		cwc_add(o, "p999_over_c", json_object_new_double(s->p999_over_c));
		cwc_add(o, "tail_percentile", json_object_new_double(s->tail_permille / 10.0));
		cwc_add(o, "tail_over_c", json_object_new_double(s->tail_over_c));
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
		cwc_add(o, "short_requests", cw_ctl_json_u64(s->short_requests));
		cwc_add(o, "read_bytes", cw_ctl_json_u64(s->read_bytes));
		cwc_add(o, "written_bytes", cw_ctl_json_u64(s->written_bytes));
		cwc_add(o, "worst_late_ns", json_object_new_int64(s->worst_late_ns));
		cwc_add(o, "miss_classes", classes_json(s->miss_class));
		json_object_array_add(resvs, o);
	}
	exports = exports_json(srv, &st);	/* and frees st */
	*ret = json_object_new_object();
	/* The server's clock: a client divides two replies' difference. */
	cwc_add(*ret, "now_ns", json_object_new_int64(srv->o.clock_ns()));
	cwc_add(*ret, "disks", disks);
	cwc_add(*ret, "reservations", resvs);
	cwc_add(*ret, "exports", exports);
	cwc_add(*ret, "caches", cwc_caches_json(srv));
	return 0;
}

