/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The NBD front end's sockets: listeners on unix paths and on TCP, who
 * is at the other end of an accepted connection, and the acceptor
 * thread, which places each client (limits.c decides whether it counts)
 * and starts its reader (connections.c).
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "daemon/nbd/nbd-internal.h"
#include "daemon/thread-name.h"

/* A client over a connection limit is told so within this, by at most
 * REFUSING_MAX threads at once; more are closed without a word. */
#define REFUSE_TIMEOUT_NS (INT64_C(2) * 1000000000)
#define REFUSING_MAX 16

/* A TCP peer as "address:port" ("[address]:port" for IPv6), for the
 * operator: who is connected. */
static void tcp_peer_addr(int fd, char *buf, size_t n)
{
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	buf[0] = '\0';
	if (getpeername(fd, (struct sockaddr *)&sa, &len) < 0)
		return;
	if (sa.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&sa;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		port = ntohs(in->sin_port);
		snprintf(buf, n, "%s:%u", host, port);
	} else if (sa.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		port = ntohs(in6->sin6_port);
		snprintf(buf, n, "[%s]:%u", host, port);
	}
}

/* The kernel's word on who is at the other end of a unix socket. */
static void peer_from_socket(int fd, struct nbdsrv_peer *ret_peer)
{
	struct ucred cred;
	socklen_t len = sizeof(cred), glen = sizeof(ret_peer->groups);

	ret_peer->known = false;
	ret_peer->n_groups = 0;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return;
	ret_peer->known = true;
	ret_peer->uid = cred.uid;
	ret_peer->gid = cred.gid;
	ret_peer->pid = cred.pid;
	/* Supplementary groups where the kernel reports them (4.13); more
	 * than fit are left out, so they grant nothing. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, ret_peer->groups, &glen) == 0)
		ret_peer->n_groups = glen / sizeof(gid_t);
}

/* ------------------------------------------------------------------ */
/* accepting */

static void accept_one(struct nbdsrv *srv, unsigned li)
{
	struct nbdsrv_peer peer = { .known = false };
	const char *refuse = NULL;
	struct conn *c;
	pthread_attr_t attr;
	int64_t now;
	bool by_user, provisional = false;
	int fd, one = 1, r;

	fd = accept4(srv->listen_fds[li], NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			client_log(srv, LOG_WARNING, "accept: %m");
		return;
	}
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (srv->unix_paths[li])
		peer_from_socket(fd, &peer);
	now = cw_now_ns();

	pthread_mutex_lock(&srv->lock);
	/* Over a limit while connections stall in their handshake (a
	 * partial TLS record, or nothing at all), a newcomer gets a
	 * provisional place: if it makes progress it takes the place of the
	 * oldest of them (claim_place), so clients that never finish a
	 * handshake cannot lock out those that do.  The provisional places
	 * are few: the oldest gives way to the newest. */
	refuse = over_limit(srv, &peer, &by_user);
	if (refuse && !srv->stopped && stalled(srv, &peer, by_user)) {
		refuse = NULL;
		provisional = true;
		if (srv->n_provisional >= REFUSING_MAX) {
			struct conn *oldest = NULL;

			for (c = srv->conns; c; c = c->next)
				if (c->provisional && !c->evicted)
					oldest = c;
			evict(srv, oldest);
		}
	}
	/* A client over a limit is told so, by a few threads at most: a
	 * flood of them is closed without a word. */
	if (srv->stopped || (refuse && srv->n_refusing >= REFUSING_MAX)) {
		pthread_mutex_unlock(&srv->lock);
		if (!srv->stopped)
			client_log(srv, LOG_WARNING, "closed a client of %s at once: %s",
				   peer_name(&peer, (char[32]){ 0 }, 32), refuse);
		close(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (c)
		c->rbuf = malloc(RBUF_BYTES);
	if (!c || !c->rbuf) {
		pthread_mutex_unlock(&srv->lock);
		free(c);
		close(fd);
		return;
	}
	c->srv = srv;
	c->fd = fd;
	c->rd_fd = -1;
	c->wr_fd = -1;
	c->tls_mode = srv->listen_tls[li];
	c->peer = peer;
	c->since_ns = now;
	if (!srv->unix_paths[li])
		tcp_peer_addr(fd, c->addr, sizeof(c->addr));
	c->refuse = refuse;
	c->deadline_ns = now + (refuse ? CW_MIN(REFUSE_TIMEOUT_NS, srv->cfg.handshake_timeout_ns)
				       : srv->cfg.handshake_timeout_ns);
	c->next = srv->conns;
	if (c->next)
		c->next->prev = c;
	srv->conns = c;
	c->provisional = provisional;
	if (refuse) {
		srv->n_refusing++;
	} else if (provisional) {
		srv->n_provisional++;
	} else {
		srv->n_conns++;
		atomic_fetch_add_explicit(&srv->n_active, 1, memory_order_relaxed);
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	r = pthread_create(&(pthread_t){ 0 }, &attr, conn_main, c);
	pthread_attr_destroy(&attr);
	pthread_mutex_unlock(&srv->lock);
	if (r != 0) {
		srv_log(srv, LOG_ERR, "cannot start a connection thread: %s", strerror(r));
		conn_unlink(c);
		conn_free(c);
	}
}

static void *acceptor_main(void *arg)
{
	struct nbdsrv *srv = arg;
	struct pollfd pfd[NBDSRV_LISTEN_MAX + 1];
	unsigned i;

	for (i = 0; i < srv->n_listen; i++)
		pfd[i] = (struct pollfd){ .fd = srv->listen_fds[i], .events = POLLIN };
	pfd[srv->n_listen] = (struct pollfd){ .fd = srv->wake_fd, .events = POLLIN };
	for (;;) {
		/* Wakes once a second to say how many messages about clients
		 * it left out, after a storm that then stopped. */
		int n = poll(pfd, srv->n_listen + 1, 1000);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			srv_log(srv, LOG_ERR, "poll: %m");
			break;
		}
		flush_dropped(srv, cw_now_ns());
		if (n == 0)
			continue;
		if (pfd[srv->n_listen].revents)
			break;
		for (i = 0; i < srv->n_listen; i++)
			if (pfd[i].revents & POLLIN)
				accept_one(srv, i);
	}
	return NULL;
}

/* ------------------------------------------------------------------ */
/* listening */

static int add_listener(struct nbdsrv *srv, int fd, const char *unix_path,
			enum cw_nbd_tls tls)
{
	if (srv->n_listen >= NBDSRV_LISTEN_MAX) {
		close(fd);
		return -EMFILE;
	}
	if (listen(fd, 128) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	srv->listen_fds[srv->n_listen] = fd;
	srv->unix_paths[srv->n_listen] = unix_path ? strdup(unix_path) : NULL;
	srv->listen_tls[srv->n_listen] = tls;
	srv->n_listen++;
	return 0;
}

/* Replaces a socket left by a server that is gone, never a live one (a
 * second daemon must not take the first one's clients) nor any other
 * file. */
static int unlink_stale(const struct sockaddr_un *sa)
{
	_cleanup_close_ int probe = -1;
	struct stat st;

	if (lstat(sa->sun_path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe < 0)
		return -errno;
	if (connect(probe, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
		return -EADDRINUSE;
	return unlink(sa->sun_path) < 0 && errno != ENOENT ? -errno : 0;
}

/* A listener may offer TLS only with credentials to offer. */
static int check_tls(const struct nbdsrv *srv, enum cw_nbd_tls tls)
{
	if (tls > CW_NBD_TLS_REQUIRE || (tls != CW_NBD_TLS_OFF && !srv->cfg.tls_creds))
		return -EINVAL;
	return 0;
}

int nbdsrv_listen_unix(struct nbdsrv *srv, const char *path,
			   const struct nbdsrv_unix_perm *perm, enum cw_nbd_tls tls)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = -1;
	mode_t mode = perm && perm->mode ? perm->mode : 0660;
	int r;

	if (srv->started)
		return -EBUSY;
	r = check_tls(srv, tls);
	if (r < 0)
		return r;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	r = unlink_stale(&sa);
	if (r < 0)
		return r;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	/* The file appears with the umask's mode (0777 under umask 000):
	 * set the configured one before listen(), so no client can connect
	 * in between. */
	if (chmod(path, mode) < 0 ||
	    (perm && (perm->owner != (uid_t)-1 || perm->group != (gid_t)-1) &&
	     chown(path, perm->owner, perm->group) < 0)) {
		r = -errno;
		unlink(path);
		return r;
	}
	r = add_listener(srv, CW_TAKE_FD(fd), path, tls);
	if (r < 0)
		unlink(path);
	return r;
}

int nbdsrv_listen_tcp(struct nbdsrv *srv, const char *host, const char *port,
			  enum cw_nbd_tls tls)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_ADDRCONFIG };
	struct addrinfo *res, *ai;
	int r, n = 0, last = -EADDRNOTAVAIL;

	if (srv->started)
		return -EBUSY;
	r = check_tls(srv, tls);
	if (r < 0)
		return r;
	/* No host means loopback: exports are not for the network unless
	 * the configuration says so. */
	if (!host || !*host) {
		host = NULL;
		hints.ai_flags &= ~AI_PASSIVE;
	}
	r = getaddrinfo(host, port, &hints, &res);
	if (r != 0)
		return r == EAI_SYSTEM ? -errno : -EADDRNOTAVAIL;
	for (ai = res; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		int one = 1;

		if (fd < 0) {
			last = -errno;
			continue;
		}
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6)
			(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
			last = -errno;
			close(fd);
			continue;
		}
		r = add_listener(srv, fd, NULL, tls);
		/* Full: an error, not an address left out in silence. */
		if (r == -EMFILE) {
			freeaddrinfo(res);
			return r;
		}
		if (r < 0) {
			last = r;
			continue;
		}
		n++;
	}
	freeaddrinfo(res);
	return n > 0 ? 0 : last;
}

int nbdsrv_start(struct nbdsrv *srv)
{
	int r;

	if (srv->started)
		return -EBUSY;
	if (srv->n_listen == 0 || (srv->n_exports == 0 && !srv->cfg.live_exports))
		return -EINVAL;
	if (srv->cfg.default_export >= (int)srv->n_exports && !srv->cfg.live_exports)
		return -EINVAL;
	r = -pthread_create(&srv->acceptor, NULL, acceptor_main, srv);
	if (r < 0)
		return r;
	thread_name(srv->acceptor, "cw-accept");
	srv->started = true;
	return 0;
}
