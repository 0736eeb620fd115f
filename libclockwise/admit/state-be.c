/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Best effort between exports (be_order rbfq, clockwise/sched-beq.h): an
 * export's QoS (reservation, weight, limit) as one scheduler client per
 * disk its partition has blocks on, in millionths of that disk's time.  A
 * reservation is admitted when it fits in each disk's best-effort
 * capacity beside the other exports' (cw_sched_resv_admit); a stream is
 * refused when it would take that room away (ast_be_streams_check).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/sched-beq.h>
#include <clockwise/units.h>

#include "admit/state-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#define BES_MAX 4096

void ast_be_free(struct cw_admit_be *be)
{
	if (!be)
		return;
	free(be->parts);
	free(be);
}

/* A rate as a share of a disk's time: rate (bytes or requests per second)
 * times share_ppm of it on the disk, in requests of bytes that each cost
 * cost_ns; rounded up.  -ERANGE beyond max. */
static int be_rate_ppm(uint64_t rate, bool iops, uint64_t bytes, int64_t cost_ns, uint32_t share,
		       uint64_t max, uint32_t *ret)
{
	unsigned __int128 num = (unsigned __int128)rate * share * (uint64_t)cost_ns;
	unsigned __int128 den = (unsigned __int128)1000 * CW_SCHED_PPM * (iops ? 1 : bytes);
	unsigned __int128 ppm = (num + den - 1) / den;

	if (ppm > max)
		return -ERANGE;
	*ret = (uint32_t)ppm;
	return 0;
}

/* The inverse, rounded down: the largest rate that takes at most ppm. */
static uint64_t be_ppm_rate(uint32_t ppm, bool iops, uint64_t bytes, int64_t cost_ns,
			    uint32_t share)
{
	unsigned __int128 num = (unsigned __int128)ppm * 1000 * CW_SCHED_PPM * (iops ? 1 : bytes);
	unsigned __int128 den = (unsigned __int128)share * (uint64_t)cost_ns;

	if (!den)
		return UINT64_MAX;
	num /= den;
	return num > INT64_MAX ? INT64_MAX : (uint64_t)num;
}

static int be_cost(const struct cw_model *m, bool iops, uint64_t piece, uint64_t *ret_bytes,
		   int64_t *ret_cost)
{
	*ret_bytes = iops ? CW_ADMIT_BE_IOPS_BYTES : piece;
	return cw_model_mean_ns(m, *ret_bytes, ret_cost);
}

/* share_ppm of the rates on the disk, or (spread) all of them, at most
 * CW_SCHED_SPREAD_MAX disks' worth. */
static int be_client(const struct cw_be_qos *q, const struct cw_model *m, uint64_t piece,
		     uint32_t share, bool spread, struct cw_sched_client *ret)
{
	struct cw_sched_client c = { .weight = q && q->weight ? q->weight : 1, .spread = spread };
	uint64_t max = (uint64_t)CW_SCHED_PPM * (spread ? CW_SCHED_SPREAD_MAX : 1);
	uint64_t bytes;
	int64_t cost;
	int r;

	if (!q || !m || !ret || !piece || share > CW_SCHED_PPM || q->weight > CW_BE_WEIGHT_MAX)
		return -EINVAL;
	if (q->reserve) {
		r = be_cost(m, q->reserve_iops, piece, &bytes, &cost);
		if (r == 0)
			r = be_rate_ppm(q->reserve, q->reserve_iops, bytes, cost, share, max,
					&c.resv_ppm);
		if (r < 0)
			return r;
	}
	if (q->limit) {
		r = be_cost(m, q->limit_iops, piece, &bytes, &cost);
		if (r == 0)
			r = be_rate_ppm(q->limit, q->limit_iops, bytes, cost, share, max,
					&c.limit_ppm);
		if (r == -ERANGE)
			c.limit_ppm = 0;	/* more than the disk: no limit there */
		else if (r < 0)
			return r;
		else if (!c.limit_ppm && share)
			c.limit_ppm = 1;
	}
	if (cw_sched_client_check(&c) < 0)
		return -EINVAL;
	*ret = c;
	return 0;
}

