/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cwstream — a media client (cwstream(1)): reads (play) or writes (record)
 * an NBD export at a steady rate, one block per period, the way a video
 * player or recorder does, and says for every block whether it was done
 * by its deadline.
 *
 * The schedule is fixed when the stream starts, as a player's playout
 * clock is: block i is released at t0 + i*P and due at t0 + (i+1)*P with
 * P = block/rate (Bosch & Mullender's T = b/B).  A late block does not
 * move the later deadlines, so lateness shows as misses instead of being
 * absorbed by a drifting schedule.
 *
 * Exit status: 0 every block on time, 4 the stream ran but missed
 * deadlines, 1 an error (connection, I/O, control socket), 2 bad usage.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libnbd.h>

#include <clockwise/types.h>
#include <clockwise/units.h>

#include "ctl-client.h"

#define EXIT_MISSES 4
#define CHUNK_MAX (32u << 20)	/* largest request sent; bigger blocks are split */

struct opts {
	bool record;
	const char *uri;
	uint64_t rate;
	uint64_t block;
	int64_t duration_ns;		/* 0: once through the export */
	uint64_t offset;		/* where the stream starts in the export */
	uint64_t resv;			/* --resv ID */
	bool reserve;
	bool json;
	bool quiet;
	const char *socket;
	int rt_priority;		/* --rt-priority: SCHED_FIFO; 0: none */
};

struct totals {
	uint64_t blocks, misses, bytes;
	int64_t worst_late_ns;		/* largest completion - deadline (< 0: all early) */
	int64_t max_latency_ns;
	double lat_sum, lat_sq;		/* for the mean and the jitter */
	int64_t elapsed_ns;
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: cwstream play|record NBD-URI --rate RATE --block SIZE [--duration TIME]\n"
		"                [--offset SIZE] [--resv ID | --reserve [--socket PATH]]\n"
		"                [--rt-priority N] [--json] [--quiet]\n"
		"       cwstream --help | --version\n\n"
		"Reads (play) or writes (record) NBD-URI at RATE in SIZE-byte blocks and\n"
		"reports each block's lateness against its deadline, then blocks, misses,\n"
		"worst lateness and jitter.\n\n"
		"  -r, --rate RATE      bytes per second: 8M = 8MiB/s (2^20), 8MB/s (10^6),\n"
		"                       8Mbit/s (10^6 bits), or a bare number\n"
		"  -b, --block SIZE     bytes per block: 4096, 64K, 1M (K, M: 1024^n;\n"
		"                       KB, MB: 1000^n)\n"
		"  -d, --duration TIME  stream for TIME (90, 1.5s, 250ms, 10m), wrapping at\n"
		"                       the end of the export; default: once through it\n"
		"  -o, --offset SIZE    start at this byte of the export (default 0)\n"
		"  -R, --resv ID        the reservation the stream runs under (checked)\n"
		"      --reserve        reserve RATE and SIZE through the control socket for\n"
		"                       the export's partition, and release it at the end\n"
		"  -s, --socket PATH    control socket (default /run/clockwise/control)\n"
		"  -p, --rt-priority N  run at real-time priority N (SCHED_FIFO, 1-99) with\n"
		"                       memory locked, as a media player would; refused\n"
		"                       without the privilege (CAP_SYS_NICE)\n"
		"  -j, --json           JSON lines: one per block, then {\"summary\": ...}\n"
		"  -q, --quiet          no per-block lines\n"
		"  -h, --help           this text\n"
		"  -V, --version        the version\n\n"
		"Exit status: 0 all on time, 4 deadlines missed, 1 error, 2 bad usage.\n");
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "rate", required_argument, NULL, 'r' }, { "block", required_argument, NULL, 'b' },
		{ "duration", required_argument, NULL, 'd' },
		{ "offset", required_argument, NULL, 'o' }, { "resv", required_argument, NULL, 'R' },
		{ "reserve", no_argument, NULL, 'E' }, { "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' }, { "quiet", no_argument, NULL, 'q' },
		{ "rt-priority", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' }, { "version", no_argument, NULL, 'V' }, { 0 }
	};
	const char *env = getenv("CLOCKWISE_CONTROL");
	char *end;
	int c;

	memset(o, 0, sizeof(*o));
	o->socket = env && *env ? env : "/run/clockwise/control";
	while ((c = getopt_long(argc, argv, "r:b:d:o:R:s:p:jqhV", lo, NULL)) != -1) {
		switch (c) {
		case 'r':
			if (cw_units_parse_rate(optarg, &o->rate) < 0) {
				fprintf(stderr, "cwstream: --rate \"%s\": expected "
					CW_UNITS_RATE_HELP "\n", optarg);
				return -1;
			}
			break;
		case 'b':
			if (cw_units_parse_size(optarg, &o->block) < 0 || o->block == 0) {
				fprintf(stderr, "cwstream: --block \"%s\": expected "
					CW_UNITS_SIZE_HELP ", more than 0\n", optarg);
				return -1;
			}
			break;
		case 'd':
			if (cw_units_parse_duration(optarg, CW_UNITS_S, &o->duration_ns) < 0 ||
			    o->duration_ns <= 0) {
				fprintf(stderr, "cwstream: --duration \"%s\": expected "
					CW_UNITS_DURATION_HELP ", more than 0\n", optarg);
				return -1;
			}
			break;
		case 'o':
			if (cw_units_parse_size(optarg, &o->offset) < 0) {
				fprintf(stderr, "cwstream: --offset \"%s\": expected "
					CW_UNITS_SIZE_HELP "\n", optarg);
				return -1;
			}
			break;
		case 'R':
			errno = 0;
			o->resv = strtoull(optarg, &end, 10);
			if (!*optarg || *end || errno || o->resv == 0) {
				fprintf(stderr, "cwstream: --resv \"%s\": expected an id\n", optarg);
				return -1;
			}
			break;
		case 'p':
			errno = 0;
			o->rt_priority = (int)strtol(optarg, &end, 10);
			if (!*optarg || *end || errno || o->rt_priority < 1 || o->rt_priority > 99) {
				fprintf(stderr, "cwstream: --rt-priority \"%s\": expected 1 to 99\n",
					optarg);
				return -1;
			}
			break;
		case 'E': o->reserve = true; break;
		case 's': o->socket = optarg; break;
		case 'j': o->json = true; break;
		case 'q': o->quiet = true; break;
		case 'h': usage(stdout); exit(0);
		case 'V': printf("cwstream %s (libclockwise %s)\n", PACKAGE_VERSION, cw_version()); exit(0);
		default: return -1;
		}
	}
	if (argc - optind != 2 || (strcmp(argv[optind], "play") && strcmp(argv[optind], "record"))) {
		fprintf(stderr, "cwstream: expected play|record and an NBD URI\n");
		return -1;
	}
	if (!o->rate || !o->block) {
		fprintf(stderr, "cwstream: --rate and --block are required\n");
		return -1;
	}
	if (o->resv && o->reserve) {
		fprintf(stderr, "cwstream: --resv and --reserve exclude each other\n");
		return -1;
	}
	o->record = strcmp(argv[optind], "record") == 0;
	o->uri = argv[optind + 1];
	return 0;
}

