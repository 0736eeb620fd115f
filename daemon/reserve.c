/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Static reservations of clockwised (Bosch & Mullender, section 3.1): the
 * QoS (bandwidth, block size, range, span) of an export becomes one task
 * (T, C) per disk its range touches through cw_admit_plan, which runs
 * Jeffay's non-preemptive EDF test on every disk; the reservation is made
 * only if every disk admits its part.  A disk with streams then gets its
 * scheduling core with the slack ΔL of its task set (section 3.2) and,
 * when that slack cannot hold one best-effort block, a periodic server
 * (section 3.3).
 */
#include "config.h"

#include <clockwise/units.h>

#include "daemon/pool-internal.h"

/* ---- reservations ---- */

/* Field i of "EXPORT:BANDWIDTH:BLOCK[:OFFSET:LENGTH[:START_S:END_S]]": a
 * rate, a size or a span bound (whole seconds). */
static int reservation_field(unsigned i, const char *s, uint64_t *ret, const char **ret_expected)
{
	int64_t ns;
	int r;

	if (i == 1) {
		*ret_expected = CW_UNITS_RATE_HELP;
		return cw_units_parse_rate(s, ret);
	}
	if (i < 5) {
		*ret_expected = CW_UNITS_SIZE_HELP;
		return cw_units_parse_size(s, ret);
	}
	*ret_expected = "a whole number of seconds, e.g. 30 or 10m";
	r = cw_units_parse_duration(s, CW_UNITS_S, &ns);
	if (r < 0)
		return r;
	if (ns % CW_UNITS_S || ns / CW_UNITS_S > INT32_MAX)
		return -EINVAL;
	*ret = (uint64_t)(ns / CW_UNITS_S);
	return 0;
}

int pb_reservation_parse(const char *spec, struct pb_reservation *ret, char *err, size_t errlen)
{
	char buf[512], *f[8], *save = NULL, *tok;
	const char *expected;
	uint64_t v[7] = { 0 };
	unsigned n = 0, i;

	if (strlen(spec) >= sizeof(buf)) {
		snprintf(err, errlen, "reservation \"%.40s...\" is too long", spec);
		return -EINVAL;
	}
	strcpy(buf, spec);
	for (tok = strtok_r(buf, ":", &save); tok && n < 8; tok = strtok_r(NULL, ":", &save))
		f[n++] = tok;
	if ((n != 3 && n != 5 && n != 7) || tok) {
		snprintf(err, errlen, "reservation \"%s\": expected "
			 "EXPORT:BANDWIDTH:BLOCK[:OFFSET:LENGTH[:START_S:END_S]]", spec);
		return -EINVAL;
	}
	if (!cw_name_valid(f[0])) {
		snprintf(err, errlen, "reservation \"%s\": \"%s\" is not an export name", spec, f[0]);
		return -EINVAL;
	}
	for (i = 1; i < n; i++) {
		if (reservation_field(i, f[i], &v[i], &expected) < 0) {
			snprintf(err, errlen, "reservation \"%s\": \"%s\": expected %s", spec, f[i],
				 expected);
			return -EINVAL;
		}
	}
	if (!v[2]) {
		snprintf(err, errlen, "reservation \"%s\": the block size must be > 0", spec);
		return -EINVAL;
	}
	if (n == 7 && v[6] && v[6] <= v[5]) {
		snprintf(err, errlen, "reservation \"%s\": the span ends before it starts", spec);
		return -EINVAL;
	}
	*ret = (struct pb_reservation){
		.bandwidth_bps = v[1], .block_bytes = v[2], .offset = v[3], .length = v[4],
		.span_start_s = (int64_t)v[5], .span_end_s = (int64_t)v[6],
	};
	snprintf(ret->export_name, sizeof(ret->export_name), "%s", f[0]);
	return 0;
}

void pb_resv_free(struct resv *rv)
{
	if (!rv)
		return;
	free(rv->period_ns);
	free(rv->service_ns);
	free(rv->parts);
	free(rv);
}

