/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Connection limits: at most max_connections counted connections (the
 * last places kept for root and the server's own user), at most
 * max_per_user of one user; and a client stalled in its handshake gives
 * way to one that made progress (claim_place), so that clients that
 * never finish a handshake cannot lock out those that do.  All under the
 * server's lock; the acceptor (sockets.c) and the handshake ask.
 */
#include "config.h"

#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/util.h"
#include "daemon/nbd/nbd-internal.h"

static bool same_user(const struct nbdsrv_peer *a, const struct nbdsrv_peer *b)
{
	return a->known == b->known && (!a->known || a->uid == b->uid);
}

/* Counted connections (served, or in a handshake that had a place) of
 * the same user as peer; under srv->lock. */
static unsigned user_conns(struct nbdsrv *srv, const struct nbdsrv_peer *peer)
{
	unsigned n = 0;

	for (struct conn *c = srv->conns; c; c = c->next)
		if (!c->refuse && !c->evicted && !c->provisional && same_user(&c->peer, peer))
			n++;
	return n;
}

/* Root and the server's own user: the ones who must be able to get in
 * to set things right. */
static bool peer_is_admin(const struct nbdsrv_peer *p)
{
	return p->known && (p->uid == 0 || p->uid == geteuid());
}

/* Why peer may not have one more counted connection, or NULL; *ret_by_user
 * says whether it is its user's share that is full.  The last places are
 * kept for admins.  Under srv->lock. */
const char *over_limit(struct nbdsrv *srv, const struct nbdsrv_peer *peer,
			      bool *ret_by_user)
{
	unsigned cap = srv->cfg.max_connections;

	*ret_by_user = false;
	if (!peer_is_admin(peer))
		cap -= CW_MIN(NBDSRV_ADMIN_RESERVE, cap - 1);
	if (srv->n_conns >= cap)
		return "too many connections to this server";
	*ret_by_user = true;
	if (user_conns(srv, peer) >= srv->cfg.max_per_user)
		return peer->known ? "too many connections of this user" :
				     "too many connections from the network";
	return NULL;
}

/* The oldest counted connection still in its handshake (no export chosen,
 * so not yet authenticated), of peer's user when by_user, else of anyone
 * but an admin: the one to give way to a client that made progress.
 * Under srv->lock. */
struct conn *stalled(struct nbdsrv *srv, const struct nbdsrv_peer *peer, bool by_user)
{
	struct conn *victim = NULL;

	/* The list holds the newest first. */
	for (struct conn *c = srv->conns; c; c = c->next) {
		if (c->refuse || c->evicted || c->provisional || c->exp)
			continue;
		if (by_user ? !same_user(&c->peer, peer) : peer_is_admin(&c->peer))
			continue;
		victim = c;
	}
	return victim;
}

/* Ends c's handshake from the outside: it counts no more.  Under srv->lock. */
void evict(struct nbdsrv *srv, struct conn *c)
{
	c->evicted = true;
	if (c->provisional) {
		srv->n_provisional--;
	} else {
		srv->n_conns--;
		atomic_fetch_sub_explicit(&srv->n_active, 1, memory_order_relaxed);
	}
	shutdown(c->fd, SHUT_RDWR);
}

/* A connection accepted over a limit (provisional) sent an option other
 * than STARTTLS (under TLS, where TLS is required), so it is no client
 * stalled in its handshake: it takes a
 * counted place, a free one or that of the oldest stalled connection.
 * NULL, or why it cannot.  Under srv->lock. */
const char *claim_place(struct conn *c)
{
	struct nbdsrv *srv = c->srv;
	const char *why;
	struct conn *v;
	bool by_user;

	while ((why = over_limit(srv, &c->peer, &by_user))) {
		v = stalled(srv, &c->peer, by_user);
		if (!v)
			return why;
		evict(srv, v);
	}
	c->provisional = false;
	srv->n_provisional--;
	srv->n_conns++;
	atomic_fetch_add_explicit(&srv->n_active, 1, memory_order_relaxed);
	return NULL;
}