/* ---- the control socket: --reserve and --resv ---------------------------- */

static json_object *jget(json_object *o, const char *k)
{
	json_object *v;

	return o && json_object_object_get_ex(o, k, &v) ? v : NULL;
}

static int control_call(const char *socket, enum cw_ctl_cmd cmd, json_object *args,
			struct cw_ctl_reply *ret)
{
	struct cwctl_client c;
	int r = cwctl_client_open(&c, socket);

	if (r < 0) {
		fprintf(stderr, "cwstream: control socket %s: %s\n", socket, strerror(-r));
		json_object_put(args);
		return -1;
	}
	r = cwctl_client_call(&c, cmd, args, NULL, NULL, ret);
	cwctl_client_close(&c);
	json_object_put(args);
	if (r < 0) {
		fprintf(stderr, "cwstream: control socket %s: %s\n", socket, strerror(-r));
		return -1;
	}
	if (ret->kind == CW_CTL_REPLY_ERROR) {
		fprintf(stderr, "cwstream: %s: %s (%s)\n", cw_ctl_cmd_spec(cmd)->name, ret->message,
			ret->code_name);
		cw_ctl_reply_done(ret);
		return -1;
	}
	return 0;
}

/* Reserves rate and block on the partition behind export_name. */
static int reserve(const struct opts *o, const char *export_name, uint64_t *ret_id)
{
	struct cw_ctl_reply rep;
	json_object *args;
	const char *part = NULL;
	char part_buf[256];

	if (control_call(o->socket, CW_CTL_CMD_EXPORT_LIST, NULL, &rep) < 0)
		return -1;
	for (size_t i = 0; i < json_object_array_length(rep.result); i++) {
		json_object *e = json_object_array_get_idx(rep.result, i);

		if (strcmp(json_object_get_string(jget(e, "name")), export_name) == 0) {
			snprintf(part_buf, sizeof(part_buf), "%s",
				 json_object_get_string(jget(e, "part")));
			part = part_buf;
		}
	}
	cw_ctl_reply_done(&rep);
	if (!part) {
		fprintf(stderr, "cwstream: no export \"%s\" on the control socket's server\n",
			export_name);
		return -1;
	}
	args = json_object_new_object();
	json_object_object_add(args, "part", json_object_new_string(part));
	json_object_object_add(args, "rate", json_object_new_int64((int64_t)o->rate));
	json_object_object_add(args, "block", json_object_new_int64((int64_t)o->block));
	if (o->duration_ns)
		json_object_object_add(args, "duration", json_object_new_int64(o->duration_ns));
	if (control_call(o->socket, CW_CTL_CMD_RESV_CREATE, args, &rep) < 0)
		return -1;
	*ret_id = (uint64_t)json_object_get_int64(jget(rep.result, "id"));
	cw_ctl_reply_done(&rep);
	return 0;
}

