/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwised — serves the partitions of a Clockwise pool over NBD.
 *
 * Start-up order: configuration, pool (sqlite, disk labels), the data path
 * (disks opened with O_DIRECT, static reservations admitted), one export
 * per partition whose disks are all present (unless exports.all is false),
 * the control socket, listeners, dispatchers, and only then READY=1 to systemd and the "ready" log line tests wait for.
 * SIGTERM/SIGINT stop it cleanly: the NBD server lets requests in flight
 * finish, then the dispatchers stop and the pool closes.  SIGUSR1 logs the
 * counters.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>

#include <clockwise/admit-state.h>
#include <clockwise/layout.h>
#include <clockwise/pool-objects.h>
#include <clockwise/units.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "daemon/conf.h"
#include "daemon/service.h"
#include "daemon/log.h"
#include "daemon/nbd/nbd-server.h"
#include "daemon/nbd/nbd-tls.h"
#include "daemon/path/path.h"

#define MAX_RESERVATIONS 64

static void usage(FILE *f)
{
	fprintf(f,
		"usage: clockwised [-c FILE] [--foreground] [--init] [-r RESERVATION]... [--help]\n"
		"                  [--version]\n"
		"\n"
		"Serves the partitions of a Clockwise pool as NBD exports.\n"
		"\n"
		"  -c, --config FILE        configuration (default %s)\n"
		"  -f, --foreground         stay in the foreground, log to stderr\n"
		"  -i, --init               create an empty pool where the configuration\n"
		"                           names one and there is none (a first start)\n"
		"  -r, --reserve SPEC       admit a stream at start: EXPORT:BANDWIDTH:BLOCK\n"
		"                           [,range=START:END|START+LENGTH][,span=START_S:END_S]\n"
		"  -h, --help               this text\n"
		"  -V, --version            the version\n", CWD_CONFIG_DEFAULT_PATH);
}

/* The partition export name serves: a stored export's, else the partition
 * of that name (exports.all). */
static int export_part(struct cw_pool *pool, const char *name, char *ret, size_t len)
{
	_cleanup_free_ struct cw_export_rec *ex = NULL;
	_cleanup_free_ struct cw_part_info *parts = NULL;
	size_t n = 0, np = 0;
	uint64_t part_id = 0;
	int r;

	r = cw_export_list(pool, &ex, &n);
	if (r == 0)
		r = cw_part_list(pool, &parts, &np);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		if (strcmp(ex[i].name, name) == 0)
			part_id = ex[i].part_id;
	for (size_t i = 0; i < np; i++)
		if (part_id ? parts[i].id == part_id : strcmp(parts[i].name, name) == 0) {
			snprintf(ret, len, "%s", parts[i].name);
			return 0;
		}
	return -ENOENT;
}

/* Streams given with -r: admitted like any other (every disk or none,
 * beside the stored ones), for the daemon's lifetime, never stored. */
