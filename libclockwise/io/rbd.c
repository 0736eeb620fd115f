/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Disks that are Ceph RBD images: a disk named rbd:POOL/IMAGE, optionally
 * followed by ?conf=FILE&id=NAME, is an image on a cluster, reached with
 * librbd's asynchronous calls.
 *
 * An image has no file descriptor, yet everything above the io module
 * (the pool's labels, the data path's requests, calibration) speaks of
 * disks by descriptor.  So opening an image gives a stand-in descriptor:
 * an eventfd that no read, write or fallocate of its own can mistake for
 * data (each fails), registered here with the image it stands for.  The
 * io module's descriptor calls (cw_io_pread, cw_io_size, cw_io_punch, the
 * engine's requests ...) look the descriptor up and go to librbd.
 *
 * Sharing.  One connection per cluster (configuration file and client id)
 * and one image handle per image and access mode serve every descriptor
 * opened on them: a second read-write handle of the same image would
 * fight the first for its exclusive lock on every write.  Both are
 * counted and closed with their last descriptor.
 *
 * The engine.  Each request becomes one rbd_aio_* call whose completion
 * callback, on a librbd thread, pushes its slot on the engine's lock-free
 * list of finished slots; reap takes the list, and sleeps on a futex word
 * when it is empty.  The callback wakes it only when it sleeps: a reaper
 * busy with other completions costs librbd's thread no system call, and
 * one that sleeps costs one wake-up (an eventfd cost a write there, a
 * ppoll and a read here).  The same word lets the engine's owner wait for
 * a completion without reaping it (cw_io_wait, while another thread may
 * submit and reap), and any thread end that wait (cw_io_kick).  A
 * callback per engine rather than
 * rbd_poll_io_events: the events are the image's, and several lanes
 * (engines) share one image handle.
 *
 * Invariant: a request's image handle is the one its descriptor stood for
 * when it was submitted, and it stays open until the request is reaped:
 * as with any descriptor, the caller closes one only when no request on
 * it is in flight (the engines are freed, or have reaped everything,
 * first).  An engine caches the last descriptor it looked up and checks
 * the registry's generation, bumped by every close, before it trusts the
 * cache: the hot path takes the registry's lock only when the descriptor
 * changes.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/futex.h"
#include "common/util.h"
#include "io/io-internal.h"

#define RBD_PREFIX "rbd:"

static bool name_ok(const char *s, size_t len, size_t max)
{
	if (len == 0 || len >= max)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] == '/' || s[i] == '?' || s[i] == '&' || s[i] == '@' || s[i] == '=' ||
		    (unsigned char)s[i] <= ' ')
			return false;
	return true;
}

bool cw_io_path_is_rbd(const char *path)
{
	return path && strncmp(path, RBD_PREFIX, strlen(RBD_PREFIX)) == 0;
}

int io_rbd_spec_parse(const char *path, struct io_rbd_spec *ret)
{
	const char *s, *slash, *q;
	struct io_rbd_spec sp = { 0 };

	if (!cw_io_path_is_rbd(path) || !ret)
		return -EINVAL;
	s = path + strlen(RBD_PREFIX);
	q = s + strcspn(s, "?");
	slash = memchr(s, '/', (size_t)(q - s));
	if (!slash || !name_ok(s, (size_t)(slash - s), sizeof(sp.pool)) ||
	    !name_ok(slash + 1, (size_t)(q - slash - 1), sizeof(sp.image)))
		return -EINVAL;
	memcpy(sp.pool, s, (size_t)(slash - s));
	memcpy(sp.image, slash + 1, (size_t)(q - slash - 1));
	if (*q == '?' && !*++q)
		return -EINVAL;	/* a '?' and nothing after it */
	while (*q) {
		size_t kl = strcspn(q, "=&"), vl;
		const char *v;
		char *dst;
		size_t max;

		if (q[kl] != '=')
			return -EINVAL;
		v = q + kl + 1;
		vl = strcspn(v, "&");
		if (kl == 4 && !strncmp(q, "conf", 4)) {
			dst = sp.conf;
			max = sizeof(sp.conf);
			if (v[0] != '/')
				return -EINVAL;	/* the daemon's directory is not the caller's */
		} else if (kl == 2 && !strncmp(q, "id", 2)) {
			dst = sp.id;
			max = sizeof(sp.id);
			if (!name_ok(v, vl, max))
				return -EINVAL;
		} else {
			return -EINVAL;
		}
		if (vl == 0 || vl >= max || dst[0])
			return -EINVAL;	/* empty, too long or given twice */
		memcpy(dst, v, vl);
		q = v + vl;
		if (*q == '&' && !*++q)
			return -EINVAL;
	}
	*ret = sp;
	return 0;
}

