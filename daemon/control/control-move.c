/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Move commands of the control server: disk.evacuate, disk.replace,
 * part.move, part.rebuild, part.scrub, and
 * move.list / pause / resume / cancel over the pool's journalled moves
 * (clockwise/mover.h).  The daemon's mover carries them out; a change
 * here wakes it through the moves_changed hook.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <clockwise/mover.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "control-internal.h"

#define FAILED_LISTED 64	/* unreadable blocks listed per move */

static void moves_changed(struct ctx *c)
{
	if (c->srv->o.hooks.moves_changed)
		c->srv->o.hooks.moves_changed(c->srv->o.hooks.userdata);
}

static int64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * CW_NS_PER_S + ts.tv_nsec;
}

/* A move as JSON, with its progress: blocks left, the mean rate since
 * it started and, while it runs, the time left at that rate. */
static json_object *move_json(struct ctx *c, const struct cw_move_info *m)
{
	json_object *o = json_object_new_object(), *bad;
	uint64_t bs = cw_pool_block_size(c->srv->pool), left, *blocks = NULL;
	int64_t end = m->finished_ns ? m->finished_ns : realtime_ns();
	double secs = (double)(end - m->created_ns) / 1e9, rate;
	bool scrub = m->kind == CW_MOVE_SCRUB || m->kind == CW_MOVE_REPAIR;
	size_t nb = 0;

	left = m->blocks - CW_MIN(m->blocks, m->done + m->failed + m->skipped);
	rate = secs > 0 ? (double)m->bytes_copied / secs : 0;
	cwc_add(o, "id", cw_ctl_json_u64(m->id));
	cwc_add(o, "kind", cwc_jstr(cw_move_kind_name(m->kind)));
	cwc_add(o, "state", cwc_jstr(cw_move_state_name(m->state)));
	cwc_add(o, "part", cwc_jstr(m->part));
	if (m->kind == CW_MOVE_EVACUATE || m->kind == CW_MOVE_REPLACE)
		cwc_add(o, "disk_id", json_object_new_int64(m->disk_id));
	else if (m->kind != CW_MOVE_REBUILD && !scrub) {
		cwc_add(o, "policy", cwc_jstr(cw_placement_name(m->opts.placement)));
		cwc_add(o, "tier", cwc_jstr(cw_tier_pref_name(m->opts.tier)));
		cwc_add(o, "zone", cwc_jstr(cw_zone_pref_name(m->opts.zone)));
	}
	cwc_add(o, "blocks", cw_ctl_json_u64(m->blocks));
	cwc_add(o, "done", cw_ctl_json_u64(m->done));
	cwc_add(o, "failed", cw_ctl_json_u64(m->failed));
	cwc_add(o, "skipped", cw_ctl_json_u64(m->skipped));
	cwc_add(o, "left", cw_ctl_json_u64(left));
	cwc_add(o, "bytes_copied", cw_ctl_json_u64(m->bytes_copied));
	cwc_add(o, "block_size", cw_ctl_json_u64(bs));
	cwc_add(o, "mb_s", json_object_new_double(rate / 1e6));
	cwc_add(o, "elapsed_s", json_object_new_double(secs));
	if (m->state == CW_MOVE_RUNNING && rate > 0)
		cwc_add(o, "eta_s", json_object_new_double((double)(left * bs) / rate));
	cwc_add(o, "created_ns", json_object_new_int64(m->created_ns));
	if (m->finished_ns)
		cwc_add(o, "finished_ns", json_object_new_int64(m->finished_ns));
	if (m->error[0])
		cwc_add(o, "error", cwc_jstr(m->error));
	/* A scrub's failed blocks are those whose copies differ. */
	if (scrub)
		cwc_add(o, "differ", cw_ctl_json_u64(m->failed));
	if (m->failed && cw_move_failed_blocks(c->srv->pool, m->id, &blocks, &nb) == 0) {
		bad = json_object_new_array();
		for (size_t i = 0; i < nb && i < FAILED_LISTED; i++)
			json_object_array_add(bad, cw_ctl_json_u64(blocks[i]));
		cwc_add(o, scrub ? "differing_blocks" : "failed_blocks", bad);
		free(blocks);
	}
	return o;
}

static int reply_move(struct ctx *c, uint64_t id, json_object **ret)
{
	struct cw_move_info m;
	int r = cw_move_get(c->srv->pool, id, &m);

	if (r < 0)
		return cwc_fail_pool(c, r, "move");
	*ret = move_json(c, &m);
	return 0;
}

