/*
 * Description: disk service-time models — presets, the worst-case service
 * time (seek from the far end + rotation + transfer at the slowest zone +
 * margin), the text form and its refusals, and calibration of a real file
 * in a temporary directory through both I/O engines.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <clockwise/model.h>
#include "common/util.h"
#include "cwtest.h"

#define MiB (UINT64_C(1) << 20)

static void test_presets(void)
{
	const char *const *names = cw_model_preset_names();
	struct cw_model m;
	unsigned n = 0;

	for (; names[n]; n++) {
		CU_ASSERT_EQUAL(cw_model_preset(names[n], &m), 0);
		CU_ASSERT_EQUAL(cw_model_validate(&m), 0);
		CU_ASSERT_STRING_EQUAL(m.name, names[n]);
	}
	CU_ASSERT_EQUAL(n, 4);
	CU_ASSERT_EQUAL(cw_model_preset("rbd", &m), 0);
	CU_ASSERT_EQUAL(m.tier, CW_TIER_RBD);
	CU_ASSERT_EQUAL(cw_model_preset("floppy", &m), -ENOENT);
	CU_ASSERT_EQUAL(cw_model_preset("ssd", &m), 0);
	CU_ASSERT_EQUAL(m.tier, CW_TIER_SSD);
	CU_ASSERT_EQUAL(m.rotation_ns, 0);
}

static void test_service_time(void)
{
	struct cw_model m;
	int64_t prev = 0, c, outer, inner, plain;

	CU_ASSERT_FATAL(cw_model_preset("atlas2", &m) == 0);
	/* more bytes never cost less */
	for (uint64_t b = 4096; b <= 8 * MiB; b *= 2) {
		CU_ASSERT_FATAL(cw_model_service_ns(&m, 0, 0, b, &c) == 0);
		CU_ASSERT(c > prev);
		prev = c;
	}
	/* seek curve interpolates and is monotone */
	prev = -1;
	for (uint64_t d = 0; d <= m.capacity_bytes; d += m.capacity_bytes / 97) {
		int64_t s = cw_model_seek_ns(&m, d);

		CU_ASSERT(s >= prev);
		prev = s;
	}
	CU_ASSERT_EQUAL(cw_model_seek_ns(&m, 0), 0);
	CU_ASSERT_EQUAL(cw_model_seek_ns(&m, m.capacity_bytes * 2), m.seek[m.n_seek - 1].time_ns);
	/* outer zones are faster; the whole disk is as slow as the inner */
	CU_ASSERT_FATAL(cw_model_service_ns(&m, 0, MiB * 100, MiB, &outer) == 0);
	CU_ASSERT_FATAL(cw_model_service_ns(&m, m.capacity_bytes - 100 * MiB, m.capacity_bytes, MiB,
					    &inner) == 0);
	CU_ASSERT_FATAL(cw_model_service_ns(&m, 0, 0, MiB, &plain) == 0);
	CU_ASSERT(outer < inner);
	CU_ASSERT_EQUAL(plain, inner);
	/* the sum of its parts: overhead + full-stroke seek + rotation + transfer */
	CU_ASSERT_EQUAL(plain, m.overhead_ns + m.seek[m.n_seek - 1].time_ns + m.rotation_ns +
				       (int64_t)((MiB * CW_NS_PER_S + m.zone[m.n_zones - 1].rate_bps - 1) /
						 m.zone[m.n_zones - 1].rate_bps));
	/* margins: 10% and then 1 ms */
	m.margin_ppm = 100000;
	m.margin_ns = CW_NS_PER_MS;
	CU_ASSERT_FATAL(cw_model_service_ns(&m, 0, 0, MiB, &c) == 0);
	CU_ASSERT_EQUAL(c, plain + (plain + 9) / 10 + CW_NS_PER_MS);
	/* a measured worst case above the model wins for its block size */
	m.margin_ppm = 0;
	m.margin_ns = 0;
	m.n_bsizes = 1;
	m.bsize[0] = (struct cw_model_bsize){ .bytes = MiB, .worst_ns = plain * 2 };
	CU_ASSERT_FATAL(cw_model_service_ns(&m, 0, 0, MiB, &c) == 0);
	CU_ASSERT_EQUAL(c, plain * 2);
	/* bad requests */
	CU_ASSERT_EQUAL(cw_model_service_ns(&m, 0, 0, 0, &c), -EINVAL);
	CU_ASSERT_EQUAL(cw_model_service_ns(&m, 10, 10, 1, &c), -EINVAL);
	CU_ASSERT_EQUAL(cw_model_service_ns(&m, 0, m.capacity_bytes + 1, 1, &c), -EINVAL);
}