#ifdef HAVE_LIBRBD

#include <dlfcn.h>
#include <rados/librados.h>
#include <rbd/librbd.h>

/* librados and librbd are loaded when the first image is opened, not
 * linked: a process that links them pays their C++ start-up whether or
 * not it ever reaches a cluster (48 ms a process on this project's test
 * machine, and 0.5 s at each exit under LeakSanitizer, which scans their
 * heap), and few pools have a disk on one.  Every call this file makes of
 * them goes through lib (the names are redirected below), filled once. */
#define RBD_FUNCS(X) \
	X(0, rados_create) \
	X(0, rados_conf_read_file) \
	X(0, rados_conf_parse_env) \
	X(0, rados_conf_get) \
	X(0, rados_conf_set) \
	X(0, rados_connect) \
	X(0, rados_cluster_fsid) \
	X(0, rados_shutdown) \
	X(0, rados_ioctx_create) \
	X(0, rados_ioctx_destroy) \
	X(0, rados_ioctx_get_id) \
	X(0, rados_getaddrs) \
	X(1, rbd_open) \
	X(1, rbd_open_read_only) \
	X(1, rbd_close) \
	X(1, rbd_get_size) \
	X(1, rbd_get_id) \
	X(1, rbd_get_features) \
	X(1, rbd_read) \
	X(1, rbd_write) \
	X(1, rbd_write_zeroes) \
	X(1, rbd_flush) \
	X(1, rbd_lock_get_owners) \
	X(1, rbd_lock_get_owners_cleanup) \
	X(1, rbd_lock_break) \
	X(1, rbd_aio_create_completion) \
	X(1, rbd_aio_release) \
	X(1, rbd_aio_get_return_value) \
	X(1, rbd_aio_read) \
	X(1, rbd_aio_write) \
	X(1, rbd_aio_write_zeroes) \
	X(1, rbd_aio_flush)

static struct {
#define X(which, f) __typeof__(&f) f;
	RBD_FUNCS(X)
#undef X
} lib;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static int lib_err;

