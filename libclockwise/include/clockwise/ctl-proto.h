/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ctl-proto — the control protocol of clockwised, as pure functions
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
#ifndef CLOCKWISE_CTL_PROTO_H
#define CLOCKWISE_CTL_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The longest line either side accepts, newline included. */
#define CW_CTL_LINE_MAX (64 * 1024)
/* Nesting the parser accepts: requests are flat, replies a few levels. */
#define CW_CTL_DEPTH_MAX 16

/* Stable error codes: clients branch on these; the messages are for
 * people and may change. */
enum cw_ctl_code {
	CW_CTL_OK = 0,
	CW_CTL_E_BAD_REQUEST,	/* malformed JSON, wrong type, bad value */
	CW_CTL_E_UNKNOWN_COMMAND,
	CW_CTL_E_PERMISSION_DENIED,
	CW_CTL_E_NOT_FOUND,
	CW_CTL_E_EXISTS,
	CW_CTL_E_NO_SPACE,
	CW_CTL_E_REFUSED,		/* admission control said no: details say why */
	CW_CTL_E_BUSY,		/* in use (blocks on a disk, an export of a partition) */
	CW_CTL_E_IO_ERROR,
	CW_CTL_E_TOO_LARGE,	/* a line longer than CW_CTL_LINE_MAX */
	CW_CTL_E_RATE_LIMITED,
	CW_CTL_E_UNAVAILABLE,	/* a disk is missing; the partition cannot be used */
	CW_CTL_E_NOT_SUPPORTED,	/* this server cannot do it (no data path) */
	CW_CTL_E_INTERNAL,
	CW_CTL_CODE_COUNT
};

const char *cw_ctl_code_name(enum cw_ctl_code code);		/* "bad-request" ... */
int cw_ctl_code_parse(const char *name, enum cw_ctl_code *ret_code);	/* 0 / -EINVAL */
/* The code a library error (-errno) is reported as. */
enum cw_ctl_code cw_ctl_code_from_errno(int neg_errno);

enum cw_ctl_access {
	CW_CTL_ACCESS_READ,	/* root and the read group (and the admin group) */
	CW_CTL_ACCESS_CHANGE,	/* root and the admin group */
};

enum cw_ctl_cmd {
	CW_CTL_CMD_STATUS,
	CW_CTL_CMD_DISK_ADD,
	CW_CTL_CMD_DISK_LIST,
	CW_CTL_CMD_DISK_REMOVE,
	CW_CTL_CMD_DISK_CALIBRATE,
	CW_CTL_CMD_PART_CREATE,
	CW_CTL_CMD_PART_LIST,
	CW_CTL_CMD_PART_SHOW,
	CW_CTL_CMD_PART_RESIZE,
	CW_CTL_CMD_PART_DELETE,
	CW_CTL_CMD_RESV_CREATE,
	CW_CTL_CMD_RESV_LIST,
	CW_CTL_CMD_RESV_SHOW,
	CW_CTL_CMD_RESV_RELEASE,
	CW_CTL_CMD_EXPORT_LIST,
	CW_CTL_CMD_EXPORT_ADD,
	CW_CTL_CMD_EXPORT_REMOVE,
	CW_CTL_CMD_STATS,
	CW_CTL_CMD_DISK_PLAN,
	CW_CTL_CMD_EXPORT_QOS,
	CW_CTL_CMD_DISK_HEADROOM,
	CW_CTL_CMD_DISK_EVACUATE,
	CW_CTL_CMD_PART_MOVE,
	CW_CTL_CMD_MOVE_LIST,
	CW_CTL_CMD_MOVE_PAUSE,
	CW_CTL_CMD_MOVE_RESUME,
	CW_CTL_CMD_MOVE_CANCEL,
	CW_CTL_CMD_PART_CACHE,
	CW_CTL_CMD_RESV_CLAIM,
	CW_CTL_CMD_DISK_SET,
	CW_CTL_CMD_DISK_REPLACE,
	CW_CTL_CMD_PART_REBUILD,
	CW_CTL_CMD_PART_SCRUB,
	CW_CTL_CMD_COUNT
};

enum cw_ctl_arg_type {
	CW_CTL_ARG_STRING,		/* 1..4095 bytes, no NUL */
	CW_CTL_ARG_UINT,		/* integer in [0, INT64_MAX] */
	CW_CTL_ARG_BOOL,
};

