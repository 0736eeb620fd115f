/* Description: the NBD codec encodes every message byte for byte as the
 * protocol lays it out, answers each option and malformed option with the
 * right reply, and judges every malformed request. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/nbd.h>
#include "common/util.h"
#include <clockwise/layout.h>

#include "proto/proto-internal.h"
#include "cwtest.h"

static const struct cw_nbd_export_info exports[] = {
	{ .name = "disk0", .description = "first disk", .size = 1 << 20,
	  .eflags = CW_NBD_FLAG_HAS_FLAGS | CW_NBD_FLAG_SEND_FLUSH | CW_NBD_FLAG_SEND_FUA,
	  .min_block = 1, .pref_block = 4096, .max_block = 1 << 25 },
	{ .name = "ro", .description = NULL, .size = 4096,
	  .eflags = CW_NBD_FLAG_HAS_FLAGS | CW_NBD_FLAG_READ_ONLY },
	{ .name = "aligned", .description = "4k only", .size = 1 << 24,
	  .eflags = CW_NBD_FLAG_HAS_FLAGS, .min_block = 4096, .pref_block = 4096,
	  .max_block = 1 << 20, .block_status = true },
};

static struct cw_nbd_handshake hs;
static struct cw_nbd_buf out;

/* A fresh handshake past the client flags. */
static void hs_start(uint32_t cflags)
{
	uint8_t b[4];

	memset(&hs, 0, sizeof(hs));
	hs.exports = exports;
	hs.n_exports = CW_ARRAY_SIZE(exports);
	hs.default_export = -1;
	cw_nbd_hs_reset(&hs);
	out.len = 0;
	cw_put_be32(b, cflags);
	CU_ASSERT_EQUAL_FATAL(cw_nbd_hs_client_flags(&hs, b), 0);
}

static int opt(uint32_t option, const void *data, uint32_t len)
{
	struct cw_nbd_option o = { .option = option, .length = len };

	out.len = 0;
	return cw_nbd_hs_option(&hs, &o, data, &out);
}

/* Builds an INFO/GO payload: name, then n info requests. */
static uint32_t info_payload(uint8_t *b, const char *name, const uint16_t *req, unsigned n)
{
	uint32_t nl = (uint32_t)strlen(name);
	unsigned i;

	cw_put_be32(b, nl);
	memcpy(b + 4, name, nl);
	cw_put_be16(b + 4 + nl, (uint16_t)n);
	for (i = 0; i < n; i++)
		cw_put_be16(b + 6 + nl + 2 * i, req[i]);
	return 6 + nl + 2 * n;
}

/* Walks the option replies in out: checks each header and calls back. */
struct rep {
	uint32_t reply;
	uint32_t length;
	const uint8_t *data;
};

static unsigned replies(uint32_t option, struct rep *r, unsigned max)
{
	size_t at = 0;
	unsigned n = 0;

	while (at < out.len) {
		struct cw_nbd_option_reply h;

		CU_ASSERT_FATAL(out.len - at >= CW_NBD_OPTION_REPLY_BYTES);
		CU_ASSERT_EQUAL_FATAL(cw_nbd_decode_option_reply(out.data + at, &h), 0);
		CU_ASSERT_EQUAL(h.option, option);
		CU_ASSERT_FATAL(out.len - at - CW_NBD_OPTION_REPLY_BYTES >= h.length);
		CU_ASSERT_FATAL(n < max);
		r[n].reply = h.reply;
		r[n].length = h.length;
		r[n].data = out.data + at + CW_NBD_OPTION_REPLY_BYTES;
		n++;
		at += CW_NBD_OPTION_REPLY_BYTES + h.length;
	}
	return n;
}

static void test_greeting(void)
{
	uint8_t b[CW_NBD_GREETING_BYTES];

	cw_nbd_encode_greeting(b);
	CU_ASSERT_EQUAL(memcmp(b, "NBDMAGICIHAVEOPT", 16), 0);
	CU_ASSERT_EQUAL(b[16], 0);
	CU_ASSERT_EQUAL(b[17], CW_NBD_FLAG_FIXED_NEWSTYLE | CW_NBD_FLAG_NO_ZEROES);
	CU_ASSERT_EQUAL(cw_nbd_decode_greeting(b), 3);
	b[3] ^= 1;
	CU_ASSERT_EQUAL(cw_nbd_decode_greeting(b), -EBADMSG);
}

static void test_client_flags(void)
{
	uint8_t b[4];

	memset(&hs, 0, sizeof(hs));
	cw_nbd_hs_reset(&hs);
	cw_put_be32(b, CW_NBD_FLAG_C_FIXED_NEWSTYLE | CW_NBD_FLAG_C_NO_ZEROES);
	CU_ASSERT_EQUAL(cw_nbd_hs_client_flags(&hs, b), 0);
	CU_ASSERT_EQUAL(hs.cflags, 3u);
	/* Unknown bit: the server must drop the client. */
	cw_put_be32(b, CW_NBD_FLAG_C_FIXED_NEWSTYLE | 4);
	CU_ASSERT_EQUAL(cw_nbd_hs_client_flags(&hs, b), -EPROTO);
	cw_put_be32(b, UINT32_C(1) << 31 | 1);
	CU_ASSERT_EQUAL(cw_nbd_hs_client_flags(&hs, b), -EPROTO);
	/* Plain newstyle cannot receive option errors. */
	cw_put_be32(b, 0);
	CU_ASSERT_EQUAL(cw_nbd_hs_client_flags(&hs, b), -EPROTO);
}

static void test_option_header(void)
{
	uint8_t b[CW_NBD_OPTION_BYTES];
	struct cw_nbd_option o;

	cw_nbd_encode_option(b, CW_NBD_OPT_GO, 77);
	CU_ASSERT_EQUAL(memcmp(b, "IHAVEOPT", 8), 0);
	CU_ASSERT_EQUAL(cw_get_be32(b + 8), CW_NBD_OPT_GO);
	CU_ASSERT_EQUAL(cw_get_be32(b + 12), 77u);
	CU_ASSERT_EQUAL(cw_nbd_decode_option(b, &o), 0);
	CU_ASSERT_EQUAL(o.option, CW_NBD_OPT_GO);
	CU_ASSERT_EQUAL(o.length, 77u);
	b[0] = 'X';
	CU_ASSERT_EQUAL(cw_nbd_decode_option(b, &o), -EBADMSG);
}

static void test_opt_list(void)
{
	struct rep r[8];
	unsigned n;

	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_LIST, NULL, 0), CW_NBD_HS_CONTINUE);
	n = replies(CW_NBD_OPT_LIST, r, 8);
	CU_ASSERT_EQUAL_FATAL(n, 4);
	CU_ASSERT_EQUAL(r[0].reply, CW_NBD_REP_SERVER);
	CU_ASSERT_EQUAL(cw_get_be32(r[0].data), 5u);
	CU_ASSERT_EQUAL(memcmp(r[0].data + 4, "disk0first disk", 15), 0);
	CU_ASSERT_EQUAL(r[0].length, 4u + 5 + 10);
	CU_ASSERT_EQUAL(r[1].length, 4u + 2);	/* no description */
	CU_ASSERT_EQUAL(r[2].reply, CW_NBD_REP_SERVER);
	CU_ASSERT_EQUAL(r[3].reply, CW_NBD_REP_ACK);
	CU_ASSERT_EQUAL(r[3].length, 0u);

	/* LIST with data is invalid, and changes nothing. */
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_LIST, "x", 1), CW_NBD_HS_CONTINUE);
	n = replies(CW_NBD_OPT_LIST, r, 8);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(r[0].reply, CW_NBD_REP_ERR_INVALID);
	CU_ASSERT(r[0].length > 0);	/* carries a message */
	CU_ASSERT_EQUAL(hs.export_index, -1);
}

