/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The metrics endpoint: GET /metrics over HTTP on the addresses of
 * cwc_server_opts.metrics_addr, served by libmicrohttpd (a well-kept HTTP
 * server: request parsing, keep-alive, limits and timeouts are its job,
 * not ours) inside the control server's own epoll loop, so that the
 * exposition (control-metrics.c) reads the server's state on the thread
 * that owns it.
 *
 * We make and bind each socket and hand it to libmicrohttpd
 * (MHD_OPTION_LISTEN_SOCKET): it does not bind unix sockets itself.  On a
 * unix socket the control socket's read rule holds (root, or a member of
 * the read group, by SO_PEERCRED: cwc_peer_rights); TCP is only ever on
 * loopback (the configuration refuses other addresses), open to anyone on
 * the host.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <microhttpd.h>

#include "common/util.h"
#include "control-internal.h"

#define HTTP_CONNECTIONS 16
#define HTTP_TIMEOUT_S 10

#define CT_PROMETHEUS "text/plain; version=0.0.4; charset=utf-8"
#define CT_OPENMETRICS "application/openmetrics-text; version=1.0.0; charset=utf-8"

struct cwc_http {
	enum cwc_ev_kind kind;		/* first: CWC_EV_HTTP */
	struct cwc_server *srv;
	struct MHD_Daemon *mhd;
	int epoll_fd;			/* libmicrohttpd's, in the server's epoll */
	char *unix_path;		/* a unix socket's file, removed at the end */
	struct cwc_http *next;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
			     char *body, size_t len)
{
	struct MHD_Response *resp;
	enum MHD_Result r;

	resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	r = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return r;
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status, const char *text)
{
	char *body = strdup(text);

	return body ? reply(c, status, "text/plain; charset=utf-8", body, strlen(body)) : MHD_NO;
}

/* Whether the client asked for OpenMetrics in its Accept header. */
static bool wants_openmetrics(struct MHD_Connection *c)
{
	const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							 MHD_HTTP_HEADER_ACCEPT);

	return accept && strstr(accept, "application/openmetrics-text");
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_len, void **con_cls)
{
	struct cwc_http *h = cls;
	bool om;
	char *body = NULL;
	size_t len = 0;
	int r;

	(void)version;
	(void)upload;
	(void)upload_len;
	(void)con_cls;
	if (h->unix_path) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		struct cwc_peer peer;

		if (!ci || cwc_peer_rights(h->srv, ci->connect_fd, &peer) < 0 || !peer.can_read)
			return reply_text(c, MHD_HTTP_FORBIDDEN, "the metrics are for root and the "
					  "control socket's read group\n");
	}
	if (strcmp(url, "/metrics") != 0)
		return reply_text(c, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n");
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET is served\n");
	om = wants_openmetrics(c);
	r = cwc_metrics_text(h->srv, om, &body, &len);
	if (r < 0) {
		char msg[128];

		snprintf(msg, sizeof(msg), "collecting the metrics: %s\n", strerror(-r));
		return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, msg);
	}
	return reply(c, MHD_HTTP_OK, om ? CT_OPENMETRICS : CT_PROMETHEUS, body, len);
}

/* A bound, listening socket for addr; a unix socket's file gets the
 * control socket's mode and group. */
static int http_socket(struct cwc_server *srv, const struct sockaddr_storage *addr,
		       socklen_t len, int *ret_fd)
{
	int fd, one = 1, r;

	fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (addr->ss_family == AF_UNIX) {
		const struct sockaddr_un *sa = (const struct sockaddr_un *)addr;

		r = cwc_clear_stale(sa->sun_path, sa);
		if (r < 0)
			goto fail;
	} else if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0) {
		r = -errno;
		goto fail;
	}
	if (bind(fd, (const struct sockaddr *)addr, len) < 0) {
		r = -errno;
		goto fail;
	}
	if (addr->ss_family == AF_UNIX) {
		const char *path = ((const struct sockaddr_un *)addr)->sun_path;

		if (chmod(path, srv->o.socket_mode) < 0 ||
		    (srv->o.socket_gid != CWC_NO_GID && chown(path, (uid_t)-1, srv->o.socket_gid) < 0)) {
			r = -errno;
			unlink(path);
			goto fail;
		}
	}
	if (listen(fd, HTTP_CONNECTIONS) < 0) {
		r = -errno;
		goto fail;
	}
	*ret_fd = fd;
	return 0;
fail:
	close(fd);
	return r;
}

static void http_free(struct cwc_http *h)
{
	if (h->mhd)
		MHD_stop_daemon(h->mhd);	/* closes the listening socket */
	if (h->unix_path)
		unlink(h->unix_path);
	free(h->unix_path);
	free(h);
}

int cwc_http_start(struct cwc_server *srv)
{
	for (size_t i = 0; i < srv->o.n_metrics; i++) {
		const struct sockaddr_storage *addr = &srv->o.metrics_addr[i];
		struct epoll_event ev = { .events = EPOLLIN };
		const union MHD_DaemonInfo *info;
		struct cwc_http *h = calloc(1, sizeof(*h));
		int fd = -1, r;

		if (!h)
			return -ENOMEM;
		h->kind = CWC_EV_HTTP;
		h->srv = srv;
		r = http_socket(srv, addr, srv->o.metrics_addrlen[i], &fd);
		if (r < 0) {
			free(h);
			return r;
		}
		if (addr->ss_family == AF_UNIX &&
		    !(h->unix_path = strdup(((const struct sockaddr_un *)addr)->sun_path))) {
			close(fd);
			unlink(((const struct sockaddr_un *)addr)->sun_path);
			free(h);
			return -ENOMEM;
		}
		/* No thread of its own: the server's loop runs it. */
		h->mhd = MHD_start_daemon(MHD_USE_EPOLL, 0, NULL, NULL, answer, h,
					  MHD_OPTION_LISTEN_SOCKET, fd,
					  MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONNECTIONS,
					  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_TIMEOUT_S,
					  MHD_OPTION_END);
		if (!h->mhd) {
			close(fd);
			http_free(h);
			return -EIO;
		}
		info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_EPOLL_FD);
		ev.data.ptr = h;
		if (!info || epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, info->epoll_fd, &ev) < 0) {
			http_free(h);
			return -EIO;
		}
		h->epoll_fd = info->epoll_fd;
		h->next = srv->http;
		srv->http = h;
	}
	return 0;
}

int cwc_http_run(struct cwc_server *srv)
{
	int wait_ms = -1;

	for (struct cwc_http *h = srv->http; h; h = h->next) {
		MHD_UNSIGNED_LONG_LONG t;

		MHD_run(h->mhd);
		if (MHD_get_timeout(h->mhd, &t) == MHD_YES)
			wait_ms = wait_ms < 0 ? (int)CW_MIN(t, (MHD_UNSIGNED_LONG_LONG)INT32_MAX) :
				  (int)CW_MIN((MHD_UNSIGNED_LONG_LONG)wait_ms, t);
	}
	return wait_ms;
}

void cwc_http_free(struct cwc_server *srv)
{
	while (srv->http) {
		struct cwc_http *h = srv->http;

		srv->http = h->next;
		epoll_ctl(srv->epoll_fd, EPOLL_CTL_DEL, h->epoll_fd, NULL);
		http_free(h);
	}
}
