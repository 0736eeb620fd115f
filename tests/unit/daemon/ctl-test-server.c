/*
 * Description: the control server of clockwised on its own, for tests of
 * the control plane before and apart from the data path.  It opens (or
 * creates) a real pool, serves the control socket with daemon/control/
 * and stops on SIGTERM or SIGINT.
 *
 *   ctl-test-server --pool DB --socket PATH [--mode OCTAL] [--read-gid GID]
 *                   [--admin-gid GID] [--rate-burst N] [--rate N]
 *                   [--calibrate-preset NAME]
 *
 * Its hooks stand where the daemon's data path will: export add/remove
 * keep a list (no NBD server runs), and stats report every disk with zero
 * counters, so the commands and their checks can be exercised end to end.
 * With --calibrate-preset, `disk calibrate` measures nothing and yields
 * that preset under the disk's name: a known model stored the way a
 * calibration stores it.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/control/control.h"

static struct cwc_server *srv;
static const char *calibrate_preset;

static int preset_calibrate(const char *path, const struct cw_calib_opts *opts,
			    cw_calib_progress_fn progress, void *userdata, struct cw_model *ret_model)
{
	int r = cw_model_preset(calibrate_preset, ret_model);

	(void)path, (void)progress, (void)userdata;
	if (r == 0)
		snprintf(ret_model->name, sizeof(ret_model->name), "%s", opts->name);
	return r;
}

static void on_signal(int sig)
{
	(void)sig;
	cwc_server_stop(srv);
}

struct daemon_stub {
	struct cw_pool *pool;
	unsigned n_exports;
};

static int export_add(void *userdata, const struct cwc_export *e, struct cw_part *part)
{
	struct daemon_stub *d = userdata;

	(void)e;
	if (!part)
		return -EINVAL;
	d->n_exports++;
	return 0;
}

static int export_remove(void *userdata, const struct cwc_export *e)
{
	struct daemon_stub *d = userdata;

	(void)e;
	d->n_exports--;
	return 0;
}

static int stats(void *userdata, struct cwc_stats *ret)
{
	struct daemon_stub *d = userdata;
	struct cw_disk_info *disks;
	size_t n;
	int r = cw_disk_list(d->pool, &disks, &n);

	if (r < 0)
		return r;
	ret->disks = calloc(n ? n : 1, sizeof(*ret->disks));
	if (!ret->disks) {
		free(disks);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		ret->disks[i].disk_id = disks[i].id;
	ret->n_disks = n;
	free(disks);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "pool", required_argument, NULL, 'p' }, { "socket", required_argument, NULL, 's' },
		{ "mode", required_argument, NULL, 'm' }, { "read-gid", required_argument, NULL, 'r' },
		{ "admin-gid", required_argument, NULL, 'a' },
		{ "rate-burst", required_argument, NULL, 'b' },
		{ "rate", required_argument, NULL, 'R' },
		{ "calibrate-preset", required_argument, NULL, 'c' }, { 0 }
	};
	struct cwc_server_opts o;
	struct daemon_stub d = { 0 };
	struct cw_error err = { 0 };
	const char *db = NULL;
	struct stat st;
	int opt, r;

	cwc_server_opts_init(&o);
	o.socket_path = NULL;
	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'p': db = optarg; break;
		case 's': o.socket_path = optarg; break;
		case 'm': o.socket_mode = (mode_t)strtoul(optarg, NULL, 8); break;
		case 'r': o.read_gid = o.socket_gid = (gid_t)strtoul(optarg, NULL, 10); break;
		case 'a': o.admin_gid = (gid_t)strtoul(optarg, NULL, 10); break;
		case 'b': o.rate_burst = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'R': o.rate_per_s = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'c': calibrate_preset = optarg; o.calibrate = preset_calibrate; break;
		default: return 2;
		}
	}
	if (!db || !o.socket_path) {
		fprintf(stderr, "usage: ctl-test-server --pool DB --socket PATH [...]\n");
		return 2;
	}
	r = stat(db, &st) == 0 ? cw_pool_open(db, &err, &d.pool)
			       : cw_pool_create(db, 0, &err, &d.pool);
	if (r < 0) {
		fprintf(stderr, "ctl-test-server: %s: %s\n", db, err.msg[0] ? err.msg : strerror(-r));
		return 1;
	}
	o.hooks = (struct cwc_hooks){ .userdata = &d, .export_add = export_add,
				      .export_remove = export_remove, .stats = stats };
	r = cwc_server_new(&o, d.pool, &srv);
	if (r < 0) {
		fprintf(stderr, "ctl-test-server: %s: %s\n", o.socket_path, strerror(-r));
		cw_pool_close(d.pool);
		return 1;
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	r = cwc_server_run(srv);
	cwc_server_free(srv);
	cw_pool_close(d.pool);
	if (r < 0) {
		fprintf(stderr, "ctl-test-server: %s\n", strerror(-r));
		return 1;
	}
	return 0;
}
