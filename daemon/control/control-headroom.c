/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * disk.headroom: what an operator plans with.  For each disk, what it
 * carries (streams, utilization, ΔL, the best-effort budget) and the
 * largest rate a new stream on it alone would be admitted at; for each
 * partition, the largest rate of a stream over all of it and the disk
 * that limits it (on a mirrored partition also the largest that survives
 * the loss of any one disk).  The rates are the admission state's
 * (cw_admit_state_headroom), found with the very test a reservation
 * passes, so a rate shown here is admitted by `resv create` at once.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "control-internal.h"

/* The rate, or null with why when none can be said; the keys end in sfx
 * ("" for the normal case, "_survive" for a stream that survives a disk). */
static void add_rate_as(json_object *o, const char *sfx, int r, uint64_t rate,
			const struct cw_admit_refusal *ref)
{
	char k[64];

#define KEY(name) (snprintf(k, sizeof(k), "%s%s", name, sfx), k)
	cwc_add(o, KEY("max_rate"), r == 0 ? cw_ctl_json_u64(rate) : NULL);
	if (r == 0 && ref->disk[0])
		cwc_add(o, KEY("limited_by"), cwc_jstr(ref->disk));
	/* the disks would take more; the CPUs given to streams would not */
	if (r == 0 && ref->part.result.why == CW_ADMIT_HOST)
		cwc_add(o, KEY("limited_by_host"), json_object_new_boolean(1));
	if (r == 0 && ref->reason[0])
		cwc_add(o, KEY("limit"), cwc_jstr(ref->reason));
	if (r < 0)
		cwc_add(o, KEY("error"), cwc_jstr(ref->reason[0] ? ref->reason : strerror(-r)));
#undef KEY
}

static void add_rate(json_object *o, int r, uint64_t rate, const struct cw_admit_refusal *ref)
{
	add_rate_as(o, "", r, rate, ref);
}

static json_object *disk_headroom(struct cwc_server *srv, const struct cw_disk_info *d,
				  uint64_t block)
{
	json_object *o = json_object_new_object();
	struct cw_admit_refusal ref;
	struct cw_disk_plan p;
	uint64_t rate = 0;
	int r;

	cwc_add(o, "disk", cwc_jstr(d->name));
	cwc_add(o, "disk_id", json_object_new_int64(d->id));
	cwc_add(o, "tier", cwc_jstr(cw_tier_name(d->tier)));
	cwc_add(o, "state", cwc_jstr(cwc_disk_state_name(d->state)));
	if (cw_admit_state_plan(srv->adm, d->id, &p) == 0) {
		cwc_add(o, "streams", json_object_new_int64((int64_t)p.n_tasks));
		cwc_add(o, "utilization", json_object_new_double(p.utilization));
		cwc_add(o, "delta_l_ns", cwc_jns(p.delta_l_ns));
		cwc_add(o, "be_budget_ns", cwc_jns(p.be_budget_ns));
	}
	r = cw_admit_state_disk_headroom(srv->adm, d->id, block, &rate, &ref);
	add_rate(o, r, rate, &ref);
	return o;
}

/* Whether partition part has a block on disk id (any disk: id 0). */
static bool part_on(struct cw_part *part, uint32_t id, json_object *names,
		    const struct cw_disk_info *disks, size_t n_disks)
{
	uint64_t nb = cw_part_nblocks(part);
	_cleanup_free_ uint32_t *ids = calloc(nb ? nb : 1, sizeof(*ids));
	bool seen[CW_DISKS_MAX + 1] = { false };

	if (!ids || cw_part_block_disks(part, 0, nb, ids) < 0)
		return id == 0;
	for (uint64_t k = 0; k < nb; k++) {
		struct cw_copy cs[CW_COPIES_MAX];

		if (ids[k] <= CW_DISKS_MAX)
			seen[ids[k]] = true;
		/* a mirrored partition's other copies too */
		for (uint32_t c = 1; c < cw_part_copies(part) && cw_part_block_copies(part, k, cs) == 0;
		     c++)
			if (cs[c].disk_id <= CW_DISKS_MAX)
				seen[cs[c].disk_id] = true;
	}
	for (size_t i = 0; i < n_disks; i++)
		if (seen[disks[i].id])
			json_object_array_add(names, cwc_jstr(disks[i].name));
	return id == 0 || (id <= CW_DISKS_MAX && seen[id]);
}

static int parts_headroom(struct ctx *c, uint32_t only, uint64_t block,
			  const struct cw_disk_info *disks, size_t n_disks, json_object *out)
{
	_cleanup_free_ struct cw_part_info *p = NULL;
	size_t n = 0;
	int r = cw_part_list(c->srv->pool, &p, &n);

	if (r < 0)
		return cwc_fail_pool(c, r, "listing partitions");
	for (size_t i = 0; i < n; i++) {
		struct cw_admit_request rq = { .part = p[i].name, .block_bytes = block,
					       .survive = CW_ADMIT_SURVIVE_OFF };
		json_object *o, *names = json_object_new_array();
		struct cw_admit_refusal ref;
		struct cw_part *part;
		uint64_t rate = 0;

		if (cw_part_lookup(c->srv->pool, p[i].name, &part) < 0 ||
		    !part_on(part, only, names, disks, n_disks)) {
			json_object_put(names);
			continue;
		}
		o = json_object_new_object();
		cwc_add(o, "part", cwc_jstr(p[i].name));
		cwc_add(o, "size", cw_ctl_json_u64(p[i].size_bytes));
		cwc_add(o, "disks", names);
		r = cw_admit_state_headroom(c->srv->adm, &rq, &rate, &ref);
		add_rate(o, r, rate, &ref);
		/* a mirrored partition: the largest stream that survives the
		 * loss of any one disk, too (resv create --survive 1) */
		cwc_add(o, "copies", json_object_new_int64(p[i].copies));
		if (p[i].copies > 1) {
			rq.survive = CW_ADMIT_SURVIVE_ON;
			rate = 0;
			r = cw_admit_state_headroom(c->srv->adm, &rq, &rate, &ref);
			add_rate_as(o, "_survive", r, rate, &ref);
		}
		json_object_array_add(out, o);
	}
	return 0;
}

int cwc_cmd_disk_headroom(struct ctx *c, json_object **ret)
{
	_cleanup_free_ struct cw_disk_info *d = NULL;
	const char *name = cw_ctl_arg_str(c->req, "name");
	uint64_t block = cw_pool_block_size(c->srv->pool);
	json_object *disks, *parts;
	struct cw_disk_info one;
	size_t n = 0;
	int r;

	cw_ctl_arg_uint(c->req, "block", &block);
	if (block == 0)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "the block size must be positive");
	if (name && cwc_find_disk(c, name, &one) < 0)
		return -1;
	r = cw_disk_list(c->srv->pool, &d, &n);
	if (r < 0)
		return cwc_fail_pool(c, r, "listing disks");
	disks = json_object_new_array();
	for (size_t i = 0; i < n; i++)
		if (!name || d[i].id == one.id)
			json_object_array_add(disks, disk_headroom(c->srv, &d[i], block));
	parts = json_object_new_array();
	if (parts_headroom(c, name ? one.id : 0, block, d, n, parts) < 0) {
		json_object_put(disks);
		json_object_put(parts);
		return -1;
	}
	*ret = json_object_new_object();
	cwc_add(*ret, "block", cw_ctl_json_u64(block));
	cwc_add(*ret, "disks", disks);
	cwc_add(*ret, "partitions", parts);
	return 0;
}
