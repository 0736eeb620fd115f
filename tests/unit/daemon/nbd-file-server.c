/*
 * nbd-file-server — serves plain files through clockwised's NBD front end
 * (daemon/nbd/) with a synchronous back end over pread, pwrite
 * and fdatasync.
 *
 * CACHE is posix_fadvise(WILLNEED); BLOCK_STATUS reports the file's own
 * holes (SEEK_DATA, SEEK_HOLE).
 *
 * It exists to test the front end with real clients (nbdinfo, nbdcopy,
 * qemu-io, qemu-img, fio) until the volume back end lands; it is not the
 * daemon and does nothing clockwised does below the NBD layer.  By
 * default every request completes on the connection's reader thread; with
 * -A N, N other threads complete them in random order.  Either way it
 * shows the protocol, not the data path's speed.
 *
 *   nbd-file-server [-u SOCKET]... [-t [HOST:]PORT]... [-b MIN] [-B PREF]
 *                   [-M MAX] [-q INFLIGHT] [-x MAXREQ] [-A N] [-n] [-d DESC]
 *                   (-e NAME=FILE | -E NAME=FILE)...
 *
 *   -e / -E   a read-write / read-only export of FILE (its size is the
 *             export's; -d before it gives it a description)
 *   -n        no default export (an empty name is then unknown)
 *   -b -B -M  block size minimum, preferred, maximum for the exports after
 *   -x        the server's largest READ/WRITE; -q requests per connection
 *   -A N      complete requests from N threads, in random order
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

#include "daemon/nbd/nbd-server.h"

struct file {
	int fd;
	uint32_t align;		/* the export's minimum block */
};

/* Every export's file, closed after the server has stopped. */
static struct file *files[64];
static unsigned n_files;

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

/* The operations themselves, run by whichever thread completes. */
static int do_pread(struct file *f, struct nbdsrv_io *io)
{
	return full_pread(f->fd, io->buf, io->length, (off_t)io->offset);
}

static int do_pwrite(struct file *f, struct nbdsrv_io *io)
{
	return full_pwrite(f->fd, io->buf, io->length, (off_t)io->offset, io->fua);
}

static int do_flush(struct file *f, struct nbdsrv_io *io)
{
	return fdatasync(f->fd) < 0 ? -errno : 0;
}

static int sync_if(struct file *f, bool fua, int r)
{
	if (r == 0 && fua && fdatasync(f->fd) < 0)
		return -errno;
	return r;
}

static int do_trim(struct file *f, struct nbdsrv_io *io)
{
	int r = 0;

	/* Trim is advisory: a file system without hole punching ignores it. */
	if (fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)io->offset,
		      io->length) < 0 && errno != EOPNOTSUPP)
		r = -errno;
	return sync_if(f, io->fua, r);
}

static int do_zero(struct file *f, struct nbdsrv_io *io)
{
	static const uint8_t zeros[65536];
	int mode = io->may_trim ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE :
				  FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
	uint64_t off = io->offset, n = io->length;
	int r = 0;

	if (fallocate(f->fd, mode, (off_t)off, (off_t)n) < 0) {
		if (errno != EOPNOTSUPP) {
			r = -errno;
		} else if (io->fast_zero) {
			r = -ENOTSUP;	/* writing zeros is not fast */
		} else {
			while (n > 0 && r == 0) {
				size_t k = n < sizeof(zeros) ? n : sizeof(zeros);

				r = full_pwrite(f->fd, zeros, k, (off_t)off, false);
				off += k, n -= k;
			}
		}
	}
	return sync_if(f, io->fua, r);
}

static int do_cache(struct file *f, struct nbdsrv_io *io)
{
	return -posix_fadvise(f->fd, (off_t)io->offset, io->length, POSIX_FADV_WILLNEED);
}

/* The file's holes from offset on, as base:allocation extents. */
static int do_block_status(struct file *f, struct nbdsrv_io *io)
{
	struct cw_nbd_extent *ext = io->buf;
	uint32_t max = io->req_one ? 1 : NBD_EXTENTS_MAX, n = 0;
	off_t off = (off_t)io->offset, end = off + io->length;

	while (off < end && n < max) {
		off_t data = lseek(f->fd, off, SEEK_DATA), next;
		bool hole = data != off;

		if (data < 0 && errno != ENXIO)
			return -errno;
		if (hole)
			next = data < 0 ? end : data;
		else
			next = lseek(f->fd, off, SEEK_HOLE);
		if (next < 0)
			return -errno;
		if (next > end)
			next = end;
		ext[n++] = (struct cw_nbd_extent){
			.length = (uint32_t)(next - off),
			.status = hole ? CW_NBD_STATE_HOLE | CW_NBD_STATE_ZERO : 0 };
		off = next;
	}
	io->n_extents = n;
	return 0;
}

