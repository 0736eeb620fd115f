/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The control protocol codec (see clockwise/ctl-proto.h).  json-c does the JSON;
 * this file decides what a well-formed request is, so that every later
 * step can trust its input: a refusal here is the whole of the error
 * handling for malformed, unknown and mistyped input.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clockwise/ctl-proto.h"
#include "clockwise/sched-beq.h"

static const char *const code_names[CW_CTL_CODE_COUNT] = {
	[CW_CTL_OK] = "ok",
	[CW_CTL_E_BAD_REQUEST] = "bad-request",
	[CW_CTL_E_UNKNOWN_COMMAND] = "unknown-command",
	[CW_CTL_E_PERMISSION_DENIED] = "permission-denied",
	[CW_CTL_E_NOT_FOUND] = "not-found",
	[CW_CTL_E_EXISTS] = "exists",
	[CW_CTL_E_NO_SPACE] = "no-space",
	[CW_CTL_E_REFUSED] = "refused",
	[CW_CTL_E_BUSY] = "busy",
	[CW_CTL_E_IO_ERROR] = "io-error",
	[CW_CTL_E_TOO_LARGE] = "too-large",
	[CW_CTL_E_RATE_LIMITED] = "rate-limited",
	[CW_CTL_E_UNAVAILABLE] = "unavailable",
	[CW_CTL_E_NOT_SUPPORTED] = "not-supported",
	[CW_CTL_E_INTERNAL] = "internal",
};

const char *cw_ctl_code_name(enum cw_ctl_code code)
{
	return (unsigned)code < CW_CTL_CODE_COUNT ? code_names[code] : "internal";
}

int cw_ctl_code_parse(const char *name, enum cw_ctl_code *ret_code)
{
	for (unsigned i = 0; name && i < CW_CTL_CODE_COUNT; i++) {
		if (strcmp(name, code_names[i]) == 0) {
			*ret_code = (enum cw_ctl_code)i;
			return 0;
		}
	}
	return -EINVAL;
}

enum cw_ctl_code cw_ctl_code_from_errno(int neg_errno)
{
	switch (-neg_errno) {
	case 0: return CW_CTL_OK;
	case EINVAL: case ERANGE: case ENAMETOOLONG: case EALREADY: return CW_CTL_E_BAD_REQUEST;
	case EPERM: case EACCES: case EROFS: return CW_CTL_E_PERMISSION_DENIED;
	case ENOENT: case ESRCH: return CW_CTL_E_NOT_FOUND;
	case EEXIST: return CW_CTL_E_EXISTS;
	case ENOSPC: case EFBIG: case EXDEV: return CW_CTL_E_NO_SPACE;
	case EBUSY: case ESTALE: return CW_CTL_E_BUSY;
	case EIO: case EUCLEAN: case ENOTBLK: return CW_CTL_E_IO_ERROR;
	case ENODEV: case ENXIO: return CW_CTL_E_UNAVAILABLE;
	case EOPNOTSUPP: case ENOSYS: return CW_CTL_E_NOT_SUPPORTED;
	case EMSGSIZE: case E2BIG: return CW_CTL_E_TOO_LARGE;
	default: return CW_CTL_E_INTERNAL;
	}
}

#define S(n) { n, CW_CTL_ARG_STRING, false }
#define SR(n) { n, CW_CTL_ARG_STRING, true }
#define U(n) { n, CW_CTL_ARG_UINT, false }
#define UR(n) { n, CW_CTL_ARG_UINT, true }
#define B(n) { n, CW_CTL_ARG_BOOL, false }
#define END { NULL, 0, false }

static const struct cw_ctl_arg_spec no_args[] = { END };
static const struct cw_ctl_arg_spec name_only[] = { SR("name"), END };
static const struct cw_ctl_arg_spec id_only[] = { UR("id"), END };
static const struct cw_ctl_arg_spec disk_replace[] = { SR("name"), SR("new"), END };
static const struct cw_ctl_arg_spec part_scrub[] = { SR("name"), B("repair"), END };
static const struct cw_ctl_arg_spec disk_add[] = {
	SR("path"), S("tier"), S("name"), S("emulate"), S("domain"), END
};
/* domain "": the disk's own. */
static const struct cw_ctl_arg_spec disk_set[] = { SR("name"), S("domain"), B("spare"), END };
static const struct cw_ctl_arg_spec name_opt[] = { S("name"), END };
/* force: part.delete even when it holds data, export.remove even while
 * clients are connected (they are disconnected) */
