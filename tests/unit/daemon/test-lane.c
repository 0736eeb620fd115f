/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: a lane's dispatcher (daemon/path/lane.c) over the memory I/O
 * engine on a real pool's disk file.  Pieces are booked through the slot
 * record by short-lived threads, as connections book them; the test then
 * runs the dispatcher's steps itself, with the times it chooses, or runs
 * the dispatcher thread.  A lane without streams serves in arrival order,
 * queue_depth at a time, and a connection's reader serves its own burst
 * while the lane is idle; the first plan waits for what the FIFO started,
 * then moves the FIFO's queue into cw_sched, which serves one request at
 * a time; RT pieces take their release and deadline from cw_sched (the
 * further pieces of a request share its job), a piece done after its
 * deadline is a miss for the lane and the reservation (the CPU's when
 * the reader that booked it woke the sleeping dispatcher late); a plan's stream
 * list makes cw_sched forget released streams; errors reach the request;
 * a booking wakes the parked dispatcher while a plan's poster is held
 * between its look and its wake-up.
 */
#include "config.h"

#include "park-hold.h"

#include "daemon/path/lane.c"

#include "cwtest.h"
#include "datapath.h"

#define BS MIB			/* pool block */
#define DISK_BLOCKS 64
#define PIECE 4096

static struct dp D;
static struct pbx tx = { .name = "lane-test" };
static bool on_tmpfs;

/* ---- the request sink ----
 *
 * The lanes end a request whose pieces are all done with preq_finish
 * (preq.c); this test links with --wrap=preq_finish, so they end here
 * instead, and the request stays the test's (teardown frees it). */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct preq *order[1024];
	int err[1024];
	unsigned n;
} fin = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

void __wrap_preq_finish(struct preq *q);

void __wrap_preq_finish(struct preq *q)
{
	pthread_mutex_lock(&fin.lock);
	if (fin.n < CW_ARRAY_SIZE(fin.order)) {
		fin.order[fin.n] = q;
		fin.err[fin.n] = atomic_load(&q->err);
	}
	fin.n++;
	pthread_cond_broadcast(&fin.cond);
	pthread_mutex_unlock(&fin.lock);
}

static unsigned finished(void)
{
	unsigned n;

	pthread_mutex_lock(&fin.lock);
	n = fin.n;
	pthread_mutex_unlock(&fin.lock);
	return n;
}

/* Waits up to 30 s for n requests in all to have finished. */
static bool wait_finished(unsigned n)
{
	struct timespec ts;
	bool ok = true;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 30;
	pthread_mutex_lock(&fin.lock);
	while (fin.n < n && ok)
		ok = pthread_cond_timedwait(&fin.cond, &fin.lock, &ts) == 0;
	ok = fin.n >= n;
	pthread_mutex_unlock(&fin.lock);
	return ok;
}

/* ---- the pool, a lane, requests ---- */

static struct disk *disk1;
static struct lane *L;

/* A pool with one HDD, partition "media" on it; the first lane of the
 * disk with its engine, no dispatcher thread. */
static void setup(const char *conf)
{
	const uint64_t n[1] = { DISK_BLOCKS };

	dp_pool(&D, BS, 1, n, NULL);
	dp_part(&D, "media", 16 * MIB, CW_PLACE_SINGLE, 1);
	dp_open(&D, conf);
	tx.pb = D.pb;
	disk1 = &D.pb->disks[0];
	L = &disk1->lanes[0];
	CU_ASSERT_FATAL(disk1->fd >= 0);
	if (on_tmpfs)
		CU_ASSERT_EQUAL(disk1->io_kind, CW_IO_MEM);
	/* Deeper than the lane's queue_depth: the lane keeps its own. */
	CU_ASSERT_FATAL(cw_io_engine_new(disk1->io_kind, 64, &L->eng) == 0);
	/* Its step at the configured queue depth, in arrival order (no
	 * best-effort order: these lanes are FIFO lanes). */
	CU_ASSERT_FATAL(cw_path_lane_init(&L->pl, NULL, D.cfg->queue_depth, NULL, NULL) == 0);
	pthread_mutex_lock(&fin.lock);
	fin.n = 0;
	pthread_mutex_unlock(&fin.lock);
}

static struct preq *reqs[512];
static unsigned nreqs;

static void teardown(void)
{
	dp_close(&D);
	for (unsigned i = 0; i < nreqs; i++) {
		for (unsigned j = 0; j < reqs[i]->npieces; j++)
			if (reqs[i]->p[j].io.buf != D.pb)
				free(reqs[i]->p[j].io.buf);
		free(reqs[i]);
	}
	nreqs = 0;
}

/* A request of n pieces that arrived at arrival_ns (freed by teardown). */
static struct preq *req_new(unsigned n, int64_t arrival_ns)
{
	struct preq *q = calloc(1, sizeof(*q) + n * sizeof(struct piece));

