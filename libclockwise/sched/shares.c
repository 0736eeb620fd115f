/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The pure side of RBFQ (Gulati, Merchant & Varman, section 3 and
 * Appendix B): the allocation it converges to, the critical capacities,
 * the admission of reservations against a disk's best-effort capacity,
 * and the gateway that carries delta and rho between disks (section 3.2).
 *
 * The allocation.  For continuously backlogged clients with reservation
 * M_i, weight w_i and limit L_i on a server of capacity C:
 *   - if C < sum M_i, the reservations cannot all be met and every client
 *     gets C M_i / sum M (the paper: "in proportion to their minimum
 *     demands");
 *   - otherwise client i gets S_i = clamp(lambda w_i, M_i, L_i), lambda the
 *     one value with sum S_i = C, or S_i = L_i when even that is short of C.
 * Without limits this is exactly the paper's Theorem: the clients whose
 * M_i / w_i exceeds lambda get M_i (they are c_{k*+1} .. c_n), the others
 * share eta = C - sum of those M in proportion to w.  S_i is nondecreasing
 * in lambda, so lambda is found by bisection.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

static double clamp_share(const struct cw_sched_client *c, double lambda)
{
	double s = lambda * c->weight;

	if (s < c->resv_ppm)
		s = c->resv_ppm;
	if (c->limit_ppm && s > c->limit_ppm)
		s = c->limit_ppm;
	return s;
}

static double total(const struct cw_sched_client *c, size_t n, double lambda)
{
	double sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += clamp_share(&c[i], lambda);
	return sum;
}

/* cw_sched_shares for any capacity (in ppm of one disk's time): a disk
 * whose model is slower than it serves more than 10^6 of it. */
static int shares(const struct cw_sched_client *c, size_t n, double cap, double *ret)
{
	double resv = 0, lo = 0, hi = 0;

	for (size_t i = 0; i < n; i++) {
		if (cw_sched_client_check(&c[i]) < 0)
			return -EINVAL;
		resv += c[i].resv_ppm;
		hi = CW_MAX(hi, CW_MAX(cap, (double)CW_SCHED_PPM) / c[i].weight);
	}
	if (cap < resv) {
		for (size_t i = 0; i < n; i++)
			ret[i] = cap * c[i].resv_ppm / resv / CW_SCHED_PPM;
		return 0;
	}
	/* at lambda = hi every share is at its limit or the whole disk */
	for (int k = 0; k < 200 && total(c, n, hi) > cap; k++) {
		double mid = (lo + hi) / 2;

		if (total(c, n, mid) > cap)
			hi = mid;
		else
			lo = mid;
	}
	for (size_t i = 0; i < n; i++)
		ret[i] = clamp_share(&c[i], total(c, n, hi) > cap ? lo : hi) / CW_SCHED_PPM;
	return 0;
}

int cw_sched_shares(const struct cw_sched_client *c, size_t n, uint32_t capacity_ppm,
		    double *ret)
{
	if ((n && (!c || !ret)) || capacity_ppm > CW_SCHED_PPM)
		return -EINVAL;
	return shares(c, n, capacity_ppm, ret);
}

int cw_sched_critical(const struct cw_sched_client *c, size_t n, double *ret_cap,
		      size_t *ret_order)
{
	if (n && (!c || !ret_cap || !ret_order))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (cw_sched_client_check(&c[i]) < 0)
			return -EINVAL;
		ret_order[i] = i;
	}
	/* insertion sort by M/w (cross-multiplied: exact), ties by index */
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0; j--) {
			const struct cw_sched_client *a = &c[ret_order[j - 1]], *b = &c[ret_order[j]];

			if ((uint64_t)a->resv_ppm * b->weight <= (uint64_t)b->resv_ppm * a->weight)
				break;
			size_t tmp = ret_order[j - 1];

			ret_order[j - 1] = ret_order[j];
			ret_order[j] = tmp;
		}
	for (size_t k = 0; k < n; k++) {
		const struct cw_sched_client *ck = &c[ret_order[k]];
		double w = 0, m = 0;

		for (size_t i = 0; i <= k; i++)
			w += c[ret_order[i]].weight;
		for (size_t i = k + 1; i < n; i++)
			m += c[ret_order[i]].resv_ppm;
		ret_cap[k] = (double)ck->resv_ppm / ck->weight * w + m;
	}
	return 0;
}

/* ---- received against due ------------------------------------------------ */

static void verdicts(struct cw_sched_share_out *o)
{
	double met = CW_SCHED_MET_PPM / 1e6, need = CW_MIN(o->reserved, o->due);

	/* one request either way: an interval may cut one in two */
	o->resv_met = !o->backlogged || o->received + o->one >= met * need;
	o->limit_held = !o->limit || o->received - o->one <= o->limit * (2 - met);
}

