/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: clockwised's data path (daemon/path/pool-backend.c) on a real
 * pool of disk files on tmpfs (the memory I/O engine), served by the real
 * NBD server and driven by libnbd.  A tap on the end of a request
 * (preq_finish, wrapped at link time: the tap then ends it as usual)
 * shows each request's pieces as the dispatchers finished them.  Pieces
 * follow the partition's map and end where a disk run ends, at the BE
 * piece limit of an HDD for best effort and at the zero chunk for
 * WRITE_ZEROES, and the data lands where the map says; SSD pieces spread
 * over the disk's lanes; FUA adds one flush per disk written; requests in
 * a bound reservation's range and time span are RT with the per-disk T and
 * C, others BE.  The admission state's events: a reservation admitted or
 * released posts each of its disks' new plan, with the disk's stream ids,
 * to the disk's first lane, and the data path takes or drops the
 * reservation; a disk with a stream before the dispatchers start starts
 * under cw_sched; a disk the data path has not opened ignores the events;
 * a new model reaches the disk; exports bind by reservation id or by the
 * name a start-up reservation was given for; a write to a block being
 * moved is repeated on its destination; a mirrored write is one thick
 * booking, its copies' pieces in the same slots, a recording stream's as
 * well as best effort's.  cwsim's split (tools/sim/path.c,
 * the one its engine runs) of a table of requests on the same pool gives
 * the pieces the daemon booked for them.
 */
#include "daemon/path/pool-backend.c"

#include <libnbd.h>

#include "cwtest.h"
#include "datapath.h"
#include "sim/sim.h"

#define KIB (UINT64_C(1) << 10)
#define BS (4 * MIB)		/* pool block: above the zero chunk and the HDD BE piece */
#define DISK_BLOCKS 32
#define MEDIA_BYTES (64 * MIB)	/* striped over the two HDDs */
#define FAST_BYTES (32 * MIB)	/* on the SSD, which has two lanes */

static struct dp D;
static struct nbdsrv *srv;
static char sock[200];
static struct pbx *media, *fast;
static bool on_tmpfs;

/* ---- the tap ---- */

/* A request as the data path finished it: its pieces, flushes last. */
struct rec {
	bool internal;			/* the daemon's own (no NBD request) */
	enum nbdsrv_io_op op;
	uint64_t offset;
	uint32_t length;
	int err;
	unsigned npieces, nflush;
	struct piece p[];
};

static struct {
	pthread_mutex_t lock;
	struct rec *r[64];
	unsigned n;
} tap = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The test links with --wrap=preq_finish: the lanes' end of a request
 * comes here first. */
void __real_preq_finish(struct preq *q);
void __wrap_preq_finish(struct preq *q);

void __wrap_preq_finish(struct preq *q)
{
	int err = atomic_load(&q->err);

	/* A request without pieces (holes only) ends on its submitter's
	 * thread, no dispatcher's: not the lanes' to show. */
	if (q->npieces) {
		unsigned n = q->npieces + q->nflush;
		struct rec *r = malloc(sizeof(*r) + n * sizeof(struct piece));

		if (r) {
			*r = (struct rec){ .internal = !q->nio, .err = err,
					   .npieces = q->npieces, .nflush = q->nflush };
			if (q->nio) {
				r->op = q->nio->op;
				r->offset = q->nio->offset;
				r->length = q->nio->length;
			}
			memcpy(r->p, q->p, n * sizeof(struct piece));
		}
		pthread_mutex_lock(&tap.lock);
		if (tap.n < CW_ARRAY_SIZE(tap.r))
			tap.r[tap.n++] = r;
		pthread_mutex_unlock(&tap.lock);
	}
	__real_preq_finish(q);
}

/* The one request finished since the last call (the caller frees it). */
static struct rec *taken(void)
{
	struct rec *r;

	pthread_mutex_lock(&tap.lock);
	CU_ASSERT_EQUAL(tap.n, 1);
	r = tap.n ? tap.r[tap.n - 1] : NULL;
	for (unsigned i = 0; i + 1 < tap.n; i++)
		free(tap.r[i]);
	tap.n = 0;
	pthread_mutex_unlock(&tap.lock);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	return r;
}

/* Every request finished since the last call, in order (the caller
 * frees them); at most max. */
static unsigned taken_all(struct rec **ret, unsigned max)
{
	unsigned n;

	pthread_mutex_lock(&tap.lock);
	n = CW_MIN(tap.n, max);
	memcpy(ret, tap.r, n * sizeof(*ret));
	for (unsigned i = n; i < tap.n; i++)
		free(tap.r[i]);
	tap.n = 0;
	pthread_mutex_unlock(&tap.lock);
	return n;
}

/* ---- the pool, its exports, the server ---- */

static struct disk *disk_by_id(uint32_t id)
{
	int di = pb_disk_index(D.pb, id);

	CU_ASSERT_FATAL(di >= 0);
	return &D.pb->disks[di];
}

/* Two HDDs and an SSD (ids 1, 2, 3) of DISK_BLOCKS blocks; "media"
 * striped over the HDDs, "fast" on the SSD; the SSD gets two lanes. */
static void setup(void)
{
	static const uint64_t n[3] = { DISK_BLOCKS, DISK_BLOCKS, DISK_BLOCKS };
	static const enum cw_tier tiers[3] = { CW_TIER_HDD, CW_TIER_HDD, CW_TIER_SSD };
	struct cw_part_opts o = { .placement = CW_PLACE_ROTATION, .tier = CW_TIER_PREF_HDD };
	char conf[512], path[160];
	struct cw_part *p;

	dp_pool(&D, BS, 3, n, tiers);
	CU_ASSERT_FATAL(cw_part_create(D.tp.pool, "media", MEDIA_BYTES, &o, &p) == 0);
	dp_part(&D, "fast", FAST_BYTES, CW_PLACE_SINGLE, 3);
	dp_disk_path(&D, 3, path, sizeof(path));
	snprintf(conf, sizeof(conf), "disks = ( { path = \"%s\"; name = \"disk3\"; "
		 "tier = \"ssd\"; lanes = 2; } );", path);
	dp_open(&D, conf);
	for (uint32_t id = 1; id <= 3; id++) {
		CU_ASSERT_FATAL(disk_by_id(id)->fd >= 0);
		if (on_tmpfs)
			CU_ASSERT_EQUAL(disk_by_id(id)->io_kind, CW_IO_MEM);
	}
	CU_ASSERT_EQUAL_FATAL(disk_by_id(3)->nlanes, 2);
}

/* Exports both partitions in pb (and in the server, if one runs). */
static void exports(void)
{
	const char *names[2] = { "media", "fast" };
	struct pbx **xs[2] = { &media, &fast };

	for (int i = 0; i < 2; i++) {
		struct nbdsrv_export e;
		struct cw_part *part;

		CU_ASSERT_FATAL(cw_part_lookup(D.tp.pool, names[i], &part) == 0);
		/* Every block holds data: a hole is written through the keeper
		 * of holes (pool-alloc.c, tested on its own), which would add
		 * requests of its own to the ones these tests count. */
		CU_ASSERT_FATAL(cw_part_set_allocated(D.tp.pool, &(struct cw_alloc_change){
			.part = part, .first_block = 0, .nblocks = cw_part_nblocks(part),
			.allocated = true }, 1) == 0);
		CU_ASSERT_FATAL(pb_export(D.pb, part, &e) == 0);
		CU_ASSERT_EQUAL(e.rotational, i == 0);
		*xs[i] = e.backend;
		if (srv)
			CU_ASSERT_FATAL(nbdsrv_add_export(srv, &e) == 0);
	}
}

/* The exports served on a unix socket, the dispatchers running. */
static void serve(void)
{
	struct nbdsrv_config sc = { .max_request = D.cfg->exports.max_request_bytes,
				    .live_exports = true };

	CU_ASSERT_FATAL(nbdsrv_new(&sc, &srv) == 0);
	exports();
	CU_ASSERT_FATAL(pb_start(D.pb) == 0);
	snprintf(sock, sizeof(sock), "%s/nbd.sock", D.tp.dir);
	CU_ASSERT_FATAL(nbdsrv_listen_unix(srv, sock, NULL, CW_NBD_TLS_OFF) == 0);
	CU_ASSERT_FATAL(nbdsrv_start(srv) == 0);
}

static void teardown(void)
{
	nbdsrv_free(srv);	/* first: it waits for the requests in flight */
	srv = NULL;
	dp_close(&D);
	media = fast = NULL;
	pthread_mutex_lock(&tap.lock);
	for (unsigned i = 0; i < tap.n; i++)
		free(tap.r[i]);
	tap.n = 0;
	pthread_mutex_unlock(&tap.lock);
}

