/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * conf-groups.h — each group of clockwised.conf as the loader
 * (conf-load.c) calls it: the key that takes the group, its key tables
 * (test-conf checks the man page and the shipped example against them)
 * and what frees what it parsed, in sections of the files that define
 * them.  Every group stands on the vocabulary of conf-schema.h; none
 * calls the loader or another group.
 */
#ifndef CWD_CONF_GROUPS_H
#define CWD_CONF_GROUPS_H

#include "daemon/conf-schema.h"

/* ---- conf-load.c: the top level ---- */

extern const struct key conf_top_keys[];

/* ---- conf-listen.c: NBD listeners, their unix sockets, TLS, metrics ---- */

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
void conf_ublk_free(struct cwd_config *c);
void conf_access_clear(struct cwd_config_access *a);
extern const struct key conf_export_keys[], conf_qos_keys[], conf_access_keys[],
	conf_access_export_keys[], conf_limit_keys[];

/* ---- conf-disks.c: disks and the host's CPUs ---- */

int conf_key_disks(struct parse *p, const config_setting_t *s, void *obj);
int conf_key_host(struct parse *p, const config_setting_t *s, void *obj);
extern const struct key conf_disk_keys[], conf_host_keys[];

#endif
