/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The pool: its database, its disks and their labels, reassembly by UUID
 * on open, and the consistency check.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "layout/layout-internal.h"

static const char sql_pool_insert[] = "INSERT INTO pool (id, uuid, block_size) VALUES (1, ?1, ?2)";
static const char sql_pool_get[] = "SELECT uuid, block_size FROM pool WHERE id = 1";
static const char sql_disk_insert[] =
	"INSERT INTO disk (id, uuid, name, path, tier, capacity, nblocks)"
	" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
static const char sql_disk_delete[] = "DELETE FROM disk WHERE id = ?1";
static const char sql_disk_all[] =
	"SELECT id, uuid, name, path, tier, capacity, nblocks,"
	" (SELECT domain FROM disk_domain WHERE disk = disk.id),"
	" (SELECT count(*) FROM disk_spare WHERE disk = disk.id) FROM disk ORDER BY id";

int lay_disk_find(struct cw_pool *pool, uint32_t id, struct disk **ret)
{
	*ret = id >= 1 && id <= CW_DISKS_MAX ? pool->disks[id] : NULL;
	return *ret ? 0 : lay_set_error(pool, -ENOENT, "no disk %u in the pool", id);
}

const struct cw_error *cw_pool_last_error(const struct cw_pool *pool)
{
	return &pool->err;
}

uint32_t cw_pool_block_size(const struct cw_pool *pool)
{
	return pool->block_size;
}

const uint8_t *cw_pool_uuid(const struct cw_pool *pool)
{
	return pool->uuid;
}

unsigned cw_pool_missing_disks(const struct cw_pool *pool)
{
	unsigned n = 0;

	for (int i = 1; i <= CW_DISKS_MAX; i++)
		if (pool->disks[i] && pool->disks[i]->state != CW_DISK_PRESENT)
			n++;
	return n;
}

static void disk_free(struct disk *d)
{
	if (!d)
		return;
	cw_io_closep(&d->fd);
	free(d->bitmap);
	free(d->path);
	free(d->unreplaced);
	free(d);
}

void cw_pool_close(struct cw_pool *pool)
{
	if (!pool)
		return;
	lay_intent_close(pool);
	lay_journal_free(pool);
	free(pool->resync);
	while (pool->moves) {
		struct cw_move *m = pool->moves;

		pool->moves = m->next;
		lay_move_free(m);
	}
	while (pool->parts) {
		struct cw_part *p = pool->parts;

		pool->parts = p->next;
		lay_part_free(p);
	}
	for (int i = 0; i <= CW_DISKS_MAX; i++)
		disk_free(pool->disks[i]);
	meta_close(pool->meta);
	pthread_mutex_destroy(&pool->lock);
	free(pool->db_path);
	free(pool);
}

static int pool_new(const char *db_path, struct meta *m, struct cw_pool **ret)
{
	struct cw_pool *pool = calloc(1, sizeof(*pool));
	uint8_t seed[16];

	if (!pool)
		return -ENOMEM;
	pool->db_path = strdup(db_path);
	if (!pool->db_path) {
		free(pool);
		return -ENOMEM;
	}
	pthread_mutex_init(&pool->lock, NULL);
	pool->meta = m;
	for (int i = 0; i <= CW_DISKS_MAX; i++)
		atomic_init(&pool->fds[i], -ENOENT);
	if (lay_uuid_random(seed) < 0)
		memset(seed, 0x5a, sizeof(seed));
	memcpy(&pool->rng, seed, sizeof(pool->rng));
	pool->rng |= 1;
	*ret = pool;
	return 0;
}

static int check_block_size(uint32_t bs, struct cw_error *err)
{
	if (!cw_is_pow2_u64(bs) || bs < CW_BLOCK_SIZE_MIN || bs > CW_BLOCK_SIZE_MAX)
		return meta_err(err, -EINVAL,
				"block size %u is not a power of two between %u and %u bytes",
				bs, CW_BLOCK_SIZE_MIN, CW_BLOCK_SIZE_MAX);
	return 0;
}

int cw_pool_create(const char *db_path, uint32_t block_size, struct cw_error *ret_err,
		   struct cw_pool **ret_pool)
{
	struct cw_pool *pool;
	struct meta *m;
	sqlite3_stmt *s;
	int r;

