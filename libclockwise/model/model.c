/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The disk service-time model: Bosch & Mullender, section 3.1.  "The
 * service time for a transfer from a dynamic partition is built up from
 * three components: the worst-case seek time, the worst-case data service
 * time and an extra rotational delay."
 *
 * Invariant: cw_model_service_ns never returns less than the sum of those
 * three for the range asked about (plus overhead and margin), so a model
 * whose curve and rates are themselves worst cases yields a sound C.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/units.h>

#include "model/model-internal.h"
#include "common/util.h"

#define MECH_WRITE_MAX_PPM (UINT32_C(1000) * 1000000)	/* a write at most 1000 reads */
#define MECH_GC_PAUSE_MAX_NS (100 * CW_NS_PER_S)
#define MECH_MAX_BYTES (UINT64_C(1) << 50)

static int why_set(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int why_set(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (why && len) {
		va_start(ap, fmt);
		vsnprintf(why, len, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* The mechanics' settings in range, and the SSD's only on an SSD. */
static int mech_check(const struct cw_model *m, char *why, size_t len)
{
	if ((m->channels || m->stripe_bytes || m->write_ppm || m->gc_every_bytes ||
	     m->gc_pause_ns) && m->tier != CW_TIER_SSD)
		return why_set(why, len, "channels, stripe, write and gc are an SSD's settings, "
			       "and this model's tier is %s", m->tier == CW_TIER_HDD ? "hdd" : "rbd");
	if (m->channels > CW_MODEL_MAX_CHANNELS)
		return why_set(why, len, "channels=%u: expected 1 to %d", m->channels,
			       CW_MODEL_MAX_CHANNELS);
	if (m->stripe_bytes > MECH_MAX_BYTES || m->gc_every_bytes > MECH_MAX_BYTES ||
	    m->bus_bps > MECH_MAX_BYTES)
		return why_set(why, len, "a size or rate beyond 1 PiB");
	if (m->write_ppm > MECH_WRITE_MAX_PPM)
		return why_set(why, len, "write: a write costs at most 1000 reads");
	if (!m->gc_every_bytes != !m->gc_pause_ns || m->gc_pause_ns < 0 ||
	    m->gc_pause_ns > MECH_GC_PAUSE_MAX_NS)
		return why_set(why, len, "gc: expected SIZE/DURATION, both above 0 and the pause at "
			       "most 100 s");
	return 0;
}

int cw_model_validate(const struct cw_model *m)
{
	size_t nl;

	if (!m)
		return -EINVAL;
	nl = strnlen(m->name, sizeof(m->name));
	if (nl == 0 || nl == sizeof(m->name))
		return -EINVAL;
	for (size_t i = 0; i < nl; i++) {
		char c = m->name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return -EINVAL;
	}
	if (m->tier != CW_TIER_HDD && m->tier != CW_TIER_SSD && m->tier != CW_TIER_RBD)
		return -EINVAL;
	if (m->capacity_bytes == 0 || m->capacity_bytes > (UINT64_C(1) << 62) ||
	    m->rotation_ns < 0 || m->overhead_ns < 0 || m->margin_ns < 0 ||
	    m->rotation_ns > CW_NS_PER_S || m->overhead_ns > CW_NS_PER_S ||
	    m->margin_ns > CW_NS_PER_S || m->margin_ppm > 10 * 1000000)
		return -EINVAL;
	if (m->n_seek < 1 || m->n_seek > CW_MODEL_MAX_SEEK || m->seek[0].distance_bytes != 0)
		return -EINVAL;
	for (unsigned i = 0; i < m->n_seek; i++) {
		if (m->seek[i].time_ns < 0 || m->seek[i].time_ns > CW_NS_PER_S)
			return -EINVAL;
		if (i > 0 && (m->seek[i].distance_bytes <= m->seek[i - 1].distance_bytes ||
			      m->seek[i].time_ns < m->seek[i - 1].time_ns))
			return -EINVAL;
	}
	if (m->n_zones < 1 || m->n_zones > CW_MODEL_MAX_ZONES || m->zone[0].start_bytes != 0 ||
	    m->zone[m->n_zones - 1].end_bytes != m->capacity_bytes)
		return -EINVAL;
	for (unsigned i = 0; i < m->n_zones; i++) {
		const struct cw_model_zone *z = &m->zone[i];

		if (z->end_bytes <= z->start_bytes || z->rate_bps == 0 ||
		    z->rate_bps > (UINT64_C(1) << 40))
			return -EINVAL;
		if (i > 0 && z->start_bytes != m->zone[i - 1].end_bytes)
			return -EINVAL;
	}
	if (m->n_bsizes > CW_MODEL_MAX_BSIZES ||
	    (m->tail_permille && (m->tail_permille < 500 || m->tail_permille > 1000)))
		return -EINVAL;
	for (unsigned i = 0; i < m->n_bsizes; i++)
		if (m->bsize[i].bytes == 0 || m->bsize[i].worst_ns <= 0 ||
		    m->bsize[i].worst_ns > 100 * CW_NS_PER_S ||
		    (i > 0 && m->bsize[i].bytes <= m->bsize[i - 1].bytes))
			return -EINVAL;
	return mech_check(m, NULL, 0);
}

int64_t cw_model_seek_ns(const struct cw_model *m, uint64_t dist)
{
	unsigned i;

	for (i = 1; i < m->n_seek; i++)
		if (dist < m->seek[i].distance_bytes)
			break;
	if (i == m->n_seek)
		return m->seek[m->n_seek - 1].time_ns;
	/* linear between point i-1 and point i, rounded up */
	const struct cw_model_seek *a = &m->seek[i - 1], *b = &m->seek[i];
	unsigned __int128 num = (unsigned __int128)(dist - a->distance_bytes) *
				(uint64_t)(b->time_ns - a->time_ns);
	uint64_t span = b->distance_bytes - a->distance_bytes;

	return a->time_ns + (int64_t)((num + span - 1) / span);
}

/* The slowest rate among the zones [lo, hi) touches. */
static uint64_t slowest_rate(const struct cw_model *m, uint64_t lo, uint64_t hi)
{
	uint64_t rate = UINT64_MAX;

	for (unsigned i = 0; i < m->n_zones; i++)
		if (m->zone[i].start_bytes < hi && lo < m->zone[i].end_bytes)
			rate = CW_MIN(rate, m->zone[i].rate_bps);
	return rate;
}

static unsigned __int128 transfer_ns(uint64_t bytes, uint64_t rate)
{
	unsigned __int128 t = (unsigned __int128)bytes * CW_NS_PER_S;

	return (t + rate - 1) / rate;
}

int cw_model_access_ns(const struct cw_model *m, uint64_t head, uint64_t off, uint64_t bytes,
		       uint32_t rot_ppm, int64_t *ret_ns)
{
	unsigned __int128 t;

	if (!m || !ret_ns || bytes == 0 || rot_ppm > 1000000 || off >= m->capacity_bytes ||
	    bytes > m->capacity_bytes - off)
		return -EINVAL;
	t = transfer_ns(bytes, slowest_rate(m, off, off + bytes));
	t += (uint64_t)m->overhead_ns + (uint64_t)cw_model_seek_ns(m, head > off ? head - off : off - head);
	t += (unsigned __int128)(uint64_t)m->rotation_ns * rot_ppm / 1000000;
	if (t > (unsigned __int128)INT64_MAX / 4)
		return -ERANGE;
	*ret_ns = (int64_t)t;
	return 0;
}

int cw_model_mean_ns(const struct cw_model *m, uint64_t bytes, int64_t *ret_ns)
{
	unsigned __int128 t;

	if (!m || !ret_ns || bytes == 0 || bytes > m->capacity_bytes)
		return -EINVAL;
	t = transfer_ns(bytes, slowest_rate(m, 0, m->capacity_bytes));
	t += (uint64_t)m->overhead_ns + (uint64_t)cw_model_seek_ns(m, m->capacity_bytes / 3);
	t += (uint64_t)m->rotation_ns / 2;
	if (t > (unsigned __int128)INT64_MAX / 4)
		return -ERANGE;
	*ret_ns = (int64_t)t;
	return 0;
}

int cw_model_service_ns(const struct cw_model *m, uint64_t lo, uint64_t hi, uint64_t bytes,
			int64_t *ret_ns)
{
	uint64_t far;
	unsigned __int128 t;

	if (!m || !ret_ns || bytes == 0)
		return -EINVAL;
	if (hi == 0)
		hi = m->capacity_bytes;
	if (lo >= hi || hi > m->capacity_bytes)
		return -EINVAL;
	/* The head may be anywhere (best-effort work goes everywhere): the
	 * longest seek into [lo, hi) starts at the far end of the disk. */
	far = CW_MAX(hi, m->capacity_bytes - lo);
	t = transfer_ns(bytes, slowest_rate(m, lo, hi));
	t += (uint64_t)m->overhead_ns + (uint64_t)cw_model_seek_ns(m, far) +
	     (uint64_t)m->rotation_ns;
	/* An SSD's write costs write_ppm of the read (its mechanics,
	 * cw_model_disk_ssd_finish): the worst request of this size is a
	 * write.  Charged as a read, every write on an emulated SSD took
	 * twice its C. */
	if (m->tier == CW_TIER_SSD) {
		uint32_t w = m->write_ppm ? m->write_ppm : MODEL_WRITE_PPM_DEFAULT;

		if (w > 1000000)
			t = (t * w + 999999) / 1000000;
	}
	for (unsigned i = 0; i < m->n_bsizes; i++)
		if (m->bsize[i].bytes == bytes && (unsigned __int128)m->bsize[i].worst_ns > t)
			t = (uint64_t)m->bsize[i].worst_ns;
	t += (t * m->margin_ppm + 999999) / 1000000;
	t += (uint64_t)m->margin_ns;
	if (t > (unsigned __int128)INT64_MAX / 4)
		return -ERANGE;
	*ret_ns = (int64_t)t;
	return 0;
}

/* ---- presets ----------------------------------------------------------- */

static void zones_linear(struct cw_model *m, unsigned n, uint64_t outer_bps, uint64_t inner_bps)
{
	m->n_zones = n;
	for (unsigned i = 0; i < n; i++) {
		m->zone[i].start_bytes = m->capacity_bytes / n * i;
		m->zone[i].end_bytes = i + 1 == n ? m->capacity_bytes : m->capacity_bytes / n * (i + 1);
		m->zone[i].rate_bps = n == 1 ? outer_bps :
				      outer_bps - (outer_bps - inner_bps) * i / (n - 1);
	}
}

static void seek_curve(struct cw_model *m, const struct cw_model_seek *pts, unsigned n)
{
	m->n_seek = n;
	memcpy(m->seek, pts, n * sizeof(*pts));
}

static const char *const preset_names[] = { "atlas2", "hdd7200", "ssd", "rbd", NULL };

const char *const *cw_model_preset_names(void)
{
	return preset_names;
}

int cw_model_preset(const char *name, struct cw_model *ret)
{
	struct cw_model m = { .tier = CW_TIER_HDD };

	if (!name || !ret)
		return -EINVAL;
	if (strcmp(name, "atlas2") == 0) {
		/* Quantum Atlas-II (1997): 9.1 GB, 7200 rpm, 6.9 ms average
		 * and ~17 ms full-stroke seek, 11 MB/s outer to 7 MB/s inner;
		 * 1 MB in the outer zone worst case about 120 ms, as the
		 * paper's example says. */
		static const struct cw_model_seek s[] = {
			{ 0, 0 }, { 100000, 1000000 }, { 10000000, 2500000 },
			{ 100000000, 4000000 }, { 1000000000, 8000000 },
			{ 3000000000, 12000000 }, { 9100000000, 17000000 },
		};
		m.capacity_bytes = UINT64_C(9100000000);
		m.rotation_ns = 8333334;
		m.overhead_ns = 500000;
		seek_curve(&m, s, CW_ARRAY_SIZE(s));
		zones_linear(&m, 8, 11000000, 7000000);
	} else if (strcmp(name, "hdd7200") == 0) {
		static const struct cw_model_seek s[] = {
			{ 0, 0 }, { 1000000, 800000 }, { 1000000000, 3000000 },
			{ 100000000000, 6000000 }, { 1000000000000, 10000000 },
			{ 4000000000000, 18000000 },
		};
		m.capacity_bytes = UINT64_C(4000000000000);
		m.rotation_ns = 8333334;
		m.overhead_ns = 100000;
		seek_curve(&m, s, CW_ARRAY_SIZE(s));
		zones_linear(&m, 16, 220000000, 110000000);
	} else if (strcmp(name, "ssd") == 0) {
		static const struct cw_model_seek s[] = { { 0, 80000 } };
		m.tier = CW_TIER_SSD;
		m.capacity_bytes = UINT64_C(1000000000000);
		m.rotation_ns = 0;
		m.overhead_ns = 20000;
		seek_curve(&m, s, CW_ARRAY_SIZE(s));
		zones_linear(&m, 1, 500000000, 500000000);
	} else if (strcmp(name, "rbd") == 0) {
		/* An image on a cluster not yet calibrated: no head, a
		 * round trip to replicated OSDs per request; a guess meant to
		 * be replaced by cwctl disk calibrate. */
		static const struct cw_model_seek s[] = { { 0, 0 } };
		m.tier = CW_TIER_RBD;
		m.capacity_bytes = UINT64_C(1000000000000);
		m.overhead_ns = 4000000;
		seek_curve(&m, s, CW_ARRAY_SIZE(s));
		zones_linear(&m, 1, 100000000, 100000000);
	} else
		return -ENOENT;
	snprintf(m.name, sizeof(m.name), "%s", name);
	*ret = m;
	return 0;
}

static int parse_model(const char *text, struct cw_model *ret, char *why, size_t len);
static int mech_set(struct cw_model *m, const char *key, size_t kl, const char *val, size_t vl,
		    unsigned *seen, char *why, size_t len);

int cw_model_from_string_why(const char *s, struct cw_model *ret, char *why, size_t len)
{
	struct cw_model m;
	char name[CW_MODEL_NAME_MAX];
	size_t nl;
	unsigned seen = 0;
	int r;

	if (why && len)
		why[0] = '\0';
	if (!s || !ret)
		return why_set(why, len, "no model");
	if (strncmp(s, "cwmodel1", 8) == 0) {
		r = parse_model(s, ret, why, len);
		if (r < 0 && why && len && !why[0])
			why_set(why, len, "not a valid model string; expected \"cwmodel1 name=... "
				"tier=... cap=... rot=... ovh=... seek=... zones=...\" as calibration "
				"stores it");
		return r;
	}
	/* a preset, and settings of its mechanics */
	nl = strcspn(s, " ");
	if (nl == 0 || nl >= sizeof(name) || (memcpy(name, s, nl), name[nl] = '\0',
					       cw_model_preset(name, &m) < 0)) {
		char names[128] = "";
		size_t k = 0;

		for (const char *const *n = cw_model_preset_names(); *n && k < sizeof(names); n++)
			k += (size_t)snprintf(names + k, sizeof(names) - k, "%s%s", k ? ", " : "", *n);
		why_set(why, len, "\"%.*s\" is not a known model; expected a preset (%s), perhaps "
			"with settings (channels=, stripe=, write=, gc=, bus=), or a model string "
			"\"cwmodel1 ...\" as calibration stores it", (int)CW_MIN(nl, (size_t)64), s,
			names);
		return -ENOENT;
	}
	for (s += nl; *s;) {
		const char *key, *eq;
		size_t vl;

		s += strspn(s, " ");
		if (!*s)
			break;
		key = s;
		vl = strcspn(s, " ");
		eq = memchr(s, '=', vl);
		if (!eq)
			return why_set(why, len, "\"%.*s\": expected SETTING=VALUE", (int)CW_MIN(vl,
				       (size_t)64), s);
		r = mech_set(&m, key, (size_t)(eq - key), eq + 1, vl - (size_t)(eq - key) - 1,
			     &seen, why, len);
		if (r > 0)
			return why_set(why, len, "%.*s: not a setting of a preset; expected channels, "
				       "stripe, write, gc or bus", (int)CW_MIN((size_t)(eq - key),
				       (size_t)32), key);
		if (r < 0)
			return r;
		s += vl;
	}
	r = mech_check(&m, why, len);
	if (r < 0)
		return r;
	*ret = m;
	return 0;
}

int cw_model_from_string(const char *s, struct cw_model *ret)
{
	return cw_model_from_string_why(s, ret, NULL, 0);
}

/* ---- text form --------------------------------------------------------- */

/* Appends to buf like snprintf, keeping the total needed in *pos. */
static void put(char *buf, size_t len, size_t *pos, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void put(char *buf, size_t len, size_t *pos, const char *fmt, ...)
{
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(*pos < len ? buf + *pos : NULL, *pos < len ? len - *pos : 0, fmt, ap);
	va_end(ap);
	if (k > 0)
		*pos += (size_t)k;
}

int cw_model_format(const struct cw_model *m, char *buf, size_t len)
{
	size_t pos = 0;

	if (cw_model_validate(m) < 0 || (len && !buf))
		return -EINVAL;
	if (len)
		buf[0] = '\0';
	put(buf, len, &pos, "cwmodel1 name=%s tier=%s cap=%" PRIu64 " rot=%" PRId64 " ovh=%" PRId64
	    " mppm=%" PRIu32 " mns=%" PRId64 " seek=", m->name,
	    m->tier == CW_TIER_SSD ? "ssd" : m->tier == CW_TIER_RBD ? "rbd" : "hdd",
	    m->capacity_bytes, m->rotation_ns,
	    m->overhead_ns, m->margin_ppm, m->margin_ns);
	for (unsigned i = 0; i < m->n_seek; i++)
		put(buf, len, &pos, "%s%" PRIu64 ":%" PRId64, i ? "," : "",
		    m->seek[i].distance_bytes, m->seek[i].time_ns);
	put(buf, len, &pos, " zones=");
	for (unsigned i = 0; i < m->n_zones; i++)
		put(buf, len, &pos, "%s%" PRIu64 ":%" PRIu64, i ? "," : "", m->zone[i].end_bytes,
		    m->zone[i].rate_bps);
	if (m->n_bsizes) {
		put(buf, len, &pos, " bs=");
		for (unsigned i = 0; i < m->n_bsizes; i++)
			put(buf, len, &pos, "%s%" PRIu64 ":%" PRId64, i ? "," : "",
			    m->bsize[i].bytes, m->bsize[i].worst_ns);
	}
	if (m->tail_permille)
		put(buf, len, &pos, " tail=%u", m->tail_permille);
	/* the mechanics, where set: a model without them reads as before */
	if (m->channels)
		put(buf, len, &pos, " channels=%u", m->channels);
	if (m->stripe_bytes)
		put(buf, len, &pos, " stripe=%" PRIu64, m->stripe_bytes);
	if (m->write_ppm)
		put(buf, len, &pos, " write=%" PRIu32 ".%06" PRIu32, m->write_ppm / 1000000,
		    m->write_ppm % 1000000);
	if (m->gc_every_bytes)
		put(buf, len, &pos, " gc=%" PRIu64 "/%" PRId64 "ns", m->gc_every_bytes,
		    m->gc_pause_ns);
	if (m->bus_bps)
		put(buf, len, &pos, " bus=%" PRIu64, m->bus_bps);
	return pos > INT32_MAX ? -EINVAL : (int)pos;
}

static int parse_u64(const char *s, const char **end, uint64_t *ret)
{
	char *e;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &e, 10);
	if (errno)
		return -EINVAL;
	*end = e;
	*ret = v;
	return 0;
}

static int parse_i64(const char *s, const char **end, int64_t *ret)
{
	uint64_t v;

	if (parse_u64(s, end, &v) < 0 || v > INT64_MAX)
		return -EINVAL;
	*ret = (int64_t)v;
	return 0;
}

/* "a:b,a:b,..." into at most max pairs; the pair ends at ' ' or '\0'. */
static int parse_pairs(const char *s, const char **end, uint64_t (*pairs)[2], unsigned max,
		       unsigned *ret_n)
{
	unsigned n = 0;

	for (;;) {
		if (n == max || parse_u64(s, &s, &pairs[n][0]) < 0 || *s++ != ':' ||
		    parse_u64(s, &s, &pairs[n][1]) < 0)
			return -EINVAL;
		n++;
		if (*s != ',')
			break;
		s++;
	}
	*end = s;
	*ret_n = n;
	return 0;
}

/* "X" or "X.YYYYYY" (at most six decimals) in millionths. */
static int parse_ppm(const char *s, uint64_t *ret)
{
	uint64_t whole = 0, frac = 0, scale = 1000000;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		whole = whole * 10 + (uint64_t)(*s - '0');
		if (whole > 1000000)
			return -EINVAL;
	}
	if (*s == '.') {
		if (s[1] < '0' || s[1] > '9')
			return -EINVAL;
		for (s++; *s >= '0' && *s <= '9'; s++) {
			if (scale == 1)
				return -EINVAL;	/* more than six decimals */
			scale /= 10;
			frac += (uint64_t)(*s - '0') * scale;
		}
	}
	if (*s)
		return -EINVAL;
	*ret = whole * 1000000 + frac;
	return 0;
}

/* One setting of the mechanics, key=val (neither NUL-terminated): 0, 1
 * when key is none of them, -EINVAL with why. */
static int mech_set(struct cw_model *m, const char *key, size_t kl, const char *val, size_t vl,
		    unsigned *seen, char *why, size_t len)
{
	static const char *const keys[] = { "channels", "stripe", "write", "gc", "bus" };
	char v[80];
	unsigned k;
	uint64_t u;
	int64_t t;

	for (k = 0; k < CW_ARRAY_SIZE(keys); k++)
		if (kl == strlen(keys[k]) && strncmp(key, keys[k], kl) == 0)
			break;
	if (k == CW_ARRAY_SIZE(keys))
		return 1;
	if (*seen & 1u << k)
		return why_set(why, len, "%s is set twice", keys[k]);
	*seen |= 1u << k;
	if (vl == 0 || vl >= sizeof(v))
		return why_set(why, len, "%s: no value, or one too long", keys[k]);
	memcpy(v, val, vl);
	v[vl] = '\0';
	switch (k) {
	case 0:
		if (parse_u64(v, &val, &u) < 0 || *val || u < 1 || u > CW_MODEL_MAX_CHANNELS)
			return why_set(why, len, "channels=%s: expected 1 to %d", v,
				       CW_MODEL_MAX_CHANNELS);
		m->channels = (unsigned)u;
		return 0;
	case 1:
		if (cw_units_parse_size(v, &u) < 0 || u == 0 || u > MECH_MAX_BYTES)
			return why_set(why, len, "stripe=%s: expected %s, above 0", v,
				       CW_UNITS_SIZE_HELP);
		m->stripe_bytes = u;
		return 0;
	case 2:
		if (parse_ppm(v, &u) < 0 || u < 1000 || u > MECH_WRITE_MAX_PPM)
			return why_set(why, len, "write=%s: expected what a write costs in reads, "
				       "0.001 to 1000 (2: twice a read)", v);
		m->write_ppm = (uint32_t)u;
		return 0;
	case 3: {
		char *slash = strchr(v, '/');

		if (!slash)
			return why_set(why, len, "gc=%s: expected SIZE/DURATION, a pause of DURATION "
				       "after every SIZE written (1G/50ms)", v);
		*slash = '\0';
		if (cw_units_parse_size(v, &u) < 0 || u == 0 || u > MECH_MAX_BYTES)
			return why_set(why, len, "gc=%s/...: expected %s, above 0", v,
				       CW_UNITS_SIZE_HELP);
		if (cw_units_parse_duration(slash + 1, CW_UNITS_S, &t) < 0 || t <= 0 ||
		    t > MECH_GC_PAUSE_MAX_NS)
			return why_set(why, len, "gc=.../%s: expected %s, above 0 and at most 100 s",
				       slash + 1, CW_UNITS_DURATION_HELP);
		m->gc_every_bytes = u;
		m->gc_pause_ns = t;
		return 0;
	}
	default:
		if (cw_units_parse_rate(v, &u) < 0 || u > MECH_MAX_BYTES)
			return why_set(why, len, "bus=%s: expected %s", v, CW_UNITS_RATE_HELP);
		m->bus_bps = u;
		return 0;
	}
}

int cw_model_parse(const char *text, struct cw_model *ret)
{
	return parse_model(text, ret, NULL, 0);
}

static int parse_model(const char *text, struct cw_model *ret, char *why, size_t len)
{
	struct cw_model m = { 0 };
	unsigned mech_seen = 0;
	int r;
	uint64_t pairs[CW_MODEL_MAX_SEEK + CW_MODEL_MAX_ZONES][2];
	unsigned seen = 0, n;
	const char *s = text;
	uint64_t u;

	enum { K_NAME = 1, K_TIER = 2, K_CAP = 4, K_ROT = 8, K_OVH = 16, K_SEEK = 32,
	       K_ZONES = 64, K_MPPM = 128, K_MNS = 256, K_BS = 512, K_TAIL = 1024 };
	const unsigned required = K_NAME | K_TIER | K_CAP | K_ROT | K_OVH | K_SEEK | K_ZONES;

	if (!text || !ret || strncmp(s, "cwmodel1", 8) != 0)
		return -EINVAL;
	s += 8;
	while (*s == ' ') {
		const char *key, *eq;
		size_t kl;
		unsigned bit;

		while (*s == ' ')
			s++;
		if (!*s)
			break;
		key = s;
		eq = strchr(s, '=');
		if (!eq)
			return -EINVAL;
		kl = (size_t)(eq - key);
		s = eq + 1;
#define KEY(k) (kl == strlen(k) && strncmp(key, k, kl) == 0)
		if (KEY("name")) {
			size_t vl = strcspn(s, " ");

			if (vl == 0 || vl >= sizeof(m.name))
				return -EINVAL;
			memcpy(m.name, s, vl);
			s += vl;
			bit = K_NAME;
		} else if (KEY("tier")) {
			if (strncmp(s, "hdd", 3) == 0)
				m.tier = CW_TIER_HDD;
			else if (strncmp(s, "ssd", 3) == 0)
				m.tier = CW_TIER_SSD;
			else if (strncmp(s, "rbd", 3) == 0)
				m.tier = CW_TIER_RBD;
			else
				return -EINVAL;
			s += 3;
			bit = K_TIER;
		} else if (KEY("cap")) {
			if (parse_u64(s, &s, &m.capacity_bytes) < 0)
				return -EINVAL;
			bit = K_CAP;
		} else if (KEY("rot")) {
			if (parse_i64(s, &s, &m.rotation_ns) < 0)
				return -EINVAL;
			bit = K_ROT;
		} else if (KEY("ovh")) {
			if (parse_i64(s, &s, &m.overhead_ns) < 0)
				return -EINVAL;
			bit = K_OVH;
		} else if (KEY("mppm")) {
			if (parse_u64(s, &s, &u) < 0 || u > UINT32_MAX)
				return -EINVAL;
			m.margin_ppm = (uint32_t)u;
			bit = K_MPPM;
		} else if (KEY("mns")) {
			if (parse_i64(s, &s, &m.margin_ns) < 0)
				return -EINVAL;
			bit = K_MNS;
		} else if (KEY("seek")) {
			if (parse_pairs(s, &s, pairs, CW_MODEL_MAX_SEEK, &n) < 0)
				return -EINVAL;
			m.n_seek = n;
			for (unsigned i = 0; i < n; i++) {
				if (pairs[i][1] > INT64_MAX)
					return -EINVAL;
				m.seek[i] = (struct cw_model_seek){ pairs[i][0], (int64_t)pairs[i][1] };
			}
			bit = K_SEEK;
		} else if (KEY("zones")) {
			if (parse_pairs(s, &s, pairs, CW_MODEL_MAX_ZONES, &n) < 0)
				return -EINVAL;
			m.n_zones = n;
			for (unsigned i = 0; i < n; i++)
				m.zone[i] = (struct cw_model_zone){
					.start_bytes = i ? pairs[i - 1][0] : 0,
					.end_bytes = pairs[i][0], .rate_bps = pairs[i][1] };
			bit = K_ZONES;
		} else if (KEY("bs")) {
			if (parse_pairs(s, &s, pairs, CW_MODEL_MAX_BSIZES, &n) < 0)
				return -EINVAL;
			m.n_bsizes = n;
			for (unsigned i = 0; i < n; i++) {
				if (pairs[i][1] > INT64_MAX)
					return -EINVAL;
				m.bsize[i] = (struct cw_model_bsize){ pairs[i][0], (int64_t)pairs[i][1] };
			}
			bit = K_BS;
		} else if (KEY("tail")) {
			if (parse_u64(s, &s, &u) < 0 || u == 0 || u > UINT_MAX)
				return -EINVAL;
			m.tail_permille = (unsigned)u;
			bit = K_TAIL;
		} else {
			size_t vl = strcspn(s, " ");

			r = mech_set(&m, key, kl, s, vl, &mech_seen, why, len);
			if (r > 0)	/* unknown key: a newer format, not half read */
				return why_set(why, len, "unknown key %.*s", (int)CW_MIN(kl, (size_t)32),
					       key);
			if (r < 0)
				return r;
			s += vl;
			continue;
		}
#undef KEY
		if (seen & bit)
			return -EINVAL;
		seen |= bit;
		if (*s && *s != ' ')
			return -EINVAL;
	}
	if (*s || (seen & required) != required || mech_check(&m, why, len) < 0 ||
	    cw_model_validate(&m) < 0)
		return -EINVAL;
	*ret = m;
	return 0;
}
