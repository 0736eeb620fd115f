/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A scenario on a pool (pool = FILE): cwsim lays its streams and its
 * best-effort partitions out in the pool with cw_part_create, as
 * clockwised's part.create does, and admits the streams with the pool's
 * admission state (cw_admit_state_reserve), as clockwised's resv.create
 * does — the same placement of whole pool blocks (a stream of blocks
 * smaller than a pool block reads several in a row from one disk), the
 * same best-effort reserve, the same models (a disk that emulates one is
 * booked as it).  The simulation then runs what the daemon would run:
 * DESIGN rule 1, one core.  The live experiment (tests/bench/live-vs-sim)
 * starts clockwised on the pool cwsim set up.
 *
 * Invariant: the set-up's tasks are the reservations' parts as the state
 * admitted them, in admission order, and each request lies where the
 * partition's map puts it; the pool's stored objects are only added to
 * (partitions s<i> and be<p> that are missing), never changed, but for
 * the scenario's spares (spare =), made ones while they hold nothing.
 * A failure's run books the same streams again, in the same order, on
 * its own copy of the pool (sim_pool_run_state), so that the takeover
 * is checked against them as clockwised checks it.
 * With copies each stream's clip entries have every copy's place
 * (sim_stream.xdisk), for the engine's choice of copy.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <clockwise/admit-state.h>
#include <clockwise/layout.h>
#include <clockwise/units.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "sim.h"

void sim_pool_closep(struct cw_pool **p)
{
	cw_pool_close(*p);
}

void sim_state_freep(struct cw_admit_state **st)
{
	cw_admit_state_free(*st);
}

static int pool_open(const char *path, struct cw_pool **ret)
{
	struct cw_error err = { 0 };
	int e = cw_pool_open(path, &err, ret);

	if (e == -EBUSY)
		fprintf(stderr, "cwsim: pool %s is open in another process, most likely a running "
			"clockwised: stop it first\n", path);
	else if (e < 0)
		fprintf(stderr, "cwsim: pool %s: %s\n", path, err.msg[0] ? err.msg : strerror(-e));
	return e;
}

int sim_pool_probe(const char *path, unsigned *ret_disks, uint64_t *ret_block)
{
	_cleanup_(sim_pool_closep) struct cw_pool *pool = NULL;
	_cleanup_free_ struct cw_disk_info *d = NULL;
	size_t n = 0;
	int e = pool_open(path, &pool);

	if (e < 0)
		return e;
	e = cw_disk_list(pool, &d, &n);
	if (e < 0) {
		fprintf(stderr, "cwsim: pool %s: %s\n", path, cw_pool_last_error(pool)->msg);
		return e;
	}
	if (n == 0 || n > SIM_MAX_DISKS) {
		fprintf(stderr, "cwsim: pool %s has %zu disks; cwsim simulates 1 to %d\n", path, n,
			SIM_MAX_DISKS);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++)
		if (d[i].state != CW_DISK_PRESENT) {
			fprintf(stderr, "cwsim: pool %s: disk %s is missing\n", path, d[i].name);
			return -ENODEV;
		}
	*ret_disks = (unsigned)n;
	*ret_block = cw_pool_block_size(pool);
	return 0;
}

/* The scenario's placement as the pool's, in zone. */
static struct cw_part_opts part_opts(const struct sim_setup *s, enum cw_zone_pref zone,
				     size_t stream)
{
	static const enum cw_placement as[SIM_N_PLACEMENTS] = {
		[SIM_ROTATION] = CW_PLACE_ROTATION,
		[SIM_RANDOM] = CW_PLACE_RANDOM,
		[SIM_SINGLE] = CW_PLACE_SINGLE,
	};
	struct cw_part_opts o = { .placement = as[s->placement], .zone = zone,
				  .copies = s->sc->copies };

	if (s->placement == SIM_SINGLE)
		o.disk_id = s->disk_ids[stream % s->sc->disks];
	return o;
}

/* Partition name of size bytes: the one in the pool, or a new one. */
static int part_get(struct cw_pool *pool, const char *name, uint64_t size,
		    const struct cw_part_opts *o, struct cw_part **ret)
{
	int e = cw_part_lookup(pool, name, ret);

	if (e == -ENOENT) {
		e = cw_part_create(pool, name, size, o, ret);
		if (e < 0 && e != -ENOSPC)
			fprintf(stderr, "cwsim: partition %s: %s\n", name,
				cw_pool_last_error(pool)->msg);
		return e;
	}
	if (e < 0) {
		fprintf(stderr, "cwsim: partition %s: %s\n", name, cw_pool_last_error(pool)->msg);
		return e;
	}
	if (cw_part_size_bytes(*ret) != CW_DIV_ROUND_UP(size, cw_part_block_size(*ret)) *
					 cw_part_block_size(*ret)) {
		fprintf(stderr, "cwsim: partition %s holds %" PRIu64 " bytes, the scenario needs %"
			PRIu64 ": a pool set up for another scenario\n", name,
			cw_part_size_bytes(*ret), size);
		return -EINVAL;
	}
	return 0;
}

