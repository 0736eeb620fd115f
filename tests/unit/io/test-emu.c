/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: the emulating engine on real files (libaio underneath):
 * each request takes at least the model's overhead + seek + transfer and
 * at most that plus one revolution (plus the lateness it reports), with a
 * rotational wait that averages half a revolution; requests finish in
 * arrival order, or reordered by the command queue when it is on, which
 * then serves a scattered batch sooner; a flush waits for earlier writes;
 * SSD channels overlap, and the channels, write cost, collection pause
 * and bus a model string sets change the time as they say; lateness is
 * measured and warned about once;
 * requests past the emulated capacity fail as on a block device of that
 * size; the data is really written and read.
 *
 * Timing bounds allow CW_TEST_SLACK_MS (default 20) of lateness: on a
 * loaded machine the emulator can be late, never early.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <clockwise/emu.h>
#include "common/cleanup.h"
#include "common/util.h"
#include "cwtest.h"

#define BLK 4096u
#define FILE_BYTES (UINT64_C(256) << 20)

static char tmpdir[200];
static char path[300];
static int fd = -1;
static int64_t slack_ns;

static int setup(void)
{
	bool direct;
	int wfd;

	snprintf(path, sizeof(path), "%s/disk", tmpdir);
	wfd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	if (wfd < 0 || ftruncate(wfd, (off_t)FILE_BYTES) < 0)
		return -1;
	close(wfd);
	fd = cw_io_open(path, true, &direct);
	return fd < 0 ? -1 : 0;
}

static int teardown(void)
{
	if (fd >= 0)
		close(fd);
	unlink(path);
	return 0;
}

static struct cw_io_engine *emu(const char *preset, unsigned satf, unsigned depth,
				struct cw_model *ret_m)
{
	struct cw_io_emu_opts o;
	struct cw_io_engine *e = NULL;

	CU_ASSERT_FATAL(cw_model_preset(preset, ret_m) == 0);
	cw_io_emu_opts_init(&o);
	o.inner = CW_IO_AIO;
	o.satf_window = satf;
	o.late_warn_ns = slack_ns;
	CU_ASSERT_FATAL(cw_io_emu_new(ret_m, &o, depth, &e) == 0);
	CU_ASSERT_FATAL(cw_io_emu_model(e) != NULL);
	return e;
}

/* overhead + seek from head to off + transfer: the least an access takes */
static int64_t least(const struct cw_model *m, uint64_t head, uint64_t off, uint64_t bytes)
{
	int64_t t;

	CU_ASSERT_FATAL(cw_model_access_ns(m, head, off, bytes, 0, &t) == 0);
	return t;
}

static void test_hdd_service_times(void)
{
	struct cw_model m;
	struct cw_io_engine *e = emu("atlas2", 0, 4, &m);
	_cleanup_free_ void *buf = cw_io_alloc(64 << 10);
	struct cw_io_emu_stats st;
	uint64_t head = 0, rng = 7;
	double rot_sum = 0;
	int64_t busy = 0;
	const int n = 80;

	CU_ASSERT_FATAL(buf != NULL);
	for (int i = 0; i < n; i++) {
		uint64_t off, bytes = (i % 2) ? BLK : 64 << 10;
		int64_t t0, t, lo, late;

		rng = rng * 6364136223846793005u + 1442695040888963407u;
		off = (rng >> 20) % (FILE_BYTES / BLK - 16) * BLK;
		lo = least(&m, head, off, bytes);
		CU_ASSERT_FATAL(cw_io_emu_stats(e, &st) == 0);
		late = st.late_sum_ns;
		t0 = cw_now_ns();
		CU_ASSERT_FATAL(cw_io_sync(e, fd, CW_IO_READ, buf, bytes, off) == (int64_t)bytes);
		t = cw_now_ns() - t0;
		CU_ASSERT_FATAL(cw_io_emu_stats(e, &st) == 0);
		late = st.late_sum_ns - late;
		/* never early; at most one revolution more, plus the lateness
		 * the emulator measured of itself (a loaded host's: it is in
		 * the stats, not hidden) and the clock's slack */
		CU_ASSERT(t >= lo);
		CU_ASSERT(t <= lo + m.rotation_ns + late + slack_ns);
		rot_sum += (double)(t - lo - late) / (double)m.rotation_ns;
		busy += t;
		head = off + bytes;
	}
	/* the platter's position at arrival is as good as random */
	printf("\n  mean rotational wait %.3f revolutions (0.5 expected)\n", rot_sum / n);
	CU_ASSERT(rot_sum / n > 0.3 && rot_sum / n < 0.75);
	CU_ASSERT_FATAL(cw_io_emu_stats(e, &st) == 0);
	CU_ASSERT_EQUAL(st.requests, (uint64_t)n);
	CU_ASSERT(st.busy_ns <= busy);
	CU_ASSERT(st.late_max_ns >= 0 && st.late_sum_ns >= 0);
	printf("  lateness: mean %" PRId64 " us, max %" PRId64 " us\n",
	       st.late_sum_ns / n / 1000, st.late_max_ns / 1000);
	cw_io_engine_free(e);
}

