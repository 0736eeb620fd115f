/*
 * Benchmark: the slot reservation record, lock-free (LF) and wait-free
 * (WF) against the same record behind one mutex, with 1 to 64 threads —
 * the paper's figures 8 to 10 (RADIR section V) on this machine.
 *
 * Each thread books requests of 1 to 24 slots (uniform), half reads with a
 * slot deadline 60 slots after their start and half writes with 600, their
 * start a few slots after now.  Time is virtual: the threads themselves
 * move now forward by the slots they booked (every 16 requests, through
 * cw_slots_advance(), which recycles the slots it passes), so the cost of
 * recycling is part of every figure.  A run lasts a fixed time; N is what
 * the fastest thread did by then (the paper stops when the fastest thread
 * has done N: the same measure), and with K requests done by all T
 * threads:
 *   res/s   K / elapsed
 *   us/req  elapsed * T / K, the time one thread spends per request
 *   frn     K / (N * T), the paper's fairness (1: every thread did N)
 *   cpu_frn the same ratio over the threads' CPU times: what the kernel's
 *           scheduler allowed, the ceiling for frn on an oversubscribed
 *           machine
 *   res/cpu K over the CPU time the threads got: the cost of a request
 *           whatever share of the (shared) machine the run was given
 *   delay   mean slots between a request's start and its first slot
 * A last run books fixed 4-slot requests from one thread (lf_1t_per_s).
 *
 * The 64-thread runs last ten times as long (6 s by default; the whole
 * benchmark about 31 s, under the 50 s): with 64 threads on two
 * cores each thread gets a scheduler time slice (a few ms) only every
 * ~100 ms, and the kernel's CPU-time fairness among them (cpu_frn), the
 * ceiling for frn, improves with the number of slices each has had.  The
 * paper's 64 threads ran on 64 hardware threads and needed no such care.
 *
 * Usage: tests/bench/slots [seconds per run, default 0.6] [lf|wf|mutex threads]
 * With a mode and a thread count only that run is made (for profiling).
 */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/slots.h>

#define MAX_THREADS 64
#define ADVANCE_EVERY 8
/* Virtual time: now moves by this many slots per request made (mixed
 * sizes average 12.5 slots), so the record stays busy near now. */
#define SLOTS_PER_REQUEST 14
/* The 64-thread runs last this many times the others (see above). */
#define LONG_RUN 10

struct thread_stat {
	uint64_t done, booked, delay_sum;
	double cpu_s;			/* the thread's CPU time in the run */
} __attribute__((aligned(64)));

struct run {
	struct cw_slots *rec;
	struct cw_slots_domain *dom;
	int nthreads;
	uint32_t fixed_size;		/* 0: 1..24 */
	atomic_int ready;
	atomic_bool go, stop;
	uint32_t slots_per_request;
	_Atomic uint64_t requests __attribute__((aligned(64)));
	struct thread_stat st[MAX_THREADS];
};

struct targ {
	struct run *run;
	int id;
};

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Moves now to where the requests made so far put it. */
static void pace(struct run *r)
{
	uint64_t total = atomic_fetch_add_explicit(&r->requests, ADVANCE_EVERY,
						   memory_order_relaxed) + ADVANCE_EVERY;
	int64_t target = (int64_t)(total * r->slots_per_request);

	if (target > cw_slots_now(r->rec))
		cw_slots_advance(r->rec, target);
}

static void *worker(void *arg)
{
	struct targ *t = arg;
	struct run *r = t->run;
	struct thread_stat *st = &r->st[t->id];
	struct cw_slots_ctx *ctx;
	uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(t->id + 1);
	struct timespec c0, c1;

	if (cw_slots_ctx_new(r->dom, &ctx) < 0)
		abort();
	atomic_fetch_add(&r->ready, 1);
	while (!atomic_load(&r->go))
		sched_yield();
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		uint64_t x = xorshift(&seed);
		bool write = x & 1;
		struct cw_slots_req q = {
			.dir = write ? CW_SLOTS_WRITE : CW_SLOTS_READ,
			.shape = CW_SLOTS_SINGLE,
			.ndisks = 1,
			.disks = { r->rec },
			.size_slots = r->fixed_size ? r->fixed_size : 1 + (uint32_t)((x >> 8) % 24),
			.block = (x >> 16) % 64,
			.dependants = (uint32_t)((x >> 24) % 4),
		};
		struct cw_slots_booking b;

		q.start_slot = cw_slots_now(r->rec) + (int64_t)((x >> 32) % 16);
		q.deadline_slot = q.start_slot + (write ? 600 : 60);
		if (cw_slots_reserve(ctx, &q, &b) == 0) {
			st->booked++;
			st->delay_sum += (uint64_t)(b.first_slot - q.start_slot);
		}
		st->done++;
		if (st->done % ADVANCE_EVERY == 0)
			pace(r);
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	st->cpu_s = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) / 1e9;
	cw_slots_ctx_free(ctx);
	return NULL;
}

struct result {
	double per_s, per_cpu_s, us_per_req, frn, cpu_frn, delay, booked_frac;
	uint64_t min, max;
};

static int run_once(enum cw_slots_mode mode, int nthreads, uint32_t fixed, double secs,
		    struct result *res)
{
	struct cw_slots_domain_opts dopts = { .size = sizeof(dopts), .mode = mode,
					      .max_threads = MAX_THREADS + 1, .max_window = 640,
					      .max_slots = 32 };
	struct cw_slots_opts ro = { .size = sizeof(ro), .tier = CW_TIER_SSD };
	struct run *r = calloc(1, sizeof(*r));
	pthread_t th[MAX_THREADS];
	struct targ ta[MAX_THREADS];
	uint64_t k = 0, max = 0, min = UINT64_MAX, booked = 0, delay = 0;
	double cpu = 0, cpu_max = 0;
	int64_t t0, t1;
	int i;

