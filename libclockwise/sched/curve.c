/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Space-filling curves over a grid of D dimensions with N = 2^b levels
 * each (Aref et al., section 3 and Figure 1; Mokbel & Aref for the
 * irregularity measure of section 4.1).  Each maps a point to its
 * position along the curve, a bijection onto [0, N^D).
 *
 *  Sweep     raster order: coordinate 0 slowest, every row the same way.
 *  C-Scan    continuous scan (boustrophedon): digit k is reflected when the
 *            digit before it (as traversed) is odd; with N even that makes
 *            consecutive points neighbours in every dimension count.
 *  Hilbert   Skilling's transform ("Programming the Hilbert curve", 2004)
 *            from axes to the transposed index, then bits interleaved from
 *            the top level down, coordinate 0 first.  Consecutive points
 *            are neighbours.
 *  Gray      Faloutsos: the interleaved bits of the point are the Gray code
 *            of its position, so the position is their inverse Gray code.
 *  Diagonal  by the sum of the coordinates; within one sum, in
 *            lexicographic order of the coordinates, reversed on odd sums
 *            (in 2D the zig-zag of the paper's Figure 1g; in more
 *            dimensions one natural extension, since the paper draws only
 *            the plane).
 *
 * The paper draws the curves and gives no formulas; the unit test checks
 * each mapping against a brute-force construction of the order on small
 * grids.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched-internal.h"
#include "common/util.h"

#define MAX_DIMS 8

struct cw_sfc {
	enum cw_sfc_curve curve;
	unsigned dims, bits;
	uint32_t n;		/* levels per dimension */
	size_t sums;		/* dims * (n - 1) + 1 */
	uint64_t *cnt;		/* Diagonal: cnt[d * sums + s], points of d dims summing to s */
};

static const char *const curve_names[] = {
	[CW_SFC_SWEEP] = "sweep",
	[CW_SFC_CSCAN] = "c-scan",
	[CW_SFC_HILBERT] = "hilbert",
	[CW_SFC_GRAY] = "gray",
	[CW_SFC_DIAGONAL] = "diagonal",
};

int cw_sfc_curve_parse(const char *name, enum cw_sfc_curve *ret)
{
	if (!name || !ret)
		return -EINVAL;
	for (size_t i = 0; i < CW_ARRAY_SIZE(curve_names); i++)
		if (!strcmp(name, curve_names[i])) {
			*ret = (enum cw_sfc_curve)i;
			return 0;
		}
	if (!strcmp(name, "cscan")) {
		*ret = CW_SFC_CSCAN;
		return 0;
	}
	return -EINVAL;
}

const char *cw_sfc_curve_name(enum cw_sfc_curve c)
{
	return (unsigned)c < CW_ARRAY_SIZE(curve_names) ? curve_names[c] : NULL;
}

int cw_sfc_new(enum cw_sfc_curve curve, unsigned dims, unsigned bits, struct cw_sfc **ret)
{
	struct cw_sfc *f;

	if (!ret || !cw_sfc_curve_name(curve) || dims < 1 || dims > MAX_DIMS || bits < 1 ||
	    bits > 16 || dims * bits > 62)
		return -EINVAL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	*f = (struct cw_sfc){ .curve = curve, .dims = dims, .bits = bits, .n = UINT32_C(1) << bits };
	if (curve == CW_SFC_DIAGONAL) {
		f->sums = (size_t)dims * (f->n - 1) + 1;
		f->cnt = calloc((dims + 1) * f->sums, sizeof(*f->cnt));
		if (!f->cnt) {
			free(f);
			return -ENOMEM;
		}
		f->cnt[0] = 1;
		for (unsigned d = 1; d <= dims; d++)
			for (size_t s = 0; s < f->sums; s++) {
				uint64_t sum = 0;

				for (uint32_t v = 0; v < f->n && v <= s; v++)
					sum += f->cnt[(d - 1) * f->sums + s - v];
				f->cnt[d * f->sums + s] = sum;
			}
	}
	*ret = f;
	return 0;
}

void cw_sfc_free(struct cw_sfc *f)
{
	if (!f)
		return;
	free(f->cnt);
	free(f);
}

uint64_t cw_sfc_length(const struct cw_sfc *f)
{
	return UINT64_C(1) << (f->dims * f->bits);
}

/* Bits of x[0..dims), level by level from the top, x[0] first. */
static uint64_t interleave(const uint32_t *x, unsigned dims, unsigned bits)
{
	uint64_t r = 0;

	for (int b = (int)bits - 1; b >= 0; b--)
		for (unsigned i = 0; i < dims; i++)
			r = r << 1 | ((x[i] >> b) & 1);
	return r;
}