	if (!block_size)
		block_size = CW_BLOCK_SIZE_DEFAULT;
	r = check_block_size(block_size, ret_err);
	if (r < 0)
		return r;
	r = meta_create(db_path, ret_err, &m);
	if (r < 0)
		return r;
	r = pool_new(db_path, m, &pool);
	if (r < 0) {
		meta_close(m);
		unlink(db_path);
		return meta_err(ret_err, r, "out of memory");
	}
	pool->block_size = block_size;
	pool->bshift = (uint32_t)__builtin_ctz(block_size);
	r = lay_uuid_random(pool->uuid);
	if (r == 0)
		r = meta_begin(m);
	if (r == 0)
		r = meta_stmt(m, sql_pool_insert, &s);
	if (r == 0) {
		sqlite3_bind_blob(s, 1, pool->uuid, 16, SQLITE_STATIC);
		sqlite3_bind_int64(s, 2, block_size);
		r = meta_step(s);
	}
	r = meta_end(m, r);
	if (r < 0) {
		cw_pool_close(pool);
		unlink(db_path);
		return meta_err(ret_err, r, "%s: cannot record the new pool: %s", db_path,
				strerror(-r));
	}
	meta_err(ret_err, 0, "created");
	*ret_pool = pool;
	return 0;
}

/* ---- disks ---- */

static int read_label(int fd, uint8_t buf[LABEL_BYTES], struct label *ret)
{
	ssize_t n = cw_io_pread(fd, buf, LABEL_BYTES, 0);

	if (n < 0)
		return (int)n;
	if (n < LABEL_BYTES)
		memset(buf + n, 0, LABEL_BYTES - (size_t)n);
	return lay_label_decode(buf, ret);
}

static int write_all_sync(int fd, const uint8_t *buf, size_t len, uint64_t off)
{
	ssize_t n = cw_io_pwrite(fd, buf, len, off);

	if (n < 0)
		return (int)n;
	if ((size_t)n != len)
		return -EIO;
	return cw_io_fdatasync(fd);
}

static struct disk *disk_by_name(struct cw_pool *pool, const char *name)
{
	for (int i = 1; i <= CW_DISKS_MAX; i++)
		if (pool->disks[i] && strcmp(pool->disks[i]->name, name) == 0)
			return pool->disks[i];
	return NULL;
}

static struct disk *disk_new(uint32_t id)
{
	struct disk *d = calloc(1, sizeof(*d));

	if (d) {
		d->id = id;
		d->fd = -1;
	}
	return d;
}

/* Checks that what lies at fd may become a disk of this pool. */
static int check_new_disk(struct cw_pool *pool, const char *path, int fd, uint64_t dev,
			  uint64_t ino, uint64_t *ret_bytes, uint8_t label_buf[LABEL_BYTES])
{
	struct label l;
	char u[CW_UUID_STRING_LEN + 1];
	int r;

	r = cw_io_size(fd, ret_bytes);
	if (r == -ENOTBLK)
		return lay_set_error(pool, -EINVAL, "%s: not a block device or regular file", path);
	if (r < 0)
		return lay_set_error(pool, r, "%s: size: %s", path, strerror(-r));
	for (int i = 1; i <= CW_DISKS_MAX; i++) {
		struct disk *d = pool->disks[i];

		if (!d)
			continue;
		if (strcmp(d->path, path) == 0 ||
		    (d->state == CW_DISK_PRESENT && d->dev == dev && d->ino == ino))
			return lay_set_error(pool, -EEXIST, "%s is already disk %u (%s) of the pool",
					     path, d->id, d->name);
	}
	if ((*ret_bytes >> pool->bshift) < 2)
		return lay_set_error(pool, -ENOSPC,
				     "%s is too small: %llu bytes, a disk needs at least %llu "
				     "(a label block and one data block of %u bytes)",
				     path, (unsigned long long)*ret_bytes,
				     2ULL * pool->block_size, pool->block_size);
	r = read_label(fd, label_buf, &l);
	if (r == -ENOMSG)
		return 0;
	if (r == -EUCLEAN)
		return lay_set_error(pool, r,
				     "%s carries a damaged Clockwise label; refusing to overwrite it",
				     path);
	if (r < 0)
		return lay_set_error(pool, r, "%s: reading the label: %s", path, strerror(-r));
	if (memcmp(l.pool_uuid, pool->uuid, 16) != 0) {
		cw_uuid_format(l.pool_uuid, u);
		return lay_set_error(pool, -EBUSY,
				     "%s belongs to another pool (%s); refusing to overwrite its label",
				     path, u);
	}
	for (int i = 1; i <= CW_DISKS_MAX; i++)
		if (pool->disks[i] && memcmp(pool->disks[i]->uuid, l.disk_uuid, 16) == 0)
			return lay_set_error(pool, -EEXIST, "%s is already disk %u (%s) of the pool",
					     path, i, pool->disks[i]->name);
	/* Our pool's label for a disk the database does not know: an add
	 * that did not commit.  Reusing the device is safe. */
	return 0;
}

