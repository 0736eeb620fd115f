/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * status and stats (the server's are in daemon/control/control-status.c): the
 * pool at once; the data path's counters since the daemon started, or
 * with stats --watch per interval, computed here from two replies.
 */
#include "config.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <clockwise/hist.h>
#include <clockwise/sched-beq.h>
#include <clockwise/units.h>

#include "ctl/ctl.h"
#include "table.h"

/* A miss-class object as "cpu 2, delivery 1" (its nonzero classes), or
 * "-" when there are none. */
static const char *classes_text(json_object *o, const char *k, char *buf, size_t len)
{
	json_object *c = get(o, k);
	size_t at = 0;

	buf[0] = 0;
	if (c && json_object_is_type(c, json_type_object)) {
		json_object_object_foreach(c, name, v) {
			int64_t n = json_object_get_int64(v);

			if (n > 0 && at < len)
				at += (size_t)snprintf(buf + at, len - at, "%s%s %" PRId64,
						       at ? ", " : "", name, n);
		}
	}
	return buf[0] ? buf : "-";
}

/* Exports' best effort: share of one disk's time received against due
 * (cw_sched_share_table), reservation met, limit held. */
static void print_be_exports(json_object *a, const char *rate_key)
{
	struct table t = { .ncols = 9 };

	if (!a || !json_object_array_length(a))
		return;
	printf("\n");
	table_row(&t, "EXPORT", rate_key ? "RATE" : "BYTES", "RECEIVED", "DUE", "RESERVED",
		  "RESV-MET", "LIMIT", "LIMIT-HELD", "THROTTLED");
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *o = json_object_array_get_idx(a, i);
		char rate[CW_UNITS_BUF], got[16], due[16], resv[16], lim[16], thr[16];
		bool has_resv = json_object_get_double(get(o, "reserved")) > 0;

		if (rate_key)
			cw_units_format_rate((uint64_t)(json_object_get_double(get(o, rate_key)) + 0.5),
					     rate);
		else
			fsize(o, "bytes", rate);
		pct(got, sizeof(got), o, "received");
		pct(due, sizeof(due), o, "due");
		pct(resv, sizeof(resv), o, "reserved");
		pct(lim, sizeof(lim), o, "limit");
		pct(thr, sizeof(thr), o, "throttled");
		table_row(&t, gs(o, "export"), rate, got, due, has_resv ? resv : "-",
			  !has_resv ? "-" : json_object_get_boolean(get(o, "reservation_met")) ?
			  "yes" : "NO", lim,
			  !get(o, "limit") ? "-" : json_object_get_boolean(get(o, "limit_held")) ?
			  "yes" : "NO", get(o, "limit") ? thr : "-");
	}
	table_print(&t, stdout);
}