static void release(const struct opts *o, uint64_t id)
{
	struct cw_ctl_reply rep;
	json_object *args = json_object_new_object();

	json_object_object_add(args, "id", json_object_new_int64((int64_t)id));
	if (control_call(o->socket, CW_CTL_CMD_RESV_RELEASE, args, &rep) == 0)
		cw_ctl_reply_done(&rep);
}

/* --resv ID: the reservation must exist and cover the stream's rate. */
static int check_resv(const struct opts *o)
{
	struct cw_ctl_reply rep;
	json_object *args = json_object_new_object();
	uint64_t rate, block;

	json_object_object_add(args, "id", json_object_new_int64((int64_t)o->resv));
	if (control_call(o->socket, CW_CTL_CMD_RESV_SHOW, args, &rep) < 0)
		return -1;
	rate = (uint64_t)json_object_get_int64(jget(rep.result, "rate"));
	block = (uint64_t)json_object_get_int64(jget(rep.result, "block"));
	cw_ctl_reply_done(&rep);
	if (rate < o->rate || block < o->block) {
		char a[CW_UNITS_BUF], b[CW_UNITS_BUF];

		fprintf(stderr, "cwstream: reservation %" PRIu64 " is for %s in %s blocks, less "
			"than this stream asks\n", o->resv, cw_units_format_rate(rate, a),
			cw_units_format_size(block, b));
		return -1;
	}
	return 0;
}

/* ---- the stream ---------------------------------------------------------- */

static int block_io(struct nbd_handle *h, bool record, char *buf, uint64_t len, uint64_t off,
		    uint64_t max_req)
{
	while (len) {
		uint64_t n = len < max_req ? len : max_req;
		int r = record ? nbd_pwrite(h, buf, n, off, 0) : nbd_pread(h, buf, n, off, 0);

		if (r < 0)
			return -1;
		buf += n;
		off += n;
		len -= n;
	}
	return 0;
}

static void sleep_until(int64_t t_ns)
{
	struct timespec ts = { t_ns / CW_NS_PER_S, t_ns % CW_NS_PER_S };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR && !interrupted)
		;
}

