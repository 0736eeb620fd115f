/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A move in the simulation (move =, evacuate =): the library's journalled
 * move and its mover (clockwise/mover.h) carried out in virtual time, as
 * clockwised's mover (daemon/path/pool-mover.c) carries them out with real I/O.
 * The move is journalled by cw_move_start() at its time; the mover asks
 * cw_mover_next_batch() for up to mover_depth blocks, reads them all at
 * once, writes each as soon as it is read, and tells
 * cw_mover_copied_batch(), which switches the clean blocks; on a disk
 * without streams cw_mover_pace_after() keeps it to mover_share.  The
 * engine queues each read and write as a best-effort request of the
 * mover's own client, charged as clockwised's lanes charge one (the
 * model's bound in the slack, its mean in the best-effort order).
 *
 * A failure (fail =) runs the same way: at its time the failed disk's
 * copies are marked out of sync (cw_pool_disk_set_stale) and the spare
 * that takes it over is chosen as clockwised's degrade.c chooses it,
 * by cw_admit_state_takeover over the run pool's admission state, where
 * the playing streams are booked as the set-up admitted them
 * (sim_pool_run_state): the spares with room, most room first, each
 * checked against the streams booked on the failed disk, the first that
 * carries them taken.  Its replacement journals a rebuild onto the spare
 * that this mover carries out.  When none carries them, nothing is
 * rebuilt: the reason is kept (cw_disk_set_unreplaced) and reported, and
 * the partitions stay degraded to the end, as in clockwised.  From the
 * failure on, where a block's copies are and whether each is in sync is
 * the run pool's answer (sim_move_copies), for the streams' partitions
 * as for best effort's.  What the engine does not take from the
 * takeover: the streams' new bookings on the spare (the set-up's tasks
 * stay each disk's, so a stream goes on reading a block rebuilt there
 * from the survivor, cwsim(1) "fail").
 *
 * The run works on its own copy of the pool (sim_pool_run_copy), so the
 * scenario's pool stays as it was and every run starts from the same map.
 * Invariant: blocks[] is where each best-effort block is in that copy's
 * map: a block's entry changes only when cw_mover_copied_batch()
 * switched it.  What the simulation leaves out: the syncs of the
 * destinations take no disk time, and no request holds the I/O gate (in
 * virtual time nothing is in flight while the mover drains it).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/admit-state.h>
#include <clockwise/layout.h>
#include <clockwise/mover.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "sim.h"

struct sim_move {
	const struct sim_setup *s;
	struct cw_pool *pool;
	struct cw_admit_state *st;	/* the copy's, the streams booked (a failure only) */
	struct cw_admit_takeover to;	/* what the failure's takeover said */
	struct cw_part **parts;		/* be<p> of the copy */
	struct cw_part **sparts;	/* s<i> of the copy (a failure only) */
	size_t n_sparts;
	bool fail;			/* the move is a failure's rebuild */
	uint64_t ppp;			/* blocks per best-effort partition */
	struct sim_pblock *blocks;	/* where each is now */
	bool streams[SIM_MAX_DISKS];	/* the disk has streams */
	struct cw_mover_pace pace[SIM_MAX_DISKS];
	/* the batch out: its tasks, the outcome of each, what is left */
	struct cw_mover_task t[CW_MOVER_DEPTH_MAX];
	struct cw_mover_outcome out[CW_MOVER_DEPTH_MAX];
	unsigned n, left;
	bool batch, held, begun, done;
	int64_t held_until_ns;		/* a held batch's reads start then */
	int64_t start_ns, end_ns;
};

static int disk_index(const struct sim_setup *s, uint32_t id)
{
	for (unsigned d = 0; d < s->sc->disks; d++)
		if (s->disk_ids[d] == id)
			return (int)d;
	return -ENODEV;
}

void sim_move_free(struct sim_move *m)
{
	if (!m)
		return;
	cw_admit_state_free(m->st);
	free(m->to.move_ids);
	cw_pool_close(m->pool);
	free(m->parts);
	free(m->sparts);
	free(m->blocks);
	free(m);
}

