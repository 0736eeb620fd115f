/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The time an emulated disk keeps (clockwise/emu.h) as the data path sees
 * it: each lane's engine counts its lateness; a disk's sum is logged with
 * the counters, and a warning at most every EMU_WARN_NS when the host
 * cannot keep up.  Called by lane.c and pool-backend.c, calling neither.
 */
#include "config.h"

#include "daemon/path/pool-internal.h"

void pb_disk_emu_stats(const struct disk *d, struct cw_io_emu_stats *ret)
{
	*ret = (struct cw_io_emu_stats){ 0 };
	for (size_t j = 0; d->emulate && j < d->nlanes; j++) {
		struct cw_io_emu_stats st;

		if (!d->lanes[j].eng || cw_io_emu_stats(d->lanes[j].eng, &st) < 0)
			continue;
		ret->requests += st.requests;
		ret->busy_ns += st.busy_ns;
		ret->late_sum_ns += st.late_sum_ns;
		ret->late_max_ns = CW_MAX(ret->late_max_ns, st.late_max_ns);
		ret->late += st.late;
	}
}

void pb_disk_emu_warn(struct disk *d)
{
	int64_t now = cw_now_ns(), last = atomic_load(&d->emu_warned_ns);
	struct cw_io_emu_stats st;

	if (last && now - last < EMU_WARN_NS)
		return;
	atomic_store(&d->emu_warned_ns, now);
	pb_disk_emu_stats(d, &st);
	cwd_log(LOG_WARNING, "disk %s: the host cannot keep the time of the emulated %s: %"
		PRIu64 " of %" PRIu64 " requests completed over 1 ms late, by up to %" PRId64 " us",
		d->name, d->emulate->name, st.late, st.requests, st.late_max_ns / 1000);
}