/*
 * Rule 2 of moving data: the guarantee never depends on where a block
 * happens to be.  A reservation was admitted on the disks its range lay
 * on, with each disk's share of its blocks.  A move that takes blocks of
 * that range elsewhere is journalled paused, then each such stream is
 * booked for it with the admission state (cw_admit_state_move_book):
 * while the move copies, each block of the range is on its source or its
 * destination, so the stream is tested with every such block counted on
 * both disks.
 *   - If every disk of that union admits it, the stream is booked there
 *     (the pool database first) and the move runs while the stream plays:
 *     the data path serves each block as the stream's on the disk it is on
 *     at that instant.  Once the move is done or cancelled, the booking
 *     settles on the disks the range lies on then (cwc_moves_settle, on
 *     each round of the control thread; at start after a crash).
 *   - If the union is refused but the stream would be admitted with its
 *     range where the move puts it (cw_admit_state_move_check), the move
 *     is postponed: it waits, paused with the reason, and the stream stays
 *     booked where its range lies now.  It is tried again after each
 *     release (and on `move resume`): it runs once the union fits, or no
 *     reservation holds it.  Refusing it would lose a move that only has
 *     to wait for the stream; running it would break the stream.
 *   - If even that is refused, the move is cancelled at once and refused
 *     with admission's reason (the disk, whose deadline, by how much).
 * A move that leaves every reserved range where it is runs at once.
 */
#define POSTPONED "postponed: "

/* Whether the unfinished move id (of part) takes any of bytes [start,
 * end) of part to other disks: 1 with the disks the range's blocks
 * (from *ret_first on, *ret_n of them) will be on in *ret_after
 * (malloc'ed), 0 if not, -errno.  (A stream reserved while a move runs
 * is the admission state's to book on both sides of it: it finds the
 * move itself, cw_admit_state_reserve.) */
static int range_taken(struct cwc_server *srv, uint64_t id, struct cw_part *part, uint64_t start,
		       uint64_t end, uint32_t **ret_after, uint64_t *ret_first, uint64_t *ret_n)
{
	uint64_t bs = cw_pool_block_size(srv->pool), first = start / bs, nb;
	_cleanup_free_ uint32_t *after = NULL;
	int r;

	if (end <= start)
		return 0;
	nb = (end - 1) / bs - first + 1;
	after = calloc(nb, sizeof(*after));
	if (!after)
		return -ENOMEM;
	r = cw_move_takes(srv->pool, id, part, first, nb, after);
	if (r <= 0)
		return r;
	*ret_after = CW_TAKE_PTR(after);
	*ret_first = first;
	*ret_n = nb;
	return 1;
}

/* Streams booked for move id go back to where their ranges lie. */
static void rule2_unbook(struct cwc_server *srv, uint64_t id)
{
	const struct cw_admit_resv *rv;

	for (size_t i = 0; (rv = cw_admit_state_resv_at(srv->adm, i)); i++)
		if (rv->move_id == id)
			(void)cw_admit_state_move_settle(srv->adm, rv->stream, NULL);
}

/* Books every stream whose range the unfinished move id takes elsewhere
 * on both sides of it.  0: each is booked (or none is touched): the move
 * may run; 1: postponed, the reason in why; -EBUSY: admission refuses,
 * the reason in why; -errno.  Unless 0, no stream stays booked for it. */