int sim_move_open(const struct sim_setup *s, size_t n_streams, struct sim_move **ret)
{
	const struct sim_scenario *sc = s->sc;
	struct sim_move *m = calloc(1, sizeof(*m));
	int e;

	if (!m)
		return -ENOMEM;
	m->s = s;
	m->ppp = s->be_part_bytes / sc->be_pblock_bytes;
	m->parts = calloc(sc->be_partitions, sizeof(*m->parts));
	m->blocks = malloc(CW_MAX(m->ppp * sc->be_partitions, 1) * sizeof(*m->blocks));
	if (!m->parts || !m->blocks || !s->be_blocks) {
		sim_move_free(m);
		return s->be_blocks ? -ENOMEM : -EINVAL;
	}
	memcpy(m->blocks, s->be_blocks, m->ppp * sc->be_partitions * sizeof(*m->blocks));
	for (size_t i = 0; i < n_streams && i < s->n_streams; i++)
		for (unsigned d = 0; d < sc->disks; d++)
			m->streams[d] |= s->streams[i].disk_period_ns[d] != 0;
	e = sim_pool_run_copy(sc, &m->pool);
	for (unsigned p = 0; p < sc->be_partitions && e == 0; p++) {
		char name[32];

		snprintf(name, sizeof(name), "be%u", p);
		e = cw_part_lookup(m->pool, name, &m->parts[p]);
	}
	if (e == 0 && sc->fail_disk >= 0) {
		m->n_sparts = CW_MIN(n_streams, s->n_streams);
		m->sparts = calloc(CW_MAX(m->n_sparts, 1), sizeof(*m->sparts));
		e = m->sparts ? sim_pool_run_state(s, m->pool, m->n_sparts, &m->st) : -ENOMEM;
	}
	for (size_t i = 0; i < m->n_sparts && e == 0; i++) {
		char name[32];

		snprintf(name, sizeof(name), "s%zu", i);
		e = cw_part_lookup(m->pool, name, &m->sparts[i]);
	}
	if (e < 0) {
		sim_move_free(m);
		return e;
	}
	*ret = m;
	return 0;
}

const struct sim_pblock *sim_move_blocks(const struct sim_move *m)
{
	return m->blocks;
}

int sim_move_begin(struct sim_move *m, int64_t now)
{
	const struct sim_scenario *sc = m->s->sc;
	uint32_t ids[SIM_MAX_DISKS];
	struct cw_move_opts o = { .placement = CW_PLACE_ROTATION, .tier = CW_TIER_PREF_NONE,
				  .zone = CW_ZONE_INNER, .disk_ids = ids };

	for (unsigned d = 0; d < sc->disks; d++)
		if (sc->move_off >= 0 ? (int)d != sc->move_off : (sc->move_disks >> d) & 1)
			ids[o.ndisks++] = m->s->disk_ids[d];
	for (unsigned p = 0; p < sc->be_partitions; p++) {
		uint64_t id;
		int e;

		if (sc->move_part >= 0 && (unsigned)sc->move_part != p)
			continue;
		e = cw_move_start(m->parts[p], 0, m->ppp, &o, CW_MOVE_PART, &id);
		if (e < 0) {
			fprintf(stderr, "cwsim: move of be%u: %s\n", p,
				cw_pool_last_error(m->pool)->msg);
			return -EINVAL;
		}
	}
	m->begun = true;
	m->start_ns = now;
	return 0;
}

int64_t sim_move_end_ns(const struct sim_move *m)
{
	return m->done ? m->end_ns : -1;
}

bool sim_move_running(const struct sim_move *m)
{
	return m && m->begun && !m->done;
}

/* The batch's reads. */
static unsigned batch_reads(struct sim_move *m, struct sim_move_io *ret)
{
	unsigned k = 0;

	m->held = false;
	for (unsigned i = 0; i < m->n; i++) {
		int d = disk_index(m->s, m->t[i].src_disk_id);

		if (d < 0) {
			m->out[i].read_err = d;
			m->left--;
			continue;
		}
		ret[k++] = (struct sim_move_io){ .disk = (unsigned)d, .off = m->t[i].src_offset,
						 .bytes = m->t[i].length, .task = i };
	}
	return k;
}

