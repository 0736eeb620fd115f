/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Disk mechanics for the simulator (Bosch & Mullender, section 4: "The
 * simulated disks simulates heads, tracks, sectors, rotational speed and
 * head positions.  The SCSI part simulates data transfers over the SCSI
 * bus."), driven by the same struct cw_model that admission uses.
 *
 * Invariant: for a request inside [lo, hi) the time computed here is at
 * most cw_model_service_ns(m, lo, hi, bytes) whenever the bus is at least
 * as fast as the zones: the seek curve is the model's and the distance is
 * at most the one the model assumes, the rotational latency is less than
 * one revolution, and each byte moves at its own zone's rate, never below
 * the slowest.  A bus slower than the media can break this; the engine
 * counts such requests as model overruns instead of hiding them.
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
	int64_t t = m->overhead_ns + cw_model_seek_ns(m, dist);
	int64_t media = 0;
	unsigned z = zone_of(m, off);

	if (m->rotation_ns > 0) {
		const struct cw_model_zone *zz = &m->zone[z];
		uint64_t track = (uint64_t)(((unsigned __int128)zz->rate_bps * (uint64_t)m->rotation_ns) /
					    (uint64_t)CW_NS_PER_S);
		int64_t angle, under, lat;

		if (track == 0)
			track = 1;
		angle = (int64_t)(((unsigned __int128)((off - zz->start_bytes) % track) *
				   (uint64_t)m->rotation_ns) / track);
		under = (now + t + d->phase_ns) % m->rotation_ns;
		lat = angle - under;
		if (lat < 0)
			lat += m->rotation_ns;
		t += lat;
	}
	/* the transfer, zone by zone */
	for (uint64_t pos = off, left = bytes; left;) {
		const struct cw_model_zone *zz;
		uint64_t n;

		if (z >= m->n_zones)
			z = m->n_zones - 1;	/* past the end: the engine never asks this */
		zz = &m->zone[z];
		n = CW_MIN(left, zz->end_bytes > pos ? zz->end_bytes - pos : left);
		media += div_up((unsigned __int128)n * (uint64_t)CW_NS_PER_S, zz->rate_bps);
		pos += n;
		left -= n;
		z++;
	}
	if (d->bus_bps)
		media = CW_MAX(media, div_up((unsigned __int128)bytes * (uint64_t)CW_NS_PER_S,
					     d->bus_bps));
	d->head_bytes = off + bytes;
	return t + media;
}
