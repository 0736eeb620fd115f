/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Each disk's service-time model (table disk_model) and the model it
 * emulates (table disk_emulate) in the pool database, stored in model.h's
 * one-line text form so that a newer form is refused whole rather than
 * half read. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include <clockwise/model.h>

#include "common/cleanup.h"
#include "layout/layout-internal.h"

static const char sql_model_put[] =
	"INSERT INTO disk_model(disk, model, calibrated) VALUES (?1, ?2, ?3) "
	"ON CONFLICT(disk) DO UPDATE SET model = ?2, calibrated = ?3";
static const char sql_part_service[] =
	"UPDATE resv_disk SET service_ns = ?3 WHERE resv = ?1 AND disk = ?2";
static const char sql_model_get[] =
	"SELECT model, calibrated FROM disk_model WHERE disk = ?1";
static const char sql_emulate_put[] =
	"INSERT INTO disk_emulate(disk, model) VALUES (?1, ?2) "
	"ON CONFLICT(disk) DO UPDATE SET model = ?2";
static const char sql_emulate_del[] = "DELETE FROM disk_emulate WHERE disk = ?1";
static const char sql_emulate_get[] = "SELECT model, 0 FROM disk_emulate WHERE disk = ?1";

static bool disk_known(struct cw_pool *pool, uint32_t disk_id)
{
	return disk_id >= 1 && disk_id <= CW_DISKS_MAX && pool->disks[disk_id];
}

/* Stores model (NULL: deletes the row) with sql, ?3 being calibrated, and
 * in the same transaction the n parts' new service times. */
static int model_put(struct cw_pool *pool, uint32_t disk_id, const char *sql,
		     const struct cw_model *model, bool calibrated, const uint64_t *resv_ids,
		     const int64_t *service_ns, size_t n)
{
	_cleanup_free_ char *text = NULL;
	sqlite3_stmt *st;
	int len = 0, r;

	if (model)
		len = cw_model_format(model, NULL, 0);
	if (len < 0)
		return lay_set_error(pool, -EINVAL, "the model for disk %u is not valid", disk_id);
	text = malloc((size_t)len + 1);
	if (!text)
		return lay_set_error(pool, -ENOMEM, "out of memory");
	if (model)
		cw_model_format(model, text, (size_t)len + 1);

	pthread_mutex_lock(&pool->lock);
	if (!disk_known(pool, disk_id)) {
		r = lay_set_error(pool, -ENOENT, "no disk %u in the pool", disk_id);
		goto out;
	}
	r = meta_begin(pool->meta);
	if (r == 0)
		r = meta_stmt(pool->meta, sql, &st);
	if (r == 0) {
		sqlite3_bind_int64(st, 1, disk_id);
		if (model)
			sqlite3_bind_text(st, 2, text, len, SQLITE_STATIC);
		if (sql == sql_model_put)
			sqlite3_bind_int(st, 3, calibrated);
		r = meta_step(st);
	}
	for (size_t i = 0; r == 0 && i < n; i++) {
		r = meta_exec(pool->meta, sql_part_service, 3, (int64_t)resv_ids[i],
			      (int64_t)disk_id, service_ns[i]);
		if (r == 0 && sqlite3_changes(pool->meta->db) != 1)
			r = -ENOENT;	/* no such part: nothing is half changed */
	}
	r = meta_end(pool->meta, r);
	if (r < 0)
		lay_set_error(pool, r, "storing the model of disk %u: %s", disk_id, strerror(-r));
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_disk_model_set(struct cw_pool *pool, uint32_t disk_id, const struct cw_model *model,
		      bool calibrated)
{
	return cw_disk_model_readmit(pool, disk_id, model, calibrated, NULL, NULL, 0);
}

int cw_disk_model_readmit(struct cw_pool *pool, uint32_t disk_id, const struct cw_model *model,
			  bool calibrated, const uint64_t *resv_ids, const int64_t *service_ns,
			  size_t n)
{
	if (!model)
		return lay_set_error(pool, -EINVAL, "the model for disk %u is not valid", disk_id);
	if (n && (!resv_ids || !service_ns))
		return lay_set_error(pool, -EINVAL, "reservation parts missing");
	for (size_t i = 0; i < n; i++)
		if (service_ns[i] <= 0)
			return lay_set_error(pool, -EINVAL, "a part needs a positive service time");
	return model_put(pool, disk_id, sql_model_put, model, calibrated, resv_ids, service_ns, n);
}

int cw_disk_emulate_set(struct cw_pool *pool, uint32_t disk_id, const struct cw_model *model)
{
	return model_put(pool, disk_id, model ? sql_emulate_put : sql_emulate_del, model, false,
			 NULL, NULL, 0);
}

/* Reads the model sql selects (model, flag) for the disk. */
static int model_get(struct cw_pool *pool, uint32_t disk_id, const char *sql, const char *what,
		     struct cw_model *ret_model, bool *ret_flag)
{
	sqlite3_stmt *st;
	int r, rc;

	pthread_mutex_lock(&pool->lock);
	if (!disk_known(pool, disk_id)) {
		r = lay_set_error(pool, -ENOENT, "no disk %u in the pool", disk_id);
		goto out;
	}
	r = meta_stmt(pool->meta, sql, &st);
	if (r < 0)
		goto out;
	sqlite3_bind_int64(st, 1, disk_id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		r = lay_set_error(pool, -ENOENT, "disk %u has no %s yet", disk_id, what);
	} else if (rc != SQLITE_ROW) {
		r = lay_set_error(pool, meta_errno(rc), "reading the %s of disk %u", what, disk_id);
	} else if (cw_model_parse((const char *)sqlite3_column_text(st, 0), ret_model) < 0) {
		r = lay_set_error(pool, -EUCLEAN, "the stored %s of disk %u is damaged", what,
				  disk_id);
	} else {
		if (ret_flag)
			*ret_flag = sqlite3_column_int(st, 1) != 0;
		r = 0;
	}
	sqlite3_reset(st);
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_disk_model_get(struct cw_pool *pool, uint32_t disk_id, struct cw_model *ret_model,
		      bool *ret_calibrated)
{
	return model_get(pool, disk_id, sql_model_get, "model", ret_model, ret_calibrated);
}

int cw_disk_emulate_get(struct cw_pool *pool, uint32_t disk_id, struct cw_model *ret_model)
{
	return model_get(pool, disk_id, sql_emulate_get, "emulated model", ret_model, NULL);
}
