/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A disk's plan from its admitted task set: Bosch & Mullender, sections
 * 3.2 (the slack ΔL) and 3.3 (the periodic best-effort server), as
 * clockwised and cwsim both run it.
 *
 * Invariant: the plan never gives best effort more than the task set's ΔL
 * (the budget is ΔL less the guard), and a server is only planned with a
 * slice that cw_admit_server_fit() found schedulable beside the tasks, so
 * the dispatcher's guarantee (clockwise/sched.h) covers every admitted
 * stream and the server alike.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/admit-state.h>

#include "common/cleanup.h"
#include "common/util.h"

void cw_admit_plan_opts_init(struct cw_admit_plan_opts *o)
{
	*o = (struct cw_admit_plan_opts){
		.size = sizeof(*o),
		.guard_min_ns = CW_ADMIT_GUARD_MIN_NS,
		.guard_div = CW_ADMIT_GUARD_DIV,
		.be_reserve = true,
		.auto_server = true,
	};
}

void cw_admit_plan_opts_paper(struct cw_admit_plan_opts *o)
{
	*o = (struct cw_admit_plan_opts){ .size = sizeof(*o) };
}

/* ΔL is what best effort may take before a stream's request with no time
 * to spare: that request then ends at its deadline in the model's terms.
 * The guard keeps max(guard_min, ΔL / guard_div) of it for what the model
 * does not see (1 ms let a stream's reply reach its client 0.2 ms late
 * under load; 2 ms and a quarter did not). */
static int64_t guard(const struct cw_admit_plan_opts *o, int64_t delta_l)
{
	int64_t keep = o->guard_min_ns;

	if (delta_l == CW_ADMIT_NO_LIMIT)
		return 0;
	if (o->guard_div)
		keep = CW_MAX(keep, delta_l / (int64_t)o->guard_div);
	return keep;
}

static int64_t guarded(const struct cw_admit_plan_opts *o, int64_t delta_l)
{
	if (delta_l == CW_ADMIT_NO_LIMIT)
		return delta_l;
	return CW_MAX(0, delta_l - guard(o, delta_l));
}

int cw_admit_disk_plan(const struct cw_admit_plan_opts *o, const struct cw_model *m,
		       enum cw_tier tier, uint64_t block, const struct cw_task *tasks, size_t n,
		       struct cw_disk_plan *ret)
{
	_cleanup_free_ struct cw_task *all = NULL;
	struct cw_admit_result res;
	struct cw_task reserve;
	struct cw_disk_plan p = { 0 };
	int64_t slice = 0;
	int r;

	if (!o || !m || !ret || (n && !tasks) || block == 0)
		return -EINVAL;
	p.n_tasks = n;
	p.be_piece_bytes = cw_admit_be_piece(tier, block);
	r = cw_model_service_ns(m, 0, 0, p.be_piece_bytes, &p.be_max_ns);
	if (r == 0)
		r = cw_admit_be_reserve(m, p.be_piece_bytes, &reserve);
	if (r < 0)
		return r;
	if (o->be_reserve)
		p.be_reserve = reserve;
	r = cw_admit_test(tasks, n, &res);
	if (r < 0)
		return r;
	if (!res.schedulable)
		return -EBUSY;
	if (n && o->auto_server && CW_MAX(guarded(o, res.delta_l_ns), res.idle_be_ns) < p.be_max_ns) {
		/* Neither the slack nor the idle allowance holds a piece: a
		 * server with the reserve's period and the largest slice
		 * that fits.  Admission kept the reserve, so that slice
		 * holds at least one piece when the reserve was kept. */
		r = cw_admit_server_fit(tasks, n, reserve.period_ns, 0, &slice);
		if (r < 0)
			return r;
		if (slice > 0) {
			all = malloc((n + 1) * sizeof(*all));
			if (!all)
				return -ENOMEM;
			memcpy(all, tasks, n * sizeof(*all));
			all[n] = (struct cw_task){ reserve.period_ns, slice, 0, 0 };
			r = cw_admit_test(all, n + 1, &res);
			if (r < 0)
				return r;
			if (!res.schedulable)
				return -EBUSY;	/* cannot be: server_fit tested it */
			p.server_slice_ns = slice;
			p.server_period_ns = reserve.period_ns;
		}
		p.be_starved = slice < p.be_max_ns;
	}
	p.utilization = res.utilization;
	p.delta_l_ns = res.delta_l_ns;
	p.be_budget_ns = guarded(o, res.delta_l_ns);
	p.guard_ns = guard(o, res.delta_l_ns);
	p.idle_be_ns = res.idle_be_ns;
	*ret = p;
	return 0;
}

/* Nanoseconds as JSON: null for "no limit". */
static int json_ns(char *buf, size_t len, const char *key, int64_t v, bool more)
{
	if (v == CW_ADMIT_NO_LIMIT)
		return snprintf(buf, len, "\"%s\": null%s", key, more ? ", " : "");
	return snprintf(buf, len, "\"%s\": %" PRId64 "%s", key, v, more ? ", " : "");
}

int cw_disk_plan_format_json(const struct cw_disk_plan *p, const char *name, char *buf,
			     size_t len)
{
	size_t o = 0;
	int w;

#define PUT(expr)                                                       \
	do {                                                            \
		w = (expr);                                             \
		if (w < 0 || (size_t)w >= len - o)                      \
			return -ENOSPC;                                 \
		o += (size_t)w;                                         \
	} while (0)

	if (!p || !buf || !len)
		return -EINVAL;
	PUT(snprintf(buf + o, len - o, "{\"disk\": \"%s\", \"disk_id\": %" PRIu32
		     ", \"tasks\": %zu, \"utilization\": %.6f, ", name ? name : "", p->disk_id,
		     p->n_tasks, p->utilization));
	PUT(json_ns(buf + o, len - o, "delta_l_ns", p->delta_l_ns, true));
	PUT(json_ns(buf + o, len - o, "be_budget_ns", p->be_budget_ns, true));
	PUT(json_ns(buf + o, len - o, "idle_be_ns", p->idle_be_ns, true));
	PUT(snprintf(buf + o, len - o, "\"server_slice_ns\": %" PRId64 ", \"server_period_ns\": %"
		     PRId64 ", \"be_piece_bytes\": %" PRIu64 ", \"be_max_ns\": %" PRId64
		     ", \"be_reserve_period_ns\": %" PRId64 ", \"be_reserve_service_ns\": %" PRId64
		     ", \"be_starved\": %s}", p->server_slice_ns, p->server_period_ns,
		     p->be_piece_bytes, p->be_max_ns, p->be_reserve.period_ns,
		     p->be_reserve.service_ns, p->be_starved ? "true" : "false"));
#undef PUT
	return (int)o;
}