static int admit_start_resv(struct cw_pool *pool, struct cw_admit_state *adm,
			    const struct cwd_config_resv *sr, int64_t start_ns)
{
	struct cw_admit_refusal ref;
	struct cw_admit_request rq = {
		.rate_bps = sr->rate_bps, .block_bytes = sr->block_bytes,
		.range_start_bytes = sr->range_start, .range_end_bytes = sr->range_end,
		.export_name = sr->export_name,
	};
	const struct cw_admit_resv *rv;
	char part[CW_NAME_MAX + 1];
	int64_t now = cw_now_ns();
	int r;

	r = export_part(pool, sr->export_name, part, sizeof(part));
	if (r < 0) {
		cwd_log(LOG_ERR, "reservation for %s: no such export", sr->export_name);
		return r;
	}
	rq.part = part;
	if (sr->span_start_s || sr->span_end_s) {
		int64_t from = start_ns + sr->span_start_s * CW_NS_PER_S;

		rq.start_in_ns = CW_MAX(from - now, 1);
		rq.duration_ns = sr->span_end_s ? start_ns + sr->span_end_s * CW_NS_PER_S -
						  (now + rq.start_in_ns) : 0;
		if (sr->span_end_s && rq.duration_ns <= 0)
			rq.duration_ns = 1;
	}
	r = cw_admit_state_reserve(adm, &rq, &rv, &ref, NULL);
	if (r < 0) {
		cwd_log(LOG_ERR, "reservation for %s: %s", sr->export_name,
			ref.reason[0] ? ref.reason : strerror(-r));
		return r;
	}
	for (size_t i = 0; i < rv->n_parts; i++) {
		struct cw_disk_info d = { 0 };

		(void)cw_disk_info(pool, rv->parts[i].disk_id, &d);
		cwd_log(LOG_INFO, "reservation %s: disk %s T=%" PRId64 " us C=%" PRId64 " us%s",
			sr->export_name, d.name, rv->parts[i].task.period_ns / 1000,
			rv->parts[i].task.service_ns / 1000, rv->parts[i].copy ? " (cache)" : "");
	}
	if (rv->move_id)	/* rule 2 for moves, kept by cw_admit_state_reserve too */
		cwd_log(LOG_INFO, "reservation %s: booked on both sides of move %" PRIu64
			" until it is over", sr->export_name, rv->move_id);
	if (rv->cache_refused[0])	/* rule 2, kept by cw_admit_state_reserve */
		cwd_log(LOG_NOTICE, "reservation %s: its blocks stay off the SSD: %s",
			sr->export_name, rv->cache_refused);
	return 0;
}

/* Exports' best-effort QoS from the configuration (exports.qos), admitted
 * like `cwctl export qos` for the daemon's lifetime, never stored; one
 * stored in the pool outranks it.  A refusal stops the start, naming the
 * line. */
static int admit_config_qos(struct cw_pool *pool, struct cw_admit_state *adm,
			    const struct cwd_config *cfg)
{
	for (size_t i = 0; i < cfg->exports.n_qos; i++) {
		const struct cwd_config_qos *q = &cfg->exports.qos[i];
		struct cw_admit_be_request rq = { .export_name = q->export, .qos = q->qos };
		struct cw_admit_refusal ref;
		char part[CW_NAME_MAX + 1];
		int r;

		if (cw_admit_state_be_find(adm, q->export)) {
			cwd_log(LOG_NOTICE, "export %s: the best-effort QoS stored in the pool (cwctl "
				"export qos) outranks the one at %s:%u", q->export, cfg->file, q->line);
			continue;
		}
		char ename[CW_NAME_MAX + 1];

		/* EXPORT@CLASS: a class of EXPORT's connections */
		snprintf(ename, sizeof(ename), "%.*s", (int)strcspn(q->export, "@"), q->export);
		r = export_part(pool, ename, part, sizeof(part));
		if (r < 0) {
			cwd_log(LOG_ERR, "%s:%u: best-effort QoS for export %s: no such export",
				cfg->file, q->line, q->export);
			return r;
		}
		rq.part = part;
		r = cw_admit_state_be_set(adm, &rq, NULL, &ref);
		if (r < 0) {
			cwd_log(LOG_ERR, "%s:%u: best-effort QoS for export %s: %s", cfg->file,
				q->line, q->export, ref.reason[0] ? ref.reason : strerror(-r));
			return r;
		}
		cwd_log(LOG_INFO, "export %s: best-effort QoS from %s:%u", q->export, cfg->file,
			q->line);
	}
	return 0;
}

/* Disks the configuration gives a model, or that it says emulate one:
 * admission uses it unless the pool stores one (a measured model outranks
 * a declared one); a declared model outranks the emulated one.  A disk
 * stored as emulating one (cwctl disk add --emulate) has it already
 * (cw_admit_state_new). */
