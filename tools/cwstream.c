/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cwstream — a media client (cwstream(1)): reads (play) or writes (record)
 * an NBD export at a steady rate, one block per period, the way a video
 * player or recorder does, and says for every block whether it was done
 * by its deadline.
 *
 * The schedule is fixed when the stream starts, as a player's playout
 * clock is: block i is released (asked for) at t0 + i*P and due at
 * t0 + i*P + L with P = block/rate (Bosch & Mullender's T = b/B) and L
 * the lead, how far ahead of need the player asks: P, or the
 * reservation's lead (a partition striped over k disks gives each disk
 * k periods per block, so the player asks k blocks ahead and starts
 * playing L after its first request).  A late block does not move the
 * later deadlines, so lateness shows as misses instead of being absorbed
 * by a drifting schedule.
 *
 * Exit status: 0 every block on time, 4 the stream ran but missed
 * deadlines, 1 an error (connection, I/O, control socket), 2 bad usage.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libnbd.h>

#include <clockwise/admit.h>
#include <clockwise/hist.h>
#include <clockwise/types.h>
#include <clockwise/units.h>

#include "common/util.h"
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
	unsigned depth;			/* --depth: blocks in flight at most */
	bool depth_set;
	int64_t lead_ns;		/* --lead; 0: the reservation's, else a period */
	int64_t ahead_ns;		/* --ahead; -1: AHEAD_DEFAULT_NS, at most a quarter period */
	const char *due;		/* --due for --reserve; NULL: the daemon's default */
	int64_t start_at_ns;		/* --start-at: wall-clock ns since the epoch; 0: at once */
};

#define DEPTH_DEFAULT 4
/*
 * How long before its release a block is asked for: the player's
 * allowance for its own wake-up.  The daemon serves a stream's request
 * at most its period T after the request's release, and releases a
 * request that comes late when it comes: with the lead equal to T a
 * player that woke 11.6 ms late got its block 11.6 ms late whenever the
 * daemon used its whole window, as dynamic slack does (the players of a
 * stream set, all due at the same instants, and the daemon's connection
 * threads share the CPUs at one priority and wake in turn).  A request
 * that comes before the stream's release waits for it in the daemon (as
 * best effort may serve it earlier), so asking ahead costs the daemon
 * nothing and absorbs a late wake-up up to the allowance.
 */
#define AHEAD_DEFAULT_NS (50 * CW_NS_PER_MS)
#define DEPTH_MAX 64

/* Why a block was late, as the client can tell (see miss_cause()). */
enum miss_cause { MISS_BEHIND, MISS_WAKEUP, MISS_ROUND_TRIP, MISS_CAUSES };

static const char *const miss_cause_name[MISS_CAUSES] = { "behind", "wakeup", "round_trip" };

/* A start this much after the block's release (and after the previous
 * block's end) is the client's own wait for a CPU. */
#define WAKEUP_SLACK_NS (200 * 1000)

struct totals {
	uint64_t blocks, misses, bytes;
	uint64_t miss_by[MISS_CAUSES];
	int64_t worst_start_late_ns;	/* largest start - release */
	int64_t worst_round_trip_ns;	/* largest done - start */
	int64_t worst_late_ns;		/* largest completion - deadline (< 0: all early) */
	int64_t max_latency_ns;
	double lat_sum, lat_sq;		/* for the mean and the jitter */
	int64_t elapsed_ns;
	uint64_t round_trips[CW_HIST_BUCKETS];	/* done - start: percentiles */
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
		"                [--depth N] [--lead TIME] [--due disk|stream]\n"
		"                [--start-at EPOCH] [--rt-priority N] [--json] [--quiet]\n"
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
		"  -R, --resv ID        the reservation the stream runs under (checked, and\n"
		"                       claimed: cwctl resv claim)\n"
		"      --reserve        reserve RATE and SIZE through the control socket for\n"
		"                       the export's partition, and release it at the end\n"
		"  -s, --socket PATH    control socket (default /run/clockwise/control)\n"
		"  -D, --depth N        blocks in flight at most (default 4, or one more than\n"
		"                       the lead holds, 1-64): each block is requested at its\n"
		"                       release even while earlier ones are still on their\n"
		"                       way, as a player with a buffer does; 1 waits for\n"
		"                       each block before the next\n"
		"  -A, --ahead TIME     ask for each block up to TIME before its release, an\n"
		"                       allowance for the player's own wake-up (the daemon\n"
		"                       holds an early request until the stream's release);\n"
		"                       default: 50ms or a quarter period, the shorter; 0: at\n"
		"                       the release\n"
		"  -L, --lead TIME      each block is due TIME after it is asked for, as a\n"
		"                       player that starts playing TIME after its first\n"
		"                       request; default: the reservation's lead with --resv\n"
		"                       or --reserve (see cwctl resv show), else one period\n"
		"      --due disk|stream  with --reserve: when the daemon makes each block\n"
		"                       due (cwctl resv create --due); default disk\n"
		"      --start-at EPOCH  release the first block at this wall-clock time\n"
		"                       (seconds since 1970, e.g. $(date -d '+2 sec' +%%s.%%N)),\n"
		"                       connected and waiting until then, so that several\n"
		"                       players start together; refused if already past\n"
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
		{ "rt-priority", required_argument, NULL, 'p' }, { "depth", required_argument, NULL, 'D' },
		{ "lead", required_argument, NULL, 'L' }, { "due", required_argument, NULL, 'U' },
		{ "ahead", required_argument, NULL, 'A' },
		{ "start-at", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' }, { "version", no_argument, NULL, 'V' }, { 0 }
	};
	const char *env = getenv("CLOCKWISE_CONTROL");
	char *end;
	int c;