static void hilbert_transpose(uint32_t *x, unsigned n, unsigned bits)
{
	uint32_t m = UINT32_C(1) << (bits - 1), t;

	/* undo the excess work of the recursive construction, level by level */
	for (uint32_t q = m; q > 1; q >>= 1) {
		uint32_t p = q - 1;

		for (unsigned i = 0; i < n; i++) {
			if (x[i] & q) {
				x[0] ^= p;	/* invert */
			} else {
				t = (x[0] ^ x[i]) & p;	/* exchange */
				x[0] ^= t;
				x[i] ^= t;
			}
		}
	}
	/* Gray encode */
	for (unsigned i = 1; i < n; i++)
		x[i] ^= x[i - 1];
	t = 0;
	for (uint32_t q = m; q > 1; q >>= 1)
		if (x[n - 1] & q)
			t ^= q - 1;
	for (unsigned i = 0; i < n; i++)
		x[i] ^= t;
}

static uint64_t gray_inverse(uint64_t g)
{
	for (unsigned s = 1; s < 64; s <<= 1)
		g ^= g >> s;
	return g;
}

static uint64_t diagonal(const struct cw_sfc *f, const uint32_t *x)
{
	const uint64_t *cnt = f->cnt;
	size_t sums = f->sums, s = 0, pre = 0;
	uint64_t base = 0, rank = 0;

	for (unsigned i = 0; i < f->dims; i++)
		s += x[i];
	for (size_t v = 0; v < s; v++)
		base += cnt[f->dims * sums + v];
	/* lexicographic rank among the points with this sum */
	for (unsigned k = 0; k + 1 < f->dims; k++) {
		unsigned rest = f->dims - k - 1;

		for (uint32_t v = 0; v < x[k]; v++)
			if (s >= pre + v)
				rank += cnt[rest * sums + s - pre - v];
		pre += x[k];
	}
	if (s & 1)
		rank = cnt[f->dims * sums + s] - 1 - rank;
	return base + rank;
}

uint64_t cw_sfc_index(const struct cw_sfc *f, const uint32_t *coords)
{
	uint32_t x[MAX_DIMS];
	uint64_t r = 0;
	bool flip = false;

	for (unsigned i = 0; i < f->dims; i++)
		x[i] = CW_MIN(coords[i], f->n - 1);
	switch (f->curve) {
	case CW_SFC_SWEEP:
		for (unsigned i = 0; i < f->dims; i++)
			r = r << f->bits | x[i];
		return r;
	case CW_SFC_CSCAN:
		for (unsigned i = 0; i < f->dims; i++) {
			uint32_t d = flip ? f->n - 1 - x[i] : x[i];

			r = r << f->bits | d;
			flip = d & 1;
		}
		return r;
	case CW_SFC_HILBERT:
		hilbert_transpose(x, f->dims, f->bits);
		return interleave(x, f->dims, f->bits);
	case CW_SFC_GRAY:
		return gray_inverse(interleave(x, f->dims, f->bits));
	case CW_SFC_DIAGONAL:
	default:
		return diagonal(f, x);
	}
}

/* ---- irregularity --------------------------------------------------------- */

/* Sorts a[0..n) (using tmp) and returns the pairs i < j with a[i] > a[j]. */
static uint64_t inversions(uint32_t *a, uint32_t *tmp, size_t n)
{
	uint64_t inv = 0;

	for (size_t w = 1; w < n; w *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * w) {
			size_t mid = CW_MIN(lo + w, n), hi = CW_MIN(lo + 2 * w, n);
			size_t i = lo, j = mid, k = lo;

			while (i < mid && j < hi) {
				if (a[j] < a[i]) {
					inv += mid - i;	/* a[j] is below every a[i..mid) */
					tmp[k++] = a[j++];
				} else
					tmp[k++] = a[i++];
			}
			while (i < mid)
				tmp[k++] = a[i++];
			while (j < hi)
				tmp[k++] = a[j++];
		}
		memcpy(a, tmp, n * sizeof(*a));
	}
	return inv;
}

int cw_sfc_irregularity(const uint32_t *pts, size_t n, unsigned dims, uint64_t *ret)
{
	uint32_t *a, *tmp;

	if ((n && !pts) || !ret || dims < 1 || dims > MAX_DIMS)
		return -EINVAL;
	a = malloc((n ? n : 1) * sizeof(*a));
	tmp = malloc((n ? n : 1) * sizeof(*tmp));
	if (!a || !tmp) {
		free(a);
		free(tmp);
		return -ENOMEM;
	}
	for (unsigned k = 0; k < dims; k++) {
		for (size_t i = 0; i < n; i++)
			a[i] = pts[i * dims + k];
		ret[k] = inversions(a, tmp, n);
	}
	free(a);
	free(tmp);
	return 0;
}
