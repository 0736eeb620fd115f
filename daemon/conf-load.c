/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwised.conf: libconfig syntax, checked against a schema (one table of
 * keys per group).  The first problem stops loading with
 * "FILE:LINE: <what is wrong>; expected <what>"; nothing is half applied,
 * because the result is only handed out when the whole file is good.
 *
 * This file is the loader, on top of the others: the top level (its
 * keys, the defaults, the checks that need the whole file, loading); the
 * groups' keys are in conf-listen.c (listen, tls, metrics),
 * conf-exports.c (exports, access, limits) and conf-disks.c (disks,
 * host), whose entry points conf-groups.h declares, on the getters of
 * conf-schema.c, on the model of conf.h.  conf-accounts.c resolves the
 * names the file gives at start; conf-resv.c reads clockwised -r.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <sys/un.h>
#include <libconfig.h>

#include <clockwise/admit.h>
#include <clockwise/mover.h>

#include "common/util.h"
#include "daemon/conf-groups.h"

#define QUEUE_DEPTH_MAX 4096
#define DEFAULT_QUEUE_DEPTH 32
#define DEFAULT_MOVER_DEPTH 16
#define DEFAULT_RT_PRIORITY 10
#define DEFAULT_BUSY_POLL_US 50
#define DEFAULT_STALL_PROBE_US 1000
#define STALL_PROBE_US_MAX 100000
#define BUSY_POLL_US_MAX 10000

