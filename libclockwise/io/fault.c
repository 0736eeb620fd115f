/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The fault-injecting back end (clockwise/fault.h), after SQLite's crash
 * simulator (src/test6.c): requests pass to an inner engine unless one is
 * to fail or tear, and a shadow of every write no fsync covers yet makes a
 * power cut possible.
 *
 * The shadow, per file (by device and inode, shared by every fault engine
 * of the process under one lock, so the lanes of one disk see one file):
 *   - base pages: for each 4 KiB page an unsynced write touches, the bytes
 *     it held when no unsynced write touched it, read before the first
 *     such write is handed to the inner engine;
 *   - a log of the unsynced writes, each with a copy of its data: those in
 *     flight, and those completed in completion order (seq).
 * An fsync submitted when seq writes had completed covers exactly those
 * (fdatasync covers what completed before it); when it completes without
 * error, they are folded into the base pages in seq order and leave the
 * log, and a page no logged write touches any more is dropped.
 *
 * Invariant: for every page of the file, what the disk would keep after a
 * power failure now is its base page (or, without one, its current bytes)
 * with any subset of the logged writes on top.  A cut picks the empty
 * subset (or with tear a random one, each write whole, cut short at a
 * sector, or not at all): it writes the base pages back, syncs, and kills
 * the process.  Writes still in the inner engine may land after that, as
 * they may on a real disk: they were never acknowledged.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <clockwise/fault.h>
#include "common/util.h"
#include "io/io-internal.h"

#define PAGE 4096u
#define SECTOR 512u
#define NBUCKETS 4096u

struct fpage {
	uint64_t idx;
	uint32_t len;			/* bytes of base (short at the file's end) */
	unsigned refs;			/* logged writes touching it */
	uint8_t *base;
	struct fpage *next;
};

struct fwrite {
	uint64_t off, len, seq;		/* seq: 0 while in flight */
	uint8_t *data;
	struct fwrite *prev, *next;	/* the file's in-flight or completed list */
};

struct flist {
	struct fwrite *head, *tail;
};

struct ffile {
	uint64_t dev, ino;
	int fd;				/* its own buffered descriptor; -1: not shadowed */
	uint64_t nreq, nwrite, nfsync, nrange;
	uint64_t seq;			/* writes completed so far */
	struct fpage *pages[NBUCKETS];
	struct flist inflight, done;
	struct ffile *next;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ffile *g_files;
static uint64_t g_injected;

struct fslot {
	struct cw_io_req *req;		/* the caller's */
	struct cw_io_req inner;
	struct ffile *f;
	struct fwrite *w;
	uint64_t fseq;			/* an fsync: the writes it covers */
	int64_t fail;			/* a torn write's result */
	int64_t due;			/* delay_us: not handed back before */
};

struct fault_engine {
	struct cw_io_engine head;	/* first: the front end's view */
	struct cw_io_engine *inner;
	struct cw_io_fault_opts o;
	struct fslot *slots;
	unsigned *free_slots, n_free;
	struct cw_io_fifo done;		/* failed at submission */
	struct cw_io_req **scratch;
	/* delay_us: slots whose inner request is done, not yet due */
	unsigned *held, n_held;
};

/* ---- the shadow (under g_lock) ---- */

static void list_del(struct flist *l, struct fwrite *w)
{
	*(w->prev ? &w->prev->next : &l->head) = w->next;
	*(w->next ? &w->next->prev : &l->tail) = w->prev;
	w->prev = w->next = NULL;
}

static void list_add_tail(struct flist *l, struct fwrite *w)
{
	w->prev = l->tail;
	w->next = NULL;
	*(l->tail ? &l->tail->next : &l->head) = w;
	l->tail = w;
}

static struct fpage **page_slot(struct ffile *f, uint64_t idx)
{
	struct fpage **p = &f->pages[idx % NBUCKETS];

	while (*p && (*p)->idx != idx)
		p = &(*p)->next;
	return p;
}

static struct ffile *file_of(int fd)
{
	struct ffile *f;
	struct stat st;
	char path[64];
	int flags;

