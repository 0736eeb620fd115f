/*
 * Description: feeds arbitrary bytes to the control protocol codec as a
 * request line and as a reply line, and checks its promises: a refusal
 * carries a known code and a message and leaves nothing allocated; an
 * accepted request names a known command, its arguments read back with
 * their declared types, and it formats to a line that parses to the same.
 *
 * With clang -fsanitize=fuzzer,address -DCW_LIBFUZZER it is a libFuzzer
 * target:
 *   clang -g -O1 -fsanitize=fuzzer,address -DCW_LIBFUZZER -I build \
 *     -I libclockwise/include -I libclockwise \
 *     tests/fuzz/fuzz-control.c libclockwise/proto/ctl.c -ljson-c -o fuzz-control
 *   ./fuzz-control tests/fuzz/corpus/control
 * Otherwise main() replays every file of the corpus directories given
 * (default: $top_srcdir/tests/fuzz/corpus/control, as make check runs it;
 * see replay.h).
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/ctl-proto.h>
#include "replay.h"

#define PROMISE(x) do { if (!(x)) { fprintf(stderr, "broken: %s\n", #x); abort(); } } while (0)

static void check_request(const char *d, size_t n)
{
	struct cw_ctl_request req, again;
	struct cw_ctl_fail f = { .code = CW_CTL_OK };
	const struct cw_ctl_arg_spec *a;
	char *line;

	if (cw_ctl_request_parse(d, n, &req, &f) < 0) {
		PROMISE(f.code > CW_CTL_OK && f.code < CW_CTL_CODE_COUNT);
		PROMISE(f.message[0] != '\0');
		PROMISE(req.root == NULL);
		return;
	}
	PROMISE(cw_ctl_cmd_spec(req.cmd) != NULL);
	for (a = cw_ctl_cmd_spec(req.cmd)->args; a->name; a++) {
		uint64_t u;
		bool b;
		const char *s = cw_ctl_arg_str(&req, a->name);
		bool has_u = cw_ctl_arg_uint(&req, a->name, &u), has_b = cw_ctl_arg_bool(&req, a->name, &b);

		if (a->type == CW_CTL_ARG_STRING)
			PROMISE(!has_u && !has_b && (!s || (*s && strlen(s) < 4096)));
		else if (a->type == CW_CTL_ARG_UINT)
			PROMISE(!s && !has_b && (!has_u || u < INT64_MAX));
		else
			PROMISE(!s && !has_u);
		if (a->required)
			PROMISE(s || has_u || has_b);
	}
	line = cw_ctl_format_request(req.cmd, req.args);
	PROMISE(line != NULL);
	PROMISE(cw_ctl_request_parse(line, strlen(line), &again, &f) == 0);
	PROMISE(again.cmd == req.cmd);
	PROMISE(json_object_equal(again.args, req.args));
	cw_ctl_request_done(&again);
	free(line);
	cw_ctl_request_done(&req);
}

static void check_reply(const char *d, size_t n)
{
	struct cw_ctl_reply rep;
	struct cw_ctl_fail f = { .code = CW_CTL_OK };

	if (cw_ctl_reply_parse(d, n, &rep, &f) < 0) {
		PROMISE(f.code > CW_CTL_OK && f.code < CW_CTL_CODE_COUNT);
		PROMISE(rep.root == NULL);
		return;
	}
	if (rep.kind == CW_CTL_REPLY_ERROR)
		PROMISE(rep.message && rep.code_name && rep.code != CW_CTL_OK);
	if (rep.kind == CW_CTL_REPLY_PROGRESS)
		PROMISE(rep.phase != NULL);
	cw_ctl_reply_done(&rep);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_request((const char *)data, size);
	check_reply((const char *)data, size);
	return 0;
}

#ifndef CW_LIBFUZZER
int main(int argc, char **argv)
{
	return cw_fuzz_replay(argc, argv, "control", CW_CTL_LINE_MAX * 2);
}
#endif