static int admit_config_models(struct cw_pool *pool, struct cw_admit_state *adm,
			       const struct cwd_config *cfg)
{
	_cleanup_free_ struct cw_disk_info *disks = NULL;
	size_t n = 0;
	int r = cw_disk_list(pool, &disks, &n);

	for (size_t j = 0; r == 0 && j < n; j++) {
		const struct cwd_config_disk *cd = NULL;
		struct cw_model m;

		for (size_t i = 0; i < cfg->n_disks; i++)
			if (strcmp(disks[j].name, cfg->disks[i].name) == 0)
				cd = &cfg->disks[i];
		if (cd && cd->model) {
			r = cw_model_preset(cd->model, &m);
			if (r < 0) {
				cwd_log(LOG_ERR, "disk %s: unknown model \"%s\"", cd->name, cd->model);
				return -EINVAL;
			}
		} else if (cd && cd->emulate) {
			m = *cd->emulate;
		} else {
			continue;
		}
		r = cw_admit_state_set_model(adm, disks[j].id, &m, CW_ADMIT_MODEL_CONFIG,
					     NULL, NULL, NULL);
		if (r < 0)
			cwd_log(LOG_ERR, "disk %s: model %s: %s", disks[j].name, m.name,
				strerror(-r));
	}
	return r;
}

/* Disks the configuration puts in a failure domain get it in the pool
 * (where placement reads it); refused when copies of a block would then
 * share one, which stops the start with the reason. */
static int config_domains(struct cw_pool *pool, const struct cwd_config *cfg)
{
	_cleanup_free_ struct cw_disk_info *disks = NULL;
	size_t n = 0;
	int r = cw_disk_list(pool, &disks, &n);

	for (size_t j = 0; r == 0 && j < n; j++)
		for (size_t i = 0; i < cfg->n_disks; i++) {
			const struct cwd_config_disk *cd = &cfg->disks[i];

			if (!cd->domain || strcmp(disks[j].name, cd->name) != 0 ||
			    strcmp(disks[j].domain, cd->domain) == 0)
				continue;
			r = cw_disk_set_domain(pool, disks[j].id, cd->domain);
			if (r < 0)
				cwd_log(LOG_ERR, "disk %s: domain %s: %s", cd->name, cd->domain,
					cw_pool_last_error(pool)->msg);
		}
	return r;
}

static void log_nbd(void *userdata, int priority, const char *msg)
{
	(void)userdata;
	cwd_log(priority, "nbd: %s", msg);
}

/* Opens the pool at path; with init, one that does not exist yet is
 * created empty first (a first start: disks and partitions come through
 * cwctl).  Without init a missing pool says what to run.  Logs why not. */
static int pool_open(const char *path, bool init, struct cw_pool **ret)
{
	struct cw_error err = { 0 };
	struct stat st;
	int r;

	if (init && stat(path, &st) < 0 && errno == ENOENT) {
		r = cw_pool_create(path, 0, &err, ret);
		if (r < 0) {
			cwd_log(LOG_ERR, "--init: cannot create a pool at %s: %s", path,
				err.msg[0] ? err.msg : strerror(-r));
			return r;
		}
		cw_pool_close(*ret);
		cwd_log(LOG_NOTICE, "--init: created an empty pool at %s; add disks with cwctl "
			"disk add", path);
	}
	r = cw_pool_open(path, &err, ret);
	if (r == -ENOENT && stat(path, &st) < 0 && errno == ENOENT)
		cwd_log(LOG_ERR, "cannot open pool %s: there is none: create it with `cwpool create "
			"%s` (then add disks), or start clockwised with --init to create an empty "
			"one", path, path);
	else if (r < 0)
		cwd_log(LOG_ERR, "cannot open pool %s: %s", path, err.msg[0] ? err.msg : strerror(-r));
	return r;
}

/* Without --foreground and outside systemd: fork, and let the parent exit
 * 0 only once the child is ready (so `clockwised && nbdinfo ...` works).
 * Returns the write end of the readiness pipe in the child, -1 otherwise. */
static int detach(void)
{
	int p[2];
	pid_t pid;
	char c;

	if (pipe2(p, O_CLOEXEC) < 0) {
		cwd_log(LOG_ERR, "pipe: %m");
		exit(1);
	}
	pid = fork();
	if (pid < 0) {
		cwd_log(LOG_ERR, "fork: %m");
		exit(1);
	}
	if (pid > 0) {
		close(p[1]);
		exit(read(p[0], &c, 1) == 1 ? 0 : 1);
	}
	close(p[0]);
	setsid();
	return p[1];
}

