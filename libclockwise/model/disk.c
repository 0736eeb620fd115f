/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Disk mechanics on top of the service-time model (Bosch & Mullender,
 * section 4: "The simulated disks simulates heads, tracks, sectors,
 * rotational speed and head positions.  The SCSI part simulates data
 * transfers over the SCSI bus."), shared by the simulator and the
 * emulating I/O engine so that both run one implementation.
 *
 * The arithmetic of one access (overhead, seek by distance, a part of a
 * revolution, transfer) is cw_model_access_ns; this file adds where the
 * head and the platter are, the bus, and an SSD's channels.
 *
 * Invariant: for an HDD request inside [lo, hi) the time computed here is
 * at most cw_model_service_ns(m, lo, hi, bytes) whenever the bus is at
 * least as fast as the zones: cw_model_access_ns promises that for any
 * head position and any part of a revolution up to a whole one.  A bus
 * slower than the media can break this; the simulator counts such
 * requests as model overruns instead of hiding them.  An SSD read alone on
 * its channel takes exactly cw_model_access_ns(m, off, off, bytes, 0).
 *
 * Track and head switches and the disk cache are not modelled (the paper
 * does not simulate the cache either): a request for the sectors right
 * after the last one, issued once the head has passed them, waits nearly
 * a revolution, as on a disk without read-ahead.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "model/model-internal.h"
#include "common/util.h"

void cw_model_disk_opts_init(struct cw_model_disk_opts *o)
{
	*o = (struct cw_model_disk_opts){
		.size = sizeof(*o),
		.channels = 4,
		.stripe_bytes = 128 << 10,
		.write_ppm = MODEL_WRITE_PPM_DEFAULT,
	};
}

void cw_model_disk_opts_of(const struct cw_model *m, struct cw_model_disk_opts *o)
{
	cw_model_disk_opts_init(o);
	if (m->channels)
		o->channels = m->channels;
	if (m->stripe_bytes)
		o->stripe_bytes = m->stripe_bytes;
	if (m->write_ppm)
		o->write_ppm = m->write_ppm;
	o->gc_every_bytes = m->gc_every_bytes;
	o->gc_pause_ns = m->gc_pause_ns;
	o->bus_bps = m->bus_bps;
}

int cw_model_disk_init(struct cw_model_disk *d, const struct cw_model *m,
		       const struct cw_model_disk_opts *opts)
{
	struct cw_model_disk_opts o;

	if (!d || cw_model_validate(m) < 0)
		return -EINVAL;
	if (opts) {
		if (opts->size < sizeof(o))
			return -EINVAL;
		o = *opts;
	} else
		cw_model_disk_opts_init(&o);
	if (o.channels < 1 || o.channels > CW_MODEL_MAX_CHANNELS || o.stripe_bytes == 0 ||
	    o.write_ppm == 0 || o.phase_ns < 0 || o.phase_ns > m->rotation_ns ||
	    o.gc_pause_ns < 0 || o.gc_pause_ns > 100 * CW_NS_PER_S)
		return -EINVAL;
	memset(d, 0, sizeof(*d));
	d->m = m;
	d->o = o;
	return 0;
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

/* Millionths of a revolution the platter still has to turn, when the head
 * arrives over off's track, before off's first sector is under it. */
static uint32_t rot_wait_ppm(const struct cw_model_disk *d, int64_t start, uint64_t off,
			     uint64_t dist)
{
	const struct cw_model *m = d->m;
	const struct cw_model_zone *zz = &m->zone[zone_of(m, off)];
	uint64_t track = (uint64_t)(((unsigned __int128)zz->rate_bps * (uint64_t)m->rotation_ns) /
				    (uint64_t)CW_NS_PER_S);
	int64_t angle, under, lat;
	uint64_t ppm;

	if (track == 0)
		track = 1;
	angle = (int64_t)(((unsigned __int128)((off - zz->start_bytes) % track) *
			   (uint64_t)m->rotation_ns) / track);
	under = (start + m->overhead_ns + cw_model_seek_ns(m, dist) + d->o.phase_ns) %
		m->rotation_ns;
	if (under < 0)
		under += m->rotation_ns;
	lat = angle - under;
	if (lat < 0)
		lat += m->rotation_ns;
	ppm = ((unsigned __int128)lat * 1000000 + (uint64_t)m->rotation_ns - 1) /
	      (uint64_t)m->rotation_ns;
	return (uint32_t)CW_MIN(ppm, (uint64_t)1000000);
}

int64_t cw_model_disk_peek(const struct cw_model_disk *d, int64_t start, uint64_t off,
			   uint64_t bytes)
{
	const struct cw_model *m = d->m;
	uint64_t dist = off > d->head_bytes ? off - d->head_bytes : d->head_bytes - off;
	uint32_t rot_ppm = m->rotation_ns > 0 ? rot_wait_ppm(d, start, off, dist) : 0;
	int64_t t, media;

	/* overhead, seek, that part of a revolution and the transfer: the
	 * model's own arithmetic */
	if (cw_model_access_ns(m, d->head_bytes, off, bytes, rot_ppm, &t) < 0)
		return INT64_MAX / 4;	/* callers never ask past the disk */
	if (d->o.bus_bps) {
		int64_t bus = div_up((unsigned __int128)bytes * (uint64_t)CW_NS_PER_S, d->o.bus_bps);

		/* the media transfer inside t, at the rate the model used */
		if (cw_model_access_ns(m, off, off, bytes, 0, &media) == 0) {
			media -= m->overhead_ns + cw_model_seek_ns(m, 0);
			if (bus > media)
				t += bus - media;
		}
	}
	return t;
}

int64_t cw_model_disk_serve(struct cw_model_disk *d, int64_t start, uint64_t off,
			    uint64_t bytes)
{
	int64_t t = cw_model_disk_peek(d, start, off, bytes);

	d->head_bytes = off + bytes;
	return t;
}

int64_t cw_model_disk_ssd_finish(struct cw_model_disk *d, int64_t arrival, uint64_t off,
				 uint64_t bytes, bool write)
{
	unsigned ch = (unsigned)((off / d->o.stripe_bytes) % d->o.channels);
	int64_t t, start, end;

	if (cw_model_access_ns(d->m, off, off, bytes, 0, &t) < 0)
		t = INT64_MAX / 8;
	if (write)
		t = (int64_t)(((unsigned __int128)t * d->o.write_ppm + 999999) / 1000000);
	start = CW_MAX(arrival, d->free_ns[ch]);
	end = start + t;
	if (d->o.bus_bps) {
		/* the bytes cross the bus one request at a time: no sooner
		 * than the bus carries them after what it carries already */
		int64_t bus = div_up((unsigned __int128)bytes * (uint64_t)CW_NS_PER_S, d->o.bus_bps);

		end = CW_MAX(end, CW_MAX(arrival, d->bus_free_ns) + bus);
		d->bus_free_ns = end;
	}
	d->free_ns[ch] = end;
	if (write && d->o.gc_every_bytes) {
		d->written_bytes += bytes;
		if (d->written_bytes >= d->o.gc_every_bytes) {
			/* the collection starts once this write is in and
			 * holds every channel */
			d->written_bytes %= d->o.gc_every_bytes;
			for (unsigned i = 0; i < d->o.channels; i++)
				d->free_ns[i] = CW_MAX(d->free_ns[i], end) + d->o.gc_pause_ns;
		}
	}
	return end;
}