int cw_disk_add(struct cw_pool *pool, const char *path, enum cw_tier tier, const char *name,
		uint32_t *ret_id)
{
	_cleanup_(cw_io_closep) int fd = -1;
	uint8_t old[LABEL_BYTES], buf[LABEL_BYTES];
	struct disk *d = NULL;
	struct label l = { .version = LABEL_VERSION };
	uint64_t bytes, dev = 0, ino = 0;
	uint32_t id = 0;
	char defname[32];
	sqlite3_stmt *s;
	int r;

	pthread_mutex_lock(&pool->lock);
	if (!path || !path[0]) {
		r = lay_set_error(pool, -EINVAL, "no disk path given");
		goto out;
	}
	if (tier != CW_TIER_HDD && tier != CW_TIER_SSD && tier != CW_TIER_RBD) {
		r = lay_set_error(pool, -EINVAL, "unknown tier %d (hdd, ssd or rbd)", (int)tier);
		goto out;
	}
	if ((tier == CW_TIER_RBD) != cw_io_path_is_rbd(path)) {
		r = lay_set_error(pool, -EINVAL, tier == CW_TIER_RBD ?
				  "%s: tier rbd is for images on a cluster, named rbd:POOL/IMAGE" :
				  "%s: an image on a cluster is of tier rbd", path);
		goto out;
	}
	if (name && name[0] && !cw_name_valid(name)) {
		r = lay_set_error(pool, -EINVAL,
				  "invalid disk name '%s': use 1..%d of A-Z a-z 0-9 . _ -, "
				  "not starting with . or -", name, CW_NAME_MAX);
		goto out;
	}
	for (uint32_t i = 1; i <= CW_DISKS_MAX && !id; i++)
		if (!pool->disks[i])
			id = i;
	if (!id) {
		r = lay_set_error(pool, -ENOSPC, "the pool already has %d disks", CW_DISKS_MAX);
		goto out;
	}
	if (!name || !name[0]) {
		snprintf(defname, sizeof(defname), "disk%u", id);
		name = defname;
	}
	if (disk_by_name(pool, name)) {
		r = lay_set_error(pool, -EEXIST, "a disk named '%s' is already in the pool", name);
		goto out;
	}
	fd = cw_io_open_dev(path, O_RDWR);
	r = fd < 0 ? fd : cw_io_identity(fd, &dev, &ino);
	if (r < 0) {
		lay_set_error(pool, r, "%s: %s", path, r == -EPROTONOSUPPORT ?
			      "this build has no support for disks on a Ceph cluster (librbd)" :
			      r == -ELIBACC ? "disks on a Ceph cluster need librados2 and librbd1, "
			      "which are not installed (apt-get install librbd1)" :
			      r == -ELIBBAD ? "the installed librados2 or librbd1 lacks a call "
			      "this build uses (too old)" :
			      r == -EINVAL && cw_io_path_is_rbd(path) ?
			      "not a valid image name; expected rbd:POOL/IMAGE[?conf=FILE&id=NAME]" :
			      strerror(-r));
		goto out;
	}
	r = check_new_disk(pool, path, fd, dev, ino, &bytes, old);
	if (r < 0)
		goto out;

	d = disk_new(id);
	if (!d || !(d->path = strdup(path))) {
		r = lay_set_error(pool, -ENOMEM, "out of memory");
		goto out;
	}
	d->tier = tier;
	d->state = CW_DISK_PRESENT;
	snprintf(d->name, sizeof(d->name), "%s", name);
	d->dev = dev;
	d->ino = ino;
	d->capacity_bytes = bytes;
	d->nblocks = bytes >> pool->bshift;
	r = lay_uuid_random(d->uuid);
	if (r == 0)
		r = lay_disk_init_space(d);
	if (r < 0) {
		lay_set_error(pool, r, "%s: %s", path, strerror(-r));
		goto out;
	}

	/* The label first: a crash before the row commits leaves our pool's
	 * label on a disk the database does not know, which a later add of
	 * the same device accepts. */
	memcpy(l.pool_uuid, pool->uuid, 16);
	memcpy(l.disk_uuid, d->uuid, 16);
	l.block_size = pool->block_size;
	l.tier = tier;
	l.nblocks = d->nblocks;
	lay_label_encode(&l, buf);
	r = write_all_sync(fd, buf, LABEL_BYTES, 0);
	if (r < 0) {
		lay_set_error(pool, r, "%s: writing the label: %s", path, strerror(-r));
		goto out;
	}
	r = meta_begin(pool->meta);
	if (r == 0)
		r = meta_stmt(pool->meta, sql_disk_insert, &s);
	if (r == 0) {
		sqlite3_bind_int64(s, 1, id);
		sqlite3_bind_blob(s, 2, d->uuid, 16, SQLITE_STATIC);
		sqlite3_bind_text(s, 3, d->name, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 4, d->path, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 5, tier);
		sqlite3_bind_int64(s, 6, (int64_t)bytes);
		sqlite3_bind_int64(s, 7, (int64_t)d->nblocks);
		r = meta_step(s);
	}
	r = meta_end(pool->meta, r);
	if (r < 0) {
		write_all_sync(fd, old, LABEL_BYTES, 0);	/* put back what was there */
		lay_set_error(pool, r, "%s: recording the disk: %s", path, strerror(-r));
		goto out;
	}
	d->fd = CW_TAKE_FD(fd);
	pool->disks[id] = d;
	atomic_store_explicit(&pool->fds[id], d->fd, memory_order_release);
	d = NULL;
	if (ret_id)
		*ret_id = id;
out:
	disk_free(d);
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_disk_remove(struct cw_pool *pool, uint32_t disk_id)
{
	struct disk *d;
	uint8_t zero[LABEL_BYTES] = { 0 };
	int r;

	pthread_mutex_lock(&pool->lock);
	d = disk_id >= 1 && disk_id <= CW_DISKS_MAX ? pool->disks[disk_id] : NULL;
	if (!d) {
		r = lay_set_error(pool, -ENOENT, "no disk %u in the pool", disk_id);
		goto out;
	}
	if (d->free != d->nblocks - 1) {
		r = lay_set_error(pool, -EBUSY,
				  "disk %u (%s) still holds %llu blocks of partitions or move plans",
				  disk_id, d->name, (unsigned long long)(d->nblocks - 1 - d->free));
		goto out;
	}
	r = meta_begin(pool->meta);
	if (r == 0)
		r = lay_disk_users(pool, d);
	if (r == -EBUSY) {
		meta_rollback(pool->meta);
		goto out;
	}
	if (r == 0)
		r = meta_exec(pool->meta, sql_disk_delete, 1, (int64_t)disk_id);
	r = meta_end(pool->meta, r);
	if (r < 0) {
		lay_set_error(pool, r, "removing disk %u: %s", disk_id, strerror(-r));
		goto out;
	}
	/* The disk no longer belongs to the pool: its label goes, so another
	 * pool may take it. */
	if (d->state == CW_DISK_PRESENT)
		write_all_sync(d->fd, zero, LABEL_BYTES, 0);
	atomic_store_explicit(&pool->fds[disk_id], -ENOENT, memory_order_release);
	pool->disks[disk_id] = NULL;
	disk_free(d);
out:
	pthread_mutex_unlock(&pool->lock);
	return r;
}

static void disk_fill_info(const struct cw_pool *pool, const struct disk *d, struct cw_disk_info *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->id = d->id;
	ret->tier = d->tier;
	ret->state = d->state;
	memcpy(ret->uuid, d->uuid, 16);
	snprintf(ret->name, sizeof(ret->name), "%s", d->name);
	snprintf(ret->path, sizeof(ret->path), "%s", d->path);
	ret->capacity_bytes = d->capacity_bytes;
	ret->found_bytes = d->found_bytes;
	ret->data_offset_bytes = pool->block_size;
	ret->data_blocks = d->nblocks - 1;
	ret->free_blocks = d->free;
	for (int z = 0; z <= CW_ZONES; z++)
		ret->zone_start_bytes[z] = d->zone_start[z] << pool->bshift;
	for (int z = 0; z < CW_ZONES; z++)
		ret->zone_free_blocks[z] = d->zone_free[z];
	snprintf(ret->domain, sizeof(ret->domain), "%s", d->domain);
	ret->spare = d->spare;
	snprintf(ret->unreplaced, sizeof(ret->unreplaced), "%s", d->unreplaced ? d->unreplaced : "");
}

int cw_disk_info(struct cw_pool *pool, uint32_t disk_id, struct cw_disk_info *ret)
{
	int r = 0;

	pthread_mutex_lock(&pool->lock);
	if (disk_id >= 1 && disk_id <= CW_DISKS_MAX && pool->disks[disk_id])
		disk_fill_info(pool, pool->disks[disk_id], ret);
	else
		r = lay_set_error(pool, -ENOENT, "no disk %u in the pool", disk_id);
	pthread_mutex_unlock(&pool->lock);
	return r;
}

int cw_disk_list(struct cw_pool *pool, struct cw_disk_info **ret_disks, size_t *ret_n)
{
	struct cw_disk_info *v;
	size_t n = 0;

	pthread_mutex_lock(&pool->lock);
	for (int i = 1; i <= CW_DISKS_MAX; i++)
		n += pool->disks[i] != NULL;
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v) {
		pthread_mutex_unlock(&pool->lock);
		return lay_set_error(pool, -ENOMEM, "out of memory");
	}
	n = 0;
	for (int i = 1; i <= CW_DISKS_MAX; i++)
		if (pool->disks[i])
			disk_fill_info(pool, pool->disks[i], &v[n++]);
	pthread_mutex_unlock(&pool->lock);
	*ret_disks = v;
	*ret_n = n;
	return 0;
}