static void test_opt_info_and_go(void)
{
	uint8_t b[64];
	uint16_t req[] = { CW_NBD_INFO_NAME, CW_NBD_INFO_DESCRIPTION,
			   CW_NBD_INFO_BLOCK_SIZE, 999 };
	struct cw_nbd_export_info got = { 0 };
	char name[64], desc[64];
	struct rep r[8];
	uint32_t len;
	unsigned n, i;

	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	len = info_payload(b, "disk0", req, 4);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_INFO, b, len), CW_NBD_HS_CONTINUE);
	n = replies(CW_NBD_OPT_INFO, r, 8);
	CU_ASSERT_EQUAL_FATAL(n, 5);	/* export, block size, name, desc, ack */
	for (i = 0; i < 4; i++) {
		int t;

		CU_ASSERT_EQUAL(r[i].reply, CW_NBD_REP_INFO);
		t = cw_nbd_decode_info(r[i].data, r[i].length, &got,
				       cw_get_be16(r[i].data) == CW_NBD_INFO_NAME ? name : desc, 64);
		CU_ASSERT(t >= 0);
	}
	CU_ASSERT_EQUAL(cw_get_be16(r[0].data), CW_NBD_INFO_EXPORT);
	CU_ASSERT_EQUAL(r[0].length, 12u);
	CU_ASSERT_EQUAL(got.size, exports[0].size);
	CU_ASSERT_EQUAL(got.eflags, exports[0].eflags);
	CU_ASSERT_EQUAL(r[1].length, 14u);
	CU_ASSERT_EQUAL(got.min_block, 1u);
	CU_ASSERT_EQUAL(got.pref_block, 4096u);
	CU_ASSERT_EQUAL(got.max_block, 1u << 25);
	CU_ASSERT_STRING_EQUAL(name, "disk0");
	CU_ASSERT_STRING_EQUAL(desc, "first disk");
	CU_ASSERT_EQUAL(r[4].reply, CW_NBD_REP_ACK);
	CU_ASSERT_EQUAL(hs.export_index, -1);	/* INFO does not choose */

	/* GO without requests: export info and ack, then transmission. */
	len = info_payload(b, "ro", NULL, 0);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_GO, b, len), CW_NBD_HS_TRANSMIT);
	n = replies(CW_NBD_OPT_GO, r, 8);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(cw_get_be16(r[0].data), CW_NBD_INFO_EXPORT);
	CU_ASSERT_EQUAL(cw_get_be64(r[0].data + 2), 4096u);
	CU_ASSERT(cw_get_be16(r[0].data + 10) & CW_NBD_FLAG_READ_ONLY);
	CU_ASSERT_EQUAL(r[1].reply, CW_NBD_REP_ACK);
	CU_ASSERT_EQUAL(hs.export_index, 1);
	CU_ASSERT_FALSE(hs.block_size_known);
}

static void test_opt_go_default_and_errors(void)
{
	uint8_t b[CW_NBD_OPT_DATA_MAX];
	uint16_t bs = CW_NBD_INFO_BLOCK_SIZE;
	struct rep r[8];
	uint32_t len;

	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	/* Empty name without a default export: unknown. */
	len = info_payload(b, "", NULL, 0);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_GO, b, len), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL_FATAL(replies(CW_NBD_OPT_GO, r, 8), 1);
	CU_ASSERT_EQUAL(r[0].reply, CW_NBD_REP_ERR_UNKNOWN);
	hs.default_export = 0;
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_GO, b, len), CW_NBD_HS_TRANSMIT);
	CU_ASSERT_EQUAL(hs.export_index, 0);

	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	len = info_payload(b, "nosuch", NULL, 0);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_GO, b, len), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL_FATAL(replies(CW_NBD_OPT_GO, r, 8), 1);
	CU_ASSERT_EQUAL(r[0].reply, CW_NBD_REP_ERR_UNKNOWN);

	/* A name with a NUL inside never matches. */
	len = info_payload(b, "disk0", NULL, 0);
	b[6] = 0;
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_GO, b, len), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL(replies(CW_NBD_OPT_GO, r, 8), 1);
	CU_ASSERT_EQUAL(r[0].reply, CW_NBD_REP_ERR_UNKNOWN);

	/* Too short, name longer than the payload, count mismatch. */
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_GO, b, 5), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL(replies(CW_NBD_OPT_GO, r, 8), 1);
	CU_ASSERT_EQUAL(r[0].reply, CW_NBD_REP_ERR_INVALID);
	len = info_payload(b, "disk0", NULL, 0);
	cw_put_be32(b, 100);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_GO, b, len), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL(replies(CW_NBD_OPT_GO, r, 8), 1);
	CU_ASSERT_EQUAL(r[0].reply, CW_NBD_REP_ERR_INVALID);
	len = info_payload(b, "disk0", NULL, 0);
	cw_put_be16(b + 4 + 5, 3);	/* claims 3 requests, carries none */
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_GO, b, len), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL(replies(CW_NBD_OPT_GO, r, 8), 1);
	CU_ASSERT_EQUAL(r[0].reply, CW_NBD_REP_ERR_INVALID);
	/* A name over the 4096-byte string limit. */
	memset(b, 'a', sizeof(b));
	cw_put_be32(b, CW_NBD_STRING_MAX + 1);
	cw_put_be16(b + 4 + CW_NBD_STRING_MAX + 1, 0);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_GO, b, 4 + CW_NBD_STRING_MAX + 1 + 2), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL(replies(CW_NBD_OPT_GO, r, 8), 1);
	CU_ASSERT_EQUAL(r[0].reply, CW_NBD_REP_ERR_INVALID);

	/* A client that does not ask for the block size of an aligned-only
	 * export is served, and told a minimum of 1 (the server does
	 * read-modify-write for it); one that asks learns the real one. */
	len = info_payload(b, "aligned", NULL, 0);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_GO, b, len), CW_NBD_HS_TRANSMIT);
	CU_ASSERT_EQUAL_FATAL(replies(CW_NBD_OPT_GO, r, 8), 3);
	CU_ASSERT_EQUAL(cw_get_be16(r[1].data), CW_NBD_INFO_BLOCK_SIZE);
	CU_ASSERT_EQUAL(cw_get_be32(r[1].data + 2), 1u);
	CU_ASSERT_EQUAL(cw_get_be32(r[1].data + 6), 4096u);
	CU_ASSERT_EQUAL(r[2].reply, CW_NBD_REP_ACK);
	CU_ASSERT_FALSE(hs.block_size_known);
	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	len = info_payload(b, "aligned", &bs, 1);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_GO, b, len), CW_NBD_HS_TRANSMIT);
	CU_ASSERT_EQUAL(replies(CW_NBD_OPT_GO, r, 8), 3);
	CU_ASSERT_EQUAL(cw_get_be16(r[1].data), CW_NBD_INFO_BLOCK_SIZE);
	CU_ASSERT_EQUAL(cw_get_be32(r[1].data + 2), 4096u);
	CU_ASSERT_TRUE(hs.block_size_known);
	CU_ASSERT_EQUAL(hs.export_index, 2);
}