int pb_reserve(struct pb *pb, const struct pb_reservation *res, char *err, size_t errlen)
{
	struct cw_admit_plan plan = { 0 };
	struct cw_admit_disk *ad = NULL;
	struct cw_admit_layout lay = { 0 };
	struct cw_admit_qos qos = { 0 };
	uint32_t *ldisk = NULL;
	uint64_t *loff = NULL, size, fb, k;
	struct resv *rv = NULL, **arr;
	struct pbx *x;
	size_t i;
	int r;

	for (x = pb->exports; x; x = x->next)
		if (strcmp(x->name, res->export_name) == 0)
			break;
	if (!x) {
		snprintf(err, errlen, "reservation for %s: no such export", res->export_name);
		return -ENOENT;
	}
	if (x->resv) {
		snprintf(err, errlen, "reservation for %s: the export already has one", x->name);
		return -EEXIST;
	}
	size = cw_part_size_bytes(x->part);
	rv = calloc(1, sizeof(*rv));
	if (!rv)
		return -ENOMEM;
	rv->r = *res;
	rv->x = x;
	rv->lo = res->offset;
	rv->hi = res->length ? res->offset + res->length : size;
	if (rv->lo >= rv->hi || rv->hi > size || rv->hi < rv->lo) {
		snprintf(err, errlen, "reservation for %s: range [%" PRIu64 ", %" PRIu64
			 ") is not inside the partition (%" PRIu64 " bytes)", x->name, rv->lo,
			 rv->hi, size);
		r = -ERANGE;
		goto out;
	}
	rv->start_ns = pb->start_ns + res->span_start_s * CW_NS_PER_S;
	rv->end_ns = res->span_end_s ? pb->start_ns + res->span_end_s * CW_NS_PER_S : 0;
	rv->period_ns = calloc(PB_DISKS_CAP, sizeof(int64_t));
	rv->service_ns = calloc(PB_DISKS_CAP, sizeof(int64_t));
	fb = rv->lo / pb->block_size;
	lay.pblock_bytes = pb->block_size;
	lay.n_pblocks = (size_t)((rv->hi - 1) / pb->block_size - fb + 1);
	lay.first_bytes = rv->lo - fb * pb->block_size;
	lay.range_bytes = rv->hi - rv->lo;
	ldisk = calloc(lay.n_pblocks, sizeof(*ldisk));
	loff = calloc(lay.n_pblocks, sizeof(*loff));
	ad = calloc(pb->ndisks, sizeof(*ad));
	if (!rv->period_ns || !rv->service_ns || !ldisk || !loff || !ad) {
		r = -ENOMEM;
		goto out;
	}
	for (k = 0; k < lay.n_pblocks; k++) {
		struct cw_extent e;
		int di;

		r = cw_part_map(x->part, (fb + k) * pb->block_size, pb->block_size, &e);
		if (r < 0)
			goto out;
		di = pb_disk_index(pb, e.disk_id);
		if (di < 0) {
			r = di;
			goto out;
		}
		ldisk[k] = (uint32_t)di;
		loff[k] = e.phys_offset;
	}
	lay.disk = ldisk;
	lay.disk_off = loff;
	for (i = 0; i < pb->ndisks; i++)
		ad[i] = (struct cw_admit_disk){ disk_model(&pb->disks[i]), pb->disks[i].tasks,
						pb->disks[i].ntasks, pb->disks[i].be_reserve };
	qos = (struct cw_admit_qos){ .bandwidth_bps = res->bandwidth_bps,
				     .block_bytes = res->block_bytes,
				     .span_start_ns = rv->start_ns, .span_end_ns = rv->end_ns };
	r = cw_admit_plan(&qos, &lay, ad, pb->ndisks, &plan);
	if (r < 0) {
		snprintf(err, errlen, "reservation for %s: %s", x->name,
			 plan.reason[0] ? plan.reason : strerror(-r));
		goto out;
	}
	if (!plan.admitted) {
		/* The plan counts disks by index; people know them by name. */
		snprintf(err, errlen, "reservation for %s refused on disk %s: %s", x->name,
			 plan.failed_part < plan.n_parts ?
			 pb->disks[plan.parts[plan.failed_part].disk].name : "?", plan.reason);
		r = -EBUSY;
		goto out;
	}
	arr = realloc(pb->resvs, (pb->nresvs + 1) * sizeof(*arr));
	if (!arr) {
		r = -ENOMEM;
		goto out;
	}
	pb->resvs = arr;
	/* Commit: every part's task joins its disk's set. */
	for (i = 0; i < plan.n_parts; i++) {
		const struct cw_admit_part *pt = &plan.parts[i];
		struct disk *d = &pb->disks[pt->disk];
		struct cw_task *t = realloc(d->tasks, (d->ntasks + 1) * sizeof(*t));

		if (!t) {
			r = -ENOMEM;	/* earlier parts stay: the daemon stops on this */
			goto out;
		}
		d->tasks = t;
		d->tasks[d->ntasks++] = pt->task;
		rv->period_ns[pt->disk] = pt->task.period_ns;
		rv->service_ns[pt->disk] = pt->task.service_ns;
		cwd_log(LOG_INFO, "reservation %s: disk %s T=%" PRId64 " us C=%" PRId64 " us",
			x->name, d->name, pt->task.period_ns / 1000, pt->task.service_ns / 1000);
	}
	rv->parts = CW_TAKE_PTR(plan.parts);
	rv->nparts = plan.n_parts;
	rv->stream_period_ns = plan.stream_period_ns;
	rv->idx = pb->nresvs;
	pb->resvs[pb->nresvs++] = rv;
	x->resv = CW_TAKE_PTR(rv);
	r = 0;
out:
	cw_admit_plan_done(&plan);
	free(ldisk);
	free(loff);
	free(ad);
	pb_resv_free(rv);
	return r;
}

