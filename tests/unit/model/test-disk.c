/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: the disk mechanics (cw_model_disk_*) never take longer than
 * the model's worst case that admission charges (cw_model_service_ns over
 * the range the request lies in), for every preset, by brute force over
 * random head positions, times, ranges and sizes; a bus slower than the
 * media does break the bound (so cwsim's overrun count can see it); seeks
 * and rotation really cost time; an SSD's channels overlap, its writes
 * cost more than its reads, and garbage collection pauses the device;
 * the mechanics a model string sets (channels, stripe, write cost, gc,
 * bus) each change the time as specified, round-trip through the stored
 * form, and bad values are refused.
 */
#include "config.h"

#include <inttypes.h>

#include <errno.h>
#include <string.h>
#include <clockwise/model.h>

#include "common/util.h"
#include "cwtest.h"

#define MIB (UINT64_C(1) << 20)

/* xorshift64*: the test's own numbers, repeatable */
static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * UINT64_C(2685821657736338717);
}

static uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return n ? rng_next(s) % n : 0;
}

static void disk_init(struct cw_model_disk *d, const struct cw_model *m, uint64_t bus_bps,
		      int64_t phase_ns)
{
	struct cw_model_disk_opts o;

	cw_model_disk_opts_init(&o);
	o.bus_bps = bus_bps;
	o.phase_ns = phase_ns;
	CU_ASSERT_FATAL(cw_model_disk_init(d, m, &o) == 0);
}

static void check_bound(const char *preset, uint64_t bus_bps, bool expect_within)
{
	struct cw_model m;
	struct cw_model_disk d;
	uint64_t r = 42;
	bool over = false;

	CU_ASSERT_FATAL(cw_model_preset(preset, &m) == 0);
	disk_init(&d, &m, bus_bps, (int64_t)rng_below(&r, (uint64_t)m.rotation_ns + 1));
	for (int i = 0; i < 20000; i++) {
		uint64_t cap = m.capacity_bytes;
		uint64_t lo = rng_below(&r, cap - 4096) / 512 * 512;
		uint64_t hi = lo + 4096 + rng_below(&r, cap - lo - 4096) / 512 * 512;
		uint64_t bytes = 512 * (1 + rng_below(&r, CW_MIN(hi - lo, 16 * MIB) / 512));
		uint64_t off = lo + rng_below(&r, (hi - lo - bytes) / 512 + 1) * 512;
		int64_t now = (int64_t)rng_below(&r, UINT64_C(1) << 50), worst, t;

		d.head_bytes = rng_below(&r, cap);
		CU_ASSERT_FATAL(cw_model_service_ns(&m, lo, hi, bytes, &worst) == 0);
		t = cw_model_disk_peek(&d, now, off, bytes);
		CU_ASSERT_FATAL(cw_model_disk_serve(&d, now, off, bytes) == t);
		CU_ASSERT_FATAL(t > 0);
		CU_ASSERT_FATAL(d.head_bytes == off + bytes);
		if (t > worst)
			over = true;
		if (expect_within && t > worst) {
			fprintf(stderr, "%s: %" PRIu64 "@%" PRIu64 " in [%" PRIu64 ",%" PRIu64
				") took %" PRId64 " > %" PRId64 "\n", preset, bytes, off, lo, hi, t, worst);
			CU_FAIL_FATAL("service time above the model's worst case");
		}
	}
	CU_ASSERT(over == !expect_within);
}

static void test_within_model(void)
{
	for (const char *const *p = cw_model_preset_names(); *p; p++) {
		check_bound(*p, 0, true);
		check_bound(*p, UINT64_C(1) << 40, true);	/* a bus faster than any zone */
	}
}

static void test_slow_bus_breaks_bound(void)
{
	/* 5 MB/s under the Atlas-II's 7..11 MB/s zones */
	check_bound("atlas2", 5000000, false);
}

