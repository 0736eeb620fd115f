/*
 * Description: clockwised.conf, good and bad.  Each file is written to a
 * temporary directory and loaded as the daemon loads it; a bad one must
 * fail with exactly "FILE:LINE: <what>; expected <what>" and hand out
 * nothing.  The shipped example and the man page are checked against the
 * parser's own key tables.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <clockwise/layout.h>
#include <clockwise/units.h>

#include "common/util.h"
#include "daemon/conf-groups.h"	/* the key tables */
#include "cwtest.h"
#include "tests/unit/daemon/lsan-libconfig.h"

static char tmpdir[256];
static unsigned file_seq;

/* Writes text to a new file; its path in ret_path. */
static void write_file(const char *text, char *ret_path, size_t len)
{
	FILE *f;

	snprintf(ret_path, len, "%s/c%u.conf", tmpdir, file_seq++);
	f = fopen(ret_path, "w");
	CU_ASSERT_FATAL(f != NULL);
	CU_ASSERT_FATAL(fputs(text, f) >= 0);
	CU_ASSERT_FATAL(fclose(f) == 0);
}

static struct cwd_config *load_ok(const char *text)
{
	struct cwd_config *c = NULL;
	char path[512], *err = NULL;
	int r;

	write_file(text, path, sizeof(path));
	r = cwd_config_load(path, &c, &err);
	if (r != 0)
		printf("\nunexpected: %s\n", err ? err : strerror(-r));
	CU_ASSERT_EQUAL_FATAL(r, 0);
	CU_ASSERT_PTR_NULL(err);
	CU_ASSERT_STRING_EQUAL(c->file, path);
	return c;
}

/* Loading path fails with r and exactly the message want, handing out
 * nothing. */
static void load_fails(const char *path, int r, const char *want)
{
	struct cwd_config *c = (struct cwd_config *)&c;	/* must stay untouched */
	char *err = NULL;

	CU_ASSERT_EQUAL(cwd_config_load(path, &c, &err), r);
	CU_ASSERT_PTR_EQUAL(c, (struct cwd_config *)&c);
	CU_ASSERT_PTR_NOT_NULL_FATAL(err);
	if (strcmp(err, want) != 0)
		printf("\n got: %s\nwant: %s\n", err, want);
	CU_ASSERT_STRING_EQUAL(err, want);
	free(err);
}

/* expected is the message after "FILE:", starting with the line number. */
static void load_bad(const char *text, const char *expected)
{
	char path[512], want[1024];

	write_file(text, path, sizeof(path));
	snprintf(want, sizeof(want), "%s:%s", path, expected);
	load_fails(path, -EINVAL, want);
}

static void test_defaults(void)
{
	struct cwd_config *c = load_ok("# nothing but a comment\n"), *d = NULL;

	CU_ASSERT_EQUAL(cwd_config_new(&d), 0);
	CU_ASSERT_STRING_EQUAL(d->file, "/etc/clockwise/clockwised.conf");
	for (struct cwd_config *x = c; x; x = x == c ? d : NULL) {
		CU_ASSERT_STRING_EQUAL(x->pool, "/var/lib/clockwise/pool.db");
		CU_ASSERT_EQUAL(x->policy, CWD_POLICY_DYNAMIC);
		CU_ASSERT_EQUAL(x->io_engine, CW_IO_URING);
		CU_ASSERT_EQUAL(x->queue_depth, 32);
		CU_ASSERT_EQUAL(x->mover_depth, 16);
		CU_ASSERT_EQUAL(x->mover_share, 100);
		CU_ASSERT_EQUAL(x->rebuild_share, 10);
		CU_ASSERT_EQUAL(x->busy_poll_us, 50);
		CU_ASSERT_EQUAL(x->stall_probe_us, 1000);
		CU_ASSERT_TRUE(x->lock_memory);
		CU_ASSERT_EQUAL(x->rt_cpus, 0);
		CU_ASSERT_FALSE(x->host.off);
		CU_ASSERT_EQUAL(x->host.share_ppm, 500000);
		CU_ASSERT_EQUAL(x->host.request_ns, 0);	/* measured */
		CU_ASSERT_EQUAL(x->host.copy_rate_bps, 0);
		/* A unix socket for the daemon's groups, and no TCP at all. */
		CU_ASSERT_EQUAL_FATAL(x->n_listen_unix, 1);
		CU_ASSERT_STRING_EQUAL(x->listen_unix[0], "/run/clockwise/nbd.sock");
		CU_ASSERT_EQUAL(x->n_listen_tcp, 0);
		CU_ASSERT_FALSE(x->insecure);
		CU_ASSERT_EQUAL(x->unix_mode, 0660);
		CU_ASSERT_PTR_NULL(x->unix_owner);
		CU_ASSERT_STRING_EQUAL(x->unix_group, "clockwise");
		CU_ASSERT_EQUAL_FATAL(x->n_access, 1);
		CU_ASSERT_PTR_NULL(x->access[0].export);
		CU_ASSERT_EQUAL_FATAL(x->access[0].n_read_write, 1);
		CU_ASSERT_STRING_EQUAL(x->access[0].read_write[0], "@clockwise-admin");
		CU_ASSERT_EQUAL_FATAL(x->access[0].n_read_only, 1);
		CU_ASSERT_STRING_EQUAL(x->access[0].read_only[0], "@clockwise");
		CU_ASSERT_STRING_EQUAL(x->control_socket, "/run/clockwise/control");
		CU_ASSERT_STRING_EQUAL(x->control_read_group, "clockwise");
		CU_ASSERT_STRING_EQUAL(x->control_admin_group, "clockwise-admin");
		CU_ASSERT_EQUAL(x->control_idle_timeout_s, 30);
		CU_ASSERT_FALSE(x->exports.all);
		CU_ASSERT_FALSE(x->exports.partial);
		CU_ASSERT_EQUAL(x->log_level, LOG_INFO);
		CU_ASSERT_FALSE(x->exports.read_only);
		CU_ASSERT_EQUAL(x->exports.block_size, 4096);
		CU_ASSERT_EQUAL(x->exports.max_request_bytes, 32u << 20);
		CU_ASSERT_TRUE(x->exports.multi_conn);
		CU_ASSERT_EQUAL(x->n_disks, 0);
	}
	cwd_config_free(c);
	cwd_config_free(d);
	cwd_config_free(NULL);
	CU_ASSERT_STRING_EQUAL(cwd_config_policy_name(CWD_POLICY_LST), "lst");
	CU_ASSERT_STRING_EQUAL(cwd_config_policy_name(CWD_POLICY_DYNAMIC), "dynamic");
	CU_ASSERT_STRING_EQUAL(cwd_config_log_level_name(LOG_WARNING), "warning");
}

