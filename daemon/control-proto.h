/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * control-proto — the control protocol of clockwised, as pure functions
 * over byte buffers: no sockets, no pool, so it can be unit-tested and
 * fuzzed (tests/fuzz/fuzz-control.c).  cwctl(8) documents it for users.
 *
 * One JSON object per line, each way, over a unix stream socket:
 *   request   {"cmd": "part.create", "args": {"name": "media", "size": 1073741824}}
 *   reply     {"ok": true, "result": <any JSON>}
 *             {"ok": false, "error": {"code": "not-found", "message": "...",
 *                                     "details": {...}}}        (details optional)
 *   progress  {"progress": {"phase": "seek", "done": 3, "total": 16}}
 * A request gets any number of progress lines, then exactly one reply.
 *
 * Validation is complete before a handler runs: the line is valid JSON
 * within the size and depth limits, an object with a known "cmd" string,
 * "args" (optional) an object holding only that command's arguments, each
 * of its type, every required one present.  So handlers only read typed
 * values.  Sizes, rates and times are integers (bytes, bytes per second,
 * nanoseconds); cwctl converts the suffixed forms.
 */
#ifndef CWD_CONTROL_PROTO_H
#define CWD_CONTROL_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

/* The longest line either side accepts, newline included. */
#define CWC_LINE_MAX (64 * 1024)
/* Nesting the parser accepts: requests are flat, replies a few levels. */
#define CWC_DEPTH_MAX 16

/* Stable error codes: clients branch on these; the messages are for
 * people and may change. */
enum cwc_code {
	CWC_OK = 0,
	CWC_E_BAD_REQUEST,	/* malformed JSON, wrong type, bad value */
	CWC_E_UNKNOWN_COMMAND,
	CWC_E_PERMISSION_DENIED,
	CWC_E_NOT_FOUND,
	CWC_E_EXISTS,
	CWC_E_NO_SPACE,
	CWC_E_REFUSED,		/* admission control said no: details say why */
	CWC_E_BUSY,		/* in use (blocks on a disk, an export of a partition) */
	CWC_E_IO_ERROR,
	CWC_E_TOO_LARGE,	/* a line longer than CWC_LINE_MAX */
	CWC_E_RATE_LIMITED,
	CWC_E_UNAVAILABLE,	/* a disk is missing; the partition cannot be used */
	CWC_E_NOT_SUPPORTED,	/* this server cannot do it (no data path) */
	CWC_E_INTERNAL,
	CWC_CODE_COUNT
};

const char *cwc_code_name(enum cwc_code code);		/* "bad-request" ... */
int cwc_code_parse(const char *name, enum cwc_code *ret_code);	/* 0 / -EINVAL */
/* The code a library error (-errno) is reported as. */
enum cwc_code cwc_code_from_errno(int neg_errno);

enum cwc_access {
	CWC_ACCESS_READ,	/* root and the read group (and the admin group) */
	CWC_ACCESS_CHANGE,	/* root and the admin group */
};

enum cwc_cmd {
	CWC_CMD_STATUS,
	CWC_CMD_DISK_ADD,
	CWC_CMD_DISK_LIST,
	CWC_CMD_DISK_REMOVE,
	CWC_CMD_DISK_CALIBRATE,
	CWC_CMD_PART_CREATE,
	CWC_CMD_PART_LIST,
	CWC_CMD_PART_SHOW,
	CWC_CMD_PART_RESIZE,
	CWC_CMD_PART_DELETE,
	CWC_CMD_RESV_CREATE,
	CWC_CMD_RESV_LIST,
	CWC_CMD_RESV_SHOW,
	CWC_CMD_RESV_RELEASE,
	CWC_CMD_EXPORT_LIST,
	CWC_CMD_EXPORT_ADD,
	CWC_CMD_EXPORT_REMOVE,
	CWC_CMD_STATS,
	CWC_CMD_COUNT
};

enum cwc_arg_type {
	CWC_ARG_STRING,		/* 1..4095 bytes, no NUL */
	CWC_ARG_UINT,		/* integer in [0, INT64_MAX] */
	CWC_ARG_BOOL,
};

struct cwc_arg_spec {
	const char *name;
	enum cwc_arg_type type;
	bool required;
};

struct cwc_cmd_spec {
	const char *name;		/* "disk.add" */
	enum cwc_access access;
	const struct cwc_arg_spec *args;	/* ends with a NULL name */
};

const struct cwc_cmd_spec *cwc_cmd_spec(enum cwc_cmd cmd);	/* NULL if out of range */
int cwc_cmd_lookup(const char *name, enum cwc_cmd *ret_cmd);	/* 0 / -ENOENT */

/* Why a line was refused. */
struct cwc_fail {
	enum cwc_code code;
	char message[256];
};

struct cwc_request {
	enum cwc_cmd cmd;
	json_object *root;	/* owned */
	json_object *args;	/* inside root; NULL when absent */
};

/* Parses and validates one request line (the newline, if any, excluded).
 * 0 with *ret filled (release with cwc_request_done), or -EINVAL with
 * ret_fail saying why, in which case *ret is empty. */
int cwc_request_parse(const char *buf, size_t len, struct cwc_request *ret,
		      struct cwc_fail *ret_fail);
void cwc_request_done(struct cwc_request *req);	/* NULL-safe, idempotent */

/* Typed arguments of a validated request: NULL / false when absent. */
const char *cwc_arg_str(const struct cwc_request *req, const char *name);
bool cwc_arg_uint(const struct cwc_request *req, const char *name, uint64_t *ret);
bool cwc_arg_bool(const struct cwc_request *req, const char *name, bool *ret);

/* Formatting: each returns a malloc'ed line ending in '\n', or NULL when
 * out of memory.  None takes ownership of its arguments. */
char *cwc_format_request(enum cwc_cmd cmd, json_object *args);
char *cwc_format_ok(json_object *result);	/* result NULL: null */
char *cwc_format_error(enum cwc_code code, const char *message, json_object *details);
char *cwc_format_progress(const char *phase, unsigned done, unsigned total);

/* A line from the server, as a client reads it. */
enum cwc_reply_kind {
	CWC_REPLY_OK,
	CWC_REPLY_ERROR,
	CWC_REPLY_PROGRESS,
};

struct cwc_reply {
	enum cwc_reply_kind kind;
	json_object *root;		/* owned */
	json_object *result;		/* OK: inside root (may be NULL: null) */
	enum cwc_code code;		/* ERROR; an unknown code reads as internal */
	const char *code_name;		/* ERROR: as sent */
	const char *message;		/* ERROR */
	json_object *details;		/* ERROR: may be NULL */
	const char *phase;		/* PROGRESS */
	uint64_t done, total;		/* PROGRESS */
};

int cwc_reply_parse(const char *buf, size_t len, struct cwc_reply *ret, struct cwc_fail *ret_fail);
void cwc_reply_done(struct cwc_reply *reply);	/* NULL-safe, idempotent */

/* Helpers for building results: json-c's int64 for unsigned values that
 * always fit (sizes, counts, nanoseconds). */
json_object *cwc_json_u64(uint64_t v);

#endif
