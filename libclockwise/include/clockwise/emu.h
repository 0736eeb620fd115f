/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwise/emu.h — an I/O engine that keeps a disk model's time.
 *
 * The emulating engine stacks on another engine (io_uring, libaio, memory)
 * that does the real read or write on the backing file, and hands each
 * request back no earlier than the disk described by a model
 * (clockwise/model.h) would have finished it: the mechanics are the
 * model module's cw_model_disk_* — the very functions cwsim simulates
 * with.  A file in tmpfs then behaves like an Atlas-II or a 7200 rpm disk
 * to everything above the engine: the dispatcher, calibration, NBD
 * clients.
 *
 * Completion times are absolute CLOCK_MONOTONIC deadlines.  The engine
 * measures how late it hands requests back (the host may be busy, or the
 * backing file slower than the model) and counts requests later than
 * late_warn_ns; cw_io_emu_behind() tells the caller when to warn.
 *
 * Capacity is the model's: a read that starts at or past it returns 0
 * bytes, one that crosses it is cut short there; a write there fails with
 * -ENOSPC — as on a block device of that size.
 *
 * Like every engine, one belongs to one thread; cw_io_emu_stats() and
 * cw_io_emu_behind() may be called from any thread.
 */
#ifndef CLOCKWISE_EMU_H
#define CLOCKWISE_EMU_H

#include <clockwise/io.h>
#include <clockwise/model.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cw_io_emu_opts {
	size_t size;			/* sizeof(struct cw_io_emu_opts) */
	enum cw_io_kind inner;		/* the engine doing the real I/O */
	struct cw_model_disk_opts disk;	/* phase, bus, SSD channels and collection */
	/* HDD: 0 serves requests in arrival order; n > 1 lets the disk pick,
	 * among the first n waiting, the one it can reach soonest (shortest
	 * access time first, as a drive's tagged command queue does). */
	unsigned satf_window;
	int64_t late_warn_ns;		/* a completion this late counts as late */
	/* The last spin_ns (<= 1 ms) before a completion are spent spinning
	 * rather than asleep: a wake-up from a timer is tens of microseconds
	 * late, which a short seek would feel. */
	int64_t spin_ns;
};

/* Defaults: io_uring inside, cw_model_disk_opts_init's mechanics, no
 * command queue, late beyond 1 ms, a spin of 100 us. */
void cw_io_emu_opts_init(struct cw_io_emu_opts *opts);

/* A new engine for depth requests in flight emulating model (copied);
 * opts NULL: the defaults with the model's own mechanics
 * (cw_model_disk_opts_of; callers with opts set opts->disk so).  -EINVAL
 * for an invalid model or options. */
int cw_io_emu_new(const struct cw_model *model, const struct cw_io_emu_opts *opts,
		  unsigned depth, struct cw_io_engine **ret_engine);

struct cw_io_emu_stats {
	uint64_t requests;		/* handed back */
	int64_t busy_ns;		/* emulated service time, summed */
	int64_t late_sum_ns;		/* handed back after the model's time, summed */
	int64_t late_max_ns;
	uint64_t late;			/* later than late_warn_ns */
};

/* -EINVAL when e is not an emulating engine. */
int cw_io_emu_stats(const struct cw_io_engine *e, struct cw_io_emu_stats *ret_stats);

/* True once each time requests were handed back later than late_warn_ns
 * since the last call: the host cannot keep the model's time; the caller
 * logs it (with cw_io_emu_stats).  False for other engines. */
bool cw_io_emu_behind(struct cw_io_engine *e);

/* The emulated model of an emulating engine, or NULL. */
const struct cw_model *cw_io_emu_model(const struct cw_io_engine *e);

#ifdef __cplusplus
}
#endif
#endif