static void test_costs(void)
{
	struct cw_model m;
	struct cw_model_disk d;
	int64_t near = 0, far = 0, same_track, t;

	CU_ASSERT_FATAL(cw_model_preset("atlas2", &m) == 0);
	disk_init(&d, &m, 0, 0);
	/* averaged over rotation positions, a long seek costs more */
	for (int64_t at = 0; at < m.rotation_ns; at += m.rotation_ns / 50) {
		d.head_bytes = 0;
		near += cw_model_disk_serve(&d, at, 1 << 20, 4096);
		d.head_bytes = 0;
		far += cw_model_disk_serve(&d, at, m.capacity_bytes - 8192, 4096);
	}
	CU_ASSERT(far > near + 50 * (cw_model_seek_ns(&m, m.capacity_bytes / 2)));
	/* the next sectors, asked for just in time (the command overhead
	 * before the head gets there), need no seek and almost no rotation */
	d.head_bytes = 0;
	t = cw_model_disk_serve(&d, 0, 0, 4096);
	same_track = cw_model_disk_serve(&d, t - m.overhead_ns - 1000, 4096, 4096);
	CU_ASSERT(same_track < m.overhead_ns + m.rotation_ns / 10);
	/* asked for once the head has passed them: nearly a revolution */
	d.head_bytes = 0;
	t = cw_model_disk_serve(&d, 0, 0, 4096);
	CU_ASSERT(cw_model_disk_serve(&d, t, 4096, 4096) > m.rotation_ns / 2);
}

/* One request alone takes the model's time; writes cost write_ppm more;
 * requests on other channels overlap, on the same one they queue. */
static void test_ssd_channels(void)
{
	struct cw_model m;
	struct cw_model_disk d;
	struct cw_model_disk_opts o;
	int64_t alone, t0 = 1000000, a, b, w;

	CU_ASSERT_FATAL(cw_model_preset("ssd", &m) == 0);
	cw_model_disk_opts_init(&o);
	CU_ASSERT_FATAL(cw_model_disk_init(&d, &m, &o) == 0);
	CU_ASSERT_FATAL(cw_model_access_ns(&m, 0, 0, 65536, 0, &alone) == 0);
	a = cw_model_disk_ssd_finish(&d, t0, 0, 65536, false);
	CU_ASSERT_EQUAL(a - t0, alone);
	/* the next stripe is the next channel: served at the same time */
	b = cw_model_disk_ssd_finish(&d, t0, o.stripe_bytes, 65536, false);
	CU_ASSERT_EQUAL(b, a);
	/* the same channel again: after the first */
	b = cw_model_disk_ssd_finish(&d, t0, (uint64_t)o.channels * o.stripe_bytes, 65536, false);
	CU_ASSERT_EQUAL(b, a + alone);
	w = cw_model_disk_ssd_finish(&d, 10 * t0, 0, 65536, true) - 10 * t0;
	CU_ASSERT(w >= alone * 2 - 1 && w <= alone * 2 + 1);
}

/* The charge C of an SSD covers a write alone, which its mechanics make
 * cost write_ppm reads (the default two, or what the model says): charged
 * as a read, every write on an emulated SSD took twice its C. */
static void test_ssd_charge_covers_write(void)
{
	static const char *const specs[] = { "ssd", "ssd write=3.5", "ssd write=0.5" };

	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		struct cw_model m;
		struct cw_model_disk d;
		struct cw_model_disk_opts o;
		int64_t c, r, w, t0 = 1000000;

		CU_ASSERT_FATAL(cw_model_from_string(specs[i], &m) == 0);
		cw_model_disk_opts_of(&m, &o);
		CU_ASSERT_FATAL(cw_model_disk_init(&d, &m, &o) == 0);
		CU_ASSERT_FATAL(cw_model_service_ns(&m, 0, 0, 65536, &c) == 0);
		r = cw_model_disk_ssd_finish(&d, t0, 0, 65536, false) - t0;
		w = cw_model_disk_ssd_finish(&d, 10 * t0, 0, 65536, true) - 10 * t0;
		printf("  %s: C %" PRId64 " ns, a 64K read alone %" PRId64 ", a write %" PRId64 "\n",
		       specs[i], c, r, w);
		CU_ASSERT(w <= c);
		CU_ASSERT(r <= c);
		/* and no more than the worse of the two */
		CU_ASSERT(c <= (w > r ? w : r) + 1);
	}
}

