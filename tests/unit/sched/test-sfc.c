/*
 * Description: the space-filling-curve order (Aref et al.): each curve's
 * mapping against a brute-force construction of its order on small grids
 * (Sweep: raster; C-Scan: recursive boustrophedon; Hilbert: neighbours at
 * every step and, in 2D, the classic rotation construction; Gray: Gray
 * codes of the interleaved bits; Diagonal: sorted by sum, zig-zag); the
 * irregularity count against O(n^2) counting; the conditionally
 * preemptive queue on the paper's Figure 5 (SR, SRP, SS give the paper's
 * three orders); ER resets the window where AE keeps it wide; a queue
 * filled at once is served in curve order of the quantized points.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/sched-beq.h>
#include "common/util.h"
#include "cwtest.h"

static const enum cw_sfc_curve curves[] = { CW_SFC_SWEEP, CW_SFC_CSCAN, CW_SFC_HILBERT,
					     CW_SFC_GRAY, CW_SFC_DIAGONAL };

/* point number k in raster order */
static void unrank(uint64_t k, unsigned dims, unsigned bits, uint32_t *x)
{
	for (int i = (int)dims - 1; i >= 0; i--) {
		x[i] = (uint32_t)(k & ((1u << bits) - 1));
		k >>= bits;
	}
}

/* The boustrophedon built the slow way: the sub-order of the remaining
 * dimensions, run forwards for even values of this one and backwards
 * for odd ones (as traversed), each run reversed as a whole when the
 * caller's run is. */
static void snake(unsigned dims, unsigned bits, unsigned k, bool rev, uint32_t *x,
		  uint64_t *pos, uint64_t *out)
{
	uint32_t n = 1u << bits;

	if (k == dims) {
		uint64_t r = 0;

		for (unsigned i = 0; i < dims; i++)
			r = r << bits | x[i];
		out[r] = (*pos)++;
		return;
	}
	for (uint32_t s = 0; s < n; s++) {
		x[k] = rev ? n - 1 - s : s;
		snake(dims, bits, k + 1, (s & 1) != 0, x, pos, out);
	}
}

/* Classic 2D Hilbert curve, distance d -> (x, y), by quadrant rotation. */
static void hilbert2d(uint32_t n, uint64_t d, uint32_t *rx, uint32_t *ry)
{
	uint32_t x = 0, y = 0;

	for (uint32_t s = 1; s < n; s *= 2) {
		uint32_t qx = 1 & (uint32_t)(d / 2), qy = 1 & (uint32_t)(d ^ qx);

		if (qy == 0) {
			if (qx == 1) {
				x = s - 1 - x;
				y = s - 1 - y;
			}
			uint32_t t = x;
			x = y;
			y = t;
		}
		x += s * qx;
		y += s * qy;
		d /= 4;
	}
	*rx = x;
	*ry = y;
}

static unsigned g_dims;

static int diag_cmp(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b;
	uint32_t sx = 0, sy = 0;

	for (unsigned i = 0; i < g_dims; i++) {
		sx += x[i];
		sy += y[i];
	}
	if (sx != sy)
		return sx < sy ? -1 : 1;
	for (unsigned i = 0; i < g_dims; i++)
		if (x[i] != y[i])
			return ((x[i] < y[i]) != (sx & 1)) ? -1 : 1;
	return 0;
}