static void test_opt_export_name(void)
{
	uint8_t zero[124] = { 0 };

	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_EXPORT_NAME, "disk0", 5), CW_NBD_HS_TRANSMIT);
	CU_ASSERT_EQUAL_FATAL(out.len, 10u + 124);
	CU_ASSERT_EQUAL(cw_get_be64(out.data), exports[0].size);
	CU_ASSERT_EQUAL(cw_get_be16(out.data + 8), exports[0].eflags);
	CU_ASSERT_EQUAL(memcmp(out.data + 10, zero, 124), 0);
	CU_ASSERT_EQUAL(hs.export_index, 0);

	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE | CW_NBD_FLAG_C_NO_ZEROES);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_EXPORT_NAME, "ro", 2), CW_NBD_HS_TRANSMIT);
	CU_ASSERT_EQUAL(out.len, 10u);
	CU_ASSERT_EQUAL(hs.export_index, 1);

	/* No error reply exists for EXPORT_NAME: an unknown name closes. */
	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_EXPORT_NAME, "nosuch", 6), -EPROTO);
	CU_ASSERT_EQUAL(out.len, 0u);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_EXPORT_NAME, NULL, 100000), -EPROTO);
}

/* "EXPORT@CLASS" selects EXPORT and names a connection class, with GO
 * and with EXPORT_NAME; INFO names none; a bad class or an unknown
 * export is no export. */
static void test_client_class(void)
{
	uint8_t b[128];
	uint32_t len;

	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	len = info_payload(b, "disk0@backup", NULL, 0);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_INFO, b, len), CW_NBD_HS_CONTINUE);
	CU_ASSERT_STRING_EQUAL(hs.client_class, "");
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_GO, b, len), CW_NBD_HS_TRANSMIT);
	CU_ASSERT_EQUAL(hs.export_index, 0);
	CU_ASSERT_STRING_EQUAL(hs.client_class, "backup");

	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_EXPORT_NAME, "ro@a.b_c-1", 10), CW_NBD_HS_TRANSMIT);
	CU_ASSERT_EQUAL(hs.export_index, 1);
	CU_ASSERT_STRING_EQUAL(hs.client_class, "a.b_c-1");
	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_EXPORT_NAME, "ro", 2), CW_NBD_HS_TRANSMIT);
	CU_ASSERT_STRING_EQUAL(hs.client_class, "");	/* reset, none named */

	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_EXPORT_NAME, "ro@", 3), -EPROTO);
	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_EXPORT_NAME, "ro@-x", 5), -EPROTO);
	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_EXPORT_NAME, "ro@a/b", 6), -EPROTO);
	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_EXPORT_NAME, "rx@backup", 9), -EPROTO);
	/* 32 bytes of class: one too many; 31 fit */
	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_EXPORT_NAME, "ro@0123456789012345678901234567890x", 35),
			-EPROTO);
	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_EXPORT_NAME, "ro@012345678901234567890123456789x", 34),
			CW_NBD_HS_TRANSMIT);
	CU_ASSERT_EQUAL(strlen(hs.client_class), CW_NBD_CLASS_MAX);
	CU_ASSERT_TRUE(cw_client_name_valid("media@backup"));
	CU_ASSERT_TRUE(cw_client_name_valid("media"));
	CU_ASSERT_FALSE(cw_client_name_valid("media@"));
	CU_ASSERT_FALSE(cw_client_name_valid("@backup"));
	CU_ASSERT_FALSE(cw_client_name_valid("media@a@b"));
	CU_ASSERT_FALSE(cw_client_name_valid("media@0123456789012345678901234567890x"));
}

static void test_opt_abort_structured_unsup(void)
{
	struct rep r[4];
	uint32_t unsup[] = { CW_NBD_OPT_STARTTLS, CW_NBD_OPT_EXTENDED_HEADERS, 4, 12,
			     0, 0xffffffffu };
	unsigned i;

	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_STRUCTURED_REPLY, "x", 1), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL(replies(CW_NBD_OPT_STRUCTURED_REPLY, r, 4), 1);
	CU_ASSERT_EQUAL(r[0].reply, CW_NBD_REP_ERR_INVALID);
	CU_ASSERT_FALSE(hs.structured);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_STRUCTURED_REPLY, NULL, 0), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL(replies(CW_NBD_OPT_STRUCTURED_REPLY, r, 4), 1);
	CU_ASSERT_EQUAL(r[0].reply, CW_NBD_REP_ACK);
	CU_ASSERT_TRUE(hs.structured);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_STRUCTURED_REPLY, NULL, 0), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL(replies(CW_NBD_OPT_STRUCTURED_REPLY, r, 4), 1);
	CU_ASSERT_EQUAL(r[0].reply, CW_NBD_REP_ERR_INVALID);

	for (i = 0; i < CW_ARRAY_SIZE(unsup); i++) {
		CU_ASSERT_EQUAL(opt(unsup[i], "abc", 3), CW_NBD_HS_CONTINUE);
		CU_ASSERT_EQUAL(replies(unsup[i], r, 4), 1);
		CU_ASSERT_EQUAL(r[0].reply, CW_NBD_REP_ERR_UNSUP);
	}
	/* Oversized data the server did not keep. */
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_GO, NULL, 1 << 20), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL(replies(CW_NBD_OPT_GO, r, 4), 1);
	CU_ASSERT_EQUAL(r[0].reply, CW_NBD_REP_ERR_TOO_BIG);

	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_ABORT, NULL, 0), CW_NBD_HS_CLOSE);
	CU_ASSERT_EQUAL(replies(CW_NBD_OPT_ABORT, r, 4), 1);
	CU_ASSERT_EQUAL(r[0].reply, CW_NBD_REP_ACK);
}

static void test_opt_count_limit(void)
{
	unsigned i;
	int v = 0;

	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	for (i = 0; i < CW_NBD_OPT_COUNT_MAX; i++) {
		v = opt(CW_NBD_OPT_LIST, NULL, 0);
		CU_ASSERT_EQUAL_FATAL(v, CW_NBD_HS_CONTINUE);
	}
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_LIST, NULL, 0), -EPROTO);
}

/* ---- transmission ---- */

static const struct cw_nbd_limits rw = {
	.size = 1 << 20,
	.eflags = CW_NBD_FLAG_HAS_FLAGS | CW_NBD_FLAG_SEND_FLUSH | CW_NBD_FLAG_SEND_FUA |
		  CW_NBD_FLAG_SEND_TRIM | CW_NBD_FLAG_SEND_WRITE_ZEROES,
	.min_block = 512,
	.max_request = 1 << 16,
	.structured = false,
};

static struct cw_nbd_verdict check(const struct cw_nbd_limits *lim, uint16_t type,
				   uint16_t flags, uint64_t off, uint32_t len)
{
	struct cw_nbd_request in = { .flags = flags, .type = type, .cookie = 0x1122334455667788,
				     .offset = off, .length = len };
	struct cw_nbd_request out_req;
	uint8_t b[CW_NBD_REQUEST_BYTES];

	/* Every request goes through the wire form first. */
	cw_nbd_encode_request(b, &in);
	CU_ASSERT_EQUAL(cw_nbd_decode_request(b, &out_req), 0);
	CU_ASSERT_EQUAL(out_req.flags, in.flags);
	CU_ASSERT_EQUAL(out_req.type, in.type);
	CU_ASSERT_EQUAL(out_req.cookie, in.cookie);
	CU_ASSERT_EQUAL(out_req.offset, in.offset);
	CU_ASSERT_EQUAL(out_req.length, in.length);
	return cw_nbd_check_request(lim, &out_req);
}

