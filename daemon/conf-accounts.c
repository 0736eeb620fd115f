/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * conf-accounts.c — the users and groups the configuration names (access
 * lists, the unix sockets' owner and group), resolved to ids when the
 * daemon starts.  A name nobody has is left out with a warning through
 * the caller's function: the file was good, the system changed.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/conf.h"

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