static void lib_load(void)
{
	/* the sonames of Debian's librados2 and librbd1 */
	void *h[2] = { dlopen("librados.so.2", RTLD_NOW | RTLD_LOCAL), NULL };

	if (h[0])
		h[1] = dlopen("librbd.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h[0] || !h[1]) {
		lib_err = -ELIBACC;
		return;
	}
#define X(which, f) \
	if (!(lib.f = (__typeof__(&f))dlsym(h[which], #f))) { \
		lib_err = -ELIBBAD; \
		return; \
	}
	RBD_FUNCS(X)
#undef X
}

/* 0 once the libraries are loaded; -ELIBACC: not installed; -ELIBBAD:
 * one lacks a call (too old). */
static int lib_ready(void)
{
	pthread_once(&lib_once, lib_load);
	return lib_err;
}

#define rados_create (*lib.rados_create)
#define rados_conf_read_file (*lib.rados_conf_read_file)
#define rados_conf_parse_env (*lib.rados_conf_parse_env)
#define rados_conf_get (*lib.rados_conf_get)
#define rados_conf_set (*lib.rados_conf_set)
#define rados_connect (*lib.rados_connect)
#define rados_cluster_fsid (*lib.rados_cluster_fsid)
#define rados_shutdown (*lib.rados_shutdown)
#define rados_ioctx_create (*lib.rados_ioctx_create)
#define rados_ioctx_destroy (*lib.rados_ioctx_destroy)
#define rados_ioctx_get_id (*lib.rados_ioctx_get_id)
#define rados_getaddrs (*lib.rados_getaddrs)
#define rbd_open (*lib.rbd_open)
#define rbd_open_read_only (*lib.rbd_open_read_only)
#define rbd_close (*lib.rbd_close)
#define rbd_get_size (*lib.rbd_get_size)
#define rbd_get_id (*lib.rbd_get_id)
#define rbd_get_features (*lib.rbd_get_features)
#define rbd_read (*lib.rbd_read)
#define rbd_write (*lib.rbd_write)
#define rbd_write_zeroes (*lib.rbd_write_zeroes)
#define rbd_flush (*lib.rbd_flush)
#define rbd_lock_get_owners (*lib.rbd_lock_get_owners)
#define rbd_lock_get_owners_cleanup (*lib.rbd_lock_get_owners_cleanup)
#define rbd_lock_break (*lib.rbd_lock_break)
#define rbd_aio_create_completion (*lib.rbd_aio_create_completion)
#define rbd_aio_release (*lib.rbd_aio_release)
#define rbd_aio_get_return_value (*lib.rbd_aio_get_return_value)
#define rbd_aio_read (*lib.rbd_aio_read)
#define rbd_aio_write (*lib.rbd_aio_write)
#define rbd_aio_write_zeroes (*lib.rbd_aio_write_zeroes)
#define rbd_aio_flush (*lib.rbd_aio_flush)

/* Descriptors open on images at once. */
#define HANDLES_MAX 256

struct cluster {
	struct cluster *next;
	unsigned refs;
	char conf[sizeof(((struct io_rbd_spec *)0)->conf)];
	char id[sizeof(((struct io_rbd_spec *)0)->id)];
	rados_t rados;
	uint64_t fsid_hash;
};

struct image {
	struct image *next;
	unsigned refs;			/* descriptors, and requests in flight */
	struct cluster *c;
	char pool[sizeof(((struct io_rbd_spec *)0)->pool)];
	char name[sizeof(((struct io_rbd_spec *)0)->image)];
	bool read_only;
	rados_ioctx_t io;
	rbd_image_t img;
	uint64_t dev, ino;		/* cw_io_identity */
};

struct handle {
	int fd;				/* -1: free */
	struct image *im;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cluster *clusters;
static struct image *images;
static struct handle handles[HANDLES_MAX];
static unsigned nhandles;		/* handles[0, nhandles) may be in use */
/* Bumped when a descriptor closes: an engine's cached lookup is stale. */
static atomic_uint_fast64_t reg_gen;

static uint64_t fnv(uint64_t h, const char *s)
{
	while (*s) {
		h ^= (unsigned char)*s++;
		h *= UINT64_C(0x100000001b3);
	}
	return h;
}

static void cluster_put(struct cluster *c)
{
	struct cluster **pp;

	if (--c->refs > 0)
		return;
	for (pp = &clusters; *pp != c; pp = &(*pp)->next)
		;
	*pp = c->next;
	rados_shutdown(c->rados);
	free(c);
}

/* Sets option to value unless the configuration already chose something
 * other than its built-in default. */
static int conf_default(rados_t r, const char *option, double builtin, const char *value)
{
	char now[64];

	if (rados_conf_get(r, option, now, sizeof(now)) == 0 && strtod(now, NULL) != builtin)
		return 0;
	return rados_conf_set(r, option, value);
}

static int cluster_get(const struct io_rbd_spec *sp, struct cluster **ret)
{
	struct cluster *c;
	char fsid[64];
	int r;

	r = lib_ready();
	if (r < 0)
		return r;
	for (c = clusters; c; c = c->next)
		if (!strcmp(c->conf, sp->conf) && !strcmp(c->id, sp->id)) {
			c->refs++;
			*ret = c;
			return 0;
		}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	snprintf(c->conf, sizeof(c->conf), "%s", sp->conf);
	snprintf(c->id, sizeof(c->id), "%s", sp->id);
	r = rados_create(&c->rados, sp->id[0] ? sp->id : NULL);
	if (r < 0) {
		free(c);
		return r;
	}
	/* An absent default file (no conf= given) is fine: CEPH_ARGS may
	 * say everything. */
	r = rados_conf_read_file(c->rados, sp->conf[0] ? sp->conf : NULL);
	if (r < 0 && (sp->conf[0] || r != -ENOENT))
		goto fail;
	r = rados_conf_parse_env(c->rados, NULL);
	/* A data path waits for nothing forever: a cluster that does not
	 * answer fails the open after 10 s (not 300), a request an OSD
	 * leaves unanswered fails after 30 s (not never) and its client
	 * gets an error.  The configuration file may say otherwise. */
	if (r == 0)
		r = conf_default(c->rados, "client_mount_timeout", 300, "10");
	if (r == 0)
		r = conf_default(c->rados, "rados_osd_op_timeout", 0, "30");
	if (r == 0)
		r = conf_default(c->rados, "rados_mon_op_timeout", 0, "30");
	/* Like O_DIRECT on a local disk: a write is on the cluster when it
	 * completes, and nothing between the scheduler and the OSDs
	 * reorders or delays requests. */
	if (r == 0)
		r = rados_conf_set(c->rados, "rbd_cache", "false");
	if (r == 0)
		r = rados_connect(c->rados);
	if (r == 0)
		r = rados_cluster_fsid(c->rados, fsid, sizeof(fsid));
	if (r < 0)
		goto fail;
	c->fsid_hash = fnv(UINT64_C(0xcbf29ce484222325), fsid);
	c->refs = 1;
	c->next = clusters;
	clusters = c;
	*ret = c;
	return 0;
fail:
	rados_shutdown(c->rados);
	free(c);
	return r;
}

static void image_put(struct image *im)
{
	struct image **pp;

	if (--im->refs > 0)
		return;
	for (pp = &images; *pp != im; pp = &(*pp)->next)
		;
	*pp = im->next;
	rbd_close(im->img);
	rados_ioctx_destroy(im->io);
	cluster_put(im->c);
	free(im);
}

static int image_get(const struct io_rbd_spec *sp, bool read_only, struct image **ret)
{
	struct image *im;
	char id[64] = "";
	int r;

	for (im = images; im; im = im->next)
		if (!strcmp(im->c->conf, sp->conf) && !strcmp(im->c->id, sp->id) &&
		    !strcmp(im->pool, sp->pool) && !strcmp(im->name, sp->image) &&
		    im->read_only == read_only) {
			im->refs++;
			*ret = im;
			return 0;
		}
	im = calloc(1, sizeof(*im));
	if (!im)
		return -ENOMEM;
	snprintf(im->pool, sizeof(im->pool), "%s", sp->pool);
	snprintf(im->name, sizeof(im->name), "%s", sp->image);
	im->read_only = read_only;
	r = cluster_get(sp, &im->c);
	if (r < 0) {
		free(im);
		return r;
	}
	r = rados_ioctx_create(im->c->rados, sp->pool, &im->io);
	if (r < 0)
		goto fail_cluster;
	r = read_only ? rbd_open_read_only(im->io, sp->image, &im->img, NULL) :
			rbd_open(im->io, sp->image, &im->img, NULL);
	if (r < 0)
		goto fail_io;
	im->dev = im->c->fsid_hash | (UINT64_C(1) << 63);
	im->ino = fnv(UINT64_C(0xcbf29ce484222325) + (uint64_t)rados_ioctx_get_id(im->io), "/");
	/* format 1 images have no id: their name is their identity */
	im->ino = fnv(im->ino, rbd_get_id(im->img, id, sizeof(id)) == 0 ? id : sp->image);
	im->refs = 1;
	im->next = images;
	images = im;
	*ret = im;
	return 0;
fail_io:
	rados_ioctx_destroy(im->io);
fail_cluster:
	cluster_put(im->c);
	free(im);
	return r;
}

/* The handle of a stand-in descriptor; reg_lock held. */
static struct handle *handle_of(int fd)
{
	if (fd < 0)
		return NULL;
	for (unsigned i = 0; i < nhandles; i++)
		if (handles[i].fd == fd)
			return &handles[i];
	return NULL;
}

int io_rbd_open(const char *path, bool writable)
{
	struct io_rbd_spec sp;
	struct image *im;
	struct handle *h = NULL;
	int fd, r;

	r = io_rbd_spec_parse(path, &sp);
	if (r < 0)
		return r;
	pthread_mutex_lock(&reg_lock);
	for (unsigned i = 0; i < HANDLES_MAX && !h; i++)
		if (i >= nhandles || handles[i].fd < 0)
			h = &handles[i];
	if (!h) {
		pthread_mutex_unlock(&reg_lock);
		return -EMFILE;
	}
	fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fd < 0) {
		r = -errno;
		pthread_mutex_unlock(&reg_lock);
		return r;
	}
	r = image_get(&sp, !writable, &im);
	if (r < 0) {
		close(fd);
		pthread_mutex_unlock(&reg_lock);
		return r;
	}
	h->fd = fd;
	h->im = im;
	if ((unsigned)(h - handles) >= nhandles)
		nhandles = (unsigned)(h - handles) + 1;
	pthread_mutex_unlock(&reg_lock);
	return fd;
}

bool io_rbd_is(int fd)
{
	bool is;

	pthread_mutex_lock(&reg_lock);
	is = handle_of(fd) != NULL;
	pthread_mutex_unlock(&reg_lock);
	return is;
}

int io_rbd_close(int fd)
{
	struct handle *h;

	pthread_mutex_lock(&reg_lock);
	h = handle_of(fd);
	if (!h) {
		pthread_mutex_unlock(&reg_lock);
		return -ENOENT;
	}
	atomic_fetch_add_explicit(&reg_gen, 1, memory_order_release);
	image_put(h->im);
	h->fd = -1;
	h->im = NULL;
	close(fd);
	pthread_mutex_unlock(&reg_lock);
	return 0;
}

/* The image behind fd with a reference the caller drops with
 * image_release(); NULL (-EBADF) when fd is not a stand-in. */
static struct image *image_acquire(int fd)
{
	struct handle *h;
	struct image *im = NULL;

	pthread_mutex_lock(&reg_lock);
	h = handle_of(fd);
	if (h) {
		im = h->im;
		im->refs++;
	}
	pthread_mutex_unlock(&reg_lock);
	return im;
}

static void image_release(struct image *im)
{
	pthread_mutex_lock(&reg_lock);
	image_put(im);
	pthread_mutex_unlock(&reg_lock);
}

int io_rbd_size(int fd, uint64_t *ret_bytes)
{
	struct image *im = image_acquire(fd);
	int r;

	if (!im)
		return -EBADF;
	r = rbd_get_size(im->img, ret_bytes);
	image_release(im);
	return r;
}

int io_rbd_identity(int fd, uint64_t *ret_dev, uint64_t *ret_ino)
{
	struct image *im = image_acquire(fd);

	if (!im)
		return -EBADF;
	*ret_dev = im->dev;
	*ret_ino = im->ino;
	image_release(im);
	return 0;
}

ssize_t io_rbd_sync(int fd, enum cw_io_op op, void *buf, size_t len, uint64_t off)
{
	struct image *im = image_acquire(fd);
	ssize_t r;

	if (!im)
		return -EBADF;
	if (op == CW_IO_READ)
		r = rbd_read(im->img, off, len, buf);
	else if (op == CW_IO_WRITE)
		r = im->read_only ? -EBADF : rbd_write(im->img, off, len, buf);
	else
		r = rbd_flush(im->img);
	image_release(im);
	return r;
}

/* rbd_write_zeroes, not rbd_discard: a discard may leave the partial
 * objects it covers as they were, and a punched range must read zeros. */
int io_rbd_punch(int fd, uint64_t off, uint64_t len)
{
	struct image *im = image_acquire(fd);
	ssize_t r;

	if (!im)
		return -EBADF;
	r = im->read_only ? -EBADF : rbd_write_zeroes(im->img, off, len, 0, 0);
	image_release(im);
	return r < 0 ? (int)r : 0;
}

int cw_io_rbd_address(int fd, char *buf, size_t len)
{
	struct image *im = image_acquire(fd);
	char *addrs = NULL;
	int r;

	if (!im)
		return -EBADF;
	r = rados_getaddrs(im->c->rados, &addrs);
	if (r == 0)
		r = snprintf(buf, len, "%s", addrs) < (int)len ? 0 : -ENAMETOOLONG;
	free(addrs);
	image_release(im);
	return r;
}

/* The exclusive lock's owner is whom librbd names by its address; a
 * shared or advisory lock (rbd lock add) is not the data path's. */
int cw_io_rbd_reclaim(int fd, const char *owner)
{
	struct image *im = image_acquire(fd);
	rbd_lock_mode_t mode;
	char *owners[4];
	size_t n = sizeof(owners) / sizeof(owners[0]);
	uint64_t features = 0;
	bool held = false;
	int r;

	if (!im)
		return -EBADF;
	r = rbd_get_features(im->img, &features);
	if (r == 0 && (features & RBD_FEATURE_EXCLUSIVE_LOCK))
		r = rbd_lock_get_owners(im->img, &mode, owners, &n);
	else if (r == 0)
		r = -ENOENT;	/* an image without the feature has no such lock */
	if (r == 0) {
		held = mode == RBD_LOCK_MODE_EXCLUSIVE && n == 1 && !strcmp(owners[0], owner);
		rbd_lock_get_owners_cleanup(owners, n);
	}
	if (r == 0 && held)
		r = rbd_lock_break(im->img, RBD_LOCK_MODE_EXCLUSIVE, owner);
	image_release(im);
	if (r == -ENOENT)
		return 0;	/* nobody holds it (any more) */
	return r < 0 ? r : held;
}

bool cw_io_rbd_supported(void)
{
	return lib_ready() == 0;
}

/* ---- the engine ---- */

struct rslot {
	struct rbd_engine *e;
	struct cw_io_req *req;
	struct image *im;
	rbd_completion_t comp;
	ssize_t ret;
	struct rslot *next;		/* on the finished list */
};

struct rbd_engine {
	struct cw_io_engine head;	/* first: the front end's view */
	/* 1 while the reaper sleeps (or is about to): a completion clears
	 * it and wakes the reaper.  seq_cst here and on the done list, so
	 * that the reaper sees the push or the callback sees the flag. */
	atomic_int sleeping;
	atomic_bool kicked;		/* cw_io_kick: the next or current wait ends */
	/* Callbacks between their push and their last look at the engine:
	 * it is freed only when none is (rbd_engine_free). */
	atomic_int in_callback;
	struct rslot *slots;
	unsigned *free_slots, n_free;
	_Atomic(struct rslot *) done;	/* pushed by librbd's threads */
	struct rslot *ready;		/* taken from done, oldest first */
	/* The last descriptor looked up, while reg_gen says it is valid. */
	int cached_fd;
	struct image *cached_im;
	uint_fast64_t cached_gen;
};

static struct rbd_engine *to_rbd(struct cw_io_engine *e)
{
	return (struct rbd_engine *)e;
}

static int rbd_engine_new(unsigned depth, struct cw_io_engine **ret_engine)
{
	struct rbd_engine *x = calloc(1, sizeof(*x));

	if (!x)
		return -ENOMEM;
	x->slots = calloc(depth, sizeof(*x->slots));
	x->free_slots = calloc(depth, sizeof(*x->free_slots));
	if (!x->slots || !x->free_slots) {
		free(x->slots);
		free(x->free_slots);
		free(x);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < depth; i++) {
		x->slots[i].e = x;
		x->free_slots[x->n_free++] = depth - 1 - i;
	}
	x->cached_fd = -1;
	atomic_init(&x->done, NULL);
	atomic_init(&x->sleeping, 0);
	atomic_init(&x->kicked, false);
	atomic_init(&x->in_callback, 0);
	*ret_engine = &x->head;
	return 0;
}

static void rbd_engine_free(struct cw_io_engine *e)
{
	struct rbd_engine *x = to_rbd(e);

	/* Every request was reaped, but the callback of the last may still
	 * be between its push and its wake-up. */
	while (atomic_load_explicit(&x->in_callback, memory_order_acquire))
		sched_yield();
	free(x->slots);
	free(x->free_slots);
	free(x);
}

/* Wakes the reaper or the owner's cw_io_wait if it sleeps. */
static void wake(struct rbd_engine *x)
{
	if (atomic_load_explicit(&x->sleeping, memory_order_seq_cst) &&
	    atomic_exchange_explicit(&x->sleeping, 0, memory_order_seq_cst))
		cw_futex_wake(&x->sleeping);
}

/* librbd's thread: the request is finished. */
static void rbd_complete(rbd_completion_t c, void *arg)
{
	struct rslot *s = arg;
	struct rbd_engine *x = s->e;
	struct rslot *head = atomic_load_explicit(&x->done, memory_order_relaxed);

	s->ret = rbd_aio_get_return_value(c);
	atomic_fetch_add_explicit(&x->in_callback, 1, memory_order_relaxed);
	do
		s->next = head;
	while (!atomic_compare_exchange_weak_explicit(&x->done, &head, s, memory_order_seq_cst,
						      memory_order_relaxed));
	wake(x);
	atomic_fetch_sub_explicit(&x->in_callback, 1, memory_order_release);
}

/* The image fd stands for; NULL: fd is not a stand-in. */
static struct image *engine_image(struct rbd_engine *x, int fd)
{
	uint_fast64_t gen = atomic_load_explicit(&reg_gen, memory_order_acquire);
	struct handle *h;

	if (fd == x->cached_fd && gen == x->cached_gen)
		return x->cached_im;
	pthread_mutex_lock(&reg_lock);
	h = handle_of(fd);
	x->cached_fd = h ? fd : -1;
	x->cached_im = h ? h->im : NULL;
	x->cached_gen = gen;
	pthread_mutex_unlock(&reg_lock);
	return x->cached_im;
}

/* Starts what is left of s's request. */
static int start(struct rslot *s)
{
	struct cw_io_req *q = s->req;
	void *buf;
	uint64_t off;
	size_t len = cw_io_req_next(q, &buf, &off);
	int r;

	r = rbd_aio_create_completion(s, rbd_complete, &s->comp);
	if (r < 0)
		return r;
	switch (q->op) {
	case CW_IO_READ:
		r = rbd_aio_read(s->im->img, off, len, buf, s->comp);
		break;
	case CW_IO_WRITE:
		r = s->im->read_only ? -EBADF : rbd_aio_write(s->im->img, off, len, buf, s->comp);
		break;
	case CW_IO_PUNCH:
		/* write-zeroes, as cw_io_punch: the range must read as zeros */
		r = s->im->read_only ? -EBADF
				     : rbd_aio_write_zeroes(s->im->img, q->off, q->len, s->comp, 0, 0);
		break;
	default:
		r = rbd_aio_flush(s->im->img, s->comp);
		break;
	}
	if (r < 0)
		rbd_aio_release(s->comp);
	return r;
}

static int rbd_submit(struct cw_io_engine *e, struct cw_io_req **reqs, unsigned n)
{
	struct rbd_engine *x = to_rbd(e);
	unsigned i;

	for (i = 0; i < n; i++) {
		unsigned k = x->free_slots[x->n_free - 1];
		struct rslot *s = &x->slots[k];
		int r;

		s->req = reqs[i];
		s->im = engine_image(x, reqs[i]->fd);
		r = s->im ? start(s) : -EBADF;
		if (r < 0) {
			if (i == 0)
				return r;
			break;
		}
		x->n_free--;
	}
	return (int)i;
}

/* Moves what librbd finished to the ready list, oldest first. */
static void take_done(struct rbd_engine *x)
{
	struct rslot *s = atomic_exchange_explicit(&x->done, NULL, memory_order_acquire), *rev = NULL;
	struct rslot **tail = &x->ready;

	while (s) {
		struct rslot *next = s->next;

		s->next = rev;
		rev = s;
		s = next;
	}
	while (*tail)
		tail = &(*tail)->next;
	*tail = rev;
}

/* Sleeps until a completion is pushed, or a kick came when kickable, or
 * deadline_ns (CLOCK_MONOTONIC, as the futex's absolute timeout takes it)
 * passes.  The flag goes up before the list (and kick) are looked at, and
 * wakers publish before they look at the flag, all seq_cst: one of the
 * two sides sees the other. */
static void wait_done(struct rbd_engine *x, int64_t deadline_ns, bool kickable)
{
	atomic_store_explicit(&x->sleeping, 1, memory_order_seq_cst);
	if (!atomic_load_explicit(&x->done, memory_order_seq_cst) &&
	    !(kickable && atomic_load_explicit(&x->kicked, memory_order_seq_cst)))
		cw_futex_wait_until(&x->sleeping, 1, deadline_ns);
	atomic_store_explicit(&x->sleeping, 0, memory_order_relaxed);
	if (kickable)
		atomic_store_explicit(&x->kicked, false, memory_order_relaxed);
}

/* Touches only the atomics: the thread that reaps may be at work. */
static void rbd_wait(struct cw_io_engine *e, int64_t deadline_ns)
{
	wait_done(to_rbd(e), deadline_ns, true);
}

static void rbd_kick(struct cw_io_engine *e)
{
	struct rbd_engine *x = to_rbd(e);

	atomic_store_explicit(&x->kicked, true, memory_order_seq_cst);
	wake(x);
}

static int rbd_reap(struct cw_io_engine *e, unsigned min_complete, int64_t deadline_ns,
		    struct cw_io_req **ret_reqs, unsigned max)
{
	struct rbd_engine *x = to_rbd(e);
	unsigned got = 0;

	for (;;) {
		take_done(x);
		while (x->ready && got < max) {
			struct rslot *s = x->ready;
			struct cw_io_req *q = s->req;
			int64_t res = s->ret;

			x->ready = s->next;
			rbd_aio_release(s->comp);
			if (q->op == CW_IO_WRITE && res == 0) {
				/* a write completes with 0, not its length */
				void *buf;
				uint64_t off;

				res = (int64_t)cw_io_req_next(q, &buf, &off);
			}
			if (!cw_io_req_account(q, res)) {
				int r = start(s);

				if (r == 0)
					continue;
				q->res = r;
			}
			x->free_slots[x->n_free++] = (unsigned)(s - x->slots);
			ret_reqs[got++] = q;
		}
		if (got >= min_complete || got == max || deadline_ns == CW_IO_POLL ||
		    (deadline_ns != CW_IO_FOREVER && cw_now_ns() >= deadline_ns))
			return (int)got;
		wait_done(x, deadline_ns, false);
	}
}

const struct cw_io_ops cw_io_rbd_ops = {
	.name = "rbd",
	.engine_new = rbd_engine_new,
	.engine_free = rbd_engine_free,
	.submit = rbd_submit,
	.reap = rbd_reap,
	.wait = rbd_wait,
	.kick = rbd_kick,
};

#else /* !HAVE_LIBRBD */

int io_rbd_open(const char *path, bool writable)
{
	struct io_rbd_spec sp;
	int r = io_rbd_spec_parse(path, &sp);

	(void)writable;
	return r < 0 ? r : -EPROTONOSUPPORT;
}

bool io_rbd_is(int fd)
{
	(void)fd;
	return false;
}

int io_rbd_close(int fd)
{
	(void)fd;
	return -ENOENT;
}

int io_rbd_size(int fd, uint64_t *ret_bytes)
{
	(void)fd;
	(void)ret_bytes;
	return -EBADF;
}

int io_rbd_identity(int fd, uint64_t *ret_dev, uint64_t *ret_ino)
{
	(void)fd;
	(void)ret_dev;
	(void)ret_ino;
	return -EBADF;
}

ssize_t io_rbd_sync(int fd, enum cw_io_op op, void *buf, size_t len, uint64_t off)
{
	(void)fd;
	(void)op;
	(void)buf;
	(void)len;
	(void)off;
	return -EBADF;
}

int io_rbd_punch(int fd, uint64_t off, uint64_t len)
{
	(void)fd;
	(void)off;
	(void)len;
	return -EBADF;
}

int cw_io_rbd_address(int fd, char *buf, size_t len)
{
	(void)fd;
	(void)buf;
	(void)len;
	return -EBADF;
}

int cw_io_rbd_reclaim(int fd, const char *owner)
{
	(void)fd;
	(void)owner;
	return -EBADF;
}

bool cw_io_rbd_supported(void)
{
	return false;
}

static int none_new(unsigned depth, struct cw_io_engine **ret_engine)
{
	(void)depth;
	(void)ret_engine;
	return -EPROTONOSUPPORT;
}

const struct cw_io_ops cw_io_rbd_ops = {
	.name = "rbd",
	.engine_new = none_new,
};

#endif

const struct io_dev_ops io_dev_rbd = {
	.name = "rbd",
	.claims_path = cw_io_path_is_rbd,
	.owns = io_rbd_is,
	.open = io_rbd_open,
	.close = io_rbd_close,
	.size = io_rbd_size,
	.identity = io_rbd_identity,
	.sync = io_rbd_sync,
	.punch = io_rbd_punch,
	.engine = CW_IO_RBD,
};