#define EXPECT(v, act, err, pay) do { \
	struct cw_nbd_verdict v_ = (v); \
	CU_ASSERT_EQUAL(v_.action, act); \
	CU_ASSERT_EQUAL(v_.error, err); \
	CU_ASSERT_EQUAL(v_.payload, pay); \
} while (0)

static void test_request_wire(void)
{
	struct cw_nbd_request r = { .flags = 1, .type = CW_NBD_CMD_WRITE, .cookie = 7,
				    .offset = 0x0102030405060708, .length = 0x0a0b0c0d };
	uint8_t b[CW_NBD_REQUEST_BYTES];
	const uint8_t want[CW_NBD_REQUEST_BYTES] = {
		0x25, 0x60, 0x95, 0x13, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7,
		1, 2, 3, 4, 5, 6, 7, 8, 0x0a, 0x0b, 0x0c, 0x0d };

	cw_nbd_encode_request(b, &r);
	CU_ASSERT_EQUAL(memcmp(b, want, sizeof(b)), 0);
	b[0] = 0;
	CU_ASSERT_EQUAL(cw_nbd_decode_request(b, &r), -EBADMSG);
}

static void test_request_valid(void)
{
	EXPECT(check(&rw, CW_NBD_CMD_READ, 0, 0, 4096), CW_NBD_EXEC, 0, 0);
	EXPECT(check(&rw, CW_NBD_CMD_READ, CW_NBD_CMD_FLAG_FUA, 512, 512), CW_NBD_EXEC, 0, 0);
	EXPECT(check(&rw, CW_NBD_CMD_WRITE, 0, (1 << 20) - 4096, 4096), CW_NBD_EXEC, 0, 4096);
	EXPECT(check(&rw, CW_NBD_CMD_WRITE, CW_NBD_CMD_FLAG_FUA, 0, 1 << 16), CW_NBD_EXEC, 0,
	       1 << 16);
	EXPECT(check(&rw, CW_NBD_CMD_FLUSH, 0, 0, 0), CW_NBD_EXEC, 0, 0);
	EXPECT(check(&rw, CW_NBD_CMD_TRIM, CW_NBD_CMD_FLAG_FUA, 0, 1 << 20), CW_NBD_EXEC, 0, 0);
	/* TRIM and WRITE_ZEROES carry no payload: the maximum is not theirs. */
	EXPECT(check(&rw, CW_NBD_CMD_WRITE_ZEROES, CW_NBD_CMD_FLAG_NO_HOLE, 0, 1 << 20),
	       CW_NBD_EXEC, 0, 0);
	EXPECT(check(&rw, CW_NBD_CMD_DISC, 0, 0, 0), CW_NBD_DISCONNECT, 0, 0);
}

static void test_request_malformed(void)
{
	struct cw_nbd_limits ro = rw, st = rw, bare = rw;

	ro.eflags |= CW_NBD_FLAG_READ_ONLY;
	st.structured = true;
	bare.eflags = CW_NBD_FLAG_HAS_FLAGS;

	/* Unknown and unnegotiated commands. */
	EXPECT(check(&rw, 9, 0, 0, 512), CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0);
	EXPECT(check(&rw, 0xffff, 0, 0, 0), CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0);
	EXPECT(check(&rw, CW_NBD_CMD_CACHE, 0, 0, 512), CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0);
	EXPECT(check(&rw, CW_NBD_CMD_BLOCK_STATUS, 0, 0, 512), CW_NBD_REPLY_ERROR,
	       CW_NBD_EINVAL, 0);
	/* Commands the export did not offer. */
	EXPECT(check(&bare, CW_NBD_CMD_FLUSH, 0, 0, 0), CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0);
	EXPECT(check(&bare, CW_NBD_CMD_TRIM, 0, 0, 512), CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0);
	EXPECT(check(&bare, CW_NBD_CMD_WRITE_ZEROES, 0, 0, 512), CW_NBD_REPLY_ERROR,
	       CW_NBD_EINVAL, 0);
	/* Flags not valid for the command; a write's payload is discarded. */
	EXPECT(check(&rw, CW_NBD_CMD_READ, CW_NBD_CMD_FLAG_NO_HOLE, 0, 512), CW_NBD_REPLY_ERROR,
	       CW_NBD_EINVAL, 0);
	EXPECT(check(&rw, CW_NBD_CMD_READ, CW_NBD_CMD_FLAG_DF, 0, 512), CW_NBD_REPLY_ERROR,
	       CW_NBD_EINVAL, 0);
	EXPECT(check(&st, CW_NBD_CMD_READ, CW_NBD_CMD_FLAG_DF, 0, 512), CW_NBD_EXEC, 0, 0);
	EXPECT(check(&rw, CW_NBD_CMD_WRITE, 0x8000, 0, 512), CW_NBD_REPLY_ERROR, CW_NBD_EINVAL,
	       512);
	EXPECT(check(&rw, CW_NBD_CMD_TRIM, CW_NBD_CMD_FLAG_REQ_ONE, 0, 512), CW_NBD_REPLY_ERROR,
	       CW_NBD_EINVAL, 0);
	/* FLUSH with a range. */
	EXPECT(check(&rw, CW_NBD_CMD_FLUSH, 0, 512, 0), CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0);
	EXPECT(check(&rw, CW_NBD_CMD_FLUSH, 0, 0, 512), CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0);
	/* Read-only export. */
	EXPECT(check(&ro, CW_NBD_CMD_WRITE, 0, 0, 512), CW_NBD_REPLY_ERROR, CW_NBD_EPERM, 512);
	EXPECT(check(&ro, CW_NBD_CMD_TRIM, 0, 0, 512), CW_NBD_REPLY_ERROR, CW_NBD_EPERM, 0);
	EXPECT(check(&ro, CW_NBD_CMD_WRITE_ZEROES, 0, 0, 512), CW_NBD_REPLY_ERROR, CW_NBD_EPERM,
	       0);
	EXPECT(check(&ro, CW_NBD_CMD_READ, 0, 0, 512), CW_NBD_EXEC, 0, 0);
	/* Zero length. */
	EXPECT(check(&rw, CW_NBD_CMD_READ, 0, 0, 0), CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0);
	EXPECT(check(&rw, CW_NBD_CMD_WRITE, 0, 0, 0), CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0);
	/* Out of range, including offsets whose sum wraps 64 bits. */
	EXPECT(check(&rw, CW_NBD_CMD_READ, 0, 1 << 20, 512), CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0);
	EXPECT(check(&rw, CW_NBD_CMD_READ, 0, (1 << 20) - 512, 1024), CW_NBD_REPLY_ERROR,
	       CW_NBD_EINVAL, 0);
	EXPECT(check(&rw, CW_NBD_CMD_READ, 0, UINT64_MAX - 511, 1024), CW_NBD_REPLY_ERROR,
	       CW_NBD_EINVAL, 0);
	EXPECT(check(&rw, CW_NBD_CMD_WRITE, 0, UINT64_MAX - 511, 1024), CW_NBD_REPLY_ERROR,
	       CW_NBD_ENOSPC, 1024);
	/* Trimming past the end is invalid, not out of space. */
	EXPECT(check(&rw, CW_NBD_CMD_TRIM, 0, 1 << 20, 512), CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0);
	EXPECT(check(&rw, CW_NBD_CMD_TRIM, 0, (1 << 20) - 512, 1024), CW_NBD_REPLY_ERROR,
	       CW_NBD_EINVAL, 0);
	EXPECT(check(&rw, CW_NBD_CMD_WRITE_ZEROES, 0, 0, (1 << 20) + 512), CW_NBD_REPLY_ERROR,
	       CW_NBD_ENOSPC, 0);
	/* Misaligned. */
	EXPECT(check(&rw, CW_NBD_CMD_READ, 0, 1, 512), CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0);
	EXPECT(check(&rw, CW_NBD_CMD_WRITE, 0, 0, 100), CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 100);
	/* Oversized: a read gets EINVAL, or EOVERFLOW when it asked not to
	 * be fragmented (DF); a write closes the stream. */
	EXPECT(check(&rw, CW_NBD_CMD_READ, 0, 0, (1 << 16) + 512), CW_NBD_REPLY_ERROR,
	       CW_NBD_EINVAL, 0);
	EXPECT(check(&st, CW_NBD_CMD_READ, 0, 0, (1 << 16) + 512), CW_NBD_REPLY_ERROR,
	       CW_NBD_EINVAL, 0);
	EXPECT(check(&st, CW_NBD_CMD_READ, CW_NBD_CMD_FLAG_DF, 0, (1 << 16) + 512),
	       CW_NBD_REPLY_ERROR, CW_NBD_EOVERFLOW, 0);
	EXPECT(check(&rw, CW_NBD_CMD_WRITE, 0, 0, (1 << 16) + 512), CW_NBD_DISCONNECT, 0, 0);
	EXPECT(check(&rw, CW_NBD_CMD_WRITE, 0, 0, UINT32_MAX), CW_NBD_DISCONNECT, 0, 0);
}

