/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * conf-schema.h — the configuration's vocabulary (conf-schema.c), what
 * every group's parser stands on: the parse in progress, the schema's key
 * and choice tables, the typed getters, and the spellings of the model's
 * enumerations that more than one group takes.  Private to daemon/conf*.c.
 *
 * The files of the configuration call one way:
 *   conf-load.c (top level, defaults, whole-file checks, loading)
 *     -> conf-listen.c, conf-exports.c, conf-disks.c (the groups; their
 *        entry points in conf-groups.h)
 *     -> conf-schema.c (this vocabulary)
 *     -> conf.h (the model: struct cwd_config, its limits and defaults)
 * conf-resv.c (clockwised -r) takes the schema's name check;
 * conf-accounts.c (the names resolved at start) needs the model alone.
 */
#ifndef CWD_CONF_SCHEMA_H
#define CWD_CONF_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <libconfig.h>

#include "daemon/conf.h"

struct parse {
	const char *file;	/* for messages when libconfig has no file name */
	char *error;
	struct cwd_config *c;
	/* Settings checked once the whole file is read, since libconfig
	 * keeps no order between them. */
	const config_setting_t *listen;
	/* Each TCP address (for messages); the TLS mode each listener names
	 * (plus one, 0: none), and listen.tls for the others. */
	const config_setting_t *tcp_setting[CWD_LISTEN_MAX];
	int unix_tls[CWD_LISTEN_MAX], tcp_tls[CWD_LISTEN_MAX];
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

/* One key of a group and what parses its value into obj. */
struct key {
	const char *name;
	int (*parse)(struct parse *p, const config_setting_t *s, void *obj);
};

/* ---- the typed getters every group uses ---- */

/* "disks[2].tier", "listen.tcp[0]": where a setting sits in the file. */
void conf_setting_path(const config_setting_t *s, char *buf, size_t n);
#define PATH_BUF 256
#define WHERE(s) ({ static __thread char _w[PATH_BUF]; conf_setting_path((s), _w, sizeof(_w)); _w; })

/* Records the first problem, at s's line: "FILE:LINE: " + fmt; -EINVAL. */
__attribute__((format(printf, 3, 4)))
int conf_fail(struct parse *p, const config_setting_t *s, const char *fmt, ...);
int conf_wrong_type(struct parse *p, const config_setting_t *s, const char *expected);
int conf_get_int(struct parse *p, const config_setting_t *s, long long min, long long max,
		 long long *ret);
int conf_get_bool(struct parse *p, const config_setting_t *s, bool *ret);
int conf_get_string(struct parse *p, const config_setting_t *s, const char *expected,
		    const char **ret);
int conf_get_choice(struct parse *p, const config_setting_t *s, const struct choice *t,
		    const char *what, int *ret);
/* An absolute path of at most max bytes, copied into *ret. */
int conf_get_path(struct parse *p, const config_setting_t *s, size_t max, char **ret);
/* Names of disks and models: [A-Za-z0-9._-], not starting with '.'. */
bool conf_name_ok(const char *v, size_t max);
int conf_get_name(struct parse *p, const config_setting_t *s, size_t max, char **ret);
/* Each setting of group g through its key in keys (unknown: an error). */
int conf_parse_group(struct parse *p, const config_setting_t *g, const struct key *keys,
		     void *obj);
/* A list of groups of at most max entries: its length in *ret_n. */
int conf_get_list(struct parse *p, const config_setting_t *s, const char *expected, int max,
		  int *ret_n);
/* A user or group name as useradd(8) allows, or a number. */
bool conf_valid_account(const char *v);

/* ---- the model's enumerations, as the file spells them ---- */

/* Dispatch policies and best-effort orders: the top level sets them for
 * every disk, a disk for itself (conf-disks.c). */
extern const struct choice conf_policies[], conf_be_orders[];
/* The canonical spelling of value in t, or NULL. */
const char *conf_choice_name(const struct choice *t, int value);

#endif