static struct nbd_handle *client(const char *name)
{
	struct nbd_handle *h = nbd_create();

	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	nbd_set_export_name(h, name);
	if (nbd_connect_unix(h, sock) < 0)
		fprintf(stderr, "%s\n", nbd_get_error());
	CU_ASSERT_FATAL(nbd_aio_is_ready(h));
	return h;
}

static void bye(struct nbd_handle *h)
{
	nbd_shutdown(h, 0);
	nbd_close(h);
}

/* Every 4-byte word holds its offset in the export plus salt. */
static void *pattern(uint64_t off, size_t len, uint32_t salt)
{
	uint8_t *b = malloc(len);

	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	for (size_t i = 0; i < len; i += 4) {
		uint32_t w = (uint32_t)(off + i) + salt;

		memcpy(b + i, &w, 4);
	}
	return b;
}

/* ---- what a request's pieces must be ---- */

/* The pieces of r tile its range in order, each where x's map puts it and
 * as long as the disk's run, cut at the zero chunk (zero) and, for best
 * effort, at the disk's BE piece limit; each on its disk's lane for its
 * block, lane 0 on a disk with streams; RT as rt says, with the bound
 * reservation. */
static void check_split(const struct rec *r, const struct pbx *x, bool rt, bool zero)
{
	uint64_t off = r->offset, end = r->offset + r->length;

	for (unsigned i = 0; i < r->npieces; i++) {
		const struct piece *p = &r->p[i];
		struct cw_extent e;
		struct disk *d;
		uint64_t want;

		CU_ASSERT_FATAL(off < end);
		CU_ASSERT_FATAL(cw_part_map(x->part, off, end - off, &e) == 0);
		d = disk_by_id(e.disk_id);
		want = e.length;
		if (zero)
			want = CW_MIN(want, ZERO_CHUNK);
		if (!rt)
			want = CW_MIN(want, d->be_piece);
		CU_ASSERT_EQUAL(p->io.fd, d->fd);
		CU_ASSERT_EQUAL(p->io.off, e.phys_offset);
		CU_ASSERT_EQUAL(p->io.len, want);
		CU_ASSERT_EQUAL(p->io.op, r->op == NBDSRV_IO_READ ? CW_IO_READ : CW_IO_WRITE);
		if (zero)
			CU_ASSERT_PTR_EQUAL(p->io.buf, D.pb->zeros);
		CU_ASSERT_PTR_EQUAL(p->lane->disk, d);
		CU_ASSERT_EQUAL(p->lane->idx, atomic_load(&d->live_streams) ? 0 :
			       (unsigned)(p->io.off / BS % d->nlanes));
		CU_ASSERT_EQUAL(p->rt, rt);
		if (rt)
			CU_ASSERT_PTR_EQUAL(p->resv, x->resv);
		off += p->io.len;
	}
	CU_ASSERT_EQUAL(off, end);
	CU_ASSERT_EQUAL(r->err, 0);
}

/* The disks a request's data pieces touched, as a bit set by id. */
static uint64_t disks_touched(const struct rec *r)
{
	uint64_t set = 0;

	for (unsigned i = 0; i < r->npieces; i++)
		set |= UINT64_C(1) << r->p[i].lane->disk->id;
	return set;
}

/* ---- tests ---- */

/* 12 MiB written from 2 MiB into media: best effort on an HDD is cut into
 * pieces of 256 KiB, none across a pool block (the stripe alternates
 * disks); the bytes are on the disks where the map says, and read back
 * the same way.  8 MiB of the SSD partition: one piece per block, on the
 * lane of its block. */
static void test_be_pieces_and_data(void)
{
	const uint64_t off = 2 * MIB, len = 12 * MIB;
	struct nbd_handle *h;
	uint8_t *w, *rd, *ondisk;
	struct rec *r;

	setup();
	serve();
	CU_ASSERT_EQUAL_FATAL(disk_by_id(1)->be_piece, CW_ADMIT_BE_PIECE_HDD);
	CU_ASSERT_EQUAL_FATAL(disk_by_id(3)->be_piece, BS);
	h = client("media");
	w = pattern(off, len, 7);
	CU_ASSERT_EQUAL_FATAL(nbd_pwrite(h, w, len, off, 0), 0);
	r = taken();
	CU_ASSERT_EQUAL(r->op, NBDSRV_IO_WRITE);
	CU_ASSERT_EQUAL(r->npieces, len / CW_ADMIT_BE_PIECE_HDD);
	CU_ASSERT_EQUAL(r->nflush, 0);
	check_split(r, media, false, false);
	CU_ASSERT_EQUAL(disks_touched(r), (1u << 1) | (1u << 2));
	ondisk = malloc(CW_ADMIT_BE_PIECE_HDD);
	for (unsigned i = 0, at = 0; i < r->npieces; at += r->p[i++].io.len) {
		const struct piece *p = &r->p[i];

		CU_ASSERT(p->io.off / BS == (p->io.off + p->io.len - 1) / BS);
		CU_ASSERT_FATAL(p->io.len <= CW_ADMIT_BE_PIECE_HDD);
		CU_ASSERT_EQUAL_FATAL(pread(p->io.fd, ondisk, p->io.len, (off_t)p->io.off),
				      (ssize_t)p->io.len);
		CU_ASSERT(memcmp(ondisk, w + at, p->io.len) == 0);
	}
	free(ondisk);
	free(r);
	rd = calloc(1, len);
	CU_ASSERT_EQUAL_FATAL(nbd_pread(h, rd, len, off, 0), 0);
	CU_ASSERT(memcmp(rd, w, len) == 0);
	r = taken();
	CU_ASSERT_EQUAL(r->op, NBDSRV_IO_READ);
	check_split(r, media, false, false);
	free(r);
	free(rd);
	free(w);
	bye(h);

	h = client("fast");
	rd = malloc(2 * BS);
	CU_ASSERT_EQUAL_FATAL(nbd_pread(h, rd, 2 * BS, 0, 0), 0);
	r = taken();
	CU_ASSERT_EQUAL(r->npieces, 2);
	check_split(r, fast, false, false);
	CU_ASSERT_EQUAL(r->p[0].io.len, BS);
	CU_ASSERT_NOT_EQUAL(r->p[0].lane, r->p[1].lane);	/* adjacent blocks */
	free(r);
	free(rd);
	bye(h);
	teardown();
}

/* WRITE_ZEROES from the shared zero buffer: 1 MiB pieces on the SSD,
 * whose blocks are larger; on an HDD the BE limit is the smaller cut. */
static void test_zero_chunks(void)
{
	struct nbd_handle *h;
	uint8_t *w, *rd, *z;
	struct rec *r;

	setup();
	serve();
	h = client("fast");
	w = pattern(0, 2 * BS, 1);
	CU_ASSERT_EQUAL_FATAL(nbd_pwrite(h, w, 2 * BS, 0, 0), 0);
	free(taken());
	CU_ASSERT_EQUAL_FATAL(nbd_zero(h, 2 * BS, 0, LIBNBD_CMD_FLAG_NO_HOLE), 0);
	r = taken();
	CU_ASSERT_EQUAL(r->op, NBDSRV_IO_ZERO);
	CU_ASSERT_EQUAL(r->npieces, 2 * BS / ZERO_CHUNK);
	check_split(r, fast, false, true);
	free(r);
	rd = malloc(2 * BS);
	z = calloc(1, 2 * BS);
	CU_ASSERT_EQUAL_FATAL(nbd_pread(h, rd, 2 * BS, 0, 0), 0);
	CU_ASSERT(memcmp(rd, z, 2 * BS) == 0);
	free(taken());
	bye(h);

	h = client("media");
	CU_ASSERT_EQUAL_FATAL(nbd_zero(h, BS, BS, LIBNBD_CMD_FLAG_NO_HOLE), 0);
	r = taken();
	CU_ASSERT_EQUAL(r->npieces, BS / CW_ADMIT_BE_PIECE_HDD);
	check_split(r, media, false, true);
	free(r);
	bye(h);
	free(w);
	free(rd);
	free(z);
	teardown();
}

/* FUA: after the writes, one fdatasync per disk written, on the disk's
 * first lane; none without FUA.  FLUSH: one per disk of the export. */