static int do_io(struct file *f, struct nbdsrv_io *io)
{
	/* Like a disk opened with O_DIRECT: the front end must never pass
	 * on a request off the export's grid, whatever its client sent. */
	if (io->op != NBDSRV_IO_FLUSH && io->op != NBDSRV_IO_CACHE && io->op != NBDSRV_IO_BLOCK_STATUS &&
	    ((io->offset | io->length) & (f->align - 1)))
		return -EINVAL;
	switch (io->op) {
	case NBDSRV_IO_READ: return do_pread(f, io);
	case NBDSRV_IO_WRITE: return do_pwrite(f, io);
	case NBDSRV_IO_FLUSH: return do_flush(f, io);
	case NBDSRV_IO_TRIM: return do_trim(f, io);
	case NBDSRV_IO_ZERO: return do_zero(f, io);
	case NBDSRV_IO_CACHE: return do_cache(f, io);
	case NBDSRV_IO_BLOCK_STATUS: return do_block_status(f, io);
	}
	return -EINVAL;
}

/*
 * Asynchronous mode (-A N): requests are queued and N completion threads
 * take them in random order, so replies leave out of order and from
 * threads other than the connection's, as they will from the daemon's
 * disk dispatchers.  Like those, the threads hold their writer wake-ups
 * until the queue runs dry: half of them then send the replies themselves
 * (nbdsrv_io_unplug_send, as a dispatcher of a lane without streams), half
 * wake the writers (nbdsrv_io_unplug), so both race for a connection's
 * socket.  A queue with a mutex is fine here: this is a test harness, not
 * the data path.
 */
struct queued {
	struct file *f;
	struct nbdsrv_io *io;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t more;
	struct queued q[4096];
	unsigned n;
	bool stop;
	pthread_t threads[16];
	unsigned n_threads;
} aq = { .lock = PTHREAD_MUTEX_INITIALIZER, .more = PTHREAD_COND_INITIALIZER };

static void *completer_main(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	bool sends = seed & 1;

	nbdsrv_io_plug();
	pthread_mutex_lock(&aq.lock);
	for (;;) {
		struct queued x;
		unsigned i;

		if (aq.n == 0) {
			pthread_mutex_unlock(&aq.lock);
			if (sends)
				nbdsrv_io_unplug_send();
			else
				nbdsrv_io_unplug();
			pthread_mutex_lock(&aq.lock);
		}
		while (aq.n == 0 && !aq.stop)
			pthread_cond_wait(&aq.more, &aq.lock);
		if (aq.n == 0)
			break;
		i = (unsigned)rand_r(&seed) % aq.n;
		x = aq.q[i];
		aq.q[i] = aq.q[--aq.n];
		pthread_mutex_unlock(&aq.lock);
		nbdsrv_io_complete(x.io, do_io(x.f, x.io));
		pthread_mutex_lock(&aq.lock);
	}
	pthread_mutex_unlock(&aq.lock);
	return NULL;
}

static int submit(void *b, struct nbdsrv_io *io)
{
	if (aq.n_threads == 0) {
		nbdsrv_io_complete(io, do_io(b, io));
		return 0;
	}
	pthread_mutex_lock(&aq.lock);
	if (aq.n == sizeof(aq.q) / sizeof(aq.q[0])) {
		pthread_mutex_unlock(&aq.lock);
		return -EAGAIN;
	}
	aq.q[aq.n++] = (struct queued){ b, io };
	pthread_cond_signal(&aq.more);
	pthread_mutex_unlock(&aq.lock);
	return 0;
}

static const struct nbdsrv_backend_ops file_ops = {
	.pread = submit,
	.pwrite = submit,
	.flush = submit,
	.trim = submit,
	.zero = submit,
	.cache = submit,
	.block_status = submit,
};

static void log_stderr(void *userdata, int priority, const char *msg)
{
	fprintf(stderr, "nbd-file-server: %s\n", msg);
}