/* ---- replies ---- */

static void test_simple_replies(void)
{
	uint8_t b[CW_NBD_ERROR_REPLY_MAX];
	const uint8_t want[16] = { 0x67, 0x44, 0x66, 0x98, 0, 0, 0, 22,
				   0, 0, 0, 0, 0, 0, 0x12, 0x34 };
	struct cw_nbd_reply r;

	CU_ASSERT_EQUAL(cw_nbd_encode_error_reply(b, false, 0x1234, CW_NBD_EINVAL, "ignored"), 16u);
	CU_ASSERT_EQUAL(memcmp(b, want, 16), 0);
	CU_ASSERT_EQUAL(cw_nbd_decode_reply(b, 16, &r), 16);
	CU_ASSERT_FALSE(r.structured);
	CU_ASSERT_EQUAL(r.error, 22u);
	CU_ASSERT_EQUAL(r.cookie, 0x1234u);
	CU_ASSERT_EQUAL(cw_nbd_decode_reply(b, 15, &r), -EAGAIN);

	CU_ASSERT_EQUAL(cw_nbd_encode_ok_reply(b, 99), 16u);
	CU_ASSERT_EQUAL(cw_nbd_decode_reply(b, 16, &r), 16);
	CU_ASSERT_EQUAL(r.error, 0u);
	CU_ASSERT_EQUAL(r.cookie, 99u);

	CU_ASSERT_EQUAL(cw_nbd_encode_read_reply(b, false, 5, 4096, 512), 16u);
	CU_ASSERT_EQUAL(cw_nbd_decode_reply(b, 16, &r), 16);
	CU_ASSERT_EQUAL(r.cookie, 5u);
	b[0] = 0;
	CU_ASSERT_EQUAL(cw_nbd_decode_reply(b, 16, &r), -EBADMSG);
}

static void test_structured_replies(void)
{
	uint8_t b[CW_NBD_ERROR_REPLY_MAX + 64];
	char longmsg[300];
	struct cw_nbd_reply r;
	size_t n;

	n = cw_nbd_encode_read_reply(b, true, 0xabcdef, 1 << 20, 4096);
	CU_ASSERT_EQUAL(n, CW_NBD_READ_REPLY_MAX);
	CU_ASSERT_EQUAL(cw_nbd_decode_reply(b, n, &r), 20);
	CU_ASSERT_TRUE(r.structured);
	CU_ASSERT_EQUAL(r.type, CW_NBD_REPLY_TYPE_OFFSET_DATA);
	CU_ASSERT_EQUAL(r.flags, CW_NBD_REPLY_FLAG_DONE);
	CU_ASSERT_EQUAL(r.cookie, 0xabcdefu);
	CU_ASSERT_EQUAL(r.length, 4096u + 8);
	CU_ASSERT_EQUAL(cw_get_be64(b + 20), 1u << 20);
	CU_ASSERT_EQUAL(cw_nbd_decode_reply(b, 19, &r), -EAGAIN);

	n = cw_nbd_encode_error_reply(b, true, 3, CW_NBD_EIO, "disk 2 failed");
	CU_ASSERT_EQUAL(n, 20u + 6 + 13);
	CU_ASSERT_EQUAL(cw_nbd_decode_reply(b, n, &r), 20);
	CU_ASSERT_EQUAL(r.type, CW_NBD_REPLY_TYPE_ERROR);
	CU_ASSERT_EQUAL(r.flags, CW_NBD_REPLY_FLAG_DONE);
	CU_ASSERT_EQUAL(r.length, 6u + 13);
	CU_ASSERT_EQUAL(cw_get_be32(b + 20), CW_NBD_EIO);
	CU_ASSERT_EQUAL(cw_get_be16(b + 24), 13u);
	CU_ASSERT_EQUAL(memcmp(b + 26, "disk 2 failed", 13), 0);

	memset(longmsg, 'm', sizeof(longmsg) - 1);
	longmsg[sizeof(longmsg) - 1] = 0;
	n = cw_nbd_encode_error_reply(b, true, 3, CW_NBD_EIO, longmsg);
	CU_ASSERT_EQUAL(n, CW_NBD_ERROR_REPLY_MAX);
	n = cw_nbd_encode_error_reply(b, true, 3, CW_NBD_EIO, NULL);
	CU_ASSERT_EQUAL(n, 26u);

	cw_nbd_encode_chunk(b, 8, CW_NBD_REPLY_FLAG_DONE, CW_NBD_REPLY_TYPE_NONE, 0);
	CU_ASSERT_EQUAL(cw_nbd_decode_reply(b, 20, &r), 20);
	CU_ASSERT_EQUAL(r.type, CW_NBD_REPLY_TYPE_NONE);
	CU_ASSERT_EQUAL(r.length, 0u);
	CU_ASSERT_EQUAL(memcmp(b, "\x66\x8e\x33\xef\x00\x01\x00\x00", 8), 0);
}

/* A meta context request: name, then queries. */
static uint32_t meta_payload(uint8_t *b, const char *name, const char *const *q, size_t n)
{
	struct cw_nbd_buf o = { 0 };
	uint32_t len;

	CU_ASSERT_EQUAL_FATAL(cw_nbd_encode_meta_query(&o, name, q, n), 0);
	len = (uint32_t)o.len;
	memcpy(b, o.data, o.len);
	free(o.data);
	return len;
}

