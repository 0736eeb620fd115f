/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * TLS for the NBD front end (nbd-tls.h), over GnuTLS.
 *
 * The NBD protocol upgrades a connection in the middle of its handshake:
 * the client sends NBD_OPT_STARTTLS, the server acknowledges it in the
 * clear, and both run a TLS handshake on the same socket; every byte
 * after that is a TLS record.  The certificate layout (a directory with
 * ca-cert.pem, server-cert.pem, server-key.pem) and the PSK file format
 * are those qemu-nbd and nbdkit read, so one set of credentials serves
 * all three.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <gnutls/gnutls.h>

#include "common/util.h"
#include "daemon/nbd/nbd-tls.h"

/* The library's defaults, plus the key exchanges a pre-shared key needs. */
#define PRIORITY_CERT "NORMAL"
#define PRIORITY_PSK "NORMAL:+ECDHE-PSK:+DHE-PSK:+PSK"
/* A batch of replies up to this size goes out in as few records as fit
 * (GnuTLS copies it); a larger one is sent piece by piece instead. */
#define CORK_MAX (64u << 10)

struct nbdtls_creds {
	gnutls_certificate_credentials_t x509;	/* one of the two */
	gnutls_psk_server_credentials_t psk;
	bool verify_peer;
};

struct nbdtls {
	gnutls_session_t s;
	int fd;
};

static int say(char *err, size_t errlen, int code, const char *what, const char *why)
{
	snprintf(err, errlen, "%s: %s", what, why);
	return code;
}

/* A file the credentials need: readable, or a clear reason. */
static int need_file(const char *path, char *err, size_t errlen)
{
	if (access(path, R_OK) < 0)
		return say(err, errlen, -errno, path, strerror(errno));
	return 0;
}

/* A secret (a private key, pre-shared keys): readable, and by no one but
 * its owner and group; a key every user can read is no secret, and is
 * refused rather than served with. */
static int need_secret(const char *path, char *err, size_t errlen)
{
	struct stat st;
	char why[128];
	int r = need_file(path, err, errlen);

	if (r < 0)
		return r;
	if (stat(path, &st) < 0)
		return say(err, errlen, -errno, path, strerror(errno));
	if (st.st_mode & (S_IROTH | S_IWOTH)) {
		snprintf(why, sizeof(why), "a secret that every user may %s (mode %04o); "
			 "chmod o-rwx it", st.st_mode & S_IROTH ? "read" : "change",
			 (unsigned)(st.st_mode & 07777));
		return say(err, errlen, -EPERM, path, why);
	}
	return 0;
}

static int load_x509(struct nbdtls_creds *c, const char *dir, char *err, size_t errlen)
{
	char ca[4200], cert[4200], key[4200], crl[4200];
	int g, r;

	snprintf(ca, sizeof(ca), "%s/ca-cert.pem", dir);
	snprintf(cert, sizeof(cert), "%s/server-cert.pem", dir);
	snprintf(key, sizeof(key), "%s/server-key.pem", dir);
	snprintf(crl, sizeof(crl), "%s/ca-crl.pem", dir);
	r = need_file(ca, err, errlen);
	if (r == 0)
		r = need_file(cert, err, errlen);
	if (r == 0)
		r = need_secret(key, err, errlen);
	if (r < 0)
		return r;
	g = gnutls_certificate_allocate_credentials(&c->x509);
	if (g < 0)
		return say(err, errlen, -ENOMEM, "TLS credentials", gnutls_strerror(g));
	g = gnutls_certificate_set_x509_trust_file(c->x509, ca, GNUTLS_X509_FMT_PEM);
	if (g < 0)
		return say(err, errlen, -EINVAL, ca, gnutls_strerror(g));
	if (access(crl, R_OK) == 0) {
		g = gnutls_certificate_set_x509_crl_file(c->x509, crl, GNUTLS_X509_FMT_PEM);
		if (g < 0)
			return say(err, errlen, -EINVAL, crl, gnutls_strerror(g));
	}
	g = gnutls_certificate_set_x509_key_file(c->x509, cert, key, GNUTLS_X509_FMT_PEM);
	if (g < 0)
		return say(err, errlen, -EINVAL, cert, gnutls_strerror(g));
	/* Finite-field Diffie-Hellman with the groups of RFC 7919. */
	gnutls_certificate_set_known_dh_params(c->x509, GNUTLS_SEC_PARAM_MEDIUM);
	return 0;
}

static int load_psk(struct nbdtls_creds *c, const char *file, char *err, size_t errlen)
{
	int g, r = need_secret(file, err, errlen);

	if (r < 0)
		return r;
	g = gnutls_psk_allocate_server_credentials(&c->psk);
	if (g < 0)
		return say(err, errlen, -ENOMEM, "TLS credentials", gnutls_strerror(g));
	/* GnuTLS looks a user's key up in the file at each handshake, so
	 * keys can be changed without a restart. */
	g = gnutls_psk_set_server_credentials_file(c->psk, file);
	if (g < 0)
		return say(err, errlen, -EINVAL, file, gnutls_strerror(g));
	gnutls_psk_set_server_known_dh_params(c->psk, GNUTLS_SEC_PARAM_MEDIUM);
	return 0;
}

int nbdtls_creds_new(const char *cert_dir, const char *psk_file, bool verify_peer,
		      struct nbdtls_creds **ret_creds, char *err, size_t errlen)
{
	struct nbdtls_creds *c;
	int r;

