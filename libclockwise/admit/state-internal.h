/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Private to the admission state (clockwise/admit-state.h), which is
 * split over state*.c along its sections; the sections of this header
 * follow the files.  Calls between the files run one way (no file calls
 * into one that calls it, directly or not):
 *
 *   state-new.c    -> state-disk.c, state-resv.c, state-be.c
 *   state-stream.c -> state-admit.c, state-cache.c
 *   state-cache.c  -> state-move.c, state-admit.c, state-range.c,
 *                     state-refusal.c
 *   state-move.c   -> state-admit.c, state-disk.c, state-resv.c,
 *                     state-range.c, state-refusal.c
 *   state-model.c  -> state-be.c, state-disk.c, state-range.c,
 *                     state-refusal.c
 *   state-admit.c  -> state-be.c, state-host.c, state-disk.c,
 *                     state-resv.c, state-range.c, state-refusal.c
 *   state-be.c     -> state-disk.c, state-refusal.c
 *   state-disk.c, state-range.c -> state-refusal.c
 *   state-resv.c, state-host.c, state-refusal.c: none of the others
 *
 * Every file stands on this header: the state's types and the two inlines
 * each section uses to tell of what changed (ast_changes_add, ast_emit)
 * are its own, not any file's; the state's life is state-new.c, so that
 * no state.c pairs with it.
 *
 * Functions shared between the files are ast_* ("admission state"); the
 * library exports only cw_* (libclockwise.sym).
 */
#ifndef CW_ADMIT_STATE_INTERNAL_H
#define CW_ADMIT_STATE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <clockwise/admit-state.h>
#include <clockwise/pool-objects.h>

#include "admit/admit-internal.h"

struct dstate {
	uint32_t id;
	char name[CW_NAME_MAX + 1];
	enum cw_tier tier;
	struct cw_model model;
	enum cw_admit_model_source source;
	struct cw_disk_plan plan;
};

struct cw_admit_state {
	struct cw_admit_state_opts o;
	struct cw_pool *pool;
	uint64_t block;
	/* Guards resvs, n_resvs and the plans against readers in other
	 * threads; the changing thread reads without it. */
	pthread_mutex_t lock;
	struct dstate *disks[CW_DISKS_MAX + 1];	/* by id */
	struct cw_admit_resv **resvs;
	size_t n_resvs;
	uint64_t next_stream;
	/* Exports' best-effort QoS; the changing thread's alone. */
	struct cw_admit_be **bes;
	size_t n_bes;
	struct cw_host_model host;	/* none until set */
};

static inline void ast_changes_add(struct cw_admit_changes *c, uint32_t id)
{
	if (c)
		c->bits[id / 64] |= UINT64_C(1) << (id % 64);
}

static inline void ast_emit(struct cw_admit_state *st, const struct cw_admit_event *ev)
{
	if (st->o.listener)
		st->o.listener(st->o.listener_data, ev);
}

/* ---- state-refusal.c: refusals in words ---- */

