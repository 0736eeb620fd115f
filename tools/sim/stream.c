/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A set-up's streams (sim.h): what each stream is (sim_stream_draw), the
 * tasks admission gave it on each disk, and each disk's plan over them as
 * clockwised would run it (cw_admit_disk_plan).  What both ways of setting
 * up share: cwsim's own layout (setup.c) and a pool's (pool.c).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "sim.h"

uint64_t sim_rt_end(const struct sim_scenario *sc)
{
	return sc->model.capacity_bytes / 100 * sc->rt_area_pct;
}

uint64_t sim_be_start(const struct sim_scenario *sc)
{
	return sc->model.capacity_bytes - sc->model.capacity_bytes / 100 * sc->be_area_pct;
}

void sim_stream_free(struct sim_stream *st)
{
	free(st->disk);
	free(st->off);
	free(st->xdisk);
	free(st->xoff);
	st->disk = NULL;
	st->off = NULL;
	st->xdisk = NULL;
	st->xoff = NULL;
}

void sim_setup_done(struct sim_setup *s)
{
	for (size_t i = 0; i < s->n_streams; i++)
		sim_stream_free(&s->streams[i]);
	free(s->streams);
	for (unsigned d = 0; d < SIM_MAX_DISKS; d++)
		free(s->tasks[d]);
	free(s->adm_model);
	free(s->mech_model);
	free(s->be_blocks);
	free(s->be_xblocks);
	*s = (struct sim_setup){ 0 };
}

double sim_setup_load_mb_s(const struct sim_setup *s, size_t n)
{
	double sum = 0;

	for (size_t i = 0; i < n && i < s->n_streams; i++)
		sum += (double)s->streams[i].bandwidth_bps;
	return sum / (double)SIM_MIB;
}

size_t sim_setup_tasks(const struct sim_setup *s, unsigned d, size_t n_streams,
		       struct cw_task *ret)
{
	size_t n = 0, t;

	/* the server's task, then the streams', appended in stream order */
	for (; n < s->server_tasks; n++)
		ret[n] = s->tasks[d][n];
	t = n;
	for (size_t i = 0; i < n_streams && i < s->n_streams; i++)
		if (s->streams[i].disk_period_ns[d])
			ret[n++] = s->tasks[d][t++];
	return n;
}

int sim_setup_plan(const struct sim_setup *s, unsigned d, size_t n_streams,
		   struct cw_disk_plan *ret)
{
	const struct sim_scenario *sc = s->sc;
	const struct cw_model *m = &s->adm_model[d];
	_cleanup_free_ struct cw_task *set = malloc((s->n_tasks[d] + 1) * sizeof(*set));
	size_t n;
	int e;

	if (!set)
		return -ENOMEM;
	n = sim_setup_tasks(s, d, n_streams, set);
	e = cw_admit_disk_plan(&s->plan_opts, m, m->tier, sc->be_pblock_bytes, set, n, ret);
	if (e < 0)
		return e;
	ret->disk_id = d;
	if (s->server_tasks) {
		ret->n_tasks--;
		ret->server_slice_ns = sc->server_slice_ns;
		ret->server_period_ns = sc->server_period_ns;
		ret->be_starved = CW_MAX(CW_MAX(ret->be_budget_ns, ret->idle_be_ns),
					 ret->server_slice_ns) < ret->be_max_ns;
	}
	return 0;
}

int sim_setup_add_task(struct sim_setup *s, unsigned d, const struct cw_task *t)
{
	struct cw_task *v = realloc(s->tasks[d], (s->n_tasks[d] + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	v[s->n_tasks[d]++] = *t;
	s->tasks[d] = v;
	return 0;
}

int sim_stream_draw(const struct sim_scenario *sc, enum sim_video video, size_t i,
		    uint64_t clip, struct sim_rng *kinds, struct sim_stream *st,
		    uint64_t *ret_phase_draw)
{
	bool is_video = i % 2 == 0;
	/* the draw happens for every pair, whatever the scenario, so that
	 * phases are the same for video=mix, 817 and 245 */
	bool big = sim_rng_below(kinds, 2) == 0;

	*st = (struct sim_stream){ .video = is_video };
	*ret_phase_draw = sim_rng_next(kinds);
	if (video == SIM_VIDEO_817)
		big = true;
	else if (video == SIM_VIDEO_245)
		big = false;
	if (!is_video) {
		st->bandwidth_bps = 172 * SIM_KIB;
		st->block_bytes = 256 * SIM_KIB;
	} else if (big) {
		st->bandwidth_bps = 817 * SIM_KIB;
		st->block_bytes = SIM_MIB;
	} else {
		st->bandwidth_bps = 245 * SIM_KIB;
		st->block_bytes = 256 * SIM_KIB;
	}
	st->block_bytes *= sc->buffer_scale;
	st->disk = calloc(clip, sizeof(*st->disk));
	st->off = calloc(clip, sizeof(*st->off));
	if (!st->disk || !st->off) {
		sim_stream_free(st);
		return -ENOMEM;
	}
	return 0;
}

int sim_setup_push(struct sim_setup *s, struct sim_stream *st, sim_curve_fn curve,
		   void *userdata)
{
	int64_t min = CW_ADMIT_NO_LIMIT;

	if (s->n_streams == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 32;
		struct sim_stream *v = realloc(s->streams, cap * sizeof(*v));

		if (!v) {
			sim_stream_free(st);
			return -ENOMEM;
		}
		s->streams = v;
		s->cap = cap;
	}
	s->streams[s->n_streams++] = *st;
	if (!curve)
		return 0;
	for (unsigned d = 0; d < s->sc->disks; d++) {
		struct cw_disk_plan dp;
		int e = sim_setup_plan(s, d, s->n_streams, &dp);

		if (e < 0)
			return e;
		min = CW_MIN(min, dp.delta_l_ns);
	}
	curve(userdata, s->n_streams, sim_setup_load_mb_s(s, s->n_streams), min);
	return 0;
}
