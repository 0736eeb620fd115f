/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwised's configuration: /etc/clockwise/clockwised.conf, in libconfig
 * syntax, documented in clockwised.conf(5).  (The files are conf.[ch] so
 * that "config.h" stays autoconf's for every file in daemon/.)
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

#include <clockwise/types.h>
#include <clockwise/io.h>
#include <clockwise/model.h>

#define CWD_CONFIG_DEFAULT_PATH "/etc/clockwise/clockwised.conf"

#define CWD_DEFAULT_POOL "/var/lib/clockwise/pool.db"
#define CWD_DEFAULT_CONTROL "/run/clockwise/control"
#define CWD_DEFAULT_READ_GROUP "clockwise"
#define CWD_DEFAULT_ADMIN_GROUP "clockwise-admin"
#define CWD_DEFAULT_TCP_HOST "127.0.0.1"
#define CWD_DEFAULT_NBD_PORT 10809

/* Dispatch policy.  The values are those of enum cw_sched_policy in
 * clockwise/sched.h, one for one. */
enum cwd_config_policy {
	CWD_POLICY_DELTA_L = 0,
	CWD_POLICY_EDF = 1,
	CWD_POLICY_LST = 2,
};

struct cwd_config_disk {
	char *path;		/* block device or file */
	char *name;		/* [A-Za-z0-9._-]{1,63} */
	enum cw_tier tier;
	enum cwd_config_policy policy;
	int64_t slot_ns;	/* slot length of the disk's reservation record */
	unsigned lanes;		/* dispatchers; 1 on an HDD */
	char *model;		/* model preset name, or NULL: the pool's calibrated model */
	struct cw_model *emulate;	/* the disk its I/O keeps the time of, or NULL */
	unsigned line;		/* where it is configured, for later messages */
};

struct cwd_config_tcp {
	char *host;		/* numeric address or name; "" or "*": every address */
	uint16_t port;
	bool loopback;
};

struct cwd_config {
	char *file;		/* the file it came from */
	char *pool;		/* pool database (sqlite) */
	enum cwd_config_policy policy;	/* for disks that do not name one */
	enum cw_io_kind io_engine;
	unsigned queue_depth;	/* requests in flight per dispatcher */
	unsigned rt_priority;	/* SCHED_FIFO priority of dispatchers with streams; 0: none */
	unsigned busy_poll_us;	/* a reader polls its socket before sleeping; 0: never */
	char **listen_unix;	/* NBD on unix sockets */
	size_t n_listen_unix;
	struct cwd_config_tcp *listen_tcp;	/* NBD on TCP */
	size_t n_listen_tcp;
	bool allow_remote;
	char *control_socket;
	char *control_read_group;	/* may read through the control socket */
	char *control_admin_group;	/* may also change things */
	int log_level;		/* a syslog priority, LOG_ERR .. LOG_DEBUG */
	struct {
		bool read_only;
		uint32_t block_size;		/* preferred block size */
		uint32_t max_request_bytes;	/* largest READ/WRITE payload */
		bool multi_conn;		/* advertise NBD_FLAG_CAN_MULTI_CONN */
		bool all;			/* export every partition at start */
	} exports;
	struct cwd_config_disk *disks;
	size_t n_disks;
};

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

/* The dispatchers of a disk whose lanes are not configured: one on an
 * HDD; on an SSD one per two CPUs, at most 4 (each lane is a thread, and
 * each connection brings a reader and a writer: more dispatchers than
 * half the CPUs only add wake-ups and context switches between threads
 * that cannot run at once; on 2 CPUs, 4 lanes served 4k reads at half the
 * rate of 1). */
unsigned cwd_config_default_lanes(enum cw_tier tier);
const char *cwd_config_policy_name(enum cwd_config_policy p);
const char *cwd_config_log_level_name(int level);

#endif
