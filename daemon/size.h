/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Sizes on command lines: a decimal number with an optional k, M, G or T
 * suffix (powers of 1024).  Shared by clockwised and cwpool. */
#ifndef CWD_SIZE_H
#define CWD_SIZE_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

static inline int cwd_parse_size(const char *s, uint64_t *ret)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	errno = 0;
	if (!*s || *s == '-')
		return -EINVAL;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: break;
	}
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*ret = (uint64_t)v << shift;
	return 0;
}

#endif
