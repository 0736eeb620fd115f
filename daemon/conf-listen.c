/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * conf-listen.c — where clockwised listens and who may connect there:
 * the listen group (unix sockets with their mode, owner and group, TCP
 * addresses, each listener's TLS mode), the TLS credentials, and the
 * metrics group's addresses.  A TCP listener beyond loopback without TLS
 * is refused unless the file says insecure (checked in conf-load.c once
 * the whole file is read).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "daemon/conf-groups.h"

/* ---- listen ---- */

/* The server holds CWD_LISTEN_MAX listeners, unix and TCP together: one
 * more is an error here, with its line, not a listener dropped later. */
static int listener_room(struct parse *p, const config_setting_t *e)
{
	if (p->c->n_listen_unix + p->c->n_listen_tcp < CWD_LISTEN_MAX)
		return 0;
	return conf_fail(p, e, "%s is one listener too many; expected at most %d listeners, unix "
		    "and tcp together", WHERE(e), CWD_LISTEN_MAX);
}

static int add_unix(struct parse *p, const config_setting_t *e, const char *v)
{
	struct cwd_config *c = p->c;
	char *path = NULL;
	int r;

	r = listener_room(p, e);
	if (r < 0)
		return r;
	r = conf_get_path(p, e, sizeof(((struct sockaddr_un *)0)->sun_path) - 1, &path);
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
		return conf_fail(p, e, "%s = \"%s\" has no valid port; expected a port from 1 to 65535",
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
			return conf_fail(p, e, "%s = \"%s\" is not a TCP address; expected " TCP_EXPECTED,
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
		return conf_fail(p, e, "%s = \"%s\" is not a TCP address; expected " TCP_EXPECTED, WHERE(e), v);
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
	int r = conf_get_string(p, s, "a string", &v);

	if (r == 0)
		r = le->add(p, s, v);
	le->added = r == 0;
	return r;
}

static int key_entry_tls(struct parse *p, const config_setting_t *s, void *obj)
{
	return conf_get_choice(p, s, tls_modes, "a TLS mode", &((struct listener_entry *)obj)->tls);
}

const struct key conf_unix_entry_keys[] = {
	{ "path", key_entry_value },
	{ "tls", key_entry_tls },
	{ NULL, NULL },
};

const struct key conf_tcp_entry_keys[] = {
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
		return conf_wrong_type(p, s, expected);
	n = config_setting_length(s);
	if (n > CWD_LISTEN_MAX)
		return conf_fail(p, s, "%s has %d entries; expected at most %d", WHERE(s), n,
				 CWD_LISTEN_MAX);
	for (i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
		struct listener_entry le = { .what = entry_keys[0].name, .add = add, .tls = -1 };

		if (config_setting_type(e) == CONFIG_TYPE_STRING) {
			r = add(p, e, config_setting_get_string(e));
		} else if (config_setting_is_group(e)) {
			r = conf_parse_group(p, e, entry_keys, &le);
			if (r == 0 && !le.added)
				r = conf_fail(p, e, "%s has no %s; expected { %s = \"...\"; tls = \"...\"; }",
					 WHERE(e), le.what, le.what);
			if (r == 0)
				tls_of[*count - 1] = le.tls + 1;
		} else {
			r = conf_wrong_type(p, e, expected);
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
				 conf_unix_entry_keys, add_unix, p->unix_tls, &p->c->n_listen_unix);
}

static int key_listen_tcp(struct parse *p, const config_setting_t *s, void *obj)
{
	return for_each_listener(p, s, "an array of TCP addresses [ \"127.0.0.1:10809\", ... ], or "
				 "a list of them and groups { address = \"...\"; tls = \"require\"; }",
				 conf_tcp_entry_keys, add_tcp, p->tcp_tls, &p->c->n_listen_tcp);
}

static int key_listen_tls(struct parse *p, const config_setting_t *s, void *obj)
{
	p->listen_tls_setting = s;
	return conf_get_choice(p, s, tls_modes, "a TLS mode", &p->listen_tls);
}

static int key_insecure(struct parse *p, const config_setting_t *s, void *obj)
{
	return conf_get_bool(p, s, &p->c->insecure);
}

/* ---- who may connect on the unix sockets ---- */

/* A user or group name (or number), copied into *ret. */
static int get_account(struct parse *p, const config_setting_t *s, const char *what, char **ret)
{
	const char *v = NULL;
	int r = conf_get_string(p, s, what, &v);

	if (r < 0)
		return r;
	if (!conf_valid_account(v))
		return conf_fail(p, s, "%s = \"%s\" is not a valid name; expected %s", WHERE(s), v, what);
	free(*ret);
	*ret = strdup(v);
	return *ret ? 0 : -ENOMEM;
}

static int key_unix_mode(struct parse *p, const config_setting_t *s, void *obj)
{
	const char *v = NULL, *q;
	unsigned long m;
	char *end;
	int r = conf_get_string(p, s, "an octal mode in quotes such as \"0660\"", &v);

	if (r < 0)
		return r;
	for (q = v; *q >= '0' && *q <= '7'; q++)
		;
	errno = 0;
	m = strtoul(v, &end, 8);
	if (!*v || *q || errno || m > 0777 || m == 0)
		return conf_fail(p, s, "%s = \"%s\" is not a file mode; expected octal digits from "
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

const struct key conf_listen_keys[] = {
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
	return conf_get_path(p, s, 4000, &p->c->tls.certificates);
}

static int key_tls_psk(struct parse *p, const config_setting_t *s, void *obj)
{
	free(p->c->tls.psk);
	p->c->tls.psk = NULL;
	return conf_get_path(p, s, 4000, &p->c->tls.psk);
}

static int key_tls_verify_peer(struct parse *p, const config_setting_t *s, void *obj)
{
	return conf_get_bool(p, s, &p->c->tls.verify_peer);
}

const struct key conf_tls_keys[] = {
	{ "certificates", key_tls_certificates },
	{ "psk", key_tls_psk },
	{ "verify_peer", key_tls_verify_peer },
	{ NULL, NULL },
};

int conf_key_tls(struct parse *p, const config_setting_t *s, void *obj)
{
	int r = conf_parse_group(p, s, conf_tls_keys, NULL);

	if (r == 0 && p->c->tls.certificates && p->c->tls.psk)
		return conf_fail(p, s, "%s names certificates and psk; expected one of the two", WHERE(s));
	if (r == 0 && p->c->tls.psk && p->c->tls.verify_peer)
		return conf_fail(p, s, "%s asks for clients' certificates with psk; expected "
			    "certificates = \"...\" with verify_peer = true, or psk alone", WHERE(s));
	return r;
}

void conf_clear_listen(struct cwd_config *c)
{
	size_t i;

	for (i = 0; i < c->n_listen_unix; i++)
		free(c->listen_unix[i]);
	for (i = 0; i < c->n_listen_tcp; i++)
		free(c->listen_tcp[i].host);
	c->n_listen_unix = c->n_listen_tcp = 0;
}

int conf_key_listen(struct parse *p, const config_setting_t *s, void *obj)
{
	/* A listen group replaces the default address: it lists them all. */
	const config_setting_t *old;

	conf_clear_listen(p->c);
	p->listen = s;
	/* The old name for TCP anywhere in the clear: now it takes the word. */
	if (config_setting_is_group(s) && (old = config_setting_get_member(s, "allow_remote")))
		return conf_fail(p, old, "%s is no longer a setting: NBD on TCP beyond loopback is "
			    "readable and writable by anyone on the network; expected "
			    "insecure = true in listen if that is meant", WHERE(old));
	return conf_parse_group(p, s, conf_listen_keys, NULL);
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
		return conf_fail(p, e, "%s is one address too many; expected at most %d", WHERE(e),
			    CWD_METRICS_LISTEN_MAX);
	r = conf_get_string(p, e, "a string", &v);
	if (r < 0)
		return r;
	memset(ss, 0, sizeof(*ss));
	if (v[0] == '/') {
		struct sockaddr_un *sa = (struct sockaddr_un *)ss;
		_cleanup_free_ char *path = NULL;

		r = conf_get_path(p, e, sizeof(sa->sun_path) - 1, &path);
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
	return conf_fail(p, e, "%s = \"%s\" is not an address; expected " METRICS_EXPECTED, WHERE(e), v,
		    CWD_DEFAULT_METRICS_PORT);
remote:
	return conf_fail(p, e, "%s = \"%s\" is not a loopback address: anyone who reaches it would "
		    "read the counters; expected a unix socket, 127.X.X.X or [::1]", WHERE(e), v);
}

static int key_metrics_listen(struct parse *p, const config_setting_t *s, void *obj)
{
	int n, r;

	p->c->metrics.n = 0;
	if (config_setting_type(s) == CONFIG_TYPE_STRING)
		return add_metrics(p, s);
	if (config_setting_type(s) != CONFIG_TYPE_ARRAY && config_setting_type(s) != CONFIG_TYPE_LIST)
		return conf_wrong_type(p, s, "an array of addresses [ \"127.0.0.1:9477\", "
				  "\"/run/clockwise/metrics.sock\" ]");
	n = config_setting_length(s);
	for (int i = 0; i < n; i++) {
		r = add_metrics(p, config_setting_get_elem(s, (unsigned)i));
		if (r < 0)
			return r;
	}
	return 0;
}

const struct key conf_metrics_keys[] = {
	{ "listen", key_metrics_listen },
	{ NULL, NULL },
};

int conf_key_metrics(struct parse *p, const config_setting_t *s, void *obj)
{
	return conf_parse_group(p, s, conf_metrics_keys, NULL);
}