	memset(o, 0, sizeof(*o));
	o->socket = env && *env ? env : "/run/clockwise/control";
	o->depth = DEPTH_DEFAULT;
	o->ahead_ns = -1;
	while ((c = getopt_long(argc, argv, "r:b:d:o:R:s:p:D:L:A:jqhV", lo, NULL)) != -1) {
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
		case 'D': {
			unsigned long v;

			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (!*optarg || *end || errno || v < 1 || v > DEPTH_MAX) {
				fprintf(stderr, "cwstream: --depth \"%s\": expected 1 to %d\n", optarg,
					DEPTH_MAX);
				return -1;
			}
			o->depth = (unsigned)v;
			o->depth_set = true;
			break;
		}
		case 'L':
			if (cw_units_parse_duration(optarg, CW_UNITS_S, &o->lead_ns) < 0 ||
			    o->lead_ns <= 0) {
				fprintf(stderr, "cwstream: --lead \"%s\": expected "
					CW_UNITS_DURATION_HELP ", more than 0\n", optarg);
				return -1;
			}
			break;
		case 'A':
			if (cw_units_parse_duration(optarg, CW_UNITS_S, &o->ahead_ns) < 0 ||
			    o->ahead_ns < 0) {
				fprintf(stderr, "cwstream: --ahead \"%s\": expected "
					CW_UNITS_DURATION_HELP ", 0 or more\n", optarg);
				return -1;
			}
			break;
		case 'U': {
			enum cw_admit_due due;

			if (cw_admit_due_parse(optarg, &due) < 0) {
				fprintf(stderr, "cwstream: --due \"%s\": expected disk or stream\n",
					optarg);
				return -1;
			}
			o->due = optarg;
			break;
		}
		case 'T': {
			double v;

			errno = 0;
			v = strtod(optarg, &end);
			if (!*optarg || *end || errno || !(v > 0) || v > 9e9) {
				fprintf(stderr, "cwstream: --start-at \"%s\": expected seconds since "
					"1970 (as date +%%s.%%N prints)\n", optarg);
				return -1;
			}
			o->start_at_ns = (int64_t)(v * 1e9);
			break;
		}
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
	if (o->due && !o->reserve) {
		fprintf(stderr, "cwstream: --due needs --reserve\n");
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

/* Reserves rate and block on the partition behind export_name; its id
 * and lead. */
static int reserve(const struct opts *o, const char *export_name, uint64_t *ret_id,
		   int64_t *ret_lead_ns)
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
	if (o->due)
		json_object_object_add(args, "due", json_object_new_string(o->due));
	if (control_call(o->socket, CW_CTL_CMD_RESV_CREATE, args, &rep) < 0)
		return -1;
	*ret_id = (uint64_t)json_object_get_int64(jget(rep.result, "id"));
	*ret_lead_ns = json_object_get_int64(jget(rep.result, "lead_ns"));
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

/* --resv ID: the reservation must exist and cover the stream's rate;
 * its lead. */
static int check_resv(const struct opts *o, int64_t *ret_lead_ns)
{
	struct cw_ctl_reply rep;
	json_object *args = json_object_new_object();
	uint64_t rate, block;

	json_object_object_add(args, "id", json_object_new_int64((int64_t)o->resv));
	if (control_call(o->socket, CW_CTL_CMD_RESV_SHOW, args, &rep) < 0)
		return -1;
	rate = (uint64_t)json_object_get_int64(jget(rep.result, "rate"));
	block = (uint64_t)json_object_get_int64(jget(rep.result, "block"));
	*ret_lead_ns = json_object_get_int64(jget(rep.result, "lead_ns"));
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

/* --resv ID: only this process's connections may hold the real-time
 * priority of the reservation's export (cwctl resv claim), so that no
 * other client of the export takes it first.  Not fatal: the stream
 * plays, the priority then the first asker's. */
static void claim_resv(const struct opts *o)
{
	struct cw_ctl_reply rep;
	json_object *args = json_object_new_object();

	json_object_object_add(args, "id", json_object_new_int64((int64_t)o->resv));
	json_object_object_add(args, "pid", json_object_new_int64(getpid()));
	if (control_call(o->socket, CW_CTL_CMD_RESV_CLAIM, args, &rep) < 0) {
		fprintf(stderr, "cwstream: warning: reservation %" PRIu64 " not claimed: another "
			"client of its export may hold its real-time priority\n", o->resv);
		return;
	}
	cw_ctl_reply_done(&rep);
}

/* ---- the stream ---------------------------------------------------------- */

/* A block on its way: requested (in pieces of at most max_req) at start,
 * done when its last piece is answered. */
struct slot {
	uint64_t i, off;
	int64_t release, start, done;	/* done: 0 while a piece is out */
	int64_t freed;			/* when the block before in this slot was done with */
	unsigned pending;		/* pieces not answered yet */
	int err;			/* the first piece's error (errno) */
	char *buf;
};

static int piece_done(void *user, int *error)
{
	struct slot *sl = user;

	if (*error && !sl->err)
		sl->err = *error;
	if (--sl->pending == 0)
		sl->done = cw_now_ns();
	return 1;	/* retire the command */
}

/* Requests block sl->i: every piece queued on h; -1 with libnbd's error. */
static int block_issue(struct nbd_handle *h, bool record, struct slot *sl, uint64_t len,
		       uint64_t max_req)
{
	char *buf = sl->buf;
	uint64_t off = sl->off;

	sl->pending = (unsigned)((len + max_req - 1) / max_req);
	sl->done = 0;
	sl->err = 0;
	while (len) {
		uint64_t n = len < max_req ? len : max_req;
		nbd_completion_callback cb = { .callback = piece_done, .user_data = sl };
		int64_t r = record ? nbd_aio_pwrite(h, buf, n, off, cb, 0)
				   : nbd_aio_pread(h, buf, n, off, cb, 0);

		if (r < 0)
			return -1;
		buf += n;
		off += n;
		len -= n;
	}
	return 0;
}

/* Real-time priority and locked memory, taken once everything is set up:
 * locking a process's memory faults in all of it, tens of milliseconds
 * of CPU that at real-time priority held back other streams already
 * playing (late blocks at the start of a run of thirteen).  What is
 * resident stays so; the rest is locked as it is touched (MCL_ONFAULT),
 * which kept each player at 217 MiB locked otherwise. */
static void go_realtime(int prio)
{
	struct sched_param sp = { .sched_priority = prio };

	if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) < 0)
		fprintf(stderr, "cwstream: cannot lock its memory: %s\n", strerror(errno));
	if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
		fprintf(stderr, "cwstream: --rt-priority %d: %s\n", prio, strerror(errno));
}

static void free_slots(struct slot *slots, unsigned n)
{
	for (unsigned k = 0; slots && k < n; k++)
		free(slots[k].buf);
	free(slots);
}

/* Waits until the socket is ready or until t_ns (0: no limit) and lets
 * libnbd move; -1 with libnbd's error. */
static int wait_io(struct nbd_handle *h, int64_t t_ns)
{
	struct pollfd pfd = { .fd = nbd_aio_get_fd(h) };
	unsigned dir = nbd_aio_get_direction(h);
	struct timespec ts, *tsp = NULL;
	int64_t left;

	if (pfd.fd < 0)
		return -1;
	if (dir & LIBNBD_AIO_DIRECTION_READ)
		pfd.events |= POLLIN;
	if (dir & LIBNBD_AIO_DIRECTION_WRITE)
		pfd.events |= POLLOUT;
	if (t_ns) {
		left = t_ns - cw_now_ns();
		if (left < 0)
			left = 0;
		ts = (struct timespec){ left / CW_NS_PER_S, left % CW_NS_PER_S };
		tsp = &ts;
	}
	if (ppoll(&pfd, 1, tsp, NULL) < 0)
		return errno == EINTR ? 0 : -1;
	if ((pfd.revents & (POLLIN | POLLHUP | POLLERR)) && nbd_aio_notify_read(h) < 0)
		return -1;
	if ((pfd.revents & POLLOUT) && nbd_aio_notify_write(h) < 0)
		return -1;
	return 0;
}

static void sleep_until(int64_t t_ns)
{
	struct timespec ts = { t_ns / CW_NS_PER_S, t_ns % CW_NS_PER_S };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR && !interrupted)
		;
}

/* A late block, from the client's side: its request took longer than the
 * lead from the moment it was sent, or from its release if it was sent
 * ahead of it (round_trip: the server or the way
 * to it and back), or it was requested late because --depth blocks were
 * still on their way at its release (behind: a late block's wake), or
 * the client itself did not run when the block was due (wakeup). */
static enum miss_cause miss_cause(int64_t release, int64_t freed, int64_t start,
				  int64_t done, int64_t lead)
{
	/* a block asked for ahead (--ahead) waited for its release first */
	if (done - CW_MAX(start, release) > lead)
		return MISS_ROUND_TRIP;
	if (freed > release)
		return MISS_BEHIND;
	if (start - release > WAKEUP_SLACK_NS)
		return MISS_WAKEUP;
	return MISS_ROUND_TRIP;
}

static void print_block(const struct opts *o, uint64_t i, uint64_t off, int64_t latency,
			int64_t late, int64_t start_late, int64_t round_trip, const char *cause)
{
	char a[CW_UNITS_BUF], b[CW_UNITS_BUF];

	if (o->quiet)
		return;
	if (o->json)
		printf("{\"block\":%" PRIu64 ",\"offset\":%" PRIu64 ",\"latency_ns\":%" PRId64
		       ",\"late_ns\":%" PRId64 ",\"start_late_ns\":%" PRId64
		       ",\"round_trip_ns\":%" PRId64 ",\"on_time\":%s%s%s%s}\n", i, off, latency,
		       late, start_late, round_trip, late <= 0 ? "true" : "false",
		       cause ? ",\"cause\":\"" : "", cause ? cause : "", cause ? "\"" : "");
	else if (late <= 0)
		printf("block %" PRIu64 " at %" PRIu64 ": %s, on time (%s to spare)\n", i, off,
		       cw_units_format_duration(latency, a), cw_units_format_duration(-late, b));
	else
		printf("block %" PRIu64 " at %" PRIu64 ": %s, LATE by %s (%s)\n", i, off,
		       cw_units_format_duration(latency, a), cw_units_format_duration(late, b),
		       cause);
}

static void print_summary(const struct opts *o, const struct totals *t, int64_t period,
			  int64_t lead, int64_t ahead, uint64_t resv)
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
		       ",\"period_ns\":%" PRId64 ",\"lead_ns\":%" PRId64 ",\"ahead_ns\":%" PRId64
		       ",\"bytes\":%" PRIu64
		       ",\"rate\":%" PRIu64
		       ",\"achieved_rate\":%" PRIu64 ",\"worst_start_late_ns\":%" PRId64
		       ",\"worst_round_trip_ns\":%" PRId64 ",\"round_trip_p50_ns\":%" PRIu64
		       ",\"round_trip_p99_ns\":%" PRIu64 ",\"miss_causes\":{",
		       o->record ? "record" : "play", t->blocks, t->misses, t->worst_late_ns, jitter,
		       (int64_t)llround(mean), t->max_latency_ns, period, lead, ahead, t->bytes, o->rate,
		       achieved,
		       t->worst_start_late_ns, t->worst_round_trip_ns,
		       cw_hist_quantile(t->round_trips, 0.5), cw_hist_quantile(t->round_trips, 0.99));
		for (int k = 0; k < MISS_CAUSES; k++)
			printf("%s\"%s\":%" PRIu64, k ? "," : "", miss_cause_name[k], t->miss_by[k]);
		printf("},\"resv\":");
		if (resv)
			printf("%" PRIu64, resv);
		else
			printf("null");
		printf(",\"interrupted\":%s}}\n", interrupted ? "true" : "false");
		return;
	}
	printf("%s: %" PRIu64 " blocks of %s every %s (%s), each due %s after its request, %"
	       PRIu64 " missed\n", o->record ? "record" : "play", t->blocks,
	       cw_units_format_size(o->block, a), cw_units_format_duration(period, b),
	       cw_units_format_rate(o->rate, c), cw_units_format_duration(lead, d), t->misses);
	if (t->worst_late_ns > 0)
		snprintf(a, sizeof(a), "%s", cw_units_format_duration(t->worst_late_ns, d));
	else
		snprintf(a, sizeof(a), "none");
	printf("worst lateness %s, jitter %s, mean latency %s, max latency %s, achieved %s\n", a,
	       cw_units_format_duration(jitter, e), cw_units_format_duration((int64_t)llround(mean), b),
	       cw_units_format_duration(t->max_latency_ns, d), cw_units_format_rate(achieved, c));
	printf("round trip (request to reply) p50 %s, p99 %s\n",
	       cw_units_format_duration((int64_t)cw_hist_quantile(t->round_trips, 0.5), a),
	       cw_units_format_duration((int64_t)cw_hist_quantile(t->round_trips, 0.99), b));
	if (t->misses)
		printf("late blocks: %" PRIu64 " took longer than the lead from their request "
		       "(round trip), %" PRIu64 " started late behind a late block, %" PRIu64
		       " started late because the client was not running (wakeup); worst start "
		       "%s after release, worst round trip %s\n", t->miss_by[MISS_ROUND_TRIP],
		       t->miss_by[MISS_BEHIND], t->miss_by[MISS_WAKEUP],
		       cw_units_format_duration(t->worst_start_late_ns, a),
		       cw_units_format_duration(t->worst_round_trip_ns, b));
}

