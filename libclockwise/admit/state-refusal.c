/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Refusals in words: whose deadline a refused test is about (the new
 * stream, a reservation, an export's start-up stream, the best-effort
 * reserve) and which condition of the test failed, with its numbers in
 * units people read.  ast_refuse() writes every other refusal's reason.
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include <clockwise/units.h>

#include "admit/state-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

void ast_refuse(struct cw_admit_refusal *ref, const char *fmt, ...)
{
	va_list ap;

	if (!ref)
		return;
	va_start(ap, fmt);
	vsnprintf(ref->reason, sizeof(ref->reason), fmt, ap);
	va_end(ap);
}

const char *cw_admit_who_name(enum cw_admit_who w)
{
	switch (w) {
	case CW_ADMIT_WHO_NEW: return "new";
	case CW_ADMIT_WHO_RESV: return "resv";
	case CW_ADMIT_WHO_STARTUP: return "start-up";
	case CW_ADMIT_WHO_RESERVE: return "best-effort-reserve";
	case CW_ADMIT_WHO_ALL: return "all";
	case CW_ADMIT_WHO_REBUILD: return "rebuild-reserve";
	}
	return "?";
}

/* Whose deadline a refusal is about: owner (NULL for the new stream) or
 * one of the CW_ADMIT_FAIL_* stand-ins, with its task on the disk. */
void ast_refusal_who(struct cw_admit_refusal *ref, size_t fail,
		     const struct cw_admit_resv *owner, const struct cw_task *task)
{
	if (fail == CW_ADMIT_FAIL_RESERVE)
		ref->who = CW_ADMIT_WHO_RESERVE;
	else if (fail == CW_ADMIT_FAIL_REBUILD)
		ref->who = CW_ADMIT_WHO_REBUILD;
	else if (fail == CW_ADMIT_FAIL_ALL)
		ref->who = CW_ADMIT_WHO_ALL;
	else if (!owner)
		ref->who = CW_ADMIT_WHO_NEW;
	else if (owner->persistent)
		ref->who = CW_ADMIT_WHO_RESV;
	else
		ref->who = CW_ADMIT_WHO_STARTUP;
	if (owner && owner->persistent)
		ref->resv_id = owner->id;
	if (owner && !owner->persistent)
		snprintf(ref->export_name, sizeof(ref->export_name), "%s", owner->export_name);
	if (task)
		ref->task = *task;
}

void ast_who_text(const struct cw_admit_refusal *ref, char *buf, size_t len)
{
	switch (ref->who) {
	case CW_ADMIT_WHO_RESV:
		snprintf(buf, len, "reservation %" PRIu64, ref->resv_id);
		break;
	case CW_ADMIT_WHO_STARTUP:
		snprintf(buf, len, "the start-up stream of export %s", ref->export_name);
		break;
	case CW_ADMIT_WHO_RESERVE:
		snprintf(buf, len, "the best-effort reserve");
		break;
	case CW_ADMIT_WHO_REBUILD:
		snprintf(buf, len, "the rebuild's reserve");
		break;
	default:
		snprintf(buf, len, "the new stream");
		break;
	}
}

/* The refused test of ref->part in words and units, after "prefix": which
 * stream would miss its deadline and why.  block and rate are the named
 * stream's (0: unknown); with says what changed ("with the new stream"). */
void ast_refusal_words(struct cw_admit_refusal *ref, const char *prefix, uint64_t block,
		       uint64_t rate, const char *with)
{
	const struct cw_admit_result *res = &ref->part.result;
	const struct cw_task *t = &ref->task;
	char who[CW_NAME_MAX + 64], c[CW_UNITS_BUF], per[CW_UNITS_BUF], b[CW_UNITS_BUF];
	char r[CW_UNITS_BUF], l[CW_UNITS_BUF], need[CW_UNITS_BUF];

	ast_who_text(ref, who, sizeof(who));
	cw_units_format_duration3(t->service_ns, c);
	cw_units_format_duration3(t->period_ns, per);
	if (res->why == CW_ADMIT_UTILIZATION && ref->who != CW_ADMIT_WHO_ALL) {
		ast_refuse(ref, "%sone %s%srequest of %s takes %s, longer than the %s between "
			   "its requests on this disk%s%s (condition (1): C > T)", prefix,
			   block ? cw_units_format_size(block, b) : "", block ? " " : "", who, c,
			   per, rate ? " at " : "", rate ? cw_units_format_rate(rate, r) : "");
	} else if (res->why == CW_ADMIT_UTILIZATION) {
		ast_refuse(ref, "%sits streams %s would keep it busy %.1f%% of the time "
			   "(condition (1): more than 100%%)", prefix, with,
			   100 * res->utilization);
	} else if (res->why == CW_ADMIT_BLOCKING) {
		ast_refuse(ref, "%sa request of %s takes up to %s; started just before the "
			   "requests of the streams with shorter periods come, it leaves them %s "
			   "of disk work to do within %s, %s too much: one would miss its "
			   "deadline (condition (2))",
			   prefix, who, c, cw_units_format_duration3(res->fail_need_ns, need),
			   cw_units_format_duration3(res->fail_l_ns, l),
			   cw_units_format_duration3(res->fail_need_ns - res->fail_l_ns, per));
	} else if (res->why == CW_ADMIT_DEMAND && ref->who != CW_ADMIT_WHO_ALL) {
		ast_refuse(ref, "%sone %s%srequest of %s takes %s, longer than the %s within which "
			   "it is due%s%s (C > D)", prefix,
			   block ? cw_units_format_size(block, b) : "", block ? " " : "", who, c,
			   cw_units_format_duration3(res->fail_l_ns, l),
			   rate ? " at " : "", rate ? cw_units_format_rate(rate, r) : "");
	} else if (res->why == CW_ADMIT_DEMAND) {
		ast_refuse(ref, "%sits streams %s could ask for %s of disk work due within %s, %s "
			   "too much: one would miss its deadline (the demand of requests due "
			   "sooner than the stream's next one on this disk)", prefix, with,
			   cw_units_format_duration3(res->fail_need_ns, need),
			   cw_units_format_duration3(res->fail_l_ns, l),
			   cw_units_format_duration3(res->fail_need_ns - res->fail_l_ns, per));
	} else {
		ast_refuse(ref, "%s%s", prefix, res->reason);
	}
}
