/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * be-replay — replays a best-effort trace through NBD with its original
 * timing, for the live-vs-sim experiment (tests/bench/live-vs-sim).
 *
 *   be-replay [--start-at EPOCH] TRACE.csv URI0 [URI1 ...]
 *
 * TRACE is cwsim's CSV (time in seconds, partition, offset, size, R/W; a
 * first line naming the columns is skipped).  Partition p goes to URI p
 * (p modulo the number of URIs).  Each request is sent at start + its
 * time whether or not earlier ones came back (an open loop, as the trace
 * was recorded), and its latency is from that time to its reply: the
 * time cwsim reports for the same request.  start is when the handles are
 * connected, or the wall-clock time EPOCH (seconds since 1970), the
 * instant the players of the same run release their first blocks
 * (cwstream --start-at), as cwsim starts streams and trace together.  Prints one JSON line:
 * requests, errors, mean, p50, p99 and max latency in milliseconds, the
 * latest send behind its time, and the mean of partition 0 alone.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libnbd.h>

#define MAX_URIS 64

struct rec {
	int64_t t_ns;
	unsigned part;
	uint64_t off, bytes;
	bool write;
	int64_t done_ns;	/* 0 until the reply */
	int error;
	char *buf;
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static size_t n_done;

static int done_cb(void *user_data, int *error)
{
	struct rec *r = user_data;

	n_done++;
	r->done_ns = now_ns();
	r->error = *error;
	return 1;	/* retire the command */
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static int load(const char *path, struct rec **ret, size_t *ret_n)
{
	FILE *f = fopen(path, "re");
	char line[512];
	struct rec *v = NULL;
	size_t n = 0, cap = 0;
	unsigned long lineno = 0;

	if (!f) {
		fprintf(stderr, "be-replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		double t;
		unsigned part;
		unsigned long long off, bytes;
		char rw[8];

		lineno++;
		if (sscanf(line, "%lf,%u,%llu,%llu,%7s", &t, &part, &off, &bytes, rw) != 5) {
			if (lineno == 1)
				continue;	/* the column names */
			fprintf(stderr, "be-replay: %s:%lu: expected time,part,offset,size,rw\n",
				path, lineno);
			fclose(f);
			free(v);
			return -1;
		}
		if (n == cap) {
			struct rec *nv = realloc(v, (cap = cap ? cap * 2 : 1024) * sizeof(*v));

			if (!nv) {
				fclose(f);
				free(v);
				return -1;
			}
			v = nv;
		}
		v[n++] = (struct rec){ .t_ns = (int64_t)(t * 1e9 + 0.5), .part = part, .off = off,
				       .bytes = bytes, .write = rw[0] == 'W' || rw[0] == 'w' };
	}
	fclose(f);
	*ret = v;
	*ret_n = n;
	return 0;
}

int main(int argc, char **argv)
{
	struct nbd_handle *h[MAX_URIS];
	struct pollfd pfd[MAX_URIS];
	struct rec *v = NULL;
	size_t n = 0, next = 0, n0 = 0;
	unsigned nh;
	int64_t start, start_at = 0, behind = 0, *lat;
	double sum = 0, sum0 = 0;
	uint64_t errors = 0;

	if (argc > 2 && !strcmp(argv[1], "--start-at")) {
		char *end;
		double at = strtod(argv[2], &end);

		if (*end || !(at > 0)) {
			fprintf(stderr, "be-replay: --start-at \"%s\": expected seconds since 1970\n",
				argv[2]);
			return 2;
		}
		start_at = (int64_t)(at * 1e9);
		argc -= 2;
		argv += 2;
	}
	nh = (unsigned)argc - 2;
	if (argc < 3 || nh > MAX_URIS) {
		fprintf(stderr, "usage: be-replay [--start-at EPOCH] TRACE.csv URI0 [URI1 ...] "
			"(at most %d)\n", MAX_URIS);
		return 2;
	}
	if (load(argv[1], &v, &n) < 0)
		return 1;
	for (unsigned i = 0; i < nh; i++) {
		h[i] = nbd_create();
		if (!h[i] || nbd_connect_uri(h[i], argv[2 + i]) < 0) {
			fprintf(stderr, "be-replay: %s: %s\n", argv[2 + i], nbd_get_error());
			return 1;
		}
	}
	for (size_t i = 0; i < n; i++) {
		v[i].buf = calloc(1, v[i].bytes);
		if (!v[i].buf)
			return 1;
	}
	start = now_ns();
	if (start_at) {
		struct timespec wall;

		clock_gettime(CLOCK_REALTIME, &wall);
		start += start_at - ((int64_t)wall.tv_sec * 1000000000 + wall.tv_nsec);
		if (start < now_ns()) {
			fprintf(stderr, "be-replay: --start-at is already past\n");
			return 1;
		}
	}
	while (n_done < n) {
		int64_t now = now_ns(), wait_ms = 1000;

		/* send everything whose time has come */
		while (next < n && start + v[next].t_ns <= now) {
			struct rec *r = &v[next++];
			struct nbd_handle *hh = h[r->part % nh];
			nbd_completion_callback cb = { .callback = done_cb, .user_data = r };
			int64_t c = r->write ? nbd_aio_pwrite(hh, r->buf, r->bytes, r->off, cb, 0) :
					       nbd_aio_pread(hh, r->buf, r->bytes, r->off, cb, 0);

			if (c < 0) {
				fprintf(stderr, "be-replay: %s\n", nbd_get_error());
				return 1;
			}
			if (now - (start + r->t_ns) > behind)
				behind = now - (start + r->t_ns);
		}
		if (next < n)
			wait_ms = (start + v[next].t_ns - now) / 1000000;
		for (unsigned i = 0; i < nh; i++) {
			unsigned dir = nbd_aio_get_direction(h[i]);

			pfd[i] = (struct pollfd){ .fd = nbd_aio_get_fd(h[i]) };
			if (dir & LIBNBD_AIO_DIRECTION_READ)
				pfd[i].events |= POLLIN;
			if (dir & LIBNBD_AIO_DIRECTION_WRITE)
				pfd[i].events |= POLLOUT;
		}
		if (poll(pfd, nh, (int)(wait_ms < 0 ? 0 : wait_ms > 1000 ? 1000 : wait_ms)) < 0 &&
		    errno != EINTR)
			return 1;
		for (unsigned i = 0; i < nh; i++) {
			if ((pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
			    nbd_aio_notify_read(h[i]) < 0)
				return fprintf(stderr, "be-replay: %s\n", nbd_get_error()), 1;
			if ((pfd[i].revents & POLLOUT) && nbd_aio_notify_write(h[i]) < 0)
				return fprintf(stderr, "be-replay: %s\n", nbd_get_error()), 1;
		}
	}
	lat = calloc(n ? n : 1, sizeof(*lat));
	if (!lat)
		return 1;
	for (size_t i = 0; i < n; i++) {
		lat[i] = v[i].done_ns - (start + v[i].t_ns);
		sum += (double)lat[i];
		errors += v[i].error != 0;
		if (v[i].part == 0) {
			sum0 += (double)lat[i];
			n0++;
		}
		free(v[i].buf);
	}
	qsort(lat, n, sizeof(*lat), cmp_i64);
	printf("{\"requests\": %zu, \"errors\": %" PRIu64 ", \"be_mean_ms\": %.4f, \"be_p50_ms\": %.4f, "
	       "\"be_p99_ms\": %.4f, \"be_max_ms\": %.4f, \"be_part0_mean_ms\": %.4f, "
	       "\"send_behind_max_ms\": %.4f}\n", n, errors, n ? sum / (double)n / 1e6 : 0.0,
	       n ? (double)lat[n / 2] / 1e6 : 0.0,
	       n ? (double)lat[(n * 99 + 99) / 100 - 1] / 1e6 : 0.0,
	       n ? (double)lat[n - 1] / 1e6 : 0.0, n0 ? sum0 / (double)n0 / 1e6 : 0.0,
	       (double)behind / 1e6);
	for (unsigned i = 0; i < nh; i++) {
		nbd_shutdown(h[i], 0);
		nbd_close(h[i]);
	}
	free(lat);
	free(v);
	return errors ? 1 : 0;
}
