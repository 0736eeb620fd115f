/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Misses explained, on a lane with streams: what the dispatcher keeps so
 * that a deadline missed can be put down to its cause
 * (cw_sched_miss_classify), counted by class for the disk and the
 * reservation, and logged once with its timeline.
 *
 * The dispatcher samples, at each round, how long it has waited for a CPU
 * while runnable (the run delay of /proc/thread-self/schedstat: one pread
 * of a descriptor opened by the thread itself), so the service time of a
 * request is what the disk took, its wait for the dispatcher left out.  A
 * request that took longer than its charge is remembered (a ring of the
 * last OVERRUNS); a late RT request is then classified from its own
 * times, the run delay since its release, and the overruns of its window.
 * Each request's service also feeds the disk's overrun watch: when the
 * model stops holding, the proposed margin is posted for the control
 * thread (pb_misses_tick), which raises the model and re-admits.
 *
 * Nothing here allocates, logs or blocks: a miss's record goes into a
 * ring the control or main thread drains (pb_misses_tick); when the
 * ring is full the record is dropped and counted.
 */
#include "config.h"

#include <fcntl.h>
#include <sched.h>

#include "daemon/path/pool-internal.h"
#include "daemon/path/rt-neighbours.h"
#include "daemon/rundelay.h"

#define RD_SAMPLES 256		/* run-delay samples kept (power of two) */
#define OVERRUNS 64		/* overruns kept (power of two) */
#define MISS_LOG 64		/* miss records waiting to be logged (power of two) */
/* An emulator's lag below this is its timer's and the clock's noise (its
 * own warning starts at 1 ms too, pool-emu.c). */
#define EMU_LAG_MIN_NS CW_NS_PER_MS
#define DELIVERY_LOG 16		/* late replies waiting to be logged */
#define SLEEPS 64		/* the dispatcher's sleeps kept (power of two) */
#define ROUNDS 16		/* its long rounds kept (power of two) */
#define ROUND_LONG_NS CW_NS_PER_MS	/* a round this long is kept */
#define LATE_WAKES 16		/* late wake-ups kept (power of two) */

struct rd_sample {
	int64_t t, rd;
};

struct overrun {
	int64_t start, done, over;
	/* on an emulated disk: how long after the emulated disk had done it
	 * the request came back (its backing store's lag, the host's) */
	int64_t lag;
	int64_t charged;		/* its charge */
	size_t len;
	enum cw_io_op op;
	bool rt;
};

struct sleep {
	int64_t from, to, until;
};

/* A long round of the dispatcher: from before it took the dispatch lock
 * to after it let it go, locked the instant it had the lock. */
struct round {
	int64_t from, locked, to;
};

/* A reader that booked an RT request at booked and woke the dispatcher
 * only at woke, having waited rd of that for a CPU. */
struct late_wake {
	int64_t booked, woke, rd;
};

struct miss_rec {
	struct cw_sched_miss m;
	enum cw_sched_miss_class cls;
	uint64_t stream;		/* the reservation's stream id */
	uint64_t resv;			/* its id (0: a start-up one) */
	size_t len;
	int64_t lag_at;			/* done time of the lag blamed (0: none) */
	int64_t lag_len;
	enum cw_io_op lag_op;
	bool lag_rt;
	int64_t overrun_at;		/* done time of the overrun blamed, or 0 */
	int64_t overrun_charged;	/* its charge */
	size_t overrun_len;
	enum cw_io_op overrun_op;
	bool overrun_rt;
	struct sleep longest;		/* the dispatcher's longest sleep in slept_ns */
	struct round round;		/* its longest round from booking to start */
	bool parked_memory;		/* the reader parked for memory, not a slot */
	int64_t push_wait_ns;		/* it waited for room in the lane's record */
	int64_t arrival_ns;		/* its request on the connection */
	int64_t woke_ns;		/* its reader woke the dispatcher late (0: not) */
	int64_t woke_rd_ns;		/* the reader's CPU wait before that wake-up */
};