/* Submits reads at the given offsets at once and returns the order they
 * come back in and the time all took. */
static int64_t batch(struct cw_io_engine *e, const uint64_t *offs, unsigned n, unsigned *order)
{
	struct cw_io_req reqs[16], *ptr[16], *done[16];
	_cleanup_free_ void *buf = cw_io_alloc(16 * BLK);
	unsigned got = 0;
	int64_t t0 = cw_now_ns();

	CU_ASSERT_FATAL(n <= 16 && buf != NULL);
	for (unsigned i = 0; i < n; i++) {
		reqs[i] = (struct cw_io_req){ .fd = fd, .op = CW_IO_READ,
					      .buf = (char *)buf + i * BLK, .len = BLK,
					      .off = offs[i], .user = (void *)(uintptr_t)i };
		ptr[i] = &reqs[i];
	}
	CU_ASSERT_FATAL(cw_io_submit(e, ptr, n) == (int)n);
	while (got < n) {
		int r = cw_io_reap(e, 1, -1, done, n - got);

		CU_ASSERT_FATAL(r > 0);
		for (int i = 0; i < r; i++) {
			CU_ASSERT_EQUAL(done[i]->res, BLK);
			order[got++] = (unsigned)(uintptr_t)done[i]->user;
		}
	}
	return cw_now_ns() - t0;
}

static void test_order_and_satf(void)
{
	/* scattered: far, near, far, near ... from the head at 0 */
	uint64_t offs[12];
	unsigned order[12];
	struct cw_model m;
	struct cw_io_engine *fifo = emu("atlas2", 0, 16, &m);
	struct cw_io_engine *satf = emu("atlas2", 16, 16, &m);
	int64_t t_fifo = 0, t_satf = 0;
	bool reordered = false;

	for (unsigned i = 0; i < 12; i++)
		offs[i] = (i % 2 ? i * BLK * 64 : FILE_BYTES - (i + 1) * BLK * 64);
	for (int round = 0; round < 3; round++) {
		t_fifo += batch(fifo, offs, 12, order);
		for (unsigned i = 0; i < 12; i++)
			CU_ASSERT_EQUAL(order[i], i);
		t_satf += batch(satf, offs, 12, order);
		for (unsigned i = 0; i < 12; i++)
			reordered |= order[i] != i;
	}
	printf("\n  12 scattered reads x3: arrival order %" PRId64 " ms, SATF %" PRId64 " ms\n",
	       t_fifo / CW_NS_PER_MS, t_satf / CW_NS_PER_MS);
	CU_ASSERT(reordered);
	CU_ASSERT(t_satf < t_fifo);
	cw_io_engine_free(fifo);
	cw_io_engine_free(satf);
}

static void test_flush_barrier(void)
{
	struct cw_model m;
	struct cw_io_engine *e = emu("atlas2", 16, 8, &m);
	_cleanup_free_ void *buf = cw_io_alloc(4 * BLK);
	struct cw_io_req w[3], f, *ptr[4], *done[4];
	unsigned got = 0, pos_flush = 99;

	CU_ASSERT_FATAL(buf != NULL);
	memset(buf, 0x5a, 4 * BLK);
	for (unsigned i = 0; i < 3; i++) {
		w[i] = (struct cw_io_req){ .fd = fd, .op = CW_IO_WRITE, .buf = buf, .len = BLK,
					   .off = (i ? FILE_BYTES / 2 : 0) + i * BLK };
		ptr[i] = &w[i];
	}
	f = (struct cw_io_req){ .fd = fd, .op = CW_IO_FSYNC };
	ptr[3] = &f;
	CU_ASSERT_FATAL(cw_io_submit(e, ptr, 4) == 4);
	while (got < 4) {
		int r = cw_io_reap(e, 1, -1, done, 4);

		CU_ASSERT_FATAL(r > 0);
		for (int i = 0; i < r; i++, got++)
			if (done[i] == &f)
				pos_flush = got;
	}
	CU_ASSERT_EQUAL(pos_flush, 3);
	CU_ASSERT_EQUAL(f.res, 0);
	cw_io_engine_free(e);
}