static void test_ssd_gc(void)
{
	struct cw_model m;
	struct cw_model_disk d;
	struct cw_model_disk_opts o;
	int64_t end, after;

	CU_ASSERT_FATAL(cw_model_preset("ssd", &m) == 0);
	cw_model_disk_opts_init(&o);
	o.gc_every_bytes = 4 * MIB;
	o.gc_pause_ns = 5 * CW_NS_PER_MS;
	CU_ASSERT_FATAL(cw_model_disk_init(&d, &m, &o) == 0);
	for (unsigned i = 0; i < 3; i++)
		cw_model_disk_ssd_finish(&d, 0, i * MIB, MIB, true);
	/* 3 MiB written: no pause yet, a read elsewhere is served at once */
	after = cw_model_disk_ssd_finish(&d, 0, 3 * o.stripe_bytes, 4096, false);
	CU_ASSERT(after < CW_NS_PER_MS);
	end = cw_model_disk_ssd_finish(&d, 0, 3 * MIB, MIB, true);
	/* the fourth MiB starts a collection that holds every channel */
	after = cw_model_disk_ssd_finish(&d, end, 3 * o.stripe_bytes, 4096, false);
	CU_ASSERT(after >= end + o.gc_pause_ns);
	CU_ASSERT(after < end + o.gc_pause_ns + CW_NS_PER_MS);
}

/* The mechanics a model string sets, each changing the time as cw_model.h
 * says against the same model without it; and they are stored and read
 * back exactly. */
static struct cw_model_disk disk_of(const char *spec, struct cw_model *m)
{
	struct cw_model_disk d;
	struct cw_model_disk_opts o;
	char why[256];

	CU_ASSERT_FATAL(cw_model_from_string_why(spec, m, why, sizeof(why)) == 0);
	cw_model_disk_opts_of(m, &o);
	CU_ASSERT_FATAL(cw_model_disk_init(&d, m, &o) == 0);
	return d;
}

static void test_model_mechanics(void)
{
	struct cw_model base, m, back;
	struct cw_model_disk d0 = disk_of("ssd", &base), d;
	int64_t t0 = 1000000, one, a, b;
	char text[2048];
	uint64_t w = 0;

	(void)d0;
	CU_ASSERT_FATAL(cw_model_access_ns(&base, 0, 0, 65536, 0, &one) == 0);
	/* channels: stripes 0 and 1 overlap on four channels, queue on one */
	d = disk_of("ssd", &m);
	a = cw_model_disk_ssd_finish(&d, t0, 0, 65536, false);
	CU_ASSERT_EQUAL(cw_model_disk_ssd_finish(&d, t0, 128 << 10, 65536, false), a);
	d = disk_of("ssd channels=1", &m);
	CU_ASSERT_EQUAL(m.channels, 1);
	a = cw_model_disk_ssd_finish(&d, t0, 0, 65536, false);
	CU_ASSERT_EQUAL(cw_model_disk_ssd_finish(&d, t0, 128 << 10, 65536, false), a + one);
	/* stripe: with 64K stripes, 64K is the next channel, not the same */
	d = disk_of("ssd channels=2 stripe=64K", &m);
	a = cw_model_disk_ssd_finish(&d, t0, 0, 65536, false);
	CU_ASSERT_EQUAL(cw_model_disk_ssd_finish(&d, t0, 64 << 10, 65536, false), a);
	CU_ASSERT_EQUAL(cw_model_disk_ssd_finish(&d, t0, 128 << 10, 65536, false), a + one);
	/* write: a write costs X reads */
	d = disk_of("ssd write=3.5", &m);
	CU_ASSERT_EQUAL(m.write_ppm, 3500000);
	b = cw_model_disk_ssd_finish(&d, t0, 0, 65536, true) - t0;
	CU_ASSERT(b >= one * 7 / 2 - 1 && b <= one * 7 / 2 + 1);
	/* gc: a pause after every SIZE written, holding every channel */
	d = disk_of("ssd gc=256K/30ms", &m);
	CU_ASSERT(m.gc_every_bytes == 256 << 10 && m.gc_pause_ns == 30 * CW_NS_PER_MS);
	for (a = t0; w < (256 << 10); w += 65536)
		a = cw_model_disk_ssd_finish(&d, t0, w, 65536, true);
	b = cw_model_disk_ssd_finish(&d, a, 3 * (128 << 10), 4096, false);
	CU_ASSERT(b >= a + 30 * CW_NS_PER_MS);
	CU_ASSERT(b < a + 31 * CW_NS_PER_MS);
	/* bus: a request alone no faster than the bus; two on other
	 * channels one after the other on it */
	d = disk_of("ssd bus=1MB/s", &m);
	CU_ASSERT_EQUAL(m.bus_bps, 1000000);
	a = cw_model_disk_ssd_finish(&d, t0, 0, 65536, false);
	CU_ASSERT_EQUAL(a - t0, CW_MAX(one, (int64_t)65536 * 1000));
	b = cw_model_disk_ssd_finish(&d, t0, 128 << 10, 65536, false);
	CU_ASSERT_EQUAL(b, a + (int64_t)65536 * 1000);
	/* and on a disk: a bus slower than the media adds to a transfer */
	d = disk_of("atlas2", &base);
	a = cw_model_disk_serve(&d, 0, 0, MIB);
	d = disk_of("atlas2 bus=2MB/s", &m);
	b = cw_model_disk_serve(&d, 0, 0, MIB);
	CU_ASSERT(b > a);
	CU_ASSERT(b >= (int64_t)MIB * 500);	/* 1 MiB at 2 MB/s */
	/* stored and read back exactly; a model without them as before */
	CU_ASSERT_FATAL(cw_model_from_string("ssd channels=8 stripe=256K write=2.25 gc=1G/50ms "
					     "bus=300MB/s", &m) == 0);
	CU_ASSERT_FATAL(cw_model_format(&m, text, sizeof(text)) > 0);
	CU_ASSERT(strstr(text, " channels=8 stripe=262144 write=2.250000 gc=1073741824/50000000ns "
			 "bus=300000000") != NULL);
	CU_ASSERT_FATAL(cw_model_parse(text, &back) == 0);
	CU_ASSERT(memcmp(&m, &back, sizeof(m)) == 0);
	CU_ASSERT_FATAL(cw_model_format(&base, text, sizeof(text)) > 0);
	CU_ASSERT(strstr(text, "channels") == NULL && strstr(text, "bus") == NULL);
	/* bad values are refused */
	CU_ASSERT_EQUAL(cw_model_from_string("ssd channels=0", &m), -EINVAL);
	CU_ASSERT_EQUAL(cw_model_from_string("ssd write=0.0001", &m), -EINVAL);
	CU_ASSERT_EQUAL(cw_model_from_string("ssd gc=1G/0", &m), -EINVAL);
	CU_ASSERT_EQUAL(cw_model_from_string("atlas2 write=2", &m), -EINVAL);
	CU_ASSERT_EQUAL(cw_model_from_string("nosuch channels=2", &m), -ENOENT);
	snprintf(text, sizeof(text), "cwmodel1 name=x tier=ssd cap=1000000 rot=0 ovh=0 "
		 "seek=0:0 zones=1000000:1000000 channels=99");
	CU_ASSERT_EQUAL(cw_model_parse(text, &m), -EINVAL);
}

