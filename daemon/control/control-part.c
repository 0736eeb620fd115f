/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Partition commands of the control server: list, create, show, resize and
 * delete, over the pool's layout (clockwise/layout.h).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/units.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "control-internal.h"

#define PART_RUNS_MAX 256	/* runs in one part.show reply */

/* The disks (by name) that hold the blocks of a partition with blocks on
 * missing disks and are not present themselves. */
static json_object *missing_disks_json(struct cwc_server *srv, const struct cw_part_info *p)
{
	bool seen[CW_DISKS_MAX + 1] = { false };
	json_object *a = json_object_new_array();
	struct cw_part *part;
	uint32_t ids[256];

	if (cw_part_lookup(srv->pool, p->name, &part) < 0)
		return a;
	for (uint64_t b = 0; b < p->nblocks; b += CW_ARRAY_SIZE(ids)) {
		uint64_t n = CW_MIN(p->nblocks - b, CW_ARRAY_SIZE(ids));

		if (cw_part_block_disks(part, b, n, ids) < 0)
			break;
		for (uint64_t k = 0; k < n; k++)
			seen[ids[k]] = true;
	}
	for (uint32_t id = 1; id <= CW_DISKS_MAX; id++) {
		struct cw_disk_info d;

		if (seen[id] && cw_disk_info(srv->pool, id, &d) == 0 && d.state != CW_DISK_PRESENT)
			json_object_array_add(a, cwc_jstr(d.name));
	}
	return a;
}

/* Why the partition stays degraded: each failed disk holding a copy of
 * it that no spare replaced ("disk D: why"), or NULL. */
static json_object *unreplaced_json(struct cwc_server *srv, struct cw_part *part)
{
	_cleanup_free_ struct cw_disk_info *d = NULL;
	uint64_t nb = cw_part_nblocks(part);
	uint32_t nc = cw_part_copies(part);
	json_object *a = NULL;
	size_t n = 0;

	if (cw_disk_list(srv->pool, &d, &n) < 0)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		bool holds = false;
		char line[CW_NAME_MAX + CW_DISK_UNREPLACED_MAX + 32];

		if (!d[i].unreplaced[0])
			continue;
		for (uint64_t b = 0; b < nb && !holds; b++) {
			struct cw_copy cs[CW_COPIES_MAX];

			if (cw_part_block_copies(part, b, cs) < 0)
				break;
			for (uint32_t c = 0; c < nc; c++)
				holds |= cs[c].disk_id == d[i].id;
		}
		if (!holds)
			continue;
		if (!a)
			a = json_object_new_array();
		snprintf(line, sizeof(line), "disk %s is not replaced: %s", d[i].name,
			 d[i].unreplaced);
		json_object_array_add(a, cwc_jstr(line));
	}
	return a;
}

/* A partition; "state" says whether it can be served: "complete", or
 * with blocks on missing disks "partial" (activation_mode partial: the
 * rest is served) or "offline", naming those disks. */