/* Any access within a range takes no longer than the range's C. */
static void test_access_within_worst_case(void)
{
	const char *const *names = cw_model_preset_names();
	unsigned rng = 7;

	for (unsigned i = 0; names[i]; i++) {
		struct cw_model m;

		CU_ASSERT_FATAL(cw_model_preset(names[i], &m) == 0);
		for (int k = 0; k < 2000; k++) {
			uint64_t lo, hi, off, head, bytes;
			int64_t a, c;

			rng = rng * 1103515245 + 12345;
			lo = m.capacity_bytes / 1000 * (rng % 900);
			hi = lo + m.capacity_bytes / 1000 * (1 + (rng >> 8) % 100);
			bytes = 512 + (rng >> 4) % (4 * MiB);
			if (bytes > hi - lo)
				bytes = hi - lo;
			off = lo + ((uint64_t)rng * 2654435761u) % (hi - lo - bytes + 1);
			head = ((uint64_t)rng * 40503u) % m.capacity_bytes;
			CU_ASSERT_FATAL(cw_model_access_ns(&m, head, off, bytes, rng % 1000001, &a) == 0);
			CU_ASSERT_FATAL(cw_model_service_ns(&m, lo, hi, bytes, &c) == 0);
			CU_ASSERT(a > 0 && a <= c);
		}
	}
	{
		struct cw_model m;
		int64_t a, b;

		CU_ASSERT_FATAL(cw_model_preset("hdd7200", &m) == 0);
		/* farther seeks and longer rotational waits cost more */
		CU_ASSERT(cw_model_access_ns(&m, 0, 10 * MiB, MiB, 0, &a) == 0);
		CU_ASSERT(cw_model_access_ns(&m, 0, m.capacity_bytes / 2, MiB, 0, &b) == 0);
		CU_ASSERT(b > a);
		CU_ASSERT(cw_model_access_ns(&m, 0, 10 * MiB, MiB, 1000000, &b) == 0);
		CU_ASSERT_EQUAL(b - a, m.rotation_ns);
		CU_ASSERT_EQUAL(cw_model_access_ns(&m, 0, m.capacity_bytes - 1, 2, 0, &a), -EINVAL);
		CU_ASSERT_EQUAL(cw_model_access_ns(&m, 0, 0, MiB, 1000001, &a), -EINVAL);
	}
}

static void test_text_roundtrip(void)
{
	const char *const *names = cw_model_preset_names();
	char buf[4096];

	for (unsigned i = 0; names[i]; i++) {
		struct cw_model m, back;
		int len;

		CU_ASSERT_FATAL(cw_model_preset(names[i], &m) == 0);
		m.margin_ppm = 50000 + i;
		m.margin_ns = 12345;
		m.n_bsizes = 2;
		m.bsize[0] = (struct cw_model_bsize){ 65536, 9000000 };
		m.bsize[1] = (struct cw_model_bsize){ MiB, 130000000 };
		len = cw_model_format(&m, buf, sizeof(buf));
		CU_ASSERT_FATAL(len > 0 && (size_t)len < sizeof(buf));
		CU_ASSERT_EQUAL((size_t)len, strlen(buf));
		/* snprintf semantics: the length needed, whatever the buffer */
		CU_ASSERT_EQUAL(cw_model_format(&m, NULL, 0), len);
		CU_ASSERT_EQUAL(cw_model_format(&m, buf + 2000, 10), len);
		CU_ASSERT_EQUAL(strlen(buf + 2000), 9);
		CU_ASSERT_FATAL(cw_model_parse(buf, &back) == 0);
		CU_ASSERT(memcmp(&m, &back, sizeof(m)) == 0);
	}
}

