/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The control plane's reservations and exports in the pool database
 * (tables resv, resv_disk, export; schema 3; resv.move, schema 10;
 * resv_disk.copy, schema 11), and the read-only look-up
 * of a disk's model for tools that must not take the pool's lock. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/model.h>
#include <clockwise/pool-objects.h>

#include "common/cleanup.h"
#include "layout/layout-internal.h"

static const char sql_resv_put[] =
	"INSERT INTO resv(part, rate, block, range_start, range_end, start_ns, end_ns, period_ns,"
	" due, move) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
static const char sql_resv_move_set[] = "UPDATE resv SET move = ?2 WHERE id = ?1";
static const char sql_resv_disk_del[] = "DELETE FROM resv_disk WHERE resv = ?1";
static const char sql_resv_disk_put[] =
	"INSERT INTO resv_disk(resv, disk, period_ns, service_ns, from_ns, to_ns, requests, stride,"
	" copy)"
	" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
static const char sql_resv_del[] = "DELETE FROM resv WHERE id = ?1";
static const char sql_resv_all[] =
	"SELECT id, part, rate, block, range_start, range_end, start_ns, end_ns, period_ns, due,"
	" move, (SELECT survive FROM resv_copies WHERE resv = resv.id),"
	" (SELECT record FROM resv_copies WHERE resv = resv.id)"
	" FROM resv ORDER BY id";
static const char sql_resv_copies_put[] =
	"INSERT INTO resv_copies(resv, survive, record) VALUES (?1, ?2, ?3)";
static const char sql_resv_disk_all[] =
	"SELECT resv, disk, period_ns, service_ns, from_ns, to_ns, requests, stride, copy"
	" FROM resv_disk ORDER BY resv, disk";
static const char sql_resv_part[] = "SELECT part FROM resv WHERE id = ?1";
static const char sql_export_put[] =
	"INSERT INTO export(name, part, readonly, resv) VALUES (?1, ?2, ?3, ?4)";
static const char sql_export_del[] = "DELETE FROM export WHERE name = ?1";
static const char sql_export_all[] =
	"SELECT name, part, readonly, resv, u.export IS NOT NULL, u.queue_depth, u.max_request,"
	" coalesce(u.dev, -1) FROM export LEFT JOIN export_ublk u ON u.export = name"
	" ORDER BY name";
static const char sql_export_ublk_put[] =
	"INSERT INTO export_ublk(export, queue_depth, max_request, dev) VALUES (?1, ?2, ?3, ?4)";
static const char sql_export_ublk_dev[] = "UPDATE export_ublk SET dev = ?2 WHERE export = ?1";
static const char sql_part_users[] =
	"SELECT 'export ' || name FROM export WHERE part = ?1"
	" UNION ALL SELECT 'reservation ' || id FROM resv WHERE part = ?1"
	" UNION ALL SELECT 'the best-effort QoS of export ' || export FROM be_qos WHERE part = ?1"
	" LIMIT 1";
static const char sql_resv_users[] = "SELECT name FROM export WHERE resv = ?1 LIMIT 1";
static const char sql_disk_users[] = "SELECT resv FROM resv_disk WHERE disk = ?1 LIMIT 1";

/* The first row's first column of a one-parameter query as text into buf
 * (1: found), 0: no row, or -errno. */
static int first_text(struct meta *m, const char *sql, int64_t arg, char *buf, size_t size)
{
	sqlite3_stmt *st;
	int r, rc;

	r = meta_stmt(m, sql, &st);
	if (r < 0)
		return r;
	sqlite3_bind_int64(st, 1, arg);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		snprintf(buf, size, "%s", (const char *)sqlite3_column_text(st, 0));
		r = 1;
	} else {
		r = rc == SQLITE_DONE ? 0 : meta_errno(rc);
	}
	sqlite3_reset(st);
	return r;
}

int lay_part_users(struct cw_pool *pool, const struct cw_part *p)
{
	char who[CW_NAME_MAX + 32];
	int r = first_text(pool->meta, sql_part_users, (int64_t)p->id, who, sizeof(who));

	if (r > 0)
		return lay_set_error(pool, -EBUSY, "partition '%s' is held by %s", p->name, who);
	return r;
}

