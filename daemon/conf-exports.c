/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * conf-exports.c — what clients get: the exports group (block size,
 * request size, read-only, multi-conn, partial activation and each
 * export's best-effort QoS), the access lists (who may read or write
 * which export) and the limits on clients (connections, timeouts, reply
 * memory).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/admit.h>
#include <clockwise/layout.h>
#include <clockwise/units.h>

#include "common/util.h"
#include "daemon/conf-groups.h"

#define BLOCK_SIZE_MIN 512
#define BLOCK_SIZE_MAX 65536
#define PRINCIPALS_MAX 64
#define PRINCIPAL_EXPECTED "\"*\", a user or \"@group\" (a name or a number)"

/* exports.activation_mode: LVM's words for the same choice. */
static const struct choice activation_modes[] = {
	{ "complete", 0, false },
	{ "partial", 1, false },
	{ NULL, 0, false },
};

/* ---- exports ---- */

static int key_read_only(struct parse *p, const config_setting_t *s, void *obj)
{
	return conf_get_bool(p, s, &p->c->exports.read_only);
}

static int key_export_all(struct parse *p, const config_setting_t *s, void *obj)
{
	return conf_get_bool(p, s, &p->c->exports.all);
}

static int key_activation_mode(struct parse *p, const config_setting_t *s, void *obj)
{
	int v, r = conf_get_choice(p, s, activation_modes, "an activation mode", &v);

	if (r == 0)
		p->c->exports.partial = v;
	return r;
}

static int key_multi_conn(struct parse *p, const config_setting_t *s, void *obj)
{
	return conf_get_bool(p, s, &p->c->exports.multi_conn);
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
			return conf_fail(p, s, "%s = \"%s\" is not a size; expected an integer or "
				    CW_UNITS_SIZE_HELP, WHERE(s), str);
		if (bytes < (uint64_t)min || bytes > (uint64_t)max)
			return conf_fail(p, s, "%s = \"%s\" is out of range; expected a size from %lld to %lld",
				    WHERE(s), str, min, max);
		v = (long long)bytes;
	} else {
		r = conf_get_int(p, s, min, max, &v);
		if (r < 0)
			return r;
	}
	if (!cw_is_pow2_u64((uint64_t)v))
		return conf_fail(p, s, "%s = %lld is not a power of two; expected a power of two from %lld to %lld",
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
	return get_pow2(p, s, BLOCK_SIZE_MIN, CWD_REQUEST_MAX_BYTES, &p->c->exports.max_request_bytes);
}

/* ---- ublk devices ---- */

#define UBLK_DEPTH_MAX 4096		/* ublk_drv's UBLK_MAX_QUEUE_DEPTH */
#define UBLK_REQUEST_MIN 4096
#define UBLK_REQUEST_MAX (1 << 20)	/* its UBLK_MAX_IO_BUF_BYTES */
#define UBLK_QUEUES_MAX 64		/* ublk.h's UBLK_DEV_QUEUES_MAX */

void conf_ublk_free(struct cwd_config *c)
{
	for (size_t i = 0; i < c->exports.n_ublk; i++)
		free(c->exports.ublk[i]);
	free(c->exports.ublk);
	c->exports.ublk = NULL;
	c->exports.n_ublk = 0;
}

static int key_ublk(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config *c = p->c;
	int n;

	if (config_setting_type(s) != CONFIG_TYPE_ARRAY && config_setting_type(s) != CONFIG_TYPE_LIST)
		return conf_wrong_type(p, s, "an array [ \"PARTITION\", ... ]");
	conf_ublk_free(c);
	n = config_setting_length(s);
	if (n == 0)
		return 0;
	if (n > CW_EXPORTS_MAX)
		return conf_fail(p, s, "%s has %d entries; expected at most %d", WHERE(s), n,
				 CW_EXPORTS_MAX);
	c->exports.ublk = calloc(n ? (size_t)n : 1, sizeof(*c->exports.ublk));
	if (!c->exports.ublk)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		int r = conf_get_name(p, config_setting_get_elem(s, (unsigned)i), CW_NAME_MAX,
				      &c->exports.ublk[i]);

		if (r < 0)
			return r;
		c->exports.n_ublk++;
	}
	return 0;
}

