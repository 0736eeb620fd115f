/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: the admission state of a pool (clockwise/admit-state.h) on
 * a real pool database: reservations admitted on every disk or none,
 * stored before memory changes, released, reloaded exactly; each disk's
 * plan recomputed and announced once per changed disk; models changed with
 * every stream admitted again or the change refused; disks added and
 * removed; the pure plan function's guard and server.
 */
#include "config.h"

#include <inttypes.h>

#include <clockwise/admit-state.h>
#include <clockwise/cache.h>
#include <clockwise/mover.h>
#include <clockwise/sched-beq.h>
#include <clockwise/units.h>
#include <clockwise/pool-objects.h>
#include <clockwise/units.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "layout/pooltest.h"

#define MIB (UINT64_C(1) << 20)

static struct tp T;

/* The events the listener saw. */
struct seen {
	int plans[CW_DISKS_MAX + 1];
	int added, released;
	int be_set, be_cleared;
	int order_ok;		/* RESV_ADDED came before the PLAN events */
	struct cw_disk_plan last[CW_DISKS_MAX + 1];
};

static void listener(void *ud, const struct cw_admit_event *ev)
{
	struct seen *s = ud;

	switch (ev->kind) {
	case CW_ADMIT_EV_PLAN:
		s->plans[ev->disk_id]++;
		s->last[ev->disk_id] = *ev->plan;
		CU_ASSERT(ev->model != NULL);
		break;
	case CW_ADMIT_EV_RESV_ADDED:
		s->added++;
		s->order_ok = 1;
		for (size_t i = 0; i <= CW_DISKS_MAX; i++)
			s->order_ok &= s->plans[i] == 0;
		break;
	case CW_ADMIT_EV_RESV_RELEASED:
		s->released++;
		CU_ASSERT(ev->resv != NULL);
		break;
	case CW_ADMIT_EV_BE_SET:
	case CW_ADMIT_EV_BE_CLEARED:
		CU_ASSERT(ev->be != NULL);
		(*(ev->kind == CW_ADMIT_EV_BE_SET ? &s->be_set : &s->be_cleared))++;
		break;
	}
}

/* A pool of two 1 GiB HDD files with a striped 256 MiB partition. */
static void setup(void)
{
	const uint64_t n[2] = { 1024, 1024 };
	struct cw_part *p;

	tp_pool(&T, 0, 2, n, NULL);
	CU_ASSERT_FATAL(cw_part_create(T.pool, "media", 256 * MIB, NULL, &p) == 0);
}

static struct cw_admit_state *state(struct seen *s)
{
	struct cw_admit_state_opts o;
	struct cw_admit_state *st;

	cw_admit_state_opts_init(&o);
	o.listener = s ? listener : NULL;
	o.listener_data = s;
	CU_ASSERT_FATAL(cw_admit_state_new(T.pool, &o, &st) == 0);
	return st;
}

static struct cw_admit_request req(uint64_t rate)
{
	return (struct cw_admit_request){ .part = "media", .rate_bps = rate, .block_bytes = MIB,
					  .persistent = true };
}

static size_t stored(void)
{
	struct cw_resv_rec *v;
	size_t n;

	CU_ASSERT_FATAL(cw_resv_list(T.pool, &v, &n) == 0);
	cw_resv_list_free(v, n);
	return n;
}

static struct cw_admit_be_request be_req(const char *export_name, uint64_t reserve,
				       uint32_t weight, uint64_t limit)
{
	return (struct cw_admit_be_request){
		.export_name = export_name, .part = "media", .persistent = true,
		.qos = { .reserve = reserve, .weight = weight, .limit = limit },
	};
}

/* Exports' best-effort QoS: admitted against each disk's best-effort
 * capacity, refused with what fits, kept by streams, stored and reloaded. */
static void test_be_qos(void)
{
	struct seen s = { 0 };
	struct cw_admit_state *st, *st2;
	const struct cw_admit_be *be;
	struct cw_admit_be_request rq = be_req("media", 2 * 1000 * 1000, 2, 10 * 1000 * 1000);
	struct cw_admit_refusal ref;
	struct cw_be_qos_rec *recs;
	struct cw_part *p;
	uint64_t fits, lo, hi;
	const char *at;
	bool iops;
	size_t n;

	setup();
	st = state(&s);
	CU_ASSERT_FATAL(cw_admit_state_be_set(st, &rq, &be, &ref) == 0);
	CU_ASSERT_EQUAL(s.be_set, 1);
	CU_ASSERT_EQUAL_FATAL(be->n_parts, 2);
	for (size_t i = 0; i < 2; i++) {
		CU_ASSERT_EQUAL(be->parts[i].share_ppm, 500000);	/* striped over two */
		CU_ASSERT_EQUAL(be->parts[i].client.weight, 2);
		CU_ASSERT(be->parts[i].client.resv_ppm > 0);
		/* five times the rate: five times the share, give or take rounding */
		CU_ASSERT(be->parts[i].client.limit_ppm >= 5 * be->parts[i].client.resv_ppm - 5);
		CU_ASSERT(be->parts[i].client.limit_ppm <= 5 * be->parts[i].client.resv_ppm);
	}
	CU_ASSERT_FATAL(cw_be_qos_list(T.pool, &recs, &n) == 0);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_STRING_EQUAL(recs[0].export_name, "media");
	CU_ASSERT_EQUAL(recs[0].qos.limit, 10 * 1000 * 1000);
	free(recs);
	/* The partition is held while its QoS is stored. */
	CU_ASSERT_FATAL(cw_part_lookup(T.pool, "media", &p) == 0);
	CU_ASSERT_EQUAL(cw_part_delete(p), -EBUSY);

	/* Bad QoS: nothing changes. */
	rq = be_req("b", 2 * 1000 * 1000, 1, 1000 * 1000);
	CU_ASSERT_EQUAL(cw_admit_state_be_set(st, &rq, NULL, &ref), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(ref.reason, "limit is below the reservation"));
	rq = be_req("b", 0, CW_BE_WEIGHT_MAX + 1, 0);
	CU_ASSERT_EQUAL(cw_admit_state_be_set(st, &rq, NULL, &ref), -EINVAL);
	rq = be_req("b", UINT64_C(1) << 40, 1, 0);
	CU_ASSERT_EQUAL(cw_admit_state_be_set(st, &rq, NULL, &ref), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(ref.reason, "more than the whole disk"));
	rq = be_req("b", 1, 1, 0);
	rq.part = "none";
	CU_ASSERT_EQUAL(cw_admit_state_be_set(st, &rq, NULL, &ref), -ENOENT);
	CU_ASSERT_EQUAL(s.be_set, 1);

	/* The largest reservation that does not fit beside media's: found by
	 * bisection on dry runs; the refusal names what fits, and that does. */
	lo = 1, hi = UINT64_C(1) << 40;
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		int r;

		rq = be_req("b", mid, 1, 0);
		rq.dry_run = true;
		r = cw_admit_state_be_set(st, &rq, NULL, &ref);
		CU_ASSERT_FATAL(r == 0 || r == -EBUSY || r == -EINVAL);
		if (r == 0)
			lo = mid;
		else
			hi = mid;
	}
	rq = be_req("b", hi, 1, 0);
	CU_ASSERT_EQUAL_FATAL(cw_admit_state_be_set(st, &rq, NULL, &ref), -EBUSY);
	CU_ASSERT(ref.disk_id == 1 || ref.disk_id == 2);
	at = strstr(ref.reason, "at most ");
	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	CU_ASSERT_FATAL(cw_units_parse_iorate(strndupa(at + 8, strcspn(at + 8, " ")), &fits,
					      &iops) == 0);
	CU_ASSERT_FALSE(iops);
	/* the figure is rounded to one decimal place for people */
	CU_ASSERT(fits <= lo + lo / 100 && fits + lo / 100 >= lo);
	rq = be_req("b", lo, 1, 0);
	CU_ASSERT_EQUAL_FATAL(cw_admit_state_be_set(st, &rq, NULL, &ref), 0);
	CU_ASSERT_EQUAL(s.be_set, 2);

	/* A stream that would take their room is refused. */
	{
		struct cw_admit_request r = req(4 * MIB);

		CU_ASSERT_EQUAL(cw_admit_state_reserve(st, &r, NULL, &ref, NULL), -EBUSY);
		CU_ASSERT_PTR_NOT_NULL(strstr(ref.reason, "exports reserve"));
		CU_ASSERT_EQUAL(stored(), 0);
	}

	/* Reloaded as stored. */
	st2 = state(NULL);
	be = cw_admit_state_be_find(st2, "media");
	CU_ASSERT_PTR_NOT_NULL_FATAL(be);
	CU_ASSERT_EQUAL(be->qos.weight, 2);
	CU_ASSERT_EQUAL(be->qos.reserve, 2 * 1000 * 1000);
	CU_ASSERT_PTR_NOT_NULL(cw_admit_state_be_at(st2, 1));
	CU_ASSERT_PTR_NULL(cw_admit_state_be_at(st2, 2));
	cw_admit_state_free(st2);

	CU_ASSERT_EQUAL(cw_admit_state_be_clear(st, "media"), 0);
	CU_ASSERT_EQUAL(cw_admit_state_be_clear(st, "media"), -ENOENT);
	CU_ASSERT_EQUAL(cw_admit_state_be_clear(st, "b"), 0);
	CU_ASSERT_EQUAL(s.be_cleared, 2);
	CU_ASSERT_FATAL(cw_be_qos_list(T.pool, &recs, &n) == 0);
	CU_ASSERT_EQUAL(n, 0);
	free(recs);
	CU_ASSERT_EQUAL(cw_part_delete(p), 0);
	cw_admit_state_free(st);
	tp_fini(&T);
}

static void test_empty_plans(void)
{
	struct cw_admit_state *st;
	struct cw_disk_plan p;

	setup();
	st = state(NULL);
	for (uint32_t id = 1; id <= 2; id++) {
		CU_ASSERT_FATAL(cw_admit_state_plan(st, id, &p) == 0);
		CU_ASSERT_EQUAL(p.disk_id, id);
		CU_ASSERT_EQUAL(p.n_tasks, 0);
		CU_ASSERT_EQUAL(p.delta_l_ns, CW_ADMIT_NO_LIMIT);
		CU_ASSERT_EQUAL(p.be_budget_ns, CW_ADMIT_NO_LIMIT);
		CU_ASSERT_EQUAL(p.server_slice_ns, 0);
		CU_ASSERT(p.be_max_ns > 0);
		CU_ASSERT(p.be_reserve.service_ns == p.be_max_ns);
	}
	CU_ASSERT_EQUAL(cw_admit_state_plan(st, 3, &p), -ENOENT);
	cw_admit_state_free(st);
	tp_fini(&T);
}

static void test_reserve_release(void)
{
	struct seen s = { 0 };
	struct cw_admit_state *st;
	const struct cw_admit_resv *rv;
	struct cw_admit_request rq = req(4 * MIB);
	struct cw_admit_changes ch = { 0 };
	struct cw_disk_plan p;
	uint64_t id;

	setup();
	st = state(&s);
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, NULL, &ch) == 0);
	CU_ASSERT_FATAL(rv != NULL);
	CU_ASSERT(rv->id > 0);
	CU_ASSERT(rv->persistent);
	CU_ASSERT(rv->stream > 0);
	CU_ASSERT_EQUAL(rv->n_parts, 2);
	CU_ASSERT_EQUAL(rv->range_end_bytes, 256 * MIB);
	CU_ASSERT_EQUAL(s.added, 1);
	CU_ASSERT(s.order_ok);
	CU_ASSERT_EQUAL(s.plans[1], 1);	/* one event per changed disk */
	CU_ASSERT_EQUAL(s.plans[2], 1);
	CU_ASSERT(cw_admit_changes_has(&ch, 1) && cw_admit_changes_has(&ch, 2));
	CU_ASSERT(!cw_admit_changes_has(&ch, 3));
	CU_ASSERT_EQUAL(stored(), 1);
	CU_ASSERT_FATAL(cw_admit_state_plan(st, 1, &p) == 0);
	CU_ASSERT_EQUAL(p.n_tasks, 1);
	CU_ASSERT(p.delta_l_ns > 0 && p.delta_l_ns != CW_ADMIT_NO_LIMIT);
	CU_ASSERT(p.be_budget_ns < p.delta_l_ns);
	CU_ASSERT(memcmp(&p, &s.last[1], sizeof(p)) == 0);
	CU_ASSERT_EQUAL(cw_admit_state_disk_streams(st, 1), 1);
	CU_ASSERT(cw_admit_state_resv_find(st, rv->id) == rv);

	id = rv->id;
	memset(&ch, 0, sizeof(ch));
	CU_ASSERT_EQUAL(cw_admit_state_release(st, id + 100, &ch), -ENOENT);
	CU_ASSERT_FATAL(cw_admit_state_release(st, id, &ch) == 0);
	CU_ASSERT_EQUAL(s.released, 1);
	CU_ASSERT_EQUAL(s.plans[1], 2);
	CU_ASSERT(cw_admit_changes_has(&ch, 2));
	CU_ASSERT_EQUAL(stored(), 0);
	CU_ASSERT_FATAL(cw_admit_state_plan(st, 1, &p) == 0);
	CU_ASSERT_EQUAL(p.n_tasks, 0);
	CU_ASSERT(cw_admit_state_resv_at(st, 0) == NULL);
	cw_admit_state_free(st);
	tp_fini(&T);
}