int sim_move_next(struct sim_move *m, int64_t now, struct sim_move_io *ret, unsigned *ret_n,
		  int64_t *ret_wake_ns)
{
	const struct sim_scenario *sc = m->s->sc;
	int64_t until = 0;

	*ret_n = 0;
	*ret_wake_ns = 0;
	if (!sim_move_running(m))
		return 0;
	if (m->held) {
		if (now < m->held_until_ns)
			*ret_wake_ns = m->held_until_ns;
		else
			*ret_n = batch_reads(m, ret);
		return 0;
	}
	if (m->batch)
		return 0;
	/* Nothing holds the gate in virtual time: a drain is over at once,
	 * so WAIT only passes the phases. */
	for (unsigned spins = 0;; spins++) {
		int e = cw_mover_next_batch(m->pool, m->t, sc->mover_depth, &m->n);

		if (e < 0)
			return e;
		if (m->t[0].action == CW_MOVER_IDLE) {
			m->done = true;
			m->end_ns = now;
			return 0;
		}
		if (m->t[0].action == CW_MOVER_COPY)
			break;
		if (spins > 4 * CW_MOVER_DEPTH_MAX)
			return -EDEADLK;
	}
	m->batch = true;
	m->left = m->n;
	memset(m->out, 0, sizeof(m->out));
	for (unsigned i = 0; i < m->n; i++) {
		int a = disk_index(m->s, m->t[i].src_disk_id), b = disk_index(m->s, m->t[i].dst_disk_id);

		if (a >= 0)
			until = CW_MAX(until, m->pace[a].next_ns);
		if (b >= 0)
			until = CW_MAX(until, m->pace[b].next_ns);
	}
	if (until > now) {
		/* its pace on a disk without streams: the reads wait */
		m->held = true;
		m->held_until_ns = until;
		*ret_wake_ns = until;
		return 0;
	}
	*ret_n = batch_reads(m, ret);
	return 0;
}

/* The batch is over: the library switches its clean blocks; their new
 * places go to blocks[]; each disk it touched sets the pace there. */
static int batch_over(struct sim_move *m, int64_t now, const uint64_t *others_ns)
{
	const struct sim_setup *s = m->s;
	bool seen[SIM_MAX_DISKS] = { false };
	int e = cw_mover_copied_batch(m->pool, m->out, m->n);

	if (e < 0)
		return e;
	for (unsigned i = 0; i < m->n; i++) {
		const struct cw_mover_task *t = &m->t[i];
		unsigned p;
		struct cw_extent x;
		int d;

		for (p = 0; p < s->sc->be_partitions && m->parts[p] != t->part; p++)
			;
		if (p == s->sc->be_partitions && !m->fail)
			return -ENOENT;
		if (p < s->sc->be_partitions) {
			e = cw_part_map(t->part, t->block * s->sc->be_pblock_bytes, 1, &x);
			d = e < 0 ? e : disk_index(s, x.disk_id);
			if (d < 0)
				return d;
			m->blocks[p * m->ppp + t->block] =
				(struct sim_pblock){ .disk = (uint32_t)d, .off = x.phys_offset };
		}
		for (int k = 0; k < 2; k++) {
			uint32_t id = k ? t->dst_disk_id : t->src_disk_id;

			d = disk_index(s, id);
			if (d < 0 || seen[d])
				continue;
			seen[d] = true;
			cw_mover_pace_after(&m->pace[d], s->sc->mover_share, m->streams[d],
					    cw_mover_batch_cost_ns(m->t, m->n, id, &s->adm_model[d]),
					    others_ns[d], now);
		}
	}
	m->batch = false;
	return 0;
}

int sim_move_io_done(struct sim_move *m, const struct sim_move_io *io, int err, int64_t now,
		     const uint64_t *others_ns, struct sim_move_io *ret, unsigned *ret_n)
{
	const struct cw_mover_task *t = &m->t[io->task];
	int d;

	*ret_n = 0;
	if (!m->batch || io->task >= m->n)
		return -EINVAL;
	if (io->write || err) {
		if (io->write)
			m->out[io->task].write_err = err;
		else
			m->out[io->task].read_err = err;
		if (--m->left == 0)
			return batch_over(m, now, others_ns);
		return 0;
	}
	d = disk_index(m->s, t->dst_disk_id);
	if (d < 0) {
		m->out[io->task].write_err = d;
		return --m->left == 0 ? batch_over(m, now, others_ns) : 0;
	}
	*ret = (struct sim_move_io){ .disk = (unsigned)d, .off = t->dst_offset, .bytes = t->length,
				     .task = io->task, .write = true };
	*ret_n = 1;
	return 0;
}

int sim_move_mirrors(struct sim_move *m, uint32_t part, uint64_t off, uint64_t bytes,
		     uint64_t *ret_skips, struct cw_extent *ret, unsigned max)
{
	struct cw_extent x;
	int n, e;

	if (!sim_move_running(m) || part >= m->s->sc->be_partitions)
		return 0;
	e = cw_part_map(m->parts[part], off, bytes, &x);
	if (e < 0)
		return e;
	x.length = CW_MIN(x.length, bytes);
	n = cw_part_write_mirrors(m->parts[part], off, &x, ret_skips, ret,
				  CW_MIN(max, (unsigned)CW_MOVER_DEPTH_MAX));
	for (int k = 0; k < n; k++) {
		int d = disk_index(m->s, ret[k].disk_id);

		if (d < 0)
			return d;
		ret[k].disk_id = (uint32_t)d + 1;
	}
	return n;
}