static void test_text_refusals(void)
{
	struct cw_model m, keep;
	char good[4096], bad[4200];
	static const char *const broken[] = {
		"",
		"cwmodel2 name=x",
		"cwmodel1 name=x tier=hdd cap=100 rot=0 ovh=0 seek=0:0",		/* no zones */
		"cwmodel1 name=x tier=hdd cap=100 rot=0 ovh=0 seek=0:0 zones=50:10",	/* short zones */
		"cwmodel1 name=x tier=hdd cap=100 rot=0 ovh=0 seek=5:0 zones=100:10",	/* seek from 5 */
		"cwmodel1 name=x tier=hdd cap=100 rot=0 ovh=0 seek=0:9,10:8 zones=100:10", /* falling */
		"cwmodel1 name=x tier=tape cap=100 rot=0 ovh=0 seek=0:0 zones=100:10",
		"cwmodel1 name=x tier=hdd cap=100 rot=-1 ovh=0 seek=0:0 zones=100:10",
		"cwmodel1 name=x tier=hdd cap=100 rot=0 ovh=0 seek=0:0 zones=100:10 cap=100",
		"cwmodel1 name=x tier=hdd cap=100 rot=0 ovh=0 seek=0:0 zones=100:10 color=red",
		"cwmodel1 name=x tier=hdd cap=100 rot=0 ovh=0 seek=0:0 zones=100:10x",
		"cwmodel1 name=x/y tier=hdd cap=100 rot=0 ovh=0 seek=0:0 zones=100:10",
		"cwmodel1 name=x tier=hdd cap=99999999999999999999 rot=0 ovh=0 seek=0:0 zones=100:10",
	};

	CU_ASSERT_FATAL(cw_model_preset("hdd7200", &keep) == 0);
	m = keep;
	for (size_t i = 0; i < CW_ARRAY_SIZE(broken); i++) {
		CU_ASSERT_EQUAL(cw_model_parse(broken[i], &m), -EINVAL);
		CU_ASSERT(memcmp(&m, &keep, sizeof(m)) == 0);	/* untouched */
	}
	CU_ASSERT_EQUAL(cw_model_parse("cwmodel1 name=x tier=hdd cap=100 rot=0 ovh=0 seek=0:0 zones=100:10",
				       &m), 0);
	CU_ASSERT_EQUAL(m.capacity_bytes, 100);
	/* every truncation of a good string is refused or still valid */
	CU_ASSERT_FATAL(cw_model_format(&keep, good, sizeof(good)) > 0);
	for (size_t l = 0; l < strlen(good); l++) {
		memcpy(bad, good, l);
		bad[l] = '\0';
		if (cw_model_parse(bad, &m) == 0)
			CU_ASSERT_EQUAL(cw_model_validate(&m), 0);
	}
	keep.n_seek = 0;
	CU_ASSERT_EQUAL(cw_model_format(&keep, good, sizeof(good)), -EINVAL);
}

/* An image's tail percentile: kept in the text only when set, in range. */
static void test_text_tail(void)
{
	static const char base[] = "cwmodel1 name=r tier=rbd cap=1048576 rot=0 ovh=1000 mppm=0 mns=0 seek=0:0 "
				   "zones=1048576:100000000 bs=4096:2000000";
	struct cw_model m, back;
	char text[4096], buf[4200];

	CU_ASSERT_FATAL(cw_model_parse(base, &m) == 0);
	CU_ASSERT_EQUAL(m.tail_permille, 0);
	CU_ASSERT_FATAL(cw_model_format(&m, text, sizeof(text)) > 0);
	CU_ASSERT_STRING_EQUAL(text, base);	/* no tail= when it has none */
	m.tail_permille = 990;
	CU_ASSERT_FATAL(cw_model_format(&m, text, sizeof(text)) > 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, " tail=990"));
	CU_ASSERT_FATAL(cw_model_parse(text, &back) == 0);
	CU_ASSERT(memcmp(&m, &back, sizeof(m)) == 0);
	for (unsigned pm = 0; pm <= 1200; pm += 100) {
		int r;

		snprintf(buf, sizeof(buf), "%s tail=%u", base, pm);
		r = cw_model_parse(buf, &back);
		CU_ASSERT_EQUAL(r, pm >= 500 && pm <= 1000 ? 0 : -EINVAL);
	}
	snprintf(buf, sizeof(buf), "%s tail=999 tail=999", base);
	CU_ASSERT_EQUAL(cw_model_parse(buf, &back), -EINVAL);
	m.tail_permille = 1001;
	CU_ASSERT_EQUAL(cw_model_validate(&m), -EINVAL);
}

