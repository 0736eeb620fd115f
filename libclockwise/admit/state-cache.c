/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A partition's SSD cache and the reservations on it (rule 2,
 * cw_admit_state_cache_sync in clockwise/admit-state.h): a stream whose
 * blocks the cache may hold is booked on the cache's disks too, or, when
 * they refuse it, says why in cache_refused and its blocks stay off the
 * SSD: its range is pinned in the cache (cw_cache_pin), so no block of it
 * is promoted and one cached before is demoted first.
 *
 * Invariant: after every function here, the pinned ranges of a
 * partition's cache are exactly the ranges of its reservations whose
 * streams are not booked on every disk of the cache (plus, for the time
 * of a change, a range about to be booked: ast_cache_pin).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <clockwise/cache.h>

#include "admit/state-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

static bool id_in(const uint32_t *ids, size_t n, uint32_t id)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

/* Adds blocks [a, b) to the k pins; beyond 64 the last covers them all. */
static size_t pin_add(uint64_t *first, uint64_t *n, size_t k, uint64_t a, uint64_t b)
{
	if (k == 64) {
		uint64_t lo = CW_MIN(first[k - 1], a);

		n[k - 1] = CW_MAX(first[k - 1] + n[k - 1], b) - lo;
		first[k - 1] = lo;
		return k;
	}
	first[k] = a;
	n[k] = b - a;
	return k + 1;
}

/* Whether rv is booked on every disk of ids[0..n). */
static bool booked_on(const struct cw_admit_resv *rv, const uint32_t *ids, size_t n)
{
	uint32_t have[CW_DISKS_MAX];
	size_t nh = ast_resv_copies(rv, have);

	for (size_t j = 0; j < n; j++)
		if (!id_in(have, nh, ids[j]))
			return false;
	return true;
}

int ast_cache_pin(struct cw_admit_state *st, const char *part, uint64_t start, uint64_t end)
{
	uint64_t first[64], n[64];
	uint32_t disks[CW_DISKS_MAX];
	struct cw_part *pt;
	size_t k = 0, nd;
	int r = cw_part_lookup(st->pool, part, &pt);

	if (r < 0)
		return r;
	nd = cw_part_cache_disks(pt, disks);
	for (size_t i = 0; i < st->n_resvs; i++) {
		const struct cw_admit_resv *rv = st->resvs[i];

		if (strcmp(rv->part, part) == 0 && !booked_on(rv, disks, nd))
			k = pin_add(first, n, k, rv->range_start_bytes / st->block,
				    CW_DIV_ROUND_UP(rv->range_end_bytes, st->block));
	}
	if (end > start)
		k = pin_add(first, n, k, start / st->block, CW_DIV_ROUND_UP(end, st->block));
	return cw_cache_pin(pt, first, n, k);
}

/* ast_cache_pin of every partition (part NULL) or of part alone. */
static int repin(struct cw_admit_state *st, const char *part)
{
	_cleanup_free_ struct cw_part_info *parts = NULL;
	size_t n = 0;
	int r = part ? 0 : cw_part_list(st->pool, &parts, &n);

	if (part)
		return ast_cache_pin(st, part, 0, 0);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = ast_cache_pin(st, parts[i].name, 0, 0);
	return r;
}

static void set_cache_refused(struct cw_admit_state *st, struct cw_admit_resv *rv,
			      const char *why)
{
	pthread_mutex_lock(&st->lock);
	snprintf(rv->cache_refused, sizeof(rv->cache_refused), "%s", why);
	rv->cache_refused_new = why[0] != '\0';
	pthread_mutex_unlock(&st->lock);
}

/* Tests rv with copies on disks want[0..nw) and books it so if every disk
 * admits it; else books it with keep[0..nk) (those it has that the cache
 * still has) and says why in *ref.  1 when refused, 0 when booked. */
static int cache_book(struct cw_admit_state *st, struct cw_admit_resv *rv, const uint32_t *want,
		      size_t nw, const uint32_t *keep, size_t nk, size_t nh,
		      struct cw_admit_refusal *ref, struct cw_admit_changes *changes)
{
	_cleanup_(ast_prepared_done) struct prepared p = { 0 };
	_cleanup_(cw_admit_plan_done) struct cw_admit_plan plan = { 0 };
	char with[64 + CW_DISKS_MAX * (CW_NAME_MAX + 2)] = "with its blocks cached on disk";
	int r;

