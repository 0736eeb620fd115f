/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ctl-client — the client side of the control socket, shared by cwctl(8)
 * and cwstream(1): connect, send one request, read progress lines and the
 * reply.
 */
#ifndef CW_TOOLS_CTL_CLIENT_H
#define CW_TOOLS_CTL_CLIENT_H

#include <clockwise/ctl-proto.h>

struct cwctl_client {
	int fd;
	char buf[CW_CTL_LINE_MAX];
	size_t len;
};

/* 0 or -errno (the socket's path in the caller's message). */
int cwctl_client_open(struct cwctl_client *c, const char *path);
void cwctl_client_close(struct cwctl_client *c);

typedef void (*cwctl_progress_fn)(const struct cw_ctl_reply *progress, void *userdata);

/* Sends cmd with args (may be NULL) and waits for the reply, passing each
 * progress line to progress (may be NULL).  0 with *ret_reply an OK or
 * ERROR reply (release with cw_ctl_reply_done), or -errno when the exchange
 * itself failed: -EPROTO for a line that is not a reply, -ECONNRESET when
 * the server closed first. */
int cwctl_client_call(struct cwctl_client *c, enum cw_ctl_cmd cmd, json_object *args,
		    cwctl_progress_fn progress, void *userdata, struct cw_ctl_reply *ret_reply);

#endif
