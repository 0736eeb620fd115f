/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fixtures for the data path's tests (test-lane, test-pool-backend,
 * test-service): a real pool whose disks are sparse files, on a memory file
 * system where there is one so that the dispatchers use the memory I/O
 * engine (cw_io_kind_for_fd), its admission state, a configuration, and
 * the back end, wired as clockwised wires them (pb_admit_event listens).
 * Include it after the daemon file under test (it needs pool-internal.h).
 */
#ifndef CW_TEST_DATAPATH_H
#define CW_TEST_DATAPATH_H

#include <sys/statfs.h>
#include <linux/magic.h>

#include <clockwise/admit-state.h>

#include "daemon/conf.h"
#include "daemon/path/path.h"
#include "layout/pooltest.h"

#define MIB (UINT64_C(1) << 20)

struct dp {
	struct tp tp;
	struct cwd_config *cfg;
	struct cw_admit_state *adm;
	struct pb *pb;
};

/* True when TMPDIR is (now) on a memory file system: /dev/shm is taken
 * unless TMPDIR already is one.  Call once, before the first pool. */
static inline bool dp_use_tmpfs(void)
{
	const char *t = getenv("TMPDIR");
	struct statfs sf;

	if (t && *t && statfs(t, &sf) == 0 && sf.f_type == TMPFS_MAGIC)
		return true;
	if (statfs("/dev/shm", &sf) == 0 && sf.f_type == TMPFS_MAGIC &&
	    access("/dev/shm", W_OK) == 0) {
		setenv("TMPDIR", "/dev/shm", 1);
		return true;
	}
	return false;
}

/* The pool: disks of nblocks[i] blocks of bs bytes, tiers[i] (NULL: all
 * HDDs), ids 1..n, named disk<id>. */
static inline void dp_pool(struct dp *d, uint32_t bs, size_t n, const uint64_t *nblocks,
			   const enum cw_tier *tiers)
{
	memset(d, 0, sizeof(*d));
	tp_pool(&d->tp, bs, n, nblocks, tiers);
}

/* The path of disk id's file. */
static inline void dp_disk_path(const struct dp *d, uint32_t id, char *buf, size_t len)
{
	snprintf(buf, len, "%s/d%u.img", d->tp.dir, id);
}

static inline struct cw_part *dp_part(struct dp *d, const char *name, uint64_t bytes,
				      enum cw_placement placement, uint32_t disk_id)
{
	struct cw_part_opts o = { .placement = placement, .disk_id = disk_id };
	struct cw_part *p;

	CU_ASSERT_FATAL(cw_part_create(d->tp.pool, name, bytes, &o, &p) == 0);
	return p;
}

/* The configuration from conf (NULL: the defaults; dispatchers never
 * at real-time priority here), the admission state, and the back end,
 * its dispatchers not started. */
static inline void dp_open(struct dp *d, const char *conf)
{
	char *err = NULL;

	if (cwd_config_parse(conf ? conf : "", "test.conf", &d->cfg, &err) < 0)
		fprintf(stderr, "%s\n", err);
	free(err);
	CU_ASSERT_FATAL(d->cfg != NULL);
	d->cfg->rt_priority = 0;
	CU_ASSERT_FATAL(cw_admit_state_new(d->tp.pool, NULL, &d->adm) == 0);
	CU_ASSERT_FATAL(pb_new(d->tp.pool, d->adm, d->cfg, &d->pb) == 0);
	cw_admit_state_set_listener(d->adm, pb_admit_event, d->pb);
}

static inline void dp_close(struct dp *d)
{
	pb_free(d->pb);
	cw_admit_state_free(d->adm);
	tp_fini(&d->tp);
	cwd_config_free(d->cfg);
	memset(d, 0, sizeof(*d));
}

/* Admits a stream of rate bytes/s in blocks of block over [from, to) of
 * part, stored (persistent) or for export export_name; returns it. */
static inline const struct cw_admit_resv *dp_reserve(struct dp *d, const char *part,
						      uint64_t rate, uint64_t block,
						      uint64_t from, uint64_t to,
						      const char *export_name)
{
	struct cw_admit_request rq = {
		.part = part, .rate_bps = rate, .block_bytes = block,
		.range_start_bytes = from, .range_end_bytes = to,
		.persistent = !export_name, .export_name = export_name,
	};
	const struct cw_admit_resv *rv = NULL;
	struct cw_admit_refusal ref = { 0 };
	int r = cw_admit_state_reserve(d->adm, &rq, &rv, &ref, NULL);

	if (r < 0)
		fprintf(stderr, "reservation refused: %s (%d)\n", ref.reason, r);
	CU_ASSERT_FATAL(r == 0 && rv != NULL);
	return rv;
}

/* The data path's side of an admitted reservation, or NULL. */
static inline struct resv *dp_held(struct pb *pb, const struct cw_admit_resv *a)
{
	struct resv *rv = NULL;

	pthread_mutex_lock(&pb->resv_lock);
	for (size_t i = 0; i < pb->nresvs; i++)
		if (pb->resvs[i] && pb->resvs[i]->a == a)
			rv = pb->resvs[i];
	pthread_mutex_unlock(&pb->resv_lock);
	return rv;
}

#endif