	if (io_dev_of(fd) || fstat(fd, &st) < 0)
		return NULL;
	for (f = g_files; f; f = f->next)
		if (f->dev == st.st_dev && f->ino == st.st_ino)
			return f;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	/* A descriptor of its own, direct where fd is: a buffered read
	 * beside direct writes may find pages the page cache kept from
	 * before them, and base pages must be what the disk holds.  Base
	 * pages and logged writes are aligned to a page for it. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	flags = fcntl(fd, F_GETFL);
	f->fd = open(path, O_RDWR | O_CLOEXEC | (flags > 0 ? flags & O_DIRECT : 0));
	f->next = g_files;
	g_files = f;
	return f;
}

static void page_unref(struct ffile *f, uint64_t idx)
{
	struct fpage **s = page_slot(f, idx), *p = *s;

	if (p && --p->refs == 0) {
		*s = p->next;
		free(p->base);
		free(p);
	}
}

static void write_free(struct ffile *f, struct fwrite *w)
{
	for (uint64_t i = w->off / PAGE; w->len && i <= (w->off + w->len - 1) / PAGE; i++)
		page_unref(f, i);
	free(w->data);
	free(w);
}

/* Holds the base of pages [first, first + n), none of them held yet,
 * each with one reference: read in one pread, so that a write of many
 * pages costs the disk one read, not one a page (on a disk that counts
 * requests, a throttled or a real one, each is one).  -ENOMEM holds
 * none. */
static int hold_bases(struct ffile *f, uint64_t first, uint64_t n)
{
	struct fpage **ps = calloc(n, sizeof(*ps));
	uint8_t *buf = NULL;
	ssize_t got;
	uint64_t k;

	if (!ps || posix_memalign((void **)&buf, PAGE, n * PAGE) != 0) {
		free(ps);
		return -ENOMEM;
	}
	for (k = 0; k < n; k++) {
		ps[k] = calloc(1, sizeof(**ps));
		if (!ps[k] || posix_memalign((void **)&ps[k]->base, PAGE, PAGE) != 0)
			break;
	}
	if (k < n) {
		for (uint64_t j = 0; j <= k && j < n; j++) {
			if (ps[j])
				free(ps[j]->base);
			free(ps[j]);
		}
		free(ps);
		free(buf);
		return -ENOMEM;
	}
	got = pread(f->fd, buf, n * PAGE, (off_t)(first * PAGE));
	for (k = 0; k < n; k++) {
		struct fpage *p = ps[k];
		/* bytes of this page the file has (short at its end, 0 after
		 * an error) */
		uint64_t have = got > (ssize_t)(k * PAGE) ? CW_MIN((uint64_t)got - k * PAGE, PAGE) : 0;

		memcpy(p->base, buf + k * PAGE, have);
		memset(p->base + have, 0, PAGE - have);
		p->idx = first + k;
		p->len = (uint32_t)have;
		p->refs = 1;
		*page_slot(f, first + k) = p;
	}
	free(ps);
	free(buf);
	return 0;
}

/* Logs a write of len bytes of buf at off, reading the base of each page
 * it is the first to touch (each run of such pages in one read).  NULL
 * when out of memory (the write then goes unshadowed, as if synced). */
static struct fwrite *log_write(struct ffile *f, const void *buf, uint64_t off, uint64_t len)
{
	struct fwrite *w = calloc(1, sizeof(*w));
	uint64_t i, last = len ? (off + len - 1) / PAGE : 0;