static int usage(void)
{
	fprintf(stderr, "usage: nbd-file-server [-u SOCKET]... [-t [HOST:]PORT]... [-b MIN] "
		"[-B PREF] [-M MAX] [-q INFLIGHT] [-x MAXREQ] [-A THREADS] [-n] [-d DESC] "
		"(-e|-E NAME=FILE)...\n");
	return 2;
}

static int add_file(struct nbdsrv *srv, const char *arg, bool ro, const char *desc,
		    uint32_t min, uint32_t pref, uint32_t max)
{
	const char *eq = strchr(arg, '=');
	struct nbdsrv_export e = { 0 };
	struct stat st;
	struct file *f;
	char *name;
	int r;

	if (!eq || eq == arg) {
		fprintf(stderr, "nbd-file-server: %s: expected NAME=FILE\n", arg);
		return -EINVAL;
	}
	if (n_files >= sizeof(files) / sizeof(files[0]))
		return -EMFILE;
	name = strndup(arg, (size_t)(eq - arg));
	f = calloc(1, sizeof(*f));
	if (!name || !f) {
		free(name);
		free(f);
		return -ENOMEM;
	}
	files[n_files++] = f;
	f->align = min ? min : 1;
	f->fd = open(eq + 1, (ro ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (f->fd < 0 || fstat(f->fd, &st) < 0) {
		r = -errno;
		fprintf(stderr, "nbd-file-server: %s: %s\n", eq + 1, strerror(-r));
		free(name);
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
	e.fast_zero = true;
	e.backend = f;
	r = nbdsrv_add_export(srv, &e);
	if (r < 0)
		fprintf(stderr, "nbd-file-server: export %s: %s\n", name, strerror(-r));
	free(name);
	return r;
}

int main(int argc, char **argv)
{
	struct nbdsrv_config cfg = { .default_export = 0, .log = log_stderr };
	struct nbdsrv *srv;
	const char *desc = NULL;
	uint32_t min = 0, pref = 0, max = 0;
	char *socks[8], *ports[8];
	unsigned n_socks = 0, n_ports = 0, i;
	int c, r, sig;
	sigset_t set;

	/* Parse the server-wide options first: exports need max_request. */
	while ((c = getopt(argc, argv, "u:t:b:B:M:q:x:A:nd:e:E:h")) != -1) {
		switch (c) {
		case 'u': if (n_socks < 8) socks[n_socks++] = optarg; break;
		case 't': if (n_ports < 8) ports[n_ports++] = optarg; break;
		case 'q': cfg.max_inflight = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'x': cfg.max_request = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'n': cfg.default_export = -1; break;
		case 'A': aq.n_threads = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'b': case 'B': case 'M': case 'd': case 'e': case 'E': break;
		default: return usage();
		}
	}
	r = nbdsrv_new(&cfg, &srv);
	if (r < 0) {
		fprintf(stderr, "nbd-file-server: %s\n", strerror(-r));
		return 1;
	}
	optind = 1;
	while ((c = getopt(argc, argv, "u:t:b:B:M:q:x:A:nd:e:E:h")) != -1) {
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
		r = nbdsrv_listen_unix(srv, socks[i], NULL, CW_NBD_TLS_OFF);
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
		r = nbdsrv_listen_tcp(srv, host, port, CW_NBD_TLS_OFF);
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
	if (aq.n_threads > sizeof(aq.threads) / sizeof(aq.threads[0]))
		return usage();
	for (i = 0; i < aq.n_threads; i++)
		if (pthread_create(&aq.threads[i], NULL, completer_main,
				   (void *)(uintptr_t)(i + 1)) != 0)
			return 1;
	r = nbdsrv_start(srv);
	if (r < 0) {
		fprintf(stderr, "nbd-file-server: cannot start: %s\n", strerror(-r));
		return 1;
	}
	sigwait(&set, &sig);
	/* The server waits for every request in flight, so the completion
	 * threads must outlive it. */
	nbdsrv_free(srv);
	pthread_mutex_lock(&aq.lock);
	aq.stop = true;
	pthread_cond_broadcast(&aq.more);
	pthread_mutex_unlock(&aq.lock);
	for (i = 0; i < aq.n_threads; i++)
		pthread_join(aq.threads[i], NULL);
	for (i = 0; i < n_files; i++) {
		if (files[i]->fd >= 0)
			close(files[i]->fd);
		free(files[i]);
	}
	return 0;
}