static void test_fua_and_flush(void)
{
	struct nbd_handle *h;
	uint8_t *w = pattern(0, 8 * MIB, 3);
	uint64_t flushes1;
	struct rec *r;

	setup();
	serve();
	h = client("media");
	flushes1 = cwd_stats_get(&disk_by_id(1)->lanes[0].st.flushes);
	CU_ASSERT_EQUAL_FATAL(nbd_pwrite(h, w, 8 * MIB, 2 * MIB, LIBNBD_CMD_FLAG_FUA), 0);
	r = taken();
	check_split(r, media, false, false);
	CU_ASSERT_EQUAL(disks_touched(r), (1u << 1) | (1u << 2));
	CU_ASSERT_EQUAL_FATAL(r->nflush, 2);
	for (unsigned i = r->npieces; i < r->npieces + r->nflush; i++) {
		const struct piece *f = &r->p[i];

		CU_ASSERT_EQUAL(f->io.op, CW_IO_FSYNC);
		CU_ASSERT_PTR_EQUAL(f->lane, &f->lane->disk->lanes[0]);
		CU_ASSERT_EQUAL(f->io.fd, f->lane->disk->fd);
		for (unsigned j = 0; j < r->npieces; j++)
			CU_ASSERT(f->start_ns >= r->p[j].start_ns);
	}
	CU_ASSERT_NOT_EQUAL(r->p[r->npieces].io.fd, r->p[r->npieces + 1].io.fd);
	CU_ASSERT_EQUAL(cwd_stats_get(&disk_by_id(1)->lanes[0].st.flushes), flushes1 + 1);
	free(r);

	/* Within one block: one disk, one flush. */
	CU_ASSERT_EQUAL_FATAL(nbd_pwrite(h, w, 64 << 10, 5 * MIB, LIBNBD_CMD_FLAG_FUA), 0);
	r = taken();
	CU_ASSERT_EQUAL_FATAL(r->nflush, 1);
	CU_ASSERT_EQUAL(r->p[r->npieces].io.fd, r->p[0].io.fd);
	free(r);
	CU_ASSERT_EQUAL_FATAL(nbd_pwrite(h, w, 64 << 10, 5 * MIB, 0), 0);
	r = taken();
	CU_ASSERT_EQUAL(r->nflush, 0);
	free(r);

	CU_ASSERT_EQUAL_FATAL(nbd_flush(h, 0), 0);
	r = taken();
	CU_ASSERT_EQUAL(r->op, NBDSRV_IO_FLUSH);
	CU_ASSERT_EQUAL_FATAL(r->npieces, 2);
	CU_ASSERT_EQUAL(disks_touched(r), (1u << 1) | (1u << 2));
	for (unsigned i = 0; i < r->npieces; i++)
		CU_ASSERT_EQUAL(r->p[i].io.op, CW_IO_FSYNC);
	free(r);
	bye(h);
	h = client("fast");
	CU_ASSERT_EQUAL_FATAL(nbd_flush(h, 0), 0);
	r = taken();
	CU_ASSERT_EQUAL(r->npieces, 1);
	CU_ASSERT_EQUAL(disks_touched(r), 1u << 3);
	free(r);
	bye(h);
	free(w);
	teardown();
}

static struct resv *held(const struct cw_admit_resv *a)
{
	return dp_held(D.pb, a);
}

static const struct cw_admit_resv *reserve_span(uint64_t from, uint64_t to, int64_t start_in_ns,
						int64_t duration_ns)
{
	struct cw_admit_request rq = {
		.part = "media", .rate_bps = 16 * MIB, .block_bytes = MIB,
		.range_start_bytes = from, .range_end_bytes = to, .persistent = true,
		.start_in_ns = start_in_ns, .duration_ns = duration_ns,
	};
	const struct cw_admit_resv *rv = NULL;
	struct cw_admit_refusal ref = { 0 };
	int r = cw_admit_state_reserve(D.adm, &rq, &rv, &ref, NULL);

	if (r < 0)
		fprintf(stderr, "refused: %s\n", ref.reason);
	CU_ASSERT_FATAL(r == 0 && rv);
	return rv;
}

/* Each RT piece carries its disk's T and C of the reservation. */
static void check_rt_tasks(const struct rec *r, const struct cw_admit_resv *a)
{
	for (unsigned i = 0; i < r->npieces; i++) {
		const struct piece *p = &r->p[i];
		const struct cw_admit_resv_part *pt = resv_part(held(a), p->lane->disk->id);

		CU_ASSERT_PTR_NOT_NULL_FATAL(pt);
		CU_ASSERT_EQUAL(p->sr.cls, CW_SCHED_RT);
		CU_ASSERT_EQUAL(p->sr.stream, a->stream);
		CU_ASSERT_EQUAL(p->sr.period_ns, pt->task.period_ns);
		CU_ASSERT_EQUAL(p->sr.service_ns, pt->task.service_ns);
		CU_ASSERT(p->sr.deadline_ns - p->sr.release_ns == pt->task.period_ns);
	}
}

static struct rec *read_at(struct nbd_handle *h, uint64_t off, size_t len)
{
	void *b = malloc(len);

	CU_ASSERT_EQUAL_FATAL(nbd_pread(h, b, len, off, 0), 0);
	free(b);
	return taken();
}

/* Media bound to a reservation of its first 32 MiB: requests inside are
 * RT, whole disk runs (the BE limit does not apply) or zero chunks, with
 * each disk's T and C; outside, or across its end, BE.  A reservation
 * whose span starts later, or has ended, gives BE. */
static void test_rt_classification(void)
{
	const struct cw_admit_resv *a, *later, *brief;
	uint64_t rt_pieces = 0, lane_rt = 0;
	struct nbd_handle *h;
	struct rec *r;

	setup();
	serve();
	a = reserve_span(0, 32 * MIB, 0, 0);
	CU_ASSERT_EQUAL_FATAL(pb_export_bind(D.pb, media, a->id), 0);
	h = client("media");

	r = read_at(h, 4 * MIB + MIB, MIB);	/* inside one block */
	CU_ASSERT_EQUAL(r->npieces, 1);
	check_split(r, media, true, false);
	check_rt_tasks(r, a);
	CU_ASSERT_TRUE(r->p[0].first_on_disk);
	rt_pieces += r->npieces;
	free(r);

	r = read_at(h, 2 * BS, 2 * BS);		/* two blocks, two disks */
	CU_ASSERT_EQUAL(r->npieces, 2);
	check_split(r, media, true, false);
	check_rt_tasks(r, a);
	CU_ASSERT_NOT_EQUAL(r->p[0].lane->disk, r->p[1].lane->disk);
	CU_ASSERT(r->p[0].first_on_disk && r->p[1].first_on_disk);
	rt_pieces += r->npieces;
	free(r);

	CU_ASSERT_EQUAL_FATAL(nbd_zero(h, BS, 4 * BS, LIBNBD_CMD_FLAG_NO_HOLE), 0);
	r = taken();
	CU_ASSERT_EQUAL(r->npieces, BS / ZERO_CHUNK);
	check_split(r, media, true, true);
	check_rt_tasks(r, a);
	rt_pieces += r->npieces;
	free(r);

	r = read_at(h, 40 * MIB, MIB);		/* outside the range */
	CU_ASSERT_EQUAL(r->npieces, MIB / CW_ADMIT_BE_PIECE_HDD);
	check_split(r, media, false, false);
	CU_ASSERT_EQUAL(r->p[0].sr.cls, CW_SCHED_BE);	/* through cw_sched, as BE */
	free(r);
	r = read_at(h, 30 * MIB, 4 * MIB);	/* across the range's end */
	check_split(r, media, false, false);
	free(r);

	for (uint32_t id = 1; id <= 2; id++)
		lane_rt += cwd_stats_get(&disk_by_id(id)->lanes[0].st.rt_done);
	CU_ASSERT_EQUAL(lane_rt, rt_pieces);
	CU_ASSERT_EQUAL(cwd_stats_get(&held(a)->st.rt_done), rt_pieces);
	bye(h);
	CU_ASSERT_FATAL(cw_admit_state_release(D.adm, a->id, NULL) == 0);
	CU_ASSERT_PTR_NULL(media->resv);

	later = reserve_span(0, 32 * MIB, 3600 * CW_NS_PER_S, 0);
	CU_ASSERT_EQUAL_FATAL(pb_export_bind(D.pb, media, later->id), 0);
	h = client("media");
	r = read_at(h, 4 * MIB, MIB);
	check_split(r, media, false, false);
	free(r);
	bye(h);
	CU_ASSERT_FATAL(cw_admit_state_release(D.adm, later->id, NULL) == 0);

	brief = reserve_span(0, 32 * MIB, 1, 200 * CW_NS_PER_MS);
	CU_ASSERT_EQUAL_FATAL(pb_export_bind(D.pb, media, brief->id), 0);
	h = client("media");
	r = read_at(h, 4 * MIB, MIB);
	if (cw_now_ns() < brief->span_end_ns)	/* a slow machine may be past it */
		check_split(r, media, true, false);
	free(r);
	while (cw_now_ns() < brief->span_end_ns)
		nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000000 }, NULL);
	r = read_at(h, 4 * MIB, MIB);
	check_split(r, media, false, false);
	free(r);
	bye(h);
	teardown();
}