static void test_curves(void)
{
	for (size_t ci = 0; ci < CW_ARRAY_SIZE(curves); ci++)
		for (unsigned dims = 1; dims <= 4; dims++)
			for (unsigned bits = 1; bits <= 3 && dims * bits <= 12; bits++) {
				struct cw_sfc *f = NULL;
				uint64_t len = UINT64_C(1) << (dims * bits);
				uint64_t *idx = calloc(len, sizeof(*idx));
				uint64_t *want = calloc(len, sizeof(*want));
				uint32_t *at = calloc(len * dims, sizeof(*at));	/* point at position */
				bool *seen = calloc(len, sizeof(*seen));
				uint32_t x[8];

				CU_ASSERT_FATAL(idx && want && at && seen);
				CU_ASSERT_FATAL(cw_sfc_new(curves[ci], dims, bits, &f) == 0);
				CU_ASSERT_EQUAL(cw_sfc_length(f), len);
				for (uint64_t k = 0; k < len; k++) {
					unrank(k, dims, bits, x);
					idx[k] = cw_sfc_index(f, x);
					CU_ASSERT_FATAL(idx[k] < len);
					CU_ASSERT(!seen[idx[k]]);	/* a bijection */
					seen[idx[k]] = true;
					memcpy(&at[idx[k] * dims], x, dims * sizeof(*x));
				}
				switch (curves[ci]) {
				case CW_SFC_SWEEP:
					for (uint64_t k = 0; k < len; k++)
						CU_ASSERT_EQUAL(idx[k], k);
					break;
				case CW_SFC_CSCAN: {
					uint64_t pos = 0;

					snake(dims, bits, 0, false, x, &pos, want);
					for (uint64_t k = 0; k < len; k++)
						CU_ASSERT_EQUAL(idx[k], want[k]);
				}
					__attribute__((fallthrough));	/* neighbours at every step, too */
				case CW_SFC_HILBERT:
					CU_ASSERT(cw_sfc_index(f, (uint32_t[8]){ 0 }) == 0);
					for (uint64_t p = 1; p < len; p++) {
						uint32_t dist = 0;

						for (unsigned i = 0; i < dims; i++) {
							uint32_t a = at[(p - 1) * dims + i], b = at[p * dims + i];

							dist += a > b ? a - b : b - a;
						}
						CU_ASSERT_EQUAL(dist, 1);
					}
					if (curves[ci] == CW_SFC_HILBERT && dims == 2)
						for (uint64_t p = 0; p < len; p++) {
							uint32_t hx, hy;

							hilbert2d(1u << bits, p, &hx, &hy);
							/* the same curve, up to which axis is x */
							CU_ASSERT((at[p * 2] == hx && at[p * 2 + 1] == hy) ||
								  (at[p * 2] == hy && at[p * 2 + 1] == hx));
						}
					break;
				case CW_SFC_GRAY:
					for (uint64_t p = 0; p < len; p++) {
						uint64_t g = p ^ (p >> 1), k = 0;

						/* de-interleave g: bit levels from the top, dim 0 first */
						memset(x, 0, sizeof(x));
						for (int b = (int)bits - 1, sh = (int)(dims * bits) - 1; b >= 0; b--)
							for (unsigned i = 0; i < dims; i++, sh--)
								x[i] |= (uint32_t)((g >> sh) & 1) << b;
						for (unsigned i = 0; i < dims; i++)
							k = k << bits | x[i];
						CU_ASSERT_EQUAL(idx[k], p);
					}
					break;
				case CW_SFC_DIAGONAL: {
					uint32_t *pts = calloc(len * dims, sizeof(*pts));

					CU_ASSERT_FATAL(pts != NULL);
					for (uint64_t k = 0; k < len; k++)
						unrank(k, dims, bits, &pts[k * dims]);
					g_dims = dims;
					qsort(pts, len, dims * sizeof(*pts), diag_cmp);
					for (uint64_t p = 0; p < len; p++)
						CU_ASSERT(memcmp(&pts[p * dims], &at[p * dims],
								 dims * sizeof(*pts)) == 0);
					free(pts);
					if (dims == 2)	/* the zig-zag is a king's walk */
						for (uint64_t p = 1; p < len; p++) {
							int dx = (int)at[p * 2] - (int)at[(p - 1) * 2];
							int dy = (int)at[p * 2 + 1] - (int)at[(p - 1) * 2 + 1];

							CU_ASSERT(abs(dx) <= 1 && abs(dy) <= 1);
						}
					break;
				}
				default:
					break;
				}
				cw_sfc_free(f);
				free(idx);
				free(want);
				free(at);
				free(seen);
			}
}

