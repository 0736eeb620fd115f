/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Measuring the host model's costs (clockwise/admit.h, cw_host_measure).
 *
 * What a real-time request costs in CPU on the daemon's path is, per
 * byte, the copies of its bytes (the engine's read into the buffer, the
 * reply's write onto the socket) and, per request, the system calls that
 * carry it and the hand-offs between the threads on its path (the reader
 * books it and wakes the dispatcher, the completion wakes the writer).
 * The measurement does the same work with the same kernel: it reads a
 * block of a memory file (a tmpfs read, as the engines do on a file in
 * /dev/shm), writes it into a pipe and reads it out (the socket's copy in,
 * and the client's copy out, which on a host serving local players runs
 * on the same CPUs), and it wakes a second thread and waits for it
 * (eventfd), a round trip of two hand-offs.  Costs are the threads' CPU
 * time, not the wall clock, so a busy host does not inflate them by its
 * other work; each is the median of several trials, and the per-byte cost
 * is the slope between a small and a large block, so fixed costs do not
 * leak into it.
 *
 * The bytes come from memory, not from a cache, as in the daemon: there
 * every block of every stream is another part of a disk file, copied into
 * one of many slot buffers, and at hundreds of MB/s nothing of it is in a
 * cache when it is next touched.  Measured cache-hot (one block, two
 * buffers) the three copies of a byte cost 229-233 ps on a 2-core EPYC
 * host (32 MiB of last-level cache) whose dispatchers then spent 350-460
 * ps a byte on their one copy from tmpfs (13-23 streams of 70 MB/s); so
 * the blocks are taken in turn from a file twice the size of that cache
 * into buffers half its size (96 MiB for half a second at start), which
 * gives 450-530 ps.  It still counts less than a host at work spends: the
 * other CPUs copy at the same time, and the memory is shared.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <clockwise/admit.h>

#include "common/cleanup.h"
#include "common/util.h"

#define TRIALS 5
#define SMALL_BYTES 512
#define LARGE_BYTES (256u << 10)
#define FILE_BYTES (64u << 20)	/* twice a last-level cache of 32 MiB */
#define BUF_BYTES (16u << 20)	/* each of the two buffers */
#define SMALL_ROUNDS 2000
#define LARGE_ROUNDS 64	/* a quarter of the file a trial */
#define HANDOFFS 2000

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static int64_t median(int64_t *v)
{
	qsort(v, TRIALS, sizeof(*v), cmp64);
	return v[TRIALS / 2];
}

static int full_read(int fd, char *buf, size_t n)
{
	while (n) {
		ssize_t k = read(fd, buf, n);

		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		buf += k;
		n -= (size_t)k;
	}
	return 0;
}

/* CPU time of rounds requests of n bytes through file and pipe, each
 * from the next part of the file into the next part of the buffers. */
static int copy_ns(int file, const int pfd[2], char *a, char *b, size_t n, unsigned first,
		   unsigned rounds, int64_t *ret)
{
	int64_t t0 = cw_clock_ns(CLOCK_THREAD_CPUTIME_ID);

	for (unsigned i = first; i < first + rounds; i++) {
		size_t at = (size_t)i * n % BUF_BYTES;
		int r;

		if (pread(file, a + at, n, (off_t)((uint64_t)i * n % FILE_BYTES)) != (ssize_t)n)
			return -EIO;
		if (write(pfd[1], a + at, n) != (ssize_t)n)
			return -EIO;
		r = full_read(pfd[0], b + at, n);
		if (r < 0)
			return r;
	}
	*ret = cw_clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
	return 0;
}

struct ping {
	int to, back;
	int64_t cpu_ns;
};

static void *pong(void *arg)
{
	struct ping *p = arg;
	int64_t t0 = cw_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	uint64_t v;

	for (unsigned i = 0; i < HANDOFFS; i++) {
		if (read(p->to, &v, sizeof(v)) != sizeof(v) ||
		    write(p->back, &v, sizeof(v)) != sizeof(v))
			break;
	}
	p->cpu_ns = cw_clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
	return NULL;
}

/* CPU time of both threads for one round trip of hand-offs. */
static int handoff_ns(int64_t *ret)
{
	struct ping p = { eventfd(0, EFD_CLOEXEC), eventfd(0, EFD_CLOEXEC), 0 };
	pthread_t t;
	int64_t t0;
	uint64_t v = 1;
	int r = 0;

	if (p.to < 0 || p.back < 0) {
		r = -errno;
		goto out;
	}
	r = -pthread_create(&t, NULL, pong, &p);
	if (r < 0)
		goto out;
	t0 = cw_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	for (unsigned i = 0; i < HANDOFFS && r == 0; i++)
		if (write(p.to, &v, sizeof(v)) != sizeof(v) ||
		    read(p.back, &v, sizeof(v)) != sizeof(v))
			r = -EIO;
	t0 = cw_clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
	if (r < 0) {	/* let the other thread go */
		ssize_t n = write(p.to, &v, sizeof(v));

		(void)n;	/* a cast alone does not quiet _FORTIFY_SOURCE */
	}
	pthread_join(t, NULL);
	*ret = (t0 + p.cpu_ns) / HANDOFFS;
out:
	if (p.to >= 0)
		close(p.to);
	if (p.back >= 0)
		close(p.back);
	return r;
}

int cw_host_measure(int64_t *ret_request_ns, uint64_t *ret_byte_ps)
{
	int64_t small[TRIALS], large[TRIALS], hand[TRIALS];
	_cleanup_close_ int file = memfd_create("cw-host", MFD_CLOEXEC);
	int pfd[2] = { -1, -1 };
	char *a = NULL, *b = NULL;
	size_t big = LARGE_BYTES;
	int64_t s, l, perbyte;
	int r = 0;

	if (file < 0)
		return -errno;
	if (ftruncate(file, FILE_BYTES) < 0 || pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	/* the whole block in the pipe at once, or as much as it takes */
	if (fcntl(pfd[1], F_SETPIPE_SZ, LARGE_BYTES) < 0) {
		int sz = fcntl(pfd[1], F_GETPIPE_SZ);

		big = sz > 0 ? (size_t)sz : 4096;
	}
	a = malloc(BUF_BYTES);
	b = malloc(BUF_BYTES);
	if (!a || !b) {
		r = -ENOMEM;
		goto out;
	}
	memset(a, 0x5a, BUF_BYTES);
	memset(b, 0xa5, BUF_BYTES);	/* no page fault in the trials */
	for (size_t at = 0; at < FILE_BYTES; at += BUF_BYTES)
		if (pwrite(file, a, BUF_BYTES, (off_t)at) != BUF_BYTES) {
			r = -EIO;
			goto out;
		}
	for (int i = 0; i < TRIALS && r == 0; i++) {
		/* each trial on the next part of the file and buffers */
		r = copy_ns(file, pfd, a, b, SMALL_BYTES, 0, SMALL_ROUNDS, &small[i]);
		if (r == 0)
			r = copy_ns(file, pfd, a, b, big, (unsigned)i * LARGE_ROUNDS, LARGE_ROUNDS,
				    &large[i]);
		if (r == 0)
			r = handoff_ns(&hand[i]);
		small[i] /= SMALL_ROUNDS;
		large[i] /= LARGE_ROUNDS;
	}
	if (r < 0)
		goto out;
	s = median(small);
	l = median(large);
	/* the slope between the sizes, in ps a byte, at least 1 ps */
	perbyte = l > s ? (l - s) * 1000 / (int64_t)(big - SMALL_BYTES) : 1;
	*ret_request_ns = CW_MAX(s + median(hand), (int64_t)1);
	*ret_byte_ps = (uint64_t)CW_MAX(perbyte, (int64_t)1);
out:
	free(a);
	free(b);
	close(pfd[0]);
	close(pfd[1]);
	return r;
}
