/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: the parking spot of the daemon's sleeping threads
 * (daemon/park.h) on real threads and the real futex.  A waker held
 * between its look at the sleeper and its wake-up (as a thread that lost
 * its CPU there is) does not keep another waker from waking the sleeper;
 * a wake-up between the sleeper's prepare and its sleep is not lost; a
 * wake finds nobody parked and says so; a sleep ends at its timeout.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "park-hold.h"
#include "daemon/park.h"
#include "cwtest.h"

#define MS 1000000LL

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct park pk;
static atomic_bool work, woke;

/* The sleeper: sleeps unless there is work, with no timeout. */
static void *sleeper(void *arg)
{
	int seq = park_prepare(&pk);

	(void)arg;
	if (atomic_load(&work))
		park_cancel(&pk);
	else
		park_sleep(&pk, seq, -1);
	atomic_store(&woke, true);
	return NULL;
}

static void *held_waker(void *arg)
{
	(void)arg;
	park_held = true;
	park_wake(&pk);
	return NULL;
}

/* Up to ms for flag to turn true. */
static bool wait_flag(atomic_bool *flag, int ms)
{
	for (int i = 0; i < ms && !atomic_load(flag); i++)
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	return atomic_load(flag);
}

static void test_held_waker_holds_back_nobody(void)
{
	pthread_t s, h;

	pk = (struct park){ 0 };
	atomic_store(&work, false);
	atomic_store(&woke, false);
	CU_ASSERT_FATAL(park_hold_init() == 0);
	CU_ASSERT_FATAL(pthread_create(&s, NULL, sleeper, NULL) == 0);
	/* parked, and (given the time) asleep in the kernel */
	for (int i = 0; i < 5000 && !atomic_load(&pk.parked); i++)
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	CU_ASSERT_FATAL(atomic_load(&pk.parked));
	nanosleep(&(struct timespec){ 0, 50 * MS }, NULL);
	CU_ASSERT_FALSE(atomic_load(&woke));

	/* a waker stops between its look and its wake-up */
	CU_ASSERT_FATAL(pthread_create(&h, NULL, held_waker, NULL) == 0);
	park_hold_reached();
	CU_ASSERT_FALSE(atomic_load(&woke));
	/* another publishes work and wakes: the sleeper gets up now, not
	 * when the held one goes on */
	atomic_store(&work, true);
	park_wake(&pk);
	CU_ASSERT(wait_flag(&woke, 2000));

	park_hold_release();
	pthread_join(h, NULL);
	pthread_join(s, NULL);
	CU_ASSERT(atomic_load(&woke));
	park_hold_fini();
}

static void test_wake_before_sleep_is_kept(void)
{
	int64_t t;
	int seq;

	pk = (struct park){ 0 };
	CU_ASSERT_FALSE(park_wake(&pk));	/* nobody parked: nothing done */
	seq = park_prepare(&pk);
	CU_ASSERT(park_wake(&pk));		/* parked (about to sleep) */
	t = now_ns();
	park_sleep(&pk, seq, 5000 * MS);	/* the wake-up came first */
	CU_ASSERT(now_ns() - t < 1000 * MS);
	CU_ASSERT_EQUAL(atomic_load(&pk.parked), 0);
	CU_ASSERT_FALSE(park_wake(&pk));
	/* a wake-up before the prepare belongs to an earlier sleep */
	park_wake_always(&pk);
	seq = park_prepare(&pk);
	t = now_ns();
	park_sleep(&pk, seq, 20 * MS);
	CU_ASSERT(now_ns() - t >= 20 * MS);
}

static void test_timeout(void)
{
	int64_t t;
	int seq;

	pk = (struct park){ 0 };
	seq = park_prepare(&pk);
	t = now_ns();
	park_sleep(&pk, seq, 30 * MS);
	t = now_ns() - t;
	CU_ASSERT(t >= 30 * MS);
	CU_ASSERT(t < 3000 * MS);
	seq = park_prepare(&pk);
	park_cancel(&pk);
	CU_ASSERT_EQUAL(atomic_load(&pk.parked), 0);
	(void)seq;
}

int main(void)
{
	CU_pSuite s = cwtest_suite("daemon park", NULL, NULL);

	cwtest_add(s, "a held waker holds back no other waker", test_held_waker_holds_back_nobody);
	cwtest_add(s, "a wake-up before the sleep is kept", test_wake_before_sleep_is_kept);
	cwtest_add(s, "a sleep ends at its timeout", test_timeout);
	return cwtest_run();
}