static int rule2_check(struct ctx *c, uint64_t id, char *why, size_t len)
{
	struct cwc_server *srv = c->srv;
	const struct cw_admit_resv *rv;
	struct cw_move_info mi;
	struct cw_part *part;
	int r = cw_move_get(srv->pool, id, &mi), held = 0;

	if (r < 0)
		return r;
	if (!mi.part[0] || cw_part_lookup(srv->pool, mi.part, &part) < 0)
		return 0;
	for (size_t i = 0; (rv = cw_admit_state_resv_at(srv->adm, i)); i++) {
		_cleanup_free_ uint32_t *after = NULL;
		struct cw_admit_refusal ref, alone;
		char who[CW_NAME_MAX + 48];
		uint64_t first, nb;

		if (strcmp(rv->part, mi.part) != 0)
			continue;
		r = range_taken(srv, id, part, rv->range_start_bytes, rv->range_end_bytes, &after,
				&first, &nb);
		if (r < 0)
			goto undo;
		if (r == 0)
			continue;	/* its range stays where it is */
		if (rv->persistent)
			snprintf(who, sizeof(who), "reservation %" PRIu64, rv->id);
		else
			snprintf(who, sizeof(who), "the start-up reservation of export %s",
				 rv->export_name);
		r = cw_admit_state_move_book(srv->adm, rv->stream, id, &ref, NULL);
		if (r == 0)
			continue;	/* it plays on while its blocks move */
		if (r != -EBUSY) {
			snprintf(why, len, "booking %s: %s", who, ref.reason[0] ? ref.reason :
				 strerror(-r));
			goto undo;
		}
		r = cw_admit_state_move_check(srv->adm, rv->stream, first, nb, after, &alone);
		if (r == -EBUSY)
			snprintf(why, len, "%s", alone.reason);
		else if (r < 0)
			snprintf(why, len, "checking %s: %s", who, alone.reason[0] ? alone.reason :
				 strerror(-r));
		if (r < 0)
			goto undo;
		if (!held++)
			/* Short: the journal keeps 256 bytes of it. */
			snprintf(why, len, POSTPONED "%s covers bytes %" PRIu64 "..%" PRIu64 " of %s, "
				 "which the move takes to other disks; booked on both sides it would be "
				 "refused on disk %s, where the move puts them it would not: the move "
				 "waits for a release", who, rv->range_start_bytes, rv->range_end_bytes,
				 rv->part, ref.disk);
	}
	if (!held)
		return 0;
	r = 1;
undo:
	rule2_unbook(srv, id);
	return r;
}

void cwc_moves_settle(struct cwc_server *srv)
{
	/* A database that refuses now is asked again next round. */
	if (srv->adm)
		(void)cw_admit_state_moves_settle(srv->adm, NULL);
}

/* Runs rule 2 for moves ids[0..n) just journalled paused: each runs at
 * once, is postponed, or (when admission refuses one) every one is
 * cancelled and the request fails with the reason. */
