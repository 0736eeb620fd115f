/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Cache commands of the control server: part.cache sets a partition's SSD
 * cache (clockwise/cache.h), and the "caches" table of stats.  The
 * daemon's worker applies a setting; a change here wakes it through the
 * moves_changed hook.
 *
 * Rule 2 for caches: a cached block is read from the SSD and written to
 * both disks, so a block of a reserved range may be cached only while its
 * stream is booked on the cache's disks too.  The admission state keeps
 * it (libclockwise/admit/state-stream.c, cw_admit_state_cache_set): it
 * books the stream there when they admit it and keeps every other
 * reserved range pinned in its partition's cache (cw_cache_pin).  This
 * file asks it and says what it refused.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/cache.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "control-internal.h"

void cwc_caches_notice(struct cwc_server *srv)
{
	const struct cw_admit_resv *rv;

	/* Said once: when a stream's refusal is new or changed. */
	for (size_t i = 0; srv->adm && (rv = cw_admit_state_resv_at(srv->adm, i)); i++) {
		char msg[sizeof(rv->cache_refused) + 2 * CW_NAME_MAX + 128], who[CW_NAME_MAX + 48];

		if (!rv->cache_refused_new || !srv->o.hooks.notice)
			continue;
		if (rv->persistent)
			snprintf(who, sizeof(who), "reservation %" PRIu64, rv->id);
		else
			snprintf(who, sizeof(who), "the start-up stream of export %s", rv->export_name);
		snprintf(msg, sizeof(msg), "cache: the blocks of %s on %s stay off the SSD: %s", who,
			 rv->part, rv->cache_refused);
		srv->o.hooks.notice(srv->o.hooks.userdata, msg);
	}
}

void cwc_caches_sync(struct cwc_server *srv, const char *part_name, bool retry)
{
	int r;

	if (!srv->adm)
		return;
	r = cw_admit_state_cache_sync(srv->adm, part_name, retry, NULL);
	if (r < 0 && retry && srv->o.hooks.notice) {
		char msg[256];

		snprintf(msg, sizeof(msg), "cache: booking reserved streams on SSD caches: %s",
			 strerror(-r));
		srv->o.hooks.notice(srv->o.hooks.userdata, msg);
	}
	if (r > 0)
		cwc_caches_notice(srv);
}

/* The reservations of part whose blocks its cache may not hold, and why. */
static json_object *pinned_json(struct cwc_server *srv, const char *part)
{
	json_object *a = json_object_new_array();
	const struct cw_admit_resv *rv;

	for (size_t i = 0; srv->adm && (rv = cw_admit_state_resv_at(srv->adm, i)); i++) {
		json_object *o;

		if (strcmp(rv->part, part) != 0 || !rv->cache_refused[0])
			continue;
		o = json_object_new_object();
		cwc_add(o, "resv", rv->persistent ? cw_ctl_json_u64(rv->id) : NULL);
		if (!rv->persistent)
			cwc_add(o, "export", cwc_jstr(rv->export_name));
		cwc_add(o, "range_start", cw_ctl_json_u64(rv->range_start_bytes));
		cwc_add(o, "range_end", cw_ctl_json_u64(rv->range_end_bytes));
		cwc_add(o, "why", cwc_jstr(rv->cache_refused));
		json_object_array_add(a, o);
	}
	return a;
}

static json_object *cache_json(struct cwc_server *srv, const char *name,
			       const struct cw_cache_conf *want, const struct cw_cache_stats *st)
{
	json_object *o = json_object_new_object();
	uint64_t reads = st->hits + st->misses;

	cwc_add(o, "part", cwc_jstr(name));
	cwc_add(o, "size", cw_ctl_json_u64(want->size_bytes));
	cwc_add(o, "mode", cwc_jstr(cw_cache_mode_name(want->mode)));
	cwc_add(o, "pending", json_object_new_boolean(st->pending));
	cwc_add(o, "slots", json_object_new_int64(st->slots));
	cwc_add(o, "used", json_object_new_int64(st->used));
	cwc_add(o, "used_bytes", cw_ctl_json_u64(st->used * (uint64_t)want->size_bytes /
						 CW_MAX(st->slots, 1)));
	cwc_add(o, "hits", cw_ctl_json_u64(st->hits));
	cwc_add(o, "misses", cw_ctl_json_u64(st->misses));
	cwc_add(o, "hit_ratio", json_object_new_double(reads ? (double)st->hits / (double)reads : 0));
	cwc_add(o, "promotions", cw_ctl_json_u64(st->promotions));
	cwc_add(o, "demotions", cw_ctl_json_u64(st->demotions));
	cwc_add(o, "writebacks", cw_ctl_json_u64(st->writebacks));
	cwc_add(o, "dirty", json_object_new_int64(st->dirty));
	cwc_add(o, "armed", json_object_new_int64(st->armed));
	cwc_add(o, "refused_reserved", cw_ctl_json_u64(st->refused_reserved));
	cwc_add(o, "pinned", pinned_json(srv, name));
	return o;
}

json_object *cwc_caches_json(struct cwc_server *srv)
{
	_cleanup_free_ struct cw_part_info *parts = NULL;
	json_object *a = json_object_new_array();
	size_t n = 0;

	if (cw_part_list(srv->pool, &parts, &n) < 0)
		return a;
	for (size_t i = 0; i < n; i++) {
		struct cw_cache_stats st;
		struct cw_cache_conf want;
		struct cw_part *part;

		if (cw_part_lookup(srv->pool, parts[i].name, &part) < 0 ||
		    cw_part_cache_stats(part, &st) < 0 || cw_part_cache_get(part, &want) < 0)
			continue;
		json_object_array_add(a, cache_json(srv, parts[i].name, &want, &st));
	}
	return a;
}

int cwc_cmd_part_cache(struct ctx *c, json_object **ret)
{
	const char *name = cw_ctl_arg_str(c->req, "name"), *mode = cw_ctl_arg_str(c->req, "mode");
	struct cw_cache_conf conf = { 0 }, now;
	struct cw_cache_stats st;
	struct cw_part *part;
	int r;

	if (cwc_find_part(c, name, &part) < 0)
		return -1;
	cw_part_cache_get(part, &now);
	conf.mode = now.mode;
	if (!cw_ctl_arg_uint(c->req, "size", &conf.size_bytes))
		conf.size_bytes = now.size_bytes;
	if (mode && cw_cache_mode_parse(mode, &conf.mode) < 0)
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "part.cache: unknown mode \"%s\" "
				"(write-through or write-back)", mode);
	if (!mode && !cw_ctl_arg_uint(c->req, "size", &conf.size_bytes))
		return cwc_fail(c, CW_CTL_E_BAD_REQUEST, "part.cache: give \"size\" (0: no "
				"cache), \"mode\" or both");
	/* Rule 2 (at the top) is the admission state's to keep. */
	r = cw_admit_state_cache_set(c->srv->adm, name, &conf, NULL);
	cwc_caches_notice(c->srv);
	if (r < 0)
		return cwc_fail_pool(c, r, name);
	if (c->srv->o.hooks.moves_changed)
		c->srv->o.hooks.moves_changed(c->srv->o.hooks.userdata);
	cw_part_cache_get(part, &now);
	if (cw_part_cache_stats(part, &st) < 0)
		memset(&st, 0, sizeof(st));
	st.pending = cw_part_cache(part) ? st.pending : now.size_bytes != 0;
	*ret = cache_json(c->srv, name, &now, &st);
	return 0;
}
