/*
 * nbd-file-server — serves plain files through clockwised's NBD front end
 * (daemon/nbd-server.c) with a synchronous back end over pread, pwrite
 * and fdatasync.
 *
 * It exists to test the front end with real clients (nbdinfo, nbdcopy,
 * qemu-io, qemu-img, fio) until the volume back end lands; it is not the
 * daemon and does nothing clockwised does below the NBD layer.  Every
 * request completes on the connection's reader thread, so it shows the
 * protocol, not the data path's speed.
 *
 *   nbd-file-server [-u SOCKET]... [-t [HOST:]PORT]... [-b MIN] [-B PREF]
 *                   [-M MAX] [-q INFLIGHT] [-x MAXREQ] [-n] [-d DESC]
 *                   (-e NAME=FILE | -E NAME=FILE)...
 *
 *   -e / -E   a read-write / read-only export of FILE (its size is the
 *             export's; -d before it gives it a description)
 *   -n        no default export (an empty name is then unknown)
 *   -b -B -M  block size minimum, preferred, maximum for the exports after
 *   -x        the server's largest READ/WRITE; -q requests per connection
 *
 * Runs until SIGTERM or SIGINT, then stops the server cleanly.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "daemon/nbd-server.h"

struct file {
	int fd;
};

static int full_pread(int fd, uint8_t *p, size_t n, off_t off)
{
	while (n > 0) {
		ssize_t r = pread(fd, p, n, off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0) {		/* past the end of a shrunk file */
			memset(p, 0, n);
			break;
		}
		p += r, n -= (size_t)r, off += r;
	}
	return 0;
}

static int full_pwrite(int fd, const uint8_t *p, size_t n, off_t off, bool fua)
{
	while (n > 0) {
		struct iovec iov = { (void *)p, n };
		/* RWF_DSYNC makes this one write stable: FUA without a
		 * flush of everything else. */
		ssize_t r = pwritev2(fd, &iov, 1, off, fua ? RWF_DSYNC : 0);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += r, n -= (size_t)r, off += r;
	}
	return 0;
}

static int f_pread(void *b, struct nbd_io *io)
{
	struct file *f = b;

	nbd_io_complete(io, full_pread(f->fd, io->buf, io->length, (off_t)io->offset));
	return 0;
}

static int f_pwrite(void *b, struct nbd_io *io)
{
	struct file *f = b;

	nbd_io_complete(io, full_pwrite(f->fd, io->buf, io->length, (off_t)io->offset, io->fua));
	return 0;
}

static int f_flush(void *b, struct nbd_io *io)
{
	struct file *f = b;

	nbd_io_complete(io, fdatasync(f->fd) < 0 ? -errno : 0);
	return 0;
}

static int sync_if(struct file *f, bool fua, int r)
{
	if (r == 0 && fua && fdatasync(f->fd) < 0)
		return -errno;
	return r;
}

static int f_trim(void *b, struct nbd_io *io)
{
	struct file *f = b;
	int r = 0;

	/* Trim is advisory: a file system without hole punching ignores it. */
	if (fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)io->offset,
		      io->length) < 0 && errno != EOPNOTSUPP)
		r = -errno;
	nbd_io_complete(io, sync_if(f, io->fua, r));
	return 0;
}

static int f_zero(void *b, struct nbd_io *io)
{
	static const uint8_t zeros[65536];
	struct file *f = b;
	int mode = io->may_trim ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE :
				  FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
	uint64_t off = io->offset, n = io->length;
	int r = 0;

	if (fallocate(f->fd, mode, (off_t)off, (off_t)n) < 0) {
		if (errno != EOPNOTSUPP) {
			r = -errno;
		} else {
			while (n > 0 && r == 0) {
				size_t k = n < sizeof(zeros) ? n : sizeof(zeros);

				r = full_pwrite(f->fd, zeros, k, (off_t)off, false);
				off += k, n -= k;
			}
		}
	}
	nbd_io_complete(io, sync_if(f, io->fua, r));
	return 0;
}

static const struct nbd_backend_ops file_ops = {
	.pread = f_pread,
	.pwrite = f_pwrite,
	.flush = f_flush,
	.trim = f_trim,
	.zero = f_zero,
};

static void log_stderr(void *userdata, int priority, const char *msg)
{
	fprintf(stderr, "nbd-file-server: %s\n", msg);
}