static int rule2_moves(struct ctx *c, const uint64_t *ids, size_t n)
{
	char why[CW_ADMIT_REASON_MAX + 512] = "";
	int r = 0;

	for (size_t i = 0; i < n && r >= 0; i++) {
		struct cw_move_info m;

		/* A move with nothing to copy is journalled as done: no
		 * stream's blocks go anywhere, and there is nothing to resume. */
		if (cw_move_get(c->srv->pool, ids[i], &m) == 0 && m.state == CW_MOVE_DONE)
			continue;
		r = rule2_check(c, ids[i], why, sizeof(why));
		if (r == 0)
			r = cw_move_resume(c->srv->pool, ids[i]);
		else if (r == 1)
			r = cw_move_pause(c->srv->pool, ids[i], why);
	}
	if (r >= 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		(void)cw_move_cancel(c->srv->pool, ids[i], NULL);
	cwc_moves_settle(c->srv);	/* the streams the others had booked */
	if (r == -EBUSY)
		return cwc_fail(c, CW_CTL_E_BUSY, "the move is refused: %s", why);
	return cwc_fail(c, cw_ctl_code_from_errno(r), "the move is refused: %s",
			why[0] ? why : strerror(-r));
}

/* Moves postponed by rule 2 are tried again after a release: they run
 * once their streams fit on both sides of them, or none holds them. */
void cwc_moves_retry_postponed(struct cwc_server *srv)
{
	_cleanup_free_ struct cw_move_info *m = NULL;
	struct ctx c = { .srv = srv };
	char why[CW_ADMIT_REASON_MAX + 512];
	size_t n = 0;
	bool any = false;

	if (cw_move_list(srv->pool, &m, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++)
		if (m[i].state == CW_MOVE_PAUSED && !strncmp(m[i].error, POSTPONED, strlen(POSTPONED)) &&
		    rule2_check(&c, m[i].id, why, sizeof(why)) == 0)
			any |= cw_move_resume(srv->pool, m[i].id) == 0;
	if (any && srv->o.hooks.moves_changed)
		srv->o.hooks.moves_changed(srv->o.hooks.userdata);
}

/* The reply of a command that journalled moves ids[0..n) for disk d,
 * which may run: the disk and the moves. */
static void disk_moves_json(struct ctx *c, const struct cw_disk_info *d, const uint64_t *ids,
			    size_t n, json_object **ret)
{
	json_object *moves;

	moves_changed(c);
	*ret = json_object_new_object();
	cwc_add(*ret, "disk", cwc_jstr(d->name));
	cwc_add(*ret, "disk_id", json_object_new_int64(d->id));
	moves = json_object_new_array();
	for (size_t i = 0; i < n; i++) {
		struct cw_move_info m;

		if (cw_move_get(c->srv->pool, ids[i], &m) == 0)
			json_object_array_add(moves, move_json(c, &m));
	}
	cwc_add(*ret, "moves", moves);
}

/* The same once rule 2 let them run (or postponed them). */
static int reply_disk_moves(struct ctx *c, const struct cw_disk_info *d, const uint64_t *ids,
			    size_t n, json_object **ret)
{
	if (rule2_moves(c, ids, n) < 0)
		return -1;
	disk_moves_json(c, d, ids, n, ret);
	return 0;
}

int cwc_cmd_disk_evacuate(struct ctx *c, json_object **ret)
{
	const char *name = cw_ctl_arg_str(c->req, "name");
	_cleanup_free_ uint64_t *ids = NULL;
	struct cw_disk_info d;
	size_t n = 0;
	int r;

	if (cwc_find_disk(c, name, &d) < 0)
		return -1;
	r = cw_disk_evacuate_paused(c->srv->pool, d.id, "checked against the reservations", &ids,
				    &n);
	if (r < 0)
		return cwc_fail_pool(c, r, name);
	return reply_disk_moves(c, &d, ids, n, ret);
}

/* disk.replace: every copy on disk name moved or rebuilt onto disk new
 * (cw_disk_replace), the streams with a copy there checked and booked
 * with new in its place, as a spare's takeover does
 * (cw_admit_state_disk_replace: refused with the reservation and the
 * disk, nothing journalled); once the moves are done the disk holds
 * nothing and disk.remove takes it out (cwctl disk replace --watch
 * does). */
int cwc_cmd_disk_replace(struct ctx *c, json_object **ret)
{
	const char *name = cw_ctl_arg_str(c->req, "name");
	_cleanup_free_ uint64_t *ids = NULL;
	struct cw_admit_refusal ref;
	struct cw_disk_info d, nd;
	size_t n = 0;
	int r;

	if (cwc_find_disk(c, name, &d) < 0 || cwc_find_disk(c, cw_ctl_arg_str(c->req, "new"), &nd) < 0)
		return -1;
	r = cw_admit_state_disk_replace(c->srv->adm, d.id, nd.id, &ids, &n, &ref, NULL);
	if (r < 0 && ref.reason[0])
		return cwc_fail(c, r == -EBUSY ? CW_CTL_E_BUSY : cw_ctl_code_from_errno(r),
				"disk %s does not replace disk %s: %s", nd.name, d.name, ref.reason);
	if (r < 0)
		return cwc_fail_pool(c, r, name);
	disk_moves_json(c, &d, ids, n, ret);
	cwc_add(*ret, "new", cwc_jstr(nd.name));
	return 0;
}

static int scrub_or_rebuild(struct ctx *c, json_object **ret, bool scrub)
{
	const char *name = cw_ctl_arg_str(c->req, "name");
	struct cw_part *part;
	bool repair = false;
	uint64_t id = 0;
	int r;

	if (cwc_find_part(c, name, &part) < 0)
		return -1;
	cw_ctl_arg_bool(c->req, "repair", &repair);
	r = scrub ? cw_part_scrub(part, repair, &id)
		  : cw_part_rebuild(part, &id);
	if (r < 0)
		return cwc_fail_pool(c, r, name);
	if (!id) {
		*ret = json_object_new_object();
		cwc_add(*ret, "part", cwc_jstr(name));
		cwc_add(*ret, "moves", json_object_new_array());
		return 0;
	}
	moves_changed(c);
	return reply_move(c, id, ret);
}

/* part.rebuild: the partition's copies out of sync rewritten in place
 * from copies in sync (cw_part_rebuild). */
int cwc_cmd_part_rebuild(struct ctx *c, json_object **ret)
{
	return scrub_or_rebuild(c, ret, false);
}

/* part.scrub: every copy in sync compared with the block's reference,
 * and with repair rewritten from it when it differs (cw_part_scrub). */
int cwc_cmd_part_scrub(struct ctx *c, json_object **ret)
{
	return scrub_or_rebuild(c, ret, true);
}

/* "A,B": disk names or ids, into ids[] (at most CW_DISKS_MAX). */
static int parse_disks(struct ctx *c, const char *list, uint32_t *ids, size_t *ret_n)
{
	_cleanup_free_ char *copy = strdup(list);
	char *save = NULL;
	size_t n = 0;

	if (!copy)
		return cwc_fail(c, CW_CTL_E_INTERNAL, "out of memory");
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		struct cw_disk_info d;

		if (n == CW_DISKS_MAX)
			return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "disks \"%s\": too many", list);
		if (cwc_find_disk(c, t, &d) < 0)
			return -1;
		ids[n++] = d.id;
	}
	if (n == 0)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "disks \"%s\": no disk named", list);
	*ret_n = n;
	return 0;
}

