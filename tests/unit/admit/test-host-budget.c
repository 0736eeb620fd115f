/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: the host's CPU beyond the streams (clockwise/admit.h):
 * best effort gets a share of what admission does not give to streams,
 * requests cost what the model says, and a budget (a generic cell rate
 * algorithm) never lets more start than its rate and burst allow, by
 * brute force over random requests from several spenders, and lets a
 * request start exactly when it said to ask again.
 */
#include <stdint.h>
#include <stdlib.h>

#include <clockwise/admit.h>

#include "cwtest.h"

static void test_be_capacity(void)
{
	struct cw_host_model h = { .request_ns = 1000, .byte_ps = 500, .cpus = 2,
				   .share_ppm = 500000 };

	/* half of the one CPU the streams are not given */
	CU_ASSERT_EQUAL(cw_host_be_capacity_ps(&h), CW_HOST_PS_PER_CPU_S / 2);
	h.share_ppm = 750000;
	CU_ASSERT_EQUAL(cw_host_be_capacity_ps(&h), CW_HOST_PS_PER_CPU_S / 4);
	h.cpus = 3;
	h.share_ppm = 1;
	CU_ASSERT_EQUAL(cw_host_be_capacity_ps(&h), UINT64_C(3) * 999999 * 500000);
	/* every CPU to streams: best effort still moves, slowly */
	h.share_ppm = 1000000;
	CU_ASSERT_EQUAL(cw_host_be_capacity_ps(&h), CW_HOST_BE_MIN_PS);
	h.cpus = UINT32_MAX;
	h.share_ppm = 0;
	CU_ASSERT_EQUAL(cw_host_be_capacity_ps(&h), UINT64_MAX);	/* more than a word counts */
	/* no model: no bound */
	CU_ASSERT_EQUAL(cw_host_be_capacity_ps(NULL), UINT64_MAX);
	h = (struct cw_host_model){ .cpus = 2, .share_ppm = 500000 };
	CU_ASSERT_EQUAL(cw_host_be_capacity_ps(&h), UINT64_MAX);
}

static void test_cost(void)
{
	struct cw_host_model h = { .request_ns = 7000, .byte_ps = 480, .cpus = 2,
				   .share_ppm = 500000 };

	CU_ASSERT_EQUAL(cw_host_cost_ps(&h, 1, 0), 7000000);
	CU_ASSERT_EQUAL(cw_host_cost_ps(&h, 1, 4 << 20), 7000000 + UINT64_C(480) * (4 << 20));
	CU_ASSERT_EQUAL(cw_host_cost_ps(&h, 3, 10), 21000000 + 4800);
	CU_ASSERT_EQUAL(cw_host_cost_ps(&h, UINT64_MAX, UINT64_MAX), UINT64_MAX);
	CU_ASSERT_EQUAL(cw_host_cost_ps(NULL, 1, 1), 0);
	/* a stream's requests for a second cost its demand */
	CU_ASSERT_EQUAL(cw_host_cost_ps(&h, 16, 16 << 18), cw_host_demand_ps(&h, 16 << 18, 1 << 18));
}

