/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The host's CPU beyond what the streams were admitted for
 * (clockwise/admit.h): what best effort may spend, what a request costs,
 * and the budgets that keep connections to it.
 *
 * Reads of holes were served at real-time priority to any client of an
 * export bound to a reservation, and without bound at normal priority to
 * the others: four clients reading holes in 4 MiB requests, 8 in flight
 * each, made a 4 MB/s stream on two emulated HDDs miss 61 to 85 of 305
 * blocks on its own export (300 ms late and more) and 9 beside it on
 * another export, though no disk was busy.  Admission books CPU for the
 * streams alone (host.c); these budgets bound the rest by it.
 *
 * A budget is a generic cell rate algorithm (the ATM Forum's, as in a
 * leaky bucket's virtual scheduling): tat is when the work charged so far
 * is paid for at the budget's rate.  A request may start while tat is at
 * most the burst ahead of now, and moves it on by its cost at the rate,
 * from now when the budget was idle (what it did not spend then is not
 * kept, beyond the burst).  Over any interval of t the work started is
 * then at most rate * (t + burst) plus one request: the bound holds
 * however many threads spend the budget, as long as each move of tat is
 * one compare-and-swap from the tat it was computed from.
 */
#include <errno.h>

#include <clockwise/admit.h>

static uint64_t sat(unsigned __int128 v)
{
	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

uint64_t cw_host_be_capacity_ps(const struct cw_host_model *h)
{
	uint64_t free_ppm, ps;

	if (cw_host_model_none(h))
		return UINT64_MAX;
	free_ppm = h->share_ppm < 1000000 ? 1000000 - h->share_ppm : 0;
	/* cpus * free_ppm * 10^6 ps, times CW_HOST_BE_SHARE_PPM / 10^6 */
	ps = sat((unsigned __int128)h->cpus * free_ppm * CW_HOST_BE_SHARE_PPM);
	return ps > CW_HOST_BE_MIN_PS ? ps : CW_HOST_BE_MIN_PS;
}

uint64_t cw_host_cost_ps(const struct cw_host_model *h, uint64_t requests, uint64_t bytes)
{
	if (cw_host_model_none(h))
		return 0;
	return sat((unsigned __int128)requests * (uint64_t)(h->request_ns > 0 ? h->request_ns : 0) *
		   1000 + (unsigned __int128)bytes * h->byte_ps);
}

int64_t cw_host_budget_take(int64_t tat_ns, int64_t now_ns, uint64_t rate_ps, uint64_t cost_ps,
			    int64_t burst_ns, int64_t *ret_tat_ns)
{
	int64_t start = tat_ns > now_ns ? tat_ns : now_ns;
	unsigned __int128 inc;

	if (!ret_tat_ns || rate_ps == 0 || burst_ns < 0)
		return -EINVAL;
	if (rate_ps == UINT64_MAX) {
		*ret_tat_ns = tat_ns;
		return 0;
	}
	if ((uint64_t)start - (uint64_t)now_ns > (uint64_t)burst_ns)
		return (int64_t)((uint64_t)start - (uint64_t)now_ns - (uint64_t)burst_ns);
	/* the cost's time at the rate, rounded up: never less than spent */
	inc = ((unsigned __int128)cost_ps * CW_NS_PER_S + rate_ps - 1) / rate_ps;
	*ret_tat_ns = inc > (unsigned __int128)(INT64_MAX - start) ? INT64_MAX : start + (int64_t)inc;
	return 0;
}
