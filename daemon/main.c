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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>

#include <clockwise/layout.h>

#include "daemon/conf.h"
#include "daemon/service.h"
#include "daemon/log.h"
#include "daemon/nbd-server.h"
#include "daemon/pool-backend.h"

#define MAX_RESERVATIONS 64

static void usage(FILE *f)
{
	fprintf(f,
		"usage: clockwised [-c FILE] [--foreground] [-r RESERVATION]... [--help] [--version]\n"
		"\n"
		"Serves the partitions of a Clockwise pool as NBD exports.\n"
		"\n"
		"  -c, --config FILE        configuration (default %s)\n"
		"  -f, --foreground         stay in the foreground, log to stderr\n"
		"  -r, --reserve SPEC       admit a stream at start:\n"
		"                           EXPORT:BANDWIDTH:BLOCK[:OFFSET:LENGTH[:START_S:END_S]]\n"
		"  -h, --help               this text\n"
		"  -V, --version            the version\n", CWD_CONFIG_DEFAULT_PATH);
}

static void log_nbd(void *userdata, int priority, const char *msg)
{
	(void)userdata;
	cwd_log(priority, "nbd: %s", msg);
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

static int listen_all(const struct cwd_config *cfg, struct nbdsrv *srv)
{
	char port[8];
	size_t i;
	int r;

	for (i = 0; i < cfg->n_listen_unix; i++) {
		r = nbdsrv_listen_unix(srv, cfg->listen_unix[i]);
		if (r < 0) {
			cwd_log(LOG_ERR, "cannot listen on %s: %s", cfg->listen_unix[i], strerror(-r));
			return r;
		}
		cwd_log(LOG_INFO, "listening on %s", cfg->listen_unix[i]);
	}
	for (i = 0; i < cfg->n_listen_tcp; i++) {
		const char *host = cfg->listen_tcp[i].host;

		/* The configuration's "" or "*" is every address; the
		 * server's empty host is loopback only. */
		if (!*host || strcmp(host, "*") == 0)
			host = "0.0.0.0";
		snprintf(port, sizeof(port), "%u", cfg->listen_tcp[i].port);
		r = nbdsrv_listen_tcp(srv, host, port);
		if (r < 0) {
			cwd_log(LOG_ERR, "cannot listen on %s:%s: %s", host, port, strerror(-r));
			return r;
		}
		cwd_log(LOG_INFO, "listening on %s:%s", host, port);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "reserve", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct pb_reservation resv[MAX_RESERVATIONS];
	struct nbdsrv_config scfg = { 0 };
	struct cwd_config *cfg = NULL;
	struct nbdsrv *srv = NULL;
	struct cw_pool *pool = NULL;
	struct cw_error perr = { 0 };
	struct pb *pb = NULL;
	struct svc *ctl = NULL;
	const char *conf_path = NULL;
	char *err = NULL, msg[512];
	bool foreground = false;
	size_t nresv = 0, nexports = 0, i;
	uint64_t wd_usec = 0;
	int c, r, sig, ready_fd = -1, rc = 1;
	sigset_t set;

	while ((c = getopt_long(argc, argv, "c:fr:hV", opts, NULL)) != -1) {
		switch (c) {
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
			if (pb_reservation_parse(optarg, &resv[nresv], msg, sizeof(msg)) < 0) {
				fprintf(stderr, "clockwised: %s\n", msg);
				return 2;
			}
			nresv++;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("clockwised %s (libclockwise %s)\n", PACKAGE_VERSION, cw_version());
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
	r = cw_pool_open(cfg->pool, &perr, &pool);
	if (r < 0) {
		cwd_log(LOG_ERR, "cannot open pool %s: %s", cfg->pool,
			perr.msg[0] ? perr.msg : strerror(-r));
		goto out;
	}
	if (cw_pool_missing_disks(pool))
		cwd_log(LOG_WARNING, "pool %s is degraded: %u disk%s missing", cfg->pool,
			cw_pool_missing_disks(pool), cw_pool_missing_disks(pool) == 1 ? "" : "s");
	r = pb_new(pool, cfg, &pb);
	if (r < 0) {
		cwd_log(LOG_ERR, "cannot set up the disks: %s", strerror(-r));
		goto out;
	}

	scfg.max_request = cfg->exports.max_request_bytes;
	scfg.busy_poll_ns = cfg->busy_poll_us * 1000u;
	scfg.log = log_nbd;
	scfg.live_exports = true;
	r = nbdsrv_new(&scfg, &srv);
	if (r < 0) {
		cwd_log(LOG_ERR, "cannot set up the NBD server: %s", strerror(-r));
		goto out;
	}
	/* Without its control socket the daemon still serves what the pool
	 * holds, as before there was one. */
	if (svc_new(pool, pb, srv, cfg, &ctl) < 0)
		cwd_log(LOG_WARNING, "serving without a control socket");
	if (cfg->exports.all) {
		r = ctl ? svc_export_all(ctl, &nexports) : add_exports(pool, pb, srv, &nexports);
		if (r < 0)
			goto out;
	}
	for (i = 0; i < nresv; i++) {
		r = pb_reserve(pb, &resv[i], msg, sizeof(msg));
		if (r < 0) {
			cwd_log(LOG_ERR, "%s", msg);
			goto out;
		}
	}
	if (ctl) {
		r = ctl_add_static_resvs(ctl);
		if (r < 0)
			goto out;
	}
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
	if (ctl) {
		r = svc_start(ctl);
		if (r < 0) {
			cwd_log(LOG_ERR, "cannot start the control socket: %s", strerror(-r));
			goto out;
		}
		cwd_log(LOG_INFO, "control socket %s", cfg->control_socket);
	}

	cwd_log(LOG_NOTICE, "ready: %zu export%s, %zu reservation%s", nexports,
		nexports == 1 ? "" : "s", nresv, nresv == 1 ? "" : "s");
	sd_notifyf(0, "READY=1\nSTATUS=Serving %zu export%s", nexports, nexports == 1 ? "" : "s");
	if (ready_fd >= 0)
		detached_ready(ready_fd);
	if (sd_watchdog_enabled(0, &wd_usec) <= 0)
		wd_usec = 0;

	for (;;) {
		struct timespec ts = { .tv_sec = 3600 };

		if (wd_usec) {
			uint64_t half = wd_usec / 2;

			ts.tv_sec = (time_t)(half / 1000000);
			ts.tv_nsec = (long)(half % 1000000) * 1000;
		}
		sig = sigtimedwait(&set, NULL, &ts);
		if (sig < 0) {
			if (wd_usec)
				sd_notify(0, "WATCHDOG=1");
			continue;
		}
		if (sig == SIGUSR1) {
			svc_log_stats(ctl, pb);
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
	svc_free(ctl);
	ctl = NULL;
	nbdsrv_stop(srv);
	pb_log_stats(pb);
	rc = 0;
out:
	svc_free(ctl);
	nbdsrv_free(srv);
	pb_free(pb);
	cw_pool_close(pool);
	cwd_config_free(cfg);
	return rc;
}