/* Disk index and offset of the bytes at off of part (they lie in one
 * pool block). */
static int map(const struct sim_setup *s, struct cw_part *part, uint64_t off,
	       uint32_t *ret_disk, uint64_t *ret_off)
{
	struct cw_extent x;
	int e = cw_part_map(part, off, 1, &x);

	if (e < 0)
		return e;
	for (unsigned d = 0; d < s->sc->disks; d++)
		if (s->disk_ids[d] == x.disk_id) {
			*ret_disk = d;
			*ret_off = x.phys_offset;
			return 0;
		}
	return -ENODEV;
}

/* Copies 1.. of block b of part, as disk indexes and offsets. */
static int map_copies(const struct sim_setup *s, struct cw_part *part, uint64_t b,
		      struct sim_pblock *ret)
{
	struct cw_copy cs[CW_COPIES_MAX];
	int e = cw_part_block_copies(part, b, cs);

	for (unsigned c = 1; e == 0 && c < s->sc->copies; c++) {
		e = -ENODEV;
		for (unsigned d = 0; d < s->sc->disks; d++)
			if (s->disk_ids[d] == cs[c].disk_id) {
				ret[c - 1] = (struct sim_pblock){ .disk = d, .off = cs[c].phys_offset };
				e = 0;
			}
	}
	return e;
}

/* The scenario's spares made ones in the pool, before anything is placed
 * (a pool cwsim set up before holds nothing there either). */
static int spares_set(const struct sim_setup *s, struct cw_pool *pool)
{
	for (unsigned d = 0; d < s->sc->disks; d++) {
		struct cw_disk_info di;
		int e;

		if (!(s->sc->spares >> d & 1))
			continue;
		e = cw_disk_info(pool, s->disk_ids[d], &di);
		if (e == 0 && !di.spare)
			e = cw_disk_set_spare(pool, s->disk_ids[d], true);
		if (e < 0) {
			fprintf(stderr, "cwsim: spare = %u: %s\n", d,
				cw_pool_last_error(pool)->msg[0] ? cw_pool_last_error(pool)->msg :
				strerror(-e));
			return e;
		}
	}
	return 0;
}

/* Where copies 1.. of the stream's clip entries lie (sim_stream.xdisk). */
static int stream_copies(const struct sim_setup *s, struct cw_part *part, struct sim_stream *sm)
{
	unsigned k = s->sc->copies;
	struct sim_pblock x[CW_COPIES_MAX];
	uint64_t pb = s->sc->be_pblock_bytes;
	int e = 0;

	sm->xdisk = calloc(s->clip * (k - 1), sizeof(*sm->xdisk));
	sm->xoff = calloc(s->clip * (k - 1), sizeof(*sm->xoff));
	if (!sm->xdisk || !sm->xoff)
		return -ENOMEM;
	for (uint64_t b = 0; b < s->clip && e == 0; b++) {
		uint64_t at = b * sm->block_bytes;

		e = map_copies(s, part, at / pb, x);
		for (unsigned c = 1; c < k && e == 0; c++) {
			sm->xdisk[(c - 1) * s->clip + b] = x[c - 1].disk;
			sm->xoff[(c - 1) * s->clip + b] = x[c - 1].off + at % pb;
		}
	}
	return e;
}