static void test_ssd_channels(void)
{
	struct cw_model m;
	struct cw_io_engine *e = emu("ssd", 0, 16, &m);
	struct cw_model_disk_opts d;
	uint64_t spread[4], same[4];
	unsigned order[4];
	int64_t one = least(&m, 0, 0, BLK), t_spread, t_same;

	cw_model_disk_opts_init(&d);
	for (unsigned i = 0; i < 4; i++) {
		spread[i] = i * d.stripe_bytes;
		same[i] = i * d.stripe_bytes * d.channels;
	}
	/* small service times: take the best of a few rounds against noise */
	t_spread = t_same = INT64_MAX;
	for (int k = 0; k < 5; k++) {
		t_spread = CW_MIN(t_spread, batch(e, spread, 4, order));
		t_same = CW_MIN(t_same, batch(e, same, 4, order));
	}
	printf("\n  4 reads on 4 channels %" PRId64 " us, on one %" PRId64 " us (one: %" PRId64
	       " us)\n", t_spread / 1000, t_same / 1000, one / 1000);
	CU_ASSERT(t_same >= 4 * one);
	CU_ASSERT(t_spread >= one);
	CU_ASSERT(t_spread < t_same);
	cw_io_engine_free(e);
}

/* An engine for a model string, with the mechanics it sets (as clockwised
 * sets up an emulated disk). */
static struct cw_io_engine *emu_spec(const char *spec, struct cw_model *ret_m)
{
	struct cw_io_emu_opts o;
	struct cw_io_engine *e = NULL;

	CU_ASSERT_FATAL(cw_model_from_string(spec, ret_m) == 0);
	cw_io_emu_opts_init(&o);
	cw_model_disk_opts_of(ret_m, &o.disk);
	o.inner = CW_IO_AIO;
	o.late_warn_ns = slack_ns;
	CU_ASSERT_FATAL(cw_io_emu_new(ret_m, &o, 16, &e) == 0);
	return e;
}

static int64_t timed(struct cw_io_engine *e, enum cw_io_op op, void *buf, size_t len, uint64_t off)
{
	int64_t t0 = cw_now_ns();

	CU_ASSERT_FATAL(cw_io_sync(e, fd, op, buf, len, off) == (int64_t)len);
	return cw_now_ns() - t0;
}

/* What the emulator says it was late by at most: never early, and late
 * by no more than it reports (a loaded host delays it). */
static int64_t late(struct cw_io_engine *e)
{
	struct cw_io_emu_stats st;

	CU_ASSERT_FATAL(cw_io_emu_stats(e, &st) == 0);
	return st.late_max_ns + slack_ns;
}

/* A request handed back carries the emulated disk's own time for it
 * (disk_ns: what the model says, the host's lag left out), what the
 * daemon sets against C; a plain engine's requests carry 0. */
static void test_disk_time(void)
{
	struct cw_model m;
	struct cw_io_engine *e = emu_spec("ssd", &m), *plain = NULL;
	_cleanup_free_ void *buf = cw_io_alloc(64 << 10);
	struct cw_io_req r = { .fd = fd, .op = CW_IO_WRITE, .len = 64 << 10, .off = 0 },
			 *q = &r, *done;
	int64_t one = least(&m, 0, 0, 64 << 10), t0;

	CU_ASSERT_FATAL(buf != NULL);
	memset(buf, 0x5a, 64 << 10);
	r.buf = buf;
	t0 = cw_now_ns();
	CU_ASSERT_FATAL(cw_io_submit(e, &q, 1) == 1);
	CU_ASSERT_FATAL(cw_io_reap(e, 1, -1, &done, 1) == 1);
	printf("\n  a 64K write: disk_ns %" PRId64 " us, seen after %" PRId64 " us (a read %" PRId64
	       " us)\n", r.disk_ns / 1000, (cw_now_ns() - t0) / 1000, one / 1000);
	CU_ASSERT(r.disk_ns >= 2 * one - 1 && r.disk_ns <= 2 * one + 1);
	cw_io_engine_free(e);
	CU_ASSERT_FATAL(cw_io_engine_new(CW_IO_AIO, 4, &plain) == 0);
	r.disk_ns = 12345;
	CU_ASSERT_FATAL(cw_io_submit(plain, &q, 1) == 1);
	CU_ASSERT_FATAL(cw_io_reap(plain, 1, -1, &done, 1) == 1);
	CU_ASSERT_EQUAL(r.disk_ns, 0);
	cw_io_engine_free(plain);
}

