/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Set-up (sim.h): each stream's file is a clip of blocks placed by the
 * scenario's placement (rotation, random, single) in the outer
 * rt_area_pct of every disk, and streams are offered to cw_admit_plan one
 * after the other (a video stream, its CD-audio stream, the next video,
 * ...) until it refuses one, exactly as a daemon would be asked; or, with
 * a pool, the pool's own layout and admission state do both (pool.c).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "sim.h"

#include <clockwise/units.h>

/* Places a stream's clip: fills st->disk and st->off. */
static void place(const struct sim_scenario *sc, enum sim_placement pl, size_t idx,
		  uint64_t clip, struct sim_rng *rng, uint64_t *cursor, struct sim_stream *st)
{
	unsigned n = sc->disks;
	uint64_t b = st->block_bytes, area = sim_rt_end(sc) / b * b;

	for (uint64_t k = 0; k < clip; k++) {
		unsigned d = pl == SIM_SINGLE ? (unsigned)(idx % n) : (unsigned)((idx + k) % n);

		st->disk[k] = d;
		if (pl == SIM_RANDOM) {
			/* anywhere on the disk: the inner zones too */
			st->off[k] = sim_rng_below(rng, sc->model.capacity_bytes / b) * b;
		} else {
			/* consecutive in the fast zones; a full RT area wraps
			 * (blocks then share space, which costs nothing here) */
			if (cursor[d] + b > area)
				cursor[d] = 0;
			st->off[k] = cursor[d];
			cursor[d] += b;
		}
	}
}

/* cwsim's own layout and admission: the scenario's placement over the
 * RT area, cw_admit_plan against each disk's tasks and reserve. */
static int own_setup(struct sim_setup *s, enum sim_video video, size_t max_streams,
		     sim_curve_fn curve, void *userdata)
{
	const struct sim_scenario *sc = s->sc;
	enum sim_placement pl = s->placement;
	struct cw_admit_disk disks[SIM_MAX_DISKS];
	uint64_t cursor[SIM_MAX_DISKS] = { 0 };
	struct sim_rng kinds, offs;
	unsigned n = sc->disks;
	int e = 0;

	if (sim_rt_end(sc) < SIM_MIB * sc->buffer_scale) {
		fprintf(stderr, "cwsim: the RT area is smaller than one block\n");
		return -EINVAL;
	}
	sim_rng_seed(&kinds, sc->seed, 1);
	sim_rng_seed(&offs, sc->seed, 16 + pl);
	for (size_t i = 0; !max_streams || i < max_streams; i++) {
		struct sim_stream st;
		struct cw_admit_plan plan;
		struct cw_admit_qos q;
		struct cw_admit_layout lay;
		uint64_t phase_draw;

		e = sim_stream_draw(sc, video, i, s->clip, &kinds, &st, &phase_draw);
		if (e < 0)
			return e;
		place(sc, pl, i, s->clip, &offs, cursor, &st);
		for (unsigned d = 0; d < n; d++)
			disks[d] = (struct cw_admit_disk){ .model = &s->adm_model[d],
							   .tasks = s->tasks[d],
							   .n_tasks = s->n_tasks[d],
							   .be_reserve = s->be_reserve };
		q = (struct cw_admit_qos){ .bandwidth_bps = st.bandwidth_bps,
					   .block_bytes = st.block_bytes, .due = sc->due };
		lay = (struct cw_admit_layout){ .pblock_bytes = st.block_bytes, .n_pblocks = s->clip,
						.disk = st.disk, .disk_off = st.off,
						.range_bytes = s->clip * st.block_bytes };
		e = cw_admit_plan(&q, &lay, disks, n, &plan);
		if (e == 0)	/* the daemon's test of the host, when the scenario has one */
			e = cw_admit_plan_host(&plan, &q, &sc->host, s->host_need_ps);
		if (e < 0) {
			fprintf(stderr, "cwsim: stream %zu: %s\n", i, plan.reason);
			sim_stream_free(&st);
			return e;
		}
		if (!plan.admitted) {
			char rate[CW_UNITS_BUF];

			snprintf(s->refusal, sizeof(s->refusal), "stream %zu (%s %s): %s", i,
				 st.video ? "video" : "audio",
				 cw_units_format_rate(st.bandwidth_bps, rate), plan.reason);
			s->next_bps = st.bandwidth_bps;
			s->next_block = st.block_bytes;
			cw_admit_plan_done(&plan);
			sim_stream_free(&st);
			break;
		}
		s->host_need_ps += cw_host_demand_ps(&sc->host, q.bandwidth_bps, q.block_bytes);
		st.period_ns = plan.stream_period_ns;
		st.phase_ns = sc->aligned ? 0 : (int64_t)(phase_draw % (uint64_t)st.period_ns);
		for (size_t k = 0; k < plan.n_parts && e == 0; k++) {
			const struct cw_admit_part *p = &plan.parts[k];

			st.disk_period_ns[p->disk] = p->task.period_ns;
			st.disk_service_ns[p->disk] = p->task.service_ns;
			st.disk_deadline_ns[p->disk] = p->task.deadline_ns;
			e = sim_setup_add_task(s, p->disk, &p->task);
		}
		cw_admit_plan_done(&plan);
		if (e < 0) {
			sim_stream_free(&st);
			return e;
		}
		e = sim_setup_push(s, &st, curve, userdata);
		if (e < 0)
			return e;
	}
	return 0;
}