/* Sends an option that must get exactly one reply, of type want. */
static void one_reply(uint32_t option, const void *data, uint32_t len, uint32_t want)
{
	struct rep r[4];

	CU_ASSERT_EQUAL(opt(option, data, len), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL_FATAL(replies(option, r, 4), 1);
	CU_ASSERT_EQUAL(r[0].reply, want);
}

/* base:allocation is listed and set only on an export that answers
 * BLOCK_STATUS, only for the export then chosen, and SET needs
 * structured replies. */
static void test_meta_context(void)
{
	static const char *const alloc[] = { CW_NBD_META_BASE_ALLOCATION };
	static const char *const base[] = { "base:" };
	static const char *const other[] = { "qemu:dirty-bitmap:x", "base:allocationx" };
	static const char *const mixed[] = { "qemu:dirty-bitmap:x", CW_NBD_META_BASE_ALLOCATION };
	uint16_t req[] = { CW_NBD_INFO_BLOCK_SIZE };
	struct rep r[4];
	uint8_t b[256];
	uint32_t len;

	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	/* LIST: all contexts, "base:", the full name; nothing elsewhere. */
	len = meta_payload(b, "aligned", NULL, 0);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_LIST_META_CONTEXT, b, len), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL_FATAL(replies(CW_NBD_OPT_LIST_META_CONTEXT, r, 4), 2);
	CU_ASSERT_EQUAL(r[0].reply, CW_NBD_REP_META_CONTEXT);
	CU_ASSERT_EQUAL(r[0].length, 4 + strlen(CW_NBD_META_BASE_ALLOCATION));
	CU_ASSERT_EQUAL(cw_get_be32(r[0].data), CW_NBD_META_ID_ALLOCATION);
	CU_ASSERT_EQUAL(memcmp(r[0].data + 4, "base:allocation", 15), 0);
	CU_ASSERT_EQUAL(r[1].reply, CW_NBD_REP_ACK);
	len = meta_payload(b, "aligned", base, 1);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_LIST_META_CONTEXT, b, len), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL(replies(CW_NBD_OPT_LIST_META_CONTEXT, r, 4), 2);
	len = meta_payload(b, "aligned", other, 2);
	one_reply(CW_NBD_OPT_LIST_META_CONTEXT, b, len, CW_NBD_REP_ACK);
	len = meta_payload(b, "disk0", NULL, 0);
	one_reply(CW_NBD_OPT_LIST_META_CONTEXT, b, len, CW_NBD_REP_ACK);
	len = meta_payload(b, "nosuch", NULL, 0);
	one_reply(CW_NBD_OPT_LIST_META_CONTEXT, b, len, CW_NBD_REP_ERR_UNKNOWN);

	/* SET before structured replies is invalid. */
	len = meta_payload(b, "aligned", alloc, 1);
	one_reply(CW_NBD_OPT_SET_META_CONTEXT, b, len, CW_NBD_REP_ERR_INVALID);
	CU_ASSERT_FALSE(hs.meta_allocation);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_STRUCTURED_REPLY, NULL, 0), CW_NBD_HS_CONTINUE);
	/* "base:" does not choose; the full name among others does. */
	len = meta_payload(b, "aligned", base, 1);
	one_reply(CW_NBD_OPT_SET_META_CONTEXT, b, len, CW_NBD_REP_ACK);
	CU_ASSERT_FALSE(hs.meta_allocation);
	len = meta_payload(b, "aligned", mixed, 2);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_SET_META_CONTEXT, b, len), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL_FATAL(replies(CW_NBD_OPT_SET_META_CONTEXT, r, 4), 2);
	CU_ASSERT_EQUAL(r[0].reply, CW_NBD_REP_META_CONTEXT);
	CU_ASSERT_TRUE(hs.meta_allocation);
	/* Malformed: the choice stays. */
	b[len - 1] = 0;
	one_reply(CW_NBD_OPT_SET_META_CONTEXT, b, len - 1, CW_NBD_REP_ERR_INVALID);
	CU_ASSERT_TRUE(hs.meta_allocation);
	one_reply(CW_NBD_OPT_SET_META_CONTEXT, "\0\0\0\0\0\0\0\5", 8, CW_NBD_REP_ERR_INVALID);
	/* GO to that export keeps it, to another drops it. */
	len = info_payload(b, "aligned", req, 1);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_GO, b, len), CW_NBD_HS_TRANSMIT);
	CU_ASSERT_TRUE(hs.meta_allocation);

	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_STRUCTURED_REPLY, NULL, 0), CW_NBD_HS_CONTINUE);
	len = meta_payload(b, "aligned", alloc, 1);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_SET_META_CONTEXT, b, len), CW_NBD_HS_CONTINUE);
	CU_ASSERT_TRUE(hs.meta_allocation);
	len = info_payload(b, "disk0", req, 1);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_GO, b, len), CW_NBD_HS_TRANSMIT);
	CU_ASSERT_FALSE(hs.meta_allocation);
	/* An empty SET chooses nothing. */
	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_STRUCTURED_REPLY, NULL, 0), CW_NBD_HS_CONTINUE);
	len = meta_payload(b, "aligned", alloc, 1);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_SET_META_CONTEXT, b, len), CW_NBD_HS_CONTINUE);
	len = meta_payload(b, "aligned", NULL, 0);
	one_reply(CW_NBD_OPT_SET_META_CONTEXT, b, len, CW_NBD_REP_ACK);
	CU_ASSERT_FALSE(hs.meta_allocation);
}

/* STARTTLS: unsupported where TLS is off; where required, every option
 * but STARTTLS and ABORT is refused until TLS runs, and what was agreed
 * in the clear is forgotten once it does. */
static void test_starttls(void)
{
	uint16_t req[] = { CW_NBD_INFO_BLOCK_SIZE };
	uint32_t opts[] = { CW_NBD_OPT_LIST, CW_NBD_OPT_STRUCTURED_REPLY, CW_NBD_OPT_INFO,
			    CW_NBD_OPT_GO, CW_NBD_OPT_LIST_META_CONTEXT, 12345 };
	uint8_t b[64];
	uint32_t len = info_payload(b, "disk0", req, 1);

	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	one_reply(CW_NBD_OPT_STARTTLS, NULL, 0, CW_NBD_REP_ERR_UNSUP);

	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	hs.tls = CW_NBD_TLS_REQUIRE;
	for (unsigned i = 0; i < CW_ARRAY_SIZE(opts); i++)
		one_reply(opts[i], opts[i] == CW_NBD_OPT_GO || opts[i] == CW_NBD_OPT_INFO ? b : NULL,
			  opts[i] == CW_NBD_OPT_GO || opts[i] == CW_NBD_OPT_INFO ? len : 0,
			  CW_NBD_REP_ERR_TLS_REQD);
	CU_ASSERT_EQUAL(hs.export_index, -1);
	CU_ASSERT_FALSE(hs.structured);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_EXPORT_NAME, "disk0", 5), -EPROTO);
	one_reply(CW_NBD_OPT_STARTTLS, "x", 1, CW_NBD_REP_ERR_INVALID);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_STARTTLS, NULL, 0), CW_NBD_HS_STARTTLS);
	CU_ASSERT_EQUAL(out.len, CW_NBD_OPTION_REPLY_BYTES);
	cw_nbd_hs_tls_started(&hs);
	CU_ASSERT_TRUE(hs.tls_active);
	one_reply(CW_NBD_OPT_STARTTLS, NULL, 0, CW_NBD_REP_ERR_INVALID);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_GO, b, len), CW_NBD_HS_TRANSMIT);
	CU_ASSERT_EQUAL(hs.export_index, 0);

	/* Leaving is allowed in the clear. */
	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	hs.tls = CW_NBD_TLS_REQUIRE;
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_ABORT, NULL, 0), CW_NBD_HS_CLOSE);

	/* Offered: a client may go without; one that starts it loses what
	 * it agreed in the clear. */
	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	hs.tls = CW_NBD_TLS_ON;
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_STRUCTURED_REPLY, NULL, 0), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_STARTTLS, NULL, 0), CW_NBD_HS_STARTTLS);
	cw_nbd_hs_tls_started(&hs);
	CU_ASSERT_FALSE(hs.structured);
	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	hs.tls = CW_NBD_TLS_ON;
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_GO, b, len), CW_NBD_HS_TRANSMIT);
	CU_ASSERT_FALSE(hs.tls_active);
}