static void test_full(void)
{
	struct cwd_config *c = load_ok(
		"pool = \"/srv/pool.db\";\n"
		"io_engine = \"libaio\";\n"
		"queue_depth = 4096L; mover_depth = 64; mover_share = 25; rebuild_share = 0;\n"
		"busy_poll_us = 0; lock_memory = false; rt_cpus = [ 0, 2, 63 ]; stall_probe_us = 0;\n"
		"disks = (\n"
		"  { path = \"/dev/loop0\"; name = \"hdd0\"; slot_us = 2500; model = \"atlas2\"; },\n"
		"  { path = \"/dev/loop1\"; name = \"ssd.0_a-b\"; tier = \"ssd\"; policy = \"lst\"; "
		"be_order = \"sfc\"; emulate = \"ssd\"; },\n"
		"  { path = \"/dev/loop2\"; name = \"ssd1\"; tier = \"ssd\"; lanes = 64; slot_us = 1000000; "
		"policy = \"dynamic\"; },\n"
		"  { path = \"rbd:media/r0?conf=/etc/ceph/ceph.conf&id=cw\"; name = \"r0\"; }\n"
		");\n"
		"policy = \"edf\";  # after the disks: still their default\n"
		"be_order = \"fifo\";\n"
		"control_socket = \"/run/cw/ctl\";\n"
		"control_read_group = \"video\"; control_admin_group = \"wheel\";\n"
		"control_idle_timeout_s = 0;\n"
		"log_level = \"error\";\n"
		"exports = { read_only = true; block_size = 512; max_request_bytes = 0x100000; "
		"multi_conn = false; all = true; activation_mode = \"partial\"; };\n"
		"host = { test = false; share = \"12.5%\"; request_cost = \"20us\"; "
		"copy_rate = \"4GB/s\"; };\n");

	CU_ASSERT_STRING_EQUAL(c->pool, "/srv/pool.db");
	CU_ASSERT_EQUAL(c->io_engine, CW_IO_AIO);
	CU_ASSERT_EQUAL(c->queue_depth, 4096);
	CU_ASSERT_EQUAL(c->mover_depth, 64);
	CU_ASSERT_EQUAL(c->mover_share, 25);
	CU_ASSERT_EQUAL(c->rebuild_share, 0);
	CU_ASSERT_EQUAL(c->busy_poll_us, 0);
	CU_ASSERT_EQUAL(c->stall_probe_us, 0);
	CU_ASSERT_FALSE(c->lock_memory);
	CU_ASSERT_EQUAL(c->rt_cpus, (UINT64_C(1) << 63) | 5);
	CU_ASSERT_TRUE(c->host.off);
	CU_ASSERT_EQUAL(c->host.share_ppm, 125000);
	CU_ASSERT_EQUAL(c->host.request_ns, 20000);
	CU_ASSERT_EQUAL(c->host.copy_rate_bps, 4000000000u);
	CU_ASSERT_EQUAL(c->policy, CWD_POLICY_EDF);
	CU_ASSERT_STRING_EQUAL(c->control_socket, "/run/cw/ctl");
	CU_ASSERT_STRING_EQUAL(c->control_read_group, "video");
	CU_ASSERT_STRING_EQUAL(c->control_admin_group, "wheel");
	CU_ASSERT_EQUAL(c->control_idle_timeout_s, 0);
	CU_ASSERT_EQUAL(c->log_level, LOG_ERR);
	CU_ASSERT_TRUE(c->exports.read_only);
	CU_ASSERT_EQUAL(c->exports.block_size, 512);
	CU_ASSERT_EQUAL(c->exports.max_request_bytes, 1 << 20);
	CU_ASSERT_FALSE(c->exports.multi_conn);
	CU_ASSERT_TRUE(c->exports.all);
	CU_ASSERT_TRUE(c->exports.partial);
	CU_ASSERT_EQUAL_FATAL(c->n_disks, 4);
	/* an image on a cluster: its name is not a file's, its tier is rbd */
	CU_ASSERT_STRING_EQUAL(c->disks[3].path, "rbd:media/r0?conf=/etc/ceph/ceph.conf&id=cw");
	CU_ASSERT_EQUAL(c->disks[3].tier, CW_TIER_RBD);
	CU_ASSERT_EQUAL(c->disks[3].lanes, 1);
	CU_ASSERT_STRING_EQUAL(c->disks[0].path, "/dev/loop0");
	CU_ASSERT_STRING_EQUAL(c->disks[0].name, "hdd0");
	CU_ASSERT_EQUAL(c->disks[0].tier, CW_TIER_HDD);
	CU_ASSERT_EQUAL(c->disks[0].policy, CWD_POLICY_EDF);
	CU_ASSERT_EQUAL(c->be_order, CWD_BE_FIFO);
	CU_ASSERT_EQUAL(c->disks[0].be_order, CWD_BE_FIFO);
	CU_ASSERT_EQUAL(c->disks[1].be_order, CWD_BE_SFC);
	CU_ASSERT_EQUAL(c->disks[0].slot_ns, 2500 * CW_NS_PER_US);
	CU_ASSERT_EQUAL(c->disks[0].lanes, 1);
	CU_ASSERT_STRING_EQUAL(c->disks[0].model, "atlas2");
	CU_ASSERT_EQUAL(c->disks[0].line, 6);
	CU_ASSERT_STRING_EQUAL(c->disks[1].name, "ssd.0_a-b");
	CU_ASSERT_EQUAL(c->disks[1].tier, CW_TIER_SSD);
	CU_ASSERT_EQUAL(c->disks[1].policy, CWD_POLICY_LST);
	CU_ASSERT_EQUAL(c->disks[2].policy, CWD_POLICY_DYNAMIC);
	CU_ASSERT_EQUAL(c->disks[1].lanes, cwd_config_default_lanes(CW_TIER_SSD));
	CU_ASSERT_EQUAL(c->disks[1].slot_ns, 100 * CW_NS_PER_US);
	CU_ASSERT_PTR_NULL(c->disks[1].model);
	CU_ASSERT_PTR_NULL(c->disks[0].emulate);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c->disks[1].emulate);
	CU_ASSERT_STRING_EQUAL(c->disks[1].emulate->name, "ssd");
	CU_ASSERT_EQUAL(c->disks[2].lanes, 64);
	CU_ASSERT_EQUAL(c->disks[2].slot_ns, CW_NS_PER_S);
	CU_ASSERT_EQUAL(c->disks[2].line, 8);
	cwd_config_free(c);
}

static void test_listen(void)
{
	struct cwd_config *c = load_ok(
		"listen = {\n"
		"  unix = [ \"/run/clockwise/nbd\", \"/tmp/x.sock\" ];\n"
		"  tcp = ( \"[::1]:10810\", \"localhost\", \"::1\", \"127.1.2.3:1\", \"[::ffff:127.0.0.1]\" );\n"
		"};\n");

	CU_ASSERT_EQUAL_FATAL(c->n_listen_unix, 2);
	CU_ASSERT_STRING_EQUAL(c->listen_unix[1], "/tmp/x.sock");
	CU_ASSERT_EQUAL_FATAL(c->n_listen_tcp, 5);
	CU_ASSERT_STRING_EQUAL(c->listen_tcp[0].host, "::1");
	CU_ASSERT_EQUAL(c->listen_tcp[0].port, 10810);
	CU_ASSERT_STRING_EQUAL(c->listen_tcp[1].host, "localhost");
	CU_ASSERT_EQUAL(c->listen_tcp[1].port, 10809);
	CU_ASSERT_STRING_EQUAL(c->listen_tcp[2].host, "::1");
	CU_ASSERT_EQUAL(c->listen_tcp[2].port, 10809);
	CU_ASSERT_EQUAL(c->listen_tcp[3].port, 1);
	for (size_t i = 0; i < c->n_listen_tcp; i++)
		CU_ASSERT_TRUE(c->listen_tcp[i].loopback);
	cwd_config_free(c);

	/* a listen group with only a unix socket means no TCP at all */
	c = load_ok("listen = { unix = \"/run/cw.sock\"; };\n");
	CU_ASSERT_EQUAL(c->n_listen_unix, 1);
	CU_ASSERT_EQUAL(c->n_listen_tcp, 0);
	cwd_config_free(c);

	c = load_ok("listen = { tcp = [ \"*:9000\", \"0.0.0.0:1\", \"192.0.2.1\", \"[2001:db8::1]:5\" ];"
		    " insecure = true; };\n");
	CU_ASSERT_EQUAL_FATAL(c->n_listen_tcp, 4);
	CU_ASSERT_STRING_EQUAL(c->listen_tcp[0].host, "");
	CU_ASSERT_EQUAL(c->listen_tcp[0].port, 9000);
	CU_ASSERT_STRING_EQUAL(c->listen_tcp[3].host, "2001:db8::1");
	for (size_t i = 0; i < c->n_listen_tcp; i++)
		CU_ASSERT_FALSE(c->listen_tcp[i].loopback);
	CU_ASSERT_TRUE(c->insecure);
	cwd_config_free(c);

	c = load_ok("listen = { unix = \"/run/cw.sock\"; unix_mode = \"0600\"; unix_owner = \"root\";"
		    " unix_group = \"1234\"; };\n");
	CU_ASSERT_EQUAL(c->unix_mode, 0600);
	CU_ASSERT_STRING_EQUAL(c->unix_owner, "root");
	CU_ASSERT_STRING_EQUAL(c->unix_group, "1234");
	cwd_config_free(c);
}

static void test_metrics(void)
{
	struct cwd_config *c = load_ok("# no metrics unless asked\n");
	const struct sockaddr_in *in;
	const struct sockaddr_in6 *in6;

	CU_ASSERT_EQUAL(c->metrics.n, 0);
	cwd_config_free(c);
	c = load_ok("metrics = {\n"
		    "  listen = [ \"127.0.0.1:9477\", \"/run/clockwise/metrics.sock\", \"[::1]:1\","
		    " \"127.9.8.7\" ];\n"
		    "};\n");
	CU_ASSERT_EQUAL_FATAL(c->metrics.n, 4);
	in = (const struct sockaddr_in *)&c->metrics.addr[0];
	CU_ASSERT_EQUAL(in->sin_family, AF_INET);
	CU_ASSERT_EQUAL(ntohs(in->sin_port), 9477);
	CU_ASSERT_EQUAL(c->metrics.addr[1].ss_family, AF_UNIX);
	CU_ASSERT_STRING_EQUAL(((const struct sockaddr_un *)&c->metrics.addr[1])->sun_path,
			       "/run/clockwise/metrics.sock");
	in6 = (const struct sockaddr_in6 *)&c->metrics.addr[2];
	CU_ASSERT_EQUAL(in6->sin6_family, AF_INET6);
	CU_ASSERT_EQUAL(ntohs(in6->sin6_port), 1);
	in = (const struct sockaddr_in *)&c->metrics.addr[3];
	CU_ASSERT_EQUAL(ntohs(in->sin_port), CWD_DEFAULT_METRICS_PORT);
	cwd_config_free(c);

	load_bad("\nmetrics = { listen = \"0.0.0.0:9477\"; };\n",
		 "2: metrics.listen = \"0.0.0.0:9477\" is not a loopback address: anyone who "
		 "reaches it would read the counters; expected a unix socket, 127.X.X.X or [::1]");
	load_bad("metrics = {\n listen = [ \"/run/m.sock\",\n \"[2001:db8::1]:80\" ]; };\n",
		 "3: metrics.listen[1] = \"[2001:db8::1]:80\" is not a loopback address: anyone who "
		 "reaches it would read the counters; expected a unix socket, 127.X.X.X or [::1]");
	load_bad("metrics = { listen = \"localhost:9477\"; };\n",
		 "1: metrics.listen = \"localhost:9477\" is not an address; expected an absolute "
		 "path, 127.X.X.X:PORT or [::1]:PORT (port 9477 when none)");
	load_bad("metrics = { listen = \"127.0.0.1:0\"; };\n",
		 "1: metrics.listen = \"127.0.0.1:0\" has no valid port; expected a port from 1 to 65535");
	load_bad("metrics = { port = 9477; };\n",
		 "1: unknown setting \"port\" in metrics; expected listen");
}

