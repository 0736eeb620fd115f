/*
 * 4 KiB random reads at queue depth 32 on one file, through the io_uring
 * engine, the libaio engine, and plain synchronous pread (the baseline),
 * all in the same run on the same O_DIRECT descriptor.  Three rounds of
 * each, interleaved, median reported, because the machine is shared.
 * The same on a tmpfs file (/dev/shm) comes first, for the CPU cost per
 * I/O when nothing waits for a device; the key line is the disk's.
 *
 *   CW_BENCH_DIR      where the test file goes (default $TMPDIR or /tmp)
 *   CW_BENCH_MB       file size in MiB (default 256)
 *   CW_BENCH_SECONDS  length of one round (default 1)
 *
 * Last line: uring_over_pread_4k_qd32=<x> aio_over_pread_4k_qd32=<y>
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <clockwise/io.h>
#include "common/util.h"

#define BS 4096u
#define QD 32u
#define ROUNDS 3

static uint64_t nblocks;
static int64_t round_ns;

static uint64_t next_block(uint64_t *s)
{
	/* xorshift64: cheap, and the same sequence for every contender */
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s % nblocks;
}

static double run_pread(int fd, void *buf)
{
	uint64_t seed = 88172645463325252ull, n = 0;
	int64_t t0 = cw_now_ns(), t;

	do {
		for (int i = 0; i < 64; i++, n++)
			if (pread(fd, buf, BS, (off_t)(next_block(&seed) * BS)) != BS) {
				perror("pread");
				exit(1);
			}
		t = cw_now_ns();
	} while (t - t0 < round_ns);
	return (double)n * 1e9 / (double)(t - t0);
}

static double run_engine(enum cw_io_kind kind, int fd, char *bufs)
{
	struct cw_io_req reqs[QD], *batch[QD];
	struct cw_io_engine *e;
	uint64_t seed = 88172645463325252ull, n = 0;
	int64_t t0, t;
	unsigned i, nb;
	int r;

	r = cw_io_engine_new(kind, QD, &e);
	if (r < 0) {
		fprintf(stderr, "%s: %s\n", cw_io_kind_name(kind), strerror(-r));
		exit(1);
	}
	for (i = 0; i < QD; i++) {
		reqs[i] = (struct cw_io_req){ .fd = fd, .op = CW_IO_READ, .buf = bufs + i * BS,
					      .len = BS, .off = next_block(&seed) * BS };
		batch[i] = &reqs[i];
	}
	t0 = cw_now_ns();
	nb = QD;
	do {
		/* Refill what came back, in one batch, then wait for more. */
		for (i = 0; i < nb; i++)
			batch[i]->off = next_block(&seed) * BS;
		r = cw_io_submit(e, batch, nb);
		if (r != (int)nb) {
			fprintf(stderr, "submit: %d of %u\n", r, nb);
			exit(1);
		}
		r = cw_io_reap(e, 1, -1, batch, QD);
		if (r <= 0) {
			fprintf(stderr, "reap: %s\n", strerror(-r));
			exit(1);
		}
		nb = (unsigned)r;
		for (i = 0; i < nb; i++)
			if (batch[i]->res != BS) {
				fprintf(stderr, "read: %lld\n", (long long)batch[i]->res);
				exit(1);
			}
		n += nb;
		t = cw_now_ns();
	} while (t - t0 < round_ns);
	cw_io_engine_free(e);
	return (double)n * 1e9 / (double)(t - t0);
}

/* One contender's figures for a round: I/Os per second and CPU time per
 * I/O (the whole process's, so the kernel's share counts too). */
struct result {
	double iops, cpu_us;
};

static int64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * CW_NS_PER_S + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

enum { PREAD, URING, AIO, NCONT };
static const char *const cont_name[NCONT] = { "pread (QD1)", "io_uring", "libaio" };