static void print_block(const struct opts *o, uint64_t i, uint64_t off, int64_t latency,
			int64_t late)
{
	char a[CW_UNITS_BUF], b[CW_UNITS_BUF];

	if (o->quiet)
		return;
	if (o->json)
		printf("{\"block\":%" PRIu64 ",\"offset\":%" PRIu64 ",\"latency_ns\":%" PRId64
		       ",\"late_ns\":%" PRId64 ",\"on_time\":%s}\n", i, off, latency, late,
		       late <= 0 ? "true" : "false");
	else if (late <= 0)
		printf("block %" PRIu64 " at %" PRIu64 ": %s, on time (%s to spare)\n", i, off,
		       cw_units_format_duration(latency, a), cw_units_format_duration(-late, b));
	else
		printf("block %" PRIu64 " at %" PRIu64 ": %s, LATE by %s\n", i, off,
		       cw_units_format_duration(latency, a), cw_units_format_duration(late, b));
}

static void print_summary(const struct opts *o, const struct totals *t, int64_t period,
			  uint64_t resv)
{
	double n = t->blocks ? (double)t->blocks : 1;
	double mean = t->lat_sum / n, var = t->lat_sq / n - mean * mean;
	int64_t jitter = (int64_t)llround(sqrt(var > 0 ? var : 0));
	uint64_t achieved = t->elapsed_ns > 0
		? (uint64_t)((double)t->bytes * 1e9 / (double)t->elapsed_ns) : 0;
	char a[CW_UNITS_BUF], b[CW_UNITS_BUF], c[CW_UNITS_BUF], d[CW_UNITS_BUF], e[CW_UNITS_BUF];

	if (o->json) {
		printf("{\"summary\":{\"mode\":\"%s\",\"blocks\":%" PRIu64 ",\"misses\":%" PRIu64
		       ",\"worst_late_ns\":%" PRId64 ",\"jitter_ns\":%" PRId64
		       ",\"mean_latency_ns\":%" PRId64 ",\"max_latency_ns\":%" PRId64
		       ",\"period_ns\":%" PRId64 ",\"bytes\":%" PRIu64 ",\"rate\":%" PRIu64
		       ",\"achieved_rate\":%" PRIu64 ",\"resv\":", o->record ? "record" : "play",
		       t->blocks, t->misses, t->worst_late_ns, jitter, (int64_t)llround(mean),
		       t->max_latency_ns, period, t->bytes, o->rate, achieved);
		if (resv)
			printf("%" PRIu64, resv);
		else
			printf("null");
		printf(",\"interrupted\":%s}}\n", interrupted ? "true" : "false");
		return;
	}
	printf("%s: %" PRIu64 " blocks of %s every %s (%s), %" PRIu64 " missed\n",
	       o->record ? "record" : "play", t->blocks, cw_units_format_size(o->block, a),
	       cw_units_format_duration(period, b), cw_units_format_rate(o->rate, c), t->misses);
	if (t->worst_late_ns > 0)
		snprintf(a, sizeof(a), "%s", cw_units_format_duration(t->worst_late_ns, d));
	else
		snprintf(a, sizeof(a), "none");
	printf("worst lateness %s, jitter %s, mean latency %s, max latency %s, achieved %s\n", a,
	       cw_units_format_duration(jitter, e), cw_units_format_duration((int64_t)llround(mean), b),
	       cw_units_format_duration(t->max_latency_ns, d), cw_units_format_rate(achieved, c));
}