static json_object *part_json(struct cwc_server *srv, const struct cw_part_info *p)
{
	json_object *o = json_object_new_object();
	const char *state = p->available ? "complete" :
			    srv->o.activation_partial ? "partial" : "offline";

	cwc_add(o, "id", cw_ctl_json_u64(p->id));
	cwc_add(o, "name", cwc_jstr(p->name));
	cwc_add(o, "size", cw_ctl_json_u64(p->size_bytes));
	cwc_add(o, "blocks", cw_ctl_json_u64(p->nblocks));
	cwc_add(o, "policy", cwc_jstr(cw_placement_name(p->opts.placement)));
	cwc_add(o, "tier", cwc_jstr(cw_tier_pref_name(p->opts.tier)));
	cwc_add(o, "zone", cwc_jstr(cw_zone_pref_name(p->opts.zone)));
	if (p->opts.tier == CW_TIER_PREF_SSD)
		cwc_add(o, "tier_fallback", json_object_new_boolean(p->opts.tier_fallback));
	cwc_add(o, "copies", json_object_new_int64(p->copies));
	if (p->copies > 1) {
		struct cw_part *part;

		cwc_add(o, "stale_copies", cw_ctl_json_u64(p->stale_copies));
		/* degraded: some copies out of sync (a failed write, a
		 * missing disk, a crash's dirty regions), each copy's count,
		 * and the blocks no copy holds in sync */
		cwc_add(o, "degraded", json_object_new_boolean(p->stale_copies > 0));
		if (cw_part_lookup(srv->pool, p->name, &part) == 0) {
			json_object *a = json_object_new_array();

			for (uint32_t c = 0; c < p->copies; c++)
				json_object_array_add(a, cw_ctl_json_u64(cw_part_copy_stale_count(part, c)));
			cwc_add(o, "stale_per_copy", a);
			cwc_add(o, "lost_blocks", cw_ctl_json_u64(cw_part_lost_blocks(part)));
			if (p->stale_copies && (a = unreplaced_json(srv, part)))
				cwc_add(o, "degraded_because", a);
		}
	}
	cwc_add(o, "available", json_object_new_boolean(p->available));
	cwc_add(o, "state", cwc_jstr(state));
	if (!p->available) {
		cwc_add(o, "missing_blocks", cw_ctl_json_u64(p->missing_blocks));
		cwc_add(o, "missing_disks", missing_disks_json(srv, p));
	}
	return o;
}

int cwc_cmd_part_list(struct ctx *c, json_object **ret)
{
	_cleanup_free_ struct cw_part_info *p = NULL;
	size_t n = 0;
	int r = cw_part_list(c->srv->pool, &p, &n);

	if (r < 0)
		return cwc_fail_pool(c, r, "listing partitions");
	*ret = json_object_new_array();
	for (size_t i = 0; i < n; i++)
		json_object_array_add(*ret, part_json(c->srv, &p[i]));
	return 0;
}

/* The reply of a command that changed a partition: its state now. */
static int reply_part(struct ctx *c, struct cw_part *part, const char *name, json_object **ret)
{
	struct cw_part_info pi;
	int r = cw_part_info(part, &pi);

	if (r < 0)
		return cwc_fail_pool(c, r, name);
	*ret = part_json(c->srv, &pi);
	return 0;
}

int cwc_cmd_part_create(struct ctx *c, json_object **ret)
{
	const char *name = cw_ctl_arg_str(c->req, "name"), *s;
	struct cw_part_opts o = { .placement = CW_PLACE_ROTATION };
	struct cw_part *part;
	uint64_t size = 0, copies = 0;
	int r;

	cw_ctl_arg_uint(c->req, "size", &size);
	if (size == 0)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "a partition of 0 bytes holds nothing");
	if (!cw_name_valid(name))
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST,
			    "partition name \"%s\": 1-%d characters of A-Z a-z 0-9 . _ -, "
			    "not starting with . or -", name, CW_NAME_MAX);
	if (cwc_placement_args(c, &o.placement, &o.tier, &o.zone) < 0)
		return -1;
	cw_ctl_arg_bool(c->req, "tier_fallback", &o.tier_fallback);
	if (cw_ctl_arg_uint(c->req, "copies", &copies)) {
		if (copies < 1 || copies > CW_COPIES_MAX)
			return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "copies %" PRIu64 ": 1 to %d",
					copies, CW_COPIES_MAX);
		o.copies = (uint32_t)copies;
	}
	if ((s = cw_ctl_arg_str(c->req, "disk"))) {
		struct cw_disk_info d;

		if (o.placement != CW_PLACE_SINGLE)
			return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "a disk is chosen only with policy single");
		if (cwc_find_disk(c, s, &d) < 0)
			return -1;
		o.disk_id = d.id;
	}
	r = cw_part_create(c->srv->pool, name, size, &o, &part);
	if (r < 0)
		return cwc_fail_pool(c, r, name);
	return reply_part(c, part, name, ret);
}