static int be_parts(struct sim_setup *s, struct cw_pool *pool)
{
	const struct sim_scenario *sc = s->sc;
	uint64_t ppp = s->be_part_bytes / sc->be_pblock_bytes;
	struct cw_part_opts o = part_opts(s, CW_ZONE_INNER, 0);

	s->be_blocks = calloc(ppp * sc->be_partitions, sizeof(*s->be_blocks));
	if (!s->be_blocks)
		return -ENOMEM;
	if (sc->copies > 1) {
		s->be_xblocks = calloc(ppp * sc->be_partitions * (sc->copies - 1),
				       sizeof(*s->be_xblocks));
		if (!s->be_xblocks)
			return -ENOMEM;
	}
	if (s->placement == SIM_SINGLE) {
		o.placement = CW_PLACE_ROTATION;	/* best effort over every disk */
		o.disk_id = 0;
	}
	for (unsigned p = 0; p < sc->be_partitions; p++) {
		struct sim_pblock *b = &s->be_blocks[p * ppp];
		struct cw_part *part;
		char name[32];
		int e;

		snprintf(name, sizeof(name), "be%u", p);
		e = part_get(pool, name, s->be_part_bytes, &o, &part);
		if (e == -ENOSPC)
			fprintf(stderr, "cwsim: the pool has no room for best-effort partition %s\n",
				name);
		for (uint64_t k = 0; k < ppp && e == 0; k++)
			e = map(s, part, k * sc->be_pblock_bytes, &b[k].disk, &b[k].off);
		for (uint64_t k = 0; k < ppp && e == 0 && sc->copies > 1; k++)
			e = map_copies(s, part, k, &s->be_xblocks[(p * ppp + k) * (sc->copies - 1)]);
		if (e < 0)
			return e;
	}
	return 0;
}

/* The pool's disks: ids, admission's models, the mechanics. */
static int disks_load(struct sim_setup *s, struct cw_pool *pool, struct cw_admit_state *st)
{
	_cleanup_free_ struct cw_disk_info *d = NULL;
	size_t n = 0;
	int e = cw_disk_list(pool, &d, &n);

	if (e < 0)
		return e;
	if (n != s->sc->disks) {
		fprintf(stderr, "cwsim: the pool has %zu disks now, not %u\n", n, s->sc->disks);
		return -EINVAL;
	}
	for (size_t i = 0; i < n && e == 0; i++) {
		s->disk_ids[i] = d[i].id;
		e = cw_admit_state_get_model(st, d[i].id, &s->adm_model[i], NULL);
		if (e == 0 && cw_disk_emulate_get(pool, d[i].id, &s->mech_model[i]) == 0)
			continue;
		s->mech_model[i] = s->sc->model;
	}
	return e;
}

/* The admission state of pool (at path) with the scenario's plan and
 * host, as clockwised builds its own. */
static int state_new(const struct sim_setup *s, struct cw_pool *pool, const char *path,
		     struct cw_admit_state **ret)
{
	struct cw_admit_state_opts ao;
	int e;

	cw_admit_state_opts_init(&ao);
	ao.plan = s->plan_opts;
	e = cw_admit_state_new(pool, &ao, ret);
	if (e < 0) {
		fprintf(stderr, "cwsim: pool %s: cannot load its admission state: %s\n", path,
			strerror(-e));
		return e;
	}
	e = cw_admit_state_set_host(*ret, &s->sc->host);
	if (e < 0) {
		cw_admit_state_free(*ret);
		*ret = NULL;
	}
	return e;
}

/* Stream sm's reservation on its partition name (s<i>), not stored: what
 * clockwised's -r makes of a start-up stream. */
static struct cw_admit_request stream_request(const struct sim_setup *s, const char *name,
					      const struct sim_stream *sm)
{
	return (struct cw_admit_request){ .part = name, .rate_bps = sm->bandwidth_bps,
					  .block_bytes = sm->block_bytes, .export_name = name,
					  .survive = s->sc->survive };
}