	if (!w || posix_memalign((void **)&w->data, PAGE, len ? len : 1) != 0) {
		free(w);
		return NULL;
	}
	memcpy(w->data, buf, len);
	w->off = off;
	w->len = len;
	for (i = off / PAGE; len && i <= last;) {
		struct fpage *p = *page_slot(f, i);
		uint64_t run = 1;

		if (p) {
			p->refs++;
			i++;
			continue;
		}
		while (i + run <= last && !*page_slot(f, i + run))
			run++;
		if (hold_bases(f, i, run) < 0) {
			w->len = i * PAGE > off ? i * PAGE - off : 0;
			write_free(f, w);
			return NULL;
		}
		i += run;
	}
	list_add_tail(&f->inflight, w);
	return w;
}

/* Folds the bytes of w into the base pages it touches. */
static void fold(struct ffile *f, const struct fwrite *w)
{
	for (uint64_t i = w->off / PAGE; w->len && i <= (w->off + w->len - 1) / PAGE; i++) {
		struct fpage *p = *page_slot(f, i);
		uint64_t lo = CW_MAX(w->off, i * PAGE), hi = CW_MIN(w->off + w->len, (i + 1) * PAGE);

		if (!p)
			continue;
		memcpy(p->base + (lo - i * PAGE), w->data + (lo - w->off), hi - lo);
		p->len = CW_MAX(p->len, (uint32_t)(hi - i * PAGE));
	}
}

/* An fsync that covers the first fseq completed writes succeeded. */
static void synced(struct ffile *f, uint64_t fseq)
{
	struct fwrite *w;

	while ((w = f->done.head) && w->seq <= fseq) {
		list_del(&f->done, w);
		fold(f, w);
		write_free(f, w);
	}
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Writes buf back at off: directly where it can, else (a length the
 * direct descriptor cannot take) through a buffered one, synced. */
static int put(struct ffile *f, const void *buf, uint64_t len, uint64_t off)
{
	char path[64];
	int fd, r = 0;

	if (pwrite(f->fd, buf, len, (off_t)off) == (ssize_t)len)
		return 0;
	if (errno != EINVAL)
		return -errno;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", f->fd);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len || fdatasync(fd) < 0)
		r = -EIO;
	close(fd);
	return r;
}

/* The cut for one file: the base pages back, then with tear some of the
 * completed writes again, synced; the log is emptied (the writes still in
 * flight are forgotten, they are as good as lost or landed). */
static int cut_file(struct ffile *f, bool tear, uint64_t *seed)
{
	int r = 0, e;

	if (f->fd < 0)
		return 0;
	for (unsigned b = 0; b < NBUCKETS; b++)
		for (struct fpage *p = f->pages[b]; p; p = p->next)
			if (p->len && (e = put(f, p->base, p->len, p->idx * PAGE)) < 0)
				r = e;
	for (struct fwrite *w = f->done.head; tear && w; w = w->next) {
		uint64_t how = rnd(seed) % 3, len = w->len;

		if (how == 2)
			continue;
		if (how == 1)
			len = rnd(seed) % (len / SECTOR + 1) * SECTOR;
		if (len && (e = put(f, w->data, len, w->off)) < 0)
			r = e;
	}
	if (fdatasync(f->fd) < 0)
		r = -errno;
	for (struct flist *l = &f->done; l; l = l == &f->done ? &f->inflight : NULL)
		while (l->head) {
			struct fwrite *w = l->head;

			list_del(l, w);
			write_free(f, w);
		}
	return r;
}

static int cut_all(bool tear, uint64_t seed)
{
	int r = 0, e;

	if (!seed)
		seed = 0x9e3779b97f4a7c15ull;
	for (struct ffile *f = g_files; f; f = f->next)
		if ((e = cut_file(f, tear, &seed)) < 0)
			r = e;
	return r;
}

int cw_io_fault_cut(bool tear, uint64_t seed)
{
	int r;

	pthread_mutex_lock(&g_lock);
	r = cut_all(tear, seed);
	pthread_mutex_unlock(&g_lock);
	return r;
}

/* The power fails: what no fsync covers goes, and so does the process.
 * The lock stays held: no request of another thread gets further. */
static _Noreturn void power_cut(const struct cw_io_fault_opts *o)
{
	cut_all(o->cut_tear, o->seed);
	kill(getpid(), SIGKILL);
	for (;;)
		pause();
}

void cw_io_fault_stats(struct cw_io_fault_stats *ret)
{
	*ret = (struct cw_io_fault_stats){ 0 };
	pthread_mutex_lock(&g_lock);
	ret->injected = g_injected;
	for (struct ffile *f = g_files; f; f = f->next)
		for (struct flist *l = &f->done; l; l = l == &f->done ? &f->inflight : NULL)
			for (struct fwrite *w = l->head; w; w = w->next) {
				ret->unsynced_writes++;
				ret->unsynced_bytes += w->len;
			}
	pthread_mutex_unlock(&g_lock);
}

/* ---- options ---- */

void cw_io_fault_opts_init(struct cw_io_fault_opts *o)
{
	*o = (struct cw_io_fault_opts){ .size = sizeof(*o) };
}

static int parse_size(const char *s, const char **ret_end, uint64_t *ret)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (*s < '0' || *s > '9')
		return -EINVAL;
	v = strtoull(s, &end, 0);
	if (errno)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'M': v <<= 20; end++; break;
	case 'G': v <<= 30; end++; break;
	}
	*ret = v;
	*ret_end = end;
	return 0;
}

int cw_io_fault_parse(const char *spec, struct cw_io_fault_opts *o, char *why, size_t why_len)
{
	static const struct {
		const char *name;
		size_t at;
	} nums[] = {
		{ "fail", offsetof(struct cw_io_fault_opts, fail_nth) },
		{ "fail-write", offsetof(struct cw_io_fault_opts, fail_write) },
		{ "fail-fsync", offsetof(struct cw_io_fault_opts, fail_fsync) },
		{ "tear-write", offsetof(struct cw_io_fault_opts, tear_write) },
		{ "fail-count", offsetof(struct cw_io_fault_opts, fail_count) },
		{ "cut-write", offsetof(struct cw_io_fault_opts, cut_write) },
		{ "seed", offsetof(struct cw_io_fault_opts, seed) },
		{ "delay-us", offsetof(struct cw_io_fault_opts, delay_us) },
	};
	const char *s = spec;

	if (!spec || !o)
		return -EINVAL;
	cw_io_fault_opts_init(o);
	while (*s) {
		size_t klen = strcspn(s, "=,");
		const char *v = s[klen] == '=' ? s + klen + 1 : NULL, *end = NULL;
		size_t vlen = v ? strcspn(v, ",") : 0;
		bool ok = false;

		if (!v)
			goto bad;
		for (size_t i = 0; i < CW_ARRAY_SIZE(nums) && !ok; i++)
			if (strlen(nums[i].name) == klen && !strncmp(s, nums[i].name, klen)) {
				if (parse_size(v, &end, (uint64_t *)((char *)o + nums[i].at)) < 0)
					goto bad;
				ok = true;
			}
		if (!ok && klen == 10 && !strncmp(s, "fail-range", klen)) {
			if (parse_size(v, &end, &o->fail_off) < 0 || *end != '+' ||
			    parse_size(end + 1, &end, &o->fail_len) < 0 || o->fail_len == 0)
				goto bad;
			ok = true;
		}
		if (!ok && ((klen == 8 && !strncmp(s, "cut-file", klen)) ||
			    (klen == 9 && !strncmp(s, "fail-file", klen)))) {
			char *path = klen == 8 ? o->cut_file : o->fail_file;

			if (vlen == 0 || vlen >= sizeof(o->cut_file))
				goto bad;
			memcpy(path, v, vlen);
			path[vlen] = '\0';
			end = v + vlen;
			ok = true;
		}
		if (!ok && klen == 3 && !strncmp(s, "cut", klen)) {
			if (vlen == 4 && !strncmp(v, "drop", 4))
				o->cut_tear = false;
			else if (vlen == 4 && !strncmp(v, "tear", 4))
				o->cut_tear = true;
			else
				goto bad;
			end = v + vlen;
			ok = true;
		}
		if (!ok || end != v + vlen)
			goto bad;
		s = v + vlen;
		if (*s == ',')
			s++;
	}
	return 0;
bad:
	if (why && why_len)
		snprintf(why, why_len, "bad fault setting at \"%.*s\"; expected fail=N, "
			 "fail-write=N, fail-fsync=N, tear-write=N, fail-range=OFF+LEN, "
			 "fail-count=N, cut-write=N, cut-file=PATH, cut=drop|tear, seed=N, "
			 "delay-us=N or fail-file=PATH",
			 (int)strcspn(s, ","), s);
	return -EINVAL;
}

/* ---- the engine ---- */

static struct fault_engine *to_fault(struct cw_io_engine *e)
{
	return (struct fault_engine *)e;
}

static void fault_free(struct cw_io_engine *e)
{
	struct fault_engine *x = to_fault(e);

	cw_io_engine_free(x->inner);
	free(x->slots);
	free(x->free_slots);
	free(x->done.q);
	free(x->scratch);
	free(x->held);
	free(x);
}

static bool touches(const struct cw_io_fault_opts *o, const struct cw_io_req *q)
{
	return o->fail_len && cw_io_op_moves_data(q->op) && q->off < o->fail_off + o->fail_len &&
	       o->fail_off < q->off + q->len;
}

/* Under g_lock: counts q against f and says what becomes of it: 0 passes,
 * -EIO fails at once, 1 is torn. */
static int decide(struct fault_engine *x, struct ffile *f, const struct cw_io_req *q)
{
	const struct cw_io_fault_opts *o = &x->o;
	bool w = q->op == CW_IO_WRITE;

	if (o->cut_file[0] && access(o->cut_file, F_OK) == 0)
		power_cut(o);
	f->nreq++;
	f->nwrite += w;
	f->nfsync += q->op == CW_IO_FSYNC;
	if (w && f->nwrite == o->cut_write)
		power_cut(o);
	if (f->nreq == o->fail_nth || (w && f->nwrite == o->fail_write) ||
	    (o->fail_file[0] && access(o->fail_file, F_OK) == 0) ||
	    (q->op == CW_IO_FSYNC && f->nfsync == o->fail_fsync) ||
	    (touches(o, q) && (!o->fail_count || f->nrange++ < o->fail_count)))
		return -EIO;
	if (w && f->nwrite == o->tear_write)
		return q->len / 2 / SECTOR ? 1 : -EIO;
	return 0;
}

static int fault_submit(struct cw_io_engine *e, struct cw_io_req **reqs, unsigned n)
{
	struct fault_engine *x = to_fault(e);
	unsigned i;

	for (i = 0; i < n; i++) {
		struct cw_io_req *q = reqs[i], *in;
		struct fslot *s = &x->slots[x->free_slots[x->n_free - 1]];
		struct ffile *f;
		int what = 0, r;

		*s = (struct fslot){ .req = q };
		if (x->o.delay_us)
			s->due = cw_now_ns() + (int64_t)(x->o.delay_us * 1000);
		s->inner = (struct cw_io_req){ .fd = q->fd, .op = q->op, .buf = q->buf,
					       .len = q->len, .off = q->off, .user = s };
		pthread_mutex_lock(&g_lock);
		f = file_of(q->fd);
		if (f)
			what = decide(x, f, q);
		if (what < 0) {
			g_injected++;
			pthread_mutex_unlock(&g_lock);
			q->res = what;
			cw_io_fifo_push(&x->done, e->depth, q);
			continue;
		}
		if (what == 1) {
			g_injected++;
			s->inner.len = q->len / 2 / SECTOR * SECTOR;
			s->fail = -EIO;
		}
		if (f && f->fd >= 0 && q->op == CW_IO_WRITE)
			s->w = log_write(f, q->buf, q->off, s->inner.len);
		if (f && q->op == CW_IO_FSYNC)
			s->fseq = f->seq;
		s->f = f;
		pthread_mutex_unlock(&g_lock);
		in = &s->inner;
		r = cw_io_submit(x->inner, &in, 1);
		if (r <= 0) {
			pthread_mutex_lock(&g_lock);
			if (s->w) {
				list_del(&f->inflight, s->w);
				write_free(f, s->w);
			}
			pthread_mutex_unlock(&g_lock);
			if (i == 0)
				return r < 0 ? r : -EAGAIN;
			break;
		}
		x->n_free--;
	}
	return (int)i;
}

/* Under g_lock: an inner request ended with res. */
static void ended(struct fslot *s, int64_t res)
{
	struct ffile *f = s->f;

	if (!f)
		return;
	if (s->w) {
		list_del(&f->inflight, s->w);
		s->w->seq = ++f->seq;
		list_add_tail(&f->done, s->w);
	}
	if (s->req->op == CW_IO_FSYNC && res == 0)
		synced(f, s->fseq);
}

/* Held slots that are due by now go to ret (up to max); returns how many,
 * and the earliest due of those left in *ret_next (INT64_MAX: none). */
static unsigned release_due(struct fault_engine *x, int64_t now, struct cw_io_req **ret,
			    unsigned max, int64_t *ret_next)
{
	unsigned got = 0, i = 0;

	*ret_next = INT64_MAX;
	while (i < x->n_held) {
		struct fslot *s = &x->slots[x->held[i]];

		if (s->due > now || got == max) {
			*ret_next = CW_MIN(*ret_next, s->due);
			i++;
			continue;
		}
		ret[got++] = s->req;
		x->free_slots[x->n_free++] = x->held[i];
		x->held[i] = x->held[--x->n_held];
	}
	return got;
}

static int fault_reap(struct cw_io_engine *e, unsigned min_complete, int64_t deadline_ns,
		      struct cw_io_req **ret_reqs, unsigned max)
{
	struct fault_engine *x = to_fault(e);
	unsigned got = cw_io_fifo_pop(&x->done, e->depth, ret_reqs, max), inner_n;
	int64_t timeout_ns = 0, now = cw_now_ns(), next;
	int k;