/* The disk names by id, for the runs of part.show. */
static void disk_names(struct cwc_server *srv, char (*names)[CW_NAME_MAX + 1], bool *present)
{
	_cleanup_free_ struct cw_disk_info *d = NULL;
	size_t n = 0;

	if (cw_disk_list(srv->pool, &d, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++)
		if (d[i].id <= CW_DISKS_MAX) {
			snprintf(names[d[i].id], sizeof(names[0]), "%s", d[i].name);
			present[d[i].id] = d[i].state == CW_DISK_PRESENT;
		}
}

/* A partition with copies: the block its page of runs from block from
 * ends before, so that the runs of copy 0 (runs) and every copy's runs
 * (copy_runs) together are at most PART_RUNS_MAX and the reply stays one
 * line (a striped one has a run per block and copy); nblocks when the
 * rest fits. */
static uint64_t copies_page_end(struct cw_part *part, const struct cw_part_info *pi,
				uint64_t from)
{
	struct cw_copy prev[CW_COPIES_MAX] = { { 0 } };
	uint64_t bs = cw_part_block_size(part), k = 0;

	for (uint64_t b = from; b < pi->nblocks; b++) {
		struct cw_copy cs[CW_COPIES_MAX];

		if (cw_part_block_copies(part, b, cs) < 0)
			return b;
		for (uint32_t c = 0; c < pi->copies; c++) {
			bool cont = b != from && cs[c].disk_id == prev[c].disk_id &&
				    cs[c].phys_offset == prev[c].phys_offset + bs;

			k += !(cont && cs[c].in_sync == prev[c].in_sync) + (c == 0 && !cont);
			prev[c] = cs[c];
		}
		if (k > PART_RUNS_MAX && b > from)
			return b;
	}
	return pi->nblocks;
}

/* The runs of every copy of a partition with copies, of blocks [from, to)
 * (copies_page_end): blocks consecutive on one disk in one sync state,
 * each {copy, first_block, blocks, disk_id, disk, offset, in_sync}; the
 * blocks of copies 1.. counted in blocks_on (copy 0's are). */
static json_object *copy_runs_json(struct cw_part *part, const struct cw_part_info *pi,
				   uint64_t from, uint64_t to, char (*names)[CW_NAME_MAX + 1],
				   uint64_t *blocks_on)
{
	json_object *a = json_object_new_array();
	uint64_t bs = cw_part_block_size(part);

	for (uint32_t c = 0; c < pi->copies; c++) {
		struct cw_copy run = { 0 };
		uint64_t first = 0, n = 0, listed = 0;

		for (uint64_t b = 0; b <= pi->nblocks; b++) {
			struct cw_copy cs[CW_COPIES_MAX];
			bool ok = b < pi->nblocks && cw_part_block_copies(part, b, cs) == 0;

			if (ok && c > 0)
				blocks_on[cs[c].disk_id]++;
			if (ok && n && b != from && b != to && cs[c].disk_id == run.disk_id &&
			    cs[c].in_sync == run.in_sync &&
			    cs[c].phys_offset == run.phys_offset + n * bs) {
				n++;
				continue;
			}
			if (n && first >= from && first < to && listed < PART_RUNS_MAX) {
				json_object *ro = json_object_new_object();

				cwc_add(ro, "copy", json_object_new_int64(c));
				cwc_add(ro, "first_block", cw_ctl_json_u64(first));
				cwc_add(ro, "blocks", cw_ctl_json_u64(n));
				cwc_add(ro, "disk_id", json_object_new_int64(run.disk_id));
				cwc_add(ro, "disk", cwc_jstr(names[run.disk_id]));
				cwc_add(ro, "offset", cw_ctl_json_u64(run.phys_offset));
				cwc_add(ro, "in_sync", json_object_new_boolean(run.in_sync));
				json_object_array_add(a, ro);
				listed++;
			}
			if (!ok)
				break;
			run = cs[c];
			first = b;
			n = 1;
		}
	}
	return a;
}

/* A partition, its blocks per disk and its runs (logical blocks that are
 * consecutive on one disk).  The runs from block from_block on, at most
 * PART_RUNS_MAX of them so that the reply stays one line a client can
 * read (CW_CTL_LINE_MAX); next_block, when present, is where the next
 * page starts (cwctl part show --all follows it). */
int cwc_cmd_part_show(struct ctx *c, json_object **ret)
{
	const char *name = cw_ctl_arg_str(c->req, "name");
	uint64_t blocks_on[CW_DISKS_MAX + 1] = { 0 };
	bool present[CW_DISKS_MAX + 1] = { false };
	_cleanup_free_ char (*names)[CW_NAME_MAX + 1] = NULL;
	_cleanup_free_ uint32_t *ids = NULL;
	json_object *per_disk, *runs;
	struct cw_part_info pi;
	struct cw_part *part;
	uint64_t pb, nruns = 0, listed = 0, from = 0, next = 0, to;
	struct cw_extent run = { 0 };
	uint64_t run_first = 0;
	int r;

	if (cwc_find_part(c, name, &part) < 0)
		return -1;
	r = cw_part_info(part, &pi);
	if (r < 0)
		return cwc_fail_pool(c, r, name);
	cw_ctl_arg_uint(c->req, "from_block", &from);
	if (from && from >= pi.nblocks)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "partition %s has %" PRIu64 " blocks: "
				"none from block %" PRIu64, name, pi.nblocks, from);
	pb = cw_part_block_size(part);
	names = calloc(CW_DISKS_MAX + 1, sizeof(*names));
	ids = calloc(pi.nblocks ? pi.nblocks : 1, sizeof(*ids));
	if (!ids || !names)
		return cwc_fail(c, CW_CTL_E_INTERNAL, "out of memory");
	disk_names(c->srv, names, present);
	*ret = part_json(c->srv, &pi);
	cwc_add(*ret, "block_size", cw_ctl_json_u64(pb));
	to = pi.copies > 1 ? copies_page_end(part, &pi, from) : UINT64_MAX;
	per_disk = json_object_new_array();
	runs = json_object_new_array();
	if (pi.nblocks && cw_part_block_disks(part, 0, pi.nblocks, ids) == 0) {
		for (uint64_t k = 0; k <= pi.nblocks; k++) {
			struct cw_extent e = { 0 };
			bool joins;

			/* A block on a missing disk maps all the same (-ENODEV
			 * with its place): its run is shown where it was. */
			if (k < pi.nblocks) {
				int r2 = cw_part_map(part, k * pb, pb, &e);

				blocks_on[ids[k]]++;
				if (r2 < 0 && r2 != -ENODEV)
					break;
				e.length = pb;
			}
			joins = k > 0 && k < pi.nblocks && k != from && k != to &&
				e.disk_id == run.disk_id &&
				e.phys_offset == run.phys_offset + run.length;
			if (joins) {
				run.length += pb;
				continue;
			}
			if (k > 0) {
				nruns++;
				if (run_first >= from && run_first < to && listed < PART_RUNS_MAX) {
					json_object *ro = json_object_new_object();

					cwc_add(ro, "first_block", cw_ctl_json_u64(run_first));
					cwc_add(ro, "blocks", cw_ctl_json_u64(run.length / pb));
					cwc_add(ro, "disk_id", json_object_new_int64(run.disk_id));
					cwc_add(ro, "disk", cwc_jstr(names[run.disk_id]));
					cwc_add(ro, "offset", cw_ctl_json_u64(run.phys_offset));
					json_object_array_add(runs, ro);
					listed++;
				} else if (run_first >= from && !next) {
					next = run_first;
				}
			}
			run = (struct cw_extent){ e.disk_id, e.phys_offset, pb };
			run_first = k;
		}
	}
	if (pi.copies > 1)
		cwc_add(*ret, "copy_runs", copy_runs_json(part, &pi, from, to, names, blocks_on));
	for (uint32_t id = 1; id <= CW_DISKS_MAX; id++) {
		json_object *d;

		if (!blocks_on[id])
			continue;
		d = json_object_new_object();
		cwc_add(d, "disk_id", json_object_new_int64(id));
		cwc_add(d, "disk", cwc_jstr(names[id]));
		cwc_add(d, "blocks", cw_ctl_json_u64(blocks_on[id]));
		cwc_add(d, "bytes", cw_ctl_json_u64(blocks_on[id] * pb));
		if (!present[id])
			cwc_add(d, "missing", json_object_new_boolean(true));
		json_object_array_add(per_disk, d);
	}
	cwc_add(*ret, "per_disk", per_disk);
	cwc_add(*ret, "runs", runs);
	cwc_add(*ret, "runs_total", cw_ctl_json_u64(nruns));
	if (next)
		cwc_add(*ret, "next_block", cw_ctl_json_u64(next));
	return 0;
}