static const struct cw_ctl_arg_spec name_force[] = { SR("name"), B("force"), END };
/* from_block: list the runs from this block on (a page; see next_block). */
static const struct cw_ctl_arg_spec part_show[] = { SR("name"), U("from_block"), END };
/* percentile: an image's tail, "99.9" (cw_calib_parse_percentile) */
static const struct cw_ctl_arg_spec disk_calibrate[] = {
	SR("name"), B("quick"), S("percentile"), END
};
static const struct cw_ctl_arg_spec part_create[] = {
	SR("name"), UR("size"), S("policy"), S("tier"), S("zone"), S("disk"), B("tier_fallback"),
	U("copies"), END
};
/* disks: names or ids, comma-separated. */
static const struct cw_ctl_arg_spec part_move[] = {
	SR("name"), S("policy"), S("tier"), S("zone"), S("disks"), END
};
static const struct cw_ctl_arg_spec id_opt[] = { U("id"), END };
/* pid: the process whose connections alone may hold the reservation's
 * real-time priority (default the caller's); drop: none from now on. */
static const struct cw_ctl_arg_spec resv_claim[] = { UR("id"), U("pid"), B("drop"), END };
/* size: bytes of SSD (0: none); mode: write-through or write-back. */
static const struct cw_ctl_arg_spec part_cache[] = { SR("name"), U("size"), S("mode"), END };
/* One of size (the new size), grow or shrink (by so many bytes); a
 * shrink of blocks that hold data needs force. */
static const struct cw_ctl_arg_spec part_resize[] = {
	SR("name"), U("size"), U("grow"), U("shrink"), B("force"), END
};
/* range: bytes [range_start, range_end) of the partition (range_end 0 or
 * absent: its end); start: nanoseconds from now; duration 0: open. */
/* dry_run: plan and test, book nothing.  due: "disk" (default) or
 * "stream", when a request is due after its release (enum cw_admit_due).
 * survive: 0 or 1, the disks whose loss the stream must survive (absent:
 * 1 on a mirrored partition, 0 on one copy); record: a recording stream,
 * each request charged on every copy's disk. */
static const struct cw_ctl_arg_spec resv_create[] = {
	SR("part"), UR("rate"), UR("block"), U("range_start"), U("range_end"),
	U("start"), U("duration"), B("dry_run"), S("due"), U("survive"), B("record"), END
};
/* block: of the stream asked about (absent: the pool's block). */
static const struct cw_ctl_arg_spec disk_headroom[] = { S("name"), U("block"), END };
static const struct cw_ctl_arg_spec export_add[] = {
	SR("part"), S("name"), B("readonly"), U("resv"), B("ublk"), U("queue_depth"),
	U("max_request"), END
};

/* An export's best-effort QoS: the arguments given replace the ones it
 * has (reserve or limit 0: none); rates in bytes per second, or requests
 * per second with *_iops; clear drops it all. */
static const struct cw_ctl_arg_spec export_qos[] = {
	SR("name"), U("reserve"), B("reserve_iops"), U("weight"), U("limit"), B("limit_iops"),
	B("clear"), B("dry_run"), END
};

