/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cwsim — the Clockwise simulator's command line.  Each subcommand is one
 * entry of the table below; `cwsim admit` runs the admission test on a
 * task set, `cwsim run` and `cwsim sweep` the trace-driven simulator,
 * `cwsim plan` prints each disk's plan (tools/sim/, see cwsim(1)).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/admit.h>
#include "common/cleanup.h"
#include "common/util.h"
#include "sim/sim.h"

#define EXIT_USAGE 2

static void cw_fclosep(FILE **f)
{
	if (*f && *f != stdin)
		fclose(*f);
}

/* A decimal integer > 0 that fits int64_t; advances *s past it. */
static int parse_pos(const char **s, int64_t *ret)
{
	const char *p = *s;
	int64_t v = 0;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (INT64_MAX - (*p - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (*p - '0');
	}
	if (v == 0)
		return -EINVAL;
	*s = p;
	*ret = v;
	return 0;
}

/* Reads "T C" lines ('#' starts a comment, blank lines allowed).  On a bad
 * line prints which and why, and returns -EINVAL. */
static int read_tasks(FILE *f, const char *name, struct cw_task **ret_tasks, size_t *ret_n)
{
	_cleanup_free_ char *line = NULL;
	_cleanup_free_ struct cw_task *tasks = NULL;
	size_t cap = 0, n = 0, len = 0;
	unsigned long lineno = 0;

	for (;;) {
		ssize_t k = getline(&line, &len, f);
		const char *s;
		int64_t t, c;
		char *hash;

		if (k < 0)
			break;
		lineno++;
		hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		s = line + strspn(line, " \t\r\n");
		if (!*s)
			continue;
		if (parse_pos(&s, &t) < 0 || !strchr(" \t", *s) ||
		    (s += strspn(s, " \t"), parse_pos(&s, &c) < 0) ||
		    s[strspn(s, " \t\r\n")] != '\0') {
			fprintf(stderr, "cwsim admit: %s:%lu: expected \"T C\", two positive integers"
				" (nanoseconds)\n", name, lineno);
			return -EINVAL;
		}
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct cw_task *v = realloc(tasks, nc * sizeof(*v));

			if (!v) {
				fprintf(stderr, "cwsim admit: out of memory\n");
				return -ENOMEM;
			}
			tasks = v;
			cap = nc;
		}
		tasks[n++] = (struct cw_task){ .period_ns = t, .service_ns = c };
	}
	if (ferror(f)) {
		fprintf(stderr, "cwsim admit: %s: read error\n", name);
		return -EIO;
	}
	*ret_tasks = CW_TAKE_PTR(tasks);
	*ret_n = n;
	return 0;
}

static void json_ns(const char *key, bool ok, int64_t v)
{
	if (!ok || v == CW_ADMIT_NO_LIMIT)
		printf(", \"%s\": null", key);
	else
		printf(", \"%s\": %" PRId64, key, v);
}

static int cmd_admit(int argc, char **argv)
{
	_cleanup_(cw_fclosep) FILE *f = stdin;
	_cleanup_free_ struct cw_task *tasks = NULL;
	const char *name = "<stdin>";
	struct cw_admit_result r;
	size_t n = 0;
	int e;

	for (int i = 1; i < argc; i++)	/* a stream over a pool's partition */
		if (!strncmp(argv[i], "--pool", 6))
			return sim_cmd_admit_pool(argc, argv);
	if (argc > 2 || (argc == 2 && argv[1][0] == '-' && argv[1][1])) {
		fprintf(stderr, "usage: cwsim admit [FILE]\n"
			"       cwsim admit --pool FILE PART --block SIZE [--rate RATE] "
			"[--range START:END] [--survive 0|1]\n");
		return EXIT_USAGE;
	}
	if (argc == 2 && strcmp(argv[1], "-") != 0) {
		name = argv[1];
		f = fopen(name, "re");
		if (!f) {
			fprintf(stderr, "cwsim admit: %s: %m\n", name);
			return EXIT_USAGE;
		}
	}
	if (read_tasks(f, name, &tasks, &n) < 0)
		return EXIT_USAGE;
	e = cw_admit_test(tasks, n, &r);
	if (e == -E2BIG || e == -ERANGE) {
		fprintf(stderr, "cwsim admit: %s: the periods are too far apart to check "
			"(too many points below the longest period)\n", name);
		return EXIT_FAILURE;
	}
	if (e < 0) {
		fprintf(stderr, "cwsim admit: %s\n", strerror(-e));
		return EXIT_FAILURE;
	}
	printf("{\"schedulable\": %s, \"utilization\": %.9g", r.schedulable ? "true" : "false",
	       r.utilization);
	json_ns("delta_l_ns", r.schedulable, r.delta_l_ns);
	json_ns("delta_l_m_ns", r.schedulable, r.delta_l_m_ns);
	json_ns("delta_l_q_ns", r.schedulable, r.delta_l_q_ns);
	printf(", \"reason\": ");
	sim_json_string(stdout, r.reason);
	printf("}\n");
	return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

static int cmd_help(int argc, char **argv);

static const struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *help;
} commands[] = {
	{ "admit", cmd_admit, "admit [FILE]   Jeffay's test and the slack ΔL of a task set;\n"
	  "  admit --pool DB PART --block SIZE [--rate R] [--survive 0|1]: a stream tested as cwctl would" },
	{ "run", sim_cmd_run, "run SCENARIO   simulate one load per placement and policy" },
	{ "sweep", sim_cmd_sweep, "sweep SCENARIO the paper's Figures 2 and 3: CSV and plots" },
	{ "model", sim_cmd_model, "model PRESET   a disk model preset as a cwmodel1 line" },
	{ "setup", sim_cmd_setup, "setup SCENARIO the streams admitted and the BE trace, for a live run" },
	{ "irregularity", sim_cmd_irregularity,
	  "irregularity   the SFC paper's Figure 8: irregularity against the window" },
	{ "plan", sim_cmd_plan, "plan SOURCE    each disk's plan (--pool DB or a scenario) as clockwised runs it" },
	{ "help", cmd_help, "help           this list" },
};

static int cmd_help(int argc, char **argv)
{
	printf("usage: cwsim COMMAND [ARGS]\n       cwsim --help | --version\n\ncommands:\n");
	for (size_t i = 0; i < CW_ARRAY_SIZE(commands); i++)
		printf("  %s\n", commands[i].help);
	return EXIT_SUCCESS;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		cmd_help(0, NULL);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return cmd_help(0, NULL);
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("cwsim %s (libclockwise %s)\n", PACKAGE_VERSION, cw_version());
		return EXIT_SUCCESS;
	}
	for (size_t i = 0; i < CW_ARRAY_SIZE(commands); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "cwsim: unknown command '%s' (try cwsim help)\n", argv[1]);
	return EXIT_USAGE;
}