/* A refusal changes nothing anywhere and says which disk. */
static void test_refused(void)
{
	struct seen s = { 0 };
	struct cw_admit_state *st;
	const struct cw_admit_resv *rv = (void *)1;
	struct cw_admit_request rq = req(4000 * MIB);
	struct cw_admit_refusal ref;

	setup();
	st = state(&s);
	CU_ASSERT_EQUAL(cw_admit_state_reserve(st, &rq, &rv, &ref, NULL), -EBUSY);
	CU_ASSERT(rv == NULL);
	CU_ASSERT(ref.disk_id == 1 || ref.disk_id == 2);
	CU_ASSERT(strstr(ref.reason, "refused on disk") != NULL);
	CU_ASSERT(ref.part.task.service_ns > ref.part.task.period_ns);
	CU_ASSERT_EQUAL(s.added + s.plans[1] + s.plans[2], 0);
	CU_ASSERT_EQUAL(stored(), 0);

	rq = req(4 * MIB);
	rq.range_end_bytes = 512 * MIB;	/* past the partition */
	CU_ASSERT_EQUAL(cw_admit_state_reserve(st, &rq, &rv, &ref, NULL), -EINVAL);
	CU_ASSERT(strstr(ref.reason, "not inside") != NULL);
	rq = req(4 * MIB);
	rq.part = "nope";
	CU_ASSERT_EQUAL(cw_admit_state_reserve(st, &rq, &rv, &ref, NULL), -ENOENT);

	/* A dry run admits and keeps nothing. */
	rq = req(4 * MIB);
	rq.dry_run = true;
	CU_ASSERT_EQUAL(cw_admit_state_reserve(st, &rq, &rv, &ref, NULL), 0);
	CU_ASSERT(rv == NULL);
	CU_ASSERT_EQUAL(stored(), 0);
	CU_ASSERT_EQUAL(s.added + s.plans[1], 0);
	cw_admit_state_free(st);
	tp_fini(&T);
}

/* Reservations fill a disk until one is refused; a reload books the stored
 * ones exactly as admitted; a start-up one is never stored. */
static void test_fill_and_reload(void)
{
	struct cw_admit_state *st, *st2;
	const struct cw_admit_resv *rv;
	struct cw_admit_request rq = req(8 * MIB);
	struct cw_disk_plan a, b;
	size_t n = 0;
	int r;

	setup();
	st = state(NULL);
	/* every other one due a stream period (and so a shorter deadline) */
	for (;;) {
		rq.due = n % 2 ? CW_ADMIT_DUE_STREAM : CW_ADMIT_DUE_DISK;
		r = cw_admit_state_reserve(st, &rq, &rv, NULL, NULL);
		if (r)
			break;
		CU_ASSERT_EQUAL(rv->due, rq.due);
		CU_ASSERT_EQUAL(rv->lead_ns, rq.due == CW_ADMIT_DUE_STREAM ? rv->period_ns :
				cw_task_deadline_ns(&rv->parts[0].task));
		n++;
	}
	CU_ASSERT_EQUAL(r, -EBUSY);
	CU_ASSERT(n >= 2);
	rq.due = CW_ADMIT_DUE_DISK;
	CU_ASSERT_EQUAL(stored(), n);
	rq = req(64 << 10);
	rq.persistent = false;
	rq.export_name = "media";
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, NULL, NULL) == 0);
	CU_ASSERT_EQUAL(rv->id, 0);
	CU_ASSERT_STRING_EQUAL(rv->export_name, "media");
	CU_ASSERT_EQUAL(stored(), n);
	CU_ASSERT_EQUAL(cw_admit_state_release(st, 0, NULL), -ENOENT);

	st2 = state(NULL);
	CU_ASSERT_EQUAL(cw_admit_state_disk_streams(st2, 1), n);
	CU_ASSERT_EQUAL(cw_admit_state_disk_streams(st, 1), n + 1);
	for (size_t i = 0; i < n; i++) {
		const struct cw_admit_resv *x = cw_admit_state_resv_at(st, i);
		const struct cw_admit_resv *y = cw_admit_state_resv_at(st2, i);

		CU_ASSERT_FATAL(x && y);
		CU_ASSERT_EQUAL(x->id, y->id);
		CU_ASSERT_EQUAL(x->n_parts, y->n_parts);
		CU_ASSERT(memcmp(x->parts, y->parts, x->n_parts * sizeof(*x->parts)) == 0);
		CU_ASSERT_EQUAL(x->due, y->due);
		CU_ASSERT_EQUAL(x->lead_ns, y->lead_ns);
	}
	/* Without the start-up stream the plans are those of the stored ones. */
	cw_admit_state_free(st);
	st = state(NULL);
	CU_ASSERT_FATAL(cw_admit_state_plan(st, 1, &a) == 0);
	CU_ASSERT_FATAL(cw_admit_state_plan(st2, 1, &b) == 0);
	CU_ASSERT(memcmp(&a, &b, sizeof(a)) == 0);
	cw_admit_state_free(st);
	cw_admit_state_free(st2);
	tp_fini(&T);
}

/* A new model admits every stream again: a faster one is taken and stored
 * with the new service times; one that leaves a stream unguaranteed is
 * refused, naming it, and nothing changes. */
static void test_set_model(void)
{
	struct seen s = { 0 };
	struct cw_admit_state *st;
	const struct cw_admit_resv *rv;
	struct cw_admit_request rq = req(16 * MIB);
	struct cw_admit_refusal ref;
	struct cw_model fast, slow, cur;
	enum cw_admit_model_source src;
	struct cw_resv_rec *v;
	int64_t c0;
	size_t n;
	bool taken;

	setup();
	st = state(&s);
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, NULL, NULL) == 0);
	c0 = rv->parts[0].task.service_ns;
	CU_ASSERT_FATAL(cw_admit_state_get_model(st, 1, &cur, &src) == 0);
	CU_ASSERT_EQUAL(src, CW_ADMIT_MODEL_PRESET);

	fast = cur;
	fast.overhead_ns /= 2;
	CU_ASSERT_FATAL(cw_admit_state_set_model(st, 1, &fast, CW_ADMIT_MODEL_CALIBRATED, &taken,
						 &ref, NULL) == 0);
	CU_ASSERT(taken);
	CU_ASSERT(rv->parts[0].task.service_ns < c0);
	CU_ASSERT_FATAL(cw_resv_list(T.pool, &v, &n) == 0);
	CU_ASSERT_EQUAL(v[0].disks[0].service_ns, rv->parts[0].task.service_ns);
	cw_resv_list_free(v, n);

	/* A lower rank is ignored. */
	CU_ASSERT_FATAL(cw_admit_state_set_model(st, 1, &cur, CW_ADMIT_MODEL_CONFIG, &taken, NULL,
						 NULL) == 0);
	CU_ASSERT(!taken);

	slow = cur;
	for (unsigned z = 0; z < slow.n_zones; z++)
		slow.zone[z].rate_bps /= 200;
	c0 = rv->parts[0].task.service_ns;
	CU_ASSERT_EQUAL(cw_admit_state_set_model(st, 1, &slow, CW_ADMIT_MODEL_CALIBRATED, &taken,
						 &ref, NULL), -EBUSY);
	CU_ASSERT(!taken);
	CU_ASSERT_EQUAL(ref.resv_id, rv->id);
	CU_ASSERT(strstr(ref.reason, "no longer be guaranteed") != NULL);
	CU_ASSERT_EQUAL(rv->parts[0].task.service_ns, c0);
	CU_ASSERT_FATAL(cw_admit_state_get_model(st, 1, &cur, &src) == 0);
	CU_ASSERT_EQUAL(src, CW_ADMIT_MODEL_CALIBRATED);
	CU_ASSERT_EQUAL(cur.overhead_ns, fast.overhead_ns);
	cw_admit_state_free(st);
	tp_fini(&T);
}

static void test_disks(void)
{
	struct cw_admit_state *st;
	const struct cw_admit_resv *rv;
	struct cw_admit_request rq = req(4 * MIB);
	struct cw_admit_refusal ref;
	struct cw_admit_changes ch = { 0 };
	struct cw_disk_plan p;
	char path[160];
	uint32_t id;

	setup();
	st = state(NULL);
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, NULL, NULL) == 0);
	CU_ASSERT_EQUAL(cw_admit_state_disk_remove(st, 1, &ref), -EBUSY);
	CU_ASSERT(strstr(ref.reason, "serves reservation") != NULL);
	tp_path(&T, "d3.img", path, sizeof(path));
	tp_file(path, 1024 * CW_BLOCK_SIZE_DEFAULT);
	CU_ASSERT_FATAL(cw_disk_add(T.pool, path, CW_TIER_SSD, NULL, &id) == 0);
	CU_ASSERT_EQUAL(cw_admit_state_plan(st, id, &p), -ENOENT);
	CU_ASSERT_FATAL(cw_admit_state_disk_add(st, id, &ch) == 0);
	CU_ASSERT(cw_admit_changes_has(&ch, id));
	CU_ASSERT_FATAL(cw_admit_state_plan(st, id, &p) == 0);
	CU_ASSERT_EQUAL(p.be_piece_bytes, CW_BLOCK_SIZE_DEFAULT);	/* an SSD: whole blocks */
	CU_ASSERT_EQUAL(cw_admit_state_disk_remove(st, id, &ref), 0);
	CU_ASSERT_EQUAL(cw_admit_state_plan(st, id, &p), -ENOENT);
	cw_admit_state_free(st);
	tp_fini(&T);
}

/* An export's shares follow the disks' models and its partition's
 * blocks: a faster model on disk 1 makes the same rate a smaller share
 * there (announced as BE_SET); a partition on one disk that grows onto a
 * disk added since gets a part there, and its share of the first halves;
 * the order's spread QoS is the export's whole rate in each disk's costs. */
