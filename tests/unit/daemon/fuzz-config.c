/*
 * Description: the clockwised.conf parser on arbitrary text.  It must never
 * crash or leak; a good parse must satisfy the documented limits; a bad one
 * must say "NAME:LINE: <what>; expected <what>".
 *
 * Built two ways: with -DCW_LIBFUZZER and -fsanitize=fuzzer (`make fuzz`),
 * libFuzzer drives LLVMFuzzerTestOneInput; otherwise main() replays every
 * file of the corpus directories given (default: the seed corpus in
 * $top_srcdir/tests/fuzz/corpus/config), which is what make check runs.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include <clockwise/nbd.h>
#include "daemon/conf.h"
#include "tests/unit/daemon/lsan-libconfig.h"
#include "tests/fuzz/replay.h"

#define NAME "fuzz.conf"

/* "fuzz.conf:<digits>: <what>; expected <what>" */
static bool message_ok(const char *msg)
{
	const char *q;

	if (!msg || strncmp(msg, NAME ":", strlen(NAME ":")) != 0)
		return false;
	q = msg + strlen(NAME ":");
	if (*q < '0' || *q > '9')
		return false;
	while (*q >= '0' && *q <= '9')
		q++;
	return q[0] == ':' && q[1] == ' ' && strstr(q, "; expected ") != NULL;
}

static void check_config(const struct cwd_config *c)
{
	size_t i, j;

	if (c->queue_depth < 1 || c->queue_depth > 4096 || c->policy > CWD_POLICY_DYNAMIC ||
	    (c->io_engine != CW_IO_URING && c->io_engine != CW_IO_AIO) ||
	    c->log_level < LOG_ERR || c->log_level > LOG_DEBUG || !c->pool || c->pool[0] != '/' ||
	    !c->control_socket || c->control_socket[0] != '/' ||
	    c->n_listen_unix + c->n_listen_tcp == 0 ||
	    c->exports.max_request_bytes < c->exports.block_size)
		abort();
	/* Beyond loopback only with TLS required or in so many words; TLS
	 * only with credentials, one kind of them. */
	for (i = 0; i < c->n_listen_tcp; i++)
		if (!c->listen_tcp[i].host || c->listen_tcp[i].port == 0 ||
		    (!c->listen_tcp[i].loopback && !c->insecure &&
		     c->listen_tcp[i].tls != CW_NBD_TLS_REQUIRE) ||
		    c->listen_tcp[i].tls < CW_NBD_TLS_OFF || c->listen_tcp[i].tls > CW_NBD_TLS_REQUIRE ||
		    (c->listen_tcp[i].tls != CW_NBD_TLS_OFF && !c->tls.certificates && !c->tls.psk))
			abort();
	for (i = 0; i < c->n_listen_unix; i++)
		if (c->listen_unix_tls[i] < CW_NBD_TLS_OFF || c->listen_unix_tls[i] > CW_NBD_TLS_REQUIRE ||
		    (c->listen_unix_tls[i] != CW_NBD_TLS_OFF && !c->tls.certificates && !c->tls.psk))
			abort();
	if ((c->tls.certificates && c->tls.psk) || (c->tls.psk && c->tls.verify_peer))
		abort();
	/* The default access entry first, then one per export, each named. */
	if (c->n_access < 1 || c->access[0].export || c->unix_mode == 0 || c->unix_mode > 0777)
		abort();
	for (i = 1; i < c->n_access; i++)
		if (!c->access[i].export)
			abort();
	for (i = 0; i < c->n_listen_unix; i++)
		if (c->listen_unix[i][0] != '/' || strlen(c->listen_unix[i]) > 107)
			abort();
	for (i = 0; i < c->n_disks; i++) {
		const struct cwd_config_disk *d = &c->disks[i];

		/* an absolute path, or an image on a cluster (rbd:POOL/IMAGE) */
		if (!d->path || (d->path[0] != '/' && strncmp(d->path, "rbd:", 4) != 0) ||
		    !d->name || !d->name[0] || d->slot_ns <= 0 ||
		    d->lanes < 1 || (d->tier == CW_TIER_HDD && d->lanes != 1) ||
		    d->policy > CWD_POLICY_DYNAMIC)
			abort();
		for (j = 0; j < i; j++)
			if (!strcmp(d->name, c->disks[j].name) || !strcmp(d->path, c->disks[j].path))
				abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cwd_config *c = NULL;
	char *text, *err = NULL;
	int r;

	if (size > 1 << 16)
		return 0;
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	/* An include would read whatever file the input names. */
	if (strstr(text, "@include")) {
		free(text);
		return 0;
	}
	r = cwd_config_parse(text, NAME, &c, &err);
	if (r == 0) {
		if (err)
			abort();
		check_config(c);
		cwd_config_free(c);
	} else if (r == -EINVAL) {
		if (!message_ok(err)) {
			fprintf(stderr, "badly formed message: %s\n", err ? err : "(none)");
			abort();
		}
	} else if (r != -ENOMEM)
		abort();
	free(err);
	free(text);
	return 0;
}

#ifndef CW_LIBFUZZER
int main(int argc, char **argv)
{
	return cw_fuzz_replay(argc, argv, "config", 1 << 16);
}
#endif