int lay_disk_users(struct cw_pool *pool, const struct disk *d)
{
	char who[32];
	int r = first_text(pool->meta, sql_disk_users, d->id, who, sizeof(who));

	if (r > 0)
		return lay_set_error(pool, -EBUSY, "disk %u (%s) serves a part of reservation %s",
				     d->id, d->name, who);
	return r;
}

struct cw_part *lay_part_by_id(struct cw_pool *pool, uint64_t id)
{
	for (struct cw_part *p = pool->parts; p; p = p->next)
		if (p->id == id)
			return p;
	return NULL;
}

/* The parts of a reservation: on disks of the pool, one per disk, each
 * with a period and a service time. */
static int check_parts(struct cw_pool *pool, const struct cw_resv_disk *disks, size_t n)
{
	if (n && !disks)
		return lay_set_error(pool, -EINVAL, "reservation parts missing");
	for (size_t i = 0; i < n; i++) {
		const struct cw_resv_disk *d = &disks[i];

		if (d->disk_id < 1 || d->disk_id > CW_DISKS_MAX || !pool->disks[d->disk_id])
			return lay_set_error(pool, -ENOENT, "no disk %u in the pool", d->disk_id);
		if (d->period_ns <= 0 || d->service_ns <= 0 || d->requests > INT64_MAX ||
		    d->stride > INT64_MAX)
			return lay_set_error(pool, -EINVAL, "the part on disk %u needs a positive "
					     "period and service time", d->disk_id);
		for (size_t j = 0; j < i; j++)
			if (disks[j].disk_id == d->disk_id)
				return lay_set_error(pool, -EINVAL, "disk %u has two parts",
						     d->disk_id);
	}
	return 0;
}

static int check_resv(struct cw_pool *pool, const struct cw_resv_rec *r)
{
	const struct cw_part *p = lay_part_by_id(pool, r->part_id);
	uint64_t size;

	if (!p)
		return lay_set_error(pool, -ENOENT, "no partition with id %llu",
				     (unsigned long long)r->part_id);
	size = atomic_load_explicit(&((struct cw_part *)p)->nblocks, memory_order_relaxed)
	       << p->bshift;
	if (r->rate_bps == 0 || r->block_bytes == 0 || r->period_ns <= 0 ||
	    r->rate_bps > INT64_MAX || r->block_bytes > INT64_MAX)
		return lay_set_error(pool, -EINVAL, "a reservation needs a positive rate, block "
				     "size and period");
	if (r->due > 1)
		return lay_set_error(pool, -EINVAL, "unknown deadline rule %u", r->due);
	if (r->range_start_bytes >= r->range_end_bytes || r->range_end_bytes > size)
		return lay_set_error(pool, -EINVAL, "range %llu:%llu is not inside partition '%s' "
				     "(%llu bytes)", (unsigned long long)r->range_start_bytes,
				     (unsigned long long)r->range_end_bytes, p->name,
				     (unsigned long long)size);
	return check_parts(pool, r->disks, r->n_disks);
}

static int parts_insert(struct meta *m, int64_t id, const struct cw_resv_disk *disks, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct cw_resv_disk *d = &disks[i];
		int rc = meta_exec(m, sql_resv_disk_put, 9, id, (int64_t)d->disk_id, d->period_ns,
				   d->service_ns, d->from_ns, d->to_ns, (int64_t)d->requests,
				   (int64_t)d->stride, (int64_t)d->copy);

		if (rc < 0)
			return rc;
	}
	return 0;
}