static void detached_ready(int fd)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	cwd_log_to_syslog(true);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		close(null);
	}
	if (write(fd, "R", 1) != 1)
		cwd_log(LOG_WARNING, "cannot tell the parent process we are ready");
	close(fd);
}

/* Seconds between sweeps of the write-intent record: a region of a
 * mirrored partition stays dirty 1 to 2 sweeps after its last write. */
#define INTENT_SWEEP_S 5

/* Each sweep: the write-intent record swept (cw_pool_intent_sweep), and
 * the unit's STATUS saying which mirrored partitions are degraded (have
 * copies out of sync), sent when it changes (last: what was sent) with
 * what else (READY=1) is to go in the same message. */
static void mirror_tick(struct cw_pool *pool, size_t nexports, char *last, size_t len,
			const char *also)
{
	struct cw_part_info *parts = NULL;
	char buf[512];
	size_t n = 0, k = 0, at;
	int r = cw_pool_intent_sweep(pool, NULL);

	if (r < 0)
		cwd_log(LOG_WARNING, "sweeping the write-intent record of mirrored partitions: %s",
			strerror(-r));
	at = (size_t)snprintf(buf, sizeof(buf), "Serving %zu export%s", nexports,
			      nexports == 1 ? "" : "s");
	if (cw_part_list(pool, &parts, &n) == 0)
		for (size_t i = 0; i < n; i++) {
			if (!parts[i].stale_copies)
				continue;
			if (at < sizeof(buf))
				at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%s%s",
						       k ? ", " : "; degraded: ", parts[i].name);
			k++;
		}
	free(parts);
	if (strcmp(buf, last) == 0 && !also[0])
		return;
	sd_notifyf(0, "%sSTATUS=%s", also, buf);
	snprintf(last, len, "%s", buf);
}

static int add_exports(struct cw_pool *pool, struct pb *pb, struct nbdsrv *srv,
		       size_t *ret_n)
{
	struct cw_part_info *parts = NULL;
	size_t n, i;
	int r;

	*ret_n = 0;
	r = cw_part_list(pool, &parts, &n);
	if (r < 0) {
		cwd_log(LOG_ERR, "cannot list partitions: %s", strerror(-r));
		return r;
	}
	for (i = 0; i < n; i++) {
		struct nbdsrv_export e;
		struct cw_part *part;

		r = cw_part_lookup(pool, parts[i].name, &part);
		if (r < 0) {
			cwd_log(LOG_ERR, "partition %s: %s", parts[i].name, strerror(-r));
			continue;
		}
		if (pb_export(pb, part, &e) < 0)
			continue;	/* logged: a disk is missing */
		(void)pb_export_bind(pb, e.backend, 0);	/* its start-up stream, if any */
		r = nbdsrv_add_export(srv, &e);
		if (r < 0) {
			cwd_log(LOG_ERR, "export %s: %s", e.name, strerror(-r));
			continue;
		}
		cwd_log(LOG_INFO, "export %s: %" PRIu64 " bytes, block sizes %u/%u/%u%s", e.name,
			e.size, e.min_block, e.pref_block, e.max_block,
			e.read_only ? ", read-only" : "");
		(*ret_n)++;
	}
	free(parts);
	return 0;
}

static void conf_warn(void *userdata, const char *msg)
{
	(void)userdata;
	cwd_log(LOG_WARNING, "%s", msg);
}

static const char *const tls_said[] = {
	[CW_NBD_TLS_OFF] = "",
	[CW_NBD_TLS_ON] = ", TLS offered",
	[CW_NBD_TLS_REQUIRE] = ", TLS required",
};

