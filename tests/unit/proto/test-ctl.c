/*
 * Description: the control protocol codec: valid requests parse to typed
 * arguments; every kind of bad line (malformed JSON, trailing bytes, NUL,
 * too long, too deep, wrong types, unknown commands and arguments,
 * missing arguments) is refused with its stable code; replies and
 * progress lines round-trip through format and parse.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/ctl-proto.h>
#include "cwtest.h"

static int parse(const char *s, struct cw_ctl_request *req, struct cw_ctl_fail *f)
{
	return cw_ctl_request_parse(s, strlen(s), req, f);
}

static void expect_refused(const char *line, enum cw_ctl_code code)
{
	struct cw_ctl_request req;
	struct cw_ctl_fail f = { 0 };

	if (parse(line, &req, &f) != -EINVAL || f.code != code) {
		fprintf(stderr, "line %s: code %s, wanted %s\n", line, cw_ctl_code_name(f.code),
			cw_ctl_code_name(code));
		CU_FAIL("wrong verdict");
	}
	CU_ASSERT_PTR_NULL(req.root);
	CU_ASSERT(f.message[0] != '\0');
}

static void test_valid(void)
{
	struct cw_ctl_request req;
	struct cw_ctl_fail f;
	uint64_t v;
	bool b;

	CU_ASSERT_EQUAL_FATAL(parse("{\"cmd\":\"status\"}", &req, &f), 0);
	CU_ASSERT_EQUAL(req.cmd, CW_CTL_CMD_STATUS);
	CU_ASSERT_PTR_NULL(req.args);
	cw_ctl_request_done(&req);
	cw_ctl_request_done(&req);	/* idempotent */

	CU_ASSERT_EQUAL_FATAL(parse(" {\"args\": {\"name\": \"media\", \"size\": 1073741824,"
				    " \"policy\": \"single\"}, \"cmd\": \"part.create\"}\r\n",
				    &req, &f), 0);
	CU_ASSERT_EQUAL(req.cmd, CW_CTL_CMD_PART_CREATE);
	CU_ASSERT_STRING_EQUAL(cw_ctl_arg_str(&req, "name"), "media");
	CU_ASSERT(cw_ctl_arg_uint(&req, "size", &v));
	CU_ASSERT_EQUAL(v, UINT64_C(1) << 30);
	CU_ASSERT_PTR_NULL(cw_ctl_arg_str(&req, "tier"));
	CU_ASSERT_FALSE(cw_ctl_arg_uint(&req, "name", &v));	/* a string, not a number */
	cw_ctl_request_done(&req);

	CU_ASSERT_EQUAL_FATAL(parse("{\"cmd\":\"export.add\",\"args\":{\"part\":\"p\","
				    "\"readonly\":true,\"resv\":3}}", &req, &f), 0);
	CU_ASSERT(cw_ctl_arg_bool(&req, "readonly", &b) && b);
	CU_ASSERT(cw_ctl_arg_uint(&req, "resv", &v) && v == 3);
	cw_ctl_request_done(&req);

	/* Every command in the table can be named. */
	for (unsigned i = 0; i < CW_CTL_CMD_COUNT; i++) {
		enum cw_ctl_cmd c;

		CU_ASSERT_EQUAL(cw_ctl_cmd_lookup(cw_ctl_cmd_spec((enum cw_ctl_cmd)i)->name, &c), 0);
		CU_ASSERT_EQUAL(c, (enum cw_ctl_cmd)i);
	}
	CU_ASSERT_PTR_NULL(cw_ctl_cmd_spec(CW_CTL_CMD_COUNT));
}