static void print_stats(json_object *s)
{
	struct table t = { .ncols = 11 }, u = { .ncols = 5 }, m = { .ncols = 3 };
	bool any_miss = false;
	json_object *d = get(s, "disks"), *r = get(s, "reservations");

	table_row(&t, "DISK", "RT-REQS", "RT-MISSES", "BE-REQS", "BE-P50", "BE-P99", "BE-MAX",
		  "SLACK-USED", "C-BLOCK", "TAIL/C", "OVER-C");
	for (size_t i = 0; d && i < json_object_array_length(d); i++) {
		json_object *o = json_object_array_get_idx(d, i);
		char a[CW_UNITS_BUF], b[CW_UNITS_BUF], c[CW_UNITS_BUF], e[CW_UNITS_BUF];
		char f[CW_UNITS_BUF], tail[32], over[48];

		/* the tail of what the disk served alone, at the percentile
		 * C was calibrated at, as a share of C: above 1, C no longer
		 * holds as calibrated ("0.84@p99.9") */
		if (json_object_get_int64(get(o, "alone_requests")) > 0)
			snprintf(tail, sizeof(tail), "%.2f@p%g",
				 json_object_get_double(get(o, "tail_over_c")),
				 json_object_get_double(get(o, "tail_percentile")));
		else
			snprintf(tail, sizeof(tail), "-");
		snprintf(over, sizeof(over), "%s/%s", gs(o, "over_c"), gs(o, "alone_requests"));
		table_row(&t, gs(o, "disk"), gs(o, "rt_requests"), gs(o, "rt_misses"),
			  gs(o, "be_requests"), fdur(o, "be_p50_ns", a), fdur(o, "be_p99_ns", b),
			  fdur(o, "be_max_ns", c), fdur(o, "slack_used_ns", e),
			  fdur(o, "c_block_ns", f), tail, over);
		any_miss |= gi(o, "rt_misses") > 0 || gi(o, "be_overruns") > 0;
	}
	table_print(&t, stdout);
	/* Why deadlines were missed, and the best effort that overran. */
	if (any_miss) {
		printf("\n");
		table_row(&m, "DISK", "MISSES-BY-CAUSE", "BE-OVERRUNS");
		for (size_t i = 0; i < json_object_array_length(d); i++) {
			json_object *o = json_object_array_get_idx(d, i);
			char a[160];

			table_row(&m, gs(o, "disk"), classes_text(o, "rt_miss_classes", a, sizeof(a)),
				  gs(o, "be_overruns"));
		}
		table_print(&m, stdout);
	}
	if (r && json_object_array_length(r)) {
		printf("\n");
		table_row(&u, "RESV", "REQUESTS", "MISSES", "WORST-LATE", "BY-CAUSE");
		for (size_t i = 0; i < json_object_array_length(r); i++) {
			json_object *o = json_object_array_get_idx(r, i);
			char a[CW_UNITS_BUF], b[160];

			/* Id 0: a static reservation (clockwised -r). */
			table_row(&u, strcmp(gs(o, "id"), "0") ? gs(o, "id") : "static",
				  gs(o, "requests"), gs(o, "misses"),
				  fdur(o, "worst_late_ns", a),
				  classes_text(o, "miss_classes", b, sizeof(b)));
		}
		table_print(&u, stdout);
	}
	print_be_exports(get(s, "exports"), NULL);
	print_caches(get(s, "caches"));
}

void print_status(json_object *s)
{
	json_object *p = get(s, "pool");
	char size[CW_UNITS_BUF], fr[CW_UNITS_BUF], bs[CW_UNITS_BUF];

	printf("pool %s: block size %s, %s, %s free", gs(p, "uuid"), fsize(p, "block_size", bs),
	       fsize(p, "size", size), fsize(p, "free", fr));
	if (gi(p, "missing_disks"))
		printf(", DEGRADED: %s disk(s) missing", gs(p, "missing_disks"));
	for (size_t i = 0; get(s, "disks") && i < json_object_array_length(get(s, "disks")); i++) {
		json_object *d = json_object_array_get_idx(get(s, "disks"), i);

		if (get(d, "unreplaced"))
			printf("\nDEGRADED: disk %s failed and no spare replaces it: %s", gs(d, "name"),
			       gs(d, "unreplaced"));
	}
	if (get(s, "guarantee_lacks"))
		printf("\ndeadline guarantee: conditional: %s", gs(s, "guarantee_lacks"));
	else if (get(s, "guarantee"))
		printf("\ndeadline guarantee: %s", gs(s, "guarantee"));
	if (get(s, "host")) {
		json_object *h = get(s, "host");
		char rate[CW_UNITS_BUF];

		printf("\nhost: %.0f%% of %s CPUs for streams (%.3f CPUs), the streams need %.3f; "
		       "a request costs %s ns, a byte %s ps (%s of copies a CPU-second)",
		       100 * json_object_get_double(get(h, "share")), gs(h, "cpus"),
		       json_object_get_double(get(h, "cpu_given")),
		       json_object_get_double(get(h, "cpu_need")), gs(h, "request_ns"),
		       gs(h, "byte_ps"), frate_floor(h, "copy_rate", rate));
	}
	printf("\n\ndisks:\n");
	print_disks(get(s, "disks"));
	printf("\npartitions:\n");
	print_parts(get(s, "partitions"));
	printf("\nreservations:\n");
	print_resvs(get(s, "reservations"));
	printf("\nexports:\n");
	print_exports(get(s, "exports"));
}

/* The entry of array a whose key k equals that of o, or NULL. */
static json_object *match(json_object *a, const char *k, json_object *o)
{
	for (size_t i = 0; a && i < json_object_array_length(a); i++) {
		json_object *x = json_object_array_get_idx(a, i);

		if (gi(x, k) == gi(o, k))
			return x;
	}
	return NULL;
}

/* What counter k grew by from was to now (was NULL: since it started). */
static uint64_t grew(json_object *now, json_object *was, const char *k)
{
	uint64_t a = (uint64_t)gi(now, k), b = was ? (uint64_t)gi(was, k) : 0;

	return a >= b ? a - b : a;	/* less: the daemon started again */
}