int main(int argc, char **argv)
{
	struct opts o;
	struct totals t = { .worst_late_ns = INT64_MIN };
	struct nbd_handle *h;
	int64_t size, period, t0, max_req;
	uint64_t resv_made = 0, nblocks;
	char *buf;
	int status = 0;

	if (parse_args(argc, argv, &o) < 0) {
		fprintf(stderr, "Try 'cwstream --help'.\n");
		return 2;
	}
	if ((unsigned __int128)o.block * CW_NS_PER_S / o.rate > INT64_MAX) {
		fprintf(stderr, "cwstream: a block every %s is too slow a stream\n", "eternity");
		return 2;
	}
	period = (int64_t)((unsigned __int128)o.block * CW_NS_PER_S / o.rate);
	if (period <= 0) {
		fprintf(stderr, "cwstream: --rate is too high for --block: under 1 ns per block\n");
		return 2;
	}
	if (o.rt_priority) {
		struct sched_param sp = { .sched_priority = o.rt_priority };

		if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0) {
			fprintf(stderr, "cwstream: --rt-priority %d: %s\n", o.rt_priority,
				strerror(errno));
			return 1;
		}
		if (mlockall(MCL_CURRENT | MCL_FUTURE) < 0)
			fprintf(stderr, "cwstream: cannot lock its memory: %s\n", strerror(errno));
	}
	h = nbd_create();
	if (!h || nbd_connect_uri(h, o.uri) < 0) {
		fprintf(stderr, "cwstream: %s: %s\n", o.uri, nbd_get_error());
		nbd_close(h);
		return 1;
	}
	size = nbd_get_size(h);
	max_req = nbd_get_block_size(h, LIBNBD_SIZE_MAXIMUM);
	if (max_req <= 0 || max_req > CHUNK_MAX)
		max_req = CHUNK_MAX;
	if (size < 0 || (uint64_t)size < o.offset + o.block) {
		fprintf(stderr, "cwstream: %s: the export (%" PRId64 " bytes) holds no block of %"
			PRIu64 " bytes after offset %" PRIu64 "\n", o.uri, size, o.block, o.offset);
		nbd_close(h);
		return 1;
	}
	if (o.record && nbd_is_read_only(h) == 1) {
		fprintf(stderr, "cwstream: %s is read-only: cannot record\n", o.uri);
		nbd_close(h);
		return 1;
	}
	nblocks = ((uint64_t)size - o.offset) / o.block;
	if (o.duration_ns)
		nblocks = (uint64_t)(o.duration_ns / period);
	if (o.reserve) {
		char *name = nbd_get_export_name(h);

		if (!name || reserve(&o, name, &resv_made) < 0) {
			free(name);
			nbd_close(h);
			return 1;
		}
		free(name);
	} else if (o.resv && check_resv(&o) < 0) {
		nbd_close(h);
		return 1;
	}
	buf = malloc(o.block);
	if (!buf) {
		fprintf(stderr, "cwstream: out of memory for a block of %" PRIu64 " bytes\n", o.block);
		nbd_close(h);
		return 1;
	}
	memset(buf, 0xc5, o.block);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	t0 = cw_now_ns();
	for (uint64_t i = 0; i < nblocks && !interrupted; i++) {
		uint64_t span = ((uint64_t)size - o.offset) / o.block;
		uint64_t off = o.offset + (i % span) * o.block;
		int64_t release = t0 + (int64_t)i * period, deadline = release + period;
		int64_t done, latency, late;

		sleep_until(release);
		if (interrupted)
			break;
		if (o.record)
			memcpy(buf, &i, sizeof(i));	/* each recorded block differs */
		if (block_io(h, o.record, buf, o.block, off, (uint64_t)max_req) < 0) {
			fprintf(stderr, "cwstream: block %" PRIu64 " at %" PRIu64 ": %s\n", i, off,
				nbd_get_error());
			status = 1;
			break;
		}
		done = cw_now_ns();
		/* From the release: a late start (after a late block) counts. */
		latency = done - release;
		late = done - deadline;
		t.blocks++;
		t.bytes += o.block;
		t.misses += late > 0;
		if (late > t.worst_late_ns)
			t.worst_late_ns = late;
		if (latency > t.max_latency_ns)
			t.max_latency_ns = latency;
		t.lat_sum += (double)latency;
		t.lat_sq += (double)latency * (double)latency;
		print_block(&o, i, off, latency, late);
	}
	/* The stream's own time: a run that finished its last block early
	 * still lasted its blocks' periods. */
	t.elapsed_ns = cw_now_ns() - t0;
	if (t.elapsed_ns < (int64_t)t.blocks * period)
		t.elapsed_ns = (int64_t)t.blocks * period;
	if (t.worst_late_ns == INT64_MIN)
		t.worst_late_ns = 0;
	if (status == 0 && o.record && nbd_flush(h, 0) < 0 && nbd_can_flush(h) == 1) {
		fprintf(stderr, "cwstream: flush: %s\n", nbd_get_error());
		status = 1;
	}
	nbd_shutdown(h, 0);
	nbd_close(h);
	free(buf);
	print_summary(&o, &t, period, resv_made ? resv_made : o.resv);
	if (resv_made)
		release(&o, resv_made);
	if (status)
		return status;
	return t.misses ? EXIT_MISSES : 0;
}