struct lane_miss {
	int rd_fd;
	struct rd_sample rds[RD_SAMPLES];
	uint64_t nrd;
	bool fresh;			/* the latest sample is the reap's, not yet a round's */
	struct overrun ovr[OVERRUNS];
	uint64_t novr;
	struct sleep sleeps[SLEEPS];
	uint64_t nsleeps;
	struct round rounds[ROUNDS];
	uint64_t nrounds;
	struct cw_sched_overrun_watch watch;
	/* the log ring: the dispatcher writes at head, the drainer reads
	 * at tail */
	struct miss_rec log[MISS_LOG];
	atomic_uint_fast64_t head, tail, dropped;
	/* late replies: any writer thread adds one if it gets the lock at
	 * once (else it is only counted), the drainer takes them all */
	atomic_flag dl_lock;
	unsigned n_dl;
	struct delivery_rec {
		uint64_t stream, resv;
		int64_t deadline_ns, ready_ns, began_ns, sent_ns, cpu_wait_ns;
	} dl[DELIVERY_LOG];
	/* late wake-ups: any reader adds one if it gets the lock at once,
	 * the dispatcher looks a missed request's up the same way */
	atomic_flag lw_lock;
	uint64_t nlw;
	struct late_wake lw[LATE_WAKES];
};

int lane_miss_new(struct lane *l)
{
	struct lane_miss *lm;

	if (l->miss)
		return 0;
	lm = calloc(1, sizeof(*lm));
	if (!lm)
		return -ENOMEM;
	lm->rd_fd = rundelay_open();
	atomic_flag_clear(&lm->dl_lock);
	atomic_flag_clear(&lm->lw_lock);
	cw_sched_overrun_watch_init(&lm->watch);
	l->miss = lm;
	atomic_store_explicit(&l->miss_pub, lm, memory_order_release);
	return 0;
}

void lane_miss_free(struct lane *l)
{
	if (!l->miss)
		return;
	if (l->miss->rd_fd >= 0)
		close(l->miss->rd_fd);
	free(l->miss);
	l->miss = NULL;
	atomic_store_explicit(&l->miss_pub, NULL, memory_order_relaxed);
}

/* The dispatcher's run delay so far. */
static int64_t run_delay(struct lane_miss *lm)
{
	return rundelay_read(lm->rd_fd);
}

static void take_sample(struct lane_miss *lm, int64_t now)
{
	lm->rds[lm->nrd++ % RD_SAMPLES] = (struct rd_sample){ now, run_delay(lm) };
}

/* One sample per round: the round after a reap (which comes at once)
 * takes the reap's, so a request costs one pread, not two. */
void lane_miss_sample(struct lane *l, int64_t now)
{
	struct lane_miss *lm = l->miss;

	if (!lm)
		return;
	if (lm->fresh) {
		lm->fresh = false;
		return;
	}
	take_sample(lm, now);
}

void lane_miss_reaped(struct lane *l, int64_t now)
{
	struct lane_miss *lm = l->miss;

	if (!lm)
		return;
	take_sample(lm, now);
	lm->fresh = true;
}

/* The latest sample's run delay. */
static int64_t rd_last(const struct lane_miss *lm)
{
	return lm->nrd ? lm->rds[(lm->nrd - 1) % RD_SAMPLES].rd : 0;
}

/* The run delay at the latest sample at or before t (the oldest kept if
 * none is that old). */
static int64_t rd_at(const struct lane_miss *lm, int64_t t)
{
	uint64_t n = CW_MIN(lm->nrd, (uint64_t)RD_SAMPLES);

	for (uint64_t i = 1; i <= n; i++) {
		const struct rd_sample *s = &lm->rds[(lm->nrd - i) % RD_SAMPLES];

		if (s->t <= t || i == n)
			return s->rd;
	}
	return 0;
}

void lane_miss_started(struct lane *l, struct piece *p)
{
	if (l->miss)
		p->rd_start = rd_last(l->miss);
}

void lane_miss_slept(struct lane *l, int64_t from, int64_t to, int64_t until)
{
	struct lane_miss *lm = l->miss;

	/* the dispatcher sleeps between rounds: a sleep of no length is
	 * not one worth a slot */
	if (lm && to - from >= CW_MISS_CPU_TOLERANCE_NS)
		lm->sleeps[lm->nsleeps++ % SLEEPS] = (struct sleep){ from, to, until };
}

void lane_miss_round(struct lane *l, int64_t from, int64_t locked, int64_t to)
{
	struct lane_miss *lm = l->miss;

	if (lm && to - from >= ROUND_LONG_NS)
		lm->rounds[lm->nrounds++ % ROUNDS] = (struct round){ from, locked, to };
}