/* Adds (sign 1) or takes away (-1) a stats reply's sparse best-effort
 * histogram, [[bucket, count], ...] (clockwise/hist.h's buckets), to d. */
static void hist_add(uint64_t *d, json_object *h, int sign)
{
	for (size_t i = 0; h && i < json_object_array_length(h); i++) {
		json_object *p = json_object_array_get_idx(h, i);
		int64_t b = json_object_get_int64(json_object_array_get_idx(p, 0));
		uint64_t n = (uint64_t)json_object_get_int64(json_object_array_get_idx(p, 1));

		if (b >= 0 && b < CW_HIST_BUCKETS)
			d[b] = sign > 0 ? d[b] + n : d[b] >= n ? d[b] - n : 0;
	}
}

/* The latency under which a fraction q of an interval's best-effort
 * requests finished (within 1.6% above; cw_hist_quantile), from the
 * growth of the histogram between two replies; 0 without any. */
static int64_t interval_quantile(json_object *now, json_object *was, double q)
{
	static uint64_t d[CW_HIST_BUCKETS], w[CW_HIST_BUCKETS];

	memset(d, 0, sizeof(d));
	memset(w, 0, sizeof(w));
	hist_add(d, get(now, "be_hist"), 1);
	hist_add(w, get(was, "be_hist"), 1);
	/* fewer now than then: the daemon started again, now's are the interval's */
	if (cw_hist_total(d) >= cw_hist_total(w))
		hist_add(d, get(was, "be_hist"), -1);
	return (int64_t)cw_hist_quantile(d, q);
}

/* The entry of array a whose string key k equals that of o, or NULL. */
static json_object *match_str(json_object *a, const char *k, json_object *o)
{
	for (size_t i = 0; a && i < json_object_array_length(a); i++) {
		json_object *x = json_object_array_get_idx(a, i);

		if (!strcmp(gs(x, k), gs(o, k)))
			return x;
	}
	return NULL;
}

/* Each export's best effort in the interval: what it got against what it
 * was due, from the counters' growth on each of its disks. */
static json_object *exports_interval(json_object *was, json_object *now, int64_t dt)
{
	json_object *out = json_object_new_array(), *a = get(now, "exports");
	size_t n = 0, k = 0, nrows = 0;
	struct cw_sched_share_in *in;
	struct cw_sched_share_out *rows = NULL;

	for (size_t i = 0; a && i < json_object_array_length(a); i++)
		n += json_object_array_length(get(json_object_array_get_idx(a, i), "disks"));
	in = calloc(n ? n : 1, sizeof(*in));
	for (size_t i = 0; in && a && i < json_object_array_length(a); i++) {
		json_object *x = json_object_array_get_idx(a, i);
		json_object *wx = match_str(get(was, "exports"), "export", x), *d = get(x, "disks");

		for (size_t j = 0; j < json_object_array_length(d); j++) {
			json_object *e = json_object_array_get_idx(d, j);
			json_object *we = wx ? match(get(wx, "disks"), "disk_id", e) : NULL;
			struct cw_sched_share_in b = { 0 };

			if (cw_ctl_share_in_parse(e, &in[k]) < 0)
				continue;
			/* less than before: the export came again */
			if (we && cw_ctl_share_in_parse(we, &b) == 0 && b.served_ns <= in[k].served_ns &&
			    b.busy_ns <= in[k].busy_ns) {
				in[k].served_ns -= b.served_ns;
				in[k].resv_ns = in[k].resv_ns > b.resv_ns ? in[k].resv_ns - b.resv_ns : 0;
				in[k].busy_ns -= b.busy_ns;
				in[k].throttled_ns = in[k].throttled_ns > b.throttled_ns ?
						     in[k].throttled_ns - b.throttled_ns : 0;
				in[k].requests = in[k].requests > b.requests ?
						 in[k].requests - b.requests : 0;
			}
			in[k++].client = i;
		}
	}
	if (!in || dt <= 0 || cw_sched_share_table(in, k, dt, &rows, &nrows) < 0)
		nrows = 0;
	for (size_t i = 0; a && i < json_object_array_length(a); i++) {
		json_object *x = json_object_array_get_idx(a, i), *o = json_object_new_object();
		json_object *wx = match_str(get(was, "exports"), "export", x);

		json_object_object_add(o, "export", json_object_new_string(gs(x, "export")));
		json_object_object_add(o, "bps", json_object_new_double(
			dt > 0 ? (double)grew(x, wx, "bytes") * 1e9 / (double)dt : 0));
		put_u64(o, "requests", grew(x, wx, "requests"));
		for (size_t r = 0; r < nrows; r++)
			if (rows[r].client == i)
				cw_ctl_share_out_add(o, &rows[r]);
		json_object_array_add(out, o);
	}
	free(rows);
	free(in);
	return out;
}