static int usage(void)
{
	fprintf(stderr, "usage: nbd-file-server [-u SOCKET]... [-t [HOST:]PORT]... [-b MIN] "
		"[-B PREF] [-M MAX] [-q INFLIGHT] [-x MAXREQ] [-n] [-d DESC] "
		"(-e|-E NAME=FILE)...\n");
	return 2;
}

static int add_file(struct nbd_server *srv, const char *arg, bool ro, const char *desc,
		    uint32_t min, uint32_t pref, uint32_t max)
{
	const char *eq = strchr(arg, '=');
	struct nbd_export e = { 0 };
	struct stat st;
	struct file *f;
	char *name;
	int r;

	if (!eq || eq == arg) {
		fprintf(stderr, "nbd-file-server: %s: expected NAME=FILE\n", arg);
		return -EINVAL;
	}
	name = strndup(arg, (size_t)(eq - arg));
	f = calloc(1, sizeof(*f));
	if (!name || !f)
		return -ENOMEM;
	f->fd = open(eq + 1, (ro ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (f->fd < 0 || fstat(f->fd, &st) < 0) {
		r = -errno;
		fprintf(stderr, "nbd-file-server: %s: %s\n", eq + 1, strerror(-r));
		return r;
	}
	e.name = name;
	e.description = desc;
	e.size = (uint64_t)st.st_size - (min ? (uint64_t)st.st_size % min : 0);
	e.read_only = ro;
	e.flush_global = true;	/* one fd, one page cache: fdatasync covers all */
	e.min_block = min;
	e.pref_block = pref;
	e.max_block = max;
	e.ops = &file_ops;
	e.backend = f;
	r = nbd_server_add_export(srv, &e);
	if (r < 0)
		fprintf(stderr, "nbd-file-server: export %s: %s\n", name, strerror(-r));
	free(name);
	return r;	/* f stays open for the life of the process */
}

int main(int argc, char **argv)
{
	struct nbd_server_config cfg = { .default_export = 0, .log = log_stderr };
	struct nbd_server *srv;
	const char *desc = NULL;
	uint32_t min = 0, pref = 0, max = 0;
	char *socks[8], *ports[8];
	unsigned n_socks = 0, n_ports = 0, i;
	int c, r, sig;
	sigset_t set;

	/* Parse the server-wide options first: exports need max_request. */
	while ((c = getopt(argc, argv, "u:t:b:B:M:q:x:nd:e:E:h")) != -1) {
		switch (c) {
		case 'u': if (n_socks < 8) socks[n_socks++] = optarg; break;
		case 't': if (n_ports < 8) ports[n_ports++] = optarg; break;
		case 'q': cfg.max_inflight = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'x': cfg.max_request = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'n': cfg.default_export = -1; break;
		case 'b': case 'B': case 'M': case 'd': case 'e': case 'E': break;
		default: return usage();
		}
	}
	r = nbd_server_new(&cfg, &srv);
	if (r < 0) {
		fprintf(stderr, "nbd-file-server: %s\n", strerror(-r));
		return 1;
	}
	optind = 1;
	while ((c = getopt(argc, argv, "u:t:b:B:M:q:x:nd:e:E:h")) != -1) {
		switch (c) {
		case 'b': min = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'B': pref = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'M': max = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'd': desc = optarg; break;
		case 'e': case 'E':
			if (add_file(srv, optarg, c == 'E', desc, min, pref, max) < 0)
				return 1;
			desc = NULL;
			break;
		default: break;
		}
	}
	if (optind != argc || (n_socks == 0 && n_ports == 0))
		return usage();
	for (i = 0; i < n_socks; i++) {
		r = nbd_server_listen_unix(srv, socks[i]);
		if (r < 0) {
			fprintf(stderr, "nbd-file-server: %s: %s\n", socks[i], strerror(-r));
			return 1;
		}
	}
	for (i = 0; i < n_ports; i++) {
		char *colon = strrchr(ports[i], ':');
		const char *host = NULL, *port = ports[i];

		if (colon) {
			*colon = 0;
			host = ports[i];
			port = colon + 1;
		}
		r = nbd_server_listen_tcp(srv, host, port);
		if (r < 0) {
			fprintf(stderr, "nbd-file-server: port %s: %s\n", port, strerror(-r));
			return 1;
		}
	}

	/* Signals go to sigwait() here, not to the server's threads. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	r = nbd_server_start(srv);
	if (r < 0) {
		fprintf(stderr, "nbd-file-server: cannot start: %s\n", strerror(-r));
		return 1;
	}
	sigwait(&set, &sig);
	nbd_server_free(srv);
	return 0;
}