static int resv_insert(struct meta *m, const struct cw_resv_rec *r, uint64_t *ret_id)
{
	sqlite3_stmt *st;
	int64_t id;
	int rc;

	rc = meta_stmt(m, sql_resv_put, &st);
	if (rc < 0)
		return rc;
	sqlite3_bind_int64(st, 1, (int64_t)r->part_id);
	sqlite3_bind_int64(st, 2, (int64_t)r->rate_bps);
	sqlite3_bind_int64(st, 3, (int64_t)r->block_bytes);
	sqlite3_bind_int64(st, 4, (int64_t)r->range_start_bytes);
	sqlite3_bind_int64(st, 5, (int64_t)r->range_end_bytes);
	sqlite3_bind_int64(st, 6, r->start_ns);
	sqlite3_bind_int64(st, 7, r->end_ns);
	sqlite3_bind_int64(st, 8, r->period_ns);
	sqlite3_bind_int64(st, 9, r->due);
	sqlite3_bind_int64(st, 10, (int64_t)r->move_id);
	rc = meta_step(st);
	if (rc < 0)
		return rc;
	id = sqlite3_last_insert_rowid(m->db);
	if ((r->survive || r->record) &&
	    (rc = meta_exec(m, sql_resv_copies_put, 3, id, (int64_t)r->survive,
			    (int64_t)r->record)) < 0)
		return rc;
	rc = parts_insert(m, id, r->disks, r->n_disks);
	if (rc < 0)
		return rc;
	*ret_id = (uint64_t)id;
	return 0;
}

int cw_resv_add(struct cw_pool *pool, const struct cw_resv_rec *r, uint64_t *ret_id)
{
	uint64_t id = 0;
	int rc;

	if (!r || !ret_id)
		return -EINVAL;
	pthread_mutex_lock(&pool->lock);
	rc = check_resv(pool, r);
	if (rc < 0)
		goto out;
	rc = meta_begin(pool->meta);
	if (rc == 0)
		rc = resv_insert(pool->meta, r, &id);
	rc = meta_end(pool->meta, rc);
	if (rc < 0) {
		lay_set_error(pool, rc, "storing the reservation: %s", strerror(-rc));
		goto out;
	}
	*ret_id = id;
out:
	pthread_mutex_unlock(&pool->lock);
	return rc;
}

/* Begins a transaction on reservation id (doing: "removing", for the
 * error): 0 inside it, or -errno with none open and the error set
 * (-ENOENT: no such reservation). */
static int resv_begin(struct cw_pool *pool, uint64_t id, const char *doing)
{
	char who[CW_NAME_MAX + 1];
	int r = meta_begin(pool->meta);

	if (r == 0) {
		r = first_text(pool->meta, sql_resv_part, (int64_t)id, who, sizeof(who));
		if (r > 0)
			return 0;
		meta_rollback(pool->meta);
		if (r == 0)
			return lay_set_error(pool, -ENOENT, "no reservation %llu",
					     (unsigned long long)id);
	}
	return lay_set_error(pool, r, "%s reservation %llu: %s", doing, (unsigned long long)id,
			     strerror(-r));
}

/* Ends resv_begin's transaction: committed if r is 0, else rolled back. */
static int resv_end(struct cw_pool *pool, uint64_t id, int r, const char *doing)
{
	r = meta_end(pool->meta, r);
	if (r < 0)
		lay_set_error(pool, r, "%s reservation %llu: %s", doing, (unsigned long long)id,
			      strerror(-r));
	return r;
}

