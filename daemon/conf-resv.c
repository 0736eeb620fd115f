/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * conf-resv.c — clockwised -r: the streams admitted at start, read from
 * the command line (not the file) in the units of every Clockwise
 * program (clockwise/units.h).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <clockwise/units.h>

#include "daemon/conf-internal.h"

/* ---- start-up reservations (-r) ---- */

/* Field i of "EXPORT:BANDWIDTH:BLOCK[:OFFSET:LENGTH[:START_S:END_S]]": a
 * rate, a size or a span bound (whole seconds). */
static int start_resv_field(unsigned i, const char *s, uint64_t *ret, const char **ret_expected)
{
	int64_t ns;
	int r;

	if (i == 1) {
		*ret_expected = CW_UNITS_RATE_HELP;
		return cw_units_parse_rate(s, ret);
	}
	if (i < 5) {
		*ret_expected = CW_UNITS_SIZE_HELP;
		return cw_units_parse_size(s, ret);
	}
	*ret_expected = "a whole number of seconds, e.g. 30 or 10m";
	r = cw_units_parse_duration(s, CW_UNITS_S, &ns);
	if (r < 0)
		return r;
	if (ns % CW_UNITS_S || ns / CW_UNITS_S > INT32_MAX)
		return -EINVAL;
	*ret = (uint64_t)(ns / CW_UNITS_S);
	return 0;
}

int cwd_config_parse_resv(const char *spec, struct cwd_config_resv *ret, char *err, size_t errlen)
{
	char buf[512], *f[8], *save = NULL, *tok;
	const char *expected;
	uint64_t v[7] = { 0 };
	unsigned n = 0, i;

	if (strlen(spec) >= sizeof(buf)) {
		snprintf(err, errlen, "reservation \"%.40s...\" is too long", spec);
		return -EINVAL;
	}
	strcpy(buf, spec);
	for (tok = strtok_r(buf, ":", &save); tok && n < 8; tok = strtok_r(NULL, ":", &save))
		f[n++] = tok;
	if ((n != 3 && n != 5 && n != 7) || tok) {
		snprintf(err, errlen, "reservation \"%s\": expected "
			 "EXPORT:BANDWIDTH:BLOCK[:OFFSET:LENGTH[:START_S:END_S]]", spec);
		return -EINVAL;
	}
	if (!conf_name_ok(f[0], sizeof(ret->export_name) - 1) || f[0][0] == '-') {
		snprintf(err, errlen, "reservation \"%s\": \"%s\" is not an export name", spec, f[0]);
		return -EINVAL;
	}
	for (i = 1; i < n; i++) {
		if (start_resv_field(i, f[i], &v[i], &expected) < 0) {
			snprintf(err, errlen, "reservation \"%s\": \"%s\": expected %s", spec, f[i],
				 expected);
			return -EINVAL;
		}
	}
	if (!v[1] || !v[2]) {
		snprintf(err, errlen, "reservation \"%s\": bandwidth and block size must be > 0",
			 spec);
		return -EINVAL;
	}
	if (n == 7 && v[6] && v[6] <= v[5]) {
		snprintf(err, errlen, "reservation \"%s\": the span ends before it starts", spec);
		return -EINVAL;
	}
	*ret = (struct cwd_config_resv){
		.rate_bps = v[1], .block_bytes = v[2], .offset = v[3], .length = v[4],
		.span_start_s = (int64_t)v[5], .span_end_s = (int64_t)v[6],
	};
	snprintf(ret->export_name, sizeof(ret->export_name), "%s", f[0]);
	return 0;
}
