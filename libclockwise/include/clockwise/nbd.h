/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwise/nbd.h — the NBD wire protocol as pure functions over buffers.
 *
 * Nothing here does I/O (DESIGN rule 4): the server reads bytes, hands
 * them to these functions, and writes the bytes they produce.  That keeps
 * every message unit-testable and fuzzable.
 *
 * Covered: the fixed newstyle handshake (greeting, client flags, option
 * requests and replies: GO, INFO, LIST, EXPORT_NAME, ABORT,
 * STRUCTURED_REPLY, STARTTLS (the server runs the TLS handshake itself),
 * LIST_META_CONTEXT and SET_META_CONTEXT with the one context
 * "base:allocation"; anything else gets NBD_REP_ERR_UNSUP),
 * transmission requests with their validation (CACHE, FAST_ZERO and
 * BLOCK_STATUS included), and simple and structured replies (OFFSET_DATA,
 * NONE, ERROR, BLOCK_STATUS).  Client-side decoders exist too, for tests
 * and tools.
 *
 * All multi-byte fields travel big-endian.  The packed structs below show
 * the wire layout; the cw_nbd_* functions convert to and from host order,
 * so callers never touch the packed structs unless they want to.
 */
#ifndef CLOCKWISE_NBD_H
#define CLOCKWISE_NBD_H

#include <clockwise/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- magic numbers ---- */
#define CW_NBD_MAGIC           UINT64_C(0x4e42444d41474943) /* "NBDMAGIC" */
#define CW_NBD_IHAVEOPT        UINT64_C(0x49484156454f5054) /* "IHAVEOPT" */
#define CW_NBD_REP_MAGIC       UINT64_C(0x0003e889045565a9)
#define CW_NBD_REQUEST_MAGIC   UINT32_C(0x25609513)
#define CW_NBD_SIMPLE_MAGIC    UINT32_C(0x67446698)
#define CW_NBD_STRUCT_MAGIC    UINT32_C(0x668e33ef)

/* ---- handshake flags (server, 16 bits) and client flags (32 bits) ---- */
#define CW_NBD_FLAG_FIXED_NEWSTYLE   (1u << 0)
#define CW_NBD_FLAG_NO_ZEROES        (1u << 1)
#define CW_NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0)
#define CW_NBD_FLAG_C_NO_ZEROES      (1u << 1)

/* ---- transmission flags (16 bits, per export) ---- */
#define CW_NBD_FLAG_HAS_FLAGS         (1u << 0)
#define CW_NBD_FLAG_READ_ONLY         (1u << 1)
#define CW_NBD_FLAG_SEND_FLUSH        (1u << 2)
#define CW_NBD_FLAG_SEND_FUA          (1u << 3)
#define CW_NBD_FLAG_ROTATIONAL        (1u << 4)
#define CW_NBD_FLAG_SEND_TRIM         (1u << 5)
#define CW_NBD_FLAG_SEND_WRITE_ZEROES (1u << 6)
#define CW_NBD_FLAG_SEND_DF           (1u << 7)
#define CW_NBD_FLAG_CAN_MULTI_CONN    (1u << 8)
#define CW_NBD_FLAG_SEND_CACHE        (1u << 10)
#define CW_NBD_FLAG_SEND_FAST_ZERO    (1u << 11)

/* ---- options ---- */
#define CW_NBD_OPT_EXPORT_NAME       1u
#define CW_NBD_OPT_ABORT             2u
#define CW_NBD_OPT_LIST              3u
#define CW_NBD_OPT_STARTTLS          5u
#define CW_NBD_OPT_INFO              6u
#define CW_NBD_OPT_GO                7u
#define CW_NBD_OPT_STRUCTURED_REPLY  8u
#define CW_NBD_OPT_LIST_META_CONTEXT 9u
#define CW_NBD_OPT_SET_META_CONTEXT  10u
#define CW_NBD_OPT_EXTENDED_HEADERS  11u

