/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Best-effort load for the simulator (Bosch & Mullender, section 4.2): a
 * trace replayed at its own times, either read from a file (CSV or
 * blkparse text) or generated after the HP CELLO trace the paper used.
 *
 * The generator.  The paper's busiest twenty minutes of CELLO carry 53,752
 * requests (45 per second) of UNIX disk I/O (4 KB), with peaks of 207 per
 * second.  We draw arrivals from a two-state Markov-modulated Poisson
 * process: a calm state at half the mean rate and bursts at 90% of the
 * peak rate, with mean sojourns of be_burst_s (1 s) in a burst and as long
 * in the calm state as makes the mean come out at be_rate.  Each request goes to one
 * of the trace's disks (a BE partition); 40% continue the last request on
 * that partition sequentially, the rest land at random, 80% of them in the
 * partition's first fifth (a hot spot, as file systems have).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "sim.h"

/* ---- xoshiro256**, seeded by splitmix64 -------------------------------- */

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

void sim_rng_seed(struct sim_rng *r, uint64_t seed, uint64_t stream)
{
	uint64_t x = seed ^ (stream * UINT64_C(0xd1342543de82ef95));

	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t sim_rng_next(struct sim_rng *r)
{
	uint64_t *s = r->s, res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return res;
}

double sim_rng_unit(struct sim_rng *r)
{
	return (double)(sim_rng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t sim_rng_below(struct sim_rng *r, uint64_t n)
{
	return n ? (uint64_t)(((unsigned __int128)sim_rng_next(r) * n) >> 64) : 0;
}

static double rng_exp(struct sim_rng *r, double mean)
{
	return -mean * log(1.0 - sim_rng_unit(r));
}

/* ---- the record array -------------------------------------------------- */

static int push(struct sim_trace *t, const struct sim_be_rec *rec)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 4096;
		struct sim_be_rec *v = realloc(t->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		t->v = v;
		t->cap = cap;
	}
	t->v[t->n++] = *rec;
	return 0;
}

void sim_trace_done(struct sim_trace *t)
{
	free(t->v);
	*t = (struct sim_trace){ 0 };
}

/* Offsets from a trace land in the partition: folded modulo its size and
 * aligned down so that the request fits. */
static void fold(struct sim_be_rec *rec, uint64_t part_bytes)
{
	if (rec->bytes > part_bytes)
		rec->bytes = part_bytes;
	rec->off %= part_bytes;
	if (rec->off + rec->bytes > part_bytes)
		rec->off = part_bytes - rec->bytes;
}

/* ---- the CELLO-like generator ------------------------------------------ */

static int gen_cello(const struct sim_scenario *sc, uint64_t part_bytes, struct sim_trace *t)
{
	struct sim_rng r;
	double calm = sc->be_rate / 2, burst = sc->be_peak * 0.9, burst_s = sc->be_burst_s, calm_s;
	double now = 0, state_end, end = (double)sc->duration_ns / 1e9;
	bool in_burst = false;
	uint64_t bsz = CW_MIN(sc->be_bytes, part_bytes);
	_cleanup_free_ uint64_t *last = calloc(sc->be_partitions, sizeof(*last));

	if (!last)
		return -ENOMEM;
	sim_rng_seed(&r, sc->seed, 2);
	if (burst <= calm) {
		burst = calm = sc->be_rate;
		calm_s = 1;
	} else {
		double f = (sc->be_rate - calm) / (burst - calm);	/* time in bursts */

		calm_s = burst_s * (1 - f) / f;
	}
	for (uint32_t p = 0; p < sc->be_partitions; p++)
		last[p] = sim_rng_below(&r, part_bytes / bsz) * bsz;
	state_end = rng_exp(&r, calm_s);
	for (;;) {
		double rate = in_burst ? burst : calm;
		double next = now + rng_exp(&r, 1 / rate);
		struct sim_be_rec rec;
		uint64_t slots = part_bytes / bsz;
		int e;

		if (next >= state_end) {
			/* memoryless: restart the draw in the new state */
			now = state_end;
			in_burst = !in_burst;
			state_end = now + rng_exp(&r, in_burst ? burst_s : calm_s);
			if (now >= end)
				break;
			continue;
		}
		now = next;
		if (now >= end)
			break;
		rec.t_ns = (int64_t)(now * 1e9);
		rec.part = (uint32_t)sim_rng_below(&r, sc->be_partitions);
		rec.write = sim_rng_below(&r, 100) < sc->be_write_pct;
		rec.bytes = bsz;
		if (sim_rng_unit(&r) < 0.4 && last[rec.part] + bsz < part_bytes)
			rec.off = last[rec.part];
		else if (sim_rng_unit(&r) < 0.8)
			rec.off = sim_rng_below(&r, CW_MAX(slots / 5, 1)) * bsz;
		else
			rec.off = sim_rng_below(&r, slots) * bsz;
		last[rec.part] = rec.off + bsz;
		e = push(t, &rec);
		if (e < 0)
			return e;
	}
	return 0;
}

/* ---- readers ----------------------------------------------------------- */

static int line_err(const char *path, unsigned long lineno, const char *why)
{
	fprintf(stderr, "cwsim: %s:%lu: %s\n", path, lineno, why);
	return -EINVAL;
}

static bool parse_num(char **s, uint64_t *ret)
{
	char *end;

	if (**s < '0' || **s > '9')
		return false;
	errno = 0;
	*ret = strtoull(*s, &end, 10);
	if (errno)
		return false;
	*s = end;
	return true;
}

static bool parse_secs(char **s, int64_t *ret)
{
	char *end;
	double x;

	if ((**s < '0' || **s > '9') && **s != '.')
		return false;
	errno = 0;
	x = strtod(*s, &end);
	if (errno || !isfinite(x) || x < 0 || x > 1e9)
		return false;
	*s = end;
	*ret = (int64_t)llround(x * 1e9);
	return true;
}

static char *skip_ws(char *s)
{
	return s + strspn(s, " \t");
}

/* CSV: time (seconds), disk, offset (bytes), size (bytes), rw (R or W,
 * also read/write).  A first line naming the columns is skipped. */
static int csv_line(char *s, struct sim_be_rec *rec)
{
	uint64_t disk;
	char *rw;

	if (!parse_secs(&s, &rec->t_ns) || *(s = skip_ws(s)) != ',')
		return -EINVAL;
	s = skip_ws(s + 1);
	if (!parse_num(&s, &disk) || disk > UINT32_MAX || *(s = skip_ws(s)) != ',')
		return -EINVAL;
	s = skip_ws(s + 1);
	if (!parse_num(&s, &rec->off) || *(s = skip_ws(s)) != ',')
		return -EINVAL;
	s = skip_ws(s + 1);
	if (!parse_num(&s, &rec->bytes) || rec->bytes == 0 || *(s = skip_ws(s)) != ',')
		return -EINVAL;
	rw = skip_ws(s + 1);
	rw[strcspn(rw, " \t\r\n")] = '\0';
	if (!strcasecmp(rw, "r") || !strcasecmp(rw, "read"))
		rec->write = false;
	else if (!strcasecmp(rw, "w") || !strcasecmp(rw, "write"))
		rec->write = true;
	else
		return -EINVAL;
	rec->part = (uint32_t)disk;
	return 0;
}

/* blkparse's default output:
 *   8,0    3        1     0.000000000   697  Q   R 223490 + 8 [kjournald]
 * Only queue events (Q) of a read or write with sectors are requests;
 * other actions, flushes and discards are skipped, and so are lines that do
 * not start with "major,minor" (the summary at the end).  Devices are
 * numbered in order of first appearance. */
struct devs {
	uint64_t v[1024];
	size_t n;
};

static int blk_line(char *s, struct devs *devs, struct sim_be_rec *rec, bool *ret_skip)
{
	uint64_t maj, min, cpu, seq, pid, sector, nsec, dev;
	char action[8], rwbs[16];
	size_t i;
	int n;

	*ret_skip = true;
	s = skip_ws(s);
	if (*s < '0' || *s > '9' || !strchr(s, ','))
		return 0;	/* not an event line */
	if (!parse_num(&s, &maj) || *s != ',')
		return 0;
	s++;
	if (!parse_num(&s, &min))
		return -EINVAL;
	s = skip_ws(s);
	if (!parse_num(&s, &cpu) || (s = skip_ws(s), !parse_num(&s, &seq)) ||
	    (s = skip_ws(s), !parse_secs(&s, &rec->t_ns)) || (s = skip_ws(s), !parse_num(&s, &pid)))
		return -EINVAL;
	if (sscanf(s, " %7s %15s%n", action, rwbs, &n) != 2)
		return -EINVAL;
	if (strcmp(action, "Q") != 0 || (!strchr(rwbs, 'R') && !strchr(rwbs, 'W')))
		return 0;
	s = skip_ws(s + n);
	if (*s < '0' || *s > '9')
		return 0;	/* a flush or barrier: no sectors */
	if (!parse_num(&s, &sector) || (s = skip_ws(s), *s != '+'))
		return -EINVAL;
	s = skip_ws(s + 1);
	if (!parse_num(&s, &nsec) || nsec == 0 || sector > UINT64_MAX / 512)
		return -EINVAL;
	dev = maj << 32 | min;
	for (i = 0; i < devs->n && devs->v[i] != dev; i++)
		;
	if (i == devs->n) {
		if (devs->n == CW_ARRAY_SIZE(devs->v))
			return -E2BIG;
		devs->v[devs->n++] = dev;
	}
	rec->part = (uint32_t)i;
	rec->off = sector * 512;
	rec->bytes = nsec * 512;
	rec->write = strchr(rwbs, 'W') != NULL;
	*ret_skip = false;
	return 0;
}

static int cmp_rec(const void *a, const void *b)
{
	const struct sim_be_rec *x = a, *y = b;

	return (x->t_ns > y->t_ns) - (x->t_ns < y->t_ns);
}

static int read_file(const struct sim_scenario *sc, uint64_t part_bytes, struct sim_trace *t)
{
	_cleanup_free_ char *line = NULL;
	_cleanup_free_ struct devs *devs = calloc(1, sizeof(*devs));
	size_t len = 0;
	unsigned long lineno = 0;
	bool csv = sc->be == SIM_BE_CSV, sorted = true;
	FILE *f;
	int e = 0;

	if (!devs)
		return -ENOMEM;
	f = fopen(sc->be_path, "re");
	if (!f) {
		fprintf(stderr, "cwsim: %s: %m\n", sc->be_path);
		return -EINVAL;
	}
	while (getline(&line, &len, f) >= 0) {
		struct sim_be_rec rec = { 0 };
		bool skip = false;
		char *s = line;

		lineno++;
		if (csv) {
			s[strcspn(s, "#\r\n")] = '\0';
			s = skip_ws(s);
			if (!*s || (lineno == 1 && !strncasecmp(s, "time", 4)))
				continue;
			if (csv_line(s, &rec) < 0) {
				e = line_err(sc->be_path, lineno,
					     "expected time,disk,offset,size,rw (seconds, integers, R or W)");
				break;
			}
		} else {
			e = blk_line(s, devs, &rec, &skip);
			if (e == -E2BIG) {
				e = line_err(sc->be_path, lineno, "more than 1024 devices");
				break;
			}
			if (e < 0) {
				e = line_err(sc->be_path, lineno, "malformed blkparse event line");
				break;
			}
			if (skip)
				continue;
		}
		if (rec.t_ns >= sc->duration_ns)
			continue;
		rec.part %= sc->be_partitions;
		fold(&rec, part_bytes);
		if (t->n && rec.t_ns < t->v[t->n - 1].t_ns)
			sorted = false;
		e = push(t, &rec);
		if (e < 0)
			break;
	}
	if (!e && ferror(f)) {
		fprintf(stderr, "cwsim: %s: read error\n", sc->be_path);
		e = -EIO;
	}
	fclose(f);
	if (e == 0 && !sorted)
		qsort(t->v, t->n, sizeof(*t->v), cmp_rec);	/* blkparse merges CPUs loosely */
	return e;
}

int sim_trace_load(const struct sim_scenario *sc, uint64_t part_bytes, struct sim_trace *ret)
{
	struct sim_trace t = { 0 };
	int e = 0;

	switch (sc->be) {
	case SIM_BE_NONE:
		break;
	case SIM_BE_CELLO:
		e = gen_cello(sc, part_bytes, &t);
		break;
	case SIM_BE_CSV:
	case SIM_BE_BLKPARSE:
		e = read_file(sc, part_bytes, &t);
		break;
	}
	if (e < 0) {
		sim_trace_done(&t);
		return e;
	}
	*ret = t;
	return 0;
}
