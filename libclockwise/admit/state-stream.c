/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A stream's life in the admission state: reserved and released, with
 * the SSD cache of its partition kept true to rule 2 on the way.  Every
 * caller takes this one path: the control server's resv.create and
 * resv.release, clockwised -r, cwsim's streams.
 *
 * Invariant (rule 2 for caches, clockwise/cache.h): a block in the range
 * of a reservation is held by its partition's SSD cache only while the
 * stream is booked on every disk of the cache (each request charged
 * there: a cached block is read from the SSD and written to both).  Any
 * other reserved range is pinned in the cache (cw_cache_pin: not
 * promoted, demoted first if cached before).  The order keeps it true at
 * every instant, whoever reserves:
 *
 *   reserve:  admit (the tests alone: a refusal changes nothing, no pin)
 *             -> pin the new range beside the ranges pinned now, before
 *                the stream is booked anywhere
 *             -> book the stream (pool, memory, events, plans)
 *             -> sync: book it on the cache's disks where they admit it,
 *                else cache_refused says why; then re-pin the partition,
 *                which unpins the range only if it is booked there;
 *   release:  release (pool, memory, events, plans)
 *             -> sync every partition with retry: the room it leaves may
 *                admit a stream refused on a cache before; its range is
 *                no longer reserved, so it is no longer pinned.
 *
 * A failed sync leaves what it did not book pinned (the pins follow the
 * bookings, not the refusals), so an error never unpins a range whose
 * stream the cache's disks do not carry.
 *
 * Rule 2 for moves rides on the same path: admit finds a running move
 * that takes blocks of the range to other disks and tests the stream,
 * and book stores it, on both sides of that move (state-admit.c,
 * prepare_req), so no caller has to ask the journal first.
 */
#include "config.h"

#include "admit/state-internal.h"
#include "common/cleanup.h"

int cw_admit_state_reserve(struct cw_admit_state *st, const struct cw_admit_request *req,
			   const struct cw_admit_resv **ret_resv, struct cw_admit_refusal *ref,
			   struct cw_admit_changes *changes)
{
	_cleanup_(ast_admitted_done) struct admitted a = { 0 };
	int r;

	if (ret_resv)
		*ret_resv = NULL;
	r = ast_admit(st, req, &a, ref);
	if (r < 0 || req->dry_run)
		return r;
	r = ast_cache_pin(st, a.p.pi.name, req->range_start_bytes, a.p.end);
	if (r == 0)
		r = ast_book(st, req, &a, ret_resv, ref, changes);
	/* Also when booking failed: the pin goes again.  A sync that fails
	 * leaves the range pinned, and the next one tries again. */
	(void)cw_admit_state_cache_sync(st, a.p.pi.name, false, changes);
	return r;
}

int cw_admit_state_release(struct cw_admit_state *st, uint64_t id,
			   struct cw_admit_changes *changes)
{
	int r = ast_release(st, id, changes);

	if (r == 0)
		(void)cw_admit_state_cache_sync(st, NULL, true, changes);
	return r;
}
