/*
 * Description: feeds arbitrary bytes to the NBD codec the way the server
 * and a client would, and checks the codec's own promises on the way.
 *
 * The first input byte picks a mode:
 *   0  a server handshake: client flags, then option headers and payloads
 *   1  the transmission phase: request headers judged against an export
 *   2  a client reading server bytes: option replies, infos, replies
 *
 * Built two ways.  With clang -fsanitize=fuzzer,address and
 * -DCW_LIBFUZZER it is a libFuzzer target:
 *   clang -g -O1 -fsanitize=fuzzer,address -DCW_LIBFUZZER -I libclockwise/include \
 *     -I libclockwise -I build tests/fuzz/fuzz-nbd.c libclockwise/proto/nbd.c -o fuzz-nbd
 *   ./fuzz-nbd tests/fuzz/corpus/nbd
 * Otherwise main() replays every file of the corpus directories given
 * (default: $top_srcdir/tests/fuzz/corpus/nbd, as make check runs it;
 * see replay.h), so gcc builds it and make check runs it.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/nbd.h>

#include "replay.h"

/* Aborts (a crash the fuzzer reports) when a promise is broken. */
#define PROMISE(x) do { if (!(x)) { fprintf(stderr, "broken: %s\n", #x); abort(); } } while (0)

static const struct cw_nbd_export_info exports[] = {
	{ .name = "a", .description = "first", .size = 1 << 20,
	  .eflags = CW_NBD_FLAG_HAS_FLAGS | CW_NBD_FLAG_SEND_FLUSH | CW_NBD_FLAG_SEND_FUA |
		    CW_NBD_FLAG_SEND_TRIM | CW_NBD_FLAG_SEND_WRITE_ZEROES |
		    CW_NBD_FLAG_SEND_CACHE | CW_NBD_FLAG_SEND_FAST_ZERO,
	  .min_block = 512, .pref_block = 4096, .max_block = 1 << 16, .block_status = true },
	{ .name = "", .size = 4096, .eflags = CW_NBD_FLAG_HAS_FLAGS | CW_NBD_FLAG_READ_ONLY },
};

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Every reply the handshake writes must frame cleanly. */
static void check_replies(const struct cw_nbd_buf *out, uint32_t option, int verdict)
{
	size_t at = 0;

	if (verdict == CW_NBD_HS_TRANSMIT && option == CW_NBD_OPT_EXPORT_NAME) {
		PROMISE(out->len == 10 || out->len == 134);
		return;
	}
	while (at < out->len) {
		struct cw_nbd_option_reply r;

		PROMISE(out->len - at >= CW_NBD_OPTION_REPLY_BYTES);
		PROMISE(cw_nbd_decode_option_reply(out->data + at, &r) == 0);
		PROMISE(r.option == option);
		at += CW_NBD_OPTION_REPLY_BYTES;
		PROMISE(out->len - at >= r.length);
		if (r.reply == CW_NBD_REP_META_CONTEXT) {
			/* Only base:allocation, under its id. */
			PROMISE(r.length == 4 + strlen(CW_NBD_META_BASE_ALLOCATION));
			PROMISE(be32(out->data + at) == CW_NBD_META_ID_ALLOCATION);
			PROMISE(memcmp(out->data + at + 4, CW_NBD_META_BASE_ALLOCATION,
				       r.length - 4) == 0);
		}
		if (r.reply == CW_NBD_REP_INFO) {
			struct cw_nbd_export_info info = { 0 };
			char s[CW_NBD_STRING_MAX + 1];

			PROMISE(cw_nbd_decode_info(out->data + at, r.length, &info, s,
						   sizeof(s)) >= 0);
		}
		at += r.length;
	}
}

/* What the client may do with each export, picked by the input's length
 * so the corpus keeps its meaning: everything, read-only, none, or a
 * client the server refuses outright. */
static const uint8_t access_sets[][2] = {
	{ CW_NBD_ACCESS_RW, CW_NBD_ACCESS_RW },
	{ CW_NBD_ACCESS_RO, CW_NBD_ACCESS_RW },
	{ CW_NBD_ACCESS_NONE, CW_NBD_ACCESS_RO },
	{ CW_NBD_ACCESS_NONE, CW_NBD_ACCESS_NONE },
};