static void test_be_refresh(void)
{
	const uint64_t nb[1] = { 1024 };
	struct seen s = { 0 };
	struct cw_admit_state *st;
	struct cw_admit_be_request rq = be_req("solo", 2 * 1000 * 1000, 1, 8 * 1000 * 1000);
	struct cw_admit_changes ch = { 0 };
	const struct cw_admit_be *be;
	struct cw_model fast;
	struct cw_part *p;
	uint32_t resv0, order0, id;
	char path[160];

	tp_pool(&T, 0, 1, nb, NULL);
	CU_ASSERT_FATAL(cw_part_create(T.pool, "solo", 64 * MIB, NULL, &p) == 0);
	st = state(&s);
	rq.part = "solo";
	CU_ASSERT_FATAL(cw_admit_state_be_set(st, &rq, &be, NULL) == 0);
	CU_ASSERT_EQUAL_FATAL(be->n_parts, 1);
	CU_ASSERT_EQUAL(be->parts[0].share_ppm, CW_SCHED_PPM);
	resv0 = be->parts[0].client.resv_ppm;
	order0 = be->parts[0].order.resv_ppm;
	CU_ASSERT(be->parts[0].order.spread && !be->parts[0].client.spread);
	CU_ASSERT_EQUAL(order0, resv0);	/* all of it on the one disk */

	CU_ASSERT_FATAL(cw_admit_state_get_model(st, 1, &fast, NULL) == 0);
	fast.overhead_ns /= 2;
	fast.rotation_ns /= 2;
	CU_ASSERT_FATAL(cw_admit_state_set_model(st, 1, &fast, CW_ADMIT_MODEL_CALIBRATED, NULL,
						 NULL, NULL) == 0);
	CU_ASSERT_EQUAL(s.be_set, 2);
	be = cw_admit_state_be_find(st, "solo");
	CU_ASSERT_FATAL(be != NULL);
	CU_ASSERT(be->parts[0].client.resv_ppm < resv0);
	resv0 = be->parts[0].client.resv_ppm;

	/* a second disk, the same model, and the partition grows onto it */
	tp_path(&T, "d2.img", path, sizeof(path));
	tp_file(path, 1024 * CW_BLOCK_SIZE_DEFAULT);
	CU_ASSERT_FATAL(cw_disk_add(T.pool, path, CW_TIER_HDD, NULL, &id) == 0);
	CU_ASSERT_FATAL(cw_admit_state_disk_add(st, id, &ch) == 0);
	CU_ASSERT_FATAL(cw_admit_state_set_model(st, id, &fast, CW_ADMIT_MODEL_CALIBRATED, NULL,
						 NULL, NULL) == 0);
	CU_ASSERT_EQUAL(s.be_set, 2);	/* solo has nothing there yet */
	CU_ASSERT_FATAL(cw_part_resize(p, 128 * MIB) == 0);
	CU_ASSERT_EQUAL(cw_admit_state_be_refresh(st, "solo"), 0);
	CU_ASSERT_EQUAL(s.be_set, 3);
	be = cw_admit_state_be_find(st, "solo");
	CU_ASSERT_EQUAL_FATAL(be->n_parts, 2);
	for (size_t i = 0; i < 2; i++) {
		CU_ASSERT(be->parts[i].share_ppm > 0 && be->parts[i].share_ppm < CW_SCHED_PPM);
		/* the order's: the whole rate, on either disk */
		CU_ASSERT_EQUAL(be->parts[i].order.resv_ppm, resv0);
	}
	CU_ASSERT(be->parts[0].client.resv_ppm < resv0);
	CU_ASSERT_EQUAL(cw_admit_state_be_refresh(st, NULL), -EINVAL);
	CU_ASSERT_EQUAL(cw_admit_state_be_refresh(st, "other"), 0);	/* none of it */
	CU_ASSERT_EQUAL(s.be_set, 3);
	cw_admit_state_free(st);
	tp_fini(&T);
}

/* The pure plan: the guard, the server, the JSON form. */
static void test_disk_plan(void)
{
	struct cw_admit_plan_opts o, paper;
	struct cw_admit_result r;
	struct cw_disk_plan p, q;
	struct cw_model m;
	struct cw_task t[2] = { { 100 * CW_NS_PER_MS, 20 * CW_NS_PER_MS, 0, 0 },
				{ 200 * CW_NS_PER_MS, 30 * CW_NS_PER_MS, 0, 0 } };
	char buf[1024];

	CU_ASSERT_FATAL(cw_model_preset("hdd7200", &m) == 0);
	cw_admit_plan_opts_init(&o);
	cw_admit_plan_opts_paper(&paper);
	CU_ASSERT_FATAL(cw_admit_test(t, 2, &r) == 0 && r.schedulable);
	CU_ASSERT_FATAL(cw_admit_disk_plan(&o, &m, CW_TIER_HDD, MIB, t, 2, &p) == 0);
	CU_ASSERT_EQUAL(p.delta_l_ns, r.delta_l_ns);
	CU_ASSERT_EQUAL(p.be_budget_ns,
			r.delta_l_ns - CW_MAX(CW_ADMIT_GUARD_MIN_NS, r.delta_l_ns / 4));
	CU_ASSERT_EQUAL(p.be_piece_bytes, CW_ADMIT_BE_PIECE_HDD);
	CU_ASSERT_FATAL(cw_admit_disk_plan(&paper, &m, CW_TIER_HDD, MIB, t, 2, &q) == 0);
	CU_ASSERT_EQUAL(q.be_budget_ns, r.delta_l_ns);
	CU_ASSERT_EQUAL(q.be_reserve.service_ns, 0);

	/* ΔL = 0: the server carries best effort, and it fits. */
	t[0] = (struct cw_task){ 10 * CW_NS_PER_MS, 5 * CW_NS_PER_MS, 0, 0 };
	t[1] = (struct cw_task){ 10 * CW_NS_PER_MS, 4 * CW_NS_PER_MS, 0, 0 };
	CU_ASSERT_FATAL(cw_admit_disk_plan(&o, &m, CW_TIER_HDD, MIB, t, 2, &p) == 0);
	CU_ASSERT(p.be_budget_ns < p.be_max_ns);
	CU_ASSERT(p.server_slice_ns > 0);
	CU_ASSERT_EQUAL(p.server_period_ns, p.be_reserve.period_ns);
	CU_ASSERT(p.server_slice_ns >= p.be_max_ns || p.be_starved);
	t[1].service_ns = 6 * CW_NS_PER_MS;	/* U > 1 */
	CU_ASSERT_EQUAL(cw_admit_disk_plan(&o, &m, CW_TIER_HDD, MIB, t, 2, &p), -EBUSY);

	CU_ASSERT_FATAL(cw_admit_disk_plan(&o, &m, CW_TIER_HDD, MIB, NULL, 0, &p) == 0);
	p.disk_id = 7;
	CU_ASSERT(cw_disk_plan_format_json(&p, "hdd0", buf, sizeof(buf)) > 0);
	CU_ASSERT(strstr(buf, "\"disk\": \"hdd0\", \"disk_id\": 7, \"tasks\": 0") != NULL);
	CU_ASSERT(strstr(buf, "\"delta_l_ns\": null") != NULL);
	CU_ASSERT_EQUAL(cw_disk_plan_format_json(&p, "hdd0", buf, 20), -ENOSPC);
}

/* The headroom is a boundary: admitted at it, refused one byte per second
 * above and at every larger rate tried, admitted below; a disk alone
 * carries no more than the partition striped over two; a refusal says the
 * same largest rate, in words. */
static void test_headroom(void)
{
	struct cw_admit_state *st;
	const struct cw_admit_resv *rv;
	struct cw_admit_request rq = req(0);
	struct cw_admit_refusal ref;
	uint64_t max, max2, disk;
	char want[160], r[CW_UNITS_BUF];

	setup();
	st = state(NULL);
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &max, &ref) == 0);
	CU_ASSERT_FATAL(max > 0);
	CU_ASSERT(ref.disk_id == 1 || ref.disk_id == 2);	/* what limits it */
	printf("\n  one more: %s\n", ref.reason);
	CU_ASSERT(strncmp(ref.reason, "refused on disk disk", 20) == 0);
	rq.dry_run = true;
	rq.rate_bps = max;
	CU_ASSERT_EQUAL(cw_admit_state_reserve(st, &rq, &rv, &ref, NULL), 0);
	rq.rate_bps = max / 2;
	CU_ASSERT_EQUAL(cw_admit_state_reserve(st, &rq, &rv, &ref, NULL), 0);
	for (uint64_t k = 0; k < 4; k++) {
		rq.rate_bps = (const uint64_t[]){ max + 1, max + max / 100, max * 2, max * 64 }[k];
		CU_ASSERT_EQUAL(cw_admit_state_reserve(st, &rq, &rv, &ref, NULL), -EBUSY);
		CU_ASSERT(ref.has_max_rate);
		CU_ASSERT_EQUAL(ref.max_rate_bps, max);
	}
	snprintf(want, sizeof(want), "the largest rate that fits with 1M blocks is %s",
		 cw_units_format_rate(cw_units_floor_rate(max), r));
	CU_ASSERT(strstr(ref.reason, want) != NULL);
	CU_ASSERT(strstr(ref.reason, "the new stream") != NULL);
	CU_ASSERT(strstr(ref.reason, "task ") == NULL);	/* no index of an inner set */

	CU_ASSERT_FATAL(cw_admit_state_disk_headroom(st, 1, MIB, &disk, NULL) == 0);
	CU_ASSERT(disk > 0 && disk <= max);
	CU_ASSERT_EQUAL(cw_admit_state_disk_headroom(st, 9, MIB, &disk, NULL), -ENOENT);

	/* A stream takes its share: less is left, and what is left fits. */
	rq = req(max / 2);
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, NULL, NULL) == 0);
	rq = req(0);
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &max2, NULL) == 0);
	CU_ASSERT(max2 < max);
	rq = req(max2);
	rq.dry_run = true;
	CU_ASSERT_EQUAL(cw_admit_state_reserve(st, &rq, &rv, NULL, NULL), 0);

	/* A block larger than the partition says so. */
	rq = req(MIB);
	rq.block_bytes = 512 * MIB;
	CU_ASSERT_EQUAL(cw_admit_state_reserve(st, &rq, &rv, &ref, NULL), -EINVAL);
	CU_ASSERT_STRING_EQUAL(ref.reason, "a block of 512M is larger than the partition (256M)");
	cw_admit_state_free(st);
	tp_fini(&T);
}

/* A new stream with a short period is refused for the sake of a stored
 * one whose long requests would hold the disk: the refusal names that
 * reservation, in the sentence and in its facts alike. */
static void test_refusal_names_stream(void)
{
	struct cw_admit_state *st;
	const struct cw_admit_resv *big;
	struct cw_admit_request rq = req(MIB / 4);	/* 4 MiB every 16 s */
	struct cw_admit_refusal ref;
	char want[64];
	int r = 0;

	setup();
	st = state(NULL);
	rq.block_bytes = 4 * MIB;
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &big, &ref, NULL) == 0);
	/* Ever shorter periods of small blocks, until one is refused. */
	rq = req(4096);
	rq.block_bytes = 4096;
	rq.dry_run = true;
	for (; rq.rate_bps < 4000 * MIB; rq.rate_bps *= 2)
		if ((r = cw_admit_state_reserve(st, &rq, NULL, &ref, NULL)) != 0)
			break;
	CU_ASSERT_EQUAL_FATAL(r, -EBUSY);
	printf("\n  refusal: %s\n", ref.reason);
	CU_ASSERT_EQUAL(ref.part.result.why, CW_ADMIT_BLOCKING);
	CU_ASSERT_EQUAL(ref.who, CW_ADMIT_WHO_RESV);
	CU_ASSERT_EQUAL(ref.resv_id, big->id);
	snprintf(want, sizeof(want), "a request of reservation %" PRIu64 " takes up to",
		 big->id);
	CU_ASSERT(strstr(ref.reason, want) != NULL);
	CU_ASSERT(strstr(ref.reason, "condition (2)") != NULL);
	CU_ASSERT(ref.task.service_ns == big->parts[0].task.service_ns ||
		  ref.task.service_ns == big->parts[1].task.service_ns);
	cw_admit_state_free(st);
	tp_fini(&T);
}

/* Rule 2 of moving data: a stream on a striped partition, checked as if
 * all its blocks were moved onto disk 1: a small one would still be
 * admitted there (its own task on disk 1 does not count against it), a
 * large one would not, and the refusal says where and whose deadline.
 * Nothing changes either way. */
