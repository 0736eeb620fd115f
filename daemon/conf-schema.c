/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * conf-schema.c — the configuration's vocabulary: the typed getters (an
 * integer in range, a boolean, a choice, an absolute path, a name) and
 * the group walker that runs each key's parser, every one failing with
 * "FILE:LINE: <what>; expected <what>" at the setting's line, and the
 * spellings of the dispatch policies and best-effort orders.  The groups
 * (conf-load.c's top level, conf-listen.c, conf-exports.c, conf-disks.c)
 * say what each key means; this file calls none of them.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "daemon/conf-schema.h"

#define PRINCIPAL_NAME_MAX 32

const struct choice conf_policies[] = {
	{ "delta-l", CWD_POLICY_DELTA_L, false },
	{ "edf", CWD_POLICY_EDF, false },
	{ "lst", CWD_POLICY_LST, false },
	{ "dynamic", CWD_POLICY_DYNAMIC, false },
	{ NULL, 0, false },
};

const struct choice conf_be_orders[] = {
	{ "fifo", CWD_BE_FIFO, false },
	{ "rbfq", CWD_BE_RBFQ, false },
	{ "sfc", CWD_BE_SFC, false },
	{ NULL, 0, false },
};

const char *conf_choice_name(const struct choice *t, int value)
{
	for (; t->name; t++)
		if (t->value == value && !t->alias)
			return t->name;
	return NULL;
}

const char *cwd_config_policy_name(enum cwd_config_policy p)
{
	return conf_choice_name(conf_policies, (int)p);
}

const char *cwd_config_be_order_name(enum cwd_config_be_order o)
{
	return conf_choice_name(conf_be_orders, (int)o);
}

/* "disks[2].tier", "listen.tcp[0]": where a setting sits in the file. */
void conf_setting_path(const config_setting_t *s, char *buf, size_t n)
{
	const config_setting_t *parent = s->parent;
	size_t len;

	buf[0] = '\0';
	if (!parent)
		return;
	conf_setting_path(parent, buf, n);
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
int conf_fail(struct parse *p, const config_setting_t *s, const char *fmt, ...)
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

int conf_wrong_type(struct parse *p, const config_setting_t *s, const char *expected)
{
	return conf_fail(p, s, "%s is %s; expected %s", WHERE(s), type_name(s), expected);
}

int conf_get_int(struct parse *p, const config_setting_t *s, long long min, long long max,
		   long long *ret)
{
	long long v;

	if (config_setting_type(s) != CONFIG_TYPE_INT && config_setting_type(s) != CONFIG_TYPE_INT64)
		return conf_fail(p, s, "%s is %s; expected an integer from %lld to %lld", WHERE(s),
			    type_name(s), min, max);
	v = config_setting_get_int64(s);
	if (v < min || v > max)
		return conf_fail(p, s, "%s = %lld is out of range; expected an integer from %lld to %lld",
			    WHERE(s), v, min, max);
	*ret = v;
	return 0;
}

int conf_get_bool(struct parse *p, const config_setting_t *s, bool *ret)
{
	if (config_setting_type(s) != CONFIG_TYPE_BOOL)
		return conf_wrong_type(p, s, "true or false");
	*ret = config_setting_get_bool(s);
	return 0;
}

int conf_get_string(struct parse *p, const config_setting_t *s, const char *expected,
		      const char **ret)
{
	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return conf_wrong_type(p, s, expected);
	*ret = config_setting_get_string(s);
	return 0;
}

int conf_get_choice(struct parse *p, const config_setting_t *s, const struct choice *t,
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
	r = conf_get_string(p, s, expected, &v);
	if (r < 0)
		return r;
	for (c = t; c->name; c++)
		if (!strcmp(v, c->name)) {
			*ret = c->value;
			return 0;
		}
	return conf_fail(p, s, "%s = \"%s\" is not %s; expected %s", WHERE(s), v, what, expected);
}

/* An absolute path of at most max bytes, copied into *ret. */
int conf_get_path(struct parse *p, const config_setting_t *s, size_t max, char **ret)
{
	const char *v = NULL;
	int r;

	r = conf_get_string(p, s, "an absolute path in quotes", &v);
	if (r < 0)
		return r;
	if (v[0] != '/')
		return conf_fail(p, s, "%s = \"%s\" is not an absolute path; expected a path starting with /",
			    WHERE(s), v);
	if (strlen(v) > max)
		return conf_fail(p, s, "%s is %zu bytes long; expected an absolute path of at most %zu bytes",
			    WHERE(s), strlen(v), max);
	free(*ret);
	*ret = strdup(v);
	return *ret ? 0 : -ENOMEM;
}

/* Names of disks and models: [A-Za-z0-9._-], not starting with '.'. */
bool conf_name_ok(const char *v, size_t max)
{
	const char *q;

	for (q = v; *q; q++)
		if (!(*q >= 'a' && *q <= 'z') && !(*q >= 'A' && *q <= 'Z') &&
		    !(*q >= '0' && *q <= '9') && *q != '.' && *q != '_' && *q != '-')
			break;
	return !*q && v[0] != '\0' && v[0] != '.' && strlen(v) <= max;
}

int conf_get_name(struct parse *p, const config_setting_t *s, size_t max, char **ret)
{
	const char *v = NULL;
	int r;

	r = conf_get_string(p, s, "a name in quotes", &v);
	if (r < 0)
		return r;
	if (!conf_name_ok(v, max))
		return conf_fail(p, s, "%s = \"%s\" is not a valid name; expected 1 to %zu of "
			    "A-Z a-z 0-9 . _ -, not starting with .", WHERE(s), v, max);
	free(*ret);
	*ret = strdup(v);
	return *ret ? 0 : -ENOMEM;
}

int conf_parse_group(struct parse *p, const config_setting_t *g, const struct key *keys, void *obj)
{
	int i, n, r;

	if (!config_setting_is_group(g))
		return conf_wrong_type(p, g, "a group { name = value; ... }");
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
			conf_setting_path(g, where, sizeof(where));
			return conf_fail(p, s, "unknown setting \"%s\"%s%s; expected %s", s->name,
				    where[0] ? " in " : "", where, expected);
		}
		r = k->parse(p, s, obj);
		if (r < 0)
			return r;
	}
	return 0;
}

/* A list of groups of at most max entries: its length in *ret_n. */
int conf_get_list(struct parse *p, const config_setting_t *s, const char *expected, int max,
		    int *ret_n)
{
	if (config_setting_type(s) != CONFIG_TYPE_LIST)
		return conf_wrong_type(p, s, expected);
	*ret_n = config_setting_length(s);
	if (*ret_n > max)
		return conf_fail(p, s, "%s has %d entries; expected at most %d", WHERE(s), *ret_n, max);
	return 0;
}

/* A user or group name as useradd(8) allows, or a number. */
bool conf_valid_account(const char *v)
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
