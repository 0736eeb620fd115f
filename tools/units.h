/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * units — the quantities people type at cwctl(8) and cwstream(1) and read
 * back from them: sizes, rates and durations.  Pure functions, no I/O.
 *
 * Sizes are binary (storage admins count blocks): "4096", "64K", "1.5G",
 * "2TiB", "512KB" all mean multiples of 1024.  Rates are decimal, as
 * networks and media count them: "8Mbit" (8 000 000 bits/s), "817KB/s"
 * (817 000 bytes/s), "1.5MB/s"; a binary prefix with "i" ("4MiB/s") is
 * binary; a plain number is bytes per second.  Durations: "90" (seconds),
 * "1.5s", "250ms", "100us", "2m", "1h".
 *
 * Parsers return 0 or -EINVAL (not a quantity, a fraction of a byte or of a
 * nanosecond, zero where zero makes no sense) or -ERANGE (does not fit in
 * 63 bits), and touch *ret only on success.
 */
#ifndef CW_TOOLS_UNITS_H
#define CW_TOOLS_UNITS_H

#include <stddef.h>
#include <stdint.h>

int cw_units_parse_size(const char *s, uint64_t *ret_bytes);
int cw_units_parse_rate(const char *s, uint64_t *ret_bytes_per_s);
int cw_units_parse_duration(const char *s, int64_t *ret_ns);

/* Short human forms, e.g. "64M", "1.5G", "1.5MB/s", "12.3ms"; they parse
 * back to the same value when they are exact (a size or rate with more
 * than one significant decimal is shown rounded to one).  Return buf. */
#define CW_UNITS_BUF 32
char *cw_units_format_size(uint64_t bytes, char buf[CW_UNITS_BUF]);
char *cw_units_format_rate(uint64_t bytes_per_s, char buf[CW_UNITS_BUF]);
char *cw_units_format_duration(int64_t ns, char buf[CW_UNITS_BUF]);

#endif
