/*
 * Description: misses explained (libclockwise/sched/miss.c).  Each class
 * from a timeline that shows its cause, the order the classes are tried
 * in when several causes show, the largest cause when none alone is as
 * large as the lateness, the CPU tolerance; the overrun watch
 * proposes no margin for a model that holds, and for one that does not
 * the margin that covers all but the tolerated overruns, window by
 * window.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <clockwise/sched.h>
#include "common/util.h"
#include "cwtest.h"

#define US 1000
#define MS (1000 * US)

/* A request released at 0, due at 10 ms, started at 1 ms, charged 2 ms,
 * done at done: nothing else wrong. */
static struct cw_sched_miss late(int64_t done)
{
	return (struct cw_sched_miss){ .release_ns = 0, .deadline_ns = 10 * MS,
				       .start_ns = 1 * MS, .done_ns = done,
				       .charged_ns = 2 * MS };
}

static void test_classes(void)
{
	struct cw_sched_miss m;

	/* Its own service 11 ms against C 2 ms: the model was wrong. */
	m = late(12 * MS);
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_MODEL);
	/* The same, but 10 ms of it the dispatcher waited for a CPU: the
	 * disk kept its C, another request overran. */
	m = late(12 * MS);
	m.cpu_wait_service_ns = 10 * MS;
	m.cpu_wait_window_ns = 10 * MS;
	m.other_overrun_ns = 3 * MS;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_OVERRUN);
	/* No overrun: the CPU. */
	m.other_overrun_ns = 0;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_CPU);
	/* Started late, served in its C, no overrun, no CPU wait: the
	 * decision was wrong. */
	m = late(11 * MS);
	m.start_ns = 9 * MS;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_SCHED);
	/* A CPU wait within the clock's noise explains nothing. */
	m.cpu_wait_window_ns = CW_MISS_CPU_TOLERANCE_NS;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_SCHED);
	m.cpu_wait_window_ns = CW_MISS_CPU_TOLERANCE_NS + 1;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_CPU);
	/* Started late behind an overrun, then a few microseconds over its
	 * own C: the overrun made it late, not the model. */
	m = late(11 * MS);
	m.start_ns = 9 * MS - 10;
	m.other_overrun_ns = 5 * MS;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_OVERRUN);
	/* ... unless the request that overran was a stream's: then the
	 * model was wrong. */
	m.other_overrun_rt = true;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_MODEL);
	m.other_overrun_rt = false;
	/* ... and with nothing else to blame, the excess is. */
	m.other_overrun_ns = 0;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_MODEL);
	/* The dispatcher ran when due, but the request waited on its
	 * connection while the reader could not run: the CPU too. */
	m = late(11 * MS);
	m.start_ns = 9 * MS;
	m.cpu_wait_reader_ns = CW_MISS_CPU_TOLERANCE_NS;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_SCHED);
	m.cpu_wait_reader_ns = 8 * MS;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_CPU);
	/* Booked in time, but its reader lost its CPU before it woke the
	 * dispatcher, which slept on with no wake-up set: the CPU's. */
	m = late(11 * MS);
	m.start_ns = 9 * MS;
	m.booked_ns = 1 * MS;
	m.slept_ns = 8 * MS;
	m.cpu_wait_wake_ns = CW_MISS_CPU_TOLERANCE_NS;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_SCHED);
	m.cpu_wait_wake_ns = 8 * MS;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_CPU);
	/* No cause alone as large as the lateness: the largest explains.
	 * Booked 30 ms after its release by a reader that waited 29 ms for
	 * a CPU, then behind a stream's request 0.7 ms over its C: late by
	 * 31 ms, the CPU's doing, not the model's. */
	m = (struct cw_sched_miss){ .release_ns = 0, .deadline_ns = 4 * MS, .start_ns = 34 * MS,
				    .done_ns = 35 * MS, .charged_ns = MS, .booked_ns = 30 * MS,
				    .cpu_wait_reader_ns = 29 * MS, .other_overrun_ns = 700 * US,
				    .other_overrun_rt = true };
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_CPU);
	/* With only 0.5 ms of CPU wait the overrun is the larger. */
	m.cpu_wait_reader_ns = 500 * US;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_MODEL);
	m.other_overrun_rt = false;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_OVERRUN);
	/* Its own excess, 0.2 ms, smaller than both: still not the model. */
	m.done_ns += 200 * US;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_OVERRUN);
	/* Done in time, the reply late: delivery, whatever else showed. */
	m = late(9 * MS);
	m.reply_ns = 10 * MS + 1;
	m.other_overrun_ns = MS;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_DELIVERY);
	/* Done late and sent late: the disk side is the cause. */
	m = late(12 * MS);
	m.reply_ns = 13 * MS;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_MODEL);
	/* An emulated disk whose backing store kept the request 10 ms past
	 * the emulated disk's time: not the model's, the emulator's. */
	m = late(12 * MS);
	m.emu_lag_own_ns = m.emu_lag_ns = 10 * MS;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_EMULATOR);
	/* ... with 1 ms of the lag its own, the other 9 ms over C are. */
	m.emu_lag_own_ns = MS;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_MODEL);
	/* Started late behind a flush that came back 9 ms after the
	 * emulated disk had done it, within its own C: the emulator's. */
	m = late(11 * MS);
	m.start_ns = 9 * MS;
	m.emu_lag_ns = 9 * MS;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_EMULATOR);
	/* ... an overrun of the emulated disk's own, as large, first. */
	m.other_overrun_ns = 9 * MS;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_OVERRUN);
	/* ... and of two that do not alone explain it, the larger. */
	m = late(30 * MS);
	m.start_ns = 27 * MS;
	m.emu_lag_ns = 12 * MS;
	m.cpu_wait_window_ns = 8 * MS;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_EMULATOR);
	m.cpu_wait_window_ns = 14 * MS;
	CU_ASSERT_EQUAL(cw_sched_miss_classify(&m), CW_MISS_CPU);
	/* Names. */
	CU_ASSERT_STRING_EQUAL(cw_sched_miss_class_name(CW_MISS_MODEL), "model");
	CU_ASSERT_STRING_EQUAL(cw_sched_miss_class_name(CW_MISS_OVERRUN), "overrun");
	CU_ASSERT_STRING_EQUAL(cw_sched_miss_class_name(CW_MISS_CPU), "cpu");
	CU_ASSERT_STRING_EQUAL(cw_sched_miss_class_name(CW_MISS_DELIVERY), "delivery");
	CU_ASSERT_STRING_EQUAL(cw_sched_miss_class_name(CW_MISS_SCHED), "sched");
	CU_ASSERT_STRING_EQUAL(cw_sched_miss_class_name(CW_MISS_EMULATOR), "emulator");
	CU_ASSERT_PTR_NULL(cw_sched_miss_class_name(CW_MISS_CLASSES));
}