/* CACHE, FAST_ZERO and BLOCK_STATUS are valid only where offered. */
static void test_request_new_commands(void)
{
	struct cw_nbd_limits all = rw, meta = rw, nometa = rw;

	all.eflags |= CW_NBD_FLAG_SEND_CACHE | CW_NBD_FLAG_SEND_FAST_ZERO;
	meta.structured = true;
	meta.block_status = true;
	nometa.structured = true;
	EXPECT(check(&all, CW_NBD_CMD_CACHE, 0, 0, 512), CW_NBD_EXEC, 0, 0);
	EXPECT(check(&all, CW_NBD_CMD_CACHE, CW_NBD_CMD_FLAG_NO_HOLE, 0, 512),
	       CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0);
	EXPECT(check(&all, CW_NBD_CMD_CACHE, 0, 1 << 20, 512), CW_NBD_REPLY_ERROR,
	       CW_NBD_EINVAL, 0);
	EXPECT(check(&all, CW_NBD_CMD_WRITE_ZEROES, CW_NBD_CMD_FLAG_FAST_ZERO, 0, 512),
	       CW_NBD_EXEC, 0, 0);
	EXPECT(check(&rw, CW_NBD_CMD_WRITE_ZEROES, CW_NBD_CMD_FLAG_FAST_ZERO, 0, 512),
	       CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0);
	EXPECT(check(&all, CW_NBD_CMD_WRITE, CW_NBD_CMD_FLAG_FAST_ZERO, 0, 512),
	       CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 512);
	EXPECT(check(&meta, CW_NBD_CMD_BLOCK_STATUS, 0, 0, 1 << 20), CW_NBD_EXEC, 0, 0);
	EXPECT(check(&meta, CW_NBD_CMD_BLOCK_STATUS, CW_NBD_CMD_FLAG_REQ_ONE, 0, 512),
	       CW_NBD_EXEC, 0, 0);
	EXPECT(check(&meta, CW_NBD_CMD_BLOCK_STATUS, CW_NBD_CMD_FLAG_DF, 0, 512),
	       CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0);
	EXPECT(check(&meta, CW_NBD_CMD_BLOCK_STATUS, 0, 512, 1 << 20), CW_NBD_REPLY_ERROR,
	       CW_NBD_EINVAL, 0);
	EXPECT(check(&meta, CW_NBD_CMD_BLOCK_STATUS, 0, 0, 0), CW_NBD_REPLY_ERROR,
	       CW_NBD_EINVAL, 0);
	EXPECT(check(&nometa, CW_NBD_CMD_BLOCK_STATUS, 0, 0, 512), CW_NBD_REPLY_ERROR,
	       CW_NBD_EINVAL, 0);
	EXPECT(check(&rw, CW_NBD_CMD_READ, CW_NBD_CMD_FLAG_REQ_ONE, 0, 512), CW_NBD_REPLY_ERROR,
	       CW_NBD_EINVAL, 0);
}

/* A BLOCK_STATUS chunk: header, context id, descriptors in place. */
static void test_block_status_reply(void)
{
	struct cw_nbd_extent ext[2] = { { 4096, CW_NBD_STATE_HOLE | CW_NBD_STATE_ZERO },
					{ 0x10000, 0 } };
	const uint8_t want_ext[16] = { 0, 0, 0x10, 0, 0, 0, 0, 3, 0, 1, 0, 0, 0, 0, 0, 0 };
	uint8_t h[CW_NBD_BLOCK_STATUS_HDR_BYTES];
	struct cw_nbd_reply r;

	CU_ASSERT_EQUAL(cw_nbd_encode_block_status(h, 9, CW_NBD_META_ID_ALLOCATION, ext, 2),
			CW_NBD_BLOCK_STATUS_HDR_BYTES);
	CU_ASSERT_EQUAL(cw_nbd_decode_reply(h, sizeof(h), &r), (int)CW_NBD_CHUNK_BYTES);
	CU_ASSERT_TRUE(r.structured);
	CU_ASSERT_EQUAL(r.type, CW_NBD_REPLY_TYPE_BLOCK_STATUS);
	CU_ASSERT_EQUAL(r.flags, CW_NBD_REPLY_FLAG_DONE);
	CU_ASSERT_EQUAL(r.cookie, 9u);
	CU_ASSERT_EQUAL(r.length, 4u + 16u);
	CU_ASSERT_EQUAL(cw_get_be32(h + CW_NBD_CHUNK_BYTES), CW_NBD_META_ID_ALLOCATION);
	CU_ASSERT_EQUAL(memcmp(ext, want_ext, sizeof(want_ext)), 0);
}

static void test_errno_and_eflags(void)
{
	CU_ASSERT_EQUAL(cw_nbd_errno_to_wire(0), 0u);
	CU_ASSERT_EQUAL(cw_nbd_errno_to_wire(-EIO), CW_NBD_EIO);
	CU_ASSERT_EQUAL(cw_nbd_errno_to_wire(EROFS), CW_NBD_EPERM);
	CU_ASSERT_EQUAL(cw_nbd_errno_to_wire(-EDQUOT), CW_NBD_ENOSPC);
	CU_ASSERT_EQUAL(cw_nbd_errno_to_wire(-EFBIG), CW_NBD_ENOSPC);
	CU_ASSERT_EQUAL(cw_nbd_errno_to_wire(-EINVAL), CW_NBD_EINVAL);
	CU_ASSERT_EQUAL(cw_nbd_errno_to_wire(-EBADF), CW_NBD_EIO);

	CU_ASSERT_EQUAL(cw_nbd_eflags(&(struct cw_nbd_caps){ .read_only = true, .can_flush = true,
			.can_trim = true, .can_zero = true, .can_fast_zero = true,
			.can_cache = true }),
			CW_NBD_FLAG_HAS_FLAGS | CW_NBD_FLAG_READ_ONLY | CW_NBD_FLAG_SEND_CACHE);
	CU_ASSERT_EQUAL(cw_nbd_eflags(&(struct cw_nbd_caps){ .can_flush = true, .can_trim = true,
			.can_zero = true, .multi_conn = true }),
			CW_NBD_FLAG_HAS_FLAGS | CW_NBD_FLAG_SEND_FLUSH | CW_NBD_FLAG_SEND_FUA |
			CW_NBD_FLAG_SEND_TRIM | CW_NBD_FLAG_SEND_WRITE_ZEROES |
			CW_NBD_FLAG_CAN_MULTI_CONN);
	CU_ASSERT_EQUAL(cw_nbd_eflags(&(struct cw_nbd_caps){ .can_zero = true,
			.can_fast_zero = true }),
			CW_NBD_FLAG_HAS_FLAGS | CW_NBD_FLAG_SEND_WRITE_ZEROES |
			CW_NBD_FLAG_SEND_FAST_ZERO);
	CU_ASSERT_EQUAL(cw_nbd_eflags(&(struct cw_nbd_caps){ .can_fast_zero = true }),
			CW_NBD_FLAG_HAS_FLAGS);
}