	for (;;) {
		got += release_due(x, now, ret_reqs + got, max - got, &next);
		inner_n = cw_io_inflight(x->inner);
		if (got == max || (inner_n == 0 && next == INT64_MAX))
			return (int)got;
		timeout_ns = 0;
		if (got < min_complete) {
			int64_t until = next;

			if (deadline_ns != CW_IO_FOREVER)
				until = CW_MIN(until, deadline_ns == CW_IO_POLL ? now : deadline_ns);
			timeout_ns = until == INT64_MAX ? -1 : CW_MAX(until - now, (int64_t)0);
		}
		if (inner_n == 0) {
			/* only held ones: sleep until the first is due */
			struct timespec ts = { timeout_ns / CW_NS_PER_S, timeout_ns % CW_NS_PER_S };

			if (timeout_ns <= 0)
				return (int)got;
			nanosleep(&ts, NULL);
			now = cw_now_ns();
			continue;
		}
		k = cw_io_reap(x->inner, got < min_complete && next == INT64_MAX ?
				       CW_MIN(min_complete - got, inner_n) : timeout_ns ? 1 : 0,
			       timeout_ns, x->scratch, max - got);
		if (k < 0)
			return got ? (int)got : k;
		now = cw_now_ns();
		pthread_mutex_lock(&g_lock);
		for (int i = 0; i < k; i++) {
			struct fslot *s = x->scratch[i]->user;

			ended(s, s->inner.res);
			s->req->res = s->inner.res < 0 ? s->inner.res :
				      s->fail ? s->fail : s->inner.res;
			s->req->disk_ns = s->inner.disk_ns;	/* an emulator's, below */
			if (s->due > now) {
				x->held[x->n_held++] = (unsigned)(s - x->slots);
				continue;
			}
			ret_reqs[got++] = s->req;
			x->free_slots[x->n_free++] = (unsigned)(s - x->slots);
		}
		pthread_mutex_unlock(&g_lock);
		if (got >= min_complete || timeout_ns == 0)
			return (int)got;
	}
}

static void fault_wait(struct cw_io_engine *e, int64_t deadline_ns)
{
	struct fault_engine *x = to_fault(e);
	int64_t now = cw_now_ns(), next = INT64_MAX;

	/* a held request is due at its time: no later than that */
	for (unsigned i = 0; i < x->n_held; i++)
		next = CW_MIN(next, x->slots[x->held[i]].due);
	if (next != INT64_MAX)
		deadline_ns = deadline_ns == CW_IO_FOREVER ? next : CW_MIN(deadline_ns, next);
	cw_io_wait(x->inner, deadline_ns == CW_IO_FOREVER ? -1 :
			     CW_MAX(deadline_ns - now, (int64_t)1));
}

static void fault_kick(struct cw_io_engine *e)
{
	cw_io_kick(to_fault(e)->inner);
}

static const struct cw_io_ops fault_ops = {
	.name = "fault",
	.engine_free = fault_free,
	.submit = fault_submit,
	.reap = fault_reap,
};

/* For an inner engine whose completions can be waited for. */
static const struct cw_io_ops fault_wait_ops = {
	.name = "fault",
	.engine_free = fault_free,
	.submit = fault_submit,
	.reap = fault_reap,
	.wait = fault_wait,
	.kick = fault_kick,
};

int cw_io_fault_new(struct cw_io_engine *inner, const struct cw_io_fault_opts *o,
		    struct cw_io_engine **ret)
{
	struct fault_engine *x;
	unsigned depth;

	if (!inner || !ret || (o && o->size < sizeof(*o))) {
		cw_io_engine_free(inner);
		return -EINVAL;
	}
	depth = inner->depth;
	x = calloc(1, sizeof(*x));
	if (x) {
		x->inner = inner;
		x->slots = calloc(depth, sizeof(*x->slots));
		x->free_slots = calloc(depth, sizeof(*x->free_slots));
		x->done.q = calloc(depth, sizeof(*x->done.q));
		x->scratch = calloc(depth, sizeof(*x->scratch));
		x->held = calloc(depth, sizeof(*x->held));
	}
	if (!x || !x->slots || !x->free_slots || !x->done.q || !x->scratch || !x->held) {
		if (x)
			fault_free(&x->head);
		else
			cw_io_engine_free(inner);
		return -ENOMEM;
	}
	if (o)
		x->o = *o;
	else
		cw_io_fault_opts_init(&x->o);
	for (unsigned i = 0; i < depth; i++)
		x->free_slots[x->n_free++] = depth - 1 - i;
	x->head.ops = cw_io_can_wait(inner) ? &fault_wait_ops : &fault_ops;
	x->head.depth = depth;
	x->head.inflight = 0;
	*ret = &x->head;
	return 0;
}