static void test_bad_top(void)
{
	load_bad("queue_depht = 32;\n",
		 "1: unknown setting \"queue_depht\"; expected pool, policy, be_order, io_engine, queue_depth, "
		 "mover_depth, mover_share, rebuild_share, rt_priority, lock_memory, rt_cpus, busy_poll_us, stall_probe_us, listen, tls, control_socket, control_read_group, control_admin_group, control_idle_timeout_s, log_level, exports, "
		 "access, limits, host, metrics or disks");
	load_bad("# a comment\n\nqueue_depth = \"32\";\n",
		 "3: queue_depth is a string; expected an integer from 1 to 4096");
	load_bad("control_idle_timeout_s = 3601;\n", "1: control_idle_timeout_s = 3601 is out of range; "
		 "expected an integer from 0 to 3600");
	load_bad("queue_depth = 0;\n", "1: queue_depth = 0 is out of range; expected an integer from 1 to 4096");
	load_bad("queue_depth = 5000000000L;\n",
		 "1: queue_depth = 5000000000 is out of range; expected an integer from 1 to 4096");
	load_bad("queue_depth = -3;\n", "1: queue_depth = -3 is out of range; expected an integer from 1 to 4096");
	load_bad("\nmover_depth = 65;\n",
		 "2: mover_depth = 65 is out of range; expected an integer from 1 to 64");
	load_bad("rebuild_share = 91;\n",
		 "1: rebuild_share = 91 is out of range; expected an integer from 0 to 90");
	load_bad("mover_share = 0;\n",
		 "1: mover_share = 0 is out of range; expected an integer from 1 to 100");
	load_bad("mover_share = 0.5;\n",
		 "1: mover_share is a number with a fraction; expected an integer from 1 to 100");
	load_bad("\nrt_priority = 100;\n", "2: rt_priority = 100 is out of range; expected an integer from 0 to 99");
	load_bad("\n\nrt_cpus = [ ];\n", "3: rt_cpus is empty; expected at least one CPU number");
	load_bad("rt_cpus = [ 1, 64 ];\n", "1: rt_cpus[1] = 64 is out of range; expected an integer from 0 to 63");
	load_bad("rt_cpus = 1;\n", "1: rt_cpus is an integer; expected an array of CPU numbers, like [ 1, 3 ]");
	load_bad("\nhost = { share = 0; };\n", "2: host.share is not a share of the CPUs; expected a percentage above 0 and at most 100, like \"50%\"");
	load_bad("host = { share = \"50 %\"; };\n", "1: host.share is not a share of the CPUs; expected a percentage above 0 and at most 100, like \"50%\"");
	load_bad("host = { request_cost = \"2s\"; };\n", "1: host.request_cost = \"2s\" is not a request's CPU time; expected a duration above 0 and at most 1s, such as \"20us\"");
	load_bad("host = { request_cost = 20; };\n", "1: host.request_cost is an integer; expected a duration such as \"20us\"");
	load_bad("host = { copy_rate = \"fast\"; };\n", "1: host.copy_rate = \"fast\" is not a rate; expected " CW_UNITS_RATE_HELP);
	load_bad("host = 1;\n", "1: host is an integer; expected a group { name = value; ... }");
	load_bad("lock_memory = 1;\n", "1: lock_memory is an integer; expected true or false");
	load_bad("stall_probe_us = 100001;\n",
		 "1: stall_probe_us = 100001 is out of range; expected an integer from 0 to 100000");
	load_bad("busy_poll_us = -1;\n",
		 "1: busy_poll_us = -1 is out of range; expected an integer from 0 to 10000");
	load_bad("queue_depth = 3.0;\n",
		 "1: queue_depth is a number with a fraction; expected an integer from 1 to 4096");
	load_bad("io_engine = \"spdk\";\n",
		 "1: io_engine = \"spdk\" is not an I/O engine; expected \"io_uring\" or \"libaio\"");
	load_bad("be_order = \"wfq\";\n",
		 "1: be_order = \"wfq\" is not a best-effort order; expected \"fifo\", \"rbfq\" or \"sfc\"");
	load_bad("pool = \"/a\";\npolicy = \"fifo\";\n",
		 "2: policy = \"fifo\" is not a dispatch policy; expected \"delta-l\", \"edf\", \"lst\" or \"dynamic\"");
	load_bad("log_level = 3;\n",
		 "1: log_level is an integer; expected \"err\", \"warning\", \"notice\", \"info\" or \"debug\"");
	load_bad("log_level = \"verbose\";\n",
		 "1: log_level = \"verbose\" is not a log level; expected \"err\", \"warning\", \"notice\", "
		 "\"info\" or \"debug\"");
	load_bad("pool = \"relative.db\";\n",
		 "1: pool = \"relative.db\" is not an absolute path; expected a path starting with /");
	load_bad("pool = true;\n", "1: pool is a boolean; expected an absolute path in quotes");
	{
		/* one byte longer than sun_path holds with its NUL */
		char text[300], want[300], longp[109];

		memset(longp, 'x', sizeof(longp) - 1);
		longp[0] = '/';
		longp[sizeof(longp) - 1] = '\0';
		snprintf(text, sizeof(text), "control_socket = \"%s\";\n", longp);
		snprintf(want, sizeof(want), "1: control_socket is %zu bytes long; expected an absolute "
			 "path of at most 107 bytes", strlen(longp));
		load_bad(text, want);
		snprintf(text, sizeof(text), "listen = { unix = [ \"/run\", \"%s\" ]; };\n", longp);
		snprintf(want, sizeof(want), "1: listen.unix[1] is %zu bytes long; expected an absolute "
			 "path of at most 107 bytes", strlen(longp));
		load_bad(text, want);
		longp[107] = '\0';	/* exactly as long as fits */
		snprintf(text, sizeof(text), "control_socket = \"%s\";\n", longp);
		cwd_config_free(load_ok(text));
	}
	load_bad("pool = { x = 1; };\n", "1: pool is a group; expected an absolute path in quotes");
}

static void test_syntax(void)
{
	load_bad("pool = \"/x\"\nio_engine = libaio;\n",
		 "2: syntax error; expected libconfig syntax (name = value; see clockwised.conf(5))");
	load_bad("pool = \"/x\";\n\n\npool = \"/y\";\n",
		 "4: duplicate setting name; expected libconfig syntax (name = value; see clockwised.conf(5))");
	load_bad("exports = {\n read_only = false;\n", /* never closed: found at the end */
		 "3: syntax error; expected libconfig syntax (name = value; see clockwised.conf(5))");
}

/* Sizes may carry a unit, with the meaning they have everywhere. */
static void test_size_units(void)
{
	struct cwd_config *c = load_ok("exports = { block_size = \"64K\"; "
				       "max_request_bytes = \"1MiB\"; };\n");

	CU_ASSERT_EQUAL(c->exports.block_size, 65536);
	CU_ASSERT_EQUAL(c->exports.max_request_bytes, 1 << 20);
	cwd_config_free(c);
	load_bad("exports = { block_size = \"4Kb\"; };\n",
		 "1: exports.block_size = \"4Kb\" is not a size; expected an integer or a size such "
		 "as 4096, 64K or 1.5G (K, M, G, T: powers of 1024) or 64KB (KB, MB, GB, TB: "
		 "powers of 1000)");
	load_bad("exports = { block_size = \"4KB\"; };\n",
		 "1: exports.block_size = 4000 is not a power of two; expected a power of two "
		 "from 512 to 65536");
	load_bad("exports = { block_size = \"128K\"; };\n",
		 "1: exports.block_size = \"128K\" is out of range; expected a size from 512 to 65536");
}

/* exports.ublk: the partitions served as ublk devices, their depth and
 * largest request. */
