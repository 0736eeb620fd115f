/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * nbd-tls.h — TLS for the NBD front end, over GnuTLS: the server's
 * credentials (X.509 certificates or pre-shared keys) and one session per
 * connection that chose NBD_OPT_STARTTLS.
 *
 * A session is used by two threads at once in transmission, the reader
 * receiving and one sender at a time sending, which GnuTLS allows.  Calls
 * block on the socket; its timeouts bound them.
 */
#ifndef CW_DAEMON_NBD_TLS_H
#define CW_DAEMON_NBD_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct nbdtls_creds;
struct nbdtls;

/* Loads the server's credentials: X.509 from cert_dir (ca-cert.pem,
 * server-cert.pem, server-key.pem, and ca-crl.pem if present), or the
 * pre-shared keys of psk_file (psktool's "username:hexkey" lines); one of
 * the two, not both.  verify_peer (certificates only): a client must
 * present a certificate the CA signed.  -errno, with the reason in err;
 * -EPERM for a private key or PSK file that every user may read. */
int nbdtls_creds_new(const char *cert_dir, const char *psk_file, bool verify_peer,
		      struct nbdtls_creds **ret_creds, char *err, size_t errlen);
void nbdtls_creds_free(struct nbdtls_creds *creds);	/* NULL-safe */

/* Runs the server side of the TLS handshake on fd, giving up after
 * timeout_ns.  -errno, with the reason in err (for the log). */
int nbdtls_accept(const struct nbdtls_creds *creds, int fd, int64_t timeout_ns,
		   struct nbdtls **ret_tls, char *err, size_t errlen);

/* Up to n bytes: > 0, 0 at the end of the stream, or -errno (-ETIME: a
 * record was not all there within the record timeout). */
ssize_t nbdtls_recv(struct nbdtls *t, void *buf, size_t n);
/* How long a record may take to arrive once called for, from its first
 * byte to its last (a client that sends part of one and stops must not
 * hold its reader for ever); and, with the socket's SO_SNDTIMEO, how
 * long a send may wait for the client to take data (-ETIMEDOUT). */
void nbdtls_set_timeout(struct nbdtls *t, int64_t timeout_ns);
/* Whether bytes already decrypted wait to be received (a poll of the
 * socket would not see them). */
bool nbdtls_pending(struct nbdtls *t);
/* Sends all of iov[0..n) (as few records as they fit in): 0 or -errno. */
int nbdtls_sendv(struct nbdtls *t, const struct iovec *iov, int n);
/* Says goodbye (if the peer still listens) and frees; NULL-safe.  The
 * socket stays open. */
void nbdtls_free(struct nbdtls *t);

#endif
