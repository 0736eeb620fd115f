/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: the glue between clockwised's control socket and its data
 * path (daemon/service.c), on a real pool, back end and NBD server.  The
 * stats hook adds up the lanes of each open disk, takes the latency
 * quantiles over their merged histograms (not per lane), leaves out a
 * closed disk and released reservations, and reports a start-up
 * reservation as id 0.  The export hooks serve a partition under the
 * control plane's name, read-only when asked, bound to its reservation;
 * one that cannot be bound or served leaves nothing behind.
 */
#include "daemon/service.c"

#include <libnbd.h>

#include "cwtest.h"
#include "datapath.h"

#define BS MIB
#define US 1000

static struct dp D;
static struct nbdsrv *nbd;
static struct svc svc;
static char sock[200];

/* HDDs 1 and 3, an SSD 2 with two lanes; "media" on disk 1. */
static void setup(void)
{
	static const uint64_t n[3] = { 64, 64, 64 };
	static const enum cw_tier tiers[3] = { CW_TIER_HDD, CW_TIER_SSD, CW_TIER_HDD };
	struct nbdsrv_config sc = { .live_exports = true };
	char conf[512], path[160];

	dp_pool(&D, BS, 3, n, tiers);
	dp_part(&D, "media", 16 * MIB, CW_PLACE_SINGLE, 1);
	dp_disk_path(&D, 2, path, sizeof(path));
	snprintf(conf, sizeof(conf), "disks = ( { path = \"%s\"; name = \"disk2\"; "
		 "tier = \"ssd\"; lanes = 2; } );", path);
	dp_open(&D, conf);
	CU_ASSERT_FATAL(nbdsrv_new(&sc, &nbd) == 0);
	snprintf(sock, sizeof(sock), "%s/nbd.sock", D.tp.dir);
	CU_ASSERT_FATAL(nbdsrv_listen_unix(nbd, sock, NULL, CW_NBD_TLS_OFF) == 0);
	CU_ASSERT_FATAL(pb_start(D.pb) == 0);
	CU_ASSERT_FATAL(nbdsrv_start(nbd) == 0);
	svc = (struct svc){ .pb = D.pb, .nbd = nbd, .cfg = D.cfg };
	pthread_mutex_init(&svc.lock, NULL);
}

static void teardown(void)
{
	nbdsrv_free(nbd);
	nbd = NULL;
	pthread_mutex_destroy(&svc.lock);
	dp_close(&D);
}

static void lat(struct cwd_stats *c, unsigned n, int64_t ns)
{
	for (unsigned i = 0; i < n; i++)
		cwd_stats_hist_add(c->be_lat, ns);
	cwd_stats_add(&c->be_done, n);
}

/* What a percentile of samples all at ns reads: the largest value of
 * their bucket (clockwise/hist.h), at most 1.6% above ns. */
static int64_t top(int64_t ns)
{
	return (int64_t)cw_hist_upper(cw_hist_index((uint64_t)ns)) - 1;
}

static const struct cwc_disk_stats *disk_stats(const struct cwc_stats *st, uint32_t id)
{
	for (size_t i = 0; i < st->n_disks; i++)
		if (st->disks[i].disk_id == id)
			return &st->disks[i];
	return NULL;
}

static const struct cwc_resv_stats *resv_stats(const struct cwc_stats *st, uint64_t id)
{
	for (size_t i = 0; i < st->n_resvs; i++)
		if (st->resvs[i].resv_id == id)
			return &st->resvs[i];
	return NULL;
}