	if (!cert_dir == !psk_file) {
		snprintf(err, errlen, "TLS needs certificates or a PSK file, and only one");
		return -EINVAL;
	}
	if (psk_file && verify_peer) {
		snprintf(err, errlen, "verifying a client's certificate needs certificates, "
			 "not a PSK file");
		return -EINVAL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->verify_peer = verify_peer;
	r = cert_dir ? load_x509(c, cert_dir, err, errlen) : load_psk(c, psk_file, err, errlen);
	if (r < 0) {
		nbdtls_creds_free(c);
		return r;
	}
	*ret_creds = c;
	return 0;
}

void nbdtls_creds_free(struct nbdtls_creds *c)
{
	if (!c)
		return;
	if (c->x509)
		gnutls_certificate_free_credentials(c->x509);
	if (c->psk)
		gnutls_psk_free_server_credentials(c->psk);
	free(c);
}

int nbdtls_accept(const struct nbdtls_creds *c, int fd, int64_t timeout_ns,
		   struct nbdtls **ret_tls, char *err, size_t errlen)
{
	struct nbdtls *t = calloc(1, sizeof(*t));
	int g;

	if (!t)
		return -ENOMEM;
	t->fd = fd;
	/* GNUTLS_NO_SIGNAL: a client gone away is an error, not SIGPIPE. */
	g = gnutls_init(&t->s, GNUTLS_SERVER | GNUTLS_NO_SIGNAL);
	if (g < 0) {
		free(t);
		return say(err, errlen, -ENOMEM, "TLS session", gnutls_strerror(g));
	}
	if (c->x509) {
		g = gnutls_credentials_set(t->s, GNUTLS_CRD_CERTIFICATE, c->x509);
		if (g == 0 && c->verify_peer) {
			gnutls_certificate_server_set_request(t->s, GNUTLS_CERT_REQUIRE);
			gnutls_session_set_verify_cert(t->s, NULL, 0);
		}
		if (g == 0)
			g = gnutls_priority_set_direct(t->s, PRIORITY_CERT, NULL);
	} else {
		g = gnutls_credentials_set(t->s, GNUTLS_CRD_PSK, c->psk);
		if (g == 0)
			g = gnutls_priority_set_direct(t->s, PRIORITY_PSK, NULL);
	}
	if (g < 0) {
		gnutls_deinit(t->s);
		free(t);
		return say(err, errlen, -EINVAL, "TLS session", gnutls_strerror(g));
	}
	gnutls_transport_set_int(t->s, fd);
	gnutls_handshake_set_timeout(t->s, (unsigned)CW_MAX(timeout_ns / 1000000, INT64_C(1)));
	do {
		g = gnutls_handshake(t->s);
	} while (g < 0 && !gnutls_error_is_fatal(g));
	if (g < 0) {
		gnutls_deinit(t->s);
		free(t);
		return say(err, errlen, g == GNUTLS_E_TIMEDOUT ? -ETIMEDOUT : -EPROTO,
			   "TLS handshake", gnutls_strerror(g));
	}
	nbdtls_set_timeout(t, timeout_ns);
	*ret_tls = t;
	return 0;
}

void nbdtls_set_timeout(struct nbdtls *t, int64_t timeout_ns)
{
	/* Whole milliseconds, at least one: 0 would mean none. */
	gnutls_record_set_timeout(t->s, (unsigned)CW_MIN(CW_MAX((timeout_ns + 999999) / 1000000,
								INT64_C(1)), INT64_C(UINT_MAX - 1)));
}

ssize_t nbdtls_recv(struct nbdtls *t, void *buf, size_t n)
{
	for (;;) {
		ssize_t r = gnutls_record_recv(t->s, buf, n);

		if (r >= 0)
			return r;
		/* GnuTLS says AGAIN on a blocking socket too, after a
		 * record that carried no data (TLS 1.3's post-handshake
		 * messages). */
		if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
			continue;
		if (r == GNUTLS_E_TIMEDOUT)
			return -ETIME;
		/* A client that closes without saying goodbye has ended the
		 * stream all the same. */
		if (r == GNUTLS_E_PREMATURE_TERMINATION)
			return 0;
		return -ECONNRESET;
	}
}

bool nbdtls_pending(struct nbdtls *t)
{
	return gnutls_record_check_pending(t->s) > 0;
}

static int send_all(struct nbdtls *t, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t r = gnutls_record_send(t->s, p, n);

		if (r == GNUTLS_E_INTERRUPTED)
			continue;
		/* The socket is blocking: only its SO_SNDTIMEO ends a send
		 * with EAGAIN. */
		if (r == GNUTLS_E_AGAIN)
			return -ETIMEDOUT;
		if (r < 0)
			return -EPIPE;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int nbdtls_sendv(struct nbdtls *t, const struct iovec *iov, int n)
{
	size_t total = 0;
	bool cork;
	int i, r = 0;

	for (i = 0; i < n; i++)
		total += iov[i].iov_len;
	cork = total <= CORK_MAX && n > 1;
	if (cork)
		gnutls_record_cork(t->s);
	for (i = 0; i < n && r == 0; i++)
		r = send_all(t, iov[i].iov_base, iov[i].iov_len);
	if (cork) {
		int g;

		do {
			g = gnutls_record_uncork(t->s, GNUTLS_RECORD_WAIT);
		} while (g == GNUTLS_E_INTERRUPTED);
		if (r == 0 && g < 0)
			r = g == GNUTLS_E_AGAIN ? -ETIMEDOUT : -EPIPE;
	}
	return r;
}

void nbdtls_free(struct nbdtls *t)
{
	struct timeval tv = { .tv_sec = 1 };

	if (!t)
		return;
	/* Goodbye, if the client still takes it within a second. */
	(void)setsockopt(t->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	(void)gnutls_bye(t->s, GNUTLS_SHUT_WR);
	gnutls_deinit(t->s);
	free(t);
}