	memset(ref, 0, sizeof(*ref));
	for (size_t i = 0; i < nw; i++) {
		size_t len = strlen(with);

		snprintf(with + len, sizeof(with) - len, "%s %s", i ? "," : "",
			 st->disks[want[i]] ? st->disks[want[i]]->name : "?");
	}
	r = ast_prepare_resv(st, rv, rv->move_id, want, nw, &p, ref);
	if (r == 0)
		r = ast_plan_moved(st, &p, rv, with, &plan, ref);
	if (r == 0)
		return ast_rebook(st, rv, rv->move_id, ast_plan_parts(&p, &plan), plan.n_parts, ref,
				  changes);
	if (r != -EBUSY && r != -ENODEV)
		return r;
	if (!ref->reason[0])
		ast_refuse(ref, "%s, it could not be booked: %s", with, strerror(-r));
	r = nk == nh ? 0 : ast_rebook_lighter(st, rv, rv->move_id, keep, nk, changes);
	return r < 0 ? r : 1;
}

/* cw_admit_state_cache_sync's bookings, without the pins. */
static int sync_bookings(struct cw_admit_state *st, const char *part, bool retry,
			 struct cw_admit_changes *changes)
{
	int n = 0;

	for (size_t i = 0; i < st->n_resvs; i++) {
		struct cw_admit_resv *rv = st->resvs[i];
		uint32_t want[CW_DISKS_MAX], have[CW_DISKS_MAX], keep[CW_DISKS_MAX];
		size_t nw = 0, nh = ast_resv_copies(rv, have), nk = 0;
		struct cw_admit_refusal ref;
		struct cw_part *pt;
		bool covered = true;
		int r = 0;

		if (part && strcmp(rv->part, part) != 0)
			continue;
		if (rv->cache_refused_new) {
			pthread_mutex_lock(&st->lock);
			rv->cache_refused_new = false;
			pthread_mutex_unlock(&st->lock);
		}
		if (cw_part_lookup(st->pool, rv->part, &pt) == 0)
			nw = cw_part_cache_disks(pt, want);
		for (size_t j = 0; j < nh; j++)
			if (id_in(want, nw, have[j]))
				keep[nk++] = have[j];
		for (size_t j = 0; j < nw; j++)
			covered &= id_in(have, nh, want[j]);
		if (covered || (!retry && rv->cache_refused[0])) {
			/* Copies the cache can no longer have are not booked. */
			if (nk != nh)
				r = ast_rebook_lighter(st, rv, rv->move_id, keep, nk, changes);
			if (r == 0 && covered && rv->cache_refused[0])
				set_cache_refused(st, rv, "");
			if (r < 0)
				return r;
			continue;
		}
		r = cache_book(st, rv, want, nw, keep, nk, nh, &ref, changes);
		if (r < 0)
			return r;
		if (strcmp(rv->cache_refused, r ? ref.reason : "") != 0) {
			n += r;
			set_cache_refused(st, rv, r ? ref.reason : "");
		}
	}
	return n;
}

int cw_admit_state_cache_sync(struct cw_admit_state *st, const char *part, bool retry,
			      struct cw_admit_changes *changes)
{
	int r, p;

	if (!st)
		return -EINVAL;
	r = sync_bookings(st, part, retry, changes);
	/* Also after an error: what was booked is unpinned, what was not
	 * stays pinned. */
	p = repin(st, part);
	return r < 0 ? r : p < 0 ? p : r;
}

int cw_admit_state_cache_set(struct cw_admit_state *st, const char *part,
			     const struct cw_cache_conf *conf, struct cw_admit_changes *changes)
{
	struct cw_part *pt;
	int r, s;

	if (!st || !part || !conf)
		return -EINVAL;
	r = cw_part_lookup(st->pool, part, &pt);
	if (r < 0)
		return r;
	/* The whole partition pinned while the cache may take SSD blocks
	 * its streams are not booked on. */
	r = ast_cache_pin(st, part, 0, cw_part_size_bytes(pt));
	if (r == 0)
		r = cw_part_cache_set(pt, conf);
	s = cw_admit_state_cache_sync(st, part, true, changes);
	return r < 0 ? r : s;
}