/* The parts of an export's QoS: one client per disk its partition has
 * blocks on. */
static int be_parts(const struct cw_admit_state *st, struct cw_part *part,
		    const struct cw_be_qos *q, struct cw_admit_be *be, struct cw_admit_refusal *ref)
{
	uint64_t nb = cw_part_nblocks(part), count[CW_DISKS_MAX + 1] = { 0 };
	_cleanup_free_ uint32_t *ids = calloc(nb ? nb : 1, sizeof(*ids));
	size_t n = 0;
	int r;

	if (!ids)
		return -ENOMEM;
	r = nb ? cw_part_block_disks(part, 0, nb, ids) : 0;
	if (r < 0)
		return r;
	for (uint64_t b = 0; b < nb; b++)
		if (ids[b] <= CW_DISKS_MAX && count[ids[b]]++ == 0)
			n++;
	be->parts = calloc(n ? n : 1, sizeof(*be->parts));
	if (!be->parts)
		return -ENOMEM;
	for (uint32_t id = 1; id <= CW_DISKS_MAX; id++) {
		const struct dstate *d = st->disks[id];
		struct cw_admit_be_part *bp;
		char a[CW_UNITS_BUF];

		if (!count[id])
			continue;
		if (!d) {
			ast_refuse(ref, "partition %s has blocks on disk %" PRIu32 ", which has no "
				   "model", be->part, id);
			return -ENODEV;
		}
		bp = &be->parts[be->n_parts++];
		bp->disk_id = id;
		bp->share_ppm = (uint32_t)CW_DIV_ROUND_UP(count[id] * CW_SCHED_PPM, nb);
		r = be_client(q, &d->model, d->plan.be_piece_bytes, bp->share_ppm, false,
			      &bp->client);
		if (r == 0)
			r = be_client(q, &d->model, d->plan.be_piece_bytes, CW_SCHED_PPM, true,
				      &bp->order);
		if (r == -ERANGE)
			ast_refuse(ref, "disk %s: a reservation of %s is more than the whole disk",
				   d->name, cw_units_format_iorate(q->reserve, q->reserve_iops, a));
		else if (r == -EINVAL)
			ast_refuse(ref, "disk %s: the limit is below the reservation", d->name);
		if (r < 0)
			return r == -ERANGE ? -EINVAL : r;
	}
	return 0;
}

/* The reservations of exports other than except on a disk, in ppm. */
static size_t be_others(const struct cw_admit_state *st, uint32_t disk_id, const char *except,
			uint32_t *ret)
{
	size_t n = 0;

	for (size_t i = 0; i < st->n_bes; i++) {
		if (except && !strcmp(st->bes[i]->export_name, except))
			continue;
		for (size_t j = 0; j < st->bes[i]->n_parts; j++)
			if (st->bes[i]->parts[j].disk_id == disk_id &&
			    st->bes[i]->parts[j].client.resv_ppm)
				ret[n++] = st->bes[i]->parts[j].client.resv_ppm;
	}
	return n;
}

static int be_capacity(const struct cw_admit_state *st, uint32_t disk_id, uint32_t *ret)
{
	_cleanup_free_ struct cw_task *tasks = NULL;
	size_t n;
	int r = ast_disk_tasks(st, disk_id, &tasks, NULL, &n);

	return r < 0 ? r : cw_sched_be_capacity(tasks, n, ret);
}

int ast_be_streams_check(const struct cw_admit_state *st, uint32_t disk_id,
			 const struct cw_task *tasks, size_t n, const struct cw_task *extra,
			 struct cw_admit_refusal *ref)
{
	_cleanup_free_ struct cw_task *all = calloc(n + 1, sizeof(*all));
	_cleanup_free_ uint32_t *others = calloc(st->n_bes + 1, sizeof(*others));
	struct cw_sched_resv_verdict v;
	uint32_t cap;
	size_t k;
	int r;