/* The dispatcher's longest round overlapping [from, to) ({0} if none was
 * long): a miss whose request waited while it was busy or blocked in a
 * round, not asleep, shows it. */
static struct round longest_round(const struct lane_miss *lm, int64_t from, int64_t to)
{
	uint64_t n = CW_MIN(lm->nrounds, (uint64_t)ROUNDS);
	struct round best = { 0 };

	for (uint64_t i = 1; i <= n; i++) {
		const struct round *r = &lm->rounds[(lm->nrounds - i) % ROUNDS];

		if (r->to <= from)
			break;
		if (r->from < to && r->to - r->from > best.to - best.from)
			best = *r;
	}
	return best;
}

/* How long the dispatcher slept within [from, to), and its longest sleep
 * there. */
static int64_t slept_in(const struct lane_miss *lm, int64_t from, int64_t to, struct sleep *longest)
{
	uint64_t n = CW_MIN(lm->nsleeps, (uint64_t)SLEEPS);
	int64_t sum = 0, best = 0;

	*longest = (struct sleep){ 0, 0, -1 };
	for (uint64_t i = 1; i <= n; i++) {
		const struct sleep *s = &lm->sleeps[(lm->nsleeps - i) % SLEEPS];
		int64_t a = CW_MAX(s->from, from), b = CW_MIN(s->to, to);

		if (s->to <= from)
			break;
		if (b <= a)
			continue;
		sum += b - a;
		if (b - a > best) {
			best = b - a;
			*longest = *s;
		}
	}
	return sum;
}

void lane_miss_woke(struct lane *l, int64_t booked_ns, int rd_fd, int64_t rd_booked)
{
	struct lane_miss *lm;
	int64_t now = cw_now_ns(), rd = 0;

	if (now - booked_ns <= CW_MISS_CPU_TOLERANCE_NS)
		return;
	lm = atomic_load_explicit(&l->miss_pub, memory_order_acquire);
	if (!lm)
		return;
	if (rd_fd >= 0)
		rd = CW_MAX(rundelay_read(rd_fd) - rd_booked, 0);
	/* another reader writing, or the dispatcher reading: not kept */
	if (atomic_flag_test_and_set_explicit(&lm->lw_lock, memory_order_acquire))
		return;
	lm->lw[lm->nlw++ % LATE_WAKES] = (struct late_wake){ booked_ns, now, rd };
	atomic_flag_clear_explicit(&lm->lw_lock, memory_order_release);
}

/* The late wake-up of the request booked at booked ({0}: none kept). */
static struct late_wake late_wake_of(struct lane_miss *lm, int64_t booked)
{
	struct late_wake w = { 0 };
	uint64_t n;

	if (!booked || atomic_flag_test_and_set_explicit(&lm->lw_lock, memory_order_acquire))
		return w;
	n = CW_MIN(lm->nlw, (uint64_t)LATE_WAKES);
	for (uint64_t i = 1; i <= n; i++)
		if (lm->lw[(lm->nlw - i) % LATE_WAKES].booked == booked) {
			w = lm->lw[(lm->nlw - i) % LATE_WAKES];
			break;
		}
	atomic_flag_clear_explicit(&lm->lw_lock, memory_order_release);
	return w;
}

/* The largest overrun (lag: the largest emulator's lag) of another
 * request in service in [from, to); NULL if none was over. */
static const struct overrun *worst_overrun(const struct lane_miss *lm, int64_t from, int64_t to,
					   int64_t start_self, bool lag)
{
	uint64_t n = CW_MIN(lm->novr, (uint64_t)OVERRUNS);
	const struct overrun *w = NULL;

	for (uint64_t i = 1; i <= n; i++) {
		const struct overrun *o = &lm->ovr[(lm->novr - i) % OVERRUNS];
		int64_t v = lag ? o->lag : o->over;

		if (o->done <= from)
			break;
		if (o->start == start_self || o->start >= to || v <= 0)
			continue;
		if (!w || v > (lag ? w->lag : w->over))
			w = o;
	}
	return w;
}

/* A proposed margin (a factor > 1, in ppm above 1) for the control
 * thread; the larger wins until it is taken. */
static void propose_margin(struct disk *d, double factor)
{
	uint64_t ppm = (uint64_t)((factor - 1.0) * 1e6) + 1, old;

	old = atomic_load_explicit(&d->margin_proposal_ppm, memory_order_relaxed);
	while (old < ppm && !atomic_compare_exchange_weak(&d->margin_proposal_ppm, &old, ppm))
		;
}