static void test_take_edges(void)
{
	int64_t tat = 0, now = 100 * CW_NS_PER_MS, w;
	unsigned n = 0;

	/* 1 ms of CPU a request on one CPU a second, 20 ms ahead at most:
	 * 21 start at once (tat from now to now + 20 ms), the next waits
	 * 1 ms, then one starts and the next waits 1 ms again */
	while (cw_host_budget_take(tat, now, CW_HOST_PS_PER_CPU_S, 1000000000, 20 * CW_NS_PER_MS,
				   &tat) == 0 && n < 100)
		n++;
	CU_ASSERT_EQUAL(n, 21);
	CU_ASSERT_EQUAL(tat, now + 21 * CW_NS_PER_MS);
	w = cw_host_budget_take(tat, now, CW_HOST_PS_PER_CPU_S, 1000000000, 20 * CW_NS_PER_MS, &tat);
	CU_ASSERT_EQUAL(w, CW_NS_PER_MS);
	CU_ASSERT_EQUAL(cw_host_budget_take(tat, now + w, CW_HOST_PS_PER_CPU_S, 1000000000,
					    20 * CW_NS_PER_MS, &tat), 0);
	CU_ASSERT_EQUAL(cw_host_budget_take(tat, now + w, CW_HOST_PS_PER_CPU_S, 1000000000,
					    20 * CW_NS_PER_MS, &tat), CW_NS_PER_MS);
	/* an idle budget keeps no more than its burst */
	tat = 0;
	CU_ASSERT_EQUAL(cw_host_budget_take(tat, CW_NS_PER_S, CW_HOST_PS_PER_CPU_S, 1000, 0, &tat), 0);
	CU_ASSERT_EQUAL(tat, CW_NS_PER_S + 1);
	/* the cost rounds up: a picosecond at a slow rate is a nanosecond */
	CU_ASSERT_EQUAL(cw_host_budget_take(0, 0, UINT64_MAX - 1, 1, 0, &tat), 0);
	CU_ASSERT_EQUAL(tat, 1);
	/* one larger than the burst starts, and is paid for after */
	CU_ASSERT_EQUAL(cw_host_budget_take(0, 0, CW_HOST_PS_PER_CPU_S, 5000000000, CW_NS_PER_MS,
					    &tat), 0);
	CU_ASSERT_EQUAL(tat, 5 * CW_NS_PER_MS);
	CU_ASSERT_EQUAL(cw_host_budget_take(tat, 0, CW_HOST_PS_PER_CPU_S, 1, CW_NS_PER_MS, &tat),
			4 * CW_NS_PER_MS);
	/* what does not fit stops at the end of time */
	CU_ASSERT_EQUAL(cw_host_budget_take(0, 0, 1, UINT64_MAX, 0, &tat), 0);
	CU_ASSERT_EQUAL(tat, INT64_MAX);
	/* no bound; bad arguments */
	tat = 77;
	CU_ASSERT_EQUAL(cw_host_budget_take(tat, 0, UINT64_MAX, UINT64_MAX, 0, &tat), 0);
	CU_ASSERT_EQUAL(tat, 77);
	CU_ASSERT_EQUAL(cw_host_budget_take(0, 0, 0, 1, 0, &tat), -EINVAL);
	CU_ASSERT_EQUAL(cw_host_budget_take(0, 0, 1, 1, -1, &tat), -EINVAL);
	CU_ASSERT_EQUAL(cw_host_budget_take(0, 0, 1, 1, 0, NULL), -EINVAL);
}

/* Spenders that each ask again when told, at random costs, on random
 * rates and bursts: over every interval [a, b) between two starts, what
 * started in it is paid for by (b - a) + burst of the rate, plus the last
 * request; and each start came when the budget said, not later. */
#define SPENDERS 4
#define STARTS 400
static void test_take_bound(void)
{
	srandom(31);
	for (int round = 0; round < 200; round++) {
		uint64_t rate = (uint64_t)(random() % 1000 + 1) * 1000000000;
		int64_t burst = (int64_t)(random() % 50) * CW_NS_PER_MS / 10;
		int64_t next[SPENDERS], start[STARTS], tat = 0;
		uint64_t cost[STARTS], maxcost = 0;
		int n = 0;

		for (int i = 0; i < SPENDERS; i++)
			next[i] = random() % CW_NS_PER_MS;
		while (n < STARTS) {
			int i = 0;
			uint64_t c = (uint64_t)(random() % 4000 + 1) * 1000000;
			int64_t w;

			for (int k = 1; k < SPENDERS; k++)	/* the earliest asks */
				if (next[k] < next[i])
					i = k;
			w = cw_host_budget_take(tat, next[i], rate, c, burst, &tat);
			CU_ASSERT_FATAL(w >= 0);
			if (w > 0) {
				next[i] += w;
				continue;
			}
			start[n] = next[i];
			cost[n++] = c;
			maxcost = c > maxcost ? c : maxcost;
			next[i] += random() % 3 ? 0 : (int64_t)(random() % (2 * CW_NS_PER_MS));
		}
		for (int a = 0; a < STARTS; a++) {
			unsigned __int128 spent = 0;

			for (int b = a; b < STARTS && start[b] >= start[a]; b++) {
				unsigned __int128 allowed;

				spent += cost[b];
				allowed = (unsigned __int128)(start[b] - start[a] + burst) * rate /
					  CW_NS_PER_S + maxcost + rate / CW_NS_PER_S + 1;
				if (spent > allowed) {
					CU_FAIL("a budget let more start than its rate and burst");
					return;
				}
			}
		}
	}
}

int main(void)
{
	CU_pSuite s = cwtest_suite("admit-host-budget", NULL, NULL);

	cwtest_add(s, "best effort gets a share of what streams are not given", test_be_capacity);
	cwtest_add(s, "a request costs what the model says", test_cost);
	cwtest_add(s, "a budget at its edges", test_take_edges);
	cwtest_add(s, "a budget bounds what starts, by brute force", test_take_bound);
	return cwtest_run();
}