static void test_ublk_exports(void)
{
	struct cwd_config *c = load_ok("exports = { ublk = [ \"media\", \"vm\" ];\n"
				       "  ublk_queue_depth = 32; ublk_max_request_bytes = \"1M\";\n"
				       "  ublk_queues = 2; };\n");

	CU_ASSERT_EQUAL_FATAL(c->exports.n_ublk, 2);
	CU_ASSERT_STRING_EQUAL(c->exports.ublk[0], "media");
	CU_ASSERT_STRING_EQUAL(c->exports.ublk[1], "vm");
	CU_ASSERT_EQUAL(c->exports.ublk_queue_depth, 32);
	CU_ASSERT_EQUAL(c->exports.ublk_max_request_bytes, 1u << 20);
	CU_ASSERT_EQUAL(c->exports.ublk_queues, 2);
	cwd_config_free(c);
	load_bad("exports = { ublk_queues = 65; };\n",
		 "1: exports.ublk_queues = 65 is out of range; expected an integer from 0 to 64");
	load_bad("exports = { ublk_queue_depth = 5000; };\n",
		 "1: exports.ublk_queue_depth = 5000 is out of range; expected an integer from 1 to 4096");
	load_bad("exports = { ublk_max_request_bytes = 2048; };\n",
		 "1: exports.ublk_max_request_bytes = 2048 is out of range; expected an integer from "
		 "4096 to 1048576");
	load_bad("exports = { ublk = \"media\"; };\n",
		 "1: exports.ublk is a string; expected an array [ \"PARTITION\", ... ]");
}

static void test_bad_exports(void)
{
	load_bad("exports = { block_size = 1000; };\n",
		 "1: exports.block_size = 1000 is not a power of two; expected a power of two from 512 to 65536");
	load_bad("exports = {\n  block_size = 131072;\n};\n",
		 "2: exports.block_size = 131072 is out of range; expected an integer from 512 to 65536");
	load_bad("exports = { read_only = 1; };\n", "1: exports.read_only is an integer; expected true or false");
	load_bad("exports = {\n  bogus = 1;\n};\n",
		 "2: unknown setting \"bogus\" in exports; expected read_only, block_size, "
		 "max_request_bytes, multi_conn, all, activation_mode, qos, ublk, ublk_queue_depth, "
		 "ublk_queues or ublk_max_request_bytes");
	load_bad("exports = { activation_mode = \"degraded\"; };\n",
		 "1: exports.activation_mode = \"degraded\" is not an activation mode; expected "
		 "\"complete\" or \"partial\"");
	load_bad("control_admin_group = \"a b\";\n",
		 "1: control_admin_group = \"a b\" is not a valid name; expected 1 to 32 of "
		 "A-Z a-z 0-9 . _ -, not starting with .");
	load_bad("exports = { all = 1; };\n", "1: exports.all is an integer; expected true or false");
	load_bad("\nexports = { block_size = 65536;\n max_request_bytes = 4096; };\n",
		 "2: exports.max_request_bytes (4096) is smaller than exports.block_size (65536); "
		 "expected max_request_bytes >= block_size");
	load_bad("exports = [ 1 ];\n", "1: exports is an array; expected a group { name = value; ... }");
}

static void test_bad_disks(void)
{
	load_bad("disks = (\n  { name = \"a\"; }\n);\n",
		 "2: disks[0] has no path; expected path = \"/dev/...\" in every disk");
	load_bad("disks = (\n  { path = \"/dev/a\"; name = \"a\"; },\n  { path = \"/dev/b\"; }\n);\n",
		 "3: disks[1] has no name; expected name = \"...\" in every disk");
	load_bad("disks = (\n  { path = \"/dev/a\"; name = \"a\"; },\n\n  { path = \"/dev/b\"; name = \"a\"; }\n);\n",
		 "4: disk name \"a\" is used twice (also at line 2); expected a different name for each disk");
	load_bad("disks = ( { path = \"/dev/a\"; name = \"a\"; },\n { path = \"/dev/a\"; name = \"b\"; } );\n",
		 "2: disk path \"/dev/a\" is used twice (also at line 1); expected a different path for each disk");
	load_bad("disks = ( {\n  path = \"/dev/a\";\n  lanes = 2;\n  name = \"a\"; } );\n",
		 "3: disks[0].lanes is set on an hdd; expected lanes only with tier = \"ssd\"");
	load_bad("disks = ( { path = \"/dev/a\"; name = \"a\"; tier = \"ssd\"; lanes = 65; } );\n",
		 "1: disks[0].lanes = 65 is out of range; expected an integer from 1 to 64");
	load_bad("disks = ( { path = \"/dev/a\"; name = \"a\"; tier = \"tape\"; } );\n",
		 "1: disks[0].tier = \"tape\" is not a tier; expected \"hdd\", \"ssd\" or \"rbd\"");
	load_bad("disks = ( { path = \"rbd:p/i\"; name = \"a\"; tier = \"ssd\"; } );\n",
		 "1: disks[0]: tier rbd goes with path = \"rbd:POOL/IMAGE\" and only with it; "
		 "expected tier = \"rbd\" with an rbd: path, another tier with a file or device");
	load_bad("disks = ( { path = \"/dev/a\"; name = \"a\"; tier = \"rbd\"; } );\n",
		 "1: disks[0]: tier rbd goes with path = \"rbd:POOL/IMAGE\" and only with it; "
		 "expected tier = \"rbd\" with an rbd: path, another tier with a file or device");
	load_bad("disks = ( { path = \"/dev/a\"; name = \"a\"; slot_us = 1.5; } );\n",
		 "1: disks[0].slot_us is a number with a fraction; expected an integer from 1 to 1000000");
	load_bad("disks = ( { path = \"/dev/a\"; name = \"a\"; slot_us = 0; } );\n",
		 "1: disks[0].slot_us = 0 is out of range; expected an integer from 1 to 1000000");
	load_bad("disks = ( { path = \"/dev/a\"; name = \"bad name\"; } );\n",
		 "1: disks[0].name = \"bad name\" is not a valid name; expected 1 to 63 of A-Z a-z 0-9 . _ -, "
		 "not starting with .");
	load_bad("disks = ( { path = \"/dev/a\"; name = \".hidden\"; } );\n",
		 "1: disks[0].name = \".hidden\" is not a valid name; expected 1 to 63 of A-Z a-z 0-9 . _ -, "
		 "not starting with .");
	load_bad("disks = ( { path = \"/dev/a\"; name = \"a\"; model = \"a-model-name-longer-than-31-bytes\"; } );\n",
		 "1: disks[0].model = \"a-model-name-longer-than-31-bytes\" is not a valid name; expected 1 to 31 "
		 "of A-Z a-z 0-9 . _ -, not starting with .");
	load_bad("disks = ( { path = \"/dev/a\"; name = \"a\";\n emulate = \"atlas3\"; } );\n",
		 "2: disks[0].emulate: \"atlas3\" is not a known model; expected a preset (atlas2, "
		 "hdd7200, ssd, rbd), perhaps with settings (channels=, stripe=, write=, gc=, bus=), "
		 "or a model string \"cwmodel1 ...\" as calibration stores it");
	load_bad("disks = ( { path = \"/dev/a\"; name = \"a\"; emulate = \"cwmodel1 name=x\"; } );\n",
		 "1: disks[0].emulate: not a valid model string; expected \"cwmodel1 name=... "
		 "tier=... cap=... rot=... ovh=... seek=... zones=...\" as calibration stores it");
	/* the mechanics of an emulated disk, each bad value with why */
	load_bad("disks = ( { path = \"/dev/a\"; name = \"a\";\n\n emulate = \"ssd channels=0\"; } );\n",
		 "3: disks[0].emulate: channels=0: expected 1 to 64");
	load_bad("disks = ( { path = \"/dev/a\"; name = \"a\"; emulate = \"ssd channels=65\"; } );\n",
		 "1: disks[0].emulate: channels=65: expected 1 to 64");
	load_bad("disks = ( { path = \"/dev/a\"; name = \"a\"; emulate = \"ssd write=0\"; } );\n",
		 "1: disks[0].emulate: write=0: expected what a write costs in reads, 0.001 to 1000 "
		 "(2: twice a read)");
	load_bad("disks = ( { path = \"/dev/a\"; name = \"a\"; emulate = \"ssd gc=1G\"; } );\n",
		 "1: disks[0].emulate: gc=1G: expected SIZE/DURATION, a pause of DURATION after every "
		 "SIZE written (1G/50ms)");
	load_bad("disks = ( { path = \"/dev/a\"; name = \"a\"; emulate = \"ssd gc=1G/200s\"; } );\n",
		 "1: disks[0].emulate: gc=.../200s: expected a duration such as 90 (seconds), 1.5s, "
		 "250ms, 10m or 2h, above 0 and at most 100 s");
	load_bad("disks = ( { path = \"/dev/a\"; name = \"a\"; emulate = \"ssd bus=fast\"; } );\n",
		 "1: disks[0].emulate: bus=fast: expected " CW_UNITS_RATE_HELP);
	load_bad("disks = ( { path = \"/dev/a\"; name = \"a\"; emulate = \"ssd speed=3\"; } );\n",
		 "1: disks[0].emulate: speed: not a setting of a preset; expected channels, stripe, "
		 "write, gc or bus");
	load_bad("disks = ( { path = \"/dev/a\"; name = \"a\"; emulate = \"atlas2 channels=4\"; } );\n",
		 "1: disks[0].emulate: channels, stripe, write and gc are an SSD's settings, and this "
		 "model's tier is hdd");
	load_bad("disks = ( { path = \"/dev/a\"; name = \"a\"; emulate = \"ssd channels=2 channels=3\"; } );\n",
		 "1: disks[0].emulate: channels is set twice");
	load_bad("disks = ( { path = \"/dev/a\"; name = \"a\"; emulate = 7200; } );\n",
		 "1: disks[0].emulate is an integer; expected a model preset or a model string in quotes");
	load_bad("disks = ( { path = \"/dev/a\"; name = \"a\"; policy = \"rr\"; } );\n",
		 "1: disks[0].policy = \"rr\" is not a dispatch policy; expected \"delta-l\", \"edf\", \"lst\" or \"dynamic\"");
	load_bad("disks = ( { path = \"dev/a\"; name = \"a\"; } );\n",
		 "1: disks[0].path = \"dev/a\" is not an absolute path; expected a path starting with /");
	load_bad("disks = (\n  { path = \"/dev/a\";\n    speed = 7200; name = \"a\"; } );\n",
		 "3: unknown setting \"speed\" in disks[0]; expected path, name, tier, policy, be_order, slot_us, "
		 "lanes, model, emulate, fault or domain");
	load_bad("disks = ( { path = \"/dev/a\"; name = \"a\"; fault = \"cut-write=x\"; } );\n",
		 "1: disks[0].fault: bad fault setting at \"cut-write=x\"; expected fail=N, fail-write=N, "
		 "fail-fsync=N, tear-write=N, fail-range=OFF+LEN, fail-count=N, cut-write=N, "
		 "cut-file=PATH, cut=drop|tear, seed=N, delay-us=N or fail-file=PATH");
	load_bad("disks = { };\n", "1: disks is a group; expected a list ( { path = ...; name = ...; }, ... )");
	load_bad("disks = [ 5 ];\n", "1: disks is an array; expected a list ( { path = ...; name = ...; }, ... )");
	load_bad("disks = (\n 5 );\n", "2: disks[0] is an integer; expected a group { name = value; ... }");
	{
		/* as many disks as a pool can hold (CW_DISKS_MAX), no more */
		size_t cap = (CW_DISKS_MAX + 1) * 48 + 64, len;
		char *text = malloc(cap);

		CU_ASSERT_PTR_NOT_NULL_FATAL(text);
		len = (size_t)snprintf(text, cap, "disks = (\n");
		for (int i = 0; i < CW_DISKS_MAX + 1; i++)
			len += (size_t)snprintf(text + len, cap - len, "%s{ path = \"/d%d\"; name = \"d%d\"; }",
						i ? ", " : "", i, i);
		snprintf(text + len, cap - len, " );\n");
		load_bad(text, "1: disks has 256 entries; expected at most 255");
		free(text);
	}
}