/* Reservations and exports that hold on to partition name. */
static int part_users(struct ctx *c, const char *name, uint64_t below_bytes)
{
	const struct cw_admit_resv *r;

	for (size_t i = 0; i < c->srv->n_exports; i++)
		if (below_bytes == UINT64_MAX && strcmp(c->srv->exports[i].part, name) == 0)
			return cwc_fail(c, CW_CTL_E_BUSY, "partition %s is exported as %s", name,
				    c->srv->exports[i].name);
	for (size_t i = 0; (r = cw_admit_state_resv_at(c->srv->adm, i)); i++) {
		if (strcmp(r->part, name) != 0 ||
		    (below_bytes != UINT64_MAX && r->range_end_bytes <= below_bytes))
			continue;
		if (!r->persistent)
			return cwc_fail(c, CW_CTL_E_BUSY, "the start-up reservation of export %s "
					"covers %s up to byte %" PRIu64, r->export_name, name,
					r->range_end_bytes);
		return cwc_fail(c, CW_CTL_E_BUSY, "reservation %" PRIu64 " covers %s up to byte %"
				PRIu64, r->id, name, r->range_end_bytes);
	}
	return 0;
}

/* The size a resize asks for: size, or the size now grown or shrunk by
 * so much; never nothing. */
static int resize_target(struct ctx *c, struct cw_part *part, const char *name,
			 uint64_t *ret_size)
{
	uint64_t size = 0, grow = 0, shrink = 0, now = cw_part_size_bytes(part);
	bool has_size = cw_ctl_arg_uint(c->req, "size", &size);
	bool has_grow = cw_ctl_arg_uint(c->req, "grow", &grow);
	bool has_shrink = cw_ctl_arg_uint(c->req, "shrink", &shrink);
	char a[CW_UNITS_BUF], b[CW_UNITS_BUF];

	if (has_size + has_grow + has_shrink != 1)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "part.resize: give one of \"size\", "
				"\"grow\" and \"shrink\"");
	if (has_grow && grow > UINT64_MAX / 2 - now)
		return cwc_fail(c, CW_CTL_E_NO_SPACE, "growing %s by %" PRIu64 " bytes: too large",
				name, grow);
	if (has_shrink && shrink >= now)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "shrinking %s (%s) by %s would leave "
				"nothing: delete it instead", name, cw_units_format_size(now, a),
				cw_units_format_size(shrink, b));
	size = has_size ? size : has_grow ? now + grow : now - shrink;
	if (size == 0)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "a partition of 0 bytes holds nothing: "
				"delete %s instead", name);
	*ret_size = size;
	return 0;
}