void lane_miss_done(struct lane *l, struct piece *p, int64_t now)
{
	struct lane_miss *lm = l->miss;
	const struct cw_sched_req *sr = &p->sr;
	int64_t rd, cpu_service, disk_ns, over, lag = 0;
	double margin;

	if (!lm)
		return;
	rd = rd_last(lm);	/* lane_miss_reaped's, taken at now */
	cpu_service = CW_MAX(rd - p->rd_start, 0);
	disk_ns = CW_MAX(now - p->start_ns - cpu_service, 0);
	/* An emulated disk's time is the emulator's (disk_ns of its engine);
	 * what the request took beyond it is its backing store's lag, the
	 * host's, and no overrun of the disk's (served_alone alike). */
	if (l->disk->emulate && p->io.disk_ns > 0) {
		lag = CW_MAX(disk_ns - p->io.disk_ns, 0);
		disk_ns = p->io.disk_ns;
		if (lag < EMU_LAG_MIN_NS)
			lag = 0;
	}
	over = disk_ns - sr->service_ns;
	if (sr->service_ns > 0 && (over > 0 || lag > 0)) {
		/* A flush overrunning its charge (that of a small request)
		 * spends slack like any other request and is blamed like one. */
		lm->ovr[lm->novr++ % OVERRUNS] = (struct overrun){
			.start = p->start_ns, .done = now, .over = CW_MAX(over, 0), .lag = lag,
			.charged = sr->service_ns, .len = p->io.len, .op = p->io.op, .rt = p->rt };
	}
	if (sr->service_ns > 0 && over > 0) {
		if (!p->rt) {
			cwd_stats_add(&l->st.be_overruns, 1);
			cwd_stats_add(&l->st.be_overrun_ns, (uint64_t)over);
		}
	}
	/* The model's margin answers for transfers only: how long a flush
	 * takes depends on what was written before it, not on the model. */
	if (p->io.op != CW_IO_FSYNC && sr->service_ns > 0 &&
	    cw_sched_overrun_watch_add(&lm->watch, sr->service_ns, disk_ns, &margin) == 1)
		propose_margin(l->disk, margin);
	if (p->rt && now > sr->deadline_ns) {
		struct cw_sched_miss m = {
			.release_ns = sr->release_ns, .deadline_ns = sr->deadline_ns,
			.start_ns = p->start_ns, .done_ns = now, .charged_ns = sr->service_ns,
			.cpu_wait_service_ns = cpu_service,
			.cpu_wait_window_ns = CW_MAX(rd - rd_at(lm, sr->release_ns), 0),
			.cpu_wait_reader_ns = CW_MAX(p->req->reader_cpu_ns, 0),
			.booked_ns = p->booked_ns, .taken_ns = p->taken_ns,
			.reader_parked_ns = p->req->parked_ns,
		};
		struct sleep longest;
		const struct overrun *o = worst_overrun(lm, sr->release_ns, now, p->start_ns, false);
		const struct overrun *g = worst_overrun(lm, sr->release_ns, now, p->start_ns, true);
		struct late_wake w = late_wake_of(lm, p->booked_ns);
		enum cw_sched_miss_class c;
		uint64_t h;

		/* A reader that woke the dispatcher late delayed the request
		 * only as long as the dispatcher slept meanwhile, not knowing
		 * of it. */
		if (w.woke)
			m.cpu_wait_wake_ns = CW_MIN(w.rd, slept_in(lm, w.booked, w.woke, &longest));

		m.slept_ns = slept_in(lm, p->booked_ns ? p->booked_ns : sr->release_ns, p->start_ns,
				      &longest);
		m.other_overrun_ns = o ? o->over : 0;
		m.other_overrun_rt = o && o->rt;
		m.emu_lag_own_ns = lag;
		m.emu_lag_ns = CW_MAX(lag, g ? g->lag : 0);
		c = cw_sched_miss_classify(&m);
		cwd_stats_add(&l->st.miss[c], 1);
		cwd_stats_add(&p->resv->st.miss[c], 1);
		h = atomic_load_explicit(&lm->head, memory_order_relaxed);
		if (h - atomic_load_explicit(&lm->tail, memory_order_acquire) >= MISS_LOG) {
			cwd_stats_add(&lm->dropped, 1);
			return;
		}
		lm->log[h % MISS_LOG] = (struct miss_rec){
			.m = m, .cls = c, .stream = p->resv->a->stream,
			.resv = p->resv->a->persistent ? p->resv->a->id : 0, .len = p->io.len,
			.lag_at = g && g->lag > lag ? g->done : lag ? now : 0,
			.lag_len = g && g->lag > lag ? (int64_t)g->len : (int64_t)p->io.len,
			.lag_op = g && g->lag > lag ? g->op : p->io.op,
			.lag_rt = g && g->lag > lag ? g->rt : true,
			.overrun_at = o ? o->done : 0, .overrun_rt = o && o->rt,
			.overrun_charged = o ? o->charged : 0, .overrun_len = o ? o->len : 0,
			.overrun_op = o ? o->op : CW_IO_READ, .longest = longest,
			.round = longest_round(lm, p->booked_ns ? p->booked_ns : sr->release_ns,
					       p->start_ns),
			.parked_memory = p->req->parked_memory, .push_wait_ns = p->push_wait_ns,
			.arrival_ns = p->req->arrival_ns, .woke_ns = w.woke,
			.woke_rd_ns = w.rd };
		atomic_store_explicit(&lm->head, h + 1, memory_order_release);
	}
}

