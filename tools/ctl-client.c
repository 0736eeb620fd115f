/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl-client.h"

int cwctl_client_open(struct cwctl_client *c, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	c->fd = -1;
	c->len = 0;
	if (!path || strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -errno;
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int r = -errno;

		close(c->fd);
		c->fd = -1;
		return r;
	}
	return 0;
}

void cwctl_client_close(struct cwctl_client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The next line (without its newline) in c->buf[0..*ret_len). */
static int read_line(struct cwctl_client *c, size_t *ret_len)
{
	for (;;) {
		char *nl = memchr(c->buf, '\n', c->len);
		ssize_t n;

		if (nl) {
			*ret_len = (size_t)(nl - c->buf);
			return 0;
		}
		if (c->len == sizeof(c->buf))
			return -EMSGSIZE;
		n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		c->len += (size_t)n;
	}
}

static void consume(struct cwctl_client *c, size_t line_len)
{
	memmove(c->buf, c->buf + line_len + 1, c->len - line_len - 1);
	c->len -= line_len + 1;
}

int cwctl_client_call(struct cwctl_client *c, enum cw_ctl_cmd cmd, json_object *args,
		    cwctl_progress_fn progress, void *userdata, struct cw_ctl_reply *ret_reply)
{
	char *req = cw_ctl_format_request(cmd, args);
	int r;

	if (!req)
		return -ENOMEM;
	r = send_all(c->fd, req, strlen(req));
	free(req);
	if (r < 0)
		return r;
	for (;;) {
		struct cw_ctl_fail f;
		size_t n = 0;

		r = read_line(c, &n);
		if (r < 0)
			return r;
		r = cw_ctl_reply_parse(c->buf, n, ret_reply, &f);
		consume(c, n);
		if (r < 0)
			return -EPROTO;
		if (ret_reply->kind != CW_CTL_REPLY_PROGRESS)
			return 0;
		if (progress)
			progress(ret_reply, userdata);
		cw_ctl_reply_done(ret_reply);
	}
}
