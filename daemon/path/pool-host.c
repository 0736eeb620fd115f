/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The host keeps time as the disks do: once a second the control thread
 * sets what the streams' path really cost in CPU (their connections'
 * threads, and the dispatchers' starts of their requests, where a memory
 * disk's copy is done) against what the host model charges for the
 * requests and bytes the streams were served (cw_host_watch_add).  When
 * the path keeps costing more, the model grows by what was measured, and
 * new streams are admitted against it; streams already admitted that it
 * no longer covers are said, as a disk's raised margin says them.  The
 * model is measured again at every start.
 *
 * The model it keeps is also what the connections' CPU budgets charge
 * their requests (pb_host_budget; the NBD server spends them): the one
 * connection that holds a reservation's real-time priority what its
 * stream was admitted for, every other connection together best
 * effort's part of what admission does not give to streams.
 */
#include "config.h"

#include <inttypes.h>
#include <syslog.h>

#include <clockwise/units.h>

#include "daemon/path/pool-internal.h"

void pb_host_resv_gone(struct pb *pb, const struct resv *rv)
{
	pb->host_requests_gone += cwd_stats_get(&rv->st.rt_done);
	pb->host_bytes_gone += cwd_stats_get(&rv->st.read_bytes) +
			       cwd_stats_get(&rv->st.write_bytes);
}

/* What the streams were served so far: their pieces and bytes. */
static void served(struct pb *pb, uint64_t *ret_requests, uint64_t *ret_bytes)
{
	uint64_t n = 0, b = 0;

	pthread_mutex_lock(&pb->resv_lock);
	for (size_t i = 0; i < pb->nresvs; i++) {
		const struct resv *rv = pb->resvs[i];

		if (!rv)
			continue;
		n += cwd_stats_get(&rv->st.rt_done);
		b += cwd_stats_get(&rv->st.read_bytes) + cwd_stats_get(&rv->st.write_bytes);
	}
	*ret_requests = n + pb->host_requests_gone;
	*ret_bytes = b + pb->host_bytes_gone;
	pthread_mutex_unlock(&pb->resv_lock);
}

/* The dispatchers' CPU starting real-time requests, so far. */
static uint64_t dispatch_cpu(struct pb *pb)
{
	uint64_t ns = 0;

	for (size_t i = 0; i < pb->ndisks; i++)
		for (unsigned j = 0; pb->disks[i].lanes && j < pb->disks[i].nlanes; j++)
			ns += cwd_stats_get(&pb->disks[i].lanes[j].st.rt_cpu_ns);
	return ns;
}

void pb_host_tick(struct pb *pb, uint64_t conn_cpu_ns)
{
	struct cw_host_model h;
	uint64_t req, bytes, cpu, factor, need;
	char words[CW_UNITS_BUF];

	served(pb, &req, &bytes);
	cpu = conn_cpu_ns + dispatch_cpu(pb);
	cw_admit_state_host(pb->adm, &h, NULL);
	/* A first look, or counters that went back (a disk gone): a new start. */
	if (!pb->host_seen || req < pb->host_req || bytes < pb->host_bytes || cpu < pb->host_cpu) {
		pb->host_seen = true;
		goto keep;
	}
	if (cw_host_model_none(&h) ||
	    cw_host_watch_add(&pb->host_watch, &h, req - pb->host_req, bytes - pb->host_bytes,
			      cpu - pb->host_cpu, &factor) != 1)
		goto keep;
	cwd_log(LOG_WARNING, "host: the streams' path keeps costing more CPU than its model says "
		"(%.2f times, three seconds in a row): its costs grow by that much",
		(double)factor / 1e6);
	cw_host_model_scale(&h, factor);
	if (cw_admit_state_set_host(pb->adm, &h) < 0)
		goto keep;
	cw_admit_state_host(pb->adm, &h, &need);
	cwd_log(LOG_NOTICE, "host: a request costs %" PRId64 " ns, a byte %" PRIu64 " ps (%s of "
		"copies a CPU-second)", h.request_ns, h.byte_ps,
		cw_units_format_rate(CW_HOST_PS_PER_CPU_S / (h.byte_ps ? h.byte_ps : 1), words));
	if (need > cw_host_capacity_ps(&h))
		cwd_log(LOG_WARNING, "host: the streams admitted now need %.2f CPUs of the %.2f given "
			"them: they may be late, and no new stream is admitted until enough end",
			need / 1e12, cw_host_capacity_ps(&h) / 1e12);
keep:
	pb_host_publish(pb);
	pb->host_req = req;
	pb->host_bytes = bytes;
	pb->host_cpu = cpu;
}

void pb_host_publish(struct pb *pb)
{
	struct cw_host_model h;

	cw_admit_state_host(pb->adm, &h, NULL);
	atomic_store_explicit(&pb->host_pub_request_ns, h.request_ns, memory_order_relaxed);
	atomic_store_explicit(&pb->host_pub_byte_ps, h.byte_ps, memory_order_relaxed);
	atomic_store_explicit(&pb->host_pub_cpus, h.cpus, memory_order_relaxed);
	atomic_store_explicit(&pb->host_pub_share_ppm, h.share_ppm, memory_order_relaxed);
}

/* Read field by field: a model changed in between charges one request
 * by half of each, which no budget needs better than. */
uint64_t pb_host_budget(struct pb *pb, const struct resv *rv, struct cw_host_model *ret_model)
{
	struct cw_host_model *h = ret_model;

	h->request_ns = atomic_load_explicit(&pb->host_pub_request_ns, memory_order_relaxed);
	h->byte_ps = atomic_load_explicit(&pb->host_pub_byte_ps, memory_order_relaxed);
	h->cpus = atomic_load_explicit(&pb->host_pub_cpus, memory_order_relaxed);
	h->share_ppm = atomic_load_explicit(&pb->host_pub_share_ppm, memory_order_relaxed);
	if (cw_host_model_none(h))
		return UINT64_MAX;
	if (!rv)
		return cw_host_be_capacity_ps(h);
	return CW_MAX(cw_host_demand_ps(h, rv->a->rate_bps, rv->a->block_bytes), UINT64_C(1));
}