/* A reply of an RT request sent after its deadline, its pieces done in
 * time: a delivery miss, counted on the lane of its last RT piece. */
void lane_miss_reply_late(struct lane *l, struct resv *rv, int64_t deadline_ns, int64_t ready_ns,
			  int64_t began_ns, int64_t sent_ns, int64_t cpu_wait_ns)
{
	struct lane_miss *lm = atomic_load_explicit(&l->miss_pub, memory_order_acquire);

	cwd_stats_add(&l->st.miss[CW_MISS_DELIVERY], 1);
	cwd_stats_add(&rv->st.miss[CW_MISS_DELIVERY], 1);
	if (sent_ns > deadline_ns)
		cwd_stats_max(&rv->st.rt_late_max_ns, (uint64_t)(sent_ns - deadline_ns));
	if (!lm)
		return;
	/* A writer never waits here: with the record busy or full the miss
	 * is counted, not logged one by one. */
	if (atomic_flag_test_and_set_explicit(&lm->dl_lock, memory_order_acquire)) {
		cwd_stats_add(&lm->dropped, 1);
		return;
	}
	if (lm->n_dl < DELIVERY_LOG)
		lm->dl[lm->n_dl++] = (struct delivery_rec){
			.stream = rv->a->stream, .resv = rv->a->persistent ? rv->a->id : 0,
			.deadline_ns = deadline_ns, .ready_ns = ready_ns, .began_ns = began_ns,
			.sent_ns = sent_ns, .cpu_wait_ns = cpu_wait_ns };
	else
		cwd_stats_add(&lm->dropped, 1);
	atomic_flag_clear_explicit(&lm->dl_lock, memory_order_release);
}

#define US(ns) ((double)(ns) / 1000.0)

static const char *io_op_name(enum cw_io_op op)
{
	switch (op) {
	case CW_IO_READ: return "read";
	case CW_IO_WRITE: return "write";
	case CW_IO_FSYNC: return "flush";
	case CW_IO_PUNCH: return "punch";
	}
	return "request";
}

/* Where the host held every thread below the stall probes' priority off
 * a CPU during [from_ns, to_ns] (stall-probe.h), as a clause for a miss's
 * line, times relative to base_ns; "" when nowhere. */
static void host_stalls(struct pb *pb, int64_t from_ns, int64_t to_ns, int64_t base_ns, char *buf,
			size_t len)
{
	char cpus[200];

	buf[0] = '\0';
	if (stall_probe_during(pb->probe, from_ns, to_ns, CW_MISS_CPU_TOLERANCE_NS, base_ns, cpus,
			       sizeof(cpus)))
		snprintf(buf, len, "; the host held every thread below real-time priority %d off "
			 "%s", stall_probe_priority(pb->probe), cpus);
}

/* The late replies recorded so far, each logged once, with the real-time
 * threads of other processes that may have held the CPU the reply's
 * writer waited for (looked at once a batch, as the misses' lines do). */