/* TLS per listener: the group's mode, an entry's own, the credentials;
 * a remote TCP address is taken when it requires TLS. */
static void test_tls(void)
{
	struct cwd_config *c;

	c = load_ok("listen = {\n"
		    "  unix = ( \"/run/a.sock\", { path = \"/run/b.sock\"; tls = \"require\"; } );\n"
		    "  tcp = ( \"127.0.0.1\", { address = \"192.0.2.1:10810\"; tls = \"require\"; } );\n"
		    "  tls = \"on\";\n"
		    "};\n"
		    "tls = { certificates = \"/etc/pki\"; verify_peer = true; };\n");
	CU_ASSERT_EQUAL_FATAL(c->n_listen_unix, 2);
	CU_ASSERT_STRING_EQUAL(c->listen_unix[1], "/run/b.sock");
	CU_ASSERT_EQUAL(c->listen_unix_tls[0], CW_NBD_TLS_ON);
	CU_ASSERT_EQUAL(c->listen_unix_tls[1], CW_NBD_TLS_REQUIRE);
	CU_ASSERT_EQUAL_FATAL(c->n_listen_tcp, 2);
	CU_ASSERT_EQUAL(c->listen_tcp[0].tls, CW_NBD_TLS_ON);
	CU_ASSERT_EQUAL(c->listen_tcp[1].tls, CW_NBD_TLS_REQUIRE);
	CU_ASSERT_FALSE(c->listen_tcp[1].loopback);
	CU_ASSERT_FALSE(c->insecure);
	CU_ASSERT_STRING_EQUAL(c->tls.certificates, "/etc/pki");
	CU_ASSERT_PTR_NULL(c->tls.psk);
	CU_ASSERT_TRUE(c->tls.verify_peer);
	cwd_config_free(c);
	c = load_ok("listen = { unix = \"/run/a.sock\"; };\ntls = { psk = \"/etc/k.psk\"; };\n");
	CU_ASSERT_EQUAL(c->listen_unix_tls[0], CW_NBD_TLS_OFF);
	CU_ASSERT_STRING_EQUAL(c->tls.psk, "/etc/k.psk");
	cwd_config_free(c);

	load_bad("listen = { tcp = ( { address = \"192.0.2.1\"; tls = \"on\"; } ); };\n"
		 "tls = { psk = \"/k\"; };\n",
		 "1: listen.tcp[0].address = \"192.0.2.1\" is not a loopback address, and NBD on it "
		 "would be readable and writable by anyone on the network; expected 127.0.0.1, "
		 "::1 or localhost, tls = \"require\", or insecure = true in listen");
	load_bad("listen = { unix = \"/run/a.sock\"; tls = \"require\"; };\n",
		 "1: listen offers TLS but there are no credentials; expected tls = { certificates "
		 "= \"/etc/...\"; } or tls = { psk = \"/etc/...\"; }");
	load_bad("listen = { unix = \"/a\"; tls = \"yes\"; };\n",
		 "1: listen.tls = \"yes\" is not a TLS mode; expected \"off\", \"on\" or \"require\"");
	load_bad("listen = { unix = ( { tls = \"on\"; } ); };\n",
		 "1: listen.unix[0] has no path; expected { path = \"...\"; tls = \"...\"; }");
	load_bad("listen = { tcp = ( { address = \"::1\"; port = 1; } ); };\n",
		 "1: unknown setting \"port\" in listen.tcp[0]; expected address or tls");
	load_bad("tls = { certificates = \"/p\"; psk = \"/k\"; };\n",
		 "1: tls names certificates and psk; expected one of the two");
	load_bad("tls = { psk = \"/k\"; verify_peer = true; };\n",
		 "1: tls asks for clients' certificates with psk; expected certificates = \"...\" "
		 "with verify_peer = true, or psk alone");
	load_bad("tls = { certificates = \"pki\"; };\n",
		 "1: tls.certificates = \"pki\" is not an absolute path; expected a path starting "
		 "with /");
}