	if (!all || !others)
		return -ENOMEM;
	if (n)
		memcpy(all, tasks, n * sizeof(*all));
	all[n] = *extra;
	k = be_others(st, disk_id, NULL, others);
	if (!k)
		return 0;
	r = cw_sched_be_capacity(all, n + 1, &cap);
	if (r == 0)
		r = cw_sched_resv_admit(others, k, 0, cap, &v);
	if (r < 0)
		return r;
	if (v.fits)
		return 0;
	if (ref) {
		ref->disk_id = disk_id;
		snprintf(ref->disk, sizeof(ref->disk), "%s", st->disks[disk_id]->name);
		ast_refuse(ref, "disk %s: the stream would leave best effort %.2f%% of the disk, "
			   "and exports reserve %.2f%% of it", st->disks[disk_id]->name, cap / 1e4,
			   v.reserved_ppm / 1e4);
	}
	return -EBUSY;
}

static int be_find_idx(const struct cw_admit_state *st, const char *name, size_t *ret)
{
	for (size_t i = 0; i < st->n_bes; i++)
		if (!strcmp(st->bes[i]->export_name, name)) {
			*ret = i;
			return 0;
		}
	return -ENOENT;
}

/* Admits be's reservation on each of its disks; on refusal says what
 * would fit on every disk. */
static int be_admit(const struct cw_admit_state *st, const struct cw_admit_be *be,
		    struct cw_admit_refusal *ref)
{
	_cleanup_free_ uint32_t *others = calloc(st->n_bes + 1, sizeof(*others));
	uint64_t fits = UINT64_MAX;
	int refused = -1;
	char a[CW_UNITS_BUF], b[CW_UNITS_BUF];

	if (!others)
		return -ENOMEM;
	if (!be->qos.reserve)
		return 0;
	for (size_t i = 0; i < be->n_parts; i++) {
		const struct cw_admit_be_part *bp = &be->parts[i];
		const struct dstate *d = st->disks[bp->disk_id];
		struct cw_sched_resv_verdict v;
		uint64_t bytes = 0;
		int64_t cost = 0;
		uint32_t cap;
		size_t k = be_others(st, bp->disk_id, be->export_name, others);
		int r = be_capacity(st, bp->disk_id, &cap);

		if (r == 0)
			r = cw_sched_resv_admit(others, k, bp->client.resv_ppm, cap, &v);
		if (r == 0)
			r = be_cost(&d->model, be->qos.reserve_iops, d->plan.be_piece_bytes, &bytes,
				    &cost);
		if (r < 0)
			return r;
		fits = CW_MIN(fits, be_ppm_rate(v.free_ppm, be->qos.reserve_iops, bytes, cost,
						bp->share_ppm));
		if (!v.fits && refused < 0) {
			refused = (int)i;
			if (ref) {
				ref->disk_id = bp->disk_id;
				snprintf(ref->disk, sizeof(ref->disk), "%s", d->name);
			}
		}
	}
	if (refused < 0)
		return 0;
	{
		const struct cw_admit_be_part *bp = &be->parts[refused];
		struct cw_sched_resv_verdict v;
		uint32_t cap;
		size_t k = be_others(st, bp->disk_id, be->export_name, others);

		if (be_capacity(st, bp->disk_id, &cap) == 0 &&
		    cw_sched_resv_admit(others, k, bp->client.resv_ppm, cap, &v) == 0)
			ast_refuse(ref, "export %s: a best-effort reservation of %s does not fit "
				   "on disk %s: it needs %.2f%% of the disk, best effort has "
				   "%.2f%%, other exports reserve %.2f%%; at most %s fits",
				   be->export_name,
				   cw_units_format_iorate(be->qos.reserve, be->qos.reserve_iops, a),
				   st->disks[bp->disk_id]->name, bp->client.resv_ppm / 1e4,
				   v.capacity_ppm / 1e4, v.reserved_ppm / 1e4,
				   fits ? cw_units_format_iorate(fits, be->qos.reserve_iops, b) :
				   "nothing");
	}
	return -EBUSY;
}