static void drain_delivery(struct lane *l, struct lane_miss *lm)
{
	struct delivery_rec dl[DELIVERY_LOG];
	char rt[320] = "";
	unsigned n;

	while (atomic_flag_test_and_set_explicit(&lm->dl_lock, memory_order_acquire))
		sched_yield();
	n = lm->n_dl;
	memcpy(dl, lm->dl, n * sizeof(dl[0]));
	lm->n_dl = 0;
	atomic_flag_clear_explicit(&lm->dl_lock, memory_order_release);
	if (n)
		rt_neighbours(rt, sizeof(rt), CW_MAX((int)l->pb->cfg->rt_priority, 1));
	for (unsigned i = 0; i < n; i++) {
		char stalls[320], cpu[96] = "";

		host_stalls(l->pb, dl[i].ready_ns, dl[i].sent_ns, dl[i].deadline_ns, stalls,
			    sizeof(stalls));
		if (dl[i].cpu_wait_ns >= 0)
			snprintf(cpu, sizeof(cpu), "; its writer waited %.0f us for a CPU since it "
				 "last slept", US(dl[i].cpu_wait_ns));
		else
			snprintf(cpu, sizeof(cpu), "; a dispatcher sent it");
		/* Where the time went: to the sender (its wake-up, the send
		 * lock), then to the socket (a full one: a client that does
		 * not read), then whether the sender waited for a CPU. */
		cwd_log(LOG_WARNING, "disk %s: stream %" PRIu64 " (reservation %" PRIu64 ") missed "
			"a deadline by %.0f us (delivery): its data was ready %.0f us before the "
			"deadline, only its reply was late: its send began %.0f us after the data "
			"was ready and took %.0f us%s%s%s", l->disk->name, dl[i].stream, dl[i].resv,
			US(dl[i].sent_ns - dl[i].deadline_ns), US(dl[i].deadline_ns - dl[i].ready_ns),
			US(CW_MAX(dl[i].began_ns - dl[i].ready_ns, 0)),
			US(dl[i].sent_ns - dl[i].began_ns), cpu, rt, stalls);
	}
}