/* Refuses (-1, the reason in c) to discard blocks [first, first + n) of
 * part while they hold data, unless the request says force: "what" is
 * the sentence's start, "how" the command that forces it. */
static int data_forced(struct ctx *c, struct cw_part *part, uint64_t first, uint64_t n,
		       const char *what, const char *how)
{
	char a[CW_UNITS_BUF];
	uint64_t data = 0;
	bool force = false;
	int r;

	cw_ctl_arg_bool(c->req, "force", &force);
	if (force || n == 0)
		return 0;
	r = cw_part_data_bytes(part, first, n, &data);
	if (r < 0)
		return cwc_fail(c, CW_CTL_E_BUSY, "%s: the partition changed meanwhile; try again",
				what);
	if (data == 0)
		return 0;	/* only holes: nothing is lost */
	return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "%s loses %s of data written there: say so "
			"with force (%s --force)", what, cw_units_format_size(data, a), how);
}

/* A shrink discards the end's data: only when asked with force, or when
 * the end holds none. */
static int shrink_forced(struct ctx *c, struct cw_part *part, const char *name, uint64_t size)
{
	uint64_t now = cw_part_size_bytes(part), bs = cw_part_block_size(part);
	uint64_t keep = size / bs + (size % bs != 0), have = cw_part_nblocks(part);
	char a[CW_UNITS_BUF], b[CW_UNITS_BUF], d[CW_UNITS_BUF], what[256];

	if (keep >= have)
		return 0;
	snprintf(what, sizeof(what), "shrinking %s from %s to %s (its last %s)", name,
		 cw_units_format_size(now, a), cw_units_format_size(keep * bs, b),
		 cw_units_format_size((have - keep) * bs, d));
	return data_forced(c, part, keep, have - keep, what, "cwctl part resize");
}