/* The credentials of the listeners that offer TLS, if any does. */
static int tls_setup(const struct cwd_config *cfg, struct nbdtls_creds **ret_creds)
{
	char why[512];
	int r;

	*ret_creds = NULL;
	if (!cfg->tls.certificates && !cfg->tls.psk)
		return 0;
	r = nbdtls_creds_new(cfg->tls.certificates, cfg->tls.psk, cfg->tls.verify_peer,
			      ret_creds, why, sizeof(why));
	if (r < 0)
		cwd_log(LOG_ERR, "TLS: %s", why);
	else
		cwd_log(LOG_INFO, "TLS with %s %s%s", cfg->tls.psk ? "the pre-shared keys of" :
			"the certificates in", cfg->tls.psk ? cfg->tls.psk : cfg->tls.certificates,
			cfg->tls.verify_peer ? ", clients' certificates verified" : "");
	return r;
}

static int listen_all(const struct cwd_config *cfg, struct nbdsrv *srv)
{
	struct nbdsrv_unix_perm perm;
	char port[8];
	size_t i;
	int r;

	cwd_config_unix_perm(cfg, conf_warn, NULL, &perm);
	for (i = 0; i < cfg->n_listen_unix; i++) {
		r = nbdsrv_listen_unix(srv, cfg->listen_unix[i], &perm,
					   (enum cw_nbd_tls)cfg->listen_unix_tls[i]);
		if (r < 0) {
			cwd_log(LOG_ERR, "cannot listen on %s: %s", cfg->listen_unix[i],
				r == -EADDRINUSE ? "in use: a server answers on it" :
				r == -EMFILE ? "more listeners than the daemon holds" : strerror(-r));
			return r;
		}
		cwd_log(LOG_INFO, "listening on %s%s", cfg->listen_unix[i],
			tls_said[cfg->listen_unix_tls[i]]);
	}
	for (i = 0; i < cfg->n_listen_tcp; i++) {
		const char *host = cfg->listen_tcp[i].host;

		/* The configuration's "" or "*" is every address; the
		 * server's empty host is loopback only. */
		if (!*host || strcmp(host, "*") == 0)
			host = "0.0.0.0";
		snprintf(port, sizeof(port), "%u", cfg->listen_tcp[i].port);
		r = nbdsrv_listen_tcp(srv, host, port, (enum cw_nbd_tls)cfg->listen_tcp[i].tls);
		if (r < 0) {
			cwd_log(LOG_ERR, "cannot listen on %s:%s: %s", host, port,
				r == -EMFILE ? "more listeners than the daemon holds (its addresses "
					       "count one each)" : strerror(-r));
			return r;
		}
		cwd_log(LOG_INFO, "listening on %s:%s%s", host, port,
			tls_said[cfg->listen_tcp[i].tls]);
	}
	return 0;
}

/* The host as a resource of admission: the CPUs the real-time threads
 * may run on (rt_cpus, else every online one), the share of them given
 * to streams, and the costs the configuration names or, for those it
 * does not, measured now.  Measured at every start rather than stored:
 * they are the host's and its kernel's, not the pool's, and a pool's
 * disks may move to another host.  Before the start-up streams, which it
 * tests like the others. */
static int admit_config_host(struct cw_admit_state *adm, const struct cwd_config *cfg)
{
	struct cw_host_model h = { .request_ns = cfg->host.request_ns,
				   .share_ppm = cfg->host.share_ppm };
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	char rate[CW_UNITS_BUF];
	bool measured = !h.request_ns || !cfg->host.copy_rate_bps;
	int r;

	if (cfg->host.off) {
		cwd_log(LOG_INFO, "admission does not test the host's CPUs (host.test = false)");
		return 0;
	}
	h.cpus = cfg->rt_cpus ? (uint32_t)__builtin_popcountll(cfg->rt_cpus) :
		 (uint32_t)(online > 0 ? online : 1);
	if (cfg->host.copy_rate_bps)	/* ps a byte, rounded up */
		h.byte_ps = (UINT64_C(1000000000000) + cfg->host.copy_rate_bps - 1) /
			    cfg->host.copy_rate_bps;
	if (measured) {
		int64_t req_ns;
		uint64_t byte_ps;

		r = cw_host_measure(&req_ns, &byte_ps);
		if (r < 0) {
			cwd_log(LOG_ERR, "cannot measure the host's CPU costs: %s (set "
				"host.request_cost and host.copy_rate)", strerror(-r));
			return r;
		}
		if (!h.request_ns)
			h.request_ns = req_ns;
		if (!h.byte_ps)
			h.byte_ps = byte_ps;
	}
	r = cw_admit_state_set_host(adm, &h);
	if (r < 0) {
		cwd_log(LOG_ERR, "bad host model: %s", strerror(-r));
		return r;
	}
	cwd_log(LOG_INFO, "host: %.1f%% of %" PRIu32 " CPUs for streams; a request costs %"
		PRId64 " ns, a byte %" PRIu64 " ps (%s of copies a CPU-second)%s",
		h.share_ppm / 1e4, h.cpus, h.request_ns, h.byte_ps,
		cw_units_format_rate(UINT64_C(1000000000000) / h.byte_ps, rate),
		measured ? ", measured" : "");
	return 0;
}

