/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Reservation commands of the control server: the paper's QoS requests
 * (Bosch & Mullender, section 3.1), a stream of b-byte blocks at B bytes
 * per second over a range of a partition.  Admission itself is the
 * admission state's (clockwise/admit-state.h): every disk takes its part
 * or nothing is booked, the pool database first; these handlers turn
 * requests into its calls and its answers into replies.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "control-internal.h"

static json_object *resv_json(struct cwc_server *srv, const struct cw_admit_resv *r, bool full)
{
	json_object *o = json_object_new_object(), *parts;
	int64_t now = srv->o.clock_ns();
	const struct cwc_export *e;
	pid_t claimant = 0;

	cwc_add(o, "id", cw_ctl_json_u64(r->id));
	cwc_add(o, "part", cwc_jstr(r->part));
	cwc_add(o, "static", json_object_new_boolean(!r->persistent));
	if (!r->persistent)
		cwc_add(o, "export", cwc_jstr(r->export_name));
	cwc_add(o, "rate", cw_ctl_json_u64(r->rate_bps));
	cwc_add(o, "block", cw_ctl_json_u64(r->block_bytes));
	cwc_add(o, "range_start", cw_ctl_json_u64(r->range_start_bytes));
	cwc_add(o, "range_end", cw_ctl_json_u64(r->range_end_bytes));
	cwc_add(o, "period_ns", json_object_new_int64(r->period_ns));
	cwc_add(o, "due", cwc_jstr(cw_admit_due_name(r->due)));
	cwc_add(o, "lead_ns", json_object_new_int64(r->lead_ns));
	cwc_add(o, "survive", json_object_new_int(r->survive));
	cwc_add(o, "record", json_object_new_boolean(r->record));
	/* Times relative to now: the clock is the server's monotonic one. */
	cwc_add(o, "starts_in_ns", r->span_start_ns ?
		json_object_new_int64(r->span_start_ns - now) : NULL);
	cwc_add(o, "ends_in_ns", r->span_end_ns ? json_object_new_int64(r->span_end_ns - now)
						: NULL);
	cwc_add(o, "disks", json_object_new_int64((int64_t)r->n_parts));
	if (r->move_id)
		cwc_add(o, "move", cw_ctl_json_u64(r->move_id));
	/* Rule 2 for its partition's SSD cache (control-cache.c). */
	for (size_t i = 0; i < r->n_parts; i++)
		if (r->parts[i].copy) {
			cwc_add(o, "cache", cwc_jstr("booked"));
			break;
		}
	if (r->cache_refused[0]) {
		cwc_add(o, "cache", cwc_jstr("refused"));
		cwc_add(o, "cache_refused", cwc_jstr(r->cache_refused));
	}
	/* The process whose connections alone may hold its export's
	 * real-time priority (resv.claim), while it lives. */
	e = cwc_resv_export(srv, r->id);
	if (e && srv->o.hooks.export_claim &&
	    srv->o.hooks.export_claim(srv->o.hooks.userdata, e, -1, &claimant) == 0 && claimant)
		cwc_add(o, "claimed_by", json_object_new_int64(claimant));
	if (!full)
		return o;
	parts = json_object_new_array();
	for (size_t i = 0; i < r->n_parts; i++) {
		const struct cw_admit_resv_part *p = &r->parts[i];
		json_object *po = json_object_new_object();
		struct cw_disk_info d;

		cwc_add(po, "disk_id", json_object_new_int64(p->disk_id));
		if (cw_disk_info(srv->pool, p->disk_id, &d) == 0)
			cwc_add(po, "disk", cwc_jstr(d.name));
		cwc_add(po, "period_ns", json_object_new_int64(p->task.period_ns));
		cwc_add(po, "service_ns", json_object_new_int64(p->task.service_ns));
		cwc_add(po, "deadline_ns", json_object_new_int64(cw_task_deadline_ns(&p->task)));
		cwc_add(po, "requests", cw_ctl_json_u64(p->requests));
		cwc_add(po, "stride", cw_ctl_json_u64(p->stride));
		cwc_add(po, "cache", json_object_new_boolean(p->copy));
		json_object_array_add(parts, po);
	}
	cwc_add(o, "per_disk", parts);
	return o;
}