static void test_parse_percentile(void)
{
	static const struct {
		const char *s;
		int r;
		unsigned pm;
	} cases[] = {
		{ "99.9", 0, 999 }, { "99", 0, 990 }, { "100", 0, 1000 }, { "50", 0, 500 },
		{ "99.90", 0, 999 }, { "50.0", 0, 500 }, { "100.0", 0, 1000 },
		{ "99.95", -ERANGE, 0 }, { "49.9", -ERANGE, 0 }, { "100.1", -ERANGE, 0 },
		{ "1000", -ERANGE, 0 }, { "0", -ERANGE, 0 }, { "", -EINVAL, 0 },
		{ "99.", -EINVAL, 0 }, { ".9", -EINVAL, 0 }, { "99.9%", -EINVAL, 0 },
		{ "-99", -EINVAL, 0 }, { "99,9", -EINVAL, 0 }, { " 99", -EINVAL, 0 },
		{ "p99", -EINVAL, 0 }, { "1e2", -EINVAL, 0 },
	};

	for (size_t i = 0; i < CW_ARRAY_SIZE(cases); i++) {
		unsigned pm = 12345;
		int r = cw_calib_parse_percentile(cases[i].s, &pm);

		CU_ASSERT_EQUAL(r, cases[i].r);
		CU_ASSERT_EQUAL(pm, r == 0 ? cases[i].pm : 12345);	/* untouched on error */
		if (r != cases[i].r)
			fprintf(stderr, "percentile \"%s\": %d, expected %d\n", cases[i].s, r,
				cases[i].r);
	}
	CU_ASSERT_EQUAL(cw_calib_parse_percentile(NULL, NULL), -EINVAL);
}

/* ---- calibration on a real file --------------------------------------- */

static char dir[256];
static char path[300];

static int calib_setup(void)
{
	const char *tmp = getenv("TMPDIR");
	int fd;
	char *blk;

	snprintf(dir, sizeof(dir), "%s/cwmodel.XXXXXX", tmp && *tmp ? tmp : "/var/tmp");
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/disk.img", dir);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	blk = malloc(MiB);
	if (fd < 0 || !blk)
		return -1;
	for (size_t i = 0; i < MiB; i++)
		blk[i] = (char)(i * 131);
	for (int k = 0; k < 24; k++)
		if (write(fd, blk, MiB) != (ssize_t)MiB)
			return -1;
	free(blk);
	return close(fd);
}

static int calib_teardown(void)
{
	unlink(path);
	return rmdir(dir);
}

struct progress {
	unsigned calls, last_done, total, stop_at;
	bool ordered;
	char phases[4];
};

static int on_progress(const char *phase, unsigned done, unsigned total, void *userdata)
{
	struct progress *p = userdata;

	if (done <= p->last_done)
		p->ordered = false;
	p->last_done = done;
	p->total = total;
	p->calls++;
	if (!strchr(p->phases, phase[0]) && strlen(p->phases) < 3)
		p->phases[strlen(p->phases)] = phase[0];
	return p->stop_at && p->calls == p->stop_at;
}

static void calib_opts(struct cw_calib_opts *o, enum cw_io_kind kind)
{
	static const uint64_t sizes[] = { 256 << 10, 64 << 10, 64 << 10 };

	cw_calib_opts_init(o);
	o->engine = kind;
	o->span_bytes = 16 * MiB;
	o->seek_distances = 6;
	o->zones = 3;
	o->zone_read_bytes = 2 * MiB;
	o->block_sizes = sizes;
	o->n_block_sizes = 3;
	o->repeats = 5;
	o->percentile = 90;
	o->margin_ppm = 1000;
	o->name = "file-disk";
}