static void test_bad_listen(void)
{
	load_bad("listen = {\n  tcp = [ \"127.0.0.1:10809\",\n          \"192.168.1.2:10809\" ];\n};\n",
		 "3: listen.tcp[1] = \"192.168.1.2:10809\" is not a loopback address, and NBD on it "
		 "would be readable and writable by anyone on the network; expected 127.0.0.1, "
		 "::1 or localhost, tls = \"require\", or insecure = true in listen");
	load_bad("listen = { tcp = \"example.com:10809\"; insecure = false; };\n",
		 "1: listen.tcp = \"example.com:10809\" is not a loopback address, and NBD on it "
		 "would be readable and writable by anyone on the network; expected 127.0.0.1, "
		 "::1 or localhost, tls = \"require\", or insecure = true in listen");
	/* The old switch does not quietly mean the new one. */
	load_bad("listen = { tcp = \"0.0.0.0\";\n allow_remote = true; };\n",
		 "2: listen.allow_remote is no longer a setting: NBD on TCP beyond loopback is "
		 "readable and writable by anyone on the network; expected insecure = true in "
		 "listen if that is meant");
	load_bad("listen = { unix = \"/a\"; unix_mode = \"0668\"; };\n",
		 "1: listen.unix_mode = \"0668\" is not a file mode; expected octal digits from "
		 "\"0001\" to \"0777\" such as \"0660\"");
	load_bad("listen = { unix = \"/a\"; unix_mode = 660; };\n",
		 "1: listen.unix_mode is an integer; expected an octal mode in quotes such as \"0660\"");
	load_bad("listen = { unix = \"/a\"; unix_group = \"a b\"; };\n",
		 "1: listen.unix_group = \"a b\" is not a valid name; expected a group name or "
		 "number in quotes");
	load_bad("listen = { tcp = [ \"127.0.0.1:0\" ]; };\n",
		 "1: listen.tcp[0] = \"127.0.0.1:0\" has no valid port; expected a port from 1 to 65535");
	load_bad("listen = { tcp = [ \"127.0.0.1:65536\" ]; };\n",
		 "1: listen.tcp[0] = \"127.0.0.1:65536\" has no valid port; expected a port from 1 to 65535");
	load_bad("listen = { tcp = [ \"127.0.0.1:\" ]; };\n",
		 "1: listen.tcp[0] = \"127.0.0.1:\" has no valid port; expected a port from 1 to 65535");
	load_bad("listen = { tcp = [ \"[::1\" ]; };\n",
		 "1: listen.tcp[0] = \"[::1\" is not a TCP address; expected HOST:PORT, [IPV6]:PORT or HOST "
		 "(port 10809)");
	load_bad("listen = { tcp = [ \"::1::2::3\" ]; };\n",
		 "1: listen.tcp[0] = \"::1::2::3\" is not a TCP address; expected HOST:PORT, [IPV6]:PORT or HOST "
		 "(port 10809)");
	load_bad("listen = {\n  unix = [ ];\n  tcp = [ ];\n};\n",
		 "1: listen has no address; expected at least one unix path or tcp address");
	load_bad("listen = { tcp = [ 1 ]; };\n",
		 "1: listen.tcp[0] is an integer; expected an array of TCP addresses [ \"127.0.0.1:10809\", "
		 "... ], or a list of them and groups { address = \"...\"; tls = \"require\"; }");
	load_bad("listen = { unix = 5; };\n",
		 "1: listen.unix is an integer; expected an array of absolute paths [ \"/run/...\", ... ], "
		 "or a list of them and groups { path = \"/run/...\"; tls = \"on\"; }");
	load_bad("listen = { udp = [ ]; };\n",
		 "1: unknown setting \"udp\" in listen; expected unix, unix_mode, unix_owner, "
		 "unix_group, tcp, tls or insecure");
	load_bad("listen = { insecure = \"yes\"; };\n",
		 "1: listen.insecure is a string; expected true or false");
	load_bad("listen = { tcp = [ \"1\", \"2\", \"3\", \"4\", \"5\", \"6\", \"7\", \"8\", \"9\", \"10\", \"11\","
		 " \"12\", \"13\", \"14\", \"15\", \"16\", \"17\" ]; };\n",
		 "1: listen.tcp has 17 entries; expected at most 16");
	/* Unix and TCP together: the server holds 16 listeners. */
	load_bad("listen = {\n unix = [ \"/a1\", \"/a2\", \"/a3\", \"/a4\", \"/a5\", \"/a6\", \"/a7\","
		 " \"/a8\", \"/a9\" ];\n"
		 " tcp = [ \"127.0.0.1:1\", \"127.0.0.1:2\", \"127.0.0.1:3\", \"127.0.0.1:4\","
		 " \"127.0.0.1:5\", \"127.0.0.1:6\", \"127.0.0.1:7\", \"127.0.0.1:8\" ]; };\n",
		 "3: listen.tcp[7] is one listener too many; expected at most 16 listeners, unix "
		 "and tcp together");
}

static void count_warning(void *userdata, const char *msg)
{
	(*(unsigned *)userdata)++;
	printf("\n(expected) %s", msg);
}

/* Access lists: parsed as written, checked for names nobody can have,
 * and resolved to ids with unknown names left out and warned of. */
static void test_access(void)
{
	struct cwd_config *c = load_ok(
		"access = {\n"
		"  read_write = [ \"root\", \"@0\" ];\n"
		"  read_only = [ \"*\", \"1234\", \"@no-such-group-here\", \"no-such-user-here\" ];\n"
		"  exports = ( { name = \"media\"; read_only = [ \"@root\" ]; },\n"
		"              { name = \"vm\"; } );\n"
		"};\n");
	struct nbdsrv_access *rules = NULL;
	struct nbdsrv_unix_perm perm;
	unsigned warnings = 0;
	size_t n = 0;

	CU_ASSERT_EQUAL_FATAL(c->n_access, 3);
	CU_ASSERT_EQUAL(c->access[0].n_read_write, 2);
	CU_ASSERT_EQUAL(c->access[0].n_read_only, 4);
	CU_ASSERT_STRING_EQUAL(c->access[1].export, "media");
	CU_ASSERT_EQUAL(c->access[1].n_read_write, 0);
	CU_ASSERT_EQUAL(c->access[2].n_read_only, 0);
	CU_ASSERT_EQUAL_FATAL(cwd_config_access(c, count_warning, &warnings, &rules, &n), 0);
	CU_ASSERT_EQUAL_FATAL(n, 3);
	CU_ASSERT_EQUAL(warnings, 2);
	CU_ASSERT_PTR_NULL(rules[0].export);
	CU_ASSERT_EQUAL_FATAL(rules[0].n_read_write, 2);
	CU_ASSERT_EQUAL(rules[0].read_write[0].kind, NBDSRV_USER);
	CU_ASSERT_EQUAL(rules[0].read_write[0].id, 0);
	CU_ASSERT_EQUAL(rules[0].read_write[1].kind, NBDSRV_GROUP);
	CU_ASSERT_EQUAL_FATAL(rules[0].n_read_only, 2);
	CU_ASSERT_EQUAL(rules[0].read_only[0].kind, NBDSRV_ANYONE);
	CU_ASSERT_EQUAL(rules[0].read_only[1].kind, NBDSRV_USER);
	CU_ASSERT_EQUAL(rules[0].read_only[1].id, 1234);
	CU_ASSERT_STRING_EQUAL(rules[1].export, "media");
	CU_ASSERT_EQUAL(rules[1].n_read_only, 1);
	CU_ASSERT_EQUAL(rules[2].n_read_only + rules[2].n_read_write, 0);
	cwd_config_access_free(rules, n);

	warnings = 0;
	cwd_config_unix_perm(c, count_warning, &warnings, &perm);
	CU_ASSERT_EQUAL(perm.mode, 0660);
	CU_ASSERT_EQUAL(perm.owner, (uid_t)-1);
	cwd_config_free(c);
	c = load_ok("listen = { unix = \"/x\"; unix_owner = \"no-such-user-here\"; unix_group = \"0\"; };\n");
	warnings = 0;
	cwd_config_unix_perm(c, count_warning, &warnings, &perm);
	CU_ASSERT_EQUAL(perm.owner, (uid_t)-1);
	CU_ASSERT_EQUAL(perm.group, 0);
	CU_ASSERT_EQUAL(warnings, 1);
	cwd_config_free(c);

	load_bad("access = { read_write = [ \"@\" ]; };\n",
		 "1: access.read_write[0] = \"@\" names nobody; expected \"*\", a user or \"@group\" "
		 "(a name or a number)");
	load_bad("access = { read_only = \"*\"; };\n",
		 "1: access.read_only is a string; expected an array [ \"*\", a user or \"@group\" "
		 "(a name or a number), ... ]");
	load_bad("access = { exports = ( { read_only = [ ]; } ); };\n",
		 "1: access.exports[0] has no name; expected name = \"PARTITION\" in every entry");
	load_bad("access = { exports = ( { name = \"a\"; },\n { name = \"a\"; } ); };\n",
		 "2: export \"a\" has two access entries (also at line 1); expected one");
	load_bad("access = { exports = ( { name = \"a\"; write = [ ]; } ); };\n",
		 "1: unknown setting \"write\" in access.exports[0]; expected name, read_write or "
		 "read_only");
}

/* exports.qos: each export's reservation, weight and limit, as cwctl
 * export qos takes them; bad values named with their line. */