void cwc_resv_expire(struct cwc_server *srv)
{
	int64_t now = srv->o.clock_ns();
	const struct cw_admit_resv *r;

	/* A reservation whose time span is over holds nothing any more;
	 * one an export is still bound to stays until the export goes; a
	 * start-up one stays with the daemon.  A database that refuses now
	 * is asked again next time.  The room they leave on SSD caches is
	 * the admission state's to give (cw_admit_state_release). */
	for (size_t i = 0; (r = cw_admit_state_resv_at(srv->adm, i));) {
		if (r->persistent && r->span_end_ns && r->span_end_ns <= now &&
		    !cwc_resv_export(srv, r->id) &&
		    cw_admit_state_release(srv->adm, r->id, NULL) == 0) {
			cwc_caches_notice(srv);
			continue;
		}
		i++;
	}
}

/* A dry run admitted: what was asked, and how far the rate could go. */
static int resv_dry_run(struct ctx *c, const struct cw_admit_request *rq, json_object **ret)
{
	uint64_t max = 0;
	int r = cw_admit_state_headroom(c->srv->adm, rq, &max, NULL);

	*ret = json_object_new_object();
	cwc_add(*ret, "dry_run", json_object_new_boolean(1));
	cwc_add(*ret, "admitted", json_object_new_boolean(1));
	cwc_add(*ret, "part", cwc_jstr(rq->part));
	cwc_add(*ret, "rate", cw_ctl_json_u64(rq->rate_bps));
	cwc_add(*ret, "block", cw_ctl_json_u64(rq->block_bytes));
	cwc_add(*ret, "max_rate", r == 0 ? cw_ctl_json_u64(max) : NULL);
	return 0;
}

int cwc_cmd_resv_create(struct ctx *c, json_object **ret)
{
	struct cwc_server *srv = c->srv;
	uint64_t start = 0, duration = 0, survive = 0;
	struct cw_admit_request rq = { .part = cw_ctl_arg_str(c->req, "part"), .persistent = true };
	const struct cw_admit_resv *rv;
	struct cw_admit_refusal ref;
	const char *due;
	int r;

	cw_ctl_arg_uint(c->req, "rate", &rq.rate_bps);
	cw_ctl_arg_uint(c->req, "block", &rq.block_bytes);
	cw_ctl_arg_uint(c->req, "range_start", &rq.range_start_bytes);
	cw_ctl_arg_uint(c->req, "range_end", &rq.range_end_bytes);
	cw_ctl_arg_uint(c->req, "start", &start);
	cw_ctl_arg_uint(c->req, "duration", &duration);
	if (start > INT64_MAX / 4 || duration > INT64_MAX / 4)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "start or duration too far in the future");
	rq.start_in_ns = (int64_t)start;
	rq.duration_ns = (int64_t)duration;
	cw_ctl_arg_bool(c->req, "dry_run", &rq.dry_run);
	due = cw_ctl_arg_str(c->req, "due");
	if (due && cw_admit_due_parse(due, &rq.due) < 0)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "due \"%s\": expected disk or stream", due);
	cw_ctl_arg_bool(c->req, "record", &rq.record);
	/* absent: 1 on a mirrored partition, 0 on one copy */
	if (cw_ctl_arg_uint(c->req, "survive", &survive)) {
		if (survive > 1)
			return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "survive %" PRIu64 ": expected 0 or "
					"1 (the disks a stream survives the loss of)", survive);
		rq.survive = survive ? CW_ADMIT_SURVIVE_ON : CW_ADMIT_SURVIVE_OFF;
	}
	/* The admission state keeps the rules on the way, for every caller:
	 * its range stays out of the SSD cache until its stream is booked
	 * there, and a running move that takes blocks of the range to other
	 * disks has it booked on both sides (cw_admit_state_reserve). */
	r = cw_admit_state_reserve(srv->adm, &rq, &rv, &ref, NULL);
	cwc_caches_notice(srv);
	if (r == -ENOENT && !ref.reason[0])
		return cwc_fail(c, CW_CTL_E_NOT_FOUND, "no partition \"%s\"", rq.part);
	if (r == -ENOMEM)
		return cwc_fail(c, CW_CTL_E_INTERNAL, "out of memory");
	if (r < 0)
		return cwc_fail_refused(c, r, &ref);
	if (rq.dry_run)
		return resv_dry_run(c, &rq, ret);
	*ret = resv_json(srv, rv, true);
	return 0;
}

