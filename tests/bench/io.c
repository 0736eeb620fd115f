/*
 * 4 KiB random reads at queue depth 32 on one file, through the io_uring
 * engine, the libaio engine, and plain synchronous pread (the baseline),
 * all in the same run on the same O_DIRECT descriptor.  Three rounds of
 * each, interleaved, median reported, because the machine is shared.
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
#include <unistd.h>

#include <clockwise/io.h>

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

static double median3(double *v)
{
	double a = v[0], b = v[1], c = v[2];

	if ((a <= b && b <= c) || (c <= b && b <= a))
		return b;
	if ((b <= a && a <= c) || (c <= a && a <= b))
		return a;
	return c;
}

int main(void)
{
	const char *dir = getenv("CW_BENCH_DIR");
	const char *mb = getenv("CW_BENCH_MB"), *secs = getenv("CW_BENCH_SECONDS");
	char path[4096];
	double pr[ROUNDS], ur[ROUNDS], ar[ROUNDS], p, u, a;
	size_t chunk = 1 << 20;
	uint64_t size, off;
	char *bufs;
	bool direct = false;
	int fd, wfd;

	if (!dir || !*dir)
		dir = getenv("TMPDIR");
	if (!dir || !*dir)
		dir = "/tmp";
	size = (uint64_t)(mb ? atoi(mb) : 256) << 20;
	round_ns = (int64_t)((secs ? atof(secs) : 1.0) * 1e9);
	nblocks = size / BS;
	if (nblocks == 0 || round_ns <= 0) {
		fprintf(stderr, "bad CW_BENCH_MB or CW_BENCH_SECONDS\n");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/cw-bench-io.XXXXXX", dir);
	wfd = mkstemp(path);
	if (wfd < 0) {
		perror(path);
		return 1;
	}
	/* Real data everywhere: reads of holes never reach the device. */
	bufs = cw_io_alloc(chunk);
	memset(bufs, 0x5a, chunk);
	for (off = 0; off < size; off += chunk)
		if (pwrite(wfd, bufs, chunk, (off_t)off) != (ssize_t)chunk) {
			perror("write");
			unlink(path);
			return 1;
		}
	fsync(wfd);
	close(wfd);
	fd = cw_io_open(path, false, &direct);
	unlink(path);
	if (fd < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(-fd));
		return 1;
	}
	printf("4k random read, QD%u, %llu MiB file in %s, %s, %d rounds of %.1f s\n", QD,
	       (unsigned long long)(size >> 20), dir, direct ? "O_DIRECT" : "buffered", ROUNDS,
	       (double)round_ns / 1e9);
	for (int i = 0; i < ROUNDS; i++) {
		pr[i] = run_pread(fd, bufs);
		ur[i] = run_engine(CW_IO_URING, fd, bufs);
		ar[i] = run_engine(CW_IO_AIO, fd, bufs);
	}
	p = median3(pr);
	u = median3(ur);
	a = median3(ar);
	printf("pread (QD1)   %10.0f IOPS\n", p);
	printf("io_uring      %10.0f IOPS  %.2fx pread\n", u, u / p);
	printf("libaio        %10.0f IOPS  %.2fx pread\n", a, a / p);
	printf("uring_over_pread_4k_qd32=%.2f aio_over_pread_4k_qd32=%.2f\n", u / p, a / p);
	free(bufs);
	close(fd);
	return 0;
}