static void fuzz_handshake(const uint8_t *d, size_t n)
{
	struct cw_nbd_handshake hs = { .exports = exports, .n_exports = 2, .default_export = 1 };
	struct cw_nbd_buf out = { 0 };
	unsigned pick = (unsigned)(n % 5);

	cw_nbd_hs_reset(&hs);
	if (pick < 4)
		hs.access = access_sets[pick];
	else
		hs.refuse = "over a limit";
	/* The TLS mode from the length too: off for half the inputs. */
	hs.tls = (enum cw_nbd_tls)((n / 5) % 4 < 2 ? CW_NBD_TLS_OFF : (n / 5) % 4 - 1);
	if (n < 4 || cw_nbd_hs_client_flags(&hs, d) < 0)
		return;
	d += 4, n -= 4;
	while (n >= CW_NBD_OPTION_BYTES) {
		struct cw_nbd_option o;
		const uint8_t *payload;
		int v;

		/* Let any input reach the decoder's magic check, but most
		 * inputs past it: the fuzzer need not guess IHAVEOPT. */
		if (d[0] == 'I' && cw_nbd_decode_option(d, &o) < 0)
			break;
		o.option = be32(d + 8);
		o.length = be32(d + 12);
		d += CW_NBD_OPTION_BYTES, n -= CW_NBD_OPTION_BYTES;
		if (o.length > CW_NBD_OPT_DATA_MAX)
			payload = NULL;		/* what the server does */
		else if (o.length > n)
			break;
		else
			payload = d;
		out.len = 0;
		v = cw_nbd_hs_option(&hs, &o, payload, &out);
		if (v < 0)
			break;
		check_replies(&out, o.option, v);
		if (payload) {
			d += o.length, n -= o.length;
		}
		if (v == CW_NBD_HS_STARTTLS) {
			PROMISE(hs.tls != CW_NBD_TLS_OFF && !hs.tls_active);
			cw_nbd_hs_tls_started(&hs);
			continue;
		}
		if (v == CW_NBD_HS_TRANSMIT) {
			PROMISE(hs.tls != CW_NBD_TLS_REQUIRE || hs.tls_active);
			PROMISE(hs.export_index >= 0 && hs.export_index < 2);
			/* Never an export the client may not use; a read-only
			 * grant is advertised read-only. */
			PROMISE(!hs.refuse && hs.access[hs.export_index] != CW_NBD_ACCESS_NONE);
			PROMISE(hs.access[hs.export_index] != CW_NBD_ACCESS_RO ||
				(hs.eflags & CW_NBD_FLAG_READ_ONLY));
			/* A meta context only where chosen, on an export
			 * that has it, with structured replies. */
			PROMISE(!hs.meta_allocation ||
				(hs.structured && hs.meta_export == hs.export_index &&
				 exports[hs.export_index].block_status));
			break;
		}
		if (v == CW_NBD_HS_CLOSE)
			break;
		PROMISE(v == CW_NBD_HS_CONTINUE);
	}
	free(out.data);
}