static void test_move_check(void)
{
	struct cw_admit_state *st;
	const struct cw_admit_resv *small, *large;
	struct cw_admit_request rq = req(0);
	struct cw_admit_refusal ref;
	struct cw_disk_plan before, after;
	struct cw_part *part;
	char want[128];
	_cleanup_free_ uint32_t *ids = NULL;
	uint64_t max, nb;

	setup();
	st = state(NULL);
	CU_ASSERT_FATAL(cw_part_lookup(T.pool, "media", &part) == 0);
	nb = cw_part_nblocks(part);
	ids = calloc(nb, sizeof(*ids));
	CU_ASSERT_FATAL(ids != NULL);
	for (uint64_t b = 0; b < nb; b++)
		ids[b] = 1;
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &max, NULL) == 0);
	rq = req(max * 35 / 100);
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &small, NULL, NULL) == 0);
	CU_ASSERT_FATAL(small->n_parts == 2);
	CU_ASSERT_FATAL(cw_admit_state_plan(st, 1, &before) == 0);
	CU_ASSERT_EQUAL(cw_admit_state_move_check(st, small->stream, 0, nb, ids, &ref), 0);
	/* Its range only: a move of blocks outside it changes nothing. */
	CU_ASSERT_EQUAL(cw_admit_state_move_check(st, small->stream, nb, 0, ids, &ref), 0);
	CU_ASSERT_EQUAL(cw_admit_state_move_check(st, small->stream + 99, 0, nb, ids, &ref),
			-ENOENT);
	CU_ASSERT_FATAL(cw_admit_state_release(st, small->id, NULL) == 0);

	rq = req(max * 75 / 100);
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &large, NULL, NULL) == 0);
	CU_ASSERT_EQUAL(cw_admit_state_move_check(st, large->stream, 0, nb, ids, &ref), -EBUSY);
	printf("\n  moved: %s\n", ref.reason);
	CU_ASSERT_EQUAL(ref.disk_id, 1);
	/* Its own deadline, or the disk's best-effort reserve. */
	CU_ASSERT(ref.who != CW_ADMIT_WHO_NEW);
	CU_ASSERT(ref.who != CW_ADMIT_WHO_RESV || ref.resv_id == large->id);
	snprintf(want, sizeof(want), "where the move puts them, reservation %" PRIu64
		 " would be refused on disk disk1: ", large->id);
	CU_ASSERT(strstr(ref.reason, want) != NULL);
	/* Half of it onto each disk, as it is: admitted. */
	for (uint64_t b = 0; b < nb; b++)
		ids[b] = 1 + (uint32_t)(b % 2);
	CU_ASSERT_EQUAL(cw_admit_state_move_check(st, large->stream, 0, nb, ids, &ref), 0);
	ids[0] = 7;
	CU_ASSERT_EQUAL(cw_admit_state_move_check(st, large->stream, 0, nb, ids, &ref), -ENODEV);
	CU_ASSERT_EQUAL(stored(), 1);
	CU_ASSERT_FATAL(cw_admit_state_plan(st, 2, &after) == 0);
	CU_ASSERT_EQUAL(after.n_tasks, 1);
	CU_ASSERT_EQUAL(before.n_tasks, 1);
	cw_admit_state_free(st);
	tp_fini(&T);
}


/* Runs the pool's moves to their end (no data: the files are sparse and
 * nothing reads them here); how many blocks were copied. */
static unsigned run_moves(void)
{
	struct cw_mover_task t;
	unsigned n = 0;

	for (;;) {
		CU_ASSERT_FATAL(cw_mover_next(T.pool, &t) == 0);
		if (t.action == CW_MOVER_IDLE)
			return n;
		CU_ASSERT_FATAL(t.action == CW_MOVER_COPY);
		CU_ASSERT_FATAL(cw_mover_copied(T.pool, 0, 0) == 0);
		n++;
	}
}

/* The stored reservation id: its move and its part on disk (NULL: none). */
static bool stored_part(uint64_t id, uint32_t disk, uint64_t *ret_move, struct cw_resv_disk *ret)
{
	struct cw_resv_rec *v;
	bool found = false;
	size_t n;

	CU_ASSERT_FATAL(cw_resv_list(T.pool, &v, &n) == 0);
	for (size_t i = 0; i < n; i++) {
		if (v[i].id != id)
			continue;
		*ret_move = v[i].move_id;
		for (size_t j = 0; j < v[i].n_disks; j++)
			if (v[i].disks[j].disk_id == disk) {
				*ret = v[i].disks[j];
				found = true;
			}
	}
	cw_resv_list_free(v, n);
	return found;
}

/* Rule 2 carried out: a move onto disk 1 of a striped range books the
 * stream on both sides (disk 1 then carries every block of the range,
 * disk 2 still its own), in the pool first, so that a restart finds it
 * so; once the move is done the booking settles where the blocks are:
 * disk 1 alone.  A part found before a re-booking stays readable. */
static void test_move_book(void)
{
	struct seen s = { 0 };
	struct cw_admit_state *st, *st2;
	const struct cw_admit_resv *rv, *rv2;
	const struct cw_admit_resv_part *on1, *on2, *old2;
	struct cw_admit_request rq = req(0);
	struct cw_admit_refusal ref;
	struct cw_admit_changes ch = { { 0 } };
	struct cw_resv_disk sd;
	struct cw_move_opts mo = { .placement = CW_PLACE_SINGLE };
	const uint32_t one = 1;
	struct cw_part *part;
	struct cw_disk_plan p1;
	int64_t c1, t1;
	uint64_t max, mid, smove = 99;

	setup();
	st = state(&s);
	CU_ASSERT_FATAL(cw_part_lookup(T.pool, "media", &part) == 0);
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &max, NULL) == 0);
	rq = req(max / 5);
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, NULL, NULL) == 0);
	CU_ASSERT_FATAL(rv->n_parts == 2 && rv->move_id == 0);
	on1 = cw_admit_resv_part_on(rv, 1);
	old2 = cw_admit_resv_part_on(rv, 2);
	CU_ASSERT_FATAL(on1 && old2 && !cw_admit_resv_part_on(rv, 3));
	CU_ASSERT_EQUAL(on1->stride, 2);
	c1 = on1->task.service_ns;
	t1 = on1->task.period_ns;

	/* Not a move: nothing to book for. */
	CU_ASSERT_EQUAL(cw_admit_state_move_book(st, rv->stream, 12345, &ref, NULL), -ENOENT);
	CU_ASSERT(strstr(ref.reason, "no unfinished move 12345") != NULL);
	mo.disk_ids = &one;
	mo.ndisks = 1;
	CU_ASSERT_FATAL(cw_move_start_paused(part, 0, cw_part_nblocks(part), &mo, CW_MOVE_PART,
					     "test", &mid) == 0);
	CU_ASSERT_EQUAL(cw_admit_state_move_book(st, rv->stream + 99, mid, &ref, NULL), -ENOENT);
	{
		struct cw_part *other;
		const struct cw_admit_resv *orv;
		struct cw_admit_request orq = req(100000);

		CU_ASSERT_FATAL(cw_part_create(T.pool, "other", 16 * MIB, NULL, &other) == 0);
		orq.part = "other";
		CU_ASSERT_FATAL(cw_admit_state_reserve(st, &orq, &orv, NULL, NULL) == 0);
		CU_ASSERT_EQUAL(cw_admit_state_move_book(st, orv->stream, mid, &ref, NULL), -EINVAL);
		CU_ASSERT(strstr(ref.reason, "moves partition media, not other") != NULL);
		CU_ASSERT_EQUAL(orv->move_id, 0);
		CU_ASSERT_FATAL(cw_admit_state_release(st, orv->id, NULL) == 0);
	}
	memset(&s.plans, 0, sizeof(s.plans));
	CU_ASSERT_EQUAL_FATAL(cw_admit_state_move_book(st, rv->stream, mid, &ref, &ch), 0);
	CU_ASSERT_EQUAL(rv->move_id, mid);
	CU_ASSERT_EQUAL_FATAL(rv->n_parts, 2);
	on1 = cw_admit_resv_part_on(rv, 1);
	on2 = cw_admit_resv_part_on(rv, 2);
	CU_ASSERT_FATAL(on1 && on2);
	/* Disk 1: every request now (stride 1, the stream's period), each
	 * charged at least what it was; disk 2: its own blocks still. */
	CU_ASSERT_EQUAL(on1->stride, 1);
	CU_ASSERT_EQUAL(on1->task.period_ns, rv->period_ns);
	CU_ASSERT(on1->task.period_ns < t1 && on1->task.service_ns >= c1);
	CU_ASSERT_EQUAL(on2->stride, 2);
	CU_ASSERT(on2->task.service_ns >= old2->task.service_ns);
	/* The array it replaced is still there for a reader that held it. */
	CU_ASSERT_EQUAL(old2->disk_id, 2);
	CU_ASSERT(cw_admit_changes_has(&ch, 1) && cw_admit_changes_has(&ch, 2));
	CU_ASSERT(s.plans[1] == 1 && s.plans[2] == 1);
	CU_ASSERT_FATAL(cw_admit_state_plan(st, 1, &p1) == 0);
	CU_ASSERT_EQUAL(p1.n_tasks, 1);
	/* Stored with its move, so that a restart books it alike. */
	CU_ASSERT_FATAL(stored_part(rv->id, 1, &smove, &sd));
	CU_ASSERT_EQUAL(smove, mid);
	CU_ASSERT_EQUAL(sd.stride, 1);
	CU_ASSERT_EQUAL(sd.service_ns, on1->task.service_ns);
	st2 = state(NULL);
	rv2 = cw_admit_state_resv_find(st2, rv->id);
	CU_ASSERT_FATAL(rv2 != NULL);
	CU_ASSERT_EQUAL(rv2->move_id, mid);
	CU_ASSERT_FATAL(cw_admit_resv_part_on(rv2, 1) != NULL);
	CU_ASSERT_EQUAL(cw_admit_resv_part_on(rv2, 1)->stride, 1);
	CU_ASSERT_EQUAL(cw_admit_resv_part_on(rv2, 1)->task.service_ns, on1->task.service_ns);
	cw_admit_state_free(st2);
	/* Booked again for the same move: the same. */
	CU_ASSERT_EQUAL(cw_admit_state_move_book(st, rv->stream, mid, &ref, NULL), 0);
	CU_ASSERT_EQUAL(cw_admit_resv_part_on(rv, 1)->task.service_ns, on1->task.service_ns);
	/* A new model on disk 1 admits it again with its blocks on both sides. */
	{
		struct cw_model m;

		CU_ASSERT_FATAL(cw_admit_state_get_model(st, 1, &m, NULL) == 0);
		m.margin_ppm += 10000;
		CU_ASSERT_EQUAL(cw_admit_state_set_model(st, 1, &m, CW_ADMIT_MODEL_STORED, NULL,
							 &ref, NULL), 0);
		CU_ASSERT(cw_admit_resv_part_on(rv, 1)->task.service_ns > on1->task.service_ns);
		CU_ASSERT_EQUAL(cw_admit_resv_part_on(rv, 1)->stride, 1);
	}

	/* While the move is unfinished, nothing settles. */
	CU_ASSERT_EQUAL(cw_admit_state_moves_settle(st, NULL), 0);
	CU_ASSERT_EQUAL(rv->move_id, mid);
	CU_ASSERT_FATAL(cw_move_resume(T.pool, mid) == 0);
	CU_ASSERT(run_moves() == cw_part_nblocks(part) / 2);
	memset(&s.plans, 0, sizeof(s.plans));
	memset(&ch, 0, sizeof(ch));
	CU_ASSERT_EQUAL(cw_admit_state_moves_settle(st, &ch), 1);
	CU_ASSERT_EQUAL(rv->move_id, 0);
	CU_ASSERT_EQUAL_FATAL(rv->n_parts, 1);
	CU_ASSERT_FATAL(cw_admit_resv_part_on(rv, 1) != NULL);
	CU_ASSERT(cw_admit_resv_part_on(rv, 2) == NULL);
	CU_ASSERT_EQUAL(cw_admit_resv_part_on(rv, 1)->stride, 1);
	CU_ASSERT(cw_admit_changes_has(&ch, 1) && cw_admit_changes_has(&ch, 2));
	CU_ASSERT_EQUAL(s.last[2].n_tasks, 0);
	CU_ASSERT_EQUAL(s.last[1].n_tasks, 1);
	CU_ASSERT(!stored_part(rv->id, 2, &smove, &sd));
	CU_ASSERT(stored_part(rv->id, 1, &smove, &sd));
	CU_ASSERT_EQUAL(smove, 0);
	/* Disk 2 serves no stream any more: it may go. */
	CU_ASSERT_EQUAL(cw_admit_state_disk_streams(st, 2), 0);
	CU_ASSERT_EQUAL(cw_admit_state_moves_settle(st, NULL), 0);
	cw_admit_state_free(st);
	tp_fini(&T);
}