/* ΔL is what best effort may take before a stream's request with no time
 * to spare: a request then ends at its deadline in the model's terms, and
 * what the model does not see (the dispatcher's wake-up on a busy CPU, the
 * reply's way to the client, a disk slower than its calibration) makes it
 * late.  Best effort gets three quarters of ΔL, and at least 2 ms less
 * (1 ms let a stream's reply reach its client 0.2 ms late under load), so
 * that streams keep that much in hand. */
#define GUARD_MIN_NS (2 * CW_NS_PER_MS)

static void guard(struct cw_admit_result *res)
{
	if (res->delta_l_ns == CW_ADMIT_NO_LIMIT)
		return;
	res->delta_l_ns = CW_MAX(0, res->delta_l_ns - CW_MAX(GUARD_MIN_NS, res->delta_l_ns / 4));
}

/* The slack and BE server of disk d serving tasks: ΔL from Jeffay's test
 * (section 3.2) and, when neither ΔL nor the idle allowance holds the
 * largest BE piece, a periodic server (section 3.3) with the BE reserve's
 * period and the largest slice that fits.  Admission kept the reserve on
 * the disk, so that slice holds at least one piece. */
int pb_disk_plan(const struct disk *d, const struct cw_task *tasks, size_t n,
		 struct lane_plan *ret)
{
	_cleanup_free_ struct cw_task *all = NULL;
	struct cw_admit_result res;
	int64_t slice = 0, period = d->be_reserve.period_ns;
	int r;

	*ret = (struct lane_plan){ 0 };
	r = cw_admit_test(tasks, n, &res);
	if (r == 0 && !res.schedulable)
		r = -EBUSY;
	if (r < 0) {
		cwd_log(LOG_ERR, "disk %s: the admitted streams are not schedulable: %s", d->name,
			r == -EBUSY ? res.reason : strerror(-r));
		return r;
	}
	guard(&res);
	if (n && CW_MAX(res.delta_l_ns, res.idle_be_ns) < d->be_max_ns) {
		all = malloc((n + 1) * sizeof(*all));
		if (!all)
			return -ENOMEM;
		memcpy(all, tasks, n * sizeof(*all));
		r = cw_admit_server_fit(tasks, n, period, 0, &slice);
		if (r < 0)
			return r;
		if (slice < d->be_max_ns)
			cwd_log(LOG_WARNING, "disk %s: its streams leave best-effort pieces of %"
				PRId64 " us no room (server slice %" PRId64 " us): they fail", d->name,
				d->be_max_ns / 1000, slice / 1000);
		if (slice > 0) {
			all[n] = (struct cw_task){ period, slice, 0, 0 };
			r = cw_admit_test(all, n + 1, &res);
			if (r < 0)
				return r;
			guard(&res);
			ret->server_slice_ns = slice;
			ret->server_period_ns = period;
		}
	}
	ret->delta_l_ns = res.delta_l_ns == CW_ADMIT_NO_LIMIT ? INT64_MAX / 4 : res.delta_l_ns;
	ret->idle_be_ns = res.idle_be_ns == CW_ADMIT_NO_LIMIT ? INT64_MAX / 4 : res.idle_be_ns;
	if (slice)
		cwd_log(LOG_INFO, "disk %s: %zu stream part%s, policy %s, slack %" PRId64 " us, "
			"BE server %" PRId64 " us every %" PRId64 " ms", d->name, n,
			n == 1 ? "" : "s", cw_sched_policy_name(d->policy),
			ret->delta_l_ns / 1000, slice / 1000, period / CW_NS_PER_MS);
	else
		cwd_log(LOG_INFO, "disk %s: %zu stream part%s, policy %s, slack %" PRId64 " us",
			d->name, n, n == 1 ? "" : "s", cw_sched_policy_name(d->policy),
			n ? ret->delta_l_ns / 1000 : 0);
	return 0;
}

/* The scheduling core of a disk with streams admitted at start (-r). */
int pb_disk_sched(struct disk *d)
{
	struct cw_sched_opts o;
	struct lane_plan pl;
	int r;

	r = pb_disk_plan(d, d->tasks, d->ntasks, &pl);
	if (r < 0)
		return r;
	cw_sched_opts_init(&o);
	o.policy = d->policy;
	o.delta_l_ns = pl.delta_l_ns;
	o.idle_be_ns = pl.idle_be_ns;
	o.server_slice_ns = pl.server_slice_ns;
	o.server_period_ns = pl.server_period_ns;
	return cw_sched_new(&o, &d->lanes[0].sched);
}