static int be_build(const struct cw_admit_state *st, const char *export_name,
		    const char *part_name, const struct cw_be_qos *q, bool persistent,
		    struct cw_admit_be **ret, struct cw_admit_refusal *ref)
{
	struct cw_admit_be *be;
	struct cw_part_info pi;
	struct cw_part *part;
	int r;

	if (!export_name || !cw_client_name_valid(export_name)) {
		ast_refuse(ref, "\"%s\" is not an export name", export_name ? export_name : "");
		return -EINVAL;
	}
	if (!part_name) {
		ast_refuse(ref, "no partition named");
		return -EINVAL;
	}
	if (q->weight > CW_BE_WEIGHT_MAX) {
		ast_refuse(ref, "weight %" PRIu32 " is out of range; expected 1 to %d", q->weight,
			   CW_BE_WEIGHT_MAX);
		return -EINVAL;
	}
	r = cw_part_lookup(st->pool, part_name, &part);
	if (r == -ENOENT)
		ast_refuse(ref, "no partition \"%s\"", part_name);
	if (r == 0)
		r = cw_part_info(part, &pi);
	if (r < 0)
		return r;
	be = calloc(1, sizeof(*be));
	if (!be)
		return -ENOMEM;
	snprintf(be->export_name, sizeof(be->export_name), "%s", export_name);
	snprintf(be->part, sizeof(be->part), "%s", pi.name);
	be->part_id = pi.id;
	be->persistent = persistent;
	be->qos = *q;
	if (!be->qos.weight)
		be->qos.weight = 1;
	r = be_parts(st, part, &be->qos, be, ref);
	if (r < 0) {
		ast_be_free(be);
		return r;
	}
	*ret = be;
	return 0;
}