	if (!r || cw_slots_domain_new(&dopts, &r->dom) < 0 || cw_slots_new(r->dom, &ro, &r->rec) < 0)
		return -1;
	r->nthreads = nthreads;
	r->fixed_size = fixed;
	r->slots_per_request = fixed ? fixed : SLOTS_PER_REQUEST;
	for (i = 0; i < nthreads; i++) {
		ta[i] = (struct targ){ r, i };
		if (pthread_create(&th[i], NULL, worker, &ta[i]) != 0)
			return -1;
	}
	while (atomic_load(&r->ready) < nthreads)
		sched_yield();
	t0 = cw_now_ns();
	atomic_store(&r->go, true);
	while ((double)(cw_now_ns() - t0) < secs * 1e9) {
		struct timespec ts = { 0, 2 * 1000 * 1000 };

		nanosleep(&ts, NULL);
	}
	atomic_store(&r->stop, true);
	t1 = cw_now_ns();
	for (i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < nthreads; i++) {
		k += r->st[i].done;
		booked += r->st[i].booked;
		delay += r->st[i].delay_sum;
		if (r->st[i].done > max)
			max = r->st[i].done;
		if (r->st[i].done < min)
			min = r->st[i].done;
		cpu += r->st[i].cpu_s;
		if (r->st[i].cpu_s > cpu_max)
			cpu_max = r->st[i].cpu_s;
	}
	res->per_s = (double)k / ((double)(t1 - t0) / 1e9);
	res->per_cpu_s = cpu > 0 ? (double)k / cpu : 0;
	res->us_per_req = (double)(t1 - t0) / 1e3 * nthreads / (double)k;
	res->frn = (double)k / ((double)max * nthreads);
	/* The same measure over CPU time: how fair the scheduler was. */
	res->cpu_frn = cpu_max > 0 ? cpu / (cpu_max * nthreads) : 1;
	res->delay = booked ? (double)delay / (double)booked : 0;
	res->booked_frac = (double)booked / (double)k;
	res->min = min;
	res->max = max;
	if (cw_slots_valid(r->rec) < 0) {
		fprintf(stderr, "record invalid after the run\n");
		return -1;
	}
	cw_slots_free(r->rec);
	cw_slots_domain_free(r->dom);
	free(r);
	return 0;
}

int main(int argc, char **argv)
{
	static const int threads[] = { 1, 2, 4, 8, 16, 32, 64 };
	static const enum cw_slots_mode modes[] = { CW_SLOTS_LOCKFREE, CW_SLOTS_WAITFREE, CW_SLOTS_MUTEX };
	double secs = argc > 1 ? atof(argv[1]) : 0.6;
	struct result res[3][7], one;
	size_t m, i;

	if (secs <= 0 || secs > 10 || argc == 3 || argc > 4) {
		fprintf(stderr, "usage: %s [seconds per run, 0-10] [lf|wf|mutex threads]\n", argv[0]);
		return 2;
	}
	if (argc == 4) {
		int nt = atoi(argv[3]);

		for (m = 0; m < 3 && strcmp(argv[2], cw_slots_mode_name(modes[m])) != 0; m++)
			;
		if (m == 3 || nt < 1 || nt > MAX_THREADS || run_once(modes[m], nt, 0, secs, &one) < 0)
			return 2;
		printf("%s %d threads: %.0f res/s frn %.3f cpu_frn %.3f res/cpu %.0f\n", argv[2], nt,
		       one.per_s, one.frn, one.cpu_frn, one.per_cpu_s);
		return 0;
	}
	printf("%-6s %7s %12s %10s %6s %8s %7s %9s %9s %7s %10s\n", "mode", "threads", "res/s",
	       "us/req", "frn", "delay", "booked", "min/thr", "max/thr", "cpu_frn", "res/cpu");
	for (m = 0; m < 3; m++)
		for (i = 0; i < 7; i++) {
			double len = threads[i] == 64 ? LONG_RUN * secs : secs;

			if (run_once(modes[m], threads[i], 0, len, &res[m][i]) < 0)
				return 1;
			printf("%-6s %7d %12.0f %10.3f %6.3f %8.1f %6.1f%% %9llu %9llu %7.3f %10.0f\n",
			       cw_slots_mode_name(modes[m]), threads[i], res[m][i].per_s,
			       res[m][i].us_per_req, res[m][i].frn, res[m][i].delay,
			       100 * res[m][i].booked_frac, (unsigned long long)res[m][i].min,
			       (unsigned long long)res[m][i].max, res[m][i].cpu_frn,
			       res[m][i].per_cpu_s);
			fflush(stdout);
		}
	for (i = 0; i < 7; i++)
		printf("threads %2d: lf/mutex %.2f  wf/mutex %.2f  per CPU second: lf/mutex %.2f\n",
		       threads[i], res[0][i].per_s / res[2][i].per_s, res[1][i].per_s / res[2][i].per_s,
		       res[0][i].per_cpu_s / res[2][i].per_cpu_s);
	if (run_once(CW_SLOTS_LOCKFREE, 1, 4, secs, &one) < 0)
		return 1;
	printf("lf 1 thread, 4-slot requests: %.0f res/s\n", one.per_s);
	printf("lf_over_mutex_64t=%.2f wf_fairness_64t=%.3f lf_1t_per_s=%.0f\n",
	       res[0][6].per_s / res[2][6].per_s, res[1][6].frn, one.per_s);
	return 0;
}
