/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cwctl — drives clockwised through its control socket (cwctl(8)).
 *
 * Every command is one request of the control protocol
 * (clockwise/ctl-proto.h); cwctl turns the suffixed quantities people
 * type into the integers the protocol carries (clockwise/units.h) and the
 * replies into tables, or prints them unchanged with --json.
 *
 * Exit status: 0 success, 1 the server refused or failed the request,
 * 2 bad usage, 3 the server could not be reached or spoke nonsense.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <clockwise/hist.h>
#include <clockwise/io.h>
#include <clockwise/types.h>
#include <clockwise/pool-objects.h>
#include <clockwise/sched-beq.h>
#include <clockwise/units.h>

#include "ctl-client.h"
#include "plan-table.h"
#include "table.h"

#define EXIT_REFUSED 1
#define EXIT_USAGE 2
#define EXIT_CONNECT 3

static const char *socket_path = "/run/clockwise/control";
static bool json_out;
static const char *cmd_name = "cwctl";	/* "cwctl part create" in messages */

/* An error of cwctl's own (not the server's): a line for people, or with
 * --json the object the server's errors are, {"code", "message"}. */
static void own_error(const char *code, const char *hint, const char *fmt, va_list ap)
{
	char msg[1024];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (json_out) {
		json_object *o = json_object_new_object();

		json_object_object_add(o, "code", json_object_new_string(code));
		json_object_object_add(o, "message", json_object_new_string(msg));
		fprintf(stderr, "%s\n", json_object_to_json_string_ext(
				o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(o);
		return;
	}
	fprintf(stderr, "%s: %s\n%s", cmd_name, msg, hint ? hint : "");
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	char hint[160];
	va_list ap;

	snprintf(hint, sizeof(hint), "Try '%s --help'.\n", cmd_name);
	va_start(ap, fmt);
	own_error("bad-usage", hint, fmt, ap);
	va_end(ap);
	return EXIT_USAGE;
}

static int connect_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int connect_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	own_error("no-server", NULL, fmt, ap);
	va_end(ap);
	return EXIT_CONNECT;
}

/* The pid of a process named clockwised, 0 if none is seen. */
static long daemon_pid(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	long pid = 0;

	while (d && !pid && (e = readdir(d))) {
		char path[300], comm[64] = "";
		FILE *f;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/comm", e->d_name);
		f = fopen(path, "re");
		if (f && fgets(comm, sizeof(comm), f) && strcmp(comm, "clockwised\n") == 0)
			pid = strtol(e->d_name, NULL, 10);
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return pid;
}

/* Why connecting to the socket failed, and what to do about it. */
static int no_server(int r)
{
	long pid = r == -ENOENT || r == -ECONNREFUSED ? daemon_pid() : 0;

	if (r == -EACCES || r == -EPERM)
		return connect_error("cannot connect to %s: permission denied (the control socket "
				     "is for root and the clockwise groups)", socket_path);
	if ((r == -ENOENT || r == -ECONNREFUSED) && pid)
		return connect_error("cannot connect to %s: %s; clockwised is running (pid %ld) "
				     "but not on this socket: give its control_socket with "
				     "--socket or $CLOCKWISE_CONTROL", socket_path,
				     r == -ENOENT ? "no such socket" : "nothing listens there", pid);
	if (r == -ENOENT || r == -ECONNREFUSED)
		return connect_error("cannot connect to %s: %s; clockwised is not running "
				     "(start it, e.g. systemctl start clockwised)", socket_path,
				     r == -ENOENT ? "no such socket" :
				     "nothing listens there (a socket left by a daemon that ended)");
	return connect_error("cannot connect to %s: %s", socket_path, strerror(-r));
}

/* ---- printing ---------------------------------------------------------- */

static json_object *get(json_object *o, const char *k)
{
	json_object *v;

	return o && json_object_object_get_ex(o, k, &v) ? v : NULL;
}

static const char *gs(json_object *o, const char *k)
{
	json_object *v = get(o, k);

	return v ? json_object_get_string(v) : "-";
}

static int64_t gi(json_object *o, const char *k)
{
	return json_object_get_int64(get(o, k));
}

static char *fsize(json_object *o, const char *k, char *buf)
{
	return get(o, k) ? cw_units_format_size((uint64_t)gi(o, k), buf) : strcpy(buf, "-");
}

static char *frate(json_object *o, const char *k, char *buf)
{
	return get(o, k) ? cw_units_format_rate((uint64_t)gi(o, k), buf) : strcpy(buf, "-");
}

static char *fdur(json_object *o, const char *k, char *buf)
{
	return get(o, k) ? cw_units_format_duration(gi(o, k), buf) : strcpy(buf, "-");
}

static void print_disks(json_object *a)
{
	struct table t = { .ncols = 10 };

	table_row(&t, "NAME", "ID", "TIER", "STATE", "SIZE", "FREE", "MODEL", "TASKS", "UTIL",
		  "DELTA-L");
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *d = json_object_array_get_idx(a, i), *m = get(d, "model");
		char size[CW_UNITS_BUF], fr[CW_UNITS_BUF], dl[CW_UNITS_BUF], util[16], model[TABLE_CELL];
		bool cal = json_object_get_boolean(get(m, "calibrated"));
		char tail[32] = "";

		snprintf(util, sizeof(util), "%.0f%%",
			 100 * json_object_get_double(get(d, "utilization")));
		/* an image's C is a tail percentile: which one */
		if (get(m, "tail_percentile"))
			snprintf(tail, sizeof(tail), "%sp%g", cal ? ", " : "",
				 json_object_get_double(get(m, "tail_percentile")));
		snprintf(model, sizeof(model), "%s%s%s%s%s%s%s", gs(m, "name"),
			 cal || tail[0] ? " (" : "", cal ? "calibrated" : "", tail,
			 cal || tail[0] ? ")" : "", get(d, "emulate") ? ", emulating " : "",
			 get(d, "emulate") ? gs(get(d, "emulate"), "name") : "");
		table_row(&t, gs(d, "name"), gs(d, "id"), gs(d, "tier"), gs(d, "state"),
			  fsize(d, "size", size), fsize(d, "free", fr), model, gs(d, "tasks"),
			  util, get(d, "delta_l_ns") ? fdur(d, "delta_l_ns", dl) : "none");
	}
	table_print(&t, stdout);
}

/* "yes"; or for a partition with blocks on missing disks its state and
 * the disks: "partial: b missing", "offline: b, c missing". */
static const char *part_available(json_object *p, char *buf, size_t n)
{
	json_object *md = get(p, "missing_disks");
	size_t at;

	if (json_object_get_boolean(get(p, "available")))
		return "yes";
	at = (size_t)snprintf(buf, n, "%s:", get(p, "state") ? gs(p, "state") : "no");
	for (size_t i = 0; md && i < json_object_array_length(md) && at < n; i++)
		at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? ", " : " ",
				       json_object_get_string(json_object_array_get_idx(md, i)));
	if (at < n)
		snprintf(buf + at, n - at, " missing");
	return buf;
}

static void print_parts(json_object *a)
{
	struct table t = { .ncols = 6 };

	table_row(&t, "NAME", "SIZE", "POLICY", "TIER", "ZONE", "AVAILABLE");
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *p = json_object_array_get_idx(a, i);
		char size[CW_UNITS_BUF], av[256];

		table_row(&t, gs(p, "name"), fsize(p, "size", size), gs(p, "policy"),
			  gs(p, "tier"), gs(p, "zone"), part_available(p, av, sizeof(av)));
	}
	table_print(&t, stdout);
}

static void print_resvs(json_object *a)
{
	struct table t = { .ncols = 8 };

	table_row(&t, "ID", "PART", "RATE", "BLOCK", "RANGE", "PERIOD", "DISKS", "ENDS-IN");
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *r = json_object_array_get_idx(a, i);
		char rate[CW_UNITS_BUF], blk[CW_UNITS_BUF], per[CW_UNITS_BUF], end[CW_UNITS_BUF];
		char a1[CW_UNITS_BUF], a2[CW_UNITS_BUF], range[TABLE_CELL];

		snprintf(range, sizeof(range), "%s:%s", fsize(r, "range_start", a1),
			 fsize(r, "range_end", a2));
		/* A static one (clockwised -r) has no id to release it by. */
		table_row(&t, json_object_get_boolean(get(r, "static")) ? "static" : gs(r, "id"),
			  gs(r, "part"), frate(r, "rate", rate),
			  fsize(r, "block", blk), range, fdur(r, "period_ns", per), gs(r, "disks"),
			  get(r, "ends_in_ns") ? fdur(r, "ends_in_ns", end) : "never");
	}
	table_print(&t, stdout);
}

/* An export's clients in a few words: "uid 1000 pid 42 (real-time),
 * 10.0.0.2:5555",
 * "-" for none, "unavailable" when it is not served. */
static const char *clients_text(json_object *e, char *buf, size_t n)
{
	json_object *cl = get(e, "clients");
	size_t at = 0, listed = cl ? json_object_array_length(cl) : 0;

	if (get(e, "served") && !json_object_get_boolean(get(e, "served")))
		return "unavailable";
	if (!listed)
		return "-";
	buf[0] = '\0';
	for (size_t i = 0; i < listed && at < n; i++) {
		json_object *k = json_object_array_get_idx(cl, i);
		int w = get(k, "uid") ? snprintf(buf + at, n - at, "%suid %s pid %s", i ? ", " : "",
						  gs(k, "uid"), gs(k, "pid"))
				      : snprintf(buf + at, n - at, "%s%s", i ? ", " : "",
						 gs(k, "address"));

		at += w > 0 ? (size_t)w : 0;
		if (json_object_get_boolean(get(k, "realtime")) && at < n) {
			w = snprintf(buf + at, n - at, " (real-time)");
			at += w > 0 ? (size_t)w : 0;
		}
	}
	if (gi(e, "connections") > (int64_t)listed && at < n)
		snprintf(buf + at, n - at, " and %" PRId64 " more", gi(e, "connections") - (int64_t)listed);
	return buf;
}