/* ---- option reply types ---- */
#define CW_NBD_REP_ACK        1u
#define CW_NBD_REP_SERVER     2u
#define CW_NBD_REP_INFO       3u
#define CW_NBD_REP_META_CONTEXT 4u
#define CW_NBD_REP_ERR(n)     ((UINT32_C(1) << 31) + (n))
#define CW_NBD_REP_ERR_UNSUP           CW_NBD_REP_ERR(1)
#define CW_NBD_REP_ERR_POLICY          CW_NBD_REP_ERR(2)
#define CW_NBD_REP_ERR_INVALID         CW_NBD_REP_ERR(3)
#define CW_NBD_REP_ERR_PLATFORM        CW_NBD_REP_ERR(4)
#define CW_NBD_REP_ERR_TLS_REQD        CW_NBD_REP_ERR(5)
#define CW_NBD_REP_ERR_UNKNOWN         CW_NBD_REP_ERR(6)
#define CW_NBD_REP_ERR_SHUTDOWN        CW_NBD_REP_ERR(7)
#define CW_NBD_REP_ERR_BLOCK_SIZE_REQD CW_NBD_REP_ERR(8)
#define CW_NBD_REP_ERR_TOO_BIG         CW_NBD_REP_ERR(9)
#define CW_NBD_REP_IS_ERR(r)  (((r) >> 31) != 0)

/* ---- NBD_REP_INFO item types ---- */
#define CW_NBD_INFO_EXPORT      0u
#define CW_NBD_INFO_NAME        1u
#define CW_NBD_INFO_DESCRIPTION 2u
#define CW_NBD_INFO_BLOCK_SIZE  3u

/* ---- commands and command flags ---- */
#define CW_NBD_CMD_READ         0u
#define CW_NBD_CMD_WRITE        1u
#define CW_NBD_CMD_DISC         2u
#define CW_NBD_CMD_FLUSH        3u
#define CW_NBD_CMD_TRIM         4u
#define CW_NBD_CMD_CACHE        5u
#define CW_NBD_CMD_WRITE_ZEROES 6u
#define CW_NBD_CMD_BLOCK_STATUS 7u

#define CW_NBD_CMD_FLAG_FUA       (1u << 0)
#define CW_NBD_CMD_FLAG_NO_HOLE   (1u << 1)
#define CW_NBD_CMD_FLAG_DF        (1u << 2)
#define CW_NBD_CMD_FLAG_REQ_ONE   (1u << 3)
#define CW_NBD_CMD_FLAG_FAST_ZERO (1u << 4)

/* ---- structured reply flags and chunk types ---- */
#define CW_NBD_REPLY_FLAG_DONE         (1u << 0)
#define CW_NBD_REPLY_TYPE_NONE         0u
#define CW_NBD_REPLY_TYPE_OFFSET_DATA  1u
#define CW_NBD_REPLY_TYPE_OFFSET_HOLE  2u
#define CW_NBD_REPLY_TYPE_BLOCK_STATUS 5u
#define CW_NBD_REPLY_TYPE_ERROR        ((1u << 15) + 1)
#define CW_NBD_REPLY_TYPE_ERROR_OFFSET ((1u << 15) + 2)

/* ---- error values on the wire (not the host's errno numbering) ---- */
#define CW_NBD_EPERM     1u
#define CW_NBD_EIO       5u
#define CW_NBD_ENOMEM    12u
#define CW_NBD_EINVAL    22u
#define CW_NBD_ENOSPC    28u
#define CW_NBD_EOVERFLOW 75u
#define CW_NBD_ENOTSUP   95u
#define CW_NBD_ESHUTDOWN 108u

/* ---- meta contexts ---- */
/* The one context offered: which parts of an export are holes. */
#define CW_NBD_META_BASE_ALLOCATION "base:allocation"
/* Its id on the wire (any value the server picks; one per context). */
#define CW_NBD_META_ID_ALLOCATION 1u
/* base:allocation status flags of a BLOCK_STATUS descriptor. */
#define CW_NBD_STATE_HOLE (1u << 0)	/* not allocated */
#define CW_NBD_STATE_ZERO (1u << 1)	/* reads as zeros */