int cw_disk_fd(const struct cw_pool *pool, uint32_t disk_id)
{
	if (disk_id < 1 || disk_id > CW_DISKS_MAX)
		return -ENOENT;
	return atomic_load_explicit(&((struct cw_pool *)pool)->fds[disk_id], memory_order_acquire);
}

/* ---- open: reassembly by UUID ---- */

struct probe {
	int fd;
	int status;		/* read_label()'s result, or -errno of open */
	struct label l;
	uint64_t dev, ino;
	uint64_t bytes;
};

static int load_disk_rows(struct cw_pool *pool, struct cw_error *err)
{
	sqlite3_stmt *s;
	int r, rc;

	r = meta_stmt(pool->meta, sql_disk_all, &s);
	if (r < 0)
		return meta_err(err, r, "reading disks: %s", sqlite3_errmsg(pool->meta->db));
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(s, 0);
		const void *uuid = sqlite3_column_blob(s, 1);
		const char *name = (const char *)sqlite3_column_text(s, 2);
		const char *path = (const char *)sqlite3_column_text(s, 3);
		int64_t tier = sqlite3_column_int64(s, 4), nblocks = sqlite3_column_int64(s, 6);
		struct disk *d;

		if (id < 1 || id > CW_DISKS_MAX || pool->disks[id] || !uuid ||
		    sqlite3_column_bytes(s, 1) != 16 || !name || !path || tier < 0 || tier > CW_TIER_RBD ||
		    nblocks < 2 || nblocks >= (INT64_C(1) << 48)) {
			sqlite3_reset(s);
			return meta_err(err, -EUCLEAN, "the database is damaged: bad disk row %lld",
					(long long)id);
		}
		d = disk_new((uint32_t)id);
		if (!d || !(d->path = strdup(path))) {
			disk_free(d);
			sqlite3_reset(s);
			return meta_err(err, -ENOMEM, "out of memory");
		}
		pool->disks[id] = d;
		memcpy(d->uuid, uuid, 16);
		snprintf(d->name, sizeof(d->name), "%s", name);
		d->tier = (enum cw_tier)tier;
		d->capacity_bytes = (uint64_t)sqlite3_column_int64(s, 5);
		d->nblocks = (uint64_t)nblocks;
		d->state = CW_DISK_MISSING;
		snprintf(d->domain, sizeof(d->domain), "%s",
			 sqlite3_column_text(s, 7) ? (const char *)sqlite3_column_text(s, 7) : "");
		d->spare = sqlite3_column_int64(s, 8) > 0;
		if (lay_disk_init_space(d) < 0) {
			sqlite3_reset(s);
			return meta_err(err, -ENOMEM, "out of memory");
		}
	}
	sqlite3_reset(s);
	if (rc != SQLITE_DONE)
		return meta_err(err, meta_errno(rc), "reading disks: %s",
				sqlite3_errmsg(pool->meta->db));
	return 0;
}