/* Holds a lane's dispatch lock, as its dispatcher does for a round, so
 * that a plan posted to it stays there to be looked at. */
static void hold(struct lane *l)
{
	int free_ = 0;

	while (!atomic_compare_exchange_strong(&l->dlock, &free_, 1)) {
		free_ = 0;
		sched_yield();
	}
}

static void unhold(struct lane *l)
{
	if (atomic_exchange(&l->dlock, 0) == 2)
		cw_futex_wake(&l->dlock);
}

/* The plan posted to disk id's first lane and not yet taken carries the
 * admission state's plan and exactly the streams s[0..n). */
static void check_posted(uint32_t id, const uint64_t *s, size_t n)
{
	struct lane_plan *pl = atomic_load(&disk_by_id(id)->lanes[0].plan);
	struct cw_disk_plan want;

	CU_ASSERT_PTR_NOT_NULL_FATAL(pl);
	CU_ASSERT_FATAL(cw_admit_state_plan(D.adm, id, &want) == 0);
	CU_ASSERT(memcmp(&pl->plan, &want, sizeof(want)) == 0);
	CU_ASSERT_EQUAL(pl->plan.n_tasks, n);
	CU_ASSERT_EQUAL_FATAL(pl->n_streams, n);
	for (size_t i = 0; i < n; i++) {
		bool found = false;

		for (size_t j = 0; j < pl->n_streams; j++)
			found |= pl->streams[j].id == s[i] && pl->streams[j].period_ns > 0 &&
				 pl->streams[j].service_ns > 0;
		CU_ASSERT(found);
	}
}

/* Media's disks and the SSD held while reservations come and go: each
 * admission posts its disks' plans, listing that disk's streams only; a
 * release drops the reservation (and its binding) from the data path.
 * Once let go, the dispatchers take the plans, and the SSD, now with a
 * stream, serves everything on its first lane. */
static void test_plan_events(void)
{
	const struct cw_admit_resv *a1, *a2, *af;
	struct lane *l1, *l2, *l3;
	uint64_t s[2];
	struct nbd_handle *h;
	struct rec *r;

	setup();
	serve();
	l1 = &disk_by_id(1)->lanes[0];
	l2 = &disk_by_id(2)->lanes[0];
	l3 = &disk_by_id(3)->lanes[0];
	CU_ASSERT_FALSE(atomic_load(&disk_by_id(1)->live_streams));
	hold(l1);
	hold(l2);
	hold(l3);

	a1 = reserve_span(0, 0, 0, 0);
	s[0] = a1->stream;
	CU_ASSERT_PTR_NOT_NULL(held(a1));
	check_posted(1, s, 1);
	check_posted(2, s, 1);
	for (unsigned i = 0; i < 2; i++)
		CU_ASSERT_PTR_NULL(atomic_load(&disk_by_id(3)->lanes[i].plan));
	CU_ASSERT_TRUE(atomic_load(&disk_by_id(1)->live_streams));
	CU_ASSERT_FALSE(atomic_load(&disk_by_id(3)->live_streams));

	af = dp_reserve(&D, "fast", 8 * MIB, MIB, 0, 0, NULL);
	check_posted(3, &af->stream, 1);
	CU_ASSERT_PTR_NULL(atomic_load(&disk_by_id(3)->lanes[1].plan));
	check_posted(1, s, 1);		/* not theirs: media's disks were not told */

	a2 = dp_reserve(&D, "media", 8 * MIB, MIB, 0, 0, "media");	/* a start-up one */
	s[1] = a2->stream;
	CU_ASSERT_PTR_NOT_NULL(held(a2));
	check_posted(1, s, 2);
	check_posted(2, s, 2);

	CU_ASSERT_EQUAL_FATAL(pb_export_bind(D.pb, media, a1->id), 0);
	CU_ASSERT_PTR_EQUAL(media->resv, held(a1));
	CU_ASSERT_FATAL(cw_admit_state_release(D.adm, a1->id, NULL) == 0);
	/* a1 is gone: the data path must not hold on to it */
	CU_ASSERT_PTR_NULL(media->resv);
	pthread_mutex_lock(&D.pb->resv_lock);
	for (size_t i = 0; i < D.pb->nresvs; i++)
		CU_ASSERT(!D.pb->resvs[i] || D.pb->resvs[i]->a == a2 || D.pb->resvs[i]->a == af);
	pthread_mutex_unlock(&D.pb->resv_lock);
	check_posted(1, &s[1], 1);
	check_posted(2, &s[1], 1);

	unhold(l1);
	unhold(l2);
	unhold(l3);
	for (int i = 0; i < 10000 && (atomic_load(&l1->plan) || atomic_load(&l2->plan) ||
				      atomic_load(&l3->plan)); i++)
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	CU_ASSERT_PTR_NULL(atomic_load(&l1->plan));	/* the dispatchers took them */
	CU_ASSERT_PTR_NULL(atomic_load(&l2->plan));
	CU_ASSERT_PTR_NULL(atomic_load(&l3->plan));
	CU_ASSERT_TRUE(atomic_load(&disk_by_id(1)->live_streams));	/* it had streams */
	h = client("media");
	free(read_at(h, 0, 2 * BS));
	bye(h);
	h = client("fast");
	r = read_at(h, 0, 2 * BS);
	check_split(r, fast, false, false);
	CU_ASSERT_EQUAL_FATAL(r->npieces, 2);
	CU_ASSERT_PTR_EQUAL(r->p[0].lane, l3);
	CU_ASSERT_PTR_EQUAL(r->p[1].lane, l3);
	free(r);
	bye(h);
	teardown();
}

/* A stream admitted before the dispatchers start: nothing is posted (no
 * dispatcher runs), and the disk's first lane starts under cw_sched with
 * the disk's plan. */
static void test_plan_before_start(void)
{
	struct cw_disk_plan want;
	struct cw_sched_stats ss;
	struct lane *l;

	setup();
	(void)reserve_span(0, 0, 0, 0);
	l = &disk_by_id(1)->lanes[0];
	CU_ASSERT_PTR_NULL(atomic_load(&l->plan));
	CU_ASSERT_TRUE(atomic_load(&disk_by_id(1)->live_streams));
	serve();
	hold(l);	/* its dispatcher owns cw_sched */
	CU_ASSERT_PTR_NOT_NULL_FATAL(l->pl.sched);
	cw_sched_get_stats(l->pl.sched, &ss);
	CU_ASSERT_FATAL(cw_admit_state_plan(D.adm, 1, &want) == 0);
	CU_ASSERT_EQUAL(ss.delta_l_ns, want.be_budget_ns);
	unhold(l);
	CU_ASSERT_PTR_NULL(disk_by_id(3)->lanes[0].pl.sched);	/* no streams there */
	teardown();
}

/* A new model from admission reaches the disk the data path books on. */
static void test_model_event(void)
{
	struct cw_model m;
	bool taken_ = false;

	setup();
	serve();
	CU_ASSERT_FATAL(cw_model_preset("atlas2", &m) == 0);
	CU_ASSERT_FATAL(memcmp(disk_model(disk_by_id(2)), &m, sizeof(m)) != 0);
	CU_ASSERT_FATAL(cw_admit_state_set_model(D.adm, 2, &m, CW_ADMIT_MODEL_STORED, &taken_,
						 NULL, NULL) == 0);
	CU_ASSERT_TRUE(taken_);
	CU_ASSERT(memcmp(disk_model(disk_by_id(2)), &m, sizeof(m)) == 0);
	CU_ASSERT(memcmp(disk_model(disk_by_id(1)), &m, sizeof(m)) != 0);
	teardown();
}

/* A disk the pool takes while the data path runs is not open: its plan
 * event changes nothing, and the disk, opened later, starts from the
 * admission state's plan. */
