/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The host as a resource of admission (clockwise/admit.h, "the host").
 *
 * Jeffay's test keeps each disk's deadlines on the assumption that a
 * request's path through the host is free: the dispatcher is running when
 * a decision is due and the copies of its bytes take no time that the
 * disk's C does not cover.  On a disk whose service is itself a copy (a
 * file in tmpfs) the disk admits more than the CPUs can move, and the
 * streams then miss their deadlines waiting for a CPU.  The real-time
 * threads of a stream's path run at a fixed real-time priority, above
 * every other thread of the host but other streams' and the kernel's, so
 * the CPU time they may use is bounded by a utilization test over the
 * share of the CPUs given to streams, exactly as condition (1) bounds a
 * disk's time: the sum over the streams of their CPU time per second may
 * not pass cpus * share.  The test is necessary, not sufficient, for
 * timely delivery (it ignores how the work is spread over the CPUs); it is
 * what removes the streams no CPU can serve.
 *
 * Exact integer arithmetic, in picoseconds of CPU per second: a stream's
 * demand ceil(B * request_ns * 1000 / b) + B * byte_ps is rounded up once,
 * so the sum of the admitted streams' demands is never below what they
 * use, and a stream is admitted at need == given and refused one
 * picosecond above.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include <clockwise/admit.h>

static uint64_t sat(unsigned __int128 v)
{
	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

uint64_t cw_host_demand_ps(const struct cw_host_model *h, uint64_t rate, uint64_t block)
{
	unsigned __int128 req, bytes;

	if (cw_host_model_none(h) || block == 0)
		return 0;
	req = (unsigned __int128)rate * (uint64_t)(h->request_ns > 0 ? h->request_ns : 0) * 1000;
	req = (req + block - 1) / block;
	bytes = (unsigned __int128)rate * h->byte_ps;
	return sat(req + bytes);
}

uint64_t cw_host_capacity_ps(const struct cw_host_model *h)
{
	if (cw_host_model_none(h))
		return UINT64_MAX;
	/* ppm of a CPU-second is 10^6 ps */
	return (uint64_t)h->cpus * h->share_ppm * UINT64_C(1000000);
}

/* The largest rate whose demand fits in room (demand grows with the
 * rate): a bisection, so it agrees with cw_host_demand_ps to the byte. */
static uint64_t max_rate(const struct cw_host_model *h, uint64_t room, uint64_t block)
{
	uint64_t lo = 0, hi = UINT64_MAX;

	if (cw_host_demand_ps(h, hi, block) <= room)
		return hi;
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (cw_host_demand_ps(h, mid, block) <= room)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

int cw_host_test(const struct cw_host_model *h, uint64_t others, uint64_t rate, uint64_t block,
		 struct cw_host_result *ret)
{
	uint64_t given;

	if (!ret || block == 0 || (h && (h->request_ns < 0 || h->share_ppm > 1000000)))
		return -EINVAL;
	*ret = (struct cw_host_result){ 0 };
	if (cw_host_model_none(h))
		return 0;
	given = cw_host_capacity_ps(h);
	ret->stream_ps = cw_host_demand_ps(h, rate, block);
	ret->need_ps = sat((unsigned __int128)others + ret->stream_ps);
	ret->given_ps = given;
	ret->refused = ret->need_ps > given;
	ret->max_rate_bps = others >= given ? 0 : max_rate(h, given - others, block);
	return 0;
}

void cw_host_result_words(const struct cw_host_model *h, const struct cw_host_result *res,
			  char *buf, size_t len)
{
	double cpu = (double)CW_HOST_PS_PER_CPU_S;

	snprintf(buf, len, "the streams would need %.4g CPUs of real-time work (%" PRId64 " ns "
		 "a request, %.3f ns a byte), %.4g are given to streams (%.1f%% of %" PRIu32
		 " CPUs)", (double)res->need_ps / cpu, h->request_ns, (double)h->byte_ps / 1000,
		 (double)res->given_ps / cpu, (double)h->share_ppm / 10000, h->cpus);
}

int cw_admit_plan_host(struct cw_admit_plan *plan, const struct cw_admit_qos *qos,
		       const struct cw_host_model *h, uint64_t others_ps)
{
	int r;

	if (!plan || !qos)
		return -EINVAL;
	if (!plan->admitted || cw_host_model_none(h))
		return 0;
	r = cw_host_test(h, others_ps, qos->bandwidth_bps, qos->block_bytes, &plan->host);
	if (r < 0)
		return r;
	if (plan->host.refused) {
		char words[CW_ADMIT_REASON_MAX];

		plan->admitted = false;
		cw_host_result_words(h, &plan->host, words, sizeof(words));
		snprintf(plan->reason, sizeof(plan->reason), "host: %s", words);
	}
	return 0;
}

uint64_t cw_host_charge_ns(const struct cw_host_model *h, uint64_t requests, uint64_t bytes)
{
	unsigned __int128 ps;

	if (cw_host_model_none(h))
		return 0;
	/* two of the three copies of a byte are the daemon's */
	ps = (unsigned __int128)requests * (uint64_t)(h->request_ns > 0 ? h->request_ns : 0) * 1000 +
	     (unsigned __int128)bytes * h->byte_ps * 2 / 3;
	return sat(ps / 1000);
}

int cw_host_watch_add(struct cw_host_watch *w, const struct cw_host_model *h,
		      uint64_t requests, uint64_t bytes, uint64_t spent_ns,
		      uint64_t *ret_factor_ppm)
{
	uint64_t charged, ppm;

	if (!w || !ret_factor_ppm)
		return -EINVAL;
	charged = cw_host_charge_ns(h, requests, bytes);
	/* too little to judge, or within the noise: no run of evidence */
	if (charged < CW_HOST_WATCH_MIN_NS || (unsigned __int128)spent_ns * 4 <= (unsigned __int128)charged * 5) {
		*w = (struct cw_host_watch){ 0 };
		return 0;
	}
	ppm = sat((unsigned __int128)spent_ns * 1000000 / charged);
	w->least_ppm = w->over++ ? (ppm < w->least_ppm ? ppm : w->least_ppm) : ppm;
	if (w->over < CW_HOST_WATCH_INTERVALS)
		return 0;
	*ret_factor_ppm = w->least_ppm < CW_HOST_WATCH_MAX_PPM ? w->least_ppm : CW_HOST_WATCH_MAX_PPM;
	*w = (struct cw_host_watch){ 0 };
	return 1;
}

void cw_host_model_scale(struct cw_host_model *h, uint64_t factor_ppm)
{
	if (!h)
		return;
	if (h->request_ns > 0) {
		uint64_t ns = sat(((unsigned __int128)(uint64_t)h->request_ns * factor_ppm + 999999) /
				  1000000);

		h->request_ns = ns > INT64_MAX ? INT64_MAX : (int64_t)ns;
	}
	h->byte_ps = sat(((unsigned __int128)h->byte_ps * factor_ppm + 999999) / 1000000);
}
