/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The host's stalls (stall-probe.h).  Each probe's ring is written by its
 * thread only and read by the control thread: a slot's two fields are
 * atomics, and a reader takes only the slots the head says are written
 * and not yet overwritten (one it reads as another is written over is at
 * worst a stall told as its neighbour's, never torn memory).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <clockwise/types.h>
#include "common/futex.h"
#include "common/util.h"
#include "daemon/path/stall-probe.h"
#include "daemon/thread-name.h"

#define RING 256		/* stalls kept per CPU */
#define CPUS_MAX 64

struct stall {
	atomic_int_fast64_t at_ns;	/* when it should have woken */
	atomic_int_fast64_t late_ns;
};

struct probe_cpu {
	struct stall_probe *p;
	int cpu;
	pthread_t thread;
	atomic_uint_fast64_t head;	/* stalls written */
	struct stall ring[RING];
	uint64_t seen;			/* worst_since's: read up to here */
};

struct stall_probe {
	int64_t period_ns;
	int prio;
	atomic_bool stop;
	atomic_bool armed;
	atomic_int seq;			/* moved on by arm and stop: the futex word */
	unsigned n;
	struct probe_cpu cpus[CPUS_MAX];
};

static void *probe_main(void *arg)
{
	struct probe_cpu *pc = arg;
	struct stall_probe *p = pc->p;
	int64_t period = p->period_ns, next = cw_now_ns() + period;

	while (!atomic_load_explicit(&p->stop, memory_order_relaxed)) {
		struct timespec ts = { .tv_sec = next / CW_NS_PER_S, .tv_nsec = next % CW_NS_PER_S };
		int64_t now, late;
		int seq = atomic_load_explicit(&p->seq, memory_order_acquire);

		/* disarmed: asleep until armed or stopped, then a period on */
		if (!atomic_load_explicit(&p->armed, memory_order_acquire)) {
			if (!atomic_load_explicit(&p->stop, memory_order_relaxed))
				cw_futex_wait(&p->seq, seq);
			next = cw_now_ns() + period;
			continue;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		now = cw_now_ns();
		late = now - next;
		if (late > STALL_PROBE_MIN_NS) {
			uint64_t h = atomic_load_explicit(&pc->head, memory_order_relaxed);
			struct stall *s = &pc->ring[h % RING];

			atomic_store_explicit(&s->at_ns, next, memory_order_relaxed);
			atomic_store_explicit(&s->late_ns, late, memory_order_relaxed);
			atomic_store_explicit(&pc->head, h + 1, memory_order_release);
		}
		next += period;
		if (next <= now)	/* the ticks it slept through are one stall */
			next = now + period;
	}
	return NULL;
}

int stall_probe_start(int64_t period_ns, int prio, uint64_t cpus, struct stall_probe **ret,
		      char *err, size_t errlen)
{
	struct stall_probe *p;
	cpu_set_t allowed;
	int r = 0;

	*ret = NULL;
	if (period_ns <= 0)
		return 0;
	if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0) {
		r = -errno;
		snprintf(err, errlen, "the process's CPUs: %s", strerror(-r));
		return r;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	p->period_ns = period_ns;
	p->prio = prio;
	for (int cpu = 0; cpu < CPU_SETSIZE && p->n < CPUS_MAX; cpu++) {
		struct probe_cpu *pc = &p->cpus[p->n];
		struct sched_param sp = { .sched_priority = prio };
		pthread_attr_t a;
		cpu_set_t one;

		if (!CPU_ISSET(cpu, &allowed) || (cpus && (cpu >= 64 || !(cpus >> cpu & 1))))
			continue;
		pc->p = p;
		pc->cpu = cpu;
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		pthread_attr_init(&a);
		pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED);
		pthread_attr_setschedpolicy(&a, SCHED_FIFO);
		pthread_attr_setschedparam(&a, &sp);
		pthread_attr_setaffinity_np(&a, sizeof(one), &one);
		r = -pthread_create(&pc->thread, &a, probe_main, pc);
		pthread_attr_destroy(&a);
		if (r < 0) {
			snprintf(err, errlen, "a probe on CPU %d at FIFO %d: %s", cpu, prio,
				 strerror(-r));
			stall_probe_stop(p);
			return r;
		}
		thread_name(pc->thread, "cw-probe/%d", cpu);
		p->n++;
	}
	*ret = p;
	return 0;
}

void stall_probe_stop(struct stall_probe *p)
{
	if (!p)
		return;
	atomic_store(&p->stop, true);
	atomic_fetch_add(&p->seq, 1);
	cw_futex_wake_all(&p->seq);
	for (unsigned i = 0; i < p->n; i++)
		pthread_join(p->cpus[i].thread, NULL);
	free(p);
}

void stall_probe_arm(struct stall_probe *p, bool on)
{
	if (!p || atomic_exchange(&p->armed, on) == on)
		return;
	atomic_fetch_add(&p->seq, 1);
	cw_futex_wake_all(&p->seq);
}

int stall_probe_priority(const struct stall_probe *p)
{
	return p ? p->prio : 0;
}

/* The slots of pc still in its ring, oldest first: [*ret_first, head). */
static uint64_t ring_span(const struct probe_cpu *pc, uint64_t *ret_first)
{
	uint64_t h = atomic_load_explicit(&pc->head, memory_order_acquire);

	*ret_first = h > RING ? h - RING : 0;
	return h;
}

unsigned stall_probe_during(const struct stall_probe *p, int64_t from_ns, int64_t to_ns,
			    int64_t min_ns, int64_t base_ns, char *buf, size_t len)
{
	unsigned n = 0;
	size_t at = 0;

	if (len)
		buf[0] = '\0';
	for (unsigned i = 0; p && i < p->n; i++) {
		const struct probe_cpu *pc = &p->cpus[i];
		int64_t best = 0, best_at = 0;
		uint64_t k, h = ring_span(pc, &k);

		for (; k < h; k++) {
			const struct stall *s = &pc->ring[k % RING];
			int64_t s_at = atomic_load_explicit(&s->at_ns, memory_order_relaxed);
			int64_t s_late = atomic_load_explicit(&s->late_ns, memory_order_relaxed);

			if (s_at < to_ns && s_at + s_late > from_ns && s_late > best) {
				best = s_late;
				best_at = s_at;
			}
		}
		if (best <= min_ns)
			continue;
		if (at < len) {
			int w = snprintf(buf + at, len - at, "%scpu %d for %.0f us from %.0f us",
					 n ? ", " : "", pc->cpu, (double)best / 1000.0,
					 (double)(best_at - base_ns) / 1000.0);

			at += w > 0 ? (size_t)w : 0;
		}
		n++;
	}
	return n;
}

int64_t stall_probe_worst_since(struct stall_probe *p, int *ret_cpu, uint64_t *ret_count)
{
	int64_t worst = 0;

	*ret_count = 0;
	*ret_cpu = -1;
	for (unsigned i = 0; p && i < p->n; i++) {
		struct probe_cpu *pc = &p->cpus[i];
		uint64_t k, h = ring_span(pc, &k);

		k = CW_MAX(k, pc->seen);
		for (; k < h; k++) {
			int64_t late = atomic_load_explicit(&pc->ring[k % RING].late_ns,
							    memory_order_relaxed);

			(*ret_count)++;
			if (late > worst) {
				worst = late;
				*ret_cpu = pc->cpu;
			}
		}
		pc->seen = h;
	}
	return worst;
}