/* ---- limits ---- */
#define CW_NBD_STRING_MAX     4096u	/* names, descriptions, messages */
/* The largest option payload the handshake accepts: an INFO/GO request
 * with a maximal name and a generous list of info requests, or a meta
 * context request with a maximal name and a page of queries. */
#define CW_NBD_OPT_DATA_MAX   (4u + CW_NBD_STRING_MAX + 4u + 4096u)
/* Options one connection may send before the server gives up on it. */
#define CW_NBD_OPT_COUNT_MAX  256u
#define CW_NBD_REQUEST_MAX_DEFAULT (UINT32_C(32) << 20)	/* 32 MiB */

/* ---- wire layouts (all big-endian) ---- */

/* S->C first message of the newstyle handshake (18 bytes). */
struct cw_nbd_wire_greeting {
	uint64_t nbdmagic;	/* CW_NBD_MAGIC */
	uint64_t ihaveopt;	/* CW_NBD_IHAVEOPT: newstyle */
	uint16_t gflags;	/* CW_NBD_FLAG_FIXED_NEWSTYLE | NO_ZEROES */
} __attribute__((packed));

/* C->S answer to the greeting (4 bytes). */
struct cw_nbd_wire_client_flags {
	uint32_t cflags;	/* CW_NBD_FLAG_C_* */
} __attribute__((packed));

/* C->S option request header (16 bytes), followed by length bytes. */
struct cw_nbd_wire_option {
	uint64_t magic;		/* CW_NBD_IHAVEOPT */
	uint32_t option;	/* CW_NBD_OPT_* */
	uint32_t length;	/* bytes of option data that follow */
} __attribute__((packed));

/* S->C option reply header (20 bytes), followed by length bytes. */
struct cw_nbd_wire_option_reply {
	uint64_t magic;		/* CW_NBD_REP_MAGIC */
	uint32_t option;	/* the option this answers */
	uint32_t reply;		/* CW_NBD_REP_* */
	uint32_t length;	/* bytes of reply data that follow */
} __attribute__((packed));

/* S->C answer to NBD_OPT_EXPORT_NAME (10 bytes, then 124 zero bytes
 * unless both sides agreed on NO_ZEROES). */
struct cw_nbd_wire_export_name_reply {
	uint64_t size;		/* export size in bytes */
	uint16_t eflags;	/* transmission flags */
} __attribute__((packed));

/* NBD_REP_INFO payload for NBD_INFO_EXPORT (12 bytes). */
struct cw_nbd_wire_info_export {
	uint16_t info;		/* CW_NBD_INFO_EXPORT */
	uint64_t size;		/* export size in bytes */
	uint16_t eflags;	/* transmission flags */
} __attribute__((packed));

/* NBD_REP_INFO payload for NBD_INFO_BLOCK_SIZE (14 bytes). */
struct cw_nbd_wire_info_block_size {
	uint16_t info;		/* CW_NBD_INFO_BLOCK_SIZE */
	uint32_t minimum;	/* power of two, 1..64 KiB */
	uint32_t preferred;	/* power of two >= max(512, minimum) */
	uint32_t maximum;	/* multiple of minimum, the largest payload */
} __attribute__((packed));

/* C->S transmission request (28 bytes), followed by length bytes of data
 * for NBD_CMD_WRITE. */
struct cw_nbd_wire_request {
	uint32_t magic;		/* CW_NBD_REQUEST_MAGIC */
	uint16_t flags;		/* CW_NBD_CMD_FLAG_* */
	uint16_t type;		/* CW_NBD_CMD_* */
	uint64_t cookie;	/* echoed in the reply ("handle") */
	uint64_t offset;	/* byte offset in the export */
	uint32_t length;	/* byte count */
} __attribute__((packed));