/* What the deadline guarantee rests on: memory that is never paged out
 * (locked as it is touched, so an idle daemon stays small) and real-time
 * priority for the threads that keep time, tried here once on this
 * thread and given back.  What the system refuses makes the guarantee
 * conditional: said now, and by cwctl status. */
static void guarantee_check(const struct cwd_config *cfg, struct pb *pb)
{
	struct sched_param rt = { .sched_priority = (int)cfg->rt_priority }, normal = { 0 };
	char why[512];
	int r;

	if (cfg->lock_memory && mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) < 0) {
		cwd_log(LOG_WARNING, "cannot lock the daemon's memory: %s (lock_memory needs "
			"CAP_IPC_LOCK or a large enough RLIMIT_MEMLOCK)", strerror(errno));
		pb_guarantee_lacks(pb, PB_COND_MLOCK);
	} else if (!cfg->lock_memory) {
		pb_guarantee_lacks(pb, PB_COND_MLOCK);
	}
	if (!rt.sched_priority) {
		pb_guarantee_lacks(pb, PB_COND_RT);
	} else {
		r = pthread_setschedparam(pthread_self(), SCHED_FIFO, &rt);
		if (r == 0)
			pthread_setschedparam(pthread_self(), SCHED_OTHER, &normal);
		else
			pb_guarantee_lacks(pb, PB_COND_RT);
	}
	pb_guarantee(pb, why, sizeof(why));
	if (why[0])
		cwd_log(LOG_WARNING, "the deadline guarantee is conditional: %s", why);
	else
		cwd_log(LOG_INFO, "the deadline guarantee rests on locked memory and real-time "
			"priority%s", cfg->rt_cpus ? " on the rt_cpus" : "");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "init", no_argument, NULL, 'i' },
		{ "reserve", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct cwd_config_resv resv[MAX_RESERVATIONS];
	struct cw_admit_state *adm = NULL;
	struct nbdsrv_config scfg = { 0 };
	struct nbdtls_creds *tls_creds = NULL;
	struct nbdsrv_access *access = NULL;
	size_t n_access = 0;
	struct cwd_config *cfg = NULL;
	struct nbdsrv *srv = NULL;
	struct cw_pool *pool = NULL;
	struct pb *pb = NULL;
	struct svc *svc = NULL;
	const char *conf_path = NULL;
	char *err = NULL, msg[1024], status[512] = "";
	bool foreground = false, init = false;
	size_t nresv = 0, nexports = 0, nunserved = 0, i;
	uint64_t wd_usec = 0;
	int c, r, sig, ready_fd = -1, rc = 1;
	int64_t start_ns = cw_now_ns();
	sigset_t set;

	while ((c = getopt_long(argc, argv, "c:fir:hV", opts, NULL)) != -1) {
		switch (c) {
		case 'i':
			init = true;
			break;
		case 'c':
			conf_path = optarg;
			break;
		case 'f':
			foreground = true;
			break;
		case 'r':
			if (nresv == MAX_RESERVATIONS) {
				fprintf(stderr, "clockwised: at most %d reservations\n",
					MAX_RESERVATIONS);
				return 2;
			}
			if (cwd_config_parse_resv(optarg, &resv[nresv], msg, sizeof(msg)) < 0) {
				fprintf(stderr, "clockwised: %s\n", msg);
				return 2;
			}
			nresv++;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("clockwised %s (libclockwise %s%s)\n", PACKAGE_VERSION, cw_version(),
			       cw_io_rbd_supported() ? ", +rbd" : "");
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}

	/* Request buffers come and go by the megabyte on many threads: the
	 * NBD server maps its large ones itself and gives them back whole,
	 * few arenas keep the rest from scattering, and the server trims
	 * them after a load.  A fixed mmap threshold (not glibc's sliding
	 * one) sits above what librbd allocates while a request runs (it
	 * receives a read of up to an object, 4 MiB by default, into a
	 * buffer of its own), and so does the trim threshold: at 256 KiB
	 * each such buffer was a fresh mapping, a page fault and a zeroed
	 * page per 4 KiB, and a 1 MiB read from a cluster cost the daemon
	 * three times the CPU of librbd's own. */
	mallopt(M_MMAP_THRESHOLD, 8 << 20);
	mallopt(M_TRIM_THRESHOLD, 16 << 20);
	mallopt(M_ARENA_MAX, 4);

	r = cwd_config_load(conf_path, &cfg, &err);
	if (r < 0) {
		cwd_log(LOG_ERR, "%s", err ? err : strerror(-r));
		free(err);
		return 1;
	}
	cwd_log_set_level(cfg->log_level);

	/* Signals are taken by sigtimedwait() below, never by the threads
	 * started from here on. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (!foreground && !getenv("NOTIFY_SOCKET"))
		ready_fd = detach();

	sd_notifyf(0, "STATUS=Opening pool %s", cfg->pool);
	r = pool_open(cfg->pool, init, &pool);
	if (r < 0)
		goto out;
	if (cw_pool_missing_disks(pool))
		cwd_log(LOG_WARNING, "pool %s is degraded: %u disk%s missing", cfg->pool,
			cw_pool_missing_disks(pool), cw_pool_missing_disks(pool) == 1 ? "" : "s");
	{
		struct cw_admit_state_opts ao;

		cw_admit_state_opts_init(&ao);
		ao.rebuild_share_ppm = cfg->rebuild_share * 10000;
		r = cw_admit_state_new(pool, &ao, &adm);
	}
	if (r < 0) {
		cwd_log(LOG_ERR, "cannot load the pool's reservations and models: %s",
			strerror(-r));
		goto out;
	}
	r = admit_config_models(pool, adm, cfg);
	if (r == 0)
		r = config_domains(pool, cfg);
	if (r < 0)
		goto out;
	r = admit_config_qos(pool, adm, cfg);
	if (r < 0)
		goto out;
	r = admit_config_host(adm, cfg);
	if (r < 0)
		goto out;
	for (i = 0; i < nresv; i++) {
		r = admit_start_resv(pool, adm, &resv[i], start_ns);
		if (r < 0)
			goto out;
	}
	r = pb_new(pool, adm, cfg, &pb);
	if (r < 0) {
		cwd_log(LOG_ERR, "cannot set up the disks: %s", strerror(-r));
		goto out;
	}
	cw_admit_state_set_listener(adm, pb_admit_event, pb);
	guarantee_check(cfg, pb);

	scfg.max_request = cfg->exports.max_request_bytes;
	scfg.max_connections = cfg->limits.connections;
	scfg.max_per_user = cfg->limits.connections_per_user;
	scfg.handshake_timeout_ns = (int64_t)cfg->limits.handshake_timeout_s * CW_NS_PER_S;
	scfg.idle_timeout_ns = (int64_t)cfg->limits.idle_timeout_s * CW_NS_PER_S;
	scfg.stall_timeout_ns = (int64_t)cfg->limits.stall_timeout_s * CW_NS_PER_S;
	scfg.reply_memory_bytes = cfg->limits.reply_memory_bytes;
	scfg.busy_poll_ns = cfg->busy_poll_us * 1000u;
	scfg.log = log_nbd;
	scfg.live_exports = true;
	r = cwd_config_access(cfg, conf_warn, NULL, &access, &n_access);
	if (r < 0) {
		cwd_log(LOG_ERR, "cannot set up the access lists: %s", strerror(-r));
		goto out;
	}
	scfg.access = access;
	scfg.n_access = n_access;
	r = tls_setup(cfg, &tls_creds);
	if (r < 0)
		goto out;
	scfg.tls_creds = tls_creds;
	r = nbdsrv_new(&scfg, &srv);
	if (r < 0) {
		cwd_log(LOG_ERR, "cannot set up the NBD server: %s", strerror(-r));
		goto out;
	}
	/* Without its control socket the daemon still serves what the pool
	 * holds, as before there was one. */
	if (svc_new(pool, adm, pb, srv, cfg, &svc) < 0)
		cwd_log(LOG_WARNING, "serving without a control socket");
	if (svc)
		r = svc_exports(svc, cfg->exports.all, &nexports, &nunserved);
	else if (cfg->exports.all)
		r = add_exports(pool, pb, srv, &nexports);
	if (r < 0)
		goto out;
	r = pb_start(pb);
	if (r < 0) {
		cwd_log(LOG_ERR, "cannot start the dispatchers: %s", strerror(-r));
		goto out;
	}
	if (listen_all(cfg, srv) < 0)
		goto out;
	r = nbdsrv_start(srv);
	if (r < 0) {
		cwd_log(LOG_ERR, "cannot start the NBD server: %s", strerror(-r));
		goto out;
	}
	if (svc) {
		r = svc_start(svc);
		if (r < 0) {
			cwd_log(LOG_ERR, "cannot start the control socket: %s", strerror(-r));
			goto out;
		}
		cwd_log(LOG_INFO, "control socket %s", cfg->control_socket);
	}

	if (nunserved)
		cwd_log(LOG_NOTICE, "ready: %zu export%s (%zu not served: a disk is missing), "
			"%zu reservation%s", nexports, nexports == 1 ? "" : "s", nunserved, nresv,
			nresv == 1 ? "" : "s");
	else
		cwd_log(LOG_NOTICE, "ready: %zu export%s, %zu reservation%s", nexports,
			nexports == 1 ? "" : "s", nresv, nresv == 1 ? "" : "s");
	mirror_tick(pool, nexports, status, sizeof(status), "READY=1\n");
	if (ready_fd >= 0)
		detached_ready(ready_fd);
	if (sd_watchdog_enabled(0, &wd_usec) <= 0)
		wd_usec = 0;

	for (;;) {
		struct timespec ts = { .tv_sec = INTENT_SWEEP_S };

		if (wd_usec && wd_usec / 2 < INTENT_SWEEP_S * UINT64_C(1000000)) {
			uint64_t half = wd_usec / 2;

			ts.tv_sec = (time_t)(half / 1000000);
			ts.tv_nsec = (long)(half % 1000000) * 1000;
		}
		sig = sigtimedwait(&set, NULL, &ts);
		if (sig < 0) {
			if (wd_usec)
				sd_notify(0, "WATCHDOG=1");
			mirror_tick(pool, nexports, status, sizeof(status), "");
			continue;
		}
		if (sig == SIGUSR1) {
			svc_log_stats(svc, pb);
			continue;
		}
		if (sig == SIGHUP) {
			cwd_log(LOG_NOTICE, "SIGHUP: the configuration is read at start; "
				"restart clockwised to apply changes");
			continue;
		}
		break;
	}
	cwd_log(LOG_NOTICE, "%s: stopping", strsignal(sig));
	sd_notify(0, "STOPPING=1\nSTATUS=Stopping");
	svc_free(svc);
	svc = NULL;
	nbdsrv_stop(srv);
	pb_log_stats(pb);
	rc = 0;
out:
	svc_free(svc);
	nbdsrv_free(srv);
	nbdtls_creds_free(tls_creds);
	cwd_config_access_free(access, n_access);
	pb_free(pb);
	cw_admit_state_free(adm);
	cw_pool_close(pool);
	cwd_config_free(cfg);
	return rc;
}
