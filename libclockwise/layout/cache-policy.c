/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The cache policy: which blocks of a partition deserve its SSD slots.
 * In the spirit of dm-cache's smq policy (the kernel's cache-policies
 * documentation), not its code:
 *
 *   - Heat is counted per hotspot, a bounded number of counters each
 *     covering 2^k blocks, so memory does not grow with the partition
 *     beyond max_hotspots.  The data path only increments a counter (and,
 *     for a cached block, its slot's); once per tick the worker folds the
 *     counts into a decayed heat, heat += hits * 16 - heat >> decay_shift,
 *     so a block that stops being used cools geometrically.  The default
 *     half-life is long (some 710 ticks): a cache holding an eighth of a
 *     partition must tell apart blocks read every few minutes, and a
 *     short memory makes every miss look as hot as them (each swap is a
 *     copy on the HDD).
 *
 *   - Cached slots live in a multiqueue: one list per heat level
 *     (level = the bit length of heat / 8, capped), so the coldest cached
 *     block is the head of the lowest non-empty level, found in O(levels).
 *
 *   - A read miss on a block whose hotspot is at least as hot as the
 *     promotion bar drops the block into a small lossy candidate table
 *     (one relaxed store, no allocation): sampling, as smq does, instead
 *     of queueing every miss.  The worker takes the hottest candidate.
 *     With a free slot it is promoted once it reached min_hits worth of
 *     heat; otherwise only when its level exceeds the coldest cached
 *     block's by promote_levels, and then that block is evicted first.
 *     The threshold keeps two blocks of similar heat from swapping places
 *     at every tick (each swap costs a copy).
 *
 * Invariants: a slot is on exactly one list (its level's, or the free
 * list); slot_block[s] == UINT64_MAX iff s is free; the cached bitmap has
 * the bit of block b iff some slot holds b.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/cache.h>

#include "common/util.h"

#define LEVELS 16
#define CANDIDATES 256
#define PINS_MAX 64
#define NIL UINT32_MAX
#define HIT_SCALE 16

struct cw_cache_policy {
	struct cw_cache_policy_opts o;
	uint64_t nblocks;
	uint32_t nslots;
	unsigned hs_shift;		/* hotspot = block >> hs_shift */
	uint64_t nhs;
	_Atomic uint32_t *hs_hits;	/* since the last tick */
	_Atomic uint32_t *hs_heat;	/* decayed (written by the worker) */
	_Atomic uint32_t *slot_hits;
	uint32_t *slot_heat;
	uint64_t *slot_block;
	uint8_t *slot_level;
	uint32_t *prev, *next;		/* list links by slot */
	uint32_t head[LEVELS + 1];	/* [LEVELS]: the free list */
	uint32_t used;
	uint64_t *cached;		/* bitmap by block */
	_Atomic uint64_t cand[CANDIDATES];	/* block + 1, or 0 */
	_Atomic uint32_t bar;		/* heat a miss needs to be a candidate */
	uint64_t keep;			/* block + 1 kept across an eviction */
	int64_t last_tick_ns;
	uint64_t pin_first[PINS_MAX], pin_end[PINS_MAX];
	size_t npins;
	uint32_t pin_scan;		/* slots below it hold no pinned block */
	uint64_t refused;
};

const char *cw_cache_mode_name(enum cw_cache_mode m)
{
	switch (m) {
	case CW_CACHE_WRITE_THROUGH:
		return "write-through";
	case CW_CACHE_WRITE_BACK:
		return "write-back";
	}
	return NULL;
}

int cw_cache_mode_parse(const char *s, enum cw_cache_mode *ret)
{
	for (int m = 0; m <= CW_CACHE_WRITE_BACK; m++)
		if (s && strcmp(s, cw_cache_mode_name((enum cw_cache_mode)m)) == 0) {
			*ret = (enum cw_cache_mode)m;
			return 0;
		}
	return -EINVAL;
}

unsigned cw_cache_policy_level(uint32_t heat)
{
	unsigned l = 0;

	for (heat >>= 3; heat && l < LEVELS - 1; heat >>= 1)
		l++;
	return l;
}

static void list_del(struct cw_cache_policy *p, uint32_t s, unsigned list)
{
	if (p->prev[s] != NIL)
		p->next[p->prev[s]] = p->next[s];
	else
		p->head[list] = p->next[s];
	if (p->next[s] != NIL)
		p->prev[p->next[s]] = p->prev[s];
}

/* At the tail: the head of a level is its least recently placed slot. */
static void list_add(struct cw_cache_policy *p, uint32_t s, unsigned list)
{
	uint32_t t = p->head[list];

	p->next[s] = NIL;
	if (t == NIL) {
		p->prev[s] = NIL;
		p->head[list] = s;
		return;
	}
	/* Lists are short per level; walking to the tail keeps no tail
	 * array to maintain. */
	while (p->next[t] != NIL)
		t = p->next[t];
	p->next[t] = s;
	p->prev[s] = t;
}

void cw_cache_policy_free(struct cw_cache_policy *p)
{
	if (!p)
		return;
	free(p->hs_hits);
	free(p->hs_heat);
	free(p->slot_hits);
	free(p->slot_heat);
	free(p->slot_block);
	free(p->slot_level);
	free(p->prev);
	free(p->next);
	free(p->cached);
	free(p);
}

int cw_cache_policy_new(uint64_t nblocks, uint32_t nslots, const struct cw_cache_policy_opts *o,
			struct cw_cache_policy **ret)
{
	struct cw_cache_policy *p = calloc(1, sizeof(*p));
	size_t ns = CW_MAX(nslots, 1);

	if (!p)
		return -ENOMEM;
	if (o)
		p->o = *o;
	if (p->o.tick_ns <= 0)
		p->o.tick_ns = CW_NS_PER_S;
	if (!p->o.decay_shift || p->o.decay_shift > 16)
		p->o.decay_shift = 10;
	if (!p->o.promote_levels)
		p->o.promote_levels = 1;
	if (!p->o.min_hits)
		p->o.min_hits = 1;
	if (!p->o.max_hotspots)
		p->o.max_hotspots = UINT32_C(1) << 20;
	p->nblocks = nblocks;
	p->nslots = nslots;
	while ((CW_MAX(nblocks, 1) - 1) >> p->hs_shift >= p->o.max_hotspots)
		p->hs_shift++;
	p->nhs = ((CW_MAX(nblocks, 1) - 1) >> p->hs_shift) + 1;
	p->hs_hits = calloc(p->nhs, sizeof(*p->hs_hits));
	p->hs_heat = calloc(p->nhs, sizeof(*p->hs_heat));
	p->slot_hits = calloc(ns, sizeof(*p->slot_hits));
	p->slot_heat = calloc(ns, sizeof(*p->slot_heat));
	p->slot_block = malloc(ns * sizeof(*p->slot_block));
	p->slot_level = calloc(ns, 1);
	p->prev = malloc(ns * sizeof(*p->prev));
	p->next = malloc(ns * sizeof(*p->next));
	p->cached = calloc(CW_DIV_ROUND_UP(CW_MAX(nblocks, 1), 64), sizeof(uint64_t));
	if (!p->hs_hits || !p->hs_heat || !p->slot_hits || !p->slot_heat || !p->slot_block ||
	    !p->slot_level || !p->prev || !p->next || !p->cached) {
		cw_cache_policy_free(p);
		return -ENOMEM;
	}
	for (int l = 0; l <= LEVELS; l++)
		p->head[l] = NIL;
	for (uint32_t s = 0; s < nslots; s++) {
		p->slot_block[s] = UINT64_MAX;
		/* The free list is a stack: push at the head, O(1). */
		p->prev[s] = NIL;
		p->next[s] = p->head[LEVELS];
		if (p->head[LEVELS] != NIL)
			p->prev[p->head[LEVELS]] = s;
		p->head[LEVELS] = s;
	}
	atomic_init(&p->bar, p->o.min_hits * HIT_SCALE);
	*ret = p;
	return 0;
}

static bool is_cached(const struct cw_cache_policy *p, uint64_t b)
{
	return p->cached[b >> 6] & (UINT64_C(1) << (b & 63));
}

bool cw_cache_policy_pinned(const struct cw_cache_policy *p, uint64_t block)
{
	for (size_t i = 0; i < p->npins; i++)
		if (block >= p->pin_first[i] && block < p->pin_end[i])
			return true;
	return false;
}

void cw_cache_policy_hit(struct cw_cache_policy *p, uint64_t block, uint32_t slot)
{
	uint64_t h;
	uint32_t hits, heat;

	if (block >= p->nblocks)
		return;
	h = block >> p->hs_shift;
	hits = atomic_fetch_add_explicit(&p->hs_hits[h], 1, memory_order_relaxed) + 1;
	if (slot < p->nslots) {
		atomic_fetch_add_explicit(&p->slot_hits[slot], 1, memory_order_relaxed);
		return;
	}
	heat = atomic_load_explicit(&p->hs_heat[h], memory_order_relaxed);
	if ((uint64_t)heat + (uint64_t)hits * HIT_SCALE >=
	    atomic_load_explicit(&p->bar, memory_order_relaxed))
		atomic_store_explicit(&p->cand[block % CANDIDATES], block + 1, memory_order_relaxed);
}

static uint32_t decay(uint32_t heat, uint32_t hits, unsigned shift)
{
	uint64_t h = (uint64_t)heat - (heat >> shift) + (uint64_t)hits * HIT_SCALE;

	return h > UINT32_MAX ? UINT32_MAX : (uint32_t)h;
}

static uint32_t slot_coldest(const struct cw_cache_policy *p)
{
	for (unsigned l = 0; l < LEVELS; l++)
		for (uint32_t s = p->head[l]; s != NIL; s = p->next[s])
			if (!cw_cache_policy_pinned(p, p->slot_block[s]))
				return s;
	return NIL;
}

uint32_t cw_cache_policy_coldest(const struct cw_cache_policy *p)
{
	return slot_coldest(p);
}

void cw_cache_policy_tick(struct cw_cache_policy *p, int64_t now_ns)
{
	uint32_t bar, s;

	if (now_ns - p->last_tick_ns < p->o.tick_ns)
		return;
	p->last_tick_ns = now_ns;
	for (uint64_t h = 0; h < p->nhs; h++) {
		uint32_t hits = atomic_exchange_explicit(&p->hs_hits[h], 0, memory_order_relaxed);
		uint32_t heat = atomic_load_explicit(&p->hs_heat[h], memory_order_relaxed);

		atomic_store_explicit(&p->hs_heat[h], decay(heat, hits, p->o.decay_shift),
				      memory_order_relaxed);
	}
	for (s = 0; s < p->nslots; s++) {
		uint32_t hits = atomic_exchange_explicit(&p->slot_hits[s], 0, memory_order_relaxed);
		unsigned l;

		if (p->slot_block[s] == UINT64_MAX)
			continue;
		p->slot_heat[s] = decay(p->slot_heat[s], hits, p->o.decay_shift);
		l = cw_cache_policy_level(p->slot_heat[s]);
		if (l != p->slot_level[s]) {
			list_del(p, s, p->slot_level[s]);
			p->slot_level[s] = (uint8_t)l;
			list_add(p, s, l);
		}
	}
	/* With free slots any block warm enough qualifies; else it must be
	 * able to beat the coldest cached block. */
	bar = p->o.min_hits * HIT_SCALE;
	s = p->head[LEVELS] == NIL ? slot_coldest(p) : NIL;
	if (s != NIL) {
		unsigned l = p->slot_level[s] + p->o.promote_levels;

		bar = CW_MAX(bar, l >= 32 ? UINT32_MAX : (UINT32_C(8) << (l - 1)));
	}
	atomic_store_explicit(&p->bar, bar, memory_order_relaxed);
}

/* The heat a candidate is judged by: its hotspot's, with this tick's hits. */
static uint32_t cand_heat(const struct cw_cache_policy *p, uint64_t b)
{
	uint64_t h = b >> p->hs_shift;

	uint64_t heat = atomic_load_explicit(&p->hs_heat[h], memory_order_relaxed) +
			(uint64_t)atomic_load_explicit(&p->hs_hits[h], memory_order_relaxed) * HIT_SCALE;

	return heat > UINT32_MAX ? UINT32_MAX : (uint32_t)heat;
}

uint32_t cw_cache_policy_heat(const struct cw_cache_policy *p, uint64_t block)
{
	return block < p->nblocks ? cand_heat(p, block) : 0;
}

void cw_cache_policy_next(struct cw_cache_policy *p, struct cw_cache_decision *ret)
{
	uint64_t best = 0;
	uint32_t best_heat = 0, victim;

	ret->kind = CW_CACHE_NONE;
	/* A block cached before its range was pinned leaves first: it
	 * must be where its stream is booked. */
	for (; p->pin_scan < p->nslots; p->pin_scan++) {
		uint64_t b = p->slot_block[p->pin_scan];

		if (b != UINT64_MAX && cw_cache_policy_pinned(p, b)) {
			ret->kind = CW_CACHE_EVICT;
			ret->block = b;
			ret->slot = p->pin_scan;
			return;
		}
	}
	if (p->keep && !is_cached(p, p->keep - 1)) {
		best = p->keep;
		best_heat = cand_heat(p, best - 1);
	}
	p->keep = 0;
	for (unsigned i = 0; i < CANDIDATES; i++) {
		uint64_t c = atomic_exchange_explicit(&p->cand[i], 0, memory_order_relaxed);
		uint32_t h;

		if (!c || c - 1 >= p->nblocks || is_cached(p, c - 1))
			continue;
		if (cw_cache_policy_pinned(p, c - 1)) {
			p->refused++;
			continue;
		}
		h = cand_heat(p, c - 1);
		if (h > best_heat) {
			uint64_t lost = best;

			best = c;
			best_heat = h;
			c = lost;
		}
		if (c)	/* the others stay candidates */
			atomic_store_explicit(&p->cand[(c - 1) % CANDIDATES], c,
					      memory_order_relaxed);
	}
	if (!best || best_heat < p->o.min_hits * HIT_SCALE)
		return;
	if (p->head[LEVELS] != NIL) {
		ret->kind = CW_CACHE_PROMOTE;
		ret->block = best - 1;
		ret->slot = p->head[LEVELS];
		return;
	}
	victim = slot_coldest(p);
	if (victim == NIL ||
	    cw_cache_policy_level(best_heat) < p->slot_level[victim] + p->o.promote_levels)
		return;
	ret->kind = CW_CACHE_EVICT;
	ret->block = p->slot_block[victim];
	ret->slot = victim;
	p->keep = best;
}

void cw_cache_policy_cached(struct cw_cache_policy *p, uint32_t slot, uint64_t block)
{
	unsigned l;

	if (slot >= p->nslots || block >= p->nblocks || p->slot_block[slot] != UINT64_MAX)
		return;
	list_del(p, slot, LEVELS);
	p->slot_block[slot] = block;
	p->cached[block >> 6] |= UINT64_C(1) << (block & 63);
	/* It starts as hot as its hotspot, so it is not the first victim
	 * of the block it just beat. */
	p->slot_heat[slot] = cand_heat(p, block) >> p->hs_shift;
	atomic_store_explicit(&p->slot_hits[slot], 0, memory_order_relaxed);
	l = cw_cache_policy_level(p->slot_heat[slot]);
	p->slot_level[slot] = (uint8_t)l;
	list_add(p, slot, l);
	p->used++;
	if (cw_cache_policy_pinned(p, block))	/* pinned while it was copied */
		p->pin_scan = CW_MIN(p->pin_scan, slot);
}

void cw_cache_policy_uncached(struct cw_cache_policy *p, uint32_t slot)
{
	uint64_t b;

	if (slot >= p->nslots || p->slot_block[slot] == UINT64_MAX)
		return;
	b = p->slot_block[slot];
	list_del(p, slot, p->slot_level[slot]);
	p->cached[b >> 6] &= ~(UINT64_C(1) << (b & 63));
	p->slot_block[slot] = UINT64_MAX;
	p->prev[slot] = NIL;
	p->next[slot] = p->head[LEVELS];
	if (p->head[LEVELS] != NIL)
		p->prev[p->head[LEVELS]] = slot;
	p->head[LEVELS] = slot;
	p->used--;
}

int cw_cache_policy_pin(struct cw_cache_policy *p, const uint64_t *first, const uint64_t *n,
			size_t nranges)
{
	if (nranges > PINS_MAX)
		return -E2BIG;
	for (size_t i = 0; i < nranges; i++) {
		p->pin_first[i] = first[i];
		p->pin_end[i] = first[i] + n[i] < first[i] ? UINT64_MAX : first[i] + n[i];
	}
	p->npins = nranges;
	p->pin_scan = 0;
	return 0;
}

uint64_t cw_cache_policy_refused(const struct cw_cache_policy *p)
{
	return p->refused;
}

uint32_t cw_cache_policy_used(const struct cw_cache_policy *p)
{
	return p->used;
}