/* S->C simple reply (16 bytes), followed by the data of a successful
 * NBD_CMD_READ when structured replies were not negotiated. */
struct cw_nbd_wire_simple_reply {
	uint32_t magic;		/* CW_NBD_SIMPLE_MAGIC */
	uint32_t error;		/* 0 or CW_NBD_E* */
	uint64_t cookie;	/* the request's cookie */
} __attribute__((packed));

/* S->C structured reply chunk header (20 bytes), followed by length
 * bytes of payload. */
struct cw_nbd_wire_chunk {
	uint32_t magic;		/* CW_NBD_STRUCT_MAGIC */
	uint16_t flags;		/* CW_NBD_REPLY_FLAG_DONE on the last chunk */
	uint16_t type;		/* CW_NBD_REPLY_TYPE_* */
	uint64_t cookie;	/* the request's cookie */
	uint32_t length;	/* payload bytes */
} __attribute__((packed));

/* Payload start of an OFFSET_DATA chunk (8 bytes), then the data. */
struct cw_nbd_wire_chunk_offset_data {
	uint64_t offset;	/* export offset of the first data byte */
} __attribute__((packed));

/* Payload start of a BLOCK_STATUS chunk (4 bytes), then descriptors. */
struct cw_nbd_wire_chunk_block_status {
	uint32_t context_id;	/* the meta context described */
} __attribute__((packed));

/* One BLOCK_STATUS descriptor (8 bytes): the next length bytes of the
 * export from where the previous one ended have these status flags. */
struct cw_nbd_wire_block_descriptor {
	uint32_t length;	/* bytes, > 0 */
	uint32_t status;	/* CW_NBD_STATE_* for base:allocation */
} __attribute__((packed));

/* Payload of an ERROR chunk (6 bytes), then msglen bytes of message. */
struct cw_nbd_wire_chunk_error {
	uint32_t error;		/* CW_NBD_E*, never 0 */
	uint16_t msglen;	/* bytes of human-readable message */
} __attribute__((packed));

#define CW_NBD_GREETING_BYTES     sizeof(struct cw_nbd_wire_greeting)
#define CW_NBD_CLIENT_FLAGS_BYTES sizeof(struct cw_nbd_wire_client_flags)
#define CW_NBD_OPTION_BYTES       sizeof(struct cw_nbd_wire_option)
#define CW_NBD_OPTION_REPLY_BYTES sizeof(struct cw_nbd_wire_option_reply)
#define CW_NBD_REQUEST_BYTES      sizeof(struct cw_nbd_wire_request)
#define CW_NBD_SIMPLE_REPLY_BYTES sizeof(struct cw_nbd_wire_simple_reply)
#define CW_NBD_CHUNK_BYTES        sizeof(struct cw_nbd_wire_chunk)
/* Largest header cw_nbd_encode_read_reply() writes. */
#define CW_NBD_READ_REPLY_MAX     (CW_NBD_CHUNK_BYTES + 8)
/* The header cw_nbd_encode_block_status() writes: chunk and context id. */
#define CW_NBD_BLOCK_STATUS_HDR_BYTES (CW_NBD_CHUNK_BYTES + 4)
/* Largest reply cw_nbd_encode_error_reply() writes (message included). */
#define CW_NBD_ERROR_REPLY_MAX    (CW_NBD_CHUNK_BYTES + 6 + 128)

/* ---- host-order forms ---- */

/* What an export looks like to the handshake. */
struct cw_nbd_export_info {
	const char *name;		/* "" is the default export name */
	const char *description;	/* NULL or shown by nbdinfo */
	uint64_t size;
	uint16_t eflags;		/* CW_NBD_FLAG_* transmission flags */
	uint32_t min_block;		/* 0: no constraints advertised */
	uint32_t pref_block;
	uint32_t max_block;
	/* The export answers BLOCK_STATUS for base:allocation. */
	bool block_status;
};