static const struct cw_admit_resv *resv_arg(struct ctx *c)
{
	uint64_t id = 0;
	const struct cw_admit_resv *r;

	cw_ctl_arg_uint(c->req, "id", &id);
	r = cw_admit_state_resv_find(c->srv->adm, id);
	if (!r)
		cwc_fail(c, CW_CTL_E_NOT_FOUND, "no reservation %" PRIu64, id);
	return r;
}

int cwc_cmd_resv_list(struct ctx *c, json_object **ret)
{
	json_object *a = json_object_new_array();
	const struct cw_admit_resv *r;

	for (size_t i = 0; (r = cw_admit_state_resv_at(c->srv->adm, i)); i++)
		json_object_array_add(a, resv_json(c->srv, r, false));
	*ret = a;
	return 0;
}

int cwc_cmd_resv_show(struct ctx *c, json_object **ret)
{
	const struct cw_admit_resv *r = resv_arg(c);

	if (!r)
		return -1;
	*ret = resv_json(c->srv, r, true);
	return 0;
}

int cwc_cmd_resv_release(struct ctx *c, json_object **ret)
{
	const struct cw_admit_resv *r = resv_arg(c);
	const struct cwc_export *e;
	uint64_t id;
	int rc;

	if (!r)
		return -1;
	id = r->id;
	e = cwc_resv_export(c->srv, id);
	if (e)
		return cwc_fail(c, CW_CTL_E_BUSY, "reservation %" PRIu64 " is bound to export %s", id,
				e->name);
	rc = cw_admit_state_release(c->srv->adm, id, NULL);
	if (rc < 0)
		return cwc_fail_pool(c, rc, "releasing the reservation");
	/* The room it leaves may let a move postponed by rule 2 run.  That
	 * stays here: moves are journalled, paused and resumed by the control
	 * server (control-move.c), which wakes the daemon's mover; admission
	 * only books streams, and a -r stream is never released. */
	cwc_moves_retry_postponed(c->srv);
	cwc_caches_notice(c->srv);
	*ret = json_object_new_object();
	cwc_add(*ret, "id", cw_ctl_json_u64(id));
	return 0;
}

/* Only the connections of one process (the caller's by default, on a
 * unix socket) may hold the real-time priority of the reservation's
 * export from now on, until that process ends: without a claim the first
 * connection to ask holds it, and a client that connects before the
 * player, or again and again, takes it from the player. */
int cwc_cmd_resv_claim(struct ctx *c, json_object **ret)
{
	const struct cw_admit_resv *r = resv_arg(c);
	const struct cwc_export *e;
	uint64_t arg = 0;
	bool drop = false;
	pid_t pid, now = 0;
	int rc;

	if (!r)
		return -1;
	e = cwc_resv_export(c->srv, r->id);
	if (!e)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "reservation %" PRIu64 " is bound to no "
				"export: nothing to claim (cwctl export add PART --resv %" PRIu64 ")",
				r->id, r->id);
	if (!c->srv->o.hooks.export_claim)
		return cwc_fail(c, CW_CTL_E_NOT_SUPPORTED, "this server serves no exports");
	cw_ctl_arg_bool(c->req, "drop", &drop);
	if (cw_ctl_arg_uint(c->req, "pid", &arg) && drop)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "pid and drop exclude each other");
	if (drop)
		pid = 0;
	else if (arg)
		pid = arg <= INT32_MAX ? (pid_t)arg : -1;
	else
		pid = c->pid;
	if (pid < 0)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "pid %" PRIu64 ": not a process id", arg);
	if (!drop && pid == 0)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "the caller's process is not known: give "
				"its pid");
	rc = c->srv->o.hooks.export_claim(c->srv->o.hooks.userdata, e, pid, &now);
	if (rc == -ESRCH)
		return cwc_fail(c, CW_CTL_E_NOT_FOUND, "no process %d", (int)pid);
	if (rc == -ENOENT)
		return cwc_fail(c, CW_CTL_E_UNAVAILABLE, "export %s is not served (its partition "
				"has blocks on a missing disk)", e->name);
	if (rc < 0)
		return cwc_fail_pool(c, rc, "claiming the reservation");
	*ret = json_object_new_object();
	cwc_add(*ret, "id", cw_ctl_json_u64(r->id));
	cwc_add(*ret, "export", cwc_jstr(e->name));
	cwc_add(*ret, "claimed_by", now ? json_object_new_int64(now) : NULL);
	return 0;
}