static void print_exports(json_object *a)
{
	struct table t = { .ncols = 5 };

	table_row(&t, "NAME", "PART", "READONLY", "RESV", "CLIENTS");
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *e = json_object_array_get_idx(a, i);
		char who[512];

		table_row(&t, gs(e, "name"), gs(e, "part"),
			  json_object_get_boolean(get(e, "readonly")) ? "yes" : "no",
			  get(e, "resv") ? gs(e, "resv") : "-", clients_text(e, who, sizeof(who)));
	}
	table_print(&t, stdout);
}

static void print_resv(json_object *r)
{
	json_object *pd = get(r, "per_disk");
	struct table t = { .ncols = 6 };
	char rate[CW_UNITS_BUF], blk[CW_UNITS_BUF], per[CW_UNITS_BUF], lead[CW_UNITS_BUF];

	printf("reservation %s on %s: %s in %s blocks, one every %s\n", gs(r, "id"),
	       gs(r, "part"), frate(r, "rate", rate), fsize(r, "block", blk),
	       fdur(r, "period_ns", per));
	/* The client's side of the guarantee: ask for each block this long
	 * before it is needed. */
	printf("each block is due %s after it is asked for (due %s): a client asks that far "
	       "ahead of need\n", fdur(r, "lead_ns", lead), gs(r, "due"));
	if (get(r, "move"))
		printf("booked on both sides of move %s while it runs\n", gs(r, "move"));
	if (get(r, "cache_refused"))
		printf("its blocks stay off the partition's SSD cache: %s\n",
		       gs(r, "cache_refused"));
	else if (get(r, "cache"))
		printf("booked on the partition's SSD cache too: its blocks may be cached\n");
	if (get(r, "claimed_by"))
		printf("claimed by process %s: only its connections run at real-time priority\n",
		       gs(r, "claimed_by"));
	table_row(&t, "DISK", "PERIOD", "DEADLINE", "SERVICE", "REQUESTS", "STRIDE");
	for (size_t i = 0; pd && i < json_object_array_length(pd); i++) {
		json_object *p = json_object_array_get_idx(pd, i);
		char a[CW_UNITS_BUF], b[CW_UNITS_BUF], d[CW_UNITS_BUF], disk[CW_NAME_MAX + 16];

		snprintf(disk, sizeof(disk), "%s%s", gs(p, "disk"),
			 json_object_get_boolean(get(p, "cache")) ? " (cache)" : "");
		table_row(&t, disk, fdur(p, "period_ns", a), fdur(p, "deadline_ns", d),
			  fdur(p, "service_ns", b), gs(p, "requests"), gs(p, "stride"));
	}
	table_print(&t, stdout);
}

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

static void pct(char *buf, size_t len, json_object *o, const char *k)
{
	if (get(o, k))
		snprintf(buf, len, "%.1f%%", 100 * json_object_get_double(get(o, k)));
	else
		snprintf(buf, len, "-");
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

/* The reserved ranges a cache leaves alone, and why (rule 2). */
static void print_pinned(json_object *c)
{
	json_object *a = get(c, "pinned");

	for (size_t i = 0; a && i < json_object_array_length(a); i++) {
		json_object *p = json_object_array_get_idx(a, i);

		if (get(p, "resv"))
			printf("  reservation %s", gs(p, "resv"));
		else
			printf("  the start-up stream of export %s", gs(p, "export"));
		printf(" (bytes %s..%s of %s) stays off the SSD: %s\n", gs(p, "range_start"),
		       gs(p, "range_end"), gs(c, "part"), gs(p, "why"));
	}
}

/* SSD caches: how often reads found their block there, and what moved. */
static void print_caches(json_object *a)
{
	struct table t = { .ncols = 11 };
	bool refused = false;

	if (!a || !json_object_array_length(a))
		return;
	printf("\n");
	table_row(&t, "CACHE", "MODE", "SIZE", "USED", "HIT-RATIO", "HITS", "MISSES", "PROMOTED",
		  "DEMOTED", "DIRTY", "REFUSED");
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *o = json_object_array_get_idx(a, i);
		char size[CW_UNITS_BUF], used[CW_UNITS_BUF], ratio[16];

		pct(ratio, sizeof(ratio), o, "hit_ratio");
		table_row(&t, gs(o, "part"), gs(o, "mode"), fsize(o, "size", size),
			  fsize(o, "used_bytes", used), ratio, gs(o, "hits"), gs(o, "misses"),
			  gs(o, "promotions"), gs(o, "demotions"), gs(o, "dirty"),
			  gs(o, "refused_reserved"));
		refused |= gi(o, "refused_reserved") > 0;
	}
	table_print(&t, stdout);
	if (refused)
		printf("REFUSED: promotions of blocks of a reservation the SSD does not admit\n");
	for (size_t i = 0; i < json_object_array_length(a); i++)
		print_pinned(json_object_array_get_idx(a, i));
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

/* ---- talking to the server --------------------------------------------- */

static bool bar_shown;

static void progress(const struct cw_ctl_reply *p, void *userdata)
{
	int width = 30, filled;

	if (json_out || !isatty(STDERR_FILENO) || p->total == 0)
		return;
	filled = (int)(p->done * (uint64_t)width / p->total);
	fprintf(stderr, "\r%-6s [%.*s%*s] %3d%%", p->phase, filled,
		"##############################", width - filled, "",
		(int)(p->done * 100 / p->total));
	fflush(stderr);
	bar_shown = true;
}

typedef void (*print_fn)(json_object *result);

/* Sends one request; prints the result with print (or as JSON) and
 * returns the exit status. */
/* Sends one request: 0 with *rep a result (cw_ctl_reply_done it), or
 * the exit status after saying why. */
static int fetch(enum cw_ctl_cmd cmd, json_object *args, struct cw_ctl_reply *rep)
{
	struct cwctl_client c;
	int r = cwctl_client_open(&c, socket_path);

	if (r < 0) {
		json_object_put(args);
		return no_server(r);
	}
	r = cwctl_client_call(&c, cmd, args, progress, NULL, rep);
	json_object_put(args);
	cwctl_client_close(&c);
	if (bar_shown) {
		fprintf(stderr, "\n");
		bar_shown = false;
	}
	if (r < 0)
		return connect_error("%s: %s", socket_path,
				     r == -EPROTO ? "the server's reply is not the control protocol"
				     : r == -ECONNRESET ? "the server closed the connection"
				     : strerror(-r));
	if (rep->kind == CW_CTL_REPLY_ERROR) {
		if (json_out)
			fprintf(stderr, "%s\n", json_object_to_json_string_ext(
					get(rep->root, "error"), JSON_C_TO_STRING_PLAIN |
					JSON_C_TO_STRING_NOSLASHESCAPE));
		else
			fprintf(stderr, "%s: %s (%s)\n", cmd_name, rep->message, rep->code_name);
		cw_ctl_reply_done(rep);
		return EXIT_REFUSED;
	}
	return 0;
}

/* Prints a result with print, or as JSON; frees it. */
static void print_result(struct cw_ctl_reply *rep, print_fn print)
{
	if (json_out)
		printf("%s\n", json_object_to_json_string_ext(rep->result, JSON_C_TO_STRING_PRETTY |
								       JSON_C_TO_STRING_SPACED |
								       JSON_C_TO_STRING_NOSLASHESCAPE));
	else if (print)
		print(rep->result);
	fflush(stdout);
	cw_ctl_reply_done(rep);
}

static int call(enum cw_ctl_cmd cmd, json_object *args, print_fn print)
{
	struct cw_ctl_reply rep;
	int r = fetch(cmd, args, &rep);

	if (r)
		return r;
	print_result(&rep, print);
	return 0;
}

/* ---- argument helpers -------------------------------------------------- */

static json_object *args_new(void)
{
	json_object *a = json_object_new_object();

	if (!a) {
		fprintf(stderr, "%s: out of memory\n", cmd_name);
		exit(EXIT_REFUSED);
	}
	return a;
}

static void put_str(json_object *a, const char *k, const char *v)
{
	json_object_object_add(a, k, json_object_new_string(v));
}

static void put_u64(json_object *a, const char *k, uint64_t v)
{
	json_object_object_add(a, k, json_object_new_int64((int64_t)v));
}

static bool size_arg(const char *what, const char *s, uint64_t *ret)
{
	int r = cw_units_parse_size(s, ret);

	if (r < 0)
		usage_error("%s \"%s\": %s; expected " CW_UNITS_SIZE_HELP, what, s,
			    r == -ERANGE ? "too large" : "not a size");
	return r == 0;
}

static bool id_arg(const char *s, uint64_t *ret)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (!*s || *end || errno || v == 0 || v > INT64_MAX) {
		usage_error("\"%s\" is not an id (a positive number)", s);
		return false;
	}
	*ret = v;
	return true;
}

/* Each command: its words, its synopsis and description, its function. */
struct command {
	const char *group;	/* NULL: top level */
	const char *name;
	const char *synopsis;
	const char *help;
	int (*fn)(int argc, char **argv);	/* NULL: c_simple() */
	/* For c_simple: the request, its one positional argument ("name",
	 * "id" or NULL for none) and how to print the result. */
	enum cw_ctl_cmd cmd;
	const char *arg;
	print_fn print;
};