	CU_ASSERT_FATAL(q != NULL && nreqs < CW_ARRAY_SIZE(reqs));
	q->x = &tx;
	q->cl = &tx.main;
	q->arrival_ns = arrival_ns;
	atomic_init(&q->pending, n);
	atomic_init(&q->err, 0);
	q->npieces = n;
	reqs[nreqs++] = q;
	return q;
}

/* Piece i of q: op on fd at off, len bytes of a buffer of its own. */
static struct piece *piece_set(struct preq *q, unsigned i, enum cw_io_op op, int fd,
			       uint64_t off, size_t len)
{
	struct piece *p = &q->p[i];

	*p = (struct piece){ .req = q, .lane = L };
	p->io = (struct cw_io_req){ .fd = fd, .op = op, .len = len, .off = off, .user = p,
				    .buf = cw_io_alloc(len) };
	CU_ASSERT_FATAL(p->io.buf != NULL);
	memset(p->io.buf, 0, len);
	return p;
}

static struct piece *piece_rt(struct preq *q, unsigned i, uint64_t off, struct resv *rv,
			      bool first)
{
	struct piece *p = piece_set(q, i, CW_IO_READ, disk1->fd, off, PIECE);

	p->rt = true;
	p->resv = rv;
	p->first_on_disk = first;
	return p;
}

/* Books the pieces of qs[0..n) as a connection's reader does, on a thread
 * of its own (a booking descriptor lives as long as its thread): with
 * plug, the reader's wake-ups wait for its lane_unplug(). */
struct booking {
	struct preq **qs;
	unsigned n;
	bool plug;
	int err;
};

static void *booker(void *arg)
{
	struct booking *b = arg;

	if (b->plug)
		lane_plug();
	for (unsigned i = 0; i < b->n; i++)
		for (unsigned j = 0; j < b->qs[i]->npieces; j++) {
			struct piece *p = &b->qs[i]->p[j];
			int r;

			cwd_stats_queue_change(&p->lane->st, 1);
			r = lane_push(D.pb, p);
			if (r < 0 && !b->err)
				b->err = r;
		}
	if (b->plug)
		lane_unplug();
	return NULL;
}

static void book(struct preq **qs, unsigned n, bool plug)
{
	struct booking b = { .qs = qs, .n = n, .plug = plug };
	pthread_t t;

	CU_ASSERT_FATAL(pthread_create(&t, NULL, booker, &b) == 0);
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL_FATAL(b.err, 0);
}

static unsigned fifo_len(void)
{
	unsigned n = 0;

	for (struct cw_path_item *it = L->pl.fifo; it; it = it->next)
		n++;
	return n;
}

/* Completes every request in flight on the lane at now (the engine has
 * done them: it is the memory engine, or waits for them). */
static unsigned reap_all(int64_t now)
{
	struct cw_io_req *done[REAP_BATCH];
	int n = cw_io_reap(L->eng, L->pl.inflight, -1, done, REAP_BATCH);

	CU_ASSERT_FATAL(n >= 0);
	for (int i = 0; i < n; i++)
		lane_reaped(L, done[i], now);
	return (unsigned)n;
}

/* Runs dispatcher rounds until n requests in all have finished. */
static void run_until(unsigned n)
{
	int64_t wait_until, now;

	for (unsigned i = 0; finished() < n && i < 100000; i++)
		(void)lane_step(L, &wait_until, &now);
	CU_ASSERT_EQUAL(finished(), n);
}

/* The disk's plan now, with the streams of every reservation the data
 * path holds on it, as plan_changed() posts it. */
static struct lane_plan *plan_now(void)
{
	struct lane_plan *pl = calloc(1, sizeof(*pl) + PB_RESV_MAX * sizeof(pl->streams[0]));

	CU_ASSERT_FATAL(pl != NULL);
	CU_ASSERT_FATAL(cw_admit_state_plan(D.adm, disk1->id, &pl->plan) == 0);
	for (size_t i = 0; i < D.pb->nresvs; i++) {
		const struct cw_admit_resv_part *pt = D.pb->resvs[i] ?
						      resv_part(D.pb->resvs[i], disk1->id) : NULL;

		if (pt)
			pl->streams[pl->n_streams++] = (struct cw_sched_stream){
				.id = D.pb->resvs[i]->a->stream, .period_ns = pt->task.period_ns,
				.service_ns = pt->task.service_ns };
	}
	return pl;
}

/* The data path's side of an admitted reservation. */
static struct resv *resv_of(const struct cw_admit_resv *a)
{
	struct resv *rv = dp_held(D.pb, a);

	CU_ASSERT_PTR_NOT_NULL_FATAL(rv);
	return rv;
}

