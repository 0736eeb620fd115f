/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * conf-internal.h — what the files of the configuration parser share
 * (conf*.c, private to daemon/): the parse in progress, the schema's key
 * and choice tables, the typed getters (conf-schema.c) and each section's
 * entry point, in the sections of the files that define them.
 */
#ifndef CWD_CONF_INTERNAL_H
#define CWD_CONF_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <libconfig.h>

#include "daemon/conf.h"

#define NAME_MAX_BYTES 63	/* layout's CW_NAME_MAX */
#define MAX_REQUEST_MAX (32u << 20)
#define LISTEN_MAX CWD_LISTEN_MAX

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

/* One key of a group and what parses its value into obj. */
struct key {
	const char *name;
	int (*parse)(struct parse *p, const config_setting_t *s, void *obj);
};

/* ---- conf-schema.c: the typed getters every section uses ---- */

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

/* ---- conf.c: the top level ---- */

extern const struct choice conf_policies[], conf_be_orders[];
extern const struct key conf_top_keys[];

/* ---- conf-listen.c: NBD listeners, their unix sockets, TLS, metrics ---- */

/* The port of address v, its text from port on, into *ret. */
int conf_get_port(struct parse *p, const config_setting_t *e, const char *v, const char *port,
		  long *ret);
int conf_key_listen(struct parse *p, const config_setting_t *s, void *obj);
int conf_key_tls(struct parse *p, const config_setting_t *s, void *obj);
int conf_key_metrics(struct parse *p, const config_setting_t *s, void *obj);
void conf_clear_listen(struct cwd_config *c);
extern const struct key conf_listen_keys[], conf_unix_entry_keys[], conf_tcp_entry_keys[],
	conf_tls_keys[], conf_metrics_keys[];

/* ---- conf-exports.c: exports, their QoS, access lists, limits ---- */

int conf_key_exports(struct parse *p, const config_setting_t *s, void *obj);
int conf_key_access(struct parse *p, const config_setting_t *s, void *obj);
int conf_key_limits(struct parse *p, const config_setting_t *s, void *obj);
void conf_qos_free(struct cwd_config *c);
void conf_access_clear(struct cwd_config_access *a);
extern const struct key conf_export_keys[], conf_qos_keys[], conf_access_keys[],
	conf_access_export_keys[], conf_limit_keys[];

/* ---- conf-disks.c: disks and the host's CPUs ---- */

int conf_key_disks(struct parse *p, const config_setting_t *s, void *obj);
int conf_key_host(struct parse *p, const config_setting_t *s, void *obj);
extern const struct key conf_disk_keys[], conf_host_keys[];

#endif