/* Puts be in place of the export's old QoS, or appends it. */
static int be_place(struct cw_admit_state *st, struct cw_admit_be *be, struct cw_admit_be **ret_old)
{
	size_t i;

	*ret_old = NULL;
	if (be_find_idx(st, be->export_name, &i) == 0) {
		*ret_old = st->bes[i];
		st->bes[i] = be;
		return 0;
	}
	if (st->n_bes >= BES_MAX)
		return -ENOSPC;
	struct cw_admit_be **v = realloc(st->bes, (st->n_bes + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	st->bes = v;
	st->bes[st->n_bes++] = be;
	return 0;
}

int cw_admit_state_be_set(struct cw_admit_state *st, const struct cw_admit_be_request *req,
			  const struct cw_admit_be **ret_be, struct cw_admit_refusal *ref)
{
	struct cw_admit_be *be = NULL, *old;
	int r;

	if (ref)
		memset(ref, 0, sizeof(*ref));
	if (ret_be)
		*ret_be = NULL;
	if (!st || !req)
		return -EINVAL;
	r = be_build(st, req->export_name, req->part, &req->qos, req->persistent, &be, ref);
	if (r == 0)
		r = be_admit(st, be, ref);
	if (r < 0 || req->dry_run)
		goto done;
	if (be->persistent) {
		struct cw_be_qos_rec rec = { .part_id = be->part_id, .qos = be->qos };

		snprintf(rec.export_name, sizeof(rec.export_name), "%s", be->export_name);
		r = cw_be_qos_put(st->pool, &rec);
		if (r < 0) {
			const struct cw_error *e = cw_pool_last_error(st->pool);

			ast_refuse(ref, "storing the QoS: %s",
				   e && e->code == r && e->msg[0] ? e->msg : strerror(-r));
			goto done;
		}
	} else {
		size_t i;

		/* A stored QoS the daemon's own replaces is no longer stored. */
		if (be_find_idx(st, be->export_name, &i) == 0 && st->bes[i]->persistent)
			(void)cw_be_qos_remove(st->pool, be->export_name);
	}
	r = be_place(st, be, &old);
	if (r < 0)
		goto done;
	ast_emit(st, &(struct cw_admit_event){ .kind = CW_ADMIT_EV_BE_SET, .be = be });
	ast_be_free(old);
	if (ret_be)
		*ret_be = be;
	be = NULL;
done:
	ast_be_free(be);
	return r;
}

int cw_admit_state_be_clear(struct cw_admit_state *st, const char *name)
{
	struct cw_admit_be *be;
	size_t i;
	int r;

	if (!st || !name)
		return -EINVAL;
	if (be_find_idx(st, name, &i) < 0)
		return -ENOENT;
	be = st->bes[i];
	if (be->persistent) {
		r = cw_be_qos_remove(st->pool, name);
		if (r < 0 && r != -ENOENT)
			return r;
	}
	st->bes[i] = st->bes[--st->n_bes];
	ast_emit(st, &(struct cw_admit_event){ .kind = CW_ADMIT_EV_BE_CLEARED, .be = be });
	ast_be_free(be);
	return 0;
}

/* Builds again the QoS of every export of partition part (NULL: any) with
 * a part on disk_id (0: any): the blocks it has on each disk and the
 * models' costs, as they are now.  Not refused (the reservation was
 * admitted; like a stored stream whose model changed). */
int ast_be_refresh(struct cw_admit_state *st, const char *part, uint32_t disk_id)
{
	for (size_t i = 0; i < st->n_bes; i++) {
		struct cw_admit_be *old = st->bes[i], *be;
		bool touches = !disk_id;
		int r;

		for (size_t j = 0; j < old->n_parts && !touches; j++)
			touches = old->parts[j].disk_id == disk_id;
		if (!touches || (part && strcmp(old->part, part)))
			continue;
		r = be_build(st, old->export_name, old->part, &old->qos, old->persistent, &be, NULL);
		if (r < 0)
			return r;
		st->bes[i] = be;
		ast_emit(st, &(struct cw_admit_event){ .kind = CW_ADMIT_EV_BE_SET, .be = be });
		ast_be_free(old);
	}
	return 0;
}

int cw_admit_state_be_refresh(struct cw_admit_state *st, const char *part)
{
	if (!st || !part)
		return -EINVAL;
	return ast_be_refresh(st, part, 0);
}

const struct cw_admit_be *cw_admit_state_be_find(const struct cw_admit_state *st,
						 const char *name)
{
	size_t i;

	return st && name && be_find_idx(st, name, &i) == 0 ? st->bes[i] : NULL;
}

const struct cw_admit_be *cw_admit_state_be_at(const struct cw_admit_state *st, size_t i)
{
	return st && i < st->n_bes ? st->bes[i] : NULL;
}

/* The stored QoS, as they were set (a model changed since may have moved
 * their shares; they are not refused here, like stored streams). */
int ast_bes_load(struct cw_admit_state *st)
{
	_cleanup_free_ struct cw_be_qos_rec *recs = NULL;
	_cleanup_free_ struct cw_part_info *parts = NULL;
	size_t n = 0, np = 0;
	int r = cw_be_qos_list(st->pool, &recs, &n);

	if (r == 0 && n)
		r = cw_part_list(st->pool, &parts, &np);
	for (size_t i = 0; r == 0 && i < n; i++) {
		struct cw_admit_be *be, *old;
		size_t k;

		for (k = 0; k < np && parts[k].id != recs[i].part_id; k++)
			;
		if (k == np)
			continue;	/* the database's RESTRICT keeps this from happening */
		r = be_build(st, recs[i].export_name, parts[k].name, &recs[i].qos, true, &be, NULL);
		if (r == 0) {
			r = be_place(st, be, &old);
			if (r < 0)
				ast_be_free(be);
			ast_be_free(old);
		}
	}
	return r;
}
