/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What every cwctl command uses: cwctl's own errors (bad usage, no
 * server) in the form of the server's; the getters and formats the
 * printers read a reply with; one request to the server and its reply;
 * a command's options and arguments; and the commands that are one
 * request with at most one argument (c_simple).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <clockwise/units.h>

#include "ctl/ctl.h"

const char *socket_path = "/run/clockwise/control";
bool json_out;
const char *cmd_name = "cwctl";
const struct command *current;
volatile sig_atomic_t interrupted;

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

int usage_error(const char *fmt, ...)
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

json_object *get(json_object *o, const char *k)
{
	json_object *v;

	return o && json_object_object_get_ex(o, k, &v) ? v : NULL;
}

const char *gs(json_object *o, const char *k)
{
	json_object *v = get(o, k);

	return v ? json_object_get_string(v) : "-";
}

int64_t gi(json_object *o, const char *k)
{
	return json_object_get_int64(get(o, k));
}

char *fsize(json_object *o, const char *k, char *buf)
{
	return get(o, k) ? cw_units_format_size((uint64_t)gi(o, k), buf) : strcpy(buf, "-");
}

char *frate(json_object *o, const char *k, char *buf)
{
	return get(o, k) ? cw_units_format_rate((uint64_t)gi(o, k), buf) : strcpy(buf, "-");
}

char *fdur(json_object *o, const char *k, char *buf)
{
	return get(o, k) ? cw_units_format_duration(gi(o, k), buf) : strcpy(buf, "-");
}

char *frate_floor(json_object *o, const char *k, char *buf)
{
	json_object *v = get(o, k);

	if (!v || json_object_is_type(v, json_type_null))
		return strcpy(buf, "-");
	return cw_units_format_rate(cw_units_floor_rate((uint64_t)json_object_get_int64(v)), buf);
}

void pct(char *buf, size_t len, json_object *o, const char *k)
{
	if (get(o, k))
		snprintf(buf, len, "%.1f%%", 100 * json_object_get_double(get(o, k)));
	else
		snprintf(buf, len, "-");
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

/* Sends one request: 0 with *rep a result (cw_ctl_reply_done it), or
 * the exit status after saying why. */
int fetch(enum cw_ctl_cmd cmd, json_object *args, struct cw_ctl_reply *rep)
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
void print_result(struct cw_ctl_reply *rep, print_fn print)
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

/* Sends one request; prints the result with print (or as JSON) and
 * returns the exit status. */
int call(enum cw_ctl_cmd cmd, json_object *args, print_fn print)
{
	struct cw_ctl_reply rep;
	int r = fetch(cmd, args, &rep);

	if (r)
		return r;
	print_result(&rep, print);
	return 0;
}

/* ---- argument helpers -------------------------------------------------- */

json_object *args_new(void)
{
	json_object *a = json_object_new_object();

	if (!a) {
		fprintf(stderr, "%s: out of memory\n", cmd_name);
		exit(EXIT_REFUSED);
	}
	return a;
}

void put_str(json_object *a, const char *k, const char *v)
{
	json_object_object_add(a, k, json_object_new_string(v));
}

void put_u64(json_object *a, const char *k, uint64_t v)
{
	json_object_object_add(a, k, json_object_new_int64((int64_t)v));
}

bool size_arg(const char *what, const char *s, uint64_t *ret)
{
	int r = cw_units_parse_size(s, ret);

	if (r < 0)
		usage_error("%s \"%s\": %s; expected " CW_UNITS_SIZE_HELP, what, s,
			    r == -ERANGE ? "too large" : "not a size");
	return r == 0;
}

bool id_arg(const char *s, uint64_t *ret)
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

static void command_help(const struct command *c)
{
	printf("Usage: cwctl [--socket PATH] [--json] %s%s%s %s\n\n%s", c->group ? c->group : "",
	       c->group ? " " : "", c->name, c->synopsis, c->help);
}

/* getopt_long over a command's own options; -h/--help prints its help.
 * Returns the option, -1 at the end, or '?' after printing an error. */
int next_opt(int argc, char **argv, const char *shortopts, const struct option *longopts)
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

/* Commands without options but with n positional words. */
int positional(int argc, char **argv, int n, char ***ret)
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

/* ---- the commands every family has ------------------------------------ */

/* A command with no options and at most one argument: a name, or a
 * reservation id. */
int c_simple(int argc, char **argv)
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

void print_removed(json_object *r)
{
	printf("removed %s\n", gs(r, "name"));
}

/* NAME [--force], for part delete and export remove. */
int name_force(int argc, char **argv, enum cw_ctl_cmd cmd, const char *what)
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

/* For --watch (stats, moves): SIGINT or SIGTERM ends the watching, and
 * cwctl ends as after its last interval. */
void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}