static void test_disk_not_open(void)
{
	struct cw_disk_plan plan = { .disk_id = 4, .n_tasks = 1, .be_piece_bytes = 4096 };
	struct cw_model m;
	struct cw_admit_event ev = { .kind = CW_ADMIT_EV_PLAN, .disk_id = 4, .plan = &plan,
				     .model = &m };
	char path[160], err[256] = "";
	struct cw_disk_plan want;
	uint32_t id;

	setup();
	serve();
	snprintf(path, sizeof(path), "%s/d4.img", D.tp.dir);
	tp_file(path, DISK_BLOCKS * (uint64_t)BS);
	CU_ASSERT_FATAL(cw_disk_add(D.tp.pool, path, CW_TIER_HDD, NULL, &id) == 0);
	CU_ASSERT_EQUAL_FATAL(id, 4);
	CU_ASSERT_FATAL(cw_admit_state_disk_add(D.adm, id, NULL) == 0);	/* an event */
	CU_ASSERT_FATAL(cw_model_preset("atlas2", &m) == 0);
	pb_admit_event(D.pb, &ev);
	CU_ASSERT_EQUAL(pb_disk_index(D.pb, 4), -ENODEV);
	CU_ASSERT_EQUAL(D.pb->ndisks, 3);
	for (uint32_t i = 1; i <= 3; i++) {	/* and no other disk took it */
		CU_ASSERT(memcmp(disk_model(disk_by_id(i)), &m, sizeof(m)) != 0);
		CU_ASSERT_FALSE(atomic_load(&disk_by_id(i)->live_streams));
	}

	CU_ASSERT_EQUAL_FATAL(pb_disk_add(D.pb, 4, err, sizeof(err)), 0);
	CU_ASSERT_FATAL(cw_admit_state_plan(D.adm, 4, &want) == 0);
	CU_ASSERT_EQUAL(disk_by_id(4)->be_piece, want.be_piece_bytes);
	CU_ASSERT_FALSE(atomic_load(&disk_by_id(4)->live_streams));
	CU_ASSERT(memcmp(disk_model(disk_by_id(4)), &m, sizeof(m)) != 0);
	teardown();
}

/* By id: stored reservations only; by name (id 0): the start-up one given
 * for that export only.  A failed bind leaves the binding as it was. */
static void test_export_bind(void)
{
	const struct cw_admit_resv *stored, *other, *mine;

	setup();
	exports();
	stored = reserve_span(0, 0, 0, 0);
	other = dp_reserve(&D, "media", 4 * MIB, MIB, 0, 0, "elsewhere");
	CU_ASSERT_EQUAL(other->id, 0);
	CU_ASSERT_EQUAL(pb_export_bind(D.pb, media, 0), -ENOENT);
	CU_ASSERT_PTR_NULL(media->resv);
	CU_ASSERT_EQUAL(pb_export_bind(D.pb, media, stored->id), 0);
	CU_ASSERT_PTR_EQUAL(media->resv, held(stored));
	CU_ASSERT_EQUAL(pb_export_bind(D.pb, media, stored->id + 1000), -ENOENT);
	CU_ASSERT_PTR_EQUAL(media->resv, held(stored));
	mine = dp_reserve(&D, "media", 4 * MIB, MIB, 0, 0, "media");
	CU_ASSERT_EQUAL(pb_export_bind(D.pb, media, 0), 0);
	CU_ASSERT_PTR_EQUAL(media->resv, held(mine));
	CU_ASSERT_EQUAL(pb_export_bind(D.pb, fast, 0), -ENOENT);
	teardown();
}

/* The keeper of holes does its disk work through the lanes, as best
 * effort: a partial write to a hole has its block punched (one internal
 * request of PUNCH pieces on the block's disk), then its data written
 * (an internal WRITE) and that disk synced (one internal FSYNC request),
 * all before the block is recorded as written; a TRIM of a
 * whole block punches it through the lanes; a FUA WRITE_ZEROES of part of
 * a written block punches that part and syncs.  The data reads back
 * right each time. */
static void test_keeper_io(void)
{
	struct nbd_handle *h;
	struct rec *r[8];
	uint8_t *w = pattern(0, 64 * KIB, 7), *w2 = pattern(0, BS, 9);
	uint8_t *rd = malloc(BS), *z = calloc(1, BS);
	struct cw_extent e;
	unsigned n;

	setup();
	serve();
	h = client("media");
	/* exports() made every block written: these three are holes. */
	CU_ASSERT_FATAL(cw_part_set_allocated(D.tp.pool, &(struct cw_alloc_change){
		.part = media->part, .first_block = 0, .nblocks = 3, .allocated = false }, 1) == 0);
	CU_ASSERT_FATAL(cw_part_map(media->part, BS, BS, &e) == 0 && e.length == BS);

	CU_ASSERT_EQUAL_FATAL(nbd_pwrite(h, w, 64 * KIB, BS + 4096, 0), 0);
	n = taken_all(r, 8);
	CU_ASSERT_EQUAL_FATAL(n, 3);
	CU_ASSERT(r[0]->internal);
	CU_ASSERT_EQUAL(r[0]->err, 0);
	CU_ASSERT_EQUAL(r[0]->npieces, BS / CW_ADMIT_BE_PIECE_HDD);
	for (unsigned i = 0; i < r[0]->npieces; i++) {
		struct piece *p = &r[0]->p[i];

		CU_ASSERT_EQUAL(p->io.op, CW_IO_PUNCH);
		CU_ASSERT_FALSE(p->rt);
		CU_ASSERT_EQUAL(p->lane->disk->id, e.disk_id);
		CU_ASSERT_EQUAL(p->io.off, e.phys_offset + i * CW_ADMIT_BE_PIECE_HDD);
	}
	CU_ASSERT(r[1]->internal);
	CU_ASSERT_EQUAL(r[1]->npieces, 1);
	CU_ASSERT_EQUAL(r[1]->p[0].io.op, CW_IO_WRITE);
	CU_ASSERT_EQUAL(r[1]->p[0].io.off, e.phys_offset + 4096);
	CU_ASSERT(r[2]->internal);
	CU_ASSERT_EQUAL(r[2]->npieces, 1);
	CU_ASSERT_EQUAL(r[2]->p[0].io.op, CW_IO_FSYNC);
	CU_ASSERT_EQUAL(r[2]->p[0].lane->disk->id, e.disk_id);
	for (unsigned i = 0; i < n; i++)
		free(r[i]);
	CU_ASSERT_EQUAL_FATAL(nbd_pread(h, rd, BS, BS, 0), 0);
	free(taken());
	CU_ASSERT(memcmp(rd, z, 4096) == 0);
	CU_ASSERT(memcmp(rd + 4096, w, 64 * KIB) == 0);
	CU_ASSERT(memcmp(rd + 4096 + 64 * KIB, z, BS - 4096 - 64 * KIB) == 0);

	/* The whole block back to a hole: its space punched in the lanes. */
	CU_ASSERT_EQUAL_FATAL(nbd_trim(h, BS, BS, 0), 0);
	n = taken_all(r, 8);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT(r[0]->internal);
	CU_ASSERT_EQUAL(r[0]->p[0].io.op, CW_IO_PUNCH);
	CU_ASSERT_EQUAL(r[0]->p[0].io.off, e.phys_offset);
	free(r[0]);
	CU_ASSERT_EQUAL(cw_part_allocated(media->part, BS, BS, &(uint64_t){ 0 }), 0);

	/* Part of a written block zeroed under FUA: punched, then synced. */
	CU_ASSERT_EQUAL_FATAL(nbd_pwrite(h, w2, BS, 2 * BS, 0), 0);
	/* a hole covered whole: no zeros, its data and a sync */
	n = taken_all(r, 8);
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT(n == 2 && r[0]->p[0].io.op == CW_IO_WRITE && r[1]->p[0].io.op == CW_IO_FSYNC);
	for (unsigned i = 0; i < n; i++)
		free(r[i]);
	CU_ASSERT_EQUAL_FATAL(nbd_zero(h, 8192, 2 * BS + 4096, LIBNBD_CMD_FLAG_FUA), 0);
	n = taken_all(r, 8);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT(r[0]->internal);
	CU_ASSERT_EQUAL(r[0]->npieces, 1);
	CU_ASSERT_EQUAL(r[0]->nflush, 1);
	CU_ASSERT_EQUAL(r[0]->p[0].io.op, CW_IO_PUNCH);
	CU_ASSERT_EQUAL(r[0]->p[0].io.len, 8192);
	CU_ASSERT_EQUAL(r[0]->p[1].io.op, CW_IO_FSYNC);
	free(r[0]);
	CU_ASSERT_EQUAL_FATAL(nbd_pread(h, rd, 16384, 2 * BS, 0), 0);
	free(taken());
	CU_ASSERT(memcmp(rd + 4096, z, 8192) == 0);
	CU_ASSERT(memcmp(rd, w2, 4096) == 0);
	CU_ASSERT(memcmp(rd + 12288, w2 + 12288, 4096) == 0);
	bye(h);
	free(w);
	free(w2);
	free(rd);
	free(z);
	teardown();
}