static void test_ssd_mechanics_set(void)
{
	struct cw_model m;
	struct cw_io_engine *e;
	_cleanup_free_ void *buf = cw_io_alloc(64 << 10);
	uint64_t spread[4];
	unsigned order[4];
	int64_t one, t, t0, best = INT64_MAX;

	CU_ASSERT_FATAL(buf != NULL);
	memset(buf, 0x3c, 64 << 10);
	/* channels=1: four reads on four stripes queue on the one channel */
	e = emu_spec("ssd channels=1", &m);
	one = least(&m, 0, 0, BLK);
	for (unsigned i = 0; i < 4; i++)
		spread[i] = i * (128 << 10);
	for (int k = 0; k < 3; k++)
		best = CW_MIN(best, batch(e, spread, 4, order));
	printf("\n  channels=1: 4 reads on 4 stripes %" PRId64 " us (one %" PRId64 " us)\n",
	       best / 1000, one / 1000);
	CU_ASSERT(best >= 4 * one);
	cw_io_engine_free(e);
	/* write=50: a 64K write takes 50 reads of it */
	e = emu_spec("ssd write=50", &m);
	one = least(&m, 0, 0, 64 << 10);
	t = timed(e, CW_IO_WRITE, buf, 64 << 10, 0);
	printf("  write=50: a 64K write %" PRId64 " us (a read %" PRId64 " us)\n", t / 1000,
	       one / 1000);
	CU_ASSERT(t >= 50 * one - 1);
	CU_ASSERT(t <= 50 * one + late(e));
	cw_io_engine_free(e);
	/* gc=128K/40ms: the write that completes 128K starts a pause, which
	 * a read right after it waits out (the first 64K start none) */
	e = emu_spec("ssd gc=128K/40ms", &m);
	one = least(&m, 0, 0, 64 << 10);
	t = timed(e, CW_IO_WRITE, buf, 64 << 10, 0);
	CU_ASSERT(t <= 2 * one + late(e));
	t0 = cw_now_ns();
	(void)timed(e, CW_IO_WRITE, buf, 64 << 10, 64 << 10);
	(void)timed(e, CW_IO_READ, buf, BLK, 3 * (128 << 10));
	t = cw_now_ns() - t0;
	printf("  gc=128K/40ms: the write that fills 128K and a read after it %" PRId64 " ms\n",
	       t / CW_NS_PER_MS);
	CU_ASSERT(t >= 2 * one + 40 * CW_NS_PER_MS);
	CU_ASSERT(t <= 2 * one + 40 * CW_NS_PER_MS + least(&m, 0, 0, BLK) + 2 * late(e));
	cw_io_engine_free(e);
	/* bus=1MB/s: a 64K read no faster than the bus carries it */
	e = emu_spec("ssd bus=1MB/s", &m);
	t = timed(e, CW_IO_READ, buf, 64 << 10, 0);
	printf("  bus=1MB/s: a 64K read %" PRId64 " ms\n", t / CW_NS_PER_MS);
	CU_ASSERT(t >= (int64_t)65536 * 1000);
	CU_ASSERT(t <= (int64_t)65536 * 1000 + late(e));
	cw_io_engine_free(e);
}

static void test_lateness_warned(void)
{
	struct cw_model m;
	struct cw_io_engine *e = emu("atlas2", 0, 4, &m);
	_cleanup_free_ void *buf = cw_io_alloc(BLK);
	struct cw_io_req q = { .fd = fd, .op = CW_IO_READ, .len = BLK, .off = 0 }, *p = &q, *d;
	struct cw_io_emu_stats st;
	struct timespec ts = { .tv_sec = 0 };

	q.buf = buf;
	CU_ASSERT(!cw_io_emu_behind(e));
	CU_ASSERT_FATAL(cw_io_submit(e, &p, 1) == 1);
	/* a caller that comes back well after the disk finished: late */
	ts.tv_nsec = (long)(m.seek[m.n_seek - 1].time_ns + m.rotation_ns + 2 * slack_ns);
	nanosleep(&ts, NULL);
	CU_ASSERT_EQUAL(cw_io_reap(e, 1, -1, &d, 1), 1);
	CU_ASSERT_FATAL(cw_io_emu_stats(e, &st) == 0);
	CU_ASSERT_EQUAL(st.late, 1);
	CU_ASSERT(st.late_max_ns > slack_ns);
	CU_ASSERT(cw_io_emu_behind(e));
	CU_ASSERT(!cw_io_emu_behind(e));	/* once */
	/* not an emulator */
	CU_ASSERT_EQUAL(cw_io_emu_stats(NULL, &st), -EINVAL);
	cw_io_engine_free(e);
}