static void test_curve_errors(void)
{
	struct cw_sfc *f = NULL;
	enum cw_sfc_curve c;
	uint32_t big[3] = { 1000, 1000, 1000 };

	CU_ASSERT_EQUAL(cw_sfc_new(CW_SFC_HILBERT, 0, 4, &f), -EINVAL);
	CU_ASSERT_EQUAL(cw_sfc_new(CW_SFC_HILBERT, 9, 4, &f), -EINVAL);
	CU_ASSERT_EQUAL(cw_sfc_new(CW_SFC_HILBERT, 4, 16, &f), -EINVAL);	/* 64 bits */
	CU_ASSERT_EQUAL(cw_sfc_new(CW_SFC_N_CURVES, 2, 4, &f), -EINVAL);
	CU_ASSERT(cw_sfc_new(CW_SFC_SWEEP, 3, 4, &f) == 0);
	CU_ASSERT_EQUAL(cw_sfc_index(f, big), 4095);	/* clamped to the grid */
	cw_sfc_free(f);
	cw_sfc_free(NULL);
	for (size_t i = 0; i < CW_ARRAY_SIZE(curves); i++) {
		CU_ASSERT(cw_sfc_curve_parse(cw_sfc_curve_name(curves[i]), &c) == 0);
		CU_ASSERT_EQUAL(c, curves[i]);
	}
	CU_ASSERT_EQUAL(cw_sfc_curve_parse("peano", &c), -EINVAL);
	CU_ASSERT(cw_sfc_curve_name(CW_SFC_N_CURVES) == NULL);
}

static void test_irregularity(void)
{
	unsigned rng = 99;
	uint32_t worst[8], pts[300 * 3];
	uint64_t got[3];

	/* the paper's eight levels served in reverse: 28 irregularities */
	for (uint32_t i = 0; i < 8; i++)
		worst[i] = 7 - i;
	CU_ASSERT(cw_sfc_irregularity(worst, 8, 1, got) == 0 && got[0] == 28);
	for (int round = 0; round < 20; round++) {
		size_t n = (size_t)(rng % 300);

		for (size_t i = 0; i < n * 3; i++) {
			rng = rng * 1103515245u + 12345u;
			pts[i] = (rng >> 16) % 16;
		}
		CU_ASSERT_FATAL(cw_sfc_irregularity(pts, n, 3, got) == 0);
		for (unsigned k = 0; k < 3; k++) {
			uint64_t brute = 0;

			for (size_t j = 0; j < n; j++)
				for (size_t i = 0; i < j; i++)
					brute += pts[i * 3 + k] > pts[j * 3 + k];
			CU_ASSERT_EQUAL(got[k], brute);
		}
	}
	CU_ASSERT_EQUAL(cw_sfc_irregularity(pts, 1, 0, got), -EINVAL);
}

/* ---- the queue --------------------------------------------------------- */

/* One dimension (priority, 16 levels) on the Sweep curve: a request's
 * value is its client's priority, so the tests place values exactly. */
static struct cw_sched *queue(enum cw_sfc_policy pol, unsigned bits, uint32_t w_ppm,
			      uint32_t e_ppm, bool ae)
{
	struct cw_sched_sfc_conf conf;
	struct cw_sched_opts o;
	struct cw_sched *s = NULL;

	cw_sched_sfc_conf_init(&conf);
	conf.curve = CW_SFC_SWEEP;
	conf.dims = CW_SFC_DIM_PRIO;
	conf.bits = bits;
	conf.window_ppm = w_ppm;
	conf.expand_ppm = e_ppm;
	conf.policy = pol;
	conf.always_expand = ae;
	cw_sched_opts_init(&o);
	o.policy = CW_SCHED_EDF;
	o.beq = cw_sched_beq_sfc();
	o.beq_conf = &conf;
	CU_ASSERT_FATAL(cw_sched_new(&o, &s) == 0);
	for (uint32_t p = 0; p < 1u << bits; p++) {
		struct cw_sched_client q = { .weight = 1, .prio = p };

		CU_ASSERT_FATAL(cw_sched_set_client(s, p, &q) == 0);
	}
	return s;
}

static struct cw_sched_req *serve(struct cw_sched *s, int64_t *now)
{
	struct cw_sched_decision d;

