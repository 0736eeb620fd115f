/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The NBD handshake, on a connection's reader: the greeting, the option
 * haggling through libclockwise's codec (cw_nbd_hs_option) against the
 * exports of the moment and the access lists (nbdsrv_access_for),
 * STARTTLS, and the export chosen.  One deadline for the whole of it.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "daemon/nbd/nbd-internal.h"

/* Sends in the handshake give up after ns (a client that never reads
 * its replies); 0: never. */
static void set_sndtimeo(int fd, int64_t ns)
{
	struct timeval tv = { .tv_sec = ns / 1000000000, .tv_usec = ns % 1000000000 / 1000 };

	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* ------------------------------------------------------------------ */
/* access */

static bool principal_matches(const struct nbdsrv_principal *p, const struct nbdsrv_peer *peer)
{
	unsigned i;

	switch (p->kind) {
	case NBDSRV_ANYONE:
		return true;
	case NBDSRV_USER:
		return peer->known && peer->uid == p->id;
	case NBDSRV_GROUP:
		if (!peer->known)
			return false;
		if (peer->gid == p->id)
			return true;
		for (i = 0; i < peer->n_groups; i++)
			if (peer->groups[i] == p->id)
				return true;
		return false;
	}
	return false;
}

static bool any_matches(const struct nbdsrv_principal *list, size_t n, const struct nbdsrv_peer *peer)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (principal_matches(&list[i], peer))
			return true;
	return false;
}

int nbdsrv_access_for(const struct nbdsrv_access *list, size_t n, const struct nbdsrv_peer *peer,
		   const char *name)
{
	const struct nbdsrv_access *rule = NULL;
	size_t i;

	for (i = 0; i < n; i++) {
		if (list[i].export && strcmp(list[i].export, name) == 0) {
			rule = &list[i];
			break;
		}
		if (!list[i].export && !rule)
			rule = &list[i];
	}
	if (!rule)
		return CW_NBD_ACCESS_RW;
	/* Whoever owns the disks can read them anyway. */
	if (peer->known && (peer->uid == 0 || peer->uid == geteuid()))
		return CW_NBD_ACCESS_RW;
	if (any_matches(rule->read_write, rule->n_read_write, peer))
		return CW_NBD_ACCESS_RW;
	if (any_matches(rule->read_only, rule->n_read_only, peer))
		return CW_NBD_ACCESS_RO;
	return CW_NBD_ACCESS_NONE;
}

/* ------------------------------------------------------------------ */
/* the option haggling */