static void test_malformed(void)
{
	static const char nul[] = "{\"cmd\":\"status\"}\0x";
	struct cw_ctl_request req;
	struct cw_ctl_fail f;

	expect_refused("", CW_CTL_E_BAD_REQUEST);
	expect_refused("{", CW_CTL_E_BAD_REQUEST);
	expect_refused("{\"cmd\":\"status\"", CW_CTL_E_BAD_REQUEST);
	expect_refused("{\"cmd\":\"status\"}}", CW_CTL_E_BAD_REQUEST);
	expect_refused("{\"cmd\":\"status\"} {\"cmd\":\"status\"}", CW_CTL_E_BAD_REQUEST);
	expect_refused("{'cmd':'status'}", CW_CTL_E_BAD_REQUEST);
	expect_refused("{\"cmd\":\"status\",}", CW_CTL_E_BAD_REQUEST);
	expect_refused("null", CW_CTL_E_BAD_REQUEST);
	expect_refused("[\"status\"]", CW_CTL_E_BAD_REQUEST);
	expect_refused("\"status\"", CW_CTL_E_BAD_REQUEST);
	expect_refused("42", CW_CTL_E_BAD_REQUEST);
	expect_refused("\xff\xfe", CW_CTL_E_BAD_REQUEST);
	CU_ASSERT_EQUAL(cw_ctl_request_parse(nul, sizeof(nul) - 1, &req, &f), -EINVAL);
	CU_ASSERT_EQUAL(f.code, CW_CTL_E_BAD_REQUEST);
}

static void test_limits(void)
{
	struct cw_ctl_request req;
	struct cw_ctl_fail f;
	char *big = malloc(CW_CTL_LINE_MAX + 16), deep[200];
	size_t n;

	CU_ASSERT_PTR_NOT_NULL_FATAL(big);
	n = (size_t)snprintf(big, CW_CTL_LINE_MAX + 16, "{\"cmd\":\"disk.add\",\"args\":{\"path\":\"/");
	memset(big + n, 'a', CW_CTL_LINE_MAX + 16 - n);
	CU_ASSERT_EQUAL(cw_ctl_request_parse(big, CW_CTL_LINE_MAX, &req, &f), -EINVAL);
	CU_ASSERT_EQUAL(f.code, CW_CTL_E_TOO_LARGE);
	free(big);

	/* Nested deeper than CW_CTL_DEPTH_MAX: refused, not recursed into. */
	n = 0;
	n += (size_t)snprintf(deep + n, sizeof(deep) - n, "{\"cmd\":\"status\",\"args\":");
	for (int i = 0; i < 40; i++)
		deep[n++] = '[';
	for (int i = 0; i < 40; i++)
		deep[n++] = ']';
	deep[n++] = '}';
	deep[n] = '\0';
	expect_refused(deep, CW_CTL_E_BAD_REQUEST);
}

static void test_types(void)
{
	expect_refused("{\"cmd\":\"nope\"}", CW_CTL_E_UNKNOWN_COMMAND);
	expect_refused("{\"cmd\":\"STATUS\"}", CW_CTL_E_UNKNOWN_COMMAND);
	expect_refused("{\"cmd\":7}", CW_CTL_E_BAD_REQUEST);
	expect_refused("{\"args\":{}}", CW_CTL_E_BAD_REQUEST);
	expect_refused("{\"cmd\":\"status\",\"extra\":1}", CW_CTL_E_BAD_REQUEST);
	expect_refused("{\"cmd\":\"status\",\"args\":[]}", CW_CTL_E_BAD_REQUEST);
	expect_refused("{\"cmd\":\"status\",\"args\":{\"x\":1}}", CW_CTL_E_BAD_REQUEST);
	expect_refused("{\"cmd\":\"part.create\",\"args\":{\"name\":\"a\"}}", CW_CTL_E_BAD_REQUEST);
	expect_refused("{\"cmd\":\"part.create\",\"args\":{\"name\":\"a\",\"size\":\"1G\"}}",
		       CW_CTL_E_BAD_REQUEST);
	expect_refused("{\"cmd\":\"part.create\",\"args\":{\"name\":\"a\",\"size\":-1}}",
		       CW_CTL_E_BAD_REQUEST);
	expect_refused("{\"cmd\":\"part.create\",\"args\":{\"name\":\"a\",\"size\":1.5}}",
		       CW_CTL_E_BAD_REQUEST);
	expect_refused("{\"cmd\":\"part.create\",\"args\":{\"name\":\"a\","
		       "\"size\":18446744073709551615}}", CW_CTL_E_BAD_REQUEST);
	expect_refused("{\"cmd\":\"part.create\",\"args\":{\"name\":\"a\","
		       "\"size\":99999999999999999999999}}", CW_CTL_E_BAD_REQUEST);
	expect_refused("{\"cmd\":\"part.create\",\"args\":{\"name\":\"\",\"size\":1}}",
		       CW_CTL_E_BAD_REQUEST);
	expect_refused("{\"cmd\":\"part.show\",\"args\":{\"name\":null}}", CW_CTL_E_BAD_REQUEST);
	expect_refused("{\"cmd\":\"part.show\",\"args\":{\"name\":\"a\\u0000b\"}}",
		       CW_CTL_E_BAD_REQUEST);
	expect_refused("{\"cmd\":\"export.add\",\"args\":{\"part\":\"a\",\"readonly\":1}}",
		       CW_CTL_E_BAD_REQUEST);
	expect_refused("{\"cmd\":\"resv.show\",\"args\":{\"id\":true}}", CW_CTL_E_BAD_REQUEST);
}