	CU_ASSERT_FATAL(cw_sched_next(s, *now, &d) == 0);
	CU_ASSERT_FATAL(d.verdict == CW_SCHED_DISPATCH);
	*now += 1;
	CU_ASSERT_FATAL(cw_sched_complete(s, d.req, *now, 1) == 0);
	return d.req;
}

static void push(struct cw_sched *s, struct cw_sched_req *r, uint64_t value, int64_t now)
{
	*r = (struct cw_sched_req){ .cls = CW_SCHED_BE, .client = value, .service_ns = 1 };
	CU_ASSERT_FATAL(cw_sched_enqueue(s, r, now) == 0);
}

/* Figure 5 with w = 4 of 16: T1 = 10 in service; T2..T4 = 7, 8, 9 in the
 * window; T5 = 2 preempts; T6, T7 = 12, 13 come after. */
static void test_figure5(void)
{
	static const uint64_t val[7] = { 10, 7, 8, 9, 2, 12, 13 };
	static const struct { enum cw_sfc_policy p; int order[7]; } want[] = {
		{ CW_SFC_SR, { 1, 5, 6, 7, 2, 3, 4 } },
		{ CW_SFC_SRP, { 1, 5, 2, 6, 3, 7, 4 } },
		{ CW_SFC_SS, { 1, 5, 2, 3, 4, 6, 7 } },
	};

	for (size_t k = 0; k < CW_ARRAY_SIZE(want); k++) {
		struct cw_sched *s = queue(want[k].p, 4, 250000, 0, false);
		struct cw_sched_req t[7];
		int64_t now = 0;

		push(s, &t[0], val[0], now);
		CU_ASSERT(serve(s, &now) == &t[0]);
		/* T1 is the one served last: the others arrive now */
		for (int i = 1; i < 7; i++)
			push(s, &t[i], val[i], now);
		now = 1;
		for (int i = 1; i < 7; i++) {
			struct cw_sched_req *r = serve(s, &now);

			if ((int)(r - t) + 1 != want[k].order[i])
				printf("\n  policy %zu step %d: T%d, want T%d", k, i, (int)(r - t) + 1,
				       want[k].order[i]);
			CU_ASSERT_EQUAL((int)(r - t) + 1, want[k].order[i]);
		}
		cw_sched_free(s);
	}
}

/* ER against AE on a 256-level line, w = 20, e = 10: a preemption widens
 * the window to 30, so a request that would have preempted at 20 waits;
 * after a dispatch in cycle order ER is back at 20 (so the next such
 * request preempts) while AE stays at 30 (so it waits). */
static void test_expand_reset(void)
{
	for (int ae = 0; ae <= 1; ae++) {
		/* 256 levels: w = 20/256, e = 10/20 of w */
		struct cw_sched *s = queue(CW_SFC_SR, 8, 78125, 500000, ae);
		struct cw_sched_req r[8];
		int64_t now = 0;

		push(s, &r[0], 100, now);
		push(s, &r[1], 110, now);
		push(s, &r[2], 200, now);
		CU_ASSERT(serve(s, &now) == &r[0]);	/* cur 100, w 20 */
		push(s, &r[3], 75, now);		/* 75 < 80: preempts */
		CU_ASSERT(serve(s, &now) == &r[3]);	/* a preemption: w 30 */
		push(s, &r[4], 50, now);		/* 50 >= 75 - 30: waits (at w 20 it would not) */
		CU_ASSERT(serve(s, &now) == &r[1]);	/* 110, in cycle order: ER resets */
		push(s, &r[5], 85, now);		/* 85 < 110 - 20 preempts under ER only */
		CU_ASSERT(serve(s, &now) == (ae ? &r[2] : &r[5]));
		cw_sched_free(s);
	}
}

/* Requests queued all at once are served in curve order of their points:
 * priority, time to the deadline in 16ths of the horizon, distance ahead
 * of the head in 16ths of the disk. */
