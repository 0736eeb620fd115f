/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Request slots and reply memory.  A connection has max_inflight slots:
 * its reader takes one for a request (take_slot), gives it a buffer
 * (ensure_buf) and hands it to the back end (submit); once its reply is
 * sent it comes back (recycle).  Buffers stay with their slot up to a
 * size and are mappings of their own from a size on; the payload memory
 * in flight is bounded across connections (bytes_fit).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "common/util.h"
#include "daemon/nbd/nbd-internal.h"

/* Slot buffers up to this size stay allocated between requests (while
 * all kept buffers fit in half the reply memory); larger ones are
 * released so an idle connection does not pin 32 MiB a slot. */
#define BUF_KEEP_BYTES (1u << 20)
/* Slot buffers from this size on are mappings of their own, given back
 * whole when dropped: from malloc's arenas, a load's large buffers were
 * kept scattered there long after it (malloc_trim gives back no arena's
 * top but the main one's), and malloc's own threshold is set high for
 * librbd's sake (daemon/main.c). */
#define BUF_MAP_BYTES (256u << 10)
/* A reader waiting for reply memory that only others can free looks
 * again this often (nothing of its own comes back to wake it). */
#define MEMORY_RECHECK_NS (INT64_C(5) * 1000000)

/* What a request of bytes would take of the pool: what goes over the
 * connection's floor. */
static uint64_t pool_part(const struct conn *c, uint32_t bytes)
{
	uint64_t own = atomic_load_explicit(&c->inflight_bytes, memory_order_seq_cst);
	uint64_t floor = c->srv->floor_bytes;

	if (own + bytes <= floor)
		return 0;
	return own >= floor ? bytes : own + bytes - floor;
}

/* Bound the payload memory in flight.  Half of the budget is split
 * evenly among max_connections: a floor every connection may always
 * use, whatever the others hold.  The other half, the pool, goes to
 * whoever asks, each connection within budget / connections open.  So
 * clients that read much and take no replies (until the stall timeout
 * drops them) hold at most the pool: the others keep their floor, and
 * their requests in flight with it.  A connection with nothing in
 * flight gets the whole pool if nobody holds any of it, so a request
 * larger than floor and share still runs. */
static bool bytes_fit(struct conn *c, uint32_t bytes)
{
	struct nbdsrv *srv = c->srv;
	uint64_t part = pool_part(c, bytes), used, share;
	unsigned n = atomic_load_explicit(&srv->n_active, memory_order_relaxed);

	if (part == 0)
		return true;
	used = atomic_load_explicit(&srv->pool_used, memory_order_seq_cst);
	if (used == 0 && atomic_load_explicit(&c->inflight, memory_order_seq_cst) == 0)
		return true;
	share = CW_MAX(srv->cfg.reply_memory_bytes / (n ? n : 1), srv->floor_bytes);
	return atomic_load_explicit(&c->inflight_bytes, memory_order_seq_cst) + bytes <= share &&
	       used + part <= srv->pool_bytes;
}

static bool reader_ready(struct conn *c)
{
	return (c->free_local || c->free_fresh ||
		atomic_load_explicit(&c->free_shared, memory_order_seq_cst)) &&
	       bytes_fit(c, c->want_bytes);
}

/* A slot buffer of cap bytes (a multiple of the page size), aligned to
 * BUF_ALIGN; NULL without memory. */
static void *buf_alloc(size_t cap)
{
	void *p;

	if (cap >= BUF_MAP_BYTES) {
		p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		return p == MAP_FAILED ? NULL : p;
	}
	return posix_memalign(&p, BUF_ALIGN, cap) == 0 ? p : NULL;
}

static void buf_free(void *p, size_t cap)
{
	if (p && cap >= BUF_MAP_BYTES)
		munmap(p, cap);
	else
		free(p);
}

static void drop_buf(struct nbdsrv *srv, struct slot *s)
{
	atomic_fetch_sub_explicit(&srv->buf_bytes, s->buf_cap, memory_order_relaxed);
	buf_free(s->io.buf, s->buf_cap);
	s->io.buf = NULL;
	s->buf_cap = 0;
}

int conn_setup_slots(struct conn *c)
{
	unsigned i;

	c->n_slots = c->srv->cfg.max_inflight;
	c->slots = calloc(c->n_slots, sizeof(*c->slots));
	if (!c->slots)
		return -ENOMEM;
	for (i = 0; i < c->n_slots; i++) {
		c->slots[i].conn = c;
		c->slots[i].next = i + 1 < c->n_slots ? &c->slots[i + 1] : NULL;
	}
	c->free_fresh = c->slots;
	return 0;
}

void conn_drop_bufs(struct conn *c)
{
	unsigned i;

	for (i = 0; i < c->n_slots; i++)
		drop_buf(c->srv, &c->slots[i]);
}