int cwc_cmd_part_resize(struct ctx *c, json_object **ret)
{
	const char *name = cw_ctl_arg_str(c->req, "name");
	struct cw_part *part;
	uint64_t size = 0, bs, have;
	int r;

	if (cwc_find_part(c, name, &part) < 0 || resize_target(c, part, name, &size) < 0 ||
	    part_users(c, name, size) < 0)
		return -1;
	bs = cw_part_block_size(part);
	have = cw_part_nblocks(part);
	if (size / bs + (size % bs != 0) < have) {
		/* A client connected now was told the old size, and NBD cannot
		 * take it back: its requests could reach blocks the shrink
		 * gives to another partition. */
		for (size_t i = 0; i < c->srv->n_exports; i++)
			if (strcmp(c->srv->exports[i].part, name) == 0)
				return cwc_fail(c, CW_CTL_E_BUSY, "partition %s is exported as %s: it can "
					    "grow, but shrinks only once the export is removed", name,
					    c->srv->exports[i].name);
	}
	if (shrink_forced(c, part, name, size) < 0)
		return -1;
	/* A started ublk device keeps its size before Linux 6.16
	 * (UBLK_CMD_UPDATE_SIZE): refused before anything changes. */
	for (size_t i = 0; size > have * bs &&
			   i < c->srv->n_exports; i++)
		if (strcmp(c->srv->exports[i].part, name) == 0 && c->srv->exports[i].ublk)
			return cwc_fail(c, CW_CTL_E_BUSY, "partition %s is exported as ublk device "
				    "%s (export %s), whose size this kernel cannot change while it "
				    "runs (live resize needs Linux 6.16): remove the export, grow, "
				    "and add it again", name, c->srv->exports[i].device,
				    c->srv->exports[i].name);
	r = cw_part_resize(part, size);
	if (r < 0)
		return cwc_fail_pool(c, r, name);
	for (size_t i = 0; cw_part_nblocks(part) > have && i < c->srv->n_exports; i++) {
		const struct cwc_export *e = &c->srv->exports[i];
		char why[256] = "";

		if (strcmp(e->part, name) != 0 || !c->srv->o.hooks.export_resize)
			continue;
		/* New connections get the new size; open ones keep theirs. */
		r = c->srv->o.hooks.export_resize(c->srv->o.hooks.userdata, e, part, why,
						  sizeof(why));
		if (r < 0)
			return cwc_fail(c, cw_ctl_code_from_errno(r), "partition %s grew, but export %s "
				    "keeps its old size: %s", name, e->name, why);
	}
	/* its exports' best-effort shares follow its blocks to their disks */
	if (c->srv->adm && cw_part_nblocks(part) > have &&
	    (r = cw_admit_state_be_refresh(c->srv->adm, name)) < 0)
		return cwc_fail(c, cw_ctl_code_from_errno(r), "partition %s grew, but its exports' "
				"best-effort QoS could not follow it: %s", name, strerror(-r));
	return reply_part(c, part, name, ret);
}

int cwc_cmd_part_delete(struct ctx *c, json_object **ret)
{
	const char *name = cw_ctl_arg_str(c->req, "name");
	struct cw_part *part;
	int r;

	char what[CW_NAME_MAX + 32];

	if (cwc_find_part(c, name, &part) < 0 || part_users(c, name, UINT64_MAX) < 0)
		return -1;
	snprintf(what, sizeof(what), "deleting %s", name);
	if (data_forced(c, part, 0, cw_part_nblocks(part), what, "cwctl part delete") < 0)
		return -1;
	r = cw_part_delete(part);
	if (r < 0)
		return cwc_fail_pool(c, r, name);
	*ret = json_object_new_object();
	cwc_add(*ret, "name", cwc_jstr(name));
	return 0;
}