static const struct cw_admit_resv *reserve(void)
{
	return dp_reserve(&D, "media", 8 * MIB, MIB, 0, 0, NULL);
}

/* ---- tests ---- */

/* Ten writes of one block, each with its own byte: they are started in
 * the order they were booked, never more than queue_depth at once, and
 * the last one booked is what the disk holds. */
static void test_fifo_order_and_depth(void)
{
	enum { N = 10, DEPTH = 4 };
	struct preq *q[N];
	unsigned max_inflight = 0, done = 0;
	int64_t now = cw_now_ns(), wait_until;
	uint8_t b[PIECE];

	setup("queue_depth = 4;");
	for (unsigned i = 0; i < N; i++) {
		q[i] = req_new(1, now);
		memset(piece_set(q[i], 0, CW_IO_WRITE, disk1->fd, 4 * BS, PIECE)->io.buf, 'a' + i,
		       PIECE);
	}
	book(q, N, false);
	CU_ASSERT_EQUAL(finished(), 0u);	/* booked, nothing started */
	lane_intake(L, now);
	CU_ASSERT_EQUAL(fifo_len(), N);
	while (done < N) {
		lane_dispatch(L, now, &wait_until);
		CU_ASSERT_EQUAL(wait_until, -1);
		CU_ASSERT_EQUAL(L->pl.inflight, cw_io_inflight(L->eng));
		CU_ASSERT_EQUAL(fifo_len(), N - done - L->pl.inflight);
		max_inflight = CW_MAX(max_inflight, L->pl.inflight);
		CU_ASSERT_FATAL(L->pl.inflight > 0);
		done += reap_all(now);
	}
	CU_ASSERT_EQUAL(max_inflight, DEPTH);
	CU_ASSERT_EQUAL_FATAL(finished(), N);
	for (unsigned i = 0; i < N; i++) {
		CU_ASSERT_PTR_EQUAL(fin.order[i], q[i]);
		CU_ASSERT_EQUAL(fin.err[i], 0);
	}
	CU_ASSERT_EQUAL_FATAL(pread(disk1->fd, b, PIECE, 4 * BS), PIECE);
	CU_ASSERT_EQUAL(b[0], 'a' + N - 1);
	CU_ASSERT_EQUAL(b[PIECE - 1], 'a' + N - 1);
	CU_ASSERT_EQUAL(cwd_stats_get(&L->st.requests), N);
	CU_ASSERT_EQUAL(cwd_stats_get(&L->st.be_done), N);
	CU_ASSERT_EQUAL(cwd_stats_get(&L->st.write_bytes), N * PIECE);
	CU_ASSERT_EQUAL(cwd_stats_get(&L->st.queued), 0);
	CU_ASSERT_EQUAL(cwd_stats_get(&L->st.queued_max), N);
	CU_ASSERT_PTR_NULL(L->pl.sched);
	teardown();
}

/* The first plan reaches a lane with two requests started and three
 * queued: nothing more starts until the two are done, then cw_sched takes
 * the three, with the plan's slack, and serves them one at a time in
 * their order. */
static void test_first_plan_takes_the_fifo(void)
{
	enum { N = 5 };
	struct cw_sched_stats ss;
	struct cw_disk_plan plan;
	struct preq *q[N];
	int64_t now = cw_now_ns(), wait_until;
	struct cw_io_req *done[1];

	setup("queue_depth = 2;");
	(void)reserve();	/* a plan with streams: a ΔL to check */
	for (unsigned i = 0; i < N; i++) {
		q[i] = req_new(1, now);
		piece_set(q[i], 0, CW_IO_READ, disk1->fd, (8 + i) * BS, PIECE);
	}
	book(q, N, false);
	lane_intake(L, now);
	lane_dispatch(L, now, &wait_until);
	CU_ASSERT_EQUAL_FATAL(L->pl.inflight, 2);
	CU_ASSERT_EQUAL(fifo_len(), 3);

	lane_post_plan(L, plan_now());
	lane_apply_plan(L, now);
	CU_ASSERT_PTR_NULL(L->pl.sched);		/* two are in flight */
	CU_ASSERT_PTR_NOT_NULL(atomic_load(&L->plan));
	CU_ASSERT_EQUAL_FATAL(cw_io_reap(L->eng, 1, -1, done, 1), 1);
	lane_reaped(L, done[0], now);
	lane_dispatch(L, now, &wait_until);
	CU_ASSERT_EQUAL(L->pl.inflight, 1);	/* the plan waits: none started */
	CU_ASSERT_EQUAL(fifo_len(), 3);
	reap_all(now);
	CU_ASSERT_EQUAL(finished(), 2);

	lane_apply_plan(L, now);
	CU_ASSERT_PTR_NOT_NULL_FATAL(L->pl.sched);
	CU_ASSERT_PTR_NULL(atomic_load(&L->plan));
	CU_ASSERT_PTR_NULL(L->pl.fifo);
	CU_ASSERT_PTR_NULL(L->pl.fifo_tail);
	cw_sched_get_stats(L->pl.sched, &ss);
	CU_ASSERT_EQUAL(ss.be_queued, 3);
	CU_ASSERT_FATAL(cw_admit_state_plan(D.adm, disk1->id, &plan) == 0);
	CU_ASSERT_EQUAL(ss.delta_l_ns, plan.be_budget_ns);
	for (unsigned i = 2; i < N; i++) {
		lane_dispatch(L, now, &wait_until);
		if (!L->pl.busy && wait_until >= now) {	/* the policy had it wait */
			now = wait_until;
			lane_dispatch(L, now, &wait_until);
		}
		CU_ASSERT_EQUAL(L->pl.inflight, 1);
		CU_ASSERT_TRUE(L->pl.busy);
		lane_dispatch(L, now, &wait_until);
		CU_ASSERT_EQUAL(L->pl.inflight, 1);	/* one in service at a time */
		CU_ASSERT_EQUAL(reap_all(now), 1);
		CU_ASSERT_FALSE(L->pl.busy);
	}
	CU_ASSERT_EQUAL_FATAL(finished(), N);
	for (unsigned i = 0; i < N; i++)
		CU_ASSERT_PTR_EQUAL(fin.order[i], q[i]);
	teardown();
}