static void calibrate_with(enum cw_io_kind kind)
{
	struct cw_calib_opts o;
	struct cw_model m;
	struct progress p = { .ordered = true };
	int64_t c;
	char text[4096];
	struct cw_model back;
	int e;

	calib_opts(&o, kind);
	e = cw_model_calibrate(path, &o, on_progress, &p, &m);
	if (e == -ENOSYS || e == -EPERM) {
		printf("(engine %s unavailable here: %d) ", cw_io_kind_name(kind), e);
		return;
	}
	CU_ASSERT_EQUAL_FATAL(e, 0);
	CU_ASSERT_EQUAL(cw_model_validate(&m), 0);
	CU_ASSERT_STRING_EQUAL(m.name, "file-disk");
	CU_ASSERT_EQUAL(m.capacity_bytes, 24 * MiB);
	CU_ASSERT_EQUAL(m.margin_ppm, 1000);
	/* a seek curve: from distance 0, ascending, positive, monotone */
	CU_ASSERT(m.n_seek >= 2);
	CU_ASSERT_EQUAL(m.seek[0].distance_bytes, 0);
	for (unsigned i = 0; i < m.n_seek; i++) {
		CU_ASSERT(m.seek[i].time_ns > 0);
		if (i)
			CU_ASSERT(m.seek[i].time_ns >= m.seek[i - 1].time_ns &&
				  m.seek[i].distance_bytes > m.seek[i - 1].distance_bytes);
	}
	CU_ASSERT(m.seek[m.n_seek - 1].distance_bytes <= 16 * MiB);
	/* zones cover the whole file, rates positive */
	CU_ASSERT_EQUAL(m.n_zones, 3);
	CU_ASSERT_EQUAL(m.zone[2].end_bytes, 24 * MiB);
	for (unsigned i = 0; i < m.n_zones; i++)
		CU_ASSERT(m.zone[i].rate_bps > 0);
	/* block sizes: sorted, deduplicated, larger not faster at the 90th
	 * percentile is not promised on a cached file, but positive */
	CU_ASSERT_EQUAL(m.n_bsizes, 2);
	CU_ASSERT_EQUAL(m.bsize[0].bytes, 64 << 10);
	CU_ASSERT_EQUAL(m.bsize[1].bytes, 256 << 10);
	CU_ASSERT(m.bsize[0].worst_ns > 0 && m.bsize[1].worst_ns > 0);
	/* usable: a service time at least the measured worst case */
	CU_ASSERT_FATAL(cw_model_service_ns(&m, 0, 0, 256 << 10, &c) == 0);
	CU_ASSERT(c >= m.bsize[1].worst_ns);
	/* progress: every step once, in order, all three phases */
	CU_ASSERT(p.ordered);
	CU_ASSERT_EQUAL(p.total, 6 + 3 + 3);
	CU_ASSERT_EQUAL(p.last_done, p.total);
	CU_ASSERT_STRING_EQUAL(p.phases, "szb");
	/* and it survives its text form */
	CU_ASSERT_FATAL(cw_model_format(&m, text, sizeof(text)) > 0);
	CU_ASSERT_FATAL(cw_model_parse(text, &back) == 0);
	CU_ASSERT(memcmp(&m, &back, sizeof(m)) == 0);
}

static void test_calibrate_uring(void)
{
	calibrate_with(CW_IO_URING);
}

static void test_calibrate_aio(void)
{
	calibrate_with(CW_IO_AIO);
}

static void test_calibrate_errors(void)
{
	struct cw_calib_opts o;
	struct cw_model m, keep;
	struct progress p = { .stop_at = 3 };
	char missing[320];

	CU_ASSERT_FATAL(cw_model_preset("ssd", &keep) == 0);
	m = keep;
	calib_opts(&o, CW_IO_AIO);
	CU_ASSERT_EQUAL(cw_model_calibrate(path, &o, on_progress, &p, &m), -ECANCELED);
	CU_ASSERT_EQUAL(p.calls, 3);
	snprintf(missing, sizeof(missing), "%s/none", dir);
	CU_ASSERT_EQUAL(cw_model_calibrate(missing, &o, NULL, NULL, &m), -ENOENT);
	o.percentile = 10;
	CU_ASSERT_EQUAL(cw_model_calibrate(path, &o, NULL, NULL, &m), -EINVAL);
	calib_opts(&o, CW_IO_AIO);
	o.name = "bad name";
	CU_ASSERT_EQUAL(cw_model_calibrate(path, &o, NULL, NULL, &m), -EINVAL);
	calib_opts(&o, CW_IO_AIO);
	o.size = 8;
	CU_ASSERT_EQUAL(cw_model_calibrate(path, &o, NULL, NULL, &m), -EINVAL);
	CU_ASSERT(memcmp(&m, &keep, sizeof(m)) == 0);
}

/* On what and with which numbers a calibration means nothing: said in
 * words, and nothing said of a written file with a disk's numbers. */
