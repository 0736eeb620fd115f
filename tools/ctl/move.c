/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Moves (the server's are in daemon/control/control-move.c): disk evacuate,
 * disk replace, part move, part rebuild and the move commands; --watch
 * follows moves to their end.
 */
#include "config.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <clockwise/layout.h>
#include <clockwise/units.h>

#include "ctl/ctl.h"

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
	if (n < len && get(m, "differ"))
		n += (size_t)snprintf(buf + n, len - n, ", %s differ", gs(m, "differ"));
	else if (n < len && gi(m, "failed"))
		n += (size_t)snprintf(buf + n, len - n, ", %s unreadable", gs(m, "failed"));
	if (n < len && err && *json_object_get_string(err))
		snprintf(buf + n, len - n, ": %s", json_object_get_string(err));
}

void print_move(json_object *m)
{
	char line[512];

	move_line(m, line, sizeof(line));
	printf("%s\n", line);
}

void print_moves(json_object *a)
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

static void print_replacing(json_object *r)
{
	json_object *m = get(r, "moves");

	printf("replacing disk %s by %s: %zu move(s)\n", gs(r, "disk"), gs(r, "new"),
	       m ? json_object_array_length(m) : (size_t)0);
	print_moves(m);
}

static void print_rebuild(json_object *r)
{
	if (get(r, "id"))
		print_move(r);
	else
		printf("partition %s: every copy is in sync, or none can be read: nothing to "
		       "rebuild\n", gs(r, "part"));
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

/* A command that starts moves on the names it is given (keys[0..nk),
 * one operand each) with --watch and --interval (and --repair for part
 * scrub); *ret_watch says whether it watched them. */
static int named_moves(int argc, char **argv, enum cw_ctl_cmd cmd, const char *const *keys,
		       int nk, const char *expected, print_fn print, bool *ret_watch)
{
	static const struct option lo[] = { HELP_OPT, WATCH_OPTS, { 0 } };
	static const struct option lo_repair[] = {
		HELP_OPT, WATCH_OPTS, { "repair", no_argument, NULL, 'r' }, { 0 }
	};
	bool scrub = cmd == CW_CTL_CMD_PART_SCRUB;
	json_object *a = args_new();
	int64_t every = 0;
	bool watch = false;
	int o;

	while ((o = next_opt(argc, argv, scrub ? "hwi:r" : "hwi:", scrub ? lo_repair : lo)) != -1)
		if (o == 'r')
			json_object_object_add(a, "repair", json_object_new_boolean(1));
		else if (watch_opt(o, optarg, &watch, &every))
			return json_object_put(a), EXIT_USAGE;
	if (argc - optind != nk)
		return json_object_put(a), usage_error("expected %s", expected);
	for (int i = 0; i < nk; i++)
		put_str(a, keys[i], argv[optind + i]);
	if (ret_watch)
		*ret_watch = watch;
	return start_moves(cmd, a, watch_every(watch, every), print);
}

int c_disk_evacuate(int argc, char **argv)
{
	static const char *const keys[] = { "name" };

	return named_moves(argc, argv, CW_CTL_CMD_DISK_EVACUATE, keys, 1, "one disk NAME",
			   print_evacuating, NULL);
}

int c_disk_replace(int argc, char **argv)
{
	static const char *const keys[] = { "name", "new" };
	json_object *rm;
	bool watch = false;
	int r = named_moves(argc, argv, CW_CTL_CMD_DISK_REPLACE, keys, 2, "the disks OLD and NEW",
			    print_replacing, &watch);

	if (r || !watch)
		return r;
	/* Every copy left it: the old disk leaves the pool. */
	rm = args_new();
	put_str(rm, "name", argv[argc - 2]);
	return call(CW_CTL_CMD_DISK_REMOVE, rm, print_removed);
}

int c_part_rebuild(int argc, char **argv)
{
	static const char *const keys[] = { "name" };

	return named_moves(argc, argv, CW_CTL_CMD_PART_REBUILD, keys, 1, "one partition NAME",
			   print_rebuild, NULL);
}

static void print_scrub(json_object *r)
{
	if (get(r, "id"))
		print_move(r);
	else
		printf("partition %s: no copy in sync to compare\n", gs(r, "part"));
}

int c_part_scrub(int argc, char **argv)
{
	static const char *const keys[] = { "name" };

	return named_moves(argc, argv, CW_CTL_CMD_PART_SCRUB, keys, 1, "one partition NAME",
			   print_scrub, NULL);
}

int c_part_move(int argc, char **argv)
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

int c_move_list(int argc, char **argv)
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
