/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwised.conf: libconfig syntax, checked against a schema (one table of
 * keys per group).  The first problem stops loading with
 * "FILE:LINE: <what is wrong>; expected <what>"; nothing is half applied,
 * because the result is only handed out when the whole file is good.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <sys/un.h>
#include <unistd.h>
#include <libconfig.h>

#include <clockwise/admit.h>
#include <clockwise/layout.h>
#include <clockwise/mover.h>
#include <clockwise/units.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "daemon/conf.h"
#include "daemon/nbd/nbd-server.h"

#define NAME_MAX_BYTES 63	/* layout's CW_NAME_MAX */
#define MODEL_MAX_BYTES 31	/* model's CW_MODEL_NAME_MAX - 1 */
#define QUEUE_DEPTH_MAX 4096
#define SLOT_US_MAX 1000000	/* one second */
#define LANES_MAX 64
#define BLOCK_SIZE_MIN 512
#define BLOCK_SIZE_MAX 65536
#define MAX_REQUEST_MAX (32u << 20)
#define LISTEN_MAX CWD_LISTEN_MAX

#define DEFAULT_QUEUE_DEPTH 32
#define DEFAULT_MOVER_DEPTH 16
#define DEFAULT_RT_PRIORITY 10
#define DEFAULT_BUSY_POLL_US 50
#define DEFAULT_STALL_PROBE_US 1000
#define STALL_PROBE_US_MAX 100000
#define BUSY_POLL_US_MAX 10000
#define DEFAULT_SLOT_US_HDD 1000
#define DEFAULT_SLOT_US_SSD 100

struct parse {
	const char *file;	/* for messages when libconfig has no file name */
	char *error;
	struct cwd_config *c;
	/* Settings checked once the whole file is read, since libconfig
	 * keeps no order between them. */
	const config_setting_t *listen;
	/* Each TCP address (for messages); the TLS mode each listener names
	 * (plus one, 0: none), and listen.tls for the others. */
	const config_setting_t *tcp_setting[LISTEN_MAX];
	int unix_tls[LISTEN_MAX], tcp_tls[LISTEN_MAX];
	int listen_tls;
	const config_setting_t *listen_tls_setting;
	const config_setting_t *limit_per_user;	/* set explicitly */
	/* Per disk: where its optional settings were, for cross-checks. */
	const config_setting_t **disk_lanes;
	const config_setting_t **disk_policy;
	const config_setting_t **disk_be_order;
};

/* name -> value tables for enumerated settings; the first spelling of
 * each value is the canonical one shown in messages. */
struct choice {
	const char *name;
	int value;
	bool alias;
};

static const struct choice policies[] = {
	{ "delta-l", CWD_POLICY_DELTA_L, false },
	{ "edf", CWD_POLICY_EDF, false },
	{ "lst", CWD_POLICY_LST, false },
	{ "dynamic", CWD_POLICY_DYNAMIC, false },
	{ NULL, 0, false },
};

static const struct choice be_orders[] = {
	{ "fifo", CWD_BE_FIFO, false },
	{ "rbfq", CWD_BE_RBFQ, false },
	{ "sfc", CWD_BE_SFC, false },
	{ NULL, 0, false },
};

static const struct choice tiers[] = {
	{ "hdd", CW_TIER_HDD, false },
	{ "ssd", CW_TIER_SSD, false },
	{ "rbd", CW_TIER_RBD, false },
	{ NULL, 0, false },
};

static const struct choice engines[] = {
	{ "io_uring", CW_IO_URING, false },
	{ "libaio", CW_IO_AIO, false },
	{ NULL, 0, false },
};

/* exports.activation_mode: LVM's words for the same choice. */
static const struct choice activation_modes[] = {
	{ "complete", 0, false },
	{ "partial", 1, false },
	{ NULL, 0, false },
};

static const struct choice log_levels[] = {
	{ "err", LOG_ERR, false },
	{ "error", LOG_ERR, true },
	{ "warning", LOG_WARNING, false },
	{ "warn", LOG_WARNING, true },
	{ "notice", LOG_NOTICE, false },
	{ "info", LOG_INFO, false },
	{ "debug", LOG_DEBUG, false },
	{ NULL, 0, false },
};

static const char *choice_name(const struct choice *t, int value)
{
	for (; t->name; t++)
		if (t->value == value && !t->alias)
			return t->name;
	return NULL;
}

const char *cwd_config_policy_name(enum cwd_config_policy p)
{
	return choice_name(policies, (int)p);
}

const char *cwd_config_be_order_name(enum cwd_config_be_order o)
{
	return choice_name(be_orders, (int)o);
}

const char *cwd_config_log_level_name(int level)
{
	return choice_name(log_levels, level);
}

/* "disks[2].tier", "listen.tcp[0]": where a setting sits in the file. */
static void setting_path(const config_setting_t *s, char *buf, size_t n)
{
	const config_setting_t *parent = s->parent;
	size_t len;

	buf[0] = '\0';
	if (!parent)
		return;
	setting_path(parent, buf, n);
	len = strlen(buf);
	if (config_setting_is_group(parent))
		snprintf(buf + len, n - len, "%s%s", len ? "." : "", s->name ? s->name : "");
	else
		snprintf(buf + len, n - len, "[%d]", config_setting_index(s));
}

static const char *type_name(const config_setting_t *s)
{
	switch (config_setting_type(s)) {
	case CONFIG_TYPE_INT:
	case CONFIG_TYPE_INT64:
		return "an integer";
	case CONFIG_TYPE_FLOAT:
		return "a number with a fraction";
	case CONFIG_TYPE_STRING:
		return "a string";
	case CONFIG_TYPE_BOOL:
		return "a boolean";
	case CONFIG_TYPE_GROUP:
		return "a group";
	case CONFIG_TYPE_ARRAY:
		return "an array";
	case CONFIG_TYPE_LIST:
		return "a list";
	}
	return "of no type";
}

/* Records the first problem, at s's line: "FILE:LINE: " + fmt. */
__attribute__((format(printf, 3, 4)))
static int fail(struct parse *p, const config_setting_t *s, const char *fmt, ...)
{
	_cleanup_free_ char *what = NULL;
	const char *file = s && config_setting_source_file(s) ? config_setting_source_file(s) : p->file;
	va_list ap;
	int r;

	if (p->error)
		return -EINVAL;
	va_start(ap, fmt);
	r = vasprintf(&what, fmt, ap);
	va_end(ap);
	if (r < 0)
		return -ENOMEM;
	if (asprintf(&p->error, "%s:%u: %s", file, s ? config_setting_source_line(s) : 0, what) < 0) {
		p->error = NULL;
		return -ENOMEM;
	}
	return -EINVAL;
}

#define PATH_BUF 256
#define WHERE(s) ({ static __thread char _w[PATH_BUF]; setting_path((s), _w, sizeof(_w)); _w; })

static int wrong_type(struct parse *p, const config_setting_t *s, const char *expected)
{
	return fail(p, s, "%s is %s; expected %s", WHERE(s), type_name(s), expected);
}

static int get_int(struct parse *p, const config_setting_t *s, long long min, long long max,
		   long long *ret)
{
	long long v;

	if (config_setting_type(s) != CONFIG_TYPE_INT && config_setting_type(s) != CONFIG_TYPE_INT64)
		return fail(p, s, "%s is %s; expected an integer from %lld to %lld", WHERE(s),
			    type_name(s), min, max);
	v = config_setting_get_int64(s);
	if (v < min || v > max)
		return fail(p, s, "%s = %lld is out of range; expected an integer from %lld to %lld",
			    WHERE(s), v, min, max);
	*ret = v;
	return 0;
}

static int get_bool(struct parse *p, const config_setting_t *s, bool *ret)
{
	if (config_setting_type(s) != CONFIG_TYPE_BOOL)
		return wrong_type(p, s, "true or false");
	*ret = config_setting_get_bool(s);
	return 0;
}

static int get_string(struct parse *p, const config_setting_t *s, const char *expected,
		      const char **ret)
{
	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return wrong_type(p, s, expected);
	*ret = config_setting_get_string(s);
	return 0;
}

static int get_choice(struct parse *p, const config_setting_t *s, const struct choice *t,
		      const char *what, int *ret)
{
	char expected[256] = "";
	const struct choice *c;
	const char *v = NULL;
	size_t len = 0;
	int r;

	for (c = t; c->name; c++)
		if (!c->alias) {
			len += (size_t)snprintf(expected + len, sizeof(expected) - len, "%s\"%s\"",
						len == 0 ? "" : c[1].name ? ", " : " or ", c->name);
			if (len >= sizeof(expected))
				len = sizeof(expected) - 1;
		}
	r = get_string(p, s, expected, &v);
	if (r < 0)
		return r;
	for (c = t; c->name; c++)
		if (!strcmp(v, c->name)) {
			*ret = c->value;
			return 0;
		}
	return fail(p, s, "%s = \"%s\" is not %s; expected %s", WHERE(s), v, what, expected);
}

/* An absolute path of at most max bytes, copied into *ret. */
static int get_path(struct parse *p, const config_setting_t *s, size_t max, char **ret)
{
	const char *v = NULL;
	int r;

	r = get_string(p, s, "an absolute path in quotes", &v);
	if (r < 0)
		return r;
	if (v[0] != '/')
		return fail(p, s, "%s = \"%s\" is not an absolute path; expected a path starting with /",
			    WHERE(s), v);
	if (strlen(v) > max)
		return fail(p, s, "%s is %zu bytes long; expected an absolute path of at most %zu bytes",
			    WHERE(s), strlen(v), max);
	free(*ret);
	*ret = strdup(v);
	return *ret ? 0 : -ENOMEM;
}

