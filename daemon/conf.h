/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwised's configuration: /etc/clockwise/clockwised.conf, in libconfig
 * syntax, documented in clockwised.conf(5).  (The files are conf*.[ch] so
 * that "config.h" stays autoconf's for every file in daemon/.)
 *
 * This header is the configuration as the rest of the daemon sees it: the
 * model (struct cwd_config and its parts, their limits and defaults) and
 * the functions that make and read it, each section naming the file that
 * defines them.  It is beneath every conf*.c: there is no conf.c, the
 * loader is conf-load.c, on top of the groups' parsers (conf-groups.h)
 * and their vocabulary (conf-schema.h).
 *
 * Loading is all or nothing: the first unknown key or bad value stops it
 * with one message of the form
 *     FILE:LINE: <what is wrong>; expected <what>
 * and nothing of the file is used.  Every setting has a default, so an
 * empty file is a valid configuration (with no disks).
 */
#ifndef CWD_CONF_H
#define CWD_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <clockwise/types.h>
#include <clockwise/io.h>
#include <clockwise/fault.h>
#include <clockwise/model.h>
#include <clockwise/pool-objects.h>

#include "daemon/nbd/nbd-server.h"

#define CWD_CONFIG_DEFAULT_PATH "/etc/clockwise/clockwised.conf"

#define CWD_DEFAULT_POOL "/var/lib/clockwise/pool.db"
#define CWD_DEFAULT_CONTROL "/run/clockwise/control"
#define CWD_DEFAULT_READ_GROUP "clockwise"
#define CWD_DEFAULT_ADMIN_GROUP "clockwise-admin"
#define CWD_DEFAULT_NBD_SOCKET "/run/clockwise/nbd.sock"
#define CWD_DEFAULT_NBD_PORT 10809

/* Names of exports and disks: layout's CW_NAME_MAX. */
#define CWD_NAME_MAX_BYTES 63
/* The largest READ/WRITE payload exports.max_request_size allows. */
#define CWD_REQUEST_MAX_BYTES (32u << 20)

/* Dispatch policy.  The values are those of enum cw_sched_policy in
 * clockwise/sched.h, one for one. */
enum cwd_config_policy {
	CWD_POLICY_DELTA_L = 0,
	CWD_POLICY_EDF = 1,
	CWD_POLICY_LST = 2,
	CWD_POLICY_DYNAMIC = 3,
};

/* Order of the best-effort queue (clockwise/sched-beq.h): arrival order,
 * RBFQ shares between exports, or a space-filling curve. */
enum cwd_config_be_order {
	CWD_BE_FIFO = 0,
	CWD_BE_RBFQ = 1,
	CWD_BE_SFC = 2,
};

struct cwd_config_disk {
	char *path;		/* block device or file */
	char *name;		/* [A-Za-z0-9._-]{1,63} */
	enum cw_tier tier;
	enum cwd_config_policy policy;
	enum cwd_config_be_order be_order;
	int64_t slot_ns;	/* slot length of the disk's reservation record */
	unsigned lanes;		/* dispatchers; 1 on an HDD */
	char *model;		/* model preset name, or NULL: the pool's calibrated model */
	struct cw_model *emulate;	/* the disk its I/O keeps the time of, or NULL */
	char *domain;		/* its failure domain, or NULL: as the pool has it */
	/* For tests: faults its I/O suffers (clockwise/fault.h), or NULL */
	struct cw_io_fault_opts *fault;
	unsigned line;		/* where it is configured, for later messages */
};

/* What a listener offers of TLS: enum cw_nbd_tls (off, on, require). */
struct cwd_config_tcp {
	char *host;		/* numeric address or name; "" or "*": every address */
	uint16_t port;
	bool loopback;
	int tls;
};

/* Listeners, unix and TCP together: as many as the server holds. */
#define CWD_LISTEN_MAX NBDSRV_LISTEN_MAX

/* metrics.listen: where the OpenMetrics exposition is served, unix
 * sockets and loopback TCP addresses. */
#define CWD_METRICS_LISTEN_MAX 8
#define CWD_DEFAULT_METRICS_PORT 9477

struct cwd_config_metrics {
	struct sockaddr_storage addr[CWD_METRICS_LISTEN_MAX];
	socklen_t addrlen[CWD_METRICS_LISTEN_MAX];
	size_t n;		/* 0: no metrics (the default) */
};

/* Who may use an export: entries of the access lists are "*" (anyone,
 * TCP clients too), "USER" or "@GROUP" (names or numbers), resolved when
 * the daemon starts (cwd_config_access()). */
struct cwd_config_access {
	char *export;		/* NULL: every export without its own entry */
	char **read_write;
	size_t n_read_write;
	char **read_only;
	size_t n_read_only;
	unsigned line;
};

/* An export's best-effort QoS between exports (exports.qos): as `cwctl
 * export qos` sets it; the pool's stored one, if any, outranks it. */
struct cwd_config_qos {
	char *export;		/* EXPORT, or EXPORT@CLASS: a connection class */
	struct cw_be_qos qos;	/* weight 0: 1 */
	unsigned line;
};

struct cwd_config {
	char *file;		/* the file it came from */
	char *pool;		/* pool database (sqlite) */
	enum cwd_config_policy policy;	/* for disks that do not name one */
	enum cwd_config_be_order be_order;	/* likewise */
	enum cw_io_kind io_engine;
	unsigned queue_depth;	/* requests in flight per dispatcher */
	unsigned mover_depth;	/* blocks the mover copies at once */
	unsigned mover_share;	/* percent of a disk without streams it takes among others */
	/* percent of a surviving disk admission keeps for a rebuild
	 * (cw_admit_state_opts.rebuild_share_ppm) */
	unsigned rebuild_share;
	unsigned rt_priority;	/* SCHED_FIFO priority of dispatchers with streams; 0: none */
	bool lock_memory;	/* mlockall at start (default true) */
	uint64_t rt_cpus;	/* CPUs (bit i: CPU i) of the real-time threads; 0: any */
	unsigned busy_poll_us;	/* a reader polls its socket before sleeping; 0: never */
	unsigned stall_probe_us;	/* the host's stall probes wake this often; 0: none */
	char **listen_unix;	/* NBD on unix sockets */
	int listen_unix_tls[CWD_LISTEN_MAX];	/* what each offers of TLS */
	size_t n_listen_unix;
	struct cwd_config_tcp *listen_tcp;	/* NBD on TCP */
	size_t n_listen_tcp;
	/* NBD unix sockets' permissions, whatever the umask. */
	unsigned unix_mode;
	char *unix_owner;	/* user name or number; NULL: the daemon's */
	char *unix_group;	/* group name or number; NULL: the daemon's */
	/* TCP beyond loopback without TLS required carries every byte in
	 * the clear and admits whoever reaches the port: only with this. */
	bool insecure;
	/* The credentials of listeners that offer TLS: a directory of
	 * certificates or a PSK file (one of the two), and whether a
	 * client must present a certificate the CA signed. */
	struct {
		char *certificates;
		char *psk;
		bool verify_peer;
	} tls;
	/* [0] is the default entry (export NULL), then one per export. */
	struct cwd_config_access *access;
	size_t n_access;
	char *control_socket;
	char *control_read_group;	/* may read through the control socket */
	char *control_admin_group;	/* may also change things */
	unsigned control_idle_timeout_s;	/* a silent control connection is closed; 0: never */
	struct cwd_config_metrics metrics;
	int log_level;		/* a syslog priority, LOG_ERR .. LOG_DEBUG */
	struct {
		bool read_only;
		uint32_t block_size;		/* preferred block size */
		uint32_t max_request_bytes;	/* largest READ/WRITE payload */
		bool multi_conn;		/* advertise NBD_FLAG_CAN_MULTI_CONN */
		bool all;			/* export every partition at start */
		/* activation_mode "partial": a partition with blocks on a
		 * missing disk is served, those blocks failing with EIO;
		 * "complete" (false): it is not served at all. */
		bool partial;
		struct cwd_config_qos *qos;
		size_t n_qos;
		/* Partitions exported at start as ublk block devices
		 * (/dev/ublkbN) rather than over NBD, unless an export of
		 * that name is stored; with their queue depth and largest
		 * request (default 64 and 512 KiB). */
		char **ublk;
		size_t n_ublk;
		unsigned ublk_queue_depth;
		uint32_t ublk_max_request_bytes;
		/* Queues per ublk device, each with its thread and ring
		 * (0: one per CPU online, at most 4). */
		unsigned ublk_queues;
	} exports;
	/* What NBD clients may take of the daemon. */
	struct {
		unsigned connections;		/* served at once */
		unsigned connections_per_user;	/* TCP clients count as one user */
		unsigned handshake_timeout_s;	/* for the whole handshake */
		unsigned idle_timeout_s;	/* 0: never */
		/* A client that takes no replies (or leaves a TLS record
		 * unfinished) this long is closed. */
		unsigned stall_timeout_s;
		uint64_t reply_memory_bytes;	/* payload of all connections */
	} limits;
	/* The host as a resource of admission (clockwise/admit.h, "the
	 * host"): the share of the CPUs given to streams' real-time work and
	 * what a request and a byte cost; a cost of 0 is measured at start. */
	struct {
		uint32_t share_ppm;		/* of the CPUs; default half */
		int64_t request_ns;		/* 0: measured */
		uint64_t copy_rate_bps;		/* bytes a CPU carries a second; 0: measured */
		bool off;			/* no host test */
	} host;
	struct cwd_config_disk *disks;
	size_t n_disks;
};

/* A stream given at start (clockwised -r): the paper's QoS for an export —
 * bandwidth, user block size, the range [range_start, range_end) of its
 * partition (range_end 0: to its end) and the time span [start, end) in
 * seconds after the daemon started (end 0: no end). */
struct cwd_config_resv {
	char export_name[64];		/* CW_NAME_MAX + 1 */
	uint64_t rate_bps, block_bytes, range_start, range_end;
	int64_t span_start_s, span_end_s;
};

/* ---- conf-resv.c: clockwised -r ---- */

/* Parses "EXPORT:RATE:BLOCK[,range=RANGE][,span=START:END]" (clockwise/units.h:
 * RATE a rate, BLOCK a size, RANGE a byte range as cwctl --range takes it,
 * START and END whole seconds).  The older EXPORT:RATE:BLOCK:OFFSET:LENGTH
 * form is refused, its message giving the same reservation in this one.
 * -EINVAL with the reason in err. */
int cwd_config_parse_resv(const char *spec, struct cwd_config_resv *ret, char *err, size_t errlen);

/* ---- conf-load.c: the loader ---- */

/* The defaults, as an empty file gives them. */
int cwd_config_new(struct cwd_config **ret_config);

/* Loads path (NULL: CWD_CONFIG_DEFAULT_PATH).  On failure returns a
 * negative errno (-ENOENT for a missing file, -EINVAL for a bad one) and,
 * when ret_error is not NULL, a message in *ret_error for the caller to
 * print and free. */
int cwd_config_load(const char *path, struct cwd_config **ret_config, char **ret_error);

/* The same from text in memory; name stands for the file in messages. */
int cwd_config_parse(const char *text, const char *name, struct cwd_config **ret_config,
		     char **ret_error);

void cwd_config_free(struct cwd_config *c);	/* NULL-safe */

const char *cwd_config_log_level_name(int level);

/* ---- conf-accounts.c: the names the file gives, resolved at start ---- */

struct nbdsrv_access;
struct nbdsrv_unix_perm;
/* Told about a user or group the configuration names and the system does
 * not know; it is left out. */
typedef void (*cwd_config_warn_fn)(void *userdata, const char *msg);

/* The access lists with names turned into ids, for the NBD server; free
 * with cwd_config_access_free(). */
int cwd_config_access(const struct cwd_config *c, cwd_config_warn_fn warn, void *userdata,
		      struct nbdsrv_access **ret_rules, size_t *ret_n);
void cwd_config_access_free(struct nbdsrv_access *rules, size_t n);

/* The NBD unix sockets' mode, owner and group; an owner or group the
 * system does not know is left as the daemon's, with a warning. */
void cwd_config_unix_perm(const struct cwd_config *c, cwd_config_warn_fn warn, void *userdata,
			  struct nbdsrv_unix_perm *ret_perm);

/* ---- conf-disks.c ---- */

/* The dispatchers of a disk whose lanes are not configured: one on an
 * HDD; on an SSD one per two CPUs, at most 4 (each lane is a thread, and
 * each connection brings a reader and a writer: more dispatchers than
 * half the CPUs only add wake-ups and context switches between threads
 * that cannot run at once; on 2 CPUs, 4 lanes served 4k reads at half the
 * rate of 1). */
unsigned cwd_config_default_lanes(enum cw_tier tier);

/* ---- conf-schema.c: the names the file gives the model's values ---- */

const char *cwd_config_policy_name(enum cwd_config_policy p);
/* "fifo", "rbfq", "sfc": the name cw_sched_beq_by_name() takes. */
const char *cwd_config_be_order_name(enum cwd_config_be_order o);

#endif
