/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: rule 2 for a partition's SSD cache, kept by the admission
 * state's reserve and release (libclockwise/admit/state-stream.c) on a
 * real pool database: a block of a reserved range is pinned out of the
 * cache from before its stream is booked until it is booked on the
 * cache's disk, stays pinned while the SSD refuses the stream, and is
 * unpinned after release; a refusal or a dry run pins nothing.  After
 * every call the pins are exactly the reserved ranges whose streams the
 * cache's disks do not carry.
 */
#include "config.h"

#include <inttypes.h>

#include <clockwise/admit-state.h>
#include <clockwise/cache.h>
#include <clockwise/pool-objects.h>

#include "layout/pooltest.h"

#define MIB (UINT64_C(1) << 20)

static struct tp T;
static struct cw_part *part;

/* What the listener saw when a stream was booked. */
static struct {
	int added;
	bool range_pinned;	/* every block of its range, at RESV_ADDED */
} seen;

static bool range_pinned(uint64_t start, uint64_t end)
{
	for (uint64_t b = start / MIB; b < (end + MIB - 1) / MIB; b++)
		if (!cw_cache_pinned(part, b))
			return false;
	return true;
}

static void listener(void *ud, const struct cw_admit_event *ev)
{
	(void)ud;
	if (ev->kind != CW_ADMIT_EV_RESV_ADDED)
		return;
	seen.added++;
	seen.range_pinned = range_pinned(ev->resv->range_start_bytes, ev->resv->range_end_bytes);
}

/* Two HDDs and an SSD; partition media on the HDDs with a 64 MiB cache. */
static struct cw_admit_state *setup(void)
{
	static const enum cw_tier tiers[] = { CW_TIER_HDD, CW_TIER_HDD, CW_TIER_SSD };
	const uint64_t n[3] = { 1024, 1024, 512 };
	struct cw_part_opts hdd = { .tier = CW_TIER_PREF_HDD };
	struct cw_cache_conf conf = { 64 * MIB, CW_CACHE_WRITE_THROUGH };
	struct cw_admit_state_opts o;
	struct cw_admit_state *st;

	memset(&seen, 0, sizeof(seen));
	tp_pool(&T, 0, 3, n, tiers);
	CU_ASSERT_FATAL(cw_part_create(T.pool, "media", 256 * MIB, &hdd, &part) == 0);
	cw_admit_state_opts_init(&o);
	o.listener = listener;
	CU_ASSERT_FATAL(cw_admit_state_new(T.pool, &o, &st) == 0);
	CU_ASSERT_FATAL(cw_admit_state_cache_set(st, "media", &conf, NULL) == 0);
	return st;
}

/* An SSD as slow as an HDD. */
static void slow_ssd(struct cw_admit_state *st)
{
	struct cw_model slow;

	CU_ASSERT_FATAL(cw_model_preset("hdd7200", &slow) == 0);
	CU_ASSERT_FATAL(cw_admit_state_set_model(st, 3, &slow, CW_ADMIT_MODEL_STORED, NULL, NULL,
						 NULL) == 0);
}

static bool on_ssd(const struct cw_admit_resv *rv)
{
	const struct cw_admit_resv_part *p = cw_admit_resv_part_on(rv, 3);

	return p && p->copy;
}

/* The invariant: a block is pinned iff a reservation's range holds it
 * and that stream is not booked on every disk of the cache (disk 3, or
 * none when there is no cache). */
static bool rule2_holds(const struct cw_admit_state *st)
{
	const struct cw_admit_resv *rv;
	uint32_t ids[CW_DISKS_MAX];
	bool cached = cw_part_cache_disks(part, ids) > 0;

	for (uint64_t b = 0; b < 256; b++) {
		bool want = false;

		for (size_t i = 0; (rv = cw_admit_state_resv_at(st, i)); i++)
			if (b >= rv->range_start_bytes / MIB && b < (rv->range_end_bytes + MIB - 1) / MIB)
				want |= cached && !on_ssd(rv);
		if (cw_cache_pinned(part, b) != want) {
			printf("\n  block %" PRIu64 ": pinned %d, should be %d\n", b,
			       cw_cache_pinned(part, b), want);
			return false;
		}
	}
	return true;
}

static struct cw_admit_request req(uint64_t rate, uint64_t start, uint64_t end)
{
	return (struct cw_admit_request){ .part = "media", .rate_bps = rate, .block_bytes = MIB,
					  .range_start_bytes = start, .range_end_bytes = end,
					  .persistent = true };
}

/* Booked on the SSD: pinned while it was booked, unpinned once it is
 * carried there, and nothing pinned after release. */
static void test_booked(void)
{
	struct cw_admit_state *st = setup();
	struct cw_admit_request rq = req(0, 16 * MIB, 48 * MIB);
	const struct cw_admit_resv *rv;
	uint64_t max, id;

	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &max, NULL) == 0);
	rq.rate_bps = max / 5;
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, NULL, NULL) == 0);
	CU_ASSERT_EQUAL(seen.added, 1);
	CU_ASSERT_TRUE(seen.range_pinned);
	CU_ASSERT_TRUE(on_ssd(rv));
	CU_ASSERT(!rv->cache_refused[0]);
	CU_ASSERT_FALSE(cw_cache_pinned(part, 16));
	CU_ASSERT_TRUE(rule2_holds(st));
	id = rv->id;
	CU_ASSERT_FATAL(cw_admit_state_release(st, id, NULL) == 0);
	CU_ASSERT_TRUE(rule2_holds(st));
	cw_admit_state_free(st);
	tp_fini(&T);
}

/* An SSD as slow as an HDD refuses a stream the HDDs share: admitted on
 * the HDDs, its range stays pinned and it says why; a request admission
 * refuses, and a dry run, pin nothing and book nothing; released, the
 * range is free again. */