int cwc_cmd_part_move(struct ctx *c, json_object **ret)
{
	const char *name = cw_ctl_arg_str(c->req, "name"), *s;
	uint32_t ids[CW_DISKS_MAX];
	struct cw_part_info pi;
	struct cw_move_opts o;
	struct cw_part *part;
	uint64_t id;
	int r;

	if (cwc_find_part(c, name, &part) < 0)
		return -1;
	r = cw_part_info(part, &pi);
	if (r < 0)
		return cwc_fail_pool(c, r, name);
	o = (struct cw_move_opts){ .placement = pi.opts.placement, .tier = pi.opts.tier,
				   .zone = pi.opts.zone };
	if (cwc_placement_args(c, &o.placement, &o.tier, &o.zone) < 0)
		return -1;
	if ((s = cw_ctl_arg_str(c->req, "disks"))) {
		if (parse_disks(c, s, ids, &o.ndisks) < 0)
			return -1;
		o.disk_ids = ids;
	}
	if (!pi.nblocks)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "partition %s is empty: nothing to move", name);
	r = cw_move_start_paused(part, 0, pi.nblocks, &o, CW_MOVE_PART,
				 "checked against the reservations", &id);
	if (r < 0)
		return cwc_fail_pool(c, r, name);
	if (rule2_moves(c, &id, 1) < 0)
		return -1;
	moves_changed(c);
	return reply_move(c, id, ret);
}

int cwc_cmd_move_list(struct ctx *c, json_object **ret)
{
	_cleanup_free_ struct cw_move_info *m = NULL;
	uint64_t id = 0;
	bool one = cw_ctl_arg_uint(c->req, "id", &id);
	size_t n = 0;
	int r = cw_move_list(c->srv->pool, &m, &n);

	if (r < 0)
		return cwc_fail_pool(c, r, "listing moves");
	if (one)
		return reply_move(c, id, ret);
	*ret = json_object_new_array();
	for (size_t i = 0; i < n; i++)
		json_object_array_add(*ret, move_json(c, &m[i]));
	return 0;
}

static int move_change(struct ctx *c, json_object **ret, int (*fn)(struct cw_pool *, uint64_t))
{
	uint64_t id = 0;
	int r;

	cw_ctl_arg_uint(c->req, "id", &id);
	r = fn(c->srv->pool, id);
	if (r < 0)
		return cwc_fail_pool(c, r, "move");
	moves_changed(c);
	return reply_move(c, id, ret);
}

static int pause_by_command(struct cw_pool *pool, uint64_t id)
{
	return cw_move_pause(pool, id, NULL);
}

int cwc_cmd_move_pause(struct ctx *c, json_object **ret)
{
	return move_change(c, ret, pause_by_command);
}

int cwc_cmd_move_resume(struct ctx *c, json_object **ret)
{
	char why[CW_ADMIT_REASON_MAX + 512] = "";
	struct cw_move_info m;
	uint64_t id = 0;
	int r;

	/* Rule 2 holds a move while a reservation covers what it takes. */
	cw_ctl_arg_uint(c->req, "id", &id);
	if (cw_move_get(c->srv->pool, id, &m) == 0 && m.state == CW_MOVE_PAUSED) {
		r = rule2_check(c, id, why, sizeof(why));
		if (r == 1)
			(void)cw_move_pause(c->srv->pool, id, why);
		if (r == 1 || r == -EBUSY)
			return cwc_fail(c, CW_CTL_E_BUSY, "move %" PRIu64 " stays paused: %s", id,
					r == 1 ? why + strlen(POSTPONED) : why);
		if (r < 0)
			return cwc_fail(c, cw_ctl_code_from_errno(r), "move %" PRIu64 ": %s", id,
					why[0] ? why : strerror(-r));
	}
	return move_change(c, ret, cw_move_resume);
}

static int cancel_by_command(struct cw_pool *pool, uint64_t id)
{
	return cw_move_cancel(pool, id, NULL);
}

int cwc_cmd_move_cancel(struct ctx *c, json_object **ret)
{
	int r = move_change(c, ret, cancel_by_command);

	cwc_moves_settle(c->srv);	/* its streams leave its destinations */
	return r;
}