static void test_df_only_with_structured(void)
{
	struct cw_nbd_export_info e[1] = { { .name = "d", .size = 512,
		.eflags = CW_NBD_FLAG_HAS_FLAGS | CW_NBD_FLAG_SEND_DF } };
	struct rep r[4];
	uint8_t b[16];
	uint32_t len;

	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	hs.exports = e;
	hs.n_exports = 1;
	len = info_payload(b, "d", NULL, 0);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_INFO, b, len), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL_FATAL(replies(CW_NBD_OPT_INFO, r, 4), 2);
	CU_ASSERT_EQUAL(cw_get_be16(r[0].data + 10), CW_NBD_FLAG_HAS_FLAGS);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_STRUCTURED_REPLY, NULL, 0), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_INFO, b, len), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL_FATAL(replies(CW_NBD_OPT_INFO, r, 4), 2);
	CU_ASSERT_EQUAL(cw_get_be16(r[0].data + 10), CW_NBD_FLAG_HAS_FLAGS | CW_NBD_FLAG_SEND_DF);
}

/* Per-client access: an export not granted is neither listed nor
 * opened, one granted read-only is shown read-only. */
static void test_access(void)
{
	static const uint8_t access[] = { CW_NBD_ACCESS_RO, CW_NBD_ACCESS_NONE,
					  CW_NBD_ACCESS_RW };
	uint16_t req[] = { CW_NBD_INFO_BLOCK_SIZE };
	struct rep r[8];
	uint8_t b[64];
	uint32_t len;

	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	hs.access = access;
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_LIST, NULL, 0), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL_FATAL(replies(CW_NBD_OPT_LIST, r, 8), 3);
	CU_ASSERT_EQUAL(memcmp(r[0].data + 4, "disk0", 5), 0);
	CU_ASSERT_EQUAL(memcmp(r[1].data + 4, "aligned", 7), 0);

	len = info_payload(b, "ro", req, 1);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_GO, b, len), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL_FATAL(replies(CW_NBD_OPT_GO, r, 8), 1);
	CU_ASSERT_EQUAL(r[0].reply, CW_NBD_REP_ERR_POLICY);
	CU_ASSERT_EQUAL(hs.export_index, -1);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_EXPORT_NAME, "ro", 2), -EPROTO);

	len = info_payload(b, "disk0", req, 1);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_GO, b, len), CW_NBD_HS_TRANSMIT);
	CU_ASSERT_EQUAL_FATAL(replies(CW_NBD_OPT_GO, r, 8), 3);
	CU_ASSERT_EQUAL(cw_get_be16(r[0].data + 10),
			CW_NBD_FLAG_HAS_FLAGS | CW_NBD_FLAG_READ_ONLY);
	CU_ASSERT_EQUAL(hs.eflags, CW_NBD_FLAG_HAS_FLAGS | CW_NBD_FLAG_READ_ONLY);

	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	hs.access = access;
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_EXPORT_NAME, "aligned", 7), CW_NBD_HS_TRANSMIT);
	CU_ASSERT_EQUAL(hs.eflags, exports[2].eflags);
}

/* A client the server will not serve gets a policy error with the
 * reason for every option, and may still leave politely. */
static void test_refused(void)
{
	uint16_t req[] = { CW_NBD_INFO_BLOCK_SIZE };
	struct rep r[4];
	uint8_t b[64];
	uint32_t len = info_payload(b, "disk0", req, 1);

	hs_start(CW_NBD_FLAG_C_FIXED_NEWSTYLE);
	hs.refuse = "too many connections";
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_GO, b, len), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL_FATAL(replies(CW_NBD_OPT_GO, r, 4), 1);
	CU_ASSERT_EQUAL(r[0].reply, CW_NBD_REP_ERR_POLICY);
	CU_ASSERT_EQUAL(r[0].length, strlen("too many connections"));
	CU_ASSERT_EQUAL(memcmp(r[0].data, "too many connections", r[0].length), 0);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_LIST, NULL, 0), CW_NBD_HS_CONTINUE);
	CU_ASSERT_EQUAL_FATAL(replies(CW_NBD_OPT_LIST, r, 4), 1);
	CU_ASSERT_EQUAL(r[0].reply, CW_NBD_REP_ERR_POLICY);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_EXPORT_NAME, "disk0", 5), -EPROTO);
	CU_ASSERT_EQUAL(opt(CW_NBD_OPT_ABORT, NULL, 0), CW_NBD_HS_CLOSE);
	CU_ASSERT_EQUAL(hs.export_index, -1);
}

int main(void)
{
	CU_pSuite h = cwtest_suite("nbd handshake", NULL, NULL);
	CU_pSuite t = cwtest_suite("nbd transmission", NULL, NULL);
	int r;

	cwtest_add(h, "greeting", test_greeting);
	cwtest_add(h, "client flags", test_client_flags);
	cwtest_add(h, "option header", test_option_header);
	cwtest_add(h, "LIST", test_opt_list);
	cwtest_add(h, "connection classes (EXPORT@CLASS)", test_client_class);
	cwtest_add(h, "INFO and GO", test_opt_info_and_go);
	cwtest_add(h, "GO default export and errors", test_opt_go_default_and_errors);
	cwtest_add(h, "EXPORT_NAME", test_opt_export_name);
	cwtest_add(h, "ABORT, STRUCTURED_REPLY, unsupported", test_opt_abort_structured_unsup);
	cwtest_add(h, "option count limit", test_opt_count_limit);
	cwtest_add(h, "DF only with structured replies", test_df_only_with_structured);
	cwtest_add(h, "per-client access", test_access);
	cwtest_add(h, "refused client", test_refused);
	cwtest_add(h, "meta contexts", test_meta_context);
	cwtest_add(h, "STARTTLS", test_starttls);
	cwtest_add(t, "CACHE, FAST_ZERO, BLOCK_STATUS", test_request_new_commands);
	cwtest_add(t, "BLOCK_STATUS reply", test_block_status_reply);
	cwtest_add(t, "request wire form", test_request_wire);
	cwtest_add(t, "valid requests", test_request_valid);
	cwtest_add(t, "malformed requests", test_request_malformed);
	cwtest_add(t, "simple replies", test_simple_replies);
	cwtest_add(t, "structured replies", test_structured_replies);
	cwtest_add(t, "errno and eflags", test_errno_and_eflags);
	r = cwtest_run();
	free(out.data);
	return r;
}
