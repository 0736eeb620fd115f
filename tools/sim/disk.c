/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Disk mechanics for the simulator (Bosch & Mullender, section 4: "The
 * simulated disks simulates heads, tracks, sectors, rotational speed and
 * head positions.  The SCSI part simulates data transfers over the SCSI
 * bus."), driven by the same struct cw_model that admission uses.
 *
 * The arithmetic of one access (overhead, seek by distance, a part of a
 * revolution, transfer) is the model's cw_model_access_ns; this file adds
 * only what a simulation needs on top: where the head and the platter
 * are, and the bus.
 *
 * Invariant: for a request inside [lo, hi) the time computed here is at
 * most cw_model_service_ns(m, lo, hi, bytes) whenever the bus is at least
 * as fast as the zones: cw_model_access_ns promises that for any head
 * position and any part of a revolution up to a whole one.  A bus slower
 * than the media can break this; the engine counts such requests as model
 * overruns instead of hiding them.
 *
 * Geometry: byte offsets stand for cylinders (seek distance is the
 * difference of offsets), and a track of zone z holds rate_z x rotation
 * bytes, so a sector's angle is its offset within the zone modulo that.
 * Track and head switches and the disk cache are not simulated (the paper
 * does not simulate the cache either).
 */
#include "config.h"

#include "common/util.h"
#include "sim.h"

void sim_disk_init(struct sim_disk *d, const struct cw_model *m, uint64_t bus_bps,
		   int64_t phase_ns)
{
	*d = (struct sim_disk){ .m = m, .bus_bps = bus_bps, .phase_ns = phase_ns };
}

static unsigned zone_of(const struct cw_model *m, uint64_t off)
{
	unsigned lo = 0, hi = m->n_zones - 1;

	while (lo < hi) {
		unsigned mid = (lo + hi + 1) / 2;

		if (m->zone[mid].start_bytes <= off)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

static int64_t div_up(unsigned __int128 n, uint64_t d)
{
	return (int64_t)((n + d - 1) / d);
}

int64_t sim_disk_service(struct sim_disk *d, int64_t now, uint64_t off, uint64_t bytes)
{
	const struct cw_model *m = d->m;
	uint64_t dist = off > d->head_bytes ? off - d->head_bytes : d->head_bytes - off;
	uint32_t rot_ppm = 0;
	int64_t t;

	if (m->rotation_ns > 0) {
		/* where the platter is when the head arrives, and how far the
		 * first sector still has to turn */
		const struct cw_model_zone *zz = &m->zone[zone_of(m, off)];
		uint64_t track = (uint64_t)(((unsigned __int128)zz->rate_bps * (uint64_t)m->rotation_ns) /
					    (uint64_t)CW_NS_PER_S);
		int64_t angle, under, lat;

		if (track == 0)
			track = 1;
		angle = (int64_t)(((unsigned __int128)((off - zz->start_bytes) % track) *
				   (uint64_t)m->rotation_ns) / track);
		under = (now + m->overhead_ns + cw_model_seek_ns(m, dist) + d->phase_ns) %
			m->rotation_ns;
		lat = angle - under;
		if (lat < 0)
			lat += m->rotation_ns;
		rot_ppm = (uint32_t)(((unsigned __int128)lat * 1000000 + (uint64_t)m->rotation_ns - 1) /
				     (uint64_t)m->rotation_ns);
		if (rot_ppm > 1000000)
			rot_ppm = 1000000;
	}
	/* overhead, seek, that part of a revolution and the transfer: the
	 * model's own arithmetic (cw_model_access_ns) */
	if (cw_model_access_ns(m, d->head_bytes, off, bytes, rot_ppm, &t) < 0)
		t = INT64_MAX / 4;	/* the engine never asks past the disk */
	if (d->bus_bps) {
		int64_t bus = div_up((unsigned __int128)bytes * (uint64_t)CW_NS_PER_S, d->bus_bps);
		int64_t media;

		/* the media transfer inside t, at the rate the model used */
		if (cw_model_access_ns(m, off, off, bytes, 0, &media) == 0) {
			media -= m->overhead_ns + cw_model_seek_ns(m, 0);
			if (bus > media)
				t += bus - media;
		}
	}
	d->head_bytes = off + bytes;
	return t;
}