int sim_pool_setup(struct sim_setup *s, enum sim_video video, size_t max_streams,
		   sim_curve_fn curve, void *userdata)
{
	const struct sim_scenario *sc = s->sc;
	_cleanup_(sim_pool_closep) struct cw_pool *pool = NULL;
	_cleanup_(sim_state_freep) struct cw_admit_state *st = NULL;
	struct cw_disk_plan plan;
	struct sim_rng kinds;
	int e = pool_open(sc->pool_path, &pool);

	if (e == 0)
		e = state_new(s, pool, sc->pool_path, &st);
	if (e < 0)
		return e;
	if (cw_admit_state_resv_at(st, 0)) {
		fprintf(stderr, "cwsim: pool %s holds reservations; cwsim admits its own streams: "
			"release them first (cwctl resv release)\n", sc->pool_path);
		return -EBUSY;
	}
	e = disks_load(s, pool, st);
	/* the pieces and the reserve are the state's, as in clockwised */
	if (e == 0)
		e = cw_admit_state_plan(st, s->disk_ids[0], &plan);
	if (e < 0)
		return e;
	s->be_reserve = plan.be_reserve;
	s->be_piece_bytes = plan.be_piece_bytes;
	if (sc->spares)
		e = spares_set(s, pool);
	if (e == 0)
		e = be_parts(s, pool);
	if (e < 0)
		return e;
	sim_rng_seed(&kinds, sc->seed, 1);
	for (size_t i = 0; !max_streams || i < max_streams; i++) {
		struct cw_part_opts o = part_opts(s, CW_ZONE_OUTER, i);
		struct cw_admit_refusal ref;
		const struct cw_admit_resv *rv;
		struct cw_admit_request rq;
		struct sim_stream sm;
		struct cw_part *part;
		uint64_t phase_draw;
		char name[32];

		e = sim_stream_draw(sc, video, i, s->clip, &kinds, &sm, &phase_draw);
		if (e < 0)
			return e;
		if (sc->be_pblock_bytes % sm.block_bytes) {
			fprintf(stderr, "cwsim: stream %zu: a block of %" PRIu64 " bytes is not a part "
				"of the pool's block (%" PRIu64 ")\n", i, sm.block_bytes,
				sc->be_pblock_bytes);
			sim_stream_free(&sm);
			return -EINVAL;
		}
		snprintf(name, sizeof(name), "s%zu", i);
		e = part_get(pool, name, s->clip * sm.block_bytes, &o, &part);
		if (e == -ENOSPC) {
			snprintf(s->refusal, sizeof(s->refusal), "stream %zu: the pool has no room "
				 "for its partition", i);
			sim_stream_free(&sm);
			break;
		}
		rq = stream_request(s, name, &sm);
		if (e == 0)
			e = cw_admit_state_reserve(st, &rq, &rv, &ref, NULL);
		if (e == -EBUSY) {
			char rate[CW_UNITS_BUF];

			snprintf(s->refusal, sizeof(s->refusal), "stream %zu (%s %s): %.*s", i,
				 sm.video ? "video" : "audio",
				 cw_units_format_rate(sm.bandwidth_bps, rate),
				 (int)(sizeof(s->refusal) - 64), ref.reason);
			s->next_bps = sm.bandwidth_bps;
			s->next_block = sm.block_bytes;
			sim_stream_free(&sm);
			break;
		}
		if (e < 0) {
			if (ref.reason[0])
				fprintf(stderr, "cwsim: stream %zu: %s\n", i, ref.reason);
			sim_stream_free(&sm);
			return e;
		}
		sm.period_ns = rv->period_ns;
		sm.survive = rv->survive;
		sm.phase_ns = sc->aligned ? 0 : (int64_t)(phase_draw % (uint64_t)sm.period_ns);
		for (size_t k = 0; k < rv->n_parts && e == 0; k++) {
			uint32_t d;

			for (d = 0; d < sc->disks && s->disk_ids[d] != rv->parts[k].disk_id; d++)
				;
			if (d == sc->disks) {
				e = -ENODEV;
				break;
			}
			sm.disk_period_ns[d] = rv->parts[k].task.period_ns;
			sm.disk_service_ns[d] = rv->parts[k].task.service_ns;
			sm.disk_deadline_ns[d] = rv->parts[k].task.deadline_ns;
			e = sim_setup_add_task(s, d, &rv->parts[k].task);
		}
		for (uint64_t k = 0; k < s->clip && e == 0; k++)
			e = map(s, part, k * sm.block_bytes, &sm.disk[k], &sm.off[k]);
		if (e == 0 && sc->copies > 1)
			e = stream_copies(s, part, &sm);
		if (e == 0)
			e = sim_setup_push(s, &sm, curve, userdata);
		else
			sim_stream_free(&sm);
		if (e < 0)
			return e;
	}
	return 0;
}

int sim_pool_run_state(const struct sim_setup *s, struct cw_pool *pool, size_t n_streams,
		       struct cw_admit_state **ret)
{
	_cleanup_(sim_state_freep) struct cw_admit_state *st = NULL;
	int e = state_new(s, pool, "(the run's copy)", &st);

	for (size_t i = 0; e == 0 && i < n_streams && i < s->n_streams; i++) {
		struct cw_admit_refusal ref = { 0 };
		const struct cw_admit_resv *rv;
		struct cw_admit_request rq;
		char name[32];

		snprintf(name, sizeof(name), "s%zu", i);
		rq = stream_request(s, name, &s->streams[i]);
		e = cw_admit_state_reserve(st, &rq, &rv, &ref, NULL);
		if (e < 0)
			fprintf(stderr, "cwsim: stream %zu, admitted on the pool, is not on the run's "
				"copy of it: %s\n", i, ref.reason[0] ? ref.reason : strerror(-e));
	}
	if (e == 0)
		*ret = CW_TAKE_PTR(st);
	return e;
}

/* ---- the scratch pool of a move ---- */

static char scratch_dir[PATH_MAX / 2];