/* A write to a block being moved (clockwise/mover.h) is repeated on its
 * destination, as best effort, and flushed there under FUA; once the
 * block switched, a write goes to its new place only.  The daemon's mover
 * is stopped so that the test drives the library's steps itself. */
static void test_mirror_while_moving(void)
{
	struct cw_move_opts mo = { .placement = CW_PLACE_SINGLE, .disk_ids = (uint32_t[]){ 3 },
				   .ndisks = 1 };
	struct cw_mover_task t;
	struct nbd_handle *h;
	uint8_t *w = pattern(BS, 64 * KIB, 11), *back = malloc(64 * KIB), *blk = malloc(BS);
	struct cw_extent e;
	struct rec *r;
	uint64_t id;
	bool on_src = false, on_dst = false, flush_dst = false;

	setup();
	serve();
	pb_mover_stop(D.pb);
	h = client("media");
	CU_ASSERT_FATAL(cw_part_map(media->part, BS, BS, &e) == 0);
	CU_ASSERT_FATAL(cw_move_start(media->part, 1, 1, &mo, CW_MOVE_PART, &id) == 0);
	CU_ASSERT_FATAL(cw_mover_next(D.tp.pool, &t) == 0);
	CU_ASSERT_FATAL(t.action == CW_MOVER_COPY && t.block == 1 && t.dst_disk_id == 3);
	CU_ASSERT(t.src_disk_id == e.disk_id && t.src_offset == e.phys_offset);

	CU_ASSERT_EQUAL_FATAL(nbd_pwrite(h, w, 64 * KIB, BS + 8192, LIBNBD_CMD_FLAG_FUA), 0);
	r = taken();
	for (unsigned i = 0; i < r->npieces; i++) {
		struct piece *p = &r->p[i];

		CU_ASSERT_FALSE(p->rt);
		on_src |= p->lane->disk->id == e.disk_id && p->io.off == e.phys_offset + 8192;
		on_dst |= p->lane->disk->id == 3 && p->io.off == t.dst_offset + 8192 &&
			  p->io.len == 64 * KIB;
	}
	for (unsigned i = 0; i < r->nflush; i++)
		flush_dst |= r->p[r->npieces + i].lane->disk->id == 3;
	CU_ASSERT(on_src && on_dst && flush_dst);
	free(r);
	CU_ASSERT_EQUAL(pread(disk_by_id(3)->fd, back, 64 * KIB, (off_t)(t.dst_offset + 8192)),
			(ssize_t)(64 * KIB));
	CU_ASSERT(memcmp(back, w, 64 * KIB) == 0);

	/* The copy, as the mover does it; then the block lives on disk 3. */
	CU_ASSERT_EQUAL(pread(disk_by_id(e.disk_id)->fd, blk, BS, (off_t)t.src_offset),
			(ssize_t)BS);
	CU_ASSERT_EQUAL(pwrite(disk_by_id(3)->fd, blk, BS, (off_t)t.dst_offset), (ssize_t)BS);
	CU_ASSERT_EQUAL(cw_mover_copied(D.tp.pool, 0, 0), 0);
	/* The write above made the copy dirty: it is done again. */
	CU_ASSERT_FATAL(cw_mover_next(D.tp.pool, &t) == 0);
	CU_ASSERT_FATAL(t.action == CW_MOVER_COPY && t.again);
	CU_ASSERT_EQUAL(pread(disk_by_id(e.disk_id)->fd, blk, BS, (off_t)t.src_offset),
			(ssize_t)BS);
	CU_ASSERT_EQUAL(pwrite(disk_by_id(3)->fd, blk, BS, (off_t)t.dst_offset), (ssize_t)BS);
	CU_ASSERT_EQUAL(cw_mover_copied(D.tp.pool, 0, 0), 0);
	CU_ASSERT_FATAL(cw_part_map(media->part, BS, BS, &e) == 0 && e.disk_id == 3);
	while (cw_mover_next(D.tp.pool, &t) == 0 && t.action != CW_MOVER_IDLE)
		sched_yield();
	CU_ASSERT_EQUAL_FATAL(nbd_pread(h, back, 64 * KIB, BS + 8192, 0), 0);
	free(taken());
	CU_ASSERT(memcmp(back, w, 64 * KIB) == 0);
	CU_ASSERT_EQUAL_FATAL(nbd_pwrite(h, w, 4096, BS, 0), 0);
	r = taken();
	CU_ASSERT_EQUAL(r->npieces, 1);
	CU_ASSERT_EQUAL(r->p[0].lane->disk->id, 3);
	free(r);
	bye(h);
	free(w);
	free(back);
	free(blk);
	teardown();
}

/* A 2-copy partition of two blocks, all written, served as name (the
 * data path set up and serving): its export's data path, and where the
 * copies of its first block are. */
static struct pbx *serve_mirror(const char *name, struct cw_copy *ret_copies)
{
	struct cw_part_opts o = { .copies = 2, .tier = CW_TIER_PREF_HDD };
	struct nbdsrv_export e;
	struct cw_part *part;

	setup();
	serve();
	CU_ASSERT_FATAL(cw_part_create(D.tp.pool, name, 2 * BS, &o, &part) == 0);
	CU_ASSERT_FATAL(cw_part_set_allocated(D.tp.pool, &(struct cw_alloc_change){
		.part = part, .first_block = 0, .nblocks = 2, .allocated = true }, 1) == 0);
	CU_ASSERT_FATAL(pb_export(D.pb, part, &e) == 0);
	CU_ASSERT_FATAL(nbdsrv_add_export(srv, &e) == 0);
	CU_ASSERT_FATAL(cw_part_block_copies(part, 0, ret_copies) == 0);
	return e.backend;
}

/* A write of 64 KiB to the 2-copy partition whose first block's copies
 * are cs, as the data path finished it (r): one thick booking, the lead
 * (the IO piece) on copy 0's disk, the copy's piece on copy 1's, in the
 * same slot of their records. */
static void check_thick(const struct rec *r, const struct cw_copy *cs)
{
	CU_ASSERT_EQUAL_FATAL(r->npieces, 2);
	CU_ASSERT(r->p[0].mirror == 1 && r->p[1].mirror == 2);
	CU_ASSERT(r->p[0].lane->disk->id == cs[0].disk_id &&
		  r->p[1].lane->disk->id == cs[1].disk_id);
	CU_ASSERT(r->p[0].thick_next != NULL && r->p[0].thick_lead == NULL);
	CU_ASSERT(r->p[1].thick_lead != NULL && r->p[1].thick_next == NULL);
	CU_ASSERT_EQUAL(r->p[0].slot, r->p[1].slot);
}

/* Both copies (cs) hold w's 64 KiB at offset off of the block. */
static void check_copies_hold(const struct cw_copy *cs, uint64_t off, const uint8_t *w)
{
	uint8_t *back = malloc(64 * KIB);

	for (int c = 0; c < 2; c++) {
		CU_ASSERT_EQUAL(pread(disk_by_id(cs[c].disk_id)->fd, back, 64 * KIB,
				      (off_t)(cs[c].phys_offset + off)), (ssize_t)(64 * KIB));
		CU_ASSERT(memcmp(back, w, 64 * KIB) == 0);
	}
	free(back);
}

/* A write to a 2-copy partition is one thick request: both copies'
 * pieces booked in the same slots of their disks' records (each handed
 * out at the same slot number), the bytes on both disks; a read is one
 * piece, on either copy. */
static void test_thick_write(void)
{
	uint8_t *w = pattern(BS, 64 * KIB, 5), *back = malloc(64 * KIB);
	struct cw_copy cs[CW_COPIES_MAX];
	struct nbd_handle *h;
	struct rec *r;

	serve_mirror("mir", cs);
	h = client("mir");
	for (int i = 0; i < 8; i++) {
		CU_ASSERT_EQUAL_FATAL(nbd_pwrite(h, w, 64 * KIB, 8192 + i * 64 * KIB, 0), 0);
		r = taken();
		check_thick(r, cs);
		free(r);
	}
	check_copies_hold(cs, 8192 + 7 * 64 * KIB, w);
	CU_ASSERT_EQUAL_FATAL(nbd_pread(h, back, 64 * KIB, 8192, 0), 0);
	r = taken();
	CU_ASSERT(r->npieces == 1 && r->p[0].thick_next == NULL);
	free(r);
	CU_ASSERT(memcmp(back, w, 64 * KIB) == 0);
	bye(h);
	free(w);
	free(back);
	teardown();
}

