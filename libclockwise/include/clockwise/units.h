/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * units — sizes, rates and durations as people type them and read them
 * back, with one meaning per suffix in every program (clockwised -r, the
 * configuration file, cwctl, cwstream, cwsim, cwpool).  Pure functions.
 *
 * Sizes: a number of bytes, "1.5" digits allowed when the result is whole.
 *   K M G T        powers of 1024 (storage counts in blocks); lower case too
 *   KiB MiB GiB TiB the same, spelled out
 *   KB MB GB TB    powers of 1000
 *   B              bytes; a bare number is bytes
 *   So "64K" = "64KiB" = 65536 and "64KB" = 64000.
 *
 * Rates, in bytes per second:
 *   SIZE or SIZE/s          that size every second: "8M" and "8MiB/s" are
 *                           8 MiB/s (8388608), "8MB/s" is 8000000, a bare
 *                           number is bytes per second
 *   N[prefix]bit[/s], bps   bits per second, prefixes powers of 1000 (of
 *                           1024 with "i"): "8Mbit/s" = "8Mbps" = 1000000
 *   A rate of zero is refused.  A lone "b" is neither bits nor bytes and is
 *   refused, as is anything else these rules do not name.
 *
 * Byte ranges (of a partition), the same in cwctl --range and clockwised -r:
 *   START:END      bytes START up to END (END not included); either may be
 *                  left out: ":END" from the start, "START:" to the end,
 *                  ":" the whole
 *   START+LENGTH   LENGTH bytes from START ("+LENGTH" from the start)
 *   START, END and LENGTH are sizes.  An empty range (END not after
 *   START, LENGTH 0) is -EDOM.
 *
 * Durations: ns, us, ms, s, m (or min), h.  A bare number counts in a unit
 *   the caller names (bare_ns): seconds on every command line and in the
 *   configuration file (CW_UNITS_S); a scenario key of cwsim that names
 *   its unit ("server_period_ms") counts in that unit.
 *
 * Parsers return 0, -EINVAL (not a quantity, a fraction of a byte or of a
 * nanosecond, junk after it) or -ERANGE (more than INT64_MAX), and touch
 * *ret only on success.
 */
#ifndef CLOCKWISE_UNITS_H
#define CLOCKWISE_UNITS_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CW_UNITS_NS INT64_C(1)
#define CW_UNITS_US INT64_C(1000)
#define CW_UNITS_MS INT64_C(1000000)
#define CW_UNITS_S INT64_C(1000000000)

int cw_units_parse_size(const char *s, uint64_t *ret_bytes);
int cw_units_parse_rate(const char *s, uint64_t *ret_bytes_per_s);
/* A rate of I/O: a rate of bytes as above, or of requests, "200iops"
 * (any case), with *ret_iops telling which. */
int cw_units_parse_iorate(const char *s, uint64_t *ret_per_s, bool *ret_iops);
/* bare_ns > 0: what a number without a suffix counts in. */
int cw_units_parse_duration(const char *s, int64_t bare_ns, int64_t *ret_ns);
/* A byte range into [*ret_start, *ret_end); *ret_end 0: to the end. */
int cw_units_parse_range(const char *s, uint64_t *ret_start, uint64_t *ret_end);

/* What a program says when a quantity does not parse, the same in every
 * one: "--rate \"8Mb\": expected " CW_UNITS_RATE_HELP. */
#define CW_UNITS_SIZE_HELP "a size such as 4096, 64K or 1.5G (K, M, G, T: powers of 1024) " \
	"or 64KB (KB, MB, GB, TB: powers of 1000)"
#define CW_UNITS_RATE_HELP "a rate such as 8M or 8MiB/s (8 MiB per second), 8MB/s " \
	"(8000000 bytes per second) or 8Mbit/s"
#define CW_UNITS_IORATE_HELP "a rate such as 20MB/s or 8M (bytes per second) or 200iops " \
	"(requests per second)"
#define CW_UNITS_RANGE_HELP "a byte range START:END or START+LENGTH, such as 1G:3G, 1G+2G " \
	"or 1G: (to the end)"
#define CW_UNITS_DURATION_HELP "a duration such as 90 (seconds), 1.5s, 250ms, 10m or 2h"

/* Short forms in the same units, e.g. "64M", "1MB", "8MiB/s", "1.5MB/s",
 * "12.3ms".  A value is shown exactly when one decimal can: sizes in
 * binary units first, then decimal; rates in decimal units first, then
 * binary.  Otherwise a size prints in bytes ("2147483647B": exact, as a
 * size is typed back) and a rate or a duration is rounded to one decimal
 * (rates decimal).  A size, and an exact rate, parse back to the same
 * value.  Return buf. */
#define CW_UNITS_BUF 32
char *cw_units_format_size(uint64_t bytes, char buf[CW_UNITS_BUF]);
char *cw_units_format_rate(uint64_t bytes_per_s, char buf[CW_UNITS_BUF]);
char *cw_units_format_duration(int64_t ns, char buf[CW_UNITS_BUF]);
/* A rate as cw_units_format_rate, or "200iops". */
char *cw_units_format_iorate(uint64_t per_s, bool iops, char buf[CW_UNITS_BUF]);
/* A duration to three significant digits, for sentences that compare two
 * close times ("1.82ms, longer than the 1.57ms between"): "250us",
 * "1.82ms", "15.7ms", "2s". */
char *cw_units_format_duration3(int64_t ns, char buf[CW_UNITS_BUF]);
/* The largest rate not above bytes_per_s that cw_units_format_rate shows
 * exactly ("476.8MB/s" for 476834567): a limit to print that still holds
 * when it is typed back. */
uint64_t cw_units_floor_rate(uint64_t bytes_per_s);

#ifdef __cplusplus
}
#endif

#endif