static const struct cw_ctl_cmd_spec cmds[CW_CTL_CMD_COUNT] = {
	[CW_CTL_CMD_STATUS] = { "status", CW_CTL_ACCESS_READ, no_args },
	[CW_CTL_CMD_DISK_ADD] = { "disk.add", CW_CTL_ACCESS_CHANGE, disk_add },
	[CW_CTL_CMD_DISK_LIST] = { "disk.list", CW_CTL_ACCESS_READ, no_args },
	[CW_CTL_CMD_DISK_REMOVE] = { "disk.remove", CW_CTL_ACCESS_CHANGE, name_only },
	[CW_CTL_CMD_DISK_SET] = { "disk.set", CW_CTL_ACCESS_CHANGE, disk_set },
	[CW_CTL_CMD_DISK_CALIBRATE] = { "disk.calibrate", CW_CTL_ACCESS_CHANGE, disk_calibrate },
	[CW_CTL_CMD_DISK_EVACUATE] = { "disk.evacuate", CW_CTL_ACCESS_CHANGE, name_only },
	[CW_CTL_CMD_DISK_REPLACE] = { "disk.replace", CW_CTL_ACCESS_CHANGE, disk_replace },
	[CW_CTL_CMD_PART_REBUILD] = { "part.rebuild", CW_CTL_ACCESS_CHANGE, name_only },
	[CW_CTL_CMD_PART_SCRUB] = { "part.scrub", CW_CTL_ACCESS_CHANGE, part_scrub },
	[CW_CTL_CMD_PART_MOVE] = { "part.move", CW_CTL_ACCESS_CHANGE, part_move },
	[CW_CTL_CMD_MOVE_LIST] = { "move.list", CW_CTL_ACCESS_READ, id_opt },
	[CW_CTL_CMD_MOVE_PAUSE] = { "move.pause", CW_CTL_ACCESS_CHANGE, id_only },
	[CW_CTL_CMD_MOVE_RESUME] = { "move.resume", CW_CTL_ACCESS_CHANGE, id_only },
	[CW_CTL_CMD_MOVE_CANCEL] = { "move.cancel", CW_CTL_ACCESS_CHANGE, id_only },
	[CW_CTL_CMD_PART_CREATE] = { "part.create", CW_CTL_ACCESS_CHANGE, part_create },
	[CW_CTL_CMD_PART_LIST] = { "part.list", CW_CTL_ACCESS_READ, no_args },
	[CW_CTL_CMD_PART_SHOW] = { "part.show", CW_CTL_ACCESS_READ, part_show },
	[CW_CTL_CMD_PART_RESIZE] = { "part.resize", CW_CTL_ACCESS_CHANGE, part_resize },
	[CW_CTL_CMD_PART_CACHE] = { "part.cache", CW_CTL_ACCESS_CHANGE, part_cache },
	[CW_CTL_CMD_PART_DELETE] = { "part.delete", CW_CTL_ACCESS_CHANGE, name_force },
	[CW_CTL_CMD_RESV_CREATE] = { "resv.create", CW_CTL_ACCESS_CHANGE, resv_create },
	[CW_CTL_CMD_RESV_LIST] = { "resv.list", CW_CTL_ACCESS_READ, no_args },
	[CW_CTL_CMD_RESV_SHOW] = { "resv.show", CW_CTL_ACCESS_READ, id_only },
	[CW_CTL_CMD_RESV_RELEASE] = { "resv.release", CW_CTL_ACCESS_CHANGE, id_only },
	[CW_CTL_CMD_RESV_CLAIM] = { "resv.claim", CW_CTL_ACCESS_CHANGE, resv_claim },
	[CW_CTL_CMD_EXPORT_LIST] = { "export.list", CW_CTL_ACCESS_READ, no_args },
	[CW_CTL_CMD_EXPORT_ADD] = { "export.add", CW_CTL_ACCESS_CHANGE, export_add },
	[CW_CTL_CMD_EXPORT_REMOVE] = { "export.remove", CW_CTL_ACCESS_CHANGE, name_force },
	[CW_CTL_CMD_STATS] = { "stats", CW_CTL_ACCESS_READ, no_args },
	[CW_CTL_CMD_DISK_PLAN] = { "disk.plan", CW_CTL_ACCESS_READ, name_opt },
	[CW_CTL_CMD_EXPORT_QOS] = { "export.qos", CW_CTL_ACCESS_CHANGE, export_qos },
	[CW_CTL_CMD_DISK_HEADROOM] = { "disk.headroom", CW_CTL_ACCESS_READ, disk_headroom },
};

const struct cw_ctl_cmd_spec *cw_ctl_cmd_spec(enum cw_ctl_cmd cmd)
{
	return (unsigned)cmd < CW_CTL_CMD_COUNT ? &cmds[cmd] : NULL;
}

int cw_ctl_cmd_lookup(const char *name, enum cw_ctl_cmd *ret_cmd)
{
	for (unsigned i = 0; name && i < CW_CTL_CMD_COUNT; i++) {
		if (strcmp(name, cmds[i].name) == 0) {
			*ret_cmd = (enum cw_ctl_cmd)i;
			return 0;
		}
	}
	return -ENOENT;
}

