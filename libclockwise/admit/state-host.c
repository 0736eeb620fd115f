/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The host in admission (clockwise/admit.h, "the host"): the model of its
 * CPUs and what the admitted streams need of them.  Every new stream is
 * tested against it too (state-admit.c).
 */
#include "config.h"

#include <errno.h>

#include "admit/state-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

uint64_t ast_host_need(const struct cw_admit_state *st)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < st->n_resvs; i++) {
		uint64_t d = cw_host_demand_ps(&st->host, st->resvs[i]->rate_bps,
					       st->resvs[i]->block_bytes);

		sum = d > UINT64_MAX - sum ? UINT64_MAX : sum + d;
	}
	return sum;
}

int cw_admit_state_set_host(struct cw_admit_state *st, const struct cw_host_model *h)
{
	if (!st || !h || h->request_ns < 0 || h->share_ppm > 1000000 ||
	    (!cw_host_model_none(h) && h->cpus == 0))
		return -EINVAL;
	st->host = *h;
	return 0;
}

void cw_admit_state_host(const struct cw_admit_state *st, struct cw_host_model *ret_model,
			 uint64_t *ret_need_ps)
{
	if (ret_model)
		*ret_model = st->host;
	if (ret_need_ps)
		*ret_need_ps = ast_host_need(st);
}