static const struct command *current;

static void command_help(const struct command *c)
{
	printf("Usage: cwctl [--socket PATH] [--json] %s%s%s %s\n\n%s", c->group ? c->group : "",
	       c->group ? " " : "", c->name, c->synopsis, c->help);
}

/* getopt_long over a command's own options; -h/--help prints its help.
 * Returns the option, -1 at the end, or '?' after printing an error. */
static int next_opt(int argc, char **argv, const char *shortopts, const struct option *longopts)
{
	int o;

	opterr = 0;	/* said here, in the form of every other error */
	o = getopt_long(argc, argv, shortopts, longopts, NULL);
	if (o == 'h') {
		command_help(current);
		exit(0);
	}
	if (o == '?') {
		const char *p = optopt ? strchr(shortopts, optopt) : NULL;
		char one[3] = { '-', (char)optopt, '\0' };
		const char *arg = one;

		/* A long option by its name; a short one alone (it may come
		 * with others, "-qz"). */
		if (optind > 0 && optind <= argc && argv[optind - 1][0] == '-' &&
		    argv[optind - 1][1] == '-')
			arg = argv[optind - 1];
		if (p && p[1] == ':')
			usage_error("option %s needs a value", arg);
		else
			usage_error("unknown option %s", arg);
	}
	return o;
}

#define HELP_OPT { "help", no_argument, NULL, 'h' }

/* Commands without options but with n positional words. */
static int positional(int argc, char **argv, int n, char ***ret)
{
	static const struct option lo[] = { HELP_OPT, { 0 } };
	int o;

	while ((o = next_opt(argc, argv, "h", lo)) != -1)
		return EXIT_USAGE;
	if (argc - optind != n)
		return usage_error("expected %d argument%s, got %d", n, n == 1 ? "" : "s",
				   argc - optind);
	*ret = argv + optind;
	return 0;
}

/* ---- the commands ------------------------------------------------------ */

/* A command with no options and at most one argument: a name, or a
 * reservation id. */
static int c_simple(int argc, char **argv)
{
	json_object *a = NULL;
	uint64_t id;
	char **pos = NULL;

	if (positional(argc, argv, current->arg ? 1 : 0, &pos))
		return EXIT_USAGE;
	if (current->arg && strcmp(current->arg, "id") == 0) {
		if (!id_arg(pos[0], &id))
			return EXIT_USAGE;
		a = args_new();
		put_u64(a, "id", id);
	} else if (current->arg) {
		a = args_new();
		put_str(a, current->arg, pos[0]);
	}
	return call(current->cmd, a, current->print);
}


static char *frate_floor(json_object *o, const char *k, char *buf)
{
	json_object *v = get(o, k);

	if (!v || json_object_is_type(v, json_type_null))
		return strcpy(buf, "-");
	return cw_units_format_rate(cw_units_floor_rate((uint64_t)json_object_get_int64(v)), buf);
}

