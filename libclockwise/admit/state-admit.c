/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Admitting a stream (Bosch & Mullender, section 3.1): a request is
 * checked and its range laid out with each disk's tasks (struct
 * prepared), planned at its rate over every disk it touches and the host,
 * tested against the streams there and the exports' best-effort
 * reservations, and booked, or refused with the largest rate that fits
 * (found by bisection, as the headroom is).  Releasing a reservation is
 * here too.  The public reserve and release (state-stream.c) wrap these
 * steps with the SSD cache's rule.
 *
 * Invariant: a disk's task set is exactly the parts on it of the
 * reservations in st->resvs, and each part was admitted (cw_admit_plan's
 * windowed test, with the disk's best-effort reserve) beside the parts
 * before it.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/units.h>

#include "admit/state-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#define RESV_MAX 4096

/* Puts the words fmt says before ref's reason. */
static void refusal_prefix(struct cw_admit_refusal *ref, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void refusal_prefix(struct cw_admit_refusal *ref, const char *fmt, ...)
{
	char was[sizeof(ref->reason)], pre[160];
	va_list ap;

	if (!ref)
		return;
	va_start(ap, fmt);
	vsnprintf(pre, sizeof(pre), fmt, ap);
	va_end(ap);
	memcpy(was, ref->reason, sizeof(was));
	/* cut at the buffer's end, as ast_refuse() does */
	strncpy(ref->reason, pre, sizeof(ref->reason) - 1);
	ref->reason[sizeof(ref->reason) - 1] = '\0';
	strncat(ref->reason, was, sizeof(ref->reason) - 1 - strlen(ref->reason));
}

void ast_prepared_done(struct prepared *p)
{
	for (size_t i = 0; p->tasks && i < p->rl.n_disks; i++)
		free(p->tasks[i]);
	for (size_t i = 0; p->owner && i < p->rl.n_disks; i++)
		free(p->owner[i]);
	free(p->tasks);
	free(p->owner);
	free(p->ad);
	ast_range_layout_done(&p->rl);
}

/* Whether a stream that must survive a disk is booked on disk id. */
static bool holds_survivor(const struct cw_admit_state *st, uint32_t id)
{
	for (size_t i = 0; i < st->n_resvs; i++)
		if (st->resvs[i]->survive && cw_admit_resv_part_on(st->resvs[i], id))
			return true;
	return false;
}

/* The tasks, owners and reserves of every disk of p->rl that has a model:
 * the rebuild's reserve where a stream that must survive is planned or
 * booked (a disk it relies on in some failure case). */
static int prepare_disks(const struct cw_admit_state *st, struct prepared *p)
{
	size_t n = p->rl.n_disks ? p->rl.n_disks : 1;

	p->ad = calloc(n, sizeof(*p->ad));
	p->tasks = calloc(n, sizeof(*p->tasks));
	p->owner = calloc(n, sizeof(*p->owner));
	if (!p->ad || !p->tasks || !p->owner)
		return -ENOMEM;
	for (size_t i = 0; i < p->rl.n_disks; i++) {
		const struct dstate *d = st->disks[p->rl.disks[i].id];
		int r;

		if (!d)
			continue;	/* no block of the range is on it */
		r = ast_disk_tasks(st, d->id, &p->tasks[i], &p->owner[i], &p->ad[i].n_tasks);
		if (r < 0)
			return r;
		p->ad[i].model = &d->model;
		p->ad[i].tasks = p->tasks[i];
		/* Streams never take the room of best-effort I/O (admit.h). */
		p->ad[i].be_reserve = d->plan.be_reserve;
		if ((p->survive || holds_survivor(st, d->id)) && d->plan.be_piece_bytes &&
		    cw_admit_rebuild_reserve(&d->model, d->plan.be_piece_bytes,
					     st->o.rebuild_share_ppm, &p->ad[i].rebuild_reserve) < 0)
			p->ad[i].rebuild_reserve = (struct cw_task){ 0 };
	}
	return 0;
}

/* A new stream is tested against the host too. */
static void prepare_host(const struct cw_admit_state *st, struct prepared *p)
{
	p->host = cw_host_model_none(&st->host) ? NULL : &st->host;
	p->host_others_ps = p->host ? ast_host_need(st) : 0;
}

/* Everything of req but its rate, checked; the range laid out. */
int ast_prepare(struct cw_admit_state *st, const struct cw_admit_request *req,
		struct prepared *p, struct cw_admit_refusal *ref)
{
	int64_t now = st->o.clock_ns();
	struct cw_part *part;
	char a[CW_UNITS_BUF], b[CW_UNITS_BUF];
	int r;

	if (!req || !req->part) {
		ast_refuse(ref, "no partition named");
		return -EINVAL;
	}
	r = cw_part_lookup(st->pool, req->part, &part);
	if (r == -ENOENT)
		ast_refuse(ref, "no partition \"%s\"", req->part);
	if (r == 0)
		r = cw_part_info(part, &p->pi);
	if (r < 0)
		return r;
	p->end = req->range_end_bytes ? req->range_end_bytes : p->pi.size_bytes;
	if (req->block_bytes == 0) {
		ast_refuse(ref, "the block size must be positive");
		return -EINVAL;
	}
	if (req->range_start_bytes >= p->end || p->end > p->pi.size_bytes) {
		ast_refuse(ref, "range %" PRIu64 ":%" PRIu64 " is not inside partition %s (%" PRIu64
			   " bytes)", req->range_start_bytes, p->end, p->pi.name, p->pi.size_bytes);
		return -EINVAL;
	}
	if (req->block_bytes > p->end - req->range_start_bytes) {
		ast_refuse(ref, "a block of %s is larger than %s (%s)",
			   cw_units_format_size(req->block_bytes, a),
			   req->range_start_bytes || req->range_end_bytes ?
			   "the range reserved" : "the partition",
			   cw_units_format_size(p->end - req->range_start_bytes, b));
		return -EINVAL;
	}
	if (req->start_in_ns < 0 || req->duration_ns < 0 ||
	    req->start_in_ns > (INT64_MAX - now) / 2 || req->duration_ns > (INT64_MAX - now) / 2) {
		ast_refuse(ref, "start or duration out of range");
		return -EINVAL;
	}
	r = ast_range_layout(st, part, req->range_start_bytes, p->end, &p->rl, ref);
	if (r < 0) {
		if (ref && !ref->reason[0])
			ast_refuse(ref, "mapping the range: %s", strerror(-r));
		return r;
	}
	if (req->survive == CW_ADMIT_SURVIVE_ON && p->pi.copies <= 1) {
		ast_refuse(ref, "partition %s keeps one copy of each block: no stream on it can "
			   "survive the loss of a disk (--survive 0, or a partition made with "
			   "--copies 2)", p->pi.name);
		return -EINVAL;
	}
	p->survive = p->pi.copies > 1 && req->survive != CW_ADMIT_SURVIVE_OFF;
	p->record = p->pi.copies > 1 && req->record;
	p->rl.l.thick = p->record;
	r = prepare_disks(st, p);
	if (r < 0)
		return r;
	if (!cw_admit_due_name(req->due)) {
		ast_refuse(ref, "unknown deadline rule");
		return -EINVAL;
	}
	prepare_host(st, p);
	p->q = (struct cw_admit_qos){ .block_bytes = req->block_bytes, .due = req->due };
	if (req->start_in_ns || req->duration_ns) {
		p->q.span_start_ns = now + req->start_in_ns;
		p->q.span_end_ns = req->duration_ns ? p->q.span_start_ns + req->duration_ns : 0;
	}
	return 0;
}

/* ast_prepare(), and each block of the range also where a move puts it:
 * req->move_id's (none if that move is over), or else the running move
 * that takes blocks of the range to other disks.  That is rule 2 the
 * other way: a stream reserved while a move runs is booked on both sides
 * of it, as one admitted before the move began, and settles where its
 * blocks lie once the move is over (cw_admit_state_moves_settle).  Here,
 * not in a caller, so that cwctl, clockwised -r and cwsim take one path;
 * a move that is paused (postponed by the rule) is no move yet: the
 * stream is booked where its range lies, and the move books it on both
 * sides when it is tried again. */
static int prepare_req(struct cw_admit_state *st, const struct cw_admit_request *req,
		       struct prepared *p, struct cw_admit_refusal *ref)
{
	struct cw_part *part;
	int r = ast_prepare(st, req, p, ref);

	if (r < 0)
		return r;
	r = cw_part_lookup(st->pool, req->part, &part);
	p->move_id = req->move_id;
	if (r == 0 && !p->move_id)
		r = ast_range_moving(st, part, req->range_start_bytes, p->end, &p->move_id, ref);
	if (r == 0 && p->move_id)
		r = ast_range_layout_move(st, part, p->move_id, req->range_start_bytes, &p->rl,
					  ref);
	return r;
}

/* A stream of block-byte requests on disk id alone, anywhere on it. */
static int prepare_disk(struct cw_admit_state *st, uint32_t id, uint64_t block,
			struct prepared *p, struct cw_admit_refusal *ref)
{
	const struct dstate *d = id <= CW_DISKS_MAX ? st->disks[id] : NULL;
	size_t n, at = SIZE_MAX;
	int r;

	if (!d)
		return -ENOENT;
	if (block == 0 || block > d->model.capacity_bytes) {
		ast_refuse(ref, "the block size must be positive and fit on disk %s", d->name);
		return -EINVAL;
	}
	r = cw_disk_list(st->pool, &p->rl.disks, &p->rl.n_disks);
	if (r < 0)
		return r;
	for (size_t i = 0; i < p->rl.n_disks; i++)
		if (p->rl.disks[i].id == id)
			at = i;
	if (at == SIZE_MAX)
		return -ENOENT;
	n = (size_t)((block + st->block - 1) / st->block);
	p->rl.disk_idx = calloc(n, sizeof(*p->rl.disk_idx));
	if (!p->rl.disk_idx)
		return -ENOMEM;
	for (size_t k = 0; k < n; k++)
		p->rl.disk_idx[k] = (uint32_t)at;
	p->rl.l = (struct cw_admit_layout){ .pblock_bytes = st->block, .n_pblocks = n,
					    .disk = p->rl.disk_idx, .range_bytes = block };
	p->q = (struct cw_admit_qos){ .block_bytes = block };
	prepare_host(st, p);
	return prepare_disks(st, p);
}

int ast_plan_at(const struct prepared *p, uint64_t rate, struct cw_admit_plan *plan)
{
	struct cw_admit_qos q = p->q;
	int r;

	q.bandwidth_bps = rate;
	cw_admit_plan_done(plan);
	r = (p->survive ? cw_admit_plan_survive : cw_admit_plan)(&q, &p->rl.l, p->ad,
								 p->rl.n_disks, plan);
	if (r == 0 && p->host)
		r = cw_admit_plan_host(plan, &q, p->host, p->host_others_ps);
	return r;
}

/* The host refused what every disk admitted: no disk, the new stream. */
static void refusal_host(const struct prepared *p, const struct cw_admit_plan *plan,
			 struct cw_admit_refusal *ref)
{
	char words[CW_ADMIT_REASON_MAX + 64];

	ref->who = CW_ADMIT_WHO_NEW;
	ref->part.result.why = CW_ADMIT_HOST;
	ref->host = plan->host;
	cw_host_result_words(p->host, &plan->host, words, sizeof(words));
	ast_refuse(ref, "refused for the host: %s", words);
}

/* Fills ref from plan's refused part, for the stream p asked at rate;
 * after_verb: the words follow "reservation N would be" (ast_refusal_prefix). */
void ast_refusal_of_plan(const struct prepared *p, const struct cw_admit_plan *plan,
			 uint64_t rate, bool after_verb, struct cw_admit_refusal *ref)
{
	const struct cw_admit_part *pt;
	const struct cw_disk_info *d;
	size_t f;
	const struct cw_admit_resv *owner = NULL;
	const struct cw_task *task;
	uint64_t block = p->q.block_bytes;
	char prefix[3 * CW_NAME_MAX + 96];

	if (!ref)
		return;
	memset(ref, 0, sizeof(*ref));
	if (plan->host.refused) {
		refusal_host(p, plan, ref);
		return;
	}
	pt = &plan->parts[plan->failed_part];
	d = &p->rl.disks[pt->disk];
	f = pt->fail_disk_task;
	task = &pt->task;
	ref->disk_id = d->id;
	snprintf(ref->disk, sizeof(ref->disk), "%s", d->name);
	ref->part = *pt;
	ref->part.result.reason[sizeof(ref->part.result.reason) - 1] = '\0';
	if (f == CW_ADMIT_FAIL_RESERVE) {
		task = &p->ad[pt->disk].be_reserve;
		block = rate = 0;
	} else if (f == CW_ADMIT_FAIL_ALL) {
		task = NULL;
	} else if (f != CW_ADMIT_FAIL_SELF && f < p->ad[pt->disk].n_tasks) {
		owner = p->owner[pt->disk][f];
		task = &p->tasks[pt->disk][f];
		block = owner->block_bytes;
		rate = owner->rate_bps;
	}
	if (f == CW_ADMIT_FAIL_REBUILD) {
		task = &p->ad[pt->disk].rebuild_reserve;
		block = rate = 0;
	}
	ast_refusal_who(ref, f, owner, task);
	ast_refusal_prefix(p, plan, after_verb, prefix, sizeof(prefix));
	ast_refusal_words(ref, prefix, block, rate, "with the new stream");
}

/* The words before a refusal's reason: the disk that refused and, in a
 * failure case, the disk taken for lost, "with disk F failed, refused on
 * disk D: " (or, after "reservation N would be", "refused on disk D with
 * disk F failed: "). */
void ast_refusal_prefix(const struct prepared *p, const struct cw_admit_plan *plan,
			bool after_verb, char *buf, size_t len)
{
	const char *d = p->rl.disks[plan->parts[plan->failed_part].disk].name;

	if (plan->failed < p->rl.n_disks) {
		const char *f = p->rl.disks[plan->failed].name;

		if (after_verb)
			snprintf(buf, len, "refused on disk %s with disk %s failed: ", d, f);
		else
			snprintf(buf, len, "with disk %s failed, refused on disk %s: ", f, d);
	} else if (plan->failed == CW_ADMIT_ANY_FAILURE && plan->worst_case < p->rl.n_disks) {
		const char *f = p->rl.disks[plan->worst_case].name;

		if (after_verb)
			snprintf(buf, len, "refused on disk %s to survive any one disk (at worst "
				 "disk %s failed): ", d, f);
		else
			snprintf(buf, len, "to survive any one disk (at worst disk %s failed), "
				 "refused on disk %s: ", f, d);
	} else {
		snprintf(buf, len, "refused on disk %s: ", d);
	}
}

/* The largest rate at which p is admitted (0: none) by bisection, and the
 * plan refusing one byte per second more (none when even a period of
 * 1 ns fits). */
static int largest_rate(const struct prepared *p, uint64_t *ret, struct cw_admit_plan *refused)
{
	unsigned __int128 top = (unsigned __int128)p->q.block_bytes * CW_NS_PER_S;
	uint64_t lo = 0, hi = top >= INT64_MAX ? INT64_MAX : (uint64_t)top + 1;
	_cleanup_(cw_admit_plan_done) struct cw_admit_plan plan = { 0 };

	/* lo is admitted (0: nothing asked), hi is not (or past the top). */
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		int r = ast_plan_at(p, mid, &plan);

		if (r < 0 && r != -ERANGE)	/* ERANGE: a period too long to count */
			return r;
		if (r == 0 && plan.admitted)
			lo = mid;
		else
			hi = mid;
	}
	*ret = lo;
	if (refused && lo < top) {
		int r = ast_plan_at(p, lo + 1, refused);

		if (r < 0 && r != -ERANGE)
			return r;
	}
	return 0;
}

/* The largest rate that fits, in ref and in its sentence. */
static int refusal_max_rate(const struct prepared *p, struct cw_admit_refusal *ref)
{
	char b[CW_UNITS_BUF], m[CW_UNITS_BUF];
	size_t len;
	uint64_t max;
	int r;

	if (!ref)
		return 0;
	r = largest_rate(p, &max, NULL);
	if (r < 0)
		return r;
	ref->has_max_rate = true;
	ref->max_rate_bps = max;
	len = strlen(ref->reason);
	cw_units_format_size(p->q.block_bytes, b);
	if (max)
		snprintf(ref->reason + len, sizeof(ref->reason) - len, "; the largest rate that "
			 "fits with %s blocks is %s", b,
			 cw_units_format_rate(cw_units_floor_rate(max), m));
	else
		snprintf(ref->reason + len, sizeof(ref->reason) - len, "; no rate fits with %s "
			 "blocks", b);
	return 0;
}

/* The headroom of a prepared stream; r: how preparing it went. */
static int headroom(const struct prepared *p, int r, uint64_t *ret, struct cw_admit_refusal *ref)
{
	_cleanup_(cw_admit_plan_done) struct cw_admit_plan refused = { 0 };

	if (r == 0)
		r = largest_rate(p, ret, &refused);
	if (r == 0 && refused.n_parts && !refused.admitted)
		ast_refusal_of_plan(p, &refused, *ret + 1, false, ref);
	return r;
}

int cw_admit_state_headroom(struct cw_admit_state *st, const struct cw_admit_request *req,
			    uint64_t *ret_rate_bps, struct cw_admit_refusal *ref)
{
	_cleanup_(ast_prepared_done) struct prepared p = { 0 };

	if (ref)
		memset(ref, 0, sizeof(*ref));
	return headroom(&p, prepare_req(st, req, &p, ref), ret_rate_bps, ref);
}

int cw_admit_state_disk_headroom(struct cw_admit_state *st, uint32_t id, uint64_t block,
				 uint64_t *ret_rate_bps, struct cw_admit_refusal *ref)
{
	_cleanup_(ast_prepared_done) struct prepared p = { 0 };

	if (ref)
		memset(ref, 0, sizeof(*ref));
	return headroom(&p, prepare_disk(st, id, block, &p, ref), ret_rate_bps, ref);
}

/* Plans p at rate and tests it: -EBUSY with plan->admitted false when
 * the disks' streams refuse it (the caller says why), -EBUSY with ref when
 * the exports' best-effort reservations would lose their room, -errno. */
int ast_plan_tested(const struct cw_admit_state *st, const struct prepared *p, uint64_t rate,
		    struct cw_admit_plan *plan, struct cw_admit_refusal *ref)
{
	int r = ast_plan_at(p, rate, plan);

	if (r < 0) {
		ast_refuse(ref, "%s", plan->reason[0] ? plan->reason : strerror(-r));
		return r;
	}
	if (!plan->admitted)
		return -EBUSY;
	for (size_t i = 0; i < plan->n_parts; i++) {
		size_t k = plan->parts[i].disk;

		r = ast_be_streams_check(st, p->rl.disks[k].id, p->ad[k].tasks, p->ad[k].n_tasks,
					 &plan->parts[i].task, ref);
		if (r < 0)
			return r;
	}
	return 0;
}

void ast_admitted_done(struct admitted *a)
{
	cw_admit_plan_done(&a->plan);
	ast_prepared_done(&a->p);
}

int ast_admit(struct cw_admit_state *st, const struct cw_admit_request *req, struct admitted *a,
	      struct cw_admit_refusal *ref)
{
	struct prepared *p = &a->p;
	int r;

	if (ref)
		memset(ref, 0, sizeof(*ref));
	r = prepare_req(st, req, p, ref);
	if (r < 0)
		return r;
	if (req->rate_bps == 0) {
		ast_refuse(ref, "the rate must be positive");
		return -EINVAL;
	}
	if (!req->dry_run && st->n_resvs >= RESV_MAX) {
		ast_refuse(ref, "too many reservations (%d)", RESV_MAX);
		return -ENOSPC;
	}
	r = ast_plan_tested(st, p, req->rate_bps, &a->plan, ref);
	if (r == -EBUSY && !a->plan.admitted) {
		ast_refusal_of_plan(p, &a->plan, req->rate_bps, false, ref);
		r = refusal_max_rate(p, ref);
		if (r == 0 && p->rl.l.alt_disk)
			refusal_prefix(ref, "with its blocks on both sides of move %" PRIu64
				       " (it takes them to other disks): ", p->move_id);
		return r < 0 ? r : -EBUSY;
	}
	if (r == -EBUSY && p->rl.l.alt_disk)
		refusal_prefix(ref, "with its blocks on both sides of move %" PRIu64 ": ",
			       p->move_id);
	return r;
}

int ast_book(struct cw_admit_state *st, const struct cw_admit_request *req,
	     const struct admitted *a, const struct cw_admit_resv **ret_resv,
	     struct cw_admit_refusal *ref, struct cw_admit_changes *changes)
{
	const struct prepared *p = &a->p;
	const struct cw_admit_plan *plan = &a->plan;
	struct cw_admit_resv *rv;
	int r;

	rv = ast_resv_new();
	if (!rv || !(rv->parts = ast_parts_new(plan->n_parts))) {
		ast_resv_free(rv);
		return -ENOMEM;
	}
	snprintf(rv->part, sizeof(rv->part), "%s", p->pi.name);
	rv->part_id = p->pi.id;
	rv->persistent = req->persistent;
	if (!req->persistent && req->export_name)
		snprintf(rv->export_name, sizeof(rv->export_name), "%s", req->export_name);
	rv->rate_bps = req->rate_bps;
	rv->block_bytes = req->block_bytes;
	rv->range_start_bytes = req->range_start_bytes;
	rv->range_end_bytes = p->end;
	rv->span_start_ns = p->q.span_start_ns;
	rv->span_end_ns = p->q.span_end_ns;
	rv->period_ns = plan->stream_period_ns;
	rv->due = req->due;
	rv->move_id = p->rl.l.alt_disk ? p->move_id : 0;
	rv->survive = p->survive;
	rv->record = p->record;
	rv->n_parts = plan->n_parts;
	for (size_t i = 0; i < plan->n_parts; i++)
		rv->parts[i] = (struct cw_admit_resv_part){
			.disk_id = p->rl.disks[plan->parts[i].disk].id,
			.task = plan->parts[i].task,
			.requests = plan->parts[i].requests,
			.stride = plan->parts[i].stride,
		};
	ast_resv_set_lead(rv);
	/* The database first (it gives the id), then memory. */
	if (rv->persistent) {
		r = ast_resv_store(st, rv);
		if (r < 0) {
			const struct cw_error *e = cw_pool_last_error(st->pool);

			ast_refuse(ref, "storing the reservation: %s",
				   e && e->code == r && e->msg[0] ? e->msg : strerror(-r));
			ast_resv_free(rv);
			return r;
		}
	}
	rv->stream = ++st->next_stream;
	r = ast_resv_append(st, rv);
	if (r < 0) {
		if (rv->persistent)
			(void)cw_resv_remove(st->pool, rv->id);
		ast_resv_free(rv);
		return r;
	}
	ast_emit(st, &(struct cw_admit_event){ .kind = CW_ADMIT_EV_RESV_ADDED, .resv = rv });
	r = ast_replan_resv(st, rv, changes);
	if (ret_resv)
		*ret_resv = rv;
	return r;
}

/* ---- releasing ---- */

int ast_release(struct cw_admit_state *st, uint64_t id, struct cw_admit_changes *changes)
{
	struct cw_admit_resv *rv = NULL;
	size_t i;
	int r;

	for (i = 0; i < st->n_resvs; i++)
		if (st->resvs[i]->persistent && st->resvs[i]->id == id) {
			rv = st->resvs[i];
			break;
		}
	if (!rv)
		return -ENOENT;
	r = cw_resv_remove(st->pool, id);
	/* Not there is as good as removed: memory follows the database. */
	if (r < 0 && r != -ENOENT)
		return r;
	pthread_mutex_lock(&st->lock);
	memmove(&st->resvs[i], &st->resvs[i + 1], (st->n_resvs - i - 1) * sizeof(*st->resvs));
	st->n_resvs--;
	pthread_mutex_unlock(&st->lock);
	ast_emit(st, &(struct cw_admit_event){ .kind = CW_ADMIT_EV_RESV_RELEASED, .resv = rv });
	r = ast_replan_resv(st, rv, changes);
	ast_resv_free(rv);
	return r;
}