static void test_capacity(void)
{
	static const char tiny[] = "cwmodel1 name=tiny tier=hdd cap=1048576 rot=8333334 ovh=100000 "
				   "mppm=0 mns=0 seek=0:0,1048576:2000000 zones=1048576:50000000";
	struct cw_model m;
	struct cw_io_engine *e = NULL;
	_cleanup_free_ void *buf = cw_io_alloc(4 * BLK);
	uint64_t cap;

	CU_ASSERT_FATAL(cw_model_parse(tiny, &m) == 0);
	CU_ASSERT_FATAL(cw_io_emu_new(&m, NULL, 4, &e) == 0);
	cap = m.capacity_bytes;
	memset(buf, 0xa5, 4 * BLK);
	CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_WRITE, buf, 2 * BLK, cap - 2 * BLK), 2 * BLK);
	CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_WRITE, buf, BLK, cap), -ENOSPC);
	CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_READ, buf, BLK, cap), 0);
	CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_READ, buf, 4 * BLK, cap - BLK), BLK);
	/* a write across the end is cut there, as on a block device */
	CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_WRITE, buf, 2 * BLK, cap - BLK), BLK);
	/* and nothing past the end was touched */
	CU_ASSERT_EQUAL(pread(fd, buf, BLK, (off_t)cap), (ssize_t)BLK);
	for (unsigned i = 0; i < BLK; i++)
		CU_ASSERT_FATAL(((unsigned char *)buf)[i] == 0);
	cw_io_engine_free(e);
	/* bad arguments */
	m.n_zones = 0;
	CU_ASSERT_EQUAL(cw_io_emu_new(&m, NULL, 4, &e), -EINVAL);
}

static void test_data_is_real(void)
{
	struct cw_model m;
	struct cw_io_engine *e = emu("hdd7200", 0, 4, &m);
	_cleanup_free_ unsigned char *w = cw_io_alloc(64 << 10), *r = cw_io_alloc(64 << 10);

	CU_ASSERT_FATAL(w && r);
	for (unsigned i = 0; i < 64 << 10; i++)
		w[i] = (unsigned char)(i * 7 + 3);
	CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_WRITE, w, 64 << 10, 1 << 20), 64 << 10);
	CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_FSYNC, NULL, 0, 0), 0);
	CU_ASSERT_EQUAL(cw_io_sync(e, fd, CW_IO_READ, r, 64 << 10, 1 << 20), 64 << 10);
	CU_ASSERT(memcmp(w, r, 64 << 10) == 0);
	/* and through the plain file too */
	memset(r, 0, 64 << 10);
	CU_ASSERT_EQUAL(pread(fd, r, 64 << 10, 1 << 20), 64 << 10);
	CU_ASSERT(memcmp(w, r, 64 << 10) == 0);
	cw_io_engine_free(e);
}

int main(void)
{
	const char *s = getenv("CW_TEST_SLACK_MS");
	CU_pSuite su;

	slack_ns = (s ? atoll(s) : 20) * CW_NS_PER_MS;
	cwtest_tmpdir(tmpdir, sizeof(tmpdir), "cw-emu");
	su = cwtest_suite("emulated disks", setup, teardown);
	cwtest_add(su, "HDD service times within the model", test_hdd_service_times);
	cwtest_add(su, "arrival order; the command queue reorders", test_order_and_satf);
	cwtest_add(su, "a flush waits for earlier writes", test_flush_barrier);
	cwtest_add(su, "SSD channels overlap", test_ssd_channels);
	cwtest_add(su, "a model string's channels, write cost, gc and bus", test_ssd_mechanics_set);
	cwtest_add(su, "a request carries the emulated disk's time", test_disk_time);
	cwtest_add(su, "lateness is measured and warned about", test_lateness_warned);
	cwtest_add(su, "past the emulated capacity", test_capacity);
	cwtest_add(su, "the data is really there", test_data_is_real);
	return cwtest_run_in_tmpdir(tmpdir);
}
