/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Calibration: Bosch & Mullender, section 3.1, "pre-measurements" ("it is
 * often difficult to predict service times for a block size by just
 * analyzing the physical parameters of a disk").  Reads only, with
 * O_DIRECT, one request at a time through the I/O engine:
 *  - seek curve: for each distance, a small read at a random place and
 *    then one that far away; the second read's time is seek + rotational
 *    latency + overhead;
 *  - zones: sequential reads at the start of each zone, timed per chunk;
 *  - block sizes: whole reads of each size at random places.
 * Every point is sampled `repeats` times and its worst case is a high
 * percentile of the samples.
 *
 * An emulated disk (opts->emulate) whose platter can be seen (the same
 * sector read twice in a row takes one revolution, >= ROT_MIN_NS, as
 * regularly as a clock) is measured in parts instead,
 * so that a model comes back as itself (an emulated disk recovers the
 * model it emulates):
 *  - rotation: the median interval between the completions of those
 *    rereads;
 *  - seek: the time of a read at distance d after another is overhead +
 *    seek(d) + transfer + a rotational wait that depends only on the pause
 *    between the two (the platter turns with the clock).  The wait wraps
 *    from nearly 0 to nearly a revolution at one pause x in [0, rotation):
 *    time + pause jumps by a revolution there.  Bisecting the pause finds
 *    x, and the least time seen before it is overhead + seek(d) +
 *    transfer, within the bisection's step and the host's jitter (which
 *    only ever adds);
 *  - zones: the difference of two back-to-back sequential reads of
 *    different sizes is their size difference at the media rate (both pay
 *    the same overhead and the same missed revolution);
 *  - overhead: the time at distance 0 less the transfer.
 *
 * An image on a cluster (tier rbd) has no head and no platter, a network
 * and replicated OSDs instead, whose service times have a long tail; it
 * is measured as a distribution per block size (see measure_tail).
 *
 * Invariant: the model produced is valid (cw_model_validate) and
 * conservative where it must extrapolate: the seek curve is made
 * non-decreasing by taking the running maximum, the rotational latency is
 * either inside the measured seek times (rotation_ns 0) or measured and
 * charged whole by cw_model_service_ns, and any part of the device beyond
 * the measured span is given the slowest rate measured.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>

#include <clockwise/emu.h>
#include <clockwise/units.h>

#include "model/model-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#define CHUNK_MAX (UINT64_C(1) << 20)
/* A revolution shorter than this is a cache answering, not a platter
 * (60000 rpm). */
#define ROT_MIN_NS CW_NS_PER_MS
/* Parted measurement: pairs per seek point are capped: each is exact up
 * to jitter, and an emulated Atlas-II takes ~15 ms a read. */
#define PARTS_REPEATS 8
#define PARTS_MIN 5	/* even a quick calibration */
#define BISECT_STEPS 10
#define ROT_SAMPLES 31	/* rereads the rotation is the median interval of */
#define ZERO_PROBES 3	/* unpaused probes of a pair, the reference level */
#define CHAIN_READS 8	/* reads per chain of a zone's rate */
#define CHAIN_PAIRS 3	/* pairs of chains, the median taken */

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* The sample at or below which a share permille/1000 of the n samples
 * lie (v is sorted). */
static int64_t permille(int64_t *v, size_t n, unsigned pm)
{
	size_t k;

	qsort(v, n, sizeof(*v), cmp_i64);
	k = (n * pm + 999) / 1000;	/* ceil(n pm / 1000) */
	return v[k ? k - 1 : 0];
}

int64_t model_percentile(int64_t *v, size_t n, unsigned pct)
{
	return permille(v, n, pct * 10);
}

int cw_calib_parse_percentile(const char *s, unsigned *ret_permille)
{
	unsigned v = 0, digits = 0;

	if (!s || !ret_permille)
		return -EINVAL;
	for (; *s >= '0' && *s <= '9' && digits < 4; s++, digits++)
		v = v * 10 + (unsigned)(*s - '0');
	if (digits == 0 || digits == 4)
		return digits ? -ERANGE : -EINVAL;
	v *= 10;
	if (*s == '.') {
		if (s[1] < '0' || s[1] > '9')
			return -EINVAL;
		v += (unsigned)(*++s - '0');
		while (*++s == '0')
			;	/* 99.90 is 99.9 */
		if (*s >= '1' && *s <= '9')
			return -ERANGE;	/* 99.95: finer than 0.1 */
	}
	if (*s)
		return -EINVAL;
	if (v < 500 || v > 1000)
		return -ERANGE;
	*ret_permille = v;
	return 0;
}

void cw_calib_opts_init(struct cw_calib_opts *o)
{
	static const uint64_t sizes[] = { 64 << 10, 256 << 10, 1 << 20 };

	*o = (struct cw_calib_opts){
		.size = sizeof(*o),
		.engine = CW_IO_URING,
		.seek_distances = 16,
		.zones = 8,
		.zone_read_bytes = 8 << 20,
		.block_sizes = sizes,
		.n_block_sizes = CW_ARRAY_SIZE(sizes),
		.repeats = 20,
		.percentile = 99,
		.tier = CW_TIER_HDD,
		.tail_permille = 999,
	};
}

struct calib {
	struct cw_io_engine *eng;
	int fd;
	void *buf;
	size_t align;
	uint64_t span;
	unsigned rng;
	cw_calib_progress_fn progress;
	void *userdata;
	const char *phase;
	unsigned done, total;
	int64_t rot;		/* measured revolution; 0: none seen */
	size_t small;		/* the read seeks are measured with */
	/* per seek point and pair: the least time seen, and where b was */
	int64_t pair_ns[CW_MODEL_MAX_SEEK][2 * PARTS_REPEATS];
	uint64_t pair_off[CW_MODEL_MAX_SEEK][2 * PARTS_REPEATS];
	unsigned n_pairs[CW_MODEL_MAX_SEEK];
};

static uint64_t rnd(struct calib *c, uint64_t below)
{
	/* xorshift64 on a 32-bit state would repeat too soon; two halves */
	uint64_t x = 0;

	for (int k = 0; k < 2; k++) {
		c->rng ^= c->rng << 13;
		c->rng ^= c->rng >> 17;
		c->rng ^= c->rng << 5;
		x = (x << 32) | c->rng;
	}
	return below ? x % below : 0;
}

/* A random aligned offset where len bytes still fit within the span. */
static uint64_t rnd_off(struct calib *c, uint64_t len, uint64_t limit)
{
	uint64_t slots = (limit - len) / c->align + 1;

	return rnd(c, slots) * c->align;
}

/* Times one read; 0 or -errno (a short read is -EIO). */
static int timed_read(struct calib *c, uint64_t off, size_t len, int64_t *ret_ns)
{
	int64_t t0 = cw_now_ns(), res;

	res = cw_io_sync(c->eng, c->fd, CW_IO_READ, c->buf, len, off);
	if (res < 0)
		return (int)res;
	if ((size_t)res != len)
		return -EIO;
	*ret_ns = CW_MAX(cw_now_ns() - t0, (int64_t)1);
	return 0;
}

static int step(struct calib *c)
{
	c->done++;
	if (c->progress && c->progress(c->phase, c->done, c->total, c->userdata) != 0)
		return -ECANCELED;
	return 0;
}

static bool opts_ok(const struct cw_calib_opts *o)
{
	if (!o || o->size < sizeof(*o) || o->seek_distances < 2 ||
	    o->seek_distances > CW_MODEL_MAX_SEEK || o->zones < 1 ||
	    o->zones > CW_MODEL_MAX_ZONES || o->zone_read_bytes == 0 || o->repeats < 1 ||
	    o->repeats > 100000 || o->percentile < 50 || o->percentile > 100 ||
	    o->n_block_sizes > CW_MODEL_MAX_BSIZES || (o->n_block_sizes && !o->block_sizes) ||
	    (o->tier != CW_TIER_HDD && o->tier != CW_TIER_SSD && o->tier != CW_TIER_RBD) ||
	    (o->tier == CW_TIER_RBD && (o->tail_permille < 500 || o->tail_permille > 1000)))
		return false;
	for (unsigned i = 0; i < o->n_block_sizes; i++)
		if (o->block_sizes[i] == 0)
			return false;
	return true;
}

/* The same small block read again right after itself: one revolution on
 * a platter, next to nothing from a cache.  Sets c->rot. */
static int measure_rotation(struct calib *c, const struct cw_calib_opts *o, int64_t *samples)
{
	uint64_t a = rnd_off(c, c->small, c->span);
	unsigned n = ROT_SAMPLES;	/* a revolution each: cheap, and a median wants many */
	int64_t ignored, rot, prev;
	int e;

	c->rot = 0;
	/* Only an emulated disk: its platter is exact.  A real drive's read
	 * cache and read-ahead answer the rereads and the sequential chains
	 * from memory, and a busy virtual disk can reread in a steady
	 * millisecond that passes for a revolution; until the parted method
	 * is shown right on real drives they keep the whole-time one. */
	if (o->tier != CW_TIER_HDD || !o->emulate)
		return 0;
	/* from one completion to the next: a late look at one makes its
	 * interval longer and the next one as much shorter (the reread
	 * itself starts later and finds the sector sooner), so the median
	 * interval is the revolution */
	e = timed_read(c, a, c->small, &ignored);
	prev = cw_now_ns();
	for (unsigned r = 0; r < n && e == 0; r++) {
		e = timed_read(c, a, c->small, &ignored);
		samples[r] = cw_now_ns() - prev;
		prev += samples[r];
	}
	if (e < 0)
		return e;
	rot = model_percentile(samples, n, 50);
	/* A platter turns like a clock: the middle half of the intervals
	 * within half a revolution (a busy host's lateness widens them). */
	if (rot >= ROT_MIN_NS && rot <= CW_NS_PER_S &&
	    model_percentile(samples, n, 75) - model_percentile(samples, n, 25) <= rot / 2)
		c->rot = rot;
	return 0;
}

static void wait_until(int64_t t)
{
	struct timespec ts = { .tv_sec = t / CW_NS_PER_S, .tv_nsec = t % CW_NS_PER_S };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* A read at a, a pause of about pause_ns, a read at b: b's time, the time
 * from a's completion to b's, and the pause really taken. */
static int probe(struct calib *c, uint64_t a, uint64_t b, int64_t pause_ns, int64_t *ret_b,
		 int64_t *ret_since_a, int64_t *ret_paused)
{
	int64_t ignored, a_done;
	int e = timed_read(c, a, c->small, &ignored);

	if (e < 0)
		return e;
	a_done = cw_now_ns();
	if (pause_ns > 0)
		wait_until(a_done + pause_ns);
	*ret_paused = cw_now_ns() - a_done;
	e = timed_read(c, b, c->small, ret_b);
	*ret_since_a = cw_now_ns() - a_done;
	return e;
}

/* overhead + seek(b - a - small) + transfer of the pair (a, b), without
 * the rotational wait: the pause where the wait wraps is bisected (the
 * file's header says why that works), and the least time b took is the
 * answer.  It is never below the truth — b's time runs from before its
 * submission to after its completion was seen — and it is near it once a
 * pause fell just short of the wrap: lateness and a bisection misled by
 * it only ever make it longer. */
static int seek_pair(struct calib *c, uint64_t a, uint64_t b, int64_t *ret_ns)
{
	int64_t lo = 0, hi = c->rot, t, since, ref = INT64_MAX, paused, best = INT64_MAX;
	int e = 0;

	/* Without a pause the wait has not wrapped: the least of a few such
	 * probes is the level wrapped ones are told apart from (lateness
	 * only adds, and one late reference would take wrapped probes for
	 * unwrapped ones). */
	for (unsigned k = 0; k < ZERO_PROBES && e == 0; k++) {
		e = probe(c, a, b, 0, &t, &since, &paused);
		ref = CW_MIN(ref, since);
		best = CW_MIN(best, t);
	}
	for (unsigned k = 0; k < BISECT_STEPS && e == 0; k++) {
		int64_t mid = lo + (hi - lo) / 2;

		e = probe(c, a, b, mid, &t, &since, &paused);
		if (e < 0)
			break;
		best = CW_MIN(best, t);
		if (since < ref + c->rot / 2) {
			ref = CW_MIN(ref, since);
			lo = mid;	/* before the wrap: the wait is x - pause */
		} else {
			hi = mid;
		}
	}
	if (e < 0)
		return e;
	*ret_ns = best;
	return 0;
}

static int seek_parted(struct calib *c, const struct cw_calib_opts *o, struct cw_model *m,
		       unsigned i, uint64_t d)
{
	(void)m;
	/* distance 0 is the overhead every other point is measured from:
	 * twice the pairs */
	c->n_pairs[i] = CW_MAX(CW_MIN(o->repeats, (unsigned)PARTS_REPEATS), (unsigned)PARTS_MIN) *
			(i == 0 ? 2 : 1);
	for (unsigned r = 0; r < c->n_pairs[i]; r++) {
		uint64_t a = rnd_off(c, 2 * c->small + d, c->span), b = a + c->small + d;
		int e = seek_pair(c, a, b, &c->pair_ns[i][r]);

		if (e < 0)
			return e;
		c->pair_off[i][r] = b;
	}
	return 0;
}

static int measure_seek(struct calib *c, const struct cw_calib_opts *o, struct cw_model *m,
			int64_t *samples)
{
	size_t small = c->small;
	uint64_t maxd = c->span - (c->rot ? 2 * small : small);
	int64_t run = 0;
	int e;

	/* distances 0, then geometric from one small read up to the span */
	m->n_seek = o->seek_distances;
	for (unsigned i = 0; i < o->seek_distances; i++) {
		uint64_t d = 0;

		if (i > 0) {
			double f = (double)(i - 1) / (double)(o->seek_distances - 2 ? o->seek_distances - 2 : 1);
			double lo = (double)small, hi = (double)maxd;

			d = (uint64_t)(lo * pow(hi / lo, f));
			d = d / c->align * c->align;
			if (d <= m->seek[i - 1].distance_bytes)
				d = m->seek[i - 1].distance_bytes + c->align;
			if (d > maxd) {
				m->n_seek = i;
				break;
			}
		}
		if (c->rot) {
			e = seek_parted(c, o, m, i, d);
			if (e < 0)
				return e;
			m->seek[i] = (struct cw_model_seek){ .distance_bytes = d };
			e = step(c);
			if (e < 0)
				return e;
			continue;
		}
		for (unsigned r = 0; r < o->repeats; r++) {
			uint64_t a = rnd_off(c, small, c->span - d), b = a + d;
			int64_t ignored;

			if (rnd(c, 2) && d) {
				/* go either way */
				b = a;
				a = a + d;
			}
			e = timed_read(c, a, small, &ignored);
			if (e < 0)
				return e;
			e = timed_read(c, b, small, &samples[r]);
			if (e < 0)
				return e;
		}
		run = CW_MAX(run, model_percentile(samples, o->repeats, o->percentile));
		m->seek[i] = (struct cw_model_seek){ .distance_bytes = d, .time_ns = run };
		e = step(c);
		if (e < 0)
			return e;
	}
	return 0;
}

/* The time each of k back-to-back sequential reads of len bytes from off
 * takes, measured from one completion to the next: rotation + transfer on
 * a disk without read-ahead.  A late look at a completion makes that
 * interval longer and the next one as much shorter, and a look so late
 * that the next sector was missed adds a revolution to one interval: the
 * median interval is untouched by either while they stay few. */
static int chain_ns(struct calib *c, uint64_t off, uint64_t len, unsigned k, int64_t *samples,
		    int64_t *ret_ns)
{
	int64_t ignored, prev;
	int e = timed_read(c, off - c->align, c->align, &ignored);

	prev = cw_now_ns();
	for (unsigned i = 0; i < k && e == 0; i++) {
		int64_t now;

		e = timed_read(c, off + i * len, len, &ignored);
		now = cw_now_ns();
		samples[i] = now - prev;
		prev = now;
	}
	if (e < 0)
		return e;
	*ret_ns = model_percentile(samples, k, 50);
	return 0;
}

/* The media rate in [start, start + len): chains of big and of half as
 * big reads differ by the half's transfer alone.  0 in *ret_rate when the
 * span is too small or the difference makes no sense (the caller then
 * times whole chunks). */
static int zone_rate_parted(struct calib *c, uint64_t start, uint64_t len, int64_t *samples,
			    uint64_t *ret_rate)
{
	const unsigned k = CHAIN_READS;
	uint64_t big = CW_MIN((len - c->align) * 2 / (3 * k), CHUNK_MAX) / c->align * c->align;
	uint64_t half = big / 2 / c->align * c->align;
	int64_t t_big, t_half, rates[CHAIN_PAIRS];
	unsigned n = 0;
	int e = 0;

	*ret_rate = 0;
	if (half == 0 || len < c->align)
		return 0;
	for (unsigned r = 0; r < CHAIN_PAIRS && e == 0; r++) {
		e = chain_ns(c, start + c->align, big, k, samples, &t_big);
		if (e == 0)
			e = chain_ns(c, start + c->align + k * big, half, k, samples, &t_half);
		if (e == 0 && t_big > t_half)
			rates[n++] = (int64_t)((unsigned __int128)(big - half) * CW_NS_PER_S /
					       (uint64_t)(t_big - t_half));
	}
	if (e < 0)
		return e;
	if (n * 2 > CHAIN_PAIRS)
		*ret_rate = (uint64_t)model_percentile(rates, n, 50);
	return 0;
}

static int measure_zones(struct calib *c, const struct cw_calib_opts *o, struct cw_model *m,
			 uint64_t capacity, int64_t *samples, size_t nsamples)
{
	uint64_t zlen = c->span / o->zones / c->align * c->align;
	uint64_t slowest = UINT64_MAX;
	int e;

	if (zlen == 0)
		return -EINVAL;
	m->n_zones = o->zones;
	for (unsigned z = 0; z < o->zones; z++) {
		uint64_t start = zlen * z, len = CW_MIN(o->zone_read_bytes, zlen);
		uint64_t chunk = CW_MIN(len, CHUNK_MAX) / c->align * c->align;
		size_t n = 0;
		int64_t worst;

		uint64_t rate = 0;

		if (chunk == 0)
			chunk = c->align;
		if (c->rot) {
			e = zone_rate_parted(c, start, len, samples, &rate);
			if (e < 0)
				return e;
		}
		if (rate == 0) {
			for (unsigned r = 0; r < o->repeats; r++)
				for (uint64_t off = 0; off + chunk <= len && n < nsamples; off += chunk) {
					e = timed_read(c, start + off, chunk, &samples[n++]);
					if (e < 0)
						return e;
				}
			worst = model_percentile(samples, n, o->percentile);
			rate = (uint64_t)((unsigned __int128)chunk * CW_NS_PER_S / (uint64_t)worst);
		}
		m->zone[z] = (struct cw_model_zone){
			.start_bytes = start,
			.end_bytes = z + 1 == o->zones ? capacity : start + zlen,
			.rate_bps = CW_MAX((uint64_t)1, rate),
		};
		slowest = CW_MIN(slowest, m->zone[z].rate_bps);
		e = step(c);
		if (e < 0)
			return e;
	}
	/* beyond the measured span: the slowest rate seen */
	if (capacity > zlen * o->zones)
		m->zone[o->zones - 1].rate_bps = slowest;
	return 0;
}

/* The block sizes to measure, aligned up and sorted (duplicates left for
 * the caller to skip), with extra (0: none) if there is room; -EINVAL
 * for one beyond the span. */
static int bsizes(const struct calib *c, const struct cw_calib_opts *o, uint64_t extra,
		  uint64_t sizes[CW_MODEL_MAX_BSIZES], unsigned *ret_n)
{
	unsigned n = 0;

	for (unsigned i = 0; i < o->n_block_sizes; i++) {
		uint64_t b = CW_DIV_ROUND_UP(o->block_sizes[i], c->align) * c->align;

		if (b > c->span || b > CHUNK_MAX * 64)
			return -EINVAL;
		sizes[n++] = b;
	}
	if (extra && n < CW_MODEL_MAX_BSIZES)
		sizes[n++] = extra;
	qsort(sizes, n, sizeof(*sizes), cmp_i64);	/* all < 2^63 */
	*ret_n = n;
	return 0;
}

static int measure_bsizes(struct calib *c, const struct cw_calib_opts *o, struct cw_model *m,
			  int64_t *samples)
{
	uint64_t sizes[CW_MODEL_MAX_BSIZES];
	unsigned n = 0;
	int e = bsizes(c, o, 0, sizes, &n);

	if (e < 0)
		return e;
	m->n_bsizes = 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t b = sizes[i];

		if (m->n_bsizes && m->bsize[m->n_bsizes - 1].bytes == b) {
			e = step(c);
			if (e < 0)
				return e;
			continue;
		}
		for (unsigned r = 0; r < o->repeats; r++) {
			e = timed_read(c, rnd_off(c, b, c->span), b, &samples[r]);
			if (e < 0)
				return e;
		}
		m->bsize[m->n_bsizes++] = (struct cw_model_bsize){
			.bytes = b, .worst_ns = model_percentile(samples, o->repeats, o->percentile) };
		e = step(c);
		if (e < 0)
			return e;
	}
	return 0;
}

/* Samples per block size on an image: enough that the tail permille is a
 * measured sample with another beyond it. */
static unsigned tail_samples(const struct cw_calib_opts *o)
{
	unsigned need = o->tail_permille >= 1000 ? 1000 : 2000 / (1000 - o->tail_permille);

	return CW_MAX(o->repeats, need);
}

/* Tier rbd: each block size, and the small read for the fixed cost, read
 * whole at random places one at a time (the admission test's single
 * server), tail_samples() times; the tail permille of its times is the
 * size's worst case, which C of that size never goes below
 * (cw_model_service_ns).  Overhead and rate are the chord from the
 * smallest size's tail to the largest's, so that C of a size between them
 * that was not measured comes from tails too, never from typical times
 * (a line over every tail would let one stall of a mid size make every
 * large request look slow).  No seek, no rotation. */
static int measure_tail(struct calib *c, const struct cw_calib_opts *o, struct cw_model *m,
			int64_t *samples)
{
	uint64_t sizes[CW_MODEL_MAX_BSIZES], rate = UINT64_C(1) << 40;
	unsigned n = 0, ns = tail_samples(o);
	const struct cw_model_bsize *b0, *bn;
	unsigned __int128 ovh;
	int e = bsizes(c, o, c->small, sizes, &n);

	if (e < 0)
		return e;
	m->n_bsizes = 0;
	for (unsigned i = 0; i < n; i++) {
		if (m->n_bsizes && m->bsize[m->n_bsizes - 1].bytes == sizes[i])
			continue;
		for (unsigned r = 0; r < ns; r++) {
			e = timed_read(c, rnd_off(c, sizes[i], c->span), sizes[i], &samples[r]);
			if (e < 0)
				return e;
		}
		m->bsize[m->n_bsizes++] = (struct cw_model_bsize){
			.bytes = sizes[i], .worst_ns = permille(samples, ns, o->tail_permille) };
		e = step(c);
		if (e < 0)
			return e;
	}
	b0 = &m->bsize[0];
	bn = &m->bsize[m->n_bsizes - 1];
	if (bn->worst_ns > b0->worst_ns)
		rate = CW_MIN(rate, (uint64_t)((unsigned __int128)(bn->bytes - b0->bytes) *
					      CW_NS_PER_S / (uint64_t)(bn->worst_ns - b0->worst_ns)));
	rate = CW_MAX(rate, (uint64_t)1);
	ovh = (unsigned __int128)b0->bytes * CW_NS_PER_S / rate;
	m->overhead_ns = (uint64_t)b0->worst_ns > ovh ? b0->worst_ns - (int64_t)ovh : 0;
	m->overhead_ns = CW_MIN(m->overhead_ns, CW_NS_PER_S);
	m->n_seek = 1;
	m->seek[0] = (struct cw_model_seek){ 0, 0 };
	m->n_zones = 1;
	m->zone[0] = (struct cw_model_zone){ .rate_bps = rate };	/* the caller ends it */
	return 0;
}

/* The parted seek points less their transfer, at the zone rates now
 * measured: the least at distance 0 is the overhead (returned), each
 * other point's least less it the seek, kept non-decreasing. */
static int64_t parted_seek_curve(struct calib *c, struct cw_model *m)
{
	int64_t v[2 * PARTS_REPEATS], ovh = 0, run = 0;

	for (unsigned i = 0; i < m->n_seek; i++) {
		int64_t med;

		for (unsigned r = 0; r < c->n_pairs[i]; r++) {
			int64_t xfer;

			if (cw_model_access_ns(m, c->pair_off[i][r], c->pair_off[i][r], c->small, 0,
					       &xfer) < 0)
				xfer = 0;
			/* access_ns of a model still without overhead: seek[0]
			 * (0 here) plus the transfer */
			v[r] = c->pair_ns[i][r] - xfer;
		}
		/* a pair errs only long (seek_pair): the least is best */
		med = CW_MAX(model_percentile(v, c->n_pairs[i], 0), (int64_t)0);
		if (i == 0)
			ovh = med;
		run = CW_MAX(run, med - ovh);
		m->seek[i].time_ns = i == 0 ? 0 : run;
	}
	return ovh;
}

static void engine_freep(struct cw_io_engine **e)
{
	cw_io_engine_free(*e);
}

int cw_model_calibrate(const char *path, const struct cw_calib_opts *o,
		       cw_calib_progress_fn progress, void *userdata, struct cw_model *ret)
{
	_cleanup_(cw_io_closep) int fd = -1;
	_cleanup_(engine_freep) struct cw_io_engine *eng = NULL;
	_cleanup_free_ void *buf = NULL;
	_cleanup_free_ int64_t *samples = NULL;
	struct cw_model m = { .tier = o ? o->tier : CW_TIER_HDD };
	struct calib c = { .rng = 0x9e3779b9u, .progress = progress, .userdata = userdata };
	uint64_t size = 0, maxb = 0;
	enum cw_io_kind kind;
	size_t nsamples;
	bool direct;
	int e;

	if (!path || !ret || !opts_ok(o))
		return -EINVAL;
	/* the name is checked now, not after minutes of measuring */
	snprintf(m.name, sizeof(m.name), "%s", o->name ? o->name : "calibrated");
	m.capacity_bytes = 1;
	m.n_seek = m.n_zones = 1;
	m.zone[0] = (struct cw_model_zone){ .end_bytes = 1, .rate_bps = 1 };
	if ((o->name && strlen(o->name) >= sizeof(m.name)) || cw_model_validate(&m) < 0)
		return -EINVAL;
	fd = cw_io_open(path, false, &direct);
	if (fd < 0)
		return fd;
	e = cw_io_alignment(fd, &c.align);
	if (e < 0)
		return e;
	e = cw_io_size(fd, &size);
	if (e < 0)
		return e;
	/* an image can only be read through librbd */
	if (cw_io_kind_for_fd(fd, o->engine, &kind) < 0 || kind != CW_IO_RBD)
		kind = o->engine;
	if ((kind == CW_IO_RBD) != (o->tier == CW_TIER_RBD))
		return -EINVAL;
	c.span = o->span_bytes ? CW_MIN(o->span_bytes, size) : size;
	c.span = c.span / c.align * c.align;
	if (c.span < 4 * CW_MAX(c.align, (size_t)4096) || size > (UINT64_C(1) << 62))
		return -EINVAL;	/* nothing worth measuring */
	if (o->emulate) {
		struct cw_io_emu_opts eo;

		cw_io_emu_opts_init(&eo);
		eo.inner = kind;
		e = cw_io_emu_new(o->emulate, &eo, 1, &eng);
	} else
		e = cw_io_engine_new(kind, 1, &eng);
	if (e < 0)
		return e;
	for (unsigned i = 0; i < o->n_block_sizes; i++)
		maxb = CW_MAX(maxb, CW_DIV_ROUND_UP(o->block_sizes[i], c.align) * c.align);
	buf = cw_io_alloc(CW_MAX(CW_MAX(maxb, CHUNK_MAX), (uint64_t)c.align));
	nsamples = CW_MAX((size_t)o->repeats * 64, (size_t)tail_samples(o));
	samples = calloc(nsamples, sizeof(*samples));
	if (!buf || !samples)
		return -ENOMEM;
	c.eng = eng;
	c.fd = fd;
	c.buf = buf;
	c.total = o->seek_distances + o->zones + o->n_block_sizes;

	c.small = CW_MAX(c.align, (size_t)4096);
	if (o->tier == CW_TIER_RBD) {
		c.total = o->n_block_sizes + 1;
		c.phase = "bsize";
		e = measure_tail(&c, o, &m, samples);
		if (e < 0)
			return e;
		m.tail_permille = o->tail_permille;
		m.capacity_bytes = size;
		m.zone[0].end_bytes = size;
		goto done;
	}
	c.phase = "seek";
	e = measure_rotation(&c, o, samples);
	if (e < 0)
		return e;
	e = measure_seek(&c, o, &m, samples);
	if (e < 0)
		return e;
	c.done = o->seek_distances;	/* a curve cut short still counts in full */
	c.phase = "zone";
	e = measure_zones(&c, o, &m, size, samples, nsamples);
	if (e < 0)
		return e;
	c.phase = "bsize";
	e = measure_bsizes(&c, o, &m, samples);
	if (e < 0)
		return e;

	m.capacity_bytes = size;
	/* without a platter seen, both are inside the measured seek times */
	m.rotation_ns = c.rot;
	m.overhead_ns = c.rot ? parted_seek_curve(&c, &m) : 0;
done:
	m.margin_ppm = o->margin_ppm;
	m.margin_ns = o->margin_ns;
	e = cw_model_validate(&m);
	if (e < 0)
		return e;
	*ret = m;
	return 0;
}

/* ---- what a measurement can mean ---------------------------------------- */

#define TMPFS_MAGIC_ 0x01021994		/* linux/magic.h */
#define RAMFS_MAGIC_ 0x858458f6
/* Beyond what any disk of the tier moves: the fastest HDDs stream about
 * 300 MB/s (550 with two actuators), PCIe 5 SSDs about 14 GB/s. */
#define HDD_RATE_MAX_BPS (UINT64_C(1000) * 1000 * 1000)
#define SSD_RATE_MAX_BPS (UINT64_C(16) * 1000 * 1000 * 1000)

static void say(char *buf, size_t len, size_t *at, const char *what)
{
	int n;

	if (*at >= len)
		return;
	n = snprintf(buf + *at, len - *at, "%s%s", *at ? "; " : "", what);
	*at = n < 0 ? len : CW_MIN(len, *at + (size_t)n);
}

int cw_calib_check(const char *path, const struct cw_model *m, char *ret_warning, size_t len)
{
	struct statfs fs;
	struct stat st;
	uint64_t fastest = 0;
	size_t at = 0;
	char what[320], r[CW_UNITS_BUF], cap[CW_UNITS_BUF];

	if (len)
		ret_warning[0] = '\0';
	if (stat(path, &st) < 0 || statfs(path, &fs) < 0)
		return -errno;
	/* A device node lives on devtmpfs, which says TMPFS_MAGIC too: only
	 * a regular file there is memory. */
	if (S_ISREG(st.st_mode) &&
	    ((uint32_t)fs.f_type == TMPFS_MAGIC_ || (uint32_t)fs.f_type == RAMFS_MAGIC_))
		say(ret_warning, len, &at, "the disk is a file on a memory file system (tmpfs or "
		    "ramfs): its reads are the page cache's, and the model says nothing about a "
		    "disk");
	if (S_ISREG(st.st_mode) && (uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size / 2)
		say(ret_warning, len, &at, "the disk is a sparse file: its holes read without "
		    "touching the device, so this model is too fast; write the file out (e.g. "
		    "with dd) and calibrate again");
	for (unsigned i = 0; m && i < m->n_zones; i++)
		fastest = CW_MAX(fastest, m->zone[i].rate_bps);
	if (m && fastest > (m->tier == CW_TIER_HDD ? HDD_RATE_MAX_BPS : SSD_RATE_MAX_BPS)) {
		cw_units_format_rate(m->tier == CW_TIER_HDD ? HDD_RATE_MAX_BPS : SSD_RATE_MAX_BPS,
				     cap);
		/* Just above the most: rounded to one decimal it would read
		 * as the most itself ("1GB/s is beyond ... 1GB/s"). */
		if (strcmp(cw_units_format_rate(fastest, r), cap) == 0)
			snprintf(r, sizeof(r), "%" PRIu64 "MB/s", fastest / 1000000);
		snprintf(what, sizeof(what), "a measured rate of %s is beyond any %s (at most about "
			 "%s): a cache answered the reads (the page cache, a controller's or a "
			 "virtual machine host's), so admission on this model would promise what "
			 "the disk cannot do", r, m->tier == CW_TIER_HDD ? "HDD" : "SSD", cap);
		say(ret_warning, len, &at, what);
	}
	return at > 0;
}