int sim_move_fail(struct sim_move *m, unsigned disk, int64_t now, int *ret_spare)
{
	uint32_t id = m->s->disk_ids[disk];
	int e = m->st ? cw_pool_disk_set_stale(m->pool, id, NULL) : -EINVAL;

	if (e == 0)
		e = cw_admit_state_takeover(m->st, id, &m->to, NULL);
	if (e < 0) {
		fprintf(stderr, "cwsim: disk %u failed: %s\n", disk,
			cw_pool_last_error(m->pool)->msg[0] ? cw_pool_last_error(m->pool)->msg :
			strerror(-e));
		return e;
	}
	/* none carries the streams: the disk keeps its copies, out of sync */
	if (!m->to.spare && m->to.why[0])
		(void)cw_disk_set_unreplaced(m->pool, id, m->to.why);
	*ret_spare = m->to.spare ? disk_index(m->s, m->to.spare) : -1;
	m->fail = true;
	m->begun = m->to.n_moves > 0;
	m->start_ns = now;
	return 0;
}

const char *sim_move_takeover_why(const struct sim_move *m, unsigned *ret_refused)
{
	*ret_refused = m ? m->to.refused : 0;
	return m ? m->to.why : "";
}

/* The partition of best effort's part, or of stream stream (>= 0). */
static struct cw_part *part_of(const struct sim_move *m, uint32_t part, int stream)
{
	if (stream >= 0)
		return (size_t)stream < m->n_sparts ? m->sparts[stream] : NULL;
	return part < m->s->sc->be_partitions ? m->parts[part] : NULL;
}

int sim_move_copies(struct sim_move *m, uint32_t part, int stream, uint64_t off,
		    struct cw_copy *ret)
{
	struct cw_part *p = part_of(m, part, stream);
	int e = p ? cw_part_map_copies(p, off, ret) : -ENOENT;

	for (unsigned c = 0; e == 0 && c < cw_part_copies(p); c++) {
		int d = disk_index(m->s, ret[c].disk_id);

		if (d < 0)
			return d;
		ret[c].disk_id = (uint32_t)d + 1;
	}
	return e;
}

int sim_move_map(struct sim_move *m, uint32_t part, uint64_t off, uint64_t len,
		 struct cw_extent *ret)
{
	struct cw_part *p = part_of(m, part, -1);
	int e = p ? cw_part_map(p, off, len, ret) : -ENOENT;
	int d = e < 0 ? e : disk_index(m->s, ret->disk_id);

	if (d < 0)
		return d;
	ret->disk_id = (uint32_t)d + 1;
	ret->length = CW_MIN(ret->length, len);
	return 0;
}

uint64_t sim_move_stale(struct sim_move *m)
{
	uint64_t n = 0;

	for (unsigned k = 0; k < m->s->sc->be_partitions + m->n_sparts; k++) {
		struct cw_part *p = k < m->s->sc->be_partitions ? m->parts[k] :
				    m->sparts[k - m->s->sc->be_partitions];

		for (uint32_t c = 0; c < cw_part_copies(p); c++)
			n += cw_part_copy_stale_count(p, c);
	}
	return n;
}

int sim_move_result(struct sim_move *m, struct sim_result *res)
{
	_cleanup_free_ struct cw_move_info *v = NULL;
	size_t n = 0;
	int e;

	if (!m || !m->begun)
		return 0;
	e = cw_move_list(m->pool, &v, &n);
	if (e < 0)
		return e;
	for (size_t i = 0; i < n; i++) {
		/* a spare's replacement refused by the streams was cancelled */
		if (v[i].state == CW_MOVE_CANCELLED)
			continue;
		res->move_blocks += v[i].blocks;
		res->move_done += v[i].done;
		res->move_failed += v[i].failed;
		res->move_copies += v[i].bytes_copied / m->s->sc->be_pblock_bytes;
	}
	if (m->fail) {
		res->rebuild_blocks = res->move_blocks;
		res->rebuild_done = res->move_done;
		res->rebuild_start_s = (double)m->start_ns / 1e9;
		res->rebuild_end_s = res->degraded_end_s = m->done ? (double)m->end_ns / 1e9 : -1;
		res->move_blocks = res->move_done = res->move_failed = res->move_copies = 0;
		return 0;
	}
	res->move_start_s = (double)m->s->sc->move_at_ns / 1e9;
	res->move_end_s = m->done ? (double)m->end_ns / 1e9 : -1;
	return 0;
}