static void test_bad_opts(void)
{
	struct cw_model m;
	struct cw_model_disk d;
	struct cw_model_disk_opts o;

	CU_ASSERT_FATAL(cw_model_preset("atlas2", &m) == 0);
	cw_model_disk_opts_init(&o);
	o.channels = 0;
	CU_ASSERT_EQUAL(cw_model_disk_init(&d, &m, &o), -EINVAL);
	cw_model_disk_opts_init(&o);
	o.phase_ns = m.rotation_ns + 1;
	CU_ASSERT_EQUAL(cw_model_disk_init(&d, &m, &o), -EINVAL);
	o.phase_ns = 0;
	o.size = 8;
	CU_ASSERT_EQUAL(cw_model_disk_init(&d, &m, &o), -EINVAL);
	m.n_zones = 0;
	CU_ASSERT_EQUAL(cw_model_disk_init(&d, &m, NULL), -EINVAL);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("model-disk", NULL, NULL);

	cwtest_add(s, "service time within the model", test_within_model);
	cwtest_add(s, "a slow bus breaks the bound", test_slow_bus_breaks_bound);
	cwtest_add(s, "seek and rotation cost time", test_costs);
	cwtest_add(s, "SSD channels and writes", test_ssd_channels);
	cwtest_add(s, "SSD charge covers a write", test_ssd_charge_covers_write);
	cwtest_add(s, "SSD garbage collection", test_ssd_gc);
	cwtest_add(s, "a model's mechanics: channels, stripe, write, gc, bus",
		   test_model_mechanics);
	cwtest_add(s, "bad options", test_bad_opts);
	return cwtest_run();
}