/* A stream that does not fit with its blocks on both sides of a move is
 * not booked for it: the refusal says the move, the disk and whose
 * deadline, and nothing changes, in memory or stored.  A move cancelled
 * after a restart (the booking found stored) settles with the blocks it
 * had moved. */
static void test_move_book_refused(void)
{
	struct cw_admit_state *st;
	const struct cw_admit_resv *rv;
	struct cw_admit_request rq = req(0);
	struct cw_admit_refusal ref;
	struct cw_move_opts mo = { .placement = CW_PLACE_SINGLE };
	const uint32_t one = 1;
	struct cw_resv_disk sd;
	struct cw_part *part;
	struct cw_disk_plan p1, p1b;
	uint64_t max, mid, smove = 99;
	int64_t c1;
	char want[128];

	setup();
	st = state(NULL);
	CU_ASSERT_FATAL(cw_part_lookup(T.pool, "media", &part) == 0);
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &max, NULL) == 0);
	rq = req(max * 75 / 100);
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, NULL, NULL) == 0);
	c1 = cw_admit_resv_part_on(rv, 1)->task.service_ns;
	CU_ASSERT_FATAL(cw_admit_state_plan(st, 1, &p1) == 0);
	mo.disk_ids = &one;
	mo.ndisks = 1;
	CU_ASSERT_FATAL(cw_move_start_paused(part, 0, cw_part_nblocks(part), &mo, CW_MOVE_PART,
					     "test", &mid) == 0);
	CU_ASSERT_EQUAL_FATAL(cw_admit_state_move_book(st, rv->stream, mid, &ref, NULL), -EBUSY);
	printf("\n  both sides: %s\n", ref.reason);
	snprintf(want, sizeof(want), "with its blocks on both sides of move %" PRIu64
		 ", reservation %" PRIu64 " would be refused on disk disk1: ", mid, rv->id);
	CU_ASSERT(strstr(ref.reason, want) != NULL);
	CU_ASSERT_EQUAL(ref.disk_id, 1);
	CU_ASSERT(ref.who != CW_ADMIT_WHO_NEW);
	CU_ASSERT_EQUAL(rv->move_id, 0);
	CU_ASSERT_EQUAL(rv->n_parts, 2);
	CU_ASSERT_EQUAL(cw_admit_resv_part_on(rv, 1)->task.service_ns, c1);
	CU_ASSERT_FATAL(cw_admit_state_plan(st, 1, &p1b) == 0);
	CU_ASSERT_EQUAL(p1b.delta_l_ns, p1.delta_l_ns);
	CU_ASSERT_FATAL(stored_part(rv->id, 1, &smove, &sd));
	CU_ASSERT_EQUAL(smove, 0);
	CU_ASSERT_EQUAL(sd.service_ns, c1);
	CU_ASSERT_EQUAL(sd.stride, 2);
	CU_ASSERT_FATAL(cw_admit_state_release(st, rv->id, NULL) == 0);

	/* A small one is booked; the daemon dies; the move runs half-way
	 * and is cancelled: after the restart its booking settles on where
	 * the blocks are then, both disks, as before. */
	rq = req(max / 10);
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, NULL, NULL) == 0);
	CU_ASSERT_FATAL(cw_admit_state_move_book(st, rv->stream, mid, &ref, NULL) == 0);
	cw_admit_state_free(st);
	CU_ASSERT_FATAL(cw_move_resume(T.pool, mid) == 0);
	{
		struct cw_mover_task t;

		for (int i = 0; i < 5; i++) {
			CU_ASSERT_FATAL(cw_mover_next(T.pool, &t) == 0 && t.action == CW_MOVER_COPY);
			CU_ASSERT_FATAL(cw_mover_copied(T.pool, 0, 0) == 0);
		}
	}
	CU_ASSERT_FATAL(cw_move_cancel(T.pool, mid, NULL) == 0);
	tp_reopen(&T);
	CU_ASSERT_FATAL(cw_part_lookup(T.pool, "media", &part) == 0);
	st = state(NULL);
	rv = cw_admit_state_resv_at(st, 0);
	CU_ASSERT_FATAL(rv != NULL);
	CU_ASSERT_EQUAL(rv->move_id, mid);
	CU_ASSERT_EQUAL(cw_admit_resv_part_on(rv, 1)->stride, 1);
	CU_ASSERT_EQUAL(cw_admit_state_moves_settle(st, NULL), 1);
	CU_ASSERT_EQUAL(rv->move_id, 0);
	CU_ASSERT_EQUAL_FATAL(rv->n_parts, 2);
	/* Five of disk 2's blocks are on disk 1 now: requests 1, 3 .. 9 in a
	 * row there, the rest every other one. */
	CU_ASSERT_EQUAL(cw_admit_resv_part_on(rv, 1)->stride, 1);
	CU_ASSERT_EQUAL(cw_admit_resv_part_on(rv, 2)->stride, 2);
	CU_ASSERT(cw_admit_resv_part_on(rv, 2)->requests < cw_admit_resv_part_on(rv, 1)->requests);
	CU_ASSERT_FATAL(stored_part(rv->id, 2, &smove, &sd));
	CU_ASSERT_EQUAL(smove, 0);
	/* Settling a stream without a move changes nothing. */
	CU_ASSERT_EQUAL(cw_admit_state_move_settle(st, rv->stream, NULL), 0);
	CU_ASSERT_EQUAL(cw_admit_state_move_settle(st, rv->stream + 7, NULL), -ENOENT);
	cw_admit_state_free(st);
	tp_fini(&T);
}

/* The copy parts of rv: how many, and its part on disk 3 (the SSD). */
static size_t copies(const struct cw_admit_resv *rv)
{
	size_t n = 0;

	for (size_t i = 0; i < rv->n_parts; i++)
		n += rv->parts[i].copy;
	return n;
}

/* A move of all of part onto disk 1, journalled paused: its id. */
static uint64_t move_to_disk1(struct cw_part *part)
{
	static const uint32_t one = 1;
	struct cw_move_opts mo = { .placement = CW_PLACE_SINGLE, .disk_ids = &one, .ndisks = 1 };
	uint64_t mid;

	CU_ASSERT_FATAL(cw_move_start_paused(part, 0, cw_part_nblocks(part), &mo, CW_MOVE_PART,
					     "test", &mid) == 0);
	return mid;
}

/* Rule 2 for a partition's SSD cache: a stream is booked on the cache's
 * disk too (every request charged there) when the SSD admits it, stored
 * so and reloaded alike; refused (the SSD full of another partition's
 * stream), it says why, once, and is booked when a release makes room;
 * a cache given back leaves the SSD only once its slots are gone; a move
 * books the stream with its cache copies beside. */
static void test_cache_book(void)
{
	static const enum cw_tier tiers[] = { CW_TIER_HDD, CW_TIER_HDD, CW_TIER_SSD };
	const uint64_t n[3] = { 1024, 1024, 512 };
	struct cw_part_opts hdd = { .tier = CW_TIER_PREF_HDD };
	struct cw_cache_conf conf = { 64 * MIB, CW_CACHE_WRITE_THROUGH };
	struct cw_admit_state *st, *st2;
	const struct cw_admit_resv *rv, *rv2;
	const struct cw_admit_resv_part *on3;
	struct cw_admit_request rq = req(0);
	struct cw_model slow, fastm;
	struct cw_admit_changes ch = { { 0 } };
	struct cw_cache_task t;
	struct cw_resv_disk sd;
	struct cw_part *part;
	uint64_t max, mv;
	char want[160];

	tp_pool(&T, 0, 3, n, tiers);
	CU_ASSERT_FATAL(cw_part_create(T.pool, "media", 256 * MIB, &hdd, &part) == 0);
	st = state(NULL);
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &max, NULL) == 0);
	rq = req(max / 5);
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, NULL, NULL) == 0);
	CU_ASSERT_FATAL(rv->n_parts == 2);
	/* No cache: nothing to book. */
	CU_ASSERT_EQUAL(cw_admit_state_cache_sync(st, NULL, true, NULL), 0);
	CU_ASSERT(copies(rv) == 0 && !rv->cache_refused[0]);

	CU_ASSERT_FATAL(cw_part_cache_set(part, &conf) == 0);
	CU_ASSERT_EQUAL(cw_admit_state_cache_sync(st, "media", false, &ch), 0);
	CU_ASSERT_EQUAL_FATAL(rv->n_parts, 3);
	on3 = cw_admit_resv_part_on(rv, 3);
	CU_ASSERT_FATAL(on3 != NULL);
	/* Any block may be cached: every request charged on the SSD. */
	CU_ASSERT(on3->copy && on3->stride == 1 && on3->task.period_ns == rv->period_ns);
	CU_ASSERT(!cw_admit_resv_part_on(rv, 1)->copy && cw_admit_resv_part_on(rv, 1)->stride == 2);
	CU_ASSERT(cw_admit_changes_has(&ch, 3));
	CU_ASSERT(!rv->cache_refused[0]);
	CU_ASSERT_FATAL(stored_part(rv->id, 3, &mv, &sd));
	CU_ASSERT(sd.copy && sd.stride == 1);
	/* Reloaded as booked; nothing to do again. */
	st2 = state(NULL);
	rv2 = cw_admit_state_resv_find(st2, rv->id);
	CU_ASSERT_FATAL(rv2 && cw_admit_resv_part_on(rv2, 3));
	CU_ASSERT(cw_admit_resv_part_on(rv2, 3)->copy);
	CU_ASSERT_EQUAL(cw_admit_resv_part_on(rv2, 3)->task.service_ns, on3->task.service_ns);
	CU_ASSERT_EQUAL(cw_admit_state_cache_sync(st2, NULL, true, NULL), 0);
	CU_ASSERT_EQUAL(copies(rv2), 1);
	cw_admit_state_free(st2);
	/* A new model of the SSD admits it again there, as a copy. */
	{
		struct cw_model m;
		int64_t c3 = on3->task.service_ns;

		CU_ASSERT_FATAL(cw_admit_state_get_model(st, 3, &m, NULL) == 0);
		m.margin_ppm += 10000;
		CU_ASSERT_EQUAL(cw_admit_state_set_model(st, 3, &m, CW_ADMIT_MODEL_STORED, NULL,
							 NULL, NULL), 0);
		CU_ASSERT(cw_admit_resv_part_on(rv, 3)->task.service_ns > c3);
		CU_ASSERT(cw_admit_resv_part_on(rv, 3)->copy);
	}

	/* An SSD as slow as an HDD: it would carry every request of a
	 * stream its HDDs share; refused, it says why. */
	CU_ASSERT_FATAL(cw_admit_state_release(st, rv->id, NULL) == 0);
	CU_ASSERT_FATAL(cw_model_preset("hdd7200", &slow) == 0);
	CU_ASSERT_FATAL(cw_admit_state_get_model(st, 3, &fastm, NULL) == 0);
	CU_ASSERT_FATAL(cw_admit_state_set_model(st, 3, &slow, CW_ADMIT_MODEL_STORED, NULL, NULL,
						 NULL) == 0);
	rq = req(max * 3 / 4);
	/* The reserve itself tries the cache's disk (state-stream.c). */
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, NULL, NULL) == 0);
	printf("\n  cache refused: %s\n", rv->cache_refused);
	snprintf(want, sizeof(want), "with its blocks cached on disk disk3, reservation %" PRIu64
		 " would be refused on disk disk3: ", rv->id);
	CU_ASSERT(strstr(rv->cache_refused, want) != NULL);
	CU_ASSERT(cw_admit_resv_part_on(rv, 3) == NULL && rv->n_parts == 2);
	CU_ASSERT(!stored_part(rv->id, 3, &mv, &sd));
	CU_ASSERT(rv->cache_refused_new);
	/* Not said again; not tried again without retry. */
	CU_ASSERT_EQUAL(cw_admit_state_cache_sync(st, NULL, true, NULL), 0);
	CU_ASSERT(!rv->cache_refused_new);
	CU_ASSERT_EQUAL(cw_admit_state_cache_sync(st, NULL, false, NULL), 0);
	CU_ASSERT(rv->cache_refused[0]);
	/* The SSD as fast as it was: booked once tried again. */
	CU_ASSERT_FATAL(cw_admit_state_set_model(st, 3, &fastm, CW_ADMIT_MODEL_STORED, NULL, NULL,
						 NULL) == 0);
	CU_ASSERT_EQUAL(cw_admit_state_cache_sync(st, NULL, false, NULL), 0);
	CU_ASSERT(rv->cache_refused[0]);
	CU_ASSERT_EQUAL(cw_admit_state_cache_sync(st, NULL, true, NULL), 0);
	CU_ASSERT(!rv->cache_refused[0]);
	CU_ASSERT_FATAL(cw_admit_resv_part_on(rv, 3) && cw_admit_resv_part_on(rv, 3)->copy);

	/* A move books the stream with its copies beside, and settles so. */
	{
		struct cw_admit_refusal ref;
		uint64_t mid;

		CU_ASSERT_FATAL(cw_admit_state_release(st, rv->id, NULL) == 0);
		rq = req(max / 5);
		CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, NULL, NULL) == 0);
		CU_ASSERT_EQUAL(cw_admit_state_cache_sync(st, "media", false, NULL), 0);
		CU_ASSERT(copies(rv) == 1);
		mid = move_to_disk1(part);
		CU_ASSERT_EQUAL_FATAL(cw_admit_state_move_book(st, rv->stream, mid, &ref, NULL), 0);
		CU_ASSERT(rv->n_parts == 3 && copies(rv) == 1 && cw_admit_resv_part_on(rv, 3)->copy);
		CU_ASSERT_FATAL(cw_move_resume(T.pool, mid) == 0);
		run_moves();
		CU_ASSERT_EQUAL(cw_admit_state_moves_settle(st, NULL), 1);
		CU_ASSERT(rv->n_parts == 2 && cw_admit_resv_part_on(rv, 1) &&
			  cw_admit_resv_part_on(rv, 3) && cw_admit_resv_part_on(rv, 3)->copy);
	}

	/* The cache given back: the SSD stays booked while its slots are
	 * there (the worker demotes first), and not once they are gone. */
	conf.size_bytes = 0;
	CU_ASSERT_FATAL(cw_part_cache_set(part, &conf) == 0);
	CU_ASSERT_EQUAL(cw_admit_state_cache_sync(st, NULL, false, NULL), 0);
	CU_ASSERT(cw_admit_resv_part_on(rv, 3) != NULL);
	CU_ASSERT_FATAL(cw_cache_next(T.pool, 0, &t) == 0);
	CU_ASSERT_EQUAL(t.action, CW_CACHE_IDLE);
	CU_ASSERT_EQUAL(cw_admit_state_cache_sync(st, NULL, false, NULL), 0);
	CU_ASSERT(cw_admit_resv_part_on(rv, 3) == NULL && copies(rv) == 0);
	CU_ASSERT(!stored_part(rv->id, 3, &mv, &sd));
	CU_ASSERT_EQUAL(cw_admit_state_disk_streams(st, 3), 0);
	cw_admit_state_free(st);
	tp_fini(&T);
}