static void test_refused(void)
{
	struct cw_admit_state *st = setup();
	struct cw_admit_request rq = req(0, 0, 64 * MIB);
	struct cw_admit_refusal ref;
	const struct cw_admit_resv *rv, *no;
	uint64_t max;

	slow_ssd(st);
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &max, NULL) == 0);
	rq.rate_bps = max * 3 / 4;
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, NULL, NULL) == 0);
	CU_ASSERT_TRUE(seen.range_pinned);
	CU_ASSERT_FALSE(on_ssd(rv));
	CU_ASSERT(strstr(rv->cache_refused, "with its blocks cached on disk disk3") != NULL);
	CU_ASSERT_TRUE(rv->cache_refused_new);
	CU_ASSERT_TRUE(range_pinned(0, 64 * MIB));
	CU_ASSERT_FALSE(cw_cache_pinned(part, 64));
	CU_ASSERT_TRUE(rule2_holds(st));

	/* Refused by admission (the HDDs are full): no pin, no booking. */
	rq = req(max, 128 * MIB, 192 * MIB);
	CU_ASSERT_EQUAL(cw_admit_state_reserve(st, &rq, &no, &ref, NULL), -EBUSY);
	CU_ASSERT(no == NULL && ref.reason[0]);
	CU_ASSERT_EQUAL(seen.added, 1);
	CU_ASSERT_FALSE(cw_cache_pinned(part, 128));
	CU_ASSERT_TRUE(range_pinned(0, 64 * MIB));
	CU_ASSERT_TRUE(rule2_holds(st));
	/* A dry run: the same. */
	rq = req(1000, 128 * MIB, 192 * MIB);
	rq.dry_run = true;
	CU_ASSERT_EQUAL(cw_admit_state_reserve(st, &rq, &no, NULL, NULL), 0);
	CU_ASSERT(no == NULL && seen.added == 1);
	CU_ASSERT_FALSE(cw_cache_pinned(part, 128));
	CU_ASSERT_TRUE(rule2_holds(st));

	CU_ASSERT_FATAL(cw_admit_state_release(st, rv->id, NULL) == 0);
	CU_ASSERT_FALSE(cw_cache_pinned(part, 0));
	CU_ASSERT_TRUE(rule2_holds(st));
	cw_admit_state_free(st);
	tp_fini(&T);
}

/* A release makes room on the SSD: a stream refused there before is
 * booked and unpinned by the release itself, with no other call. */
static void test_release_makes_room(void)
{
	struct cw_admit_state *st = setup();
	struct cw_admit_request rq = req(0, 0, 128 * MIB);
	const struct cw_admit_resv *a, *b;
	uint64_t max;

	/* An SSD that carries one of two streams the HDDs carry both of. */
	slow_ssd(st);
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &max, NULL) == 0);
	rq.rate_bps = max * 2 / 5;
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &a, NULL, NULL) == 0);
	rq = req(max * 2 / 5, 128 * MIB, 256 * MIB);
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &b, NULL, NULL) == 0);
	printf("\n  a on the SSD %d (%s), b %d (%s)\n", on_ssd(a), a->cache_refused, on_ssd(b),
	       b->cache_refused);
	CU_ASSERT_TRUE(rule2_holds(st));
	CU_ASSERT_FATAL(on_ssd(a) && !on_ssd(b));
	CU_ASSERT_TRUE(range_pinned(128 * MIB, 256 * MIB));
	CU_ASSERT_FATAL(cw_admit_state_release(st, a->id, NULL) == 0);
	CU_ASSERT_TRUE(on_ssd(b));
	CU_ASSERT(!b->cache_refused[0]);
	CU_ASSERT_FALSE(cw_cache_pinned(part, 128));
	CU_ASSERT_TRUE(rule2_holds(st));
	cw_admit_state_free(st);
	tp_fini(&T);
}

/* A cache given to a partition that has a stream: the stream is booked
 * on it, and a partition pinned whole meanwhile is left unpinned. */
static void test_cache_set(void)
{
	struct cw_admit_state *st = setup();
	struct cw_cache_conf off = { 0, CW_CACHE_WRITE_THROUGH }, on = { 32 * MIB, 0 };
	struct cw_admit_request rq = req(0, 0, 32 * MIB);
	const struct cw_admit_resv *rv;
	struct cw_cache_task t;
	uint64_t max;

	CU_ASSERT_FATAL(cw_admit_state_cache_set(st, "media", &off, NULL) == 0);
	CU_ASSERT_FATAL(cw_cache_next(T.pool, 0, &t) == 0);	/* the cache goes */
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &max, NULL) == 0);
	rq.rate_bps = max / 5;
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, NULL, NULL) == 0);
	CU_ASSERT_FALSE(on_ssd(rv));
	CU_ASSERT_TRUE(rule2_holds(st));	/* no cache: nothing pinned */
	CU_ASSERT_FATAL(cw_admit_state_cache_set(st, "media", &on, NULL) == 0);
	CU_ASSERT_TRUE(on_ssd(rv));
	CU_ASSERT_TRUE(rule2_holds(st));
	CU_ASSERT_EQUAL(cw_admit_state_cache_set(st, "nosuch", &on, NULL), -ENOENT);
	cw_admit_state_free(st);
	tp_fini(&T);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("admit-state-cache", NULL, NULL);

	cwtest_add(s, "booked on the SSD: pinned until booked there, free after release",
		   test_booked);
	cwtest_add(s, "refused on the SSD stays pinned; a refusal pins nothing", test_refused);
	cwtest_add(s, "a release books a stream refused before", test_release_makes_room);
	cwtest_add(s, "a cache set books the streams there", test_cache_set);
	return cwtest_run();
}