/* Opens every recorded path and gives each disk the device whose label
 * carries its UUID, wherever it now is among the pool's paths.  Devices
 * are only read here: nothing is written to a disk that does not match. */
static int assemble(struct cw_pool *pool, struct cw_error *err)
{
	struct probe pr[CW_DISKS_MAX + 1];
	char *moved[CW_DISKS_MAX + 1] = { NULL };
	uint8_t buf[LABEL_BYTES];

	for (int i = 1; i <= CW_DISKS_MAX; i++) {
		struct disk *d = pool->disks[i];

		pr[i].fd = -1;
		if (!d)
			continue;
		/* A cluster that does not answer is a missing disk, after
		 * librados's mount timeout. */
		pr[i].fd = cw_io_open_dev(d->path, O_RDWR);
		pr[i].status = pr[i].fd < 0 ? pr[i].fd :
			       cw_io_identity(pr[i].fd, &pr[i].dev, &pr[i].ino);
		if (pr[i].status < 0) {
			cw_io_closep(&pr[i].fd);
			continue;
		}
		pr[i].status = read_label(pr[i].fd, buf, &pr[i].l);
		if (pr[i].status == 0 && cw_io_size(pr[i].fd, &pr[i].bytes) < 0)
			pr[i].status = -EIO;
	}
	for (int i = 1; i <= CW_DISKS_MAX; i++) {
		struct disk *d = pool->disks[i];
		int found = 0;

		if (!d)
			continue;
		/* Its own path first, then the others (a swap of paths). */
		for (int k = 0; k <= CW_DISKS_MAX && !found; k++) {
			int j = k == 0 ? i : k;

			if (pr[j].fd >= 0 && pr[j].status == 0 &&
			    memcmp(pr[j].l.pool_uuid, pool->uuid, 16) == 0 &&
			    memcmp(pr[j].l.disk_uuid, d->uuid, 16) == 0)
				found = j;
		}
		if (found) {
			struct probe *p = &pr[found];

			if (p->l.block_size != pool->block_size || p->l.nblocks != d->nblocks) {
				d->state = CW_DISK_BAD_LABEL;
				continue;
			}
			/* Truncated (a file): a write past its end would grow
			 * it again, and what lay between would read as zeros. */
			if (p->bytes < (d->nblocks << pool->bshift)) {
				d->state = CW_DISK_SHRUNK;
				d->found_bytes = p->bytes;
				continue;
			}
			if (found != i) {
				/* Copied from the original paths: others may move too. */
				moved[i] = strdup(pool->disks[found]->path);
				if (!moved[i])
					return meta_err(err, -ENOMEM, "out of memory");
			}
			d->fd = CW_TAKE_FD(p->fd);
			d->dev = p->dev;
			d->ino = p->ino;
			d->state = CW_DISK_PRESENT;
			atomic_store_explicit(&pool->fds[i], d->fd, memory_order_relaxed);
		} else if (pr[i].status == -EUCLEAN) {
			d->state = CW_DISK_BAD_LABEL;
		} else if (pr[i].fd >= 0 && pr[i].status != -EIO && pr[i].status <= 0) {
			d->state = CW_DISK_WRONG_LABEL;
		} else {
			d->state = CW_DISK_MISSING;
		}
	}
	for (int i = 1; i <= CW_DISKS_MAX; i++) {
		cw_io_closep(&pr[i].fd);
		if (moved[i]) {
			free(pool->disks[i]->path);
			pool->disks[i]->path = moved[i];
		}
	}
	return 0;
}