struct cw_nbd_option {
	uint32_t option;
	uint32_t length;
};

struct cw_nbd_option_reply {
	uint32_t option;
	uint32_t reply;
	uint32_t length;
};

struct cw_nbd_request {
	uint16_t flags;
	uint16_t type;
	uint64_t cookie;
	uint64_t offset;
	uint32_t length;
};

/* A reply as a client sees it: a simple reply or one structured chunk. */
struct cw_nbd_reply {
	bool structured;
	uint16_t flags;		/* structured only */
	uint16_t type;		/* structured only */
	uint32_t error;		/* simple: error field */
	uint64_t cookie;
	uint32_t length;	/* structured: payload length */
};

/* ---- handshake (server side) ---- */

/* Verdicts of cw_nbd_hs_option(). */
enum cw_nbd_hs_verdict {
	CW_NBD_HS_CONTINUE = 0,	/* send the output, read the next option */
	CW_NBD_HS_TRANSMIT = 1,	/* send the output, enter transmission */
	CW_NBD_HS_CLOSE = 2,	/* send the output, then close cleanly */
	CW_NBD_HS_STARTTLS = 3,	/* send the output (in the clear), run the
				 * TLS handshake, then cw_nbd_hs_tls_started()
				 * and read the next option over TLS; close if
				 * the TLS handshake fails */
};

/* What a listener offers of TLS. */
enum cw_nbd_tls {
	CW_NBD_TLS_OFF = 0,	/* STARTTLS is not supported */
	CW_NBD_TLS_ON = 1,	/* offered; a client may go on without it */
	CW_NBD_TLS_REQUIRE = 2,	/* every option but STARTTLS and ABORT gets
				 * NBD_REP_ERR_TLS_REQD before it */
};

#define CW_NBD_CLASS_MAX 31	/* a connection class's name, in bytes */

/* What one client may do with one export (the server's policy). */
enum cw_nbd_access {
	CW_NBD_ACCESS_RW = 0,	/* read and write (as far as the export allows) */
	CW_NBD_ACCESS_RO = 1,	/* read only: the export is shown read-only */
	CW_NBD_ACCESS_NONE = 2,	/* not listed, and chosen only to be refused */
};

/* The state of one connection's option haggling.  Fill exports and
 * n_exports (and default_export, access) before cw_nbd_hs_client_flags();
 * the rest is the codec's. */
struct cw_nbd_handshake {
	const struct cw_nbd_export_info *exports;
	size_t n_exports;
	/* Index of the export an empty name selects, or -1: unknown. */
	int default_export;
	/* NULL: this client may read and write every export; else one
	 * enum cw_nbd_access per export. */
	const uint8_t *access;
	/* Non-NULL: the server will not serve this client (it is over a
	 * limit); every option but ABORT is refused with
	 * NBD_REP_ERR_POLICY and this message, EXPORT_NAME closes. */
	const char *refuse;
	/* What this connection's listener offers of TLS (kept by reset). */
	enum cw_nbd_tls tls;

	/* results */
	uint32_t cflags;	/* the client's flags */
	bool structured;	/* NBD_OPT_STRUCTURED_REPLY agreed */
	/* The client asked for NBD_INFO_BLOCK_SIZE.  If it did not, it
	 * was told a minimum block of 1, and the server must accept
	 * requests of any alignment (by read-modify-write if need be). */
	bool block_size_known;
	int export_index;	/* chosen export once TRANSMIT, else -1 */
	/* The connection class the client named with the export, as
	 * "EXPORT@CLASS" (when no export has that whole name), once
	 * TRANSMIT; "" for none.  The server may order requests by it. */
	char client_class[CW_NBD_CLASS_MAX + 1];
	uint16_t eflags;	/* the transmission flags sent for it */
	unsigned n_options;
	/* base:allocation was chosen by SET_META_CONTEXT for the export
	 * meta_export; once TRANSMIT, meta_allocation says whether it holds
	 * for the chosen export (BLOCK_STATUS may be sent). */
	bool meta_allocation;
	int meta_export;
	bool tls_active;	/* STARTTLS done: the options go over TLS */
};