/* rv, made during move mid onto disk 1, is booked on both sides of it
 * (disk 1 carries every request), stored with the move, and settles on
 * disk 1 alone once the move is done. */
static void booked_for_move(struct cw_admit_state *st, const struct cw_admit_resv *rv,
			    uint64_t mid)
{
	struct cw_resv_disk sd;
	uint64_t mv = 0;

	CU_ASSERT_EQUAL(rv->move_id, mid);
	CU_ASSERT_FATAL(rv->n_parts == 2);
	CU_ASSERT_EQUAL(cw_admit_resv_part_on(rv, 1)->stride, 1);
	CU_ASSERT_FATAL(stored_part(rv->id, 1, &mv, &sd));
	CU_ASSERT_EQUAL(mv, mid);
	run_moves();
	CU_ASSERT_EQUAL(cw_admit_state_moves_settle(st, NULL), 1);
	CU_ASSERT(rv->n_parts == 1 && cw_admit_resv_part_on(rv, 1) && rv->move_id == 0);
}

/* Rule 2 for a new stream: created while a move takes its range to
 * another disk, it is booked on both sides at once (stored with the
 * move), and settles on the destination when the move is done; one that
 * does not fit on both sides is refused, naming the move. */
static void test_reserve_during_move(void)
{
	struct cw_admit_state *st;
	const struct cw_admit_resv *rv;
	struct cw_admit_request rq = req(0);
	struct cw_admit_refusal ref;
	struct cw_part *part;
	uint64_t max, both, mid;
	char want[96];

	setup();
	st = state(NULL);
	CU_ASSERT_FATAL(cw_part_lookup(T.pool, "media", &part) == 0);
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &max, NULL) == 0);
	mid = move_to_disk1(part);
	CU_ASSERT_FATAL(cw_move_resume(T.pool, mid) == 0);
	rq.move_id = mid;
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &both, NULL) == 0);
	printf("\n  headroom %" PRIu64 " B/s, on both sides of the move %" PRIu64 "\n", max,
	       both);
	CU_ASSERT(both < max && both > 0);
	rq = req(both + both / 20 + 1);
	rq.move_id = mid;
	CU_ASSERT_EQUAL(cw_admit_state_reserve(st, &rq, &rv, &ref, NULL), -EBUSY);
	printf("  refused: %s\n", ref.reason);
	snprintf(want, sizeof(want), "with its blocks on both sides of move %" PRIu64, mid);
	CU_ASSERT(strstr(ref.reason, want) == ref.reason);
	CU_ASSERT_EQUAL(stored(), 0);
	rq.rate_bps = both / 2;
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, &ref, NULL) == 0);
	booked_for_move(st, rv, mid);
	cw_admit_state_free(st);
	tp_fini(&T);
}

/* The same rule found by admission itself: a reservation that names no
 * move, made while a move takes its range to another disk, is booked on
 * both sides of it through cw_admit_state_reserve alone (as cwctl,
 * clockwised -r and cwsim make it), stored with the move, with the
 * headroom of both sides; a range the move leaves where it is, or a move
 * still paused (postponed), books the stream where its range lies. */
static void test_reserve_finds_move(void)
{
	struct cw_admit_state *st;
	const struct cw_admit_resv *rv;
	struct cw_admit_request rq = req(0);
	struct cw_part *part;
	uint64_t max, both, found, mid, on1;
	uint32_t d[2];

	setup();
	st = state(NULL);
	CU_ASSERT_FATAL(cw_part_lookup(T.pool, "media", &part) == 0);
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &max, NULL) == 0);
	mid = move_to_disk1(part);
	/* Journalled paused, as rule 2 postpones one: no move yet. */
	rq = req(max / 8);
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, NULL, NULL) == 0);
	CU_ASSERT_EQUAL(rv->move_id, 0);
	CU_ASSERT_FATAL(cw_admit_state_release(st, rv->id, NULL) == 0);

	CU_ASSERT_FATAL(cw_move_resume(T.pool, mid) == 0);
	rq = req(0);
	rq.move_id = mid;
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &both, NULL) == 0);
	rq.move_id = 0;
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &found, NULL) == 0);
	printf("\n  headroom %" PRIu64 " B/s; asked during move %" PRIu64 " with it named %" PRIu64
	       ", without %" PRIu64 "\n", max, mid, both, found);
	CU_ASSERT(both < max);
	CU_ASSERT_EQUAL(found, both);
	/* One block already on disk 1: the move leaves it there. */
	CU_ASSERT_FATAL(cw_part_block_disks(part, 0, 2, d) == 0);
	on1 = d[0] == 1 ? 0 : 1;
	rq = req(100000);
	rq.range_start_bytes = on1 * MIB;
	rq.range_end_bytes = (on1 + 1) * MIB;
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, NULL, NULL) == 0);
	CU_ASSERT(rv->move_id == 0 && rv->n_parts == 1 && cw_admit_resv_part_on(rv, 1));
	CU_ASSERT_FATAL(cw_admit_state_release(st, rv->id, NULL) == 0);

	rq = req(both / 2);
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, NULL, NULL) == 0);
	booked_for_move(st, rv, mid);
	cw_admit_state_free(st);
	tp_fini(&T);
}

/* The host's bound in exact arithmetic: a stream of blocks of 1000 bytes
 * at 1 us a request and 1 ns a byte needs 2000 ps of CPU per byte a
 * second, so half of 2 CPUs (10^12 ps a second) takes 5 * 10^8 B/s and
 * not one byte a second more. */
static void test_host_bound(void)
{
	struct cw_host_model h = { .request_ns = 1000, .byte_ps = 1000, .cpus = 2,
				   .share_ppm = 500000 };
	struct cw_host_result res;
	char words[256];

	CU_ASSERT_EQUAL(cw_host_capacity_ps(&h), CW_HOST_PS_PER_CPU_S);
	CU_ASSERT_EQUAL(cw_host_demand_ps(&h, 1, 1000), 2000);
	CU_ASSERT_EQUAL(cw_host_test(&h, 0, 500000000, 1000, &res), 0);
	CU_ASSERT_FALSE(res.refused);
	CU_ASSERT_EQUAL(res.need_ps, res.given_ps);
	CU_ASSERT_EQUAL(res.max_rate_bps, 500000000);
	CU_ASSERT_EQUAL(cw_host_test(&h, 0, 500000001, 1000, &res), 0);
	CU_ASSERT_TRUE(res.refused);
	CU_ASSERT_EQUAL(res.need_ps, CW_HOST_PS_PER_CPU_S + 2000);
	CU_ASSERT_EQUAL(res.max_rate_bps, 500000000);
	/* beside streams that leave 3999 ps: one byte a second fits, two do not */
	CU_ASSERT_EQUAL(cw_host_test(&h, CW_HOST_PS_PER_CPU_S - 3999, 1, 1000, &res), 0);
	CU_ASSERT_FALSE(res.refused);
	CU_ASSERT_EQUAL(res.max_rate_bps, 1);
	CU_ASSERT_EQUAL(cw_host_test(&h, CW_HOST_PS_PER_CPU_S - 3999, 2, 1000, &res), 0);
	CU_ASSERT_TRUE(res.refused);
	CU_ASSERT_EQUAL(cw_host_test(&h, CW_HOST_PS_PER_CPU_S, 1, 1000, &res), 0);
	CU_ASSERT_EQUAL(res.max_rate_bps, 0);
	/* a request's share is rounded up, once per stream */
	h = (struct cw_host_model){ .request_ns = 1, .cpus = 1, .share_ppm = 1 };
	CU_ASSERT_EQUAL(cw_host_demand_ps(&h, 1, 3), 334);
	CU_ASSERT_EQUAL(cw_host_demand_ps(&h, 3, 3), 1000);
	CU_ASSERT_EQUAL(cw_host_capacity_ps(&h), 1000000);
	CU_ASSERT_EQUAL(cw_host_test(&h, 0, 3000, 3, &res), 0);
	CU_ASSERT_FALSE(res.refused);
	CU_ASSERT_EQUAL(cw_host_test(&h, 0, 3001, 3, &res), 0);
	CU_ASSERT_TRUE(res.refused);
	CU_ASSERT_EQUAL(res.max_rate_bps, 3000);
	cw_host_result_words(&h, &res, words, sizeof(words));
	CU_ASSERT(strstr(words, "CPUs of real-time work") != NULL);
	/* no model: no test */
	h = (struct cw_host_model){ .cpus = 1, .share_ppm = 1 };
	CU_ASSERT_EQUAL(cw_host_test(&h, UINT64_MAX, UINT64_MAX, 1, &res), 0);
	CU_ASSERT_FALSE(res.refused);
	CU_ASSERT_EQUAL(cw_host_test(&h, 0, 1, 0, &res), -EINVAL);
}