void ast_refuse(struct cw_admit_refusal *ref, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void ast_refusal_who(struct cw_admit_refusal *ref, size_t fail,
		     const struct cw_admit_resv *owner, const struct cw_task *task);
void ast_who_text(const struct cw_admit_refusal *ref, char *buf, size_t len);
void ast_refusal_words(struct cw_admit_refusal *ref, const char *prefix, uint64_t block,
		       uint64_t rate, const char *with);

/* ---- state-disk.c: each disk's model, task set and plan ---- */

int ast_disk_tasks(const struct cw_admit_state *st, uint32_t id, struct cw_task **ret,
		   const struct cw_admit_resv ***ret_owner, size_t *ret_n);
int ast_replan(struct cw_admit_state *st, uint32_t id, struct cw_admit_changes *changes);
int ast_replan_resv(struct cw_admit_state *st, const struct cw_admit_resv *rv,
		    struct cw_admit_changes *changes);
int ast_disk_load(struct cw_admit_state *st, const struct cw_disk_info *info);

/* ---- state-resv.c: reservations, in memory and in the pool ---- */

/* A reservation and the parts arrays a move replaced (ast_rebook):
 * another thread may still read an old one (cw_admit_resv_part_on), so
 * they go with the reservation.  Every parts array ends with a zero disk
 * id. */
struct resv_obj {
	struct cw_admit_resv pub;	/* first: a resv's address is its object's */
	struct retired {
		struct retired *next;
		struct cw_admit_resv_part *parts;
	} *retired;
};

struct cw_admit_resv *ast_resv_new(void);
struct cw_admit_resv_part *ast_parts_new(size_t n);
void ast_resv_free(struct cw_admit_resv *r);
struct cw_resv_disk *ast_parts_stored(const struct cw_admit_state *st,
				      const struct cw_admit_resv_part *parts, size_t n);
int ast_resv_store(struct cw_admit_state *st, struct cw_admit_resv *rv);
void ast_resv_set_lead(struct cw_admit_resv *rv);
int ast_resv_append(struct cw_admit_state *st, struct cw_admit_resv *rv);
int ast_resvs_load(struct cw_admit_state *st);

/* ---- state-range.c: the reserved range ---- */

/* The range [start, end) of part as cw_admit_plan sees it: the disk (an
 * index into disks) and disk offset of each partition block it touches. */
struct range_layout {
	struct cw_disk_info *disks;
	size_t n_disks;
	uint32_t *disk_idx;
	uint64_t *disk_off;
	uint32_t *alt_idx;		/* where a move puts them (ast_range_layout_move) */
	uint32_t *mirror_idx;		/* a mirrored partition's other copies (admit.h) */
	uint64_t *mirror_off;
	uint32_t copy_idx[CW_DISKS_MAX];	/* a cache's disks (ast_range_layout_copies) */
	bool copy_id[CW_DISKS_MAX + 1];		/* the same, by disk id */
	struct cw_admit_layout l;
};

void ast_range_layout_done(struct range_layout *rl);
int ast_range_layout(struct cw_admit_state *st, struct cw_part *part, uint64_t start,
		     uint64_t end, struct range_layout *rl, struct cw_admit_refusal *ref);
int ast_range_layout_move(struct cw_admit_state *st, struct cw_part *part, uint64_t move_id,
			  uint64_t start, struct range_layout *rl, struct cw_admit_refusal *ref);
/* The running move of part that takes any block of bytes [start, end)
 * to another disk, in *ret_id (0: none; the first in the journal's order
 * when several do). */
int ast_range_moving(struct cw_admit_state *st, struct cw_part *part, uint64_t start,
		     uint64_t end, uint64_t *ret_id, struct cw_admit_refusal *ref);
int ast_range_layout_copies(struct cw_admit_state *st, struct range_layout *rl,
			    const uint32_t *ids, size_t n, struct cw_admit_refusal *ref);
size_t ast_resv_copies(const struct cw_admit_resv *rv, uint32_t *ids);

/* ---- state-host.c: the host ---- */

/* What the streams admitted need of the host's CPUs, in picoseconds a
 * second. */
uint64_t ast_host_need(const struct cw_admit_state *st);

/* ---- state-be.c: best effort between exports ---- */

void ast_be_free(struct cw_admit_be *be);
/* Whether the exports' best-effort reservations on disk_id still fit
 * with tasks[0..n) and extra (a stream being admitted): -EBUSY with ref
 * when they would not. */
int ast_be_streams_check(const struct cw_admit_state *st, uint32_t disk_id,
			 const struct cw_task *tasks, size_t n, const struct cw_task *extra,
			 struct cw_admit_refusal *ref);
int ast_be_refresh(struct cw_admit_state *st, const char *part, uint32_t disk_id);
int ast_bes_load(struct cw_admit_state *st);

/* ---- state-admit.c: admitting a stream ---- */

/* A request checked and its range laid out, with each disk's tasks (and
 * their owners) and reserve: all that planning it at some rate needs. */
struct prepared {
	struct range_layout rl;
	struct cw_admit_disk *ad;
	struct cw_task **tasks;
	const struct cw_admit_resv ***owner;
	struct cw_part_info pi;
	uint64_t end;
	/* The unfinished move the range is laid out on both sides of
	 * (rl.l.alt_disk), 0: none. */
	uint64_t move_id;
	struct cw_admit_qos q;		/* bandwidth set by each plan */
	bool survive;			/* planned by cw_admit_plan_survive */
	bool record;			/* every request on every copy (admit.h, thick) */
	/* The host's model and what the streams admitted need of it; NULL
	 * when the host is not asked (no model; a stream booked again). */
	const struct cw_host_model *host;
	uint64_t host_others_ps;
};

void ast_prepared_done(struct prepared *p);
int ast_prepare(struct cw_admit_state *st, const struct cw_admit_request *req,
		struct prepared *p, struct cw_admit_refusal *ref);
int ast_plan_at(const struct prepared *p, uint64_t rate, struct cw_admit_plan *plan);
int ast_plan_tested(const struct cw_admit_state *st, const struct prepared *p, uint64_t rate,
		    struct cw_admit_plan *plan, struct cw_admit_refusal *ref);
void ast_refusal_of_plan(const struct prepared *p, const struct cw_admit_plan *plan,
			 uint64_t rate, bool after_verb, struct cw_admit_refusal *ref);
void ast_refusal_prefix(const struct prepared *p, const struct cw_admit_plan *plan,
			bool after_verb, char *buf, size_t len);

/* A request admitted (ast_admit) and not yet booked (ast_book). */
struct admitted {
	struct prepared p;
	struct cw_admit_plan plan;
};

void ast_admitted_done(struct admitted *a);
/* The tests of cw_admit_state_reserve, changing nothing: 0 when every
 * disk and the host admit req, else its errors and refusal. */
int ast_admit(struct cw_admit_state *st, const struct cw_admit_request *req, struct admitted *a,
	      struct cw_admit_refusal *ref);
/* Books what ast_admit admitted: the pool first, then memory, the
 * RESV_ADDED event, the PLAN events.  Nothing of the SSD cache. */
int ast_book(struct cw_admit_state *st, const struct cw_admit_request *req,
	     const struct admitted *a, const struct cw_admit_resv **ret_resv,
	     struct cw_admit_refusal *ref, struct cw_admit_changes *changes);
/* Lets reservation id go: the pool first, then memory, the event, the
 * PLAN events.  Nothing of the SSD cache. */
int ast_release(struct cw_admit_state *st, uint64_t id, struct cw_admit_changes *changes);

/* ---- state-move.c: a reservation booked again (moves) ---- */

int ast_prepare_resv(struct cw_admit_state *st, const struct cw_admit_resv *rv,
		     uint64_t move_id, const uint32_t *ids, size_t n, struct prepared *p,
		     struct cw_admit_refusal *ref);
int ast_plan_moved(const struct cw_admit_state *st, struct prepared *p,
		   const struct cw_admit_resv *rv, const char *with, struct cw_admit_plan *plan,
		   struct cw_admit_refusal *ref);
int ast_rebook(struct cw_admit_state *st, struct cw_admit_resv *rv, uint64_t move_id,
	       struct cw_admit_resv_part *parts, size_t n, struct cw_admit_refusal *ref,
	       struct cw_admit_changes *changes);
struct cw_admit_resv_part *ast_plan_parts(const struct prepared *p,
					  const struct cw_admit_plan *plan);
int ast_rebook_lighter(struct cw_admit_state *st, struct cw_admit_resv *rv, uint64_t move_id,
		       const uint32_t *ids, size_t n, struct cw_admit_changes *changes);

/* ---- state-cache.c: a partition's SSD cache and its reservations ---- */

/* Pins, in partition part's cache, the range of every reservation of it
 * whose stream is not booked on every disk of the cache, and bytes
 * [start, end) when end > start (rule 2: cw_admit_state_reserve). */
int ast_cache_pin(struct cw_admit_state *st, const char *part, uint64_t start, uint64_t end);

#endif