int sim_be_part_bytes(const struct sim_scenario *sc, uint64_t *ret)
{
	uint64_t be_slots = (sc->model.capacity_bytes - sim_be_start(sc)) / sc->be_pblock_bytes;

	/* every copy of every block in the BE area (a spare holds none) */
	*ret = be_slots * (sc->disks - sim_scenario_spares(sc)) / sc->be_partitions / CW_MAX(sc->copies, 1u) *
	       sc->be_pblock_bytes;
	if (sc->be_part_max_bytes && *ret > sc->be_part_max_bytes)
		*ret = sc->be_part_max_bytes / sc->be_pblock_bytes * sc->be_pblock_bytes;
	if (*ret == 0) {
		fprintf(stderr, "cwsim: the BE area cannot hold %u partitions\n", sc->be_partitions);
		return -EINVAL;
	}
	return 0;
}

int sim_setup_build(const struct sim_scenario *sc, enum sim_placement pl, enum sim_video video,
		    size_t max_streams, sim_curve_fn curve, void *userdata, struct sim_setup *ret)
{
	struct sim_setup s = { .sc = sc, .placement = pl };
	struct cw_disk_plan empty;
	uint64_t clip = sc->clip_blocks, n = sc->disks;
	int e = 0;

	*ret = s;
	/* rotation and random use every disk in turn: whole rounds keep
	 * the stride the same across the clip's wrap */
	if (pl != SIM_SINGLE)
		clip = CW_DIV_ROUND_UP(clip, n) * n;
	s.clip = clip;
	e = sim_be_part_bytes(sc, &s.be_part_bytes);
	if (e < 0)
		return e;
	s.adm_model = calloc(n, sizeof(*s.adm_model));
	s.mech_model = calloc(n, sizeof(*s.mech_model));
	if (!s.adm_model || !s.mech_model) {
		e = -ENOMEM;
		goto fail;
	}
	for (unsigned d = 0; d < n; d++)
		s.adm_model[d] = s.mech_model[d] = sc->model;
	sim_scenario_plan_opts(sc, &s.plan_opts);
	e = cw_admit_disk_plan(&s.plan_opts, &sc->model, sc->model.tier, sc->be_pblock_bytes, NULL,
			       0, &empty);
	if (e < 0) {
		fprintf(stderr, "cwsim: the model cannot serve a best-effort piece: %s\n",
			strerror(-e));
		e = -EINVAL;
		goto fail;
	}
	s.be_reserve = empty.be_reserve;
	s.be_piece_bytes = sc->plan == SIM_PLAN_PAPER ? sc->be_pblock_bytes : empty.be_piece_bytes;
	if (sc->server_period_ns) {
		struct cw_task srv = { .period_ns = sc->server_period_ns,
				       .service_ns = sc->server_slice_ns };

		for (unsigned d = 0; d < n; d++)
			if ((e = sim_setup_add_task(&s, d, &srv)) < 0)
				goto fail;
		s.server_tasks = 1;
	}
	for (unsigned d = 0; d < n; d++) {
		struct cw_admit_result r;

		e = cw_admit_test(s.tasks[d], s.n_tasks[d], &r);
		if (e < 0)
			goto fail;
		if (!r.schedulable) {
			fprintf(stderr, "cwsim: disk %u: the BE server alone is refused: %s\n", d,
				r.reason);
			e = -EINVAL;
			goto fail;
		}
	}
	snprintf(s.refusal, sizeof(s.refusal), "no more streams asked for");
	e = sc->pool_path[0] ? sim_pool_setup(&s, video, max_streams, curve, userdata) :
			       own_setup(&s, video, max_streams, curve, userdata);
	if (e < 0)
		goto fail;
	*ret = s;
	return 0;
fail:
	sim_setup_done(&s);
	return e;
}