/* The clients on one disk: in[k] for k in idx[0..m). */
static int share_disk(const struct cw_sched_share_in *in, const size_t *idx, size_t m,
		      double interval, struct cw_sched_share_out *out)
{
	_cleanup_free_ struct cw_sched_client *q = calloc(m ? m : 1, sizeof(*q));
	_cleanup_free_ double *share = calloc(m ? m : 1, sizeof(*share));
	_cleanup_free_ size_t *who = calloc(m ? m : 1, sizeof(*who));
	double backlog_got = 0;
	size_t nb = 0;
	int r;

	if (!q || !share || !who)
		return -ENOMEM;
	for (size_t k = 0; k < m; k++) {
		const struct cw_sched_share_in *e = &in[idx[k]];
		struct cw_sched_share_out *o = &out[k];

		o->client = e->client;
		o->received = e->served_ns / interval;
		o->due = o->received;
		o->reserved = e->qos.resv_ppm / 1e6;
		o->limit = e->qos.limit_ppm / 1e6;
		/* a wait that began before the interval ends in it */
		o->throttled = CW_MIN(e->throttled_ns / interval, 1.0);
		o->one = e->requests ? e->served_ns / (double)e->requests / interval : 0;
		o->backlogged = e->busy_ns >= interval * (CW_SCHED_BACKLOGGED_PPM / 1e6);
		if (!o->backlogged)
			continue;
		q[nb] = e->qos;
		q[nb].spread = false;
		who[nb++] = k;
		backlog_got += o->received;
	}
	r = shares(q, nb, backlog_got * 1e6, share);
	if (r < 0)
		return r;
	for (size_t b = 0; b < nb; b++)
		out[who[b]].due = share[b];
	return 0;
}

int cw_sched_share_table(const struct cw_sched_share_in *in, size_t n, int64_t interval_ns,
			 struct cw_sched_share_out **ret, size_t *ret_n)
{
	_cleanup_free_ size_t *idx = calloc(n ? n : 1, sizeof(*idx));
	_cleanup_free_ struct cw_sched_share_out *part = calloc(n ? n : 1, sizeof(*part));
	_cleanup_free_ bool *done = calloc(n ? n : 1, sizeof(*done));
	struct cw_sched_share_out *rows = calloc(n ? n : 1, sizeof(*rows));
	size_t nrows = 0;

	if (!ret || !ret_n || (n && !in) || interval_ns <= 0) {
		free(rows);
		return -EINVAL;
	}
	if (!idx || !part || !done || !rows) {
		free(rows);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		if (in[i].served_ns < 0 || in[i].busy_ns < 0 || cw_sched_client_check(&in[i].qos) < 0) {
			free(rows);
			return -EINVAL;
		}
	/* rows in order of first appearance */
	for (size_t i = 0; i < n; i++) {
		size_t k;

		for (k = 0; k < nrows && rows[k].client != in[i].client; k++)
			;
		if (k == nrows)
			rows[nrows++] = (struct cw_sched_share_out){ .client = in[i].client };
	}
	/* disk by disk */
	for (size_t i = 0; i < n; i++) {
		size_t m = 0;
		int r;

		if (done[i])
			continue;
		for (size_t j = i; j < n; j++)
			if (!done[j] && in[j].disk == in[i].disk) {
				done[j] = true;
				idx[m++] = j;
			}
		r = share_disk(in, idx, m, (double)interval_ns, part);
		if (r < 0) {
			free(rows);
			return r;
		}
		for (size_t k = 0; k < m; k++) {
			struct cw_sched_share_out *o;

			for (o = rows; o->client != part[k].client; o++)
				;
			o->received += part[k].received;
			o->due += part[k].due;
			o->reserved += part[k].reserved;
			o->limit += part[k].limit;
			o->throttled = CW_MAX(o->throttled, part[k].throttled);
			o->one = CW_MAX(o->one, part[k].one);
			o->backlogged |= part[k].backlogged;
		}
	}
	for (size_t k = 0; k < nrows; k++)
		verdicts(&rows[k]);
	*ret = rows;
	*ret_n = nrows;
	return 0;
}

/* ---- admission ----------------------------------------------------------- */

int cw_sched_be_capacity(const struct cw_task *t, size_t n, uint32_t *ret)
{
	uint64_t used = 0;

	if ((n && !t) || !ret)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		unsigned __int128 part;

		if (t[i].period_ns <= 0 || t[i].service_ns <= 0)
			return -EINVAL;
		part = ((unsigned __int128)t[i].service_ns * CW_SCHED_PPM + (uint64_t)t[i].period_ns - 1) /
		       (uint64_t)t[i].period_ns;
		used += part > CW_SCHED_PPM ? CW_SCHED_PPM : (uint64_t)part;
	}
	*ret = used >= CW_SCHED_PPM ? 0 : (uint32_t)(CW_SCHED_PPM - used);
	return 0;
}

int cw_sched_rate_ppm(uint64_t per_s, int64_t cost_ns, uint32_t *ret)
{
	unsigned __int128 ppm;

	if (cost_ns <= 0 || !ret)
		return -EINVAL;
	/* per_s * cost_ns is nanoseconds of disk per second: 10^9 = the disk */
	ppm = ((unsigned __int128)per_s * (uint64_t)cost_ns + 999) / 1000;
	if (ppm > CW_SCHED_PPM)
		return -ERANGE;
	*ret = (uint32_t)ppm;
	return 0;
}