static void test_calibrate_check(void)
{
	struct cw_model m;
	struct statfs fs;
	char why[1024], sparse[320], shm[64];
	bool mem = statfs(dir, &fs) == 0 && (uint32_t)fs.f_type == 0x01021994;
	int fd;

	CU_ASSERT_FATAL(cw_model_preset("hdd7200", &m) == 0);
	if (!mem) {
		CU_ASSERT_EQUAL(cw_calib_check(path, &m, why, sizeof(why)), 0);
		CU_ASSERT_STRING_EQUAL(why, "");
	}
	/* A cache that answered: 25 GB/s is no HDD (nor is it an SSD at 20). */
	m.zone[0].rate_bps = UINT64_C(25) * 1000 * 1000 * 1000;
	CU_ASSERT_EQUAL(cw_calib_check(path, &m, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "a measured rate of 25GB/s is beyond any HDD (at most "
					 "about 1GB/s)"));
	/* just above the most: not "1GB/s is beyond ... 1GB/s" */
	m.zone[0].rate_bps = UINT64_C(1040) * 1000 * 1000;
	CU_ASSERT_EQUAL(cw_calib_check(path, &m, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "a measured rate of 1040MB/s is beyond any HDD (at "
					 "most about 1GB/s)"));
	m.zone[0].rate_bps = UINT64_C(25) * 1000 * 1000 * 1000;
	m.tier = CW_TIER_SSD;
	CU_ASSERT_EQUAL(cw_calib_check(path, &m, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "beyond any SSD"));
	m.zone[0].rate_bps = UINT64_C(3) * 1000 * 1000 * 1000;	/* an NVMe SSD */
	if (!mem)
		CU_ASSERT_EQUAL(cw_calib_check(path, &m, why, sizeof(why)), 0);

	/* A sparse file, with a cache's rate too: both said. */
	snprintf(sparse, sizeof(sparse), "%s/sparse.img", dir);
	fd = open(sparse, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	CU_ASSERT_FATAL(fd >= 0 && ftruncate(fd, 64 * MiB) == 0);
	close(fd);
	m.zone[0].rate_bps = UINT64_C(20) * 1000 * 1000 * 1000;
	CU_ASSERT_EQUAL(cw_calib_check(sparse, &m, why, sizeof(why)), 1);
	if (!mem)
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "the disk is a sparse file"));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "; a measured rate of 20GB/s"));
	/* A short buffer is cut, never overrun. */
	CU_ASSERT_EQUAL(cw_calib_check(sparse, &m, why, 8), 1);
	CU_ASSERT_EQUAL(strlen(why), 7);
	unlink(sparse);

	/* tmpfs: whatever the numbers. */
	if (statfs("/dev/shm", &fs) == 0 && (uint32_t)fs.f_type == 0x01021994) {
		snprintf(shm, sizeof(shm), "/dev/shm/cwmodel-%d", (int)getpid());
		fd = open(shm, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
		CU_ASSERT_FATAL(fd >= 0 && write(fd, "x", 1) == 1);
		close(fd);
		CU_ASSERT_EQUAL(cw_calib_check(shm, NULL, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "a file on a memory file system (tmpfs or ramfs)"));
		unlink(shm);
	}
	/* A device node on devtmpfs (which calls itself tmpfs) is no file
	 * in memory. */
	if (access("/dev/null", F_OK) == 0) {
		CU_ASSERT_EQUAL(cw_calib_check("/dev/null", NULL, why, sizeof(why)), 0);
		CU_ASSERT_STRING_EQUAL(why, "");
	}
	snprintf(sparse, sizeof(sparse), "%s/none", dir);
	CU_ASSERT_EQUAL(cw_calib_check(sparse, NULL, why, sizeof(why)), -ENOENT);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("model", NULL, NULL);
	CU_pSuite c = cwtest_suite("calibration", calib_setup, calib_teardown);

	cwtest_add(s, "presets", test_presets);
	cwtest_add(s, "service time", test_service_time);
	cwtest_add(s, "access within the worst case", test_access_within_worst_case);
	cwtest_add(s, "text round trip", test_text_roundtrip);
	cwtest_add(s, "text refusals", test_text_refusals);
	cwtest_add(s, "text tail", test_text_tail);
	cwtest_add(s, "percentile", test_parse_percentile);
	cwtest_add(c, "calibrate a file (io_uring)", test_calibrate_uring);
	cwtest_add(c, "calibrate a file (libaio)", test_calibrate_aio);
	cwtest_add(c, "calibration errors", test_calibrate_errors);
	cwtest_add(c, "what a calibration cannot mean", test_calibrate_check);
	return cwtest_run();
}