static void scratch_remove(void)
{
	static const char *const tails[] = { "pool.db", "pool.db-wal", "pool.db-shm", "run.db",
					     "run.db-wal", "run.db-shm" };
	char path[PATH_MAX + 32];

	if (!scratch_dir[0])
		return;
	for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", scratch_dir, tails[i]);
		unlink(path);
	}
	for (unsigned d = 0; d < SIM_MAX_DISKS; d++) {
		snprintf(path, sizeof(path), "%s/d%u.img", scratch_dir, d);
		unlink(path);
	}
	rmdir(scratch_dir);
	scratch_dir[0] = '\0';
}

/* A sparse file of bytes at path. */
static int sparse_file(const char *path, uint64_t bytes)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int e = 0;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)bytes) < 0)
		e = -errno;
	close(fd);
	return e;
}

int sim_pool_scratch(struct sim_scenario *sc)
{
	const char *tmp = getenv("TMPDIR");
	_cleanup_(sim_pool_closep) struct cw_pool *pool = NULL;
	struct cw_error err = { 0 };
	char path[PATH_MAX + 32];
	int e;

	if (scratch_dir[0]) {
		fprintf(stderr, "cwsim: one scratch pool per run\n");
		return -EBUSY;
	}
	snprintf(scratch_dir, sizeof(scratch_dir), "%s/cwsim-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(scratch_dir)) {
		fprintf(stderr, "cwsim: a scratch pool for the move: %s: %m\n", scratch_dir);
		scratch_dir[0] = '\0';
		return -errno;
	}
	atexit(scratch_remove);
	snprintf(path, sizeof(path), "%s/pool.db", scratch_dir);
	e = cw_pool_create(path, (uint32_t)CW_MIN(sc->be_pblock_bytes, UINT32_MAX), &err, &pool);
	if (e < 0) {
		fprintf(stderr, "cwsim: a scratch pool for the move: %s\n",
			err.msg[0] ? err.msg : strerror(-e));
		return e;
	}
	for (unsigned d = 0; d < sc->disks; d++) {
		uint32_t id;

		snprintf(path, sizeof(path), "%s/d%u.img", scratch_dir, d);
		e = sparse_file(path, sc->model.capacity_bytes / 4096 * 4096);
		if (e == 0)
			e = cw_disk_add(pool, path, sc->model.tier, NULL, &id);
		if (e == 0)
			e = cw_disk_emulate_set(pool, id, &sc->model);
		if (e < 0) {
			fprintf(stderr, "cwsim: a scratch pool for the move: disk %u: %s\n", d,
				strerror(-e));
			return e;
		}
	}
	snprintf(sc->pool_path, sizeof(sc->pool_path), "%s/pool.db", scratch_dir);
	return 0;
}

/* Copies the file from to to (which must not exist); a missing from is
 * nothing to copy. */
static int copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC), out, e = 0;
	ssize_t n;

	if (in < 0)
		return errno == ENOENT ? 0 : -errno;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0) {
		e = -errno;
		close(in);
		return e;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n) {
			e = errno ? -errno : -EIO;
			break;
		}
	if (n < 0)
		e = -errno;
	close(in);
	close(out);
	return e;
}

int sim_pool_run_copy(const struct sim_scenario *sc, struct cw_pool **ret)
{
	static const char *const tails[] = { "", "-wal" };
	char from[PATH_MAX + 8], to[PATH_MAX + 32];
	int e = 0;

	if (!scratch_dir[0]) {
		/* the scenario's own pool: the copy goes to a scratch dir */
		snprintf(scratch_dir, sizeof(scratch_dir), "%s/cwsim-XXXXXX",
			 getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
		if (!mkdtemp(scratch_dir)) {
			e = -errno;
			fprintf(stderr, "cwsim: a copy of the pool for the move: %s: %m\n", scratch_dir);
			scratch_dir[0] = '\0';
			return e;
		}
		atexit(scratch_remove);
	}
	for (size_t i = 0; i < 2 && e == 0; i++) {
		snprintf(from, sizeof(from), "%s%s", sc->pool_path, tails[i]);
		snprintf(to, sizeof(to), "%s/run.db%s", scratch_dir, tails[i]);
		unlink(to);
		e = copy_file(from, to);
	}
	snprintf(to, sizeof(to), "%s/run.db-shm", scratch_dir);
	unlink(to);
	if (e < 0) {
		fprintf(stderr, "cwsim: a copy of pool %s for the move: %s\n", sc->pool_path,
			strerror(-e));
		return e;
	}
	snprintf(to, sizeof(to), "%s/run.db", scratch_dir);
	return pool_open(to, ret);
}
