/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Misses, explained: the class of a deadline miss from what the driver
 * saw of the late request, and the watch that tells when a disk's
 * requests keep overrunning the model that charged them.
 *
 * The proof in sched.c holds while every request ends within its charge
 * and every decision is taken when due; a miss therefore names the
 * assumption that broke.  The classes are tried in the order of the
 * evidence's strength: a reply sent late for a request done in time
 * (delivery); the request's own service, the dispatcher's CPU waits left
 * out, above its C (model); another request of its window over its
 * charge (overrun); on an emulated disk, its backing store falling behind
 * the emulated time (emulator: the host's, as a CPU wait is); a CPU wait
 * above the clock's noise (cpu).  What is left is a decision the proof
 * says cannot happen (sched): a bug.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include <clockwise/sched.h>
#include "common/util.h"

enum cw_sched_miss_class cw_sched_miss_classify(const struct cw_sched_miss *m)
{
	int64_t own = m->done_ns - m->start_ns - m->cpu_wait_service_ns - m->emu_lag_own_ns -
		      m->charged_ns;
	int64_t late = m->done_ns - m->deadline_ns;
	int64_t cpu = 0, most;
	enum cw_sched_miss_class c, by_most;

	if (m->done_ns <= m->deadline_ns && m->reply_ns > m->deadline_ns)
		return CW_MISS_DELIVERY;
	if (m->cpu_wait_window_ns > CW_MISS_CPU_TOLERANCE_NS ||
	    m->cpu_wait_reader_ns > CW_MISS_CPU_TOLERANCE_NS ||
	    m->cpu_wait_wake_ns > CW_MISS_CPU_TOLERANCE_NS)
		cpu = m->cpu_wait_window_ns + m->cpu_wait_reader_ns + m->cpu_wait_wake_ns;
	/* A cause that alone made it as late as it was explains it, tried in
	 * this order.  Its own excess first: served in its C, it would have
	 * been in time (a request started late that then took a few
	 * microseconds over its C was made late by something else). */
	if (own > 0 && own >= late)
		return CW_MISS_MODEL;
	c = m->other_overrun_rt ? CW_MISS_MODEL : CW_MISS_OVERRUN;	/* a stream's is the model's */
	if (m->other_overrun_ns > 0 && m->other_overrun_ns >= late)
		return c;
	if (m->emu_lag_ns > 0 && m->emu_lag_ns >= late)
		return CW_MISS_EMULATOR;
	if (cpu > 0 && cpu >= late)
		return CW_MISS_CPU;
	/* None alone: the largest of those seen (an overrun of 0.7 ms does
	 * not explain a miss by 30 ms that a reader's 30 ms do). */
	by_most = CW_MISS_SCHED;
	most = 0;
	if (m->other_overrun_ns > most) {
		by_most = c;
		most = m->other_overrun_ns;
	}
	if (m->emu_lag_ns > most) {
		by_most = CW_MISS_EMULATOR;
		most = m->emu_lag_ns;
	}
	if (cpu > most) {
		by_most = CW_MISS_CPU;
		most = cpu;
	}
	if (own > most)
		by_most = CW_MISS_MODEL;
	return by_most;
}

const char *cw_sched_miss_class_name(enum cw_sched_miss_class c)
{
	static const char *const names[CW_MISS_CLASSES] = { "model", "overrun", "cpu",
							    "delivery", "sched", "emulator" };

	return (unsigned)c < CW_MISS_CLASSES ? names[c] : NULL;
}

void cw_sched_overrun_watch_init(struct cw_sched_overrun_watch *w)
{
	memset(w, 0, sizeof(*w));
	w->window = 1000;
	w->tolerated_ppm = 10000;
	w->noise_ppm = 50000;
}

/* Keeps the largest ratios seen in the window, sorted up. */
static void keep_ratio(struct cw_sched_overrun_watch *w, double r)
{
	size_t cap = CW_ARRAY_SIZE(w->ratios), i;

	if (w->nratios == cap) {
		if (r <= w->ratios[0])
			return;
		memmove(w->ratios, w->ratios + 1, (cap - 1) * sizeof(double));
		w->nratios--;
	}
	for (i = w->nratios; i > 0 && w->ratios[i - 1] > r; i--)
		w->ratios[i] = w->ratios[i - 1];
	w->ratios[i] = r;
	w->nratios++;
}

int cw_sched_overrun_watch_add(struct cw_sched_overrun_watch *w, int64_t charged_ns,
			       int64_t actual_ns, double *ret_margin)
{
	uint64_t allowed;
	int verdict = 0;

	if (!w || charged_ns <= 0 || actual_ns < 0 || !w->window)
		return -EINVAL;
	w->n++;
	if ((double)actual_ns > (double)charged_ns * (1.0 + w->noise_ppm / 1e6)) {
		w->over++;
		keep_ratio(w, (double)actual_ns / (double)charged_ns);
	}
	if (w->n < w->window)
		return 0;
	allowed = (uint64_t)w->window * w->tolerated_ppm / 1000000;
	if (w->over > allowed) {
		/* Cover all but the tolerated overruns: the ratio of the
		 * (allowed + 1)-th largest, or the smallest kept. */
		size_t k = CW_MIN((size_t)allowed, (size_t)w->nratios - 1);

		if (ret_margin)
			*ret_margin = w->ratios[w->nratios - 1 - k];
		verdict = 1;
	}
	w->n = w->over = w->nratios = 0;
	return verdict;
}

uint32_t cw_sched_margin_raise(uint32_t old_ppm, double factor)
{
	double scale = (1.0 + old_ppm / 1e6) * CW_MIN(CW_MAX(factor, 1.0), 2.0);
	double ppm = (scale - 1.0) * 1e6;

	return ppm >= CW_SCHED_MARGIN_MAX_PPM ? CW_SCHED_MARGIN_MAX_PPM
	       : CW_MAX((uint32_t)ppm, old_ppm);
}