static void test_replies(void)
{
	json_object *res = json_object_new_object(), *det = json_object_new_object();
	struct cw_ctl_reply rep;
	struct cw_ctl_fail f;
	char *line;

	json_object_object_add(res, "n", json_object_new_int(5));
	line = cw_ctl_format_ok(res);
	CU_ASSERT_PTR_NOT_NULL_FATAL(line);
	CU_ASSERT_EQUAL(line[strlen(line) - 1], '\n');
	CU_ASSERT_PTR_NULL(memchr(line, '\n', strlen(line) - 1));	/* one line */
	CU_ASSERT_EQUAL_FATAL(cw_ctl_reply_parse(line, strlen(line) - 1, &rep, &f), 0);
	CU_ASSERT_EQUAL(rep.kind, CW_CTL_REPLY_OK);
	CU_ASSERT_EQUAL(json_object_get_int(json_object_object_get(rep.result, "n")), 5);
	cw_ctl_reply_done(&rep);
	free(line);
	json_object_put(res);

	json_object_object_add(det, "disk", json_object_new_string("hdd1"));
	line = cw_ctl_format_error(CW_CTL_E_REFUSED, "refused on disk hdd1\nsecond line", det);
	CU_ASSERT_PTR_NULL(memchr(line, '\n', strlen(line) - 1));	/* escaped */
	CU_ASSERT_EQUAL_FATAL(cw_ctl_reply_parse(line, strlen(line), &rep, &f), 0);
	CU_ASSERT_EQUAL(rep.kind, CW_CTL_REPLY_ERROR);
	CU_ASSERT_EQUAL(rep.code, CW_CTL_E_REFUSED);
	CU_ASSERT_STRING_EQUAL(rep.code_name, "refused");
	CU_ASSERT_STRING_EQUAL(rep.message, "refused on disk hdd1\nsecond line");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(rep.details, "disk")),
			       "hdd1");
	cw_ctl_reply_done(&rep);
	free(line);
	json_object_put(det);

	line = cw_ctl_format_progress("seek", 3, 16);
	CU_ASSERT_EQUAL_FATAL(cw_ctl_reply_parse(line, strlen(line), &rep, &f), 0);
	CU_ASSERT_EQUAL(rep.kind, CW_CTL_REPLY_PROGRESS);
	CU_ASSERT_STRING_EQUAL(rep.phase, "seek");
	CU_ASSERT(rep.done == 3 && rep.total == 16);
	cw_ctl_reply_done(&rep);
	free(line);

	/* A request formats to a line the server parses back. */
	res = json_object_new_object();
	json_object_object_add(res, "id", json_object_new_int(9));
	line = cw_ctl_format_request(CW_CTL_CMD_RESV_SHOW, res);
	{
		struct cw_ctl_request req;
		uint64_t id = 0;

		CU_ASSERT_EQUAL_FATAL(cw_ctl_request_parse(line, strlen(line), &req, &f), 0);
		CU_ASSERT(req.cmd == CW_CTL_CMD_RESV_SHOW && cw_ctl_arg_uint(&req, "id", &id) && id == 9);
		cw_ctl_request_done(&req);
	}
	free(line);
	json_object_put(res);

	/* Unknown error codes from a newer server read as internal. */
	line = "{\"ok\":false,\"error\":{\"code\":\"future\",\"message\":\"m\"}}";
	CU_ASSERT_EQUAL_FATAL(cw_ctl_reply_parse(line, strlen(line), &rep, &f), 0);
	CU_ASSERT_EQUAL(rep.code, CW_CTL_E_INTERNAL);
	cw_ctl_reply_done(&rep);
	CU_ASSERT_EQUAL(cw_ctl_reply_parse("{\"ok\":false}", 12, &rep, &f), -EINVAL);
	CU_ASSERT_EQUAL(cw_ctl_reply_parse("{\"ok\":1}", 8, &rep, &f), -EINVAL);
	CU_ASSERT_EQUAL(cw_ctl_reply_parse("{\"progress\":{\"phase\":\"x\"}}", 26, &rep, &f), -EINVAL);
}