/* The host's watch: the daemon's side of the charge (two of three copies),
 * three intervals in a row over 5/4 of it propose the least of their
 * ratios, an interval within 5/4 or too small to judge starts again, a
 * proposal is at most four times, and scaling rounds up. */
static void test_host_watch(void)
{
	struct cw_host_model h = { .request_ns = 10000, .byte_ps = 300, .cpus = 2,
				   .share_ppm = CW_HOST_SHARE_DEFAULT_PPM };
	struct cw_host_watch w = { 0 };
	uint64_t f = 0;

	/* 1000 requests, 100 MB: 10 ms + 100e6 * 200 ps = 30 ms */
	CU_ASSERT_EQUAL(cw_host_charge_ns(&h, 1000, 100000000), 30000000);
	CU_ASSERT_EQUAL(cw_host_watch_add(&w, &h, 1000, 100000000, 60000000, &f), 0);
	CU_ASSERT_EQUAL(cw_host_watch_add(&w, &h, 1000, 100000000, 45000000, &f), 0);
	CU_ASSERT_EQUAL(cw_host_watch_add(&w, &h, 1000, 100000000, 90000000, &f), 1);
	CU_ASSERT_EQUAL(f, 1500000);	/* the least: 45 of 30 */
	/* 5/4 exactly is within: the run starts again */
	CU_ASSERT_EQUAL(cw_host_watch_add(&w, &h, 1000, 100000000, 60000000, &f), 0);
	CU_ASSERT_EQUAL(cw_host_watch_add(&w, &h, 1000, 100000000, 60000000, &f), 0);
	CU_ASSERT_EQUAL(cw_host_watch_add(&w, &h, 1000, 100000000, 37500000, &f), 0);
	CU_ASSERT_EQUAL(cw_host_watch_add(&w, &h, 1000, 100000000, 60000000, &f), 0);
	CU_ASSERT_EQUAL(cw_host_watch_add(&w, &h, 1000, 100000000, 60000000, &f), 0);
	/* too little served to judge: 1 ms charged */
	CU_ASSERT_EQUAL(cw_host_watch_add(&w, &h, 100, 0, 900000000, &f), 0);
	CU_ASSERT_EQUAL(cw_host_watch_add(&w, &h, 1000, 100000000, 600000000, &f), 0);
	CU_ASSERT_EQUAL(cw_host_watch_add(&w, &h, 1000, 100000000, 600000000, &f), 0);
	CU_ASSERT_EQUAL(cw_host_watch_add(&w, &h, 1000, 100000000, 600000000, &f), 1);
	CU_ASSERT_EQUAL(f, CW_HOST_WATCH_MAX_PPM);	/* 20 times, at most 4 */
	cw_host_model_scale(&h, 1500001);
	CU_ASSERT_EQUAL(h.request_ns, 15001);
	CU_ASSERT_EQUAL(h.byte_ps, 451);
	CU_ASSERT_EQUAL(cw_host_watch_add(NULL, &h, 1, 1, 1, &f), -EINVAL);
}

/* The state asks the host once the disks admit a stream: the largest
 * rate is the host's when it is the lower, a stream one byte a second
 * above it is refused for the host (no disk, the CPUs in its facts), and
 * one at it is admitted and counted. */
static void test_host_state(void)
{
	struct cw_admit_state *st;
	const struct cw_admit_resv *rv;
	struct cw_admit_request rq = req(0);
	struct cw_admit_refusal ref;
	struct cw_host_model h;
	uint64_t disk_max, max, need;
	char want[160], r[CW_UNITS_BUF];

	setup();
	st = state(NULL);
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &disk_max, NULL) == 0);
	/* a host that takes a third of what the disks would: 1 ms a request,
	 * nothing a byte, on one CPU */
	h = (struct cw_host_model){ .request_ns = 1000000, .cpus = 1 };
	h.share_ppm = (uint32_t)(1000000ull * (disk_max / 3) / MIB / 1000);
	CU_ASSERT_FATAL(h.share_ppm > 0);
	CU_ASSERT_EQUAL(cw_admit_state_set_host(st, &(struct cw_host_model){ .request_ns = -1 }),
			-EINVAL);
	CU_ASSERT_FATAL(cw_admit_state_set_host(st, &h) == 0);
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &max, &ref) == 0);
	CU_ASSERT(max < disk_max);
	CU_ASSERT_EQUAL(ref.part.result.why, CW_ADMIT_HOST);
	CU_ASSERT_EQUAL(ref.disk_id, 0);
	/* exact: ceil(rate * 10^9 / 2^20) ps <= share_ppm * 10^6 */
	CU_ASSERT((unsigned __int128)max * 1000000000 <= (unsigned __int128)h.share_ppm * 1000000 * MIB);
	CU_ASSERT((unsigned __int128)(max + 1) * 1000000000 >
		  (unsigned __int128)h.share_ppm * 1000000 * MIB);

	rq = req(max + 1);
	CU_ASSERT_EQUAL(cw_admit_state_reserve(st, &rq, &rv, &ref, NULL), -EBUSY);
	CU_ASSERT_EQUAL(ref.part.result.why, CW_ADMIT_HOST);
	CU_ASSERT_EQUAL(ref.disk_id, 0);
	CU_ASSERT_EQUAL(ref.who, CW_ADMIT_WHO_NEW);
	CU_ASSERT_TRUE(ref.host.refused);
	CU_ASSERT(ref.host.need_ps > ref.host.given_ps);
	CU_ASSERT_EQUAL(ref.host.given_ps, (uint64_t)h.share_ppm * 1000000);
	CU_ASSERT(ref.has_max_rate);
	CU_ASSERT_EQUAL(ref.max_rate_bps, max);
	CU_ASSERT(strncmp(ref.reason, "refused for the host: the streams would need", 44) == 0);
	snprintf(want, sizeof(want), "the largest rate that fits with 1M blocks is %s",
		 cw_units_format_rate(cw_units_floor_rate(max), r));
	CU_ASSERT(strstr(ref.reason, want) != NULL);
	CU_ASSERT_EQUAL(stored(), 0);

	rq = req(max);
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, &ref, NULL) == 0);
	cw_admit_state_host(st, NULL, &need);
	CU_ASSERT_EQUAL(need, cw_host_demand_ps(&h, max, MIB));
	/* nothing left on the host, though the disks have room */
	rq = req(0);
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &max, &ref) == 0);
	CU_ASSERT(max < 1100);	/* what the rounding of one request leaves */
	CU_ASSERT_EQUAL(ref.part.result.why, CW_ADMIT_HOST);
	CU_ASSERT_FATAL(cw_admit_state_disk_headroom(st, 1, MIB, &max, &ref) == 0);
	CU_ASSERT_EQUAL(ref.part.result.why, CW_ADMIT_HOST);
	/* no model: the disks alone again */
	CU_ASSERT_FATAL(cw_admit_state_set_host(st, &(struct cw_host_model){ 0 }) == 0);
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &max, &ref) == 0);
	CU_ASSERT(max > disk_max / 2);
	CU_ASSERT(ref.disk_id != 0);
	cw_admit_state_free(st);
	tp_fini(&T);
}

/* A stream on a 2-copy partition that must survive a disk: admitted only
 * at rates every one-disk failure case carries (less than the normal
 * case's), refused between the two naming the failed disk, admitted
 * there with survive off; refused on a partition of one copy; stored
 * with its survive bit and loaded back with it.  A recording stream is
 * booked on both disks for every request, and stored as one. */
static void test_survive(void)
{
	struct cw_admit_refusal ref;
	struct cw_admit_state *st;
	const struct cw_admit_resv *rv;
	struct cw_admit_request rq = req(0);
	struct cw_part *m;
	uint64_t plain, surv, id;

	setup();
	CU_ASSERT_FATAL(cw_part_create(T.pool, "mir", 64 * MIB, &(struct cw_part_opts){ .copies = 2 },
				       &m) == 0);
	st = state(NULL);
	rq.part = "mir";
	rq.survive = CW_ADMIT_SURVIVE_OFF;
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &plain, NULL) == 0);
	rq.survive = CW_ADMIT_SURVIVE_AUTO;	/* on, on a mirrored partition */
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &surv, NULL) == 0);
	printf("\n  largest stream on 2 copies: %" PRIu64 " B/s, surviving a disk %" PRIu64
	       " B/s\n", plain, surv);
	CU_ASSERT(surv > 0 && surv < plain);

	rq.rate_bps = surv + (plain - surv) / 2;
	CU_ASSERT_EQUAL(cw_admit_state_reserve(st, &rq, &rv, &ref, NULL), -EBUSY);
	printf("  %s\n", ref.reason);
	CU_ASSERT(strstr(ref.reason, "with disk ") == ref.reason);
	CU_ASSERT(strstr(ref.reason, " failed, refused on disk ") != NULL);
	CU_ASSERT(ref.has_max_rate && ref.max_rate_bps == surv);
	rq.survive = CW_ADMIT_SURVIVE_OFF;
	rq.dry_run = true;
	CU_ASSERT_EQUAL(cw_admit_state_reserve(st, &rq, &rv, &ref, NULL), 0);
	rq.dry_run = false;

	rq.part = "media";
	rq.survive = CW_ADMIT_SURVIVE_ON;
	CU_ASSERT_EQUAL(cw_admit_state_reserve(st, &rq, &rv, &ref, NULL), -EINVAL);
	CU_ASSERT(strstr(ref.reason, "keeps one copy of each block") != NULL);
	rq.survive = CW_ADMIT_SURVIVE_AUTO;	/* off, on one copy */
	rq.rate_bps = MIB;
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, &ref, NULL) == 0);
	CU_ASSERT_FALSE(rv->survive);

	rq.part = "mir";
	rq.rate_bps = surv / 2;
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, &ref, NULL) == 0);
	CU_ASSERT(rv->survive && rv->n_parts == 2);
	id = rv->id;
	cw_admit_state_free(st);
	st = state(NULL);
	rv = cw_admit_state_resv_find(st, id);
	CU_ASSERT_FATAL(rv != NULL);
	CU_ASSERT(rv->survive);
	/* what is left survives too, not more */
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &plain, NULL) == 0);
	CU_ASSERT(plain < surv);
	CU_ASSERT_FATAL(cw_admit_state_release(st, id, NULL) == 0);

	/* a recording stream: every request on both disks, so no more than
	 * one disk carries alone; surviving costs it nothing more here */
	rq.survive = CW_ADMIT_SURVIVE_OFF;
	rq.record = true;
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &plain, NULL) == 0);
	CU_ASSERT(plain <= surv + surv / 100 && plain > 0);
	rq.rate_bps = plain / 2;
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, &ref, NULL) == 0);
	CU_ASSERT(rv->record && !rv->survive && rv->n_parts == 2);
	CU_ASSERT(rv->parts[0].requests == 64 && rv->parts[1].requests == 64);
	CU_ASSERT(rv->parts[0].stride == 1 && rv->parts[1].stride == 1);
	id = rv->id;
	cw_admit_state_free(st);
	st = state(NULL);
	rv = cw_admit_state_resv_find(st, id);
	CU_ASSERT_FATAL(rv != NULL);
	CU_ASSERT(rv->record && !rv->survive);
	cw_admit_state_free(st);
	tp_fini(&T);
}

/* Disk id's model with its transfer rates divided by div (1: as given). */
static void model_slowed(struct cw_admit_state *st, uint32_t id, const struct cw_model *base,
			 uint64_t div)
{
	struct cw_model m = *base;
	bool taken;

	for (unsigned z = 0; z < m.n_zones; z++)
		m.zone[z].rate_bps /= div;
	CU_ASSERT_FATAL(cw_admit_state_set_model(st, id, &m, CW_ADMIT_MODEL_CALIBRATED, &taken,
						 NULL, NULL) == 0);
	CU_ASSERT(taken);
}

static bool on_disk(const struct cw_admit_resv *rv, uint32_t id)
{
	return cw_admit_resv_part_on(rv, id) != NULL;
}

/* A disk of a 2-copy partition replaced by a spare, checked against the
 * stream that survives a disk on it: admission with the spare in the
 * failed disk's place.  Spares too slow for the stream refuse it, naming
 * the reservation and the disk, and change nothing (they stay spares);
 * the takeover tries each spare and says why none carried it; a spare
 * that carries it takes the disk's copies, the stream booked there with
 * its part on the old disk kept until the replacement is done, then on
 * the copies where they are.  disk replace refuses the same way. */