static void fuzz_transmission(const uint8_t *d, size_t n)
{
	struct cw_nbd_limits lim = { .size = 1 << 20, .eflags = exports[0].eflags,
				     .min_block = 512, .max_request = 1 << 16 };

	if (n < 1)
		return;
	lim.structured = d[0] & 1;
	if (d[0] & 2)
		lim.eflags |= CW_NBD_FLAG_READ_ONLY;
	lim.block_status = d[0] & 4;
	d++, n--;
	while (n >= CW_NBD_REQUEST_BYTES) {
		struct cw_nbd_request r;
		struct cw_nbd_verdict v;
		uint8_t reply[CW_NBD_ERROR_REPLY_MAX];

		if (cw_nbd_decode_request(d, &r) < 0) {
			/* Still judge it: the check must hold for any fields. */
			r.flags = (uint16_t)(d[4] << 8 | d[5]);
			r.type = (uint16_t)(d[6] << 8 | d[7]);
			r.offset = (uint64_t)be32(d + 16) << 32 | be32(d + 20);
			r.length = be32(d + 24);
		}
		v = cw_nbd_check_request(&lim, &r);
		if (v.action == CW_NBD_EXEC && r.type != CW_NBD_CMD_FLUSH) {
			/* Nothing outside the export, nothing misaligned. */
			PROMISE(r.offset <= lim.size && r.length <= lim.size - r.offset);
			PROMISE(r.length && (r.offset | r.length) % 512 == 0);
			if (r.type == CW_NBD_CMD_READ || r.type == CW_NBD_CMD_WRITE)
				PROMISE(r.length <= lim.max_request);
			if (r.type != CW_NBD_CMD_READ && r.type != CW_NBD_CMD_CACHE &&
			    r.type != CW_NBD_CMD_BLOCK_STATUS)
				PROMISE(!(lim.eflags & CW_NBD_FLAG_READ_ONLY));
			if (r.type == CW_NBD_CMD_BLOCK_STATUS)
				PROMISE(lim.block_status && lim.structured);
			if (r.flags & CW_NBD_CMD_FLAG_FAST_ZERO)
				PROMISE(r.type == CW_NBD_CMD_WRITE_ZEROES);
			if (r.flags & CW_NBD_CMD_FLAG_REQ_ONE)
				PROMISE(r.type == CW_NBD_CMD_BLOCK_STATUS);
		}
		if (v.action == CW_NBD_EXEC && r.type == CW_NBD_CMD_BLOCK_STATUS) {
			/* The reply of a whole extent buffer frames cleanly. */
			struct cw_nbd_extent ext[2] = { { r.length, CW_NBD_STATE_HOLE }, { 1, 0 } };
			uint8_t h[CW_NBD_BLOCK_STATUS_HDR_BYTES];
			struct cw_nbd_reply rep;

			PROMISE(cw_nbd_encode_block_status(h, r.cookie, CW_NBD_META_ID_ALLOCATION,
							   ext, 2) == sizeof(h));
			PROMISE(cw_nbd_decode_reply(h, sizeof(h), &rep) == (int)CW_NBD_CHUNK_BYTES);
			PROMISE(rep.length == 4 + sizeof(ext) && rep.cookie == r.cookie);
			PROMISE(be32((uint8_t *)ext) == r.length);
		}
		if (v.action == CW_NBD_REPLY_ERROR) {
			PROMISE(v.error != 0);
			PROMISE(v.payload == (r.type == CW_NBD_CMD_WRITE ? r.length : 0));
			PROMISE(cw_nbd_encode_error_reply(reply, lim.structured, r.cookie, v.error,
							  v.why) <= sizeof(reply));
		}
		d += CW_NBD_REQUEST_BYTES, n -= CW_NBD_REQUEST_BYTES;
	}
}

static void fuzz_client(const uint8_t *d, size_t n)
{
	while (n > 0) {
		struct cw_nbd_option_reply orep;
		struct cw_nbd_reply rep;
		struct cw_nbd_export_info info = { 0 };
		char s[64];
		int r;

		if (n >= CW_NBD_GREETING_BYTES)
			(void)cw_nbd_decode_greeting(d);
		if (n >= CW_NBD_OPTION_REPLY_BYTES && cw_nbd_decode_option_reply(d, &orep) == 0) {
			size_t len = n - CW_NBD_OPTION_REPLY_BYTES;

			if (orep.length < len)
				len = orep.length;
			(void)cw_nbd_decode_info(d + CW_NBD_OPTION_REPLY_BYTES, len, &info, s,
						 sizeof(s));
			PROMISE(!info.name || strlen(info.name) < sizeof(s));
			d += CW_NBD_OPTION_REPLY_BYTES + len;
			n -= CW_NBD_OPTION_REPLY_BYTES + len;
			continue;
		}
		r = cw_nbd_decode_reply(d, n, &rep);
		if (r > 0) {
			PROMISE((size_t)r <= n);
			d += r, n -= (size_t)r;
		} else {
			d++, n--;
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 3) {
	case 0: fuzz_handshake(data + 1, size - 1); break;
	case 1: fuzz_transmission(data + 1, size - 1); break;
	default: fuzz_client(data + 1, size - 1); break;
	}
	return 0;
}

#ifndef CW_LIBFUZZER
int main(int argc, char **argv)
{
	return cw_fuzz_replay(argc, argv, "nbd", SIZE_MAX);
}
#endif