/* One interval, from the stats reply was to now: per disk and per
 * reservation, rates per second and counts in the interval. */
static json_object *interval_json(json_object *was, json_object *now, const char *when)
{
	json_object *o = json_object_new_object(), *disks = json_object_new_array();
	json_object *resvs = json_object_new_array(), *a;
	int64_t dt = gi(now, "now_ns") - gi(was, "now_ns");
	double s = dt > 0 ? (double)dt / 1e9 : 1;

	json_object_object_add(o, "time", json_object_new_string(when));
	json_object_object_add(o, "interval_ns", json_object_new_int64(dt));
	a = get(now, "disks");
	for (size_t i = 0; a && i < json_object_array_length(a); i++) {
		json_object *n = json_object_array_get_idx(a, i), *w = match(get(was, "disks"),
									 "disk_id", n);
		json_object *d = json_object_new_object();
		uint64_t slack = grew(n, w, "slack_used_ns");

		json_object_object_add(d, "disk", json_object_new_string(gs(n, "disk")));
		json_object_object_add(d, "disk_id", json_object_new_int64(gi(n, "disk_id")));
		json_object_object_add(d, "iops", json_object_new_double(
			(double)(grew(n, w, "rt_requests") + grew(n, w, "be_requests")) / s));
		json_object_object_add(d, "read_bps", json_object_new_double(
			(double)grew(n, w, "read_bytes") / s));
		json_object_object_add(d, "written_bps", json_object_new_double(
			(double)grew(n, w, "written_bytes") / s));
		put_u64(d, "rt_requests", grew(n, w, "rt_requests"));
		put_u64(d, "rt_misses", grew(n, w, "rt_misses"));
		put_u64(d, "be_requests", grew(n, w, "be_requests"));
		json_object_object_add(d, "be_p50_ns", json_object_new_int64(
			interval_quantile(n, w, 0.5)));
		json_object_object_add(d, "be_p99_ns", json_object_new_int64(
			interval_quantile(n, w, 0.99)));
		put_u64(d, "slack_used_ns", slack);
		json_object_object_add(d, "slack_used", json_object_new_double(
			dt > 0 ? (double)slack / (double)dt : 0));
		json_object_array_add(disks, d);
	}
	a = get(now, "reservations");
	for (size_t i = 0; a && i < json_object_array_length(a); i++) {
		json_object *n = json_object_array_get_idx(a, i), *w = match(get(was, "reservations"),
									 "id", n);
		json_object *r = json_object_new_object();

		put_u64(r, "id", (uint64_t)gi(n, "id"));
		json_object_object_add(r, "iops", json_object_new_double(
			(double)grew(n, w, "requests") / s));
		json_object_object_add(r, "read_bps", json_object_new_double(
			(double)grew(n, w, "read_bytes") / s));
		json_object_object_add(r, "written_bps", json_object_new_double(
			(double)grew(n, w, "written_bytes") / s));
		put_u64(r, "misses", grew(n, w, "misses"));
		json_object_array_add(resvs, r);
	}
	json_object_object_add(o, "disks", disks);
	json_object_object_add(o, "reservations", resvs);
	json_object_object_add(o, "exports", exports_interval(was, now, dt));
	return o;
}

static char *fbps(json_object *o, const char *k, char *buf)
{
	return cw_units_format_rate((uint64_t)(json_object_get_double(get(o, k)) + 0.5), buf);
}