static void test_replace_spare(void)
{
	const uint64_t n[4] = { 1024, 1024, 1024, 1024 };
	struct cw_admit_takeover t;
	struct cw_admit_refusal ref;
	struct cw_admit_state *st;
	const struct cw_admit_resv *rv;
	struct cw_admit_request rq = req(0);
	struct cw_disk_info di;
	struct cw_model base;
	enum cw_admit_model_source src;
	struct cw_part *m;
	uint64_t surv, *ids = NULL;
	size_t nm = 0;
	char want[64];

	tp_pool(&T, 0, 4, n, NULL);
	CU_ASSERT_FATAL(cw_disk_set_spare(T.pool, 3, true) == 0);
	CU_ASSERT_FATAL(cw_disk_set_spare(T.pool, 4, true) == 0);
	CU_ASSERT_FATAL(cw_part_create(T.pool, "mir", 64 * MIB, &(struct cw_part_opts){ .copies = 2 },
				       &m) == 0);
	st = state(NULL);
	rq.part = "mir";
	CU_ASSERT_FATAL(cw_admit_state_headroom(st, &rq, &surv, NULL) == 0);
	/* past half the room: planned beside itself it would not fit */
	rq.rate_bps = surv / 10 * 8;
	CU_ASSERT_FATAL(cw_admit_state_reserve(st, &rq, &rv, &ref, NULL) == 0);
	CU_ASSERT_FATAL(rv->survive && on_disk(rv, 1) && on_disk(rv, 2) && rv->n_parts == 2);
	CU_ASSERT_FATAL(cw_admit_state_get_model(st, 3, &base, &src) == 0);
	model_slowed(st, 3, &base, 50);
	model_slowed(st, 4, &base, 50);

	/* both spares too slow */
	CU_ASSERT_EQUAL(cw_admit_state_replace(st, 2, 3, NULL, 0, &ref, NULL), -EBUSY);
	printf("\n  %s\n", ref.reason);
	snprintf(want, sizeof(want), "reservation %" PRIu64 " would be", rv->id);
	CU_ASSERT(strstr(ref.reason, "with disk disk3 in place of disk disk2") == ref.reason);
	CU_ASSERT(strstr(ref.reason, want) != NULL);
	CU_ASSERT(strcmp(ref.disk, "disk3") == 0);
	CU_ASSERT(rv->n_parts == 2 && !on_disk(rv, 3));
	CU_ASSERT_FATAL(cw_admit_state_takeover(st, 2, &t, NULL) == 0);
	printf("  %s\n", t.why);
	CU_ASSERT(t.spare == 0 && t.refused == 2 && t.n_moves == 0);
	CU_ASSERT(strstr(t.why, "spare disk3: with disk disk3 in place of disk disk2") == t.why);
	CU_ASSERT(strstr(t.why, "; spare disk4: with disk disk4 in place of disk disk2") != NULL);
	CU_ASSERT(rv->n_parts == 2 && on_disk(rv, 1) && on_disk(rv, 2) && rv->move_id == 0);
	for (uint32_t id = 3; id <= 4; id++) {
		CU_ASSERT_FATAL(cw_disk_info(T.pool, id, &di) == 0);
		CU_ASSERT(di.spare && di.free_blocks == di.data_blocks);
	}
	CU_ASSERT_EQUAL(cw_admit_state_disk_replace(st, 2, 4, &ids, &nm, &ref, NULL), -EBUSY);
	CU_ASSERT(ids == NULL && nm == 0 && strcmp(ref.disk, "disk4") == 0);
	/* the refused replacement stays journalled, cancelled, saying why,
	 * the failure case after the verb */
	{
		_cleanup_free_ struct cw_move_info *mv = NULL;
		size_t n_mv = 0;
		char cancelled[160];

		snprintf(cancelled, sizeof(cancelled), "refused: with disk disk4 in place of disk "
			 "disk2, reservation %" PRIu64 " would be refused on disk disk4", rv->id);
		CU_ASSERT_FATAL(cw_move_list(T.pool, &mv, &n_mv) == 0 && n_mv > 0);
		printf("  %s\n", mv[n_mv - 1].error);
		CU_ASSERT(mv[n_mv - 1].state == CW_MOVE_CANCELLED &&
			  mv[n_mv - 1].kind == CW_MOVE_REPLACE);
		CU_ASSERT(strstr(mv[n_mv - 1].error, cancelled) == mv[n_mv - 1].error);
		CU_ASSERT(strstr(ref.reason, "would be with") == NULL);
	}
	CU_ASSERT_FATAL(cw_disk_info(T.pool, 4, &di) == 0);
	CU_ASSERT(di.spare && di.free_blocks == di.data_blocks);

	/* disk4 as fast as the others: it takes disk2's place, whose copies
	 * are out of sync (taken for gone) */
	model_slowed(st, 4, &base, 1);
	CU_ASSERT_FATAL(cw_pool_disk_set_stale(T.pool, 2, NULL) == 0);
	CU_ASSERT_FATAL(cw_admit_state_takeover(st, 2, &t, NULL) == 0);
	CU_ASSERT(t.spare == 4 && t.refused == 1 && t.n_moves == 1);
	CU_ASSERT(strstr(t.why, "spare disk3: ") == t.why);
	CU_ASSERT_FATAL(t.n_moves == 1);
	CU_ASSERT(on_disk(rv, 1) && on_disk(rv, 2) && on_disk(rv, 4) && !on_disk(rv, 3));
	CU_ASSERT(rv->move_id == t.move_ids[0]);
	CU_ASSERT_FATAL(cw_disk_info(T.pool, 3, &di) == 0);
	CU_ASSERT(di.spare);
	CU_ASSERT_FATAL(cw_disk_info(T.pool, 4, &di) == 0);
	CU_ASSERT(!di.spare);
	free(t.move_ids);
	CU_ASSERT(run_moves() > 0);
	CU_ASSERT(cw_admit_state_moves_settle(st, NULL) == 1);
	printf("  settled: %zu parts:", rv->n_parts);
	for (size_t i = 0; i < rv->n_parts; i++)
		printf(" disk %u (%" PRIu64 " requests)", rv->parts[i].disk_id, rv->parts[i].requests);
	printf("\n");
	CU_ASSERT(rv->n_parts == 2 && on_disk(rv, 1) && on_disk(rv, 4) && rv->move_id == 0);
	cw_admit_state_free(st);
	tp_fini(&T);
}

/* A failed disk taken over with no stream booked on it, after its copies
 * were marked out of sync: the spare with room for what it held, the
 * most room first (cw_pool_spares), whose rebuild leaves every copy in
 * sync off the failed disk; a spare too small is passed over unsaid, a
 * disk that held nothing needs none, and with no spare left with room
 * nothing is journalled and the reason says so. */
static void test_takeover_room(void)
{
	const uint64_t n[4] = { 1024, 1024, 1024, 16 };
	struct cw_admit_takeover t;
	struct cw_admit_state *st;
	struct cw_disk_info di;
	struct cw_part *m;
	uint32_t ids[4];

	tp_pool(&T, 0, 4, n, NULL);
	CU_ASSERT_FATAL(cw_disk_set_spare(T.pool, 3, true) == 0);
	CU_ASSERT_FATAL(cw_disk_set_spare(T.pool, 4, true) == 0);
	CU_ASSERT(cw_pool_spares(T.pool, 1, ids, 4) == 2 && ids[0] == 3 && ids[1] == 4);
	CU_ASSERT(cw_pool_spares(T.pool, 100, ids, 4) == 1 && ids[0] == 3);
	CU_ASSERT(cw_pool_spares(T.pool, 1024, ids, 4) == 0);
	CU_ASSERT_FATAL(cw_part_create(T.pool, "mir", 64 * MIB, &(struct cw_part_opts){ .copies = 2 },
				       &m) == 0);
	st = state(NULL);
	/* a spare holds nothing: nothing to take over */
	CU_ASSERT_FATAL(cw_admit_state_takeover(st, 4, &t, NULL) == 0);
	CU_ASSERT(t.spare == 0 && t.n_moves == 0 && t.refused == 0 && !t.why[0]);
	CU_ASSERT_FATAL(cw_pool_disk_set_stale(T.pool, 1, NULL) == 0);
	CU_ASSERT(cw_part_copy_stale_count(m, 0) + cw_part_copy_stale_count(m, 1) == 64);
	/* disk 1 holds 64 blocks: spare 4 (15) is too small, 3 takes them */
	CU_ASSERT_FATAL(cw_admit_state_takeover(st, 1, &t, NULL) == 0);
	printf("\n  spare %u, %zu moves, \"%s\"\n", t.spare, t.n_moves, t.why);
	CU_ASSERT(t.spare == 3 && t.n_moves == 1 && t.refused == 0 && !t.why[0]);
	free(t.move_ids);
	CU_ASSERT(run_moves() == 64);
	CU_ASSERT(cw_part_copy_stale_count(m, 0) + cw_part_copy_stale_count(m, 1) == 0);
	CU_ASSERT_FATAL(cw_disk_info(T.pool, 1, &di) == 0);
	CU_ASSERT(di.free_blocks == di.data_blocks);
	CU_ASSERT_FATAL(cw_disk_info(T.pool, 3, &di) == 0);
	CU_ASSERT(!di.spare && di.data_blocks - di.free_blocks == 64);
	/* no spare left with room: the survivor carries it alone */
	CU_ASSERT_FATAL(cw_pool_disk_set_stale(T.pool, 2, NULL) == 0);
	CU_ASSERT_FATAL(cw_admit_state_takeover(st, 2, &t, NULL) == 0);
	printf("  spare %u, %zu moves, \"%s\"\n", t.spare, t.n_moves, t.why);
	CU_ASSERT(t.spare == 0 && t.n_moves == 0 && t.refused == 0);
	CU_ASSERT(strcmp(t.why, "no spare with room for its 64 blocks") == 0);
	CU_ASSERT(run_moves() == 0);
	CU_ASSERT(cw_part_lost_blocks(m) == 0);
	cw_admit_state_free(st);
	tp_fini(&T);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("admit-state", NULL, NULL);

	cwtest_add(s, "empty plans", test_empty_plans);
	cwtest_add(s, "best-effort QoS between exports", test_be_qos);
	cwtest_add(s, "best-effort shares follow models and blocks", test_be_refresh);
	cwtest_add(s, "reserve and release", test_reserve_release);
	cwtest_add(s, "refusals change nothing", test_refused);
	cwtest_add(s, "fill, reload, start-up streams", test_fill_and_reload);
	cwtest_add(s, "models admit every stream again", test_set_model);
	cwtest_add(s, "disks added and removed", test_disks);
	cwtest_add(s, "a disk's plan", test_disk_plan);
	cwtest_add(s, "headroom", test_headroom);
	cwtest_add(s, "a refusal names the stream", test_refusal_names_stream);
	cwtest_add(s, "a move checked against a stream's admission", test_move_check);
	cwtest_add(s, "a move books the stream on both sides, then settles", test_move_book);
	cwtest_add(s, "refused on both sides; cancelled after a restart", test_move_book_refused);
	cwtest_add(s, "a cached partition's stream is booked on the SSD or says why",
		   test_cache_book);
	cwtest_add(s, "a stream made during a move is booked on both sides", test_reserve_during_move);
	cwtest_add(s, "a stream made during a move finds it and is booked on both sides",
		   test_reserve_finds_move);
	cwtest_add(s, "the host's bound, exact at the edge", test_host_bound);
	cwtest_add(s, "the host's watch proposes what was spent", test_host_watch);
	cwtest_add(s, "the host refuses what the disks admit", test_host_state);
	cwtest_add(s, "mirrored streams that survive a disk", test_survive);
	cwtest_add(s, "a spare checked against the streams before it replaces a disk",
		   test_replace_spare);
	cwtest_add(s, "a failed disk taken over by the spare with room", test_takeover_room);
	return cwtest_run();
}