static int send_all(int fd, const void *buf, size_t n)
{
	const uint8_t *p = buf;

	while (n > 0) {
		ssize_t r = send(fd, p, n, MSG_NOSIGNAL);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Sends in the handshake: in the clear or under TLS. */
static int conn_send(struct conn *c, const void *buf, size_t n)
{
	if (c->sess)
		return nbdtls_sendv(c->sess, &(struct iovec){ (void *)buf, n }, 1);
	return send_all(c->fd, buf, n);
}

/* NBD_OPT_STARTTLS was acknowledged: the TLS handshake, within what is
 * left of the NBD handshake's time.  A client that sent more before it
 * (bytes in the input buffer) would have them taken as if under TLS:
 * it is closed instead. */
static int start_tls(struct conn *c)
{
	char err[256];
	int r;

	if (c->rpos < c->rlen) {
		client_log(c->srv, LOG_WARNING, "a client of %s sent data after STARTTLS before "
			   "TLS, closing", peer_name(&c->peer, (char[32]){ 0 }, 32));
		return -EPROTO;
	}
	r = nbdtls_accept(c->srv->cfg.tls_creds, c->fd, c->deadline_ns - cw_now_ns(), &c->sess,
			   err, sizeof(err));
	if (r < 0) {
		client_log(c->srv, LOG_WARNING, "a client of %s: %s",
			   peer_name(&c->peer, (char[32]){ 0 }, 32), err);
		return -EPROTO;
	}
	return 0;
}

/* Runs the option haggling; returns 0 with c->exp set, or -errno. */
int handshake(struct conn *c)
{
	struct nbdsrv *srv = c->srv;
	struct cw_nbd_handshake hs = {
		.default_export = srv->cfg.default_export,
	};
	uint8_t access[CW_EXPORTS_MAX];
	_cleanup_free_ uint8_t *data = NULL;
	struct cw_nbd_buf out = { 0 };
	uint8_t b[CW_NBD_GREETING_BYTES];
	int r;

	data = malloc(CW_NBD_OPT_DATA_MAX);
	if (!data)
		return -ENOMEM;
	cw_nbd_hs_reset(&hs);
	hs.refuse = c->refuse;
	hs.tls = c->tls_mode;
	set_sndtimeo(c->fd, CW_MAX(c->deadline_ns - cw_now_ns(), INT64_C(1000000)));
	cw_nbd_encode_greeting(b);
	r = send_all(c->fd, b, sizeof(b));
	if (r == 0)
		r = conn_read(c, b, CW_NBD_CLIENT_FLAGS_BYTES);
	if (r == 0)
		r = cw_nbd_hs_client_flags(&hs, b);
	while (r == 0) {
		struct cw_nbd_option opt;
		const uint8_t *payload = data;

		r = conn_read(c, b, CW_NBD_OPTION_BYTES);
		if (r < 0)
			break;
		r = cw_nbd_decode_option(b, &opt);
		if (r < 0)
			break;
		if (opt.length > CW_NBD_OPT_DATA_MAX) {
			/* Skip what no valid option needs, up to a bound;
			 * past it the client is only wasting our time. */
			if (opt.length > (1u << 20)) {
				r = -EPROTO;
				break;
			}
			r = conn_skip(c, opt.length);
			payload = NULL;
		} else {
			r = conn_read(c, data, opt.length);
		}
		if (r < 0)
			break;
		out.len = 0;
		/* Exports may come and go while the server runs: the codec
		 * sees the list of the moment, and the export is chosen
		 * under the same lock that removal takes. */
		pthread_mutex_lock(&srv->lock);
		/* Where TLS is required, only a client that got through
		 * its TLS handshake has shown it is not stalling. */
		if (c->provisional && !c->evicted && opt.option != CW_NBD_OPT_STARTTLS &&
		    (c->tls_mode != CW_NBD_TLS_REQUIRE || c->sess))
			hs.refuse = claim_place(c);
		hs.exports = srv->infos;
		hs.n_exports = srv->n_live;
		if (srv->cfg.n_access) {
			for (size_t i = 0; i < srv->n_live; i++)
				access[i] = (uint8_t)nbdsrv_access_for(srv->cfg.access,
								    srv->cfg.n_access, &c->peer,
								    srv->infos[i].name);
			hs.access = access;
		}
		r = cw_nbd_hs_option(&hs, &opt, payload, &out);
		/* It gave way to another (evict): it is not counted. */
		if (c->evicted)
			r = -ECONNABORTED;
		if (r == CW_NBD_HS_TRANSMIT) {
			c->exp = &srv->exports[srv->live[hs.export_index]];
			memcpy(c->client_class, hs.client_class, sizeof(c->client_class));
			c->lim = c->exp->lim;
			c->lim.structured = hs.structured;
			c->lim.eflags = hs.eflags;
			c->lim.block_status = hs.meta_allocation;
			/* Told a minimum of 1: keep the promise. */
			if (!hs.block_size_known && c->lim.min_block > 1) {
				c->rmw_align = c->lim.min_block;
				c->lim.min_block = 1;
			}
		}
		pthread_mutex_unlock(&srv->lock);
		if (r < 0)
			break;
		if (out.len && conn_send(c, out.data, out.len) < 0) {
			r = -EPIPE;
			break;
		}
		if (r == CW_NBD_HS_STARTTLS) {
			r = start_tls(c);
			if (r < 0)
				break;
			cw_nbd_hs_tls_started(&hs);
			continue;
		}
		if (r == CW_NBD_HS_TRANSMIT) {
			r = 1;
		} else if (r == CW_NBD_HS_CLOSE) {
			r = -ECONNABORTED;
		}
	}
	free(out.data);
	c->deadline_ns = 0;
	/* From here on a client that takes no replies, or leaves a TLS
	 * record unfinished, for the stall timeout is closed. */
	set_sndtimeo(c->fd, srv->cfg.stall_timeout_ns);
	if (c->sess)
		nbdtls_set_timeout(c->sess, srv->cfg.stall_timeout_ns);
	return r == 1 ? 0 : r;
}