struct slot *take_slot(struct conn *c, uint32_t bytes)
{
	struct slot *s;
	int64_t t0 = 0;

	c->want_bytes = bytes;
	c->park_ns = 0;
	for (;;) {
		if (!c->free_local)
			c->free_local = atomic_exchange_explicit(&c->free_shared, NULL,
								 memory_order_seq_cst);
		/* A slot used before, while there is one: taking the never
		 * used ones in turn gave each of a connection's 64 slots a
		 * buffer; 13 streams of 256 KiB blocks then held more than
		 * half the reply memory, every recycled buffer was dropped,
		 * and every request mapped a new one, whose pages the
		 * dispatcher faulted in during its copy while writers unmapped
		 * others (the process's mmap lock): 256 KiB reads from tmpfs
		 * took 1-5 ms instead of 0.1, and streams missed deadlines
		 * (class model). */
		if (!c->free_local && c->free_fresh) {
			c->free_local = c->free_fresh;
			c->free_fresh = c->free_fresh->next;
			c->free_local->next = NULL;
		}
		if (c->free_local && bytes_fit(c, bytes))
			break;
		if (atomic_load(&c->send_broken))
			return NULL;
		/* a real-time request says what held it (its miss's timeline) */
		if (c->rd_fd >= 0) {
			c->park_memory = c->free_local || c->free_fresh;
			if (!t0)
				t0 = cw_now_ns();
		}
		flush_wake(c);
		/* Memory others hold comes back with no word to this reader. */
		park_unless(&c->reader_park, reader_ready(c),
			    c->free_local && atomic_load(&c->srv->pool_used) ? MEMORY_RECHECK_NS : -1);
	}
	if (t0)
		c->park_ns = cw_now_ns() - t0;
	s = c->free_local;
	c->free_local = s->next;
	s->pool_bytes = (uint32_t)pool_part(c, bytes);
	atomic_fetch_add_explicit(&c->srv->pool_used, s->pool_bytes, memory_order_seq_cst);
	atomic_fetch_add_explicit(&c->inflight, 1, memory_order_seq_cst);
	atomic_fetch_add_explicit(&c->inflight_bytes, bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->srv->payload_bytes, bytes, memory_order_relaxed);
	return s;
}

int ensure_buf(struct slot *s, uint32_t length)
{
	struct nbdsrv *srv = s->conn->srv;
	void *p;
	size_t cap;

	if (s->buf_cap >= length)
		return 0;
	cap = ((size_t)length + 65535) & ~(size_t)65535;
	p = buf_alloc(cap);
	if (!p)
		return -ENOMEM;
	drop_buf(srv, s);
	s->io.buf = p;
	s->buf_cap = (uint32_t)cap;
	atomic_fetch_add_explicit(&srv->buf_bytes, cap, memory_order_relaxed);
	return 0;
}

int submit(struct conn *c, struct slot *s)
{
	const struct nbdsrv_backend_ops *ops = c->exp->e.ops;
	void *b = c->exp->e.backend;

	switch (s->io.op) {
	case NBDSRV_IO_READ: return ops->pread(b, &s->io);
	case NBDSRV_IO_WRITE: return ops->pwrite(b, &s->io);
	case NBDSRV_IO_FLUSH: return ops->flush(b, &s->io);
	case NBDSRV_IO_TRIM: return ops->trim(b, &s->io);
	case NBDSRV_IO_ZERO: return ops->zero(b, &s->io);
	case NBDSRV_IO_CACHE: return ops->cache(b, &s->io);
	case NBDSRV_IO_BLOCK_STATUS: return ops->block_status(b, &s->io);
	}
	return -EINVAL;
}

/* Returns a slot to the reader. */
void recycle(struct conn *c, struct slot *s)
{
	struct nbdsrv *srv = c->srv;
	struct slot *old;
	uint32_t bytes = s->io.op == NBDSRV_IO_READ || s->io.op == NBDSRV_IO_WRITE ? s->io.length : 0;

	if (s->buf_cap > BUF_KEEP_BYTES ||
	    atomic_load_explicit(&srv->buf_bytes, memory_order_relaxed) >
	    srv->cfg.reply_memory_bytes / 2)
		drop_buf(srv, s);
	atomic_fetch_sub_explicit(&c->inflight_bytes, bytes, memory_order_relaxed);
	atomic_fetch_sub_explicit(&srv->payload_bytes, bytes, memory_order_relaxed);
	atomic_fetch_sub_explicit(&srv->pool_used, s->pool_bytes, memory_order_seq_cst);
	s->pool_bytes = 0;
	push(&c->free_shared, s, &old);
	atomic_fetch_sub_explicit(&c->inflight, 1, memory_order_seq_cst);
	park_wake(&c->reader_park);
}