/* json-c keeps the last of two members of one name; the codec refuses
 * the message and names the member, at any depth and however the name
 * is spelled. */
static void test_duplicates(void)
{
	struct cw_ctl_request req;
	struct cw_ctl_fail f;

	expect_refused("{\"cmd\":\"status\",\"args\":{},\"cmd\":\"stats\"}", CW_CTL_E_BAD_REQUEST);
	CU_ASSERT_EQUAL(parse("{\"cmd\":\"part.delete\",\"args\":{\"name\":\"a\",\"\\u006eame\":\"b\"}}",
			      &req, &f), -EINVAL);
	CU_ASSERT_STRING_EQUAL(f.message, "member \"name\" appears twice in one object: give each "
			       "name once");
	expect_refused("{\"cmd\":\"status\",\"args\":{\"x\":[1,{\"a\":\"}\\\"\",\"a\":null}]}}",
		       CW_CTL_E_BAD_REQUEST);
	/* The same name in two objects, or as a value, is fine. */
	CU_ASSERT_EQUAL_FATAL(parse("{\"cmd\":\"part.create\",\"args\":{\"name\":\"cmd\","
				    "\"size\":1, \"policy\" : \"single\" }}", &req, &f), 0);
	CU_ASSERT_STRING_EQUAL(cw_ctl_arg_str(&req, "name"), "cmd");
	cw_ctl_request_done(&req);
}

static void test_codes(void)
{
	for (unsigned i = 0; i < CW_CTL_CODE_COUNT; i++) {
		enum cw_ctl_code c;

		CU_ASSERT_EQUAL(cw_ctl_code_parse(cw_ctl_code_name((enum cw_ctl_code)i), &c), 0);
		CU_ASSERT_EQUAL(c, (enum cw_ctl_code)i);
	}
	CU_ASSERT_EQUAL(cw_ctl_code_from_errno(-ENOENT), CW_CTL_E_NOT_FOUND);
	CU_ASSERT_EQUAL(cw_ctl_code_from_errno(-EEXIST), CW_CTL_E_EXISTS);
	CU_ASSERT_EQUAL(cw_ctl_code_from_errno(-ENOSPC), CW_CTL_E_NO_SPACE);
	CU_ASSERT_EQUAL(cw_ctl_code_from_errno(-EBUSY), CW_CTL_E_BUSY);
	CU_ASSERT_EQUAL(cw_ctl_code_from_errno(-EINVAL), CW_CTL_E_BAD_REQUEST);
	CU_ASSERT_EQUAL(cw_ctl_code_from_errno(-ENODEV), CW_CTL_E_UNAVAILABLE);
	CU_ASSERT_EQUAL(cw_ctl_code_from_errno(-ENOMEM), CW_CTL_E_INTERNAL);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("ctl-proto", NULL, NULL);

	cwtest_add(s, "valid requests", test_valid);
	cwtest_add(s, "malformed JSON", test_malformed);
	cwtest_add(s, "size and depth limits", test_limits);
	cwtest_add(s, "commands, arguments, types", test_types);
	cwtest_add(s, "replies and progress", test_replies);
	cwtest_add(s, "duplicate members", test_duplicates);
	cwtest_add(s, "error codes", test_codes);
	return cwtest_run();
}