int cw_pool_open(const char *db_path, struct cw_error *ret_err, struct cw_pool **ret_pool)
{
	struct cw_pool *pool = NULL;
	struct meta *m;
	sqlite3_stmt *s;
	int r, rc;

	meta_err(ret_err, 0, "%s", "");
	r = meta_open(db_path, ret_err, &m);
	if (r < 0)
		return r;
	r = pool_new(db_path, m, &pool);
	if (r < 0) {
		meta_close(m);
		return meta_err(ret_err, r, "out of memory");
	}
	r = meta_stmt(m, sql_pool_get, &s);
	if (r < 0) {
		r = meta_err(ret_err, -EUCLEAN, "%s: the database has no pool table: %s", db_path,
			     sqlite3_errmsg(m->db));
		goto fail;
	}
	rc = sqlite3_step(s);
	if (rc != SQLITE_ROW || sqlite3_column_bytes(s, 0) != 16 ||
	    check_block_size((uint32_t)sqlite3_column_int64(s, 1), NULL) < 0 ||
	    sqlite3_column_int64(s, 1) > CW_BLOCK_SIZE_MAX) {
		sqlite3_reset(s);
		r = meta_err(ret_err, -EUCLEAN, "%s: the database has no valid pool record", db_path);
		goto fail;
	}
	memcpy(pool->uuid, sqlite3_column_blob(s, 0), 16);
	pool->block_size = (uint32_t)sqlite3_column_int64(s, 1);
	pool->bshift = (uint32_t)__builtin_ctz(pool->block_size);
	sqlite3_reset(s);

	r = load_disk_rows(pool, ret_err);
	if (r == 0)
		r = assemble(pool, ret_err);
	if (r == 0)
		r = lay_parts_load(pool, ret_err);
	if (r == 0)
		r = lay_cache_load(pool, ret_err);
	if (r == 0)
		r = lay_journal_load(pool, ret_err);
	if (r == 0)
		r = lay_pool_check(pool, ret_err);
	if (r < 0)
		goto fail;
	lay_rebuild_recovered(pool);

	meta_err(ret_err, 0, "opened");
	for (int i = 1; i <= CW_DISKS_MAX; i++) {
		struct disk *d = pool->disks[i];
		static const char *const why[] = {
			[CW_DISK_MISSING] = "missing",
			[CW_DISK_WRONG_LABEL] = "its path holds another disk",
			[CW_DISK_BAD_LABEL] = "its label is damaged or does not match",
			[CW_DISK_SHRUNK] = "it shrank",
		};
		char shrunk[128];

		if (d && d->state != CW_DISK_PRESENT && ret_err) {
			size_t len = strlen(ret_err->msg);

			snprintf(shrunk, sizeof(shrunk), "it is %llu bytes, smaller than the %llu its "
				 "blocks need (truncated?)", (unsigned long long)d->found_bytes,
				 (unsigned long long)(d->nblocks << pool->bshift));
			snprintf(ret_err->msg + len, sizeof(ret_err->msg) - len,
				 "%s disk %u (%s, %s): %s", strcmp(ret_err->msg, "opened") == 0 ?
				 " degraded:" : ";", d->id, d->name, d->path,
				 d->state == CW_DISK_SHRUNK ? shrunk : why[d->state]);
		}
	}
	*ret_pool = pool;
	return 0;
fail:
	cw_pool_close(pool);
	return r;
}