/* Logs what the dispatcher recorded; any thread but the dispatcher. */
void lane_miss_drain(struct lane *l)
{
	/* set by the dispatcher once, when its disk first gets streams */
	struct lane_miss *lm = atomic_load_explicit(&l->miss_pub, memory_order_acquire);
	uint64_t t, h, dropped;
	char rt[320] = "";
	bool rt_looked = false;

	if (!lm)
		return;
	h = atomic_load_explicit(&lm->head, memory_order_acquire);
	for (t = atomic_load_explicit(&lm->tail, memory_order_relaxed); t < h; t++) {
		const struct miss_rec *r = &lm->log[t % MISS_LOG];
		const struct cw_sched_miss *m = &r->m;
		char why[160] = "", path[128] = "", slept[192] = "", reader[192] = "";
		char round[160] = "", woke[160] = "", stalls[320] = "", emu[224] = "";
		/* A thread of the stream waited for a CPU: who else runs at
		 * real-time priority here, once a batch (see rt-neighbours.h) */
		bool cpu_waited = m->cpu_wait_window_ns > CW_MISS_CPU_TOLERANCE_NS ||
				  m->cpu_wait_service_ns > CW_MISS_CPU_TOLERANCE_NS ||
				  m->cpu_wait_reader_ns > CW_MISS_CPU_TOLERANCE_NS ||
				  r->woke_rd_ns > CW_MISS_CPU_TOLERANCE_NS;

		if (cpu_waited && !rt_looked) {
			rt_neighbours(rt, sizeof(rt), CW_MAX((int)l->pb->cfg->rt_priority, 1));
			rt_looked = true;
		}

		if (m->other_overrun_ns > 0 && (r->cls == CW_MISS_OVERRUN || r->cls == CW_MISS_MODEL))
			snprintf(why, sizeof(why), "; a %s %s of %zu bytes ending %.0f us after the "
				 "release overran its charge of %.0f us by %.0f us",
				 r->overrun_rt ? "real-time" : "best-effort", io_op_name(r->overrun_op),
				 r->overrun_len, US(r->overrun_at - m->release_ns),
				 US(r->overrun_charged), US(m->other_overrun_ns));
		if (m->emu_lag_ns > 0 && m->emu_lag_own_ns == m->emu_lag_ns)
			snprintf(emu, sizeof(emu), "; it came back %.0f us after the emulated disk "
				 "had done it (its backing store, the host's disk or CPU, was slower)",
				 US(m->emu_lag_ns));
		else if (m->emu_lag_ns > 0 && r->lag_at)
			snprintf(emu, sizeof(emu), "; a %s %s of %" PRId64 " bytes ending %.0f us "
				 "after the release came back %.0f us after the emulated disk had "
				 "done it (its backing store, the host's disk or CPU, was slower)",
				 r->lag_rt ? "real-time" : "best-effort", io_op_name(r->lag_op),
				 r->lag_len, US(r->lag_at - m->release_ns), US(m->emu_lag_ns));
		if (m->cpu_wait_reader_ns > 0 || m->reader_parked_ns > 0 || r->push_wait_ns > 0)
			snprintf(reader, sizeof(reader), "; before it booked it its reader waited "
				 "%.0f us for a CPU, was parked %.0f us for %s and waited %.0f us "
				 "for room in the disk's record", US(m->cpu_wait_reader_ns),
				 US(m->reader_parked_ns), r->parked_memory ? "reply memory" :
				 "a free slot of its connection", US(r->push_wait_ns));
		if (m->booked_ns && m->taken_ns)
			snprintf(path, sizeof(path), ", arrived at %.0f, booked at %.0f, taken at %.0f",
				 US(r->arrival_ns - m->release_ns), US(m->booked_ns - m->release_ns),
				 US(m->taken_ns - m->release_ns));
		if (m->slept_ns > 0 && r->longest.until >= 0)
			snprintf(slept, sizeof(slept), "; the dispatcher slept %.0f us meanwhile, at "
				 "most %.0f us from %.0f us for the policy's wake-up at %.0f us",
				 US(m->slept_ns), US(r->longest.to - r->longest.from),
				 US(r->longest.from - m->release_ns), US(r->longest.until - m->release_ns));
		else if (m->slept_ns > 0)
			snprintf(slept, sizeof(slept), "; the dispatcher slept %.0f us meanwhile, at "
				 "most %.0f us from %.0f us with no wake-up set",
				 US(m->slept_ns), US(r->longest.to - r->longest.from),
				 US(r->longest.from - m->release_ns));
		if (r->round.to > r->round.from)
			snprintf(round, sizeof(round), "; one round of the dispatcher took %.0f us "
				 "from %.0f us, %.0f us of it waiting for the dispatch lock",
				 US(r->round.to - r->round.from), US(r->round.from - m->release_ns),
				 US(r->round.locked - r->round.from));
		if (cpu_waited)
			host_stalls(l->pb, CW_MIN(r->arrival_ns, m->release_ns), m->done_ns,
				    m->release_ns, stalls, sizeof(stalls));
		if (r->woke_ns)
			snprintf(woke, sizeof(woke), "; having booked it, its reader woke the "
				 "dispatcher only at %.0f us, after waiting %.0f us for a CPU",
				 US(r->woke_ns - m->release_ns), US(r->woke_rd_ns));
		cwd_log(LOG_WARNING, "disk %s: stream %" PRIu64 " (reservation %" PRIu64 ") missed "
			"a deadline by %.0f us (%s): released at 0%s, due at %.0f, started at %.0f, "
			"done at %.0f us, %zu bytes charged %.0f us; the dispatcher waited %.0f us "
			"for a CPU in its window, %.0f us in its service%s%s%s%s%s%s%s%s",
			l->disk->name, r->stream, r->resv, US(m->done_ns - m->deadline_ns),
			cw_sched_miss_class_name(r->cls), path, US(m->deadline_ns - m->release_ns),
			US(m->start_ns - m->release_ns), US(m->done_ns - m->release_ns), r->len,
			US(m->charged_ns), US(m->cpu_wait_window_ns), US(m->cpu_wait_service_ns), slept,
			woke, round, reader, why, emu, cpu_waited ? rt : "", stalls);
	}
	atomic_store_explicit(&lm->tail, h, memory_order_release);
	drain_delivery(l, lm);
	dropped = atomic_exchange(&lm->dropped, 0);
	if (dropped)
		cwd_log(LOG_WARNING, "disk %s: %" PRIu64 " more misses not logged one by one "
			"(counted by class in the stats)", l->disk->name, dropped);
}
