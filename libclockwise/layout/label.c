/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Disk labels: the first bytes of block 0 of every disk say which pool and
 * which disk it is, so a pool reassembles by identity, never by path.
 *
 * Layout (little-endian):
 *   0  magic "CLKWISE\x01"    8
 *   8  format version        u32
 *  12  label bytes covered   u32  (72: through the checksum field)
 *  16  pool UUID             16
 *  32  disk UUID             16
 *  48  block size            u32
 *  52  tier                  u32
 *  56  blocks on the disk    u64  (label block included)
 *  64  reserved              u32  (0)
 *  68  CRC-32C of bytes 0..67
 * The rest of the 4 KiB is zero.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "layout/layout-internal.h"

#define LABEL_COVERED 72

/* CRC-32C (Castagnoli), bit by bit: labels are 68 bytes, speed is moot. */
uint32_t lay_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	crc = ~crc;
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (UINT32_C(0x82F63B78) & -(crc & 1));
	}
	return ~crc;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

void lay_label_encode(const struct label *l, uint8_t buf[LABEL_BYTES])
{
	memset(buf, 0, LABEL_BYTES);
	memcpy(buf, LABEL_MAGIC, 8);
	put32(buf + 8, l->version);
	put32(buf + 12, LABEL_COVERED);
	memcpy(buf + 16, l->pool_uuid, 16);
	memcpy(buf + 32, l->disk_uuid, 16);
	put32(buf + 48, l->block_size);
	put32(buf + 52, l->tier);
	put64(buf + 56, l->nblocks);
	put32(buf + 68, lay_crc32c(0, buf, 68));
}

int lay_label_decode(const uint8_t buf[LABEL_BYTES], struct label *ret)
{
	if (memcmp(buf, LABEL_MAGIC, 8) != 0)
		return -ENOMSG;
	if (get32(buf + 12) != LABEL_COVERED || get32(buf + 68) != lay_crc32c(0, buf, 68))
		return -EUCLEAN;
	ret->version = get32(buf + 8);
	memcpy(ret->pool_uuid, buf + 16, 16);
	memcpy(ret->disk_uuid, buf + 32, 16);
	ret->block_size = get32(buf + 48);
	ret->tier = get32(buf + 52);
	ret->nblocks = get64(buf + 56);
	if (ret->version != LABEL_VERSION || ret->tier > CW_TIER_RBD || ret->nblocks < 2)
		return -EUCLEAN;
	return 0;
}

/* 16 random bytes, marked as an RFC 4122 version 4 UUID. */
int lay_uuid_random(uint8_t ret[16])
{
	size_t got = 0;

	while (got < 16) {
		ssize_t n = getrandom(ret + got, 16 - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	ret[6] = (ret[6] & 0x0f) | 0x40;
	ret[8] = (ret[8] & 0x3f) | 0x80;
	return 0;
}

void cw_uuid_format(const uint8_t uuid[16], char buf[CW_UUID_STRING_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	char *o = buf;

	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*o++ = '-';
		*o++ = hex[uuid[i] >> 4];
		*o++ = hex[uuid[i] & 15];
	}
	*o = '\0';
}