int cw_resv_rebook(struct cw_pool *pool, uint64_t id, uint64_t move_id,
		   const struct cw_resv_disk *disks, size_t n)
{
	int r;

	if (move_id > INT64_MAX)
		return lay_set_error(pool, -EINVAL, "no move %llu", (unsigned long long)move_id);
	pthread_mutex_lock(&pool->lock);
	r = check_parts(pool, disks, n);
	if (r == 0)
		r = resv_begin(pool, id, "booking again");
	if (r < 0)
		goto out;
	r = meta_exec(pool->meta, sql_resv_disk_del, 1, (int64_t)id);
	if (r == 0)
		r = meta_exec(pool->meta, sql_resv_move_set, 2, (int64_t)id, (int64_t)move_id);
	if (r == 0)
		r = parts_insert(pool->meta, (int64_t)id, disks, n);
	r = resv_end(pool, id, r, "booking again");
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_resv_remove(struct cw_pool *pool, uint64_t id)
{
	char who[CW_NAME_MAX + 1];
	int r;

	pthread_mutex_lock(&pool->lock);
	r = resv_begin(pool, id, "removing");
	if (r < 0)
		goto out;
	r = first_text(pool->meta, sql_resv_users, (int64_t)id, who, sizeof(who));
	if (r > 0) {
		meta_rollback(pool->meta);
		r = lay_set_error(pool, -EBUSY, "reservation %llu is bound to export %s",
				  (unsigned long long)id, who);
		goto out;
	}
	if (r == 0)
		r = meta_exec(pool->meta, sql_resv_del, 1, (int64_t)id);
	r = resv_end(pool, id, r, "removing");
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

void cw_resv_list_free(struct cw_resv_rec *list, size_t n)
{
	if (!list)
		return;
	for (size_t i = 0; i < n; i++)
		free(list[i].disks);
	free(list);
}

static int grow_array(void **a, size_t *cap, size_t n, size_t size)
{
	void *na;

	if (n < *cap)
		return 0;
	*cap = *cap ? 2 * *cap : 8;
	na = realloc(*a, *cap * size);
	if (!na)
		return -ENOMEM;
	*a = na;
	return 0;
}

/* Adds a part row to its reservation (rows come in resv order). */
static int add_part(struct cw_resv_rec *list, size_t n, sqlite3_stmt *st)
{
	uint64_t resv = (uint64_t)sqlite3_column_int64(st, 0);
	struct cw_resv_disk *nd;
	struct cw_resv_rec *r = NULL;
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (list[mid].id < resv) {
			lo = mid + 1;
		} else if (list[mid].id > resv) {
			hi = mid;
		} else {
			r = &list[mid];
			break;
		}
	}
	if (!r)
		return -EUCLEAN;
	nd = realloc(r->disks, (r->n_disks + 1) * sizeof(*nd));
	if (!nd)
		return -ENOMEM;
	r->disks = nd;
	nd[r->n_disks++] = (struct cw_resv_disk){
		.disk_id = (uint32_t)sqlite3_column_int64(st, 1),
		.period_ns = sqlite3_column_int64(st, 2),
		.service_ns = sqlite3_column_int64(st, 3),
		.from_ns = sqlite3_column_int64(st, 4),
		.to_ns = sqlite3_column_int64(st, 5),
		.requests = (uint64_t)sqlite3_column_int64(st, 6),
		.stride = (uint64_t)sqlite3_column_int64(st, 7),
		.copy = sqlite3_column_int64(st, 8) != 0,
	};
	return 0;
}

static int resv_load(struct meta *m, struct cw_resv_rec **ret, size_t *ret_n)
{
	struct cw_resv_rec *list = NULL;
	size_t n = 0, cap = 0;
	sqlite3_stmt *st;
	int r, rc;

	r = meta_stmt(m, sql_resv_all, &st);
	while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		r = grow_array((void **)&list, &cap, n, sizeof(*list));
		if (r < 0)
			break;
		list[n++] = (struct cw_resv_rec){
			.id = (uint64_t)sqlite3_column_int64(st, 0),
			.part_id = (uint64_t)sqlite3_column_int64(st, 1),
			.rate_bps = (uint64_t)sqlite3_column_int64(st, 2),
			.block_bytes = (uint64_t)sqlite3_column_int64(st, 3),
			.range_start_bytes = (uint64_t)sqlite3_column_int64(st, 4),
			.range_end_bytes = (uint64_t)sqlite3_column_int64(st, 5),
			.start_ns = sqlite3_column_int64(st, 6),
			.end_ns = sqlite3_column_int64(st, 7),
			.period_ns = sqlite3_column_int64(st, 8),
			.due = (unsigned)sqlite3_column_int64(st, 9),
			.move_id = (uint64_t)sqlite3_column_int64(st, 10),
			.survive = sqlite3_column_int64(st, 11) != 0,
			.record = sqlite3_column_int64(st, 12) != 0,
		};
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = meta_errno(rc);
	if (r == 0)
		sqlite3_reset(st);
	if (r == 0)
		r = meta_stmt(m, sql_resv_disk_all, &st);
	while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW)
		r = add_part(list, n, st);
	if (r == 0 && rc != SQLITE_DONE)
		r = meta_errno(rc);
	sqlite3_reset(st);
	if (r < 0) {
		cw_resv_list_free(list, n);
		return r;
	}
	*ret = list;
	*ret_n = n;
	return 0;
}