/* A growable output buffer the handshake appends replies to.  Start it
 * zeroed; release data with free(). */
struct cw_nbd_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
};

/* Writes the 18-byte greeting into buf (CW_NBD_GREETING_BYTES). */
void cw_nbd_encode_greeting(void *buf);

/* Prepares hs for a new connection (keeps exports and default_export). */
void cw_nbd_hs_reset(struct cw_nbd_handshake *hs);

/* Takes the client's 4-byte flags.  Returns 0, or -EPROTO for unknown
 * flags or a client that does not speak fixed newstyle: close then. */
int cw_nbd_hs_client_flags(struct cw_nbd_handshake *hs, const void *buf);

/* The TLS handshake after CW_NBD_HS_STARTTLS succeeded: what was agreed
 * in the clear (structured replies, meta contexts) is forgotten, as the
 * protocol asks, and options are now served under TLS. */
void cw_nbd_hs_tls_started(struct cw_nbd_handshake *hs);

/* Decodes a 16-byte option header.  -EBADMSG on a wrong magic. */
int cw_nbd_decode_option(const void *buf, struct cw_nbd_option *ret_opt);

/*
 * Answers one option.  data holds opt->length bytes, or is NULL when the
 * server did not keep a payload longer than CW_NBD_OPT_DATA_MAX (it gets
 * NBD_REP_ERR_TOO_BIG).  Replies are appended to out.  Returns a
 * cw_nbd_hs_verdict, or -ENOMEM (out could not grow) or -EPROTO (the
 * client broke the protocol beyond an error reply): close at once.
 */
int cw_nbd_hs_option(struct cw_nbd_handshake *hs, const struct cw_nbd_option *opt,
		     const void *data, struct cw_nbd_buf *out);

/* ---- transmission (server side) ---- */

/* Decodes a 28-byte request.  -EBADMSG on a wrong magic: the stream can
 * no longer be framed, so the server must close. */
int cw_nbd_decode_request(const void *buf, struct cw_nbd_request *ret_req);

/* What the server does with a decoded request. */
enum cw_nbd_action {
	CW_NBD_EXEC = 0,	/* valid: run it */
	CW_NBD_REPLY_ERROR = 1,	/* reply error (after discarding payload) */
	CW_NBD_DISCONNECT = 2,	/* close without reply (NBD_CMD_DISC or a
				 * request that cannot be answered safely) */
};

struct cw_nbd_verdict {
	enum cw_nbd_action action;
	uint32_t error;		/* CW_NBD_E* for CW_NBD_REPLY_ERROR */
	uint32_t payload;	/* bytes of write data to read: into the
				 * buffer (EXEC) or to discard (ERROR) */
	const char *why;	/* short reason for logs and error chunks */
};

/* The export as the transmission phase checks requests against it. */
struct cw_nbd_limits {
	uint64_t size;
	uint16_t eflags;	/* what was advertised */
	uint32_t min_block;	/* alignment of offset and length; 0 or 1: none */
	uint32_t max_request;	/* largest READ/WRITE payload */
	bool structured;
	bool block_status;	/* a meta context was agreed: BLOCK_STATUS */
};

/* Judges a request: magic already checked by cw_nbd_decode_request(). */
struct cw_nbd_verdict cw_nbd_check_request(const struct cw_nbd_limits *lim,
					   const struct cw_nbd_request *req);

/* ---- replies (server side) ---- */

/* A simple reply (16 bytes). */
void cw_nbd_encode_simple_reply(void *buf, uint64_t cookie, uint32_t error);

/* A structured chunk header (20 bytes). */
void cw_nbd_encode_chunk(void *buf, uint64_t cookie, uint16_t flags, uint16_t type,
			 uint32_t length);