/* Names of disks and models: [A-Za-z0-9._-], not starting with '.'. */
static bool name_ok(const char *v, size_t max)
{
	const char *q;

	for (q = v; *q; q++)
		if (!(*q >= 'a' && *q <= 'z') && !(*q >= 'A' && *q <= 'Z') &&
		    !(*q >= '0' && *q <= '9') && *q != '.' && *q != '_' && *q != '-')
			break;
	return !*q && v[0] != '\0' && v[0] != '.' && strlen(v) <= max;
}

static int get_name(struct parse *p, const config_setting_t *s, size_t max, char **ret)
{
	const char *v = NULL;
	int r;

	r = get_string(p, s, "a name in quotes", &v);
	if (r < 0)
		return r;
	if (!name_ok(v, max))
		return fail(p, s, "%s = \"%s\" is not a valid name; expected 1 to %zu of "
			    "A-Z a-z 0-9 . _ -, not starting with .", WHERE(s), v, max);
	free(*ret);
	*ret = strdup(v);
	return *ret ? 0 : -ENOMEM;
}

/* One key of a group and what parses its value into obj. */
struct key {
	const char *name;
	int (*parse)(struct parse *p, const config_setting_t *s, void *obj);
};

static int parse_group(struct parse *p, const config_setting_t *g, const struct key *keys, void *obj)
{
	int i, n, r;

	if (!config_setting_is_group(g))
		return wrong_type(p, g, "a group { name = value; ... }");
	n = config_setting_length(g);
	for (i = 0; i < n; i++) {
		const config_setting_t *s = config_setting_get_elem(g, (unsigned)i);
		const struct key *k;

		for (k = keys; k->name; k++)
			if (!strcmp(k->name, s->name))
				break;
		if (!k->name) {
			char expected[512], where[PATH_BUF];
			size_t len = 0;

			for (k = keys; k->name && len < sizeof(expected); k++)
				len += (size_t)snprintf(expected + len, sizeof(expected) - len, "%s%s",
							k == keys ? "" : k[1].name ? ", " : " or ",
							k->name);
			setting_path(g, where, sizeof(where));
			return fail(p, s, "unknown setting \"%s\"%s%s; expected %s", s->name,
				    where[0] ? " in " : "", where, expected);
		}
		r = k->parse(p, s, obj);
		if (r < 0)
			return r;
	}
	return 0;
}

/* A list of groups of at most max entries: its length in *ret_n. */
static int get_list(struct parse *p, const config_setting_t *s, const char *expected, int max,
		    int *ret_n)
{
	if (config_setting_type(s) != CONFIG_TYPE_LIST)
		return wrong_type(p, s, expected);
	*ret_n = config_setting_length(s);
	if (*ret_n > max)
		return fail(p, s, "%s has %d entries; expected at most %d", WHERE(s), *ret_n, max);
	return 0;
}


/* ---- top level ---- */

static int key_pool(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_path(p, s, 4095, &p->c->pool);
}

static int key_policy(struct parse *p, const config_setting_t *s, void *obj)
{
	int v, r = get_choice(p, s, policies, "a dispatch policy", &v);

	if (r == 0)
		p->c->policy = (enum cwd_config_policy)v;
	return r;
}

static int key_be_order(struct parse *p, const config_setting_t *s, void *obj)
{
	int v, r = get_choice(p, s, be_orders, "a best-effort order", &v);

	if (r == 0)
		p->c->be_order = (enum cwd_config_be_order)v;
	return r;
}

static int key_io_engine(struct parse *p, const config_setting_t *s, void *obj)
{
	int v, r = get_choice(p, s, engines, "an I/O engine", &v);

	if (r == 0)
		p->c->io_engine = (enum cw_io_kind)v;
	return r;
}

static int key_queue_depth(struct parse *p, const config_setting_t *s, void *obj)
{
	long long v;
	int r = get_int(p, s, 1, QUEUE_DEPTH_MAX, &v);

	if (r == 0)
		p->c->queue_depth = (unsigned)v;
	return r;
}

static int key_mover_depth(struct parse *p, const config_setting_t *s, void *obj)
{
	long long v;
	int r = get_int(p, s, 1, CW_MOVER_DEPTH_MAX, &v);

	if (r == 0)
		p->c->mover_depth = (unsigned)v;
	return r;
}

static int key_mover_share(struct parse *p, const config_setting_t *s, void *obj)
{
	long long v;
	int r = get_int(p, s, 1, 100, &v);

	if (r == 0)
		p->c->mover_share = (unsigned)v;
	return r;
}

static int key_rt_priority(struct parse *p, const config_setting_t *s, void *obj)
{
	long long v;
	int r = get_int(p, s, 0, 99, &v);

	(void)obj;
	if (r == 0)
		p->c->rt_priority = (unsigned)v;
	return r;
}

static int key_lock_memory(struct parse *p, const config_setting_t *s, void *obj)
{
	(void)obj;
	return get_bool(p, s, &p->c->lock_memory);
}

/* rt_cpus = [ 1, 3 ]: the CPUs the real-time threads may run on. */
static int key_rt_cpus(struct parse *p, const config_setting_t *s, void *obj)
{
	int n;

	(void)obj;
	if (config_setting_type(s) != CONFIG_TYPE_ARRAY)
		return wrong_type(p, s, "an array of CPU numbers, like [ 1, 3 ]");
	n = config_setting_length(s);
	if (n == 0)
		return fail(p, s, "%s is empty; expected at least one CPU number", WHERE(s));
	p->c->rt_cpus = 0;
	for (int i = 0; i < n; i++) {
		long long v;
		int r = get_int(p, config_setting_get_elem(s, (unsigned)i), 0, 63, &v);

		if (r < 0)
			return r;
		p->c->rt_cpus |= UINT64_C(1) << v;
	}
	return 0;
}

static int key_busy_poll_us(struct parse *p, const config_setting_t *s, void *obj)
{
	long long v;
	int r = get_int(p, s, 0, BUSY_POLL_US_MAX, &v);

	(void)obj;
	if (r == 0)
		p->c->busy_poll_us = (unsigned)v;
	return r;
}

static int key_stall_probe_us(struct parse *p, const config_setting_t *s, void *obj)
{
	long long v;
	int r = get_int(p, s, 0, STALL_PROBE_US_MAX, &v);

	(void)obj;
	if (r == 0)
		p->c->stall_probe_us = (unsigned)v;
	return r;
}

static int key_control_socket(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_path(p, s, sizeof(((struct sockaddr_un *)0)->sun_path) - 1, &p->c->control_socket);
}

/* Group names as getgrnam(3) takes them: the same characters as other
 * names here (a group missing at start is the daemon's business). */
static int key_control_read_group(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_name(p, s, 32, &p->c->control_read_group);
}

static int key_control_admin_group(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_name(p, s, 32, &p->c->control_admin_group);
}

static int key_control_idle_timeout_s(struct parse *p, const config_setting_t *s, void *obj)
{
	long long v;
	int r = get_int(p, s, 0, 3600, &v);

	(void)obj;
	if (r == 0)
		p->c->control_idle_timeout_s = (unsigned)v;
	return r;
}

static int key_log_level(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_choice(p, s, log_levels, "a log level", &p->c->log_level);
}

/* ---- listen ---- */

/* The server holds LISTEN_MAX listeners, unix and TCP together: one
 * more is an error here, with its line, not a listener dropped later. */
static int listener_room(struct parse *p, const config_setting_t *e)
{
	if (p->c->n_listen_unix + p->c->n_listen_tcp < LISTEN_MAX)
		return 0;
	return fail(p, e, "%s is one listener too many; expected at most %d listeners, unix "
		    "and tcp together", WHERE(e), LISTEN_MAX);
}

static int add_unix(struct parse *p, const config_setting_t *e, const char *v)
{
	struct cwd_config *c = p->c;
	char *path = NULL;
	int r;

	r = listener_room(p, e);
	if (r < 0)
		return r;
	r = get_path(p, e, sizeof(((struct sockaddr_un *)0)->sun_path) - 1, &path);
	if (r < 0)
		return r;
	c->listen_unix[c->n_listen_unix++] = path;
	return 0;
}

static bool host_is_loopback(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;

	if (!strcmp(host, "localhost"))
		return true;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, host, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6) ||
		       (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
	return false;
}

/* The port of address v, its text from port on, into *ret. */
static int get_port(struct parse *p, const config_setting_t *e, const char *v, const char *port,
		    long *ret)
{
	char *endp;

	errno = 0;
	*ret = strtol(port, &endp, 10);
	if (!*port || *endp || errno || *ret < 1 || *ret > 65535 || *port == '-' || *port == '+')
		return fail(p, e, "%s = \"%s\" has no valid port; expected a port from 1 to 65535",
			    WHERE(e), v);
	return 0;
}

#define TCP_EXPECTED "HOST:PORT, [IPV6]:PORT or HOST (port 10809)"

