/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* proto: private helpers of the wire codecs (NBD now, control later). */
#ifndef CW_PROTO_H
#define CW_PROTO_H

#include <stdint.h>
#include <string.h>
#include <endian.h>

/* Unaligned big-endian loads and stores: wire buffers have no alignment. */
static inline uint16_t cw_get_be16(const void *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return be16toh(v);
}

static inline uint32_t cw_get_be32(const void *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return be32toh(v);
}

static inline uint64_t cw_get_be64(const void *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return be64toh(v);
}

static inline void cw_put_be16(void *p, uint16_t v)
{
	v = htobe16(v);
	memcpy(p, &v, sizeof(v));
}

static inline void cw_put_be32(void *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void cw_put_be64(void *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, sizeof(v));
}

#endif