/* The header that precedes length bytes of read data: a simple reply, or
 * an OFFSET_DATA chunk marked DONE.  Writes at most CW_NBD_READ_REPLY_MAX
 * bytes and returns how many. */
size_t cw_nbd_encode_read_reply(void *buf, bool structured, uint64_t cookie,
				uint64_t offset, uint32_t length);

/* A successful reply without data: a simple reply (allowed for every
 * command but READ, even with structured replies). Returns 16. */
size_t cw_nbd_encode_ok_reply(void *buf, uint64_t cookie);

/* A failed request: a simple reply, or an ERROR chunk marked DONE carrying
 * msg (truncated to 128 bytes; may be NULL).  Writes at most
 * CW_NBD_ERROR_REPLY_MAX bytes and returns how many. */
size_t cw_nbd_encode_error_reply(void *buf, bool structured, uint64_t cookie,
				 uint32_t error, const char *msg);

/* One extent of a BLOCK_STATUS answer, in host order (the same 8 bytes
 * as its wire descriptor, so it is converted in place). */
struct cw_nbd_extent {
	uint32_t length;
	uint32_t status;
};

/* The answer to BLOCK_STATUS for context_id: writes the chunk header and
 * context id (CW_NBD_BLOCK_STATUS_HDR_BYTES) into hdr, marked DONE, and
 * turns ext[0..n) into wire descriptors in place; they follow the header
 * on the wire.  n is at least 1.  Returns the header's length. */
size_t cw_nbd_encode_block_status(void *hdr, uint64_t cookie, uint32_t context_id,
				  struct cw_nbd_extent *ext, uint32_t n);

/* Maps a host errno (positive or negative) to its NBD wire value. */
uint32_t cw_nbd_errno_to_wire(int err);

/* What an export can do, for cw_nbd_eflags(). */
struct cw_nbd_caps {
	bool read_only;
	bool can_flush;
	bool can_trim;
	bool can_zero;
	bool can_fast_zero;	/* a zero that would be slow fails at once */
	bool can_cache;
	bool multi_conn;
	bool structured;
};

/* The transmission flags an export advertises, from its capabilities. */
uint16_t cw_nbd_eflags(const struct cw_nbd_caps *caps);

/* ---- client side (tests, tools) ---- */

/* Checks an 18-byte greeting; returns the handshake flags or -EBADMSG. */
int cw_nbd_decode_greeting(const void *buf);

/* Writes an option request header (16 bytes). */
void cw_nbd_encode_option(void *buf, uint32_t option, uint32_t length);

/* Decodes a 20-byte option reply header.  -EBADMSG on a wrong magic. */
int cw_nbd_decode_option_reply(const void *buf, struct cw_nbd_option_reply *ret_rep);

/* Parses an NBD_REP_INFO payload into *info (fields it names are set).
 * Returns the info type, or -EBADMSG. */
int cw_nbd_decode_info(const void *data, size_t len, struct cw_nbd_export_info *info,
		       char *name_buf, size_t name_cap);

/* The option data of LIST_META_CONTEXT or SET_META_CONTEXT for export
 * name asking for the n queries; appended to out.  -ENOMEM, -EINVAL for
 * a name or query longer than CW_NBD_STRING_MAX. */
int cw_nbd_encode_meta_query(struct cw_nbd_buf *out, const char *name,
			     const char *const *queries, size_t n);

/* Writes a request header (28 bytes). */
void cw_nbd_encode_request(void *buf, const struct cw_nbd_request *req);

/* Decodes the first bytes of a reply.  Reads 4 bytes of magic; a simple
 * reply needs 16 bytes and a chunk 20.  Returns the header size consumed,
 * -EAGAIN if len is too short for it, or -EBADMSG. */
int cw_nbd_decode_reply(const void *buf, size_t len, struct cw_nbd_reply *ret_rep);

#ifdef __cplusplus
}
#endif
#endif