int cw_resv_list(struct cw_pool *pool, struct cw_resv_rec **ret, size_t *ret_n)
{
	int r;

	pthread_mutex_lock(&pool->lock);
	/* One read transaction, so the parts match their reservations. */
	r = meta_begin(pool->meta);
	if (r == 0)
		r = resv_load(pool->meta, ret, ret_n);
	meta_rollback(pool->meta);
	if (r < 0)
		lay_set_error(pool, r, "reading the reservations: %s", strerror(-r));
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_export_add(struct cw_pool *pool, const struct cw_export_rec *e)
{
	char part[32];
	sqlite3_stmt *st;
	int r;

	if (!e)
		return -EINVAL;
	pthread_mutex_lock(&pool->lock);
	if (!cw_name_valid(e->name)) {
		r = lay_set_error(pool, -EINVAL, "export name '%s' is not valid", e->name);
		goto out;
	}
	if (!lay_part_by_id(pool, e->part_id)) {
		r = lay_set_error(pool, -ENOENT, "no partition with id %llu",
				  (unsigned long long)e->part_id);
		goto out;
	}
	r = meta_begin(pool->meta);
	if (r < 0)
		goto fail;
	if (e->resv_id) {
		r = first_text(pool->meta, sql_resv_part, (int64_t)e->resv_id, part, sizeof(part));
		if (r <= 0) {
			meta_rollback(pool->meta);
			if (r < 0)
				goto fail;
			r = lay_set_error(pool, -ENOENT, "no reservation %llu",
					  (unsigned long long)e->resv_id);
			goto out;
		}
		if (strtoull(part, NULL, 10) != e->part_id) {
			meta_rollback(pool->meta);
			r = lay_set_error(pool, -EINVAL, "reservation %llu is on another partition",
					  (unsigned long long)e->resv_id);
			goto out;
		}
	}
	r = meta_stmt(pool->meta, sql_export_put, &st);
	if (r == 0) {
		sqlite3_bind_text(st, 1, e->name, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, (int64_t)e->part_id);
		sqlite3_bind_int(st, 3, e->readonly);
		if (e->resv_id)
			sqlite3_bind_int64(st, 4, (int64_t)e->resv_id);
		else
			sqlite3_bind_null(st, 4);
		r = meta_step(st);
	}
	if (r == 0 && e->ublk)
		r = meta_stmt(pool->meta, sql_export_ublk_put, &st);
	if (r == 0 && e->ublk) {
		sqlite3_bind_text(st, 1, e->name, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, e->ublk_depth);
		sqlite3_bind_int64(st, 3, e->ublk_max_request);
		sqlite3_bind_int64(st, 4, e->ublk_dev < 0 ? -1 : e->ublk_dev);
		r = meta_step(st);
	}
	r = meta_end(pool->meta, r);
	if (r == -EEXIST) {
		r = lay_set_error(pool, -EEXIST, "an export named '%s' exists", e->name);
		goto out;
	}
	if (r == 0)
		goto out;
fail:
	lay_set_error(pool, r, "storing export '%s': %s", e->name, strerror(-r));
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_export_remove(struct cw_pool *pool, const char *name)
{
	sqlite3_stmt *st;
	int r;

	if (!name)
		return -EINVAL;
	pthread_mutex_lock(&pool->lock);
	r = meta_begin(pool->meta);
	if (r == 0)
		r = meta_stmt(pool->meta, sql_export_del, &st);
	if (r == 0) {
		sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
		r = meta_step(st);
	}
	if (r == 0 && sqlite3_changes(pool->meta->db) == 0) {
		meta_rollback(pool->meta);
		r = lay_set_error(pool, -ENOENT, "no export named '%s'", name);
		goto out;
	}
	r = meta_end(pool->meta, r);
	if (r < 0)
		lay_set_error(pool, r, "removing export '%s': %s", name, strerror(-r));
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_export_set_ublk_dev(struct cw_pool *pool, const char *name, int32_t dev)
{
	sqlite3_stmt *st;
	int r;

	if (!name || dev < -1)
		return -EINVAL;
	pthread_mutex_lock(&pool->lock);
	r = meta_begin(pool->meta);
	if (r == 0)
		r = meta_stmt(pool->meta, sql_export_ublk_dev, &st);
	if (r == 0) {
		sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, dev);
		r = meta_step(st);
	}
	if (r == 0 && sqlite3_changes(pool->meta->db) == 0) {
		meta_rollback(pool->meta);
		r = lay_set_error(pool, -ENOENT, "no ublk export named '%s'", name);
		goto out;
	}
	r = meta_end(pool->meta, r);
	if (r < 0)
		lay_set_error(pool, r, "recording export '%s''s device: %s", name, strerror(-r));
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_export_list(struct cw_pool *pool, struct cw_export_rec **ret, size_t *ret_n)
{
	struct cw_export_rec *list = NULL;
	size_t n = 0, cap = 0;
	sqlite3_stmt *st;
	int r, rc = SQLITE_DONE;

	pthread_mutex_lock(&pool->lock);
	r = meta_stmt(pool->meta, sql_export_all, &st);
	while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		r = grow_array((void **)&list, &cap, n, sizeof(*list));
		if (r < 0)
			break;
		memset(&list[n], 0, sizeof(list[n]));
		snprintf(list[n].name, sizeof(list[n].name), "%s",
			 (const char *)sqlite3_column_text(st, 0));
		list[n].part_id = (uint64_t)sqlite3_column_int64(st, 1);
		list[n].readonly = sqlite3_column_int(st, 2) != 0;
		list[n].resv_id = (uint64_t)sqlite3_column_int64(st, 3);
		list[n].ublk = sqlite3_column_int(st, 4) != 0;
		list[n].ublk_depth = (uint32_t)sqlite3_column_int64(st, 5);
		list[n].ublk_max_request = (uint32_t)sqlite3_column_int64(st, 6);
		list[n].ublk_dev = (int32_t)sqlite3_column_int64(st, 7);
		n++;
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = meta_errno(rc);
	if (r == 0)
		sqlite3_reset(st);
	if (r < 0) {
		free(list);
		lay_set_error(pool, r, "reading the exports: %s", strerror(-r));
	} else {
		*ret = list;
		*ret_n = n;
	}
	pthread_mutex_unlock(&pool->lock);
	return r;
}

static void close_db(sqlite3 **db)
{
	sqlite3_close(*db);
}

int cw_pool_read_disk_model(const char *db_path, const char *disk_name, struct cw_model *ret_model,
			    bool *ret_calibrated, struct cw_error *ret_err)
{
	_cleanup_(close_db) sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int rc, r;

	if (!db_path || !disk_name || !ret_model)
		return meta_err(ret_err, -EINVAL, "a database path and a disk name are needed");
	/* Read-only and without the pool's flock: the daemon may hold the
	 * pool meanwhile; sqlite's own locks keep the read consistent. */
	rc = sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK)
		return meta_err(ret_err, meta_errno(rc), "%s: %s", db_path,
				db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
	sqlite3_busy_timeout(db, 1000);
	rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_ROW || sqlite3_column_int64(st, 0) < 2) {
		sqlite3_finalize(st);
		return meta_err(ret_err, rc == SQLITE_ROW ? -EUCLEAN : meta_errno(rc) ?: -EUCLEAN,
				"%s: not a Clockwise pool database with disk models", db_path);
	}
	sqlite3_finalize(st);
	rc = sqlite3_prepare_v2(db, "SELECT m.model, m.calibrated, d.id FROM disk d"
				" LEFT JOIN disk_model m ON m.disk = d.id WHERE d.name = ?1",
				-1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_text(st, 1, disk_name, -1, SQLITE_STATIC);
		rc = sqlite3_step(st);
	}
	if (rc == SQLITE_DONE)
		r = meta_err(ret_err, -ENOENT, "%s: no disk named '%s'", db_path, disk_name);
	else if (rc != SQLITE_ROW)
		r = meta_err(ret_err, meta_errno(rc), "%s: %s", db_path, sqlite3_errmsg(db));
	else if (sqlite3_column_type(st, 0) == SQLITE_NULL)
		r = meta_err(ret_err, -ENOENT, "%s: disk '%s' has no stored model", db_path,
			     disk_name);
	else if (cw_model_parse((const char *)sqlite3_column_text(st, 0), ret_model) < 0)
		r = meta_err(ret_err, -EUCLEAN, "%s: the stored model of disk '%s' is damaged",
			     db_path, disk_name);
	else {
		if (ret_calibrated)
			*ret_calibrated = sqlite3_column_int(st, 1) != 0;
		r = 0;
	}
	sqlite3_finalize(st);
	return r;
}