static const struct choice engines[] = {
	{ "io_uring", CW_IO_URING, false },
	{ "libaio", CW_IO_AIO, false },
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

const char *cwd_config_log_level_name(int level)
{
	return conf_choice_name(log_levels, level);
}

/* ---- top level ---- */

static int key_pool(struct parse *p, const config_setting_t *s, void *obj)
{
	return conf_get_path(p, s, 4095, &p->c->pool);
}

static int key_policy(struct parse *p, const config_setting_t *s, void *obj)
{
	int v, r = conf_get_choice(p, s, conf_policies, "a dispatch policy", &v);

	if (r == 0)
		p->c->policy = (enum cwd_config_policy)v;
	return r;
}

static int key_be_order(struct parse *p, const config_setting_t *s, void *obj)
{
	int v, r = conf_get_choice(p, s, conf_be_orders, "a best-effort order", &v);

	if (r == 0)
		p->c->be_order = (enum cwd_config_be_order)v;
	return r;
}

static int key_io_engine(struct parse *p, const config_setting_t *s, void *obj)
{
	int v, r = conf_get_choice(p, s, engines, "an I/O engine", &v);

	if (r == 0)
		p->c->io_engine = (enum cw_io_kind)v;
	return r;
}

static int key_queue_depth(struct parse *p, const config_setting_t *s, void *obj)
{
	long long v;
	int r = conf_get_int(p, s, 1, QUEUE_DEPTH_MAX, &v);

	if (r == 0)
		p->c->queue_depth = (unsigned)v;
	return r;
}

static int key_mover_depth(struct parse *p, const config_setting_t *s, void *obj)
{
	long long v;
	int r = conf_get_int(p, s, 1, CW_MOVER_DEPTH_MAX, &v);

	if (r == 0)
		p->c->mover_depth = (unsigned)v;
	return r;
}

static int key_mover_share(struct parse *p, const config_setting_t *s, void *obj)
{
	long long v;
	int r = conf_get_int(p, s, 1, 100, &v);

	if (r == 0)
		p->c->mover_share = (unsigned)v;
	return r;
}

static int key_rebuild_share(struct parse *p, const config_setting_t *s, void *obj)
{
	long long v;
	int r = conf_get_int(p, s, 0, 90, &v);

	if (r == 0)
		p->c->rebuild_share = (unsigned)v;
	return r;
}

static int key_rt_priority(struct parse *p, const config_setting_t *s, void *obj)
{
	long long v;
	int r = conf_get_int(p, s, 0, 99, &v);

	(void)obj;
	if (r == 0)
		p->c->rt_priority = (unsigned)v;
	return r;
}

static int key_lock_memory(struct parse *p, const config_setting_t *s, void *obj)
{
	(void)obj;
	return conf_get_bool(p, s, &p->c->lock_memory);
}

/* rt_cpus = [ 1, 3 ]: the CPUs the real-time threads may run on. */
static int key_rt_cpus(struct parse *p, const config_setting_t *s, void *obj)
{
	int n;

	(void)obj;
	if (config_setting_type(s) != CONFIG_TYPE_ARRAY)
		return conf_wrong_type(p, s, "an array of CPU numbers, like [ 1, 3 ]");
	n = config_setting_length(s);
	if (n == 0)
		return conf_fail(p, s, "%s is empty; expected at least one CPU number", WHERE(s));
	p->c->rt_cpus = 0;
	for (int i = 0; i < n; i++) {
		long long v;
		int r = conf_get_int(p, config_setting_get_elem(s, (unsigned)i), 0, 63, &v);

		if (r < 0)
			return r;
		p->c->rt_cpus |= UINT64_C(1) << v;
	}
	return 0;
}

static int key_busy_poll_us(struct parse *p, const config_setting_t *s, void *obj)
{
	long long v;
	int r = conf_get_int(p, s, 0, BUSY_POLL_US_MAX, &v);

	(void)obj;
	if (r == 0)
		p->c->busy_poll_us = (unsigned)v;
	return r;
}

static int key_stall_probe_us(struct parse *p, const config_setting_t *s, void *obj)
{
	long long v;
	int r = conf_get_int(p, s, 0, STALL_PROBE_US_MAX, &v);

	(void)obj;
	if (r == 0)
		p->c->stall_probe_us = (unsigned)v;
	return r;
}

static int key_control_socket(struct parse *p, const config_setting_t *s, void *obj)
{
	return conf_get_path(p, s, sizeof(((struct sockaddr_un *)0)->sun_path) - 1, &p->c->control_socket);
}

/* Group names as getgrnam(3) takes them: the same characters as other
 * names here (a group missing at start is the daemon's business). */
static int key_control_read_group(struct parse *p, const config_setting_t *s, void *obj)
{
	return conf_get_name(p, s, 32, &p->c->control_read_group);
}

static int key_control_admin_group(struct parse *p, const config_setting_t *s, void *obj)
{
	return conf_get_name(p, s, 32, &p->c->control_admin_group);
}

static int key_control_idle_timeout_s(struct parse *p, const config_setting_t *s, void *obj)
{
	long long v;
	int r = conf_get_int(p, s, 0, 3600, &v);

	(void)obj;
	if (r == 0)
		p->c->control_idle_timeout_s = (unsigned)v;
	return r;
}

static int key_log_level(struct parse *p, const config_setting_t *s, void *obj)
{
	return conf_get_choice(p, s, log_levels, "a log level", &p->c->log_level);
}

const struct key conf_top_keys[] = {
	{ "pool", key_pool },
	{ "policy", key_policy },
	{ "be_order", key_be_order },
	{ "io_engine", key_io_engine },
	{ "queue_depth", key_queue_depth },
	{ "mover_depth", key_mover_depth },
	{ "mover_share", key_mover_share },
	{ "rebuild_share", key_rebuild_share },
	{ "rt_priority", key_rt_priority },
	{ "lock_memory", key_lock_memory },
	{ "rt_cpus", key_rt_cpus },
	{ "busy_poll_us", key_busy_poll_us },
	{ "stall_probe_us", key_stall_probe_us },
	{ "listen", conf_key_listen },
	{ "tls", conf_key_tls },
	{ "control_socket", key_control_socket },
	{ "control_read_group", key_control_read_group },
	{ "control_admin_group", key_control_admin_group },
	{ "control_idle_timeout_s", key_control_idle_timeout_s },
	{ "log_level", key_log_level },
	{ "exports", conf_key_exports },
	{ "access", conf_key_access },
	{ "limits", conf_key_limits },
	{ "host", conf_key_host },
	{ "metrics", conf_key_metrics },
	{ "disks", conf_key_disks },
	{ NULL, NULL },
};

/* ---- the whole ---- */

void cwd_config_free(struct cwd_config *c)
{
	size_t i;

	if (!c)
		return;
	conf_clear_listen(c);
	free(c->listen_unix);
	free(c->listen_tcp);
	free(c->tls.certificates);
	free(c->tls.psk);
	for (i = 0; i < c->n_disks; i++) {
		free(c->disks[i].path);
		free(c->disks[i].name);
		free(c->disks[i].model);
		free(c->disks[i].domain);
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
	conf_qos_free(c);
	conf_ublk_free(c);
	for (i = 0; c->access && i < CW_EXPORTS_MAX + 1; i++)
		conf_access_clear(&c->access[i]);
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
	c->listen_unix = calloc(CWD_LISTEN_MAX, sizeof(*c->listen_unix));
	c->listen_tcp = calloc(CWD_LISTEN_MAX, sizeof(*c->listen_tcp));
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
	c->rebuild_share = CW_ADMIT_REBUILD_SHARE_PPM / 10000;
	c->rt_priority = DEFAULT_RT_PRIORITY;
	c->lock_memory = true;
	c->host.share_ppm = CW_HOST_SHARE_DEFAULT_PPM;
	c->busy_poll_us = DEFAULT_BUSY_POLL_US;
	c->stall_probe_us = DEFAULT_STALL_PROBE_US;
	c->control_idle_timeout_s = 30;
	c->log_level = LOG_INFO;
	c->exports.block_size = 4096;
	c->exports.max_request_bytes = CWD_REQUEST_MAX_BYTES;
	c->exports.ublk_queue_depth = 64;
	c->exports.ublk_max_request_bytes = 512 << 10;
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

	r = conf_parse_group(p, config_root_setting(cf), conf_top_keys, NULL);
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
		return conf_fail(p, p->listen, "listen has no address; expected at least one unix path "
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
		return conf_fail(p, e, "%s = \"%s\" is not a loopback address, and NBD on it would be "
			    "readable and writable by anyone on the network; expected 127.0.0.1, "
			    "::1 or localhost, tls = \"require\", or insecure = true in listen",
			    WHERE(e), config_setting_get_string(e));
	}
	if (!c->tls.certificates && !c->tls.psk) {
		for (i = 0; i < c->n_listen_unix + c->n_listen_tcp; i++) {
			int t = i < c->n_listen_unix ? c->listen_unix_tls[i] :
				c->listen_tcp[i - c->n_listen_unix].tls;

			if (t != CW_NBD_TLS_OFF)
				return conf_fail(p, p->listen, "%s offers TLS but there are no credentials; "
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
		r = conf_fail(&p, NULL, "invalid configuration; expected clockwised.conf(5)");
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

