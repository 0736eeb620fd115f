/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The NBD wire protocol (NetworkBlockDevice/nbd doc/proto.md): fixed
 * newstyle handshake, transmission requests, simple and structured
 * replies.  Pure functions over buffers; the server does the I/O.
 *
 * Invariant kept by the handshake: every option gets exactly one final
 * reply (ACK or an error) unless the verdict is a hard close, and no
 * reply ever describes an export other than the one named, so a client
 * can never enter transmission on an export it did not ask for.
 *
 * Invariant kept by request checking: a request that reaches CW_NBD_EXEC
 * lies entirely inside the export, is aligned to its minimum block size,
 * carries only flags valid for its command, and never asks for more than
 * max_request bytes of payload.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/nbd.h>
#include "common/util.h"
#include "proto/proto-internal.h"

#define AT(type, field) offsetof(struct type, field)

_Static_assert(sizeof(struct cw_nbd_wire_greeting) == 18, "greeting");
_Static_assert(sizeof(struct cw_nbd_wire_option) == 16, "option");
_Static_assert(sizeof(struct cw_nbd_wire_option_reply) == 20, "option reply");
_Static_assert(sizeof(struct cw_nbd_wire_export_name_reply) == 10, "export name");
_Static_assert(sizeof(struct cw_nbd_wire_info_export) == 12, "info export");
_Static_assert(sizeof(struct cw_nbd_wire_info_block_size) == 14, "info block size");
_Static_assert(sizeof(struct cw_nbd_wire_request) == 28, "request");
_Static_assert(sizeof(struct cw_nbd_wire_simple_reply) == 16, "simple reply");
_Static_assert(sizeof(struct cw_nbd_wire_chunk) == 20, "chunk");
_Static_assert(sizeof(struct cw_nbd_wire_chunk_error) == 6, "chunk error");
_Static_assert(sizeof(struct cw_nbd_wire_block_descriptor) == sizeof(struct cw_nbd_extent),
	       "extents are converted to descriptors in place");

/* ------------------------------------------------------------------ */
/* output buffer */