/* A recording stream's write on a 2-copy partition (resv create
 * --record: every copy's disk charged) is one thick request too: both
 * copies' pieces the stream's, with their disks' T and C, booked in the
 * same slots of both records; the bytes on both disks.  A write outside
 * the reservation's range stays one best-effort thick booking. */
static void test_thick_record(void)
{
	uint8_t *w = pattern(BS, 64 * KIB, 9);
	struct cw_admit_request rq = {
		.part = "rec", .rate_bps = 512 * KIB, .block_bytes = 64 * KIB,
		.range_start_bytes = 0, .range_end_bytes = BS, .persistent = true,
		.record = true,
	};
	struct cw_admit_refusal ref = { 0 };
	const struct cw_admit_resv *a = NULL;
	struct cw_copy cs[CW_COPIES_MAX];
	struct nbd_handle *h;
	struct pbx *x;
	struct rec *r;

	x = serve_mirror("rec", cs);
	if (cw_admit_state_reserve(D.adm, &rq, &a, &ref, NULL) < 0)
		fprintf(stderr, "refused: %s\n", ref.reason);
	CU_ASSERT_FATAL(a && a->record);
	CU_ASSERT_EQUAL_FATAL(pb_export_bind(D.pb, x, a->id), 0);
	h = client("rec");
	for (int i = 0; i < 8; i++) {
		CU_ASSERT_EQUAL_FATAL(nbd_pwrite(h, w, 64 * KIB, i * 64 * KIB, 0), 0);
		r = taken();
		check_thick(r, cs);
		CU_ASSERT(r->p[0].rt && r->p[1].rt);
		check_rt_tasks(r, a);
		free(r);
	}
	check_copies_hold(cs, 7 * 64 * KIB, w);
	/* outside the range: best effort, one thick booking all the same */
	CU_ASSERT_EQUAL_FATAL(nbd_pwrite(h, w, 64 * KIB, BS, 0), 0);
	r = taken();
	CU_ASSERT_EQUAL_FATAL(r->npieces, 2);
	CU_ASSERT(!r->p[0].rt && !r->p[1].rt);
	CU_ASSERT(r->p[0].thick_next != NULL && r->p[1].thick_lead != NULL);
	CU_ASSERT_EQUAL(r->p[0].slot, r->p[1].slot);
	free(r);
	bye(h);
	CU_ASSERT_FATAL(cw_admit_state_release(D.adm, a->id, NULL) == 0);
	free(w);
	teardown();
}

/* The extents of base:allocation, as flags per pool block of media. */
static int block_flags(void *data, const char *ctx, uint64_t off, uint32_t *e, size_t n,
		       int *error)
{
	uint32_t *flags = data;

	(void)ctx;
	(void)error;
	for (size_t i = 0; i + 1 < n; off += e[i], i += 2)
		for (uint64_t at = off; at < off + e[i]; at += BS)
			flags[at / BS] = e[i + 1];
	return 0;
}

/* Served partially (exports.activation_mode "partial"): with disk 2 not
 * open, media (striped over disks 1 and 2) is refused without it and
 * served with it; a request touching a block on disk 2 fails with EIO and
 * none of it is done, the others are served, and BLOCK_STATUS calls the
 * missing blocks a hole of unknown contents. */
static void test_partial(void)
{
	uint32_t ids[MEDIA_BYTES / BS], flags[MEDIA_BYTES / BS] = { 0 };
	uint64_t on1 = UINT64_MAX, on2 = UINT64_MAX;
	struct nbdsrv_export e;
	struct nbd_handle *h;
	struct cw_part *part;
	struct rec *done[64];
	uint8_t *w, *back;
	int slot2;

	setup();
	slot2 = atomic_exchange(&D.pb->slot_of[2], -1);	/* as if missing at start */
	CU_ASSERT_FATAL(cw_part_lookup(D.tp.pool, "media", &part) == 0);
	CU_ASSERT_EQUAL(pb_export(D.pb, part, &e), -ENODEV);
	D.cfg->exports.partial = true;
	serve();
	CU_ASSERT_EQUAL(media->missing, MEDIA_BYTES / BS / 2);
	CU_ASSERT_EQUAL(atomic_load(&media->ndisks), 1);
	CU_ASSERT_FATAL(cw_part_block_disks(media->part, 0, MEDIA_BYTES / BS, ids) == 0);
	for (uint64_t b = 0; b < MEDIA_BYTES / BS; b++) {
		if (ids[b] == 1 && on1 == UINT64_MAX)
			on1 = b;
		if (ids[b] == 2 && on2 == UINT64_MAX)
			on2 = b;
	}
	CU_ASSERT_FATAL(on1 != UINT64_MAX && on2 != UINT64_MAX);

	h = nbd_create();
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	nbd_set_export_name(h, "media");
	nbd_add_meta_context(h, LIBNBD_CONTEXT_BASE_ALLOCATION);
	CU_ASSERT_FATAL(nbd_connect_unix(h, sock) == 0);
	w = pattern(on1 * BS, 64 * KIB, 3);
	back = malloc(2 * BS);
	CU_ASSERT_PTR_NOT_NULL_FATAL(back);
	CU_ASSERT_EQUAL(nbd_pwrite(h, w, 64 * KIB, on1 * BS, 0), 0);
	CU_ASSERT_EQUAL(nbd_pread(h, back, 64 * KIB, on1 * BS, 0), 0);
	CU_ASSERT(memcmp(back, w, 64 * KIB) == 0);
	CU_ASSERT_EQUAL(nbd_pread(h, back, 4096, on2 * BS + 8192, 0), -1);
	CU_ASSERT_EQUAL(nbd_get_errno(), EIO);
	CU_ASSERT_EQUAL(nbd_pwrite(h, w, 4096, on2 * BS, 0), -1);
	CU_ASSERT_EQUAL(nbd_get_errno(), EIO);
	/* across both: whole, and nothing of it written on disk 1 */
	CU_ASSERT_EQUAL(nbd_pwrite(h, back, 2 * BS, CW_MIN(on1, on2) * BS, 0), -1);
	CU_ASSERT_EQUAL(nbd_get_errno(), EIO);
	CU_ASSERT_EQUAL(nbd_zero(h, 4096, on2 * BS, 0), -1);
	CU_ASSERT_EQUAL(nbd_trim(h, 4096, on2 * BS, 0), -1);
	CU_ASSERT_EQUAL(nbd_pread(h, back, 64 * KIB, on1 * BS, 0), 0);
	CU_ASSERT(memcmp(back, w, 64 * KIB) == 0);
	CU_ASSERT_EQUAL(nbd_block_status(h, MEDIA_BYTES, 0,
					 (nbd_extent_callback){ .callback = block_flags,
								.user_data = flags }, 0), 0);
	for (uint64_t b = 0; b < MEDIA_BYTES / BS; b++)
		CU_ASSERT_EQUAL(flags[b], ids[b] == 2 ? LIBNBD_STATE_HOLE : 0);
	bye(h);
	free(w);
	free(back);
	for (unsigned i = taken_all(done, CW_ARRAY_SIZE(done)); i-- > 0;)
		free(done[i]);
	atomic_store(&D.pb->slot_of[2], slot2);
	teardown();
}

/* The keeper's zeros and data on a block being moved reach its
 * destination too (mirrored like any write), and the keeper syncs that
 * disk as well before it records the block as written: so a power loss after the
 * switch cannot leave the destination without them, whenever in the
 * copy they came. */