static void print_interval(json_object *iv)
{
	struct table t = { .ncols = 8 }, u = { .ncols = 5 };
	json_object *d = get(iv, "disks"), *r = get(iv, "reservations");
	char len[CW_UNITS_BUF];

	printf("%s  (%s)\n", gs(iv, "time"), fdur(iv, "interval_ns", len));
	table_row(&t, "DISK", "IOPS", "READ", "WRITTEN", "RT-MISSES", "BE-P50", "BE-P99",
		  "SLACK-USED");
	for (size_t i = 0; d && i < json_object_array_length(d); i++) {
		json_object *o = json_object_array_get_idx(d, i);
		char iops[24], rd[CW_UNITS_BUF], wr[CW_UNITS_BUF], a[CW_UNITS_BUF];
		char b[CW_UNITS_BUF], slack[16];
		bool be = gi(o, "be_requests") > 0;

		snprintf(iops, sizeof(iops), "%.0f", json_object_get_double(get(o, "iops")));
		snprintf(slack, sizeof(slack), "%.1f%%",
			 100 * json_object_get_double(get(o, "slack_used")));
		table_row(&t, gs(o, "disk"), iops, fbps(o, "read_bps", rd),
			  fbps(o, "written_bps", wr), gs(o, "rt_misses"),
			  be ? fdur(o, "be_p50_ns", a) : "-", be ? fdur(o, "be_p99_ns", b) : "-",
			  slack);
	}
	table_print(&t, stdout);
	if (r && json_object_array_length(r)) {
		printf("\n");
		table_row(&u, "RESV", "IOPS", "READ", "WRITTEN", "MISSES");
		for (size_t i = 0; i < json_object_array_length(r); i++) {
			json_object *o = json_object_array_get_idx(r, i);
			char iops[24], rd[CW_UNITS_BUF], wr[CW_UNITS_BUF];

			snprintf(iops, sizeof(iops), "%.0f",
				 json_object_get_double(get(o, "iops")));
			/* Id 0: a static reservation (clockwised -r). */
			table_row(&u, strcmp(gs(o, "id"), "0") ? gs(o, "id") : "static", iops,
				  fbps(o, "read_bps", rd), fbps(o, "written_bps", wr),
				  gs(o, "misses"));
		}
		table_print(&u, stdout);
	}
	print_be_exports(get(iv, "exports"), "bps");
}

/* Every interval's counters until count intervals (or a signal): text
 * blocks, or one JSON object per line with --json. */
static int stats_watch(int64_t every, long count)
{
	struct cw_ctl_reply was, now;
	int r = fetch(CW_CTL_CMD_STATS, NULL, &was);

	if (r)
		return r;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	for (long i = 0; (count < 0 || i < count) && !interrupted; i++) {
		struct timespec ts = { every / CW_NS_PER_S, every % CW_NS_PER_S };
		char when[40];
		time_t t;
		json_object *iv;

		nanosleep(&ts, NULL);	/* a pacing interval, not a wait for a state */
		if (interrupted)
			break;
		r = fetch(CW_CTL_CMD_STATS, NULL, &now);
		if (r)
			break;
		t = time(NULL);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S%z", localtime(&t));
		iv = interval_json(was.result, now.result, when);
		if (json_out) {
			printf("%s\n", json_object_to_json_string_ext(iv, JSON_C_TO_STRING_PLAIN |
							    JSON_C_TO_STRING_NOSLASHESCAPE));
		} else {
			if (i > 0)
				printf("\n");
			print_interval(iv);
		}
		fflush(stdout);
		json_object_put(iv);
		cw_ctl_reply_done(&was);
		was = now;
	}
	cw_ctl_reply_done(&was);
	return r;
}

int c_stats(int argc, char **argv)
{
	static const struct option lo[] = {
		HELP_OPT, { "watch", required_argument, NULL, 'w' },
		{ "count", required_argument, NULL, 'c' }, { 0 }
	};
	int64_t every = 0;
	long count = -1;
	int o;

	while ((o = next_opt(argc, argv, "hw:c:", lo)) != -1) {
		char *end;

		if (o == 'w') {
			if (cw_units_parse_duration(optarg, CW_UNITS_S, &every) < 0 || every <= 0)
				return usage_error("--watch \"%s\": expected " CW_UNITS_DURATION_HELP
						   ", more than 0", optarg);
		} else if (o == 'c') {
			count = strtol(optarg, &end, 10);
			if (!*optarg || *end || count <= 0)
				return usage_error("--count \"%s\": expected a positive number", optarg);
		} else {
			return EXIT_USAGE;
		}
	}
	if (argc != optind)
		return usage_error("stats takes no arguments");
	if (!every)
		return call(CW_CTL_CMD_STATS, NULL, print_stats);
	return stats_watch(every, count);
}