/* Benchmarks a file of size bytes in dir; medians in ret (IOPS, CPU). */
static int bench_dir(const char *dir, uint64_t size, struct result ret[NCONT])
{
	char path[4096];
	double iops[NCONT][ROUNDS], cpu[NCONT][ROUNDS];
	size_t chunk = 1 << 20;
	uint64_t off;
	char *bufs;
	enum cw_io_kind best;
	bool direct = false;
	int fd, wfd;

	nblocks = size / BS;
	snprintf(path, sizeof(path), "%s/cw-bench-io.XXXXXX", dir);
	wfd = mkstemp(path);
	if (wfd < 0) {
		perror(path);
		return -1;
	}
	/* Real data everywhere: reads of holes never reach the device. */
	bufs = cw_io_alloc(chunk);
	memset(bufs, 0x5a, chunk);
	for (off = 0; off < size; off += chunk)
		if (pwrite(wfd, bufs, chunk, (off_t)off) != (ssize_t)chunk) {
			perror("write");
			unlink(path);
			return -1;
		}
	fsync(wfd);
	close(wfd);
	fd = cw_io_open(path, false, &direct);
	unlink(path);
	if (fd < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(-fd));
		return -1;
	}
	if (cw_io_kind_for_fd(fd, CW_IO_URING, &best) < 0)
		best = CW_IO_URING;
	printf("4k random read, QD%u, %llu MiB file in %s, %s, %d rounds of %.1f s "
	       "(cw_io_kind_for_fd: %s)\n", QD, (unsigned long long)(size >> 20), dir,
	       direct ? "O_DIRECT" : "buffered", ROUNDS, (double)round_ns / 1e9, cw_io_kind_name(best));
	for (int i = 0; i < ROUNDS; i++)
		for (int c = 0; c < NCONT; c++) {
			int64_t c0 = cpu_ns(), n;

			iops[c][i] = c == PREAD ? run_pread(fd, bufs) :
						  run_engine(c == URING ? CW_IO_URING : CW_IO_AIO, fd, bufs);
			n = (int64_t)(iops[c][i] * (double)round_ns / 1e9);
			cpu[c][i] = (double)(cpu_ns() - c0) / 1e3 / (double)(n ? n : 1);
		}
	for (int c = 0; c < NCONT; c++) {
		ret[c].iops = median(iops[c], ROUNDS);
		ret[c].cpu_us = median(cpu[c], ROUNDS);
		printf("  %-12s %10.0f IOPS  %5.2fx pread  %6.2f us CPU per I/O\n", cont_name[c],
		       ret[c].iops, ret[c].iops / ret[PREAD].iops, ret[c].cpu_us);
	}
	free(bufs);
	close(fd);
	return 0;
}

int main(void)
{
	const char *dir = getenv("CW_BENCH_DIR");
	const char *mb = getenv("CW_BENCH_MB"), *secs = getenv("CW_BENCH_SECONDS");
	struct result disk[NCONT], shm[NCONT];
	uint64_t size;

	if (!dir || !*dir)
		dir = getenv("TMPDIR");
	if (!dir || !*dir)
		dir = "/tmp";
	size = (uint64_t)(mb ? atoi(mb) : 256) << 20;
	round_ns = (int64_t)((secs ? atof(secs) : 1.0) * 1e9);
	if (size / BS == 0 || round_ns <= 0) {
		fprintf(stderr, "bad CW_BENCH_MB or CW_BENCH_SECONDS\n");
		return 1;
	}
	/* For reference, the engines' CPU cost where the data is in memory
	 * (tmpfs: what the NBD benchmarks back their exports with). */
	if (access("/dev/shm", W_OK) == 0 && bench_dir("/dev/shm", CW_MIN(size, 64u << 20), shm) < 0)
		return 1;
	if (bench_dir(dir, size, disk) < 0)
		return 1;
	printf("uring_over_pread_4k_qd32=%.2f aio_over_pread_4k_qd32=%.2f\n",
	       disk[URING].iops / disk[PREAD].iops, disk[AIO].iops / disk[PREAD].iops);
	return 0;
}