static void test_order(void)
{
	for (size_t ci = 0; ci < CW_ARRAY_SIZE(curves); ci++) {
		struct cw_sched_sfc_conf conf;
		struct cw_sched_opts o;
		struct cw_sched *s = NULL;
		struct cw_sfc *f = NULL;
		struct cw_sched_req r[200];
		uint64_t v[200], last = 0;
		unsigned rng = 7;
		int64_t now = 1000;

		cw_sched_sfc_conf_init(&conf);
		conf.curve = curves[ci];
		conf.capacity_bytes = 16 << 20;
		conf.horizon_ns = 1600;
		cw_sched_opts_init(&o);
		o.policy = CW_SCHED_EDF;
		o.beq = cw_sched_beq_sfc();
		o.beq_conf = &conf;
		CU_ASSERT_FATAL(cw_sched_new(&o, &s) == 0);
		CU_ASSERT_FATAL(cw_sfc_new(curves[ci], 3, 4, &f) == 0);
		for (uint32_t p = 0; p < 16; p++) {
			struct cw_sched_client q = { .weight = 1, .prio = p };

			CU_ASSERT(cw_sched_set_client(s, p, &q) == 0);
		}
		for (size_t i = 0; i < CW_ARRAY_SIZE(r); i++) {
			uint32_t pt[3];

			rng = rng * 1103515245u + 12345u;
			r[i] = (struct cw_sched_req){
				.cls = CW_SCHED_BE, .service_ns = 1,
				.client = (rng >> 8) % 16,
				.be_deadline_ns = (rng >> 12) % 3 ? now + (int64_t)((rng >> 4) % 2000) : 0,
				.offset_bytes = (uint64_t)((rng >> 16) % 4096) << 12,
			};
			pt[0] = (uint32_t)r[i].client;
			pt[1] = !r[i].be_deadline_ns ? 15 :
				(uint32_t)CW_MIN(15, (r[i].be_deadline_ns - now) * 16 / 1600);
			pt[2] = (uint32_t)(r[i].offset_bytes * 16 / conf.capacity_bytes);
			v[i] = cw_sfc_index(f, pt);
			CU_ASSERT_FATAL(cw_sched_enqueue(s, &r[i], now) == 0);
		}
		for (size_t i = 0; i < CW_ARRAY_SIZE(r); i++) {
			struct cw_sched_req *q = serve(s, &now);
			uint64_t got = v[q - r];

			CU_ASSERT(got >= last);
			last = got;
		}
		cw_sfc_free(f);
		cw_sched_free(s);
	}
}

static void test_conf_errors(void)
{
	struct cw_sched_sfc_conf conf;
	struct cw_sched_opts o;
	struct cw_sched *s = NULL;
	enum cw_sfc_policy p;

	cw_sched_opts_init(&o);
	o.beq = cw_sched_beq_sfc();
	o.beq_conf = &conf;
	cw_sched_sfc_conf_init(&conf);	/* position without a disk size */
	CU_ASSERT_EQUAL(cw_sched_new(&o, &s), -EINVAL);
	conf.capacity_bytes = 1 << 20;
	conf.dims = 8;
	CU_ASSERT_EQUAL(cw_sched_new(&o, &s), -EINVAL);
	conf.dims = CW_SFC_DIM_POSITION;
	conf.window_ppm = 2000000;
	CU_ASSERT_EQUAL(cw_sched_new(&o, &s), -EINVAL);
	o.beq_conf = NULL;	/* defaults without the position */
	CU_ASSERT(cw_sched_new(&o, &s) == 0);
	cw_sched_free(s);
	CU_ASSERT(cw_sfc_policy_parse("srp", &p) == 0 && p == CW_SFC_SRP);
	CU_ASSERT(cw_sfc_policy_parse("ss", &p) == 0 && p == CW_SFC_SS);
	CU_ASSERT_EQUAL(cw_sfc_policy_parse("er", &p), -EINVAL);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("sfc", NULL, NULL);

	cwtest_add(s, "curves against brute force", test_curves);
	cwtest_add(s, "curve errors", test_curve_errors);
	cwtest_add(s, "irregularity", test_irregularity);
	cwtest_add(s, "Figure 5: SR, SRP, SS", test_figure5);
	cwtest_add(s, "ER resets the window, AE does not", test_expand_reset);
	cwtest_add(s, "queued at once: curve order", test_order);
	cwtest_add(s, "configuration errors", test_conf_errors);
	return cwtest_run();
}