/* "host:port", "[v6]:port", "host", "[v6]" or a bare IPv6 address. */
static int add_tcp(struct parse *p, const config_setting_t *e, const char *v)
{
	struct cwd_config_tcp *t = &p->c->listen_tcp[p->c->n_listen_tcp];
	_cleanup_free_ char *host = NULL;
	const char *port = NULL, *colon = strrchr(v, ':');
	long n = CWD_DEFAULT_NBD_PORT;

	if (listener_room(p, e) < 0)
		return -EINVAL;
	if (v[0] == '[') {
		const char *end = strchr(v, ']');

		if (!end || (end[1] && end[1] != ':'))
			return fail(p, e, "%s = \"%s\" is not a TCP address; expected " TCP_EXPECTED,
				    WHERE(e), v);
		host = strndup(v + 1, (size_t)(end - v - 1));
		if (end[1] == ':')
			port = end + 2;
	} else if (colon && strchr(v, ':') == colon) {
		host = strndup(v, (size_t)(colon - v));
		port = colon + 1;
	} else
		host = strdup(v);	/* no port, or an IPv6 address */
	if (!host)
		return -ENOMEM;
	if (port && get_port(p, e, v, port, &n) < 0)
		return -EINVAL;
	if (strpbrk(host, "[]/ \t") || (strchr(host, ':') && inet_pton(AF_INET6, host, &(struct in6_addr){ 0 }) != 1))
		return fail(p, e, "%s = \"%s\" is not a TCP address; expected " TCP_EXPECTED, WHERE(e), v);
	if (!strcmp(host, "*"))
		host[0] = '\0';
	t->loopback = host_is_loopback(host);
	t->port = (uint16_t)n;
	t->host = CW_TAKE_PTR(host);
	p->tcp_setting[p->c->n_listen_tcp] = e;
	p->c->n_listen_tcp++;
	return 0;
}

static const struct choice tls_modes[] = {
	{ "off", CW_NBD_TLS_OFF, false },
	{ "on", CW_NBD_TLS_ON, false },
	{ "require", CW_NBD_TLS_REQUIRE, false },
	{ NULL, 0, false },
};

/* A listener given as a group: its address (key `what`: path or
 * address) and its own tls. */
struct listener_entry {
	const char *what;
	int (*add)(struct parse *p, const config_setting_t *e, const char *v);
	int tls;
	bool added;
};

static int key_entry_value(struct parse *p, const config_setting_t *s, void *obj)
{
	struct listener_entry *le = obj;
	const char *v = NULL;
	int r = get_string(p, s, "a string", &v);

	if (r == 0)
		r = le->add(p, s, v);
	le->added = r == 0;
	return r;
}

static int key_entry_tls(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_choice(p, s, tls_modes, "a TLS mode", &((struct listener_entry *)obj)->tls);
}

static const struct key unix_entry_keys[] = {
	{ "path", key_entry_value },
	{ "tls", key_entry_tls },
	{ NULL, NULL },
};

static const struct key tcp_entry_keys[] = {
	{ "address", key_entry_value },
	{ "tls", key_entry_tls },
	{ NULL, NULL },
};

/* Listeners: a string, or an array or list of strings and groups
 * { path|address = "..."; tls = "..."; }.  An entry's own TLS mode goes
 * to tls_of[its index] (plus one: 0 is none). */