/* ---- consistency ---- */

static int check_mark(struct cw_pool *pool, uint64_t **bm, uint64_t e, const char *owner,
		      uint64_t block, struct cw_error *err)
{
	uint32_t di = ENTRY_DISK(e);
	uint64_t p = ENTRY_PBLOCK(e);
	struct disk *d = di <= CW_DISKS_MAX ? pool->disks[di] : NULL;

	if (!d || p < 1 || p >= d->nblocks)
		return meta_err(err, -EUCLEAN, "%s block %llu points outside the pool (disk %u block %llu)",
				owner, (unsigned long long)block, di, (unsigned long long)p);
	if (bm[di][p >> 6] & (UINT64_C(1) << (p & 63)))
		return meta_err(err, -EUCLEAN, "disk %u block %llu is owned twice (again by %s block %llu)",
				di, (unsigned long long)p, owner, (unsigned long long)block);
	bm[di][p >> 6] |= UINT64_C(1) << (p & 63);
	return 0;
}

struct check_ctx {
	struct cw_pool *pool;
	uint64_t **bm;
	struct cw_error *err;
};

static int check_journal(void *ctx, uint64_t entry, uint64_t block)
{
	struct check_ctx *c = ctx;

	return check_mark(c->pool, c->bm, entry, "a journalled move's", block, c->err);
}