int main(int argc, char **argv)
{
	struct opts o;
	struct totals t = { .worst_late_ns = INT64_MIN };
	struct nbd_handle *h;
	int64_t size, period, t0, max_req, lead, ahead, resv_lead = 0;
	uint64_t resv_made = 0, nblocks;
	struct slot *slots;
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
		/* Refused now, before anything is set up; taken only when the
		 * stream starts (go_realtime). */
		struct sched_param sp = { .sched_priority = o.rt_priority }, normal = { 0 };

		if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0) {
			fprintf(stderr, "cwstream: --rt-priority %d: %s\n", o.rt_priority,
				strerror(errno));
			return 1;
		}
		sched_setscheduler(0, SCHED_OTHER, &normal);
	}
	/* --resv: checked and claimed before the connection is made, so that
	 * it is the claimant's from its first request */
	if (o.resv) {
		if (check_resv(&o, &resv_lead) < 0)
			return 1;
		claim_resv(&o);
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

		if (!name || reserve(&o, name, &resv_made, &resv_lead) < 0) {
			free(name);
			nbd_close(h);
			return 1;
		}
		free(name);
	}
	/* The lead: how long before it is needed each block is asked for. */
	lead = o.lead_ns ? o.lead_ns : CW_MAX(resv_lead, period);
	if (o.lead_ns && o.lead_ns < resv_lead) {
		char a[CW_UNITS_BUF], b[CW_UNITS_BUF];

		fprintf(stderr, "cwstream: warning: --lead %s is shorter than the reservation's "
			"lead %s: the daemon may serve a block after this client needs it\n",
			cw_units_format_duration(o.lead_ns, a),
			cw_units_format_duration(resv_lead, b));
	}
	ahead = o.ahead_ns >= 0 ? o.ahead_ns : CW_MIN(AHEAD_DEFAULT_NS, period / 4);
	/* Blocks asked for but not yet needed are in flight together. */
	if (!o.depth_set && lead + ahead > period) {
		int64_t want = (lead + ahead + period - 1) / period + 1;

		o.depth = (unsigned)CW_MIN(CW_MAX(want, (int64_t)o.depth), DEPTH_MAX);
	}
	slots = calloc(o.depth, sizeof(*slots));
	for (unsigned k = 0; slots && k < o.depth; k++) {
		slots[k].buf = malloc(o.block);
		if (!slots[k].buf)
			break;
		memset(slots[k].buf, 0xc5, o.block);
	}
	if (!slots || !slots[o.depth - 1].buf) {
		fprintf(stderr, "cwstream: out of memory for %u blocks of %" PRIu64 " bytes\n",
			o.depth, o.block);
		nbd_close(h);
		free_slots(slots, o.depth);
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (o.rt_priority)
		go_realtime(o.rt_priority);

	t0 = cw_now_ns();
	if (o.start_at_ns) {
		struct timespec wall, at;
		int64_t wait;

		clock_gettime(CLOCK_REALTIME, &wall);
		wait = o.start_at_ns - ((int64_t)wall.tv_sec * CW_NS_PER_S + wall.tv_nsec);
		if (wait < 0) {
			fprintf(stderr, "cwstream: --start-at is %.3f s in the past: the stream "
				"would start behind its schedule\n", (double)-wait / 1e9);
			status = 1;
			goto out;
		}
		/* on the monotonic clock the schedule keeps, whatever the
		 * wall clock does from now on */
		t0 += wait;
		at = (struct timespec){ .tv_sec = t0 / CW_NS_PER_S, .tv_nsec = t0 % CW_NS_PER_S };
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR &&
		       !interrupted)
			;
	}
	for (uint64_t next = 0, first = 0; (next < nblocks && !interrupted) || first < next; ) {
		uint64_t span = ((uint64_t)size - o.offset) / o.block;
		int64_t now = cw_now_ns(), due = 0;
		bool moved = false;

		/* Request every block released by now (or within the
		 * allowance), --depth at most in flight. */
		while (next < nblocks && !interrupted && next - first < o.depth &&
		       t0 + (int64_t)next * period - ahead <= now) {
			struct slot *sl = &slots[next % o.depth];

			sl->i = next;
			sl->off = o.offset + (next % span) * o.block;
			sl->release = t0 + (int64_t)next * period;
			sl->start = cw_now_ns();
			if (o.record)
				memcpy(sl->buf, &next, sizeof(next));	/* each recorded block differs */
			if (block_issue(h, o.record, sl, o.block, (uint64_t)max_req) < 0) {
				fprintf(stderr, "cwstream: block %" PRIu64 " at %" PRIu64 ": %s\n",
					next, sl->off, nbd_get_error());
				status = 1;
				goto out;
			}
			next++;
			moved = true;
		}
		/* Account for the blocks done, in order. */
		while (first < next && slots[first % o.depth].done) {
			struct slot *sl = &slots[first % o.depth];
			int64_t deadline = sl->release + lead, latency, late, round_trip;
			const char *cause = NULL;

			if (sl->err) {
				fprintf(stderr, "cwstream: block %" PRIu64 " at %" PRIu64 ": %s\n",
					sl->i, sl->off, strerror(sl->err));
				status = 1;
				goto out;
			}
			/* From the release: a late start (after a late block) counts. */
			latency = sl->done - sl->release;
			late = sl->done - deadline;
			round_trip = sl->done - sl->start;
			t.blocks++;
			t.bytes += o.block;
			if (late > 0) {
				enum miss_cause mc = miss_cause(sl->release, sl->freed, sl->start,
								sl->done, lead);

				t.misses++;
				t.miss_by[mc]++;
				cause = miss_cause_name[mc];
			}
			if (sl->start - sl->release > t.worst_start_late_ns)
				t.worst_start_late_ns = sl->start - sl->release;
			if (round_trip > t.worst_round_trip_ns)
				t.worst_round_trip_ns = round_trip;
			t.round_trips[cw_hist_index(round_trip > 0 ? (uint64_t)round_trip : 0)]++;
			if (late > t.worst_late_ns)
				t.worst_late_ns = late;
			if (latency > t.max_latency_ns)
				t.max_latency_ns = latency;
			t.lat_sum += (double)latency;
			t.lat_sq += (double)latency * (double)latency;
			print_block(&o, sl->i, sl->off, latency, late, sl->start - sl->release,
				    round_trip, cause);
			sl->freed = cw_now_ns();
			first++;
			moved = true;
		}
		if (moved)
			continue;
		if (next < nblocks && !interrupted && next - first < o.depth)
			due = t0 + (int64_t)next * period - ahead;
		if (first == next) {
			if (!due)
				break;
			sleep_until(due);
			continue;
		}
		if (wait_io(h, due) < 0) {
			fprintf(stderr, "cwstream: %s: %s\n", o.uri, nbd_get_error());
			status = 1;
			goto out;
		}
	}
out:
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
	free_slots(slots, o.depth);
	print_summary(&o, &t, period, lead, ahead, resv_made ? resv_made : o.resv);
	if (resv_made)
		release(&o, resv_made);
	if (status)
		return status;
	return t.misses ? EXIT_MISSES : 0;
}