/* Request A (two pieces) and B of one stream, and a BE request C, arrive
 * at t0: A's job is released at t0, its second piece shares it, B's job
 * comes T later.  Under EDF A runs first; its pieces finish before and
 * exactly at their deadline, B's one nanosecond after its own: one miss,
 * counted on the lane and the reservation. */
static void test_rt_release_deadline_and_misses(void)
{
	const struct cw_admit_resv *a;
	const struct cw_admit_resv_part *pt;
	struct cw_io_req *done[1];
	struct piece *a0, *a1, *b0;
	struct preq *q[3];
	struct resv *rv;
	int64_t t0, T, now, wait_until;
	unsigned ndone = 0, late = 0, at_deadline = 0;

	setup("policy = \"edf\";");	/* A's released job before B and C */
	a = reserve();
	rv = resv_of(a);
	pt = resv_part(rv, disk1->id);
	CU_ASSERT_FATAL(pt != NULL);
	T = pt->task.period_ns;
	t0 = cw_now_ns();
	lane_post_plan(L, plan_now());
	lane_apply_plan(L, t0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(L->pl.sched);

	q[0] = req_new(2, t0);
	a0 = piece_rt(q[0], 0, 2 * BS, rv, true);
	a1 = piece_rt(q[0], 1, 3 * BS, rv, false);
	q[1] = req_new(1, t0);
	b0 = piece_rt(q[1], 0, 4 * BS, rv, true);
	q[2] = req_new(1, t0);
	piece_set(q[2], 0, CW_IO_READ, disk1->fd, 5 * BS, PIECE);
	book(q, 3, false);
	now = t0 + 1000;
	lane_intake(L, now);

	CU_ASSERT_EQUAL(a0->sr.cls, CW_SCHED_RT);
	CU_ASSERT_EQUAL(a0->sr.stream, a->stream);
	CU_ASSERT_EQUAL(a0->sr.period_ns, T);
	CU_ASSERT_EQUAL(a0->sr.service_ns, pt->task.service_ns);
	CU_ASSERT_FALSE(a0->sr.same_job);
	CU_ASSERT_TRUE(a1->sr.same_job);
	CU_ASSERT_EQUAL(a0->sr.release_ns, t0);
	CU_ASSERT_EQUAL(a0->sr.deadline_ns, t0 + T);
	CU_ASSERT_EQUAL(a1->sr.release_ns, a0->sr.release_ns);
	CU_ASSERT_EQUAL(a1->sr.deadline_ns, a0->sr.deadline_ns);
	CU_ASSERT_EQUAL(b0->sr.release_ns, t0 + T);
	CU_ASSERT_EQUAL(b0->sr.deadline_ns, t0 + 2 * T);
	CU_ASSERT_EQUAL(q[2]->p[0].sr.cls, CW_SCHED_BE);

	for (unsigned guard = 0; ndone < 4 && guard < 100; guard++) {
		struct piece *p;
		int64_t end;

		lane_dispatch(L, now, &wait_until);
		if (!L->pl.busy) {
			CU_ASSERT_FATAL(wait_until >= now);
			now = wait_until;
			continue;
		}
		CU_ASSERT_EQUAL_FATAL(cw_io_reap(L->eng, 1, -1, done, 1), 1);
		p = done[0]->user;
		end = p == b0 ? p->sr.deadline_ns + 1 : p == a1 ? p->sr.deadline_ns : now;
		now = CW_MAX(now, end);
		if (p->rt && now > p->sr.deadline_ns)
			late++;
		if (p->rt && now == p->sr.deadline_ns)
			at_deadline++;
		lane_reaped(L, done[0], now);
		ndone++;
	}
	CU_ASSERT_EQUAL_FATAL(ndone, 4);
	CU_ASSERT_EQUAL(finished(), 3);
	CU_ASSERT_EQUAL(late, 1);		/* B */
	CU_ASSERT(at_deadline >= 1);		/* A's second piece, at least */
	CU_ASSERT_EQUAL(cwd_stats_get(&L->st.rt_missed), late);
	CU_ASSERT_EQUAL(cwd_stats_get(&rv->st.rt_missed), late);
	CU_ASSERT_EQUAL(cwd_stats_get(&L->st.rt_done), 3);
	CU_ASSERT_EQUAL(cwd_stats_get(&rv->st.rt_done), 3);
	CU_ASSERT_EQUAL(cwd_stats_get(&rv->st.read_bytes), 3 * PIECE);
	CU_ASSERT_EQUAL(cwd_stats_get(&L->st.be_done), 1);
	teardown();
}

/* A stream's request booked while the dispatcher slept with no wake-up
 * set, its reader then off the CPU for 5 ms before it woke the
 * dispatcher: started after its deadline, the miss is the CPU's.  The
 * same miss without the reader's record of its late wake-up has no cause
 * the dispatcher saw, and is the schedule's. */
static void late_wake_miss(bool kept)
{
	const struct cw_admit_resv *a;
	struct cw_io_req *done[1];
	struct piece *p;
	struct preq *q;
	struct resv *rv;
	int64_t t0, now, wait_until;
	int fd = rundelay_open();

	setup("policy = \"edf\";");
	a = reserve();
	rv = resv_of(a);
	t0 = cw_now_ns();
	lane_post_plan(L, plan_now());
	lane_apply_plan(L, t0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(L->miss);

	q = req_new(1, t0);
	p = piece_rt(q, 0, 2 * BS, rv, true);
	book(&q, 1, false);
	CU_ASSERT_FATAL(p->booked_ns >= t0);
	usleep(2000);
	/* the reader's run delay since the booking: 5 ms */
	if (kept && fd >= 0)
		lane_miss_woke(L, p->booked_ns, fd, rundelay_read(fd) - 5 * CW_NS_PER_MS);
	now = cw_now_ns();
	lane_miss_slept(L, t0 - 100 * CW_NS_PER_US, now, -1);

	lane_intake(L, now);
	now = CW_MAX(now, p->sr.deadline_ns + 400 * CW_NS_PER_US);
	lane_dispatch(L, now, &wait_until);
	CU_ASSERT_TRUE_FATAL(L->pl.busy);
	CU_ASSERT_EQUAL_FATAL(cw_io_reap(L->eng, 1, -1, done, 1), 1);
	lane_reaped(L, done[0], now + 100 * CW_NS_PER_US);
	CU_ASSERT_EQUAL(finished(), 1);
	CU_ASSERT_EQUAL(cwd_stats_get(&L->st.rt_missed), 1);
	if (kept && fd >= 0) {
		CU_ASSERT_EQUAL(cwd_stats_get(&L->st.miss[CW_MISS_CPU]), 1);
		CU_ASSERT_EQUAL(cwd_stats_get(&rv->st.miss[CW_MISS_CPU]), 1);
	} else if (!kept) {
		CU_ASSERT_EQUAL(cwd_stats_get(&L->st.miss[CW_MISS_SCHED]), 1);
	}
	lane_miss_drain(L);
	if (fd >= 0)
		close(fd);
	teardown();
}

static void test_late_wake_is_the_cpus(void)
{
	late_wake_miss(true);
	late_wake_miss(false);
}

/* On a lane with a stream, best effort runs in what the stream leaves,
 * and its time counts as slack used, whether ΔL_r or an idle disk gave
 * the room: the operator's SLACK-USED. */
static void test_be_counts_slack(void)
{
	struct cw_io_req *done[1];
	struct preq *q[2];
	int64_t t0, now, wait_until;
	unsigned ndone = 0;

	setup("policy = \"delta-l\";");
	reserve();
	t0 = cw_now_ns();
	lane_post_plan(L, plan_now());
	lane_apply_plan(L, t0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(L->pl.sched);
	for (unsigned i = 0; i < 2; i++) {
		q[i] = req_new(1, t0);
		piece_set(q[i], 0, CW_IO_READ, disk1->fd, (5 + i) * BS, PIECE);
	}
	book(q, 2, false);
	now = t0 + 1000;
	lane_intake(L, now);
	for (unsigned guard = 0; ndone < 2 && guard < 100; guard++) {
		struct piece *p;

		lane_dispatch(L, now, &wait_until);
		if (!L->pl.busy) {
			now = CW_MAX(now, wait_until);
			continue;
		}
		CU_ASSERT_EQUAL_FATAL(cw_io_reap(L->eng, 1, -1, done, 1), 1);
		p = done[0]->user;
		CU_ASSERT(p->sr.via == CW_SCHED_VIA_IDLE || p->sr.via == CW_SCHED_VIA_SLACK);
		now = p->start_ns + 5000;	/* each takes 5 us of the disk */
		lane_reaped(L, done[0], now);
		ndone++;
	}
	CU_ASSERT_EQUAL_FATAL(ndone, 2);
	CU_ASSERT_EQUAL(cwd_stats_get(&L->st.be_done), 2);
	CU_ASSERT_EQUAL(cwd_stats_get(&L->st.slack_used_ns), 10000);
	teardown();
}

/* Two streams ran on the lane; the plan after the first one's release
 * lists the second only, and cw_sched keeps only that one; a plan with no
 * streams leaves none. */
static void test_plan_forgets_released_streams(void)
{
	const struct cw_admit_resv *a1, *a2;
	struct cw_sched_stream ss;
	struct cw_sched_stats st;
	struct cw_disk_plan plan;
	struct preq *q[2];
	uint64_t s1, s2;

	setup(NULL);
	a1 = reserve();
	a2 = reserve();
	s1 = a1->stream;
	s2 = a2->stream;
	lane_post_plan(L, plan_now());
	q[0] = req_new(1, cw_now_ns());
	piece_rt(q[0], 0, 2 * BS, resv_of(a1), true);
	q[1] = req_new(1, cw_now_ns());
	piece_rt(q[1], 0, 3 * BS, resv_of(a2), true);
	book(q, 2, false);
	run_until(2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(L->pl.sched);
	CU_ASSERT_EQUAL(cw_sched_stream_count(L->pl.sched), 2);

	CU_ASSERT_FATAL(cw_admit_state_release(D.adm, a1->id, NULL) == 0);
	lane_post_plan(L, plan_now());
	lane_apply_plan(L, cw_now_ns());
	CU_ASSERT_EQUAL(cw_sched_stream_count(L->pl.sched), 1);
	CU_ASSERT_EQUAL(cw_sched_stream_get(L->pl.sched, s1, &ss), -ENOENT);
	CU_ASSERT_EQUAL(cw_sched_stream_get(L->pl.sched, s2, &ss), 0);
	/* ...and the slack of the set that is left. */
	CU_ASSERT_FATAL(cw_admit_state_plan(D.adm, disk1->id, &plan) == 0);
	cw_sched_get_stats(L->pl.sched, &st);
	CU_ASSERT_EQUAL(st.delta_l_ns, plan.be_budget_ns);

	lane_post_plan(L, calloc(1, sizeof(struct lane_plan)));
	lane_apply_plan(L, cw_now_ns());
	CU_ASSERT_EQUAL(cw_sched_stream_count(L->pl.sched), 0);
	teardown();
}

/* A request whose first piece cannot be written (a descriptor opened
 * read-only) and whose second reads past the end of the disk fails with
 * the first error, once, after both; the next request is served; the
 * same under cw_sched, which is then free for the next request. */
static void test_errors_reach_the_request(void)
{
	char path[160];
	struct preq *q[3];
	int ro;

	setup(NULL);
	dp_disk_path(&D, 1, path, sizeof(path));
	ro = open(path, O_RDONLY | O_CLOEXEC);
	CU_ASSERT_FATAL(ro >= 0);
	q[0] = req_new(2, cw_now_ns());
	piece_set(q[0], 0, CW_IO_WRITE, ro, 2 * BS, PIECE);
	piece_set(q[0], 1, CW_IO_READ, disk1->fd, DISK_BLOCKS * BS, PIECE);
	q[1] = req_new(1, cw_now_ns());
	piece_set(q[1], 0, CW_IO_READ, disk1->fd, 2 * BS, PIECE);
	book(q, 2, false);
	run_until(2);
	CU_ASSERT_PTR_EQUAL(fin.order[0], q[0]);
	CU_ASSERT_EQUAL(fin.err[0], -EBADF);
	CU_ASSERT_PTR_EQUAL(fin.order[1], q[1]);
	CU_ASSERT_EQUAL(fin.err[1], 0);
	CU_ASSERT_EQUAL(cwd_stats_get(&L->st.errors), 2);
	CU_ASSERT_EQUAL(cwd_stats_get(&L->st.requests), 3);
	CU_ASSERT_EQUAL(atomic_load(&disk1->nerrors), 2);

	lane_post_plan(L, plan_now());
	q[2] = req_new(1, cw_now_ns());
	piece_set(q[2], 0, CW_IO_READ, disk1->fd, DISK_BLOCKS * BS + BS, PIECE);
	book(&q[2], 1, false);
	run_until(3);
	CU_ASSERT_PTR_NOT_NULL(L->pl.sched);
	CU_ASSERT_EQUAL(fin.err[2], -EIO);
	CU_ASSERT_FALSE(L->pl.busy);
	q[0] = req_new(1, cw_now_ns());
	piece_set(q[0], 0, CW_IO_READ, disk1->fd, 2 * BS, PIECE);
	book(q, 1, false);
	run_until(4);
	CU_ASSERT_EQUAL(fin.err[3], 0);
	close(ro);
	teardown();
}

/* With no dispatcher thread at all, a reader's burst on an idle lane
 * without streams is done when its lane_unplug() returns; not a piece
 * over 128 KiB (left to the dispatcher), and not on a disk with streams. */
static void test_reader_serves_its_burst(void)
{
	struct preq *q[3];

	setup(NULL);
	for (unsigned i = 0; i < 3; i++) {
		q[i] = req_new(1, cw_now_ns());
		piece_set(q[i], 0, CW_IO_READ, disk1->fd, (2 + i) * BS, PIECE);
	}
	book(q, 3, true);
	CU_ASSERT_EQUAL(finished(), 3);
	CU_ASSERT_EQUAL(L->pl.inflight, 0);
	CU_ASSERT_FALSE(atomic_load(&L->handback));
	CU_ASSERT_FALSE(lane_has_bookings(L));

	q[0] = req_new(1, cw_now_ns());
	piece_set(q[0], 0, CW_IO_READ, disk1->fd, 2 * BS, 256 << 10);
	book(q, 1, true);
	CU_ASSERT_EQUAL(finished(), 3);
	CU_ASSERT_TRUE(lane_has_bookings(L));
	run_until(4);

	atomic_store(&disk1->live_streams, true);
	q[0] = req_new(1, cw_now_ns());
	piece_set(q[0], 0, CW_IO_READ, disk1->fd, 2 * BS, PIECE);
	book(q, 1, true);
	CU_ASSERT_EQUAL(finished(), 4);
	CU_ASSERT_TRUE(lane_has_bookings(L));
	run_until(5);
	teardown();
}

/* The dispatcher thread with four threads booking writes at once and a
 * plan posted meanwhile: every request finishes once, without error,
 * its data on the disk, and the lane ends under cw_sched. */
enum { WRITERS = 4, PER_WRITER = 64 };

static void *writer(void *arg)
{
	struct booking *b = arg;

	booker(b);
	return NULL;
}

static void test_dispatcher_thread(void)
{
	static struct preq *q[WRITERS][PER_WRITER];
	struct booking b[WRITERS];
	pthread_t t[WRITERS], disp;
	bool seen[WRITERS][PER_WRITER] = { { false } };
	uint8_t buf[PIECE];

	setup(NULL);
	for (unsigned w = 0; w < WRITERS; w++) {
		for (unsigned i = 0; i < PER_WRITER; i++) {
			q[w][i] = req_new(1, cw_now_ns());
			memset(piece_set(q[w][i], 0, CW_IO_WRITE, disk1->fd,
					 BS + (uint64_t)(w * PER_WRITER + i) * PIECE, PIECE)->io.buf,
			       (int)(w * PER_WRITER + i) & 0xff, PIECE);
		}
		b[w] = (struct booking){ .qs = q[w], .n = PER_WRITER };
	}
	CU_ASSERT_FATAL(pthread_create(&disp, NULL, lane_main, L) == 0);
	for (unsigned w = 0; w < WRITERS; w++)
		CU_ASSERT_FATAL(pthread_create(&t[w], NULL, writer, &b[w]) == 0);
	lane_post_plan(L, plan_now());
	for (unsigned w = 0; w < WRITERS; w++)
		pthread_join(t[w], NULL);
	CU_ASSERT(wait_finished(WRITERS * PER_WRITER));
	lane_stop(L);
	pthread_join(disp, NULL);

	CU_ASSERT_EQUAL(finished(), WRITERS * PER_WRITER);
	for (unsigned i = 0; i < WRITERS * PER_WRITER && i < fin.n; i++) {
		CU_ASSERT_EQUAL(fin.err[i], 0);
		for (unsigned w = 0; w < WRITERS; w++)
			for (unsigned j = 0; j < PER_WRITER; j++)
				if (fin.order[i] == q[w][j]) {
					CU_ASSERT_FALSE(seen[w][j]);
					seen[w][j] = true;
				}
	}
	for (unsigned w = 0; w < WRITERS; w++) {
		CU_ASSERT_EQUAL(b[w].err, 0);
		for (unsigned j = 0; j < PER_WRITER; j++) {
			unsigned k = w * PER_WRITER + j;

			CU_ASSERT(seen[w][j]);
			CU_ASSERT_EQUAL(pread(disk1->fd, buf, PIECE, BS + (uint64_t)k * PIECE), PIECE);
			CU_ASSERT_EQUAL(buf[0], k & 0xff);
			CU_ASSERT_EQUAL(buf[PIECE - 1], k & 0xff);
		}
	}
	CU_ASSERT_EQUAL(cwd_stats_get(&L->st.requests), WRITERS * PER_WRITER);
	CU_ASSERT_EQUAL(cwd_stats_get(&L->st.errors), 0);
	CU_ASSERT_PTR_NOT_NULL(L->pl.sched);
	CU_ASSERT_PTR_NULL(atomic_load(&L->plan));
	teardown();
}

/*
 * A dispatcher parked with nothing to do; a thread posting a plan loses
 * its CPU between its look at the dispatcher and its wake-up (held here);
 * a reader books a request meanwhile.  The request is served at once, not
 * when the poster runs again.  On a loaded host a dispatcher slept up to
 * 134 ms through four of a stream's bookings that way (three runs in
 * 111 of test-clockwised-host's stream): a waker that is not real-time (most
 * likely one posting a plan: the control or the service thread) had lowered
 * the flag the readers look at and not yet made its wake-up call.
 */
static void *held_poster(void *arg)
{
	park_held = true;
	lane_post_plan(L, arg);
	return NULL;
}

static void test_held_waker_holds_back_no_booking(void)
{
	struct preq *q[2];
	pthread_t disp, poster;
	int64_t t;

	setup(NULL);
	CU_ASSERT_FATAL(park_hold_init() == 0);
	for (unsigned i = 0; i < 2; i++) {
		q[i] = req_new(1, cw_now_ns());
		piece_set(q[i], 0, CW_IO_WRITE, disk1->fd, BS + i * PIECE, PIECE);
	}
	CU_ASSERT_FATAL(pthread_create(&disp, NULL, lane_main, L) == 0);
	lane_post_plan(L, plan_now());
	book(&q[0], 1, false);
	CU_ASSERT_FATAL(wait_finished(1));
	/* parked, and (given the time) asleep */
	for (int i = 0; i < 5000 && !atomic_load(&L->park.parked); i++)
		nanosleep(&(struct timespec){ 0, CW_NS_PER_MS }, NULL);
	CU_ASSERT_FATAL(atomic_load(&L->park.parked));
	nanosleep(&(struct timespec){ 0, 50 * CW_NS_PER_MS }, NULL);

	CU_ASSERT_FATAL(pthread_create(&poster, NULL, held_poster, plan_now()) == 0);
	park_hold_reached();
	t = cw_now_ns();
	book(&q[1], 1, false);
	while (finished() < 2 && cw_now_ns() - t < 2 * CW_NS_PER_S)
		nanosleep(&(struct timespec){ 0, CW_NS_PER_MS }, NULL);
	CU_ASSERT_EQUAL(finished(), 2);

	park_hold_release();
	pthread_join(poster, NULL);
	CU_ASSERT(wait_finished(2));
	lane_stop(L);
	pthread_join(disp, NULL);
	CU_ASSERT_EQUAL(fin.err[1], 0);
	park_hold_fini();
	teardown();
}

int main(void)
{
	CU_pSuite s = cwtest_suite("daemon lane", NULL, NULL);

	on_tmpfs = dp_use_tmpfs();
	if (!on_tmpfs)
		fprintf(stderr, "no memory file system: the disks' engine is not the memory one\n");
	cwd_log_set_level(LOG_WARNING);
	cwtest_add(s, "FIFO order and queue depth", test_fifo_order_and_depth);
	cwtest_add(s, "the first plan takes the FIFO's queue into cw_sched",
		   test_first_plan_takes_the_fifo);
	cwtest_add(s, "RT release, deadline, same job, misses", test_rt_release_deadline_and_misses);
	cwtest_add(s, "a reader's late wake-up: a miss the CPU's", test_late_wake_is_the_cpus);
	cwtest_add(s, "a plan forgets released streams", test_plan_forgets_released_streams);
	cwtest_add(s, "best effort beside a stream counts as slack used", test_be_counts_slack);
	cwtest_add(s, "errors reach the request", test_errors_reach_the_request);
	cwtest_add(s, "a reader serves its burst on an idle lane", test_reader_serves_its_burst);
	cwtest_add(s, "the dispatcher thread with concurrent bookings", test_dispatcher_thread);
	cwtest_add(s, "a held waker holds back no booking", test_held_waker_holds_back_no_booking);
	return cwtest_run();
}