static int key_ublk_depth(struct parse *p, const config_setting_t *s, void *obj)
{
	long long v;
	int r = conf_get_int(p, s, 1, UBLK_DEPTH_MAX, &v);

	if (r == 0)
		p->c->exports.ublk_queue_depth = (unsigned)v;
	return r;
}

static int key_ublk_queues(struct parse *p, const config_setting_t *s, void *obj)
{
	long long v;
	int r = conf_get_int(p, s, 0, UBLK_QUEUES_MAX, &v);

	if (r == 0)
		p->c->exports.ublk_queues = (unsigned)v;
	return r;
}

static int key_ublk_max_request(struct parse *p, const config_setting_t *s, void *obj)
{
	return get_pow2(p, s, UBLK_REQUEST_MIN, UBLK_REQUEST_MAX,
			&p->c->exports.ublk_max_request_bytes);
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
			return conf_fail(p, s, "%s = \"%s\" is not a rate; expected " CW_UNITS_IORATE_HELP
				    ", more than 0", WHERE(s), str);
		return 0;
	}
	r = conf_get_int(p, s, 1, INT64_MAX, &v);
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
	int r = conf_get_string(p, s, "an export's name in quotes", &v);

	if (r < 0)
		return r;
	if (!cw_client_name_valid(v))
		return conf_fail(p, s, "%s = \"%s\" is not an export name; expected EXPORT or "
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
	int r = conf_get_int(p, s, 1, CW_BE_WEIGHT_MAX, &v);

	if (r == 0)
		q->qos.weight = (uint32_t)v;
	return r;
}

const struct key conf_qos_keys[] = {
	{ "name", qos_name },
	{ "reserve", qos_reserve },
	{ "weight", qos_weight },
	{ "limit", qos_limit },
	{ NULL, NULL },
};

void conf_qos_free(struct cwd_config *c)
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

	r = conf_get_list(p, s, "a list ( { name = ...; weight = ...; }, ... )", QOS_MAX, &n);
	if (r < 0)
		return r;
	conf_qos_free(c);	/* an earlier list is replaced */
	c->exports.qos = calloc(n ? (size_t)n : 1, sizeof(*c->exports.qos));
	if (!c->exports.qos)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
		struct cwd_config_qos *q = &c->exports.qos[c->exports.n_qos++];

		q->line = config_setting_source_line(e);
		r = conf_parse_group(p, e, conf_qos_keys, q);
		if (r < 0)
			return r;
		if (!q->export)
			return conf_fail(p, e, "%s has no name; expected name = \"EXPORT\" in every entry",
				    WHERE(e));
		if (!q->qos.reserve && !q->qos.limit && !q->qos.weight)
			return conf_fail(p, e, "%s (export %s) sets nothing; expected reserve, weight or "
				    "limit", WHERE(e), q->export);
		if (q->qos.reserve && q->qos.limit && q->qos.reserve_iops == q->qos.limit_iops &&
		    q->qos.limit < q->qos.reserve)
			return conf_fail(p, e, "%s (export %s): the limit is below the reservation; "
				    "expected a limit of at least the reservation", WHERE(e), q->export);
		for (size_t j = 0; j + 1 < c->exports.n_qos; j++)
			if (!strcmp(c->exports.qos[j].export, q->export))
				return conf_fail(p, e, "export \"%s\" has two QoS entries (also at line %u); "
					    "expected one", q->export, c->exports.qos[j].line);
	}
	return 0;
}

const struct key conf_export_keys[] = {
	{ "read_only", key_read_only },
	{ "block_size", key_block_size },
	{ "max_request_bytes", key_max_request },
	{ "multi_conn", key_multi_conn },
	{ "all", key_export_all },
	{ "activation_mode", key_activation_mode },
	{ "qos", key_qos },
	{ "ublk", key_ublk },
	{ "ublk_queue_depth", key_ublk_depth },
	{ "ublk_queues", key_ublk_queues },
	{ "ublk_max_request_bytes", key_ublk_max_request },
	{ NULL, NULL },
};