struct cw_ctl_arg_spec {
	const char *name;
	enum cw_ctl_arg_type type;
	bool required;
};

struct cw_ctl_cmd_spec {
	const char *name;		/* "disk.add" */
	enum cw_ctl_access access;
	const struct cw_ctl_arg_spec *args;	/* ends with a NULL name */
};

const struct cw_ctl_cmd_spec *cw_ctl_cmd_spec(enum cw_ctl_cmd cmd);	/* NULL if out of range */
int cw_ctl_cmd_lookup(const char *name, enum cw_ctl_cmd *ret_cmd);	/* 0 / -ENOENT */

/* Why a line was refused. */
struct cw_ctl_fail {
	enum cw_ctl_code code;
	char message[256];
};

struct cw_ctl_request {
	enum cw_ctl_cmd cmd;
	json_object *root;	/* owned */
	json_object *args;	/* inside root; NULL when absent */
};

/* Parses and validates one request line (the newline, if any, excluded).
 * 0 with *ret filled (release with cw_ctl_request_done), or -EINVAL with
 * ret_fail saying why, in which case *ret is empty. */
int cw_ctl_request_parse(const char *buf, size_t len, struct cw_ctl_request *ret,
		      struct cw_ctl_fail *ret_fail);
void cw_ctl_request_done(struct cw_ctl_request *req);	/* NULL-safe, idempotent */

/* Typed arguments of a validated request: NULL / false when absent. */
const char *cw_ctl_arg_str(const struct cw_ctl_request *req, const char *name);
bool cw_ctl_arg_uint(const struct cw_ctl_request *req, const char *name, uint64_t *ret);
bool cw_ctl_arg_bool(const struct cw_ctl_request *req, const char *name, bool *ret);

/* Formatting: each returns a malloc'ed line ending in '\n', or NULL when
 * out of memory.  None takes ownership of its arguments. */
char *cw_ctl_format_request(enum cw_ctl_cmd cmd, json_object *args);
char *cw_ctl_format_ok(json_object *result);	/* result NULL: null */
char *cw_ctl_format_error(enum cw_ctl_code code, const char *message, json_object *details);
char *cw_ctl_format_progress(const char *phase, unsigned done, unsigned total);

/* A line from the server, as a client reads it. */
enum cw_ctl_reply_kind {
	CW_CTL_REPLY_OK,
	CW_CTL_REPLY_ERROR,
	CW_CTL_REPLY_PROGRESS,
};

struct cw_ctl_reply {
	enum cw_ctl_reply_kind kind;
	json_object *root;		/* owned */
	json_object *result;		/* OK: inside root (may be NULL: null) */
	enum cw_ctl_code code;		/* ERROR; an unknown code reads as internal */
	const char *code_name;		/* ERROR: as sent */
	const char *message;		/* ERROR */
	json_object *details;		/* ERROR: may be NULL */
	const char *phase;		/* PROGRESS */
	uint64_t done, total;		/* PROGRESS */
};

int cw_ctl_reply_parse(const char *buf, size_t len, struct cw_ctl_reply *ret, struct cw_ctl_fail *ret_fail);
void cw_ctl_reply_done(struct cw_ctl_reply *reply);	/* NULL-safe, idempotent */

/* Helpers for building results: json-c's int64 for unsigned values that
 * always fit (sizes, counts, nanoseconds). */
json_object *cw_ctl_json_u64(uint64_t v);

/* The stats reply's best effort of an export on one disk (its counters
 * and its share of the disk: "disk_id", "served_ns", "resv_ns",
 * "busy_ns", "throttled_ns", "reserve_ppm", "weight", "limit_ppm"),
 * added to o, and read back (client left as it was; -EINVAL when a key
 * is missing).  And a row of cw_sched_share_table() as "received",
 * "due", "reserved", "limit", "throttled" (fractions of one disk's time;
 * limit null: none), "backlogged", "reservation_met", "limit_held". */
struct cw_sched_share_in;
struct cw_sched_share_out;
void cw_ctl_share_in_add(json_object *o, const struct cw_sched_share_in *in);
int cw_ctl_share_in_parse(json_object *o, struct cw_sched_share_in *ret);
void cw_ctl_share_out_add(json_object *o, const struct cw_sched_share_out *row);

#ifdef __cplusplus
}
#endif

#endif
