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
 * Invariant: the model produced is valid (cw_model_validate) and
 * conservative where it must extrapolate: the seek curve is made
 * non-decreasing by taking the running maximum, the rotational latency is
 * already inside the measured seek times (so rotation_ns is 0 and nothing
 * is subtracted), and any part of the device beyond the measured span is
 * given the slowest rate measured.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "model/model-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#define CHUNK_MAX (UINT64_C(1) << 20)

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

int64_t model_percentile(int64_t *v, size_t n, unsigned pct)
{
	size_t k;

	qsort(v, n, sizeof(*v), cmp_i64);
	k = (n * pct + 99) / 100;	/* ceil(n pct / 100) */
	return v[k ? k - 1 : 0];
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

static int device_size(int fd, uint64_t *ret)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISBLK(st.st_mode)) {
		uint64_t sz;

		if (ioctl(fd, BLKGETSIZE64, &sz) < 0)
			return -errno;
		*ret = sz;
		return 0;
	}
	if (!S_ISREG(st.st_mode))
		return -ENOTBLK;
	*ret = (uint64_t)st.st_size;
	return 0;
}

static bool opts_ok(const struct cw_calib_opts *o)
{
	if (!o || o->size < sizeof(*o) || o->seek_distances < 2 ||
	    o->seek_distances > CW_MODEL_MAX_SEEK || o->zones < 1 ||
	    o->zones > CW_MODEL_MAX_ZONES || o->zone_read_bytes == 0 || o->repeats < 1 ||
	    o->repeats > 100000 || o->percentile < 50 || o->percentile > 100 ||
	    o->n_block_sizes > CW_MODEL_MAX_BSIZES || (o->n_block_sizes && !o->block_sizes) ||
	    (o->tier != CW_TIER_HDD && o->tier != CW_TIER_SSD))
		return false;
	for (unsigned i = 0; i < o->n_block_sizes; i++)
		if (o->block_sizes[i] == 0)
			return false;
	return true;
}

static int measure_seek(struct calib *c, const struct cw_calib_opts *o, struct cw_model *m,
			int64_t *samples)
{
	size_t small = CW_MAX(c->align, (size_t)4096);
	uint64_t maxd = c->span - small;
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

		if (chunk == 0)
			chunk = c->align;
		for (unsigned r = 0; r < o->repeats; r++)
			for (uint64_t off = 0; off + chunk <= len && n < nsamples; off += chunk) {
				e = timed_read(c, start + off, chunk, &samples[n++]);
				if (e < 0)
					return e;
			}
		worst = model_percentile(samples, n, o->percentile);
		m->zone[z] = (struct cw_model_zone){
			.start_bytes = start,
			.end_bytes = z + 1 == o->zones ? capacity : start + zlen,
			.rate_bps = CW_MAX((uint64_t)1,
					   (uint64_t)((unsigned __int128)chunk * CW_NS_PER_S / (uint64_t)worst)),
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

static int measure_bsizes(struct calib *c, const struct cw_calib_opts *o, struct cw_model *m,
			  int64_t *samples)
{
	uint64_t sizes[CW_MODEL_MAX_BSIZES];
	unsigned n = 0;
	int e;

	/* sorted, deduplicated, aligned up, within the span */
	for (unsigned i = 0; i < o->n_block_sizes; i++) {
		uint64_t b = CW_DIV_ROUND_UP(o->block_sizes[i], c->align) * c->align;

		if (b > c->span || b > CHUNK_MAX * 64)
			return -EINVAL;
		sizes[n++] = b;
	}
	qsort(sizes, n, sizeof(*sizes), cmp_i64);	/* all < 2^63 */
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

static void engine_freep(struct cw_io_engine **e)
{
	cw_io_engine_free(*e);
}

int cw_model_calibrate(const char *path, const struct cw_calib_opts *o,
		       cw_calib_progress_fn progress, void *userdata, struct cw_model *ret)
{
	_cleanup_close_ int fd = -1;
	_cleanup_(engine_freep) struct cw_io_engine *eng = NULL;
	_cleanup_free_ void *buf = NULL;
	_cleanup_free_ int64_t *samples = NULL;
	struct cw_model m = { .tier = o ? o->tier : CW_TIER_HDD };
	struct calib c = { .rng = 0x9e3779b9u, .progress = progress, .userdata = userdata };
	uint64_t size = 0, maxb = 0;
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
	e = device_size(fd, &size);
	if (e < 0)
		return e;
	c.span = o->span_bytes ? CW_MIN(o->span_bytes, size) : size;
	c.span = c.span / c.align * c.align;
	if (c.span < 4 * CW_MAX(c.align, (size_t)4096) || size > (UINT64_C(1) << 62))
		return -EINVAL;	/* nothing worth measuring */
	e = cw_io_engine_new(o->engine, 1, &eng);
	if (e < 0)
		return e;
	for (unsigned i = 0; i < o->n_block_sizes; i++)
		maxb = CW_MAX(maxb, CW_DIV_ROUND_UP(o->block_sizes[i], c.align) * c.align);
	buf = cw_io_alloc(CW_MAX(CW_MAX(maxb, CHUNK_MAX), (uint64_t)c.align));
	nsamples = CW_MAX((size_t)o->repeats * 64, (size_t)o->repeats);
	samples = calloc(nsamples, sizeof(*samples));
	if (!buf || !samples)
		return -ENOMEM;
	c.eng = eng;
	c.fd = fd;
	c.buf = buf;
	c.total = o->seek_distances + o->zones + o->n_block_sizes;

	c.phase = "seek";
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
	m.rotation_ns = 0;	/* inside the measured seek times */
	m.overhead_ns = 0;	/* likewise */
	m.margin_ppm = o->margin_ppm;
	m.margin_ns = o->margin_ns;
	e = cw_model_validate(&m);
	if (e < 0)
		return e;
	*ret = m;
	return 0;
}