static int for_each_listener(struct parse *p, const config_setting_t *s, const char *expected,
			     const struct key *entry_keys,
			     int (*add)(struct parse *p, const config_setting_t *e, const char *v),
			     int *tls_of, size_t *count)
{
	int i, n, r;

	if (config_setting_type(s) == CONFIG_TYPE_STRING)
		return add(p, s, config_setting_get_string(s));
	if (config_setting_type(s) != CONFIG_TYPE_ARRAY && config_setting_type(s) != CONFIG_TYPE_LIST)
		return wrong_type(p, s, expected);
	n = config_setting_length(s);
	if (n > LISTEN_MAX)
		return fail(p, s, "%s has %d entries; expected at most %d", WHERE(s), n, LISTEN_MAX);
	for (i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
		struct listener_entry le = { .what = entry_keys[0].name, .add = add, .tls = -1 };

		if (config_setting_type(e) == CONFIG_TYPE_STRING) {
			r = add(p, e, config_setting_get_string(e));
		} else if (config_setting_is_group(e)) {
			r = parse_group(p, e, entry_keys, &le);
			if (r == 0 && !le.added)
				r = fail(p, e, "%s has no %s; expected { %s = \"...\"; tls = \"...\"; }",
					 WHERE(e), le.what, le.what);
			if (r == 0)
				tls_of[*count - 1] = le.tls + 1;
		} else {
			r = wrong_type(p, e, expected);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

static int key_listen_unix(struct parse *p, const config_setting_t *s, void *obj)
{
	return for_each_listener(p, s, "an array of absolute paths [ \"/run/...\", ... ], or a "
				 "list of them and groups { path = \"/run/...\"; tls = \"on\"; }",
				 unix_entry_keys, add_unix, p->unix_tls, &p->c->n_listen_unix);
}

static int key_listen_tcp(struct parse *p, const config_setting_t *s, void *obj)
{
	return for_each_listener(p, s, "an array of TCP addresses [ \"127.0.0.1:10809\", ... ], or "
				 "a list of them and groups { address = \"...\"; tls = \"require\"; }",
				 tcp_entry_keys, add_tcp, p->tcp_tls, &p->c->n_listen_tcp);
}

static int key_listen_tls(struct parse *p, const config_setting_t *s, void *obj)
{
	p->listen_tls_setting = s;
	return get_choice(p, s, tls_modes, "a TLS mode", &p->listen_tls);
}

static int key_insecure(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_bool(p, s, &p->c->insecure);
}

/* ---- who may connect (unix socket permissions, access lists) ---- */

#define PRINCIPAL_NAME_MAX 32
#define PRINCIPALS_MAX 64
#define PRINCIPAL_EXPECTED "\"*\", a user or \"@group\" (a name or a number)"

/* A user or group name as useradd(8) allows, or a number. */
static bool valid_account(const char *v)
{
	const char *q;

	if (!*v || strlen(v) > PRINCIPAL_NAME_MAX || *v == '-' || *v == '.')
		return false;
	for (q = v; *q; q++)
		if (!(*q >= 'a' && *q <= 'z') && !(*q >= 'A' && *q <= 'Z') &&
		    !(*q >= '0' && *q <= '9') && *q != '.' && *q != '_' && *q != '-' &&
		    !(*q == '$' && !q[1]))
			return false;
	return true;
}

static int get_account(struct parse *p, const config_setting_t *s, const char *what, char **ret)
{
	const char *v = NULL;
	int r = get_string(p, s, what, &v);

	if (r < 0)
		return r;
	if (!valid_account(v))
		return fail(p, s, "%s = \"%s\" is not a valid name; expected %s", WHERE(s), v, what);
	free(*ret);
	*ret = strdup(v);
	return *ret ? 0 : -ENOMEM;
}

static int key_unix_mode(struct parse *p, const config_setting_t *s, void *obj)
{
	const char *v = NULL, *q;
	unsigned long m;
	char *end;
	int r = get_string(p, s, "an octal mode in quotes such as \"0660\"", &v);

	if (r < 0)
		return r;
	for (q = v; *q >= '0' && *q <= '7'; q++)
		;
	errno = 0;
	m = strtoul(v, &end, 8);
	if (!*v || *q || errno || m > 0777 || m == 0)
		return fail(p, s, "%s = \"%s\" is not a file mode; expected octal digits from "
			    "\"0001\" to \"0777\" such as \"0660\"", WHERE(s), v);
	p->c->unix_mode = (unsigned)m;
	return 0;
}

static int key_unix_owner(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_account(p, s, "a user name or number in quotes", &p->c->unix_owner);
}

static int key_unix_group(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_account(p, s, "a group name or number in quotes", &p->c->unix_group);
}

static const struct key listen_keys[] = {
	{ "unix", key_listen_unix },
	{ "unix_mode", key_unix_mode },
	{ "unix_owner", key_unix_owner },
	{ "unix_group", key_unix_group },
	{ "tcp", key_listen_tcp },
	{ "tls", key_listen_tls },
	{ "insecure", key_insecure },
	{ NULL, NULL },
};

/* ---- TLS credentials ---- */

static int key_tls_certificates(struct parse *p, const config_setting_t *s, void *obj)
{
	free(p->c->tls.certificates);
	p->c->tls.certificates = NULL;
	return get_path(p, s, 4000, &p->c->tls.certificates);
}

static int key_tls_psk(struct parse *p, const config_setting_t *s, void *obj)
{
	free(p->c->tls.psk);
	p->c->tls.psk = NULL;
	return get_path(p, s, 4000, &p->c->tls.psk);
}

static int key_tls_verify_peer(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_bool(p, s, &p->c->tls.verify_peer);
}

static const struct key tls_keys[] = {
	{ "certificates", key_tls_certificates },
	{ "psk", key_tls_psk },
	{ "verify_peer", key_tls_verify_peer },
	{ NULL, NULL },
};

static int key_tls(struct parse *p, const config_setting_t *s, void *obj)
{
	int r = parse_group(p, s, tls_keys, NULL);

	if (r == 0 && p->c->tls.certificates && p->c->tls.psk)
		return fail(p, s, "%s names certificates and psk; expected one of the two", WHERE(s));
	if (r == 0 && p->c->tls.psk && p->c->tls.verify_peer)
		return fail(p, s, "%s asks for clients' certificates with psk; expected "
			    "certificates = \"...\" with verify_peer = true, or psk alone", WHERE(s));
	return r;
}

static void clear_listen(struct cwd_config *c)
{
	size_t i;

	for (i = 0; i < c->n_listen_unix; i++)
		free(c->listen_unix[i]);
	for (i = 0; i < c->n_listen_tcp; i++)
		free(c->listen_tcp[i].host);
	c->n_listen_unix = c->n_listen_tcp = 0;
}

static int key_listen(struct parse *p, const config_setting_t *s, void *obj)
{
	/* A listen group replaces the default address: it lists them all. */
	const config_setting_t *old;

	clear_listen(p->c);
	p->listen = s;
	/* The old name for TCP anywhere in the clear: now it takes the word. */
	if (config_setting_is_group(s) && (old = config_setting_get_member(s, "allow_remote")))
		return fail(p, old, "%s is no longer a setting: NBD on TCP beyond loopback is "
			    "readable and writable by anyone on the network; expected "
			    "insecure = true in listen if that is meant", WHERE(old));
	return parse_group(p, s, listen_keys, NULL);
}

/* ---- exports ---- */

static int key_read_only(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_bool(p, s, &p->c->exports.read_only);
}

static int key_export_all(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_bool(p, s, &p->c->exports.all);
}

static int key_activation_mode(struct parse *p, const config_setting_t *s, void *obj)
{
	int v, r = get_choice(p, s, activation_modes, "an activation mode", &v);

	if (r == 0)
		p->c->exports.partial = v;
	return r;
}

static int key_multi_conn(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_bool(p, s, &p->c->exports.multi_conn);
}

/* A size in bytes that is a power of two: an integer, or a string with a
 * unit ("64K"; clockwise/units.h). */
static int get_pow2(struct parse *p, const config_setting_t *s, long long min, long long max,
		    uint32_t *ret)
{
	long long v;
	int r;

	if (config_setting_type(s) == CONFIG_TYPE_STRING) {
		const char *str = config_setting_get_string(s);
		uint64_t bytes;

		if (cw_units_parse_size(str, &bytes) < 0)
			return fail(p, s, "%s = \"%s\" is not a size; expected an integer or "
				    CW_UNITS_SIZE_HELP, WHERE(s), str);
		if (bytes < (uint64_t)min || bytes > (uint64_t)max)
			return fail(p, s, "%s = \"%s\" is out of range; expected a size from %lld to %lld",
				    WHERE(s), str, min, max);
		v = (long long)bytes;
	} else {
		r = get_int(p, s, min, max, &v);
		if (r < 0)
			return r;
	}
	if (!cw_is_pow2_u64((uint64_t)v))
		return fail(p, s, "%s = %lld is not a power of two; expected a power of two from %lld to %lld",
			    WHERE(s), v, min, max);
	*ret = (uint32_t)v;
	return 0;
}

static int key_block_size(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_pow2(p, s, BLOCK_SIZE_MIN, BLOCK_SIZE_MAX, &p->c->exports.block_size);
}

static int key_max_request(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_pow2(p, s, BLOCK_SIZE_MIN, MAX_REQUEST_MAX, &p->c->exports.max_request_bytes);
}

/* ---- exports' best-effort QoS ---- */

#define QOS_MAX 4096	/* admission's BES_MAX */

/* A rate in bytes per second or in requests ("20MB/s", "200iops"; an
 * integer is bytes per second). */
static int get_iorate(struct parse *p, const config_setting_t *s, uint64_t *ret, bool *ret_iops)
{
	long long v;
	int r;

	if (config_setting_type(s) == CONFIG_TYPE_STRING) {
		const char *str = config_setting_get_string(s);

		if (cw_units_parse_iorate(str, ret, ret_iops) < 0 || !*ret)
			return fail(p, s, "%s = \"%s\" is not a rate; expected " CW_UNITS_IORATE_HELP
				    ", more than 0", WHERE(s), str);
		return 0;
	}
	r = get_int(p, s, 1, INT64_MAX, &v);
	if (r < 0)
		return r;
	*ret = (uint64_t)v;
	*ret_iops = false;
	return 0;
}

static int qos_name(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config_qos *q = obj;
	const char *v = NULL;
	int r = get_string(p, s, "an export's name in quotes", &v);

	if (r < 0)
		return r;
	if (!cw_client_name_valid(v))
		return fail(p, s, "%s = \"%s\" is not an export name; expected EXPORT or "
			    "EXPORT@CLASS (a connection class), names of A-Z a-z 0-9 . _ -", WHERE(s),
			    v);
	free(q->export);
	q->export = strdup(v);
	return q->export ? 0 : -ENOMEM;
}

static int qos_reserve(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config_qos *q = obj;

	return get_iorate(p, s, &q->qos.reserve, &q->qos.reserve_iops);
}

static int qos_limit(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config_qos *q = obj;

	return get_iorate(p, s, &q->qos.limit, &q->qos.limit_iops);
}

static int qos_weight(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config_qos *q = obj;
	long long v;
	int r = get_int(p, s, 1, CW_BE_WEIGHT_MAX, &v);

	if (r == 0)
		q->qos.weight = (uint32_t)v;
	return r;
}

static const struct key qos_keys[] = {
	{ "name", qos_name },
	{ "reserve", qos_reserve },
	{ "weight", qos_weight },
	{ "limit", qos_limit },
	{ NULL, NULL },
};

static void qos_free(struct cwd_config *c)
{
	for (size_t i = 0; i < c->exports.n_qos; i++)
		free(c->exports.qos[i].export);
	free(c->exports.qos);
	c->exports.qos = NULL;
	c->exports.n_qos = 0;
}

static int key_qos(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config *c = p->c;
	int n = 0, r;

	r = get_list(p, s, "a list ( { name = ...; weight = ...; }, ... )", QOS_MAX, &n);
	if (r < 0)
		return r;
	qos_free(c);	/* an earlier list is replaced */
	c->exports.qos = calloc(n ? (size_t)n : 1, sizeof(*c->exports.qos));
	if (!c->exports.qos)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
		struct cwd_config_qos *q = &c->exports.qos[c->exports.n_qos++];

		q->line = config_setting_source_line(e);
		r = parse_group(p, e, qos_keys, q);
		if (r < 0)
			return r;
		if (!q->export)
			return fail(p, e, "%s has no name; expected name = \"EXPORT\" in every entry",
				    WHERE(e));
		if (!q->qos.reserve && !q->qos.limit && !q->qos.weight)
			return fail(p, e, "%s (export %s) sets nothing; expected reserve, weight or "
				    "limit", WHERE(e), q->export);
		if (q->qos.reserve && q->qos.limit && q->qos.reserve_iops == q->qos.limit_iops &&
		    q->qos.limit < q->qos.reserve)
			return fail(p, e, "%s (export %s): the limit is below the reservation; "
				    "expected a limit of at least the reservation", WHERE(e), q->export);
		for (size_t j = 0; j + 1 < c->exports.n_qos; j++)
			if (!strcmp(c->exports.qos[j].export, q->export))
				return fail(p, e, "export \"%s\" has two QoS entries (also at line %u); "
					    "expected one", q->export, c->exports.qos[j].line);
	}
	return 0;
}

static const struct key export_keys[] = {
	{ "read_only", key_read_only },
	{ "block_size", key_block_size },
	{ "max_request_bytes", key_max_request },
	{ "multi_conn", key_multi_conn },
	{ "all", key_export_all },
	{ "activation_mode", key_activation_mode },
	{ "qos", key_qos },
	{ NULL, NULL },
};

static int key_exports(struct parse *p, const config_setting_t *s, void *obj)
{
	int r = parse_group(p, s, export_keys, NULL);

	if (r == 0 && p->c->exports.max_request_bytes < p->c->exports.block_size)
		return fail(p, s, "exports.max_request_bytes (%u) is smaller than exports.block_size (%u); "
			    "expected max_request_bytes >= block_size",
			    p->c->exports.max_request_bytes, p->c->exports.block_size);
	return r;
}

/* ---- access ---- */

static void free_strings(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void access_clear(struct cwd_config_access *a)
{
	free(a->export);
	free_strings(a->read_write, a->n_read_write);
	free_strings(a->read_only, a->n_read_only);
	*a = (struct cwd_config_access){ 0 };
}

/* An array of principals into *ret (replacing what was there). */
static int get_principals(struct parse *p, const config_setting_t *s, char ***ret, size_t *ret_n)
{
	char **v;
	int i, n;

	if (config_setting_type(s) != CONFIG_TYPE_ARRAY && config_setting_type(s) != CONFIG_TYPE_LIST)
		return wrong_type(p, s, "an array [ " PRINCIPAL_EXPECTED ", ... ]");
	n = config_setting_length(s);
	if (n > PRINCIPALS_MAX)
		return fail(p, s, "%s has %d entries; expected at most %d", WHERE(s), n,
			    PRINCIPALS_MAX);
	v = calloc((size_t)n + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
		const char *x;

		if (config_setting_type(e) != CONFIG_TYPE_STRING) {
			free_strings(v, (size_t)i);
			return wrong_type(p, e, PRINCIPAL_EXPECTED);
		}
		x = config_setting_get_string(e);
		if (strcmp(x, "*") != 0 && !valid_account(x[0] == '@' ? x + 1 : x)) {
			free_strings(v, (size_t)i);
			return fail(p, e, "%s = \"%s\" names nobody; expected " PRINCIPAL_EXPECTED,
				    WHERE(e), x);
		}
		v[i] = strdup(x);
		if (!v[i]) {
			free_strings(v, (size_t)i);
			return -ENOMEM;
		}
	}
	free_strings(*ret, *ret_n);
	*ret = v;
	*ret_n = (size_t)n;
	return 0;
}

static int access_read_write(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config_access *a = obj;

	return get_principals(p, s, &a->read_write, &a->n_read_write);
}

static int access_read_only(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config_access *a = obj;

	return get_principals(p, s, &a->read_only, &a->n_read_only);
}

static int access_export_name(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config_access *a = obj;

	return get_name(p, s, NAME_MAX_BYTES, &a->export);
}

static const struct key access_export_keys[] = {
	{ "name", access_export_name },
	{ "read_write", access_read_write },
	{ "read_only", access_read_only },
	{ NULL, NULL },
};

static int access_exports(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config *c = p->c;
	int n = 0, i, r;

	r = get_list(p, s, "a list ( { name = ...; read_write = [ ... ]; }, ... )",
		     CW_EXPORTS_MAX, &n);
	if (r < 0)
		return r;
	/* Entries of an earlier exports list are replaced, the default kept. */
	while (c->n_access > 1)
		access_clear(&c->access[--c->n_access]);
	for (i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
		struct cwd_config_access *a = &c->access[c->n_access];
		size_t j;

		c->n_access++;
		a->line = config_setting_source_line(e);
		r = parse_group(p, e, access_export_keys, a);
		if (r < 0)
			return r;
		if (!a->export)
			return fail(p, e, "%s has no name; expected name = \"PARTITION\" in every "
				    "entry", WHERE(e));
		for (j = 1; j + 1 < c->n_access; j++)
			if (!strcmp(c->access[j].export, a->export))
				return fail(p, e, "export \"%s\" has two access entries (also at "
					    "line %u); expected one", a->export, c->access[j].line);
	}
	return 0;
}

static const struct key access_keys[] = {
	{ "read_write", access_read_write },
	{ "read_only", access_read_only },
	{ "exports", access_exports },
	{ NULL, NULL },
};

static int key_access(struct parse *p, const config_setting_t *s, void *obj)
{
	return parse_group(p, s, access_keys, &p->c->access[0]);
}

/* ---- limits ---- */

#define CONNECTIONS_MAX 4096
#define IDLE_TIMEOUT_S_MAX (7 * 24 * 3600)
#define REPLY_MEMORY_MIN (UINT64_C(1) << 20)
#define REPLY_MEMORY_MAX (UINT64_C(64) << 30)

static int get_unsigned(struct parse *p, const config_setting_t *s, long long min, long long max,
			unsigned *ret)
{
	long long v;
	int r = get_int(p, s, min, max, &v);

	if (r == 0)
		*ret = (unsigned)v;
	return r;
}

static int limit_connections(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_unsigned(p, s, 1, CONNECTIONS_MAX, &p->c->limits.connections);
}

static int limit_per_user(struct parse *p, const config_setting_t *s, void *obj)
{
	p->limit_per_user = s;
	return get_unsigned(p, s, 1, CONNECTIONS_MAX, &p->c->limits.connections_per_user);
}

static int limit_handshake(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_unsigned(p, s, 1, 3600, &p->c->limits.handshake_timeout_s);
}

static int limit_idle(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_unsigned(p, s, 0, IDLE_TIMEOUT_S_MAX, &p->c->limits.idle_timeout_s);
}

static int limit_stall(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_unsigned(p, s, 1, 3600, &p->c->limits.stall_timeout_s);
}

static int limit_reply_memory(struct parse *p, const config_setting_t *s, void *obj)
{
	long long v;
	int r = get_int(p, s, (long long)REPLY_MEMORY_MIN, (long long)REPLY_MEMORY_MAX, &v);

	if (r == 0)
		p->c->limits.reply_memory_bytes = (uint64_t)v;
	return r;
}

static const struct key limit_keys[] = {
	{ "connections", limit_connections },
	{ "connections_per_user", limit_per_user },
	{ "handshake_timeout_s", limit_handshake },
	{ "idle_timeout_s", limit_idle },
	{ "stall_timeout_s", limit_stall },
	{ "reply_memory_bytes", limit_reply_memory },
	{ NULL, NULL },
};

static int key_limits(struct parse *p, const config_setting_t *s, void *obj)
{
	int r = parse_group(p, s, limit_keys, NULL);

	if (r == 0 && !p->limit_per_user)
		p->c->limits.connections_per_user = CW_MAX(p->c->limits.connections / 2, 1u);
	if (r == 0 && p->c->limits.connections_per_user > p->c->limits.connections)
		return fail(p, p->limit_per_user, "limits.connections_per_user (%u) is more than "
			    "limits.connections (%u); expected at most as many",
			    p->c->limits.connections_per_user, p->c->limits.connections);
	return r;
}

/* ---- disks ---- */

static int disk_path(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config_disk *d = obj;
	const char *v = config_setting_get_string(s);

	/* An image on a Ceph cluster: no file, no absolute path. */
	if (v && cw_io_path_is_rbd(v)) {
		if (strlen(v) > 4095)
			return fail(p, s, "%s is %zu bytes long; expected at most 4095", WHERE(s),
				    strlen(v));
		free(d->path);
		d->path = strdup(v);
		return d->path ? 0 : -ENOMEM;
	}
	return get_path(p, s, 4095, &d->path);
}

static int disk_name(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_name(p, s, NAME_MAX_BYTES, &((struct cwd_config_disk *)obj)->name);
}

static int disk_model(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_name(p, s, MODEL_MAX_BYTES, &((struct cwd_config_disk *)obj)->model);
}

/* emulate = "atlas2" (a preset, perhaps with settings of its mechanics:
 * "ssd channels=8 gc=1G/50ms") or a stored model string: the disk's I/O
 * completes when that disk would have completed it (clockwise/emu.h). */
static int disk_emulate(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config_disk *d = obj;
	const char *v = NULL;
	struct cw_model m;
	char why[512];
	int r = get_string(p, s, "a model preset or a model string in quotes", &v);

	if (r < 0)
		return r;
	r = cw_model_from_string_why(v, &m, why, sizeof(why));
	if (r < 0)
		return fail(p, s, "%s: %s", WHERE(s), why);
	free(d->emulate);
	d->emulate = malloc(sizeof(*d->emulate));
	if (!d->emulate)
		return -ENOMEM;
	*d->emulate = m;
	return 0;
}

/* fault = "fail-write=3,cut-file=/run/cut": for tests, the disk's I/O
 * goes through the fault-injecting engine (clockwise/fault.h). */
static int disk_fault(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config_disk *d = obj;
	const char *v = NULL;
	struct cw_io_fault_opts o;
	char why[512];
	int r = get_string(p, s, "fault settings in quotes", &v);

	if (r < 0)
		return r;
	r = cw_io_fault_parse(v, &o, why, sizeof(why));
	if (r < 0)
		return fail(p, s, "%s: %s", WHERE(s), why);
	free(d->fault);
	d->fault = malloc(sizeof(*d->fault));
	if (!d->fault)
		return -ENOMEM;
	*d->fault = o;
	return 0;
}

static int disk_tier(struct parse *p, const config_setting_t *s, void *obj)
{
	int v, r = get_choice(p, s, tiers, "a tier", &v);

	if (r == 0)
		((struct cwd_config_disk *)obj)->tier = (enum cw_tier)v;
	return r;
}

static int disk_policy(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config_disk *d = obj;
	int v, r = get_choice(p, s, policies, "a dispatch policy", &v);

	if (r == 0) {
		d->policy = (enum cwd_config_policy)v;
		p->disk_policy[d - p->c->disks] = s;
	}
	return r;
}

static int disk_be_order(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config_disk *d = obj;
	int v, r = get_choice(p, s, be_orders, "a best-effort order", &v);

	if (r == 0) {
		d->be_order = (enum cwd_config_be_order)v;
		p->disk_be_order[d - p->c->disks] = s;
	}
	return r;
}

static int disk_slot_us(struct parse *p, const config_setting_t *s, void *obj)
{
	long long v;
	int r = get_int(p, s, 1, SLOT_US_MAX, &v);

	if (r == 0)
		((struct cwd_config_disk *)obj)->slot_ns = v * CW_NS_PER_US;
	return r;
}

unsigned cwd_config_default_lanes(enum cw_tier tier)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (tier != CW_TIER_SSD)
		return 1;
	return n >= 8 ? 4 : n >= 4 ? (unsigned)(n / 2) : 1;
}

static int disk_lanes(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config_disk *d = obj;
	long long v;
	int r = get_int(p, s, 1, LANES_MAX, &v);

	if (r == 0) {
		d->lanes = (unsigned)v;
		p->disk_lanes[d - p->c->disks] = s;
	}
	return r;
}

static const struct key disk_keys[] = {
	{ "path", disk_path },
	{ "name", disk_name },
	{ "tier", disk_tier },
	{ "policy", disk_policy },
	{ "be_order", disk_be_order },
	{ "slot_us", disk_slot_us },
	{ "lanes", disk_lanes },
	{ "model", disk_model },
	{ "emulate", disk_emulate },
	{ "fault", disk_fault },
	{ NULL, NULL },
};

static int parse_disk(struct parse *p, const config_setting_t *s, struct cwd_config_disk *d)
{
	const config_setting_t *lanes;
	size_t idx = (size_t)(d - p->c->disks);
	int r;

	d->tier = CW_TIER_HDD;
	d->line = config_setting_source_line(s);
	r = parse_group(p, s, disk_keys, d);
	if (r < 0)
		return r;
	if (!d->path)
		return fail(p, s, "%s has no path; expected path = \"/dev/...\" in every disk", WHERE(s));
	if (!d->name)
		return fail(p, s, "%s has no name; expected name = \"...\" in every disk", WHERE(s));
	if (cw_io_path_is_rbd(d->path) && d->tier == CW_TIER_HDD)
		d->tier = CW_TIER_RBD;	/* hdd is only the default */
	if ((d->tier == CW_TIER_RBD) != cw_io_path_is_rbd(d->path))
		return fail(p, s, "%s: tier rbd goes with path = \"rbd:POOL/IMAGE\" and only with "
			    "it; expected tier = \"rbd\" with an rbd: path, another tier with a "
			    "file or device", WHERE(s));
	lanes = p->disk_lanes[idx];
	if (lanes && d->tier != CW_TIER_SSD)
		return fail(p, lanes, "%s is set on an hdd; expected lanes only with tier = \"ssd\"",
			    WHERE(lanes));
	if (!lanes)
		d->lanes = cwd_config_default_lanes(d->tier);
	if (d->slot_ns == 0)
		d->slot_ns = (d->tier == CW_TIER_SSD ? DEFAULT_SLOT_US_SSD : DEFAULT_SLOT_US_HDD) *
			     CW_NS_PER_US;
	return 0;
}

static int key_disks(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config *c = p->c;
	int n = 0, i, r;

	r = get_list(p, s, "a list ( { path = ...; name = ...; }, ... )", CW_DISKS_MAX, &n);
	if (r < 0)
		return r;
	c->disks = calloc((size_t)n + 1, sizeof(*c->disks));
	p->disk_lanes = calloc((size_t)n + 1, sizeof(*p->disk_lanes));
	p->disk_policy = calloc((size_t)n + 1, sizeof(*p->disk_policy));
	p->disk_be_order = calloc((size_t)n + 1, sizeof(*p->disk_be_order));
	if (!c->disks || !p->disk_lanes || !p->disk_policy || !p->disk_be_order)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
		struct cwd_config_disk *d = &c->disks[i];
		size_t j;

		c->n_disks++;
		r = parse_disk(p, e, d);
		if (r < 0)
			return r;
		for (j = 0; j < (size_t)i; j++) {
			if (!strcmp(c->disks[j].name, d->name))
				return fail(p, e, "disk name \"%s\" is used twice (also at line %u); "
					    "expected a different name for each disk", d->name,
					    c->disks[j].line);
			if (!strcmp(c->disks[j].path, d->path))
				return fail(p, e, "disk path \"%s\" is used twice (also at line %u); "
					    "expected a different path for each disk", d->path,
					    c->disks[j].line);
		}
	}
	return 0;
}

/* ---- host ---- */

/* host.share: a percentage of the CPUs, "50%" or 50, above 0 and at most
 * 100 (a fraction of a percent allowed: "12.5%"). */
static int host_share(struct parse *p, const config_setting_t *s, void *obj)
{
	double v;
	const char *str = NULL;
	char *end = NULL;

	(void)obj;
	if (config_setting_type(s) == CONFIG_TYPE_INT || config_setting_type(s) == CONFIG_TYPE_INT64)
		v = (double)config_setting_get_int64(s);
	else if (config_setting_type(s) == CONFIG_TYPE_FLOAT)
		v = config_setting_get_float(s);
	else if (config_setting_type(s) == CONFIG_TYPE_STRING) {
		str = config_setting_get_string(s);
		v = strtod(str, &end);
		if (end == str || (*end && strcmp(end, "%") != 0))
			v = -1;
	} else {
		return wrong_type(p, s, "a percentage of the CPUs, like \"50%\"");
	}
	if (!(v > 0 && v <= 100))
		return fail(p, s, "%s is not a share of the CPUs; expected a percentage above 0 "
			    "and at most 100, like \"50%%\"", WHERE(s));
	p->c->host.share_ppm = (uint32_t)(v * 10000 + 0.5);
	return 0;
}

static int host_request_cost(struct parse *p, const config_setting_t *s, void *obj)
{
	const char *str;
	int64_t ns;

	(void)obj;
	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return wrong_type(p, s, "a duration such as \"20us\"");
	str = config_setting_get_string(s);
	if (cw_units_parse_duration(str, CW_UNITS_S, &ns) < 0 || ns <= 0 || ns > CW_NS_PER_S)
		return fail(p, s, "%s = \"%s\" is not a request's CPU time; expected a duration "
			    "above 0 and at most 1s, such as \"20us\"", WHERE(s), str);
	p->c->host.request_ns = ns;
	return 0;
}

static int host_copy_rate(struct parse *p, const config_setting_t *s, void *obj)
{
	const char *str;
	uint64_t v;

	(void)obj;
	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return wrong_type(p, s, "a rate such as \"4GB/s\"");
	str = config_setting_get_string(s);
	if (cw_units_parse_rate(str, &v) < 0 || v == 0)
		return fail(p, s, "%s = \"%s\" is not a rate; expected " CW_UNITS_RATE_HELP,
			    WHERE(s), str);
	p->c->host.copy_rate_bps = v;
	return 0;
}

static int host_test(struct parse *p, const config_setting_t *s, void *obj)
{
	bool on = true;
	int r = get_bool(p, s, &on);

	(void)obj;
	if (r == 0)
		p->c->host.off = !on;
	return r;
}

static const struct key host_keys[] = {
	{ "test", host_test },
	{ "share", host_share },
	{ "request_cost", host_request_cost },
	{ "copy_rate", host_copy_rate },
	{ NULL, NULL },
};

static int key_host(struct parse *p, const config_setting_t *s, void *obj)
{
	return parse_group(p, s, host_keys, NULL);
}

/* ---- metrics ---- */

#define METRICS_EXPECTED "an absolute path, 127.X.X.X:PORT or [::1]:PORT (port %d when none)"

/* A unix socket, or a numeric loopback address: TCP beyond loopback
 * would show the counters to the network, and on loopback to anyone on
 * the host (the unix socket keeps the control socket's read group). */
static int add_metrics(struct parse *p, const config_setting_t *e)
{
	struct cwd_config_metrics *m = &p->c->metrics;
	struct sockaddr_storage *ss = &m->addr[m->n];
	char host[INET6_ADDRSTRLEN + 1] = "";
	const char *v = NULL, *port = NULL;
	long n = CWD_DEFAULT_METRICS_PORT;
	int r;

	if (m->n == CWD_METRICS_LISTEN_MAX)
		return fail(p, e, "%s is one address too many; expected at most %d", WHERE(e),
			    CWD_METRICS_LISTEN_MAX);
	r = get_string(p, e, "a string", &v);
	if (r < 0)
		return r;
	memset(ss, 0, sizeof(*ss));
	if (v[0] == '/') {
		struct sockaddr_un *sa = (struct sockaddr_un *)ss;
		_cleanup_free_ char *path = NULL;

		r = get_path(p, e, sizeof(sa->sun_path) - 1, &path);
		if (r < 0)
			return r;
		sa->sun_family = AF_UNIX;
		memcpy(sa->sun_path, path, strlen(path) + 1);
		m->addrlen[m->n++] = sizeof(*sa);
		return 0;
	}
	if (v[0] == '[') {
		const char *end = strchr(v, ']');

		if (end && (size_t)(end - v - 1) < sizeof(host) && (!end[1] || end[1] == ':')) {
			memcpy(host, v + 1, (size_t)(end - v - 1));
			port = end[1] ? end + 2 : NULL;
		}
	} else {
		const char *colon = strchr(v, ':');
		size_t len = colon ? (size_t)(colon - v) : strlen(v);

		if (len < sizeof(host)) {
			memcpy(host, v, len);
			port = colon ? colon + 1 : NULL;
		}
	}
	if (port && get_port(p, e, v, port, &n) < 0)
		return -EINVAL;
	if (v[0] == '[') {
		struct sockaddr_in6 *sa = (struct sockaddr_in6 *)ss;

		if (inet_pton(AF_INET6, host, &sa->sin6_addr) == 1) {
			if (!IN6_IS_ADDR_LOOPBACK(&sa->sin6_addr))
				goto remote;
			sa->sin6_family = AF_INET6;
			sa->sin6_port = htons((uint16_t)n);
			m->addrlen[m->n++] = sizeof(*sa);
			return 0;
		}
	} else {
		struct sockaddr_in *sa = (struct sockaddr_in *)ss;

		if (inet_pton(AF_INET, host, &sa->sin_addr) == 1) {
			if (ntohl(sa->sin_addr.s_addr) >> 24 != 127)
				goto remote;
			sa->sin_family = AF_INET;
			sa->sin_port = htons((uint16_t)n);
			m->addrlen[m->n++] = sizeof(*sa);
			return 0;
		}
	}
	return fail(p, e, "%s = \"%s\" is not an address; expected " METRICS_EXPECTED, WHERE(e), v,
		    CWD_DEFAULT_METRICS_PORT);
remote:
	return fail(p, e, "%s = \"%s\" is not a loopback address: anyone who reaches it would "
		    "read the counters; expected a unix socket, 127.X.X.X or [::1]", WHERE(e), v);
}

static int key_metrics_listen(struct parse *p, const config_setting_t *s, void *obj)
{
	int n, r;

	p->c->metrics.n = 0;
	if (config_setting_type(s) == CONFIG_TYPE_STRING)
		return add_metrics(p, s);
	if (config_setting_type(s) != CONFIG_TYPE_ARRAY && config_setting_type(s) != CONFIG_TYPE_LIST)
		return wrong_type(p, s, "an array of addresses [ \"127.0.0.1:9477\", "
				  "\"/run/clockwise/metrics.sock\" ]");
	n = config_setting_length(s);
	for (int i = 0; i < n; i++) {
		r = add_metrics(p, config_setting_get_elem(s, (unsigned)i));
		if (r < 0)
			return r;
	}
	return 0;
}

static const struct key metrics_keys[] = {
	{ "listen", key_metrics_listen },
	{ NULL, NULL },
};

static int key_metrics(struct parse *p, const config_setting_t *s, void *obj)
{
	return parse_group(p, s, metrics_keys, NULL);
}

static const struct key top_keys[] = {
	{ "pool", key_pool },
	{ "policy", key_policy },
	{ "be_order", key_be_order },
	{ "io_engine", key_io_engine },
	{ "queue_depth", key_queue_depth },
	{ "mover_depth", key_mover_depth },
	{ "mover_share", key_mover_share },
	{ "rt_priority", key_rt_priority },
	{ "lock_memory", key_lock_memory },
	{ "rt_cpus", key_rt_cpus },
	{ "busy_poll_us", key_busy_poll_us },
	{ "stall_probe_us", key_stall_probe_us },
	{ "listen", key_listen },
	{ "tls", key_tls },
	{ "control_socket", key_control_socket },
	{ "control_read_group", key_control_read_group },
	{ "control_admin_group", key_control_admin_group },
	{ "control_idle_timeout_s", key_control_idle_timeout_s },
	{ "log_level", key_log_level },
	{ "exports", key_exports },
	{ "access", key_access },
	{ "limits", key_limits },
	{ "host", key_host },
	{ "metrics", key_metrics },
	{ "disks", key_disks },
	{ NULL, NULL },
};

/* ---- the whole ---- */

/* ---- start-up reservations (-r) ---- */

/* Field i of "EXPORT:BANDWIDTH:BLOCK[:OFFSET:LENGTH[:START_S:END_S]]": a
 * rate, a size or a span bound (whole seconds). */
static int start_resv_field(unsigned i, const char *s, uint64_t *ret, const char **ret_expected)
{
	int64_t ns;
	int r;

	if (i == 1) {
		*ret_expected = CW_UNITS_RATE_HELP;
		return cw_units_parse_rate(s, ret);
	}
	if (i < 5) {
		*ret_expected = CW_UNITS_SIZE_HELP;
		return cw_units_parse_size(s, ret);
	}
	*ret_expected = "a whole number of seconds, e.g. 30 or 10m";
	r = cw_units_parse_duration(s, CW_UNITS_S, &ns);
	if (r < 0)
		return r;
	if (ns % CW_UNITS_S || ns / CW_UNITS_S > INT32_MAX)
		return -EINVAL;
	*ret = (uint64_t)(ns / CW_UNITS_S);
	return 0;
}

int cwd_config_parse_resv(const char *spec, struct cwd_config_resv *ret, char *err, size_t errlen)
{
	char buf[512], *f[8], *save = NULL, *tok;
	const char *expected;
	uint64_t v[7] = { 0 };
	unsigned n = 0, i;

	if (strlen(spec) >= sizeof(buf)) {
		snprintf(err, errlen, "reservation \"%.40s...\" is too long", spec);
		return -EINVAL;
	}
	strcpy(buf, spec);
	for (tok = strtok_r(buf, ":", &save); tok && n < 8; tok = strtok_r(NULL, ":", &save))
		f[n++] = tok;
	if ((n != 3 && n != 5 && n != 7) || tok) {
		snprintf(err, errlen, "reservation \"%s\": expected "
			 "EXPORT:BANDWIDTH:BLOCK[:OFFSET:LENGTH[:START_S:END_S]]", spec);
		return -EINVAL;
	}
	if (!name_ok(f[0], sizeof(ret->export_name) - 1) || f[0][0] == '-') {
		snprintf(err, errlen, "reservation \"%s\": \"%s\" is not an export name", spec, f[0]);
		return -EINVAL;
	}
	for (i = 1; i < n; i++) {
		if (start_resv_field(i, f[i], &v[i], &expected) < 0) {
			snprintf(err, errlen, "reservation \"%s\": \"%s\": expected %s", spec, f[i],
				 expected);
			return -EINVAL;
		}
	}
	if (!v[1] || !v[2]) {
		snprintf(err, errlen, "reservation \"%s\": bandwidth and block size must be > 0",
			 spec);
		return -EINVAL;
	}
	if (n == 7 && v[6] && v[6] <= v[5]) {
		snprintf(err, errlen, "reservation \"%s\": the span ends before it starts", spec);
		return -EINVAL;
	}
	*ret = (struct cwd_config_resv){
		.rate_bps = v[1], .block_bytes = v[2], .offset = v[3], .length = v[4],
		.span_start_s = (int64_t)v[5], .span_end_s = (int64_t)v[6],
	};
	snprintf(ret->export_name, sizeof(ret->export_name), "%s", f[0]);
	return 0;
}

void cwd_config_free(struct cwd_config *c)
{
	size_t i;

	if (!c)
		return;
	clear_listen(c);
	free(c->listen_unix);
	free(c->listen_tcp);
	free(c->tls.certificates);
	free(c->tls.psk);
	for (i = 0; i < c->n_disks; i++) {
		free(c->disks[i].path);
		free(c->disks[i].name);
		free(c->disks[i].model);
		free(c->disks[i].emulate);
		free(c->disks[i].fault);
	}
	free(c->disks);
	free(c->file);
	free(c->pool);
	free(c->control_socket);
	free(c->control_read_group);
	free(c->control_admin_group);
	free(c->unix_owner);
	free(c->unix_group);
	qos_free(c);
	for (i = 0; c->access && i < CW_EXPORTS_MAX + 1; i++)
		access_clear(&c->access[i]);
	free(c->access);
	free(c);
}

static int config_defaults(const char *file, struct cwd_config **ret_config)
{
	struct cwd_config *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->file = strdup(file);
	c->pool = strdup(CWD_DEFAULT_POOL);
	c->control_socket = strdup(CWD_DEFAULT_CONTROL);
	c->control_read_group = strdup(CWD_DEFAULT_READ_GROUP);
	c->control_admin_group = strdup(CWD_DEFAULT_ADMIN_GROUP);
	c->listen_unix = calloc(LISTEN_MAX, sizeof(*c->listen_unix));
	c->listen_tcp = calloc(LISTEN_MAX, sizeof(*c->listen_tcp));
	if (!c->file || !c->pool || !c->control_socket || !c->control_read_group ||
	    !c->control_admin_group || !c->listen_unix || !c->listen_tcp)
		goto oom;
	/* NBD on a unix socket only: TCP is there when configured. */
	c->listen_unix[0] = strdup(CWD_DEFAULT_NBD_SOCKET);
	if (!c->listen_unix[0])
		goto oom;
	c->n_listen_unix = 1;
	c->unix_mode = 0660;
	c->unix_group = strdup(CWD_DEFAULT_READ_GROUP);
	/* As on the control socket: the admin group changes, the read
	 * group reads (root and the daemon's user always may). */
	c->access = calloc(CW_EXPORTS_MAX + 1, sizeof(*c->access));
	if (!c->unix_group || !c->access)
		goto oom;
	c->n_access = 1;
	c->access[0].read_write = calloc(2, sizeof(char *));
	c->access[0].read_only = calloc(2, sizeof(char *));
	if (!c->access[0].read_write || !c->access[0].read_only ||
	    !(c->access[0].read_write[0] = strdup("@" CWD_DEFAULT_ADMIN_GROUP)) ||
	    !(c->access[0].read_only[0] = strdup("@" CWD_DEFAULT_READ_GROUP)))
		goto oom;
	c->access[0].n_read_write = c->access[0].n_read_only = 1;
	c->policy = CWD_POLICY_DYNAMIC;
	c->be_order = CWD_BE_RBFQ;
	c->io_engine = CW_IO_URING;
	c->queue_depth = DEFAULT_QUEUE_DEPTH;
	c->mover_depth = DEFAULT_MOVER_DEPTH;
	c->mover_share = 100;
	c->rt_priority = DEFAULT_RT_PRIORITY;
	c->lock_memory = true;
	c->host.share_ppm = CW_HOST_SHARE_DEFAULT_PPM;
	c->busy_poll_us = DEFAULT_BUSY_POLL_US;
	c->stall_probe_us = DEFAULT_STALL_PROBE_US;
	c->control_idle_timeout_s = 30;
	c->log_level = LOG_INFO;
	c->exports.block_size = 4096;
	c->exports.max_request_bytes = MAX_REQUEST_MAX;
	c->exports.multi_conn = true;
	c->exports.all = false;
	c->limits.connections = 64;
	c->limits.connections_per_user = 32;
	c->limits.handshake_timeout_s = 10;
	c->limits.idle_timeout_s = 0;
	c->limits.stall_timeout_s = 30;
	c->limits.reply_memory_bytes = UINT64_C(256) << 20;
	*ret_config = c;
	return 0;
oom:
	cwd_config_free(c);
	return -ENOMEM;
}

int cwd_config_new(struct cwd_config **ret_config)
{
	if (!ret_config)
		return -EINVAL;
	return config_defaults(CWD_CONFIG_DEFAULT_PATH, ret_config);
}

/* Checks a parsed libconfig tree against the schema. */
static int check_tree(struct parse *p, const config_t *cf)
{
	struct cwd_config *c = p->c;
	size_t i;
	int r;

	r = parse_group(p, config_root_setting(cf), top_keys, NULL);
	if (r < 0)
		return r;
	/* Disks without their own policy follow the top-level one, wherever
	 * in the file that was set. */
	for (i = 0; i < c->n_disks; i++)
		if (!p->disk_policy[i])
			c->disks[i].policy = c->policy;
	for (i = 0; i < c->n_disks; i++)
		if (!p->disk_be_order[i])
			c->disks[i].be_order = c->be_order;
	if (p->listen && c->n_listen_unix + c->n_listen_tcp == 0)
		return fail(p, p->listen, "listen has no address; expected at least one unix path "
			    "or tcp address");
	/* Listeners that say nothing of TLS take listen.tls. */
	for (i = 0; i < c->n_listen_unix; i++)
		c->listen_unix_tls[i] = p->unix_tls[i] ? p->unix_tls[i] - 1 : p->listen_tls;
	for (i = 0; i < c->n_listen_tcp; i++)
		c->listen_tcp[i].tls = p->tcp_tls[i] ? p->tcp_tls[i] - 1 : p->listen_tls;
	for (i = 0; i < c->n_listen_tcp; i++) {
		const config_setting_t *e = p->tcp_setting[i];

		if (c->listen_tcp[i].loopback || c->listen_tcp[i].tls == CW_NBD_TLS_REQUIRE ||
		    c->insecure)
			continue;
		return fail(p, e, "%s = \"%s\" is not a loopback address, and NBD on it would be "
			    "readable and writable by anyone on the network; expected 127.0.0.1, "
			    "::1 or localhost, tls = \"require\", or insecure = true in listen",
			    WHERE(e), config_setting_get_string(e));
	}
	if (!c->tls.certificates && !c->tls.psk) {
		for (i = 0; i < c->n_listen_unix + c->n_listen_tcp; i++) {
			int t = i < c->n_listen_unix ? c->listen_unix_tls[i] :
				c->listen_tcp[i - c->n_listen_unix].tls;

			if (t != CW_NBD_TLS_OFF)
				return fail(p, p->listen, "%s offers TLS but there are no credentials; "
					    "expected tls = { certificates = \"/etc/...\"; } or "
					    "tls = { psk = \"/etc/...\"; }", WHERE(p->listen));
		}
	}
	return 0;
}

/* libconfig has read (or failed to read) cf: turn it into a config. */
static int finish(config_t *cf, int ok, const char *name, struct cwd_config **ret_config,
		  char **ret_error)
{
	struct parse p = { .file = name };
	int r;

	if (!ok) {
		const char *file = config_error_file(cf) ? config_error_file(cf) : name;

		if (config_error_type(cf) == CONFIG_ERR_FILE_IO) {
			r = errno ? -errno : -EIO;
			if (asprintf(&p.error, "%s: %s", file, strerror(-r)) < 0)
				p.error = NULL;
		} else {
			r = -EINVAL;
			if (asprintf(&p.error, "%s:%d: %s; expected libconfig syntax (name = value; "
				     "see clockwised.conf(5))", file, config_error_line(cf),
				     config_error_text(cf)) < 0)
				p.error = NULL;
		}
		goto out;
	}
	r = config_defaults(name, &p.c);
	if (r < 0)
		goto out;
	r = check_tree(&p, cf);
	if (r < 0 && !p.error && r != -ENOMEM)
		r = fail(&p, NULL, "invalid configuration; expected clockwised.conf(5)");
out:
	free(p.disk_lanes);
	free(p.disk_policy);
	free(p.disk_be_order);
	if (r < 0) {
		cwd_config_free(p.c);
		if (ret_error)
			*ret_error = p.error;
		else
			free(p.error);
		return r;
	}
	free(p.error);
	*ret_config = p.c;
	return 0;
}

int cwd_config_parse(const char *text, const char *name, struct cwd_config **ret_config,
		     char **ret_error)
{
	config_t cf;
	int ok, r;

	if (ret_error)
		*ret_error = NULL;
	if (!text || !ret_config)
		return -EINVAL;
	config_init(&cf);
	ok = config_read_string(&cf, text);
	r = finish(&cf, ok, name ? name : "<string>", ret_config, ret_error);
	config_destroy(&cf);
	return r;
}

int cwd_config_load(const char *path, struct cwd_config **ret_config, char **ret_error)
{
	config_t cf;
	int ok, r;

	if (ret_error)
		*ret_error = NULL;
	if (!ret_config)
		return -EINVAL;
	if (!path)
		path = CWD_CONFIG_DEFAULT_PATH;
	config_init(&cf);
	errno = 0;
	ok = config_read_file(&cf, path);
	r = finish(&cf, ok, path, ret_config, ret_error);
	config_destroy(&cf);
	return r;
}

/* ---- names of users and groups, resolved at start ---- */

static bool all_digits(const char *v)
{
	return *v && strspn(v, "0123456789") == strlen(v);
}

/* A user's or group's id: numbers as they are, names from the system's
 * databases.  -ENOENT for a name nobody has. */
static int account_id(const char *v, bool group, uint32_t *ret_id)
{
	char buf[4096];
	bool found = false;
	int r;

	if (all_digits(v)) {
		unsigned long long n;

		errno = 0;
		n = strtoull(v, NULL, 10);
		if (errno || n >= UINT32_MAX)
			return -ERANGE;
		*ret_id = (uint32_t)n;
		return 0;
	}
	if (group) {
		struct group gr, *res = NULL;

		r = getgrnam_r(v, &gr, buf, sizeof(buf), &res);
		if (r == 0 && res) {
			*ret_id = (uint32_t)res->gr_gid;
			found = true;
		}
	} else {
		struct passwd pw, *res = NULL;

		r = getpwnam_r(v, &pw, buf, sizeof(buf), &res);
		if (r == 0 && res) {
			*ret_id = (uint32_t)res->pw_uid;
			found = true;
		}
	}
	return found ? 0 : r > 0 ? -r : -ENOENT;
}

__attribute__((format(printf, 3, 4)))
static void warn(cwd_config_warn_fn fn, void *userdata, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (!fn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fn(userdata, msg);
}

static int resolve_list(char *const *names, size_t n, const char *what, cwd_config_warn_fn fn,
			void *userdata, struct nbdsrv_principal **ret, size_t *ret_n)
{
	struct nbdsrv_principal *v = calloc(n + 1, sizeof(*v));
	size_t i, k = 0;

	if (!v)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		const char *name = names[i];
		bool group = name[0] == '@';
		int r;

		if (!strcmp(name, "*")) {
			v[k++] = (struct nbdsrv_principal){ .kind = NBDSRV_ANYONE };
			continue;
		}
		r = account_id(group ? name + 1 : name, group, &v[k].id);
		if (r < 0) {
			warn(fn, userdata, "%s: %s %s: %s; left out", what, group ? "group" : "user",
			     group ? name + 1 : name, r == -ENOENT ? "no such name" : strerror(-r));
			continue;
		}
		v[k++].kind = group ? NBDSRV_GROUP : NBDSRV_USER;
	}
	*ret = v;
	*ret_n = k;
	return 0;
}

void cwd_config_access_free(struct nbdsrv_access *rules, size_t n)
{
	size_t i;

	if (!rules)
		return;
	for (i = 0; i < n; i++) {
		free((void *)rules[i].read_write);
		free((void *)rules[i].read_only);
	}
	free(rules);
}

int cwd_config_access(const struct cwd_config *c, cwd_config_warn_fn fn, void *userdata,
		      struct nbdsrv_access **ret_rules, size_t *ret_n)
{
	struct nbdsrv_access *rules = calloc(c->n_access + 1, sizeof(*rules));
	size_t i;
	int r = 0;

	if (!rules)
		return -ENOMEM;
	for (i = 0; i < c->n_access && r == 0; i++) {
		const struct cwd_config_access *a = &c->access[i];
		struct nbdsrv_principal *rw = NULL, *ro = NULL;
		char what[96];

		snprintf(what, sizeof(what), "access%s%s", a->export ? " of export " : "",
			 a->export ? a->export : "");
		rules[i].export = a->export;
		r = resolve_list(a->read_write, a->n_read_write, what, fn, userdata, &rw,
				 &rules[i].n_read_write);
		rules[i].read_write = rw;
		if (r == 0)
			r = resolve_list(a->read_only, a->n_read_only, what, fn, userdata, &ro,
					 &rules[i].n_read_only);
		rules[i].read_only = ro;
	}
	if (r < 0) {
		cwd_config_access_free(rules, c->n_access);
		return r;
	}
	*ret_rules = rules;
	*ret_n = c->n_access;
	return 0;
}

void cwd_config_unix_perm(const struct cwd_config *c, cwd_config_warn_fn fn, void *userdata,
			  struct nbdsrv_unix_perm *ret_perm)
{
	uint32_t id;
	int r;

	*ret_perm = (struct nbdsrv_unix_perm){ .mode = (mode_t)c->unix_mode, .owner = (uid_t)-1,
					    .group = (gid_t)-1 };
	if (c->unix_owner) {
		r = account_id(c->unix_owner, false, &id);
		if (r == 0)
			ret_perm->owner = (uid_t)id;
		else
			warn(fn, userdata, "listen.unix_owner: user %s: %s; the sockets stay the "
			     "daemon's", c->unix_owner, r == -ENOENT ? "no such name" : strerror(-r));
	}
	if (c->unix_group) {
		r = account_id(c->unix_group, true, &id);
		if (r == 0)
			ret_perm->group = (gid_t)id;
		else
			warn(fn, userdata, "listen.unix_group: group %s: %s; the sockets keep the "
			     "daemon's group", c->unix_group,
			     r == -ENOENT ? "no such name" : strerror(-r));
	}
}
