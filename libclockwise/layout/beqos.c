/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Exports' best-effort QoS in the pool database (table be_qos, schema 4):
 * what `cwctl export qos` stored, read back when the daemon starts. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/pool-objects.h>

#include "layout/layout-internal.h"

static const char sql_qos_put[] =
	"INSERT OR REPLACE INTO be_qos(export, part, reserve, reserve_iops, weight, lim, lim_iops)"
	" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
static const char sql_qos_del[] = "DELETE FROM be_qos WHERE export = ?1";
static const char sql_qos_all[] =
	"SELECT export, part, reserve, reserve_iops, weight, lim, lim_iops FROM be_qos"
	" ORDER BY export";

int cw_be_qos_put(struct cw_pool *pool, const struct cw_be_qos_rec *q)
{
	sqlite3_stmt *st;
	bool found = false;
	int r;

	if (!pool || !q)
		return -EINVAL;
	pthread_mutex_lock(&pool->lock);
	for (struct cw_part *p = pool->parts; p && !found; p = p->next)
		found = p->id == q->part_id;
	if (!cw_client_name_valid(q->export_name)) {
		r = lay_set_error(pool, -EINVAL, "export name '%s' is not valid", q->export_name);
		goto out;
	}
	if (q->qos.weight < 1 || q->qos.weight > CW_BE_WEIGHT_MAX ||
	    q->qos.reserve > INT64_MAX || q->qos.limit > INT64_MAX) {
		r = lay_set_error(pool, -EINVAL, "export '%s': weight %u or a rate is out of range",
				  q->export_name, q->qos.weight);
		goto out;
	}
	if (!found) {
		r = lay_set_error(pool, -ENOENT, "no partition with id %llu",
				  (unsigned long long)q->part_id);
		goto out;
	}
	r = meta_begin(pool->meta);
	if (r == 0)
		r = meta_stmt(pool->meta, sql_qos_put, &st);
	if (r == 0) {
		sqlite3_bind_text(st, 1, q->export_name, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, (int64_t)q->part_id);
		sqlite3_bind_int64(st, 3, (int64_t)q->qos.reserve);
		sqlite3_bind_int(st, 4, q->qos.reserve_iops);
		sqlite3_bind_int(st, 5, (int)q->qos.weight);
		sqlite3_bind_int64(st, 6, (int64_t)q->qos.limit);
		sqlite3_bind_int(st, 7, q->qos.limit_iops);
		r = meta_step(st);
	}
	r = meta_end(pool->meta, r);
	if (r < 0)
		lay_set_error(pool, r, "storing the QoS of export '%s': %s", q->export_name,
			      strerror(-r));
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_be_qos_remove(struct cw_pool *pool, const char *name)
{
	sqlite3_stmt *st;
	int r;

	if (!pool || !name)
		return -EINVAL;
	pthread_mutex_lock(&pool->lock);
	r = meta_begin(pool->meta);
	if (r == 0)
		r = meta_stmt(pool->meta, sql_qos_del, &st);
	if (r == 0) {
		sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
		r = meta_step(st);
	}
	if (r == 0 && sqlite3_changes(pool->meta->db) == 0) {
		meta_rollback(pool->meta);
		r = lay_set_error(pool, -ENOENT, "export '%s' has no stored QoS", name);
		goto out;
	}
	r = meta_end(pool->meta, r);
	if (r < 0)
		lay_set_error(pool, r, "removing the QoS of export '%s': %s", name, strerror(-r));
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_be_qos_list(struct cw_pool *pool, struct cw_be_qos_rec **ret, size_t *ret_n)
{
	struct cw_be_qos_rec *list = NULL;
	size_t n = 0, cap = 0;
	sqlite3_stmt *st = NULL;
	int r, rc = SQLITE_DONE;

	if (!pool || !ret || !ret_n)
		return -EINVAL;
	pthread_mutex_lock(&pool->lock);
	r = meta_stmt(pool->meta, sql_qos_all, &st);
	while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (n == cap) {
			struct cw_be_qos_rec *nl = realloc(list, (cap ? 2 * cap : 8) * sizeof(*nl));

			if (!nl) {
				r = -ENOMEM;
				break;
			}
			list = nl;
			cap = cap ? 2 * cap : 8;
		}
		memset(&list[n], 0, sizeof(list[n]));
		snprintf(list[n].export_name, sizeof(list[n].export_name), "%s",
			 (const char *)sqlite3_column_text(st, 0));
		list[n].part_id = (uint64_t)sqlite3_column_int64(st, 1);
		list[n].qos.reserve = (uint64_t)sqlite3_column_int64(st, 2);
		list[n].qos.reserve_iops = sqlite3_column_int(st, 3) != 0;
		list[n].qos.weight = (uint32_t)sqlite3_column_int(st, 4);
		list[n].qos.limit = (uint64_t)sqlite3_column_int64(st, 5);
		list[n].qos.limit_iops = sqlite3_column_int(st, 6) != 0;
		n++;
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = meta_errno(rc);
	if (st)
		sqlite3_reset(st);
	if (r < 0) {
		free(list);
		lay_set_error(pool, r, "reading the exports' QoS: %s", strerror(-r));
	} else {
		*ret = list;
		*ret_n = n;
	}
	pthread_mutex_unlock(&pool->lock);
	return r;
}