static int fail(struct cw_ctl_fail *f, enum cw_ctl_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(struct cw_ctl_fail *f, enum cw_ctl_code code, const char *fmt, ...)
{
	va_list ap;

	if (f) {
		f->code = code;
		va_start(ap, fmt);
		vsnprintf(f->message, sizeof(f->message), fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* A second member of one name in an object: json-c keeps the last one,
 * and which the sender meant is unknown, so the message is refused.  The
 * scan runs over text json-c has just accepted (valid JSON, depth within
 * CW_CTL_DEPTH_MAX, no NUL), which keeps it short; json-c decodes the
 * names, so "a" and "\u0061" are one name. */
struct dup_scan {
	const char *p, *end;
	json_tokener *tok;
	char name[65];
};

static void dup_ws(struct dup_scan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\r' || *s->p == '\n'))
		s->p++;
}

/* Past the string literal whose opening quote s->p is at. */
/* Skips a string quoted by the quote it starts with (json-c also takes
 * single quotes), never past the end. */
static void dup_string(struct dup_scan *s)
{
	char q = s->p < s->end ? *s->p : '"';

	for (s->p++; s->p < s->end && *s->p != q; s->p++)
		if (*s->p == '\\' && s->p + 1 < s->end)
			s->p++;
	if (s->p < s->end)
		s->p++;
}

static int dup_value(struct dup_scan *s);

static int dup_object(struct dup_scan *s)
{
	json_object *seen = json_object_new_object();
	int r = seen ? 0 : -ENOMEM;

	s->p++;
	dup_ws(s);
	if (s->p < s->end && *s->p == '}') {
		s->p++;
		json_object_put(seen);
		return 0;
	}
	while (r == 0 && s->p < s->end) {
		const char *k;
		json_object *key;

		dup_ws(s);
		k = s->p;
		dup_string(s);
		json_tokener_reset(s->tok);
		key = json_tokener_parse_ex(s->tok, k, (int)(s->p - k));
		if (!key) {
			r = -ENOMEM;
			break;
		}
		if (json_object_object_get_ex(seen, json_object_get_string(key), NULL)) {
			snprintf(s->name, sizeof(s->name), "%s", json_object_get_string(key));
			r = -EEXIST;
		} else if (json_object_object_add(seen, json_object_get_string(key), NULL) < 0) {
			r = -ENOMEM;
		}
		json_object_put(key);
		dup_ws(s);
		if (s->p < s->end)
			s->p++;		/* ':' */
		if (r == 0)
			r = dup_value(s);
		dup_ws(s);
		if (r == 0 && s->p < s->end && *s->p++ == '}')
			break;
	}
	json_object_put(seen);
	return r;
}

static int dup_value(struct dup_scan *s)
{
	int r = 0;

	dup_ws(s);
	if (s->p >= s->end)
		return 0;
	switch (*s->p) {
	case '"':
		dup_string(s);
		return 0;
	case '{':
		return dup_object(s);
	case '[':
		s->p++;
		dup_ws(s);
		if (s->p < s->end && *s->p == ']') {
			s->p++;
			return 0;
		}
		while (r == 0 && s->p < s->end) {
			r = dup_value(s);
			dup_ws(s);
			if (s->p < s->end && *s->p++ == ']')
				break;
		}
		return r;
	default:	/* a number, true, false or null */
		while (s->p < s->end && !strchr(",]} \t\r\n", *s->p))
			s->p++;
		return 0;
	}
}

/* -EEXIST with the name in ret_name when an object of the JSON text
 * buf[0..len) names a member twice. */
static int dup_member(const char *buf, size_t len, char *ret_name, size_t name_len)
{
	struct dup_scan s = { .p = buf, .end = buf + len };
	int r;

	s.tok = json_tokener_new_ex(CW_CTL_DEPTH_MAX);
	if (!s.tok)
		return -ENOMEM;
	r = dup_value(&s);
	json_tokener_free(s.tok);
	snprintf(ret_name, name_len, "%s", s.name);
	return r;
}

/* One JSON value from exactly buf[0..len): no trailing bytes, no NUL. */
static int parse_json(const char *buf, size_t len, json_object **ret, struct cw_ctl_fail *f)
{
	json_tokener *tok;
	json_object *o;
	enum json_tokener_error jerr;
	size_t used;
	char name[65];
	int r;

	if (len >= CW_CTL_LINE_MAX)
		return fail(f, CW_CTL_E_TOO_LARGE, "message longer than %d bytes", CW_CTL_LINE_MAX - 1);
	if (memchr(buf, '\0', len))
		return fail(f, CW_CTL_E_BAD_REQUEST, "NUL byte in the message");
	tok = json_tokener_new_ex(CW_CTL_DEPTH_MAX);
	if (!tok)
		return fail(f, CW_CTL_E_INTERNAL, "out of memory");
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	o = json_tokener_parse_ex(tok, buf, (int)len);
	jerr = json_tokener_get_error(tok);
#if JSON_C_VERSION_NUM >= ((0 << 16) | (15 << 8) | 0)
	used = json_tokener_get_parse_end(tok);
#else
	used = (size_t)tok->char_offset;	/* json-c 0.13 and 0.14 (Debian buster) */
#endif
	json_tokener_free(tok);
	if (jerr == json_tokener_continue) {
		json_object_put(o);
		return fail(f, CW_CTL_E_BAD_REQUEST, "malformed JSON: the message ends too early");
	}
	if (jerr != json_tokener_success || !o) {
		json_object_put(o);
		return fail(f, CW_CTL_E_BAD_REQUEST, "malformed JSON: %s",
			    o || jerr != json_tokener_success ? json_tokener_error_desc(jerr)
							      : "null message");
	}
	/* Whitespace may trail (a \r before the newline); nothing else. */
	for (; used < len; used++) {
		if (!strchr(" \t\r\n", buf[used])) {
			json_object_put(o);
			return fail(f, CW_CTL_E_BAD_REQUEST,
				    "malformed JSON: bytes after the message (one message per line)");
		}
	}
	r = dup_member(buf, len, name, sizeof(name));
	if (r < 0) {
		json_object_put(o);
		if (r == -ENOMEM)
			return fail(f, CW_CTL_E_INTERNAL, "out of memory");
		return fail(f, CW_CTL_E_BAD_REQUEST, "member \"%s\" appears twice in one object: "
			    "give each name once", name);
	}
	*ret = o;
	return 0;
}

/* One line holding a JSON object (what names it: "a request"), its
 * members read into ret by members().  On success *ret_root holds the
 * object, for the caller to drop; a refusal leaves nothing allocated. */
static int parse_line(const char *buf, size_t len, const char *what,
		      int (*members)(json_object *root, void *ret, struct cw_ctl_fail *f), void *ret,
		      json_object **ret_root, struct cw_ctl_fail *f)
{
	json_object *root = NULL;
	int r = parse_json(buf, len, &root, f);

	if (r < 0)
		return r;
	if (!json_object_is_type(root, json_type_object))
		r = fail(f, CW_CTL_E_BAD_REQUEST, "%s is a JSON object", what);
	else
		r = members(root, ret, f);
	if (r < 0)
		json_object_put(root);
	else
		*ret_root = root;
	return r;
}

static const char *type_name(enum cw_ctl_arg_type t)
{
	switch (t) {
	case CW_CTL_ARG_STRING: return "a string";
	case CW_CTL_ARG_UINT: return "an unsigned integer";
	default: return "true or false";
	}
}

static bool arg_valid(enum cw_ctl_arg_type t, json_object *v)
{
	switch (t) {
	case CW_CTL_ARG_STRING: {
		int n = json_object_get_string_len(v);

		return json_object_is_type(v, json_type_string) && n > 0 && n < 4096 &&
		       strlen(json_object_get_string(v)) == (size_t)n;
	}
	case CW_CTL_ARG_UINT:
		/* json-c reads integers beyond int64 as uint64 or saturates:
		 * only values that round-trip through int64 are taken. */
		if (!json_object_is_type(v, json_type_int))
			return false;
		errno = 0;
		return json_object_get_int64(v) >= 0 && json_object_get_int64(v) < INT64_MAX;
	default:
		return json_object_is_type(v, json_type_boolean);
	}
}

static int validate_args(const struct cw_ctl_cmd_spec *spec, json_object *args, struct cw_ctl_fail *f)
{
	const struct cw_ctl_arg_spec *a;

	if (args) {
		json_object_object_foreach(args, key, val) {
			for (a = spec->args; a->name; a++)
				if (strcmp(a->name, key) == 0)
					break;
			if (!a->name)
				return fail(f, CW_CTL_E_BAD_REQUEST, "%s: unknown argument \"%.64s\"",
					    spec->name, key);
			if (!arg_valid(a->type, val))
				return fail(f, CW_CTL_E_BAD_REQUEST, "%s: argument \"%s\" must be %s",
					    spec->name, a->name,
					    a->type == CW_CTL_ARG_STRING
						    ? "a non-empty string (under 4096 bytes)"
						    : type_name(a->type));
		}
	}
	for (a = spec->args; a->name; a++) {
		json_object *v;

		if (a->required && !(args && json_object_object_get_ex(args, a->name, &v)))
			return fail(f, CW_CTL_E_BAD_REQUEST, "%s: missing argument \"%s\" (%s)",
				    spec->name, a->name, type_name(a->type));
	}
	return 0;
}

/* The members of a request object; cmd and args are set once all is well. */
static int request_members(json_object *root, void *ret_request, struct cw_ctl_fail *f)
{
	struct cw_ctl_request *ret = ret_request;
	json_object *cmd, *args = NULL;
	enum cw_ctl_cmd c;
	int r;

	json_object_object_foreach(root, key, val) {
		(void)val;
		if (strcmp(key, "cmd") != 0 && strcmp(key, "args") != 0)
			return fail(f, CW_CTL_E_BAD_REQUEST,
				    "unknown member \"%.64s\" (a request has \"cmd\" and \"args\")", key);
	}
	if (!json_object_object_get_ex(root, "cmd", &cmd) ||
	    !json_object_is_type(cmd, json_type_string))
		return fail(f, CW_CTL_E_BAD_REQUEST, "\"cmd\" must be a string");
	if (cw_ctl_cmd_lookup(json_object_get_string(cmd), &c) < 0)
		return fail(f, CW_CTL_E_UNKNOWN_COMMAND, "unknown command \"%.64s\"",
			    json_object_get_string(cmd));
	if (json_object_object_get_ex(root, "args", &args) &&
	    !json_object_is_type(args, json_type_object))
		return fail(f, CW_CTL_E_BAD_REQUEST, "\"args\" must be an object");
	r = validate_args(&cmds[c], args, f);
	if (r < 0)
		return r;
	ret->cmd = c;
	ret->args = args;
	return 0;
}

int cw_ctl_request_parse(const char *buf, size_t len, struct cw_ctl_request *ret,
		      struct cw_ctl_fail *ret_fail)
{
	memset(ret, 0, sizeof(*ret));
	return parse_line(buf, len, "a request", request_members, ret, &ret->root, ret_fail);
}

void cw_ctl_request_done(struct cw_ctl_request *req)
{
	if (!req)
		return;
	json_object_put(req->root);
	req->root = req->args = NULL;
}

static json_object *arg(const struct cw_ctl_request *req, const char *name)
{
	json_object *v;

	return req->args && json_object_object_get_ex(req->args, name, &v) ? v : NULL;
}

const char *cw_ctl_arg_str(const struct cw_ctl_request *req, const char *name)
{
	json_object *v = arg(req, name);

	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

bool cw_ctl_arg_uint(const struct cw_ctl_request *req, const char *name, uint64_t *ret)
{
	json_object *v = arg(req, name);

	if (!v || !json_object_is_type(v, json_type_int))
		return false;
	*ret = (uint64_t)json_object_get_int64(v);
	return true;
}

bool cw_ctl_arg_bool(const struct cw_ctl_request *req, const char *name, bool *ret)
{
	json_object *v = arg(req, name);

	if (!v || !json_object_is_type(v, json_type_boolean))
		return false;
	*ret = json_object_get_boolean(v);
	return true;
}

json_object *cw_ctl_json_u64(uint64_t v)
{
	return json_object_new_int64(v > INT64_MAX ? INT64_MAX : (int64_t)v);
}

/* ---- best effort per export ---- */

void cw_ctl_share_in_add(json_object *o, const struct cw_sched_share_in *in)
{
	json_object_object_add(o, "disk_id", json_object_new_int64(in->disk));
	json_object_object_add(o, "served_ns", json_object_new_int64(in->served_ns));
	json_object_object_add(o, "resv_ns", json_object_new_int64(in->resv_ns));
	json_object_object_add(o, "busy_ns", json_object_new_int64(in->busy_ns));
	json_object_object_add(o, "throttled_ns", json_object_new_int64(in->throttled_ns));
	json_object_object_add(o, "reserve_ppm", json_object_new_int64(in->qos.resv_ppm));
	json_object_object_add(o, "weight", json_object_new_int64(in->qos.weight));
	json_object_object_add(o, "limit_ppm", json_object_new_int64(in->qos.limit_ppm));
	json_object_object_add(o, "requests", cw_ctl_json_u64(in->requests));
}

static bool get_i64(json_object *o, const char *k, int64_t lo, int64_t hi, int64_t *ret)
{
	json_object *v;

	if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_int))
		return false;
	*ret = json_object_get_int64(v);
	return *ret >= lo && *ret <= hi;
}

int cw_ctl_share_in_parse(json_object *o, struct cw_sched_share_in *ret)
{
	int64_t disk, resv, weight, limit, req;

	if (!o || !ret || !get_i64(o, "disk_id", 0, UINT32_MAX, &disk) ||
	    !get_i64(o, "served_ns", 0, INT64_MAX, &ret->served_ns) ||
	    !get_i64(o, "resv_ns", 0, INT64_MAX, &ret->resv_ns) ||
	    !get_i64(o, "busy_ns", 0, INT64_MAX, &ret->busy_ns) ||
	    !get_i64(o, "throttled_ns", 0, INT64_MAX, &ret->throttled_ns) ||
	    !get_i64(o, "reserve_ppm", 0, UINT32_MAX, &resv) ||
	    !get_i64(o, "weight", 1, UINT32_MAX, &weight) ||
	    !get_i64(o, "limit_ppm", 0, UINT32_MAX, &limit) ||
	    !get_i64(o, "requests", 0, INT64_MAX, &req))
		return -EINVAL;
	ret->requests = (uint64_t)req;
	ret->disk = (uint32_t)disk;
	ret->qos = (struct cw_sched_client){ .resv_ppm = (uint32_t)resv, .weight = (uint32_t)weight,
					     .limit_ppm = (uint32_t)limit };
	return 0;
}

void cw_ctl_share_out_add(json_object *o, const struct cw_sched_share_out *r)
{
	json_object_object_add(o, "received", json_object_new_double(r->received));
	json_object_object_add(o, "due", json_object_new_double(r->due));
	json_object_object_add(o, "reserved", json_object_new_double(r->reserved));
	json_object_object_add(o, "limit", r->limit ? json_object_new_double(r->limit) : NULL);
	json_object_object_add(o, "throttled", json_object_new_double(r->throttled));
	json_object_object_add(o, "backlogged", json_object_new_boolean(r->backlogged));
	json_object_object_add(o, "reservation_met", json_object_new_boolean(r->resv_met));
	json_object_object_add(o, "limit_held", json_object_new_boolean(r->limit_held));
}

/* root as one line plus '\n'; drops the caller's reference to root. */
static char *line_of(json_object *root)
{
	const char *s;
	char *line = NULL;

	if (!root)
		return NULL;
	s = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN |
					   JSON_C_TO_STRING_NOSLASHESCAPE);
	if (s && asprintf(&line, "%s\n", s) < 0)
		line = NULL;
	json_object_put(root);
	return line;
}

/* json_object_get() that tolerates NULL (json null). */
static json_object *ref(json_object *o)
{
	return o ? json_object_get(o) : NULL;
}

char *cw_ctl_format_request(enum cw_ctl_cmd cmd, json_object *args)
{
	json_object *root;

	if ((unsigned)cmd >= CW_CTL_CMD_COUNT || !(root = json_object_new_object()))
		return NULL;
	json_object_object_add(root, "cmd", json_object_new_string(cmds[cmd].name));
	if (args)
		json_object_object_add(root, "args", ref(args));
	return line_of(root);
}

char *cw_ctl_format_ok(json_object *result)
{
	json_object *root = json_object_new_object();

	if (!root)
		return NULL;
	json_object_object_add(root, "ok", json_object_new_boolean(1));
	json_object_object_add(root, "result", ref(result));
	return line_of(root);
}

char *cw_ctl_format_error(enum cw_ctl_code code, const char *message, json_object *details)
{
	json_object *root = json_object_new_object(), *err = json_object_new_object();

	if (!root || !err) {
		json_object_put(root);
		json_object_put(err);
		return NULL;
	}
	json_object_object_add(err, "code", json_object_new_string(cw_ctl_code_name(code)));
	json_object_object_add(err, "message", json_object_new_string(message ? message : ""));
	if (details)
		json_object_object_add(err, "details", ref(details));
	json_object_object_add(root, "ok", json_object_new_boolean(0));
	json_object_object_add(root, "error", err);
	return line_of(root);
}

char *cw_ctl_format_progress(const char *phase, unsigned done, unsigned total)
{
	json_object *root = json_object_new_object(), *p = json_object_new_object();

	if (!root || !p) {
		json_object_put(root);
		json_object_put(p);
		return NULL;
	}
	json_object_object_add(p, "phase", json_object_new_string(phase ? phase : ""));
	json_object_object_add(p, "done", json_object_new_int64(done));
	json_object_object_add(p, "total", json_object_new_int64(total));
	json_object_object_add(root, "progress", p);
	return line_of(root);
}

static const char *member_str(json_object *o, const char *name)
{
	json_object *v;

	return json_object_object_get_ex(o, name, &v) && json_object_is_type(v, json_type_string)
		       ? json_object_get_string(v)
		       : NULL;
}

static bool member_u64(json_object *o, const char *name, uint64_t *ret)
{
	json_object *v;

	if (!json_object_object_get_ex(o, name, &v) || !json_object_is_type(v, json_type_int) ||
	    json_object_get_int64(v) < 0)
		return false;
	*ret = (uint64_t)json_object_get_int64(v);
	return true;
}

/* The members of a reply object: a progress line, a result or an error. */
static int reply_members(json_object *root, void *ret_reply, struct cw_ctl_fail *f)
{
	struct cw_ctl_reply *ret = ret_reply;
	json_object *v, *err;

	if (json_object_object_get_ex(root, "progress", &v)) {
		if (!json_object_is_type(v, json_type_object) || !member_str(v, "phase") ||
		    !member_u64(v, "done", &ret->done) || !member_u64(v, "total", &ret->total))
			return fail(f, CW_CTL_E_BAD_REQUEST, "malformed progress line");
		ret->kind = CW_CTL_REPLY_PROGRESS;
		ret->phase = member_str(v, "phase");
	} else if (!json_object_object_get_ex(root, "ok", &v) ||
		   !json_object_is_type(v, json_type_boolean)) {
		return fail(f, CW_CTL_E_BAD_REQUEST, "a reply has a boolean \"ok\"");
	} else if (json_object_get_boolean(v)) {
		ret->kind = CW_CTL_REPLY_OK;
		json_object_object_get_ex(root, "result", &ret->result);
	} else {
		if (!json_object_object_get_ex(root, "error", &err) ||
		    !json_object_is_type(err, json_type_object) || !member_str(err, "code") ||
		    !member_str(err, "message"))
			return fail(f, CW_CTL_E_BAD_REQUEST,
				    "an error reply has \"error\": {\"code\", \"message\"}");
		ret->kind = CW_CTL_REPLY_ERROR;
		ret->code_name = member_str(err, "code");
		ret->message = member_str(err, "message");
		if (cw_ctl_code_parse(ret->code_name, &ret->code) < 0 || ret->code == CW_CTL_OK)
			ret->code = CW_CTL_E_INTERNAL;
		if (json_object_object_get_ex(err, "details", &v) &&
		    json_object_is_type(v, json_type_object))
			ret->details = v;
	}
	return 0;
}

int cw_ctl_reply_parse(const char *buf, size_t len, struct cw_ctl_reply *ret, struct cw_ctl_fail *ret_fail)
{
	memset(ret, 0, sizeof(*ret));
	return parse_line(buf, len, "a reply", reply_members, ret, &ret->root, ret_fail);
}

void cw_ctl_reply_done(struct cw_ctl_reply *reply)
{
	if (!reply)
		return;
	json_object_put(reply->root);
	memset(reply, 0, sizeof(*reply));
}
