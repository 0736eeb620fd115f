/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The metrics exposition: what the read commands of the control socket
 * say (stats, disk.headroom, move list, the caches and the host of
 * status), as Prometheus text (version 0.0.4) or OpenMetrics 1.0.0, for
 * control-http.c to serve.  Names follow Prometheus' conventions: the
 * prefix clockwise_, base units (seconds, bytes), _total on counters.
 *
 * It runs on the control server's thread, as the commands do, so it may
 * read the server's state as they do.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/cache.h>
#include <clockwise/mover.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "control-internal.h"

struct out {
	FILE *f;
	bool om;		/* OpenMetrics, else Prometheus text 0.0.4 */
};

/* A family's HELP and TYPE.  A counter's family is named without _total
 * in OpenMetrics and with it in the Prometheus format; its samples end
 * in _total in both. */
static void family(struct out *o, const char *name, const char *type, const char *help)
{
	const char *suffix = !o->om && !strcmp(type, "counter") ? "_total" : "";

	fprintf(o->f, "# HELP %s%s %s\n# TYPE %s%s %s\n", name, suffix, help, name, suffix, type);
}

static double sec(int64_t ns)
{
	return (double)ns / 1e9;
}

/* A label value, escaped as both formats want. */
static void label_value(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fprintf(f, "\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

/* labels: "name", "value", ... up to NULL (an even count); a label
 * whose value is "" is left out, as Prometheus would take it. */
static void vsample(struct out *o, const char *name, const char *suffix, double v, va_list ap)
{
	const char *k;
	bool first = true;

	fprintf(o->f, "%s%s", name, suffix);
	while ((k = va_arg(ap, const char *))) {
		const char *lv = va_arg(ap, const char *);

		if (!lv[0])
			continue;
		fprintf(o->f, "%s%s=\"", first ? "{" : ",", k);
		label_value(o->f, lv);
		fputc('"', o->f);
		first = false;
	}
	if (!first)
		fputc('}', o->f);
	if (isinf(v))
		fputs(v > 0 ? " +Inf\n" : " -Inf\n", o->f);
	else if (v == floor(v) && fabs(v) < 1e15)
		fprintf(o->f, " %.0f\n", v);
	else
		fprintf(o->f, " %.9g\n", v);
}

static void sample(struct out *o, const char *name, double v, ...)
{
	va_list ap;

	va_start(ap, v);
	vsample(o, name, "", v, ap);
	va_end(ap);
}

static void counter(struct out *o, const char *name, double v, ...)
{
	va_list ap;

	va_start(ap, v);
	vsample(o, name, "_total", v, ap);
	va_end(ap);
}

/* The edges, in ns, of the exposition's latency buckets: from 50 us to
 * 10 s, 1-2.5-5 a decade (the daemon keeps finer ones, clockwise/hist.h,
 * and counts each edge's samples from them). */
static const uint64_t le_ns[] = {
	50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000, 25000000,
	50000000, 100000000, 250000000, 500000000, 1000000000, 2500000000, 5000000000,
	10000000000,
};

/* The best-effort latency histogram of one disk as cumulative "le"
 * buckets, their sum and count: the one place that writes them. */
static void be_histogram(struct out *o, const char *name, const struct cwc_disk_stats *s,
			 const char *disk)
{
	char le[32], bucket[128];
	uint64_t n = cw_hist_total(s->be_hist);

	snprintf(bucket, sizeof(bucket), "%s_bucket", name);
	for (size_t b = 0; b < CW_ARRAY_SIZE(le_ns); b++) {
		snprintf(le, sizeof(le), "%.9g", (double)le_ns[b] / 1e9);
		sample(o, bucket, (double)cw_hist_count_le(s->be_hist, le_ns[b]), "disk", disk,
		       "le", le, NULL);
	}
	sample(o, bucket, (double)n, "disk", disk, "le", "+Inf", NULL);
	snprintf(bucket, sizeof(bucket), "%s_sum", name);
	sample(o, bucket, sec(s->be_lat_sum_ns), "disk", disk, NULL);
	snprintf(bucket, sizeof(bucket), "%s_count", name);
	sample(o, bucket, (double)n, "disk", disk, NULL);
}

static const char *disk_name(struct cwc_server *srv, uint32_t id, char *buf, size_t len)
{
	struct cw_disk_info d;

	if (cw_disk_info(srv->pool, id, &d) == 0)
		snprintf(buf, len, "%s", d.name);
	else
		snprintf(buf, len, "%" PRIu32, id);
	return buf;
}

#define FOR_DISKS(st, i, s, name)                                                           \
	for (size_t i = 0; i < (st)->n_disks; i++)                                           \
		for (const struct cwc_disk_stats *s = &(st)->disks[i]; s; s = NULL)          \
			for (const char *name = names[i]; name; name = NULL)

/* A disk's figure that is one field of struct cwc_disk_stats. */
enum fig_kind { FIG_U64, FIG_NS, FIG_UINT };
struct disk_figure {
	const char *name, *type, *help;
	size_t off;
	enum fig_kind kind;
};
#define DF(n, t, field, k, h) { n, t, h, offsetof(struct cwc_disk_stats, field), k }
static const struct disk_figure disk_figures[] = {
	DF("clockwise_disk_read_bytes", "counter", read_bytes, FIG_U64, "Bytes read from the disk."),
	DF("clockwise_disk_written_bytes", "counter", written_bytes, FIG_U64,
	   "Bytes written to the disk."),
	DF("clockwise_disk_deadline_misses", "counter", rt_misses, FIG_U64,
	   "Real-time requests that completed after their deadline."),
	DF("clockwise_disk_be_overruns", "counter", be_overruns, FIG_U64,
	   "Best-effort requests that took longer than they were charged."),
	DF("clockwise_disk_be_overrun_seconds", "counter", be_overrun_ns, FIG_NS,
	   "Time best-effort requests took beyond their charge, summed."),
	DF("clockwise_disk_slack_used_seconds", "counter", slack_used_ns, FIG_NS,
	   "Best-effort service run in the slack the streams leave."),
	DF("clockwise_disk_alone_requests", "counter", alone_requests, FIG_U64,
	   "Requests the disk served with nothing else in flight."),
	DF("clockwise_disk_over_service_time_requests", "counter", over_c, FIG_U64,
	   "Requests served alone that took longer than the model's service time C."),
	DF("clockwise_disk_queue_depth", "gauge", queued, FIG_U64,
	   "Requests booked on the disk and not yet complete."),
	DF("clockwise_disk_lanes", "gauge", lanes, FIG_UINT, "Dispatchers (lanes) of the disk."),
	DF("clockwise_disk_block_service_seconds", "gauge", c_block_ns, FIG_NS,
	   "The model's worst-case service time C of one pool block."),
};
#undef DF

static double figure_value(const struct cwc_disk_stats *s, const struct disk_figure *f)
{
	const char *p = (const char *)s + f->off;

	switch (f->kind) {
	case FIG_NS:
		return sec(*(const int64_t *)(const void *)p);
	case FIG_UINT:
		return *(const unsigned *)(const void *)p;
	case FIG_U64:
		break;
	}
	return (double)*(const uint64_t *)(const void *)p;
}

/* Each dispatcher's part of its disk's requests, bytes and queue. */
static void lane_metrics(struct out *o, const struct cwc_stats *st, char (*names)[CW_NAME_MAX + 1])
{
	char lane[16];

#define FOR_LANES                                                                             \
	FOR_DISKS(st, i, s, d)                                                                \
		for (unsigned j = 0; s->lane && j < s->lanes; j++)                             \
			if (snprintf(lane, sizeof(lane), "%u", j) > 0)
	family(o, "clockwise_lane_requests", "counter",
	       "Requests the lane (a dispatcher of the disk) completed, by class.");
	FOR_LANES {
		counter(o, "clockwise_lane_requests", (double)s->lane[j].rt_requests, "disk", d, "lane",
			lane, "class", "rt", NULL);
		counter(o, "clockwise_lane_requests", (double)s->lane[j].be_requests, "disk", d, "lane",
			lane, "class", "be", NULL);
	}
	family(o, "clockwise_lane_read_bytes", "counter", "Bytes the lane read.");
	FOR_LANES counter(o, "clockwise_lane_read_bytes", (double)s->lane[j].read_bytes, "disk", d,
			  "lane", lane, NULL);
	family(o, "clockwise_lane_written_bytes", "counter", "Bytes the lane wrote.");
	FOR_LANES counter(o, "clockwise_lane_written_bytes", (double)s->lane[j].written_bytes, "disk",
			  d, "lane", lane, NULL);
	family(o, "clockwise_lane_queue_depth", "gauge",
	       "Requests booked on the lane and not yet complete.");
	FOR_LANES sample(o, "clockwise_lane_queue_depth", (double)s->lane[j].queued, "disk", d,
			 "lane", lane, NULL);
#undef FOR_LANES
}

static void disk_metrics(struct out *o, const struct cwc_stats *st, char (*names)[CW_NAME_MAX + 1])
{
	family(o, "clockwise_disk_requests", "counter",
	       "Requests the disk's dispatchers completed, by class (rt: real-time, be: best-effort).");
	FOR_DISKS(st, i, s, d) {
		counter(o, "clockwise_disk_requests", (double)s->rt_requests, "disk", d, "class", "rt", NULL);
		counter(o, "clockwise_disk_requests", (double)s->be_requests, "disk", d, "class", "be", NULL);
	}
	for (size_t k = 0; k < CW_ARRAY_SIZE(disk_figures); k++) {
		const struct disk_figure *f = &disk_figures[k];

		family(o, f->name, f->type, f->help);
		FOR_DISKS(st, i, s, d) {
			if (!strcmp(f->type, "counter"))
				counter(o, f->name, figure_value(s, f), "disk", d, NULL);
			else
				sample(o, f->name, figure_value(s, f), "disk", d, NULL);
		}
	}
	lane_metrics(o, st, names);
	family(o, "clockwise_disk_deadline_misses_by_cause", "counter",
	       "Deadline misses the daemon explained, by cause (model, overrun, cpu, delivery, sched, "
	       "emulator).");
	FOR_DISKS(st, i, s, d)
		for (unsigned k = 0; k < CW_MISS_CLASSES; k++)
			counter(o, "clockwise_disk_deadline_misses_by_cause", (double)s->misses[k],
				"disk", d, "cause",
				cw_sched_miss_class_name((enum cw_sched_miss_class)k), NULL);
	/* "quantile" is a summary's label: this is a gauge of two of them. */
	family(o, "clockwise_disk_service_over_model_ratio", "gauge",
	       "Service time of requests served alone over the model's C, at a percentile.");
	FOR_DISKS(st, i, s, d) {
		sample(o, "clockwise_disk_service_over_model_ratio", s->p50_over_c, "disk", d,
		       "percentile", "50", NULL);
		sample(o, "clockwise_disk_service_over_model_ratio", s->p999_over_c, "disk", d,
		       "percentile", "99.9", NULL);
	}
	family(o, "clockwise_disk_be_latency_seconds", "histogram",
	       "Best-effort requests from arrival to completion.");
	FOR_DISKS(st, i, s, d)
		be_histogram(o, "clockwise_disk_be_latency_seconds", s, d);
}

/* What admission gave each disk, against what it could still give. */
static void disk_admission(struct out *o, struct cwc_server *srv)
{
	_cleanup_free_ struct cw_disk_info *d = NULL;
	uint64_t block = cw_pool_block_size(srv->pool);
	struct cw_disk_plan *plan;
	double *admitted, *headroom;
	const struct cw_admit_resv *rv;
	size_t n = 0;

	if (cw_disk_list(srv->pool, &d, &n) < 0 || n == 0)
		return;
	plan = calloc(n, sizeof(*plan));
	admitted = calloc(n, sizeof(*admitted));
	headroom = calloc(n, sizeof(*headroom));
	if (!plan || !admitted || !headroom)
		goto out;
	for (size_t i = 0; i < n; i++) {
		struct cw_admit_refusal ref;
		uint64_t rate = 0;

		if (cw_admit_state_plan(srv->adm, d[i].id, &plan[i]) < 0)
			plan[i].disk_id = 0;
		headroom[i] = cw_admit_state_disk_headroom(srv->adm, d[i].id, block, &rate, &ref) == 0 ?
			      (double)rate : NAN;
		/* A stream's part on a disk moves block_bytes each period. */
		for (size_t k = 0; (rv = cw_admit_state_resv_at(srv->adm, k)); k++) {
			const struct cw_admit_resv_part *pt = cw_admit_resv_part_on(rv, d[i].id);

			if (pt && pt->task.period_ns > 0)
				admitted[i] += (double)rv->block_bytes * 1e9 / (double)pt->task.period_ns;
		}
	}
	family(o, "clockwise_disk_streams", "gauge", "Stream parts admitted on the disk.");
	for (size_t i = 0; i < n; i++)
		if (plan[i].disk_id)
			sample(o, "clockwise_disk_streams", (double)plan[i].n_tasks, "disk", d[i].name, NULL);
	family(o, "clockwise_disk_utilization_ratio", "gauge",
	       "Share of the disk's time admitted to streams and the best-effort server.");
	for (size_t i = 0; i < n; i++)
		if (plan[i].disk_id)
			sample(o, "clockwise_disk_utilization_ratio", plan[i].utilization, "disk",
			       d[i].name, NULL);
	family(o, "clockwise_disk_slack_seconds", "gauge",
	       "The slack (delta L) the admitted streams leave, and what the dispatcher may spend of it.");
	for (size_t i = 0; i < n; i++) {
		if (!plan[i].disk_id)
			continue;
		if (plan[i].delta_l_ns != CW_ADMIT_NO_LIMIT)
			sample(o, "clockwise_disk_slack_seconds", sec(plan[i].delta_l_ns), "disk",
			       d[i].name, "kind", "delta_l", NULL);
		if (plan[i].be_budget_ns != CW_ADMIT_NO_LIMIT)
			sample(o, "clockwise_disk_slack_seconds", sec(plan[i].be_budget_ns), "disk",
			       d[i].name, "kind", "be_budget", NULL);
	}
	family(o, "clockwise_disk_admitted_bytes_per_second", "gauge",
	       "Bandwidth of the streams admitted on the disk.");
	for (size_t i = 0; i < n; i++)
		sample(o, "clockwise_disk_admitted_bytes_per_second", admitted[i], "disk", d[i].name, NULL);
	family(o, "clockwise_disk_headroom_bytes_per_second", "gauge",
	       "The largest rate a new stream on the disk alone would be admitted at, in pool blocks.");
	for (size_t i = 0; i < n; i++)
		if (!isnan(headroom[i]))
			sample(o, "clockwise_disk_headroom_bytes_per_second", headroom[i], "disk",
			       d[i].name, NULL);
out:
	free(plan);
	free(admitted);
	free(headroom);
}

static void resv_metrics(struct out *o, const struct cwc_stats *st)
{
	char (*id)[24] = calloc(st->n_resvs ? st->n_resvs : 1, sizeof(*id));

	if (!id)
		return;
	/* A start-up stream (-r) has no id: its export names it. */
	for (size_t i = 0; i < st->n_resvs; i++)
		snprintf(id[i], sizeof(id[i]), st->resvs[i].resv_id ? "%" PRIu64 : "startup",
			 st->resvs[i].resv_id);
#define FOR_RESVS for (size_t i = 0; i < st->n_resvs; i++)
#define RL "reservation", id[i], "export", st->resvs[i].export_name
	family(o, "clockwise_reservation_requests", "counter", "Real-time requests of the reservation.");
	FOR_RESVS counter(o, "clockwise_reservation_requests", (double)st->resvs[i].requests, RL, NULL);
	family(o, "clockwise_reservation_deadline_misses", "counter",
	       "Requests of the reservation that completed after their deadline.");
	FOR_RESVS counter(o, "clockwise_reservation_deadline_misses", (double)st->resvs[i].misses, RL,
			  NULL);
	family(o, "clockwise_reservation_deadline_misses_by_cause", "counter",
	       "The reservation's misses the daemon explained, by cause.");
	FOR_RESVS for (unsigned k = 0; k < CW_MISS_CLASSES; k++)
		counter(o, "clockwise_reservation_deadline_misses_by_cause",
			(double)st->resvs[i].miss_class[k], RL, "cause",
			cw_sched_miss_class_name((enum cw_sched_miss_class)k), NULL);
	family(o, "clockwise_reservation_read_bytes", "counter", "Bytes the reservation's requests read.");
	FOR_RESVS counter(o, "clockwise_reservation_read_bytes", (double)st->resvs[i].read_bytes, RL,
			  NULL);
	family(o, "clockwise_reservation_written_bytes", "counter",
	       "Bytes the reservation's requests wrote.");
	FOR_RESVS counter(o, "clockwise_reservation_written_bytes", (double)st->resvs[i].written_bytes,
			  RL, NULL);
#undef RL
#undef FOR_RESVS
	free(id);
}

/* Each export's (and connection class's) best effort per disk, and its
 * share of the disks' time since the first export against what it was
 * due, as the stats command computes it. */
static void export_metrics(struct out *o, struct cwc_server *srv, const struct cwc_stats *st)
{
	struct cw_sched_share_out *rows = NULL;
	size_t nrows = 0;
	char dn[CW_NAME_MAX + 16];

	cwc_export_shares(srv, st, &rows, &nrows);
#define FOR_EXPORT_DISKS                                                                     \
	for (size_t i = 0; i < st->n_exports; i++)                                           \
		for (size_t j = 0; j < st->exports[i].n_disks; j++)
#define XL "export", st->exports[i].name, "disk", disk_name(srv, st->exports[i].disks[j].in.disk, dn, sizeof(dn))
	family(o, "clockwise_export_be_requests", "counter",
	       "Best-effort requests of the export on the disk.");
	FOR_EXPORT_DISKS counter(o, "clockwise_export_be_requests",
				 (double)st->exports[i].disks[j].in.requests, XL, NULL);
	family(o, "clockwise_export_bytes", "counter", "Best-effort bytes of the export on the disk.");
	FOR_EXPORT_DISKS counter(o, "clockwise_export_bytes", (double)st->exports[i].disks[j].bytes,
				 XL, NULL);
	family(o, "clockwise_export_be_served_seconds", "counter",
	       "Disk time the export's best-effort requests were charged.");
	FOR_EXPORT_DISKS counter(o, "clockwise_export_be_served_seconds",
				 sec(st->exports[i].disks[j].in.served_ns), XL, NULL);
	family(o, "clockwise_export_be_throttled_seconds", "counter",
	       "Time the export's limit held its best-effort requests back on the disk.");
	FOR_EXPORT_DISKS counter(o, "clockwise_export_be_throttled_seconds",
				 sec(st->exports[i].disks[j].in.throttled_ns), XL, NULL);
#undef XL
#undef FOR_EXPORT_DISKS
	family(o, "clockwise_export_be_share_ratio", "gauge",
	       "Disk time the export received and was due since the first export, in disks' worth.");
	for (size_t r = 0; r < nrows; r++) {
		const char *name = st->exports[rows[r].client].name;

		sample(o, "clockwise_export_be_share_ratio", rows[r].received, "export", name, "kind",
		       "received", NULL);
		sample(o, "clockwise_export_be_share_ratio", rows[r].due, "export", name, "kind", "due",
		       NULL);
	}
	free(rows);
}

/* Unfinished moves (re-layouts, evacuations, promotions, demotions):
 * their blocks planned and done. */
static void move_metrics(struct out *o, struct cwc_server *srv)
{
	_cleanup_free_ struct cw_move_info *m = NULL;
	size_t n = 0;
	char id[24];

	if (cw_move_list(srv->pool, &m, &n) < 0)
		n = 0;
#define FOR_MOVES                                                                             \
	for (size_t i = 0; i < n; i++)                                                        \
		if (m[i].state == CW_MOVE_RUNNING || m[i].state == CW_MOVE_PAUSED)            \
			if (snprintf(id, sizeof(id), "%" PRIu64, m[i].id) > 0)
#define ML "move", id, "kind", cw_move_kind_name(m[i].kind), "part", m[i].part, \
	   "state", cw_move_state_name(m[i].state)
	family(o, "clockwise_move_blocks", "gauge", "Block copies an unfinished move plans.");
	FOR_MOVES sample(o, "clockwise_move_blocks", (double)m[i].blocks, ML, NULL);
	family(o, "clockwise_move_blocks_done", "gauge",
	       "Block copies of an unfinished move switched to their destination.");
	FOR_MOVES sample(o, "clockwise_move_blocks_done", (double)m[i].done, ML, NULL);
	family(o, "clockwise_move_copied_bytes", "gauge", "Bytes an unfinished move copied so far.");
	FOR_MOVES sample(o, "clockwise_move_copied_bytes", (double)m[i].bytes_copied, ML, NULL);
#undef ML
#undef FOR_MOVES
}

/* Partitions' SSD caches. */
static void cache_metrics(struct out *o, struct cwc_server *srv)
{
	_cleanup_free_ struct cw_part_info *parts = NULL;
	_cleanup_free_ struct cw_cache_stats *cs = NULL;
	size_t n = 0;

	if (cw_part_list(srv->pool, &parts, &n) < 0 || n == 0)
		return;
	cs = calloc(n, sizeof(*cs));
	if (!cs)
		return;
	for (size_t i = 0; i < n; i++) {
		struct cw_part *part;

		cs[i].slots = UINT32_MAX;	/* none */
		if (cw_part_lookup(srv->pool, parts[i].name, &part) < 0 ||
		    cw_part_cache_stats(part, &cs[i]) < 0)
			cs[i].slots = UINT32_MAX;
	}
#define FOR_CACHES for (size_t i = 0; i < n; i++) if (cs[i].slots != UINT32_MAX)
#define CACHE_COUNTER(metric, field, help)                                                   \
	family(o, metric, "counter", help);                                                  \
	FOR_CACHES counter(o, metric, (double)cs[i].field, "part", parts[i].name, NULL)
#define CACHE_GAUGE(metric, field, help)                                                     \
	family(o, metric, "gauge", help);                                                    \
	FOR_CACHES sample(o, metric, (double)cs[i].field, "part", parts[i].name, NULL)
	CACHE_COUNTER("clockwise_cache_hits", hits, "Blocks read from the partition's SSD cache.");
	CACHE_COUNTER("clockwise_cache_misses", misses,
		      "Blocks read past the partition's SSD cache, from their disk.");
	CACHE_COUNTER("clockwise_cache_promotions", promotions, "Blocks the cache took in.");
	CACHE_COUNTER("clockwise_cache_demotions", demotions, "Blocks the cache gave back.");
	CACHE_COUNTER("clockwise_cache_writebacks", writebacks,
		      "Dirty blocks the cache wrote back to their disk.");
	CACHE_GAUGE("clockwise_cache_slots", slots, "Block slots of the cache in service.");
	CACHE_GAUGE("clockwise_cache_used_slots", used, "Slots of the cache holding a block.");
	CACHE_GAUGE("clockwise_cache_dirty_slots", dirty, "Slots written on the SSD only.");
#undef CACHE_GAUGE
#undef CACHE_COUNTER
#undef FOR_CACHES
}

/* The host's model and what the streams need of its CPUs (status's host). */
static void host_metrics(struct out *o, struct cwc_server *srv)
{
	double cpu = (double)CW_HOST_PS_PER_CPU_S;
	struct cw_host_model h;
	uint64_t need;

	cw_admit_state_host(srv->adm, &h, &need);
	if (cw_host_model_none(&h))
		return;
	family(o, "clockwise_host_cpus", "gauge", "CPUs of the host.");
	sample(o, "clockwise_host_cpus", h.cpus, NULL);
	family(o, "clockwise_host_stream_cpus", "gauge",
	       "CPUs the admitted streams need (kind=\"need\") and are given (kind=\"given\").");
	sample(o, "clockwise_host_stream_cpus", (double)need / cpu, "kind", "need", NULL);
	sample(o, "clockwise_host_stream_cpus", (double)cw_host_capacity_ps(&h) / cpu, "kind",
	       "given", NULL);
	family(o, "clockwise_host_request_cpu_seconds", "gauge",
	       "CPU time one request costs, its bytes aside.");
	sample(o, "clockwise_host_request_cpu_seconds", sec(h.request_ns), NULL);
	family(o, "clockwise_host_copy_bytes_per_cpu_second", "gauge",
	       "Bytes one CPU carries in a second, every copy counted.");
	sample(o, "clockwise_host_copy_bytes_per_cpu_second", h.byte_ps ? cpu / (double)h.byte_ps : 0,
	       NULL);
}

int cwc_metrics_text(struct cwc_server *srv, bool openmetrics, char **ret, size_t *ret_len)
{
	struct out o = { .om = openmetrics };
	struct cwc_stats st = { 0 };
	char (*names)[CW_NAME_MAX + 1] = NULL;
	char *buf = NULL;
	size_t len = 0;
	int r = 0;

	if (srv->o.hooks.stats) {
		r = srv->o.hooks.stats(srv->o.hooks.userdata, &st);
		if (r < 0)
			goto out;
	}
	names = calloc(st.n_disks ? st.n_disks : 1, sizeof(*names));
	o.f = open_memstream(&buf, &len);
	if (!names || !o.f) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < st.n_disks; i++)
		disk_name(srv, st.disks[i].disk_id, names[i], sizeof(names[i]));
	if (srv->o.hooks.stats)
		disk_metrics(&o, &st, names);
	disk_admission(&o, srv);
	if (srv->o.hooks.stats) {
		resv_metrics(&o, &st);
		export_metrics(&o, srv, &st);
	}
	move_metrics(&o, srv);
	cache_metrics(&o, srv);
	host_metrics(&o, srv);
	if (openmetrics)
		fputs("# EOF\n", o.f);
	if (fclose(o.f) != 0)
		r = -errno;
	o.f = NULL;
	if (r == 0) {
		*ret = CW_TAKE_PTR(buf);
		*ret_len = len;
	}
out:
	if (o.f)
		fclose(o.f);
	free(buf);
	free(names);
	cwc_stats_free(&st);
	return r;
}