static void pct(char *buf, size_t len, uint64_t ppm)
{
	snprintf(buf, len, "%llu.%02llu%%", (unsigned long long)(ppm / 10000),
		 (unsigned long long)(ppm / 100 % 100));
}

int cw_sched_resv_admit(const uint32_t *others, size_t n, uint32_t want, uint32_t cap,
			struct cw_sched_resv_verdict *ret)
{
	uint64_t sum = 0;
	char a[28], b[28], c[28], d[28];

	if ((n && !others) || !ret || want > CW_SCHED_PPM || cap > CW_SCHED_PPM)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		sum += others[i];
	*ret = (struct cw_sched_resv_verdict){
		.capacity_ppm = cap,
		.reserved_ppm = sum,
		.free_ppm = sum >= cap ? 0 : (uint32_t)(cap - sum),
	};
	ret->fits = sum + want <= cap;
	if (!ret->fits) {
		pct(a, sizeof(a), want);
		pct(b, sizeof(b), ret->free_ppm);
		pct(c, sizeof(c), cap);
		pct(d, sizeof(d), sum);
		snprintf(ret->reason, sizeof(ret->reason),
			 "a reservation of %s does not fit: best effort has %s of the disk, "
			 "%s is reserved, at most %s is free", a, c, d, b);
	}
	return 0;
}

/* ---- the gateway across disks ------------------------------------------- */

void cw_sched_track_tag(struct cw_sched_track *d, int64_t total, int64_t total_resv,
			struct cw_sched_req *r)
{
	/* what the others served since the previous request here: dmClock's
	 * delta and rho without its "+ 1" (our tags add the request's own
	 * cost themselves) */
	r->other_ns = CW_MAX(total - d->own_ns - d->seen_ns, 0);
	r->other_resv_ns = CW_MAX(total_resv - d->own_resv_ns - d->seen_resv_ns, 0);
	d->seen_ns = total - d->own_ns;
	d->seen_resv_ns = total_resv - d->own_resv_ns;
}

void cw_sched_track_done(struct cw_sched_track *d, const struct cw_sched_req *r,
			 int64_t *ret_cost, int64_t *ret_resv)
{
	int64_t cost = cw_sched_req_cost(r);

	*ret_cost = cost;
	*ret_resv = r->phase == CW_SCHED_PHASE_RESV ? cost : 0;
	d->own_ns += *ret_cost;
	d->own_resv_ns += *ret_resv;
}

struct trk_client {
	int64_t total, total_resv;
	struct cw_sched_track d[];
};

struct cw_sched_tracker {
	unsigned n_disks;
	struct sched_idmap map;
};

int cw_sched_tracker_new(unsigned n_disks, struct cw_sched_tracker **ret)
{
	struct cw_sched_tracker *t;

	if (!n_disks || n_disks > 1u << 16 || !ret)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->n_disks = n_disks;
	*ret = t;
	return 0;
}

void cw_sched_tracker_free(struct cw_sched_tracker *t)
{
	if (!t)
		return;
	sched_idmap_done(&t->map, free);
	free(t);
}

/* The client's record, for a request to disk. */
static int trk_get(struct cw_sched_tracker *t, unsigned disk, const struct cw_sched_req *r,
		   struct trk_client **ret)
{
	struct trk_client *c;
	int e;

	if (!t || !r || disk >= t->n_disks)
		return -EINVAL;
	c = sched_idmap_get(&t->map, r->client);
	if (!c) {
		c = calloc(1, sizeof(*c) + t->n_disks * sizeof(c->d[0]));
		if (!c)
			return -ENOMEM;
		e = sched_idmap_put(&t->map, r->client, c);
		if (e < 0) {
			free(c);
			return e;
		}
	}
	*ret = c;
	return 0;
}

int cw_sched_tracker_tag(struct cw_sched_tracker *t, unsigned disk, struct cw_sched_req *r)
{
	struct trk_client *c;
	int e = trk_get(t, disk, r, &c);

	if (e < 0)
		return e;
	cw_sched_track_tag(&c->d[disk], c->total, c->total_resv, r);
	return 0;
}

int cw_sched_tracker_done(struct cw_sched_tracker *t, unsigned disk, const struct cw_sched_req *r)
{
	struct trk_client *c;
	int64_t cost, resv;
	int e = trk_get(t, disk, r, &c);

	if (e < 0)
		return e;
	cw_sched_track_done(&c->d[disk], r, &cost, &resv);
	c->total += cost;
	c->total_resv += resv;
	return 0;
}

const struct cw_sched_beq_ops *cw_sched_beq_by_name(const char *name)
{
	if (!name)
		return NULL;
	if (!strcmp(name, "fifo"))
		return cw_sched_beq_fifo();
	if (!strcmp(name, "rbfq"))
		return cw_sched_beq_rbfq();
	if (!strcmp(name, "sfc"))
		return cw_sched_beq_sfc();
	return NULL;
}