static void test_watch(void)
{
	struct cw_sched_overrun_watch w;
	double margin = 0;
	int r = 0;

	cw_sched_overrun_watch_init(&w);
	CU_ASSERT_EQUAL(w.window, 1000);
	CU_ASSERT_EQUAL(cw_sched_overrun_watch_add(&w, 0, 1, &margin), -EINVAL);
	CU_ASSERT_EQUAL(cw_sched_overrun_watch_add(NULL, 1, 1, &margin), -EINVAL);
	CU_ASSERT_EQUAL(w.tolerated_ppm, 10000);
	/* A model that holds: ten overruns per window (1% tolerated), and
	 * any number within the noise (5%). */
	for (int i = 0; i < 3000; i++) {
		int64_t actual = i % 100 == 7 ? 5 * MS : i % 3 ? MS / 2 : MS + MS / 25;

		r = cw_sched_overrun_watch_add(&w, MS, actual, &margin);
		CU_ASSERT_EQUAL_FATAL(r, 0);
	}
	/* One that does not: 2% of the requests take 1.1 to 3.0 times their
	 * charge; all but ten are covered by the eleventh largest ratio. */
	for (int i = 0; i < 1000 && r == 0; i++) {
		int64_t actual = MS / 2;

		if (i % 50 == 0)
			actual = MS + (int64_t)(i / 50) * MS / 10 + MS / 10;
		r = cw_sched_overrun_watch_add(&w, MS, actual, &margin);
		CU_ASSERT(r == 0 || i == 999);
	}
	CU_ASSERT_EQUAL(r, 1);
	CU_ASSERT_DOUBLE_EQUAL(margin, 2.0, 1e-9);
	/* A new window starts clean. */
	CU_ASSERT_EQUAL(w.n, 0);
	CU_ASSERT_EQUAL(w.over, 0);
	/* More tolerated overruns than ratios kept: the smallest kept (the
	 * 64th largest, 1.873) covers more than asked, never less. */
	w.tolerated_ppm = 100000;	/* 10% */
	w.noise_ppm = 0;
	for (int i = 0; i < 1000; i++)
		r = cw_sched_overrun_watch_add(&w, MS, i % 2 ? MS + i * US : MS, &margin);
	CU_ASSERT_EQUAL(r, 1);
	CU_ASSERT_DOUBLE_EQUAL(margin, 1.873, 1e-9);
}

static void test_margin_raise(void)
{
	/* C grows by the factor: 25% and 1.2 times make 50%. */
	CU_ASSERT_EQUAL(cw_sched_margin_raise(250000, 1.2), 500000);
	/* At most doubled a step, up to the cap; never lowered. */
	CU_ASSERT_EQUAL(cw_sched_margin_raise(0, 10.5), 1000000);
	CU_ASSERT_EQUAL(cw_sched_margin_raise(2000000, 2.0), CW_SCHED_MARGIN_MAX_PPM);
	CU_ASSERT_EQUAL(cw_sched_margin_raise(300000, 0.5), 300000);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("sched misses", NULL, NULL);

	cwtest_add(s, "a miss's class from its timeline", test_classes);
	cwtest_add(s, "the overrun watch proposes a margin", test_watch);
	cwtest_add(s, "a margin raised a step", test_margin_raise);
	return cwtest_run();
}