static void test_keeper_zeros_moving(void)
{
	struct cw_move_opts mo = { .placement = CW_PLACE_SINGLE, .disk_ids = (uint32_t[]){ 3 },
				   .ndisks = 1 };
	struct cw_mover_task t;
	struct nbd_handle *h;
	uint8_t *w = pattern(0, 64 * KIB, 5);
	struct rec *r[8];
	struct cw_extent e;
	bool zero_dst = false, sync_src = false, sync_dst = false;
	uint64_t id;
	unsigned n;

	setup();
	serve();
	pb_mover_stop(D.pb);
	h = client("media");
	CU_ASSERT_FATAL(cw_part_set_allocated(D.tp.pool, &(struct cw_alloc_change){
		.part = media->part, .first_block = 1, .nblocks = 1, .allocated = false }, 1) == 0);
	CU_ASSERT_FATAL(cw_part_map(media->part, BS, BS, &e) == 0 && e.disk_id != 3);
	CU_ASSERT_FATAL(cw_move_start(media->part, 1, 1, &mo, CW_MOVE_PART, &id) == 0);
	CU_ASSERT_FATAL(cw_mover_next(D.tp.pool, &t) == 0);
	CU_ASSERT_FATAL(t.action == CW_MOVER_COPY && t.block == 1 && t.dst_disk_id == 3);

	CU_ASSERT_EQUAL_FATAL(nbd_pwrite(h, w, 64 * KIB, BS + 4096, 0), 0);
	n = taken_all(r, 8);
	CU_ASSERT_FATAL(n == 3 && r[0]->internal && r[1]->internal && r[2]->internal);
	for (unsigned i = 0; i < r[0]->npieces; i++)
		zero_dst |= r[0]->p[i].lane->disk->id == 3 && r[0]->p[i].io.off >= t.dst_offset &&
			    r[0]->p[i].io.off < t.dst_offset + BS;
	for (unsigned i = 0; i < r[1]->npieces; i++)
		CU_ASSERT_EQUAL(r[1]->p[i].io.op, CW_IO_WRITE);
	for (unsigned i = 0; i < r[2]->npieces; i++) {
		CU_ASSERT_EQUAL(r[2]->p[i].io.op, CW_IO_FSYNC);
		sync_src |= r[2]->p[i].lane->disk->id == e.disk_id;
		sync_dst |= r[2]->p[i].lane->disk->id == 3;
	}
	CU_ASSERT(zero_dst);
	CU_ASSERT(sync_src);
	CU_ASSERT(sync_dst);
	for (unsigned i = 0; i < n; i++)
		free(r[i]);
	bye(h);
	free(w);
	teardown();
}

/* ---- cwsim splits as clockwised does ---- */

/* cwsim's own striping, its move and its failure, which a layout copied
 * from the pool's map, without a move or a failure, never asks for. */
uint64_t sim_be_start(const struct sim_scenario *sc)
{
	(void)sc;
	CU_FAIL("cwsim's own striping");
	return 0;
}

int sim_move_mirrors(struct sim_move *m, uint32_t part, uint64_t off, uint64_t bytes,
		     uint64_t *ret_skips, struct cw_extent *ret, unsigned max)
{
	(void)m, (void)part, (void)off, (void)bytes, (void)ret_skips, (void)ret, (void)max;
	CU_FAIL("cwsim's move");
	return -ENOSYS;
}

/* ... nor its failure's map (fail =). */
int sim_move_map(struct sim_move *m, uint32_t part, uint64_t off, uint64_t len,
		 struct cw_extent *ret)
{
	(void)m, (void)part, (void)off, (void)len, (void)ret;
	CU_FAIL("cwsim's failure");
	return -ENOSYS;
}

int sim_move_copies(struct sim_move *m, uint32_t part, int stream, uint64_t off,
		    struct cw_copy *ret)
{
	(void)m, (void)part, (void)stream, (void)off, (void)ret;
	CU_FAIL("cwsim's failure");
	return -ENOSYS;
}

struct sim_pieces {
	unsigned n;
	struct cw_path_piece p[256];
};

static int sim_emit(void *arg, const struct cw_path_piece *p)
{
	struct sim_pieces *o = arg;

	CU_ASSERT_FATAL(o->n < CW_ARRAY_SIZE(o->p));
	o->p[o->n++] = *p;
	return 0;
}

/* A table of reads and writes on media, across blocks and disks, through
 * the daemon (its NBD server, submit(), the lanes) and through cwsim's
 * split on media's map as cwsim's pool set-up copies it (sim/pool.c):
 * the same pieces, in the same order. */
static void test_sim_splits_the_same(void)
{
	static const struct { uint64_t off, len; bool write; } tab[] = {
		{ 0, 4 * KIB, false },
		{ BS - 4 * KIB, 8 * KIB, true },
		{ 2 * MIB, 12 * MIB, true },
		{ BS / 2, 3 * BS, false },
		{ 7 * BS + 300 * KIB, 700 * KIB, false },
		{ 5 * BS + 100 * KIB, 2 * BS + 12 * KIB, true },
		{ MEDIA_BYTES - 1 * MIB, 1 * MIB, false },
	};
	const struct sim_scenario sc = { .disks = 3, .be_pblock_bytes = BS };
	const struct sim_setup ss = { .sc = &sc, .be_part_bytes = MEDIA_BYTES,
				      .be_piece_bytes = CW_ADMIT_BE_PIECE_HDD };
	struct sim_pblock blocks[MEDIA_BYTES / BS];
	struct sim_path lay = { .s = &ss, .blocks = blocks, .part = 0 };
	struct nbd_handle *h;
	uint8_t *buf = malloc(16 * MIB);

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	setup();
	serve();
	CU_ASSERT_EQUAL_FATAL(disk_by_id(1)->be_piece, CW_ADMIT_BE_PIECE_HDD);
	CU_ASSERT_EQUAL_FATAL(disk_by_id(2)->be_piece, CW_ADMIT_BE_PIECE_HDD);
	for (uint64_t k = 0; k < CW_ARRAY_SIZE(blocks); k++) {
		struct cw_extent e;

		CU_ASSERT_FATAL(cw_part_map(media->part, k * BS, BS, &e) == 0);
		blocks[k] = (struct sim_pblock){ .disk = e.disk_id - 1, .off = e.phys_offset };
	}
	h = client("media");
	for (size_t t = 0; t < CW_ARRAY_SIZE(tab); t++) {
		struct sim_pieces sim = { 0 };
		struct rec *r;

		CU_ASSERT_EQUAL_FATAL(tab[t].write ? nbd_pwrite(h, buf, tab[t].len, tab[t].off, 0) :
				      nbd_pread(h, buf, tab[t].len, tab[t].off, 0), 0);
		r = taken();
		CU_ASSERT_FATAL(sim_path_split(&lay, tab[t].off, tab[t].len, tab[t].write, sim_emit,
					       &sim) == 0);
		CU_ASSERT_EQUAL(sim.n, r->npieces);
		for (unsigned i = 0; i < CW_MIN(sim.n, r->npieces); i++) {
			const struct piece *p = &r->p[i];

			CU_ASSERT_EQUAL(sim.p[i].disk_id, p->lane->disk->id);
			CU_ASSERT_EQUAL(sim.p[i].phys_offset, p->io.off);
			CU_ASSERT_EQUAL(sim.p[i].length, p->io.len);
			CU_ASSERT_EQUAL(sim.p[i].op, p->io.op);
		}
		free(r);
	}
	bye(h);
	free(buf);
	teardown();
}

int main(void)
{
	CU_pSuite s = cwtest_suite("daemon pool back end", NULL, NULL);

	on_tmpfs = dp_use_tmpfs();
	if (!on_tmpfs)
		fprintf(stderr, "no memory file system: the disks' engine is not the memory one\n");
	cwd_log_set_level(LOG_WARNING);
	cwtest_add(s, "BE pieces, their disks and data", test_be_pieces_and_data);
	cwtest_add(s, "WRITE_ZEROES in zero chunks", test_zero_chunks);
	cwtest_add(s, "FUA flushes each disk written; FLUSH each disk", test_fua_and_flush);
	cwtest_add(s, "RT in a bound reservation's range and span", test_rt_classification);
	cwtest_add(s, "admission events post plans with the disk's streams", test_plan_events);
	cwtest_add(s, "a stream admitted before start", test_plan_before_start);
	cwtest_add(s, "a new model reaches the disk", test_model_event);
	cwtest_add(s, "a disk not open ignores events", test_disk_not_open);
	cwtest_add(s, "exports bind by id or by start-up name", test_export_bind);
	cwtest_add(s, "the keeper of holes works through the lanes", test_keeper_io);
	cwtest_add(s, "a write to a moving block is mirrored", test_mirror_while_moving);
	cwtest_add(s, "a mirrored write is one thick booking", test_thick_write);
	cwtest_add(s, "a recording stream's write is one thick booking", test_thick_record);
	cwtest_add(s, "cwsim splits requests into the daemon's pieces", test_sim_splits_the_same);
	cwtest_add(s, "a partition served partially: EIO on a missing disk's blocks", test_partial);
	cwtest_add(s, "the keeper's zeros on a moving block are synced there",
		   test_keeper_zeros_moving);
	return cwtest_run();
}