int conf_key_exports(struct parse *p, const config_setting_t *s, void *obj)
{
	int r = conf_parse_group(p, s, conf_export_keys, NULL);

	if (r == 0 && p->c->exports.max_request_bytes < p->c->exports.block_size)
		return conf_fail(p, s, "exports.max_request_bytes (%u) is smaller than exports.block_size (%u); "
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

void conf_access_clear(struct cwd_config_access *a)
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
		return conf_wrong_type(p, s, "an array [ " PRINCIPAL_EXPECTED ", ... ]");
	n = config_setting_length(s);
	if (n > PRINCIPALS_MAX)
		return conf_fail(p, s, "%s has %d entries; expected at most %d", WHERE(s), n,
			    PRINCIPALS_MAX);
	v = calloc((size_t)n + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
		const char *x;

		if (config_setting_type(e) != CONFIG_TYPE_STRING) {
			free_strings(v, (size_t)i);
			return conf_wrong_type(p, e, PRINCIPAL_EXPECTED);
		}
		x = config_setting_get_string(e);
		if (strcmp(x, "*") != 0 && !conf_valid_account(x[0] == '@' ? x + 1 : x)) {
			free_strings(v, (size_t)i);
			return conf_fail(p, e, "%s = \"%s\" names nobody; expected " PRINCIPAL_EXPECTED,
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

	return conf_get_name(p, s, CWD_NAME_MAX_BYTES, &a->export);
}

const struct key conf_access_export_keys[] = {
	{ "name", access_export_name },
	{ "read_write", access_read_write },
	{ "read_only", access_read_only },
	{ NULL, NULL },
};

static int access_exports(struct parse *p, const config_setting_t *s, void *obj)
{
	struct cwd_config *c = p->c;
	int n = 0, i, r;

	r = conf_get_list(p, s, "a list ( { name = ...; read_write = [ ... ]; }, ... )",
		     CW_EXPORTS_MAX, &n);
	if (r < 0)
		return r;
	/* Entries of an earlier exports list are replaced, the default kept. */
	while (c->n_access > 1)
		conf_access_clear(&c->access[--c->n_access]);
	for (i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
		struct cwd_config_access *a = &c->access[c->n_access];
		size_t j;

		c->n_access++;
		a->line = config_setting_source_line(e);
		r = conf_parse_group(p, e, conf_access_export_keys, a);
		if (r < 0)
			return r;
		if (!a->export)
			return conf_fail(p, e, "%s has no name; expected name = \"PARTITION\" in every "
				    "entry", WHERE(e));
		for (j = 1; j + 1 < c->n_access; j++)
			if (!strcmp(c->access[j].export, a->export))
				return conf_fail(p, e, "export \"%s\" has two access entries (also at "
					    "line %u); expected one", a->export, c->access[j].line);
	}
	return 0;
}

const struct key conf_access_keys[] = {
	{ "read_write", access_read_write },
	{ "read_only", access_read_only },
	{ "exports", access_exports },
	{ NULL, NULL },
};

int conf_key_access(struct parse *p, const config_setting_t *s, void *obj)
{
	return conf_parse_group(p, s, conf_access_keys, &p->c->access[0]);
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
	int r = conf_get_int(p, s, min, max, &v);

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
	int r = conf_get_int(p, s, (long long)REPLY_MEMORY_MIN, (long long)REPLY_MEMORY_MAX, &v);

	if (r == 0)
		p->c->limits.reply_memory_bytes = (uint64_t)v;
	return r;
}

const struct key conf_limit_keys[] = {
	{ "connections", limit_connections },
	{ "connections_per_user", limit_per_user },
	{ "handshake_timeout_s", limit_handshake },
	{ "idle_timeout_s", limit_idle },
	{ "stall_timeout_s", limit_stall },
	{ "reply_memory_bytes", limit_reply_memory },
	{ NULL, NULL },
};

int conf_key_limits(struct parse *p, const config_setting_t *s, void *obj)
{
	int r = conf_parse_group(p, s, conf_limit_keys, NULL);

	if (r == 0 && !p->limit_per_user)
		p->c->limits.connections_per_user = CW_MAX(p->c->limits.connections / 2, 1u);
	if (r == 0 && p->c->limits.connections_per_user > p->c->limits.connections)
		return conf_fail(p, p->limit_per_user, "limits.connections_per_user (%u) is more than "
			    "limits.connections (%u); expected at most as many",
			    p->c->limits.connections_per_user, p->c->limits.connections);
	return r;
}

