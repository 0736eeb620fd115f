/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * conf-resv.c — clockwised -r: the streams admitted at start, read from
 * the command line (not the file) in the units of every Clockwise
 * program (clockwise/units.h); the range in the very forms cwctl resv
 * create --range takes, through the same parser.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <clockwise/units.h>

#include "daemon/conf-schema.h"

#define RESV_FORM "EXPORT:BANDWIDTH:BLOCK[,range=START:END|START+LENGTH][,span=START_S:END_S]"

/* A bound of the span: whole seconds after start ("30", "10m"); empty
 * is 0 (at start, or no end). */
static int span_bound(const char *s, int64_t *ret)
{
	int64_t ns;
	int r;

	*ret = 0;
	if (!*s)
		return 0;
	r = cw_units_parse_duration(s, CW_UNITS_S, &ns);
	if (r < 0)
		return r;
	if (ns % CW_UNITS_S || ns / CW_UNITS_S > INT32_MAX)
		return -EINVAL;
	*ret = ns / CW_UNITS_S;
	return 0;
}

/* EXPORT:BANDWIDTH:BLOCK:OFFSET:LENGTH[:START_S:END_S], the form before
 * the range took cwctl's syntax.  Its OFFSET:LENGTH would now read as
 * START:END, other bytes, so it is refused with the same reservation
 * written the new way (LENGTH 0 was: to the end). */
static int old_form(const char *spec, char *const *f, unsigned n, char *err, size_t errlen)
{
	uint64_t off = 1, len = 1;
	char range[160] = "", span[160] = "";

	(void)cw_units_parse_size(f[3], &off);
	(void)cw_units_parse_size(f[4], &len);
	if (len)
		snprintf(range, sizeof(range), ",range=%s+%s", f[3], f[4]);
	else if (off)
		snprintf(range, sizeof(range), ",range=%s:", f[3]);
	if (n == 7)
		snprintf(span, sizeof(span), ",span=%s:%s", f[5], f[6]);
	snprintf(err, errlen, "reservation \"%s\": OFFSET:LENGTH after the block size is no "
		 "longer taken (cwctl's --range START:END would read other bytes there); expected "
		 RESV_FORM ", here %s:%s:%s%s%s", spec, f[0], f[1], f[2], range, span);
	return -EINVAL;
}

int cwd_config_parse_resv(const char *spec, struct cwd_config_resv *ret, char *err, size_t errlen)
{
	char buf[512], *f[8], *rest, *head, *opt, *colon;
	uint64_t rate, block, start = 0, end = 0;
	int64_t from = 0, to = 0;
	bool have_range = false, have_span = false;
	unsigned n = 0;
	int r;

	if (strlen(spec) >= sizeof(buf)) {
		snprintf(err, errlen, "reservation \"%.40s...\" is too long", spec);
		return -EINVAL;
	}
	strcpy(buf, spec);
	rest = buf;
	head = strsep(&rest, ",");
	while (head && n < 8)
		f[n++] = strsep(&head, ":");
	if (!head && (n == 5 || n == 7))
		return old_form(spec, f, n, err, errlen);
	if (head || n != 3) {
		snprintf(err, errlen, "reservation \"%s\": expected " RESV_FORM, spec);
		return -EINVAL;
	}
	if (!conf_name_ok(f[0], sizeof(ret->export_name) - 1) || f[0][0] == '-') {
		snprintf(err, errlen, "reservation \"%s\": \"%s\" is not an export name", spec, f[0]);
		return -EINVAL;
	}
	if (cw_units_parse_rate(f[1], &rate) < 0) {
		snprintf(err, errlen, "reservation \"%s\": \"%s\": expected " CW_UNITS_RATE_HELP,
			 spec, f[1]);
		return -EINVAL;
	}
	if (cw_units_parse_size(f[2], &block) < 0 || !block) {
		snprintf(err, errlen, "reservation \"%s\": \"%s\": expected " CW_UNITS_SIZE_HELP
			 ", more than 0", spec, f[2]);
		return -EINVAL;
	}
	while ((opt = strsep(&rest, ",")) != NULL) {
		if (!strncmp(opt, "range=", 6) && !have_range) {
			r = cw_units_parse_range(opt + 6, &start, &end);
			if (r < 0) {
				snprintf(err, errlen, "reservation \"%s\": range \"%s\": %s; expected "
					 CW_UNITS_RANGE_HELP, spec, opt + 6, r == -EDOM ?
					 "an empty range" : r == -ERANGE ? "too large" : "not a range");
				return -EINVAL;
			}
			have_range = true;
		} else if (!strncmp(opt, "span=", 5) && !have_span) {
			colon = strchr(opt + 5, ':');
			if (colon)
				*colon = '\0';
			if (!colon || span_bound(opt + 5, &from) < 0 || span_bound(colon + 1, &to) < 0) {
				snprintf(err, errlen, "reservation \"%s\": a span is START_S:END_S, "
					 "whole seconds after start such as 30 or 10m (END_S 0: no "
					 "end)", spec);
				return -EINVAL;
			}
			if (to && to <= from) {
				snprintf(err, errlen, "reservation \"%s\": the span ends before it "
					 "starts", spec);
				return -EINVAL;
			}
			have_span = true;
		} else {
			snprintf(err, errlen, "reservation \"%s\": \"%s\": expected range=... or "
				 "span=..., each at most once: " RESV_FORM, spec, opt);
			return -EINVAL;
		}
	}
	*ret = (struct cwd_config_resv){
		.rate_bps = rate, .block_bytes = block, .range_start = start, .range_end = end,
		.span_start_s = from, .span_end_s = to,
	};
	snprintf(ret->export_name, sizeof(ret->export_name), "%s", f[0]);
	return 0;
}