static void print_status(json_object *s)
{
	json_object *p = get(s, "pool");
	char size[CW_UNITS_BUF], fr[CW_UNITS_BUF], bs[CW_UNITS_BUF];

	printf("pool %s: block size %s, %s, %s free", gs(p, "uuid"), fsize(p, "block_size", bs),
	       fsize(p, "size", size), fsize(p, "free", fr));
	if (gi(p, "missing_disks"))
		printf(", DEGRADED: %s disk(s) missing", gs(p, "missing_disks"));
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


static void print_disk_added(json_object *d)
{
	char size[CW_UNITS_BUF];

	printf("added disk %s (id %s, %s, %s%s%s)\n", gs(d, "name"), gs(d, "id"), gs(d, "tier"),
	       fsize(d, "size", size), get(d, "emulate") ? ", emulating " : "",
	       get(d, "emulate") ? gs(get(d, "emulate"), "name") : "");
}

static int c_disk_add(int argc, char **argv)
{
	static const struct option lo[] = {
		HELP_OPT, { "tier", required_argument, NULL, 't' },
		{ "name", required_argument, NULL, 'n' },
		{ "emulate", required_argument, NULL, 'e' }, { 0 }
	};
	json_object *a = args_new();
	char path[PATH_MAX];
	int o;

	while ((o = next_opt(argc, argv, "ht:n:e:", lo)) != -1) {
		if (o == 't')
			put_str(a, "tier", optarg);
		else if (o == 'n')
			put_str(a, "name", optarg);
		else if (o == 'e')
			put_str(a, "emulate", optarg);
		else
			return json_object_put(a), EXIT_USAGE;
	}
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one PATH");
	/* The server resolves nothing relative to the caller's directory;
	 * an image on a cluster is named, not a file. */
	if (cw_io_path_is_rbd(argv[optind]))
		snprintf(path, sizeof(path), "%s", argv[optind]);
	else if (!realpath(argv[optind], path)) {
		fprintf(stderr, "%s: %s: %s\n", cmd_name, argv[optind], strerror(errno));
		json_object_put(a);
		return EXIT_REFUSED;
	}
	put_str(a, "path", path);
	return call(CW_CTL_CMD_DISK_ADD, a, print_disk_added);
}


static void print_removed(json_object *r)
{
	printf("removed %s\n", gs(r, "name"));
}


static void print_calibrated(json_object *r)
{
	char w[CW_UNITS_BUF];

	json_object *warn;

	printf("calibrated %s: worst case %s per pool block", gs(r, "disk"),
	       fdur(r, "block_service_ns", w));
	if (get(r, "tail_percentile"))
		printf(" (the %gth percentile of its service times, plus the margin)",
		       json_object_get_double(get(r, "tail_percentile")));
	printf("\nmodel: %s\n", gs(r, "model"));
	if (json_object_object_get_ex(r, "warning", &warn))
		fprintf(stderr, "cwctl: warning: %s: %s\n", gs(r, "disk"), json_object_get_string(warn));
}

static int c_disk_calibrate(int argc, char **argv)
{
	static const struct option lo[] = {
		HELP_OPT, { "quick", no_argument, NULL, 'q' },
		{ "percentile", required_argument, NULL, 'p' }, { 0 }
	};
	json_object *a = args_new();
	unsigned permille;
	int o;

	while ((o = next_opt(argc, argv, "hqp:", lo)) != -1) {
		if (o == 'q') {
			json_object_object_add(a, "quick", json_object_new_boolean(1));
		} else if (o == 'p') {
			if (cw_calib_parse_percentile(optarg, &permille) < 0)
				return json_object_put(a), usage_error("--percentile %s: expected a "
					"number from 50 to 100 in steps of 0.1, such as 99.9", optarg);
			put_str(a, "percentile", optarg);
		} else {
			return json_object_put(a), EXIT_USAGE;
		}
	}
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one disk NAME");
	put_str(a, "name", argv[optind]);
	return call(CW_CTL_CMD_DISK_CALIBRATE, a, print_calibrated);
}

/* The reply of disk.plan, an array of cw_disk_plan_format_json objects,
 * as the table cwsim plan prints too. */
static void print_plans(json_object *a)
{
	struct plan_row *rows;
	size_t n;

	if (!json_object_is_type(a, json_type_array)) {
		fprintf(stderr, "%s: %s: the server's reply is not a list of plans\n", cmd_name,
			socket_path);
		exit(EXIT_CONNECT);
	}
	n = json_object_array_length(a);
	rows = calloc(n ? n : 1, sizeof(*rows));
	if (!rows) {
		fprintf(stderr, "%s: out of memory\n", cmd_name);
		exit(EXIT_REFUSED);
	}
	for (size_t i = 0; i < n; i++) {
		if (plan_row_from_json(json_object_array_get_idx(a, i), &rows[i]) < 0) {
			fprintf(stderr, "%s: %s: the server's plan of a disk lacks a field"
				" (try --json)\n", cmd_name, socket_path);
			free(rows);
			exit(EXIT_CONNECT);
		}
	}
	plan_table_print(stdout, rows, n);
	free(rows);
}

static int c_disk_plan(int argc, char **argv)
{
	static const struct option lo[] = { HELP_OPT, { "json", no_argument, NULL, 'j' }, { 0 } };
	json_object *a = NULL;
	int o;

	while ((o = next_opt(argc, argv, "hj", lo)) != -1) {
		if (o != 'j')
			return EXIT_USAGE;
		json_out = true;
	}
	if (argc - optind > 1)
		return usage_error("expected at most one disk NAME");
	if (argc - optind == 1) {
		a = args_new();
		put_str(a, "name", argv[optind]);
	}
	return call(CW_CTL_CMD_DISK_PLAN, a, print_plans);
}

/* A rate the server says fits, rounded down so that it still fits when
 * typed back; "-" when there is none to say. */
static void print_headroom(json_object *h)
{
	struct table t = { .ncols = 8 }, u = { .ncols = 5 };
	json_object *d = get(h, "disks"), *p = get(h, "partitions");
	char bs[CW_UNITS_BUF];

	printf("largest stream rates that would be admitted now, in %s blocks\n\n",
	       fsize(h, "block", bs));
	table_row(&t, "DISK", "TIER", "STATE", "STREAMS", "UTIL", "DELTA-L", "BE-BUDGET",
		  "MAX-RATE");
	for (size_t i = 0; d && i < json_object_array_length(d); i++) {
		json_object *o = json_object_array_get_idx(d, i);
		char util[16], dl[CW_UNITS_BUF], be[CW_UNITS_BUF], r[CW_UNITS_BUF];

		snprintf(util, sizeof(util), "%.0f%%",
			 100 * json_object_get_double(get(o, "utilization")));
		table_row(&t, gs(o, "disk"), gs(o, "tier"), gs(o, "state"), gs(o, "streams"), util,
			  get(o, "delta_l_ns") ? fdur(o, "delta_l_ns", dl) : "none",
			  get(o, "be_budget_ns") ? fdur(o, "be_budget_ns", be) : "none",
			  frate_floor(o, "max_rate", r));
	}
	table_print(&t, stdout);
	if (!p || !json_object_array_length(p))
		return;
	printf("\n");
	table_row(&u, "PART", "SIZE", "DISKS", "MAX-RATE", "LIMITED-BY");
	for (size_t i = 0; i < json_object_array_length(p); i++) {
		json_object *o = json_object_array_get_idx(p, i), *n = get(o, "disks");
		char size[CW_UNITS_BUF], r[CW_UNITS_BUF], disks[TABLE_CELL] = "";

		for (size_t k = 0; n && k < json_object_array_length(n); k++) {
			size_t len = strlen(disks);

			snprintf(disks + len, sizeof(disks) - len, "%s%s", k ? "," : "",
				 json_object_get_string(json_object_array_get_idx(n, k)));
		}
		table_row(&u, gs(o, "part"), fsize(o, "size", size), disks[0] ? disks : "-",
			  frate_floor(o, "max_rate", r), get(o, "limited_by") ?
			  gs(o, "limited_by") : get(o, "limited_by_host") ? "the host's CPUs" :
			  get(o, "error") ? gs(o, "error") : "-");
	}
	table_print(&u, stdout);
}

static int c_disk_headroom(int argc, char **argv)
{
	static const struct option lo[] = { HELP_OPT, { "block", required_argument, NULL, 'b' },
					    { 0 } };
	json_object *a = args_new();
	uint64_t v;
	int o;

	while ((o = next_opt(argc, argv, "hb:", lo)) != -1) {
		if (o != 'b' || !size_arg("--block", optarg, &v))
			return json_object_put(a), EXIT_USAGE;
		put_u64(a, "block", v);
	}
	if (argc - optind > 1)
		return json_object_put(a), usage_error("expected at most one disk NAME");
	if (argc - optind == 1)
		put_str(a, "name", argv[optind]);
	return call(CW_CTL_CMD_DISK_HEADROOM, a, print_headroom);
}

static void print_part_done(json_object *p)
{
	char size[CW_UNITS_BUF];

	printf("partition %s: %s, policy %s, tier %s, zone %s\n", gs(p, "name"),
	       fsize(p, "size", size), gs(p, "policy"), gs(p, "tier"), gs(p, "zone"));
}

static int c_part_create(int argc, char **argv)
{
	static const struct option lo[] = {
		HELP_OPT, { "size", required_argument, NULL, 's' },
		{ "policy", required_argument, NULL, 'p' }, { "tier", required_argument, NULL, 't' },
		{ "zone", required_argument, NULL, 'z' }, { "disk", required_argument, NULL, 'd' },
		{ "tier-fallback", no_argument, NULL, 'F' }, { 0 }
	};
	json_object *a = args_new();
	uint64_t size;
	bool have_size = false;
	int o;

	while ((o = next_opt(argc, argv, "hs:p:t:z:d:F", lo)) != -1) {
		switch (o) {
		case 's':
			if (!size_arg("--size", optarg, &size))
				return json_object_put(a), EXIT_USAGE;
			put_u64(a, "size", size);
			have_size = true;
			break;
		case 'p': put_str(a, "policy", optarg); break;
		case 't': put_str(a, "tier", optarg); break;
		case 'z': put_str(a, "zone", optarg); break;
		case 'd': put_str(a, "disk", optarg); break;
		case 'F': json_object_object_add(a, "tier_fallback", json_object_new_boolean(1)); break;
		default: return json_object_put(a), EXIT_USAGE;
		}
	}
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one partition NAME");
	if (!have_size)
		return json_object_put(a), usage_error("--size is required");
	put_str(a, "name", argv[optind]);
	return call(CW_CTL_CMD_PART_CREATE, a, print_part_done);
}


static bool show_all_runs;	/* part show --all */

static void print_part_show(json_object *p)
{
	struct table t = { .ncols = 3 }, u = { .ncols = 4 };
	json_object *pd = get(p, "per_disk"), *runs = get(p, "runs");
	size_t shown = show_all_runs ? SIZE_MAX : 16;
	char bs[CW_UNITS_BUF];

	print_part_done(p);
	printf("%s blocks of %s", gs(p, "blocks"), fsize(p, "block_size", bs));
	if (!json_object_get_boolean(get(p, "available"))) {
		char av[256];

		/* partial: its other blocks are served; offline: none */
		printf(", %s blocks on missing disks: %s (%s)", gs(p, "missing_blocks"),
		       part_available(p, av, sizeof(av)),
		       !strcmp(gs(p, "state"), "partial") ? "they fail with EIO, the rest is served"
							   : "not served");
	}
	printf("\n\n");
	table_row(&t, "DISK", "BLOCKS", "BYTES");
	for (size_t i = 0; pd && i < json_object_array_length(pd); i++) {
		json_object *d = json_object_array_get_idx(pd, i);
		char b[CW_UNITS_BUF], name[CW_NAME_MAX + 16];

		snprintf(name, sizeof(name), "%s%s", gs(d, "disk"),
			 get(d, "missing") ? " (missing)" : "");
		table_row(&t, name, gs(d, "blocks"), fsize(d, "bytes", b));
	}
	table_print(&t, stdout);
	printf("\n");
	table_row(&u, "FIRST-BLOCK", "BLOCKS", "DISK", "DISK-OFFSET");
	/* A striped partition has a run per block: the first few tell the
	 * pattern; --all lists them all. */
	for (size_t i = 0; runs && i < json_object_array_length(runs) && i < shown; i++) {
		json_object *r = json_object_array_get_idx(runs, i);

		table_row(&u, gs(r, "first_block"), gs(r, "blocks"), gs(r, "disk"), gs(r, "offset"));
	}
	table_print(&u, stdout);
	if (runs && (size_t)gi(p, "runs_total") > json_object_array_length(runs))
		printf("(%" PRId64 " runs in all; --all lists them)\n", gi(p, "runs_total"));
	else if (runs && json_object_array_length(runs) > shown)
		printf("(%" PRId64 " runs in all; --all lists them)\n", gi(p, "runs_total"));
}

/* part show NAME [--all]: a reply holds a page of runs (a few hundred,
 * so that it stays one readable line); --all follows next_block until
 * it has them all. */
static int c_part_show(int argc, char **argv)
{
	static const struct option lo[] = { HELP_OPT, { "all", no_argument, NULL, 'a' }, { 0 } };
	struct cw_ctl_reply rep, more;
	json_object *a, *next;
	int o, r;

	while ((o = next_opt(argc, argv, "ha", lo)) != -1) {
		if (o != 'a')
			return EXIT_USAGE;
		show_all_runs = true;
	}
	if (argc - optind != 1)
		return usage_error("expected one partition NAME");
	a = args_new();
	put_str(a, "name", argv[optind]);
	r = fetch(CW_CTL_CMD_PART_SHOW, a, &rep);
	if (r)
		return r;
	while (show_all_runs && (next = get(rep.result, "next_block"))) {
		json_object *runs = get(rep.result, "runs"), *page;

		a = args_new();
		put_str(a, "name", argv[optind]);
		put_u64(a, "from_block", (uint64_t)json_object_get_int64(next));
		r = fetch(CW_CTL_CMD_PART_SHOW, a, &more);
		if (r) {
			cw_ctl_reply_done(&rep);
			return r;
		}
		page = get(more.result, "runs");
		for (size_t i = 0; page && i < json_object_array_length(page); i++)
			json_object_array_add(runs, json_object_get(json_object_array_get_idx(page, i)));
		json_object_object_del(rep.result, "next_block");
		if ((next = get(more.result, "next_block")))
			json_object_object_add(rep.result, "next_block", json_object_get(next));
		cw_ctl_reply_done(&more);
	}
	print_result(&rep, print_part_show);
	return 0;
}

static int c_part_resize(int argc, char **argv)
{
	static const struct option lo[] = { HELP_OPT, { "size", required_argument, NULL, 's' },
					    { "force", no_argument, NULL, 'f' }, { 0 } };
	json_object *a = args_new();
	uint64_t size;
	bool have_size = false;
	int o;

	while ((o = next_opt(argc, argv, "hs:f", lo)) != -1) {
		/* +SIZE grows by it, -SIZE shrinks by it, SIZE is the size. */
		const char *key = optarg && *optarg == '+' ? "grow" :
				  optarg && *optarg == '-' ? "shrink" : "size";

		if (o == 'f') {
			json_object_object_add(a, "force", json_object_new_boolean(1));
			continue;
		}
		if (o != 's' || !size_arg("--size", optarg + (strcmp(key, "size") != 0), &size))
			return json_object_put(a), EXIT_USAGE;
		if (have_size)
			return json_object_put(a), usage_error("--size given twice");
		put_u64(a, key, size);
		have_size = true;
	}
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one partition NAME");
	if (!have_size)
		return json_object_put(a), usage_error("--size is required");
	put_str(a, "name", argv[optind]);
	return call(CW_CTL_CMD_PART_RESIZE, a, print_part_done);
}

static void print_cache(json_object *c)
{
	char size[CW_UNITS_BUF];

	printf("partition %s: SSD cache %s, %s%s\n", gs(c, "part"), fsize(c, "size", size),
	       gs(c, "mode"), json_object_get_boolean(get(c, "pending")) ?
	       " (the daemon applies it: the old cache's blocks are demoted first)" : "");
	print_pinned(c);
}

static int c_part_cache(int argc, char **argv)
{
	static const struct option lo[] = { HELP_OPT, { "size", required_argument, NULL, 's' },
					    { "off", no_argument, NULL, 'o' },
					    { "mode", required_argument, NULL, 'm' }, { 0 } };
	json_object *a = args_new();
	uint64_t size;
	bool have_size = false, have_mode = false;
	int o;

	while ((o = next_opt(argc, argv, "hs:om:", lo)) != -1) {
		if (o == 'm') {
			if (strcmp(optarg, "write-through") != 0 && strcmp(optarg, "write-back") != 0)
				return json_object_put(a),
				       usage_error("--mode \"%s\": write-through or write-back",
						   optarg);
			put_str(a, "mode", optarg);
			have_mode = true;
			continue;
		}
		if (o == 's' && !size_arg("--size", optarg, &size))
			return json_object_put(a), EXIT_USAGE;
		if (o != 's' && o != 'o')
			return json_object_put(a), EXIT_USAGE;
		if (have_size)
			return json_object_put(a), usage_error("give --size or --off once");
		put_u64(a, "size", o == 'o' ? 0 : size);
		have_size = true;
	}
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one partition NAME");
	if (!have_size && !have_mode)
		return json_object_put(a), usage_error("--size, --off or --mode is required");
	put_str(a, "name", argv[optind]);
	return call(CW_CTL_CMD_PART_CACHE, a, print_cache);
}

/* NAME [--force], for part delete and export remove. */
static int name_force(int argc, char **argv, enum cw_ctl_cmd cmd, const char *what)
{
	static const struct option lo[] = { HELP_OPT, { "force", no_argument, NULL, 'f' }, { 0 } };
	json_object *a = args_new();
	int o;

	while ((o = next_opt(argc, argv, "hf", lo)) != -1) {
		if (o != 'f')
			return json_object_put(a), EXIT_USAGE;
		json_object_object_add(a, "force", json_object_new_boolean(1));
	}
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one %s NAME", what);
	put_str(a, "name", argv[optind]);
	return call(cmd, a, print_removed);
}

static int c_part_delete(int argc, char **argv)
{
	return name_force(argc, argv, CW_CTL_CMD_PART_DELETE, "partition");
}

static int c_export_remove(int argc, char **argv)
{
	return name_force(argc, argv, CW_CTL_CMD_EXPORT_REMOVE, "export");
}

static void print_resv_created(json_object *r)
{
	char rate[CW_UNITS_BUF], blk[CW_UNITS_BUF], max[CW_UNITS_BUF];

	if (json_object_get_boolean(get(r, "dry_run"))) {
		printf("would admit %s in %s blocks on %s (nothing booked); the largest rate "
		       "that fits now is %s\n", frate(r, "rate", rate), fsize(r, "block", blk),
		       gs(r, "part"), frate_floor(r, "max_rate", max));
		return;
	}
	printf("admitted ");
	print_resv(r);
}

static int c_resv_create(int argc, char **argv)
{
	static const struct option lo[] = {
		HELP_OPT, { "rate", required_argument, NULL, 'r' },
		{ "block", required_argument, NULL, 'b' }, { "range", required_argument, NULL, 'R' },
		{ "start", required_argument, NULL, 's' },
		{ "duration", required_argument, NULL, 'd' },
		{ "dry-run", no_argument, NULL, 'n' }, { "due", required_argument, NULL, 'D' },
		{ 0 }
	};
	json_object *a = args_new();
	uint64_t v;
	int64_t ns;
	bool rate = false, block = false;
	enum cw_admit_due due;
	int o;

	while ((o = next_opt(argc, argv, "hr:b:R:s:d:nD:", lo)) != -1) {
		switch (o) {
		case 'D':
			if (cw_admit_due_parse(optarg, &due) < 0) {
				json_object_put(a);
				return usage_error("--due \"%s\": expected disk or stream", optarg);
			}
			put_str(a, "due", optarg);
			break;
		case 'n':
			json_object_object_add(a, "dry_run", json_object_new_boolean(1));
			break;
		case 'r':
			if (cw_units_parse_rate(optarg, &v) < 0) {
				json_object_put(a);
				return usage_error("--rate \"%s\": expected " CW_UNITS_RATE_HELP, optarg);
			}
			put_u64(a, "rate", v);
			rate = true;
			break;
		case 'b':
			if (!size_arg("--block", optarg, &v))
				return json_object_put(a), EXIT_USAGE;
			put_u64(a, "block", v);
			block = true;
			break;
		case 'R': {
			char *colon = strchr(optarg, ':');

			if (!colon) {
				json_object_put(a);
				return usage_error("--range \"%s\": expected START:END", optarg);
			}
			*colon = '\0';
			if (*optarg && !size_arg("--range start", optarg, &v))
				return json_object_put(a), EXIT_USAGE;
			if (*optarg)
				put_u64(a, "range_start", v);
			if (colon[1] && !size_arg("--range end", colon + 1, &v))
				return json_object_put(a), EXIT_USAGE;
			if (colon[1])
				put_u64(a, "range_end", v);
			break;
		}
		case 's':
		case 'd':
			if (cw_units_parse_duration(optarg, CW_UNITS_S, &ns) < 0) {
				json_object_put(a);
				return usage_error("--%s \"%s\": expected " CW_UNITS_DURATION_HELP,
						   o == 's' ? "start" : "duration", optarg);
			}
			put_u64(a, o == 's' ? "start" : "duration", (uint64_t)ns);
			break;
		default:
			return json_object_put(a), EXIT_USAGE;
		}
	}
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one partition PART");
	if (!rate || !block)
		return json_object_put(a), usage_error("--rate and --block are required");
	put_str(a, "part", argv[optind]);
	return call(CW_CTL_CMD_RESV_CREATE, a, print_resv_created);
}


static void print_released(json_object *r)
{
	printf("released reservation %s\n", gs(r, "id"));
}

static void print_claimed(json_object *r)
{
	if (get(r, "claimed_by"))
		printf("reservation %s: only process %s may hold the real-time priority of export "
		       "%s\n", gs(r, "id"), gs(r, "claimed_by"), gs(r, "export"));
	else
		printf("reservation %s: no claim; the first client of export %s to ask holds its "
		       "real-time priority\n", gs(r, "id"), gs(r, "export"));
}

static int c_resv_claim(int argc, char **argv)
{
	static const struct option lo[] = {
		HELP_OPT, { "pid", required_argument, NULL, 'p' },
		{ "drop", no_argument, NULL, 'd' }, { 0 }
	};
	json_object *a = args_new();
	uint64_t v = 0;
	bool pid = false, drop = false;
	int o;

	while ((o = next_opt(argc, argv, "hp:d", lo)) != -1) {
		switch (o) {
		case 'p':
			if (!id_arg(optarg, &v))
				return json_object_put(a), EXIT_USAGE;
			if (v > INT32_MAX)
				return json_object_put(a),
				       usage_error("--pid \"%s\": not a process id", optarg);
			put_u64(a, "pid", v);
			pid = true;
			break;
		case 'd':
			json_object_object_add(a, "drop", json_object_new_boolean(true));
			drop = true;
			break;
		default:
			return json_object_put(a), EXIT_USAGE;
		}
	}
	if (pid && drop)
		return json_object_put(a), usage_error("--pid and --drop exclude each other");
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one reservation ID");
	if (!id_arg(argv[optind], &v))
		return json_object_put(a), EXIT_USAGE;
	put_u64(a, "id", v);
	/* cwctl itself ends at once: the claim is for whoever ran it */
	if (!pid && !drop)
		put_u64(a, "pid", (uint64_t)getppid());
	return call(CW_CTL_CMD_RESV_CLAIM, a, print_claimed);
}


static void print_export_added(json_object *e)
{
	printf("exported %s as %s%s\n", gs(e, "part"), gs(e, "name"),
	       json_object_get_boolean(get(e, "readonly")) ? " (read-only)" : "");
}

static int c_export_add(int argc, char **argv)
{
	static const struct option lo[] = {
		HELP_OPT, { "name", required_argument, NULL, 'n' },
		{ "readonly", no_argument, NULL, 'r' }, { "resv", required_argument, NULL, 'R' },
		{ 0 }
	};
	json_object *a = args_new();
	uint64_t id;
	int o;

	while ((o = next_opt(argc, argv, "hn:rR:", lo)) != -1) {
		if (o == 'n')
			put_str(a, "name", optarg);
		else if (o == 'r')
			json_object_object_add(a, "readonly", json_object_new_boolean(1));
		else if (o == 'R' && id_arg(optarg, &id))
			put_u64(a, "resv", id);
		else
			return json_object_put(a), EXIT_USAGE;
	}
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one partition PART");
	put_str(a, "part", argv[optind]);
	return call(CW_CTL_CMD_EXPORT_ADD, a, print_export_added);
}

/* --reserve / --limit: a rate in bytes per second or in iops; "0" or
 * "none" drops it. */
static bool iorate_arg(json_object *a, const char *opt, const char *key, const char *s)
{
	char ikey[32];
	uint64_t v = 0;
	bool iops = false;

	if (strcmp(s, "0") != 0 && strcmp(s, "none") != 0 &&
	    cw_units_parse_iorate(s, &v, &iops) < 0) {
		usage_error("%s \"%s\": expected " CW_UNITS_IORATE_HELP ", or none", opt, s);
		return false;
	}
	snprintf(ikey, sizeof(ikey), "%s_iops", key);
	put_u64(a, key, v);
	json_object_object_add(a, ikey, json_object_new_boolean(iops));
	return true;
}

static void print_qos(json_object *q)
{
	struct table t = { .ncols = 4 };

	if (!q) {
		printf("no best-effort QoS: weight 1, no reservation, no limit\n");
		return;
	}
	if (get(q, "fits")) {
		printf("it fits\n");
		return;
	}
	printf("export %s: reserve %s, weight %s, limit %s\n", gs(q, "export"),
	       get(q, "reserve") ? gs(get(q, "reserve"), "text") : "none", gs(q, "weight"),
	       get(q, "limit") ? gs(get(q, "limit"), "text") : "none");
	table_row(&t, "DISK", "BLOCKS", "RESERVED", "LIMIT");
	for (size_t i = 0; i < json_object_array_length(get(q, "disks")); i++) {
		json_object *d = json_object_array_get_idx(get(q, "disks"), i);
		char b[16], r[16], l[16];

		snprintf(b, sizeof(b), "%.1f%%", 100 * json_object_get_double(get(d, "blocks_share")));
		snprintf(r, sizeof(r), "%.2f%%", 100 * json_object_get_double(get(d, "reserve_share")));
		snprintf(l, sizeof(l), "%.2f%%", 100 * json_object_get_double(get(d, "limit_share")));
		table_row(&t, gs(d, "disk"), b, r, get(d, "limit_share") ? l : "-");
	}
	table_print(&t, stdout);
}

static int c_export_qos(int argc, char **argv)
{
	static const struct option lo[] = {
		HELP_OPT, { "reserve", required_argument, NULL, 'r' },
		{ "weight", required_argument, NULL, 'w' }, { "limit", required_argument, NULL, 'l' },
		{ "clear", no_argument, NULL, 'c' }, { "dry-run", no_argument, NULL, 'n' }, { 0 }
	};
	json_object *a = args_new();
	char *end;
	unsigned long long w;
	int o;

	while ((o = next_opt(argc, argv, "hr:w:l:cn", lo)) != -1) {
		if (o == 'r' && iorate_arg(a, "--reserve", "reserve", optarg))
			continue;
		if (o == 'l' && iorate_arg(a, "--limit", "limit", optarg))
			continue;
		if (o == 'w') {
			errno = 0;
			w = strtoull(optarg, &end, 10);
			if (errno || *end || !*optarg || optarg[0] == '-' || w < 1 || w > CW_BE_WEIGHT_MAX) {
				json_object_put(a);
				return usage_error("--weight \"%s\": expected a whole number from 1 to %d",
						   optarg, CW_BE_WEIGHT_MAX);
			}
			put_u64(a, "weight", w);
			continue;
		}
		if (o == 'c' || o == 'n') {
			json_object_object_add(a, o == 'c' ? "clear" : "dry_run",
					       json_object_new_boolean(1));
			continue;
		}
		return json_object_put(a), EXIT_USAGE;
	}
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one export NAME");
	put_str(a, "name", argv[optind]);
	return call(CW_CTL_CMD_EXPORT_QOS, a, print_qos);
}

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
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

static int c_stats(int argc, char **argv)
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

/* ---- moves ---------------------------------------------------------------- */

static bool move_finished(json_object *m)
{
	const char *st = gs(m, "state");

	return strcmp(st, "done") == 0 || strcmp(st, "cancelled") == 0;
}

static void move_line(json_object *m, char *buf, size_t len)
{
	char mb[CW_UNITS_BUF];
	uint64_t total = (uint64_t)gi(m, "blocks"), left = (uint64_t)gi(m, "left");
	int pct = total ? (int)((total - left) * 100 / total) : 100;
	json_object *eta = get(m, "eta_s"), *err = get(m, "error");
	size_t n;

	snprintf(mb, sizeof(mb), "%.1f MB/s", json_object_get_double(get(m, "mb_s")));
	n = (size_t)snprintf(buf, len, "move %s (%s %s): %s, %3d%%, %" PRIu64 "/%" PRIu64
			     " blocks, %s", gs(m, "id"), gs(m, "kind"), gs(m, "part"),
			     gs(m, "state"), pct, total - left, total, mb);
	if (n < len && eta)
		n += (size_t)snprintf(buf + n, len - n, ", ETA %.0fs", json_object_get_double(eta));
	if (n < len && gi(m, "failed"))
		n += (size_t)snprintf(buf + n, len - n, ", %s unreadable", gs(m, "failed"));
	if (n < len && err && *json_object_get_string(err))
		snprintf(buf + n, len - n, ": %s", json_object_get_string(err));
}

static void print_move(json_object *m)
{
	char line[512];

	move_line(m, line, sizeof(line));
	printf("%s\n", line);
}

static void print_moves(json_object *a)
{
	for (size_t i = 0; a && i < json_object_array_length(a); i++)
		print_move(json_object_array_get_idx(a, i));
	if (!a || !json_object_array_length(a))
		printf("no moves\n");
}

static void print_evacuating(json_object *r)
{
	json_object *m = get(r, "moves");

	printf("evacuating disk %s: %zu move(s)\n", gs(r, "disk"),
	       m ? json_object_array_length(m) : (size_t)0);
	print_moves(m);
}

/* Whether id is among ids[0..n) (n 0: every move). */
static bool watched(const uint64_t *ids, size_t n, uint64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return n == 0;
}

/* Shows the moves ids[0..n) (n 0: the unfinished ones) every interval
 * until they are finished, paused or interrupted: a progress bar each on
 * a terminal, a line each otherwise, one JSON object per move and
 * interval with --json.  0 when all finished with every block moved. */
static int watch_moves(const uint64_t *ids, size_t n, int64_t every)
{
	bool tty = !json_out && isatty(STDOUT_FILENO);
	int status = 0;

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	while (!interrupted) {
		struct timespec ts = { every / CW_NS_PER_S, every % CW_NS_PER_S };
		struct cw_ctl_reply rep;
		bool running = false;
		size_t shown = 0;
		int r = fetch(CW_CTL_CMD_MOVE_LIST, NULL, &rep);

		if (r)
			return r;
		status = 0;
		for (size_t i = 0; i < json_object_array_length(rep.result); i++) {
			json_object *m = json_object_array_get_idx(rep.result, i);
			char line[512];
			int width = 30, filled;
			uint64_t total = (uint64_t)gi(m, "blocks"), left = (uint64_t)gi(m, "left");

			if (!watched(ids, n, (uint64_t)gi(m, "id")) || (n == 0 && move_finished(m)))
				continue;
			running |= strcmp(gs(m, "state"), "running") == 0;
			if (!move_finished(m) || gi(m, "failed") ||
			    strcmp(gs(m, "state"), "cancelled") == 0)
				status = EXIT_REFUSED;
			shown++;
			if (json_out) {
				printf("%s\n", json_object_to_json_string_ext(m, JSON_C_TO_STRING_PLAIN |
							JSON_C_TO_STRING_NOSLASHESCAPE));
				continue;
			}
			move_line(m, line, sizeof(line));
			if (!tty) {
				printf("%s\n", line);
				continue;
			}
			filled = total ? (int)((total - left) * (uint64_t)width / total) : width;
			printf("\r\033[K[%.*s%*s] %s%s", filled, "##############################",
			       width - filled, "", line, shown < json_object_array_length(rep.result)
			       ? "\n" : "");
		}
		cw_ctl_reply_done(&rep);
		fflush(stdout);
		if (!running)
			break;
		nanosleep(&ts, NULL);	/* a pacing interval, not a wait for a state */
		if (tty)
			printf("\033[%zuA", shown > 1 ? shown - 1 : 0);
	}
	if (tty)
		printf("\n");
	return status;
}

/* --watch (-w) and --interval SECONDS (-i, 1 by default): whether to
 * follow the moves, and how often; *every stays 0 without --watch. */
static int watch_opt(int o, const char *arg, bool *watch, int64_t *every)
{
	if (o == 'w') {
		*watch = true;
		return 0;
	}
	if (o != 'i')
		return EXIT_USAGE;
	if (cw_units_parse_duration(arg, CW_UNITS_S, every) < 0 || *every <= 0)
		return usage_error("--interval \"%s\": expected " CW_UNITS_DURATION_HELP
				   ", more than 0", arg);
	return 0;
}

static int64_t watch_every(bool watch, int64_t every)
{
	return !watch ? 0 : every ? every : CW_NS_PER_S;
}

#define WATCH_OPTS { "watch", no_argument, NULL, 'w' }, { "interval", required_argument, NULL, 'i' }

/* Starts moves (disk.evacuate, part.move) with args a; with every > 0
 * watches them to their end. */
static int start_moves(enum cw_ctl_cmd cmd, json_object *a, int64_t every, print_fn print)
{
	struct cw_ctl_reply rep;
	uint64_t ids[CW_DISKS_MAX + 1];
	json_object *list;
	size_t n = 0;
	int r;

	if (!every)
		return call(cmd, a, print);
	r = fetch(cmd, a, &rep);
	if (r)
		return r;
	list = get(rep.result, "moves");
	if (list) {
		for (size_t i = 0; i < json_object_array_length(list) && n < CW_DISKS_MAX; i++)
			ids[n++] = (uint64_t)gi(json_object_array_get_idx(list, i), "id");
	} else {
		ids[n++] = (uint64_t)gi(rep.result, "id");
	}
	cw_ctl_reply_done(&rep);
	if (n == 0) {
		printf("nothing to move\n");
		return 0;
	}
	return watch_moves(ids, n, every);
}

static int c_disk_evacuate(int argc, char **argv)
{
	static const struct option lo[] = { HELP_OPT, WATCH_OPTS, { 0 } };
	json_object *a = args_new();
	int64_t every = 0;
	bool watch = false;
	int o;

	while ((o = next_opt(argc, argv, "hwi:", lo)) != -1)
		if (watch_opt(o, optarg, &watch, &every))
			return json_object_put(a), EXIT_USAGE;
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one disk NAME");
	put_str(a, "name", argv[optind]);
	return start_moves(CW_CTL_CMD_DISK_EVACUATE, a, watch_every(watch, every),
			   print_evacuating);
}

static int c_part_move(int argc, char **argv)
{
	static const struct option lo[] = {
		HELP_OPT, { "policy", required_argument, NULL, 'p' },
		{ "tier", required_argument, NULL, 't' }, { "zone", required_argument, NULL, 'z' },
		{ "disks", required_argument, NULL, 'd' }, WATCH_OPTS, { 0 }
	};
	json_object *a = args_new();
	int64_t every = 0;
	bool watch = false;
	int o;

	while ((o = next_opt(argc, argv, "hp:t:z:d:wi:", lo)) != -1) {
		switch (o) {
		case 'p': put_str(a, "policy", optarg); break;
		case 't': put_str(a, "tier", optarg); break;
		case 'z': put_str(a, "zone", optarg); break;
		case 'd': put_str(a, "disks", optarg); break;
		default:
			if (watch_opt(o, optarg, &watch, &every))
				return json_object_put(a), EXIT_USAGE;
		}
	}
	if (argc - optind != 1)
		return json_object_put(a), usage_error("expected one partition NAME");
	put_str(a, "name", argv[optind]);
	return start_moves(CW_CTL_CMD_PART_MOVE, a, watch_every(watch, every), print_move);
}

static int c_move_list(int argc, char **argv)
{
	static const struct option lo[] = { HELP_OPT, WATCH_OPTS, { 0 } };
	int64_t every = 0;
	bool watch = false;
	int o;

	while ((o = next_opt(argc, argv, "hwi:", lo)) != -1)
		if (watch_opt(o, optarg, &watch, &every))
			return EXIT_USAGE;
	if (argc != optind)
		return usage_error("move list takes no arguments");
	if (!watch)
		return call(CW_CTL_CMD_MOVE_LIST, NULL, print_moves);
	return watch_moves(NULL, 0, watch_every(watch, every));
}

static const char size_help[] =
	"Sizes are bytes with an optional binary suffix: 4096, 64K, 1.5G, 2T (also KiB, MB).\n";

static const struct command commands[] = {
	{ NULL, "status", "",
	  "The pool, its disks (with the slack delta-L and the utilization admission\n"
	  "has booked on each), partitions, reservations and exports, and the host:\n"
	  "the share of its CPUs given to streams and what they need of it.\n", NULL,
	  CW_CTL_CMD_STATUS, NULL,
	  print_status },
	{ "disk", "add", "PATH [--tier hdd|ssd|rbd] [--name NAME] [--emulate MODEL]",
	  "Adds a block device or file to the pool and labels it.  The tier defaults\n"
	  "to hdd; the name to disk<id>.  A running daemon serves it at once.\n"
	  "PATH rbd:POOL/IMAGE[?conf=FILE&id=NAME] is an image on a Ceph cluster\n"
	  "(tier rbd): its guarantee holds as far as the cluster keeps the latency\n"
	  "calibrated; cwctl stats shows the measured tail against C.\n"
	  "--emulate MODEL (atlas2, hdd7200, ssd or a \"cwmodel1 ...\" string): its I/O\n"
	  "completes when that disk would have completed it.  A preset may be followed\n"
	  "by its mechanics: \"ssd channels=8 stripe=128K write=3 gc=1G/50ms bus=500MB/s\".\n",
	  c_disk_add },
	{ "disk", "list", "", "Lists the disks of the pool.\n", NULL, CW_CTL_CMD_DISK_LIST, NULL,
	  print_disks },
	{ "disk", "remove", "NAME",
	  "Removes an empty disk from the pool; refused while partitions have blocks\n"
	  "on it or reservations use it.\n", NULL, CW_CTL_CMD_DISK_REMOVE, "name", print_removed },
	{ "disk", "evacuate", "NAME [--watch [--interval SECONDS]]",
	  "Moves every block off the disk onto the others, online and as best effort,\n"
	  "so that it can be removed.  Refused up front, with the numbers, when the\n"
	  "other disks lack the free space.  --watch follows the moves to their end.\n",
	  c_disk_evacuate },
	{ "disk", "calibrate", "NAME [--quick] [--percentile P]",
	  "Measures the disk's service times (seek curve, zone rates, block sizes)\n"
	  "with O_DIRECT reads and stores the model admission uses.  A progress bar\n"
	  "shows on a terminal.  --quick measures few points, for a first look.\n"
	  "On an image on a cluster (tier rbd), C of a block size is the P-th\n"
	  "percentile of its service times (50 to 100 in steps of 0.1; 99.9 unless\n"
	  "told, the median with --quick), kept with the model.\n"
	  "On a disk with streams, the new model is installed only if each stream\n"
	  "still passes admission with it (else the refusal names the one that\n"
	  "would not); the measurement runs beside them, unscheduled.  A warning\n"
	  "says when the numbers are no disk's (tmpfs, a sparse file, a cache).\n",
	  c_disk_calibrate },
	{ "disk", "plan", "[NAME] [--json]",
	  "Each disk's plan (or NAME's), what its dispatcher runs with: the slack\n"
	  "delta-L of the streams it carries, the best-effort budget after the guard,\n"
	  "the idle allowance, the periodic best-effort server, the best-effort piece\n"
	  "and its worst-case time, the reserve admission keeps, and whether best\n"
	  "effort is starved.  --json prints the array `cwsim plan --json` prints.\n",
	  c_disk_plan },
	{ "disk", "headroom", "[NAME] [--block SIZE]",
	  "What admission would still take: for each disk (or NAME), the streams it\n"
	  "carries, its utilization, delta-L and best-effort budget, and the largest\n"
	  "rate of a new stream of SIZE blocks (default: the pool's block) on it\n"
	  "alone; for each partition (on NAME), the largest rate of a stream over all\n"
	  "of it and the disk that limits it.  Rates are rounded down: each one shown\n"
	  "is admitted by resv create as it stands.\n", c_disk_headroom },
	{ "part", "create", "NAME --size SIZE [--policy rotation|random|single] [--tier hdd|ssd|none]\n"
	  "       [--tier-fallback] [--zone outer|inner|any] [--disk DISK]",
	  "Creates a dynamic partition.  rotation stripes blocks over the disks,\n"
	  "random scatters them, single keeps them on one disk (--disk, or the one\n"
	  "with the most space).  --zone outer prefers the fast outer zone of HDDs.\n"
	  "--tier ssd keeps to SSDs and is refused, with the free space found there,\n"
	  "when they lack the room; --tier-fallback lets it (and its growth) use the\n"
	  "other disks then.\n", c_part_create },
	{ "part", "move", "NAME [--policy P] [--tier T] [--zone Z] [--disks A,B]\n"
	  "       [--watch [--interval SECONDS]]",
	  "Re-lays a partition online: its blocks not on a disk the options accept\n"
	  "(of tier T, among disks A,B) move there, copied block by block as best\n"
	  "effort (in the slack of disks with streams) while it is served.  Refused\n"
	  "up front when the targets lack the room.  The move survives restarts;\n"
	  "--watch follows it to its end (a progress bar on a terminal).\n", c_part_move },
	{ "part", "list", "", "Lists the partitions.\n", NULL, CW_CTL_CMD_PART_LIST, NULL, print_parts },
	{ "part", "show", "NAME [--all]",
	  "Shows a partition, its blocks per disk and its runs (blocks consecutive on\n"
	  "one disk): the first 16 runs, or with --all every one.  --json has the\n"
	  "first page of runs (next_block says where the rest start), or with --all\n"
	  "every one.\n", c_part_show },
	{ "part", "resize", "NAME --size [+|-]SIZE [--force]",
	  "Grows or shrinks a partition at its end: to SIZE, or by SIZE with + or -.\n"
	  "A shrink that would discard data written in the blocks at the end says\n"
	  "how much and needs --force (blocks never written go without it); only\n"
	  "those blocks are discarded.  It is refused below a reserved range or\n"
	  "while the partition is exported, and a size of 0 is refused (delete the\n"
	  "partition instead).  An export that grows has its new size for new\n"
	  "connections; open ones keep theirs.\n", c_part_resize },
	{ "part", "cache", "NAME --size SIZE|--off [--mode write-through|write-back]",
	  "Gives an HDD partition SIZE of SSD as a cache of its hottest blocks\n"
	  "(--size 0 or --off: none).  Reads of a cached block come from the SSD;\n"
	  "promotions and demotions are best-effort copies in the slack.  Write-\n"
	  "through (the default) writes both copies; write-back writes a cached\n"
	  "block to the SSD only, journalled so a crash loses nothing.  Growing\n"
	  "takes the SSD space at once (refused with the free space when it does not\n"
	  "fit); a smaller size, another mode or --off demote (and write back) the\n"
	  "cached blocks first.  `cwctl stats` shows how it does.\n", c_part_cache },
	{ "part", "delete", "NAME [--force]",
	  "Deletes a partition; refused while it is exported or reserved, and while\n"
	  "it holds data unless --force (the refusal says how much).\n", c_part_delete },
	{ "resv", "create", "PART --rate RATE --block SIZE [--range START:END] [--start TIME]\n"
	  "       [--duration TIME] [--due disk|stream] [--dry-run]",
	  "Reserves a stream of SIZE-byte blocks at RATE over bytes START..END of\n"
	  "PART (default: all of it), from TIME from now (default: now) for TIME\n"
	  "(default: until released).  Every disk holding the range must admit its\n"
	  "share (Jeffay's test), or the reservation is refused with the disk and the\n"
	  "condition that failed, in words, and the largest rate that fits.\n"
	  "A block is due its disk's period after it is asked for (--due disk, the\n"
	  "default): on a partition striped over k disks a client asks k blocks\n"
	  "ahead (the reservation's lead).  --due stream makes every block due one\n"
	  "period after it is asked for, for clients that cannot read ahead; the\n"
	  "disks then admit fewer such streams.\n"
	  "--dry-run tests the reservation and books nothing.\n"
	  "Rates are decimal: 8Mbit, 817KB/s, 1.5MB/s, 4MiB/s, or bytes per second.\n"
	  "Times: 90 (seconds), 1.5s, 250ms, 10m, 2h.\n", c_resv_create },
	{ "resv", "list", "", "Lists the reservations; those given to clockwised -r show as static.\n",
	  NULL, CW_CTL_CMD_RESV_LIST, NULL, print_resvs },
	{ "resv", "show", "ID", "Shows a reservation and its task on each disk.\n", NULL,
	  CW_CTL_CMD_RESV_SHOW, "id", print_resv },
	{ "resv", "release", "ID",
	  "Releases a reservation; refused while an export is bound to it.\n", NULL,
	  CW_CTL_CMD_RESV_RELEASE, "id", print_released },
	{ "resv", "claim", "ID [--pid PID | --drop]",
	  "Only the connections of process PID (default: this one's parent, the\n"
	  "shell or player that runs cwctl) may hold the real-time priority of the\n"
	  "export bound to reservation ID, until that process ends; --drop lifts\n"
	  "the claim.  Without a claim the first client of the export to ask holds\n"
	  "it, and any client that connects before the player takes it first.\n"
	  "Connections on a unix socket only (the kernel names their process).\n"
	  "cwstream claims its reservation itself with --resv.\n", c_resv_claim },
	{ "export", "list", "",
	  "Lists the NBD exports and the clients connected to each (uid and pid on\n"
	  "a unix socket, address on TCP); \"unavailable\": listed, but its partition\n"
	  "has blocks on a missing disk.\n", NULL, CW_CTL_CMD_EXPORT_LIST, NULL, print_exports },
	{ "export", "add", "PART [--name NAME] [--readonly] [--resv ID]",
	  "Exports a partition over NBD as NAME (default: the partition's name).\n"
	  "With --resv, requests inside the reservation's range are real-time.\n", c_export_add },
	{ "export", "remove", "NAME [--force]",
	  "Stops exporting NAME (and drops its QoS).  While clients are connected it\n"
	  "is refused (naming them) unless --force, which disconnects them.\n",
	  c_export_remove },
	{ "export", "qos", "NAME [--reserve RATE] [--weight W] [--limit RATE] [--clear] [--dry-run]",
	  "Sets the export's best effort between exports (be_order rbfq): at least\n"
	  "its reservation while it asks, its weight's share of the rest, at most its\n"
	  "limit.  RATE is bytes per second (20MB/s, 8M) or requests (200iops); none\n"
	  "drops it.  Options not given keep their value; without any it shows the\n"
	  "QoS.  A reservation must fit in each disk's best-effort capacity beside\n"
	  "the others', or it is refused with the largest that fits.  Stored in the\n"
	  "pool; running clients get it with their next requests.  NAME may be\n"
	  "EXPORT@CLASS: the NBD clients that open the export by that name share it\n"
	  "as a client of their own.\n", c_export_qos },
	{ "move", "list", "[--watch [--interval SECONDS]]",
	  "Lists the moves with their progress: blocks done, MB/s, time left, blocks\n"
	  "whose source did not read, and why a move paused.  --watch follows the\n"
	  "unfinished ones until none runs (one JSON object per move and interval\n"
	  "with --json).\n", c_move_list },
	{ "move", "pause", "ID", "Pauses a move after the block in flight.\n", NULL,
	  CW_CTL_CMD_MOVE_PAUSE, "id", print_move },
	{ "move", "resume", "ID", "Resumes a paused move.\n", NULL, CW_CTL_CMD_MOVE_RESUME, "id",
	  print_move },
	{ "move", "cancel", "ID",
	  "Stops a move: blocks already moved stay, the others' targets are freed.\n", NULL,
	  CW_CTL_CMD_MOVE_CANCEL, "id", print_move },
	{ NULL, "stats", "[--watch SECONDS [--count N]]",
	  "The data path's counters per disk and per reservation since the daemon\n"
	  "started: real-time requests and deadline misses, best-effort latency\n"
	  "percentiles, slack used; per export, the share of disk time its best\n"
	  "effort received against the share it was due, whether its reservation\n"
	  "was met and its limit held.  --watch shows each interval of SECONDS instead\n"
	  "(N of them, or until interrupted), with its time: IOPS, bytes read and\n"
	  "written per second, deadline misses, best-effort p50/p99 and the share of\n"
	  "the interval best effort ran in the streams' slack; with --json, one JSON\n"
	  "object per line.\n", c_stats },
};

static void group_help(const char *group)
{
	printf("Usage: cwctl [--socket PATH] [--json] %s COMMAND ...\n\nCommands:\n", group);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (commands[i].group && strcmp(commands[i].group, group) == 0)
			printf("  %s %s %s\n", group, commands[i].name, commands[i].synopsis);
	printf("\n%s 'cwctl %s COMMAND --help' describes one command.\n", size_help, group);
}

static void main_help(void)
{
	printf("Usage: cwctl [--socket PATH] [--json] COMMAND ...\n\n"
	       "Drives clockwised through its control socket.\n\n"
	       "Options:\n"
	       "  -s, --socket PATH  the control socket (default /run/clockwise/control,\n"
	       "                     or $CLOCKWISE_CONTROL)\n"
	       "  -j, --json         print results as JSON\n"
	       "  -h, --help         this help; 'cwctl COMMAND --help' for one command\n"
	       "  -V, --version\n\nCommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		printf("  %s%s%s\n", commands[i].group ? commands[i].group : "",
		       commands[i].group ? " " : "", commands[i].name);
	printf("\nExit status: 0 success, 1 refused or failed, 2 bad usage, 3 no server.\n");
}

/* --json and --socket may follow the command too ("cwctl part list
 * --json"), as with the other tools people know: taken out of argv[from..]
 * (up to a "--"), which keeps the rest in order.  Returns the new argc. */
static int global_options(int argc, char **argv, int from)
{
	int out = from;

	for (int i = from; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			while (i < argc)
				argv[out++] = argv[i++];
			break;
		}
		if (strcmp(argv[i], "--json") == 0) {
			json_out = true;
		} else if (strncmp(argv[i], "--socket=", 9) == 0) {
			socket_path = argv[i] + 9;
		} else if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc) {
			socket_path = argv[++i];
		} else {
			argv[out++] = argv[i];
		}
	}
	argv[out] = NULL;
	return out;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 's' }, { "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' }, { "version", no_argument, NULL, 'V' }, { 0 }
	};
	static char name[128];
	const char *env = getenv("CLOCKWISE_CONTROL");
	int o, first;

	if (env && *env)
		socket_path = env;
	while ((o = getopt_long(argc, argv, "+s:jhV", lo, NULL)) != -1) {
		switch (o) {
		case 's': socket_path = optarg; break;
		case 'j': json_out = true; break;
		case 'h': main_help(); return 0;
		case 'V': printf("cwctl %s (libclockwise %s)\n", PACKAGE_VERSION, cw_version()); return 0;
		default: fprintf(stderr, "Try 'cwctl --help'.\n"); return EXIT_USAGE;
		}
	}
	argc = global_options(argc, argv, optind);
	if (optind >= argc)
		return usage_error("a command is missing");
	first = optind;
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		const struct command *c = &commands[i];
		int words = c->group ? 2 : 1;

		if (strcmp(argv[first], c->group ? c->group : c->name) != 0)
			continue;
		if (c->group) {
			if (first + 1 >= argc || strcmp(argv[first + 1], "--help") == 0 ||
			    strcmp(argv[first + 1], "-h") == 0) {
				if (first + 1 >= argc) {
					snprintf(name, sizeof(name), "cwctl %s", c->group);
					cmd_name = name;
					group_help(c->group);
					return EXIT_USAGE;
				}
				group_help(c->group);
				return 0;
			}
			if (strcmp(argv[first + 1], c->name) != 0)
				continue;
		}
		snprintf(name, sizeof(name), "cwctl%s%s %s", c->group ? " " : "",
			 c->group ? c->group : "", c->name);
		cmd_name = name;
		current = c;
		optind = 0;	/* glibc: start over, reading the + again */
		return (c->fn ? c->fn : c_simple)(argc - first - words + 1,
						  argv + first + words - 1);
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (commands[i].group && strcmp(argv[first], commands[i].group) == 0) {
			snprintf(name, sizeof(name), "cwctl %s", commands[i].group);
			cmd_name = name;
			return usage_error("unknown command \"%s\"", argv[first + 1]);
		}
	}
	return usage_error("unknown command \"%s\"", argv[first]);
}