static void test_qos(void)
{
	struct cwd_config *c = load_ok("# defaults\n");

	CU_ASSERT_EQUAL(c->exports.n_qos, 0);
	cwd_config_free(c);
	c = load_ok("exports = { qos = (\n"
		    "  { name = \"media\"; reserve = \"20MB/s\"; weight = 2; limit = \"100MB/s\"; },\n"
		    "  { name = \"backup\"; limit = \"300iops\"; },\n"
		    "  { name = \"scratch\"; weight = 5; reserve = 1000000; }\n); };\n");
	CU_ASSERT_EQUAL_FATAL(c->exports.n_qos, 3);
	CU_ASSERT_STRING_EQUAL(c->exports.qos[0].export, "media");
	CU_ASSERT_EQUAL(c->exports.qos[0].qos.reserve, 20000000);
	CU_ASSERT_FALSE(c->exports.qos[0].qos.reserve_iops);
	CU_ASSERT_EQUAL(c->exports.qos[0].qos.weight, 2);
	CU_ASSERT_EQUAL(c->exports.qos[0].qos.limit, 100000000);
	CU_ASSERT_EQUAL(c->exports.qos[0].line, 2);
	CU_ASSERT_EQUAL(c->exports.qos[1].qos.limit, 300);
	CU_ASSERT_TRUE(c->exports.qos[1].qos.limit_iops);
	CU_ASSERT_EQUAL(c->exports.qos[1].qos.weight, 0);	/* 1 when admitted */
	CU_ASSERT_EQUAL(c->exports.qos[2].qos.reserve, 1000000);
	CU_ASSERT_EQUAL(c->exports.qos[2].line, 4);
	cwd_config_free(c);

	load_bad("exports = { qos = (\n { name = \"a\"; weight = 0; } ); };\n",
		 "2: exports.qos[0].weight = 0 is out of range; expected an integer from 1 to 10000");
	load_bad("exports = { qos = (\n { name = \"a\"; reserve = \"2MB/s\";\n"
		 " limit = \"1MB/s\"; } ); };\n",
		 "2: exports.qos[0] (export a): the limit is below the reservation; expected a "
		 "limit of at least the reservation");
	load_bad("exports = { qos = (\n\n { name = \"a\"; reserve = \"fast\"; } ); };\n",
		 "3: exports.qos[0].reserve = \"fast\" is not a rate; expected a rate such as "
		 "20MB/s or 8M (bytes per second) or 200iops (requests per second), more than 0");
	load_bad("exports = { qos = ( { weight = 3; } ); };\n",
		 "1: exports.qos[0] has no name; expected name = \"EXPORT\" in every entry");
	load_bad("exports = { qos = ( { name = \"a\"; } ); };\n",
		 "1: exports.qos[0] (export a) sets nothing; expected reserve, weight or limit");
	load_bad("exports = { qos = ( { name = \"a\"; weight = 2; },\n { name = \"a\"; "
		 "weight = 3; } ); };\n",
		 "2: export \"a\" has two QoS entries (also at line 1); expected one");
	load_bad("exports = { qos = ( { name = \"a\"; share = 3; } ); };\n",
		 "1: unknown setting \"share\" in exports.qos[0]; expected name, reserve, weight or "
		 "limit");
	load_bad("exports = { qos = ( { name = \"a\"; limit = 0; } ); };\n",
		 "1: exports.qos[0].limit = 0 is out of range; expected an integer from 1 to "
		 "9223372036854775807");
}

static void test_limits(void)
{
	struct cwd_config *c = load_ok("# defaults\n");

	CU_ASSERT_EQUAL(c->limits.connections, 64);
	CU_ASSERT_EQUAL(c->limits.connections_per_user, 32);
	CU_ASSERT_EQUAL(c->limits.handshake_timeout_s, 10);
	CU_ASSERT_EQUAL(c->limits.idle_timeout_s, 0);
	CU_ASSERT_EQUAL(c->limits.stall_timeout_s, 30);
	CU_ASSERT_EQUAL(c->limits.reply_memory_bytes, UINT64_C(256) << 20);
	cwd_config_free(c);
	c = load_ok("limits = { connections = 10; idle_timeout_s = 600; handshake_timeout_s = 3;"
		    " reply_memory_bytes = 1048576; stall_timeout_s = 5; };\n");
	CU_ASSERT_EQUAL(c->limits.stall_timeout_s, 5);
	CU_ASSERT_EQUAL(c->limits.connections, 10);
	CU_ASSERT_EQUAL(c->limits.connections_per_user, 5);	/* half, by default */
	CU_ASSERT_EQUAL(c->limits.idle_timeout_s, 600);
	CU_ASSERT_EQUAL(c->limits.handshake_timeout_s, 3);
	CU_ASSERT_EQUAL(c->limits.reply_memory_bytes, 1u << 20);
	cwd_config_free(c);
	c = load_ok("limits = { connections_per_user = 64; };\n");
	CU_ASSERT_EQUAL(c->limits.connections_per_user, 64);
	cwd_config_free(c);

	load_bad("limits = { connections = 4;\n connections_per_user = 5; };\n",
		 "2: limits.connections_per_user (5) is more than limits.connections (4); "
		 "expected at most as many");
	load_bad("limits = { connections = 0; };\n",
		 "1: limits.connections = 0 is out of range; expected an integer from 1 to 4096");
	load_bad("limits = { handshake_timeout_s = 0; };\n",
		 "1: limits.handshake_timeout_s = 0 is out of range; expected an integer from 1 to 3600");
	load_bad("limits = { reply_memory_bytes = 1000; };\n",
		 "1: limits.reply_memory_bytes = 1000 is out of range; expected an integer from "
		 "1048576 to 68719476736");
	load_bad("limits = { idle = 5; };\n",
		 "1: unknown setting \"idle\" in limits; expected connections, connections_per_user, "
		 "handshake_timeout_s, idle_timeout_s, stall_timeout_s or reply_memory_bytes");
}

/* An error inside an @include'd file names that file and its line. */
static void test_include(void)
{
	char inc[512], text[1024], path[512], want[1024];

	write_file("\nqueue_depth = 8;\n\nio_engine = \"posix\";\n", inc, sizeof(inc));
	snprintf(text, sizeof(text), "pool = \"/p.db\";\n@include \"%s\"\n", inc);
	write_file(text, path, sizeof(path));
	snprintf(want, sizeof(want), "%s:4: io_engine = \"posix\" is not an I/O engine; expected "
		 "\"io_uring\" or \"libaio\"", inc);
	load_fails(path, -EINVAL, want);

	/* A missing include is a syntax error at the @include line.  (libconfig
	 * 1.5 would prefix an include directory even to absolute paths, so
	 * none is set: includes are best given as absolute paths.) */
	snprintf(text, sizeof(text), "pool = \"/p.db\";\n\n@include \"%s/nowhere.conf\"\n", tmpdir);
	write_file(text, path, sizeof(path));
	snprintf(want, sizeof(want), "%s:3: cannot open include file; expected libconfig syntax "
		 "(name = value; see clockwised.conf(5))", path);
	load_fails(path, -EINVAL, want);
}

static void test_missing(void)
{
	struct cwd_config *c = NULL;
	char path[512], want[600], *err = NULL;

	snprintf(path, sizeof(path), "%s/does-not-exist.conf", tmpdir);
	snprintf(want, sizeof(want), "%s: No such file or directory", path);
	load_fails(path, -ENOENT, want);
	CU_ASSERT_EQUAL(cwd_config_load(path, &c, NULL), -ENOENT);	/* no message wanted */
	CU_ASSERT_PTR_NULL(c);
	CU_ASSERT_EQUAL(cwd_config_parse("queue_depth = 0;", "mem", &c, &err), -EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "mem:1: queue_depth = 0 is out of range; expected an integer from 1 to 4096");
	free(err);
	CU_ASSERT_EQUAL(cwd_config_parse(NULL, "mem", &c, &err), -EINVAL);
}

/* clockwised -r: the range in cwctl's forms; the older OFFSET:LENGTH
 * form is refused with the same reservation written the new way, never
 * read as other bytes. */