static void test_stats(void)
{
	const struct cw_admit_resv *kept, *startup, *gone;
	const struct cwc_disk_stats *ds;
	const struct cwc_resv_stats *rs;
	struct cwd_stats *l1, *s0, *s1;
	struct cwc_stats st = { 0 };
	char err[256] = "";
	uint64_t gone_id;

	setup();
	l1 = &D.pb->disks[0].lanes[0].st;
	s0 = &D.pb->disks[1].lanes[0].st;
	s1 = &D.pb->disks[1].lanes[1].st;
	cwd_stats_add(&l1->rt_done, 3);
	cwd_stats_add(&l1->rt_missed, 1);
	cwd_stats_add(&l1->slack_used_ns, 5000);
	cwd_stats_add(&l1->read_bytes, 4096);
	cwd_stats_add(&l1->write_bytes, 8192);
	lat(l1, 10, 5 * US);
	/* The SSD: 6 fast on one lane, 4 slow on the other.  Its median is
	 * fast (not the slow lane's median), its p99 and max slow. */
	lat(s0, 6, 100 * US);
	lat(s1, 4, 300 * US);
	cwd_stats_add(&s0->read_bytes, 100);
	cwd_stats_add(&s1->read_bytes, 1000);
	cwd_stats_add(&s1->write_bytes, 200);
	cwd_stats_add(&s1->slack_used_ns, 7);
	/* Disk 3 is closed: its counters are not reported. */
	cwd_stats_add(&D.pb->disks[2].lanes[0].st.be_done, 99);
	CU_ASSERT_FATAL(pb_disk_remove(D.pb, 3, err, sizeof(err)) == 0);

	kept = dp_reserve(&D, "media", 4 * MIB, MIB, 0, 0, NULL);
	startup = dp_reserve(&D, "media", 4 * MIB, MIB, 0, 0, "media");
	gone = dp_reserve(&D, "media", 4 * MIB, MIB, 0, 0, NULL);
	cwd_stats_add(&dp_held(D.pb, kept)->st.rt_done, 7);
	cwd_stats_add(&dp_held(D.pb, kept)->st.rt_missed, 2);
	cwd_stats_add(&dp_held(D.pb, startup)->st.rt_done, 1);
	cwd_stats_add(&dp_held(D.pb, gone)->st.rt_done, 50);
	gone_id = gone->id;
	CU_ASSERT_FATAL(cw_admit_state_release(D.adm, gone_id, NULL) == 0);

	CU_ASSERT_FATAL(hook_stats(&svc, &st) == 0);
	CU_ASSERT_EQUAL(st.n_disks, 2);
	CU_ASSERT_PTR_NULL(disk_stats(&st, 3));
	ds = disk_stats(&st, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
	CU_ASSERT_EQUAL(ds->rt_requests, 3);
	CU_ASSERT_EQUAL(ds->rt_misses, 1);
	CU_ASSERT_EQUAL(ds->be_requests, 10);
	CU_ASSERT_EQUAL(ds->slack_used_ns, 5000);
	CU_ASSERT_EQUAL(ds->read_bytes, 4096);
	CU_ASSERT_EQUAL(ds->written_bytes, 8192);
	CU_ASSERT_EQUAL(ds->be_p50_ns, top(5 * US));
	CU_ASSERT_EQUAL(ds->be_max_ns, top(5 * US));
	CU_ASSERT(ds->be_p50_ns >= 5 * US && ds->be_p50_ns <= 5 * US * 1.016);
	ds = disk_stats(&st, 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
	CU_ASSERT_EQUAL(ds->be_requests, 10);
	CU_ASSERT_EQUAL(ds->read_bytes, 1100);
	CU_ASSERT_EQUAL(ds->written_bytes, 200);
	CU_ASSERT_EQUAL(ds->slack_used_ns, 7);
	CU_ASSERT_EQUAL(ds->rt_requests, 0);
	CU_ASSERT_EQUAL(ds->be_p50_ns, top(100 * US));
	CU_ASSERT_EQUAL(ds->be_p99_ns, top(300 * US));
	CU_ASSERT_EQUAL(ds->be_max_ns, top(300 * US));
	CU_ASSERT_EQUAL(cw_hist_total(ds->be_hist), 10);

	CU_ASSERT_EQUAL(st.n_resvs, 2);
	rs = resv_stats(&st, kept->id);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rs);
	CU_ASSERT_EQUAL(rs->requests, 7);
	CU_ASSERT_EQUAL(rs->misses, 2);
	rs = resv_stats(&st, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rs);
	CU_ASSERT_EQUAL(rs->requests, 1);
	CU_ASSERT_PTR_NULL(resv_stats(&st, gone_id));
	cwc_stats_free(&st);
	teardown();
}

static unsigned exports_in_pb(void)
{
	unsigned n = 0;

	for (struct pbx *x = D.pb->exports; x; x = x->next)
		n++;
	return n;
}

static void test_export_hooks(void)
{
	const struct cw_admit_resv *a;
	struct cwc_export e = { .name = "movie", .part = "media" };
	struct cw_part *part;
	struct nbd_handle *h;
	struct pbx *x;

	setup();
	CU_ASSERT_FATAL(cw_part_lookup(D.tp.pool, "media", &part) == 0);
	a = dp_reserve(&D, "media", 4 * MIB, MIB, 0, 0, NULL);

	/* No such reservation: nothing served, nothing kept. */
	e.resv_id = a->id + 100;
	CU_ASSERT_EQUAL(hook_export_add(&svc, &e, part), -ENOENT);
	CU_ASSERT_EQUAL(exports_in_pb(), 0);
	CU_ASSERT_EQUAL(nbdsrv_remove_export(nbd, "movie"), -ENOENT);

	e.resv_id = a->id;
	e.readonly = true;
	CU_ASSERT_EQUAL_FATAL(hook_export_add(&svc, &e, part), 0);
	CU_ASSERT_EQUAL_FATAL(exports_in_pb(), 1);
	x = find_export(D.pb, "movie");
	CU_ASSERT_PTR_NOT_NULL_FATAL(x);
	CU_ASSERT_PTR_EQUAL(x->resv, dp_held(D.pb, a));
	h = nbd_create();
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	nbd_set_export_name(h, "movie");
	CU_ASSERT_EQUAL_FATAL(nbd_connect_unix(h, sock), 0);
	CU_ASSERT_EQUAL(nbd_is_read_only(h), 1);
	CU_ASSERT_EQUAL(nbd_get_size(h), 16 * MIB);
	nbd_shutdown(h, 0);
	nbd_close(h);

	/* The same name again: the server refuses it, the back end keeps
	 * only the first. */
	CU_ASSERT_EQUAL(hook_export_add(&svc, &e, part), -EEXIST);
	CU_ASSERT_EQUAL(exports_in_pb(), 1);
	CU_ASSERT_PTR_EQUAL(find_export(D.pb, "movie"), x);

	CU_ASSERT_EQUAL(hook_export_remove(&svc, &e), 0);
	CU_ASSERT_EQUAL(exports_in_pb(), 0);
	CU_ASSERT_EQUAL(nbdsrv_remove_export(nbd, "movie"), -ENOENT);
	/* Listed but never served (a missing disk at start): forgotten. */
	CU_ASSERT_EQUAL(hook_export_remove(&svc, &e), 0);
	teardown();
}

int main(void)
{
	CU_pSuite s = cwtest_suite("daemon service", NULL, NULL);

	dp_use_tmpfs();
	cwd_log_set_level(LOG_WARNING);
	cwtest_add(s, "stats add up lanes, merge histograms, skip what is gone", test_stats);
	cwtest_add(s, "export hooks: name, read-only, binding, nothing left on failure",
		   test_export_hooks);
	return cwtest_run();
}