static int buf_reserve(struct cw_nbd_buf *b, size_t more)
{
	size_t want, cap;
	uint8_t *p;

	if (more > SIZE_MAX / 2 - b->len)
		return -ENOMEM;
	want = b->len + more;
	if (want <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap < want)
		cap *= 2;
	p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

static uint8_t *buf_grow(struct cw_nbd_buf *b, size_t n)
{
	uint8_t *p;

	if (buf_reserve(b, n) < 0)
		return NULL;
	p = b->data + b->len;
	b->len += n;
	return p;
}

/* Appends one option reply: header plus the concatenation of two data
 * pieces (either may be empty). */
static int put_reply2(struct cw_nbd_buf *out, uint32_t option, uint32_t reply,
		      const void *d1, size_t n1, const void *d2, size_t n2)
{
	uint8_t *p = buf_grow(out, CW_NBD_OPTION_REPLY_BYTES + n1 + n2);

	if (!p)
		return -ENOMEM;
	cw_put_be64(p + AT(cw_nbd_wire_option_reply, magic), CW_NBD_REP_MAGIC);
	cw_put_be32(p + AT(cw_nbd_wire_option_reply, option), option);
	cw_put_be32(p + AT(cw_nbd_wire_option_reply, reply), reply);
	cw_put_be32(p + AT(cw_nbd_wire_option_reply, length), (uint32_t)(n1 + n2));
	p += CW_NBD_OPTION_REPLY_BYTES;
	if (n1)
		memcpy(p, d1, n1);
	if (n2)
		memcpy(p + n1, d2, n2);
	return 0;
}

static int put_reply(struct cw_nbd_buf *out, uint32_t option, uint32_t reply,
		     const void *data, size_t n)
{
	return put_reply2(out, option, reply, data, n, NULL, 0);
}

/* An error reply; the message is for a human at the client's end. */
static int put_error(struct cw_nbd_buf *out, uint32_t option, uint32_t reply,
		     const char *msg)
{
	return put_reply(out, option, reply, msg, msg ? strlen(msg) : 0);
}

/* ------------------------------------------------------------------ */
/* handshake */

void cw_nbd_encode_greeting(void *buf)
{
	uint8_t *p = buf;

	cw_put_be64(p + AT(cw_nbd_wire_greeting, nbdmagic), CW_NBD_MAGIC);
	cw_put_be64(p + AT(cw_nbd_wire_greeting, ihaveopt), CW_NBD_IHAVEOPT);
	cw_put_be16(p + AT(cw_nbd_wire_greeting, gflags),
		    CW_NBD_FLAG_FIXED_NEWSTYLE | CW_NBD_FLAG_NO_ZEROES);
}

void cw_nbd_hs_reset(struct cw_nbd_handshake *hs)
{
	hs->cflags = 0;
	hs->structured = false;
	hs->block_size_known = false;
	hs->export_index = -1;
	hs->eflags = 0;
	hs->n_options = 0;
	hs->meta_allocation = false;
	hs->meta_export = -1;
	hs->tls_active = false;
	hs->client_class[0] = '\0';
}

void cw_nbd_hs_tls_started(struct cw_nbd_handshake *hs)
{
	hs->structured = false;
	hs->meta_allocation = false;
	hs->meta_export = -1;
	hs->tls_active = true;
}

int cw_nbd_hs_client_flags(struct cw_nbd_handshake *hs, const void *buf)
{
	uint32_t f = cw_get_be32(buf);

	/* The server must drop a client that sets a flag it did not
	 * offer.  Plain (non-fixed) newstyle cannot receive option errors,
	 * so it is refused too: every client of the last decade is fixed. */
	if (f & ~(uint32_t)(CW_NBD_FLAG_C_FIXED_NEWSTYLE | CW_NBD_FLAG_C_NO_ZEROES))
		return -EPROTO;
	if (!(f & CW_NBD_FLAG_C_FIXED_NEWSTYLE))
		return -EPROTO;
	hs->cflags = f;
	return 0;
}

int cw_nbd_decode_option(const void *buf, struct cw_nbd_option *ret_opt)
{
	const uint8_t *p = buf;

	if (cw_get_be64(p + AT(cw_nbd_wire_option, magic)) != CW_NBD_IHAVEOPT)
		return -EBADMSG;
	ret_opt->option = cw_get_be32(p + AT(cw_nbd_wire_option, option));
	ret_opt->length = cw_get_be32(p + AT(cw_nbd_wire_option, length));
	return 0;
}

/* Export names are strings: at most 4096 bytes and no NUL inside. */
static int find_name(const struct cw_nbd_handshake *hs, const uint8_t *name, size_t len)
{
	for (size_t i = 0; i < hs->n_exports; i++) {
		const char *n = hs->exports[i].name;

		if (strlen(n) == len && memcmp(n, name, len) == 0)
			return (int)i;
	}
	return -1;
}

/* Whether s[0..len) is a class name: 1 to CW_NBD_CLASS_MAX of
 * [A-Za-z0-9._-], not starting with '.' or '-'. */
static bool class_ok(const uint8_t *s, size_t len)
{
	if (!len || len > CW_NBD_CLASS_MAX || s[0] == '.' || s[0] == '-')
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isalnum(s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
			return false;
	return true;
}

/* The export a name selects, and (ret_class, if not NULL) the connection
 * class it names: "EXPORT@CLASS" selects EXPORT unless an export has that
 * whole name. */
static int find_export(const struct cw_nbd_handshake *hs, const uint8_t *name, size_t len,
		       char *ret_class)
{
	const uint8_t *at;
	int idx;

	if (ret_class)
		ret_class[0] = '\0';
	if (len > CW_NBD_STRING_MAX || (len && memchr(name, 0, len)))
		return -1;
	if (len == 0 && hs->default_export >= 0 && (size_t)hs->default_export < hs->n_exports)
		return hs->default_export;
	idx = find_name(hs, name, len);
	if (idx >= 0 || !(at = memrchr(name, '@', len)) ||
	    !class_ok(at + 1, len - (size_t)(at + 1 - name)))
		return idx;
	idx = find_name(hs, name, (size_t)(at - name));
	if (idx >= 0 && ret_class) {
		memcpy(ret_class, at + 1, len - (size_t)(at + 1 - name));
		ret_class[len - (size_t)(at + 1 - name)] = '\0';
	}
	return idx;
}

static enum cw_nbd_access access_of(const struct cw_nbd_handshake *hs, int idx)
{
	return hs->access ? (enum cw_nbd_access)hs->access[idx] : CW_NBD_ACCESS_RW;
}

/* Transmission flags as sent: DF only makes sense with structured
 * replies, and this server never fragments anyway.  A client with
 * read-only access sees a read-only export, so it never tries to write. */
static uint16_t sent_eflags(const struct cw_nbd_handshake *hs, int idx)
{
	uint16_t f = hs->exports[idx].eflags | CW_NBD_FLAG_HAS_FLAGS;

	if (!hs->structured)
		f &= (uint16_t)~CW_NBD_FLAG_SEND_DF;
	if (access_of(hs, idx) != CW_NBD_ACCESS_RW)
		f = (uint16_t)((f & ~(CW_NBD_FLAG_SEND_FLUSH | CW_NBD_FLAG_SEND_FUA |
				      CW_NBD_FLAG_SEND_TRIM | CW_NBD_FLAG_SEND_WRITE_ZEROES |
				      CW_NBD_FLAG_SEND_FAST_ZERO)) |
			       CW_NBD_FLAG_READ_ONLY);
	return f;
}

static int put_info_export(struct cw_nbd_buf *out, uint32_t option, uint16_t eflags,
			   const struct cw_nbd_export_info *e)
{
	uint8_t b[sizeof(struct cw_nbd_wire_info_export)];

	cw_put_be16(b + AT(cw_nbd_wire_info_export, info), CW_NBD_INFO_EXPORT);
	cw_put_be64(b + AT(cw_nbd_wire_info_export, size), e->size);
	cw_put_be16(b + AT(cw_nbd_wire_info_export, eflags), eflags);
	return put_reply(out, option, CW_NBD_REP_INFO, b, sizeof(b));
}

static int put_info_block_size(struct cw_nbd_buf *out, uint32_t option,
			       const struct cw_nbd_export_info *e, uint32_t min_block)
{
	uint8_t b[sizeof(struct cw_nbd_wire_info_block_size)];

	cw_put_be16(b + AT(cw_nbd_wire_info_block_size, info), CW_NBD_INFO_BLOCK_SIZE);
	cw_put_be32(b + AT(cw_nbd_wire_info_block_size, minimum), min_block);
	cw_put_be32(b + AT(cw_nbd_wire_info_block_size, preferred), e->pref_block);
	cw_put_be32(b + AT(cw_nbd_wire_info_block_size, maximum), e->max_block);
	return put_reply(out, option, CW_NBD_REP_INFO, b, sizeof(b));
}

static int put_info_string(struct cw_nbd_buf *out, uint32_t option, uint16_t type,
			   const char *s)
{
	uint8_t t[2];
	size_t n = strlen(s);

	if (n > CW_NBD_STRING_MAX)
		n = CW_NBD_STRING_MAX;
	cw_put_be16(t, type);
	return put_reply2(out, option, CW_NBD_REP_INFO, t, 2, s, n);
}

/* The export an option names and this client may use, in *ret_idx; or
 * -1 there, with the error reply appended (the return value). */
static int named_export(const struct cw_nbd_handshake *hs, const struct cw_nbd_option *opt,
			const uint8_t *name, uint32_t len, struct cw_nbd_buf *out, int *ret_idx,
			char *ret_class)
{
	int idx = find_export(hs, name, len, ret_class);

	*ret_idx = -1;
	if (idx < 0)
		return put_error(out, opt->option, CW_NBD_REP_ERR_UNKNOWN, "no such export");
	if (access_of(hs, idx) == CW_NBD_ACCESS_NONE)
		return put_error(out, opt->option, CW_NBD_REP_ERR_POLICY,
				 "access to this export is not granted to this client");
	*ret_idx = idx;
	return 0;
}

/*
 * NBD_OPT_INFO and NBD_OPT_GO share their request:
 *   u32 name length, name, u16 number of info requests, u16 each.
 * NBD_INFO_EXPORT is always sent; BLOCK_SIZE whenever the export has
 * constraints (the spec lets a server send it unasked); NAME and
 * DESCRIPTION only when asked.
 *
 * A client that does not ask for the block size (nbd-client, the
 * kernel's) cannot be trusted to know it: rather than refusing it with
 * NBD_REP_ERR_BLOCK_SIZE_REQD, it is told (and the server honours) a
 * minimum of 1, which the server keeps by read-modify-write under the
 * export's real minimum.
 */
static int hs_info_go(struct cw_nbd_handshake *hs, const struct cw_nbd_option *opt,
		      const uint8_t *d, struct cw_nbd_buf *out)
{
	const struct cw_nbd_export_info *e;
	uint32_t namelen, nreq, i;
	bool want_name = false, want_desc = false, want_bs = false;
	char cls[CW_NBD_CLASS_MAX + 1];
	uint16_t eflags;
	int idx, r;

	if (opt->length < 6)
		return put_error(out, opt->option, CW_NBD_REP_ERR_INVALID, "request too short");
	namelen = cw_get_be32(d);
	if (namelen > CW_NBD_STRING_MAX || namelen > opt->length - 6)
		return put_error(out, opt->option, CW_NBD_REP_ERR_INVALID, "bad name length");
	nreq = cw_get_be16(d + 4 + namelen);
	if (opt->length != 4 + namelen + 2 + 2 * nreq)
		return put_error(out, opt->option, CW_NBD_REP_ERR_INVALID,
				 "length does not match the info requests");
	for (i = 0; i < nreq; i++) {
		switch (cw_get_be16(d + 4 + namelen + 2 + 2 * i)) {
		case CW_NBD_INFO_NAME: want_name = true; break;
		case CW_NBD_INFO_DESCRIPTION: want_desc = true; break;
		case CW_NBD_INFO_BLOCK_SIZE: want_bs = true; break;
		default: break;	/* unknown requests are ignored */
		}
	}
	r = named_export(hs, opt, d + 4, namelen, out, &idx, cls);
	if (idx < 0)
		return r;
	e = &hs->exports[idx];

	eflags = sent_eflags(hs, idx);
	r = put_info_export(out, opt->option, eflags, e);
	if (r == 0 && e->min_block)
		r = put_info_block_size(out, opt->option, e, want_bs ? e->min_block : 1);
	if (r == 0 && want_name)
		r = put_info_string(out, opt->option, CW_NBD_INFO_NAME, e->name);
	if (r == 0 && want_desc && e->description)
		r = put_info_string(out, opt->option, CW_NBD_INFO_DESCRIPTION, e->description);
	if (r == 0)
		r = put_reply(out, opt->option, CW_NBD_REP_ACK, NULL, 0);
	if (r < 0)
		return r;
	if (opt->option == CW_NBD_OPT_GO) {
		hs->export_index = idx;
		memcpy(hs->client_class, cls, sizeof(hs->client_class));
		hs->eflags = eflags;
		hs->block_size_known = want_bs;
		/* Contexts were chosen for one export: another one chosen
		 * now has none. */
		hs->meta_allocation &= hs->meta_export == idx;
		return CW_NBD_HS_TRANSMIT;
	}
	return CW_NBD_HS_CONTINUE;
}

static int hs_list(struct cw_nbd_handshake *hs, const struct cw_nbd_option *opt,
		   struct cw_nbd_buf *out)
{
	size_t i;
	int r;

	if (opt->length != 0)
		return put_error(out, opt->option, CW_NBD_REP_ERR_INVALID, "LIST takes no data");
	for (i = 0; i < hs->n_exports; i++) {
		const struct cw_nbd_export_info *e = &hs->exports[i];
		const char *desc = e->description ? e->description : "";
		size_t nl = strlen(e->name), dl = strlen(desc);
		uint8_t *p;

		/* Unusable names and exports this client may not use are
		 * never advertised. */
		if (nl > CW_NBD_STRING_MAX || access_of(hs, (int)i) == CW_NBD_ACCESS_NONE)
			continue;
		if (dl > CW_NBD_STRING_MAX)
			dl = CW_NBD_STRING_MAX;
		p = buf_grow(out, CW_NBD_OPTION_REPLY_BYTES + 4 + nl + dl);
		if (!p)
			return -ENOMEM;
		cw_put_be64(p + AT(cw_nbd_wire_option_reply, magic), CW_NBD_REP_MAGIC);
		cw_put_be32(p + AT(cw_nbd_wire_option_reply, option), opt->option);
		cw_put_be32(p + AT(cw_nbd_wire_option_reply, reply), CW_NBD_REP_SERVER);
		cw_put_be32(p + AT(cw_nbd_wire_option_reply, length), (uint32_t)(4 + nl + dl));
		p += CW_NBD_OPTION_REPLY_BYTES;
		cw_put_be32(p, (uint32_t)nl);
		memcpy(p + 4, e->name, nl);
		memcpy(p + 4 + nl, desc, dl);
	}
	r = put_reply(out, opt->option, CW_NBD_REP_ACK, NULL, 0);
	return r < 0 ? r : CW_NBD_HS_CONTINUE;
}

static int hs_export_name(struct cw_nbd_handshake *hs, const struct cw_nbd_option *opt,
			  const uint8_t *d, struct cw_nbd_buf *out)
{
	const struct cw_nbd_export_info *e;
	size_t n;
	uint8_t *p;
	int idx;

	/* EXPORT_NAME has no error reply: an unknown name ends the session. */
	idx = find_export(hs, d, opt->length, hs->client_class);
	if (idx < 0 || access_of(hs, idx) == CW_NBD_ACCESS_NONE)
		return -EPROTO;
	e = &hs->exports[idx];
	n = sizeof(struct cw_nbd_wire_export_name_reply);
	if (!(hs->cflags & CW_NBD_FLAG_C_NO_ZEROES))
		n += 124;
	p = buf_grow(out, n);
	if (!p)
		return -ENOMEM;
	memset(p, 0, n);
	cw_put_be64(p + AT(cw_nbd_wire_export_name_reply, size), e->size);
	hs->eflags = sent_eflags(hs, idx);
	cw_put_be16(p + AT(cw_nbd_wire_export_name_reply, eflags), hs->eflags);
	hs->export_index = idx;
	hs->meta_allocation &= hs->meta_export == idx;
	return CW_NBD_HS_TRANSMIT;
}

/*
 * NBD_OPT_LIST_META_CONTEXT and NBD_OPT_SET_META_CONTEXT share their
 * request: u32 name length, name, u32 number of queries, then each query
 * as u32 length and string.  The one context here is base:allocation, on
 * exports that answer BLOCK_STATUS.  LIST with no query, or the query
 * "base:", lists it; SET chooses it only when asked by its full name,
 * and each SET replaces the choice of the one before (an empty one
 * chooses nothing).  Queries of other namespaces are not errors: they
 * match nothing.
 */
static int hs_meta_context(struct cw_nbd_handshake *hs, const struct cw_nbd_option *opt,
			   const uint8_t *d, struct cw_nbd_buf *out)
{
	static const char ctx[] = CW_NBD_META_BASE_ALLOCATION;
	bool set = opt->option == CW_NBD_OPT_SET_META_CONTEXT, match = false;
	uint32_t namelen, nq, i, at, len = opt->length;
	uint8_t id[4];
	int idx, r;

	if (set && !hs->structured)
		return put_error(out, opt->option, CW_NBD_REP_ERR_INVALID,
				 "structured replies must be negotiated first");
	if (len < 8)
		return put_error(out, opt->option, CW_NBD_REP_ERR_INVALID, "request too short");
	namelen = cw_get_be32(d);
	if (namelen > CW_NBD_STRING_MAX || namelen > len - 8)
		return put_error(out, opt->option, CW_NBD_REP_ERR_INVALID, "bad name length");
	nq = cw_get_be32(d + 4 + namelen);
	/* Walk the queries first: a malformed request changes nothing. */
	for (i = 0, at = 8 + namelen; i < nq; i++) {
		uint32_t ql;

		if (len - at < 4)
			return put_error(out, opt->option, CW_NBD_REP_ERR_INVALID,
					 "length does not match the queries");
		ql = cw_get_be32(d + at);
		if (ql > CW_NBD_STRING_MAX || ql > len - at - 4)
			return put_error(out, opt->option, CW_NBD_REP_ERR_INVALID,
					 "length does not match the queries");
		at += 4;
		if ((ql == sizeof(ctx) - 1 && memcmp(d + at, ctx, ql) == 0) ||
		    (!set && ql == 5 && memcmp(d + at, "base:", 5) == 0))
			match = true;
		at += ql;
	}
	if (at != len)
		return put_error(out, opt->option, CW_NBD_REP_ERR_INVALID,
				 "length does not match the queries");
	if (!set && nq == 0)
		match = true;
	r = named_export(hs, opt, d + 4, namelen, out, &idx, NULL);
	if (idx < 0)
		return r;
	match &= hs->exports[idx].block_status;
	if (set) {
		hs->meta_allocation = match;
		hs->meta_export = idx;
	}
	r = 0;
	if (match) {
		cw_put_be32(id, CW_NBD_META_ID_ALLOCATION);
		r = put_reply2(out, opt->option, CW_NBD_REP_META_CONTEXT, id, 4, ctx,
			       sizeof(ctx) - 1);
	}
	if (r == 0)
		r = put_reply(out, opt->option, CW_NBD_REP_ACK, NULL, 0);
	return r < 0 ? r : CW_NBD_HS_CONTINUE;
}

int cw_nbd_hs_option(struct cw_nbd_handshake *hs, const struct cw_nbd_option *opt,
		     const void *data, struct cw_nbd_buf *out)
{
	const uint8_t *d = data;
	int r;

	/* A client that keeps haggling forever is treated as hostile. */
	if (++hs->n_options > CW_NBD_OPT_COUNT_MAX)
		return -EPROTO;
	if (!d && opt->length > 0) {
		if (opt->option == CW_NBD_OPT_EXPORT_NAME)
			return -EPROTO;
		r = put_error(out, opt->option, CW_NBD_REP_ERR_TOO_BIG, "option data too long");
		return r < 0 ? r : CW_NBD_HS_CONTINUE;
	}

	if (hs->refuse && opt->option != CW_NBD_OPT_ABORT) {
		if (opt->option == CW_NBD_OPT_EXPORT_NAME)
			return -EPROTO;
		r = put_error(out, opt->option, CW_NBD_REP_ERR_POLICY, hs->refuse);
		return r < 0 ? r : CW_NBD_HS_CONTINUE;
	}

	/* Under TLS required, nothing is said in the clear but how to
	 * start it or leave; EXPORT_NAME has no error reply: it closes. */
	if (hs->tls == CW_NBD_TLS_REQUIRE && !hs->tls_active &&
	    opt->option != CW_NBD_OPT_STARTTLS && opt->option != CW_NBD_OPT_ABORT) {
		if (opt->option == CW_NBD_OPT_EXPORT_NAME)
			return -EPROTO;
		r = put_error(out, opt->option, CW_NBD_REP_ERR_TLS_REQD,
			      "TLS is required: send NBD_OPT_STARTTLS first");
		return r < 0 ? r : CW_NBD_HS_CONTINUE;
	}

	switch (opt->option) {
	case CW_NBD_OPT_EXPORT_NAME:
		return hs_export_name(hs, opt, d, out);
	case CW_NBD_OPT_STARTTLS:
		if (hs->tls == CW_NBD_TLS_OFF)
			r = put_error(out, opt->option, CW_NBD_REP_ERR_UNSUP,
				      "TLS is not offered on this listener");
		else if (opt->length != 0)
			r = put_error(out, opt->option, CW_NBD_REP_ERR_INVALID,
				      "STARTTLS takes no data");
		else if (hs->tls_active)
			r = put_error(out, opt->option, CW_NBD_REP_ERR_INVALID,
				      "TLS is already started");
		else {
			r = put_reply(out, opt->option, CW_NBD_REP_ACK, NULL, 0);
			return r < 0 ? r : CW_NBD_HS_STARTTLS;
		}
		return r < 0 ? r : CW_NBD_HS_CONTINUE;
	case CW_NBD_OPT_ABORT:
		/* Acknowledged whatever its length: the client is leaving. */
		r = put_reply(out, opt->option, CW_NBD_REP_ACK, NULL, 0);
		return r < 0 ? r : CW_NBD_HS_CLOSE;
	case CW_NBD_OPT_LIST:
		return hs_list(hs, opt, out);
	case CW_NBD_OPT_INFO:
	case CW_NBD_OPT_GO:
		return hs_info_go(hs, opt, d, out);
	case CW_NBD_OPT_LIST_META_CONTEXT:
	case CW_NBD_OPT_SET_META_CONTEXT:
		return hs_meta_context(hs, opt, d, out);
	case CW_NBD_OPT_STRUCTURED_REPLY:
		if (opt->length != 0)
			r = put_error(out, opt->option, CW_NBD_REP_ERR_INVALID,
				      "STRUCTURED_REPLY takes no data");
		else if (hs->structured)
			r = put_error(out, opt->option, CW_NBD_REP_ERR_INVALID,
				      "structured replies already negotiated");
		else {
			hs->structured = true;
			r = put_reply(out, opt->option, CW_NBD_REP_ACK, NULL, 0);
		}
		return r < 0 ? r : CW_NBD_HS_CONTINUE;
	default:
		/* Extended headers and whatever comes next: not offered
		 * here. */
		r = put_error(out, opt->option, CW_NBD_REP_ERR_UNSUP, "option not supported");
		return r < 0 ? r : CW_NBD_HS_CONTINUE;
	}
}

/* ------------------------------------------------------------------ */
/* transmission */

int cw_nbd_decode_request(const void *buf, struct cw_nbd_request *ret_req)
{
	const uint8_t *p = buf;

	if (cw_get_be32(p + AT(cw_nbd_wire_request, magic)) != CW_NBD_REQUEST_MAGIC)
		return -EBADMSG;
	ret_req->flags = cw_get_be16(p + AT(cw_nbd_wire_request, flags));
	ret_req->type = cw_get_be16(p + AT(cw_nbd_wire_request, type));
	ret_req->cookie = cw_get_be64(p + AT(cw_nbd_wire_request, cookie));
	ret_req->offset = cw_get_be64(p + AT(cw_nbd_wire_request, offset));
	ret_req->length = cw_get_be32(p + AT(cw_nbd_wire_request, length));
	return 0;
}

static struct cw_nbd_verdict verdict(enum cw_nbd_action a, uint32_t error, uint32_t payload,
				     const char *why)
{
	return (struct cw_nbd_verdict){ .action = a, .error = error, .payload = payload,
					.why = why };
}

struct cw_nbd_verdict cw_nbd_check_request(const struct cw_nbd_limits *lim,
					   const struct cw_nbd_request *req)
{
	/* Write data must be consumed before any reply, or the stream
	 * would lose its framing: errors on a WRITE discard the payload. */
	uint32_t payload = req->type == CW_NBD_CMD_WRITE ? req->length : 0;
	uint16_t allowed = CW_NBD_CMD_FLAG_FUA;	/* valid on every command */
	bool writes = false, ranged = true;
	uint32_t align = lim->min_block > 1 ? lim->min_block : 1;

	switch (req->type) {
	case CW_NBD_CMD_READ:
		if (lim->structured)
			allowed |= CW_NBD_CMD_FLAG_DF;
		break;
	case CW_NBD_CMD_WRITE:
		writes = true;
		/* Too big to accept and too big to discard cheaply: a
		 * client past the advertised maximum is not to be trusted
		 * with the stream any more. */
		if (req->length > lim->max_request)
			return verdict(CW_NBD_DISCONNECT, 0, 0, "write larger than the maximum");
		break;
	case CW_NBD_CMD_DISC:
		return verdict(CW_NBD_DISCONNECT, 0, 0, "client disconnect");
	case CW_NBD_CMD_FLUSH:
		if (!(lim->eflags & CW_NBD_FLAG_SEND_FLUSH))
			return verdict(CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0, "flush not offered");
		ranged = false;
		break;
	case CW_NBD_CMD_TRIM:
		writes = true;
		if (!(lim->eflags & CW_NBD_FLAG_SEND_TRIM))
			return verdict(CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0, "trim not offered");
		break;
	case CW_NBD_CMD_WRITE_ZEROES:
		writes = true;
		if (!(lim->eflags & CW_NBD_FLAG_SEND_WRITE_ZEROES))
			return verdict(CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0,
				       "write zeroes not offered");
		allowed |= CW_NBD_CMD_FLAG_NO_HOLE;
		if (lim->eflags & CW_NBD_FLAG_SEND_FAST_ZERO)
			allowed |= CW_NBD_CMD_FLAG_FAST_ZERO;
		break;
	case CW_NBD_CMD_CACHE:
		if (!(lim->eflags & CW_NBD_FLAG_SEND_CACHE))
			return verdict(CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0, "cache not offered");
		break;
	case CW_NBD_CMD_BLOCK_STATUS:
		if (!lim->block_status || !lim->structured)
			return verdict(CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0,
				       "no meta context negotiated");
		allowed |= CW_NBD_CMD_FLAG_REQ_ONE;
		break;
	default:
		return verdict(CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0, "unknown command");
	}

	if (req->flags & ~allowed)
		return verdict(CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, payload, "invalid flags");
	if (!ranged) {
		if (req->offset || req->length)
			return verdict(CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, 0,
				       "flush needs zero offset and length");
		return verdict(CW_NBD_EXEC, 0, 0, NULL);
	}
	if (writes && (lim->eflags & CW_NBD_FLAG_READ_ONLY))
		return verdict(CW_NBD_REPLY_ERROR, CW_NBD_EPERM, payload, "export is read-only");
	if (req->length == 0)
		return verdict(CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, payload, "zero length");
	/* EOVERFLOW tells a client that asked for one unfragmented chunk
	 * (DF) that it would be too long; anyone else sent a request too
	 * large: EINVAL. */
	if (req->type == CW_NBD_CMD_READ && req->length > lim->max_request)
		return verdict(CW_NBD_REPLY_ERROR,
			       req->flags & CW_NBD_CMD_FLAG_DF ? CW_NBD_EOVERFLOW : CW_NBD_EINVAL, 0,
			       "read larger than the maximum");
	/* offset + length may overflow 64 bits: compare without adding.
	 * Writing past the end is out of space; trimming there is invalid. */
	if (req->offset > lim->size || req->length > lim->size - req->offset)
		return verdict(CW_NBD_REPLY_ERROR,
			       writes && req->type != CW_NBD_CMD_TRIM ? CW_NBD_ENOSPC : CW_NBD_EINVAL,
			       payload, "beyond the end of the export");
	if ((req->offset | req->length) & (align - 1))
		return verdict(CW_NBD_REPLY_ERROR, CW_NBD_EINVAL, payload,
			       "not aligned to the minimum block size");
	return verdict(CW_NBD_EXEC, 0, payload, NULL);
}

/* ------------------------------------------------------------------ */
/* replies */

void cw_nbd_encode_simple_reply(void *buf, uint64_t cookie, uint32_t error)
{
	uint8_t *p = buf;

	cw_put_be32(p + AT(cw_nbd_wire_simple_reply, magic), CW_NBD_SIMPLE_MAGIC);
	cw_put_be32(p + AT(cw_nbd_wire_simple_reply, error), error);
	cw_put_be64(p + AT(cw_nbd_wire_simple_reply, cookie), cookie);
}

void cw_nbd_encode_chunk(void *buf, uint64_t cookie, uint16_t flags, uint16_t type,
			 uint32_t length)
{
	uint8_t *p = buf;

	cw_put_be32(p + AT(cw_nbd_wire_chunk, magic), CW_NBD_STRUCT_MAGIC);
	cw_put_be16(p + AT(cw_nbd_wire_chunk, flags), flags);
	cw_put_be16(p + AT(cw_nbd_wire_chunk, type), type);
	cw_put_be64(p + AT(cw_nbd_wire_chunk, cookie), cookie);
	cw_put_be32(p + AT(cw_nbd_wire_chunk, length), length);
}

size_t cw_nbd_encode_read_reply(void *buf, bool structured, uint64_t cookie,
				uint64_t offset, uint32_t length)
{
	uint8_t *p = buf;

	if (!structured) {
		cw_nbd_encode_simple_reply(p, cookie, 0);
		return CW_NBD_SIMPLE_REPLY_BYTES;
	}
	/* One chunk for the whole read: the data is complete before the
	 * header goes out, so DONE can ride on it (no NONE chunk). */
	cw_nbd_encode_chunk(p, cookie, CW_NBD_REPLY_FLAG_DONE, CW_NBD_REPLY_TYPE_OFFSET_DATA,
			    length + 8);
	cw_put_be64(p + CW_NBD_CHUNK_BYTES, offset);
	return CW_NBD_CHUNK_BYTES + 8;
}

size_t cw_nbd_encode_block_status(void *hdr, uint64_t cookie, uint32_t context_id,
				  struct cw_nbd_extent *ext, uint32_t n)
{
	uint8_t *p = hdr;

	for (uint32_t i = 0; i < n; i++) {
		struct cw_nbd_extent e = ext[i];
		uint8_t *w = (uint8_t *)&ext[i];

		cw_put_be32(w + AT(cw_nbd_wire_block_descriptor, length), e.length);
		cw_put_be32(w + AT(cw_nbd_wire_block_descriptor, status), e.status);
	}
	cw_nbd_encode_chunk(p, cookie, CW_NBD_REPLY_FLAG_DONE, CW_NBD_REPLY_TYPE_BLOCK_STATUS,
			    4 + n * (uint32_t)sizeof(*ext));
	cw_put_be32(p + CW_NBD_CHUNK_BYTES, context_id);
	return CW_NBD_BLOCK_STATUS_HDR_BYTES;
}

size_t cw_nbd_encode_ok_reply(void *buf, uint64_t cookie)
{
	cw_nbd_encode_simple_reply(buf, cookie, 0);
	return CW_NBD_SIMPLE_REPLY_BYTES;
}

size_t cw_nbd_encode_error_reply(void *buf, bool structured, uint64_t cookie,
				 uint32_t error, const char *msg)
{
	uint8_t *p = buf;
	size_t n = msg ? strnlen(msg, 128) : 0;

	if (!structured) {
		cw_nbd_encode_simple_reply(p, cookie, error);
		return CW_NBD_SIMPLE_REPLY_BYTES;
	}
	cw_nbd_encode_chunk(p, cookie, CW_NBD_REPLY_FLAG_DONE, CW_NBD_REPLY_TYPE_ERROR,
			    (uint32_t)(6 + n));
	p += CW_NBD_CHUNK_BYTES;
	cw_put_be32(p + AT(cw_nbd_wire_chunk_error, error), error);
	cw_put_be16(p + AT(cw_nbd_wire_chunk_error, msglen), (uint16_t)n);
	if (n)
		memcpy(p + 6, msg, n);
	return CW_NBD_CHUNK_BYTES + 6 + n;
}

uint32_t cw_nbd_errno_to_wire(int err)
{
	switch (err < 0 ? -err : err) {
	case 0: return 0;
	case EPERM: case EROFS: case EACCES: return CW_NBD_EPERM;
	case ENOMEM: return CW_NBD_ENOMEM;
	case EINVAL: return CW_NBD_EINVAL;
	/* The spec asks for ENOSPC for quota and file-size limits too. */
	case ENOSPC: case EDQUOT: case EFBIG: return CW_NBD_ENOSPC;
	case EOVERFLOW: return CW_NBD_EOVERFLOW;
	case ENOTSUP: return CW_NBD_ENOTSUP;
	case ESHUTDOWN: return CW_NBD_ESHUTDOWN;
	default: return CW_NBD_EIO;
	}
}

uint16_t cw_nbd_eflags(const struct cw_nbd_caps *c)
{
	uint16_t f = CW_NBD_FLAG_HAS_FLAGS;

	if (c->read_only)
		f |= CW_NBD_FLAG_READ_ONLY;
	else {
		if (c->can_flush)
			f |= CW_NBD_FLAG_SEND_FLUSH | CW_NBD_FLAG_SEND_FUA;
		if (c->can_trim)
			f |= CW_NBD_FLAG_SEND_TRIM;
		if (c->can_zero)
			f |= CW_NBD_FLAG_SEND_WRITE_ZEROES;
		if (c->can_zero && c->can_fast_zero)
			f |= CW_NBD_FLAG_SEND_FAST_ZERO;
	}
	if (c->can_cache)
		f |= CW_NBD_FLAG_SEND_CACHE;
	/* Multi-conn promises that a flush on one connection covers
	 * writes completed on every other: only a global flush keeps it. */
	if (c->multi_conn)
		f |= CW_NBD_FLAG_CAN_MULTI_CONN;
	if (c->structured)
		f |= CW_NBD_FLAG_SEND_DF;
	return f;
}

/* ------------------------------------------------------------------ */
/* client side */

int cw_nbd_decode_greeting(const void *buf)
{
	const uint8_t *p = buf;

	if (cw_get_be64(p + AT(cw_nbd_wire_greeting, nbdmagic)) != CW_NBD_MAGIC ||
	    cw_get_be64(p + AT(cw_nbd_wire_greeting, ihaveopt)) != CW_NBD_IHAVEOPT)
		return -EBADMSG;
	return cw_get_be16(p + AT(cw_nbd_wire_greeting, gflags));
}

void cw_nbd_encode_option(void *buf, uint32_t option, uint32_t length)
{
	uint8_t *p = buf;

	cw_put_be64(p + AT(cw_nbd_wire_option, magic), CW_NBD_IHAVEOPT);
	cw_put_be32(p + AT(cw_nbd_wire_option, option), option);
	cw_put_be32(p + AT(cw_nbd_wire_option, length), length);
}

int cw_nbd_decode_option_reply(const void *buf, struct cw_nbd_option_reply *ret_rep)
{
	const uint8_t *p = buf;

	if (cw_get_be64(p + AT(cw_nbd_wire_option_reply, magic)) != CW_NBD_REP_MAGIC)
		return -EBADMSG;
	ret_rep->option = cw_get_be32(p + AT(cw_nbd_wire_option_reply, option));
	ret_rep->reply = cw_get_be32(p + AT(cw_nbd_wire_option_reply, reply));
	ret_rep->length = cw_get_be32(p + AT(cw_nbd_wire_option_reply, length));
	return 0;
}

int cw_nbd_decode_info(const void *data, size_t len, struct cw_nbd_export_info *info,
		       char *name_buf, size_t name_cap)
{
	const uint8_t *p = data;
	uint16_t type;

	if (len < 2)
		return -EBADMSG;
	type = cw_get_be16(p);
	switch (type) {
	case CW_NBD_INFO_EXPORT:
		if (len != sizeof(struct cw_nbd_wire_info_export))
			return -EBADMSG;
		info->size = cw_get_be64(p + AT(cw_nbd_wire_info_export, size));
		info->eflags = cw_get_be16(p + AT(cw_nbd_wire_info_export, eflags));
		break;
	case CW_NBD_INFO_BLOCK_SIZE:
		if (len != sizeof(struct cw_nbd_wire_info_block_size))
			return -EBADMSG;
		info->min_block = cw_get_be32(p + AT(cw_nbd_wire_info_block_size, minimum));
		info->pref_block = cw_get_be32(p + AT(cw_nbd_wire_info_block_size, preferred));
		info->max_block = cw_get_be32(p + AT(cw_nbd_wire_info_block_size, maximum));
		break;
	case CW_NBD_INFO_NAME:
	case CW_NBD_INFO_DESCRIPTION:
		if (len - 2 > CW_NBD_STRING_MAX)
			return -EBADMSG;
		if (name_buf && name_cap) {
			size_t n = CW_MIN(len - 2, name_cap - 1);

			memcpy(name_buf, p + 2, n);
			name_buf[n] = 0;
			if (type == CW_NBD_INFO_NAME)
				info->name = name_buf;
			else
				info->description = name_buf;
		}
		break;
	default:
		break;	/* unknown info: a client ignores it */
	}
	return type;
}

int cw_nbd_encode_meta_query(struct cw_nbd_buf *out, const char *name,
			     const char *const *queries, size_t n)
{
	size_t nl = strlen(name), total = 8 + nl, i;
	uint8_t *p;

	if (nl > CW_NBD_STRING_MAX || n > UINT32_MAX)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		size_t ql = strlen(queries[i]);

		if (ql > CW_NBD_STRING_MAX)
			return -EINVAL;
		total += 4 + ql;
	}
	p = buf_grow(out, total);
	if (!p)
		return -ENOMEM;
	cw_put_be32(p, (uint32_t)nl);
	memcpy(p + 4, name, nl);
	p += 4 + nl;
	cw_put_be32(p, (uint32_t)n);
	p += 4;
	for (i = 0; i < n; i++) {
		size_t ql = strlen(queries[i]);

		cw_put_be32(p, (uint32_t)ql);
		memcpy(p + 4, queries[i], ql);
		p += 4 + ql;
	}
	return 0;
}

void cw_nbd_encode_request(void *buf, const struct cw_nbd_request *req)
{
	uint8_t *p = buf;

	cw_put_be32(p + AT(cw_nbd_wire_request, magic), CW_NBD_REQUEST_MAGIC);
	cw_put_be16(p + AT(cw_nbd_wire_request, flags), req->flags);
	cw_put_be16(p + AT(cw_nbd_wire_request, type), req->type);
	cw_put_be64(p + AT(cw_nbd_wire_request, cookie), req->cookie);
	cw_put_be64(p + AT(cw_nbd_wire_request, offset), req->offset);
	cw_put_be32(p + AT(cw_nbd_wire_request, length), req->length);
}

int cw_nbd_decode_reply(const void *buf, size_t len, struct cw_nbd_reply *ret_rep)
{
	const uint8_t *p = buf;
	uint32_t magic;

	if (len < 4)
		return -EAGAIN;
	magic = cw_get_be32(p);
	memset(ret_rep, 0, sizeof(*ret_rep));
	if (magic == CW_NBD_SIMPLE_MAGIC) {
		if (len < CW_NBD_SIMPLE_REPLY_BYTES)
			return -EAGAIN;
		ret_rep->error = cw_get_be32(p + AT(cw_nbd_wire_simple_reply, error));
		ret_rep->cookie = cw_get_be64(p + AT(cw_nbd_wire_simple_reply, cookie));
		return CW_NBD_SIMPLE_REPLY_BYTES;
	}
	if (magic == CW_NBD_STRUCT_MAGIC) {
		if (len < CW_NBD_CHUNK_BYTES)
			return -EAGAIN;
		ret_rep->structured = true;
		ret_rep->flags = cw_get_be16(p + AT(cw_nbd_wire_chunk, flags));
		ret_rep->type = cw_get_be16(p + AT(cw_nbd_wire_chunk, type));
		ret_rep->cookie = cw_get_be64(p + AT(cw_nbd_wire_chunk, cookie));
		ret_rep->length = cw_get_be32(p + AT(cw_nbd_wire_chunk, length));
		return CW_NBD_CHUNK_BYTES;
	}
	return -EBADMSG;
}