static int check_cache(void *ctx, uint64_t entry, uint64_t slot)
{
	struct check_ctx *c = ctx;

	return check_mark(c->pool, c->bm, entry, "a cache's slot", slot, c->err);
}

int lay_pool_check(struct cw_pool *pool, struct cw_error *err)
{
	uint64_t *bm[CW_DISKS_MAX + 1] = { 0 };
	int r = 0;

	for (int i = 1; i <= CW_DISKS_MAX; i++)
		if (pool->disks[i]) {
			bm[i] = calloc(CW_DIV_ROUND_UP(pool->disks[i]->nblocks, 64), sizeof(uint64_t));
			if (!bm[i]) {
				r = meta_err(err, -ENOMEM, "out of memory");
				goto out;
			}
			bm[i][0] = 1;
		}
	for (struct cw_part *p = pool->parts; p && r == 0; p = p->next) {
		uint64_t n = atomic_load_explicit(&p->nblocks, memory_order_relaxed);

		for (uint64_t b = 0; b < n && r == 0; b++)
			for (unsigned c = 0; c < p->copies && r == 0; c++) {
				uint64_t e = lay_copy_entry(p, c, b);

				if (!e)
					r = meta_err(err, -EUCLEAN, "block %llu of partition '%s' is not "
						     "mapped%s", (unsigned long long)b, p->name,
						     c ? " on all its copies" : "");
				else
					r = check_mark(pool, bm, e, p->name, b, err);
				/* Copies of a block on one disk are no copies. */
				for (unsigned k = 0; k < c && r == 0; k++)
					if (ENTRY_DISK(lay_copy_entry(p, k, b)) == ENTRY_DISK(e))
						r = meta_err(err, -EUCLEAN, "block %llu of partition "
							     "'%s' has two copies on disk %u",
							     (unsigned long long)b, p->name,
							     ENTRY_DISK(e));
			}
	}
	for (struct cw_move *m = pool->moves; m && r == 0; m = m->next)
		for (size_t k = 0; k < m->nsteps && r == 0; k++)
			r = check_mark(pool, bm, lay_step_dst(pool, &m->steps[k]), "a move target",
				       m->steps[k].block, err);
	if (r == 0) {
		struct check_ctx c = { pool, bm, err };

		r = lay_journal_reserved(pool, check_journal, &c);
		if (r == 0)
			r = lay_cache_check(pool, check_cache, &c);
	}
	for (int i = 1; i <= CW_DISKS_MAX && r == 0; i++) {
		struct disk *d = pool->disks[i];
		uint64_t zfree[CW_ZONES] = { 0 }, free = 0;

		if (!d)
			continue;
		if (memcmp(bm[i], d->bitmap, CW_DIV_ROUND_UP(d->nblocks, 64) * sizeof(uint64_t)) != 0) {
			r = meta_err(err, -EUCLEAN, "disk %u: the free map disagrees with the partitions", i);
			break;
		}
		for (int z = 0; z < CW_ZONES; z++)
			for (uint64_t b = d->zone_start[z]; b < d->zone_start[z + 1]; b++)
				if (!lay_disk_test(d, b)) {
					zfree[z]++;
					free++;
					if (b < d->low || b >= d->high)
						r = meta_err(err, -EUCLEAN,
							     "disk %u: free block %llu outside its hints", i,
							     (unsigned long long)b);
				}
		if (r == 0 && (free != d->free || zfree[0] != d->zone_free[0] ||
			       zfree[1] != d->zone_free[1] || zfree[2] != d->zone_free[2]))
			r = meta_err(err, -EUCLEAN, "disk %u: free counts disagree with its map", i);
	}
out:
	for (int i = 0; i <= CW_DISKS_MAX; i++)
		free(bm[i]);
	return r;
}