static void test_start_resv(void)
{
	static const struct {
		const char *spec;
		uint64_t start, end;
		int64_t from, to;
	} ok[] = {
		{ "media:8M:1M", 0, 0, 0, 0 },
		{ "media:8M:1M,range=1G:3G", UINT64_C(1) << 30, UINT64_C(3) << 30, 0, 0 },
		{ "media:8M:1M,range=1G+2G", UINT64_C(1) << 30, UINT64_C(3) << 30, 0, 0 },
		{ "media:8M:1M,range=1G:", UINT64_C(1) << 30, 0, 0, 0 },
		{ "media:8M:1M,span=1h:2h", 0, 0, 3600, 7200 },
		{ "media:8M:1M,span=30:,range=:8M", 0, 8 << 20, 30, 0 },
	};
	static const struct {
		const char *spec, *msg;
	} bad[] = {
		{ "vol:1M:64k:1G:2G", "reservation \"vol:1M:64k:1G:2G\": OFFSET:LENGTH after the "
		  "block size is no longer taken (cwctl's --range START:END would read other bytes "
		  "there); expected EXPORT:BANDWIDTH:BLOCK[,range=START:END|START+LENGTH]"
		  "[,span=START_S:END_S], here vol:1M:64k,range=1G+2G" },
		{ "vol:1M:64k:1G:0:3600:7200", "reservation \"vol:1M:64k:1G:0:3600:7200\": "
		  "OFFSET:LENGTH after the block size is no longer taken (cwctl's --range START:END "
		  "would read other bytes there); expected EXPORT:BANDWIDTH:BLOCK[,range=START:END|"
		  "START+LENGTH][,span=START_S:END_S], here vol:1M:64k,range=1G:,span=3600:7200" },
		{ "vol:1M:64k,range=2G:1G", "reservation \"vol:1M:64k,range=2G:1G\": range \"2G:1G\": "
		  "an empty range; expected " CW_UNITS_RANGE_HELP },
		{ "vol:1M:64k,range=1G", "reservation \"vol:1M:64k,range=1G\": range \"1G\": not a "
		  "range; expected " CW_UNITS_RANGE_HELP },
		{ "vol:1M:64k,range=1G:2G,range=0:1G", "reservation \"vol:1M:64k,range=1G:2G,"
		  "range=0:1G\": \"range=0:1G\": expected range=... or span=..., each at most once: "
		  "EXPORT:BANDWIDTH:BLOCK[,range=START:END|START+LENGTH][,span=START_S:END_S]" },
		{ "vol:1M:64k,span=20:10", "reservation \"vol:1M:64k,span=20:10\": the span ends "
		  "before it starts" },
		{ "vol:1M:0", "reservation \"vol:1M:0\": \"0\": expected " CW_UNITS_SIZE_HELP
		  ", more than 0" },
		{ "vol:1M", "reservation \"vol:1M\": expected EXPORT:BANDWIDTH:BLOCK"
		  "[,range=START:END|START+LENGTH][,span=START_S:END_S]" },
	};
	struct cwd_config_resv r;
	char err[1024];

	for (size_t i = 0; i < CW_ARRAY_SIZE(ok); i++) {
		err[0] = '\0';
		CU_ASSERT_EQUAL_FATAL(cwd_config_parse_resv(ok[i].spec, &r, err, sizeof(err)), 0);
		CU_ASSERT_STRING_EQUAL(r.export_name, "media");
		CU_ASSERT_EQUAL(r.rate_bps, 8 << 20);
		CU_ASSERT_EQUAL(r.block_bytes, 1 << 20);
		CU_ASSERT_EQUAL(r.range_start, ok[i].start);
		CU_ASSERT_EQUAL(r.range_end, ok[i].end);
		CU_ASSERT_EQUAL(r.span_start_s, ok[i].from);
		CU_ASSERT_EQUAL(r.span_end_s, ok[i].to);
	}
	for (size_t i = 0; i < CW_ARRAY_SIZE(bad); i++) {
		err[0] = '\0';
		CU_ASSERT_EQUAL(cwd_config_parse_resv(bad[i].spec, &r, err, sizeof(err)), -EINVAL);
		if (strcmp(err, bad[i].msg) != 0)
			printf("\nunexpected: %s\n", err);
		CU_ASSERT_STRING_EQUAL(err, bad[i].msg);
	}
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	size_t n;

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	buf = calloc(1, 1 << 20);
	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	n = fread(buf, 1, (1 << 20) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static const struct key *const all_keys[] = {
	conf_top_keys, conf_listen_keys, conf_export_keys, conf_disk_keys, conf_access_keys,
	conf_access_export_keys, conf_limit_keys, conf_tls_keys, conf_unix_entry_keys,
	conf_tcp_entry_keys, conf_host_keys
};

/* Asserts that text holds every key the parser knows, each as
 * before KEY after; names on stdout those it lacks ("KEY is not ..."). */
static void assert_every_key(const char *text, const char *before, const char *after,
			     const char *lacking)
{
	for (size_t i = 0; i < CW_ARRAY_SIZE(all_keys); i++)
		for (const struct key *k = all_keys[i]; k->name; k++) {
			char pat[64];

			snprintf(pat, sizeof(pat), "%s%s%s", before, k->name, after);
			if (!strstr(text, pat))
				printf("\n%s is not %s\n", k->name, lacking);
			CU_ASSERT_PTR_NOT_NULL(strstr(text, pat));
		}
}

/* The shipped example parses, sets every key to its default, and its
 * commented disk example parses too. */
static void test_example(void)
{
	const char *top = getenv("top_srcdir");
	char path[512], *text, *q;
	struct cwd_config *c, *d = NULL;

	snprintf(path, sizeof(path), "%s/etc/clockwised.conf", top ? top : "..");
	text = slurp(path);
	CU_ASSERT_EQUAL_FATAL(cwd_config_new(&d), 0);
	c = load_ok(text);
	CU_ASSERT_STRING_EQUAL(c->pool, d->pool);
	CU_ASSERT_EQUAL(c->policy, d->policy);
	CU_ASSERT_EQUAL(c->be_order, d->be_order);
	CU_ASSERT_EQUAL(c->io_engine, d->io_engine);
	CU_ASSERT_EQUAL(c->queue_depth, d->queue_depth);
	CU_ASSERT_EQUAL(c->n_listen_unix, d->n_listen_unix);
	CU_ASSERT_STRING_EQUAL(c->listen_unix[0], d->listen_unix[0]);
	CU_ASSERT_EQUAL(c->n_listen_tcp, d->n_listen_tcp);
	CU_ASSERT_EQUAL(c->insecure, d->insecure);
	CU_ASSERT_EQUAL(c->unix_mode, d->unix_mode);
	CU_ASSERT_STRING_EQUAL(c->unix_group, d->unix_group);
	CU_ASSERT_EQUAL_FATAL(c->n_access, d->n_access);
	CU_ASSERT_EQUAL_FATAL(c->access[0].n_read_write, d->access[0].n_read_write);
	CU_ASSERT_STRING_EQUAL(c->access[0].read_write[0], d->access[0].read_write[0]);
	CU_ASSERT_EQUAL_FATAL(c->access[0].n_read_only, d->access[0].n_read_only);
	CU_ASSERT_STRING_EQUAL(c->access[0].read_only[0], d->access[0].read_only[0]);
	CU_ASSERT_EQUAL(memcmp(&c->limits, &d->limits, sizeof(c->limits)), 0);
	CU_ASSERT_STRING_EQUAL(c->control_socket, d->control_socket);
	CU_ASSERT_STRING_EQUAL(c->control_read_group, d->control_read_group);
	CU_ASSERT_STRING_EQUAL(c->control_admin_group, d->control_admin_group);
	CU_ASSERT_EQUAL(c->control_idle_timeout_s, d->control_idle_timeout_s);
	CU_ASSERT_EQUAL(c->log_level, d->log_level);
	CU_ASSERT_EQUAL(memcmp(&c->exports, &d->exports, sizeof(c->exports)), 0);
	CU_ASSERT_EQUAL(c->n_disks, 0);
	cwd_config_free(c);
	cwd_config_free(d);

	/* Every key the parser knows is shown in the example. */
	assert_every_key(text, "", " = ", "in the example");

	/* Uncomment the example disks (and drop the empty list). */
	q = strstr(text, "# --- example disks\n");
	CU_ASSERT_PTR_NOT_NULL_FATAL(q);
	for (q = strchr(q, '\n') + 1; strncmp(q, "# ---", 5) != 0; q = strchr(q, '\n') + 1) {
		CU_ASSERT_FATAL(q[0] == '#' && q[1] == ' ');
		q[0] = q[1] = ' ';
	}
	q = strstr(q, "disks = ( );");
	CU_ASSERT_PTR_NOT_NULL_FATAL(q);
	q[0] = '#';
	c = load_ok(text);
	CU_ASSERT_EQUAL(c->n_disks, 5);
	CU_ASSERT(c->n_disks == 5 && c->disks[4].fault && c->disks[4].fault->cut_write == 100);
	cwd_config_free(c);
	free(text);
}

/* clockwised.conf(5) documents every key and formats without warnings. */
static void test_man_page(void)
{
	const char *top = getenv("top_srcdir");
	char path[512], cmd[700], out[256] = "";
	FILE *f;
	char *text;

	snprintf(path, sizeof(path), "%s/man/clockwised.conf.5", top ? top : "..");
	text = slurp(path);
	assert_every_key(text, ".B ", "\n", "documented");
	free(text);
	snprintf(cmd, sizeof(cmd), "groff -man -ww -z '%s' 2>&1", path);
	f = popen(cmd, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	if (fgets(out, sizeof(out), f))
		printf("\ngroff: %s", out);
	CU_ASSERT_STRING_EQUAL(out, "");
	CU_ASSERT_EQUAL(pclose(f), 0);
}

int main(void)
{
	CU_pSuite s;

	cwtest_tmpdir(tmpdir, sizeof(tmpdir), "cw-conf");
	s = cwtest_suite("conf", NULL, NULL);
	cwtest_add(s, "defaults", test_defaults);
	cwtest_add(s, "every setting", test_full);
	cwtest_add(s, "listen addresses", test_listen);
	cwtest_add(s, "metrics addresses", test_metrics);
	cwtest_add(s, "bad top-level values", test_bad_top);
	cwtest_add(s, "syntax errors", test_syntax);
	cwtest_add(s, "bad exports", test_bad_exports);
	cwtest_add(s, "ublk exports", test_ublk_exports);
	cwtest_add(s, "size units", test_size_units);
	cwtest_add(s, "bad disks", test_bad_disks);
	cwtest_add(s, "bad listen", test_bad_listen);
	cwtest_add(s, "TLS", test_tls);
	cwtest_add(s, "access lists", test_access);
	cwtest_add(s, "limits", test_limits);
	cwtest_add(s, "exports' best-effort QoS", test_qos);
	cwtest_add(s, "errors in included files", test_include);
	cwtest_add(s, "missing file", test_missing);
	cwtest_add(s, "clockwised -r", test_start_resv);
	cwtest_add(s, "shipped example", test_example);
	cwtest_add(s, "man page", test_man_page);
	return cwtest_run_in_tmpdir(tmpdir);
}
